"""JAX's ``jax.experimental.shard_alike.shard_alike(x, y)``: lay two values out alike.

Inside a partitioned program the pair joins one Shardy sharding group, and XLA's partitioner gives both the
layout it chooses for either (the one a sharded argument or a sharding constraint fixes, say).  Applied to
concrete arrays, a value laid out over a mesh lends its sharding to the other (the first one's wins when both
are).  Values are unchanged; the primitive is linear (its cotangents are laid out alike too) and batches with
the batch dimension at the same place in both.
"""

from __future__ import annotations

from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.core.array import ShardedArray
from ftrans.core.operands import as_operand
from ftrans.core.prims.sharding import set_shard_alike_eager_rule, shard_alike_p
from ftrans.core.sharding import NamedSharding
from ftrans.core.trace import Tracer, aval_of
from ftrans.errors import FtransValueError

__all__ = ["shard_alike"]


def _mesh_sharding(v: Any) -> Any:
    if type(v) is ShardedArray and isinstance(v.sharding, NamedSharding):
        return v.sharding
    return None


def _eager_pair(x: Any, y: Any) -> tuple:
    from ftrans.devices import device_put

    sx, sy = _mesh_sharding(x), _mesh_sharding(y)
    if sx is not None and sx != sy:
        return x, device_put(y, sx)
    if sy is not None and sx is None:
        return device_put(x, sy), y
    return as_operand(x), as_operand(y)


set_shard_alike_eager_rule(lambda x, y: list(_eager_pair(x, y)))


def shard_alike(x: Any, y: Any) -> tuple[Any, Any]:
    """``(x, y)`` (pytrees of the same structure and leaf shapes) with each pair of leaves laid out alike."""
    x_flat, x_tree = tree_util.tree_flatten(x)
    y_flat, y_tree = tree_util.tree_flatten(y)
    if x_tree != y_tree:
        raise FtransValueError(f"Trees should be equal. Got x_tree: {x_tree}, y_tree: {y_tree}")
    outs = []
    for a, b in zip(x_flat, y_flat):
        sa, sb = tuple(aval_of(a).shape), tuple(aval_of(b).shape)
        if sa != sb:
            raise FtransValueError(
                f"The leaves shapes of `x` and `y` should match. Got `x` leaf shape: {sa} and `y` leaf shape: "
                f"{sb}.")
        if isinstance(a, Tracer) or isinstance(b, Tracer):
            outs.append(tuple(shard_alike_p.bind(as_operand(a), as_operand(b))))
        else:
            outs.append(_eager_pair(a, b))
    return (tree_util.tree_unflatten(x_tree, [o[0] for o in outs]),
            tree_util.tree_unflatten(y_tree, [o[1] for o in outs]))
