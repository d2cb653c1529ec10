"""``experimental.compute_on``: the compute type and memory spaces are checked as JAX's; the function runs as a
nested jit call, with JAX's results and derivatives."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import math

import jax
import numpy as np
import pytest
from jax.experimental import compute_on as jco

import ftrans
from ftrans.experimental import compute_on as fco

# jax 0.11 renamed compute_on2 to compute_on (its context manager is gone); ftrans has both forms and both names
JAX_011 = not hasattr(jco, "compute_on2")


def _scenario(lib, co, name="compute_on2"):
    jnp = lib.numpy
    deco = getattr(co, "compute_on" if co is jco and JAX_011 else name)

    @lib.custom_vjp
    def unroute(tokens, sel):
        return tokens

    unroute.defvjp(lambda t, s: (t, s), lambda s, g: (g * math.prod(s.shape), None))

    @deco(compute_type="tpu_sparsecore", out_memory_spaces=jax.memory.Space.Device)
    def g(w):
        return w * 2 + 1

    @lib.remat
    def f(x, w):
        return unroute(x, g(w)) * g(w)

    x, w = jnp.ones((2, 2)), jnp.arange(4.0).reshape(2, 2)
    return (lib.jit(lib.grad(lambda x, w: f(x, w).sum(), argnums=(0, 1)))(x, w),
            lib.vmap(g)(jnp.arange(3.0)), g(2.0))


@pytest.mark.parametrize("name", ["compute_on2", "compute_on"])
def test_compute_on2_results_and_derivatives_match_jax(name):
    got, want = _scenario(ftrans, fco, name), _scenario(jax, jco)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("co", [jco, fco], ids=["jax", "ftrans"])
def test_compute_on_checks_its_arguments_like_jax(co):
    names = ["compute_on"] if co is jco and JAX_011 else ["compute_on2"] + (["compute_on"] if co is fco else [])
    for name in names:
        fn = getattr(co, name)
        with pytest.raises(TypeError):
            fn(lambda v: v, compute_type=3, out_memory_spaces=None)
        with pytest.raises(ValueError):
            fn(lambda v: v, compute_type="cpu", out_memory_spaces=None)
        with pytest.raises(ValueError):
            fn(lambda v: (v, v), compute_type="device_host", out_memory_spaces=(1, 2, 3))(1.0)
    if co is jco and JAX_011:
        return
    with pytest.raises(ValueError):
        with co.compute_on("cpu"):
            pass
    with co.compute_on("device_host"):
        pass
    with co.compute_on(compute_type="device_host"):
        pass
