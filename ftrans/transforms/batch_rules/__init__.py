"""Batching rules, one module per primitive family; importing this package registers them all."""

from . import (  # noqa: F401
    buffer_callback,
    callbacks,
    calls,
    collectives,
    control_flow,
    convolution,
    elementwise,
    exported,
    ffi,
    indexing,
    linalg,
    parallel,
    random,
    reductions,
    shard_map,
    sharding,
    structural,
)
