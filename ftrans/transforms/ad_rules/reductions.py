"""JVP rules of the reductions, ``dot_general`` and the cumulative reductions.

Conventions follow JAX:

* ``reduce_max``/``reduce_min`` average the tangent over every position that
  attains the extreme value (an equality mask, divided by the tie count);
* ``reduce_prod`` is differentiated without dividing by the operand, so zeros
  in the operand are handled exactly (products of everything but one element,
  from exclusive running products in both directions);
* ``cumprod``, ``cummax``, ``cummin`` and ``cumlogsumexp`` are differentiated
  as a parallel prefix scan of their combining function, as JAX does (JAX
  differentiates ``associative_scan``; the same recursion is used here, so
  ties of ``cummax``/``cummin`` split the tangent exactly as in JAX);
  ``cumsum`` is linear;
* bitwise reductions and ``argmax``/``argmin`` have zero derivative.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import building as B
from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import (
    Zero,
    add_tangents,
    defjvp_linear,
    defjvp_zero,
    instantiate,
    jvp_flat,
    register_jvp,
    tangent_aval,
)
from ftrans.transforms.partial_eval import partial_eval_jaxpr_rules, partial_eval_rules

Pair = tuple[Any, Any]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(x).shape)


def _dtype(x: Any) -> np.dtype:
    return aval_of(x).dtype


def _scalar(value: Any, like: Any) -> Any:
    """A rank-0 constant of ``like``'s dtype (elementwise primitives take it alongside arrays)."""
    return Array._new(np.asarray(value, _dtype(like)), False)


def _as_float(pred: Any, like: Any) -> Any:
    """1 where ``pred`` holds, else 0, in ``like``'s dtype."""
    return S.convert_element_type_p.bind(pred, new_dtype=_dtype(like), weak_type=False)


# ---------------------------------------------------------------- linear and zero-derivative
defjvp_linear(R.reduce_sum_p)
defjvp_linear(So.cumsum_p)
for _prim in (R.reduce_and_p, R.reduce_or_p, R.reduce_xor_p, R.argmax_p, R.argmin_p):
    defjvp_zero(_prim)


# ---------------------------------------------------------------- max / min
def _chooser_rule(prim):
    """JAX's rule for reduce_max/min: the tangent averaged over the positions equal to the result."""

    @register_jvp(prim)
    def rule(primals: list, tangents: list, *, axes: tuple[int, ...]) -> Pair:
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axes=axes)
        if type(t) is Zero:
            return out, Zero.from_primal_value(out)
        shape = _shape(x)
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        full = S.broadcast_in_dim_p.bind(out, shape=shape, broadcast_dimensions=kept)
        hit = E.eq_p.bind(x, full)
        counts = R.reduce_sum_p.bind(_as_float(hit, t), axes=axes)
        # A select, not t * mask: transposed, positions that are not the result get exactly 0
        # even where no position is (a NaN result: count 0), as XLA's simplified jax rule gives.
        zeros = S.broadcast_in_dim_p.bind(_scalar(0, t), shape=shape, broadcast_dimensions=())
        total = R.reduce_sum_p.bind(S.select_n_p.bind(hit, zeros, t), axes=axes)
        return out, E.div_p.bind(total, counts)

    rule.__name__ = f"{prim.name}_jvp"
    return rule


_chooser_rule(R.reduce_max_p)
_chooser_rule(R.reduce_min_p)


# ---------------------------------------------------------------- product
def _slice_axis(x: Any, axis: int, start: int, stop: int) -> Any:
    shape = _shape(x)
    starts = tuple(start if i == axis else 0 for i in range(len(shape)))
    limits = tuple(stop if i == axis else n for i, n in enumerate(shape))
    return S.slice_p.bind(x, start_indices=starts, limit_indices=limits, strides=None)


def _shift_in(x: Any, axis: int, fill: Any, from_start: bool) -> Any:
    """``x`` moved one step along ``axis`` (towards the end if ``from_start``), ``fill`` entering."""
    n = _shape(x)[axis]
    kept = _slice_axis(x, axis, 0, n - 1) if from_start else _slice_axis(x, axis, 1, n)
    config = tuple(((1, 0, 0) if from_start else (0, 1, 0)) if i == axis else (0, 0, 0)
                   for i in range(len(_shape(x))))
    return S.pad_p.bind(kept, _scalar(fill, x), padding_config=config)


