"""Reverse mode of ``cond``, ``scan`` and ``while``: partial evaluation (known/unknown splitting) and transposition.

Linearization (``transforms/partial_eval.py``) meets a control-flow equation
whose operands mix known values (primals) and unknown ones (tangents).  Each
primitive splits its bodies with ``partial_eval_jaxpr`` into a *known*
program, run now, that also returns the residuals the tangent part needs, and
an *unknown* program, recorded into the linear jaxpr, that reads them:

* ``cond``: every branch is split; the branches' residuals are concatenated and
  each known branch returns zeros in the other branches' residual slots, so
  both halves stay one ``cond`` on the same (known) index.
* ``scan``: the body is split, with a fixed point making a carry unknown when
  the body makes it so.  Residuals that are loop-invariant inputs (the known
  consts) are passed to the unknown scan as consts and residuals that are
  slices of the known ``xs`` are passed as those ``xs``; everything else is
  stacked by the known scan as extra ``ys`` and scanned over by the unknown one.
* ``while``: the trip count is only known when the loop runs, so nothing can be
  stacked.  The known carries are computed by a known loop; the unknown ones by
  the whole loop, recorded (it recomputes the primal part), which is enough for
  ``linearize`` and ``jvp``.  Its transposition raises a clear error: reverse
  mode through a ``while`` with a dynamic trip count is future work, and the
  primitive's layout does not need to change for it.

Transposition: ``cond`` transposes each branch (one new ``cond`` on the same
index); ``scan`` runs the transposed body in the opposite direction, carrying
the cotangents of the carries and accumulating those of the linear consts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Var, dce_jaxpr
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.trace import current_source_info, stage
from ftrans.errors import FtransValueError
from ftrans.transforms.ad import Zero, add_tangents, instantiate, tangent_aval, zeros_like_aval
from ftrans.transforms.control_flow.common import hoisted, join_consts
from ftrans.transforms.control_flow.primitives import cond_p, scan_p, scan_split, while_p
from ftrans.transforms.partial_eval import (
    LinearizeTrace,
    _merge,
    partial_eval_jaxpr,
    partial_eval_jaxpr_rules,
    partial_eval_rules,
)
from ftrans.transforms.transpose import (
    UndefinedPrimal,
    backward_pass,
    is_undefined,
    register_transpose,
    transpose_jaxpr,
)

# ----------------------------------------------------------------------------
# Splitting with forced-unknown outputs


def partial_eval_jaxpr_inst(closed: ClosedJaxpr, unknowns: Sequence[bool], instantiate: Sequence[bool]
                            ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """``partial_eval_jaxpr`` where the outputs marked in ``instantiate`` come out of the unknown part even
    when they are known (they travel as residuals): branches and loop bodies must agree on which outputs
    are unknown."""
    known, unknown, out_unk, n_res = partial_eval_jaxpr(closed, unknowns)
    force = [i and not u for i, u in zip(instantiate, out_unk)]
    if not any(force):
        return known, unknown, out_unk, n_res
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known_out = len(kj.outvars) - n_res
    known_outs, res = list(kj.outvars[:n_known_out]), list(kj.outvars[n_known_out:])
    known_pos = [i for i, u in enumerate(out_unk) if not u]
    keep, moved = [], []
    for v, pos in zip(known_outs, known_pos):
        (moved if force[pos] else keep).append(v)
    new_k = Jaxpr(kj.constvars, kj.invars, kj.eqns, keep + res + moved)
    new_vars = [Var(v.aval) for v in moved]
    u_in = list(uj.invars[:n_res]) + new_vars + list(uj.invars[n_res:])
    u_out_old, u_new = iter(uj.outvars), iter(new_vars)
    u_out = []
    for u, f in zip(out_unk, force):
        if u:
            u_out.append(next(u_out_old))
        elif f:
            u_out.append(next(u_new))
    new_u = Jaxpr(uj.constvars, u_in, uj.eqns, u_out)
    return (ClosedJaxpr(new_k, known.consts), ClosedJaxpr(new_u, unknown.consts),
            [u or f for u, f in zip(out_unk, force)], n_res + len(moved))


def _or(a: Sequence[bool], b: Sequence[bool]) -> list[bool]:
    return [x or y for x, y in zip(a, b)]


def _is_unknown(trace: LinearizeTrace, tracers: list) -> tuple[list[bool], list]:
    knowns = [trace.known_value(t) for t in tracers]
    return [not k for k, _ in knowns], [v for _, v in knowns]


# ----------------------------------------------------------------------------
# cond


def _split_cond(branches: tuple, ops_unk: list[bool]) -> tuple[list[ClosedJaxpr], list[ClosedJaxpr], list[bool],
                                                              list[ShapedArray]]:
    """Known branches (known ops -> known outs + all residuals) and unknown ones (all residuals + unknown ops
    -> unknown outs), the unknown-output mask, and the residuals' types."""
    out_unk = [False] * len(branches[0].out_avals)
    for b in branches:
        out_unk = _or(out_unk, partial_eval_jaxpr(b, ops_unk)[2])
    splits = [partial_eval_jaxpr_inst(b, ops_unk, out_unk) for b in branches]
    res_avals = [[v.aval for v in k.jaxpr.outvars[len(k.jaxpr.outvars) - n:]] for k, _, _, n in splits]
    all_res = [a for r in res_avals for a in r]
    offsets = [sum(len(r) for r in res_avals[:i]) for i in range(len(splits))]
    known_b, unknown_b = [], []
    for i, (k, u, _, n) in enumerate(splits):
        off = offsets[i]

        def known_fun(*args: Any, k=k, n=n, off=off) -> list:
            outs = eval_jaxpr(k.jaxpr, list(k.consts), *args)
            m = len(outs) - n
            zeros = [zeros_like_aval(a) for a in all_res]
            zeros[off:off + n] = outs[m:]
            return list(outs[:m]) + zeros

        kc, _ = stage(known_fun, k.in_avals)
        known_b.append(hoisted(kc))
        uj = u.jaxpr
        lead = [Var(a) for a in all_res[:off]] + list(uj.invars[:n]) + [Var(a) for a in all_res[off + n:]]
        unknown_b.append((ClosedJaxpr(Jaxpr(uj.constvars, lead + list(uj.invars[n:]), uj.eqns, uj.outvars),
                                      u.consts), []))
    kb, kconsts = join_consts(known_b)
    ub, _ = join_consts(unknown_b)
    return [(b, kconsts) for b in kb], ub, out_unk, all_res


