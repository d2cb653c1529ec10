"""Transposition of ``cond``, ``scan`` and ``while`` (the second half of reverse mode; partial evaluation is
in ``transforms/ad_rules/control_flow.py``).

``cond`` transposes each branch (one new ``cond`` on the same index); ``scan``
runs the transposed body in the opposite direction, carrying the cotangents of
the carries and accumulating those of the linear consts.  A linearized ``while`` is a
``checkpointed_while`` call (known) and a ``while_lin`` (tangents); ``while_lin``
transposes into the checkpointed backward loop built with it (see
``ad_rules/control_flow.py``).  A whole ``while`` reaches transposition only when
its predicate depends on a differentiated value, which is an error.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.ir import ClosedJaxpr, hoist_consts
from ftrans.core.prims.control_flow import (
    cond_p,
    join_consts,
    linear_solve_p,
    linear_solve_transpose_params,
    scan_p,
    scan_split,
    while_lin_p,
    while_p,
)
from ftrans.core.ref import read_for_thread, write_back
from ftrans.core.sharding_rules import stacked as stacked_aval
from ftrans.core.trace import aval_of, current_source_info, stage
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.transforms.ad import Zero, add_tangents, instantiate, tangent_aval, zeros_like_aval
from ftrans.transforms.transpose import (
    UndefinedPrimal,
    backward_pass,
    is_undefined,
    register_transpose,
    stage_threading_refs,
    transpose_jaxpr,
    transpose_rules,
)


@register_transpose(cond_p)
def _cond_transpose(cts: list, index: Any, *ops: Any, branches: tuple) -> list:
    lin = [is_undefined(o) for o in ops]
    res = [o for o in ops if not is_undefined(o)]
    nz = [type(c) is not Zero for c in cts]
    if not any(nz):
        return [None] + [Zero(o.aval) if is_undefined(o) else None for o in ops]
    pairs = [hoist_consts(transpose_jaxpr(b, lin, nz)) for b in branches]
    bodies, consts = join_consts(pairs)
    nz_cts = [c for c in cts if type(c) is not Zero]
    outs = iter(cond_p.bind(index, *consts, *res, *nz_cts, branches=tuple(bodies)))
    return [None] + [next(outs) if lin_i else None for lin_i in lin]


@register_transpose(scan_p)
def _scan_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int,
                    reverse: bool, unroll: int) -> list:
    """Run the transposed body backwards: carry the carries' cotangents, accumulate the linear consts'."""
    consts, init, xs = scan_split(args, num_consts, num_carry)
    if not all(is_undefined(c) for c in init):
        mixed = _scan_transpose_mixed(cts, list(args), jaxpr, num_consts, num_carry, length, reverse, unroll)
        if mixed is not None:
            return mixed
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
    ct_ys = [instantiate(Zero(tangent_aval(stacked_aval(a, length)))) if type(c) is Zero else c
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

    # The residual slices have the types the forward body gave them (weak type, sharding), as in JAX's
    # transposed body: the body's own input avals, not ones rebuilt from the stacked values.
    in_avals = ([aval_of(c) for c in res_c] + lin_c_avals + [tangent_aval(a) for a in r_avals]
                + [a for a, lin_i in zip(x_avals, x_lin) if not lin_i]
                + [tangent_aval(a) for a in y_avals])
    closed, _, refs = stage_threading_refs(tbody, in_avals, "a backward pass")
    n_ref = len(refs)
    if refs:  # refs a custom_vjp backward function writes into: carried by the backward loop
        closed = _refs_as_carry(closed, in_avals, [r._aval for r in refs], n_rc + n_acc + n_c, n_acc + n_c)
    body, hc = hoist_consts(closed)
    acc0 = [zeros_like_aval(a) for a in lin_c_avals]
    ref_vals = [read_for_thread(r) for r in refs]
    outs = scan_p.bind(*hc, *res_c, *acc0, *ct_carry, *ref_vals, *res_x, *ct_ys, jaxpr=body,
                       num_consts=len(hc) + n_rc, num_carry=n_acc + n_c + n_ref, length=length,
                       reverse=not reverse, unroll=unroll)
    for r, v in zip(refs, outs[n_acc + n_c:n_acc + n_c + n_ref]):
        write_back(r, v)
    outs = outs[:n_acc + n_c] + outs[n_acc + n_c + n_ref:]
    acc, ct_init, ct_xs = outs[:n_acc], outs[n_acc:n_acc + n_c], outs[n_acc + n_c:]
    acc_it, xs_it = iter(acc), iter(ct_xs)
    return ([next(acc_it) if lin_i else None for lin_i in c_lin]
            + [c if is_undefined(i) else None for c, i in zip(ct_init, init)]
            + [next(xs_it) if lin_i else None for lin_i in x_lin])


def _refs_as_carry(closed: ClosedJaxpr, in_avals: list, ref_avals: list, carry_end: int,
                   n_out_carry: int) -> ClosedJaxpr:
    """A backward scan body staged with threaded refs (their values in last, their final values out last)
    rearranged so the refs are its last carries: in after the other carries, out after their results."""
    from ftrans.core.jaxpr_api import eval_jaxpr

    n_ref = len(ref_avals)

    def body(*a: Any) -> list:
        rv = a[carry_end:carry_end + n_ref]
        outs = list(eval_jaxpr(closed.jaxpr, list(closed.consts), *a[:carry_end], *a[carry_end + n_ref:], *rv))
        main, finals = outs[:len(outs) - n_ref], outs[len(outs) - n_ref:]
        return main[:n_out_carry] + finals + main[n_out_carry:]

    new, _ = stage(body, list(in_avals[:carry_end]) + list(ref_avals) + list(in_avals[carry_end:]))
    return new


def _scan_transpose_mixed(cts: list, args: list, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int,
                          length: int, reverse: bool, unroll: int) -> list | None:
    """A scan carrying primal values beside linear ones (a checkpoint's backward pass recomputing a known
    carry chain): run its primal half forward now, a scan that also stacks the residuals the linear half
    reads, then transpose the linear half (the split of partial evaluation, as JAX's checkpoint transpose
    does). ``None`` when every carry turns out linear: the plain rule applies."""
    from ftrans.transforms.ad_rules.control_flow import _split_scan

    unk = [is_undefined(a) for a in args]
    sp = _split_scan(jaxpr, num_consts, num_carry, unk)
    if all(sp.carry_unk):  # every carry is linear (a primal initial value is an instantiated zero tangent)
        return None
    consts, init, xs = scan_split(args, num_consts, num_carry)
    consts_unk, _, xs_unk = scan_split(unk, num_consts, num_carry)
    k_consts = [c for c, u in zip(consts, consts_unk) if not u]
    k_carry = [c for c, u in zip(init, sp.carry_unk) if not u]
    k_xs = [x for x, u in zip(xs, xs_unk) if not u]
    kbody, hc = hoist_consts(sp.known)
    outs = scan_p.bind(*hc, *k_consts, *k_carry, *k_xs, jaxpr=kbody, num_consts=len(hc) + len(k_consts),
                       num_carry=len(k_carry), length=length, reverse=reverse, unroll=unroll)
    stacked = list(outs[len(outs) - sp.n_stacked:]) if sp.n_stacked else []
    res_const = [k_consts[i] for kd, i in zip(sp.res_kind, sp.res_src) if kd == "const"]
    res_xs = [k_xs[i] for kd, i in zip(sp.res_kind, sp.res_src) if kd == "xs"]
    u_consts = [c for c, u in zip(consts, consts_unk) if u]
    # A carry the linear half carries but whose initial value is a primal one (an instantiated zero tangent)
    # is transposed as linear, as every carry of a wholly linear scan is; its cotangent goes nowhere.
    u_carry = [(c if is_undefined(c) else UndefinedPrimal(tangent_aval(aval_of(c))))
               for c, u in zip(init, sp.carry_unk) if u]
    u_xs = [x for x, u in zip(xs, xs_unk) if u]
    ubody, uhc = hoist_consts(sp.unknown)
    u_args = [*uhc, *res_const, *u_consts, *u_carry, *stacked, *res_xs, *u_xs]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]
    u_cts = [c for c, u in zip(ct_carry, sp.carry_unk) if u] + [c for c, u in zip(ct_ys, sp.ys_unk) if u]
    n_c = len(uhc) + len(res_const) + len(u_consts)
    ct_in = _scan_transpose(u_cts, *u_args, jaxpr=ubody, num_consts=n_c, num_carry=len(u_carry), length=length,
                            reverse=reverse, unroll=unroll)
    ct_c, ct_r, ct_x = scan_split(list(ct_in), n_c, len(u_carry))
    ct_c_it = iter(ct_c[len(uhc) + len(res_const):])
    ct_r_it = iter(ct_r)
    ct_x_it = iter(ct_x[len(stacked) + len(res_xs):])
    ct_init = [next(ct_r_it) if u else None for u in sp.carry_unk]
    return ([next(ct_c_it) if u else None for u in consts_unk]
            + [ct if is_undefined(c) else None for ct, c in zip(ct_init, init)]
            + [next(ct_x_it) if u else None for u in xs_unk])


@register_transpose(while_p)
def _while_transpose(cts: list, *args: Any, **params: Any) -> list:
    info = current_source_info()
    where = f" (the loop at {info})" if info is not None else ""
    raise FtransValueError(
        "reverse-mode differentiation (grad, vjp, jacrev) of this lax.while_loop is not supported"
        f"{where}: its predicate depends on a value being differentiated, so the loop cannot be split into a "
        "primal loop and a tangent loop. Compute the predicate from primal values (wrap them in "
        "lax.stop_gradient), or use lax.scan / lax.fori_loop with static Python-int bounds (a scan); "
        "forward mode (jvp, jacfwd, linearize) works through while_loop"
    )


def _while_lin_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, bwd: Any, num_res: int) -> list:
    """The backward loop ``bwd`` built when the ``while`` was linearized (ad_rules/control_flow.py)."""
    res, lin = list(args[:num_res]), list(args[num_res:])
    if bwd is None or any(is_undefined(r) for r in res):
        # JAX raises ValueError for reverse mode of any while_loop; ftrans's extension covers the loop itself,
        # not a tangent loop another transform derived (grad of linearize's jvp function, say).
        raise FtransValueError(
            "reverse-mode differentiation of a linearized lax.while_loop's tangent function, once another "
            "transform (jvp, vmap, partial evaluation) has rewritten it, is not supported; differentiate the "
            "original while_loop instead (grad of the function itself works)")
    outs = [instantiate(Zero(tangent_aval(av)) if type(c) is Zero else c)
            for c, av in zip(cts, jaxpr.out_avals)]
    in_cts = bwd(res, outs)
    return [None] * num_res + [c if is_undefined(a) else None for c, a in zip(in_cts, lin)]


transpose_rules[while_lin_p] = _while_lin_transpose


@register_transpose(linear_solve_p)
def _linear_solve_transpose(cts: list, *args: Any, const_lengths: tuple, jaxprs: tuple) -> list:
    """The cotangent of ``b`` solves the transposed system: ``transpose_solve`` against ``vecmat``."""
    if len(jaxprs) == 2:
        raise FtransTypeError(
            "custom_linear_solve: reverse-mode differentiation (grad, vjp) needs transpose_solve; pass "
            "transpose_solve=..., or symmetric=True when the linear map is symmetric"
        )
    n = sum(const_lengths)
    consts, b = list(args[:n]), list(args[n:])
    if any(is_undefined(c) for c in consts):
        raise FtransTypeError(
            "custom_linear_solve: cannot transpose a solve whose linear map depends on the value being "
            "differentiated in a linear position (differentiate through matvec's arguments, not its structure)"
        )
    x_cts = cts[:len(b)]
    if all(type(c) is Zero for c in x_cts):
        return [None] * n + [Zero(v.aval) if is_undefined(v) else None for v in b]
    x_cts = [instantiate(c) for c in x_cts]
    new_lengths, new_jaxprs = linear_solve_transpose_params(const_lengths, jaxprs)
    groups, start = [], 0
    for k in const_lengths:
        groups.append(consts[start:start + k])
        start += k
    mv, vm, sv, ts = groups
    out = linear_solve_p.bind(*vm, *mv, *ts, *sv, *x_cts, const_lengths=new_lengths, jaxprs=new_jaxprs)
    b_cts = list(out[:len(b)])
    return [None] * n + [c if is_undefined(v) else None for c, v in zip(b_cts, b)]
