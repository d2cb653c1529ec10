"""JAX's ``jax.sharding``: meshes of devices, partition specs, and shardings built from them.

``Mesh``, ``PartitionSpec`` (``P``), ``NamedSharding``, ``SingleDeviceSharding``
and ``AxisType`` live in ``ftrans/core/sharding.py``; this module adds the
helpers that reach devices (``make_mesh``) and the current-mesh context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core.sharding import (
    AxisType,
    Mesh,
    NamedSharding,
    P,
    PartitionSpec,
    Sharding,
    SingleDeviceSharding,
    get_mesh,
    set_mesh,
    use_mesh,
)
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["AxisType", "Mesh", "NamedSharding", "P", "PartitionSpec", "Sharding", "SingleDeviceSharding",
           "make_mesh", "use_mesh", "set_mesh", "get_mesh", "get_abstract_mesh", "reshard"]


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], axis_types: Any = None, *,
              devices: Sequence[Any] | None = None) -> Mesh:
    """A mesh of ``prod(axis_shapes)`` devices (by default the first of ``ftrans.devices()``) with named axes.

    As in JAX 0.10, ``axis_types`` defaults to ``Explicit`` for every axis (see
    docs/differences.md: ftrans partitions Explicit axes as Auto ones).
    """
    from ftrans.devices import devices as all_devices

    shape = tuple(int(s) for s in axis_shapes)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(shape) != len(names):
        raise FtransValueError(f"make_mesh: {len(shape)} axis sizes {shape} but {len(names)} axis names {names}; "
                               "give one name per axis")
    devs = list(devices) if devices is not None else all_devices()
    need = int(np.prod(shape)) if shape else 1
    if need > len(devs):
        raise FtransValueError(
            f"make_mesh: a mesh of shape {dict(zip(names, shape))} needs {need} devices, but only {len(devs)} "
            f"are available ({devs[0].platform if devs else 'no'} devices); use a smaller mesh, or start the "
            f"process with XLA_FLAGS=--xla_force_host_platform_device_count={need} to split the CPU")
    if devices is not None and need != len(devs):
        raise FtransValueError(f"make_mesh: devices= lists {len(devs)} devices for a mesh of {need}; they must be "
                               "equal")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)
    elif isinstance(axis_types, AxisType):
        axis_types = (axis_types,) * len(names)
    for t in axis_types:
        if not isinstance(t, AxisType):
            raise FtransTypeError(f"make_mesh: axis_types must be AxisType values, got {t!r}")
    arr = np.empty(len(devs[:need]), dtype=object)
    arr[:] = devs[:need]
    return Mesh(arr.reshape(shape), names, tuple(axis_types))


def get_abstract_mesh() -> Mesh | None:
    """The current mesh (ftrans has no separate abstract mesh)."""
    return get_mesh()


def reshard(xs: Any, out_shardings: Any) -> Any:
    """Lay ``xs`` out as ``out_shardings`` (a sharding, a bare spec under the current mesh, or a tree of them):
    a copy between devices eagerly, a sharding constraint inside ``jit``."""
    from ftrans.lax import with_sharding_constraint

    return with_sharding_constraint(xs, out_shardings, _what="reshard")
