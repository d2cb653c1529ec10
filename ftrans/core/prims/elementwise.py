"""Elementwise primitives: arithmetic, math functions, comparisons, logic, bits.

The NumPy rules reproduce XLA's semantics where NumPy's differ: integer
division truncates toward zero and division by zero gives -1 (or all ones for
unsigned), remainder takes the dividend's sign, shifts by the bit width or
more give 0 (or the sign fill), rounding can be half-away-from-zero.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import scipy.special as sps

from ftrans.core import dtypes
from ftrans.core.prims._base import (
    ANY,
    ANY_OR_KEY,
    COMPLEX,
    FLOAT,
    INEXACT,
    INT,
    INT_OR_BOOL,
    NARROW_INT,
    NUM,
    SIGNED_NUM,
    binop,
    elementwise_dtype,
    elementwise_shape,
    keep_dtype,
    prim_type_error,
    quiet,
    standard_primitive,
    unop,
    via_float32,
)

# ---------------------------------------------------------------- arithmetic
add_p = binop("add", NUM, np.add)
sub_p = binop("sub", NUM, np.subtract)
mul_p = binop("mul", NUM, np.multiply)
neg_p = unop("neg", NUM, np.negative)


def _complex_order(x, y, *, greater: bool):
    """XLA orders complex numbers lexicographically (real part, then imaginary)."""
    xr, yr, xi, yi = x.real, y.real, x.imag, y.imag
    if greater:
        pick_x = (xr > yr) | ((xr == yr) & (xi > yi))
    else:
        pick_x = (xr < yr) | ((xr == yr) & (xi < yi))
    return np.where(pick_x, x, y).astype(x.dtype, copy=False)


def _max_impl(x, y):
    if x.dtype.kind == "c":
        return _complex_order(x, y, greater=True)
    return np.maximum(x, y)


def _min_impl(x, y):
    if x.dtype.kind == "c":
        return _complex_order(x, y, greater=False)
    return np.minimum(x, y)


max_p = binop("max", ANY, _max_impl)
min_p = binop("min", ANY, _min_impl)


def _int_div(x, y):
    zero = y == 0
    safe_y = np.where(zero, np.ones_like(y), y)
    if x.dtype.kind == "i":
        # Rounded toward zero, as C and XLA divide: x - fmod(x, y) is a multiple of y between 0 and x (no
        # overflow), so the floor division of it is exact. (abs() is not: abs(-128) is -128 in int8.)
        q = np.floor_divide(x - np.fmod(x, safe_y), safe_y)
    else:
        q = x // safe_y
    fill = np.array(-1).astype(x.dtype) if x.dtype.kind == "i" else np.iinfo(x.dtype).max
    return np.where(zero, fill, q).astype(x.dtype)


@quiet
def _div_impl(x, y):
    if x.dtype.kind in "iu":
        return _int_div(x, y)
    return np.true_divide(x, y).astype(x.dtype, copy=False)


@quiet
def _rem_impl(x, y):
    if x.dtype.kind in "iu":
        zero = y == 0
        if not zero.any():  # (no zero divisor: the masks below change nothing)
            return np.fmod(x, y).astype(x.dtype, copy=False)
        safe_y = np.where(zero, np.ones_like(y), y)
        return np.where(zero, x, np.fmod(x, safe_y)).astype(x.dtype)
    return np.fmod(x, y).astype(x.dtype, copy=False)


div_p = binop("div", NUM, _div_impl)
rem_p = binop("rem", INT | FLOAT, _rem_impl)


def _pow_dtype(x, y):
    """``pow`` takes an inexact base and an exponent of the same dtype or any integer dtype."""
    if x.dtype not in INEXACT:
        raise prim_type_error("pow", [x, y], "the base must be floating-point or complex")
    if y.dtype != x.dtype and y.dtype not in INT:
        raise prim_type_error(
            "pow", [x, y], "the exponent must have the base's dtype or an integer dtype",
        )
    return x.dtype


@quiet
def _pow_impl(x, y):
    if y.dtype != x.dtype:
        # XLA converts an integer exponent to the base's type first.
        y = y.astype(x.dtype)
    if x.dtype in (dtypes.bfloat16, dtypes.float16):
        return np.power(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype)
    out = np.asarray(np.power(x, y)).astype(x.dtype, copy=False)
    if x.dtype.kind == "f":
        # C99 (and XLA): (-inf) ** y is +inf for y > 0 and +0 for y < 0 unless y is an odd
        # integer; NumPy's float32/float16 loops give NaN for non-integer y.
        nan = np.isnan(out)
        if nan.any():
            fix = nan & np.isneginf(x) & ~np.isnan(y)
            if fix.any():
                out = np.where(fix, np.where(y > 0, np.asarray(np.inf, x.dtype), np.asarray(0, x.dtype)), out)
    if x.dtype.kind == "c":
        # XLA: 0 ** y is NaN unless y is real and non-negative (NumPy gives 0).
        bad = (x == 0) & ((y.imag != 0) | (y.real < 0))
        if bad.any():
            out = np.where(bad, np.asarray(complex(np.nan, np.nan), x.dtype), out)
    return out


pow_p = standard_primitive("pow", elementwise_shape("pow"), _pow_dtype, _pow_impl)


def _abs_impl(x):
    out = np.abs(x)
    return out


abs_p = unop("abs", SIGNED_NUM - NARROW_INT, _abs_impl, result="real")


@quiet
def _sign_impl(x):
    if x.dtype.kind == "c":
        a = np.abs(x)
        return np.where(a == 0, 0, x / np.where(a == 0, 1, a)).astype(x.dtype)
    return np.sign(x).astype(x.dtype, copy=False)


sign_p = unop("sign", NUM, _sign_impl)


@quiet
def _integer_pow_impl(x, *, y: int):
    if y == 0:
        return np.ones_like(x)
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


def _integer_pow_dtype(x, *, y):
    if x.dtype not in NUM:
        raise prim_type_error("integer_pow", [x], "expects numeric operands")
    if not isinstance(y, (int, np.integer)) or isinstance(y, bool):
        raise prim_type_error("integer_pow", [x], f"the exponent y must be a Python int, got {y!r}")
    if y < 0 and x.dtype in INT:
        raise prim_type_error(
            "integer_pow", [x], f"integers cannot be raised to negative powers (y={y}); "
            "convert the base to a floating-point dtype first",
        )
    return x.dtype


integer_pow_p = standard_primitive(
    "integer_pow", elementwise_shape("integer_pow"), _integer_pow_dtype, _integer_pow_impl,
)

# ---------------------------------------------------------------- float math
_WIDER = {dtypes.float32: dtypes.float64, dtypes.complex64: dtypes.complex128}


def _rounded(fn):
    """``fn`` of single-precision operands computed in double and rounded once: NumPy's float32 ``exp``
    and ``expm1`` loops are up to an ulp off the correctly rounded value XLA gives (so ``exp(x)`` and
    ``expm1(x) + 1`` would disagree by an ulp where JAX's agree)."""
    def impl(x):
        wide = _WIDER.get(x.dtype)
        if wide is None:
            return fn(x)
        return fn(x.astype(wide)).astype(x.dtype)

    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def _log1p(x):
    """NumPy's complex ``log1p`` is ``log(1 + z)``, which loses every digit of a small ``z``; this is
    ``log|1 + z| + i arg(1 + z)`` with the modulus from ``log1p`` of ``2 re + |z|^2``."""
    if x.dtype.kind != "c":
        return np.log1p(x)
    re, im = x.real, x.imag
    big = np.abs(x) > 0.5  # far from -1's neighbourhood of 0 the plain formula is exact enough
    with np.errstate(all="ignore"):
        small = 0.5 * np.log1p(2 * re + re * re + im * im) + 1j * np.arctan2(im, 1 + re)
        out = np.where(big, np.log1p(x), small)
    return out.astype(x.dtype)


exp_p = unop("exp", INEXACT, keep_dtype(_rounded(np.exp)))
exp2_p = unop("exp2", INEXACT, keep_dtype(np.exp2))
log_p = unop("log", INEXACT, keep_dtype(np.log))
log1p_p = unop("log1p", INEXACT, keep_dtype(_rounded(_log1p)))


@quiet
def _expm1_complex(z):
    """XLA's complex expm1 at the edges, which NumPy's (exp(z) - 1) does not reproduce.

    exp(x + iy) - 1 is split as expm1(x)·cos(y) - 2·sin²(y/2) + i·exp(x)·sin(y)
    so that small arguments keep their digits; a zero imaginary part gives a
    real result with +0 imaginary part (never exp(x)·0, which is NaN at x=inf),
    and zeros come out unsigned, as XLA's do.
    """
    x, y = z.real, z.imag
    em1 = np.expm1(x)
    half = np.sin(y * y.dtype.type(0.5))
    re = np.where(y == 0, em1, em1 * np.cos(y) - 2 * half * half) + 0.0
    im = np.where(y == 0, 0, np.exp(x) * np.sin(y))
    out = np.empty(z.shape, z.dtype)
    out.real = re
    out.imag = im
    return out


_expm1_real = _rounded(np.expm1)


def _expm1_impl(x):
    if x.dtype.kind == "c":  # in its own precision: widening would keep signs of zeros float32 loses
        return _expm1_complex(x)
    return _expm1_real(x)


expm1_p = unop("expm1", INEXACT, keep_dtype(_expm1_impl))
sqrt_p = unop("sqrt", INEXACT, keep_dtype(np.sqrt))
rsqrt_p = unop("rsqrt", INEXACT, keep_dtype(lambda x: 1 / np.sqrt(x)))
cbrt_p = unop("cbrt", FLOAT, via_float32(np.cbrt))


_expit = via_float32(sps.expit)


@quiet
def _logistic_complex(x):
    return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)


