"""``ftrans.scipy.stats.wrapcauchy``: the wrapped Cauchy distribution on ``[0, 2 pi]``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, c: Any) -> Any:
    """``log(1 - c**2) - log(2 pi) - log(1 + c**2 - 2 c cos x)``; NaN unless ``0 < c < 1``."""
    x, c = promote("wrapcauchy.logpdf", x, c)
    val = jnp.log(1 - c * c) - jnp.log(const(x, 2 * np.pi)) - jnp.log(1 + c * c - 2 * c * jnp.cos(x))
    val = jnp.where((x >= const(x, 0)) & (x <= const(x, 2 * np.pi)), val, const(x, -np.inf))
    return jnp.where((c > const(c, 0)) & (c < const(c, 1)), val, const(x, np.nan))


def pdf(x: Any, c: Any) -> Any:
    """The wrapped Cauchy density."""
    return lax.exp(logpdf(x, c))
