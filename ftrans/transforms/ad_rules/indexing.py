"""JVP rules of ``gather`` and the ``scatter`` family.

* ``gather`` is linear in its operand; out-of-bounds windows of a
  FILL_OR_DROP gather read ``fill_value`` in the primal and 0 in the tangent.
* ``scatter`` (set) and ``scatter_add`` are linear in (operand, updates)
  jointly: the tangent is the same scatter of the update tangents into the
  operand tangent.  ``scatter`` writes the tangent of the same update that
  wins in the primal, because both scatters see the same indices in the same
  order (the impl and XLA's CPU scatter apply updates in order).
* ``scatter_mul`` is linear in the operand; with respect to the updates it is
  differentiated only for ``unique_indices=True``, exactly as in JAX.
* ``scatter_min``/``scatter_max`` follow JAX: at each position the tangent is
  the average of the tangents of every candidate (the operand's element and
  each update scattered there) that equals the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero, add_tangents, instantiate, register_jvp, zeros_like_aval

Pair = tuple[Any, Any]


def _zero_scalar(x: Any) -> Any:
    """0 of ``x``'s dtype as a Python scalar (a gather's ``fill_value`` parameter)."""
    return np.zeros((), aval_of(x).dtype).item()


@register_jvp(I.gather_p)
def _gather_jvp(primals: list, tangents: list, **params: Any) -> Pair:
    operand, indices = primals
    t = tangents[0]
    out = I.gather_p.bind(operand, indices, **params)
    if type(t) is Zero:
        return out, Zero.from_primal_value(out)
    t_params = dict(params)
    if params["mode"] is I.GatherScatterMode.FILL_OR_DROP:
        t_params["fill_value"] = _zero_scalar(out)
    return out, I.gather_p.bind(t, indices, **t_params)


def _scatter_jvp_linear(prim) -> None:
    """(operand, updates) jointly linear; the indices (operand 1) pass through."""

    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> Pair:
        operand, indices, updates = primals
        t_op, _, t_up = tangents
        out = prim.bind(operand, indices, updates, **params)
        if type(t_op) is Zero and type(t_up) is Zero:
            return out, Zero.from_primal_value(out)
        return out, prim.bind(instantiate(t_op), indices, instantiate(t_up), **params)

    rule.__name__ = f"{prim.name}_jvp"


_scatter_jvp_linear(I.scatter_p)
_scatter_jvp_linear(I.scatter_add_p)
_scatter_jvp_linear(I.scatter_sub_p)


@register_jvp(I.scatter_mul_p)
def _scatter_mul_jvp(primals: list, tangents: list, **params: Any) -> Pair:
    """``d(x * prod y) = scatter_mul(t_x, y) + x * scatter_add(0, t_y)`` (the latter needs unique indices)."""
    operand, indices, updates = primals
    t_op, _, t_up = tangents
    out = I.scatter_mul_p.bind(operand, indices, updates, **params)
    total: Any = Zero.from_primal_value(out)
    if type(t_op) is not Zero:
        total = add_tangents(total, I.scatter_mul_p.bind(t_op, indices, updates, **params))
    if type(t_up) is not Zero:
        if not params["unique_indices"]:
            raise NotImplementedError(
                "differentiation (jvp) of scatter_mul with respect to the updates: unique_indices=False "
                "is not supported (as in JAX); pass unique_indices=True if the indices are unique"
            )
        zeros = zeros_like_aval(aval_of(operand).update(weak_type=False))
        spread = I.scatter_add_p.bind(zeros, indices, t_up, **params)
        total = add_tangents(total, E.mul_p.bind(operand, spread))
    return out, total


def _inverse_gather(operand: Any, updates: Any, dnums: I.ScatterDimensionNumbers) -> tuple[Any, tuple[int, ...]]:
    """The gather dimension numbers and slice sizes that read back the windows a scatter writes."""
    gdn = I.GatherDimensionNumbers(
        offset_dims=dnums.update_window_dims,
        collapsed_slice_dims=dnums.inserted_window_dims,
        start_index_map=dnums.scatter_dims_to_operand_dims,
        operand_batching_dims=dnums.operand_batching_dims,
        start_indices_batching_dims=dnums.scatter_indices_batching_dims,
    )
    up_shape = tuple(aval_of(updates).shape)
    sizes, pos = [], 0
    for i in range(len(aval_of(operand).shape)):
        if i in dnums.inserted_window_dims or i in dnums.operand_batching_dims:
            sizes.append(1)
        else:
            sizes.append(up_shape[dnums.update_window_dims[pos]])
            pos += 1
    return gdn, tuple(sizes)


def _as_float(pred: Any, like: Any) -> Any:
    return S.convert_element_type_p.bind(pred, new_dtype=aval_of(like).dtype, weak_type=False)


def _scatter_extremal_rule(prim) -> None:
    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> Pair:
        operand, indices, updates = primals
        t_op, _, t_up = tangents
        out = prim.bind(operand, indices, updates, **params)
        if type(t_op) is Zero and type(t_up) is Zero:
            return out, Zero.from_primal_value(out)
        t_op, t_up = instantiate(t_op), instantiate(t_up)
        dnums, mode = params["dimension_numbers"], params["mode"]
        gdn, sizes = _inverse_gather(operand, updates, dnums)
        fill = np.asarray(np.nan, aval_of(out).dtype).item() if mode is I.GatherScatterMode.FILL_OR_DROP else None
        # The result read back at each update's position: an update "wins" where it equals it.
        read_back = I.gather_p.bind(out, indices, dimension_numbers=gdn, slice_sizes=sizes, mode=mode,
                                    fill_value=fill, indices_are_sorted=params["indices_are_sorted"],
                                    unique_indices=params["unique_indices"])
        up_wins = _as_float(E.eq_p.bind(updates, read_back), t_up)
        op_wins = _as_float(E.eq_p.bind(operand, out), t_op)
        add_params = dict(params)
        zeros = zeros_like_aval(aval_of(t_op).update(weak_type=False))
        n_up = I.scatter_add_p.bind(zeros, indices, up_wins, **add_params)
        t_sum = I.scatter_add_p.bind(E.mul_p.bind(op_wins, t_op), indices, E.mul_p.bind(up_wins, t_up),
                                     **add_params)
        return out, E.div_p.bind(t_sum, E.add_p.bind(n_up, op_wins))

    rule.__name__ = f"{prim.name}_jvp"


_scatter_extremal_rule(I.scatter_min_p)
_scatter_extremal_rule(I.scatter_max_p)
