"""``ftrans.random`` with the ``philox2x32`` implementation against ``jax.random``, bit for bit.

A philox2x32 key is ``uint32[1]`` data (the only one-word key, so its width names it); seeding, ``split``,
``fold_in`` and the bits are ten Philox-2x32 rounds over the same counters as threefry's.  jax's side uses
typed keys (``wrap_key_data(..., impl=...)``), so its global configuration is never touched.
"""

from __future__ import annotations

import jax
import jax.random as jr
import numpy as np
import pytest

import ftrans
import ftrans.random as fr
from tests.test_random import x64  # 64-bit mode in both libraries, restored after
from tests.test_random_rbg import default_impl, jdata, jkey, same

IMPL = "philox2x32"


@pytest.mark.parametrize("seed", [0, 5, -1, 2**31 - 1, 2**40 + 3])
def test_seed_matches_jax(seed):
    k = fr.PRNGKey(seed, impl=IMPL)
    same(k, jr.PRNGKey(seed, impl=IMPL))
    same(fr.key(seed, impl=IMPL), jdata(jr.key(seed, impl=IMPL)))
    assert k.shape == (1,)
    s32 = np.int32(seed % 2**31)
    same(ftrans.jit(lambda s: fr.PRNGKey(s, impl=IMPL))(s32), jr.PRNGKey(s32, impl=IMPL))
    seeds = np.arange(3, dtype=np.int32)
    same(ftrans.vmap(lambda s: fr.key(s, impl=IMPL))(seeds), jax.vmap(lambda s: jr.PRNGKey(s, impl=IMPL))(seeds))


def test_seed_x64_uses_the_high_word():
    with x64():
        for seed in [-1, 2**40 + 7, 2**63 - 1]:
            same(fr.PRNGKey(seed, impl=IMPL), jr.PRNGKey(seed, impl=IMPL))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_split_and_fold_in_match_jax(shape):
    k = fr.PRNGKey(42, impl=IMPL)
    jk = jkey(k, IMPL)
    same(fr.split(k, shape), jdata(jr.split(jk, shape)))
    same(fr.fold_in(k, 7), jdata(jr.fold_in(jk, 7)))
    same(ftrans.jit(fr.fold_in)(k, np.uint32(2**32 - 1)), jdata(jr.fold_in(jk, np.uint32(2**32 - 1))))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_bits_and_samplers_match_jax(dtype):
    k = fr.PRNGKey(1701, impl=IMPL)
    jk = jkey(k, IMPL)
    same(fr.bits(k, (3, 4), dtype), jr.bits(jk, (3, 4), dtype))
    same(fr.uniform(k, (5,)), jr.uniform(jk, (5,)))
    same(fr.normal(k, (2, 2)), jr.normal(jk, (2, 2)))
    keys = fr.split(k, 4)
    same(ftrans.vmap(lambda q: fr.uniform(q, (2,)))(keys),
         jax.vmap(lambda q: jr.uniform(q, (2,)))(jkey(keys, IMPL)))


def test_bits_64():
    with x64():
        k = fr.PRNGKey(3, impl=IMPL)
        same(fr.bits(k, (4,), np.uint64), jr.bits(jkey(k, IMPL), (4,), np.uint64))


def test_default_impl():
    with default_impl(IMPL):
        k = fr.PRNGKey(9)
        assert ftrans.config.default_prng_impl == IMPL
    same(k, jr.PRNGKey(9, impl=IMPL))
    same(fr.split(k), jdata(jr.split(jkey(k, IMPL))))
