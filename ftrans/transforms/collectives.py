"""Collectives over named axes: ``psum``, ``pmax``, ``pmin``, ``all_gather``, ``all_to_all``,
``ppermute``, ``psum_scatter`` and ``axis_index`` (and ``pmean`` on top of ``psum``).

A collective names an axis that an enclosing ``vmap(..., axis_name=...)`` (or,
later, ``pmap``) binds.  Under ``vmap`` the axis is the batch dimension of the
``BatchTrace`` that owns the name, so each collective's batching rule
implements it with ordinary primitives on that dimension (``psum`` is a
``reduce_sum`` over it, ``axis_index`` an ``iota``, ``all_gather`` a transpose
that turns the batch dimension into a data dimension, ...).  By the time a
program is lowered no collective over a ``vmap`` axis is left, which is why the
primitives have no lowering of their own yet (``pmap`` will add one).

Binding.  A collective must reach the trace that owns its axis even when its
operands do not carry that trace: ``psum(1.0, 'i')`` has no operand at all
from the ``vmap``, and ``axis_index('i')`` has no operand at all.  So these
primitives bind through ``_bind_collective``: the candidate traces are the
operands' (as for every primitive, the dynamic staging trace included) *and*
the traces that own the named axes; the innermost wins.  When it is an axis
owner, the batching rule runs directly (with ``not_mapped`` for operands that
do not vary over the axis); otherwise the primitive goes to that trace as
usual (a JVP trace differentiates it, a staging trace records it, a batch trace
for another axis carries its own batch dimension through and binds it again).

Rules: ``psum``, ``all_gather``, ``all_to_all``, ``ppermute`` and
``psum_scatter`` are linear.  Their transposes: ``psum`` -> ``psum``,
``ppermute`` -> ``ppermute`` with the inverse permutation, ``all_gather`` <->
``psum_scatter``, ``all_to_all`` -> ``all_to_all`` with split and concat axes
swapped.  ``pmax``/``pmin`` have no derivative (as in JAX); ``axis_index`` has
a zero one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from jax import tree_util

from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive, abstract_eval_rules, first_weak, mark_unsupported, never_weak
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims._base import types_of
from ftrans.core.trace import aval_of
from ftrans.errors import FtransNameError, FtransTypeError, FtransValueError
from ftrans.transforms.ad import defjvp_linear, defjvp_zero
from ftrans.transforms.batching import (
    BatchTrace,
    BatchTracer,
    axis_env,
    batching_rules,
    bdim_at_front,
    moveaxis,
    not_mapped,
    register_batching,
)
from ftrans.transforms.transpose import register_transpose

__all__ = [
    "psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "psum_scatter", "axis_index",
    "psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p", "ppermute_p", "psum_scatter_p",
    "axis_index_p",
]


# ----------------------------------------------------------------------------
# Axis names


def _bound_names() -> list:
    seen: list = []
    for f in axis_env.frames:
        if f.name is not None and f.name not in seen:
            seen.append(f.name)
    return seen


def _unbound(op: str, name: Any) -> FtransNameError:
    bound = _bound_names()
    where = ("the axis names bound here are " + ", ".join(repr(n) for n in bound)) if bound else \
        "no axis name is bound here"
    return FtransNameError(
        f"unbound axis name: {name} ({op} over axis {name!r}; {where}). A collective works over an axis "
        f"that an enclosing vmap(..., axis_name={name!r}) or pmap(..., axis_name={name!r}) binds: call "
        f"{op} inside the function that such a vmap/pmap maps"
    )


def _frames(op: str, names: Sequence[Any]) -> list:
    """The innermost axis frame of each name, or a NameError for the first unbound one."""
    out = []
    for n in names:
        f = axis_env.lookup(n) if n is not None else None
        if f is None:
            raise _unbound(op, n)
        out.append(f)
    return out


def _axis_size(op: str, name: Any) -> int:
    return _frames(op, (name,))[0].size


def _names_of(params: dict) -> tuple:
    n = params["axis_name"]
    return n if isinstance(n, tuple) else (n,)


def _owns(frame: Any, name: Any) -> bool:
    """Whether ``name`` refers (innermost binding) to the axis of the batch trace whose frame is ``frame``."""
    f = axis_env.lookup(name)
    return f is not None and frame.main is not None and f.main is frame.main


# ----------------------------------------------------------------------------
# Binding


class CollectivePrimitive(Primitive):
    """A primitive over named axes: it binds at the trace owning its axes when that trace is innermost."""

    __slots__ = ()

    def bind(self, *args: Any, **params: Any) -> Any:
        return _bind_collective(self, args, params)


def _bind_collective(prim: Primitive, args: tuple, params: dict) -> Any:
    frames = _frames(prim.name, _names_of(params))
    # Type-check every binding against one element's operands (the batching rule may run directly below).
    abstract_eval_rules[prim](*[aval_of(a) for a in args], **params)
    if _trace.is_eager():
        return _trace.eager_apply(prim, args, params)  # only a pmap axis can be bound here: impl says so
    top = _trace.find_top_trace(args).main
    for f in frames:
        m = f.main
        if m is not None and m.alive and m.level > top.level:
            top = m
    if top.trace_type is BatchTrace and any(f.main is top for f in frames):
        vals, dims = [], []
        for a in args:
            if isinstance(a, BatchTracer) and a._trace.main is top:
                vals.append(a.val)
                dims.append(a.bdim)
            else:  # a value of an enclosing level: the same for every element of this axis
                vals.append(a)
                dims.append(not_mapped)
        out, out_dim = batching_rules[prim](vals, dims, frame=top.payload, **params)
        return BatchTracer(top.trace, out, out_dim)
    trace = top.trace
    raise_ = trace.full_raise
    return trace.process_primitive(prim, [raise_(a) for a in args], params)


# ----------------------------------------------------------------------------
# Abstract evaluation and the (error-only) eager rule


def _type_error(op: str, avals: Sequence[ShapedArray], msg: str) -> FtransTypeError:
    return FtransTypeError(f"{op}: {msg} (operand: {types_of(avals)})")


def _check_axis(op: str, what: str, axis: Any, bound: int, x: ShapedArray) -> None:
    if type(axis) is not int or not 0 <= axis < bound:
        raise FtransValueError(
            f"{op}: {what}={axis!r} is out of range for an operand of type {x.str_short()} (it must be in "
            f"[0, {bound - 1}])"
        )


def _impl_error(prim: Primitive) -> Any:
    def impl(*args: Any, **params: Any) -> Any:
        frames = _frames(prim.name, _names_of(params))
        raise NotImplementedError(
            f"{prim.name} over axis {frames[0].name!r}: collectives over pmap axes are not supported yet; "
            "under vmap(..., axis_name=...) they are computed by vmap"
        )

    impl.__name__ = f"{prim.name}_impl"
    return impl


def _new(name: str, abstract_eval: Any, weak: Any = first_weak) -> CollectivePrimitive:
    p = CollectivePrimitive(name)
    p.def_abstract_eval(abstract_eval)
    p.def_impl(_impl_error(p))
    p.def_weak_type(weak)
    return p


def _reduce_abstract(op: str, allow_bool: bool) -> Any:
    def rule(x: ShapedArray, *, axis_name: tuple, axis_index_groups: Any) -> ShapedArray:
        _frames(op, axis_name)
        if x.dtype == dtypes.bool_ and not allow_bool:
            raise _type_error(op, [x], "expects a numeric operand (the API layer converts bool to int32)")
        if not (x.dtype == dtypes.bool_ or dtypes.is_int(x.dtype) or dtypes.is_inexact(x.dtype)):
            raise _type_error(op, [x], "expects a numeric or bool operand")
        return x

    return rule


psum_p = _new("psum", _reduce_abstract("psum", False))
pmax_p = _new("pmax", _reduce_abstract("pmax", True))
pmin_p = _new("pmin", _reduce_abstract("pmin", True))


def _all_gather_abstract(x: ShapedArray, *, axis_name: Any, axis: int, tiled: bool) -> ShapedArray:
    n = _axis_size("all_gather", axis_name)
    shape = list(x.shape)
    if tiled:
        if not shape:
            raise _type_error("all_gather", [x], "tiled=True needs an operand of rank at least 1")
        _check_axis("all_gather", "axis", axis, len(shape), x)
        shape[axis] *= n
    else:
        _check_axis("all_gather", "axis", axis, len(shape) + 1, x)
        shape.insert(axis, n)
    return x.update(shape=tuple(shape))


all_gather_p = _new("all_gather", _all_gather_abstract)


def _all_to_all_abstract(x: ShapedArray, *, axis_name: Any, split_axis: int, concat_axis: int,
                         tiled: bool) -> ShapedArray:
    n = _axis_size("all_to_all", axis_name)
    shape = list(x.shape)
    _check_axis("all_to_all", "split_axis", split_axis, len(shape), x)
    _check_axis("all_to_all", "concat_axis", concat_axis, len(shape), x)
    k = shape[split_axis]
    if tiled:
        if k % n:
            raise FtransValueError(
                f"all_to_all: with tiled=True the split axis ({split_axis}) of the operand {x.str_short()} must "
                f"be divisible by the size {n} of axis {axis_name!r}"
            )
        shape[split_axis] = k // n
        shape[concat_axis] *= n
    else:
        if k != n:
            raise FtransValueError(
                f"all_to_all: the split axis ({split_axis}) of the operand {x.str_short()} has size {k}, but it "
                f"must equal the size {n} of axis {axis_name!r} (or pass tiled=True to split it into {n} chunks)"
            )
        del shape[split_axis]
        shape.insert(concat_axis, n)
    return x.update(shape=tuple(shape))


all_to_all_p = _new("all_to_all", _all_to_all_abstract)


def _check_perm(op: str, perm: Any, n: int, name: Any) -> None:
    srcs, dsts = set(), set()
    for pair in perm:
        if len(pair) != 2 or any(type(i) is not int for i in pair):
            raise FtransTypeError(f"{op}: perm must be a sequence of (source, destination) int pairs, got {perm!r}")
        s, d = pair
        if not (0 <= s < n and 0 <= d < n):
            raise FtransValueError(
                f"{op}: perm pair {pair} is out of range for axis {name!r} of size {n} (indices must be in "
                f"[0, {n - 1}])"
            )
        if s in srcs or d in dsts:
            raise FtransValueError(
                f"{op}: perm {list(perm)} sends from or to index {s if s in srcs else d} twice; each index "
                "may appear at most once as a source and once as a destination"
            )
        srcs.add(s)
        dsts.add(d)


def _ppermute_abstract(x: ShapedArray, *, axis_name: Any, perm: tuple) -> ShapedArray:
    _check_perm("ppermute", perm, _axis_size("ppermute", axis_name), axis_name)
    return x


ppermute_p = _new("ppermute", _ppermute_abstract)


def _psum_scatter_abstract(x: ShapedArray, *, axis_name: Any, scatter_dimension: int, tiled: bool) -> ShapedArray:
    n = _axis_size("psum_scatter", axis_name)
    if x.dtype == dtypes.bool_:
        raise _type_error("psum_scatter", [x], "expects a numeric operand")
    shape = list(x.shape)
    _check_axis("psum_scatter", "scatter_dimension", scatter_dimension, len(shape), x)
    k = shape[scatter_dimension]
    if tiled:
        if k % n:
            raise FtransValueError(
                f"psum_scatter: with tiled=True the scatter dimension ({scatter_dimension}) of the operand "
                f"{x.str_short()} must be divisible by the size {n} of axis {axis_name!r}"
            )
        shape[scatter_dimension] = k // n
    else:
        if k != n:
            raise FtransValueError(
                f"psum_scatter: the scatter dimension ({scatter_dimension}) of the operand {x.str_short()} has "
                f"size {k}, but it must equal the size {n} of axis {axis_name!r} (or pass tiled=True)"
            )
        del shape[scatter_dimension]
    return x.update(shape=tuple(shape))


psum_scatter_p = _new("psum_scatter", _psum_scatter_abstract)


def _axis_index_abstract(*, axis_name: Any) -> ShapedArray:
    _frames("axis_index", (axis_name,))
    return ShapedArray((), dtypes.int32, False)


axis_index_p = _new("axis_index", _axis_index_abstract, never_weak)

ALL = (psum_p, pmax_p, pmin_p, all_gather_p, all_to_all_p, ppermute_p, psum_scatter_p, axis_index_p)

for _p in ALL:
    mark_unsupported(_p, "lowering", "collectives lower with pmap (a later issue); under vmap they are batched "
                                     "away before lowering")


# ----------------------------------------------------------------------------
# Batching: over this trace's own axis the collective is computed here; over another axis it is bound
# again with the batch dimension carried along.


def _scale(x: Any, n: int) -> Any:
    """``x * n`` in ``x``'s own dtype (wrapping around for a narrow integer type, as the sum would)."""
    return E.mul_p.bind(x, Array._new(np.asarray(n).astype(aval_of(x).dtype), True))


