"""``ftrans.scipy.stats`` against ``jax.scipy.stats``: every function of every distribution module on inputs
covering the support, its edges and outside it (values eager and under ``jit``, ``vmap``), gradients of the
differentiable ones, and ``mode``/``rankdata``/``sem``."""

from __future__ import annotations

import functools

import jax
import jax.scipy.stats as jst
import numpy as np
import pytest

import ftrans
import ftrans.scipy.stats as fst

F = np.float32


def a(*v):
    return np.array(v, F)


X = a(-3.0, -0.5, 0.0, 0.3, 0.7, 1.0, 1.5, 4.0, 12.0)
N = X.size
Q = a(0.0, 1e-4, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.2)
K = a(-1, 0, 1, 2, 3, 5, 7, 2.5, 10)
POS = np.full(N, 2.5, F)


def full(v):
    return np.full(N, v, F)


UNIT = a(0.01, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.99)
LOC_SCALE = (full(0.2), full(1.5))
# distribution -> (first-argument kind, shape parameters, takes loc/scale)
DISTS = {
    "norm": ("x", (), LOC_SCALE),
    "uniform": ("x", (), (full(-0.5), full(2.0))),
    "expon": ("x", (), LOC_SCALE),
    "laplace": ("x", (), LOC_SCALE),
    "logistic": ("x", (), LOC_SCALE),
    "cauchy": ("x", (), LOC_SCALE),
    "t": ("x", (full(3.5),), LOC_SCALE),
    "gamma": ("x", (full(2.5),), LOC_SCALE),
    "chi2": ("x", (full(3.0),), LOC_SCALE),
    "beta": ("unit", (full(2.0), full(3.5)), ()),
    "pareto": ("x", (full(2.5),), (full(0.0), full(0.8))),
    "gumbel_l": ("x", (), LOC_SCALE),
    "gumbel_r": ("x", (), LOC_SCALE),
    "gennorm": ("x", (full(1.5),), None),
    "vonmises": ("x", (full(2.0),), None),
    "wrapcauchy": ("x", (full(0.4),), None),
    "truncnorm": ("x", (full(-1.0), full(2.0)), LOC_SCALE),
    "bernoulli": ("k", (full(0.3),), None),
    "binom": ("k", (full(8.0), full(0.35)), (full(0.0),)),
    "poisson": ("k", (full(3.5),), (full(0.0),)),
    "geom": ("k", (full(0.3),), (full(0.0),)),
    "nbinom": ("k", (full(4.0), full(0.4)), (full(0.0),)),
    "betabinom": ("k", (full(8.0), full(2.0), full(3.0)), (full(0.0),)),
}
FIRST = {"x": X, "unit": UNIT, "k": K}
FUNCS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "logpmf", "pmf")


def jax_funcs(name):
    mod = getattr(jst, name)
    return [f for f in FUNCS if hasattr(mod, f)]


CASES = [(d, f) for d in sorted(DISTS) for f in jax_funcs(d)]


def args_for(dist, fn):
    kind, shape, extra = DISTS[dist]
    first = Q if fn in ("ppf", "isf") else FIRST[kind]
    args = (first, *shape)
    if extra is not None and not (dist == "bernoulli" and fn in ("cdf", "ppf")):
        args = args + tuple(extra)
    return args


def close(ours, theirs, rtol=2e-5, atol=2e-6):
    x, y = np.asarray(ours), np.asarray(theirs)
    assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
    np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def test_every_jax_distribution_function_exists():
    for dist in [n for n in dir(jst) if not n.startswith("_")]:
        if dist == "gaussian_kde":
            continue
        theirs = getattr(jst, dist)
        ours = getattr(fst, dist)
        if callable(theirs):
            continue
        for fn in [f for f in dir(theirs) if f in FUNCS or f == "entropy"]:
            assert callable(getattr(ours, fn)), (dist, fn)


def grad_case(dist, fn):
    """The gradient check's point, parameters and argument numbers."""
    kind, shape, extra = DISTS[dist]
    x = GRAD_X[kind]
    m = x.size
    params = tuple(p[:m] for p in shape) + (tuple(e[:m] for e in extra) if extra else ())
    if dist == "truncnorm" or (dist in ("gamma", "chi2") and fn != "logpdf"):
        argnums = (0,)  # jax's derivative in a Gamma shape runs through igamma_grad_a; checked in special
    elif dist.startswith("gumbel") and fn == "logpdf":
        argnums = (0, 1)  # jax's own grad in scale fails there (xlogy(-1, scale) with an int -1: a float0)
    else:
        argnums = tuple(range(1 + len(params)))
    return (x, *params), argnums


