"""``checkpoint`` / ``remat``: trade memory for recomputation in reverse mode.

``checkpoint(f)`` stages ``f`` (on every use, eager included, remembering the staged body per
signature) and binds ``remat`` with the staged body.
Evaluated, lowered or differentiated forward, ``remat`` is just a call (a
call-like primitive, ``ftrans/core/prims/calls.py``, whose rules are the
shared ones of every call).  The difference is in linearization: the shared
partial-evaluation rule splits the (JVP'd) body with remat's declared
*residual policy* deciding which primal values of the body may be saved for
the backward pass; every other value the backward pass needs is recomputed
there from the body's inputs.  The unknown half is recorded as a ``remat``
equation whose transpose (``transforms/linear_rules/calls.py``) first re-runs
those primal equations (behind an ``optimization_barrier`` when
``prevent_cse``, so XLA does not merge the recomputation with the forward
pass) and then transposes the rest.

Policies have JAX's signature ``policy(prim, *avals, **params) -> bool``
("may this equation's output be saved?") and JAX's names.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ftrans.core import key_reuse as _kr
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref_mod
from ftrans.core import trace as _trace
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import hoist_consts
from ftrans.core.primitive import Primitive
from ftrans.core.prims import reductions as R
from ftrans.core.prims.calls import name_p, optimization_barrier_p, remat_p
from ftrans.core.trace import StagingTracer, Tracer, aval_of, stage
from ftrans.core.wrapping import fun_name, wraps
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = [
    "checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "remat_p", "name_p",
    "optimization_barrier_p", "optimization_barrier", "saved_residuals", "print_saved_residuals",
]


# ----------------------------------------------------------------------------
# name: tag a value for the name-based policies


def checkpoint_name(x: Any, name: str) -> Any:
    """Tag ``x`` (a pytree of arrays) with ``name`` for ``save_only_these_names`` and friends."""
    from ftrans.core.operands import as_operand

    return tree_util.tree_map(lambda leaf: name_p.bind(as_operand(leaf), name=name), x)


# ----------------------------------------------------------------------------
# optimization_barrier: keep XLA from merging recomputation with the forward pass


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


# Offloading: JAX's policies may ask for a residual to be kept in another memory (``pinned_host``) between
# the forward and the backward pass.  ftrans does not model memory kinds (docs/differences.md), so an
# offloadable residual is saved where it was made: the values, and what is recomputed, are the same; only
# where the saved copy lives differs (on the CPU, nowhere: device memory is host memory).
_MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")


def _check_offload(fn: str, src: str, dst: str) -> None:
    for what, kind in (("offload_src", src), ("offload_dst", dst)):
        if kind not in _MEMORY_KINDS:
            raise ValueError(f"checkpoint_policies.{fn}: {what} must be one of {', '.join(_MEMORY_KINDS)}; "
                             f"got {kind!r}")


def _save_and_offload_only_these_names(*, names_which_can_be_saved: Any, names_which_can_be_offloaded: Any,
                                       offload_src: str, offload_dst: str) -> Callable:
    saved, offloaded = frozenset(names_which_can_be_saved), frozenset(names_which_can_be_offloaded)
    both = saved & offloaded
    if both:
        raise ValueError(
            "checkpoint_policies.save_and_offload_only_these_names: a name may be saved or offloaded, not "
            f"both; {sorted(both)} appear in names_which_can_be_saved and names_which_can_be_offloaded")
    _check_offload("save_and_offload_only_these_names", offload_src, offload_dst)
    keep = saved | offloaded

    def policy(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
        return prim is name_p and params["name"] in keep

    return policy


def _offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> Callable:
    _check_offload("offload_dot_with_no_batch_dims", offload_src, offload_dst)
    return _dots_with_no_batch_dims_saveable


def _save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    def policy(prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
        return bool(policy_1(prim, *avals, **params)) or bool(policy_2(prim, *avals, **params))

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
    save_and_offload_only_these_names = staticmethod(_save_and_offload_only_these_names)
    offload_dot_with_no_batch_dims = staticmethod(_offload_dot_with_no_batch_dims)
    save_from_both_policies = staticmethod(_save_from_both_policies)


# ----------------------------------------------------------------------------
# The API


class _Static:
    """A static argument as part of a trace-cache key: by value when hashable, else by identity (as JAX)."""

    __slots__ = ("val", "hashable", "h")

    def __init__(self, val: Any):
        self.val = val
        try:
            self.h, self.hashable = hash(val), True
        except TypeError:
            self.h, self.hashable = id(val), False

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Static):
            return False
        if self.hashable and other.hashable:
            try:
                return type(self.val) is type(other.val) and bool(self.val == other.val)
            except Exception:  # noqa: BLE001 - an __eq__ that cannot answer: not the same argument
                return False
        return self.val is other.val


_TRACE_CACHE_SIZE = 64


def _trace_key(in_tree: Any, avals: list, statics: tuple) -> tuple | None:
    """What a checkpointed function's staged body depends on besides the function: the arguments' structure
    and types, the static arguments, and the tracing context (64-bit mode, debug checks, bound axis names)."""
    from ftrans.core.axis_env import axis_env as _axis_env
    from ftrans.core.config import config as cfg

    if _trace.state.source_override is not None:
        return None
    return (in_tree, tuple([(a.shape, a.dtype, a.weak_type) for a in avals]), statics, cfg.enable_x64,
            cfg.debug_nans, cfg.debug_infs,
            tuple([(f.name, f.size) for f in _axis_env.frames if f.name is not None]), cfg.scoped_here())


_NO_CONCRETE = object()


_RETRY = object()  # remat_once found a closed-over ref to thread: trace again


def checkpoint(fun: Callable, *, prevent_cse: bool | Sequence[bool] = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
               concrete: Any = _NO_CONCRETE) -> Callable:
    """JAX's ``checkpoint``: ``fun``'s intermediate values are recomputed in the backward pass instead of
    saved, except those ``policy`` allows saving.

    As in JAX, ``fun`` is staged (traced on abstract values) on every use, differentiated or not, so a
    Python ``if`` on an argument fails alike everywhere; the staged body is remembered per argument
    signature and static arguments, so calling the function again does not trace it again. Arguments
    named in ``static_argnums`` (positions) or ``static_argnames`` (keywords) are passed through as Python
    values and are part of that key.
    """
    if concrete is not _NO_CONCRETE:
        # jax 0.11 no longer takes the option (a TypeError); jax 0.10 raised NotImplementedError for it
        raise FtransTypeError(
            "checkpoint() got an unexpected keyword argument 'concrete': the option was removed from JAX; mark "
            "the arguments Python control flow depends on with static_argnums instead")
    if not callable(fun):
        raise FtransTypeError(f"checkpoint: expected a function, got {type(fun).__name__}")
    if isinstance(prevent_cse, Sequence) and not isinstance(prevent_cse, str):
        prevent_cse = tuple(prevent_cse)
    if not isinstance(prevent_cse, (tuple, bool)):
        raise FtransTypeError(f"checkpoint: prevent_cse must be a bool or a tuple of bools, got "
                              f"{type(prevent_cse).__name__}")
    static_names = frozenset((static_argnames,) if isinstance(static_argnames, str) else static_argnames)
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in statics):
        raise FtransTypeError(f"checkpoint: static_argnums must be an int or a tuple of ints, got {static_argnums!r}")
    name = fun_name(fun, "fun")
    traced: OrderedDict = OrderedDict()  # trace key -> (body, hoisted constants, output tree)
    lock = threading.Lock()  # guards the cache's writes (a dict read is atomic)
    ref_owner = object()  # whose NeedsRef a staging of the body raises (a ref it closes over)
    # Closed-over refs of kind 'no_grad_no_remat', threaded through the body as extra inputs and outputs, as
    # JAX's: the forward pass writes them once, a recomputation's writes are dropped (None: not looked for).
    thread: list | None = None

    def remat_once(*args: Any, **kwargs: Any) -> Any:
        nonlocal thread
        n = len(args)
        bad = [i for i in statics if not -n <= i < n]
        if bad:
            raise FtransValueError(
                f"checkpoint({name}): static_argnums {statics} must lie in [-{n}, {n}) for a call with {n} "
                f"positional arguments (got {bad[0]})")
        stat = {i % n for i in statics}
        dyn = [a for i, a in enumerate(args) if i not in stat]
        static_kw = {k: v for k, v in kwargs.items() if k in static_names}
        if static_kw:
            kwargs = {k: v for k, v in kwargs.items() if k not in static_names}
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        from ftrans.core.operands import as_operand

        if _ref_mod.created and any(isinstance(x, _ref_mod.Ref) for x in leaves):
            # Refs passed in: the body runs as written, without rematerialisation (which would repeat
            # its writes); the values are the same, only the memory saving is lost.
            return fun(*args, **kwargs, **static_kw)
        for x in leaves:
            if jax_array_argument(x):
                raise jax_array_argument_error(f"checkpoint({name}): an argument")
        try:
            leaves = [x if isinstance(x, (Array, Tracer)) else as_operand(x) for x in leaves]
        except TypeError:
            raise FtransTypeError(
                f"checkpoint({name}): every non-static argument must be an array or a pytree of arrays; "
                "mark other arguments with static_argnums (or static_argnames)"
            ) from None
        thr: list = []
        if _ref_mod.created:
            if thread is None:
                thread = [r for r in _ref_mod.closure_refs(fun) if r._kind == "no_grad_no_remat"]
            thr = [r for r in thread if _ref_mod._usable(r)]
        n_thr = len(thr)
        if thr:
            leaves = [_ref_mod.read_for_thread(r) for r in thr] + leaves
        avals = [aval_of(x) for x in leaves]
        key = _trace_key(in_tree, avals, tuple(_Static(args[i]) for i in sorted(stat))
                         + tuple((k, _Static(static_kw[k])) for k in sorted(static_kw)))
        if thr and key is not None:
            key = (key, tuple(id(r) for r in thr))
        checked = _kr.hot and _kr.tracking()  # key-reuse checking: trace again, the keys being the caller's
        hit = traced.get(key) if key is not None and not checked else None
        if hit is None:
            out_tree_box: list = []

            def flat_fun(*ins: Any) -> list:
                ref_ins, ins = ins[:n_thr], ins[n_thr:]
                d, kw = tree_util.tree_unflatten(in_tree, ins)
                if checked:
                    _kr.alias_leaves((dyn, kwargs), (d, kw))
                it = iter(d)
                full = [args[i] if i in stat else next(it) for i in range(n)]
                finals: list = []
                if _ref_mod.created:  # a closed-over ref the body touches: see below
                    res, finals = _ref_mod.run_scoped(lambda: fun(*full, **kw, **static_kw), thr, list(ref_ins),
                                                      ref_owner, f"checkpoint({name})")
                else:
                    res = fun(*full, **kw, **static_kw)
                out, tree = tree_util.tree_flatten(res)
                out_tree_box.append(tree)
                return out + list(finals)

            try:
                closed, _ = stage(flat_fun, avals)
            except _ref_mod.NeedsRef as e:
                if e.owner is not ref_owner:
                    raise
                if e.ref._kind == "no_grad_no_remat" and thread is not None and not any(e.ref is r for r in thread):
                    thread.append(e.ref)  # threaded from now on
                    return _RETRY
                # The body touches a ref it closes over: it runs as written, without rematerialisation.
                return fun(*args, **kwargs, **static_kw)
            body, consts = hoist_consts(closed)
            hit = (body, consts, out_tree_box[0])
            # A body that captured a tracer of an enclosing transform belongs to this call only.
            if key is not None and not any(isinstance(c, Tracer) for c in consts):
                with lock:
                    traced[key] = hit
                    while len(traced) > _TRACE_CACHE_SIZE:
                        traced.popitem(last=False)
        else:
            with lock:
                if key in traced:
                    traced.move_to_end(key)
        body, consts, out_tree = hit
        if _trace.is_eager():  # nothing to save or recompute: run the staged body now, on the arrays
            from ftrans.core.jaxpr_api import eval_jaxpr

            outs = eval_jaxpr(body.jaxpr, [], *consts, *leaves)
        else:
            outs = remat_p.bind(*consts, *leaves, jaxpr=body, prevent_cse=prevent_cse, differentiated=False,
                                policy=policy)
        if n_thr:
            outs, finals = list(outs[:len(outs) - n_thr]), outs[len(outs) - n_thr:]
            for r, v in zip(thr, finals):
                _ref_mod.write_back(r, v)
        return tree_util.tree_unflatten(out_tree, outs)

    @wraps(fun)
    @_tb.api_boundary
    def remat_f(*args: Any, **kwargs: Any) -> Any:
        # (a loop, not a recursive call: a function whose closure holds itself is a cycle only the garbage
        # collector frees, with everything the trace cache holds)
        while True:
            out = remat_once(*args, **kwargs)
            if out is not _RETRY:
                return out

    return remat_f


remat = checkpoint


def _arg_names(fun: Callable, args: tuple, kwargs: dict) -> list[str] | None:
    """Each flattened argument's name as JAX's ``saved_residuals`` writes it: the parameter's name and the
    path into it (``x[0]``, ``y``, ``params['w']``); ``None`` where ``fun`` has no usable signature."""
    import inspect

    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    by_pos = {}
    names_of_pos = list(bound.arguments)
    for i, _ in enumerate(args):
        by_pos[i] = names_of_pos[i] if i < len(names_of_pos) else None
    params = inspect.signature(fun).parameters
    out: list[str] = []
    flat_args = tree_util.tree_flatten_with_path(args)[0]
    for path, _ in flat_args:
        i = path[0].idx  # type: ignore[attr-defined]
        name = by_pos.get(i)
        if name is not None and params[name].kind is inspect.Parameter.VAR_POSITIONAL:
            name = f"{name}[{i - list(params).index(name)}]"
        out.append((name or f"args[{i}]") + tree_util.keystr(path[1:]))
    for path, _ in tree_util.tree_flatten_with_path(kwargs)[0]:
        out.append(str(path[0].key) + tree_util.keystr(path[1:]))  # type: ignore[attr-defined]
    return out


def saved_residuals(fun: Callable, *args: Any, **kwargs: Any) -> list[tuple[ShapedArray, str]]:
    """What reverse mode of ``fun`` at ``args`` keeps for the backward pass: (type, where it came from) each,
    in JAX's order and words: constants, then arguments (by parameter name), then intermediate values in
    program order (``named 'n'`` for a ``checkpoint_name`` tag, ``output of jitted function 'f'``)."""
    from ftrans.transforms.partial_eval import linearize_flat

    leaves_paths, in_tree = tree_util.tree_flatten_with_path((args, kwargs))
    from ftrans.core.operands import as_operand

    leaves = [as_operand(x) for _, x in leaves_paths]
    names = _arg_names(fun, args, kwargs) or [None] * len(leaves)
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
    arg_index = {id(v): i for i, v in enumerate(closed.jaxpr.invars)}
    producers = {}
    for n, eqn in enumerate(closed.jaxpr.eqns):
        for v in eqn.outvars:
            producers[id(v)] = (n, eqn)
    keyed = []
    for c in lin.consts:
        aval = aval_of(c)
        if isinstance(c, StagingTracer):
            k = id(c.atom)
            if k in arg_index:
                i = arg_index[k]
                what = (f"from the argument {names[i]}" if names[i] is not None
                        else f"from the argument at flattened index {i}")
                keyed.append(((1, i), aval, what))
                continue
            hit = producers.get(k)
            if hit is not None:
                n, eqn = hit
                src = eqn.source_info.location() if eqn.source_info else "unknown"
                if eqn.primitive is name_p:
                    what = f"named '{eqn.params['name']}' from {src}"
                elif eqn.primitive.name == "jit_call":
                    fname = str(eqn.params.get("name", ""))
                    while fname.startswith("jvp(") and fname.endswith(")"):  # the user's function's name
                        fname = fname[4:-1]
                    what = f"output of jitted function '{fname}' from {src}"
                else:
                    what = f"output of {eqn.primitive.name} from {src}"
                keyed.append(((2, n), aval, what))
                continue
        keyed.append(((0, 0), aval, "from a constant"))
    keyed.sort(key=lambda t: t[0])  # stable: residuals of one equation keep their order
    return [(aval, what) for _, aval, what in keyed]


def print_saved_residuals(fun: Callable, *args: Any, **kwargs: Any) -> None:
    """``jax.ad_checkpoint.print_saved_residuals``: one line per saved residual."""
    for aval, what in saved_residuals(fun, *args, **kwargs):
        print(f"{aval.str_short()} {what}")

