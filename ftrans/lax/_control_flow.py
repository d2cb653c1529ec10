"""``lax.cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan`` and ``map``: JAX's signatures.

Each traces the user's functions into jaxprs (``stage``), hoists whatever they
captured (outer tracers, arrays) into explicit operands, checks the types with
errors that name the branch or carry path involved, and binds one primitive.
The primitive is bound even when the operands are concrete, so eager,
``jit``, ``grad`` and ``vmap`` all run the same staged bodies; only
``disable_jit`` runs the user's Python directly, as JAX does.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes, ir
from ftrans.core import key_reuse as _kr
from ftrans.core import pytrees as tree_util
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray
from ftrans.core.config import config
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal, hoist_consts, jaxpr_has_effects
from ftrans.core.keys import PRNGKeyArray, is_key, is_key_dtype, key_data_of
from ftrans.core.operands import as_operand, dtype_weak, promote_dtypes
from ftrans.core.prims.control_flow import cond_p, join_consts, same_type, scan_p, type_str, while_p
from ftrans.core.prims.random import random_unwrap_p
from ftrans.core.sharding_rules import without_dim
from ftrans.core.trace import Tracer, stage
from ftrans.errors import ConcretizationTypeError, FtransTypeError, FtransValueError
from ftrans.lax import _ops as lax
from ftrans.transforms import jit as _jit_mod
from ftrans.transforms import refs as _refs
from ftrans.transforms.batching import to_axis_owner, vmap

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "associative_scan"]

_builtin_map = map


class _Missing:
    def __repr__(self) -> str:
        return "<no operand>"


_MISSING = _Missing()


# ----------------------------------------------------------------------------
# Tracing user functions


def _operand(x: Any, what: str) -> Any:
    if isinstance(x, (Array, Tracer)):
        return x
    if jax_array_argument(x):  # as JAX: such an object is converted explicitly or registered as a pytree
        raise jax_array_argument_error(what)
    try:
        out = as_operand(x)
    except TypeError:
        raise FtransTypeError(
            f"{what} has type {type(x).__name__}, which is not an array type (use arrays, NumPy arrays or "
            "Python scalars in the pytrees passed to and returned from control-flow functions)"
        ) from None
    return out if isinstance(out, (Array, Tracer)) else Array._new(np.asarray(out), False)


def _flatten_operands(tree_val: Any, what: str) -> tuple[list, Any]:
    paths, tree = tree_util.tree_flatten_with_path(tree_val)
    return [_operand(x, f"{what}{tree_util.keystr(p)}") for p, x in paths], tree


def _tuple_tree(*trees: Any) -> Any:
    """The structure of a tuple whose elements have the given structures (a function's argument list)."""
    return tree_util.tree_structure(tuple(tree_util.tree_unflatten(t, [0] * t.num_leaves) for t in trees))


def _aval(x: Any) -> ShapedArray:
    return x.aval


def _leaf_paths(tree: Any) -> list[str]:
    n = tree.num_leaves
    dummy = tree_util.tree_unflatten(tree, list(range(n)))
    return [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(dummy)[0]]


class _Traced:
    """A user function traced to a jaxpr whose captured constants are leading inputs."""

    __slots__ = ("jaxpr", "consts", "out_tree", "out_avals")

    def __init__(self, jaxpr: ClosedJaxpr, consts: list, out_tree: Any, out_vma: list | None = None):
        self.jaxpr = jaxpr
        self.consts = consts
        self.out_tree = out_tree
        # inside shard_map, the outputs' types as the function returned them (a pcast'ed value is its
        # operand's variable, typed as varying along more axes)
        self.out_avals = [_with_vma(a, v) for a, v in zip(jaxpr.out_avals, out_vma)] if out_vma else \
            jaxpr.out_avals


def _with_vma(a: ShapedArray, vma: frozenset) -> ShapedArray:
    from ftrans.core.avals import VaryingAval

    return VaryingAval(a, vma) if vma and type(a) in (ShapedArray, VaryingAval) else a


# Traces of control-flow bodies, per function object (weakly) and then per abstract signature and trace
# context: calling lax.while_loop / cond / switch again with the same functions and argument types reuses the
# jaxprs without running the Python again, as JAX does.
_TRACE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TRACE_CACHE_PER_FUN = 8
_TRACE_CACHE_LOCK = threading.Lock()


def _clear_trace_cache() -> None:
    with _TRACE_CACHE_LOCK:
        _TRACE_CACHE.clear()


_jit_mod._CACHE_CLEARERS.append(_clear_trace_cache)  # ftrans.clear_caches empties it, as JAX's does


def _trace_cache_key(in_tree: Any, in_avals: list[ShapedArray], what: str, prim: str) -> tuple | None:
    """What a body's trace depends on besides the function; None where the trace must not be reused (a
    source location forced; a trace that met a recursive cond call, ``_trace``).  Refs need no exception: a trace that touches a ref
    the body does not own is abandoned (``NeedsRef``) before it could be remembered, and the bodies that
    thread refs are fresh wrappers per call."""
    from ftrans.core import platform as _platform
    from ftrans.core import trace as _trace_mod
    from ftrans.core.axis_env import axis_env
    from ftrans.transforms.passes.pipeline import pipeline_state

    st = _trace_mod.state
    if st.source_override is not None:
        return None
    # (``what`` names the body in error messages only: a function that is both branches of a cond, or both
    # bodies of a loop, is traced once, as in JAX)
    return (in_tree, tuple([(a.shape, a.dtype, a.weak_type, _vma(a)) for a in in_avals]), prim, st.name_stack,
            config.enable_x64, config.debug_nans, config.debug_infs,
            tuple([(f.name, f.size) for f in axis_env.frames if f.name is not None]), pipeline_state(),
            _platform.platform_override.get(), config.scoped_here())


def _trace(fun: Callable, in_tree: Any, in_avals: list[ShapedArray], what: str,
           post: Callable[[Any], Any] | None = None, prim: str = "cond") -> _Traced:
    """Stage ``fun(*unflatten(in_tree, args))``; ``post`` may check/reshape its output first.

    ``prim`` names the primitive in the error for a body that returns a mutable array reference.
    Without ``post``, the result is remembered per function and signature (see ``_TRACE_CACHE``);
    a trace that captured a tracer of an enclosing transform is not (that tracer belongs to this call)."""
    key = None
    if post is None:
        try:
            per_fun = _TRACE_CACHE.get(fun)
        except TypeError:  # not weakly referenceable or not hashable: never cached
            per_fun = key = None
        else:
            key = _trace_cache_key(in_tree, in_avals, what, prim)
            hit = per_fun.get(key) if per_fun is not None and key is not None else None
            if hit is not None:
                return hit
    calls = _REC.calls_made
    traced = _trace_uncached(fun, in_tree, in_avals, what, post, prim)
    # a trace that met a recursive cond call holds placeholders of that call (``_Recursion``): never reused
    if key is not None and _REC.calls_made == calls and not any(isinstance(c, Tracer) for c in traced.consts):
        with _TRACE_CACHE_LOCK:
            try:
                per_fun = _TRACE_CACHE.setdefault(fun, OrderedDict())
            except TypeError:
                return traced
            per_fun[key] = traced
            while len(per_fun) > _TRACE_CACHE_PER_FUN:
                per_fun.popitem(last=False)
    return traced


def _trace_uncached(fun: Callable, in_tree: Any, in_avals: list[ShapedArray], what: str,
                    post: Callable[[Any], Any] | None, prim: str) -> _Traced:
    box: list = []

    def flat(*ins: Any) -> list:
        out = fun(*tree_util.tree_unflatten(in_tree, ins))
        if _refs.any_refs():
            _refs.no_refs_out(out, prim, fun)
        if post is not None:
            out = post(out)
        if not any(is_key_dtype(getattr(x, "dtype", None)) for x in ins):
            out = _physical_keys(out)
        leaves, tree = _flatten_operands(out, f"the output of {what} at ")
        box.append(tree)
        vma.extend(_vma(getattr(x, "aval", None)) for x in leaves)
        return leaves

    vma: list = []
    closed, _ = stage(flat, in_avals)
    body, consts = hoist_consts(closed)
    ir.check_effects_allowed(body, "while" if prim == "while_loop" else prim, ir.control_flow_allowed_effects)
    return _Traced(body, consts, box[0], vma if any(vma) else None)


def _physical_keys(out: Any) -> Any:
    """``out`` with each key-typed key array (made inside a body from a traced seed or key data) as one over its
    ``uint32`` data: a body whose operands hold no key-typed value gives keys as its operands carry them."""
    def typed(x: Any) -> bool:  # a key-typed key array, or (a body flattened by its caller) its value
        return x._typed if is_key(x) else is_key_dtype(getattr(x, "dtype", None))

    def conv(x: Any) -> Any:
        if is_key(x) and x._typed:
            return _kr.alias(x, PRNGKeyArray(x._impl, key_data_of(x)))
        if not is_key(x) and is_key_dtype(getattr(x, "dtype", None)):
            return random_unwrap_p.bind(x)
        return x

    leaves = tree_util.tree_leaves(out, is_leaf=is_key)
    if not any(typed(x) for x in leaves):
        return out
    return tree_util.tree_map(conv, out, is_leaf=is_key)


def _promote_weak(init: list, init_avals: list[ShapedArray], out_avals: list[ShapedArray]) -> tuple[list, bool]:
    """Weakly typed carries (Python scalars) take the type the loop body gives them, as in JAX."""
    changed = False
    new = list(init)
    for i, (a, o) in enumerate(zip(init_avals, out_avals)):
        if a.weak_type and not same_type(a, o) and a.shape == o.shape:
            d, _ = dtypes.promote(((a.dtype, True), (o.dtype, o.weak_type)))
            if d != a.dtype:
                new[i] = lax.convert_element_type(init[i], d)
                changed = True
    return new, changed


def _carry_mismatch(name: str, what_out: str, paths: list[str], init_avals: list[ShapedArray],
                    out_avals: list[ShapedArray]) -> None:
    bad = [(p, a, o) for p, a, o in zip(paths, init_avals, out_avals) if not same_type(a, o)]
    if bad:
        details = "; ".join(f"carry{p} is {type_str(a)} going in but {type_str(o)} coming out"
                            for p, a, o in bad)
        raise FtransTypeError(
            f"{name}: {what_out} must have the same types as the initial carry, but {details}. "
            "Make the body return values of the carry's shapes and dtypes (convert with .astype, or start "
            "from a value of the right dtype)"
        )
    # Over Explicit mesh axes the layout is part of the type (both typed: an untyped value is one ftrans
    # has no rule for, left to the partitioner).
    laid = [(p, a, o) for p, a, o in zip(paths, init_avals, out_avals) if _layouts_differ(a, o)]
    if laid:
        p, a, o = laid[0]
        raise FtransTypeError(
            f"{name} body function carry input and carry output must have equal types, but they differ:\n\n"
            f"The input carry component carry{p} has type {a} but the corresponding output carry component has "
            f"type {o}.\n\nRevise the function so that all output types match the corresponding input types.")
    # Inside shard_map: a carry may not come out varying along manual mesh axes it went in invariant along.
    vary = [(p, a, o) for p, a, o in zip(paths, init_avals, out_avals) if _vma(o) - _vma(a)]
    if vary:
        details = "; ".join(f"carry{p} is {type_str(a)}{_vma_str(a)} going in but {type_str(o)}{_vma_str(o)} "
                            "coming out, so the manual axis types do not match" for p, a, o in vary)
        fixes = [f"applying `jax.lax.pcast(..., {_axes_tuple(_vma(o) - _vma(a))}, to='varying')` to the initial carry "
                 f"value corresponding to carry{p}" for p, a, o in vary]
        raise FtransTypeError(
            f"{name}: {what_out} must have the same types as the initial carry, but {details}. "
            f"This might be fixed by{_join_fixes(fixes)}")


def _layouts_differ(a: Any, b: Any) -> bool:
    """Two sharding types that lay a value out differently (JAX's types differ); False when either is untyped."""
    sa, sb = getattr(a, "typed_sharding", None), getattr(b, "typed_sharding", None)
    if sa is None or sb is None:
        return False
    return sa.mesh != sb.mesh or tuple(sa.spec) != tuple(sb.spec)


def _vma(a: Any) -> frozenset:
    """The manual mesh axes a value of a ``shard_map`` body varies along (none elsewhere)."""
    return getattr(a, "vma", frozenset())


def _vma_str(a: ShapedArray) -> str:
    return "{V:" + ",".join(str(n) for n in _axes_tuple(a.vma)) + "}" if _vma(a) else ""


def _axes_tuple(axes: Any) -> tuple:
    return tuple(sorted(axes, key=str))


def _join_fixes(fixes: list[str]) -> str:
    """JAX's list of suggested fixes: one inline, several as bullets."""
    if len(fixes) == 1:
        return " " + fixes[0] + "."
    return ":\n" + "\n".join(f"  * {d};" for d in fixes[:-1]) + f"\n  * {fixes[-1]}."


def _check_same_tree(name: str, what: str, want: Any, got: Any) -> None:
    if want != got:
        raise FtransTypeError(f"{name}: {what} must have the same pytree structure as the initial carry: "
                              f"the carry is {want} but the body returned {got}")


def _join_consts(traced: Sequence[_Traced]) -> tuple[list[ClosedJaxpr], list]:
    """Give every branch the same leading inputs: the union of what all of them captured."""
    return join_consts([(t.jaxpr, t.consts) for t in traced])


def _forwarded_carries(jaxpr: ClosedJaxpr, nconsts: int, ncarry: int) -> list[int]:
    """The carries a loop body returns unchanged (output ``i`` is input carry ``i``): read-only, so they go
    to the loop as constants, and the loop's result for them is the initial value (as JAX forwards them,
    so a vmap keeps such a carry unbatched)."""
    j = jaxpr.jaxpr
    return [i for i in range(ncarry) if j.outvars[i] is j.invars[nconsts + i]]


def _without_carries(jaxpr: ClosedJaxpr, nconsts: int, ncarry: int, fwd: list[int], outputs: bool) -> ClosedJaxpr:
    """``jaxpr`` with the carries ``fwd`` moved behind its constants (and, ``outputs``, dropped from its
    carry outputs)."""
    j = jaxpr.jaxpr
    carries = j.invars[nconsts:nconsts + ncarry]
    keep = [i for i in range(ncarry) if i not in fwd]
    invars = (j.invars[:nconsts] + [carries[i] for i in fwd] + [carries[i] for i in keep]
              + j.invars[nconsts + ncarry:])
    outvars = [j.outvars[i] for i in keep] + j.outvars[ncarry:] if outputs else j.outvars
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, outvars), jaxpr.consts)


