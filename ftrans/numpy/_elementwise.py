"""``jnp`` elementwise functions (ufunc-likes), built on the strict primitives.

Binary functions made by ``_binary`` take a fast path when no transform is
active and both operands are ftrans Arrays of one dtype: NumPy broadcasting
already matches ``jnp``'s, so the primitive's NumPy rule runs directly.  Any
exception on that path falls back to the general path, which raises ftrans's
own errors.

Everything else follows JAX's ``numpy`` function by function: which promotion a
function applies (plain, "numeric" where bool becomes int32, or "inexact" where
integers become the default float), which constants are weakly typed (so the
result's weak type matches JAX's), and XLA's edge cases (integer division by
zero, NaN in max/min, complex ordering).  Because eager execution skips
abstract evaluation, every dtype a primitive would reject is rejected here
first, with a message that names the function.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import operands as _operands
from ftrans.core import trace as _trace
from ftrans.core.array import Array, DeviceArray
from ftrans.core.operands import (
    as_operand,
    broadcast_operands,
    broadcast_shapes,
    broadcast_to_shape,
    check_arraylike,
    convert,
    dtype_weak,
    maybe_concrete,
    promote_args,
    promote_dtypes,
    shape_of,
)
from ftrans.core.primitive import Primitive, _all_weak, never_weak
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.prims._base import FLOAT, INEXACT, NUM, SIGNED_NUM
from ftrans.core.trace import Tracer, can_shortcut, outputs_checked
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy import error as _err
from ftrans.numpy._elementwise_docs import DOCS as _DOCS
from ftrans.transforms.custom_derivatives import custom_jvp

__all__: list[str] = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# ---------------------------------------------------------------- helpers
def _dtype(x: Any) -> np.dtype:
    return dtype_weak(x)[0]


def _const(like: Any, value: Any, weak: bool = True) -> Array:
    """A rank-0 constant of ``like``'s dtype.

    Weak constants stand for JAX's Python-scalar constants (they never make a
    weak result strong); strong ones for JAX's ``np.array`` constants.
    """
    d = like if isinstance(like, np.dtype) else _dtype(like)
    with np.errstate(all="ignore"):
        return Array._new(np.asarray(value).astype(d), weak)


def _lax_const(like: Any, value: Any) -> Array:
    """JAX's ``lax._const``: weak only when ``like`` is a weakly typed rank-0 value."""
    d, w = dtype_weak(like)
    return _const(d, value, w and shape_of(like) == ())


_broadcast_ops = broadcast_operands


def _broadcast_full(name: str, ops: list) -> list:
    """Broadcast every operand to the common shape (for select_n, which needs equal shapes)."""
    shapes = [shape_of(o) for o in ops]
    shape = broadcast_shapes(name, shapes, ops)
    return [broadcast_to_shape(o, shape) for o in ops]


def _weak_stable(d: np.dtype) -> bool:
    """Whether a weakly typed operand of dtype ``d`` promotes to itself.

    True for the dtypes of Python scalars (int32/float32/complex64 without
    x64); a weak float16, say, is joined to float32 by the promotion lattice,
    so the fast paths leave it to the general path.
    """
    return dtypes.promote(((d, True),)) == (d, True)


def _promote_to(name: str, args: tuple, kind: str) -> list:
    """JAX's promote_args / promote_args_numeric / promote_args_inexact.

    The joined dtype is computed from the original operands, then each is
    converted directly to it (an uint32 operand of an inexact op goes straight
    to float32, never through int32).
    """
    if _trace.active_anywhere and _operands.library_entry is not None:
        args = _operands.library_entry(args)  # (see core/operands.py)
    if len(args) == 1:
        (a,) = args
        if ((type(a) is Array or type(a) is DeviceArray or isinstance(a, Tracer))
                and (not a.weak_type or _weak_stable(a.dtype))):
            # One array operand already of the target class: promotion is the identity.
            d = a.dtype
            if (dtypes.is_inexact(d) if kind == "inexact" else kind != "numeric" or d != dtypes.bool_):
                return [a]
    check_arraylike(name, *args)
    dt, weak = dtypes.promote(tuple(dtype_weak(a) for a in args))
    if kind == "numeric" and dt == dtypes.bool_:
        dt = dtypes.int32
    elif kind == "inexact" and not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
    return _broadcast_ops(name, [_convert(a, dt, weak) for a in args])


def _convert(x: Any, dt: np.dtype, weak: bool) -> Any:
    """``convert`` that also strips weakness: a weak operand joined with a strong one
    becomes strong even when its dtype is already right (JAX converts it too), which
    matters where the result comes from that operand alone (``copysign(2.5, x)``)."""
    if (type(x) is Array or isinstance(x, Tracer)) and x.weak_type and not weak and _dtype(x) == dt:
        return S.convert_element_type_p.bind(x, new_dtype=dt, weak_type=False)
    return convert(x, dt, weak)


def _numeric(name: str, *args: Any) -> list:
    return _promote_to(name, args, "numeric")


def _inexact(name: str, *args: Any) -> list:
    return _promote_to(name, args, "inexact")


