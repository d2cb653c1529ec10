"""``shard_map``: a call-like primitive whose body is per-device code over the blocks of a mesh.

``outs = shard_map[jaxpr, mesh, in_names, out_names, check_vma, name] ins``
splits operand ``i`` into blocks as ``in_names[i]`` says (for each dimension,
the tuple of mesh axes it is split over), runs the body once per device of
``mesh`` on that device's blocks, with every mesh axis name bound (so
collectives over them talk to the other devices), and assembles result ``j``
from the devices' blocks as ``out_names[j]`` says.  A mesh axis an operand's
names do not mention gives every device along it the same block; one a
result's names do not mention must hold equal blocks (one is kept).

An entry ``None`` instead of a tuple of per-dimension names marks a value
*stacked* over the devices: one per device, along a new leading axis split
over every mesh axis (the residuals reverse mode saves between the two halves
of a differentiated body are these).

``shard_map_p`` is a :class:`~ftrans.core.prims.calls.CallPrimitive`: the JVP,
partial evaluation and transpose are the generic call rules, told by
``map_params`` how the derived calls lay out their operands; as for ``pmap``,
the transpose shares out the cotangent of a result unmapped over some axes and
sums the cotangents of an operand unmapped over some axes over those axes.
"""

from __future__ import annotations

import math
import threading
from contextlib import ExitStack
from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr
from ftrans.core.prims.calls import CallPrimitive
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["shard_map_p", "local_aval", "global_aval", "names_of_spec", "unmentioned", "stack_axes"]


def names_of_spec(spec: Any, ndim: int) -> tuple:
    """A PartitionSpec as one tuple of mesh axis names per dimension."""
    out = []
    for d in range(ndim):
        e = spec[d] if d < len(spec) else None
        out.append(() if e is None else (e,) if isinstance(e, str) else tuple(e))
    return tuple(out)


class URNames(tuple):
    """A result's per-dimension names with JAX's out_specs ``unreduced``/``reduced`` axes: the blocks are
    partial sums over the unreduced axes (left as they are), and the value is the same along the reduced ones
    (types only).  Equal to another only with the same sets."""

    def __new__(cls, names: Any, unreduced: Any = frozenset(), reduced: Any = frozenset()) -> URNames:
        self = super().__new__(cls, names)
        self.unreduced, self.reduced = frozenset(unreduced), frozenset(reduced)
        return self

    def __eq__(self, other: Any) -> bool:
        return tuple.__eq__(self, other) and (self.unreduced, self.reduced) == (
            getattr(other, "unreduced", frozenset()), getattr(other, "reduced", frozenset()))

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((tuple(self), self.unreduced, self.reduced))

    def __reduce__(self) -> Any:
        return URNames, (tuple(self), self.unreduced, self.reduced)


def with_ur_names(names: Any, spec: Any) -> Any:
    """``names`` carrying ``spec``'s unreduced/reduced axes (as they are when it has none)."""
    u, r = getattr(spec, "unreduced", None), getattr(spec, "reduced", None)
    return URNames(names, u or (), r or ()) if names is not None and (u or r) else names


def _count(mesh: Any, axes: tuple) -> int:
    sizes = mesh.shape
    return math.prod(sizes[a] for a in axes)


