"""``ftrans.scipy.signal``: convolution, detrending and spectral analysis (JAX's ``scipy.signal`` subset).

``convolve``/``correlate`` and their 2-d forms compute directly with
``lax.conv_general_dilated`` (``method='fft'`` is accepted and gives the same
values up to rounding); as in JAX, only ``boundary='fill'`` with
``fillvalue=0`` is supported by the 2-d forms.  ``fftconvolve`` multiplies
spectra from ``ftrans.numpy.fft``.  ``detrend`` removes a constant or a
(piecewise) least-squares line.  ``stft``, ``istft``, ``welch`` and ``csd``
follow SciPy's segmenting, windowing and scaling conventions; the segments are
gathered with static indices, so every shape is fixed under ``jit``.  Window
names other than ``'hann'`` are built by ``scipy.signal.get_window``.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core.operands import canonicalize_axis, check_arraylike, concrete_or_error
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError, user_stacklevel
from ftrans.numpy import fft as jnp_fft

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "fftconvolve", "istft", "stft",
           "welch"]


def _inexact(a: Any, b: Any) -> tuple[Any, Any]:
    a, b = jnp.asarray(a), jnp.asarray(b)
    d = jnp.result_type(a, b)
    if not jnp.issubdtype(d, jnp.inexact):
        d = jnp.result_type(a, b, 1.0)
    return a.astype(d), b.astype(d)


def _convolve_nd(name: str, in1: Any, in2: Any, mode: str, precision: Any) -> Any:
    if mode not in ("full", "same", "valid"):
        raise FtransValueError(f"{name}: mode must be one of 'full', 'same', 'valid', got {mode!r}")
    if in1.ndim != in2.ndim:
        raise FtransValueError(f"{name}: in1 and in2 must have the same number of dimensions, got shapes "
                               f"{tuple(in1.shape)} and {tuple(in2.shape)}")
    if in1.size == 0 or in2.size == 0:
        raise FtransValueError(f"{name}: zero-size arrays are not supported, got shapes {tuple(in1.shape)} and "
                               f"{tuple(in2.shape)}")
    in1, in2 = _inexact(in1, in2)
    bigger = all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape))
    smaller = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    if not (bigger or smaller):
        raise FtransValueError(f"{name}: one input must be at least as large as the other in every dimension, "
                               f"got shapes {tuple(in1.shape)} and {tuple(in2.shape)}")
    first_kernel_shape = in2.shape
    if smaller and not bigger:
        in1, in2 = in2, in1
    kshape = in2.shape
    kernel = jnp.flip(in2)
    if mode == "valid":
        pads = [(0, 0)] * len(kshape)
    elif mode == "same":
        pads = [(k - 1 - (k0 - 1) // 2, k - k0 + (k0 - 1) // 2) for k, k0 in zip(kshape, first_kernel_shape)]
    else:
        pads = [(k - 1, k - 1) for k in kshape]
    out = lax.conv_general_dilated(in1[None, None], kernel[None, None], (1,) * len(kshape), pads,
                                   precision=precision)
    return out[0, 0]


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """N-dimensional convolution (``scipy.signal.convolve``)."""
    check_arraylike("scipy.signal.convolve", in1, in2)
    if method not in ("auto", "direct", "fft"):
        raise FtransValueError(f"scipy.signal.convolve: method must be 'auto', 'direct' or 'fft', got {method!r}")
    return _convolve_nd("scipy.signal.convolve", jnp.asarray(in1), jnp.asarray(in2), mode, precision)


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """N-dimensional cross-correlation (``scipy.signal.correlate``): convolution with the flipped conjugate."""
    check_arraylike("scipy.signal.correlate", in1, in2)
    in2 = jnp.asarray(in2)
    return convolve(in1, jnp.flip(jnp.conj(in2)), mode, method=method, precision=precision)


def _check_2d(name: str, in1: Any, in2: Any, boundary: str, fillvalue: Any) -> None:
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"scipy.signal.{name}: only boundary='fill' with fillvalue=0 is supported")
    if in1.ndim != 2 or in2.ndim != 2:
        raise FtransValueError(f"scipy.signal.{name}: only 2-dimensional inputs are supported, got shapes "
                               f"{tuple(in1.shape)} and {tuple(in2.shape)}")


def convolve2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0,
               precision: Any = None) -> Any:
    """2-D convolution (``scipy.signal.convolve2d``)."""
    check_arraylike("scipy.signal.convolve2d", in1, in2)
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd("scipy.signal.convolve2d", in1, in2, mode, precision)


def correlate2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0,
                precision: Any = None) -> Any:
    """2-D cross-correlation (``scipy.signal.correlate2d``), with JAX's choice of which input slides."""
    check_arraylike("scipy.signal.correlate2d", in1, in2)
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    name = "scipy.signal.correlate2d"
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    same = tuple(in1.shape) == tuple(in2.shape)
    if mode == "valid" and swap and not same:
        return _convolve_nd(name, jnp.flip(in2), jnp.conj(in1), mode, precision)
    if mode == "full" and swap:
        return jnp.conj(_convolve_nd(name, jnp.flip(in2), jnp.conj(in1), mode, precision))
    return jnp.flip(_convolve_nd(name, jnp.flip(in1), jnp.conj(in2), mode, precision))


