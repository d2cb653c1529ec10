"""Less central ``jax.numpy`` functions: comparisons, differences, number theory,
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

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import dtypes
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._elementwise import _inexact
from ftrans.numpy._util import (
    as_operand,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    convert,
    dtype_weak,
    promote_dtypes,
    shape_of,
)

__all__ = [
    "allclose", "isclose", "array_equal", "array_equiv", "diff", "ediff1d", "cross", "gcd", "lcm",
    "ldexp", "frexp", "modf", "fabs", "float_power", "sinc", "spacing", "i0", "isscalar", "iscomplex",
    "iscomplexobj", "isreal", "isrealobj", "isdtype", "iterable", "rollaxis", "unravel_index",
    "ravel_multi_index", "vander", "trapezoid", "fill_diagonal", "put_along_axis", "polyval",
    "polyadd", "polysub", "polymul", "polyder", "polyint",
]


# ---------------------------------------------------------------- small helpers
def _arr(name: str, x: Any) -> Any:
    """An Array/Tracer for ``x``; lists are rejected like JAX's ensure_arraylike."""
    check_arraylike(name, x)
    return as_operand(x)


def _index(name: str, value: Any, what: str) -> int:
    """A static Python int for a shape-determining argument."""
    value = concrete_or_error(value, f"'{what}' argument of jnp.{name}")
    try:
        return operator.index(value)
    except TypeError:
        raise FtransTypeError(f"{name}: '{what}' must be an integer, got {type(value).__name__}") from None


def _real_dtype(d: np.dtype) -> np.dtype:
    return np.dtype(np.finfo(d).dtype) if d.kind == "c" else d


def _is_traced(*xs: Any) -> bool:
    return any(isinstance(x, Tracer) for x in xs)


# ---------------------------------------------------------------- comparisons
def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """``jnp.isclose``: ``|a - b| <= atol + rtol * |b|``, infinities equal to themselves.

    Integer inputs are compared in floating point, as JAX promotes to inexact first.
    """
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
    """``jnp.allclose``: a 0-d bool array (not a Python bool, so it also works traced)."""
    return jnp.all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """``jnp.array_equal``: same shape and equal elements; different shapes give False."""
    a1, a2 = jnp.asarray(a1), jnp.asarray(a2)
    if tuple(shape_of(a1)) != tuple(shape_of(a2)):
        return jnp.array(False)
    eq = jnp.equal(a1, a2)
    if equal_nan:
        eq = jnp.logical_or(eq, jnp.logical_and(jnp.isnan(a1), jnp.isnan(a2)))
    return jnp.all(eq)


def array_equiv(a1: Any, a2: Any) -> Any:
    """``jnp.array_equiv``: equal after broadcasting; unbroadcastable shapes give False."""
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
    """``jnp.diff``: ``n``-th forward difference along ``axis`` (``!=`` for booleans)."""
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
    """``jnp.ediff1d``: differences of the flattened array, with optional ends (cast to its dtype)."""
    arr = jnp.ravel(_arr("ediff1d", ary))
    d = dtype_weak(arr)[0]
    result = jnp.subtract(arr[1:], arr[:-1])
    if to_begin is not None:
        result = jnp.concatenate((jnp.ravel(jnp.astype(_arr("ediff1d", to_begin), d)), result))
    if to_end is not None:
        result = jnp.concatenate((result, jnp.ravel(jnp.astype(_arr("ediff1d", to_end), d))))
    return result


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    """``jnp.cross``: 2-d (scalar result) or 3-d cross products, batched over the other axes."""
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
    """``jnp.gcd``: greatest common divisor of the absolute values."""
    x1, x2 = _int_pair("gcd", x1, x2)
    return _gcd_abs(jnp.abs(x1), jnp.abs(x2))


def lcm(x1: Any, x2: Any) -> Any:
    """``jnp.lcm``: least common multiple of the absolute values (0 if either is 0)."""
    x1, x2 = _int_pair("lcm", x1, x2)
    x1, x2 = jnp.abs(x1), jnp.abs(x2)
    d = _gcd_abs(x1, x2)
    zero = jnp.zeros_like(d)
    safe = jnp.where(jnp.equal(d, zero), jnp.ones_like(d), d)
    return jnp.where(jnp.equal(d, zero), zero, jnp.multiply(x1, jnp.floor_divide(x2, safe)))


# ---------------------------------------------------------------- float decomposition
_INT_OF_WIDTH = {2: np.int16, 4: np.int32, 8: np.int64}


def frexp(x: Any, /) -> tuple[Any, Any]:
    """``jnp.frexp``: mantissa in [0.5, 1) and int32 exponent, by bit manipulation.

    Subnormals are first scaled into the normal range so the exponent field
    is meaningful; zeros, infinities and NaNs pass through with exponent 0.
    """
    check_arraylike("frexp", x)
    (x,) = _inexact("frexp", x)
    d = dtype_weak(x)[0]
    if d.kind == "c":
        raise FtransTypeError("frexp does not support complex-valued inputs")
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
    special = jnp.logical_or(jnp.logical_or(jnp.isinf(x), jnp.isnan(x)), jnp.equal(x, jnp.zeros_like(x)))
    e = jnp.where(special, jnp.zeros_like(e), e)
    return jnp.where(special, x, m), jnp.astype(e, np.int32)


