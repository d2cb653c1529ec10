"""JVP rules of the windowed reductions (pooling).

``reduce_window_sum`` is linear.  For ``reduce_window_max``/``_min`` JAX
passes, for each window, the tangent of the element the window selects (its
``select_and_gather_add``; on ties the first element of the window in
row-major order wins, which is what XLA's CPU reduction does).  ftrans has no
such primitive, so the rule spells it out with primitives it has: the
positions each window covers are a static function of the shapes and window
parameters, computed once with NumPy; the operand and its tangent are
gathered at those positions (padding reads the reduction's identity, whose
tangent is 0), ``argmax``/``argmin`` over each window picks the first extreme
element, and its tangent is taken.  This costs one gather of ``window size``
elements per output element, which is what pooling reads anyway.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims import windowed as W
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero, defjvp_linear, register_jvp

defjvp_linear(W.reduce_window_sum_p)


def window_positions(shape: tuple[int, ...], *, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation) -> np.ndarray:
    """Flat operand index of every element of every window: shape ``(*out_shape, window_size)``.

    Positions that fall on padding or between base-dilated elements hold
    ``prod(shape)``, one past the last element.  The construction mirrors the
    NumPy impl of the windowed primitives step by step.
    """
    n = int(np.prod(shape))
    out_shape = W.window_output_shape("reduce_window", shape, window_dimensions, window_strides, padding,
                                      base_dilation, window_dilation)
    size = int(np.prod(window_dimensions))
    if 0 in out_shape:
        return np.zeros((*out_shape, size), np.int64)
    pos = np.arange(n, dtype=np.int64).reshape(shape)
    dil_shape = tuple(0 if d == 0 else (d - 1) * b + 1 for d, b in zip(shape, base_dilation))
    spread = np.full(dil_shape, n, np.int64)
    spread[tuple(slice(None, None, b) for b in base_dilation)] = pos
    pads = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    padded = np.pad(spread, pads, constant_values=n)
    crop = tuple(slice(-lo if lo < 0 else 0, padded.shape[i] + hi if hi < 0 else None)
                 for i, (lo, hi) in enumerate(padding))
    padded = padded[crop]
    eff = tuple((w - 1) * wd + 1 for w, wd in zip(window_dimensions, window_dilation))
    views = np.lib.stride_tricks.sliding_window_view(padded, eff)
    views = views[tuple(slice(None, None, s) for s in window_strides)]
    views = views[(Ellipsis, *[slice(None, None, wd) for wd in window_dilation])]
    views = views[tuple(slice(0, d) for d in out_shape)]
    return np.ascontiguousarray(views).reshape(*out_shape, size)


def _take_flat(x_ext: Any, positions: Array) -> Any:
    """``x_ext[positions]`` for a rank-1 ``x_ext`` (one gather; positions are in bounds)."""
    dn = I.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    return I.gather_p.bind(x_ext, positions, dimension_numbers=dn, slice_sizes=(1,),
                           mode=I.GatherScatterMode.PROMISE_IN_BOUNDS, fill_value=None,
                           indices_are_sorted=False, unique_indices=False)


def _extend(x: Any, tail: Any) -> Any:
    """``x`` flattened, with one element ``tail`` appended (what padding positions read)."""
    n = int(np.prod(aval_of(x).shape))
    flat = S.reshape_p.bind(x, new_sizes=(n,), dimensions=None)
    return S.pad_p.bind(flat, tail, padding_config=((0, 1, 0),))


def _chooser_rule(prim, arg_prim, identity: float) -> None:
    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if type(t) is Zero or not dtypes.is_inexact(aval_of(out).dtype):
            return out, Zero.from_primal_value(out)
        aval = aval_of(x)
        pos = window_positions(tuple(aval.shape), **params)
        if pos.shape[-1] == 0 or 0 in pos.shape:
            return out, S.broadcast_in_dim_p.bind(Array._new(np.zeros((), aval.dtype), False),
                                                  shape=tuple(aval_of(out).shape), broadcast_dimensions=())
        idx_dtype = np.int32 if pos.size and pos.max() < 2**31 else np.int64
        positions = Array._new(pos[..., None].astype(idx_dtype), False)
        vals = _take_flat(_extend(x, Array._new(np.asarray(identity, aval.dtype), False)), positions)
        t_vals = _take_flat(_extend(t, Array._new(np.zeros((), aval.dtype), False)), positions)
        last = pos.ndim - 1
        which = arg_prim.bind(vals, axes=(last,), index_dtype=np.dtype(np.int32))
        one_hot = S.convert_element_type_p.bind(
            _eq_last(which, pos.shape), new_dtype=aval.dtype, weak_type=False)
        return out, R.reduce_sum_p.bind(E.mul_p.bind(t_vals, one_hot), axes=(last,))

    rule.__name__ = f"{prim.name}_jvp"


def _eq_last(which: Any, shape: tuple[int, ...]) -> Any:
    """One-hot over the last axis of ``shape``: ``iota == which`` (broadcast along that axis)."""
    last = len(shape) - 1
    iota = S.iota_p.bind(dtype=np.dtype(np.int32), shape=shape, dimension=last)
    full = S.broadcast_in_dim_p.bind(which, shape=shape, broadcast_dimensions=tuple(range(last)))
    return E.eq_p.bind(iota, full)


_chooser_rule(W.reduce_window_max_p, R.argmax_p, -np.inf)
_chooser_rule(W.reduce_window_min_p, R.argmin_p, np.inf)