def _check_callable(name: str, **funs: Any) -> None:
    for arg, f in funs.items():
        if not callable(f):
            raise FtransTypeError(f"{name}: {arg} must be callable, got {type(f).__name__}")


def _concrete_scalar(x: Any) -> Any | None:
    """The Python value of a concrete scalar, or None when it is traced."""
    if isinstance(x, Tracer):
        x = x.to_concrete_value()
        if x is None:
            return None
    return np.asarray(x._value if isinstance(x, Array) else x).item()


# ----------------------------------------------------------------------------
# cond and switch


def _check_branch_outputs(name: str, traced: list[_Traced], labels: list[str]) -> None:
    first = traced[0]
    for t, label in zip(traced[1:], labels[1:]):
        if t.out_tree != first.out_tree:
            raise FtransTypeError(
                f"{name}: {labels[0]} and {label} must return the same pytree structure, but {labels[0]} returns "
                f"{first.out_tree} and {label} returns {t.out_tree}"
            )
        paths = _leaf_paths(first.out_tree)
        for p, a, b in zip(paths, first.out_avals, t.out_avals):
            if not same_type(a, b):
                raise FtransTypeError(
                    f"{name}: {labels[0]} and {label} must return the same types, but at output{p or ''} "
                    f"{labels[0]} returns {type_str(a)} and {label} returns {type_str(b)}. Make both branches "
                    "return the same shapes and dtypes (convert with .astype or broadcast)"
                )
        for p, a, b in zip(paths, first.out_avals, t.out_avals):
            if _layouts_differ(a, b):
                (la, ta), (lb, tb) = (labels[0], a), (label, b)
                if la == "false_fun":  # (cond's branches are stored false first; JAX names true_fun first)
                    (la, ta), (lb, tb) = (lb, tb), (la, ta)
                raise FtransTypeError(
                    f"{name} branches must have equal output types but they differ.\n\nThe output{p or ''} of "
                    f"{la} has type {ta} but the corresponding output of {lb} has type {tb}.\n\nRevise {la} "
                    f"and/or {lb} so that all output types match.")
        # Inside shard_map: the branches' results must vary along the same manual mesh axes.
        fixes = [f"applying `jax.lax.pcast(..., {_axes_tuple(_vma(y) - _vma(x))}, to='varying')` to the output of "
                 f"{n}{p or ''}"
                 for p, a, b in zip(paths, first.out_avals, t.out_avals) if _vma(a) != _vma(b)
                 for n, x, y in ((labels[0], a, b), (label, b, a)) if _vma(y) - _vma(x)]
        if fixes:
            raise FtransTypeError(
                f"{name}: {labels[0]} and {label} must return the same types, but the manual axis types of their "
                f"outputs do not match (the values vary along different manual mesh axes of the enclosing "
                f"shard_map). This might be fixed by{_join_fixes(fixes)}")