# ---------------------------------------------------------------- fftconvolve

def _promote_inexact(*xs: Any) -> list[Any]:
    arrs = [jnp.asarray(x) for x in xs]
    d = jnp.result_type(*arrs)
    if not jnp.issubdtype(d, jnp.inexact):
        d = jnp.result_type(*arrs, 1.0)
    return [a.astype(d) for a in arrs]


def _complex_dtype(d: Any) -> np.dtype:
    d = np.dtype(d)
    if d.kind == "c":
        return d
    return np.dtype(np.complex128) if d == np.float64 else np.dtype(np.complex64)


def _static(name: str, what: str, v: Any) -> int:
    v = concrete_or_error(v, f"scipy.signal.{name}: {what}")
    try:
        return operator.index(v) if not isinstance(v, np.ndarray) else int(v)
    except TypeError:
        raise FtransTypeError(f"scipy.signal.{name}: {what} must be an integer, got {v!r}") from None


def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: Sequence[int] | None = None) -> Any:
    """N-dimensional convolution through the FFT (``scipy.signal.fftconvolve``).

    The spectra of both inputs, zero-padded to the full output size, are multiplied
    and transformed back (real FFTs for real inputs); ``mode`` ``'full'``, ``'same'``
    (the centre, shaped like ``in1``) or ``'valid'`` (no zero padding involved; either
    input may be the larger) picks the part returned.  With ``axes``, only those axes
    are convolved and the others, which must match, are carried along as batch axes.
    """
    name = "scipy.signal.fftconvolve"
    check_arraylike(name, in1, in2)
    in1, in2 = _promote_inexact(in1, in2)
    if in1.ndim != in2.ndim:
        raise FtransShapeError(f"{name}: in1 and in2 should have the same dimensionality, got shapes "
                               f"{tuple(in1.shape)} and {tuple(in2.shape)}")
    if mode not in ("same", "full", "valid"):
        raise FtransValueError(f"{name}: mode must be one of ['same', 'full', 'valid'], got {mode!r}")
    if axes is None:
        conv_axes = tuple(range(in1.ndim))
    else:
        ax = (axes,) if not isinstance(axes, (tuple, list)) else tuple(axes)
        conv_axes = tuple(sorted({canonicalize_axis(name, a, in1.ndim) for a in ax}))
        mapped = [i for i in range(in1.ndim) if i not in conv_axes]
        if any(in1.shape[i] != in2.shape[i] for i in mapped):
            raise FtransShapeError(f"{name}: mapped axes must have same shape; got in1.shape={tuple(in1.shape)} "
                                   f"in2.shape={tuple(in2.shape)} axes={tuple(ax)}")
    s1 = [in1.shape[i] for i in conv_axes]
    s2 = [in2.shape[i] for i in conv_axes]
    if mode == "valid":
        no_swap = all(a >= b for a, b in zip(s1, s2))
        swap = all(a <= b for a, b in zip(s1, s2))
        if not (no_swap or swap):
            raise FtransValueError(f"{name}: for 'valid' mode, one input must be at least as large as the other "
                                   f"in every dimension, got shapes {tuple(in1.shape)} and {tuple(in2.shape)}")
        if swap:
            in1, in2, s1, s2 = in2, in1, s2, s1
    full = [a + b - 1 for a, b in zip(s1, s2)]
    if all(a == 1 or b == 1 for a, b in zip(s1, s2)):
        conv = in1 * in2
    elif jnp.iscomplexobj(in1):
        conv = jnp_fft.ifftn(jnp_fft.fftn(in1, full, conv_axes) * jnp_fft.fftn(in2, full, conv_axes), full, conv_axes)
    else:
        conv = jnp_fft.irfftn(jnp_fft.rfftn(in1, full, conv_axes) * jnp_fft.rfftn(in2, full, conv_axes),
                              full, conv_axes)
    if mode == "full":
        out = full
    elif mode == "same":
        out = s1
    else:
        out = [a - b + 1 for a, b in zip(s1, s2)]
    index = [slice(None)] * conv.ndim
    for ax, f, o in zip(conv_axes, full, out):
        start = (f - o) // 2
        index[ax] = slice(start, start + o)
    return conv[tuple(index)]


