"""Batching rules of ``conv_general_dilated`` and ``fft``.

A convolution has one batch axis and one feature axis per operand, so a
``vmap`` axis is folded into one of them: a batched input into its batch
axis (or, with batch groups, inside each group), a batched kernel into its
output features (inside each feature/batch group), and when both are
batched, the vmap axis becomes extra feature (or batch) groups that pair
each input with its own kernel.  The result's folded axis is split back out.
``fft`` works on trailing axes, so the batch axis goes first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.primitive import abstract_eval
from ftrans.core.prims import convolution as C
from ftrans.core.prims import fft as F
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import moveaxis, not_mapped, register_batching
from ftrans.transforms.linear_rules.convolution import reshape_axis_into as into
from ftrans.transforms.linear_rules.convolution import reshape_axis_out_of as out_of


@register_batching(C.conv_general_dilated_p)
def _conv_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
    lhs, rhs = vals
    dl, dr = dims
    lspec, rspec, ospec = params["dimension_numbers"]
    fg, bg = params["feature_group_count"], params["batch_group_count"]
    bind = C.conv_general_dilated_p.bind
    if frame.size == 0:  # folding an empty axis into another loses the other's size: build zeros directly
        la, ra = aval_of(lhs), aval_of(rhs)
        lu = la.update(shape=tuple(s for k, s in enumerate(la.shape) if k != dl)) if dl is not not_mapped else la
        ru = ra.update(shape=tuple(s for k, s in enumerate(ra.shape) if k != dr)) if dr is not not_mapped else ra
        out = abstract_eval(C.conv_general_dilated_p, [lu, ru], params)
        zero = Array._new(np.zeros((), out.dtype), False)
        return S.broadcast_in_dim_p.bind(zero, shape=(0, *out.shape), broadcast_dimensions=()), 0
    if dl is not not_mapped and dr is not not_mapped:
        size = aval_of(lhs).shape[dl]
        if bg > 1:
            new_lhs = into(dl, lspec[0], lhs)
            p = dict(params, batch_group_count=bg * size)
        else:
            new_lhs = into(dl, lspec[1], lhs)
            p = dict(params, feature_group_count=fg * size)
        out = bind(new_lhs, into(dr, rspec[0], rhs), **p)
        return out_of(ospec[1], size, out), ospec[1]
    if dl is not not_mapped:
        size = aval_of(lhs).shape[dl]
        if bg == 1:
            out = bind(into(dl, lspec[0], lhs), rhs, **params)
            return out_of(ospec[0], size, out), ospec[0]
        new_lhs = out_of(lspec[0] + int(dl <= lspec[0]), bg, lhs)
        new_lhs = into(dl + int(lspec[0] < dl), lspec[0] + 1, new_lhs)
        new_lhs = into(lspec[0], lspec[0], new_lhs)
        out = bind(new_lhs, rhs, **params)
        return out_of(ospec[0], size, out), ospec[0]
    size = aval_of(rhs).shape[dr]
    if fg == 1 and bg == 1:
        out = bind(lhs, into(dr, rspec[0], rhs), **params)
        return out_of(ospec[1], size, out), ospec[1]
    groups = fg if fg > 1 else bg
    new_rhs = out_of(rspec[0] + int(dr <= rspec[0]), groups, rhs)
    new_rhs = into(dr + int(rspec[0] < dr), rspec[0] + 1, new_rhs)
    new_rhs = into(rspec[0], rspec[0], new_rhs)
    out = bind(lhs, new_rhs, **params)
    out = out_of(ospec[1], groups, out)
    out = out_of(ospec[1] + 1, size, out)
    out = into(ospec[1], ospec[1] + 1, out)
    return out, ospec[1]


@register_batching(F.fft_p)
def _fft_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
    (x,), (d,) = vals, dims
    return F.fft_p.bind(moveaxis(x, d, 0), **params), 0