def _logistic_impl(x):
    if x.dtype.kind == "c":
        return _logistic_complex(x)
    return _expit(x)


tanh_p = unop("tanh", INEXACT, keep_dtype(np.tanh))
logistic_p = unop("logistic", INEXACT, _logistic_impl)
sin_p = unop("sin", INEXACT, keep_dtype(np.sin))
cos_p = unop("cos", INEXACT, keep_dtype(np.cos))
tan_p = unop("tan", INEXACT, keep_dtype(np.tan))
asin_p = unop("asin", INEXACT, keep_dtype(np.arcsin))
acos_p = unop("acos", INEXACT, keep_dtype(np.arccos))
atan_p = unop("atan", INEXACT, keep_dtype(np.arctan))
sinh_p = unop("sinh", INEXACT, keep_dtype(np.sinh))
cosh_p = unop("cosh", INEXACT, keep_dtype(np.cosh))
asinh_p = unop("asinh", INEXACT, keep_dtype(np.arcsinh))
acosh_p = unop("acosh", INEXACT, keep_dtype(np.arccosh))
atanh_p = unop("atanh", INEXACT, keep_dtype(np.arctanh))


_arctan2 = keep_dtype(np.arctan2)


@quiet
def _atan2_impl(x, y):
    if x.dtype.kind == "c":
        # atan2 of complex arguments: -i log((y + i x) / sqrt(x^2 + y^2)).
        return (-1j * np.log((y + 1j * x) / np.sqrt(y * y + x * x))).astype(x.dtype)
    return _arctan2(x, y)


