"""Sort (multi-operand) and cumulative-reduction primitives.

``sort`` follows XLA's variadic sort as jax drives it: every operand has one
shape, the first ``num_keys`` operands are compared lexicographically and all
operands are permuted together.  Floating keys are compared after jax's
canonicalisation (``-0.0`` equals ``+0.0`` and every NaN equals every other
NaN and sorts after ``+inf``), so a stable sort keeps the input order among
such ties exactly as jax does.  Complex keys compare by real part, then
imaginary part.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive, first_weak
from ftrans.core.prims._base import (
    ANY,
    FLOAT,
    NUM,
    class_name,
    prim_type_error,
    prim_value_error,
    standard_primitive,
)
from ftrans.core.prims.reductions import SUM_ACCUMULATOR
from ftrans.core.shape_poly import DimExpr

# ---------------------------------------------------------------- sort


def _check_dimension(name: str, dimension: Any, ndim: int) -> int:
    if not isinstance(dimension, (int, np.integer)) or isinstance(dimension, bool) or not 0 <= dimension < ndim:
        raise prim_value_error(
            name,
            f"dimension {dimension} is out of range for operands of rank {ndim} "
            f"(it must be a non-negative axis; the lax/numpy wrappers accept negative ones)",
        )
    return int(dimension)


def _sort_abstract(*avals: ShapedArray, dimension: int, is_stable: bool, num_keys: int) -> list[ShapedArray]:
    if not avals:
        raise prim_value_error("sort", "needs at least one operand")
    shape = avals[0].shape
    if any(a.shape != shape for a in avals):
        raise prim_type_error("sort", avals, "all operands must have the same shape")
    if not shape:
        raise prim_type_error("sort", avals, "operands must have rank >= 1")
    _check_dimension("sort", dimension, len(shape))
    if not isinstance(num_keys, (int, np.integer)) or not 1 <= num_keys <= len(avals):
        raise prim_value_error("sort", f"num_keys={num_keys} must be between 1 and the number of operands ({len(avals)})")
    for a in avals:
        if a.dtype not in ANY:
            raise prim_type_error("sort", avals, f"unsupported dtype {a.dtype}")
    return [ShapedArray(a.shape, a.dtype, a.weak_type) for a in avals]


def _float_keys(x: np.ndarray) -> list[np.ndarray]:
    """Sub-keys, least significant first, that order floats as jax's sort does."""
    if x.dtype in (dtypes.bfloat16, dtypes.float16):
        x = x.astype(np.float32)
    nan = np.isnan(x)
    # +0.0 in place of -0.0 and of NaN: ties among zeros and among NaNs stay in input order.
    value = np.where(nan | (x == 0), np.zeros((), x.dtype), x)
    return [value, nan]


def sort_keys(x: np.ndarray) -> list[np.ndarray]:
    """``np.lexsort`` keys (least significant first) for one operand under jax's order."""
    if x.dtype.kind == "c":
        return _float_keys(x.imag) + _float_keys(x.real)
    if dtypes.is_float(x.dtype):
        return _float_keys(x)
    if x.dtype == np.bool_:
        return [x.astype(np.uint8)]
    return [x]


def sort_permutation(keys: list[np.ndarray], dimension: int) -> np.ndarray:
    """The stable permutation (along ``dimension``) that sorts by ``keys`` lexicographically."""
    sub: list[np.ndarray] = []
    for k in reversed(keys):
        sub.extend(sort_keys(k))
    if len(sub) == 1:
        return np.argsort(sub[0], axis=dimension, kind="stable")
    return np.lexsort(sub, axis=dimension)


def _sort_impl(*xs: np.ndarray, dimension: int, is_stable: bool, num_keys: int) -> list[np.ndarray]:
    perm = sort_permutation(list(xs[:num_keys]), dimension)
    return [np.take_along_axis(x, perm, axis=dimension) for x in xs]


sort_p = Primitive("sort", multiple_results=True)
sort_p.def_abstract_eval(_sort_abstract)
sort_p.def_impl(_sort_impl)


# ---------------------------------------------------------------- top_k


def _top_k_abstract(x: ShapedArray, *, k: int, axis: int) -> list[ShapedArray]:
    if x.dtype not in ANY or x.dtype.kind == "c":
        raise prim_value_error("top_k", f"is not compatible with {x.dtype} inputs (complex numbers have no order)"
                               if x.dtype.kind == "c" else f"unsupported dtype {x.dtype}")
    if not x.shape:
        raise prim_type_error("top_k", [x], "the operand must have rank >= 1")
    axis = _check_dimension("top_k", axis, x.ndim)
    if (not isinstance(k, (int, np.integer, DimExpr)) or isinstance(k, bool)
            or not (0 <= k if isinstance(k, (int, np.integer)) else True) or not k <= x.shape[axis]):
        raise prim_value_error("top_k", f"k argument must be no larger than size along the axis; got k={k} with "
                                        f"shape={list(x.shape)} and axis={axis}")
    shape = tuple(x.shape[:axis]) + (k if isinstance(k, DimExpr) else int(k),) + tuple(x.shape[axis + 1:])
    # Both as weakly typed as the operand, as JAX's (its indices' aval is the operand's, updated).
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.dtype(np.int32), x.weak_type)]


