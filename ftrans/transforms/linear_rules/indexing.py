"""Transpose rules of ``gather`` and the linear scatters.

* ``gather``'s transpose scatters (adds) the cotangent back into zeros of the
  operand's shape, with the dimension numbers that invert the gather's.
* ``scatter_add`` passes the cotangent to the operand and gathers the updates'
  cotangent back from the written windows.
* ``scatter`` (set) does the same except that overwritten positions of the
  operand receive nothing, and with duplicate indices only the update that
  won (was written last) receives its position's cotangent: the exact
  transpose of the forward rule, as JAX's.
* ``scatter_mul`` is linear in its operand only: the cotangent is scaled by the
  same products.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.trace import aval_of
from ftrans.transforms.ad_rules.indexing import _inverse_gather
from ftrans.transforms.linear_rules._util import ct_zeros, zeros
from ftrans.transforms.transpose import is_undefined, register_transpose


def _indices_not_linear(name: str, indices: Any) -> None:
    if is_undefined(indices):
        raise NotImplementedError(f"transpose of `{name}` in its indices (they are integers)")


@register_transpose(I.gather_p)
def _gather_t(ct: Any, operand: Any, indices: Any, *, dimension_numbers: Any, slice_sizes: tuple, mode: Any,
              fill_value: Any, indices_are_sorted: bool, unique_indices: bool) -> list:
    _indices_not_linear("gather", indices)
    dn = dimension_numbers
    sdn = I.ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims,
        inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map,
        operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.start_indices_batching_dims,
    )
    # (JAX scatters into lax.full(shape, 0, dtype): strong zeros, so the cotangent is strong for a weak ct)
    zero = zeros(operand.aval.update(dtype=aval_of(ct).dtype, weak_type=False))
    out = I.scatter_add_p.bind(zero, indices, ct, dimension_numbers=sdn, mode=mode,
                               indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                               update_jaxpr=None)
    return [out, None]


def _read_back(ct: Any, indices: Any, updates_aval: Any, dn: Any, mode: Any, sorted_: bool, unique: bool) -> Any:
    gdn, sizes = _inverse_gather(aval_of(ct), updates_aval, dn)  # (aval_of reads an aval's shape too)
    fill = np.zeros((), aval_of(ct).dtype).item()
    return I.gather_p.bind(ct, indices, dimension_numbers=gdn, slice_sizes=sizes, mode=mode, fill_value=fill,
                           indices_are_sorted=sorted_, unique_indices=unique)


def _updates_aval(updates: Any) -> Any:
    return updates.aval if is_undefined(updates) else aval_of(updates)


@register_transpose(I.scatter_add_p)
def _scatter_add_t(ct: Any, operand: Any, indices: Any, updates: Any, *, dimension_numbers: Any, mode: Any,
                   indices_are_sorted: bool, unique_indices: bool, update_jaxpr: Any = None) -> list:
    _indices_not_linear("scatter_add", indices)
    t_op = ct if is_undefined(operand) else None
    t_up = (_read_back(ct, indices, _updates_aval(updates), dimension_numbers, mode, indices_are_sorted,
                       unique_indices) if is_undefined(updates) else None)
    return [t_op, None, t_up]


@register_transpose(I.scatter_sub_p)
def _scatter_sub_t(ct: Any, operand: Any, indices: Any, updates: Any, *, dimension_numbers: Any, mode: Any,
                   indices_are_sorted: bool, unique_indices: bool, update_jaxpr: Any = None) -> list:
    _indices_not_linear("scatter_sub", indices)
    t_op = ct if is_undefined(operand) else None
    t_up = (E.neg_p.bind(_read_back(ct, indices, _updates_aval(updates), dimension_numbers, mode,
                                    indices_are_sorted, unique_indices)) if is_undefined(updates) else None)
    return [t_op, None, t_up]


@register_transpose(I.scatter_p)
def _scatter_t(ct: Any, operand: Any, indices: Any, updates: Any, *, dimension_numbers: Any, mode: Any,
               indices_are_sorted: bool, unique_indices: bool, update_jaxpr: Any = None) -> list:
    _indices_not_linear("scatter", indices)
    up_aval = _updates_aval(updates)
    params = dict(dimension_numbers=dimension_numbers, mode=mode, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, update_jaxpr=update_jaxpr)
    t_op = I.scatter_p.bind(ct, indices, ct_zeros(up_aval, ct), **params) if is_undefined(operand) else None
    t_up = None
    if is_undefined(updates):
        t_up = _read_back(ct, indices, up_aval, dimension_numbers, mode, indices_are_sorted, unique_indices)
        if not unique_indices:
            t_up = E.mul_p.bind(t_up, _winners(ct, indices, up_aval, params))
    return [t_op, None, t_up]


def _winners(ct: Any, indices: Any, up_aval: Any, params: dict) -> Any:
    """1 where an update element is the one a scatter with duplicate indices keeps, else 0.

    Every update element gets a distinct id; scattering the ids with the same
    indices and reading them back tells each element whether it was written
    last (the winner, whose tangent the forward pass kept).
    """
    from ftrans.core.prims import structural as S

    n = int(np.prod(up_aval.shape, dtype=int))
    ids = S.reshape_p.bind(S.iota_p.bind(dtype=np.dtype(np.int32), shape=(n,), dimension=0),
                           new_sizes=tuple(up_aval.shape), dimensions=None)
    base = S.broadcast_in_dim_p.bind(np.asarray(-1, np.int32), shape=tuple(aval_of(ct).shape),
                                     broadcast_dimensions=())
    written = I.scatter_p.bind(base, indices, ids, **params)
    read = _read_back(written, indices, up_aval.update(dtype=np.dtype(np.int32)), params["dimension_numbers"],
                      params["mode"], params["indices_are_sorted"], params["unique_indices"])
    return S.convert_element_type_p.bind(E.eq_p.bind(read, ids), new_dtype=aval_of(ct).dtype, weak_type=False)


@register_transpose(I.scatter_mul_p)
def _scatter_mul_t(ct: Any, operand: Any, indices: Any, updates: Any, **params: Any) -> list:
    _indices_not_linear("scatter_mul", indices)
    if is_undefined(updates):
        raise NotImplementedError("transpose of `scatter_mul` in its updates: it is linear in the operand only")
    return [I.scatter_mul_p.bind(ct, indices, updates, **params), None, None]


for _p in (I.scatter_min_p, I.scatter_max_p):
    mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear in any operand")
