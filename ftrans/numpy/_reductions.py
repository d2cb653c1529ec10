"""Reductions: sum, prod, mean, var, max, argmax, any, all, cumulative sums, ...

Every function follows the dtype rules of JAX's ``numpy``: small integers and bools
sum in the default integer type, means and variances of integers are floats,
half-precision floats are accumulated in float32 and rounded once, and every
result is strongly typed (a reduction of a Python scalar is a normal array).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.eager_programs import replayed
from ftrans.core.operands import (
    as_operand,
    broadcast_to_shape,
    canonicalize_axes,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    dtype_weak,
    shape_of,
)
from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.core.prims._base import quiet
from ftrans.core.shape_poly import DimExpr
from ftrans.core.trace import can_shortcut, debug_checks_on, outputs_checked
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = [
    "sum", "prod", "max", "min", "amax", "amin", "all", "any", "mean", "var", "std", "ptp",
    "argmax", "argmin", "count_nonzero", "cumsum", "cumprod", "nancumsum", "nancumprod",
    "cumulative_sum", "cumulative_prod", "median", "average", "nansum", "nanprod", "nanmax",
    "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin",
]

_sum_builtin = builtins.sum


# ---------------------------------------------------------------- helpers
def const(value: Any, dtype: np.dtype) -> Array:
    """A strongly typed rank-0 constant of ``dtype``, saturating infinities for integers."""
    if dtype == np.bool_:
        return Array._new(np.asarray(bool(value > 0) if not isinstance(value, bool) else value), False)
    if dtypes.is_int(dtype) and isinstance(value, float) and not np.isfinite(value):
        info = np.iinfo(dtype)
        value = info.max if value > 0 else info.min
    with np.errstate(all="ignore"):
        return Array._new(np.asarray(value).astype(dtype), False)


def to_dtype(x: Any, dtype: np.dtype) -> Any:
    """``x`` as a strongly typed array of ``dtype`` (a no-op when it already is one)."""
    d, w = dtype_weak(x)
    if d == dtype and not w:
        return x
    return S.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=False)


def _operand(name: str, a: Any) -> Any:
    check_arraylike(name, a)
    return as_operand(a)


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"{name}: the out argument is not supported (ftrans arrays are immutable)")


def _axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    axis = concrete_or_error(axis, f"{name}: the axis argument") if axis is not None else None
    if isinstance(axis, np.ndarray):
        axis = axis.tolist()
    return canonicalize_axes(name, axis, ndim)


def _keepdims(x: Any, axes: tuple[int, ...], in_shape: tuple[int, ...]) -> Any:
    if not axes:
        return x
    new = tuple(1 if i in axes else d for i, d in enumerate(in_shape))
    return S.reshape_p.bind(x, new_sizes=new, dimensions=None)


def _where_operand(name: str, where: Any) -> Any:
    """``where`` as an operand, checked to be boolean (the error names ``name``, the user's function)."""
    check_arraylike(name, where)
    w = as_operand(where)
    if dtype_weak(w)[0] != dtypes.bool_:
        raise FtransValueError(f"{name}: where must be None or a boolean array; got dtype={dtype_weak(w)[0]}")
    return w


def _check_where(name: str, where: Any, shape: tuple[int, ...]) -> Any:
    if where is None:
        return None
    return to_dtype(broadcast_to_shape(_where_operand(name, where), shape), dtypes.bool_)


def _fill(x: Any, value: Any) -> Any:
    """A constant of ``x``'s dtype broadcast to its shape."""
    return broadcast_to_shape(const(value, dtype_weak(x)[0]), shape_of(x))


def _select(mask: Any, on_true: Any, on_false: Any) -> Any:
    return S.select_n_p.bind(mask, on_false, on_true)


def _promote_integer_dtype(d: np.dtype) -> np.dtype:
    if d == dtypes.bool_:
        return dtypes.default_int()
    if d.kind == "u" and d.itemsize < dtypes.default_uint().itemsize:
        return dtypes.default_uint()
    if d.kind == "i" and d.itemsize < dtypes.default_int().itemsize:
        return dtypes.default_int()
    return d


def _upcast_f16(d: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if d in (dtypes.float16, dtypes.bfloat16) else d


def _to_inexact(d: np.dtype) -> np.dtype:
    return d if dtypes.is_inexact(d) else dtypes.default_float()


def _user_dtype(dtype: Any, name: str) -> np.dtype | None:
    return None if dtype is None else dtypes.requested(dtype, name)


def _is_nan(x: Any) -> Any:
    d = dtype_weak(x)[0]
    if not dtypes.is_inexact(d):
        return broadcast_to_shape(const(False, dtypes.bool_), tuple(shape_of(x)))
    return E.ne_p.bind(x, x)


# ---------------------------------------------------------------- the generic reduction
def _reduction(
    name: str, a: Any, prim: Primitive, init: Any, *, bool_prim: Primitive | None = None,
    has_identity: bool = True, preproc: Callable[[Any], Any] | None = None,
    upcast_f16: bool = False, axis: Any = None, dtype: Any = None, keepdims: bool = False,
    initial: Any = None, where: Any = None, promote_integers: bool = False,
    combine: Primitive | None = None,
) -> Any:
    """What ``jnp.sum`` / ``prod`` / ``max`` / ``all`` share (JAX's ``_reduction``)."""
    x = _operand(name, a)
    if preproc is not None:
        x = preproc(x)
    shape = tuple(shape_of(x))
    axes = _axes(name, axis, len(shape))
    wmask = _check_where(name, where, shape)
    if initial is None and not has_identity:
        if wmask is not None:
            raise FtransValueError(
                f"reduction operation {name} does not have an identity, so to use a where mask one "
                "has to specify 'initial'"
            )
        if builtins.any(shape[d] == 0 for d in axes):
            raise FtransValueError(
                f"zero-size array to reduction operation {name} which has no identity "
                f"(shape {shape}, axis {axis}); pass initial= to reduce empty axes"
            )
    in_dtype = dtype_weak(x)[0]
    result_dtype = _user_dtype(dtype, name) or (_promote_integer_dtype(in_dtype) if promote_integers else in_dtype)
    compute = _upcast_f16(result_dtype) if upcast_f16 and dtypes.is_inexact(result_dtype) else result_dtype
    if compute == dtypes.bool_ and in_dtype != dtypes.bool_:
        x = E.ne_p.bind(x, const(0, in_dtype))
    x = to_dtype(x, compute)
    op = bool_prim if (compute == dtypes.bool_ and bool_prim is not None) else prim
    if wmask is not None:
        if type(x) is Array and type(wmask) is Array and debug_checks_on():
            # The fill (-inf for max) is the reduction's own, not a result: JAX's reductions run under
            # jit, where debug_nans/debug_infs look at the outputs only, so no checked op makes it here.
            x = Array._new(np.where(wmask._value, x._value, const(init, dtype_weak(x)[0])._value), False)
        else:
            x = _select(wmask, x, _fill(x, init))
    out = op.bind(x, axes=axes)  # (also with no axes, as JAX stages it: a reduce over none)
    if initial is not None:
        check_arraylike(name, initial)
        if shape_of(initial) != ():
            raise FtransValueError(f"{name}: initial value must be a scalar, got an array of shape {shape_of(initial)}")
        if debug_checks_on() and dtypes.is_inexact(compute) and type(initial) in (int, float, np.float32, np.float64):
            init_arr = const(initial, compute)  # initial=-inf is no invalid value (see the where fill)
        else:
            init_arr = to_dtype(as_operand(initial), compute)
        comb = combine if compute != dtypes.bool_ else {"reduce_sum": E.or_p, "reduce_prod": E.and_p}.get(
            prim.name, combine)
        out = comb.bind(init_arr, out)
    if keepdims:
        out = _keepdims(out, axes, shape)
    return to_dtype(out, result_dtype)


def _cast_to_numeric(x: Any) -> Any:
    return to_dtype(x, dtypes.default_int()) if dtype_weak(x)[0] == dtypes.bool_ else x


def _cast_to_bool(x: Any) -> Any:
    d = dtype_weak(x)[0]
    if d == dtypes.bool_:
        return to_dtype(x, d)
    if d.kind == "c":
        x = E.real_p.bind(x)
        d = dtype_weak(x)[0]
    return E.ne_p.bind(x, const(0, d))



# ---------------------------------------------------------------- eager fast paths
# ``jnp.sum(x)`` and friends with every argument at its default, on an ftrans
# Array with no transform active, are one NumPy reduction over all axes.  Each
# fast path below performs exactly the NumPy calls the general path's
# primitives make (same conversions, same reduction, same division), so the
# results are bit-identical (tests/test_eager_fastpaths.py checks it); anything
# unusual (0-d operands, any argument given) takes the general path.  Like the
# primitives' rules, they run with NumPy's floating-point errors ignored.
_HALF = (dtypes.float16, dtypes.bfloat16)
_F32 = np.dtype(np.float32)


def _fast_operand(a: Any) -> np.ndarray | None:
    """``a``'s ndarray when the eager fast path applies: an ftrans Array of rank >= 1, eagerly."""
    if type(a) is Array and can_shortcut():
        v = a._value
        if v.ndim:
            return v
    return None


def _float_total(v: np.ndarray) -> Any:
    """The sum of all of a float array, exactly as ``reduce_sum``'s rule computes it (a C-contiguous
    array is one pairwise NumPy sum; anything else goes through the rule's wider accumulation)."""
    if v.flags.c_contiguous:
        return np.add.reduce(v, axis=None, dtype=v.dtype)
    return R.sum_impl(v, axes=tuple(range(v.ndim)))


@quiet
def _fast_sum(v: np.ndarray) -> Array:
    """``sum`` over all axes: half floats accumulate in float32; small ints and bools widen."""
    d = v.dtype
    if d in _HALF:
        r = _float_total(v.astype(_F32)).astype(d)
    elif dtypes.is_inexact(d):
        r = np.add.reduce(v, axis=None, dtype=d) if v.flags.c_contiguous else _float_total(v)
    else:
        # Integer addition wraps identically in any order, so widening inside
        # the reduction equals the general path's convert-then-reduce.
        r = np.add.reduce(v, axis=None, dtype=_promote_integer_dtype(d))
    return Array._new(r, False)


@quiet
def _fast_extremum(v: np.ndarray, ufunc: np.ufunc) -> Array | None:
    """``max`` / ``min`` over all axes of a non-empty array (empty ones raise on the general path)."""
    if not v.size:
        return None
    return Array._new(ufunc.reduce(v, axis=None), False)


@quiet
def _fast_mean(v: np.ndarray) -> Array:
    """``mean`` over all axes: the float sum divided by the count, as the general path computes it."""
    d = v.dtype
    if dtypes.is_inexact(d):
        result = d
        compute = _F32 if d in _HALF else d
    else:
        result = compute = dtypes.default_float()
    x = v if compute == d else v.astype(compute)
    total = _float_total(x)
    r = np.true_divide(total, np.asarray(v.size).astype(compute)).astype(compute, copy=False)
    if result != compute:
        r = r.astype(result)
    return Array._new(r, False)


# ---------------------------------------------------------------- sum, prod, max, min, all, any
def sum(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """Sum of array elements over the given axes.

    Unlike NumPy's platform-dependent rules, small integers and bools are summed in the default int type
    (int32 unless x64 is on) when `promote_integers` is True, and float16/bfloat16 accumulate in float32
    before being cast back.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
        promote_integers: If True (the default), integer and bool inputs narrower than the default int are
            summed in it.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1, 2, 3], [4, 5, 6]])
        >>> jnp.sum(x)
        Array(21, dtype=int32)
        >>> jnp.sum(x, axis=0)
        Array([5, 7, 9], dtype=int32)
        >>> jnp.sum(x, axis=1, keepdims=True)
        Array([[ 6],
               [15]], dtype=int32)
        >>> jnp.sum(x, where=x > 2)
        Array(18, dtype=int32)

    See also:
        `nansum`, `cumsum`, `mean`, `prod`.
    """
    if (axis is None and dtype is None and out is None and keepdims is False and initial is None
            and where is None and promote_integers is True):
        v = _fast_operand(a)
        if v is not None:
            return _fast_sum(v)
    _no_out("sum", out)
    return _sum_general(a, axis, dtype, keepdims, initial, where, promote_integers)


@replayed  # (the general path only: ``sum(x)`` takes the fast path above, which a wrapper would slow)
def _sum_general(a: Any, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any,
                 promote_integers: bool) -> Any:
    return _reduction("sum", a, R.reduce_sum_p, 0, bool_prim=R.reduce_or_p, preproc=_cast_to_numeric,
                      upcast_f16=dtype is None, axis=axis, dtype=dtype, keepdims=keepdims,
                      initial=initial, where=where, promote_integers=promote_integers, combine=E.add_p)


def prod(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """Product of array elements over the given axes.

    The dtype rules are those of `sum`: small integers and bools multiply in the default int type when
    `promote_integers` is True.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
        promote_integers: If True (the default), integer and bool inputs narrower than the default int use it.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1, 2], [3, 4]])
        >>> jnp.prod(x)
        Array(24, dtype=int32)
        >>> jnp.prod(x, axis=1)
        Array([ 2, 12], dtype=int32)
        >>> jnp.prod(jnp.array([]), initial=5.0)
        Array(5., dtype=float32)

    See also:
        `nanprod`, `cumprod`, `sum`.
    """
    _no_out("prod", out)
    return _reduction("prod", a, R.reduce_prod_p, 1, bool_prim=R.reduce_and_p, preproc=_cast_to_numeric,
                      upcast_f16=dtype is None, axis=axis, dtype=dtype, keepdims=keepdims,
                      initial=initial, where=where, promote_integers=promote_integers, combine=E.mul_p)


def max(a: Any, axis: Any = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None) -> Any:
    """Maximum of array elements over the given axes.

    NaN propagates. An empty reduction needs `initial`, since there is no identity to return.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array of `a`'s dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1, 5, 3], [4, 2, 6]])
        >>> jnp.max(x)
        Array(6, dtype=int32)
        >>> jnp.max(x, axis=0)
        Array([4, 5, 6], dtype=int32)
        >>> jnp.max(x, axis=1, where=x < 5, initial=0)
        Array([3, 4], dtype=int32)

    See also:
        `maximum` (elementwise), `argmax`, `nanmax`, `min`.
    """
    if axis is None and out is None and keepdims is False and initial is None and where is None:
        v = _fast_operand(a)
        if v is not None and (r := _fast_extremum(v, np.maximum)) is not None:
            return r
    _no_out("max", out)
    return _max_general(a, axis, keepdims, initial, where)


@replayed  # (the general path only, as ``sum``'s)
def _max_general(a: Any, axis: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    return _reduction("max", a, R.reduce_max_p, -np.inf, has_identity=False, axis=axis,
                      keepdims=keepdims, initial=initial, where=where, combine=E.max_p)


def min(a: Any, axis: Any = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None) -> Any:
    """Minimum of array elements over the given axes.

    NaN propagates. An empty reduction needs `initial`, since there is no identity to return.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array of `a`'s dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1, 5, 3], [4, 2, 6]])
        >>> jnp.min(x)
        Array(1, dtype=int32)
        >>> jnp.min(x, axis=1)
        Array([1, 2], dtype=int32)
        >>> jnp.min(x, axis=0, keepdims=True)
        Array([[1, 2, 3]], dtype=int32)

    See also:
        `minimum` (elementwise), `argmin`, `nanmin`, `max`.
    """
    if axis is None and out is None and keepdims is False and initial is None and where is None:
        v = _fast_operand(a)
        if v is not None and (r := _fast_extremum(v, np.minimum)) is not None:
            return r
    _no_out("min", out)
    return _min_general(a, axis, keepdims, initial, where)


@replayed  # (the general path only, as ``sum``'s)
def _min_general(a: Any, axis: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    return _reduction("min", a, R.reduce_min_p, np.inf, has_identity=False, axis=axis,
                      keepdims=keepdims, initial=initial, where=where, combine=E.min_p)


def amax(a: Any, axis: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Any:
    """Alias of `ftrans.numpy.max`.

    Same arguments and result as `max`.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        The maximum over the given axes (see `max`).

    Examples:
        >>> jnp.amax(jnp.array([3, 1, 2]))
        Array(3, dtype=int32)
    """
    return max(a, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)


def amin(a: Any, axis: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Any:
    """Alias of `ftrans.numpy.min`.

    Same arguments and result as `min`.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        The minimum over the given axes (see `min`).

    Examples:
        >>> jnp.amin(jnp.array([3, 1, 2]))
        Array(1, dtype=int32)
    """
    return min(a, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)


def all(a: Any, axis: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Any:  # noqa: A001
    """Test whether every element along the given axes is true.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: elements where it is False count as true.
    Returns:
        A bool array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[True, False], [True, True]])
        >>> jnp.all(x)
        Array(False, dtype=bool)
        >>> jnp.all(x, axis=0)
        Array([ True, False], dtype=bool)
        >>> jnp.all(jnp.array([1, 2, 0]) > -1)
        Array(True, dtype=bool)

    See also:
        `any`.
    """
    _no_out("all", out)
    return _reduction("all", a, R.reduce_and_p, True, preproc=_cast_to_bool, axis=axis,
                      keepdims=keepdims, where=where, combine=E.and_p)


def any(a: Any, axis: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Any:  # noqa: A001
    """Test whether any element along the given axes is true.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: elements where it is False count as false.
    Returns:
        A bool array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[True, False], [False, False]])
        >>> jnp.any(x)
        Array(True, dtype=bool)
        >>> jnp.any(x, axis=1)
        Array([ True, False], dtype=bool)

    See also:
        `all`.
    """
    _no_out("any", out)
    return _reduction("any", a, R.reduce_or_p, False, preproc=_cast_to_bool, axis=axis,
                      keepdims=keepdims, where=where, combine=E.or_p)


# ---------------------------------------------------------------- mean, var, std, ptp, count_nonzero
def _count(name: str, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool, wmask: Any,
           dtype: np.dtype) -> Any:
    """How many elements each output averages over (a constant unless ``where`` is given)."""
    if wmask is None:
        n = math.prod(shape[d] for d in axes)
        if isinstance(n, DimExpr):  # a symbolic size: its value when the program runs
            return to_dtype(n.__jax_array__(), dtype)
        return const(n, dtype)
    return sum(wmask, axis=axes, dtype=dtype, keepdims=keepdims)


def _div(x: Any, y: Any) -> Any:
    """Strict division of same-dtype arrays, broadcasting a rank-0 or keepdims divisor."""
    xs, ys = shape_of(x), shape_of(y)
    if ys not in ((), xs):
        y = broadcast_to_shape(y, xs)
    return E.div_p.bind(x, y)


def mean(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    """Arithmetic mean over the given axes.

    Integer and bool inputs average in the default float type (float32 unless x64 is on), not float64 as in
    NumPy.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to compute and return the mean in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1, 2], [3, 5]])
        >>> jnp.mean(x)
        Array(2.75, dtype=float32)
        >>> jnp.mean(x, axis=0)
        Array([2. , 3.5], dtype=float32)
        >>> jnp.mean(x, axis=1, where=x > 1)
        Array([2., 4.], dtype=float32)

    See also:
        `average` (weighted), `nanmean`, `median`.
    """
    if axis is None and dtype is None and out is None and keepdims is False and where is None:
        v = _fast_operand(a)
        if v is not None:
            return _fast_mean(v)
    _no_out("mean", out)
    return _mean_general(a, axis, dtype, keepdims, where)


@replayed  # (the general path only, as ``sum``'s)
def _mean_general(a: Any, axis: Any, dtype: Any, keepdims: bool, where: Any) -> Any:
    x = _operand("mean", a)
    d = dtype_weak(x)[0]
    shape = tuple(shape_of(x))
    axes = _axes("mean", axis, len(shape))
    result_dtype = _user_dtype(dtype, "mean") or _to_inexact(d)
    compute = _upcast_f16(result_dtype) if dtype is None and dtypes.is_inexact(result_dtype) else result_dtype
    wmask = _check_where("mean", where, shape)
    total = sum(x, axis=axes, dtype=compute, keepdims=keepdims, where=wmask)
    count = _count("mean", shape, axes, keepdims, wmask, compute)
    return to_dtype(_div(total, count), result_dtype)


_mean = mean


def _var_promote_types(a_dtype: np.dtype, dtype: np.dtype | None) -> tuple[np.dtype, np.dtype]:
    if dtype is not None:
        if dtype.kind != "c" and a_dtype.kind == "c":
            raise FtransValueError(
                "var: a real dtype argument for the variance of a complex array is not supported; "
                "pass a complex dtype or none"
            )
        compute = dtype
    elif not dtypes.is_inexact(a_dtype):
        dtype = compute = dtypes.default_float()
    else:
        dtype = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}.get(a_dtype, a_dtype)
        compute = a_dtype
    return _upcast_f16(compute), dtype


def _correction(name: str, ddof: Any, correction: Any) -> Any:
    if correction is None:
        return ddof
    if not isinstance(ddof, int) or ddof != 0:
        raise FtransValueError(f"{name}: ddof and correction can't be provided simultaneously")
    return correction


def _sq_abs(c: Any) -> Any:
    if dtype_weak(c)[0].kind == "c":
        return E.real_p.bind(E.mul_p.bind(c, E.conj_p.bind(c)))
    return E.mul_p.bind(c, c)


def _sub_bcast(x: Any, m: Any) -> Any:
    if shape_of(m) != shape_of(x):
        m = broadcast_to_shape(m, tuple(shape_of(x)))
    return E.sub_p.bind(x, m)


@outputs_checked
def var(a: Any, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, mean: Any = None, correction: Any = None) -> Any:  # noqa: A002
    """Variance over the given axes.

    The variance is `sum(|x - mean|**2) / (N - ddof)`; it is NaN where `N - ddof <= 0`.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to compute and return the variance in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        ddof: Delta degrees of freedom: the divisor is `N - ddof`.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: only elements where it is True take part.
        mean: Optional precomputed mean (with `keepdims=True` shape) to use instead of computing it.
        correction: Array-API name of `ddof` (give at most one of them).
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`); real for complex input.

    Examples:
        >>> x = jnp.array([[1., 2., 3.], [4., 6., 8.]])
        >>> jnp.var(x)
        Array(5.6666665, dtype=float32)
        >>> jnp.var(x, axis=1)
        Array([0.6666667, 2.6666667], dtype=float32)
        >>> jnp.var(x, axis=1, ddof=1)
        Array([1., 4.], dtype=float32)

    See also:
        `std`, `nanvar`, `mean`.
    """
    _no_out("var", out)
    corr = _correction("var", ddof, correction)
    x = _operand("var", a)
    user = _user_dtype(dtype, "var")
    compute, result_dtype = _var_promote_types(dtype_weak(x)[0], user)
    shape = tuple(shape_of(x))
    axes = _axes("var", axis, len(shape))
    wmask = _check_where("var", where, shape)
    x = to_dtype(x, compute)
    if mean is None:
        m = _mean(x, axes, dtype=compute, keepdims=True, where=wmask)
    else:
        m = to_dtype(as_operand(mean), compute)
    sq = _sq_abs(_sub_bcast(x, m))
    real_compute = dtype_weak(sq)[0]
    count = _count("var", shape, axes, keepdims, wmask, real_compute)
    normalizer = E.sub_p.bind(count, const(corr, real_compute))
    total = sum(sq, axis=axes, dtype=real_compute, keepdims=keepdims, where=wmask)
    result = to_dtype(_div(total, normalizer), result_dtype)
    positive = E.gt_p.bind(normalizer, const(0, real_compute))
    return _select(broadcast_to_shape(positive, tuple(shape_of(result))), result, _fill(result, np.nan))


@outputs_checked
def std(a: Any, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
        keepdims: bool = False, *, where: Any = None, mean: Any = None, correction: Any = None) -> Any:  # noqa: A002
    """Standard deviation over the given axes.

    This is the square root of `var`, with the same arguments.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to compute and return the result in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        ddof: Delta degrees of freedom: the divisor is `N - ddof`.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: only elements where it is True take part.
        mean: Optional precomputed mean (with `keepdims=True` shape) to use instead of computing it.
        correction: Array-API name of `ddof` (give at most one of them).
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1., 2., 3.], [4., 6., 8.]])
        >>> jnp.std(x)
        Array(2.380476, dtype=float32)
        >>> jnp.std(x, axis=1, ddof=1)
        Array([1., 2.], dtype=float32)

    See also:
        `var`, `nanstd`.
    """
    _no_out("std", out)
    user = _user_dtype(dtype, "std")
    if user is not None and not dtypes.is_inexact(user):
        raise FtransValueError(f"std: dtype argument must be inexact; got {user}")
    v = var(a, axis=axis, dtype=user, ddof=ddof, keepdims=keepdims, where=where, mean=mean,
            correction=correction)
    return E.sqrt_p.bind(v)


def ptp(a: Any, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    """Range (maximum minus minimum) of values over the given axes.

    Bool input is a TypeError, as in JAX.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
    Returns:
        An array of `a`'s dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[4, 9, 2], [1, 1, 1]])
        >>> jnp.ptp(x)
        Array(8, dtype=int32)
        >>> jnp.ptp(x, axis=1)
        Array([7, 0], dtype=int32)

    See also:
        `max`, `min`.
    """
    _no_out("ptp", out)
    x = _operand("ptp", a)
    if dtype_weak(x)[0] == dtypes.bool_:
        raise FtransTypeError("ptp: bool arrays are not supported (max - min of bools); convert with .astype(int)")
    return E.sub_p.bind(max(x, axis=axis, keepdims=keepdims), min(x, axis=axis, keepdims=keepdims))


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Count the nonzero elements over the given axes.

    The counts are in the default int type.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
    Returns:
        An integer array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[0, 1, 7], [0, 0, 2]])
        >>> jnp.count_nonzero(x)
        Array(3, dtype=int32)
        >>> jnp.count_nonzero(x, axis=1)
        Array([2, 1], dtype=int32)

    See also:
        `nonzero`, `sum`.
    """
    x = _operand("count_nonzero", a)
    d = dtype_weak(x)[0]
    nz = E.ne_p.bind(x, const(0, d))
    return sum(nz, axis=axis, dtype=dtypes.default_int(), keepdims=keepdims)


# ---------------------------------------------------------------- argmax / argmin
def _arg_reduction(name: str, prim: Primitive, a: Any, axis: Any, keepdims: bool | None) -> Any:
    x = _operand(name, a)
    shape = tuple(shape_of(x))
    if axis is None:
        if 0 in shape:
            raise FtransValueError(f"attempt to get {name} of an empty sequence (shape {shape})")
        flat = S.reshape_p.bind(x, new_sizes=(math.prod(shape),), dimensions=None) if len(shape) != 1 else x
        out = prim.bind(flat, axes=(0,), index_dtype=dtypes.default_int())
        if keepdims:
            out = S.reshape_p.bind(out, new_sizes=(1,) * len(shape), dimensions=None)
        return out
    ax = canonicalize_axis(name, concrete_or_error(axis, f"{name}: the axis argument"), len(shape))
    if shape[ax] == 0:
        raise FtransValueError(f"attempt to get {name} of an empty sequence (axis {ax} of shape {shape})")
    out = prim.bind(x, axes=(ax,), index_dtype=dtypes.default_int())
    return _keepdims(out, (ax,), shape) if keepdims else out


def argmax(a: Any, axis: Any = None, out: None = None, keepdims: bool | None = None) -> Any:
    """Index of the maximum value along an axis.

    The first maximal index is returned; NaN counts as maximal.

    Args:
        a: Input array.
        axis: Axis to search along; `None` (the default) searches the flattened array.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, the searched axis stays in the result with size 1.
    Returns:
        An array of default-int indices with `axis` removed (a scalar for `axis=None`).

    Examples:
        >>> x = jnp.array([[1, 7, 3], [9, 2, 9]])
        >>> jnp.argmax(x)
        Array(3, dtype=int32)
        >>> jnp.argmax(x, axis=1)
        Array([1, 0], dtype=int32)
        >>> jnp.argmax(jnp.array([1.0, jnp.nan, 3.0]))
        Array(1, dtype=int32)

    See also:
        `argmin`, `nanargmax`, `max`.
    """
    _no_out("argmax", out)
    return _arg_reduction("argmax", R.argmax_p, a, axis, keepdims)


def argmin(a: Any, axis: Any = None, out: None = None, keepdims: bool | None = None) -> Any:
    """Index of the minimum value along an axis.

    The first minimal index is returned; NaN counts as minimal.

    Args:
        a: Input array.
        axis: Axis to search along; `None` (the default) searches the flattened array.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, the searched axis stays in the result with size 1.
    Returns:
        An array of default-int indices with `axis` removed (a scalar for `axis=None`).

    Examples:
        >>> x = jnp.array([[4, 1, 3], [0, 2, 0]])
        >>> jnp.argmin(x)
        Array(3, dtype=int32)
        >>> jnp.argmin(x, axis=0)
        Array([1, 0, 1], dtype=int32)

    See also:
        `argmax`, `nanargmin`, `min`.
    """
    _no_out("argmin", out)
    return _arg_reduction("argmin", R.argmin_p, a, axis, keepdims)


def _nanarg(name: str, fn: Callable, fill: float, a: Any, axis: Any, out: Any, keepdims: Any) -> Any:
    x = _operand(name, a)
    if not dtypes.is_inexact(dtype_weak(x)[0]):
        return fn(x, axis=axis, out=out, keepdims=keepdims)
    nan = _is_nan(x)
    res = fn(_select(nan, _fill(x, fill), x), axis=axis, out=out, keepdims=keepdims)
    all_nan = all(nan, axis=axis, keepdims=bool(keepdims))
    return _select(all_nan, _fill(res, -1), res)


@outputs_checked
def nanargmax(a: Any, axis: Any = None, out: None = None, keepdims: bool | None = None) -> Any:
    """Index of the maximum along an axis, ignoring NaNs.

    An all-NaN slice gives -1.

    Args:
        a: Input array.
        axis: Axis to search along; `None` (the default) searches the flattened array.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, the searched axis stays in the result with size 1.
    Returns:
        An array of default-int indices with `axis` removed.

    Examples:
        >>> x = jnp.array([[jnp.nan, 2., 1.], [jnp.nan, jnp.nan, jnp.nan]])
        >>> jnp.nanargmax(x, axis=1)
        Array([ 1, -1], dtype=int32)

    See also:
        `argmax`, `nanmax`.
    """
    return _nanarg("nanargmax", argmax, -np.inf, a, axis, out, keepdims)


@outputs_checked
def nanargmin(a: Any, axis: Any = None, out: None = None, keepdims: bool | None = None) -> Any:
    """Index of the minimum along an axis, ignoring NaNs.

    An all-NaN slice gives -1.

    Args:
        a: Input array.
        axis: Axis to search along; `None` (the default) searches the flattened array.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, the searched axis stays in the result with size 1.
    Returns:
        An array of default-int indices with `axis` removed.

    Examples:
        >>> x = jnp.array([[jnp.nan, 2., 1.], [jnp.nan, jnp.nan, jnp.nan]])
        >>> jnp.nanargmin(x, axis=1)
        Array([ 2, -1], dtype=int32)

    See also:
        `argmin`, `nanmin`.
    """
    return _nanarg("nanargmin", argmin, np.inf, a, axis, out, keepdims)


# ---------------------------------------------------------------- cumulative reductions
def _cumulative(name: str, prim: Primitive, a: Any, axis: Any, dtype: Any, out: Any = None,
                fill_nan: bool = False, fill_value: Any = 0, promote_integers: bool = False) -> Any:
    _no_out(name, out)
    x = _operand(name, a)
    shape = tuple(shape_of(x))
    if axis is None or not shape:
        sh = getattr(getattr(x, "aval", None), "typed_sharding", None)
        if sh is not None and builtins.any(e is not None for e in sh.spec):
            from ftrans.errors import ShardingTypeError

            raise ShardingTypeError(
                f"{name}: The input should be fully replicated when axis is not specified to {name}. Got input "
                f"type={x.aval.str_short()}; reshard it to P() first, or give axis=")
        x = S.reshape_p.bind(x, new_sizes=(math.prod(shape),), dimensions=None)
        shape = tuple(shape_of(x))
    ax = canonicalize_axis(name, 0 if axis is None else concrete_or_error(axis, f"{name}: axis"), len(shape))
    d = dtype_weak(x)[0]
    if fill_nan and dtypes.is_inexact(d):
        x = _select(_is_nan(x), _fill(x, fill_value), x)
    user = _user_dtype(dtype, name)
    if user is None:
        result = _promote_integer_dtype(d) if (promote_integers or d == dtypes.bool_) else d
        compute = result
    elif user == dtypes.bool_:
        result = user
        if d != dtypes.bool_:
            x = E.ne_p.bind(x, const(0, d))
        compute = _promote_integer_dtype(user)
    else:
        result = compute = user
    x = to_dtype(x, compute)
    res = prim.bind(x, axis=ax, reverse=False)
    return to_dtype(res, result)


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    """Cumulative sum of elements along an axis.

    `axis=None` flattens the input first. Bools count in the default int type.

    Args:
        a: Input array.
        axis: Axis to accumulate along; `None` (the default) flattens first.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        An array of `a`'s shape (1-D for `axis=None`) holding the running sums.

    Examples:
        >>> x = jnp.array([[1, 2, 3], [4, 5, 6]])
        >>> jnp.cumsum(x)
        Array([ 1,  3,  6, 10, 15, 21], dtype=int32)
        >>> jnp.cumsum(x, axis=1)
        Array([[ 1,  3,  6],
               [ 4,  9, 15]], dtype=int32)

    See also:
        `cumulative_sum`, `nancumsum`, `sum`.
    """
    return _cumulative("cumsum", So.cumsum_p, a, axis, dtype, out)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    """Cumulative product of elements along an axis.

    `axis=None` flattens the input first. Bools count in the default int type.

    Args:
        a: Input array.
        axis: Axis to accumulate along; `None` (the default) flattens first.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        An array of `a`'s shape (1-D for `axis=None`) holding the running products.

    Examples:
        >>> x = jnp.array([[1, 2, 3], [4, 5, 6]])
        >>> jnp.cumprod(x, axis=1)
        Array([[  1,   2,   6],
               [  4,  20, 120]], dtype=int32)
        >>> jnp.cumprod(jnp.array([1.0, 2.0, 0.5, 4.0]))
        Array([1., 2., 1., 4.], dtype=float32)

    See also:
        `cumulative_prod`, `nancumprod`, `prod`.
    """
    return _cumulative("cumprod", So.cumprod_p, a, axis, dtype, out)


@outputs_checked
def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    """Cumulative sum along an axis, treating NaNs as zero.

    Args:
        a: Input array.
        axis: Axis to accumulate along; `None` (the default) flattens first.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        An array of running sums with `a`'s shape (1-D for `axis=None`).

    Examples:
        >>> jnp.nancumsum(jnp.array([1., jnp.nan, 2., 3.]))
        Array([1., 1., 3., 6.], dtype=float32)

    See also:
        `cumsum`.
    """
    return _cumulative("nancumsum", So.cumsum_p, a, axis, dtype, out, fill_nan=True, fill_value=0)


@outputs_checked
def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    """Cumulative product along an axis, treating NaNs as one.

    Args:
        a: Input array.
        axis: Axis to accumulate along; `None` (the default) flattens first.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        An array of running products with `a`'s shape (1-D for `axis=None`).

    Examples:
        >>> jnp.nancumprod(jnp.array([1., jnp.nan, 2., 3.]))
        Array([1., 1., 2., 6.], dtype=float32)

    See also:
        `cumprod`.
    """
    return _cumulative("nancumprod", So.cumprod_p, a, axis, dtype, out, fill_nan=True, fill_value=1)


def _include_initial(name: str, res: Any, ax: int, value: Any) -> Any:
    shape = list(shape_of(res))
    shape[ax] = 1
    init = broadcast_to_shape(const(value, dtype_weak(res)[0]), tuple(shape))
    return S.concatenate_p.bind(init, res, dimension=ax)


def _cumulative_api(name: str, prim: Primitive, identity: int, x: Any, axis: Any, dtype: Any,
                    include_initial: bool) -> Any:
    a = _operand(name, x)
    nd = len(shape_of(a))
    if axis is None:
        if nd > 1:
            raise FtransValueError(f"{name}: the input has {nd} dimensions; pass axis= explicitly")
        axis = 0
    if nd == 0:
        raise FtransValueError(f"{name}: the input must have at least one dimension")
    ax = canonicalize_axis(name, axis, nd)
    res = _cumulative(name, prim, a, ax, dtype, promote_integers=True)
    return _include_initial(name, res, ax, identity) if include_initial else res


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """Cumulative sum along an axis (the array-API version of `cumsum`).

    Unlike `cumsum`, small integers are promoted to the default int type, and `include_initial` can prepend
    the zero the sums start from.

    Args:
        x: Input array.
        axis: Axis to accumulate along; it may be omitted only for 1-D input.
        dtype: Optional dtype to accumulate in and return.
        include_initial: If True, the result starts with 0 and is one longer along `axis`.
    Returns:
        An array of running sums with `x`'s shape (one longer along `axis` with `include_initial`).

    Examples:
        >>> x = jnp.array([1, 2, 3, 4])
        >>> jnp.cumulative_sum(x)
        Array([ 1,  3,  6, 10], dtype=int32)
        >>> jnp.cumulative_sum(x, include_initial=True)
        Array([ 0,  1,  3,  6, 10], dtype=int32)
        >>> jnp.cumulative_sum(jnp.array([[1, 2], [3, 4]]), axis=0)
        Array([[1, 2],
               [4, 6]], dtype=int32)

    See also:
        `cumsum`.
    """
    return _cumulative_api("cumulative_sum", So.cumsum_p, 0, x, axis, dtype, include_initial)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """Cumulative product along an axis (the array-API version of `cumprod`).

    Small integers are promoted to the default int type, and `include_initial` can prepend the one the
    products start from.

    Args:
        x: Input array.
        axis: Axis to accumulate along; it may be omitted only for 1-D input.
        dtype: Optional dtype to accumulate in and return.
        include_initial: If True, the result starts with 1 and is one longer along `axis`.
    Returns:
        An array of running products with `x`'s shape (one longer along `axis` with `include_initial`).

    Examples:
        >>> x = jnp.array([1, 2, 3, 4])
        >>> jnp.cumulative_prod(x)
        Array([ 1,  2,  6, 24], dtype=int32)
        >>> jnp.cumulative_prod(x, include_initial=True)
        Array([ 1,  1,  2,  6, 24], dtype=int32)

    See also:
        `cumprod`.
    """
    return _cumulative_api("cumulative_prod", So.cumprod_p, 1, x, axis, dtype, include_initial)


# ---------------------------------------------------------------- median, average
def _to_back(x: Any, axes: tuple[int, ...]) -> Any:
    """Move ``axes`` to the end and merge them into one axis."""
    shape = tuple(shape_of(x))
    keep = [i for i in range(len(shape)) if i not in axes]
    perm = tuple(keep) + tuple(axes)
    if perm != tuple(range(len(shape))):
        x = S.transpose_p.bind(x, permutation=perm)
    new = tuple(shape[i] for i in keep) + (math.prod(shape[i] for i in axes),)
    if new != tuple(shape_of(x)):
        x = S.reshape_p.bind(x, new_sizes=new, dimensions=None)
    return x


def _take_last(x: Any, i: int) -> Any:
    shape = tuple(shape_of(x))
    starts = (0,) * (len(shape) - 1) + (i,)
    limits = shape[:-1] + (i + 1,)
    sl = S.slice_p.bind(x, start_indices=starts, limit_indices=limits, strides=None)
    return S.reshape_p.bind(sl, new_sizes=shape[:-1], dimensions=None)


@outputs_checked
def median(a: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    """Median over the given axes.

    The median is the midpoint of the two middle sorted values for an even count; any NaN in a slice gives
    NaN.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        overwrite_input: Ignored (arrays are immutable); accepted for NumPy compatibility.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
    Returns:
        An array of inexact dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[3, 1, 2], [4, 8, 6]])
        >>> jnp.median(x)
        Array(3.5, dtype=float32)
        >>> jnp.median(x, axis=1)
        Array([2., 6.], dtype=float32)

    See also:
        `nanmedian`, `quantile`, `percentile`, `mean`.
    """
    _no_out("median", out)
    x = _operand("median", a)
    d = dtype_weak(x)[0]
    if d.kind == "c":
        raise FtransValueError("median: complex input is not supported (quantiles of complex numbers are ill-defined)")
    x = to_dtype(x, _to_inexact(d))
    shape = tuple(shape_of(x))
    axes = _axes("median", axis, len(shape))
    flat = _to_back(x, axes)
    n = shape_of(flat)[-1]
    if n == 0:
        raise FtransTypeError(f"median: cannot take the median over an empty axis (shape {shape}, axis {axis})")
    any_nan = any(_is_nan(flat), axis=-1, keepdims=True)
    flat = _select(broadcast_to_shape(any_nan, tuple(shape_of(flat))), _fill(flat, np.nan), flat)
    (srt,) = So.sort_p.bind(flat, dimension=len(shape_of(flat)) - 1, is_stable=True, num_keys=1)
    lo, hi = (n - 1) // 2, n // 2
    dd = dtype_weak(srt)[0]
    res = E.mul_p.bind(E.add_p.bind(_take_last(srt, lo), _take_last(srt, hi)), const(0.5, dd))
    if keepdims:
        res = S.reshape_p.bind(res, new_sizes=tuple(1 if i in axes else s for i, s in enumerate(shape)),
                               dimensions=None)
    return res


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """Weighted average over the given axes.

    Args:
        a: Input array.
        axis: Axis or axes to average over; `None` (the default) averages over all of them.
        weights: Optional weights, of `a`'s shape or 1-D along a single `axis`; the default is equal weights.
        returned: If True, also return the sum of the weights.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
    Returns:
        The average, of inexact dtype, with the reduced axes removed (or kept if `keepdims`); with `returned`,
        the pair `(average, sum_of_weights)`.

    Examples:
        >>> x = jnp.array([1., 2., 3., 4.])
        >>> jnp.average(x)
        Array(2.5, dtype=float32)
        >>> jnp.average(x, weights=jnp.array([4., 3., 2., 1.]))
        Array(2., dtype=float32)
        >>> jnp.average(x, weights=jnp.array([1., 1., 0., 0.]), returned=True)
        (Array(1.5, dtype=float32), Array(2., dtype=float32))

    See also:
        `mean`.
    """
    from ftrans.core.operands import promote_dtypes

    x = _operand("average", a)
    shape = tuple(shape_of(x))
    axes = _axes("average", axis, len(shape))
    if weights is None:
        x = to_dtype(x, _to_inexact(dtype_weak(x)[0]))
        avg = mean(x, axis=axes, keepdims=keepdims)
        count = math.prod(shape[i] for i in axes)
        wsum = (to_dtype(count.__jax_array__(), dtype_weak(avg)[0]) if isinstance(count, DimExpr)  # (its value)
                else const(count, dtype_weak(avg)[0]))
    else:
        check_arraylike("average", weights)
        (x, w), dt, _ = promote_dtypes("average", x, weights)
        dt = _to_inexact(dt)
        x, w = to_dtype(x, dt), to_dtype(w, dt)
        wshape = tuple(shape_of(w))
        if wshape != shape:
            if axis is None:
                raise FtransValueError(
                    f"average: axis must be specified when shapes of a {shape} and weights {wshape} differ"
                )
            if wshape != tuple(shape[i] for i in axes):
                raise FtransValueError(
                    f"average: shape of weights {wshape} must be consistent with shape of a {shape} along axis {axis}"
                )
            order = sorted(range(len(axes)), key=lambda i: axes[i])
            if order != list(range(len(axes))):
                w = S.transpose_p.bind(w, permutation=tuple(order))
            w = S.broadcast_in_dim_p.bind(w, shape=shape, broadcast_dimensions=tuple(sorted(axes)))
        wsum = sum(w, axis=axes, keepdims=keepdims)
        avg = _div(sum(E.mul_p.bind(x, w), axis=axes, keepdims=keepdims), wsum)
    if returned:
        if shape_of(wsum) != shape_of(avg):
            wsum = broadcast_to_shape(wsum, tuple(shape_of(avg)))
        return avg, wsum
    return avg


# ---------------------------------------------------------------- NaN-ignoring reductions
def _nan_reduction(name: str, fn: Callable, init: Any, nan_if_all_nan: bool, a: Any, axis: Any,
                   keepdims: bool, where: Any, **kw: Any) -> Any:
    x = _operand(name, a)
    if where is not None:
        where = _where_operand(name, where)
    if not dtypes.is_inexact(dtype_weak(x)[0]):
        return fn(x, axis=axis, keepdims=keepdims, where=where, **kw)
    nan = _is_nan(x)
    res = fn(_select(nan, _fill(x, init), x), axis=axis, keepdims=keepdims, where=where, **kw)
    if nan_if_all_nan:
        all_nan = all(nan, axis=axis, keepdims=keepdims)
        return _select(all_nan, _fill(res, np.nan), res)
    return res


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """Sum over the given axes, treating NaNs as zero.

    The dtype rules are those of `sum`.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1., jnp.nan], [3., 4.]])
        >>> jnp.nansum(x)
        Array(8., dtype=float32)
        >>> jnp.nansum(x, axis=1)
        Array([1., 7.], dtype=float32)

    See also:
        `sum`, `nanmean`.
    """
    _no_out("nansum", out)
    return _nan_reduction("nansum", sum, 0, False, a, axis, keepdims, where, dtype=dtype, initial=initial)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    """Product over the given axes, treating NaNs as one.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to accumulate in and return.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[2., jnp.nan], [3., 4.]])
        >>> jnp.nanprod(x)
        Array(24., dtype=float32)
        >>> jnp.nanprod(x, axis=0)
        Array([6., 4.], dtype=float32)

    See also:
        `prod`, `nansum`.
    """
    _no_out("nanprod", out)
    return _nan_reduction("nanprod", prod, 1, False, a, axis, keepdims, where, dtype=dtype, initial=initial)


@outputs_checked
def nanmax(a: Any, axis: Any = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """Maximum over the given axes, ignoring NaNs.

    An all-NaN slice gives NaN.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array of `a`'s dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1., jnp.nan, 3.], [jnp.nan, jnp.nan, jnp.nan]])
        >>> jnp.nanmax(x)
        Array(3., dtype=float32)
        >>> jnp.nanmax(x, axis=1)
        Array([ 3., nan], dtype=float32)

    See also:
        `max`, `nanargmax`, `nanmin`.
    """
    _no_out("nanmax", out)
    return _nan_reduction("nanmax", max, -np.inf, initial is None, a, axis, keepdims, where, initial=initial)


@outputs_checked
def nanmin(a: Any, axis: Any = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """Minimum over the given axes, ignoring NaNs.

    An all-NaN slice gives NaN.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        initial: Optional starting value of the reduction (needed when a reduced slice can be empty).
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array of `a`'s dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1., jnp.nan, 3.], [jnp.nan, jnp.nan, jnp.nan]])
        >>> jnp.nanmin(x)
        Array(1., dtype=float32)
        >>> jnp.nanmin(x, axis=1)
        Array([ 1., nan], dtype=float32)

    See also:
        `min`, `nanargmin`, `nanmax`.
    """
    _no_out("nanmin", out)
    return _nan_reduction("nanmin", min, np.inf, initial is None, a, axis, keepdims, where, initial=initial)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
            where: Any = None) -> Any:
    """Mean over the given axes, ignoring NaNs.

    A slice with no non-NaN element gives NaN.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to compute and return the mean in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: only elements where it is True take part.
    Returns:
        An array of inexact dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1., jnp.nan, 3.], [4., 5., 6.]])
        >>> jnp.nanmean(x)
        Array(3.8, dtype=float32)
        >>> jnp.nanmean(x, axis=1)
        Array([2., 5.], dtype=float32)

    See also:
        `mean`, `nansum`.
    """
    _no_out("nanmean", out)
    x = _operand("nanmean", a)
    if where is not None:
        where = _where_operand("nanmean", where)
    d = dtype_weak(x)[0]
    if not dtypes.is_inexact(d):
        return mean(x, axis, dtype, keepdims=keepdims, where=where)
    rd = _user_dtype(dtype, "nanmean") or _to_inexact(d)
    not_nan = E.not_p.bind(_is_nan(x))
    normalizer = sum(not_nan, axis=axis, dtype=rd, keepdims=keepdims, where=where)
    total = nansum(x, axis, dtype=rd, keepdims=keepdims, where=where)
    return _div(total, normalizer)


@outputs_checked
def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None, mean: Any = None) -> Any:  # noqa: A002
    """Variance over the given axes, ignoring NaNs.

    The divisor is the count of non-NaN elements minus `ddof`.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to compute and return the variance in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        ddof: Delta degrees of freedom.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: only elements where it is True take part.
        mean: Optional precomputed mean (with `keepdims=True` shape) to use instead of computing it.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([1., jnp.nan, 3., 5.])
        >>> jnp.nanvar(x)
        Array(2.6666667, dtype=float32)
        >>> jnp.nanvar(x, ddof=1)
        Array(4., dtype=float32)

    See also:
        `var`, `nanstd`.
    """
    _no_out("nanvar", out)
    x = _operand("nanvar", a)
    if where is not None:
        where = _where_operand("nanvar", where)
    compute, result_dtype = _var_promote_types(dtype_weak(x)[0], _user_dtype(dtype, "nanvar"))
    x = to_dtype(x, compute)
    shape = tuple(shape_of(x))
    axes = _axes("nanvar", axis, len(shape))
    m = nanmean(x, axes, dtype=compute, keepdims=True, where=where) if mean is None else \
        to_dtype(as_operand(mean), compute)
    nan = _is_nan(x)
    centered = _select(nan, _fill(x, 0), _sub_bcast(x, m))
    sq = _sq_abs(centered)
    normalizer = sum(E.not_p.bind(nan), axis=axes, keepdims=keepdims, where=where)
    normalizer = E.sub_p.bind(normalizer, const(ddof, dtype_weak(normalizer)[0]))
    bad = E.le_p.bind(normalizer, const(0, dtype_weak(normalizer)[0]))
    total = sum(sq, axis=axes, keepdims=keepdims, where=where)
    rd = dtype_weak(total)[0]
    total = _select(bad, _fill(total, np.nan), total)
    divisor = to_dtype(_select(bad, _fill(normalizer, 1), normalizer), rd)
    return to_dtype(E.div_p.bind(total, divisor), result_dtype)


@outputs_checked
def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None, mean: Any = None) -> Any:  # noqa: A002
    """Standard deviation over the given axes, ignoring NaNs.

    This is the square root of `nanvar`.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        dtype: Optional dtype to compute and return the result in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        ddof: Delta degrees of freedom.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        where: Optional boolean mask: only elements where it is True take part.
        mean: Optional precomputed mean (with `keepdims=True` shape) to use instead of computing it.
    Returns:
        An array with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([1., jnp.nan, 3., 5.])
        >>> jnp.nanstd(x)
        Array(1.6329932, dtype=float32)

    See also:
        `std`, `nanvar`.
    """
    _no_out("nanstd", out)
    if where is not None:
        where = _where_operand("nanstd", where)
    return E.sqrt_p.bind(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, mean=mean))
