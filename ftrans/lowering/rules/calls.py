"""Lowering of the call-like primitives, and ``jit_call``'s compiled eager rule.

Every :class:`~ftrans.core.prims.calls.CallPrimitive` lowers the same way: its
body becomes a private function of the module (named by the primitive's
``func_name``) and the equation a ``func.call`` of it, so XLA sees one function
per call site and may inline it.  A primitive that needs another lowering
registers it explicitly; the generic rule never replaces it.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from ftrans.core.array import device_key
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import abstract_eval
from ftrans.core.prims import calls as C
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, lowering_rules, register_lowering


def _install(prim: C.CallPrimitive) -> None:
    def lower_call(ctx: LoweringContext, *args: str, **params: Any) -> list[str]:
        sym = ctx.module.function(prim.body(params).jaxpr, prim.func_name(params))
        return ctx.emit("func.call", list(args), [mt.aval_type(a) for a in ctx.avals_out], {"callee": f"@{sym}"})

    lower_call.__name__ = f"lower_{prim.name}"
    lowering_rules.setdefault(prim, lower_call)


C.for_each_call_primitive(_install)


def _lower_jit_call(ctx: LoweringContext, *args: str, **params: Any) -> list[str]:
    # The call op is named by the place its body's ops are named after (JAX's ``jit(f)/jvp(jit(g))``), not by
    # the primitive's name: the callee, wrapped in the transforms it runs under.
    sym = ctx.module.function(C.jit_call_p.body(params).jaxpr, C.jit_call_p.func_name(params))
    where = ctx.module._body_prefix.extend(f"jit({C.jit_call_p.func_name(params)})")
    ctx.fn.location = mt.loc(ctx.eqn.source_info, str(where), ctx.module.outer_frames)
    return ctx.emit("func.call", list(args), [mt.aval_type(a) for a in ctx.avals_out], {"callee": f"@{sym}"})


lowering_rules[C.jit_call_p] = _lower_jit_call


@register_lowering(C.remat_p)
def _remat_lowering(ctx: LoweringContext, *args: str, **params: Any) -> list[str]:
    # The call is named ``checkpoint`` where it runs, as JAX's lowering names the rematerialized ops
    # (``jit(f)/checkpoint/sin``); the primitive's own name (``remat2``) stays out of the program.
    sym = ctx.module.function(C.remat_p.body(params).jaxpr, C.remat_p.func_name(params))
    ctx.fn.location = mt.loc(ctx.eqn.source_info, f"{ctx.module._body_prefix}/checkpoint")
    return ctx.emit("func.call", list(args), [mt.aval_type(a) for a in ctx.avals_out], {"callee": f"@{sym}"})


# ----------------------------------------------------------------------------
# jit_call evaluated eagerly (``eval_jaxpr`` of a staged program): compile the body and run it


_jaxpr_exes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _executable_for_jaxpr(jaxpr: Any, device: Any, name: str) -> Any:
    from ftrans.lowering import executable as X

    per = _jaxpr_exes.setdefault(jaxpr, {})
    exe = per.get(device_key(device))
    if exe is None:
        level = X.compile_log_level()
        if X.logger.isEnabledFor(level):  # every jit compile is announced, as JAX does (grad of a jit too)
            X.logger.log(level, "Compiling jit(%s) with global shapes and types %s", name,
                         "(" + "".join(f"{a!r}, " for a in jaxpr.in_avals).rstrip(" ") + ")")
        exe = per[device_key(device)] = X.Executable(jaxpr, device, name)
    return exe


def _program_mesh(jaxpr: Any) -> Any:
    """The mesh a ``shard_map`` (or a sharding constraint or ``device_put`` over several devices) anywhere in
    ``jaxpr`` names, or None: such a program runs only partitioned over that mesh."""
    from ftrans.core.ir import ClosedJaxpr, subjaxprs
    from ftrans.core.prims.shard_map import shard_map_p
    from ftrans.core.prims.sharding import device_put_p, sharding_constraint_p
    from ftrans.core.sharding import NamedSharding

    for eqn in jaxpr.eqns:
        if eqn.primitive is shard_map_p:
            return eqn.params["mesh"]
        if eqn.primitive is sharding_constraint_p and eqn.params["sharding"].mesh.size > 1:
            return eqn.params["sharding"].mesh
        if eqn.primitive is device_put_p:
            for d in eqn.params["devices"]:
                if isinstance(d, NamedSharding) and d.mesh.size > 1:
                    return d.mesh
        for sub in subjaxprs(eqn):
            m = _program_mesh(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub)
            if m is not None:
                return m
    return None


_spmd_exes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _spmd_executable_for_jaxpr(closed: Any, mesh: Any, name: str) -> Any:
    """A staged program with a ``shard_map`` inside, compiled partitioned over its mesh (arguments replicated,
    results laid out as the partitioner chooses): the known half of a linearized sharded ``jit``, say."""
    from ftrans.lowering.spmd import SpmdExecutable

    exe = _spmd_exes.get(closed)
    if exe is None:
        n_in, n_out = len(closed.jaxpr.invars), len(closed.out_avals)
        exe = _spmd_exes[closed] = SpmdExecutable(closed, name, mesh, [None] * n_in, [None] * n_out)
    return exe


_host = threading.local()


@contextlib.contextmanager
def host_only() -> Iterator[None]:
    """In this thread, a ``jit_call`` applied to concrete values interprets its body with the NumPy
    rules instead of compiling it: jit's background compilation runs first calls this way."""
    prev = getattr(_host, "on", False)
    _host.on = True
    try:
        yield
    finally:
        _host.on = prev


