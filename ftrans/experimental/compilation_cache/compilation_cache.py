"""JAX's older interface to the persistent compilation cache, which many scripts still call.

ftrans's cache is on by default (docs/compilation_cache.md); ``set_cache_dir`` moves it, as
``ftrans.config.update("compilation_cache_dir", path)`` does.
"""

from __future__ import annotations

import os

from ftrans.core.config import config

__all__ = ["reset_cache", "set_cache_dir"]


def set_cache_dir(path: os.PathLike | str) -> None:
    """Keep compiled programs under ``path`` (created when first written)."""
    config.update("compilation_cache_dir", os.fspath(path))


def reset_cache() -> None:
    """Forget the in-process state of the cache (the files stay): the next lookup starts afresh."""
    from ftrans.lowering import disk_cache

    disk_cache.reset()
