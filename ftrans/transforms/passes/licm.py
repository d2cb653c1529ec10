"""Loop-invariant code motion, and hoisting per-step work out of ``scan`` as one batched
computation (as RETURNN does for RNN cells).

- ``while`` and ``scan`` bodies: an equation that reads only the loop's constants (and
  literals, and other such equations) computes the same value every iteration; it moves
  before the loop and its result enters the body as a new constant.
- ``scan`` bodies: an equation that reads the current slices of ``xs`` (and loop-invariant
  values) but nothing of the carry can be computed for every step at once before the loop.
  When that work holds a ``dot_general`` (``x_t @ W_x`` in an RNN cell), all of it moves out,
  batched over the whole sequence (``xs @ W_x``), and its per-step results enter the body as
  new ``xs``.  The batched form comes from ``vmap`` of the hoisted equations, so it is exactly
  what ``vmap`` would stage.

- ``scan`` carries that only accumulate a ``dot_general`` (``c <- c + a_t . b_t``: the weight
  gradient in an RNN's backward scan) leave the loop: the operands come out as stacked ``ys``
  and one product contracting the sequence axis too follows the loop.

Nested loops are handled innermost first (the pass runs on bodies before the jaxprs holding
them), so an invariant of an inner loop may move on out of the outer one.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from ftrans.core.prims import control_flow as CF
from ftrans.core.prims import reductions as R
from ftrans.transforms.passes._util import IMPURE, has_bodies
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["LoopInvariantCodeMotion"]

# Results cheaper to recompute than to carry in as an operand (XLA folds them into users).
_CHEAP = {"broadcast_in_dim", "iota"}


def _stacked(aval: ShapedArray, n: int) -> ShapedArray:
    """The aval of ``n`` values of ``aval`` stacked along a new leading axis (a sharding type kept, the new
    axis unsplit: the product taking them types its result from its operands, as in the loop)."""
    out = ShapedArray((n,) + tuple(aval.shape), aval.dtype, aval.weak_type)
    sh = aval.typed_sharding
    if sh is None:
        return out
    from ftrans.core.sharding_rules import spec_of, typed, with_ur

    return typed(out, sh.mesh, with_ur((None,) + spec_of(aval), sh.spec.unreduced, sh.spec.reduced))


def _sets(aval: Any) -> tuple:
    sh = getattr(aval, "typed_sharding", None)
    return (sh.spec.unreduced, sh.spec.reduced) if sh is not None else (frozenset(), frozenset())


def _movable(eqn: JaxprEqn) -> bool:
    return eqn.primitive.name not in IMPURE and not has_bodies(eqn)


def _split(eqns: list[JaxprEqn], invariant_in: set[int], mapped_in: set[int]) -> tuple[list, list, list]:
    """Classify body equations: (loop-invariant, per-step but carry-free, the rest), in order."""
    inv_vars = set(invariant_in)
    map_vars = set(mapped_in)
    inv, mapped, rest = [], [], []
    for e in eqns:
        ids = [id(a) for a in e.invars if isinstance(a, Var)]
        if _movable(e) and all(i in inv_vars for i in ids) and e.primitive.name not in _CHEAP:
            inv.append(e)
            inv_vars.update(id(o) for o in e.outvars)
        elif _movable(e) and mapped_in and all(i in inv_vars or i in map_vars for i in ids) \
                and any(i in map_vars for i in ids):
            mapped.append(e)
            map_vars.update(id(o) for o in e.outvars)
        else:
            rest.append(e)
    return inv, mapped, rest


def _feeding_dots(mapped: list[JaxprEqn]) -> list[JaxprEqn]:
    """The ``dot_general``s of ``mapped`` and the equations of ``mapped`` they read from, in order."""
    producer = {id(o): e for e in mapped for o in e.outvars}
    keep: set[int] = set()
    todo = [e for e in mapped if e.primitive is R.dot_general_p]
    while todo:
        e = todo.pop()
        if id(e) in keep:
            continue
        keep.add(id(e))
        todo.extend(producer[id(a)] for a in e.invars if isinstance(a, Var) and id(a) in producer)
    return [e for e in mapped if id(e) in keep]


def _needed(outs_of: list[JaxprEqn], readers: list[JaxprEqn], body_outs: list) -> list[Var]:
    """Results of ``outs_of`` that ``readers`` or the body's outputs read, in order."""
    made = {id(o): o for e in outs_of for o in e.outvars}
    read = [a for e in readers for a in e.invars if isinstance(a, Var)] + [v for v in body_outs if isinstance(v, Var)]
    seen: dict[int, Var] = {}
    for a in read:
        if id(a) in made and id(a) not in seen:
            seen[id(a)] = made[id(a)]
    return list(seen.values())


