"""JVP rules of the elementwise primitives (``ftrans/core/prims/elementwise.py``).

Derivatives follow JAX's conventions, including the non-obvious ones: ``max``
and ``min`` split the tangent evenly between tied operands, ``sign``, ``floor``,
``ceil``, ``round``, comparisons and bit operations have zero derivative, and
complex functions are differentiated as holomorphic functions (``abs``,
``real``, ``imag``, ``conj`` and ``complex`` are linear over the reals).
"""

from __future__ import annotations

import math
from typing import Any

from ftrans.core import building as B
from ftrans.core import dtypes
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import (
    Zero,
    add_tangents,
    broadcast_to,
    defjvp_linear,
    defjvp_zero,
    jvp_rules,
    register_jvp,
    zeros_like_aval,
)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(x).shape)


def _scale(t: Any, coef: Any) -> Any:
    """``t * coef`` keeping symbolic zeros symbolic (and broadcasting a rank-0 ``t``)."""
    if type(t) is Zero:
        return Zero(t.aval.update(shape=_shape(coef)) if t.aval.shape == () else t.aval)
    return B.mul(t, coef)


def _unary(prim, deriv):
    """A rule for ``y = f(x)`` with ``dy = t * deriv(x, y)``."""

    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        y = prim.bind(x, **params)
        if type(t) is Zero:
            return y, Zero.from_primal_value(y)
        return y, B.mul(t, deriv(x, y))

    rule.__name__ = f"{prim.name}_jvp"
    return rule


def _unary_t(prim, tangent):
    """A rule for ``y = f(x)`` with ``dy = tangent(t, x, y)``: for derivatives JAX writes as a division
    of the tangent (``t / x`` for log), which differs from ``t * (1/x)`` where ``1/x`` is subnormal
    (XLA flushes it to 0: ``log``'s derivative at 3e38)."""

    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        y = prim.bind(x, **params)
        if type(t) is Zero:
            return y, Zero.from_primal_value(y)
        return y, tangent(t, x, y)

    rule.__name__ = f"{prim.name}_jvp"
    return rule


def _binary(prim, dx, dy):
    """A rule for ``z = f(x, y)`` with ``dz = dx(tx, x, y, z) + dy(ty, x, y, z)``; zero terms are skipped."""

    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        x, y = primals
        tx, ty = tangents
        z = prim.bind(x, y, **params)
        shape = _shape(z)
        a = Zero.from_primal_value(z) if type(tx) is Zero else broadcast_to(dx(tx, x, y, z), shape)
        b = Zero.from_primal_value(z) if type(ty) is Zero else broadcast_to(dy(ty, x, y, z), shape)
        return z, _sum(a, b, z)

    rule.__name__ = f"{prim.name}_jvp"
    return rule


def _sum(a: Any, b: Any, out: Any) -> Any:
    if type(a) is Zero and type(b) is Zero:
        return Zero.from_primal_value(out)
    return add_tangents(a, b)


def _as_bool_factor(pred: Any, like: Any) -> Any:
    """1 where ``pred`` holds, else 0, in ``like``'s dtype, weakly typed when ``like`` is (JAX builds these
    factors with ``full_like``, so ``grad(jnp.maximum)(1.0, 1.0)`` is weak as its operands are)."""
    a = aval_of(like)
    if not getattr(a, "weak_type", False):
        return B.convert_element_type(pred, a.dtype)
    return S.convert_element_type_p.bind(pred, new_dtype=a.dtype, weak_type=True)


def _replace_zero(x: Any) -> Any:
    """``x`` with zeros replaced by ones (keeps a derivative formula finite where it is multiplied by 0)."""
    return B.add(x, _as_bool_factor(B.eq(x, 0), x))


def _square(x: Any) -> Any:
    return B.integer_pow(x, 2)


# ---------------------------------------------------------------- arithmetic
_binary(E.add_p, lambda t, x, y, z: t, lambda t, x, y, z: t)
_binary(E.sub_p, lambda t, x, y, z: t, lambda t, x, y, z: B.neg(t))
_binary(E.mul_p, lambda t, x, y, z: B.mul(t, y), lambda t, x, y, z: B.mul(x, t))
_binary(E.div_p, lambda t, x, y, z: B.div(t, y),
        lambda t, x, y, z: B.mul(B.mul(B.neg(t), x), B.integer_pow(y, -2)))


