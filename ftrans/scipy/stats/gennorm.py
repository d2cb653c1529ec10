"""``ftrans.scipy.stats.gennorm``: the generalized normal distribution with shape ``beta``."""

from __future__ import annotations

from typing import Any

from ftrans import lax
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: Any, beta: Any) -> Any:
    """``log(beta/2) - lgamma(1/beta) - |x|**beta``."""
    x, beta = promote("gennorm.logpdf", x, beta)
    return lax.log(const(x, 0.5) * beta) - lax.lgamma(const(x, 1) / beta) - lax.abs(x) ** beta


def pdf(x: Any, beta: Any) -> Any:
    """The generalized normal density."""
    return lax.exp(logpdf(x, beta))


def cdf(x: Any, beta: Any) -> Any:
    """``(1 + sign(x) gammainc(1/beta, |x|**beta)) / 2``."""
    x, beta = promote("gennorm.cdf", x, beta)
    return const(x, 0.5) * (const(x, 1) + lax.sign(x) * special.gammainc(const(x, 1) / beta, lax.abs(x) ** beta))
