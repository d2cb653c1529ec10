"""experimental.sparse.linalg.lobpcg_standard against JAX's: the k largest eigenpairs of a symmetric operator."""

from __future__ import annotations

import jax.experimental.sparse.linalg as jax_sparse_linalg
import jax.numpy as jnp
import numpy as np
import pytest

from ftrans.errors import FtransValueError
from ftrans.experimental.sparse import linalg


def _problem(n=100, k=4, seed=0):
    rng = np.random.RandomState(seed)
    q, _ = np.linalg.qr(rng.randn(n, n))
    e = np.linspace(1, 50, n)[::-1]
    a = ((q * e) @ q.T).astype(np.float32)
    return a, rng.randn(n, k).astype(np.float32), e


@pytest.mark.parametrize("as_callable", [False, True])
def test_lobpcg_matches_jax(as_callable):
    a, x, e = _problem()
    op = (lambda v: jnp.asarray(a) @ v) if as_callable else a
    theta, u, i = linalg.lobpcg_standard((lambda v: a @ v) if as_callable else a, x, 100)
    want_theta, _, _ = jax_sparse_linalg.lobpcg_standard(op, jnp.asarray(x), 100)
    np.testing.assert_allclose(np.asarray(theta), np.asarray(want_theta), rtol=1e-4)
    assert theta.dtype == want_theta.dtype and 0 < int(i) < 100
    u = np.asarray(u)
    np.testing.assert_allclose(u.T @ u, np.eye(x.shape[1]), atol=1e-4)
    np.testing.assert_allclose(a @ u, u * np.asarray(theta), atol=1e-3 * e[0])


def test_lobpcg_validates_arguments():
    a, x, _ = _problem()
    with pytest.raises(FtransValueError, match="search dim > 0"):
        linalg.lobpcg_standard(a, x[:, :0])
    with pytest.raises(FtransValueError, match="A, X must have same dtypes"):
        linalg.lobpcg_standard(lambda v: (a @ v).astype(np.float16), x)
    with pytest.raises(FtransValueError, match=r"A must be \(100, 100\)"):
        linalg.lobpcg_standard(a[:60], x)
    with pytest.raises(FtransValueError, match=r"search dim \* 5 < matrix dim"):
        linalg.lobpcg_standard(a[:15, :15], x[:15])


def test_lobpcg_stops_at_jaxs_documented_tolerance_in_float64():
    # converged when |A v - lambda v| < tol * 10 * n * (lambda + |A v|): in float64 (tol = eps) the
    # 10 is what lets an ill-conditioned spectrum stop before m iterations, as it does in JAX
    import jax

    import ftrans

    n, k, m = 100, 10, 80
    a = np.diag(np.linspace(1, 1000, n)[::-1])
    x = np.random.RandomState(0).randn(n, k)
    with ftrans.enable_x64(True), jax.enable_x64(True):
        want_theta, _, want_i = jax_sparse_linalg.lobpcg_standard(jnp.asarray(a), jnp.asarray(x), m)
        theta, u, i = linalg.lobpcg_standard(a, x, m)
        assert theta.dtype == np.float64 and int(want_i) < m and int(i) < m
        np.testing.assert_allclose(np.asarray(theta), np.asarray(want_theta), rtol=1e-12)
        u, theta = np.asarray(u), np.asarray(theta)
        resid = np.linalg.norm(a @ u - u * theta, axis=0)
        bound = 10 * n * (theta + np.linalg.norm(a @ u, axis=0)) * np.finfo(np.float64).eps
        assert np.all(resid < bound)