atan2_p = binop("atan2", INEXACT, _atan2_impl)
# NumPy's nextafter has native float16 and bfloat16 loops; going through float32
# would step by a float32 ulp and round back to the input.
nextafter_p = binop("nextafter", FLOAT, keep_dtype(np.nextafter))
erf_p = unop("erf", FLOAT, via_float32(sps.erf))
erfc_p = unop("erfc", FLOAT, via_float32(sps.erfc))
erf_inv_p = unop("erf_inv", FLOAT, via_float32(sps.erfinv))


def _gammaln_c99(x: np.ndarray) -> np.ndarray:
    """SciPy's ``gammaln`` with C99's (and XLA's) lgamma(-inf) = +inf (SciPy gives -inf).

    Only ``x = -inf`` is mended: ``log|Gamma|`` is well below zero for many negative non-integers
    (``lgamma(-4.7) = -2.93``), so the sign of the result says nothing about where it came from.
    """
    y = sps.gammaln(x)
    if y.ndim:
        np.negative(y, out=y, where=np.isneginf(x))
        return y
    return -y if np.isneginf(x) else y


lgamma_p = unop("lgamma", FLOAT, via_float32(_gammaln_c99))


def _digamma_impl(x):
    """SciPy's psi, except that psi(+-0) is -inf (the limit from the right), as jax 0.11's XLA gives and
    ftrans's lowering gives under any jaxlib (jax 0.10's XLA gave NaN; SciPy gives +inf at -0)."""
    out = sps.psi(x)
    return np.where(x == 0, np.asarray(-np.inf, out.dtype), out)


