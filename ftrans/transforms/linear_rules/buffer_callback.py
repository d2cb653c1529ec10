"""Transpose of ``buffer_callback``: it is not linear (opaque Python), so reaching it is JAX's ``ValueError``."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.buffer_callback import buffer_callback_p
from ftrans.errors import FtransValueError
from ftrans.transforms.transpose import register_transpose


@register_transpose(buffer_callback_p)
def _buffer_callback_transpose(cts: list, *args: Any, callback: Any, **params: Any) -> list:
    raise FtransValueError(
        f"Buffer callbacks do not support transpose: buffer_callback({callback!r}) was transposed. Please use "
        "`ftrans.custom_vjp` to use callbacks while taking gradients.")
