"""``set_xla_metadata``: attributes XLA keeps on the operations staged inside it (JAX's
``jax.experimental.xla_metadata``), written as each op's ``mhlo.frontend_attributes``."""

from __future__ import annotations

import functools
from typing import Any

from ftrans import tree_util
from ftrans.core import trace as _trace
from ftrans.core.operands import as_operand
from ftrans.core.prims.calls import xla_metadata_value_p

__all__ = ["set_xla_metadata"]


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


class XlaMetadataContextManager:
    """Within the block (or the decorated function), every staged equation carries these attributes
    (``name=value``; a value of ``None`` removes a name set outside), and its lowered ops get them as
    ``mhlo.frontend_attributes = {name = "value"}``; ``eqn.ctx.xla_metadata`` shows them."""

    def __init__(self, updates: dict):
        self._kwargs = updates
        self._prev: list = []

    def __enter__(self) -> None:
        st = _trace.state
        self._prev.append(st.xla_metadata)
        meta = dict(st.xla_metadata)
        for k, v in self._kwargs.items():
            if v is None:
                meta.pop(k, None)
            else:
                meta[k] = _text(v)
        st.xla_metadata = tuple(sorted(meta.items()))

    def __exit__(self, *exc: Any) -> None:
        _trace.state.xla_metadata = self._prev.pop()

    def __call__(self, fn: Any) -> Any:
        return _XlaMetadataWrapper(fn, self._kwargs)


class _XlaMetadataWrapper:
    """A function decorated with ``set_xla_metadata(...)``: calls run inside the attributes, and so do calls
    of its callable attributes (``.lower`` of a jitted function), as JAX's wrapper does."""

    def __init__(self, fn: Any, kwargs: dict):
        self._f, self._kwargs = fn, kwargs
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with XlaMetadataContextManager(self._kwargs):
            return self._f(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._f, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with XlaMetadataContextManager(self._kwargs):
                return attr(*args, **kwargs)

        return wrapper


def set_xla_metadata(x: Any = None, **kwargs: Any) -> Any:
    """JAX's ``set_xla_metadata``: with no value, a context manager and decorator (see
    ``XlaMetadataContextManager``); with a pytree ``x``, ``x`` with each leaf tagged, so that the op which
    produced it gets the attributes (``mhlo.frontend_attributes``) when lowered."""
    if x is None:
        return XlaMetadataContextManager(kwargs)
    kvs = tuple(sorted(kwargs.items()))
    return tree_util.tree_map(lambda v: xla_metadata_value_p.bind(as_operand(v), xla_metadata_kvs=kvs), x)