def _reject(name: str, d: np.dtype, what: str) -> FtransTypeError:
    return FtransTypeError(f"{name} does not accept {d.name} arrays; it needs {what} inputs")


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``lax.select`` with NumPy broadcasting; the cases already share a dtype."""
    pred = _to_bool(pred)
    if shape_of(pred) == ():
        on_true, on_false = _broadcast_full("where", [on_true, on_false])
    else:
        pred, on_true, on_false = _broadcast_full("where", [pred, on_true, on_false])
    return S.select_n_p.bind(pred, on_false, on_true)


def _to_bool(x: Any) -> Any:
    x = as_operand(x)
    if _dtype(x) == dtypes.bool_:
        return x
    return E.ne_p.bind(x, _lax_const(x, 0))


def _full_bool(like: Any, value: bool) -> Any:
    """A strong bool array of ``like``'s shape (JAX's ``full_like(x, v, dtype=bool)``)."""
    return broadcast_to_shape(Array._new(np.asarray(value), False), shape_of(like))


def _entry1(x: Any) -> Any:
    """One operand as a library function's entry sees it (``core/operands.py``'s ``library_entry``)."""
    if _trace.active_anywhere and _operands.library_entry is not None:
        return _operands.library_entry((x,))[0]
    return x


def _fast1(prim: Primitive, x: Any, allowed: frozenset, **params: Any) -> Array | None:
    """``prim``'s NumPy rule applied to ``x`` directly, or None where the general path is needed.

    Applies to an ftrans Array with no transform active whose dtype is in
    ``allowed`` (the dtypes for which the function is exactly one primitive,
    with no promotion) and, if weakly typed, promotes to itself.  It skips
    only ``bind``'s dispatch, so the result is the general path's.
    """
    if type(x) is Array and can_shortcut():
        xv = x._value
        d = xv.dtype
        if d in allowed and (not x.weak_type or _weak_stable(d)):
            return Array._new(prim.impl(xv, **params), prim.weak_type_rule((x.weak_type,), **params))
    elif type(x) is DeviceArray and _trace.eager_everywhere:  # (on its device: bound as it is)
        d = x._aval.dtype
        if d in allowed and (not x.weak_type or _weak_stable(d)):
            return prim.bind(x, **params)
    return None


# ---------------------------------------------------------------- binary ufunc factory

def _device_operands(x: Any, y: Any, allowed: frozenset | None) -> tuple | None:
    """The operands of a binary function on a device array (an eager step on jit outputs) when promotion
    and broadcasting are the identity, or None for the general path: two device arrays of one type, or one
    of a float dtype and a Python float (made a weak scalar of its dtype, as the general path makes it)."""
    tx, ty = type(x), type(y)
    if tx is DeviceArray and ty is DeviceArray:
        xa, ya = x._aval, y._aval
        d = xa.dtype
        if d == ya.dtype and xa.shape == ya.shape and d != dtypes.bool_ and (allowed is None or d in allowed):
            return x, y
        return None
    if ty is float:
        a, s, first = x, y, True
    elif tx is float:
        a, s, first = y, x, False
    else:
        return None
    d = a._aval.dtype
    if type(d) not in _FLOAT_KINDS or (a.weak_type and not _weak_stable(d)) or (allowed is not None
                                                                                   and d not in allowed):
        return None
    c = Array._new(np.asarray(s, d), True)
    return (a, c) if first else (c, a)


_FLOAT_KINDS = frozenset(type(np.dtype(c)) for c in (np.float16, np.float32, np.float64))


def _refuse_out_where(name: str, out: Any, where: Any) -> None:
    """``out=``/``where=`` exist on JAX's ufunc calls only to be refused when set (arrays are immutable)."""
    which = "out" if out is not None else "where"
    raise NotImplementedError(
        f"jnp.{name}: the {which}= argument is not supported (ftrans arrays are immutable); "
        f"use the returned array instead, or jnp.where(mask, jnp.{name}(...), other) for a mask")


