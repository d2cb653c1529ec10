"""JVP of ``sharding_constraint``: linear (the tangent is laid out like the value)."""

from __future__ import annotations

from ftrans.core.prims.sharding import shard_alike_p, sharding_constraint_p
from ftrans.transforms.ad import defjvp_linear

defjvp_linear(sharding_constraint_p)
defjvp_linear(shard_alike_p)  # the tangents are laid out alike too
