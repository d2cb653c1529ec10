"""``ftrans.numpy.fft``: JAX's ``numpy.fft``, built on the ``fft`` primitive (``lax.fft``).

The transformed axes are moved last, cropped or zero-padded to ``s``, and
transformed by one ``fft`` equation (XLA transforms up to three trailing
axes at once; more axes are done in two passes).  ``norm`` is ``None`` or
``"backward"`` (unscaled forward, ``1/n`` inverse), ``"ortho"`` or ``"forward"``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core.operands import as_operand, check_arraylike
from ftrans.core.prims.fft import FftType
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _jnp():
    from ftrans import numpy as jnp

    return jnp


def _lax():
    from ftrans import lax

    return lax


def _norm_factor(name: str, norm: Any, s: Sequence[int]) -> float | None:
    if norm is None or norm == "backward":
        return None
    n = float(math.prod(s))
    inverse = name.startswith("i")
    if norm == "ortho":
        return math.sqrt(n) if inverse else 1 / math.sqrt(n)
    if norm == "forward":
        return n if inverse else 1 / n
    raise FtransValueError(f'jnp.fft.{name}: invalid norm {norm!r}; use None, "backward", "ortho" or "forward"')


def _transform(arr: Any, fft_type: FftType, s: Sequence[int]) -> Any:
    lax, jnp = _lax(), _jnp()
    k = len(s)
    if k <= 3:
        return lax.fft(arr, fft_type, tuple(s))
    m = 2 if k == 4 else 3  # the last m axes in one pass, the others in a second one
    lead = tuple(range(arr.ndim - k, arr.ndim - m))
    tail = tuple(range(arr.ndim - k + m, arr.ndim))
    if fft_type in (FftType.FFT, FftType.RFFT):
        arr = lax.fft(arr, fft_type, tuple(s[-m:]))
        arr = jnp.moveaxis(arr, lead, tail)
        arr = _transform(arr, FftType.FFT, s[:-m])
        return jnp.moveaxis(arr, tail, lead)
    arr = jnp.moveaxis(arr, lead, tail)
    arr = _transform(arr, FftType.IFFT, s[:-m])
    arr = jnp.moveaxis(arr, tail, lead)
    return lax.fft(arr, fft_type, tuple(s[-m:]))


def _core(name: str, fft_type: FftType, a: Any, s: Any, axes: Any, norm: Any) -> Any:
    jnp = _jnp()
    check_arraylike(f"jnp.fft.{name}", a)
    arr = as_operand(a)
    nd = arr.ndim
    if s is not None:
        s = tuple(operator.index(x) for x in s)
        if any(x <= 0 for x in s):
            raise FtransValueError(f"jnp.fft.{name}: transform sizes s={s} must be positive")
    if s is not None and axes is not None and len(s) != len(axes):
        raise FtransValueError(f"jnp.fft.{name}: s={s} and axes={tuple(axes)} have different lengths")
    given_axes = axes
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
        if s is not None and len(s) > nd:
            raise FtransValueError(f"jnp.fft.{name}: s={s} names {len(s)} axes but the array has rank {nd} "
                                   f"(shape {tuple(arr.shape)})")
    else:
        axes = tuple(operator.index(ax) for ax in axes)
        for ax in axes:
            if not -nd <= ax < nd:
                raise FtransValueError(f"jnp.fft.{name}: axis {ax} is out of bounds for an array of rank {nd} "
                                       f"(shape {tuple(arr.shape)}); valid axes are {-nd}..{nd - 1}")
        axes = tuple(ax % nd for ax in axes)
    if len(axes) != len(set(axes)):
        raise FtransValueError(f"jnp.fft.{name}: repeated axes are not supported, got axes {tuple(given_axes)}")
    if not axes:
        raise FtransValueError(f"jnp.fft.{name}: needs at least one axis to transform")
    last = tuple(range(nd - len(axes), nd))
    if given_axes is not None:
        arr = jnp.moveaxis(arr, axes, last)
    if s is not None:
        want = list(arr.shape)
        for ax, x in zip(last, s):
            want[ax] = x
        if fft_type == FftType.IRFFT:
            want[-1] = want[-1] // 2 + 1
        arr = arr[tuple(slice(0, w) for w in want)]
        pads = [(0, w - h) for w, h in zip(want, arr.shape)]
        if any(p[1] for p in pads):
            arr = jnp.pad(arr, pads)
    elif fft_type == FftType.IRFFT:
        s = tuple(arr.shape[ax] for ax in last[:-1]) + (max(0, 2 * (arr.shape[-1] - 1)),)
    else:
        s = tuple(arr.shape[ax] for ax in last)
    out = _transform(arr, fft_type, s)
    f = _norm_factor(name, norm, s)
    if f is not None:
        out = out * np.asarray(f, out.dtype)
    if given_axes is not None:
        out = jnp.moveaxis(out, last, axes)
    return out


def _one_axis(name: str, axis: Any) -> list:
    if isinstance(axis, (list, tuple)):
        raise FtransValueError(f"jnp.fft.{name} transforms one axis; use jnp.fft.{name}n for several "
                               f"(got axis={axis!r})")
    return [axis]


def _two_axes(name: str, axes: Any) -> Any:
    if len(axes) != 2:
        raise FtransValueError(f"jnp.fft.{name} transforms exactly 2 axes, got axes={tuple(axes)}")
    return axes


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """One-dimensional discrete Fourier transform along ``axis``."""
    return _core("fft", FftType.FFT, a, None if n is None else [n], _one_axis("fft", axis), norm)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """One-dimensional inverse discrete Fourier transform along ``axis``."""
    return _core("ifft", FftType.IFFT, a, None if n is None else [n], _one_axis("ifft", axis), norm)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Transform of a real array along ``axis``; keeps the ``n // 2 + 1`` non-negative frequencies."""
    return _core("rfft", FftType.RFFT, a, None if n is None else [n], _one_axis("rfft", axis), norm)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Inverse of ``rfft``: ``n`` (default ``2 * (m - 1)``) real outputs along ``axis``."""
    return _core("irfft", FftType.IRFFT, a, None if n is None else [n], _one_axis("irfft", axis), norm)


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Transform of a Hermitian-symmetric signal given by its first half (a real spectrum)."""
    jnp = _jnp()
    check_arraylike("jnp.fft.hfft", a)
    axes = _one_axis("hfft", axis)
    c = jnp.conj(as_operand(a))
    nn = (c.shape[axis] - 1) * 2 if n is None else n
    return _core("hfft", FftType.IRFFT, c, None if n is None else [n], axes, norm) * nn


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """Inverse of ``hfft``: the first half of the spectrum of a real signal, conjugated and scaled by 1/n."""
    jnp = _jnp()
    check_arraylike("jnp.fft.ihfft", a)
    axes = _one_axis("ihfft", axis)
    arr = as_operand(a)
    nn = arr.shape[axis] if n is None else n
    out = _core("ihfft", FftType.RFFT, arr, None if n is None else [n], axes, norm)
    return jnp.conj(out) * (1 / nn)


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """N-dimensional transform over ``axes`` (default: all, or the last ``len(s)``)."""
    return _core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """N-dimensional inverse transform."""
    return _core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """N-dimensional transform of a real array (half spectrum along the last axis)."""
    return _core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """Inverse of ``rfftn``."""
    return _core("irfftn", FftType.IRFFT, a, s, axes, norm)


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """Two-dimensional transform over ``axes``."""
    return _core("fft2", FftType.FFT, a, s, _two_axes("fft2", axes), norm)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """Two-dimensional inverse transform over ``axes``."""
    return _core("ifft2", FftType.IFFT, a, s, _two_axes("ifft2", axes), norm)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """Two-dimensional transform of a real array."""
    return _core("rfft2", FftType.RFFT, a, s, _two_axes("rfft2", axes), norm)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """Inverse of ``rfft2``."""
    return _core("irfft2", FftType.IRFFT, a, s, _two_axes("irfft2", axes), norm)


