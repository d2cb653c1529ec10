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

from ftrans.core.avals import ShapedArray
from ftrans.core.prims.buffer_callback import buffer_callback_p
from ftrans.transforms.batch_rules.callbacks import _looped, _size
from ftrans.transforms.batching import broadcast_batch, moveaxis, not_mapped, register_batching


@register_batching(buffer_callback_p)
def _buffer_callback_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    method = params["vmap_method"]
    if method in ("sequential", "sequential_unrolled"):
        return _looped(buffer_callback_p, vals, dims, params, unrolled=method == "sequential_unrolled")
    if method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap is only supported for the buffer_callback primitive when vmap_method is one of 'sequential', "
            f"'sequential_unrolled', 'expand_dims', 'broadcast_all', or 'legacy_vectorized'. Got "
            f"vmap_method={method!r} (the callback {params['callback']!r}); pass vmap_method= to buffer_callback")
    n = _size(vals, dims)
    front = [v if d is not_mapped else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    p = dict(params)
    p["result_avals"] = tuple(ShapedArray((n, *a.shape), a.dtype, a.weak_type) for a in params["result_avals"])
    if method == "legacy_vectorized":
        args = front
    else:
        size = n if method == "broadcast_all" else 1
        args = [broadcast_batch(v, size, 0) if d is not_mapped else v for v, d in zip(front, dims)]
    outs = buffer_callback_p.bind(*args, **p)
    return list(outs), [0] * len(outs)
