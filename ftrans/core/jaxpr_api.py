"""``make_jaxpr``, ``eval_jaxpr`` and ``eval_shape``: staging a Python function and
running a staged one."""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax import tree_util

from ftrans.core.array import Array, jax_array_argument, jax_array_argument_error
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal
from ftrans.core.trace import aval_of, stage
from ftrans.core.trace import state as _trace_state
from ftrans.errors import FtransTypeError, FtransValueError


def _arg_aval(path: str, x: Any) -> ShapedArray:
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    if jax_array_argument(x):
        raise jax_array_argument_error(f"argument {path}")
    try:
        return aval_of(x)
    except TypeError:
        raise FtransTypeError(
            f"argument {path} of type {type(x).__name__} is not a valid array type "
            "(use arrays, NumPy arrays, Python scalars, or mark it static)"
        ) from None


def _static_tuple(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(static_argnums, int):
        return (static_argnums,)
    return tuple(static_argnums)


def trace_to_jaxpr(fun: Callable, args: tuple, kwargs: dict, static_argnums: tuple[int, ...] = ()):
    """Stage ``fun(*args, **kwargs)``: the closed jaxpr, output tree, and flat input avals."""
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
        out_tree_box.append(out_tree)
        return flat_out

    st = _trace_state
    prev, st.primal_rewriter = st.primal_rewriter, None  # make_jaxpr shows the program as written
    try:
        closed, _ = stage(flat_fun, in_avals)
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

    @functools.wraps(fun)
    def make(*args: Any, **kwargs: Any):
        with contextlib.ExitStack() as stack:
            for name, size in axes:  # collectives over these names stage as inside a pmap of that size
                stack.enter_context(extend_axis_env(name, size, None))
            closed, out_tree, _ = trace_to_jaxpr(fun, args, kwargs, static)
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals]
            return closed, tree_util.tree_unflatten(out_tree, shapes)
        return closed

    name = getattr(fun, "__name__", None)
    if name is not None:  # named as JAX names it: make_jaxpr(foo), from the public module
        make.__name__ = f"make_jaxpr({name})"
        make.__qualname__ = f"make_jaxpr({getattr(fun, '__qualname__', name)})"
        make.__module__ = "ftrans"
    return make


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
            st.source_override = eqn.source_info or prev
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
    closed, out_tree, _ = trace_to_jaxpr(fun, args, kwargs)
    shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals]
    return tree_util.tree_unflatten(out_tree, shapes)
