"""Batching rules, one module per primitive family; importing this package registers them all."""

from . import calls, collectives, control_flow, convolution, elementwise, indexing, reductions, structural  # noqa: F401
