"""``lax.associative_scan`` against jax's: sums, products, extrema, a pytree recurrence, reverse and axis,
under grad, vmap and jit."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax


def close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


OPS = {
    "add": (flax.add, jlax.add),
    "mul": (flax.mul, jlax.mul),
    "max": (flax.max, jlax.max),
    "min": (fjnp.minimum, jjnp.minimum),
}


@given(n=st.integers(1, 17), op=st.sampled_from(sorted(OPS)), reverse=st.booleans(),
       rank=st.integers(1, 3), seed=st.integers(0, 100))
def test_against_jax(n, op, reverse, rank, seed):
    rng = np.random.RandomState(seed)
    axis = seed % rank
    shape = [2, 3, 2][:rank]
    shape[axis] = n
    x = (rng.rand(*shape) + 0.5).astype(np.float32)
    fo, jo = OPS[op]
    # jax's side jitted: eagerly it compiles each of the scan's many small operations apart (seconds per case)
    want = jax.jit(lambda v: jlax.associative_scan(jo, v, reverse=reverse, axis=axis))(x)
    close(flax.associative_scan(fo, x, reverse=reverse, axis=axis), want, tol=1e-4)
    # a negative axis names the same one (jax's own reverse=True rejects a negative axis inside lax.rev)
    close(flax.associative_scan(fo, x, reverse=reverse, axis=axis - rank), want, tol=1e-4)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_integer_and_bool(dtype):
    x = (np.arange(11) % 3 == 1).astype(dtype)
    op_f = flax.bitwise_or if dtype == np.bool_ else flax.add
    op_j = jlax.bitwise_or if dtype == np.bool_ else jlax.add
    close(flax.associative_scan(op_f, x), jax.jit(lambda v: jlax.associative_scan(op_j, v))(x))


def _recurrence(np_):
    """h_t = a_t * h_{t-1} + b_t as a scan over (a, b) pairs (the classic pytree example)."""
    def combine(p, q):
        return {"a": p["a"] * q["a"], "b": q["a"] * p["b"] + q["b"]}
    return combine


def test_pytree_recurrence_grad_vmap_jit():
    rng = np.random.RandomState(1)
    e = {"a": rng.rand(9, 2).astype(np.float32), "b": rng.randn(9, 2).astype(np.float32)}
    fs = lambda e: flax.associative_scan(_recurrence(fjnp), e)  # noqa: E731
    js = jax.jit(lambda e: jlax.associative_scan(_recurrence(jjnp), e))  # jax eager would compile op by op
    close(fs(e), js(e))
    # the recurrence by a sequential loop
    h = np.zeros(2, np.float32)
    for t in range(9):
        h = e["a"][t] * h + e["b"][t]
    close(fs(e)["b"][-1], h, tol=1e-5)
    close(ftrans.jit(fs)(e), js(e))
    lf = lambda e: fjnp.sum(fs(e)["b"] ** 2)  # noqa: E731
    lj = lambda e: jjnp.sum(js(e)["b"] ** 2)  # noqa: E731
    gj = jax.jit(jax.grad(lj))(e)
    close(ftrans.grad(lf)(e), gj, tol=1e-4)
    close(ftrans.jit(ftrans.grad(lf))(e), gj, tol=1e-4)
    eb = jax.tree_util.tree_map(lambda x: np.stack([x, x * 0.5]), e)
    close(ftrans.vmap(fs)(eb), jax.jit(jax.vmap(js))(eb))
    close(ftrans.vmap(fs, in_axes=2, out_axes=2)(eb), jax.jit(jax.vmap(js, in_axes=2, out_axes=2))(eb))


def test_length_zero_and_one():
    for n in (0, 1):
        x = np.ones((n, 2), np.float32)
        close(flax.associative_scan(flax.add, x), jlax.associative_scan(jlax.add, x))


def test_errors():
    with pytest.raises(ValueError, match="same size"):
        flax.associative_scan(flax.add, (fjnp.ones(3), fjnp.ones(4)))
    with pytest.raises(ValueError, match="out of range"):
        flax.associative_scan(flax.add, fjnp.ones(3), axis=1)
    with pytest.raises(ValueError, match="out of range"):
        flax.associative_scan(flax.add, fjnp.float32(1))
    with pytest.raises(ValueError, match="structure"):
        flax.associative_scan(lambda a, b: (a[0] + b[0],), (fjnp.ones(3), fjnp.ones(3)))
    with pytest.raises(ValueError):
        jlax.associative_scan(lambda a, b: (a[0] + b[0],), (jjnp.ones(3), jjnp.ones(3)))
    # a list for a tuple (same leaves) is accepted, as in jax
    close(flax.associative_scan(lambda a, b: [a[0] + b[0], a[1] * b[1]], (np.ones(3, np.float32),) * 2),
          jlax.associative_scan(lambda a, b: [a[0] + b[0], a[1] * b[1]], (np.ones(3, np.float32),) * 2))
