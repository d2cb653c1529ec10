"""scipy.signal: fftconvolve, detrend, stft, istft, welch and csd against jax (and SciPy): values, dtypes,
jit, and the errors for bad arguments."""

from __future__ import annotations

import jax
import jax.scipy.signal as jss
import numpy as np
import pytest
import scipy.signal as oss

import ftrans
import ftrans.scipy.signal as fss
from ftrans.errors import FtransShapeError, FtransValueError
from tests.thorough import THOROUGH


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _jax(fn, **kw):
    """One jitted jax program per case (eager jax would compile every op it runs separately)."""
    return jax.jit(lambda *args: fn(*args, **kw))


def _pairs(xs, ys, per_x=1):
    """Every (x, y) pair in the thorough run; in the quick run each x with ``per_x`` of the ys, rotating
    (a Latin square: every y still meets about ``per_x * len(xs) / len(ys)`` of the xs)."""
    if THOROUGH:
        return [(x, y) for x in xs for y in ys]
    return [(x, ys[(i + k) % len(ys)]) for i, x in enumerate(xs) for k in range(per_x)]


def _close(ours, theirs, tol=1e-5):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


_CONV_SHAPES = [(((7,), (3,)), None), (((3,), (8,)), None), (((5, 6), (3, 2)), None), (((4, 6), (4, 3)), (1,)),
                (((2, 5, 4), (2, 3, 4)), (1,)), (((1, 4), (3, 1)), None)]
# every (mode, shapes) pair; the dtype alternates in the quick run (each mode and each shape meets both)
_CONV_CASES = [(mode, *sa, dtype) for i, mode in enumerate(("full", "same", "valid")) for j, sa in enumerate(_CONV_SHAPES)
               for dtype in ([np.float32, np.complex64] if THOROUGH else [(np.float32, np.complex64)[(i + j) % 2]])]


@pytest.mark.parametrize("mode,shapes,axes,dtype", _CONV_CASES)
def test_fftconvolve(mode, shapes, axes, dtype):
    rng = _rng(1)
    x = (rng.standard_normal(shapes[0]) * 3).astype(dtype)
    y = (rng.standard_normal(shapes[1]) * 3).astype(dtype)
    if mode == "valid" and axes is None and not (all(a >= b for a, b in zip(*shapes))
                                                  or all(a <= b for a, b in zip(*shapes))):
        with pytest.raises(FtransValueError):
            fss.fftconvolve(x, y, mode=mode, axes=axes)
        return
    ours = fss.fftconvolve(x, y, mode=mode, axes=axes)
    _close(ours, _jax(jss.fftconvolve, mode=mode, axes=axes)(x, y), 1e-4)
    _close(ftrans.jit(lambda a, b: fss.fftconvolve(a, b, mode=mode, axes=axes))(x, y), ours, 1e-4)


def test_fftconvolve_errors():
    with pytest.raises(FtransShapeError):
        fss.fftconvolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(FtransValueError):
        fss.fftconvolve(np.ones(3), np.ones(2), mode="bad")
    with pytest.raises(FtransShapeError):
        fss.fftconvolve(np.ones((2, 3)), np.ones((3, 3)), axes=1)


# every (type and breakpoints, dtype) pair; the axis alternates in the quick run
_DETREND_CASES = [(*tb, dtype, axis) for (tb, dtype), axis in _pairs(
    [(tb, d) for tb in [("constant", 0), ("linear", 0), ("linear", [3, 7]), ("linear", 5)]
     for d in (np.float32, np.int32, np.complex64)], [0, -1])]


@pytest.mark.parametrize("type_,bp,dtype,axis", _DETREND_CASES)
def test_detrend(type_, bp, axis, dtype):
    x = (_rng(2).standard_normal((10, 12)) * 5 + np.arange(12)).astype(dtype)
    ours = fss.detrend(x, axis=axis, type=type_, bp=bp)
    _close(ours, _jax(jss.detrend, axis=axis, type=type_, bp=bp)(x), 1e-4)
    expected = oss.detrend(np.asarray(x, np.result_type(dtype, np.float32)), axis=axis, type=type_, bp=bp)
    np.testing.assert_allclose(np.asarray(ours), expected, atol=1e-4)


def test_detrend_errors():
    with pytest.raises(FtransValueError):
        fss.detrend(np.ones(5), type="quadratic")
    with pytest.raises(FtransValueError):
        fss.detrend(np.ones(5), bp=[7])
    with pytest.raises(NotImplementedError):
        fss.detrend(np.ones(5), overwrite_data=True)


STFT_CASES = [
    dict(nperseg=8), dict(nperseg=8, noverlap=3, nfft=12), dict(nperseg=7, boundary="even", padded=False),
    dict(nperseg=6, boundary="odd", detrend="linear"), dict(nperseg=6, boundary="constant", detrend="constant"),
    dict(nperseg=5, boundary=None, window=("tukey", 0.5), return_onesided=False), dict(nperseg=8, fs=3.0),
]


@pytest.mark.parametrize("kw,shape_axis", _pairs(STFT_CASES, [((40,), -1), ((3, 33), -1), ((30, 2), 0)]))
def test_stft(kw, shape_axis):
    shape, axis = shape_axis
    x = _rng(3).standard_normal(shape).astype(np.float32)
    ours = fss.stft(x, axis=axis, **kw)
    theirs = _jax(jss.stft, axis=axis, **kw)(x)
    for o, t in zip(ours, theirs):
        _close(o, t, 1e-5)
    for o, t in zip(ftrans.jit(lambda v: fss.stft(v, axis=axis, **kw))(x), theirs):
        _close(o, t, 1e-5)


