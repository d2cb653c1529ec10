"""Block-scaled matrix products: JAX's ``nn.scaled_matmul``, ``nn.scaled_dot_general`` and
``nn.get_scaled_dot_general_config``.

A block-scaled operand is a low-precision array (``float8_e4m3fn``, ``float4_e2m1fn``, ...) whose last
(contracting) axis is split into blocks, each with one scale.  JAX runs these products with cuDNN on
Blackwell GPUs only; ftrans computes them the reference way everywhere: dequantize each operand in
float32 (the values times their block's scale) and contract at the highest precision, so the result is
what the fused kernel approximates.  ``scaled_dot_general`` quantizes high-precision inputs with the
``mxfp8``, ``mxfp4`` or ``nvfp4`` recipe first and has JAX's backward pass (gradients quantized with the third
config; with ``nvfp4`` an unquantized product, and gradients zeroed where the forward pass clipped).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core.operands import as_operand, shape_of
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError, user_stacklevel
from ftrans.transforms.custom_derivatives import custom_vjp

__all__ = ["BlockScaleConfig", "get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"]

_F32 = np.dtype(np.float32)


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How ``scaled_dot_general`` quantizes one operand: the recipe (``mode``), the block length along the
    contracting axis, the element and scale dtypes, and (``nvfp4``) a global float32 scale."""
    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Any
    infer_only: bool


def get_scaled_dot_general_config(mode: str, global_scale: Any = None) -> BlockScaleConfig:
    """The quantization config of ``mode``: ``'mxfp8'`` (float8_e4m3fn values, float8_e8m0fnu scales per 32
    elements), ``'mxfp4'`` (jax 0.12's: float4_e2m1fn values, float8_e8m0fnu scales per 32 elements, no
    global scale) or ``'nvfp4'`` (float4_e2m1fn values, float8_e4m3fn scales per 16 elements, and a global
    scale, by default ``[1.0]``)."""
    if mode == "mxfp4":
        if global_scale is not None:
            raise FtransValueError("get_scaled_dot_general_config: mxfp4 does not use a global_scale; its E8M0 "
                                   "block scales cover the whole range")
        return BlockScaleConfig("mxfp4", 32, np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(ml_dtypes.float8_e8m0fnu),
                                None, False)
    if mode == "nvfp4":
        gs = jnp.ones((1,), _F32) if global_scale is None else global_scale
        return BlockScaleConfig("nvfp4", 16, np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(ml_dtypes.float8_e4m3fn),
                                gs, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e8m0fnu),
                                None, False)
    raise FtransValueError(f"get_scaled_dot_general_config: unsupported mode {mode!r}; use 'mxfp8', 'mxfp4' or "
                           "'nvfp4'")


def _dequantize(x: Any, scales: Any) -> Any:
    """``x * repeat(scales, K // K_s, axis=-1)`` in float32."""
    block = shape_of(x)[-1] // shape_of(scales)[-1]
    s = jnp.repeat(scales.astype(_F32), block, axis=-1)
    return x.astype(_F32) * s


