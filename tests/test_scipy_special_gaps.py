"""``scipy.special`` gaps found by JAX's own special-function tests, against ``jax.scipy.special``:
``hyp2f1``, complex ``gamma``/``loggamma``, the Bessel ``i0e``/``i1e`` programs on scalars, ``sici`` and
``betainc`` edge values, ``expn`` with a broadcast integer order, and ``ndtri`` under ``debug_infs``."""

from __future__ import annotations

import functools

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special as osp

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
    fj, gj = ftrans.jit(f), jax.jit(g)
    for v in xs:
        close(fj(v), gj(v), 2e-6, 1e-7)
    close(fj(xs), gj(xs), 2e-6, 1e-7)
    close(ftrans.jit(ftrans.grad(f))(F(4.0)), jax.jit(jax.grad(g))(F(4.0)), 2e-5, 1e-7)


def test_lax_bessel_scalar_programs():
    for v in (3.5, 6.0, 12.0):
        close(ftrans.jit(ftrans.lax.bessel_i0e)(F(v)), jax.jit(jax.lax.bessel_i0e)(F(v)), 2e-6)
        close(ftrans.jit(ftrans.lax.bessel_i1e)(F(v)), jax.jit(jax.lax.bessel_i1e)(F(v)), 2e-6)


# ---------------------------------------------------------------- sici, betainc, expn, ndtri

def test_sici_edge_values_and_complex_error():
    x = np.array([0.0, np.inf, -np.inf, -0.5, 3.0], F)
    want = jax.jit(jsp.sici)(x)
    for o, t in zip(fsp.sici(x), want):
        close(o, t, 1e-6, 1e-6)
    for o, t in zip(ftrans.jit(fsp.sici)(x), want):
        close(o, t, 1e-6, 1e-6)
    assert np.isnan(np.asarray(fsp.sici(x)[1])[2])  # Ci(-inf) is NaN, as SciPy's
    with pytest.raises(ValueError, match="Argument `x` to sici must be real-valued"):
        fsp.sici(np.arange(3, dtype=np.complex64))


def test_betainc_boundary_values():
    fi = np.finfo(F)
    s = np.array([np.nan, -0.5, np.inf, 0, fi.eps, 1, 0.5, 3], F)
    xs = np.array([np.nan, -0.5, 0, 0.2, 0.5, 1, 1.5], F)
    A, B, X = np.meshgrid(s, s, xs)
    want = osp.betainc(A, B, X)
    close(fsp.betainc(A, B, X), want.astype(F), 5e-5, 1e-6)
    close(ftrans.jit(fsp.betainc)(A, B, X), want.astype(F), 5e-5, 1e-6)
    # the grid JAX's own test checks, against jax
    g = np.array([np.nan, -0.5, np.inf, 0, fi.eps, 1], F)
    A, B, X = np.meshgrid(g, g, np.array([np.nan, -0.5, 0, 0.5, 1, 1.5], F))
    close(fsp.betainc(A, B, X), jax.jit(jsp.betainc)(A, B, X), 5e-5, 1e-6)


def test_expn_broadcast_int_order():
    n = np.array([[1], [2], [3]], np.int32)
    x = np.linspace(0.2, 3.0, 8, dtype=F).reshape(2, 1, 4)
    want, want_grad = jax.jit(lambda n, x: (jsp.expn(n, x), jax.grad(lambda v: jsp.expn(n, v).sum())(x)))(n, x)
    close(fsp.expn(n, x), want, 1e-5, 1e-7)
    close(ftrans.jit(fsp.expn)(n, x), want, 1e-5, 1e-7)
    ours = ftrans.grad(lambda v: fsp.expn(n, v).sum())(x)
    close(ours, want_grad, 1e-4, 1e-6)


@pytest.mark.parametrize("with_jit", [False, True])
def test_ndtri_debug_infs(with_jit):
    f = ftrans.jit(fsp.ndtri) if with_jit else fsp.ndtri
    g = jax.jit(jsp.ndtri) if with_jit else jsp.ndtri
    with ftrans.debug_infs(True), jax.debug_infs(True):
        close(f(0.5), g(0.5), 0, 0)  # no inf on the way: no error
        for p in (0.0, 1.0):
            with pytest.raises(FloatingPointError, match=r"invalid value \(inf\)"):
                g(p)
            with pytest.raises(FloatingPointError, match=r"invalid value \(inf\)"):
                f(p)


# ---------------------------------------------------------------- complex gamma / loggamma

