"""Dead-code elimination as a pass: equations whose results nobody reads are dropped.

Every ftrans primitive is pure, so an unread result is dead (``grad``'s discarded
forward value, a branch's unused intermediate).  XLA would drop it too, but only
after parsing it; the report also tells a user which of their lines did no work.
Nested bodies keep their signature (their unused inputs stay; their outputs are
all kept, since the holding equation's results map to them one to one), and the
program keeps its inputs; only its unread captured constants go, which also
saves their transfer to the device.
"""

from __future__ import annotations

from ftrans.core.ir import Jaxpr, Var, dce_jaxpr
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["DeadCodeElimination"]


class DeadCodeElimination(Pass):
    name = "dce"
    order = "pre"  # outer first: bodies of removed equations are never visited

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        new, _ = dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
        if new is not jaxpr:
            kept = {id(e) for e in new.eqns}
            for eqn in jaxpr.eqns:
                if id(eqn) not in kept:
                    ctx.record(eqn, f"removed `{eqn.primitive.name}`: its result is never used")
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
