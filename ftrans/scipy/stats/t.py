"""``ftrans.scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import lax
from ftrans.scipy.stats._common import const, promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``lgamma((df+1)/2) - lgamma(df/2) - log(pi df scale**2)/2 - (df+1)/2 log1p(z**2/df)``."""
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / const(x, 2)
    half_df1 = half_df + const(x, 0.5)
    norm = lax.lgamma(half_df) + lax.log(scale * scale * const(x, np.pi) * df) / const(x, 2) - lax.lgamma(half_df1)
    return -(norm + half_df1 * lax.log1p(z * z / df))


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Student's t density."""
    return lax.exp(logpdf(x, df, loc, scale))
