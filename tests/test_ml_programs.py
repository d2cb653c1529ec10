"""Behaviour that user machine-learning programs (transformers, optimisers, conv nets, VAEs, ...) depend on
and that once differed from JAX under ftrans: each check runs the same code under both libraries and compares
the results (bits where JAX's are reproducible, printed text where users print)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("decimals", [1, 2, 4, 7])
def test_round_decimals_bits_match_jax_eagerly_and_under_jit(dtype, decimals):
    # jnp.round(x, 4) is what programs print; JAX's is a jitted program where XLA turns the division
    # by 10**decimals into a multiplication by its reciprocal, so eager ftrans must give the same bits.
    rng = np.random.default_rng(decimals)
    x = (rng.normal(size=512) * 10 ** rng.uniform(-3, 3, 512)).astype(jnp.dtype(dtype))
    want = np.asarray(jnp.round(x, decimals))
    eager = np.asarray(fnp.round(x, decimals))
    jitted = np.asarray(ftrans.jit(lambda v: fnp.round(v, decimals))(x))
    np.testing.assert_array_equal(eager.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(jitted.view(np.uint8), want.view(np.uint8))
    assert str(fnp.round(fnp.asarray(x[:6]), decimals)) == str(jnp.round(x[:6], decimals))