# ---------------------------------------------------------------- detrend

def _line_residual(npts: int, dtype: Any) -> np.ndarray:
    """``I - A A⁺`` for ``A = [1, t]`` on ``npts`` points: what remains after removing the least-squares line."""
    a = np.stack([np.ones(npts), np.arange(1, npts + 1) / npts], axis=1)
    return (np.eye(npts) - a @ np.linalg.pinv(a)).astype(jnp.finfo(dtype).dtype)


def detrend(data: Any, axis: int = -1, type: str = "linear", bp: int | Sequence[int] | np.ndarray = 0,  # noqa: A002
            overwrite_data: None = None) -> Any:
    """Remove a trend along ``axis`` (``scipy.signal.detrend``).

    ``type='constant'`` subtracts the mean; ``type='linear'`` subtracts the least-squares
    line, fitted separately between consecutive breakpoints ``bp`` (static indices in
    ``[0, n]``).  Integer input is promoted to the default float dtype.
    """
    name = "scipy.signal.detrend"
    if overwrite_data is not None:
        raise NotImplementedError(f"{name}: the overwrite_data argument is not implemented")
    if type not in ("constant", "linear"):
        raise FtransValueError(f"{name}: trend type must be 'linear' or 'constant', got {type!r}")
    check_arraylike(name, data)
    (x,) = _promote_inexact(data)
    axis = canonicalize_axis(name, axis, x.ndim)
    if type == "constant":
        return x - x.mean(axis, keepdims=True)
    n = x.shape[axis]
    bps = np.sort(np.unique(np.r_[0, np.asarray(concrete_or_error(bp, f"{name}: bp")).ravel(), n]))
    if bps[0] < 0 or bps[-1] > n:
        raise FtransValueError(f"{name}: breakpoints must be non-negative and at most the length of the data "
                               f"along the axis ({n}), got {bp!r}")
    xm = jnp.moveaxis(x, axis, -1)
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        lo, hi = int(lo), int(hi)
        p = _line_residual(hi - lo, x.dtype)
        pieces.append(jnp.matmul(xm[..., lo:hi], jnp.asarray(p.T), precision=lax.Precision.HIGHEST).astype(x.dtype))
    out = pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces, axis=-1)
    return jnp.moveaxis(out, -1, axis)


# ---------------------------------------------------------------- spectral analysis

def _hann(n: int) -> np.ndarray:
    return np.ones(1) if n == 1 else np.sin(np.linspace(0, np.pi, n, endpoint=False)) ** 2


def _named_window(name: str, window: Any, n: int) -> np.ndarray:
    if isinstance(window, str) and window == "hann":
        return _hann(n)
    try:
        from scipy.signal import get_window
    except ImportError as err:  # pragma: no cover
        raise ImportError(f"{name}: scipy must be available to use window={window!r}") from err
    return np.asarray(get_window(window, n))


def _window(name: str, window: Any, nperseg: int | None, length: int, dtype: Any) -> tuple[Any, int]:
    """The window as an array of ``dtype`` and the segment length it implies."""
    if isinstance(window, (str, tuple)):
        n = length if nperseg is None else int(nperseg)
        if n > length:
            warnings.warn(f"nperseg={n} is greater than input_length={length}, using nperseg={length}", stacklevel=user_stacklevel())
            n = length
        return jnp.asarray(_named_window(name, window, n), dtype=dtype), n
    win = jnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else int(nperseg)
    if win.ndim != 1:
        raise FtransShapeError(f"{name}: window must be 1-D, got shape {tuple(win.shape)}")
    if length < win.size:
        raise FtransValueError(f"{name}: window (length {win.size}) is longer than the input signal ({length})")
    if n != win.size:
        raise FtransValueError(f"{name}: the value specified for nperseg ({n}) is different from the length of "
                               f"the window ({win.size})")
    return win, n


