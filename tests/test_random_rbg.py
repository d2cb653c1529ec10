"""``ftrans.random`` with the ``rbg`` and ``unsafe_rbg`` implementations against ``jax.random``.

Keys of both are ``uint32[4]`` (two threefry2x32 half keys); seeding, ``split`` and ``fold_in`` are
threefry's for ``rbg`` and draws of XLA's RngBitGenerator for ``unsafe_rbg``; the bits of both come from
RngBitGenerator, so ftrans and jax must agree bit for bit (the same op, the same backend).  jax's side
uses typed keys (``wrap_key_data(..., impl=...)``), so its global configuration is never touched;
ftrans's raw ``uint32[4]`` data is ``rbg`` unless ``config.default_prng_impl`` is ``unsafe_rbg``.
"""

from __future__ import annotations

import contextlib

import jax
import jax.extend.random as jer
import jax.random as jr
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
import ftrans.random as fr
from ftrans import errors
from ftrans.extend import random as fer
from tests.test_random import x64  # 64-bit mode in both libraries, restored after
from tests.thorough import THOROUGH

IMPLS = ["rbg", "unsafe_rbg"]
F32 = np.dtype(np.float32)


@contextlib.contextmanager
def default_impl(name):
    prev = ftrans.config.default_prng_impl
    ftrans.config.update("jax_default_prng_impl", name)
    try:
        yield
    finally:
        ftrans.config.update("default_prng_impl", prev)


def same(ours, theirs):
    if isinstance(ours, fr.PRNGKeyArray):
        ours = fr.key_data(ours)
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    if a.dtype.kind == "f":
        a, b = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    np.testing.assert_array_equal(a, b)


def jkey(data, impl):
    """jax's typed key for ftrans's raw key data."""
    return jr.wrap_key_data(np.asarray(data), impl=impl)


def raw(r, keys):
    """Keys as their raw data (jax's typed keys through its ``key_data``)."""
    return r.key_data(keys) if r is jr else keys


def jdata(keys):
    return np.asarray(jr.key_data(keys))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", [0, 5, -1, 2**31 - 1, 2**40 + 3])
def test_seed_matches_jax(impl, seed):
    k = fr.PRNGKey(seed, impl=impl)
    same(k, jr.PRNGKey(seed, impl=impl))
    same(fr.key(seed, impl=impl), jdata(jr.key(seed, impl=impl)))
    assert k.shape == (4,)
    # A traced seed (jit, vmap) gives the same key as a concrete one.
    same(ftrans.jit(lambda s: fr.PRNGKey(s, impl=impl))(np.int32(seed % 2**31)), jr.PRNGKey(seed % 2**31, impl=impl))
    seeds = np.arange(3, dtype=np.int32)
    same(ftrans.vmap(lambda s: fr.key(s, impl=impl))(seeds), jax.vmap(lambda s: jr.PRNGKey(s, impl=impl))(seeds))


def test_seed_x64_uses_the_high_word():
    with x64():
        for seed in [-1, 2**40 + 7, 2**63 - 1]:
            same(fr.PRNGKey(seed, impl="rbg"), jr.PRNGKey(seed, impl="rbg"))


@pytest.mark.parametrize("impl", IMPLS)
def test_split_and_fold_in_match_jax(impl):
    k = fr.PRNGKey(73, impl=impl)
    jk = jkey(k, impl)
    nums, data = [2, 3, (2, 3), 0], [0, 7, 2**32 - 1, np.int32(-3)]
    # jax's splits and folds in one program (eagerly jax compiles each apart)
    splits, folds = jax.jit(lambda jk: ([jr.key_data(jr.split(jk, n)) for n in nums],
                                        [jr.key_data(jr.fold_in(jk, d)) for d in data]))(jk)
    with default_impl(impl):
        for num, t in zip(nums, splits, strict=True):
            same(fr.split(k, num), np.asarray(t))
        for d, t in zip(data, folds, strict=True):
            same(fr.fold_in(k, d), np.asarray(t))
        assert fr.key_impl(k) == impl == jr.key_impl(jk)


