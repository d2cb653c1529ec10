"""scipy.linalg: polar, expm_frechet, eigh_tridiagonal, solve_sylvester, schur, sqrtm, rsf2csf and funm
(and lax.linalg.schur) against jax and SciPy: values, dtypes, jit, vmap, and the errors for bad arguments."""

from __future__ import annotations

import jax
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as osl

import ftrans
import ftrans.scipy.linalg as fsl
from ftrans import lax as flax
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError
from tests.backend_util import cpu_only, require_cpu
from tests.thorough import THOROUGH

_SCHUR_CPU = cpu_only("the Schur decomposition (LAPACK gees) is CPU-only in JAX as in ftrans")
_HESS_CPU = cpu_only("the Hessenberg reduction (LAPACK gehrd) is CPU-only in JAX as in ftrans")


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _mat(shape, dtype, seed=0):
    rng = _rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# The jax oracles are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less compile
# time, and the same values up to float rounding, which the comparisons' tolerances are for.  (The LAPACK
# kernels are library calls either way; ftrans's programs compile as they always do.)
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def _jax(fn, **kw):
    """One jitted jax program per case (eager jax would compile every op it runs separately)."""
    return jax.jit(lambda *args: fn(*args, **kw), compiler_options=_ORACLE_OPTIONS)


def _close(ours, theirs, tol):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


# Every (shape, side) with every method; the dtypes take turns, so each meets every shape and every method.
@pytest.mark.parametrize("shape,side,method,dtype", [
    (shape, side, method, [np.float32, np.complex64][(i + j) % 2])
    for i, (shape, side) in enumerate([((4, 4), "right"), ((5, 3), "right"), ((3, 5), "left"), ((2, 4, 4), "left")])
    for j, method in enumerate(["qdwh", "svd"])])
def test_polar(shape, side, method, dtype):
    a = _mat(shape, dtype)
    if method == "qdwh" and shape == (2, 4, 4) and side == "left":
        method = "svd"
    u, p = fsl.polar(a, side=side, method=method)
    ju, jp = _jax(jsl.polar, side=side, method=method)(a)
    assert u.dtype == ju.dtype and p.dtype == jp.dtype
    _close(u, ju, 2e-4)
    _close(p, jp, 2e-4)
    fu, _ = ftrans.jit(lambda x: fsl.polar(x, side=side, method=method))(a)
    _close(fu, u, 1e-5)


def test_polar_errors():
    with pytest.raises(NotImplementedError):
        fsl.polar(np.ones((3, 5)), side="right")
    with pytest.raises(FtransValueError):
        fsl.polar(np.ones((3, 3)), side="up")
    with pytest.raises(FtransValueError):
        fsl.polar(np.ones((3, 3)), method="newton")
    with pytest.raises(FtransShapeError):
        fsl.polar(np.ones(3))


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
@pytest.mark.parametrize("compute_expm", [True, False])
def test_expm_frechet(shape, compute_expm):
    a, e = _mat(shape, np.float32, 1) * 0.5, _mat(shape, np.float32, 2)
    ours = fsl.expm_frechet(a, e, compute_expm=compute_expm)
    theirs = _jax(jsl.expm_frechet, compute_expm=compute_expm)(a, e)
    for o, t in zip(ours if compute_expm else [ours], theirs if compute_expm else [theirs]):
        _close(o, t, 1e-4)
    if shape == (3, 3):
        _, lf = osl.expm_frechet(a.astype(np.float64), e.astype(np.float64))
        _close(ours[1] if compute_expm else ours, lf, 1e-4)
    with pytest.raises(FtransShapeError):
        fsl.expm_frechet(np.ones((3, 3)), np.ones((2, 2)))


# Every dtype with a trivial size (no or one off-diagonal entry) and a general one, every size with some dtype;
# the thorough run takes every pair.
@pytest.mark.parametrize("dtype,n", [
    (dtype, n) for dtype in [np.float32, np.float64, np.complex64] for n in [1, 2, 5, 12]
    if THOROUGH or (dtype, n) in {(np.float32, 1), (np.float32, 12), (np.float64, 2), (np.float64, 5),
                                  (np.complex64, 2), (np.complex64, 12)}])
