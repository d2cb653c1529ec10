"""``lax`` convolutions (``conv_general_dilated`` and its wrappers) and ``lax.fft``."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.operands import as_operand, check_arraylike, dtype_weak
from ftrans.core.prims import convolution as C
from ftrans.core.prims import fft as F
from ftrans.core.prims import structural as S
from ftrans.core.prims.convolution import ConvDimensionNumbers
from ftrans.core.prims.fft import FftType
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax import _ops
from ftrans.lax._ops import Precision, canonicalize_precision
from ftrans.lax._windowed import padtype_to_pads

__all__ = ["Precision", "ConvDimensionNumbers", "conv_general_dilated", "conv", "conv_with_general_padding",
           "conv_transpose", "conv_dimension_numbers", "conv_general_permutations",
           "conv_general_dilated_patches", "conv_general_dilated_local", "conv_general_shape_tuple", "conv_transpose_shape_tuple", "FftType", "fft"]

def conv_general_permutations(dimension_numbers: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """The ``(batch, feature, *spatial)`` axis orders of the three layout strings."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for k, (a, b) in enumerate(pairs):
        spec = dimension_numbers[k]
        if not spec.count(a) == spec.count(b) == 1:
            raise FtransTypeError(f"convolution dimension_numbers[{k}] must contain the characters '{a}' and "
                                  f"'{b}' exactly once, got {spec!r}")
        if len(spec) != len(set(spec)):
            raise FtransTypeError(f"convolution dimension_numbers[{k}] cannot have duplicate characters, "
                                  f"got {spec!r}")
    if not (set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}):
        raise FtransTypeError(f"convolution dimension_numbers elements must each have the same set of spatial "
                              f"characters, got {tuple(dimension_numbers)}")

    def perm(spec: str, pair: tuple[str, str]) -> tuple[int, ...]:
        spatial = [i for i, ch in enumerate(spec) if ch not in pair]
        if spec is not rhs_spec:
            spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1]), *spatial)

    return tuple(perm(s, p) for s, p in zip(dimension_numbers, pairs))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, three layout strings, or ConvDimensionNumbers) as ConvDimensionNumbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if type(dimension_numbers).__name__ == "ConvDimensionNumbers":  # JAX's own namedtuple
        return ConvDimensionNumbers(*(tuple(int(a) for a in s) for s in dimension_numbers))
    if len(lhs_shape) != len(rhs_shape):
        raise FtransTypeError(f"convolution requires lhs and rhs ndim to be equal, got {len(lhs_shape)} "
                              f"(lhs shape {tuple(lhs_shape)}) and {len(rhs_shape)} (rhs shape {tuple(rhs_shape)})")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)):
        raise FtransTypeError(f"convolution dimension_numbers must be a tuple/list of three strings, a "
                              f"ConvDimensionNumbers or None, got {type(dimension_numbers).__name__}")
    if len(dimension_numbers) != 3:
        raise FtransTypeError(f"convolution dimension_numbers list/tuple must have length 3, got "
                              f"{len(dimension_numbers)}")
    if not all(isinstance(s, str) for s in dimension_numbers):
        if all(isinstance(s, (tuple, list)) for s in dimension_numbers):
            return ConvDimensionNumbers(*(tuple(int(a) for a in s) for s in dimension_numbers))
        raise FtransTypeError(f"convolution dimension_numbers elements must be strings, got "
                              f"{tuple(type(s).__name__ for s in dimension_numbers)}")
    for k, spec in enumerate(dimension_numbers):
        if len(spec) != len(lhs_shape):
            raise FtransTypeError(f"convolution dimension_numbers[{k}] {spec!r} must have one character per "
                                  f"dimension of lhs and rhs (shapes {tuple(lhs_shape)} and {tuple(rhs_shape)})")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def _operands(name: str, lhs: Any, rhs: Any) -> tuple[Any, Any]:
    check_arraylike(f"lax.{name}", lhs, rhs)
    a, b = _ops._operands(name, (lhs, rhs))
    da, db = dtype_weak(a)[0], dtype_weak(b)[0]
    if da != db:
        raise FtransTypeError(f"lax.{name} requires arguments to have the same dtypes, got {da}, {db} "
                              "(convert one with lax.convert_element_type)")
    return a, b


