"""``ftrans.scipy.stats.gamma``: the Gamma distribution with shape ``a``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``xlogy(a - 1, y) - y - gammaln(a) - log(scale)`` for ``y = (x - loc)/scale >= 0``, else ``-inf``."""
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    y = jnp.where(ok, (x - loc) / scale, const(x, 1))
    val = special.xlogy(a - const(x, 1), y) - y - (lax.lgamma(a) + lax.log(scale))
    return jnp.where(ok, val, const(x, -np.inf))


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Gamma density."""
    return lax.exp(logpdf(x, a, loc, scale))


def cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(a, y)``, ``y`` clipped at 0."""
    x, a, loc, scale = promote("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, jnp.clip((x - loc) / scale, const(x, 0), const(x, np.inf)))


def logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log cdf``."""
    return lax.log(cdf(x, a, loc, scale))


def sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(a, y)``, 1 below ``loc``."""
    x, a, loc, scale = promote("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < const(y, 0), const(y, 1), special.gammaincc(a, y))


def logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log sf``."""
    return lax.log(sf(x, a, loc, scale))
