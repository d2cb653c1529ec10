"""StableHLO lowering of ``cond``, ``while`` and ``scan``.

Branches and loop bodies become private functions of the module (once per
jaxpr) called from the regions of ``stablehlo.case`` / ``stablehlo.while``, so
the printed module keeps each body readable on its own and nested control flow
nests functions rather than regions.  ``case`` regions read the operands from
the enclosing function; ``while`` regions cannot capture, so a loop's constants
travel in its carry (unchanged by the body), as XLA expects.

``scan`` is written as an ftrans program first: a ``while`` over a counter whose
body slices the ``xs`` at the step's index (``dynamic_slice``), runs the scan
body ``unroll`` times, and writes the ``ys`` into preallocated buffers
(``dynamic_update_slice``); the steps left over by ``unroll`` run unrolled
after the loop (a fully unrolled scan has no loop at all).  That program is
lowered by the ordinary rules, so scan needs no StableHLO of its own.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, hoist_consts
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.prims.control_flow import _run as _run_body
from ftrans.core.prims.control_flow import (
    cond_p,
    linear_solve_p,
    linear_solve_parts,
    scan_p,
    scan_split,
    while_p,
)
from ftrans.core.trace import aval_of, stage
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import register_lowering

_I32 = np.dtype(np.int32)


def _call(f: mt.FuncEmitter, sym: str, args: list[str], types: list[str]) -> list[str]:
    return f.emit("func.call", args, types, {"callee": f"@{sym}"})


@register_lowering(cond_p)
def _cond_lowering(ctx: Any, index: str, *ops: str, branches: tuple) -> list[str]:
    out_types = [mt.aval_type(a) for a in ctx.avals_out]
    if len(branches) == 1:
        sym = ctx.module.function(branches[0].jaxpr, "branch_0", label="cond/branch_0_fun")
        return _call(ctx.fn, sym, list(ops), out_types)
    idx_aval = ctx.avals_in[0]
    idx = ctx.convert(index, idx_aval, _I32)
    # stablehlo.case runs the last branch for any index out of range; ftrans clamps (a negative index runs 0).
    idx = ctx.emit1("stablehlo.clamp", [ctx.scalar(0, _I32), idx, ctx.scalar(len(branches) - 1, _I32)],
                    mt.tensor_type((), _I32))
    # Each branch is lowered inside its region (as JAX's), its ops under ``cond/branch_<i>_fun``.
    regions = [ctx.fn.region([], lambda f, _, i=i, b=b: ctx.module.inline(f, b.jaxpr, list(ops),
                                                                          f"cond/branch_{i}_fun"))
               for i, b in enumerate(branches)]
    return ctx.emit("stablehlo.case", [idx], out_types, regions=regions)


@register_lowering(linear_solve_p)
def _linear_solve_lowering(ctx: Any, *args: str, const_lengths: tuple, jaxprs: tuple) -> list[str]:
    """The solve, as a call of its body (matvec and the transpose only matter to derivatives)."""
    mv, vm, sv, _ = const_lengths
    solve = linear_solve_parts(jaxprs)[2]
    sym = ctx.module.function(solve.jaxpr, "custom_linear_solve")
    ops = list(args[mv + vm:mv + vm + sv]) + list(args[sum(const_lengths):])
    return _call(ctx.fn, sym, ops, [mt.aval_type(a) for a in ctx.avals_out])


@register_lowering(while_p)
def _while_lowering(ctx: Any, *args: str, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                    body_nconsts: int) -> list[str]:
    nc, nb = cond_nconsts, body_nconsts
    types = [mt.aval_type(a) for a in ctx.avals_in]

    # The predicate and the body are lowered inside the loop's regions (as JAX's).
    def cond_region(f: mt.FuncEmitter, xs: list[str]) -> list[str]:
        return ctx.module.inline(f, cond_jaxpr.jaxpr, xs[:nc] + xs[nc + nb:], "while/cond")

    def body_region(f: mt.FuncEmitter, xs: list[str]) -> list[str]:
        return xs[:nc + nb] + ctx.module.inline(f, body_jaxpr.jaxpr, xs[nc:nc + nb] + xs[nc + nb:], "while/body")

    regions = [ctx.fn.region(types, cond_region), ctx.fn.region(types, body_region)]
    outs = ctx.emit("stablehlo.while", list(args), types, regions=regions)
    return outs[nc + nb:]


# ----------------------------------------------------------------------------
# scan as a while loop


def _index_x(x: Any, i: Any) -> Any:
    """``x[i]`` for a traced ``i`` (an int32 scalar already in range)."""
    zero = np.int32(0)
    sl = S.dynamic_slice_p.bind(x, i, *[zero] * (x.ndim - 1), slice_sizes=(1,) + tuple(x.shape[1:]))
    return S.reshape_p.bind(sl, new_sizes=tuple(x.shape[1:]), dimensions=None)


def _write_y(buf: Any, y: Any, i: Any) -> Any:
    zero = np.int32(0)
    upd = S.reshape_p.bind(y, new_sizes=(1,) + tuple(y.shape), dimensions=None)
    return S.dynamic_update_slice_p.bind(buf, upd, i, *[zero] * (buf.ndim - 1))


def _laid_out_as(v: Any, body_aval: Any, stacked: bool = False) -> Any:
    """An untyped operand of a scan whose body takes a typed (sharded, not unreduced) value there, given that
    layout (a cotangent seeded untyped, say): the body's typed operations are replayed on typed values."""
    sh = getattr(body_aval, "typed_sharding", None)
    if sh is None or sh.spec.unreduced or getattr(aval_of(v), "typed_sharding", None) is not None:
        return v
    from ftrans.core.prims.sharding import sharding_constraint_p
    from ftrans.core.sharding import NamedSharding, PartitionSpec

    spec = PartitionSpec(*((None,) if stacked else ()), *sh.spec, reduced=sh.spec.reduced)
    return sharding_constraint_p.bind(v, sharding=NamedSharding(sh.mesh, spec))


