"""Lowering of ``sharding_constraint`` (and of ``device_put`` to a NamedSharding) to Shardy's
``sdy.sharding_constraint`` (identity when unpartitioned)."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import device_put_p, shard_alike_p, sharding_constraint_p
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.sdy import sharding_attr, type_sharding_attr


@register_lowering(sharding_constraint_p)
def _constraint(ctx: LoweringContext, x: str, *, sharding: Any, unconstrained_dims: Any = None) -> str:
    sym = ctx.module.mesh_symbol(sharding.mesh)
    if sym is None:  # a single-device program: nothing to partition
        return x
    ndim = len(ctx.avals_in[0].shape)
    kinds = dict(zip(sharding.mesh.axis_names, (t.name for t in sharding.mesh.axis_types)))
    if sharding._type_cast and not (sharding.spec.unreduced or sharding.spec.reduced) and all(
            kinds.get(a) != "Auto" for a in sharding.spec.axes()):
        # a reshard or mesh cast: JAX lowers the result's sharding type, which over Auto axes leaves the
        # partitioner free (nothing at all when every axis is Auto). (ftrans's reshard naming Auto axes, which
        # JAX refuses, lays the value out as asked: docs/differences.md.)
        types = set(kinds.values())
        if types == {"Auto"}:
            return x
        out = ctx.avals_out[0].typed_sharding
        if "Auto" in types and out is not None and out.mesh == sharding.mesh:
            return ctx.emit1("sdy.sharding_constraint", [x], None,
                             {"sharding": type_sharding_attr(sym, out.spec, ndim, out.mesh)})
    if sharding.spec.unreduced:
        # To JAX's unreduced axes from a value that is not unreduced over them: the value is pinned to its own
        # layout first (replicated when it has no type), so Shardy casts it (one device keeps it, the others
        # zeros) instead of moving the unreduced layout onto the operation that computed it.
        src = ctx.avals_in[0].typed_sharding
        if src is None or src.spec.unreduced != sharding.spec.unreduced:
            pin = src.spec if src is not None else ()
            attr = sharding_attr(sym, pin, ndim, sharding.mesh.axis_names)
            x = ctx.emit1("sdy.sharding_constraint", [x], None, {"sharding": attr})
    attr = sharding_attr(sym, sharding.spec, ndim, sharding.mesh.axis_names)
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


@register_lowering(device_put_p)
def _device_put(ctx: LoweringContext, *xs: str, devices: tuple, srcs: tuple, copy_semantics: tuple) -> list:
    """A NamedSharding target is a sharding annotation in a partitioned program (as ``sharding_constraint``);
    a Device target, or none, is the identity: the program's own placement decides where values live, as
    in JAX."""
    from ftrans.core.sharding import NamedSharding

    out = []
    for x, d, aval in zip(xs, devices, ctx.avals_in):
        sym = ctx.module.mesh_symbol(d.mesh) if isinstance(d, NamedSharding) else None
        if sym is None:
            out.append(x)
            continue
        attr = sharding_attr(sym, d.spec, len(aval.shape), d.mesh.axis_names)
        out.append(ctx.emit1("sdy.sharding_constraint", [x], mt.aval_type(aval), {"sharding": attr}))
    return out