digamma_p = unop("digamma", FLOAT, via_float32(_digamma_impl))
floor_p = unop("floor", FLOAT, keep_dtype(np.floor))
ceil_p = unop("ceil", FLOAT, keep_dtype(np.ceil))


def _round_impl(x, *, rounding_method: int = 0):
    if int(rounding_method) == 1:  # to nearest, ties to even
        return np.rint(x).astype(x.dtype, copy=False)
    # Ties away from zero, exactly: x - trunc(x) is exact in floating point, so
    # no value just below one half is pushed over it (as x + 0.5 would be).
    return _round_away(x)


@quiet
def _round_away(x):
    t = np.trunc(x)
    frac = np.abs(x - t)
    return np.where(frac >= 0.5, t + np.sign(x), t).astype(x.dtype, copy=False)


def _round_params(x, *, rounding_method: int = 0):
    if int(rounding_method) not in (0, 1):
        raise prim_type_error(
            "round", [x], f"rounding_method must be RoundingMethod.AWAY_FROM_ZERO (0) or "
            f"TO_NEAREST_EVEN (1), got {rounding_method!r}",
        )
    return elementwise_dtype("round", FLOAT)(x)


round_p = standard_primitive("round", elementwise_shape("round"), _round_params, _round_impl)
is_finite_p = unop("is_finite", FLOAT, np.isfinite, result="bool")


# ---------------------------------------------------------------- exponentially scaled Bessel functions
bessel_i0e_p = unop("bessel_i0e", FLOAT, via_float32(sps.i0e))
bessel_i1e_p = unop("bessel_i1e", FLOAT, via_float32(sps.i1e))


# ---------------------------------------------------------------- reduce_precision
def _float_layout(d: np.dtype) -> tuple[int, int, np.dtype]:
    """(exponent bits, mantissa bits, unsigned integer type of the same width) of a float dtype."""
    info = ml_dtypes.finfo(d)
    return int(info.nexp), int(info.nmant), np.dtype(f"uint{np.dtype(d).itemsize * 8}")


@quiet
def _reduce_precision_impl(x, *, exponent_bits: int, mantissa_bits: int):
    """XLA's ReducePrecision on the bits: round the mantissa to nearest even, then flush exponents out of the
    smaller range to signed zero / infinity; NaN stays NaN."""
    d = x.dtype
    src_e, src_m, ut = _float_layout(d)
    nbits = ut.itemsize * 8
    bits = np.ascontiguousarray(x).view(ut).copy()
    one = ut.type(1)
    if mantissa_bits < src_m:
        shift = src_m - mantissa_bits
        last = ut.type(1 << shift)
        bias = ut.type((1 << (shift - 1)) - 1)
        last_bit = (bits & last) >> ut.type(shift)
        bits = (bits + last_bit + bias) & ~ut.type((1 << shift) - 1)
    if exponent_bits < src_e:
        exp_mask = ut.type(((1 << src_e) - 1) << src_m)
        sign_mask = ut.type(one << ut.type(nbits - 1))
        bias = (1 << (src_e - 1)) - 1
        reduced = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        over = exponent > ut.type((bias + reduced) << src_m)
        under = exponent <= ut.type((bias - reduced) << src_m)
        signed_zero = bits & sign_mask
        bits = np.where(over, signed_zero | exp_mask, np.where(under, signed_zero, bits)).astype(ut)
    out = bits.view(d).reshape(x.shape)
    return np.where(np.isnan(x), x, out).astype(d)