def scaled_matmul(lhs: Any, rhs: Any, lhs_scales: Any, rhs_scales: Any,
                  preferred_element_type: Any = np.float32) -> Any:
    """``einsum('BMK,BNK->BMN', lhs * lhs_scales, rhs * rhs_scales)`` with each scale repeated over its block
    of ``K // K_s`` elements: ``lhs`` ``(B, M, K)``, ``rhs`` ``(B, N, K)``, ``lhs_scales`` ``(B, M, K_s)``,
    ``rhs_scales`` ``(B, N, K_s)``, ``K`` a multiple of ``K_s``.  Computed in float32 (as JAX fixes the
    compute type), returned as ``preferred_element_type``."""
    a, b, sa, sb = (as_operand(v) for v in (lhs, rhs, lhs_scales, rhs_scales))
    shapes = [tuple(shape_of(v)) for v in (a, b, sa, sb)]
    if any(len(s) != 3 for s in shapes):
        raise FtransShapeError(f"scaled_matmul requires all inputs to be 3-dimensional arrays, got shapes {shapes}")
    (ba, m, k), (bb, n, kb), (bsa, msa, ksa), (bsb, nsb, ksb) = shapes
    if k != kb or ba != bb:
        raise FtransShapeError("scaled_matmul requires inputs a and b to have matching batch (B) and contract (K) "
                               f"dimensions, but got shapes {shapes[0]} and {shapes[1]}")
    if ksa != ksb or bsa != bsb:
        raise FtransShapeError("scaled_matmul requires scales to have matching batch (B) and contract (K) "
                               f"dimensions, but got shapes {shapes[2]} and {shapes[3]}")
    if msa != m or nsb != n:
        raise FtransShapeError("scaled_matmul requires scales to match non-contract dimensions of inputs, but got "
                               f"shapes a: {shapes[0]}, b: {shapes[1]}, a_scales: {shapes[2]}, b_scales: {shapes[3]}")
    if bsa != ba or ksa == 0 or k % ksa:
        raise FtransShapeError(f"scaled_matmul: the scales' batch must be the inputs' and K={k} a multiple of the "
                               f"scales' last dimension, got shapes {shapes}")
    out_dtype = np.dtype(preferred_element_type)
    if not jnp.issubdtype(out_dtype, jnp.floating):
        raise FtransTypeError(f"scaled_matmul: preferred_element_type must be a float dtype, got {out_dtype}")
    prod = lax.dot_general(_dequantize(a, sa), _dequantize(b, sb), (((2,), (2,)), ((0,), (0,))),
                           precision=lax.Precision.HIGHEST, preferred_element_type=_F32)
    return prod.astype(out_dtype)


# ---------------------------------------------------------------- quantization (mxfp8, mxfp4, nvfp4)


def _e8m0_round_up(x: Any) -> Any:
    """The float32 ``x`` as an e8m0 exponent byte, rounded up (a power of two at least ``x``)."""
    bits = lax.bitcast_convert_type(x.astype(_F32), np.uint32)
    exp = bits >> 23
    mant = bits & 0x7FFFFF
    up = ((mant > 0) & (exp != 0xFE)) & ~((exp == 0) & (mant <= 0x400000))
    return jnp.where(up, exp + 1, exp).astype(np.uint8)


def _e8m0_value(x: Any, dtype: Any) -> Any:
    """The power of two an e8m0 byte encodes (a tiny value for the zero byte), as ``dtype``."""
    v = lax.bitcast_convert_type(x.astype(np.uint32) << 23, _F32)
    tiny = 2.0 ** -15 if np.dtype(dtype) == np.float16 else 2.0 ** -127
    return jnp.where(v == 0, np.float32(tiny), v).astype(dtype)


