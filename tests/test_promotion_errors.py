"""Dtype-promotion failures raise ``ftrans.dtypes.TypePromotionError`` (a ``ValueError``), as JAX's
``jax.dtypes.TypePromotionError``, naming the family that does not promote (8-bit floats, 4-bit floats,
narrow integers); and ``jnp.array`` of a Python int with a 2- or 4-bit integer dtype wraps, as JAX's
(jax's dtypes_test ``testFloat8PromotionError``/``testFloat4PromotionError``)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest

import ftrans
import ftrans.dtypes as fdtypes
import ftrans.numpy as fjnp

NARROW = [("float8_e4m3fn", "8-bit floats"), ("float8_e5m2", "8-bit floats"),
          ("float8_e4m3b11fnuz", "8-bit floats"), ("float4_e2m1fn", "4-bit floats"),
          ("int4", "1-bit, 2-bit and 4-bit integers"), ("uint4", "1-bit, 2-bit and 4-bit integers")]


@pytest.mark.parametrize("name,kind", NARROW)
def test_narrow_dtypes_raise_type_promotion_error(name, kind):
    dt = getattr(ml_dtypes, name)
    with pytest.raises(jax.dtypes.TypePromotionError, match=f"{kind} do not support implicit promotion"):
        jjnp.array(1, dtype=dt) + jjnp.array(1, dtype="float32")
    with pytest.raises(fdtypes.TypePromotionError, match=f"{kind} do not support implicit promotion") as e:
        fjnp.array(1, dtype=dt) + fjnp.array(1, dtype="float32")
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, ftrans.errors.FtransValueError)
    assert "test_promotion_errors.py" in str(e.value)  # names the user's line


def test_strict_promotion_raises_type_promotion_error():
    ftrans.config.update("jax_numpy_dtype_promotion", "strict")
    try:
        with pytest.raises(fdtypes.TypePromotionError, match="strict"):
            fjnp.ones(2, "int32") + fjnp.ones(2, "float32")
    finally:
        ftrans.config.update("jax_numpy_dtype_promotion", "standard")
    with jax.numpy_dtype_promotion("strict"), pytest.raises(jax.dtypes.TypePromotionError):
        jjnp.ones(2, "int32") + jjnp.ones(2, "float32")


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
@pytest.mark.parametrize("value", [1, -1, 7, 100])
def test_python_int_to_narrow_int_wraps_as_jax(name, value):
    dt = getattr(ml_dtypes, name)
    want = jjnp.array(value, dtype=dt)
    got = fjnp.array(value, dtype=dt)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got).astype(np.int32), np.asarray(want).astype(np.int32))


def test_python_int_out_of_range_for_int32_still_overflows():
    with pytest.raises(OverflowError):
        jjnp.array(2**40, dtype="int32")
    with pytest.raises(OverflowError):
        fjnp.array(2**40, dtype="int32")
