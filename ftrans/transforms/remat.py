"""``checkpoint`` / ``remat``: trade memory for recomputation in reverse mode.

``checkpoint(f)`` stages ``f`` and binds ``remat`` with the staged body.
Evaluated, lowered or differentiated forward, ``remat`` is just a call.  The
difference is in linearization: its partial-evaluation rule splits the
(JVP'd) body with a *policy* deciding which primal values of the body may be
saved for the backward pass; every other value the backward pass needs is
recomputed there from the body's inputs.  The unknown half is recorded as a
``remat`` equation whose transpose first re-runs those primal equations
(behind an ``optimization_barrier`` when ``prevent_cse``, so XLA does not
merge the recomputation with the forward pass) and then transposes the rest.

Policies have JAX's signature ``policy(prim, *avals, **params) -> bool``
("may this equation's output be saved?") and JAX's names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax import tree_util

from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, JaxprEqn
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.primitive import Primitive
from ftrans.core.prims import reductions as R
from ftrans.core.trace import StagingTracer, Tracer, aval_of, stage
from ftrans.errors import FtransTypeError
from ftrans.lowering.lower import register_lowering
from ftrans.transforms.ad import Zero, _jvp_jaxpr_hoisted, register_jvp, tangent_aval
from ftrans.transforms.partial_eval import (
    LinearizeTrace,
    _merge,
    partial_eval_jaxpr,
    partial_eval_jaxpr_rules,
    partial_eval_rules,
    split_call_eqn,
)
from ftrans.transforms.transpose import backward_pass, hoist_consts, is_undefined, register_transpose

__all__ = [
    "checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "remat_p", "name_p",
    "optimization_barrier_p", "optimization_barrier", "saved_residuals", "print_saved_residuals",
]


# ----------------------------------------------------------------------------
# name: tag a value for the name-based policies


name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: x)
name_p.def_weak_type(lambda weaks, **_: weaks[0])


@register_lowering(name_p)
def _name_lowering(ctx: Any, x: str, *, name: str) -> str:
    return x


@register_jvp(name_p)
def _name_jvp(primals: list, tangents: list, *, name: str) -> tuple[Any, Any]:
    out = name_p.bind(primals[0], name=name)
    t = tangents[0]
    return out, (t if type(t) is Zero else name_p.bind(t, name=name))


@register_transpose(name_p)
def _name_transpose(ct: Any, x: Any, *, name: str) -> list:
    return [ct]


def checkpoint_name(x: Any, name: str) -> Any:
    """Tag ``x`` (a pytree of arrays) with ``name`` for ``save_only_these_names`` and friends."""
    from ftrans.core.operands import as_operand

    return tree_util.tree_map(lambda leaf: name_p.bind(as_operand(leaf), name=name), x)


# ----------------------------------------------------------------------------
# optimization_barrier: keep XLA from merging recomputation with the forward pass


optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
optimization_barrier_p.def_impl(lambda *vals: list(vals))
optimization_barrier_p.def_weak_type(lambda weaks, **_: tuple(weaks))


@register_lowering(optimization_barrier_p)
def _barrier_lowering(ctx: Any, *args: str) -> list[str]:
    if not args:
        return []
    return ctx.emit("stablehlo.optimization_barrier", list(args))


@register_jvp(optimization_barrier_p)
def _barrier_jvp(primals: list, tangents: list) -> tuple[list, list]:
    outs = optimization_barrier_p.bind(*primals)
    nz = [t for t in tangents if type(t) is not Zero]
    t_outs = iter(optimization_barrier_p.bind(*nz)) if nz else iter(())
    return outs, [t if type(t) is Zero else next(t_outs) for t in tangents]


@register_transpose(optimization_barrier_p)
def _barrier_transpose(cts: list, *args: Any) -> list:
    return [c if is_undefined(a) else None for c, a in zip(cts, args)]


def optimization_barrier(operand: Any) -> Any:
    """JAX's ``lax.optimization_barrier``: an identity XLA may not optimize across."""
    from ftrans.core.operands import as_operand

    leaves, tree = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(tree, optimization_barrier_p.bind(*[as_operand(x) for x in leaves]))


# ----------------------------------------------------------------------------
# Policies


