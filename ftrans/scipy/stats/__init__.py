"""``ftrans.scipy.stats``: JAX's ``scipy.stats`` distributions and statistics, on ``ftrans.numpy`` and
``ftrans.scipy.special``.

Each distribution is a module of functions (``norm.logpdf(x, loc, scale)``,
``gamma.cdf(x, a)``, ...) with JAX's formulas, edge-case values and
derivatives; arguments are promoted to one inexact dtype and broadcast.
"""

from ftrans.scipy.stats import (
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from ftrans.scipy.stats._kde import gaussian_kde
from ftrans.scipy.stats._stats import ModeResult, mode, rankdata, sem

__all__ = [
    "ModeResult", "bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma",
    "gaussian_kde", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "mode", "multinomial",
    "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "rankdata", "sem", "t", "truncnorm",
    "uniform", "vonmises", "wrapcauchy",
]
