"""``ftrans.tree``: the short pytree names (``jax.tree``), over jax's tree_util."""

from jax.tree_util import (  # noqa: F401
    tree_all as all,  # noqa: A004
    tree_flatten as flatten,
    tree_leaves as leaves,
    tree_map as map,  # noqa: A004
    tree_reduce as reduce,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)
