"""Running a ``pmap``: one StableHLO program, compiled for several replicas, one per device.

Why replicas and not one SPMD-partitioned program: a ``pmap`` body is already
per-device code (collectives name the devices they talk to), which is exactly
XLA's replica model: ``mhlo.num_replicas = R``, every replica runs ``main`` on
its own operands, and cross-replica ops (``all_reduce`` and friends) carry
replica groups.  SPMD would ask XLA's partitioner to rediscover the per-device
program from sharding annotations and a manual-sharding region around the
body, adding a pass ftrans gains nothing from.  See docs/architecture.md.

The program's ``main`` takes, per replica, each mapped operand's block (the
mapped axis kept with size 1, so each operand is an ordinary array split
along that axis over the devices and needs no copy on the host) and each
unmapped operand whole; it drops the unit axis, calls the body, and puts a
unit axis back at each result's ``out_axes`` (results with ``out_axes=None``
are returned whole by every replica).  A nested ``pmap`` multiplies the
replicas: ``R = axis_size * nested_replicas(body)``; the outer operands are
then given to the replicas in contiguous runs (the device mesh is
``(axis_size, R // axis_size)``) and the inner pmap slices its own axis in the
program (``lowering/rules/parallel.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array, ShardedArray, sharded_array
from ftrans.core.avals import ShapedArray
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr, Jaxpr, subjaxprs
from ftrans.core.prims.parallel import mapped_aval, pmap_p
from ftrans.core.prims.random import physical_aval
from ftrans.devices import on_new_backend
from ftrans.errors import FtransValueError
from ftrans.lowering import compat, lower
from ftrans.lowering import executable as X
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import ModuleLowering

__all__ = ["PmapExecutable", "nested_replicas", "lower_pmap", "executable_for"]


def nested_replicas(jaxpr: Jaxpr) -> int:
    """How many replicas one element of a pmap needs: the product of the nested pmaps' sizes (largest path)."""
    n = 1
    for eqn in jaxpr.eqns:
        if eqn.primitive is pmap_p:
            n = max(n, eqn.params["axis_size"] * nested_replicas(eqn.params["jaxpr"].jaxpr))
        else:
            for sub in subjaxprs(eqn):
                n = max(n, nested_replicas(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub))
    return n


def _with_unit(aval: ShapedArray, axis: int | None) -> ShapedArray:
    return aval if axis is None else mapped_aval(aval, axis, 1)


def lower_pmap(body: ClosedJaxpr, axis_name: Any, axis_size: int, in_axes: Sequence, out_axes: Sequence,
               replicas: int, name: str, donated: Sequence[bool] = (), platform: str = "cpu",
               devices: Sequence[Any] = ()) -> str:
    """The module text of a pmap program (see the module docstring for ``main``'s convention); ``devices``: the
    ones it runs on, when known (what ``debug.inspect_array_sharding`` in the body reports them as)."""
    from ftrans.lowering.rules.callbacks import check_no_ordered_effects

    check_no_ordered_effects(body, replicas, f"pmap({name})")
    m = ModuleLowering(f"pmap_{name}", num_replicas=replicas, platform=platform, scope=f"pmap({name})")
    m.replica_axes.append((axis_name, axis_size))
    if devices and replicas == axis_size:  # (one pmap level: its devices as the mesh JAX's pmap reports)
        from ftrans.core.sharding import Mesh

        m.pmap_mesh = Mesh(np.array(list(devices)[:axis_size], dtype=object),
                           (axis_name if isinstance(axis_name, str) else "_internal_pmap_axis_name",))
    fn = mt.FuncEmitter()
    args, ins = [], []
    for i, (a, ax) in enumerate(zip(body.in_avals, in_axes)):
        t = mt.aval_type(_with_unit(a, ax))
        s = fn.argument(t)
        donor = " {jax.buffer_donor = true}" if i < len(donated) and donated[i] else ""
        args.append(f"{s}: {t}{donor}")
        ins.append(s if ax is None else fn.emit("stablehlo.reshape", [s], [mt.aval_type(a)])[0])
    with extend_axis_env(axis_name, axis_size, None):  # rules that restage the body see the axis
        sym = m.function(body.jaxpr, f"pmap_{name}")
    outs = fn.emit("func.call", ins, [mt.aval_type(a) for a in body.out_avals], {"callee": f"@{sym}"})
    results = []
    for o, a, ax in zip(outs, body.out_avals, out_axes):
        results.append(o if ax is None else fn.emit("stablehlo.reshape", [o], [mt.aval_type(_with_unit(a, ax))])[0])
    fn.emit("func.return", results, [])
    ret = ", ".join(fn.types[r] for r in results)
    text = "\n".join(fn.lines)
    m.main_text = f"  func.func public @main({', '.join(args)}) -> ({ret}) {{\n{text}\n  }}"
    return m.text()


