"""Sparse linear algebra (JAX's ``jax.experimental.sparse.linalg``): ``spsolve``."""

from __future__ import annotations

from typing import Any

import ftrans.numpy as jnp
from ftrans.errors import FtransValueError
from ftrans.experimental.sparse.csr import CSR

__all__ = ["lobpcg_standard", "spsolve"]


def spsolve(data: Any, indices: Any, indptr: Any, b: Any, tol: float = 1e-6, reorder: int = 1) -> Any:
    """The solution ``x`` of ``A x = b`` for the square CSR matrix ``A = (data, indices, indptr)``.

    JAX calls a sparse QR factorisation (SciPy's on the host, cuSOLVER on GPU);
    ftrans solves the densified matrix with an LU factorisation, which gives the
    same solution (and differentiates in ``data`` and ``b``) at dense cost.
    ``tol`` and ``reorder`` steer JAX's sparse factorisation and are accepted
    for compatibility.
    """
    del tol, reorder
    b = jnp.asarray(b)
    if b.ndim != 1:
        raise FtransValueError(f"spsolve: b must be a vector, got shape {tuple(b.shape)}")
    n = b.shape[0]
    if jnp.asarray(indptr).shape != (n + 1,):
        raise FtransValueError(f"spsolve: indptr of shape {tuple(jnp.asarray(indptr).shape)} does not describe a "
                               f"{n} x {n} matrix")
    a = CSR((data, indices, indptr), shape=(n, n)).todense()
    return jnp.linalg.solve(a, b.astype(a.dtype))


# ---------------------------------------------------------------- LOBPCG
# Knyazev's locally optimal block preconditioned conjugate gradient for the k largest eigenpairs of a
# symmetric operator. Each step does a Rayleigh-Ritz projection on the span of the current block X,
# its residuals R and the previous search directions P; [R, P] is made orthonormal against X and
# itself with two passes of a Gram-matrix (SVQB) orthonormalization, and directions that lost rank
# are masked out of the projected problem, so every shape stays fixed (the loop is a while_loop).


def _orthonormal_cols(w: Any, x: Any, eps: float) -> tuple[Any, Any]:
    """``w`` made orthogonal to the orthonormal ``x`` and orthonormal itself; also the kept-column mask."""
    import ftrans.lax as lax

    keep = None
    for _ in range(2):
        w = w - x @ (x.T @ w)
        w = w - x @ (x.T @ w)
        nrm = jnp.linalg.norm(w, axis=0)
        w = w / jnp.where(nrm > 0, nrm, 1)
        g = w.T @ w
        s, v = lax.linalg.eigh((g + g.T) / 2)[::-1]
        ok = s > eps * w.shape[1] * 10 * jnp.maximum(jnp.max(s), 1)
        w = (w @ v) * jnp.where(ok, 1 / jnp.sqrt(jnp.where(ok, s, 1)), 0)
        keep = ok if keep is None else keep & ok
    return w, keep


