"""``ftrans.scipy.stats.multivariate_normal``: the multivariate normal distribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    """The log-density of ``N(mean, cov)`` at ``x`` (batched over leading axes).

    ``cov`` may be a scalar (isotropic variance) or an ``(..., n, n)`` matrix,
    factored by Cholesky; ``allow_singular`` is not supported (as in JAX).
    """
    from ftrans.numpy._extras import _inexact_nobcast
    from ftrans.numpy._functional import vectorize

    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = _inexact_nobcast("multivariate_normal.logpdf", x, mean, cov)
    log2pi = const(x, np.log(2 * np.pi))
    if not mean.shape:
        return const(x, -0.5) * jnp.square(x - mean) / cov - const(x, 0.5) * (log2pi + jnp.log(cov))
    n = mean.shape[-1]
    if not cov.shape:
        y = x - mean
        return const(x, -0.5) * jnp.einsum("...i,...i->...", y, y) / cov - n / 2 * (log2pi + jnp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf got incompatible shapes: mean {mean.shape}, cov {cov.shape} "
                         f"(cov must end in ({n}, {n}))")
    chol = jnp.linalg.cholesky(cov)
    solve = vectorize(lambda c, v: lax.linalg.triangular_solve(c, v[:, None], left_side=True, lower=True)[:, 0],
                      signature="(n,n),(n)->(n)")
    y = solve(chol, x - mean)
    return (const(x, -0.5) * jnp.einsum("...i,...i->...", y, y) - n / 2 * log2pi
            - jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)).sum(-1))


def pdf(x: Any, mean: Any, cov: Any) -> Any:
    """The density."""
    return lax.exp(logpdf(x, mean, cov))
