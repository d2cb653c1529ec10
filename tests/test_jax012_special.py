"""jax 0.12's changes to ``jax.scipy.special`` and the special functions of ``jax.lax``, which ftrans follows
whichever jax is installed.

Each behaviour is checked against SciPy (float64, rounded to the dtype) or a closed form, eagerly, under
``ftrans.jit`` and under ``ftrans.vmap``; when jax 0.12 is installed, against jax itself too.

- ``expn``/``exp1``/``expi``: ``E_n(inf) = 0`` (and 0 beyond ``log(max)``), ``Ei(0) = -inf``, ``Ei(-inf) = -0``,
  a fractional order truncated, an infinite order NaN, ``dE_0/dx = -(x + 1) e^-x / x**2``;
  ``E_n`` for ``x > 1`` within a few ulp of SciPy.
"""

from __future__ import annotations

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as ss

import ftrans
import ftrans.scipy.special as fsp

F32 = np.float32
JAX012 = jax.__version_info__ >= (0, 12)
needs_jax012 = pytest.mark.skipif(not JAX012, reason="jax 0.12's answers are the oracle")


def _eager_jit_vmap(f, *args):
    """``f(*args)`` eagerly, under ``jit`` and under ``vmap``, as NumPy arrays."""
    return [np.asarray(r) for r in (f(*args), ftrans.jit(f)(*args), ftrans.vmap(f)(*args))]


def _same(got, want, rtol=0.0, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    # an infinity or a signed zero must be the same one
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf])
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), (got, want)


# ----------------------------------------------------------------------------
# expn, exp1, expi

EXPN_N = np.array([1, 2, 0, 1, 3, 2.5, 2.7, 0.9, np.inf, np.nan, -1, 6000, 1, 0, 0, 4, 1], F32)
EXPN_X = np.array([np.inf, np.inf, np.inf, 100, 95, 1, 0.5, 2, 1, 1, 1, 3, np.nan, 0, 1, -1, 89.0], F32)


def _scipy_expn(n, x):
    n64, x64 = n.astype(np.float64), x.astype(np.float64)
    bad = ~np.isfinite(n64) | (n64 < 0)
    with np.errstate(invalid="ignore"):
        want = ss.expn(np.where(bad, 1, np.trunc(n64)).astype(np.int64), x64)
    return np.where(bad, np.nan, want)


def test_expn_edges_follow_jax012():
    want = _scipy_expn(EXPN_N, EXPN_X)
    # beyond log(max) every jax (and ftrans under jit, where XLA flushes) gives 0, not a subnormal
    want = np.where(EXPN_X > np.log(np.finfo(F32).max), 0.0, want).astype(F32)
    for got in _eager_jit_vmap(fsp.expn, EXPN_N, EXPN_X):
        _same(got, want, rtol=2e-6)


def test_exp1_expi_edges_follow_jax012():
    x = np.array([np.inf, 0, -1, 1e-3, 200, np.nan], F32)
    _same(np.asarray(fsp.exp1(x)), ss.exp1(x.astype(np.float64)).astype(F32), rtol=2e-6)
    for got in _eager_jit_vmap(fsp.exp1, x):
        _same(got, ss.exp1(x.astype(np.float64)).astype(F32), rtol=2e-6)
    x = np.array([0, -np.inf, -0.0, -1, 1e-3, -200, np.inf, np.nan], F32)
    want = ss.expi(x.astype(np.float64))
    want[x == np.inf] = np.nan  # jax (0.10 to 0.12) and ftrans: NaN at +inf (SciPy: inf)
    for got in _eager_jit_vmap(fsp.expi, x):
        _same(got, want.astype(F32), rtol=2e-6)


def test_expn_derivatives():
    n = np.array([0, 0, 0, 0, 1, 2, 2.5, 3, -1, np.inf, 1], F32)
    x = np.array([0.5, 2, 0, 100, 0.5, 3, 1, 0.2, 1, 1, np.inf], F32)
    x64 = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        d0 = np.where(x64 == 0, -np.inf, -(x64 + 1) * np.exp(-x64) / x64 ** 2)
        want = np.where(n == 0, d0, -_scipy_expn(np.maximum(np.trunc(n) - 1, 0), x))
    want = np.where(x64 > np.log(np.finfo(F32).max), -0.0, want)
    want = np.where((n < 0) | np.isinf(n), np.nan, want).astype(F32)
    grad = ftrans.grad(fsp.expn, 1)
    for got in (ftrans.vmap(grad)(n, x), ftrans.jit(ftrans.vmap(grad))(n, x), ftrans.vmap(ftrans.jit(grad))(n, x),
                [grad(a, b) for a, b in zip(n, x)]):
        np.testing.assert_allclose(got, want, rtol=2e-5, equal_nan=True)
    vjp = ftrans.vjp(lambda v: fsp.expn(n, v), x)[1](np.ones_like(x))[0]
    np.testing.assert_allclose(vjp, want, rtol=2e-5, equal_nan=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_exp1_accuracy_against_scipy(dt):
    """The continued fraction (``x > 1``), evaluated backwards, stays within a few ulp of SciPy."""
    x = np.concatenate([np.geomspace(1e-4, 1, 40), np.linspace(1, 5, 80), np.linspace(5, 80, 60)]).astype(dt)
    want = ss.exp1(x.astype(np.float64))
    with ftrans.enable_x64(dt == np.float64):
        got = np.asarray(fsp.exp1(x)).astype(np.float64)
        gotn = np.asarray(fsp.expn(np.full_like(x, 3), x)).astype(np.float64)
    ulp = np.abs(got - want) / want / np.finfo(dt).eps
    assert ulp.max() < 6, (x[np.argmax(ulp)], ulp.max())
    ulp3 = np.abs(gotn - ss.expn(3, x.astype(np.float64))) / ss.expn(3, x.astype(np.float64)) / np.finfo(dt).eps
    assert ulp3.max() < 8, (x[np.argmax(ulp3)], ulp3.max())


@needs_jax012
def test_expn_family_against_jax012():
    jit_grad = jax.jit(jax.vmap(jax.grad(jsp.expn, 1)))
    np.testing.assert_allclose(fsp.expn(EXPN_N, EXPN_X), jax.jit(jsp.expn)(EXPN_N, EXPN_X), rtol=2e-6,
                               equal_nan=True)
    ok = np.isfinite(EXPN_N) | np.isnan(EXPN_N)
    np.testing.assert_allclose(ftrans.jit(ftrans.vmap(ftrans.grad(fsp.expn, 1)))(EXPN_N[ok], EXPN_X[ok]),
                               jit_grad(EXPN_N[ok], EXPN_X[ok]), rtol=2e-5, equal_nan=True)
    x = np.array([np.inf, 0, -1, 1e-3, 200, np.nan, -np.inf, 2], F32)
    for name in ("exp1", "expi"):
        _same(ftrans.jit(getattr(fsp, name))(x), jax.jit(getattr(jsp, name))(x), rtol=4e-6)
