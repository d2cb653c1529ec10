"""Transpose rules of the linear reductions: ``reduce_sum``, ``cumsum`` and ``dot_general``.

``dot_general`` is linear in each operand while the other is known; its
transpose with respect to one operand is another ``dot_general`` of the
cotangent with the other operand, followed by a transpose that puts the
dimensions back in the operand's order.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import reductions as R
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.core.sharding_rules import out_sharding_override
from ftrans.core.trace import aval_of
from ftrans.transforms.transpose import is_undefined, register_transpose


def _plain_type(aval: Any) -> Any:
    """An aval's sharding type when it has one without unreduced or reduced axes (None otherwise)."""
    sh = aval.typed_sharding
    return None if sh is None or sh.spec.unreduced or sh.spec.reduced else sh


@register_transpose(R.reduce_sum_p)
def _reduce_sum_t(ct: Any, x: Any, *, axes: tuple) -> list:
    shape = tuple(x.aval.shape)
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    sh = _plain_type(x.aval)
    if sh is not None:  # typed: the broadcast has the operand's type (JAX's rule passes it as out_sharding)
        with out_sharding_override(shape, tuple(sh.spec), sh.mesh):
            return [S.broadcast_in_dim_p.bind(ct, shape=shape, broadcast_dimensions=kept)]
    return [S.broadcast_in_dim_p.bind(ct, shape=shape, broadcast_dimensions=kept)]


