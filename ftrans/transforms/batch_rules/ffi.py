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

from ftrans.core.avals import ShapedArray
from ftrans.core.prims.ffi import ffi_call_p
from ftrans.transforms.batch_rules.callbacks import _looped, _size
from ftrans.transforms.batching import broadcast_batch, moveaxis, not_mapped, register_batching


def _with_batch_axis(layout: tuple) -> tuple:
    return tuple(n + 1 for n in layout) + (0,)


@register_batching(ffi_call_p)
def _ffi_call_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    method = params["vmap_method"]
    if method in ("sequential", "sequential_unrolled"):
        return _looped(ffi_call_p, vals, dims, params, unrolled=method == "sequential_unrolled")
    if method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap is only supported for the ffi_call primitive when vmap_method is one of 'sequential', "
            f"'sequential_unrolled', 'expand_dims', 'broadcast_all', or 'legacy_vectorized'. Got "
            f"vmap_method={method!r} (the call of {params['target_name']!r}); pass vmap_method= to ffi_call")
    n = _size(vals, dims)
    front = [v if d is not_mapped else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    p = dict(params)
    p["result_avals"] = tuple(ShapedArray((n, *a.shape), a.dtype, a.weak_type) for a in params["result_avals"])
    p["output_layouts"] = tuple(_with_batch_axis(lay) for lay in params["output_layouts"])
    if method == "legacy_vectorized":
        args = front
        p["input_layouts"] = tuple(lay if d is not_mapped else _with_batch_axis(lay)
                                   for lay, d in zip(params["input_layouts"], dims))
    else:
        size = n if method == "broadcast_all" else 1
        args = [broadcast_batch(v, size, 0) if d is not_mapped else v for v, d in zip(front, dims)]
        p["input_layouts"] = tuple(_with_batch_axis(lay) for lay in params["input_layouts"])
    outs = ffi_call_p.bind(*args, **p)
    return list(outs), [0] * len(outs)