def test_eigh_tridiagonal(dtype, n):
    d = _mat((n,), dtype, 3).real.astype(dtype)
    e = _mat((max(n - 1, 0),), dtype, 4)
    with jax.enable_x64(dtype == np.float64), ftrans.enable_x64(dtype == np.float64):
        w = fsl.eigh_tridiagonal(d, e, eigvals_only=True)
        assert np.asarray(w).dtype == np.finfo(dtype).dtype
        jw = _jax(jsl.eigh_tridiagonal, eigvals_only=True)(d, e)
        _close(w, jw, 1e-5)
        _close(ftrans.jit(lambda a, b: fsl.eigh_tridiagonal(a, b, eigvals_only=True))(d, e), jw, 1e-5)
        t = np.diag(d) + np.diag(e, 1) + np.diag(np.conj(e), -1)
        w, v = fsl.eigh_tridiagonal(d, e)
        v = np.asarray(v)
        _close(t @ v, v * np.asarray(w), 1e-4)
        if n > 2:
            wi = fsl.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, n - 2))
            _close(wi, np.asarray(jw)[1:n - 1], 1e-5)


def test_eigh_tridiagonal_errors():
    with pytest.raises(FtransTypeError):
        fsl.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.complex64))
    with pytest.raises(FtransTypeError):
        fsl.eigh_tridiagonal(np.ones(3, np.int32), np.ones(2, np.int32))
    with pytest.raises(NotImplementedError):
        fsl.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="v")
    with pytest.raises(FtransValueError):
        fsl.eigh_tridiagonal(np.ones(3, np.float32), np.ones(2, np.float32), select="i")


# Every batching with every method; the dtypes take turns, so each meets every batching and every method.  The
# quick run keeps the middle four: every batching, and each method with both dtypes, unbatched and batched.
_SYLVESTER = [
    (shapes, method, [np.float32, np.complex64][(i + j) % 2])
    for i, shapes in enumerate([((3, 3), (4, 4), (3, 4)), ((2, 3, 3), (4, 4), (3, 4)), ((3, 3), (4, 4), (2, 3, 4))])
    for j, method in enumerate(["schur", "eigen"])]


@pytest.mark.parametrize("shapes,method,dtype", _SYLVESTER if THOROUGH else _SYLVESTER[1:5])
def test_solve_sylvester(shapes, method, dtype):
    if method == "schur":
        require_cpu("the Schur decomposition (LAPACK gees) is CPU-only in JAX as in ftrans")
    a = _mat(shapes[0], dtype, 5) + 4 * np.eye(shapes[0][-1], dtype=dtype)
    b = _mat(shapes[1], dtype, 6) + 4 * np.eye(shapes[1][-1], dtype=dtype)
    c = _mat(shapes[2], dtype, 7)
    x = fsl.solve_sylvester(a, b, c, method=method)
    jx = _jax(jsl.solve_sylvester, method=method)(a, b, c)
    assert x.dtype == jx.dtype
    _close(x, jx, 1e-4)
    _close(ftrans.jit(lambda *v: fsl.solve_sylvester(*v, method=method))(a, b, c), jx, 1e-4)
    if len(shapes[0]) == 2 and len(shapes[2]) == 2:
        _close(x, osl.solve_sylvester(a, b, c), 1e-4)


@_SCHUR_CPU
def test_solve_sylvester_singular_and_errors():
    a = np.diag([1.0, 2.0, 3.0]).astype(np.float32)
    x = fsl.solve_sylvester(a, -a, np.ones((3, 3), np.float32), tol=1e-5)
    assert np.isnan(np.asarray(x)).all()
    with pytest.raises(FtransShapeError):
        fsl.solve_sylvester(np.ones((3, 3)), np.ones((2, 2)), np.ones((3, 3)))
    with pytest.raises(FtransValueError):
        fsl.solve_sylvester(np.ones((3, 3)), np.ones((3, 3)), np.ones((3, 3)), method="kron")


@_SCHUR_CPU
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 4, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur(shape, dtype, output):
    a = _mat(shape, dtype, 8)
    t, z = fsl.schur(a, output=output)
    jt, jz = _jax(jsl.schur, output=output)(a)
    assert t.dtype == jt.dtype and z.dtype == jz.dtype
    t, z = np.asarray(t), np.asarray(z)
    _close(z @ t @ np.conj(np.swapaxes(z, -1, -2)), a, 1e-4)
    _close(np.abs(np.diagonal(t, axis1=-2, axis2=-1)).sum(-1), np.abs(np.diagonal(jt, axis1=-2, axis2=-1)).sum(-1),
           1e-4)
    if output == "complex" or dtype == np.complex64:
        assert np.abs(np.tril(t, -1)).max(initial=0) == 0
    ft, fz = ftrans.jit(lambda x: fsl.schur(x, output=output))(a)
    _close(ft, t, 1e-5)
    vt, _ = ftrans.vmap(flax.linalg.schur)(a.reshape((-1,) + shape[-2:]))
    _close(np.asarray(vt).reshape(t.shape), fsl.schur(a)[0], 1e-5)
    with pytest.raises(FtransValueError):
        fsl.schur(a, output="quasi")


