"""``ftrans.scipy.stats.nbinom``: the negative binomial distribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``gammaln(y + n) - gammaln(n) - gammaln(y + 1) + xlogy(n, p) + xlogy(y, 1 - p)``, ``-inf`` below ``loc``."""
    k, n, p, loc = promote("nbinom.logpmf", k, n, p, loc)
    one = const(k, 1)
    y = k - loc
    comb = lax.lgamma(y + n) - lax.lgamma(n) - lax.lgamma(y + one)
    val = comb + special.xlogy(n, p) + special.xlogy(y, one - p)
    return jnp.where(k < loc, const(k, -np.inf), val)


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """The negative binomial probability mass."""
    return lax.exp(logpmf(k, n, p, loc))
