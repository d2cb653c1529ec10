"""``ftrans.scipy.integrate.trapezoid`` against ``jax.scipy.integrate.trapezoid`` and SciPy."""

from __future__ import annotations

import jax.scipy.integrate as jint
import numpy as np
import pytest
import scipy.integrate

import ftrans
import ftrans.scipy.integrate as fint


@pytest.mark.parametrize("yshape,xshape,axis", [((5,), None, -1), ((4, 6), None, 0), ((4, 6), (6,), -1),
                                                 ((4, 6), (4, 6), 0), ((3, 4, 5), (4,), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64])
@pytest.mark.parametrize("dx", [1.0, 0.25])
def test_trapezoid_matches_jax_and_scipy(yshape, xshape, axis, dtype, dx):
    rng = np.random.RandomState(0)
    y = (rng.randn(*yshape) * 4).astype(dtype)
    x = None if xshape is None else np.sort(rng.rand(*xshape), axis=-1 if len(xshape) == 1 else axis).astype(
        np.float32)
    a = jint.trapezoid(y, x, dx=dx, axis=axis)
    b = fint.trapezoid(y, x, dx=dx, axis=axis)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(b), scipy.integrate.trapezoid(y, x, dx=dx, axis=axis), rtol=1e-4,
                               atol=1e-4)


def test_trapezoid_under_jit_and_grad():
    y = np.linspace(0.0, 1.0, 7, dtype=np.float32)
    out = ftrans.jit(lambda y: fint.trapezoid(y ** 2, dx=0.5))(y)
    np.testing.assert_allclose(np.asarray(out), scipy.integrate.trapezoid(y ** 2, dx=0.5), rtol=1e-6)
    g = ftrans.grad(lambda y: fint.trapezoid(y, dx=0.5))(y)
    np.testing.assert_allclose(np.asarray(g), [0.25] + [0.5] * 5 + [0.25])