def _split_own(frame: Any, names: tuple) -> tuple[bool, tuple]:
    own = [n for n in names if _owns(frame, n)]
    return bool(own), tuple(n for n in names if n not in own)


def _reduction_batch(prim: Primitive, reduce_p: Primitive, unmapped: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, axis_name: tuple, axis_index_groups: Any) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        own, rest = _split_own(frame, axis_name)
        if own:
            x = unmapped(x, frame.size) if d is not_mapped else reduce_p.bind(x, axes=(d,))
            d = not_mapped
        if rest:
            x = prim.bind(x, axis_name=rest, axis_index_groups=axis_index_groups)
        return x, d

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


_reduction_batch(psum_p, R.reduce_sum_p, _scale)
_reduction_batch(pmax_p, R.reduce_max_p, lambda x, n: x)
_reduction_batch(pmin_p, R.reduce_min_p, lambda x, n: x)


def _reshape(x: Any, shape: Sequence[int]) -> Any:
    return S.reshape_p.bind(x, new_sizes=tuple(shape), dimensions=None)


@register_batching(all_gather_p)
def _all_gather_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, axis: int,
                      tiled: bool) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _owns(frame, axis_name):
        return all_gather_p.bind(moveaxis(x, d, 0), axis_name=axis_name, axis=axis + 1, tiled=tiled), 0
    n = frame.size
    out = moveaxis(bdim_at_front(x, d, n), 0, axis)  # the batch dimension becomes the gathered one
    if tiled:
        shape = list(aval_of(out).shape)
        shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
        out = _reshape(out, shape)
    return out, not_mapped