def _cond_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    branches = params["branches"]
    unk, vals = _is_unknown(trace, tracers)
    if unk[0]:  # an index computed from tangents cannot happen (integers have no tangents)
        return trace.record(cond_p, tracers, params)
    ops_unk = unk[1:]
    known_b, unknown_b, out_unk, res_avals = _split_cond(branches, ops_unk)
    kconsts = known_b[0][1]
    known_ops = [v for v, u in zip(vals[1:], ops_unk) if not u]
    outs = cond_p.bind(vals[0], *kconsts, *known_ops, branches=tuple(b for b, _ in known_b))
    n_res = len(res_avals)
    n_known = len(outs) - n_res
    known_outs, res = list(outs[:n_known]), list(outs[n_known:])
    ops = ([tracers[0]] + [trace.full_raise(r) for r in res]
           + [t for t, u in zip(tracers[1:], ops_unk) if u])
    unknown_outs = trace.record(cond_p, ops, dict(params, branches=tuple(unknown_b)))
    return _merge(out_unk, known_outs, unknown_outs)


def _cond_split_eqn(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    if unk_in[0]:
        return None, eqn, [True] * len(eqn.outvars)  # pragma: no cover - see _cond_partial_eval
    ops_unk = unk_in[1:]
    known_b, unknown_b, out_unk, res_avals = _split_cond(eqn.params["branches"], ops_unk)
    kconsts = known_b[0][1]
    res_vars = [Var(a) for a in res_avals]
    k_in = [eqn.invars[0]] + _as_atoms(kconsts) + [a for a, u in zip(eqn.invars[1:], ops_unk) if not u]
    k_out = [v for v, u in zip(eqn.outvars, out_unk) if not u] + res_vars
    k_eqn = eqn.replace(invars=k_in, outvars=k_out, params=dict(branches=tuple(b for b, _ in known_b)))
    u_in = [eqn.invars[0]] + res_vars + [a for a, u in zip(eqn.invars[1:], ops_unk) if u]
    u_eqn = eqn.replace(invars=u_in, outvars=[v for v, u in zip(eqn.outvars, out_unk) if u],
                        params=dict(branches=tuple(unknown_b)))
    return k_eqn, u_eqn, out_unk


def _as_atoms(consts: list) -> list:
    """Constants met while splitting an equation inside a jaxpr become literals."""
    if not consts:
        return []
    import numpy as np

    from ftrans.core.ir import Literal
    from ftrans.core.trace import aval_of

    out = []
    for c in consts:
        arr = np.asarray(c)
        if arr.shape != ():
            raise NotImplementedError("splitting a cond inside a jaxpr produced a non-scalar constant")
        out.append(Literal(arr, aval_of(c)))
    return out


partial_eval_rules[cond_p] = _cond_partial_eval
partial_eval_jaxpr_rules[cond_p] = _cond_split_eqn


@register_transpose(cond_p)
def _cond_transpose(cts: list, index: Any, *ops: Any, branches: tuple) -> list:
    lin = [is_undefined(o) for o in ops]
    res = [o for o in ops if not is_undefined(o)]
    nz = [type(c) is not Zero for c in cts]
    if not any(nz):
        return [None] + [Zero(o.aval) if is_undefined(o) else None for o in ops]
    pairs = [hoisted(transpose_jaxpr(b, lin, nz)) for b in branches]
    bodies, consts = join_consts(pairs)
    nz_cts = [c for c in cts if type(c) is not Zero]
    outs = iter(cond_p.bind(index, *consts, *res, *nz_cts, branches=tuple(bodies)))
    return [None] + [next(outs) if lin_i else None for lin_i in lin]


# ----------------------------------------------------------------------------
# scan


class _ScanSplit:
    """How a scan splits: the known scan's body and the unknown scan's body, and where residuals go."""

    __slots__ = ("known", "unknown", "carry_unk", "ys_unk", "res_kind", "res_src", "n_stacked")


def _split_scan(jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, unk_in: list[bool]) -> _ScanSplit:
    consts_unk, carry_unk, xs_unk = scan_split(unk_in, num_consts, num_carry)
    n_ys = len(jaxpr.out_avals) - num_carry
    while True:
        k, u, out_unk, n_res = partial_eval_jaxpr_inst(jaxpr, consts_unk + carry_unk + xs_unk,
                                                       carry_unk + [False] * n_ys)
        new = _or(carry_unk, out_unk[:num_carry])
        if new == carry_unk:
            break
        carry_unk = new
    kj = k.jaxpr
    n_k_out = len(kj.outvars) - n_res
    res = kj.outvars[n_k_out:]
    n_kc = num_consts - sum(consts_unk)
    n_kr = num_carry - sum(carry_unk)
    pos = {id(v): i for i, v in enumerate(kj.invars)}
    kinds, srcs = [], []  # per residual: "const" / "xs" (a known input passed as is) or "stacked"
    for v in res:
        i = pos.get(id(v)) if isinstance(v, Var) else None
        if i is not None and i < n_kc:
            kinds.append("const")
            srcs.append(i)
        elif i is not None and i >= n_kc + n_kr:
            kinds.append("xs")
            srcs.append(i - n_kc - n_kr)
        else:
            kinds.append("stacked")
            srcs.append(None)
    # The known body returns its known carry and ys, then only the stacked residuals.
    stacked_outs = [v for v, kd in zip(res, kinds) if kd == "stacked"]
    known = ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, kj.eqns, list(kj.outvars[:n_k_out]) + stacked_outs),
                        k.consts)
    # The unknown body takes [const res, unknown consts, unknown carry, stacked res, xs res, unknown xs].
    uj = u.jaxpr
    r_in, rest = list(uj.invars[:n_res]), list(uj.invars[n_res:])
    n_uc, n_ur = sum(consts_unk), sum(carry_unk)
    u_consts, u_carry, u_xs = rest[:n_uc], rest[n_uc:n_uc + n_ur], rest[n_uc + n_ur:]
    by = {kd: [v for v, k2 in zip(r_in, kinds) if k2 == kd] for kd in ("const", "stacked", "xs")}
    invars = by["const"] + u_consts + u_carry + by["stacked"] + by["xs"] + u_xs
    out = _ScanSplit()
    out.known = known
    out.unknown = ClosedJaxpr(Jaxpr(uj.constvars, invars, uj.eqns, uj.outvars), u.consts)
    out.carry_unk = carry_unk
    out.ys_unk = out_unk[num_carry:]
    out.res_kind = kinds
    out.res_src = srcs
    out.n_stacked = len(stacked_outs)
    return out


