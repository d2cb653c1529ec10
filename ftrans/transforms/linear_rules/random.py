"""The PRNG primitives have no transpose: none is linear (keys and bits are not differentiable)."""

from __future__ import annotations

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import random as R

for _p in (*R.RANDOM_PRIMITIVES, R.random_gamma_p):
    mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear (PRNG keys and random bits have no derivative)")
