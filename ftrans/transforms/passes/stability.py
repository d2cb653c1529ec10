"""Numerical-stability rewrites (after PyTensor's): forms that overflow or lose precision in
floating point become their stable equivalents.

- ``log(exp(x) / sum(exp(x)))`` (``log(softmax(x))``, the core of cross-entropy) -> ``x - logsumexp(x)``;
- ``log(sum(exp(x)))`` -> ``logsumexp(x)``, shifted by the maximum;
- ``log(1 + x)`` -> ``log1p(x)``;  ``exp(x) - 1`` -> ``expm1(x)``;
- ``log(sigmoid(x))`` -> ``-softplus(-x)``;  ``log(1 - sigmoid(x))`` -> ``-softplus(x)``.

The results differ from the naive forms wherever those round, overflow or underflow (that is
the point), so the pass is listed in ``docs/differences.md``; switch it off by name
(``stability``).  It runs on the program ``jit`` lowers, and, while ``jit`` stages, on each
function ``grad``/``vjp``/``jvp``/``linearize`` differentiate before they differentiate it
(``ad.rewritten_primal``): under ``grad(jit(f))`` and ``jit(grad(f))`` alike the gradient is
that of the stable form.  A max-shifted ``log(sum(exp(x - max(x))))`` (this pass's own
output, or a user's) is left alone.
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
from ftrans.transforms.passes._util import Rewriter, is_literal_value, stage_expr
from ftrans.transforms.passes.pipeline import Pass, PassContext

__all__ = ["StabilityRewrites"]


def _lit(v: float, dtype: Any) -> Literal:
    return Literal(np.asarray(v, dtype)[()], ShapedArray((), np.dtype(dtype), True))


def _logsumexp(x: Any, axes: tuple[int, ...], keep_shape: bool) -> Any:
    """``log(sum(exp(x), axes))`` shifted by the maximum (a non-finite maximum shifts by 0);
    broadcast back to ``x``'s shape when ``keep_shape``."""
    dt = x.aval.dtype
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    m = R.reduce_max_p.bind(x, axes=axes)
    m = S.select_n_p.bind(E.is_finite_p.bind(m), S.broadcast_in_dim_p.bind(_zero(dt), shape=m.aval.shape,
                                                                            broadcast_dimensions=()), m)
    # The shift cancels in value and in derivative: differentiate as if it were a constant (as
    # JAX's ``nn.logsumexp`` does), so the gradient carries no derivative of ``reduce_max``.
    m = E.stop_gradient_p.bind(m)
    mb = S.broadcast_in_dim_p.bind(m, shape=shape, broadcast_dimensions=kept)
    s = R.reduce_sum_p.bind(E.exp_p.bind(E.sub_p.bind(x, mb)), axes=axes)
    lse = E.add_p.bind(E.log_p.bind(s), m)
    if keep_shape:
        return S.broadcast_in_dim_p.bind(lse, shape=shape, broadcast_dimensions=kept)
    return lse


def _zero(dt: Any) -> Any:
    from ftrans.core.array import Array

    return Array._new(np.zeros((), dt), False)


