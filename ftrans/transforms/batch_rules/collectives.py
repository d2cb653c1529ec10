"""Batching of the collectives: over the batch trace's own axis a collective is computed here with ordinary
primitives on the batch dimension (``psum`` is a ``reduce_sum`` over it, ``axis_index`` an ``iota``,
``all_gather`` a transpose that turns the batch dimension into a data dimension, ...); over another axis it
is bound again with the batch dimension carried along.

``BatchTrace.process_collective`` applies these rules directly when the
collective's axis is the trace's own, even if no operand is batched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.axis_env import axis_env
from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims.collectives import (
    all_gather_p,
    all_gather_reduced_p,
    all_to_all_p,
    axis_index_p,
    pmax_p,
    pmin_p,
    ppermute_p,
    preduced_p,
    psum_invariant_p,
    psum_p,
    psum_scatter_p,
    pvary_p,
    ragged_all_to_all_p,
    reduced_vary_cast_p,
    unreduced_psum_p,
    unreduced_reduce_scatter_p,
    vary_unreduced_cast_p,
)
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import bdim_at_front, moveaxis, not_mapped, register_batching

__all__ = ["scale"]


def _owns(frame: Any, name: Any) -> bool:
    """Whether ``name`` refers (innermost binding) to the axis of the batch trace whose frame is ``frame``."""
    f = axis_env.lookup(name)
    return f is not None and frame.main is not None and f.main is frame.main


def scale(x: Any, n: int) -> Any:
    """``x * n`` in ``x``'s own dtype (wrapping around for a narrow integer type, as the sum would)."""
    return E.mul_p.bind(x, Array._new(np.asarray(n).astype(aval_of(x).dtype), True))


def _split_own(frame: Any, names: tuple) -> tuple[bool, tuple]:
    own = [n for n in names if _owns(frame, n)]
    return bool(own), tuple(n for n in names if n not in own)


def _groups_unsupported(op: str, axis_name: Any) -> NotImplementedError:
    return NotImplementedError(f"{op} with axis_index_groups over {axis_name!r}, an axis vmap binds, is not "
                               "supported (axis_index_groups works over pmap and shard_map axes)")


def _grouped_owned(op: str, frame: Any, axis_name: Any, axis_index_groups: Any) -> bool:
    """Whether this vmap owns one of the names; raises when it does and ``axis_index_groups`` is given, or when
    it owns one of several names bound at once."""
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    own = any(_owns(frame, n) for n in names)
    if own and (axis_index_groups is not None or len(names) > 1):
        raise _groups_unsupported(op, axis_name) if axis_index_groups is not None else NotImplementedError(
            f"{op} over several axis names {axis_name!r} at once, one of them a vmap axis, is not supported")
    return own


def _g(axis_index_groups: Any) -> dict:
    return {} if axis_index_groups is None else {"axis_index_groups": axis_index_groups}


def _reduction_batch(prim: Primitive, reduce_p: Primitive, unmapped: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, axis_name: tuple, axis_index_groups: Any) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        own, rest = _split_own(frame, axis_name)
        if own and axis_index_groups is not None:
            raise _groups_unsupported(prim.name, axis_name)
        if own:
            x = unmapped(x, frame.size) if d is not_mapped else reduce_p.bind(x, axes=(d,))
            d = not_mapped
        if rest:
            x = prim.bind(x, axis_name=rest, axis_index_groups=axis_index_groups)
        return x, d

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


_reduction_batch(psum_p, R.reduce_sum_p, scale)
_reduction_batch(pmax_p, R.reduce_max_p, lambda x, n: x)
_reduction_batch(pmin_p, R.reduce_min_p, lambda x, n: x)


@register_batching(psum_invariant_p)
def _psum_invariant_batch(vals: list, dims: list, *, frame: Any, axes: tuple) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    own, rest = _split_own(frame, axes)
    if own:
        x, d = (scale(x, frame.size) if d is not_mapped else R.reduce_sum_p.bind(x, axes=(d,))), not_mapped
    if rest:
        x = psum_invariant_p.bind(x, axes=rest)
    return x, d


