"""``ftrans.Array``: a concrete, immutable array.

For now an Array is backed by a NumPy array on the host and eager primitives
run through their NumPy rules.  ``_value`` is read on the eager hot path, so it
is a plain slot; the device-buffer backing added with the XLA runtime keeps
this attribute as the host view.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

import numpy as np

from ftrans.core import config as _config
from ftrans.core import dtypes
from ftrans.core.array_methods import ArrayMixin
from ftrans.core.avals import ShapedArray

_NO_CUDA_INTERFACE = "__cuda_array_interface__ is only defined for NVidia GPU buffers."


class Array(ArrayMixin):
    # ``_buf``: for a host Array, a cached copy on the default device (made the
    # first time it is passed to a compiled program); for a DeviceArray, its data.
    # ``_dt``: ``_value``'s dtype, noted by the makers of host Arrays (``_value.dtype`` is a getset
    # descriptor, which Python 3.11 does not specialise: reading two cost 8% of an eager ``x + y``); a
    # device Array's is read from its value on first use (``_LazyHostArray.__getattr__``).
    __slots__ = ("_value", "weak_type", "_buf", "_sig", "_dt", "__weakref__", "__dict__")
    __array_priority__ = 1000
    # The public type users call (``ftrans.Array``, ``jnp.ndarray``) is ``PublicArray``, which raises. This
    # concrete class, as ``DeviceArray``, makes an empty instance when called without arguments, filled in by
    # its maker (the eager operators): made in C, without ``object.__new__``'s argument tuple and checks
    # (about 15 ns, 3% of an eager ``x + y``). Arguments are a TypeError ("takes no arguments").
    __init__ = object.__init__

    @classmethod
    def _make(cls, value: Any, weak_type: bool = False) -> Array:
        """An Array holding (a canonical-dtype copy of) ``value``, a NumPy array or anything NumPy reads."""
        self = cls()
        arr = np.asarray(value)
        canon = dtypes.canonicalize(arr.dtype)
        if arr.dtype != canon:
            arr = arr.astype(canon)
        elif arr is value or arr.base is not None:
            # Copy, as JAX does: the caller's array stays writable and later
            # writes to it cannot change this immutable Array.
            arr = arr.copy()
        arr.flags.writeable = False
        self._value = arr
        self._dt = arr.dtype
        self.weak_type = weak_type
        if placing:
            self._dev = _placement()
        return self

    @classmethod
    def _new(cls, value: np.ndarray, weak_type: bool) -> Array:
        """Wrap a NumPy result the caller guarantees has the canonical dtype."""
        self = cls()
        self._value = v = value if type(value) is np.ndarray else np.asarray(value)
        self._dt = v.dtype
        if placing:
            self._dev = _placement()
        self.weak_type = weak_type
        return self

    # -- type ----------------------------------------------------------------
    @property
    def aval(self) -> ShapedArray:
        v = self._value
        return ShapedArray(v.shape, v.dtype, self.weak_type)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def __numpy_dtype__(self) -> np.dtype:
        # NumPy's protocol for ``np.dtype(x)`` (NumPy 2.4): deprecated for arrays, with JAX's warning (to the
        # user's code; ftrans's own calls of NumPy's dtype functions on arrays stay quiet)
        import sys
        import warnings

        if sys._getframe(1).f_globals.get("__name__", "").startswith("ftrans."):
            return self.dtype
        warnings.warn("Implicit conversion of an array to a dtype is deprecated; rather than dtype=arr use "
                      "dtype=arr.dtype. In the future this will result in an error.", DeprecationWarning,
                      stacklevel=2)
        return self.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def nbytes(self) -> int:
        return self._value.nbytes

    @property
    def itemsize(self) -> int:
        return self._value.itemsize

    # -- conversion ----------------------------------------------------------
    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        v = self._value
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        # A read-only view: the caller must not be able to mutate this Array.
        view = v.view()
        view.flags.writeable = False
        return view

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """Export through DLPack (array API 2023.12: ``stream``, ``max_version``, ``dl_device``, ``copy``).

        The data is immutable. A consumer that speaks DLPack 1.0 (``max_version
        >= (1, 0)``, as ``np.from_dlpack`` does) gets the memory itself, marked
        read-only; an older consumer (JAX's numpy ``from_dlpack``) cannot be told
        it is read-only, so it gets a copy, unless ``copy=False`` forbids that.
        """
        v = self._value
        if max_version is not None and tuple(max_version) >= (1, 0):
            return v.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        if copy is False:
            raise BufferError(
                f"Array.__dlpack__: this {self.aval.str_short()} array is immutable and a consumer that asks "
                "for DLPack before 1.0 cannot be told it is read-only, so exporting it needs a copy, which "
                "copy=False forbids; pass max_version=(1, 0) (or newer) or allow the copy"
            )
        w = v.copy()  # a fresh, writable copy the consumer may own
        return w.__dlpack__(stream=stream, dl_device=dl_device)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._value.__dlpack_device__()

    def item(self, *args) -> Any:
        return self._value.item(*args)

    def tolist(self) -> Any:
        return self._value.tolist()

    def tobytes(self, order: str = "C") -> bytes:
        return self._value.tobytes(order)

    def is_deleted(self) -> bool:
        return False

    @property
    def __cuda_array_interface__(self) -> dict:
        """NVIDIA's CUDA array interface, as JAX's: defined only for data held in a GPU buffer (so
        ``hasattr`` answers False for a host or CPU array)."""
        raise AttributeError(_NO_CUDA_INTERFACE)

    def delete(self) -> None:
        """Free this Array's data; any later use raises ``DeletedArrayError`` (as in JAX)."""
        global buffers_deleted
        buf = getattr(self, "_buf", None)
        if buf is not None:
            buffers_deleted = True
            buf.delete()
        for slot in ("_value", "_buf"):
            try:
                delattr(self, slot)
            except AttributeError:
                pass
        # The same slots, so the class can change in place; reads of ``_value`` then raise.
        self.__class__ = _DeletedArray

    def copy(self) -> Array:
        return Array._new(self._value.copy(), self.weak_type)

    def __buffer__(self, flags: int) -> memoryview:
        """The Python buffer protocol (``memoryview(x)``; Python 3.12+, PEP 688): a read-only view of the host
        value, which stays valid after ``delete()`` (as JAX's); bfloat16 has no buffer format, as in JAX."""
        v = self._value
        if v.dtype.name == "bfloat16":
            raise BufferError("Buffers of type BF16 are not supported by the Python buffer protocol.")
        # read-only even where the NumPy value is writable (NumPy 2.5's ``np.asarray`` reads through this)
        return memoryview(v).toreadonly()

    def block_until_ready(self) -> Array:
        return self

    def copy_to_host_async(self) -> None:
        """Nothing to start: a host Array's value is on the host already."""

    def unsafe_buffer_pointer(self) -> int:
        """The address of the array's data (a host Array's NumPy data; a device-resident one's buffer)."""
        return int(self._value.ctypes.data)

    @property
    def traceback(self) -> Any:
        """Where the array's device buffer was made (JAX's ``Array.traceback``, recorded by the runtime while
        its tracebacks are enabled); None for an array held on the host, which has no buffer."""
        buf = getattr(self, "_buf", None)
        return getattr(buf, "traceback", None)

    def __bool__(self) -> bool:
        return bool(self._value)

    def _check_scalar(self) -> None:
        # JAX's rule (stricter than NumPy's): only a 0-d array becomes a Python number, a size-1 1-d one too
        if self._value.ndim != 0:
            from ftrans.errors import FtransTypeError

            raise FtransTypeError(
                f"Only scalar arrays can be converted to Python scalars; got an array of type "
                f"{self.aval.str_short()} (index it, x[0], or reduce it first)"
            )

    def __int__(self) -> int:
        self._check_scalar()
        return int(self._value)

    def __float__(self) -> float:
        self._check_scalar()
        return float(self._value)

    def __complex__(self) -> complex:
        self._check_scalar()
        return complex(self._value)

    def __index__(self) -> int:
        # (the type first, from a device array's abstract value: only an integer scalar is fetched)
        if self.ndim != 0 or not dtypes.is_int(self.dtype):  # JAX's rule: bools are no index
            from ftrans.errors import FtransTypeError

            raise FtransTypeError(
                f"Only integer scalar arrays can be converted to a scalar index; got {self.aval.str_short()}"
            )
        return self._value.__index__()

    def __len__(self) -> int:
        shape = self.shape  # (a device array's from its type: no fetch to the host)
        if not shape:
            from ftrans.errors import FtransTypeError

            raise FtransTypeError("len() of unsized object (a 0-d array)")
        return shape[0]

    def __iter__(self):
        if self._value.ndim == 0:
            from ftrans.errors import FtransTypeError

            raise FtransTypeError("iteration over a 0-d array")
        weak = self.weak_type
        return (Array._new(row, weak) for row in self._value)

    def __hash__(self):
        raise TypeError("unhashable type: 'Array' (use a tuple, or x.item() for a scalar)")

    def __reduce__(self):
        return (_rebuild, (self._value, self.weak_type))

    def __format__(self, spec: str) -> str:
        if self._value.ndim == 0:
            return format(self._value.item(), spec)
        return format(str(self), spec)

    def __repr__(self) -> str:
        v = self._value
        body = np.array2string(v, separator=", ", prefix="Array(")
        if v.size == 0:
            body = f"[], shape={v.shape}"
        weak = ", weak_type=True" if self.weak_type else ""
        return f"Array({body}, dtype={v.dtype.name}{weak})"

    def __str__(self) -> str:
        return str(self._value)

    # -- devices (host-only until the XLA runtime lands) ----------------------
    # A host array is not committed to a device: computations may place it anywhere, as JAX's
    # default-placed arrays.
    _committed = False

    @property
    def committed(self) -> bool:
        """Whether the array is pinned to its devices (JAX's ``Array.committed``): placed there explicitly
        (``device_put`` with a device or sharding, ``pmap``) or computed from operands that were; an
        uncommitted array may be moved to where a computation's committed operands are."""
        return bool(self._committed)

    def devices(self) -> set:
        return {self.device}

    @property
    def device(self):
        # made inside ``with default_device(d)``: d, as JAX's arrays placed there (uncommitted)
        d = self.__dict__.get("_dev")
        if d is not None:
            return d
        # else the default backend's first device, where a computation would place it, as JAX's
        # default-placed arrays (the host CPU device unless the runtime registered another)
        return _unplaced_device()

    @property
    def sharding(self) -> Any:
        from ftrans.core.sharding import SingleDeviceSharding

        return SingleDeviceSharding(self.device)

    @property
    def is_fully_addressable(self) -> bool:
        return True

    @property
    def addressable_shards(self) -> list:
        """This process's blocks of the array; one array on one device is one block: itself, whole."""
        return [Shard(self.device, tuple(slice(None) for _ in self.shape), self, 0)]

    def addressable_data(self, index: int) -> Array:
        """The data of this process's ``index``-th block (``addressable_shards[index].data``)."""
        return self.addressable_shards[index].data

    @property
    def _arrays(self) -> list | None:
        """The single-device Arrays holding this process's blocks, in device order (JAX's ``_arrays``);
        None once the array is deleted."""
        if self.is_deleted():
            return None
        return [s.data for s in self.addressable_shards]

    @property
    def _npy_value(self) -> np.ndarray | None:
        """The host copy of the value if one was made already, else None (JAX's ``_npy_value``)."""
        try:
            return Array._value.__get__(self, type(self))  # the slot itself: never fetches
        except AttributeError:
            return None

    def _check_if_deleted(self) -> None:
        """Raises ``DeletedArrayError`` (a RuntimeError) if the array was deleted or donated (JAX's method)."""
        if self.is_deleted():
            self._value  # noqa: B018 - the deleted array's own error, saying how it went

    def is_ready(self) -> bool:
        """Whether the array's value has been computed (never blocks); a host Array's always has."""
        return True

    def _fully_replicated_shard(self) -> Array:
        """One device's whole copy of a fully replicated array (JAX's method)."""
        if not self.is_fully_replicated:
            from ftrans.errors import FtransValueError

            raise FtransValueError(f"_fully_replicated_shard: the array is laid out as {self.sharding}, which "
                                   "is not fully replicated")
        return self.addressable_shards[0].data

    @property
    def global_shards(self) -> list:
        """Every block of the array, on every process's devices (JAX's ``global_shards``); an array on one
        device is one block: itself, whole."""
        return self.addressable_shards

    def on_device_size_in_bytes(self) -> int:
        """The bytes the array's data takes on its devices, all blocks together (JAX's
        ``on_device_size_in_bytes``); a host Array's data is its NumPy buffer."""
        return int(self._value.nbytes)

    @property
    def is_fully_replicated(self) -> bool:
        return self.sharding.is_fully_replicated

    @property
    def format(self) -> Any:
        """The array's layout (XLA's default, row-major and untiled, unless a program or ``device_put`` laid it
        out otherwise: see ``laid_out``) and sharding."""
        from ftrans.core.layout import Format, default_layout

        lay = self.__dict__.get("_laid_layout")
        if lay is not None and lay.tiling is None:  # read back from the buffer, as JAX's: untiled is ``()``
            lay = lay.update(tiling=())
        return Format(default_layout(len(self.shape)) if lay is None else lay, self.sharding)


class _LazyHostArray(Array):
    """An Array whose data lives in device memory (``_device_buffer()``), fetched to the host only on demand.

    The host copy (``_value``) is made when something needs it (printing,
    NumPy conversion, an eager NumPy-rule operation) and is then kept; the
    ``__getattr__`` hook runs only while the slot is still empty, so reading a
    fetched value costs the same as for a host Array. Until then ``shape``,
    ``dtype`` and friends answer from the abstract value without waiting for
    the computation.
    """

    __slots__ = ("_aval",)
    _deleted_how = "deleted with .delete()"

    def is_ready(self) -> bool:
        """Whether the device computation producing the value has finished (never blocks)."""
        return bool(self._device_buffer().is_ready())

    def __iter__(self):
        # As JAX's: the rows of an array pinned to a device, or replicated over several, stay where it is;
        # an uncommitted array's (or a split one's) come through the host, on the default device.
        if not self._aval.shape or not self._committed or (type(self) is ShardedArray
                                                            and not self.is_fully_replicated):
            return Array.__iter__(self)
        return (self[i] for i in range(self._aval.shape[0]))

    def __getattr__(self, name: str) -> Any:
        if name != "_value":
            if name == "_dt":  # the host value's dtype (the eager operators' test), noted once
                v = self._dt = self._value.dtype
                return v
            if (name == "_buf" or name == "_sharded") and "_laid" in self.__dict__:
                # laid out in another layout than the default: every other path gets a copy in the default one
                d = self.__dict__
                v = d["_to_default"](d["_laid"])
                setattr(self, name, v)
                return v
            # (reached also when a property raised AttributeError: keep its message for this one)
            raise AttributeError(_NO_CUDA_INTERFACE if name == "__cuda_array_interface__" else name)
        buf = self._device_buffer()
        if buf.is_deleted():
            raise self._deleted_error()
        v = np.asarray(buf)
        if v.flags.writeable:
            v.flags.writeable = False
        self._value = v
        return v

    def _deleted_error(self) -> Exception:
        from ftrans.errors import DeletedArrayError

        return DeletedArrayError(
            f"Array has been deleted with shape={self._aval.dtype.name}[{','.join(map(str, self._aval.shape))}]: "
            f"it was {self._deleted_how}, and its "
            "buffer may have been reused; use the outputs of the call it was donated to instead, or stop "
            "donating it"
        )

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    @property
    def shape(self) -> tuple[int, ...]:
        return self._aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._aval.dtype

    @property
    def ndim(self) -> int:
        return len(self._aval.shape)

    @property
    def size(self) -> int:
        return self._aval.size

    @property
    def nbytes(self) -> int:
        return self._aval.size * self._aval.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._aval.dtype.itemsize


class DeviceArray(_LazyHostArray):
    """An Array whose data lives in a device buffer (an output of a compiled program).

    The host copy (``_value``) is made only when something needs it (printing,
    NumPy conversion, an eager NumPy-rule operation) and is then kept; the
    ``__getattr__`` hook runs only while the slot is still empty, so reading a
    fetched value costs the same as for a host Array.  Until then ``shape``,
    ``dtype`` and friends answer from the abstract value without waiting for
    the computation.  Dispatch is asynchronous: the buffer may still be being
    computed.
    """

    # ``_commit``: placed on its device explicitly (``device_put`` with a device, an operation on committed
    # operands), as JAX's committed arrays; see ``_committed``.
    __slots__ = ("_commit",)
    # ``DeviceArray()`` makes an empty one, filled in by its maker (jit's output paths): made in C, without
    # ``object.__new__``'s checks (about 50 ns less per result). Arguments are a TypeError, as before.
    __init__ = object.__init__
    _deleted_how = ("donated (to a jitted function through donate_argnums/donate_argnames, or to "
                    "device_put(donate=True)) or deleted with .delete()")

    @property
    def _committed(self) -> bool:
        """Whether the array is pinned to its device (JAX's committed arrays): an explicit placement, or
        any device other than the default one (only a committed operand puts a result there). Computations
        run where their committed operands are; uncommitted ones may be moved."""
        try:
            if self._commit:
                return True
        except AttributeError:  # made without ``device_array`` (a compiled call's fast output path)
            pass
        return self._sig[3] != default_device_id()

    def _device_buffer(self) -> Any:
        return self._buf

    @property
    def __cuda_array_interface__(self) -> dict:
        """NVIDIA's CUDA array interface of the device buffer (only a GPU buffer has one)."""
        if self._buf.platform() != "gpu":
            raise AttributeError(_NO_CUDA_INTERFACE)
        return self._buf.__cuda_array_interface__

    def unsafe_buffer_pointer(self) -> int:
        """The device buffer's address (JAX's ``Array.unsafe_buffer_pointer``)."""
        return int(self._buf.unsafe_buffer_pointer())

    def on_device_size_in_bytes(self) -> int:
        return int(self._buf.on_device_size_in_bytes())

    def block_until_ready(self) -> DeviceArray:
        buf = self._buf
        if not buf.is_deleted():
            buf.block_until_ready()
        return self

    def is_deleted(self) -> bool:
        d = self.__dict__
        return (d["_laid"] if "_laid" in d else self._buf).is_deleted()

    def delete(self) -> None:
        global buffers_deleted
        buffers_deleted = True
        if not _delete_laid_out(self, Array._buf):
            self._buf.delete()
        try:
            del self._value
        except AttributeError:
            pass

    def devices(self) -> set:
        return set(self._buf.devices())

    @property
    def device(self):
        try:
            return next(iter(self._buf.devices()))
        except RuntimeError:  # (the runtime's error for a deleted buffer: ftrans's, which says why it was)
            if self._buf.is_deleted():
                raise self._deleted_error() from None
            raise

    def copy_to_host_async(self) -> None:
        self._buf.copy_to_host_async()

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """Export the device buffer through DLPack (no copy unless asked for), as a jax.Array does."""
        buf = self._buf
        if buf.is_deleted():
            self._value  # raises DeletedArrayError  # noqa: B018
        return buf.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._buf.__dlpack_device__()

    def __reduce__(self):
        return (_rebuild, (self._value, self.weak_type))


class _DeletedArray(Array):
    """A host Array after ``.delete()``: its shape and dtype are gone with its data."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name not in ("_value", "_buf"):
            raise AttributeError(name)
        from ftrans.errors import DeletedArrayError

        raise DeletedArrayError(
            "Array has been deleted: it was deleted with .delete() and can no longer be used; keep a copy "
            "(x.copy()) if you need the values after deleting it"
        )

    def is_deleted(self) -> bool:
        return True

    def delete(self) -> None:
        pass

    def __repr__(self) -> str:
        return "Array(<deleted>)"


class _DonatedArray(_DeletedArray):
    """A host Array after it was donated to a jitted function: gone, as a donated device Array is."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name not in ("_value", "_buf"):
            raise AttributeError(name)
        from ftrans.errors import DeletedArrayError

        raise DeletedArrayError(
            "Array has been deleted: it was donated to a jitted function (donate_argnums/donate_argnames), "
            "and its buffer may have been reused; use the outputs of the call it was donated to instead, or "
            "stop donating it"
        )



def mark_donated(x: Array) -> None:
    """A host Array donated to a compiled call: drop its data and device copy, so any later use raises."""
    for slot in ("_value", "_buf"):
        try:
            delattr(x, slot)
        except AttributeError:
            pass
    x.__class__ = _DonatedArray


# Set once any device buffer has been deleted (donation, ``Array.delete``): until
# then jit's call path skips checking its arguments' buffers for deletion.
buffers_deleted = False


_device_keys: dict = {}


def device_key(dev: Any) -> int:
    """A device's number in array signatures (``_sig[3]``) and compiled-program caches: its id on the CPU,
    ``-1 - id`` on an accelerator. Device ids are per platform (on a GPU machine cpu:0 and cuda:0 are both
    0), so the id alone would let a program compiled for one take the other's buffers."""
    k = _device_keys.get(dev)
    if k is None:
        k = _device_keys[dev] = dev.id if dev.platform == "cpu" else -1 - dev.id
    return k


def default_device_id() -> int:
    """The id of the device unplaced values go to; the runtime (``ftrans.devices``) registers the answer
    with ``set_default_device_id``, as it registers its buffer type."""
    return _default_device_id()


_default_device_id: Any = lambda: 0  # noqa: E731 - replaced by the runtime at import


# Whether a ``default_device`` context is open (set by the runtime): host arrays made meanwhile remember
# ``_placement()``, the device it names, as the device they report.
placing = False
_placement: Any = lambda: None  # noqa: E731 - replaced by the runtime at import


def _host_device() -> Any:
    from ftrans.core.host import host_device

    return host_device()


# The device an unplaced host Array reports: the default backend's first device (registered by the runtime).
_unplaced_device: Any = _host_device


def set_unplaced_device(fn: Any) -> None:
    global _unplaced_device
    _unplaced_device = fn


def set_placement(active: bool, fn: Any = None) -> None:
    global placing, _placement
    placing = active
    if fn is not None:
        _placement = fn


def set_default_device_id(fn: Any) -> None:
    global _default_device_id
    _default_device_id = fn


def device_array(buf: Any, aval: ShapedArray, sig: tuple) -> DeviceArray:
    """Wrap a device buffer produced for ``aval`` (the caller guarantees they agree)."""
    out = object.__new__(DeviceArray)
    out._buf = buf
    out._aval = aval
    out._sig = sig
    out.weak_type = aval.weak_type
    out._commit = False
    return out


# The runtime's device-buffer type (jax's Array), registered by ``ftrans.lowering.compat`` so that core
# can take a jax.Array as an operand without a copy (core never imports jax).
buffer_type: type | None = None

_NOT_ARRAYS = (str, bytes, list, tuple, dict, set, type)


def is_foreign_array(x: Any) -> bool:
    """A jax.Array, an object that offers its data through ``__array__`` or ``__dlpack__``, or a
    scalar of a subclass of int/float/complex (an ``enum.IntEnum`` member: JAX reads it as the
    builtin scalar)."""
    if type(x) is buffer_type:
        return True
    if isinstance(x, (Array, np.ndarray, np.generic, *_NOT_ARRAYS)):
        return False
    if isinstance(x, (int, float, complex)):
        return dtypes.python_scalar_base(x) is not None
    return hasattr(x, "__array__") or hasattr(x, "__dlpack__") or hasattr(x, "__jax_array__")


def jax_array_argument(x: Any) -> bool:
    """An object that is not an array but stands for one through ``__jax_array__`` (and is not a pytree
    node): JAX refuses it as an argument of a transformation (``jit``, ``grad``, ``vmap``, ``device_put``,
    ...), while primitives and ``jnp`` functions take it as an operand."""
    if isinstance(x, (Array, np.ndarray, np.generic)):
        return False
    return getattr(x, "__jax_array__", None) is not None


def jax_array_argument_error(where: str) -> Exception:
    """The error for a ``__jax_array__`` object given where JAX abstracts an argument (see above)."""
    from ftrans.errors import FtransValueError

    return FtransValueError(
        f"{where}: Triggering __jax_array__() during abstractification is no longer supported (as in JAX). Convert "
        "the object explicitly with jnp.asarray(), or register its type as a pytree")


def from_foreign(x: Any, copy: bool | None = None) -> Array | None:
    """An ftrans Array holding a foreign array's data, or None if ``x`` is not one.

    A jax.Array on one device whose dtype is already canonical is wrapped as it
    is: its buffer becomes the DeviceArray's buffer (no copy; both are
    immutable), keeping its weak type, unless ``copy`` is True. Anything else is
    read through ``__array__`` (or ``np.from_dlpack``) and copied, since its
    memory may change under us.
    """
    if type(x) is buffer_type and not copy and not x.is_deleted():
        devs = x.devices()
        dt = x.dtype
        if len(devs) == 1 and dtypes.canonicalize(dt) == dt:
            dev = next(iter(devs))
            aval = ShapedArray(tuple(x.shape), dt, bool(getattr(x, "weak_type", False)))
            return device_array(x, aval, (aval.shape, aval.dtype, aval.weak_type, device_key(dev)))
    if not is_foreign_array(x):
        return None
    v = dtypes.python_scalar_base(x)
    if v is not None:  # an IntEnum member and the like: the weakly typed scalar it extends
        return Array._new(np.asarray(v, dtypes.python_scalar_dtype(v)), True)
    conv = getattr(x, "__jax_array__", None)
    if conv is not None:  # JAX's protocol: the object names the array it stands for
        r = conv()
        if isinstance(r, Array) or (hasattr(r, "aval") and hasattr(r, "weak_type")):
            return r  # an Array, or a traced value of the enclosing transform
        if isinstance(r, (np.ndarray, np.generic)):  # NumPy data: copied (its memory may change), canonical dtype
            return Array._new(np.array(r, dtypes.canonicalize(r.dtype)), False)
        if type(r) in (bool, int, float, complex):
            return Array._new(np.asarray(r, dtypes.python_scalar_dtype(r)), type(r) is not bool)
        return from_foreign(r, copy)
    if hasattr(x, "__array__"):
        arr = np.asarray(x)
    else:
        try:
            arr = np.from_dlpack(x)
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            from ftrans.errors import FtransTypeError

            raise FtransTypeError(
                f"cannot read a {type(x).__name__} through DLPack: {e}. Convert it to a NumPy array first"
            ) from None
    if arr.dtype == object:
        return None
    weak = type(x) is buffer_type and bool(getattr(x, "weak_type", False))
    return Array._make(arr, weak)  # copies: the foreign memory may change under us


def _rebuild(value: np.ndarray, weak: bool) -> Array:
    return Array._make(value, weak)


# The fast operators' globals (see ``install_fast_operators``).
# Whether a buffer on an accelerator (GPU, TPU) was made in this process: until then a device array's
# operators need not ask where its buffer is (on a CPU-only machine every buffer is host memory).
_accelerator_buffers = False


def note_accelerator_buffers() -> None:
    """An accelerator buffer exists: device arrays' operators check where theirs is from now on."""
    global _accelerator_buffers
    _accelerator_buffers = True


_tr: Any = None  # ftrans.core.trace, once the operators are installed
# ``Array`` while ``trace.eager_everywhere`` holds, else None (kept so by ``trace._count_active``).
_eager_array: Any = None
_ndarray = np.ndarray
_asarray = np.asarray
# Dtype classes (a class test costs a third of reading ``dtype.kind``): NumPy's float types, which keep their
# dtype beside a weak Python scalar.
_FLOAT_KINDS = frozenset(type(np.dtype(c)) for c in (np.float16, np.float32, np.float64))
_BOOL = np.dtype(bool)


def _narrow_loops_agree(wide: Any, impl: Any) -> bool:
    """Whether NumPy's (ml_dtypes') own loops for the 2- and 4-bit integers give, on every pair of values,
    what ``impl`` (the rule run through int8/uint8) gives: then a fast operator may call ``wide`` on them."""
    try:
        with np.errstate(all="ignore"):
            for d in dtypes.NARROW_INTS:
                info = dtypes.iinfo(d)
                vals = np.arange(int(info.min), int(info.max) + 1)
                a = np.repeat(vals, len(vals)).astype(d)
                b = np.tile(vals, len(vals)).astype(d)
                got, want = wide(a, b), impl(a, b)
                if got.dtype != want.dtype or not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
                    return False
    except Exception:  # no loop, or one that fails: the operator keeps the wrapper
        return False
    return True


def stays_on_device(x: DeviceArray) -> bool:
    """Whether operations on a device array run where its buffer is: it is committed to its device, or its
    buffer is an accelerator's memory (a jit output on a GPU), which the host would have to copy and wait for.
    (Else it is an uncommitted CPU buffer, which NumPy reads in place.)"""
    return x._committed or x.device.platform != "cpu"


def _host_memory(x: Any) -> bool:
    """Whether an uncommitted device array's buffer is host memory (a CPU buffer, read without a copy): then
    a fast operator may compute on it with NumPy, as on a host Array (a jit output on the CPU, say)."""
    return not x._committed and not (_accelerator_buffers and x.device.platform != "cpu")


def install_fast_operators(fallbacks: dict[str, Any]) -> None:
    """Give ``Array`` operator slots that skip the API layer in the common eager case.

    ``x + y`` on two Arrays of one dtype with no transform active anywhere is
    just the primitive's NumPy rule (NumPy's broadcasting is jnp's), and so is
    ``x * 2.0`` (or ``2.0 * x``) on a float array, where the weak Python scalar
    leaves the dtype alone in both libraries; this path is what keeps a small
    eager op within a small factor of NumPy.  Anything else (other dtypes,
    integer arrays with scalars, tracing) goes to the ``jnp`` function.
    ``fallbacks`` maps a slot name to (primitive, jnp function).
    """
    global _tr, _eager_array
    from ftrans.core import trace as _tr
    if not any(g is globals() for g in _tr._eager_mirrors):
        _tr._eager_mirrors.append(globals())
    _eager_array = Array if _tr.eager_everywhere else None
    from ftrans.core.primitive import _all_weak

    def make(prim, slow, reflected=False):
        impl = prim.impl
        # The NumPy rule without the narrow-integer wrapper (a Python frame, a third of the op's overhead). The
        # wrapper converts int2/int4 operands through int8; where NumPy's own loops for them give the same
        # results (checked here on every pair of values), the operator calls the rule for every dtype.
        wide = getattr(impl, "wide_rule", impl)
        if wide is not impl and not _narrow_loops_agree(wide, impl):
            wide = impl
        keep_weak = prim.weak_type_rule is _all_weak
        # Whether a result has its operands' dtype (arithmetic) or is bool (comparisons), asked of the rule.
        probe = np.ones(2, np.float32)
        res_dt = wide(probe, probe).dtype
        if res_dt != probe.dtype and res_dt != _BOOL:
            raise AssertionError(f"fast operator for {prim.name}: a {res_dt} result from float32 operands")
        keeps_dtype = res_dt == probe.dtype

        # (NumPy's objects and the trace module are module globals here, not closure cells: each cell is
        # copied into the frame of every call.)
        def op(self, other):
            # ``_eager_array`` is ``Array`` while no transform or debug check is active anywhere, else None:
            # one identity test answers both "eager?" and "another Array?".
            if type(other) is _eager_array or (type(other) is DeviceArray and _eager_array is not None
                                               and _host_memory(other)):
                try:
                    d = self._dt
                    same = d is other._dt
                except AttributeError:  # an Array whose maker did not note its dtype: read from the values
                    d = self._value.dtype
                    same = d is other._value.dtype
                if same:
                    try:
                        r = wide(self._value, other._value)
                    except (ValueError, RuntimeWarning):
                        # shapes that do not broadcast (the API path explains), or NumPy's overflow
                        # warning made an error by a user's filter (the API path computes quietly)
                        return slow(self, other)
                    out = Array()
                    out._value = r if type(r) is _ndarray else _asarray(r)  # 0-d operands give NumPy scalars
                    out._dt = d if keeps_dtype else _BOOL
                    # (an operand's own weak type first: almost always False, which decides alone)
                    out.weak_type = self.weak_type and other.weak_type and keep_weak
                    return out
            elif (((t := type(other)) is float or (t is int and -2147483648 <= other <= 2147483647))
                  and _eager_array is not None and not self.weak_type):
                # (a weak array joins the scalar on the lattice's weak side: the general path decides)
                try:
                    d = self._dt
                except AttributeError:
                    d = self._value.dtype
                if type(d) in _FLOAT_KINDS:
                    xv = self._value
                    # A Python float, or an int that fits int32, beside a float16/32/64 array: the scalar is
                    # weak, so the result keeps the array's dtype, which is NumPy's (NEP 50) promotion for these
                    # operands too. (Computed here, not in a helper: a Python call is a tenth of the op.)
                    try:
                        r = wide(xv, other)
                    except RuntimeWarning:  # a user's warnings filter made NumPy's overflow warning an error
                        return slow(self, other)
                    out = Array()
                    out._value = r if type(r) is _ndarray else _asarray(r)
                    out._dt = d if keeps_dtype else _BOOL
                    out.weak_type = False
                    return out
            return slow(self, other)

        def rop(self, other):  # reflected: only the scalar case (an Array on the left took its own slot)
            if _eager_array is not None:
                t = type(other)
                if (t is float or (t is int and -2147483648 <= other <= 2147483647)) and not self.weak_type:
                    try:
                        d = self._dt
                    except AttributeError:
                        d = self._value.dtype
                    if type(d) in _FLOAT_KINDS:  # (as in ``op``)
                        try:
                            r = wide(other, self._value)
                        except RuntimeWarning:
                            return slow(self, other)
                        out = Array()
                        out._value = r if type(r) is _ndarray else _asarray(r)
                        out._dt = d if keeps_dtype else _BOOL
                        out.weak_type = False
                        return out
            return slow(self, other)

        if reflected:
            op = rop
        op.__name__ = slow.__name__
        return op

    def pinned(fast, slow):
        # A committed device array's result stays where it is (the API path sends the primitive to the
        # device backend), as JAX's does: only an uncommitted one may take the host fast path, and only
        # when its buffer is host memory: an accelerator-resident one (a jit output on a GPU) would be
        # copied to the host for NumPy, where the device computes it in place.
        def op(self, other):
            if self._committed or (_accelerator_buffers and self.device.platform != "cpu"):
                return slow(self, other)
            return fast(self, other)

        op.__name__ = slow.__name__
        return op

    for slot, (prim, slow) in fallbacks.items():
        fast = make(prim, slow, reflected=slot.startswith("__r"))
        setattr(Array, slot, fast)
        setattr(DeviceArray, slot, pinned(fast, slow))
        setattr(ShardedArray, slot, slow)  # spread over devices: never gathered to the host for an operation



def _delete_laid_out(arr: Any, slot: Any) -> bool:
    """Delete the buffers of an array that carries a layout (``_laid``) and of its default-layout copy in
    ``slot``, if one was made; False where the array carries no layout (the caller deletes its buffer)."""
    laid = arr.__dict__.get("_laid")
    if laid is None:
        return False
    laid.delete()
    try:
        copy = slot.__get__(arr)
    except AttributeError:
        copy = None
    if copy is not None:
        copy.delete()
    return True

class Shard:
    """One addressable piece of a sharded Array: its device, its index into the whole, its data."""

    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device: Any, index: tuple, data: Array, replica_id: int = 0):
        self.device = device
        self.index = index
        self.data = data
        self.replica_id = replica_id

    def __repr__(self) -> str:
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id}, data={self.data})"


