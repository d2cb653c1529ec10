"""Batching (``vmap``) of ``cond``, ``while`` and ``scan``.

Each rule batches the bodies once (``_batch_body``: a body staged under a
fresh batch trace for the same axis) and binds one new primitive of the same
kind, except where the control decision itself differs between batch
elements:

* ``cond`` with an unbatched index batches every branch with the operands'
  batch dimensions.  The branches must agree on which outputs are batched, so
  an output that any branch batches is batched (at dimension 0) by all of
  them.  A *batched* index runs every branch on the whole batch and picks each
  element's result with ``select_n`` (the index clamped into range first, as
  ``cond``'s contract says), which is what JAX does.  As in JAX, the operands a
  branch sees are ``stop_gradient``-ed for the elements that do not take it,
  so that differentiating the selected program later (``grad(vmap(f))``) sends
  no cotangent through an untaken branch (whose derivative may be NaN there).
* ``while`` and ``scan`` find by fixed-point iteration which carries are
  batched: a carry is batched if it is batched going in, or if the body makes
  it batched (``c = c + x`` with a batched ``x``).  Batched carries are kept at
  dimension 0 throughout.
* ``while`` with a batched predicate (some elements finish before others)
  becomes a masked loop: every carry is batched, the loop runs while *any*
  element's predicate holds (``reduce_or``), and the body recomputes each
  element's predicate and keeps the carries of finished elements unchanged
  (``select_n(pred, old, new)``).
* ``scan`` passes a batched ``xs`` with its batch dimension at axis 1 (axis 0
  is the scanned one), so the body sees slices batched at dimension 0; the
  stacked ``ys`` come out batched at axis 1.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import EMPTY_NAME_STACK, ClosedJaxpr, all_jaxprs, hoist_consts
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims.control_flow import (
    cond_p,
    join_consts,
    linear_solve_p,
    linear_solve_parts,
    scan_p,
    scan_split,
    while_p,
)
from ftrans.core.trace import Tracer, aval_of, names_as, stage
from ftrans.errors import FtransValueError
from ftrans.transforms.batching import (
    AxisFrame,
    bdim_at_front,
    broadcast_batch,
    moveaxis,
    not_mapped,
    register_batching,
    run_batched,
)

__all__: list[str] = []


def _mapped(d: Any) -> bool:
    return d is not not_mapped


def _dims(batched: Sequence[bool]) -> list:
    """Batch dimensions of values kept at the front: 0 where batched, ``not_mapped`` elsewhere."""
    return [0 if b else not_mapped for b in batched]


def _batched_aval(a: ShapedArray, d: Any, size: int) -> ShapedArray:
    if not _mapped(d):
        return a
    shape = list(a.shape)
    shape.insert(d, size)
    return ShapedArray(tuple(shape), a.dtype, a.weak_type)


def _batch_body(closed: ClosedJaxpr, dims: Sequence[Any], frame: AxisFrame,
                force: Sequence[bool]) -> tuple[ClosedJaxpr, list, list]:
    """``closed`` batched along ``frame``: its inputs batched at ``dims``, its outputs at the front.

    Every output that comes out batched is moved to dimension 0; an unbatched
    output is broadcast to dimension 0 where ``force`` asks, and left unbatched
    otherwise.  Returns the new body (closed over nothing: what staging
    captured is in leading inputs), those captured constants, and the outputs'
    batch dimensions (0 or ``not_mapped``).
    """
    memo = getattr(_memo_state, "memo", None)
    key = None
    if memo is not None and not any(isinstance(c, Tracer) for c in closed.consts):
        key = (id(closed), tuple(dims), frame.name, frame.size, frame.spmd_name, frame.explicit, tuple(force))
        hit = memo.get(key)
        if hit is not None and hit[0] is closed:
            return hit[1], list(hit[2]), list(hit[3])
    in_avals = [_batched_aval(a, d, frame.size) for a, d in zip(closed.in_avals, dims)]
    box: list = []

    def fun(*args: Any) -> list:
        outs, odims = run_batched(lambda *ins: eval_jaxpr(closed.jaxpr, list(closed.consts), *ins), args, dims,
                                  frame)
        res, rdims = [], []
        for o, d, f in zip(outs, odims, force):
            if _mapped(d):
                o, d = moveaxis(o, d, 0), 0
            elif f:
                o, d = broadcast_batch(o, frame.size, 0), 0
            res.append(o)
            rdims.append(d)
        box.append(rdims)
        return res

    new, _ = stage(fun, in_avals)
    body, consts = hoist_consts(new)
    if key is not None and not any(isinstance(c, Tracer) for c in consts):
        memo[key] = (closed, body, tuple(consts), tuple(box[0]))  # (holding ``closed`` keeps its id unique)
    return body, list(consts), box[0]


# The carry fixed points of ``while`` and ``scan`` batch a body once per round, and a body holding another loop
# runs that loop's fixed point each time: without a memo the work multiplies per level of nesting (the nested
# recomputation loops of ``vmap``/``jacrev`` of a second-order gradient through ``while_loop`` took minutes).
# Within the outermost loop's rule a body batched at the same dimensions over the same axis is the same
# program, so it is staged once; bodies closing over tracers are left out.
_memo_state = threading.local()


@contextlib.contextmanager
def _memo_scope():
    if getattr(_memo_state, "memo", None) is not None:
        yield
        return
    _memo_state.memo = {}
    try:
        yield
    finally:
        _memo_state.memo = None


def _stage(fun: Callable[..., list], in_avals: Sequence[ShapedArray]) -> tuple[ClosedJaxpr, list]:
    new, _ = stage(fun, list(in_avals))
    body, consts = hoist_consts(new)
    return body, list(consts)


def _call(closed: ClosedJaxpr, *args: Any) -> list:
    return eval_jaxpr(closed.jaxpr, list(closed.consts), *args)


def _bcast_front(x: Any, shape: tuple) -> Any:
    """A vector ``x`` of the batch size, broadcast along the trailing dimensions of ``shape``."""
    if tuple(aval_of(x).shape) == tuple(shape):
        return x
    return S.broadcast_in_dim_p.bind(x, shape=tuple(shape), broadcast_dimensions=(0,))


# ----------------------------------------------------------------------------
# cond


def _refuse_io_effects(jaxprs: Any, what: str) -> None:
    """``io_callback`` in a ``cond``/``while`` whose predicate is batched: running it for every element
    (the branches as a select, the loop until every element is done) would do I/O that the program did
    not ask for, so it is refused as in JAX (debug callbacks are allowed)."""
    for j in jaxprs:
        for sub in all_jaxprs(j):
            if any(e.primitive.name == "io_callback" for e in sub.eqns):
                where = "while_loop with batched predicate" if what == "while" else f"vmap-of-{what}"
                raise NotImplementedError(
                    f"IO effect not supported in {where}: the {what}'s predicate is batched, so every "
                    f"branch/iteration would run for every element; move the io_callback out of the {what}, "
                    "or use debug.callback")


def _refuse_checks(jaxprs: Any) -> None:
    """A ``checkify.check`` in a ``while`` whose predicate is batched would keep checking the elements that
    have finished (their carries stay, the body still runs on them), so it is refused as in JAX."""
    for j in jaxprs:
        for sub in all_jaxprs(j):
            if any(e.primitive.name == "check" for e in sub.eqns):
                raise FtransValueError(
                    "checkify does not support a check in a while_loop with a batched predicate "
                    "(checkify-of-vmap-of-while): elements that have finished would still be checked. Move the "
                    "vmap outside the checkify (vmap of checkify of while_loop) if you can")


@register_batching(cond_p)
def _cond_batch(vals: list, dims: list, *, frame: AxisFrame, branches: tuple) -> tuple[list, list]:
    index, ops = vals[0], list(vals[1:])
    index_dim, op_dims = dims[0], list(dims[1:])
    n_out = len(branches[0].out_avals)
    if _mapped(index_dim):
        _refuse_io_effects(branches, "cond")  # a select runs every branch: their I/O would all happen
        return _cond_as_select(index, index_dim, ops, op_dims, frame, branches)

    # An unbatched index: one cond whose branches agree on which outputs are batched.
    first = [_batch_body(b, op_dims, frame, [False] * n_out) for b in branches]
    out_b = [any(_mapped(r[2][k]) for r in first) for k in range(n_out)]
    pairs = []
    for b, (body, consts, odims) in zip(branches, first):
        if [_mapped(d) for d in odims] != out_b:
            body, consts, odims = _batch_body(b, op_dims, frame, out_b)
        pairs.append((body, consts))
    bodies, consts = join_consts(pairs)
    outs = cond_p.bind(index, *consts, *ops, branches=tuple(bodies))
    return list(outs), _dims(out_b)


def _cond_as_select(index: Any, index_dim: int, ops: list, op_dims: list, frame: AxisFrame,
                    branches: tuple) -> tuple[list, list]:
    """A batched index: run every branch on the whole batch and select each element's result."""
    size = frame.size
    n = len(branches)
    index = moveaxis(index, index_dim, 0)
    idt = aval_of(index).dtype
    index = S.clamp_p.bind(np.asarray(0, idt), index, np.asarray(n - 1, idt))
    ops = [bdim_at_front(x, d, size) for x, d in zip(ops, op_dims)]
    results = []
    for i, b in enumerate(branches):
        if n > 1:
            # The elements that do not take this branch see its operands through stop_gradient (as in JAX), so a
            # later derivative of the selected program gets no NaN from a branch that was not taken.
            taken = E.eq_p.bind(index, np.asarray(i, idt))
            ops_i = [S.select_n_p.bind(_bcast_front(taken, aval_of(x).shape), E.stop_gradient_p.bind(x), x)
                     if dtypes.is_inexact(aval_of(x).dtype) else x for x in ops]
        else:
            ops_i = ops
        outs, _ = run_batched(lambda *ins, b=b: _call(b, *ins), ops_i, [0] * len(ops), frame, force_front=True)
        results.append(outs)
    outs = [S.select_n_p.bind(_bcast_front(index, aval_of(cases[0]).shape), *cases) for cases in zip(*results)]
    return outs, [0] * len(outs)