@_SCHUR_CPU
@pytest.mark.parametrize("n", [1, 4, 9])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_sqrtm(n, dtype):
    g = _mat((n, n), dtype, 9)
    a = g @ np.conj(g.T) + np.eye(n, dtype=dtype)
    r = fsl.sqrtm(a)
    jr = jax.jit(jsl.sqrtm, compiler_options=_ORACLE_OPTIONS)(a)
    assert r.dtype == jr.dtype
    _close(r, jr, 1e-3)
    _close(r, osl.sqrtm(a.astype(np.complex128)), 1e-3)
    _close(ftrans.jit(fsl.sqrtm)(a), r, 1e-4)
    gen = _mat((n, n), dtype, 10)
    r = np.asarray(fsl.sqrtm(gen))
    _close(r @ r, gen, 2e-3)
    _close(fsl.sqrtm(np.diag([0.0, 0, 9, 0, 0, 4]).astype(dtype)), np.diag([0, 0, 3, 0, 0, 2]), 1e-6)
    with pytest.raises(NotImplementedError):
        fsl.sqrtm(a, blocksize=2)


@_SCHUR_CPU
@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (2, 5, 5)])
def test_rsf2csf(shape):
    a = _mat(shape, np.float64, 11)
    with jax.enable_x64(True), ftrans.enable_x64(True):
        t, z = jax.jit(jsl.schur)(a)
        t, z = np.asarray(t), np.asarray(z)
        ct, cz = fsl.rsf2csf(t, z)
        jt, jz = jax.jit(jsl.rsf2csf)(t, z)
        assert ct.dtype == jt.dtype
        _close(ct, jt, 1e-8)
        _close(cz, jz, 1e-8)
        fct, _ = ftrans.jit(fsl.rsf2csf)(t, z)
        _close(fct, ct, 1e-10)
    with pytest.raises(FtransShapeError):
        fsl.rsf2csf(np.ones((3, 3)), np.ones((2, 2)))


# Every size with both dtypes; disp takes turns, so each size and each dtype meets both values.  The quick run
# leaves out n = 12 (the recurrence of n = 5 over a larger matrix).
@_SCHUR_CPU
@pytest.mark.parametrize("n,dtype,disp", [
    (n, dtype, bool((i + j) % 2)) for i, n in enumerate([1, 5, 12]) for j, dtype in enumerate([np.float32, np.complex64])
    if THOROUGH or n != 12])
def test_funm(n, dtype, disp):
    a = _mat((n, n), dtype, 12) + 3 * np.eye(n, dtype=dtype)

    def func(x):
        return x ** -2.718

    ours = fsl.funm(a, func, disp=disp)
    theirs = _jax(jsl.funm, func=func, disp=disp)(a)
    f = ours if disp else ours[0]
    jf = theirs if disp else theirs[0]
    assert f.dtype == jf.dtype
    _close(f, jf, 1e-4)
    _close(f, osl.funm(a.astype(np.complex128), lambda x: x ** -2.718), 1e-4)
    if not disp:
        assert np.asarray(ours[1]).shape == ()
    with pytest.raises(FtransShapeError):
        fsl.funm(np.ones((2, 3)), func)