def _complex_samples():
    rng = np.random.RandomState(0)
    return ((rng.randn(64) + 1j * rng.randn(64)) * 3).astype(np.complex64)


@pytest.mark.parametrize("name", ["gamma", "loggamma"])
def test_complex_gamma_values(name):
    z = _complex_samples()
    f, g = getattr(fsp, name), getattr(jsp, name)
    want = jax.jit(g)(z)
    close(f(z), want, 1e-4, 1e-5)
    close(ftrans.jit(f)(z), want, 1e-4, 1e-5)
    close(ftrans.vmap(f)(z.reshape(8, 8)), jax.jit(jax.vmap(g))(z.reshape(8, 8)), 1e-4, 1e-5)
    # and SciPy's principal branch, far out too (a long shift to the right half-plane)
    far = np.array([-30.5 + 2j, -7.25 - 0.5j, 30 + 40j, 0.001j, -2.5 + 1e-6j, -2.5 - 1e-6j], np.complex64)
    ref = getattr(osp, name)(far.astype(np.complex128)).astype(np.complex64)
    close(f(far), ref, 1e-4, 1e-30)


def test_complex_gamma_poles_and_branch_cut():
    poles = np.array([0, -1, -2, -5, complex(np.nan, 1.0)], np.complex64)
    for f in (fsp.gamma, fsp.loggamma):
        out = np.asarray(f(poles))
        assert np.isnan(out.real).all() and np.isnan(out.imag).all()
    z = np.array([-0.5 + 0j, -1.5 + 0j, 0.5 + 1j, 0.5 - 1j, -2.5 + 1e-12j, -2.5 - 1e-12j], np.complex64)
    r = np.array([-2.5, 0.5, 4.0], F)
    want_gamma, want_loggamma, want_real = jax.jit(lambda z, r: (jsp.gamma(z), jsp.loggamma(z), jsp.gamma(r)))(z, r)
    close(fsp.gamma(z), want_gamma, 1e-5, 1e-5)
    close(fsp.loggamma(z), want_loggamma, 1e-5, 1e-5)
    # real inputs keep their real definitions
    close(fsp.gamma(r), want_real, 1e-6)


def test_complex_gamma_jvp():
    z = np.array([0.5 + 1j, 2.0 - 0.5j, -1.5 + 0.3j], np.complex64)
    t = np.ones_like(z)
    want = jax.jit(lambda z, t: [jax.jvp(getattr(jsp, name), (z,), (t,)) for name in ("gamma", "loggamma")])(z, t)
    for name, theirs in zip(("gamma", "loggamma"), want):
        ours = ftrans.jvp(getattr(fsp, name), (z,), (t,))
        close(ours[0], theirs[0], 1e-4, 1e-5)
        close(ours[1], theirs[1], 1e-3, 1e-4)


# ---------------------------------------------------------------- hyp2f1

_SPECIAL = tuple(np.array(v, F) for v in (
    [0, 1, 1, 1, 1, 5, 5, 0.245, 0.45, 0.45, 2, 0.4, 0.32, 4, 4],
    [1, 0, 1, 1, 1, 1, 1, 3, 0.7, 0.7, 1, 0.7, 0.76, 2, 3],
    [1, 1, 0, 1, -1, 3, 3, 3, 0.45, 0.45, 5, 0.3, 0.11, 7, 7],
    [1, 1, 1, 0, 1, 0.5, 1, 0.35, 0.35, 1.5, 1, 0.4, 0.95, 0.95, 0.95]))


_rng = np.random.RandomState(1)
_A, _B = _rng.uniform(0.1, 0.9, (3, 1)).astype(F), _rng.uniform(0.1, 0.9, (3, 1)).astype(F)
_C, _X = _rng.uniform(0.1, 0.9, (2, 1, 4)).astype(F), _rng.uniform(0.1, 0.9, (2, 1, 4)).astype(F)
_VMAP = tuple(_rng.uniform(0.1, 0.9, (4, 5)).astype(F) for _ in range(4))
# every point the value tests ask jax for, broadcast: (special cases, broadcast, scalar a and b, vmapped)
_HYP2F1_POINTS = (_SPECIAL, (_A, _B, _C, _X), (F(0.5), F(0.25), _C, _X), _VMAP)