@register_batching(all_to_all_p)
def _all_to_all_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, split_axis: int, concat_axis: int,
                      tiled: bool) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _owns(frame, axis_name):
        return all_to_all_p.bind(moveaxis(x, d, 0), axis_name=axis_name, split_axis=split_axis + 1,
                                 concat_axis=concat_axis + 1, tiled=tiled), 0
    n = frame.size
    x = bdim_at_front(x, d, n)  # [j (sender), *shape]
    if tiled:
        shape = list(aval_of(x).shape)
        shape[split_axis + 1:split_axis + 2] = [n, shape[split_axis + 1] // n]
        x = _reshape(x, shape)  # [j, ..., k (receiver), chunk, ...]
    y = moveaxis(x, split_axis + 1, 0)  # [k, j, *per-example shape without the split]
    out = moveaxis(y, 1, concat_axis + 1)  # [k, ..., j at concat_axis, ...]
    if tiled:
        shape = list(aval_of(out).shape)
        c = concat_axis + 1
        shape[c:c + 2] = [shape[c] * shape[c + 1]]
        out = _reshape(out, shape)
    return out, 0


@register_batching(ppermute_p)
def _ppermute_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, perm: tuple) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _owns(frame, axis_name):
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    n = frame.size
    src = [n] * n  # index n is out of range: filled with zeros
    for s, t in perm:
        src[t] = s
    x = bdim_at_front(x, d, n)
    if src == list(range(n)):
        return x, 0
    from ftrans.numpy import take

    return take(x, np.asarray(src, np.int32), axis=0, mode="fill", fill_value=0), 0