def _typed_buffer(y_aval: Any, buf: Any) -> Any:
    """A scan's buffer of outputs typed unreduced/reduced over mesh axes takes that type from the start (as
    JAX's): the partitioner then keeps the loop's partial sums as they are instead of reducing them."""
    sh = getattr(y_aval, "typed_sharding", None)
    if sh is None or not (sh.spec.unreduced or sh.spec.reduced):
        return buf
    from ftrans.core.prims.sharding import sharding_constraint_p
    from ftrans.core.sharding import NamedSharding, PartitionSpec

    spec = PartitionSpec(None, *sh.spec, unreduced=sh.spec.unreduced, reduced=sh.spec.reduced)
    return sharding_constraint_p.bind(buf, sharding=NamedSharding(sh.mesh, spec))


def scan_to_while(in_avals: list[ShapedArray], *, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int,
                  length: int, reverse: bool, unroll: int) -> ClosedJaxpr:
    """An ftrans program with the scan's inputs and outputs that runs it as a ``while`` loop."""
    y_avals = jaxpr.out_avals[num_carry:]
    unroll = max(1, min(int(unroll), max(length, 1)))
    trips, rest = divmod(length, unroll)
    if trips == 1:  # fully unrolled: straight-line steps, no while loop (as JAX lowers unroll >= length)
        trips, rest = 0, length

    def step(consts: list, xs: list, i: Any, carry: list, ys: list) -> tuple[list, list]:
        idx = E.sub_p.bind(np.int32(length - 1), i) if reverse else i
        outs = eval_jaxpr(jaxpr.jaxpr, list(jaxpr.consts), *consts, *carry, *[_index_x(x, idx) for x in xs])
        ys = [_write_y(b, y, idx) for b, y in zip(ys, outs[num_carry:])]
        return list(outs[:num_carry]), ys

    def run(*args: Any) -> list:
        consts, carry, xs = scan_split(args, num_consts, num_carry)
        body_in = scan_split(jaxpr.in_avals, num_consts, num_carry)
        consts = [_laid_out_as(v, a) for v, a in zip(consts, body_in[0])]
        carry = [_laid_out_as(v, a) for v, a in zip(carry, body_in[1])]
        xs = [_laid_out_as(v, a, stacked=True) for v, a in zip(xs, body_in[2])]
        # The buffers take the outputs' exact dtypes (an int64 output of a body traced under enable_x64
        # stays int64 though this lowering runs with x64 off), so no canonicalizing NumPy constant here.
        ys = [_typed_buffer(a, S.broadcast_in_dim_p.bind(Array._new(np.zeros((), a.dtype), False),
                                                         shape=(length,) + a.shape, broadcast_dimensions=()))
              for a in y_avals]
        n_c, n_x = len(consts), len(xs)
        if trips:
            def w_cond(i: Any, *_: Any) -> Any:
                return E.lt_p.bind(i, np.int32(trips * unroll))

            def w_body(*c: Any) -> list:
                cs, xv = list(c[:n_c]), list(c[n_c:n_c + n_x])
                i = c[n_c + n_x]
                cr = list(c[n_c + n_x + 1:n_c + n_x + 1 + num_carry])
                yv = list(c[n_c + n_x + 1 + num_carry:])
                for k in range(unroll):
                    cr, yv = step(cs, xv, E.add_p.bind(i, np.int32(k)), cr, yv)
                return [E.add_p.bind(i, np.int32(unroll))] + cr + yv

            loop_in = [np.int32(0)] + carry + ys
            operand_avals = [aval_of(v) for v in list(consts) + list(xs)]
            carry_avals = [aval_of(v) for v in loop_in]
            cj, cc = hoist_consts(stage(lambda *c: [w_cond(*c)], carry_avals)[0])
            bj, bc = hoist_consts(stage(w_body, operand_avals + carry_avals)[0])
            outs = while_p.bind(*cc, *bc, *consts, *xs, *loop_in, cond_jaxpr=cj, body_jaxpr=bj,
                                cond_nconsts=len(cc), body_nconsts=len(bc) + n_c + n_x)
            carry, ys = list(outs[1:1 + num_carry]), list(outs[1 + num_carry:])
        for k in range(rest):
            carry, ys = step(consts, xs, np.int32(trips * unroll + k), carry, ys)
        return carry + ys

    closed, _ = stage(run, list(in_avals))
    return closed


