"""``ftrans.scipy.stats.pareto``: the Pareto distribution with shape ``b``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale / b) - (b + 1) log y`` for ``y = (x - loc)/scale >= 1``, else ``-inf``."""
    x, b, loc, scale = promote("pareto.logpdf", x, b, loc, scale)
    y = (x - loc) / scale
    val = -(lax.log(scale / b) + (b + const(x, 1)) * lax.log(y))
    return jnp.where(y < const(x, 1), const(x, -np.inf), val)


def pdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Pareto density."""
    return lax.exp(logpdf(x, b, loc, scale))


def cdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - y**-b``, 0 below the support."""
    x, b, loc, scale = promote("pareto.cdf", x, b, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < const(x, 1), const(x, 0), const(x, 1) - jnp.power(y, -b))


def logcdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log1p(-y**-b)``, ``-inf`` below the support."""
    x, b, loc, scale = promote("pareto.logcdf", x, b, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < const(x, 1), const(x, -np.inf), lax.log1p(-jnp.power(y, -b)))


def logsf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-b log y``, 0 below the support."""
    x, b, loc, scale = promote("pareto.logsf", x, b, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < const(x, 1), const(x, 0), -(b * lax.log(y)))


def sf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logsf)``."""
    return lax.exp(logsf(x, b, loc, scale))


def ppf(q: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale (1 - q)**(-1/b)`` for ``q`` in [0, 1], NaN otherwise."""
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    one = const(q, 1)
    val = loc + scale * jnp.power(one - q, -(one / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), const(q, np.nan), val)