def _everything_saveable(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
    return True


def _nothing_saveable(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
    return False


def _dots_saveable(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
    return prim is R.dot_general_p


def _dots_with_no_batch_dims_saveable(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
    if prim is not R.dot_general_p:
        return False
    (_, _), (lb, _) = params["dimension_numbers"]
    return not lb


def _save_anything_except_these_names(*names: str) -> Callable:
    excluded = frozenset(names)

    def policy(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
        return not (prim is name_p and params["name"] in excluded)

    return policy


def _save_any_names_but_these(*names: str) -> Callable:
    excluded = frozenset(names)

    def policy(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
        return prim is name_p and params["name"] not in excluded

    return policy


def _save_only_these_names(*names: str) -> Callable:
    included = frozenset(names)

    def policy(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
        return prim is name_p and params["name"] in included

    return policy


class checkpoint_policies:  # noqa: N801 - JAX's name
    """The remat policies under JAX's names (``jax.checkpoint_policies``)."""

    everything_saveable = staticmethod(_everything_saveable)
    nothing_saveable = staticmethod(_nothing_saveable)
    dots_saveable = staticmethod(_dots_saveable)
    checkpoint_dots = staticmethod(_dots_saveable)
    dots_with_no_batch_dims_saveable = staticmethod(_dots_with_no_batch_dims_saveable)
    checkpoint_dots_with_no_batch_dims = staticmethod(_dots_with_no_batch_dims_saveable)
    save_anything_except_these_names = staticmethod(_save_anything_except_these_names)
    save_any_names_but_these = staticmethod(_save_any_names_but_these)
    save_only_these_names = staticmethod(_save_only_these_names)


def _saveable(policy: Callable | None) -> Callable[[JaxprEqn], bool]:
    policy = policy or _nothing_saveable

    def saveable(eqn: JaxprEqn) -> bool:
        return bool(policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params))

    return saveable


# ----------------------------------------------------------------------------
# The remat primitive


remat_p = Primitive("remat", multiple_results=True, higher_order=True)


@remat_p.def_abstract_eval
def _remat_abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, **_: Any) -> list[ShapedArray]:
    return list(jaxpr.out_avals)


@remat_p.def_weak_type
def _remat_weak(weaks: tuple, *, jaxpr: ClosedJaxpr, **_: Any) -> tuple:
    return tuple(a.weak_type for a in jaxpr.out_avals)


@remat_p.def_impl
def _remat_impl(*vals: Any, jaxpr: ClosedJaxpr, **_: Any) -> list:
    outs = eval_jaxpr(jaxpr.jaxpr, list(jaxpr.consts), *[Array._new(np.asarray(v), False) for v in vals])
    return [np.asarray(o) for o in outs]


@register_lowering(remat_p)
def _remat_lowering(ctx: Any, *args: str, jaxpr: ClosedJaxpr, **_: Any) -> list[str]:
    from ftrans.lowering import mlir_text as mt

    sym = ctx.module.function(jaxpr.jaxpr, "checkpoint")
    return ctx.emit("func.call", list(args), [mt.aval_type(a) for a in ctx.avals_out], {"callee": f"@{sym}"})


@register_jvp(remat_p)
def _remat_jvp(primals: list, tangents: list, *, jaxpr: ClosedJaxpr, **params: Any) -> tuple[list, list]:
    nonzeros = [type(t) is not Zero for t in tangents]
    (body, consts), out_nz = _jvp_jaxpr_hoisted(jaxpr, nonzeros)
    nz = [t for t in tangents if type(t) is not Zero]
    outs = remat_p.bind(*consts, *primals, *nz, jaxpr=body, **params)
    n = len(jaxpr.out_avals)
    rest = iter(outs[n:])
    return list(outs[:n]), [next(rest) if z else Zero(tangent_aval(a)) for a, z in zip(jaxpr.out_avals, out_nz)]


def _remat_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    """Run the known half now; record the unknown half, which recomputes what the policy did not save."""
    body = params["jaxpr"]
    knowns = [trace.known_value(t) for t in tracers]
    unknowns = [not k for k, _ in knowns]
    known_j, unknown_j, out_unknowns, n_res = partial_eval_jaxpr(body, unknowns, _saveable(params["policy"]))
    outs = eval_jaxpr(known_j.jaxpr, list(known_j.consts), *[v for k, v in knowns if k])
    n_known_out = len(outs) - n_res
    known_outs, res = outs[:n_known_out], outs[n_known_out:]
    ops = [trace.full_raise(r) for r in res] + [t for t, u in zip(tracers, unknowns) if u]
    unknown_outs = trace.record(remat_p, ops, dict(params, jaxpr=unknown_j, differentiated=True))
    return _merge(out_unknowns, known_outs, unknown_outs)


partial_eval_rules[remat_p] = _remat_partial_eval


def _remat_split(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    return split_call_eqn(eqn, unk_in, _saveable(eqn.params["policy"]), lambda n: {},
                          lambda n: {"differentiated": True})


partial_eval_jaxpr_rules[remat_p] = _remat_split


@register_transpose(remat_p)
def _remat_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, prevent_cse: bool, **_: Any) -> list:
    """Recompute the body's primal values from the residuals, then transpose its linear part."""
    linear = [is_undefined(a) for a in args]
    res = [a for a in args if not is_undefined(a)]
    if prevent_cse and res:
        res = optimization_barrier_p.bind(*res)
    it = iter(res)
    full = [a if lin else next(it) for a, lin in zip(args, linear)]
    out = backward_pass(jaxpr.jaxpr, list(jaxpr.consts), full, cts)
    return [o if lin else None for o, lin in zip(out, linear)]


# ----------------------------------------------------------------------------
# The API


def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """JAX's ``checkpoint``: ``fun``'s intermediate values are recomputed in the backward pass instead of
    saved, except those ``policy`` allows saving."""
    if not callable(fun):
        raise FtransTypeError(f"checkpoint: expected a function, got {type(fun).__name__}")
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    name = getattr(fun, "__name__", "fun")

    @functools.wraps(fun)
    def remat_f(*args: Any, **kwargs: Any) -> Any:
        if not _trace.active_anywhere or _trace.state.eval_only:
            return fun(*args, **kwargs)
        n = len(args)
        stat = {i % n for i in statics} if n else set()
        dyn = [a for i, a in enumerate(args) if i not in stat]
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        from ftrans.core.operands import as_operand

        try:
            leaves = [x if isinstance(x, (Array, Tracer)) else as_operand(x) for x in leaves]
        except TypeError:
            raise FtransTypeError(
                f"checkpoint({name}): every non-static argument must be an array or a pytree of arrays; "
                "mark other arguments with static_argnums"
            ) from None
        out_tree_box: list = []

        def flat_fun(*ins: Any) -> list:
            d, kw = tree_util.tree_unflatten(in_tree, ins)
            it = iter(d)
            full = [args[i] if i in stat else next(it) for i in range(n)]
            out, tree = tree_util.tree_flatten(fun(*full, **kw))
            out_tree_box.append(tree)
            return out

        closed, _ = stage(flat_fun, [aval_of(x) for x in leaves])
        body, consts = hoist_consts(closed)
        outs = remat_p.bind(*consts, *leaves, jaxpr=body, prevent_cse=prevent_cse, differentiated=False,
                            policy=policy)
        return tree_util.tree_unflatten(out_tree_box[0], outs)

    return remat_f


remat = checkpoint


def saved_residuals(fun: Callable, *args: Any, **kwargs: Any) -> list[tuple[ShapedArray, str]]:
    """What reverse mode of ``fun`` at ``args`` keeps for the backward pass: (type, where it came from) each."""
    from ftrans.transforms.partial_eval import linearize_flat

    leaves_paths, in_tree = tree_util.tree_flatten_with_path((args, kwargs))
    from ftrans.core.operands import as_operand

    leaves = [as_operand(x) for _, x in leaves_paths]
    box: list = []

    def staged(*ins: Any) -> list:
        def flat(*xs: Any) -> tuple[list, None]:
            a, kw = tree_util.tree_unflatten(in_tree, xs)
            return tree_util.tree_leaves(fun(*a, **kw)), None

        outs, lin, *_ = linearize_flat(flat, list(ins))
        box.append(lin)
        return outs

    closed, _ = stage(staged, [aval_of(x) for x in leaves])
    lin = box[0]
    arg_names = {id(v): "from the argument " + ("args" + tree_util.keystr(p)) for v, (p, _) in
                 zip(closed.jaxpr.invars, leaves_paths)}
    producers = {}
    for eqn in closed.jaxpr.eqns:
        for v in eqn.outvars:
            producers[id(v)] = eqn
    out = []
    for c in lin.consts:
        aval = aval_of(c)
        if isinstance(c, StagingTracer):
            k = id(c.atom)
            if k in arg_names:
                out.append((aval, arg_names[k]))
                continue
            eqn = producers.get(k)
            if eqn is not None:
                src = f" from {eqn.source_info}" if eqn.source_info else ""
                out.append((aval, f"output of {eqn.primitive.name}{src}"))
                continue
        out.append((aval, "a constant"))
    return out


def print_saved_residuals(fun: Callable, *args: Any, **kwargs: Any) -> None:
    """``jax.ad_checkpoint.print_saved_residuals``: one line per saved residual."""
    for aval, what in saved_residuals(fun, *args, **kwargs):
        print(f"{aval.str_short()} {what}")

