"""Transpose rules, one module per primitive family; importing this package registers them all.

Each module only adds to ``ftrans.transforms.transpose.transpose_rules`` and
marks the family's non-linear primitives as having no transpose (with the
reason a user would see), so the registry-coverage test finds no gap.
"""

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
    random,
    reductions,
    sharding,
    structural,
    windowed,
)
