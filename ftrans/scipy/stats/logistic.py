"""``ftrans.scipy.stats.logistic``: the logistic distribution."""

from __future__ import annotations

from typing import Any

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-2 logaddexp(z/2, -z/2) - log(scale)`` for ``z = (x - loc)/scale`` (stable in both tails)."""
    x, loc, scale = promote("logistic.logpdf", x, loc, scale)
    half = (x - loc) / scale / const(x, 2)
    return const(x, -2) * jnp.logaddexp(half, -half) - lax.log(scale)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The logistic density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``expit((x - loc)/scale)``."""
    x, loc, scale = promote("logistic.cdf", x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``expit(-(x - loc)/scale)``."""
    x, loc, scale = promote("logistic.sf", x, loc, scale)
    return special.expit(-((x - loc) / scale))


def ppf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * logit(x)`` (``x`` a probability: JAX's parameter name)."""
    x, loc, scale = promote("logistic.ppf", x, loc, scale)
    return special.logit(x) * scale + loc


def isf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale * logit(x)`` (``x`` a probability: JAX's parameter name)."""
    x, loc, scale = promote("logistic.isf", x, loc, scale)
    return -special.logit(x) * scale + loc
