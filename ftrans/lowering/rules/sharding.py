"""Lowering of ``sharding_constraint`` to Shardy's ``sdy.sharding_constraint`` (identity when unpartitioned)."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import shard_alike_p, sharding_constraint_p
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.sdy import sharding_attr


@register_lowering(sharding_constraint_p)
def _constraint(ctx: LoweringContext, x: str, *, sharding: Any) -> str:
    sym = ctx.module.mesh_symbol(sharding.mesh)
    if sym is None:  # a single-device program: nothing to partition
        return x
    attr = sharding_attr(sym, sharding.spec, len(ctx.avals_in[0].shape))
    return ctx.emit1("sdy.sharding_constraint", [x], None, {"sharding": attr})


@register_lowering(shard_alike_p)
def _shard_alike(ctx: LoweringContext, x: str, y: str) -> list:
    """Both values join one Shardy sharding group (a fresh id per pair), so the partitioner gives them one
    layout; an unpartitioned program has nothing to lay out."""
    m = ctx.module
    if not m.meshes:
        return [x, y]
    gid = getattr(m, "_shard_groups", 0)
    m._shard_groups = gid + 1
    for v in (x, y):
        ctx.fn.emit("sdy.sharding_group", [v], [], {"group_id": f"{gid} : i64"})
    return [x, y]
