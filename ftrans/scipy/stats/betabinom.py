"""``ftrans.scipy.stats.betabinom``: the beta-binomial distribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    """``-log1p(n) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b)``, ``y = floor(k) - loc``."""
    k, n, a, b, loc = promote("betabinom.logpmf", k, n, a, b, loc)
    y = lax.floor(k) - loc
    one, zero = const(y, 1), const(y, 0)
    comb = -(lax.log1p(n) + special.betaln(n - y + one, y + one))
    val = comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    val = jnp.where((y == zero) & (n == zero), zero, val)
    val = jnp.where((y < -loc) | (y > n) | (y + a <= zero), const(y, -np.inf), val)
    return jnp.where((n < zero) | (a <= zero) | (b <= zero), const(y, np.nan), val)


def pmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    """The beta-binomial probability mass."""
    return lax.exp(logpmf(k, n, a, b, loc))
