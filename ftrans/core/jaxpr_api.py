"""``make_jaxpr``, ``eval_jaxpr`` and ``eval_shape``: staging a Python function and
running a staged one."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref
from ftrans.core import sharding_rules as _sharding_rules
from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct
from ftrans.core.axis_env import axis_env as _axis_env
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal, subjaxprs
from ftrans.core.sharding import as_sharding
from ftrans.core.trace import (
    aval_of,
    check_outputs,
    in_current_names,
    invalid_value_error,
    is_jax_value,
    stage,
)
from ftrans.core.trace import state as _trace_state
from ftrans.core.wrapping import wraps
from ftrans.errors import FtransTypeError, FtransValueError


def _arg_aval(path: str, x: Any) -> ShapedArray:
    if isinstance(x, ShapeDtypeStruct):  # typed when its sharding is over Explicit mesh axes
        aval = ShapedArray(x.shape, dtypes.canonicalize(x.dtype), x.weak_type)
        return aval if x.sharding is None else _sharding_rules.typed_aval(aval, as_sharding(x.sharding))
    if jax_array_argument(x):
        raise jax_array_argument_error(f"argument {path}")
    try:
        return aval_of(x)
    except TypeError:
        raise invalid_value_error(f"argument {path}", x, "or mark it static (static_argnums)") from None


def _static_tuple(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(static_argnums, int):
        return (static_argnums,)
    return tuple(static_argnums)


def trace_to_jaxpr(fun: Callable, args: tuple, kwargs: dict, static_argnums: tuple[int, ...] = (),
                   what: str = "make_jaxpr"):
    """Stage ``fun(*args, **kwargs)``: the closed jaxpr, output tree, and flat input avals. ``what`` names
    the caller in the error for an output that is not an array."""
    if _ref.created:
        return _trace_with_refs(fun, args, kwargs, static_argnums, what)
    return _trace_plain(fun, args, kwargs, static_argnums, what)


def _trace_with_refs(fun: Callable, args: tuple, kwargs: dict, static_argnums: tuple[int, ...], what: str):
    """``trace_to_jaxpr`` once refs exist: the refs among the arguments, and those the function closes
    over (found on first touch), enter as values after the arguments, and their final values are extra
    outputs after the function's (the output tree is then that of ``(out, final ref values)``)."""
    dyn_idx = [i for i in range(len(args)) if i not in static_argnums]
    leaves_paths, in_tree = tree_util.tree_flatten_with_path((tuple(args[i] for i in dyn_idx), kwargs))
    ref_pos = [k for k, (_, x) in enumerate(leaves_paths) if isinstance(x, _ref.Ref)]
    seen: dict[int, str] = {}
    for k in ref_pos:
        name = "args" + tree_util.keystr(leaves_paths[k][0])
        if id(leaves_paths[k][1]) in seen:
            raise FtransValueError(
                f"only one reference to a mutable array may be passed as an argument to a function, but the "
                f"mutable array reference of type {leaves_paths[k][1].aval.str_short()} appeared at both "
                f"{seen[id(leaves_paths[k][1])]} and {name}")
        seen[id(leaves_paths[k][1])] = name
    # The refs the function closes over are threaded from the first trace (so it is traced once, as JAX's);
    # those it turns out not to touch are dropped from the program afterwards.
    closed: list = _ref.closure_refs(fun, exclude=[leaves_paths[k][1] for k in ref_pos])
    n_scanned = len(closed)
    owner = object()
    while True:
        vals = [x for _, x in leaves_paths]
        for k in ref_pos:
            vals[k] = _ref.read_for_thread(vals[k])
        cvals = [_ref.read_for_thread(r) for r in closed]
        run = _ref_runner(fun, args, dyn_idx, in_tree, leaves_paths, ref_pos, len(vals), list(closed), owner,
                         what)
        try:
            closed_j, out_tree, avals = _trace_plain(run, (*vals, *cvals), {}, (), what, fun)
        except _ref.NeedsRef as e:
            if e.owner is not owner:
                raise
            closed.append(e.ref)
            continue
        out_tree = out_tree.children()[0]  # the function's own (the refs' final values follow its outputs)
        if ref_pos or closed:  # the refs' effects, named by the inputs carrying their values (JAX's ``ReadEffect(i)``)
            j = closed_j.jaxpr
            n_ref = len(ref_pos) + len(closed)
            ins = list(ref_pos) + list(range(len(vals), len(vals) + len(closed)))
            outs = list(range(len(j.outvars) - n_ref, len(j.outvars)))
            effs = _ref.ref_effects(j, ins, outs)
            # closed-over refs found in the closure that the function never touched: not part of the program
            unused = [(i, o) for i, o in list(zip(ins, outs))[len(ref_pos):len(ref_pos) + n_scanned]
                      if _ref.ReadEffect(i) not in effs and _ref.WriteEffect(i) not in effs]
            if unused:
                drop_in, drop_out = {i for i, _ in unused}, {o for _, o in unused}
                keep = [k for k in range(len(j.invars)) if k not in drop_in]
                renum = {old: new for new, old in enumerate(keep)}
                effs = {type(e)(renum[e.input_index]) for e in effs}
                j = Jaxpr(j.constvars, [j.invars[k] for k in keep], j.eqns,
                          [v for k, v in enumerate(j.outvars) if k not in drop_out])
                avals = [a for k, a in enumerate(avals) if k not in drop_in]
            if effs or unused:
                closed_j = ClosedJaxpr(j.replace(effects=set(j.effects) | effs), closed_j.consts)
        return closed_j, out_tree, avals


