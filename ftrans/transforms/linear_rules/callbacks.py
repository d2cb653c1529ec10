"""Transposes of the host callbacks (``ftrans/core/prims/callbacks.py``).

A debug callback has no results, so it contributes no cotangent to anything (as in JAX,
its transpose gives none); ``pure_callback`` and ``io_callback`` are not linear.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims.callbacks import debug_callback_p, io_callback_p, pure_callback_p
from ftrans.transforms.transpose import register_transpose


@register_transpose(debug_callback_p)
def _debug_callback_transpose(cts: list, *args: Any, **params: Any) -> list:
    return [None] * len(args)


mark_unsupported(pure_callback_p, "transpose",
                 "Pure callbacks do not support transpose: use `ftrans.custom_vjp` to use callbacks while "
                 "taking gradients")
mark_unsupported(io_callback_p, "transpose", "IO callbacks do not support transpose")