def ldexp(x1: Any, x2: Any, /) -> Any:
    """``jnp.ldexp``: ``x1 * 2**x2``, via frexp so large exponents do not overflow early."""
    check_arraylike("ldexp", x1, x2)
    d1, d2 = dtype_weak(x1)[0], dtype_weak(x2)[0]
    if d1.kind == "c" or d2.kind in "fcV" or d2 == dtypes.bfloat16:
        raise FtransValueError(f"ldexp not supported for input types ({d1}, {d2})")
    (x1,) = _inexact("ldexp", x1)
    d = dtype_weak(x1)[0]
    x2 = jnp.asarray(x2)
    x2 = lax.convert_element_type(x2, d) if x2.dtype != d else x2
    m, e = frexp(x1)
    e = jnp.astype(jnp.add(jnp.astype(e, d), x2), d)
    pos = jnp.greater(e, jnp.zeros_like(e))
    m = jnp.where(pos, jnp.multiply(m, 2), m)
    e = jnp.where(pos, jnp.subtract(e, 1), e)
    x = jnp.multiply(m, jnp.power(jnp.asarray(2, d), e))
    return jnp.where(jnp.logical_or(jnp.isinf(x1), jnp.equal(x1, jnp.zeros_like(x1))), x1, x)


def modf(x: Any, /, out: None = None) -> tuple[Any, Any]:
    """``jnp.modf``: fractional and integral parts, both with the sign of ``x``."""
    if out is not None:
        raise NotImplementedError("modf: out is not supported")
    check_arraylike("modf", x)
    (x,) = _inexact("modf", x)
    whole = jnp.where(jnp.greater_equal(x, jnp.zeros_like(x)), jnp.floor(x), jnp.ceil(x))
    return jnp.subtract(x, whole), whole


def fabs(x: Any, /) -> Any:
    """``jnp.fabs``: absolute value in floating point; complex input is an error as in NumPy."""
    check_arraylike("fabs", x)
    if dtype_weak(x)[0].kind == "c":
        raise FtransTypeError("ufunc 'fabs' does not support complex dtypes")
    (x,) = _inexact("fabs", x)
    return jnp.abs(x)


def float_power(x: Any, y: Any, /) -> Any:
    """``jnp.float_power``: power in the promoted inexact type (float32 unless x64, as in JAX)."""
    check_arraylike("float_power", x, y)
    x, y = _inexact("float_power", x, y)
    return jnp.power(x, y)


def sinc(x: Any, /) -> Any:
    """``jnp.sinc``: ``sin(pi x) / (pi x)``, exactly 1 at 0."""
    check_arraylike("sinc", x)
    (x,) = _inexact("sinc", x)
    zero = jnp.equal(x, jnp.zeros_like(x))
    pix = jnp.multiply(x, np.pi)
    safe = jnp.where(zero, jnp.ones_like(x), pix)
    one = jnp.add(jnp.multiply(pix, 0), 1)
    return jnp.where(zero, one, jnp.divide(jnp.sin(safe), safe))


def spacing(x: Any, /) -> Any:
    """``jnp.spacing``: distance to the next representable value away from zero."""
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
    """``jnp.i0``: modified Bessel function I0 from Cephes' Chebyshev expansions.

    The expansions are of ``exp(-|x|) I0(x)`` on [0, 8] and (8, inf), the same
    ones NumPy uses; the coefficient tables are read from NumPy.
    """
    from numpy.lib import _function_base_impl as _fb

    check_arraylike("i0", x)
    (x,) = _inexact("i0", x)
    d = dtype_weak(x)[0]
    if d.kind == "c":
        raise FtransValueError(f"Unsupported input type to jax.numpy.i0: {d}")
    ax = jnp.abs(x)
    small = jnp.less_equal(ax, 8.0)
    safe_big = jnp.where(small, jnp.full_like(ax, 8.0), ax)
    e_small = _chbevl(jnp.subtract(jnp.multiply(ax, 0.5), 2.0), _fb._i0A)
    e_big = jnp.divide(_chbevl(jnp.subtract(jnp.divide(32.0, safe_big), 2.0), _fb._i0B), jnp.sqrt(safe_big))
    return jnp.multiply(jnp.exp(ax), jnp.where(small, e_small, e_big))


# ---------------------------------------------------------------- type predicates
def isscalar(element: Any) -> bool:
    """``jnp.isscalar``: Python/NumPy scalars and any 0-d array (JAX's JIT-invariant rule)."""
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, jnp.ndarray, Tracer)):
        return len(shape_of(element)) == 0
    return False


def iscomplex(x: Any) -> Any:
    """``jnp.iscomplex``: elementwise nonzero imaginary part."""
    i = jnp.imag(_arr("iscomplex", x))
    return jnp.not_equal(i, jnp.zeros_like(i))


