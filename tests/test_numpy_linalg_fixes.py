"""numpy.linalg details against jax: slogdet(method='qr'), vector_norm over several (or no) axes,
tensorsolve(axes=), matrix_rank's rtol/tol, lstsq of a zero matrix,
det's and pinv's derivatives at singular matrices."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp
from tests.backend_util import host_oracle


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (3, 3), (2, 4, 4)])
def test_slogdet_qr_matches_jax(shape):
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = jnp.linalg.slogdet(a, method="qr")
    for got in (fnp.linalg.slogdet(a, method="qr"), ftrans.jit(lambda a: fnp.linalg.slogdet(a, method="qr"))(a)):
        np.testing.assert_allclose(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError):
        fnp.linalg.slogdet(np.eye(2, dtype=np.complex64), method="qr")


@pytest.mark.parametrize("axis", [None, (), 0, (-1,), (0, 1), (1, 3), (0, 2, 3)])
@pytest.mark.parametrize("ord", [1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [True, False])
def test_vector_norm_axes_match_jax(axis, ord, keepdims):
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = jnp.linalg.vector_norm(x, axis=axis, ord=ord, keepdims=keepdims)
    got = fnp.linalg.vector_norm(x, axis=axis, ord=ord, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_tensorsolve_axes_and_matrix_rank_and_lstsq_match_jax():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 1, 3, 6)).astype(np.float32)
    b = rng.standard_normal((1, 6)).astype(np.float32)
    np.testing.assert_allclose(fnp.linalg.tensorsolve(a, b, axes=(0, 2)), jnp.linalg.tensorsolve(a, b, axes=(0, 2)),
                               rtol=1e-3, atol=1e-3)
    x = rng.standard_normal((2, 4, 4)).astype(np.float32)
    x[0, 3] = x[0, 2]
    for kw in ({}, {"rtol": 1e-2}, {"tol": 0.5}, {"rtol": np.array([0.1, 2.0], np.float32)}):
        np.testing.assert_array_equal(fnp.linalg.matrix_rank(x, **kw), jnp.linalg.matrix_rank(x, **kw))
    with pytest.raises(ValueError, match="only one of tol or rtol"):
        fnp.linalg.matrix_rank(x, rtol=1.0, tol=1.0)
    for shape in [(2, 1), (2, 2), (1, 2), (4, 3)]:
        z, o = np.zeros(shape, np.float32), np.ones(shape, np.float32)
        got = fnp.linalg.lstsq(z, o, numpy_resid=True)
        want = jnp.linalg.lstsq(z, o, numpy_resid=True)
        for g, w in zip(got, want):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eager_eigh_eigenvectors_match_jit_and_jax(dtype, uplo):
    # the eager (host) eigh runs the same LAPACK routine as the compiled kernel: same phases
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 5, 5))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((2, 5, 5))
    a = a.astype(dtype)

    def f(x):
        return fnp.linalg.eigh(x, UPLO=uplo, symmetrize_input=False)

    # eager ftrans runs on the host: jax on the CPU device is its oracle (on a GPU the compiled programs of
    # both call cuSOLVER, whose phases are not LAPACK's)
    with host_oracle():
        want_host = jnp.linalg.eigh(a, UPLO=uplo, symmetrize_input=False)
    want_device = jnp.linalg.eigh(a, UPLO=uplo, symmetrize_input=False)
    for got, want in ((f(a), want_host), (ftrans.jit(f)(a), want_device)):
        np.testing.assert_allclose(np.asarray(got.eigenvectors), np.asarray(want.eigenvectors), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(got.eigenvalues), np.asarray(want.eigenvalues), rtol=1e-5, atol=1e-5)
    bad = np.eye(3, dtype=dtype)
    bad[0, 1] = np.nan
    with host_oracle():
        np.testing.assert_array_equal(np.isnan(np.asarray(fnp.linalg.eigh(bad).eigenvalues)),
                                      np.isnan(np.asarray(jnp.linalg.eigh(bad).eigenvalues)))


def _singular_stack():
    """A (5, 5, 5) stack: invertible, rank n-1, rank n-2, zero, and rank n-1 with an early zero pivot."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 5, 5)).astype(np.float32)
    a[1, :, 4] = a[1, :, 0] - a[1, :, 2]
    a[2, :, 3] = a[2, :, 0]
    a[2, :, 4] = a[2, :, 1]
    a[3] = 0
    a[4] = np.eye(5, dtype=np.float32)
    a[4, :2, :2] = [[1.0, 2.0], [2.0, 4.0]]  # its LU's zero pivot is the second: zero here, as in JAX
    return a


def test_det_derivatives_at_singular_matrices_match_jax():
    # det's JVP goes through the adjugate, so it is finite (and right) where a⁻¹ does not exist
    a = _singular_stack()
    t = np.random.default_rng(4).standard_normal(a.shape).astype(np.float32)

    def both(m, grad, jvp):
        return jvp(m.linalg.det, (a,), (t,))[1], grad(lambda x: m.linalg.det(x).sum())(a)

    want = jax.jit(lambda: both(jnp, jax.grad, jax.jvp))()
    for g, w in zip(both(fnp, ftrans.grad, ftrans.jvp), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_pinv_derivative_at_repeated_and_dropped_singular_values_matches_jax():
    # the pseudo-inverse's own derivative, not the SVD's (which divides by differences of singular values)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 4, 3)) + 1j * rng.standard_normal((2, 4, 3))).astype(np.complex64)
    t = (rng.standard_normal((2, 4, 3)) + 1j * rng.standard_normal((2, 4, 3))).astype(np.complex64)
    rtol = np.array([0.1, 0.9], np.float32)

    def all_of(m, jacobian, jvp):
        def f(p):
            return m.linalg.pinv(m.array([[0.0, 0.0], [-p, 1.0]], m.float32) / (1 + p**2))

        return (jacobian(m.linalg.pinv)(np.eye(2, dtype=np.float32)), jacobian(f)(np.float32(2.0)),
                *jvp(m.linalg.pinv, (a,), (t,)), m.linalg.pinv(a, rtol=rtol))

    want = jax.jit(lambda: all_of(jnp, jax.jacobian, jax.jvp))()
    for g, w in zip(all_of(fnp, ftrans.jacobian, ftrans.jvp), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
