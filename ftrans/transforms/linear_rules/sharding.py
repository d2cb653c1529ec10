"""Transpose of ``sharding_constraint``: the cotangent is laid out like the value."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import shard_alike_p, sharding_constraint_p
from ftrans.transforms.transpose import register_transpose


@register_transpose(sharding_constraint_p)
def _constraint_t(ct: Any, x: Any, *, sharding: Any) -> list:
    return [sharding_constraint_p.bind(ct, sharding=sharding)]


@register_transpose(shard_alike_p)
def _shard_alike_t(cts: list, x: Any, y: Any) -> list:
    """The cotangents are laid out alike (a symbolic zero on either side leaves both as they are)."""
    from ftrans.transforms.ad import Zero

    ct_x, ct_y = cts
    if type(ct_x) is Zero or type(ct_y) is Zero:
        return [ct_x, ct_y]
    return list(shard_alike_p.bind(ct_x, ct_y))
