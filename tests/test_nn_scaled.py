"""nn.scaled_matmul / scaled_dot_general / get_scaled_dot_general_config against JAX's reference semantics.

JAX runs block-scaled products only through cuDNN (a CPU call raises); its documented math (dequantize,
then contract) and its quantization routine (run here from jax's own module) are the oracle.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax._src.cudnn import scaled_matmul_stablehlo as jq

import ftrans
import ftrans.nn as fnn
from ftrans.errors import FtransShapeError


def _reference(a, b, sa, sb):
    ka, kb = a.shape[-1] // sa.shape[-1], b.shape[-1] // sb.shape[-1]
    da = a.astype(np.float32) * jnp.repeat(sa.astype(np.float32), ka, axis=-1)
    db = b.astype(np.float32) * jnp.repeat(sb.astype(np.float32), kb, axis=-1)
    return jnp.einsum("BMK,BNK->BMN", da, db, precision="highest")


def test_scaled_matmul_matches_reference():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((2, 5, 64)).astype(ml_dtypes.float8_e4m3fn)
    sa = (2.0 ** rng.integers(-3, 3, (2, 3, 2))).astype(ml_dtypes.float8_e8m0fnu)
    sb = (2.0 ** rng.integers(-3, 3, (2, 5, 2))).astype(ml_dtypes.float8_e8m0fnu)
    want = _reference(a, b, sa, sb)
    np.testing.assert_allclose(fnn.scaled_matmul(a, b, sa, sb), want, rtol=1e-6)
    np.testing.assert_allclose(ftrans.jit(fnn.scaled_matmul)(a, b, sa, sb), want, rtol=1e-6)
    assert fnn.scaled_matmul(a, b, sa, sb, preferred_element_type=jnp.bfloat16).dtype == jnp.bfloat16
    with pytest.raises(FtransShapeError, match="3-dimensional"):
        fnn.scaled_matmul(a[0], b, sa, sb)
    with pytest.raises(FtransShapeError, match="matching batch"):
        fnn.scaled_matmul(a, b[:1], sa, sb)


def test_configs_match_jax():
    for mode in ("mxfp8", "nvfp4"):
        f, j = fnn.get_scaled_dot_general_config(mode), jax.nn.get_scaled_dot_general_config(mode)
        assert (f.mode, f.block_size, np.dtype(f.data_type), np.dtype(f.scale_type)) == (
            j.mode, j.block_size, np.dtype(j.data_type), np.dtype(j.scale_type))
    with pytest.raises(ValueError):
        fnn.get_scaled_dot_general_config("int8")


@pytest.mark.parametrize("mode", ["mxfp8", pytest.param("nvfp4", marks=pytest.mark.xla_default_codegen)])
def test_scaled_dot_general_forward_matches_jax_quantization(mode):
    """(nvfp4: XLA's loop emitters, which the suite compiles with under jaxlib 0.10, round float4
    conversions otherwise than its default code; tests/conftest.py runs that case with the defaults.)"""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 32, 64)).astype(np.float32)
    y = rng.standard_normal((3, 32, 64)).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))
    fcfg = [fnn.get_scaled_dot_general_config(mode)] * 3
    jcfg = jax.nn.get_scaled_dot_general_config(mode)
    xq, xs = jq.quantize(jnp.asarray(x), jcfg)
    yq, ys = jq.quantize(jnp.asarray(y), jcfg)
    want = _reference(xq, yq, xs, ys)
    if mode == "nvfp4":
        want = want * (jcfg.global_scale * jcfg.global_scale)
    got = fnn.scaled_dot_general(x, y, dn, configs=fcfg)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ftrans.jit(lambda x, y: fnn.scaled_dot_general(x, y, dn, configs=fcfg))(x, y), want,
                               rtol=1e-5, atol=1e-5)


def test_scaled_dot_general_gradients_and_fallback():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.standard_normal((64, 32)).astype(np.float32)
    dn = (((1,), (0,)), ((), ()))
    # nvfp4's backward pass is the unquantized product (with clipped inputs' gradients zeroed)
    cfg = [fnn.get_scaled_dot_general_config("nvfp4")] * 3
    gx, gy = ftrans.grad(lambda x, y: fnn.scaled_dot_general(x, y, dn, configs=cfg).sum(), argnums=(0, 1))(x, y)
    wx, wy = jax.grad(lambda x, y: (x @ y).sum(), argnums=(0, 1))(x, y)
    # (sums of 32 float32 products of size ~1: entries near 0 differ by the accumulation order of the BLAS in use)
    np.testing.assert_allclose(gx, wx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gy, wy, rtol=1e-5, atol=1e-5)
    # mxfp8's backward quantizes: close to the exact gradient, same shapes
    cfg = [fnn.get_scaled_dot_general_config("mxfp8")] * 3
    gx, gy = ftrans.grad(lambda x, y: fnn.scaled_dot_general(x, y, dn, configs=cfg).sum(), argnums=(0, 1))(x, y)
    assert gx.shape == x.shape and gy.shape == y.shape
    np.testing.assert_allclose(gx, wx, rtol=0.1, atol=1.0)
    # no configs: lax.dot_general
    np.testing.assert_allclose(fnn.scaled_dot_general(x, y, dn), jax.nn.scaled_dot_general(x, y, dn), rtol=1e-5,
                               atol=1e-5)
