"""The ``checkify`` transform: the error state threaded functionally through a program.

``checkify(f)`` stages ``f`` (its arguments closed over, so non-array arguments and Python
control flow on them behave as in a plain call) and interprets the jaxpr, equation by
equation, carrying an :class:`Error` value. Each primitive's *checkify rule* (the table
``checkify_rules`` below, this transform's own) binds the primitive and returns the updated
error:

* the default rule binds the primitive unchanged, and for the primitives that can make a NaN
  adds a NaN check on their float outputs (``nan_checks``);
* ``div``/``rem`` check for a zero divisor (``div_checks``);
* ``gather``, ``dynamic_slice``, ``dynamic_update_slice`` and the scatters check their indices
  (``index_checks``), reporting the first bad index, its axis and the axis size;
* ``check`` (a user's ``check``/``check_error``) is discharged: its error merged in;
* the higher-order primitives (``jit_call``, ``remat``, ``cond``, ``while``, ``scan``,
  ``checkpointed_while``/``while_lin``, ``pmap``, ``shard_map``, ``custom_jvp_call``,
  ``custom_vjp_call``) run checkify on their bodies, which then take the error leaves as
  extra inputs and return them as extra outputs: a loop carries the error (a boolean, a
  code and the payload per error key) in its carry; ``pmap``/``shard_map`` return one error
  per device, mapped over the devices (as JAX's). The other higher-order primitives
  (``custom_vmap_call``, ``custom_linear_solve``, ``reduce``, ``reduce_window``) are bound
  unchanged, their bodies unchecked (the last three get the NaN check on their results).

A body's error keys are found by staging it once with the incoming keys; when it adds keys
it is staged again with all of them, so a loop's carry has the same structure in and out,
and every branch of a ``cond`` returns the same one. A ``while``'s condition is checked once
before the loop and again after each step (as JAX does), so an error in the condition is
caught even on the step where it turns False.

Under ``vmap`` of a checkified function every error leaf is batched and ``Error.get`` lists
each failing element; ``checkify`` of a ``vmap``-ed function sees ``check`` already reduced by
its batching rule to the first failing element.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal, hoist_consts
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.primitive import Primitive, registry
from ftrans.core.prims.control_flow import join_consts
from ftrans.core.trace import Tracer, source_info_as, stage
from ftrans.experimental.checkify._check import check_p
from ftrans.experimental.checkify._errors import (
    DivisionByZeroError,
    Error,
    FailedCheckError,
    NaNError,
    OOBError,
    assert_func,
    init_error,
    kind_of,
    update_error,
)

__all__ = ["checkify", "checkify_rules", "checkify_jaxpr", "user_checks", "nan_checks", "div_checks",
           "index_checks", "float_checks", "automatic_checks", "all_checks"]

user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
div_checks = frozenset({DivisionByZeroError})
index_checks = frozenset({OOBError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks

# rule(err, enabled, where, *operands, **params) -> (err, outputs as a list)
checkify_rules: dict[Primitive, Callable[..., tuple[Error, list]]] = {}


def _where(src: Any) -> str:
    return f"{src.filename}:{src.lineno}" if src is not None else ""


def _bind(prim: Primitive, vals: Any, params: dict) -> list:
    out = prim.bind(*vals, **params)
    return list(out) if prim.multiple_results else [out]


def checkify_jaxpr(jaxpr: Jaxpr, consts: Any, enabled: frozenset, err: Error, *args: Any) -> tuple[Error, list]:
    """Interpret ``jaxpr`` on ``consts`` and ``args`` threading ``err`` through the checkify rules."""
    env: dict[int, Any] = {}

    def read(a: Any) -> Any:
        if isinstance(a, Literal):
            return Array._new(np.asarray(a.val, a.aval.dtype), a.aval.weak_type)
        return env[id(a)]

    for v, c in zip(jaxpr.constvars, consts):
        env[id(v)] = c
    for v, a in zip(jaxpr.invars, args):
        env[id(v)] = a
    for eqn in jaxpr.eqns:
        vals = [read(a) for a in eqn.invars]
        rule = checkify_rules.get(eqn.primitive)
        with source_info_as(eqn.source_info):
            if rule is None:
                outs = _bind(eqn.primitive, vals, eqn.params)
            else:
                err, outs = rule(err, enabled, _where(eqn.source_info), *vals, **eqn.params)
        for v, o in zip(eqn.outvars, outs):
            env[id(v)] = o
    return err, [read(a) for a in jaxpr.outvars]


# ----------------------------------------------------------------------------
# Automatic checks


def _any(x: Any) -> Any:
    from ftrans import numpy as jnp

    return jnp.any(x)


def _check_nans(err: Error, enabled: frozenset, where: str, name: str, outs: list) -> Error:
    from ftrans import numpy as jnp

    if NaNError not in enabled:
        return err
    floats = [o for o in outs if np.issubdtype(np.dtype(o.dtype), np.inexact) and np.size(o)]
    if not floats:
        return err
    found = _any(jnp.isnan(floats[0]))
    for o in floats[1:]:
        found = jnp.logical_or(found, _any(jnp.isnan(o)))
    return assert_func(err, found, NaNError(where, name))


# The primitives whose float results can hold a NaN that their operands did not (JAX's list); the check looks
# at the results only, as JAX's does.
NAN_PRIMITIVES = tuple(registry[n] for n in (
    "acos", "acosh", "add", "asin", "asinh", "atan2", "atan", "atanh", "bessel_i0e", "bessel_i1e", "cbrt",
    "conv_general_dilated", "cos", "cosh", "cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum", "digamma",
    "dot_general", "erf_inv", "erf", "erfc", "exp", "expm1", "fft", "integer_pow", "lgamma",
    "log1p", "log", "logistic", "mul", "pad", "pow", "psum", "reduce", "reduce_prod", "reduce_sum",
    "reduce_window", "reduce_window_sum", "rng_uniform", "rsqrt", "sin", "sinh", "sqrt", "sub", "tan", "tanh",
    "custom_linear_solve", "exp2",
) if n in registry)


def _nan_rule(prim: Primitive) -> Callable:
    def rule(err: Error, enabled: frozenset, where: str, *vals: Any, **params: Any) -> tuple[Error, list]:
        outs = _bind(prim, vals, params)
        return _check_nans(err, enabled, where, prim.name, outs), outs

    return rule


for _p in NAN_PRIMITIVES:
    checkify_rules[_p] = _nan_rule(_p)


def _div_rule(prim: Primitive) -> Callable:
    def rule(err: Error, enabled: frozenset, where: str, x: Any, y: Any, **params: Any) -> tuple[Error, list]:
        from ftrans import numpy as jnp

        if DivisionByZeroError in enabled:
            err = assert_func(err, _any(jnp.equal(y, 0)), DivisionByZeroError(where))
        outs = _bind(prim, (x, y), params)
        return _check_nans(err, enabled, where, prim.name, outs), outs

    return rule


for _name in ("div", "rem"):
    checkify_rules[registry[_name]] = _div_rule(registry[_name])


def _oob_payload(mask: Any, indices: Any, dims_map: Any, shape: tuple) -> Any:
    """``[index, axis, axis size]`` of the first True of ``mask`` (indices' last axis is the index vector)."""
    from ftrans import numpy as jnp

    k = np.shape(indices)[-1] if np.ndim(indices) else 1
    flat = jnp.argmax(jnp.reshape(mask, (-1,)))
    axis = jnp.asarray(np.asarray(dims_map, np.int32).reshape(-1))[flat % k]
    size = jnp.asarray(np.asarray(shape, np.int32).reshape(-1))[axis]
    index = jnp.reshape(indices, (-1,))[flat].astype(np.int32)
    return jnp.stack([index, axis, size])


def _oob_check(err: Error, where: str, prim: str, shape: tuple, indices: Any, upper: Any, dims_map: Any) -> Error:
    """Raise an OOB error where an index of ``indices`` (last axis: one entry per ``dims_map`` axis) is
    below 0 or above ``upper`` (the largest valid start)."""
    from ftrans import numpy as jnp

    if not np.size(indices) or not len(dims_map):
        return err
    upper = np.minimum(np.asarray(upper, np.int64), np.iinfo(np.dtype(indices.dtype)).max)
    mask = jnp.logical_or(indices < 0, indices > jnp.asarray(upper.astype(np.dtype(indices.dtype))))
    return assert_func(err, _any(mask), OOBError(where, prim, shape), (_oob_payload(mask, indices, dims_map, shape),))


def _dynamic_slice_rule(err: Error, enabled: frozenset, where: str, operand: Any, *starts: Any,
                        **params: Any) -> tuple[Error, list]:
    from ftrans import numpy as jnp

    outs = _bind(registry["dynamic_slice"], (operand, *starts), params)
    if OOBError in enabled and starts:
        idx = jnp.stack([jnp.asarray(s).astype(np.int32) for s in starts])
        upper = np.asarray(operand.shape) - np.asarray(params["slice_sizes"])
        err = _oob_check(err, where, "dynamic_slice", tuple(operand.shape), idx, upper, range(len(starts)))
    return err, outs


def _dynamic_update_slice_rule(err: Error, enabled: frozenset, where: str, operand: Any, update: Any,
                               *starts: Any, **params: Any) -> tuple[Error, list]:
    from ftrans import numpy as jnp

    outs = _bind(registry["dynamic_update_slice"], (operand, update, *starts), params)
    if OOBError in enabled and starts:
        idx = jnp.stack([jnp.asarray(s).astype(np.int32) for s in starts])
        upper = np.asarray(operand.shape) - np.asarray(update.shape)
        err = _oob_check(err, where, "dynamic_update_slice", tuple(operand.shape), idx, upper,
                         range(len(starts)))
    return err, outs


def _gather_rule(err: Error, enabled: frozenset, where: str, operand: Any, indices: Any,
                 **params: Any) -> tuple[Error, list]:
    outs = _bind(registry["gather"], (operand, indices), params)
    if OOBError in enabled:
        dn = params["dimension_numbers"]
        sim = tuple(dn.start_index_map)
        sizes = np.asarray(params["slice_sizes"])
        upper = np.asarray(operand.shape)[list(sim)] - sizes[list(sim)] if sim else np.zeros(0)
        err = _oob_check(err, where, "gather", tuple(operand.shape), indices, upper, sim)
    return err, outs


def _scatter_rule(prim: Primitive) -> Callable:
    def rule(err: Error, enabled: frozenset, where: str, operand: Any, indices: Any, updates: Any,
             **params: Any) -> tuple[Error, list]:
        outs = _bind(prim, (operand, indices, updates), params)
        if OOBError in enabled:
            dn = params["dimension_numbers"]
            inserted = set(dn.inserted_window_dims) | set(getattr(dn, "operand_batching_dims", ()))
            sizes, pos = [], 0
            for i in range(len(operand.shape)):
                if i in inserted:
                    sizes.append(1)
                else:
                    sizes.append(updates.shape[dn.update_window_dims[pos]])
                    pos += 1
            sdims = tuple(dn.scatter_dims_to_operand_dims)
            upper = np.asarray([operand.shape[i] - sizes[i] for i in sdims], np.int64)
            err = _oob_check(err, where, prim.name, tuple(operand.shape), indices, upper, sdims)
            err = _check_nans(err, enabled, where, prim.name, outs)
        return err, outs

    return rule


checkify_rules[registry["dynamic_slice"]] = _dynamic_slice_rule
checkify_rules[registry["dynamic_update_slice"]] = _dynamic_update_slice_rule
checkify_rules[registry["gather"]] = _gather_rule
for _name in ("scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max"):
    checkify_rules[registry[_name]] = _scatter_rule(registry[_name])


# ----------------------------------------------------------------------------
# check: discharged into the error value


def _check_rule(err: Error, enabled: frozenset, where: str, *vals: Any, err_tree: Any,
                debug: bool) -> tuple[Error, list]:
    new = err_tree.unflatten(vals)
    for k in sorted(new._pred):
        if kind_of(k) in enabled:
            err = update_error(err, new._pred[k], new._code[k], {}, new._payload[k], k)
    return err._replace(metadata={**new._metadata, **err._metadata}), []


checkify_rules[check_p] = _check_rule


# ----------------------------------------------------------------------------
# Bodies: staged with the error leaves as extra inputs and outputs


def _leaf_avals(keys: tuple) -> list[ShapedArray]:
    avals = [ShapedArray((), np.dtype(bool), False) for _ in keys]
    avals += [ShapedArray((), np.dtype(np.int32), False) for _ in keys]
    for k in keys:
        avals += [ShapedArray(tuple(s), np.dtype(d), False) for s, d in k[1]]
    return avals


def _leaves(err: Error, keys: tuple) -> list:
    """The error's leaves for ``keys`` (placeholders for keys it lacks), as arrays of the exact types."""
    from ftrans import numpy as jnp

    err = err._with_keys(keys)
    out = [jnp.asarray(err._pred[k], dtype=bool) for k in keys]
    out += [jnp.asarray(err._code[k], dtype=np.int32) for k in keys]
    for k in keys:
        out += [jnp.asarray(p, dtype=np.dtype(d)) for p, (_, d) in zip(err._payload[k], k[1])]
    return out


def _from_leaves(keys: tuple, leaves: list, metadata: dict) -> Error:
    n = len(keys)
    pred = dict(zip(keys, leaves[:n]))
    code = dict(zip(keys, leaves[n:2 * n]))
    payload, i = {}, 2 * n
    for k in keys:
        payload[k] = tuple(leaves[i:i + len(k[1])])
        i += len(k[1])
    return Error(pred, code, metadata, payload)


class _Staged:
    """A body staged under checkify: ``jaxpr`` takes ``(*before, *err leaves, *after)`` and returns
    ``(*err leaves, *outs)``; its constants hoisted to ``consts`` (leading inputs of ``jaxpr``)."""

    def __init__(self, jaxpr: ClosedJaxpr, consts: list, keys_in: tuple, keys_out: tuple, metadata: dict):
        self.jaxpr, self.consts = jaxpr, consts
        self.keys_in, self.keys_out, self.metadata = keys_in, keys_out, metadata
        self.passthrough = False
        self.loops: dict = {}  # the cond _Staged -> the combined while body made with it


# body (Jaxpr or ClosedJaxpr) -> {(enabled, keys, split): _Staged}: a body checkified once is reused, so
# checkify of a jitted function stages (and compiles) its checked body once, not on every call.
_body_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _stage_body(body: Any, enabled: frozenset, keys: tuple, split: int) -> _Staged:
    """``body`` checkified with an incoming error of ``keys`` (its leaves after the first ``split`` inputs).
    The metadata recorded is only what the body adds."""
    closed = body if isinstance(body, ClosedJaxpr) else ClosedJaxpr(body, [])
    cacheable = not any(isinstance(c, Tracer) for c in closed.consts)
    ck = (enabled, keys, split)
    if cacheable:
        hit = _body_cache.get(body, {}).get(ck)
        if hit is not None:
            return hit
    j = closed.jaxpr
    n_err = len(_leaf_avals(keys))
    box: list = []

    def fn(*vals: Any) -> list:
        before, errs, after = vals[:split], vals[split:split + n_err], vals[split + n_err:]
        err = _from_leaves(keys, list(errs), {})
        err, outs = checkify_jaxpr(j, closed.consts, enabled, err, *before, *after)
        keys_out = tuple(sorted(set(err._pred) | set(keys)))
        box.append((keys_out, err._metadata))
        return _leaves(err, keys_out) + list(outs)

    in_avals = list(j.in_avals[:split]) + _leaf_avals(keys) + list(j.in_avals[split:])
    staged, _ = stage(fn, in_avals)
    hoisted, consts = hoist_consts(staged)
    keys_out, meta = box[0]
    out = _Staged(hoisted, consts, keys, keys_out, meta)
    # Whether the body checks nothing: its error outputs are its error inputs, untouched.
    hj = hoisted.jaxpr
    err_in = hj.invars[len(consts) + split:len(consts) + split + n_err]
    out.passthrough = keys_out == keys and all(o is i for o, i in zip(hj.outvars[:n_err], err_in))
    if cacheable and not any(isinstance(c, Tracer) for c in consts):
        _body_cache.setdefault(body, {})[ck] = out
    return out


def _stage_bodies(bodies: list, enabled: frozenset, err: Error, splits: list) -> tuple[list[_Staged], tuple]:
    """Stage every body with one set of error keys that none of them adds to (a fixpoint)."""
    keys = err._keys()
    while True:
        staged = [_stage_body(b, enabled, keys, s) for b, s in zip(bodies, splits)]
        union = set(keys).union(*(st.keys_out for st in staged))
        if union == set(keys):
            return staged, keys
        keys = tuple(sorted(union))


def _no_checks(staged: list[_Staged], err: Error) -> bool:
    return all(st.passthrough for st in staged)


def _merge_metadata(err: Error, staged: list[_Staged]) -> dict:
    meta = dict(err._metadata)
    for st in staged:
        meta.update(st.metadata)
    return meta


def _call_rule(prim: Primitive, key: str = "jaxpr") -> Callable:
    """``jit_call``/``remat``-like (and the two halves of a linearized ``while``): one body, operands in
    order; the error goes in and out first."""

    def rule(err: Error, enabled: frozenset, where: str, *vals: Any, **params: Any) -> tuple[Error, list]:
        (st,), keys = _stage_bodies([params[key]], enabled, err, [0])
        if _no_checks([st], err):
            return err, _bind(prim, vals, params)
        new = dict(params)
        new[key] = st.jaxpr
        n_err = len(_leaf_avals(keys))
        if "donated_invars" in new:
            new["donated_invars"] = (False,) * (len(st.consts) + n_err) + tuple(new["donated_invars"])
        if "bwd" in new:  # while_lin's transpose is built for its own body: a changed body has none
            new["bwd"] = None
        outs = _bind(prim, (*st.consts, *_leaves(err, keys), *vals), new)
        out_err = _from_leaves(st.keys_out, outs[:n_err], _merge_metadata(err, [st]))
        return out_err, outs[n_err:]

    return rule


for _name in ("jit_call", "remat2", "checkpointed_while", "while_lin"):
    checkify_rules[registry[_name]] = _call_rule(registry[_name])


def _pmap_rule(err: Error, enabled: frozenset, where: str, *vals: Any, jaxpr: Any, in_axes: tuple,
               out_axes: tuple, donated_invars: tuple, **params: Any) -> tuple[Error, list]:
    """Each device checks its own part; the per-device errors come back mapped over the devices (as JAX's:
    ``Error.get`` reports each failing device, ``at mapped index i: ...``)."""
    from ftrans.core.axis_env import extend_axis_env

    with extend_axis_env(params["axis_name"], params["axis_size"], None):
        (st,), keys = _stage_bodies([jaxpr], enabled, err, [0])
    prim = registry["pmap"]
    if _no_checks([st], err):
        return err, _bind(prim, vals, dict(params, jaxpr=jaxpr, in_axes=in_axes, out_axes=out_axes,
                                           donated_invars=donated_invars))
    n_err = len(_leaf_avals(keys))
    lead = len(st.consts) + n_err
    outs = _bind(prim, (*st.consts, *_leaves(err, keys), *vals),
                 dict(params, jaxpr=st.jaxpr, in_axes=(None,) * lead + tuple(in_axes),
                      out_axes=(0,) * n_err + tuple(out_axes), donated_invars=(False,) * lead + tuple(donated_invars)))
    per_device = _from_leaves(keys, outs[:n_err], _merge_metadata(err, [st]))
    return per_device, outs[n_err:]


checkify_rules[registry["pmap"]] = _pmap_rule


def _shard_map_rule(err: Error, enabled: frozenset, where: str, *vals: Any, jaxpr: Any, in_names: tuple,
                    out_names: tuple, **params: Any) -> tuple[Error, list]:
    """Each device checks its own blocks; the per-device errors come back stacked over the devices (as JAX's:
    ``Error.get`` reports each failing device, ``at mapped index i: ...``)."""
    from ftrans.core.prims.shard_map import _body_env

    with _body_env(params):
        (st,), keys = _stage_bodies([jaxpr], enabled, err, [0])
    prim = registry["shard_map"]
    if _no_checks([st], err):
        return err, _bind(prim, vals, dict(params, jaxpr=jaxpr, in_names=in_names, out_names=out_names))
    n_err = len(_leaf_avals(keys))
    leaves = _leaves(err, keys)
    lead = [*st.consts, *leaves]
    unsplit = tuple(tuple(() for _ in range(np.ndim(x))) for x in lead)
    outs = _bind(prim, (*lead, *vals),
                 dict(params, jaxpr=st.jaxpr, in_names=unsplit + tuple(in_names),
                      out_names=(None,) * n_err + tuple(out_names)))
    per_device = _from_leaves(keys, outs[:n_err], _merge_metadata(err, [st]))
    return per_device, outs[n_err:]


checkify_rules[registry["shard_map"]] = _shard_map_rule


def _cond_rule(err: Error, enabled: frozenset, where: str, index: Any, *ops: Any,
               branches: tuple, **params: Any) -> tuple[Error, list]:
    staged, keys = _stage_bodies(list(branches), enabled, err, [0] * len(branches))
    if _no_checks(staged, err):
        return err, _bind(registry["cond"], (index, *ops), dict(params, branches=branches))
    bodies, consts = join_consts([(st.jaxpr, st.consts) for st in staged])
    n_err = len(_leaf_avals(keys))
    outs = _bind(registry["cond"], (index, *consts, *_leaves(err, keys), *ops), dict(params, branches=tuple(bodies)))
    return _from_leaves(keys, outs[:n_err], _merge_metadata(err, staged)), outs[n_err:]


checkify_rules[registry["cond"]] = _cond_rule


def _scan_rule(err: Error, enabled: frozenset, where: str, *vals: Any, jaxpr: Any, num_consts: int,
               num_carry: int, **params: Any) -> tuple[Error, list]:
    (st,), keys = _stage_bodies([jaxpr], enabled, err, [num_consts])
    if _no_checks([st], err):
        return err, _bind(registry["scan"], vals, dict(params, jaxpr=jaxpr, num_consts=num_consts,
                                                      num_carry=num_carry))
    n_err = len(_leaf_avals(keys))
    consts, rest = vals[:num_consts], vals[num_consts:]
    outs = _bind(registry["scan"], (*st.consts, *consts, *_leaves(err, keys), *rest),
                 dict(params, jaxpr=st.jaxpr, num_consts=len(st.consts) + num_consts, num_carry=num_carry + n_err))
    return _from_leaves(keys, outs[:n_err], _merge_metadata(err, [st])), outs[n_err:]


checkify_rules[registry["scan"]] = _scan_rule


def _while_rule(err: Error, enabled: frozenset, where: str, *vals: Any, cond_jaxpr: Any, body_jaxpr: Any,
                cond_nconsts: int, body_nconsts: int, **params: Any) -> tuple[Error, list]:
    """The carry gains the error. The condition's checks run on the initial carry before the loop and on
    each new carry at the end of the body, so the loop's condition itself only computes the predicate."""
    cconsts, bconsts = vals[:cond_nconsts], vals[cond_nconsts:cond_nconsts + body_nconsts]
    init = vals[cond_nconsts + body_nconsts:]
    # The body's check sites are numbered before the condition's (as in JAX: of two kinds of error, the one
    # whose site has the smaller number is reported).
    (bst, cst), keys = _stage_bodies([body_jaxpr, cond_jaxpr], enabled, err, [body_nconsts, cond_nconsts])
    if _no_checks([cst, bst], err):
        return err, _bind(registry["while"], vals, dict(params, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                                                        cond_nconsts=cond_nconsts, body_nconsts=body_nconsts))
    n_err = len(_leaf_avals(keys))
    c, b = cst.jaxpr.jaxpr, bst.jaxpr.jaxpr
    c_lead = [*cst.consts, *cconsts]
    b_lead = [*bst.consts, *bconsts]
    nc, nb = len(c_lead), len(b_lead)
    err_leaves = eval_jaxpr(c, [], *c_lead, *_leaves(err, keys), *init)[:n_err]

    def body_fn(*args: Any) -> list:
        bl, cl, carry = args[:nb], args[nb:nb + nc], args[nb + nc:]
        outs = eval_jaxpr(b, [], *bl, *carry)
        return list(eval_jaxpr(c, [], *cl, *outs)[:n_err]) + list(outs[n_err:])

    if cst not in bst.loops:  # (made once per pair of checked bodies, so a cached loop is the same program)
        body_closed, _ = stage(body_fn, list(b.in_avals[:nb]) + list(c.in_avals[:nc]) + list(b.in_avals[nb:]))
        cond_new = ClosedJaxpr(Jaxpr([], c.invars, c.eqns, c.outvars[n_err:]), [])
        bst.loops[cst] = (cond_new, *hoist_consts(body_closed))
    cond_new, body_new, body_consts = bst.loops[cst]
    outs = _bind(registry["while"], (*c_lead, *body_consts, *b_lead, *c_lead, *err_leaves, *init),
                 dict(params, cond_jaxpr=cond_new, body_jaxpr=body_new, cond_nconsts=nc,
                      body_nconsts=len(body_consts) + nb + nc))
    return _from_leaves(keys, outs[:n_err], _merge_metadata(err, [cst, bst])), outs[n_err:]


checkify_rules[registry["while"]] = _while_rule


def _differentiated(vals: Any) -> bool:
    """Whether the call is being differentiated (``jvp``/``grad`` of the checkified function): then the
    user's derivative rule runs, not the primal function, so there is nothing of it to check (JAX adds no
    checks there either)."""
    from ftrans.transforms.ad import JVPTracer

    return any(isinstance(v, JVPTracer) for v in vals)


def _custom_jvp_rule(err: Error, enabled: frozenset, where: str, *vals: Any, call_jaxpr: Any, jvp: Callable,
                     num_consts: int, **params: Any) -> tuple[Error, list]:
    """The primal function is checked; the user's JVP rule (reached when an outer transform differentiates
    the checkified program) runs unchecked, the error passing through it unchanged."""
    from ftrans.transforms.ad import Zero

    prim = registry["custom_jvp_call"]
    plain = dict(params, call_jaxpr=call_jaxpr, jvp=jvp, num_consts=num_consts)
    if _differentiated(vals):
        return err, _bind(prim, vals, plain)
    (st,), keys = _stage_bodies([call_jaxpr], enabled, err, [num_consts])
    if _no_checks([st], err):
        return err, _bind(prim, vals, plain)
    n_err = len(_leaf_avals(keys))
    lead = len(st.consts) + num_consts

    def jvp_new(primals: list, tangents: list) -> tuple[list, list]:
        errs = list(primals[lead:lead + n_err])
        p = list(primals[len(st.consts):lead]) + list(primals[lead + n_err:])
        t = list(tangents[len(st.consts):lead]) + list(tangents[lead + n_err:])
        outs, touts = jvp(p, t)
        return errs + list(outs), [Zero.from_primal_value(e) for e in errs] + list(touts)

    outs = _bind(prim, (*st.consts, *vals[:num_consts], *_leaves(err, keys), *vals[num_consts:]),
                 dict(params, call_jaxpr=st.jaxpr, jvp=jvp_new, num_consts=lead))
    return _from_leaves(keys, outs[:n_err], _merge_metadata(err, [st])), outs[n_err:]


checkify_rules[registry["custom_jvp_call"]] = _custom_jvp_rule


def _custom_vjp_rule(err: Error, enabled: frozenset, where: str, *vals: Any, call_jaxpr: Any, fwd: Callable,
                     bwd: Callable, num_consts: int, **params: Any) -> tuple[Error, list]:
    """The primal function is checked; the user's forward and backward functions (reached when an outer
    transform differentiates the checkified program) run unchecked, the error passing through."""
    from ftrans.core.trace import aval_of
    from ftrans.transforms.ad import Zero, tangent_aval

    prim = registry["custom_vjp_call"]
    plain = dict(params, call_jaxpr=call_jaxpr, fwd=fwd, bwd=bwd, num_consts=num_consts)
    if _differentiated(vals):
        return err, _bind(prim, vals, plain)
    (st,), keys = _stage_bodies([call_jaxpr], enabled, err, [num_consts])
    if _no_checks([st], err):
        return err, _bind(prim, vals, plain)
    n_err = len(_leaf_avals(keys))
    lead = len(st.consts) + num_consts
    err_leaves = _leaves(err, keys)
    err_tangents = [tangent_aval(aval_of(e)) for e in err_leaves]

    def fwd_new(primals: list, perturbed: Any) -> tuple[list, list, Any]:
        perturbed = list(perturbed)
        errs = list(primals[lead:lead + n_err])
        p = list(primals[len(st.consts):lead]) + list(primals[lead + n_err:])
        z = perturbed[len(st.consts):lead] + perturbed[lead + n_err:]
        outs, res, info = fwd(p, z)
        return errs + list(outs), res, info

    def bwd_new(info: Any, res: list, cts: list) -> list:
        return [Zero(a) for a in err_tangents] + list(bwd(info, res, list(cts)[n_err:]))

    fwd_new.__name__ = getattr(fwd, "__name__", "fwd")
    outs = _bind(prim, (*st.consts, *vals[:num_consts], *err_leaves, *vals[num_consts:]),
                 dict(params, call_jaxpr=st.jaxpr, fwd=fwd_new, bwd=bwd_new, num_consts=lead))
    return _from_leaves(keys, outs[:n_err], _merge_metadata(err, [st])), outs[n_err:]


checkify_rules[registry["custom_vjp_call"]] = _custom_vjp_rule


# ----------------------------------------------------------------------------
# The user's entry point


def checkify(f: Callable, errors: Any = user_checks) -> Callable:
    """``f`` made to return ``(err, out)``: its ``check``s, and the automatic checks in ``errors``,
    functionalized into the :class:`Error` ``err`` instead of raised.

    ``errors`` is a set of error categories: ``user_checks`` (the default), ``nan_checks``,
    ``div_checks``, ``index_checks``, or unions of them (``float_checks``,
    ``automatic_checks``, ``all_checks``). ``err.get()`` gives the first error's message
    (naming the user's line) or None; ``err.throw()`` raises it. Works inside and outside
    ``jit``, under ``vmap``, ``grad`` and ``jvp``, through ``cond``/``switch``, ``while_loop``
    and ``scan``.
    """
    enabled = frozenset(errors)

    @functools.wraps(f)
    @_tb.api_boundary
    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        box: list = []

        def flat() -> list:
            out = f(*args, **kwargs)
            leaves, tree = tree_util.tree_flatten(out)
            box.append(tree)
            return leaves

        # A static out-of-range index is clamped, as in JAX, and reported in the error when ``index_checks``
        # is enabled: the function checkify stages reports its errors as values, never raises while tracing.
        from ftrans.numpy._indexing import static_index_errors_reported_later

        with static_index_errors_reported_later():
            closed, _ = stage(flat, [])
        err, outs = checkify_jaxpr(closed.jaxpr, closed.consts, enabled, init_error)
        return err, tree_util.tree_unflatten(box[0], outs)

    return checked
