"""Transpose of ``sharding_constraint``: the cotangent is laid out like the value."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.sharding import sharding_constraint_p
from ftrans.transforms.transpose import register_transpose


@register_transpose(sharding_constraint_p)
def _constraint_t(ct: Any, x: Any, *, sharding: Any) -> list:
    return [sharding_constraint_p.bind(ct, sharding=sharding)]
