"""The element-level API of JAX's ``lax``: thin, checked wrappers that bind one primitive each.

lax is strict like XLA: operands must already agree in dtype; nothing is
promoted.  What JAX 0.10 allows, ftrans allows:

* Binary elementwise ops (``add``, ``mul``, ``max``, comparisons, bitwise,
  shifts, ...) take rank-0 operands next to arrays, and operands of one rank
  whose dimensions match or are 1 (``lax.add(x[3,1], y[1,4])`` is ``[3,4]``,
  staged as an explicit ``broadcast_in_dim``); other ranks are a TypeError.
* Python scalars are weakly typed and have their default dtype: ``0`` is
  int32 and ``0.`` float32 (64-bit under x64), so ``lax.add(x_f32, 0.)`` works
  while ``lax.add(x_f32, 0)``, ``lax.add(x_u8, 0)`` and, under x64,
  ``lax.add(x_f32, 0.)`` are dtype errors, exactly as in JAX.  (Other ``lax``
  functions such as ``pad`` let a Python scalar take the array's dtype.)
* NumPy arrays and scalars are canonicalised (float64 becomes float32 unless
  x64 is on).

Eager execution skips abstract evaluation, so each wrapper runs the
primitive's abstract-eval rule itself when no transform is active: lax errors
are the same eagerly and under ``make_jaxpr``/``jit``.
"""

from __future__ import annotations

import builtins
import enum
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import config as _config
from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.keys import is_user_edtype
from ftrans.core.operands import as_operand, check_arraylike, convert, dtype_weak, shape_of, strict_operands
from ftrans.core.primitive import Primitive, abstract_eval
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import DimExpr
from ftrans.core.trace import Tracer
from ftrans.errors import FtransIndexError, FtransOverflowError, FtransTypeError, FtransValueError

__all__ = [
    "RoundingMethod",
    # elementwise arithmetic
    "add", "sub", "mul", "div", "rem", "neg", "abs", "sign", "pow", "integer_pow", "square",
    "max", "min", "nextafter", "floor", "ceil", "round", "is_finite",
    # float functions
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt",
    "erf", "erfc", "erf_inv", "lgamma", "digamma", "bessel_i0e", "bessel_i1e",
    # complex
    "real", "imag", "conj", "complex",
    # comparisons and bits
    "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "shift_left", "shift_right_logical", "shift_right_arithmetic", "population_count",
    # selection and types
    "select", "select_n", "clamp", "convert_element_type", "bitcast_convert_type", "stop_gradient",
    "reduce_precision",
    # shapes
    "broadcast", "broadcast_in_dim", "broadcasted_iota", "iota", "reshape", "transpose", "squeeze",
    "expand_dims", "rev", "pad", "concatenate", "slice", "slice_in_dim", "index_in_dim",
    "dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim",
    # contractions and reductions
    "dot_general", "dot", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
    "reduce_or", "reduce_xor", "argmax", "argmin",
]

