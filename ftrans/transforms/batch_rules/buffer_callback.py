"""Batching of ``buffer_callback`` (``ftrans/core/prims/buffer_callback.py``), by its ``vmap_method`` as in JAX.

``sequential`` calls the callback once per element in a ``scan`` over the batch
(``sequential_unrolled``: an unrolled one); ``expand_dims`` calls it once with the batched
operands' axis first and a size-1 leading axis on the others; ``broadcast_all`` broadcasts
the others to the batch; ``legacy_vectorized`` moves the batched operands' axis first and
leaves the others. The vectorized methods declare results with the batch axis first, so the
callback fills whole batches. Without a ``vmap_method`` the call cannot be batched (JAX's
``NotImplementedError``).
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.buffer_callback import buffer_callback_p
from ftrans.transforms.batch_rules.callbacks import batch_by_vmap_method
from ftrans.transforms.batching import register_batching


@register_batching(buffer_callback_p)
def _buffer_callback_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    return batch_by_vmap_method(buffer_callback_p, vals, dims, params, what=f"the callback {params['callback']!r}",
                                api="buffer_callback")
