"""``ftrans.scipy.fft``: the discrete cosine transform of type 2 and its inverse (JAX's ``scipy.fft``).

``dct``/``idct`` work along one axis and ``dctn``/``idctn`` along several; each
is computed with one complex FFT of the same length (Makhoul's reordering:
the even samples, then the odd ones reversed, transformed and turned by a
quarter-sample phase), so they run on every backend that has an FFT and are
differentiable and batchable like any other ``ftrans.numpy`` code.  As in JAX,
only ``type=2`` is implemented and ``norm`` is ``None``/``"backward"`` or
``"ortho"``; complex input is transformed as its real and imaginary parts.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core.operands import canonicalize_axes, canonicalize_axis, check_arraylike
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check_args(name: str, x: Any, type: Any, norm: Any) -> Any:
    check_arraylike(name, x)
    if type != 2:
        raise NotImplementedError(f"ftrans.scipy.fft.{name}: only DCT type 2 is implemented, got type={type!r}")
    if norm is not None and norm not in ("backward", "ortho"):
        raise FtransValueError(f"ftrans.scipy.fft.{name}: norm={norm!r} is not implemented; use None, "
                               "'backward' or 'ortho'")
    return jnp.asarray(x)


def _length(name: str, n: Any) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise FtransTypeError(f"ftrans.scipy.fft.{name}: a transform length must be an integer, got "
                              f"{type(n).__name__}") from None
    if n < 1:
        raise FtransValueError(f"ftrans.scipy.fft.{name}: invalid number of data points ({n}) specified; "
                               "a transform length must be at least 1")
    return n


def _resize(x: Any, axis: int, n: int) -> Any:
    """``x`` cut or zero-padded to length ``n`` along ``axis``."""
    size = x.shape[axis]
    if n == size:
        return x
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    pads = [(0, n - size if a == axis else 0, 0) for a in range(x.ndim)]
    return lax.pad(x, jnp.zeros((), x.dtype), pads)


def _along(v: Any, axis: int, ndim: int) -> Any:
    """A 1-d ``v`` shaped to broadcast along ``axis`` of an ``ndim``-d array."""
    return lax.expand_dims(v, [a for a in range(ndim) if a != axis])


def _ortho_scale(x: Any, axis: int) -> Any:
    """Divide by ``sqrt(4 N)`` at frequency 0 and ``sqrt(2 N)`` elsewhere (the orthonormal DCT-II)."""
    n = x.shape[axis]
    weights = jnp.concatenate([jnp.full((1,), 4, x.dtype), jnp.full((n - 1,), 2, x.dtype)])
    return x / lax.sqrt(_along(weights, axis, x.ndim) * n)


def _quarter_turn(n: int, k: Any) -> Any:
    """``exp(-i pi k / (2 n))``, complex of ``k``'s precision."""
    ctype = jnp.result_type(k, 1j)
    return jnp.exp(jnp.asarray(-0.5j * np.pi, ctype) * k.astype(ctype) / n)


def _even_then_reversed_odd(x: Any, axis: int) -> Any:
    evens = lax.slice_in_dim(x, 0, None, 2, axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis), (axis,))
    return lax.concatenate([evens, odds], axis)


def _undo_reorder(x: Any, axis: int) -> Any:
    """The inverse of :func:`_even_then_reversed_odd`: the first half back on the even
    positions, the second half reversed on the odd ones."""
    n = x.shape[axis]
    half = math.ceil(n / 2)
    first = lax.slice_in_dim(x, 0, half, axis=axis)
    second = lax.rev(lax.slice_in_dim(x, half, n, axis=axis), (axis,))
    out = jnp.zeros(x.shape, x.dtype)
    evens = tuple(slice(None, None, 2) if a == axis else slice(None) for a in range(x.ndim))
    odds = tuple(slice(1, None, 2) if a == axis else slice(None) for a in range(x.ndim))
    return out.at[evens].set(first).at[odds].set(second)


def _dct_real(x: Any, n: int | None, axis: int, norm: str | None) -> Any:
    if n is not None:
        x = _resize(x, axis, n)
    size = x.shape[axis]
    spectrum = jnp.fft.fft(_even_then_reversed_odd(x, axis), axis=axis)
    k = _along(jnp.arange(size, dtype=spectrum.real.dtype), axis, x.ndim)
    out = 2 * (spectrum * _quarter_turn(size, k)).real
    if norm == "ortho":
        out = _ortho_scale(out, axis)
    return out


