"""``ftrans.random``'s distributions (gamma, beta, poisson, ...) against ``jax.random``.

Every sampler is compared with jax 0.10's for several keys, shapes, dtypes
and parameters: values bit for bit (viewed as unsigned integers) where XLA
computes the same program, and shapes and dtypes always equal. Also under
``jit`` and ``vmap`` over keys, and the implicit-reparameterisation
gradients of gamma, loggamma, beta, dirichlet, t and chisquare against
``jax.grad``. Bad input raises ftrans's error types naming the caller's line.

The jax oracle runs eagerly: jax's samplers are jitted internally with the
parameters as arguments, which is what ftrans's are, so the two XLA programs
agree; a ``jax.jit`` around a call with constant parameters lets XLA fold
them and can move the last bit.
"""

from __future__ import annotations

import warnings

import jax
import jax.random as jr
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as fnp
import ftrans.random as fr
from ftrans import errors
from tests.hypothesis_budget import examples
from tests.thorough import THOROUGH

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32
HERE = "test_random_distributions.py:"
KEYS = {s: np.asarray(jr.PRNGKey(s)) for s in (0, 1, 42)}

A4 = np.array([0.3, 1.0, 2.5, 7.0], F32)
LAM = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 12.0, 100.0, 1e4], F32)
MEAN = np.array([1.0, -2.0, 0.5], F32)
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]], F32)
BIN_N = np.array([5.0, 20.0, 100.0, 1000.0, 0.0, 7.0], F32)
BIN_P = np.array([0.3, 0.6, 0.5, 0.01, 0.5, 1.0], F32)
DIR_A = np.array([0.5, 1.0, 3.0], F32)
MN_P = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], F32)


def same_bits(ours, theirs):
    """Equal shape, dtype and bit pattern."""
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    if a.dtype == np.bool_:
        np.testing.assert_array_equal(a, b)
        return
    ua = a.reshape(-1).view(f"u{a.dtype.itemsize}")
    ub = b.reshape(-1).view(f"u{b.dtype.itemsize}")
    bad = np.flatnonzero(ua != ub)
    assert bad.size == 0, (f"{bad.size} of {a.size} differ, first at {bad[0]}: "
                           f"{a.reshape(-1)[bad[0]]} vs {b.reshape(-1)[bad[0]]}")


def close(ours, theirs, rtol=2e-6, atol=0.0):
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol)


