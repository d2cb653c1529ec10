"""JAX's ``jax.interpreters``: the parts of its interpreters' API meant for users (``batching``)."""
