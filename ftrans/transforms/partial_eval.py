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
tangent operands (``jit_call``, ``remat``) have a ``partial_eval_rules``
entry that splits their body with ``partial_eval_jaxpr``: the known half runs
now, the unknown half is recorded, and the values passed between them are the
residuals.  ``remat``'s split follows a policy saying which known values may
be saved; the rest are recomputed inside the unknown half.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, dce_jaxpr
from ftrans.core.primitive import Primitive, rule_table
from ftrans.core.trace import DynamicJaxprTrace, JaxprBuilder, StagingTracer, Tracer, aval_of, new_main
from ftrans.transforms.ad import Zero, float0, instantiate, jvp_flat, tangent_aval
from ftrans.transforms.jit import jit_call_p

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


class LinearizeTrace(DynamicJaxprTrace):
    """Records only operations that read a tangent; everything else runs at the level below."""

    __slots__ = ()

    def pure(self, val: Any) -> StagingTracer:
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


def linearize_flat(fun: Callable, primals: Sequence[Any]) -> tuple[list, ClosedJaxpr, list[bool], list[bool], Any]:
    """Linearize ``fun`` (flat list in -> (flat list out, aux)) at ``primals``.

    Returns the primal outputs, the linear jaxpr (inputs: the tangents of the
    differentiable inputs; outputs: the tangents of the outputs, instantiated),
    which inputs are differentiable (inexact), which output tangents are
    symbolically zero, and ``aux``.  Residuals are the linear jaxpr's constants.
    """
    builder = _LinearizeBuilder()
    in_avals = [tangent_aval(aval_of(p)) for p in primals]
    diff = [a.dtype != float0 for a in in_avals]
    with new_main(LinearizeTrace, builder) as main:
        trace: LinearizeTrace = main.trace
        tangents = [trace.new_arg(a) if d else Zero(a) for a, d in zip(in_avals, diff)]
        p_out, t_out, aux = jvp_flat(fun, primals, tangents)
        zero_out = [type(t) is Zero for t in t_out]
        out_tracers = [trace.full_raise(instantiate(t)) for t, z in zip(t_out, zero_out) if not z]
        in_tracers = [t for t in tangents if type(t) is not Zero]
        jaxpr, consts = builder.build(in_tracers, out_tracers)
    return p_out, ClosedJaxpr(jaxpr, consts), diff, zero_out, aux


