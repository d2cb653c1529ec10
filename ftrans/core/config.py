"""Global switches, read from the environment at import and changed with ``config.update``.

Kept as plain attributes on one object so the hot paths (dtype canonicalisation,
eager dispatch) read a switch with a single attribute lookup.
"""

from __future__ import annotations

import os
from typing import Any


def _env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


class Config:
    """The switches a JAX user sets with ``jax.config.update``."""

    _known = {
        "enable_x64": ("JAX_ENABLE_X64", bool),
        "disable_jit": ("JAX_DISABLE_JIT", bool),
        "debug_nans": ("JAX_DEBUG_NANS", bool),
        "debug_infs": ("JAX_DEBUG_INFS", bool),
        "compilation_cache_dir": ("FTRANS_COMPILATION_CACHE_DIR", str),
    }

    def __init__(self) -> None:
        self.enable_x64 = _env_flag("JAX_ENABLE_X64") or _env_flag("FTRANS_ENABLE_X64")
        self.disable_jit = _env_flag("JAX_DISABLE_JIT")
        self.debug_nans = _env_flag("JAX_DEBUG_NANS")
        self.debug_infs = _env_flag("JAX_DEBUG_INFS")
        self.compilation_cache_dir = os.environ.get("FTRANS_COMPILATION_CACHE_DIR")
        self._listeners: list = []

    def update(self, name: str, value: Any) -> None:
        if name.startswith("jax_"):
            name = name[4:]
        if name not in self._known:
            raise ValueError(
                f"unknown config option {name!r}; ftrans knows: {', '.join(sorted(self._known))}"
            )
        kind = self._known[name][1]
        if kind is bool:
            value = bool(value)
        setattr(self, name, value)
        for fn in self._listeners:
            fn(name, value)

    def read(self, name: str) -> Any:
        return getattr(self, name.removeprefix("jax_"))

    def __getattr__(self, name: str) -> Any:
        # ``config.jax_enable_x64`` as JAX spells it.
        if name.startswith("jax_"):
            return getattr(self, name[4:])
        raise AttributeError(name)


config = Config()
