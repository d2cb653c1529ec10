"""JVP rules of ``conv_general_dilated`` (bilinear) and ``fft`` (linear)."""

from __future__ import annotations

from typing import Any

from ftrans.core import dtypes
from ftrans.core.prims import convolution as C
from ftrans.core.prims import fft as F
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero, add_tangents, defjvp_linear, register_jvp


@register_jvp(C.conv_general_dilated_p)
def _conv_jvp(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
    """Bilinear: ``conv(t_lhs, rhs) + conv(lhs, t_rhs)`` with the same parameters."""
    lhs, rhs = primals
    t_lhs, t_rhs = tangents
    out = C.conv_general_dilated_p.bind(lhs, rhs, **params)
    if not dtypes.is_inexact(aval_of(out).dtype):
        return out, Zero.from_primal_value(out)
    total: Any = Zero.from_primal_value(out)
    if type(t_lhs) is not Zero:
        total = add_tangents(total, C.conv_general_dilated_p.bind(t_lhs, rhs, **params))
    if type(t_rhs) is not Zero:
        total = add_tangents(total, C.conv_general_dilated_p.bind(lhs, t_rhs, **params))
    return out, total


defjvp_linear(F.fft_p)