def test_raw_four_word_keys_follow_the_default():
    k = fr.PRNGKey(1, impl="rbg")
    ks = fr.split(k)
    same(ks, jdata(jr.split(jkey(k, "rbg"))))
    with default_impl("unsafe_rbg"):
        same(fr.split(k), jdata(jr.split(jkey(k, "unsafe_rbg"))))
        # The jitted cores are not reused across implementations: a jitted split traced now is unsafe_rbg's.
        same(ftrans.jit(fr.split)(k), jdata(jr.split(jkey(k, "unsafe_rbg"))))
    same(fr.split(k), ks)
    assert fr.key_impl(k) == "rbg" and fr.key_impl(fr.PRNGKey(0)) == "threefry2x32"
    with default_impl("rbg"):
        k0 = fr.PRNGKey(4)
        same(k0, jr.PRNGKey(4, impl="rbg"))
        # threefry data still works while the default is rbg.
        same(fr.uniform(fr.PRNGKey(2, impl="threefry2x32"), (3,)), jr.uniform(jr.PRNGKey(2), (3,)))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_bits_match_jax(impl, dtype):
    k = fr.PRNGKey(11, impl=impl)
    with default_impl(impl):
        for shape in [(), (5,), (2, 3)]:
            same(fr.bits(k, shape, dtype), jr.bits(jkey(k, impl), shape, dtype))


def test_bits_64_match_jax():
    with x64():
        k = fr.PRNGKey(11, impl="rbg")
        same(fr.bits(k, (4,), np.uint64), jr.bits(jkey(k, "rbg"), (4,), np.uint64))
        same(fr.uniform(k, (4,), np.float64), jr.uniform(jkey(k, "rbg"), (4,), np.float64))


def _draws(r, k):
    return (r.uniform(k, (3, 2)), r.normal(k, (4,)), r.randint(k, (5,), 0, 100), r.bernoulli(k, 0.3, (6,)),
            r.gumbel(k, (3,)), r.permutation(k, 7), r.choice(k, 5, (3,), replace=False),
            r.categorical(k, np.log(np.array([0.2, 0.3, 0.5], F32)), shape=(4,)),
            r.exponential(k, (3,)), r.gamma(k, np.array([0.5, 2.0], F32)), r.uniform(k, (3,), np.float16))


@pytest.mark.parametrize("impl", IMPLS)
def test_samplers_match_jax_eager_and_jit(impl):
    k = fr.PRNGKey(3, impl=impl)
    jk = jkey(k, impl)
    theirs = jax.jit(lambda k: _draws(jr, k))(jk)  # jax eager would compile each operation apart
    with default_impl(impl):
        for o, t in zip(_draws(fr, k), theirs, strict=True):
            same(o, t)
        for o, t in zip(ftrans.jit(lambda k: _draws(fr, k))(k), theirs, strict=True):
            same(o, t)


@pytest.mark.parametrize("impl", IMPLS)
def test_vmap_over_keys_matches_jax(impl):
    # Under vmap RngBitGenerator draws every row from the first key (JAX's batching rule), so the
    # batched draws equal one draw of the batch's shape from the first key.
    with default_impl(impl):
        keys = fr.split(fr.PRNGKey(73, impl=impl), 3)
        jkeys = jkey(keys, impl)

        def f(r):
            return lambda k: (raw(r, r.split(k)), raw(r, r.fold_in(k, 3)), r.uniform(k, (2,)),
                              r.randint(k, (), 0, 100))

        # jax's vmap under jit (eagerly jax compiles each batched operation apart): the same bits.
        theirs = jax.jit(jax.vmap(f(jr)))(jkeys)
        for o, t in zip(ftrans.vmap(f(fr))(keys), theirs, strict=True):
            same(o, t)
        same(ftrans.vmap(lambda k: fr.randint(k, (), 0, 100))(keys), fr.randint(keys[0], (3,), 0, 100))
        for o, t in zip(ftrans.jit(ftrans.vmap(f(fr)))(keys), theirs, strict=True):
            same(o, t)


