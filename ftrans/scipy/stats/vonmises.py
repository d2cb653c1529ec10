"""``ftrans.scipy.stats.vonmises``: the von Mises distribution on the circle, concentration ``kappa``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, kappa: Any) -> Any:
    """``kappa (cos x - 1) - log(2 pi i0e(kappa))`` for ``kappa > 0``, NaN otherwise."""
    x, kappa = promote("vonmises.logpdf", x, kappa)
    val = kappa * (jnp.cos(x) - const(x, 1)) - jnp.log(const(x, 2 * np.pi) * special.i0e(kappa))
    return jnp.where(kappa > const(kappa, 0), val, const(x, np.nan))


def pdf(x: Any, kappa: Any) -> Any:
    """The von Mises density."""
    return lax.exp(logpdf(x, kappa))
