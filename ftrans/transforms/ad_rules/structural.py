"""JVP rules of the structural primitives (``ftrans/core/prims/structural.py``).

Almost all of them move data without arithmetic, so they are linear: the
tangent is the same primitive applied to the tangents, with any integer
operands (start indices, the ``select_n`` selector) passed through as primals.
The exceptions follow JAX: conversions to integer or bool types and bitcasts
have zero derivative, and ``clamp`` passes the tangent of whichever operand
its result comes from.
"""

from __future__ import annotations

from typing import Any

from ftrans.core import dtypes
from ftrans.core.keys import is_user_edtype
from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import (
    Zero,
    add_tangents,
    defjvp_linear,
    defjvp_zero,
    edtype_tangent_dtype,
    float0,
    instantiate,
    register_jvp,
    zeros_like_aval,
)

__all__ = ["linear_in_leading"]


def linear_in_leading(prim: Primitive, n_linear: int) -> None:
    """Register a rule for a primitive that is jointly linear in its first ``n_linear`` operands.

    The remaining operands (integer indices and the like) have no tangent and
    are passed through as primals.  The tangent is symbolic zero when every
    linear operand's tangent is.
    """

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = prim.bind(*primals, **params)
        lin = tangents[:n_linear]
        if all(type(t) is Zero for t in lin):
            return out, Zero.from_primal_value(out)
        return out, prim.bind(*[instantiate(t) for t in lin], *primals[n_linear:], **params)

    rule.__name__ = f"{prim.name}_jvp"
    register_jvp(prim)(rule)


# ---------------------------------------------------------------- pure data movement
for _prim in (S.broadcast_in_dim_p, S.reshape_p, S.transpose_p, S.squeeze_p, S.expand_dims_p,
              S.rev_p, S.slice_p, S.concatenate_p, S.pad_p, S.split_p):
    # pad is linear in (operand, padding value) jointly: the padding value's
    # tangent fills the padded positions of the output tangent.
    defjvp_linear(_prim)

linear_in_leading(S.dynamic_slice_p, 1)
linear_in_leading(S.dynamic_update_slice_p, 2)

defjvp_zero(S.bitcast_convert_type_p)
defjvp_zero(S.iota_p)
defjvp_zero(S.dim_as_value_p)
defjvp_zero(S.rng_bit_generator_p)


# ---------------------------------------------------------------- conversions
@register_jvp(S.convert_element_type_p)
def _convert_element_type_jvp(primals: list, tangents: list, *, new_dtype: Any, weak_type: bool) -> tuple[Any, Any]:
    """Float/complex -> float/complex converts the tangent the same way; integer or bool results get Zero.

    Complex -> real keeps the real part, exactly as the primal conversion does.
    """
    (x,), (t,) = primals, tangents
    out = S.convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if type(t) is Zero or not dtypes.is_inexact(new_dtype):
        return out, Zero.from_primal_value(out)
    return out, S.convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


@register_jvp(S.to_edtype_p)
def _to_edtype_jvp(primals: list, tangents: list, *, edtype: Any) -> tuple[Any, Any]:
    """As JAX's: the tangent converted to the extended dtype's tangent dtype (float0 when it has none)."""
    (x,), (t,) = primals, tangents
    out = S.to_edtype_p.bind(x, edtype=edtype)
    td = edtype_tangent_dtype(edtype)
    if type(t) is Zero or td == float0:
        return out, Zero.from_primal_value(out)
    return out, _convert_tangent(t, td)


@register_jvp(S.from_edtype_p)
def _from_edtype_jvp(primals: list, tangents: list, *, dtype: Any) -> tuple[Any, Any]:
    """As JAX's: the tangent converted to the representation dtype's tangent dtype (float0 if not inexact)."""
    (x,), (t,) = primals, tangents
    out = S.from_edtype_p.bind(x, dtype=dtype)
    if type(t) is Zero or not dtypes.is_inexact(dtype):
        return out, Zero.from_primal_value(out)
    return out, _convert_tangent(t, dtype)


def _convert_tangent(t: Any, d: Any) -> Any:
    """``lax.convert_element_type(t, d)`` for a tangent, where either side may be a user extended dtype."""
    src = aval_of(t).dtype
    if src == d:
        return t
    if is_user_edtype(d):
        return S.to_edtype_p.bind(t, edtype=d)
    if is_user_edtype(src):
        return S.from_edtype_p.bind(t, dtype=d)
    return S.convert_element_type_p.bind(t, new_dtype=d, weak_type=False)


# ---------------------------------------------------------------- selection
@register_jvp(S.select_n_p)
def _select_n_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    """Select the tangents with the same selector (which has no tangent itself)."""
    which, *cases = primals
    case_tangents = tangents[1:]
    out = S.select_n_p.bind(which, *cases)
    if all(type(t) is Zero for t in case_tangents):
        return out, Zero.from_primal_value(out)
    return out, S.select_n_p.bind(which, *[instantiate(t) for t in case_tangents])


def _where(pred: Any, t: Any, like: Any) -> Any:
    """``t`` where ``pred`` else 0, at ``like``'s shape (``t`` may be rank 0); Zero stays Zero."""
    shape = tuple(aval_of(like).shape)
    if type(t) is Zero:
        return Zero(t.aval.update(shape=shape))
    if tuple(aval_of(t).shape) != shape:
        t = S.broadcast_in_dim_p.bind(t, shape=shape, broadcast_dimensions=())
    zeros = zeros_like_aval(aval_of(t))
    return S.select_n_p.bind(_full(pred, like), zeros, t)


@register_jvp(S.clamp_p)
def _clamp_jvp(primals: list, tangents: list) -> tuple[Any, Any]:
    """JAX's rule: the operand's tangent where ``lo < x < hi``, ``lo``'s where ``x < lo < hi``, ``hi``'s where ``hi < x``.

    At a tie (``x == lo`` or ``x == hi``) no tangent passes, as in JAX.
    """
    lo, x, hi = primals
    t_lo, t_x, t_hi = tangents
    out = S.clamp_p.bind(lo, x, hi)
    total: Any = Zero.from_primal_value(out)
    if type(t_lo) is not Zero:
        pred = E.and_p.bind(E.gt_p.bind(lo, x), E.lt_p.bind(lo, hi))
        total = add_tangents(total, _where(pred, t_lo, out))
    if type(t_x) is not Zero:
        pred = E.and_p.bind(E.gt_p.bind(x, lo), E.lt_p.bind(x, hi))
        total = add_tangents(total, _where(pred, t_x, out))
    if type(t_hi) is not Zero:
        total = add_tangents(total, _where(E.lt_p.bind(hi, x), t_hi, out))
    return out, total


def _full(pred: Any, like: Any) -> Any:
    """A rank-0 predicate broadcast to ``like``'s shape (clamp's bounds may be scalars)."""
    shape = tuple(aval_of(like).shape)
    if tuple(aval_of(pred).shape) == shape:
        return pred
    return S.broadcast_in_dim_p.bind(pred, shape=shape, broadcast_dimensions=())
