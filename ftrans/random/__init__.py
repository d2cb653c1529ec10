"""``ftrans.random``: JAX's functional random numbers, bit for bit.

A key is a typed key array (``random.key``: dtype ``key<fry>``, a ``PRNGKeyArray``)
or legacy raw key data (``random.PRNGKey``: a ``uint32[2]`` array); every function
takes either, and ``split``/``fold_in``/``clone`` return the kind they got.  Every
sampler is a pure function of its key, and the threefry2x32 counter scheme is
JAX's default (``jax_threefry_partitionable``), so the same key, shape and
dtype give the same bits as JAX's ``random``.  JAX's ``rbg`` and ``unsafe_rbg``
implementations (``uint32[4]`` keys, bits from XLA's RngBitGenerator) exist too
(``PRNGKey(seed, impl="rbg")``, ``config.default_prng_impl``).  See ``docs/random.md``.
"""

import typing

from ftrans.core.keys import PRNGKeyArray
from ftrans.core.prims.random import random_gamma_p
from ftrans.random._distributions import (
    ball,
    beta,
    binomial,
    cauchy,
    chisquare,
    clone,
    dirichlet,
    double_sided_maxwell,
    exponential,
    f,
    gamma,
    generalized_normal,
    geometric,
    key_dtype,
    key_impl,
    laplace,
    loggamma,
    logistic,
    lognormal,
    maxwell,
    multinomial,
    multivariate_normal,
    orthogonal,
    pareto,
    poisson,
    rademacher,
    rayleigh,
    t,
    triangular,
    wald,
    weibull_min,
)
from ftrans.random._samplers import (
    PRNGKey,
    bernoulli,
    bits,
    categorical,
    choice,
    fold_in,
    gumbel,
    key,
    key_data,
    normal,
    permutation,
    randint,
    shuffle,
    split,
    truncated_normal,
    uniform,
    wrap_key_data,
)

# jax 0.12's annotation for a typed key array (a ``typing.NewType`` of the array type: called, it returns
# its argument)
Key = typing.NewType("Key", PRNGKeyArray)

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "uniform", "normal",
    "randint", "bernoulli", "categorical", "choice", "permutation", "shuffle", "truncated_normal",
    "gumbel", "exponential", "laplace", "logistic", "cauchy", "rademacher", "maxwell",
    "double_sided_maxwell", "weibull_min", "gamma", "loggamma", "beta", "dirichlet", "t", "chisquare",
    "f", "pareto", "poisson", "geometric", "rayleigh", "wald", "triangular", "lognormal",
    "generalized_normal", "ball", "orthogonal", "multivariate_normal", "binomial", "multinomial",
    "clone", "key_impl", "key_dtype", "PRNGKeyArray", "random_gamma_p", "Key",
]
