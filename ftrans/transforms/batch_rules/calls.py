"""Batching rules of the call-like primitives (``ftrans/core/prims/calls.py``), ``name`` and
``optimization_barrier``.

One generic rule serves every call primitive: the body is batched once
(``batch_jaxpr``) and one new call of the same primitive is bound (with the
primitive's ``update_params``), so ``vmap(jit(f))`` is still one compiled call.  The custom-derivative calls also
wrap the user's rules so that they run batched when the call is later
differentiated (``grad(vmap(f))``): the batched outputs are put at dimension 0,
and a custom VJP's cotangents for unbatched arguments are summed over the batch.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import calls as C
from ftrans.core.prims import reductions as R
from ftrans.core.prims.calls import (
    custom_jvp_call_p,
    custom_lin_p,
    custom_vjp_call_p,
    custom_vmap_call_p,
    hoist_consts,
    name_p,
    optimization_barrier_p,
    xla_metadata_value_p,
)
from ftrans.core.trace import Tracer, aval_of
from ftrans.transforms.ad import Zero, tangent_aval
from ftrans.transforms.batching import (
    batch_jaxpr,
    batching_rules,
    moveaxis,
    not_mapped,
    register_batching,
    run_batched,
)

# body -> {(dims, size, force_front): batched}: batching the same call again along an unnamed axis (``jacrev``
# or ``vmap`` of a jitted function, called in a loop) gives the very same body, whose executable is then found
# instead of being lowered again.  A named axis (or one inside pmap/shard_map) is batched afresh: collectives
# in the body may refer to it.
_batched: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _batched_body(jaxpr: Any, dims: list, axis: Any, force_front: bool = False) -> tuple[Any, list, list]:
    from ftrans.core.axis_env import axis_env

    key = None
    if axis.name is None and axis.spmd_name is None and not any(f.name is not None for f in axis_env.frames):
        key = (tuple(dims), axis.size, force_front)
        per = _batched.get(jaxpr)
        if per is not None and key in per:
            return per[key]
    new, out_dims = batch_jaxpr(jaxpr, dims, axis, force_front)
    body, consts = hoist_consts(new)
    got = (body, consts, out_dims)
    if key is not None and not any(isinstance(c, Tracer) for c in consts) and \
            not any(isinstance(c, Tracer) for c in jaxpr.consts):
        _batched.setdefault(jaxpr, {})[key] = got
    return got


def _call_batch(prim: C.CallPrimitive) -> Callable:
    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
        body, consts, out_dims = _batched_body(prim.body(params), dims, frame)
        ops = [*consts, *vals]
        return prim.bind(*ops, **prim.with_body(params, body, "batch", len(ops))), out_dims

    rule.__name__ = f"{prim.name}_batch"
    return rule


@register_batching(name_p)
def _name_batch(vals: list, dims: list, *, frame: Any, name: str) -> tuple[Any, Any]:
    return name_p.bind(vals[0], name=name), dims[0]


@register_batching(xla_metadata_value_p)
def _xla_metadata_value_batch(vals: list, dims: list, *, frame: Any, xla_metadata_kvs: tuple) -> tuple[Any, Any]:
    return xla_metadata_value_p.bind(vals[0], xla_metadata_kvs=xla_metadata_kvs), dims[0]


@register_batching(optimization_barrier_p)
def _barrier_batch(vals: list, dims: list, *, frame: Any) -> tuple[list, list]:
    return optimization_barrier_p.bind(*vals), list(dims)


def _invariant_body(call_jaxpr: Any, dims: list, frame: Any) -> tuple[Any, list, list] | None:
    """The batched body when no operand is batched (the body reads the named axis, ``psum``) and no result
    comes out batched either: the call's results then stay unbatched, as JAX's (``out_axes=None`` works)."""
    if any(d is not not_mapped for d in dims):
        return None
    got = _batched_body(call_jaxpr, dims, frame)
    return got if all(d is not_mapped for d in got[2]) else None


def _run_unbatched(fun: Callable, args: list, frame: Any) -> tuple[list, list]:
    """A custom rule of a call whose results are unbatched, run under its ``vmap`` on unbatched values."""
    return run_batched(fun, args, [not_mapped] * len(args), frame, reuse=True, lift_unmapped=frame.name is not None)


@register_batching(custom_jvp_call_p)
def _custom_jvp_call_batch(vals: list, dims: list, *, frame: Any, call_jaxpr: Any, jvp: Callable, num_consts: int,
                           **params: Any) -> tuple[list, list]:
    invariant = _invariant_body(call_jaxpr, dims, frame)
    if invariant is not None:
        body, consts, out_dims = invariant
        n_new = len(consts)

        def invariant_jvp(primals: list, tangents: list) -> tuple[list, list]:
            primals, tangents = primals[n_new:], tangents[n_new:]
            n = len(primals)
            outs, odims = _run_unbatched(lambda *xs: _concat(jvp(list(xs[:n]), list(xs[n:]))), primals + tangents,
                                         frame)
            if any(d is not not_mapped for d in odims):
                raise NotImplementedError(
                    f"custom_jvp under vmap(axis_name={frame.name!r}): the function's results do not vary along "
                    "the axis but its jvp rule's do; make the rule's results invariant too (a psum, as the "
                    "function's)")
            half = len(outs) // 2
            return outs[:half], outs[half:]

        invariant_jvp.__name__ = getattr(jvp, "__name__", "jvp")
        outs = custom_jvp_call_p.bind(*consts, *vals, call_jaxpr=body, jvp=invariant_jvp,
                                      num_consts=n_new + num_consts, **params)
        return outs, out_dims
    body, consts, out_dims = _batched_body(call_jaxpr, dims, frame, force_front=True)
    n_new = len(consts)

    def batched_jvp(primals: list, tangents: list) -> tuple[list, list]:
        primals, tangents = primals[n_new:], tangents[n_new:]
        n = len(primals)
        outs, _ = run_batched(lambda *xs: _concat(jvp(list(xs[:n]), list(xs[n:]))), primals + tangents,
                              list(dims) + list(dims), frame, force_front=True, reuse=True)
        half = len(outs) // 2
        return outs[:half], outs[half:]

    batched_jvp.__name__ = getattr(jvp, "__name__", "jvp")
    outs = custom_jvp_call_p.bind(*consts, *vals, call_jaxpr=body, jvp=batched_jvp, num_consts=n_new + num_consts,
                                  **params)
    return outs, out_dims


def _concat(pair: tuple[list, list]) -> list:
    return list(pair[0]) + list(pair[1])


def _invariant_vjp_call(vals: list, frame: Any, body: Any, consts: list, out_dims: list, fwd: Callable,
                        bwd: Callable, num_consts: int, params: dict) -> tuple[list, list]:
    """A custom_vjp call with no batched operand and no batched result (its body reads the named axis): the
    results stay unbatched; the residuals keep the batch dimensions ``fwd`` gives them, and a cotangent
    ``bwd`` gives batched is summed over the axis (every argument is shared by the whole batch)."""
    n_new = len(consts)
    res_dims: list = []

    def invariant_fwd(primals: list, perturbed: list) -> tuple[list, list, Any]:
        primals, perturbed = primals[n_new:], list(perturbed)[n_new:]
        n_out = len(body.out_avals)
        box: list = []

        def run(*xs: Any) -> list:
            o, r, info = fwd(list(xs), perturbed)
            box.append(info)
            return list(o) + list(r)

        outs, odims = _run_unbatched(run, primals, frame)
        if any(d is not not_mapped for d in odims[:n_out]):
            raise NotImplementedError(
                f"custom_vjp under vmap(axis_name={frame.name!r}): the function's results do not vary along "
                "the axis but its fwd rule's do; make the rule's results invariant too (a psum, as the "
                "function's)")
        res_dims[:] = odims[n_out:]
        return outs[:n_out], outs[n_out:], box[-1]

    def invariant_bwd(res_info: Any, res: list, cts: list) -> list:
        n_res = len(res)
        zero = [type(c) is Zero for c in cts]
        live = [c for c, z in zip(cts, zero) if not z]
        zero_out: list = []

        def run(*xs: Any) -> list:
            it = iter(xs[n_res:])
            full = [c if z else next(it) for c, z in zip(cts, zero)]
            got = bwd(res_info, list(xs[:n_res]), full)
            zero_out[:] = [type(c) is Zero for c in got]
            return [c for c in got if type(c) is not Zero]

        got, got_dims = run_batched(run, list(res) + live, list(res_dims) + [not_mapped] * len(live), frame,
                                    reuse=True, lift_unmapped=frame.name is not None)
        g_it = iter(zip(got, got_dims))
        out = []
        for z, a in zip(zero_out, [aval_of(v) for v in vals[num_consts:]]):
            if z:
                out.append(Zero(tangent_aval(a)))
                continue
            c, d = next(g_it)
            out.append(c if d is not_mapped else R.reduce_sum_p.bind(c, axes=(d,)))
        return out

    outs = custom_vjp_call_p.bind(*consts, *vals, call_jaxpr=body, fwd=invariant_fwd, bwd=invariant_bwd,
                                  num_consts=n_new + num_consts, **params)
    return outs, out_dims


@register_batching(custom_vjp_call_p)
def _custom_vjp_call_batch(vals: list, dims: list, *, frame: Any, call_jaxpr: Any, fwd: Callable, bwd: Callable,
                           num_consts: int, **params: Any) -> tuple[list, list]:
    invariant = _invariant_body(call_jaxpr, dims, frame)
    if invariant is not None:
        return _invariant_vjp_call(vals, frame, *invariant, fwd, bwd, num_consts, params)
    body, consts, out_dims = _batched_body(call_jaxpr, dims, frame, force_front=True)
    n_new = len(consts)
    arg_dims = list(dims[num_consts:])
    arg_avals = [aval_of(v) for v in vals[num_consts:]]
    info_box: list = []

    def batched_fwd(primals: list, perturbed: list) -> tuple[list, list, Any]:
        primals, perturbed = primals[n_new:], list(perturbed)[n_new:]
        n_out = len(body.out_avals)

        def run(*xs: Any) -> list:
            o, r, info = fwd(list(xs), perturbed)
            info_box.append((info, len(r)))
            return list(o) + list(r)

        outs, _ = run_batched(run, primals, list(dims), frame, force_front=True, reuse=True)
        info, _ = info_box[-1]
        return outs[:n_out], outs[n_out:], info

    def batched_bwd(res_info: Any, res: list, cts: list) -> list:
        n_res = len(res)
        # Symbolic-zero cotangents stay symbolic: the rule sees them unbatched (per example).
        zero = [type(c) is Zero for c in cts]
        inner_zero = [Zero(ShapedArray(c.aval.shape[1:], c.aval.dtype, c.aval.weak_type)) if z else None
                      for c, z in zip(cts, zero)]
        live = [c for c, z in zip(cts, zero) if not z]
        zero_out: list = []

        def run(*xs: Any) -> list:
            it = iter(xs[n_res:])
            full = [iz if z else next(it) for iz, z in zip(inner_zero, zero)]
            got = bwd(res_info, list(xs[:n_res]), full)
            zero_out[:] = [type(c) is Zero for c in got]
            return [c for c in got if type(c) is not Zero]

        got, got_dims = run_batched(run, list(res) + live, [0] * (n_res + len(live)), frame)
        g_it = iter(zip(got, got_dims))
        out = []
        for z, want, a in zip(zero_out, arg_dims, arg_avals):
            if z:
                out.append(Zero(tangent_aval(a)))
                continue
            c, d = next(g_it)
            if d is not_mapped:
                out.append(c)  # an unbatched cotangent serves an unbatched argument; a batched one is broadcast
                if want is not not_mapped:
                    from ftrans.transforms.batching import broadcast_batch

                    out[-1] = broadcast_batch(c, frame.size, want)
            elif want is not_mapped:
                out.append(R.reduce_sum_p.bind(c, axes=(d,)))  # the argument is shared: sum over the batch
            else:
                out.append(moveaxis(c, d, want))
        return out

    outs = custom_vjp_call_p.bind(*consts, *vals, call_jaxpr=body, fwd=batched_fwd, bwd=batched_bwd,
                                  num_consts=n_new + num_consts, **params)
    return outs, out_dims


@register_batching(custom_lin_p)
def _custom_lin_batch(vals: list, dims: list, *, frame: Any, name: str, **_: Any) -> tuple[Any, Any]:
    """Batching a ``custom_lin`` means a forward-mode tangent of a ``custom_vjp`` function is being computed
    (``vmap(jvp(f))``, ``jacfwd``): the error of evaluating it, JAX's ``TypeError``.  (Linearized programs
    vmap batches through the ``custom_vjp`` call, never through its ``custom_lin``.)"""
    raise C.no_forward_error(name)


def _install(prim: C.CallPrimitive) -> None:
    batching_rules.setdefault(prim, _call_batch(prim))


C.for_each_call_primitive(_install)


@register_batching(custom_vmap_call_p)
def _custom_vmap_call_batch(vals: list, dims: list, *, frame: Any, call_jaxpr: Any, rule: Callable, in_tree: Any,
                            out_tree: Any, num_consts: int, name: str) -> tuple[list, list]:
    """The user's vmap rule, given the arguments with their batch dimension in front and which are batched."""
    from ftrans.core import pytrees as tree_util
    from ftrans.errors import FtransTypeError, FtransValueError

    if any(d is not not_mapped for d in dims[:num_consts]):
        raise FtransTypeError(
            f"custom_vmap function {name} closes over a value this vmap batches; pass that value as an argument "
            "of the function instead, so its rule sees it")
    size = frame.size
    flat_args = [v if d is not_mapped else moveaxis(v, d, 0) for v, d in zip(vals[num_consts:], dims[num_consts:])]
    flat_batched = [d is not not_mapped for d in dims[num_consts:]]
    args = tree_util.tree_unflatten(in_tree, flat_args)
    in_batched = list(tree_util.tree_unflatten(in_tree, flat_batched))
    out, out_batched = rule(size, in_batched, *args)
    flat_out, tree1 = tree_util.tree_flatten(out)
    flat_ob, tree2 = tree_util.tree_flatten(out_batched)
    rule_name = getattr(rule, "__name__", "<unnamed rule>")
    if tree1 != tree2:
        raise FtransValueError(
            f"structure of output value and output batching specification returned by custom vmap rule "
            f"({rule_name}) do not match: the rule (for function {name}) returned values of structure {tree1} "
            f"and a batching specification of structure {tree2}")
    if tree1 != out_tree:
        raise FtransValueError(
            f"structure of output returned by custom vmap rule ({rule_name}) does not match that of original "
            f"custom-vmapped function ({name}): {tree1} vs. {out_tree}")
    from ftrans.core.trace import aval_of

    out_dims = []
    for i, (o, b) in enumerate(zip(flat_out, flat_ob)):
        shape = tuple(aval_of(o).shape)
        if b and (not shape or shape[0] != size):  # (JAX checks no more than this either)
            raise FtransTypeError(
                f"custom_vmap rule {rule_name} of {name}: output {i} is marked batched, so its leading dimension "
                f"must be the batch size {size}, but its shape is {shape}")
        out_dims.append(0 if b else not_mapped)
    return flat_out, out_dims



# linear_call: the user's transpose function is staged for the unbatched operands, so vmap has no rule for
# it (as in JAX).
mark_unsupported(C.linear_call_p, "batching", "Batching rule for 'linear_call' not implemented (as in JAX): its "
                 "transpose function is staged for unbatched operands; call it inside the mapped function's "
                 "own custom rule, or map over the linear arguments with a loop")


# composite: its name and attributes describe the unbatched operation, so vmap has no rule for it (as in
# JAX); a batched composite would need the user's own batched form (custom_vmap).
mark_unsupported(C.composite_p, "batching", "Batching rule for 'composite' not implemented (as in JAX): its "
                 "name and attributes describe the unbatched operation; use custom_batching.custom_vmap "
                 "to give one")
