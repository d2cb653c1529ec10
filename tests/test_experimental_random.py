"""ftrans.experimental.random (JAX's stateful generator) against jax.experimental.random."""

from __future__ import annotations

import jax
import jax.experimental.random as jrandom
import numpy as np
import pytest

import ftrans
from ftrans.experimental import random as frandom


def keydata(k):
    return np.asarray(ftrans.random.key_data(k))


def test_draws_match_jax_and_advance():
    f, j = frandom.stateful_rng(42), jrandom.stateful_rng(42)
    for _ in range(2):  # each draw advances the counter, in both
        np.testing.assert_array_equal(keydata(f.key()), np.asarray(jax.random.key_data(j.key())))
    np.testing.assert_allclose(f.uniform(1, 3, size=3), j.uniform(1, 3, size=3), rtol=1e-6)
    np.testing.assert_allclose(f.normal(np.array([0.0, 1.0]), 2.0), j.normal(np.array([0.0, 1.0]), 2.0), rtol=1e-6)
    np.testing.assert_array_equal(f.integers(10, size=(2, 2)), j.integers(10, size=(2, 2)))
    assert f.random(dtype=np.float32).shape == () and int(f._counter[...]) == int(j._counter[...]) + 1


def test_jit_and_vmap_update_the_counter():
    f = frandom.stateful_rng(0)
    draw = ftrans.jit(lambda g: g.uniform(size=2))
    a, b = draw(f), draw(f)
    assert int(f._counter[...]) == 2 and not np.any(np.asarray(a) == np.asarray(b))
    split = f.split(3)
    assert split._base_key.shape == (3,) and split._counter.shape == (3,)
    x = np.arange(3.0, dtype=np.float32)
    out = ftrans.vmap(lambda g, v: v + g.uniform())(split, x)
    j = jrandom.stateful_rng(0)
    j.uniform(size=2), j.uniform(size=2)
    np.testing.assert_allclose(out, jax.vmap(lambda g, v: v + g.uniform())(j.split(3), x), rtol=1e-6)
    kids = f.spawn(2)
    assert [int(k._counter[...]) for k in kids] == [0, 0]


def test_bad_construction():
    with pytest.raises(ValueError, match="Expected base_key to be a typed PRNG key"):
        frandom.StatefulPRNG(ftrans.numpy.array([0, 1], dtype="uint32"), ftrans.ref.new_ref(0))
    with pytest.raises(ValueError, match="Expected counter to be a scalar integer ref"):
        frandom.StatefulPRNG(ftrans.random.key(0), 0)
    with pytest.raises(TypeError, match="requires an explicit seed"):
        ftrans.jit(lambda x: frandom.stateful_rng().uniform() + x)(1.0)
