"""``ftrans.scipy.stats.bernoulli``: the Bernoulli distribution with success probability ``p``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``xlogy(k, p) + xlog1py(1 - k, -p)`` for ``k - loc`` in [0, 1], else ``-inf``."""
    k, p, loc = promote("bernoulli.logpmf", k, p, loc)
    x = k - loc
    val = special.xlogy(x, p) + special.xlog1py(const(k, 1) - x, -p)
    return jnp.where((x < const(k, 0)) | (x > const(k, 1)), const(k, -np.inf), val)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """The Bernoulli probability mass."""
    return jnp.exp(logpmf(k, p, loc))


def cdf(k: Any, p: Any) -> Any:
    """0 below 0, ``1 - p`` on [0, 1), 1 from 1; NaN for NaN or ``p`` outside [0, 1]."""
    k, p = promote("bernoulli.cdf", k, p)
    zero, one = const(k, 0), const(k, 1)
    bad = jnp.isnan(k) | jnp.isnan(p) | (p < zero) | (p > one)
    return jnp.select([bad, k < zero, (k >= zero) & (k < one), k >= one],
                      [const(k, np.nan), zero, one - p, one], zero)


def ppf(q: Any, p: Any) -> Any:
    """0 for ``q <= 1 - p``, else 1; NaN outside the domain."""
    q, p = promote("bernoulli.ppf", q, p)
    zero, one = const(q, 0), const(q, 1)
    bad = jnp.isnan(q) | jnp.isnan(p) | (p < zero) | (p > one) | (q < zero) | (q > one)
    return jnp.where(bad, const(q, np.nan), jnp.where(q <= one - p, zero, one))