@register_jvp(R.reduce_prod_p)
def _reduce_prod_jvp(primals: list, tangents: list, *, axes: tuple[int, ...]) -> Pair:
    """The product rule applied along a balanced tree of pairwise products (JAX's rule).

    No division by ``x``, so zeros in the operand give the exact derivative, and
    the same tree of ``mul``s as JAX's means higher derivatives meet infinities
    (``inf * 0``) in the same places, so they agree with JAX's there too.
    """
    (x,), (t,) = primals, tangents
    out = R.reduce_prod_p.bind(x, axes=axes)
    if type(t) is Zero:
        return out, Zero.from_primal_value(out)
    shape = _shape(x)
    if not axes:
        return out, t
    kept = [i for i in range(len(shape)) if i not in axes]
    n = int(np.prod([shape[a] for a in axes]))
    if n == 0:
        return out, R.reduce_sum_p.bind(t, axes=axes)
    perm = tuple(kept) + tuple(axes)
    flat_shape = tuple(shape[i] for i in kept) + (n,)

    def flat(v: Any) -> Any:
        return S.reshape_p.bind(S.transpose_p.bind(v, permutation=perm), new_sizes=flat_shape, dimensions=None)

    p, tp = flat(x), flat(t)
    last = len(flat_shape) - 1
    while n > 1:
        n1 = (n + 1) // 2
        pad = tuple((0, n1 - (n - n1), 0) if i == last else (0, 0, 0) for i in range(len(flat_shape)))
        p1, t1 = _slice_axis(p, last, 0, n1), _slice_axis(tp, last, 0, n1)
        p2, t2 = _slice_axis(p, last, n1, n), _slice_axis(tp, last, n1, n)
        if n1 != n - n1:
            p2 = S.pad_p.bind(p2, _scalar(1, p2), padding_config=pad)
            t2 = S.pad_p.bind(t2, _scalar(0, t2), padding_config=pad)
        p, tp = _mul_pair((p1, t1), (p2, t2))
        n = n1
    return out, S.reshape_p.bind(tp, new_sizes=_shape(out), dimensions=None)


# ---------------------------------------------------------------- dot_general
@register_jvp(R.dot_general_p)
def _dot_general_jvp(primals: list, tangents: list, **params: Any) -> Pair:
    """Bilinear: ``dot(t_lhs, rhs) + dot(lhs, t_rhs)`` with the same dimension numbers and result type."""
    lhs, rhs = primals
    t_lhs, t_rhs = tangents
    out = R.dot_general_p.bind(lhs, rhs, **params)
    if not dtypes.is_inexact(_dtype(out)):
        return out, Zero.from_primal_value(out)
    total: Any = Zero.from_primal_value(out)
    if type(t_lhs) is not Zero:
        total = add_tangents(total, R.dot_general_p.bind(t_lhs, rhs, **params))
    if type(t_rhs) is not Zero:
        total = add_tangents(total, R.dot_general_p.bind(lhs, t_rhs, **params))
    return out, total


# ---------------------------------------------------------------- cumulative reductions
def _mul_pair(a: Pair, b: Pair) -> Pair:
    (pa, ta), (pb, tb) = a, b
    return E.mul_p.bind(pa, pb), E.add_p.bind(E.mul_p.bind(ta, pb), E.mul_p.bind(pa, tb))


def _balanced(a: Any, z: Any, b: Any) -> Any:
    """JAX's tie rule for max/min: 1 where only ``a`` attains ``z``, 1/2 where both do, else 0."""
    one = _scalar(1, z)
    return E.div_p.bind(_as_float(E.eq_p.bind(a, z), z), E.add_p.bind(_as_float(E.eq_p.bind(b, z), z), one))


def _chooser_pair(prim) -> Callable[[Pair, Pair], Pair]:
    def combine(a: Pair, b: Pair) -> Pair:
        (pa, ta), (pb, tb) = a, b
        z = prim.bind(pa, pb)
        t = E.add_p.bind(E.mul_p.bind(ta, _balanced(pa, z, pb)), E.mul_p.bind(tb, _balanced(pb, z, pa)))
        return z, t

    return combine


def _replace_inf(x: Any) -> Any:
    """``x`` with infinities replaced by 0 (keeps ``exp(a - out)`` finite when both are -inf)."""
    finite = E.is_finite_p.bind(x)
    return S.select_n_p.bind(finite, S.broadcast_in_dim_p.bind(_scalar(0, x), shape=_shape(x),
                                                                broadcast_dimensions=()), x)