def jax_call(name, key, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(jr, name)(key, *args, **kw)


class _SamePath(tuple):
    """A case whose code path an unmarked case of the same function takes too (another dtype of a class
    kept, scalar parameters beside array ones, another value of the same parameter): drawn by the
    thorough run only (``HYPOTHESIS_PROFILE=full``, tests/thorough.py)."""


def same_path(name, args, kw):
    return _SamePath((name, args, kw))


# (function, positional arguments, keyword arguments); several shapes, dtypes and parameters each. The
# quick run keeps every function, every dtype class, the parameter forms (scalar with a shape, arrays,
# broadcasting) and the edge values (NaN, inf, tiny shapes, m < n and m > n); ``same_path`` marks the rest.
ALL_CASES = [
    ("exponential", ((3, 4),), {}),
    same_path("exponential", ((5,), np.float16), {}),
    ("exponential", ((2, 3), BF16), {}),
    ("laplace", ((3, 4),), {}),
    same_path("laplace", ((5,), np.float16), {}),
    ("logistic", ((3, 4),), {}),
    same_path("logistic", ((5,), BF16), {}),
    ("cauchy", ((3, 4),), {}),
    same_path("cauchy", ((5,), np.float16), {}),
    ("rademacher", ((3, 4),), {}),
    same_path("rademacher", ((5,), np.int8), {}),
    ("rademacher", ((5,), F32), {}),
    ("maxwell", ((3,),), {}),
    same_path("maxwell", ((2, 2), np.float16), {}),
    same_path("double_sided_maxwell", (0.5, 2.0, (3,)), {}),
    ("double_sided_maxwell", (np.array([0.0, 1.0], F32), 1.5), {}),
    same_path("weibull_min", (2.0, 1.5, (3, 4)), {}),
    ("weibull_min", (np.array([1.0, 2.0], F32), 0.5, (3, 2)), {}),
    ("gamma", (A4,), {}),
    same_path("gamma", (2.0, (3, 2)), {}),
    same_path("gamma", (np.array([[0.1], [5.0]], F32), (2, 3)), {}),
    same_path("gamma", (A4, None, np.float16), {}),
    same_path("gamma", (A4, None, BF16), {}),
    # (a broadcast shape parameter with bfloat16 draws: the two cases above in one program, below and above 1)
    ("gamma", (np.array([[0.1], [5.0]], F32), (2, 3), BF16), {}),
    ("loggamma", (A4,), {}),
    same_path("loggamma", (0.01, (5,)), {}),
    # (scalar parameters with a shape: the float16 case below takes that form too)
    same_path("beta", (0.5, 2.0, (5,)), {}),
    ("beta", (A4, A4[::-1].copy()), {}),
    ("beta", (0.05, 0.05, (4,), np.float16), {}),
    ("dirichlet", (DIR_A, (2,)), {}),
    same_path("dirichlet", (np.array([[0.1, 0.2], [4.0, 1.0]], F32),), {}),
    same_path("t", (3.0, (5,)), {}),
    ("t", (A4,), {}),
    same_path("chisquare", (3.0, (5,)), {}),
    ("chisquare", (A4,), {}),
    same_path("f", (3.0, 5.0, (5,)), {}),
    ("f", (A4, 2.0), {}),
    same_path("pareto", (2.0, (5,)), {}),
    ("pareto", (A4, None, F32), {}),
    ("poisson", (LAM,), {}),
    same_path("poisson", (3.0, (5,)), {}),
    same_path("poisson", (np.array([1.0, 50.0], F32), (3, 2)), {}),
    same_path("poisson", (LAM[:4], None, np.int16), {}),  # (another integer dtype)
    same_path("geometric", (0.3, (5,)), {}),
    ("geometric", (np.array([0.01, 0.5, 0.99], F32),), {}),
    same_path("rayleigh", (2.0, (5,)), {}),
    ("rayleigh", (A4,), {}),
    same_path("wald", (1.5, (5,)), {}),
    ("wald", (A4,), {}),
    same_path("triangular", (0.0, 0.3, 1.0, (5,)), {}),
    ("triangular", (np.zeros(4, F32), A4 / 8, np.ones(4, F32)), {}),
    same_path("lognormal", (), {"shape": (4,)}),
    ("lognormal", (0.5, (5,)), {}),
    same_path("generalized_normal", (1.5, (5,)), {}),
    ("generalized_normal", (0.7, (2, 2)), {}),
    ("ball", (3,), {"shape": (4,)}),
    same_path("ball", (2, 1.0, (3,)), {}),
    ("orthogonal", (3, (2,)), {}),
    ("orthogonal", (4,), {"m": 2}),
    ("orthogonal", (2,), {"m": 3}),
    ("orthogonal", (3, (2,), np.complex64), {}),
    same_path("orthogonal", (2, (), np.complex64), {"m": 3}),
    ("multivariate_normal", (MEAN, COV, (4,)), {}),
    ("multivariate_normal", (np.stack([MEAN, -MEAN]), COV), {}),
    ("binomial", (BIN_N, BIN_P), {}),
    same_path("binomial", (10.0, 0.3, (5,)), {}),
    # NaN and infinite counts against every kind of probability, the counts broadcast against it (one program)
    ("binomial", (np.array([[np.nan], [np.inf]], F32), np.array([0.2, 0.7, -0.1, np.nan], F32)), {}),
    same_path("binomial", (np.float32(np.nan), np.array([0.2, -0.1, np.nan], F32)), {}),
    same_path("binomial", (np.float32(np.inf), np.array([0.2, 0.7], F32)), {}),
    ("multinomial", (20.0, MN_P), {}),
    same_path("multinomial", (np.array([5.0, 50.0], F32), np.array([0.25, 0.25, 0.5], F32)), {"shape": (2, 3)}),
]
CASES = [c for c in ALL_CASES if THOROUGH or not isinstance(c, _SamePath)]


def _id(case):
    name, args, kw = case
    return name + "-" + "-".join(str(np.shape(a)) if isinstance(a, np.ndarray) else str(a) for a in args) + (
        str(kw) if kw else "")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_matches_jax(case):
    name, args, kw = case
    index = next(i for i, c in enumerate(ALL_CASES) if c is case)
    for seed in (index % 2 * 42,):  # the two keys alternate over the cases
        ours = getattr(fr, name)(KEYS[seed], *args, **kw)
        theirs = jax_call(name, KEYS[seed], *args, **kw)
        if name == "logistic" and jax.__version_info__ >= (0, 11):
            # jax 0.11's XLA rounds log(u) - log1p(-u) differently in the last bit of a term, which the
            # cancellation makes a few ulps of the result; ftrans (NumPy's log, log1p) has jax 0.10's bits
            close(ours, theirs, rtol=1e-6, atol=1e-7)
            continue
        same_bits(ours, theirs)


KEY_WORDS = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))


