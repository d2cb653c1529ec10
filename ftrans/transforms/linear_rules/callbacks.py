"""Transposes of the host callbacks (``ftrans/core/prims/callbacks.py``).

A debug callback has no results, so it contributes no cotangent to anything (as in JAX,
its transpose gives none); ``pure_callback`` and ``io_callback`` are not linear: their rules
raise JAX's ``ValueError`` (reached by ``linear_transpose`` of a function that calls one).
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.callbacks import (
    dce_sink_p,
    debug_callback_p,
    debug_print_p,
    inspect_sharding_p,
    io_callback_p,
    pure_callback_p,
)
from ftrans.errors import FtransValueError
from ftrans.transforms.transpose import register_transpose


@register_transpose(debug_print_p)
@register_transpose(debug_callback_p)
def _debug_callback_transpose(cts: list, *args: Any, **params: Any) -> list:
    return [None] * len(args)


@register_transpose(pure_callback_p)
def _pure_callback_transpose(cts: list, *args: Any, callback: Any, **params: Any) -> list:
    raise FtransValueError(f"Pure callbacks do not support transpose (pure_callback({callback!r})). Please use "
                           "`ftrans.custom_vjp` to use callbacks while taking gradients.")


@register_transpose(io_callback_p)
def _io_callback_transpose(cts: list, *args: Any, callback: Any, **params: Any) -> list:
    raise FtransValueError(f"IO callbacks do not support transpose. (io_callback({callback!r}) was applied to a "
                           "linear value)")


@register_transpose(inspect_sharding_p)
@register_transpose(dce_sink_p)
def _dce_sink_transpose(cts: list, *args: Any, **params: Any) -> list:
    return [None] * len(args)
