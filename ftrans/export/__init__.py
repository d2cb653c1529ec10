"""JAX's ``jax.export``: exporting jitted functions as StableHLO modules, calling and serializing them.

``export(jit(f))(*args)`` gives an :class:`Exported` (the module and its calling conventions);
``Exported.call`` runs it from ftrans code (eagerly, in ``jit``, ``vmap``, and under ``grad``
through its exported VJP); ``Exported.serialize``/``deserialize`` store it in ftrans's own
versioned format (not JAX's flatbuffer: see docs/differences.md). A function partitioned over a
mesh exports with its arguments' and results' shardings and runs where the call is partitioned
over as many devices (``nr_devices``). Shape polymorphism: arguments given with
symbolic dimensions (``symbolic_shape("b, 4")``) export the function once for every
size; ``Exported.call`` checks the sizes and runs the module specialised to them.
"""

from ftrans.export._export import (
    DisabledSafetyCheck,
    Exported,
    call_exported,
    default_export_platform,
    export,
    maximum_supported_calling_convention_version,
    minimum_supported_calling_convention_version,
)
from ftrans.export._serialization import (
    deserialize,
    register_namedtuple_serialization,
    register_pytree_node_serialization,
)
from ftrans.export._shape_poly import (
    SymbolicScope,
    is_symbolic_dim,
    symbolic_args_specs,
    symbolic_dim_bounds,
    symbolic_shape,
)

call = call_exported

__all__ = [
    "DisabledSafetyCheck", "Exported", "SymbolicScope", "call", "call_exported", "default_export_platform",
    "deserialize", "export", "is_symbolic_dim", "maximum_supported_calling_convention_version",
    "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
    "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape", "symbolic_dim_bounds",
]