def _key(words):
    return np.array(words, np.uint32)


@settings(max_examples=examples(15), deadline=None)
@given(KEY_WORDS, hnp.arrays(F32, (4,), elements=st.floats(1 / 64, 60.0, width=32)))
def test_gamma_any_key_and_shape_parameter(words, a):
    same_bits(fr.gamma(_key(words), a), jax_call("gamma", _key(words), a))
    same_bits(fr.loggamma(_key(words), a), jax_call("loggamma", _key(words), a))


@settings(max_examples=examples(15), deadline=None)
@given(KEY_WORDS, hnp.arrays(F32, (4,), elements=st.floats(0.0, 300.0, width=32)))
def test_poisson_any_key_and_rate(words, lam):
    same_bits(fr.poisson(_key(words), lam), jax_call("poisson", _key(words), lam))


@settings(max_examples=examples(15), deadline=None)
@given(KEY_WORDS, hnp.arrays(F32, (3,), elements=st.floats(0.0, 500.0, width=32)),
       hnp.arrays(F32, (3,), elements=st.floats(0.0, 1.0, width=32)))
def test_binomial_any_key_count_and_probability(words, n, p):
    same_bits(fr.binomial(_key(words), n, p), jax_call("binomial", _key(words), n, p))


@pytest.mark.parametrize("method", ["svd", "eigh"])
def test_multivariate_normal_other_factorisations(method):
    ours = fr.multivariate_normal(KEYS[1], MEAN, COV, (4,), method=method)
    theirs = jax_call("multivariate_normal", KEYS[1], MEAN, COV, (4,), method=method)
    close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_float64_under_x64():
    ours64, theirs64 = ftrans.config.enable_x64, jax.config.jax_enable_x64
    ftrans.config.update("enable_x64", True)
    jax.config.update("jax_enable_x64", True)
    try:
        a = A4.astype(np.float64)
        for name, args in [("gamma", (a,)), ("beta", (a, 2.0)), ("exponential", ((4,),)),
                           ("poisson", (LAM,)), ("binomial", (50.0, 0.4, (3,)))]:
            ours = getattr(fr, name)(KEYS[1], *args)
            theirs = jax_call(name, KEYS[1], *args)
            same_bits(ours, theirs)
            assert np.asarray(ours).dtype in (np.float64, np.int64)
    finally:
        ftrans.config.update("enable_x64", ours64)
        jax.config.update("jax_enable_x64", theirs64)


# ---------------------------------------------------------------- transforms
# The arguments are some of CASES's, so the unbatched and eager programs are compiled once for both tests.
JIT_CASES = [("gamma", (A4,)), ("beta", (A4, A4[::-1].copy())), ("poisson", (LAM,)), ("t", (A4,)),
             ("binomial", (BIN_N, BIN_P)), ("dirichlet", (DIR_A, (2,))), ("exponential", ((3, 4),)),
             ("multivariate_normal", (MEAN, COV, (4,)))]


@pytest.mark.parametrize("name,args", JIT_CASES, ids=[c[0] for c in JIT_CASES])
def test_under_jit_parameters_traced(name, args):
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    static = [a if not isinstance(a, np.ndarray) else None for a in args]

    def call(k, *arrs):
        it = iter(arrs)
        return getattr(fr, name)(k, *[next(it) if s is None else s for s in static])

    ours = ftrans.jit(call)(KEYS[42], *arrays)
    same_bits(ours, jax_call(name, KEYS[42], *args))


