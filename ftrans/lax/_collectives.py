"""Collectives over named axes (JAX's ``lax`` names and signatures): ``psum``, ``pmean``, ``pmax``, ``pmin``,
``all_gather``, ``all_to_all``, ``ppermute``, ``psum_scatter`` and ``axis_index``.

Each checks its arguments against the axes bound here (``ftrans/core/axis_env.py``),
maps over the leaves of a pytree, and binds one primitive of
``ftrans/core/prims/collectives.py`` per leaf and axis.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.axis_env import axis_env, axis_size, frames_of
from ftrans.core.config import config as _config
from ftrans.core.operands import as_operand, convert, dtype_weak
from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims.collectives import (
    all_gather_p,
    all_gather_reduced_p,
    all_to_all_p,
    axis_index_p,
    check_groups,
    check_perm,
    pmax_p,
    pmin_p,
    ppermute_p,
    preduced_p,
    psum_invariant_p,
    psum_p,
    psum_scatter_p,
    ragged_all_to_all_p,
    unreduced_psum_p,
    unreduced_reduce_scatter_p,
    vary_unreduced_cast_p,
)
from ftrans.core.trace import aval_of
from ftrans.errors import FtransNotImplementedError, FtransTypeError, FtransValueError
from ftrans.transforms.shard_map import collective_pvary, pvary_tracer, vma_checked_names

__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "all_to_all", "ppermute", "psum_scatter", "axis_index",
           "pswapaxes", "pshuffle", "pbroadcast", "pcast", "ragged_all_to_all", "psend", "precv",
           "psum_scatter_start"]



def _collective_frames(op: str, names: Sequence[Any]) -> list:
    """``frames_of`` for a collective: jax 0.12's ``sharding.no_collectives`` forbids one across its axes (not
    ``axis_index`` or ``pcast``, which communicate nothing)."""
    frames = frames_of(op, names)
    forbidden = _config.no_collectives
    if forbidden:
        from ftrans.errors import ForbiddenCollectiveError

        for n in names:
            if n in forbidden:
                raise ForbiddenCollectiveError(f"Collective across axis '{n}' is forbidden by `no_collectives`, but "
                                               f"`{op}` acts on axis '{n}'.")
    return frames

def _groups(op: str, axis_index_groups: Any, names: tuple) -> Any:
    """``axis_index_groups`` as a tuple of tuples of ints (indices along the named axes, several names
    counting row-major), checked to split the axis into groups of one size; None stays None."""
    if axis_index_groups is None:
        return None
    try:
        groups = tuple(tuple(operator.index(i) for i in g) for g in axis_index_groups)
    except TypeError:
        raise FtransTypeError(f"{op}: axis_index_groups must be a sequence of sequences of ints, got "
                              f"{axis_index_groups!r}") from None
    frames = _collective_frames(op, names)
    if any(f.main is not None for f in frames):  # as in JAX
        raise NotImplementedError(f"{op}: axis_index_groups over {names!r}, which vmap binds, is not supported "
                                  "(axis_index_groups works over pmap and shard_map axes)")
    check_groups(op, groups, math.prod(f.size for f in frames))
    return groups


def _g(groups: Any) -> dict:
    return {} if groups is None else {"axis_index_groups": groups}


def _one_name(names: tuple) -> Any:
    return names[0] if len(names) == 1 else names


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
    return as_operand(x)


def _vary(v: Any, names: tuple, what: str = "collective") -> Any:
    """In a ``shard_map`` body checked with ``check_vma``: ``v`` cast to vary along the manual axes of
    ``names`` first (JAX's ``insert_collective_pvary``), so a collective's transpose sums back the
    cotangents of an operand that was the same on every device; elsewhere ``v``."""
    checked = _not_unreduced(v, vma_checked_names(names))
    return collective_pvary(v, checked, what) if checked else v


def _not_unreduced(v: Any, names: tuple) -> tuple:
    """Of ``names``, those ``v`` is not unreduced along: an unreduced value's partial sums are summed (or
    scattered) as they are, with no ``pvary`` first (JAX's ``unreduced_psum``)."""
    u = getattr(aval_of(v), "unreduced", None) if names else None
    return tuple(n for n in names if n not in u) if u else names


def _all_unreduced(op: str, v: Any, names: tuple) -> bool:
    """Whether ``v`` is unreduced along every one of ``names`` (the manual axes of a checked body a collective
    names), so the collective is JAX's unreduced one (``unreduced_psum`` / ``unreduced_psum_scatter``); a value
    unreduced along some of them only raises, as JAX's."""
    u = getattr(aval_of(v), "unreduced", None) if names else None
    if not u or not u & set(names):
        return False
    if set(names) <= u:
        return True
    from ftrans.transforms.shard_map import vma_of

    a = aval_of(v)
    state = {"unreduced" if n in u else "varying" if n in vma_of(v) else
             "reduced" if n in (getattr(a, "reduced", None) or ()) else "invarying" for n in names}
    raise FtransValueError(
        f"jax.lax.{op} can only accept axis_name which corresponds to one of varying, unreduced, reduced or "
        f"invarying state of the input. Got input type: {a.str_short()}, axes: {names} and input state: {state}")


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


def _without_size_one(names: tuple) -> tuple:
    """JAX's ``jax_remove_size_one_mesh_axis_from_type``: ``psum``/``psum_scatter``/``pcast(to='varying')`` over
    a mesh axis of size 1 (of the mesh in context) is no collective at all, so such names are left out."""
    from ftrans.core import sharding as _sh

    one = _sh.size_one_axes(_sh.current_abstract_mesh())
    return tuple(n for n in names if n not in one) if one else names


def _reduce(op: str, prim: Primitive, reduce_p: Primitive, x: Any, axis_name: Any, axis_index_groups: Any) -> Any:
    names = _as_names(op, axis_name)
    if op == "psum" and _config.remove_size_one_mesh_axis_from_type and names:
        names = _without_size_one(names)
        if not names:
            return x
    named = tuple(n for n in names if type(n) is not int)
    positional = tuple(n for n in names if type(n) is int)
    frames = _collective_frames(op, named)
    groups = _groups(op, axis_index_groups, named)
    size = len(groups[0]) if groups else math.prod(f.size for f in frames)

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
            checked = vma_checked_names(named) if groups is None else ()
            if not checked:
                return prim.bind(v, axis_name=named, axis_index_groups=groups)
            # In a shard_map body checked with check_vma, as JAX's: the operand is cast to vary along the
            # manual axes first, and psum over them is psum_invariant (its transpose is a pvary).
            unreduced = prim is psum_p and _all_unreduced(op, v, checked)
            v = collective_pvary(v, _not_unreduced(v, checked), op)
            rest = tuple(n for n in named if n not in checked)
            if prim is not psum_p:
                return prim.bind(v, axis_name=named, axis_index_groups=None)
            if rest:
                v = psum_p.bind(v, axis_name=rest, axis_index_groups=None)
            # (as JAX's: the partial sums of a value unreduced along the axes are summed by ``unreduced_psum``)
            v = (unreduced_psum_p if unreduced else psum_invariant_p).bind(v, axes=checked)
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
    names = _as_names("pmean", axis_name)
    named = tuple(n for n in names if type(n) is not int)
    frames = _collective_frames("pmean", named)
    positional = [n for n in names if type(n) is int]
    groups = _groups("pmean", axis_index_groups, named)
    named_size = len(groups[0]) if groups else math.prod(f.size for f in frames)

    def one(leaf: Any) -> Any:
        total = psum(leaf, names, axis_index_groups=groups)
        if positional:
            shape = aval_of(_operand(leaf)).shape
            n = named_size * math.prod(shape[_canon("pmean", "positional axis", a, len(shape), aval_of(leaf))]
                                       for a in positional)
        else:
            n = named_size
        return total / n if _is_python_scalar(total) else _true_divide(total, n)

    return _tree_map(one, x)


def _true_divide(total: Any, n: int) -> Any:
    """``total / n`` in floating point with NumPy's promotion (an integer sum becomes the default float)."""
    d, weak = dtypes.promote((dtype_weak(total), dtype_weak(n)))
    if not dtypes.is_inexact(d):
        d = dtypes.default_float()
    return E.div_p.bind(convert(total, d, weak), convert(n, d, weak))


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False,
               to: str = "varying") -> Any:
    """JAX's ``lax.all_gather``: every element's ``x`` (a pytree), stacked (or, ``tiled``, concatenated) along ``axis``.

    Several axis names gather over all of them, the last varying fastest.  ``to='invarying'`` (JAX's
    ``all_gather_invariant``) gives the same values, known to ``shard_map``'s ``check_vma`` to be the same on
    every device of the axes (an ``out_specs`` may leave them out); ``to='reduced'`` gives those values too,
    typed reduced over the axes (``typeof(y).mat.reduced``).
    """
    if to not in ("varying", "invarying", "reduced"):
        raise FtransValueError(f"all_gather: got unexpected `to` value {to!r}; allowed `to` values are "
                               "'varying', 'invarying' and 'reduced'")
    reduced = to == "reduced"
    if reduced:  # the same on every device of the axes, typed reduced there (a preduced cast of the invariant)
        to = "invarying"
    if to == "invarying" and axis_index_groups is not None:
        raise NotImplementedError(f"all_gather: to={'reduced' if reduced else 'invarying'!r} with "
                                  "axis_index_groups is not supported (as in JAX)")
    names = _as_names("all_gather", axis_name)
    _collective_frames("all_gather", names)
    groups = _groups("all_gather", axis_index_groups, names)
    inv = {"to": "invarying"} if to == "invarying" else {}
    if reduced and names and not vma_checked_names(names):
        from ftrans.transforms.shard_map import manual_axes_here

        if set(names) <= manual_axes_here():  # a body with check_vma=False: no value is typed varying there
            raise FtransValueError(
                f"all_gather_reduced only accepts inputs that are varying. all_gather(..., {axis_name!r}, "
                "to='reduced') needs a value typed varying along the axes, and a shard_map body traced with "
                "check_vma=False types none so (as in JAX); trace it with check_vma=True")
    def gather_axis(aval: Any) -> int:
        nd = len(aval.shape)
        if tiled and nd == 0:
            raise FtransValueError("all_gather: tiled=True needs an operand of rank at least 1, got a scalar "
                                   f"of type {aval.str_short()}")
        return _canon("all_gather", "axis", axis, nd if tiled else nd + 1, aval)

    if reduced and names and vma_checked_names(names) == names:
        # In a checked shard_map body, as JAX's: one ``all_gather_reduced`` (varying -> reduced) over the names.
        n = math.prod(f.size for f in _collective_frames("all_gather", names))

        def gather_reduced(leaf: Any) -> Any:
            v = _operand(leaf)
            ax = gather_axis(aval_of(v))
            return all_gather_reduced_p.bind(v, all_gather_dimension=ax, axis_name=names, axis_size=n,
                                             tiled=bool(tiled))

        return _tree_map(gather_reduced, x)

    def one(leaf: Any) -> Any:
        v = _vary(_operand(leaf), names, "all_gather")
        aval = aval_of(v)
        ax = gather_axis(aval)
        if groups is not None:  # one collective over the groups of the names' (row-major) indices
            return all_gather_p.bind(v, axis_name=names, axis=ax, tiled=bool(tiled), axis_index_groups=groups)
        # (axis_name a tuple of names, as JAX's all_gather records it)
        v = all_gather_p.bind(v, axis_name=(names[-1],), axis=ax, tiled=bool(tiled), **inv)
        for n in reversed(names[:-1]):  # blocks of the later names, concatenated over the earlier ones
            v = all_gather_p.bind(v, axis_name=(n,), axis=ax, tiled=True, **inv)
        checked = vma_checked_names(names) if reduced else ()
        return preduced_p.bind(v, axes=checked) if checked else v

    return _tree_map(one, x)


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
               tiled: bool = False) -> Any:
    """JAX's ``lax.all_to_all``: split ``x`` (a pytree) along ``split_axis`` over the axis's elements and
    concatenate what each receives along ``concat_axis``.

    Several axis names act as one axis over all of them, indexed row-major (the last name varying fastest).
    """
    names = _as_names("all_to_all", axis_name)
    if not names:
        raise FtransValueError("all_to_all: axis_name is an empty tuple; give at least one axis name")
    frames = _collective_frames("all_to_all", names)
    sizes = tuple(f.size for f in frames)
    groups = _groups("all_to_all", axis_index_groups, names)
    total = len(groups[0]) if groups else math.prod(sizes)

    def one(leaf: Any) -> Any:
        v = _vary(_operand(leaf), names, "all_to_all")
        aval = aval_of(v)
        nd = len(aval.shape)
        if nd == 0:
            raise FtransValueError(f"all_to_all: the operand must have rank at least 1, got {aval.str_short()}")
        s = _canon("all_to_all", "split_axis", split_axis, nd, aval)
        c = _canon("all_to_all", "concat_axis", concat_axis, nd, aval)
        if len(names) == 1 or groups is not None:
            return all_to_all_p.bind(v, axis_name=_one_name(names), split_axis=s, concat_axis=c, tiled=bool(tiled),
                                     **_g(groups))
        k = aval.shape[s]
        if tiled:
            if k % total:
                raise FtransValueError(
                    f"all_to_all: with tiled=True the split axis ({s}) of the operand {aval.str_short()} must be "
                    f"divisible by the size {total} of the axes {names!r}")
            # Split the axis into (receiver, chunk); exchange the receiver axis untiled; the senders' blocks
            # then go in front of the concat axis and merge with it.
            shape = list(aval.shape)
            shape[s:s + 1] = [total, k // total]
            v = _multi_all_to_all(_reshape(v, shape), names, sizes, s, c)
            shape = list(aval_of(v).shape)
            shape[c:c + 2] = [shape[c] * shape[c + 1]]
            return _reshape(v, shape)
        if k != total:
            raise FtransValueError(
                f"all_to_all: the split axis ({s}) of the operand {aval.str_short()} has size {k}, but it must "
                f"equal the size {total} of the axes {names!r} (or pass tiled=True to split it into {total} "
                "chunks)")
        return _multi_all_to_all(v, names, sizes, s, c)

    return _tree_map(one, x)


def _reshape(v: Any, shape: Sequence[int]) -> Any:
    return S.reshape_p.bind(v, new_sizes=tuple(shape), dimensions=None)


def _move_last(v: Any, to: int) -> Any:
    nd = len(aval_of(v).shape)
    perm = list(range(nd - 1))
    perm.insert(to, nd - 1)
    return v if perm == list(range(nd)) else S.transpose_p.bind(v, permutation=tuple(perm))


def _multi_all_to_all(v: Any, names: tuple, sizes: tuple, s: int, c: int) -> Any:
    """Untiled ``all_to_all`` over several names: the split axis (of size ``prod(sizes)``) is split into one
    axis per name, each exchanged over its name in turn (each received sender axis goes last), and the
    senders' axes, in the names' order, merge row-major into the new axis at ``c``."""
    shape = list(aval_of(v).shape)
    shape[s:s + 1] = list(sizes)
    v = _reshape(v, shape)
    last = len(shape) - 1
    for n in names:  # the next name's axis is always at ``s`` once the earlier ones have gone
        v = all_to_all_p.bind(v, axis_name=n, split_axis=s, concat_axis=last, tiled=False)
    shape = list(aval_of(v).shape)
    m = len(names)
    v = _reshape(v, shape[:-m] + [math.prod(shape[-m:])])
    return _move_last(v, c)


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """JAX's ``lax.ppermute``: element ``src``'s ``x`` (a pytree) goes to element ``dst`` for each ``(src, dst)``
    in ``perm``; elements that receive nothing get zeros.

    Several axis names act as one axis over all of them, indexed row-major (the last name varying fastest).
    """
    names = _as_names("ppermute", axis_name)
    if not names:
        raise FtransValueError("ppermute: axis_name is an empty tuple; give at least one axis name")
    # Several names act as one axis over all of them, indexed row-major (the last name varying fastest).
    name = names[0] if len(names) == 1 else names
    n = math.prod(f.size for f in _collective_frames("ppermute", names))
    try:
        perm = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise FtransTypeError(f"ppermute: perm must be a sequence of (source, destination) int pairs, "
                              f"got {perm!r}") from None
    check_perm("ppermute", perm, n, name)
    return _tree_map(lambda leaf: ppermute_p.bind(_vary(_operand(leaf), names, "ppermute"), axis_name=name, perm=perm), x)


class CollectiveFuture:
    """A started collective (jax 0.12's ``AbstractFuture`` value, from ``lax.psum_scatter_start``): ``done()``
    gives its result.  ftrans computes the collective when it starts (XLA schedules the communication
    itself), so ``done()`` only hands the result over; like JAX's, a future is not an array: it cannot be
    returned from a traced function or passed to an operation."""

    __slots__ = ("_value",)

    def __init__(self, value: Any):
        self._value = value

    def done(self) -> Any:
        """The collective's result."""
        return self._value

    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: len(self._value.shape))
    size = property(lambda self: self._value.size)

    def __repr__(self) -> str:
        return f"CollectiveFuture({self._value.dtype}{list(self._value.shape)})"


