"""``ftrans.example_libraries``: ftrans versions of ``jax.example_libraries`` (``optimizers``, ``stax``).

The submodules load on first use (``from ftrans.example_libraries import stax``
or ``ftrans.example_libraries.optimizers``), so ``import ftrans`` does not pay
for them.
"""

import importlib
from typing import Any

__all__ = ["optimizers", "stax"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