# loggamma and beta batch through gamma's rule (random_gamma_p's batched split, then one loop), as dirichlet
# does: the thorough run only here (their vmap over keys is checked in the quick run too, loggamma's in
# test_random_gamma_primitive.py, beta's in test_random_rbg.py)
VMAP_CASES = [("gamma", (A4,)), *([("loggamma", (A4,)), ("beta", (A4, A4[::-1].copy()))] if THOROUGH else []),
              ("poisson", (LAM,)), ("binomial", (BIN_N, BIN_P)), ("dirichlet", (DIR_A, (2,))), ("laplace", ((3, 4),)),
              ("orthogonal", (3, (2,))), ("multinomial", (20.0, MN_P))]


@pytest.mark.parametrize("name,args", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_over_keys(name, args):
    keys = np.asarray(jr.split(jr.PRNGKey(7), 3))
    ours = ftrans.vmap(lambda k: getattr(fr, name)(k, *args))(keys)
    theirs = jax.vmap(lambda k: jax_call(name, k, *args))(keys)
    # Batched rejection loops keep JAX's values; XLA may fuse the batched arithmetic
    # differently, which can move a float's last bit.
    close(ours, theirs, rtol=4e-6, atol=1e-7)
    # Per key, the batch holds what an unbatched call gives.
    for i in range(3):
        close(ours[i], getattr(fr, name)(keys[i], *args), rtol=4e-6, atol=1e-7)


def test_vmap_over_keys_and_parameters_is_exact():
    keys = np.asarray(jr.split(jr.PRNGKey(7), 3))
    a = np.stack([A4, A4 + 1, A4 * 3])
    same_bits(ftrans.vmap(fr.gamma)(keys, a), jax.vmap(jr.gamma)(keys, a))
    lam = np.stack([LAM, LAM[::-1]])
    same_bits(ftrans.vmap(fr.poisson)(keys[:2], lam), jax.vmap(jr.poisson)(keys[:2], lam))


# gamma's gradient on A4 takes the path of its small-and-large case (whose shape parameters reach both ends
# of the series and continued-fraction branches) and of test_grad_under_jit_and_vmap: the thorough run only.
GRAD_CASES = [
    *([("gamma", lambda s, a: s(KEYS[1], a).sum(), A4)] if THOROUGH else []),
    ("loggamma", lambda s, a: s(KEYS[1], a).sum(), A4),
    ("gamma_small_and_large", lambda s, a: (s(KEYS[0], a) ** 2).sum(), np.array([0.02, 0.9, 30.0, 400.0], F32)),
    ("t", lambda s, a: s(KEYS[1], a).sum(), A4 + 1),
    ("chisquare", lambda s, a: s(KEYS[1], a).sum(), A4),
]


@pytest.mark.parametrize("label,fn,a", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_matches_jax(label, fn, a):
    name = label.split("_")[0]
    ours = ftrans.grad(lambda x: fn(getattr(fr, name), x))(a)
    theirs = jax.jit(jax.grad(lambda x: fn(getattr(jr, name), x)))(a)  # eager jax.grad: a compile per op
    close(ours, theirs, rtol=2e-5, atol=1e-6)
    assert np.all(np.isfinite(np.asarray(ours)))


def test_grad_of_beta_in_both_parameters():
    b = A4[::-1].copy()
    ours = ftrans.grad(lambda a, b: (fr.beta(KEYS[42], a, b) * A4).sum(), (0, 1))(A4, b)
    theirs = jax.jit(jax.grad(lambda a, b: (jr.beta(KEYS[42], a, b) * A4).sum(), (0, 1)))(A4, b)
    for o, t in zip(ours, theirs):
        close(o, t, rtol=2e-5, atol=1e-6)


def test_grad_of_dirichlet():
    w = np.array([1.0, -2.0, 3.0, 0.5], F32)
    ours = ftrans.grad(lambda a: (fr.dirichlet(KEYS[0], a, (3,)) * w).sum())(A4)
    theirs = jax.jit(jax.grad(lambda a: (jr.dirichlet(KEYS[0], a, (3,)) * w).sum()))(A4)
    close(ours, theirs, rtol=2e-5, atol=1e-6)


def test_grad_under_jit_and_vmap():
    keys = np.asarray(jr.split(jr.PRNGKey(3), 2))
    ours = ftrans.jit(ftrans.vmap(ftrans.grad(lambda k, a: fr.gamma(k, a).sum(), 1), (0, None)))(keys, A4)
    theirs = jax.jit(jax.vmap(jax.grad(lambda k, a: jr.gamma(k, a).sum(), 1), (0, None)))(keys, A4)
    close(ours, theirs, rtol=2e-5, atol=1e-6)


def test_gamma_value_and_jvp():
    t = np.ones_like(A4)
    (p1, t1) = ftrans.jvp(lambda a: fr.gamma(KEYS[1], a), (A4,), (t,))
    (p2, t2) = jax.jvp(lambda a: jr.gamma(KEYS[1], a), (A4,), (t,))
    same_bits(p1, p2)
    close(t1, t2, rtol=2e-5)


def test_key_utilities():
    k = fr.PRNGKey(5)
    same_bits(fr.clone(k), k)
    assert fr.key_impl(k) == jr.key_impl(jr.key(5)) == "threefry2x32"
    assert str(fr.key_dtype()) == "key<fry>"
    ks = fr.split(k, 3)
    same_bits(fr.clone(ks), ks)


def test_samples_are_plausible():
    # Moments of large draws, against the distributions (not only against jax).
    k = fr.PRNGKey(0)
    g = np.asarray(fr.gamma(k, 3.0, (20000,)))
    assert abs(g.mean() - 3.0) < 0.08 and abs(g.var() - 3.0) < 0.25
    p = np.asarray(fr.poisson(k, 25.0, (20000,)))
    assert abs(p.mean() - 25.0) < 0.2
    b = np.asarray(fr.binomial(k, 40.0, 0.3, (20000,)))
    assert abs(b.mean() - 12.0) < 0.15 and b.min() >= 0 and b.max() <= 40
    m = np.asarray(fr.multinomial(k, 30.0, np.array([0.2, 0.3, 0.5], F32), shape=(5000, 3)))
    assert np.all(m.sum(-1) == 30.0)
    q = np.asarray(fr.orthogonal(k, 4, (3,)))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), (3, 4, 4)), atol=1e-5)