def _ints(name: str, what: str, v: Any, n: int) -> tuple[int, ...]:
    try:
        out = tuple(operator.index(x) for x in v)
    except TypeError:
        raise FtransTypeError(f"lax.{name}: {what} must be a sequence of integers, got {v!r}") from None
    if len(out) != n:
        raise FtransValueError(f"lax.{name}: {what} {out} needs one entry per spatial dimension ({n})")
    return out


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None, *,
                         out_sharding: Any = None) -> Any:
    """General N-d convolution with strides, padding, dilations, layouts and groups (XLA's ``ConvGeneralDilated``).

    ``padding`` is ``'VALID'``, ``'SAME'``, ``'SAME_LOWER'`` or one ``(low, high)``
    pair per spatial dimension; ``dimension_numbers`` is None (``NCHW``/``OIHW``),
    three layout strings such as ``('NHWC', 'HWIO', 'NHWC')`` or a
    :class:`ConvDimensionNumbers`.
    """
    if out_sharding is not None:  # the convolution laid out, and over Explicit axes typed, as given (as JAX's)
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("conv_general_dilated", out_sharding, lambda: conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
            batch_group_count, precision, preferred_element_type), (lhs, rhs))
    name = "conv_general_dilated"
    a, b = _operands(name, lhs, rhs)
    ls, rs = tuple(a.shape), tuple(b.shape)
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    nsp = len(ls) - 2
    if nsp < 0:
        raise FtransTypeError(f"lax.{name}: operands need a batch and a feature dimension, got shapes {ls} and {rs}")
    strides = _ints(name, "window_strides", window_strides, nsp)
    ld = (1,) * nsp if lhs_dilation is None else _ints(name, "lhs_dilation", lhs_dilation, nsp)
    rd = (1,) * nsp if rhs_dilation is None else _ints(name, "rhs_dilation", rhs_dilation, nsp)
    if isinstance(padding, str):
        if any(d != 1 for d in ld):
            raise FtransValueError(f"lax.{name}: string padding {padding!r} is not implemented with lhs_dilation "
                                   f"{ld}; give explicit (low, high) pairs or use lax.conv_transpose")
        in_sp = [ls[i] for i in dn.lhs_spec[2:]]
        win = [0 if rs[i] == 0 else (rs[i] - 1) * d + 1 for i, d in zip(dn.rhs_spec[2:], rd)]
        pads = tuple(tuple(p) for p in padtype_to_pads(in_sp, win, strides, padding))
    else:
        try:
            pads = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
        except (TypeError, ValueError):
            raise FtransValueError(f"lax.{name}: padding must be a string or a sequence of (low, high) pairs, "
                                   f"got {padding!r}") from None
        if len(pads) != nsp:
            raise FtransValueError(f"lax.{name}: padding {pads} needs one (low, high) pair per spatial dimension "
                                   f"({nsp})")
    pref = None if preferred_element_type is None else dtypes.requested(preferred_element_type,
                                                                        "conv_general_dilated")
    return _ops._bind(C.conv_general_dilated_p, a, b, window_strides=strides, padding=pads, lhs_dilation=ld,
                      rhs_dilation=rd, dimension_numbers=dn, feature_group_count=operator.index(feature_group_count),
                      batch_group_count=operator.index(batch_group_count),
                      precision=canonicalize_precision(name, precision), preferred_element_type=pref)


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Any:
    """Convolution in the ``NCHW``/``OIHW`` layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Convolution in the ``NCHW``/``OIHW`` layout with padding and dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    elif isinstance(padding, tuple):
        los = tuple(k - p - 1 for p in padding)
        lo, total = los[0], sum(los)
    else:
        raise FtransValueError(f"lax.conv_transpose: invalid padding {padding!r}; use 'SAME', 'VALID' or pairs")
    return lo, total - lo


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Any:
    """The fractionally strided ("transposed") convolution, laid out as Keras's ``Conv2DTranspose``.

    Default layouts are TensorFlow's (``NHWC``/``HWIO``); ``transpose_kernel``
    flips the kernel spatially and swaps its feature axes (the gradient of a
    forward convolution with the same kernel).
    """
    check_arraylike("lax.conv_transpose", lhs, rhs)
    lhs, rhs = as_operand(lhs), as_operand(rhs)
    nd = len(lhs.shape)
    if len(rhs.shape) != nd or nd < 2:
        raise FtransTypeError(f"lax.conv_transpose: lhs and rhs need the same rank >= 2, got shapes "
                              f"{tuple(lhs.shape)} and {tuple(rhs.shape)}")
    if dimension_numbers is None:
        defaults = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                    5: ("NHWDC", "HWDIO", "NHWDC")}
        if nd not in defaults:
            raise FtransValueError(f"lax.conv_transpose: no default dimension_numbers for rank {nd}; pass them")
        dimension_numbers = defaults[nd]
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    ksp = [rhs.shape[i] for i in dn.rhs_spec[2:]]
    rd = (1,) * (nd - 2) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        eff = [0 if k == 0 else (k - 1) * r + 1 for k, r in zip(ksp, rd)]
        rep = [padding] * len(strides) if isinstance(padding, str) else [tuple(p) for p in padding]
        pads = tuple(_transpose_padding(k, s, p) for k, s, p in zip(eff, strides, rep))
    else:
        pads = padding
    if transpose_kernel:
        rhs = S.rev_p.bind(rhs, dimensions=tuple(dn.rhs_spec[2:]))
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = S.transpose_p.bind(rhs, permutation=tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, strides, rd, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The result shape of ``conv_general_dilated`` without dilation."""
    from ftrans.core.avals import ShapedArray

    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    nsp = len(lhs_shape) - 2
    if isinstance(padding, str):
        padding = padtype_to_pads([lhs_shape[i] for i in dn.lhs_spec[2:]], [rhs_shape[i] for i in dn.rhs_spec[2:]],
                                  window_strides, padding)
    f32 = np.dtype(np.float32)
    return C.conv_output_shape(ShapedArray(tuple(lhs_shape), f32), ShapedArray(tuple(rhs_shape), f32),
                               window_strides=tuple(window_strides), padding=tuple(map(tuple, padding)),
                               lhs_dilation=(1,) * nsp, rhs_dilation=(1,) * nsp, dimension_numbers=dn,
                               feature_group_count=1, batch_group_count=1)


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The result shape of ``conv_transpose`` (Keras's ``Conv2DTranspose`` output size)."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lt = [lhs_shape[i] for i in dn.lhs_spec]
    rt = [rhs_shape[i] for i in dn.rhs_spec]
    if isinstance(padding, str):
        padding = [_transpose_padding(k, s, padding) for k, s in zip(rt[2:], window_strides)]
    totals = [int(lo) + int(hi) for lo, hi in padding]
    space = [(i - 1) * s - k + 2 + p for i, k, s, p in zip(lt[2:], rt[2:], window_strides, totals)]
    canon = (lt[0], rt[0], *space)
    out = [0] * len(canon)
    for pos, ax in enumerate(dn.out_spec):
        out[ax] = canon[pos]
    return tuple(out)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int], window_strides: Sequence[int],
                                 padding: Any, lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                                 precision: Any = None, preferred_element_type: Any = None) -> Any:
    """The patches a convolution with ``filter_shape`` would see, flattened into the feature axis.

    The output feature axis has ``C * prod(filter_shape)`` entries, input
    channel major (a convolution with a one-hot kernel per patch position,
    grouped per channel, as JAX computes it).
    """
    check_arraylike("lax.conv_general_dilated_patches", lhs)
    x = as_operand(lhs)
    filter_shape = tuple(int(k) for k in filter_shape)
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    lspec, rspec, _ = dn
    size = math.prod(filter_shape)
    c = x.shape[lspec[1]]
    d = dtype_weak(x)[0]
    eye = np.broadcast_to(np.eye(size, dtype=d), (c, size, size)).reshape(c * size, 1, *filter_shape)
    # eye is in canonical (O, I, *spatial) order; move it into rhs_spec's layout.
    kernel = np.transpose(eye, np.argsort(rspec))
    if precision is not None:
        precision = (precision, "DEFAULT")
    return conv_general_dilated(x, kernel, window_strides, padding, lhs_dilation, rhs_dilation, dn,
                                feature_group_count=c, precision=precision,
                                preferred_element_type=preferred_element_type)