def _bind_cond(name: str, index: Any, branches: Sequence[Callable], labels: list[str], operands: tuple) -> Any:
    site = _recursion_site(branches)
    if site is not None:
        rec = _REC.active.get(site[0])
        if rec is not None and rec.matches(index, operands, site):
            return rec.call(index, operands, site)
        if rec is None:
            return _bind_cond_watching(name, index, branches, labels, operands, site)
    ops, ops_tree = _flatten_operands(operands, "operand")
    avals = [_aval(x) for x in ops]
    checked: list | None = [] if _kr.hot and _kr.tracking() else None
    if checked is not None:  # key-reuse checking: each branch's keys analysed, a key consumed if any consumes it
        branches = [_key_checked_branch(b, checked) for b in branches]
    traced = [_trace(b, ops_tree, avals, label) for b, label in zip(branches, labels)]
    cast = _vary_like_index(index, ops, traced)
    if cast is not None:  # the operands a branch casts with pvary, cast before the cond instead: traced again
        ops, avals = cast, [_aval(x) for x in cast]
        traced = [_trace(b, ops_tree, avals, label) for b, label in zip(branches, labels)]
    if checked:
        _kr.apply(_kr.merged(checked), _kr.key_leaves(operands), name, name)
    _check_branch_outputs(name, traced, labels)
    bodies, consts = _join_consts(traced)
    outs = _typed_like_branches(_cond_forwarding(index, bodies, [*consts, *ops]), traced)
    return tree_util.tree_unflatten(traced[0].out_tree, outs)


def _vary_like_index(index: Any, ops: list, traced: list) -> list | None:
    """In a ``check_vma`` shard_map body, a cond whose index varies: the operands some branch casts with
    ``pvary`` (an invariant operand meeting a varying value), cast before the cond instead (None when there
    are none).  Their transposes' sums then happen outside the branches: devices that take different
    branches would wait on each other's collectives inside them."""
    from ftrans.core import trace as _tr

    if _tr.state.vma_hook is None:
        return None
    iv = _vma(getattr(index, "aval", None))
    if not iv:
        return None
    need: dict = {}
    for t in traced:
        jaxpr = t.jaxpr.jaxpr
        deps = {v: {k - len(t.consts)} for k, v in enumerate(jaxpr.invars) if k >= len(t.consts)}
        for e in jaxpr.eqns:  # the operands each value derives from
            d = set().union(*[deps.get(v, ()) for v in e.invars if not isinstance(v, Literal)])
            if e.primitive.name == "pvary" and iv.intersection(e.params["axes"]):  # axes the branches diverge on
                for k in d:
                    need.setdefault(k, set()).update(iv.intersection(e.params["axes"]))
            for v in e.outvars:
                deps[v] = d
    if not need:
        return None
    from ftrans.transforms.shard_map import pvary_tracer

    return [pvary_tracer(o, tuple(sorted(need[k], key=str))) if k in need else o for k, o in enumerate(ops)]


def _key_checked_branch(b: Callable, frames: list) -> Callable:
    return lambda *ops: _kr.traced_body(b, ops, "cond", frames)


def _typed_like_branches(outs: list, traced: list) -> list:
    """Inside shard_map: a cond's results vary along the manual axes its branches' results were typed with
    (a pcast in a branch is in no equation of its jaxpr)."""
    if not any(_vma(a) for t in traced for a in t.out_avals):
        return outs
    from ftrans.transforms.shard_map import pvary_tracer

    return [pvary_tracer(o, tuple(frozenset().union(*(_vma(t.out_avals[k]) for t in traced))))
            for k, o in enumerate(outs)]


def _cond_forwarding(index: Any, bodies: list[ClosedJaxpr], args: list) -> list:
    """``cond_p`` of ``bodies`` on ``args``, except that an output every branch returns straight from the
    same input is that input (as JAX forwards it: a vmap then keeps it unbatched, and it is the very
    object passed in)."""
    args = to_axis_owner(bodies, [index, *args])
    index, args = args[0], args[1:]
    js = [b.jaxpr for b in bodies]
    src: dict[int, int] = {}
    for o, v in enumerate(js[0].outvars):
        k = next((k for k, w in enumerate(js[0].invars) if w is v), None)
        if k is not None and all(j.outvars[o] is j.invars[k] for j in js[1:]):
            src[o] = k
    if not src:
        return cond_p.bind(index, *args, branches=tuple(bodies))
    keep = [o for o in range(len(js[0].outvars)) if o not in src]
    trimmed = [ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, [j.outvars[o] for o in keep]), b.consts)
               for j, b in zip(js, bodies)]
    rest: Any = ()
    if keep or any(jaxpr_has_effects(b) for b in trimmed):
        rest = cond_p.bind(index, *args, branches=tuple(trimmed))
    rest = iter(rest)
    return [args[src[o]] if o in src else next(rest) for o in range(len(js[0].outvars))]


