"""Constant folding: an equation whose operands are all known values is computed once, at
compile time, when its results are small (at most ``MAX_ELEMENTS`` elements each).

A scalar result becomes a literal; a larger one becomes a captured constant of the program
(only the top-level program may gain constants, so in a nested body a non-uniform array is
kept as the equation that computes it, and only folded further when a scalar comes out).
The primitives' NumPy rules compute the values, the same rules eager mode runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from ftrans.core.keys import is_key_dtype
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import is_poly_shape
from ftrans.transforms.passes._util import IMPURE, Rewriter, has_bodies
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["ConstantFolding", "MAX_ELEMENTS"]

MAX_ELEMENTS = 10_000

# Results XLA makes on the device more cheaply than it would transfer them: kept as
# equations (their values still fold into what reads them).
_GENERATORS = {S.broadcast_in_dim_p, S.iota_p}

# Layout operations: their NumPy rule is the identity, so folding one would drop the layout it asks for (a
# constant constrained to a mesh must come out of the program laid out so).
_LAYOUT = frozenset({"sharding_constraint", "device_put"})

# ``checkpoint_name``'s marker: kept (its operand may fold) so the value stays the named one a remat policy and
# ``saved_residuals`` see, as JAX's program has it (values that read it still fold).
_MARKERS = frozenset({"name"})

# Primitives that join their operands' layouts: an operand folded into a captured constant would be a replicated
# program argument and pull the whole group to replicated, so what computes one stays an equation (as JAX's).
_GROUPING = frozenset({"shard_alike"})


class ConstantFolding(Pass):
    name = "fold_constants"

    def run(self, closed: ClosedJaxpr, ctx: PassContext) -> ClosedJaxpr:
        added: list[tuple[Var, Any]] = []

        top_known: dict[int, np.ndarray] = {}
        for v, c in zip(closed.jaxpr.constvars, closed.consts):
            if not is_poly_shape(v.aval.shape) and np.prod(v.aval.shape, dtype=np.int64) <= MAX_ELEMENTS:
                try:
                    top_known[id(v)] = np.asarray(c, v.aval.dtype)
                except Exception:  # noqa: BLE001 - a constant that is not concrete here is not folded
                    pass

        def rewrite(j: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
            return self._fold(j, ctx, added if top else None, top_known if top else {})

        out = ctx.map_jaxprs(ClosedJaxpr(closed.jaxpr, closed.consts), rewrite)
        if not added:
            return out if out.jaxpr is not closed.jaxpr else closed
        j = out.jaxpr
        # map_jaxprs keeps only the constvars it knew; the folded constants are ours to supply.
        consts = list(out.consts) + [v for _, v in added]
        return ClosedJaxpr(Jaxpr(list(j.constvars) + [c for c, _ in added], j.invars, j.eqns, j.outvars), consts)

    def _fold(self, jaxpr: Jaxpr, ctx: PassContext, added: list | None, known: dict) -> Jaxpr:
        rw = Rewriter(jaxpr)
        known = dict(known)
        grouped = {id(a) for e in jaxpr.eqns if e.primitive.name in _GROUPING for a in e.invars}
        generated: set[int] = set()  # the values kept as the equations that generate them (see ``cheap``)

        def value(a: Any) -> Any:
            if isinstance(a, Literal):
                return np.asarray(a.val, a.aval.dtype)
            return known.get(id(a))

        for eqn in jaxpr.eqns:
            invars = [rw.read(a) for a in eqn.invars]
            vals = [value(a) for a in invars]
            prim = eqn.primitive
            if (any(v is None for v in vals) or prim.impl is None or prim.name in IMPURE or prim.name in _LAYOUT
                    or prim.name in _MARKERS
                    or has_bodies(eqn) or (grouped and any(id(v) in grouped for v in eqn.outvars))
                    or any(is_key_dtype(v.aval.dtype) for v in eqn.outvars)  # keys stay typed (not folded)
                    or any(is_poly_shape(v.aval.shape) or np.prod(v.aval.shape, dtype=np.int64) > MAX_ELEMENTS
                           for v in eqn.outvars)):
                rw.emit(eqn)
                continue
            # A generator of literals, or what is computed from generated values only (a reshape or a sum of
            # iotas: the counters of a random-bits program): XLA makes it on the device, laid out as the program
            # needs it; a captured constant would be a whole (replicated) argument of the program.
            cheap = ((prim in _GENERATORS and all(isinstance(a, Literal) for a in invars))
                     or (bool(generated) and any(id(a) in generated for a in invars)
                         and all(isinstance(a, Literal) or id(a) in generated for a in invars)))
            try:
                outs = prim.impl(*vals, **eqn.params)
            except Exception:  # noqa: BLE001 - a rule that cannot run here is simply not folded
                rw.emit(eqn)
                continue
            outs = list(outs) if prim.multiple_results else [outs]
            outs = [np.asarray(o, v.aval.dtype) for o, v in zip(outs, eqn.outvars)]
            if any(o.shape != v.aval.shape for o, v in zip(outs, eqn.outvars)):
                rw.emit(eqn)
                continue
            emitted = False
            for v, o in zip(eqn.outvars, outs):
                known[id(v)] = o
                if o.ndim == 0:
                    rw.forward(v, Literal(o[()], v.aval))
                elif added is not None and not cheap:
                    c = Var(v.aval)
                    added.append((c, o))
                    known[id(c)] = o
                    rw.forward(v, c)
                else:
                    emitted = True
            if emitted:
                rw.emit(eqn)
                if cheap:
                    generated.update(id(v) for v in eqn.outvars)
                    continue  # an iota or a broadcast of a literal is already the cheapest form
            ctx.record(eqn, f"folded `{prim.name}` of constants into "
                            f"{'a literal' if not emitted and outs[0].ndim == 0 else 'a constant'}")
        return rw.finish()


del JaxprEqn, ShapedArray
