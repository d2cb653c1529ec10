"""Shared helpers of the ``ftrans.scipy.stats`` distributions: argument promotion and constants."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import numpy as jnp
from ftrans.numpy._elementwise import _inexact


def promote(name: str, *args: Any) -> list:
    """JAX's ``promote_args_inexact``: one inexact dtype (integers become the default float), broadcast."""
    return _inexact(name, *args)


def const(x: Any, v: Any) -> Any:
    """A scalar of ``x``'s dtype."""
    return np.asarray(v, dtype=x.dtype)[()]


def nan_where(cond: Any, x: Any) -> Any:
    return jnp.where(cond, const(x, np.nan), x)


def neginf_where(cond: Any, x: Any) -> Any:
    return jnp.where(cond, const(x, -np.inf), x)
