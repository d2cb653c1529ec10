"""jax 0.12's fixes in ``scipy.stats`` and additions to ``scipy.linalg``, which ftrans follows whichever jax
is installed beside it.

- ``cauchy.ppf``/``isf``: accurate in both tails, ``-+inf`` at 0 and 1, NaN outside [0, 1];
- ``chi2.logpdf`` at ``y = 0`` for ``df = 2`` (``xlogy``), ``expon.logcdf`` near ``loc`` (``log1mexp``),
  ``norm.isf`` at small ``q`` (no ``1 - q``), ``laplace.cdf``'s gradient in the tails;
- ``multinomial.logpmf`` checks the support row by row; ``poisson.logpmf`` asks ``k - loc`` to be an integer;
  ``poisson.entropy``'s gradient is finite at tiny ``mu``; ``pareto``'s support test uses ``(x - loc)/scale``;
- NaN arguments give NaN in ``truncnorm`` and ``uniform``; ``uniform.cdf`` is a clip (its derivative at the
  interval's ends is half the inside one); ``vonmises.logpdf`` at ``kappa = 0`` is the uniform density;
- ``scipy.linalg.eigh(a, b, type=1|2|3)`` (the generalized problem), ``lu`` of stacked matrices, and ``lu``'s
  permutation matrix is real for a complex matrix.

Each is checked against SciPy / a closed form in float64 eagerly and under ``ftrans.jit``, and against jax
itself when jax 0.12 is installed (jax 0.10 and 0.11 give the old answers).
"""

from __future__ import annotations

import math

import jax
import jax.scipy.linalg as jsl
import jax.scipy.stats as jst
import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

import ftrans
import ftrans.numpy as fnp
import ftrans.scipy.linalg as fsl
import ftrans.scipy.stats as fst

F32 = np.float32
JAX012 = jax.__version_info__ >= (0, 12)