def _odd_ext(name: str, x: Any, n: int) -> Any:
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise FtransValueError(f"{name}: the extension length n ({n}) is too big; it must not exceed "
                               f"x.shape[axis]-1, which is {x.shape[-1] - 1}")
    left = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], axis=-1)
    right = 2 * x[..., -1:] - jnp.flip(x[..., -n - 1:-1], axis=-1)
    return jnp.concatenate([left, x, right], axis=-1)


def _extend(name: str, boundary: str, x: Any, n: int) -> Any:
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary == "even":
        return jnp.pad(x, widths, mode="reflect")
    if boundary == "odd":
        return _odd_ext(name, x, n)
    if boundary == "constant":
        return jnp.pad(x, widths, mode="edge")
    return jnp.pad(x, widths)  # "zeros"


def _segments(x: Any, win: Any, detrend_func: Callable, nperseg: int, noverlap: int, nfft: int,
              sides: str) -> Any:
    """Windowed FFTs of the overlapping segments of ``x`` along its last axis: ``[..., nseg, nfft(/2+1)]``."""
    if x.dtype.kind == "i":
        x = x.astype(win.dtype)
    length = x.shape[-1]
    if nperseg == 1 and noverlap == 0:
        seg = x[..., None]
    else:
        starts = np.arange(0, length - nperseg + 1, nperseg - noverlap)
        seg = x[..., starts[:, None] + np.arange(nperseg)[None, :]]
    seg = detrend_func(seg)
    if jnp.iscomplexobj(win):
        seg = seg.astype(_complex_dtype(seg.dtype))
    seg = win * seg
    if sides == "twosided":
        return jnp_fft.fft(seg, n=nfft)
    return jnp_fft.rfft(seg.real, n=nfft)


