"""The control-flow primitives ``cond``, ``while`` and ``scan``: their parameters, types and eager rule.

Each is a higher-order primitive whose bodies are ``ClosedJaxpr``s closed over
nothing: whatever a user's branch or loop body captured (outer tracers, arrays)
has been hoisted into explicit operands by the API layer (``ftrans/lax/_control_flow.py``), so every
rule (JVP, partial evaluation, transposition, batching, lowering) sees all of a
body's inputs as operands and can recurse into the body uniformly.

The operand layouts are the contract every rule module relies on:

``cond``   ``(index, *ops)`` with ``branches=(b_0, ..., b_{n-1})``; every branch
           takes ``ops`` and returns the same types.  ``index`` is an int32
           scalar; a value outside ``[0, n)`` runs the nearest branch (the API
           clamps it, and so does every rule, as ``stablehlo.case`` does).
``while``  ``(*cond_consts, *body_consts, *init)`` with ``cond_jaxpr``
           (``cond_consts + carry -> bool[]``), ``body_jaxpr``
           (``body_consts + carry -> carry``), ``cond_nconsts``, ``body_nconsts``.
``scan``   ``(*consts, *init, *xs)`` with ``jaxpr``
           (``consts + carry + x slices -> carry + y slices``), ``num_consts``,
           ``num_carry``, ``length``, ``reverse``, ``unroll``.  ``xs`` and the
           outputs ``ys`` have a leading axis of ``length``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import array as _array_mod
from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.eager_programs import host_program as _host_program
from ftrans.core.eager_programs import run_quietly as _run_quietly
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Var
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.keys import PRNGKeyArray, is_key_dtype
from ftrans.core.primitive import Primitive
from ftrans.core.trace import aval_of
from ftrans.errors import FtransTypeError

__all__ = [
    "cond_p", "while_p", "scan_p", "same_type", "type_str", "scan_split", "clamp_index",
    "permute_inputs", "permute_outputs", "add_unused_inputs", "join_consts", "linear_solve_p",
    "linear_solve_parts", "linear_solve_transpose_params",
]


def type_str(a: ShapedArray) -> str:
    return a.str_short() + ("{weak}" if a.weak_type else "")


def same_type(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shape and dtype (weak types may differ: they do not change the program's values)."""
    return a.shape == b.shape and a.dtype == b.dtype


def _check_closed(name: str, what: str, closed: Any) -> None:
    if not isinstance(closed, ClosedJaxpr):
        raise FtransTypeError(f"{name}: {what} must be a ClosedJaxpr, got {type(closed).__name__}")
    if closed.consts:
        raise FtransTypeError(f"{name}: {what} must close over no constants (hoist them into operands)")


def _check_inputs(name: str, what: str, closed: ClosedJaxpr, avals: Sequence[ShapedArray]) -> None:
    want = closed.in_avals
    if len(want) != len(avals) or not all(same_type(a, b) for a, b in zip(want, avals)):
        raise FtransTypeError(
            f"{name}: {what} takes ({', '.join(map(type_str, want))}) but the operands are "
            f"({', '.join(map(type_str, avals))})"
        )


def _wrap_in(vals: Sequence[Any]) -> list:
    return [v if isinstance(v, (Array, PRNGKeyArray)) else Array._new(np.asarray(v), False) for v in vals]


def _unwrap(outs: Sequence[Any], avals: Sequence[ShapedArray]) -> list:
    # a key-typed result stays a key array (an interpreted body with key-typed values: core/prims/random.py)
    return [o if is_key_dtype(a.dtype) else np.asarray(o, a.dtype) for o, a in zip(outs, avals)]


def _run(closed: ClosedJaxpr, *args: Any) -> list:
    """A body evaluated eagerly on Arrays: as a host program (``core/eager_programs.py``) when nothing needs
    to see each equation (a transform, a debug check, a device placement), else equation by equation."""
    # (host values only: a device array's operations stay on its device)
    if _trace.eager_everywhere and not _array_mod.placing and all(type(a) is Array for a in args):
        run = _host_program(closed)
        if run is not None:
            outs = _run_quietly(run, [a._value for a in args])
            return [Array._new(o if type(o) is np.ndarray else np.asarray(o), a.weak_type)
                    for o, a in zip(outs, closed.out_avals)]
    return eval_jaxpr(closed.jaxpr, list(closed.consts), *args)


# ----------------------------------------------------------------------------
# cond


