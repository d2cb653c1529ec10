"""JVP and partial-evaluation rules of the call-like primitives (``ftrans/core/prims/calls.py``).

One rule per table serves every :class:`CallPrimitive`; a primitive states
its differences as declarations (``update_params``, ``residual_policy``,
``inline_known``), and only the custom-derivative calls, whose derivative is
the user's rule rather than the body's, register their own JVP and
partial-evaluation rules here.

* JVP: differentiate the body once (``jvp_jaxpr``) and bind one new call of
  the same primitive on primals and non-zero tangents, so ``jvp(jit(f))``
  stays one compiled call.
* Partial evaluation under ``linearize``: split the body into a known half
  (run now, as a call, or inline when ``inline_known``) and an unknown half
  recorded as a call of the same primitive reading the residuals.
* Splitting an equation inside a jaxpr being split (``partial_eval_jaxpr``):
  the same split, as two equations.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

from ftrans.core import ir as _ir
from ftrans.core.axis_env import axis_env as _axis_env
from ftrans.core.ir import ClosedJaxpr, JaxprEqn, Var
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.primitive import abstract_eval, mark_unsupported
from ftrans.core.prims import calls as C
from ftrans.core.trace import Tracer, aval_of
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.transforms.ad import Zero, float0, instantiate, jvp_jaxpr, jvp_rules, register_jvp, tangent_aval
from ftrans.transforms.partial_eval import (
    LinearizeTrace,
    forward_input_residuals,
    merge_known_unknown,
    partial_eval_jaxpr,
    partial_eval_jaxpr_rules,
    partial_eval_rules,
)

# ----------------------------------------------------------------------------
# The generic rules


# closed -> (the body closed over nothing, its constants): differentiating the same call again (``grad`` of a
# jitted function in a loop) must give the very same body objects, or every call misses the executable caches
# keyed on them and the program is lowered again (JAX keeps its jvp and partial-eval jaxprs the same way).
_hoisted: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _hoist(closed: ClosedJaxpr) -> tuple:
    got = _hoisted.get(closed)
    if got is not None:
        return got
    got = C.hoist_consts(closed)
    if not any(isinstance(c, Tracer) for c in got[1]):
        _hoisted[closed] = got
    return got


def _call_jvp(prim: C.CallPrimitive) -> Callable:
    def rule(primals: list, tangents: list, **params: Any) -> tuple[list, list]:
        body = prim.body(params)
        nonzeros = [type(t) is not Zero for t in tangents]
        with prim.body_env(params):
            new, out_nz = jvp_jaxpr(body, nonzeros)
        new, consts = _hoist(new)
        ops = [*consts, *primals, *[t for t in tangents if type(t) is not Zero]]
        n_out = len(body.out_avals)
        ins = ["const"] * len(consts) + [("in", i) for i in range(len(primals))] + \
            [("in", i) for i, nz in enumerate(nonzeros) if nz]
        outs_from = [("out", j) for j in range(n_out)] + [("out", j) for j, nz in enumerate(out_nz) if nz]
        outs = prim.bind(*ops, **prim.with_body(params, new, "jvp", len(ops), ins, outs_from))
        rest = iter(outs[n_out:])
        # A zero tangent has the call's output type, which is not the body's for a mapping call (pmap's body
        # sees one device's block): take it from the primal output.
        return list(outs[:n_out]), [next(rest) if nz else Zero(tangent_aval(aval_of(o)))
                                    for o, nz in zip(outs[:n_out], out_nz)]

    rule.__name__ = f"{prim.name}_jvp"
    return rule


def _call_partial_eval(prim: C.CallPrimitive) -> Callable:
    def rule(trace: LinearizeTrace, tracers: list, params: dict) -> list:
        """Run the known half of the body now; record the unknown half, which reads the residuals."""
        knowns = [trace.known_value(t) for t in tracers]
        unknowns = [not k for k, _ in knowns]
        known_vals = [v for k, v in knowns if k]
        known_idx = [i for i, u in enumerate(unknowns) if not u]
        known_j, unknown_j, out_unknowns, n_res = _split_body(prim, params, unknowns)
        n_known_out = len(out_unknowns) - sum(out_unknowns)
        if prim.inline_known:
            if _logger.isEnabledFor(logging.DEBUG):
                _log_residuals(known_j, n_res)
            outs = eval_jaxpr(known_j.jaxpr, list(known_j.consts), *known_vals)
            known_outs, res = list(outs[:n_known_out]), list(outs[n_known_out:])
            res_from = ["res"] * len(res)
        else:
            kbody, kconsts, sources = _known_body(known_j, n_res)
            ops = [*kconsts, *known_vals]
            k_ins = ["const"] * len(kconsts) + [("in", i) for i in known_idx]
            k_outs = [("out", j) for j, u in enumerate(out_unknowns) if not u] + \
                ["res"] * sum(s is None for s in sources)
            if _axis_env.frames:  # the known half reads a vmap's named axis: it reaches that vmap (as jit)
                from ftrans.transforms.batching import to_axis_owner

                ops = to_axis_owner([kbody], ops)
            outs = prim.bind(*ops, **prim.with_body(params, kbody, "known", len(ops), k_ins, k_outs))
            known_outs, computed = list(outs[:n_known_out]), iter(outs[n_known_out:])
            res = [next(computed) if s is None else known_vals[s] for s in sources]
            res_from = ["res" if s is None else ("in", known_idx[s]) for s in sources]
        ops = [trace.full_raise(r) for r in res] + [t for t, u in zip(tracers, unknowns) if u]
        u_ins = res_from + [("in", i) for i, u in enumerate(unknowns) if u]
        u_outs = [("out", j) for j, u in enumerate(out_unknowns) if u]
        unknown_outs = trace.record(prim, ops, prim.with_body(params, unknown_j, "unknown", len(ops), u_ins, u_outs))
        return merge_known_unknown(out_unknowns, known_outs, unknown_outs)

    rule.__name__ = f"{prim.name}_partial_eval"
    return rule


_known_bodies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _known_body(known_j: ClosedJaxpr, n_res: int) -> tuple:
    """The known half as a call runs it (input residuals forwarded, constants hoisted), the same objects for
    the same (cached) half, so its executable is found again (see ``_hoisted``)."""
    got = _known_bodies.get(known_j)
    if got is None:
        fwd, sources = forward_input_residuals(known_j, n_res)
        kbody, kconsts = C.hoist_consts(fwd)
        got = (kbody, kconsts, sources)
        if not any(isinstance(c, Tracer) for c in kconsts):
            _known_bodies[known_j] = got
    return got


# body -> {(unknowns, policy): split}: linearizing the same call again (a checkpointed function under vjp in
# a loop) reuses the split, so the calls inside its halves are the same jaxprs and hit their compile caches.
_split_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_remat_effects(prim: C.CallPrimitive, body: Any) -> None:
    """JAX's check that a ``checkpoint`` body split by partial evaluation holds only effects allowed there
    (``ftrans.extend.core.remat_allowed_effects``; ftrans's own always are)."""
    if prim is C.remat_p and _ir.user_effect_primitives:
        bad = _ir.disallowed_effects(body, _ir.remat_allowed_effects)
        if bad:
            raise NotImplementedError(f"Effects not supported in AD of `checkpoint`/`remat`: {bad}")  # (jax 0.11's words)


def _split_body(prim: C.CallPrimitive, params: dict, unknowns: list[bool]) -> tuple:
    body = prim.body(params)
    _check_remat_effects(prim, body)
    try:
        key = (tuple(unknowns), params.get("policy"))
        hash(key)
    except TypeError:  # an unhashable policy object: split afresh
        key = None
    per = _split_cache.get(body)
    if key is not None and per is not None and key in per:
        return per[key]
    with prim.body_env(params):
        split = partial_eval_jaxpr(body, unknowns, prim.residual_policy(params))
    if key is not None and not any(isinstance(c, Tracer) for c in body.consts):
        _split_cache.setdefault(body, {})[key] = split
    return split


_logger = logging.getLogger("ftrans.ad_checkpoint")


def _log_residuals(known: ClosedJaxpr, n_res: int) -> None:
    """At DEBUG level, what a checkpointed function saves for the backward pass (JAX logs the same)."""
    j = known.jaxpr
    res = j.outvars[len(j.outvars) - n_res:]
    ins = {id(v) for v in j.invars}
    producer = {id(v): e for e in j.eqns for v in e.outvars}
    inputs = [v for v in res if isinstance(v, Var) and id(v) in ins]
    body = []
    for v in res:
        if not isinstance(v, Var) or id(v) in ins:
            continue
        e = producer.get(id(v))
        src = f"output of {e.primitive.name}" + (f" from {e.source_info}" if e and e.source_info else "") \
            if e is not None else "a constant"
        body.append((v.aval.str_short(), src))
    if not inputs and not body:
        return
    msg = "remat-decorated function "
    if inputs:
        msg += "saving inputs with shapes:\n" + "".join(f"  {v.aval.str_short()}\n" for v in inputs)
    if inputs and body:
        msg += "and "
    if body:
        msg += "saving these intermediates:\n" + "".join(f"  {a} from {w}\n" for a, w in body)
    _logger.debug(msg)


def _call_split(prim: C.CallPrimitive) -> Callable:
    def rule(eqn: JaxprEqn, unk_in: list[bool], saveable: Callable | None = None,
             force: list[bool] | None = None) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
        """Split a call equation into a known call (returning the residuals too) and an unknown call.

        ``saveable`` is an enclosing checkpoint's policy: it decides, inside the body too, what the known
        call may save (JAX's ``call_partial_eval_custom_rule``); without one a call uses its own (a
        ``remat``'s). ``force`` marks known outputs the unknown call must produce as well (the unknown side
        of the enclosing split reads them).
        """
        params = eqn.params
        _check_remat_effects(prim, prim.body(params))
        policy = saveable if saveable is not None else prim.residual_policy(params)
        with prim.body_env(params):
            k, u, out_unk, n_res = partial_eval_jaxpr(prim.body(params), unk_in, policy, also=force)
        force = force or [False] * len(out_unk)
        k, sources = forward_input_residuals(k, n_res)
        known_idx = [i for i, un in enumerate(unk_in) if not un]
        k_in = [eqn.invars[i] for i in known_idx]
        n_new = sum(s is None for s in sources)
        k_ins = [("in", i) for i in known_idx]
        k_outs = [("out", j) for j, un in enumerate(out_unk) if not un] + ["res"] * n_new
        k_params = prim.with_body(params, k, "known", len(k_in), k_ins, k_outs)
        # The residuals as the call returns them: a mapped call (shard_map, pmap) stacks each device's.
        outer = abstract_eval(prim, [v.aval for v in k_in], k_params)
        new_vars = [Var(a) for a in list(outer)[len(outer) - n_new:]] if n_new else []
        it = iter(new_vars)
        res = [next(it) if s is None else k_in[s] for s in sources]
        u_in = res + [a for a, un in zip(eqn.invars, unk_in) if un]
        k_out = [v for v, un in zip(eqn.outvars, out_unk) if not un] + new_vars
        u_out = [v for v, un, f in zip(eqn.outvars, out_unk, force) if un or f]
        u_ins = ["res" if s is None else ("in", known_idx[s]) for s in sources] + \
            [("in", i) for i, un in enumerate(unk_in) if un]
        u_outs = [("out", j) for j, (un, f) in enumerate(zip(out_unk, force)) if un or f]
        k_eqn = eqn.replace(invars=k_in, outvars=k_out, params=k_params)
        u_eqn = eqn.replace(invars=u_in, outvars=u_out,
                            params=prim.with_body(params, u, "unknown", len(u_in), u_ins, u_outs))
        return k_eqn, u_eqn, out_unk

    rule.__name__ = f"{prim.name}_split"
    rule.policy_aware = True  # type: ignore[attr-defined]
    return rule


def _install(prim: C.CallPrimitive) -> None:
    jvp_rules.setdefault(prim, _call_jvp(prim))
    partial_eval_rules.setdefault(prim, _call_partial_eval(prim))
    partial_eval_jaxpr_rules.setdefault(prim, _call_split(prim))


def _custom_dce_split(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[JaxprEqn, JaxprEqn, list[bool]]:
    """A ``custom_dce_call`` is split as a plain call but is not policy-aware: under a ``checkpoint`` the
    whole forward function is recomputed by the backward pass, and the forward pass keeps the call, whose
    unread residuals let dead-code elimination run the function instead."""
    return _dce_call_split(eqn, unk_in)


_dce_call_split = _call_split(C.custom_dce_call_p)
partial_eval_jaxpr_rules[C.custom_dce_call_p] = _custom_dce_split


# ----------------------------------------------------------------------------
# The custom-derivative calls: the user's rule is the derivative


@register_jvp(C.custom_jvp_call_p)
def _custom_jvp_call_jvp(primals: list, tangents: list, *, jvp: Callable, **_: Any) -> tuple[list, list]:
    return jvp(primals, tangents)


@register_jvp(C.custom_vjp_call_p)
def _custom_vjp_call_jvp(primals: list, tangents: list, *, fwd: Callable, bwd: Callable, num_consts: int,
                         name: str, call_jaxpr: ClosedJaxpr, symbolic_zeros: bool = False,
                         **_: Any) -> tuple[list, list]:
    """Run the user's forward function; the output tangents are one ``custom_lin`` of the residuals."""
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise FtransTypeError(
            f"custom_vjp function {name} closes over a value that is being differentiated; pass that value "
            "as an argument of the function instead"
        )
    perturbed = [type(t) is not Zero for t in tangents]
    if getattr(fwd, "optimize_remat", False) and any(isinstance(p, Tracer) for p in primals):
        outs, res_dyn, res_info = _fwd_as_custom_dce(fwd, primals, perturbed, call_jaxpr)
    else:
        outs, res_dyn, res_info = fwd(primals, perturbed)
    return outs, custom_vjp_tangents(outs, res_dyn, res_info, tangents[num_consts:], bwd, name, symbolic_zeros)


def _fwd_as_custom_dce(fwd: Callable, primals: list, perturbed: list, call_jaxpr: ClosedJaxpr) -> tuple:
    """``optimize_remat``: the forward function staged as one ``custom_dce_call`` that holds the function
    too, so a forward pass that does not keep the residuals (a ``checkpoint``'s, whose backward pass
    recomputes them) runs the function alone, as JAX's remat optimization does."""
    from ftrans.core.ir import Jaxpr
    from ftrans.core.trace import stage

    info: list = []

    def staged(*ps: Any) -> list:
        outs, res_dyn, res_info = fwd(list(ps), perturbed)
        info.append((len(outs), res_info))
        return [*outs, *res_dyn]

    closed, _ = stage(staged, [aval_of(p) for p in primals])
    body, consts = C.hoist_consts(closed)
    n_out, res_info = info[0]
    j = call_jaxpr.jaxpr
    lead = [Var(a) for a in body.in_avals[:len(consts)]]
    alt = ClosedJaxpr(Jaxpr(list(j.constvars), lead + list(j.invars), j.eqns, j.outvars), call_jaxpr.consts)
    outs = C.custom_dce_call_p.bind(*consts, *primals, jaxpr=body, dce_jaxpr=(alt,), num_primal=n_out,
                                    name=getattr(fwd, "__name__", "fwd"))
    return list(outs[:n_out]), list(outs[n_out:]), res_info


def custom_vjp_tangents(outs: list, res_dyn: list, res_info: Any, arg_tangents: list, bwd: Callable,
                        name: str, symbolic_zeros: bool = False) -> list:
    """The output tangents of a ``custom_vjp`` call: one ``custom_lin`` of the residuals and the input
    tangents, which the transpose turns into a call of the user's backward function."""
    nonzero = tuple(type(t) is not Zero for t in arg_tangents)
    out_avals = tuple(tangent_aval(aval_of(o)) for o in outs)
    if not any(nonzero):
        return [Zero(a) for a in out_avals]
    in_avals = tuple(t.aval if type(t) is Zero else aval_of(t) for t in arg_tangents)
    # An integer or boolean output's tangent (float0) is a symbolic zero, not a result of custom_lin: the
    # backward function gets a zero cotangent for it.
    live = [a.dtype != float0 for a in out_avals]
    if not any(live):
        return [Zero(a) for a in out_avals]

    def full_bwd(res: list, cts: list) -> list:
        it = iter(cts)
        cts = [next(it) if lv else Zero(a) for a, lv in zip(out_avals, live)]
        if any(a.typed_sharding is not None for a in out_avals):  # cotangents of the outputs' types, as JAX's
            from ftrans.transforms.transpose import _retyped

            cts = [_retyped(c, a) for c, a in zip(cts, out_avals)]
        return bwd(res_info, res, cts)

    full_bwd.__name__ = getattr(bwd, "__name__", "bwd")
    t_out = iter(C.custom_lin_p.bind(*res_dyn, *[t for t in arg_tangents if type(t) is not Zero],
                                     num_res=len(res_dyn), bwd=full_bwd,
                                     out_avals=tuple(a for a, lv in zip(out_avals, live) if lv),
                                     in_avals=in_avals, nonzero=nonzero, name=name, symbolic_zeros=symbolic_zeros))
    return [next(t_out) if lv else Zero(a) for a, lv in zip(out_avals, live)]


def _inline(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    """Linearizing a custom call evaluates its function: known parts run, tangent parts are recorded.

    (The tangent parts are the user's rule's, already applied by the JVP.)
    """
    body: ClosedJaxpr = params["call_jaxpr"]
    return eval_jaxpr(body.jaxpr, list(body.consts), *tracers)


def _all_unknown(eqn: JaxprEqn, unk_in: list[bool]) -> tuple[None, JaxprEqn, list[bool]]:
    """A custom call is not split: its rule is for the whole function, so the whole equation waits."""
    return None, eqn, [True] * len(eqn.outvars)


for _p in (C.custom_jvp_call_p, C.custom_vjp_call_p):
    partial_eval_rules[_p] = _inline
    partial_eval_jaxpr_rules[_p] = _all_unknown


def _custom_vmap_not_linearizable(name: str) -> FtransValueError:
    return FtransValueError(
        "Linearization failed to produce known values for all output primals. This is typically caused by "
        "attempting to differentiate a function uses an operation that does not support reverse-mode autodiff: "
        f"the custom_vmap function {name} (as in JAX, a custom_vmap function supports forward mode only; for "
        "reverse mode (grad, vjp, linearize) wrap it in a custom_vjp, or give it a custom_jvp rule)")


def _custom_vmap_partial_eval(trace: LinearizeTrace, tracers: list, params: dict) -> list:
    """A ``custom_vmap`` call reading a tangent cannot be split into known and unknown halves: JAX's
    custom_vmap call is one opaque equation, so its primal outputs would be unknown, and JAX refuses
    reverse mode through it.  Known-only calls (a differentiated value not among its operands) run."""
    if not all(trace.known_value(t)[0] for t in tracers):
        raise _custom_vmap_not_linearizable(params["name"])
    return _inline(trace, tracers, params)


def _custom_vmap_split(eqn: JaxprEqn, unk_in: list[bool]) -> tuple:
    raise _custom_vmap_not_linearizable(eqn.params["name"])


partial_eval_rules[C.custom_vmap_call_p] = _custom_vmap_partial_eval
partial_eval_jaxpr_rules[C.custom_vmap_call_p] = _custom_vmap_split


@register_jvp(C.custom_vmap_call_p)
def _custom_vmap_call_jvp(primals: list, tangents: list, *, call_jaxpr: ClosedJaxpr, rule: Callable, in_tree: Any,
                          out_tree: Any, num_consts: int, name: str) -> tuple[list, list]:
    """A ``custom_vmap`` call of the function's JVP, whose vmap rule is the JVP of the user's rule (so the JVP
    of a ``custom_vmap`` function is batched by the user's rule too, as in JAX)."""
    from ftrans.core import pytrees as tree_util
    from ftrans.transforms.ad import instantiate

    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise FtransTypeError(
            f"custom_vmap function {name} closes over a value that is being differentiated; pass that value as "
            "an argument of the function instead")
    n = len(primals) - num_consts
    arg_tangents = [instantiate(t) for t in tangents[num_consts:]]
    body, out_nz = jvp_jaxpr(call_jaxpr, [False] * num_consts + [True] * n, instantiate=True)
    if not all(out_nz):  # an integer or boolean output (a float0 tangent): differentiate the function itself
        from ftrans.transforms.ad import jvp_flat

        def f(*ins: Any) -> tuple[list, None]:
            return eval_jaxpr(call_jaxpr.jaxpr, list(call_jaxpr.consts), *ins), None

        p_out, t_out, _ = jvp_flat(f, primals, tangents)
        return list(p_out), list(t_out)
    body, consts = C.hoist_consts(body)
    pair = lambda tree: tree_util.tree_structure((tree_util.tree_unflatten(tree, [0] * tree.num_leaves),) * 2)  # noqa: E731
    outs = C.custom_vmap_call_p.bind(
        *consts, *primals, *arg_tangents, call_jaxpr=body, rule=_jvp_of_rule(rule, out_tree, name),
        in_tree=pair(in_tree), out_tree=pair(out_tree), num_consts=len(consts) + num_consts, name=name)
    n_out = len(call_jaxpr.out_avals)
    return list(outs[:n_out]), list(outs[n_out:])


def _jvp_of_rule(rule: Callable, out_tree: Any, name: str) -> Callable:
    """The vmap rule of a ``custom_vmap`` function's JVP: the JVP of the user's rule, applied to the
    arguments batched in both primal and tangent, and mapped (by ``vmap``) over those batched in only one."""
    import operator

    from ftrans.core import pytrees as tree_util
    from ftrans.core.axis_env import AxisFrame
    from ftrans.transforms.ad import jvp
    from ftrans.transforms.batching import moveaxis, not_mapped, run_batched

    def jvp_rule(axis_size: int, in_batched: list, primals: Any, tangents: Any) -> tuple:
        pb, tb = in_batched
        both = tree_util.tree_map(operator.and_, pb, tb)
        extra_p = tree_util.tree_map(lambda p, t: 0 if p and not t else None, pb, tb)
        extra_t = tree_util.tree_map(lambda p, t: 0 if t and not p else None, pb, tb)
        box: list = []

        def to_jvp(*ps: Any) -> Any:
            out, out_batched = rule(axis_size, list(both), *ps)
            if tree_util.tree_structure(out) != out_tree:
                from ftrans.errors import FtransValueError

                raise FtransValueError(
                    f"custom_vmap rule of {name}: its output has structure {tree_util.tree_structure(out)}, "
                    f"but the function's output has structure {out_tree}")
            box.append(out_batched)
            return out

        def jvp_of(ps: Any, ts: Any) -> tuple:
            return jvp(to_jvp, tuple(ps), tuple(ts))

        flat_in, in_tree = tree_util.tree_flatten((tuple(primals), tuple(tangents)))
        flat_extra = tree_util.tree_leaves((tuple(extra_p), tuple(extra_t)), is_leaf=lambda x: x is None)
        out_box: list = []

        def flat_jvp(*xs: Any) -> list:
            ps, ts = tree_util.tree_unflatten(in_tree, xs)
            out, tree = tree_util.tree_flatten(jvp_of(ps, ts))
            out_box.append(tree)
            return out

        # Mapped over the arguments batched in only one of primal and tangent; each output's batch
        # dimension is what the mapping gives it (moved to the front), none where it gives none.
        outs, out_dims = run_batched(flat_jvp, flat_in, [not_mapped if a is None else 0 for a in flat_extra],
                                     AxisFrame(None, axis_size, None))
        outs = [o if d is not_mapped else moveaxis(o, d, 0) for o, d in zip(outs, out_dims)]
        out_p, out_t = tree_util.tree_unflatten(out_box[0], outs)
        extra_p_out, extra_t_out = tree_util.tree_unflatten(out_box[0], [d is not not_mapped for d in out_dims])
        mutual = box[0]
        return (out_p, out_t), (tree_util.tree_map(operator.or_, mutual, extra_p_out),
                                tree_util.tree_map(operator.or_, mutual, extra_t_out))

    jvp_rule.__name__ = f"jvp_of_{getattr(rule, '__name__', 'rule')}"
    return jvp_rule


@register_jvp(C.custom_lin_p)
def _custom_lin_jvp(primals: list, tangents: list, *, name: str, **_: Any) -> Any:
    raise C.no_forward_error(name)


C.for_each_call_primitive(_install)


# ----------------------------------------------------------------------------
# name and optimization_barrier


@register_jvp(C.name_p)
def _name_jvp(primals: list, tangents: list, *, name: str) -> tuple[Any, Any]:
    out = C.name_p.bind(primals[0], name=name)
    t = tangents[0]
    return out, (t if type(t) is Zero else C.name_p.bind(t, name=name))


@register_jvp(C.linear_call_p)
def _linear_call_jvp(primals: list, tangents: list, *, num_callee_consts: int, num_res: int,
                     **params: Any) -> tuple[list, list]:
    # linear in its linear operands: the tangents go through the same call (as JAX's rule); the constants and
    # residuals must not carry tangents
    k = num_callee_consts + num_res
    if any(type(t) is not Zero for t in tangents[:k]):
        raise FtransTypeError(
            "linear_call: the residual arguments carry tangents; linear_call is linear in its linear arguments "
            "only and cannot be differentiated with respect to its residuals (pass them through stop_gradient)")
    params = {**params, "num_callee_consts": num_callee_consts, "num_res": num_res}
    outs = C.linear_call_p.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents[k:]):
        return outs, [Zero.from_primal_value(o) for o in outs]
    lin = [instantiate(t) for t in tangents[k:]]
    return outs, list(C.linear_call_p.bind(*primals[:k], *lin, **params))


_LINEAR_CALL_PE = ("not needed: linear_call's JVP binds separate primal and tangent calls, so linearization "
                   "stages the tangent call whole, residual operands and all (JAX has no rule either)")
mark_unsupported(C.linear_call_p, "partial_eval", _LINEAR_CALL_PE)
mark_unsupported(C.linear_call_p, "partial_eval_jaxpr", _LINEAR_CALL_PE)


@register_jvp(C.xla_metadata_value_p)
def _xla_metadata_value_jvp(primals: list, tangents: list, *, xla_metadata_kvs: tuple) -> tuple[Any, Any]:
    # linear, as JAX's (``deflinear2``): the tangent is tagged too
    out = C.xla_metadata_value_p.bind(primals[0], xla_metadata_kvs=xla_metadata_kvs)
    t = tangents[0]
    return out, (t if type(t) is Zero else C.xla_metadata_value_p.bind(t, xla_metadata_kvs=xla_metadata_kvs))


@register_jvp(C.optimization_barrier_p)
def _barrier_jvp(primals: list, tangents: list) -> tuple[list, list]:
    outs = C.optimization_barrier_p.bind(*primals)
    nz = [t for t in tangents if type(t) is not Zero]
    t_outs = iter(C.optimization_barrier_p.bind(*nz)) if nz else iter(())
    return outs, [t if type(t) is Zero else next(t_outs) for t in tangents]


# ----------------------------------------------------------------------------
# composite: no derivative of its own (its name promises an operation a compiler may swap in, whose
# derivative the decomposition need not give), as in JAX; the user adds one with custom_jvp/custom_vjp.


@register_jvp(C.composite_p)
def _composite_jvp(primals: list, tangents: list, *, name: str, **_: Any) -> Any:
    # The first sentences are JAX's own (code that matches on the message keeps working).
    raise FtransValueError(
        "JVP rule for composite not implemented. You can use `jax.custom_jvp` to add support. See "
        f"https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html (composite {name!r}: wrap it in "
        "ftrans.custom_jvp, or ftrans.custom_vjp for reverse mode only)")


mark_unsupported(C.composite_p, "partial_eval", "composite has no derivative rule (as in JAX); wrap it in "
                 "custom_jvp or custom_vjp to differentiate it")
mark_unsupported(C.composite_p, "partial_eval_jaxpr", "composite has no derivative rule (as in JAX); wrap it "
                 "in custom_jvp or custom_vjp to differentiate it")