# ----------------------------------------------------------------------------
# Recursion through cond/switch (docs/control_flow.md, "Recursion").  A cond whose branches re-enter the same
# cond call (same call site, same branch functions, same types of operands and of the arrays the branches
# close over) would trace forever.  While a cond is traced it is registered here; the inner call returns
# placeholders of the outer call's output types and records its state (index, operands, closed-over arrays).
# A branch that returns those placeholders unchanged is a tail call, and the whole recursion becomes a
# ``while_loop`` over that state; any other use of the recursive result is an error.

class _RecState(threading.local):
    def __init__(self) -> None:
        self.active: dict = {}
        # recursive calls answered with placeholders so far: a body traced while it changed is not cached
        self.calls_made = 0


_REC = _RecState()  # per thread: tracing is per thread
_STATE_TYPES = (Tracer, Array, np.ndarray, np.generic, float, int, complex)


def _is_state(v: Any) -> bool:
    return isinstance(v, _STATE_TYPES) and not isinstance(v, bool)


class _NeedOutputs(Exception):
    """Internal: the recursion was re-entered before any branch's output types were known."""


def _recursion_site(branches: Sequence[Callable]) -> tuple | None:
    """(key, closed-over arrays, other closed-over values) of a cond call, or None for non-Python branches."""
    import sys

    codes, cells, fixed = [], [], []
    for b in branches:
        code = getattr(b, "__code__", None)
        if code is None:
            return None
        codes.append(code)
        for c in b.__closure__ or ():
            try:
                v = c.cell_contents
            except ValueError:
                return None
            (cells if _is_state(v) else fixed).append(v)
    f = sys._getframe(3)  # the user's call of cond/switch
    return (f.f_code, f.f_lasti, tuple(codes)), cells, fixed


def _same_fixed(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        try:
            if not bool(x == y):
                return False
        except Exception:
            return False
    return True


def _state_avals(index: Any, operands: tuple, cells: list) -> list:
    ops, _ = _flatten_operands(operands, "operand")
    return [(a.shape, a.dtype) for a in _builtin_map(_aval, [index, *ops, *[_operand(c, 'a closed-over value') for c in cells]])]


def _with_cells(b: Callable, vals: Any) -> Callable:
    import types

    if not b.__closure__:
        return b
    new = []
    for c in b.__closure__:
        new.append(types.CellType(next(vals)) if _is_state(c.cell_contents) else c)
    f = types.FunctionType(b.__code__, b.__globals__, b.__name__, b.__defaults__, tuple(new))
    f.__kwdefaults__ = b.__kwdefaults__
    return f


class _Recursion:
    def __init__(self, index: Any, operands: tuple, site: tuple):
        self.avals = _state_avals(index, operands, site[1])
        self.fixed = site[2]
        self.out_tree = None
        self.out_avals: list | None = None
        self.calls: list = []
        self.placeholders: list = []

    def matches(self, index: Any, operands: tuple, site: tuple) -> bool:
        return _same_fixed(self.fixed, site[2]) and _state_avals(index, operands, site[1]) == self.avals

    def call(self, index: Any, operands: tuple, site: tuple) -> Any:
        _REC.calls_made += 1
        if self.out_avals is None:
            raise _NeedOutputs()
        ops, _ = _flatten_operands(operands, "operand")
        self.calls.append([index, *ops, *site[1]])
        ph = [Array._new(np.zeros(a.shape, a.dtype), a.weak_type) for a in self.out_avals]
        self.placeholders.append(ph)
        return tree_util.tree_unflatten(self.out_tree, ph)


def _not_tail(name: str) -> FtransValueError:
    return FtransValueError(
        f"{name}: this function calls itself from inside a branch of the {name} it is tracing, and uses the "
        "result of that call in a further computation (or calls itself more than once). Only tail recursion "
        "is supported under tracing: the recursive call must be the branch's whole result, e.g. "
        "`lax.cond(x <= 1, lambda: acc, lambda: f(acc * x, x - 1))` (carry the pending work in an accumulator "
        "argument), or write the loop with lax.while_loop"
    )


def _bind_cond_watching(name: str, index: Any, branches: Sequence[Callable], labels: list[str], operands: tuple,
                        site: tuple) -> Any:
    key, cells, _ = site
    rec = _Recursion(index, operands, site)
    _REC.active[key] = rec
    try:
        ops, ops_tree = _flatten_operands(operands, "operand")
        avals = [_aval(x) for x in ops]
        traced: list = []
        recursive = []
        checked: list | None = [] if _kr.hot and _kr.tracking() else None  # key-reuse checking (_bind_cond)
        for b, label in zip(branches, labels):
            rec.calls = []
            try:
                t = _trace(b if checked is None else _key_checked_branch(b, checked), ops_tree, avals, label,
                           prim=name)
            except _NeedOutputs:
                recursive.append(True)
                traced.append(None)
                continue
            recursive.append(bool(rec.calls))
            traced.append(None if rec.calls else t)
            if rec.out_avals is None and not rec.calls:
                rec.out_avals, rec.out_tree = list(t.out_avals), t.out_tree
        if not any(recursive):
            cast = _vary_like_index(index, ops, traced)
            if cast is not None:  # as in _bind_cond
                ops, avals = cast, [_aval(x) for x in cast]
                traced = [_trace(b, ops_tree, avals, label, prim=name) for b, label in zip(branches, labels)]
            if checked:
                _kr.apply(_kr.merged(checked), _kr.key_leaves(operands), name, name)
            _check_branch_outputs(name, traced, labels)
            bodies, consts = _join_consts(traced)
            outs = _typed_like_branches(_cond_forwarding(index, bodies, [*consts, *ops]), traced)
            return tree_util.tree_unflatten(traced[0].out_tree, outs)
        if rec.out_avals is None:
            raise FtransValueError(
                f"{name}: every branch calls the function being traced again, so the recursion never ends; "
                "give one branch a result that does not recurse")
        return _recursion_loop(name, rec, index, ops, ops_tree, cells, branches, labels, recursive)
    finally:
        del _REC.active[key]


def _recursion_loop(name: str, rec: _Recursion, index: Any, ops: list, ops_tree: Any, cells: list,
                    branches: Sequence[Callable], labels: list[str], recursive: list[bool]) -> Any:
    n_ops = len(ops)
    counts = [sum(_is_state(c.cell_contents) for c in (b.__closure__ or ())) for b in branches]
    starts = [sum(counts[:i]) for i in range(len(branches))]
    state0 = [index, *ops, *[_operand(c, 'a closed-over value') for c in cells]]

    def call_branch(i: int, st: list) -> Any:
        cl = st[1 + n_ops:]
        b = _with_cells(branches[i], iter(cl[starts[i]:starts[i] + counts[i]]))
        return b(*tree_util.tree_unflatten(ops_tree, st[1:1 + n_ops]))

    def step_branch(i: int) -> Callable:
        def f(*st: Any) -> list:
            st = list(st)
            if not recursive[i]:
                return st
            rec.calls, rec.placeholders = [], []
            out = call_branch(i, st)
            leaves = tree_util.tree_leaves(out)
            if len(rec.calls) != 1 or len(leaves) != len(rec.placeholders[0]) or \
                    any(a is not b for a, b in zip(leaves, rec.placeholders[0])):
                raise _not_tail(name)
            return rec.calls[0]
        return f

    def final_branch(i: int) -> Callable:
        def f(*st: Any) -> list:
            if recursive[i]:
                return [Array._new(np.zeros(a.shape, a.dtype), a.weak_type) for a in rec.out_avals]
            return tree_util.tree_leaves(call_branch(i, list(st)))
        return f

    def switch_on(fns: list, st: list) -> list:
        avals = [_aval(x) for x in st]
        traced = [_trace(f, _tuple_tree(*[tree_util.tree_structure(0)] * len(st)), avals, labels[i])
                  for i, f in enumerate(fns)]
        bodies, consts = _join_consts(traced)
        return list(cond_p.bind(st[0], *consts, *st, branches=tuple(bodies)))

    rec_ids = [i for i, r in enumerate(recursive) if r]

    def keep_going(st: tuple) -> Any:
        out = lax.eq(st[0], np.int32(rec_ids[0]))
        for i in rec_ids[1:]:
            out = lax.bitwise_or(out, lax.eq(st[0], np.int32(i)))
        return out

    def body(st: tuple) -> tuple:
        return tuple(switch_on([step_branch(i) for i in range(len(branches))], list(st)))

    final_state = while_loop(keep_going, body, tuple(state0))
    outs = switch_on([final_branch(i) for i in range(len(branches))], list(final_state))
    return tree_util.tree_unflatten(rec.out_tree, outs)


def _operands(name: str, operands: tuple, operand: Any) -> tuple:
    if operand is not _MISSING:
        if operands:
            raise FtransTypeError(f"{name}: pass either positional operands or operand=, not both")
        return (operand,)
    return operands


@_tb.api_boundary
def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any, operand: Any = _MISSING) -> Any:
    """JAX's ``lax.cond``: ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one primitive.

    JAX's older five-argument form ``cond(pred, true_operand, true_fun, false_operand, false_fun)``,
    each branch with its own operand, is still accepted (libraries such as NumPyro use it).
    """
    if (not callable(true_fun) and callable(false_fun) and len(operands) == 2 and callable(operands[1])
            and operand is _MISSING):
        t_op, t_fun, f_op, f_fun = true_fun, false_fun, operands[0], operands[1]
        return cond(pred, lambda t, f: t_fun(t), lambda t, f: f_fun(f), t_op, f_op)
    if _refs.any_refs():  # refs among the operands or closed over by a branch are threaded (transforms/refs.py)
        ops = _operands("cond", operands, operand)
        return _refs.branches(lambda fs, vals: _cond_plain(pred, fs[1], fs[0], *vals), "cond",
                              [false_fun, true_fun], ops,
                              lambda fs, vals: _cond_plain(pred, true_fun, false_fun, *operands, operand=operand))
    return _cond_plain(pred, true_fun, false_fun, *operands, operand=operand)