cond_p = Primitive("cond", multiple_results=True, higher_order=True)


@cond_p.def_abstract_eval
def _cond_abstract_eval(index: ShapedArray, *ops: ShapedArray, branches: tuple) -> list[ShapedArray]:
    if not isinstance(branches, tuple) or not branches:
        raise FtransTypeError("cond: branches must be a non-empty tuple of ClosedJaxprs")
    if index.shape != () or not dtypes.issubdtype(index.dtype, np.integer):
        raise FtransTypeError(f"cond: the branch index must be an integer scalar, got {type_str(index)}")
    for i, b in enumerate(branches):
        _check_closed("cond", f"branch {i}", b)
    for i, b in enumerate(branches[1:], 1):
        if len(b.jaxpr.invars) != len(branches[0].jaxpr.invars):
            raise FtransTypeError(f"cond branch 0 takes {len(branches[0].jaxpr.invars)} inputs, "
                                  f"branch {i} takes {len(b.jaxpr.invars)}")
    for i, b in enumerate(branches):
        _check_inputs("cond", f"branch {i}", b, ops)
    out = branches[0].out_avals
    for i, b in enumerate(branches[1:], 1):
        o = b.out_avals
        if len(o) != len(out) or not all(same_type(x, y) for x, y in zip(o, out)):
            raise FtransTypeError(
                f"cond: branch {i} returns ({', '.join(map(type_str, o))}) but branch 0 returns "
                f"({', '.join(map(type_str, out))})"
            )
    return [ShapedArray(a.shape, a.dtype, all(b.out_avals[k].weak_type for b in branches))
            for k, a in enumerate(out)]


@cond_p.def_weak_type
def _cond_weak(weaks: tuple, *, branches: tuple) -> tuple:
    outs = branches[0].out_avals
    return tuple(all(b.out_avals[k].weak_type for b in branches) for k in range(len(outs)))


def clamp_index(i: int, n: int) -> int:
    return min(max(int(i), 0), n - 1)


@cond_p.def_impl
def _cond_impl(index: Any, *ops: Any, branches: tuple) -> list:
    b = branches[clamp_index(np.asarray(index), len(branches))]
    return _unwrap(_run(b, *_wrap_in(ops)), b.out_avals)


# ----------------------------------------------------------------------------
# while


while_p = Primitive("while", multiple_results=True, higher_order=True)


@while_p.def_abstract_eval
def _while_abstract_eval(*avals: ShapedArray, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr,
                         cond_nconsts: int, body_nconsts: int) -> list[ShapedArray]:
    _check_closed("while", "cond_jaxpr", cond_jaxpr)
    _check_closed("while", "body_jaxpr", body_jaxpr)
    cc, bc, init = (avals[:cond_nconsts], avals[cond_nconsts:cond_nconsts + body_nconsts],
                    avals[cond_nconsts + body_nconsts:])
    _check_inputs("while", "cond_jaxpr", cond_jaxpr, list(cc) + list(init))
    _check_inputs("while", "body_jaxpr", body_jaxpr, list(bc) + list(init))
    (pred,) = cond_jaxpr.out_avals if len(cond_jaxpr.out_avals) == 1 else (None,)
    if pred is None or pred.shape != () or pred.dtype != dtypes.bool_:
        raise FtransTypeError(
            "while: cond_jaxpr must return one bool scalar, got "
            f"({', '.join(map(type_str, cond_jaxpr.out_avals))})"
        )
    outs = body_jaxpr.out_avals
    if len(outs) != len(init) or not all(same_type(a, b) for a, b in zip(outs, init)):
        raise FtransTypeError(
            f"while: body_jaxpr returns ({', '.join(map(type_str, outs))}) but the carry is "
            f"({', '.join(map(type_str, init))})"
        )
    # As in JAX, the result is weakly typed only where the body's output is.
    return [ShapedArray(a.shape, a.dtype, o.weak_type) for a, o in zip(init, outs)]


@while_p.def_weak_type
def _while_weak(weaks: tuple, *, body_jaxpr: ClosedJaxpr, **_: Any) -> tuple:
    return tuple(a.weak_type for a in body_jaxpr.out_avals)


