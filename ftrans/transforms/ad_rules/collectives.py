"""Forward mode of the collectives: ``psum``, ``all_gather``, ``all_to_all``, ``ppermute`` and
``psum_scatter`` are linear, ``axis_index`` has a zero derivative, and ``pmax``/``pmin`` have none (as in
JAX)."""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import mark_unsupported
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
from ftrans.transforms.ad import Zero, defjvp_linear, defjvp_zero, instantiate, register_jvp

for _p in (psum_p, all_gather_p, all_to_all_p, ppermute_p, psum_scatter_p, pvary_p, psum_invariant_p, preduced_p,
           vary_unreduced_cast_p, reduced_vary_cast_p, all_gather_reduced_p, unreduced_reduce_scatter_p,
           unreduced_psum_p):
    defjvp_linear(_p)
defjvp_zero(axis_index_p)
for _p in (pmax_p, pmin_p):
    mark_unsupported(_p, "jvp", f"{_p.name} has no derivative rule (JAX defines none either); differentiate "
                                "through an explicit comparison with the gathered values instead")


@register_jvp(ragged_all_to_all_p)
def _ragged_all_to_all_jvp(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
    """Linear in (operand, output) jointly; the offsets and sizes only say where rows go."""
    out = ragged_all_to_all_p.bind(*primals, **params)
    t_operand, t_output = tangents[:2]
    if type(t_operand) is Zero and type(t_output) is Zero:
        return out, Zero.from_primal_value(out)
    return out, ragged_all_to_all_p.bind(instantiate(t_operand), instantiate(t_output), *primals[2:], **params)