def host_only_active() -> bool:
    """Whether this thread interprets staged programs on the host (inside ``host_only``)."""
    return getattr(_host, "on", False)


@C.jit_call_p.def_impl
def _jit_call_impl(*vals: np.ndarray, jaxpr: Any, name: str, donated_invars: tuple, **params: Any) -> list:
    """A jitted function stays compiled when its staged call is applied to concrete values."""
    from ftrans.devices import default_device
    from ftrans.lowering import executable as X

    abstract_eval(C.jit_call_p, [ShapedArray(np.shape(v), np.asarray(v).dtype) for v in vals],
                  dict(params, jaxpr=jaxpr, name=name, donated_invars=donated_invars))
    from ftrans.core.prims.parallel import Interpreted, pmap_in_program

    if pmap_in_program(jaxpr):  # not one executable: each pmap runs as its own program (as under jit)
        return [np.asarray(o) for o in Interpreted(jaxpr).run(vals)]
    if getattr(_host, "on", False):
        from ftrans.core.array import Array
        from ftrans.core.jaxpr_api import eval_jaxpr

        outs = eval_jaxpr(jaxpr, list(jaxpr.consts), *[Array._new(np.asarray(v), False) for v in vals])
        return [np.asarray(o._value if isinstance(o, Array) else o, a.dtype) for o, a in zip(outs, jaxpr.out_avals)]
    mesh = _program_mesh(jaxpr.jaxpr)
    if mesh is not None:  # a program with a shard_map inside runs partitioned, never on one device
        # (its results stay laid out as the program left them, as a sharded jit's: eager vmap of a jit whose
        # body constrains its values, say)
        return _spmd_executable_for_jaxpr(jaxpr, mesh, name).run(list(vals))
    exe = _executable_for_jaxpr(jaxpr, default_device(), name)
    outs = exe.run([X.to_buffer(np.asarray(v), exe.device) for v in vals])
    return [np.asarray(o) for o in outs]


# ----------------------------------------------------------------------------
# The small primitives of remat and custom_vjp


@register_lowering(C.name_p)
def _name_lowering(ctx: LoweringContext, x: str, *, name: str) -> str:
    return x


