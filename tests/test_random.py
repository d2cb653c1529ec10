"""``ftrans.random`` against ``jax.random``: the same key gives the same bits.

Every sampler is compared bit for bit (values viewed as unsigned integers, so
NaN payloads and signed zeros count) with jax 0.10's defaults (threefry2x32,
``jax_threefry_partitionable`` on) for several seeds, shapes and dtypes,
eagerly, under ``jit``, and under ``vmap`` over keys. Gradients with respect
to the samplers' float parameters are compared with ``jax.grad``. Bad input
raises ftrans's error types naming the caller's line.

Shapes are kept small and reused across tests: each new (shape, dtype)
signature costs one XLA compile in ftrans and one in jax.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import jax
import jax.random as jr
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as jnp
import ftrans.random as fr
from ftrans import errors

BF16 = np.dtype(ml_dtypes.bfloat16)
SEEDS = [0, 1, 42, 2**31 - 1]
HERE = "test_random.py:"


@contextlib.contextmanager
def x64():
    """64-bit mode in both ftrans and jax, restored afterwards."""
    ours, theirs = ftrans.config.enable_x64, jax.config.jax_enable_x64
    ftrans.config.update("enable_x64", True)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        ftrans.config.update("enable_x64", ours)
        jax.config.update("jax_enable_x64", theirs)


def same_bits(ours, theirs):
    """Equal shape, dtype and bit pattern (typed keys compare by their data)."""
    if isinstance(ours, fr.PRNGKeyArray):
        ours = fr.key_data(ours)
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    if a.dtype == np.bool_:
        np.testing.assert_array_equal(a, b)
        return
    if a.dtype.kind == "c":
        a, b = np.stack([a.real, a.imag]), np.stack([b.real, b.imag])
    ua = a.reshape(-1).view(f"u{a.dtype.itemsize}")
    ub = b.reshape(-1).view(f"u{b.dtype.itemsize}")
    bad = np.flatnonzero(ua != ub)
    assert bad.size == 0, f"{bad.size} of {a.size} differ, first at {bad[0]}: {a.reshape(-1)[bad[0]]} vs {b.reshape(-1)[bad[0]]}"


KEYS = {s: np.asarray(jr.PRNGKey(s)) for s in [*SEEDS, 2, 3, 4, 5, 6, 7]}
_ORACLES: dict = {}


def jkey(seed):
    return KEYS[seed]


def check(name, *args, seeds=SEEDS, eager=False, **kw):
    """``ftrans.random.<name>(key, ...)`` has jax's bits for each seed.

    The oracle runs under ``jax.jit`` (one compile per call signature instead of one
    per internal jax operation), which gives jax's eager bits unless XLA constant-folds
    a transcendental function of a parameter baked into the program (``eager=True``
    then calls jax eagerly, as ftrans's eager call does).
    """
    ours = getattr(fr, name)
    theirs = oracle(name, *args, eager=eager, **kw)
    for seed in seeds:
        same_bits(ours(KEYS[seed], *args, **kw), theirs(KEYS[seed]))


def oracle(name, *args, eager=False, **kw):
    """``key -> jax.random.<name>(key, ...)``, jitted once per argument list."""
    memo = (name, repr(args), repr(sorted(kw.items())), eager, jax.config.jax_enable_x64)
    if memo not in _ORACLES:
        fn = lambda k: getattr(jr, name)(k, *args, **kw)  # noqa: E731
        _ORACLES[memo] = fn if eager else jax.jit(fn)
    return _ORACLES[memo]


# ---------------------------------------------------------------- keys
@pytest.mark.parametrize("seed", [0, 1, 42, -1, 2**31 - 1, 2**31, 2**32 + 5, 2**40 + 7, -(2**40), 2**63 - 1])
def test_prngkey_matches_jax(seed):
    k = fr.PRNGKey(seed)
    same_bits(k, jr.PRNGKey(seed))
    assert isinstance(k, ftrans.Array)
    same_bits(fr.key(seed), jr.key_data(jr.key(seed)))


@pytest.mark.parametrize("seed", [np.int8(-3), np.uint32(4_000_000_000), np.int64(2**40 + 9)])
def test_prngkey_from_numpy_integers(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # jax's int64 truncation warning
        same_bits(fr.PRNGKey(seed), jr.PRNGKey(seed))


def test_prngkey_x64_uses_the_high_word():
    with x64():
        for seed in [-1, 2**40 + 7, -(2**40), 2**63 - 1, np.int32(-3), np.uint64(2**63 + 5)]:
            same_bits(fr.PRNGKey(seed), jr.PRNGKey(seed))


def test_prngkey_traced_seed_under_jit_and_vmap():
    seeds = np.arange(-2, 3, dtype=np.int32)
    same_bits(ftrans.vmap(fr.PRNGKey)(seeds), jax.vmap(jr.PRNGKey)(seeds))
    same_bits(ftrans.jit(fr.PRNGKey)(np.int32(9)), jr.PRNGKey(9))


def test_key_data_and_wrap_key_data_are_the_raw_data():
    k = fr.PRNGKey(3)
    same_bits(fr.key_data(k), k)
    ks = fr.split(k, (2, 3))
    same_bits(fr.key_data(fr.wrap_key_data(ks)), ks)
    same_bits(fr.uniform(fr.wrap_key_data(fr.key_data(k)), (3, 4), np.float32),
              oracle("uniform", (3, 4), np.float32)(jkey(3)))
    # A raw jax key array works as a key too.
    same_bits(fr.uniform(jr.PRNGKey(3), (3, 4), np.float32), oracle("uniform", (3, 4), np.float32)(jkey(3)))


@pytest.mark.parametrize("num", [2, (2, 3), 0])
def test_split_matches_jax(num):
    check("split", num)


def test_split_default_and_chained():
    k = fr.PRNGKey(7)
    jk = jr.PRNGKey(7)
    for _ in range(3):
        k, sub = fr.split(k)
        jk, jsub = jr.split(jk)
        same_bits(k, jk)
        same_bits(sub, jsub)


@pytest.mark.parametrize("data", [17, 2**32 - 1, np.int32(-5)])
def test_fold_in_matches_jax(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check("fold_in", data, seeds=SEEDS[:2])


# ---------------------------------------------------------------- bits and uniform
@pytest.mark.parametrize("shape,dtype", [((), np.uint32), ((5,), np.uint8), ((2, 3), np.uint16)])
def test_bits_matches_jax(shape, dtype):
    check("bits", shape, dtype)


def test_bits_default_dtype():
    check("bits", (3, 4), seeds=[0])


@pytest.mark.parametrize("shape,dtype", [((), np.float32), ((3, 4), np.float32), (5, np.float16),
                                         ((5,), BF16)])
def test_uniform_matches_jax(shape, dtype):
    check("uniform", shape, dtype)


def test_uniform_minval_maxval_broadcast():
    lo = np.array([-1.0, 0.0, 2.0], np.float32)
    hi = np.array([[1.0], [5.0]], np.float32)
    check("uniform", (2, 3), minval=lo, maxval=hi, seeds=SEEDS[:2])
    check("uniform", (2, 3), minval=-3, maxval=7.5, seeds=SEEDS[:2])


@given(st.integers(0, 2**32 - 1), st.integers(-(2**31), 2**31 - 1))
def test_uniform_any_key(k0, k1):
    key = np.array([k0, k1 % 2**32], np.uint32)
    same_bits(fr.uniform(key, (3, 4)), jr.uniform(key, (3, 4)))


# ---------------------------------------------------------------- normal family
@pytest.mark.parametrize("shape,dtype", [((3, 4), np.float32), ((5,), np.float16), ((5,), BF16),
                                         ((4,), np.complex64)])
def test_normal_matches_jax(shape, dtype):
    check("normal", shape, dtype)


def test_truncated_normal_matches_jax():
    lo = np.array([-1.0, 0.5, -3.0], np.float32)
    hi = np.array([1.0, 2.5, -2.0], np.float32)
    # Eager oracle: under jax.jit, XLA would constant-fold erf of the bounds with another erf.
    check("truncated_normal", -1.5, 0.7, (3, 4), eager=True)
    check("truncated_normal", lo, hi, (2, 3), seeds=SEEDS[:2], eager=True)
    out = np.asarray(fr.truncated_normal(jkey(2), lo, hi, (50, 3)))
    assert (out > lo).all() and (out < hi).all()


@pytest.mark.parametrize("mode,dtype", [(None, np.float32), ("high", np.float16), ("highest", np.float32)])
def test_gumbel_matches_jax(mode, dtype):
    check("gumbel", (3, 4), dtype, mode=mode)


# ---------------------------------------------------------------- discrete
@pytest.mark.parametrize("shape,lo,hi,dtype", [
    ((3, 4), 0, 100, None), ((6,), -5, 5, np.int8), ((6,), 3, 256, np.uint8),
    ((6,), 7, np.uint32(2**32 - 1), np.uint32),
])
def test_randint_matches_jax(shape, lo, hi, dtype):
    check("randint", shape, lo, hi, dtype)


def test_randint_array_bounds():
    lo = np.array([0, 10, -3], np.int32)
    hi = np.array([[50], [100]], np.int32)
    check("randint", (2, 3), lo, hi, seeds=SEEDS[:2])


@pytest.mark.parametrize("p,shape,mode", [(0.3, (3, 4), "low"), (0.3, (3, 4), "high"),
                                          (np.array([0.0, 0.25, 0.5, 1.0], np.float32), None, "low")])
def test_bernoulli_matches_jax(p, shape, mode):
    check("bernoulli", p, shape, mode)


LOGITS = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))


@pytest.mark.parametrize("kw", [{"axis": 0, "shape": (4, 3)}, {"shape": (3, 2), "replace": False},
                                {"axis": 0, "shape": (2, 3), "replace": False}])
def test_categorical_matches_jax(kw):
    check("categorical", LOGITS, **kw)


P = np.array([0.1, 0.2, 0.3, 0.1, 0.1, 0.05, 0.05, 0.02, 0.03, 0.05], np.float32)
A = np.arange(10, 20, dtype=np.float32)
M = np.arange(12).reshape(3, 4)


@pytest.mark.parametrize("a,kw", [
    (10, {"shape": (4,)}), (A, {"shape": (2, 3)}), (A, {"shape": (6,), "p": P}),
    (A, {"shape": (6,), "replace": False, "p": P}), (M, {"shape": (2,), "axis": 1, "replace": False}),
])
def test_choice_matches_jax(a, kw):
    check("choice", a, **kw)


X = np.arange(12.0, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("x,kw", [(10, {}), (X, {"axis": 1}), (X, {"axis": 1, "independent": True}),
                                  (1700, {})])
def test_permutation_matches_jax(x, kw):
    check("permutation", x, seeds=SEEDS[:3], **kw)


def test_shuffle_is_deprecated_independent_permutation():
    for seed in SEEDS[:2]:
        with pytest.warns(DeprecationWarning, match="permutation"):
            out = fr.shuffle(jkey(seed), X, 1)
        same_bits(out, oracle("permutation", X, axis=1, independent=True)(jkey(seed)))


def test_permutation_is_a_permutation():
    out = np.asarray(fr.permutation(fr.PRNGKey(5), 50))
    assert sorted(out.tolist()) == list(range(50))
    assert out.dtype == np.int32


# ---------------------------------------------------------------- 64-bit mode
def test_x64_samplers_match_jax():
    with x64():
        k = jkey(7)
        check("uniform", (5,), seeds=[7])
        check("normal", (5,), seeds=[7])
        check("bits", (5,), seeds=[7])
        check("randint", (5,), -(2**40), 2**40, seeds=[7])
        check("fold_in", np.int64(2**40 + 3), seeds=[7])
    assert fr.uniform(k, (2,)).dtype == np.float32  # restored


# ---------------------------------------------------------------- transforms
def _many(ours):
    """One function drawing from several samplers (``ours`` picks the library)."""
    r = fr if ours else jr

    def f(key, lo, hi):
        k = r.split(key, 10)
        return [
            r.split(k[0], 3), r.fold_in(k[0], 3), r.uniform(k[1], (2, 3), minval=lo, maxval=hi),
            r.normal(k[2], (4,)), r.randint(k[3], (5,), 0, 9), r.choice(k[6], A, (4,), p=P),
        ]

    return f


def test_jit_matches_jax_jit():
    lo, hi = np.float32(-1.0), np.float32(2.0)
    f_ours, f_jax = ftrans.jit(_many(True)), jax.jit(_many(False))
    for seed in SEEDS[:2]:
        key = jkey(seed)
        for o, t in zip(f_ours(key, lo, hi), f_jax(key, lo, hi), strict=True):
            same_bits(o, t)


def test_jit_with_static_shape():
    f = ftrans.jit(lambda k, n: fr.normal(k, (n, 2)), static_argnums=1)
    same_bits(f(jkey(3), 4), jr.normal(jkey(3), (4, 2)))


def test_vmap_over_keys_matches_jax_vmap():
    keys = np.stack([KEYS[s] for s in SEEDS])

    def f(r):
        return lambda k: (r.split(k), r.uniform(k, (3,)), r.randint(k, (3,), 0, 7), r.permutation(k, 5))

    for o, t in zip(ftrans.vmap(f(fr))(keys), jax.jit(jax.vmap(f(jr)))(keys), strict=True):
        same_bits(o, t)
    g = ftrans.jit(ftrans.vmap(lambda k: fr.uniform(fr.split(k)[1], (3,))))
    same_bits(g(keys), jax.jit(jax.vmap(lambda k: jr.uniform(jr.split(k)[1], (3,))))(keys))


def test_vmap_over_fold_in_data_and_parameters():
    k = jkey(1)
    d = np.arange(4, dtype=np.uint32)
    same_bits(ftrans.vmap(lambda x: fr.fold_in(k, x))(d), jax.vmap(lambda x: jr.fold_in(k, x))(d))
    ps = np.linspace(0.0, 1.0, 4, dtype=np.float32)
    same_bits(ftrans.vmap(lambda p: fr.bernoulli(k, p, (3,)))(ps), jax.vmap(lambda p: jr.bernoulli(k, p, (3,)))(ps))
    los = np.array([-2.0, -1.0, 0.0], np.float32)
    same_bits(ftrans.vmap(lambda lo: fr.uniform(k, (2,), minval=lo))(los),
              jax.vmap(lambda lo: jr.uniform(k, (2,), minval=lo))(los))


def test_grad_through_samplers():
    k = jkey(4)
    same_bits(ftrans.grad(lambda mu: (mu + fr.normal(k, (3,))).sum())(1.0), np.float32(3.0))
    f_ours = ftrans.grad(lambda a, b: (fr.uniform(k, (4,), minval=a, maxval=b) ** 2).sum(), argnums=(0, 1))
    f_jax = jax.jit(jax.grad(lambda a, b: (jr.uniform(k, (4,), minval=a, maxval=b) ** 2).sum(), argnums=(0, 1)))
    for o, t in zip(f_ours(-1.0, 2.0), f_jax(-1.0, 2.0), strict=True):
        same_bits(o, t)
    # Scaled draws: d/dsigma sum(sigma * z) = sum(z).
    z = fr.normal(k, (3,))
    same_bits(ftrans.grad(lambda s: (s * fr.normal(k, (3,))).sum())(2.0), z.sum())
    same_bits(ftrans.jit(ftrans.grad(lambda a: fr.uniform(k, (4,), minval=a, maxval=2 * a + 3).sum()))(0.5),
              jax.jit(jax.grad(lambda a: jr.uniform(k, (4,), minval=a, maxval=2 * a + 3).sum()))(0.5))


def test_grad_truncated_normal_bounds():
    # Samples are bit-exact; the gradient goes through erf/erf_inv derivatives, whose
    # ftrans rules multiply their factors in another order than jax's (last-bit differences).
    k = jkey(5)
    lo = np.array([-1.0, 0.5, -3.0], np.float32)
    hi = np.array([1.0, 2.5, -2.0], np.float32)
    ours = ftrans.grad(lambda a, b: (fr.truncated_normal(k, a, b) ** 3).sum(), argnums=(0, 1))(lo, hi)
    theirs = jax.jit(jax.grad(lambda a, b: (jr.truncated_normal(k, a, b) ** 3).sum(), argnums=(0, 1)))(lo, hi)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, t, rtol=2e-6)


def test_vmap_of_grad_over_keys():
    keys = np.stack([KEYS[s] for s in SEEDS[:3]])
    ours = ftrans.vmap(ftrans.grad(lambda a, k: (fr.uniform(k, (4,), minval=a) ** 2).sum()), (None, 0))(0.5, keys)
    theirs = jax.jit(jax.vmap(jax.grad(lambda a, k: (jr.uniform(k, (4,), minval=a) ** 2).sum()), (None, 0)))(0.5, keys)
    same_bits(ours, theirs)


def test_disable_jit_runs_the_numpy_path():
    before = ftrans.config.disable_jit
    ftrans.config.update("disable_jit", True)
    try:
        k = jkey(1)
        same_bits(fr.uniform(k, (3, 4), np.float32), oracle("uniform", (3, 4), np.float32)(k))
        same_bits(fr.split(k, (2, 3)), oracle("split", (2, 3))(k))
        same_bits(fr.randint(k, (3, 4), 0, 100, None), oracle("randint", (3, 4), 0, 100, None)(k))
        same_bits(fr.permutation(k, 10), oracle("permutation", 10)(k))
        # NumPy's erf_inv may differ from XLA's in the last bit.
        np.testing.assert_allclose(fr.normal(k, (3, 4), np.float32), oracle("normal", (3, 4), np.float32)(k),
                                   rtol=1e-6)
    finally:
        ftrans.config.update("disable_jit", before)


def test_make_jaxpr_shows_the_cipher():
    text = str(ftrans.make_jaxpr(lambda k: fr.bits(k, (3,)))(fr.PRNGKey(0)))
    assert "shift_right_logical" in text and "xor" in text


def test_eager_million_uniforms_is_fast():
    k = fr.PRNGKey(0)
    t = time.perf_counter()
    x = fr.uniform(k, (1_000_000,))
    x.block_until_ready()
    assert time.perf_counter() - t < 5.0
    k1 = fr.fold_in(k, 1)
    t = time.perf_counter()
    fr.uniform(k1, (1_000_000,)).block_until_ready()  # compiled: no NumPy round per primitive
    assert time.perf_counter() - t < 0.5
    v = np.asarray(x)
    assert 0.0 <= v.min() and v.max() < 1.0 and abs(v.mean() - 0.5) < 0.01


# ---------------------------------------------------------------- errors
def _raises(exc, match, fn):
    with pytest.raises(exc, match=match) as ei:
        fn()
    assert HERE in str(ei.value), str(ei.value)
    return ei.value


@pytest.mark.parametrize("bad,exc", [
    (np.zeros(2, np.float32), errors.FtransTypeError), (np.zeros(3, np.uint32), errors.FtransTypeError),
    (np.zeros((), np.uint32), errors.FtransTypeError), (5, errors.FtransTypeError),
    (np.zeros((3, 2), np.uint32), errors.FtransValueError),
])
def test_bad_keys(bad, exc):
    _raises(exc, "key", lambda: fr.uniform(bad, (2,)))
    _raises(exc, "key", lambda: fr.split(bad))


def test_typed_jax_key_is_refused_with_a_hint():
    _raises(errors.FtransTypeError, "key_data", lambda: fr.normal(jr.key(0)))


def test_key_error_types_are_jax_compatible():
    with pytest.raises(TypeError):
        fr.uniform(np.zeros(2, np.float32))
    with pytest.raises(ValueError):
        fr.uniform(np.zeros((3, 2), np.uint32))


@pytest.mark.parametrize("shape,exc", [((-1, 2), errors.FtransValueError), ((2.0,), errors.FtransTypeError),
                                       ((2.5, 1), errors.FtransTypeError), ("ab", errors.FtransTypeError),
                                       (None, errors.FtransTypeError)])
def test_bad_shapes(shape, exc):
    _raises(exc, "shape", lambda: fr.uniform(fr.PRNGKey(0), shape))
    _raises(exc, "shape", lambda: fr.randint(fr.PRNGKey(0), shape, 0, 3))


def test_traced_shape_is_a_concretization_error():
    _raises(errors.ConcretizationTypeError, "concrete",
            lambda: ftrans.jit(lambda n: fr.uniform(fr.PRNGKey(0), (n,)))(3))


def test_randint_empty_range_names_both_values():
    err = _raises(errors.FtransValueError, "minval", lambda: fr.randint(fr.PRNGKey(0), (3,), 5, 2))
    assert "minval=5" in str(err) and "maxval=2" in str(err)
    err = _raises(errors.FtransValueError, "minval",
                  lambda: fr.randint(fr.PRNGKey(0), (3,), np.array([0, 1, 2]), np.array([1, 1, 3])))
    assert "minval=1, maxval=1" in str(err)
    _raises(errors.FtransValueError, "minval", lambda: fr.randint(fr.PRNGKey(0), (3,), 4, 4))
    # Traced bounds cannot be checked: JAX's behaviour (minval) applies.
    out = ftrans.jit(lambda lo: fr.randint(fr.PRNGKey(0), (3,), lo, 2))(5)
    same_bits(out, np.full(3, 5, np.int32))


def test_choice_errors():
    k = fr.PRNGKey(0)
    err = _raises(errors.FtransValueError, "larger sample", lambda: fr.choice(k, 3, (5,), replace=False))
    assert "size 5" in str(err) and "size 3" in str(err)
    _raises(errors.FtransValueError, "larger sample", lambda: fr.choice(k, np.arange(4), (2, 3), replace=False))
    _raises(errors.FtransValueError, "p must be", lambda: fr.choice(k, 3, (2,), p=np.ones(4) / 4))
    _raises(errors.FtransTypeError, "sequence", lambda: fr.choice(k, 3, 2))
    _raises(errors.FtransValueError, "population", lambda: fr.choice(k, 0, (2,)))


def test_other_argument_errors():
    k = fr.PRNGKey(0)
    _raises(errors.FtransTypeError, "integer", lambda: fr.PRNGKey(1.5))
    _raises(errors.FtransTypeError, "scalar seed", lambda: fr.PRNGKey(np.arange(2)))
    _raises(errors.FtransOverflowError, "64-bit", lambda: fr.PRNGKey(2**64))  # OverflowError, as in JAX
    _raises(errors.FtransValueError, "implementation", lambda: fr.PRNGKey(0, impl="no_such_prng"))
    _raises(errors.FtransValueError, "float dtype", lambda: fr.uniform(k, (2,), np.int32))
    _raises(errors.FtransValueError, "float", lambda: fr.normal(k, (2,), np.int32))
    _raises(errors.FtransValueError, "unsigned", lambda: fr.bits(k, (2,), np.float32))
    _raises(errors.FtransTypeError, "integer dtype", lambda: fr.randint(k, (2,), 0, 3, np.float32))
    _raises(errors.FtransValueError, "broadcast", lambda: fr.uniform(k, (2, 3), minval=np.zeros(4)))
    _raises(errors.FtransTypeError, "floating", lambda: fr.bernoulli(k, np.array([1, 0])))
    _raises(errors.FtransValueError, "mode", lambda: fr.bernoulli(k, 0.5, mode="mid"))
    _raises(errors.FtransValueError, "mode", lambda: fr.gumbel(k, mode="mid"))
    _raises(errors.FtransValueError, "categories", lambda: fr.categorical(k, np.zeros(3), shape=(4,), replace=False))
    _raises(errors.FtransOverflowError, "out of bounds", lambda: fr.fold_in(k, -1))  # OverflowError, as in JAX
    _raises(errors.FtransTypeError, "scalar", lambda: fr.fold_in(k, np.arange(2)))
    _raises(errors.FtransTypeError, "integer or at least 1-dimensional", lambda: fr.permutation(k, 2.5))
    _raises(errors.FtransValueError, "axis", lambda: fr.permutation(k, X, axis=2))


def test_public_names():
    for name in ["PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "uniform", "normal",
                 "randint", "bernoulli", "categorical", "choice", "permutation", "shuffle",
                 "truncated_normal", "gumbel"]:
        assert callable(getattr(ftrans.random, name)), name
    assert "random" in ftrans.__all__


def test_outputs_are_ftrans_arrays_with_jax_dtypes():
    k = fr.PRNGKey(0)
    assert fr.split(k, 2).dtype == np.uint32
    assert fr.randint(k, (3, 4), 0, 100, None).dtype == np.int32
    assert fr.bernoulli(k, 0.3, (3, 4), "low").dtype == np.bool_
    out = fr.uniform(k, (3, 4), np.float32)
    assert isinstance(out, ftrans.Array)
    assert (jnp.asarray(out) + 1).dtype == np.float32