def _scan_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    jaxpr, nk, nc = params["jaxpr"], params["num_consts"], params["num_carry"]
    unk, vals = _is_unknown(trace, tracers)
    sp = _split_scan(jaxpr, nk, nc, unk)
    consts_unk, _, xs_unk = scan_split(unk, nk, nc)
    carry_unk = sp.carry_unk
    consts_v, carry_v, xs_v = scan_split(vals, nk, nc)
    consts_t, carry_t, xs_t = scan_split(tracers, nk, nc)
    k_consts = [v for v, u in zip(consts_v, consts_unk) if not u]
    k_carry = [v for v, u in zip(carry_v, carry_unk) if not u]
    k_xs = [v for v, u in zip(xs_v, xs_unk) if not u]
    kbody, hc = hoisted(sp.known)
    outs = scan_p.bind(*hc, *k_consts, *k_carry, *k_xs, jaxpr=kbody, num_consts=len(hc) + len(k_consts),
                       num_carry=len(k_carry), length=params["length"], reverse=params["reverse"],
                       unroll=params["unroll"])
    n_kc = len(k_carry)
    n_ky = len(outs) - n_kc - sp.n_stacked
    known_carry, known_ys, stacked = outs[:n_kc], outs[n_kc:n_kc + n_ky], outs[n_kc + n_ky:]
    res_const = [trace.full_raise(k_consts[s]) for kd, s in zip(sp.res_kind, sp.res_src) if kd == "const"]
    res_xs = [trace.full_raise(k_xs[s]) for kd, s in zip(sp.res_kind, sp.res_src) if kd == "xs"]
    u_consts = [t for t, u in zip(consts_t, consts_unk) if u]
    u_carry = [t for t, u in zip(carry_t, carry_unk) if u]
    u_xs = [t for t, u in zip(xs_t, xs_unk) if u]
    ubody, uhc = hoisted(sp.unknown)
    ops = ([trace.full_raise(c) for c in uhc] + res_const + u_consts + u_carry
           + [trace.full_raise(s) for s in stacked] + res_xs + u_xs)
    unknown_outs = trace.record(scan_p, ops, dict(
        params, jaxpr=ubody, num_consts=len(uhc) + len(res_const) + len(u_consts), num_carry=len(u_carry)))
    n_uc = len(u_carry)
    carry_out = _merge(carry_unk, list(known_carry), list(unknown_outs[:n_uc]))
    ys_out = _merge(sp.ys_unk, list(known_ys), list(unknown_outs[n_uc:]))
    return carry_out + ys_out