_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _spectral(name: str, x: Any, y: Any, fs: Any, window: Any, nperseg: Any, noverlap: Any, nfft: Any,
              detrend_type: Any, return_onesided: bool, scaling: str, axis: Any, mode: str,
              boundary: str | None = None, padded: bool = False) -> tuple[Any, Any, Any]:
    """SciPy's spectral helper: ``(freqs, times, result)`` with the frequency axis at ``axis`` of ``result``
    and the segment axis last.  ``y=None`` means auto-spectra of ``x``."""
    if boundary not in _BOUNDARIES:
        raise FtransValueError(f"{name}: unknown boundary option {boundary!r}, must be one of "
                               f"{list(_BOUNDARIES)}")
    axis = user_axis = _static(name, "axis", axis)
    if y is None:
        check_arraylike(name, x)
        (x,) = _promote_inexact(x)
        axis = canonicalize_axis(name, axis, x.ndim)
        outer = tuple(s for i, s in enumerate(x.shape) if i != axis)
    else:
        check_arraylike(name, x, y)
        x, y = _promote_inexact(x, y)
        if x.ndim != y.ndim:
            raise FtransShapeError(f"{name}: x and y must have the same rank, got shapes {tuple(x.shape)} and "
                                   f"{tuple(y.shape)}")
        axis = canonicalize_axis(name, axis, x.ndim)
        try:
            outer = np.broadcast_shapes(tuple(s for i, s in enumerate(x.shape) if i != axis),
                                        tuple(s for i, s in enumerate(y.shape) if i != axis))
        except ValueError:
            raise FtransShapeError(f"{name}: x and y cannot be broadcast together, got shapes {tuple(x.shape)} "
                                   f"and {tuple(y.shape)} (axis {axis})") from None
    result_dtype = _complex_dtype(x.dtype)
    freq_dtype = np.finfo(result_dtype).dtype
    nperseg_int = None
    if nperseg is not None:
        nperseg_int = _static(name, "nperseg", nperseg)
        if nperseg_int < 1:
            raise FtransValueError(f"{name}: nperseg must be a positive integer, got {nperseg_int}")
    win, nperseg_int = _window(name, window, nperseg_int, x.shape[axis], x.dtype)
    noverlap_int = nperseg_int // 2 if noverlap is None else _static(name, "noverlap", noverlap)
    nfft_int = nperseg_int if nfft is None else _static(name, "nfft", nfft)

    if y is None and x.size == 0:
        return (jnp.zeros(x.shape, freq_dtype), jnp.zeros(x.shape, freq_dtype), jnp.zeros(x.shape, result_dtype))
    if y is not None and (x.size == 0 or y.size == 0):
        shape = list(outer)
        shape.insert(axis, min(x.shape[axis], y.shape[axis]))
        return (jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype), jnp.zeros(shape, result_dtype))

    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        y = jnp.moveaxis(y, axis, -1)
        if x.shape[-1] < y.shape[-1]:
            x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, y.shape[-1] - x.shape[-1])])
        elif y.shape[-1] < x.shape[-1]:
            y = jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, x.shape[-1] - y.shape[-1])])
    if nfft_int < nperseg_int:
        raise FtransValueError(f"{name}: nfft ({nfft_int}) must be greater than or equal to nperseg ({nperseg_int})")
    if noverlap_int >= nperseg_int:
        raise FtransValueError(f"{name}: noverlap ({noverlap_int}) must be less than nperseg ({nperseg_int})")
    nstep = nperseg_int - noverlap_int
    if boundary is not None:
        x = _extend(name, boundary, x, nperseg_int // 2)
        if y is not None:
            y = _extend(name, boundary, y, nperseg_int // 2)
    if padded:
        nadd = (-(x.shape[-1] - nperseg_int) % nstep) % nperseg_int
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nadd)])
        if y is not None:
            y = jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, nadd)])

    if isinstance(detrend_type, str):
        def detrend_func(d: Any) -> Any:
            return detrend(d, axis=-1, type=detrend_type)
    elif callable(detrend_type):
        if user_axis != -1:
            # as SciPy: the callable sees the segments laid out like the input, time along ``axis``
            def detrend_func(d: Any) -> Any:
                return jnp.moveaxis(detrend_type(jnp.moveaxis(d, -1, user_axis)), user_axis, -1)
        else:
            detrend_func = detrend_type
    elif not detrend_type:
        def detrend_func(d: Any) -> Any:
            return d
    else:
        raise FtransValueError(f"{name}: unsupported detrend type: {detrend_type!r}")

    if scaling == "density":
        scale = 1.0 / (fs * (win * win).sum())
    elif scaling == "spectrum":
        scale = 1.0 / win.sum() ** 2
    else:
        raise FtransValueError(f"{name}: unknown scaling {scaling!r}; use 'density' or 'spectrum'")
    if mode == "stft":
        scale = jnp.sqrt(scale)
    scale = jnp.asarray(scale).astype(_complex_dtype(jnp.asarray(scale).dtype))

    sides = "onesided" if return_onesided else "twosided"
    if sides == "onesided" and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))):
        sides = "twosided"
        warnings.warn("Input data is complex, switching to return_onesided=False", stacklevel=user_stacklevel())
    if sides == "twosided":
        freqs = jnp_fft.fftfreq(nfft_int, 1 / fs, dtype=freq_dtype)
    else:
        freqs = jnp_fft.rfftfreq(nfft_int, 1 / fs, dtype=freq_dtype)

    result = _segments(x, win, detrend_func, nperseg_int, noverlap_int, nfft_int, sides)
    if y is not None:
        result = jnp.conj(result) * _segments(y, win, detrend_func, nperseg_int, noverlap_int, nfft_int, sides)
    elif mode == "psd":
        result = jnp.conj(result) * result
    result = result * scale
    if sides == "onesided" and mode == "psd":
        end = None if nfft_int % 2 else -1
        result = result.at[..., 1:end].multiply(2)
    times = jnp.arange(nperseg_int / 2, x.shape[-1] - nperseg_int / 2 + 1, nstep, dtype=freq_dtype) / fs
    if boundary is not None:
        times = times - (nperseg_int / 2) / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = result.real
    return freqs, times, jnp.moveaxis(result, -1, axis)


