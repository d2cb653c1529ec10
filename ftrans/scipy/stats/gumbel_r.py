"""``ftrans.scipy.stats.gumbel_r``: the right-skewed Gumbel (extreme value) distribution."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(name: str, x: Any, loc: Any, scale: Any) -> tuple:
    x, loc, scale = promote(name, x, loc, scale)
    return (x - loc) / scale, scale > const(scale, 0), x, loc, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale) - z - exp(-z)``; NaN for ``scale <= 0``."""
    z, ok, x, _, scale = _z("gumbel_r.logpdf", x, loc, scale)
    return jnp.where(ok, special.xlogy(const(x, -1), scale) - (z + lax.exp(-z)), const(x, np.nan))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The density."""
    return lax.exp(logpdf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-exp(-z)``."""
    z, ok, x, _, _ = _z("gumbel_r.logcdf", x, loc, scale)
    return jnp.where(ok, -lax.exp(-z), const(x, np.nan))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(-exp(-z))``."""
    return lax.exp(logcdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - exp(-exp(-z))``."""
    z, ok, x, _, _ = _z("gumbel_r.sf", x, loc, scale)
    return jnp.where(ok, const(x, 1) - lax.exp(-lax.exp(-z)), const(x, np.nan))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(1 - exp(-exp(-z)))``, computed as ``log1mexp(exp(-z))``."""
    z, ok, x, _, _ = _z("gumbel_r.logsf", x, loc, scale)
    u = lax.exp(-z)
    # log(1 - exp(-u)), by log(-expm1(-u)) for small u and log1p(-exp(-u)) for large
    val = jnp.where(u < const(u, np.log(2)), lax.log(-lax.expm1(-u)), lax.log1p(-lax.exp(-u)))
    return jnp.where(ok, val, const(x, np.nan))


def ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale log(-log p)`` for ``0 < p < 1``, NaN otherwise."""
    p, loc, scale = promote("gumbel_r.ppf", p, loc, scale)
    ok = (p > const(p, 0)) & (p < const(p, 1))
    return jnp.where(ok, loc - scale * lax.log(special.xlogy(const(p, -1), p)), const(p, np.nan))
