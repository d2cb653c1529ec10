"""Transpose rules of the call-like primitives (``ftrans/core/prims/calls.py``).

The generic rule transposes the body once (``transpose_jaxpr``) and binds one
new call of the same primitive on the residuals and the non-zero output
cotangents, so the backward pass of a jitted function is itself one compiled
call.  ``remat`` differs: its backward pass must recompute the primal values
the forward pass did not save, visibly and (with ``prevent_cse``) behind an
optimization barrier, so its transposed body is evaluated in place.  The
``custom_vjp`` calls are never transposed: their linear part is a
``custom_lin``, whose transpose is the user's backward function; a ``custom_jvp``
call met on tangents (its rule applied the function to them) is transposed
through its body.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from ftrans.core.axis_env import axis_env as _axis_env
from ftrans.core.ir import EMPTY_NAME_STACK, ClosedJaxpr, Jaxpr
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import calls as C
from ftrans.core.ref import read_for_thread, write_back
from ftrans.core.trace import Tracer, names_as
from ftrans.transforms.ad import Zero, zeros_like_aval
from ftrans.transforms.partial_eval import partial_eval_jaxpr
from ftrans.transforms.transpose import (
    backward_pass,
    is_undefined,
    register_transpose,
    takes_given_scalars,
    transpose_jaxpr_threading,
    transpose_rules,
)


def _call_transpose(prim: C.CallPrimitive) -> Callable:
    def rule(cts: list, *args: Any, **params: Any) -> list:
        linear = [is_undefined(a) for a in args]
        nonzero = [type(c) is not Zero for c in cts]
        with prim.body_env(params):
            transposed, refs = transpose_jaxpr_threading(prim.body(params), linear, nonzero)
            body, consts = C.hoist_consts(transposed)
        # Refs a custom_vjp backward function writes into are threaded through the call (their values in
        # after the cotangents, their final values out after the input cotangents) and written back here.
        ops = [*consts, *[a for a in args if not is_undefined(a)], *[c for c in cts if type(c) is not Zero],
               *[read_for_thread(r) for r in refs]]
        ins = ["const"] * len(consts) + [("in", i) for i, lin in enumerate(linear) if not lin] + \
            [("out", j) for j, nz in enumerate(nonzero) if nz] + ["const"] * len(refs)
        outs_from = [("in", i) for i, lin in enumerate(linear) if lin] + ["const"] * len(refs)
        if _axis_env.frames:  # a body reading a vmap's named axis reaches that vmap (as jit)
            from ftrans.transforms.batching import to_axis_owner

            ops = to_axis_owner([body], ops)
        got = prim.bind(*ops, **prim.with_body(params, body, "transpose", len(ops), ins, outs_from))
        n_ct = len(got) - len(refs)
        for r, v in zip(refs, got[n_ct:]):
            write_back(r, v)
        outs = iter(got[:n_ct])
        return [next(outs) if lin else None for lin in linear]

    rule.__name__ = f"{prim.name}_transpose"
    return rule


def _install(prim: C.CallPrimitive) -> None:
    if (prim, "transpose") not in _UNSUPPORTED:
        transpose_rules.setdefault(prim, _call_transpose(prim))


# body -> {linear mask: (primal half, linear half, output mask, residual count)}
_remat_split_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _split_primal_linear(jaxpr: ClosedJaxpr, linear: list[bool]) -> tuple:
    key = tuple(linear)
    per = _remat_split_cache.get(jaxpr)
    if per is not None and key in per:
        return per[key]
    primal, *rest = partial_eval_jaxpr(jaxpr, linear)
    split = (_in_scope(primal, _REMAT_SCOPE), *rest)
    if not any(isinstance(c, Tracer) for c in jaxpr.consts):
        _remat_split_cache.setdefault(jaxpr, {})[key] = split
    return split


# The name scope the backward pass's recomputation runs in (JAX's): profiles and the StableHLO locations
# tell recomputed operations from the forward pass's.
_REMAT_SCOPE = "rematted_computation"


def _in_scope(closed: ClosedJaxpr, scope: str) -> ClosedJaxpr:
    """``closed`` with ``scope`` put in front of the name stack of each of its equations (those without a
    source line keep none)."""
    j = closed.jaxpr
    eqns = [e if e.source_info is None else e.replace(source_info=e.source_info._replace(
        name_stack=scope + e.source_info.name_stack)) for e in j.eqns]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)


@register_transpose(C.remat_p)
def _remat_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, prevent_cse: bool, **_: Any) -> list:
    """Recompute the body's primal values from the residuals, then transpose its linear part.

    The body is split by linearity first (partial evaluation with the linear inputs unknown, as JAX's
    checkpoint transpose does): an equation mixing both (a scan recomputing a known carry beside its
    tangents, a call that also returns primal values) contributes its primal half to the recomputation and
    only its linear half to the transposition.
    """
    linear = [is_undefined(a) for a in args]
    res = [a for a in args if not is_undefined(a)]
    if prevent_cse and res:
        res = C.optimization_barrier_p.bind(*res)
    primal, lin_j, out_unk, n_res = _split_primal_linear(jaxpr, linear)
    # The recomputation is the checkpointed body run again, not part of the transposition: its equations
    # keep the body's names (``rematted_computation/...``, as in JAX's remat body).
    with names_as(EMPTY_NAME_STACK):
        residuals = eval_jaxpr(primal.jaxpr, list(primal.consts), *res)
    residuals = list(residuals[len(residuals) - n_res:]) if n_res else []
    lin_args = residuals + [a for a in args if is_undefined(a)]
    out = backward_pass(lin_j.jaxpr, list(lin_j.consts), lin_args, [c for c, u in zip(cts, out_unk) if u])
    it = iter(out[n_res:])
    return [next(it) if lin else None for lin in linear]


@register_transpose(C.custom_jvp_call_p)
def _custom_jvp_call_transpose(cts: list, *args: Any, call_jaxpr: ClosedJaxpr, **_: Any) -> list:
    """A ``custom_jvp`` function applied to a tangent (its JVP rule may call it on ``xdot``, as a linear
    function's rule does) is transposed through its own body, as JAX does: on linear inputs it is linear."""
    out = backward_pass(call_jaxpr.jaxpr, list(call_jaxpr.consts), list(args), cts)
    return [o if is_undefined(a) else None for o, a in zip(out, args)]


_UNSUPPORTED = set()
for _p in (C.custom_vjp_call_p,):
    mark_unsupported(_p, "transpose", "a custom-derivative call is not linear; its derivative comes from the "
                                      "user's rule")
    _UNSUPPORTED.add((_p, "transpose"))

C.for_each_call_primitive(_install)


@register_transpose(C.custom_lin_p)
def _custom_lin_transpose(cts: list, *args: Any, num_res: int, bwd: Callable, out_avals: tuple, in_avals: tuple,
                          nonzero: tuple, name: str, symbolic_zeros: bool = False) -> list:
    """The user's backward function, on the residuals and the output cotangents."""
    res = list(args[:num_res])
    if any(is_undefined(r) for r in res):
        raise NotImplementedError(f"custom_vjp function {name}: its residuals cannot depend on a tangent")
    in_cts = bwd(res, list(cts))  # (the backward function instantiates zero cotangents unless it wants them symbolic)
    out: list = [None] * num_res
    for c, nz in zip(in_cts, nonzero):
        if nz:
            out.append(None if type(c) is Zero else c)
    return out


takes_given_scalars.add(C.custom_lin_p)  # the user's bwd sees a Python scalar cotangent as given, as in JAX


@register_transpose(C.name_p)
def _name_transpose(ct: Any, x: Any, *, name: str) -> list:
    return [ct]


@register_transpose(C.linear_call_p)
def _linear_call_transpose(cts: list, *args: Any, callee: ClosedJaxpr, transpose_thunk: Callable,
                           num_callee_consts: int, num_res: int) -> list:
    # a call of the user's transpose function on the residuals and the cotangents, whose own transpose is
    # the callee again (JAX's rule)
    lin = args[num_callee_consts + num_res:]
    if any(is_undefined(a) for a in args[:num_callee_consts + num_res]) or not all(map(is_undefined, lin)):
        raise NotImplementedError(
            "transpose of linear_call with respect to its residual arguments: it is linear in its linear "
            "arguments only")
    t_jaxpr, t_consts = transpose_thunk()
    f_consts, res = list(args[:num_callee_consts]), list(args[num_callee_consts:num_callee_consts + num_res])
    ct_avals = t_jaxpr.in_avals[len(t_consts) + num_res:]
    cts = [zeros_like_aval(a) if type(c) is Zero else c for c, a in zip(cts, ct_avals)]

    def back() -> tuple:
        return callee, f_consts

    outs = C.linear_call_p.bind(*t_consts, *res, *cts, callee=t_jaxpr, transpose_thunk=back,
                                num_callee_consts=len(t_consts), num_res=num_res)
    return [None] * (num_callee_consts + num_res) + list(outs)


@register_transpose(C.xla_metadata_value_p)
def _xla_metadata_value_transpose(ct: Any, x: Any, *, xla_metadata_kvs: tuple) -> list:
    return [ct]  # the cotangent is not tagged (JAX's rule)


@register_transpose(C.optimization_barrier_p)
def _barrier_transpose(cts: list, *args: Any) -> list:
    return [c if is_undefined(a) else None for c, a in zip(cts, args)]


@register_transpose(C.composite_p)
def _composite_transpose(cts: list, *args: Any, name: str, **_: Any) -> list:
    from ftrans.errors import FtransValueError

    raise FtransValueError(
        "Transpose rule for composite not implemented. You can use `jax.custom_jvp` or `jax.custom_vjp` to add "
        f"support. See https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html (composite {name!r}: "
        "wrap it in ftrans.custom_jvp or ftrans.custom_vjp)")