def _reduce_precision_dtype(x, *, exponent_bits, mantissa_bits):
    d = elementwise_dtype("reduce_precision", FLOAT)(x)
    if not (isinstance(exponent_bits, (int, np.integer)) and exponent_bits >= 1):
        raise prim_type_error("reduce_precision", [x], f"exponent_bits must be an int >= 1, got {exponent_bits!r}")
    if not (isinstance(mantissa_bits, (int, np.integer)) and mantissa_bits >= 0):
        raise prim_type_error("reduce_precision", [x], f"mantissa_bits must be an int >= 0, got {mantissa_bits!r}")
    return d


reduce_precision_p = standard_primitive(
    "reduce_precision", elementwise_shape("reduce_precision"), _reduce_precision_dtype, _reduce_precision_impl,
)

# ---------------------------------------------------------------- complex
real_p = unop("real", COMPLEX, np.real, result="real")
imag_p = unop("imag", COMPLEX, np.imag, result="real")


def _conj_dtype(x):
    """conj also takes float32/float64 (as XLA's does) and then returns the complex type."""
    if x.dtype not in _COMPLEX_PARTS and x.dtype not in COMPLEX:
        raise prim_type_error("conj", [x], "expects float32, float64 or complex operands")
    return _COMPLEX_PARTS.get(x.dtype, x.dtype)


def _conj_impl(x):
    return np.conj(x.astype(_COMPLEX_PARTS.get(x.dtype, x.dtype), copy=False))


_COMPLEX_PARTS = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
conj_p = standard_primitive("conj", elementwise_shape("conj"), _conj_dtype, _conj_impl)


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


def _compare(fn):
    """A NumPy comparison, quiet (ml_dtypes warns about NaN in bfloat16 comparisons, XLA does not)."""
    return quiet(fn)


eq_p = binop("eq", ANY, _compare(np.equal), result="bool")
ne_p = binop("ne", ANY, _compare(np.not_equal), result="bool")
lt_p = binop("lt", ANY - COMPLEX, _compare(np.less), result="bool")
le_p = binop("le", ANY - COMPLEX, _compare(np.less_equal), result="bool")
gt_p = binop("gt", ANY - COMPLEX, _compare(np.greater), result="bool")
ge_p = binop("ge", ANY - COMPLEX, _compare(np.greater_equal), result="bool")

# ---------------------------------------------------------------- logic and bits
and_p = binop("and", INT_OR_BOOL, np.bitwise_and)
or_p = binop("or", INT_OR_BOOL, np.bitwise_or)
xor_p = binop("xor", INT_OR_BOOL, np.bitwise_xor)
not_p = unop("not", INT_OR_BOOL, np.invert)


def _narrow_shift(kind: str, x, y):
    """Shifts of the 2/4-bit integers on their bit patterns, in int16."""
    bits = dtypes.iinfo(x.dtype).bits
    mask = (1 << bits) - 1
    xi = x.astype(np.int16)
    amount = y.astype(np.int16) & mask
    big = amount >= bits
    s = np.where(big, 0, amount)
    if kind == "left":
        r = np.where(big, 0, (xi & mask) << s)
    elif kind == "logical":
        r = np.where(big, 0, (xi & mask) >> s)
    else:  # the bit pattern read as signed, unsigned types included
        sign = 1 << (bits - 1)
        xs = ((xi & mask) ^ sign) - sign
        r = np.where(big, np.where(xs < 0, -1, 0), xs >> s)
    return (r & mask).astype(x.dtype)


