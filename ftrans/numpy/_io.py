"""Host-side helpers of ``jax.numpy``: printing options, file and buffer I/O, DLPack."""

from __future__ import annotations

__all__: list[str] = []
