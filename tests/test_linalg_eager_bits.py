"""Eager linalg decompositions give the compiled program's factors to the last bit, as JAX's (whose eager
ops run the compiled kernels): both call the same LAPACK routines of the same library."""
import jax
import numpy as np
import pytest

import ftrans
from ftrans import lax

L = lax.linalg
JL = jax.lax.linalg


def _mk(rng, shape, dtype, hermitian=False):
    x = rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape).astype(x.real.dtype)
    if hermitian:
        x = x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1], dtype=dtype)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("name,shape,hermitian", [
    ("qr", (2, 7, 4), False), ("qr_full", (2, 7, 4), False), ("svd", (2, 7, 4), False),
    ("svd_full", (2, 4, 7), False), ("svd_values", (2, 7, 4), False), ("eigh", (2, 5, 5), True),
    ("cholesky", (2, 5, 5), True), ("lu", (2, 7, 4), False),
])
def test_eager_factors_are_the_compiled_ones_bit_for_bit(name, shape, hermitian, dtype):
    def fn(m):
        return {
            "qr": lambda a: m.qr(a, full_matrices=False),
            "qr_full": lambda a: m.qr(a, full_matrices=True),
            "svd": lambda a: m.svd(a, full_matrices=False),
            "svd_full": lambda a: m.svd(a, full_matrices=True),
            "svd_values": lambda a: m.svd(a, compute_uv=False),
            "eigh": m.eigh,
            "cholesky": m.cholesky,
            "lu": m.lu,
        }[name]

    x = _mk(np.random.default_rng(0), shape, dtype, hermitian)
    eager = jax.tree_util.tree_leaves(fn(L)(x))
    compiled = jax.tree_util.tree_leaves(ftrans.jit(fn(L))(x))
    reference = jax.tree_util.tree_leaves(fn(JL)(x))  # JAX's eager call: the compiled kernel
    assert len(eager) == len(compiled) == len(reference)
    for e, c, r in zip(eager, compiled, reference):
        np.testing.assert_array_equal(np.asarray(e), np.asarray(c))
        np.testing.assert_array_equal(np.asarray(e), np.asarray(r))


def test_a_failed_factorization_gives_nans_for_that_matrix_only():
    x = _mk(np.random.default_rng(1), (2, 4, 3), np.float32)
    x[1, 0, 0] = np.nan
    u, s, vh = L.svd(x, full_matrices=False)
    ju, js, jvh = JL.svd(x, full_matrices=False)
    np.testing.assert_array_equal(np.asarray(s[0]), np.asarray(js[0]))
    assert np.isnan(np.asarray(s[1])).all() and np.isnan(np.asarray(js[1])).all()