def conv_general_dilated_local(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int], lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                               precision: Any = None) -> Any:
    """JAX's ``lax.conv_general_dilated_local``: an unshared convolution, one filter per output position.

    ``rhs`` is laid out like a convolution kernel whose input-feature axis holds ``C * prod(filter_shape)``
    entries (the patch, input channel major) and whose spatial axes are the *output's* spatial sizes. The
    patches of ``lhs`` (``conv_general_dilated_patches``) are contracted with ``rhs`` over that feature axis,
    position by position (the spatial axes are batch axes of one ``dot_general``).
    """
    check_arraylike("lax.conv_general_dilated_local", lhs, rhs)
    x, w = as_operand(lhs), as_operand(rhs)
    lhs_precision = None
    if precision is not None:
        p = canonicalize_precision("conv_general_dilated_local", precision)
        lhs_precision = p[0] if isinstance(p, tuple) else p
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                                           dimension_numbers, precision=lhs_precision)
    _, rspec, ospec = conv_dimension_numbers(x.shape, (1, 1) + tuple(int(k) for k in filter_shape),
                                             dimension_numbers)
    out_space, rhs_space = list(ospec[2:]), list(rspec[2:])
    order = sorted(range(len(out_space)), key=lambda k: out_space[k])
    dn = (((ospec[1],), (rspec[1],)), (tuple(sorted(out_space)), tuple(rhs_space[k] for k in order)))
    out = _ops.dot_general(patches, w, dn, precision=precision)
    # dot_general gives (spatial in order of their output positions..., N, O); put N and O where ospec says
    nd = len(ospec)
    src = list(range(nd))
    dest = [d for d in range(nd) if d not in (ospec[0], ospec[1])] + [ospec[0], ospec[1]]
    perm = [0] * nd
    for s_, d_ in zip(src, dest):
        perm[d_] = s_
    return _ops.transpose(out, tuple(perm))