@while_p.def_impl
def _while_impl(*vals: Any, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                body_nconsts: int) -> list:
    vals = _wrap_in(vals)
    cc, bc, carry = (vals[:cond_nconsts], vals[cond_nconsts:cond_nconsts + body_nconsts],
                     vals[cond_nconsts + body_nconsts:])
    while bool(np.asarray(_run(cond_jaxpr, *cc, *carry)[0])):
        carry = _run(body_jaxpr, *bc, *carry)
    return _unwrap(carry, body_jaxpr.out_avals)


# ----------------------------------------------------------------------------
# scan


scan_p = Primitive("scan", multiple_results=True, higher_order=True)


def scan_split(seq: Sequence[Any], num_consts: int, num_carry: int) -> tuple[list, list, list]:
    """Split a scan's operands (or its body's inputs) into consts, carry and xs."""
    return list(seq[:num_consts]), list(seq[num_consts:num_consts + num_carry]), list(seq[num_consts + num_carry:])


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int,
                        reverse: bool, unroll: int) -> list[ShapedArray]:
    _check_closed("scan", "jaxpr", jaxpr)
    if not isinstance(length, int) or length < 0:
        raise FtransTypeError(f"scan: length must be a non-negative int, got {length!r}")
    consts, init, xs = scan_split(avals, num_consts, num_carry)
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise FtransTypeError(f"scan: every xs operand needs a leading axis of length {length}, got "
                                  f"{type_str(x)}")
    x_slices = [ShapedArray(x.shape[1:], x.dtype, x.weak_type) for x in xs]
    _check_inputs("scan", "jaxpr", jaxpr, consts + init + x_slices)
    outs = jaxpr.out_avals
    carry_out, y_slices = outs[:num_carry], outs[num_carry:]
    if len(carry_out) != len(init) or not all(same_type(a, b) for a, b in zip(carry_out, init)):
        raise FtransTypeError(
            f"scan: the body returns a carry of ({', '.join(map(type_str, carry_out))}) but the carry is "
            f"({', '.join(map(type_str, init))})"
        )
    return ([ShapedArray(a.shape, a.dtype, o.weak_type) for a, o in zip(init, carry_out)]
            + [ShapedArray((length,) + y.shape, y.dtype, y.weak_type) for y in y_slices])


@scan_p.def_weak_type
def _scan_weak(weaks: tuple, *, jaxpr: ClosedJaxpr, **_: Any) -> tuple:
    return tuple(a.weak_type for a in jaxpr.out_avals)


@scan_p.def_impl
def _scan_impl(*vals: Any, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
               unroll: int) -> list:
    consts, carry, xs = scan_split(_wrap_in(vals), num_consts, num_carry)
    xs_np = [np.asarray(x._value) for x in xs]
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.empty((length,) + a.shape, a.dtype) for a in y_avals]
    for step in range(length):
        i = length - 1 - step if reverse else step
        outs = _run(jaxpr, *consts, *carry, *[Array._new(x[i], False) for x in xs_np])
        carry = outs[:num_carry]
        for buf, y in zip(ys, outs[num_carry:]):
            buf[i] = np.asarray(y)
    return _unwrap(carry, jaxpr.out_avals[:num_carry]) + ys


# ----------------------------------------------------------------------------
# Rewrites of bodies shared by the rules of every transform (reordering inputs and outputs, adding unused
# inputs, moving constants to inputs, and giving several branches one common list of captured constants).
# They are plain IR surgery, so they live with the primitives: the lowering and every transform use them.


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


# ----------------------------------------------------------------------------
# Reverse mode of ``while`` (rules in transforms/ad_rules and linear_rules ``control_flow``).
#
# ``checkpointed_while``: the known half of a linearized ``while`` -- a call of a program that runs the primal
# loop and also counts its steps and keeps checkpoints of the carry in a fixed number of slots.  A plain call:
# every transform treats it as its body.
#
# ``while_lin``: the tangent half.  Its body is the forward tangent program (residuals and input tangents ->
# output tangents, replaying the loop from the first checkpoint), which is what evaluating or lowering it
# runs; its transpose is ``bwd`` (a Python function built with the body, staging the backward loop that
# recomputes each step's carry from the nearest checkpoint).  A call derived from it by another transform
# (jvp, vmap, partial evaluation) has no ``bwd`` and cannot be transposed.

from ftrans.core.prims.calls import CallPrimitive  # noqa: E402


def _while_lin_update(params: dict, rule: str, num_operands: int) -> dict:
    return {**params, "bwd": None}


