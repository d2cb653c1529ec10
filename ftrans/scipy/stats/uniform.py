"""``ftrans.scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy.stats._common import const, promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale)`` where ``z = (x - loc)/scale`` is in [0, 1], ``-inf`` outside, NaN if any argument is."""
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    z = (x - loc) / scale
    zero, one = const(x, 0), const(x, 1)
    return jnp.select([(z < zero) | (z > one), (z >= zero) & (z <= one)],
                      [const(x, -np.inf), -lax.log(scale)], const(x, np.nan))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The uniform density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``clip((x - loc)/scale, 0, 1)``: NaN if any argument is; at the interval's ends the derivative is
    half the inside one (``maximum``/``minimum`` split a tie)."""
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    return jnp.clip((x - loc) / scale, const(x, 0), const(x, 1))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * q`` for ``q`` in [0, 1], NaN otherwise."""
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), const(q, np.nan), loc + scale * q)