def _cond_plain(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any, operand: Any = _MISSING) -> Any:
    _check_callable("cond", true_fun=true_fun, false_fun=false_fun)
    operands = _operands("cond", operands, operand)
    if pred is None:
        raise FtransTypeError("cond: the predicate is None; pass a boolean scalar")
    if isinstance(pred, (list, tuple)):
        raise FtransTypeError(f"cond: the predicate must be a scalar, got a {type(pred).__name__}")
    pred = _operand(pred, "the predicate")
    pa = pred.aval
    if pa.shape != ():
        raise FtransTypeError(
            f"cond: the predicate must be a scalar, got {type_str(pa)}. For an elementwise choice use "
            "jnp.where; under vmap a batched scalar predicate is handled for you"
        )
    if pa.dtype != dtypes.bool_:
        if dtypes.issubdtype(pa.dtype, np.integer) or dtypes.is_float(pa.dtype):
            pred = lax.ne(pred, lax.convert_element_type(0, pa.dtype))
        else:
            raise FtransTypeError(f"cond: the predicate must be a boolean or numeric scalar, got {type_str(pa)}")
    if config.disable_jit:
        v = _concrete_scalar(pred)
        if v is not None:
            return true_fun(*operands) if v else false_fun(*operands)
    index = lax.convert_element_type(pred, np.int32)
    return _bind_cond("cond", index, [false_fun, true_fun], ["false_fun", "true_fun"], operands)


@_tb.api_boundary
def switch(index: Any, branches: Sequence[Callable], *operands: Any, operand: Any = _MISSING) -> Any:
    """JAX's ``lax.switch``: ``branches[index](*operands)``, the index clamped into range."""
    if _refs.any_refs() and isinstance(branches, (list, tuple)) and branches:
        ops = _operands("switch", operands, operand)
        return _refs.branches(lambda fs, vals: _switch_plain(index, fs, *vals), "switch", list(branches), ops,
                              lambda fs, vals: _switch_plain(index, branches, *operands, operand=operand))
    return _switch_plain(index, branches, *operands, operand=operand)


def _switch_plain(index: Any, branches: Sequence[Callable], *operands: Any, operand: Any = _MISSING) -> Any:
    if not isinstance(branches, (list, tuple)) or not branches:
        raise FtransValueError("switch: branches must be a non-empty sequence of functions")
    _check_callable("switch", **{f"branches[{i}]": b for i, b in enumerate(branches)})
    operands = _operands("switch", operands, operand)
    if isinstance(index, (list, tuple)):
        raise FtransTypeError(f"switch: the index must be an integer scalar, got a {type(index).__name__}")
    index = _operand(index, "the index")
    ia = index.aval
    if ia.shape != () or not dtypes.issubdtype(ia.dtype, np.integer):
        raise FtransTypeError(
            f"switch: the index must be an integer scalar, got {type_str(ia)}. Convert a boolean or float with "
            ".astype(jnp.int32), or use lax.cond for a boolean predicate"
        )
    n = len(branches)
    if config.disable_jit:
        v = _concrete_scalar(index)
        if v is not None:
            return branches[min(max(int(v), 0), n - 1)](*operands)
    index = lax.convert_element_type(index, np.int32)
    if n == 1:
        return branches[0](*operands)
    index = lax.clamp(np.int32(0), index, np.int32(n - 1))
    return _bind_cond("switch", index, list(branches), [f"branches[{i}]" for i in range(n)], operands)


# ----------------------------------------------------------------------------
# while_loop


@_tb.api_boundary
def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """JAX's ``lax.while_loop``: repeat ``body_fun`` while ``cond_fun`` holds, as one primitive."""
    if _refs.any_refs():  # refs in the carry or closed over are threaded (transforms/refs.py)
        _check_callable("while_loop", cond_fun=cond_fun, body_fun=body_fun)
        return _refs.while_loop(_while_plain, cond_fun, body_fun, init_val)
    return _while_plain(cond_fun, body_fun, init_val)


