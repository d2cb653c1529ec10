"""JAX's ``jax.experimental`` names that ftrans provides."""
