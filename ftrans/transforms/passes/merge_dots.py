"""Merged matmuls: ``dot_general``s that share their left operand (``x @ W_i``, ``x @ W_f``,
``x @ W_o``, ``x @ W_g`` in an LSTM cell) become one product on the concatenated weights,
``x @ concat(W_i, W_f, W_o, W_g)``, sliced after.

Only plain matrix products are merged: no batch dimensions, a 2-D right operand contracted on
its first axis, the same params and dtypes.  A product whose weights depend on another
product of the group is left alone.  The equations are then put back in an order where
every value is defined before it is read (a stable topological order).  When the weights
are loop-invariant in a ``scan`` or ``while`` body, ``licm`` (which runs next) moves the
concatenation out of the loop.

A cost rule decides whether a group is merged: the concatenation copies every weight
(``K x N_total`` elements, read and written) each time it runs, while merging saves one
product's dispatch per member after the first.  So a group is merged when

- its weights are loop-invariant in the ``scan``/``while`` body holding it (constants of the
  loop, or computed from them only): ``licm`` hoists the concatenation, paid once per loop
  rather than once per step; or
- the concatenated weights are small (at most ``_FREE_BYTES`` per product saved): copying them
  costs less than the dispatch of the products merged away.

Otherwise (an LSTM step whose 256x256 weights are arguments of the program) the products stay
apart: on CPU, concatenating four 256x256 matrices on every call made the step 1.7-2x slower
than the four products (see ``docs/optimizer.md``).

Not run on a program partitioned over a mesh (sharded ``jit``): weights split by columns over a
mesh axis (Megatron-style ``wq``/``wk``/``wv``) would be concatenated and sliced across their
shards, which costs all-to-alls and collective permutes on every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var, all_jaxprs
from ftrans.core.prims import control_flow as CF
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import is_poly_shape
from ftrans.transforms.passes._util import IMPURE, has_bodies
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["MergeDots"]


def _plain(e: JaxprEqn) -> bool:
    if e.primitive is not R.dot_general_p:
        return False
    (lc, rc), (lb, rb) = e.params["dimension_numbers"]
    lhs, rhs = e.invars
    # (a product with a sharding type keeps its own: concatenating weights would change the layouts asked for)
    return (not lb and not rb and tuple(rc) == (0,) and len(lc) == 1 and isinstance(rhs, Var)
            and isinstance(lhs, Var) and len(rhs.aval.shape) == 2
            and all(getattr(v.aval, "typed_sharding", None) is None for v in (lhs, rhs, e.outvars[0])))


def _topo(eqns: list[JaxprEqn], defined: set[int]) -> list[JaxprEqn] | None:
    """A stable topological order of ``eqns`` (None when there is a cycle)."""
    producer = {id(o): i for i, e in enumerate(eqns) for o in e.outvars}
    deps = [{producer[id(a)] for a in e.invars if isinstance(a, Var) and id(a) in producer} for e in eqns]
    users: list[list[int]] = [[] for _ in eqns]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    import heapq

    left = [len(d) for d in deps]
    ready = [i for i, n in enumerate(left) if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(eqns[i])
        for u in users[i]:
            left[u] -= 1
            if left[u] == 0:
                heapq.heappush(ready, u)
    return out if len(out) == len(eqns) else None


# Copying this many bytes costs about as much as one product's dispatch on a CPU (a few
# microseconds): below it per product saved, concatenating the weights on every run pays.
_FREE_BYTES = 16 * 1024


def _loop_invariant(j: Jaxpr, nconsts: int) -> set[int]:
    """Ids of ``j``'s values that are the same in every iteration of the loop whose body it is
    (its first ``nconsts`` inputs, and what pure equations compute from them alone)."""
    inv = {id(v) for v in j.invars[:nconsts]} | {id(v) for v in j.constvars}
    for e in j.eqns:
        if not has_bodies(e) and e.primitive.name not in IMPURE and \
                all(not isinstance(a, Var) or id(a) in inv for a in e.invars):
            inv.update(id(o) for o in e.outvars)
    return inv


class MergeDots(Pass):
    name = "merge_dots"
    partition_safe = False

    def run(self, closed: ClosedJaxpr, ctx: PassContext) -> ClosedJaxpr:
        # Which loop bodies there are, and how many of their inputs are loop constants.
        self._loop_consts: dict[int, int] = {}
        for j in all_jaxprs(closed):
            for e in j.eqns:
                if e.primitive is CF.scan_p:
                    self._loop_consts[id(e.params["jaxpr"].jaxpr)] = e.params["num_consts"]
                elif e.primitive is CF.while_p:
                    self._loop_consts[id(e.params["body_jaxpr"].jaxpr)] = e.params["body_nconsts"]
        try:
            return ctx.map_jaxprs(closed, self.rewrite, order=self.order)
        finally:
            self._loop_consts = {}

    def _pays(self, jaxpr: Jaxpr, ws: list[Var], invariant: set[int] | None) -> bool:
        """The cost rule (module docstring): merge when the concatenation leaves the loop, or is
        cheap next to the dispatches it saves."""
        if invariant is not None and all(id(w) in invariant for w in ws):
            return True
        if any(is_poly_shape(w.aval.shape) for w in ws):
            return False
        nbytes = sum(int(np.prod(w.aval.shape)) * np.dtype(w.aval.dtype).itemsize for w in ws)
        return nbytes <= _FREE_BYTES * (len(ws) - 1)

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        nconsts = getattr(self, "_loop_consts", {}).get(id(jaxpr))
        invariant = _loop_invariant(jaxpr, nconsts) if nconsts is not None else None
        groups: dict[Any, list[int]] = {}
        for i, e in enumerate(jaxpr.eqns):
            if _plain(e):
                (lc, _), _ = e.params["dimension_numbers"]
                key = (id(e.invars[0]), tuple(lc), e.params.get("precision"), e.params.get("preferred_element_type"),
                       e.invars[1].aval.dtype, e.outvars[0].aval.dtype)
                groups.setdefault(key, []).append(i)
        groups = {k: v for k, v in groups.items() if len(v) > 1}
        if not groups:
            return jaxpr
        eqns = list(jaxpr.eqns)
        # forward closure of each dot's result, to refuse a group whose weights read a member
        readers: dict[int, list[int]] = {}
        for i, e in enumerate(eqns):
            for a in e.invars:
                if isinstance(a, Var):
                    readers.setdefault(id(a), []).append(i)
        replaced: dict[int, list[JaxprEqn]] = {}
        for idxs in groups.values():
            downstream: set[int] = set()
            stack = [id(o) for i in idxs for o in eqns[i].outvars]
            seen_v: set[int] = set()
            while stack:
                v = stack.pop()
                if v in seen_v:
                    continue
                seen_v.add(v)
                for r in readers.get(v, ()):
                    downstream.add(r)
                    stack.extend(id(o) for o in eqns[r].outvars)
            producer = {id(o): i for i, e in enumerate(eqns) for o in e.outvars}
            idxs = [i for i in idxs if producer.get(id(eqns[i].invars[1])) not in downstream]
            if len(idxs) < 2:
                continue
            first = eqns[idxs[0]]
            x = first.invars[0]
            ws = [eqns[i].invars[1] for i in idxs]
            k = ws[0].aval.shape[0]
            if any(w.aval.shape[0] != k for w in ws):
                continue
            if not self._pays(jaxpr, ws, invariant):
                continue
            n_total = sum(w.aval.shape[1] for w in ws)
            wcat = Var(ws[0].aval.update(shape=(k, n_total)) if hasattr(ws[0].aval, "update")
                       else type(ws[0].aval)((k, n_total), ws[0].aval.dtype, False))
            out0 = first.outvars[0].aval
            big = Var(type(out0)(out0.shape[:-1] + (n_total,), out0.dtype, out0.weak_type))
            si = first.source_info
            new = [JaxprEqn(S.concatenate_p, list(ws), [wcat], {"dimension": 1}, si),
                   first.replace(invars=[x, wcat], outvars=[big])]
            off = 0
            nd = len(out0.shape)
            for i, w in zip(idxs, ws):
                n = w.aval.shape[1]
                o = eqns[i].outvars[0]
                new.append(JaxprEqn(S.slice_p, [big], [o],
                                    {"start_indices": (0,) * (nd - 1) + (off,),
                                     "limit_indices": tuple(o.aval.shape[:-1]) + (off + n,), "strides": None},
                                    eqns[i].source_info))
                off += n
                ctx.record(eqns[i], f"merged into one `dot_general` with {len(idxs) - 1} other product"
                                    f"{'s' if len(idxs) > 2 else ''} of the same operand")
            replaced[idxs[0]] = new
            for i in idxs[1:]:
                replaced[i] = []
        if not replaced:
            return jaxpr
        flat: list[JaxprEqn] = []
        for i, e in enumerate(eqns):
            flat.extend(replaced.get(i, [e]))
        ordered = _topo(flat, set())
        if ordered is None:
            return jaxpr
        return Jaxpr(jaxpr.constvars, jaxpr.invars, ordered, jaxpr.outvars)
