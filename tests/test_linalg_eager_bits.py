"""Eager linalg decompositions give the compiled program's factors to the last bit, as JAX's (whose eager
ops run the compiled kernels): both call the same LAPACK routines of the same library.

Eager ftrans on default-device arrays runs on the host, so on a GPU machine the programs and jax calls it
is compared with run on the CPU device too (tests/backend_util.py: ``host_oracle``), not through cuSOLVER."""
import jax
import numpy as np
import pytest

import ftrans
from ftrans import lax
from tests.backend_util import host_oracle

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
    with host_oracle():
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
    with host_oracle():
        ju, js, jvh = JL.svd(x, full_matrices=False)
    np.testing.assert_array_equal(np.asarray(s[0]), np.asarray(js[0]))
    assert np.isnan(np.asarray(s[1])).all() and np.isnan(np.asarray(js[1])).all()


# ---------------------------------------------------------------- every primitive, stacks included
#
# A stack of matrices runs per matrix through LAPACK the first time its signature comes, and through the
# primitive's compiled CPU program (the kernel looping in C) from the second time on: both must give the
# jitted program's bits.

from ftrans.core.prims import linalg as P  # noqa: E402
from ftrans.lowering import device_eager  # noqa: E402


def _case(name, rng, batch, n, dtype):
    def gen(shape=None):
        return _mk(rng, batch + (shape or (n, n)), dtype)

    def spd():
        return _mk(rng, batch + (n, n), dtype, hermitian=True)

    taus = np.asarray(gen((n - 1,)) * 0.5)
    return {
        "cholesky": (P.cholesky_p, (spd(),), {}),
        "triangular_solve": (P.triangular_solve_p, (np.tril(spd()), gen((n, 3))),
                             dict(left_side=True, lower=True, transpose_a=True, conjugate_a=True,
                                  unit_diagonal=False)),
        "lu": (P.lu_p, (gen((n + 2, n)),), {}),
        "qr": (P.qr_p, (gen((n + 2, n)),), dict(full_matrices=True)),
        "qr_pivoting": (P.qr_p, (gen((n, n + 2)),), dict(full_matrices=False, pivoting=True)),
        "eigh": (P.eigh_p, (spd(),), dict(lower=True)),
        "svd": (P.svd_p, (gen((n + 2, n)),), dict(full_matrices=False, compute_uv=True)),
        "svd_gesvd": (P.svd_p, (gen((n, n + 2)),),
                      dict(full_matrices=True, compute_uv=True, algorithm=P.SvdAlgorithm.QR)),
        "eig": (P.eig_p, (gen(),), dict(compute_left_eigenvectors=True, compute_right_eigenvectors=True)),
        "eig_right": (P.eig_p, (gen(),), dict(compute_left_eigenvectors=False, compute_right_eigenvectors=True)),
        "schur": (P.schur_p, (gen(),), {}),
        "hessenberg": (P.hessenberg_p, (gen(),), {}),
        "tridiagonal": (P.tridiagonal_p, (spd(),), dict(lower=False)),
        "householder_product": (P.householder_product_p, (gen(), taus), {}),
        "ormqr": (P.ormqr_p, (gen(), taus, gen((n, 2))), dict(left=True, transpose=True)),
        "tridiagonal_solve": (P.tridiagonal_solve_p,
                              (gen((n,)), gen((n,)) + 4, gen((n,)), gen((n, 2))), dict(perturb_singular=False)),
    }[name]


_NAMES = ["cholesky", "triangular_solve", "lu", "qr", "qr_pivoting", "eigh", "svd", "svd_gesvd", "eig",
          "eig_right", "schur", "hessenberg", "tridiagonal", "householder_product", "ormqr", "tridiagonal_solve"]


def _bits_equal(got, want):
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("name", _NAMES)
def test_every_primitive_eager_is_the_compiled_program_bit_for_bit_single_and_stacked(name, dtype):
    rng = np.random.default_rng(7)
    for batch in [(), (2,), (3, 3)]:  # one matrix, a stack under the threshold, a stack over it (9)
        prim, args, params = _case(name, rng, batch, 5, dtype)

        def run(*xs, prim=prim, params=params):
            return prim.bind(*xs, **params)

        with host_oracle():
            compiled = ftrans.jit(run)(*args)
        calls = device_eager.host_stats["calls"]
        _bits_equal(run(*args), compiled)  # the first call of a signature: per matrix
        assert device_eager.host_stats["calls"] == calls
        _bits_equal(run(*args), compiled)  # again: a stack over the threshold runs the compiled program
        used = device_eager.host_stats["calls"] - calls
        assert used == (1 if len(batch) == 2 else 0), (batch, used)


def test_a_stack_runs_the_compiled_program_only_from_the_second_call_of_its_signature():
    x = _mk(np.random.default_rng(3), (16, 4, 4), np.float32)
    compiles = device_eager.host_stats["compiles"]
    L.qr(x)
    assert device_eager.host_stats["compiles"] == compiles  # a one-off call waits for no compilation
    L.qr(x)
    L.qr(x)
    assert device_eager.host_stats["compiles"] == compiles + 1  # compiled once, then reused


def test_a_failed_factorization_in_a_compiled_stack_gives_nans_for_that_matrix_only():
    rng = np.random.default_rng(4)
    x = _mk(rng, (12, 4, 4), np.float32, hermitian=True)
    x[5] = -x[5]  # not positive definite
    y = _mk(rng, (12, 4, 3), np.float32)
    y[2, 1, 1] = np.nan
    for _ in range(2):
        c = np.asarray(L.cholesky(x, symmetrize_input=False))
        s = np.asarray(L.svd(y, compute_uv=False))
    assert np.isnan(c[5][np.tril_indices(4)]).all() and not np.isnan(np.delete(c, 5, axis=0)).any()
    assert np.isnan(s[2]).all() and not np.isnan(np.delete(s, 2, axis=0)).any()
    with host_oracle():
        np.testing.assert_array_equal(c, np.asarray(JL.cholesky(x, symmetrize_input=False)))
        np.testing.assert_array_equal(s, np.asarray(JL.svd(y, compute_uv=False)))
