"""``ftrans.version`` (JAX's ``jax.version`` module): the release of ftrans as a string and as a tuple."""

from ftrans.core.version import __version__

__version_info__ = tuple(int(p) for p in __version__.split(".")[:3])

__all__ = ["__version__", "__version_info__"]