# ---------------------------------------------------------------- errors
def _raises(exc, match, fn):
    with pytest.raises(exc) as ei:
        fn()
    assert match in str(ei.value), str(ei.value)
    assert HERE in str(ei.value), str(ei.value)
    return ei.value


K = np.asarray(jr.PRNGKey(0))

WRONG_PARAM_SHAPE = [
    ("gamma", lambda: fr.gamma(K, np.ones(3, F32), (2, 4))),
    ("loggamma", lambda: fr.loggamma(K, np.ones(3, F32), (4,))),
    ("beta", lambda: fr.beta(K, np.ones(3, F32), np.ones(2, F32))),
    ("beta", lambda: fr.beta(K, 1.0, np.ones(2, F32), (3,))),
    ("t", lambda: fr.t(K, np.ones(3, F32), (2,))),
    ("chisquare", lambda: fr.chisquare(K, np.ones((2, 3), F32), (3,))),
    ("f", lambda: fr.f(K, np.ones(3, F32), np.ones(4, F32))),
    ("poisson", lambda: fr.poisson(K, np.ones(3, F32), (5,))),
    ("binomial", lambda: fr.binomial(K, np.ones(3, F32), 0.5, (4,))),
    ("pareto", lambda: fr.pareto(K, np.ones(3, F32), (2,))),
    ("geometric", lambda: fr.geometric(K, np.full(3, 0.5, F32), (2,))),
    ("rayleigh", lambda: fr.rayleigh(K, np.ones(3, F32), (2,))),
    ("wald", lambda: fr.wald(K, np.ones(3, F32), (2,))),
    ("triangular", lambda: fr.triangular(K, 0.0, np.ones(2, F32) / 2, np.ones(3, F32))),
    ("lognormal", lambda: fr.lognormal(K, np.ones(3, F32), (2,))),
    ("weibull_min", lambda: fr.weibull_min(K, np.ones(3, F32), 1.0, (2,))),
    ("dirichlet", lambda: fr.dirichlet(K, np.ones((2, 3), F32), (4,))),
    ("multinomial", lambda: fr.multinomial(K, np.ones(3, F32), np.full(2, 0.5, F32))),
    ("multivariate_normal", lambda: fr.multivariate_normal(K, MEAN, np.eye(2, dtype=F32))),
    ("multivariate_normal", lambda: fr.multivariate_normal(K, np.zeros((2, 3), F32), COV, (3,))),
]


