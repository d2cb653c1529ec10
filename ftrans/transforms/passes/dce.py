"""Dead-code elimination as a pass: equations whose results nobody reads are dropped.

Every ftrans primitive is pure, so an unread result is dead (``grad``'s discarded
forward value, a branch's unused intermediate).  XLA would drop it too, but only
after parsing it; the report also tells a user which of their lines did no work.

Control flow is pruned through its bodies: a ``cond`` output nobody reads goes from
every branch (and the operands only it needed), a ``scan`` output or carry nobody
reads, and a ``while`` carry that neither the result nor the loop's predicate
needs, are removed from the equation and its bodies together (a carry stays when a
carry that is needed reads it).  The program keeps its inputs and outputs; only its
unread captured constants go, which also saves their transfer to the device.
"""

from __future__ import annotations

import weakref

from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var, dce_rules, eqn_has_effects
from ftrans.core.prims import control_flow as CF
from ftrans.core.prims.calls import jit_call_p, remat_p
from ftrans.core.prims.shard_map import shard_map_p
from ftrans.transforms.passes._util import DROPPABLE_IMPURE, IMPURE
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["DeadCodeElimination", "dce"]


# The fixed points of ``scan``/``while`` carries prune a body several times, and each pruning of a body holding
# another loop runs that loop's fixed point again; the pass pipeline then visits every body on its own.  Without
# a memo the work doubled per level of nesting, and the nested loops of a second-order gradient through
# ``while`` took minutes to lower.  A body pruned for the same outputs gives the same answer (jaxprs are
# immutable), so the silent prunings (``ctx is None``: nothing recorded) are kept per body, for as long as the
# body lives.
_memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _sub(closed: ClosedJaxpr, used_outs: list[bool], ctx: PassContext | None,
         calls: bool | None = None) -> tuple[ClosedJaxpr, list[bool]]:
    """``closed`` pruned for ``used_outs``, and which inputs it still reads. ``calls``: whether nested calls'
    signatures are pruned too (a silent pruning's default); a pass run (``ctx``) leaves them to the pipeline,
    and a loop's fixed point run for a pass run must see the body as the pass run will (``calls=False``)."""
    if calls is None:
        calls = ctx is None
    if ctx is None:
        per = _memo.get(closed.jaxpr)
        key = (tuple(used_outs), calls)
        hit = per.get(key) if per is not None else None
        if hit is not None:
            new, used_in = (closed.jaxpr if hit[0] is None else hit[0]), list(hit[1])
        else:
            new, used_in = _dce(closed.jaxpr, used_outs, None, calls)
            if per is None:
                per = _memo.setdefault(closed.jaxpr, {})
            # (an unchanged body is kept as None: a value holding its own key would never be collected)
            per[key] = (None if new is closed.jaxpr else new, tuple(used_in))
    else:
        new, used_in = _dce(closed.jaxpr, used_outs, ctx, calls)
    return (closed if new is closed.jaxpr else ClosedJaxpr(new, closed.consts)), used_in


def _drop_inputs(closed: ClosedJaxpr, keep: list[bool]) -> ClosedJaxpr:
    if all(keep):
        return closed
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [v for v, k in zip(j.invars, keep) if k], j.eqns, j.outvars), closed.consts)


def _sel(xs: list, keep: list[bool]) -> list:
    return [x for x, k in zip(xs, keep) if k]


def _prune_cond(eqn: JaxprEqn, used: list[bool], ctx, calls: bool) -> tuple[JaxprEqn, list[bool]]:
    branches = eqn.params["branches"]
    outs = [_sub(b, used, ctx, calls) for b in branches]
    nops = len(eqn.invars) - 1
    need = [any(u[i] for _, u in outs) for i in range(nops)]
    new_br = tuple(_drop_inputs(b, need) for b, _ in outs)
    if all(used) and all(need) and all(b is o for b, o in zip(new_br, branches)):
        return eqn, [True] + need
    params = dict(eqn.params, branches=new_br)
    new = eqn.replace(invars=[eqn.invars[0]] + _sel(eqn.invars[1:], need), outvars=_sel(eqn.outvars, used),
                      params=params)
    return new, [True] + need