@register_lowering(C.linear_call_p)
def _linear_call_lowering(ctx: LoweringContext, *args: str, callee: Any, **_: Any) -> list[str]:
    sym = ctx.module.function(callee.jaxpr, "linear_call")
    return ctx.emit("func.call", list(args), [mt.aval_type(a) for a in ctx.avals_out], {"callee": f"@{sym}"})


@register_lowering(C.xla_metadata_value_p)
def _xla_metadata_value_lowering(ctx: LoweringContext, x: str, *, xla_metadata_kvs: tuple) -> str:
    # the attributes go on the op that produced ``x`` (none when ``x`` is an argument), as JAX's
    ctx.fn.add_frontend_attributes(x, xla_metadata_kvs)
    return x


@register_lowering(C.optimization_barrier_p)
def _barrier_lowering(ctx: LoweringContext, *args: str) -> list[str]:
    if not args:
        return []
    return ctx.fn.emit_barrier(list(args))


@register_lowering(C.custom_lin_p)
def _custom_lin_lowering(ctx: LoweringContext, *args: str, name: str, **_: Any) -> list[str]:
    raise C.no_forward_error(name)


# ----------------------------------------------------------------------------
# composite: a ``stablehlo.composite`` op naming its decomposition, a private function


def _attribute_text(v: Any, key: str) -> str:
    """One ``composite_attributes`` entry as MLIR attribute text (the kinds JAX's lowering accepts: NumPy
    arrays and scalars, dtypes, Python bool/int/float/str, and dicts, lists and tuples of them)."""
    if isinstance(v, C.HashableAttribute):
        v = v.val
    if isinstance(v, (bool, np.bool_)):
        return mt.bool_attr(bool(v))
    if isinstance(v, int):
        return f"{int(v)} : i64"
    if isinstance(v, float):
        return f"0x{np.float64(v).view(np.uint64):016X} : f64"
    if isinstance(v, (str, bytes)):
        s = v.decode() if isinstance(v, bytes) else v
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return mt.element_type(np.dtype(v))
    if isinstance(v, np.generic):
        if v.dtype.kind in "iu":
            return f"{int(v)} : {mt.element_type(v.dtype)}"
        if v.dtype.kind == "f" or v.dtype in mt._FLOAT_LIKE:
            bits = np.asarray(v).view(f"u{v.dtype.itemsize}")
            return f"0x{int(bits):0{2 * v.dtype.itemsize}X} : {mt.element_type(v.dtype)}"
    if isinstance(v, np.ndarray):
        return f"{mt.dense(v)} : {mt.tensor_type(v.shape, v.dtype)}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_attribute_text(x, key)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attribute_text(x, key) for x in v) + "]"
    raise TypeError(f"composite attribute {key!r}: no MLIR attribute for a value of type {type(v).__name__} "
                    "(use NumPy arrays or scalars, dtypes, bool/int/float/str, or dicts/lists/tuples of them)")


@register_lowering(C.composite_p)
def _composite_lowering(ctx: LoweringContext, *args: str, name: str, attributes: tuple, version: int,
                        jaxpr: Any) -> list[str]:
    from ftrans.core import pytrees

    sym = ctx.module.function(jaxpr.jaxpr, name)
    attrs = {"name": '"' + name.replace('"', '\\"') + '"'}
    entries = []
    for key, leaves, treedef in attributes:
        val = pytrees.tree_unflatten(treedef, list(leaves))
        if val is not None:
            entries.append(f"{key} = {_attribute_text(val, key)}")
    if entries:
        attrs["composite_attributes"] = "{" + ", ".join(entries) + "}"
    attrs["decomposition"] = f"@{sym}"
    if version:
        attrs["version"] = f"{int(version)} : i32"
    return ctx.emit("stablehlo.composite", list(args), [mt.aval_type(a) for a in ctx.avals_out], attrs)
