"""Batching ``shard_map`` (``vmap`` of a shard_mapped function): the batch dimension is not split, unless
``vmap`` was given ``spmd_axis_name``.

Batched operands get their batch dimension at 0 and an unsplit entry there in
their layout (with ``spmd_axis_name``: that entry names those mesh axes, and the
body sees each device's part of the batch); the body is batched with its outputs batched at 0, and every
result gets the unsplit leading entry too.  A stacked value (``None`` names:
one block per device along a leading axis, the residuals of a differentiated
shard_map) keeps that axis first: its batch dimension goes second, which is
the body's first, and a stacked result comes out batched along its second axis.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftrans.core.axis_env import AxisFrame
from ftrans.core.config import config
from ftrans.core.ir import hoist_consts
from ftrans.core.prims.shard_map import URNames, _body_env, shard_map_p
from ftrans.errors import FtransValueError
from ftrans.transforms.batching import batch_jaxpr, batching_rules, moveaxis, not_mapped


def _spmd_split(frame: Any, mesh: Any, in_names: tuple, out_names: tuple) -> tuple[tuple, Any]:
    """The batch dimension's names in the layouts, and the frame the body is batched under."""
    spmd = frame.spmd_name
    explicit = spmd is None and bool(frame.explicit)
    if explicit:  # a vmap over Explicit-split arguments: the batch stays split over those axes (JAX's layout)
        spmd = frame.explicit
    if spmd is None:
        return (), frame
    used = {a for names in (*in_names, *out_names) if names is not None for dim in names for a in dim}
    clash = [n for n in spmd if n in used]
    if clash and not (not explicit and config.disable_vmap_shmap_error):  # (JAX's escape hatch for spmd_axis_name)
        if explicit:
            raise FtransValueError(
                f"vmapped away explicit mesh axis cannot appear in shard_map in_specs or out_specs: the vmapped "
                f"dimension is split over the Explicit mesh axes {clash}; name other axes in the specs")
        raise FtransValueError(
            f"vmap spmd_axis_name cannot appear in shard_map in_specs or out_specs: spmd_axis_name names mesh "
            f"axes {clash}, which the batch dimension is split over; name other axes in the specs")
    missing = [n for n in spmd if n not in mesh.axis_names]
    if missing:
        raise FtransValueError(f"vmap spmd_axis_name names mesh axes {missing} that the shard_map's mesh lacks "
                               f"(its axes: {tuple(mesh.axis_names)})")
    parts = math.prod(mesh.shape[n] for n in spmd)
    if frame.size % parts:
        raise FtransValueError(
            f"vmap spmd_axis_name={spmd}: the batch size {frame.size} is not divisible by the {parts} devices "
            f"along those mesh axes")
    return tuple(spmd), AxisFrame(frame.name, frame.size // parts, frame.main, frame.spmd_name, frame.explicit)


def _shard_map_batch(vals: list, dims: list, *, frame: Any, jaxpr: Any, mesh: Any, in_names: tuple,
                     out_names: tuple, **params: Any) -> tuple[list, list]:
    lead, body_frame = _spmd_split(frame, mesh, in_names, out_names)
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
            new_in.append(_batched(lead, ns))
    with _body_env({"mesh": mesh}):
        new, _ = batch_jaxpr(jaxpr, body_dims, body_frame, force_front=True)
    nm = params.get("newly_manual_axes")
    if lead and nm is not None and not set(lead) <= set(nm):  # the batch's axes are split in the blocks too
        params = {**params, "newly_manual_axes": frozenset(nm) | set(lead)}
    if params.get("check_vma"):
        new = _retyped(new, jaxpr, body_dims, lead, mesh, params)
    body, consts = hoist_consts(new)
    outs = shard_map_p.bind(*consts, *new_vals, jaxpr=body, mesh=mesh,
                            in_names=tuple(((),) * len(np.shape(c)) for c in consts)
                            + tuple(new_in),
                            out_names=tuple(None if ns is None else _batched(lead, ns) for ns in out_names),
                            **params)
    return outs, [1 if ns is None else 0 for ns in out_names]


batching_rules[shard_map_p] = _shard_map_batch


def _retyped(new: Any, jaxpr: Any, body_dims: list, lead: tuple, mesh: Any, params: dict) -> Any:
    """The batched body of a ``check_vma`` shard_map typed as JAX's (which traces the body again on the batched
    blocks): each input with its unbatched type's manual axes, and the batch's ``spmd_axis_name`` axes where it
    is batched (the devices along them hold different examples), so the programs derived from it (JVP,
    transpose) are typed as the body is."""
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.trace import stage
    from ftrans.transforms.shard_map import _with_vma

    avals = []
    for a, old, d in zip(new.in_avals, jaxpr.in_avals, body_dims):
        vma = frozenset(getattr(old, "vma", ())) | (frozenset(lead) if d is not not_mapped else frozenset())
        avals.append(_with_vma(a, vma, getattr(old, "unreduced", frozenset()), getattr(old, "reduced", frozenset())))
    if all(not getattr(a, "vma", None) for a in avals) and not any(getattr(a, "vma", None) for a in new.out_avals):
        return new
    with _body_env({"mesh": mesh, "check_vma": True, "newly_manual_axes": params.get("newly_manual_axes")}):
        typed, _ = stage(lambda *xs: eval_jaxpr(new.jaxpr, list(new.consts), *xs), avals)
    return typed


def _batched(lead: tuple, ns: tuple) -> tuple:
    """A layout's names with the batch dimension in front (its unreduced/reduced sets kept)."""
    names = (lead,) + tuple(ns)
    return URNames(names, ns.unreduced, ns.reduced) if isinstance(ns, URNames) else names
