"""Common-subexpression elimination: an equation that repeats an earlier one (the same
primitive, operands and params) is dropped and its results read the earlier ones.

``exp x`` computed twice by ``softmax`` written by hand, the forward values ``grad``'s
linearisation recomputes, two identical ``broadcast_in_dim`` of a zero: XLA would merge
most of them too, but later passes (the stability rewrites, merged matmuls) match shared
values by identity, so they need them merged here.  Equations with bodies are merged
when they hold the very same body objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal, Var, eqn_has_effects
from ftrans.core.prims import control_flow as CF
from ftrans.transforms.passes._util import IMPURE, Rewriter, params_key
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["CommonSubexpressionElimination"]


def _atom_key(a: Any) -> Any:
    if isinstance(a, Literal):
        v = np.asarray(a.val)
        return ("lit", v.dtype.str, v.tobytes(), a.aval.dtype.str, a.aval.weak_type)
    return id(a)


class CommonSubexpressionElimination(Pass):
    name = "cse"

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        rw = Rewriter(jaxpr)
        seen: dict[Any, Any] = {}
        pkeys: dict[int, Any] = {}  # params dicts are often shared between equations
        for eqn in jaxpr.eqns:
            invars = [rw.read(a) for a in eqn.invars]
            if eqn.primitive.name not in IMPURE and not eqn_has_effects(eqn):
                try:
                    pk = pkeys.get(id(eqn.params))
                    if pk is None:
                        pk = pkeys[id(eqn.params)] = params_key(eqn.params) if eqn.params else ()
                    key = (eqn.primitive, tuple(_atom_key(a) for a in invars), pk)
                except TypeError:
                    key = None
                if key is not None:
                    prev = seen.get(key)
                    if prev is not None and all(
                            (p.aval.shape, p.aval.dtype, p.aval.weak_type) == (o.aval.shape, o.aval.dtype,
                                                                               o.aval.weak_type)
                            for p, o in zip(prev, eqn.outvars)):
                        for o, p in zip(eqn.outvars, prev):
                            rw.forward(o, p)
                        ctx.record(eqn, f"reused an earlier identical `{eqn.primitive.name}`")
                        continue
                    seen[key] = eqn.outvars
            if eqn.primitive is CF.scan_p:
                eqn = self._dedupe_ys(eqn, rw, ctx)
            rw.emit(eqn)
        return rw.finish()

    def _dedupe_ys(self, eqn: Any, rw: Rewriter, ctx: PassContext) -> Any:
        """A ``scan`` whose body returns the same value as two stacked outputs keeps one."""
        nk = eqn.params["num_carry"]
        j = eqn.params["jaxpr"].jaxpr
        first: dict[Any, int] = {}
        keep = [True] * len(j.outvars)
        for i in range(nk, len(j.outvars)):
            v = j.outvars[i]
            if not isinstance(v, Var):
                continue
            if id(v) in first:
                keep[i] = False
                rw.forward(eqn.outvars[i], eqn.outvars[first[id(v)]])
            else:
                first[id(v)] = i
        if all(keep):
            return eqn
        ctx.record(eqn, "`scan` stacked the same value twice: kept one output")
        new_j = Jaxpr(j.constvars, j.invars, j.eqns, [v for v, k in zip(j.outvars, keep) if k])
        body = ClosedJaxpr(new_j, eqn.params["jaxpr"].consts)
        return eqn.replace(outvars=[o for o, k in zip(eqn.outvars, keep) if k],
                           params=dict(eqn.params, jaxpr=body))

