"""Several processes, one program: JAX's ``jax.distributed`` on the PJRT distributed runtime jax ships.

``initialize(coordinator_address, num_processes, process_id)`` joins this
process to the others before anything runs on a device; process 0 hosts the
coordination service at ``coordinator_address``.  Afterwards
``ftrans.devices()`` lists every process's devices, ``ftrans.local_devices()``
this one's, ``ftrans.process_index()``/``process_count()`` say who is who, and
a mesh may span processes: each process passes its own blocks
(``make_array_from_callback`` / ``make_array_from_single_device_arrays`` /
``make_array_from_process_local_data``) and runs the same sharded ``jit``.

A coordinator that cannot be reached is an error after
``initialization_timeout`` seconds: the address is probed over TCP before the
runtime is asked to connect (the runtime itself would abort the process).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes, keys
from ftrans.core.array import sharded_array
from ftrans.core.avals import ShapedArray
from ftrans.core.sharding import NamedSharding, PartitionSpec, as_sharding, get_mesh
from ftrans.errors import DistributedInitError, FtransTypeError, FtransValueError
from ftrans.lowering import compat

__all__ = ["initialize", "shutdown", "is_initialized", "make_array_from_callback",
           "make_array_from_single_device_arrays", "make_array_from_process_local_data"]


def _wait_for(address: str, timeout_s: float) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise FtransValueError(f"distributed.initialize: coordinator_address must be 'host:port', got {address!r}")
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(2.0, max(0.1, timeout_s))):
                return
        except OSError as e:
            last = e
        if time.monotonic() >= deadline:
            raise DistributedInitError(
                f"distributed.initialize: the coordinator at {address} could not be reached within "
                f"{timeout_s:g} s ({type(last).__name__}: {last}); start process 0 (which hosts it) first, check the "
                "address and port, or raise initialization_timeout")
        time.sleep(0.2)


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: int | Sequence[int] | None = None, *,
               initialization_timeout: int = 300, **_: Any) -> None:
    """Join the processes of one program (call once per process, before any computation)."""
    if coordinator_address is None or num_processes is None or process_id is None:
        raise FtransValueError("distributed.initialize: give coordinator_address ('host:port'), num_processes and "
                               "process_id (ftrans does not detect clusters)")
    if not isinstance(num_processes, int) or num_processes < 1:
        raise FtransTypeError(f"distributed.initialize: num_processes must be a positive int, got {num_processes!r}")
    if not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise FtransValueError(f"distributed.initialize: process_id must be in [0, {num_processes}), got "
                               f"{process_id!r}")
    if compat.distributed_is_initialized():
        raise DistributedInitError(
            "distributed.initialize: this process has already joined the others; call initialize once per "
            "process, at the top of the program (ftrans.distributed.is_initialized() tells whether it ran)")
    if compat.backend_started():
        raise DistributedInitError(
            "distributed.initialize must be called before anything runs on a device (the devices of every "
            "process are fixed when the runtime starts); move the call to the top of the program")
    if process_id != 0:
        _wait_for(coordinator_address, initialization_timeout)
    if isinstance(local_device_ids, int):
        local_device_ids = [local_device_ids]
    compat.distributed_initialize(coordinator_address, num_processes, process_id, local_device_ids,
                                  initialization_timeout)


def shutdown() -> None:
    if compat.distributed_is_initialized():
        compat.distributed_shutdown()


def is_initialized() -> bool:
    return compat.distributed_is_initialized()


def _canon(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    canon = dtypes.canonicalize(arr.dtype)
    return arr.astype(canon) if arr.dtype != canon else arr


def _concrete_sharding(sharding: Any, shape: tuple) -> Any:
    """``make_array_from_callback``'s target: a sharding, or a ``Format`` (ftrans's or JAX's) with a concrete
    layout of the array's rank (or none) and a sharding, as JAX's."""
    from ftrans.core.layout import Layout
    from ftrans.core.sharding import Sharding

    if type(sharding).__name__ == "Format" and hasattr(sharding, "layout") and hasattr(sharding, "sharding"):
        lay = sharding.layout
        if lay is not None and not hasattr(lay, "major_to_minor"):
            raise FtransTypeError(
                "make_array_from_callback: `Layout.AUTO` cannot be used in place of a device-local layout when "
                f"making an array (got {sharding}): AUTO leaves the layout to jit's compiler; give a concrete "
                "Layout or None")
        if lay is not None:
            Layout(lay.major_to_minor).check_compatible_aval(shape)
        sharding = sharding.sharding
    out = as_sharding(sharding)  # a runtime (jax) sharding: as ftrans's
    if not isinstance(out, Sharding):
        raise FtransTypeError(
            "make_array_from_callback: the sharding should be an instance of `jax.sharding` (a Sharding of "
            f"ftrans.sharding or of JAX's); got {sharding!r} of type {type(sharding).__name__}")
    return out


def make_array_from_callback(shape: Sequence[int], sharding: Any, data_callback: Callable[[tuple], Any]) -> Any:
    """A global Array of ``shape`` laid out as ``sharding``; ``data_callback(index)`` gives this process's block
    at ``index`` (a tuple of slices) for each of its devices."""
    from ftrans.core.sharding import check_divisible

    shape = tuple(shape)
    sharding = _concrete_sharding(sharding, shape)
    if hasattr(sharding, "spec"):  # a NamedSharding (a single-device one has nothing to divide)
        check_divisible(sharding, shape, "make_array_from_callback")
    rt = compat.runtime_sharding(sharding, len(shape))
    idx = rt.addressable_devices_indices_map(shape)
    devs = list(idx)
    blocks = [data_callback(idx[d]) for d in devs]
    from ftrans.core.trace import Tracer

    if any(isinstance(b, Tracer) for b in blocks):
        from ftrans.errors import UnexpectedTracerError

        raise UnexpectedTracerError(
            "jax.make_array_from_callback cannot be called within a traced context: the callback returned a traced "
            "value (an argument of a jitted or transformed function); build the array outside the transformation "
            "and pass it in, or use device_put/reshard inside")
    impl = None
    if any(keys.is_key(b) for b in blocks):
        # Blocks of typed keys: the global key array is laid out as its uint32 data, whose trailing key-data
        # axes are whole on every device.
        impl = keys.check_all_keys("make_array_from_callback", blocks)
        by_device = {d: b._base_array for d, b in zip(devs, blocks)}
        shape = shape + tuple(impl.key_shape)
        rt = compat.runtime_sharding(sharding, len(shape))
        devs = list(rt.addressable_devices_indices_map(shape))
        blocks = [by_device[d] for d in devs]
    pieces = [_canon(b) for b in blocks]
    want = sharding.shard_shape(shape)
    for d, p in zip(devs, pieces):
        if tuple(p.shape) != tuple(want):
            raise FtransValueError(f"make_array_from_callback: Expected shard shape {tuple(want)} doesn't match the "
                                   f"single device array shape {tuple(p.shape)}: the callback returned a block of "
                                   f"shape {tuple(p.shape)} for index {idx[d]} on {d}, but the sharding's blocks "
                                   f"have shape {tuple(want)}")
    with compat.explicit_transfers():  # JAX's make_array_from_callback device_puts the blocks
        buf = compat.put_pieces(pieces, shape, rt, devs)
    out = sharded_array(buf, ShapedArray(shape, pieces[0].dtype, False))
    return out if impl is None else keys.wrap(impl, out)


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Any, arrays: Sequence[Any], *,
                                         dtype: Any = None) -> Any:
    """A global Array from this process's blocks, already on their devices (one per addressable device);
    ``dtype``, if given, must be the blocks' dtype (it names the result's dtype when there are no blocks)."""
    from ftrans.core.trace import Tracer

    if not isinstance(arrays, (list, tuple)):
        raise FtransTypeError("jax.make_array_from_single_device_arrays `arrays` argument must be a list or tuple, "
                              f"but got {type(arrays).__name__}: give one single-device Array per device")
    if any(isinstance(a, Tracer) for a in arrays):
        raise FtransValueError("jax.make_array_from_single_device_arrays requires a list of concrete arrays as "
                               "input, but got traced values: call it outside jit/grad/vmap")
    for a in arrays:
        n = len(getattr(a, "addressable_shards", ()) or ())
        if n != 1 and not keys.is_key(a):
            raise FtransValueError("When making an array from single-device arrays the input arrays must have one "
                                   f"shard each. An argument array had {n} shard(s).")
    if dtype is not None and arrays and any(np.dtype(a.dtype) != dtypes.canonicalize(np.dtype(dtype))
                                            for a in arrays if not keys.is_key(a)):
        raise FtransValueError("If `dtype` is provided to `jax.make_array_from_single_device_arrays`, it must match "
                               f"the dtype of the addressable shards: got dtype={np.dtype(dtype).name}, shards of "
                               f"{sorted({np.dtype(a.dtype).name for a in arrays})}")
    shape = tuple(shape)
    impl = None
    if any(keys.is_key(a) for a in arrays):
        # Blocks of typed keys: assembled as their uint32 data (the key-data axes whole on every device).
        impl = keys.check_all_keys("make_array_from_single_device_arrays", list(arrays))
        arrays = [a._base_array for a in arrays]
        shape = shape + tuple(impl.key_shape)
    rt = compat.runtime_sharding(as_sharding(sharding), len(shape))
    bufs = []
    for a in arrays:
        buf = getattr(a, "_buf", None)
        if buf is None:
            raise FtransTypeError("make_array_from_single_device_arrays: each array must be a single-device Array "
                                  f"(from ftrans.device_put(x, device)), got {type(a).__name__}")
        bufs.append(buf)
    buf = compat.assemble(shape, rt, bufs)
    out = sharded_array(buf, ShapedArray(shape, np.dtype(arrays[0].dtype), False))
    return out if impl is None else keys.wrap(impl, out)


def _broadcast_prefix(prefix: Any, full: Any, is_leaf: Callable) -> list:
    """Each leaf of ``prefix`` repeated once per leaf of ``full`` under it (JAX's ``broadcast_prefix``)."""
    from ftrans import tree_util

    p_leaves, p_def = tree_util.tree_flatten(prefix, is_leaf=is_leaf)
    try:
        subtrees = p_def.flatten_up_to(full)
    except (ValueError, TypeError) as e:
        raise FtransValueError(
            f"make_array_from_process_local_data: {prefix!r} is not a tree prefix of the local data's structure "
            f"{tree_util.tree_structure(full, is_leaf=keys.is_key)}: {e}") from None
    return [p for p, sub in zip(p_leaves, subtrees) for _ in tree_util.tree_leaves(sub, is_leaf=keys.is_key)]


def make_array_from_process_local_data(sharding: Any, local_data: Any, global_shape: Sequence[int] | None = None
                                       ) -> Any:
    """A global Array whose blocks on this process's devices come from ``local_data``, the part of the global
    array this process holds (its rows, for a batch split over processes along axis 0).

    As in JAX, ``local_data`` may be a pytree of arrays, with ``sharding`` (and ``global_shape``, whose leaves
    are shapes or None) a prefix of it: each leaf becomes a global array."""
    from ftrans import tree_util

    leaves, treedef = tree_util.tree_flatten(local_data, is_leaf=keys.is_key)
    if not tree_util.treedef_is_leaf(treedef):
        shard_flat = _broadcast_prefix(sharding, local_data, lambda x: x is None)
        shape_flat = _broadcast_prefix(global_shape, local_data, lambda x: x is None or isinstance(x, tuple))
        return tree_util.tree_unflatten(treedef, [
            make_array_from_process_local_data(s, x, g) for s, x, g in zip(shard_flat, leaves, shape_flat)])
    if keys.is_key(local_data):
        # This process's typed keys: laid out as their uint32 data, the key-data axes whole on every device.
        impl = local_data._impl
        kshape = tuple(impl.key_shape)
        data = make_array_from_process_local_data(
            sharding, local_data._base_array, None if global_shape is None else tuple(global_shape) + kshape)
        return keys.wrap(impl, data)
    local = _canon(local_data)
    nproc = len({d.process_index for d in compat.backend(None).devices()})
    if global_shape is None:
        global_shape = (local.shape[0] * nproc, *local.shape[1:])
    global_shape = tuple(global_shape)
    if hasattr(sharding, "platform") and hasattr(sharding, "id") and hasattr(sharding, "client"):
        from ftrans.core.sharding import SingleDeviceSharding

        sharding = SingleDeviceSharding(sharding)  # a Device: all of the array on it, as JAX's device_put
    sharding = as_sharding(sharding)
    if isinstance(sharding, PartitionSpec):  # over the mesh set_mesh set, as JAX's
        mesh = get_mesh()
        if mesh is None:
            raise FtransValueError(
                f"make_array_from_process_local_data: got a bare PartitionSpec {sharding!r} but no mesh is set; use "
                "NamedSharding(mesh, spec) or ftrans.set_mesh(mesh)")
        sharding = NamedSharding(mesh, sharding)
    rt = compat.runtime_sharding(sharding, len(global_shape))
    idx = rt.addressable_devices_indices_map(global_shape)
    # This process's blocks cover a contiguous box of the global array; local_data is that box.
    lo = [min(sl.indices(n)[0] for sl in (i[d] for i in idx.values())) for d, n in enumerate(global_shape)]
    hi = [max(sl.indices(n)[1] for sl in (i[d] for i in idx.values())) for d, n in enumerate(global_shape)]
    if tuple(h - lo_ for lo_, h in zip(lo, hi)) != local.shape:
        raise FtransValueError(
            f"make_array_from_process_local_data: this process's devices hold the box {tuple(zip(lo, hi))} of the "
            f"global array of shape {global_shape}, of shape {tuple(h - a for a, h in zip(lo, hi))}, but local_data "
            f"has shape {local.shape}")

    def block(index: tuple) -> np.ndarray:
        return local[tuple(slice(s.indices(n)[0] - o, s.indices(n)[1] - o) for s, n, o in zip(index, global_shape,
                                                                                                lo))]

    return make_array_from_callback(global_shape, sharding, block)
