"""``make_jaxpr``, ``eval_jaxpr`` and ``eval_shape``: staging a Python function and
running a staged one."""

from __future__ import annotations

import contextlib
import inspect
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core import ref as _ref
from ftrans.core import sharding_rules as _sharding_rules
from ftrans.core import traceback_util as _traceback_util
from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct, out_struct_sharding
from ftrans.core.axis_env import axis_env as _axis_env
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal, subjaxprs
from ftrans.core.keys import PRNGKeyArray, is_key, is_key_dtype
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


def _key_structs_as_keys(tree: Any) -> Any:
    """Each ``ShapeDtypeStruct`` of a key dtype in ``tree`` as a key array over a struct of its data (which
    enters the program as a key-typed value)."""
    def conv(x: Any) -> Any:
        if isinstance(x, ShapeDtypeStruct) and is_key_dtype(x.dtype):
            impl = x.dtype._impl
            return PRNGKeyArray(impl, ShapeDtypeStruct((*x.shape, *impl.key_shape), np.dtype(np.uint32)))
        return x

    return tree_util.tree_map(conv, tree)


def _typed_key_avals(in_tree: Any, leaves: list, avals: list) -> list:
    """``avals`` with each key array's data leaf typed as the key array (its key dtype, its key shape)."""
    users = tree_util.user_leaves(in_tree, leaves)
    def typed(u: Any) -> bool:  # a key array (or, for a struct of its data, the key-dtype struct it stands for)
        return (is_key(u) and not u._typed) or (isinstance(u, ShapeDtypeStruct) and is_key_dtype(u.dtype))

    return [ShapedArray(u.shape, u.dtype) if typed(u) else a for u, a in zip(users, avals)]


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
    dyn_args, kwargs = _key_structs_as_keys((tuple(args[i] for i in dyn_idx), kwargs))
    leaves_paths, in_tree = tree_util.tree_flatten_with_path((dyn_args, kwargs))
    key_avals = None
    if tree_util.has_key_nodes(in_tree):  # key arrays enter as key-typed values, as in ``_trace_plain``
        key_avals = _typed_key_avals(in_tree, [x for _, x in leaves_paths], [None] * len(leaves_paths))
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
            closed_j, out_tree, avals = _trace_plain(
                run, (*vals, *cvals), {}, (), what, fun,
                lambda n=len(cvals): _leaf_arg_names(fun, args, dyn_idx, kwargs) + ["a closed-over ref"] * n,
                key_avals)
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
                 what: str = "make_jaxpr", user_fun: Callable | None = None,
                 user_names: Callable[[], list[str]] | None = None, key_avals: list | None = None):
    dyn_idx = [i for i in range(len(args)) if i not in static_argnums]
    dyn_args = tuple(args[i] for i in dyn_idx)
    leaves_with_paths, in_tree = tree_util.tree_flatten_with_path((dyn_args, kwargs))
    if any(isinstance(x, ShapeDtypeStruct) and is_key_dtype(x.dtype) for _, x in leaves_with_paths):
        dyn_args, kwargs = _key_structs_as_keys((dyn_args, kwargs))
        leaves_with_paths, in_tree = tree_util.tree_flatten_with_path((dyn_args, kwargs))
    in_avals = [_arg_aval("args" + tree_util.keystr(p), x) for p, x in leaves_with_paths]
    if tree_util.has_key_nodes(in_tree):  # a key array enters as a key-typed value (``key<fry>[]``)
        in_avals = _typed_key_avals(in_tree, [x for _, x in leaves_with_paths], in_avals)
    elif key_avals:  # (flat arguments whose first ones are the flattened keys of ``_trace_with_refs``)
        in_avals = [k if k is not None else a for k, a in zip(key_avals, in_avals)] + in_avals[len(key_avals):]
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

    named = user_fun or fun

    def debug() -> tuple[str, str, list[str] | None]:
        code = getattr(inspect.unwrap(named), "__code__", None)
        where = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
        names = (user_names() if user_names is not None else
                 None if user_fun is not None else _leaf_arg_names(fun, args, dyn_idx, kwargs))
        return f"{getattr(named, '__name__', type(named).__name__)}{where}", what, names

    st = _trace_state
    prev, st.primal_rewriter = st.primal_rewriter, None  # make_jaxpr shows the program as written
    try:
        closed, _ = stage(flat_fun, in_avals, boundary=True, debug=debug)
    finally:
        st.primal_rewriter = prev
    return closed, out_tree_box[0], in_avals


def _leaf_arg_names(fun: Callable, args: tuple, dyn_idx: list[int], kwargs: dict) -> list[str]:
    """A name for each flattened dynamic argument, as JAX's debug info writes it: ``x``, ``y[0]``, ``a[1]``
    (in ``*a``), ``k`` (a keyword), ``params['w']``."""
    try:
        sig_params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        sig_params = []
    params = [p.name for p in sig_params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p.name for p in sig_params if p.kind == p.VAR_POSITIONAL), None)
    names = []
    for path, _ in tree_util.tree_flatten_with_path((tuple(args[i] for i in dyn_idx), kwargs))[0]:
        head, first, *rest = path
        if getattr(head, "idx", None) == 0:
            pos = dyn_idx[first.idx]
            root = (params[pos] if pos < len(params)
                    else f"{var}[{pos - len(params)}]" if var is not None else f"args[{pos}]")
        else:
            root = str(getattr(first, "key", first))
        names.append(root + tree_util.keystr(tuple(rest)))
    return names


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
    @_traceback_util.api_boundary
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
            if eqn.primitive in _sharding_rules.typed_by_api and eqn.outvars[0].aval.typed_sharding is not None:
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
    except Exception as e:  # (free until raised) say where the failing operation was traced, as JAX does
        _traceback_util.attach_user_context(e, st.source_override)
        raise
    finally:
        st.source_override = prev
    return [read(a) for a in jaxpr.outvars]


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """JAX's ``eval_shape``: the output shapes and dtypes, computed by tracing only."""
    closed, out_tree, _ = trace_to_jaxpr(fun, args, kwargs, what="eval_shape")
    # (refs' final values follow); a typed output carries its sharding type (over the abstract mesh), as JAX's
    shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type, vma=getattr(a, "vma", None),
                               sharding=out_struct_sharding(a, None))
              for a in closed.out_avals[:out_tree.num_leaves]]
    return tree_util.tree_unflatten(out_tree, shapes)