VMAP_FUNCS = ("logpdf", "cdf", "logpmf", "ppf", "sf")
GRAD_X = {"x": a(0.3, 0.7, 1.0, 1.5, 4.0), "unit": a(0.1, 0.25, 0.5, 0.75, 0.9)}
GRAD_CASES = [(d, f) for d, f in CASES if DISTS[d][0] != "k" and f in ("logpdf", "cdf", "logcdf", "logsf")
              and not (d == "beta" and f != "logpdf")]


@functools.cache
def results(dist):
    """jax's values, ``vmap`` values and gradients of every function of ``dist``, and ftrans's ``jit``
    values: one jax program and one ftrans program per distribution (a compile per function was most of
    this file's time). The inputs are the programs' arguments, so nothing is constant-folded."""
    fns = [f for d, f in CASES if d == dist]
    inputs = {fn: args_for(dist, fn) for fn in fns}
    grads = {f: grad_case(dist, f) for d, f in GRAD_CASES if d == dist}

    def theirs(inputs, grad_inputs):
        out = {}
        for fn, args in inputs.items():
            g = getattr(getattr(jst, dist), fn)
            out[fn] = g(*args)
            if fn in VMAP_FUNCS:
                out["vmap:" + fn] = jax.vmap(g)(*args)
        for fn, args in grad_inputs.items():
            g = getattr(getattr(jst, dist), fn)
            out["grad:" + fn] = jax.grad(lambda *v: g(*v).sum(), grads[fn][1])(*args)
        return out

    def ours(inputs):
        return {fn: getattr(getattr(fst, dist), fn)(*args) for fn, args in inputs.items()}

    want = jax.jit(theirs)(inputs, {fn: c[0] for fn, c in grads.items()})
    return _fixed_in_jax012(dist, dict(want)), ftrans.jit(ours)(inputs)


JAX012 = jax.__version_info__ >= (0, 12)


def _fixed_in_jax012(dist, want):
    """The oracle with what jax 0.12 fixed put in where jax 0.10 and 0.11 still give the old answer (ftrans
    follows jax 0.12 whichever jax is installed; tests/test_jax012_j12stats.py checks the fixes themselves)."""
    if JAX012:
        return want
    if dist == "cauchy":
        # jax 0.12: the tangent of a small argument in each tail, so -inf at q = 0, inf at 1, NaN outside
        # [0, 1]; jax 0.10/0.11's tan(pi q - pi/2) is finite there and loses the tails' digits.
        q, loc, scale = (v.astype(np.float64) for v in args_for("cauchy", "ppf"))
        with np.errstate(all="ignore"):
            cot = np.where(q < 0.5, -1 / np.tan(np.pi * q), 1 / np.tan(np.pi * (1 - q)))
            t = np.where(q == 0.5, 0.0, np.where(q == 0, -np.inf, np.where(q == 1, np.inf, cot)))
            t = np.where((q < 0) | (q > 1), np.nan, t)
        want["ppf"] = want["vmap:ppf"] = (loc + scale * t).astype(F)
        want["isf"] = (loc - scale * t).astype(F)
    if dist == "uniform":
        # jax 0.12's cdf is clip(z, 0, 1), whose maximum/minimum split a tie: at an end of the interval
        # (z = 1 here) every derivative is half the inside one, which jax 0.10/0.11's select gave.
        (x, loc, scale), _ = grad_case("uniform", "cdf")
        at_end = ((x - loc) / scale == 1) | (x == loc)
        want["grad:cdf"] = tuple(np.where(at_end, np.asarray(g) / 2, np.asarray(g)).astype(F) for g in want["grad:cdf"])
    return want


def _check_values(dist, fn, want, jitted):
    args = args_for(dist, fn)
    close(getattr(getattr(fst, dist), fn)(*args), want[fn])
    close(jitted[fn], want[fn])


def _check_vmap(dist, fn, want, jitted):
    args = args_for(dist, fn)
    f = getattr(getattr(fst, dist), fn)
    close(ftrans.vmap(f)(*args), want["vmap:" + fn])