def _quantize(x: Any, config: BlockScaleConfig) -> tuple[Any, Any]:
    shape = tuple(x.shape)
    bs = config.block_size
    if shape[-1] < bs or shape[-1] % bs:
        raise FtransShapeError(f"scaled_dot_general: the contracting size {shape[-1]} must be a positive multiple of "
                               f"the block size {bs} ({config.mode})")
    x = x.reshape(shape[:-1] + (shape[-1] // bs, bs))
    big = np.asarray(float(ml_dtypes.finfo(config.data_type).max), _F32)

    def block_scales(v: Any) -> Any:
        # In float32 whatever v's dtype (jax 0.12's fix): XLA turns `amax / big` into `amax * (1 / big)`, and in
        # bfloat16 6 * bf16(1/6) = 1.0019 rounds the e8m0 scale of a block whose largest value is 6 up to 2.
        return jnp.max(jnp.abs(v), axis=-1, keepdims=True).astype(_F32) / big

    if config.mode in ("mxfp8", "mxfp4"):
        scales = _e8m0_round_up(block_scales(x))
        scaled = x.astype(_F32) / _e8m0_value(scales, _F32)
        scales = lax.bitcast_convert_type(scales, np.dtype(config.scale_type))
    elif config.mode == "nvfp4":
        smax = np.asarray(float(ml_dtypes.finfo(config.scale_type).max), x.dtype)
        x = x / config.global_scale
        scales = lax.optimization_barrier(jnp.clip(block_scales(x), 0, smax).astype(config.scale_type))
        scaled = x / scales.astype(_F32)
    else:
        raise FtransValueError(f"scaled_dot_general: unrecognized mode {config.mode!r}")
    # The barrier keeps the rounding to the narrow type: XLA's GPU compiler (allowing excess precision)
    # otherwise drops the narrowing and widening converts as a pair, and the product is unquantized.
    xq = lax.optimization_barrier(jnp.clip(scaled, -big, big).astype(config.data_type)).reshape(shape)
    return xq, scales.reshape(scales.shape[:-1])


def _normalize(x: Any, contract: tuple, batch: tuple) -> Any:
    """``x`` as ``(B, M, K)``: batch axes, then the free ones, then the contracting ones (in order)."""
    nd = x.ndim
    free = [d for d in range(nd) if d not in contract and d not in batch]
    order = [d for d in range(nd) if d in batch] + free + [d for d in range(nd) if d in contract]
    sh = x.shape
    size = lambda ds: int(np.prod([sh[d] for d in ds], dtype=np.int64))  # noqa: E731
    return jnp.transpose(x, order).reshape((size(batch), size(free), size(contract)))


def _out_shape(lhs_shape: tuple, rhs_shape: tuple, lhs_dn: tuple, rhs_dn: tuple) -> tuple:
    (lc, lb), (rc, rb) = lhs_dn, rhs_dn
    return (tuple(d for i, d in enumerate(lhs_shape) if i in lb)
            + tuple(d for i, d in enumerate(lhs_shape) if i not in lc and i not in lb)
            + tuple(d for i, d in enumerate(rhs_shape) if i not in rc and i not in rb))


def _scaled_dot(lhs: Any, rhs: Any, dn: tuple, out_dtype: Any, configs: tuple) -> Any:
    (lc, rc), (lb, rb) = dn
    a, sa = _quantize(_normalize(lhs, lc, lb), configs[0])
    b, sb = _quantize(_normalize(rhs, rc, rb), configs[1])
    nv = configs[0].mode == "nvfp4"
    out = scaled_matmul(a, b, sa, sb, preferred_element_type=_F32 if nv else out_dtype)
    if nv:
        out = (out * (configs[0].global_scale * configs[1].global_scale)).astype(out_dtype)
    return out.reshape(_out_shape(lhs.shape, rhs.shape, (lc, lb), (rc, rb)))


def _transpose_lhs(g: Any, x: Any, y: Any, dn: tuple, out_dtype: Any, configs: tuple, swap: bool = False) -> Any:
    """The cotangent of ``x`` in ``scaled_dot(x, y)`` from ``g``, itself a scaled product (JAX's scheme)."""
    (xc, yc), (xb, yb) = dn
    x_kept = [d for d in range(x.ndim) if d not in xc and d not in xb]
    y_kept = [d for d in range(y.ndim) if d not in yc and d not in yb]
    nb = len(xb)
    if swap:
        ans_batch, ans_y = tuple(range(nb)), tuple(range(nb, nb + len(y_kept)))
    else:
        ans_batch, ans_y = tuple(range(nb)), tuple(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
    xc_by_y = [xc[i] for i in np.argsort(yc)]
    out_axes = tuple(int(i) for i in np.argsort(list(xb) + x_kept + xc_by_y))
    y3, g3 = _normalize(y, tuple(y_kept), tuple(yb)), _normalize(g, ans_y, ans_batch)
    if configs[0].mode != "nvfp4":
        gq, gs = _quantize(g3, configs[0])
        yq, ys = _quantize(y3, configs[1])
        out = scaled_matmul(gq, yq, gs, ys, preferred_element_type=out_dtype)
    else:
        out = lax.dot_general(g3, y3, (((2,), (2,)), ((0,), (0,))), preferred_element_type=out_dtype)
    g_free = [d for d in range(g.ndim) if d not in ans_y and d not in ans_batch]
    shape = (tuple(g.shape[d] for d in ans_batch) + tuple(g.shape[d] for d in g_free)
             + tuple(y.shape[d] for d in range(y.ndim) if d in yc))
    return lax.transpose(out.reshape(shape), out_axes)


def _scaled_dot_fn(lhs: Any, rhs: Any, dn: tuple, out_dtype: Any, configs: tuple) -> Any:
    return _scaled_dot(lhs, rhs, dn, out_dtype, configs)


_scaled_dot_vjp = custom_vjp(_scaled_dot_fn, nondiff_argnums=(2, 3, 4))


def _fwd(lhs: Any, rhs: Any, dn: tuple, out_dtype: Any, configs: tuple) -> tuple:
    return _scaled_dot(lhs, rhs, dn, out_dtype, configs), (lhs, rhs)


def _bwd(dn: tuple, out_dtype: Any, configs: tuple, res: tuple, g: Any) -> tuple:
    lhs, rhs = res
    (xc, yc), (xb, yb) = dn
    g_lhs = _transpose_lhs(g, lhs, rhs, dn, out_dtype, (configs[2], configs[1]))
    g_rhs = _transpose_lhs(g, rhs, lhs, ((yc, xc), (yb, xb)), out_dtype, (configs[2], configs[0]), swap=True)
    if configs[2].mode == "nvfp4":  # a straight-through estimator that zeroes what the forward pass clipped
        big = float(ml_dtypes.finfo(configs[0].data_type).max) * float(ml_dtypes.finfo(configs[0].scale_type).max)
        g_lhs = jnp.where(jnp.abs(lhs) <= configs[0].global_scale * big, g_lhs, 0)
        g_rhs = jnp.where(jnp.abs(rhs) <= configs[1].global_scale * big, g_rhs, 0)
    return g_lhs.astype(lhs.dtype), g_rhs.astype(rhs.dtype)


_scaled_dot_vjp.defvjp(_fwd, _bwd)


def scaled_dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, preferred_element_type: Any = np.float32,
                       configs: Any = None, implementation: Any = None) -> Any:
    """``lax.dot_general`` with block-scaled quantization of both operands (``configs``: three
    ``BlockScaleConfig``, for lhs, rhs and the gradients, from ``get_scaled_dot_general_config``).  Without
    ``configs`` it is ``lax.dot_general``.  The contracting size must be a multiple of the block size."""
    if implementation is not None:
        import warnings

        warnings.warn("scaled_dot_general: implementation is ignored (as in JAX)", DeprecationWarning, stacklevel=user_stacklevel())
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)
    lhs, rhs = jnp.asarray(lhs), jnp.asarray(rhs)
    out_dtype = np.dtype(preferred_element_type)
    if out_dtype not in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
        raise FtransTypeError(f"scaled_dot_general: preferred_element_type must be float32, bfloat16 or float16, "
                              f"got {out_dtype}")
    configs = tuple(configs)
    if len(configs) != 3:
        raise FtransValueError(f"scaled_dot_general: configs must hold three BlockScaleConfig (lhs, rhs, gradients), "
                               f"got {len(configs)}")
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    squeeze = False
    if not dn[1][0]:
        lhs = jnp.expand_dims(lhs, lhs.ndim)
        dn = (dn[0], ((lhs.ndim - 1,), dn[1][1]))
        squeeze = True
    if not dn[1][1]:
        rhs = jnp.expand_dims(rhs, rhs.ndim)
        dn = (dn[0], (dn[1][0], (rhs.ndim - 1,)))
        squeeze = True
    out = _scaled_dot_vjp(lhs, rhs, dn, out_dtype, configs)
    return jnp.squeeze(out, axis=0) if squeeze else out
