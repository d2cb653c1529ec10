"""``shard_map`` inside a partitioned program: Shardy's ``sdy.manual_computation``.

The region takes each device's blocks (``in_shardings`` say how the global
operands are cut), calls the body, and returns each device's result blocks
(``out_shardings`` say how they are put together); every mesh axis is manual
inside.  While the body is lowered the module's ``replica_axes`` are the mesh
axes, so collectives compute their device groups over the mesh (partition ids,
``use_global_device_ids``).  A stacked value (``None`` names) has a leading
axis of one block per device: the region drops it on the way in and adds it on
the way out.  The eager impl runs the equation as a partitioned program.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.shard_map import local_aval, shard_map_p, stack_axes
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, LoweringError, register_lowering


def _dims(names: Any, ndim: int, mesh: Any, open_dims: bool = False, manual: Any = None) -> str:
    """The per-dimension axes of a block layout; ``open_dims`` (a partially manual body): each dimension
    open (``?``), so the partitioner may split it further over the automatic axes, as JAX's."""
    if names is None:  # stacked: the leading axis over every (manual) mesh axis
        names = (stack_axes(mesh, manual),) + ((),) * (ndim - 1)
    tail = ["?"] if open_dims else []
    return "[" + ", ".join("{" + ", ".join([f'"{a}"' for a in ax] + tail) + "}" for ax in names) + "]"


@register_lowering(shard_map_p)
def _shard_map_lowering(ctx: LoweringContext, *args: str, jaxpr: Any, mesh: Any, in_names: tuple,
                        out_names: tuple, name: str, newly_manual_axes: Any = None, **_: Any) -> list[str]:
    m = ctx.module
    sym = m.mesh_symbol(mesh)
    if sym is None:
        raise LoweringError(f"shard_map {name} (from {ctx.eqn.source_info}) reached a single-device program")
    from ftrans.core.sharding import AxisType

    manual_axes = [a for a in mesh.axis_names if newly_manual_axes is None or a in newly_manual_axes]
    prev = getattr(m, "auto_axes", None)  # inside an enclosing partially manual body: the axes it left automatic
    auto = [a for a in (prev[1] if prev else mesh.axis_names) if a not in manual_axes]
    # partially manual with Auto axes left: every dimension open, the Explicit axes a layout does not use
    # replicated (JAX's)
    part = len(manual_axes) < len(mesh.axis_names) and any(
        t == AxisType.Auto for a, t in zip(mesh.axis_names, mesh.axis_types) if a in auto)

    def attr(ns: Any, ndim: int) -> str:
        rep = ""
        if part and ns is not None:
            used = {a for ax in ns for a in ax}
            reps = [a for a, t in zip(mesh.axis_names, mesh.axis_types)
                    if t == AxisType.Explicit and a not in used and a in auto]
            rep = ", replicated={" + ", ".join(f'"{a}"' for a in reps) + "}" if reps else ""
        ur = getattr(ns, "unreduced", None)  # out_specs' unreduced axes: the blocks are partial sums there
        if ur:
            rep += ", unreduced={" + ", ".join(f'"{a}"' for a in mesh.axis_names if a in ur) + "}"
        return f"<@{sym}, {_dims(ns, ndim, mesh, part, manual_axes)}{rep}>"

    ins_attr = ", ".join(attr(ns, len(a.shape)) for ns, a in zip(in_names, ctx.avals_in))
    outs_attr = ", ".join(attr(ns, len(a.shape)) for ns, a in zip(out_names, ctx.avals_out))
    manual = ", ".join(f'"{a}"' for a in manual_axes)
    block_types = [mt.aval_type(local_aval(a, ns, mesh) if ns is not None else a.update(shape=(1, *a.shape[1:])))
                   for a, ns in zip(ctx.avals_in, in_names)]
    out_block_types = []
    for b, ns in zip(jaxpr.out_avals, out_names):
        out_block_types.append(mt.aval_type(b if ns is not None else b.update(shape=(1, *b.shape))))

    def body(f: mt.FuncEmitter, bargs: list[str]) -> list[str]:
        ins = []
        for x, ns, b in zip(bargs, in_names, jaxpr.in_avals):
            ins.append(x if ns is not None else f.emit("stablehlo.reshape", [x], [mt.aval_type(b)])[0])
        # the body's operations in the manual computation's region, as JAX's Shardy lowering inlines them
        saved = list(m.replica_axes)
        m.replica_axes[:] = [(n, s) for n, s in zip(mesh.axis_names, mesh.devices.shape)]
        saved_auto = getattr(m, "auto_axes", None)
        # the axes a partially manual body leaves automatic (axis_index there enters a manual computation over
        # them)
        m.auto_axes = (sym, tuple(auto))
        try:
            from ftrans.core.prims.shard_map import _body_env

            with _body_env({"mesh": mesh}):
                outs = m.inline(f, jaxpr.jaxpr, ins, "")
        finally:
            m.replica_axes[:] = saved
            m.auto_axes = saved_auto
        res = []
        for o, ns, t in zip(outs, out_names, out_block_types):
            res.append(o if ns is not None else f.emit("stablehlo.reshape", [o], [t])[0])
        return res

    if mesh.size == 1:  # each block is the whole value: the body is called in place, as JAX inlines it
        return body(ctx.fn, list(args))
    region = _region(ctx.fn, block_types, body)
    attrs = {"in_shardings": f"#sdy.sharding_per_value<[{ins_attr}]>",
             "out_shardings": f"#sdy.sharding_per_value<[{outs_attr}]>",
             "manual_axes": f"#sdy<manual_axes{{{manual}}}>"}
    return ctx.emit("sdy.manual_computation", list(args), [mt.aval_type(a) for a in ctx.avals_out], attrs, [region])


def _region(fn: mt.FuncEmitter, arg_types: list, body: Any) -> str:
    inner = mt.FuncEmitter(fn.counter, fn.indent + "  ", fn.types)
    inner.location = fn.location
    args = [inner.argument(t) for t in arg_types]
    results = body(inner, args)
    inner.emit("sdy.return", results, [])
    head = ", ".join(f"{a}: {t}" for a, t in zip(args, arg_types))
    return f"{{\n{fn.indent}  ^bb0({head}):\n" + "\n".join(inner.lines) + f"\n{fn.indent}}}"


@shard_map_p.def_impl
def _shard_map_impl(*vals: Any, jaxpr: Any, mesh: Any, **params: Any) -> list:
    """A shard_map applied to concrete values: run the one equation as a partitioned program."""
    from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var  # noqa: F401
    from ftrans.core.trace import aval_of, stage
    from ftrans.lowering.spmd import SpmdExecutable

    avals = [aval_of(v) for v in vals]

    def one(*xs: Any) -> list:
        return shard_map_p.bind(*xs, jaxpr=jaxpr, mesh=mesh, **params)

    closed, _ = stage(one, avals)
    exe = SpmdExecutable(closed, params.get("name", "shard_map"), mesh, [None] * len(vals), [None] * len(
        closed.out_avals))
    return exe.run(list(vals))