def _rem_dy(t: Any, x: Any, y: Any, z: Any) -> Any:
    """d/dy fmod(x, y) = -trunc(x / y), written as JAX writes it: sign(x/y) * floor(|x/y|)."""
    q = B.div(x, y)
    return B.mul(B.neg(t), B.mul(B.apply(E.sign_p, q), B.apply(E.floor_p, B.apply(E.abs_p, q))))


_binary(E.rem_p, lambda t, x, y, z: t, _rem_dy)


def _balanced_eq(a: Any, z: Any, b: Any) -> Any:
    """JAX's tie rule for max/min: 1 where only ``a`` attains ``z``, 1/2 where both do, else 0."""
    return B.div(_as_bool_factor(B.eq(a, z), z), B.add(_as_bool_factor(B.eq(b, z), z), 1))


_binary(E.max_p, lambda t, x, y, z: B.mul(t, _balanced_eq(x, z, y)),
        lambda t, x, y, z: B.mul(t, _balanced_eq(y, z, x)))
_binary(E.min_p, lambda t, x, y, z: B.mul(t, _balanced_eq(x, z, y)),
        lambda t, x, y, z: B.mul(t, _balanced_eq(y, z, x)))


def _pow_dx(t: Any, x: Any, y: Any, z: Any) -> Any:
    """d/dx x**y = y * x**(y-1); for an integer exponent exactly 0 where y == 0 (as JAX)."""
    xd = aval_of(x).dtype
    if dtypes.is_inexact(aval_of(y).dtype):
        # (JAX converts both operands to the result dtype first: the factor is strongly typed)
        x, y = B.convert_element_type(x, xd), B.convert_element_type(y, aval_of(y).dtype)
        return B.mul(t, B.mul(y, B.apply(E.pow_p, x, B.sub(y, 1))))
    x = B.convert_element_type(x, xd)
    yf = B.convert_element_type(y, xd)
    jac = B.mul(_replace_zero(yf), B.apply(E.pow_p, x, B.sub(yf, 1)))
    jac = broadcast_to(jac, _shape(z))
    jac = B.select(B.eq(yf, 0), zeros_like_aval(aval_of(jac)), jac)
    return B.mul(t, jac)


def _pow_dy(t: Any, x: Any, y: Any, z: Any) -> Any:
    """d/dy x**y = log(x) * x**y, taken as 0 where x == 0 (as JAX)."""
    return B.convert_element_type(B.mul(t, B.mul(B.apply(E.log_p, _replace_zero(x)), z)), aval_of(y).dtype)


_binary(E.pow_p, _pow_dx, _pow_dy)


@register_jvp(E.integer_pow_p)
def _integer_pow_jvp(primals: list, tangents: list, *, y: int) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = E.integer_pow_p.bind(x, y=y)
    if type(t) is Zero or y == 0:
        return out, Zero.from_primal_value(out)
    if y == 1:
        return out, t
    if y == 2:
        return out, B.mul(t, B.mul(x, 2))
    return out, B.mul(t, B.mul(B.integer_pow(x, y - 1), y))


def _abs_deriv(t: Any, x: Any, y: Any) -> Any:
    if dtypes.is_inexact(aval_of(x).dtype) and aval_of(x).dtype.kind == "c":
        # d|x| = Re(conj(x) dx) / |x| (JAX keeps |x| = 0 finite by dividing by 1 there).
        mag = B.convert_element_type(y, aval_of(x).dtype)
        return B.apply(E.real_p, B.mul(t, B.div(B.apply(E.conj_p, x), _replace_zero(mag))))
    return B.select(B.apply(E.ge_p, x, 0), t, B.neg(t))


@register_jvp(E.abs_p)
def _abs_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = E.abs_p.bind(x)
    if type(t) is Zero:
        return out, Zero.from_primal_value(out)
    return out, _abs_deriv(t, x, out)


