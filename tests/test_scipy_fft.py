"""``ftrans.scipy.fft`` (``dct``, ``idct``, ``dctn``, ``idctn``) against ``jax.scipy.fft`` (values, dtypes and
shapes, eager and under ``jit``; derivatives and ``vmap``) and SciPy in 64-bit, and its errors."""

from __future__ import annotations

import itertools

import jax
import jax.scipy.fft as jfft
import numpy as np
import pytest
import scipy.fft

import ftrans
import ftrans.scipy.fft as ffft
from ftrans.errors import FtransTypeError, FtransValueError
from tests.thorough import THOROUGH

DTYPES = [np.float32, np.float16, np.int32, np.bool_, np.complex64]


def sample(shape, dtype, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(*shape) * 3
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.randn(*shape)
    return x.astype(dtype)


def check(a, b, tol):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_allclose(np.asarray(b, np.complex128), np.asarray(a, np.complex128), rtol=tol, atol=tol)


def tol_of(dtype):
    return 2e-2 if dtype == np.float16 else 1e-4


NORMS = [None, "ortho", "backward"]
DCT_SHAPES = [((10,), -1), ((2, 5), 0), ((2, 3, 4), 1)]
DCT_LENGTHS = [None, 1, 7, 13]  # as is, one element, shorter or longer than the axis
# Every dtype with every (shape, axis) and length; the norms take turns.  The quick run keeps a third of
# them that still holds every pair of dtype and (shape, axis), dtype and length, (shape, axis) and length
# (the (shape, axis) of each case is the sum of its dtype's and length's positions, modulo 3); the
# thorough run (tests/thorough.py) draws the whole product.
DCT_CASES = [(dtype, shape, axis, n, NORMS[i % 3]) for i, (dtype, (shape, axis), n) in enumerate(
    itertools.product(DTYPES, DCT_SHAPES, DCT_LENGTHS))
    if THOROUGH or DCT_SHAPES.index((shape, axis)) == (DTYPES.index(dtype) + DCT_LENGTHS.index(n)) % 3]


@pytest.mark.parametrize("dtype,shape,axis,n,norm", DCT_CASES)
def test_dct_idct_match_jax(dtype, shape, axis, n, norm):
    x = sample(shape, dtype)
    # one jax program for both transforms (eager jax compiles each of its ops separately)
    want = jax.jit(lambda v: tuple(getattr(jfft, fn)(v, n=n, axis=axis, norm=norm) for fn in ("dct", "idct")))(x)
    for fn, a in zip(("dct", "idct"), want):
        b = getattr(ffft, fn)(x, n=n, axis=axis, norm=norm)
        check(a, b, tol_of(dtype))


@pytest.mark.parametrize("fn", ["dct", "idct", "dctn", "idctn"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=lambda d: np.dtype(d).name)
def test_under_jit_matches_jax(fn, dtype):
    x = sample((3, 5), dtype)
    kw = {"n": 7, "axis": 0} if fn in ("dct", "idct") else {"s": (4, 4)}
    a = jax.jit(lambda v: getattr(jfft, fn)(v, norm="ortho", **kw))(x)
    b = ftrans.jit(lambda v: getattr(ffft, fn)(v, norm="ortho", **kw))(x)
    check(a, b, 1e-5)


def _axes_cases():
    for shape in [(10,), (4, 6), (2, 3, 4, 5)]:
        nd = len(shape)
        for axes in [None, (), (0,), (-1,), tuple(range(nd))] + ([(nd - 1, 0)] if nd > 1 else []):
            yield shape, axes, None
            if axes:
                yield shape, axes, tuple(shape[a] + (1 if i % 2 else -1) for i, a in enumerate(axes))
        yield shape, None, (3,)


def _quick_dctn(shape, axes, s):
    """Whether the quick run keeps a case: every axes form of every shape, half of them with ``s``."""
    if not axes:
        return True
    with_s = axes == (-1,) or len(axes) > 1 and axes[0] < axes[-1]  # the other forms keep s=None
    return (s is not None) == with_s


# The dtypes and norms take turns over the (shape, axes, s) cases.
DCTN_CASES = [(shape, axes, sz, [np.float32, np.int32, np.complex64][i % 3], NORMS[i % 2])
              for i, (shape, axes, sz) in enumerate(_axes_cases()) if THOROUGH or _quick_dctn(shape, axes, sz)]


@pytest.mark.parametrize("shape,axes,s,dtype,norm", DCTN_CASES)
def test_dctn_idctn_match_jax(dtype, shape, axes, s, norm):
    x = sample(shape, dtype)
    want = jax.jit(lambda v: tuple(getattr(jfft, fn)(v, s=s, axes=axes, norm=norm) for fn in ("dctn", "idctn")))(x)
    for fn, a in zip(("dctn", "idctn"), want):
        b = getattr(ffft, fn)(x, s=s, axes=axes, norm=norm)
        check(a, b, 1e-4)


@pytest.mark.parametrize("fn", ["dct", "idct", "dctn", "idctn"])
@pytest.mark.parametrize("norm", [None, "ortho"])
def test_against_scipy_in_x64(fn, norm):
    x = sample((5, 6), np.float64)
    kw = {"n": 9} if fn in ("dct", "idct") else {"s": (3, 8)}
    with ftrans.enable_x64(True):
        out = getattr(ffft, fn)(x, norm=norm, **kw)
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), getattr(scipy.fft, fn)(x, norm=norm, **kw), rtol=1e-12,
                               atol=1e-12)