def _logaddexp_pair(a: Pair, b: Pair) -> Pair:
    """logaddexp and its tangent ``ta*exp(a-out) + tb*exp(b-out)`` (JAX's logaddexp JVP)."""
    (pa, ta), (pb, tb) = a, b
    amax = E.max_p.bind(pa, pb)
    delta = E.sub_p.bind(pa, pb)
    soft = E.add_p.bind(amax, E.log1p_p.bind(E.exp_p.bind(E.neg_p.bind(E.abs_p.bind(delta)))))
    out = S.select_n_p.bind(E.ne_p.bind(delta, delta), soft, E.add_p.bind(pa, pb))
    ro = _replace_inf(out)
    wa = E.exp_p.bind(E.sub_p.bind(_replace_inf(pa), ro))
    wb = E.exp_p.bind(E.sub_p.bind(_replace_inf(pb), ro))
    return out, E.add_p.bind(E.mul_p.bind(ta, wa), E.mul_p.bind(tb, wb))


def _slice_axis_strided(x: Any, axis: int, start: int, stop: int | None, stride: int) -> Any:
    shape = _shape(x)
    stop = shape[axis] if stop is None else (stop if stop >= 0 else shape[axis] + stop)
    starts = tuple(start if i == axis else 0 for i in range(len(shape)))
    limits = tuple(stop if i == axis else n for i, n in enumerate(shape))
    strides = tuple(stride if i == axis else 1 for i in range(len(shape)))
    return S.slice_p.bind(x, start_indices=starts, limit_indices=limits, strides=strides)


def _interleave(a: Any, b: Any, axis: int) -> Any:
    """``a[0], b[0], a[1], b[1], ...`` along ``axis`` (``a`` has as many elements as ``b`` or one more)."""
    na, nb = _shape(a)[axis], _shape(b)[axis]
    nd = len(_shape(a))
    a_cfg = tuple((0, 1 if na == nb else 0, 1) if i == axis else (0, 0, 0) for i in range(nd))
    b_cfg = tuple((1, 0 if na == nb else 1, 1) if i == axis else (0, 0, 0) for i in range(nd))
    return E.add_p.bind(S.pad_p.bind(a, _scalar(0, a), padding_config=a_cfg),
                        S.pad_p.bind(b, _scalar(0, b), padding_config=b_cfg))


def _prefix_scan(combine: Callable[[Pair, Pair], Pair], x: Pair, axis: int) -> Pair:
    """Inclusive scan of (primal, tangent) pairs along ``axis``: JAX's ``associative_scan`` recursion.

    Adjacent pairs are combined, the half-length result is scanned
    recursively (giving the odd positions), and the even positions combine
    those with the remaining elements.  The same combination order as JAX
    matters at ties of max/min, where the tangent is split between the tied
    operands of each combination.
    """
    n = _shape(x[0])[axis]
    if n < 2:
        return x

    def part(start: int, stop: int | None, stride: int) -> Pair:
        return (_slice_axis_strided(x[0], axis, start, stop, stride),
                _slice_axis_strided(x[1], axis, start, stop, stride))

    reduced = combine(part(0, -1, 2), part(1, None, 2))
    odd = _prefix_scan(combine, reduced, axis)
    if n % 2 == 0:
        m = _shape(odd[0])[axis]
        even = combine((_slice_axis(odd[0], axis, 0, m - 1), _slice_axis(odd[1], axis, 0, m - 1)),
                       part(2, None, 2))
    else:
        even = combine(odd, part(2, None, 2))
    first = part(0, 1, 1)
    even = tuple(S.concatenate_p.bind(f, e, dimension=axis) for f, e in zip(first, even))
    return _interleave(even[0], odd[0], axis), _interleave(even[1], odd[1], axis)


def _cumulative_rule(prim, combine: Callable[[Pair, Pair], Pair]) -> None:
    @register_jvp(prim)
    def rule(primals: list, tangents: list, *, axis: int, reverse: bool) -> Pair:
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis=axis, reverse=reverse)
        if type(t) is Zero:
            return out, Zero.from_primal_value(out)
        t = instantiate(t)
        if reverse:
            x, t = S.rev_p.bind(x, dimensions=(axis,)), S.rev_p.bind(t, dimensions=(axis,))
        _, t_out = _prefix_scan(combine, (x, t), axis)
        if reverse:
            t_out = S.rev_p.bind(t_out, dimensions=(axis,))
        if _shape(x)[axis] >= 2 and aval_of(out).weak_type:
            # JAX's primal output comes out of the same scan, whose interleaving pads with a strong zero: a
            # weakly typed operand's cumulative max/min/product/logsumexp is strongly typed under jvp
            out = S.convert_element_type_p.bind(out, new_dtype=_dtype(out), weak_type=False)
        return out, t_out

    rule.__name__ = f"{prim.name}_jvp"