def stft(x: Any, fs: Any = 1.0, window: str = "hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend: bool = False, return_onesided: bool = True,
         boundary: str | None = "zeros", padded: bool = True, axis: int = -1) -> tuple[Any, Any, Any]:
    """Short-time Fourier transform (``scipy.signal.stft``): ``(f, t, Zxx)``.

    ``x`` is cut along ``axis`` into segments of ``nperseg`` samples overlapping by
    ``noverlap`` (default ``nperseg // 2``), after extending both ends by ``nperseg // 2``
    samples as ``boundary`` says (``'zeros'``, ``'even'``, ``'odd'``, ``'constant'`` or
    ``None``) and zero-padding to whole segments when ``padded``.  Each segment is
    optionally detrended (``False``, ``'constant'``, ``'linear'`` or a callable), multiplied
    by ``window`` (a name, a ``(name, param)`` tuple or an array) and transformed with an
    ``nfft``-point FFT, one-sided for real input.  ``Zxx`` is complex with the frequency axis
    at ``axis`` and the segment axis last, scaled by the window's sum ('spectrum' scaling).
    """
    return _spectral("scipy.signal.stft", x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary=boundary, padded=padded)


def _median_bias(n: int) -> float:
    ii = np.arange(2.0, n, 2)
    return float(1 + np.sum(1.0 / (ii + 1) - 1.0 / ii))


def csd(x: Any, y: Any, fs: Any = 1.0, window: str = "hann", nperseg: int | None = None,
        noverlap: int | None = None, nfft: int | None = None, detrend: str = "constant",
        return_onesided: bool = True, scaling: str = "density", axis: int = -1,
        average: str = "mean") -> tuple[Any, Any]:
    """Cross power spectral density by Welch's method (``scipy.signal.csd``): ``(f, Pxy)``.

    The segments of ``x`` and ``y`` (zero-padded to the same length along ``axis``; the
    other axes broadcast) are detrended, windowed and transformed as in ``welch``; the
    cross periodograms ``conj(X) Y`` are averaged over the segments by ``average``
    (``'mean'``, or ``'median'`` of the real and imaginary parts with SciPy's bias
    correction).  ``y=None`` gives the (real-valued) power spectral density of ``x``;
    otherwise ``Pxy`` is complex, as for SciPy's ``csd(x, x.copy())``.
    """
    name = "scipy.signal.csd"
    if average not in ("mean", "median"):
        raise FtransValueError(f"{name}: average must be 'median' or 'mean', got {average!r}")
    freqs, _, pxy = _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
                              axis, "psd")
    if y is not None:
        pxy = pxy.astype(_complex_dtype(pxy.dtype))
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                bias = _median_bias(pxy.shape[-1])
                if jnp.iscomplexobj(pxy):
                    pxy = lax.complex(jnp.median(pxy.real, axis=-1), jnp.median(pxy.imag, axis=-1))
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / jnp.asarray(bias, dtype=pxy.dtype)
            else:
                pxy = pxy.mean(axis=-1)
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x: Any, fs: Any = 1.0, window: str = "hann", nperseg: int | None = None, noverlap: int | None = None,
          nfft: int | None = None, detrend: str = "constant", return_onesided: bool = True,
          scaling: str = "density", axis: int = -1, average: str = "mean") -> tuple[Any, Any]:
    """Power spectral density by Welch's method (``scipy.signal.welch``): ``(f, Pxx)``.

    The average (``'mean'`` or bias-corrected ``'median'``) of the modified periodograms of
    overlapping, detrended, windowed segments of ``x`` along ``axis``; ``scaling='density'``
    gives V²/Hz, ``'spectrum'`` V².  ``nperseg`` defaults to the length of the signal (or
    of an array ``window``) and ``noverlap`` to half of it.
    """
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                     detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis,
                     average=average)
    return freqs, pxx.real


def _overlap_add(frames: Any, step: int) -> Any:
    """Sum ``frames[..., i, :]`` placed at offsets ``i * step`` along a new last axis."""
    *batch, nframes, seglen = frames.shape
    out_len = step * (nframes - 1) + seglen
    idx = (np.arange(nframes)[:, None] * step + np.arange(seglen)[None, :]).ravel()
    flat = jnp.reshape(frames, tuple(batch) + (nframes * seglen,))
    return jnp.zeros(tuple(batch) + (out_len,), frames.dtype).at[..., idx].add(flat)


