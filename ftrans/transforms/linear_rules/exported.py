"""Transpose of ``call_exported``: not linear (an opaque exported program); see ``ad_rules/exported.py``."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.exported import call_exported_p
from ftrans.transforms.ad_rules.exported import no_vjp
from ftrans.transforms.transpose import register_transpose


@register_transpose(call_exported_p)
def _call_exported_transpose(cts: list, *args: Any, exported: Any) -> list:
    raise no_vjp(exported)