def _close(got, want, rtol=1e-5, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def _both(f, *args):
    """``f(*args)`` eagerly and under ``ftrans.jit``."""
    return np.asarray(f(*args)), np.asarray(ftrans.jit(f)(*args))


def _dgrad(f, argnum, *args):
    """The elementwise derivative of ``f`` in argument ``argnum`` (``vmap`` of ``grad``), eager and jitted."""
    g = ftrans.vmap(ftrans.grad(f, argnum))
    return np.asarray(g(*args)), np.asarray(ftrans.jit(g)(*args))


def _jax_dgrad(f, argnum, *args):
    return np.asarray(jax.vmap(jax.grad(f, argnum))(*args))


# ---------------------------------------------------------------- cauchy
Q = np.array([-0.1, 0.0, 1e-30, 1e-8, 1e-4, 0.1, 0.25, 0.3, 0.5, 0.7, 0.75, 0.9, 1 - 6e-8, 1.0, 1.2, np.nan], F32)
LOC, SCALE = F32(0.2), F32(1.5)


def _cauchy_ppf64(q):
    q = q.astype(np.float64)
    with np.errstate(all="ignore"):
        # cot(pi q) form in each half (1 - q is exact in float64 for a float32 q >= 1/2), 0 at the median
        val = np.where(q < 0.5, -1 / np.tan(np.pi * q), 1 / np.tan(np.pi * (1 - q)))
        val = np.where(q == 0.5, 0.0, np.where(q == 0, -np.inf, np.where(q == 1, np.inf, val)))
        return np.where((q < 0) | (q > 1), np.nan, LOC + SCALE * val)


def _cauchy_dppf64(q):
    q = q.astype(np.float64)
    with np.errstate(all="ignore"):
        d = np.pi * SCALE / np.sin(np.pi * q) ** 2
    d = np.where((q < 0) | (q > 1), 0.0, np.where((q == 0) | (q == 1), np.inf, d))
    with np.errstate(over="ignore"):
        return d.astype(F32)  # pi/sin(pi q)**2 overflows float32 below q ~ 3e-20


@pytest.mark.parametrize("fn", ["ppf", "isf"])
def test_cauchy_quantiles_in_the_tails(fn):
    f = lambda q: getattr(fst.cauchy, fn)(q, LOC, SCALE)  # noqa: E731
    sign = 1 if fn == "ppf" else -1
    want = _cauchy_ppf64(Q) if fn == "ppf" else 2 * LOC - _cauchy_ppf64(Q)
    for got in (*_both(f, Q), np.asarray(ftrans.vmap(f)(Q))):
        _close(got, want, rtol=2e-6)
    for got in _dgrad(f, 0, Q):
        _close(got, sign * _cauchy_dppf64(Q), rtol=2e-5)
    if JAX012:
        g = lambda q: getattr(jst.cauchy, fn)(q, LOC, SCALE)  # noqa: E731
        _close(f(Q), g(Q), rtol=2e-6)
        # jax 0.12 selects 0 at the median, which zeroes its derivative there (ftrans: pi * scale)
        off = Q != 0.5
        _close(_dgrad(f, 0, Q)[0][off], _jax_dgrad(g, 0, Q)[off], rtol=2e-5)


def test_cauchy_ppf_derivative_at_the_median():
    got = ftrans.grad(fst.cauchy.ppf)(F32(0.5))
    _close(got, np.pi)
    _close(ftrans.jit(ftrans.grad(fst.cauchy.isf))(F32(0.5)), -np.pi)


# ---------------------------------------------------------------- chi2, expon, norm, laplace
def test_chi2_logpdf_at_the_origin():
    x = np.array([0.2, 0.2, 0.2, 1.0, 0.1], F32)
    df = np.array([2.0, 3.0, 1.0, 2.0, 2.0], F32)
    loc, scale = F32(0.2), F32(1.5)
    f = lambda x, df: fst.chi2.logpdf(x, df, loc, scale)  # noqa: E731
    want = scipy.stats.chi2.logpdf(x.astype(np.float64), df, loc, scale)  # log(1/(2 scale)), -inf, inf, ...
    for got in _both(f, x, df):
        _close(got, want, rtol=2e-6)
    if JAX012:
        _close(f(x, df), jst.chi2.logpdf(x, df, loc, scale), rtol=2e-6)


EXPON_Z = np.array([-1.0, 0.0, 1e-7, 1e-5, 1e-3, 0.3, 1.0, 30.0, np.nan], F32)


def test_expon_logcdf_near_loc():
    loc, scale = F32(0.5), F32(2.0)
    x = (loc + scale * EXPON_Z).astype(F32)
    z = (x.astype(np.float64) - loc) / scale
    f = lambda x: fst.expon.logcdf(x, loc, scale)  # noqa: E731
    want = scipy.stats.expon.logcdf(x.astype(np.float64), loc, scale)
    for got in _both(f, x):
        _close(got, want, rtol=2e-5)  # log1p(-sf) lost all digits at z = 1e-7
    with np.errstate(all="ignore"):
        dwant = np.where(z < 0, 0.0, 1 / (scale * np.expm1(z)))
    for got in _dgrad(f, 0, x):
        _close(got, dwant, rtol=2e-5)
    if JAX012:
        _close(f(x), jst.expon.logcdf(x, loc, scale), rtol=2e-6)
        _close(_dgrad(f, 0, x)[0], _jax_dgrad(lambda x: jst.expon.logcdf(x, loc, scale), 0, x), rtol=2e-6)


def test_norm_isf_of_small_q():
    q = np.array([0.0, 1e-30, 1e-10, 1e-5, 0.3, 0.5, 1.0, 1.5, np.nan], F32)
    loc, scale = F32(0.2), F32(1.5)
    f = lambda q: fst.norm.isf(q, loc, scale)  # noqa: E731
    want = scipy.stats.norm.isf(q.astype(np.float64), loc, scale)  # isf(1e-10) was ppf(1.0) = inf
    for got in _both(f, q):
        _close(got, want, rtol=2e-6)
    inner = (q > 0) & (q < 1)
    dwant = -scale / scipy.stats.norm.pdf((want[inner] - loc) / scale)
    for got in _dgrad(f, 0, q):
        _close(got[inner], dwant, rtol=2e-5)
    if JAX012:
        g = lambda q: jst.norm.isf(q, loc, scale)  # noqa: E731
        _close(f(q), g(q), rtol=2e-6)
        _close(_dgrad(f, 0, q)[0][inner], _jax_dgrad(g, 0, q)[inner], rtol=2e-5)


def test_laplace_cdf_gradient_in_the_tails():
    x = np.array([-200.0, -100.0, -1.0, 0.2, 1.0, 100.0, 200.0], F32)
    loc, scale = np.full(7, 0.2, F32), np.full(7, 1.5, F32)
    z = (x.astype(np.float64) - loc[0]) / scale[0]
    pdf = np.exp(-np.abs(z)) / (2 * scale[0].astype(np.float64))
    want = {0: pdf, 1: -pdf, 2: -z * pdf}  # derivatives in x, loc and scale; jax 0.10/0.11: NaN at +-200
    tiny = float(np.finfo(F32).tiny)
    for argnum, dwant in want.items():
        for got in _dgrad(fst.laplace.cdf, argnum, x, loc, scale):
            _close(got, dwant, rtol=2e-5, atol=tiny)
        if JAX012:
            _close(_dgrad(fst.laplace.cdf, argnum, x, loc, scale)[1],
                   _jax_dgrad(jst.laplace.cdf, argnum, x, loc, scale), rtol=2e-5, atol=tiny)


# ---------------------------------------------------------------- multinomial, poisson, pareto
def test_multinomial_support_is_checked_row_by_row():
    x = np.array([[1, 2, 0, 2], [5, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], np.int32)
    n = np.array([5, 5, 5, 0], np.int32)
    p = np.array([0.1, 0.2, 0.3, 0.4], F32)
    p64 = p.astype(np.float64)  # (SciPy's multinomial refuses it: its sum is 1 + 1.5e-8)
    want = np.array([scipy.special.gammaln(k + 1) + np.sum(scipy.special.xlogy(r, p64) - scipy.special.gammaln(r + 1))
                     if r.sum() == k else -np.inf for r, k in zip(x, n)])
    for got in _both(fst.multinomial.logpmf, x, n, p):  # (float32 lgamma(1) is -1.4e-6)
        _close(got, want, rtol=2e-6, atol=2e-6)  # jax 0.10/0.11: every row -inf (sum over the whole x)
    _close(ftrans.vmap(fst.multinomial.logpmf, (0, 0, None))(x, n, p), want, rtol=2e-6, atol=2e-6)
    if JAX012:
        _close(fst.multinomial.logpmf(x, n, p), jst.multinomial.logpmf(x, n, p), rtol=2e-6)


def test_poisson_logpmf_with_a_fractional_loc():
    k = np.array([2.5, 2.0, 3.5, 0.5, -1.0, 0.0], F32)
    mu, loc = F32(3.0), F32(0.5)
    f = lambda k: fst.poisson.logpmf(k, mu, loc)  # noqa: E731
    want = scipy.stats.poisson.logpmf(k.astype(np.float64), 3.0, 0.5)  # k - loc an integer: in the support
    for got in _both(f, k):
        _close(got, want, rtol=2e-6)
    _close(fst.poisson.pmf(k, mu, loc), np.exp(want), rtol=2e-6)
    if JAX012:
        _close(f(k), jst.poisson.logpmf(k, mu, loc), rtol=2e-6)


def _poisson_entropy_derivative64(mu):
    """``dH/dmu = -sum_k p_k (k/mu - 1) log p_k`` in float64."""
    k = np.arange(2000.0)[:, None]
    logp = k * np.log(mu) - mu - scipy.special.gammaln(k + 1)
    return -np.sum(np.exp(logp) * (k / mu - 1) * logp, axis=0)


def test_poisson_entropy_gradient_is_finite():
    mu = np.array([0.0, 1e-20, 1e-6, 1e-3, 0.5, 9.99, 30.0, 99.0, 150.0], F32)
    for got in _dgrad(fst.poisson.entropy, 0, mu):
        assert np.isfinite(got).all(), got  # jax 0.10/0.11: NaN at 0 and at tiny mu
        assert got[0] == 0  # the mu = 0 branch is a constant, as in JAX
        _close(got[1:], _poisson_entropy_derivative64(mu[1:].astype(np.float64)), rtol=2e-3)
    if JAX012:
        _close(_dgrad(fst.poisson.entropy, 0, mu)[0], _jax_dgrad(jst.poisson.entropy, 0, mu), rtol=1e-4)
        _close(fst.poisson.entropy(mu), jst.poisson.entropy(mu), rtol=1e-6)


def test_pareto_support_is_tested_on_the_standardized_value():
    # x rounds below loc + scale, but (x - loc)/scale rounds to 1: the support's lower end
    x, b = np.array([3.1924975, 3.0, 5.0], F32), F32(2.5)
    loc, scale = F32(0.40826738), F32(2.7842302)
    assert x[0] < F32(loc + scale) and F32((x[0] - loc) / scale) == 1
    want = np.array([np.log(2.5 / scale), -np.inf, scipy.stats.pareto.logpdf(5.0, 2.5, loc, scale)])
    for got in _both(lambda x: fst.pareto.logpdf(x, b, loc, scale), x):
        _close(got, want, rtol=2e-6)  # jax 0.10/0.11: -inf at the first x
    if JAX012:
        _close(fst.pareto.logpdf(x, b, loc, scale), jst.pareto.logpdf(x, b, loc, scale), rtol=2e-6)


# ---------------------------------------------------------------- NaN arguments: truncnorm, uniform
@pytest.mark.parametrize("fn", ["logpdf", "pdf", "logcdf", "cdf", "logsf", "sf"])
def test_truncnorm_nan_arguments(fn):
    x = np.array([np.nan, 0.5, 0.5, 0.5, 0.5], F32)
    a = np.array([-1.0, np.nan, -1.0, 1.0, -1.0], F32)
    b = np.array([2.0, 2.0, np.nan, 1.0, 2.0], F32)
    f = getattr(fst.truncnorm, fn)
    last = getattr(scipy.stats.truncnorm, fn)(0.5, -1.0, 2.0)
    want = np.array([np.nan, np.nan, np.nan, np.nan, last])  # jax 0.10/0.11: logcdf(NaN) = 0, cdf(NaN) = 1
    for got in _both(f, x, a, b):
        _close(got, want, rtol=2e-5)
    if JAX012:
        _close(f(x, a, b), getattr(jst.truncnorm, fn)(x, a, b), rtol=2e-6)


UX = np.array([np.nan, -0.5, 1.5, 0.3, 0.3, 2.0, -1.0, 0.7], F32)
ULOC = np.array([-0.5, -0.5, -0.5, np.nan, -0.5, -0.5, -0.5, -0.5], F32)
USCALE = np.array([2.0, 2.0, 2.0, 2.0, np.nan, 2.0, 2.0, 2.0], F32)


def test_uniform_nan_arguments():
    for fn, inside, outside in (("logpdf", -np.log(2.0), -np.inf), ("pdf", 0.5, 0.0)):
        want = np.array([np.nan, inside, inside, np.nan, np.nan, outside, outside, inside])
        for got in _both(getattr(fst.uniform, fn), UX, ULOC, USCALE):
            _close(got, want, rtol=2e-6)  # jax 0.10/0.11: -log(scale) (0.5) at the NaN x
    want = np.array([np.nan, 0.0, 1.0, np.nan, np.nan, 1.0, 0.0, 0.6])
    for got in _both(fst.uniform.cdf, UX, ULOC, USCALE):
        _close(got, want, rtol=2e-6)
    if JAX012:
        for fn in ("logpdf", "pdf", "cdf"):
            _close(getattr(fst.uniform, fn)(UX, ULOC, USCALE), getattr(jst.uniform, fn)(UX, ULOC, USCALE))


# d cdf / d(x, loc, scale) as clip(z, 0, 1) = minimum(maximum(z, 0), 1) gives them: 0 outside, a tie at an
# end splits the derivative in half.  jax 0.10/0.11 (a select) took the inside derivative at both ends.
_U_DCDF = {0: [np.nan, 0.25, 0.25, 0, np.nan, 0, 0, 0.5],
           1: [np.nan, -0.25, -0.25, 0, np.nan, 0, 0, -0.5],
           2: [np.nan, 0, -0.25, np.nan, np.nan, 0, 0, -0.3]}


@pytest.mark.parametrize("argnum", [0, 1, 2])
def test_uniform_cdf_derivative_at_the_ends(argnum):
    # x[0] NaN: NaN in every derivative but loc's/x's own (a NaN tangent stays 0 through clip's selects)
    want = np.array(_U_DCDF[argnum], np.float64)
    for got in _dgrad(fst.uniform.cdf, argnum, UX, ULOC, USCALE):
        _close(got[1:], want[1:], rtol=2e-6)
    if JAX012:
        _close(_dgrad(fst.uniform.cdf, argnum, UX, ULOC, USCALE)[0],
               _jax_dgrad(jst.uniform.cdf, argnum, UX, ULOC, USCALE), rtol=2e-6)


def test_vonmises_at_zero_concentration():
    x = np.array([0.0, 1.0, 3.0, 0.5, 0.5], F32)
    kappa = np.array([0.0, 0.0, 0.0, -1.0, 2.0], F32)
    want = np.array([-math.log(2 * math.pi)] * 3 + [np.nan, scipy.stats.vonmises.logpdf(0.5, 2.0)])
    for got in _both(fst.vonmises.logpdf, x, kappa):
        _close(got, want, rtol=2e-6)  # jax 0.10/0.11: NaN at kappa = 0
    _close(fst.vonmises.pdf(x, kappa), np.exp(want), rtol=2e-6)
    # d/dkappa = cos x - i1(kappa)/i0(kappa): cos x at 0
    dk = np.cos(x[:3].astype(np.float64))
    for got in _dgrad(fst.vonmises.logpdf, 1, x, kappa):
        _close(got[:3], dk, rtol=2e-6, atol=1e-7)
        _close(got[4], np.cos(0.5) - scipy.special.i1(2.0) / scipy.special.i0(2.0), rtol=2e-5)
    if JAX012:
        _close(fst.vonmises.logpdf(x, kappa), jst.vonmises.logpdf(x, kappa), rtol=2e-6)
        _close(_dgrad(fst.vonmises.logpdf, 1, x, kappa)[0], _jax_dgrad(jst.vonmises.logpdf, 1, x, kappa),
               rtol=2e-5, atol=1e-7)


# ---------------------------------------------------------------- scipy.linalg.eigh(a, b, type)
def _hermitian(rs, shape, complex_, definite):
    m = rs.randn(*shape) + (1j * rs.randn(*shape) if complex_ else 0)
    h = m @ np.conj(np.swapaxes(m, -1, -2))
    return h + shape[-1] * np.eye(shape[-1]) if definite else h - shape[-1] * np.eye(shape[-1])


def _column_signs(v, ref):
    """``v`` with each column rotated onto ``ref``'s phase (eigenvectors are unique up to one)."""
    d = np.sum(np.conj(v) * ref, axis=-2, keepdims=True)
    return v * (d / np.abs(d))


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("kind", [1, 2, 3])
def test_eigh_generalized(kind, complex_):
    rs = np.random.RandomState(kind)
    dt = np.complex64 if complex_ else F32
    a = _hermitian(rs, (2, 4, 4), complex_, False).astype(dt)  # a batch of two against one b
    b = _hermitian(rs, (4, 4), complex_, True).astype(dt)
    a64, b64 = a.astype(np.complex128 if complex_ else np.float64), b.astype(np.complex128 if complex_ else np.float64)
    w64 = np.stack([scipy.linalg.eigh(ai, b64, type=kind, eigvals_only=True) for ai in a64])
    v64 = np.stack([scipy.linalg.eigh(ai, b64, type=kind)[1] for ai in a64])
    f = lambda a, b: fsl.eigh(a, b, type=kind)  # noqa: E731
    for w, v in (f(a, b), ftrans.jit(f)(a, b)):
        w, v = np.asarray(w), np.asarray(v)
        assert w.dtype == F32 and v.dtype == dt and w.shape == (2, 4) and v.shape == (2, 4, 4)
        scale = np.abs(w64).max()
        _close(w, w64, atol=2e-5 * scale)
        _close(_column_signs(v, v64).real, v64.real, atol=5e-4)
        _close(_column_signs(v, v64).imag, v64.imag, atol=5e-4)
    w_only = np.asarray(fsl.eigh(a, b, type=kind, eigvals_only=True))
    _close(w_only, np.asarray(f(a, b)[0]), rtol=1e-6, atol=1e-6)
    if JAX012:
        jw, jv = jsl.eigh(a, b, type=kind)
        w, v = f(a, b)
        _close(w, jw, rtol=1e-5, atol=1e-5 * np.abs(w64).max())
        _close(_column_signs(np.asarray(v), np.asarray(jv)).real, np.asarray(jv).real, atol=1e-5)


def test_eigh_generalized_gradient():
    rs = np.random.RandomState(7)
    a = _hermitian(rs, (3, 3), False, False).astype(F32)
    b = _hermitian(rs, (3, 3), False, True).astype(F32)
    loss = lambda a, b: fnp.sum(fsl.eigh(a, b, eigvals_only=True) * fnp.arange(1.0, 4.0))  # noqa: E731
    ga, gb = ftrans.grad(loss, (0, 1))(a, b)
    # d w_i = v_i^T (dA - w_i dB) v_i for B-normalized v_i (type 1), symmetrized as the input is
    w, v = scipy.linalg.eigh(a.astype(np.float64), b.astype(np.float64))
    c = np.arange(1.0, 4.0)
    want_a = (v * c) @ v.T
    want_b = -(v * (c * w)) @ v.T
    _close(ga, want_a, rtol=1e-3, atol=1e-4)
    _close((np.asarray(gb) + np.asarray(gb).T) / 2, want_b, rtol=1e-3, atol=1e-4)
    if JAX012:
        jloss = lambda a, b: (jsl.eigh(a, b, eigvals_only=True) * np.arange(1.0, 4.0)).sum()  # noqa: E731
        jga, jgb = jax.grad(jloss, (0, 1))(a, b)
        _close(ga, jga, rtol=1e-4, atol=1e-5)
        _close(gb, jgb, rtol=1e-4, atol=1e-5)


def test_eigh_errors():
    a = np.eye(3, dtype=F32)
    for kw in ({"type": 4}, {"b": a, "type": 0}):
        with pytest.raises(ValueError, match="type must be 1, 2, or 3"):
            fsl.eigh(a, **kw)
    with pytest.raises(ValueError, match="must have shape"):
        fsl.eigh(a, np.ones((3, 2), F32))
    with pytest.raises(ValueError, match="must have shape"):
        fsl.eigh(np.ones((3, 2), F32), a)
    with pytest.raises(ValueError, match="same size"):
        fsl.eigh(a, np.eye(2, dtype=F32))
    with pytest.raises(NotImplementedError):
        fsl.eigh(a, a, eigvals=(0, 1))
    if JAX012:
        with pytest.raises(ValueError, match="type must be 1, 2, or 3"):
            jsl.eigh(a, type=4)


# ---------------------------------------------------------------- scipy.linalg.lu
@pytest.mark.parametrize("dtype", [F32, np.complex64])
def test_lu_stacked_and_complex(dtype):
    rs = np.random.RandomState(3)
    a = (rs.randn(2, 3, 5, 4) + (1j * rs.randn(2, 3, 5, 4) if dtype == np.complex64 else 0)).astype(dtype)
    p, l_, u = (np.asarray(t) for t in fsl.lu(a))
    assert p.dtype == F32 and l_.dtype == u.dtype == dtype  # p real for a complex a, as SciPy's and JAX's
    assert p.shape == (2, 3, 5, 5) and l_.shape == (2, 3, 5, 4) and u.shape == (2, 3, 4, 4)
    _close(np.abs(p @ l_ @ u - a), np.zeros(a.shape), atol=1e-5)
    pl, u2 = (np.asarray(t) for t in fsl.lu(a, permute_l=True))
    assert pl.dtype == dtype and pl.shape == (2, 3, 5, 4)
    _close(np.abs(pl - p @ l_), np.zeros(pl.shape), atol=1e-6)
    for i in range(2):
        for j in range(3):
            pij, lij, uij = (np.asarray(t) for t in fsl.lu(a[i, j]))
            np.testing.assert_array_equal(pij, p[i, j])
            _close(np.abs(lij - l_[i, j]), np.zeros(lij.shape), atol=1e-6)
    if JAX012:  # jax 0.12 vectorizes lu over leading axes (0.10/0.11 refuse them)
        for ours, theirs in zip(fsl.lu(a), jsl.lu(a)):
            assert np.asarray(ours).dtype == np.asarray(theirs).dtype
            _close(np.abs(np.asarray(ours) - np.asarray(theirs)), np.zeros(np.shape(theirs)), atol=1e-5)
    else:
        for ours, theirs in zip(fsl.lu(a[0, 0]), jsl.lu(a[0, 0])):
            assert np.asarray(ours).dtype == np.asarray(theirs).dtype
