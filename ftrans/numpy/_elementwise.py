"""``jnp`` elementwise functions (ufunc-likes), built on the strict primitives.

Binary functions made by ``_binary`` take a fast path when no transform is
active and both operands are ftrans Arrays of one dtype: NumPy broadcasting
already matches ``jnp``'s, so the primitive's NumPy rule runs directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.primitive import Primitive, never_weak
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.trace import state
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._util import (
    as_operand,
    check_arraylike,
    convert,
    dtype_weak,
    promote_args,
    promote_dtypes,
)

__all__: list[str] = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _binary(prim: Primitive, name: str, *, doc: str | None = None):
    impl = prim.impl
    strong = prim.weak_type_rule is never_weak

    def fn(x: Any, y: Any, /) -> Any:
        if state.eval_only:
            tx = type(x)
            if tx is Array:
                xv = x._value
                ty = type(y)
                if ty is Array:
                    yv = y._value
                    if xv.dtype == yv.dtype:
                        return Array._new(impl(xv, yv), (not strong) and x.weak_type and y.weak_type)
                elif ty is float and xv.dtype.kind == "f":
                    return Array._new(impl(xv, xv.dtype.type(y)), (not strong) and x.weak_type)
        a, b = promote_args(name, x, y)
        return prim.bind(a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"Elementwise ``{name}`` with NumPy broadcasting and JAX's dtype promotion."
    __all__.append(name)
    return fn


def _unary(prim: Primitive, name: str, *, inexact: bool = False):
    def fn(x: Any, /) -> Any:
        check_arraylike(name, x)
        x = as_operand(x)
        if inexact:
            x = _to_inexact(x)
        return prim.bind(x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``" + (" (integers are promoted to float)." if inexact else ".")
    __all__.append(name)
    return fn


def _to_inexact(x: Any) -> Any:
    d, w = dtype_weak(x)
    if dtypes.is_inexact(d):
        return x
    return convert(x, dtypes.default_float(), w)


def _promote_inexact(name: str, *args: Any) -> list:
    ops = promote_args(name, *args)
    d, w = dtype_weak(ops[0])
    if dtypes.is_inexact(d):
        return ops
    fd = dtypes.default_float()
    return [convert(o, fd, w) for o in ops]


# ---------------------------------------------------------------- arithmetic
add = _binary(E.add_p, "add")
subtract = _binary(E.sub_p, "subtract")
multiply = _binary(E.mul_p, "multiply")
maximum = _binary(E.max_p, "maximum")
minimum = _binary(E.min_p, "minimum")


def _bool_arith_guard(name: str, x: Any) -> None:
    if dtype_weak(x)[0] == dtypes.bool_:
        raise FtransTypeError(f"{name} does not accept bool arrays; convert with .astype(int) first")


@_export
def negative(x: Any, /) -> Any:
    check_arraylike("negative", x)
    x = as_operand(x)
    _bool_arith_guard("negative", x)
    return E.neg_p.bind(x)


@_export
def positive(x: Any, /) -> Any:
    check_arraylike("positive", x)
    return as_operand(x)


@_export
def true_divide(x: Any, y: Any, /) -> Any:
    if state.eval_only and type(x) is Array and type(y) is Array:
        xv, yv = x._value, y._value
        if xv.dtype == yv.dtype and xv.dtype.kind in "fc":
            return Array._new(E.div_p.impl(xv, yv), x.weak_type and y.weak_type)
    a, b = _promote_inexact("true_divide", x, y)
    return E.div_p.bind(a, b)


divide = true_divide
__all__.append("divide")


@_export
def floor_divide(x: Any, y: Any, /) -> Any:
    a, b = promote_args("floor_divide", x, y)
    d = dtype_weak(a)[0]
    if d == dtypes.bool_:
        raise FtransTypeError("floor_divide does not accept bool arrays")
    if d.kind in "iu":
        q = E.div_p.bind(a, b)
        if d.kind == "u":
            return q
        # Truncation rounds toward zero; floor needs one less when signs differ and it was inexact.
        zero = _zeros_like_scalar(d)
        r = E.rem_p.bind(a, b)
        fix = logical_and(E.ne_p.bind(r, zero), E.ne_p.bind(E.lt_p.bind(a, zero), E.lt_p.bind(b, zero)))
        return S.select_n_p.bind(fix, q, E.sub_p.bind(q, _ones_scalar(d)))
    if d.kind == "c":
        raise FtransTypeError("floor_divide is not defined for complex arrays")
    return E.floor_p.bind(E.div_p.bind(a, b))


@_export
def remainder(x: Any, y: Any, /) -> Any:
    a, b = promote_args("remainder", x, y)
    d = dtype_weak(a)[0]
    if d == dtypes.bool_ or d.kind == "c":
        raise FtransTypeError(f"remainder does not accept {d.name} arrays")
    r = E.rem_p.bind(a, b)
    if d.kind == "u":
        return r
    zero = _zeros_like_scalar(d)
    # Python's sign convention: the result takes the divisor's sign.
    fix = logical_and(E.ne_p.bind(r, zero), E.ne_p.bind(E.lt_p.bind(r, zero), E.lt_p.bind(b, zero)))
    return S.select_n_p.bind(fix, r, E.add_p.bind(r, b))


mod = remainder
__all__.append("mod")


@_export
def fmod(x: Any, y: Any, /) -> Any:
    a, b = promote_args("fmod", x, y)
    return E.rem_p.bind(a, b)


@_export
def divmod(x: Any, y: Any, /) -> tuple[Any, Any]:  # noqa: A001 - NumPy's name
    return floor_divide(x, y), remainder(x, y)


def _zeros_like_scalar(d: np.dtype) -> Array:
    return Array._new(np.zeros((), d), False)


def _ones_scalar(d: np.dtype) -> Array:
    return Array._new(np.ones((), d), False)


@_export
def power(x: Any, y: Any, /) -> Any:
    # A concrete Python int exponent becomes integer_pow, as in JAX: exact and
    # differentiable at x = 0.
    if type(y) is int and not isinstance(y, bool):
        check_arraylike("power", x)
        xo = as_operand(x)
        d = dtype_weak(xo)[0]
        if d == dtypes.bool_:
            raise FtransTypeError("power does not accept bool arrays")
        if y < 0 and d.kind in "iu":
            raise FtransValueError("integers to negative integer powers are not allowed")
        return E.integer_pow_p.bind(xo, y=y)
    a, b = promote_args("power", x, y)
    d = dtype_weak(a)[0]
    if d.kind in "iu":
        return _int_power_by_squaring(a, b, d)
    if d == dtypes.bool_:
        raise FtransTypeError("power does not accept bool arrays")
    return E.pow_p.bind(a, b)


def _int_power_by_squaring(a: Any, b: Any, d: np.dtype) -> Any:
    """Integer ** integer array: a fixed-trip loop over the exponent's bits (as JAX does)."""
    from ftrans.numpy._util import broadcast_shapes, broadcast_to_shape, shape_of

    bits = d.itemsize * 8
    one = _ones_scalar(d)
    zero = _zeros_like_scalar(d)
    shape = broadcast_shapes("power", [shape_of(a), shape_of(b)])
    acc = broadcast_to_shape(one, shape)
    base = broadcast_to_shape(a, shape)
    e = broadcast_to_shape(b, shape)
    for _ in range(bits):
        bit = E.ne_p.bind(E.and_p.bind(e, one), zero)
        acc = S.select_n_p.bind(bit, acc, E.mul_p.bind(acc, base))
        base = E.mul_p.bind(base, base)
        e = E.shift_right_logical_p.bind(e, one)
    negexp = E.lt_p.bind(b, zero) if d.kind == "i" else None
    if negexp is not None:
        acc = S.select_n_p.bind(broadcast_to_shape(negexp, shape), acc, broadcast_to_shape(zero, shape))
    return acc


