"""JAX's ``experimental.compilation_cache`` package (its one module, ``compilation_cache``)."""

from ftrans.experimental.compilation_cache import compilation_cache

__all__ = ["compilation_cache"]
