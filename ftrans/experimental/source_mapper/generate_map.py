"""``generate_sourcemaps``: run passes over a function and collect their source maps."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from ftrans.experimental.source_mapper.common import Pass, SourceMapDump

__all__ = ["generate_sourcemaps"]


def generate_sourcemaps(f: Callable, passes: Sequence[Pass], **pass_kwargs: Any) -> Callable[..., list[SourceMapDump]]:
    """A function of ``f``'s arguments returning one ``SourceMapDump`` per pass in ``passes`` (in that order).

    Each pass's ``compile_fn`` runs once per call whatever the number of passes sharing it, in a temporary
    working directory of its own (removed afterwards); ``pass_kwargs`` go to every pass
    (``xla_compiler_flags={...}`` to ``hlo:optimized``)."""
    passes = list(passes)
    for p in passes:
        if not isinstance(p, Pass):
            raise TypeError(f"generate_sourcemaps: passes must be source_mapper.Pass objects, got {type(p).__name__}")

    def wrapper(*args: Any, **kwargs: Any) -> list[SourceMapDump]:
        results: list[SourceMapDump] = []
        compiled: dict[Any, Any] = {}
        with tempfile.TemporaryDirectory() as work_dir:
            for p in passes:
                if p.compile_fn not in compiled:
                    pass_dir = os.path.join(work_dir, p.name.replace(":", "__"))
                    os.makedirs(pass_dir, exist_ok=True)
                    compiled[p.compile_fn] = p.compile_fn(pass_dir, f, args, kwargs, **pass_kwargs)
                results.append(p.generate_dump(compiled[p.compile_fn], **pass_kwargs))
        return results

    return wrapper
