"""``jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs, check_rep=True)``."""

from ftrans.transforms.shard_map import experimental_shard_map as shard_map

__all__ = ["shard_map"]