@register_batching(psum_scatter_p)
def _psum_scatter_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, scatter_dimension: int,
                        tiled: bool) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _owns(frame, axis_name):
        return psum_scatter_p.bind(moveaxis(x, d, 0), axis_name=axis_name,
                                   scatter_dimension=scatter_dimension + 1, tiled=tiled), 0
    n = frame.size
    total = _scale(x, n) if d is not_mapped else R.reduce_sum_p.bind(x, axes=(d,))
    if tiled:  # split the scatter dimension into (receiver, chunk): the receiver is the batch dimension
        shape = list(aval_of(total).shape)
        shape[scatter_dimension:scatter_dimension + 1] = [n, shape[scatter_dimension] // n]
        total = _reshape(total, shape)
    return total, scatter_dimension


@register_batching(axis_index_p)
def _axis_index_batch(vals: list, dims: list, *, frame: Any, axis_name: Any) -> tuple[Any, Any]:
    if not _owns(frame, axis_name):
        return axis_index_p.bind(axis_name=axis_name), not_mapped
    return S.iota_p.bind(dtype=dtypes.int32, shape=(frame.size,), dimension=0), 0


# ----------------------------------------------------------------------------
# Differentiation


for _p in (psum_p, all_gather_p, all_to_all_p, ppermute_p, psum_scatter_p):
    defjvp_linear(_p)
defjvp_zero(axis_index_p)
for _p in (pmax_p, pmin_p):
    mark_unsupported(_p, "jvp", f"{_p.name} has no derivative rule (JAX defines none either); differentiate "
                                "through an explicit comparison with the gathered values instead")
    mark_unsupported(_p, "transpose", f"{_p.name} is not linear")
mark_unsupported(axis_index_p, "transpose", "axis_index has no operands, so nothing to transpose")


@register_transpose(psum_p)
def _psum_t(ct: Any, x: Any, *, axis_name: tuple, axis_index_groups: Any) -> list:
    return [psum_p.bind(ct, axis_name=axis_name, axis_index_groups=axis_index_groups)]


@register_transpose(ppermute_p)
def _ppermute_t(ct: Any, x: Any, *, axis_name: Any, perm: tuple) -> list:
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((t, s) for s, t in perm))]


