"""``ftrans.scipy.stats.geom``: the geometric distribution (trials until the first success)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.scipy import special
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``xlog1py(x - 1, -p) + log p`` for ``x = k - loc >= 1``, else ``-inf``."""
    k, p, loc = promote("geom.logpmf", k, p, loc)
    x = k - loc
    val = special.xlog1py(x - const(k, 1), -p) + lax.log(p)
    return jnp.where(x <= const(k, 0), const(k, -np.inf), val)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """The geometric probability mass."""
    return jnp.exp(logpmf(k, p, loc))
