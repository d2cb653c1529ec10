"""Batching rule of ``sharding_constraint``: the batch dimension is left to the partitioner (unconstrained),
unless ``vmap`` was given ``spmd_axis_name``; then it is split over those mesh axes (JAX's rule). ``shard_alike`` and ``device_put``
keep their operands' batch dimensions."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import device_put_p, shard_alike_p, sharding_constraint_p
from ftrans.core.sharding import NamedSharding, PartitionSpec
from ftrans.core.trace import aval_of
from ftrans.errors import FtransValueError
from ftrans.transforms.batching import not_mapped, register_batching


def spmd_entry(frame: Any, mesh: Any, where: str) -> Any:
    """The spec entry of a batch dimension: None (unsplit), or the ``vmap``'s ``spmd_axis_name``."""
    names = getattr(frame, "spmd_name", None)
    if names is None:
        return None
    missing = [n for n in names if n not in mesh.axis_names]
    if missing:
        raise FtransValueError(
            f"vmap spmd_axis_name={names if len(names) > 1 else names[0]!r} names mesh axes {missing} that the "
            f"mesh of {where} lacks (its axes: {tuple(mesh.axis_names)}); name axes of that mesh")
    return names[0] if len(names) == 1 else tuple(names)


@register_batching(sharding_constraint_p)
def _constraint_batch(vals: list, dims: list, *, frame: Any, sharding: Any,
                      unconstrained_dims: Any = None) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if d is not_mapped:
        return sharding_constraint_p.bind(x, sharding=sharding), not_mapped
    aval = aval_of(x)
    nd = len(aval.shape)
    entries = list(sharding.spec) + [None] * (nd - 1 - len(sharding.spec))
    entry = spmd_entry(frame, sharding.mesh, "a sharding constraint")
    if entry is not None:
        used = {a for e in entries if isinstance(e, (str, tuple)) for a in ((e,) if isinstance(e, str) else e)}
        if used & set((entry,) if isinstance(entry, str) else entry):
            names = getattr(frame, "spmd_name", None)
            raise FtransValueError(f"vmap spmd_axis_name {tuple(names)} cannot appear in with_sharding_constraint "
                                   f"spec, but got spec {sharding.spec}")
    else:
        named = {a for e in entries if isinstance(e, (str, tuple)) for a in ((e,) if isinstance(e, str) else e)}
        explicit = getattr(frame, "explicit", None)
        # the vmap maps over arguments split over these Explicit axes (JAX's explicit_mesh_axis): the batch
        # dimension stays so where the constraint does not name them itself
        mapped = (explicit[0] if len(explicit) == 1 else tuple(explicit)) if explicit and all(
            a in sharding.mesh.axis_names for a in explicit) and not named & set(explicit) else None
        if aval.typed_sharding is None:
            # JAX leaves the batch dimension unconstrained: the partitioner may split it
            entry = PartitionSpec.UNCONSTRAINED if mapped is None else mapped
        else:
            # Over Explicit axes the batch dimension keeps the layout its type gives it (JAX leaves it
            # unconstrained), where the constraint does not name that axis itself.
            own = aval.typed_sharding.spec[d] if d < len(aval.typed_sharding.spec) else None
            if own is None:
                own = mapped
            if own is not None and not named & set((own,) if isinstance(own, str) else own):
                entry = own
    entries.insert(d, entry)
    # (_open_ok: the batch dimension left to the partitioner even over a mesh without Auto axes)
    return sharding_constraint_p.bind(x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*entries),
                                                                _open_ok=True)), d


@register_batching(shard_alike_p)
def _shard_alike_batch(vals: list, dims: list, *, frame: Any) -> tuple[list, list]:
    """Both operands get the batch dimension at the same place (an unbatched one is broadcast)."""
    from ftrans.transforms.batching import bdim_at_front, moveaxis

    (x, y), (dx, dy) = vals, dims
    if dx is not_mapped and dy is not_mapped:
        return list(shard_alike_p.bind(x, y)), [not_mapped, not_mapped]
    d = dx if dx is not not_mapped else dy
    x, y = (moveaxis(bdim_at_front(v, dv, frame.size), 0, d) for v, dv in ((x, dx), (y, dy)))
    return list(shard_alike_p.bind(x, y)), [d, d]


@register_batching(device_put_p)
def _device_put_batch(vals: list, dims: list, *, frame: Any, devices: tuple, srcs: tuple,
                      copy_semantics: tuple) -> tuple[list, list]:
    """Each operand placed as it is, its batch dimension where it was (JAX's rule: a NamedSharding's spec
    then reads the batched value's dimensions, the batch dimension among them)."""
    return list(device_put_p.bind(*vals, devices=devices, srcs=srcs, copy_semantics=copy_semantics)), list(dims)