_WEAK_SCALARS = (int, float, complex)


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` breaks ties (JAX's enum; the values are XLA's)."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


# ---------------------------------------------------------------- operand handling
def _operands(name: str, args: Sequence[Any], like: Any = None) -> list:
    """Arrays for ``args``: Python scalars take ``like``'s (or the first array's) dtype when safe."""
    return strict_operands(f"lax.{name}", args, like)


def _same_dtype_operands(name: str, args: Sequence[Any]) -> list:
    """Operands of a ``lax`` op that needs one dtype: as in JAX, a Python scalar is its default
    dtype (``0`` int32, ``0.`` float32 unless x64), so ``lax.add(f32_array, 0)`` is a type error
    (use ``0.`` or ``jnp.add``) and the primitive's check reports the mismatch."""
    check_arraylike(f"lax.{name}", *args)
    return [a if type(a) is Array or isinstance(a, Tracer) else as_operand(a) for a in args]


def _broadcast_ones(name: str, a: Any, b: Any) -> tuple[Any, Any]:
    """Size-1 broadcasting of two operands of one rank, as JAX's binary ``lax`` ops allow
    (``lax.add(x[3,1], y[1,4])`` is ``f32[3,4]``); rank-0 operands pass as they are."""
    sa, sb = shape_of(a), shape_of(b)
    if sa == sb or not sa or not sb:
        return a, b
    if len(sa) != len(sb):
        raise FtransTypeError(
            f"lax.{name}: arrays must have the same number of dimensions (or be rank-0), got shapes "
            f"{tuple(sa)} and {tuple(sb)}; expand one with lax.expand_dims / lax.broadcast_in_dim, or "
            "use ftrans.numpy for NumPy broadcasting")
    out = []
    for da, db in zip(sa, sb):
        if da != db and da != 1 and db != 1:
            raise FtransTypeError(
                f"lax.{name}: incompatible shapes for broadcasting: {tuple(sa)} and {tuple(sb)} (each "
                "dimension must match or be 1)")
        out.append(db if da == 1 else da)
    shape, dims = tuple(out), tuple(range(len(out)))
    if tuple(sa) != shape:
        a = S.broadcast_in_dim_p.bind(a, shape=shape, broadcast_dimensions=dims)
    if tuple(sb) != shape:
        b = S.broadcast_in_dim_p.bind(b, shape=shape, broadcast_dimensions=dims)
    return a, b


def _aval(x: Any) -> ShapedArray:
    if isinstance(x, (Array, Tracer)):
        return x.aval
    d, w = dtype_weak(x)
    return ShapedArray(shape_of(x), d, w)


# Eager type checks that passed, keyed by primitive, params and each Array operand's shape, dtype and
# weak type: a repeated eager ``lax`` call skips rebuilding avals and re-running the abstract-eval rule
# (most of its cost). Only successes are kept, so every error is still raised by the rule itself.
_checked: set = set()


def _on_config_change(name: str, value: Any = None) -> None:
    global _memo
    if name == "allow_f16_reductions":  # a signature checked under the other setting must be checked again
        _checked.clear()
        # While a context holds another setting in some thread, each check runs (the memo has no thread).
        _memo = len(set(_config.config.values_anywhere("allow_f16_reductions"))) == 1


_memo = True
_config.config._listeners.append(_on_config_change)
_config.scope_listeners.append(_on_config_change)
_CHECKED_MAX = 4096


def _bind(prim: Primitive, *ops: Any, **params: Any) -> Any:
    """Bind after type-checking eagerly (staging traces run the same rule themselves)."""
    if not _trace.active_anywhere or _trace.state.eval_only:  # is_eager(), inlined
        n = len(ops)
        if (n == 1 or n == 2) and not params and type(x := ops[0]) is Array:
            # One or two Array operands and no params (the elementwise ops): a flat key, without the general
            # key's comprehension (a frame of its own) and nested tuples.
            xv = x._value
            if n == 1:
                key = (prim, xv.shape, xv.dtype, x.weak_type)
            elif type(y := ops[1]) is Array:
                yv = y._value
                key = (prim, xv.shape, xv.dtype, x.weak_type, yv.shape, yv.dtype, y.weak_type)
            else:
                key = None
            if key is not None:
                if not (_memo and key in _checked):
                    abstract_eval(prim, [o.aval for o in ops], params)
                    if len(_checked) >= _CHECKED_MAX:
                        _checked.clear()
                    _checked.add(key)
                return prim.bind(*ops)
        try:
            key = (prim, tuple(params.items()) if params else (),
                   *[(o._value.shape, o._value.dtype, o.weak_type) if type(o) is Array else _UNKEYED for o in ops])
            known = _memo and key in _checked
        except TypeError:  # unhashable params (a jaxpr's list, an array): check every time
            key, known = None, False
        if not known:
            abstract_eval(prim, [_aval(o) for o in ops], params)
            if key is not None and _UNKEYED not in key[2:]:
                if len(_checked) >= _CHECKED_MAX:
                    _checked.clear()
                _checked.add(key)
    return prim.bind(*ops, **params)


def _bind_array(prim: Primitive, x: Any) -> Any:
    """``_bind(prim, x)`` for one operand and no params (a unary ``lax`` op), without packing: an Array takes
    the same flat key and check as in ``_bind``; anything else (a tracer) goes through ``_bind``."""
    if type(x) is not Array:
        return _bind(prim, x)
    if not _trace.active_anywhere or _trace.state.eval_only:
        xv = x._value
        key = (prim, xv.shape, xv.dtype, x.weak_type)
        if not (_memo and key in _checked):
            abstract_eval(prim, [x.aval], {})
            if len(_checked) >= _CHECKED_MAX:
                _checked.clear()
            _checked.add(key)
    return prim.bind(x)


def _bind_arrays(prim: Primitive, x: Array, y: Array) -> Any:
    """``_bind(prim, x, y)`` for two Arrays and no params (a binary ``lax`` op's common case), without packing
    the operands and params: the same flat key and check."""
    if not _trace.active_anywhere or _trace.state.eval_only:
        xv, yv = x._value, y._value
        key = (prim, xv.shape, xv.dtype, x.weak_type, yv.shape, yv.dtype, y.weak_type)
        if not (_memo and key in _checked):
            abstract_eval(prim, [x.aval, y.aval], {})
            if len(_checked) >= _CHECKED_MAX:
                _checked.clear()
            _checked.add(key)
    return prim.bind(x, y)


_UNKEYED = object()  # an operand that is not a concrete Array: its check is never remembered


def _no_accuracy(name: str, accuracy: Any) -> None:
    """``accuracy`` (``None``, ``lax.AccuracyMode`` or ``lax.Tolerance``, ftrans's or JAX's) is accepted and
    checked; ftrans lowers every transcendental op to its one StableHLO op without XLA's
    ``result_accuracy`` attribute, so the result is XLA's default implementation whatever is asked
    (docs/differences.md)."""
    if accuracy is None:
        return
    kind = type(accuracy).__name__
    if kind == "AccuracyMode" and getattr(accuracy, "name", None) in ("HIGHEST", "DEFAULT"):
        return
    if kind == "Tolerance" and isinstance(accuracy, tuple) or hasattr(accuracy, "atol"):
        return
    raise NotImplementedError(  # as JAX
        f"lax.{name}: accuracy {accuracy!r} is not supported; pass None, a lax.AccuracyMode or a lax.Tolerance"
    )


def _unop(prim: Primitive, name: str, *, with_accuracy: bool = False):
    # An Array operand is its own operand: only other values go through _operands.
    if with_accuracy:
        def fn(x: Any, *, accuracy: Any = None) -> Any:
            if accuracy is not None:
                _no_accuracy(name, accuracy)
            if type(x) is not Array:
                (x,) = _operands(name, (x,))
            return _bind_array(prim, x)
    else:
        def fn(x: Any) -> Any:
            if type(x) is not Array:
                (x,) = _operands(name, (x,))
            return _bind_array(prim, x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``lax.{name}``: elementwise, no promotion (the ``{prim.name}`` primitive)."
    return fn


def _binop(prim: Primitive, name: str):
    def fn(x: Any, y: Any) -> Any:
        if type(x) is Array and type(y) is Array:  # Arrays are their own operands
            if x._value.shape == y._value.shape:  # nothing to broadcast
                return _bind_arrays(prim, x, y)
            a, b = x, y
        else:
            a, b = _same_dtype_operands(name, (x, y))
        a, b = _broadcast_ones(name, a, b)
        return _bind(prim, a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``lax.{name}``: elementwise; operands must share a dtype (a Python scalar is "
                  f"its default dtype) and a rank, with size-1 dimensions broadcast (or be rank-0). "
                  f"Use ``ftrans.numpy`` for NumPy broadcasting and promotion.")
    return fn


# ---------------------------------------------------------------- elementwise
add = _binop(E.add_p, "add")
sub = _binop(E.sub_p, "sub")
div = _binop(E.div_p, "div")
rem = _binop(E.rem_p, "rem")
max = _binop(E.max_p, "max")  # noqa: A001 - JAX's name
min = _binop(E.min_p, "min")  # noqa: A001 - JAX's name
atan2 = _binop(E.atan2_p, "atan2")
_nextafter = _binop(E.nextafter_p, "nextafter")


def nextafter(x1: Any, x2: Any) -> Any:
    """``lax.nextafter``: the next representable value after ``x1`` towards ``x2``, elementwise (JAX's
    parameter names, so ``nextafter(x1=..., x2=...)`` works)."""
    return _nextafter(x1, x2)


complex = _binop(E.complex_p, "complex")  # noqa: A001 - JAX's name
eq = _binop(E.eq_p, "eq")
ne = _binop(E.ne_p, "ne")
lt = _binop(E.lt_p, "lt")
le = _binop(E.le_p, "le")
gt = _binop(E.gt_p, "gt")
ge = _binop(E.ge_p, "ge")
bitwise_and = _binop(E.and_p, "bitwise_and")
bitwise_or = _binop(E.or_p, "bitwise_or")
bitwise_xor = _binop(E.xor_p, "bitwise_xor")
shift_left = _binop(E.shift_left_p, "shift_left")
shift_right_logical = _binop(E.shift_right_logical_p, "shift_right_logical")
shift_right_arithmetic = _binop(E.shift_right_arithmetic_p, "shift_right_arithmetic")


def mul(x: Any, y: Any, *, out_dtype: Any = None) -> Any:
    """``lax.mul``: elementwise product of operands of one dtype.

    With ``out_dtype`` the operands may differ in dtype: each is converted to ``out_dtype`` and the
    product taken there (what JAX's lowering of ``mul(..., out_dtype=)`` does), so gradients come back
    in each operand's own dtype.
    """
    if out_dtype is not None:
        d = dtypes.to_dtype(out_dtype)
        x, y = _operands("mul", (x, y))
        x, y = convert_element_type(x, d), convert_element_type(y, d)
    a, b = _same_dtype_operands("mul", (x, y))
    a, b = _broadcast_ones("mul", a, b)
    return _bind(E.mul_p, a, b)


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - JAX's name
    """``lax.pow``: an inexact base to an exponent of its dtype or of any integer dtype."""
    a, b = _same_dtype_operands("pow", (x, y))
    a, b = _broadcast_ones("pow", a, b)
    return _bind(E.pow_p, a, b)


neg = _unop(E.neg_p, "neg")
abs = _unop(E.abs_p, "abs")  # noqa: A001 - JAX's name
sign = _unop(E.sign_p, "sign")
floor = _unop(E.floor_p, "floor")
ceil = _unop(E.ceil_p, "ceil")
is_finite = _unop(E.is_finite_p, "is_finite")
exp = _unop(E.exp_p, "exp", with_accuracy=True)
exp2 = _unop(E.exp2_p, "exp2", with_accuracy=True)
log = _unop(E.log_p, "log", with_accuracy=True)
log1p = _unop(E.log1p_p, "log1p", with_accuracy=True)
expm1 = _unop(E.expm1_p, "expm1", with_accuracy=True)
tanh = _unop(E.tanh_p, "tanh", with_accuracy=True)
logistic = _unop(E.logistic_p, "logistic", with_accuracy=True)
sin = _unop(E.sin_p, "sin", with_accuracy=True)
cos = _unop(E.cos_p, "cos", with_accuracy=True)
tan = _unop(E.tan_p, "tan", with_accuracy=True)
sqrt = _unop(E.sqrt_p, "sqrt", with_accuracy=True)
rsqrt = _unop(E.rsqrt_p, "rsqrt", with_accuracy=True)
cbrt = _unop(E.cbrt_p, "cbrt", with_accuracy=True)
asin = _unop(E.asin_p, "asin")
acos = _unop(E.acos_p, "acos")
atan = _unop(E.atan_p, "atan")
sinh = _unop(E.sinh_p, "sinh")
cosh = _unop(E.cosh_p, "cosh")
asinh = _unop(E.asinh_p, "asinh")
acosh = _unop(E.acosh_p, "acosh")
atanh = _unop(E.atanh_p, "atanh")
erf = _unop(E.erf_p, "erf")
erfc = _unop(E.erfc_p, "erfc", with_accuracy=True)  # (jax 0.12 added accuracy=)
erf_inv = _unop(E.erf_inv_p, "erf_inv")
lgamma = _unop(E.lgamma_p, "lgamma")
digamma = _unop(E.digamma_p, "digamma")
bessel_i0e = _unop(E.bessel_i0e_p, "bessel_i0e")
bessel_i1e = _unop(E.bessel_i1e_p, "bessel_i1e")
real = _unop(E.real_p, "real")
imag = _unop(E.imag_p, "imag")
conj = _unop(E.conj_p, "conj")
bitwise_not = _unop(E.not_p, "bitwise_not")
population_count = _unop(E.population_count_p, "population_count")


def integer_pow(x: Any, y: int) -> Any:
    """``lax.integer_pow``: ``x ** y`` for a static Python int ``y`` (by repeated multiplication)."""
    if isinstance(y, Tracer) or isinstance(y, bool) or not isinstance(y, (int, np.integer)):
        raise FtransTypeError(f"lax.integer_pow: the exponent y must be a static Python int, got {y!r}")
    (x,) = _operands("integer_pow", (x,))
    return _bind(E.integer_pow_p, x, y=int(y))


def square(x: Any) -> Any:
    """``lax.square``: ``x * x`` for numeric ``x``."""
    return integer_pow(x, 2)


def round(x: Any, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO) -> Any:  # noqa: A001
    """``lax.round``: ties away from zero by default, or to even."""
    try:
        method = RoundingMethod(int(rounding_method))
    except (ValueError, TypeError):
        raise FtransValueError(
            f"lax.round: unknown rounding_method {rounding_method!r}; use lax.RoundingMethod"
        ) from None
    (x,) = _operands("round", (x,))
    return _bind(E.round_p, x, rounding_method=method)


# ---------------------------------------------------------------- selection and types
def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``lax.select``: ``on_true`` where ``pred`` else ``on_false`` (no broadcasting)."""
    t, f = _operands("select", (on_true, on_false))
    (p,) = _operands("select", (pred,))
    return _bind(S.select_n_p, p, f, t)


def select_n(which: Any, *cases: Any) -> Any:
    """``lax.select_n``: case ``which`` (bool: 2 cases; int32: any number)."""
    if not cases:
        raise FtransValueError("lax.select_n: needs at least one case")
    ops = _operands("select_n", cases)
    (w,) = _operands("select_n", (which,))
    if len(ops) == 1:
        # JAX returns the only case unchanged (after checking the selector's shape).
        if shape_of(w) not in ((), shape_of(ops[0])):
            raise FtransTypeError("lax.select_n: the selector must be a scalar or match the cases' shape")
        return ops[0]
    return _bind(S.select_n_p, w, *ops)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002 - JAX's names
    """``lax.clamp``: ``x`` limited to [min, max]; min and max may be scalars."""
    lo, xo, hi = _same_dtype_operands("clamp", (min, x, max))
    return _bind(S.clamp_p, lo, xo, hi)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """``lax.convert_element_type``: XLA conversion (saturating float->int, NaN -> 0); strong result.

    A 64-bit ``new_dtype`` without x64 is narrowed to its 32-bit type with JAX's warning (or error, per
    ``jax_explicit_x64_dtypes``); ftrans's own code converts with ``convert_quiet``, which does not warn."""
    if not _config.config.enable_x64:
        dtypes.check_requested(new_dtype, "convert_element_type")
    return convert_quiet(operand, new_dtype)


def convert_quiet(operand: Any, new_dtype: Any) -> Any:
    """``convert_element_type`` for ftrans's own callers: a 64-bit ``new_dtype`` without x64 narrows to its
    32-bit type without JAX's warning (the user asked for nothing; functions that take a user's dtype check
    it themselves, naming themselves, as JAX's do)."""
    if is_user_edtype(new_dtype) or is_user_edtype(getattr(operand, "dtype", None)):
        return _convert_edtype(operand, new_dtype)
    d = dtypes.kept_wide(new_dtype) or dtypes.to_dtype(new_dtype)
    if type(operand) is int and d.kind in "iu":
        # JAX converts a Python int straight to the target with NumPy (wrapping), so 2**32 -> int32 is 0
        # rather than the default-int overflow error other operands raise.
        try:
            wide = np.asarray(operand, np.uint64 if operand > 0 else np.int64)
        except OverflowError:
            raise FtransOverflowError(f"lax.convert_element_type: the Python int {operand} does not fit {d.name} (nor "
                                      "any 64-bit integer); pass a smaller value, or convert to a float dtype") from None
        with np.errstate(all="ignore"):
            return convert(wide.astype(d), d, False)
    if type(operand) in _SCALAR_TYPES or isinstance(operand, np.generic):
        folded = _fold_scalar_convert(operand, d)
        if folded is not None:  # a constant, as JAX folds it: no equation when staged
            return folded
    (x,) = _operands("convert_element_type", (operand,))
    xd, xw = dtype_weak(x)
    if xd == d and not xw:
        return x
    return _bind(S.convert_element_type_p, x, new_dtype=d, weak_type=False)


_SCALAR_TYPES = (builtins.bool, builtins.int, builtins.float, builtins.complex)


def _convert_edtype(operand: Any, new_dtype: Any) -> Any:
    """``convert_element_type`` to or from a user-defined extended dtype (JAX's ``to_edtype`` /
    ``from_edtype``): only between it and its representation dtype, never between two extended dtypes."""
    old = getattr(operand, "dtype", None)
    if is_user_edtype(old) and is_user_edtype(new_dtype):
        if old == new_dtype:
            return operand
        raise FtransValueError(
            f"lax.convert_element_type: cannot directly convert between extended dtypes: from {old.name} to "
            f"{new_dtype.name}. Convert to and from their representation dtypes instead "
            f"({old.name} -> representation -> {new_dtype.name})")
    if is_user_edtype(new_dtype):
        (x,) = _operands("convert_element_type", (operand,))
        return _bind(S.to_edtype_p, x, edtype=new_dtype)
    if new_dtype is int or new_dtype is float or new_dtype is complex or new_dtype is builtins.bool:
        d = dtypes.to_dtype(new_dtype)
    else:
        d = np.dtype(new_dtype)
    return _bind(S.from_edtype_p, operand, dtype=d)


def _fold_scalar_convert(v: Any, d: np.dtype) -> Array | None:
    """``convert_element_type`` of a Python or NumPy scalar, done now (JAX folds it too) when NumPy's
    conversion is the one XLA makes: to a float or complex type, or a finite value that fits the integer
    type. The rest (out of range, NaN to int: XLA saturates) stay an operation, so a staged and an eager
    conversion agree."""
    if not isinstance(d, np.dtype) or d.kind not in "biufc":  # float0, extended types: as given
        return None
    if isinstance(v, (builtins.complex, np.complexfloating)) and d.kind != "c":
        return None  # XLA takes the real part; NumPy warns
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(v, dtype=d) if d.kind in "fc" or type(v) in (builtins.bool, builtins.int) or \
                isinstance(v, (np.bool_, np.integer)) else None
            if out is None:  # float -> int/bool: only a finite value inside the type's range
                f = builtins.float(v)
                if d.kind == "b":
                    out = np.asarray(f != 0.0)
                else:
                    info = np.iinfo(d)
                    if not (np.isfinite(f) and info.min <= np.trunc(f) <= info.max):
                        return None
                    out = np.asarray(np.trunc(f)).astype(d)
    except OverflowError:  # an int outside the target's range: XLA wraps it, NumPy refuses
        return None
    return Array._new(out, False)


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """``lax.bitcast_convert_type``: reinterpret the bits (a wider/narrower type adds/removes a last axis)."""
    d = dtypes.requested(new_dtype, "bitcast_convert_type")
    (x,) = _operands("bitcast_convert_type", (operand,))
    return _bind(S.bitcast_convert_type_p, x, new_dtype=d)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """``lax.reduce_precision``: round to the nearest value with ``mantissa_bits`` of mantissa and
    ``exponent_bits`` of exponent (out-of-range values become zero or infinity), keeping the dtype."""
    (x,) = _operands("reduce_precision", (operand,))
    return _bind(E.reduce_precision_p, x, exponent_bits=operator.index(exponent_bits),
                 mantissa_bits=operator.index(mantissa_bits))


def stop_gradient(x: Any) -> Any:
    """``lax.stop_gradient`` over a pytree: inexact leaves get a zero derivative; others pass through."""

    def stop(leaf: Any) -> Any:
        (op,) = _operands("stop_gradient", (leaf,))
        if dtypes.is_inexact(dtype_weak(op)[0]):
            return E.stop_gradient_p.bind(op)
        return op

    return tree_util.tree_map(stop, x)


# ---------------------------------------------------------------- shapes
def _ints(name: str, what: str, seq: Any) -> tuple[int, ...]:
    if isinstance(seq, Tracer):
        raise FtransTypeError(f"lax.{name}: {what} must be static Python ints, not a traced array")
    try:
        return tuple(int(v) for v in seq)
    except TypeError:
        raise FtransTypeError(f"lax.{name}: {what} must be a sequence of ints, got {seq!r}") from None


def _sizes(name: str, what: str, seq: Any) -> tuple:
    """Static sizes (a shape, slice bounds): ints, or symbolic dimensions (shape polymorphism)."""
    if isinstance(seq, Tracer):
        raise FtransTypeError(f"lax.{name}: {what} must be static Python ints, not a traced array")
    try:
        return tuple(v if isinstance(v, DimExpr) else int(v) for v in seq)
    except TypeError:
        raise FtransTypeError(f"lax.{name}: {what} must be a sequence of ints, got {seq!r}") from None


def _size(v: Any) -> Any:
    return v if isinstance(v, DimExpr) else int(v)


def _axis(name: str, axis: Any, ndim: int) -> int:
    a = int(axis)
    if not -ndim <= a < ndim:
        raise FtransValueError(f"lax.{name}: axis {axis} is out of range for an array of rank {ndim}")
    return a % ndim


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int], *,
                     out_sharding: Any = None) -> Any:
    """``lax.broadcast_in_dim``: operand axis i becomes output axis broadcast_dimensions[i]."""
    if out_sharding is not None:  # laid out as given; over Explicit mesh axes, that type
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("lax.broadcast_in_dim", out_sharding,
                                 lambda: broadcast_in_dim(operand, shape, broadcast_dimensions), (operand,))
    (x,) = _operands("broadcast_in_dim", (operand,))
    shape = _sizes("broadcast_in_dim", "shape", shape)
    dims = _ints("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
    if shape_of(x) == shape and dims == tuple(range(len(shape))):
        return x
    if (len(dims) == len(shape_of(x)) and len(set(dims)) == len(dims) and list(dims) != sorted(dims)
            and all(0 <= d < len(shape) for d in dims)):
        # JAX accepts the operand's axes in any order; the primitive keeps them increasing, so put the
        # operand's axes in output order first.
        perm = tuple(sorted(range(len(dims)), key=dims.__getitem__))
        x, dims = transpose(x, perm), tuple(sorted(dims))
    return _bind(S.broadcast_in_dim_p, x, shape=shape, broadcast_dimensions=dims)


def broadcast(operand: Any, sizes: Sequence[int], *, out_sharding: Any = None) -> Any:
    """``lax.broadcast``: prepend axes of the given sizes."""
    (x,) = _operands("broadcast", (operand,))
    sizes = _sizes("broadcast", "sizes", sizes)
    nd = len(shape_of(x))
    return broadcast_in_dim(x, sizes + tuple(shape_of(x)), tuple(range(len(sizes), len(sizes) + nd)),
                            out_sharding=out_sharding)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int, *, out_sharding: Any = None) -> Any:
    """``lax.broadcasted_iota``: 0, 1, 2, ... along ``dimension`` of an array of ``shape``."""
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("lax.broadcasted_iota", out_sharding,
                                 lambda: broadcasted_iota(dtype, shape, dimension))
    shape = _sizes("broadcasted_iota", "shape", shape)
    params = dict(dtype=dtypes.requested(dtype, "broadcasted_iota"), shape=shape, dimension=int(dimension))
    return _bind(S.iota_p, **params)


def iota(dtype: Any, size: int) -> Any:
    """``lax.iota``: [0, 1, ..., size - 1]."""
    return broadcasted_iota(dtype, (size if isinstance(size, DimExpr) else int(size),), 0)


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None, *,
            out_sharding: Any = None) -> Any:
    """``lax.reshape``: row-major reshape, after transposing by ``dimensions`` if given."""
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("reshape", out_sharding, lambda: reshape(operand, new_sizes, dimensions),
                                 (operand,), _sizes("reshape", "new_sizes", new_sizes))
    (x,) = _operands("reshape", (operand,))
    sizes = _sizes("reshape", "new_sizes", new_sizes)
    dims = None if dimensions is None else _ints("reshape", "dimensions", dimensions)
    if dims is not None and dims == tuple(range(len(shape_of(x)))):
        dims = None
    if dims is None and sizes == shape_of(x):
        return x
    return _bind(S.reshape_p, x, new_sizes=sizes, dimensions=dims)


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    """``lax.transpose``: output axis i is operand axis permutation[i]."""
    (x,) = _operands("transpose", (operand,))
    perm = _ints("transpose", "permutation", permutation)
    if perm == tuple(range(len(shape_of(x)))):
        return x
    return _bind(S.transpose_p, x, permutation=perm)


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    """``lax.squeeze``: remove the given size-1 axes (negative axes count from the end)."""
    (x,) = _operands("squeeze", (array,))
    nd = len(shape_of(x))
    given = [_axis("squeeze", d, nd) for d in _ints("squeeze", "dimensions", dimensions)]
    if len(set(given)) != len(given):
        raise FtransValueError(f"lax.squeeze: dimensions are not unique: {tuple(dimensions)}")
    dims = tuple(sorted(given))
    if not dims:
        return x
    return _bind(S.squeeze_p, x, dimensions=dims)


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    """``lax.expand_dims``: insert size-1 axes at the given output positions."""
    (x,) = _operands("expand_dims", (array,))
    dims_in = _ints("expand_dims", "dimensions", dimensions)
    out_nd = len(shape_of(x)) + len(dims_in)
    dims = tuple(sorted(_axis("expand_dims", d, out_nd) for d in dims_in))
    if len(set(dims)) != len(dims):
        raise FtransValueError(f"lax.expand_dims: repeated dimension in {dims_in}")
    if not dims:
        return x
    return _bind(S.expand_dims_p, x, dimensions=dims)


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    """``lax.rev``: reverse the order of elements along the given axes."""
    (x,) = _operands("rev", (operand,))
    dims = _ints("rev", "dimensions", dimensions)
    if not dims:
        return x
    return _bind(S.rev_p, x, dimensions=dims)


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """``lax.pad``: (low, high, interior) per axis; negative low/high crop."""
    x, v = _operands("pad", (operand, padding_value))
    try:
        config = tuple(tuple(v if isinstance(v, DimExpr) else int(v) for v in (lo, hi, it))
                       for lo, hi, it in padding_config)
    except (TypeError, ValueError):
        raise FtransTypeError(
            f"lax.pad: padding_config must be a sequence of (low, high, interior) int triples, "
            f"got {padding_config!r}"
        ) from None
    return _bind(S.pad_p, x, v, padding_config=config)


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    """``lax.concatenate``: join operands of one dtype along ``dimension``."""
    if isinstance(operands, (Array, Tracer, np.ndarray)):
        operands = list(operands)
    if len(operands) == 0:
        raise FtransValueError("lax.concatenate: needs at least one operand")
    ops = [as_operand(o) for o in operands]
    check_arraylike("lax.concatenate", *ops)
    if len(ops) == 1:
        return ops[0]
    return _bind(S.concatenate_p, *ops, dimension=int(dimension))


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """``lax.slice``: static start/limit (and strides) per axis, no negative indices."""
    (x,) = _operands("slice", (operand,))
    start = _sizes("slice", "start_indices", start_indices)
    limit = _sizes("slice", "limit_indices", limit_indices)
    st = None if strides is None else _sizes("slice", "strides", strides)
    if st is not None and all(s == 1 for s in st):
        st = None
    if st is None and start == (0,) * len(start) and limit == shape_of(x) and (
            not _trace.active_anywhere or _trace.state.eval_only):
        return x  # eagerly the whole operand is itself; a traced one is sliced, as JAX's (its transpose pads
        # with a strong zero: the cotangent of a weakly typed operand is strong)
    return _bind(S.slice_p, x, start_indices=start, limit_indices=limit, strides=st)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Any:
    """``lax.slice_in_dim``: a Python-style slice (negative indices allowed) of one axis."""
    (x,) = _operands("slice_in_dim", (operand,))
    shape = shape_of(x)
    ax = _axis("slice_in_dim", axis, len(shape))
    n = shape[ax]
    start = 0 if start_index is None else _size(start_index)
    limit = n if limit_index is None else _size(limit_index)
    start = start + n if start < 0 else start
    limit = limit + n if limit < 0 else limit
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[ax], limits[ax], strides[ax] = start, limit, _size(stride)
    return slice(x, starts, limits, strides)


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """``lax.index_in_dim``: element ``index`` (negative allowed) of one axis."""
    (x,) = _operands("index_in_dim", (operand,))
    shape = shape_of(x)
    ax = _axis("index_in_dim", axis, len(shape))
    n = shape[ax]
    i = _size(index)
    if isinstance(n, DimExpr) or isinstance(i, DimExpr):  # a symbolic size: the index wraps once (its range is checked at run time)
        i = i + n if i < 0 else i
    else:
        if not -n <= i < n:
            raise FtransIndexError(f"lax.index_in_dim: index {index} is out of bounds for axis {ax} with size {n}")
        i %= n
    out = slice_in_dim(x, i, i + 1, 1, ax)
    return out if keepdims else squeeze(out, (ax,))


def _start_indices(name: str, start_indices: Any, shape: tuple[int, ...], allow_negative: Any) -> list:
    """Scalar integer index operands; negative ones wrap once (like Python), the rest clamp in XLA."""
    if isinstance(start_indices, (Array, Tracer, np.ndarray)):
        idx_shape = shape_of(start_indices)
        if len(idx_shape) != 1:
            raise FtransTypeError(f"lax.{name}: start_indices must be a 1-D array or a sequence of scalars")
        arr = as_operand(start_indices)
        items = [reshape(slice(arr, (i,), (i + 1,)), ()) for i in range(idx_shape[0])]
    else:
        items = list(start_indices)
    if len(items) != len(shape):
        raise FtransValueError(
            f"lax.{name}: got {len(items)} start indices for an operand of rank {len(shape)} (shape {shape})"
        )
    negs = [allow_negative] * len(items) if isinstance(allow_negative, bool) else list(allow_negative)
    kinds = set()
    for i in items:  # JAX requires one index dtype (a Python int counts as the default int)
        if type(i) is int:
            kinds.add(dtypes.default_int())
        elif isinstance(i, (np.integer, np.ndarray, Array, Tracer)) and np.dtype(i.dtype).kind in "iu":
            kinds.add(dtypes.canonicalize(i.dtype))
    if len(kinds) > 1:
        raise FtransTypeError(
            f"index arguments to {name} must be integers of the same type, got: "
            f"{', '.join(sorted(d.name for d in kinds))}; convert them to one dtype (lax.convert_element_type)"
        )
    out = []
    for i, n, neg_ok in zip(items, shape, negs):
        if type(i) is int or (isinstance(i, np.integer) and dtypes.canonicalize(i.dtype) == dtypes.default_int()):
            iv = int(i)
            if neg_ok and iv < 0:
                iv += n
            if isinstance(iv, DimExpr):  # wrapped by a symbolic size: its value when the program runs
                out.append(convert(S.dim_as_value_p.bind(dim=iv), dtypes.default_int(), False))
                continue
            # Out-of-range starts clamp anyway (XLA), so saturating to int32 changes nothing.
            iv = builtins.min(builtins.max(iv, -(2**31)), 2**31 - 1)
            out.append(convert(iv, dtypes.default_int(), False))
            continue
        (io,) = _operands(name, (i,))
        d, weak = dtype_weak(io)
        if shape_of(io) != () or d.kind not in "iu":
            raise FtransTypeError(
                f"lax.{name}: start indices must be integer scalars, got {d.name}{list(shape_of(io))}"
            )
        if neg_ok and d.kind == "i":
            zero = convert(0, d, False)
            size = convert(S.dim_as_value_p.bind(dim=n) if isinstance(n, DimExpr) else n, d, False)
            # (as JAX's ``i + size``, a weak-typed index is made strong before the add)
            io = _bind(S.select_n_p, _bind(E.lt_p, io, zero), io,
                       _bind(E.add_p, _bind(S.convert_element_type_p, io, new_dtype=d, weak_type=False)
                             if weak and isinstance(io, Tracer) else io, size))
        out.append(io)
    return out


def _zero_index_like(index: Any) -> Any:
    """A zero start index of ``index``'s integer dtype (the other axes' starts of an ``_in_dim`` slice:
    ``lax`` wants one index dtype, as JAX's ``_in_dim`` functions make them)."""
    d = getattr(index, "dtype", None)
    if type(index) is int or d is None or np.dtype(d).kind not in "iu":
        return 0
    return np.zeros((), dtypes.canonicalize(d))


def dynamic_slice(operand: Any, start_indices: Any, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """``lax.dynamic_slice``: a slice at run-time start indices, clamped to stay in bounds (XLA)."""
    (x,) = _operands("dynamic_slice", (operand,))
    shape = shape_of(x)
    idx = _start_indices("dynamic_slice", start_indices, shape, allow_negative_indices)
    sizes = _sizes("dynamic_slice", "slice_sizes", slice_sizes)
    return _bind(S.dynamic_slice_p, x, *idx, slice_sizes=sizes)


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Any:
    """``lax.dynamic_slice_in_dim``: ``dynamic_slice`` along one axis."""
    (x,) = _operands("dynamic_slice_in_dim", (operand,))
    shape = shape_of(x)
    ax = _axis("dynamic_slice_in_dim", axis, len(shape))
    starts: list[Any] = [_zero_index_like(start_index)] * len(shape)
    sizes = list(shape)
    starts[ax], sizes[ax] = start_index, slice_size if isinstance(slice_size, DimExpr) else int(slice_size)
    negs = [False] * len(shape)
    negs[ax] = allow_negative_indices
    return dynamic_slice(x, starts, sizes, allow_negative_indices=negs)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Any:
    """``lax.dynamic_index_in_dim``: element ``index`` of one axis, index known at run time."""
    (x,) = _operands("dynamic_index_in_dim", (operand,))
    ax = _axis("dynamic_index_in_dim", axis, len(shape_of(x)))
    out = dynamic_slice_in_dim(x, index, 1, ax, allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (ax,))


def dynamic_update_slice(operand: Any, update: Any, start_indices: Any, *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """``lax.dynamic_update_slice``: write ``update`` at run-time start indices (clamped, as XLA)."""
    x, u = _operands("dynamic_update_slice", (operand, update))
    idx = _start_indices("dynamic_update_slice", start_indices, shape_of(x), allow_negative_indices)
    return _bind(S.dynamic_update_slice_p, x, u, *idx)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """``lax.dynamic_update_slice_in_dim``: ``dynamic_update_slice`` along one axis."""
    x, u = _operands("dynamic_update_slice_in_dim", (operand, update))
    nd = len(shape_of(x))
    ax = _axis("dynamic_update_slice_in_dim", axis, nd)
    starts: list[Any] = [_zero_index_like(start_index)] * nd
    starts[ax] = start_index
    negs = [False] * nd
    negs[ax] = allow_negative_indices
    return dynamic_update_slice(x, u, starts, allow_negative_indices=negs)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """``lax.dynamic_update_index_in_dim``: write one slice (``update`` may lack the axis)."""
    x, u = _operands("dynamic_update_index_in_dim", (operand, update))
    nd = len(shape_of(x))
    ax = _axis("dynamic_update_index_in_dim", axis, nd)
    if len(shape_of(u)) == nd - 1:
        u = expand_dims(u, (ax,))
    return dynamic_update_slice_in_dim(x, u, index, ax, allow_negative_indices=allow_negative_indices)


# ---------------------------------------------------------------- contractions
def _dimension_numbers(name: str, dn: Any) -> tuple:
    try:
        (lc, rc), (lb, rb) = dn
        return ((_ints(name, "contracting dims", lc), _ints(name, "contracting dims", rc)),
                (_ints(name, "batch dims", lb), _ints(name, "batch dims", rb)))
    except (TypeError, ValueError):
        raise FtransTypeError(
            f"lax.{name}: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
            f"(lhs_batch, rhs_batch)), got {dn!r}"
        ) from None


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None, *, out_sharding: Any = None) -> Any:
    """``lax.dot_general``: contract and batch the named axes.

    Operands of different dtypes are taken as they are (the result has the
    element type of higher precision, as XLA's), as JAX does;
    ``preferred_element_type`` sets the result dtype.
    """
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        (lc, rc), (lb, rb) = _dimension_numbers("dot_general", dimension_numbers)
        sa, sb = shape_of(lhs), shape_of(rhs)
        shape = tuple(sa[i] for i in lb) + tuple(n for i, n in enumerate(sa) if i not in lc and i not in lb) + \
            tuple(n for i, n in enumerate(sb) if i not in rc and i not in rb)
        return with_out_sharding("dot_general", out_sharding, lambda: dot_general(
            lhs, rhs, dimension_numbers, precision, preferred_element_type), (lhs, rhs), shape)
    a, b = _operands("dot_general", (lhs, rhs))  # mixed dtypes are taken as they are, as JAX's
    # (a 64-bit type without x64: JAX's warning, which names ``dot``)
    pref = None if preferred_element_type is None else dtypes.requested(preferred_element_type, "dot")
    dn = _dimension_numbers("dot_general", dimension_numbers)
    return _bind(R.dot_general_p, a, b, dimension_numbers=dn, precision=canonicalize_precision("dot_general", precision),
                 preferred_element_type=pref)


class Precision(enum.Enum):
    """Precision hint for convolutions and matrix products (JAX's ``lax.Precision``).

    ``Precision("highest")`` and the other names JAX accepts (``"float32"``,
    ``"tensorfloat32"``, ``"bfloat16"``, ...) give the matching member.
    """

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: Any) -> Any:
        if isinstance(value, str) and value.upper() in _PRECISION_NAMES:
            return cls[_PRECISION_NAMES[value.upper()]]
        return None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Precision.{self.name}"


_PRECISION_NAMES = {
    "DEFAULT": "DEFAULT", "FASTEST": "DEFAULT", "BFLOAT16": "DEFAULT",
    "HIGH": "HIGH", "TENSORFLOAT32": "HIGH", "BFLOAT16_3X": "HIGH",
    "HIGHEST": "HIGHEST", "FLOAT32": "HIGHEST",
}


def canonicalize_precision(name: str, precision: Any) -> tuple[Precision, Precision] | None:
    """``None``, or one ``Precision`` per operand, as JAX keeps it in the equation's params (accepts
    strings, JAX's or ftrans's ``Precision`` enums, or pairs of them). ``None`` takes the
    ``default_matmul_precision`` config option, as in JAX."""
    if precision is None:
        precision = _config.config.default_matmul_precision
        if precision is None:
            return None
    if type(precision).__name__ in ("DotAlgorithm", "DotAlgorithmPreset"):  # ftrans's or JAX's: a hint, kept
        return precision
    if isinstance(precision, str) and precision.upper() not in _PRECISION_NAMES:
        from ftrans.lax._extras import DotAlgorithmPreset  # a preset's name ("F32_F32_F32"), as JAX takes

        if precision.upper() in DotAlgorithmPreset.__members__:
            return DotAlgorithmPreset[precision.upper()]

    def one(p: Any) -> Precision:
        key = p if isinstance(p, str) else getattr(p, "name", None)
        if isinstance(key, str) and key.upper() in _PRECISION_NAMES:
            return Precision[_PRECISION_NAMES[key.upper()]]
        raise FtransValueError(f"lax.{name}: precision must be None, 'default', 'high', 'highest', a "
                               f"Precision value or a pair of them, got {precision!r}")

    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise FtransValueError(f"lax.{name}: a precision pair needs two entries, got {precision!r}")
        return (one(precision[0]), one(precision[1]))
    p = one(precision)
    return (p, p)



def dot(lhs: Any, rhs: Any, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """``lax.dot``: vector/matrix products (or ``dot_general`` with ``dimension_numbers``)."""
    a, b = _operands("dot", (lhs, rhs))
    if dimension_numbers is None:
        sa, sb = shape_of(a), shape_of(b)
        if not (1 <= len(sa) <= 2 and 1 <= len(sb) <= 2):
            raise FtransValueError(
                f"lax.dot: dimension_numbers must be given unless both operands are vectors or "
                f"matrices; got shapes {sa} and {sb}"
            )
        if sa[-1] != sb[0]:
            raise FtransTypeError(f"lax.dot: incompatible shapes {sa} and {sb} (inner sizes differ)")
        dimension_numbers = (((len(sa) - 1,), (0,)), ((), ()))
    return dot_general(a, b, dimension_numbers, precision, preferred_element_type, out_sharding=out_sharding)


# ---------------------------------------------------------------- reductions
def _reduction_axes(name: str, x: Any, axes: Sequence[int]) -> tuple[int, ...]:
    """lax reductions take axes as XLA does: non-negative and in range (jnp normalises, lax does not)."""
    shape = tuple(shape_of(x))
    ax = tuple(axes)
    if any(not 0 <= a < len(shape) for a in ax):
        raise FtransValueError(
            f"lax.{name}: reduction axes {ax} contain out-of-bounds indices for an operand of shape {shape}; "
            "lax takes axes in [0, rank) - use jnp reductions for negative axes"
        )
    return ax


def _reducer(prim: Primitive, name: str):
    def fn(operand: Any, axes: Sequence[int]) -> Any:
        (x,) = _operands(name, (operand,))
        ax = _reduction_axes(name, x, _ints(name, "axes", axes))
        return _bind(prim, x, axes=ax)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``lax.{name}``: reduce over ``axes`` (no promotion; empty axes give the identity)."
    return fn


_reduce_sum = _reducer(R.reduce_sum_p, "reduce_sum")


def reduce_sum(operand: Any, axes: Sequence[int], *, out_sharding: Any = None) -> Any:
    """``lax.reduce_sum``: add over ``axes`` (no promotion); ``out_sharding=`` gives the result's layout type
    (JAX's: its unreduced axes, among those split over the summed dimensions, leave the partial sums unadded)."""
    if out_sharding is None:
        return _reduce_sum(operand, axes)
    from ftrans.lax._sharding import with_out_sharding

    full = tuple(getattr(operand, "shape", None) or np.shape(operand))
    summed = {int(a) % (len(full) or 1) for a in axes}
    shape = tuple(n for i, n in enumerate(full) if i not in summed)
    return with_out_sharding("reduce_sum", out_sharding, lambda: _reduce_sum(operand, axes), shape=shape)
reduce_prod = _reducer(R.reduce_prod_p, "reduce_prod")
reduce_max = _reducer(R.reduce_max_p, "reduce_max")
reduce_min = _reducer(R.reduce_min_p, "reduce_min")
reduce_and = _reducer(R.reduce_and_p, "reduce_and")
reduce_or = _reducer(R.reduce_or_p, "reduce_or")
reduce_xor = _reducer(R.reduce_xor_p, "reduce_xor")


def _arg_reducer(prim: Primitive, name: str):
    def fn(operand: Any, axis: int, index_dtype: Any) -> Any:
        (x,) = _operands(name, (operand,))
        (ax,) = _reduction_axes(name, x, (int(axis),))
        return _bind(prim, x, axes=(ax,), index_dtype=dtypes.to_dtype(index_dtype))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``lax.{name}``: index of the extreme value along ``axis`` (first NaN wins), "
                  "as ``index_dtype``.")
    return fn


argmax = _arg_reducer(R.argmax_p, "argmax")
argmin = _arg_reducer(R.argmin_p, "argmin")


def _check_default_matmul_precision(value: Any) -> None:
    if value is not None:
        canonicalize_precision("default_matmul_precision", value)


_config.config.register_validator("default_matmul_precision", _check_default_matmul_precision)
