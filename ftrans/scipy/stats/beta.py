"""``ftrans.scipy.stats.beta``: the Beta distribution on ``[loc, loc + scale]``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``xlogy(a-1, y) + xlog1py(b-1, -y) - betaln(a, b) - log scale``; ``-inf`` outside the support, NaN
    for non-positive ``a``, ``b`` or ``scale``."""
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    one = const(x, 1)
    y = (x - loc) / scale
    val = -special.betaln(a, b) + special.xlogy(a - one, y) + special.xlog1py(b - one, -y) - lax.log(scale)
    val = jnp.where((x > loc + scale) | (x < loc), const(x, -np.inf), val)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), const(x, np.nan), val)


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Beta density."""
    return lax.exp(logpdf(x, a, b, loc, scale))


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(a, b, y)``, ``y`` clipped to [0, 1]."""
    x, a, b, loc, scale = promote("beta.cdf", x, a, b, loc, scale)
    return special.betainc(a, b, jnp.clip((x - loc) / scale, const(x, 0), const(x, 1)))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log cdf``."""
    return lax.log(cdf(x, a, b, loc, scale))


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(b, a, 1 - y)``."""
    x, a, b, loc, scale = promote("beta.sf", x, a, b, loc, scale)
    return special.betainc(b, a, 1 - jnp.clip((x - loc) / scale, const(x, 0), const(x, 1)))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log sf``."""
    return lax.log(sf(x, a, b, loc, scale))
