"""The platform a program is being traced for, when it is not the default backend's.

``ftrans.export(..., platforms=('cuda',))`` traces the function for CUDA on any machine:
inside ``tracing_for_platform('cuda')``, ``lax.platform_dependent`` takes the CUDA branch,
and ``jit``'s per-signature trace cache keeps that trace apart from the default platform's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["platform_override", "tracing_for_platform"]

platform_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("platform_override", default=None)


@contextlib.contextmanager
def tracing_for_platform(platform: str | None) -> Iterator[None]:
    """Within the block, programs are traced for ``platform`` (``cpu``, ``cuda``, ``rocm``, ``tpu``)."""
    token = platform_override.set(platform)
    try:
        yield
    finally:
        platform_override.reset(token)
