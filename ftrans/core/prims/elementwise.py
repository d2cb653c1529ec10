"""Elementwise primitives: arithmetic, math functions, comparisons, logic, bits.

The NumPy rules reproduce XLA's semantics where NumPy's differ: integer
division truncates toward zero and division by zero gives -1 (or all ones for
unsigned), remainder takes the dividend's sign, shifts by the bit width or
more give 0 (or the sign fill), rounding can be half-away-from-zero.
"""

from __future__ import annotations

import numpy as np
import scipy.special as sps

from ftrans.core import dtypes
from ftrans.core.primitive import never_weak
from ftrans.core.prims._base import (
    ANY,
    BOOL,
    COMPLEX,
    FLOAT,
    INEXACT,
    INT,
    INT_OR_BOOL,
    NUM,
    SIGNED_NUM,
    binop,
    keep_dtype,
    unop,
    via_float32,
)

_ERR = np.errstate(all="ignore")


def _quiet(fn):
    def impl(*args, **params):
        with np.errstate(all="ignore"):
            return fn(*args, **params)

    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


# ---------------------------------------------------------------- arithmetic
add_p = binop("add", NUM, np.add)
sub_p = binop("sub", NUM, np.subtract)
mul_p = binop("mul", NUM, np.multiply)
neg_p = unop("neg", NUM, np.negative)
max_p = binop("max", ANY, np.maximum)
min_p = binop("min", ANY, np.minimum)


def _div_impl(x, y):
    if x.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            zero = y == 0
            safe_y = np.where(zero, np.ones_like(y), y)
            if x.dtype.kind == "i":
                q = np.abs(x) // np.abs(safe_y)
                q = np.where((x < 0) != (safe_y < 0), -q, q).astype(x.dtype)
            else:
                q = x // safe_y
            fill = np.array(-1).astype(x.dtype) if x.dtype.kind == "i" else np.iinfo(x.dtype).max
            return np.where(zero, fill, q).astype(x.dtype)
    with np.errstate(all="ignore"):
        return np.true_divide(x, y).astype(x.dtype, copy=False)


def _rem_impl(x, y):
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu":
            zero = y == 0
            safe_y = np.where(zero, np.ones_like(y), y)
            return np.where(zero, x, np.fmod(x, safe_y)).astype(x.dtype)
        return np.fmod(x, y).astype(x.dtype, copy=False)


div_p = binop("div", NUM, _div_impl)
rem_p = binop("rem", INT | FLOAT, _rem_impl)
pow_p = binop("pow", INEXACT, _quiet(keep_dtype(np.power)))


def _abs_impl(x):
    out = np.abs(x)
    return out


abs_p = unop("abs", SIGNED_NUM, _abs_impl, result="real")


def _sign_impl(x):
    if x.dtype.kind == "c":
        with np.errstate(all="ignore"):
            a = np.abs(x)
            return np.where(a == 0, 0, x / np.where(a == 0, 1, a)).astype(x.dtype)
    return np.sign(x).astype(x.dtype, copy=False)


sign_p = unop("sign", NUM, _sign_impl)


def _integer_pow_impl(x, *, y: int):
    if y == 0:
        return np.ones_like(x)
    with np.errstate(all="ignore"):
        if y < 0:
            return (np.ones_like(x) / _int_power(x, -y)).astype(x.dtype, copy=False)
        return _int_power(x, y)


def _int_power(x, n: int):
    """Exponentiation by squaring, as XLA does, so int overflow wraps identically."""
    acc = None
    base = x
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    return acc.astype(x.dtype, copy=False)


integer_pow_p = unop("integer_pow", NUM, _integer_pow_impl)

# ---------------------------------------------------------------- float math
exp_p = unop("exp", INEXACT, _quiet(keep_dtype(np.exp)))
exp2_p = unop("exp2", INEXACT, _quiet(keep_dtype(np.exp2)))
log_p = unop("log", INEXACT, _quiet(keep_dtype(np.log)))
log1p_p = unop("log1p", INEXACT, _quiet(keep_dtype(np.log1p)))
expm1_p = unop("expm1", INEXACT, _quiet(keep_dtype(np.expm1)))
sqrt_p = unop("sqrt", INEXACT, _quiet(keep_dtype(np.sqrt)))
rsqrt_p = unop("rsqrt", INEXACT, _quiet(keep_dtype(lambda x: 1 / np.sqrt(x))))
cbrt_p = unop("cbrt", FLOAT, _quiet(via_float32(np.cbrt)))
tanh_p = unop("tanh", INEXACT, _quiet(keep_dtype(np.tanh)))
logistic_p = unop("logistic", INEXACT, _quiet(via_float32(sps.expit)))
sin_p = unop("sin", INEXACT, _quiet(keep_dtype(np.sin)))
cos_p = unop("cos", INEXACT, _quiet(keep_dtype(np.cos)))
tan_p = unop("tan", INEXACT, _quiet(keep_dtype(np.tan)))
asin_p = unop("asin", INEXACT, _quiet(keep_dtype(np.arcsin)))
acos_p = unop("acos", INEXACT, _quiet(keep_dtype(np.arccos)))
atan_p = unop("atan", INEXACT, _quiet(keep_dtype(np.arctan)))
sinh_p = unop("sinh", INEXACT, _quiet(keep_dtype(np.sinh)))
cosh_p = unop("cosh", INEXACT, _quiet(keep_dtype(np.cosh)))
asinh_p = unop("asinh", INEXACT, _quiet(keep_dtype(np.arcsinh)))
acosh_p = unop("acosh", INEXACT, _quiet(keep_dtype(np.arccosh)))
atanh_p = unop("atanh", INEXACT, _quiet(keep_dtype(np.arctanh)))
atan2_p = binop("atan2", FLOAT, _quiet(keep_dtype(np.arctan2)))
nextafter_p = binop("nextafter", FLOAT, via_float32(np.nextafter))
erf_p = unop("erf", FLOAT, _quiet(via_float32(sps.erf)))
erfc_p = unop("erfc", FLOAT, _quiet(via_float32(sps.erfc)))
erf_inv_p = unop("erf_inv", FLOAT, _quiet(via_float32(sps.erfinv)))
lgamma_p = unop("lgamma", FLOAT, _quiet(via_float32(sps.gammaln)))
digamma_p = unop("digamma", FLOAT, _quiet(via_float32(sps.psi)))
floor_p = unop("floor", FLOAT, keep_dtype(np.floor))
ceil_p = unop("ceil", FLOAT, keep_dtype(np.ceil))


