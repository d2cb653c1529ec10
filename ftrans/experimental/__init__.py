"""JAX's ``jax.experimental`` names that ftrans provides."""

from ftrans._callback import io_callback

__all__ = ["io_callback"]
