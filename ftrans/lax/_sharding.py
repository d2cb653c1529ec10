"""``lax.with_sharding_constraint``: how XLA should lay a value out at this point of a sharded program."""

from __future__ import annotations

from typing import Any

from jax import tree_util

from ftrans.core import trace as _trace
from ftrans.core.prims.sharding import sharding_constraint_p
from ftrans.core.sharding import (
    NamedSharding,
    PartitionSpec,
    Sharding,
    as_sharding,
    check_divisible,
    get_mesh,
)
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["with_sharding_constraint"]


def _resolve(s: Any, what: str) -> Any:
    s = as_sharding(s)  # a runtime (jax) sharding: as ftrans's
    if isinstance(s, PartitionSpec):
        mesh = get_mesh()
        if mesh is None:
            raise FtransValueError(
                f"{what}: got a bare PartitionSpec {s!r} but no mesh is set; wrap it in NamedSharding(mesh, spec) "
                "or set a mesh with ftrans.set_mesh(mesh) / ftrans.sharding.use_mesh(mesh)")
        return NamedSharding(mesh, s)
    if not isinstance(s, Sharding):
        raise FtransTypeError(f"{what}: expected a Sharding or a PartitionSpec, got {type(s).__name__}: {s!r}")
    return s


def with_sharding_constraint(x: Any, shardings: Any, _what: str = "with_sharding_constraint") -> Any:
    """``x`` unchanged, laid out as ``shardings`` (a tree prefix of ``x``): inside a sharded ``jit`` it pins
    the partitioner's choice; on concrete arrays it moves them (as ``device_put``)."""
    leaves, tree = tree_util.tree_flatten(x)
    is_leaf = lambda s: isinstance(as_sharding(s), (Sharding, PartitionSpec))  # noqa: E731
    if is_leaf(shardings):
        flat = [shardings] * len(leaves)
    else:
        try:
            groups = tree_util.tree_map(lambda s, sub: [s] * len(tree_util.tree_leaves(sub)), shardings, x,
                                        is_leaf=is_leaf)
        except (ValueError, TypeError):
            raise FtransValueError(
                f"{_what}: shardings must be a sharding or a tree prefix of the value; got {shardings!r} for a "
                f"value of structure {tree}") from None
        flat = [s for g in tree_util.tree_leaves(groups, is_leaf=lambda g: isinstance(g, list)) for s in g]
    out = []
    for leaf, s in zip(leaves, flat):
        s = _resolve(s, _what)
        shape = tuple(getattr(leaf, "shape", ()))
        traced = isinstance(leaf, Tracer) or not _trace.is_eager()
        if isinstance(s, NamedSharding) and not traced:  # in a program the partitioner pads uneven blocks
            check_divisible(s, shape, _what)
        if traced or not isinstance(s, NamedSharding):
            if isinstance(s, NamedSharding):
                out.append(sharding_constraint_p.bind(leaf, sharding=s))
            else:
                out.append(leaf)
        else:
            from ftrans.devices import device_put

            out.append(device_put(leaf, s))
    return tree_util.tree_unflatten(tree, out)