defjvp_linear(E.neg_p)
defjvp_linear(E.copy_p)
defjvp_linear(E.reduce_precision_p)
# d/dx e^-|x| I0(x) = e^-|x| I1(x) - sign(x) e^-|x| I0(x);  d/dx e^-|x| I1(x) = i0e(x) - i1e(x) (sign(x) + 1/x),
# which is 1/2 at 0 (the limit; the formula is 0/0 there).
_unary(E.bessel_i0e_p, lambda x, y: B.sub(B.apply(E.bessel_i1e_p, x), B.mul(B.apply(E.sign_p, x), y)))
_unary(E.bessel_i1e_p, lambda x, y: B.select(
    B.eq(x, 0.0), B.add(B.mul(x, 0.0), 0.5),
    B.sub(B.apply(E.bessel_i0e_p, x),
          B.mul(y, B.add(B.apply(E.sign_p, x),
                         B.div(1.0, B.select(B.eq(x, 0.0), B.add(B.mul(x, 0.0), 1.0), x)))))))


@register_jvp(E.sign_p)
def _sign_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    """Zero on the real line (piecewise constant; zero at 0 too).  For complex ``x`` (jax 0.12's rule, followed
    under every jax), ``sign(x) = exp(i theta)`` turns with the angle: ``d sign = i sign(x) dtheta`` where
    ``dtheta = Im(conj(sign(x)) dx) / |x|`` (0 at ``x = 0``, where sign is 0)."""
    (x,), (t,) = primals, tangents
    y = E.sign_p.bind(x)
    if type(t) is Zero or aval_of(x).dtype.kind != "c":
        return y, Zero.from_primal_value(y)
    dtheta = B.div(B.apply(E.imag_p, B.mul(B.apply(E.conj_p, y), t)), _replace_zero(E.abs_p.bind(x)))
    return y, B.mul(y, B.apply(E.complex_p, zeros_like_aval(aval_of(dtheta)), dtheta))


defjvp_zero(E.floor_p)
defjvp_zero(E.ceil_p)
defjvp_zero(E.round_p)
defjvp_zero(E.is_finite_p)
defjvp_zero(E.stop_gradient_p)
# nextafter(x, y) is x moved by one ulp: its derivative is 1 in x and 0 in y
# almost everywhere (jax 0.12 has the same rule; jax 0.10/0.11 raise).
_binary(E.nextafter_p, lambda t, x, y, z: t, lambda t, x, y, z: Zero.from_primal_value(z))

# ---------------------------------------------------------------- float math
_LOG2 = math.log(2.0)
_unary(E.exp_p, lambda x, y: y)
_unary(E.exp2_p, lambda x, y: B.mul(y, _LOG2))
_unary_t(E.log_p, lambda t, x, y: B.div(t, x))
_unary_t(E.log1p_p, lambda t, x, y: B.div(t, B.add(x, 1)))
_unary(E.expm1_p, lambda x, y: B.apply(E.exp_p, x))  # (jax 0.12: exp(x), not expm1(x) + 1, which is 0 below -17)
_unary(E.sqrt_p, lambda x, y: B.div(0.5, y))
_unary(E.rsqrt_p, lambda x, y: B.mul(B.div(y, x), -0.5))
_unary(E.cbrt_p, lambda x, y: B.mul(B.integer_pow(y, -2), 1 / 3))


@register_jvp(E.tanh_p)
def _tanh_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    """``dy = (t + t*y) * (1 - y)``: the tangent reads ``y`` and ``1 - y`` rather than a precomputed
    ``1 - y**2``.  Same value; but reverse mode then recomputes the derivative inside the backward
    fusion instead of keeping a separate forward array alive, which XLA compiles markedly faster
    (a 60-layer tanh MLP's ``jit(grad)`` compiles ~30% faster)."""
    (x,), (t,) = primals, tangents
    y = E.tanh_p.bind(x)
    if type(t) is Zero:
        return y, Zero.from_primal_value(y)
    return y, B.mul(B.add(t, B.mul(t, y)), B.sub(1, y))