@register_transpose(all_gather_p)
def _all_gather_t(ct: Any, x: Any, *, axis_name: Any, axis: int, tiled: bool) -> list:
    return [psum_scatter_p.bind(ct, axis_name=axis_name, scatter_dimension=axis, tiled=tiled)]


@register_transpose(psum_scatter_p)
def _psum_scatter_t(ct: Any, x: Any, *, axis_name: Any, scatter_dimension: int, tiled: bool) -> list:
    return [all_gather_p.bind(ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled)]


@register_transpose(all_to_all_p)
def _all_to_all_t(ct: Any, x: Any, *, axis_name: Any, split_axis: int, concat_axis: int, tiled: bool) -> list:
    return [all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis, concat_axis=split_axis,
                              tiled=tiled)]


# ----------------------------------------------------------------------------
# The public API (JAX's lax names and signatures)


def _no_groups(op: str, axis_index_groups: Any) -> None:
    if axis_index_groups is not None:
        raise NotImplementedError(f"{op}: axis_index_groups is not supported (only None, reducing over the whole axis)")


def _as_names(op: str, axis_name: Any) -> tuple:
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if len(set(names)) != len(names):
        raise FtransValueError(f"{op}: axis_name {axis_name!r} names an axis twice")
    for n in names:
        if n is None:
            raise FtransTypeError(f"{op}: axis_name must be a name bound by vmap/pmap (a string, say), got None")
    return names