def _check_grads(dist, fn, want, jitted):
    args, argnums = grad_case(dist, fn)
    f = getattr(getattr(fst, dist), fn)
    ours = ftrans.grad(lambda *v: f(*v).sum(), argnums)(*args)
    theirs = want["grad:" + fn]
    assert len(ours) == len(theirs) == len(argnums)
    for o, t in zip(ours, theirs):
        close(o, t, 2e-4, 2e-5)


@pytest.mark.parametrize("dist", sorted(DISTS))
def test_every_function_against_jax(dist):
    """Every function of ``dist``: its values eager and under ``jit``, under ``vmap``, and its gradients.
    One test per distribution, because its checks share one jax program (``results``): as tests of their
    own they were spread over pytest-xdist's workers, and each worker compiled it (truncnorm's, 10 s).
    Every check runs; the failure lists each one that failed."""
    want, jitted = results(dist)
    checks = [("values", _check_values, f) for d, f in CASES if d == dist]
    checks += [("vmap", _check_vmap, f) for d, f in CASES if d == dist and f in VMAP_FUNCS]
    checks += [("grad", _check_grads, f) for d, f in GRAD_CASES if d == dist]
    assert checks
    failed = []
    for what, check, fn in checks:
        try:
            check(dist, fn, want, jitted)
        except AssertionError as e:
            failed.append(f"{dist}.{fn} ({what}): {e}")
    assert not failed, "\n\n".join(failed)


def test_discrete_grads_in_parameters():
    k = a(0, 1, 2, 3, 5)
    cases = [("poisson", (a(3.5, 1, 2, 7, 4),)), ("binom", (full(8)[:5], a(0.3, 0.4, 0.5, 0.6, 0.7))),
             ("nbinom", (full(4)[:5], a(0.3, 0.4, 0.5, 0.6, 0.7))), ("geom", (a(0.3, 0.4, 0.5, 0.6, 0.7),))]
    for dist, params in cases:
        f, g = getattr(fst, dist).logpmf, getattr(jst, dist).logpmf
        argnums = tuple(range(1, 1 + len(params)))
        ours = ftrans.grad(lambda *v: f(*v).sum(), argnums)(k, *params)
        theirs = jax.jit(jax.grad(lambda *v: g(*v).sum(), argnums))(k, *params)
        for o, t in zip(ours, theirs):
            close(o, t, 2e-4, 2e-5)


def test_poisson_cdf_and_entropy():
    mu = a(0.0, 0.5, 3.0, 9.9, 25.0, 99.0, 150.0)
    m, loc = np.full((3, 1), 2.5, np.float32), np.zeros((2, 3, 4), np.float32)
    # jax's values from one program (eagerly jax compiles each of its operations apart)
    entropy, cdf, want = jax.jit(lambda mu, k, m, loc: (jst.poisson.entropy(mu), jst.poisson.cdf(k, F(3.5)),
                                                        jst.poisson.entropy(m, loc)))(mu, K, m, loc)
    close(fst.poisson.entropy(mu), entropy, 1e-4, 1e-5)
    close(fst.poisson.cdf(K, 3.5), cdf)
    # loc does not change the entropy, but its shape broadcasts into the result's (as in JAX)
    got = fst.poisson.entropy(m, loc)
    assert got.shape == want.shape == (2, 3, 4)
    close(got, want, 1e-4, 1e-5)


def test_multivariate_normal():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((4, 3)).astype(F)
    cov = (m.T @ m + np.eye(3)).astype(F)
    x = rng.standard_normal((5, 3)).astype(F)
    mean = a(0.1, -0.2, 0.3)
    cases = [(x, mean, cov), (x, mean, F(2.0)), (x[:, 0], F(0.5), F(1.5)), (x, np.stack([mean] * 5), cov)]
    # jax's values and gradient from one program (eagerly jax compiles each of its operations apart)
    logpdfs, pdfs, theirs = jax.jit(lambda cases, x, mean, cov: (
        [jst.multivariate_normal.logpdf(*args) for args in cases], [jst.multivariate_normal.pdf(*args) for args in cases],
        jax.grad(lambda mu, c: jst.multivariate_normal.logpdf(x, mu, c).sum(), (0, 1))(mean, cov)))(cases, x, mean, cov)
    for args, logpdf, pdf in zip(cases, logpdfs, pdfs, strict=True):
        close(fst.multivariate_normal.logpdf(*args), logpdf, 1e-4, 1e-5)
        close(ftrans.jit(fst.multivariate_normal.pdf)(*args), pdf, 1e-4, 1e-7)
    ours = ftrans.grad(lambda mu, c: fst.multivariate_normal.logpdf(x, mu, c).sum(), (0, 1))(mean, cov)
    for o, t in zip(ours, theirs):
        close(o, t, 1e-3, 1e-5)
    with pytest.raises(ValueError, match="incompatible"):
        fst.multivariate_normal.logpdf(x, mean, np.eye(2, dtype=F))
    with pytest.raises(NotImplementedError):
        fst.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)


