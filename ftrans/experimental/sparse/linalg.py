"""Sparse linear algebra (JAX's ``jax.experimental.sparse.linalg``): ``spsolve``."""

from __future__ import annotations

from typing import Any

import ftrans.numpy as jnp
from ftrans.errors import FtransValueError
from ftrans.experimental.sparse.csr import CSR

__all__ = ["spsolve"]


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
