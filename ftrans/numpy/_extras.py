"""Less central JAX's ``numpy`` functions: comparisons, differences, number theory,
float decomposition, polynomials, sets, statistics, windows.

Everything here is composed from other ``ftrans.numpy`` / ``ftrans.lax``
functions, so it runs eagerly and under tracing alike and inherits their dtype
and weak-type rules.  Arguments that fix output shapes (``n``, ``axis``,
``bins``, ``size``...) must be concrete, as in JAX; where JAX computes an
output size from data (``bincount`` without ``length``, ``setdiff1d`` without
``size``) the data must be concrete too and a traced value raises a
concretization error.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import dtypes
from ftrans.core.operands import (
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    convert,
    dtype_weak,
    promote_dtypes,
    shape_of,
)
from ftrans.core.shape_poly import is_symbolic_dim
from ftrans.core.trace import Tracer, outputs_checked
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._elementwise import _inexact
from ftrans.transforms.ad import float0, jvp
from ftrans.transforms.custom_derivatives import custom_jvp

__all__ = [
    "allclose", "isclose", "array_equal", "array_equiv", "diff", "ediff1d", "cross", "gcd", "lcm",
    "ldexp", "frexp", "modf", "fabs", "float_power", "sinc", "spacing", "i0", "isscalar", "iscomplex",
    "iscomplexobj", "isreal", "isrealobj", "isdtype", "iterable", "rollaxis", "unravel_index",
    "ravel_multi_index", "vander", "trapezoid", "fill_diagonal", "put_along_axis", "polyval",
    "polyadd", "polysub", "polymul", "polyder", "polyint",
]


# ---------------------------------------------------------------- small helpers
def _as_array(x: Any) -> Any:
    """An ftrans Array (or Tracer) for an array-like; Python scalars stay weakly typed."""
    return jnp.asarray(x)


def _arr(name: str, x: Any) -> Any:
    """An Array/Tracer for ``x``; lists are rejected like JAX's ensure_arraylike."""
    check_arraylike(name, x)
    return _as_array(x)


def _index(name: str, value: Any, what: str) -> int:
    """A static Python int for a shape-determining argument."""
    value = concrete_or_error(value, f"'{what}' argument of jnp.{name}")
    try:
        return operator.index(value)
    except TypeError:
        raise FtransTypeError(f"{name}: '{what}' must be an integer, got {type(value).__name__}") from None


def _real_dtype(d: np.dtype) -> np.dtype:
    return np.dtype(np.finfo(d).dtype) if d.kind == "c" else d


# ---------------------------------------------------------------- comparisons
def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Test elementwise whether two arrays are equal within a tolerance.

    The test is `|a - b| <= atol + rtol * |b|`; infinities are close only to themselves. Integer inputs are
    compared in floating point, as JAX promotes to inexact first. Key arrays (of one key type) are close where
    they are equal.

    Args:
        a: First array.
        b: Second array; broadcasts against `a`.
        rtol: Relative tolerance.
        atol: Absolute tolerance.
        equal_nan: Whether NaNs compare equal to each other.
    Returns:
        A bool array of the broadcast shape.

    Examples:
        >>> jnp.isclose(jnp.array([1.0, 1.1, jnp.nan]), jnp.array([1.0 + 1e-9, 1.0, jnp.nan]))
        Array([ True, False, False], dtype=bool)
        >>> jnp.isclose(jnp.array([jnp.nan]), jnp.array([jnp.nan]), equal_nan=True)
        Array([ True], dtype=bool)

    See also:
        `allclose`, `equal`.
    """
    from ftrans.core.keys import is_key

    if is_key(a) or is_key(b):
        ka, kb = jnp.asarray(a), jnp.asarray(b)
        if ka.dtype != kb.dtype:
            raise FtransTypeError(f"isclose does not accept dtypes {ka.dtype}, {kb.dtype}: a key array is close "
                                  "only to keys of its own type")
        return jnp.equal(ka, kb)
    a, b = _inexact("isclose", a, b)
    rd = _real_dtype(dtype_weak(a)[0])
    rtol = convert(rtol, rd)
    atol = convert(atol, rd)
    in_range = jnp.less_equal(jnp.abs(jnp.subtract(a, b)), jnp.add(atol, jnp.multiply(rtol, jnp.abs(b))))
    out = jnp.logical_or(jnp.equal(a, b), jnp.logical_and(jnp.isfinite(b), in_range))
    if equal_nan:
        out = jnp.logical_or(out, jnp.logical_and(jnp.isnan(a), jnp.isnan(b)))
    return out


def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Test whether all elements of two arrays are equal within a tolerance.

    The result is a 0-d bool array, not a Python bool, so it also works under `jit`.

    Args:
        a: First array.
        b: Second array; broadcasts against `a`.
        rtol: Relative tolerance.
        atol: Absolute tolerance.
        equal_nan: Whether NaNs compare equal to each other.
    Returns:
        A 0-d bool array.

    Examples:
        >>> jnp.allclose(jnp.array([1.0, 2.0]), jnp.array([1.0, 2.0 + 1e-7]))
        Array(True, dtype=bool)
        >>> jnp.allclose(jnp.array([1.0, 2.0]), jnp.array([1.0, 2.1]))
        Array(False, dtype=bool)

    See also:
        `isclose`, `array_equal`.
    """
    return jnp.all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """Test whether two arrays have the same shape and the same elements.

    Different shapes give False rather than an error.

    Args:
        a1: First array.
        a2: Second array.
        equal_nan: Whether NaNs compare equal to each other.
    Returns:
        A 0-d bool array.

    Examples:
        >>> jnp.array_equal(jnp.array([1, 2]), jnp.array([1, 2]))
        Array(True, dtype=bool)
        >>> jnp.array_equal(jnp.array([1, 2]), jnp.array([[1, 2]]))
        Array(False, dtype=bool)

    See also:
        `array_equiv`, `allclose`.
    """
    a1, a2 = jnp.asarray(a1), jnp.asarray(a2)
    if tuple(shape_of(a1)) != tuple(shape_of(a2)):
        return jnp.array(False)
    eq = jnp.equal(a1, a2)
    if equal_nan:
        eq = jnp.logical_or(eq, jnp.logical_and(jnp.isnan(a1), jnp.isnan(a2)))
    return jnp.all(eq)


def array_equiv(a1: Any, a2: Any) -> Any:
    """Test whether two arrays are equal after broadcasting.

    Shapes that do not broadcast give False.

    Args:
        a1: First array.
        a2: Second array.
    Returns:
        A 0-d bool array.

    Examples:
        >>> jnp.array_equiv(jnp.array([1, 2]), jnp.array([[1, 2], [1, 2]]))
        Array(True, dtype=bool)
        >>> jnp.array_equiv(jnp.array([1, 2]), jnp.array([1, 2, 3]))
        Array(False, dtype=bool)

    See also:
        `array_equal`.
    """
    a1, a2 = jnp.asarray(a1), jnp.asarray(a2)
    try:
        eq = jnp.equal(a1, a2)
    except ValueError:
        return jnp.array(False)
    return jnp.all(eq)


