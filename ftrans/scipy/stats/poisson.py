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
    return jnp.where((x < const(k, 0)) | (jnp.round(x) != x), const(k, -np.inf), val)


def pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """The Poisson probability mass."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``gammaincc(floor(k - loc) + 1, mu)``, 0 below ``loc``."""
    k, mu, loc = promote("poisson.cdf", k, mu, loc)
    x = k - loc
    return jnp.where(x < const(k, 0), const(k, 0), special.gammaincc(jnp.floor(const(k, 1) + x), mu))


def _entropy_by_sum(mu: Any, terms: int, upper: Any) -> Any:
    """``sum_k -p_k log p_k`` over ``k < upper``, each term from ``logpmf``: ``entr(pmf)`` has an infinite
    derivative where the mass underflows to 0, which made the gradient NaN."""
    ks = jnp.arange(terms, dtype=mu.dtype)[:, None]
    logp = logpmf(ks, mu, 0)
    terms_ = jnp.where(ks < upper[None, :], -jnp.exp(logp) * logp, const(mu, 0))
    return jnp.sum(terms_, axis=0)


def entropy(mu: Any, loc: Any = 0) -> Any:
    """The entropy ``-sum_k p_k log p_k``: summed directly for ``mu < 100``, Stirling's expansion above."""
    mu, loc = promote("poisson.entropy", mu, loc)  # loc shifts the support, not the entropy: only its shape counts
    m = jnp.ravel(mu)
    # each regime computes on arguments of its own range only, so the unselected ones add no inf/NaN to
    # the gradient (at mu = 0, or Stirling's 1/(12 mu) at a tiny mu)
    m_small = jnp.where((m == 0) | (m >= 10), const(m, 1), m)
    m_medium = jnp.where((m < 10) | (m >= 100), const(m, 10), m)
    m_large = jnp.where(m < 100, const(m, 100), m)
    small = _entropy_by_sum(m_small, 35, jnp.ceil(m_small + 20))
    medium = _entropy_by_sum(m_medium, 250, jnp.ceil(m_medium + 10 * jnp.sqrt(m_medium) + 20))
    large = const(m, 0.5) * jnp.log(const(m, 2 * np.pi * np.e) * m_large) - const(m, 1) / (12 * m_large)
    out = jnp.where(m == 0, jnp.zeros_like(m), jnp.where(m < 10, small, jnp.where(m < 100, medium, large)))
    return jnp.broadcast_to(jnp.reshape(out, mu.shape), jnp.broadcast_shapes(mu.shape, loc.shape))
