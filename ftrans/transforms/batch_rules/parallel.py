"""Batching ``pmap`` (``vmap`` of a pmapped function).

The generic call rule does not apply: the pmap's mapped axis and vmap's batch
dimension share the operands.  Batched operands get their batch dimension at 0,
so each mapped axis moves one place right; the body is batched with its
outputs batched at 0, and each result's mapped axis moves one place right too
(every result is then batched at 0).
"""

from __future__ import annotations

from typing import Any

from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import hoist_consts
from ftrans.core.prims.parallel import pmap_p
from ftrans.transforms.batching import batch_jaxpr, batching_rules, moveaxis, not_mapped


def _pmap_batch(vals: list, dims: list, *, frame: Any, jaxpr: Any, axis_name: Any, axis_size: int, in_axes: tuple,
                out_axes: tuple, donated_invars: tuple, **params: Any) -> tuple[list, list]:
    new_vals, body_dims, new_in = [], [], []
    for v, d, ax in zip(vals, dims, in_axes):
        if d is not_mapped:
            new_vals.append(v)
            body_dims.append(not_mapped)
            new_in.append(ax)
        else:
            new_vals.append(moveaxis(v, d, 0))
            body_dims.append(0)
            new_in.append(None if ax is None else ax + 1)
    with extend_axis_env(axis_name, axis_size, None):
        new, _ = batch_jaxpr(jaxpr, body_dims, frame, force_front=True)
    body, consts = hoist_consts(new)
    outs = pmap_p.bind(*consts, *new_vals, jaxpr=body, axis_name=axis_name, axis_size=axis_size,
                       in_axes=(None,) * len(consts) + tuple(new_in),
                       out_axes=tuple(None if ax is None else ax + 1 for ax in out_axes),
                       donated_invars=(False,) * (len(consts) + len(new_vals)), **params)
    return outs, [0] * len(outs)


batching_rules[pmap_p] = _pmap_batch
