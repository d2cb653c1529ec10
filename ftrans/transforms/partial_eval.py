"""Partial evaluation: ``linearize``, and splitting a jaxpr into known and unknown parts.

``linearize`` runs the JVP with the *tangents* as tracers of a staging trace
(``LinearizeTrace``) pushed below the JVP level and not made the dynamic
trace.  JVP rules compute primal values from primals only, so every primal
operation finds no linearize tracer among its operands and runs at the level
below (eagerly, or staged into an enclosing ``jit``); every tangent operation
reads a linearize tracer and is recorded.  The recorded program is the linear
map, and the primal values it reads (residuals) become its constants.  That is
partial evaluation with "known" = primal and "unknown" = tangent, without a
separate known/unknown value type.

Higher-order primitives whose JVP binds one equation mixing primal and
tangent operands (the call-like ones, control flow) have a
``partial_eval_rules`` entry that splits their body with
``partial_eval_jaxpr``: the known half runs now, the unknown half is
recorded, and the values passed between them are the residuals.  A split may
follow a policy (``remat``'s) saying which known values may be saved; the
rest are recomputed inside the unknown half.  The call-like primitives' rules
are ``ftrans/transforms/ad_rules/calls.py``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, NameStack, Var, dce_jaxpr, eqn_has_effects
from ftrans.core.primitive import Primitive, rule_table
from ftrans.core.trace import (
    DynamicJaxprTrace,
    JaxprBuilder,
    StagingTracer,
    Tracer,
    aval_of,
    new_main,
    transform_name_stack,
)
from ftrans.core.trace import state as _trace_state

__all__ = [
    "LinearizeTrace", "linearize_flat", "partial_eval_jaxpr", "dce_jaxpr", "partial_eval_rules",
]

# prim -> rule(trace, tracers, params): splits an equation with known and unknown operands.
partial_eval_rules: dict[Primitive, Callable[..., Any]] = rule_table(
    "partial_eval", owner=__name__, higher_order_only=True)


class _LinearizeBuilder(JaxprBuilder):
    __slots__ = ("known",)

    def __init__(self) -> None:
        super().__init__()
        self.known: dict[int, Any] = {}  # id(var) -> the known value it stands for

    def release(self) -> None:
        super().release()
        self.known = {}


class LinearizeTrace(DynamicJaxprTrace):
    """Records only operations that read a tangent; everything else runs at the level below."""

    __slots__ = ()

    def pure(self, val: Any) -> StagingTracer:
        if isinstance(val, Array) and val.ndim == 0:
            # A scalar array the linear program reads is a residual (a constant of the jaxpr, a leaf of the
            # pullback), as in JAX; only Python scalars become literals.
            builder = self.main.payload
            t = builder.const_tracers.get(id(val))
            if t is None:
                aval = ShapedArray((), val.dtype, val.weak_type)
                v = Var(aval)
                t = StagingTracer(self, aval, v)
                builder.const_tracers[id(val)] = t
                builder.keepalive.append(val)
                builder.const_vals.append((v, val))
                builder.known[id(v)] = val
            return t
        t = super().pure(val)
        if isinstance(t.atom, Var):
            self.main.payload.known[id(t.atom)] = val
        return t

    def lift(self, tracer: Tracer) -> StagingTracer:
        t = super().lift(tracer)
        self.main.payload.known[id(t.atom)] = tracer
        return t

    def known_value(self, t: StagingTracer) -> tuple[bool, Any]:
        """(True, value) if ``t`` is a known (primal) value captured by this trace."""
        a = t.atom
        if isinstance(a, Literal):
            return True, Array._new(np.asarray(a.val, a.aval.dtype), a.aval.weak_type)
        v = self.main.payload.known.get(id(a), _MISSING)
        return (v is not _MISSING), v

    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> Any:
        rule = partial_eval_rules.get(prim)
        if rule is not None:
            return rule(self, tracers, params)
        return super().process_primitive(prim, tracers, params)

    def record(self, prim: Primitive, tracers: list, params: dict) -> Any:
        return DynamicJaxprTrace.process_primitive(self, prim, tracers, params)


_MISSING = object()


def linearize_flat(fun: Callable, primals: Sequence[Any], given: Sequence[tuple | None] | None = None,
                   transform: str | None = None) -> tuple[list, ClosedJaxpr, list[bool], list[bool], Any]:
    """Linearize ``fun`` (flat list in -> (flat list out, aux)) at ``primals``.

    Returns the primal outputs, the linear jaxpr (inputs: the tangents of the
    differentiable inputs; outputs: the tangents of the outputs, instantiated),
    which inputs are differentiable (inexact), which output tangents are
    symbolically zero, and ``aux``.  Residuals are the linear jaxpr's constants.  ``given`` is
    :func:`jvp_flat`'s (Python scalar primals handed back unchanged).

    ``transform``: the name (``jvp``) the API entry point records in the name stack of the equations it
    stages.  The linear jaxpr's equations keep only the names added since linearization began, as JAX's
    (``jvp(foo)``), so its transposition, wherever it runs, adds its own before them
    (``vmap(transpose(jvp(foo)))``).
    """
    base = _trace_state.name_stack
    builder = _LinearizeBuilder()
    in_avals = [tangent_aval(aval_of(p)) for p in primals]
    diff = [a.dtype != float0 for a in in_avals]
    try:
        with new_main(LinearizeTrace, builder) as main:
            trace: LinearizeTrace = main.trace
            tangents = [trace.new_arg(a) if d else Zero(a) for a, d in zip(in_avals, diff)]
            if transform is None:
                p_out, t_out, aux = jvp_flat(fun, primals, tangents, given)
            else:
                with transform_name_stack(transform):
                    p_out, t_out, aux = jvp_flat(fun, primals, tangents, given)
            zero_out = [type(t) is Zero for t in t_out]
            out_tracers = [trace.full_raise(instantiate(t)) for t, z in zip(t_out, zero_out) if not z]
            in_tracers = [t for t in tangents if type(t) is not Zero]
            jaxpr, consts = builder.build(in_tracers, out_tracers)
    finally:
        builder.release()  # the residuals live on in the linear jaxpr alone
    if base:
        jaxpr = _names_after(jaxpr, base)
    return p_out, _prune_linear(jaxpr, consts), diff, zero_out, aux


def _names_after(jaxpr: Jaxpr, base: Any) -> Jaxpr:
    """``jaxpr`` with ``base`` (the names active where linearization began) cut from the front of its
    equations' name stacks."""
    n = len(base.elems)
    eqns = []
    for e in jaxpr.eqns:
        info = e.source_info
        if info is not None and info.name_stack.elems[:n] == base.elems:
            e = e.replace(source_info=info._replace(name_stack=NameStack(info.name_stack.elems[n:])))
        eqns.append(e)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)


