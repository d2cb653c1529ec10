"""``config.random_seed_offset`` (JAX's ``jax_random_seed_offset``): an integer added to every seed a key is
made from, in the seed's own dtype, for concrete and traced seeds; compared with JAX's keys under the same
offset."""

from __future__ import annotations

import contextlib

import jax
import jax.random as jr
import numpy as np
import pytest

import ftrans
import ftrans.random as fr


@contextlib.contextmanager
def offset(n):
    prev_f, prev_j = ftrans.config.random_seed_offset, jax.config.jax_random_seed_offset
    ftrans.config.update("jax_random_seed_offset", n)
    jax.config.update("jax_random_seed_offset", n)
    try:
        yield
    finally:
        ftrans.config.update("random_seed_offset", prev_f)
        jax.config.update("jax_random_seed_offset", prev_j)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "philox2x32"])
@pytest.mark.parametrize("off", [3, -5, 100_000])
def test_offset_matches_jax(impl, off):
    with offset(off):
        for seed in [0, 17, np.int32(-2), np.uint32(2**32 - 1)]:
            same(fr.PRNGKey(seed, impl=impl), jr.PRNGKey(seed, impl=impl))
            same(fr.key_data(fr.key(seed, impl=impl)), jr.key_data(jr.key(seed, impl=impl)))
        s = np.int32(17)
        same(ftrans.jit(lambda x: fr.PRNGKey(x, impl=impl))(s), jax.jit(lambda x: jr.PRNGKey(x, impl=impl))(s))
        seeds = np.arange(3, dtype=np.int32)
        same(ftrans.vmap(lambda x: fr.PRNGKey(x, impl=impl))(seeds),
             jax.vmap(lambda x: jr.PRNGKey(x, impl=impl))(seeds))
    # Back to no offset: the keys are the plain ones again (and differ from the offset ones).
    same(fr.PRNGKey(17, impl=impl), jr.PRNGKey(17, impl=impl))


def test_offset_rejects_a_non_integer():
    with pytest.raises(TypeError):
        ftrans.config.update("jax_random_seed_offset", 1.5)
    assert ftrans.config.random_seed_offset == 0
