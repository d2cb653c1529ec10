"""Every primitive, grouped by kind; importing this registers them all."""

from ftrans.core.prims import calls, elementwise, indexing, reductions, sorting, structural, windowed  # noqa: F401
