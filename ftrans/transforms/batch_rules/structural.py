"""Batching rules of the structural primitives.

Most keep the batch dimension where it is and shift the primitive's own
dimension parameters around it.  ``dynamic_slice`` and
``dynamic_update_slice`` with batched start indices become a ``gather`` or
``scatter`` with batching dimensions (each batch element reads or writes at its
own position).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import indexing as I
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import bdim_at_front, moveaxis, not_mapped, register_batching


def _pos(k: int, d: int) -> int:
    """Where unbatched dimension ``k`` sits once a batch dimension is at ``d``."""
    return k if k < d else k + 1


@register_batching(S.broadcast_in_dim_p)
def _broadcast_in_dim_batch(vals: list, dims: list, *, frame: Any, shape: tuple, broadcast_dimensions: tuple):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    return S.broadcast_in_dim_p.bind(x, shape=(frame.size,) + tuple(shape),
                                     broadcast_dimensions=(0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


@register_batching(S.reshape_p)
def _reshape_batch(vals: list, dims: list, *, frame: Any, new_sizes: tuple, dimensions: Any):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    if dimensions is not None:
        x = S.transpose_p.bind(x, permutation=(0,) + tuple(k + 1 for k in dimensions))
    return S.reshape_p.bind(x, new_sizes=(frame.size,) + tuple(new_sizes), dimensions=None), 0


@register_batching(S.transpose_p)
def _transpose_batch(vals: list, dims: list, *, frame: Any, permutation: tuple):
    (x,), (d,) = vals, dims
    return S.transpose_p.bind(x, permutation=(d,) + tuple(_pos(p, d) for p in permutation)), 0


@register_batching(S.squeeze_p)
def _squeeze_batch(vals: list, dims: list, *, frame: Any, dimensions: tuple):
    (x,), (d,) = vals, dims
    nd = len(aval_of(x).shape) - 1
    norm = [k % nd for k in dimensions]
    out_d = d - sum(1 for k in norm if _pos(k, d) < d)
    return S.squeeze_p.bind(x, dimensions=tuple(_pos(k, d) for k in norm)), out_d


@register_batching(S.expand_dims_p)
def _expand_dims_batch(vals: list, dims: list, *, frame: Any, dimensions: tuple):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    out_nd = len(aval_of(x).shape) - 1 + len(dimensions)
    return S.expand_dims_p.bind(x, dimensions=tuple((k % out_nd) + 1 for k in dimensions)), 0


@register_batching(S.rev_p)
def _rev_batch(vals: list, dims: list, *, frame: Any, dimensions: tuple):
    (x,), (d,) = vals, dims
    return S.rev_p.bind(x, dimensions=tuple(_pos(k, d) for k in dimensions)), d


@register_batching(S.slice_p)
def _slice_batch(vals: list, dims: list, *, frame: Any, start_indices: tuple, limit_indices: tuple, strides: Any):
    (x,), (d,) = vals, dims
    starts = list(start_indices)
    limits = list(limit_indices)
    starts.insert(d, 0)
    limits.insert(d, frame.size)
    st = None
    if strides is not None:
        st = list(strides)
        st.insert(d, 1)
        st = tuple(st)
    return S.slice_p.bind(x, start_indices=tuple(starts), limit_indices=tuple(limits), strides=st), d


@register_batching(S.pad_p)
def _pad_batch(vals: list, dims: list, *, frame: Any, padding_config: tuple):
    x, padv = vals
    dx, dp = dims
    x = bdim_at_front(x, dx, frame.size)
    config = ((0, 0, 0),) + tuple(padding_config)
    if dp is not_mapped:
        return S.pad_p.bind(x, padv, padding_config=config), 0
    # A batched padding value: pad with zeros, then select each element's value where padding was added.
    zero = np.zeros((), aval_of(x).dtype)
    padded = S.pad_p.bind(x, zero, padding_config=config)
    inner = tuple(aval_of(x).shape[1:])
    false = S.broadcast_in_dim_p.bind(np.asarray(False), shape=inner, broadcast_dimensions=())
    mask = S.pad_p.bind(false, np.asarray(True), padding_config=tuple(padding_config))
    out_shape = tuple(aval_of(padded).shape)
    mask = S.broadcast_in_dim_p.bind(mask, shape=out_shape, broadcast_dimensions=tuple(range(1, len(out_shape))))
    fill = S.broadcast_in_dim_p.bind(moveaxis(padv, dp, 0), shape=out_shape, broadcast_dimensions=(0,))
    return S.select_n_p.bind(mask, padded, fill), 0


@register_batching(S.split_p)
def _split_batch(vals: list, dims: list, *, frame: Any, sizes: tuple, axis: int) -> tuple[list, list]:
    (x,), (d,) = vals, dims
    outs = S.split_p.bind(x, sizes=sizes, axis=axis if axis < d else axis + 1)
    return list(outs), [d] * len(sizes)


@register_batching(S.concatenate_p)
def _concatenate_batch(vals: list, dims: list, *, frame: Any, dimension: int):
    ops = [bdim_at_front(v, d, frame.size) for v, d in zip(vals, dims)]
    return S.concatenate_p.bind(*ops, dimension=dimension + 1), 0


def _index_vector(starts: list, dims: list, size: int) -> Any:
    """The start indices as one ``[batch, n]`` int array (each scalar broadcast or batched)."""
    dt = dtypes.canonicalize(np.dtype(np.int64)) if any(aval_of(s).dtype.itemsize > 4 for s in starts) \
        else np.dtype(np.int32)
    cols = []
    for s, d in zip(starts, dims):
        if aval_of(s).dtype != dt:
            s = S.convert_element_type_p.bind(s, new_dtype=dt, weak_type=False)
        s = bdim_at_front(s, d, size)  # [batch]
        cols.append(S.broadcast_in_dim_p.bind(s, shape=(size, 1), broadcast_dimensions=(0,)))
    return S.concatenate_p.bind(*cols, dimension=1) if len(cols) > 1 else cols[0]


@register_batching(S.dynamic_slice_p)
def _dynamic_slice_batch(vals: list, dims: list, *, frame: Any, slice_sizes: tuple):
    x, *starts = vals
    dx, *ds = dims
    if all(d is not_mapped for d in ds):
        st = list(starts)
        st.insert(dx, np.zeros((), aval_of(starts[0]).dtype) if starts else np.int32(0))
        sizes = list(slice_sizes)
        sizes.insert(dx, frame.size)
        return S.dynamic_slice_p.bind(x, *st, slice_sizes=tuple(sizes)), dx
    # Batched starts: a gather reading one window per batch element (clamped, as dynamic_slice is).
    nd = len(slice_sizes)
    idx = _index_vector(starts, ds, frame.size)
    if dx is not_mapped:
        dn = I.GatherDimensionNumbers(offset_dims=tuple(range(1, nd + 1)), collapsed_slice_dims=(),
                                      start_index_map=tuple(range(nd)))
        sizes = tuple(slice_sizes)
    else:
        x = moveaxis(x, dx, 0)
        dn = I.GatherDimensionNumbers(offset_dims=tuple(range(1, nd + 1)), collapsed_slice_dims=(),
                                      start_index_map=tuple(range(1, nd + 1)), operand_batching_dims=(0,),
                                      start_indices_batching_dims=(0,))
        sizes = (1,) + tuple(slice_sizes)
    out = I.gather_p.bind(x, idx, dimension_numbers=dn, slice_sizes=sizes, mode=I.GatherScatterMode.CLIP,
                          fill_value=None, indices_are_sorted=False, unique_indices=False)
    return out, 0


@register_batching(S.dynamic_update_slice_p)
def _dynamic_update_slice_batch(vals: list, dims: list, *, frame: Any):
    x, upd, *starts = vals
    dx, du, *ds = dims
    if all(d is not_mapped for d in ds):
        x = bdim_at_front(x, dx, frame.size)
        upd = bdim_at_front(upd, du, frame.size)
        zero = np.zeros((), aval_of(starts[0]).dtype) if starts else np.int32(0)
        return S.dynamic_update_slice_p.bind(x, upd, zero, *starts), 0
    # Batched starts: a scatter writing one window per batch element.  dynamic_update_slice clamps
    # its starts so the update fits; the scatter gets clamped starts for the same positions.
    x = bdim_at_front(x, dx, frame.size)
    upd = bdim_at_front(upd, du, frame.size)
    shape = tuple(aval_of(x).shape[1:])
    up_shape = tuple(aval_of(upd).shape[1:])
    clamped, cdims = [], []
    for s, d, n, k in zip(starts, ds, shape, up_shape):
        lo = np.zeros((), aval_of(s).dtype)
        hi = np.asarray(n - k, aval_of(s).dtype)
        clamped.append(S.clamp_p.bind(lo, s, hi))
        cdims.append(d)
    idx = _index_vector(clamped, cdims, frame.size)
    nd = len(shape)
    dn = I.ScatterDimensionNumbers(update_window_dims=tuple(range(1, nd + 1)), inserted_window_dims=(),
                                   scatter_dims_to_operand_dims=tuple(range(1, nd + 1)),
                                   operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    out = I.scatter_p.bind(x, idx, upd, dimension_numbers=dn, mode=I.GatherScatterMode.CLIP,
                           indices_are_sorted=True, unique_indices=True, update_jaxpr=None)
    return out, 0


mark_unsupported(S.iota_p, "batching", "iota takes no operands, so it never has a batched input to batch over")
mark_unsupported(S.dim_as_value_p, "batching",
                 "dim_as_value takes no operands, so it never has a batched input to batch over")


@register_batching(S.rng_bit_generator_p)
def _rng_bit_generator_batch(vals: list, dims: list, *, frame: Any, shape: tuple, dtype: Any,
                             algorithm: int) -> tuple[list, list]:
    """JAX's rule, for the same bits: the first key of the batch draws all the rows (a leading batch axis on
    the shape) and only that key advances."""
    (keys,), (d,) = vals, dims
    if d is not_mapped:
        return list(S.rng_bit_generator_p.bind(keys, shape=shape, dtype=dtype, algorithm=algorithm)), \
            [not_mapped, not_mapped]
    keys = moveaxis(keys, d, 0)
    first = S.reshape_p.bind(S.slice_p.bind(keys, start_indices=(0, 0), limit_indices=(1, 4), strides=None),
                             new_sizes=(4,), dimensions=None)
    new_key, bits = S.rng_bit_generator_p.bind(first, shape=(frame.size,) + tuple(shape), dtype=dtype,
                                               algorithm=algorithm)
    row = S.reshape_p.bind(new_key, new_sizes=(1, 4), dimensions=None)
    zero = np.zeros((), np.int32)
    new_keys = S.dynamic_update_slice_p.bind(keys, row, zero, zero)
    return [new_keys, bits], [0, 0]