def _prune_linear(jaxpr: Jaxpr, consts: list) -> ClosedJaxpr:
    """Drop the linear program's dead equations (a tangent nobody reads) and the residuals only they read,
    as JAX's linearize does, so a pullback keeps no value alive that its backward pass never uses."""
    new, _ = dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    read = {id(a) for e in new.eqns for a in e.invars} | {id(v) for v in new.outvars}
    if new is jaxpr and all(id(v) in read for v in jaxpr.constvars):
        return ClosedJaxpr(jaxpr, consts)
    keep = [id(v) in read for v in jaxpr.constvars]
    return ClosedJaxpr(Jaxpr([v for v, k in zip(jaxpr.constvars, keep) if k], new.invars, new.eqns, new.outvars),
                       [c for c, k in zip(consts, keep) if k])


# ----------------------------------------------------------------------------
# Splitting a jaxpr


# closed -> {(unknowns, instantiate, also): split}.  Linearizing the same body again (``grad`` of a function
# with a ``cond``/``scan``/``jit`` inside, called in a loop) must give the very same halves: the calls inside
# them are then the same jaxprs and find their executables instead of being lowered again.  Splits under a
# remat policy are not kept here: policies are often closures made afresh per call (a key per closure would
# grow without bound); a checkpoint's own split is kept by its user-level policy (``ad_rules/calls.py``).
_split_memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns: Sequence[bool],
                       saveable: Callable[[JaxprEqn], bool] | None = None,
                       instantiate: Sequence[bool] | None = None, also: Sequence[bool] | None = None
                       ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split ``closed`` given which inputs are unknown (memoized per body; ``_split_eval`` says how)."""
    if saveable is not None:
        return _split_eval(closed, unknowns, saveable, instantiate, also)
    key = (tuple(unknowns), None if instantiate is None else tuple(instantiate),
           None if also is None else tuple(also))
    per = _split_memo.get(closed)
    if per is not None:
        got = per.get(key)
        if got is not None:
            return got
    got = _split_eval(closed, unknowns, None, instantiate, also)
    if not any(isinstance(c, Tracer) for c in closed.consts) and not _axis_bound():
        _split_memo.setdefault(closed, {})[key] = got
    return got


def _axis_bound() -> bool:
    """Whether named axes are bound (a pmap/shard_map body being split): its halves may depend on them."""
    from ftrans.core.axis_env import axis_env

    return bool(axis_env.frames)


def _restaged_debug_callbacks(jaxpr: Jaxpr, items: list, saveable: Callable[[JaxprEqn], bool]) -> set[int]:
    """JAX's rule for a debug callback the remat policy saves: it runs in the recomputation too when every
    value it reads is there (the body's inputs, or outputs of equations the policy does not save), so a print
    shows what the backward pass recomputes. Returns the ids of those callback equations."""
    from ftrans.core.prims.callbacks import debug_callback_p, debug_print_p

    if not any(it[0] == "known" and it[1].primitive in (debug_callback_p, debug_print_p) for it in items):
        return set()
    there = {id(v) for v in (*jaxpr.constvars, *jaxpr.invars)}
    out: set[int] = set()
    for it in items:
        eqn = it[1]
        if it[0] == "unknown":
            there.update(id(v) for v in eqn.outvars)
        elif it[0] == "known":
            if eqn.primitive in (debug_callback_p, debug_print_p):
                if saveable(eqn) and all(not isinstance(a, Var) or id(a) in there for a in eqn.invars):
                    out.add(id(eqn))
            elif not saveable(eqn):
                there.update(id(v) for v in eqn.outvars)
    return out


def _split_eval(closed: ClosedJaxpr, unknowns: Sequence[bool],
                saveable: Callable[[JaxprEqn], bool] | None = None,
                instantiate: Sequence[bool] | None = None, also: Sequence[bool] | None = None
                ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split ``closed`` given which inputs are unknown.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` takes the
    known inputs and returns the known outputs followed by ``num_res``
    residuals; ``unknown`` takes the residuals followed by the unknown inputs
    and returns the unknown outputs.  An equation is unknown when it reads an
    unknown value.  With ``saveable`` (a remat policy), a known value the
    unknown part needs is passed as a residual only if its equation is
    saveable; otherwise that equation is recomputed in the unknown part. An
    effectful known equation (a debug callback) the policy does not save is
    recomputed too, so it runs again with the recomputation, as in JAX.

    The policy reaches into nested bodies (a ``cond``'s branches, a ``scan``'s
    body, a ``jit`` call): their split rules apply it, so a saveable value
    inside a branch is a residual of the known branch and the rest of the
    branch is recomputed by the unknown one, as JAX's ``partial_eval_jaxpr_custom``
    does, instead of the whole equation being recomputed.

    ``instantiate`` marks outputs that must come out of the unknown part even
    when known (they count as unknown in ``out_unknowns`` and leave the known
    outputs); ``also`` marks known outputs the unknown part must produce as
    well (they stay known outputs; the unknown part's outputs are the
    positions that are unknown or ``also``, in order).  Either kind is a
    residual, or, under a policy, recomputed unless saveable.
    """
    jaxpr = closed.jaxpr
    unknown: set[int] = {id(v) for v, u in zip(jaxpr.invars, unknowns) if u}
    # items in program order: ["known", eqn] | ["unknown", eqn] | ["split", eqn, unk_in, known eqn, unknown eqn,
    # out_unk, rule]
    items: list[list] = []
    for eqn in jaxpr.eqns:
        unk_in = [isinstance(a, Var) and id(a) in unknown for a in eqn.invars]
        if not any(unk_in):
            items.append(["known", eqn])
            continue
        rule = partial_eval_jaxpr_rules.get(eqn.primitive)
        if rule is not None and not all(unk_in):
            # A call mixing known and unknown operands: split its body too, so its known
            # outputs stay known (and are not treated as linear by the transpose).
            aware = saveable is not None and getattr(rule, "policy_aware", False)
            split = rule(eqn, unk_in, saveable=saveable) if aware else None
            if split is None:  # no policy, or the rule declined to apply it (the whole known half is saved
                aware = False  # or recomputed, below)
                split = rule(eqn, unk_in)
            k_eqn, u_eqn, out_unk = split
            items.append(["split", eqn, unk_in, k_eqn, u_eqn, out_unk, rule if aware else None])
            unknown.update(id(v) for v, u in zip(eqn.outvars, out_unk) if u)
            continue
        items.append(["unknown", eqn])
        unknown.update(id(v) for v in eqn.outvars)
    real_unk = [isinstance(v, Var) and id(v) in unknown for v in jaxpr.outvars]
    inst = list(instantiate) if instantiate is not None else [False] * len(real_unk)
    also_l = list(also) if also is not None else [False] * len(real_unk)
    force = [not u and i for u, i in zip(real_unk, inst)]
    extra = [not u and not i and a for u, i, a in zip(real_unk, inst, also_l)]
    out_unknowns = [u or f for u, f in zip(real_unk, force)]

    if saveable is not None:
        for it in items:
            if it[0] == "known" and it[1].primitive.name == "io_callback":
                raise NotImplementedError(
                    f"Effects not supported in AD of `checkpoint`/`remat`: an io_callback (from "
                    f"{it[1].source_info}) inside a checkpointed function would run again when the backward pass "
                    "recomputes it; move it out of the checkpoint (debug callbacks are allowed)")

    # Walk back from the outputs: what the unknown part needs from the known side, and, under a policy,
    # which known equations it recomputes (in place, so the unknown part keeps program order).
    needed: set[int] = {id(v) for v, f, e in zip(jaxpr.outvars, force, extra) if (f or e) and isinstance(v, Var)}
    staged: list[list[JaxprEqn]] = [[] for _ in items]
    restage = _restaged_debug_callbacks(jaxpr, items, saveable) if saveable is not None else set()

    def need_known_ins(eqn: JaxprEqn) -> None:
        needed.update(id(a) for a in eqn.invars if isinstance(a, Var) and id(a) not in unknown)

    for idx in range(len(items) - 1, -1, -1):
        it = items[idx]
        kind = it[0]
        if kind == "unknown":
            staged[idx] = [it[1]]
            need_known_ins(it[1])
            continue
        if kind == "split":
            eqn, unk_in, k_eqn, u_eqn, out_unk, rule = it[1:]
            if rule is not None and k_eqn is not None:
                # The known half's residuals were chosen by the policy inside the body: they may be saved.
                # Known outputs the unknown side reads are recomputed under the policy by a second split
                # of the known half (all of whose operands are known, so the backward pass evaluates that
                # recomputation forward; the unknown half reads tangents, so it could not carry them).
                want = [id(v) in needed for v in k_eqn.outvars]
                group = [u_eqn]
                if any(want):
                    # First choice: split the equation again, its unknown half producing those known outputs
                    # as well (a scan threads the known carries it already recomputes), so nothing runs twice.
                    want_out = [id(v) in needed for v in eqn.outvars]
                    again = rule(eqn, unk_in, saveable=saveable, force=want_out) if any(want_out) else None
                    if again is not None and again[0] is not None and list(again[2]) == list(out_unk):
                        it[3], u_eqn = again[0], again[1]
                        staged[idx] = [u_eqn]
                        needed.difference_update(id(v) for v, w in zip(eqn.outvars, want_out) if w)
                        need_known_ins(u_eqn)
                        continue
                    k2, u2, _ = rule(k_eqn, [False] * len(k_eqn.invars), saveable=saveable, force=want) or \
                        (None, None, None)
                    if k2 is not None:
                        it[3] = k2
                        group = [u2, u_eqn]
                        needed.difference_update(id(v) for v, w in zip(k_eqn.outvars, want) if w)
                        need_known_ins(u2)
                staged[idx] = group
                need_known_ins(u_eqn)
                continue
            staged[idx] = [u_eqn]
            need_known_ins(u_eqn)
            if (saveable is not None and k_eqn is not None and any(id(v) in needed for v in k_eqn.outvars)
                    and not saveable(k_eqn)):  # a split the policy cannot reach into: recompute its known half
                staged[idx] = [k_eqn, u_eqn]
                needed.difference_update(id(v) for v in k_eqn.outvars)
                needed.update(id(a) for a in k_eqn.invars if isinstance(a, Var))
            continue
        eqn = it[1]
        if saveable is None:
            continue
        wanted = [id(v) in needed for v in eqn.outvars]
        # (an effectful equation runs again in the recomputation, as JAX's; inspect_array_sharding's does not)
        effects = eqn_has_effects(eqn) and eqn.primitive.name != "inspect_sharding"
        if (not (any(wanted) or effects) or saveable(eqn)) and id(eqn) not in restage:
            continue
        rule = partial_eval_jaxpr_rules.get(eqn.primitive)
        if rule is not None and any(wanted) and getattr(rule, "policy_aware", False):
            # A known call / cond / scan the policy does not save whole: split it under the policy too, so
            # what the policy saves inside it is a residual and only the rest is recomputed.
            k2, u2, _ = rule(eqn, [False] * len(eqn.invars), saveable=saveable, force=wanted) or (None, None, None)
            if k2 is not None:
                items[idx] = ["split", eqn, None, k2, u2, None, None]
                staged[idx] = [u2]
                needed.difference_update(id(v) for v, w in zip(eqn.outvars, wanted) if w)
                need_known_ins(u2)
                continue
        staged[idx] = [eqn]
        needed.difference_update(id(v) for v in eqn.outvars)
        needed.update(id(a) for a in eqn.invars if isinstance(a, Var))

    known_eqns = [it[1] if it[0] == "known" else it[3] for it in items if it[0] != "unknown"]
    known_eqns = [e for e in known_eqns if e is not None]

    # Residuals in definition order: constants, known inputs, then known equations' outputs.
    residuals: list[Var] = []
    seen: set[int] = set()

    def take(v: Var) -> None:
        if id(v) in needed and id(v) not in seen:
            seen.add(id(v))
            residuals.append(v)

    for v in jaxpr.constvars:
        take(v)
    for v, u in zip(jaxpr.invars, unknowns):
        if not u:
            take(v)
    for eqn in known_eqns:
        for v in eqn.outvars:
            take(v)

    known_outs = [v for v, u in zip(jaxpr.outvars, out_unknowns) if not u]
    known_j = Jaxpr(jaxpr.constvars, [v for v, u in zip(jaxpr.invars, unknowns) if not u], known_eqns,
                    known_outs + residuals)
    unknown_j = Jaxpr([], residuals + [v for v, u in zip(jaxpr.invars, unknowns) if u],
                      [e for group in staged for e in group],
                      [v for v, u, e in zip(jaxpr.outvars, out_unknowns, extra) if u or e])
    known_j, _ = dce_jaxpr(known_j, [True] * len(known_j.outvars))
    return ClosedJaxpr(known_j, closed.consts), ClosedJaxpr(unknown_j, []), out_unknowns, len(residuals)


# eqn primitive -> rule(eqn, unknown_inputs) -> (known eqn, unknown eqn, unknown outputs), for call-like
# primitives inside a jaxpr being split.
partial_eval_jaxpr_rules: dict[Primitive, Callable[..., Any]] = rule_table(
    "partial_eval_jaxpr", owner=__name__, higher_order_only=True)


def forward_input_residuals(known: ClosedJaxpr, n_res: int) -> tuple[ClosedJaxpr, list[int | None]]:
    """Residuals that are just inputs of the known part are forwarded by the caller, not returned.

    Returns the known jaxpr without those outputs and, per residual, the index of
    the known input it is (or ``None`` if the known part computes it).
    """
    j = known.jaxpr
    n_out = len(j.outvars) - n_res
    pos = {id(v): i for i, v in enumerate(j.invars)}
    res = j.outvars[n_out:]
    sources = [pos.get(id(v)) if isinstance(v, Var) else None for v in res]
    if all(s is None for s in sources):
        return known, sources
    outs = list(j.outvars[:n_out]) + [v for v, s in zip(res, sources) if s is None]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, outs), known.consts), sources


def merge_known_unknown(out_unknowns: list[bool], known_outs: list, unknown_outs: list) -> list:
    """Interleave a split equation's known and unknown outputs back into its output order."""
    k, u = iter(known_outs), iter(unknown_outs)
    return [next(u) if unk else next(k) for unk in out_unknowns]


_merge = merge_known_unknown  # the control-flow rules' name for it


# Last, so that this module is complete whichever of ``ad`` and this module is imported first: ``ad``
# registers its rule families on import, and the call-like family's partial-eval rules import this module.
from ftrans.transforms.ad import Zero, float0, instantiate, jvp_flat, tangent_aval  # noqa: E402
