"""``ftrans.ops`` segment reductions, differential against ``jax.ops``: values, dtypes, empty segments,
out-of-bounds ids, buckets, modes, booleans, gradients, vmap and errors."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as jnp
from ftrans.errors import ConcretizationTypeError
from tests.hypothesis_budget import examples

NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _both(name, *args, **kw):
    data, ids, *rest = args
    ours = getattr(ftrans.ops, name)(jnp.asarray(data), jnp.asarray(ids), *rest, **kw)
    theirs = getattr(jax.ops, name)(jjnp.asarray(data), jjnp.asarray(ids), *rest, **kw)
    return ours, theirs


def _same(ours, theirs):
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)


# Every (function, dtype, shape) triple; num_segments and bucket_size alternate over them so that every
# pair of values of any two parameters still meets (the full product of all five was 288 cases).
_DTYPES = [np.float32, np.int32, np.int8, np.uint8]
_SHAPES = [(8,), (7, 3), (6, 2, 2)]
_NUM_SEGMENTS = [None, 1, 4]
_BUCKETS = [None, 3]
GRID = [(name, dtype, shape, _NUM_SEGMENTS[(i + j + k) % 3], _BUCKETS[(i + k) % 2])
        for i, name in enumerate(NAMES) for j, dtype in enumerate(_DTYPES) for k, shape in enumerate(_SHAPES)]


def test_grid_covers_every_pair():
    sizes = [len(NAMES), len(_DTYPES), len(_SHAPES), len(_NUM_SEGMENTS), len(_BUCKETS)]
    keys = [tuple(repr(v) for v in row) for row in GRID]
    for p in range(5):
        for q in range(p + 1, 5):
            assert len({(k[p], k[q]) for k in keys}) == sizes[p] * sizes[q], (p, q)


@pytest.mark.parametrize(("name", "dtype", "shape", "num_segments", "bucket_size"), GRID)
def test_matches_jax(name, dtype, shape, num_segments, bucket_size):
    rng = np.random.default_rng(0)
    data = (rng.integers(0, 4, shape)).astype(dtype)
    ids = rng.integers(-2, 5, shape[:1]).astype(np.int32)
    ids[0] = 3  # a positive maximum, so the inferred num_segments is not empty
    _same(*_both(name, data, ids, num_segments, bucket_size=bucket_size))


@pytest.mark.parametrize("name", ["segment_max", "segment_min"])
@pytest.mark.parametrize("bucket_size", [None, 2])
def test_booleans(name, bucket_size):
    data = np.array([True, False, False, True, True, False])
    ids = np.array([0, 0, 1, 2, 2, 5], np.int32)  # segment 3 is empty; 5 is dropped
    ours, theirs = _both(name, data, ids, 4, bucket_size=bucket_size)
    _same(ours, theirs)
    assert bool(ours[3]) is (name == "segment_min")  # the identity of all / any


def test_empty_segments_hold_the_identity():
    data = np.ones(3, np.float32)
    ids = np.array([0, 0, 2], np.int32)
    assert np.asarray(ftrans.ops.segment_sum(data, ids, 4)).tolist() == [2, 0, 1, 0]
    assert np.asarray(ftrans.ops.segment_prod(data, ids, 4)).tolist() == [1, 1, 1, 1]
    assert np.asarray(ftrans.ops.segment_max(data, ids, 4)).tolist() == [1, -np.inf, 1, -np.inf]
    assert np.asarray(ftrans.ops.segment_min(data.astype(np.int16), ids, 4)).tolist() == [1, 32767, 1, 32767]


@pytest.mark.parametrize("mode", [None, "fill", "drop", "clip"])
@pytest.mark.parametrize("name", NAMES)
def test_out_of_bounds_ids(name, mode):
    data = np.arange(1, 9, dtype=np.float32)
    ids = np.array([0, 4, 8, 1, 2, -6, -1, 3], np.int32)
    _same(*_both(name, data, ids, 4, mode=mode))


def test_inferred_num_segments_and_negative_ids():
    data = np.array([5, 1, 7, 2, 3, 4, 1, 3], np.int32)
    ids = np.array([3, 3, 3, 4, 5, 5, -7, -6], np.int32)
    ours, theirs = _both("segment_sum", data, ids)
    _same(ours, theirs)
    assert np.asarray(ours).tolist() == [0, 0, 0, 13, 2, 7]


def test_scalar_and_multidimensional_ids():
    _same(*_both("segment_max", np.float32(1.0), np.int32(0), 3))
    _same(*_both("segment_sum", np.ones((3, 2), np.float32), np.array([[0, 1, 0]], np.int32), 2))


@pytest.mark.parametrize("name", ["segment_sum", "segment_max", "segment_min"])
def test_grad_matches_jax(name):
    data = np.array([0.5, -1.0, 2.0, 3.0, 0.25, 2.0], np.float32)
    ids = np.array([0, 0, 1, 3, 7, 1], np.int32)

    def loss(mod, ops):
        return lambda d: (getattr(ops, name)(d, ids, 4) * mod.arange(1.0, 5.0)).sum()

    g = ftrans.grad(loss(jnp, ftrans.ops))(jnp.asarray(data))
    gj = jax.grad(loss(jjnp, jax.ops))(jjnp.asarray(data))
    np.testing.assert_allclose(np.asarray(g), np.asarray(gj), rtol=1e-6)


def test_grad_with_out_of_bounds_ids_is_zero():
    f = lambda d: ftrans.ops.segment_sum(d, np.array([2, 3]), 2).sum()  # noqa: E731
    val, grad = ftrans.value_and_grad(f)(jnp.zeros(2))
    assert float(val) == 0.0 and np.asarray(grad).tolist() == [0.0, 0.0]


def test_segment_prod_grad_with_unique_indices():
    data = np.array([2.0, 3.0, 5.0], np.float32)
    ids = np.array([2, 0, 1], np.int32)

    def loss(ops):
        return lambda d: ops.segment_prod(d * d, ids, 3, unique_indices=True).sum()

    g = ftrans.grad(loss(ftrans.ops))(jnp.asarray(data))
    gj = jax.grad(loss(jax.ops))(jjnp.asarray(data))
    np.testing.assert_allclose(np.asarray(g), np.asarray(gj), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_and_jit(name):
    rng = np.random.default_rng(1)
    data = rng.normal(size=(3, 6)).astype(np.float32)
    ids = rng.integers(-1, 4, (3, 6)).astype(np.int32)
    f = lambda d, i: getattr(ftrans.ops, name)(d, i, 3)  # noqa: E731
    fj = lambda d, i: getattr(jax.ops, name)(d, i, 3)  # noqa: E731
    ours = ftrans.jit(ftrans.vmap(f))(jnp.asarray(data), jnp.asarray(ids))
    theirs = jax.vmap(fj)(data, ids)
    _same(ours, theirs)
    # ids shared by every batch element
    _same(ftrans.vmap(f, (0, None))(jnp.asarray(data), jnp.asarray(ids[0])), jax.vmap(fj, (0, None))(data, ids[0]))


@settings(max_examples=examples(25), deadline=None)
@given(n=st.integers(0, 9), num_segments=st.integers(0, 5), name=st.sampled_from(NAMES),
       seed=st.integers(0, 2**16), bucket=st.sampled_from([None, 1, 4]))
def test_random_against_jax(n, num_segments, name, seed, bucket):
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, 2)).astype(np.float32)
    ids = rng.integers(-2, num_segments + 2, (n,)).astype(np.int32)
    _same(*_both(name, data, ids, num_segments, bucket_size=bucket))


def test_errors():
    with pytest.raises(ConcretizationTypeError, match="num_segments"):
        ftrans.jit(ftrans.ops.segment_sum)(jnp.ones(3), jnp.array([0, 1, 1]))
    with pytest.raises(ValueError, match="non-negative"):
        ftrans.ops.segment_sum(jnp.ones(3), jnp.array([0, 1, 1]), -1)
    with pytest.raises(TypeError, match="ndarray or scalar"):
        ftrans.ops.segment_sum([1, 2], [0, 1], 2)
    with pytest.raises(TypeError, match="integer"):
        ftrans.ops.segment_sum(jnp.ones(2), jnp.array([0.0, 1.0]), 2)
    with pytest.raises(TypeError, match="boolean"):
        ftrans.ops.segment_sum(jnp.array([True, False]), jnp.array([0, 0]), 1)
    with pytest.raises(TypeError):
        jax.ops.segment_sum(jjnp.array([True, False]), jjnp.array([0, 0]), 1)  # jax rejects it too
    # static num_segments works under jit
    out = ftrans.jit(ftrans.ops.segment_sum, static_argnums=2)(jnp.arange(5), jnp.array([0, 0, 1, 1, 2]), 3)
    assert np.asarray(out).tolist() == [1, 5, 4]