class ShardedArray(_LazyHostArray):
    """An Array spread over several devices (a ``pmap`` result): ``_sharded`` is the runtime's multi-device buffer.

    Its host value is gathered from the shards only when something needs it
    (printing, NumPy conversion, an eager operation), as JAX does; passed to a
    ``pmap`` that splits it the same way, its shards are used where they are.
    """

    __slots__ = ("_sharded",)
    _committed = True  # laid out over its devices explicitly (pmap, device_put with a sharding)
    _deleted_how = ("donated (to a pmapped or jitted function through donate_argnums) or deleted with "
                    ".delete()")

    def _device_buffer(self) -> Any:
        return self._sharded

    def _unreduced_repr(self) -> str | None:
        """JAX's form for an array unreduced over mesh axes (it has no value until they are added)."""
        sh = self.sharding
        if not getattr(getattr(sh, "spec", None), "unreduced", None):
            return None
        weak = ", weak_type=True" if self._aval.weak_type else ""
        return f"Array(shape={tuple(self._aval.shape)}, dtype={self._aval.dtype.name}{weak}, sharding={sh})"

    def __repr__(self) -> str:
        return self._unreduced_repr() or _LazyHostArray.__repr__(self)

    def __str__(self) -> str:
        return self._unreduced_repr() or _LazyHostArray.__str__(self)

    def __format__(self, spec: str) -> str:
        return self._unreduced_repr() or _LazyHostArray.__format__(self, spec)

    def __getattr__(self, name: str) -> Any:
        if name == "_sig":  # computed once, on first use (see ``sharded_sig``)
            sig = self._sig = sharded_sig(self._aval, self._sharded.sharding)
            return sig
        return _LazyHostArray.__getattr__(self, name)

    @property
    def sharding(self) -> Any:
        from ftrans.core.sharding import from_runtime

        d = self.__dict__
        if "_loose" in d:
            return d["_loose"]
        return from_runtime((d["_laid"] if "_laid" in d else self._sharded).sharding)

    @property
    def addressable_shards(self) -> list:
        out = []
        seen: dict = {}
        # JAX's unreduced axes: the runtime has no index map for them (each device holds a partial sum of the
        # block its partitions give it)
        sh = self.sharding
        unreduced = getattr(getattr(sh, "spec", None), "unreduced", None)
        indices = sh.devices_indices_map(self._aval.shape) if unreduced else None
        for s in self._sharded.addressable_shards:
            index = indices[s.device] if unreduced else s.index
            key = str(index)
            rid = seen.get(key, 0)
            seen[key] = rid + 1
            data = s.data
            sub = ShapedArray(tuple(data.shape), self._aval.dtype, self._aval.weak_type)
            out.append(Shard(s.device, index, device_array(data, sub, (sub.shape, sub.dtype, sub.weak_type,
                                                                          s.device.id)), rid))
        return out

    @property
    def global_shards(self) -> list:
        """Every block, on every process's devices: another process's block has no data (``None``)."""
        mine = {(s.device.id, str(s.index)): s for s in self.addressable_shards}
        out = []
        for s in self._sharded.global_shards:
            shard = mine.get((s.device.id, str(s.index)))
            out.append(shard if shard is not None else Shard(s.device, s.index, None, s.replica_id))
        return out

    def on_device_size_in_bytes(self) -> int:
        return int(self._sharded.on_device_size_in_bytes())

    def devices(self) -> set:
        return set(self._sharded.devices())

    @property
    def is_fully_addressable(self) -> bool:
        return bool(self._sharded.is_fully_addressable)

    @property
    def device(self) -> Any:
        return self.sharding

    def block_until_ready(self) -> ShardedArray:
        buf = self._sharded
        if not buf.is_deleted():
            buf.block_until_ready()
        return self

    def is_deleted(self) -> bool:
        d = self.__dict__
        return (d["_laid"] if "_laid" in d else self._sharded).is_deleted()

    def delete(self) -> None:
        global buffers_deleted
        buffers_deleted = True
        if not _delete_laid_out(self, ShardedArray._sharded):
            self._sharded.delete()
        try:
            del self._value
        except AttributeError:
            pass

    def copy_to_host_async(self) -> None:
        self._sharded.copy_to_host_async()

    def __reduce__(self):
        return (_rebuild, (self._value, self.weak_type))


