"""``ftrans.extend``: interfaces for people building on ftrans (JAX's ``jax.extend``).

``ftrans.extend.core`` is the supported way to walk and rewrite ftrans's IR: the IR classes, the primitive
objects under JAX's names, and an interpreter to start from (see the "Extending ftrans" API page).
"""

from ftrans.extend import core, linear_util, random, sharding, source_info_util, xla  # noqa: F401

__all__ = ["core", "linear_util", "random", "sharding", "source_info_util", "xla"]
