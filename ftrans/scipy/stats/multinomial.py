"""``ftrans.scipy.stats.multinomial``: the multinomial distribution of ``n`` draws over probabilities ``p``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpmf", "pmf"]


def logpmf(x: Any, n: Any, p: Any) -> Any:
    """``gammaln(n + 1) + sum(xlogy(x, p) - gammaln(x + 1))`` where ``sum(x, axis=-1) == n``, else ``-inf``."""
    from ftrans.core.operands import promote_dtypes

    (p,) = promote("multinomial.logpmf", p)
    (x, n), dt, _ = promote_dtypes("multinomial.logpmf", x, n)
    if not np.issubdtype(dt, np.integer):
        raise ValueError(f"x and n must be of integer type; got x.dtype={jnp.asarray(x).dtype}, "
                         f"n.dtype={jnp.asarray(n).dtype}")
    x, n = jnp.asarray(x), jnp.asarray(n)
    # the support test sums each last-axis row of the counts, exactly, in their integer dtype
    in_support = jnp.equal(jnp.sum(x, axis=-1, dtype=x.dtype), n)
    x = x.astype(p.dtype)
    n = n.astype(p.dtype)
    one = const(p, 1)
    val = lax.lgamma(n + one) + jnp.sum(special.xlogy(x, p) - lax.lgamma(x + one), axis=-1)
    return jnp.where(in_support, val, const(p, -np.inf))


def pmf(x: Any, n: Any, p: Any) -> Any:
    """The probability mass."""
    return lax.exp(logpmf(x, n, p))