def _log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))``, with ``-|x|`` as ``min(x, -x)``: a tie
    of ``min`` splits its derivative evenly, so the derivative at 0 is ``1/2`` as it should be
    (``abs``'s derivative at 0 is 1, which would make it 1)."""
    dt = x.aval.dtype
    z = S.broadcast_in_dim_p.bind(_zero(dt), shape=x.aval.shape, broadcast_dimensions=())
    return E.sub_p.bind(E.min_p.bind(x, z), E.log1p_p.bind(E.exp_p.bind(E.min_p.bind(x, E.neg_p.bind(x)))))


class StabilityRewrites(Pass):
    name = "stability"

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        rw = Rewriter(jaxpr)
        producer: dict[int, JaxprEqn] = {}

        def prod(a: Any, prim: Any) -> JaxprEqn | None:
            e = producer.get(id(a)) if isinstance(a, Var) else None
            return e if e is not None and e.primitive is prim else None

        def replace(eqn: JaxprEqn, fn: Any, args: list, what: str) -> None:
            body = stage_expr(fn, [a.aval for a in args], eqn.source_info)
            if [(v.aval.shape, v.aval.dtype) for v in body.outvars] != \
                    [(v.aval.shape, v.aval.dtype) for v in eqn.outvars]:
                emit(eqn)
                return
            start = len(rw.eqns)
            rw.inline(body, args, eqn.outvars)
            for e in rw.eqns[start:]:
                for o in e.outvars:
                    producer[id(o)] = e
            ctx.record(eqn, what)

        def emit(eqn: JaxprEqn) -> None:
            rw.emit(eqn)
            e = rw.eqns[-1]
            for o in e.outvars:
                producer[id(o)] = e

        def summed_exp(s: Any, shape: tuple) -> tuple[Any, tuple] | None:
            """``s`` is ``sum(exp(x), axes)`` brought back to ``shape``: (x, axes)."""
            chain = s
            b = prod(chain, S.broadcast_in_dim_p)
            bdims = None
            if b is not None and tuple(b.params["shape"]) == shape:
                bdims = tuple(b.params["broadcast_dimensions"])
                chain = b.invars[0]
            r = prod(chain, S.reshape_p)
            if r is not None and r.params.get("dimensions") is None:
                chain = r.invars[0]
            red = prod(chain, R.reduce_sum_p)
            if red is None:
                return None
            ex = prod(red.invars[0], E.exp_p)
            if ex is None or ex.invars[0].aval.shape != shape:
                return None
            axes = tuple(sorted(red.params["axes"]))
            kept = tuple(i for i in range(len(shape)) if i not in axes)
            keep_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
            if s is chain and red.outvars[0].aval.shape == ():  # a scalar sum
                return ex.invars[0], axes
            if r is not None and tuple(r.outvars[0].aval.shape) == keep_shape and bdims == tuple(range(len(shape))):
                return ex.invars[0], axes
            if r is None and bdims == kept:
                return ex.invars[0], axes
            return None

        def shifted(y: Any) -> bool:
            """``y`` is ``x - max(x)`` as ``_logsumexp`` (or a user's stable form) computes it."""
            sb = prod(y, E.sub_p)
            if sb is None:
                return False
            chain = sb.invars[1]
            for prim in (S.broadcast_in_dim_p, E.stop_gradient_p):
                e = prod(chain, prim)
                chain = e.invars[0] if e is not None else chain
            sel = prod(chain, S.select_n_p)
            chain = sel.invars[-1] if sel is not None else chain
            mx = prod(chain, R.reduce_max_p)
            return mx is not None and mx.invars[0] is sb.invars[0]

        for eqn in jaxpr.eqns:
            p = eqn.primitive
            ins = [rw.read(a) for a in eqn.invars]
            if not eqn.outvars or not dtypes.np_issubdtype(eqn.outvars[0].aval.dtype, np.floating):
                emit(eqn)
                continue
            out = eqn.outvars[0]
            if p is E.log_p:
                (y,) = ins
                d = prod(y, E.div_p)
                if d is not None:
                    num, den = d.invars
                    ex = prod(num, E.exp_p)
                    got = summed_exp(den, out.aval.shape) if ex is not None else None
                    if got is not None and got[0] is ex.invars[0]:
                        x, axes = got
                        replace(eqn, lambda x, axes=axes: E.sub_p.bind(x, _logsumexp(x, axes, True)), [x],
                                "`log(exp(x) / sum(exp(x)))` became `x - logsumexp(x)`")
                        continue
                red = prod(y, R.reduce_sum_p)
                ex = prod(red.invars[0], E.exp_p) if red is not None else None
                if ex is not None and not shifted(ex.invars[0]):
                    axes = tuple(sorted(red.params["axes"]))
                    replace(eqn, lambda x, axes=axes: _logsumexp(x, axes, False), [ex.invars[0]],
                            "`log(sum(exp(x)))` became a max-shifted `logsumexp`")
                    continue
                a = prod(y, E.add_p)
                if a is not None:
                    u, v = a.invars
                    x = v if is_literal_value(u, 1) else u if is_literal_value(v, 1) else None
                    if x is not None and x.aval.shape == out.aval.shape:
                        replace(eqn, lambda x: E.log1p_p.bind(x), [x], "`log(1 + x)` became `log1p(x)`")
                        continue
                sg = prod(y, E.logistic_p)
                if sg is not None:
                    replace(eqn, _log_sigmoid, [sg.invars[0]], "`log(sigmoid(x))` became `-softplus(-x)`")
                    continue
                sb = prod(y, E.sub_p)
                if sb is not None and is_literal_value(sb.invars[0], 1):
                    sg = prod(sb.invars[1], E.logistic_p)
                    if sg is not None and sg.invars[0].aval.shape == out.aval.shape:
                        replace(eqn, lambda x: _log_sigmoid(E.neg_p.bind(x)), [sg.invars[0]],
                                "`log(1 - sigmoid(x))` became `-softplus(x)`")
                        continue
            if p is E.sub_p and is_literal_value(ins[1], 1):
                ex = prod(ins[0], E.exp_p)
                if ex is not None and ex.invars[0].aval.shape == out.aval.shape:
                    replace(eqn, lambda x: E.expm1_p.bind(x), [ex.invars[0]], "`exp(x) - 1` became `expm1(x)`")
                    continue
            emit(eqn)
        return rw.finish()
