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


def _replay_distributions() -> None:
    """Each distribution's functions run eagerly from a program traced once per signature
    (``core/eager_programs.py``): op by op, their promotion and broadcasting cost five to twenty times that."""
    from ftrans.core import eager_programs

    for mod in (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom, gumbel_l,
                gumbel_r, laplace, logistic, multinomial, multivariate_normal, nbinom, norm, pareto, poisson, t,
                truncnorm, uniform, vonmises, wrapcauchy):
        eager_programs.install(vars(mod), [n for n in mod.__all__ if callable(getattr(mod, n))])


_replay_distributions()
