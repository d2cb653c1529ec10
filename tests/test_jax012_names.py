"""Names jax 0.12 added, in ftrans whatever jax is installed: against jax 0.12 where it is the oracle,
against NumPy and finite differences otherwise."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fnp

JAX_012 = hasattr(jax.lax, "polynomial")
X = np.array([-2.0, -0.5, 0.0, 0.75, 3.0, np.inf, -np.inf], np.float32)


def _numpy_polynomial(x, coeffs):
    """Horner's rule from the leading coefficient, in float64."""
    y = np.broadcast_to(np.asarray(coeffs[-1], np.float64), np.shape(x))
    for c in reversed(coeffs[:-1]):
        y = y * np.asarray(x, np.float64) + c
    return y


@pytest.mark.parametrize("coeffs", [[2.0], [1.0, 5.0, 2.0], [3.0, -2.0, 1.0], [0.5, 0.0, 0.0, -1.25, 0.125]])
def test_polynomial_values_and_derivatives(coeffs):
    got = flax.polynomial(X, coeffs)
    assert got.dtype == np.float32 and got.shape == X.shape
    np.testing.assert_allclose(np.asarray(got), _numpy_polynomial(X, coeffs), rtol=1e-6)
    dgot = ftrans.vmap(ftrans.grad(lambda x: flax.polynomial(x, coeffs)))(X[:5])
    deriv = [k * c for k, c in enumerate(coeffs)][1:] or [0.0]
    np.testing.assert_allclose(np.asarray(dgot), _numpy_polynomial(X[:5], deriv), rtol=1e-6, atol=1e-6)
    if JAX_012:
        want = jax.lax.polynomial(X, coeffs)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got.weak_type == want.weak_type


def test_polynomial_types_and_broadcasting_as_jax():
    assert flax.polynomial(3.0, [1.0, 5.0, 2.0]).weak_type  # Python scalars: weakly typed, as JAX's
    assert float(flax.polynomial(3.0, [1.0, 5.0, 2.0])) == 34.0
    x = np.float32([[0.5], [1.5]])
    c = [np.float32([[1.0, 2.0]]), 3.0]  # size-1 dimensions broadcast
    np.testing.assert_allclose(np.asarray(flax.polynomial(x, c)), np.float32([[2.5, 3.5], [5.5, 6.5]]))
    with pytest.raises(TypeError, match="same number of dimensions"):
        flax.polynomial(np.float32([0.5, 1.5]), [np.float32([[1.0], [2.0]]), 3.0])
    # jax 0.12 converts the coefficients to x's dtype, and no coefficients is the zero polynomial
    assert flax.polynomial(np.float32([0.5]), [np.float16([1.0])]).dtype == np.float32
    assert float(flax.polynomial(1.0, [])) == 0.0
    if JAX_012:
        assert jax.lax.polynomial(np.float32([0.5]), [np.float16([1.0])]).dtype == np.float32
        assert float(jax.lax.polynomial(1.0, [])) == 0.0
    with pytest.raises(ValueError, match="unroll"):
        flax.polynomial(1.0, [1.0], unroll=0)
    j = ftrans.jit(lambda x: flax.polynomial(x, [1.0, 2.0, 3.0], unroll=1))(np.float32(2.0))
    assert float(j) == 17.0


def test_lexsort_batch_size_and_erfc_accuracy():
    keys = [np.array([3, 1, 2, 1]), np.array([0, 1, 0, 1]), np.array([2, 2, 1, 1])]
    for b in (1, 2, 16):
        np.testing.assert_array_equal(np.asarray(fnp.lexsort(keys, batch_size=b)), np.lexsort(keys))
    with pytest.raises(ValueError, match="batch_size"):
        fnp.lexsort(keys, batch_size=0)
    x = np.float32([0.1, 1.0, 2.5])
    np.testing.assert_array_equal(np.asarray(flax.erfc(x, accuracy=None)), np.asarray(flax.erfc(x)))


def test_jax_012_options_accepted_at_their_defaults():
    ftrans.config.update("jax_mosaic_unzip_debug_locations", False)
    ftrans.config.update("jax_mosaic_unzip_debug_locations", True)
    ftrans.config.update("jax_accurate_erf_inv", False)
    with pytest.raises(ValueError, match="erf_inv"):
        ftrans.config.update("jax_accurate_erf_inv", True)