def _while_plain(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    _check_callable("while_loop", cond_fun=cond_fun, body_fun=body_fun)
    if config.disable_jit:
        # Stepped in Python; a traced condition (a vmap of the loop) falls back to the primitive,
        # restarting from init_val (the functions are pure), as JAX does.
        try:
            # The carry's leaves become ftrans arrays first (immutable, canonical dtypes), so a body that
            # updates a NumPy array in place (x += 1) gives what the compiled loop gives, as in JAX.
            leaves, tree = _flatten_operands(init_val, "init_val")
            val = tree_util.tree_unflatten(tree, leaves)
            while bool(cond_fun(val)):
                val = body_fun(val)
            return val
        except ConcretizationTypeError:
            pass
    init, tree = _flatten_operands(init_val, "init_val")
    paths = _leaf_paths(tree)
    arg_tree = _tuple_tree(tree)
    checked: list | None = [] if _kr.hot and _kr.tracking() else None
    if checked is not None:  # key-reuse checking: a carried key consumed each iteration must be replaced
        user_body, user_cond, nkeys = body_fun, cond_fun, sum(1 for k in _kr.key_leaves(init_val) if is_key(k))
        body_fun = lambda v: _kr.traced_body(user_body, (v,), "while_loop", checked,  # noqa: E731
                                             "while_loop body", nkeys)
        cond_fun = lambda v: _kr.traced_body(user_cond, (v,), "while_loop", checked,  # noqa: E731
                                             "while_loop cond", nkeys, carry_out=False)
    body = _trace(body_fun, arg_tree, [_aval(x) for x in init], "body_fun", prim="while_loop")
    _check_same_tree("while_loop", "body_fun's output", tree, body.out_tree)
    init, changed = _promote_weak(init, [_aval(x) for x in init], body.out_avals)
    if changed:
        body = _trace(body_fun, arg_tree, [_aval(x) for x in init], "body_fun", prim="while_loop")
    _carry_mismatch("while_loop", "body_fun's output", paths, [_aval(x) for x in init], body.out_avals)
    cnd = _trace(cond_fun, arg_tree, [_aval(x) for x in init], "cond_fun", prim="while_loop")
    if len(cnd.out_avals) != 1 or cnd.out_avals[0].shape != () or cnd.out_avals[0].dtype != dtypes.bool_:
        got = ", ".join(_builtin_map(type_str, cnd.out_avals)) or "nothing"
        raise FtransTypeError(
            f"while_loop: cond_fun must return a boolean scalar, but it returned ({got}). Reduce an array "
            "condition with jnp.all/jnp.any, or compare with a scalar"
        )
    if checked:
        _kr.apply(_kr.merged(checked), _kr.key_leaves(init_val), "while", "while_loop")
    lifted = to_axis_owner([cnd.jaxpr, body.jaxpr], [*cnd.consts, *body.consts, *init])
    cnd_consts, body_consts = lifted[:len(cnd.consts)], lifted[len(cnd.consts):len(cnd.consts) + len(body.consts)]
    init = lifted[len(cnd.consts) + len(body.consts):]
    cnd, body = _Traced(cnd.jaxpr, cnd_consts, cnd.out_tree), _Traced(body.jaxpr, body_consts, body.out_tree)
    fwd = _forwarded_carries(body.jaxpr, len(body.consts), len(init))
    if fwd:
        n = len(init)
        cond_j = _without_carries(cnd.jaxpr, len(cnd.consts), n, fwd, outputs=False)
        body_j = _without_carries(body.jaxpr, len(body.consts), n, fwd, outputs=True)
        fixed = [init[i] for i in fwd]
        rest = [init[i] for i in range(n) if i not in fwd]
        looped: Any = ()
        if rest or jaxpr_has_effects(body_j) or jaxpr_has_effects(cond_j):
            looped = while_p.bind(*cnd.consts, *fixed, *body.consts, *fixed, *rest, cond_jaxpr=cond_j,
                                  body_jaxpr=body_j, cond_nconsts=len(cnd.consts) + len(fwd),
                                  body_nconsts=len(body.consts) + len(fwd))
        looped = iter(looped)
        outs = [init[i] if i in fwd else next(looped) for i in range(n)]
    else:
        outs = while_p.bind(*cnd.consts, *body.consts, *init, cond_jaxpr=cnd.jaxpr, body_jaxpr=body.jaxpr,
                            cond_nconsts=len(cnd.consts), body_nconsts=len(body.consts))
    return tree_util.tree_unflatten(tree, outs)


# ----------------------------------------------------------------------------
# scan


def _static_length(name: str, what: str, x: Any) -> int:
    try:
        return int(x)
    except ConcretizationTypeError:
        raise ConcretizationTypeError(
            f"{name}: {what} must be a static Python int, but it is a traced value. Pass a Python int, or mark "
            "the argument it comes from static (static_argnums)"
        ) from None


def _unroll(name: str, unroll: Any, length: int) -> int:
    """The steps per rolled iteration: a bool (all or one), or a non-negative int where 0, as in
    JAX, unrolls the whole loop."""
    if unroll is True:
        return max(length, 1)
    if unroll is False or unroll is None:
        return 1
    if isinstance(unroll, (int, np.integer)) and not isinstance(unroll, np.bool_):
        if unroll < 0:
            raise FtransValueError(f"{name}: unroll must be a bool or a non-negative int, got {unroll!r}")
        return int(unroll) if unroll else max(length, 1)
    if isinstance(unroll, np.bool_):
        return _unroll(name, bool(unroll), length)
    if isinstance(unroll, Tracer):
        raise ConcretizationTypeError(
            f"{name}: unroll must be a static Python int or bool, but it is a traced value "
            f"{type_str(unroll.aval)}. Pass a Python value, or mark the argument it comes from static "
            "(static_argnums)")
    raise FtransTypeError(
        f"{name}: unroll must be a bool or a non-negative int, got {type(unroll).__name__} {unroll!r}")


@_tb.api_boundary
def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1, _split_transpose: bool = False) -> tuple[Any, Any]:
    """JAX's ``lax.scan``: ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``, as one primitive."""
    if _refs.any_refs():  # refs carried, scanned over or closed over are threaded (transforms/refs.py)
        _check_callable("scan", f=f)
        return _refs.scan(_scan_plain, f, init, xs, length, reverse, unroll, _split_transpose)
    return _scan_plain(f, init, xs, length, reverse, unroll, _split_transpose)


