"""jax 0.12's changes to ``jax.scipy.special`` and the special functions of ``jax.lax``, which ftrans follows
whichever jax is installed.

Each behaviour is checked against SciPy (float64, rounded to the dtype) or a closed form, eagerly, under
``ftrans.jit`` and under ``ftrans.vmap``; when jax 0.12 is installed, against jax itself too.

- ``expn``/``exp1``/``expi``: ``E_n(inf) = 0`` (and 0 beyond ``log(max)``), ``Ei(0) = -inf``, ``Ei(-inf) = -0``,
  a fractional order truncated, an infinite order NaN, ``dE_0/dx = -(x + 1) e^-x / x**2``;
  ``E_n`` for ``x > 1`` within a few ulp of SciPy.
"""

from __future__ import annotations

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as ss

import ftrans
import ftrans.scipy.special as fsp

F32 = np.float32
JAX012 = jax.__version_info__ >= (0, 12)
needs_jax012 = pytest.mark.skipif(not JAX012, reason="jax 0.12's answers are the oracle")


def _eager_jit_vmap(f, *args):
    """``f(*args)`` eagerly, under ``jit`` and under ``vmap``, as NumPy arrays."""
    return [np.asarray(r) for r in (f(*args), ftrans.jit(f)(*args), ftrans.vmap(f)(*args))]


def _same(got, want, rtol=0.0, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    # an infinity or a signed zero must be the same one
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf])
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), (got, want)


# ----------------------------------------------------------------------------
# expn, exp1, expi

EXPN_N = np.array([1, 2, 0, 1, 3, 2.5, 2.7, 0.9, np.inf, np.nan, -1, 6000, 1, 0, 0, 4, 1], F32)
EXPN_X = np.array([np.inf, np.inf, np.inf, 100, 95, 1, 0.5, 2, 1, 1, 1, 3, np.nan, 0, 1, -1, 89.0], F32)


def _scipy_expn(n, x):
    n64, x64 = n.astype(np.float64), x.astype(np.float64)
    bad = ~np.isfinite(n64) | (n64 < 0)
    with np.errstate(invalid="ignore"):
        want = ss.expn(np.where(bad, 1, np.trunc(n64)).astype(np.int64), x64)
    return np.where(bad, np.nan, want)


def test_expn_edges_follow_jax012():
    want = _scipy_expn(EXPN_N, EXPN_X)
    # beyond log(max) every jax (and ftrans under jit, where XLA flushes) gives 0, not a subnormal
    want = np.where(EXPN_X > np.log(np.finfo(F32).max), 0.0, want).astype(F32)
    for got in _eager_jit_vmap(fsp.expn, EXPN_N, EXPN_X):
        _same(got, want, rtol=2e-6)


def test_exp1_expi_edges_follow_jax012():
    x = np.array([np.inf, 0, -1, 1e-3, 200, np.nan], F32)
    _same(np.asarray(fsp.exp1(x)), ss.exp1(x.astype(np.float64)).astype(F32), rtol=2e-6)
    for got in _eager_jit_vmap(fsp.exp1, x):
        _same(got, ss.exp1(x.astype(np.float64)).astype(F32), rtol=2e-6)
    x = np.array([0, -np.inf, -0.0, -1, 1e-3, -200, np.inf, np.nan], F32)
    want = ss.expi(x.astype(np.float64))
    want[x == np.inf] = np.nan  # jax (0.10 to 0.12) and ftrans: NaN at +inf (SciPy: inf)
    for got in _eager_jit_vmap(fsp.expi, x):
        _same(got, want.astype(F32), rtol=2e-6)