def _total_order_key(x: np.ndarray) -> np.ndarray:
    """Integers ordered as XLA's total order orders ``x`` (-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < NaN)."""
    if dtypes.is_float(x.dtype):
        if x.dtype != np.float64:
            x = x.astype(np.float32)  # every narrower float (and its NaNs' signs) is exact in float32
        bits = x.view(np.int64 if x.dtype == np.float64 else np.int32)
        return np.where(bits < 0, bits ^ np.iinfo(bits.dtype).max, bits)
    if x.dtype == np.bool_:
        return x.astype(np.uint8)
    return x


def _top_k_impl(x: np.ndarray, *, k: int, axis: int) -> list[np.ndarray]:
    # The k largest in descending total order, ties (equal bits) lower index first, as XLA's TopK.
    perm = np.argsort(~_total_order_key(x), axis=axis, kind="stable")
    perm = np.take(perm, np.arange(k), axis=axis)
    return [np.take_along_axis(x, perm, axis=axis), perm.astype(np.int32)]


top_k_p = Primitive("top_k", multiple_results=True)
top_k_p.def_abstract_eval(_top_k_abstract)
top_k_p.def_impl(_top_k_impl)
top_k_p.def_weak_type(lambda weaks, **params: (weaks[0], weaks[0]))


# ---------------------------------------------------------------- cumulative reductions


def _cumulative_shape(name: str, allowed: frozenset):
    def rule(x: ShapedArray, *, axis: int, reverse: bool) -> tuple[int, ...]:
        if x.dtype not in allowed:
            raise prim_type_error(name, [x], f"expects {class_name(allowed)} operands")
        if not x.shape:
            raise prim_type_error(name, [x], "the operand must have rank >= 1")
        _check_dimension(name, axis, x.ndim)
        if not isinstance(reverse, (bool, np.bool_)):
            raise prim_value_error(name, f"reverse must be a bool, got {reverse!r}")
        return x.shape

    return rule


def _wide(x: np.ndarray) -> np.ndarray:
    """Half-precision floats accumulate in float32 (the result is rounded back once)."""
    return x.astype(np.float32) if x.dtype in (dtypes.bfloat16, dtypes.float16) else x


def _cumulative_impl(accumulate):
    def impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        v = np.flip(x, axis) if reverse else x
        with np.errstate(all="ignore"):
            out = accumulate(_wide(v), axis)
        out = np.asarray(out).astype(x.dtype, copy=False)
        return np.flip(out, axis) if reverse else out

    return impl


def _cumsum(v: np.ndarray, axis: int) -> np.ndarray:
    # A running sum in float64 (for float32 and narrower; see reductions.SUM_ACCUMULATOR): NumPy's
    # cumsum is sequential, XLA's a tree, so float32 accumulation drifted by 1e-6 relative.
    return np.cumsum(v, axis=axis, dtype=SUM_ACCUMULATOR.get(v.dtype, v.dtype))


def _cumprod(v: np.ndarray, axis: int) -> np.ndarray:
    return np.cumprod(v, axis=axis, dtype=v.dtype)


def _cummax(v: np.ndarray, axis: int) -> np.ndarray:
    return np.maximum.accumulate(v, axis=axis)


def _cummin(v: np.ndarray, axis: int) -> np.ndarray:
    return np.minimum.accumulate(v, axis=axis)


def _cumlogsumexp(v: np.ndarray, axis: int) -> np.ndarray:
    return np.logaddexp.accumulate(v, axis=axis)


def _cumulative(name: str, allowed: frozenset, accumulate) -> Primitive:
    return standard_primitive(
        name, _cumulative_shape(name, allowed), lambda x, **p: x.dtype, _cumulative_impl(accumulate),
        weak_type_rule=first_weak,
    )


cumsum_p = _cumulative("cumsum", NUM, _cumsum)
cumprod_p = _cumulative("cumprod", NUM, _cumprod)
cummax_p = _cumulative("cummax", NUM, _cummax)
cummin_p = _cumulative("cummin", NUM, _cummin)
cumlogsumexp_p = _cumulative("cumlogsumexp", FLOAT, _cumlogsumexp)


def _sort_weak(weaks: tuple[bool, ...], **params: Any) -> tuple[bool, ...]:
    """Each output keeps its own operand's weak type (eager_apply accepts one flag per result)."""
    return tuple(weaks)


sort_p.def_weak_type(_sort_weak)

__all__ = [n for n in dir() if n.endswith("_p")]


# ----------------------------------------------------------------------------
# Sharding rules (values with sharding types over Explicit mesh axes: core/sharding_rules.py)

from ftrans.core import sharding_rules as _sr  # noqa: E402

for _p in (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
    _p.sharding_rule = _sr.cumulative
del _p
sort_p.sharding_rule = _sr.sort
top_k_p.sharding_rule = _sr.top_k