def _ref_runner(fun: Callable, args: tuple, dyn_idx: list, in_tree: Any, leaves_paths: list, ref_pos: list,
                n: int, closed: list, owner: Any, what: str = "make_jaxpr") -> Callable:
    """The function ``_trace_with_refs`` stages: argument values and closed-over refs' values in,
    ``(out, final ref values)`` out."""
    def run(*flat: Any) -> Any:
        ins = list(flat[:n])
        views = []
        for k in ref_pos:
            v = _ref.view_ref(ins[k], "", "args" + tree_util.keystr(leaves_paths[k][0]))
            ins[k] = v
            views.append(v)
        dargs, kw = tree_util.tree_unflatten(in_tree, ins)
        full = list(args)
        for i, a in zip(dyn_idx, dargs):
            full[i] = a

        def call() -> Any:
            out = fun(*full, **kw)
            _ref.check_no_refs(out, "make_jaxpr", getattr(fun, "__name__", "fun"))
            if not all(map(is_jax_value, tree_util.tree_leaves(out))):  # named by the user's own output tree
                check_outputs(out, fun, what)
            return out
        return _ref.run_scoped(call, views + closed, [v._value for v in views] + list(flat[n:]), owner,
                               "make_jaxpr")
    return run


def _trace_plain(fun: Callable, args: tuple, kwargs: dict, static_argnums: tuple[int, ...] = (),
                 what: str = "make_jaxpr", user_fun: Callable | None = None):
    dyn_idx = [i for i in range(len(args)) if i not in static_argnums]
    dyn_args = tuple(args[i] for i in dyn_idx)
    leaves_with_paths, in_tree = tree_util.tree_flatten_with_path((dyn_args, kwargs))
    in_avals = [_arg_aval("args" + tree_util.keystr(p), x) for p, x in leaves_with_paths]
    out_tree_box: list = []

    def flat_fun(*flat_in):
        dargs, kw = tree_util.tree_unflatten(in_tree, flat_in)
        full = list(args)
        for i, a in zip(dyn_idx, dargs):
            full[i] = a
        out = fun(*full, **kw)
        flat_out, out_tree = tree_util.tree_flatten(out)
        if not all(map(is_jax_value, flat_out)):
            check_outputs(out, user_fun or fun, what)
        out_tree_box.append(out_tree)
        return flat_out

    st = _trace_state
    prev, st.primal_rewriter = st.primal_rewriter, None  # make_jaxpr shows the program as written
    try:
        closed, _ = stage(flat_fun, in_avals, boundary=True)
    finally:
        st.primal_rewriter = prev
    return closed, out_tree_box[0], in_avals


