"""Transpose of ``ffi_call``: it is not linear (an opaque foreign call), so reaching it is JAX's ``ValueError``."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.ffi import ffi_call_p
from ftrans.transforms.ad_rules.ffi import cannot_differentiate
from ftrans.transforms.transpose import register_transpose


@register_transpose(ffi_call_p)
def _ffi_call_transpose(cts: list, *args: Any, target_name: str, **params: Any) -> list:
    raise cannot_differentiate(target_name)