@register_batching(pvary_p)
def _pvary_batch(vals: list, dims: list, *, frame: Any, axes: tuple) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    _, rest = _split_own(frame, axes)  # over this vmap's own axis every example already has its own value
    return (pvary_p.bind(x, axes=rest) if rest else x), d


def _type_cast_batch(prim: Primitive) -> None:
    def rule(vals: list, dims: list, *, frame: Any, axes: tuple) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        _, rest = _split_own(frame, axes)  # a type over this vmap's own axis means nothing: the others stay
        return (prim.bind(x, axes=rest) if rest else x), d

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


_type_cast_batch(preduced_p)
_type_cast_batch(vary_unreduced_cast_p)
_type_cast_batch(reduced_vary_cast_p)


def _no_vmap_axis(frame: Any, prim: Primitive, names: tuple) -> None:
    """The collectives between reduced/unreduced types name manual mesh axes only: not this vmap's own axis,
    whose examples are neither reduced nor unreduced (JAX has no rule for it either)."""
    if _split_own(frame, names)[0]:
        raise NotImplementedError(f"{prim.name} over {names!r}, an axis bound by vmap, is not supported: its axes "
                                  "must be manual mesh axes of a shard_map body (as in JAX)")


@register_batching(unreduced_psum_p)
def _unreduced_psum_batch(vals: list, dims: list, *, frame: Any, axes: tuple) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    _no_vmap_axis(frame, unreduced_psum_p, axes)
    return unreduced_psum_p.bind(x, axes=axes), d


@register_batching(all_gather_reduced_p)
def _all_gather_reduced_batch(vals: list, dims: list, *, frame: Any, all_gather_dimension: int, axis_name: tuple,
                              axis_size: int, tiled: bool) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    _no_vmap_axis(frame, all_gather_reduced_p, axis_name)
    return all_gather_reduced_p.bind(moveaxis(x, d, 0), all_gather_dimension=all_gather_dimension + 1,
                                     axis_name=axis_name, axis_size=axis_size, tiled=tiled), 0


@register_batching(unreduced_reduce_scatter_p)
def _unreduced_reduce_scatter_batch(vals: list, dims: list, *, frame: Any, axis_name: tuple, scatter_dimension: int,
                                    axis_size: int, tiled: bool) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    _no_vmap_axis(frame, unreduced_reduce_scatter_p, axis_name)
    return unreduced_reduce_scatter_p.bind(moveaxis(x, d, 0), axis_name=axis_name,
                                           scatter_dimension=scatter_dimension + 1, axis_size=axis_size,
                                           tiled=tiled), 0


def _reshape(x: Any, shape: Sequence[int]) -> Any:
    return S.reshape_p.bind(x, new_sizes=tuple(shape), dimensions=None)


@register_batching(all_gather_p)
def _all_gather_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, axis: int,
                      tiled: bool, axis_index_groups: Any = None, to: str = "varying") -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _grouped_owned("all_gather", frame, axis_name, axis_index_groups):
        return all_gather_p.bind(moveaxis(x, d, 0), axis_name=axis_name, axis=axis + 1, tiled=tiled,
                                 **_g(axis_index_groups), **({} if to == "varying" else {"to": to})), 0
    n = frame.size
    out = moveaxis(bdim_at_front(x, d, n), 0, axis)  # the batch dimension becomes the gathered one
    if tiled:
        shape = list(aval_of(out).shape)
        shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
        out = _reshape(out, shape)
    return out, not_mapped


