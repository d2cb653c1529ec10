"""Batching rules, one module per primitive family; importing this package registers them all."""

from . import calls, elementwise, indexing, reductions, structural  # noqa: F401
