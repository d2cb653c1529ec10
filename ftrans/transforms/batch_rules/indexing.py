"""Batching rules of ``gather`` and the ``scatter`` family, through XLA's batching dimensions.

* Only the operand batched: the batch dimension becomes one more window
  dimension, read (or written) whole.
* The indices batched: operand and indices get a leading batch dimension
  declared as ``operand_batching_dims`` / ``start_indices_batching_dims``
  (``scatter_indices_batching_dims``), so each batch element indexes its own
  slice of the operand; an unbatched operand is broadcast first.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import indexing as I
from ftrans.transforms.batching import bdim_at_front, moveaxis, not_mapped, register_batching


def _plus1(t: tuple) -> tuple:
    return tuple(k + 1 for k in t)


@register_batching(I.gather_p)
def _gather_batch(vals: list, dims: list, *, frame: Any, dimension_numbers: Any, slice_sizes: tuple,
                  **params: Any) -> tuple[Any, Any]:
    operand, indices = vals
    do, di = dims
    dn = dimension_numbers
    if di is not_mapped:
        operand = moveaxis(operand, do, 0)
        new = I.GatherDimensionNumbers(
            offset_dims=(0,) + _plus1(dn.offset_dims),
            collapsed_slice_dims=_plus1(dn.collapsed_slice_dims),
            start_index_map=_plus1(dn.start_index_map),
            operand_batching_dims=_plus1(dn.operand_batching_dims),
            start_indices_batching_dims=tuple(dn.start_indices_batching_dims),
        )
        return I.gather_p.bind(operand, indices, dimension_numbers=new, slice_sizes=(frame.size,) + tuple(slice_sizes),
                               **params), 0
    operand = bdim_at_front(operand, do, frame.size)
    indices = moveaxis(indices, di, 0)
    new = I.GatherDimensionNumbers(
        offset_dims=_plus1(dn.offset_dims),
        collapsed_slice_dims=_plus1(dn.collapsed_slice_dims),
        start_index_map=_plus1(dn.start_index_map),
        operand_batching_dims=(0,) + _plus1(dn.operand_batching_dims),
        start_indices_batching_dims=(0,) + _plus1(dn.start_indices_batching_dims),
    )
    return I.gather_p.bind(operand, indices, dimension_numbers=new, slice_sizes=(1,) + tuple(slice_sizes),
                           **params), 0


def _scatter_rule(prim: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, dimension_numbers: Any, **params: Any) -> tuple[Any, Any]:
        operand, indices, updates = vals
        do, di, du = dims
        dn = dimension_numbers
        operand = bdim_at_front(operand, do, frame.size)
        updates = bdim_at_front(updates, du, frame.size)
        if di is not_mapped:
            new = I.ScatterDimensionNumbers(
                update_window_dims=(0,) + _plus1(dn.update_window_dims),
                inserted_window_dims=_plus1(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_plus1(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=_plus1(dn.operand_batching_dims),
                scatter_indices_batching_dims=tuple(dn.scatter_indices_batching_dims),
            )
        else:
            indices = moveaxis(indices, di, 0)
            new = I.ScatterDimensionNumbers(
                update_window_dims=_plus1(dn.update_window_dims),
                inserted_window_dims=_plus1(dn.inserted_window_dims),
                scatter_dims_to_operand_dims=_plus1(dn.scatter_dims_to_operand_dims),
                operand_batching_dims=(0,) + _plus1(dn.operand_batching_dims),
                scatter_indices_batching_dims=(0,) + _plus1(dn.scatter_indices_batching_dims),
            )
        return prim.bind(operand, indices, updates, dimension_numbers=new, **params), 0

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (I.scatter_p, I.scatter_add_p, I.scatter_sub_p, I.scatter_mul_p, I.scatter_min_p, I.scatter_max_p):
    _scatter_rule(_p)