@functools.cache
def _jax_hyp2f1():
    """jax's hyp2f1 (an elementwise function) at every point of ``_HYP2F1_POINTS``, each group in its broadcast
    shape: one compile of its series loop, where a call per shape compiled it four times (seconds each)."""
    groups = [np.broadcast_arrays(*(np.asarray(v, F) for v in g)) for g in _HYP2F1_POINTS]
    flat = [np.concatenate([g[i].ravel() for g in groups]) for i in range(4)]
    out, start = np.asarray(jax.jit(jsp.hyp2f1)(*flat)), 0
    want = []
    for g in groups:
        want.append(out[start:start + g[0].size].reshape(g[0].shape))
        start += g[0].size
    return want


def test_hyp2f1_special_cases():
    want = _jax_hyp2f1()[0]
    close(fsp.hyp2f1(*_SPECIAL), want, 5e-5)
    close(ftrans.jit(fsp.hyp2f1)(*_SPECIAL), want, 5e-5)
    close(fsp.hyp2f1(*_SPECIAL), osp.hyp2f1(*_SPECIAL), 5e-5)


def test_hyp2f1_values_broadcast_vmap():
    _, want, want_scalar_ab, want_vmap = _jax_hyp2f1()
    a, b, c, x = _A, _B, _C, _X
    close(fsp.hyp2f1(a, b, c, x), want, 1e-5)
    close(ftrans.jit(fsp.hyp2f1)(a, b, c, x), want, 1e-5)
    close(fsp.hyp2f1(F(0.5), F(0.25), c, x), want_scalar_ab, 1e-5)
    close(ftrans.vmap(fsp.hyp2f1)(*_VMAP), want_vmap, 1e-5)
    # terminating series, x near 1 (connection formula), negative x (Pfaff), c - a - b <= -1 (Euler): SciPy
    A = np.array([-3, 2.5, 0.3, 1.5, 0.5, 2.0, 1.2, -2], F)
    B = np.array([1.5, 0.7, 0.4, 2.5, 0.5, 3.0, 0.8, 4], F)
    C = np.array([2.0, 1.1, 1.6, 1.0, 1.5, 4.0, 2.5, 1.5], F)
    X = np.array([0.7, 0.99, 0.98, 0.5, -0.5, -3.0, -10.0, 0.3], F)
    close(fsp.hyp2f1(A, B, C, X), osp.hyp2f1(A, B, C, X).astype(F), 1e-4)


def _hyp2f1_grad_args():
    rng = np.random.RandomState(2)
    return tuple(rng.uniform(0.1, 0.9, (6,)).astype(F) for _ in range(4))


@functools.cache
def _jax_hyp2f1_grads():
    """jax's gradient of ``sum(hyp2f1)`` in all four arguments: one compiled program serves the four cases."""
    return jax.jit(jax.grad(lambda *v: jsp.hyp2f1(*v).sum(), (0, 1, 2, 3)))(*_hyp2f1_grad_args())


@pytest.mark.parametrize("argnum", [0, 1, 2, 3])
def test_hyp2f1_grads(argnum):
    args = _hyp2f1_grad_args()
    ours = ftrans.grad(lambda *v: fsp.hyp2f1(*v).sum(), argnum)(*args)
    theirs = _jax_hyp2f1_grads()[argnum]
    close(ours, theirs, 1e-4, 1e-5)
    fwd = ftrans.jvp(lambda v: fsp.hyp2f1(*args[:argnum], v, *args[argnum + 1:]), (args[argnum],),
                     (np.ones(6, F),))[1]
    close(fwd, theirs, 1e-4, 1e-5)
    close(ftrans.vmap(ftrans.grad(lambda *v: fsp.hyp2f1(*v), argnum))(*args), theirs, 1e-4, 1e-5)


def test_hyp2f1_complex_error():
    with pytest.raises(ValueError, match="complex"):
        fsp.hyp2f1(1.0, 2.0, 3.0, np.complex64(0.5))


def test_double_precision():
    # complex128 loggamma/gamma and float64 hyp2f1 reach double precision (against SciPy)
    rng = np.random.RandomState(3)
    z = (rng.randn(40) + 1j * rng.randn(40)) * 4
    A, B, C = (rng.uniform(0.1, 3.0, 30) for _ in range(3))
    X = rng.uniform(-2.0, 0.97, 30)
    with ftrans.enable_x64(True):
        lg = fsp.loggamma(z)
        assert lg.dtype == np.complex128
        np.testing.assert_allclose(np.asarray(lg), osp.loggamma(z), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(fsp.gamma(z)), osp.gamma(z), rtol=1e-11)
        h = fsp.hyp2f1(A, B, C, X)
        assert h.dtype == np.float64
        np.testing.assert_allclose(np.asarray(h), osp.hyp2f1(A, B, C, X), rtol=1e-9)
