"""``ftrans.scipy.stats.dirichlet``: the Dirichlet distribution with concentrations ``alpha``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, alpha: Any) -> Any:
    """``sum((alpha - 1) log x) - (sum gammaln(alpha) - gammaln(sum alpha))`` on the simplex, ``-inf`` off it.

    ``x`` holds the components along axis 0 (all of them, or all but the last,
    which is then ``1 - sum``); ``alpha`` is 1-d.
    """
    from ftrans.numpy._extras import _inexact_nobcast

    x, alpha = _inexact_nobcast("dirichlet.logpdf", x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one entry fewer; "
                         f"got x.shape={x.shape}, alpha.shape={alpha.shape}")
    one = const(x, 1)
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, one - x.sum(0, keepdims=True)], axis=0)
    norm = jnp.sum(lax.lgamma(alpha)) - lax.lgamma(jnp.sum(alpha))
    if x.ndim > 1:
        alpha = jnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    val = jnp.sum(special.xlogy(alpha - one, x), axis=0) - norm
    simplex = jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - one) < 1e-6)
    return jnp.where(simplex, val, const(x, -np.inf))


def pdf(x: Any, alpha: Any) -> Any:
    """The density."""
    return lax.exp(logpdf(x, alpha))
