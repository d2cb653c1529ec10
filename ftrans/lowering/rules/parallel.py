"""``pmap``'s lowering inside another pmap's program, and its eager (compiling) impl.

A top-level pmap is its own program (``ftrans/lowering/parallel.py``).  A pmap
nested in a pmap body lowers inside that program, whose replicas already
include the nested axis: each replica takes its block of the mapped operands
(a ``dynamic_slice`` at its index along the new axis), calls the body, and
all-gathers the results along their ``out_axes`` over the replicas of that
axis, so every replica ends with the whole stacked result, as the body's
caller expects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.axis_env import extend_axis_env
from ftrans.core.prims.parallel import mapped_aval, pmap_p
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, LoweringError, register_lowering
from ftrans.lowering.rules.collectives import axis_index, groups, int_matrix


class PmapInsideJitError(LoweringError, NotImplementedError):
    """A pmap lowered into a single-device module: ftrans runs pmap only as its own program (a jitted function
    that calls one runs it so; only lowering it into one module is refused)."""


@register_lowering(pmap_p)
def _pmap_lowering(ctx: LoweringContext, *args: str, jaxpr: Any, axis_name: Any, axis_size: int, in_axes: tuple,
                   out_axes: tuple, name: str, **_: Any) -> list[str]:
    m = ctx.module
    if not m.replica_axes:
        raise PmapInsideJitError(
            f"pmap {name} (from {ctx.eqn.source_info}) is inside a jitted function's single-device module: ftrans "
            "runs a pmap as a multi-device program of its own, so it cannot be lowered into one (jit(f).lower). "
            "Calling the jitted function works (its pmaps run as their own programs, the operations around "
            "them one by one); see docs/differences.md")
    m.replica_axes.append((axis_name, axis_size))
    try:
        idx = axis_index(ctx, axis_name)
        zero = ctx.scalar(0, np.int32)
        ins = []
        for x, a, ax, b in zip(args, ctx.avals_in, in_axes, jaxpr.in_avals):
            if ax is None:
                ins.append(x)
                continue
            starts = [idx if d == ax else zero for d in range(len(a.shape))]
            sizes = [1 if d == ax else n for d, n in enumerate(a.shape)]
            sl = ctx.emit1("stablehlo.dynamic_slice", [x, *starts], mt.tensor_type(sizes, a.dtype),
                           {"slice_sizes": mt.i64_array(sizes)})
            ins.append(ctx.emit1("stablehlo.reshape", [sl], mt.aval_type(b)))
        with extend_axis_env(axis_name, axis_size, None):
            sym = m.function(jaxpr.jaxpr, f"pmap_{name}")
        outs = ctx.emit("func.call", ins, [mt.aval_type(b) for b in jaxpr.out_avals], {"callee": f"@{sym}"})
        g = groups(ctx, axis_name)
        g_attr = int_matrix(g)
        results = []
        for o, b, ax, out in zip(outs, jaxpr.out_avals, out_axes, ctx.avals_out):
            if ax is None:
                results.append(o)
                continue
            unit = ctx.emit1("stablehlo.reshape", [o], mt.aval_type(mapped_aval(b, ax, 1)))
            results.append(ctx.emit1("stablehlo.all_gather", [unit], mt.aval_type(out),
                                     {"all_gather_dim": f"{ax} : i64", "replica_groups": g_attr}))
        return results
    finally:
        m.replica_axes.pop()


@pmap_p.def_impl
def _pmap_impl(*vals: Any, jaxpr: Any, **params: Any) -> list:
    """A pmap applied to concrete values (a staged pmap evaluated, or one bound by a transform): run it."""
    from ftrans.lowering.parallel import executable_for

    devices = _devices(params)
    exe = executable_for(jaxpr, params, devices)
    return [np.asarray(o) for o in exe.run(vals)]


def _devices(params: dict) -> list:
    from ftrans.devices import local_devices

    devs = params.get("devices")
    if devs is not None:
        return list(devs)
    return local_devices(backend=params.get("backend"))