# Every shape x mode x onedim x dtype; conjugate takes turns (by parity), so it meets every value of each of them.
# The quick run lets the dtype take turns as well (by onedim and batching), and conjugate by mode and batching:
# each of shape, mode and onedim still meets both dtypes, and on complex operands each meets both conjugates.
def _qr_multiply_cases():
    for i, shape in enumerate([(4, 3), (3, 4), (2, 6, 4)]):
        for j, mode in enumerate(["left", "right"]):
            for onedim in [False, True]:
                if THOROUGH:
                    for k, dtype in enumerate([np.float32, np.complex64]):
                        yield shape, mode, onedim, bool((i + j + int(onedim) + k) % 2), dtype
                else:
                    yield (shape, mode, onedim, bool((j + i // 2) % 2),
                           [np.float32, np.complex64][(int(onedim) + i // 2) % 2])


@pytest.mark.parametrize("shape,mode,onedim,conjugate,dtype", list(_qr_multiply_cases()))
def test_qr_multiply(shape, mode, onedim, conjugate, dtype):
    m, n = shape[-2:]
    k = min(m, n)
    a = _mat(shape, dtype, 13)
    if onedim:
        cshape = (k,) if mode == "left" else (m,)
    else:
        cshape = shape[:-2] + ((k, 2) if mode == "left" else (2, m))
    c = _mat(cshape, dtype, 14)
    ours = fsl.qr_multiply(a, c, mode=mode, conjugate=conjugate)
    theirs = _jax(jsl.qr_multiply, mode=mode, conjugate=conjugate)(a, c)
    for o, t in zip(ours, theirs):
        assert o.dtype == t.dtype
        _close(o, t, 1e-5)
    for o, t in zip(ftrans.jit(lambda x, y: fsl.qr_multiply(x, y, mode=mode, conjugate=conjugate))(a, c), ours):
        _close(o, t, 1e-6)


def test_qr_multiply_errors():
    with pytest.raises(FtransValueError):
        fsl.qr_multiply(np.ones((3, 3)), np.ones((3, 3)), mode="middle")
    with pytest.raises(FtransShapeError):
        fsl.qr_multiply(np.ones((4, 3)), np.ones((4, 2)), mode="left")
    with pytest.raises(FtransShapeError):
        fsl.qr_multiply(np.ones((4, 3)), np.ones((2, 3)), mode="right")


# Every shape with both dtypes; calc_q takes turns, so each shape and each dtype meets both values.  The quick
# run lets the dtype take turns over the shapes too, keeping both for the batch (vmapped with and without Q):
# each dtype still meets both calc_q values and a batch.
@_HESS_CPU
@pytest.mark.parametrize("shape,dtype,calc_q", [
    (shape, dtype, bool((i + j) % 2))
    for i, shape in enumerate([(1, 1), (2, 2), (3, 3), (2, 4, 4), (0, 5, 5), (10, 10)])
    for j, dtype in enumerate([np.float32, np.complex64]) if THOROUGH or shape == (2, 4, 4) or j == (0, 0, 1, 0, 0, 1)[i]])
def test_hessenberg(shape, dtype, calc_q):
    a = _mat(shape, dtype, 15)
    ours = fsl.hessenberg(a, calc_q=calc_q)
    theirs = _jax(jsl.hessenberg, calc_q=calc_q)(a)
    for o, t in zip(ours if calc_q else [ours], theirs if calc_q else [theirs]):
        assert o.dtype == t.dtype
        _close(o, t, 1e-5)
    h = np.asarray(ours[0] if calc_q else ours)
    assert np.all(np.tril(h, -2) == 0)
    if len(shape) == 2 and shape[0] > 2:
        _close(h, osl.hessenberg(a), 1e-5)
    jitted = ftrans.jit(lambda x: fsl.hessenberg(x, calc_q=calc_q))(a)
    _close(jitted[0] if calc_q else jitted, h, 1e-6)
    if len(shape) == 3 and shape[0]:
        _close(ftrans.vmap(lambda x: fsl.hessenberg(x, calc_q=calc_q))(a)[0] if calc_q else
               ftrans.vmap(fsl.hessenberg)(a), h, 1e-6)
    with pytest.raises(FtransShapeError):
        fsl.hessenberg(np.ones((2, 3)))


# Every shape with every mode; the dtypes take turns, so each meets every shape and every mode.  The quick run
# keeps every other (shape, mode) pair, the dtype taking turns over those: every shape, every mode with both
# dtypes and with tall, square and batched operands.
_QR_PIVOTING = [(shape, mode) for shape in [(4, 3), (3, 4), (4, 4), (2, 6, 4), (1, 1)] for mode in ["full", "economic", "r"]]


@pytest.mark.parametrize("shape,mode,dtype", [
    (shape, mode, [np.float32, np.complex64][k % 2])
    for k, (shape, mode) in enumerate(_QR_PIVOTING if THOROUGH else _QR_PIVOTING[::2])])
def test_qr_pivoting(shape, mode, dtype):
    a = _mat(shape, dtype, 16)
    ours = fsl.qr(a, mode=mode, pivoting=True)
    theirs = _jax(jsl.qr, mode=mode, pivoting=True)(a)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert o.dtype == t.dtype
        _close(o, t, 1e-5)
    if mode != "r" and len(shape) == 2:
        q, r, p = (np.asarray(x) for x in ours)
        _close(q @ r, a[:, p], 1e-5)
        _, _, sp = osl.qr(a, mode=mode, pivoting=True)
        np.testing.assert_array_equal(p, sp)
    jitted = ftrans.jit(lambda x: fsl.qr(x, mode=mode, pivoting=True))(a)
    for o, t in zip(jitted, ours):
        _close(o, t, 1e-6)


@pytest.mark.parametrize("mode", ["left", "right"])
def test_qr_multiply_pivoting(mode):
    a = _mat((5, 3), np.float32, 17)
    c = _mat((3, 2) if mode == "left" else (2, 5), np.float32, 18)
    ours = fsl.qr_multiply(a, c, mode=mode, pivoting=True)
    theirs = _jax(jsl.qr_multiply, mode=mode, pivoting=True)(a, c)
    assert len(ours) == 3
    for o, t in zip(ours, theirs):
        assert o.dtype == t.dtype
        _close(o, t, 1e-5)