# The last item of a ShardedArray's ``_sig``: a 5-tuple never equals a single-device Array's 4-tuple signature.
_SHARDED_SIG = "sharded"


def sharded_sig(aval: ShapedArray, runtime_sharding: Any) -> tuple:
    """A ShardedArray's ``_sig``, the per-argument part of sharded ``jit``'s fast key: shape, dtype, weak
    type and the *identity* of its buffer's runtime sharding (hashing the sharding would run Python code
    per argument).  The buffer keeps that sharding alive as long as the Array lives, so two live Arrays
    with the same id in their signatures have the very same layout object."""
    return (aval.shape, aval.dtype, aval.weak_type, id(runtime_sharding), _SHARDED_SIG)


# Called once, when the first multi-device Array is made: the runtime then installs its eager device
# backend, which runs operations on such arrays as sharded programs; until then a host-only program
# pays nothing for that check.  Set by ``ftrans.transforms.sharded_eager``.
on_first_sharded_array: Any = None


def sharded_array(buf: Any, aval: ShapedArray) -> ShardedArray:
    """Wrap a multi-device buffer holding ``aval`` (the caller guarantees they agree)."""
    global on_first_sharded_array
    if on_first_sharded_array is not None:
        hook, on_first_sharded_array = on_first_sharded_array, None
        hook()
    out = object.__new__(ShardedArray)
    out._sharded = buf
    if aval.typed_sharding is None:  # laid out over Explicit mesh axes: its aval has the sharding type
        from ftrans.core.sharding import from_runtime
        from ftrans.core.sharding_rules import typed_aval

        aval = typed_aval(aval, from_runtime(buf.sharding))
    out._aval = aval
    out.weak_type = aval.weak_type
    return out


