"""``ftrans.tree``: the short pytree names (``jax.tree``), over jax's tree_util."""

from jax import tree_util as _tu

all = _tu.tree_all  # noqa: A001
flatten = _tu.tree_flatten
leaves = _tu.tree_leaves
map = _tu.tree_map  # noqa: A001
reduce = _tu.tree_reduce
structure = _tu.tree_structure
transpose = _tu.tree_transpose
unflatten = _tu.tree_unflatten

__all__ = ["all", "flatten", "leaves", "map", "reduce", "structure", "transpose", "unflatten"]
