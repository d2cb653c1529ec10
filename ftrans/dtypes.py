"""``ftrans.dtypes``: JAX's ``jax.dtypes`` names over ftrans's dtype machinery."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.dtypes import (  # noqa: F401
    bfloat16,
    canonicalize,
    finfo,
    iinfo,
    issubdtype,
    promote_types,
)
from ftrans.core.operands import result_type  # noqa: F401
from ftrans.errors import TypePromotionError  # noqa: F401
from ftrans.transforms.ad import float0  # noqa: F401  (the tangent dtype of integer/bool values, JAX's)


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """The dtype an array of ``dtype`` gets under the current x64 setting."""
    return canonicalize(dtype)


def is_weakly_typed(x: Any) -> bool:
    if type(x) in (int, float, complex):
        return True
    return bool(getattr(x, "weak_type", False))
