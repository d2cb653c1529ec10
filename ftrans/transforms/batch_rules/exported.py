"""Batching of ``call_exported``: the exported program has fixed shapes, so a batch runs it once per element,
in a ``scan`` over the batch (JAX's ``lax.map``)."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.exported import call_exported_p
from ftrans.transforms.batch_rules.callbacks import _looped
from ftrans.transforms.batching import register_batching


@register_batching(call_exported_p)
def _call_exported_batch(vals: list, dims: list, *, frame: Any, exported: Any) -> tuple[list, list]:
    return _looped(call_exported_p, vals, dims, {"exported": exported})