def _copy_out(eqns: list[JaxprEqn], env: dict[int, Any]) -> list[JaxprEqn]:
    """Body equations rewritten to read outer values (``env``: body var -> outer atom), with
    fresh outer result vars recorded in ``env``."""
    out = []
    for e in eqns:
        outs = [Var(o.aval) for o in e.outvars]
        out.append(e.replace(invars=[env.get(id(a), a) if isinstance(a, Var) else a for a in e.invars],
                             outvars=outs))
        for o, n in zip(e.outvars, outs):
            env[id(o)] = n
    return out


class LoopInvariantCodeMotion(Pass):
    name = "licm"

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        new_eqns: list[JaxprEqn] = []
        changed = False
        for eqn in jaxpr.eqns:
            if eqn.primitive is CF.scan_p:
                got = self._scan(eqn, ctx)
                got = self._sink_all(got if got is not None else [eqn], ctx)
                if got is not None and len(got) == 1 and got[0] is eqn:
                    got = None
            elif eqn.primitive is CF.while_p:
                got = self._while(eqn, ctx)
            else:
                got = None
            if got is None:
                new_eqns.append(eqn)
            else:
                new_eqns.extend(got)
                changed = True
        return Jaxpr(jaxpr.constvars, jaxpr.invars, new_eqns, jaxpr.outvars) if changed else jaxpr

    # -- scan
    def _scan(self, eqn: JaxprEqn, ctx: PassContext) -> list[JaxprEqn] | None:
        p = eqn.params
        nc, nk = p["num_consts"], p["num_carry"]
        body: ClosedJaxpr = p["jaxpr"]
        j = body.jaxpr
        consts_in, carry_in, xs_in = j.invars[:nc], j.invars[nc:nc + nk], j.invars[nc + nk:]
        inv, mapped, rest = _split(j.eqns, {id(v) for v in consts_in}, {id(v) for v in xs_in})
        has_dot = any(e.primitive is R.dot_general_p for e in mapped)
        if not has_dot:
            rest = [e for e in j.eqns if e not in inv]
            mapped = []
        else:
            # Hoist the products and what feeds them; what only reads a product (the slices of
            # a merged gate product, a bias add) stays in the body, where it fuses into the
            # step's elementwise work instead of becoming one more stacked array to copy.
            mapped = _feeding_dots(mapped)
            keep = {id(e) for e in inv} | {id(e) for e in mapped}
            rest = [e for e in j.eqns if id(e) not in keep]
        if not inv and not mapped:
            return None
        outer_ops = list(eqn.invars)
        env: dict[int, Any] = {id(v): outer_ops[i] for i, v in enumerate(consts_in)}
        before = _copy_out(inv, env)
        # invariant results the rest of the body (or the mapped work, or the outputs) reads
        inv_needed = _needed(inv, rest + mapped, j.outvars)
        new_consts = [Var(v.aval) for v in inv_needed]
        sub = {id(v): n for v, n in zip(inv_needed, new_consts)}
        new_xs_body: list[Var] = []
        new_xs_outer: list[Any] = []
        if mapped:
            map_needed = _needed(mapped, rest, j.outvars)
            if map_needed:
                batched = self._batch(mapped, map_needed, consts_in, inv_needed, xs_in, p["length"],
                                      eqn.source_info)
                if batched is None:
                    rest = [e for e in j.eqns if e not in inv]
                    mapped = []
                else:
                    sub_jaxpr, args_body = batched
                    args_outer = [env.get(id(a), a) for a in args_body]
                    xs_ops = dict(zip([id(v) for v in xs_in], outer_ops[nc + nk:]))
                    args_outer = [xs_ops.get(id(a), a) if isinstance(a, Var) else a for a in args_outer]
                    ienv = {id(v): a for v, a in zip(sub_jaxpr.invars, args_outer)}
                    before += _copy_out(sub_jaxpr.eqns, ienv)
                    new_xs_outer = [ienv.get(id(v), v) if isinstance(v, Var) else v for v in sub_jaxpr.outvars]
                    new_xs_body = [Var(v.aval) for v in map_needed]
                    sub.update({id(v): n for v, n in zip(map_needed, new_xs_body)})
            if not map_needed:
                mapped = []
        if not before and not new_xs_body:
            return None

        def r(a: Any) -> Any:
            return sub.get(id(a), a) if isinstance(a, Var) else a

        body_eqns = [e.replace(invars=[r(a) for a in e.invars]) for e in rest]
        new_j = Jaxpr(j.constvars, list(consts_in) + new_consts + list(carry_in) + list(xs_in) + new_xs_body,
                      body_eqns, [r(v) for v in j.outvars])
        new_scan = eqn.replace(
            invars=outer_ops[:nc] + [env[id(v)] for v in inv_needed] + outer_ops[nc:] + new_xs_outer,
            params=dict(p, jaxpr=ClosedJaxpr(new_j, body.consts), num_consts=nc + len(new_consts)))
        for e in inv:
            ctx.record(e, f"moved loop-invariant `{e.primitive.name}` out of `scan`")
        for e in mapped:
            ctx.record(e, f"hoisted per-step `{e.primitive.name}` out of `scan`, batched over the sequence")
        return before + [new_scan]

    def _batch(self, mapped, outs, consts_in, inv_needed, xs_in, length, source_info):
        """The mapped equations as one jaxpr batched over the sequence: (jaxpr, its body-side
        arguments: loop-invariant atoms unbatched, then xs slices batched)."""
        from ftrans.core.jaxpr_api import eval_jaxpr
        from ftrans.core.trace import source_info_as, stage
        from ftrans.transforms.batching import vmap

        reads: dict[int, Var] = {}
        made = {id(o) for e in mapped for o in e.outvars}
        for e in mapped:
            for a in e.invars:
                if isinstance(a, Var) and id(a) not in made:
                    reads.setdefault(id(a), a)
        xs_ids = {id(v) for v in xs_in}
        unb = [a for a in reads.values() if id(a) not in xs_ids]
        bat = [a for a in reads.values() if id(a) in xs_ids]
        inner = Jaxpr([], unb + bat, list(mapped), list(outs))
        n_unb = len(unb)

        def fn(*args):
            return vmap(lambda *b: eval_jaxpr(inner, [], *args[:n_unb], *b), in_axes=0)(*args[n_unb:])

        avals = [a.aval for a in unb] + [_stacked(a.aval, length) for a in bat]
        try:
            with source_info_as(source_info):
                closed, _ = stage(lambda *a: list(fn(*a)), avals)
        except Exception:  # noqa: BLE001 - a body vmap cannot batch stays in the loop
            return None
        if closed.consts or any(_sets(o.aval) != _sets(b) for o, b in zip(outs, closed.out_avals)):
            return None  # (a batched result that lost its unreduced/reduced axes: the work stays in the loop)
        del consts_in, inv_needed
        return closed.jaxpr, unb + bat

    # -- accumulators: c <- c + a_t . b_t becomes one product over the sequence after the loop
    def _sink_all(self, eqns: list[JaxprEqn], ctx: PassContext) -> list[JaxprEqn]:
        scan = eqns[-1]
        before, after = eqns[:-1], []
        for _ in range(8):
            got = self._sink(scan, ctx)
            if got is None:
                break
            scan, extra = got
            after = extra + after
        return before + [scan] + after

    def _sink(self, eqn: JaxprEqn, ctx: PassContext) -> tuple[JaxprEqn, list[JaxprEqn]] | None:
        p = eqn.params
        nc, nk, T = p["num_consts"], p["num_carry"], p["length"]
        body: ClosedJaxpr = p["jaxpr"]
        j = body.jaxpr
        xs_in = j.invars[nc + nk:]
        xs_outer = dict(zip([id(v) for v in xs_in], eqn.invars[nc + nk:]))
        uses: dict[int, int] = {}
        for e in j.eqns:
            for a in e.invars:
                if isinstance(a, Var):
                    uses[id(a)] = uses.get(id(a), 0) + 1
        for v in j.outvars:
            if isinstance(v, Var):
                uses[id(v)] = uses.get(id(v), 0) + 1
        producer = {id(o): e for e in j.eqns for o in e.outvars}
        for k in range(nk):
            cin, cout = j.invars[nc + k], j.outvars[k]
            add = producer.get(id(cout)) if isinstance(cout, Var) else None
            if add is None or add.primitive.name != "add" or uses.get(id(cin)) != 1 or uses.get(id(cout)) != 1:
                continue
            a, b = add.invars
            v = b if a is cin else a if b is cin else None
            if not isinstance(v, Var) or v.aval.shape != cin.aval.shape or uses.get(id(v)) != 1:
                continue
            dot = producer.get(id(v))
            if dot is None or dot.primitive is not R.dot_general_p:
                continue
            (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
            if lb or rb:
                continue
            ops = dot.invars
            consts = {id(x) for x in j.invars[:nc]}
            if any(not isinstance(x, Var) or id(x) in consts or id(x) == id(cin) for x in ops):
                continue
            # operands: an xs slice is read from outside; a computed value becomes a new ys output
            new_outs: list[Var] = []
            outer_ops: list[Any] = []
            new_scan_outs: list[Var] = []
            ys_now = {id(v): eqn.outvars[i] for i, v in enumerate(j.outvars) if i >= nk and isinstance(v, Var)}
            for x in ops:
                if id(x) in xs_outer:
                    outer_ops.append(xs_outer[id(x)])
                elif id(x) in ys_now:  # already stacked by the loop
                    outer_ops.append(ys_now[id(x)])
                elif any(x is n for n in new_outs):
                    outer_ops.append(new_scan_outs[[id(n) for n in new_outs].index(id(x))])
                else:
                    new_outs.append(x)
                    ov = Var(_stacked(x.aval, T))
                    new_scan_outs.append(ov)
                    outer_ops.append(ov)
            body_eqns = [e for e in j.eqns if e is not add and e is not dot]
            new_j = Jaxpr(j.constvars, j.invars[:nc + k] + j.invars[nc + k + 1:], body_eqns,
                          j.outvars[:k] + j.outvars[k + 1:] + new_outs)
            outvars = list(eqn.outvars)
            carry_out = outvars.pop(k)
            new_scan = eqn.replace(
                invars=eqn.invars[:nc + k] + eqn.invars[nc + k + 1:],
                outvars=outvars + new_scan_outs,
                params=dict(p, jaxpr=ClosedJaxpr(new_j, body.consts), num_carry=nk - 1))
            total = Var(v.aval)
            dn = (((0,) + tuple(i + 1 for i in lc), (0,) + tuple(i + 1 for i in rc)), ((), ()))
            extra = [dot.replace(invars=outer_ops, outvars=[total], params=dict(dot.params, dimension_numbers=dn)),
                     add.replace(invars=[eqn.invars[nc + k], total], outvars=[carry_out])]
            ctx.record(dot, "accumulated `dot_general` of a `scan` moved after the loop as one product "
                            "over the whole sequence")
            return new_scan, extra
        return None

    # -- while
    def _while(self, eqn: JaxprEqn, ctx: PassContext) -> list[JaxprEqn] | None:
        p = eqn.params
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        body: ClosedJaxpr = p["body_jaxpr"]
        j = body.jaxpr
        consts_in = j.invars[:bn]
        inv, _, rest = _split(j.eqns, {id(v) for v in consts_in}, set())
        if not inv:
            return None
        outer_ops = list(eqn.invars)
        env: dict[int, Any] = {id(v): outer_ops[cn + i] for i, v in enumerate(consts_in)}
        before = _copy_out(inv, env)
        inv_needed = _needed(inv, rest, j.outvars)
        new_consts = [Var(v.aval) for v in inv_needed]
        sub = {id(v): n for v, n in zip(inv_needed, new_consts)}

        def r(a: Any) -> Any:
            return sub.get(id(a), a) if isinstance(a, Var) else a

        new_j = Jaxpr(j.constvars, list(consts_in) + new_consts + list(j.invars[bn:]),
                      [e.replace(invars=[r(a) for a in e.invars]) for e in rest], [r(v) for v in j.outvars])
        new_eqn = eqn.replace(
            invars=outer_ops[:cn + bn] + [env[id(v)] for v in inv_needed] + outer_ops[cn + bn:],
            params=dict(p, body_jaxpr=ClosedJaxpr(new_j, body.consts), body_nconsts=bn + len(new_consts)))
        for e in inv:
            ctx.record(e, f"moved loop-invariant `{e.primitive.name}` out of `while`")
        return before + [new_eqn]


del Literal