def _prune_scan(eqn: JaxprEqn, used: list[bool], ctx, calls: bool) -> tuple[JaxprEqn, list[bool]]:
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    body = p["jaxpr"]
    carry_used = list(used[:nk])
    ys_used = list(used[nk:])
    while True:  # (silently, but pruning calls as the final pruning below will: the same inputs stay read)
        new_body, used_in = _sub(body, carry_used + ys_used, None, calls)
        grown = [c or u for c, u in zip(carry_used, used_in[nc:nc + nk])]
        if grown == carry_used:
            break
        carry_used = grown
    new_body, used_in = _sub(body, carry_used + ys_used, ctx, calls)
    keep_in = used_in[:nc] + carry_used + used_in[nc + nk:]
    if all(keep_in) and all(used):
        return eqn, [True] * len(eqn.invars)
    new_body = _drop_inputs(new_body, keep_in)
    params = dict(p, jaxpr=new_body, num_consts=sum(used_in[:nc]), num_carry=sum(carry_used))
    keep_out = carry_used + ys_used
    new = eqn.replace(invars=_sel(eqn.invars, keep_in), outvars=_sel(eqn.outvars, keep_out), params=params)
    return new, keep_in


def _prune_while(eqn: JaxprEqn, used: list[bool], ctx, calls: bool) -> tuple[JaxprEqn, list[bool]]:
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cond, body = p["cond_jaxpr"], p["body_jaxpr"]
    new_cond, cond_in = _sub(cond, [True], ctx, calls)
    carry_used = [u or c for u, c in zip(used, cond_in[cn:])]
    while True:  # (as in _prune_scan)
        new_body, body_in = _sub(body, carry_used, None, calls)
        grown = [c or u for c, u in zip(carry_used, body_in[bn:])]
        if grown == carry_used:
            break
        carry_used = grown
    new_body, body_in = _sub(body, carry_used, ctx, calls)
    keep_c = cond_in[:cn] + carry_used
    keep_b = body_in[:bn] + carry_used
    keep_in = cond_in[:cn] + body_in[:bn] + carry_used
    if all(keep_in):
        return eqn, keep_in
    j = new_body.jaxpr
    # dce already dropped the body's unused outputs (its outvars are the used carries').
    new_body = ClosedJaxpr(Jaxpr(j.constvars, _sel(j.invars, keep_b), j.eqns, list(j.outvars)), new_body.consts)
    params = dict(p, cond_jaxpr=_drop_inputs(new_cond, keep_c), body_jaxpr=new_body,
                  cond_nconsts=sum(cond_in[:cn]), body_nconsts=sum(body_in[:bn]))
    new = eqn.replace(invars=_sel(eqn.invars, keep_in), outvars=_sel(eqn.outvars, carry_used), params=params)
    return new, keep_in


def _prune_shard_map(eqn: JaxprEqn, used: list[bool], ctx, calls: bool) -> tuple[JaxprEqn, list[bool]]:
    """A ``shard_map`` output nobody reads goes from the body with the work only it needed, and so do the
    operands (with their specs) the body no longer reads, as in JAX."""
    p = eqn.params
    body, need = _sub(p["jaxpr"], used, ctx, calls)
    if all(used) and all(need) and body is p["jaxpr"]:
        return eqn, need
    per_in = {k: tuple(_sel(list(p[k]), need)) for k in ("in_specs", "in_names") if k in p}
    per_out = {k: tuple(_sel(list(p[k]), used)) for k in ("out_specs", "out_names") if k in p}
    params = dict(p, jaxpr=_drop_inputs(body, need), **per_in, **per_out)
    return eqn.replace(invars=_sel(eqn.invars, need), outvars=_sel(eqn.outvars, used), params=params), need


_PER_IN = ("donated_invars", "in_shardings", "in_layouts")
_PER_OUT = ("out_shardings", "out_layouts")


def _prune_call(eqn: JaxprEqn, used: list[bool], ctx, calls: bool) -> tuple[JaxprEqn, list[bool]]:
    """A nested ``jit`` call's or ``checkpoint``'s unread output goes from its body with the work only it
    needed, and the operands the body then no longer reads (unless the call keeps them: ``keep_unused``),
    as JAX's rules for pjit and remat do."""
    p = eqn.params
    body, need = _sub(p["jaxpr"], used, ctx, calls)
    if p.get("keep_unused"):
        need = [True] * len(need)
    if all(used) and all(need) and body is p["jaxpr"]:
        return eqn, need
    params = dict(p, jaxpr=_drop_inputs(body, need))
    for k in _PER_IN:
        if isinstance(p.get(k), tuple) and len(p[k]) == len(need):
            params[k] = tuple(_sel(list(p[k]), need))
    for k in _PER_OUT:
        if isinstance(p.get(k), tuple) and len(p[k]) == len(used):
            params[k] = tuple(_sel(list(p[k]), used))
    return eqn.replace(invars=_sel(eqn.invars, need), outvars=_sel(eqn.outvars, used), params=params), need


def _must_keep(eqn: JaxprEqn) -> bool:
    name = eqn.primitive.name
    return (name in IMPURE and name not in DROPPABLE_IMPURE) or eqn_has_effects(eqn)