def _single_name(op: str, axis_name: Any) -> Any:
    if isinstance(axis_name, (tuple, list)):
        if len(axis_name) == 1:
            return axis_name[0]
        raise NotImplementedError(f"{op}: several axis names at once ({axis_name!r}) are not supported; "
                                  "use one axis name")
    if axis_name is None:
        raise FtransTypeError(f"{op}: axis_name must be a name bound by vmap/pmap (a string, say), got None")
    return axis_name


def _tree_map(f: Any, x: Any) -> Any:
    """``tree_map`` with the loop in this module, so an error names the user's line, not jax's tree code."""
    leaves, tree = tree_util.tree_flatten(x)
    return tree_util.tree_unflatten(tree, [f(leaf) for leaf in leaves])


def _operand(x: Any) -> Any:
    from ftrans.core.operands import as_operand

    return as_operand(x)


def _is_python_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float, complex)


def _canon(op: str, what: str, axis: Any, ndim: int, aval: ShapedArray) -> int:
    if type(axis) is not int and not isinstance(axis, np.integer):
        raise FtransTypeError(f"{op}: {what} must be an int, got {axis!r}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise FtransValueError(
            f"{op}: {what}={axis} is out of range for an operand of type {aval.str_short()} (it must be in "
            f"[{-ndim}, {ndim - 1}])"
        )
    return axis % ndim


def _reduce(op: str, prim: Primitive, reduce_p: Primitive, x: Any, axis_name: Any, axis_index_groups: Any) -> Any:
    _no_groups(op, axis_index_groups)
    names = _as_names(op, axis_name)
    named = tuple(n for n in names if type(n) is not int)
    positional = tuple(n for n in names if type(n) is int)
    frames = _frames(op, named)
    size = math.prod(f.size for f in frames)

    def one(leaf: Any) -> Any:
        if _is_python_scalar(leaf) and not positional:
            # Known now, as in JAX (``psum(1, 'i')`` is the axis size as a Python int).
            if op == "psum":
                return (int(leaf) if type(leaf) is bool else leaf) * size
            return leaf
        v = _operand(leaf)
        aval = aval_of(v)
        if op == "psum" and aval.dtype == dtypes.bool_:
            v = S.convert_element_type_p.bind(v, new_dtype=dtypes.int32, weak_type=False)
        if positional:
            axes = tuple(sorted({_canon(op, "positional axis", a, len(aval.shape), aval) for a in positional}))
            v = reduce_p.bind(v, axes=axes)
        if named:
            v = prim.bind(v, axis_name=named, axis_index_groups=None)
        return v

    return _tree_map(one, x)


