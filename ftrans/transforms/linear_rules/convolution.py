"""Transpose rules of ``conv_general_dilated`` and ``fft``.

Convolution, ignoring space, is the contraction ``[n, c] x [c, o] -> [n, o]``
(batch ``n``, input features ``c``, output features ``o``); like a matrix
product, the cotangent of one operand is a contraction of the output
cotangent with the other operand, and each is again a convolution:

* input: the cotangent convolved with the spatially reversed kernel, its
  ``o`` and ``c`` roles swapped; the forward strides become lhs dilation, the
  forward lhs dilation becomes the stride, and the padding is whatever makes
  every input position see each window that covered it.  Feature groups move
  from the kernel's input to its output features; batch groups become feature
  groups whose results are moved back into the batch.
* kernel: the input convolved with the cotangent, with the batch axis as the
  contracted (feature) axis; the forward strides become the kernel's dilation
  and the forward kernel dilation the stride.  Feature groups become batch
  groups and batch groups feature groups.

``fft``: the DFT matrix is symmetric, so FFT and IFFT are their own
transposes.  RFFT is an FFT of the real input followed by truncation, so its
transpose zero-pads the cotangent to full length, applies FFT and keeps the
real part.  IRFFT's transpose is an RFFT, weighted by the multiplicity of each
half-spectrum entry (1 for DC and Nyquist, 2 otherwise) and scaled by 1/n,
then conjugated (JAX's convention for complex cotangents).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.prims import convolution as C
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import fft as F
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.transpose import is_undefined, register_transpose


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def reshape_axis_into(src: int, dst: int, x: Any) -> Any:
    """Merge axis ``src`` into axis ``dst`` (numbered without ``src``), ``src`` as the major part."""
    shape = list(aval_of(x).shape)
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    if perm != list(range(len(shape))):
        x = S.transpose_p.bind(x, permutation=tuple(perm))
    new = [shape[i] for i in perm]
    new[dst:dst + 2] = [new[dst] * new[dst + 1]]
    return S.reshape_p.bind(x, new_sizes=tuple(new), dimensions=None)


def reshape_axis_out_of(src: int, size1: int, x: Any) -> Any:
    """Split axis ``src`` into ``(size1, rest)``."""
    shape = list(aval_of(x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return S.reshape_p.bind(x, new_sizes=tuple(shape), dimensions=None)


def _swap(spec: tuple) -> tuple:
    return (spec[1], spec[0], *spec[2:])


def _convert(x: Any, aval: Any) -> Any:
    if aval_of(x).dtype != aval.dtype:
        x = S.convert_element_type_p.bind(x, new_dtype=aval.dtype, weak_type=False)
    return x


def _transpose_lhs(ct, lhs_aval, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, precision, preferred_element_type):
    lspec, rspec, ospec = dimension_numbers
    rhs_shape = tuple(aval_of(rhs).shape)
    fg, bg = feature_group_count, batch_group_count
    if fg > 1:
        rhs = reshape_axis_into(rspec[0], rspec[1], reshape_axis_out_of(rspec[0], fg, rhs))
    elif bg > 1:
        rhs = reshape_axis_into(rspec[0], rspec[1], reshape_axis_out_of(rspec[0], bg, rhs))
        fg = bg
    ct_shape = tuple(aval_of(ct).shape)
    pads = []
    for k in range(len(lspec) - 2):
        lhs_d = _dilate(lhs_aval.shape[lspec[2 + k]], lhs_dilation[k])
        rhs_d = _dilate(rhs_shape[rspec[2 + k]], rhs_dilation[k])
        out_d = _dilate(ct_shape[ospec[2 + k]], window_strides[k])
        before = rhs_d - padding[k][0] - 1
        pads.append((before, lhs_d + rhs_d - 1 - out_d - before))
    rev = S.rev_p.bind(rhs, dimensions=tuple(rspec[2:]))
    rev = _convert(rev, aval_of(ct))
    out = C.conv_general_dilated_p.bind(
        ct, rev, window_strides=tuple(lhs_dilation), padding=tuple(pads), lhs_dilation=tuple(window_strides),
        rhs_dilation=tuple(rhs_dilation), dimension_numbers=C.ConvDimensionNumbers(ospec, _swap(rspec), lspec),
        feature_group_count=fg, batch_group_count=1, precision=precision,
        preferred_element_type=preferred_element_type)
    out = _convert(out, lhs_aval)
    if bg > 1:
        out = reshape_axis_into(lspec[1], lspec[0], reshape_axis_out_of(lspec[1], bg, out))
    return out


def _transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count, precision, preferred_element_type):
    lspec, rspec, ospec = dimension_numbers
    lhs_shape = tuple(aval_of(lhs).shape)
    ct_shape = tuple(aval_of(ct).shape)
    fg, bg = feature_group_count, batch_group_count
    if bg > 1:
        fg, bg = bg, 1
    elif fg > 1:
        fg, bg = 1, fg
    pads = []
    for k in range(len(lspec) - 2):
        lhs_d = _dilate(lhs_shape[lspec[2 + k]], lhs_dilation[k])
        rhs_d = _dilate(rhs_aval.shape[rspec[2 + k]], rhs_dilation[k])
        out_d = _dilate(ct_shape[ospec[2 + k]], window_strides[k])
        lo = padding[k][0]
        pads.append((lo, out_d - lhs_d + rhs_d - lo - 1))
    lhs = _convert(lhs, aval_of(ct))
    out = C.conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=tuple(pads), lhs_dilation=tuple(lhs_dilation),
        rhs_dilation=tuple(window_strides),
        dimension_numbers=C.ConvDimensionNumbers(_swap(lspec), _swap(ospec), _swap(rspec)),
        feature_group_count=fg, batch_group_count=bg, precision=precision,
        preferred_element_type=preferred_element_type)
    return _convert(out, rhs_aval)


@register_transpose(C.conv_general_dilated_p)
def _conv_t(ct: Any, lhs: Any, rhs: Any, **params: Any) -> list:
    if is_undefined(lhs) and is_undefined(rhs):
        raise NotImplementedError(
            "transpose of `conv_general_dilated` with both operands linear: a product of two linear values is "
            "not linear (linear_transpose needs a function linear in its arguments)")
    if is_undefined(lhs):
        return [_transpose_lhs(ct, lhs.aval, rhs, **params), None]
    if 0 in aval_of(ct).shape:
        from ftrans.transforms.linear_rules._util import zeros
        return [None, zeros(rhs.aval)]
    return [None, _transpose_rhs(ct, lhs, rhs.aval, **params)]


@register_transpose(F.fft_p)
def _fft_t(ct: Any, x: Any, *, fft_type: Any, fft_lengths: tuple) -> list:
    lens = tuple(int(n) for n in fft_lengths)
    if fft_type in (F.FftType.FFT, F.FftType.IFFT):
        return [F.fft_p.bind(ct, fft_type=fft_type, fft_lengths=lens)]
    if fft_type == F.FftType.RFFT:
        ct_aval = aval_of(ct)
        nd = len(ct_aval.shape)
        extra = lens[-1] - ct_aval.shape[-1]
        zero = Array._new(np.zeros((), ct_aval.dtype), False)
        full = S.pad_p.bind(ct, zero, padding_config=((0, 0, 0),) * (nd - 1) + ((0, extra, 0),))
        return [E.real_p.bind(F.fft_p.bind(full, fft_type=F.FftType.FFT, fft_lengths=lens))]
    y = F.fft_p.bind(ct, fft_type=F.FftType.RFFT, fft_lengths=lens)
    m = aval_of(y).shape[-1]
    weights = np.full((m,), 2.0 / math.prod(lens), np.dtype(aval_of(ct).dtype))
    weights[0] = 1.0 / math.prod(lens)
    if lens[-1] % 2 == 0:
        weights[-1] = 1.0 / math.prod(lens)
    w = Array._new(weights.astype(aval_of(y).dtype), False)
    w = S.broadcast_in_dim_p.bind(w, shape=tuple(aval_of(y).shape), broadcast_dimensions=(len(aval_of(y).shape) - 1,))
    return [E.conj_p.bind(E.mul_p.bind(y, w))]