def test_rng_bit_generator_eager_equals_compiled():
    key = np.asarray(fr.PRNGKey(9, impl="rbg"))
    for dtype in [np.uint8, np.uint32]:
        eager = ftrans.lax.rng_bit_generator(key, (3, 5), dtype)
        staged = ftrans.jit(lambda k: ftrans.lax.rng_bit_generator(k, (3, 5), dtype))(key)
        theirs = jax.lax.rng_bit_generator(key, (3, 5), dtype)
        for a, b, c in zip(eager, staged, theirs, strict=True):
            same(a, b)
            same(a, c)
    # With jit disabled the samplers run primitive by primitive: the same bits.
    k = fr.PRNGKey(3, impl="rbg")
    with ftrans.disable_jit():
        eager = (fr.uniform(k, (4,)), fr.split(k), fr.randint(k, (3,), 0, 9))
    for a, b in zip(eager, (fr.uniform(k, (4,)), fr.split(k), fr.randint(k, (3,), 0, 9)), strict=True):
        same(a, b)


def test_impl_names_and_errors():
    assert str(fr.key_dtype("rbg")) == "key<rbg>" == str(jr.key_dtype("rbg"))
    # JAX's implementation objects name an implementation too.
    same(fr.PRNGKey(2, impl=jer.unsafe_rbg_prng_impl), jr.PRNGKey(2, impl="unsafe_rbg"))
    same(fr.PRNGKey(2, impl=fer.rbg_prng_impl), jr.PRNGKey(2, impl="rbg"))
    same(fr.key(2, dtype=jr.key_dtype("unsafe_rbg")), jdata(jr.key(2, dtype=jr.key_dtype("unsafe_rbg"))))
    with default_impl("rbg"):
        same(fr.key(2, dtype=fr.key_dtype()), jr.PRNGKey(2, impl="rbg"))
    with pytest.raises(errors.FtransValueError, match="no_such"):
        fr.PRNGKey(0, impl="no_such")
    with pytest.raises(errors.FtransValueError, match="default_prng_impl"):
        ftrans.config.update("default_prng_impl", "no_such")
    assert ftrans.config.default_prng_impl == "threefry2x32"
    with pytest.raises(errors.FtransTypeError, match=r"\(4,\)"):
        fr.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")
    with pytest.raises(errors.FtransTypeError, match=r"\(2,\)"):
        fr.wrap_key_data(np.zeros((3, 4), np.uint32), impl="threefry2x32")
    same(fr.wrap_key_data(np.arange(8, dtype=np.uint32).reshape(2, 4), impl="unsafe_rbg"),
         np.arange(8, dtype=np.uint32).reshape(2, 4))
    with pytest.raises(errors.FtransTypeError, match=r"\(2,\)"):  # the default impl's data, as JAX's
        fr.wrap_key_data(np.arange(4, dtype=np.uint32))
    with pytest.raises(errors.FtransTypeError, match="key"):
        fr.uniform(np.zeros(3, np.uint32), (2,))
    with pytest.raises(errors.FtransValueError, match="single key"):
        fr.uniform(np.zeros((2, 4), np.uint32), (2,))
    assert isinstance(jnp.zeros(1), ftrans.Array)


def test_poisson_is_threefry_only_as_in_jax():
    k = fr.PRNGKey(0, impl="rbg")
    with pytest.raises(NotImplementedError, match="threefry2x32"):
        jr.poisson(jkey(k, "rbg"), 3.0)
    with pytest.raises(NotImplementedError, match="threefry2x32"):
        fr.poisson(k, 3.0)


def test_extend_random_matches_jax():
    assert fer.rbg_prng_impl.key_shape == jer.rbg_prng_impl.key_shape == (4,)
    assert fer.threefry_prng_impl.name == jer.threefry_prng_impl.name
    kp = (np.uint32(3), np.uint32(9))
    for count in [np.arange(7, dtype=np.uint32), np.arange(8, dtype=np.uint32).reshape(2, 4)]:
        same(fer.threefry_2x32(kp, count), jer.threefry_2x32(kp, count))
    seeds = np.arange(3, dtype=np.int32)
    for impl in IMPLS:
        same(fer.random_seed(seeds, impl), jdata(jer.random_seed(seeds, getattr(jer, f"{impl}_prng_impl"))))
        same(fer.seed_with_impl(impl, 7), jdata(jer.seed_with_impl(getattr(jer, f"{impl}_prng_impl"), 7)))
        assert str(fer.random_seed(seeds, impl).dtype) == str(jer.random_seed(seeds, getattr(jer, f"{impl}_prng_impl")).dtype)
    with pytest.raises(errors.FtransTypeError, match="uint32"):
        fer.threefry_2x32(kp, np.arange(4, dtype=np.int32))


