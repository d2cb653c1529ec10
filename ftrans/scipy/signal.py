"""``ftrans.scipy.signal``: N-d and 2-d convolution and correlation (JAX's ``scipy.signal`` subset).

All methods compute directly with ``lax.conv_general_dilated`` (``method='fft'``
is accepted and gives the same values up to rounding).  As in JAX, only
``boundary='fill'`` with ``fillvalue=0`` is supported by the 2-d forms.
"""

from __future__ import annotations

from typing import Any

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core.operands import check_arraylike
from ftrans.errors import FtransValueError

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d"]


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
