"""``ftrans.scipy.stats.truncnorm``: the normal distribution truncated to ``[a, b]`` (standardized bounds)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats import norm
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_diff(x: Any, y: Any) -> Any:
    """``log(exp(x) - exp(y))``."""
    return special.logsumexp(jnp.stack([x, y]), b=jnp.stack([jnp.ones_like(x), -jnp.ones_like(y)]), axis=0)


def _log_mass(a: Any, b: Any) -> Any:
    """``log(ndtr(b) - ndtr(a))``, from the tail nearer zero (mirrored for ``a > 0``)."""
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    left = b <= 0
    right = a > 0
    central = ~(left | right)
    ta = jnp.where(right, -b, a)
    tb = jnp.where(right, -a, b)
    tail = _log_diff(special.log_ndtr(tb), special.log_ndtr(ta))
    mid = jnp.log1p(-special.ndtr(a) - special.ndtr(-b))
    return jnp.where(central, mid, tail)


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``norm.logpdf(x) - log(mass of [a, b])``; ``-inf`` outside, NaN unless ``a < b``."""
    x, a, b, loc, scale = promote("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_mass(a, b)
    z = (x - loc) / scale
    val = jnp.where((z < a) | (z > b), const(x, -np.inf), val)
    return jnp.where(a < b, val, const(x, np.nan))  # NaN also for a NaN bound


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The density."""
    return lax.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(mass of [a, x] / mass of [a, b])``, from the survival side near 1."""
    x, a, b, loc, scale = promote("truncnorm.logcdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    total = _log_mass(a, b)
    lcdf = _log_mass(a, z) - total
    lsf = _log_mass(z, b) - total
    val = jnp.select([z >= b, z <= a, lcdf > -0.1, z > a],
                     [const(x, 0), const(x, -np.inf), jnp.log1p(-jnp.exp(lsf)), lcdf], const(x, np.nan))
    return jnp.where(a < b, val, const(x, np.nan))  # a NaN x meets no condition above; a NaN bound fails a < b


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The CDF."""
    return lax.exp(logcdf(x, a, b, loc, scale))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``logcdf`` of the mirrored distribution."""
    x, a, b, loc, scale = promote("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The survival function."""
    return lax.exp(logsf(x, a, b, loc, scale))