def _freq_dtype(dtype: Any) -> Any:
    jnp = _jnp()
    d = jnp.dtype(jnp.result_type(1.0)) if dtype is None else jnp.dtype(dtype)
    if d.kind not in "fc":
        raise FtransTypeError(f"jnp.fft.fftfreq: dtype must be floating-point or complex, got {d}")
    return d


def fftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies ``[0, 1, ..., n/2-1, -n/2, ..., -1] / (d * n)``."""
    jnp = _jnp()
    if not isinstance(n, (int, np.integer)):
        raise FtransValueError(f"jnp.fft.fftfreq: n must be an integer, got n={n!r}")
    if np.ndim(d) != 0:
        raise FtransValueError(f"jnp.fft.fftfreq: d must be a single value (the sample spacing), got d={d!r}")
    dt = _freq_dtype(dtype)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)]).astype(dt)
    return jnp.asarray(k, dtype=dt, device=device) / (jnp.asarray(d, dtype=dt) * n)


def rfftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of ``rfft``: ``[0, 1, ..., n // 2] / (d * n)``."""
    jnp = _jnp()
    if not isinstance(n, (int, np.integer)):
        raise FtransValueError(f"jnp.fft.rfftfreq: n must be an integer, got n={n!r}")
    if np.ndim(d) != 0:
        raise FtransValueError(f"jnp.fft.rfftfreq: d must be a single value (the sample spacing), got d={d!r}")
    dt = _freq_dtype(dtype)
    k = np.arange(0, n // 2 + 1).astype(dt)
    return jnp.asarray(k, dtype=dt, device=device) / (jnp.asarray(d, dtype=dt) * n)


def _shift(name: str, x: Any, axes: Any, sign: int) -> Any:
    jnp = _jnp()
    check_arraylike(f"jnp.fft.{name}", x)
    x = as_operand(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    shift = [sign * (x.shape[ax] // 2) for ax in axes]
    return jnp.roll(x, shift, axes)


def fftshift(x: Any, axes: Any = None) -> Any:
    """Move the zero-frequency term to the centre."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x: Any, axes: Any = None) -> Any:
    """Inverse of ``fftshift``."""
    return _shift("ifftshift", x, axes, -1)


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): the argument
# handling around each transform costs more than the transform at small sizes.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
    "irfftn", "fftshift", "ifftshift",
))