def test_dirichlet_and_multinomial():
    alpha = a(1.5, 2.0, 0.7)
    x = a(0.2, 0.5, 0.3)
    xs = np.array([[0.2, 0.1], [0.5, 0.6]], F)  # the last component implied
    cases = [(x, alpha), (xs, alpha), (a(0.2, 0.9, 0.3), alpha)]
    counts = np.array([2, 3, 5], np.int32)
    p = a(0.2, 0.3, 0.5)
    # jax's values and gradient from one program (eagerly jax compiles each of its operations apart)
    logpdfs, grad, logpmfs, pmf = jax.jit(lambda cases, x, alpha, counts, p: (
        [jst.dirichlet.logpdf(*args) for args in cases], jax.grad(lambda al: jst.dirichlet.logpdf(x, al))(alpha),
        [jst.multinomial.logpmf(counts, n, p) for n in (10, 9)], jst.multinomial.pmf(counts, 10, p)))(
            cases, x, alpha, counts, p)
    for args, logpdf in zip(cases, logpdfs, strict=True):
        close(fst.dirichlet.logpdf(*args), logpdf, 1e-5, 1e-5)
    close(ftrans.grad(lambda al: fst.dirichlet.logpdf(x, al))(alpha), grad, 1e-4, 1e-5)
    for n, logpmf in zip((10, 9), logpmfs, strict=True):
        close(fst.multinomial.logpmf(counts, n, p), logpmf, 1e-5, 1e-5)
    close(fst.multinomial.pmf(counts, 10, p), pmf, 1e-5, 1e-6)
    with pytest.raises(ValueError, match="integer"):
        fst.multinomial.logpmf(counts.astype(F), 10, p)
    with pytest.raises(ValueError, match="one-dimensional"):
        fst.dirichlet.logpdf(x, alpha[None])


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata(method):
    v = a(3, 1, 4, 1, 5, 9, 2, 6, 5, 3)
    m = v.reshape(2, 5)
    w = a(1, np.nan, 2)
    # jax's three rankings in one program (eagerly jax compiles each of its operations apart)
    want = jax.jit(lambda v, m, w: (jst.rankdata(v, method), jst.rankdata(m, method, axis=1),
                                    jst.rankdata(w, method)))(v, m, w)
    close(fst.rankdata(v, method), want[0])
    close(fst.rankdata(m, method, axis=1), want[1])
    close(ftrans.jit(lambda u: fst.rankdata(u, method))(v), want[0])
    close(fst.rankdata(w, method), want[2])


def test_mode_and_sem():
    v = np.array([[1, 2, 2, 3], [3, 3, 1, 1], [0, 2, 2, 1]], np.int32)
    x = np.linspace(0, 3, 12, dtype=F).reshape(3, 4)
    x[1, 2] = np.nan
    mode_kws = [{}, dict(axis=1), dict(axis=None), dict(axis=0, keepdims=True), dict(axis=None, keepdims=True)]
    sem_kws = [{}, dict(axis=1, ddof=0), dict(axis=None), dict(nan_policy="omit", axis=1), dict(keepdims=True)]
    modes, sems = jax.jit(lambda v, x: ([tuple(jst.mode(v, **kw)) for kw in mode_kws],  # one jax program
                                        [jst.sem(x, **kw) for kw in sem_kws]))(v, x)
    for kw, theirs in zip(mode_kws, modes, strict=True):
        ours = fst.mode(v, **kw)
        close(ours.mode, theirs[0])
        close(ours.count, theirs[1])
    for kw, theirs in zip(sem_kws, sems, strict=True):
        close(fst.sem(x, **kw), theirs, 1e-5, 1e-6)
    with pytest.raises(ValueError):
        fst.rankdata(x, "bogus")
    with pytest.raises(NotImplementedError):
        fst.mode(v, nan_policy="omit")


