"""``ftrans.scipy.stats.expon``: the exponential distribution shifted by ``loc``, scaled by ``scale``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-(x - loc)/scale - log(scale)`` for ``x >= loc``, else ``-inf``."""
    x, loc, scale = promote("expon.logpdf", x, loc, scale)
    return jnp.where(x < loc, const(x, -np.inf), -((x - loc) / scale + lax.log(scale)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The exponential density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - exp(-(x - loc)/scale)`` (by ``expm1``), 0 below ``loc``."""
    x, loc, scale = promote("expon.cdf", x, loc, scale)
    z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(z), -lax.expm1(z))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-(x - loc)/scale``, 0 below ``loc``."""
    x, loc, scale = promote("expon.logsf", x, loc, scale)
    z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(z), z)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The survival function ``exp(logsf)``."""
    return lax.exp(logsf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log1mexp((x - loc)/scale)`` (accurate near ``loc`` too), ``-inf`` below ``loc``."""
    from ftrans.nn import log1mexp

    x, loc, scale = promote("expon.logcdf", x, loc, scale)
    below = x < loc
    # below loc log1mexp would be NaN (and its derivative too): give it a harmless argument there
    z = jnp.where(below, const(x, 1), (x - loc) / scale)
    return jnp.where(below, const(x, -np.inf), log1mexp(z))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale * log1p(-q)`` for ``q`` in [0, 1], NaN otherwise."""
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), const(q, np.nan), loc - scale * lax.log1p(-q))
