"""Small rewrites of bodies shared by the control-flow rules: reordering inputs and outputs, adding unused
inputs, and giving several branches one common list of captured constants."""

from __future__ import annotations

from collections.abc import Sequence

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Var
from ftrans.core.trace import aval_of
from ftrans.transforms.transpose import hoist_consts

__all__ = ["permute_inputs", "permute_outputs", "add_unused_inputs", "join_consts", "hoisted"]


def permute_inputs(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    """The same program taking its inputs in the order ``[invars[i] for i in order]``."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in order], j.eqns, j.outvars), closed.consts)


def permute_outputs(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, [j.outvars[i] for i in order]), closed.consts)


def add_unused_inputs(closed: ClosedJaxpr, avals: Sequence[ShapedArray], at: int) -> ClosedJaxpr:
    """Insert inputs of ``avals`` that the program ignores, at position ``at``."""
    j = closed.jaxpr
    new = [Var(a) for a in avals]
    invars = list(j.invars[:at]) + new + list(j.invars[at:])
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)


def hoisted(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """``closed`` with its constants moved to leading inputs, and those constants."""
    body, consts = hoist_consts(closed)
    return body, list(consts)


def join_consts(pairs: Sequence[tuple[ClosedJaxpr, list]]) -> tuple[list[ClosedJaxpr], list]:
    """Bodies whose leading inputs are their own captured constants, rewritten to all take the union of them.

    Constants shared by several bodies (the same object) are passed once.
    """
    all_consts: list = []
    index: dict[int, int] = {}
    for _, consts in pairs:
        for c in consts:
            if id(c) not in index:
                index[id(c)] = len(all_consts)
                all_consts.append(c)
    avals = [aval_of(c) for c in all_consts]
    out = []
    for body, consts in pairs:
        j = body.jaxpr
        n = len(consts)
        own = {index[id(c)]: v for c, v in zip(consts, j.invars[:n])}
        lead = [own[k] if k in own else Var(a) for k, a in enumerate(avals)]
        out.append(ClosedJaxpr(Jaxpr(j.constvars, lead + list(j.invars[n:]), j.eqns, j.outvars), body.consts))
    return out, all_consts
