"""Jacobian blocks take their example leaf's dtype and weak type, as JAX's do.

``jacfwd``'s blocks follow the output leaf, ``jacrev``'s the input leaf: the Jacobian (or Hessian)
of a function of a Python float is weakly typed, and mixed-precision inputs keep their own dtypes.
"""

import jax
import numpy as np
import pytest

import ftrans


def _cases(lib):
    jnp = lib.numpy
    return {
        "hessian_pow_float": lambda: lib.hessian(lambda x: x ** 2.5)(2.0),
        "jacfwd_pow_float": lambda: lib.jacfwd(lambda x: x ** 2.5)(2.0),
        "jacrev_pow_float": lambda: lib.jacrev(lambda x: x ** 2.5)(2.0),
        "jacfwd_weak_scale": lambda: lib.jacfwd(lambda x: x * 2.0)(2.0),
        "hessian_two_args": lambda: lib.hessian(lambda x, y: x * y ** 2, argnums=(0, 1))(1.0, 2.0),
        "jacrev_allow_int": lambda: lib.jacrev(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(
            np.float32(2.0), np.int32(3)),
        "jacfwd_f16_output": lambda: lib.jacfwd(lambda x: (x * 2).astype(jnp.float16))(np.ones(3, np.float32)),
        "jacrev_mixed_inputs": lambda: lib.jacrev(lambda x, y: x * y.astype(jnp.float32), argnums=(0, 1))(
            np.arange(2, dtype=np.float32), np.ones(2, np.float16)),
        "jacfwd_complex_output": lambda: lib.jacfwd(lambda x: x * (1 + 2j))(np.float32(1.0)),
        "jacrev_holomorphic": lambda: lib.jacrev(lambda z: z * z, holomorphic=True)(np.complex64(1 + 1j)),
        "jacfwd_under_jit": lambda: lib.jit(lib.jacfwd(lambda x: x ** 3.0))(1.5),
    }


@pytest.mark.parametrize("name", sorted(_cases(jax)))
def test_jacobian_dtype_and_weak_type_match_jax(name):
    want = jax.tree_util.tree_leaves(_cases(jax)[name]())
    got = jax.tree_util.tree_leaves(_cases(ftrans)[name]())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert g.weak_type == w.weak_type, (name, g, w)
        np.testing.assert_allclose(np.asarray(g, np.complex128), np.asarray(w, np.complex128), rtol=2e-3)
