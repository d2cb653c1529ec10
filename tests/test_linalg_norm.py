"""jnp.linalg.norm against jax."""

import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

_VECTOR_ORDS = [None, 1, 2, 3, 0.5, np.inf, -np.inf, 0]
_MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


@pytest.mark.parametrize("ord", _VECTOR_ORDS)
def test_vector_norms(ord):
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    for axis in (-1, 0):
        got = fnp.linalg.norm(x, ord=ord, axis=axis)
        want = jnp.linalg.norm(x, ord=ord, axis=axis)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


@pytest.mark.parametrize("ord", _MATRIX_ORDS)
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms(ord, keepdims):
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    got = fnp.linalg.norm(x, ord=ord, axis=(1, 2), keepdims=keepdims)
    want = jnp.linalg.norm(x, ord=ord, axis=(1, 2), keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    closed = ftrans.make_jaxpr(lambda a: fnp.linalg.norm(a, ord=ord, axis=(1, 2), keepdims=keepdims))(x)
    np.testing.assert_allclose(np.asarray(ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x)[0]),
                               np.asarray(want), rtol=1e-5)


def test_default_norm_of_matrix_and_ints():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = fnp.linalg.norm(x)
    assert got.dtype == jnp.linalg.norm(x).dtype
    np.testing.assert_allclose(float(got), float(jnp.linalg.norm(x)), rtol=1e-6)


def test_norm_errors():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="ord"):
        fnp.linalg.norm(x, ord="bad")


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_singular_value_norms(ord, keepdims):
    """ord 2, -2 and 'nuc' of matrices (once NotImplementedError here) come from the SVD, as in jax."""
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in ((1, 2), (2, 0)):
        got = fnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
        want = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
        jitted = ftrans.jit(lambda a: fnp.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims))(x)
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(want), rtol=1e-5)