def _shift_impl(kind: str):
    def impl(x, y):
        if x.dtype in NARROW_INT:
            return _narrow_shift(kind, x, y)
        bits = x.dtype.itemsize * 8
        udt = np.dtype(f"u{x.dtype.itemsize}")
        if y.ndim == 0 and 0 <= (s := int(y)) < bits:
            # One amount within range (``frexp``'s field extraction): the branch the masks below take
            # everywhere, without them.
            if kind == "left":
                return (x.view(udt) << udt.type(s)).view(x.dtype)
            if kind == "logical":
                return (x.view(udt) >> udt.type(s)).view(x.dtype)
            sdt = np.dtype(f"i{x.dtype.itemsize}")
            return (x.view(sdt) >> sdt.type(s)).view(x.dtype)
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
    return quiet(impl)


shift_left_p = binop("shift_left", INT, _shift_impl("left"), narrow_native=True)
shift_right_logical_p = binop("shift_right_logical", INT, _shift_impl("logical"), narrow_native=True)
shift_right_arithmetic_p = binop("shift_right_arithmetic", INT, _shift_impl("arithmetic"), narrow_native=True)


def _popcount_impl(x):
    if x.dtype in NARROW_INT:
        # As XLA counts them (jax 0.10 to 0.12; so jax's eager results too): a signed 4-bit value's bits
        # sign-extended to 8 (int4 -8 has 5), a 2-bit or unsigned value's own bits; the count is wrapped back
        # into the narrow type (int4 -1: 8 -> -8; int2 -1: 2 -> -2).
        bits = dtypes.iinfo(x.dtype).bits
        if dtypes.iinfo(x.dtype).min < 0 and bits == 4:
            pattern = x.astype(np.int8).view(np.uint8)
        else:
            pattern = (x.astype(np.int16) & ((1 << bits) - 1)).astype(np.uint16)
        return np.bitwise_count(pattern).astype(np.int8).astype(x.dtype)
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    return np.bitwise_count(u).astype(x.dtype)


population_count_p = unop("population_count", INT, _popcount_impl, narrow_native=True)

# ---------------------------------------------------------------- identity-like
stop_gradient_p = unop("stop_gradient", ANY, lambda x: x)
copy_p = unop("copy", ANY_OR_KEY, np.copy)  # a copy of a key array is one too (key_reuse: a forward)


# ---------------------------------------------------------------- square, clz (JAX's square_p and clz_p)

square_p = unop("square", NUM, np.square)


def _clz_impl(x):
    bits = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    out = np.full(x.shape, bits, u.dtype)
    v = u.copy()
    n = np.zeros(x.shape, u.dtype)
    for shift in (32, 16, 8, 4, 2, 1):
        if shift >= bits:
            continue
        move = v >= (u.dtype.type(1) << u.dtype.type(shift))
        n = np.where(move, n + u.dtype.type(shift), n)
        v = np.where(move, v >> u.dtype.type(shift), v)
    out = np.where(u == 0, out, (bits - 1) - n).astype(u.dtype)
    return out.view(x.dtype)


clz_p = unop("clz", INT - NARROW_INT, _clz_impl)


# ---------------------------------------------------------------- polynomial (JAX 0.12's polynomial_p)
# Operands ``(x, a_0, a_1, ..., a_N)`` with N >= 1, one dtype, each of the result's shape or rank 0:
# ``a_0 + x (a_1 + x (... + x a_N))`` by Horner's rule from the leading coefficient (so an infinite ``x`` gives
# the polynomial's infinity, where a recurrence started from zero would give ``0 * inf``).  The optional
# ``unroll`` param is JAX's bound on the unrolled terms of its lowering; ftrans unrolls every term.


@quiet
def _polynomial_impl(x, *coeffs, unroll=None):
    y = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        y = np.add(np.multiply(y, x), c)
    return np.asarray(y).astype(x.dtype, copy=False)


polynomial_p = binop("polynomial", NUM, _polynomial_impl)


# ----------------------------------------------------------------------------
# Sharding rules of the elementwise primitives not made by unop/binop (core/sharding_rules.py)

from ftrans.core import sharding_rules as _sr  # noqa: E402

for _p in (pow_p, integer_pow_p, round_p, reduce_precision_p, conj_p):
    _p.sharding_rule = _sr.elementwise(_p.name)
del _p
