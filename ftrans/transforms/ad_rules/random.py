"""JVP rules of the PRNG primitives: keys and random bits are not differentiable, so every output's
tangent is a symbolic zero (``float0`` of the key array's shape for keys, as JAX's)."""

from __future__ import annotations

from ftrans.core.prims import random as R
from ftrans.transforms.ad import defjvp_zero

for _p in R.RANDOM_PRIMITIVES:
    defjvp_zero(_p)
