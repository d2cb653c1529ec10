"""``ftrans.ds`` (``dslice``): slices whose start may be traced, in ``x[...]`` and ``x.at[...]``, against jax."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

X = np.arange(10, dtype=np.int32)
Y = np.arange(24, dtype=np.float32).reshape(4, 6)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a, b)


# (array, index builder from (ds, start)); start is passed traced under jit, static otherwise
GETS = [
    (X, lambda ds, i: ds(i, 3)),
    (X, lambda ds, i: ds(i, 3, 2)),
    (X, lambda ds, i: ds(i, 0)),
    (Y, lambda ds, i: (1, ds(i, 2))),
    (Y, lambda ds, i: (ds(i, 2), None, ds(1, 3))),
    (Y, lambda ds, i: (np.array([0, 3]), ds(i, 2))),
    (Y, lambda ds, i: (Ellipsis, ds(i, 2, 3))),
]
STARTS = [0, 2, 5, 8, -1, -3, 20]


@pytest.mark.parametrize("case", range(len(GETS)))
@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("jit", [False, True])
def test_getitem_matches_jax(case, start, jit):
    x, idx = GETS[case]
    if not jit and start == 20:
        pytest.skip("a static start past the end: see the update tests")

    def run(mod, jnp, jit=jit):
        f = lambda x, i: x[idx(mod.ds, i)]  # noqa: E731
        return (mod.jit(f) if jit else f)(jnp.asarray(x), np.int32(start) if jit else start)

    # A static start reads as a traced one does (jax 0.10's eager result, and jax's under jit); jax 0.11 reads
    # a static ds eagerly as slice(start, start + size, stride) (docs/differences.md, "Indexing and shapes")
    same(run(ftrans, fjnp), run(jax, jjnp, jit=True))


@pytest.mark.parametrize("op", ["set", "add", "multiply", "max"])
@pytest.mark.parametrize("start", [0, 3, 7, 8, -2, 11])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("jit", [False, True])
def test_updates_match_jax_including_dropped_windows(op, start, stride, jit):
    def run(mod, jnp):
        def f(x, i):
            return getattr(x.at[mod.ds(i, 3, stride)], op)(jnp.array([10, 20, 30], x.dtype))

        return (mod.jit(f) if jit else f)(jnp.asarray(X), np.int32(start) if jit else start)

    same(run(ftrans, fjnp), run(jax, jjnp))


def test_forms_transforms_and_pytree_like_jax():
    assert ftrans.ds(None) == slice(None) == jax.ds(None)
    same(fjnp.asarray(X)[ftrans.ds(4)], jjnp.asarray(X)[jax.ds(4)])
    s = ftrans.ds(1, 2)
    assert (s.start, s.size, s.stride) == (1, 2, 1) and ftrans.dslice is ftrans.ds
    leaves, _ = ftrans.tree_util.tree_flatten(ftrans.ds(1, 2))
    assert leaves == []
    # a traced start is the slice's leaf, so a Slice passes through jit as an argument
    # (jax 0.11 takes any concrete start for a static one, and then fails on one that is not a Python int)
    same(ftrans.jit(lambda s, x: x[s])(ftrans.ds(np.int32(2), 3), fjnp.asarray(X)),
         jax.jit(lambda s, x: x[s])(jax.ds(2, 3), jjnp.asarray(X)))
    same(ftrans.vmap(lambda i: fjnp.asarray(Y)[:, ftrans.ds(i, 2)])(fjnp.arange(4)),
         jax.vmap(lambda i: jjnp.asarray(Y)[:, jax.ds(i, 2)])(jjnp.arange(4)))
    g = ftrans.grad(lambda y, i: (y[ftrans.ds(i, 2, 2)] ** 2).sum())(fjnp.asarray(Y), 1)
    h = jax.jit(jax.grad(lambda y, i: (y[jax.ds(i, 2, 2)] ** 2).sum()))(jjnp.asarray(Y), np.int32(1))  # traced
    np.testing.assert_allclose(np.asarray(g), np.asarray(h))
    with pytest.raises(ValueError):
        ftrans.ds(0, 2, -1)
    with pytest.raises(ValueError):
        ftrans.ds(0, 2, np.float32(1.0))
    with pytest.raises(ftrans.errors.ConcretizationTypeError):
        ftrans.jit(lambda x, n: x[ftrans.ds(0, n)])(fjnp.asarray(X), 3)