def test_idct_inverts_dct():
    x = sample((4, 7), np.float32)
    for norm in [None, "ortho"]:
        np.testing.assert_allclose(np.asarray(ffft.idct(ffft.dct(x, norm=norm), norm=norm)), x, atol=1e-4)
        np.testing.assert_allclose(np.asarray(ffft.idctn(ffft.dctn(x, norm=norm), norm=norm)), x, atol=1e-4)


@pytest.mark.parametrize("fn", ["dct", "idct"])
def test_grad_and_vmap_match_jax(fn):
    x = sample((3, 6), np.float32)
    w = sample((3, 8), np.float32, seed=1)
    ga, va = jax.jit(lambda v: (jax.grad(lambda u: (getattr(jfft, fn)(u, n=8, norm="ortho") * w).sum())(v),
                                jax.vmap(lambda u: getattr(jfft, fn)(u, axis=0), in_axes=1)(v)))(x)
    gb = ftrans.grad(lambda v: (getattr(ffft, fn)(v, n=8, norm="ortho") * w).sum())(x)
    check(ga, gb, 1e-4)
    vb = ftrans.vmap(lambda v: getattr(ffft, fn)(v, axis=0), in_axes=1)(x)
    check(va, vb, 1e-4)


def test_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(NotImplementedError, match="only DCT type 2"):
        ffft.dct(x, type=3)
    with pytest.raises(FtransValueError, match="norm='forward' is not implemented"):
        ffft.idct(x, norm="forward")
    with pytest.raises(FtransValueError, match=r"s must have at most x.ndim \(2\) elements, got 3"):
        ffft.dctn(x, s=(2, 3, 4))
    with pytest.raises(FtransValueError, match="s and axes must have the same length"):
        ffft.idctn(x, s=(2, 3), axes=(0,))
    with pytest.raises(FtransValueError, match="invalid number of data points"):
        ffft.dct(x, n=0)
    with pytest.raises(FtransValueError, match="out of bounds"):
        ffft.dct(x, axis=2)
    with pytest.raises(FtransValueError, match="repeated axis"):
        ffft.dctn(x, axes=(0, -2))
    with pytest.raises(FtransTypeError, match="requires ndarray or scalar"):
        ffft.dct([1.0, 2.0])
