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
    """``kappa (cos x - sign(kappa)) - log(2 pi) - log(i0e(kappa))`` for ``kappa >= 0`` (``kappa = 0`` is
    the uniform density ``1/(2 pi)``), NaN otherwise."""
    x, kappa = promote("vonmises.logpdf", x, kappa)
    val = kappa * (jnp.cos(x) - lax.sign(kappa)) - const(x, np.log(2 * np.pi)) - jnp.log(special.i0e(kappa))
    return jnp.where(kappa >= const(kappa, 0), val, const(x, np.nan))


def pdf(x: Any, kappa: Any) -> Any:
    """The von Mises density."""
    return lax.exp(logpdf(x, kappa))