def psum(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """JAX's ``lax.psum``: the sum of ``x`` (a pytree) over the named axis (or axes; ints are positional axes)."""
    return _reduce("psum", psum_p, R.reduce_sum_p, x, axis_name, axis_index_groups)


def pmax(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """JAX's ``lax.pmax``: the maximum of ``x`` (a pytree) over the named axis (or axes)."""
    return _reduce("pmax", pmax_p, R.reduce_max_p, x, axis_name, axis_index_groups)


def pmin(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """JAX's ``lax.pmin``: the minimum of ``x`` (a pytree) over the named axis (or axes)."""
    return _reduce("pmin", pmin_p, R.reduce_min_p, x, axis_name, axis_index_groups)


def pmean(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """JAX's ``lax.pmean``: the mean of ``x`` (a pytree) over the named axis (or axes)."""
    _no_groups("pmean", axis_index_groups)
    names = _as_names("pmean", axis_name)
    frames = _frames("pmean", tuple(n for n in names if type(n) is not int))
    positional = [n for n in names if type(n) is int]
    named_size = math.prod(f.size for f in frames)
    from ftrans.numpy import true_divide

    def one(leaf: Any) -> Any:
        total = psum(leaf, names)
        if positional:
            shape = aval_of(_operand(leaf)).shape
            n = named_size * math.prod(shape[_canon("pmean", "positional axis", a, len(shape), aval_of(leaf))]
                                       for a in positional)
        else:
            n = named_size
        return total / n if _is_python_scalar(total) else true_divide(total, n)

    return _tree_map(one, x)


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False) -> Any:
    """JAX's ``lax.all_gather``: every element's ``x`` (a pytree), stacked (or, ``tiled``, concatenated) along ``axis``.

    Several axis names gather over all of them, the last varying fastest.
    """
    _no_groups("all_gather", axis_index_groups)
    names = _as_names("all_gather", axis_name)
    _frames("all_gather", names)

    def one(leaf: Any) -> Any:
        v = _operand(leaf)
        aval = aval_of(v)
        nd = len(aval.shape)
        if tiled and nd == 0:
            raise FtransValueError("all_gather: tiled=True needs an operand of rank at least 1, got a scalar "
                                   f"of type {aval.str_short()}")
        ax = _canon("all_gather", "axis", axis, nd if tiled else nd + 1, aval)
        v = all_gather_p.bind(v, axis_name=names[-1], axis=ax, tiled=bool(tiled))
        for n in reversed(names[:-1]):  # blocks of the later names, concatenated over the earlier ones
            v = all_gather_p.bind(v, axis_name=n, axis=ax, tiled=True)
        return v

    return _tree_map(one, x)


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
               tiled: bool = False) -> Any:
    """JAX's ``lax.all_to_all``: split ``x`` (a pytree) along ``split_axis`` over the axis's elements and
    concatenate what each receives along ``concat_axis``."""
    _no_groups("all_to_all", axis_index_groups)
    name = _single_name("all_to_all", axis_name)
    _frames("all_to_all", (name,))

    def one(leaf: Any) -> Any:
        v = _operand(leaf)
        aval = aval_of(v)
        nd = len(aval.shape)
        if nd == 0:
            raise FtransValueError(f"all_to_all: the operand must have rank at least 1, got {aval.str_short()}")
        s = _canon("all_to_all", "split_axis", split_axis, nd, aval)
        c = _canon("all_to_all", "concat_axis", concat_axis, nd, aval)
        return all_to_all_p.bind(v, axis_name=name, split_axis=s, concat_axis=c, tiled=bool(tiled))

    return _tree_map(one, x)


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """JAX's ``lax.ppermute``: element ``src``'s ``x`` (a pytree) goes to element ``dst`` for each ``(src, dst)``
    in ``perm``; elements that receive nothing get zeros."""
    name = _single_name("ppermute", axis_name)
    n = _axis_size("ppermute", name)
    try:
        perm = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise FtransTypeError(f"ppermute: perm must be a sequence of (source, destination) int pairs, "
                              f"got {perm!r}") from None
    _check_perm("ppermute", perm, n, name)
    return _tree_map(lambda leaf: ppermute_p.bind(_operand(leaf), axis_name=name, perm=perm), x)


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                 tiled: bool = False) -> Any:
    """JAX's ``lax.psum_scatter``: the sum over the axis of ``x`` (a pytree), of which element ``k`` keeps
    block ``k`` along ``scatter_dimension``."""
    _no_groups("psum_scatter", axis_index_groups)
    name = _single_name("psum_scatter", axis_name)
    _frames("psum_scatter", (name,))

    def one(leaf: Any) -> Any:
        v = _operand(leaf)
        aval = aval_of(v)
        if aval.dtype == dtypes.bool_:
            v = S.convert_element_type_p.bind(v, new_dtype=dtypes.int32, weak_type=False)
        sd = _canon("psum_scatter", "scatter_dimension", scatter_dimension, len(aval.shape), aval)
        return psum_scatter_p.bind(v, axis_name=name, scatter_dimension=sd, tiled=bool(tiled))

    return _tree_map(one, x)


def axis_index(axis_name: Any) -> Any:
    """JAX's ``lax.axis_index``: this element's int32 index along the named axis (several names: row-major)."""
    names = _as_names("axis_index", axis_name)
    if not names:
        raise FtransValueError("axis_index: axis_name is an empty tuple; give at least one axis name")
    frames = _frames("axis_index", names)
    out: Any = None
    for n, f in zip(names, frames):
        i = axis_index_p.bind(axis_name=n)
        out = i if out is None else E.add_p.bind(_scale(out, f.size), i)
    return out
