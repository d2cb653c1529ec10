"""JAX's ``jax.experimental`` names that ftrans provides."""

from ftrans._callback import io_callback
from ftrans.experimental import compilation_cache, sparse

__all__ = ["io_callback", "compilation_cache", "sparse"]
