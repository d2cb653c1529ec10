"""``scatter_sub`` is a primitive, as JAX's (``lax.scatter_sub`` and ``x.at[idx].subtract`` stage it): values,
modes, integer wrapping, derivatives, batching and the staged program against jax."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax as jl

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as fl

rng = np.random.default_rng(0)
X = rng.normal(size=(4, 3)).astype(np.float32)
IDX = np.array([[1], [1], [3], [7]], np.int32)
U = rng.normal(size=(4, 3)).astype(np.float32)


def dn(lax):
    return lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("mode", [None, "clip", "promise_in_bounds"])
def test_values(mode):
    want = jl.scatter_sub(X, IDX, U, dn(jl), mode=mode)
    np.testing.assert_allclose(fl.scatter_sub(X, IDX, U, dn(fl), mode=mode), want, rtol=1e-6)
    got = ftrans.jit(lambda a, b, c: fl.scatter_sub(a, b, c, dn(fl), mode=mode))(X, IDX, U)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_integers_wrap():
    xi, ui = np.arange(12, dtype=np.uint8).reshape(4, 3), np.full((4, 3), 200, np.uint8)
    want = jl.scatter_sub(xi, IDX, ui, dn(jl))
    np.testing.assert_array_equal(fl.scatter_sub(xi, IDX, ui, dn(fl)), want)
    np.testing.assert_array_equal(ftrans.jit(lambda a: fl.scatter_sub(a, IDX, ui, dn(fl)))(xi), want)


@pytest.mark.parametrize("argnums", [0, 1])
def test_derivatives(argnums):
    def f(np_, lax):
        return lambda a, c: (lax.scatter_sub(a, IDX, c, dn(lax)) ** 2).sum()

    np.testing.assert_allclose(ftrans.grad(f(fnp, fl), argnums)(X, U), jax.grad(f(jnp, jl), argnums)(X, U),
                               rtol=1e-5)
    np.testing.assert_allclose(ftrans.jacfwd(f(fnp, fl), argnums)(X, U), jax.jacfwd(f(jnp, jl), argnums)(X, U),
                               rtol=1e-5)


def test_vmap():
    xb, ub = np.stack([X, X + 1]), np.stack([U, U * 2])
    np.testing.assert_allclose(ftrans.vmap(lambda a, c: fl.scatter_sub(a, IDX, c, dn(fl)))(xb, ub),
                               jax.vmap(lambda a, c: jl.scatter_sub(a, IDX, c, dn(jl)))(xb, ub), rtol=1e-6)


@pytest.mark.parametrize("idx", [1, np.array([1, 1, 4]), slice(1, 4)])
def test_at_subtract(idx):
    x = np.arange(6, dtype=np.float32)
    want = jnp.asarray(x).at[idx].subtract(2.5)
    np.testing.assert_allclose(fnp.asarray(x).at[idx].subtract(2.5), want)
    np.testing.assert_allclose(ftrans.jit(lambda a: a.at[idx].subtract(2.5))(x), want)
    g = ftrans.grad(lambda a, v: (a.at[idx].subtract(v) ** 2).sum(), (0, 1))(x, 1.5)
    gj = jax.grad(lambda a, v: (a.at[idx].subtract(v) ** 2).sum(), (0, 1))(x, 1.5)
    np.testing.assert_allclose(g[0], gj[0])
    np.testing.assert_allclose(g[1], gj[1])
    xi = np.arange(6, dtype=np.uint8)
    np.testing.assert_array_equal(fnp.asarray(xi).at[idx].subtract(10), jnp.asarray(xi).at[idx].subtract(10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(fnp.asarray(xi).at[idx].subtract(1.7), jnp.asarray(xi).at[idx].subtract(1.7))


def test_staged_as_one_scatter_sub():
    names = [e.primitive.name for e in ftrans.make_jaxpr(lambda a: a.at[1].subtract(2.0))(fnp.ones(3)).eqns]
    jnames = [e.primitive.name for e in jax.make_jaxpr(lambda a: a.at[1].subtract(2.0))(jnp.ones(3)).eqns]
    assert "scatter-sub" in jnames and "scatter_sub" in names and "neg" not in names
    fj = ftrans.make_jaxpr(lambda a, c: fl.scatter_sub(a, IDX, c, dn(fl)))(X, U)
    assert [e.primitive for e in fj.eqns] == [fl.scatter_sub_p]
    assert hasattr(jl, "scatter_sub_p") and hasattr(fl, "scatter_sub_p")


def test_bad_input():
    with pytest.raises(TypeError, match="bool"):
        fnp.asarray([True, False]).at[0].subtract(True)
    with pytest.raises(TypeError):
        fl.scatter_sub(X, IDX, U.astype(np.int32), dn(fl))