_PRUNE = {CF.cond_p: _prune_cond, CF.scan_p: _prune_scan, CF.while_p: _prune_while}
# Calls are pruned through their bodies by ``dce_jaxpr`` (JAX's DCE rules for pjit, remat and shard_map); the
# pass pipeline leaves their signatures alone, rewriting each (possibly shared) body once on its own.
_PRUNE_CALLS = {shard_map_p: _prune_shard_map, jit_call_p: _prune_call, remat_p: _prune_call}



def dce(jaxpr: Jaxpr, used_outputs: list[bool], ctx: PassContext | None = None) -> tuple[Jaxpr, list[bool]]:
    """``jaxpr`` computing only the outputs marked used (the others are dropped from its outvars),
    and which of its inputs it still reads.  Control-flow equations are pruned through their bodies."""
    return _dce(jaxpr, used_outputs, ctx, ctx is None)


# Jaxprs a pruning made (or found already minimal), for every output: pruning them again changes nothing.
# The pipeline visits each body after the pruning of its parent has pruned it (and recursively all of its
# own bodies); these sets let that visit stop at once instead of walking the subtree again (quadratic in the
# nesting).  A silent pruning (``ctx is None``) also prunes calls' bodies, which a pass run leaves to the
# pipeline, so what a pass run made is clean for pass runs only.
_clean_all: weakref.WeakSet = weakref.WeakSet()
_clean_pass: weakref.WeakSet = weakref.WeakSet()


def _reads(jaxpr: Jaxpr) -> list[bool]:
    read = {id(a) for e in jaxpr.eqns for a in e.invars if isinstance(a, Var)}
    read.update(id(v) for v in jaxpr.outvars if isinstance(v, Var))
    return [id(v) in read for v in jaxpr.invars]


def _dce(jaxpr: Jaxpr, used_outputs: list[bool], ctx: PassContext | None,
         calls: bool) -> tuple[Jaxpr, list[bool]]:
    if all(used_outputs) and (jaxpr in _clean_all or (not calls and jaxpr in _clean_pass)):
        return jaxpr, _reads(jaxpr)
    new, used_in = _prune(jaxpr, used_outputs, ctx, calls)
    (_clean_all if calls else _clean_pass).add(new)
    return new, used_in


def _prune(jaxpr: Jaxpr, used_outputs: list[bool], ctx: PassContext | None,
           calls: bool) -> tuple[Jaxpr, list[bool]]:
    live: set[int] = {id(v) for v, u in zip(jaxpr.outvars, used_outputs) if u and isinstance(v, Var)}
    kept: list[JaxprEqn] = []
    changed = not all(used_outputs)
    for eqn in reversed(jaxpr.eqns):
        used = [id(v) in live for v in eqn.outvars]
        if not any(used) and not _must_keep(eqn):
            changed = True
            if ctx is not None:
                ctx.record(eqn, f"removed `{eqn.primitive.name}`: its result is never used")
            continue
        rule = dce_rules.get(eqn.primitive)
        if rule is not None:
            new = rule(eqn, used)
            if new is not eqn:
                changed = True
                if ctx is not None:
                    ctx.record(eqn, f"replaced `{eqn.primitive.name}`: its unused results need not be computed")
                eqn = new
        prune = _PRUNE.get(eqn.primitive) or (_PRUNE_CALLS.get(eqn.primitive) if calls else None)
        if prune is not None and eqn.primitive.name not in IMPURE:
            new, _ = prune(eqn, used, ctx, calls)
            if new is not eqn:
                changed = True
                if ctx is not None:
                    dropped = len(eqn.outvars) - len(new.outvars)
                    what = f"{dropped} unused result{'s' if dropped != 1 else ''}" if dropped else \
                        "unused operands"
                    ctx.record(eqn, f"pruned `{eqn.primitive.name}`: dropped {what} and the work only they needed")
                eqn = new
        kept.append(eqn)
        live.update(id(a) for a in eqn.invars if isinstance(a, Var))
    used_in = [id(v) in live for v in jaxpr.invars]
    if not changed:
        return jaxpr, used_in
    kept.reverse()
    outs = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, kept, outs), used_in


class DeadCodeElimination(Pass):
    name = "dce"
    order = "pre"  # outer first: bodies of removed equations are never visited

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        new, _ = dce(jaxpr, [True] * len(jaxpr.outvars), ctx)
        if not top or not new.constvars:
            return new
        read = {id(a) for e in new.eqns for a in e.invars if isinstance(a, Var)}
        read.update(id(v) for v in new.outvars if isinstance(v, Var))
        constvars = [v for v in new.constvars if id(v) in read]
        if len(constvars) == len(new.constvars):
            return new
        for v in new.constvars:
            if id(v) not in read:
                ctx.record(None, f"removed an unused captured constant {v.aval.str_short()}", "constant")
        return Jaxpr(constvars, new.invars, new.eqns, new.outvars)
