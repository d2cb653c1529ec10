"""JAX's ``jax.experimental.multihost_utils``: moving host values between the processes of one program.

Every function works in a single process (where it is a conversion to NumPy or
the identity, exactly as in JAX) and across the processes joined by
``ftrans.distributed.initialize``, where the exchange is a sharded ``jit`` over
the mesh ``(processes, local_devices)`` of all devices: XLA does the
communication; ftrans writes no transport of its own.

* ``broadcast_one_to_all(tree, is_source=None)``: every process gets the
  source's values (process 0 by default), as NumPy arrays.
* ``process_allgather(tree, tiled=False)``: each process's values, stacked
  (or concatenated with ``tiled=True``) in process order, as NumPy arrays.
* ``sync_global_devices(name)``: a barrier; every process must pass the same name.
* ``assert_equal(tree, fail_message='')``: raises ``AssertionError`` unless every
  process holds the same values.
* ``host_local_array_to_global_array(local, global_mesh, pspecs)`` and
  ``global_array_to_host_local_array(global, global_mesh, pspecs)``: between a
  process's part of the data (its box of the global array, on its own devices)
  and the global Array laid out as ``NamedSharding(global_mesh, pspec)``.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["broadcast_one_to_all", "sync_global_devices", "process_allgather", "assert_equal",
           "host_local_array_to_global_array", "global_array_to_host_local_array",
           "reached_preemption_sync_point"]


def _process_count() -> int:
    from ftrans.devices import process_count

    return process_count()


def _fully_addressable(x: Any) -> bool:
    buf = getattr(x, "_sharded", None)
    return True if buf is None else bool(getattr(buf, "is_fully_addressable", True))


def _process_mesh() -> Any:
    """All devices as a ``(processes, local_devices)`` mesh, one row per process."""
    from ftrans.devices import devices, local_device_count, process_count
    from ftrans.sharding import Mesh

    devs = sorted(devices(), key=lambda d: (d.process_index, d.id))
    arr = np.empty(len(devs), dtype=object)
    arr[:] = devs
    return Mesh(arr.reshape(process_count(), local_device_count()), ("processes", "local_devices"))


def _host(x: Any) -> np.ndarray:
    from ftrans.devices import device_get

    return np.asarray(device_get(x))


def _stacked_global(x: np.ndarray, mesh: Any) -> Any:
    """The global ``(processes, *x.shape)`` Array whose row ``p`` is process ``p``'s ``x``."""
    from ftrans.distributed import make_array_from_callback
    from ftrans.sharding import NamedSharding, P

    return make_array_from_callback((mesh.devices.shape[0], *x.shape), NamedSharding(mesh, P("processes")),
                                    lambda idx: x[None])


def _replicated_on_host(fn: Any, arr: Any, mesh: Any) -> np.ndarray:
    """``fn(arr)`` as a jit whose result is replicated on every device; this process's copy as NumPy."""
    from ftrans import jit
    from ftrans.sharding import NamedSharding, P

    out = jit(fn, out_shardings=NamedSharding(mesh, P()))(arr)
    return np.asarray(out.addressable_shards[0].data)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """``in_tree`` (a pytree of arrays of the same shapes in every process) as the source process holds it:
    process 0's by default, or the one passing ``is_source=True``. Leaves come back as NumPy arrays."""
    if _process_count() == 1:
        return tree_util.tree_map(np.asarray, in_tree)
    from ftrans.devices import process_index

    if is_source is None:
        is_source = process_index() == 0
    mesh = _process_mesh()

    def one(x: Any) -> np.ndarray:
        h = _host(x)
        return _replicated_on_host(lambda a: a.sum(axis=0, dtype=a.dtype),
                                   _stacked_global(h if is_source else np.zeros_like(h), mesh), mesh)

    return tree_util.tree_map(one, in_tree)


