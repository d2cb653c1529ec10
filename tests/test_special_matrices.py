"""``scipy.linalg``'s structured matrices and SciPy-style ``cholesky``, against jax (and SciPy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as osl

import ftrans
import ftrans.scipy.linalg as fsl
from tests.backend_util import host_oracle

RNG = np.random.default_rng(0)


def _compare(name, got, want):
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, g.dtype, w.shape, w.dtype)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    return g


def same_all(cases):
    """ftrans == jax for each ``(name, args, kw)`` of ``cases``, the jax references computed by one program
    (one compile instead of one per case); returns ftrans's results in order."""
    flat = [a for _, args, _ in cases for a in args if isinstance(a, np.ndarray)]

    def refs(*arrays):
        it = iter(arrays)
        return [getattr(jsl, name)(*[next(it) if isinstance(a, np.ndarray) else a for a in args], **kw)
                for name, args, kw in cases]

    with host_oracle():  # ftrans's eager calls run on the host (and XLA's GPU compiler has no int convolution)
        wants = jax.jit(refs)(*flat)
    return [_compare(name, getattr(fsl, name)(*args, **kw), w) for (name, args, kw), w in zip(cases, wants)]


VEC = RNG.standard_normal(5).astype(np.float32)
ROW = RNG.standard_normal(3).astype(np.float32)
BATCH = RNG.standard_normal((2, 4)).astype(np.float32)


@pytest.mark.parametrize("args", [(VEC,), (VEC, ROW), (BATCH, ROW), (BATCH,), (np.array([1, 2 + 1j, 3]),),
                                  (np.arange(4),), (np.zeros(0, np.float32), ROW)], ids=str)
def test_toeplitz_and_hankel(args):
    t = same_all([("toeplitz", args, {})] + ([("hankel", args, {})] if args[0].size else []))[0]
    if len(args) == 2 and args[0].ndim == 1 and args[0].size:
        np.testing.assert_allclose(t, osl.toeplitz(*args), rtol=1e-6)


def test_vector_built_matrices():
    same_all([("circulant", (VEC,), {}), ("circulant", (BATCH,), {}),
              ("leslie", (np.array([0.1, 2.0, 1.0, 0.1], np.float32), np.array([0.2, 0.8, 0.7], np.float32)), {})]
             + [("companion", (a,), {}) for a in (np.array([1.0, -10, 31, -30], np.float32), np.array([1, 2, 3]),
                                                   BATCH)]
             + [("fiedler", (VEC,), {})])
    fc = same_all([("fiedler_companion", (np.arange(1.0, k + 1, dtype=np.float32),), {}) for k in range(1, 7)])
    for k, m in zip(range(1, 7), fc):
        if k > 1:  # same spectrum as the companion matrix
            np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(m)),
                                       np.sort_complex(np.linalg.eigvals(osl.companion(np.arange(1.0, k + 1)))),
                                       rtol=1e-3, atol=1e-3)
    grid = [(mode, n) for mode in ("full", "same", "valid") for n in (1, 2, 4, 6)]
    ms = same_all([("convolution_matrix", (np.array([1.0, 2.0, 3.0, 4.0], np.float32), n, mode), {})
                   for mode, n in grid])
    for (mode, n), m in zip(grid, ms):
        v = np.arange(1.0, n + 1)
        np.testing.assert_allclose(m @ v, np.convolve([1.0, 2.0, 3.0, 4.0], v, mode), rtol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
def test_size_built_matrices(n):
    cases = [(name, (n,), kws) for name, kws in [
        ("hilbert", {}), ("invhilbert", {}), ("pascal", {}), ("pascal", {"kind": "lower"}),
        ("pascal", {"kind": "upper"}), ("invpascal", {}), ("invpascal", {"kind": "upper"}),
        ("dft", {}), ("dft", {"scale": "n"}), ("dft", {"scale": "sqrtn"})]]
    if n:
        cases += [("helmert", (n,), {}), ("helmert", (n,), {"full": True})]
    if n and not n & (n - 1):
        cases += [("hadamard", (n,), {}), ("hadamard", (n, np.float32), {})]
    same_all(cases)
    if n:
        if n <= 5:  # (beyond, float32 cannot hold the inverse's large integers exactly enough)
            np.testing.assert_allclose(np.asarray(fsl.invhilbert(n)) @ osl.hilbert(n), np.eye(n), atol=1e-3)


def test_gradients_jit_and_vmap():
    want_grad, want_hankel, want_circ = jax.jit(lambda c, r, b: (
        jax.grad(lambda c: (jsl.toeplitz(c) ** 2).sum())(c), jsl.hankel(c, r), jsl.circulant(b)))(VEC, ROW, BATCH)
    np.testing.assert_allclose(ftrans.grad(lambda c: (fsl.toeplitz(c) ** 2).sum())(VEC), want_grad, rtol=1e-5)
    np.testing.assert_allclose(ftrans.jit(fsl.hankel)(VEC, ROW), want_hankel, rtol=1e-6)
    np.testing.assert_allclose(ftrans.vmap(fsl.circulant)(BATCH), want_circ, rtol=1e-6)


def test_cholesky_scipy_convention():
    a = RNG.standard_normal((2, 4, 4)).astype(np.float32)
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4, dtype=np.float32)
    u = same_all([("cholesky", (spd,), {}), ("cholesky", (spd,), {"lower": True}),
                  ("cholesky", (np.triu(spd[0]),), {})])[0]  # only the upper triangle is read
    np.testing.assert_allclose(u[0], osl.cholesky(spd[0]), rtol=1e-4, atol=1e-4)
    # The oracle reads the upper triangle explicitly: jax 0.11's cholesky JVP (and ftrans's) sends no
    # cotangent to the triangle the factorization does not read; jax 0.10's sent it one.
    def upper(x):
        return jnp.triu(x) + jnp.swapaxes(jnp.triu(x, 1), -1, -2)

    np.testing.assert_allclose(ftrans.grad(lambda x: fsl.cholesky(x).sum())(spd[0]),
                               jax.jit(jax.grad(lambda x: jsl.cholesky(upper(x)).sum()))(spd[0]), rtol=1e-3, atol=1e-4)


def test_errors():
    with pytest.raises(ValueError, match="at least 1-dimensional"):
        fsl.hankel(1.0)
    with pytest.raises(ValueError, match="one shorter"):
        fsl.leslie([1.0, 2.0, 3.0], [1.0])
    with pytest.raises(ValueError, match="at least 2"):
        fsl.companion([1.0])
    with pytest.raises(ValueError, match="power of 2"):
        fsl.hadamard(6)
    # Every invalid n gets the function's whole condition, as JAX's: a negative one too.
    for f, j, bad in ((fsl.hadamard, jsl.hadamard, (0, -1, 3)), (fsl.helmert, jsl.helmert, (0, -5))):
        for n in bad:
            with pytest.raises(ValueError) as want:
                j(n)
            with pytest.raises(ValueError, match=str(want.value).split(";")[0]):
                f(n)
    with pytest.raises(ValueError, match="mode"):
        fsl.convolution_matrix([1.0, 2.0], 3, "wide")
    with pytest.raises(ValueError, match="kind"):
        fsl.pascal(3, "diagonal")
    with pytest.raises(ValueError, match="complex"):
        fsl.dft(3, dtype=np.float32)
