"""Lowering of the elementwise primitives (arithmetic, math, comparison, bitwise).

Elementwise primitives accept rank-0 operands beside arrays (the only place a
primitive is not strictly shape-matched), so every rule first broadcasts its
operands to the result shape.  Functions StableHLO lacks but jax's CHLO
dialect provides (``chlo.erf_inv``, ``chlo.lgamma``, ...) are emitted as CHLO
ops, which XLA expands during compilation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.prims import elementwise as E
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering


def _operands(ctx: LoweringContext, xs) -> list[str]:
    out = ctx.avals_out[0]
    shape = out.shape
    res = []
    for x, a in zip(xs, ctx.avals_in):
        b = ctx.broadcast(x, a, shape)
        # A rank-0 operand broadcast for a typed result is laid out as the result (as JAX's is).
        res.append(ctx.module._typed(ctx.fn, b, out) if b is not x and out.typed_sharding is not None else b)
    return res


def _simple(prim, op: str) -> None:
    def rule(ctx: LoweringContext, *xs, **params):
        return ctx.emit1(op, _operands(ctx, xs))

    rule.__name__ = f"_lower_{prim.name}"
    register_lowering(prim)(rule)


for _prim, _op in [
    (E.add_p, "stablehlo.add"), (E.sub_p, "stablehlo.subtract"), (E.mul_p, "stablehlo.multiply"),
    (E.neg_p, "stablehlo.negate"), (E.div_p, "stablehlo.divide"), (E.rem_p, "stablehlo.remainder"), (E.abs_p, "stablehlo.abs"),
(E.exp_p, "stablehlo.exponential"), (E.log_p, "stablehlo.log"),
    (E.log1p_p, "stablehlo.log_plus_one"), (E.expm1_p, "stablehlo.exponential_minus_one"),
    (E.sqrt_p, "stablehlo.sqrt"), (E.rsqrt_p, "stablehlo.rsqrt"), (E.cbrt_p, "stablehlo.cbrt"),
    (E.tanh_p, "stablehlo.tanh"), (E.logistic_p, "stablehlo.logistic"), (E.sin_p, "stablehlo.sine"),
    (E.cos_p, "stablehlo.cosine"), (E.tan_p, "chlo.tan"),
    (E.acos_p, "chlo.acos"), (E.atan_p, "chlo.atan"), (E.sinh_p, "chlo.sinh"), (E.cosh_p, "chlo.cosh"),
    (E.asinh_p, "chlo.asinh"), (E.acosh_p, "chlo.acosh"), (E.atanh_p, "chlo.atanh"),
    (E.atan2_p, "stablehlo.atan2"), (E.nextafter_p, "chlo.next_after"), (E.erf_p, "chlo.erf"),
    (E.erfc_p, "chlo.erfc"), (E.erf_inv_p, "chlo.erf_inv"),
    (E.floor_p, "stablehlo.floor"), (E.ceil_p, "stablehlo.ceil"),
    (E.is_finite_p, "stablehlo.is_finite"), (E.real_p, "stablehlo.real"), (E.imag_p, "stablehlo.imag"),
    (E.complex_p, "stablehlo.complex"), (E.and_p, "stablehlo.and"), (E.or_p, "stablehlo.or"),
    (E.xor_p, "stablehlo.xor"), (E.not_p, "stablehlo.not"), (E.shift_left_p, "stablehlo.shift_left"),
    (E.shift_right_logical_p, "stablehlo.shift_right_logical"),
    (E.shift_right_arithmetic_p, "stablehlo.shift_right_arithmetic"),
    (E.population_count_p, "stablehlo.popcnt"), (E.clz_p, "stablehlo.count_leading_zeros"), (E.pow_p, "stablehlo.power"),
]:
    _simple(_prim, _op)


@register_lowering(E.pow_p)
def _pow(ctx: LoweringContext, x, y):
    xa, ya = ctx.avals_in
    shape = ctx.avals_out[0].shape
    x = ctx.broadcast(x, xa, shape)
    y = ctx.broadcast(y, ya, shape)
    if ya.dtype != xa.dtype:  # an integer exponent: XLA's power wants one dtype
        y = ctx.convert(y, ya.update(shape=shape), xa.dtype)
    return ctx.emit1("stablehlo.power", [x, y])


def _minmax(prim, op: str, direction: str) -> None:
    """max/min; complex operands are ordered lexicographically (real, then imaginary), as in NumPy and jax."""

    def rule(ctx: LoweringContext, x, y):
        x, y = _operands(ctx, (x, y))
        out = ctx.avals_out[0]
        if out.dtype.kind != "c":
            return ctx.emit1(op, [x, y])
        part = dtypes.float64 if out.dtype == dtypes.complex128 else dtypes.float32
        pt = mt.tensor_type(out.shape, part)
        bt = mt.tensor_type(out.shape, dtypes.bool_)

        def cmp(a, b, d):
            return ctx.compare(a, b, d, part, out.shape)

        xr, yr = ctx.emit1("stablehlo.real", [x], pt), ctx.emit1("stablehlo.real", [y], pt)
        xi, yi = ctx.emit1("stablehlo.imag", [x], pt), ctx.emit1("stablehlo.imag", [y], pt)
        strict = cmp(xr, yr, direction)
        tie = ctx.emit1("stablehlo.and", [cmp(xr, yr, "EQ"), cmp(xi, yi, direction[0] + "E")], bt)
        pick_x = ctx.emit1("stablehlo.or", [strict, tie], bt)
        return ctx.emit1("stablehlo.select", [pick_x, x, y])

    register_lowering(prim)(rule)


_minmax(E.max_p, "stablehlo.maximum", "GT")
_minmax(E.min_p, "stablehlo.minimum", "LT")


@register_lowering(E.digamma_p)
def _digamma(ctx: LoweringContext, x):
    """``chlo.digamma`` with digamma(+-0) = -inf, as jax 0.11's XLA gives (jax 0.10's gave NaN there), so a
    compiled program gives the same value whichever jaxlib compiles it (the eager impl gives -inf too)."""
    (x,) = _operands(ctx, (x,))
    out = ctx.avals_out[0]
    y = ctx.emit1("chlo.digamma", [x])
    zero, ninf = (ctx.broadcast(ctx.scalar(v, out.dtype), out.update(shape=()), out.shape) for v in (0, -np.inf))
    if out.shape and out.typed_sharding is not None:
        zero, ninf = (ctx.module._typed(ctx.fn, c, out) for c in (zero, ninf))
    at_zero = ctx.compare(x, zero, "EQ", out.dtype, out.shape)
    return ctx.emit1("stablehlo.select", [at_zero, ninf, y])


@register_lowering(E.lgamma_p)
def _lgamma(ctx: LoweringContext, x):
    """``chlo.lgamma``, with lgamma(x) = -log|x| at float32/float64 subnormals ``x`` (103.27893 at 1e-45).

    XLA's code flushes subnormal operands to zero, so ``chlo.lgamma`` gives lgamma(0) = inf there while the
    eager path (NumPy) and jax 0.12's lgamma give the finite value. The subnormal is read from its bits
    (``|x| = m * 2**(minexp - nmant)`` with the integer ``m`` < 2**nmant), which no flushing touches:
    ``-log|x| = (nmant - minexp) log 2 - log m`` (the next term, ``-euler_gamma x``, is below an ulp).
    """
    (x,) = _operands(ctx, (x,))
    out = ctx.avals_out[0]
    y = ctx.emit1("chlo.lgamma", [x])
    if out.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return y
    info = np.finfo(out.dtype)
    idt = np.dtype(np.int32 if out.dtype.itemsize == 4 else np.int64)
    ishape = out.update(shape=(), dtype=idt)

    def const(v, dt, aval):
        c = ctx.broadcast(ctx.scalar(v, dt), aval.update(shape=()), out.shape)
        return ctx.module._typed(ctx.fn, c, aval.update(shape=out.shape)) if (
            out.shape and out.typed_sharding is not None) else c

    itype = mt.tensor_type(out.shape, idt)
    mag = ctx.emit1("stablehlo.and", [ctx.emit1("stablehlo.bitcast_convert", [x], itype),
                                      const(np.iinfo(idt).max, idt, ishape)], itype)
    sub = ctx.emit1("stablehlo.and", [
        ctx.compare(mag, const(0, idt, ishape), "GT", idt, out.shape),
        ctx.compare(mag, const(1 << int(info.nmant), idt, ishape), "LT", idt, out.shape)],
        mt.tensor_type(out.shape, np.dtype(np.bool_)))
    log_m = ctx.emit1("stablehlo.log", [ctx.emit1("stablehlo.convert", [mag], mt.tensor_type(out.shape, out.dtype))])
    val = ctx.emit1("stablehlo.subtract", [const((int(info.nmant) - int(info.minexp)) * np.log(2.0), out.dtype, out),
                                           log_m])
    return ctx.emit1("stablehlo.select", [sub, val, y])


@register_lowering(E.sign_p)
def _sign(ctx: LoweringContext, x):
    a = ctx.avals_in[0]
    if dtypes.is_unsigned(a.dtype):  # StableHLO's sign takes signless types only: sign(u) = (u != 0)
        zero = ctx.broadcast(ctx.scalar(0, a.dtype), a.update(shape=()), a.shape)
        nz = ctx.compare(x, zero, "NE", a.dtype, a.shape)
        return ctx.emit1("stablehlo.convert", [nz])
    return ctx.emit1("stablehlo.sign", [x])


@register_lowering(E.exp2_p)
def _exp2(ctx: LoweringContext, x):
    a = ctx.avals_in[0]
    ln2 = ctx.broadcast(ctx.scalar(np.log(2.0), a.dtype), a.update(shape=()), a.shape)
    return ctx.emit1("stablehlo.exponential", [ctx.emit1("stablehlo.multiply", [x, ln2])])


@register_lowering(E.round_p)
def _round(ctx: LoweringContext, x, *, rounding_method: int = 0):
    op = "stablehlo.round_nearest_even" if int(rounding_method) == 1 else "stablehlo.round_nearest_afz"
    return ctx.emit1(op, [x])


@register_lowering(E.reduce_precision_p)
def _reduce_precision(ctx: LoweringContext, x, *, exponent_bits: int, mantissa_bits: int):
    return ctx.emit1("stablehlo.reduce_precision", [x], attrs={
        "exponent_bits": f"{int(exponent_bits)} : i32", "mantissa_bits": f"{int(mantissa_bits)} : i32"})


@register_lowering(E.conj_p)
def _conj(ctx: LoweringContext, x):
    a = ctx.avals_in[0]
    out = ctx.avals_out[0]
    part = mt.tensor_type(a.shape, dtypes.float64 if out.dtype == dtypes.complex128 else dtypes.float32)
    if a.dtype.kind == "c":
        re = ctx.emit1("stablehlo.real", [x], part)
        im = ctx.emit1("stablehlo.imag", [x], part)
    else:
        re = x
        im = ctx.broadcast(ctx.scalar(0, a.dtype), a.update(shape=()), a.shape)
    return ctx.emit1("stablehlo.complex", [re, ctx.emit1("stablehlo.negate", [im], part)])


@register_lowering(E.integer_pow_p)
def _integer_pow(ctx: LoweringContext, x, *, y: int):
    a = ctx.avals_in[0]
    if y == 0:
        return ctx.broadcast(ctx.scalar(1, a.dtype), a.update(shape=()), a.shape)
    n = abs(int(y))
    acc = None
    base = x
    while n:  # exponentiation by squaring, as XLA expands it
        if n & 1:
            acc = base if acc is None else ctx.emit1("stablehlo.multiply", [acc, base])
        n >>= 1
        if n:
            base = ctx.emit1("stablehlo.multiply", [base, base])
    if y < 0:
        one = ctx.broadcast(ctx.scalar(1, a.dtype), a.update(shape=()), a.shape)
        acc = ctx.emit1("stablehlo.divide", [one, acc])
    return acc


def _comparison(prim, direction: str) -> None:
    def rule(ctx: LoweringContext, x, y):
        x, y = _operands(ctx, (x, y))
        return ctx.compare(x, y, direction, ctx.avals_in[0].dtype, ctx.avals_out[0].shape)

    register_lowering(prim)(rule)


for _prim, _dir in [(E.eq_p, "EQ"), (E.ne_p, "NE"), (E.lt_p, "LT"), (E.le_p, "LE"), (E.gt_p, "GT"),
                    (E.ge_p, "GE")]:
    _comparison(_prim, _dir)


@register_lowering(E.stop_gradient_p)
def _identity(ctx: LoweringContext, x):
    return x


register_lowering(E.copy_p)(_identity)


# ---------------------------------------------------------------- bessel_i0e, bessel_i1e
#
# StableHLO has no Bessel functions (CHLO has only i1e, and not i0e), so both lower to an ftrans program:
# the power series of I_nu(x) (nu = 0, 1) times exp(-|x|) below a threshold, and the large-argument
# expansion  e^-x I_nu(x) ~ (2 pi x)^-1/2 sum_k (-1)^k a_k(nu) / x^k  above it, with term counts that reach
# the dtype's precision on each side (float32: threshold 15, 40 series / 12 asymptotic terms; float64: 30,
# 90 / 24).  The program is staged once per type and called as a private function.


def _bessel_program(nu: int, aval: Any) -> Any:
    from ftrans.core import building as B
    from ftrans.core.prims import structural as S
    from ftrans.core.trace import stage

    calc = np.dtype(np.float64) if aval.dtype == np.float64 else np.dtype(np.float32)
    wide = calc == np.float64
    threshold, n_series, n_asym = (30.0, 90, 24) if wide else (15.0, 40, 12)

    def const(v: float) -> Any:
        return np.asarray(v, calc)

    def fun(x: Any) -> list:
        xc = B.convert_element_type(x, calc) if x.aval.dtype != calc else x
        ax = E.abs_p.bind(xc)
        small = E.min_p.bind(ax, B.full(aval.shape, threshold, calc))  # keep the unused branch finite
        q = B.mul(B.mul(small, small), const(0.25))
        # Nested (Horner) form, 1 + q/(1(1+nu)) (1 + q/(2(2+nu)) (1 + ...)): every partial value stays
        # moderate, so XLA's reassociation of a running product (q**k / (k!)**2 overflowing to inf * 0)
        # cannot turn a finite sum into NaN.
        total = B.full(aval.shape, 1.0, calc)
        for k in range(n_series - 1, 0, -1):
            total = B.add(const(1.0), B.mul(total, B.div(q, const(float(k * (k + nu))))))
        if nu == 1:
            total = B.mul(total, B.mul(small, const(0.5)))
        series = B.mul(total, E.exp_p.bind(E.neg_p.bind(small)))
        big = E.max_p.bind(ax, B.full(aval.shape, threshold, calc))
        inv = B.div(const(1.0), big)
        acc = B.full(aval.shape, 1.0, calc)
        for k in range(n_asym - 1, 0, -1):
            ratio = ((2 * k - 1) ** 2 - 4 * nu * nu) / (8.0 * k)
            acc = B.add(const(1.0), B.mul(acc, B.mul(inv, const(ratio))))
        # (rsqrt(x) / sqrt(2 pi): 2 pi x overflows for x near the dtype's largest value)
        asym = B.mul(acc, B.mul(E.rsqrt_p.bind(big), const(1 / np.sqrt(2 * np.pi))))
        out = B.select(E.lt_p.bind(ax, B.full(aval.shape, threshold, calc)), series, asym)
        if nu == 1:
            out = B.mul(out, E.sign_p.bind(xc))
        if calc != aval.dtype:
            out = S.convert_element_type_p.bind(out, new_dtype=aval.dtype, weak_type=False)
        return [out]

    closed, _ = stage(fun, [aval.update(weak_type=False)])
    return closed


def _bessel_lowering(nu: int):
    def rule(ctx: LoweringContext, x):
        closed = _bessel_program(nu, ctx.avals_in[0])
        consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
        sym = ctx.module.function(closed.jaxpr, f"bessel_i{nu}e")
        return ctx.fn.emit("func.call", consts + [x], [mt.aval_type(ctx.avals_out[0])], {"callee": f"@{sym}"})[0]

    rule.__name__ = f"_bessel_i{nu}e_lowering"
    return rule


register_lowering(E.bessel_i0e_p)(_bessel_lowering(0))
register_lowering(E.bessel_i1e_p)(_bessel_lowering(1))


@register_lowering(E.square_p)
def _lower_square(ctx: LoweringContext, x):
    return ctx.emit1("stablehlo.multiply", [x, x])


@register_lowering(E.polynomial_p)
def _polynomial(ctx: LoweringContext, x, *coeffs, unroll=None):
    """Horner's rule from the leading coefficient, every term unrolled (JAX scans past ``unroll`` terms,
    starting from zero)."""
    x, *cs = _operands(ctx, (x, *coeffs))
    y = cs[-1]
    for c in reversed(cs[:-1]):
        y = ctx.emit1("stablehlo.add", [ctx.emit1("stablehlo.multiply", [y, x]), c])
    return y


@register_lowering(E.asin_p)
def _asin(ctx: LoweringContext, x):
    """jax 0.12's: a real ``asin(x)`` is ``atan2(x, sqrt((1 - x)(1 + x)))`` (correctly rounded where XLA's
    CPU ``chlo.asin`` expansion is an ulp off, as near 1); complex operands, and GPUs (as jax 0.12 does),
    keep ``chlo.asin``."""
    (a,) = ctx.avals_in
    if a.dtype.kind == "c" or ctx.platform in ("cuda", "rocm", "gpu"):
        return ctx.emit1("chlo.asin", [x])
    one = ctx.broadcast(ctx.scalar(1, a.dtype), a.update(shape=()), a.shape)
    root = ctx.emit1("stablehlo.sqrt", [ctx.emit1("stablehlo.multiply", [
        ctx.emit1("stablehlo.subtract", [one, x]), ctx.emit1("stablehlo.add", [one, x])])])
    return ctx.emit1("stablehlo.atan2", [x, root])