def _axis_env_pairs(axis_env: Any) -> list:
    """``make_jaxpr``'s ``axis_env``: a sequence of ``(axis_name, size)`` pairs, checked."""
    if axis_env is None:
        return []
    try:
        pairs = [tuple(p) for p in axis_env]
    except TypeError:
        pairs = None
    if pairs is None or any(len(p) != 2 for p in pairs):
        raise FtransTypeError(f"make_jaxpr: axis_env must be a sequence of (axis_name, size) pairs, such as "
                              f"[('i', 4)]; got {axis_env!r}")
    out = []
    for name, size in pairs:
        try:
            n = operator.index(size)
        except TypeError:
            raise FtransTypeError(f"make_jaxpr: the size of axis {name!r} in axis_env must be an int, got "
                                  f"{size!r}") from None
        if n < 1:
            raise FtransValueError(f"make_jaxpr: the size of axis {name!r} in axis_env must be positive, got {n}")
        out.append((name, n))
    return out


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (), axis_env: Any = None,
               return_shape: bool = False, abstracted_axes: Any = None) -> Callable[..., Any]:
    """JAX's ``make_jaxpr``: a function that returns the IR ``fun`` stages to for given arguments."""
    axes = _axis_env_pairs(axis_env)
    if abstracted_axes is not None:
        raise NotImplementedError("make_jaxpr: abstracted_axes (dynamic shapes) is not supported")
    static = _static_tuple(static_argnums)

    @wraps(fun)
    def make(*args: Any, **kwargs: Any):
        with contextlib.ExitStack() as stack:
            for name, size in axes:  # collectives over these names stage as inside a pmap of that size
                stack.enter_context(extend_axis_env(name, size, None))
            closed, out_tree, _ = trace_to_jaxpr(fun, args, kwargs, static)
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                      for a in closed.out_avals[:out_tree.num_leaves]]  # (refs' final values follow)
            return closed, tree_util.tree_unflatten(out_tree, shapes)
        return closed

    name = getattr(fun, "__name__", None)
    if name is not None:  # named as JAX names it: make_jaxpr(foo), from the public module
        make.__name__ = f"make_jaxpr({name})"
        make.__qualname__ = f"make_jaxpr({getattr(fun, '__qualname__', name)})"
        make.__module__ = "ftrans"
    return make


# ``transforms.batching.to_axis_owner`` (installed there): operands raised into the trace owning a named axis
# that the given bodies' collectives read.
to_axis_owner: Callable[[list, list], list] | None = None


def eval_jaxpr(jaxpr: Jaxpr | ClosedJaxpr, consts: Sequence[Any], *args: Any) -> list:
    """Interpret a jaxpr by binding each equation's primitive (so it composes with transforms)."""
    if isinstance(jaxpr, ClosedJaxpr):
        consts, jaxpr = list(jaxpr.consts) if not consts else consts, jaxpr.jaxpr
    if len(args) != len(jaxpr.invars):
        raise FtransTypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} inputs, got {len(args)}")
    env: dict[int, Any] = {}
    for v, c in zip(jaxpr.constvars, consts):
        env[id(v)] = c
    for v, a in zip(jaxpr.invars, args):
        env[id(v)] = a

    def read(a):
        if isinstance(a, Literal):
            # Keep the literal's weak type (a bare NumPy scalar would read as strong).
            return Array._new(np.asarray(a.val, a.aval.dtype), a.aval.weak_type)
        return env[id(a)]

    # Equations staged while interpreting (under jvp, linearize, ...) keep the user's line of the
    # equation they came from.
    st = _trace_state
    prev = st.source_override
    try:
        for eqn in jaxpr.eqns:
            st.source_override = in_current_names(eqn.source_info) or prev
            if eqn.primitive in _sharding_rules.typed_by_api and eqn.outvars[0].aval.sharding is not None:
                with _sharding_rules.as_recorded(eqn.outvars[0].aval):  # the type its out_sharding gave
                    outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
            elif _axis_env.frames and eqn.primitive.higher_order and to_axis_owner is not None:
                # Under vmap(axis_name=...), a call whose body reads the axis reaches that vmap's trace even
                # when every operand is unbatched (as the collective alone would; jit does the same).
                ins = to_axis_owner(subjaxprs(eqn), [read(a) for a in eqn.invars])
                outs = eqn.primitive.bind(*ins, **eqn.params)
            else:
                outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                env[id(v)] = o
    finally:
        st.source_override = prev
    return [read(a) for a in jaxpr.outvars]


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """JAX's ``eval_shape``: the output shapes and dtypes, computed by tracing only."""
    closed, out_tree, _ = trace_to_jaxpr(fun, args, kwargs, what="eval_shape")
    shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type, vma=getattr(a, "vma", None))
              for a in closed.out_avals[:out_tree.num_leaves]]  # (refs' final values follow)
    return tree_util.tree_unflatten(out_tree, shapes)
