"""Forward mode of the collectives: ``psum``, ``all_gather``, ``all_to_all``, ``ppermute`` and
``psum_scatter`` are linear, ``axis_index`` has a zero derivative, and ``pmax``/``pmin`` have none (as in
JAX)."""

from __future__ import annotations

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
from ftrans.transforms.ad import defjvp_linear, defjvp_zero

for _p in (psum_p, all_gather_p, all_to_all_p, ppermute_p, psum_scatter_p):
    defjvp_linear(_p)
defjvp_zero(axis_index_p)
for _p in (pmax_p, pmin_p):
    mark_unsupported(_p, "jvp", f"{_p.name} has no derivative rule (JAX defines none either); differentiate "
                                "through an explicit comparison with the gathered values instead")
