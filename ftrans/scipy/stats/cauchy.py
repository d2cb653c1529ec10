"""``ftrans.scipy.stats.cauchy``: the Cauchy distribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(pi scale) - log1p(z**2)``."""
    x, loc, scale = promote("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(lax.log(const(x, np.pi) * scale) + lax.log1p(z * z))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Cauchy density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1/2 + atan(z)/pi``."""
    x, loc, scale = promote("cauchy.cdf", x, loc, scale)
    return const(x, 0.5) + const(x, 1 / np.pi) * jnp.arctan((x - loc) / scale)


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log cdf``."""
    return lax.log(cdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The CDF of the mirrored point."""
    x, loc, scale = promote("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log sf``."""
    x, loc, scale = promote("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * tan(pi q - pi/2)``."""
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    return lax.tan(const(q, np.pi) * q - const(q, np.pi / 2)) * scale + loc


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * tan(pi/2 - pi q)``."""
    q, loc, scale = promote("cauchy.isf", q, loc, scale)
    return lax.tan(const(q, np.pi / 2) - const(q, np.pi) * q) * scale + loc