@pytest.mark.parametrize("dist,fn", [("norm", "logpdf"), ("gamma", "cdf"), ("beta", "sf"), ("pareto", "ppf"),
                                     ("poisson", "logpmf"), ("t", "logpdf"), ("chi2", "logsf")])
def test_mixed_rank_arguments_broadcast(dist, fn):
    first = (Q if fn == "ppf" else (UNIT if dist == "beta" else np.abs(X)))[:, None]
    shape = [np.linspace(1.5, 3.0, 4, dtype=F)] * len(DISTS[dist][1])
    f, g = getattr(getattr(fst, dist), fn), getattr(getattr(jst, dist), fn)
    close(f(first, *shape), jax.jit(g)(first, *shape))


_rng = np.random.default_rng(1)
D1 = _rng.standard_normal(30).astype(F)
D2 = _rng.standard_normal((2, 40)).astype(F)
W2 = _rng.random(40).astype(F)
P2 = _rng.standard_normal((2, 5)).astype(F)
PTS1 = np.linspace(-2, 2, 7).astype(F)


@pytest.mark.parametrize("bw", [None, "scott", "silverman", 0.4, lambda k: 0.3])
def test_gaussian_kde_1d(bw):
    ours = fst.gaussian_kde(D1, bw)

    def theirs(d, pts):  # one jax program (eagerly jax compiles each of its operations apart)
        k = jst.gaussian_kde(d, bw)
        return k(pts), k.logpdf(pts), k.pdf(pts), k.integrate_box_1d(-1.0, 0.5), k.covariance

    want = jax.jit(theirs)(D1, PTS1)
    close(ours(PTS1), want[0], 1e-5, 1e-7)
    close(ours.logpdf(PTS1), want[1], 1e-5, 1e-6)
    close(ours.pdf(PTS1), want[2], 1e-5, 1e-7)
    close(ours.integrate_box_1d(-1.0, 0.5), want[3], 1e-5, 1e-7)
    close(ours.covariance, want[4], 1e-5, 1e-7)


def test_gaussian_kde_weighted_2d_jit_grad_resample():
    ours = fst.gaussian_kde(D2, weights=W2)
    z, eye = np.zeros(2, F), np.eye(2, dtype=F)

    def oracle(d, w, p, z, eye):  # one jax program (eagerly jax compiles each of its operations apart)
        theirs = jst.gaussian_kde(d, weights=w)
        return (theirs(p), theirs.logpdf(p), theirs.neff, theirs.integrate_gaussian(z, eye),
                theirs.integrate_kde(jst.gaussian_kde(d[:, :10])),
                jax.grad(lambda d: jst.gaussian_kde(d).logpdf(p).sum())(d),
                theirs.resample(jax.random.PRNGKey(0), (4,)))

    value, logpdf, neff, integral, integral_kde, grad, sample = jax.jit(oracle)(D2, W2, P2, z, eye)
    close(ours(P2), value, 1e-5, 1e-7)
    close(ours.logpdf(P2), logpdf, 1e-5, 1e-6)
    close(ours.neff, neff, 1e-5, 1e-6)
    close(ours.integrate_gaussian(z, eye), integral, 1e-5, 1e-7)
    close(ours.integrate_kde(fst.gaussian_kde(D2[:, :10])), integral_kde, 1e-5, 1e-7)
    close(ftrans.jit(lambda k, p: k.evaluate(p))(ours, P2), value, 1e-5, 1e-7)  # a pytree argument
    close(ftrans.grad(lambda d: fst.gaussian_kde(d).logpdf(P2).sum())(D2), grad, 1e-3, 1e-5)
    close(ours.resample(ftrans.random.PRNGKey(0), (4,)), sample, 1e-5, 1e-6)
    with pytest.raises(ValueError, match="dimension"):
        ours(np.ones((3, 2), F))
    with pytest.raises(ValueError, match="1D"):
        ours.integrate_box_1d(0.0, 1.0)
    with pytest.raises(NotImplementedError):
        ours.set_bandwidth("scott")
    with pytest.raises(ValueError, match="bw_method"):
        fst.gaussian_kde(D1, "bogus")
