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
from ftrans.core.keys import ExtendedDType, extended, primal_tangent_dtype, prng_key  # noqa: F401  (JAX's scalar classes of the key dtypes)  # noqa: F401  (user-defined extended dtypes: a rules object)
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


def itemsize_bits(dtype: Any) -> int:
    """The number of bits of one element of ``dtype``: 8 for bool, 4 for int4/float4, 2 for int2, ..."""
    if dtype is None:
        from ftrans.errors import FtransValueError

        raise FtransValueError("itemsize_bits: dtype cannot be None")
    d = np.dtype(dtype)
    if d == np.dtype(bool):
        return 8
    if issubdtype(d, np.integer):
        return int(iinfo(d).bits)
    if issubdtype(d, np.floating):
        return int(finfo(d).bits)
    if issubdtype(d, np.complexfloating):
        return 2 * int(finfo(d).bits)
    from ftrans.errors import FtransValueError

    raise FtransValueError(f"itemsize_bits: unexpected input: dtype={d}")


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (``bool``, ``int``, ``float`` or ``complex``) of the values of ``x``."""
    from ftrans.core.operands import dtype_weak

    try:
        d = np.dtype(dtype_weak(x)[0])
    except Exception:
        d = np.asarray(x).dtype
    if d == np.dtype(bool):
        return bool
    if issubdtype(d, np.integer):
        return int
    if issubdtype(d, np.floating):
        return float
    if issubdtype(d, np.complexfloating):
        return complex
    from ftrans.errors import FtransTypeError

    raise FtransTypeError(f"scalar_type_of: invalid scalar value {x!r}")
