"""Transposition of linear programs: the second half of reverse mode.

Reverse mode is ``linearize`` (``partial_eval.py``: the JVP with the tangents
staged into a linear jaxpr) followed by this module's ``backward_pass``, which
walks that jaxpr from its outputs to its inputs applying each primitive's
transpose rule.  Only primitives that are linear in some operand have a rule;
nothing here is a hand-written VJP.

A rule is ``rule(ct, *operands, **params) -> cotangents``: ``ct`` is the
cotangent of the output (a list for ``multiple_results`` primitives, where an
entry may be a symbolic ``Zero``); each operand is either a value (a
non-linear operand: an array, or a tracer of an enclosing transform) or an
``UndefinedPrimal`` standing for a linear operand whose value the rule must
not need.  The rule returns one entry per operand: the cotangent of a linear
operand, or ``None`` (no contribution, or not linear).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import sharding_rules as _sharding_rules
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal
from ftrans.core.primitive import Primitive, not_supported, rule_table
from ftrans.core.trace import Tracer, in_current_names, source_info_as, stage
from ftrans.transforms.ad import Zero, add_tangents, instantiate, is_python_scalar, tangent_aval

__all__ = [
    "UndefinedPrimal", "is_undefined", "takes_given_scalars", "transpose_rules", "register_transpose", "backward_pass",
    "transpose_jaxpr", "transpose_jaxpr_threading", "stage_threading_refs",
]

transpose_rules: dict[Primitive, Callable[..., Any]] = rule_table("transpose", owner=__name__)


class UndefinedPrimal:
    """A linear operand during transposition: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval.str_short()})"


# Primitives whose transpose rule takes a cotangent the user gave as a Python scalar as is (``custom_lin``:
# the user's ``bwd`` receives it as given, as in JAX); every other rule gets it as an array.
takes_given_scalars: set[Primitive] = set()


def _as_array(ct: Any) -> Any:
    if is_python_scalar(ct):
        from ftrans.core.operands import as_operand

        return as_operand(ct)
    return ct


def is_undefined(x: Any) -> bool:
    return type(x) is UndefinedPrimal


def register_transpose(prim: Primitive) -> Callable[[Callable], Callable]:
    def deco(rule: Callable) -> Callable:
        transpose_rules[prim] = rule
        return rule

    return deco