def isreal(x: Any) -> Any:
    """``jnp.isreal``: elementwise zero imaginary part."""
    i = jnp.imag(_arr("isreal", x))
    return jnp.equal(i, jnp.zeros_like(i))


def iscomplexobj(x: Any) -> bool:
    """``jnp.iscomplexobj``: whether the dtype of ``x`` is complex (a Python bool)."""
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
    """``jnp.isrealobj``: not ``iscomplexobj``."""
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
    """``jnp.isdtype`` (array API): ``dtype`` is of ``kind`` (a name, a dtype, or a tuple of them)."""
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
                if d == np.dtype(getattr(k, "dtype", k)):
                    return True
            except TypeError:
                raise FtransTypeError(f"isdtype: kind must be a str, a dtype or a tuple, got {k!r}") from None
    return False


def iterable(y: Any) -> bool:
    """``jnp.iterable``: whether ``iter(y)`` works (NumPy's definition)."""
    return bool(np.iterable(y))


# ---------------------------------------------------------------- shapes and indices
def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """``jnp.rollaxis``: move ``axis`` so it lies before ``start`` (NumPy's legacy moveaxis)."""
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
    """``jnp.unravel_index``: flat indices to coordinate arrays; out-of-range indices are clipped."""
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
    """``jnp.ravel_multi_index``: coordinate arrays to flat indices.

    ``mode='raise'`` checks bounds, so it needs concrete indices; ``'clip'``,
    ``'wrap'`` and ``'ignore'`` work traced.
    """
    if len(multi_index) != len(dims):
        raise FtransValueError(
            f"ravel_multi_index: len(multi_index)={len(multi_index)} != len(dims)={len(dims)}"
        )
    dims = tuple(_index("ravel_multi_index", d, "dims") for d in dims)
    check_arraylike("ravel_multi_index", *multi_index)
    arrs = [as_operand(i) for i in multi_index]
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
            concrete_or_error(a, "ravel_multi_index with mode='raise' needs concrete indices; "
                                 "use mode='wrap' or mode='clip' instead. The index")
        if dtype_weak(a)[0].kind not in "iu":
            raise FtransTypeError("ravel_multi_index: only int indices permitted")
    if mode == "raise":
        for a, d in zip(arrs, dims):
            v = np.asarray(a._value)
            if np.any((v < 0) | (v >= d)):
                raise FtransValueError("ravel_multi_index: invalid entry in coordinates array")
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
    """``jnp.vander``: columns are powers of ``x`` (decreasing unless ``increasing``)."""
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
    """``jnp.trapezoid``: the trapezoid rule along ``axis``, with sample points ``x`` or spacing ``dx``."""
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
    """``jnp.fill_diagonal``: a copy of ``a`` with its main diagonal set (``inplace=False`` required)."""
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
    """``jnp.put_along_axis``: the scatter counterpart of ``take_along_axis`` (``inplace=False`` required)."""
    if inplace:
        raise FtransValueError("put_along_axis cannot modify arrays in-place, because ftrans arrays are "
                               "immutable. Pass inplace=False to instead return an updated array.")
    check_arraylike("put_along_axis", arr, indices, values)
    arr, indices, values = as_operand(arr), as_operand(indices), as_operand(values)
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
def polyval(p: Any, x: Any, *, unroll: int = 16) -> Any:
    """``jnp.polyval``: Horner's rule over the leading axis of ``p`` (``unroll`` is accepted and ignored)."""
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
    """``jnp.polyadd``: sum of coefficient arrays, aligned at the constant term."""
    (a1, a2), _, _ = promote_dtypes("polyadd", a1, a2)
    n1, n2 = shape_of(a1)[0], shape_of(a2)[0]
    if n2 <= n1:
        return a1.at[n1 - n2:].add(a2)
    return a2.at[n2 - n1:].add(a1)


def polysub(a1: Any, a2: Any) -> Any:
    """``jnp.polysub``: difference of coefficient arrays."""
    (a1, a2), _, _ = promote_dtypes("polysub", a1, a2)
    return polyadd(a1, jnp.negative(a2))


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    """``jnp.polymul``: product of coefficient arrays, as a scatter-add of the outer product.

    (JAX uses a full convolution; the sums are the same up to rounding.)
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
    n1, n2 = shape_of(a1)[0], shape_of(a2)[0]
    pos = (np.arange(n1)[:, None] + np.arange(n2)[None, :]).ravel()
    prod = jnp.ravel(jnp.multiply(a1[:, None], a2[None, :]))
    out = jnp.zeros(n1 + n2 - 1, dtype_weak(prod)[0])
    return out.at[jnp.asarray(pos.astype(np.int32))].add(prod)


def polyder(p: Any, m: int = 1) -> Any:
    """``jnp.polyder``: coefficients of the ``m``-th derivative."""
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
    """``jnp.polyint``: coefficients of the ``m``-th antiderivative with integration constants ``k``."""
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
