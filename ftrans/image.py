"""``ftrans.image``: image resampling (JAX's ``image`` module).

Every resampling method except nearest-neighbour is separable: for each
resized axis a dense ``[input_size, output_size]`` weight matrix is built from
the method's kernel evaluated at the distances between output sample centres
(mapped back into input coordinates) and input pixel centres, the columns are
normalised to sum to one, and all matrices are contracted with the image in one
``einsum``.  With ``antialias=True`` a downsampling kernel is stretched by the
inverse scale, so it low-pass filters as it interpolates.  Pixels are
half-centred: pixel ``i`` covers ``[i, i + 1)`` and has its centre at
``i + 0.5``.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes as _dtypes
from ftrans.core.operands import check_arraylike
from ftrans.core.trace import Tracer
from ftrans.errors import ConcretizationTypeError, FtransTypeError, FtransValueError
from ftrans.transforms.jit import jit

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


def _promote_inexact(*xs: Any) -> list[Any]:
    """Arrays of one common floating (or complex) dtype, keeping a Python scalar's weak type."""
    from ftrans.core.operands import convert, dtype_weak

    pairs = tuple(dtype_weak(x) for x in xs)
    d, weak = _dtypes.promote(pairs)
    if not _dtypes.is_inexact(d):
        d = _dtypes.default_float()
    return [jnp.asarray(convert(x, d, weak)) for x in xs]


# ------------------------------------------------------------------ kernels (argument: |distance| >= 0)
def _triangle(x: Any) -> Any:
    return jnp.maximum(0, 1 - jnp.abs(x))


def _keys_cubic(x: Any) -> Any:
    # Keys' cubic convolution kernel with a = -0.5 (Pillow / TensorFlow / PyTorch antialiased).
    inner = (1.5 * x - 2.5) * x * x + 1.0
    outer = ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
    return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, outer, inner))


def _opencv_cubic(x: Any) -> Any:
    # The a = -0.75 cubic that OpenCV, and PyTorch without antialiasing, use.
    a = -0.75
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, outer, inner))


def _lanczos(radius: float) -> Callable[[Any], Any]:
    def kernel(x: Any) -> Any:
        num = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        den = jnp.where(x != 0, (np.pi ** 2) * x * x, 1)
        # sinc(x) sinc(x / r), with its limit 1 near the origin
        val = jnp.where(x > 1e-3, num / den, 1)
        return jnp.where(x > radius, 0.0, val)
    return kernel


_AREA = object()  # marker: the weight is an interval overlap, not a kernel of the distance


class ResizeMethod(enum.Enum):
    """Image resampling methods (JAX's ``image.ResizeMethod``).

    ``NEAREST``: nearest-neighbour sampling; ``LINEAR``: (bi/tri)linear
    interpolation; ``LANCZOS3`` / ``LANCZOS5``: Lanczos resampling with a
    kernel of radius 3 or 5; ``CUBIC``: Keys' cubic kernel (a = -0.5);
    ``CUBIC_PYTORCH``: PyTorch's bicubic (the a = -0.75 kernel with edge
    replication when not antialiasing, ``CUBIC`` otherwise); ``AREA``: the
    average of the input pixels each output pixel covers.
    """

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method a string names (``"bilinear"``, ``"tricubic"``, ``"lanczos3"``, ...)."""
        m = _NAMES.get(s) if isinstance(s, str) else None
        if m is None:
            raise FtransValueError(f'Unknown resize method "{s}"')
        return m


_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    "linear": ResizeMethod.LINEAR, "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
    "triangle": ResizeMethod.LINEAR,
    "lanczos3": ResizeMethod.LANCZOS3, "lanczos5": ResizeMethod.LANCZOS5,
    "cubic": ResizeMethod.CUBIC, "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
    "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
    "area": ResizeMethod.AREA,
}

# method -> (kernel radius, kernel)
_KERNELS: dict[ResizeMethod, tuple[int, Any]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic),
    ResizeMethod.AREA: (1, _AREA),
}


def _method(method: Any) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise FtransTypeError(f"method must be a ResizeMethod or a string, got {method!r}")
    return method


def _output_shape(shape: Any) -> tuple[int, ...]:
    """The output shape as ``jnp``'s creation functions read a shape: concrete non-negative integers."""
    from ftrans.numpy._creation import _shape_arg

    return _shape_arg("image", shape)


