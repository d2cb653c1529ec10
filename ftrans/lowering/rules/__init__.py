"""StableHLO lowering rules, one module per family of primitives.

Importing this package registers every rule in ``ftrans.lowering.lower.lowering_rules``.
"""

from ftrans.lowering.rules import (
    buffer_callback,  # noqa: F401
    callbacks,  # noqa: F401
    calls,  # noqa: F401
    collectives,  # noqa: F401
    control_flow,  # noqa: F401
    convolution,  # noqa: F401
    elementwise,  # noqa: F401
    exported,  # noqa: F401
    ffi,  # noqa: F401
    indexing,  # noqa: F401
    linalg,  # noqa: F401
    parallel,  # noqa: F401
    random,  # noqa: F401
    reductions,  # noqa: F401
    shard_map,  # noqa: F401
    sharding,  # noqa: F401
    sorting,  # noqa: F401
    structural,  # noqa: F401
    windowed,  # noqa: F401
)