def _idct_real(x: Any, n: int | None, axis: int, norm: str | None) -> Any:
    if n is not None:
        x = _resize(x, axis, n)
    size = x.shape[axis]
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(x, 1.0))
    # backward: the inverse of the unnormalised DCT-II, which is the orthonormal inverse
    # scaled once more by the orthonormal factors.
    if norm is None or norm == "backward":
        x = _ortho_scale(x, axis)
    x = _ortho_scale(x, axis)
    k = _along(jnp.arange(size, dtype=x.dtype), axis, x.ndim)
    turn = _quarter_turn(size, k)
    x = x.astype(turn.dtype) / turn * (2 * size)
    return _undo_reorder(jnp.fft.ifft(x, axis=axis).real, axis)


def _split_complex(fn, x: Any, *args: Any) -> Any:
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return lax.complex(fn(x.real, *args), fn(x.imag, *args))
    return fn(x, *args)


def dct(x: Any, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The discrete cosine transform (type 2) of ``x`` along ``axis``, as ``scipy.fft.dct``.

    Args:
        x: the input array (integer and boolean input is promoted to float).
        type: the DCT type; only 2 is implemented.
        n: the transform length: ``x`` is cut or zero-padded to ``n`` along ``axis``
            (default: its length there).
        axis: the axis to transform (default the last).
        norm: ``None`` or ``"backward"`` (unnormalised) or ``"ortho"`` (orthonormal).

    Returns:
        The transform, of ``x``'s shape with ``n`` along ``axis``.
    """
    x = _check_args("dct", x, type, norm)
    axis = canonicalize_axis("dct", axis, x.ndim)
    n = None if n is None else _length("dct", n)
    return _split_complex(_dct_real, x, n, axis, norm)


def idct(x: Any, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of :func:`dct` (the DCT of type 3, scaled) along ``axis``, as ``scipy.fft.idct``.

    Args:
        x: the input array.
        type: the type of the forward transform this inverts; only 2 is implemented.
        n: the transform length: ``x`` is cut or zero-padded to ``n`` along ``axis``.
        axis: the axis to transform (default the last).
        norm: ``None`` or ``"backward"`` (the inverse of the unnormalised ``dct``) or ``"ortho"``.

    Returns:
        The inverse transform, of ``x``'s shape with ``n`` along ``axis``.
    """
    x = _check_args("idct", x, type, norm)
    axis = canonicalize_axis("idct", axis, x.ndim)
    n = None if n is None else _length("idct", n)
    return _split_complex(_idct_real, x, n, axis, norm)


def _axes_and_sizes(name: str, x: Any, s: Any, axes: Any) -> tuple[tuple[int, ...], list | None]:
    if s is not None:
        if isinstance(s, Sequence) or hasattr(s, "__iter__"):
            s = [_length(name, v) for v in s]
        else:
            s = [_length(name, s)]
        if len(s) > x.ndim:
            raise FtransValueError(f"ftrans.scipy.fft.{name}: s must have at most x.ndim ({x.ndim}) elements, "
                                   f"got {len(s)}")
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    else:
        if not isinstance(axes, (list, tuple)):
            axes = (axes,)
        axes = canonicalize_axes(name, tuple(axes), x.ndim)
        if s is not None and len(s) != len(axes):
            raise FtransValueError(f"ftrans.scipy.fft.{name}: s and axes must have the same length when both "
                                   f"are given, got s={tuple(s)} and axes={tuple(axes)}")
    return axes, s


def _nd(name: str, one_axis, x: Any, type: Any, s: Any, axes: Any, norm: Any) -> Any:
    x = _check_args(name, x, type, norm)
    axes, s = _axes_and_sizes(name, x, s, axes)
    sizes = [None] * len(axes) if s is None else s

    def real(v: Any) -> Any:
        for ax, n in zip(axes, sizes):
            v = one_axis(v, n, ax, norm)
        return v

    return _split_complex(real, x)


def dctn(x: Any, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Any:
    """The multidimensional DCT (type 2) of ``x``, as ``scipy.fft.dctn``: :func:`dct` along each of ``axes``.

    Args:
        x: the input array.
        type: the DCT type; only 2 is implemented.
        s: the transform length along each of ``axes`` (``x`` is cut or zero-padded to it).
        axes: the axes to transform; default the last ``len(s)`` axes, or all of them when ``s`` is None.
        norm: ``None`` or ``"backward"`` or ``"ortho"``.

    Returns:
        The transform.
    """
    return _nd("dctn", _dct_real, x, type, s, axes, norm)


def idctn(x: Any, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """The multidimensional inverse DCT, as ``scipy.fft.idctn``: :func:`idct` along each of ``axes``.

    Args:
        x: the input array.
        type: the type of the forward transform this inverts; only 2 is implemented.
        s: the transform length along each of ``axes``.
        axes: the axes to transform; default the last ``len(s)`` axes, or all of them when ``s`` is None.
        norm: ``None`` or ``"backward"`` or ``"ortho"``.

    Returns:
        The inverse transform.
    """
    return _nd("idctn", _idct_real, x, type, s, axes, norm)
