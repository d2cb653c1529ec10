"""The opt-in on-disk cache of compiled executables (``config.compilation_cache_dir``).

Placeholder behaviour until the cache lands: nothing is stored or loaded.
"""

from __future__ import annotations

from typing import Any


def load(client: Any, text: str, devices: list) -> Any:
    return None


def store(client: Any, text: str, devices: list, executable: Any) -> None:
    return None
