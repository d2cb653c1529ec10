"""JAX's ``jax.experimental.mesh_utils``: arranging devices into an n-dimensional array for a ``Mesh``.

``create_device_mesh(mesh_shape, devices=None)`` returns a NumPy array of
devices of shape ``mesh_shape``, ready for ``ftrans.sharding.Mesh``.  On CPU
(and on any platform without a topology of its own) the devices keep the order
they are given in, as JAX does; on GPU they are ordered by id, as JAX does.
On TPU ftrans has no model of the physical torus: the devices are ordered by
their ``coords`` and core (row-major), which is a valid mesh but not the
torus-aware placement JAX's handlers compute (docs/differences.md).

``create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None)`` groups
the devices by slice (``slice_index``) or, with ``process_is_granule=True``, by
process, builds one ``mesh_shape`` mesh per group, and tiles the groups in a
``dcn_mesh_shape`` grid: the result has shape ``mesh_shape * dcn_mesh_shape``
elementwise.

``device_kind_handler_dict`` maps a ``device_kind`` to a function
``handler(mesh_shape, devices, contiguous_submeshes=...)`` returning a device
array (or ``None`` to fall back); a user may register one, as in JAX.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.errors import FtransValueError

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

device_kind_handler_dict: dict[str, Callable[..., np.ndarray | None]] = {}


def _as_sizes(mesh_shape: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(s) for s in mesh_shape)
    except (TypeError, ValueError):
        return None


def _object_array(devices: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(devices), dtype=object)
    out[:] = list(devices)
    return out


def _tpu_order(devices: Sequence[Any]) -> list:
    """TPU devices in the row-major order of their chip coordinates (z, y, x), then core on chip."""
    def key(d: Any) -> tuple:
        coords = tuple(getattr(d, "coords", ()) or ())
        return (*reversed(coords), getattr(d, "core_on_chip", 0), d.id)

    if all(hasattr(d, "coords") for d in devices):
        return sorted(devices, key=key)
    return list(devices)


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False, allow_split_physical_axes: bool = False) -> np.ndarray:
    """A NumPy array of shape ``mesh_shape`` of ``devices`` (default: ``ftrans.devices()``), for
    ``ftrans.sharding.Mesh``.  The number of devices must equal the product of ``mesh_shape``.

    ``contiguous_submeshes`` and ``allow_split_physical_axes`` only matter on TPU in JAX (where they steer the
    torus placement); they are accepted everywhere and do not change the order ftrans gives.
    """
    if devices is None:
        from ftrans.devices import devices as all_devices

        devices = all_devices()
    devices = list(devices)
    shape = _as_sizes(mesh_shape)
    if shape is None:
        raise FtransValueError(
            f"`mesh_shape` passed to `create_device_mesh` should be a sequence of ints. Got {mesh_shape}")
    if math.prod(shape) != len(devices):
        raise FtransValueError(f"Number of devices {len(devices)} must equal the product of mesh_shape {shape}")
    if not devices:
        return np.empty(shape, dtype=object)
    last = devices[-1]
    handler = device_kind_handler_dict.get(getattr(last, "device_kind", None))
    if handler is not None:
        result = handler(shape, devices, contiguous_submeshes=contiguous_submeshes)
        if result is not None:
            return result
    platform = getattr(last, "platform", "cpu")
    if platform == "gpu" or platform in ("cuda", "rocm"):
        devices = sorted(devices, key=lambda d: d.id)
    elif platform == "tpu":
        devices = _tpu_order(devices)
    return _object_array(devices).reshape(shape)


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *, process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A device array for two-level parallelism: ``mesh_shape`` over the devices of one granule (a slice, or
    with ``process_is_granule=True`` a process) and ``dcn_mesh_shape`` over the granules.  The result has shape
    ``mesh_shape[i] * dcn_mesh_shape[i]`` in each dimension; granule ``g`` (in the row-major order of
    ``dcn_mesh_shape``) fills the block at its position."""
    if devices is None:
        from ftrans.devices import devices as all_devices

        devices = all_devices()
    devices = list(devices)
    attr = "process_index" if process_is_granule else "slice_index"
    if not devices or not hasattr(devices[0], attr):
        first = devices[0] if devices else "(no devices)"
        raise FtransValueError(f"Device {first} does not have attribute {attr}. See `process_is_granule` option.")
    groups: dict[Any, list] = {}
    for d in devices:
        groups.setdefault(getattr(d, attr), []).append(d)
    keys = sorted(groups) if should_sort_granules_by_key else list(groups)
    granules = [groups[k] for k in keys]
    dcn = _as_sizes(dcn_mesh_shape)
    if dcn is None:
        raise FtransValueError(f"dcn_mesh_shape must be a sequence of ints, got {dcn_mesh_shape}")
    if math.prod(dcn) != len(granules):
        raise FtransValueError(f"Number of slices {len(granules)} must equal the product of dcn_mesh_shape {dcn}")
    inner = _as_sizes(mesh_shape)
    if inner is None or len(inner) != len(dcn):
        raise FtransValueError(f"mesh_shape {mesh_shape} and dcn_mesh_shape {dcn_mesh_shape} must be sequences of "
                               "ints of the same length")
    meshes = [create_device_mesh(inner, g, allow_split_physical_axes=allow_split_physical_axes) for g in granules]
    out = np.empty(tuple(a * b for a, b in zip(inner, dcn)), dtype=object)
    for g, pos in enumerate(np.ndindex(*dcn)):
        out[tuple(slice(p * s, (p + 1) * s) for p, s in zip(pos, inner))] = meshes[g]
    return out
