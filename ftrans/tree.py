"""``ftrans.tree``: the short pytree names (``jax.tree``), over jax's tree_util."""

import dataclasses as _dataclasses
from typing import Any

from jax import tree_util as _tu

all = _tu.tree_all  # noqa: A001
flatten = _tu.tree_flatten
leaves = _tu.tree_leaves
map = _tu.tree_map  # noqa: A001
reduce = _tu.tree_reduce
structure = _tu.tree_structure
transpose = _tu.tree_transpose
unflatten = _tu.tree_unflatten
map_with_path = _tu.tree_map_with_path
flatten_with_path = _tu.tree_flatten_with_path
leaves_with_path = _tu.tree_leaves_with_path
broadcast = _tu.tree_broadcast
reduce_associative = _tu.tree_reduce_associative


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field`` marked static, for ``tree_util.register_dataclass``: the field is part of the
    tree's structure (compared, hashed) rather than a leaf."""
    metadata = {**(kwargs.pop("metadata", None) or {}), "static": True}
    return _dataclasses.field(metadata=metadata, **kwargs)


__all__ = ["all", "flatten", "leaves", "map", "reduce", "structure", "transpose", "unflatten", "map_with_path",
           "flatten_with_path", "leaves_with_path", "broadcast", "reduce_associative", "static"]
