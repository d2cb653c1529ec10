"""Every primitive, grouped by kind; importing this registers them all."""

from ftrans.core.prims import (  # noqa: F401
    buffer_callback,
    callbacks,
    calls,
    collectives,
    control_flow,
    convolution,
    elementwise,
    exported,
    ffi,
    fft,
    indexing,
    linalg,
    parallel,
    random,
    reductions,
    shard_map,
    sharding,
    sorting,
    structural,
    windowed,
)