def _allgather_leaf(x: Any, tiled: bool) -> np.ndarray:
    if not _fully_addressable(x):
        if not tiled:
            raise FtransValueError("Gathering global non-fully-addressable arrays only supports tiled=True")
        return _replicated_on_host(lambda a: a, x, x.sharding.mesh)
    h = _host(x)
    if _process_count() == 1:
        return h if tiled else h[None]
    mesh = _process_mesh()
    if h.ndim == 0:  # a scalar is stacked: one entry per process
        h = h[None]
        tiled = True
    out = _replicated_on_host(lambda a: a, _stacked_global(h, mesh), mesh)
    return out.reshape(-1, *h.shape[1:]) if tiled else out


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Every process's ``in_tree`` leaves, stacked along a new leading axis in process order (concatenated
    along axis 0 with ``tiled=True``; a scalar is always stacked). A global Array that spans processes comes
    back whole (``tiled=True`` only). Leaves come back as NumPy arrays."""
    return tree_util.tree_map(lambda x: _allgather_leaf(x, tiled), in_tree)


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Raise ``AssertionError`` (with ``fail_message``) unless every process holds the same ``in_tree``."""
    n = _process_count()

    def expected(x: Any) -> np.ndarray:
        if not _fully_addressable(x):
            return np.asarray(x.addressable_shards[0].data)
        h = _host(x)
        if h.ndim == 0:
            h = h[None]
        return np.concatenate([h] * n)

    got = process_allgather(in_tree, tiled=True)
    want = tree_util.tree_map(expected, in_tree)
    same = tree_util.tree_map(lambda a, b: bool(np.all(np.equal(a, b))), want, got)
    if not all(tree_util.tree_leaves(same)):
        raise AssertionError(f"{fail_message}. Expected: {got}; got: {in_tree}.")


def sync_global_devices(name: str) -> None:
    """A barrier across all processes; each must call it with the same ``name`` (else ``AssertionError``)."""
    h = np.uint32(zlib.crc32(name.encode()))
    assert_equal(h, f"sync_global_devices name mismatch ('{name}')")


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether all processes reached the step at which a preempted job should checkpoint.  ftrans starts no
    preemption service, so this is ``False`` (JAX's answer without a distributed client)."""
    del step_id
    return False


# ----------------------------------------------------------------------------
# Host-local <-> global arrays


def _flatten_specs(what: str, tree: Any, pspecs: Any) -> list:
    """One PartitionSpec per leaf of ``tree``: ``pspecs`` is a tree prefix of it (a single spec for all)."""
    from ftrans.core.sharding import PartitionSpec, as_spec

    def is_leaf(s: Any) -> bool:
        return s is None or isinstance(as_spec(s), PartitionSpec)

    leaves, treedef = tree_util.tree_flatten(tree)
    try:
        specs = treedef.flatten_up_to(tree_util.tree_map(lambda s: _Spec(s), pspecs, is_leaf=is_leaf)) \
            if not is_leaf(pspecs) else [_Spec(pspecs)] * len(leaves)
    except ValueError as e:
        raise FtransValueError(f"{what}: the pspecs {pspecs!r} are not a tree prefix of the arrays' structure "
                               f"{treedef}: {e}") from None
    out = []
    for s in specs:
        spec = s.spec if isinstance(s, _Spec) else s
        if spec is None:
            raise FtransValueError(
                "`None` is not a valid input to the pspecs argument. Please use "
                "jax.sharding.PartitionSpec() if you wanted to replicate your input.")
        out.append(as_spec(spec))
    return out


class _Spec:
    """A spec held as one leaf (a PartitionSpec is itself a tuple, so a tree would look into it)."""

    __slots__ = ("spec",)

    def __init__(self, spec: Any):
        self.spec = spec


def _process_box(mesh: Any) -> tuple[tuple, tuple]:
    """Where this process's devices sit in ``mesh``: per mesh axis, (first index, count)."""
    from ftrans.devices import process_index

    me = process_index()
    pos = np.argwhere(np.vectorize(lambda d: d.process_index == me, otypes=[bool])(mesh.devices))
    if len(pos) == 0:
        raise FtransValueError(f"the mesh {mesh} has none of this process's devices")
    lo, hi = pos.min(axis=0), pos.max(axis=0) + 1
    if int(np.prod(hi - lo)) != len(pos):
        raise FtransValueError(
            f"the mesh {mesh} is not contiguous: this process's devices do not form a sub-box of it; use "
            "make_array_from_callback or make_array_from_single_device_arrays for such meshes")
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo)


def _scales(mesh: Any, spec: Any, ndim: int) -> tuple[list[int], list[int]]:
    """For each array dimension: how many process boxes it spans globally, and this process's box index."""
    lo, count = _process_box(mesh)
    names = list(mesh.axis_names)
    sizes = mesh.devices.shape
    factor, index = [], []
    for d in range(ndim):
        e = spec[d] if d < len(spec) else None
        axes = (e,) if isinstance(e, str) else (e if isinstance(e, tuple) else ())
        f, i = 1, 0
        for a in axes:  # the first named axis is the major one
            k = names.index(a)
            blocks = sizes[k] // count[k]
            f *= blocks
            i = i * blocks + lo[k] // count[k]
        factor.append(f)
        index.append(i)
    return factor, index


