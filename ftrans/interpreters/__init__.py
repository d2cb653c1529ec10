"""JAX's ``jax.interpreters``: the parts of its interpreters' API meant for users: ``ad``, ``batching``
and ``mlir`` (giving a user's primitive its rules JAX's way, as views of ftrans's own rule tables),
``xla.apply_primitive``, ``batching.register_vmappable`` and ``partial_eval.dce_jaxpr``."""