pow = power  # noqa: A001 - NumPy 2 alias
__all__.append("pow")


@_export
def square(x: Any, /) -> Any:
    check_arraylike("square", x)
    return E.integer_pow_p.bind(as_operand(x), y=2)


@_export
def reciprocal(x: Any, /) -> Any:
    check_arraylike("reciprocal", x)
    return E.integer_pow_p.bind(_to_inexact(as_operand(x)), y=-1)


@_export
def absolute(x: Any, /) -> Any:
    check_arraylike("absolute", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if d.kind == "u" or d == dtypes.bool_:
        return x
    return E.abs_p.bind(x)


abs = absolute  # noqa: A001
__all__.append("abs")


@_export
def sign(x: Any, /) -> Any:
    check_arraylike("sign", x)
    x = as_operand(x)
    if dtype_weak(x)[0] == dtypes.bool_:
        return x
    return E.sign_p.bind(x)


exp = _unary(E.exp_p, "exp", inexact=True)
exp2 = _unary(E.exp2_p, "exp2", inexact=True)
expm1 = _unary(E.expm1_p, "expm1", inexact=True)
log = _unary(E.log_p, "log", inexact=True)
log1p = _unary(E.log1p_p, "log1p", inexact=True)
sqrt = _unary(E.sqrt_p, "sqrt", inexact=True)
cbrt = _unary(E.cbrt_p, "cbrt", inexact=True)
sin = _unary(E.sin_p, "sin", inexact=True)
cos = _unary(E.cos_p, "cos", inexact=True)
tan = _unary(E.tan_p, "tan", inexact=True)
arcsin = _unary(E.asin_p, "arcsin", inexact=True)
arccos = _unary(E.acos_p, "arccos", inexact=True)
arctan = _unary(E.atan_p, "arctan", inexact=True)
sinh = _unary(E.sinh_p, "sinh", inexact=True)
cosh = _unary(E.cosh_p, "cosh", inexact=True)
tanh = _unary(E.tanh_p, "tanh", inexact=True)
arcsinh = _unary(E.asinh_p, "arcsinh", inexact=True)
arccosh = _unary(E.acosh_p, "arccosh", inexact=True)
arctanh = _unary(E.atanh_p, "arctanh", inexact=True)
asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh
__all__ += ["asin", "acos", "atan", "asinh", "acosh", "atanh"]


def _log_base(name: str, base: float):
    def fn(x: Any, /) -> Any:
        check_arraylike(name, x)
        x = _to_inexact(as_operand(x))
        d = dtype_weak(x)[0]
        return E.div_p.bind(E.log_p.bind(x), Array._new(np.asarray(np.log(base), d), False))

    fn.__name__ = name
    __all__.append(name)
    return fn


log2 = _log_base("log2", 2.0)
log10 = _log_base("log10", 10.0)


@_export
def arctan2(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("arctan2", x1, x2)
    return E.atan2_p.bind(a, b)


atan2 = arctan2
__all__.append("atan2")


@_export
def hypot(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("hypot", x1, x2)
    a, b = E.abs_p.bind(a), E.abs_p.bind(b)
    hi = E.max_p.bind(a, b)
    lo = E.min_p.bind(a, b)
    d = dtype_weak(hi)[0]
    zero = _zeros_like_scalar(d)
    safe_hi = S.select_n_p.bind(E.eq_p.bind(hi, zero), hi, broadcast_like(_ones_scalar(d), hi))
    r = E.div_p.bind(lo, safe_hi)
    return E.mul_p.bind(hi, E.sqrt_p.bind(E.add_p.bind(_ones_scalar(d), E.mul_p.bind(r, r))))


def broadcast_like(s: Any, like: Any) -> Any:
    from ftrans.numpy._util import broadcast_to_shape, shape_of

    return broadcast_to_shape(s, shape_of(like))


def _rounding(prim: Primitive, name: str):
    def fn(x: Any, /) -> Any:
        check_arraylike(name, x)
        x = as_operand(x)
        d = dtype_weak(x)[0]
        if d.kind in "iub":
            return x
        if d.kind == "c":
            raise FtransTypeError(f"{name} is not defined for complex arrays")
        return prim.bind(x)

    fn.__name__ = name
    __all__.append(name)
    return fn


floor = _rounding(E.floor_p, "floor")
ceil = _rounding(E.ceil_p, "ceil")


@_export
def trunc(x: Any, /) -> Any:
    check_arraylike("trunc", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if d.kind in "iub":
        return x
    zero = _zeros_like_scalar(d)
    return S.select_n_p.bind(E.lt_p.bind(x, zero), E.floor_p.bind(x), E.ceil_p.bind(x))


fix = trunc
__all__.append("fix")


@_export
def rint(x: Any, /) -> Any:
    check_arraylike("rint", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if d.kind in "iub":
        return _to_inexact(x)
    return E.round_p.bind(x, rounding_method=1)


@_export
def round(a: Any, decimals: int = 0, out: None = None) -> Any:  # noqa: A001
    if out is not None:
        raise NotImplementedError("jnp.round: the 'out' argument is not supported (arrays are immutable)")
    check_arraylike("round", a)
    x = as_operand(a)
    d = dtype_weak(x)[0]
    if d.kind in "iub":
        if decimals >= 0:
            return x
        f = 10 ** (-decimals)
        return multiply(floor_divide(add(x, f // 2), f), f)
    if decimals == 0:
        return E.round_p.bind(x, rounding_method=1)
    factor = Array._new(np.asarray(10.0**decimals, d), False)
    return E.div_p.bind(E.round_p.bind(E.mul_p.bind(x, factor), rounding_method=1), factor)


around = round
__all__.append("around")


@_export
def clip(arr: Any = None, /, min: Any = None, max: Any = None, *, a: Any = None,  # noqa: A002
         a_min: Any = None, a_max: Any = None) -> Any:
    x = arr if arr is not None else a
    if x is None:
        raise FtransTypeError("clip() needs an array argument")
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    check_arraylike("clip", x)
    out = as_operand(x)
    if lo is not None:
        out = maximum(lo, out)
    if hi is not None:
        out = minimum(hi, out)
    return out


@_export
def fmax(x1: Any, x2: Any, /) -> Any:
    a, b = promote_args("fmax", x1, x2)
    return where(isnan(a), b, where(isnan(b), a, E.max_p.bind(a, b)))


@_export
def fmin(x1: Any, x2: Any, /) -> Any:
    a, b = promote_args("fmin", x1, x2)
    return where(isnan(a), b, where(isnan(b), a, E.min_p.bind(a, b)))


@_export
def logaddexp(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("logaddexp", x1, x2)
    amax = E.max_p.bind(a, b)
    delta = E.sub_p.bind(a, b)
    # exp(-|a-b|) is at most 1, so log1p never overflows; equal infinities give a
    # NaN delta, where a + b is the right answer (inf, or NaN for inf - inf).
    soft = E.add_p.bind(amax, E.log1p_p.bind(E.exp_p.bind(E.neg_p.bind(E.abs_p.bind(delta)))))
    return S.select_n_p.bind(E.ne_p.bind(delta, delta), soft, E.add_p.bind(a, b))


@_export
def logaddexp2(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("logaddexp2", x1, x2)
    d = dtype_weak(a)[0]
    ln2 = Array._new(np.asarray(np.log(2.0), d), False)
    return E.div_p.bind(logaddexp(E.mul_p.bind(a, ln2), E.mul_p.bind(b, ln2)), ln2)


@_export
def deg2rad(x: Any, /) -> Any:
    x = _to_inexact(as_operand(x))
    return E.mul_p.bind(x, Array._new(np.asarray(np.pi / 180, dtype_weak(x)[0]), False))


@_export
def rad2deg(x: Any, /) -> Any:
    x = _to_inexact(as_operand(x))
    return E.mul_p.bind(x, Array._new(np.asarray(180 / np.pi, dtype_weak(x)[0]), False))


radians, degrees = deg2rad, rad2deg
__all__ += ["radians", "degrees"]


@_export
def heaviside(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("heaviside", x1, x2)
    d = dtype_weak(a)[0]
    zero = _zeros_like_scalar(d)
    return where(E.lt_p.bind(a, zero), zero, where(E.gt_p.bind(a, zero), _ones_scalar(d), b))


@_export
def signbit(x: Any, /) -> Any:
    check_arraylike("signbit", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if d.kind == "u" or d == dtypes.bool_:
        return _full_bool(x, False)
    if d.kind == "i":
        return less(x, 0)
    if d.kind == "c":
        raise FtransTypeError("signbit is not defined for complex arrays")
    idt = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[d.itemsize]
    bits = S.bitcast_convert_type_p.bind(x, new_dtype=idt)
    return E.lt_p.bind(bits, _zeros_like_scalar(idt))


@_export
def copysign(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("copysign", x1, x2)
    return where(signbit(b), E.neg_p.bind(E.abs_p.bind(a)), E.abs_p.bind(a))


@_export
def nextafter(x1: Any, x2: Any, /) -> Any:
    a, b = _promote_inexact("nextafter", x1, x2)
    return E.nextafter_p.bind(a, b)


# ---------------------------------------------------------------- comparisons and logic
equal = _binary(E.eq_p, "equal")
not_equal = _binary(E.ne_p, "not_equal")
less = _binary(E.lt_p, "less")
less_equal = _binary(E.le_p, "less_equal")
greater = _binary(E.gt_p, "greater")
greater_equal = _binary(E.ge_p, "greater_equal")


def _to_bool(x: Any) -> Any:
    x = as_operand(x)
    if dtype_weak(x)[0] == dtypes.bool_:
        return x
    return E.ne_p.bind(x, _zeros_like_scalar(dtype_weak(x)[0]))


def _logical(prim: Primitive, name: str):
    def fn(x1: Any, x2: Any, /) -> Any:
        check_arraylike(name, x1, x2)
        a, b = promote_args(name, _to_bool(x1), _to_bool(x2))
        return prim.bind(a, b)

    fn.__name__ = name
    __all__.append(name)
    return fn


logical_and = _logical(E.and_p, "logical_and")
logical_or = _logical(E.or_p, "logical_or")
logical_xor = _logical(E.xor_p, "logical_xor")


@_export
def logical_not(x: Any, /) -> Any:
    check_arraylike("logical_not", x)
    return E.not_p.bind(_to_bool(x))


def _bitwise(prim: Primitive, name: str):
    def fn(x1: Any, x2: Any, /) -> Any:
        a, b = promote_args(name, x1, x2)
        d = dtype_weak(a)[0]
        if d.kind not in "iub":
            raise FtransTypeError(f"{name} is only defined for integer and bool arrays, not {d.name}")
        return prim.bind(a, b)

    fn.__name__ = name
    __all__.append(name)
    return fn


bitwise_and = _bitwise(E.and_p, "bitwise_and")
bitwise_or = _bitwise(E.or_p, "bitwise_or")
bitwise_xor = _bitwise(E.xor_p, "bitwise_xor")
left_shift = _bitwise(E.shift_left_p, "left_shift")


@_export
def right_shift(x1: Any, x2: Any, /) -> Any:
    a, b = promote_args("right_shift", x1, x2)
    d = dtype_weak(a)[0]
    if d.kind not in "iu":
        raise FtransTypeError(f"right_shift is only defined for integer arrays, not {d.name}")
    prim = E.shift_right_logical_p if d.kind == "u" else E.shift_right_arithmetic_p
    return prim.bind(a, b)


@_export
def invert(x: Any, /) -> Any:
    check_arraylike("invert", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if d.kind not in "iub":
        raise FtransTypeError(f"invert is only defined for integer and bool arrays, not {d.name}")
    return E.not_p.bind(x)


bitwise_not = bitwise_invert = invert
__all__ += ["bitwise_not", "bitwise_invert"]


@_export
def isnan(x: Any, /) -> Any:
    check_arraylike("isnan", x)
    x = as_operand(x)
    if not dtypes.is_inexact(dtype_weak(x)[0]):
        return _full_bool(x, False)
    return E.ne_p.bind(x, x)


@_export
def isfinite(x: Any, /) -> Any:
    check_arraylike("isfinite", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if not dtypes.is_inexact(d):
        return _full_bool(x, True)
    if d.kind == "c":
        return logical_and(E.is_finite_p.bind(E.real_p.bind(x)), E.is_finite_p.bind(E.imag_p.bind(x)))
    return E.is_finite_p.bind(x)


@_export
def isinf(x: Any, /) -> Any:
    check_arraylike("isinf", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if not dtypes.is_inexact(d):
        return _full_bool(x, False)
    if d.kind == "c":
        return logical_or(isinf(E.real_p.bind(x)), isinf(E.imag_p.bind(x)))
    inf = Array._new(np.asarray(np.inf, d), False)
    return E.eq_p.bind(E.abs_p.bind(x), inf)


@_export
def isposinf(x: Any, /) -> Any:
    return equal(x, np.inf) if dtypes.is_inexact(dtype_weak(as_operand(x))[0]) else isinf(x)


@_export
def isneginf(x: Any, /) -> Any:
    return equal(x, -np.inf) if dtypes.is_inexact(dtype_weak(as_operand(x))[0]) else isinf(x)


def _full_bool(like: Any, value: bool) -> Any:
    from ftrans.numpy._util import broadcast_to_shape, shape_of

    return broadcast_to_shape(Array._new(np.asarray(value), False), shape_of(like))


@_export
def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Any:
    check_arraylike("nan_to_num", x)
    x = as_operand(x)
    d = dtype_weak(x)[0]
    if not dtypes.is_inexact(d):
        return x
    if d.kind == "c":
        re = nan_to_num(E.real_p.bind(x), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(E.imag_p.bind(x), nan=nan, posinf=posinf, neginf=neginf)
        return E.complex_p.bind(re, im)
    info = dtypes.finfo(d)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = where(isnan(x), convert(nan, d), x)
    out = where(E.eq_p.bind(x, Array._new(np.asarray(np.inf, d), False)), convert(hi, d), out)
    return where(E.eq_p.bind(x, Array._new(np.asarray(-np.inf, d), False)), convert(lo, d), out)


@_export
def where(condition: Any, x: Any = None, y: Any = None, /, *, size: int | None = None,
          fill_value: Any = None) -> Any:
    if x is None and y is None:
        from ftrans.numpy._indexing import nonzero

        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise FtransTypeError("where() takes either 1 or 3 arguments (condition, x, y)")
    check_arraylike("where", condition, x, y)
    c = _to_bool(condition)
    a, b = promote_dtypes("where", x, y)[0]
    c, a, b = _broadcast_all("where", c, a, b)
    return S.select_n_p.bind(c, b, a)


def _broadcast_all(name: str, *ops: Any) -> list:
    from ftrans.numpy._util import broadcast_shapes, broadcast_to_shape, shape_of

    shapes = [shape_of(o) for o in ops]
    shape = broadcast_shapes(name, shapes, ops)
    return [broadcast_to_shape(o, shape) for o in ops]


# ---------------------------------------------------------------- complex parts
@_export
def real(x: Any, /) -> Any:
    x = as_operand(x)
    return E.real_p.bind(x) if dtype_weak(x)[0].kind == "c" else x


@_export
def imag(x: Any, /) -> Any:
    x = as_operand(x)
    if dtype_weak(x)[0].kind == "c":
        return E.imag_p.bind(x)
    return multiply(x, 0) if dtype_weak(x)[0] != dtypes.bool_ else _full_bool(x, False)


@_export
def conjugate(x: Any, /) -> Any:
    x = as_operand(x)
    return E.conj_p.bind(x) if dtype_weak(x)[0].kind == "c" else x


conj = conjugate
__all__.append("conj")
