"""Batching ``shard_map`` (``vmap`` of a shard_mapped function): the batch dimension is never split.

Batched operands get their batch dimension at 0 and an unsplit entry there in
their layout; the body is batched with its outputs batched at 0, and every
result gets the unsplit leading entry too.  A stacked value (``None`` names:
one block per device along a leading axis, the residuals of a differentiated
shard_map) keeps that axis first: its batch dimension goes second, which is
the body's first, and a stacked result comes out batched along its second axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.ir import hoist_consts
from ftrans.core.prims.shard_map import _body_env, shard_map_p
from ftrans.transforms.batching import batch_jaxpr, batching_rules, moveaxis, not_mapped


def _shard_map_batch(vals: list, dims: list, *, frame: Any, jaxpr: Any, mesh: Any, in_names: tuple,
                     out_names: tuple, **params: Any) -> tuple[list, list]:
    new_vals, body_dims, new_in = [], [], []
    for v, d, ns in zip(vals, dims, in_names):
        if d is not_mapped:
            new_vals.append(v)
            body_dims.append(not_mapped)
            new_in.append(ns)
        elif ns is None:  # stacked: (devices, batch, ...) outside is (batch, ...) in the body
            new_vals.append(moveaxis(v, d, 1))
            body_dims.append(0)
            new_in.append(None)
        else:
            new_vals.append(moveaxis(v, d, 0))
            body_dims.append(0)
            new_in.append(((),) + tuple(ns))
    with _body_env({"mesh": mesh}):
        new, _ = batch_jaxpr(jaxpr, body_dims, frame, force_front=True)
    body, consts = hoist_consts(new)
    outs = shard_map_p.bind(*consts, *new_vals, jaxpr=body, mesh=mesh,
                            in_names=tuple(((),) * len(np.shape(c)) for c in consts)
                            + tuple(new_in),
                            out_names=tuple(None if ns is None else ((),) + tuple(ns) for ns in out_names),
                            **params)
    return outs, [1 if ns is None else 0 for ns in out_names]


batching_rules[shard_map_p] = _shard_map_batch
