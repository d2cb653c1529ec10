"""``ftrans.scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale)`` inside the interval, ``-inf`` outside."""
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    out = (x > loc + scale) | (x < loc)
    return jnp.where(out, const(x, -np.inf), -lax.log(scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The uniform density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """0 below ``loc``, 1 above ``loc + scale``, linear in between (NaN for NaN ``x``)."""
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    hi = loc + scale
    return jnp.select([x < loc, x > hi, (x >= loc) & (x <= hi)],
                      [const(x, 0), const(x, 1), (x - loc) / scale], const(x, 0))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * q`` for ``q`` in [0, 1], NaN otherwise."""
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), const(q, np.nan), loc + scale * q)