def _rule_for(prim: Primitive) -> Callable:
    rule = transpose_rules.get(prim)
    if rule is None:
        reason = not_supported.get((prim, "transpose"))
        raise NotImplementedError(
            f"Transpose rule (for reverse-mode differentiation) for '{prim.name}' not implemented: "
            f"reverse-mode differentiation met `{prim.name}` applied to a linear (tangent) value, but "
            f"`{prim.name}` has no transpose rule" + (f": {reason}" if reason else "")
        )
    return rule


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], cts_out: Sequence[Any]) -> list:
    """Cotangents of the linear inputs of ``jaxpr``, given its outputs' cotangents.

    ``args`` holds a value for each non-linear input and an ``UndefinedPrimal``
    for each linear one.  Equations that read no linear value are evaluated
    forward first (a remat body recomputes its primal values this way); the
    others are transposed in reverse order.  Returns one entry per input: the
    cotangent (possibly ``Zero``) of a linear input, ``None`` for the others.
    Binding each rule's primitives makes this work eagerly and under staging.
    """
    env: dict[int, Any] = {}
    linear: set[int] = set()
    for v, c in zip(jaxpr.constvars, consts):
        env[id(v)] = c
    for v, a in zip(jaxpr.invars, args):
        if is_undefined(a):
            linear.add(id(v))
        else:
            env[id(v)] = a

    def read(a: Any) -> Any:
        if isinstance(a, Literal):
            return Array._new(np.asarray(a.val, a.aval.dtype), a.aval.weak_type)
        return env[id(a)]

    lin_eqns = []
    for eqn in jaxpr.eqns:
        if any(not isinstance(a, Literal) and id(a) in linear for a in eqn.invars):
            lin_eqns.append(eqn)
            for v in eqn.outvars:
                linear.add(id(v))
            continue
        # A forward equation run again (a remat body's recomputation) keeps its own names; only the
        # transposed equations below take the transposition's (``transpose(jvp(foo))``).
        with source_info_as(eqn.source_info):
            outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[id(v)] = o

    cts: dict[int, Any] = {}

    def write(v: Any, ct: Any) -> None:
        if ct is None or type(ct) is Zero or isinstance(v, Literal) or id(v) not in linear:
            return
        k = id(v)
        cts[k] = add_tangents(_as_array(cts[k]), _as_array(ct)) if k in cts else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        sh = getattr(v.aval, "typed_sharding", None)
        if sh is not None and (sh.spec.unreduced or sh.spec.reduced) and not isinstance(v, Literal):
            ct = _retyped(ct, v.aval)  # a seed (``1.0`` of grad) cast to the cotangent type, as JAX's
        write(v, ct)

    for eqn in reversed(lin_eqns):
        prim = eqn.primitive
        if prim.multiple_results:
            ct_out = [cts.pop(id(v), None) for v in eqn.outvars]
            if all(c is None for c in ct_out):
                continue
            ct_arg: Any = [Zero(ct_aval(v.aval)) if c is None else c for v, c in zip(eqn.outvars, ct_out)]
        else:
            ct_arg = cts.pop(id(eqn.outvars[0]), None)
            if ct_arg is None:
                continue
        if prim not in takes_given_scalars:
            ct_arg = [_as_array(c) for c in ct_arg] if prim.multiple_results else _as_array(ct_arg)
        invals = [UndefinedPrimal(a.aval) if not isinstance(a, Literal) and id(a) in linear else read(a)
                  for a in eqn.invars]
        typed = any(a.aval.typed_sharding is not None for a in eqn.invars) or any(
            getattr(getattr(c, "aval", None), "typed_sharding", None) is not None
            for c in (ct_arg if prim.multiple_results else (ct_arg,)))
        with source_info_as(in_current_names(eqn.source_info)):
            if typed:  # sharding in types: each cotangent gets its primal's type (JAX's rules pass out_sharding)
                with _sharding_rules.lenient():
                    ct_in = _rule_for(prim)(ct_arg, *invals, **eqn.params)
                ct_in = [_retyped(c, a.aval) for a, c in zip(eqn.invars, ct_in)]
            else:
                ct_in = _rule_for(prim)(ct_arg, *invals, **eqn.params)
        for a, c in zip(eqn.invars, ct_in):
            write(a, c)

    return [(cts.get(id(v), Zero(ct_aval(v.aval))) if id(v) in linear else None) for v in jaxpr.invars]


def _retyped(ct: Any, aval: Any) -> Any:
    """A cotangent constrained to its primal's sharding type (when it has one and the cotangent differs): JAX's
    cotangent type, the primal's with unreduced and reduced axes swapped (a value replicated as reduced over
    ``x`` has a cotangent of partial sums over ``x``, and the reverse)."""
    sh = aval.typed_sharding
    if sh is None or ct is None or type(ct) is Zero or not hasattr(ct, "aval"):
        return ct
    if sh.spec.unreduced or sh.spec.reduced:
        sh = sh.update(spec=sh.spec.to_ct_spec())
    have = ct.aval.typed_sharding
    if have is not None and have.spec == sh.spec:
        return ct
    from ftrans.core.prims.sharding import sharding_constraint_p

    return sharding_constraint_p.bind(ct, sharding=sh)


# ----------------------------------------------------------------------------
# Transposing a whole jaxpr (the call-like primitives' rule, linear_transpose)


_transposed_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def stage_threading_refs(fun: Callable[..., list], in_avals: Sequence[ShapedArray], what: str) -> tuple:
    """Stage ``fun`` (flat lists in and out) as a backward pass that may write into mutable refs.

    A ``custom_vjp`` backward function may write into a ref it saved (gradient-statistics plumbing), and
    it runs when the backward pass is traced: that write is discharged here as the forward staging
    discharges its own (``ftrans/core/ref.py``).  Each ref the pass touches is threaded: the jaxpr takes
    its value after ``in_avals`` and returns its final value after ``fun``'s outputs.  Returns ``(closed
    jaxpr, consts, refs)``; the caller binds the refs' values (``read_for_thread``) and writes the final
    values back (``write_back``).
    """
    from ftrans.core import ref as R

    if not R.created:
        closed, consts = stage(fun, list(in_avals))
        return closed, consts, []
    owner = object()
    refs: list = []
    n = len(in_avals)
    while True:
        def flat(*a: Any) -> list:
            out, finals = R.run_scoped(lambda: fun(*a[:n]), refs, a[n:], owner, what)
            return list(out) + list(finals)

        try:
            closed, consts = stage(flat, list(in_avals) + [r._aval for r in refs])
        except R.NeedsRef as e:
            if e.owner is not owner:
                raise
            refs.append(e.ref)
            continue
        return closed, consts, refs