def test_stft_complex_is_twosided():
    x = (_rng(4).standard_normal(20) + 1j * _rng(5).standard_normal(20)).astype(np.complex64)
    with pytest.warns(UserWarning, match="complex"):
        ours = fss.stft(x, nperseg=6)
    for o, t in zip(ours, _jax(jss.stft, nperseg=6)(x)):
        _close(o, t, 1e-5)


CSD_CASES = [dict(), dict(nperseg=8), dict(nperseg=8, noverlap=2, nfft=10, scaling="spectrum"),
             dict(nperseg=9, average="median"), dict(nperseg=6, detrend="linear", fs=2.0),
             dict(nperseg=8, detrend=False, window="hamming", return_onesided=False)]


@pytest.mark.parametrize("kw,shapes_axis", _pairs(CSD_CASES, [((50,), (50,), -1), ((2, 40), (1, 36), -1),
                                                              ((30, 3), (30, 3), 0)]))
def test_csd_welch(kw, shapes_axis):
    xshape, yshape, axis = shapes_axis
    rng = _rng(6)
    x = rng.standard_normal(xshape).astype(np.float32)
    y = rng.standard_normal(yshape).astype(np.float32)
    theirs = jax.jit(lambda u, v: (jss.csd(u, v, axis=axis, **kw), jss.csd(u, None, axis=axis, **kw),
                                   jss.welch(u, axis=axis, **kw)))(x, y)
    for o, t in zip(fss.csd(x, y, axis=axis, **kw), theirs[0]):
        _close(o, t, 1e-5)
    for o, t in zip(fss.csd(x, None, axis=axis, **kw), theirs[1]):
        _close(o, t, 1e-5)
    for o, t in zip(fss.welch(x, axis=axis, **kw), theirs[2]):
        _close(o, t, 1e-5)
    f, p = oss.welch(np.asarray(x, np.float64), axis=axis, **kw)
    np.testing.assert_allclose(np.asarray(fss.welch(x, axis=axis, **kw)[1]), p, rtol=1e-4, atol=1e-5)


def test_welch_array_window_and_errors():
    x = _rng(7).standard_normal(64).astype(np.float32)
    win = np.hanning(16).astype(np.float32)
    for o, t in zip(fss.welch(x, window=win), _jax(jss.welch, window=win)(x)):
        _close(o, t, 1e-5)
    with pytest.raises(FtransValueError):
        fss.welch(x, window=win, nperseg=8)
    with pytest.raises(FtransValueError):
        fss.welch(x, nperseg=8, noverlap=8)
    with pytest.raises(FtransValueError):
        fss.welch(x, nperseg=8, nfft=4)
    with pytest.raises(FtransValueError):
        fss.welch(x, nperseg=8, scaling="bad")
    with pytest.raises(FtransValueError):
        fss.welch(x, nperseg=8, average="mode")
    with pytest.raises(FtransValueError):
        fss.stft(x, boundary="wrap")


_ISTFT_CASES = _pairs([dict(nperseg=8), dict(nperseg=8, noverlap=5, nfft=10), dict(nperseg=8, window="hamming"),
                       dict(nperseg=6, input_onesided=False)],
                      [((40,), -1, -2), ((2, 33), -1, -2), ((35, 3), 0, 1)])


@pytest.mark.parametrize("kw,shape_axes", _ISTFT_CASES)
def test_istft_roundtrip(kw, shape_axes):
    shape, time_axis, freq_axis = shape_axes
    x = _rng(8).standard_normal(shape).astype(np.float32)
    skw = {k: v for k, v in kw.items() if k != "input_onesided"}
    onesided = kw.get("input_onesided", True)
    axis = 0 if time_axis == 0 else -1
    _, _, z = _jax(jss.stft, axis=axis, return_onesided=onesided, **skw)(x)
    z = np.asarray(z)
    if time_axis == 0:  # segments first, then frequencies
        z = np.moveaxis(z, -1, 0)
    ours = fss.istft(z, time_axis=time_axis, freq_axis=freq_axis, **kw)
    theirs = _jax(jss.istft, time_axis=time_axis, freq_axis=freq_axis, **kw)(z)
    for o, t in zip(ours, theirs):
        _close(o, t, 1e-5)
    for o, t in zip(ftrans.jit(lambda v: fss.istft(v, time_axis=time_axis, freq_axis=freq_axis, **kw))(z), theirs):
        _close(o, t, 1e-5)


def test_istft_errors():
    z = np.ones((5, 4), np.complex64)
    with pytest.raises(FtransShapeError):
        fss.istft(np.ones(5, np.complex64))
    with pytest.raises(FtransValueError):
        fss.istft(z, time_axis=0, freq_axis=0)
    with pytest.raises(FtransValueError):
        fss.istft(z, nperseg=8, noverlap=8)
    with pytest.raises(FtransValueError):
        fss.istft(z, nfft=4, nperseg=8)


def test_callable_detrend_sees_segments_as_scipy():
    x = _rng(9).standard_normal((30, 2))

    def first_sample(d):  # depends on the layout: along axis 0 of what it receives
        return d - d[:1]

    ours = fss.stft(x.astype(np.float32), nperseg=8, axis=0, detrend=first_sample)[2]
    np.testing.assert_allclose(np.asarray(ours), oss.stft(x, nperseg=8, axis=0, detrend=first_sample)[2], atol=1e-5)

    def last_first(d):
        return d - d[..., :1]

    ours = fss.welch(x[:, 0].astype(np.float32), nperseg=8, detrend=last_first)[1]
    np.testing.assert_allclose(np.asarray(ours), oss.welch(x[:, 0], nperseg=8, detrend=last_first)[1], atol=1e-5)