# ----------------------------------------------------------------------------
# while


@register_batching(while_p)
def _while_batch(vals: list, dims: list, *, frame: AxisFrame, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr,
                 cond_nconsts: int, body_nconsts: int) -> tuple[list, list]:
    with _memo_scope():
        return _while_batch_rule(vals, dims, frame=frame, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                                 cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)


def _while_batch_rule(vals: list, dims: list, *, frame: AxisFrame, cond_jaxpr: ClosedJaxpr,
                      body_jaxpr: ClosedJaxpr, cond_nconsts: int, body_nconsts: int) -> tuple[list, list]:
    nc, nb = cond_nconsts, body_nconsts
    cc, bc, init = vals[:nc], vals[nc:nc + nb], vals[nc + nb:]
    cc_d, bc_d, init_d = dims[:nc], dims[nc:nc + nb], dims[nc + nb:]
    n = len(init)
    carry_b = [_mapped(d) for d in init_d]
    # Fixed point: a carry is batched if it starts batched, if the body batches it, or if the predicate is
    # batched (then every element needs its own copy of every carry).
    while True:
        cnd, cnd_consts, (pred_d,) = _batch_body(cond_jaxpr, list(cc_d) + _dims(carry_b), frame, [False])
        pred_b = _mapped(pred_d)
        body, body_consts, out_d = _batch_body(body_jaxpr, list(bc_d) + _dims(carry_b), frame, carry_b)
        new = [b or pred_b or _mapped(d) for b, d in zip(carry_b, out_d)]
        if new == carry_b:
            break
        carry_b = new
    init = [bdim_at_front(x, d, frame.size) if b else x for x, d, b in zip(init, init_d, carry_b)]
    if not pred_b:
        outs = while_p.bind(*cnd_consts, *cc, *body_consts, *bc, *init, cond_jaxpr=cnd, body_jaxpr=body,
                            cond_nconsts=len(cnd_consts) + nc, body_nconsts=len(body_consts) + nb)
        return list(outs), _dims(carry_b)

    # A batched predicate: loop while any element continues; finished elements keep their carries.
    _refuse_io_effects([cond_jaxpr, body_jaxpr], "while")  # finished elements would still do the I/O
    _refuse_checks([cnd, body])  # finished elements would still be checked
    n_cc = len(cnd_consts) + nc
    n_bc = len(body_consts) + nb
    cnd_in = cnd.in_avals  # [cnd_consts, cc, carry]
    body_in = body.in_avals  # [body_consts, bc, carry]
    carry_avals = body_in[n_bc:]

    def any_cond(*args: Any) -> list:
        (pred,) = _call(cnd, *args)
        return [R.reduce_or_p.bind(pred, axes=(0,))]

    def masked_body(*args: Any) -> list:
        c_consts, b_consts, carry = args[:n_cc], args[n_cc:n_cc + n_bc], args[n_cc + n_bc:]
        new = _call(body, *b_consts, *carry)  # the body before the predicate, as JAX orders their effects
        with names_as(EMPTY_NAME_STACK.in_place_of_last("body_pred")):  # named as JAX's: ``while/body_pred/...``
            (pred,) = _call(cnd, *c_consts, *carry)
        return [S.select_n_p.bind(_bcast_front(pred, aval_of(old).shape), old, nw) for old, nw in zip(carry, new)]

    any_cnd, h_c = _stage(any_cond, cnd_in)
    masked, h_b = _stage(masked_body, list(cnd_in[:n_cc]) + list(body_in[:n_bc]) + list(carry_avals))
    outs = while_p.bind(*h_c, *cnd_consts, *cc, *h_b, *cnd_consts, *cc, *body_consts, *bc, *init,
                        cond_jaxpr=any_cnd, body_jaxpr=masked, cond_nconsts=len(h_c) + n_cc,
                        body_nconsts=len(h_b) + n_cc + n_bc)
    return list(outs), [0] * n


