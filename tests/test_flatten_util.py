"""``ftrans.flatten_util.ravel_pytree`` against ``jax.flatten_util.ravel_pytree``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from jax import flatten_util as jfu
from jax import tree_util

import ftrans
import ftrans.numpy as jnp
from ftrans.flatten_util import ravel_pytree

TREES = [
    {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": (np.float32(2.5), [np.ones(4, np.float32)])},
    (np.arange(3, dtype=np.int32), np.linspace(0, 1, 5, dtype=np.float32)),          # int + float -> float32
    [np.array([1 + 2j], np.complex64), np.float32(3.0)],                              # float + complex
    (np.ones(2, np.float16), np.ones(3, ml_dtypes.bfloat16)),                         # f16 + bf16 -> f32
    (np.array([True, False]), np.arange(2, dtype=np.uint8)),                          # bool + uint8
    (2.0, 3),                                                                         # Python scalars
    {"only": np.zeros((0, 3), np.float32), "x": np.ones((2,), np.float32)},           # an empty leaf
]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_ravel_and_unravel_match_jax(tree):
    flat, unravel = ravel_pytree(tree)
    jflat, junravel = jfu.ravel_pytree(tree)
    _same(flat, jflat)
    back, jback = unravel(flat), junravel(jflat)
    assert tree_util.tree_structure(back) == tree_util.tree_structure(jback)
    for x, y in zip(tree_util.tree_leaves(back), tree_util.tree_leaves(jback)):
        _same(x, y)


def test_empty_tree_is_an_empty_float32_vector():
    flat, unravel = ravel_pytree({})
    jflat, _ = jfu.ravel_pytree({})
    _same(flat, jflat)
    assert unravel(flat) == {}


def test_unravel_checks_dtype_and_length():
    tree = (np.arange(3, dtype=np.int32), np.ones(2, np.float32))
    flat, unravel = ravel_pytree(tree)
    _, junravel = jfu.ravel_pytree(tree)
    with pytest.raises(TypeError, match="expected dtype float32"):
        junravel(np.ones(5, np.float16))
    with pytest.raises(TypeError, match="expected dtype float32"):
        unravel(np.ones(5, np.float16))
    with pytest.raises(ValueError, match=r"shape \(4,\).*expected shape \(5,\)"):
        unravel(np.ones(4, np.float32))


def test_single_dtype_unravel_accepts_other_dtypes_like_jax():
    tree = [np.ones(2, np.float32), np.zeros(3, np.float32)]
    _, unravel = ravel_pytree(tree)
    _, junravel = jfu.ravel_pytree(tree)
    v = np.arange(5, dtype=np.int32)
    for x, y in zip(unravel(v), junravel(v)):
        _same(x, y)


def test_unravel_is_hashable_and_equal_for_equal_trees():
    tree = {"w": np.ones((2, 2), np.float32), "b": np.zeros(2, np.int32)}
    _, u1 = ravel_pytree(tree)
    _, u2 = ravel_pytree({"w": np.full((2, 2), 3.0, np.float32), "b": np.ones(2, np.int32)})
    assert u1 == u2 and hash(u1) == hash(u2)
    _, u3 = ravel_pytree({"w": np.ones((4,), np.float32), "b": np.zeros(2, np.int32)})
    assert u1 != u3
    # usable as a static argument
    f = ftrans.jit(lambda v, u: u(v)["w"].sum(), static_argnums=1)
    assert float(f(np.arange(6, dtype=np.float32), u1)) == 2.0 + 3.0 + 4.0 + 5.0  # "b" comes first


def test_under_jit_grad_and_vmap():
    tree = {"a": np.array([1.0, 2.0], np.float32), "b": np.float32(3.0)}

    def loss(t):
        flat, unravel = ravel_pytree(t)
        back = unravel(flat * 2.0)
        return jnp.sum(flat ** 2) + back["b"]

    g = ftrans.grad(loss)(tree)
    np.testing.assert_allclose(np.asarray(g["a"]), [2.0, 4.0])
    np.testing.assert_allclose(np.asarray(g["b"]), 8.0)
    flat = ftrans.jit(lambda t: ravel_pytree(t)[0])(tree)
    _same(flat, jfu.ravel_pytree(tree)[0])
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = ftrans.vmap(lambda x: ravel_pytree((x, x[:1] * 2))[0])(xs)
    np.testing.assert_array_equal(np.asarray(out), np.concatenate([xs, xs[:, :1] * 2], axis=1))
