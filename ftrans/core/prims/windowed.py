"""Windowed reductions (pooling): ``reduce_window_sum``, ``_max``, ``_min``.

Padding and base dilation fill with the reduction's identity, so the padded
elements never win a max or add to a sum, which is XLA's semantics when the
init value is the identity (the only case the lax wrapper lowers to these).
"""

from __future__ import annotations

from typing import Any

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
from ftrans.core.shape_poly import is_symbolic_dim, max_dim
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
        if is_symbolic_dim(padded) or is_symbolic_dim(eff):  # shape polymorphism: JAX's max((padded - window) // stride + 1, 0)
            out.append(max_dim((padded - eff) // s + 1, 0))
            continue
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
    if dtypes.is_inexact(dtype):  # complex: (-+inf, 0), as JAX's identity
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    info = dtypes.iinfo(dtype)
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



# ---------------------------------------------------------------- reduce_window with a user computation
#
# ``reduce_window``  ``(*operands, *init_values)`` with ``jaxpr`` (a ClosedJaxpr over 2n scalars -- n
# accumulators, then n elements -- returning n scalars) and the window parameters of the monoid windowed
# reductions.  JAX's ``reduce_window_p``: what ``lax.reduce_window`` binds for several operands, a
# computation that is not add/max/min, or a sum whose init value is not a static 0.  Each window folds the
# init value with the operand elements it covers; padding and base-dilation holes are skipped, which is
# what XLA computes (so a sum from init 1 adds the 1 once per window, whatever the padding).

from ftrans.core.avals import ShapedArray  # noqa: E402
from ftrans.core.primitive import Primitive  # noqa: E402

reduce_window_p = Primitive("reduce_window", multiple_results=True, higher_order=True)


def _reduce_window_check(avals: tuple, jaxpr, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation) -> tuple[int, ...]:
    n = len(avals) // 2
    if n == 0 or len(avals) != 2 * n:
        raise prim_type_error("reduce_window", list(avals), "takes n operands followed by n init values (n >= 1)")
    ops, inits = list(avals[:n]), list(avals[n:])
    for o in ops:
        if o.shape != ops[0].shape:
            raise prim_type_error("reduce_window", ops, "operands must all have the same shape")
    for o, i in zip(ops, inits):
        if i.shape != () or i.dtype != o.dtype:
            raise prim_type_error("reduce_window", [o, i], "each init value must be a scalar of its operand's dtype")
    ins, outs = jaxpr.in_avals, jaxpr.out_avals
    want = [o.dtype for o in ops]
    if (len(ins) != 2 * n or len(outs) != n
            or any(a.shape != () or a.dtype != w for a, w in zip(ins, want + want))
            or any(a.shape != () or a.dtype != w for a, w in zip(outs, want))):
        sig = ", ".join(a.str_short() for a in ins) + " -> " + ", ".join(a.str_short() for a in outs)
        raise prim_type_error(
            "reduce_window", list(avals),
            f"the computation must map {2 * n} scalars (accumulators, then elements) of the operands' dtypes "
            f"to {n}, but it is ({sig})",
        )
    return window_output_shape("reduce_window", ops[0].shape, window_dimensions, window_strides, padding,
                               base_dilation, window_dilation)


@reduce_window_p.def_abstract_eval
def _reduce_window_abstract_eval(*avals, jaxpr, window_dimensions, window_strides, padding, base_dilation,
                                 window_dilation):
    shape = _reduce_window_check(avals, jaxpr, window_dimensions, window_strides, padding, base_dilation,
                                 window_dilation)
    n = len(avals) // 2
    return [ShapedArray(shape, o.dtype, o.weak_type and i.weak_type) for o, i in zip(avals[:n], avals[n:])]


@reduce_window_p.def_weak_type
def _reduce_window_weak(weaks: tuple, **params) -> tuple:
    n = len(weaks) // 2
    return tuple(a and b for a, b in zip(weaks[:n], weaks[n:]))


def _window_elements(x: np.ndarray, out_shape, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per window position (row-major over the window): an ``out_shape`` array of the elements there and a
    mask of which of them are operand elements (not padding or base-dilation holes)."""
    def spread(a: np.ndarray, fill: Any) -> np.ndarray:
        dil_shape = tuple(0 if n == 0 else (n - 1) * b + 1 for n, b in zip(a.shape, base_dilation))
        out = np.full(dil_shape, fill, a.dtype)
        out[tuple(slice(None, None, b) for b in base_dilation)] = a
        pads = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
        out = np.pad(out, pads, constant_values=fill) if pads else out
        crop = tuple(slice(-lo if lo < 0 else 0, out.shape[i] + hi if hi < 0 else None)
                     for i, (lo, hi) in enumerate(padding))
        return out[crop]

    padded = spread(x, np.zeros((), x.dtype))
    valid = spread(np.ones(x.shape, bool), False)
    out = []
    for w in np.ndindex(*window_dimensions):
        sl = tuple(slice(k * wd, k * wd + (m - 1) * s + 1, s)
                   for k, wd, s, m in zip(w, window_dilation, window_strides, out_shape))
        out.append((padded[sl], valid[sl]))
    return out


@reduce_window_p.def_impl
def _reduce_window_impl(*vals, jaxpr, window_dimensions, window_strides, padding, base_dilation,
                        window_dilation):
    """A fold from the init values over each window's elements in row-major order: vectorised over the
    output positions when the computation is elementwise, position by position otherwise."""
    from ftrans.core.array import Array
    from ftrans.core.jaxpr_api import eval_jaxpr
    from ftrans.core.prims.reductions import _elementwise_body

    n = len(vals) // 2
    ops = [np.asarray(v) for v in vals[:n]]
    inits = [np.asarray(v) for v in vals[n:]]
    out_shape = window_output_shape("reduce_window", ops[0].shape, window_dimensions, window_strides, padding,
                                    base_dilation, window_dilation)
    if 0 in out_shape:
        return [np.zeros(out_shape, o.dtype) for o in ops]
    elems = [_window_elements(o, out_shape, window_dimensions, window_strides, padding, base_dilation,
                              window_dilation) for o in ops]
    k = len(elems[0])
    run = lambda *a: eval_jaxpr(jaxpr.jaxpr, list(jaxpr.consts), *a)  # noqa: E731

    def wrap(x):
        return Array._new(np.asarray(x), False)

    if _elementwise_body(jaxpr):
        acc = [np.broadcast_to(i, out_shape).copy() for i in inits]
        for j in range(k):
            mask = elems[0][j][1]
            if not mask.any():
                continue
            res = run(*[wrap(a) for a in acc], *[wrap(e[j][0]) for e in elems])
            acc = [np.where(mask, np.asarray(r, o.dtype), a) for r, o, a in zip(res, ops, acc)]
        return [np.array(a, dtype=o.dtype) for a, o in zip(acc, ops)]
    outs = [np.empty(out_shape, o.dtype) for o in ops]
    for idx in np.ndindex(*out_shape):
        acc = [wrap(i) for i in inits]
        for j in range(k):
            if elems[0][j][1][idx]:
                acc = run(*acc, *[wrap(e[j][0][idx]) for e in elems])
        for o, a in zip(outs, acc):
            o[idx] = np.asarray(a)
    return outs


__all__ = ["reduce_window_sum_p", "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
           "window_output_shape"]


# Sharding in types (core/sharding_rules.py): the operand's layout, as JAX's
from ftrans.core import sharding_rules as _sr  # noqa: E402

for _p in (reduce_window_sum_p, reduce_window_max_p, reduce_window_min_p, reduce_window_p):
    _p.sharding_rule = _sr.windowed(_p.name)