# ----------------------------------------------------------------------------
# scan


@register_batching(scan_p)
def _scan_batch(vals: list, dims: list, *, frame: AxisFrame, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int,
                length: int, reverse: bool, unroll: int) -> tuple[list, list]:
    with _memo_scope():
        return _scan_batch_rule(vals, dims, frame=frame, jaxpr=jaxpr, num_consts=num_consts, num_carry=num_carry,
                                length=length, reverse=reverse, unroll=unroll)


def _scan_batch_rule(vals: list, dims: list, *, frame: AxisFrame, jaxpr: ClosedJaxpr, num_consts: int,
                     num_carry: int, length: int, reverse: bool, unroll: int) -> tuple[list, list]:
    consts, init, xs = scan_split(vals, num_consts, num_carry)
    consts_d, init_d, xs_d = scan_split(dims, num_consts, num_carry)
    n = num_carry
    n_ys = len(jaxpr.out_avals) - n
    x_slice_d = _dims([_mapped(d) for d in xs_d])  # the body sees x slices batched at dimension 0
    carry_b = [_mapped(d) for d in init_d]
    while True:
        body, body_consts, out_d = _batch_body(jaxpr, list(consts_d) + _dims(carry_b) + x_slice_d, frame,
                                               carry_b + [False] * n_ys)
        new = [b or _mapped(d) for b, d in zip(carry_b, out_d[:n])]
        if new == carry_b:
            break
        carry_b = new
    init = [bdim_at_front(x, d, frame.size) if b else x for x, d, b in zip(init, init_d, carry_b)]
    xs = [moveaxis(x, d, 1) if _mapped(d) else x for x, d in zip(xs, xs_d)]
    outs = scan_p.bind(*body_consts, *consts, *init, *xs, jaxpr=body, num_consts=len(body_consts) + num_consts,
                       num_carry=n, length=length, reverse=reverse, unroll=unroll)
    return list(outs), _dims(carry_b) + [1 if _mapped(d) else not_mapped for d in out_d[n:]]


