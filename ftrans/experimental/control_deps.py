"""JAX's ``jax.experimental.control_deps``: order the ops of a compiled program.

``control_dep(src, dst)`` is an FFI call to XLA's ``control_dep`` target with no results and a side effect (so
it is kept though nothing uses it); XLA turns it into a control dependency that makes the op computing ``src``
run before the op computing ``dst``.  ``schedule([a, b, c])`` chains ``a -> b -> c``.  Values are unchanged.
As JAX's, the call has no derivative and no batching rule (``grad``/``vmap`` through it raise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftrans.ffi import ffi_call

__all__ = ["control_dep", "schedule"]


def control_dep(src: Any, dst: Any) -> Any:
    """Adds a control dependency from ``src`` to ``dst``."""
    return ffi_call("control_dep", (), has_side_effect=True)(src, dst)


def schedule(ops: Sequence[Any]) -> None:
    """Adds control dependencies so the ops producing ``ops`` run in the order given:
    ``schedule([a, b, c])`` adds ``a -> b`` and ``b -> c``."""
    for src, dst in zip(ops[:-1], ops[1:]):
        control_dep(src, dst)
