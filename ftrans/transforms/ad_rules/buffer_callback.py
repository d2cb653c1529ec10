"""JVP of ``buffer_callback``: the callback is opaque Python, so differentiating one is JAX's ``ValueError``
saying to give it a derivative with ``custom_jvp``. (A call whose operands all have zero tangents is never
differentiated: the JVP trace binds it on the primals.)"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.buffer_callback import buffer_callback_p
from ftrans.errors import FtransValueError
from ftrans.transforms.ad import register_jvp


@register_jvp(buffer_callback_p)
def _buffer_callback_jvp(primals: list, tangents: list, *, callback: Any, **params: Any) -> Any:
    raise FtransValueError(
        f"Buffer callbacks do not support JVP: buffer_callback({callback!r}) was differentiated. Please use "
        "`ftrans.custom_jvp` to use callbacks while taking gradients (or stop_gradient its operands).")
