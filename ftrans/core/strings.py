"""String arrays: NumPy 2's ``StringDType`` data placed on CPU devices, as JAX's runtime allows.

XLA has no string element type, so a string array is data only: ``device_put`` (or ``jnp.asarray``) puts
a NumPy ``StringDType`` array on a CPU device, or splits it over CPU devices with a ``NamedSharding``,
and ``device_get`` / ``np.asarray`` read it back. No computation takes one: ``jit`` and ``grad`` refuse
it as an argument, a primitive refuses it as an operand (both with JAX's "is not a valid JAX type"), and
type promotion refuses its dtype. ``vmap`` of a function that only passes it through works, as in JAX.

A ``StringArray`` keeps its data under ``_strings``, not in ``Array._value``, which every computing path
reads: there ``_value`` raises the "not a valid JAX type" error, so no hot path tests for strings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.array import Array, Shard
from ftrans.core.avals import ShapedArray
from ftrans.errors import FtransTypeError

_STRING_DTYPE_CLASS = getattr(getattr(np, "dtypes", None), "StringDType", None)
# JAX's one string dtype: NumPy's default ``StringDType()`` (other ``na_object`` variants are not it).
STRING_DTYPE = _STRING_DTYPE_CLASS() if _STRING_DTYPE_CLASS is not None else None


def is_string_dtype(d: Any) -> bool:
    """Whether ``d`` is (or names) JAX's string dtype, NumPy's ``StringDType()``."""
    if STRING_DTYPE is None or d is None:
        return False
    try:
        return bool(d == STRING_DTYPE) and isinstance(np.dtype(d), _STRING_DTYPE_CLASS)
    except TypeError:
        return False


def is_string_array(x: Any) -> bool:
    """A NumPy array or an ftrans array of JAX's string dtype."""
    return isinstance(x, (np.ndarray, StringArray)) and is_string_dtype(x.dtype)


def invalid_type_error(x: Any) -> FtransTypeError:
    """JAX's error for a string array given to a computation (``jit``, ``grad``, a primitive)."""
    shown = x._strings if isinstance(x, StringArray) else x
    return FtransTypeError(f"Argument '{shown}' of type {type(x)} is not a valid JAX type. String arrays "
                           f"(dtype {STRING_DTYPE}) can only be placed on CPU devices and read back "
                           "(device_put, device_get); no computation takes them")


def promotion_error(d: Any) -> Exception:
    from ftrans.errors import FtransValueError

    return FtransValueError(f"dtype={d} is not a valid dtype for JAX type promotion. String arrays hold data "
                            "only: no arithmetic, comparison or other operation takes them")


def check_target(target: Any) -> None:
    """A string array goes only to CPU devices (a Device, or a sharding over CPU devices), as in JAX."""
    if target is not None:
        if getattr(target, "platform", None) == "cpu":
            return
        devs = getattr(target, "device_set", None)
        if devs and all(getattr(d, "platform", None) == "cpu" for d in devs):
            return
    raise FtransTypeError(f"String arrays can only be sharded to CPU devices. Received unsupported device or "
                          f"sharding: {target}. Place string arrays with device= a CPU device "
                          "(ftrans.devices('cpu')[0]) or a NamedSharding over CPU devices")


def from_numpy_checked(obj: Any, dtype: Any, ndmin: int, device: Any) -> StringArray:
    """``jnp.array``/``jnp.asarray`` of a string array or to the string dtype (JAX's rules and errors)."""
    if not isinstance(obj, np.ndarray):
        raise FtransTypeError(f"Currently, string arrays can only be made from NumPy arrays. Got:  {type(obj)}.")
    if dtype is not None and is_string_dtype(obj.dtype) != is_string_dtype(dtype):
        shown = dtype if is_string_dtype(dtype) else np.dtype(dtype).name
        raise FtransTypeError(f"Cannot make an array with dtype {shown} from an object with dtype {obj.dtype}.")
    if ndmin > obj.ndim:
        raise FtransTypeError(f"ndmin {ndmin} cannot be greater than object's ndims {obj.ndim} for string arrays.")
    return place(obj, device)


def place(value: Any, target: Any) -> StringArray:
    """A string array (NumPy's, or a ``StringArray``) placed on ``target``: a CPU Device or a sharding over
    CPU devices. The data is copied, as every placement is (the caller's array stays writable)."""
    from ftrans.core.sharding import NamedSharding, SingleDeviceSharding

    check_target(target)
    arr = value._strings if isinstance(value, StringArray) else value
    if not is_string_dtype(arr.dtype):
        raise FtransTypeError(f"place: not a string array (dtype {arr.dtype})")
    data = np.array(arr, copy=True)
    data.flags.writeable = False
    out = StringArray()
    out._strings = data
    out._dt = data.dtype  # (the fast operators' test: not a float dtype, so they take the API path)
    out.weak_type = False
    if isinstance(target, SingleDeviceSharding):
        target = next(iter(target.device_set))
    if isinstance(target, NamedSharding):
        from ftrans.core.sharding import check_divisible

        check_divisible(target, data.shape, "device_put")
        out._str_sharding = target
        out._dev = None
    else:
        out._str_sharding = None
        out._dev = target
    return out


