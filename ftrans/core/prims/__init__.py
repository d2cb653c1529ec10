"""Every primitive, grouped by kind; importing this registers them all."""

from ftrans.core.prims import elementwise, reductions, structural  # noqa: F401
