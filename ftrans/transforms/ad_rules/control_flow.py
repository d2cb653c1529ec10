"""Forward mode and partial evaluation of ``cond``, ``while`` and ``scan``.

Forward mode: each body is differentiated once and one new primitive of the
same kind computes primals and tangents together.  Symbolic zeros survive where
they can: only operands with non-zero tangents get tangent inputs, and only
outputs some branch (or some iteration) makes non-zero get tangent outputs.
For loops that needs a fixed point: a carry whose tangent is zero going in may
come out non-zero (``c = c * x`` with a non-zero tangent for ``x``), in which
case its tangent is carried from the start, as zeros.

Partial evaluation (the first half of reverse mode; transposition is in
``transforms/linear_rules/control_flow.py``).  Linearization
(``transforms/partial_eval.py``) meets a control-flow equation whose operands
mix known values (primals) and unknown ones (tangents).  Each primitive splits
its bodies with ``partial_eval_jaxpr`` into a *known* program, run now, that
also returns the residuals the tangent part needs, and an *unknown* program,
recorded into the linear jaxpr, that reads them:

* ``cond``: every branch is split; the branches' residuals share slots by type
  (one branch runs, so there are as many slots of a type as the hungriest
  branch needs, as in JAX) and each known branch returns zeros in the slots it
  does not use, so both halves stay one ``cond`` on the same (known) index.
* ``scan``: the body is split, with a fixed point making a carry unknown when
  the body makes it so.  Residuals that are loop-invariant inputs (the known
  consts) are passed to the unknown scan as consts and residuals that are
  slices of the known ``xs`` are passed as those ``xs``; everything else is
  stacked by the known scan as extra ``ys`` and scanned over by the unknown one.
* ``while``: the trip count is only known when the loop runs, so nothing can be
  stacked ahead of time.  The known loop (a ``checkpointed_while`` call) keeps
  the carry at every ``stride``-th step in a fixed number of slots, thinning
  them and doubling the stride when they are full; the unknown part is one
  ``while_lin`` whose transpose walks the steps backwards, recomputing each
  step's carry from the nearest checkpoint (``_split_while_rev``; costs and
  references in docs/autodiff.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import building as B
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Var, dce_jaxpr, hoist_consts
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.prims.control_flow import (
    add_unused_inputs,
    checkpointed_while_p,
    cond_p,
    join_consts,
    linear_solve_p,
    linear_solve_parts,
    permute_inputs,
    permute_outputs,
    scan_p,
    scan_split,
    while_lin_p,
    while_p,
)
from ftrans.core.sharding_rules import stacked as stacked_aval
from ftrans.core.trace import aval_of, stage
from ftrans.transforms.ad import (
    Zero,
    add_tangents,
    instantiate,
    jvp_flat,
    jvp_jaxpr,
    register_jvp,
    tangent_aval,
    zeros_like_aval,
)
from ftrans.transforms.partial_eval import (
    LinearizeTrace,
    _merge,
    forward_input_residuals,
    partial_eval_jaxpr,
    partial_eval_jaxpr_rules,
    partial_eval_rules,
)
from ftrans.transforms.transpose import UndefinedPrimal, backward_pass

# ----------------------------------------------------------------------------
# Forward mode


def _nz(ts: list) -> list[bool]:
    return [type(t) is not Zero for t in ts]


def _or(a: Sequence[bool], b: Sequence[bool]) -> list[bool]:
    return [x or y for x, y in zip(a, b)]


def _tangents_out(avals: list, nz: list[bool], vals: list) -> list:
    it = iter(vals)
    return [next(it) if z else Zero(tangent_aval(a)) for a, z in zip(avals, nz)]


@register_jvp(cond_p)
def _cond_jvp(primals: list, tangents: list, *, branches: tuple) -> tuple[list, list]:
    index, ops = primals[0], list(primals[1:])
    ops_t = list(tangents[1:])
    nz = _nz(ops_t)
    n_out = len(branches[0].out_avals)
    out_nz = [False] * n_out
    for b in branches:
        out_nz = _or(out_nz, jvp_jaxpr(b, nz)[1])
    pairs = []
    for b in branches:
        new, got = jvp_jaxpr(b, nz, instantiate=out_nz)
        assert got == out_nz, "cond branches disagree on which tangents are non-zero"
        pairs.append(hoist_consts(new))
    bodies, consts = join_consts(pairs)
    nz_t = [t for t in ops_t if type(t) is not Zero]
    outs = cond_p.bind(index, *consts, *ops, *nz_t, branches=tuple(bodies))
    return list(outs[:n_out]), _tangents_out(branches[0].out_avals, out_nz, list(outs[n_out:]))


def _carry_fixpoint(body: ClosedJaxpr, lead_nz: list[bool], carry_nz: list[bool], n_carry: int,
                    rest_nz: list[bool], n_extra_out: int) -> list[bool]:
    """Which carries need tangents: those non-zero going in, or made non-zero by the body."""
    carry_nz = list(carry_nz)
    while True:
        _, out_nz = jvp_jaxpr(body, lead_nz + carry_nz + rest_nz, instantiate=carry_nz + [False] * n_extra_out)
        new = _or(carry_nz, out_nz[:n_carry])
        if new == carry_nz:
            return carry_nz
        carry_nz = new


@register_jvp(while_p)
def _while_jvp(primals: list, tangents: list, *, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr,
               cond_nconsts: int, body_nconsts: int) -> tuple[list, list]:
    nc, nb = cond_nconsts, body_nconsts
    cc, bc, init = primals[:nc], primals[nc:nc + nb], primals[nc + nb:]
    bc_t, init_t = tangents[nc:nc + nb], tangents[nc + nb:]
    n = len(init)
    bc_nz = _nz(bc_t)
    carry_nz = _carry_fixpoint(body_jaxpr, bc_nz, _nz(init_t), n, [], 0)
    body, out_nz = jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, instantiate=carry_nz)
    body, hc = hoist_consts(body)
    k_b, k_c = sum(bc_nz), sum(carry_nz)
    h = len(hc)
    # body inputs: [hc, bc, carry, bc_t, carry_t] -> [hc, bc, bc_t, carry, carry_t]
    order = (list(range(h + nb)) + list(range(h + nb + n, h + nb + n + k_b)) + list(range(h + nb, h + nb + n))
             + list(range(h + nb + n + k_b, h + nb + n + k_b + k_c)))
    body = permute_inputs(body, order)
    carry_t_avals = [tangent_aval(a) for a, z in zip(body_jaxpr.out_avals, carry_nz) if z]
    cond = add_unused_inputs(cond_jaxpr, carry_t_avals, nc + n)
    bc_t_nz = [t for t in bc_t if type(t) is not Zero]
    init_t_nz = [instantiate(t) for t, z in zip(init_t, carry_nz) if z]
    outs = while_p.bind(*cc, *hc, *bc, *bc_t_nz, *init, *init_t_nz, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=nc, body_nconsts=h + nb + k_b)
    return list(outs[:n]), _tangents_out(body_jaxpr.out_avals, carry_nz, list(outs[n:]))


@register_jvp(scan_p)
def _scan_jvp(primals: list, tangents: list, *, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int,
              length: int, reverse: bool, unroll: int) -> tuple[list, list]:
    consts, init, xs = scan_split(primals, num_consts, num_carry)
    consts_t, init_t, xs_t = scan_split(tangents, num_consts, num_carry)
    nk, n, nx = len(consts), len(init), len(xs)
    n_ys = len(jaxpr.out_avals) - n
    const_nz, xs_nz = _nz(consts_t), _nz(xs_t)
    carry_nz = _carry_fixpoint(jaxpr, const_nz, _nz(init_t), n, xs_nz, n_ys)
    body, out_nz = jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, instantiate=carry_nz + [False] * n_ys)
    ys_nz = out_nz[n:]
    body, hc = hoist_consts(body)
    h = len(hc)
    kk, kc, kx = sum(const_nz), sum(carry_nz), sum(xs_nz)
    # inputs [hc, consts, carry, xs, consts_t, carry_t, xs_t] -> [hc, consts, consts_t, carry, carry_t, xs, xs_t]
    p_c, p_r, p_x = h, h + nk, h + nk + n
    t_c = h + nk + n + nx
    t_r, t_x = t_c + kk, t_c + kk + kc
    order = (list(range(h)) + list(range(p_c, p_c + nk)) + list(range(t_c, t_c + kk))
             + list(range(p_r, p_r + n)) + list(range(t_r, t_r + kc))
             + list(range(p_x, p_x + nx)) + list(range(t_x, t_x + kx)))
    body = permute_inputs(body, order)
    # outputs [carry, ys, carry_t, ys_t] -> [carry, carry_t, ys, ys_t]
    ky = sum(ys_nz)
    out_order = (list(range(n)) + list(range(n + n_ys, n + n_ys + kc)) + list(range(n, n + n_ys))
                 + list(range(n + n_ys + kc, n + n_ys + kc + ky)))
    body = permute_outputs(body, out_order)
    consts_t_nz = [t for t in consts_t if type(t) is not Zero]
    init_t_nz = [instantiate(t) for t, z in zip(init_t, carry_nz) if z]
    xs_t_nz = [t for t in xs_t if type(t) is not Zero]
    outs = scan_p.bind(*hc, *consts, *consts_t_nz, *init, *init_t_nz, *xs, *xs_t_nz, jaxpr=body,
                       num_consts=h + nk + kk, num_carry=n + kc, length=length, reverse=reverse, unroll=unroll)
    carry_out, carry_t = list(outs[:n]), list(outs[n:n + kc])
    ys, ys_t = list(outs[n + kc:n + kc + n_ys]), list(outs[n + kc + n_ys:])
    y_avals = [_stacked(a, length) for a in jaxpr.out_avals[n:]]
    return (carry_out + ys,
            _tangents_out(jaxpr.out_avals[:n], carry_nz, carry_t) + _tangents_out(y_avals, ys_nz, ys_t))


def _stacked(a: Any, length: int) -> Any:
    return stacked_aval(a, length)  # typed as the scan types it (an unsplit leading dimension)


# ----------------------------------------------------------------------------
# Splitting with forced-unknown outputs


def partial_eval_jaxpr_inst(closed: ClosedJaxpr, unknowns: Sequence[bool], instantiate: Sequence[bool],
                            saveable: Any = None, also: Sequence[bool] | None = None
                            ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """``partial_eval_jaxpr`` where the outputs marked in ``instantiate`` come out of the unknown part even
    when they are known (they travel as residuals, or under a policy are recomputed unless saveable):
    branches and loop bodies must agree on which outputs are unknown."""
    return partial_eval_jaxpr(closed, unknowns, saveable, instantiate=instantiate, also=also)


def _is_unknown(trace: LinearizeTrace, tracers: list) -> tuple[list[bool], list]:
    knowns = [trace.known_value(t) for t in tracers]
    return [not k for k, _ in knowns], [v for _, v in knowns]


# ----------------------------------------------------------------------------
# cond


def _split_cond(branches: tuple, ops_unk: list[bool], saveable: Any = None, force: list[bool] | None = None
                ) -> tuple[list, list[ClosedJaxpr], list[bool], list[ShapedArray], list[int]]:
    """Known branches (known ops -> known outs + computed residuals) and unknown ones (computed residuals +
    the forwarded known ops + unknown ops -> unknown outs, then the known outs ``force`` marks), the
    unknown-output mask, the computed residuals' types, and which known operands (positions among the known
    ones) the unknown branches read directly: a residual that is just a known operand is not passed through
    the known cond. ``saveable`` (an enclosing checkpoint's policy) decides what the branches save and
    recompute."""
    out_unk = [False] * len(branches[0].out_avals)
    for b in branches:
        out_unk = _or(out_unk, partial_eval_jaxpr(b, ops_unk, saveable)[2])
    also = [bool(f) and not u for f, u in zip(force, out_unk)] if force is not None else None
    splits = []
    for b in branches:
        k, u, _, n = partial_eval_jaxpr_inst(b, ops_unk, out_unk, saveable, also)
        k, sources = forward_input_residuals(k, n)
        splits.append((k, u, n, sources))
    fwd = sorted({src for *_, sources in splits for src in sources if src is not None})
    known_avals = [a for a, un in zip(branches[0].in_avals, ops_unk) if not un]
    res_avals = [[v.aval for v in k.jaxpr.outvars[len(k.jaxpr.outvars) - sum(s is None for s in src):]]
                 for k, _, _, src in splits]
    all_res, slots = _residual_slots(res_avals)
    known_b, unknown_b = [], []
    for i, (k, u, n, sources) in enumerate(splits):
        mine = slots[i]
        n_comp = len(mine)

        def known_fun(*args: Any, k=k, n_comp=n_comp, mine=mine) -> list:
            outs = eval_jaxpr(k.jaxpr, list(k.consts), *args)
            m = len(outs) - n_comp
            res = [zeros_like_aval(a) for a in all_res]
            for j, slot in enumerate(mine):
                res[slot] = outs[m + j]
            return list(outs[:m]) + res

        kc, _ = stage(known_fun, k.in_avals)
        known_b.append(hoist_consts(kc))
        uj = u.jaxpr
        res_in, rest = list(uj.invars[:n]), list(uj.invars[n:])
        computed = [v for v, src in zip(res_in, sources) if src is None]
        by_src = {src: v for v, src in zip(res_in, sources) if src is not None}
        lead = [Var(a) for a in all_res]
        for v, slot in zip(computed, mine):
            lead[slot] = v
        fwd_in = [by_src.get(j) or Var(known_avals[j]) for j in fwd]
        unknown_b.append((ClosedJaxpr(Jaxpr(uj.constvars, lead + fwd_in + rest, uj.eqns, uj.outvars),
                                      u.consts), []))
    kb, kconsts = join_consts(known_b)
    ub, _ = join_consts(unknown_b)
    return [(b, kconsts) for b in kb], ub, out_unk, all_res, fwd


def _residual_slots(res_avals: list[list[ShapedArray]]) -> tuple[list[ShapedArray], list[list[int]]]:
    """Lay the branches' residuals out in shared slots: only one branch runs, so a branch's residual takes
    the first slot of its type that this branch has not used yet (as JAX merges them), and the known cond
    returns as many residuals as the hungriest branch of each type needs, not their sum."""
    all_res: list[ShapedArray] = []
    slots: list[list[int]] = []
    for r in res_avals:
        used: set[int] = set()
        mine = []
        for a in r:
            key = (a.shape, a.dtype, a.weak_type)
            slot = next((k for k, b in enumerate(all_res)
                         if k not in used and (b.shape, b.dtype, b.weak_type) == key), None)
            if slot is None:
                slot = len(all_res)
                all_res.append(a)
            used.add(slot)
            mine.append(slot)
        slots.append(mine)
    return all_res, slots


def _cond_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    branches = params["branches"]
    unk, vals = _is_unknown(trace, tracers)
    if unk[0]:  # an index computed from tangents cannot happen (integers have no tangents)
        return trace.record(cond_p, tracers, params)
    ops_unk = unk[1:]
    known_b, unknown_b, out_unk, res_avals, fwd = _split_cond(branches, ops_unk)
    kconsts = known_b[0][1]
    known_ops = [v for v, u in zip(vals[1:], ops_unk) if not u]
    outs = cond_p.bind(vals[0], *kconsts, *known_ops, branches=tuple(b for b, _ in known_b))
    n_res = len(res_avals)
    n_known = len(outs) - n_res
    known_outs, res = list(outs[:n_known]), list(outs[n_known:])
    ops = ([tracers[0]] + [trace.full_raise(r) for r in res] + [trace.full_raise(known_ops[j]) for j in fwd]
           + [t for t, u in zip(tracers[1:], ops_unk) if u])
    unknown_outs = trace.record(cond_p, ops, dict(params, branches=tuple(unknown_b)))
    return _merge(out_unk, known_outs, unknown_outs)


def _cond_split_eqn(eqn: JaxprEqn, unk_in: list[bool], saveable: Any = None, force: list[bool] | None = None
                    ) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    if unk_in[0]:
        return None, eqn, [True] * len(eqn.outvars)  # pragma: no cover - see _cond_partial_eval
    ops_unk = unk_in[1:]
    known_b, unknown_b, out_unk, res_avals, fwd = _split_cond(eqn.params["branches"], ops_unk, saveable, force)
    force = force or [False] * len(out_unk)
    kconsts = known_b[0][1]
    res_vars = [Var(a) for a in res_avals]
    known_ops = [a for a, u in zip(eqn.invars[1:], ops_unk) if not u]
    k_in = [eqn.invars[0]] + _as_atoms(kconsts) + known_ops
    k_out = [v for v, u in zip(eqn.outvars, out_unk) if not u] + res_vars
    k_eqn = eqn.replace(invars=k_in, outvars=k_out, params=dict(branches=tuple(b for b, _ in known_b)))
    u_in = [eqn.invars[0]] + res_vars + [known_ops[j] for j in fwd] + \
        [a for a, u in zip(eqn.invars[1:], ops_unk) if u]
    u_eqn = eqn.replace(invars=u_in, outvars=[v for v, u, f in zip(eqn.outvars, out_unk, force) if u or f],
                        params=dict(branches=tuple(unknown_b)))
    return k_eqn, u_eqn, out_unk


_cond_split_eqn.policy_aware = True  # type: ignore[attr-defined]


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


# ----------------------------------------------------------------------------
# scan


class _ScanSplit:
    """How a scan splits: the known scan's body and the unknown scan's body, and where residuals go.

    ``thread`` marks known carries the unknown scan carries too (only under a checkpoint policy): the
    unknown body recomputes their per-step values from the saved ones instead of reading them as stacked
    residuals. The unknown scan's carries are those unknown or threaded, in the original order.
    """

    __slots__ = ("known", "unknown", "carry_unk", "ys_unk", "ys_also", "res_kind", "res_src", "n_stacked",
                 "carry_saved", "thread")


def _split_scan(jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, unk_in: list[bool], saveable: Any = None,
                ys_force: list[bool] | None = None, carry_force: list[bool] | None = None) -> _ScanSplit:
    """``saveable``: an enclosing checkpoint's policy, applied in the body. ``ys_force``: known ``ys`` the
    unknown scan must produce as well (recomputed per step, or stacked residuals); ``carry_force``: known
    final carries it must produce as well (under a policy: they are threaded, below).

    Under a policy, a known carry the unknown body reads is not saved at every step (the policy did not
    choose it): the unknown scan carries it as well, recomputing the known carry chain from what the policy
    saved (JAX's ``partial_eval_jaxpr_custom`` rule for scan does the same). Which carries that takes is a
    fixed point: producing a threaded carry's next value may read further known carries.
    """
    consts_unk, carry_unk, xs_unk = scan_split(unk_in, num_consts, num_carry)
    n_ys = len(jaxpr.out_avals) - num_carry
    thread = [bool(f) and not u for f, u in zip(carry_force, carry_unk)] if carry_force else [False] * num_carry
    while True:
        also = thread + (list(ys_force) if ys_force is not None else [False] * n_ys)
        k, u, out_unk, n_res = partial_eval_jaxpr_inst(jaxpr, consts_unk + carry_unk + xs_unk,
                                                       carry_unk + [False] * n_ys, saveable,
                                                       also if any(also) else None)
        new = _or(carry_unk, out_unk[:num_carry])
        if new != carry_unk:
            carry_unk = new
            thread = [t and not c for t, c in zip(thread, carry_unk)]
            continue
        if saveable is None:
            break
        kj = k.jaxpr
        n_kc = num_consts - sum(consts_unk)
        known_carries = [j for j, c in enumerate(carry_unk) if not c]
        pos = {id(v): i for i, v in enumerate(kj.invars)}
        read = set()
        for v in kj.outvars[len(kj.outvars) - n_res:]:
            i = pos.get(id(v)) if isinstance(v, Var) else None
            if i is not None and n_kc <= i < n_kc + len(known_carries):
                read.add(known_carries[i - n_kc])
        new_thread = [t or j in read for j, t in enumerate(thread)]
        if new_thread == thread:
            break
        thread = new_thread
    kj = k.jaxpr
    n_k_out = len(kj.outvars) - n_res
    res = kj.outvars[n_k_out:]
    n_kc = num_consts - sum(consts_unk)
    n_kr = num_carry - sum(carry_unk)
    known_carries = [j for j, c in enumerate(carry_unk) if not c]
    pos = {id(v): i for i, v in enumerate(kj.invars)}
    kinds, srcs = [], []  # per residual: "const" / "xs" (a known input passed as is), "carry", or "stacked"
    out_carry_saved = False
    for v in res:
        i = pos.get(id(v)) if isinstance(v, Var) else None
        if i is not None and i < n_kc:
            kinds.append("const")
            srcs.append(i)
        elif i is not None and i >= n_kc + n_kr:
            kinds.append("xs")
            srcs.append(i - n_kc - n_kr)
        elif i is not None and thread[known_carries[i - n_kc]]:
            kinds.append("carry")  # a threaded known carry: the unknown scan carries it
            srcs.append(known_carries[i - n_kc])
        else:
            if i is not None:  # a known carry, saved at every step
                out_carry_saved = True
            kinds.append("stacked")
            srcs.append(None)
    # The known body returns its known carry and ys, then only the stacked residuals.
    stacked_outs = [v for v, kd in zip(res, kinds) if kd == "stacked"]
    known = ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, kj.eqns, list(kj.outvars[:n_k_out]) + stacked_outs),
                        k.consts)
    # The unknown body takes [const res, unknown consts, unknown and threaded carries (in order), stacked res,
    # xs res, unknown xs].
    uj = u.jaxpr
    r_in, rest = list(uj.invars[:n_res]), list(uj.invars[n_res:])
    n_uc, n_ur = sum(consts_unk), sum(carry_unk)
    u_consts, u_carry, u_xs = rest[:n_uc], rest[n_uc:n_uc + n_ur], rest[n_uc + n_ur:]
    by = {kd: [v for v, k2 in zip(r_in, kinds) if k2 == kd] for kd in ("const", "stacked", "xs")}
    threaded = {src: v for v, kd, src in zip(r_in, kinds, srcs) if kd == "carry"}
    unk_it = iter(u_carry)
    carries = []
    for j in range(num_carry):
        if carry_unk[j]:
            carries.append(next(unk_it))
        elif thread[j]:  # a threaded carry the body does not read still needs its slot
            v = threaded.get(j)
            carries.append(v if v is not None else Var(jaxpr.in_avals[num_consts + j]))
    invars = by["const"] + u_consts + carries + by["stacked"] + by["xs"] + u_xs
    out = _ScanSplit()
    out.known = known
    out.unknown = ClosedJaxpr(Jaxpr(uj.constvars, invars, uj.eqns, uj.outvars), u.consts)
    out.carry_unk = carry_unk
    out.ys_unk = out_unk[num_carry:]
    out.ys_also = [bool(f) and not u for f, u in zip(ys_force, out.ys_unk)] if ys_force else [False] * n_ys
    out.res_kind = kinds
    out.res_src = srcs
    out.n_stacked = len(stacked_outs)
    out.carry_saved = out_carry_saved
    out.thread = thread
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
    kbody, hc = hoist_consts(sp.known)
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
    ubody, uhc = hoist_consts(sp.unknown)
    ops = ([trace.full_raise(c) for c in uhc] + res_const + u_consts + u_carry
           + [trace.full_raise(s) for s in stacked] + res_xs + u_xs)
    unknown_outs = trace.record(scan_p, ops, dict(
        params, jaxpr=ubody, num_consts=len(uhc) + len(res_const) + len(u_consts), num_carry=len(u_carry)))
    n_uc = len(u_carry)
    carry_out = _merge(carry_unk, list(known_carry), list(unknown_outs[:n_uc]))
    ys_out = _merge(sp.ys_unk, list(known_ys), list(unknown_outs[n_uc:]))
    return carry_out + ys_out


def _scan_split_eqn(eqn: JaxprEqn, unk_in: list[bool], saveable: Any = None, force: list[bool] | None = None
                    ) -> tuple[JaxprEqn | None, JaxprEqn, list[bool]]:
    p = eqn.params
    nk, nc = p["num_consts"], p["num_carry"]
    carry_force = list(force[:nc]) if force is not None else [False] * nc
    if saveable is None and any(carry_force):
        return None, eqn, [True] * len(eqn.outvars)  # a known final carry the unknown side reads: not split
    sp = _split_scan(p["jaxpr"], nk, nc, unk_in, saveable, list(force[nc:]) if force is not None else None,
                     carry_force)
    if sp.known.consts or sp.unknown.consts:
        raise NotImplementedError("scan split produced constants")  # pragma: no cover - bodies close over nothing
    consts_unk, _, xs_unk = scan_split(unk_in, nk, nc)
    c_in, r_in, x_in = scan_split(list(eqn.invars), nk, nc)
    k_consts = [a for a, u in zip(c_in, consts_unk) if not u]
    k_carry = [a for a, u in zip(r_in, sp.carry_unk) if not u]
    k_xs = [a for a, u in zip(x_in, xs_unk) if not u]
    c_out, y_out = eqn.outvars[:nc], eqn.outvars[nc:]
    length = p["length"]
    stacked_vars = [Var(_stacked(a, length)) for a in sp.known.out_avals[len(sp.known.out_avals) - sp.n_stacked:]]
    k_out = ([v for v, u in zip(c_out, sp.carry_unk) if not u] + [v for v, u in zip(y_out, sp.ys_unk) if not u]
             + stacked_vars)
    k_eqn = eqn.replace(invars=k_consts + k_carry + k_xs, outvars=k_out,
                        params=dict(p, jaxpr=sp.known, num_consts=len(k_consts), num_carry=len(k_carry)))
    res_const = [k_consts[s] for kd, s in zip(sp.res_kind, sp.res_src) if kd == "const"]
    res_xs = [k_xs[s] for kd, s in zip(sp.res_kind, sp.res_src) if kd == "xs"]
    u_consts = [a for a, u in zip(c_in, consts_unk) if u]
    u_carry = [a for a, u, t in zip(r_in, sp.carry_unk, sp.thread) if u or t]
    u_xs = [a for a, u in zip(x_in, xs_unk) if u]
    # A threaded carry's final value is the known scan's output; the unknown scan's copy goes unread unless
    # the unknown side asked for it (``force``).
    u_out = [v if u or f else Var(v.aval) for v, u, t, f in zip(c_out, sp.carry_unk, sp.thread, carry_force)
             if u or t] + \
        [v for v, u, a in zip(y_out, sp.ys_unk, sp.ys_also) if u or a]
    u_eqn = eqn.replace(invars=res_const + u_consts + u_carry + stacked_vars + res_xs + u_xs, outvars=u_out,
                        params=dict(p, jaxpr=sp.unknown, num_consts=len(res_const) + len(u_consts),
                                    num_carry=len(u_carry)))
    return k_eqn, u_eqn, list(sp.carry_unk) + list(sp.ys_unk)


partial_eval_rules[scan_p] = _scan_partial_eval
_scan_split_eqn.policy_aware = True  # type: ignore[attr-defined]
partial_eval_jaxpr_rules[scan_p] = _scan_split_eqn


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
    # An unknown carry whose body output happens to be known (it does not read the unknown values) still
    # comes out of the unknown half: the known loop carries the known carries only.
    k, _, _, n_res = partial_eval_jaxpr(body_jaxpr, bc_unk + carry_unk, instantiate=carry_unk)
    n_out = len(k.jaxpr.outvars) - n_res
    kj, _ = dce_jaxpr(k.jaxpr, [True] * n_out + [False] * n_res)
    known_body = ClosedJaxpr(kj, k.consts)
    cj = cond_jaxpr.jaxpr
    keep = [True] * nc + [not u for u in carry_unk]
    known_cond = ClosedJaxpr(Jaxpr(cj.constvars, [v for v, kp in zip(cj.invars, keep) if kp], cj.eqns, cj.outvars),
                             cond_jaxpr.consts)
    return carry_unk, known_cond, known_body


class _WhileRev:
    """How a linearized ``while`` splits for reverse mode (docs/autodiff.md, "Reverse mode of while_loop").

    ``fwd``: (cond consts, known body consts, known init) -> (known final carry, step count n, stride,
    checkpoint buffers) -- the primal loop, also writing carry ``i`` into slot ``i // stride`` whenever
    ``stride`` divides ``i``; when the ``S`` slots are full, every other one is dropped and the stride doubles.
    ``lin``: (known body consts, buffers, n, stride, unknown body consts, unknown init) -> unknown final
    carry, the tangent loop replayed from the first checkpoint.  ``bwd`` transposes ``lin``.
    """

    __slots__ = ("carry_unk", "fwd", "lin", "bwd", "n_res")


def _int32(x: Any) -> Any:
    return np.asarray(x, np.int32)


def _bind_while(cond_fn: Any, body_fn: Any, cconsts: list, bconsts: list, init: list) -> list:
    """``while_p`` on Python functions of (consts, carry) (staged here)."""
    ia = [aval_of(x) for x in init]
    cj, _ = stage(cond_fn, [aval_of(c) for c in cconsts] + ia)
    cj, chc = hoist_consts(cj)
    bj, _ = stage(body_fn, [aval_of(c) for c in bconsts] + ia)
    bj, bhc = hoist_consts(bj)
    return list(while_p.bind(*chc, *cconsts, *bhc, *bconsts, *init, cond_jaxpr=cj, body_jaxpr=bj,
                             cond_nconsts=len(chc) + len(cconsts), body_nconsts=len(bhc) + len(bconsts)))


def _bind_cond(pred: Any, false_fn: Any, true_fn: Any, ops: list) -> list:
    avals = [aval_of(o) for o in ops]
    pairs = [hoist_consts(stage(f, avals)[0]) for f in (false_fn, true_fn)]
    bodies, consts = join_consts(pairs)
    idx = B.convert_element_type(pred, np.dtype(np.int32))
    return list(cond_p.bind(idx, *consts, *ops, branches=tuple(bodies)))


def _slot(buf: Any, k: Any) -> Any:
    shape = tuple(aval_of(buf).shape)
    z = [_int32(0)] * (len(shape) - 1)
    row = S.dynamic_slice_p.bind(buf, k, *z, slice_sizes=(1,) + shape[1:])
    return B.reshape(row, shape[1:])


def _write_rows(bufs: list, rows: list, idx: Any) -> list:
    out = []
    for buf, c in zip(bufs, rows):
        sh = tuple(aval_of(buf).shape)
        out.append(S.dynamic_update_slice_p.bind(buf, B.reshape(c, (1,) + sh[1:]), idx, *[_int32(0)] * (len(sh) - 1)))
    return out


# Buffer levels below the forward loop's in the backward pass (see _split_while_rev).
_LEVELS = 2


def _run_closed(closed: ClosedJaxpr, *args: Any) -> list:
    return list(eval_jaxpr(closed.jaxpr, list(closed.consts), *args))


def _split_while_rev(cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, nc: int, nb: int, unk: list[bool]
                     ) -> _WhileRev | None:
    carry_unk, kcond, kbody = _while_split(cond_jaxpr, body_jaxpr, nc, nb, unk)
    if kcond is None or all(carry_unk) or not any(carry_unk):
        return None
    from ftrans.core.config import config

    n_slots = 2 * ((config.while_checkpoints + 1) // 2)  # even, so thinning halves it exactly
    bc_unk = unk[nc:nc + nb]
    kfull, ubody, _, n_res = partial_eval_jaxpr(body_jaxpr, bc_unk + carry_unk, instantiate=carry_unk)
    k_avals = [a for a, u in zip(body_jaxpr.out_avals, carry_unk) if not u]
    nk = len(k_avals)
    nkb = sum(not u for u in bc_unk)
    nub = sum(bc_unk)
    u_avals = [a for a, u in zip(body_jaxpr.out_avals, carry_unk) if u]

    # The buffers keep the carries' weak types, so the carries read back from them (and the tangents
    # computed from those) are as weakly typed as the loop's own (JAX's linearize of a while_loop).
    buf_avals = [ShapedArray((n_slots + 1,) + a.shape, a.dtype, a.weak_type) for a in k_avals]

    def fwd(*args: Any) -> list:
        cc, bc, init = list(args[:nc]), list(args[nc:nc + nkb]), list(args[nc + nkb:])
        bufs = [zeros_like_aval(a) for a in buf_avals]

        def cond_fn(*a: Any) -> list:
            return _run_closed(kcond, *a[:nc], *a[nc + 2:nc + 2 + nk])

        def body_fn(*a: Any) -> list:
            bc_, (i, stride), carry, bs = list(a[:nkb]), a[nkb:nkb + 2], list(a[nkb + 2:nkb + 2 + nk]), \
                list(a[nkb + 2 + nk:])
            write = B.eq(E.rem_p.bind(i, stride), _int32(0))
            full = E.and_p.bind(write, B.eq(B.div(i, stride), _int32(n_slots)))

            def keep(st: Any, *b: Any) -> list:
                return [st, *b]

            def thin(st: Any, *b: Any) -> list:
                out = []
                for buf in b:
                    sh = tuple(aval_of(buf).shape)
                    half = S.slice_p.bind(buf, start_indices=(0,) * len(sh), limit_indices=(n_slots,) + sh[1:],
                                          strides=(2,) + (1,) * (len(sh) - 1))
                    out.append(S.dynamic_update_slice_p.bind(buf, half, *[_int32(0)] * len(sh)))
                return [B.mul(st, _int32(2)), *out]

            stride, *bs = _bind_cond(full, keep, thin, [stride, *bs])
            idx = B.select(write, B.div(i, stride), _int32(n_slots))
            new_bs = _write_rows(bs, carry, idx)
            new_carry = _run_closed(kbody, *bc_, *carry)
            return [B.add(i, _int32(1)), stride, *new_carry, *new_bs]

        outs = _bind_while(cond_fn, body_fn, cc, bc, [_int32(0), _int32(1), *init, *bufs])
        n, stride, final, bs = outs[0], outs[1], outs[2:2 + nk], outs[2 + nk:]
        return [*final, n, stride, *bs]

    def step(bc: list, carry: list) -> tuple[list, list]:
        outs = _run_closed(kfull, *bc, *carry)
        return outs[:len(outs) - n_res], outs[len(outs) - n_res:]

    def lin(*args: Any) -> list:
        bc, bs = list(args[:nkb]), list(args[nkb:nkb + nk])
        n = args[nkb + nk]
        ubc, uinit = list(args[nkb + nk + 2:nkb + nk + 2 + nub]), list(args[nkb + nk + 2 + nub:])
        c0 = [_slot(b, _int32(0)) for b in bs]

        def cond_fn(n_: Any, i: Any, *_: Any) -> list:
            return [E.lt_p.bind(i, n_)]

        def body_fn(*a: Any) -> list:
            bc_, ubc_ = list(a[:nkb]), list(a[nkb:nkb + nub])
            i, c, t = a[nkb + nub], list(a[nkb + nub + 1:nkb + nub + 1 + nk]), list(a[nkb + nub + 1 + nk:])
            new_c, res = step(bc_, c)
            new_t = _run_closed(ubody, *res, *ubc_, *t)
            return [B.add(i, _int32(1)), *new_c, *new_t]

        outs = _bind_while(cond_fn, body_fn, [n], bc + ubc, [_int32(0), *c0, *uinit])
        return outs[1 + nk:]

    k_bc_avals = [a for a, u in zip(body_jaxpr.in_avals[:nb], bc_unk) if not u]
    u_bc_avals = [a for a, u in zip(body_jaxpr.in_avals[:nb], bc_unk) if u]
    i32 = ShapedArray((), np.dtype(np.int32))
    lin_closed, _ = stage(lin, k_bc_avals + buf_avals + [i32, i32] + u_bc_avals + u_avals)
    fwd_closed, _ = stage(fwd, list(cond_jaxpr.in_avals[:nc]) + k_bc_avals + k_avals)

    # The backward pass.  Level 0 is the forward loop's buffer (stride doubling, as the trip count was not
    # known); each segment between two of its checkpoints has a known length, so the next level refills a
    # buffer of the same size over it with a fixed stride, and so on for _LEVELS levels; the last level's
    # segments (one step long unless n > S ** (_LEVELS + 1)) recompute each step from their start.
    def advance(bc: list, c: list, m: Any) -> list:
        def cond_fn(m_: Any, j: Any, *_: Any) -> list:
            return [E.lt_p.bind(j, m_)]

        def body_fn(*r: Any) -> list:
            bcr, j, cr = list(r[:nkb]), r[nkb], list(r[nkb + 1:])
            return [B.add(j, _int32(1)), *_run_closed(kbody, *bcr, *cr)]

        return _bind_while(cond_fn, body_fn, [m], bc, [_int32(0), *c])[1:]

    def vjp_step(bc: list, c: list, ct: list, acc: list) -> tuple[list, list]:
        _, res_j = step(bc, c)
        uj = ubody.jaxpr
        args = list(res_j) + [UndefinedPrimal(v.aval) for v in uj.invars[n_res:]]
        outs = backward_pass(uj, list(ubody.consts), args, ct)
        o_bc, o_c = outs[n_res:n_res + nub], outs[n_res + nub:]
        new_acc = [add_tangents(s_, o) if type(o) is not Zero else s_ for s_, o in zip(acc, o_bc)]
        new_ct = [instantiate(o) if type(o) is not Zero else zeros_like_aval(av) for o, av in zip(o_c, u_avals)]
        return new_ct, new_acc

    def down_loop(consts: list, start: Any, ct: list, acc: list, each: Any) -> tuple[list, list]:
        """``for j in range(start, -1, -1): ct, acc = each(consts, j, ct, acc)`` as a while loop."""
        nct = len(ct)

        def cond_fn(j: Any, *_: Any) -> list:
            return [E.ge_p.bind(j, _int32(0))]

        def body_fn(*r: Any) -> list:
            cs, j = list(r[:len(consts)]), r[len(consts)]
            ct_, acc_ = list(r[len(consts) + 1:len(consts) + 1 + nct]), list(r[len(consts) + 1 + nct:])
            new_ct, new_acc = each(cs, j, ct_, acc_)
            return [B.sub(j, _int32(1)), *new_ct, *new_acc]

        outs = _bind_while(cond_fn, body_fn, [], consts, [start, *ct, *acc])
        return outs[1:1 + nct], outs[1 + nct:]

    def leaf(bc: list, c0: list, length: Any, ct: list, acc: list) -> tuple[list, list]:
        def each(cs: list, j: Any, ct_: list, acc_: list) -> tuple[list, list]:
            bc_, c0_ = cs[:nkb], cs[nkb:]
            return vjp_step(bc_, advance(bc_, c0_, j), ct_, acc_)

        return down_loop(bc + c0, B.sub(length, _int32(1)), ct, acc, each)

    def fill(bc: list, c0: list, length: Any, stride: Any) -> list:
        bufs = [zeros_like_aval(a) for a in buf_avals]

        def cond_fn(length_: Any, i: Any, *_: Any) -> list:
            return [E.lt_p.bind(i, length_)]

        def body_fn(*r: Any) -> list:
            bc_, stride_, i = list(r[:nkb]), r[nkb], r[nkb + 1]
            c, bs = list(r[nkb + 2:nkb + 2 + nk]), list(r[nkb + 2 + nk:])
            write = B.eq(E.rem_p.bind(i, stride_), _int32(0))
            idx = B.select(write, B.div(i, stride_), _int32(n_slots))
            return [B.add(i, _int32(1)), *_run_closed(kbody, *bc_, *c), *_write_rows(bs, c, idx)]

        return _bind_while(cond_fn, body_fn, [length], bc + [stride], [_int32(0), *c0, *bufs])[1 + nk:]

    def segments(depth: int, bc: list, bs: list, stride: Any, length: Any, ct: list, acc: list
                 ) -> tuple[list, list]:
        def each(cs: list, k: Any, ct_: list, acc_: list) -> tuple[list, list]:
            bc_, bs_, stride_, length_ = cs[:nkb], cs[nkb:nkb + nk], cs[nkb + nk], cs[nkb + nk + 1]
            ck = [_slot(b, k) for b in bs_]
            lk = B.apply(E.min_p, stride_, B.sub(length_, B.mul(k, stride_)))
            return level(depth - 1, bc_, ck, lk, ct_, acc_)

        last = B.sub(B.div(B.add(length, B.sub(stride, _int32(1))), stride), _int32(1))
        return down_loop(bc + bs + [stride, length], last, ct, acc, each)

    def level(depth: int, bc: list, c0: list, length: Any, ct: list, acc: list) -> tuple[list, list]:
        if depth == 0:
            return leaf(bc, c0, length, ct, acc)
        stride = B.apply(E.max_p, B.div(B.add(length, _int32(n_slots - 1)), _int32(n_slots)), _int32(1))
        return segments(depth, bc, fill(bc, c0, length, stride), stride, length, ct, acc)

    def bwd(res: list, cts: list) -> list:
        bc, bs, n, stride = list(res[:nkb]), list(res[nkb:nkb + nk]), res[nkb + nk], res[nkb + nk + 1]
        acc0 = [zeros_like_aval(a) for a in u_bc_avals]
        ct, acc = segments(_LEVELS + 1, bc, bs, stride, n, [instantiate(c) for c in cts], acc0)
        return acc + ct

    out = _WhileRev()
    out.carry_unk = carry_unk
    out.fwd = fwd_closed
    out.lin = lin_closed
    out.bwd = bwd
    out.n_res = nkb + nk + 2
    return out


def _rev_params(sp: _WhileRev, which: str) -> dict:
    if which == "fwd":
        return dict(jaxpr=sp.fwd)
    return dict(jaxpr=sp.lin, bwd=sp.bwd, num_res=sp.n_res)


def _while_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    unk, vals = _is_unknown(trace, tracers)
    sp = _split_while_rev(params["cond_jaxpr"], params["body_jaxpr"], nc, nb, unk)
    if sp is None:
        return _while_partial_eval_whole(trace, tracers, params, unk, vals)
    carry_unk = sp.carry_unk
    bc_unk = unk[nc:nc + nb]
    k_bc = [v for v, u in zip(vals[nc:nc + nb], bc_unk) if not u]
    k_init = [v for v, u in zip(vals[nc + nb:], carry_unk) if not u]
    fwd = checkpointed_while_p.bind(*vals[:nc], *k_bc, *k_init, **_rev_params(sp, "fwd"))
    nk = len(k_init)
    known_outs, ckpt = list(fwd[:nk]), list(fwd[nk:])
    n, stride, bufs = ckpt[0], ckpt[1], ckpt[2:]
    u_bc = [t for t, u in zip(tracers[nc:nc + nb], bc_unk) if u]
    u_init = [t for t, u in zip(tracers[nc + nb:], carry_unk) if u]
    ops = [trace.full_raise(r) for r in [*k_bc, *bufs, n, stride]] + u_bc + u_init
    unknown_outs = trace.record(while_lin_p, ops, _rev_params(sp, "lin"))
    return _merge(carry_unk, known_outs, list(unknown_outs))


def _while_partial_eval_whole(trace: LinearizeTrace, tracers: list, params: dict, unk: list, vals: list) -> list:
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
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
    sp = _split_while_rev(p["cond_jaxpr"], p["body_jaxpr"], nc, nb, unk_in)
    if sp is not None:
        carry_unk = sp.carry_unk
        bc_unk = unk_in[nc:nc + nb]
        k_bc = [a for a, u in zip(eqn.invars[nc:nc + nb], bc_unk) if not u]
        k_in = list(eqn.invars[:nc]) + k_bc + [a for a, u in zip(eqn.invars[nc + nb:], carry_unk) if not u]
        ck_avals = sp.fwd.out_avals[sum(not u for u in carry_unk):]
        ck_vars = [Var(a) for a in ck_avals]
        k_eqn = eqn.replace(primitive=checkpointed_while_p, invars=k_in,
                            outvars=[v for v, u in zip(eqn.outvars, carry_unk) if not u] + ck_vars,
                            params=_rev_params(sp, "fwd"))
        n, stride, bufs = ck_vars[0], ck_vars[1], ck_vars[2:]
        u_in = (k_bc + bufs + [n, stride] + [a for a, u in zip(eqn.invars[nc:nc + nb], bc_unk) if u]
                + [a for a, u in zip(eqn.invars[nc + nb:], carry_unk) if u])
        u_eqn = eqn.replace(primitive=while_lin_p, invars=u_in,
                            outvars=[v for v, u in zip(eqn.outvars, carry_unk) if u], params=_rev_params(sp, "lin"))
        return k_eqn, u_eqn, carry_unk
    return _while_split_eqn_whole(eqn, unk_in)


def _while_split_eqn_whole(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
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


def _while_lin_split_eqn(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn | None, JaxprEqn, list[bool]]:
    """A ``while_lin`` in a body split again (a ``checkpoint`` body split by linearity for its transpose, or
    by its policy): with its residuals known it stays whole on the unknown side, keeping the ``bwd`` its
    transpose is (the generic call split would rebuild it without one, leaving it untransposable)."""
    n_res = eqn.params["num_res"]
    if any(unk_in[:n_res]):
        from ftrans.transforms.ad_rules.calls import _call_split

        return _call_split(while_lin_p)(eqn, unk_in)
    return None, eqn, [True] * len(eqn.outvars)


partial_eval_jaxpr_rules[while_lin_p] = _while_lin_split_eqn


# ----------------------------------------------------------------------------
# custom_linear_solve: implicit differentiation at the solution
#
# With A x = b:  dA x + A dx = db, so dx = A^{-1} (db - dA x).  ``dA x`` is the JVP of ``matvec`` in its consts
# at the solution (its operand held fixed); the tangent solve is the same primitive on the new right-hand side,
# which is linear in it, so reverse mode transposes it (``linear_rules/control_flow.py``).


def _split_solve(vals: Sequence[Any], const_lengths: tuple) -> tuple[list[list], list]:
    groups, start = [], 0
    for k in const_lengths:
        groups.append(list(vals[start:start + k]))
        start += k
    return groups, list(vals[start:])


@register_jvp(linear_solve_p)
def _linear_solve_jvp(primals: list, tangents: list, *, const_lengths: tuple, jaxprs: tuple) -> tuple[list, list]:
    params = dict(const_lengths=const_lengths, jaxprs=jaxprs)
    x = list(linear_solve_p.bind(*primals, **params))
    consts, b = _split_solve(primals, const_lengths)
    consts_dot, b_dot = _split_solve(tangents, const_lengths)
    n_b = len(b)
    x_vec = x[:n_b]
    matvec = linear_solve_parts(jaxprs)[0]
    rhs = list(b_dot)
    if any(type(t) is not Zero for t in consts_dot[0]):
        def apply(*ins: Any) -> tuple[list, None]:
            return eval_jaxpr(matvec.jaxpr, list(matvec.consts), *ins), None

        zeros = [Zero(tangent_aval(aval_of(v))) for v in x_vec]
        _, dax, _ = jvp_flat(apply, consts[0] + x_vec, consts_dot[0] + zeros)
        rhs = [add_tangents(r, B.neg(t)) if type(t) is not Zero else r for r, t in zip(rhs, dax)]
    if all(type(r) is Zero for r in rhs):
        return x, [Zero(tangent_aval(aval_of(v))) for v in x]
    rhs = [instantiate(r) for r in rhs]
    x_dot = list(linear_solve_p.bind(*[c for g in consts for c in g], *rhs, **params))
    aux_zero = [Zero(tangent_aval(aval_of(v))) for v in x[n_b:]]
    return x, x_dot[:n_b] + aux_zero


def _linear_solve_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    """Any unknown operand makes the whole solve unknown: the tangent solve reads known consts (residuals)
    and an unknown right-hand side, and is recorded as is."""
    unk, vals = _is_unknown(trace, tracers)
    if not any(unk):
        return linear_solve_p.bind(*vals, **params)
    return trace.record(linear_solve_p, tracers, params)


def _linear_solve_split_eqn(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    return None, eqn, [True] * len(eqn.outvars)


partial_eval_rules[linear_solve_p] = _linear_solve_partial_eval
partial_eval_jaxpr_rules[linear_solve_p] = _linear_solve_split_eqn
