"""jax 0.12's numerical fixes at special points, which ftrans follows whichever jax is installed.

jax 0.10 and 0.11 give NaN or wrong numbers at these points; jax 0.12 (and ftrans) the correct limits:

- ``asinh''`` at +-3e38 (the derivative ``rsqrt(x**2 + 1)`` is evaluated on a power-of-two-scaled ``x``);
- ``erf''``/``erfc''`` (so ``ndtr''``, exact ``gelu''``) at +-inf, +-3e38 (``exp(-x**2)`` on a clamped ``x``);
- ``sinc`` and its derivatives at +-3e38 (every float beyond ``2**(nmant+2)`` is an even integer);
- ``d/dx ldexp(x, n) = 2**n`` everywhere (eagerly, under jit, in jvp and in vjp);
- ``frexp`` of a subnormal XLA flushes is ``frexp(0)`` under jit; ``lgamma`` at subnormals is ``-log|x|`` under jit;
- ``hypot``'s derivatives through the unit vector ``(a, b)/r``: finite where ``a**2``, ``1/r`` or ``r`` overflow.

Each is checked against its closed form (float64 NumPy, rounded to float32) eagerly and under ``ftrans.jit``,
and, when jax 0.12 is installed, against jax itself.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.nn as fnn
import ftrans.numpy as fnp
import ftrans.scipy.special as fsp

F32 = np.float32
TINY = float(np.finfo(F32).tiny)
JAX012 = jax.__version_info__ >= (0, 12)
needs_jax012 = pytest.mark.skipif(not JAX012, reason="jax 0.12's answers are the oracle")


def _d(f, k):
    """The k-th derivative of the elementwise ``f`` (by ``grad`` of sums)."""
    for _ in range(k):
        f = (lambda g: ftrans.grad(lambda v: fnp.sum(g(v))))(f)
    return f


def _jd(f, k):
    for _ in range(k):
        f = (lambda g: jax.grad(lambda v: jjnp.sum(g(v))))(f)
    return f


def _close(got, want, rtol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=TINY, equal_nan=True)


def _both(f, x):
    """``f(x)`` eagerly and under ``ftrans.jit``."""
    return np.asarray(f(x)), np.asarray(ftrans.jit(f)(x))


# ---------------------------------------------------------------- asinh
HUGE = np.array([3e38, -3e38, 1e30, -1e30, 1e20, 2.0, -0.5, 0.0], F32)


@pytest.mark.parametrize("f", [flax.asinh, fnp.arcsinh], ids=["lax.asinh", "np.arcsinh"])
def test_asinh_derivatives_finite_at_huge(f):
    x = HUGE.astype(np.float64)
    for got in _both(_d(f, 1), HUGE):
        _close(got, 1 / np.sqrt(x * x + 1))
    for got in _both(_d(f, 2), HUGE):
        _close(got, -x / (x * x + 1) ** 1.5)
    # the scaling is exact below 2**62: third derivative at moderate x unchanged, (2x**2 - 1)/(x**2 + 1)**2.5
    x3 = np.array([0.0, 0.5, -2.0, 10.0], F32)
    for got in _both(_d(f, 3), x3):
        _close(got, (2 * x3.astype(np.float64) ** 2 - 1) / (x3.astype(np.float64) ** 2 + 1) ** 2.5, rtol=1e-4)


# ---------------------------------------------------------------- erf family
EDGES = np.array([np.inf, -np.inf, 3e38, -3e38, 20.0, -20.0, 1.5, -0.5, 0.0, np.nan], F32)
_C = 2 / math.sqrt(math.pi)


def _erf2(x):  # erf'' = -2x * 2/sqrt(pi) exp(-x**2), 0 at +-inf
    with np.errstate(all="ignore"):
        return np.where(np.isinf(x), 0.0, -2 * x * _C * np.exp(-x * x))


@pytest.mark.parametrize("name", ["lax.erf", "sp.erf", "lax.erfc", "sp.erfc", "sp.ndtr"])
def test_erf_second_derivative_zero_at_infinity(name):
    f = {"lax.erf": flax.erf, "sp.erf": fsp.erf, "lax.erfc": flax.erfc, "sp.erfc": fsp.erfc, "sp.ndtr": fsp.ndtr}[name]
    x = EDGES.astype(np.float64)
    want = {"erf": _erf2(x), "erfc": -_erf2(x), "ndtr": _erf2(x / math.sqrt(2)) / 4}[name.split(".")[1]]
    for got in _both(_d(f, 2), EDGES):
        _close(got, want, rtol=1e-4)


def test_erf_higher_derivatives_keep_their_values():
    """The clamp is a select: the third derivative at 0 is still erf'''(0) = -2 * 2/sqrt(pi), NaN stays NaN."""
    x = np.array([0.0, 1.0, np.nan, np.inf], F32)
    want = np.array([-2 * _C, 2 * _C * math.exp(-1.0), np.nan, 0.0])
    for got in _both(_d(flax.erf, 3), x):
        _close(got, want, rtol=1e-4)


def test_gelu_exact_second_derivative_zero_at_infinity():
    """gelu''(x) = (2 - x**2) phi(x) -> 0, at +-3e38 and (jax: NaN there, inf * 0) at +-inf."""
    f = lambda v: fnn.gelu(v, approximate=False)  # noqa: E731
    x = np.array([np.inf, -np.inf, 3e38, -3e38, 1.0, -2.0, 0.0], F32)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        want = np.where(np.isinf(x64), 0.0, (2 - x64 * x64) * np.exp(-x64 * x64 / 2) / math.sqrt(2 * math.pi))
    for got in _both(_d(f, 2), x):
        _close(got, want, rtol=1e-4)


# ---------------------------------------------------------------- sinc
def test_sinc_zero_at_huge_even_integers():
    x = np.array([3e38, -3e38, 1e30, 2.0 ** 25, -(2.0 ** 30)], F32)
    x64 = x.astype(np.float64)
    for k, want in enumerate([0 * x64, 1 / x64, -2 / x64 ** 2]):
        for got in _both(_d(fnp.sinc, k), x):
            _close(got, want)
    # below 2**25 (and at +-inf) nothing changes: NumPy's value, NaN at inf
    y = np.array([0.5, 2.5, -3.25, 100.5, np.inf], F32)
    for got in _both(fnp.sinc, y):
        _close(got, np.sinc(y.astype(np.float64)), rtol=1e-4)


# ---------------------------------------------------------------- ldexp / frexp
LDEXP = [(0.0, -3), (-0.0, -2), (-np.inf, 1), (np.inf, 0), (3e38, -2), (-3e38, -1), (1.5, 5), (1.5, 100),
         (-0.75, -20), (1e-30, 7), (np.nan, 1), (2.0, -130), (1e30, -100)]


def test_ldexp_derivative_is_two_to_the_n_everywhere():
    x = np.array([p[0] for p in LDEXP], F32)
    n = np.array([p[1] for p in LDEXP], np.int32)
    want = np.ldexp(np.ones(len(n)), n).astype(F32)  # 2**n in float32 (2**-130 subnormal: XLA flushes it)
    g = ftrans.grad(lambda a, b: fnp.sum(fnp.ldexp(a, b)))
    ones = np.ones_like(x)
    results = {
        "eager": g(x, n), "jit": ftrans.jit(g)(x, n),
        "jvp": ftrans.jvp(lambda a: fnp.ldexp(a, n), (x,), (ones,))[1],
        "vjp": ftrans.vjp(lambda a: fnp.ldexp(a, n), x)[1](ones)[0],
        "jit(jvp)": ftrans.jit(lambda a: ftrans.jvp(lambda b: fnp.ldexp(b, n), (a,), (ones,))[1])(x),
    }
    for mode, got in results.items():
        assert np.asarray(got).dtype == F32, mode
        _close(got, want, rtol=0)
    # the values are unchanged: NumPy's
    _close(fnp.ldexp(x, n), np.ldexp(x, n), rtol=0)
    _close(ftrans.jit(fnp.ldexp)(x, n), np.ldexp(x, n), rtol=0)


@pytest.mark.parametrize("x, n", [(0.0, -3), (3.0, 4), (-1e-30, 11), (5.0, -1)])
def test_ldexp_scalar_grad(x, n):
    assert float(ftrans.grad(fnp.ldexp)(F32(x), n)) == 2.0 ** n
    assert float(ftrans.jit(ftrans.grad(fnp.ldexp))(F32(x), n)) == 2.0 ** n


def test_frexp_of_flushed_subnormal_under_jit():
    """XLA flushes the subnormal operand: under jit frexp(+-1e-45) is frexp(+-0) = (+-0, 0), derivative 1;
    eagerly NumPy keeps it: (0.5, -148)."""
    x = np.array([1e-45, -1e-45, 0.0, 3.0], F32)
    m, e = ftrans.jit(fnp.frexp)(x)
    _close(m, [0.0, -0.0, 0.0, 0.75], rtol=0)
    np.testing.assert_array_equal(np.asarray(e), [0, 0, 0, 2])
    assert np.signbit(np.asarray(m)[1])
    g = ftrans.grad(lambda v: fnp.sum(fnp.frexp(v)[0]))
    _close(ftrans.jit(g)(x), [1.0, 1.0, 1.0, 0.25], rtol=0)
    me, ee = fnp.frexp(x)
    nm, ne = np.frexp(x)
    _close(me, nm, rtol=0)
    np.testing.assert_array_equal(np.asarray(ee), ne)


# ---------------------------------------------------------------- lgamma
@pytest.mark.parametrize("f", [flax.lgamma, fsp.gammaln], ids=["lax.lgamma", "sp.gammaln"])
def test_lgamma_at_subnormals_under_jit(f):
    x = np.array([1e-45, -1e-45, 1e-40, -3e-39, 1e-38, 0.0, 2.5, -2.5, -np.inf, np.inf], F32)  # lgamma(-inf) = inf (C99)
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore"):
        want = np.where(np.abs(x64) < TINY, -np.log(np.abs(x64)), [math.lgamma(v) if v else np.inf for v in x64])
    for got in _both(f, x):
        _close(got, want, rtol=1e-5)


@pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
def test_lgamma_at_subnormals_under_jit_with_explicit_sharding():
    """The lowering's constants are laid out as the sharded operand (as digamma's)."""
    mesh = ftrans.make_mesh((8,), ("x",), axis_types=(ftrans.sharding.AxisType.Explicit,))
    v = np.array([1e-45, -1e-45, 2.5, 0.5, 1e-40, 3.0, 4.0, 5.0], F32)
    with ftrans.set_mesh(mesh):
        y = ftrans.jit(flax.lgamma)(ftrans.reshard(v, ftrans.P("x")))
        assert str(ftrans.typeof(y)) == "float32[8@x]"
    want = [-math.log(float(abs(t))) if abs(t) < TINY else math.lgamma(float(t)) for t in v]
    _close(y, want, rtol=1e-5)


# ---------------------------------------------------------------- hypot
HYP = [(1e30, 1e30), (3e38, 3e38), (-3e38, 3e38), (1e-30, 0.0), (0.0, 1e-30), (1e-30, 1e-30), (1.0, np.inf),
       (0.0, np.inf), (2.0, 3e38), (3.0, -4.0), (0.5, 1e30), (0.0, 0.0), (1e-20, 1e-20)]


def _hyp_ref(a, b):
    """r, the unit vector and the second derivatives of hypot, float64 (as jax 0.12's recursion computes them)."""
    with np.errstate(all="ignore"):
        hi = np.maximum(np.abs(a), np.abs(b))
        q = np.sqrt(1 + (np.minimum(np.abs(a), np.abs(b)) / hi) ** 2)
        ua, ub = a / hi / q, b / hi / q
        r = np.hypot(a, b)
        r32 = np.where(np.isfinite(r.astype(F32)), r, np.inf)  # float32's r overflows to inf at (3e38, 3e38)
        return ua, ub, (1 - ua * ua) / r32, -ua * ub / r32


def test_hypot_derivatives_at_extremes():
    a = np.array([p[0] for p in HYP], F32)
    b = np.array([p[1] for p in HYP], F32)
    ua, ub, daa, dab = _hyp_ref(a.astype(np.float64), b.astype(np.float64))
    g = ftrans.grad(lambda x, y: fnp.sum(fnp.hypot(x, y)), argnums=(0, 1))
    gg = ftrans.grad(lambda x, y: fnp.sum(g(x, y)[0]), argnums=(0, 1))
    for mode, (ga, gb), (haa, hab) in [("eager", g(a, b), gg(a, b)),
                                      ("jit", ftrans.jit(g)(a, b), ftrans.jit(gg)(a, b))]:
        _close(ga, ua, rtol=1e-6)
        _close(gb, ub, rtol=1e-6)
        _close(haa, daa, rtol=1e-5)
        _close(hab, dab, rtol=1e-5)
    _close(fnp.hypot(a, b), np.hypot(a, b))  # values unchanged


def test_hypot_grad_broadcasts_and_keeps_dtype():
    g = ftrans.grad(lambda x: fnp.sum(fnp.hypot(x, F32(4.0))))(np.array([3.0, 0.0], F32))
    assert g.dtype == F32
    _close(g, [0.6, 0.0], rtol=1e-6)
    gx, gy = ftrans.grad(lambda x, y: fnp.sum(fnp.hypot(x, y)), argnums=(0, 1))(
        np.ones((2, 3), F32), np.array([0.0, 1.0, 2.0], F32))
    assert gx.shape == (2, 3) and gy.shape == (3,)
    _close(gy, 2 * np.array([0.0, 1.0, 2.0]) / np.hypot(1.0, [0.0, 1.0, 2.0]), rtol=1e-6)


# ---------------------------------------------------------------- jax 0.12 itself as the oracle
_ORACLE_CASES = {
    "asinh''": (lambda M: _d(flax.asinh, 2) if M == "ft" else _jd(jax.lax.asinh, 2), HUGE),
    "erf''": (lambda M: _d(flax.erf, 2) if M == "ft" else _jd(jax.lax.erf, 2), EDGES),
    "erfc''": (lambda M: _d(flax.erfc, 2) if M == "ft" else _jd(jax.lax.erfc, 2), EDGES),
    "ndtr''": (lambda M: _d(fsp.ndtr, 2) if M == "ft" else _jd(jax.scipy.special.ndtr, 2), EDGES),
    "sinc": (lambda M: fnp.sinc if M == "ft" else jjnp.sinc, np.array([3e38, -3e38, 0.5], F32)),
    "sinc'": (lambda M: _d(fnp.sinc, 1) if M == "ft" else _jd(jjnp.sinc, 1), np.array([3e38, -3e38, 0.5], F32)),
    "sinc''": (lambda M: _d(fnp.sinc, 2) if M == "ft" else _jd(jjnp.sinc, 2), np.array([3e38, -3e38, 0.5], F32)),
    "lgamma": (lambda M: flax.lgamma if M == "ft" else jax.lax.lgamma, np.array([1e-45, -1e-45, 1e-40, 3.5], F32)),
    "frexp": (lambda M: (lambda v: fnp.frexp(v)[0]) if M == "ft" else (lambda v: jjnp.frexp(v)[0]),
              np.array([1e-45, -1e-45, 3.0], F32)),
}


@needs_jax012
@pytest.mark.parametrize("name", sorted(_ORACLE_CASES))
def test_matches_jax012_under_jit(name):
    get, x = _ORACLE_CASES[name]
    want = np.asarray(jax.jit(get("jax"))(x))
    _close(ftrans.jit(get("ft"))(x), want, rtol=1e-4)


@needs_jax012
def test_ldexp_and_hypot_grads_match_jax012():
    x = np.array([p[0] for p in LDEXP], F32)
    n = np.array([p[1] for p in LDEXP], np.int32)
    want = jax.jit(jax.grad(lambda a: jjnp.sum(jjnp.ldexp(a, n))))(x)
    _close(ftrans.jit(ftrans.grad(lambda a: fnp.sum(fnp.ldexp(a, n))))(x), want, rtol=0)
    a = np.array([p[0] for p in HYP], F32)
    b = np.array([p[1] for p in HYP], F32)
    jg = jax.jit(jax.grad(lambda x, y: jjnp.sum(jjnp.hypot(x, y)), argnums=(0, 1)))(a, b)
    fg = ftrans.jit(ftrans.grad(lambda x, y: fnp.sum(fnp.hypot(x, y)), argnums=(0, 1)))(a, b)
    for got, want in zip(fg, jg):
        _close(got, want, rtol=1e-6)
