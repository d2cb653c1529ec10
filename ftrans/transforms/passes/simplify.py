"""Algebraic simplification: identities that leave a value unchanged, chains of
structural ops that collapse, and the zero-cotangent debris reverse mode leaves.

- ``x * 1``, ``1 * x`` (also by a broadcast one), ``x + 0``, ``0 + x``, ``x - 0`` -> ``x``; ``neg (neg x)`` -> ``x``;
- ``transpose`` of ``transpose`` -> one ``transpose`` (none when the permutations cancel);
  ``reshape`` of ``reshape`` -> one ``reshape``; a ``reshape`` to the same shape -> its operand;
- ``convert_element_type`` to the operand's own type -> the operand; a conversion through a
  type that holds every value of the source (``f32 -> f64 -> f16``) -> one conversion;
- ``select_n`` whose cases are all the same value -> that value;
- ``reduce_sum`` over exactly the axes a ``broadcast_in_dim`` added -> ``x * n``;
  ``reduce_max``/``reduce_min`` of the same -> ``x``;
- zeros (a zero literal, a broadcast of one, and anything below computed from zeros only):
  ``x * 0`` -> zeros where ``x`` is known finite, ``x + 0``/``0 + x`` -> ``x``, ``0 - x`` -> ``neg x``,
  ``select_n`` of zeros, a reduction, ``dot_general`` (with a known-finite other operand),
  transpose/reshape/broadcast/convert of zeros -> zeros.

``x * 0`` is ``nan`` in IEEE arithmetic when ``x`` is ``inf`` or ``nan``, so it folds only where ``x``
cannot be either: an integer, a finite literal, or (through broadcasts, reshapes, transposes, negation,
widening conversions and selects) one of those, as the ones seeding a cotangent. A jitted function thus
computes what the same function computes eagerly, and what JAX's ``jit`` computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import Jaxpr, JaxprEqn, Literal, Var
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import is_poly_shape
from ftrans.transforms.passes._util import Rewriter, is_literal_value
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["AlgebraicSimplification", "zeros_like_var"]

_ZERO_PRESERVING = {
    S.transpose_p, S.reshape_p, S.broadcast_in_dim_p, S.convert_element_type_p, E.neg_p,
    R.reduce_sum_p, R.reduce_max_p, R.reduce_min_p,
}


def _same_type(a: Any, b: Any) -> bool:
    return a.aval.shape == b.aval.shape and a.aval.dtype == b.aval.dtype


def zeros_like_var(rw: Rewriter, v: Var, source_info: Any) -> None:
    """Make ``v`` read zeros: a literal for a scalar, else one ``broadcast_in_dim`` of ``0``."""
    aval = v.aval
    lit = Literal(np.zeros((), aval.dtype)[()], ShapedArray((), aval.dtype, aval.weak_type))
    if aval.shape == ():
        rw.forward(v, lit)
        return
    rw.eqns.append(JaxprEqn(S.broadcast_in_dim_p, [lit], [v],
                            {"shape": tuple(aval.shape), "broadcast_dimensions": ()}, source_info))
    rw.changed = True


class AlgebraicSimplification(Pass):
    name = "simplify"

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        rw = Rewriter(jaxpr)
        producer: dict[int, JaxprEqn] = {}
        zero: set[int] = set()

        def is_zero(a: Any) -> bool:
            return is_literal_value(a, 0) if isinstance(a, Literal) else id(a) in zero

        ones: set[int] = set()

        def is_one(a: Any) -> bool:
            return is_literal_value(a, 1) if isinstance(a, Literal) else id(a) in ones

        finite: set[int] = set()  # values that can hold no inf or nan (x * 0 of them is 0)

        def is_finite(a: Any) -> bool:
            if not dtypes.np_issubdtype(a.aval.dtype, np.inexact):
                return True
            if isinstance(a, Literal):
                try:
                    return bool(np.all(np.isfinite(np.asarray(a.val))))
                except TypeError:
                    return False
            return id(a) in finite or id(a) in zero or id(a) in ones

        def fwd(eqn: JaxprEqn, to: Any, what: str) -> None:
            rw.forward(eqn.outvars[0], to)
            ctx.record(eqn, what)

        def emit(eqn: JaxprEqn) -> None:
            rw.emit(eqn)
            e = rw.eqns[-1]
            for o in e.outvars:
                producer[id(o)] = e

        for eqn in jaxpr.eqns:
            p = eqn.primitive
            ins = [rw.read(a) for a in eqn.invars]
            out = eqn.outvars[0] if eqn.outvars else None
            name = p.name
            if p is S.broadcast_in_dim_p and is_zero(ins[0]):
                emit(eqn)
                zero.add(id(out))
                continue
            if p is S.broadcast_in_dim_p and is_one(ins[0]):
                emit(eqn)
                ones.add(id(out))
                continue
            if p in _ZERO_PRESERVING and is_zero(ins[0]) and (p is not S.convert_element_type_p
                                                               or dtypes.np_issubdtype(out.aval.dtype, np.number)):
                zeros_like_var(rw, out, eqn.source_info)
                zero.add(id(out))
                ctx.record(eqn, f"`{name}` of zeros is zeros")
                continue
            if p is E.mul_p or p is R.dot_general_p:
                if (any(is_zero(a) for a in ins) and all(is_finite(a) for a in ins)
                        and dtypes.np_issubdtype(out.aval.dtype, np.number)):
                    zeros_like_var(rw, out, eqn.source_info)
                    zero.add(id(out))
                    ctx.record(eqn, f"`{name}` by zero is zeros")
                    continue
            if p is E.mul_p:
                x, y = ins
                if is_one(y) and _same_type(x, out):
                    fwd(eqn, x, "removed `mul` by one")
                    continue
                if is_one(x) and _same_type(y, out):
                    fwd(eqn, y, "removed `mul` by one")
                    continue
            if p is E.add_p or p is E.sub_p:
                x, y = ins
                if is_zero(y) and _same_type(x, out):
                    fwd(eqn, x, f"removed `{name}` of zero")
                    continue
                if p is E.add_p and is_zero(x) and _same_type(y, out):
                    fwd(eqn, y, "removed `add` of zero")
                    continue
                if p is E.sub_p and is_zero(x) and _same_type(y, out):
                    emit(JaxprEqn(E.neg_p, [y], [out], {}, eqn.source_info))
                    rw.changed = True
                    ctx.record(eqn, "`0 - x` became `neg x`")
                    continue
                if is_zero(x) and is_zero(y):
                    zeros_like_var(rw, out, eqn.source_info)
                    zero.add(id(out))
                    ctx.record(eqn, f"`{name}` of zeros is zeros")
                    continue
            if p is E.neg_p:
                src = producer.get(id(ins[0]))
                if src is not None and src.primitive is E.neg_p and _same_type(src.invars[0], out):
                    fwd(eqn, src.invars[0], "`neg (neg x)` became `x`")
                    continue
            if p is S.select_n_p:
                cases = ins[1:]
                if all(is_zero(c) for c in cases):
                    zeros_like_var(rw, out, eqn.source_info)
                    zero.add(id(out))
                    ctx.record(eqn, "`select_n` of zeros is zeros")
                    continue
                if all(c is cases[0] for c in cases) and _same_type(cases[0], out):
                    fwd(eqn, cases[0], "`select_n` with equal cases became that case")
                    continue
            if p is S.transpose_p:
                perm = tuple(eqn.params["permutation"])
                src = producer.get(id(ins[0]))
                x = ins[0]
                if src is not None and src.primitive is S.transpose_p:
                    inner = tuple(src.params["permutation"])
                    perm = tuple(inner[i] for i in perm)
                    x = src.invars[0]
                if perm == tuple(range(len(perm))) and _same_type(x, out):
                    fwd(eqn, x, "removed an identity `transpose`")
                    continue
                if x is not ins[0]:
                    emit(eqn.replace(invars=[x], params=dict(eqn.params, permutation=perm)))
                    rw.changed = True
                    ctx.record(eqn, "merged two `transpose`s")
                    continue
            if p is S.reshape_p and eqn.params.get("dimensions") is None:
                src = producer.get(id(ins[0]))
                x = ins[0]
                if src is not None and src.primitive is S.reshape_p and src.params.get("dimensions") is None:
                    x = src.invars[0]
                if _same_type(x, out):
                    fwd(eqn, x, "removed a `reshape` to the same shape")
                    continue
                if x is not ins[0]:
                    emit(eqn.replace(invars=[x]))
                    rw.changed = True
                    ctx.record(eqn, "merged two `reshape`s")
                    continue
            if p is S.convert_element_type_p:
                x = ins[0]
                if x.aval.dtype == out.aval.dtype and x.aval.weak_type == out.aval.weak_type and _same_type(x, out):
                    fwd(eqn, x, "removed a `convert_element_type` to the same type")
                    continue
                src = producer.get(id(x))
                if (src is not None and src.primitive is S.convert_element_type_p
                        and np.can_cast(src.invars[0].aval.dtype, x.aval.dtype, "safe")):
                    y = src.invars[0]
                    if y.aval.dtype == out.aval.dtype and _same_type(y, out):
                        fwd(eqn, y, "removed a lossless round trip of `convert_element_type`")
                        continue
                    emit(eqn.replace(invars=[y]))
                    rw.changed = True
                    ctx.record(eqn, "merged two `convert_element_type`s")
                    continue
            if p in (R.reduce_sum_p, R.reduce_max_p, R.reduce_min_p):
                src = producer.get(id(ins[0]))
                if src is not None and src.primitive is S.broadcast_in_dim_p:
                    x = src.invars[0]
                    bd = tuple(src.params["broadcast_dimensions"])
                    shape = src.outvars[0].aval.shape
                    added = set(range(len(shape))) - set(bd)
                    if (set(eqn.params["axes"]) == added and list(bd) == sorted(bd)
                            and not is_poly_shape(shape)
                            and all(x.aval.shape[i] == shape[d] for i, d in enumerate(bd))
                            and _same_type(x, out)):
                        n = int(np.prod([shape[d] for d in added], dtype=np.int64))
                        if p is not R.reduce_sum_p or n == 1:
                            fwd(eqn, x, f"`{name}` of a broadcast became its operand")
                        else:
                            lit = Literal(np.asarray(n, out.aval.dtype)[()], ShapedArray((), out.aval.dtype, True))
                            emit(JaxprEqn(E.mul_p, [x, lit], [out], {}, eqn.source_info))
                            rw.changed = True
                            ctx.record(eqn, f"`reduce_sum` of a broadcast became a `mul` by {n}")
                        continue
            emit(eqn)
            if out is not None and len(eqn.outvars) == 1 and _keeps_finite(eqn, ins, is_finite):
                finite.add(id(out))
        return rw.finish()


_FINITE_PRESERVING = {S.broadcast_in_dim_p, S.reshape_p, S.transpose_p, E.neg_p, R.reduce_max_p, R.reduce_min_p}


def _keeps_finite(eqn: JaxprEqn, ins: list, is_finite: Any) -> bool:
    """Whether ``eqn``'s result is finite because its operands are (it computes no new values)."""
    p = eqn.primitive
    if p in _FINITE_PRESERVING:
        return is_finite(ins[0])
    if p is S.convert_element_type_p:  # a widening conversion cannot overflow to inf
        a, b = ins[0].aval.dtype, eqn.outvars[0].aval.dtype
        return (is_finite(ins[0]) and isinstance(a, np.dtype) and isinstance(b, np.dtype)
                and np.can_cast(a, b, "safe"))
    if p is S.select_n_p:
        return all(is_finite(c) for c in ins[1:])
    return False