_unary(E.logistic_p, lambda x, y: B.mul(y, B.sub(1, y)))
_unary(E.sin_p, lambda x, y: B.apply(E.cos_p, x))
# JAX's form, -(t * sin x): reverse mode keeps sin x (not its negation) as the residual.
_unary_t(E.cos_p, lambda t, x, y: B.neg(B.mul(t, B.apply(E.sin_p, x))))
_unary(E.tan_p, lambda x, y: B.add(_square(y), 1))
_unary(E.asin_p, lambda x, y: B.apply(E.rsqrt_p, B.sub(1, _square(x))))
_unary(E.acos_p, lambda x, y: B.neg(B.apply(E.rsqrt_p, B.sub(1, _square(x)))))
_unary_t(E.atan_p, lambda t, x, y: B.div(t, B.add(_square(x), 1)))
_unary(E.sinh_p, lambda x, y: B.apply(E.cosh_p, x))
_unary(E.cosh_p, lambda x, y: B.apply(E.sinh_p, x))


def _asinh_deriv(x: Any, y: Any) -> Any:
    """``rsqrt(x**2 + 1)``; for real ``x`` evaluated on ``x / s`` with a power-of-two ``s = clamp(1, |x| 2**-(e-2),
    2**(e+2))`` (``e = maxexp // 2``, gradient stopped) as ``(1/s) rsqrt((x/s)**2 + (1/s)**2)``, so that neither
    ``x**2`` nor the derivatives of this factor overflow: the second derivative at 3e38 is ``-x/(x**2+1)**1.5 ~ 0``,
    not ``0 * inf = NaN`` (jax 0.12's rule; jax 0.10/0.11 give NaN). ``s = 1`` for ``|x| <= 2**(e-2)``."""
    d = aval_of(x).dtype
    if d.kind != "f":
        return B.apply(E.rsqrt_p, B.add(_square(x), 1))
    half = int(dtypes.finfo(d).maxexp) // 2
    s = B.apply(S.clamp_p, 1.0, B.mul(B.apply(E.abs_p, x), 2.0 ** -(half - 2)), 2.0 ** (half + 2))
    inv = B.div(1, B.apply(E.stop_gradient_p, s))
    return B.mul(inv, B.apply(E.rsqrt_p, B.add(_square(B.mul(x, inv)), _square(inv))))


_unary(E.asinh_p, _asinh_deriv)
# jax 0.11's rule (followed whatever jax is installed): rsqrt(x - 1) * rsqrt(x + 1), NaN outside the domain
# x >= 1 as the value is (jax 0.10's rsqrt(x**2 - 1) was finite for x <= -1).
_unary(E.acosh_p, lambda x, y: B.mul(B.apply(E.rsqrt_p, B.sub(x, 1)), B.apply(E.rsqrt_p, B.add(x, 1))))
# 1/(1+x) * (t/(1-x)) (not t/((1+x)(1-x))): its derivative at +-inf is 0, not inf/inf, as in jax 0.10
# (jax 0.11 divides by its one_minus_square primitive: docs/differences.md).
_unary_t(E.atanh_p, lambda t, x, y: B.mul(B.div(1, B.add(x, 1)), B.div(t, B.sub(1, x))))

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _exp_neg_square(x: Any) -> Any:
    """``exp(-x**2)`` on ``x`` clamped (by a select) to ``[-c, c]`` where ``exp(-c**2)`` underflows (``c`` = 11 for float32 and
    narrower, 28 for float64): the same values, but derivatives of every order that are 0 at +-inf and +-3e38,
    not ``-2 x exp(-x**2) = inf * 0 = NaN`` (jax 0.12's answer; jax 0.10/0.11 give NaN there)."""
    c = 28.0 if aval_of(x).dtype.itemsize > 4 else 11.0
    big = B.apply(E.ge_p, B.apply(E.abs_p, x), c)  # (false at NaN: NaN stays NaN, and so do its derivatives)
    return B.apply(E.exp_p, B.neg(_square(B.select(big, B.mul(B.apply(E.sign_p, x), c), x))))


