"""``debug_nans`` checks a ``pmap``'s outputs, as JAX does (with or without donated inputs)."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


@pytest.mark.parametrize("donate", [False, True])
def test_debug_nans_checks_pmap_outputs_like_jax(donate):
    got = []
    for lib, np_ in ((jax, jjnp), (ftrans, jnp)):
        g = lib.pmap(lambda x: 0. / x, donate_argnums=(0,) if donate else ())
        g(np_.array([1.]))
        with lib.debug_nans(True):
            with pytest.raises(FloatingPointError, match=r"Invalid value \(nan\) encountered in sharded computation"):
                g(np_.array([0.])).block_until_ready()
        got.append(np.isnan(np.asarray(g(np_.array([0.])))).tolist())  # off again: no check
    assert got[1] == got[0] == [True]
