"""``ftrans.scipy.stats.binom``: the binomial distribution of ``n`` trials with probability ``p``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``log C(n, y) + xlogy(y, p) + xlog1py(n - y, -p)`` for ``y = k - loc`` in ``[0, n]``."""
    k, n, p, loc = promote("binom.logpmf", k, n, p, loc)
    y = k - loc
    one = const(k, 1)
    comb = lax.lgamma(n + one) - (lax.lgamma(y + one) + lax.lgamma(n - y + one))
    lin = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    val = comb + lin
    val = jnp.where(((y == 0) & (n == 0)) | (lin == 0), const(k, 0), val)
    return jnp.where((k >= loc) & (k < loc + n + one), val, const(k, -np.inf))


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """The binomial probability mass."""
    return lax.exp(logpmf(k, n, p, loc))
