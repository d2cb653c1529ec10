"""``ftrans.lax``'s primitive objects under JAX's names: ``square_p`` and ``clz_p`` are primitives with every
rule (checked against jax's ``lax.square`` / ``lax.clz``), and the ``*_p`` names ftrans leaves out are the ones
listed here with the reason."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
from ftrans import lax as flax

# JAX primitives ftrans computes with other primitives (so there is no equation of that name to bind).
LEFT_OUT = {
    "after_all_p", "create_token_p",  # ftrans's tokens are values, not primitive results
    "approx_top_k_p",  # an exact top_k (approx_max_k)
    "eq_to_p", "le_to_p", "lt_to_p",  # JAX's shape-polymorphism internals
    "igamma_p", "igammac_p", "igamma_grad_a_p", "polygamma_p", "regularized_incomplete_beta_p", "zeta_p",
    "random_gamma_grad_p",  # series and continued fractions written with lax
    "mulhi_p",  # four half-width products
    "select_and_gather_add_p", "select_and_scatter_add_p", "select_and_scatter_p",  # reduce_window's JVP internals
    "tile_p", "stack_p", "unstack_p",  # broadcast + reshape, concatenate, slices
    "stage_p", "ragged_all_to_all_p",
    # jax 0.11's: lax.log2 is log and div, lax.one_minus_square a custom_jvp of add/sub/mul (test below)
    "log2_p", "one_minus_square_p",
}


def test_split_p_is_the_primitive_lax_split_binds():
    x = np.arange(7, dtype=np.float32)
    fj = ftrans.make_jaxpr(lambda x: flax.split(x, (3, 4)))(x)
    jj = jax.make_jaxpr(lambda x: jax.lax.split(x, (3, 4)))(x)
    assert [e.primitive for e in fj.jaxpr.eqns] == [flax.split_p]
    assert [e.primitive.name for e in jj.jaxpr.eqns] == [flax.split_p.name] == ["split"]
    for got, want in zip(flax.split_p.bind(x, sizes=(3, 4), axis=0), jax.lax.split(x, (3, 4))):
        np.testing.assert_array_equal(got, want)


def test_every_jax_lax_primitive_is_exported_or_left_out_on_purpose():
    missing = sorted(n for n in dir(jax.lax) if n.endswith("_p") and not hasattr(flax, n) and n not in LEFT_OUT)
    assert not missing


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64])
def test_square_p_matches_jax(dtype):
    x = (np.arange(6).reshape(2, 3) - 2).astype(dtype)
    bind = lambda x: flax.square_p.bind(x)  # noqa: E731
    np.testing.assert_array_equal(bind(x), jax.lax.square(x))
    np.testing.assert_array_equal(ftrans.jit(bind)(x), jax.lax.square(x))
    np.testing.assert_array_equal(ftrans.vmap(bind)(x), jax.vmap(jax.lax.square)(x))
    if dtype == np.float32:
        np.testing.assert_allclose(ftrans.grad(lambda x: bind(x).sum())(x), jax.grad(lambda x: jax.lax.square(x).sum())(x))
    assert "square" in str(ftrans.make_jaxpr(bind)(x))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.uint64])
def test_clz_p_matches_jax(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, 2, 3, info.max, info.min, 100], dtype)
    with jax.enable_x64(True), ftrans.enable_x64(True):
        want = jax.lax.clz(jnp.asarray(x))
        np.testing.assert_array_equal(flax.clz(x), want)
        np.testing.assert_array_equal(ftrans.jit(flax.clz)(x), want)
        np.testing.assert_array_equal(ftrans.vmap(flax.clz)(x), want)
        assert "clz" in str(ftrans.make_jaxpr(flax.clz)(x))


def test_log2_and_one_minus_square_compute_as_jax_011():
    """jax 0.11's ``lax.log2`` and ``lax.one_minus_square`` (and their derivatives: ``-2x`` for the latter,
    exact at tiny ``x``); under jax 0.10, which lacks them, against NumPy."""
    x = np.float32([0.5, 2.0, 8.0, 1e-30, 3e38])
    y = np.float32([1e-30, 0.5, -1 + 1e-7, 3.0, -2.0])
    z = np.complex64([1 + 1j, -2.0])
    got = [flax.log2(x), ftrans.jit(flax.log2)(x), ftrans.grad(lambda v: flax.log2(v).sum())(x), flax.log2(z),
           flax.one_minus_square(y), ftrans.jit(flax.one_minus_square)(y),
           ftrans.grad(lambda v: flax.one_minus_square(v).sum())(y), flax.one_minus_square(np.int32([1, 2, 3]))]
    if hasattr(jax.lax, "one_minus_square"):
        jl = jax.lax
        want = [jl.log2(x), jl.log2(x), jax.grad(lambda v: jl.log2(v).sum())(x), jl.log2(z),
                jl.one_minus_square(y), jl.one_minus_square(y), jax.grad(lambda v: jl.one_minus_square(v).sum())(y),
                jl.one_minus_square(np.int32([1, 2, 3]))]
    else:
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        oms = ((1 + y64) * (1 - y64)).astype(np.float32)
        want = [np.log2(x), np.log2(x), (1 / (x64 * np.log(2))).astype(np.float32), np.log2(z), oms, oms,
                (-2 * y64).astype(np.float32), np.int32([0, -3, -8])]
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-37)  # (subnormals kept)
