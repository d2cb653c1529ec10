"""``ftrans.scipy.stats.laplace``: the Laplace (double exponential) distribution."""

from __future__ import annotations

from typing import Any

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-|x - loc|/scale - log(2 scale)``."""
    x, loc, scale = promote("laplace.logpdf", x, loc, scale)
    return -(lax.abs(x - loc) / scale + lax.log(const(x, 2) * scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Laplace density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(z)/2`` for ``z = (x - loc)/scale < 0``, else ``1 - exp(-z)/2``; only ``exp(-|z|)`` is taken, so
    neither branch overflows in the tails (no NaN gradient there)."""
    x, loc, scale = promote("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    tail = const(x, 0.5) * lax.exp(-lax.abs(z))
    return jnp.where(z < 0, tail, const(x, 1) - tail)
