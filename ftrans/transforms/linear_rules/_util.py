"""Small helpers shared by the transpose-rule modules."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of


def shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.aval.shape) if hasattr(x, "aval") and not hasattr(x, "_value") else tuple(aval_of(x).shape)


def zeros(aval: Any) -> Any:
    """Zeros of ``aval``'s shape and dtype (a broadcast scalar, so staging records one op)."""
    z = Array._new(np.zeros((), aval.dtype), False)
    if not aval.shape:
        return z
    return S.broadcast_in_dim_p.bind(z, shape=tuple(aval.shape), broadcast_dimensions=())


def ct_zeros(aval: Any, ct: Any) -> Any:
    """Zeros of ``aval``'s shape in the cotangent ``ct``'s dtype: what a transpose rule combines with
    ``ct``. A ``custom_vjp`` bwd rule may return a cotangent of another floating dtype than its
    primal (bf16 for an f8 argument, as JAX allows); that dtype then flows on unchanged, as in JAX."""
    c = aval_of(ct)
    # weak when the cotangent is, as JAX's full_like(ct, 0) (a weak select_n result keeps a weak cotangent)
    z = Array._new(np.zeros((), c.dtype), c.weak_type)
    if not aval.shape:
        return z
    return S.broadcast_in_dim_p.bind(z, shape=tuple(aval.shape), broadcast_dimensions=())


def unbroadcast(ct: Any, aval: Any) -> Any:
    """The cotangent of a rank-0 operand that an elementwise primitive broadcast: the sum of ``ct``."""
    ct_shape = tuple(aval_of(ct).shape)
    if tuple(aval.shape) == ct_shape:
        return ct
    return R.reduce_sum_p.bind(ct, axes=tuple(range(len(ct_shape))))