def local_aval(aval: ShapedArray, names: Any, mesh: Any) -> ShapedArray:
    if names is None:
        return aval.update(shape=aval.shape[1:])
    return aval.update(shape=tuple(n // _count(mesh, ax) for n, ax in zip(aval.shape, names)))


def stack_axes(mesh: Any, manual: Any = None) -> tuple:
    """The mesh axes a stacked value's leading axis is split over: the body's manual axes (all by default)."""
    return tuple(a for a in mesh.axis_names if manual is None or a in manual)


def global_aval(aval: ShapedArray, names: Any, mesh: Any, manual: Any = None) -> ShapedArray:
    if names is None:
        return aval.update(shape=(_count(mesh, stack_axes(mesh, manual)),) + tuple(aval.shape))
    return aval.update(shape=tuple(n * _count(mesh, ax) for n, ax in zip(aval.shape, names)))


def unmentioned(mesh: Any, names: Any) -> tuple:
    """The mesh axes a layout does not split over."""
    if names is None:
        return ()
    used = {a for ax in names for a in ax}
    return tuple(a for a in mesh.axis_names if a not in used)


def _abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, mesh: Any, in_names: tuple, out_names: tuple,
                   name: str, newly_manual_axes: Any = None, **_: Any) -> list[ShapedArray]:
    if len(avals) != len(jaxpr.in_avals) or len(in_names) != len(avals) or len(out_names) != len(jaxpr.out_avals):
        raise FtransTypeError(f"shard_map {name}: {len(avals)} operands and {len(in_names)} in_specs for a body of "
                              f"{len(jaxpr.in_avals)} inputs")
    for k, (a, ns, w) in enumerate(zip(avals, in_names, jaxpr.in_avals)):
        if ns is not None:
            for d, (n, ax) in enumerate(zip(a.shape, ns)):
                if n % _count(mesh, ax):
                    raise FtransValueError(
                        f"shard_map {name}: operand {k} of type {a.str_short()} has dimension {d} of size {n}, "
                        f"not divisible by the {_count(mesh, ax)} devices of mesh axes {ax}")
        loc = local_aval(a, ns, mesh)
        if (loc.shape, loc.dtype) != (w.shape, w.dtype):
            raise FtransTypeError(f"shard_map {name}: operand {k} of type {a.str_short()} gives blocks of "
                                  f"{loc.str_short()}, but the body takes {w.str_short()}")
    return [global_aval(a, ns, mesh, newly_manual_axes) for a, ns in zip(jaxpr.out_avals, out_names)]


def _map_params(params: dict, rule: str, ins: tuple, outs: tuple) -> dict:
    in_names, out_names = params["in_names"], params["out_names"]
    mesh = params["mesh"]

    def names_of(origin: Any, ndim: int, ct: bool = False) -> Any:
        if origin == "const":
            return ((),) * ndim
        if origin == "res":
            return None
        kind, i = origin
        names = in_names[i] if kind == "in" else out_names[i]
        if ct and isinstance(names, URNames):
            # a cotangent's sets (JAX's ``to_ct_spec``): an unreduced value's is reduced (the same on every
            # device), a reduced value's unreduced (each device's partial sum, summed where it is used)
            names = URNames(names, names.reduced, names.unreduced)
        return names

    body = params["jaxpr"]
    tr = rule == "transpose"  # (its operands from results, and all its results, are cotangents)
    new_in = tuple(names_of(o, len(a.shape), tr and o not in ("const", "res") and o[0] == "out")
                   for o, a in zip(ins, body.in_avals))
    new_out = tuple(names_of(o, len(a.shape), tr) for o, a in zip(outs, body.out_avals))
    new = {**params, "in_names": new_in, "out_names": new_out}
    if rule == "transpose" and not params.get("check_vma"):
        # Without check_vma (as JAX's): a result the out_specs leave unsplit over some axes shares its cotangent
        # out over them, and an operand unsplit over some sums its cotangents over them.  With check_vma the
        # body's own pvary / psum_invariant equations transpose to those sums, exactly where a value the same
        # on every device met a varying one.
        # (as JAX's: not over the mesh axes a vmap's spmd_axis_name splits the batch over here: the devices
        # along them hold different examples)
        # (nor over the axes a partially manual body leaves automatic: the partitioner owns those)
        spmd = _spmd_names() | (frozenset(mesh.axis_names) - frozenset(params.get("newly_manual_axes")
                                                                        or mesh.axis_names))
        # (JAX's: an unreduced cotangent's axes are neither shared out nor summed over: its partial sums stay)
        scale = [1.0 if o == "const" or o == "res" or o[0] != "out" else
                 1.0 / math.prod(mesh.shape[a] for a in unmentioned(mesh, ns) if a not in spmd
                                 and a not in getattr(ns, "unreduced", ()))
                 for o, ns in zip(ins, new_in)]
        total = [tuple(a for a in unmentioned(mesh, ns) if a not in spmd and a not in getattr(ns, "unreduced", ()))
                 for ns in new_out]
        if any(s != 1.0 for s in scale) or any(total):
            new["jaxpr"] = _share_and_sum(body, scale, total, params)
    return new


def _spmd_names() -> frozenset:
    """The mesh axes the vmaps running here split their batch over (``spmd_axis_name``)."""
    from ftrans.core import trace as _trace
    from ftrans.core.axis_env import AxisFrame

    out: set = set()
    for m in _trace.state.stack:
        p = m.payload
        if isinstance(p, AxisFrame) and p.spmd_name:
            out.update(p.spmd_name)
    return frozenset(out)


def _share_and_sum(body: ClosedJaxpr, scale: list, total: list, params: dict) -> ClosedJaxpr:
    from ftrans.core.building import mul
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.prims.collectives import psum_p
    from ftrans.core.trace import stage

    def fun(*args: Any) -> list:
        args = [mul(a, s) if s != 1.0 else a for a, s in zip(args, scale)]
        outs = eval_jaxpr(body.jaxpr, list(body.consts), *args)
        return [psum_p.bind(o, axis_name=tuple(t), axis_index_groups=None) if t else o for o, t in zip(outs, total)]

    with _body_env(params):
        new, _ = stage(fun, list(body.in_avals))
    return new


class _CheckVma(threading.local):
    """For each shard_map body whose rules run here (innermost last): whether it is checked with check_vma."""

    def __init__(self) -> None:
        self.stack: list = []


checking_vma = _CheckVma()

# The typing of a check_vma body while a rule restages it (``ftrans/transforms/shard_map.py`` sets it:
# ``(mesh, manual axes) -> context manager``): the derived bodies (JVP, partial evaluation, transpose) are
# typed as the traced one is (each value's varying manual axes, JAX's implicit pvary), as JAX's are.
checked_body_typing: list = []


class _Env:
    def __init__(self, mesh: Any, axes: Any = None, check_vma: bool = False, manual: Any = None):
        self.mesh = mesh
        self.axes = axes
        self.check_vma = check_vma
        self.manual = manual
        self.stack = ExitStack()

    def __enter__(self) -> None:
        for n, s in zip(self.mesh.axis_names, self.mesh.devices.shape):
            if not self.axes or n in self.axes:
                self.stack.enter_context(extend_axis_env(n, s, None))
        if self.check_vma and checked_body_typing:
            self.stack.enter_context(checked_body_typing[0](self.mesh, self.manual))
        checking_vma.stack.append(self.check_vma)

    def __exit__(self, *exc: Any) -> None:
        checking_vma.stack.pop()
        self.stack.close()


def _body_env(params: dict, axes: Any = None) -> Any:
    """The axis environment of the body: every mesh axis bound, or only ``axes`` (the manual ones, when the
    body is first traced: the mesh axes left automatic are not names the body may use)."""
    return _Env(params["mesh"], axes, bool(params.get("check_vma")), params.get("newly_manual_axes") or axes)


def _func_name(params: dict) -> str:
    return f"shmap_{params['name']}"


def _spec_of_names(names: Any, mesh: Any, manual: Any = None) -> Any:
    from ftrans.core.sharding import PartitionSpec

    if names is None:  # stacked: the leading axis over every (manual) mesh axis
        return PartitionSpec(stack_axes(mesh, manual))
    entries = [None if not ax else ax[0] if len(ax) == 1 else tuple(ax) for ax in names]
    while entries and entries[-1] is None:  # as the user writes it: P('x') for P('x', None)
        entries.pop()
    u, r = getattr(names, "unreduced", None), getattr(names, "reduced", None)
    if u or r:
        return PartitionSpec(*entries, unreduced=u, reduced=r)
    return PartitionSpec(*entries)


def with_specs(params: dict) -> dict:
    """``params`` with ``in_specs``/``out_specs`` (JAX's names: one PartitionSpec per operand / result) made
    from ``in_names``/``out_names``, which the rules read, and ``newly_manual_axes`` (by default every mesh
    axis)."""
    mesh, manual = params["mesh"], params.get("newly_manual_axes")
    out = {**params, "in_specs": tuple(_spec_of_names(n, mesh, manual) for n in params["in_names"]),
           "out_specs": tuple(_spec_of_names(n, mesh, manual) for n in params["out_names"])}
    if "newly_manual_axes" not in out:  # JAX's name for the mesh axes the body is manual over
        out["newly_manual_axes"] = frozenset(mesh.axis_names)
    return out


class _ShardMapPrimitive(CallPrimitive):
    """A CallPrimitive whose equations also carry JAX's ``in_specs``/``out_specs`` (kept in step with
    ``in_names``/``out_names`` at every bind and in every derived call)."""

    def bind(self, *args: Any, **params: Any) -> Any:
        return super().bind(*args, **with_specs(params))


def _map_params_with_specs(params: dict, rule: str, ins: tuple, outs: tuple) -> dict:
    return with_specs(_map_params(params, rule, ins, outs))


def _printed(params: dict) -> list:
    """As JAX prints a shard_map equation: its specs, not ftrans's per-dimension names."""
    return sorted((k, v) for k, v in params.items() if k not in ("in_names", "out_names", "name"))


shard_map_p = _ShardMapPrimitive("shard_map", func_name=_func_name, map_params=_map_params_with_specs,
                                 body_env=_body_env)
shard_map_p.def_abstract_eval(_abstract_eval)

from ftrans.core.ir import pp_params_rules  # noqa: E402

pp_params_rules[shard_map_p] = _printed


# ----------------------------------------------------------------------------
# Sharding in types: over Explicit mesh axes, the results are typed by out_specs (core/sharding_rules.py)


def _shard_map_sharding(_cur: Any, outs: Any, *avals: Any, **params: Any) -> Any:
    m, out_names = params["mesh"], params["out_names"]
    if not m.explicit_axes:
        return None
    res = []
    for names, body in zip(out_names, params["jaxpr"].out_avals):
        if names is None or not {a for ax in names for a in ax} <= set(m.explicit_axes) | set(
                _manual_types(m)):
            res.append(None)  # (split over an Auto axis: a layout no type states, the partitioner's to keep)
            continue
        # a partially manual body's result typed over the Explicit axes left automatic: those entries follow
        # the manual ones out_specs give (JAX's order)
        inner = _sr.spec_of(body) if body.typed_sharding is not None else (None,) * len(names)
        spec = tuple(None if not ax else (ax[0] if len(ax) == 1 else tuple(ax))
                     for ax in (tuple(ax) + names_of_spec(PartitionSpec(e), 1)[0] for ax, e in zip(names, inner)))
        spec = _sr.explicit_spec(spec, m, len(spec))
        u, r = getattr(names, "unreduced", None), getattr(names, "reduced", None)
        res.append((m, _sr.with_ur(spec, u or (), r or ()) if u or r else spec))
    return res


def _manual_types(m: Any) -> tuple:
    from ftrans.core.sharding import AxisType

    return tuple(n for n, t in zip(m.axis_names, m.axis_types) if t == AxisType.Manual)


from ftrans.core import sharding_rules as _sr  # noqa: E402
from ftrans.core.sharding import PartitionSpec  # noqa: E402

shard_map_p.sharding_rule = _shard_map_sharding


class _EagerBody(threading.local):
    """``depth`` > 0 while the body of a ``shard_map`` called on concrete arrays (not under ``jit``) is traced:
    JAX runs such a body device by device, where placing a value on one device is refused.  ``trace_type``:
    the Trace class of such a body (set by ``transforms/shard_map_eager.py``)."""

    depth = 0
    trace_type: Any = None
    allow_refs = False  # (while shard_map makes the refs of its own ref arguments' blocks)


def refuse_ref_in_eager_body() -> None:
    """JAX's error for a ref made directly in a ``shard_map`` body run device by device (not under ``jit``)."""
    if eager_body.depth and eager_body.trace_type is not None and not eager_body.allow_refs:
        from ftrans.core import trace as _trace

        if _trace.state.dynamic.trace_type is eager_body.trace_type:
            raise FtransValueError("Eager shard_map cannot return a `jax.Ref`. Please wrap your shard_map in "
                                   "`jax.jit` (a ref made in a shard_map body run outside jit, device by device, "
                                   "is not supported, as in JAX)")


eager_body = _EagerBody()
