"""JVP rules, one module per primitive family; importing this package registers them all.

Each module only appends to ``ftrans.transforms.ad.jvp_rules``; add a new
family by appending its import below.
"""

from ftrans.transforms.ad_rules import elementwise  # noqa: F401

# The structural, reduction, sorting, indexing and windowed families (a relative import keeps
# this an appended line that ruff's import sorting accepts as its own block).
from . import (  # noqa: F401
    buffer_callback,
    callbacks,
    calls,
    collectives,
    control_flow,
    convolution,
    exported,
    ffi,
    indexing,
    linalg,
    random,
    reductions,
    sharding,
    sorting,
    structural,
    windowed,
)
