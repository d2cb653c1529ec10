"""Windowed reductions (pooling): ``reduce_window_sum``, ``_max``, ``_min``.

Padding and base dilation fill with the reduction's identity, so the padded
elements never win a max or add to a sum, which is XLA's semantics when the
init value is the identity (the only case the lax wrapper lowers to these).
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.primitive import first_weak
from ftrans.core.prims._base import (
    ANY,
    NUM,
    class_name,
    prim_type_error,
    prim_value_error,
    standard_primitive,
)
from ftrans.errors import FtransTypeError


def window_output_shape(name, shape, window_dimensions, window_strides, padding, base_dilation,
                        window_dilation) -> tuple[int, ...]:
    nd = len(shape)
    for what, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("padding", padding), ("base_dilation", base_dilation),
                    ("window_dilation", window_dilation)):
        if len(v) != nd:
            raise prim_value_error(name, f"{what} {tuple(v)} needs one entry per axis of shape {shape}")
    out = []
    for n, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                          base_dilation, window_dilation):
        if w < 1 or s < 1 or bd < 1 or wd < 1:
            raise FtransTypeError(f"{name}: window_dimensions, window_strides, base_dilation and window_dilation "
                                  f"must have every element be strictly positive; got {tuple(window_dimensions)}, "
                                  f"{tuple(window_strides)}, {tuple(base_dilation)}, {tuple(window_dilation)}")
        dilated = 0 if n == 0 else (n - 1) * bd + 1
        padded = dilated + lo + hi
        eff = (w - 1) * wd + 1
        out.append(0 if padded < eff else (padded - eff) // s + 1)
    return tuple(out)


def _shape_rule(name: str, allowed: frozenset):
    def rule(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        if x.dtype not in allowed:
            raise prim_type_error(name, [x], f"expects {class_name(allowed)} operands")
        return window_output_shape(name, x.shape, window_dimensions, window_strides, padding,
                                   base_dilation, window_dilation)

    return rule


def _identity(kind: str, dtype: np.dtype):
    if kind == "sum":
        return np.zeros((), dtype)
    if dtype == np.bool_:
        return np.asarray(kind == "min")
    if dtypes.is_float(dtype):
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    info = np.iinfo(dtype)
    return np.asarray(info.min if kind == "max" else info.max, dtype)


def _impl(kind: str):
    reducer = {"sum": np.sum, "max": np.max, "min": np.min}[kind]

    def impl(x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        out_shape = window_output_shape(kind, x.shape, window_dimensions, window_strides, padding,
                                        base_dilation, window_dilation)
        ident = _identity(kind, x.dtype)
        if 0 in out_shape:
            return np.zeros(out_shape, x.dtype)
        if x.ndim == 0:  # no window dimensions: every window is the element itself
            return x.copy()
        # Base dilation: spread the elements apart, identity in between.
        dil_shape = tuple(0 if n == 0 else (n - 1) * b + 1 for n, b in zip(x.shape, base_dilation))
        spread = np.full(dil_shape, ident, x.dtype)
        spread[tuple(slice(None, None, b) for b in base_dilation)] = x
        # Edge padding (negative padding crops).
        pads = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
        padded = np.pad(spread, pads, constant_values=ident)
        crop = tuple(slice(-lo if lo < 0 else 0, padded.shape[i] + hi if hi < 0 else None)
                     for i, (lo, hi) in enumerate(padding))
        padded = padded[crop]
        eff = tuple((w - 1) * wd + 1 for w, wd in zip(window_dimensions, window_dilation))
        views = np.lib.stride_tricks.sliding_window_view(padded, eff)
        nd = x.ndim
        views = views[tuple(slice(None, None, s) for s in window_strides)]
        views = views[(Ellipsis, *[slice(None, None, wd) for wd in window_dilation])]
        views = views[tuple(slice(0, n) for n in out_shape)]
        calc = np.float32 if x.dtype in (dtypes.bfloat16, dtypes.float16) and kind == "sum" else x.dtype
        out = reducer(views.astype(calc, copy=False), axis=tuple(range(nd, 2 * nd)))
        return np.asarray(out, dtype=x.dtype)

    return impl


reduce_window_sum_p = standard_primitive(
    "reduce_window_sum", _shape_rule("reduce_window_sum", NUM), lambda x, **p: x.dtype, _impl("sum"),
    weak_type_rule=first_weak,
)
reduce_window_max_p = standard_primitive(
    "reduce_window_max", _shape_rule("reduce_window_max", ANY), lambda x, **p: x.dtype, _impl("max"),
    weak_type_rule=first_weak,
)
reduce_window_min_p = standard_primitive(
    "reduce_window_min", _shape_rule("reduce_window_min", ANY), lambda x, **p: x.dtype, _impl("min"),
    weak_type_rule=first_weak,
)

__all__ = ["reduce_window_sum_p", "reduce_window_max_p", "reduce_window_min_p", "window_output_shape"]