def _binary(prim: Primitive, name: str, *, bool_prim: Primitive | None = None,
            allowed: frozenset | None = None, doc: str | None = None, check_nan: bool = False):
    """A promoting, broadcasting binary function over one strict primitive.

    ``bool_prim`` replaces ``prim`` on bool operands (``add`` is ``or`` there);
    ``allowed`` lists the dtypes ``prim`` accepts, checked after promotion;
    ``check_nan``: a NaN result is recorded while ``error_checking_behavior(nan="raise")`` holds
    (``ftrans/numpy/error.py``; the fast paths step aside then).
    """
    impl = prim.impl
    keep_weak = prim.weak_type_rule is not never_weak
    new = Array._new

    def fn(x: Any, y: Any, /, *, out: None = None, where: None = None) -> Any:
        if out is not None or where is not None:
            _refuse_out_where(name, out, where)
        if type(x) is Array and can_shortcut():
            ty = type(y)
            try:
                if ty is float:
                    xv = x._value
                    if xv.dtype.kind == "f" and (not x.weak_type or _weak_stable(xv.dtype)):
                        # NumPy converts a Python float to the array's float dtype
                        # (NEP 50) exactly as the general path's constant does.
                        return new(impl(xv, y), keep_weak and x.weak_type)
                elif ty is Array:
                    xv = x._value
                    yv = y._value
                    if xv.dtype == yv.dtype:
                        return new(impl(xv, yv), keep_weak and x.weak_type and y.weak_type)
            except (TypeError, ValueError, RuntimeWarning):
                pass  # let the general path raise ftrans's own error
        elif (type(x) is DeviceArray or type(y) is DeviceArray) and _trace.eager_everywhere and not (
                check_nan and _trace._error_checks):
            ops = _device_operands(x, y, allowed)
            if ops is not None:
                return prim.bind(*ops)
        a, b = promote_args(name, x, y)
        d = _dtype(a)
        if d == dtypes.bool_ and bool_prim is not None:
            return bool_prim.bind(a, b)
        if allowed is not None and d not in allowed:
            raise _reject(name, d, "numeric")
        if check_nan and _trace._error_checks:
            return _err.nan_check(prim.bind(a, b))
        return prim.bind(a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc or f"Elementwise ``{name}`` with NumPy broadcasting and JAX's dtype promotion."
    __all__.append(name)
    return fn


def _unary(prim: Primitive, name: str, check_nan: bool = False):
    """A float function: integers and bools are promoted to the default float first.

    Fast path: an ftrans Array of an inexact dtype with no transform active is
    exactly the primitive's NumPy rule (no promotion applies, and the weak
    type is the operand's), so the rule runs directly; it is what keeps an
    eager ``jnp.sin(x)`` within a small factor of ``np.sin``.
    """
    impl = prim.impl
    keep_weak = prim.weak_type_rule is _all_weak
    ndarray = np.ndarray

    def fn(x: Any, /) -> Any:
        if type(x) is Array and (_trace.eager_everywhere or can_shortcut()):
            xv = x._value
            if (d := xv.dtype) in INEXACT and (not x.weak_type or _weak_stable(d)):
                r = impl(xv)
                out = Array()  # an empty Array, made in C (``Array.__init__``)
                out._value = r if type(r) is ndarray else np.asarray(r)
                out._dt = d  # (these functions keep an inexact operand's dtype)
                out.weak_type = keep_weak and x.weak_type
                return out
        (x,) = _inexact(name, x)
        if check_nan and _trace._error_checks:  # JAX's functions that record NaN results
            return _err.nan_check(prim.bind(x))
        return prim.bind(x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (integers are promoted to float)."
    __all__.append(name)
    return fn


# ---------------------------------------------------------------- arithmetic
add = _binary(E.add_p, "add", bool_prim=E.or_p, check_nan=True)
subtract = _binary(E.sub_p, "subtract", allowed=NUM, check_nan=True)
multiply = _binary(E.mul_p, "multiply", bool_prim=E.and_p)
maximum = _binary(E.max_p, "maximum")
minimum = _binary(E.min_p, "minimum")


@_export
def negative(x: Any, /, *, out: None = None, where: None = None) -> Any:
    if out is not None or where is not None:
        _refuse_out_where("negative", out, where)
    if (r := _fast1(E.neg_p, x, NUM)) is not None:
        return r
    (x,) = promote_args("negative", x)
    d = _dtype(x)
    if d not in NUM:
        raise _reject("negative", d, "numeric")
    return E.neg_p.bind(x)


@_export
def positive(x: Any, /) -> Any:
    check_arraylike("positive", x)
    return as_operand(x)


@_export
def true_divide(x: Any, y: Any, /) -> Any:
    """``x / y`` in floating point (integers are promoted to the default float)."""
    if can_shortcut() and type(x) is Array and type(y) is Array:
        xv, yv = x._value, y._value
        if xv.dtype == yv.dtype and xv.dtype.kind in "fc":
            return Array._new(E.div_p.impl(xv, yv), x.weak_type and y.weak_type)
    a, b = _inexact("true_divide", x, y)
    if _trace._error_checks:
        _err.divide_check(b)
        return _err.nan_check(E.div_p.bind(a, b))
    return E.div_p.bind(a, b)


divide = true_divide
__all__.append("divide")


def _float_divmod(a: Any, b: Any) -> tuple[Any, Any]:
    """Python's floor division and modulo for floats, as JAX computes them."""
    mod = E.rem_p.bind(a, b)
    zero = _const(a, 0)
    corrected = _select(E.eq_p.bind(b, zero), a, E.sub_p.bind(a, mod))
    div = E.div_p.bind(*_broadcast_ops("divmod", [corrected, b]))
    fix_ = E.and_p.bind(*_broadcast_ops("divmod", [
        E.ne_p.bind(mod, zero), E.ne_p.bind(*_broadcast_ops("divmod", [E.sign_p.bind(b), E.sign_p.bind(mod)]))
    ]))
    mod_plus, div_minus = E.add_p.bind(*_broadcast_ops("divmod", [mod, b])), E.sub_p.bind(div, _const(div, 1))
    if _trace._error_checks:  # JAX computes these two with jnp's add and subtract, which check for NaN
        _err.nan_check(mod_plus)
        _err.nan_check(div_minus)
    mod = _select(fix_, mod_plus, mod)
    div = _select(fix_, div_minus, div)
    return E.round_p.bind(div, rounding_method=0), mod


@_export
def floor_divide(x: Any, y: Any, /) -> Any:
    a, b = _numeric("floor_divide", x, y)
    if _trace._error_checks:
        _err.divide_check(b)
    d = _dtype(a)
    if d.kind == "u":
        return E.div_p.bind(a, b)
    if d.kind == "i":
        q = E.div_p.bind(a, b)
        zero = _const(d, 0)
        # XLA truncates; floor is one less when the signs differ and the division was inexact
        # (sign, not "< 0", so that x // 0 matches JAX too).
        signs_differ = E.ne_p.bind(*_broadcast_ops("floor_divide", [E.sign_p.bind(a), E.sign_p.bind(b)]))
        inexact = E.ne_p.bind(E.rem_p.bind(a, b), zero)
        sel = E.and_p.bind(*_broadcast_ops("floor_divide", [signs_differ, inexact]))
        return _select(sel, E.sub_p.bind(q, _const(d, 1)), q)
    if d.kind == "c":
        raise FtransTypeError("floor_divide does not support complex-valued inputs")
    return _float_divmod(a, b)[0]


def _safe_int_divisor(b: Any) -> Any:
    """Integer divisor with zeros replaced by one (JAX's remainder gives x % 0 == 0)."""
    d = _dtype(b)
    return _select(E.eq_p.bind(b, _const(d, 0)), _const(b, 1, dtype_weak(b)[1]), b)


@_export
def remainder(x: Any, y: Any, /) -> Any:
    a, b = _numeric("remainder", x, y)
    if _trace._error_checks:
        _err.divide_check(b)
    d = _dtype(a)
    if d.kind == "c":
        raise FtransTypeError("remainder does not support complex-valued inputs")
    if d.kind in "iu":
        b = _safe_int_divisor(b)
        a, b = _broadcast_ops("remainder", [a, b])
    zero = _const(d, 0)
    r = E.rem_p.bind(a, b)
    # Python's sign convention: a nonzero result takes the divisor's sign.
    sign_fix = E.ne_p.bind(*_broadcast_ops("remainder", [E.lt_p.bind(r, zero), E.lt_p.bind(b, zero)]))
    fix_ = E.and_p.bind(*_broadcast_ops("remainder", [sign_fix, E.ne_p.bind(r, zero)]))
    out = _select(fix_, E.add_p.bind(*_broadcast_ops("remainder", [r, b])), r)
    return _err.nan_check(out) if _trace._error_checks else out


mod = remainder
__all__.append("mod")


@_export
def fmod(x: Any, y: Any, /) -> Any:
    a, b = _numeric("fmod", x, y)
    d = _dtype(a)
    if d.kind == "c":
        raise FtransTypeError("fmod does not support complex-valued inputs")
    if dtypes.promote((dtype_weak(x), dtype_weak(y)))[0].kind in "iu":  # bool % False stays x
        a, b = _broadcast_ops("fmod", [a, _safe_int_divisor(b)])
    out = E.rem_p.bind(a, b)
    return _err.nan_check(out) if _trace._error_checks else out


@_export
def divmod(x: Any, y: Any, /) -> tuple[Any, Any]:  # noqa: A001 - NumPy's name
    a, b = _numeric("divmod", x, y)
    d = _dtype(a)
    if d.kind in "iu":
        return floor_divide(a, b), remainder(a, b)
    if d.kind == "c":
        raise FtransTypeError("divmod does not support complex-valued inputs")
    if _trace._error_checks:
        _err.divide_check(b)
    return _float_divmod(a, b)


# ---------------------------------------------------------------- powers
def _concrete_int(y: Any) -> int | None:
    """``y`` as a Python int when it is a concrete integer scalar (JAX's integer_pow case)."""
    if isinstance(y, Tracer):
        y = maybe_concrete(y)
        if isinstance(y, Tracer):
            return None
    try:
        return operator.index(y)
    except TypeError:
        return None


@_export
def power(x: Any, y: Any, /) -> Any:
    """``x ** y`` with JAX's special cases.

    A concrete integer exponent becomes ``integer_pow`` (exact, and
    differentiable at x = 0); integer ** integer is binary exponentiation over
    six exponent bits (as JAX does: more would overflow anyway); an inexact
    base with an integer exponent uses ``pow`` without promoting the exponent.
    """
    check_arraylike("power", x, y)
    n = _concrete_int(y)
    if n is not None:
        (xo,) = _numeric("power", x)
        if n < 0 and _dtype(xo).kind in "iu":
            raise FtransTypeError(
                f"power: integers cannot be raised to negative integer powers (got exponent {n}); "
                "convert the base to a floating-point dtype first"
            )
        return E.integer_pow_p.bind(xo, y=n)
    out = _power(x, y)
    return _err.nan_check(out) if _trace._error_checks else out


def _power(x: Any, y: Any) -> Any:
    a, b = _numeric("power", x, y)
    d = _dtype(a)
    if d.kind in "iu":
        return _pow_int_int(a, b)
    d1, d2 = _dtype(x), _dtype(y)
    if dtypes.is_inexact(d1) and d2.kind in "iu":
        xo, yo = _broadcast_ops("power", [as_operand(x), as_operand(y)])
        return E.pow_p.bind(xo, yo)
    return E.pow_p.bind(a, b)


def _pow_int_int(a: Any, b: Any) -> Any:
    a, b = _broadcast_full("power", [a, b])
    d = _dtype(a)
    zero, one = _const(d, 0, False), _const(d, 1, False)
    zero_base = E.and_p.bind(E.eq_p.bind(a, zero), E.ne_p.bind(b, zero))
    # pow(0, y) is 0 for y != 0 and 1 for y == 0.
    acc = _select(zero_base, zero, one)
    for _ in range(6):
        bit = E.ne_p.bind(E.and_p.bind(b, one), zero)
        acc = _select(bit, E.mul_p.bind(acc, a), acc)
        a = E.mul_p.bind(a, a)
        b = E.shift_right_logical_p.bind(b, one)
    return acc


pow = power  # noqa: A001 - NumPy 2 alias
__all__.append("pow")


@_export
def square(x: Any, /) -> Any:
    if (r := _fast1(E.integer_pow_p, x, NUM, y=2)) is not None:
        return r
    (x,) = _numeric("square", x)
    return E.integer_pow_p.bind(x, y=2)


@_export
def reciprocal(x: Any, /) -> Any:
    if (r := _fast1(E.integer_pow_p, x, INEXACT, y=-1)) is not None:
        return r
    (x,) = _inexact("reciprocal", x)
    return E.integer_pow_p.bind(x, y=-1)


@_export
def absolute(x: Any, /) -> Any:
    if (r := _fast1(E.abs_p, x, SIGNED_NUM)) is not None:
        return r
    check_arraylike("absolute", x)
    x = _entry1(as_operand(x))
    d = _dtype(x)
    if d.kind == "u" or d == dtypes.bool_:
        return x
    return E.abs_p.bind(x)


abs = absolute  # noqa: A001
__all__.append("abs")


@_export
def sign(x: Any, /) -> Any:
    if (r := _fast1(E.sign_p, x, NUM)) is not None:
        return r
    check_arraylike("sign", x)
    x = _entry1(as_operand(x))
    d = _dtype(x)
    if d not in NUM:
        raise _reject("sign", d, "numeric")
    return E.sign_p.bind(x)


# ---------------------------------------------------------------- float functions
exp = _unary(E.exp_p, "exp")
exp2 = _unary(E.exp2_p, "exp2")
expm1 = _unary(E.expm1_p, "expm1")
log = _unary(E.log_p, "log", check_nan=True)
log1p = _unary(E.log1p_p, "log1p", check_nan=True)
sqrt = _unary(E.sqrt_p, "sqrt", check_nan=True)
sin = _unary(E.sin_p, "sin", check_nan=True)
cos = _unary(E.cos_p, "cos", check_nan=True)
tan = _unary(E.tan_p, "tan", check_nan=True)
arcsin = _unary(E.asin_p, "arcsin", check_nan=True)
arccos = _unary(E.acos_p, "arccos", check_nan=True)
arctan = _unary(E.atan_p, "arctan")
sinh = _unary(E.sinh_p, "sinh")
cosh = _unary(E.cosh_p, "cosh")
tanh = _unary(E.tanh_p, "tanh")
arcsinh = _unary(E.asinh_p, "arcsinh")
arctanh = _unary(E.atanh_p, "arctanh", check_nan=True)


@_export
def cbrt(x: Any, /) -> Any:
    if (r := _fast1(E.cbrt_p, x, FLOAT)) is not None:
        return r
    (x,) = _inexact("cbrt", x)
    d = _dtype(x)
    if d.kind == "c":
        raise _reject("cbrt", d, "real floating-point")
    return E.cbrt_p.bind(x)


@_export
def arccosh(x: Any, /) -> Any:
    (x,) = _inexact("arccosh", x)
    out = E.acosh_p.bind(x)
    if _trace._error_checks:
        _err.nan_check(out)
    if _dtype(x).kind == "c":
        # The principal branch has a non-negative real part.
        out = _select(E.lt_p.bind(E.real_p.bind(out), _const(E.real_p.bind(out), 0)), E.neg_p.bind(out), out)
    return out


asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh
__all__ += ["asin", "acos", "atan", "asinh", "acosh", "atanh"]


def _complex_parts_apply(x: Any, fn) -> Any:
    return E.complex_p.bind(fn(E.real_p.bind(x)), fn(E.imag_p.bind(x)))


@_export
def log2(x: Any, /) -> Any:
    (x,) = _inexact("log2", x)
    if _dtype(x).kind == "c":
        r = E.log_p.bind(x)
        re, im = E.real_p.bind(r), E.imag_p.bind(r)
        ln2 = E.log_p.bind(_const(re, 2))
        return E.complex_p.bind(E.div_p.bind(re, ln2), E.div_p.bind(im, ln2))
    # a weak constant: the result keeps x's weak type, as jax 0.11's log2 (jax 0.10's made it strong)
    out = E.div_p.bind(E.log_p.bind(x), E.log_p.bind(_const(x, 2)))
    return _err.nan_check(out) if _trace._error_checks else out


@_export
def log10(x: Any, /) -> Any:
    (x,) = _inexact("log10", x)
    inv_ln10 = 0.4342944819032518  # 1 / log(10)
    if _dtype(x).kind == "c":
        r = E.log_p.bind(x)
        re, im = E.real_p.bind(r), E.imag_p.bind(r)
        c = _const(re, inv_ln10, False)
        return E.complex_p.bind(E.mul_p.bind(re, c), E.mul_p.bind(im, c))
    out = E.mul_p.bind(E.log_p.bind(x), _const(x, inv_ln10, False))
    return _err.nan_check(out) if _trace._error_checks else out


@_export
def arctan2(x1: Any, x2: Any, /) -> Any:
    a, b = _inexact("arctan2", x1, x2)
    return E.atan2_p.bind(a, b)


atan2 = arctan2
__all__.append("atan2")


# How JAX's error for a complex operand begins, where code may match on it (the rest is ftrans's advice).
_COMPLEX_LEADS = {"hypot": "jnp.hypot is not well defined for complex-valued inputs",
                  "copysign": "copysign does not support complex-valued inputs"}


def _real_only(name: str, a: Any, exc: type = FtransTypeError) -> None:
    if _dtype(a).kind == "c":
        lead = _COMPLEX_LEADS.get(name, f"{name} is not defined for complex-valued inputs")
        raise exc(f"{lead}; convert to real values first (for example with abs(x) or x.real)")


@_export
@outputs_checked
def hypot(x1: Any, x2: Any, /) -> Any:
    a, b = _inexact("hypot", x1, x2)
    _real_only("hypot", a, FtransValueError)
    return _hypot(a, b)


@custom_jvp
def _hypot(a: Any, b: Any) -> Any:
    a, b = E.abs_p.bind(a), E.abs_p.bind(b)
    inf = _const(a, np.inf, False)
    any_inf = E.or_p.bind(*_broadcast_ops("hypot", [E.eq_p.bind(a, inf), E.eq_p.bind(b, inf)]))
    hi, lo = E.max_p.bind(a, b), E.min_p.bind(a, b)
    zero, one = _lax_const(hi, 0), _const(hi, 1)
    hi_zero = E.eq_p.bind(hi, zero)
    ratio = E.div_p.bind(*_broadcast_ops("hypot", [lo, _select(hi_zero, one, hi)]))
    scaled = E.mul_p.bind(hi, E.sqrt_p.bind(E.add_p.bind(one, E.integer_pow_p.bind(ratio, y=2))))
    res = _select(hi_zero, hi, scaled)
    return _select(any_inf, _lax_const(res, np.inf), res)


@custom_jvp
def _hypot_units(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a / r, b / r)`` with ``r = hypot(a, b)``, from the operands over ``hi = max(|a|, |b|)`` (so neither
    overflows where ``r`` does, nor is lost where ``1/r`` is subnormal): ``(a/hi) rsqrt(1 + (lo/hi)**2)``.
    NaN at (0, 0), where ``hypot`` has no derivative."""
    aa, ab = E.abs_p.bind(a), E.abs_p.bind(b)
    hi, lo = E.max_p.bind(aa, ab), E.min_p.bind(aa, ab)
    one = _const(hi, 1)
    # (times rsqrt, not divided by sqrt: XLA's simplifier turns (a / hi) / q into a / (hi * q), which overflows)
    inv_q = E.rsqrt_p.bind(E.add_p.bind(one, E.integer_pow_p.bind(E.div_p.bind(lo, hi), y=2)))
    return E.mul_p.bind(E.div_p.bind(a, hi), inv_q), E.mul_p.bind(E.div_p.bind(b, hi), inv_q)


def _hypot_jvp(primals: tuple, tangents: tuple) -> tuple:
    """``dr = u_a da + u_b db`` with the unit vector ``u = (a, b) / r`` of ``_hypot_units``, whose own
    derivative ``du = (d(a, b) - u dr) / r`` recurses through these two rules: derivatives of every order
    are finite where ``a**2``, ``1/r`` or ``r`` itself overflow (jax 0.12's rule; jax 0.10/0.11
    differentiate the scaled formula: 1.06 instead of 1/sqrt(2) at (1e30, 1e30), NaN at (1e-30, 0))."""
    a, b = primals
    ta, tb = tangents
    ua, ub = _hypot_units(a, b)
    return _hypot(a, b), E.add_p.bind(E.mul_p.bind(ua, ta), E.mul_p.bind(ub, tb))


def _hypot_units_jvp(primals: tuple, tangents: tuple) -> tuple:
    a, b = primals
    ta, tb = tangents
    r, (ua, ub) = _hypot(a, b), _hypot_units(a, b)
    dr = E.add_p.bind(E.mul_p.bind(ua, ta), E.mul_p.bind(ub, tb))
    dua = E.div_p.bind(E.sub_p.bind(ta, E.mul_p.bind(ua, dr)), r)
    dub = E.div_p.bind(E.sub_p.bind(tb, E.mul_p.bind(ub, dr)), r)
    return (ua, ub), (dua, dub)


_hypot.defjvp(_hypot_jvp)
_hypot_units.defjvp(_hypot_units_jvp)


# ---------------------------------------------------------------- rounding
def _rounding(prim: Primitive, name: str):
    def fn(x: Any, /) -> Any:
        if (r := _fast1(prim, x, FLOAT)) is not None:
            return r
        check_arraylike(name, x)
        x = as_operand(x)
        d = _dtype(x)
        if d.kind in "iub":
            return x
        if d.kind == "c":
            raise FtransTypeError(f"{name} is not defined for complex arrays")
        return prim.bind(x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}``; integers and bools pass through unchanged."
    __all__.append(name)
    return fn


floor = _rounding(E.floor_p, "floor")
ceil = _rounding(E.ceil_p, "ceil")


@_export
def trunc(x: Any, /) -> Any:
    check_arraylike("trunc", x)
    x = as_operand(x)
    d = _dtype(x)
    if d.kind in "iub":
        return x
    if d.kind == "c":
        raise FtransTypeError("trunc is not defined for complex arrays")
    return _select(E.lt_p.bind(x, _const(d, 0)), E.ceil_p.bind(x), E.floor_p.bind(x))


@_export
def rint(x: Any, /) -> Any:
    if (r := _fast1(E.round_p, x, FLOAT, rounding_method=1)) is not None:
        return r
    check_arraylike("rint", x)
    x = as_operand(x)
    d = _dtype(x)
    if d.kind in "iub":
        return convert(x, dtypes.default_float(), False)
    if d.kind == "c":
        return _complex_parts_apply(x, rint)
    return E.round_p.bind(x, rounding_method=1)


@_export
def round(a: Any, decimals: int = 0, out: None = None) -> Any:  # noqa: A001
    """``jnp.round``: half to even, after scaling by ``10**decimals``."""
    if out is not None:
        raise NotImplementedError("jnp.round: the 'out' argument is not supported (arrays are immutable)")
    check_arraylike("round", a)
    decimals = maybe_concrete(decimals)
    if isinstance(decimals, Tracer):
        raise FtransTypeError("round: 'decimals' must be a static Python int, not a traced value")
    decimals = operator.index(decimals)
    x = as_operand(a)
    d = _dtype(x)
    if d == dtypes.bool_:
        raise FtransValueError("round is not defined for bool arrays; convert with .astype(int) first")
    if d.kind in "iu":
        if decimals < 0:
            raise NotImplementedError("jnp.round: decimals < 0 is not supported for integer arrays")
        return x
    if decimals > np.log10(float(dtypes.finfo(d).max)):
        return x  # rounding beyond the type's precision is a no-op
    if d.kind == "c":
        return _complex_parts_apply(x, lambda p: round(p, decimals))
    if decimals == 0:
        return E.round_p.bind(x, rounding_method=1)
    wide = convert(x, dtypes.float32, dtype_weak(x)[1]) if d == dtypes.float16 else x
    factor = _lax_const(wide, 10.0**decimals)
    # JAX's round is a jitted program, where XLA rewrites the division by the constant factor
    # into a multiplication by its reciprocal (folded in the operand's dtype); multiplying by
    # that reciprocal here gives the same bits eagerly and under ftrans's own jit
    # (bfloat16 arithmetic already runs as XLA's, which keeps the division there.)
    wd = np.dtype(_dtype(wide))
    scaled = E.round_p.bind(E.mul_p.bind(wide, factor), rounding_method=1)
    if wd in (np.dtype(np.float32), np.dtype(np.float64)):
        recip = _lax_const(wide, np.asarray(1, wd) / np.asarray(10.0**decimals, wd))
        out_ = E.mul_p.bind(scaled, recip)
    else:
        out_ = E.div_p.bind(scaled, factor)
    return convert(out_, d, dtype_weak(x)[1]) if d == dtypes.float16 else out_


around = round
__all__.append("around")


@_export
def clip(arr: Any = None, /, min: Any = None, max: Any = None, *, a: Any = None,  # noqa: A002
         a_min: Any = None, a_max: Any = None) -> Any:
    x = arr if arr is not None else a
    if x is None:
        raise FtransValueError("clip: no input array was given")
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    check_arraylike("clip", x)
    for v in (x, lo, hi):
        if v is not None and _dtype(v).kind == "c":
            raise FtransValueError(
                "clip: complex values have no ordering and cannot be clipped; clip the real or "
                "imaginary part (jnp.real / jnp.imag) instead"
            )
    out = as_operand(x)
    if lo is not None:
        out = maximum(lo, out)
    if hi is not None:
        out = minimum(hi, out)
    return out


@_export
def fmax(x1: Any, x2: Any, /) -> Any:
    """Maximum that ignores NaN (returns the other operand where one is NaN)."""
    return where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)


@_export
def fmin(x1: Any, x2: Any, /) -> Any:
    """Minimum that ignores NaN (returns the other operand where one is NaN)."""
    return where(logical_or(less(x1, x2), isnan(x2)), x1, x2)


def _wrap_between(x: Any, a: float) -> Any:
    """Wrap ``x`` into [-a, a] (the imaginary part of a complex log)."""
    ca, two_a, zero = _lax_const(x, a), _lax_const(x, 2 * a), _lax_const(x, 0)
    r = E.rem_p.bind(E.add_p.bind(x, ca), two_a)
    r = _select(E.lt_p.bind(r, zero), E.add_p.bind(r, two_a), r)
    return E.sub_p.bind(r, ca)


def _logaddexp_impl(a: Any, b: Any, exp_prim: Primitive, scale: float) -> Any:
    amax = E.max_p.bind(a, b)
    inv = _lax_const(amax, scale)
    if _dtype(a).kind == "c":
        delta = E.sub_p.bind(E.add_p.bind(a, b), E.mul_p.bind(amax, _lax_const(amax, 2)))
        log_term = E.log1p_p.bind(exp_prim.bind(delta))
        out = E.add_p.bind(amax, log_term if scale == 1.0 else E.mul_p.bind(inv, log_term))
        re, im = E.real_p.bind(out), E.imag_p.bind(out)
        return E.complex_p.bind(re, _wrap_between(im, np.pi * scale))
    delta = E.sub_p.bind(a, b)
    log_term = E.log1p_p.bind(exp_prim.bind(E.neg_p.bind(E.abs_p.bind(delta))))
    soft = E.add_p.bind(amax, log_term if scale == 1.0 else E.mul_p.bind(inv, log_term))
    # A NaN delta means NaN operands or equal infinities, where a + b is the answer.
    return _select(E.ne_p.bind(delta, delta), E.add_p.bind(a, b), soft)


def _pos_inf_to_zero(x: Any) -> Any:
    """``x`` with its ``+inf`` entries (of the real part, if complex) replaced by zero."""
    re = E.real_p.bind(x) if _dtype(x).kind == "c" else x
    d, w = dtype_weak(x)  # (JAX's lax._zeros(x), a full_like: as weakly typed as x at any rank)
    return _select(E.eq_p.bind(re, _lax_const(re, np.inf)), _const(d, 0, w), x)


def _logaddexp_jvp(fn: Any, exp_prim: Primitive, primals: tuple, tangents: tuple) -> tuple:
    """d/dx_i = base ** (x_i - out): the operands' softmax weights, as in JAX's rule.

    ``+inf`` operands and results count as 0 in the exponent, so equal
    arguments share the derivative (0.5 each), an argument that is ``+inf``
    against a finite one gets ``base ** x`` (its weight relative to the
    unchanged result), and ties of infinities stay finite.
    """
    a, b = primals
    ta, tb = tangents
    out = fn(a, b)
    r = _pos_inf_to_zero(out)
    wa = exp_prim.bind(E.sub_p.bind(_pos_inf_to_zero(a), r))
    wb = exp_prim.bind(E.sub_p.bind(_pos_inf_to_zero(b), r))
    return out, E.add_p.bind(E.mul_p.bind(ta, wa), E.mul_p.bind(tb, wb))


@custom_jvp
def _logaddexp_e(a: Any, b: Any) -> Any:
    return _logaddexp_impl(a, b, E.exp_p, 1.0)


@custom_jvp
def _logaddexp_2(a: Any, b: Any) -> Any:
    return _logaddexp_impl(a, b, E.exp2_p, 1 / np.log(2))


_logaddexp_e.defjvp(lambda p, t: _logaddexp_jvp(_logaddexp_e, E.exp_p, p, t))
_logaddexp_2.defjvp(lambda p, t: _logaddexp_jvp(_logaddexp_2, E.exp2_p, p, t))


@_export
def logaddexp(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
    if out is not None or where is not None:
        _refuse_out_where("logaddexp", out, where)
    return _logaddexp_e(*_inexact("logaddexp", x1, x2))


@_export
def logaddexp2(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
    if out is not None or where is not None:
        _refuse_out_where("logaddexp2", out, where)
    return _logaddexp_2(*_inexact("logaddexp2", x1, x2))


@_export
def deg2rad(x: Any, /) -> Any:
    (x,) = _inexact("deg2rad", x)
    return E.mul_p.bind(x, _lax_const(x, np.pi / 180))


@_export
def rad2deg(x: Any, /) -> Any:
    (x,) = _inexact("rad2deg", x)
    return E.mul_p.bind(x, _lax_const(x, 180 / np.pi))


radians, degrees = deg2rad, rad2deg
__all__ += ["radians", "degrees"]


@_export
def heaviside(x1: Any, x2: Any, /) -> Any:
    check_arraylike("heaviside", x1, x2)
    dt, weak = dtypes.promote((dtype_weak(x1), dtype_weak(x2)))
    if not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
    a, b = _convert(x1, dt, weak), _convert(x2, dt, weak)
    _real_only("heaviside", a)
    zero = _lax_const(a, 0)
    inner = _select(E.ne_p.bind(a, a), a, b)
    return _select(E.lt_p.bind(a, zero), zero, _select(E.gt_p.bind(a, zero), _lax_const(a, 1), inner))


@_export
def signbit(x: Any, /) -> Any:
    check_arraylike("signbit", x)
    x = as_operand(x)
    d = _dtype(x)
    if d == dtypes.bool_:
        return _full_bool(x, False)
    if d.kind in "iu":
        return E.lt_p.bind(x, _const(d, 0, False))
    if d.kind == "c":
        raise FtransValueError(f"signbit is not well defined for {d.name}")
    idt = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[d.itemsize]
    bits = S.bitcast_convert_type_p.bind(x, new_dtype=idt)
    return E.lt_p.bind(bits, _const(idt, 0, False))


@_export
def copysign(x1: Any, x2: Any, /) -> Any:
    a, b = _inexact("copysign", x1, x2)
    _real_only("copysign", a)
    mag = E.abs_p.bind(a)
    return _select(signbit(b), E.neg_p.bind(mag), mag)


@_export
def nextafter(x1: Any, x2: Any, /) -> Any:
    a, b = _inexact("nextafter", x1, x2)
    _real_only("nextafter", a)
    return E.nextafter_p.bind(a, b)


# ---------------------------------------------------------------- comparisons and logic
def _compare(prim: Primitive, name: str, ordered: bool):
    """A comparison; ordered ones compare complex numbers lexicographically, as jnp does."""
    impl = prim.impl

    def fn(x: Any, y: Any, /) -> Any:
        if can_shortcut() and type(x) is Array:
            xv = x._value
            ty = type(y)
            try:
                if ty is Array:
                    yv = y._value
                    if xv.dtype == yv.dtype and xv.dtype.kind != "c":
                        return Array._new(impl(xv, yv), x.weak_type and y.weak_type)
                elif ty is float and xv.dtype.kind == "f":
                    return Array._new(impl(xv, xv.dtype.type(y)), x.weak_type)
            except (TypeError, ValueError):
                pass  # let the general path raise ftrans's own error
        a, b = promote_args(name, x, y)
        if ordered and _dtype(a).kind == "c":
            ar, br, ai, bi = E.real_p.bind(a), E.real_p.bind(b), E.imag_p.bind(a), E.imag_p.bind(b)
            return _select(E.eq_p.bind(ar, br), prim.bind(ai, bi), prim.bind(ar, br))
        return prim.bind(a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with NumPy broadcasting and JAX's dtype promotion."
    __all__.append(name)
    return fn


equal = _compare(E.eq_p, "equal", False)
not_equal = _compare(E.ne_p, "not_equal", False)
less = _compare(E.lt_p, "less", True)
less_equal = _compare(E.le_p, "less_equal", True)
greater = _compare(E.gt_p, "greater", True)
greater_equal = _compare(E.ge_p, "greater_equal", True)


def _logical(prim: Primitive, name: str):
    def fn(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
        if out is not None or where is not None:
            _refuse_out_where(name, out, where)
        a, b = promote_args(name, x1, x2)
        return prim.bind(_to_bool(a), _to_bool(b))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of the operands' truth values."
    __all__.append(name)
    return fn


logical_and = _logical(E.and_p, "logical_and")
logical_or = _logical(E.or_p, "logical_or")
logical_xor = _logical(E.xor_p, "logical_xor")


@_export
def logical_not(x: Any, /) -> Any:
    (x,) = promote_args("logical_not", x)
    return E.not_p.bind(_to_bool(x))


def _check_int_or_bool(name: str, d: np.dtype, allow_bool: bool = True) -> None:
    if d.kind not in ("iub" if allow_bool else "iu"):
        raise _reject(name, d, "integer or bool" if allow_bool else "integer")


def _bitwise(prim: Primitive, name: str):
    def fn(x1: Any, x2: Any, /, *, out: None = None, where: None = None) -> Any:
        if out is not None or where is not None:
            _refuse_out_where(name, out, where)
        a, b = promote_args(name, x1, x2)
        _check_int_or_bool(name, _dtype(a))
        return prim.bind(a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of integer or bool arrays."
    __all__.append(name)
    return fn


bitwise_and = _bitwise(E.and_p, "bitwise_and")
bitwise_or = _bitwise(E.or_p, "bitwise_or")
bitwise_xor = _bitwise(E.xor_p, "bitwise_xor")


@_export
def left_shift(x1: Any, x2: Any, /) -> Any:
    a, b = _numeric("left_shift", x1, x2)
    _check_int_or_bool("left_shift", _dtype(a), allow_bool=False)
    return E.shift_left_p.bind(a, b)


@_export
def right_shift(x1: Any, x2: Any, /) -> Any:
    """Arithmetic shift for signed integers, logical for unsigned (as NumPy)."""
    a, b = _numeric("right_shift", x1, x2)
    d = _dtype(a)
    _check_int_or_bool("right_shift", d, allow_bool=False)
    prim = E.shift_right_logical_p if d.kind == "u" else E.shift_right_arithmetic_p
    return prim.bind(a, b)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
__all__ += ["bitwise_left_shift", "bitwise_right_shift"]


@_export
def invert(x: Any, /) -> Any:
    (x,) = promote_args("invert", x)
    _check_int_or_bool("invert", _dtype(x))
    return E.not_p.bind(x)


bitwise_not = bitwise_invert = invert
__all__ += ["bitwise_not", "bitwise_invert"]


# ---------------------------------------------------------------- classification
@_export
def isnan(x: Any, /) -> Any:
    check_arraylike("isnan", x)
    x = as_operand(x)
    return E.ne_p.bind(x, x)


@_export
def isfinite(x: Any, /) -> Any:
    check_arraylike("isfinite", x)
    x = as_operand(x)
    d = _dtype(x)
    if d.kind == "c":
        return E.and_p.bind(E.is_finite_p.bind(E.real_p.bind(x)), E.is_finite_p.bind(E.imag_p.bind(x)))
    if dtypes.is_float(d):
        return E.is_finite_p.bind(x)
    return _full_bool(x, True)


@_export
def isinf(x: Any, /) -> Any:
    check_arraylike("isinf", x)
    x = as_operand(x)
    d = _dtype(x)
    if d.kind == "c":
        re, im = E.real_p.bind(x), E.imag_p.bind(x)
        inf = _const(re, np.inf, False)
        return E.or_p.bind(E.eq_p.bind(E.abs_p.bind(re), inf), E.eq_p.bind(E.abs_p.bind(im), inf))
    if dtypes.is_float(d):
        return E.eq_p.bind(E.abs_p.bind(x), _const(d, np.inf, False))
    return _full_bool(x, False)


def _isposneginf(name: str, x: Any, value: float) -> Any:
    check_arraylike(name, x)
    x = as_operand(x)
    d = _dtype(x)
    if d.kind == "c":
        raise FtransValueError(f"{name} is not well defined for complex types")
    if dtypes.is_float(d):
        return E.eq_p.bind(x, _const(d, value, False))
    return _full_bool(x, False)


@_export
def isposinf(x: Any, /, out: None = None) -> Any:
    _no_out("isposinf", out)
    return _isposneginf("isposinf", x, np.inf)


@_export
def isneginf(x: Any, /, out: None = None) -> Any:
    _no_out("isneginf", out)
    return _isposneginf("isneginf", x, -np.inf)


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"jnp.{name}: the 'out' argument is not supported (ftrans arrays are immutable)")


@_export
def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Any:
    check_arraylike("nan_to_num", x)
    x = as_operand(x)
    d = _dtype(x)
    if not dtypes.is_inexact(d):
        return x
    if d.kind == "c":
        return _complex_parts_apply(x, lambda p: nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(d)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = _select(E.ne_p.bind(x, x), _const(d, nan, False), x)
    out = _select(E.eq_p.bind(out, _const(d, np.inf, False)), _const(d, hi, False), out)
    return _select(E.eq_p.bind(out, _const(d, -np.inf, False)), _const(d, lo, False), out)


# ---------------------------------------------------------------- selection
@_export
@outputs_checked
def where(condition: Any, x: Any = None, y: Any = None, /, *, size: int | None = None,
          fill_value: Any = None) -> Any:
    """Three-argument ``where`` picks from ``x`` or ``y``; one argument is ``nonzero``."""
    if x is None and y is None:
        from ftrans.numpy._indexing import nonzero

        check_arraylike("where", condition)
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise FtransValueError("where: give either both x and y, or neither (where(condition) is nonzero)")
    if size is not None or fill_value is not None:
        raise FtransValueError("where: size and fill_value only apply to the one-argument form")
    check_arraylike("where", condition, x, y)
    a, b = promote_dtypes("where", x, y)[0]
    return _select(condition, a, b)


# ---------------------------------------------------------------- complex parts
@_export
def real(val: Any, /) -> Any:
    check_arraylike("real", val)
    x = as_operand(val)
    return E.real_p.bind(x) if _dtype(x).kind == "c" else x


@_export
def imag(val: Any, /) -> Any:
    check_arraylike("imag", val)
    x = as_operand(val)
    if _dtype(x).kind == "c":
        return E.imag_p.bind(x)
    from ftrans.numpy._creation import zeros_like  # (JAX's full_like: on a committed operand's device)

    return zeros_like(x)


@_export
def conjugate(x: Any, /) -> Any:
    check_arraylike("conjugate", x)
    x = as_operand(x)
    return E.conj_p.bind(x) if _dtype(x).kind == "c" else x


conj = conjugate
__all__.append("conj")


# The docstrings (Args, Returns, Examples) of the functions above live in _elementwise_docs, by name.
for _name in __all__:
    if _name in _DOCS:
        globals()[_name].__doc__ = _DOCS[_name]
del _name