@register_lowering(scan_p)
def _scan_lowering(ctx: Any, *args: str, **params: Any) -> list[str]:
    closed = scan_to_while(list(ctx.avals_in), **params)
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    # No name of its own in the locations: the loop's are JAX's, ``foo/while/body/...``.
    sym = ctx.module.function(closed.jaxpr, "scan", label="")
    return _call(ctx.fn, sym, consts + list(args), [mt.aval_type(a) for a in ctx.avals_out])


# ----------------------------------------------------------------------------
# Long eager loops are compiled
#
# Eagerly (concrete operands, no enclosing jit) core's rules interpret a loop's body on the host step by
# step, which is the fastest way to run a short loop but costs a dispatch per step: a ``scan`` over
# thousands of steps of a jitted update (an optimizer run eagerly) would take a minute where JAX, which
# compiles every loop it evaluates, takes a second.  So a loop that runs long is compiled once as a
# one-equation program and run as one executable: a ``scan`` longer than ``HOST_LOOP_STEPS`` whole, a
# ``while`` from the carry it reached after ``HOST_LOOP_STEPS`` steps on the host.  The program is cached
# with the body's jaxpr (a body traced once, as ``jit`` and the loop APIs cache them, compiles once).

HOST_LOOP_STEPS = 64

_host_scan = scan_p.impl
_host_while = while_p.impl
# body jaxpr -> {(operand types, params): program, or None when the loop cannot run as one executable}
_loop_programs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _loop_program(prim: Any, body: ClosedJaxpr, avals: list[ShapedArray], params: dict) -> ClosedJaxpr | None:
    """The one-equation program ``prim[params]`` over operands of ``avals`` (cached with ``body``), or None
    when it cannot run as one executable (a ``pmap`` or a multi-device mesh inside, or jit's host-only
    first call)."""
    from ftrans.core.ir import Jaxpr, JaxprEqn, Var
    from ftrans.core.primitive import abstract_eval_rules
    from ftrans.core.prims.parallel import pmap_in_program
    from ftrans.lowering.device_eager import freeze
    from ftrans.lowering.rules.calls import _program_mesh, host_only_active

    if host_only_active():
        return None
    per = _loop_programs.setdefault(body, {})
    key = (tuple(avals), freeze(params))
    if key in per:
        return per[key]
    program = None
    subs = [params[k] for k in ("jaxpr", "cond_jaxpr", "body_jaxpr") if k in params]
    if not any(pmap_in_program(s) or _program_mesh(s.jaxpr) is not None for s in subs):
        outs = abstract_eval_rules[prim](*avals, **params)
        weaks = prim.weak_type_rule(tuple(a.weak_type for a in avals), **params)
        invars = [Var(a) for a in avals]
        outvars = [Var(o.update(weak_type=bool(w))) for o, w in zip(outs, weaks)]
        program = ClosedJaxpr(Jaxpr([], invars, [JaxprEqn(prim, invars, outvars, dict(params), None)], outvars), [])
    per[key] = program
    return program