def test_default_prng_impl_context():
    with ftrans.default_prng_impl("rbg"):
        same(fr.PRNGKey(6), jr.PRNGKey(6, impl="rbg"))
        assert fr.key_impl(fr.key(6)) == "rbg"
    same(fr.PRNGKey(6), jr.PRNGKey(6))


def test_threefry_counters_past_2_to_32():
    # Draws of 2**32 elements or more number their elements with 64-bit positions (JAX's counters): the
    # arithmetic on word pairs, checked at chosen indices against Python integers.
    from ftrans.random import _threefry as tf

    shape = (5, 3, 2**31 + 11, 7)
    rng = np.random.default_rng(0)
    idx = [rng.integers(0, d, 64, dtype=np.uint64).astype(np.uint32) for d in shape]
    idx[2][:2] = [0, 2**31 + 10]
    hi, lo = ftrans.jit(lambda *i: tf.positions(list(i), shape))(*idx)
    want = np.ravel_multi_index([i.astype(np.int64) for i in idx], shape).astype(object)
    np.testing.assert_array_equal(np.asarray(hi).astype(object) * 2**32 + np.asarray(lo), want)
    # An axis of 2**32 or more takes its indices as (high, low) pairs.
    shape = (3, 2**40 + 5)
    big = rng.integers(0, 2**40 + 5, 64, dtype=np.int64)
    pair = ((big >> 32).astype(np.uint32), (big & 0xFFFFFFFF).astype(np.uint32))
    hi, lo = ftrans.jit(lambda i, h, w: tf.positions([i, (h, w)], shape))(idx[1], *pair)
    want = (idx[1].astype(object) * (2**40 + 5) + big.astype(object))
    np.testing.assert_array_equal(np.asarray(hi).astype(object) * 2**32 + np.asarray(lo), want)
    # The big draws trace (eval_shape) and lower like JAX's instead of being refused.
    out = ftrans.eval_shape(lambda k: fr.normal(k, (10**12,)), fr.PRNGKey(0))
    assert out.shape == (10**12,)
    # Below 2**32 the counters are the plain positions (JAX's bits, see test_random.py).
    hi, lo = tf.counters((3, 4))
    same(lo, np.arange(12, dtype=np.uint32).reshape(3, 4))


def _gamma_relatives(m, alphas):
    """vmap over keys of gamma (scalar and batched shape parameter), beta, dirichlet and gamma's gradient."""
    return [lambda raw: m.vmap(lambda k: m.random.gamma(k, 2.0, (3,)))(raw),
            lambda raw: m.vmap(lambda k, a: m.random.gamma(k, a, (3,)))(raw, alphas),
            lambda raw: m.vmap(lambda k: m.random.beta(k, 2.0, 3.0, (2,)))(raw),
            lambda raw: m.vmap(lambda k: m.random.dirichlet(k, alphas))(raw),
            lambda raw: m.vmap(m.grad(lambda a, k: m.random.gamma(k, a)), in_axes=(None, 0))(2.0, raw)]


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_vmap_of_gamma_and_its_relatives_over_rbg_keys_matches_jax(impl):
    """Batched like JAX's gamma primitive: a batched split of each key, then every element in one loop.

    The batched split is the implementation's (what the two cases differ in); every sampler batches through
    the same gamma primitive after it. So the quick run takes the samplers in turn over the two
    implementations (each gets a gamma), the thorough run (tests/thorough.py) every sampler over each."""
    raw = np.arange(12, dtype=np.uint32).reshape(3, 4)
    alphas = np.array([0.5, 1.0, 3.0], np.float32)
    picked = [i for i in range(5) if THOROUGH or i % 2 == IMPLS.index(impl)]
    with ftrans.default_prng_impl(impl):
        got = [_gamma_relatives(ftrans, alphas)[i](raw) for i in picked]
    keys = jax.vmap(lambda r: jax.random.wrap_key_data(r, impl=impl))(raw)
    # one jax program: eagerly jax compiles each operation apart
    want = jax.jit(lambda keys: [_gamma_relatives(jax, alphas)[i](keys) for i in picked])(keys)
    assert len(got) == len(want) == len(picked)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-6)