# ---------------------------------------------------------------- differences
def _pad_operand(name: str, x: Any, shape: tuple[int, ...], axis: int) -> Any:
    x = _arr(name, x)
    if not shape_of(x):
        edge = list(shape)
        edge[axis] = 1
        x = jnp.broadcast_to(x, tuple(edge))
    return x


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """Compute the `n`-th discrete difference along an axis.

    For booleans the difference is `!=`.

    Args:
        a: Input array.
        n: Number of times to take the difference.
        axis: The axis along which to take it.
        prepend: Values to put before `a` along `axis` first.
        append: Values to put after `a` along `axis` first.
    Returns:
        An array `n` shorter along `axis` (plus any prepended/appended length).

    Examples:
        >>> x = jnp.array([1, 4, 9, 16])
        >>> jnp.diff(x)
        Array([3, 5, 7], dtype=int32)
        >>> jnp.diff(x, n=2)
        Array([2, 2], dtype=int32)
        >>> jnp.diff(x, prepend=0)
        Array([1, 3, 5, 7], dtype=int32)

    See also:
        `ediff1d`, `gradient`, `cumsum`.
    """
    arr = _arr("diff", a)
    n = _index("diff", n, "n")
    axis = _index("diff", axis, "axis")
    if n == 0:
        return arr
    if n < 0:
        raise FtransValueError(f"diff: order must be non-negative but got {n}")
    shape = tuple(shape_of(arr))
    if not shape:
        raise FtransValueError("diff requires input that is at least one dimensional; got a 0-d array")
    axis = canonicalize_axis("diff", axis, len(shape))
    parts = []
    if prepend is not None:
        parts.append(_pad_operand("diff", prepend, shape, axis))
    parts.append(arr)
    if append is not None:
        parts.append(_pad_operand("diff", append, shape, axis))
    if len(parts) > 1:
        arr = jnp.concatenate(parts, axis)
    hi = tuple(slice(1, None) if i == axis else slice(None) for i in range(len(shape)))
    lo = tuple(slice(None, -1) if i == axis else slice(None) for i in range(len(shape)))
    op = jnp.not_equal if dtype_weak(arr)[0] == np.bool_ else jnp.subtract
    for _ in range(n):
        arr = op(arr[hi], arr[lo])
    return arr


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """Differences between consecutive elements of the flattened array.

    Optional values can be put before and after; they are cast to the array's dtype.

    Args:
        ary: Input array (flattened).
        to_end: Values appended to the differences.
        to_begin: Values prepended to the differences.
    Returns:
        A 1-D array.

    Examples:
        >>> jnp.ediff1d(jnp.array([1, 2, 4, 7]), to_begin=-9)
        Array([-9,  1,  2,  3], dtype=int32)

    See also:
        `diff`.
    """
    arr = jnp.ravel(_arr("ediff1d", ary))
    d = dtype_weak(arr)[0]
    result = jnp.subtract(arr[1:], arr[:-1])
    if to_begin is not None:
        result = jnp.concatenate((jnp.ravel(jnp.astype(_arr("ediff1d", to_begin), d)), result))
    if to_end is not None:
        result = jnp.concatenate((result, jnp.ravel(jnp.astype(_arr("ediff1d", to_end), d))))
    return result


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    """Cross product of 2- or 3-element vectors.

    2-element vectors give the scalar z component; the other axes broadcast.

    Args:
        a: First array of vectors.
        b: Second array of vectors.
        axisa: Axis of `a` holding the vectors.
        axisb: Axis of `b` holding the vectors.
        axisc: Axis of the result holding the vectors (for 3-element vectors).
        axis: If given, overrides `axisa`, `axisb` and `axisc`.
    Returns:
        The cross products, in the promoted dtype.

    Examples:
        >>> jnp.cross(jnp.array([1, 0, 0]), jnp.array([0, 1, 0]))
        Array([0, 0, 1], dtype=int32)
        >>> jnp.cross(jnp.array([1, 2]), jnp.array([3, 4]))
        Array(-2, dtype=int32)

    See also:
        `dot`, `outer`.
    """
    check_arraylike("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = jnp.moveaxis(a, axisa, -1)
    b = jnp.moveaxis(b, axisb, -1)
    na, nb = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise FtransValueError(
            f"cross: dimension must be either 2 or 3 for cross product, got shapes {shape_of(a)} and {shape_of(b)}"
        )
    if na == 2 and nb == 2:
        return jnp.subtract(jnp.multiply(a[..., 0], b[..., 1]), jnp.multiply(a[..., 1], b[..., 0]))
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if na == 3 else jnp.zeros_like(a0)
    b2 = b[..., 2] if nb == 3 else jnp.zeros_like(b0)
    parts = [jnp.subtract(jnp.multiply(a1, b2), jnp.multiply(a2, b1)),
             jnp.subtract(jnp.multiply(a2, b0), jnp.multiply(a0, b2)),
             jnp.subtract(jnp.multiply(a0, b1), jnp.multiply(a1, b0))]
    parts = jnp.broadcast_arrays(*parts)
    c = jnp.stack(parts)
    d = dtype_weak(c)[0]
    if dtype_weak(c)[1]:
        c = lax.convert_element_type(c, d)
    return jnp.moveaxis(c, 0, axisc)


# ---------------------------------------------------------------- number theory
def _int_pair(name: str, x1: Any, x2: Any) -> tuple[Any, Any]:
    (x1, x2), dt, _ = promote_dtypes(name, x1, x2)
    if dt.kind not in "iu":
        raise FtransValueError(f"Arguments to jnp.{name} must be integers, got {dt.name}")
    x1, x2 = jnp.broadcast_arrays(x1, x2)
    return x1, x2


def _gcd_abs(x1: Any, x2: Any) -> Any:
    """Euclid's algorithm on non-negative operands, unrolled to its worst case.

    There is no loop primitive, so the loop runs a fixed number of steps: the
    number of Euclid steps for b-bit inputs is bounded by the Fibonacci index
    of 2**b (about 1.44 b), after which every lane has reached ``b == 0`` and
    further steps are no-ops.
    """
    bits = dtype_weak(x1)[0].itemsize * 8
    zero = jnp.zeros_like(x2)
    for _ in range(int(1.45 * bits) + 2):
        nz = jnp.not_equal(x2, zero)
        safe = jnp.where(nz, x2, jnp.ones_like(x2))
        x1, x2 = jnp.where(nz, x2, x1), jnp.where(nz, lax.rem(x1, safe), zero)
    return x1


def gcd(x1: Any, x2: Any) -> Any:
    """Greatest common divisor of two integer arrays, elementwise.

    The result is that of the absolute values.

    Args:
        x1: First integer array.
        x2: Second integer array; broadcasts against `x1`.
    Returns:
        An integer array of the broadcast shape.

    Examples:
        >>> jnp.gcd(jnp.array([12, 20, -9]), jnp.array([18, 5, 6]))
        Array([6, 5, 3], dtype=int32)

    See also:
        `lcm`.
    """
    x1, x2 = _int_pair("gcd", x1, x2)
    return _gcd_abs(jnp.abs(x1), jnp.abs(x2))


def lcm(x1: Any, x2: Any) -> Any:
    """Least common multiple of two integer arrays, elementwise.

    The result is that of the absolute values, and 0 if either is 0.

    Args:
        x1: First integer array.
        x2: Second integer array; broadcasts against `x1`.
    Returns:
        An integer array of the broadcast shape.

    Examples:
        >>> jnp.lcm(jnp.array([4, 6, 0]), jnp.array([6, 4, 3]))
        Array([12, 12,  0], dtype=int32)

    See also:
        `gcd`.
    """
    x1, x2 = _int_pair("lcm", x1, x2)
    x1, x2 = jnp.abs(x1), jnp.abs(x2)
    d = _gcd_abs(x1, x2)
    zero = jnp.zeros_like(d)
    safe = jnp.where(jnp.equal(d, zero), jnp.ones_like(d), d)
    return jnp.where(jnp.equal(d, zero), zero, jnp.multiply(x1, jnp.floor_divide(x2, safe)))


# ---------------------------------------------------------------- float decomposition
_INT_OF_WIDTH = {2: np.int16, 4: np.int32, 8: np.int64}


def frexp(x: Any, /) -> tuple[Any, Any]:
    """Split floating-point values into mantissa and exponent, elementwise.

    The mantissa is in `[0.5, 1)` in magnitude and `x == mantissa * 2**exponent`. Computed by bit
    manipulation: subnormals are first scaled into the normal range so the exponent is meaningful; zeros,
    infinities and NaNs pass through with exponent 0.

    Args:
        x: Input array (integers are promoted to float).
    Returns:
        A pair `(mantissa, exponent)`: a float array and an int32 array of `x`'s shape.

    Examples:
        >>> jnp.frexp(jnp.array([8., 0.3, -5.]))
        (Array([ 0.5  ,  0.6  , -0.625], dtype=float32), Array([ 4, -1,  3], dtype=int32))

    See also:
        `ldexp`, `modf`.
    """
    check_arraylike("frexp", x)
    (x,) = _inexact("frexp", x)
    if dtype_weak(x)[0].kind == "c":
        raise FtransTypeError("frexp does not support complex-valued inputs")
    return _frexp(x)


def _frexp_impl(x: Any) -> tuple[Any, Any]:
    d = dtype_weak(x)[0]
    info = dtypes.finfo(d)
    nmant, nexp = int(info.nmant), int(info.nexp)
    idt = np.dtype(_INT_OF_WIDTH[d.itemsize])
    mask = (1 << nexp) - 1
    bias = 1 - int(info.minexp)
    sub = jnp.less(jnp.abs(x), jnp.asarray(float(info.tiny), d))
    xn = jnp.where(sub, jnp.multiply(x, jnp.asarray(float(2 ** nmant), d)), x)
    adj = jnp.where(sub, jnp.asarray(-nmant, idt), jnp.asarray(0, idt))
    bits = lax.bitcast_convert_type(xn, idt)
    field = jnp.bitwise_and(jnp.right_shift(bits, jnp.asarray(nmant, idt)), jnp.asarray(mask, idt))
    e = jnp.add(jnp.subtract(field, jnp.asarray(bias - 1, idt)), adj)
    clear = np.array(~(mask << nmant)).astype(idt)
    bits = jnp.bitwise_or(jnp.bitwise_and(bits, jnp.asarray(clear)), jnp.asarray((bias - 1) << nmant, idt))
    m = lax.bitcast_convert_type(bits, d)
    # Tested on the scaled ``xn``: where XLA treats a subnormal input as zero (its CPU and GPU code flush
    # subnormal operands), ``x * 2**nmant`` is 0, and the result is frexp(0) = (0, 0) with derivative 1, as
    # jax 0.12 gives under jit; NumPy (the eager path) keeps the subnormal: (0.5, -148) at 1e-45.
    special = jnp.logical_or(jnp.logical_or(jnp.isinf(xn), jnp.isnan(xn)), jnp.equal(xn, jnp.zeros_like(xn)))
    e = jnp.where(special, jnp.zeros_like(e), e)
    return jnp.where(special, xn, m), jnp.astype(e, np.int32)


_frexp = custom_jvp(_frexp_impl)


@_frexp.defjvp
def _frexp_jvp(primals: tuple, tangents: tuple) -> tuple:
    """The mantissa ``x * 2**-e`` moves with ``x`` at rate ``2**-e`` (the exponent is piecewise constant)."""
    (x,), (t,) = primals, tangents
    m, e = _frexp(x)
    dm = jnp.multiply(t, jnp.exp2(jnp.negative(jnp.astype(e, t.dtype))))
    return (m, e), (dm, np.zeros(np.shape(e), float0))


def ldexp(x1: Any, x2: Any, /) -> Any:
    """Compute `x1 * 2**x2`, elementwise.

    Computed via `frexp`, so large exponents do not overflow early.

    Args:
        x1: Mantissas (floating).
        x2: Integer exponents; broadcasts against `x1`.
    Returns:
        An array of the broadcast shape with `x1`'s inexact dtype.

    Examples:
        >>> jnp.ldexp(jnp.array([0.5, 1.5]), jnp.array([4, -1]))
        Array([8.  , 0.75], dtype=float32)

    See also:
        `frexp`.
    """
    check_arraylike("ldexp", x1, x2)
    d1, d2 = dtype_weak(x1)[0], dtype_weak(x2)[0]
    if d1.kind == "c" or d2.kind in "fcV" or d2 == dtypes.bfloat16:
        raise FtransValueError(f"ldexp not supported for input types ({d1}, {d2})")
    (x1,) = _inexact("ldexp", x1)
    return _ldexp(x1, jnp.asarray(x2))


def _ldexp_impl(x1: Any, x2: Any) -> Any:
    d = dtype_weak(x1)[0]
    x2 = lax.convert_element_type(x2, d) if x2.dtype != d else x2
    m, e = _frexp(x1)
    e = jnp.astype(jnp.add(jnp.astype(e, d), x2), d)
    pos = jnp.greater(e, jnp.zeros_like(e))
    m = jnp.where(pos, jnp.multiply(m, 2), m)
    e = jnp.where(pos, jnp.subtract(e, 1), e)
    x = jnp.multiply(m, jnp.power(jnp.asarray(2, d), e))
    return jnp.where(jnp.logical_or(jnp.isinf(x1), jnp.equal(x1, jnp.zeros_like(x1))), x1, x)


_ldexp = custom_jvp(_ldexp_impl)


@_ldexp.defjvp
def _ldexp_jvp(primals: tuple, tangents: tuple) -> tuple:
    """d/dx1 ldexp(x1, n) = 2**n everywhere (also at 0, +-inf and where the frexp route's intermediate
    2**-e is subnormal), as jax 0.12; computed as ldexp(1, n), exact, linear in the tangent."""
    x1, x2 = primals
    t1 = tangents[0]
    y = _ldexp(x1, x2)
    scale = _ldexp_impl(jnp.ones_like(y), jnp.broadcast_to(x2, np.shape(y)))
    return y, jnp.multiply(jnp.broadcast_to(t1, np.shape(y)), lax.stop_gradient(scale))


def modf(x: Any, /, out: None = None) -> tuple[Any, Any]:
    """Split values into fractional and integral parts, elementwise.

    Both parts have the sign of `x`.

    Args:
        x: Input array.
        out: Unused; must be None.
    Returns:
        A pair `(fractional, integral)` of arrays of `x`'s shape and float dtype.

    Examples:
        >>> jnp.modf(jnp.array([2.5, -1.25]))
        (Array([ 0.5 , -0.25], dtype=float32), Array([ 2., -1.], dtype=float32))

    See also:
        `trunc`, `frexp`.
    """
    if out is not None:
        raise NotImplementedError("modf: out is not supported")
    check_arraylike("modf", x)
    (x,) = _inexact("modf", x)
    whole = jnp.where(jnp.greater_equal(x, jnp.zeros_like(x)), jnp.floor(x), jnp.ceil(x))
    return jnp.subtract(x, whole), whole


def fabs(x: Any, /) -> Any:
    """Absolute value in floating point, elementwise.

    Integers are promoted to the default float dtype; complex input is an error, as in NumPy.

    Args:
        x: Input array (real).
    Returns:
        An array of `x`'s shape with a floating dtype.

    Examples:
        >>> jnp.fabs(jnp.array([-2, 3]))
        Array([2., 3.], dtype=float32)

    See also:
        `absolute`.
    """
    check_arraylike("fabs", x)
    if dtype_weak(x)[0].kind == "c":
        raise FtransTypeError("ufunc 'fabs' does not support complex dtypes")
    (x,) = _inexact("fabs", x)
    return jnp.abs(x)


def float_power(x: Any, y: Any, /) -> Any:
    """Raise `x` to the power `y` elementwise, in floating point.

    The computation is in the promoted inexact type (float32 unless x64 is on, as in JAX; NumPy uses float64).

    Args:
        x: Base.
        y: Exponent; broadcasts against `x`.
    Returns:
        An array of the broadcast shape with an inexact dtype.

    Examples:
        >>> jnp.float_power(jnp.array([2, 3]), jnp.array([-1, 2]))
        Array([0.5, 9. ], dtype=float32)

    See also:
        `power`.
    """
    check_arraylike("float_power", x, y)
    x, y = _inexact("float_power", x, y)
    return jnp.power(x, y)


def sinc(x: Any, /) -> Any:
    """Normalized sinc function `sin(pi x) / (pi x)`, elementwise.

    The value at 0 is exactly 1. Its derivatives of every order at 0 are those of `sin(t)/t`, so
    `grad(grad(sinc))(0.)` is `-pi**2/3` (JAX's choice), not the 0 a plain `where` would give.

    Args:
        x: Input array (integers are promoted to float).
    Returns:
        An array of `x`'s shape and inexact dtype.

    Examples:
        >>> jnp.sinc(jnp.array([0., 0.5, 1.]))
        Array([ 1.0000000e+00,  6.3661975e-01, -2.7827534e-08], dtype=float32)

    See also:
        `sin`.
    """
    check_arraylike("sinc", x)
    (x,) = _inexact("sinc", x)
    pix = jnp.multiply(x, np.pi)
    # The series where ``pi x`` is zero or subnormal: a GPU flushes subnormals to zero, in some of a
    # program's fused kernels and not others, so ``sin(t)/t`` there could be ``sin(0)/0`` (NaN, and NaN
    # derivatives) where the test said ``t != 0``.  Below the smallest normal number the series is exact.
    apix = jnp.abs(pix)
    zero = jnp.less(apix, jnp.full_like(pix, dtypes.finfo(pix.dtype).tiny))
    safe = jnp.where(zero, jnp.ones_like(x), pix)
    # Beyond 2**(nmant+2) every float is an even integer, so sin(pi x) is exactly 0 there (``pi x`` itself overflows
    # to inf near 3e38: sin(inf) = NaN). ``x - stop_gradient(x)`` is that 0 with derivative 1, so the derivatives
    # of every order are those of sin(pi r)/(pi x) at r = 0: finite (1/x, -2/x**2, ...), as in jax 0.12 (jax
    # 0.10/0.11 give NaN at +-3e38). +-inf stays NaN (inf - inf).
    # (|pi x| >= pi * 2**(nmant+2), the same points: rounding is monotone and scaling by 2**k exact.)
    big = jnp.greater_equal(apix, jnp.full_like(pix, np.pi * 2.0 ** (dtypes.finfo(x.dtype).nmant + 2)))
    num = jnp.where(big, jnp.multiply(jnp.subtract(x, lax.stop_gradient(x)), np.pi), safe)
    return jnp.where(zero, _sinc_taylor(0, pix), jnp.divide(jnp.sin(num), safe))


def _sinc_taylor_impl(k: int, t: Any) -> Any:
    """The k-th derivative of ``sin(t)/t`` at ``t = 0``, shaped (and traced) like ``t``."""
    base = jnp.zeros_like(t)  # (not t * 0: NaN at an overflowed t, and its cotangent 0 * NaN leaks into grad)
    return base if k % 2 else jnp.add(base, (-1) ** (k // 2) / (k + 1))


_sinc_taylor = custom_jvp(_sinc_taylor_impl, nondiff_argnums=(0,))
_sinc_taylor.defjvp(lambda k, p, t: (_sinc_taylor(k, p[0]), jnp.multiply(_sinc_taylor(k + 1, p[0]), t[0])))


def spacing(x: Any, /) -> Any:
    """Distance from each value to the next representable value away from zero.

    Args:
        x: Input array (integers are promoted to float).
    Returns:
        An array of `x`'s shape and inexact dtype.

    Examples:
        >>> jnp.spacing(jnp.array([1., 1024.], dtype=jnp.float32))
        Array([1.1920929e-07, 1.2207031e-04], dtype=float32)

    See also:
        `nextafter`, `finfo`.
    """
    check_arraylike("spacing", x)
    (x,) = _inexact("spacing", x)
    d = dtype_weak(x)[0]
    if d.kind == "c":
        raise FtransValueError("jnp.spacing is not defined for complex inputs.")
    inf = jnp.full_like(x, np.inf)
    if d == np.float16:
        return jnp.subtract(jnp.nextafter(x, inf), x)
    res = jnp.subtract(jnp.nextafter(x, jnp.copysign(inf, x)), x)
    tiny = jnp.asarray(np.array(dtypes.finfo(d).smallest_subnormal, d))
    return jnp.where(jnp.equal(res, jnp.zeros_like(res)), jnp.copysign(tiny, x), res)


def _chbevl(x: Any, coefs: Sequence[float]) -> Any:
    """Clenshaw evaluation of a Chebyshev series (Cephes' ``chbevl``)."""
    b0 = jnp.full_like(x, coefs[0])
    b1 = jnp.zeros_like(x)
    b2 = b1
    for c in coefs[1:]:
        b2, b1 = b1, b0
        b0 = jnp.add(jnp.subtract(jnp.multiply(x, b1), b2), c)
    return jnp.multiply(jnp.subtract(b0, b2), 0.5)


def i0(x: Any) -> Any:
    """Modified Bessel function of the first kind, order 0, elementwise.

    Computed from Cephes' Chebyshev expansions of `exp(-|x|) I0(x)` on [0, 8] and (8, inf), the ones NumPy
    uses (the coefficient tables are read from NumPy). The derivative is jax 0.11's: `I1(x)` (so the second
    derivative at 0 is 1/2), which is `inf`, not NaN, where `exp` overflows.

    Args:
        x: Real input array (integers are promoted to float).
    Returns:
        An array of `x`'s shape and inexact dtype.

    Examples:
        >>> jnp.i0(jnp.array([0., 1., 2.]))
        Array([0.99999994, 1.266066  , 2.2795851 ], dtype=float32)

    See also:
        `kaiser`.
    """
    check_arraylike("i0", x)
    (x,) = _inexact("i0", x)
    d = dtype_weak(x)[0]
    if d.kind == "c":
        raise FtransValueError(f"Unsupported input type to jnp.i0: {d}")
    return _i0(x)


def _i0e_of_abs(ax: Any) -> Any:
    """``exp(-ax) I0(ax)`` for ``ax >= 0``."""
    from numpy.lib import _function_base_impl as _fb

    small = jnp.less_equal(ax, 8.0)
    safe_big = jnp.where(small, jnp.full_like(ax, 8.0), ax)
    e_small = _chbevl(jnp.subtract(jnp.multiply(ax, 0.5), 2.0), _fb._i0A)
    e_big = jnp.divide(_chbevl(jnp.subtract(jnp.divide(32.0, safe_big), 2.0), _fb._i0B), jnp.sqrt(safe_big))
    return jnp.where(small, e_small, e_big)


@custom_jvp
def _i0(x: Any) -> Any:
    ax = jnp.abs(x)
    if ax.dtype.itemsize < 4:  # float16/bfloat16: exp(-|x|) I0 evaluated in float32 and rounded, as JAX does
        return jnp.multiply(jnp.exp(ax), lax.bessel_i0e(ax))
    return jnp.multiply(jnp.exp(ax), _i0e_of_abs(ax))


@_i0.defjvp
def _i0_jvp(primals: tuple, tangents: tuple) -> tuple:
    # I0' = I1 exactly, so every order is right at 0 too (jax 0.11's rule; jax 0.10 set the first derivative
    # to 0 at 0, which made the second 0 there); I1 = exp(|x|) i1e(x) is inf, not NaN, where exp overflows
    (x,), (t,) = primals, tangents
    return _i0.fun(x), jnp.multiply(t, bessel_i1(x))


@custom_jvp
def bessel_i1(x: Any) -> Any:
    """I1 (``scipy.special.i1``): ``exp(|x|) i1e(x)``, its derivatives near 0 from its Maclaurin series."""
    return jnp.multiply(jnp.exp(jnp.abs(x)), lax.bessel_i1e(x))


@bessel_i1.defjvp
def _bessel_i1_jvp(primals: tuple, tangents: tuple) -> tuple:
    # Differentiating exp(|x|) i1e(x) goes wrong near 0 (the cusp of |x|, and cancellation in i1e's
    # derivatives); within sqrt(eps) of 0 the series' first two terms are exact to rounding.
    (x,), (t,) = primals, tangents
    out, d = jvp(bessel_i1.fun, (x,), (t,))
    near = jnp.less_equal(jnp.abs(x), math.sqrt(float(jnp.finfo(x.dtype).eps)))
    return out, jnp.where(near, jnp.multiply(_i1_series(1, x), t), d)


@functools.partial(custom_jvp, nondiff_argnums=(0,))
def _i1_series(k: int, x: Any) -> Any:
    """The k-th derivative of I1 near 0, from the series ``sum_m (x/2)**(2m+1) / (m! (m+1)!)``: at 0 an odd
    derivative is ``C(k, k//2) / 2**k`` and an even one 0, so near 0 the even one is the next odd one times x."""
    if k % 2:
        return jnp.full_like(x, math.comb(k, k // 2) / 2.0**k)
    return jnp.multiply(x, math.comb(k + 1, (k + 1) // 2) / 2.0 ** (k + 1))


@_i1_series.defjvp
def _i1_series_jvp(k: int, primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    return _i1_series(k, x), jnp.multiply(_i1_series(k + 1, x), t)


# ---------------------------------------------------------------- type predicates
def isscalar(element: Any) -> bool:
    """Test whether an object is a scalar.

    Following JAX's rule (which does not change under `jit`), Python and NumPy scalars and any 0-d array count
    as scalars.

    Args:
        element: Any object.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.isscalar(3.0)
        True
        >>> jnp.isscalar(jnp.array(3.0))
        True
        >>> jnp.isscalar(jnp.array([3.0]))
        False

    See also:
        `ndim`.
    """
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, jnp.ndarray, Tracer)):
        return len(shape_of(element)) == 0
    if getattr(element, "__jax_array__", None) is not None:  # what the object stands for, as in JAX
        return len(shape_of(jnp.asarray(element))) == 0
    return False


def iscomplex(x: Any) -> Any:
    """Test elementwise for a nonzero imaginary part.

    Args:
        x: Input array.
    Returns:
        A bool array of `x`'s shape (all False for real input).

    Examples:
        >>> jnp.iscomplex(jnp.array([1 + 1j, 2 + 0j, 3]))
        Array([ True, False, False], dtype=bool)

    See also:
        `isreal`, `iscomplexobj`.
    """
    i = jnp.imag(_arr("iscomplex", x))
    return jnp.not_equal(i, jnp.zeros_like(i))


def isreal(x: Any) -> Any:
    """Test elementwise for a zero imaginary part.

    Args:
        x: Input array.
    Returns:
        A bool array of `x`'s shape (all True for real input).

    Examples:
        >>> jnp.isreal(jnp.array([1 + 1j, 2 + 0j, 3]))
        Array([False,  True,  True], dtype=bool)

    See also:
        `iscomplex`, `isrealobj`.
    """
    i = jnp.imag(_arr("isreal", x))
    return jnp.equal(i, jnp.zeros_like(i))


def iscomplexobj(x: Any) -> bool:
    """Test whether an object has a complex dtype.

    The dtype decides, not the values.

    Args:
        x: Array, scalar or array-like.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.iscomplexobj(jnp.array([1 + 0j]))
        True
        >>> jnp.iscomplexobj(1.0)
        False

    See also:
        `isrealobj`, `iscomplex`.
    """
    if isinstance(x, (complex, np.complexfloating)):
        return True
    if x is None or isinstance(x, (bool, int, float, str, np.generic)):
        return False
    try:
        typ = x.dtype
    except AttributeError:
        typ = jnp.asarray(x).dtype
    return np.dtype(typ).kind == "c"


def isrealobj(x: Any) -> bool:
    """Test whether an object has a non-complex dtype.

    It is `not iscomplexobj(x)`.

    Args:
        x: Array, scalar or array-like.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.isrealobj(jnp.array([1.0]))
        True

    See also:
        `iscomplexobj`.
    """
    return not iscomplexobj(x)


_KINDS: dict[str, Callable[[np.dtype], bool]] = {
    "bool": lambda d: d == np.bool_,
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f" or d == dtypes.bfloat16,
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc" or d == dtypes.bfloat16,
}


def isdtype(dtype: Any, kind: Any) -> bool:
    """Test whether a dtype is of a given kind (array API).

    Args:
        dtype: The dtype to test.
        kind: A kind name (`'bool'`, `'signed integer'`, `'unsigned integer'`, `'integral'`, `'real
            floating'`, `'complex floating'`, `'numeric'`), a dtype, or a tuple of them.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.isdtype(jnp.float32, "real floating")
        True
        >>> jnp.isdtype(jnp.int8, ("bool", "unsigned integer"))
        False

    See also:
        `issubdtype`.
    """
    try:
        d = np.dtype(dtypes.to_dtype(dtype))
    except TypeError:
        raise FtransTypeError(f"isdtype: expected a dtype, got {dtype!r}") from None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise FtransValueError(f"isdtype: unrecognized kind {k!r}; expected one of {sorted(_KINDS)}")
            if _KINDS[k](d):
                return True
        else:
            try:
                if d == np.dtype(dtypes.to_dtype(k)):
                    return True
            except (TypeError, ValueError):
                raise FtransTypeError(f"isdtype: kind must be a str, a dtype or a tuple, got {k!r}") from None
    return False


def iterable(y: Any) -> bool:
    """Test whether an object can be iterated over.

    This is NumPy's definition: whether `iter(y)` works.

    Args:
        y: Any object.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.iterable([1, 2])
        True
        >>> jnp.iterable(2)
        False
    """
    return bool(np.iterable(y))


# ---------------------------------------------------------------- shapes and indices
def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """Move an axis so that it lies before a given position (NumPy's legacy `moveaxis`).

    Args:
        a: Input array.
        axis: The axis to move.
        start: The axis moves until it lies before this position.
    Returns:
        An array of `a`'s dtype with the axis moved.

    Examples:
        >>> jnp.rollaxis(jnp.ones((2, 3, 4)), 2).shape
        (4, 2, 3)
        >>> jnp.rollaxis(jnp.ones((2, 3, 4)), 0, 2).shape
        (3, 2, 4)

    See also:
        `moveaxis`.
    """
    a = _arr("rollaxis", a)
    start = _index("rollaxis", start, "start")
    nd = len(shape_of(a))
    axis = canonicalize_axis("rollaxis", axis, nd)
    if not -nd <= start <= nd:
        raise FtransValueError(f"rollaxis: start={start} must satisfy {-nd}<=start<={nd}")
    if start < 0:
        start += nd
    if start > axis:
        start -= 1
    return jnp.moveaxis(a, axis, start)


def unravel_index(indices: Any, shape: Any) -> tuple[Any, ...]:
    """Convert flat indices into coordinate arrays for a shape.

    Out-of-range indices are clipped, as in JAX.

    Args:
        indices: Integer array of flat indices.
        shape: The shape of the array the indices refer to.
    Returns:
        A tuple of integer arrays, one per dimension, of `indices`'s shape.

    Examples:
        >>> jnp.unravel_index(jnp.array([1, 5, 7]), (3, 3))
        (Array([0, 1, 2], dtype=int32), Array([1, 2, 1], dtype=int32))

    See also:
        `ravel_multi_index`.
    """
    idx = _arr("unravel_index", indices)
    try:
        dims = list(shape)
    except TypeError:
        dims = [shape]
    if any(np.ndim(s) != 0 for s in dims):
        raise FtransValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out: list[Any] = [0] * len(dims)
    for i, s in reversed(list(enumerate(dims))):
        idx, out[i] = jnp.divmod(idx, s)
    oob_pos = jnp.greater(idx, 0)
    oob_neg = jnp.asarray(False) if dtype_weak(idx)[0].kind == "u" else jnp.less(idx, -1)
    return tuple(jnp.where(oob_pos, s - 1, jnp.where(oob_neg, 0, i)) for s, i in zip(dims, out))


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise", order: str = "C",
                      *, dtype: Any = None) -> Any:
    """Convert a tuple of coordinate arrays into flat indices.

    `mode='raise'` checks bounds, so it needs concrete indices; `'clip'`, `'wrap'` and `'ignore'` work traced.

    Args:
        multi_index: Tuple of integer arrays, one per dimension.
        dims: The shape of the array the indices refer to.
        mode: Out-of-range handling: `'raise'` (default), `'clip'`, `'wrap'` or `'ignore'`.
        order: `'C'` (row-major, default) or `'F'` (column-major).
        dtype: Optional integer dtype of the result.
    Returns:
        An integer array of flat indices, of the broadcast shape of the inputs.

    Examples:
        >>> jnp.ravel_multi_index((jnp.array([0, 1, 2]), jnp.array([1, 0, 2])), (3, 3))
        Array([1, 3, 8], dtype=int32)

    See also:
        `unravel_index`.
    """
    if len(multi_index) != len(dims):
        raise FtransValueError(
            f"ravel_multi_index: len(multi_index)={len(multi_index)} != len(dims)={len(dims)}"
        )
    dims = tuple(_index("ravel_multi_index", d, "dims") for d in dims)
    check_arraylike("ravel_multi_index", *multi_index)
    arrs = [_as_array(i) for i in multi_index]
    if dtype is None:
        dt = dtypes.promote(((dtypes.default_int(), True),) + tuple(dtype_weak(a) for a in arrs))[0]
    else:
        dt = dtypes.canonicalize(dtypes.to_dtype(dtype))
    if dt.kind not in "iu":
        raise FtransValueError(f"ravel_multi_index: dtype={dt} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dt).max:
        raise FtransValueError(
            f"jnp.ravel_multi_index: dtype={dt} not large enough to hold flattened index for dims={dims}. "
            "Use the dtype argument to pass a suitable dtype."
        )
    for a in arrs:
        if mode == "raise":
            concrete_or_error(a, "The error occurred because ravel_multi_index was jit-compiled with "
                                 "mode='raise'. Use mode='wrap' or mode='clip' instead. The index")
        if dtype_weak(a)[0].kind not in "iu":
            raise FtransTypeError("ravel_multi_index: only int indices permitted")
    if mode == "raise":
        for a, d in zip(arrs, dims):
            v = np.asarray(concrete_or_error(a, "ravel_multi_index index"))
            if np.any((v < 0) | (v >= d)):
                # The message starts as NumPy's and JAX's do (code matches on it).
                raise FtransValueError(
                    f"invalid entry in coordinates array (ravel_multi_index, mode='raise'): an index is "
                    f"outside [0, {d}); use mode='wrap' or mode='clip' to map it into range")
    elif mode == "clip":
        arrs = [jnp.clip(a, 0, d - 1) for a, d in zip(arrs, dims)]
    elif mode == "wrap":
        arrs = [jnp.remainder(a, d) for a, d in zip(arrs, dims)]
    elif mode != "ignore":
        raise FtransValueError(f"ravel_multi_index: invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise FtransValueError(f"ravel_multi_index: invalid order={order!r}. Expected 'C' or 'F'")
    result = jnp.array(0, dtype=dt)
    for a, s in zip(arrs, strides):
        result = jnp.add(result, jnp.multiply(jnp.astype(a, dt), int(s)))
    return result


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:  # noqa: N803 - NumPy's name
    """Generate a Vandermonde matrix.

    The columns are powers of `x`, decreasing unless `increasing`.

    Args:
        x: 1-D input array.
        N: Number of columns (default `len(x)`).
        increasing: If True, the powers increase from left to right.
    Returns:
        An array of shape `(len(x), N)`.

    Examples:
        >>> jnp.vander(jnp.array([1, 2, 3]))
        Array([[1, 1, 1],
               [4, 2, 1],
               [9, 3, 1]], dtype=int32)
        >>> jnp.vander(jnp.array([1, 2, 3]), 2, increasing=True)
        Array([[1, 1],
               [1, 2],
               [1, 3]], dtype=int32)

    See also:
        `polyval`.
    """
    x = _arr("vander", x)
    if len(shape_of(x)) != 1:
        raise FtransValueError(f"vander: x must be a one-dimensional array, got shape {shape_of(x)}")
    n = shape_of(x)[0] if N is None else _index("vander", N, "N")
    if n < 0:
        raise FtransValueError("vander: N must be nonnegative")
    d = dtype_weak(x)[0]
    p = lax.iota(d, n)
    if not increasing:
        p = jnp.subtract(jnp.asarray(n - 1, d), p)
    return jnp.power(x[:, None], p[None, :])


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """Integrate along an axis with the trapezoid rule.

    Args:
        y: Sample values.
        x: Optional sample points (same length as `y` along `axis`).
        dx: Spacing between samples when `x` is None.
        axis: The axis to integrate along.
    Returns:
        An array with `axis` removed.

    Examples:
        >>> jnp.trapezoid(jnp.array([1., 2., 3.]))
        Array(4., dtype=float32)
        >>> jnp.trapezoid(jnp.array([1., 2., 3.]), x=jnp.array([0., 1., 3.]))
        Array(6.5, dtype=float32)

    See also:
        `cumsum`.
    """
    if x is None:
        check_arraylike("trapezoid", y)
        (y,) = _inexact("trapezoid", y)
        dxa = jnp.asarray(dx)
        if dxa.ndim > 0:
            dxa = jnp.expand_dims(dxa, tuple(range(len(shape_of(y)) - dxa.ndim)))
            dxa = jnp.moveaxis(dxa, axis, -1)
    else:
        check_arraylike("trapezoid", y, x)
        y, xa = _inexact_nobcast("trapezoid", y, x)
        dxa = diff(xa) if xa.ndim == 1 else jnp.moveaxis(diff(xa, axis=axis), axis, -1)
    y = jnp.moveaxis(y, axis, -1)
    if dxa.ndim == 0 or shape_of(dxa)[-1] == 1:
        dred = dxa if dxa.ndim == 0 else dxa[..., 0]
        return jnp.multiply(dred, jnp.subtract(jnp.sum(y, -1), jnp.multiply(0.5, jnp.add(y[..., 0], y[..., -1]))))
    return jnp.multiply(0.5, jnp.sum(jnp.multiply(dxa, jnp.add(y[..., 1:], y[..., :-1])), -1))


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """Return a copy of an array with its main diagonal set.

    Arrays are immutable, so `inplace=False` is required.

    Args:
        a: Array with at least 2 dimensions (all of equal length beyond 2-D).
        val: Scalar or array of values for the diagonal (cycled as needed).
        wrap: For tall 2-D matrices, whether the diagonal wraps after N columns, as in NumPy.
        inplace: Must be False.
    Returns:
        A new array of `a`'s shape and dtype.

    Examples:
        >>> jnp.fill_diagonal(jnp.zeros((3, 3)), 5, inplace=False)
        Array([[5., 0., 0.],
               [0., 5., 0.],
               [0., 0., 5.]], dtype=float32)

    See also:
        `diag_indices`, `Array.at`.
    """
    if inplace:
        raise NotImplementedError("fill_diagonal: inplace=True is not supported; JAX arrays are immutable, "
                                  "pass inplace=False")
    if wrap:
        raise NotImplementedError("fill_diagonal: wrap=True is not supported")
    a, val = _arr("fill_diagonal", a), _arr("fill_diagonal", val)
    shape = tuple(shape_of(a))
    if len(shape) < 2:
        raise FtransValueError(f"fill_diagonal: array must be at least 2-d, got shape {shape}")
    if len(shape) > 2 and not all(n == shape[0] for n in shape[1:]):
        raise FtransValueError(f"fill_diagonal: all dimensions of input must be of equal length, got {shape}")
    n = min(shape)
    idx = (jnp.arange(n),) * len(shape)
    if shape_of(val):
        flat = jnp.ravel(val)
        size = shape_of(flat)[0]
        if size < n:
            flat = jnp.tile(flat, math.ceil(n / size))
        val = flat[:n]
    return a.at[idx].set(val)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None) -> Any:
    """Return a copy of an array with values put at matching 1-D index slices along an axis.

    This is the scatter counterpart of `take_along_axis`. Arrays are immutable, so `inplace=False` is
    required.

    Args:
        arr: Input array.
        indices: Integer array with `arr`'s number of dimensions.
        values: Values to put; broadcast against `indices`.
        axis: The axis to index along (None: the flattened array).
        inplace: Must be False (NumPy's in-place update is impossible on immutable arrays).
        mode: Out-of-range handling, as in `Array.at[...].set`.
    Returns:
        A new array of `arr`'s shape and dtype.

    Examples:
        >>> x = jnp.array([[1, 2, 3], [4, 5, 6]])
        >>> jnp.put_along_axis(x, jnp.array([[0], [2]]), 0, axis=1, inplace=False)
        Array([[0, 2, 3],
               [4, 5, 0]], dtype=int32)

    See also:
        `take_along_axis`, `Array.at`.
    """
    if inplace:
        raise FtransValueError("put_along_axis cannot modify arrays in-place, because ftrans arrays are "
                               "immutable. Pass inplace=False to instead return an updated array.")
    check_arraylike("put_along_axis", arr, indices, values)
    arr, indices, values = _as_array(arr), _as_array(indices), _as_array(values)
    original_shape = tuple(shape_of(arr))
    if axis is None:
        arr = jnp.ravel(arr)
        axis = 0
    nd = len(shape_of(arr))
    if nd != len(shape_of(indices)):
        raise FtransValueError(f"put_along_axis arguments 'arr' and 'indices' must have same ndim. "
                               f"Got arr.ndim={nd} and indices.ndim={len(shape_of(indices))}.")
    axis = canonicalize_axis("put_along_axis", axis, nd)
    ishape = tuple(shape_of(indices))
    try:
        values = jnp.broadcast_to(values, ishape)
    except ValueError:
        raise FtransValueError(f"put_along_axis argument 'values' must be broadcastable to 'indices'. "
                               f"Got values.shape={shape_of(values)} and indices.shape={ishape}.") from None
    idx = []
    for i in range(nd):
        if i == axis:
            idx.append(indices)
        else:
            shp = tuple(ishape[i] if j == i else 1 for j in range(nd))
            idx.append(lax.broadcasted_iota(dtypes.default_int(), shp, i))
    result = arr.at[tuple(idx)].set(values, mode=mode)
    if tuple(shape_of(result)) != original_shape:
        result = jnp.reshape(result, original_shape)
    return result


# ---------------------------------------------------------------- polynomials
def polyval(p: Any, x: Any, *, unroll: int | None = None) -> Any:
    """Evaluate a polynomial at given points.

    The coefficients run from the highest power down; Horner's rule runs over the leading axis of `p`.

    Args:
        p: Coefficients, highest power first.
        x: Points at which to evaluate.
        unroll: Accepted for JAX compatibility (jax 0.12 defaults it to None, earlier jax to 16) and ignored.
    Returns:
        An array of the broadcast shape of `x` (and any trailing axes of `p`).

    Examples:
        >>> jnp.polyval(jnp.array([1, 0, -1]), jnp.array([0, 1, 2, 3]))
        Array([-1,  0,  3,  8], dtype=int32)

    See also:
        `polyfit`, `roots`.
    """
    (p, x), _, _ = promote_dtypes("polyval", p, x)
    pshape, xshape = tuple(shape_of(p)), tuple(shape_of(x))
    if not pshape:
        raise FtransValueError("polyval: p must be at least 1-dimensional")
    shape = jnp.broadcast_shapes(pshape[1:], xshape)
    y = jnp.full_like(x, 0, shape=shape, dtype=dtype_weak(x)[0])
    for i in range(pshape[0]):
        y = jnp.add(jnp.multiply(y, x), p[i])
    return y


def polyadd(a1: Any, a2: Any) -> Any:
    """Add two polynomials.

    The coefficient arrays (highest power first) are aligned at the constant term.

    Args:
        a1: First coefficients.
        a2: Second coefficients.
    Returns:
        The coefficients of the sum.

    Examples:
        >>> jnp.polyadd(jnp.array([1, 2, 3]), jnp.array([10, 20]))
        Array([ 1, 12, 23], dtype=int32)

    See also:
        `polysub`, `polymul`.
    """
    (a1, a2), _, _ = promote_dtypes("polyadd", a1, a2)
    n1, n2 = shape_of(a1)[0], shape_of(a2)[0]
    if n2 <= n1:
        return a1.at[n1 - n2:].add(a2)
    return a2.at[n2 - n1:].add(a1)


def polysub(a1: Any, a2: Any) -> Any:
    """Subtract one polynomial from another.

    Args:
        a1: Coefficients of the minuend (highest power first).
        a2: Coefficients of the subtrahend.
    Returns:
        The coefficients of the difference.

    Examples:
        >>> jnp.polysub(jnp.array([1, 2, 3]), jnp.array([1, 1]))
        Array([1, 1, 2], dtype=int32)

    See also:
        `polyadd`.
    """
    (a1, a2), _, _ = promote_dtypes("polysub", a1, a2)
    return polyadd(a1, jnp.negative(a2))


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    """Multiply two polynomials.

    The product is a full convolution (one convolution primitive, so low-precision inputs accumulate in a
    wider type, as in JAX).

    Args:
        a1: First coefficients (highest power first).
        a2: Second coefficients.
        trim_leading_zeros: Strip leading zeros of the result (needs concrete values).
    Returns:
        The coefficients of the product.

    Examples:
        >>> jnp.polymul(jnp.array([1, 1]), jnp.array([1, -1]))
        Array([ 1.,  0., -1.], dtype=float32)

    See also:
        `polydiv`, `convolve`.
    """
    check_arraylike("polymul", a1, a2)
    a1, a2 = _inexact_nobcast("polymul", a1, a2)
    for a in (a1, a2):
        if len(shape_of(a)) != 1:
            raise FtransValueError(f"polymul: inputs must be 1-d coefficient arrays, got shape {shape_of(a)}")
    if trim_leading_zeros and (shape_of(a1)[0] > 1 or shape_of(a2)[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if shape_of(a1)[0] == 0:
        a1 = jnp.zeros(1, dtype_weak(a2)[0])
    if shape_of(a2)[0] == 0:
        a2 = jnp.zeros(1, dtype_weak(a1)[0])
    return jnp.convolve(a1, a2)


def polyder(p: Any, m: int = 1) -> Any:
    """Differentiate a polynomial.

    Args:
        p: Coefficients (highest power first).
        m: Order of the derivative.
    Returns:
        The coefficients of the `m`-th derivative.

    Examples:
        >>> jnp.polyder(jnp.array([1, 2, 3, 4]))
        Array([3., 4., 3.], dtype=float32)
        >>> jnp.polyder(jnp.array([1, 2, 3, 4]), m=2)
        Array([6., 4.], dtype=float32)

    See also:
        `polyint`.
    """
    check_arraylike("polyder", p)
    m = _index("polyder", m, "m")
    (p,) = _inexact("polyder", p)
    if m < 0:
        raise FtransValueError("polyder: order of derivative must be positive")
    if m == 0:
        return p
    n = shape_of(p)[0]
    d = dtype_weak(p)[0]
    coeff = jnp.prod(jnp.subtract(jnp.arange(m, n, dtype=d)[None], jnp.arange(m, dtype=d)[:, None]), 0)
    return jnp.multiply(p[:-m], coeff[::-1])


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """Integrate a polynomial.

    Args:
        p: Coefficients (highest power first).
        m: Order of the antiderivative.
        k: Integration constants (a scalar or `m` values; default 0).
    Returns:
        The coefficients of the `m`-th antiderivative.

    Examples:
        >>> jnp.polyint(jnp.array([3., 2., 1.]))
        Array([1., 1., 1., 0.], dtype=float32)
        >>> jnp.polyint(jnp.array([3., 2., 1.]), k=5.)
        Array([1., 1., 1., 5.], dtype=float32)

    See also:
        `polyder`.
    """
    m = _index("polyint", m, "m")
    k = 0 if k is None else k
    check_arraylike("polyint", p, k)
    p, k = _inexact_nobcast("polyint", p, k)
    if m < 0:
        raise FtransValueError("polyint: order of integral must be positive (see polyder)")
    k = jnp.atleast_1d(k)
    if shape_of(k)[0] == 1:
        k = jnp.full((m,), k[0])
    if tuple(shape_of(k)) != (m,):
        raise FtransValueError("polyint: k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    d = dtype_weak(p)[0]
    n = shape_of(p)[0]
    grid = jnp.subtract(jnp.arange(n + m, dtype=d)[None], jnp.arange(m, dtype=d)[:, None])
    coeff = jnp.prod(jnp.maximum(1, grid), 0)[::-1]
    return jnp.true_divide(jnp.concatenate((p, k)), coeff)


def _inexact_nobcast(name: str, *args: Any) -> list:
    """Promote to one inexact dtype without broadcasting (for arguments of unrelated shapes)."""
    ops, dt, weak = promote_dtypes(name, *args)
    if not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
        ops = [convert(o, dt, weak) for o in ops]
    return ops


# ---------------------------------------------------------------- counting and histograms
def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None,
             out_sharding: Any = None) -> Any:
    """Count the occurrences of each non-negative integer value.

    The output length is `length` when given (values beyond it are dropped), otherwise `max(minlength, max(x)
    + 1)`, which needs a concrete `x`: under `jit` pass `length`.

    Args:
        x: 1-D array of non-negative integers.
        weights: Optional weights, summed per value instead of counting.
        minlength: Minimum length of the result.
        length: Static length of the result (needed under `jit`).
        out_sharding: Optional sharding to lay the result out with.
    Returns:
        A 1-D array of counts (default int) or summed weights.

    Examples:
        >>> jnp.bincount(jnp.array([0, 1, 1, 3]))
        Array([1, 2, 0, 1], dtype=int32)
        >>> jnp.bincount(jnp.array([0, 1, 1, 3]), length=6)
        Array([1, 2, 0, 1, 0, 0], dtype=int32)
        >>> jnp.bincount(jnp.array([0, 1, 1]), weights=jnp.array([0.5, 1., 2.]))
        Array([0.5, 3. ], dtype=float32)

    See also:
        `histogram`, `unique`.
    """
    x = _arr("bincount", x)
    d = dtype_weak(x)[0]
    if d == np.bool_:
        x = jnp.astype(x, np.int32)
    elif d.kind not in "iu":
        raise FtransTypeError(f"x argument to bincount must have an integer type; got {d}")
    if len(shape_of(x)) != 1:
        raise FtransValueError(f"bincount: only 1-dimensional input supported, got shape {shape_of(x)}")
    minlength = _index("bincount", minlength, "minlength")
    if length is None:
        v = np.asarray(concrete_or_error(x, "bincount needs a static `length` for traced input; the argument x"))
        length = max(minlength, int(max(0, v.max())) + 1 if v.size else 0)
    elif not is_symbolic_dim(length):
        length = _index("bincount", length, "length")
    if weights is None:
        w = jnp.asarray(np.array(1, dtypes.default_int()))
        wd = w.dtype
    else:
        w = _arr("bincount", weights)
        if tuple(shape_of(w)) != tuple(shape_of(x)):
            raise FtransValueError(f"bincount: weights shape {shape_of(w)} must match x shape {shape_of(x)}")
        wd = dtype_weak(w)[0]
    if out_sharding is not None:
        from ftrans.errors import ShardingTypeError
        from ftrans.lax._sharding import _resolve

        out_sharding = _resolve(out_sharding, "jnp.bincount")
        spec = getattr(out_sharding, "spec", None)
        if spec is not None and (any(e is not None for e in spec) or spec.reduced or (
                spec.unreduced and set(spec.unreduced) != set(out_sharding.mesh.axis_names))):
            raise ShardingTypeError(
                "out_sharding passed to `jnp.bincount` can only be fully replicated or fully unreduced along all "
                f"mesh axes; got {out_sharding}")
        if spec is not None and spec.unreduced:
            return unreduced_scatter_add(jnp.zeros(length, wd), w, jnp.clip(x, 0), out_sharding,
                                          {"mode": "drop"})
        return jnp.zeros(length, wd).at[jnp.clip(x, 0)].add(w, mode="drop", out_sharding=out_sharding)
    return jnp.zeros(length, wd).at[jnp.clip(x, 0)].add(w, mode="drop")


def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Any:
    """Return the index of the bin each value falls in.

    The bins may be increasing or decreasing.

    Args:
        x: Input values.
        bins: 1-D monotonic array of bin edges.
        right: Whether the bins include their right edge instead of the left one.
        method: Search method, passed on to `searchsorted`.
    Returns:
        An integer array of `x`'s shape.

    Examples:
        >>> jnp.digitize(jnp.array([0.5, 1.0, 2.5, 4.0]), jnp.array([1., 2., 3.]))
        Array([0, 1, 2, 3], dtype=int32)
        >>> jnp.digitize(jnp.array([1.0, 2.5]), jnp.array([1., 2., 3.]), right=True)
        Array([0, 2], dtype=int32)

    See also:
        `searchsorted`, `histogram`.
    """
    check_arraylike("digitize", x, bins)
    x, b = _as_array(x), _as_array(bins)
    if len(shape_of(b)) != 1:
        raise FtransValueError(f"digitize: bins must be a 1-dimensional array; got shape {shape_of(b)}")
    n = shape_of(b)[0]
    if n == 0:
        return jnp.zeros_like(x, dtype=np.int32)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    return jnp.where(jnp.greater_equal(b[-1], b[0]), jnp.searchsorted(b, x, side=side, **kw),
                     jnp.subtract(n, jnp.searchsorted(b[::-1], x, side=side, **kw)))


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:  # noqa: A002
    """Compute the edges of the bins `histogram` would use.

    `bins + 1` equal-width edges over `range` (or the range of the data).

    Args:
        a: Input data (flattened).
        bins: Number of bins, or an array of edges (returned as they are).
        range: Optional `(min, max)` of the bins.
        weights: Ignored; accepted for NumPy compatibility.
    Returns:
        A 1-D array of edges.

    Examples:
        >>> jnp.histogram_bin_edges(jnp.array([1., 2., 5.]), bins=4)
        Array([1., 2., 3., 4., 5.], dtype=float32)

    See also:
        `histogram`.
    """
    if isinstance(bins, str):
        raise NotImplementedError("histogram_bin_edges: string values for bins are not supported")
    check_arraylike("histogram_bin_edges", a, bins)
    (arr,) = _inexact("histogram_bin_edges", a)
    d = dtype_weak(arr)[0]
    if np.ndim(bins) == 1:
        return jnp.asarray(bins, dtype=d)
    nbins = _index("histogram_bin_edges", bins, "bins")
    if range is None:
        lo, hi = jnp.min(arr), jnp.max(arr)
    else:
        if np.shape(range) != (2,):
            raise FtransValueError(f"histogram: range must be None or a pair of scalars, got {range}")
        lo, hi = jnp.asarray(range[0], d), jnp.asarray(range[1], d)
    lo, hi = jnp.astype(lo, d), jnp.astype(hi, d)
    same = jnp.equal(hi, lo)
    lo, hi = jnp.where(same, jnp.subtract(lo, 0.5), lo), jnp.where(same, jnp.add(hi, 0.5), hi)
    return jnp.linspace(lo, hi, nbins + 1, dtype=d)


def histogram(a: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
              density: bool | None = None) -> tuple[Any, Any]:
    """Compute the histogram of a data set.

    The last bin includes its right edge.

    Args:
        a: Input data (flattened).
        bins: Number of equal-width bins (static), or an array of edges.
        range: Optional `(min, max)` of the bins (default: the data range).
        weights: Optional weights per sample (summed per bin instead of counting).
        density: If True, return a probability density instead of counts.
    Returns:
        A pair `(hist, bin_edges)`.

    Examples:
        >>> counts, edges = jnp.histogram(jnp.array([1., 2., 2., 3., 5.]), bins=4)
        >>> counts
        Array([1., 2., 1., 1.], dtype=float32)
        >>> edges
        Array([1., 2., 3., 4., 5.], dtype=float32)

    See also:
        `histogram2d`, `histogramdd`, `bincount`.
    """
    if weights is None:
        check_arraylike("histogram", a, bins)
        (a,) = _inexact("histogram", a)
        w = jnp.ones_like(a)
    else:
        check_arraylike("histogram", a, bins, weights)
        if tuple(shape_of(a)) != tuple(shape_of(weights)):
            raise FtransValueError("histogram: weights should have the same shape as a.")
        a, w = _inexact("histogram", a, weights)
    edges = histogram_bin_edges(a, bins, range, w)
    ne = shape_of(edges)[0]
    idx = jnp.searchsorted(edges, a, side="right")
    idx = jnp.where(jnp.equal(a, edges[-1]), ne - 1, idx)
    counts = jnp.zeros(ne, dtype_weak(w)[0]).at[idx].add(w)[1:]
    if density:
        counts = jnp.divide(jnp.divide(counts, diff(edges)), jnp.sum(counts))
    return counts, edges


# ---------------------------------------------------------------- sets
def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    """Test whether each element is in a set of test values.

    Every pair is compared (`method` is accepted for JAX compatibility).

    Args:
        element: Input array.
        test_elements: The values to look for (any shape).
        assume_unique: Ignored; accepted for NumPy compatibility.
        invert: If True, test for absence instead.
        method: `'auto'`, `'compare_all'`, `'binary_search'` or `'sort'`: the same result for each.
    Returns:
        A bool array of `element`'s shape.

    Examples:
        >>> jnp.isin(jnp.array([1, 2, 3, 4]), jnp.array([2, 4]))
        Array([False,  True, False,  True], dtype=bool)
        >>> jnp.isin(jnp.array([1, 2, 3, 4]), jnp.array([2, 4]), invert=True)
        Array([ True, False,  True, False], dtype=bool)

    See also:
        `intersect1d`, `searchsorted`.
    """
    check_arraylike("isin", element, test_elements)
    e, t = _as_array(element), jnp.ravel(_as_array(test_elements))
    if shape_of(t)[0] == 0:
        res = jnp.zeros(shape_of(e), np.bool_)
    else:
        res = jnp.any(jnp.equal(jnp.expand_dims(e, -1), t), axis=-1)
    return jnp.logical_not(res) if invert else res


def _sorted_distinct(x: Any) -> tuple[Any, Any]:
    """``sort(x)`` and a mask of the first occurrence of each value in it."""
    s = jnp.sort(x)
    if shape_of(s)[0] == 0:
        return s, jnp.zeros(0, np.bool_)
    first = jnp.concatenate([jnp.ones(1, np.bool_), jnp.not_equal(s[1:], s[:-1])])
    return s, first


def _compact(name: str, cand: Any, mask: Any, size: int | None, fill_value: Any, default_fill: Any) -> Any:
    """The selected candidates, sorted; padded to ``size`` with the fill value when given.

    Unselected candidates are replaced by the largest value of the dtype so a
    sort moves them behind the selected ones.
    """
    d = dtype_weak(cand)[0]
    n = shape_of(cand)[0]
    if size is None:
        count = int(np.asarray(concrete_or_error(jnp.sum(mask), f"{name} needs a static `size` for traced "
                                                                 "inputs; the number of results")))
    else:
        size = _index(name, size, "size")
    big = np.inf if d.kind in "fc" else (True if d == np.bool_ else np.iinfo(d).max)
    srt = jnp.sort(jnp.where(mask, cand, jnp.asarray(big, d)))
    if size is None:
        return srt[:count]
    if n < size:
        srt = jnp.concatenate([srt, jnp.zeros(size - n, d)])
    srt = srt[:size]
    count = jnp.sum(mask)
    # The default fill is the smallest value picked (zero when nothing is), as in JAX.
    fill = (jnp.where(count > 0, srt[0], jnp.zeros((), d)) if default_fill is None else jnp.asarray(default_fill, d)) \
        if fill_value is None else jnp.asarray(fill_value, d)
    return jnp.where(jnp.less(jnp.arange(size), count), srt, fill)


def _set_operands(name: str, ar1: Any, ar2: Any) -> tuple[Any, Any]:
    check_arraylike(name, ar1, ar2)
    (a, b), _, _ = promote_dtypes(name, ar1, ar2)
    return jnp.ravel(a), jnp.ravel(b)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Return the sorted unique values present in either of two arrays.

    `size` and `fill_value` make it usable under `jit`.

    Args:
        ar1: First array (flattened).
        ar2: Second array (flattened).
        size: Optional static length of the result.
        fill_value: Value used to pad up to `size`.
    Returns:
        A 1-D array in the promoted dtype.

    Examples:
        >>> jnp.union1d(jnp.array([1, 3]), jnp.array([2, 3, 5]))
        Array([1, 2, 3, 5], dtype=int32)

    See also:
        `intersect1d`, `unique`.
    """
    check_arraylike("union1d", ar1, ar2)
    if size is None:
        concrete_or_error(ar1, "union1d needs a static `size` for traced inputs; the argument ar1")
        concrete_or_error(ar2, "union1d needs a static `size` for traced inputs; the argument ar2")
    return jnp.unique(jnp.concatenate((jnp.ravel(ar1), jnp.ravel(ar2))), size=size, fill_value=fill_value)


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """Return the sorted unique values of one array that are not in another.

    `size` and `fill_value` make it usable under `jit`.

    Args:
        ar1: Array of candidate values (flattened).
        ar2: Values to remove.
        assume_unique: Promise that `ar1` has unique elements.
        size: Optional static length of the result.
        fill_value: Value used to pad up to `size`.
    Returns:
        A 1-D array of `ar1`'s dtype.

    Examples:
        >>> jnp.setdiff1d(jnp.array([5, 1, 3, 1]), jnp.array([3]))
        Array([1, 5], dtype=int32)
        >>> jnp.setdiff1d(jnp.array([5, 1, 3]), jnp.array([3]), size=3, fill_value=0)
        Array([1, 5, 0], dtype=int32)

    See also:
        `intersect1d`, `setxor1d`.
    """
    a = jnp.ravel(_arr("setdiff1d", ar1))
    b = jnp.ravel(_arr("setdiff1d", ar2))
    if assume_unique:  # NumPy's definition: the entries of ``ar1`` not in ``ar2``, in their order
        (out,) = _pick("setdiff1d", isin(a, b, invert=True), size, 0 if fill_value is None else fill_value,
                       (a, None))
        return out
    cand, first = _sorted_distinct(a)
    mask = jnp.logical_and(first, isin(cand, b, invert=True))
    return _compact("setdiff1d", cand, mask, size, fill_value, 0)


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: Any = None) -> Any:
    """Return the sorted unique values present in both of two arrays.

    `size` and `fill_value` make it usable under `jit`. With `return_indices` the index of each value's first
    occurrence in each (flattened) input is also returned; entries past the intersection's end, when `size`
    pads it, hold each input's length, as in JAX.

    Args:
        ar1: First array (flattened).
        ar2: Second array (flattened).
        assume_unique: Promise that both inputs have unique elements, which saves work.
        return_indices: Also return the indices of the common values in each input.
        size: Optional static length of the result.
        fill_value: Value used to pad up to `size`.
    Returns:
        The 1-D array of common values, or a triple `(values, indices1, indices2)`.

    Examples:
        >>> jnp.intersect1d(jnp.array([1, 3, 4, 3]), jnp.array([3, 1, 2, 1]))
        Array([1, 3], dtype=int32)
        >>> jnp.intersect1d(jnp.array([1, 3, 4]), jnp.array([3, 1, 2]), return_indices=True)
        (Array([1, 3], dtype=int32), Array([0, 1], dtype=int32), Array([1, 0], dtype=int32))

    See also:
        `union1d`, `setdiff1d`, `isin`.
    """
    if assume_unique:
        return _intersect1d_assumed_unique(ar1, ar2, return_indices, size, fill_value)
    if return_indices:
        return _intersect1d_indices(ar1, ar2, size, fill_value)
    a, b = _set_operands("intersect1d", ar1, ar2)
    cand, first = _sorted_distinct(a)
    mask = jnp.logical_and(first, isin(cand, b))
    return _compact("intersect1d", cand, mask, size, fill_value, None)


def _intersect1d_assumed_unique(ar1: Any, ar2: Any, return_indices: bool, size: int | None, fill_value: Any) -> Any:
    """NumPy's definition under ``assume_unique``: equal neighbours in the sorted concatenation (so a value
    repeated inside one input counts too)."""
    a, b = _set_operands("intersect1d", ar1, ar2)
    n1, n2 = shape_of(a)[0], shape_of(b)[0]
    di = dtypes.default_int()
    aux, perm = lax.sort((jnp.concatenate([a, b]), lax.iota(di, n1 + n2)), num_keys=1, is_stable=True)
    if n1 + n2 < 2:
        mask = jnp.zeros(0, np.bool_)
        aux, lo, hi = aux[:0], perm[:0], perm[:0]
    else:
        mask = jnp.equal(aux[1:], aux[:-1])
        aux, lo, hi = aux[:-1], perm[:-1], perm[1:] - n1
    if not return_indices:
        return _compact("intersect1d", aux, mask, size, fill_value, None)
    return _pick("intersect1d", mask, size, fill_value, (aux, None), (lo, n1), (hi, n2))


def _pick(name: str, mask: Any, size: int | None, fill_value: Any, *cols: tuple) -> tuple:
    """The entries of each column where ``mask`` holds, in order; padded to ``size`` when given.

    ``cols`` are ``(array, pad)`` pairs: the first is the values (padded with
    ``fill_value``, default its first picked entry), the others indices padded
    with their ``pad``.
    """
    if size is None:
        count = int(np.asarray(concrete_or_error(jnp.sum(mask), f"{name} needs a static `size` for traced "
                                                                 "inputs; the number of results")))
        (pos,) = jnp.nonzero(mask, size=count)
        return tuple(c[pos] for c, _ in cols)
    size = _index(name, size, "size")
    (pos,) = jnp.nonzero(mask, size=size, fill_value=0)
    valid = jnp.less(jnp.arange(size), jnp.sum(mask))
    (vals, _), *rest = cols
    d = dtype_weak(vals)[0]
    if shape_of(vals)[0] == 0:
        return (jnp.full((size,), 0 if fill_value is None else fill_value, d),
                *(jnp.full((size,), pad, dtypes.default_int()) for _, pad in rest))
    picked = vals[pos]
    fill = jnp.where(valid[0], picked[0], jnp.zeros((), d)) if fill_value is None else jnp.asarray(fill_value, d)
    return (jnp.where(valid, picked, fill),
            *(jnp.where(valid, c[pos], pad).astype(dtypes.default_int()) for c, pad in rest))


def _intersect1d_indices(ar1: Any, ar2: Any, size: int | None, fill_value: Any) -> Any:
    a, b = _set_operands("intersect1d", ar1, ar2)
    n1, n2 = shape_of(a)[0], shape_of(b)[0]
    di = dtypes.default_int()
    cand, perm = lax.sort((a, lax.iota(di, n1)), num_keys=1, is_stable=True)
    if n1 == 0 or n2 == 0:
        k = 0 if size is None else _index("intersect1d", size, "size")
        vals = jnp.full((k,), 0 if fill_value is None else fill_value, dtype_weak(a)[0])
        return vals, jnp.full((k,), n1, di), jnp.full((k,), n2, di)
    first = jnp.concatenate([jnp.ones(1, np.bool_), jnp.not_equal(cand[1:], cand[:-1])])
    eq = jnp.equal(jnp.expand_dims(cand, -1), b)
    mask = jnp.logical_and(first, jnp.any(eq, axis=-1))
    in_b = jnp.argmax(eq, axis=-1).astype(di)  # the first match in ``b``
    return _pick("intersect1d", mask, size, fill_value, (cand, None), (perm, n1), (in_b, n2))


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """Return the sorted values that are in exactly one of two arrays.

    This is NumPy's definition: the values occurring once in the concatenation of the (unique'd) inputs. With
    `assume_unique` the inputs are taken as they are, so a value repeated inside one input is not in the
    result.

    Args:
        ar1: First array (flattened).
        ar2: Second array (flattened).
        assume_unique: Promise that both inputs have unique elements.
        size: Optional static length of the result.
        fill_value: Value used to pad up to `size`.
    Returns:
        A 1-D array in the promoted dtype.

    Examples:
        >>> jnp.setxor1d(jnp.array([1, 2, 3]), jnp.array([2, 3, 4]))
        Array([1, 4], dtype=int32)

    See also:
        `setdiff1d`, `union1d`.
    """
    a, b = _set_operands("setxor1d", ar1, ar2)
    if not assume_unique:
        sa, fa = _sorted_distinct(a)
        sb, fb = _sorted_distinct(b)
        big = _largest(dtype_weak(sa)[0])
        # Repeats become the dtype's largest value, marked so they never count (see ``keep`` below).
        a = jnp.where(fa, sa, big)
        b = jnp.where(fb, sb, big)
        real = jnp.concatenate([fa, fb])
    else:
        real = jnp.ones(shape_of(a)[0] + shape_of(b)[0], np.bool_)
    # Sorted by value, real entries before padded repeats of the same value, so equal real values sit together.
    aux, fake = lax.sort((jnp.concatenate([a, b]), jnp.logical_not(real)), num_keys=2, is_stable=True)
    real = jnp.logical_not(fake)
    n = shape_of(aux)[0]
    if n == 0:
        return _compact("setxor1d", aux, jnp.zeros(0, np.bool_), size, fill_value, None)
    diff = jnp.not_equal(aux[1:], aux[:-1])
    before = jnp.concatenate([jnp.ones(1, np.bool_), diff])
    after = jnp.concatenate([diff, jnp.ones(1, np.bool_)])
    if not assume_unique:
        # Only real neighbours count: a padded repeat equal to a real value must not hide it.
        same_prev = jnp.logical_and(jnp.logical_not(before), jnp.concatenate([jnp.zeros(1, np.bool_), real[:-1]]))
        same_next = jnp.logical_and(jnp.logical_not(after), jnp.concatenate([real[1:], jnp.zeros(1, np.bool_)]))
        keep = jnp.logical_and(real, jnp.logical_not(jnp.logical_or(same_prev, same_next)))
    else:
        keep = jnp.logical_and(before, after)
    return _compact("setxor1d", aux, keep, size, fill_value, None)


def _largest(d: np.dtype) -> Any:
    return np.inf if d.kind in "fc" else (True if d == np.bool_ else np.iinfo(d).max)


class UniqueCountsResult(tuple):
    """``(values, counts)`` with attribute access, as JAX's ``unique_counts`` returns."""

    __slots__ = ()
    _fields = ("values", "counts")

    def __new__(cls, *args: Any) -> UniqueCountsResult:
        return tuple.__new__(cls, args)

    values = property(lambda self: self[0])
    counts = property(lambda self: self[1])


class UniqueInverseResult(tuple):
    """``(values, inverse_indices)`` with attribute access."""

    __slots__ = ()
    _fields = ("values", "inverse_indices")

    def __new__(cls, *args: Any) -> UniqueInverseResult:
        return tuple.__new__(cls, args)

    values = property(lambda self: self[0])
    inverse_indices = property(lambda self: self[1])


class UniqueAllResult(tuple):
    """``(values, indices, inverse_indices, counts)`` with attribute access."""

    __slots__ = ()
    _fields = ("values", "indices", "inverse_indices", "counts")

    def __new__(cls, *args: Any) -> UniqueAllResult:
        return tuple.__new__(cls, args)

    values = property(lambda self: self[0])
    indices = property(lambda self: self[1])
    inverse_indices = property(lambda self: self[2])
    counts = property(lambda self: self[3])


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Return the sorted unique values of an array (array API).

    NaNs are kept distinct. `size` and `fill_value` work as in `unique`.

    Args:
        x: Input array (flattened).
        size: Optional static number of values to return.
        fill_value: Value used to pad up to `size`.
    Returns:
        A 1-D array of `x`'s dtype.

    Examples:
        >>> jnp.unique_values(jnp.array([2, 1, 2]))
        Array([1, 2], dtype=int32)

    See also:
        `unique`.
    """
    return jnp.unique(_arr("unique_values", x), equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueCountsResult:
    """Return the unique values of an array and their counts (array API).

    Args:
        x: Input array (flattened).
        size: Optional static number of values to return.
        fill_value: Value used to pad up to `size`.
    Returns:
        A named tuple `(values, counts)`.

    Examples:
        >>> jnp.unique_counts(jnp.array([2, 1, 2]))
        (Array([1, 2], dtype=int32), Array([1, 2], dtype=int32))

    See also:
        `unique`.
    """
    v, c = jnp.unique(_arr("unique_counts", x), return_counts=True, equal_nan=False, size=size,
                      fill_value=fill_value)
    return UniqueCountsResult(v, c)


def unique_inverse(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueInverseResult:
    """Return the unique values of an array and the inverse map (array API).

    Args:
        x: Input array.
        size: Optional static number of values to return.
        fill_value: Value used to pad up to `size`.
    Returns:
        A named tuple `(values, inverse_indices)`; the inverse has `x`'s shape.

    Examples:
        >>> jnp.unique_inverse(jnp.array([2, 1, 2]))
        (Array([1, 2], dtype=int32), Array([1, 0, 1], dtype=int32))

    See also:
        `unique`.
    """
    v, inv = jnp.unique(_arr("unique_inverse", x), return_inverse=True, equal_nan=False, size=size,
                        fill_value=fill_value)
    return UniqueInverseResult(v, inv)


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueAllResult:
    """Return the unique values, first indices, inverse map and counts (array API).

    Args:
        x: Input array.
        size: Optional static number of values to return.
        fill_value: Value used to pad up to `size`.
    Returns:
        A named tuple `(values, indices, inverse_indices, counts)`.

    Examples:
        >>> r = jnp.unique_all(jnp.array([2, 1, 2]))
        >>> r.values, r.indices, r.counts
        (Array([1, 2], dtype=int32), Array([1, 0], dtype=int32), Array([1, 2], dtype=int32))

    See also:
        `unique`.
    """
    v, i, inv, c = jnp.unique(_arr("unique_all", x), return_index=True, return_inverse=True,
                              return_counts=True, equal_nan=False, size=size, fill_value=fill_value)
    return UniqueAllResult(v, i, inv, c)


# ---------------------------------------------------------------- insert, delete, resize, trim
def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """Insert values before given positions along an axis.

    Args:
        arr: Input array.
        obj: Index, slice, or sequence of indices before which to insert.
        values: Values to insert (broadcast as needed).
        axis: The axis to insert along; None (the default) uses the flattened array.
    Returns:
        A new, longer array of `arr`'s dtype.

    Examples:
        >>> jnp.insert(jnp.array([1, 2, 3]), 1, 9)
        Array([1, 9, 2, 3], dtype=int32)
        >>> jnp.insert(jnp.array([[1, 2], [3, 4]]), 0, 0, axis=1)
        Array([[0, 1, 2],
               [0, 3, 4]], dtype=int32)

    See also:
        `delete`, `append`.
    """
    check_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj, values)
    a = _as_array(arr)
    if axis is None:
        a = jnp.ravel(a)
        axis = 0
    axis = canonicalize_axis("insert", _index("insert", axis, "axis"), a.ndim)
    if isinstance(obj, slice):
        idx = jnp.arange(*obj.indices(a.shape[axis]))
    else:
        idx = jnp.asarray(obj)
    if idx.ndim > 1:
        raise FtransValueError(f"insert: obj must be a slice, a one-dimensional array, or a scalar; got shape {idx.shape}")
    if idx.dtype.kind not in "iu":
        if idx.size == 0 and not isinstance(obj, (jnp.ndarray, Tracer)):
            idx = jnp.astype(idx, dtypes.default_int())
        else:
            raise FtransValueError(f"insert: index array must be integer typed; got {idx.dtype}")
    vals = jnp.array(values, ndmin=a.ndim, dtype=a.dtype, copy=False)
    if idx.size == 1:
        index = jnp.ravel(idx)[0]
        if idx.ndim == 0:
            vals = jnp.moveaxis(vals, 0, axis)
        idx = jnp.full(vals.shape[axis], index)
    n_input = a.shape[axis]
    n_insert = jnp.broadcast_shapes(idx.shape, (vals.shape[axis],))[0]
    out_shape = list(a.shape)
    out_shape[axis] += n_insert
    out = jnp.zeros_like(a, shape=tuple(out_shape))
    idx = jnp.where(jnp.less(idx, 0), jnp.add(idx, n_input), idx)
    idx = jnp.clip(idx, 0, n_input)
    values_ind = idx.at[jnp.argsort(idx)].add(jnp.arange(n_insert, dtype=idx.dtype))
    arr_mask = jnp.ones(n_input + n_insert, dtype=np.bool_).at[values_ind].set(False)
    arr_ind = jnp.where(arr_mask, size=n_input)[0]
    lead = (slice(None),) * axis
    vals = jnp.broadcast_to(vals, tuple(out_shape[:axis]) + (n_insert,) + tuple(out_shape[axis + 1:]))
    out = out.at[lead + (values_ind,)].set(vals)
    return out.at[lead + (arr_ind,)].set(a)


def delete(arr: Any, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False) -> Any:
    """Return a new array with sub-arrays along an axis deleted.

    An array `obj` must be concrete unless `assume_unique_indices=True`, since the output length depends on
    it.

    Args:
        arr: Input array.
        obj: Index, slice, or sequence of indices to delete.
        axis: The axis to delete along; None (the default) uses the flattened array.
        assume_unique_indices: Promise that the indices are unique and in range, which lets them be traced.
    Returns:
        An array with the entries removed.

    Examples:
        >>> x = jnp.arange(6)
        >>> jnp.delete(x, jnp.array([0, 2]))
        Array([1, 3, 4, 5], dtype=int32)
        >>> jnp.delete(jnp.arange(6).reshape(2, 3), 1, axis=1)
        Array([[0, 2],
               [3, 5]], dtype=int32)

    See also:
        `insert`.
    """
    a = _arr("delete", arr)
    if axis is None:
        a = jnp.ravel(a)
        axis = 0
    axis = canonicalize_axis("delete", axis, a.ndim)
    n = a.shape[axis]
    lead = (slice(None),) * axis
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        o = canonicalize_axis("delete", obj, n)
        return jnp.concatenate([a[lead + (slice(0, o),)], a[lead + (slice(o + 1, None),)]], axis=axis)
    if isinstance(obj, slice):
        obj = np.arange(n)[obj]
    check_arraylike("delete", obj)
    if dtype_weak(obj)[0].kind in "iu" and assume_unique_indices:
        o = jnp.ravel(_as_array(obj))
        o = jnp.clip(jnp.where(jnp.less(o, 0), jnp.add(o, n), o), 0, n)
        o = jnp.sort(o)
        o = jnp.subtract(o, jnp.arange(o.size, dtype=o.dtype))
        i = jnp.arange(n - o.size, dtype=o.dtype)
        i = jnp.add(i, jnp.sum(jnp.greater_equal(i[None, :], o[:, None]), 0, dtype=i.dtype))
        return jnp.take(a, i, axis=axis)
    o = np.asarray(concrete_or_error(obj, "the 'obj' array argument of jnp.delete (pass "
                                          "assume_unique_indices=True for traced indices)"))
    if o.dtype.kind in "iu":
        mask = np.ones(n, dtype=bool)
        mask[o] = False
    elif o.dtype == np.bool_:
        if o.shape != (n,):
            raise FtransValueError("delete: boolean obj must be one-dimensional with length matching the axis")
        mask = ~o
    else:
        raise FtransValueError(f"delete: got obj.dtype={o.dtype}; must be integer or bool.")
    return jnp.take(a, jnp.asarray(np.nonzero(mask)[0].astype(np.int32)), axis=axis)


def resize(a: Any, new_shape: Any) -> Any:
    """Return a new array with the given shape, repeating the data as needed.

    The flattened array is repeated (or cut) to fill `new_shape`.

    Args:
        a: Input array.
        new_shape: The shape of the result.
    Returns:
        An array of shape `new_shape` and `a`'s dtype.

    Examples:
        >>> jnp.resize(jnp.array([1, 2, 3]), (2, 4))
        Array([[1, 2, 3, 1],
               [2, 3, 1, 2]], dtype=int32)

    See also:
        `reshape`, `tile`.
    """
    check_arraylike("resize", a)
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    shape = tuple(_index("resize", s, "new_shape") for s in shape)
    if any(s < 0 for s in shape):
        raise FtransValueError(f"resize: all elements of new_shape must be non-negative, got {shape}")
    arr = jnp.ravel(a)
    size = math.prod(shape)
    if arr.size == 0 or size == 0:
        return jnp.zeros_like(arr, shape=shape)
    arr = jnp.tile(arr, -(-size // arr.size))[:size]
    return jnp.reshape(arr, shape)


def trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    """Strip leading and/or trailing zeros.

    All-zero slices are removed; the input must be concrete.

    Args:
        filt: Input array.
        trim: `'f'` to trim the front, `'b'` the back, `'fb'` (default) both.
        axis: Optional axis or axes to trim along.
    Returns:
        The trimmed array.

    Examples:
        >>> jnp.trim_zeros(jnp.array([0, 0, 1, 2, 0]))
        Array([1, 2], dtype=int32)
        >>> jnp.trim_zeros(jnp.array([0, 1, 0]), trim="f")
        Array([1, 0], dtype=int32)

    See also:
        `nonzero`.
    """
    f = _arr("trim_zeros", filt)
    v = np.asarray(concrete_or_error(f, "the filt argument of jnp.trim_zeros"))
    axes = set(range(v.ndim)) if axis is None else {canonicalize_axis("trim_zeros", ax, v.ndim)
                                                    for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    t = trim.lower()
    if not axes or ("f" not in t and "b" not in t):
        return f
    sl = []
    for ax in range(v.ndim):
        if ax not in axes:
            sl.append(slice(None))
            continue
        nz = np.any(v != 0, axis=tuple(i for i in range(v.ndim) if i != ax))
        if not nz.any():
            sl.append(slice(0, 0))
            continue
        start = int(nz.argmax()) if "f" in t else None
        stop = v.shape[ax] - int(nz[::-1].argmax()) if "b" in t else None
        sl.append(slice(start, stop))
    return f[tuple(sl)]


# ---------------------------------------------------------------- partition
def _partition_prep(name: str, a: Any, kth: int, axis: int) -> tuple[Any, int, int]:
    arr = _arr(name, a)
    if dtype_weak(arr)[0].kind == "c":
        raise NotImplementedError(f"{name}: complex input is not supported")
    axis = canonicalize_axis(name, axis, arr.ndim)
    kth = canonicalize_axis(name, kth, arr.shape[axis])
    return jnp.swapaxes(arr, axis, -1), kth, axis


def partition(a: Any, kth: int, axis: int = -1) -> Any:
    """Return a partially sorted copy of an array.

    The `kth` smallest element is at position `kth`, the smaller ones (sorted) before it and the larger ones
    after it in descending order (JAX's top-k layout); NumPy leaves both sides in unspecified order.

    Args:
        a: Input array.
        kth: Static index of the partition element.
        axis: Axis to partition along.
    Returns:
        An array of `a`'s shape and dtype.

    Examples:
        >>> jnp.partition(jnp.array([5, 2, 8, 1, 9, 3]), 2)
        Array([1, 2, 3, 9, 8, 5], dtype=int32)

    See also:
        `argpartition`, `sort`.
    """
    arr, kth, axis = _partition_prep("partition", a, kth, axis)
    s = jnp.sort(arr, axis=-1)
    out = jnp.concatenate([s[..., :kth + 1], jnp.flip(s[..., kth + 1:], -1)], axis=-1)
    return jnp.swapaxes(out, -1, axis)


def argpartition(a: Any, kth: int, axis: int = -1) -> Any:
    """Return the indices that partition an array.

    The indices of the `kth + 1` smallest elements (sorted) come first, then the remaining indices in
    increasing order, as JAX's top-k construction produces.

    Args:
        a: Input array.
        kth: Static index of the partition element.
        axis: Axis to partition along.
    Returns:
        An integer array of `a`'s shape.

    Examples:
        >>> jnp.argpartition(jnp.array([5, 2, 8, 1, 9, 3]), 2)
        Array([3, 1, 5, 0, 2, 4], dtype=int32)

    See also:
        `partition`, `argsort`.
    """
    arr, kth, axis = _partition_prep("argpartition", a, kth, axis)
    n = arr.shape[-1]
    order = jnp.argsort(arr, axis=-1, stable=True)
    bottom = order[..., :kth + 1]
    taken = put_along_axis(jnp.zeros(arr.shape, np.int32), bottom, 1, -1, inplace=False)
    rest = jnp.argsort(taken, axis=-1, stable=True)[..., :n - kth - 1]
    out = jnp.concatenate([bottom, jnp.astype(rest, bottom.dtype)], axis=-1)
    return jnp.swapaxes(out, -1, axis)


# ---------------------------------------------------------------- top_k, minmax
def _order_reversed(x: Any) -> Any:
    """An array whose order is ``x``'s reversed: ``~x`` for bools and integers (which, unlike negation, has no
    overflow at the type's minimum and works for unsigned types) and ``-x`` for floats."""
    if dtype_weak(x)[0].kind in "biu":
        return lax.bitwise_not(x)
    return lax.neg(x)


def top_k(a: Any, k: int, /, *, axis: int = -1, mode: str = "largest", sorted: bool = True) -> Any:  # noqa: A002
    """Return the `k` largest or smallest elements of an array along an axis, with their indices.

    The NumPy-style wrapper of `ftrans.lax.top_k`. Floats are ranked in XLA's total order (NaN above `inf`,
    `-0.0` below `+0.0`), so with `mode='smallest'` NaNs come last; equal values keep the lower index first.
    Integers of any width, unsigned ones and bools are ranked exactly, their minimum included.

    Args:
        a: Input array, real-valued (complex numbers have no order) with at least one dimension.
        k: Static non-negative int, at most the size of `a` along `axis`.
        axis: Static axis to search along (default the last).
        mode: `'largest'` (the default) or `'smallest'`.
        sorted: Accepted as JAX's; the elements always come sorted (largest or smallest first).
    Returns:
        A pair `(values, indices)`: arrays of `a`'s shape with the size along `axis` replaced by `k`; the
        values keep `a`'s dtype, the indices are int32.

    Raises:
        ValueError: for complex input, an unknown `mode`, or a `k` that is negative or too large.

    Examples:
        >>> a = jnp.array([[1, 2, 3, 4, 5],
        ...                [5, 4, 3, 2, 1]])
        >>> values, indices = jnp.top_k(a, 2)
        >>> values
        Array([[5, 4],
               [5, 4]], dtype=int32)
        >>> indices
        Array([[4, 3],
               [0, 1]], dtype=int32)
        >>> jnp.top_k(jnp.array([3, -128, 7, -128], dtype=jnp.int8), 3, mode='smallest')
        (Array([-128, -128,    3], dtype=int8), Array([1, 3, 0], dtype=int32))
        >>> jnp.top_k(jnp.array([2.0, jnp.nan, -1.0]), 2, mode='smallest')
        (Array([-1.,  2.], dtype=float32), Array([2, 0], dtype=int32))

    See also:
        `ftrans.lax.top_k`, `sort`, `partition`.
    """
    del sorted
    arr = _arr("top_k", a)
    if dtype_weak(arr)[0].kind == "c":
        raise FtransValueError("top_k is not compatible with complex inputs: complex numbers have no order; "
                               "rank by a real key such as abs(x) or x.real")
    if mode not in ("largest", "smallest"):
        raise FtransValueError(f"top_k: mode must be 'largest' or 'smallest', got {mode!r}")
    axis = canonicalize_axis("top_k", axis, arr.ndim)
    if mode == "largest":
        return lax.top_k(arr, k, axis=axis)
    values, indices = lax.top_k(_order_reversed(arr), k, axis=axis)
    return _order_reversed(values), indices


def minmax(a: Any, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> tuple[Any, Any]:
    """Return the minimum and the maximum of array elements over the given axes, as a pair.

    The same as `(min(a, ...), max(a, ...))` in one call: NaN propagates into both, and the dtype is `a`'s.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None`.
        keepdims: If True, reduced axes stay in the results with size 1.
        initial: Optional scalar starting value of both reductions, or a pair `(initial_min, initial_max)`:
            the minimum is at most `initial_min`, the maximum at least `initial_max` (either may be `None`).
            Converted to `a`'s dtype. An empty reduction needs it, since min and max have no identity.
        where: Optional boolean mask broadcastable to `a`: only elements where it is True take part. Needs
            both initial values.
    Returns:
        A pair of arrays `(a_min, a_max)` of `a`'s dtype, with the reduced axes removed (or kept with size 1
        if `keepdims`).

    Raises:
        NotImplementedError: if `out` is given.
        ValueError: for `where` without both initial values, an empty reduction without them, or a
            non-scalar initial value.

    Examples:
        >>> x = jnp.array([[2, 5, 1, 6],
        ...                [3, -7, -2, 4],
        ...                [8, -4, 1, -3]])
        >>> jnp.minmax(x)
        (Array(-7, dtype=int32), Array(8, dtype=int32))
        >>> jnp.minmax(x, axis=1, initial=(0, 5))
        (Array([ 0, -7, -4], dtype=int32), Array([6, 5, 8], dtype=int32))
        >>> jnp.minmax(x, axis=0, where=x > 0, initial=(100, -100))
        (Array([2, 5, 1, 4], dtype=int32), Array([8, 5, 1, 6], dtype=int32))

    See also:
        `min`, `max`, `ptp`.
    """
    init_min, init_max = initial if isinstance(initial, tuple) else (initial, initial)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.minmax is not supported.")
    arr = _arr("minmax", a)
    if where is not None and (init_min is None or init_max is None):
        raise FtransValueError("reduction operation minmax does not have an identity, so to use a where mask "
                               "one has to specify 'initial' (both the minimum's and the maximum's)")
    if axis is None:
        axes: tuple = tuple(range(arr.ndim))
    else:
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        axes = tuple(canonicalize_axis("minmax", ax, arr.ndim) for ax in axes)
    if (init_min is None or init_max is None) and any(arr.shape[ax] == 0 for ax in axes):
        raise FtransValueError("zero-size array to reduction operation minmax which has no identity; "
                               "pass 'initial'")
    for init in (init_min, init_max):
        if isinstance(init, list):
            raise FtransTypeError("minmax: initial must be a scalar or a tuple (initial_min, initial_max), "
                                  f"got a list {init!r}")
        if init is not None and np.ndim(init) != 0:
            raise FtransValueError(f"minmax: initial value must be a scalar. Got array of shape {np.shape(init)}")
    return (jnp.min(arr, axis=axis, keepdims=keepdims, initial=init_min, where=where),
            jnp.max(arr, axis=axis, keepdims=keepdims, initial=init_max, where=where))


# ---------------------------------------------------------------- quantiles
_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _quantile_weights(name: str, x: Any, weights: Any, axes: tuple, method: str) -> tuple[Any, Any]:
    """``x`` and the weights promoted together (as JAX) and the weights broadcast to ``x``'s shape: they
    are given either with ``x``'s shape or with the shape of the reduced axes."""
    check_arraylike(name, weights)
    if dtype_weak(weights)[0].kind == "c":
        raise FtransValueError(f"{name}: weights cannot be complex (got dtype {dtype_weak(weights)[0].name})")
    if method != "inverted_cdf":
        raise NotImplementedError(
            f"{name}: method={method!r} does not support weights; only method='inverted_cdf' does (as in JAX)")
    x, w = _inexact(name, x, weights)
    shape, wshape = tuple(shape_of(x)), tuple(shape_of(w))
    if wshape != shape:
        if axes is None:
            raise FtransValueError(
                f"{name}: with axis=None the weights must have a's shape {shape}, got {wshape}")
        want = tuple(shape[ax] for ax in axes)
        if wshape != want:
            raise FtransValueError(
                f"{name}: weights of shape {wshape} match neither a's shape {shape} nor the shape {want} "
                f"of the reduced axes {axes}")
        w = lax.broadcast_in_dim(w, shape, axes)
    return x, w


def _inverted_cdf(x: Any, w: Any, q: Any, qshape: tuple, bshape: tuple, squash_nans: bool) -> Any:
    """Method ``inverted_cdf`` on ``x`` (the reduced axis last): the first sorted value whose cumulative
    weight reaches ``q`` times the total.  Negative or NaN weights, and NaN data (in the nan-variants:
    a slice with no valid value), make the result NaN, as in JAX."""
    n = x.shape[-1]
    x = jnp.where(jnp.isnan(x), np.nan, x)  # NaNs (of either sign) sort last
    if w is None:
        srt, w = jnp.sort(x, axis=-1), jnp.ones_like(x)
    else:
        srt, w = lax.sort((x, w), dimension=len(bshape), num_keys=1)
    bad = jnp.logical_or(jnp.less(w, 0), jnp.isnan(w))
    nan_data = jnp.isnan(srt)
    # Half-precision weights are accumulated in float32: a float16 running sum rounds at every step and
    # can move the crossing point by one element (JAX's results agree with the float32 accumulation).
    acc = np.float32 if dtypes.finfo(dtype_weak(w)[0]).bits < 32 else None
    cum = jnp.cumsum(jnp.where(jnp.logical_or(bad, nan_data), 0, w), axis=-1, dtype=acc)
    qq = jnp.reshape(q, qshape + (1,) * len(bshape))
    target = jnp.multiply(qq, cum[..., -1])
    idx = jnp.sum(jnp.less(cum, target[..., None]), axis=-1, dtype=np.int32)
    valid = jnp.sum(jnp.logical_not(nan_data), axis=-1, dtype=np.int32) if squash_nans else jnp.full(bshape, n, np.int32)
    idx = jnp.maximum(0, jnp.minimum(idx, jnp.subtract(valid, 1)))
    full = qshape + bshape
    res = jnp.take_along_axis(jnp.broadcast_to(srt, full + (n,)), idx[..., None], axis=-1)[..., 0]
    bad_slice = jnp.any(bad, axis=-1)
    nan_slice = jnp.equal(valid, 0) if squash_nans else jnp.any(nan_data, axis=-1)
    return jnp.where(jnp.logical_or(bad_slice, nan_slice), np.nan, res)


def _quantile(name: str, a: Any, q: Any, axis: Any, method: str, keepdims: bool, squash_nans: bool,
              weights: Any = None) -> Any:
    """Sort along the reduced axes (merged into one), then gather the two order
    statistics around ``q * (count - 1)`` and combine them per ``method``
    (``inverted_cdf``, the one method that takes ``weights``, walks the cumulative weights instead).

    ``squash_nans`` (the nan-variants) counts only non-NaN values per slice,
    which sort last; otherwise a NaN anywhere in a slice makes its result NaN.
    """
    if method not in _QUANTILE_METHODS:
        raise FtransValueError(f"{name}: method can only be one of {_QUANTILE_METHODS}, got {method!r}")
    check_arraylike(name, a, q)
    (x,) = _inexact(name, a)
    if dtype_weak(x)[0].kind == "c":
        raise FtransValueError(f"{name} does not support complex input, as the operation is poorly defined.")
    (q,) = _inexact(name, q)
    qshape = tuple(shape_of(q))
    if len(qshape) > 1:
        raise FtransValueError(f"{name}: q must have rank <= 1, got shape {qshape}")
    shape = tuple(shape_of(x))
    if axis is None:
        axes = tuple(range(len(shape)))
    else:
        axes = tuple(canonicalize_axis(name, ax, len(shape))
                     for ax in (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if len(set(axes)) != len(axes):
            raise FtransValueError(f"{name}: repeated axis in {axis}")
    w = None
    if weights is not None:
        x, w = _quantile_weights(name, x, weights, None if axis is None else axes, method)
    keep = [i for i in range(len(shape)) if i not in axes]
    bshape = tuple(shape[i] for i in keep)
    n = math.prod(shape[i] for i in axes)
    x = jnp.reshape(jnp.transpose(x, tuple(keep) + axes), bshape + (n,))
    if method == "inverted_cdf":
        if w is not None:
            w = jnp.reshape(jnp.transpose(w, tuple(keep) + axes), bshape + (n,))
        res = _inverted_cdf(x, w, q, qshape, bshape, squash_nans)
        if keepdims:
            res = jnp.reshape(res, qshape + tuple(1 if i in axes else s for i, s in enumerate(shape)))
        return res
    nan = jnp.isnan(x)
    if not squash_nans:
        x = jnp.where(jnp.any(nan, axis=-1, keepdims=True), np.nan, x)
    srt = jnp.sort(x, axis=-1)
    qd = dtype_weak(q)[0]
    if squash_nans:
        cnt = jnp.sum(jnp.logical_not(nan), axis=-1, dtype=qd)
    else:
        cnt = jnp.full(bshape, n, qd)
    qq = jnp.reshape(q, qshape + (1,) * len(bshape))
    pos = jnp.multiply(qq, jnp.subtract(cnt, 1))
    low, high = jnp.floor(pos), jnp.ceil(pos)
    hw = jnp.subtract(pos, low)
    lw = jnp.subtract(1, hw)
    top = jnp.subtract(cnt, 1)
    low = jnp.maximum(0, jnp.minimum(low, top))
    high = jnp.maximum(0, jnp.minimum(high, top))
    full = qshape + bshape
    srt_b = jnp.broadcast_to(srt, full + (n,))
    li = jnp.broadcast_to(jnp.astype(low, np.int32), full)[..., None]
    hi = jnp.broadcast_to(jnp.astype(high, np.int32), full)[..., None]
    lv = jnp.take_along_axis(srt_b, li, axis=-1)[..., 0]
    hv = jnp.take_along_axis(srt_b, hi, axis=-1)[..., 0]
    if method == "linear":
        res = jnp.add(jnp.multiply(jnp.astype(lv, qd), lw), jnp.multiply(jnp.astype(hv, qd), hw))
    elif method == "lower":
        res = lv
    elif method == "higher":
        res = hv
    elif method == "nearest":
        res = jnp.where(jnp.less_equal(hw, 0.5), lv, hv)
    else:
        res = jnp.multiply(jnp.add(lv, hv), 0.5)
    if keepdims:
        res = jnp.reshape(res, qshape + tuple(1 if i in axes else s for i, s in enumerate(shape)))
    return res


def _check_quantile_args(name: str, out: Any, overwrite_input: bool, method: str) -> str:
    if out is not None or overwrite_input:
        raise FtransValueError(f"jnp.{name} does not support overwrite_input=True or out != None")
    return method


@outputs_checked
def quantile(a: Any, q: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """Compute the `q`-th quantile(s) of the data over the given axes.

    A slice containing NaN gives NaN. `weights` (with `a`'s shape, or the reduced axes' shape) need
    `method='inverted_cdf'`; a negative or NaN weight gives NaN.

    Args:
        a: Input array.
        q: Quantile(s) to compute, in `[0, 1]`; a scalar or an array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        overwrite_input: Ignored (arrays are immutable); accepted for NumPy compatibility.
        method: Interpolation method: `'linear'` (default), `'lower'`, `'higher'`, `'midpoint'`, `'nearest'`,
            or `'inverted_cdf'`.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        weights: Optional weights of the samples (with `method='inverted_cdf'`).
    Returns:
        An array of inexact dtype: `q`'s shape followed by the shape left after reducing.

    Examples:
        >>> x = jnp.array([1., 2., 3., 4., 5.])
        >>> jnp.quantile(x, 0.5)
        Array(3., dtype=float32)
        >>> jnp.quantile(x, jnp.array([0.25, 0.75]))
        Array([2., 4.], dtype=float32)
        >>> jnp.quantile(x, 0.3, method="lower")
        Array(2., dtype=float32)

    See also:
        `percentile`, `median`, `nanquantile`.
    """
    method = _check_quantile_args("quantile", out, overwrite_input, method)
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


@outputs_checked
def nanquantile(a: Any, q: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """Compute quantiles over the given axes, ignoring NaNs.

    NaNs and their weights are left out.

    Args:
        a: Input array.
        q: Quantile(s) to compute, in `[0, 1]`.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        overwrite_input: Ignored (arrays are immutable); accepted for NumPy compatibility.
        method: Interpolation method, as in `quantile`.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        weights: Optional weights of the samples (with `method='inverted_cdf'`).
    Returns:
        An array of inexact dtype: `q`'s shape followed by the shape left after reducing.

    Examples:
        >>> jnp.nanquantile(jnp.array([1., jnp.nan, 3., 5.]), 0.5)
        Array(3., dtype=float32)

    See also:
        `quantile`.
    """
    method = _check_quantile_args("nanquantile", out, overwrite_input, method)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


def _q_from_percent(name: str, q: Any) -> Any:
    check_arraylike(name, q)
    (q,) = _inexact(name, q)
    return jnp.divide(q, 100.0)


@outputs_checked
def percentile(a: Any, q: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None,
               out_sharding: Any = None) -> Any:
    """Compute the `q`-th percentile(s) of the data over the given axes.

    This is `quantile` with `q` in percent (`weights` as there). `out_sharding` lays the result out (computed
    with the mesh's axes Auto, as JAX's `auto_axes`).

    Args:
        a: Input array.
        q: Percentile(s) to compute, in `[0, 100]`; a scalar or an array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        overwrite_input: Ignored (arrays are immutable); accepted for NumPy compatibility.
        method: Interpolation method: `'linear'` (default), `'lower'`, `'higher'`, `'midpoint'`, `'nearest'`,
            or `'inverted_cdf'`.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        weights: Optional weights of the samples (with `method='inverted_cdf'`).
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array of inexact dtype: `q`'s shape followed by the shape left after reducing.

    Examples:
        >>> x = jnp.array([1., 2., 3., 4., 5.])
        >>> jnp.percentile(x, 50)
        Array(3., dtype=float32)
        >>> jnp.percentile(x, jnp.array([10, 90]))
        Array([1.4000001, 4.6      ], dtype=float32)

    See also:
        `quantile`, `nanpercentile`.
    """
    method = _check_quantile_args("percentile", out, overwrite_input, method)
    if out_sharding is not None:
        from ftrans.lax._sharding import _resolve, place_result, under_auto_axes

        target = _resolve(out_sharding, "jnp.percentile")
        return place_result("jnp.percentile", target, lambda: under_auto_axes(
            lambda a, q: _quantile("percentile", a, _q_from_percent("percentile", q), axis, method, keepdims, False,
                                   weights), (a, q), {}, target))
    return _quantile("percentile", a, _q_from_percent("percentile", q), axis, method, keepdims, False, weights)


@outputs_checked
def nanpercentile(a: Any, q: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """Compute percentiles over the given axes, ignoring NaNs.

    NaNs and their weights are left out.

    Args:
        a: Input array.
        q: Percentile(s) to compute, in `[0, 100]`.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        overwrite_input: Ignored (arrays are immutable); accepted for NumPy compatibility.
        method: Interpolation method, as in `quantile`.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
        weights: Optional weights of the samples (with `method='inverted_cdf'`).
    Returns:
        An array of inexact dtype: `q`'s shape followed by the shape left after reducing.

    Examples:
        >>> jnp.nanpercentile(jnp.array([1., jnp.nan, 3., 5.]), 50)
        Array(3., dtype=float32)

    See also:
        `percentile`.
    """
    method = _check_quantile_args("nanpercentile", out, overwrite_input, method)
    return _quantile("nanpercentile", a, _q_from_percent("nanpercentile", q), axis, method, keepdims, True,
                     weights)


@outputs_checked
def nanmedian(a: Any, axis: Any = None, out: None = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """Median over the given axes, ignoring NaNs.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to reduce over; `None` (the default) reduces over all of them.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        overwrite_input: Ignored (arrays are immutable); accepted for NumPy compatibility.
        keepdims: If True, reduced axes stay in the result with size 1, so it broadcasts against the input.
    Returns:
        An array of inexact dtype with the reduced axes removed (or kept with size 1 if `keepdims`).

    Examples:
        >>> x = jnp.array([[1., jnp.nan, 3.], [4., 5., 9.]])
        >>> jnp.nanmedian(x, axis=1)
        Array([2., 5.], dtype=float32)

    See also:
        `median`, `nanquantile`.
    """
    _check_quantile_args("nanmedian", out, overwrite_input, "linear")
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


# ---------------------------------------------------------------- interpolation and statistics
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """One-dimensional piecewise-linear interpolation.

    The function through the points `(xp, fp)` is evaluated at `x`; `xp` must be increasing.

    Args:
        x: Points at which to interpolate.
        xp: Increasing x coordinates of the data points.
        fp: y coordinates of the data points.
        left: Value for `x < xp[0]` (default `fp[0]`).
        right: Value for `x > xp[-1]` (default `fp[-1]`).
        period: Optional period of the x coordinates (then `left`/`right` are not used).
    Returns:
        An array of `x`'s shape with an inexact dtype.

    Examples:
        >>> jnp.interp(jnp.array([0.5, 1.5, 5.]), jnp.array([0., 1., 2.]), jnp.array([0., 10., 30.]))
        Array([ 5., 20., 30.], dtype=float32)

    See also:
        `searchsorted`.
    """
    check_arraylike("interp", x, xp, fp)
    if len(shape_of(xp)) != 1 or len(shape_of(fp)) != 1 or shape_of(xp) != shape_of(fp):
        raise FtransValueError(f"interp: xp and fp must be one-dimensional arrays of equal size, "
                               f"got {shape_of(xp)} and {shape_of(fp)}")
    x, xp = _inexact_nobcast("interp", x, xp)
    (fp,) = _inexact("interp", fp)
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, str) and v != "extrapolate":
            raise FtransValueError(f"interp: the only valid string value of `{name}` is 'extrapolate', "
                                   f"but got: {v!r}")
    if dtype_weak(x)[0].kind == "c":
        raise FtransValueError("interp: complex x values not supported; interpolate the real and "
                               "imaginary parts separately")
    if period is not None:
        # As JAX (and NumPy): left and right are ignored for periodic interpolation.
        if len(shape_of(period)) != 0:
            raise FtransValueError(f"interp: period must be a scalar; got {period}")
        period = jnp.abs(jnp.asarray(period))
        x = jnp.remainder(x, period)
        xp = jnp.remainder(xp, period)
        order = jnp.argsort(xp)
        xp, fp = xp[order], fp[order]
        xp = jnp.concatenate([jnp.subtract(xp[-1:], period), xp, jnp.add(xp[:1], period)])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])
    i = jnp.clip(jnp.searchsorted(xp, x, side="right"), 1, shape_of(xp)[0] - 1)
    df = jnp.subtract(fp[i], fp[i - 1])
    dx = jnp.subtract(xp[i], xp[i - 1])
    delta = jnp.subtract(x, xp[i - 1])
    eps = float(np.spacing(np.finfo(dtype_weak(xp)[0] if dtype_weak(xp)[0].kind == "f" else np.float32).eps))
    dx0 = jnp.less_equal(jnp.abs(dx), eps)
    f = jnp.where(dx0, fp[i - 1], jnp.add(fp[i - 1], jnp.multiply(jnp.divide(delta, jnp.where(dx0, 1, dx)), df)))
    if period is None:
        # 'extrapolate' keeps the end segments' lines (the clipped index already selects them).
        if not isinstance(left, str):
            f = jnp.where(jnp.less(x, xp[0]), fp[0] if left is None else left, f)
        if not isinstance(right, str):
            f = jnp.where(jnp.greater(x, xp[-1]), fp[-1] if right is None else right, f)
    return f


def _cov_dtype(name: str, dtype: Any) -> Any:
    if dtype is None:
        return None
    d = dtypes.to_dtype(dtype)
    if not dtypes.is_inexact(d):
        raise FtransValueError(f"{name}: dtype must be a subclass of float or complex; got dtype={dtype!r}")
    return d


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: Any = None) -> Any:
    """Estimate a covariance matrix.

    Each row of `m` is a variable and each column an observation, unless `rowvar` is False.

    Args:
        m: 1-D or 2-D array of observations.
        y: Optional further variables, stacked under `m`.
        rowvar: Whether rows (True) or columns are the variables.
        bias: If True normalise by N, else by N - 1.
        ddof: If given, overrides `bias`: the divisor is N - ddof.
        fweights: Optional integer frequency weights per observation.
        aweights: Optional observation weights.
        dtype: Inexact dtype the data and weights are computed in.
    Returns:
        A 2-D covariance matrix (0-d for a single variable).

    Examples:
        >>> x = jnp.array([[0., 1., 2.], [2., 1., 0.]])
        >>> jnp.cov(x)
        Array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)

    See also:
        `corrcoef`, `var`.
    """
    dtype = _cov_dtype("cov", dtype)
    if y is not None:
        check_arraylike("cov", m, y)
        m, y = _inexact_nobcast("cov", m, y)
    else:
        check_arraylike("cov", m)
        (m,) = _inexact("cov", m)
    if m.ndim > 2:
        raise FtransValueError(f"cov: m has more than 2 dimensions (shape {m.shape})")
    x = jnp.atleast_2d(m)
    if not rowvar and m.ndim != 1:  # a (1, n) m with rowvar=False is n variables (NumPy 2.2, JAX)
        x = x.T
    if x.shape[0] == 0:
        return jnp.array([]).reshape(0, 0)
    if y is not None:
        if y.ndim > 2:
            raise FtransValueError(f"cov: y has more than 2 dimensions (shape {y.shape})")
        y2 = jnp.atleast_2d(y)
        if not rowvar and y2.shape[0] != 1:
            y2 = y2.T
        x = jnp.concatenate((x, y2), axis=0)
    if x.shape[1] == 0:  # no observations: NaN covariances (as NumPy and JAX), in x's dtype
        return jnp.full(() if x.shape[0] == 1 else (x.shape[0], x.shape[0]), np.nan, dtype=x.dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = jnp.asarray(fweights)
        if w.ndim != 1 or w.shape[0] != n:
            raise FtransValueError(f"cov: fweights must be 1-d with length {n}, got shape {w.shape}")
    if aweights is not None:
        aw = jnp.asarray(aweights)
        if aw.ndim != 1 or aw.shape[0] != n:
            raise FtransValueError(f"cov: aweights must be 1-d with length {n}, got shape {aw.shape}")
        w = aw if w is None else jnp.multiply(w, aw)
    if dtype is not None:
        x = x.astype(dtype)
        w = None if w is None else w.astype(dtype)
    if w is None:
        avg = jnp.mean(x, axis=1)
        wsum = n
        fact = n - ddof
    else:
        avg, wsum = jnp.average(x, axis=1, weights=w, returned=True)
        wsum = wsum[0]
        if ddof == 0:
            fact = wsum
        elif aweights is None:
            fact = jnp.subtract(wsum, ddof)
        else:
            fact = jnp.subtract(wsum, jnp.divide(jnp.multiply(ddof, jnp.sum(jnp.multiply(w, aweights))), wsum))
    x = jnp.subtract(x, avg[:, None])
    xt = x.T if w is None else jnp.multiply(x, w).T
    return jnp.squeeze(jnp.true_divide(jnp.dot(x, jnp.conj(xt)), fact))


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    """Pearson correlation coefficients.

    For real input the coefficients are clipped to [-1, 1].

    Args:
        x: 1-D or 2-D array of observations (rows are variables unless `rowvar` is False).
        y: Optional further variables.
        rowvar: Whether rows (True) or columns are the variables.
        dtype: Optional inexact dtype to compute in.
    Returns:
        A 2-D array of correlation coefficients.

    Examples:
        >>> jnp.corrcoef(jnp.array([[0., 1., 2.], [2., 1., 0.5]]))
        Array([[ 1.        , -0.98198044],
               [-0.98198044,  1.        ]], dtype=float32)

    See also:
        `cov`.
    """
    c = cov(x, y, rowvar, dtype=_cov_dtype("corrcoef", dtype))
    if c.ndim == 0:
        return jnp.divide(c, c)
    d = jnp.diag(c)
    std = jnp.sqrt(jnp.real(d))
    c = jnp.divide(jnp.divide(c, std[:, None]), std[None, :])
    if c.dtype.kind != "c":
        c = jnp.clip(c, -1, 1)
    return c


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * np.pi) -> Any:
    """Unwrap a signal by removing jumps larger than a threshold.

    Jumps larger than `discont` are removed by adding multiples of `period`.

    Args:
        p: Input array.
        discont: Largest jump left as it is (default `period / 2`).
        axis: Axis along which to unwrap.
        period: The period of the signal (default `2 pi`).
    Returns:
        An array of `p`'s shape and inexact dtype.

    Examples:
        >>> jnp.unwrap(jnp.array([0., 3., 6.5, 9.]))
        Array([0.      , 3.      , 0.216815, 2.716815], dtype=float32)

    See also:
        `angle`.
    """
    check_arraylike("unwrap", p)
    # As JAX: p and period are promoted together, so integer data with an integer period stays
    # integer (half the period rounds down) and a float period makes the result float.
    (p, period), _, _ = promote_dtypes("unwrap", p, period)
    if dtype_weak(p)[0].kind == "c":
        raise FtransValueError("unwrap does not support complex inputs.")
    if p.ndim == 0 or p.shape[axis] == 0:
        return p
    axis = canonicalize_axis("unwrap", axis, p.ndim)
    half = jnp.floor_divide(period, 2) if dtypes.is_int(dtype_weak(p)[0]) else jnp.divide(period, 2)
    if discont is None:
        discont = jnp.divide(period, 2)
    discont = half if discont is None else discont
    dd = diff(p, axis=axis)
    ddmod = jnp.subtract(jnp.remainder(jnp.add(dd, half), period), half)
    ddmod = jnp.where(jnp.logical_and(jnp.equal(ddmod, jnp.negative(half)), jnp.greater(dd, 0)), half, ddmod)
    correct = jnp.where(jnp.less(jnp.abs(dd), discont), 0, jnp.subtract(ddmod, dd))
    lead = (slice(None),) * axis
    return jnp.concatenate([p[lead + (slice(None, 1),)],
                            jnp.add(p[lead + (slice(1, None),)], jnp.cumsum(correct, axis=axis))], axis=axis)


# ---------------------------------------------------------------- bits
def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """Pack the truth values of an array into the bits of uint8 values.

    Groups of 8 are packed, with zero padding at the end.

    Args:
        a: Integer or bool array (nonzero is a 1 bit).
        axis: The axis to pack along; None (the default) uses the flattened array.
        bitorder: `'big'` (the first value is the top bit) or `'little'`.
    Returns:
        A uint8 array.

    Examples:
        >>> jnp.packbits(jnp.array([1, 0, 1, 1, 0, 0, 0, 1, 1]))
        Array([177, 128], dtype=uint8)

    See also:
        `unpackbits`.
    """
    a = _arr("packbits", a)
    d = dtype_weak(a)[0]
    if d.kind not in "biu":
        raise FtransTypeError(f"packbits: expected an integer or boolean array, got {d}")
    if bitorder not in ("little", "big"):
        raise FtransValueError(f"packbits: bitorder must be 'little' or 'big', got {bitorder!r}")
    bits = jnp.astype(jnp.not_equal(a, jnp.zeros_like(a)), np.uint8)
    if axis is None:
        bits = jnp.ravel(bits)
        axis = 0
    axis = canonicalize_axis("packbits", axis, bits.ndim)
    bits = jnp.moveaxis(bits, axis, -1)
    pad = (-bits.shape[-1]) % 8
    if pad:
        bits = jnp.concatenate([bits, jnp.zeros(bits.shape[:-1] + (pad,), np.uint8)], axis=-1)
    bits = jnp.reshape(bits, bits.shape[:-1] + (bits.shape[-1] // 8, 8))
    shifts = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        shifts = shifts[::-1]
    # the shifts at the operand's rank: internal broadcasting must not depend on numpy_rank_promotion
    shifts = shifts.reshape((1,) * (bits.ndim - 1) + (8,))
    packed = jnp.sum(jnp.left_shift(bits, jnp.asarray(shifts.copy())), axis=-1, dtype=np.uint8)
    return jnp.moveaxis(packed, -1, axis)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """Unpack the bits of uint8 values into an array of 0s and 1s.

    Each value expands to 8 bits along `axis`; the result is then cut or padded to `count`.

    Args:
        a: uint8 array.
        axis: The axis to unpack along; None (the default) uses the flattened array.
        count: Optional number of bits to keep.
        bitorder: `'big'` (the top bit first) or `'little'`.
    Returns:
        A uint8 array of 0s and 1s.

    Examples:
        >>> jnp.unpackbits(jnp.array([5, 255], dtype=jnp.uint8))
        Array([0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1], dtype=uint8)

    See also:
        `packbits`.
    """
    a = _arr("unpackbits", a)
    if dtype_weak(a)[0] != np.uint8:
        raise FtransTypeError(f"unpackbits: expected an input array of unsigned byte data type, got {a.dtype}")
    if bitorder not in ("little", "big"):
        raise FtransValueError(f"unpackbits: bitorder must be 'little' or 'big', got {bitorder!r}")
    shifts = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        shifts = shifts[::-1]
    shifts = shifts.reshape((1,) * a.ndim + (8,))  # at the operand's rank, whatever numpy_rank_promotion says
    bits = jnp.bitwise_and(jnp.right_shift(a[..., None], jnp.asarray(shifts.copy())), np.uint8(1))
    if axis is None:
        bits = jnp.ravel(bits)
        axis = 0
    else:
        axis = canonicalize_axis("unpackbits", axis, a.ndim)
        bits = jnp.moveaxis(bits, -1, axis + 1)
        shape = list(a.shape)
        shape[axis] *= 8
        bits = jnp.reshape(bits, tuple(shape))
    if count is not None:
        count = _index("unpackbits", count, "count")
        n = bits.shape[axis]
        lead = (slice(None),) * axis
        if count <= n:
            bits = bits[lead + (slice(0, count),)]
        else:
            pad_shape = list(bits.shape)
            pad_shape[axis] = count - n
            bits = jnp.concatenate([bits, jnp.zeros(tuple(pad_shape), np.uint8)], axis=axis)
    return bits


def bitwise_count(x: Any, /) -> Any:
    """Count the 1 bits of each element's absolute value.

    Args:
        x: Integer or bool array.
    Returns:
        A uint8 array of `x`'s shape.

    Examples:
        >>> jnp.bitwise_count(jnp.array([0, 7, -8, 255]))
        Array([0, 3, 1, 8], dtype=uint8)

    See also:
        `bitwise_and`.
    """
    x = _arr("bitwise_count", x)
    d = dtype_weak(x)[0]
    if d.kind not in "biu":
        raise FtransTypeError(f"bitwise_count: expected an integer or boolean array, got {d}")
    if d == np.bool_:
        return jnp.astype(x, np.uint8)
    return jnp.astype(lax.population_count(jnp.abs(x) if d.kind == "i" else x), np.uint8)


# ---------------------------------------------------------------- windows
def _window_n(name: str, M: int) -> int:  # noqa: N803
    return _index(name, M, "M")


def _cosine_window(name: str, M: int, coefs: Sequence[float]) -> Any:  # noqa: N803
    m = _window_n(name, M)
    d = dtypes.default_float()
    if m <= 1:
        return jnp.ones(max(m, 0), d)
    n = jnp.arange(m, dtype=d)
    out = jnp.zeros(m, d)
    for k, c in enumerate(coefs):
        out = jnp.add(out, jnp.multiply(c, jnp.cos(jnp.multiply(2.0 * np.pi * k / (m - 1), n))))
    return out


def hamming(M: int) -> Any:  # noqa: N803 - NumPy's name
    """Return the Hamming window.

    The values are `0.54 - 0.46 cos(2 pi n / (M - 1))`.

    Args:
        M: Number of points.
    Returns:
        A 1-D float array of `M` values.

    Examples:
        >>> jnp.hamming(4)
        Array([0.08000001, 0.77000004, 0.77      , 0.08000001], dtype=float32)

    See also:
        `hanning`, `blackman`.
    """
    return _cosine_window("hamming", M, (0.54, -0.46))


def hanning(M: int) -> Any:  # noqa: N803
    """Return the Hann window.

    The values are `0.5 - 0.5 cos(2 pi n / (M - 1))`.

    Args:
        M: Number of points.
    Returns:
        A 1-D float array of `M` values.

    Examples:
        >>> jnp.hanning(4)
        Array([0.        , 0.75      , 0.74999994, 0.        ], dtype=float32)

    See also:
        `hamming`, `blackman`.
    """
    return _cosine_window("hanning", M, (0.5, -0.5))


def blackman(M: int) -> Any:  # noqa: N803
    """Return the Blackman window.

    The values are `0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))`.

    Args:
        M: Number of points.
    Returns:
        A 1-D float array of `M` values.

    Examples:
        >>> jnp.blackman(4)
        Array([-1.4901161e-08,  6.3000000e-01,  6.2999994e-01, -1.4901161e-08], dtype=float32)

    See also:
        `bartlett`, `hamming`, `hanning`, `kaiser`.
    """
    return _cosine_window("blackman", M, (0.42, -0.5, 0.08))


def bartlett(M: int) -> Any:  # noqa: N803
    """Return the Bartlett (triangular) window.

    Args:
        M: Number of points.
    Returns:
        A 1-D float array of `M` values.

    Examples:
        >>> jnp.bartlett(5)
        Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)

    See also:
        `blackman`, `hamming`, `hanning`, `kaiser`.
    """
    m = _window_n("bartlett", M)
    d = dtypes.default_float()
    if m <= 1:
        return jnp.ones(max(m, 0), d)
    n = jnp.arange(m, dtype=d)
    return jnp.subtract(1.0, jnp.abs(jnp.subtract(jnp.multiply(2.0 / (m - 1), n), 1.0)))


def kaiser(M: int, beta: Any) -> Any:  # noqa: N803
    """Return the Kaiser window.

    The values are `I0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / I0(beta)`.

    Args:
        M: Number of points.
        beta: Shape parameter.
    Returns:
        A 1-D float array of `M` values.

    Examples:
        >>> jnp.kaiser(4, 5.0)
        Array([0.03671089, 0.77532196, 0.77532196, 0.03671089], dtype=float32)

    See also:
        `i0`, `hamming`.
    """
    m = _window_n("kaiser", M)
    d = dtypes.default_float()
    if m <= 1:
        return jnp.ones(max(m, 0), d)
    n = jnp.arange(m, dtype=d)
    alpha = (m - 1) / 2.0
    beta = jnp.astype(jnp.asarray(beta), d)
    r = jnp.divide(jnp.subtract(n, alpha), alpha)
    return jnp.divide(i0(jnp.multiply(beta, jnp.sqrt(jnp.subtract(1.0, jnp.square(r))))), i0(beta))


__all__ += [
    "bincount", "digitize", "histogram", "histogram_bin_edges", "isin", "union1d", "setdiff1d",
    "intersect1d", "setxor1d", "unique_values", "unique_counts", "unique_inverse", "unique_all", "insert",
    "delete", "resize", "trim_zeros", "partition", "argpartition", "top_k", "minmax", "quantile", "nanquantile",
    "percentile",
    "nanpercentile", "nanmedian", "interp", "cov", "corrcoef", "unwrap", "packbits", "unpackbits",
    "bitwise_count", "hamming", "hanning", "blackman", "bartlett", "kaiser",
]


def unreduced_scatter_add(out: Any, data: Any, segment_ids: Any, out_sharding: Any, kw: dict) -> Any:
    """``out.at[segment_ids].add(data)`` left unreduced over mesh axes U (JAX's ``out_sharding=P(...,
    unreduced=U)``): each device adds its block of rows (``data`` and ``segment_ids`` split over U along their
    leading axis) into its own full-size result, the partial sums a later ``reshard`` adds up."""
    from ftrans.core.sharding import NamedSharding, PartitionSpec
    from ftrans.lax._sharding import _resolve
    from ftrans.transforms.shard_map import shard_map

    out_sharding = _resolve(out_sharding, "out_sharding")
    spec, mesh = out_sharding.spec, out_sharding.mesh
    axes = tuple(a for a in mesh.axis_names if a in spec.unreduced)
    rows = PartitionSpec(axes if len(axes) > 1 else axes[0])
    if not np.ndim(data):  # (bincount's unit weight)
        from ftrans.numpy._shape import broadcast_to

        data = broadcast_to(data, tuple(np.shape(segment_ids)) + tuple(np.shape(out))[1:])
    if all(mesh.axis_types[mesh.axis_names.index(a)].name == "Explicit" for a in axes):
        from ftrans.lax._sharding import with_sharding_constraint

        # over Explicit axes shard_map takes the blocks the types give
        data, segment_ids = (with_sharding_constraint(v, NamedSharding(mesh, rows), _what="reshard")
                             for v in (data, segment_ids))

    def local(d: Any, i: Any) -> Any:
        return out.at[i].add(d, **kw)

    return shard_map(local, mesh=mesh, in_specs=(rows, rows), out_specs=spec, axis_names=set(axes))(data,
                                                                                                 segment_ids)