def _scan_split_eqn(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    p = eqn.params
    nk, nc = p["num_consts"], p["num_carry"]
    sp = _split_scan(p["jaxpr"], nk, nc, unk_in)
    if sp.known.consts or sp.unknown.consts:
        raise NotImplementedError("scan split produced constants")  # pragma: no cover - bodies close over nothing
    consts_unk, _, xs_unk = scan_split(unk_in, nk, nc)
    c_in, r_in, x_in = scan_split(list(eqn.invars), nk, nc)
    k_consts = [a for a, u in zip(c_in, consts_unk) if not u]
    k_carry = [a for a, u in zip(r_in, sp.carry_unk) if not u]
    k_xs = [a for a, u in zip(x_in, xs_unk) if not u]
    c_out, y_out = eqn.outvars[:nc], eqn.outvars[nc:]
    length = p["length"]
    stacked_vars = [Var(a.update(shape=(length,) + a.shape)) for a in sp.known.out_avals[len(sp.known.out_avals)
                                                                                        - sp.n_stacked:]]
    k_out = ([v for v, u in zip(c_out, sp.carry_unk) if not u] + [v for v, u in zip(y_out, sp.ys_unk) if not u]
             + stacked_vars)
    k_eqn = eqn.replace(invars=k_consts + k_carry + k_xs, outvars=k_out,
                        params=dict(p, jaxpr=sp.known, num_consts=len(k_consts), num_carry=len(k_carry)))
    res_const = [k_consts[s] for kd, s in zip(sp.res_kind, sp.res_src) if kd == "const"]
    res_xs = [k_xs[s] for kd, s in zip(sp.res_kind, sp.res_src) if kd == "xs"]
    u_consts = [a for a, u in zip(c_in, consts_unk) if u]
    u_carry = [a for a, u in zip(r_in, sp.carry_unk) if u]
    u_xs = [a for a, u in zip(x_in, xs_unk) if u]
    u_out = [v for v, u in zip(c_out, sp.carry_unk) if u] + [v for v, u in zip(y_out, sp.ys_unk) if u]
    u_eqn = eqn.replace(invars=res_const + u_consts + u_carry + stacked_vars + res_xs + u_xs, outvars=u_out,
                        params=dict(p, jaxpr=sp.unknown, num_consts=len(res_const) + len(u_consts),
                                    num_carry=len(u_carry)))
    return k_eqn, u_eqn, list(sp.carry_unk) + list(sp.ys_unk)


partial_eval_rules[scan_p] = _scan_partial_eval
partial_eval_jaxpr_rules[scan_p] = _scan_split_eqn


@register_transpose(scan_p)
def _scan_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int,
                    reverse: bool, unroll: int) -> list:
    """Run the transposed body backwards: carry the carries' cotangents, accumulate the linear consts'."""
    consts, init, xs = scan_split(args, num_consts, num_carry)
    c_lin = [is_undefined(c) for c in consts]
    x_lin = [is_undefined(x) for x in xs]
    res_c = [c for c in consts if not is_undefined(c)]
    res_x = [x for x in xs if not is_undefined(x)]
    body_avals = jaxpr.in_avals
    k_avals, r_avals, x_avals = scan_split(body_avals, num_consts, num_carry)
    lin_c_avals = [tangent_aval(a) for a, lin_i in zip(k_avals, c_lin) if lin_i]
    ct_carry = [instantiate(Zero(tangent_aval(a)) if type(c) is Zero else c)
                for a, c in zip(jaxpr.out_avals[:num_carry], cts[:num_carry])]
    y_avals = jaxpr.out_avals[num_carry:]
    ct_ys = [instantiate(Zero(tangent_aval(a.update(shape=(length,) + a.shape))) if type(c) is Zero else c)
             for a, c in zip(y_avals, cts[num_carry:])]
    n_rc, n_acc, n_c = len(res_c), len(lin_c_avals), num_carry
    n_rx = len(res_x)

    def tbody(*a: Any) -> list:
        rc, acc = list(a[:n_rc]), list(a[n_rc:n_rc + n_acc])
        ctc = list(a[n_rc + n_acc:n_rc + n_acc + n_c])
        rx, cty = list(a[n_rc + n_acc + n_c:n_rc + n_acc + n_c + n_rx]), list(a[n_rc + n_acc + n_c + n_rx:])
        rc_it, rx_it = iter(rc), iter(rx)
        b_args = ([UndefinedPrimal(tangent_aval(av)) if lin_i else next(rc_it) for av, lin_i in zip(k_avals, c_lin)]
                  + [UndefinedPrimal(tangent_aval(av)) for av in r_avals]
                  + [UndefinedPrimal(tangent_aval(av)) if lin_i else next(rx_it) for av, lin_i in zip(x_avals, x_lin)])
        out = backward_pass(jaxpr.jaxpr, list(jaxpr.consts), b_args, ctc + cty)
        o_c, o_r, o_x = scan_split(out, num_consts, num_carry)
        new_acc = [add_tangents(s, o) if type(o) is not Zero else s
                   for s, o in zip(acc, [o for o, lin_i in zip(o_c, c_lin) if lin_i])]
        carry_ct = [instantiate(o) for o in o_r]
        x_ct = [instantiate(o) for o, lin_i in zip(o_x, x_lin) if lin_i]
        return new_acc + carry_ct + x_ct

    from ftrans.core.trace import aval_of

    in_avals = ([aval_of(c) for c in res_c] + lin_c_avals + [tangent_aval(a) for a in r_avals]
                + [aval_of(x).update(shape=aval_of(x).shape[1:]) for x in res_x]
                + [tangent_aval(a) for a in y_avals])
    closed, _ = stage(tbody, in_avals)
    body, hc = hoisted(closed)
    acc0 = [zeros_like_aval(a) for a in lin_c_avals]
    outs = scan_p.bind(*hc, *res_c, *acc0, *ct_carry, *res_x, *ct_ys, jaxpr=body, num_consts=len(hc) + n_rc,
                       num_carry=n_acc + n_c, length=length, reverse=not reverse, unroll=unroll)
    acc, ct_init, ct_xs = outs[:n_acc], outs[n_acc:n_acc + n_c], outs[n_acc + n_c:]
    acc_it, xs_it = iter(acc), iter(ct_xs)
    return ([next(acc_it) if lin_i else None for lin_i in c_lin]
            + [c if is_undefined(i) else None for c, i in zip(ct_init, init)]
            + [next(xs_it) if lin_i else None for lin_i in x_lin])


