"""Transposes of the linear collectives: ``psum`` -> ``psum``, ``ppermute`` -> ``ppermute`` with the inverse
permutation, ``all_gather`` <-> ``psum_scatter``, ``all_to_all`` -> ``all_to_all`` with split and concat axes
swapped."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.axis_env import axis_size
from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import elementwise as E
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
from ftrans.transforms.ad import Zero, zeros_like_aval
from ftrans.transforms.transpose import is_undefined, register_transpose

for _p in (pmax_p, pmin_p):
    mark_unsupported(_p, "transpose", f"{_p.name} is not linear")
mark_unsupported(axis_index_p, "transpose", "axis_index has no operands, so nothing to transpose")


@register_transpose(psum_p)
def _psum_t(ct: Any, x: Any, *, axis_name: tuple, axis_index_groups: Any) -> list:
    return [psum_p.bind(ct, axis_name=axis_name, axis_index_groups=axis_index_groups)]


@register_transpose(pvary_p)
def _pvary_t(ct: Any, x: Any, *, axes: tuple) -> list:
    # The same value on every device, typed varying: each device's cotangent is its share, summed back.
    return [psum_invariant_p.bind(ct, axes=axes)]


@register_transpose(psum_invariant_p)
def _psum_invariant_t(ct: Any, x: Any, *, axes: tuple) -> list:
    # The result is one value on every device: every device's operand gets the whole cotangent.
    return [pvary_p.bind(ct, axes=axes)]


@register_transpose(preduced_p)
def _preduced_t(ct: Any, x: Any, *, axes: tuple) -> list:
    # The cotangent of a reduced value is unreduced (each device's partial sum): summed here, it is the
    # invariant operand's (as JAX's: ``unreduced_psum``, whose own transpose is this cast).
    return [unreduced_psum_p.bind(ct, axes=axes)]


@register_transpose(unreduced_psum_p)
def _unreduced_psum_t(ct: Any, x: Any, *, axes: tuple) -> list:
    # The sum is the same on every device: each device's partial sum gets the whole cotangent, typed reduced.
    return [preduced_p.bind(ct, axes=axes)]


@register_transpose(all_gather_reduced_p)
def _all_gather_reduced_t(ct: Any, x: Any, *, all_gather_dimension: int, axis_name: tuple, axis_size: int,
                          tiled: bool) -> list:
    # The gathered value is reduced: its cotangent is each device's partial sum (unreduced), summed and
    # scattered back to the blocks (JAX's ``unreduced_reduce_scatter``).
    return [unreduced_reduce_scatter_p.bind(ct, axis_name=axis_name, scatter_dimension=all_gather_dimension,
                                            axis_size=axis_size, tiled=tiled)]


@register_transpose(unreduced_reduce_scatter_p)
def _unreduced_reduce_scatter_t(ct: Any, x: Any, *, axis_name: tuple, scatter_dimension: int, axis_size: int,
                                tiled: bool) -> list:
    # Every device's partial sum gets the cotangent of every block: the blocks gathered, typed reduced.
    return [all_gather_reduced_p.bind(ct, all_gather_dimension=scatter_dimension, axis_name=axis_name,
                                      axis_size=axis_size, tiled=tiled)]


@register_transpose(vary_unreduced_cast_p)
def _vary_unreduced_cast_t(ct: Any, x: Any, *, axes: tuple) -> list:
    # A change of type only: an unreduced value's cotangent is reduced (the whole cotangent on every device);
    # cast back to the varying operand's type (JAX's ``reduced_vary_cast``), which typed bodies check.
    return [reduced_vary_cast_p.bind(ct, axes=axes)]


@register_transpose(reduced_vary_cast_p)
def _reduced_vary_cast_t(ct: Any, x: Any, *, axes: tuple) -> list:
    # A reduced value's cotangent is each device's own, unreduced (JAX's ``vary_unreduced_cast``).
    return [vary_unreduced_cast_p.bind(ct, axes=axes)]


@register_transpose(ppermute_p)
def _ppermute_t(ct: Any, x: Any, *, axis_name: Any, perm: tuple) -> list:
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((t, s) for s, t in perm))]


def _g(axis_index_groups: Any) -> dict:
    return {} if axis_index_groups is None else {"axis_index_groups": axis_index_groups}


@register_transpose(all_gather_p)
def _all_gather_t(ct: Any, x: Any, *, axis_name: Any, axis: int, tiled: bool, axis_index_groups: Any = None,
                  to: str = "varying") -> list:
    if to == "invarying":  # JAX's all_gather_invariant: the cotangent is the same on every device: our slice
        names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
        n = math.prod(axis_size("all_gather", a) for a in names)
        axis_name = names[0] if len(names) == 1 else names
        ct_aval = aval_of(ct)
        blk = ct_aval.shape[axis] // n if tiled else 1
        idx = E.mul_p.bind(axis_index_p.bind(axis_name=axis_name), Array._new(np.asarray(blk, np.int32), False))
        zero = Array._new(np.asarray(0, np.int32), False)
        starts = [idx if d == axis else zero for d in range(len(ct_aval.shape))]
        sizes = tuple(blk if d == axis else k for d, k in enumerate(ct_aval.shape))
        from ftrans.core.prims.shard_map import checking_vma

        if checking_vma.stack and checking_vma.stack[-1]:  # sliced at a varying index: JAX's implicit pvary
            ct = pvary_p.bind(ct, axes=names)
        out = S.dynamic_slice_p.bind(ct, *starts, slice_sizes=sizes)
        return [out if tiled else S.reshape_p.bind(out, new_sizes=x.aval.shape, dimensions=None)]
    return [psum_scatter_p.bind(ct, axis_name=axis_name, scatter_dimension=axis, tiled=tiled,
                                **_g(axis_index_groups))]


@register_transpose(psum_scatter_p)
def _psum_scatter_t(ct: Any, x: Any, *, axis_name: Any, scatter_dimension: int, tiled: bool,
                    axis_index_groups: Any = None) -> list:
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)  # (a tuple, as JAX's all_gather's)
    return [all_gather_p.bind(ct, axis_name=names, axis=scatter_dimension, tiled=tiled, **_g(axis_index_groups))]


@register_transpose(all_to_all_p)
def _all_to_all_t(ct: Any, x: Any, *, axis_name: Any, split_axis: int, concat_axis: int, tiled: bool,
                  axis_index_groups: Any = None) -> list:
    return [all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis, concat_axis=split_axis,
                              tiled=tiled, **_g(axis_index_groups))]


def _tiled_exchange(x: Any, names: tuple) -> Any:
    """``all_to_all(x, names, 0, 0, tiled=True)`` of a 1-D ``x``: chunk ``j`` goes to member ``j`` (row-major over
    several names), and what member ``j`` sent lands at chunk ``j``."""
    if len(names) == 1:
        return all_to_all_p.bind(x, axis_name=names[0], split_axis=0, concat_axis=0, tiled=True)
    sizes = [axis_size("ragged_all_to_all", n) for n in names]
    k = aval_of(x).shape[0]
    v = S.reshape_p.bind(x, new_sizes=(*sizes, k // math.prod(sizes)), dimensions=None)
    for j, n in enumerate(names):  # exchange one name's digit at a time, in place
        v = all_to_all_p.bind(v, axis_name=n, split_axis=j, concat_axis=j, tiled=False)
    return S.reshape_p.bind(v, new_sizes=(k,), dimensions=None)


def _as_dtype(x: Any, dt: Any) -> Any:
    return x if aval_of(x).dtype == dt else S.convert_element_type_p.bind(x, new_dtype=dt, weak_type=False)


@register_transpose(ragged_all_to_all_p)
def _ragged_all_to_all_t(ct: Any, operand: Any, output: Any, input_offsets: Any, send_sizes: Any,
                         output_offsets: Any, recv_sizes: Any, *, axis_name: Any, axis_index_groups: Any) -> list:
    """The rows each member received go back to where they came from (a ragged all_to_all with the roles of
    the offsets swapped); ``output``'s rows that were overwritten get no cotangent, the others pass through."""
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    op_lin, out_lin = is_undefined(operand), is_undefined(output)
    op_aval = operand.aval if op_lin else aval_of(operand)
    if type(ct) is Zero:
        return [Zero(op_aval) if op_lin else None, Zero(output.aval) if out_lin else None] + [None] * 4
    params = {"axis_name": axis_name, "axis_index_groups": axis_index_groups}
    where_written = _tiled_exchange(output_offsets, names)  # row of my output that entry i filled
    operand_t = output_t = None
    if op_lin:
        came_from = _tiled_exchange(input_offsets, names)  # row of the sender's operand it came from
        zeros = zeros_like_aval(op_aval.update(weak_type=False))
        operand_t = ragged_all_to_all_p.bind(ct, zeros, where_written, recv_sizes, came_from, send_sizes, **params)
    if out_lin:
        ct_aval = aval_of(ct)
        m, k = ct_aval.shape[0], aval_of(recv_sizes).shape[0]
        dt = np.dtype(np.int64) if max(aval_of(where_written).dtype.itemsize,
                                      aval_of(recv_sizes).dtype.itemsize) > 4 else np.dtype(np.int32)
        start = S.broadcast_in_dim_p.bind(_as_dtype(where_written, dt), shape=(m, k), broadcast_dimensions=(1,))
        size = S.broadcast_in_dim_p.bind(_as_dtype(recv_sizes, dt), shape=(m, k), broadcast_dimensions=(1,))
        rows = S.iota_p.bind(dtype=dt, shape=(m, k), dimension=0)
        hit = E.and_p.bind(E.ge_p.bind(rows, start), E.lt_p.bind(rows, E.add_p.bind(start, size)))
        written = R.reduce_or_p.bind(hit, axes=(1,))
        written = S.broadcast_in_dim_p.bind(written, shape=ct_aval.shape, broadcast_dimensions=(0,))
        output_t = S.select_n_p.bind(written, ct, zeros_like_aval(ct_aval.update(weak_type=False)))
    return [operand_t, output_t, None, None, None, None]
