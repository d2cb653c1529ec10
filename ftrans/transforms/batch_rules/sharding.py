"""Batching rule of ``sharding_constraint``: the batch dimension is not split."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import shard_alike_p, sharding_constraint_p
from ftrans.core.sharding import NamedSharding, PartitionSpec
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import not_mapped, register_batching


@register_batching(sharding_constraint_p)
def _constraint_batch(vals: list, dims: list, *, frame: Any, sharding: Any) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if d is not_mapped:
        return sharding_constraint_p.bind(x, sharding=sharding), not_mapped
    nd = len(aval_of(x).shape)
    entries = list(sharding.spec) + [None] * (nd - 1 - len(sharding.spec))
    entries.insert(d, None)
    return sharding_constraint_p.bind(x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*entries))), d


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