@pytest.mark.parametrize("name,fn", WRONG_PARAM_SHAPE, ids=[c[0] for c in WRONG_PARAM_SHAPE])
def test_parameter_of_the_wrong_shape(name, fn):
    err = _raises(errors.FtransValueError, f"ftrans.random.{name}", fn)
    assert "shape" in str(err)


NON_KEY = [
    ("gamma", lambda bad: fr.gamma(bad, 1.0)),
    ("beta", lambda bad: fr.beta(bad, 1.0, 2.0)),
    ("poisson", lambda bad: fr.poisson(bad, 3.0)),
    ("exponential", lambda bad: fr.exponential(bad, (2,))),
    ("multivariate_normal", lambda bad: fr.multivariate_normal(bad, MEAN, COV)),
    ("orthogonal", lambda bad: fr.orthogonal(bad, 3)),
    ("binomial", lambda bad: fr.binomial(bad, 3.0, 0.5)),
    ("multinomial", lambda bad: fr.multinomial(bad, 3.0, np.full(2, 0.5, F32))),
]


@pytest.mark.parametrize("name,fn", NON_KEY, ids=[c[0] for c in NON_KEY])
@pytest.mark.parametrize("bad", [np.zeros(2, F32), "key", np.zeros(3, np.uint32)], ids=["float", "str", "len3"])
def test_non_key_argument(name, fn, bad):
    _raises(errors.FtransTypeError, "key", lambda: fn(bad))


def test_batch_of_keys_needs_vmap():
    _raises(errors.FtransValueError, "vmap", lambda: fr.gamma(np.asarray(jr.split(jr.PRNGKey(0), 2)), 1.0))


WRONG_DTYPE = [
    (errors.FtransValueError, "float dtype", lambda: fr.gamma(K, 1.0, dtype=np.int32)),
    (errors.FtransValueError, "float dtype", lambda: fr.beta(K, 1.0, 1.0, dtype=np.int32)),
    (errors.FtransValueError, "float dtype", lambda: fr.exponential(K, (2,), np.int32)),
    (errors.FtransValueError, "float dtype", lambda: fr.binomial(K, 3.0, 0.5, dtype=np.int32)),
    (errors.FtransValueError, "integer dtype", lambda: fr.poisson(K, 3.0, dtype=F32)),
    (errors.FtransValueError, "integer dtype", lambda: fr.geometric(K, 0.5, dtype=F32)),
    (errors.FtransValueError, "safely cast", lambda: fr.t(K, np.ones(2, F32), dtype=np.float16)),
    (errors.FtransValueError, "safely cast", lambda: fr.beta(K, np.ones(2, F32), 1.0, dtype=np.float16)),
    (errors.FtransTypeError, "real", lambda: fr.gamma(K, np.ones(2, np.complex64))),
    (errors.FtransTypeError, "array or a scalar", lambda: fr.gamma(K, [1.0, 2.0])),
    (errors.FtransValueError, "method", lambda: fr.multivariate_normal(K, MEAN, COV, method="qr")),
    (errors.FtransValueError, "1-dimensional", lambda: fr.dirichlet(K, 1.0)),
    (errors.FtransTypeError, "integer", lambda: fr.orthogonal(K, 2.5)),
    (errors.FtransTypeError, "integer", lambda: fr.ball(K, 2.5)),
]


@pytest.mark.parametrize("exc,match,fn", WRONG_DTYPE, ids=[str(i) for i in range(len(WRONG_DTYPE))])
def test_wrong_dtype_or_kind(exc, match, fn):
    _raises(exc, match, fn)