_unary(E.erf_p, lambda x, y: B.mul(_exp_neg_square(x), _TWO_OVER_SQRT_PI))
_unary(E.erfc_p, lambda x, y: B.mul(_exp_neg_square(x), -_TWO_OVER_SQRT_PI))
_unary(E.erf_inv_p, lambda x, y: B.mul(B.apply(E.exp_p, _square(y)), math.sqrt(math.pi) / 2))
_unary(E.lgamma_p, lambda x, y: B.apply(E.digamma_p, x))


def _atan2_denominator(x: Any, y: Any) -> Any:
    return B.add(_square(x), _square(y))


_binary(E.atan2_p, lambda t, x, y, z: B.mul(t, B.div(y, _atan2_denominator(x, y))),
        lambda t, x, y, z: B.mul(t, B.div(B.neg(x), _atan2_denominator(x, y))))

# ---------------------------------------------------------------- digamma: needs trigamma
# Bernoulli numbers B_2, B_4, ..., B_12 for the asymptotic series of trigamma.
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730)


def trigamma(x: Any) -> Any:
    """psi'(x) (polygamma(1, x)) from primitives, so it differentiates and lowers like any composite.

    Negative arguments use the reflection psi'(x) + psi'(1 - x) = pi^2 / sin^2(pi x)
    (infinite at the poles 0, -1, -2, ...); positive ones the recurrence
    psi'(z) = 1/z^2 + psi'(z + 1) up to z >= ``shift`` and then the asymptotic
    series 1/z + 1/(2 z^2) + sum_k B_2k / z^(2k+1).  Half-precision inputs
    are computed in float32.
    """
    dt = aval_of(x).dtype
    if dt in (dtypes.bfloat16, dtypes.float16):
        return B.convert_element_type(trigamma(B.convert_element_type(x, dtypes.float32)), dt)
    shift = 10 if dt == dtypes.float64 else 6
    reflect = B.apply(E.lt_p, x, 0.5)
    z = B.select(reflect, B.sub(1, x), x)
    acc = B.integer_pow(z, -2)
    for k in range(1, shift):
        acc = B.add(acc, B.integer_pow(B.add(z, float(k)), -2))
    w = B.add(z, float(shift))
    inv = B.div(1, w)
    inv2 = _square(inv)
    series = B.mul(inv2, _BERNOULLI[-1])
    for b in reversed(_BERNOULLI[:-1]):
        series = B.mul(B.add(series, b), inv2)
    tail = B.mul(inv, B.add(B.add(series, B.mul(inv, 0.5)), 1))
    direct = B.add(acc, tail)
    weak = aval_of(x).weak_type

    def full(v: float) -> Any:  # as weakly typed as x, so the result is (JAX's digamma jvp keeps x's weak type)
        c = B.convert_element_type(v, dt)
        return broadcast_to(S.convert_element_type_p.bind(c, new_dtype=dt, weak_type=True) if weak else c, _shape(x))

    pole = B.apply(E.and_p, B.apply(E.le_p, x, 0), B.eq(x, B.apply(E.floor_p, x)))
    frac = B.sub(x, B.apply(E.round_p, x, rounding_method=0))
    # Each branch sees only arguments it is finite at, so the discarded branches' derivatives
    # (pi^2/sin^2 at an integer, say) cannot turn a gradient into NaN.
    frac_r = B.select(B.apply(E.and_p, reflect, B.apply(E.not_p, pole)), frac, full(0.5))
    sin_pi = B.apply(E.sin_p, B.mul(frac_r, math.pi))
    reflected = B.sub(B.div(math.pi ** 2, _square(sin_pi)), direct)
    # At a pole: +inf, whose derivative (polygamma(2, x)) is NaN, as in JAX: 1/sqrt(frac^2) at
    # frac = 0, and sqrt(x^2) at x = -inf.
    neg_inf = B.eq(x, float("-inf"))
    frac_p = B.select(B.apply(E.and_p, pole, B.apply(E.not_p, neg_inf)), frac, full(1.0))
    x_ni = B.select(neg_inf, x, full(1.0))
    at_pole = B.select(neg_inf, B.apply(E.sqrt_p, _square(x_ni)), B.apply(E.rsqrt_p, _square(frac_p)))
    # At +inf JAX's polygamma(1, x) is NaN (value and derivative): nan * x, with x zeroed elsewhere.
    pos_inf = B.eq(x, float("inf"))
    nan_at_inf = B.mul(B.select(pos_inf, x, full(0.0)), float("nan"))
    return B.select(pos_inf, nan_at_inf, B.select(pole, at_pole, B.select(reflect, reflected, direct)))