def _scan_plain(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
                unroll: int | bool = 1, _split_transpose: bool = False) -> tuple[Any, Any]:
    _check_callable("scan", f=f)
    x_ops, x_tree = _flatten_operands(xs, "xs")
    x_paths = _leaf_paths(x_tree)
    for p, x in zip(x_paths, x_ops):
        if not x.aval.shape:
            raise FtransValueError(f"scan: xs{p} is a scalar ({type_str(x.aval)}), which has no leading axis to "
                                   "scan over")
    lengths = {x.aval.shape[0] for x in x_ops}
    if length is not None:
        length = _static_length("scan", "length", length)
        if length < 0:
            raise FtransValueError(f"scan: length must be non-negative, got {length}")
        if lengths and lengths != {length}:
            sizes = ", ".join(f"xs{p}: {x.aval.shape[0]}" for p, x in zip(x_paths, x_ops))
            raise FtransValueError(f"scan: length={length} disagrees with the leading axis sizes of xs ({sizes})")
    elif len(lengths) > 1:
        sizes = ", ".join(f"xs{p}: {x.aval.shape[0]}" for p, x in zip(x_paths, x_ops))
        raise FtransValueError(f"scan: the values in xs have different leading axis sizes ({sizes})")
    elif lengths:
        (length,) = lengths
    else:
        raise FtransValueError("scan: xs has no arrays to scan over and no length was given; pass length=")
    unroll_n = _unroll("scan", unroll, length)
    if config.disable_jit:
        return _scan_python(f, init, xs, x_ops, x_tree, length, reverse)

    carry, c_tree = _flatten_operands(init, "init")
    c_paths = _leaf_paths(c_tree)
    xs_specs = [getattr(x.aval, "typed_sharding", None) for x in x_ops]
    if any(sh is not None and len(sh.spec) and sh.spec[0] is not None for sh in xs_specs):  # (JAX's check)
        raise FtransValueError(
            "0th dimension of all xs should be replicated. Got "
            + ", ".join(str(sh.spec) if sh is not None else "P()" for sh in xs_specs)
            + " (scan: the scanned-over axis of xs is split over Explicit mesh axes; reshard it first)")
    slices = [_with_vma(without_dim(x.aval, 0, ShapedArray(x.aval.shape[1:], x.aval.dtype, x.aval.weak_type)),
                        _vma(x.aval)) for x in x_ops]  # in a shard_map body each slice varies as xs does
    in_tree = _tuple_tree(c_tree, x_tree)
    y_tree_box: list = []

    def split_pair(out: Any) -> Any:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise FtransTypeError(
                f"scan: the body must return a pair (carry, y), got {type(out).__name__}"
                + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            )
        c, y = out
        c_leaves, ct = tree_util.tree_flatten(c)
        _check_same_tree("scan", "the body's carry output", c_tree, ct)
        y_leaves, yt = tree_util.tree_flatten(y)
        y_tree_box.append(yt)
        return list(c_leaves) + list(y_leaves)

    checked: list | None = [] if _kr.hot and _kr.tracking() else None
    nkeys = sum(1 for k in _kr.key_leaves(init) if is_key(k)) if checked is not None else 0

    def body_fun(c: Any, x: Any) -> Any:
        if checked is not None:  # key-reuse checking: a carried key consumed each step must be replaced
            return _kr.traced_body(f, (c, x), "scan", checked, "scan body", nkeys)
        return f(c, x)

    def trace_body(c_avals: list[ShapedArray]) -> _Traced:
        y_tree_box.clear()
        return _trace(body_fun, in_tree, c_avals + slices, "the scan body", post=split_pair, prim="scan")

    body = trace_body([_aval(c) for c in carry])
    nc = len(carry)
    carry, changed = _promote_weak(carry, [_aval(c) for c in carry], body.out_avals[:nc])
    if changed:
        body = trace_body([_aval(c) for c in carry])
    _carry_mismatch("scan", "the body's carry output", c_paths, [_aval(c) for c in carry], body.out_avals[:nc])
    if checked:
        _kr.apply(checked[-1], _kr.key_leaves((init, xs)), "scan", "scan")
    y_tree = y_tree_box[-1]
    lifted = to_axis_owner([body.jaxpr], [*body.consts, *carry, *x_ops])
    nb = len(body.consts)
    body = _Traced(body.jaxpr, lifted[:nb], body.out_tree)
    carry, x_ops = lifted[nb:nb + nc], lifted[nb + nc:]
    fwd = _forwarded_carries(body.jaxpr, len(body.consts), nc)
    jaxpr = body.jaxpr
    consts, rest = list(body.consts), list(carry)
    if fwd:
        jaxpr = _without_carries(jaxpr, len(consts), nc, fwd, outputs=True)
        consts += [carry[i] for i in fwd]
        rest = [carry[i] for i in range(nc) if i not in fwd]
    jaxpr, y_src = _forward_xs_to_ys(jaxpr, len(rest), len(x_ops))
    if rest or jaxpr.jaxpr.outvars or jaxpr_has_effects(jaxpr):
        outs = scan_p.bind(*consts, *rest, *x_ops, jaxpr=jaxpr, num_consts=len(consts), num_carry=len(rest),
                           length=length, reverse=bool(reverse), unroll=unroll_n)
    else:  # every carry is read-only and there are no outputs: nothing to run
        outs = []
    looped = iter(outs[:len(rest)])
    carry_out = [carry[i] if i in fwd else next(looped) for i in range(nc)]
    stacked = iter(outs[len(rest):])
    ys = [x_ops[y_src[o]] if o in y_src else next(stacked) for o in range(y_tree.num_leaves)]
    return tree_util.tree_unflatten(c_tree, carry_out), tree_util.tree_unflatten(y_tree, ys)


def _forward_xs_to_ys(jaxpr: ClosedJaxpr, ncarry: int, nxs: int) -> tuple[ClosedJaxpr, dict[int, int]]:
    """Outputs ``ys`` that the body returns straight from its ``xs`` slice are those ``xs`` themselves: they
    leave the scan (which need not stack a copy), as JAX forwards them.  Returns the body without them and
    {position among the ys: position among the xs}."""
    j = jaxpr.jaxpr
    x_in = j.invars[len(j.invars) - nxs:]
    y_src: dict[int, int] = {}
    for o, v in enumerate(j.outvars[ncarry:]):
        k = next((k for k, w in enumerate(x_in) if w is v), None)
        if k is not None:
            y_src[o] = k
    if not y_src:
        return jaxpr, y_src
    outvars = j.outvars[:ncarry] + [v for o, v in enumerate(j.outvars[ncarry:]) if o not in y_src]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, outvars), jaxpr.consts), y_src


def _scan_python(f: Callable, init: Any, xs: Any, x_ops: list, x_tree: Any, length: int, reverse: bool) -> Any:
    leaves, c_tree = _flatten_operands(init, "init")  # ftrans arrays, as in _while_plain
    carry = tree_util.tree_unflatten(c_tree, leaves)
    ys = []
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        x = tree_util.tree_unflatten(x_tree, [lax.index_in_dim(x, i, 0, keepdims=False) for x in x_ops])
        carry, y = f(carry, x)
        ys.append(y)
    if reverse:
        ys.reverse()
    if not ys:
        raise FtransValueError("scan: a zero-length scan under disable_jit cannot infer the outputs' shapes "
                               "(the body never runs); use jit, or give xs at least one step")
    stacked = tree_util.tree_map(lambda *leaves: _stack(leaves), *ys)
    return carry, stacked


def _stack(leaves: Sequence[Any]) -> Any:
    """The per-step outputs of a Python-run scan stacked along a new leading axis (promoted to one dtype)."""
    ops = list(leaves)
    if len({(o.dtype, getattr(o, "weak_type", False)) for o in ops if hasattr(o, "dtype")}) != 1:
        ops, _, _ = promote_dtypes("scan", *leaves)  # one dtype already: kept (a 64-bit one made in an enable_x64 block)
    return lax.concatenate([lax.expand_dims(o, (0,)) for o in ops], 0)


# ----------------------------------------------------------------------------
# fori_loop and map