_body_facts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # jaxpr -> (holds a pmap, its mesh)


def _run_partitioned(prim: Any, bodies: tuple, vals: list, params: dict, name: str) -> list | None:
    """A loop or ``cond`` whose body constrains values over a mesh of several devices (a
    ``with_sharding_constraint``, a ``shard_map``), run as one program partitioned over that mesh, as JAX
    runs an eager loop: its results are laid out as the body leaves them. None: no such mesh in ``bodies``
    (or jit's host-only first call)."""
    from ftrans.core.ir import Jaxpr, JaxprEqn, Var
    from ftrans.core.primitive import abstract_eval_rules
    from ftrans.core.prims.parallel import pmap_in_program
    from ftrans.lowering.rules.calls import _program_mesh, _spmd_executable_for_jaxpr, host_only_active

    if host_only_active():
        return None
    facts = []
    for b in bodies:  # (read once per body: an eager loop of a library function runs here on every call)
        f = _body_facts.get(b.jaxpr)
        if f is None:
            f = _body_facts[b.jaxpr] = (pmap_in_program(b), _program_mesh(b.jaxpr))
        facts.append(f)
    if any(f[0] for f in facts):
        return None
    mesh = next((f[1] for f in facts if f[1] is not None), None)
    if mesh is None:
        return None
    avals = [_operand_aval(v) for v in vals]
    outs = abstract_eval_rules[prim](*avals, **params)
    weaks = prim.weak_type_rule(tuple(a.weak_type for a in avals), **params)
    invars = [Var(a) for a in avals]
    outvars = [Var(o.update(weak_type=bool(w))) for o, w in zip(outs, weaks)]
    program = ClosedJaxpr(Jaxpr([], invars, [JaxprEqn(prim, invars, outvars, dict(params), None)], outvars), [])
    return _spmd_executable_for_jaxpr(program, mesh, name).run(
        [v._value if isinstance(v, Array) and not hasattr(v, "sharding") else v for v in vals])


def _run_compiled(program: ClosedJaxpr, vals: list, name: str) -> list:
    from ftrans.devices import default_device
    from ftrans.lowering import executable as X
    from ftrans.lowering.rules.calls import _executable_for_jaxpr

    exe = _executable_for_jaxpr(program, default_device(), name)
    outs = exe.run([X.to_buffer(np.asarray(v._value if isinstance(v, Array) else v), exe.device) for v in vals])
    return [np.asarray(o) for o in outs]


def _operand_aval(v: Any) -> ShapedArray:
    if isinstance(v, Array):
        return v.aval.update(weak_type=False)
    a = np.asarray(v)
    return ShapedArray(a.shape, a.dtype)


# JAX runs an eager ``cond``/``while_loop``/``scan`` compiled, so a user's primitive with a lowering rule
# (``mlir.register_lowering``) and no eager rule (``def_impl``) works in their bodies: ftrans compiles a body
# holding such a primitive too (the host cannot run it).
_impl_less: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _holds_impl_less(jaxprs: Any) -> bool:
    """Whether a primitive without an eager rule is in ``jaxprs`` (at any depth)."""
    from ftrans.core.ir import subjaxprs

    for j in jaxprs:
        jj = j.jaxpr if isinstance(j, ClosedJaxpr) else j
        hit = _impl_less.get(jj)
        if hit is None:
            hit = _impl_less[jj] = any(
                _holds_impl_less(subjaxprs(e)) if e.primitive.higher_order else e.primitive.impl is None
                for e in jj.eqns)
        if hit:
            return True
    return False