def psum_scatter_start(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                       tiled: bool = False) -> Any:
    """JAX's ``lax.psum_scatter_start`` (jax 0.12): ``psum_scatter`` started asynchronously.

    Args:
        x: an array or pytree of arrays, inside a mapped context (``shard_map``, ``pmap``, ``vmap`` with
            an axis name).
        axis_name: the axis name(s) to sum over and scatter along.
        scatter_dimension: the dimension of ``x`` split among the axis' members.
        axis_index_groups: as for ``psum_scatter``.
        tiled: must be True (as in JAX, only the tiled form starts asynchronously).

    Returns:
        A pytree like ``x`` of futures; each one's ``done()`` is ``psum_scatter(leaf, ..., tiled=True)``.

    Examples:
        >>> import numpy as np, ftrans
        >>> from ftrans import lax
        >>> from ftrans.sharding import AxisType, PartitionSpec as P
        >>> mesh = ftrans.make_mesh((1,), ("i",), axis_types=(AxisType.Auto,))
        >>> def body(a):
        ...     fut = lax.psum_scatter_start(a, "i", tiled=True)
        ...     return fut.done() * 2
        >>> ftrans.jit(ftrans.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))(np.ones(2))
        Array([2., 2.], dtype=float32)
    """
    if not tiled:
        raise FtransNotImplementedError("psum_scatter_start: only tiled=True starts asynchronously (as in JAX); "
                                        "use psum_scatter for the untiled form")
    out = psum_scatter(x, axis_name, scatter_dimension=scatter_dimension, axis_index_groups=axis_index_groups,
                       tiled=True)
    return tree_util.tree_map(CollectiveFuture, out)


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                 tiled: bool = False) -> Any:
    """JAX's ``lax.psum_scatter``: the sum over the axis of ``x`` (a pytree), of which element ``k`` keeps
    block ``k`` along ``scatter_dimension``.

    Several axis names act as one axis over all of them, indexed row-major (the last name varying fastest).
    """
    names = _as_names("psum_scatter", axis_name)
    if not names:
        raise FtransValueError("psum_scatter: axis_name is an empty tuple; give at least one axis name")
    if _config.remove_size_one_mesh_axis_from_type:
        names = _without_size_one(names)
        if not names:
            return x
    frames = _collective_frames("psum_scatter", names)
    sizes = tuple(f.size for f in frames)
    groups = _groups("psum_scatter", axis_index_groups, names)
    total = len(groups[0]) if groups else math.prod(sizes)

    def one(leaf: Any) -> Any:
        v = _operand(leaf)
        checked = vma_checked_names(names) if groups is None else ()
        if checked == names and _all_unreduced("psum_scatter", v, checked):
            # the partial sums of a value unreduced along the axes, as JAX's ``unreduced_psum_scatter``
            aval = aval_of(v)
            sd = _canon("psum_scatter", "scatter_dimension", scatter_dimension, len(aval.shape), aval)
            return unreduced_reduce_scatter_p.bind(v, axis_name=names, scatter_dimension=sd, axis_size=total,
                                                   tiled=bool(tiled))
        v = _vary(v, names, "psum_scatter")
        aval = aval_of(v)
        if aval.dtype == dtypes.bool_:
            v = S.convert_element_type_p.bind(v, new_dtype=dtypes.int32, weak_type=False)
        sd = _canon("psum_scatter", "scatter_dimension", scatter_dimension, len(aval.shape), aval)
        if len(names) == 1 or groups is not None:
            return psum_scatter_p.bind(v, axis_name=_one_name(names), scatter_dimension=sd, tiled=bool(tiled),
                                       **_g(groups))
        k = aval.shape[sd]
        if tiled and k % total:
            raise FtransValueError(
                f"psum_scatter: with tiled=True the scatter dimension ({sd}) of the operand {aval.str_short()} "
                f"must be divisible by the size {total} of the axes {names!r}")
        if not tiled and k != total:
            raise FtransValueError(
                f"psum_scatter: the scatter dimension ({sd}) of the operand {aval.str_short()} has size {k}, but "
                f"it must equal the size {total} of the axes {names!r}")
        # One axis per name (then, tiled, the chunk): each name sums and keeps its own block in turn.
        shape = list(aval.shape)
        shape[sd:sd + 1] = list(sizes) + ([k // total] if tiled else [])
        v = _reshape(v, shape)
        for n in names:
            v = psum_scatter_p.bind(v, axis_name=n, scatter_dimension=sd, tiled=False)
        return v

    return _tree_map(one, x)


def axis_index(axis_name: Any) -> Any:
    """JAX's ``lax.axis_index``: this element's int32 index along the named axis (several names: row-major)."""
    names = _as_names("axis_index", axis_name)
    if not names:
        raise FtransValueError("axis_index: axis_name is an empty tuple; give at least one axis name")
    frames = frames_of("axis_index", names)
    out: Any = None
    for n, f in zip(names, frames):
        i = axis_index_p.bind(axis_name=n)
        out = i if out is None else E.add_p.bind(_scale(out, f.size), i)
    return out


def _scale(x: Any, n: int) -> Any:
    """``x * n`` in ``x``'s own dtype (wrapping around for a narrow integer type, as the sum would)."""
    return E.mul_p.bind(x, Array._new(np.asarray(n).astype(aval_of(x).dtype), True))


def pswapaxes(x: Any, axis_name: Any, axis: int, *, axis_index_groups: Any = None) -> Any:
    """JAX's ``lax.pswapaxes``: swap the named axis ``axis_name`` with the positional axis ``axis`` of ``x``
    (a pytree), whose size must equal the named axis's size; the same as
    ``all_to_all(x, axis_name, axis, axis)``."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def pshuffle(x: Any, axis_name: Any, perm: Sequence[int]) -> Any:
    """JAX's ``lax.pshuffle``: element ``i`` of the named axis gets ``x`` (a pytree) of element ``perm[i]``.

    ``perm`` lists every index of the axis exactly once; it is ``ppermute`` with the pairs
    ``(perm[i], i)``.
    """
    try:
        perm = [operator.index(p) for p in perm]
    except TypeError:
        raise FtransTypeError(f"pshuffle: perm must be a sequence of ints (the source of each axis index), "
                              f"got {perm!r}") from None
    if set(perm) != set(range(len(perm))):
        raise FtransValueError(f"`perm` does not represent a permutation: {perm}")
    name = _single_name("pshuffle", axis_name)
    n = axis_size("pshuffle", name)
    if len(perm) != n:
        raise FtransValueError(f"pshuffle: perm {perm} has {len(perm)} entries but the axis {name!r} has size {n}; "
                               "give the source index of every element of the axis")
    return ppermute(x, name, [(src, dst) for dst, src in enumerate(perm)])


def pbroadcast(x: Any, axis_name: Any, source: Any) -> Any:
    """JAX's ``lax.pbroadcast``: every element of the named axis gets ``x`` (a pytree) of element ``source``.

    Computed as JAX documents it: ``psum(where(axis_index(axis_name) == source, x, 0), axis_name)`` (JAX 0.10.2
    itself binds a ``pbroadcast`` primitive that fails under ``vmap`` and has no CPU lowering; see
    ``docs/differences.md``).  Several axis names act as one axis indexed row-major.  ``source`` is a Python
    int, or (jax 0.12) an int32 scalar array, traced or not: the index chosen when the program runs (an
    index outside the axis gives zeros).
    """
    names = _as_names("pbroadcast", axis_name)
    if not names:
        raise FtransValueError("pbroadcast: axis_name is an empty tuple; give at least one axis name")
    total = math.prod(f.size for f in _collective_frames("pbroadcast", names))
    if isinstance(source, bool) or not isinstance(source, (int, np.integer)):
        if not hasattr(source, "dtype") or not hasattr(source, "shape"):
            raise FtransTypeError(f"pbroadcast: source must be a Python int (an index into the axis) or an int32 "
                                  f"scalar array, got {source!r}")
        if np.dtype(source.dtype) != np.dtype(np.int32):
            raise FtransTypeError(f"pbroadcast dynamic source must be an i32 array, got {source.dtype}")
        if tuple(source.shape) != ():
            raise FtransValueError(f"pbroadcast dynamic source must be a scalar, got shape {tuple(source.shape)}")
        source = _operand(source)
    else:
        source = int(source)
        if not 0 <= source < total:
            raise FtransValueError(f"pbroadcast: source {source} is out of range for the axis {axis_name!r} of "
                                   f"size {total}; give an index in [0, {total})")
        source = np.int32(source)

    def one(leaf: Any) -> Any:
        v = _operand(leaf)
        aval = aval_of(v)
        is_bool = aval.dtype == dtypes.bool_
        if is_bool:
            v = S.convert_element_type_p.bind(v, new_dtype=dtypes.int32, weak_type=False)
            aval = aval_of(v)
        here = E.eq_p.bind(axis_index(names), source)
        here = S.broadcast_in_dim_p.bind(here, shape=aval.shape, broadcast_dimensions=()) \
            if aval.shape else here
        zero = S.broadcast_in_dim_p.bind(convert(0, aval.dtype, aval.weak_type), shape=aval.shape,
                                         broadcast_dimensions=()) if aval.shape \
            else convert(0, aval.dtype, aval.weak_type)
        out = psum_p.bind(S.select_n_p.bind(here, zero, v), axis_name=names, axis_index_groups=None)
        if is_bool:
            out = E.ne_p.bind(out, convert(0, dtypes.int32))
        return out

    return _tree_map(one, x)


_PCAST_TO = ("varying", "reduced", "unreduced")


def pcast(x: Any, axis_name: Any, *, to: str) -> Any:
    """JAX's ``lax.pcast``: change how ``x`` (a pytree) varies over the named axes in ``shard_map``'s
    varying-manual-axes types.

    ``to='varying'`` (JAX's ``pvary``) leaves the values as they are and types them as varying along the
    names too (``typeof(y).mat.varying``), so a ``cond`` branch or a loop carry can match a value that varies
    there; ``'reduced'``/``'unreduced'`` keep the values (the same on every device of the axes / each device's
    partial sum), typed reduced / unreduced there (``typeof(y).mat``).  An empty ``axis_name`` returns ``x`` as
    JAX does.  (JAX raises outside ``shard_map``; ftrans also accepts names bound by ``vmap``/``pmap``: see
    ``docs/differences.md``.)
    """
    if isinstance(axis_name, (set, frozenset)):
        raise FtransTypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise FtransValueError(f"Got unexpected `to` value {to!r}. Allowed `to` values are: {set(_PCAST_TO)}")
    from ftrans.core import trace as _trace

    if to == "varying" and _config.remove_size_one_mesh_axis_from_type:  # JAX's switch: no pvary over an axis
        names = _without_size_one(names)  # of size 1 of the mesh in context (nothing can vary along it)
        if not names:
            return x
    if to == "varying" and _trace.is_eager() and any(
            axis_env.lookup(n) is None for n in names):  # run eagerly outside any body: JAX's pvary impl
        raise FtransValueError(f"pvary should be called under jax.shard_map. lax.pcast(x, {axis_name!r}, "
                               "to='varying') was called outside a shard_map body (ftrans.shard_map), where no "
                               f"mesh axis named {names} is manual")
    frames_of("pcast", names)
    checked = vma_checked_names(names)
    if to != "varying":
        from ftrans.transforms.shard_map import manual_axes_here

        if not set(names) <= manual_axes_here():
            raise NotImplementedError(f"pcast: to={to!r} is modelled only over the manual mesh axes of a "
                                      f"shard_map body; {names} are not all manual here")
        # The values stay as they are: a reduced value is the same on every device of the axes, an unreduced
        # one holds each device's partial sum; in a checked body their types say so (``typeof(x).mat``).
        def cast(leaf: Any) -> Any:
            v = _operand(leaf)
            if checked:
                from ftrans.transforms.shard_map import vma_of

                vary = {n for n in checked if n in vma_of(v)}
                if to == "unreduced" and not vary:
                    raise FtransValueError(
                        "vary_unreduced_cast is a Varying->Unreduced collective. This means that the axis names "
                        f"mentioned in `axes` passed to `vary_unreduced_cast` must be present in "
                        f"`jax.typeof(x).mat.varying`. Got axes={names} and jax.typeof(x).mat.varying="
                        f"{set(vma_of(v)) or '{}'}")
                if to == "reduced" and vary:
                    raise FtransValueError(
                        "jax.lax.pcast can only accept axis_name which corresponds to one of varying, unreduced, "
                        f"reduced or invarying state of the input. Got input type: {aval_of(v).str_short()} "
                        f"(varying along {sorted(vma_of(v), key=str)}), axes: {names}; to='reduced' takes a "
                        "value the same on every device of the axes")
                # a type only (JAX's preduced / vary_unreduced_cast): the body's staging gives the new sets
                return (preduced_p if to == "reduced" else vary_unreduced_cast_p).bind(v, axes=tuple(checked))
            return v

        return _tree_map(cast, x)

    def one(leaf: Any) -> Any:
        v = _operand(leaf)
        if checked:  # as JAX's: every name must be one the value does not vary along yet
            from ftrans.transforms.shard_map import vma_of

            state = {"varying" if n in vma_of(v) else "invarying" for n in checked}
            if len(state) > 1:
                raise FtransValueError(
                    "jax.lax.pcast can only accept axis_name which corresponds to one of varying, unreduced, "
                    f"reduced or invarying state of the input. Got input type: {aval_of(v).str_short()} (varying "
                    f"along {sorted(vma_of(v), key=str)}), axes: {names} and input state: {state}")
            if state == {"varying"}:
                raise FtransValueError(f"Unsupported pcast from=varying, to={to!r}: the value already varies "
                                       f"along {names} (typeof(x).mat.varying)")
        return pvary_tracer(v, names)

    return _tree_map(one, x)


def ragged_all_to_all(operand: Any, output: Any, input_offsets: Any, send_sizes: Any, output_offsets: Any,
                      recv_sizes: Any, *, axis_name: Any, axis_index_groups: Any = None) -> Any:
    """JAX's ``lax.ragged_all_to_all``: the ragged form of ``all_to_all`` over the leading axis.

    With ``K`` entries in each of the four index arrays and ``n`` members of the axis, entry ``i`` belongs to
    peer ``i // (K // n)``: the rows ``operand[input_offsets[i] : input_offsets[i] + send_sizes[i]]`` go to
    that peer, which writes them into its copy of ``output`` starting at row ``output_offsets[i]``
    (``output_offsets`` is where the *receiver* writes). ``recv_sizes[i]`` is how many rows this member
    receives in its ``i``-th slice (``recv_sizes`` must be ``all_to_all(send_sizes, axis_name, 0, 0,
    tiled=True)``). Rows of ``output`` that nobody writes keep their values.

    XLA on GPU and TPU runs the op itself; XLA on CPU has none, so there ftrans lowers it to a dense
    ``all_to_all`` of each slice padded to the operand's length (see ``docs/parallelism.md``).
    """
    if axis_index_groups is not None:
        raise NotImplementedError("ragged_all_to_all: axis_index_groups is not supported (only None, over the "
                                  "whole axis)")
    names = _as_names("ragged_all_to_all", axis_name)
    if not names:
        raise FtransValueError("ragged_all_to_all: axis_name is an empty tuple; give at least one axis name")
    _collective_frames("ragged_all_to_all", names)
    args = [_operand(a) for a in (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes)]
    return ragged_all_to_all_p.bind(*args, axis_name=names, axis_index_groups=None)


def _p2p_unsupported(op: str) -> NotImplementedError:
    from ftrans.lowering import compat

    return NotImplementedError(
        f"{op} is implemented only on GPU in JAX (XLA's send/recv between devices), and ftrans does not implement "
        f"it on any backend; the backend here is {compat.backend(None).platform!r}. Use lax.ppermute, which XLA runs on "
        "every backend")


def psend(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """JAX's ``lax.psend`` (a send to the ``perm`` destinations, returning a token): raises NotImplementedError
    (see the message for the backend)."""
    names = _as_names("psend", axis_name)
    _collective_frames("psend", names)
    raise _p2p_unsupported("psend")


def precv(token: Any, out_shape: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """JAX's ``lax.precv`` (the receive matching ``psend``): raises NotImplementedError (see the message for the
    backend)."""
    names = _as_names("precv", axis_name)
    _collective_frames("precv", names)
    raise _p2p_unsupported("precv")