@register_batching(all_to_all_p)
def _all_to_all_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, split_axis: int, concat_axis: int,
                      tiled: bool, axis_index_groups: Any = None) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _grouped_owned("all_to_all", frame, axis_name, axis_index_groups):
        return all_to_all_p.bind(moveaxis(x, d, 0), axis_name=axis_name, split_axis=split_axis + 1,
                                 concat_axis=concat_axis + 1, tiled=tiled, **_g(axis_index_groups)), 0
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
    if isinstance(axis_name, tuple):  # several names at once: only over axes this vmap does not bind
        if any(_owns(frame, n) for n in axis_name):
            raise NotImplementedError(f"ppermute over several axis names {axis_name!r} at once, one of them a "
                                      "vmap axis, is not supported; permute over each axis separately")
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    if not _owns(frame, axis_name):
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    n = frame.size
    src = [n] * n  # index n is out of range: filled with zeros
    for s, t in perm:
        src[t] = s
    x = bdim_at_front(x, d, n)
    if src == list(range(n)):
        return x, 0
    return _take_rows(x, src), 0


@register_batching(psum_scatter_p)
def _psum_scatter_batch(vals: list, dims: list, *, frame: Any, axis_name: Any, scatter_dimension: int,
                        tiled: bool, axis_index_groups: Any = None) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    if not _grouped_owned("psum_scatter", frame, axis_name, axis_index_groups):
        return psum_scatter_p.bind(moveaxis(x, d, 0), axis_name=axis_name,
                                   scatter_dimension=scatter_dimension + 1, tiled=tiled, **_g(axis_index_groups)), 0
    n = frame.size
    total = scale(x, n) if d is not_mapped else R.reduce_sum_p.bind(x, axes=(d,))
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


def _take_rows(x: Any, src: Sequence[int]) -> Any:
    """Rows ``src`` of ``x`` (one gather), zeros for an out-of-range index."""
    a = aval_of(x)
    nd = len(a.shape)
    dn = I.GatherDimensionNumbers(offset_dims=tuple(range(1, nd)), collapsed_slice_dims=(0,), start_index_map=(0,))
    mode = I.GatherScatterMode.FILL_OR_DROP
    return I.gather_p.bind(x, np.asarray(src, np.int32).reshape(len(src), 1), dimension_numbers=dn,
                           slice_sizes=(1,) + tuple(a.shape[1:]), mode=mode,
                           fill_value=I.gather_fill_param(a.dtype, mode, 0), indices_are_sorted=False,
                           unique_indices=False)


@register_batching(ragged_all_to_all_p)
def _ragged_all_to_all_batch(vals: list, dims: list, *, frame: Any, axis_name: Any,
                             axis_index_groups: Any) -> tuple[Any, Any]:
    """Over another axis: the batch is folded into the ragged axis (example ``b``'s rows after example
    ``b - 1``'s, its offsets shifted to match, its slices interleaved so each still goes to the same peer).
    Over this vmap's own axis JAX has no rule either."""
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    own, _ = _split_own(frame, names)
    if own:
        raise NotImplementedError(
            "ragged_all_to_all over an axis bound by vmap itself is not supported (as in JAX); bind the axis "
            "with shard_map or pmap")
    b = frame.size
    operand, output = (bdim_at_front(v, d, b) for v, d in zip(vals[:2], dims[:2]))
    n_rows, m_rows = aval_of(operand).shape[1], aval_of(output).shape[1]

    def per_slot(v: Any, d: Any, shift: int) -> Any:
        v = moveaxis(bdim_at_front(v, d, b), 0, 1)  # (K, B)
        if shift:
            aval = aval_of(v)
            step = E.mul_p.bind(S.iota_p.bind(dtype=aval.dtype, shape=aval.shape, dimension=1),
                                Array._new(np.asarray(shift, aval.dtype), False))
            v = E.add_p.bind(v, step)
        return _reshape(v, (aval_of(v).shape[0] * b,))

    io, ss, oo, rs = (per_slot(v, d, s) for v, d, s in zip(vals[2:], dims[2:], (n_rows, 0, m_rows, 0)))

    def merge(x: Any) -> Any:
        shape = aval_of(x).shape
        return _reshape(x, (shape[0] * shape[1], *shape[2:]))

    out = ragged_all_to_all_p.bind(merge(operand), merge(output), io, ss, oo, rs, axis_name=axis_name,
                                   axis_index_groups=axis_index_groups)
    return _reshape(out, (b, m_rows, *aval_of(out).shape[1:])), 0
