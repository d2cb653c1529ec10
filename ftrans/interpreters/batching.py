"""JAX's ``jax.interpreters.batching``: registering container types that ``vmap`` maps over.

``register_vmappable(data_type, spec_type, axis_size_type, to_elt, from_elt, make_iota)`` lets
``vmap`` take values of ``data_type`` apart into batched arrays and build them again, with map specs
of ``spec_type`` in ``in_axes``/``out_axes`` (see ``ftrans/transforms/batching.py``).
"""

from ftrans.transforms.batching import is_vmappable, register_vmappable, spec_types, unregister_vmappable

__all__ = ["is_vmappable", "register_vmappable", "spec_types", "unregister_vmappable"]
