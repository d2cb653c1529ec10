"""``ftrans.scipy.stats.poisson``: the Poisson distribution with mean ``mu``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


def logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``xlogy(x, mu) - gammaln(x + 1) - mu`` for integer ``x = k - loc >= 0``, else ``-inf``."""
    k, mu, loc = promote("poisson.logpmf", k, mu, loc)
    x = k - loc
    val = special.xlogy(x, mu) - lax.lgamma(x + const(k, 1)) - mu
    return jnp.where((x < const(k, 0)) | (jnp.round(k) != k), const(k, -np.inf), val)


def pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """The Poisson probability mass."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``gammaincc(floor(k - loc) + 1, mu)``, 0 below ``loc``."""
    k, mu, loc = promote("poisson.cdf", k, mu, loc)
    x = k - loc
    return jnp.where(x < const(k, 0), const(k, 0), special.gammaincc(jnp.floor(const(k, 1) + x), mu))


def _entropy_by_sum(mu: Any, terms: int, upper: Any) -> Any:
    ks = jnp.arange(terms, dtype=mu.dtype)[:, None]
    probs = pmf(ks, mu, 0)
    probs = jnp.where(ks < upper[None, :], probs, const(mu, 0))
    return jnp.sum(special.entr(probs), axis=0)


def entropy(mu: Any, loc: Any = 0) -> Any:
    """The entropy ``-sum_k p_k log p_k``: summed directly for ``mu < 100``, Stirling's expansion above."""
    mu, loc = promote("poisson.entropy", mu, loc)  # loc shifts the support, not the entropy: only its shape counts
    m = jnp.ravel(mu)
    small = _entropy_by_sum(m, 35, jnp.ceil(m + 20))
    medium = _entropy_by_sum(m, 250, jnp.ceil(m + 10 * jnp.sqrt(m) + 20))
    large = const(m, 0.5) * jnp.log(const(m, 2 * np.pi * np.e) * m) - const(m, 1) / (12 * m)
    out = jnp.where(m == 0, jnp.zeros_like(m), jnp.where(m < 10, small, jnp.where(m < 100, medium, large)))
    return jnp.broadcast_to(jnp.reshape(out, mu.shape), jnp.broadcast_shapes(mu.shape, loc.shape))