# ----------------------------------------------------------------------------
# custom_linear_solve


@register_batching(linear_solve_p)
def _linear_solve_batch(vals: list, dims: list, *, frame: AxisFrame, const_lengths: tuple,
                        jaxprs: tuple) -> tuple[list, list]:
    """Every body batched with ``b`` and the solution at the front.

    The right-hand side and the solution are always batched (an unbatched ``b`` is broadcast): the four
    bodies map between the same vector space, so batching all of it keeps them consistent without the
    fixed point over which parts become batched; each const keeps its own batch dimension.
    """
    n = sum(const_lengths)
    consts, c_dims = vals[:n], dims[:n]
    b = [bdim_at_front(x, d, frame.size) for x, d in zip(vals[n:], dims[n:])]
    b_dims = [0] * len(b)
    new_bodies, new_consts, new_lengths = [], [], []
    start = 0
    for body, k in zip(linear_solve_parts(jaxprs), const_lengths):
        group, g_dims = consts[start:start + k], c_dims[start:start + k]
        start += k
        if body is None:
            new_lengths.append(0)
            continue
        nb, captured, _ = _batch_body(body, list(g_dims) + b_dims, frame, [True] * len(body.out_avals))
        new_bodies.append(nb)
        new_consts.extend(captured + list(group))
        new_lengths.append(len(captured) + k)
    outs = linear_solve_p.bind(*new_consts, *b, const_lengths=tuple(new_lengths), jaxprs=tuple(new_bodies))
    return list(outs), [0] * len(outs)