def transpose_jaxpr_threading(closed: ClosedJaxpr, linear: Sequence[bool],
                              ct_nonzero: Sequence[bool]) -> tuple[ClosedJaxpr, list]:
    """``transpose_jaxpr``, with the refs the backward pass writes into threaded (``stage_threading_refs``):
    the jaxpr takes their values after the cotangents and returns their final values after the input
    cotangents.  Returns the jaxpr and the refs."""
    key = (tuple(linear), tuple(ct_nonzero))
    per = _transposed_cache.get(closed)
    if per is not None and key in per:
        return per[key], []
    return _transpose_jaxpr(closed, linear, ct_nonzero, key)


def transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool], ct_nonzero: Sequence[bool]) -> ClosedJaxpr:
    """A jaxpr ``(non-linear inputs, non-zero output cotangents) -> cotangents of the linear inputs``.

    The cotangents come out instantiated (zeros where nothing flowed), one per
    linear input, in order.  Cached per (jaxpr, masks) unless constants are tracers.
    """
    key = (tuple(linear), tuple(ct_nonzero))
    per = _transposed_cache.get(closed)
    if per is not None and key in per:
        return per[key]
    new, refs = _transpose_jaxpr(closed, linear, ct_nonzero, key)
    if refs:
        from ftrans.errors import FtransValueError

        raise FtransValueError(
            f"a custom_vjp backward function writes into the mutable array reference {refs[0].aval.str_short()} "
            f"(created at {refs[0]._origin}) from inside a staged function whose backward pass cannot thread "
            "refs (a cond branch): pass the values out instead, or differentiate inside that function")
    return new


def ct_aval(aval: ShapedArray) -> ShapedArray:
    """The abstract value of a cotangent of ``aval``: its tangent's, with JAX's unreduced and reduced mesh axes
    swapped (a value replicated as reduced has a cotangent of partial sums, and the reverse)."""
    t = tangent_aval(aval)
    sh = t.typed_sharding
    if sh is None and (getattr(t, "unreduced", None) or getattr(t, "reduced", None)):  # in a shard_map body
        from ftrans.core.avals import VaryingAval

        return VaryingAval(t, t.vma, t.reduced, t.unreduced)
    if sh is None or not (sh.spec.unreduced or sh.spec.reduced):
        return t
    from ftrans.core.sharding_rules import typed

    return typed(t, sh.mesh, sh.spec.to_ct_spec())


def _transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool], ct_nonzero: Sequence[bool],
                     key: tuple) -> tuple[ClosedJaxpr, list]:
    in_avals = closed.in_avals
    res_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    ct_avals = [ct_aval(a) for a, nz in zip(closed.out_avals, ct_nonzero) if nz]
    n_res = len(res_avals)

    def fun(*ins: Any) -> list:
        res, nz_cts = iter(ins[:n_res]), iter(ins[n_res:])
        args = [UndefinedPrimal(tangent_aval(a)) if lin else next(res) for a, lin in zip(in_avals, linear)]
        cts = [next(nz_cts) if nz else Zero(ct_aval(a)) for a, nz in zip(closed.out_avals, ct_nonzero)]
        out = backward_pass(closed.jaxpr, closed.consts, args, cts)
        return [instantiate(c) for c, lin in zip(out, linear) if lin]

    new, consts, refs = stage_threading_refs(fun, res_avals + ct_avals, "a backward pass")
    if not refs and not any(isinstance(c, Tracer) for c in consts):
        _transposed_cache.setdefault(closed, {})[key] = new
    return new, refs


# The rules for every primitive family register themselves on import.
from ftrans.transforms import linear_rules  # noqa: E402, F401
