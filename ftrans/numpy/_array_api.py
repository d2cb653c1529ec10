"""The array API's metadata for ``ftrans.numpy``: ``__array_api_version__``, ``__array_namespace_info__``,
and DLPack import (``from_dlpack``), mirroring JAX's numpy module."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import array as _array_mod
from ftrans.core import dtypes
from ftrans.core.array import Array, from_foreign
from ftrans.core.config import config
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["__array_api_version__", "__array_namespace_info__", "from_dlpack"]

# the array API standard jax 0.11's numpy module implements (jax 0.10's said "2024.12"); 2025.12's devices()
# gives a tuple
__array_api_version__ = "2025.12"

_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]
_X64_ONLY = {"int64", "uint64", "float64", "complex128"}


class ArrayNamespaceInfo:
    """Array API inspection: what ``ftrans.numpy`` supports, as JAX's numpy ``__array_namespace_info__()``."""

    _capabilities = {"boolean indexing": False, "data-dependent shapes": False, "max dimensions": 64}

    def capabilities(self) -> dict:
        return dict(self._capabilities)

    def default_device(self) -> None:
        return None  # arrays are uncommitted until placed, as in JAX

    def devices(self) -> tuple:
        from ftrans.devices import default_backend, devices

        out: list = [None, *devices()]
        if default_backend() != "cpu":
            out += devices("cpu")
        return tuple(out)

    def default_dtypes(self, *, device: Any = None) -> dict:
        del device  # the same on every device
        return {"real floating": dtypes.default_float(), "complex floating": dtypes.default_complex(),
                "integral": dtypes.default_int(), "indexing": dtypes.default_int()}

    def dtypes(self, *, device: Any = None, kind: str | tuple[str, ...] | None = None) -> dict:
        del device
        kinds = ("numeric", "bool") if kind is None else kind if isinstance(kind, tuple) else (kind,)
        out: dict = {}
        for k in kinds:
            if k not in _KINDS:
                raise KeyError(f"__array_namespace_info__().dtypes: unknown kind {k!r}; the kinds are "
                               f"{', '.join(map(repr, _KINDS))}")
            for name in _KINDS[k]:
                if name not in _X64_ONLY or config.enable_x64:
                    out[name] = np.dtype(name)
        return out


def __array_namespace_info__() -> ArrayNamespaceInfo:
    return ArrayNamespaceInfo()


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """Make an array over the data of a DLPack producer.

    The PJRT client imports the tensor on the device it lives on, sharing its memory unless `copy=True` (or a
    transfer to `device` needs a copy, which `copy=False` forbids). As in JAX, the producer must not write to
    memory it shares with the result.

    Args:
        x: An object with `__dlpack__` and `__dlpack_device__` (a NumPy array, a torch tensor, ...).
        device: Optional device to place the result on.
        copy: True to always copy, False to never copy (raise if one is needed), None to copy only when
            needed.
    Returns:
        An array with `x`'s shape, dtype and values.

    Examples:
        >>> jnp.from_dlpack(np.arange(3, dtype=np.float32))
        Array([0., 1., 2.], dtype=float32)

    See also:
        `asarray`.
    """
    from ftrans.devices import device_put
    from ftrans.lowering import compat

    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        raise FtransTypeError(f"from_dlpack: a {type(x).__name__} has no __dlpack__ and __dlpack_device__ "
                              "methods; pass a DLPack producer (a NumPy, jax, torch, ... array)")
    src = compat.dlpack_device(x.__dlpack_device__())
    if src is None:
        raise FtransTypeError(f"from_dlpack: the array is on DLPack device {x.__dlpack_device__()!r}, which "
                              "no PJRT client here can import; copy it to the host first")
    if device is not None and copy is False and device != src:
        raise FtransValueError(f"from_dlpack: device={device} needs a copy from {src}, but copy=False; "
                               "pass copy=True or copy=None")
    if isinstance(x, Array) and not copy:
        out = x  # already ours, and immutable
    elif type(x) is _array_mod.buffer_type and not copy:
        out = from_foreign(x)  # a jax.Array: its buffer is one of ours already
    else:
        try:
            out = from_foreign(compat.buffer_from_dlpack(x, src, copy))
        except BufferError:
            if src.platform != "cpu":
                raise
            # A read-only host producer (a read-only NumPy array) exports only through DLPack 1.0,
            # which NumPy speaks: read it there and copy (JAX raises BufferError here).
            out = Array._make(np.from_dlpack(x), False)
    if device is not None and device != src:
        out = device_put(out, device)
    return out
