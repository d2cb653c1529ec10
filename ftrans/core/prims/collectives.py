"""Collectives over named axes: the primitives ``psum``, ``pmax``, ``pmin``, ``all_gather``, ``all_to_all``,
``ppermute``, ``psum_scatter`` and ``axis_index``, their abstract evaluation and (error-only) eager rule.

A collective names an axis that an enclosing ``vmap(..., axis_name=...)`` or
``pmap`` binds (``ftrans/core/axis_env.py``).  Under ``vmap`` the axis
is the batch dimension of the ``BatchTrace`` that owns the name, so each
collective's batching rule (``transforms/batch_rules/collectives.py``)
implements it with ordinary primitives on that dimension; by the time a
program is lowered no collective over a ``vmap`` axis is left.  A ``pmap``
axis is owned by no trace: the collective is staged into the pmap's body and
lowered to a cross-replica op (``lowering/rules/collectives.py``).

Binding.  A collective must reach the trace that owns its axis even when its
operands do not carry that trace: ``psum(1.0, 'i')`` has no operand from the
``vmap``, and ``axis_index('i')`` has no operand at all.  So these primitives
bind through ``_bind_collective``: the candidate traces are the operands' (as
for every primitive, the dynamic staging trace included) *and* the traces that
own the named axes; the innermost wins.  When it is an axis owner, its trace's
``process_collective`` runs (``BatchTrace`` applies the batching rule directly,
with ``not_mapped`` for operands that do not vary over the axis); otherwise the
primitive goes to that trace as usual (a JVP trace differentiates it, a staging
trace records it, a batch trace for another axis carries its own batch
dimension through and binds it again).  Core never needs to know which
transform owns an axis.

The user-facing functions are in ``ftrans/lax/_collectives.py``; JVP rules in
``transforms/ad_rules/collectives.py``, transposes in
``transforms/linear_rules/collectives.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.avals import ShapedArray
from ftrans.core.axis_env import frames_of
from ftrans.core.primitive import Primitive, abstract_eval_rules, first_weak, never_weak
from ftrans.core.prims._base import types_of
from ftrans.core.trace import aval_of
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = [
    "CollectivePrimitive", "psum_p", "pmax_p", "pmin_p", "all_gather_p", "all_to_all_p", "ppermute_p",
    "psum_scatter_p", "axis_index_p", "ragged_all_to_all_p", "pvary_p", "psum_invariant_p", "preduced_p",
    "vary_unreduced_cast_p", "reduced_vary_cast_p", "all_gather_reduced_p", "unreduced_reduce_scatter_p",
    "unreduced_psum_p", "ALL", "names_of",
    "check_perm",
]


def names_of(params: dict) -> tuple:
    """The axis names a collective's parameters name (one name or a tuple of them; ``pvary`` and
    ``psum_invariant`` call them ``axes``, as JAX does)."""
    n = params["axis_name"] if "axis_name" in params else params["axes"]
    return n if isinstance(n, tuple) else (n,)


# ----------------------------------------------------------------------------
# Binding


class CollectivePrimitive(Primitive):
    """A primitive over named axes: it binds at the trace owning its axes when that trace is innermost."""

    __slots__ = ()

    def bind(self, *args: Any, **params: Any) -> Any:
        return _bind_collective(self, args, params)


def _bind_collective(prim: Primitive, args: tuple, params: dict) -> Any:
    frames = frames_of(prim.name, names_of(params))
    # Type-check every binding against one element's operands (the owner's rule may run directly below).
    abstract_eval_rules[prim](*[aval_of(a) for a in args], **params)
    if _trace.is_eager():
        return _trace.eager_apply(prim, args, params)  # only a pmap axis can be bound here: impl says so
    top = _trace.find_top_trace(args).main
    for f in frames:
        m = f.main
        if m is not None and m.alive and m.level > top.level:
            top = m
    if any(f.main is top for f in frames):
        # The innermost trace owns one of the axes: it computes the collective over it.
        return top.trace.process_collective(prim, args, params)
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
        frames = frames_of(prim.name, names_of(params))
        raise NotImplementedError(
            f"{prim.name} over axis {frames[0].name!r} applied outside a pmapped function's staged body: "
            "collectives run inside pmap (compiled) or vmap(..., axis_name=...)"
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
        group_size(op, axis_name, axis_index_groups)
        if x.dtype == dtypes.bool_ and not allow_bool:
            raise _type_error(op, [x], "expects a numeric operand (the API layer converts bool to int32)")
        if not (x.dtype == dtypes.bool_ or dtypes.is_int(x.dtype) or dtypes.is_inexact(x.dtype)):
            raise _type_error(op, [x], "expects a numeric or bool operand")
        return x

    return rule


psum_p = _new("psum", _reduce_abstract("psum", False))
pmax_p = _new("pmax", _reduce_abstract("pmax", True))
pmin_p = _new("pmin", _reduce_abstract("pmin", True))


def group_size(op: str, axis_name: Any, axis_index_groups: Any = None) -> int:
    """The number of elements a collective talks among: a group's size given ``axis_index_groups``, else the
    size of the axis (the product of the sizes of several names)."""
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    n = math.prod(f.size for f in frames_of(op, names))
    if axis_index_groups is not None:
        check_groups(op, axis_index_groups, n)
        return len(axis_index_groups[0])
    return n


def check_groups(op: str, groups: Any, n: int) -> None:
    """``axis_index_groups``: groups of one size that together hold every index of the axis once."""
    flat = [i for g in groups for i in g]
    if (not groups or len({len(g) for g in groups}) != 1 or sorted(flat) != list(range(n))
            or any(type(i) is not int for i in flat)):
        raise FtransValueError(
            f"{op}: axis_index_groups={groups!r} must be groups of one size that together hold each index of the "
            f"axis (of size {n}) exactly once")


def _all_gather_abstract(x: ShapedArray, *, axis_name: Any, axis: int, tiled: bool,
                         axis_index_groups: Any = None, to: str = "varying") -> ShapedArray:
    n = group_size("all_gather", axis_name, axis_index_groups)
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
                         tiled: bool, axis_index_groups: Any = None) -> ShapedArray:
    n = group_size("all_to_all", axis_name, axis_index_groups)
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


def check_perm(op: str, perm: Any, n: int, name: Any) -> None:
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
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    check_perm("ppermute", perm, math.prod(f.size for f in frames_of("ppermute", names)), axis_name)
    return x


ppermute_p = _new("ppermute", _ppermute_abstract)


def _psum_scatter_abstract(x: ShapedArray, *, axis_name: Any, scatter_dimension: int, tiled: bool,
                           axis_index_groups: Any = None) -> ShapedArray:
    n = group_size("psum_scatter", axis_name, axis_index_groups)
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
    frames_of("axis_index", (axis_name,))
    return ShapedArray((), dtypes.int32, False)


axis_index_p = _new("axis_index", _axis_index_abstract, never_weak)

_RAGGED_INDEX_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _ragged_all_to_all_abstract(operand: ShapedArray, output: ShapedArray, *index_args: ShapedArray,
                                axis_name: Any, axis_index_groups: Any) -> ShapedArray:
    op = "ragged_all_to_all"
    n = 1
    for f in frames_of(op, names_of({"axis_name": axis_name})):
        n *= f.size
    for what, a in zip(_RAGGED_INDEX_ARGS, index_args):
        if not dtypes.is_int(a.dtype):
            raise FtransValueError(f"{op} {what} must be integer type, got {a.str_short()}")
        if len(a.shape) != 1 or a.shape[0] < 1:
            raise FtransValueError(f"{op} {what} must be rank 1 with positive dimension size, but got shape "
                                   f"{a.shape}")
    k = index_args[0].shape[0]
    for what, a in zip(_RAGGED_INDEX_ARGS[1:], index_args[1:]):
        if a.shape[0] != k:
            raise FtransValueError(f"{op}: {what} has {a.shape[0]} entries but input_offsets has {k}; the four "
                                   "offset and size arrays must have the same length")
    if k % n:
        raise FtransValueError(f"{op}: the offset and size arrays have {k} entries, which is not a multiple of the "
                               f"size {n} of axis {axis_name!r} (each peer gets the same number of slices)")
    if operand.dtype != output.dtype:
        raise FtransTypeError(f"{op}: operand {operand.str_short()} and output {output.str_short()} must have the "
                              "same dtype")
    if len(operand.shape) < 1 or len(operand.shape) != len(output.shape) or operand.shape[1:] != output.shape[1:]:
        raise FtransValueError(f"{op}: operand {operand.str_short()} and output {output.str_short()} must have the "
                               "same rank (at least 1) and the same sizes after the leading (ragged) axis")
    return output.update(weak_type=False)


ragged_all_to_all_p = _new("ragged_all_to_all", _ragged_all_to_all_abstract, never_weak)



# ----------------------------------------------------------------------------
# shard_map's varying-manual-axes casts (JAX's ``pvary`` and ``psum_invariant``), bound only inside a
# ``shard_map`` body traced with ``check_vma``: ``pvary[axes]`` types a value the same on every device of
# ``axes`` as varying along them (the value is unchanged; its transpose sums the cotangents over the axes),
# and ``psum_invariant[axes]`` is the ``psum`` of a varying value, whose result is the same on every device
# (its transpose is a ``pvary``: each device's cotangent is the whole one).  The varying sets themselves are
# carried by the staged values' types (``transforms/shard_map.py``).


def _pvary_abstract(x: ShapedArray, *, axes: tuple) -> ShapedArray:
    if not isinstance(axes, tuple):
        raise FtransTypeError(f"pvary: axes must be a tuple of axis names, got {axes!r}")
    frames_of("pvary", axes)
    return x


def _pvary_impl(x: Any, *, axes: tuple) -> Any:
    raise FtransValueError("pvary should be called under jax.shard_map.")


def _psum_invariant_abstract(x: ShapedArray, *, axes: tuple) -> ShapedArray:
    if not isinstance(axes, tuple):
        raise FtransTypeError(f"psum_invariant: axes must be a tuple of axis names, got {axes!r}")
    return _reduce_abstract("psum", False)(x, axis_name=axes, axis_index_groups=None)


pvary_p = _new("pvary", _pvary_abstract)
pvary_p.def_impl(_pvary_impl)
psum_invariant_p = _new("psum_invariant", _psum_invariant_abstract)


def _type_cast(name: str) -> Any:
    """JAX's no-op casts of a ``shard_map`` body's manual axis types (``pcast(to='reduced')`` is
    ``preduced``: invariant -> reduced; ``pcast(to='unreduced')`` is ``vary_unreduced_cast``: varying ->
    unreduced; ``reduced_vary_cast``: reduced -> varying, what ``pvary`` of a reduced value is).  The values stay as they are; the body's staging gives the result its new sets
    (``transforms/shard_map.py``)."""

    def abstract(x: ShapedArray, *, axes: tuple) -> ShapedArray:
        if not isinstance(axes, tuple):
            raise FtransTypeError(f"{name}: axes must be a tuple of axis names, got {axes!r}")
        frames_of(name, axes)
        return x

    def impl(x: Any, *, axes: tuple) -> Any:
        raise FtransValueError(f"{name} should be called under jax.shard_map.")

    p = _new(name, abstract)
    p.def_impl(impl)
    return p


preduced_p = _type_cast("preduced")
vary_unreduced_cast_p = _type_cast("vary_unreduced_cast")
reduced_vary_cast_p = _type_cast("reduced_vary_cast")


# ----------------------------------------------------------------------------
# shard_map's collectives between the reduced/unreduced types (JAX's): ``all_gather_reduced`` (varying ->
# reduced: ``all_gather(..., to='reduced')``), ``unreduced_reduce_scatter`` (unreduced -> varying:
# ``psum_scatter`` of a value unreduced over its axes) and ``unreduced_psum`` (unreduced -> invariant: ``psum``
# of one).  Each computes what the collective it is named for computes; the body's staging gives the result
# its sets, and checks the operand's (``transforms/shard_map.py``).  The first two transpose to each other,
# ``unreduced_psum`` to ``preduced`` (``transforms/linear_rules/collectives.py``).


def _axes_tuple(op: str, axis_name: Any) -> tuple:
    if not isinstance(axis_name, tuple) or not axis_name:
        raise FtransTypeError(f"{op}: axis_name must be a non-empty tuple of axis names, got {axis_name!r}")
    return axis_name


def _check_axis_size(op: str, axis_name: tuple, axis_size: Any) -> int:
    n = group_size(op, axis_name)
    if axis_size != n:
        raise FtransValueError(f"{op}: axis_size={axis_size!r} does not match the size {n} of the axes {axis_name}")
    return n


def _all_gather_reduced_abstract(x: ShapedArray, *, all_gather_dimension: int, axis_name: tuple, axis_size: int,
                                 tiled: bool) -> ShapedArray:
    op = "all_gather_reduced"
    n = _check_axis_size(op, _axes_tuple(op, axis_name), axis_size)
    shape = list(x.shape)
    if tiled:
        if not shape:
            raise _type_error(op, [x], "tiled=True needs an operand of rank at least 1")
        _check_axis(op, "all_gather_dimension", all_gather_dimension, len(shape), x)
        shape[all_gather_dimension] *= n
    else:
        _check_axis(op, "all_gather_dimension", all_gather_dimension, len(shape) + 1, x)
        shape.insert(all_gather_dimension, n)
    return x.update(shape=tuple(shape))


def _unreduced_reduce_scatter_abstract(x: ShapedArray, *, axis_name: tuple, scatter_dimension: int, axis_size: int,
                                       tiled: bool) -> ShapedArray:
    op = "unreduced_reduce_scatter"
    n = _check_axis_size(op, _axes_tuple(op, axis_name), axis_size)
    if x.dtype == dtypes.bool_:
        raise _type_error(op, [x], "expects a numeric operand")
    shape = list(x.shape)
    _check_axis(op, "scatter_dimension", scatter_dimension, len(shape), x)
    k = shape[scatter_dimension]
    if tiled:
        if k % n:
            raise FtransValueError(f"tiled reduce_scatter operand scatter dimension size {k} must be divisible by "
                                   f"shard_count {n} (operand {x.str_short()}, axes {axis_name})")
        shape[scatter_dimension] = k // n
    else:
        if k != n:
            raise FtransValueError(f"reduce_scatter operand scatter dimension size {k} must match shard count {n} "
                                   f"(operand {x.str_short()}, axes {axis_name})")
        del shape[scatter_dimension]
    return x.update(shape=tuple(shape))


def _unreduced_psum_abstract(x: ShapedArray, *, axes: tuple) -> ShapedArray:
    axes = _axes_tuple("unreduced_psum", axes)
    if any(type(a) is int for a in axes):
        raise FtransValueError(f"unreduced_psum does not accept integer axis_name. Got axis_name={axes}")
    return _reduce_abstract("psum", False)(x, axis_name=axes, axis_index_groups=None)


def _shard_map_only_impl(name: str) -> Any:
    def impl(x: Any, **params: Any) -> Any:
        raise NotImplementedError(f"{name} runs only inside a shard_map body (over its manual mesh axes), where "
                                  "the body's types say which axes a value is reduced or unreduced along")

    impl.__name__ = f"{name}_impl"
    return impl


all_gather_reduced_p = _new("all_gather_reduced", _all_gather_reduced_abstract)
unreduced_reduce_scatter_p = _new("unreduced_reduce_scatter", _unreduced_reduce_scatter_abstract)
unreduced_psum_p = _new("unreduced_psum", _unreduced_psum_abstract)
for _p in (all_gather_reduced_p, unreduced_reduce_scatter_p, unreduced_psum_p):
    _p.def_impl(_shard_map_only_impl(_p.name))

# A partially manual shard_map body's typed values (over its Explicit axes left automatic) keep their type
# through the casts and reductions over its manual axes (core/sharding_rules.py).
from ftrans.core import sharding_rules as _sr  # noqa: E402

for _p in (pvary_p, psum_invariant_p, psum_p, pmax_p, pmin_p, preduced_p, vary_unreduced_cast_p, reduced_vary_cast_p,
           unreduced_psum_p):
    _p.sharding_rule = _sr.same_as_first

ALL = (psum_p, pmax_p, pmin_p, all_gather_p, all_to_all_p, ppermute_p, psum_scatter_p, axis_index_p,
       ragged_all_to_all_p, pvary_p, psum_invariant_p, preduced_p, vary_unreduced_cast_p, reduced_vary_cast_p,
       all_gather_reduced_p, unreduced_reduce_scatter_p, unreduced_psum_p)
