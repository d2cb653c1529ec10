"""``ftrans.scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of freedom."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``xlogy(df/2 - 1, y) - y/2 - lgamma(df/2) - df/2 log 2 - log scale``, ``-inf`` below ``loc``
    (``xlogy``: finite at ``y = 0`` for ``df = 2``, where ``0 * log 0`` would be NaN)."""
    x, df, loc, scale = promote("chi2.logpdf", x, df, loc, scale)
    two = const(x, 2)
    y = (x - loc) / scale
    k = df / two
    kernel = special.xlogy(k - const(x, 1), y) - y / two
    norm = -(lax.lgamma(k) + const(x, np.log(2)) * df / two)
    return jnp.where(x < loc, const(x, -np.inf), norm - lax.log(scale) + kernel)


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The chi-squared density."""
    return lax.exp(logpdf(x, df, loc, scale))


def cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(df/2, y/2)``."""
    x, df, loc, scale = promote("chi2.cdf", x, df, loc, scale)
    two = const(x, 2)
    return special.gammainc(df / two, jnp.clip((x - loc) / (scale * two), const(x, 0), const(x, np.inf)))


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log cdf``."""
    return lax.log(cdf(x, df, loc, scale))


def sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(df/2, y/2)``."""
    x, df, loc, scale = promote("chi2.sf", x, df, loc, scale)
    two = const(x, 2)
    return special.gammaincc(df / two, jnp.clip((x - loc) / (scale * two), const(x, 0), const(x, np.inf)))


def logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log sf``."""
    return lax.log(sf(x, df, loc, scale))