checkpointed_while_p = CallPrimitive("checkpointed_while", func_name=lambda params: "checkpointed_while")
while_lin_p = CallPrimitive("while_lin", func_name=lambda params: "while_lin", update_params=_while_lin_update)


# ----------------------------------------------------------------------------
# custom_linear_solve
#
# ``custom_linear_solve``  ``(*matvec_consts, *vecmat_consts, *solve_consts, *transpose_solve_consts, *b)`` with
# ``const_lengths`` (four counts, in that order) and ``jaxprs``: ``(matvec, solve)`` or, when a transpose solve
# was given, ``(matvec, vecmat, solve, transpose_solve)``.  Each body takes its consts and a vector shaped like
# ``b``; ``solve``/``transpose_solve`` return the solution followed by any auxiliary outputs (``has_aux``), and
# so does the primitive.  Evaluating it runs ``solve``; its derivatives come from ``matvec`` (implicit
# differentiation at the solution), its transpose solves with ``transpose_solve`` against ``vecmat``.

linear_solve_p = Primitive("custom_linear_solve", multiple_results=True, higher_order=True)


def linear_solve_parts(jaxprs: tuple) -> tuple:
    """``(matvec, vecmat, solve, transpose_solve)`` from the ``jaxprs`` param (None for the absent two)."""
    if len(jaxprs) == 2:
        return jaxprs[0], None, jaxprs[1], None
    return tuple(jaxprs)


def linear_solve_transpose_params(const_lengths: tuple, jaxprs: tuple) -> tuple[tuple, tuple]:
    """The params of the transposed solve: matvec and vecmat swapped, solve and transpose_solve swapped."""
    mv, vm, sv, ts = linear_solve_parts(jaxprs)
    a, b, c, d = const_lengths
    return (b, a, d, c), (vm, mv, ts, sv)


@linear_solve_p.def_abstract_eval
def _linear_solve_abstract_eval(*avals: ShapedArray, const_lengths: tuple, jaxprs: tuple) -> list[ShapedArray]:
    if len(const_lengths) != 4 or len(jaxprs) not in (2, 4):
        raise FtransTypeError("custom_linear_solve: const_lengths must hold 4 counts and jaxprs 2 or 4 ClosedJaxprs")
    parts = linear_solve_parts(jaxprs)
    n = sum(const_lengths)
    if len(avals) < n:
        raise FtransTypeError(f"custom_linear_solve: {len(avals)} operands but const_lengths needs {n} consts")
    b = list(avals[n:])
    start = 0
    for name, body, k in zip(("matvec", "vecmat", "solve", "transpose_solve"), parts, const_lengths):
        consts = list(avals[start:start + k])
        start += k
        if body is None:
            if k:
                raise FtransTypeError(f"custom_linear_solve: {name} is absent but has {k} consts")
            continue
        _check_closed("custom_linear_solve", name, body)
        _check_inputs("custom_linear_solve", name, body, consts + b)
        outs = body.out_avals[:len(b)]
        if len(outs) != len(b) or not all(same_type(o, a) for o, a in zip(outs, b)):
            raise FtransTypeError(
                f"custom_linear_solve: {name} returns ({', '.join(map(type_str, body.out_avals))}) but b is "
                f"({', '.join(map(type_str, b))})"
            )
    aux = list(parts[2].out_avals[len(b):])
    return b + aux


@linear_solve_p.def_weak_type
def _linear_solve_weak(weaks: tuple, *, const_lengths: tuple, jaxprs: tuple) -> tuple:
    n = sum(const_lengths)
    solve = linear_solve_parts(jaxprs)[2]
    b = weaks[n:]
    return tuple(b) + tuple(a.weak_type for a in solve.out_avals[len(b):])


@linear_solve_p.def_impl
def _linear_solve_impl(*vals: Any, const_lengths: tuple, jaxprs: tuple) -> list:
    mv, vm, sv, ts = const_lengths
    solve = linear_solve_parts(jaxprs)[2]
    n = sum(const_lengths)
    args = list(vals[mv + vm:mv + vm + sv]) + list(vals[n:])
    return _unwrap(_run(solve, *_wrap_in(args)), solve.out_avals)


# Sharding in types (core/sharding_rules.py): the results have the types the bodies give them.
from ftrans.core import sharding_rules as _sr  # noqa: E402

cond_p.sharding_rule = _sr.cond
while_p.sharding_rule = _sr.while_loop
scan_p.sharding_rule = _sr.scan
