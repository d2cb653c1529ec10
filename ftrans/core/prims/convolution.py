"""Convolution: ``conv_general_dilated``, XLA's general N-d convolution.

Parameters follow XLA (and JAX's ``lax``): explicit ``(low, high)`` padding
per spatial dimension, window strides, lhs (input, "transposed conv") and rhs
(kernel, "atrous") dilation, ``ConvDimensionNumbers`` giving the layout of the
three arrays as ``(batch, feature, *spatial)`` axis permutations, feature
grouping (depthwise convolutions) and batch grouping (the kernel gradient of a
grouped convolution).

The NumPy impl is im2col in a channels-last layout: the (dilated, padded)
input is viewed as sliding windows with ``sliding_window_view`` (no copy),
strided and dilated by slicing, gathered once into a ``(positions,
in_features * window)`` matrix per group and multiplied by the kernel with one
``matmul`` (a single 2-D BLAS product when there are no groups).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ftrans.core import dtypes
from ftrans.core.prims._base import ANY, prim_type_error, prim_value_error, standard_primitive, types_of
from ftrans.core.shape_poly import is_symbolic_dim, max_dim
from ftrans.errors import FtransShapeError, FtransValueError


class ConvDimensionNumbers(NamedTuple):
    """Layout of a convolution's operands: each spec is ``(batch/out-feature, feature/in-feature, *spatial)``.

    ``lhs_spec`` and ``out_spec`` start with the batch then the feature axis;
    ``rhs_spec`` starts with the output-feature then the input-feature axis.
    The remaining entries are the spatial axes, in matching order.
    """

    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


_NAME = "conv_general_dilated"


def _shape_error(lhs, rhs, msg: str):
    return FtransValueError(f"{_NAME}: {msg} (operands: {types_of([lhs, rhs])})")


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def conv_output_shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                      feature_group_count, batch_group_count, **_: Any) -> tuple[int, ...]:
    """The result shape, with an error naming the dimension that does not fit."""
    lspec, rspec, ospec = dimension_numbers
    if lhs.ndim != rhs.ndim:  # JAX raises ValueError here: FtransShapeError is both TypeError and ValueError
        raise FtransShapeError(f"{_NAME}: lhs and rhs must have the same number of dimensions, got {lhs.ndim} and "
                               f"{rhs.ndim} (operands: {types_of([lhs, rhs])})")
    if lhs.ndim < 2:
        raise prim_type_error(_NAME, [lhs, rhs], "operands need at least a batch and a feature dimension")
    for what, spec in (("lhs_spec", lspec), ("rhs_spec", rspec), ("out_spec", ospec)):
        if sorted(spec) != list(range(lhs.ndim)):
            raise prim_value_error(_NAME, f"dimension_numbers.{what} {tuple(spec)} must be a permutation of "
                                          f"range({lhs.ndim})")
    nsp = lhs.ndim - 2
    for what, v in (("window_strides", window_strides), ("padding", padding), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if len(v) != nsp:
            raise prim_value_error(_NAME, f"{what} {tuple(v)} needs one entry per spatial dimension ({nsp})")
    for what, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if any(int(s) < 1 for s in v):
            raise prim_value_error(_NAME, f"{what} must be positive, got {tuple(v)}")
    fg, bg = int(feature_group_count), int(batch_group_count)
    if fg < 1 or bg < 1:
        raise prim_value_error(_NAME, f"feature_group_count ({fg}) and batch_group_count ({bg}) must be positive")
    if fg > 1 and bg > 1:
        raise prim_value_error(_NAME, f"at most one of feature_group_count ({fg}) and batch_group_count ({bg}) "
                                      "may be greater than 1")
    n, c = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    o, i = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    if c % fg:
        raise _shape_error(lhs, rhs, f"feature_group_count {fg} must divide the lhs feature dimension "
                                                 f"(axis {lspec[1]}, size {c})")
    if c // fg != i:
        raise _shape_error(
            lhs, rhs,
            f"the lhs feature dimension (axis {lspec[1]}, size {c})"
            + (f" divided by feature_group_count {fg}" if fg > 1 else "")
            + f" must equal the rhs input-feature dimension (axis {rspec[1]}, size {i})")
    if o % fg:
        raise _shape_error(lhs, rhs, f"the rhs output-feature dimension (axis {rspec[0]}, size {o}) "
                                                 f"must be a multiple of feature_group_count {fg}")
    if n % bg:
        raise _shape_error(lhs, rhs, f"batch_group_count {bg} must divide the lhs batch dimension "
                                                 f"(axis {lspec[0]}, size {n})")
    if o % bg:
        raise _shape_error(lhs, rhs, f"the rhs output-feature dimension (axis {rspec[0]}, size {o}) "
                                                 f"must be a multiple of batch_group_count {bg}")
    spatial = []
    for k in range(nsp):
        la, ra = lspec[2 + k], rspec[2 + k]
        size = _dilate(lhs.shape[la], lhs_dilation[k]) + padding[k][0] + padding[k][1]
        win = _dilate(rhs.shape[ra], rhs_dilation[k])
        if is_symbolic_dim(size) or is_symbolic_dim(win):  # shape polymorphism: JAX's max(0, ...)
            spatial.append(max_dim((size - win) // int(window_strides[k]) + 1, 0))
            continue
        if size < 0:
            raise _shape_error(
                lhs, rhs,
                f"negative padding {tuple(padding[k])} is larger than lhs spatial dimension {k} "
                f"(axis {la}, size {lhs.shape[la]})")
        if win == 0 or size < win:
            spatial.append(0)
        else:
            spatial.append((size - win) // int(window_strides[k]) + 1)
    canon = (n // bg, o, *spatial)
    out = [0] * lhs.ndim
    for pos, ax in enumerate(ospec):
        out[ax] = canon[pos]
    return tuple(out)


def _conv_dtype(lhs, rhs, *, preferred_element_type=None, **_: Any) -> np.dtype:
    if lhs.dtype != rhs.dtype:
        raise prim_type_error(_NAME, [lhs, rhs], "operands must have the same dtype "
                                                 "(lax.conv_general_dilated promotes for you)")
    if lhs.dtype not in ANY:
        raise prim_type_error(_NAME, [lhs, rhs], "expects numeric or bool operands")
    pet = preferred_element_type
    if pet is None or pet == lhs.dtype:
        return lhs.dtype
    if not isinstance(pet, np.dtype) or pet not in ANY:
        raise prim_type_error(_NAME, [lhs, rhs], f"preferred_element_type must be a supported dtype, got {pet!r}")
    # JAX's combinations: integral -> integral or floating, floating -> floating, complex -> complex.
    int_to_float = lhs.dtype.kind in "iu" and dtypes.is_float(pet)
    if not int_to_float and ((pet.kind == "c") != (lhs.dtype.kind == "c")
                             or dtypes.is_float(pet) != dtypes.is_float(lhs.dtype)):
        raise prim_type_error(_NAME, [lhs, rhs], f"preferred_element_type {pet} and the operand dtype {lhs.dtype} "
                                                 "must both be integral (or integral and floating-point), both "
                                                 "floating-point or both complex")
    if pet.itemsize < lhs.dtype.itemsize:
        raise prim_type_error(_NAME, [lhs, rhs], f"preferred_element_type {pet} must not be narrower than the "
                                                 f"operand dtype {lhs.dtype}")
    return pet


def _conv_weak(weaks, *, preferred_element_type=None, **_: Any) -> bool:
    return preferred_element_type is None and all(weaks)


def _compute_dtype(out_dtype: np.dtype) -> np.dtype:
    if out_dtype == np.bool_:
        return np.dtype(np.int32)
    return np.dtype(np.float32) if out_dtype in (dtypes.bfloat16, dtypes.float16) else np.dtype(out_dtype)


def conv_impl(lhs: np.ndarray, rhs: np.ndarray, *, window_strides, padding, lhs_dilation, rhs_dilation,
              dimension_numbers, feature_group_count, batch_group_count, precision=None,
              preferred_element_type=None) -> np.ndarray:
    lspec, rspec, ospec = dimension_numbers
    out_dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    calc = _compute_dtype(out_dtype)
    nsp = lhs.ndim - 2
    sp = tuple(range(1, 1 + nsp))
    # Channels-last working layout: x is (N, *spatial, C), the kernel (O, I, *window).
    x = np.transpose(lhs, (lspec[0], *lspec[2:], lspec[1])).astype(calc, copy=False)
    w = np.transpose(rhs, rspec).astype(calc, copy=False)
    n, c = x.shape[0], x.shape[-1]
    o, i = w.shape[:2]
    fg, bg = int(feature_group_count), int(batch_group_count)
    ksz = w.shape[2:]
    out_shape = conv_output_shape(
        _Shape(lhs.shape), _Shape(rhs.shape), window_strides=window_strides, padding=padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
        feature_group_count=fg, batch_group_count=bg)
    last_order = (ospec[0], *ospec[2:], ospec[1])          # the output's axes in channels-last order
    if 0 in out_shape or math.prod(ksz) == 0 or i == 0:
        res = np.zeros(tuple(out_shape[a] for a in last_order), calc)
    else:
        if any(d > 1 for d in lhs_dilation):
            spread = np.zeros((n, *(_dilate(s, d) for s, d in zip(x.shape[1:-1], lhs_dilation)), c), calc)
            spread[(slice(None), *(slice(None, None, d) for d in lhs_dilation))] = x
            x = spread
        pads = [(0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding] + [(0, 0)]
        if any(p != (0, 0) for p in pads):
            x = np.pad(x, pads)
        if any(lo < 0 or hi < 0 for lo, hi in padding):
            x = x[(slice(None),
                   *(slice(-lo if lo < 0 else 0, x.shape[1 + k] + hi if hi < 0 else None)
                     for k, (lo, hi) in enumerate(padding)))]
        eff = tuple(_dilate(k, d) for k, d in zip(ksz, rhs_dilation))
        views = np.lib.stride_tricks.sliding_window_view(x, eff, axis=sp)     # (N, *out, C, *eff)
        views = views[(slice(None), *(slice(None, None, s) for s in window_strides), slice(None),
                       *(slice(None, None, d) for d in rhs_dilation))]
        osp = views.shape[1:1 + nsp]
        p, kk = math.prod(osp), math.prod(ksz)
        nb, ig, og = n // bg, c // fg, o // (fg * bg)
        wk = w.reshape(bg, fg, og, ig, *ksz)
        wm = np.transpose(wk, (0, 1, *range(3, 4 + nsp), 2)).reshape(bg, fg, ig * kk, og)
        with np.errstate(all="ignore"):
            if bg == 1 and fg == 1:   # the common case: one 2-D matrix product
                prod = (views.reshape(nb * p, ig * kk) @ wm[0, 0]).reshape(1, 1, nb * p, og)
            else:
                v = views.reshape(bg, nb, *osp, fg, ig, *ksz)
                perm = (0, 2 + nsp, 1, *range(2, 2 + nsp), 3 + nsp, *range(4 + nsp, 4 + 2 * nsp))
                cols = np.transpose(v, perm).reshape(bg, fg, nb * p, ig * kk)
                prod = np.matmul(cols, wm)                                      # (bg, fg, nb*P, og)
        prod = prod.reshape(bg, fg, nb, *osp, og)
        res = np.transpose(prod, (2, *range(3, 3 + nsp), 0, 1, 3 + nsp)).reshape(nb, *osp, o)
    out = np.transpose(res, np.argsort(last_order))
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


class _Shape:
    """Just enough of an aval for the shape rule on concrete arrays."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.dtype = None


conv_general_dilated_p = standard_primitive(_NAME, conv_output_shape, _conv_dtype, conv_impl,
                                            weak_type_rule=_conv_weak)

__all__ = ["conv_general_dilated_p", "ConvDimensionNumbers", "conv_output_shape"]

# Sharding in types (core/sharding_rules.py): JAX's rule
from ftrans.core import sharding_rules as _sr  # noqa: E402

conv_general_dilated_p.sharding_rule = _sr.conv