def loosen(arr: Any) -> Any:
    """``arr`` (a result the mesh in context placed, from operands none of which had a layout of its own) left
    untyped when it is replicated: its ``.sharding`` is the mesh's, as JAX's, but the sharding-in-types rules take
    it as they take a host value (JAX computes such intermediates inside one traced function, where the layouts
    they meet decide theirs; ftrans's eager functions make them one operation at a time)."""
    if type(arr) is not ShardedArray or "_laid" in arr.__dict__:
        return arr
    from ftrans.core.sharding import NamedSharding

    sh = arr.sharding
    if type(sh) is not NamedSharding or sh.spec.unreduced or sh.spec.reduced or any(e is not None for e in sh.spec):
        return arr
    loose = NamedSharding(sh.mesh, sh.spec, memory_kind=sh.memory_kind)
    loose._loose = True
    arr.__dict__["_loose"] = loose
    a = arr._aval
    arr._aval = ShapedArray(a.shape, a.dtype, a.weak_type)
    return arr


def laid_out(arr: _LazyHostArray, buf: Any, layout: Any, to_default: Any) -> _LazyHostArray:
    """Make ``arr`` (a device Array just made on ``buf``) hold ``buf`` laid out in ``layout``, not XLA's default
    (a program compiled for another layout made it, or ``device_put`` with a ``Format``): ``.format`` reports
    it and a program compiled for it takes ``buf`` as it is; every other path reads the array's buffer slot,
    which then holds a copy in the default layout, made on first use by ``to_default(buf)``."""
    d = arr.__dict__
    d["_laid"] = buf
    d["_laid_layout"] = layout
    d["_to_default"] = to_default
    for slot in ("_sharded", "_buf"):
        try:
            delattr(arr, slot)
        except AttributeError:
            pass
    return arr


