"""JVP rules of the host callbacks (``ftrans/core/prims/callbacks.py``).

As in JAX: a debug callback sees the primal values (so ``grad`` prints them once, in the
forward pass) and has no tangent; ``pure_callback`` and ``io_callback`` are opaque Python,
so differentiating through one is an error that says to wrap it in ``custom_jvp``. (A
callback whose operands all have zero tangents is never differentiated at all: the JVP
trace binds it on the primals.)
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
from ftrans.transforms.ad import register_jvp


@register_jvp(debug_callback_p)
def _debug_callback_jvp(primals: list, tangents: list, **params: Any) -> tuple[list, list]:
    return debug_callback_p.bind(*primals, **params), []


@register_jvp(debug_print_p)
def _debug_print_jvp(primals: list, tangents: list, **params: Any) -> tuple[list, list]:
    return debug_print_p.bind(*primals, **params), []


@register_jvp(pure_callback_p)
def _pure_callback_jvp(primals: list, tangents: list, *, callback: Any, **params: Any) -> Any:
    raise FtransValueError(
        f"Pure callbacks do not support JVP: pure_callback({callback!r}) was differentiated. "
        "Please use `ftrans.custom_jvp` (or `custom_vjp`) around the callback to give it a derivative "
        "while taking gradients, or stop_gradient its operands.")


@register_jvp(io_callback_p)
def _io_callback_jvp(primals: list, tangents: list, *, callback: Any, **params: Any) -> Any:
    raise FtransValueError(
        f"IO callbacks do not support JVP: io_callback({callback!r}) was differentiated. Wrap it in "
        "`ftrans.custom_jvp`/`custom_vjp`, or stop_gradient its operands.")


@register_jvp(dce_sink_p)
def _dce_sink_jvp(primals: list, tangents: list, **params: Any) -> tuple[list, list]:
    return dce_sink_p.bind(*primals, **params), []


@register_jvp(inspect_sharding_p)
def _inspect_sharding_jvp(primals: list, tangents: list, **params: Any) -> tuple[list, list]:
    return inspect_sharding_p.bind(*primals, **params), []