def test_expn_derivatives():
    n = np.array([0, 0, 0, 0, 1, 2, 2.5, 3, -1, np.inf, 1], F32)
    x = np.array([0.5, 2, 0, 100, 0.5, 3, 1, 0.2, 1, 1, np.inf], F32)
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        d0 = np.where(x64 == 0, -np.inf, -(x64 + 1) * np.exp(-x64) / x64 ** 2)
        want = np.where(n == 0, d0, -_scipy_expn(np.maximum(np.trunc(n) - 1, 0), x))
    want = np.where(x64 > np.log(np.finfo(F32).max), -0.0, want)
    want = np.where((n < 0) | np.isinf(n), np.nan, want).astype(F32)
    grad = ftrans.grad(fsp.expn, 1)
    for got in (ftrans.vmap(grad)(n, x), ftrans.jit(ftrans.vmap(grad))(n, x), ftrans.vmap(ftrans.jit(grad))(n, x),
                [grad(a, b) for a, b in zip(n, x)]):
        np.testing.assert_allclose(got, want, rtol=2e-5, equal_nan=True)
    vjp = ftrans.vjp(lambda v: fsp.expn(n, v), x)[1](np.ones_like(x))[0]
    np.testing.assert_allclose(vjp, want, rtol=2e-5, equal_nan=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_exp1_accuracy_against_scipy(dt):
    """The continued fraction (``x > 1``), evaluated backwards, stays within a few ulp of SciPy."""
    x = np.concatenate([np.geomspace(1e-4, 1, 40), np.linspace(1, 5, 80), np.linspace(5, 80, 60)]).astype(dt)
    want = ss.exp1(x.astype(np.float64))
    with ftrans.enable_x64(dt == np.float64):
        got = np.asarray(fsp.exp1(x)).astype(np.float64)
        gotn = np.asarray(fsp.expn(np.full_like(x, 3), x)).astype(np.float64)
    ulp = np.abs(got - want) / want / np.finfo(dt).eps
    assert ulp.max() < 6, (x[np.argmax(ulp)], ulp.max())
    ulp3 = np.abs(gotn - ss.expn(3, x.astype(np.float64))) / ss.expn(3, x.astype(np.float64)) / np.finfo(dt).eps
    assert ulp3.max() < 8, (x[np.argmax(ulp3)], ulp3.max())


@needs_jax012
def test_expn_family_against_jax012():
    jit_grad = jax.jit(jax.vmap(jax.grad(jsp.expn, 1)))
    np.testing.assert_allclose(fsp.expn(EXPN_N, EXPN_X), jax.jit(jsp.expn)(EXPN_N, EXPN_X), rtol=2e-6,
                               equal_nan=True)
    ok = np.isfinite(EXPN_N) | np.isnan(EXPN_N)
    np.testing.assert_allclose(ftrans.jit(ftrans.vmap(ftrans.grad(fsp.expn, 1)))(EXPN_N[ok], EXPN_X[ok]),
                               jit_grad(EXPN_N[ok], EXPN_X[ok]), rtol=2e-5, equal_nan=True)
    x = np.array([np.inf, 0, -1, 1e-3, 200, np.nan, -np.inf, 2], F32)
    for name in ("exp1", "expi"):
        _same(ftrans.jit(getattr(fsp, name))(x), jax.jit(getattr(jsp, name))(x), rtol=4e-6)


# ----------------------------------------------------------------------------
# erfcinv (new in jax 0.12), ndtri's derivatives

ERFCINV_Y = np.array([0, 1e-30, 1e-7, 1e-3, 0.1, 0.5, 0.9, 1, 1.1, 1.5, 1.9, 1.999, 2 - 1e-7, 2, -0.1, 2.1, np.nan],
                     F32)


def test_erfcinv_values():
    want = ss.erfcinv(ERFCINV_Y.astype(np.float64)).astype(F32)
    want[ERFCINV_Y == 1] = 0.0  # +0
    for got in _eager_jit_vmap(fsp.erfcinv, ERFCINV_Y):
        _same(got, want, rtol=3e-7)
    with ftrans.enable_x64(True):
        y = np.linspace(0, 2, 201)[1:-1]
        np.testing.assert_allclose(fsp.erfcinv(y), ss.erfcinv(y), rtol=4e-15, atol=1e-16)
    # half precision goes through float32; integers promote; complex is refused
    for dt in ("bfloat16", "float16"):
        y_half = ftrans.numpy.asarray(ERFCINV_Y).astype(dt)
        got = fsp.erfcinv(y_half)
        assert got.dtype == dt
        want_half = ss.erfcinv(np.asarray(y_half, np.float64)).astype(F32)  # float32, then rounded
        np.testing.assert_allclose(np.asarray(got, F32), np.asarray(ftrans.numpy.asarray(want_half).astype(dt), F32),
                                   rtol=8e-3)  # a half-precision ulp
    assert np.asarray(fsp.erfcinv(1)).dtype == np.float32 and float(fsp.erfcinv(1)) == 0.0
    with pytest.raises(ValueError, match="complex"):
        fsp.erfcinv(np.array([0.5 + 0j]))


def test_erfcinv_derivatives():
    z = ss.erfcinv(ERFCINV_Y.astype(np.float64))
    with np.errstate(over="ignore"):
        d1 = -np.sqrt(np.pi) / 2 * np.exp(z * z)
        d2 = (2 * z * d1 * d1).astype(F32).astype(np.float64)
    d1 = d1.astype(F32).astype(np.float64)
    g1 = ftrans.grad(fsp.erfcinv)
    g2 = ftrans.grad(g1)
    for f, want in ((g1, d1), (g2, d2)):
        for got in (ftrans.vmap(f)(ERFCINV_Y), ftrans.jit(ftrans.vmap(f))(ERFCINV_Y)):
            got = np.asarray(got, np.float64)
            # NaN outside [0, 2] in reverse mode too; -inf at both ends
            assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
            fin = np.isfinite(want)
            assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
            np.testing.assert_allclose(got[fin], want[fin], rtol=2e-5)
    # forward mode agrees
    t = ftrans.jvp(fsp.erfcinv, (ERFCINV_Y,), (np.ones_like(ERFCINV_Y),))[1]
    np.testing.assert_allclose(t, d1.astype(F32), rtol=2e-5, equal_nan=True)


def test_ndtri_derivatives_at_the_ends_and_in_the_tails():
    p = np.array([0, 1e-30, 1e-10, 1e-3, 0.1, 0.5, 0.9, 0.999, 1 - 6e-8, 1], F32)
    x = ss.ndtri(p.astype(np.float64))
    with np.errstate(over="ignore"):
        d1 = np.sqrt(2 * np.pi) * np.exp(x * x / 2)
        d2 = (x * d1 * d1).astype(F32).astype(np.float64)
    d1 = d1.astype(F32).astype(np.float64)
    g1 = ftrans.grad(fsp.ndtri)
    for f, want, rtol in ((g1, d1, 2e-6), (ftrans.grad(g1), d2, 2e-5)):
        for got in (ftrans.vmap(f)(p), ftrans.jit(ftrans.vmap(f))(p)):
            got = np.asarray(got, np.float64)
            inf = np.isinf(want)
            assert np.array_equal(got[inf], want[inf])  # inf at 0 and 1 (jax 0.10/0.11: 0 or NaN)
            np.testing.assert_allclose(got[~inf], want[~inf], rtol=rtol)


@needs_jax012
def test_erfcinv_and_ndtri_against_jax012():
    y = ERFCINV_Y
    np.testing.assert_allclose(ftrans.jit(fsp.erfcinv)(y), jax.jit(jsp.erfcinv)(y), rtol=3e-7, equal_nan=True)
    for k in (1, 2):
        f, g = fsp.erfcinv, jsp.erfcinv
        for _ in range(k):
            f, g = ftrans.grad(f), jax.grad(g)
        np.testing.assert_allclose(ftrans.vmap(f)(y), jax.jit(jax.vmap(g))(y), rtol=2e-5, equal_nan=True)
    p = np.array([0, 1e-30, 1e-5, 0.1, 0.5, 0.9, 1 - 6e-8, 1], F32)
    np.testing.assert_allclose(ftrans.vmap(ftrans.grad(fsp.ndtri))(p), jax.jit(jax.vmap(jax.grad(jsp.ndtri)))(p),
                               rtol=2e-6)
    np.testing.assert_allclose(ftrans.vmap(ftrans.grad(ftrans.grad(fsp.ndtri)))(p),
                               jax.jit(jax.vmap(jax.grad(jax.grad(jsp.ndtri))))(p), rtol=2e-5)


# ----------------------------------------------------------------------------
# rel_entr, kl_div

RE_P = np.array([0, 0, 1, 1, np.nan, 1, 2, np.inf, 1, 0.5, 1e-30, 1.0001, 1, -1, np.inf, 3, 0, np.inf, -1, 0, 0.3],
                F32)
RE_Q = np.array([0, 1, 0, 1, 1, np.nan, 1, 1, np.inf, 0.5000001, 1e30, 1, 1e-30, 1, np.inf, -1, np.inf, 0, 0, -1,
                 0.30000001], F32)


def _re_partials(kl, p, q):
    """jax 0.12's derivatives of rel_entr / kl_div (float64 closed forms)."""
    p, q = p.astype(np.float64), q.astype(np.float64)
    with np.errstate(all="ignore"):
        both = (p > 0) & (q > 0)
        log_r = np.log(p) - np.log(q)
        if kl:
            dp, dq = log_r, np.where(np.isinf(q), 1.0, -(p - q) / q)
        else:
            dp, dq = log_r + 1, -p / q
        at_zero = (p == 0) & (q >= 0)
        nan = np.isnan(p) | np.isnan(q)
        dp = np.where(nan, np.nan, np.where(both, dp, 0.0))
        dq = np.where(nan, np.nan, np.where(both, dq, np.where(at_zero, 1.0 if kl else 0.0, 0.0)))
    return dp, dq


@pytest.mark.parametrize("name", ["rel_entr", "kl_div"])
def test_rel_entr_kl_div_values_and_derivatives(name):
    f = getattr(fsp, name)
    want = getattr(ss, name)(RE_P.astype(np.float64), RE_Q.astype(np.float64)).astype(F32)
    for got in _eager_jit_vmap(f, RE_P, RE_Q):
        # kl_div near p == q comes from its series: small and positive, to float32's precision
        _same(got, want, rtol=2e-6, atol=1e-30)
    dp, dq = _re_partials(name == "kl_div", RE_P, RE_Q)
    for k, want_d in ((0, dp), (1, dq)):
        g = ftrans.grad(f, k)
        for got in (ftrans.vmap(g)(RE_P, RE_Q), ftrans.jit(ftrans.vmap(g))(RE_P, RE_Q)):
            np.testing.assert_allclose(got, want_d.astype(F32), rtol=1e-5, equal_nan=True)


def test_kl_div_near_equal_is_accurate_and_nonnegative():
    p = np.float32(0.3) * (1 + np.linspace(-0.04, 0.04, 81)).astype(F32)
    q = np.full_like(p, 0.3)
    got = np.asarray(fsp.kl_div(p, q), np.float64)
    want = ss.kl_div(p.astype(np.float64), q.astype(np.float64))
    assert (got >= 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-30)


@needs_jax012
@pytest.mark.parametrize("name", ["rel_entr", "kl_div"])
def test_rel_entr_kl_div_against_jax012(name):
    f, g = getattr(fsp, name), getattr(jsp, name)
    np.testing.assert_allclose(f(RE_P, RE_Q), jax.jit(g)(RE_P, RE_Q), rtol=2e-6, equal_nan=True)
    for k in (0, 1):
        np.testing.assert_allclose(ftrans.vmap(ftrans.grad(f, k))(RE_P, RE_Q),
                                   jax.jit(jax.vmap(jax.grad(g, k)))(RE_P, RE_Q), rtol=1e-5, equal_nan=True)


# ----------------------------------------------------------------------------
# zeta's derivatives

Z_X = np.array([0.5, -1, 1, 1, 2, 2, 3, 2, 1.5, np.nan, 30], F32)
Z_Q = np.array([1, 1, 1, 3, 0.5, -1.5, 2, np.nan, 1e-3, 1, 2], F32)


def test_zeta_derivatives_nan_where_undefined():
    dx = ftrans.vmap(ftrans.grad(fsp.zeta, 0))(Z_X, Z_Q)
    dq = ftrans.vmap(ftrans.grad(fsp.zeta, 1))(Z_X, Z_Q)
    x64, q64 = Z_X.astype(np.float64), Z_Q.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want_dq = -x64 * ss.zeta(x64 + 1, q64)  # d/dq zeta(x, q) = -x zeta(x + 1, q)
    undefined = (x64 < 1) | np.isnan(x64) | np.isnan(q64)
    want_dq = np.where(undefined | (x64 == 1), np.nan, want_dq)
    np.testing.assert_allclose(dq, want_dq.astype(F32), rtol=2e-4, equal_nan=True)
    dx = np.asarray(dx)
    assert np.isnan(dx[undefined]).all() and (dx[x64 == 1] == -np.inf).all()
    assert np.isfinite(dx[~undefined & (x64 != 1) & (q64 > 0)]).all()
    # reverse and forward mode agree off the pole (at q < 0 forward mode meets d/dx's NaN: 0 * NaN, as in jax)
    ok = ~undefined & (x64 != 1) & (q64 > 0)
    t = ftrans.jvp(fsp.zeta, (Z_X[ok], Z_Q[ok]), (np.zeros_like(Z_X[ok]), np.ones_like(Z_Q[ok])))[1]
    np.testing.assert_allclose(t, np.asarray(dq)[ok], rtol=1e-6)


@needs_jax012
def test_zeta_derivatives_against_jax012():
    for k in (0, 1):
        np.testing.assert_allclose(ftrans.vmap(ftrans.grad(fsp.zeta, k))(Z_X, Z_Q),
                                   jax.jit(jax.vmap(jax.grad(jsp.zeta, k)))(Z_X, Z_Q), rtol=2e-4, equal_nan=True)


def test_erfcinv_docstring_example():
    import doctest

    finder = doctest.DocTestFinder(recurse=False, exclude_empty=True)
    (test,) = finder.find(fsp.erfcinv, "erfcinv", module=False, globs={})
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    with ftrans.enable_x64(False):
        result = runner.run(test)
    assert result.attempted and not result.failed


# ----------------------------------------------------------------------------
# erfcx: derivatives without cancellation, half precision through float32

ERFCX_X = np.array([-5, -1, 0, 0.5, 1, 1.5, 1.99, 2, 2.01, 2.25, 3, 5, 10, 30, 100], F32)


def _erfcx_derivatives(x):
    x = x.astype(np.float64)
    e = ss.erfcx(x)
    d1 = 2 * x * e - 2 / np.sqrt(np.pi)  # float64 keeps float32's digits for |x| <= 100
    return d1, 2 * e + 2 * x * d1


def test_erfcx_derivatives_accurate():
    d1, d2 = _erfcx_derivatives(ERFCX_X)
    g1 = ftrans.grad(fsp.erfcx)
    for f, want in ((g1, d1), (ftrans.grad(g1), d2)):
        for got in (ftrans.vmap(f)(ERFCX_X), ftrans.jit(ftrans.vmap(f))(ERFCX_X)):
            # a few float32 ulp (jax 0.10/0.11's 2 x erfcx - 2/sqrt(pi) lost up to 1e-4 relative by x = 100)
            np.testing.assert_allclose(got, want.astype(F32), rtol=6e-7)
    # -0 and 0 at +inf (jax 0.10/0.11: NaN)
    x = np.array([np.inf, 1e20], F32)
    _same(ftrans.vmap(g1)(x), np.array([-0.0, -0.0], F32))
    _same(ftrans.vmap(ftrans.grad(g1))(x), np.array([0.0, 0.0], F32))
    with ftrans.enable_x64(True):
        x = np.linspace(-3, 30, 67)
        d1, _ = _erfcx_derivatives(x)
        # (the float64 reference itself cancels about x**2 ulp by x = 30)
        np.testing.assert_allclose(ftrans.vmap(g1)(x), d1, rtol=1e-12)


def test_erfcx_half_precision_through_float32():
    x = np.array([-5, -1, 0, 0.5, 1, 2, 5, 10, 30, 100, 1e4], F32)
    for dt in ("bfloat16", "float16"):
        xh = ftrans.numpy.asarray(x).astype(dt)
        got = fsp.erfcx(xh)
        assert got.dtype == dt
        want = ftrans.numpy.asarray(fsp.erfcx(xh.astype(np.float32))).astype(dt)
        np.testing.assert_array_equal(np.asarray(got, F32), np.asarray(want, F32))


@needs_jax012
def test_erfcx_against_jax012():
    g1, j1 = ftrans.grad(fsp.erfcx), jax.grad(jsp.erfcx)
    x = np.concatenate([ERFCX_X, np.array([np.inf, 1e20], F32)])
    np.testing.assert_allclose(ftrans.vmap(g1)(x), jax.jit(jax.vmap(j1))(x), rtol=2e-6)
    np.testing.assert_allclose(ftrans.vmap(ftrans.grad(g1))(x), jax.jit(jax.vmap(jax.grad(j1)))(x), rtol=2e-6)
    for dt in ("bfloat16", "float16"):
        ours = fsp.erfcx(ftrans.numpy.asarray(x).astype(dt))
        theirs = jax.jit(jsp.erfcx)(jax.numpy.asarray(x).astype(dt))
        np.testing.assert_allclose(np.asarray(ours, F32), np.asarray(theirs, F32), rtol=8e-3)


# ----------------------------------------------------------------------------
# the incomplete Gamma and Beta loops: each element's value independent of its batch-mates


@pytest.mark.parametrize("name", ["lax.igamma", "lax.igammac", "sp.gammainc", "sp.gammaincc"] + [
    # (Beta's continued fraction differs in its last bit by the batch when LLVM's optimisations are off)
    pytest.param(n, marks=pytest.mark.xla_optimized) for n in ("lax.betainc", "sp.betainc")])
def test_incomplete_gamma_beta_do_not_depend_on_the_batch(name):
    """jax 0.12 stops each element's series / continued fraction at its own convergence (0.10/0.11 iterate
    all to the slowest, which moves the others' last bits); ftrans does the same under every jax."""
    mod, fn = name.split(".")
    f = getattr(ftrans.lax if mod == "lax" else fsp, fn)
    a = np.array([0.5, 2, 5, 30, 1000, 0.1], F32)
    b = np.array([3, 2, 1, 40, 1000, 0.2], F32)
    x = np.array([0.3, 0.5, 0.99, 0.45, 0.5, 0.01], F32)
    args = (a, b, x) if "beta" in fn else (a, x * 60)
    argnum = len(args) - 1
    for fun in (f, ftrans.grad(f, argnum)):
        batched = np.asarray(ftrans.jit(ftrans.vmap(fun))(*args))
        alone = np.array([ftrans.jit(fun)(*(v[i] for v in args)) for i in range(len(a))], F32)
        np.testing.assert_array_equal(batched, alone)


def test_igamma_derivative_in_a_at_integer_a_alone():
    """At an integer ``a`` Legendre's fraction has a zero numerator (its value exact), but the derivative in
    ``a`` needs the tail: an element alone must not stop there (it ran on only while batch-mates did)."""
    a, x = np.array([1.0, 2.0, 3.0], F32), np.array([2.0, 3.5, 6.0], F32)
    h = 1e-3
    want = (ss.gammainc(a + h, x) - ss.gammainc(a - h, x)) / (2 * h)
    for i in range(len(a)):
        np.testing.assert_allclose(ftrans.lax.igamma_grad_a(a[i], x[i]), want[i], rtol=2e-4)
        np.testing.assert_allclose(ftrans.grad(fsp.gammainc)(a[i], x[i]), want[i], rtol=2e-4)
