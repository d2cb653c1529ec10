"""Batching of ``ffi_call`` (``ftrans/core/prims/ffi.py``), by its ``vmap_method`` as in JAX.

``sequential`` calls the target once per element in a ``scan`` over the batch
(``sequential_unrolled``: an unrolled one); ``expand_dims`` calls it once with the batched
operands' axis first and a size-1 leading axis on the others; ``broadcast_all`` broadcasts
the others to the batch; ``legacy_vectorized`` moves the batched operands' axis first and
leaves the others. In the vectorized methods the new leading axis is the slowest one in
memory: each layout gains it as its last minor-to-major entry. Without a ``vmap_method`` the
call cannot be batched (JAX's ``NotImplementedError``).
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.ffi import ffi_call_p
from ftrans.transforms.batch_rules.callbacks import batch_by_vmap_method
from ftrans.transforms.batching import not_mapped, register_batching


def _with_batch_axis(layout: tuple) -> tuple:
    return tuple(n + 1 for n in layout) + (0,)


def _batched_layouts(p: dict, method: str, dims: list) -> None:
    """The batch axis is the call's leading (its major-most) axis: every layout names it last."""
    p["output_layouts"] = tuple(_with_batch_axis(lay) for lay in p["output_layouts"])
    p["input_layouts"] = tuple(lay if method == "legacy_vectorized" and d is not_mapped else _with_batch_axis(lay)
                               for lay, d in zip(p["input_layouts"], dims))


@register_batching(ffi_call_p)
def _ffi_call_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    return batch_by_vmap_method(ffi_call_p, vals, dims, params, what=f"the call of {params['target_name']!r}",
                                api="ffi_call", adjust=_batched_layouts)
