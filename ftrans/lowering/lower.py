"""Lowering ftrans IR to a StableHLO module: the rule table and the walk over equations.

``lowering_rules`` maps each primitive to ``rule(ctx, *operands, **params)``,
which emits ops through ``ctx`` and returns the SSA name(s) of its result(s).
``ctx.avals_in`` / ``ctx.avals_out`` give the equation's types, so a rule never
re-derives a shape.  Rules live in ``ftrans/lowering/rules/``, one module per
family of primitives; higher-order primitives (``jit_call`` and later the
control-flow ones) lower their sub-jaxprs through ``ModuleLowering.function``.

Constants captured by a jaxpr become leading *arguments* of ``main`` rather
than literals in the text: a closed-over weight matrix then costs one transfer
when the executable is built, not a huge module for XLA to parse.

The lowering emits every equation it is given: dead code is removed before,
by the pass pipeline ``jit`` runs (``ftrans.transforms.passes``).
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
import pathlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.config import config as _config
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal, NameStack, subjaxprs
from ftrans.core.keys import KeyDtype, is_user_edtype, physical_element
from ftrans.core.primitive import Primitive, rule_table
from ftrans.core.prims.shard_map import shard_map_p
from ftrans.core.prims.sharding import sharding_constraint_p
from ftrans.errors import FtransError, FtransNotImplementedError, InconclusiveDimensionOperation
from ftrans.lowering import compat
from ftrans.lowering import mlir_text as mt

lowering_rules: dict[Primitive, Callable[..., Any]] = rule_table("lowering", owner=__name__)
# Rules for equations with key-typed operands or results (a structural primitive moving keys): the same
# primitive over the keys' uint32 data (``rules/random.py``); other equations take ``lowering_rules``.
key_lowering_rules: dict[Primitive, Callable[..., Any]] = {}


def register_lowering(prim: Primitive) -> Callable:
    def deco(rule: Callable) -> Callable:
        lowering_rules[prim] = rule
        return rule

    return deco


class LoweringError(Exception):
    """A primitive or parameter the lowering cannot express (a bug in ftrans, reported with context)."""


class MissingLoweringRule(LoweringError, NotImplementedError):
    """A primitive (a user's, say) with no lowering rule: JAX raises ``NotImplementedError`` for it."""


class LoweringContext:
    """What a rule sees: the emitter, the equation's types, and the module (for sub-functions)."""

    __slots__ = ("fn", "module", "avals_in", "avals_out", "eqn")

    def __init__(self, fn: mt.FuncEmitter, module: ModuleLowering, avals_in, avals_out, eqn):
        self.fn = fn
        self.module = module
        self.avals_in: list[ShapedArray] = avals_in
        self.avals_out: list[ShapedArray] = avals_out
        self.eqn = eqn

    # -- emission helpers used by the rules ------------------------------------
    def emit(self, name: str, operands: Sequence[str], result_types: Sequence[str] | None = None,
             attrs: dict[str, str] | None = None, regions: Sequence[str] = ()) -> list[str]:
        if result_types is None:
            result_types = [mt.aval_type(a) for a in self.avals_out]
        return self.fn.emit(name, operands, result_types, attrs, regions)

    def emit1(self, name: str, operands: Sequence[str], result_type: str | None = None,
              attrs: dict[str, str] | None = None, regions: Sequence[str] = ()) -> str:
        t = [result_type] if result_type is not None else None
        return self.emit(name, operands, t, attrs, regions)[0]

    @property
    def platform(self) -> str:
        """The platform the module is lowered for: ``cpu``, ``cuda``, ``rocm`` (or ``tpu``)."""
        return self.module.platform

    def type_of(self, ssa: str) -> str:
        return self.fn.types[ssa]

    def constant(self, value: Any, dtype: Any = None) -> str:
        arr = np.asarray(value, dtype=dtype)
        return self.fn.constant(arr)

    def scalar(self, value: Any, dtype: np.dtype) -> str:
        """A rank-0 constant of ``dtype`` (for init values, bounds, ...)."""
        return self.fn.constant(np.asarray(value, dtype=dtype))

    def broadcast(self, x: str, aval: ShapedArray, shape: Sequence[int], dims: Sequence[int] | None = None) -> str:
        """``broadcast_in_dim`` of ``x`` (of ``aval``) to ``shape``; a no-op if the shapes agree."""
        shape = tuple(shape)
        if tuple(aval.shape) == shape and dims is None:
            return x
        if dims is None:  # numpy-style trailing alignment; only rank-0 in practice
            dims = tuple(range(len(shape) - len(aval.shape), len(shape)))
        return self.emit1("stablehlo.broadcast_in_dim", [x], mt.tensor_type(shape, aval.dtype),
                          {"broadcast_dimensions": mt.i64_array(dims)})

    def compare(self, x: str, y: str, direction: str, dtype: np.dtype, shape: Sequence[int],
                kind: str | None = None) -> str:
        """``x <direction> y`` for operands of ``dtype`` and ``shape``: a bool tensor of that shape.

        ``kind`` overrides the comparison type (``"TOTALORDER"``, say); by default it follows the dtype.
        """
        return self.emit1("stablehlo.compare", [x, y], mt.tensor_type(shape, np.dtype(np.bool_)), {
            "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
            "compare_type": f"#stablehlo<comparison_type {kind or mt.compare_type(dtype)}>",
        })

    def convert(self, x: str, aval: ShapedArray, dtype: np.dtype) -> str:
        if np.dtype(aval.dtype) == np.dtype(dtype):
            return x
        return self.emit1("stablehlo.convert", [x], mt.tensor_type(aval.shape, dtype))

    def reduce_region(self, body_op: str, dtype: np.dtype) -> str:
        """A two-argument scalar reduction body applying ``body_op`` (e.g. ``stablehlo.add``)."""
        t = mt.tensor_type((), dtype)

        def body(f: mt.FuncEmitter, args: list[str]) -> list[str]:
            return f.emit(body_op, args, [t])

        return self.fn.region([t, t], body)


def _dim_args(jaxpr: Jaxpr) -> list[str]:
    """The dimension variables a private function of ``jaxpr`` must take as values: those its equations' sizes
    (and symbolic parameters) mention, nested bodies included, that its arguments' sizes do not give."""
    from ftrans.core.shape_poly import DimExpr, dim_vars

    args = [tuple(getattr(v.aval, "shape", ())) for v in list(jaxpr.constvars) + list(jaxpr.invars)]
    needed: set = set()
    todo = [jaxpr]
    while todo:
        jx = todo.pop()
        jx = getattr(jx, "jaxpr", jx)
        for eqn in jx.eqns:
            for v in (*eqn.invars, *eqn.outvars):
                needed |= dim_vars(getattr(v.aval, "shape", ()))
            for val in eqn.params.values():
                if isinstance(val, DimExpr):
                    needed |= dim_vars((val,))
                elif isinstance(val, tuple) and any(isinstance(d, DimExpr) for d in val):
                    needed |= dim_vars(val)
            todo.extend(subjaxprs(eqn))
    for v in jaxpr.outvars:
        needed |= dim_vars(getattr(v.aval, "shape", ()))
    if not needed:
        return []
    given = {v for v, _, _ in mt._partial_order(args)}
    return sorted(needed - given)


class ModuleLowering:
    """One StableHLO module being written: ``main`` plus private functions for calls."""

    def __init__(self, name: str = "ftrans_module", num_partitions: int = 1, num_replicas: int = 1,
                 platform: str = "cpu", scope: str | None = None):
        # (JAX strips trailing underscores: ``jit(<lambda>)`` is module ``jit__lambda``)
        self.name = _sanitize(name).rstrip("_") or _sanitize(name)
        # The target platform (``cpu``, ``cuda``, ``rocm``): rules whose XLA op or custom call differs
        # between backends (the linear-algebra factorizations) read it as ``ctx.platform``.
        self.platform = platform
        # The first part of every op's location name (``jit(f)``), before its ``named_scope`` names.
        self.scope = scope if scope is not None else f"jit({name})"
        # While an equation's rule runs: the location prefix its nested bodies get (the enclosing
        # function's prefix, then the equation's own name stack), and the equation.
        self._body_prefix: NameStack = NameStack((self.scope,))
        self._body_eqn: Any = None
        # The user's frames the program was lowered from (``(code, lasti)``, innermost first): every
        # location in ``main`` and the bodies inlined into it ends with them (JAX's outer traceback);
        # a nested ``jit``'s function has none.
        self.outer_frames: tuple = ()
        # the names of ``main``'s arguments as the user wrote them (``x``, ``params['w']``): each argument's
        # location, as JAX's (XLA names the HLO parameters after them)
        self.main_arg_names: tuple = ()
        self.num_partitions = num_partitions
        # pmap: the program runs as ``num_replicas`` replicas; ``replica_axes`` lists the named
        # axes (name, size) the function being lowered is mapped over, outermost first.
        self.num_replicas = num_replicas
        # Sharded programs: whether donated argument i may be aliased to result k (their layouts agree, as
        # JAX aliases only to a result of a given sharding); otherwise it is a buffer donor (None: always).
        self.alias_ok: Any = None
        self.replica_axes: list[tuple[Any, int]] = []
        self.private: list[str] = []
        # Sharded programs: the meshes their Shardy annotations name (mesh -> symbol), declared first.
        self.meshes: dict[Any, str] = {}
        self._func_names: dict[int, str] = {}
        self._keep: list[Any] = []  # keeps keyed jaxprs alive so ids stay unique
        # Python functions the program calls back (host callbacks), by the index its custom calls name.
        self.host_callbacks: list[Callable] = []
        self.extra_decls: dict[str, str] = {}  # symbol -> declaration (the maximal mesh)
        # main's results that are key arrays' data with no sharding asked for: index -> trailing key axes
        self.open_key_results: dict[int, int] = {}
        # A partitioned program's devices, in partition order (a callback's ``sharding`` names one of them).
        self.device_assignment: list[Any] = []
        # A pmap program's devices as JAX's pmap states them (a one-axis mesh named after its axis), when known.
        self.pmap_mesh: Any = None
        # Shape polymorphism: private function -> the dimension variables it takes first (``func.call``s of it
        # get their values prepended), for the sizes its arguments' sizes do not give; and the function whose
        # equations are being lowered.
        self.func_dim_args: dict[str, list[str]] = {}
        self._cur_fn: mt.FuncEmitter | None = None

    def maximal_mesh(self, index: int = 0) -> str:
        """The symbol of a one-device mesh (the program's ``index``-th device, the first by default) that
        side-effecting ops of a partitioned program are placed on (XLA's partitioner needs a sharding on
        them), declared once."""
        sym = f"maximal_mesh_{index}"
        if sym not in self.extra_decls:
            self.extra_decls[sym] = f"  sdy.mesh @{sym} = <[], device_ids=[{index}]>"
        return sym

    def empty_mesh(self) -> str:
        """The symbol of the mesh without axes: per-device ops inside a manual region are replicated over it."""
        sym = "empty_mesh"
        if sym not in self.extra_decls:
            self.extra_decls[sym] = f"  sdy.mesh @{sym} = <[]>"
        return sym

    def add_host_callback(self, fn: Callable) -> int:
        """Register ``fn`` for a host-callback custom call; returns the index the call names."""
        self.host_callbacks.append(fn)
        return len(self.host_callbacks) - 1

    def mesh_symbol(self, mesh: Any) -> str | None:
        """The symbol of ``mesh``'s ``sdy.mesh`` declaration (None: the program is not partitioned)."""
        if not self.meshes:
            return None
        sym = self.meshes.get(mesh)
        if sym is None and type(mesh).__name__ == "AbstractMesh":
            # a partially manual shard_map body's type mesh (its manual axes typed Manual): the program's mesh
            for m, s in self.meshes.items():
                if m is not None and (m.axis_names, tuple(m.axis_sizes)) == (mesh.axis_names,
                                                                             tuple(mesh.axis_sizes)):
                    return s
        if sym is None:
            sym = self.meshes[mesh] = f"mesh_{len(self.meshes)}"
        return sym

    def function(self, jaxpr: Jaxpr, name: str, *, public: bool = False,
                 donated_args: Sequence[bool] = (), arg_attrs: Sequence[str] = (),
                 result_attrs: Sequence[str] = (), label: str | None = None, dim_vars: Sequence[str] = ()) -> str:
        """Lower ``jaxpr`` as a function (once per jaxpr) and return its symbol name.

        ``dim_vars``: dimension variables whose values the function takes first, as ``tensor<i32>`` arguments
        (for sizes its arguments' sizes do not give).

        ``label``: the body's name in its operations' locations, after the running equation's
        (JAX's ``while/body``, ``cond/branch_0_fun``; ``""`` for none); default ``name`` (``jit(name)``
        for a jit call).
        """
        key = (id(jaxpr), tuple(self.replica_axes)) if self.replica_axes else id(jaxpr)
        if not public and key in self._func_names:
            return self._func_names[key]
        caller = self._cur_fn
        if not dim_vars and not public and caller is not None and caller.dim_sources:
            dim_vars = _dim_args(jaxpr)
        sym = _sanitize(name)
        taken = set(self._func_names.values())
        base, i = sym, 1
        while sym in taken or (sym == "main" and not public):
            sym = f"{base}_{i}"
            i += 1
        if not public:
            self._func_names[key] = sym
            self._keep.append(jaxpr)
            if dim_vars:
                self.func_dim_args[sym] = list(dim_vars)
        # Equations of a body name their place by the equation that runs it (as JAX's name stacks,
        # which restart in each body): ``jit(f)/outer/jit(g)/inner/mul``, ``jit(f)/while/body/add``.
        if public:
            prefix = NameStack((self.scope,))
        else:
            eqn = self._body_eqn
            if label is None:
                label = f"jit({name})" if eqn is not None and eqn.primitive.name == "jit_call" else name
                prefix = self._body_prefix.extend(label)
            else:
                # A loop or branch body is named after the equation's names as written (JAX lowers these
                # equations apart and XLA joins the names as text): ``foo/vmap()/cond/branch_0_fun``.
                written = NameStack((str(self._body_prefix),))
                prefix = written.extend(label) if label else written
        saved = self._body_prefix, self._body_eqn, self._cur_fn, self.outer_frames
        if not public and self._body_eqn is not None and self._body_eqn.primitive.name == "jit_call":
            self.outer_frames = ()  # a jit's body is its own function: no caller's frames (as JAX's)
        try:
            text = self._lower_func(jaxpr, sym, public, donated_args, arg_attrs, result_attrs, prefix, dim_vars)
        finally:
            self._body_prefix, self._body_eqn, self._cur_fn, self.outer_frames = saved
        if public:
            self.main_text = text
            self.main_jaxpr = jaxpr
        else:
            self.private.append(text)
        return sym

    def _lower_func(self, jaxpr: Jaxpr, sym: str, public: bool, donated_args: Sequence[bool] = (),
                    arg_attrs: Sequence[str] = (), result_attrs: Sequence[str] = (),
                    prefix: NameStack | None = None, dim_vars: Sequence[str] = ()) -> str:
        prefix = prefix or NameStack((self.scope,))
        fn = mt.FuncEmitter()
        fn.func_dim_args = self.func_dim_args
        self._cur_fn = fn
        env: dict[Any, str] = {}
        args = []
        aliases, donors = _donation_aliases(list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.outvars,
                                            donated_args, self.alias_ok if public else None) \
            if any(donated_args) else ({}, set())
        for i, v in enumerate(list(jaxpr.constvars) + list(jaxpr.invars)):
            t = mt.aval_type(v.aval)
            a = fn.argument(t)
            env[v] = a
            # A donated argument is aliased to the first free output of its shape and dtype (as JAX sets
            # up aliases); one with no such output (or of another layout) is a buffer donor XLA may still give
            # to an output, when one of its size is left; the rest are not donated (they stay alive).
            extra = [arg_attrs[i]] if i < len(arg_attrs) and arg_attrs[i] else []
            if i in aliases:
                extra.append(f"tf.aliasing_output = {aliases[i]} : i32")
            elif i in donors:
                extra.append("jax.buffer_donor = true")
            args.append(f"{a}: {t}" + (f" {{{', '.join(extra)}}}" if extra else ""))
            k = i - len(jaxpr.constvars)
            if public and 0 <= k < len(self.main_arg_names) and self.main_arg_names[k]:
                args[-1] += f' loc("{mt._quoted(self.main_arg_names[k])}")'
        if "?{" in "".join(args):  # arguments of symbolic sizes give the dimension variables' values
            fn.find_dim_sources([env[v] for v in list(jaxpr.constvars) + list(jaxpr.invars)],
                                [v.aval for v in list(jaxpr.constvars) + list(jaxpr.invars)])
        if dim_vars:  # leading i32 arguments holding dimension variables' values (JAX's dimension arguments)
            dargs = [fn.argument("tensor<i32>") for _ in dim_vars]
            fn.dim_sources.update(zip(dim_vars, dargs))
            # (marked as JAX marks them: shape refinement propagates their constant values into the function)
            args = [f'{a}: tensor<i32> {{jax.global_constant = "{v}"}}' for a, v in zip(dargs, dim_vars)] + args
        results = self._lower_body(fn, jaxpr, env, prefix)
        if public and self.open_key_results:
            results = self._open_key_results(fn, results, jaxpr)
        out_types = [fn.types[r] for r in results]
        if public and self.outer_frames:  # main returns where the program was called from (as JAX's)
            fn.location = mt.loc(None, self.scope, self.outer_frames)
        fn.emit("func.return", results, [])
        vis = "public" if public else "private"
        ret = ", ".join(t + (f" {{{result_attrs[k]}}}" if k < len(result_attrs) and result_attrs[k] else "")
                        for k, t in enumerate(out_types))
        body = "\n".join(fn.lines)
        return f"  func.func {vis} @{sym}({', '.join(args)}) -> ({ret}) {{\n{body}\n  }}"

    def inline(self, fn: mt.FuncEmitter, jaxpr: Jaxpr, args: Sequence[str], label: str) -> list[str]:
        """Lower ``jaxpr``'s equations into ``fn`` (a region of the running equation's op: a loop or
        branch body, inline as JAX's) on the SSA values ``args`` (its constvars', then its invars');
        returns its results.  ``label`` names the body in its ops' locations (``while/body``)."""
        written = NameStack((str(self._body_prefix),))
        prefix = written.extend(label) if label else written
        env = dict(zip(list(jaxpr.constvars) + list(jaxpr.invars), args))
        saved_loc, saved = (fn.location, fn.frontend_attributes), (self._body_prefix, self._body_eqn)
        try:
            return self._lower_body(fn, jaxpr, env, prefix)
        finally:
            fn.location, fn.frontend_attributes = saved_loc
            self._body_prefix, self._body_eqn = saved

    def _lower_body(self, fn: mt.FuncEmitter, jaxpr: Jaxpr, env: dict, prefix: NameStack) -> list[str]:
        """Emit ``jaxpr``'s equations into ``fn`` (``env``: its inputs' SSA values); its results' SSA values."""
        lit_cache: dict[tuple, str] = {}

        def read(atom: Any) -> str:
            if isinstance(atom, Literal):
                arr = np.asarray(atom.val, dtype=atom.aval.dtype)
                k = (arr.dtype.str, arr.tobytes())
                s = lit_cache.get(k)
                if s is None:
                    saved, fn.location = fn.location, ""
                    s = lit_cache[k] = fn.constant(arr)
                    fn.location = saved
                return s
            return env[atom]

        for eqn in jaxpr.eqns:
            rule = lowering_rules.get(eqn.primitive)
            if rule is None:
                raise MissingLoweringRule(
                    f"MLIR translation rule for primitive '{eqn.primitive.name}' not found for platform "
                    f"{self.platform}: primitive {eqn.primitive.name} has no StableHLO lowering rule "
                    f"(equation from {eqn.source_info})"
                )
            ins = [read(a) for a in eqn.invars]
            if self.meshes and getattr(eqn.primitive.sharding_rule, "elementwise", False) and len(eqn.outvars) == 1:
                ins = self._nary_inputs(fn, ins, eqn)
            info = eqn.source_info
            here = prefix + info.name_stack if info is not None else prefix
            # JAX's: the names as written, then the op, around the user's frames
            fn.location = mt.loc(info, f"{here}/{eqn.primitive.name}", self.outer_frames)
            meta = info.xla_metadata if info is not None else ()
            fn.frontend_attributes = "{" + ", ".join(f'{k} = "{mt._quoted(v)}"' for k, v in meta) + "}" if meta else ""
            self._body_prefix, self._body_eqn = here, eqn
            ctx = LoweringContext(fn, self, [a.aval for a in eqn.invars], [v.aval for v in eqn.outvars], eqn)
            krule = key_lowering_rules.get(eqn.primitive)
            if krule is not None and any(type(a.dtype) is KeyDtype for a in (*ctx.avals_in, *ctx.avals_out)):
                rule = krule
            try:
                outs = rule(ctx, *ins, **eqn.params)
            except InconclusiveDimensionOperation as e:  # a rule that needs a static size got a symbolic one
                raise FtransNotImplementedError(
                    f"shape polymorphism: lowering {eqn.primitive.name} (from {eqn.source_info}) with the symbolic "
                    f"shapes ({', '.join(a.str_short() for a in ctx.avals_in)}) is not supported by ftrans yet: "
                    f"{str(e).splitlines()[0]}") from e
            except (LoweringError, FtransError):  # FtransError: a user error a rule reports (wrong platform, ...)
                raise
            except Exception as e:  # a rule bug: say which equation it was lowering
                raise LoweringError(
                    f"lowering {eqn.primitive.name} (from {eqn.source_info}) failed: "
                    f"{type(e).__name__}: {e}"
                ) from e
            if isinstance(outs, str):
                outs = [outs]
            if len(outs) != len(eqn.outvars):
                raise LoweringError(f"lowering rule of {eqn.primitive.name} returned {len(outs)} results, "
                                    f"expected {len(eqn.outvars)}")
            # (a shard_map's results are laid out by its manual computation's out_shardings and its body, as
            # JAX's: no constraint after it)
            if self.meshes and eqn.primitive is not sharding_constraint_p and eqn.primitive is not shard_map_p:
                outs = [self._typed(fn, o, v.aval) for v, o in zip(eqn.outvars, outs)]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
        fn.location = fn.frontend_attributes = ""
        return [read(a) for a in jaxpr.outvars]

    def _nary_inputs(self, fn: mt.FuncEmitter, ins: list, eqn: Any) -> list:
        """The operands of a typed elementwise operation laid out as its result where their own type differs
        (JAX's lowering of one: an untyped or replicated operand is constrained to the result's layout)."""
        out = eqn.outvars[0].aval
        sh = out.typed_sharding
        if sh is None or sh.spec.unreduced or sh.spec.reduced:
            return ins
        new = []
        for ssa, a in zip(ins, eqn.invars):
            have = a.aval.typed_sharding
            if tuple(a.aval.shape) != tuple(out.shape) or (have is not None and (
                    have == sh or have.spec.unreduced or have.spec.reduced)):
                new.append(ssa)
            else:
                new.append(self._typed(fn, ssa, out))
        return new


    def _open_key_results(self, fn: mt.FuncEmitter, results: list[str], jaxpr: Jaxpr) -> list[str]:
        """Key arrays' data among main's results, left to the partitioner along the key array's axes and
        replicated along the key's own trailing axes (JAX's ``replicate_trailing_dims``), so no device holds
        part of a key."""
        out = list(results)
        for k, tail in self.open_key_results.items():
            aval = jaxpr.outvars[k].aval
            ndim = len(aval.shape) + (tail if type(aval.dtype) is KeyDtype else 0)  # a key-typed value's data
            dims = ", ".join(["{?}"] * (ndim - tail) + ["{}"] * tail)
            attr = f"#sdy.sharding<@{self.empty_mesh()}, [{dims}]>"
            out[k] = fn.emit("sdy.sharding_constraint", [out[k]], [fn.types[out[k]]], {"sharding": attr})[0]
        return out

    def _typed(self, fn: mt.FuncEmitter, ssa: str, aval: Any) -> str:
        """A result with a sharding type (Explicit mesh axes) constrained to it, so XLA lays it out so."""
        sh = aval.typed_sharding
        if sh is None:
            return ssa
        from ftrans.lowering.sdy import type_sharding_attr

        ndim = len(aval.shape)
        if is_user_edtype(aval.dtype):  # (an extended dtype's values: their representation's trailing axes)
            ndim += len(physical_element(aval.dtype)[0])
        attr = type_sharding_attr(self.mesh_symbol(sh.mesh), sh.spec, ndim, sh.mesh)
        return fn.emit("sdy.sharding_constraint", [ssa], [fn.types[ssa]], {"sharding": attr})[0]

    def text(self) -> str:
        attrs = (f"mhlo.num_partitions = {self.num_partitions} : i32, "
                 f"mhlo.num_replicas = {self.num_replicas} : i32")
        decls = [mesh_decl(sym, mesh) for mesh, sym in self.meshes.items() if mesh is not None]
        decls += list(self.extra_decls.values())
        funcs = "\n".join([*decls, self.main_text, *self.private])
        text = mt.strip_symbolic(f"module @{self.name} attributes {{{attrs}}} {{\n{funcs}\n}}\n")
        if _config.dump_ir_to:
            dump_ir(self.scope, getattr(self, "main_jaxpr", None), text)
        if self.host_callbacks:
            return ModuleText(text, self.host_callbacks)
        return text


class ModuleText(str):
    """A module's text that also carries the Python functions its host-callback custom calls run
    (``host_callbacks[i]`` for ``mhlo.backend_config = {index = i}``): compiling the text needs them."""

    def __new__(cls, text: str, host_callbacks: Sequence[Callable]) -> ModuleText:
        obj = super().__new__(cls, text)
        obj.host_callbacks = tuple(host_callbacks)
        return obj


def host_callbacks_of(text: str) -> tuple:
    """The host callbacks a module's text needs (empty for an ordinary module)."""
    return getattr(text, "host_callbacks", ())


def mesh_decl(sym: str, mesh: Any) -> str:
    """Shardy's declaration of a mesh: its axis names and sizes (partition i is the i-th device of the mesh)."""
    axes = ", ".join(f'"{n}"={s}' for n, s in zip(mesh.axis_names, mesh.axis_sizes))
    return f"  sdy.mesh @{sym} = <[{axes}]>"


def _sanitize(name: str) -> str:
    # MLIR's bare symbol names: letters, digits, ``_``, ``$`` and ``.`` (``@my.square``, a composite's).
    out = "".join(c if (c.isalnum() and c.isascii()) or c in "_$." else "_" for c in name)
    if not out or out[0].isdigit() or out[0] in "$.":
        out = "f_" + out
    # XLA's Shardy import takes a function whose name contains ``shmap_body`` for the body of a manual
    # computation it exported itself (and aborts the process on an ordinary one): a shard_map of a user's
    # ``body`` would be one.
    return out.replace("shmap_body", "shmap_fn_body")


def lower_jaxpr(jaxpr: Jaxpr, name: str = "main_fn", num_partitions: int = 1,
                donated_args: Sequence[bool] = (), platform: str = "cpu", outer_frames: tuple = (),
                module_name: str | None = None, result_attrs: Sequence[str] = (),
                arg_names: Sequence[str] = ()) -> str:
    """The StableHLO module text for ``jaxpr`` on ``platform``; its constvars are ``main``'s leading arguments.

    ``outer_frames``: the user's frames the program is lowered from (``(code, lasti)``, innermost first),
    which end every location of ``main`` (``Traced.lower``'s, as JAX's).  ``module_name``: the module's
    symbol (default ``name``; ``Traced.lower`` gives JAX's ``jit_<name>``); ``result_attrs``: ``main``'s
    result attributes (``jax.result_info``); ``arg_names``: the names of ``main``'s non-constant arguments,
    their locations (JAX's: the HLO parameters are named after them)."""
    m = ModuleLowering(module_name or name, num_partitions, platform=platform, scope=f"jit({name})")
    m.outer_frames = tuple(outer_frames)
    m.main_arg_names = tuple(arg_names)
    m.function(jaxpr, "main", public=True, donated_args=donated_args, result_attrs=result_attrs)
    return m.text()


def result_info_attrs(out_tree: Any, out_avals: Sequence[Any]) -> list[str]:
    """``jax.result_info`` of each result leaf: its place in the result (``result``, ``result['a'][0]``), as
    JAX writes on ``main``'s results."""
    from ftrans.core import pytrees as tree_util

    try:  # rebuilt on the abstract values (a registered node may look at its children)
        paths = [p for p, _ in tree_util.tree_flatten_with_path(tree_util.tree_unflatten(out_tree, out_avals))[0]]
    except Exception:  # a node that cannot be rebuilt so: results named by position
        paths = [(tree_util.SequenceKey(i),) for i in range(out_tree.num_leaves)]
    out = []
    for p in paths:
        text = "result" + tree_util.keystr(tuple(p))
        out.append('jax.result_info = "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return out


# ----------------------------------------------------------------------------
# Dumping each lowered program (JAX's ``jax_dump_ir_to`` / ``jax_dump_ir_modes``)

_dump_counter = itertools.count()


def dump_dir() -> pathlib.Path | None:
    """The directory ``config.dump_ir_to`` names (made if missing); "sponge" means the test-outputs
    directory of ``TEST_UNDECLARED_OUTPUTS_DIR``, as in JAX."""
    out = _config.dump_ir_to
    if not out:
        return None
    if out == "sponge":
        out = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", "")
        if not out:
            raise FtransError("dump_ir_to is 'sponge' but TEST_UNDECLARED_OUTPUTS_DIR is not set")
    path = pathlib.Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


def dump_ir(scope: str, jaxpr: Jaxpr | None, text: str) -> None:
    """Write a program just lowered (``scope``: ``jit(f)``) to ``config.dump_ir_to`` in each mode of
    ``config.dump_ir_modes``, under JAX's file names: ``jax_ir0000_jit_f_compile.mlir`` (the StableHLO
    module), ``jax_000000_f.jaxpr.txt``, ``.jaxpr.html`` and ``.eqn_count_pprof`` (a gzipped pprof profile
    counting the equations each line of the user's code made; view it with ``pprof``)."""
    out = dump_dir()
    if out is None:
        return
    modes = _config.dump_ir_modes.split(",")
    n = next(_dump_counter)
    fun = scope[scope.index("(") + 1:-1] if "(" in scope and scope.endswith(")") else scope
    safe = re.sub(r"[^\w.)( -]", "", fun)
    if "stablehlo" in modes:
        kind = re.sub(r"[^\w]", "", scope.split("(")[0]) or "jit"
        (out / f"jax_ir{n:04d}_{kind}_{safe}_compile.mlir").write_text(str(text))
    if jaxpr is None:
        return
    if "jaxpr" in modes:
        (out / f"jax_{n:06d}_{safe}.jaxpr.txt").write_text(str(jaxpr))
    if "jaxpr_html" in modes:
        (out / f"jax_{n:06d}_{safe}.jaxpr.html").write_text(jaxpr._repr_html_())
    if "eqn_count_pprof" in modes:
        (out / f"jax_{n:06d}_{safe}.eqn_count_pprof").write_bytes(eqn_count_pprof(jaxpr, fun))


def _all_eqns(jaxpr: Jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in subjaxprs(eqn):
            yield from _all_eqns(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub)


def eqn_count_pprof(jaxpr: Jaxpr, fun_name: str = "") -> bytes:
    """A gzipped pprof profile: one sample per (user's line, primitive) with the number of equations of
    ``jaxpr`` (nested bodies included) it made, as JAX's ``eqn_count_pprof`` dump."""
    strings: dict[str, int] = {"": 0}

    def s(x: str) -> int:
        return strings.setdefault(x, len(strings))

    counts = Counter((eqn.source_info, eqn.primitive.name) for eqn in _all_eqns(jaxpr))
    prim_key = s("primitive")
    funcs: dict[tuple, int] = {}
    locs: dict[tuple, int] = {}
    samples = []
    for (info, prim), count in counts.items():
        frames = []
        if info is not None:
            code = info.code
            qual = getattr(code, "co_qualname", info.function) if code is not None else info.function
            first = code.co_firstlineno if code is not None else info.lineno
            fkey = (info.filename, qual, first)
            fid = funcs.setdefault(fkey, len(funcs) + 1)
            lid = locs.setdefault((fid, info.lineno), len(locs) + 1)
            frames = [lid]
        samples.append({"location_id": frames, "value": [count],
                        "label": [{"key": prim_key, "str": s(prim)}]})
    functions = [{"id": fid, "name": s(f"{fn.removesuffix('.py').replace('/', '.')}.{qual}"), "filename": s(fn),
                  "start_line": first} for (fn, qual, first), fid in funcs.items()]
    locations = [{"id": lid, "line": [{"function_id": fid, "line": line}]} for (fid, line), lid in locs.items()]
    profile = {"string_table": None, "location": locations, "function": functions,
               "sample_type": [{"type": s("equations"), "unit": s("count")}], "sample": samples,
               "comment": s(fun_name)}
    profile["string_table"] = list(strings)
    return gzip.compress(compat.json_to_pprof(json.dumps(profile)))


# Registers every rule (the rule modules import this one, so this comes last).
from ftrans.lowering import rules as _rules  # noqa: E402,F401


def _donation_aliases(invars: Sequence[Any], outvars: Sequence[Any], donated: Sequence[bool],
                      alias_ok: Any = None) -> tuple[dict[int, int], set[int]]:
    """(argument index -> output index, buffer donors) by JAX's rule, so the same arguments are invalidated
    as in JAX: each output, in order, takes the first donated argument of its shape and dtype not yet taken
    (aliased when ``alias_ok(i, k)`` allows, else a buffer donor); each donated argument left takes an
    unaliased output of its number of elements (a buffer donor); the others are not donated."""
    free: dict[tuple, list[int]] = {}
    for i, (v, d) in enumerate(zip(invars, donated)):
        if d:
            free.setdefault((tuple(v.aval.shape), v.aval.dtype), []).append(i)
    out: dict[int, int] = {}
    donors: set[int] = set()
    for k, o in enumerate(outvars):
        waiting = free.get((tuple(o.aval.shape), o.aval.dtype))
        if waiting:
            i = waiting.pop(0)
            if alias_ok is None or alias_ok(i, k):
                out[i] = k
            else:
                donors.add(i)
    left: dict[int, int] = {}
    taken = set(out.values())
    for k, o in enumerate(outvars):
        if k not in taken:
            n = math.prod(o.aval.shape)
            left[n] = left.get(n, 0) + 1
    for i, (v, d) in enumerate(zip(invars, donated)):
        if d and i not in out and i not in donors:
            n = math.prod(v.aval.shape)
            if left.get(n):
                left[n] -= 1
                donors.add(i)
    return out, donors