def _weights(in_size: int, out_size: int, scale: Any, translation: Any, kernel: Any, antialias: bool,
             edge_padding: bool, radius: int) -> Any:
    """The ``[in_size, out_size]`` resampling matrix of one axis."""
    dtype = jnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    # Downsampling with antialiasing widens the kernel (a low-pass filter); upsampling never does.
    kscale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    out_pos = jnp.arange(out_size, dtype=dtype)
    # Input-space position of each output pixel centre, in pixel-index units.
    centre = (out_pos + 0.5) * inv_scale - translation * inv_scale - 0.5

    pad = 0
    if edge_padding:
        if antialias:
            if isinstance(scale, Tracer):
                raise ConcretizationTypeError(
                    "image: antialiasing with edge padding requires a static scale")
            pad = math.ceil(radius * max(1.0 / float(scale), 1.0))
        else:
            pad = radius
    in_pos = jnp.arange(-pad, in_size + pad, dtype=dtype)

    if kernel is _AREA:
        lo_out = out_pos * inv_scale - translation * inv_scale
        hi_out = lo_out + inv_scale
        lo_in = jnp.arange(in_size, dtype=dtype)
        hi_in = lo_in + 1.0
        w = jnp.maximum(0.0, jnp.minimum(hi_out[None, :], hi_in[:, None])
                        - jnp.maximum(lo_out[None, :], lo_in[:, None]))
    else:
        w = kernel(jnp.abs(centre[None, :] - in_pos[:, None]) / kscale)

    tiny = 1000.0 * float(np.finfo(np.float32).eps)
    if edge_padding:
        # Weights of the replicated border pixels go to the edge pixel they copy.
        rows = jnp.clip(in_pos.astype(jnp.int32), 0, in_size - 1)
        cols = lax.broadcast_in_dim(jnp.arange(out_size), (in_pos.shape[0], out_size), (1,))
        w = jnp.zeros((in_size, out_size), dtype=dtype).at[rows[:, None], cols].add(w)
        total = jnp.sum(w, axis=0, keepdims=True)
        return jnp.where(jnp.abs(total) > tiny, w / jnp.where(total != 0, total, 1), 0)
    total = jnp.sum(w, axis=0, keepdims=True)
    w = jnp.where(jnp.abs(total) > tiny, w / jnp.where(total != 0, total, 1), 0)
    # An output pixel whose centre falls outside the input gets nothing.
    inside = jnp.logical_and(centre >= -0.5, centre <= in_size - 0.5)
    return jnp.where(inside[None, :], w, 0)


def _resample(x: Any, out_shape: tuple[int, ...], dims: Sequence[int], scale: Sequence[Any],
              translation: Sequence[Any], kernel: Any, antialias: bool, precision: Any,
              edge_padding: bool = False, radius: int = 0) -> Any:
    if not dims:
        return x
    nd = len(out_shape)
    operands: list[Any] = [x, list(range(nd))]
    result = list(range(nd))
    for i, d in enumerate(dims):
        w = _weights(x.shape[d], out_shape[d], scale[i], translation[i], kernel, antialias,
                     edge_padding, radius).astype(x.dtype)
        operands += [w, [d, nd + i]]
        result[d] = nd + i
    return jnp.einsum(*operands, result, precision=precision)


def _check_rank(shape: tuple[int, ...], image: Any) -> None:
    if len(shape) != image.ndim:
        raise FtransValueError("shape must have length equal to the number of dimensions of x; "
                               f" {shape} vs {tuple(image.shape)}")


