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
    """``loc + scale * tan(pi (q - 1/2))``: ``-inf`` at 0, ``inf`` at 1, NaN outside [0, 1].

    The tangent always gets a small argument: ``tan(pi (q - 1/2))`` on the middle half (``q - 1/2`` is exact
    there), ``-1/tan(pi q)`` below it and ``1/tan(pi (1 - q))`` above it, so both tails are accurate and the
    derivative is ``pi scale / sin(pi q)**2`` everywhere (``pi scale`` at the median)."""
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    quarter, three_quarters, one = const(q, 0.25), const(q, 0.75), const(q, 1)
    pi = const(q, np.pi)
    low, high = q < quarter, q > three_quarters
    # each branch sees only arguments of its own regime, so the unselected ones stay finite under grad
    q_low = jnp.where(low, q, quarter)
    q_mid = jnp.where(low | high, const(q, 0.5), q)
    q_high = jnp.where(high, q, three_quarters)
    unscaled = jnp.where(low, -one / lax.tan(pi * q_low),
                         jnp.where(high, one / lax.tan(pi * (one - q_high)), lax.tan(pi * (q_mid - const(q, 0.5)))))
    return jnp.where((q < const(q, 0)) | (q > one), const(q, np.nan), unscaled * scale + loc)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale * tan(pi (q - 1/2))``, the mirrored ``ppf``: ``inf`` at 0, ``-inf`` at 1, NaN outside."""
    q, loc, scale = promote("cauchy.isf", q, loc, scale)
    return -ppf(q, -loc, scale)
