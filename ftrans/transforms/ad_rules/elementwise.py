"""JVP rules of the elementwise primitives (``ftrans/core/prims/elementwise.py``).

Derivatives follow JAX's conventions, including the non-obvious ones: ``max``
and ``min`` split the tangent evenly between tied operands, ``sign``, ``floor``,
``ceil``, ``round``, comparisons and bit operations have zero derivative, and
complex functions are differentiated as holomorphic functions (``abs``,
``real``, ``imag``, ``conj`` and ``complex`` are linear over the reals).
"""

from __future__ import annotations

from typing import Any

from ftrans import lax
from ftrans.core.prims import elementwise as E
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import (
    Zero,
    add_tangents,
    broadcast_to,
    defjvp_linear,
    register_jvp,
)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(aval_of(x).shape)


def _scale(t: Any, coef: Any) -> Any:
    """``t * coef`` keeping symbolic zeros symbolic (and broadcasting a rank-0 ``t``)."""
    if type(t) is Zero:
        return Zero(t.aval.update(shape=_shape(coef)) if t.aval.shape == () else t.aval)
    return lax.mul(t, coef)


def _unary(prim, deriv):
    """A rule for ``y = f(x)`` with ``dy = t * deriv(x, y)``."""

    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        y = prim.bind(x, **params)
        if type(t) is Zero:
            return y, Zero.from_primal_value(y)
        return y, lax.mul(t, deriv(x, y))

    rule.__name__ = f"{prim.name}_jvp"
    return rule


# ---------------------------------------------------------------- arithmetic
@register_jvp(E.add_p)
def _add_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    x, y = primals
    out = E.add_p.bind(x, y)
    shape = _shape(out)
    tx, ty = tangents
    return out, _sum(broadcast_to(tx, shape), broadcast_to(ty, shape), out)


def _sum(a: Any, b: Any, out: Any) -> Any:
    if type(a) is Zero and type(b) is Zero:
        return Zero.from_primal_value(out)
    return add_tangents(a, b)


@register_jvp(E.mul_p)
def _mul_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    x, y = primals
    tx, ty = tangents
    out = E.mul_p.bind(x, y)
    shape = _shape(out)
    a = broadcast_to(_scale(tx, y), shape)
    b = broadcast_to(_scale(ty, x), shape)
    return out, _sum(a, b, out)


_unary(E.sin_p, lambda x, y: lax.cos(x))
defjvp_linear(E.neg_p)