# ----------------------------------------------------------------------------
# while


def _while_split(cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, nc: int, nb: int, unk: list[bool]
                 ) -> tuple[list[bool], ClosedJaxpr | None, ClosedJaxpr | None]:
    """Which carries are unknown, and the cond and body of a loop computing only the known carries
    (``None`` when the condition itself depends on an unknown value: then nothing is known)."""
    cc_unk, bc_unk, carry_unk = unk[:nc], unk[nc:nc + nb], unk[nc + nb:]
    n = len(carry_unk)
    while True:
        _, _, out_unk, _ = partial_eval_jaxpr(body_jaxpr, bc_unk + carry_unk)
        new = _or(carry_unk, out_unk)
        if new == carry_unk:
            break
        carry_unk = new
    _, cond_reads = dce_jaxpr(cond_jaxpr.jaxpr, [True])
    if any(cc_unk) or any(r and u for r, u in zip(cond_reads[nc:], carry_unk)):
        return [True] * n, None, None
    if not any(carry_unk):
        return carry_unk, cond_jaxpr, body_jaxpr
    k, _, _, n_res = partial_eval_jaxpr(body_jaxpr, bc_unk + carry_unk)
    n_out = len(k.jaxpr.outvars) - n_res
    kj, _ = dce_jaxpr(k.jaxpr, [True] * n_out + [False] * n_res)
    known_body = ClosedJaxpr(kj, k.consts)
    cj = cond_jaxpr.jaxpr
    keep = [True] * nc + [not u for u in carry_unk]
    known_cond = ClosedJaxpr(Jaxpr(cj.constvars, [v for v, kp in zip(cj.invars, keep) if kp], cj.eqns, cj.outvars),
                             cond_jaxpr.consts)
    return carry_unk, known_cond, known_body