class StringArray(Array):
    """An ftrans Array of dtype ``StringDType()`` on one CPU device or split over several (see the module)."""

    __slots__ = ("_strings", "_str_sharding")
    _committed = True  # placed explicitly (device_put / asarray with a device or sharding), as JAX's

    @property
    def _value(self) -> Any:  # every computing path reads this: refused there, as JAX refuses the value
        raise invalid_type_error(self)

    @property
    def aval(self) -> ShapedArray:
        v = self._strings
        return ShapedArray(v.shape, v.dtype, False)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._strings.shape

    @property
    def dtype(self) -> np.dtype:
        return self._strings.dtype

    @property
    def ndim(self) -> int:
        return self._strings.ndim

    @property
    def size(self) -> int:
        return self._strings.size

    @property
    def nbytes(self) -> int:
        return self._strings.nbytes

    @property
    def itemsize(self) -> int:
        return self._strings.itemsize

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        v = self._strings
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        view = v.view()
        view.flags.writeable = False
        return view

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        raise BufferError("String arrays cannot be exported through DLPack (it has no string type)")

    def __buffer__(self, flags: int) -> memoryview:
        raise BufferError("String arrays have no buffer to export")

    def unsafe_buffer_pointer(self) -> int:
        raise invalid_type_error(self)

    def item(self, *args: Any) -> Any:
        return self._strings.item(*args)

    def tolist(self) -> Any:
        return self._strings.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        raise invalid_type_error(self)

    def copy(self) -> StringArray:
        return place(self._strings, self._str_sharding or self._dev)

    def __len__(self) -> int:
        if self._strings.ndim == 0:
            raise FtransTypeError("len() of unsized object (a 0-d array)")
        return self._strings.shape[0]

    def __iter__(self):
        raise invalid_type_error(self)

    def __reduce__(self):
        # unpickled onto the CPU device of the same id (a split array onto its first device), whole
        dev = self._dev if self._str_sharding is None else self._str_sharding._device_assignment[0]
        return (_unpickle, (np.asarray(self._strings), dev.id))

    def __repr__(self) -> str:
        v = self._strings
        width = np.get_printoptions()["linewidth"]
        body = (np.array2string(v, separator=", ", prefix="Array(", suffix=",", max_line_width=width) if v.size
                else f"[], shape={v.shape}")
        dt = f"dtype={v.dtype.name}"
        # JAX's layout: a dtype that would overflow the last line is set off by the prefix's width
        last = len(body) - body.rfind("\n") + 1
        return f"Array({body},{' ' * 6 if last + len(dt) + 2 > width else ' '}{dt})"

    def __str__(self) -> str:
        return str(self._strings)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def block_until_ready(self) -> StringArray:
        return self

    def is_deleted(self) -> bool:
        try:
            self._strings  # noqa: B018
        except AttributeError:
            return True
        return False

    def delete(self) -> None:
        try:
            del self._strings
        except AttributeError:
            pass

    def on_device_size_in_bytes(self) -> int:
        return int(self._strings.nbytes)

    @property
    def _npy_value(self) -> np.ndarray | None:
        return getattr(self, "_strings", None)

    # -- placement -------------------------------------------------------------
    @property
    def device(self) -> Any:
        if self._str_sharding is not None:
            from ftrans.errors import FtransValueError

            raise FtransValueError("Length of devices is greater than 1. Please use `.devices()`.")
        return self._dev

    def devices(self) -> set:
        if self._str_sharding is not None:
            return set(self._str_sharding.device_set)
        return {self._dev}

    @property
    def sharding(self) -> Any:
        if self._str_sharding is not None:
            return self._str_sharding
        from ftrans.core.sharding import SingleDeviceSharding

        return SingleDeviceSharding(self._dev)

    @property
    def addressable_shards(self) -> list:
        if self._str_sharding is None:
            return [Shard(self._dev, tuple(slice(None) for _ in self.shape), self, 0)]
        out = []
        seen: dict = {}
        shape = self.shape
        for dev, index in self._str_sharding.devices_indices_map(shape).items():
            # an unsplit dimension's slice is the whole of it, written as JAX's runtime writes it
            index = tuple(slice(None) if (s.start in (0, None) and s.stop in (n, None) and s.step in (1, None))
                          else s for s, n in zip(index, shape))
            key = str(index)
            rid = seen.get(key, 0)
            seen[key] = rid + 1
            out.append(Shard(dev, index, place(self._strings[index], dev), rid))
        return out


def _unpickle(value: np.ndarray, device_id: int) -> StringArray:
    from ftrans.core.host import host_device

    cpus = host_device().client.local_devices()  # the CPU client's devices (core reads no runtime module)
    return place(value, next((d for d in cpus if d.id == device_id), cpus[0]))