_unary(E.digamma_p, lambda x, y: trigamma(x))

# ---------------------------------------------------------------- complex parts (linear over the reals)
defjvp_linear(E.real_p)
defjvp_linear(E.imag_p)
defjvp_linear(E.conj_p)
defjvp_linear(E.complex_p)

# ---------------------------------------------------------------- comparisons, logic, bits: zero
for _prim in (E.eq_p, E.ne_p, E.lt_p, E.le_p, E.gt_p, E.ge_p, E.and_p, E.or_p, E.xor_p, E.not_p,
              E.shift_left_p, E.shift_right_logical_p, E.shift_right_arithmetic_p,
              E.population_count_p, E.clz_p):
    defjvp_zero(_prim)

_unary(E.square_p, lambda x, y: B.mul(x, 2))


def _const_factor_rule(prim) -> None:
    """JAX's jvp rules of these primitives scale the tangent by a constant made with ``_const(x, c)``: a weakly
    typed Python scalar when ``x`` is a weakly typed rank-0 operand, a strong rank-0 NumPy array otherwise.
    So the tangent (and a cotangent) of a weakly typed *array* is strongly typed (``jvp(jnp.sqrt)`` of
    ``broadcast_to(2.0, (2,))``), while a weak scalar's stays weak.  ftrans's rules scale by Python scalars,
    which keep it weak: for a weak array the rule runs on the operand made strong (its factor is then strong,
    in the tangent and in its transpose), and the primal output keeps the operand's weak type."""
    inner = jvp_rules[prim]

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        x = primals[0]
        a = aval_of(x)
        if not (a.weak_type and a.shape) or type(tangents[0]) is Zero:
            return inner(primals, tangents, **params)
        strong = S.convert_element_type_p.bind(x, new_dtype=a.dtype, weak_type=False)
        _, t = inner([strong, *primals[1:]], tangents, **params)
        return prim.bind(x, **params), t

    rule.__name__ = inner.__name__
    jvp_rules[prim] = rule


for _prim in (E.tan_p, E.exp2_p, E.sqrt_p, E.rsqrt_p, E.cbrt_p, E.square_p, E.asin_p, E.acos_p, E.atan_p,
              E.erf_p, E.erfc_p, E.erf_inv_p, E.digamma_p, E.integer_pow_p):
    _const_factor_rule(_prim)


# ---------------------------------------------------------------- polynomial
def _polynomial_at(x: Any, coeffs: list, shape: tuple, params: dict) -> Any:
    """``coeffs`` (lowest degree first) as a polynomial in ``x`` at ``shape``: one coefficient is itself."""
    if len(coeffs) == 1:
        return broadcast_to(coeffs[0], shape)
    return broadcast_to(E.polynomial_p.bind(x, *coeffs, **params), shape)


@register_jvp(E.polynomial_p)
def _polynomial_jvp(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
    """``d/dx`` is the derivative polynomial ``sum k a_k x**(k-1)`` (no differentiation of the recurrence, so
    higher orders stay polynomials); the coefficients enter linearly, as the polynomial of their tangents."""
    x, *coeffs = primals
    tx, *tcs = tangents
    y = E.polynomial_p.bind(x, *coeffs, **params)
    shape = _shape(y)
    out: Any = Zero.from_primal_value(y)
    if type(tx) is not Zero:
        deriv = [B.mul(c, k) for k, c in enumerate(coeffs[1:], 1)]
        out = add_tangents(out, broadcast_to(B.mul(tx, _polynomial_at(x, deriv, shape, params)), shape))
    live = [i for i, t in enumerate(tcs) if type(t) is not Zero]
    if live:
        zero = zeros_like_aval(aval_of(y).update(shape=()))
        dcs = [zero if type(t) is Zero else t for t in tcs[:live[-1] + 1]]
        out = add_tangents(out, _polynomial_at(x, dcs, shape, params))
    return y, out
