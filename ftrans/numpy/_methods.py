"""Array methods that are not plain ``jnp`` functions with the array first.

``ArrayMixin`` (shared by ``ftrans.Array`` and every ``Tracer``) looks up
``_method_NAME`` here before ``jnp.NAME``; ``__round__`` is the ``round()``
builtin.  Semantics follow ``jax.Array``'s methods of the same names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import dtypes
from ftrans.errors import FtransTypeError, FtransValueError

__all__: list[str] = []


def _method_copy(a: Any) -> Any:
    """``x.copy()`` of a traced value (a concrete Array has its own)."""
    return jnp.array(a, copy=True)


def _method_compress(a: Any, condition: Any, axis: int | None = None, *, size: int | None = None,
                     fill_value: Any = 0, out: None = None) -> Any:
    """``x.compress(condition, axis)``: ``jnp.compress(condition, x, axis)``."""
    return jnp.compress(condition, a, axis, size=size, fill_value=fill_value, out=out)


def _method_argpartition(a: Any, kth: int, axis: int = -1) -> Any:
    return jnp.argpartition(a, kth, axis=axis)


def _method_view(a: Any, dtype: Any = None, type: Any = None) -> Any:  # noqa: A002
    """``x.view(dtype)``: the same bits read as ``dtype``; a wider or narrower
    dtype changes the length of the last axis, as NumPy's ``view`` does."""
    if type is not None:
        raise NotImplementedError("view: the `type` argument is not supported (ftrans has one array type)")
    if dtype is None:
        return a
    d = dtypes.canonicalize(dtypes.to_dtype(dtype))
    src = np.dtype(a.dtype)
    bits_in, bits_out = dtypes.itemsize_bits(src), dtypes.itemsize_bits(d)  # int4 packs two to a byte
    shape = tuple(a.shape)
    if not shape:
        if bits_in != bits_out:
            raise FtransValueError(
                f"view: a 0-d array can only be viewed as a dtype of the same size ({src.name} is "
                f"{bits_in} bits, {d.name} is {bits_out}); reshape it to 1-d first")
        return _method_view(jnp.expand_dims(a, 0), d).squeeze(0)
    if (shape[-1] * bits_in) % bits_out:
        raise FtransValueError(
            f"view: the last axis of a {src.name}{list(shape)} array ({shape[-1] * bits_in} bits) "
            f"does not divide into {d.name} elements ({bits_out} bits each)")
    if src == d:
        return a
    if src == np.bool_:
        from ftrans.core.array import Array

        if a.__class__ is Array:  # the stored bytes (a bool made by a view may hold 96), as XLA's convert reads them
            return _method_view(jnp.asarray(np.asarray(a).view(np.uint8)), d)
        return _method_view(a.astype(np.uint8), d)
    if src.kind == "c":
        part = np.dtype(f"f{src.itemsize // 2}")
        inter = jnp.stack([jnp.real(a), jnp.imag(a)], axis=-1).astype(part)
        return _method_view(inter.reshape(*shape[:-1], shape[-1] * 2), d)
    if d == np.bool_:
        return _method_view(a, np.uint8).astype(np.bool_)
    if d.kind == "c":
        parts = _method_view(a, np.dtype(f"f{d.itemsize // 2}"))
        return lax.complex(parts[..., 0::2], parts[..., 1::2])
    if bits_in < bits_out:
        factor = bits_out // bits_in
        return lax.bitcast_convert_type(a.reshape(*shape[:-1], shape[-1] // factor, factor), d)
    out = lax.bitcast_convert_type(a, d)
    if bits_in > bits_out:
        out = out.reshape(*shape[:-1], shape[-1] * (bits_in // bits_out))
    return out


def _method_byteswap(a: Any, inplace: bool = False) -> Any:
    """``x.byteswap()``: each element's bytes in reverse order (same dtype)."""
    if inplace:
        raise ValueError("byteswap: inplace=True is not supported, ftrans arrays are immutable")
    d = np.dtype(a.dtype)
    if d.kind == "c":
        return lax.complex(_method_byteswap(jnp.real(a)), _method_byteswap(jnp.imag(a)))
    if d.itemsize == 1:
        return jnp.array(a, copy=True)
    b = lax.bitcast_convert_type(a, np.uint8)
    return lax.bitcast_convert_type(lax.rev(b, [b.ndim - 1]), d)


def _operator_round(a: Any, ndigits: int | None = None) -> Any:
    """``round(x)`` gives integers (as Python's ``round`` of a float does); ``round(x, n)`` keeps the dtype."""
    out = jnp.round(a, decimals=ndigits or 0)
    return out.astype(int) if ndigits is None else out


def _operator_contains(a: Any, other: Any) -> Any:
    """``other in x``: whether the 1-d ``x`` holds the scalar ``other`` (JAX's rule: no NumPy-style
    search of N-d arrays or of sub-arrays)."""
    if other is None or isinstance(other, str):
        raise FtransTypeError(f"Array.__contains__: unsupported operand type {type(other)}.")
    query = jnp.asarray(other)
    if a.ndim != 1:
        raise FtransValueError(f"Array.__contains__: search array must be one-dimensional, got arr.shape={a.shape}; "
                               "ravel it first (x.ravel()) to search every element")
    if query.ndim != 0:
        raise FtransValueError(f"Array.__contains__: query value must be a scalar, got query.shape={query.shape}")
    return jnp.any(jnp.equal(a, query))
