"""The discrete Fourier transform over the trailing axes: the ``fft`` primitive.

``fft_type`` is one of XLA's four kinds (:class:`FftType`); ``fft_lengths``
are the transform sizes of the trailing ``len(fft_lengths)`` axes (1 to 3).
FFT/IFFT map complex to complex of the same shape; RFFT maps real to complex,
keeping ``n // 2 + 1`` entries of the last axis; IRFFT is its inverse. The
impl calls NumPy's pocketfft, which keeps single precision.
"""

from __future__ import annotations

import enum

import numpy as np

from ftrans.core.prims._base import COMPLEX, FLOAT, prim_type_error, prim_value_error, standard_primitive


class FftType(enum.IntEnum):
    """XLA's transform kinds (JAX's ``lax.FftType``)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    def __str__(self) -> str:  # jaxpr printing: fft_type=RFFT
        return self.name


_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def _fft_shape(x, *, fft_type, fft_lengths):
    lens = tuple(int(n) for n in fft_lengths)
    k = len(lens)
    if not 1 <= k <= 3:
        raise prim_value_error("fft", f"fft_lengths {lens} must name 1 to 3 trailing axes")
    if x.ndim < k:
        raise prim_value_error("fft", f"input shape {tuple(x.shape)}: a {k}-dimensional transform needs an "
                                      f"operand of rank >= {k} (fft_lengths {lens})")
    if fft_type == FftType.RFFT:
        _fft_dtype(x, fft_type=fft_type, fft_lengths=lens)  # a wrong dtype is named before any shape, as in JAX
    tail = tuple(x.shape[x.ndim - k:])
    if fft_type in (FftType.FFT, FftType.IFFT, FftType.RFFT):
        if tail != lens:
            raise prim_value_error("fft", f"{FftType(fft_type).name} input shape {tuple(x.shape)}: the trailing "
                                          f"axes {tail} must equal fft_lengths {lens}")
        if fft_type != FftType.RFFT:
            return tuple(x.shape)
        return tuple(x.shape[:-1]) + (lens[-1] // 2 + 1,)
    want = lens[:-1] + (lens[-1] // 2 + 1,)
    if tail != want:
        raise prim_value_error("fft", f"IRFFT input shape {tuple(x.shape)}: the trailing axes {tail} must be "
                                      f"{want} for fft_lengths {lens}")
    return tuple(x.shape[:-1]) + (lens[-1],)


def _fft_dtype(x, *, fft_type, fft_lengths):
    if fft_type == FftType.RFFT:
        if x.dtype not in FLOAT or x.dtype not in _COMPLEX_OF:
            raise prim_value_error("fft", f"RFFT input must be float32 or float64, got {x.dtype}")
        return _COMPLEX_OF[x.dtype]
    if x.dtype not in COMPLEX:
        raise prim_type_error("fft", [x], f"{FftType(fft_type).name} expects a complex operand")
    return _REAL_OF[x.dtype] if fft_type == FftType.IRFFT else x.dtype


def _fft_impl(x, *, fft_type, fft_lengths):
    lens = tuple(int(n) for n in fft_lengths)
    axes = tuple(range(x.ndim - len(lens), x.ndim))
    out_dtype = _fft_dtype(x, fft_type=fft_type, fft_lengths=lens)
    if 0 in x.shape or 0 in lens:
        return np.zeros(_fft_shape(x, fft_type=fft_type, fft_lengths=lens), out_dtype)
    if fft_type == FftType.FFT:
        out = np.fft.fftn(x, axes=axes)
    elif fft_type == FftType.IFFT:
        out = np.fft.ifftn(x, axes=axes)
    elif fft_type == FftType.RFFT:
        out = np.fft.rfftn(x, axes=axes)
    else:
        out = np.fft.irfftn(x, s=lens, axes=axes)
    return np.asarray(out).astype(out_dtype, copy=False)


def _fft_weak(weaks, **params) -> bool:
    return False


fft_p = standard_primitive("fft", _fft_shape, _fft_dtype, _fft_impl, weak_type_rule=_fft_weak)

__all__ = ["fft_p", "FftType"]



# Sharding in types: the result keeps the operand's layout (JAX's)
from ftrans.core import sharding_rules as _sr  # noqa: E402

fft_p.sharding_rule = _sr.same_as_first
