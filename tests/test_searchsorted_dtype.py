"""``jnp.searchsorted``'s index dtype against jax: int32 whenever the sorted array's length fits, with or
without x64 (JAX's ``int_dtype_for_dim``); int64 beyond, which without x64 warns and does not fit."""

import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("v", [2.5, [0.0, 3.0, 9.0]])
def test_index_dtype_matches_jax(x64, side, v):
    a = np.arange(6, dtype=np.float32)
    with jax.enable_x64(x64):
        want = jjnp.searchsorted(jjnp.asarray(a), jjnp.asarray(v, jjnp.float32), side=side)
    with ftrans.enable_x64(x64):
        got = fjnp.searchsorted(fjnp.asarray(a), fjnp.asarray(v, fjnp.float32), side=side)
        jit_got = ftrans.jit(lambda a, v: fjnp.searchsorted(a, v, side=side))(a, np.asarray(v, np.float32))
    for g in (got, jit_got):
        assert g.dtype == want.dtype and g.weak_type == want.weak_type
        np.testing.assert_array_equal(np.asarray(g), np.asarray(want))


def test_longer_than_int32():
    big = ftrans.ShapeDtypeStruct((np.iinfo(np.int32).max + 1,), np.float32)
    v = ftrans.ShapeDtypeStruct((), np.float32)
    fits = ftrans.ShapeDtypeStruct((np.iinfo(np.int32).max,), np.float32)
    assert ftrans.eval_shape(fjnp.searchsorted, fits, v).dtype == np.int32
    with ftrans.enable_x64(True):
        assert ftrans.eval_shape(fjnp.searchsorted, big, v).dtype == np.int64
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(OverflowError, match="Python integer 2147483648 out of bounds"):
            ftrans.eval_shape(fjnp.searchsorted, big, v)
    assert any("Explicitly requested dtype int64" in str(x.message) for x in w)
    # jax: the same warning, then the same OverflowError
    jbig = jax.ShapeDtypeStruct(big.shape, np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(OverflowError, match="Python integer 2147483648 out of bounds"):
            jax.eval_shape(jjnp.searchsorted, jbig, jax.ShapeDtypeStruct((), np.float32))
    assert any("Explicitly requested dtype int64" in str(x.message) for x in w)