def test_error_types_are_jax_compatible():
    # The built-in type of each error is the one JAX raises for the same call.
    with pytest.raises(ValueError):
        jr.t(K, np.ones(2, F32), dtype=np.float16)
    with pytest.raises(ValueError):
        fr.t(K, np.ones(2, F32), dtype=np.float16)
    with pytest.raises(ValueError):
        jr.gamma(K, np.ones(3, F32), (2, 4))
    with pytest.raises(ValueError):
        fr.gamma(K, np.ones(3, F32), (2, 4))
    with pytest.raises(ValueError):
        jr.gamma(K, 1.0, dtype=np.int32)
    with pytest.raises(ValueError):
        fr.gamma(K, 1.0, dtype=np.int32)


def test_traced_orthogonal_size_is_a_concretization_error():
    _raises(errors.ConcretizationTypeError, "", lambda: ftrans.jit(lambda n: fr.orthogonal(K, n))(3))


def test_every_public_name_of_jax_random_exists():
    missing = [n for n in dir(jr) if not n.startswith("_") and not hasattr(fr, n)]
    assert missing == []
    # The new names are exported.
    for n in ("gamma", "beta", "dirichlet", "poisson", "binomial", "multinomial", "orthogonal"):
        assert n in fr.__all__
    assert isinstance(fnp.asarray(fr.exponential(K)), ftrans.Array)


def test_under_disable_jit():
    # The samplers run eagerly through NumPy (their while loops stepped in Python, the
    # per-element gamma loops batched by vmap): JAX's values to float tolerance.
    ftrans.config.update("disable_jit", True)
    try:
        ours = [fr.gamma(KEYS[0], A4), fr.poisson(KEYS[0], np.array([3.0, 30.0], F32))]
    finally:
        ftrans.config.update("disable_jit", False)
    close(ours[0], jax_call("gamma", KEYS[0], A4), rtol=1e-5, atol=1e-7)
    same_bits(ours[1], jax_call("poisson", KEYS[0], np.array([3.0, 30.0], F32)))


@pytest.mark.parametrize("name,draw", [
    ("bits", lambda r, k, d: r.bits(k, (2,), d)),
    ("randint", lambda r, k, d: r.randint(k, (2,), 0, 5, d)),
    ("poisson", lambda r, k, d: r.poisson(k, 2.0, (2,), d)),
    ("geometric", lambda r, k, d: r.geometric(k, 0.5, (2,), d)),
    ("rademacher", lambda r, k, d: r.rademacher(k, (2,), d)),
])
def test_integer_samplers_report_a_requested_64_bit_dtype(name, draw):
    # without x64 an explicitly requested 64-bit dtype narrows with JAX's UserWarning (an error under
    # explicit_x64_dtypes="error"); the default dtype is never reported
    d = np.uint64 if name == "bits" else np.int64
    for r, lib in ((jr, jax), (fr, ftrans)):
        with pytest.warns(UserWarning, match="Explicitly requested dtype"):
            out = draw(r, r.key(0), d)
        assert out.dtype == np.dtype(d).name.replace("64", "32")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            draw(r, r.key(0), None)
        lib.config.update("jax_explicit_x64_dtypes", "error")
        try:
            with pytest.raises(ValueError, match="Explicitly requested dtype"):
                draw(r, r.key(0), d)
        finally:
            lib.config.update("jax_explicit_x64_dtypes", "warn")


@pytest.mark.parametrize("name,args", [("gamma", (A4,)), ("loggamma", (A4,)), ("beta", (A4, A4[::-1].copy())),
                                       ("chisquare", (A4,)), ("poisson", (LAM,))])
def test_method_keyword_of_jax_011(name, args):
    """jax 0.11's ``method=``: 'exact' is the sampler as before (JAX's bits where jax takes the keyword);
    'approximate' draws with the exact sampler too (docs/differences.md); anything else is refused."""
    key = KEYS[0]
    plain = getattr(fr, name)(key, *args)
    same_bits(getattr(fr, name)(key, *args, method="exact"), plain)
    same_bits(getattr(fr, name)(key, *args, method="approximate"), plain)
    if jax.__version_info__ >= (0, 11):
        same_bits(plain, jax_call(name, key, *args, method="exact"))
        with pytest.raises(ValueError, match="method argument"):
            jax_call(name, key, *args, method="fast")
    with pytest.raises(ValueError, match=f"method argument to `{name}` must be one of"):
        getattr(fr, name)(key, *args, method="fast")
