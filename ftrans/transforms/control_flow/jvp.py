"""Forward mode of ``cond``, ``while`` and ``scan``: each body is differentiated once and one new
primitive of the same kind computes primals and tangents together.

Symbolic zeros survive where they can: only operands with non-zero tangents
get tangent inputs, and only outputs some branch (or some iteration) makes
non-zero get tangent outputs.  For loops that needs a fixed point: a carry
whose tangent is zero going in may come out non-zero (``c = c * x`` with a
non-zero tangent for ``x``), in which case its tangent is carried from the
start, as zeros.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.ir import ClosedJaxpr
from ftrans.transforms.ad import Zero, instantiate, jvp_jaxpr, register_jvp, tangent_aval
from ftrans.transforms.control_flow.common import (
    add_unused_inputs,
    hoisted,
    join_consts,
    permute_inputs,
    permute_outputs,
)
from ftrans.transforms.control_flow.primitives import cond_p, scan_p, scan_split, while_p


def _nz(ts: list) -> list[bool]:
    return [type(t) is not Zero for t in ts]


def _or(a: list[bool], b: list[bool]) -> list[bool]:
    return [x or y for x, y in zip(a, b)]


def _tangents_out(avals: list, nz: list[bool], vals: list) -> list:
    it = iter(vals)
    return [next(it) if z else Zero(tangent_aval(a)) for a, z in zip(avals, nz)]


def _differentiable(avals: list) -> list[bool]:
    return [tangent_aval(a).dtype == a.dtype for a in avals]


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
        pairs.append(hoisted(new))
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
    body, hc = hoisted(body)
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
    body, hc = hoisted(body)
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
    return a.update(shape=(length,) + a.shape)
