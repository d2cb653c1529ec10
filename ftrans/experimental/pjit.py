"""JAX's deprecated ``jax.experimental.pjit.pjit``: ``jit`` with ``in_shardings``/``out_shardings``.

Reading ``pjit`` warns (``DeprecationWarning``), as in JAX; it is ``ftrans.jit`` with the same arguments.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ftrans.errors import user_stacklevel

__all__: list[str] = []


def _pjit(fun: Callable | None = None, *args: Any, **kwargs: Any) -> Any:
    """``ftrans.jit(fun, ...)``: sharded when ``in_shardings``/``out_shardings`` or the arguments say so
    (``pjit(in_shardings=...)`` without the function is a decorator, as ``jit``'s is)."""
    from ftrans.transforms.jit import jit

    return jit(fun, *args, **kwargs)


_pjit.__name__ = _pjit.__qualname__ = "pjit"


def __getattr__(name: str) -> Any:
    if name == "pjit":
        warnings.warn("jax.experimental.pjit.pjit has been deprecated. Please use `ftrans.jit` instead.",
                      DeprecationWarning, stacklevel=user_stacklevel())
        return _pjit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