def _while_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    unk, vals = _is_unknown(trace, tracers)
    carry_unk, kcond, kbody = _while_split(params["cond_jaxpr"], params["body_jaxpr"], nc, nb, unk)
    unknown_outs = trace.record(while_p, tracers, params)  # the whole loop: it recomputes the known part
    if kcond is None or all(carry_unk):
        return unknown_outs
    bc_unk = unk[nc:nc + nb]
    k_bc = [v for v, u in zip(vals[nc:nc + nb], bc_unk) if not u]
    k_init = [v for v, u in zip(vals[nc + nb:], carry_unk) if not u]
    known_outs = while_p.bind(*vals[:nc], *k_bc, *k_init, cond_jaxpr=kcond, body_jaxpr=kbody, cond_nconsts=nc,
                              body_nconsts=len(k_bc))
    n = len(carry_unk)
    u_it = iter([o for o, u in zip(unknown_outs, carry_unk) if u])
    k_it = iter(known_outs)
    return [next(u_it) if carry_unk[i] else next(k_it) for i in range(n)]


def _while_split_eqn(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    carry_unk, kcond, kbody = _while_split(p["cond_jaxpr"], p["body_jaxpr"], nc, nb, unk_in)
    outs = eqn.outvars
    u_eqn = eqn.replace(outvars=[v if u else DropVar(v.aval) for v, u in zip(outs, carry_unk)])
    if kcond is None or all(carry_unk):
        return None, u_eqn, [True] * len(outs)
    bc_unk = unk_in[nc:nc + nb]
    k_in = (list(eqn.invars[:nc]) + [a for a, u in zip(eqn.invars[nc:nc + nb], bc_unk) if not u]
            + [a for a, u in zip(eqn.invars[nc + nb:], carry_unk) if not u])
    k_eqn = eqn.replace(invars=k_in, outvars=[v for v, u in zip(outs, carry_unk) if not u],
                        params=dict(p, cond_jaxpr=kcond, body_jaxpr=kbody, body_nconsts=sum(not u for u in bc_unk)))
    return k_eqn, u_eqn, carry_unk


partial_eval_rules[while_p] = _while_partial_eval
partial_eval_jaxpr_rules[while_p] = _while_split_eqn


@register_transpose(while_p)
def _while_transpose(cts: list, *args: Any, **params: Any) -> list:
    info = current_source_info()
    where = f" (the loop at {info})" if info is not None else ""
    raise FtransValueError(
        "reverse-mode differentiation (grad, vjp, jacrev) of a lax.while_loop is not supported yet"
        f"{where}: its trip count is only known when it runs. Use lax.scan, or lax.fori_loop with static "
        "Python-int bounds (which is a scan), for a loop you need to differentiate in reverse mode; forward "
        "mode (jvp, jacfwd, linearize) works through while_loop"
    )
