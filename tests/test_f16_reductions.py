"""``allow_f16_reductions`` (JAX's option): False refuses reduce_sum of float16/bfloat16 over an axis longer
than one, eagerly and under jit (a program compiled while allowed is traced again). Against jax."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_disallowed_half_precision_sums_match_jax(dtype):
    for lib, np_ in ((jax, jjnp), (ftrans, jnp)):
        x = np_.ones(3, dtype)
        assert float(lib.lax.reduce_sum(x, [0])) == 3.0  # allowed by default
        f = lib.jit(lambda v: lib.lax.reduce_sum(v, [0]))
        f(x)
        with lib.allow_f16_reductions(False):
            with pytest.raises(ValueError, match="not allowed"):
                lib.lax.reduce_sum(x, [0])
            with pytest.raises(ValueError, match="not allowed"):
                f(x)  # compiled while allowed: traced again
            y = lib.lax.reduce_sum(np_.ones((1, 3), dtype), [0])  # singleton axes are fine
            np.testing.assert_array_equal(np.asarray(y, np.float32), np.ones(3, np.float32))
            assert float(lib.lax.reduce_sum(np_.ones(3), [0])) == 3.0  # float32 is fine
            assert float(np_.sum(x)) == 3.0  # jnp.sum accumulates half precision in float32
        assert float(f(x)) == 3.0


def test_config_update_spelling():
    assert ftrans.config.allow_f16_reductions is True
    ftrans.config.update("jax_allow_f16_reductions", False)
    try:
        with pytest.raises(ValueError, match="allow_f16_reductions"):
            ftrans.lax.reduce_sum(jnp.ones(4, "float16"), [0])
    finally:
        ftrans.config.update("jax_allow_f16_reductions", True)
