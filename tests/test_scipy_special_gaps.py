"""``scipy.special`` gaps found by JAX's own special-function tests, against ``jax.scipy.special``:
``hyp2f1``, complex ``gamma``/``loggamma``, the Bessel ``i0e``/``i1e`` programs on scalars, ``sici`` and
``betainc`` edge values, ``expn`` with a broadcast integer order, and ``ndtri`` under ``debug_infs``."""

from __future__ import annotations

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest

import ftrans
from ftrans.scipy import special as fsp

F = np.float32


def close(ours, theirs, rtol, atol=0.0):
    x, y = np.asarray(ours), np.asarray(theirs)
    assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
    np.testing.assert_allclose(x.astype(y.dtype), y, rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- Bessel i0e/i1e (lowered programs)

@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_bessel_scalars_under_jit(name):
    # a scalar program once came back NaN for 3.5 <= |x| < 15 (a running product of the series,
    # reassociated by XLA, overflowed to inf * 0); every scalar, and the vector, must match jax
    f, g = getattr(fsp, name), getattr(jsp, name)
    xs = np.array([-14.5, -4.0, -0.3, 0.0, 1.0, 3.0, 3.5, 4.0, 7.25, 10.0, 14.9, 15.0, 16.0, 40.0], F)
    fj = ftrans.jit(f)
    for v in xs:
        close(fj(v), g(v), 2e-6, 1e-7)
    close(fj(xs), jax.jit(g)(xs), 2e-6, 1e-7)
    close(ftrans.jit(ftrans.grad(f))(F(4.0)), jax.grad(g)(F(4.0)), 2e-5, 1e-7)


def test_lax_bessel_scalar_programs():
    for v in (3.5, 6.0, 12.0):
        close(ftrans.jit(ftrans.lax.bessel_i0e)(F(v)), jax.jit(jax.lax.bessel_i0e)(F(v)), 2e-6)
        close(ftrans.jit(ftrans.lax.bessel_i1e)(F(v)), jax.jit(jax.lax.bessel_i1e)(F(v)), 2e-6)
