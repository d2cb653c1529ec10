"""jnp.linalg.matrix_norm of empty matrices and jnp.linalg.qr(mode="full") against JAX."""

from __future__ import annotations

import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


@pytest.mark.parametrize("ord", [1, 2, np.inf, "fro", "nuc"])
@pytest.mark.parametrize("shape", [(0, 2), (2, 0), (0, 0), (3, 0, 4)])
def test_empty_matrix_norm_matches_jax(shape, ord):
    x = np.zeros(shape, np.float32)
    want = jjnp.linalg.matrix_norm(x, ord=ord)
    for got in (jnp.linalg.matrix_norm(x, ord=ord), ftrans.jit(lambda v: jnp.linalg.matrix_norm(v, ord=ord))(x)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_empty_matrix_minus_two_norm_raises_as_jax():
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        jjnp.linalg.matrix_norm(np.zeros((0, 2), np.float32), ord=-2)
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        jnp.linalg.matrix_norm(np.zeros((0, 2), np.float32), ord=-2)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (0, 2)])
def test_qr_mode_full_is_reduced_as_in_jax(shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + np.eye(*shape, dtype=np.float32)
    q, r = jnp.linalg.qr(x, mode="full")
    wq, wr = jjnp.linalg.qr(x, mode="full")
    assert q.shape == wq.shape and r.shape == wr.shape
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), x, atol=1e-4)
    rq, rr = jnp.linalg.qr(x, mode="reduced")
    np.testing.assert_array_equal(np.asarray(q), np.asarray(rq))
    np.testing.assert_array_equal(np.asarray(r), np.asarray(rr))