@_tb.api_boundary
def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any, *, unroll: int | bool | None = None) -> Any:
    """JAX's ``lax.fori_loop``: a ``scan`` when the bounds are static (so reverse mode works), else a ``while``."""
    _check_callable("fori_loop", body_fun=body_fun)
    for what, b in (("lower", lower), ("upper", upper)):
        try:
            d, _ = dtype_weak(b)
        except TypeError:
            raise FtransTypeError(f"fori_loop: {what} must be an integer scalar, got {type(b).__name__}") from None
        shape = b.shape if isinstance(b, (Array, Tracer)) else np.shape(b)
        if not (dtypes.issubdtype(d, np.integer) or dtypes.is_float(d)) or shape != ():
            raise FtransTypeError(f"fori_loop: {what} must be an integer (or float) scalar, got {b!r}")
    (dl, wl), (du, wu) = dtype_weak(lower), dtype_weak(upper)
    if dl == du:
        d = dl
    elif dtypes.issubdtype(dl, np.signedinteger) and dtypes.issubdtype(du, np.signedinteger) and wl != wu:
        d = du if wl else dl  # a Python int bound takes the other bound's type, as in JAX
    else:
        raise FtransTypeError(
            f"lower and upper arguments to fori_loop must have equal types, got {dl.name} and {du.name} (a "
            "Python int bound takes the other's signed integer type); convert one with .astype")
    try:
        lo, hi = int(lower), int(upper)
        static = True
    except ConcretizationTypeError:
        static = False
    if static:
        i0 = lo  # the counter of a static loop is a Python int (weakly typed), whatever the bounds' type, as in JAX

        def step(carry: Any, _: Any) -> Any:
            i, x = carry
            return (i + 1, body_fun(i, x)), None

        n = max(hi - lo, 0)
        if n == 0 and config.disable_jit:  # the body never runs: init_val as given, as in JAX
            return init_val
        (_, out), _ = scan(step, (i0, init_val), None, length=n, unroll=1 if unroll is None else unroll)
        return out
    if unroll is not None and unroll is not False and unroll != 1:
        raise FtransValueError("fori_loop: unroll needs static (Python int) bounds, but lower or upper is traced")
    # Only a bound of another dtype is converted (a weak one keeps its weak type), as in JAX: no
    # convert_element_type equation for fori_loop(0, n, ...) with a traced n.
    i0 = lower if dl == d else lax.convert_element_type(lower, d)
    hi_v = upper if du == d else lax.convert_element_type(upper, d)

    def w_cond(c: Any) -> Any:
        return c[0] < c[1]

    def w_body(c: Any) -> Any:
        i, h, x = c
        return i + 1, h, body_fun(i, x)

    return while_loop(w_cond, w_body, (i0, hi_v, init_val))[2]


@_tb.api_boundary
def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 - JAX's name
    """JAX's ``lax.map``: ``f`` over the leading axis of ``xs`` with a ``scan`` (``batch_size``: vmapped chunks)."""
    _check_callable("map", f=f)
    if batch_size is None:
        _, ys = scan(lambda c, x: (c, f(x)), (), xs)
        return ys
    if not isinstance(batch_size, int) or batch_size < 0:
        raise FtransValueError(f"map: batch_size must be a non-negative int (0: one vmap over everything), "
                               f"got {batch_size!r}")
    leaves, tree = tree_util.tree_flatten(xs)
    if not leaves:
        raise FtransValueError("map: xs has no arrays to map over")
    leaves = [as_operand(x) for x in leaves]
    n = leaves[0].shape[0]
    full, rem = divmod(n, batch_size) if batch_size else (0, n)
    outs = []
    if full:
        main = tree_util.tree_unflatten(tree, [
            lax.reshape(lax.slice_in_dim(x, 0, full * batch_size), (full, batch_size) + tuple(x.shape[1:]))
            for x in leaves])
        _, ys = scan(lambda c, x: (c, vmap(f)(x)), (), main)
        outs.append(tree_util.tree_map(lambda y: lax.reshape(y, (full * batch_size,) + tuple(y.shape[2:])), ys))
    if rem:
        tail = tree_util.tree_unflatten(tree, [lax.slice_in_dim(x, full * batch_size, n) for x in leaves])
        outs.append(vmap(f)(tail))
    if len(outs) == 1:
        return outs[0]
    return tree_util.tree_map(lambda a, b: lax.concatenate([a, b], 0), *outs)


# ----------------------------------------------------------------------------
# associative_scan: a parallel prefix scan written with slices and concatenation


def _interleave(evens: Any, odds: Any, axis: int) -> Any:
    """Elements of ``evens`` and ``odds`` alternating along ``axis`` (``evens`` first, as long or one longer)."""
    n_odd = odds.shape[axis]
    shape = tuple(odds.shape)
    head = lax.slice_in_dim(evens, 0, n_odd, axis=axis) if evens.shape[axis] != n_odd else evens
    pairs = lax.concatenate([lax.expand_dims(head, (axis + 1,)), lax.expand_dims(odds, (axis + 1,))], axis + 1)
    merged = lax.reshape(pairs, shape[:axis] + (2 * n_odd,) + shape[axis + 1:])
    if evens.shape[axis] == n_odd:
        return merged
    return lax.concatenate([merged, lax.slice_in_dim(evens, n_odd, n_odd + 1, axis=axis)], axis)


@_tb.api_boundary
def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """JAX's ``lax.associative_scan``: all prefix combinations ``fn(... fn(fn(x0, x1), x2) ..., xk)`` along
    ``axis``, for an associative ``fn`` on pytrees of arrays, in ``O(log n)`` depth.

    ``fn`` must work on whole slices (it is applied to every pair of a level at once). Adjacent pairs are
    combined, the half-length result is scanned recursively, which gives the prefixes ending at odd positions,
    and one more combination gives those ending at even positions; the two are interleaved.
    """
    _check_callable("associative_scan", fn=fn)
    leaves, tree = _flatten_operands(elems, "associative_scan: elems")
    if not leaves:
        raise FtransValueError("associative_scan: elems has no arrays to scan")
    ndim = len(leaves[0].shape)
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < max(ndim, 1) or ndim == 0:
        raise FtransValueError(
            f"associative_scan: axis {axis!r} is out of range for elements of rank {ndim} "
            f"(shape {tuple(leaves[0].shape)})"
        )
    axis = int(axis) % ndim
    n = leaves[0].shape[axis]
    for x in leaves:
        if len(x.shape) <= axis or x.shape[axis] != n:
            raise FtransValueError(
                "associative_scan: every array in elems must have the same size along the scanned axis "
                f"{axis}; saw shapes {[tuple(x.shape) for x in leaves]}"
            )
    if reverse:
        leaves = [lax.rev(x, (axis,)) for x in leaves]

    def combine(a: list, b: list) -> list:
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        flat, out_tree = _flatten_operands(out, "the output of associative_scan's fn at ")
        if len(flat) != len(a):
            raise FtransValueError(
                f"associative_scan: fn must return the structure of elems, {tree} ({len(a)} arrays), but "
                f"returned {out_tree} ({len(flat)} arrays)"
            )
        return flat

    def prefix(xs: list) -> list:
        m = xs[0].shape[axis]
        if m < 2:
            return xs
        pairs = combine([lax.slice_in_dim(x, 0, m - 1, 2, axis) for x in xs],
                        [lax.slice_in_dim(x, 1, m, 2, axis) for x in xs])
        odds = prefix(pairs)  # prefixes ending at 1, 3, 5, ...
        rest = [lax.slice_in_dim(x, 2, m, 2, axis) for x in xs]  # x2, x4, ...
        if m % 2 == 0:
            evens = combine([lax.slice_in_dim(o, 0, m // 2 - 1, axis=axis) for o in odds], rest)
        else:
            evens = combine(odds, rest)
        evens = [lax.concatenate([lax.slice_in_dim(x, 0, 1, axis=axis), e], axis) for x, e in zip(xs, evens)]
        return [_interleave(e, o, axis) for e, o in zip(evens, odds)]

    out = prefix(leaves)
    if reverse:
        out = [lax.rev(x, (axis,)) for x in out]
    return tree_util.tree_unflatten(tree, out)