def _traced(what: str, x: Any) -> Any:
    """Inside a transform, in one process, local and global values are the same program value."""
    if _process_count() != 1:
        raise NotImplementedError(f"{what} of a traced value across {_process_count()} processes: convert the "
                                  "arrays before calling the jitted or transformed function")
    return x


def _check_mesh(what: str, mesh: Any) -> Any:
    from ftrans.core.sharding import Mesh, as_mesh

    m = as_mesh(mesh)
    if not isinstance(m, Mesh):
        raise FtransTypeError(f"{what}: global_mesh must be a Mesh, got {type(mesh).__name__}")
    return m


def _local_to_global(x: Any, mesh: Any, spec: Any) -> Any:
    from ftrans.core.sharding import NamedSharding, check_spec
    from ftrans.distributed import make_array_from_callback

    if not _fully_addressable(x):
        return x
    if isinstance(x, Tracer):
        return _traced("host_local_array_to_global_array", x)
    local = _host(x)
    check_spec(spec, mesh, "host_local_array_to_global_array", local.ndim, local.shape)
    factor, index = _scales(mesh, spec, local.ndim)
    gshape = tuple(n * f for n, f in zip(local.shape, factor))
    offsets = [n * i for n, i in zip(local.shape, index)]

    def block(idx: tuple) -> np.ndarray:
        return local[tuple(slice(s.indices(g)[0] - o, s.indices(g)[1] - o)
                           for s, g, o in zip(idx, gshape, offsets))]

    return make_array_from_callback(gshape, NamedSharding(mesh, spec), block)


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Any, pspecs: Any) -> Any:
    """Global Arrays laid out as ``NamedSharding(global_mesh, pspec)`` from each process's local part: along a
    dimension split over mesh axes that span ``k`` process boxes, the global size is ``k`` times the local one
    and this process's data fills its box; a dimension not split over processes is the same everywhere.
    The mesh must be contiguous (each process's devices form a sub-box). In one process this lays the values
    out on the mesh."""
    mesh = _check_mesh("host_local_array_to_global_array", global_mesh)
    leaves, treedef = tree_util.tree_flatten(local_inputs)
    specs = _flatten_specs("host_local_array_to_global_array", local_inputs, pspecs)
    return tree_util.tree_unflatten(treedef, [_local_to_global(x, mesh, s) for x, s in zip(leaves, specs)])


def _global_to_local(x: Any, mesh: Any, spec: Any) -> Any:
    from ftrans.core.sharding import NamedSharding, check_spec
    from ftrans.devices import device_put

    if isinstance(x, Tracer):
        return _traced("global_array_to_host_local_array", x)
    if _fully_addressable(x):
        return x
    check_spec(spec, mesh, "global_array_to_host_local_array", len(x.shape), x.shape)
    want = NamedSharding(mesh, spec)
    if x.sharding != want:
        x = device_put(x, want)
    factor, index = _scales(mesh, spec, len(x.shape))
    lshape = tuple(n // f for n, f in zip(x.shape, factor))
    offsets = [n * i for n, i in zip(lshape, index)]
    local = np.zeros(lshape, dtype=x.dtype)
    for s in x.addressable_shards:
        box = tuple(slice(sl.indices(g)[0] - o, sl.indices(g)[1] - o) for sl, g, o in zip(s.index, x.shape, offsets))
        local[box] = np.asarray(s.data)
    lo, count = _process_box(mesh)
    sub = mesh.devices[tuple(slice(a, a + c) for a, c in zip(lo, count))]
    from ftrans.sharding import Mesh

    return device_put(local, NamedSharding(Mesh(sub, mesh.axis_names, mesh.axis_types), spec))


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Any, pspecs: Any) -> Any:
    """This process's part of global Arrays laid out as ``NamedSharding(global_mesh, pspec)``: the box its devices
    hold, as an Array over its own devices (the inverse of ``host_local_array_to_global_array``). An Array all
    of whose devices belong to this process (always, in one process) is returned as it is."""
    mesh = _check_mesh("global_array_to_host_local_array", global_mesh)
    leaves, treedef = tree_util.tree_flatten(global_inputs)
    specs = _flatten_specs("global_array_to_host_local_array", global_inputs, pspecs)
    return tree_util.tree_unflatten(treedef, [_global_to_local(x, mesh, s) for x, s in zip(leaves, specs)])