@register_transpose(So.cumsum_p)
def _cumsum_t(ct: Any, x: Any, *, axis: int, reverse: bool) -> list:
    return [So.cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


def _dot_transpose_operand(ct: Any, other: Any, this_aval: Any, this_contract: tuple, other_contract: tuple,
                           this_batch: tuple, other_batch: tuple, this_is_lhs: bool, params: dict) -> Any:
    """The cotangent of one ``dot_general`` operand (``this``) given the other's value.

    The output's dimensions are (batch, lhs kept, rhs kept).  Contracting the
    cotangent's ``other``-kept dimensions with ``other``'s kept dimensions, with
    the batch dimensions kept batched, gives ``this``'s batch, kept and
    contracted dimensions.  The cotangent goes first when ``this`` is the lhs
    and second when it is the rhs, so for a plain matrix product the result is
    already in ``this``'s dimension order (no transpose); otherwise a final
    transpose restores it.
    """
    this_nd = len(this_aval.shape)
    other_nd = len(aval_of(other).shape)
    this_kept = [d for d in range(this_nd) if d not in this_contract and d not in this_batch]
    other_kept = tuple(d for d in range(other_nd) if d not in other_contract and d not in other_batch)
    nb = len(this_batch)
    ct_batch = tuple(range(nb))
    # The contracted dimensions of ``other`` (increasing) stand for these dimensions of ``this``.
    this_for_other = {o: t for t, o in zip(this_contract, other_contract)}
    mapped = [this_for_other[o] for o in range(other_nd) if o not in other_kept and o not in other_batch]
    # The cotangent and ``other`` may differ in dtype (mixed operands, a preferred type): dot_general takes
    # them as they are, and the result is converted to ``this``'s dtype below, as JAX's transpose does.
    prec, pref = params.get("precision"), params.get("preferred_element_type")
    layout = list(this_batch) + (this_kept + mapped if this_is_lhs else mapped + this_kept)
    with _ct_layout(this_aval, layout):
        if this_is_lhs:
            ct_other_kept = tuple(range(nb + len(this_kept), nb + len(this_kept) + len(other_kept)))
            out = R.dot_general_p.bind(ct, other, dimension_numbers=((ct_other_kept, other_kept),
                                                                     (ct_batch, tuple(other_batch))),
                                       precision=prec, preferred_element_type=pref)
        else:
            ct_other_kept = tuple(range(nb, nb + len(other_kept)))
            out = R.dot_general_p.bind(other, ct, dimension_numbers=((other_kept, ct_other_kept),
                                                                     (tuple(other_batch), ct_batch)),
                                       precision=prec, preferred_element_type=pref)
    perm = tuple(int(i) for i in np.argsort(layout))
    if perm != tuple(range(len(perm))):
        out = S.transpose_p.bind(out, permutation=perm)
    if aval_of(out).dtype != this_aval.dtype:
        out = S.convert_element_type_p.bind(out, new_dtype=this_aval.dtype, weak_type=this_aval.weak_type)
    return out


def _ct_layout(this_aval: Any, layout: list) -> Any:
    """As JAX's transpose, the product giving a typed operand's cotangent is typed as that cotangent (the
    operand's spec in the product's dimension order, its reduced axes unreduced): a cotangent of a weight
    reduced over ``x`` is the devices' partial sums, with no all-reduce."""
    sh = getattr(this_aval, "typed_sharding", None)
    if sh is None:
        return contextlib.nullcontext()
    from ftrans.core.sharding_rules import out_sharding_override, with_ur

    spec = sh.spec.to_ct_spec() if sh.spec.unreduced or sh.spec.reduced else sh.spec
    entries = tuple(spec)
    entries = entries + (None,) * (len(this_aval.shape) - len(entries))
    shape = tuple(this_aval.shape[d] for d in layout)
    return out_sharding_override(shape, with_ur([entries[d] for d in layout], spec.unreduced, spec.reduced))


def _dot_transpose_typed(ct: Any, other: Any, this_aval: Any, this_contract: tuple, other_contract: tuple,
                         this_batch: tuple, other_batch: tuple, this_is_lhs: bool, params: dict) -> Any:
    """The cotangent of a typed ``dot_general`` operand, built as JAX's rule builds it (so its equations have
    JAX's types): the cotangent contracted with ``other`` (the cotangent first), typed as ``this`` in the
    product's dimension order, then transposed into ``this``'s order."""
    this_nd = len(this_aval.shape)
    other_nd = len(aval_of(other).shape)
    this_kept = [d for d in range(this_nd) if d not in this_contract and d not in this_batch]
    other_kept = tuple(d for d in range(other_nd) if d not in other_contract and d not in other_batch)
    nb = len(this_batch)
    start = nb + len(this_kept) if this_is_lhs else nb  # where ``other``'s kept dimensions sit in ``ct``
    ct_other = tuple(range(start, start + len(other_kept)))
    # the product's dimensions: the batch ones, ``ct``'s free ones (this's kept), ``other``'s free ones (its
    # contracted dimensions in increasing order, i.e. this's contracted ones in that order)
    order = [this_contract[i] for i in np.argsort(other_contract)]
    layout = list(this_batch) + this_kept + order
    sh = this_aval.typed_sharding
    spec = tuple(sh.spec)
    with out_sharding_override(tuple(this_aval.shape[d] for d in layout), tuple(spec[d] for d in layout), sh.mesh):
        out = R.dot_general_p.bind(ct, other, dimension_numbers=((ct_other, other_kept), (tuple(range(nb)),
                                                                                          tuple(other_batch))),
                                   precision=params.get("precision"),
                                   preferred_element_type=params.get("preferred_element_type"))
    perm = tuple(int(i) for i in np.argsort(layout))
    if perm != tuple(range(len(perm))):
        out = S.transpose_p.bind(out, permutation=perm)
    if aval_of(out).dtype != this_aval.dtype:
        out = S.convert_element_type_p.bind(out, new_dtype=this_aval.dtype, weak_type=this_aval.weak_type)
    return out


@register_transpose(R.dot_general_p)
def _dot_general_t(ct: Any, lhs: Any, rhs: Any, *, dimension_numbers: tuple, **params: Any) -> list:
    (lc, rc), (lb, rb) = dimension_numbers
    if is_undefined(lhs) and is_undefined(rhs):
        raise NotImplementedError(
            "transpose of `dot_general` with both operands linear: a product of two linear values is not "
            "linear (linear_transpose needs a function linear in its arguments)"
        )
    if is_undefined(lhs):
        rule = _dot_transpose_typed if _plain_type(lhs.aval) is not None else _dot_transpose_operand
        return [rule(ct, rhs, lhs.aval, tuple(lc), tuple(rc), tuple(lb), tuple(rb), True, params), None]
    rule = _dot_transpose_typed if _plain_type(rhs.aval) is not None else _dot_transpose_operand
    return [None, rule(ct, lhs, rhs.aval, tuple(rc), tuple(lc), tuple(rb), tuple(lb), False, params)]


for _p in (R.reduce_p, R.reduce_prod_p, R.reduce_max_p, R.reduce_min_p, R.reduce_and_p, R.reduce_or_p, R.reduce_xor_p,
           R.argmax_p, R.argmin_p, So.sort_p, So.top_k_p, So.cumprod_p, So.cummax_p, So.cummin_p, So.cumlogsumexp_p):
    mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear in any operand")