# ----------------------------------------------------------------------------
# Splitting a jaxpr


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns: Sequence[bool],
                       saveable: Callable[[JaxprEqn], bool] | None = None
                       ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split ``closed`` given which inputs are unknown.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` takes the
    known inputs and returns the known outputs followed by ``num_res``
    residuals; ``unknown`` takes the residuals followed by the unknown inputs
    and returns the unknown outputs.  An equation is unknown when it reads an
    unknown value.  With ``saveable`` (a remat policy), a known value the
    unknown part needs is passed as a residual only if its equation is
    saveable; otherwise that equation is recomputed in the unknown part.
    """
    jaxpr = closed.jaxpr
    unknown: set[int] = {id(v) for v, u in zip(jaxpr.invars, unknowns) if u}
    known_eqns: list[JaxprEqn] = []
    unknown_eqns: list[JaxprEqn] = []
    for eqn in jaxpr.eqns:
        unk_in = [isinstance(a, Var) and id(a) in unknown for a in eqn.invars]
        if not any(unk_in):
            known_eqns.append(eqn)
            continue
        rule = partial_eval_jaxpr_rules.get(eqn.primitive)
        if rule is not None and not all(unk_in):
            # A call mixing known and unknown operands: split its body too, so its known
            # outputs stay known (and are not treated as linear by the transpose).
            k_eqn, u_eqn, out_unk = rule(eqn, unk_in)
            if k_eqn is not None:  # None: nothing of the equation is known
                known_eqns.append(k_eqn)
            unknown_eqns.append(u_eqn)
            unknown.update(id(v) for v, u in zip(eqn.outvars, out_unk) if u)
            continue
        unknown_eqns.append(eqn)
        unknown.update(id(v) for v in eqn.outvars)
    out_unknowns = [isinstance(v, Var) and id(v) in unknown for v in jaxpr.outvars]

    needed: set[int] = set()
    for eqn in unknown_eqns:
        needed.update(id(a) for a in eqn.invars if isinstance(a, Var) and id(a) not in unknown)
    recompute: list[JaxprEqn] = []
    if saveable is not None:
        for eqn in reversed(known_eqns):
            if any(id(v) in needed for v in eqn.outvars) and not saveable(eqn):
                recompute.append(eqn)
                needed.difference_update(id(v) for v in eqn.outvars)
                needed.update(id(a) for a in eqn.invars if isinstance(a, Var))
        recompute.reverse()

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
                      recompute + unknown_eqns, [v for v, u in zip(jaxpr.outvars, out_unknowns) if u])
    known_j, _ = dce_jaxpr(known_j, [True] * len(known_j.outvars))
    return ClosedJaxpr(known_j, closed.consts), ClosedJaxpr(unknown_j, []), out_unknowns, len(residuals)


# eqn primitive -> rule(eqn, unknown_inputs) -> (known eqn, unknown eqn, unknown outputs), for call-like
# primitives inside a jaxpr being split.
partial_eval_jaxpr_rules: dict[Primitive, Callable[..., Any]] = rule_table(
    "partial_eval_jaxpr", owner=__name__, higher_order_only=True)


def split_call_eqn(eqn: JaxprEqn, unk_in: list[bool], saveable: Callable[[JaxprEqn], bool] | None,
                   known_params: dict, unknown_params: dict) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    """Split a call-like equation (its body in ``params["jaxpr"]``) into a known and an unknown call.

    The known call returns the known outputs and the residuals, which become new
    variables read by the unknown call.
    """
    body = eqn.params["jaxpr"]
    k, u, out_unk, n_res = partial_eval_jaxpr(body, unk_in, saveable)
    k, sources = forward_input_residuals(k, n_res)
    k_in = [a for a, un in zip(eqn.invars, unk_in) if not un]
    new_vars = [Var(a) for a in k.out_avals[len(k.out_avals) - sum(s is None for s in sources):]]
    it = iter(new_vars)
    res = [next(it) if s is None else k_in[s] for s in sources]
    u_in = res + [a for a, un in zip(eqn.invars, unk_in) if un]
    k_out = [v for v, un in zip(eqn.outvars, out_unk) if not un] + new_vars
    u_out = [v for v, un in zip(eqn.outvars, out_unk) if un]
    k_eqn = eqn.replace(invars=k_in, outvars=k_out, params=dict(eqn.params, jaxpr=k, **known_params(len(k_in))))
    u_eqn = eqn.replace(invars=u_in, outvars=u_out, params=dict(eqn.params, jaxpr=u, **unknown_params(len(u_in))))
    return k_eqn, u_eqn, out_unk


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


def _jit_call_split(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    def no_donation(n: int) -> dict:
        return {"donated_invars": (False,) * n}

    return split_call_eqn(eqn, unk_in, None, no_donation, no_donation)


partial_eval_jaxpr_rules[jit_call_p] = _jit_call_split


# ----------------------------------------------------------------------------
# jit_call: run the known half now, record the unknown half


def _split_call(trace: LinearizeTrace, tracers: list, body: ClosedJaxpr,
                saveable: Callable[[JaxprEqn], bool] | None) -> tuple[list, ClosedJaxpr, list[bool], list, list]:
    """Shared by the call-like rules: known values, split bodies, unknown-output mask, residual tracers."""
    knowns = [trace.known_value(t) for t in tracers]
    unknowns = [not k for k, _ in knowns]
    known_j, unknown_j, out_unknowns, n_res = partial_eval_jaxpr(body, unknowns, saveable)
    known_vals = [v for k, v in knowns if k]
    unknown_tracers = [t for t, u in zip(tracers, unknowns) if u]
    return known_vals, known_j, unknown_j, out_unknowns, n_res, unknown_tracers


def _merge(out_unknowns: list[bool], known_outs: list, unknown_outs: list) -> list:
    k, u = iter(known_outs), iter(unknown_outs)
    return [next(u) if unk else next(k) for unk in out_unknowns]


def _jit_call_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    from ftrans.transforms.transpose import hoist_consts

    body = params["jaxpr"]
    known_vals, known_j, unknown_j, out_unknowns, n_res, unknown_tracers = _split_call(trace, tracers, body, None)
    known_j, sources = forward_input_residuals(known_j, n_res)
    kbody, kconsts = hoist_consts(known_j)
    n_k = len(kconsts) + len(known_vals)
    outs = jit_call_p.bind(*kconsts, *known_vals, jaxpr=kbody, name=params["name"],
                           donated_invars=(False,) * n_k)
    n_known_out = len(out_unknowns) - sum(out_unknowns)
    known_outs, computed = list(outs[:n_known_out]), iter(outs[n_known_out:])
    res = [next(computed) if s is None else known_vals[s] for s in sources]
    ops = [trace.full_raise(r) for r in res] + unknown_tracers
    unknown_outs = trace.record(jit_call_p, ops, dict(params, jaxpr=unknown_j, name=params["name"],
                                                      donated_invars=(False,) * len(ops)))
    return _merge(out_unknowns, known_outs, unknown_outs)


partial_eval_rules[jit_call_p] = _jit_call_partial_eval

