"""Batching rule of ``sharding_constraint``: the batch dimension is not split."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import sharding_constraint_p
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