def _key_array_type() -> type:
    from ftrans.core.keys import PRNGKeyArray  # keys sit above arrays: imported when first asked

    return PRNGKeyArray


class _PublicArrayMeta(type):
    """The metaclass of the public ``ftrans.Array``: like ``jax.Array``, it is the type of every array
    value a user's code sees, concrete or traced."""

    def __instancecheck__(cls, x: Any) -> bool:
        if isinstance(x, Array):
            return True
        # A typed key array (``random.key``), concrete or traced: JAX's key arrays are jax.Array instances.
        if type(x).__name__ == "PRNGKeyArray" and isinstance(x, _key_array_type()):
            return True
        # A tracer of an array (not of a ref or a token): JAX's tracers are jax.Array instances too.
        return isinstance(x, ArrayMixin) and isinstance(getattr(x, "aval", None), ShapedArray)

    def __subclasscheck__(cls, sub: type) -> bool:
        # Tracer classes are not subclasses, as in JAX; the key array class is (JAX's PRNGKeyArray is).
        return isinstance(sub, type) and (sub is cls or issubclass(sub, Array) or sub is _key_array_type())

    def __getattr__(cls, name: str) -> Any:
        return getattr(Array, name)  # the methods and properties of concrete arrays, for introspection


class PublicArray(metaclass=_PublicArrayMeta):
    """``ftrans.Array`` (``ftrans.numpy.ndarray``), JAX's ``jax.Array``: the type of arrays for isinstance
    checks and annotations. Concrete arrays and the traced values a function sees under ``jit``, ``grad``
    or ``vmap`` are all instances; arrays are made with ``jnp.array`` / ``jnp.asarray``, never by calling
    the type."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from ftrans.errors import FtransTypeError

        raise FtransTypeError("ftrans.Array (jnp.ndarray) cannot be instantiated directly; create arrays with "
                              "jnp.array or jnp.asarray")


PublicArray.__name__ = PublicArray.__qualname__ = "Array"
PublicArray.__module__ = "ftrans"


# ``array_garbage_collection_guard="log"``: report arrays the garbage collector frees (part of, or reachable
# only from, a reference cycle) rather than reference counting, as JAX does. ``Array.__del__`` exists only
# while some thread has "log" set, so arrays pay nothing for the guard otherwise.
_gc_collecting = False


def _on_gc_phase(phase: str, info: dict) -> None:
    global _gc_collecting
    _gc_collecting = phase == "start"


def _report_gc_deleted(self: Array) -> None:
    if not _gc_collecting or _config.config.array_garbage_collection_guard != "log":
        return
    try:
        what = f"{self.dtype.name}{list(self.shape)}"
    except Exception:  # noqa: BLE001 -- a deleted or donated array: its type is all there is to say
        what = type(self).__name__
    stream = sys.__stderr__  # the process's stderr, where JAX's (native) report goes too
    if stream is None:
        return
    stream.write(f"RuntimeError: `jax.Array` was deleted by the Python garbage collector instead of by reference "
                 f"counting: an ftrans array {what} was part of, or reachable only from, a reference cycle. Break "
                 f"the cycle so that the array is freed as soon as it is no longer used.\n")
    stream.flush()


def _update_gc_guard(name: str, *_: Any) -> None:
    if name != "array_garbage_collection_guard":
        return
    on = "log" in _config.config.values_anywhere(name)
    if on and "__del__" not in Array.__dict__:
        Array.__del__ = _report_gc_deleted
        gc.callbacks.append(_on_gc_phase)
    elif not on and "__del__" in Array.__dict__:
        del Array.__del__
        gc.callbacks.remove(_on_gc_phase)


_config.config._listeners.append(_update_gc_guard)
_config.scope_listeners.append(_update_gc_guard)
_update_gc_guard("array_garbage_collection_guard")