def _round_impl(x, *, rounding_method: int = 0):
    if rounding_method == 1:  # to nearest even
        return np.round(x).astype(x.dtype, copy=False)
    return (np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))).astype(x.dtype, copy=False)


round_p = unop("round", FLOAT, _round_impl)
is_finite_p = unop("is_finite", FLOAT, np.isfinite, result="bool", weak_type_rule=never_weak)

# ---------------------------------------------------------------- complex
real_p = unop("real", COMPLEX, np.real, result="real")
imag_p = unop("imag", COMPLEX, np.imag, result="real")
conj_p = unop("conj", COMPLEX, np.conj)


def _complex_impl(x, y):
    out_dtype = dtypes.complex128 if x.dtype == dtypes.float64 else dtypes.complex64
    return (x + 1j * y.astype(out_dtype)).astype(out_dtype)


complex_p = binop(
    "complex", frozenset({dtypes.float32, dtypes.float64}), _complex_impl,
    result=dtypes.complex64,
)


def _complex_dtype_fix() -> None:
    # complex(f64, f64) is c128; the generic dtype rule only knows one result dtype.
    from ftrans.core.primitive import abstract_eval_rules

    base = abstract_eval_rules[complex_p]

    def rule(x, y):
        out = base(x, y)
        return out.update(dtype=dtypes.complex128 if x.dtype == dtypes.float64 else dtypes.complex64)

    abstract_eval_rules[complex_p] = rule


_complex_dtype_fix()

# ---------------------------------------------------------------- comparisons
eq_p = binop("eq", ANY, np.equal, result="bool", weak_type_rule=never_weak)
ne_p = binop("ne", ANY, np.not_equal, result="bool", weak_type_rule=never_weak)
lt_p = binop("lt", ANY - COMPLEX, np.less, result="bool", weak_type_rule=never_weak)
le_p = binop("le", ANY - COMPLEX, np.less_equal, result="bool", weak_type_rule=never_weak)
gt_p = binop("gt", ANY - COMPLEX, np.greater, result="bool", weak_type_rule=never_weak)
ge_p = binop("ge", ANY - COMPLEX, np.greater_equal, result="bool", weak_type_rule=never_weak)

# ---------------------------------------------------------------- logic and bits
and_p = binop("and", INT_OR_BOOL, np.bitwise_and)
or_p = binop("or", INT_OR_BOOL, np.bitwise_or)
xor_p = binop("xor", INT_OR_BOOL, np.bitwise_xor)
not_p = unop("not", INT_OR_BOOL, np.invert)


def _shift_impl(kind: str):
    def impl(x, y):
        bits = x.dtype.itemsize * 8
        udt = np.dtype(f"u{x.dtype.itemsize}")
        with np.errstate(all="ignore"):
            ys = y.astype(udt)
            big = ys >= bits
            s = np.where(big, 0, ys).astype(udt)
            if kind == "left":
                out = (x.view(udt) << s).view(x.dtype) if x.dtype.kind == "i" else (x << s)
                return np.where(big, np.zeros_like(x), out).astype(x.dtype)
            if kind == "logical":
                out = (x.view(udt) >> s).view(x.dtype) if x.dtype.kind == "i" else (x >> s)
                return np.where(big, np.zeros_like(x), out).astype(x.dtype)
            sdt = np.dtype(f"i{x.dtype.itemsize}")
            xs = x.view(sdt) if x.dtype.kind == "u" else x
            out = xs >> np.where(big, bits - 1, s).astype(sdt)
            return out.view(x.dtype) if x.dtype.kind == "u" else out.astype(x.dtype)

    impl.__name__ = f"shift_{kind}"
    return impl


shift_left_p = binop("shift_left", INT, _shift_impl("left"))
shift_right_logical_p = binop("shift_right_logical", INT, _shift_impl("logical"))
shift_right_arithmetic_p = binop("shift_right_arithmetic", INT, _shift_impl("arithmetic"))


def _popcount_impl(x):
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return np.bitwise_count(u).astype(x.dtype)


population_count_p = unop("population_count", INT, _popcount_impl)

# ---------------------------------------------------------------- identity-like
stop_gradient_p = unop("stop_gradient", ANY, lambda x: x)
copy_p = unop("copy", ANY, np.copy)

BOOL_OR_FLOAT = BOOL | FLOAT  # re-exported for lax helpers that check classes
del _ERR