def istft(Zxx: Any, fs: Any = 1.0, window: str = "hann", nperseg: int | None = None,  # noqa: N803
          noverlap: int | None = None, nfft: int | None = None, input_onesided: bool = True,
          boundary: bool = True, time_axis: int = -1, freq_axis: int = -2) -> tuple[Any, Any]:
    """Inverse short-time Fourier transform (``scipy.signal.istft``): ``(t, x)``.

    Each column of ``Zxx`` (frequencies along ``freq_axis``, segments along ``time_axis``)
    is inverse-transformed (``irfft`` when ``input_onesided``), cut to ``nperseg``
    samples, windowed and overlap-added with step ``nperseg - noverlap``; the sum is
    divided by the overlap-added squared window where that exceeds 1e-10.  With
    ``boundary`` the ``nperseg // 2`` samples ``stft`` added at each end are removed.
    ``nperseg`` defaults to what the frequency axis implies and ``noverlap`` to half of it.
    """
    name = "scipy.signal.istft"
    check_arraylike(name, Zxx)
    z = jnp.asarray(Zxx)
    if z.ndim < 2:
        raise FtransShapeError(f"{name}: input stft must be at least 2d, got shape {tuple(z.shape)}")
    freq_axis = canonicalize_axis(name, freq_axis, z.ndim)
    time_axis = canonicalize_axis(name, time_axis, z.ndim)
    if freq_axis == time_axis:
        raise FtransValueError(f"{name}: must specify differing time and frequency axes, got {time_axis} for both")
    if not jnp.issubdtype(z.dtype, jnp.inexact):
        z = z.astype(jnp.result_type(z, 1.0))
    z = z.astype(_complex_dtype(z.dtype))
    n_default = 2 * (z.shape[freq_axis] - 1) if input_onesided else z.shape[freq_axis]
    nperseg_int = _static(name, "nperseg", nperseg or n_default)
    if nperseg_int < 1:
        raise FtransValueError(f"{name}: nperseg must be a positive integer, got {nperseg_int}")
    if nfft is None:
        nfft_int = n_default + (1 if input_onesided and nperseg_int == n_default + 1 else 0)
    else:
        nfft_int = _static(name, "nfft", nfft)
    if nfft_int < nperseg_int:
        raise FtransValueError(f"{name}: FFT length ({nfft_int}) must be longer than nperseg ({nperseg_int})")
    noverlap_int = _static(name, "noverlap", noverlap or nperseg_int // 2)
    if noverlap_int >= nperseg_int:
        raise FtransValueError(f"{name}: noverlap ({noverlap_int}) must be less than nperseg ({nperseg_int})")
    nstep = nperseg_int - noverlap_int

    if time_axis != z.ndim - 1 or freq_axis != z.ndim - 2:
        outer = tuple(i for i in range(z.ndim) if i not in (time_axis, freq_axis))
        z = jnp.transpose(z, outer + (freq_axis, time_axis))
    inverse = jnp_fft.irfft if input_onesided else jnp_fft.ifft
    xsubs = inverse(z, axis=-2, n=nfft_int)[..., :nperseg_int, :]   # [..., nperseg, nseg]
    if isinstance(window, (str, tuple)):
        win = jnp.asarray(_named_window(name, window, nperseg_int), dtype=xsubs.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise FtransShapeError(f"{name}: window must be 1-D, got shape {tuple(win.shape)}")
        if win.shape[0] != nperseg_int:
            raise FtransValueError(f"{name}: window must have length of {nperseg_int}, got {win.shape[0]}")
    xsubs = xsubs * win.sum()
    wcol = win[:, None]
    x = _overlap_add(jnp.swapaxes(xsubs * wcol, -2, -1), nstep)
    wsq = jnp.broadcast_to(wcol * wcol, (nperseg_int, xsubs.shape[-1]))
    norm = _overlap_add(jnp.swapaxes(wsq, -2, -1), nstep)
    if boundary:
        half = nperseg_int // 2
        x = x[..., half:x.shape[-1] - half]
        norm = norm[..., half:norm.shape[-1] - half]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != z.ndim - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = jnp.moveaxis(x, -1, time_axis)
    times = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
    return times, x


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): the windowing and
# padding around each transform cost two to seventeen times the program's time op by op.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "istft", "welch",
))