_cumulative_rule(So.cumprod_p, _mul_pair)
_cumulative_rule(So.cummax_p, _chooser_pair(E.max_p))
_cumulative_rule(So.cummin_p, _chooser_pair(E.min_p))
_cumulative_rule(So.cumlogsumexp_p, _logaddexp_pair)


# ---------------------------------------------------------------- reduce with a user computation
#
# As JAX does: the reduced positions are flattened into one leading axis and combined pairwise, halving it
# each round (an odd half padded with the init values), with the computation vmapped over the kept
# positions; that program of ordinary primitives is what gets differentiated.  The init values must have
# zero tangents (JAX's restriction too).


def _reduce_tree(jaxpr, dimensions: tuple, inits: list, shape: tuple) -> Callable:
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.transforms.batching import vmap

    dims = tuple(sorted(int(d) for d in dimensions))
    keep = tuple(d for d in range(len(shape)) if d not in dims)
    out_shape = tuple(shape[d] for d in keep)
    k = int(np.prod([shape[d] for d in dims], dtype=np.int64))
    m = int(np.prod(out_shape, dtype=np.int64))
    n = len(inits)
    combine = vmap(lambda *a: eval_jaxpr(jaxpr.jaxpr, list(jaxpr.consts), *a))

    def cut(x: Any, lo: int, hi: int) -> Any:
        return S.slice_p.bind(x, start_indices=(lo, 0), limit_indices=(hi, m), strides=None)

    def tree(*xs: Any) -> list:
        xs = [B.reshape(S.transpose_p.bind(x, permutation=dims + keep), (k, m)) for x in xs]
        if k == 0:
            return [B.broadcast_in_dim(i, out_shape, ()) for i in inits]
        rows = k
        while rows > 1:
            r1 = (rows + 1) // 2
            first = [cut(x, 0, r1) for x in xs]
            second = [cut(x, r1, rows) for x in xs]
            if rows - r1 != r1:
                second = [S.concatenate_p.bind(s, B.broadcast_in_dim(i, (1, m), ()), dimension=0)
                          for s, i in zip(second, inits)]
            outs = combine(*[B.reshape(a, (r1 * m,)) for a in first], *[B.reshape(b, (r1 * m,)) for b in second])
            xs = [B.reshape(o, (r1, m)) for o in list(outs)[:n]]
            rows = r1
        return [B.reshape(x, out_shape) for x in xs]

    return tree


@register_jvp(R.reduce_p)
def _reduce_general_jvp(primals: list, tangents: list, *, jaxpr: Any, dimensions: tuple) -> tuple[list, list]:
    n = len(primals) // 2
    ops, inits = list(primals[:n]), list(primals[n:])
    if any(type(t) is not Zero for t in tangents[n:]):
        raise NotImplementedError(
            "lax.reduce: differentiating with respect to the init values of a reduction with a general "
            "computation is not supported (as in JAX); pass init values that do not depend on the "
            "differentiated inputs"
        )
    if all(type(t) is Zero for t in tangents[:n]):
        outs = R.reduce_p.bind(*primals, jaxpr=jaxpr, dimensions=dimensions)
        return outs, [Zero(tangent_aval(aval_of(o))) for o in outs]
    tree = _reduce_tree(jaxpr, dimensions, inits, tuple(aval_of(ops[0]).shape))
    p_out, t_out, _ = jvp_flat(lambda *xs: (tree(*xs), None), ops, list(tangents[:n]))
    return p_out, t_out


def _reduce_partial_eval(trace: Any, tracers: list, params: dict) -> list:
    """The JVP never binds ``reduce`` on tangents, so a ``reduce`` with an unknown operand is kept whole."""
    knowns = [trace.known_value(t) for t in tracers]
    if all(k for k, _ in knowns):
        return R.reduce_p.bind(*[v for _, v in knowns], **params)
    return trace.record(R.reduce_p, tracers, params)


def _reduce_split_eqn(eqn: Any, unk_in: list) -> tuple:
    return None, eqn, [True] * len(eqn.outvars)


partial_eval_rules[R.reduce_p] = _reduce_partial_eval
partial_eval_jaxpr_rules[R.reduce_p] = _reduce_split_eqn