def scale_and_translate(image: Any, shape: Any, spatial_dims: Sequence[int], scale: Any, translation: Any,
                        method: str | ResizeMethod, antialias: bool = True,
                        precision: Any = lax.Precision.HIGHEST) -> Any:
    """Resample ``image`` to ``shape`` under a per-axis scale and translation (JAX's ``image.scale_and_translate``).

    An input location ``p`` along spatial axis ``spatial_dims[k]`` moves to
    ``p * scale[k] + translation[k]`` in the output; each output pixel is
    produced by sampling the input at the inverse-mapped position of its centre
    (pixel ``i`` has its centre at ``i + 0.5``).  Output pixels that map
    outside the input are zero.  ``scale`` and ``translation`` may be traced
    (and differentiated).

    Args:
      image: the input array.
      shape: the output shape, one entry for every axis of ``image``.
      spatial_dims: the axes ``scale`` and ``translation`` apply to.
      scale: one scale per spatial axis.
      translation: one translation per spatial axis.
      method: any :class:`ResizeMethod` but ``NEAREST``, or its name.
      antialias: widen the kernel when downsampling (no effect when upsampling).
      precision: the contraction precision (JAX's ``lax.Precision``).

    Returns:
      The resampled image, in ``image``'s dtype promoted to floating point.
    """
    check_arraylike("scale_and_translate", image)
    image = jnp.asarray(image)
    shape = _output_shape(shape)
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise FtransValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    (image,) = _promote_inexact(image)
    scale, translation = _promote_inexact(scale, translation)
    dims = [_axis(d, image.ndim) for d in spatial_dims]
    if scale.ndim != 1 or translation.ndim != 1 or scale.shape[0] != len(dims) or translation.shape[0] != len(dims):
        raise FtransValueError(
            f"scale_and_translate: scale and translation must have one entry per spatial dimension "
            f"({len(dims)}), got shapes {tuple(scale.shape)} and {tuple(translation.shape)}")
    return _resample(image, shape, dims, [scale[i] for i in range(len(dims))],
                     [translation[i] for i in range(len(dims))], kernel, antialias, precision,
                     edge_padding=(method == ResizeMethod.CUBIC_PYTORCH and not antialias), radius=radius)


def _axis(d: Any, ndim: int) -> int:
    d = operator.index(d)
    if not -ndim <= d < ndim:
        raise FtransValueError(f"scale_and_translate: spatial dimension {d} is out of bounds for an image of "
                               f"dimension {ndim}")
    return d % ndim


def _resize_nearest(x: Any, shape: tuple[int, ...]) -> Any:
    for d, (m, n) in enumerate(zip(x.shape, shape)):
        if m == n:
            continue
        # The source pixel containing each output centre; float32 as in JAX.
        src = (jnp.arange(n, dtype=np.float32) + 0.5) * m / n
        src = jnp.floor(src.astype(np.float32)).astype(np.int32)
        index: list[Any] = [slice(None)] * x.ndim
        index[d] = src
        x = x[tuple(index)]
    return x


def _resize_impl(image: Any, shape: tuple[int, ...], method: Any, antialias: bool, precision: Any) -> Any:
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    (image,) = _promote_inexact(image)
    # Axes whose size is unchanged are the identity (every kernel interpolates): they are skipped.
    dims = [d for d in range(len(shape)) if image.shape[d] != shape[d]]
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scale, [0.0] * len(dims), kernel, antialias, precision,
                     edge_padding=(method == ResizeMethod.CUBIC_PYTORCH and not antialias), radius=radius)


_resize_jit = jit(_resize_impl, static_argnums=(1, 2, 3, 4))


def resize(image: Any, shape: Any, method: str | ResizeMethod, antialias: bool = True,
           precision: Any = lax.Precision.HIGHEST) -> Any:
    """Resize ``image`` to ``shape`` (JAX's ``image.resize``).

    ``shape`` names every axis (batch and channel axes keep their size); only
    the axes whose size changes are resampled.  ``method`` is a
    :class:`ResizeMethod` or one of ``"nearest"``, ``"linear"`` /
    ``"bilinear"`` / ``"trilinear"`` / ``"triangle"``, ``"cubic"`` /
    ``"bicubic"`` / ``"tricubic"``, ``"cubic-pytorch"`` / ``"bicubic-pytorch"``,
    ``"lanczos3"``, ``"lanczos5"``, ``"area"``.  Nearest-neighbour keeps the
    input dtype and ignores ``antialias`` and ``precision``; the other methods
    return a floating-point image.  ``antialias`` widens the kernel when
    downsampling.  (Torch's ``align_corners=True`` can be had from
    :func:`scale_and_translate`.)
    """
    check_arraylike("resize", image)
    return _resize_jit(image, _output_shape(shape), method, antialias, precision)
