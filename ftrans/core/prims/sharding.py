"""``sharding_constraint``: the identity on values that tells XLA's partitioner how to lay a value out.

``sharding_constraint[sharding] x`` is ``x``; in a partitioned program it
lowers to Shardy's ``sdy.sharding_constraint`` so the value between two
operations has ``sharding`` (a ``NamedSharding``).  Outside a partitioned
program (a single-device ``jit``, eager evaluation) it lowers to nothing.
It is linear (its tangent and cotangent carry the same constraint) and a
batched operand's spec gains an unsplit entry at the batch dimension.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive

__all__ = ["sharding_constraint_p"]

sharding_constraint_p = Primitive("sharding_constraint")


@sharding_constraint_p.def_abstract_eval
def _abstract_eval(x: ShapedArray, *, sharding: Any, **_: Any) -> ShapedArray:
    return x


@sharding_constraint_p.def_impl
def _impl(x: Any, *, sharding: Any, **_: Any) -> Any:
    return x


# ----------------------------------------------------------------------------
# shard_alike: two values laid out the same way, whichever layout the partitioner picks

shard_alike_p = Primitive("shard_alike", multiple_results=True)
__all__ += ["shard_alike_p"]


@shard_alike_p.def_abstract_eval
def _shard_alike_abstract(x: ShapedArray, y: ShapedArray) -> list:
    if tuple(x.shape) != tuple(y.shape):
        from ftrans.errors import FtransValueError

        raise FtransValueError(
            f"The leaves shapes of `x` and `y` should match. Got `x` leaf shape: {tuple(x.shape)} and `y` leaf "
            f"shape: {tuple(y.shape)}.")
    return [x, y]


@shard_alike_p.def_impl
def _shard_alike_impl(x: Any, y: Any) -> list:
    return [x, y]


# ----------------------------------------------------------------------------
# Sharding in types: a constraint over Explicit axes is a reshard, the value's new type

from ftrans.core import sharding_rules as _sr  # noqa: E402

sharding_constraint_p.sharding_rule = _sr.sharding_constraint
sharding_constraint_p.sets_sharding = True
