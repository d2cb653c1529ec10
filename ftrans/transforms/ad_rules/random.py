"""JVP rules of the PRNG primitives: keys and random bits are not differentiable, so every output's
tangent is a symbolic zero (``float0`` of the key array's shape for keys, as JAX's); ``random_gamma``'s
samples are differentiable in their shape parameter (implicit reparameterisation, as JAX's)."""

from __future__ import annotations

from ftrans.core import building as B
from ftrans.core.prims import random as R
from ftrans.transforms.ad import Zero, defjvp_zero, register_jvp

for _p in R.RANDOM_PRIMITIVES:
    defjvp_zero(_p)


@register_jvp(R.random_gamma_p)
def _gamma_jvp(primals: list, tangents: list, *, log_space: bool):
    keys, a = primals
    out = R.random_gamma_p.bind(keys, a, log_space=log_space)
    ta = tangents[1]
    if type(ta) is Zero:
        return out, Zero.from_primal_value(out)
    return out, B.mul(ta, R.derivatives[R.random_gamma_p](out, a, log_space=log_space))
