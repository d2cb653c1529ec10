"""``ftrans.scipy.stats.norm``: the normal distribution with location ``loc`` and scale ``scale``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-((x - loc)/scale)**2 / 2 - log(sqrt(2 pi) scale)``."""
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    s2 = lax.square(scale)
    return (lax.log(const(x, 2 * np.pi) * s2) + lax.square(x - loc) / s2) / const(x, -2)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The normal density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The normal CDF, ``ndtr((x - loc)/scale)``."""
    x, loc, scale = promote("norm.cdf", x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log_ndtr((x - loc)/scale)``, accurate in the lower tail."""
    x, loc, scale = promote("norm.logcdf", x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The survival function ``1 - cdf``, computed as the CDF of the mirrored point."""
    x, loc, scale = promote("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log sf``, accurate in the upper tail."""
    x, loc, scale = promote("norm.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc + scale * ndtri(q)`` (the default float dtype, as JAX's)."""
    return jnp.asarray(special.ndtri(q) * scale + loc, float)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The inverse survival function ``loc - scale * ndtri(q)`` (the mirrored ``ppf``, accurate for small
    ``q``, where ``1 - q`` would round)."""
    q, loc, scale = promote("norm.isf", q, loc, scale)
    return -ppf(q, -loc, scale)