def fft(x: Any, fft_type: Any, fft_lengths: Sequence[int]) -> Any:
    """``lax.fft``: a 1-3 dimensional DFT over the trailing axes (``fft_type`` FFT, IFFT, RFFT or IRFFT);
    ``fft_lengths=()`` transforms no axes (the operand, converted to the transform's dtype)."""
    check_arraylike("lax.fft", x)
    x = as_operand(x)
    if isinstance(fft_type, str):
        try:
            fft_type = FftType[fft_type.upper()]
        except KeyError:
            raise FtransValueError(f"lax.fft: unknown fft_type {fft_type!r}; use FFT, IFFT, RFFT or IRFFT") from None
    elif type(fft_type).__name__ == "FftType":
        fft_type = FftType[fft_type.name]
    else:
        fft_type = FftType(int(fft_type))
    if isinstance(fft_lengths, int):
        fft_lengths = (fft_lengths,)
    lens = tuple(operator.index(n) for n in fft_lengths)
    d = dtype_weak(x)[0]
    if fft_type == FftType.RFFT:
        if d.kind == "c":
            raise FtransTypeError(f"lax.fft: RFFT needs a real operand, got {d}")
        want = np.dtype(np.float64) if d == np.float64 else np.dtype(np.float32)
    else:
        want = np.dtype(np.complex128) if d in (np.float64, np.complex128) else np.dtype(np.complex64)
    if d != want:
        x = _ops.convert_element_type(x, want)
    if not lens:  # a 0-dimensional transform is the identity (after the dtype conversion), as in JAX
        return x
    return _ops._bind(F.fft_p, x, fft_type=fft_type, fft_lengths=lens)
