"""Transposes of the linear collectives: ``psum`` -> ``psum``, ``ppermute`` -> ``ppermute`` with the inverse
permutation, ``all_gather`` <-> ``psum_scatter``, ``all_to_all`` -> ``all_to_all`` with split and concat axes
swapped."""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims.collectives import (
    all_gather_p,
    all_to_all_p,
    axis_index_p,
    pmax_p,
    pmin_p,
    ppermute_p,
    psum_p,
    psum_scatter_p,
)
from ftrans.transforms.transpose import register_transpose

for _p in (pmax_p, pmin_p):
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
