"""An ellipsis that expands to no axes still separates the advanced indices on either side of it, so their
broadcast dimensions go first (NumPy's rule, which JAX follows): x[:, [0, 1], ..., [0, 1]] on a rank-3
array has shape (2, 3). Checked against NumPy and JAX for reads (eager and jit) and ``.at`` updates."""

from __future__ import annotations

import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp

A = np.array
CASES = [
    (slice(None), A([0, 1]), Ellipsis, A([0, 1])),
    (slice(None), A([0, 1]), Ellipsis, 0),
    (slice(None), 1, Ellipsis, A([0, 1])),
    (slice(None), A([[0], [1]]), Ellipsis, A([True, False, True, False, True])),
    (0, Ellipsis, A([0, 1]), A([1, 2])),  # adjacent after the ellipsis: they stay in place
    (A([0, 1]), A([1, 2]), Ellipsis, 3),
    (Ellipsis, A([0, 1]), A([0, 1]), A([0, 1])),
    (slice(1, 3), Ellipsis, A([2, 3]), slice(None)),  # one advanced index: nothing to separate
]


@pytest.mark.parametrize("idx", CASES, ids=range(len(CASES)))
def test_read_matches_numpy_and_jax(idx):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    want = x[idx]
    assert jjnp.asarray(x)[idx].shape == want.shape
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[idx]), want)
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda v: v[idx])(x)), want)


@pytest.mark.parametrize("idx", CASES, ids=range(len(CASES)))
def test_updates_match_jax(idx):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    y = np.arange(np.prod(x[idx].shape), dtype=np.float32).reshape(x[idx].shape) + 100
    for op in ("set", "add", "multiply"):
        got = getattr(jnp.asarray(x).at[idx], op)(y)
        want = getattr(jjnp.asarray(x).at[idx], op)(y)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # updates broadcast against the index shape: (2, 1) into (2, 3)
    idx = CASES[0]
    got = jnp.asarray(x).at[idx].multiply(np.full((2, 1), 2, np.float32))
    want = jjnp.asarray(x).at[idx].multiply(np.full((2, 1), 2, np.float32))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
