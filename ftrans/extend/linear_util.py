"""``ftrans.extend.linear_util``: JAX's ``jax.extend.linear_util`` wrapped-function type, as its public
``call_p.bind(*args, subfuns=(f,))`` and ``ftrans.api_util.flatten_fun*`` take it.

A :class:`WrappedFun` is a Python function with fixed keyword ``params`` and a
:class:`ftrans.api_util.DebugInfo`; ``call_wrapped(*args)`` applies it.  ftrans has no transformation
stack on it (JAX's ``transformation``/``cache`` decorators): ``ftrans.api_util``'s flatteners return a new
``WrappedFun`` around a plain closure instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["StoreException", "WrappedFun", "wrap_init"]


class StoreException(Exception):
    """An auxiliary output (``out_tree()``) read before the function ran, or stored twice (JAX's name)."""


class WrappedFun:
    """A function, its fixed keyword ``params`` and its debug info (JAX's ``linear_util.WrappedFun``)."""

    __slots__ = ("f", "params", "debug_info")

    def __init__(self, f: Callable, params: Any, debug_info: Any):
        self.f = f
        self.params = tuple(params.items()) if isinstance(params, dict) else tuple(params or ())
        self.debug_info = debug_info

    @property
    def __name__(self) -> str:
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def call_wrapped(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **dict(self.params), **kwargs)

    def __repr__(self) -> str:
        return f"Wrapped function: {getattr(self.f, '__qualname__', self.f)!s}"


def wrap_init(f: Callable, params: Any = None, *, debug_info: Any = None) -> WrappedFun:
    """``f`` as a :class:`WrappedFun` with fixed keyword ``params`` (JAX's ``linear_util.wrap_init``)."""
    if debug_info is None:
        from ftrans.api_util import debug_info as _debug_info

        debug_info = _debug_info("linear_util.wrap_init", f, (), {})
    return WrappedFun(f, params, debug_info)
