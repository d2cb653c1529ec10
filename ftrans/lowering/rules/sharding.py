"""Lowering of ``sharding_constraint`` to Shardy's ``sdy.sharding_constraint`` (identity when unpartitioned)."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import sharding_constraint_p
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.sdy import sharding_attr


@register_lowering(sharding_constraint_p)
def _constraint(ctx: LoweringContext, x: str, *, sharding: Any) -> str:
    sym = ctx.module.mesh_symbol(sharding.mesh)
    if sym is None:  # a single-device program: nothing to partition
        return x
    attr = sharding_attr(sym, sharding.spec, len(ctx.avals_in[0].shape))
    return ctx.emit1("sdy.sharding_constraint", [x], None, {"sharding": attr})