_host_cond = cond_p.impl


@cond_p.def_impl
def _cond_eager(*vals: Any, branches: tuple) -> list:
    """A ``cond`` runs its branch on the host, or compiled when a branch holds a primitive only its lowering
    can run (or partitioned, when a branch constrains values over several devices)."""
    out = _run_partitioned(cond_p, tuple(branches), list(vals), {"branches": branches}, "cond")
    if out is not None:
        return out
    if _holds_impl_less(branches):
        params = {"branches": branches}
        program = _loop_program(cond_p, branches[0], [_operand_aval(v) for v in vals], params)
        out = _run_impl_less(program, list(vals), "cond")
        if out is not None:
            return out
    return _host_cond(*vals, branches=branches)


def _run_impl_less(program: ClosedJaxpr | None, vals: list, name: str) -> list | None:
    """A loop or ``cond`` whose body holds a primitive without an eager rule, compiled and run; None when it
    cannot be (no single executable, or that primitive has no lowering rule either: the host interprets the
    body then, which raises only if the primitive is reached)."""
    from ftrans.lowering.lower import MissingLoweringRule

    if program is None:
        return None
    try:
        return _run_compiled(program, vals, name)
    except MissingLoweringRule:
        return None


@scan_p.def_impl
def _scan_eager(*vals: Any, **params: Any) -> list:
    """A scan of more than ``HOST_LOOP_STEPS`` steps (or whose body holds a primitive only its lowering can
    run) runs compiled; a shorter one on the host. One whose body constrains values over several devices runs
    partitioned over them."""
    out = _run_partitioned(scan_p, (params["jaxpr"],), list(vals), params, "scan")
    if out is not None:
        return out
    if _holds_impl_less((params["jaxpr"],)):
        program = _loop_program(scan_p, params["jaxpr"], [_operand_aval(v) for v in vals], params)
        out = _run_impl_less(program, list(vals), "scan")
        if out is not None:
            return out
    elif params["length"] > HOST_LOOP_STEPS:
        program = _loop_program(scan_p, params["jaxpr"], [_operand_aval(v) for v in vals], params)
        if program is not None:
            return _run_compiled(program, list(vals), "scan")
    return _host_scan(*vals, **params)


@while_p.def_impl
def _while_eager(*vals: Any, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                 body_nconsts: int) -> list:
    """A while loop runs on the host for its first ``HOST_LOOP_STEPS`` steps, then compiled from there."""
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    out = _run_partitioned(while_p, (cond_jaxpr, body_jaxpr), list(vals), params, "while")
    if out is not None:  # a body constraining values over several devices runs partitioned from the start
        return out
    vals = [v if isinstance(v, Array) else Array._new(np.asarray(v), False) for v in vals]
    nc = cond_nconsts + body_nconsts
    cc, bc, carry = vals[:cond_nconsts], vals[cond_nconsts:nc], vals[nc:]
    if _holds_impl_less((cond_jaxpr, body_jaxpr)):  # compiled from the start, when it can be
        program = _loop_program(while_p, body_jaxpr, [_operand_aval(v) for v in vals], params)
        out = _run_impl_less(program, vals, "while")
        if out is not None:
            return out
    for _ in range(HOST_LOOP_STEPS):
        if not bool(np.asarray(_run_body(cond_jaxpr, *cc, *carry)[0])):
            return [np.asarray(o, a.dtype) for o, a in zip(carry, body_jaxpr.out_avals)]
        carry = _run_body(body_jaxpr, *bc, *carry)
    carry = [o if isinstance(o, Array) else Array._new(np.asarray(o, a.dtype), False)
             for o, a in zip(carry, body_jaxpr.out_avals)]
    rest = [*cc, *bc, *carry]
    program = _loop_program(while_p, body_jaxpr, [_operand_aval(v) for v in rest], params)
    if program is not None:
        return _run_compiled(program, rest, "while")
    return _host_while(*rest, **params)