def _compile(text: str, devices: list, options: tuple = ()) -> Any:
    """XLA-compile a replicated module through the cache jit's programs share (returns the cache's holder);
    ``options``: XLA compiler options as sorted (name, value) pairs."""

    callbacks = lower.host_callbacks_of(text)
    key = (text, tuple(d.id for d in devices), devices[0].platform, ("replicas", options), callbacks)
    return X.compiled_program(
        key, lambda: compat.compile_replicated(devices[0].client, text, devices, (), callbacks, options), text,
        options, platform=devices[0].platform)


class PmapExecutable:
    """One compiled pmap program and the shardings of its operands and results."""

    __slots__ = ("name", "text", "xla", "_held", "devices", "axis_size", "in_axes", "out_axes", "in_avals",
                 "out_avals", "in_shardings", "out_shardings", "donated", "_run", "__weakref__")

    def __init__(self, body: ClosedJaxpr, axis_name: Any, axis_size: int, in_axes: Sequence, out_axes: Sequence,
                 devices: Sequence[Any], name: str, donated: Sequence[bool] = (), options: tuple = ()):
        replicas = axis_size * nested_replicas(body.jaxpr)
        if replicas > len(devices):
            raise FtransValueError(
                f"pmap({name}): compiling a computation that requires {replicas} logical devices, but only "
                f"{len(devices)} XLA devices are available; map over at most that many elements")
        devices = list(devices)[:replicas]
        self.name = name
        self.devices = devices
        self.axis_size = axis_size
        self.in_axes = tuple(in_axes)
        self.out_axes = tuple(out_axes)
        self.donated = tuple(donated) if any(donated) else ()
        self.text = lower_pmap(body, axis_name, axis_size, in_axes, out_axes, replicas, name, self.donated,
                               compat.lowering_platform(devices[0]), devices)
        self._held = _compile(self.text, devices, options)  # keeps the shared cache's entry alive
        self.xla = self._held.xla
        # The mapped mesh axis is named after the pmap's axis, as in JAX's pmap results (``P('i')``).
        mesh = compat.replica_mesh(devices, axis_size,
                                   axis_name if isinstance(axis_name, str) else "_internal_pmap_axis_name")
        # a key-typed value crosses the boundary as its uint32 data (core/prims/random.py)
        self.in_avals = [physical_aval(mapped_aval(a, ax, axis_size)) for a, ax in zip(body.in_avals, in_axes)]
        self.out_avals = [physical_aval(mapped_aval(a, ax, axis_size)) for a, ax in zip(body.out_avals, out_axes)]
        self.in_shardings = [compat.mapped_sharding(mesh, ax, len(a.shape)) for a, ax in zip(self.in_avals, in_axes)]
        self.out_shardings = [compat.mapped_sharding(mesh, ax, len(a.shape))
                              for a, ax in zip(self.out_avals, out_axes)]
        self._run = X.replicated_runner(self.xla, self.out_avals, self.out_shardings, self.text, replicas=True)

    def buffer(self, x: Any, k: int) -> Any:
        """Operand ``k`` as a buffer split over the devices: a pmap result split this way is used in place."""
        want = self.in_shardings[k]
        if type(x) is ShardedArray:
            buf = x._sharded
            if not buf.is_deleted() and (buf.sharding == want or compat.same_layout(buf.sharding, want,
                                                                                  len(x.shape))):
                return buf  # split the same way over the same devices (whatever its mesh axis is called)
            value = x._value
        elif isinstance(x, Array):
            value = x._value
        else:
            value = np.asarray(x)
            canon = dtypes.canonicalize(value.dtype)
            if value.dtype != canon:
                value = value.astype(canon)
        return compat.put_sharded(np.asarray(value), want, self.in_axes[k], self.devices, self.axis_size)

    def run(self, args: Sequence[Any]) -> list:
        bufs = [self.buffer(x, k) for k, x in enumerate(args)]
        outs = self._run(bufs)
        return [sharded_array(b, a) for b, a in zip(outs, self.out_avals)]


_by_jaxpr: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _forget_programs() -> None:
    _by_jaxpr.clear()


on_new_backend.append(_forget_programs)  # its programs were compiled for the old client


def executable_for(body: ClosedJaxpr, params: dict, devices: Sequence[Any]) -> PmapExecutable:
    """The compiled program of a pmap equation (cached on its body)."""
    per = _by_jaxpr.setdefault(body, {})
    key = (params["axis_name"], params["axis_size"], params["in_axes"], params["out_axes"],
           tuple(d.id for d in devices), params.get("donated_invars", ()))
    exe = per.get(key)
    if exe is None:
        exe = per[key] = PmapExecutable(body, params["axis_name"], params["axis_size"], params["in_axes"],
                                        params["out_axes"], devices, params.get("name", "f"),
                                        params.get("donated_invars", ()))
    return exe