def _lobpcg(op: Any, x0: Any, m: int, tol: float, debug: bool) -> tuple:
    import ftrans.lax as lax

    n, k = x0.shape
    dt = x0.dtype
    eps = float(jnp.finfo(dt).eps)
    x, _ = jnp.linalg.qr(x0)
    p = jnp.zeros_like(x)
    hist = jnp.zeros((max(m, 1), k), dt)

    def ritz(x):
        ax = op(x)
        theta = jnp.sum(x * ax, axis=0)
        return ax, theta

    def converged(x):
        # JAX's documented test: every |A v - theta v| below tol * 10 * n * (theta + |A v|).
        ax, theta = ritz(x)
        r = ax - x * theta
        bound = 10 * n * (jnp.abs(theta) + jnp.linalg.norm(ax, axis=0))
        return jnp.all(jnp.linalg.norm(r, axis=0) < tol * bound)

    def cond(c):
        x, p, i, hist = c
        return (i < m) & ~converged(x)

    def body(c):
        x, p, i, hist = c
        ax, theta = ritz(x)
        r = ax - x * theta
        w, keep = _orthonormal_cols(jnp.concatenate([r, p], axis=1), x, eps)
        q = jnp.concatenate([x, w], axis=1)
        mask = jnp.concatenate([jnp.ones((k,), bool), keep])
        h = q.T @ op(q)
        h = (h + h.T) / 2
        big = jnp.sum(jnp.abs(h)) + 1
        h = jnp.where(mask[:, None] & mask[None, :], h, 0) - jnp.diag(jnp.where(mask, 0, big))
        vecs, _ = lax.linalg.eigh(h)
        vecs = vecs[:, ::-1]
        vk, rest = vecs[:, :k], vecs[:, k:]
        x_new = q @ vk
        x_new = x_new / jnp.linalg.norm(x_new, axis=0)
        # The new directions span {x, x_new} less x_new. In q's coordinates x is [I; 0], and [I; 0] less
        # its projection on vk is rest @ rest[:k].T: orthonormalising rest[:k].T (small) keeps p
        # orthonormal, where w @ vk[k:] would shrink to rounding noise as the iteration converges.
        basis, _ = jnp.linalg.qr(rest[:k].T)
        p_new = q @ (rest @ basis)
        hist = hist.at[jnp.minimum(i, hist.shape[0] - 1)].set(theta)
        return x_new, p_new, i + 1, hist

    x, p, i, hist = lax.while_loop(cond, body, (x, p, jnp.asarray(0, jnp.int32), hist))
    _, theta = ritz(x)
    order = jnp.argsort(-theta)
    theta, x = theta[order], x[:, order]
    if not debug:
        return theta, x, i
    info = {"X zeros": jnp.sum(jnp.all(x == 0, axis=0)).reshape(1), "lambda history": hist}
    return theta, x, i, info


def _check_lobpcg(op: Any, X: Any) -> None:
    import ftrans

    if X.ndim != 2:
        raise FtransValueError(f"lobpcg_standard: X must be a matrix, got shape {X.shape}")
    n, k = X.shape
    if k == 0:
        raise FtransValueError(f"lobpcg_standard: expected search dim > 0, got X of shape {X.shape}")
    out = ftrans.eval_shape(op, ftrans.ShapeDtypeStruct((n, k), X.dtype))
    if out.dtype != X.dtype:
        raise FtransValueError(f"lobpcg_standard: A, X must have same dtypes, got {out.dtype} and {X.dtype}")
    if k * 5 >= n:
        raise FtransValueError(f"lobpcg_standard: expected search dim * 5 < matrix dim, got {k} * 5 >= {n}")


def _lobpcg_standard_matrix(A: Any, X: Any, m: int = 100, tol: float | None = None, debug: bool = False) -> tuple:
    """LOBPCG with a dense matrix ``A`` (see :func:`lobpcg_standard`); ``debug=True`` adds an info dict."""
    A, X = jnp.asarray(A), jnp.asarray(X)
    n = X.shape[0]
    if A.shape != (n, n):
        raise FtransValueError(f"lobpcg_standard: A must be ({n}, {n}) to match X, got {A.shape}")
    return _lobpcg_standard_callable(lambda v: A @ v, X, m, tol, debug)


def _lobpcg_standard_callable(A: Any, X: Any, m: int = 100, tol: float | None = None, debug: bool = False) -> tuple:
    """LOBPCG with a callable operator ``A``; ``debug=True`` adds an info dict."""
    import ftrans

    X = jnp.asarray(X)
    _check_lobpcg(A, X)
    tol = float(jnp.finfo(X.dtype).eps) if tol is None else float(tol)
    return ftrans.jit(lambda x: _lobpcg(A, x, int(m), tol, debug))(X)


def lobpcg_standard(A: Any, X: Any, m: int = 100, tol: float | None = None) -> tuple:
    """The ``k = X.shape[1]`` largest eigenvalues (descending) and eigenvectors of the symmetric ``A``
    (an ``(n, n)`` array, or a callable mapping ``(n, k)`` blocks to ``(n, k)`` blocks), by LOBPCG from
    the initial block ``X``, with at most ``m`` iterations; returns ``(theta, U, iterations)``.

    It stops early once every eigenpair ``(lambda, v)`` has ``|A v - lambda v| < tol * 10 * n * (lambda +
    |A v|)``, as JAX's does; ``tol`` defaults to the float epsilon of ``X``'s dtype."""
    if callable(A):
        return _lobpcg_standard_callable(A, X, m, tol)
    return _lobpcg_standard_matrix(A, X, m, tol)
