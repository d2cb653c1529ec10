"""Naming the functions transforms return after the functions they wrap.

``functools.wraps`` copies ``__name__`` and ``__qualname__`` only when the
wrapped callable has them; a ``functools.partial`` has neither, so a
``jit``/``grad``/``vmap`` of one would carry the name of ftrans's inner
closure. As in JAX, a partial is named after the function it finally calls
(``jit(partial(f, 1)).__name__ == "f"``), unless the partial was given a name
of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["fun_name", "fun_qualname", "name_after", "wraps"]

_F = TypeVar("_F", bound=Callable[..., Any])


def fun_name(fun: Any, default: str = "<unnamed function>") -> str:
    """``fun``'s ``__name__``; for a nameless ``functools.partial``, the name of the function it wraps."""
    seen = 0
    while seen < 100:  # partials of partials; a bound keeps a pathological chain from looping forever
        name = getattr(fun, "__name__", None)
        if isinstance(name, str):
            return name
        if not isinstance(fun, functools.partial):
            return default
        fun, seen = fun.func, seen + 1
    return default


def fun_qualname(fun: Any, default: str = "<unnamed function>") -> str:
    """``fun``'s ``__qualname__`` (else its name, as :func:`fun_name`), looking through nameless partials."""
    seen = 0
    while seen < 100:
        qual = getattr(fun, "__qualname__", None)
        if isinstance(qual, str) and not isinstance(fun, functools.partial):
            return qual
        name = getattr(fun, "__name__", None)
        if isinstance(name, str):
            return qual if isinstance(qual, str) else name
        if not isinstance(fun, functools.partial):
            return default
        fun, seen = fun.func, seen + 1
    return default


def name_after(wrapper: Any, fun: Any) -> None:
    """Give ``wrapper`` the name and qualified name of ``fun`` where ``functools.wraps`` found none."""
    if not isinstance(fun, functools.partial):
        return
    name = fun_name(fun, "")
    if name:
        try:
            wrapper.__name__ = name
            wrapper.__qualname__ = fun_qualname(fun, name)
        except (AttributeError, TypeError):  # a wrapper whose names are read-only keeps its own
            pass


def wraps(fun: Any) -> Callable[[_F], _F]:
    """``functools.wraps(fun)`` that also names the wrapper after a nameless partial's function."""
    def deco(wrapper: _F) -> _F:
        functools.update_wrapper(wrapper, fun)
        name_after(wrapper, fun)
        return wrapper

    return deco
