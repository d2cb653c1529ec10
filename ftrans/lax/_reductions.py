"""lax sort, cumulative reductions, reductions over axes, arg-reductions and dot_general.

These are thin wrappers that bind one primitive each (``top_k`` binds a few).
Like JAX's ``lax`` they do not promote or broadcast; they do check their operands
with the primitive's own abstract-eval rule even eagerly, so a bad call fails
with the same message whether or not it is being traced.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ftrans.core import dtypes
from ftrans.core.operands import as_operand, aval_of, check_arraylike, shape_of
from ftrans.core.primitive import Primitive, abstract_eval_rules
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.errors import FtransValueError

__all__ = [
    "sort", "sort_key_val", "top_k", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
]


def _bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Check with the abstract-eval rule (eager binds skip it), then bind."""
    ops = [as_operand(a) for a in args]
    abstract_eval_rules[prim](*[aval_of(o) for o in ops], **params)
    return prim.bind(*ops, **params)


def _dimension(name: str, dimension: Any, ndim: int) -> int:
    d = int(dimension)
    if not -ndim <= d < ndim:
        raise FtransValueError(f"{name}: dimension {dimension} is out of bounds for operands of rank {ndim}")
    return d % ndim


# ---------------------------------------------------------------- sorting
def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """``lax.sort``: one array, or a sequence sorted together by its first ``num_keys`` arrays."""
    seq = isinstance(operand, Sequence)
    ops = list(operand) if seq else [operand]
    check_arraylike("sort", *ops)
    if not 1 <= num_keys <= len(ops):
        raise FtransValueError(f"sort: num_keys={num_keys} must be between 1 and len(operand)={len(ops)}")
    nd = len(shape_of(ops[0]))
    dim = _dimension("sort", dimension, nd) if nd else 0
    outs = _bind(So.sort_p, *ops, dimension=dim, is_stable=bool(is_stable), num_keys=int(num_keys))
    return tuple(outs) if seq else outs[0]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """``lax.sort_key_val``: sort ``values`` by ``keys`` along ``dimension``."""
    k, v = sort([keys, values], dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Any, Any]:
    """``lax.top_k``: the ``k`` largest entries along ``axis`` (default the last), largest first
    (NaN counts as largest), and their int32 indices.

    Ties keep the lower index first, as XLA's TopK does: a stable ascending
    sort of the reversed axis, reversed back, orders ties that way.
    """
    check_arraylike("top_k", operand)
    x = as_operand(operand)
    shape = tuple(shape_of(x))
    if not shape:
        raise FtransValueError("top_k: the operand must have at least one dimension")
    ax = operator.index(axis)
    if not -len(shape) <= ax < len(shape):
        raise FtransValueError(f"top_k: axis {axis} is out of bounds for an array of dimension {len(shape)}")
    ax %= len(shape)
    k = int(k)
    n = shape[ax]
    if not 0 <= k <= n:
        raise FtransValueError(
            f"top_k: k argument must be no larger than size along the axis; got k={k} with "
            f"shape={list(shape)} and axis={ax}"
        )
    idx = S.iota_p.bind(dtype=dtypes.int32, shape=shape, dimension=ax)
    xr, ir = S.rev_p.bind(x, dimensions=(ax,)), S.rev_p.bind(idx, dimensions=(ax,))
    vals, perm = So.sort_p.bind(xr, ir, dimension=ax, is_stable=True, num_keys=1)
    vals, perm = S.rev_p.bind(vals, dimensions=(ax,)), S.rev_p.bind(perm, dimensions=(ax,))
    starts, limits = (0,) * len(shape), shape[:ax] + (k,) + shape[ax + 1:]
    take = [S.slice_p.bind(a, start_indices=starts, limit_indices=limits, strides=None) for a in (vals, perm)]
    return take[0], take[1]


# ---------------------------------------------------------------- cumulative reductions
def _cumulative(prim: Primitive):
    def fn(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        check_arraylike(prim.name, operand)
        return _bind(prim, operand, axis=int(axis), reverse=bool(reverse))

    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = (f"``lax.{prim.name}``: the running {prim.name[3:]} along ``axis`` "
                  "(a non-negative axis, as XLA requires); ``reverse`` runs from the end.")
    return fn


cumsum = _cumulative(So.cumsum_p)
cumprod = _cumulative(So.cumprod_p)
cummax = _cumulative(So.cummax_p)
cummin = _cumulative(So.cummin_p)
cumlogsumexp = _cumulative(So.cumlogsumexp_p)
