"""``set_xla_metadata``: attributes XLA keeps on the operations staged inside it (JAX's
``jax.experimental.xla_metadata``), written as each op's ``mhlo.frontend_attributes``."""

from __future__ import annotations

import functools
from typing import Any

from ftrans.core import trace as _trace

__all__ = ["set_xla_metadata"]


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


class set_xla_metadata:  # noqa: N801  (JAX's name)
    """Within the block (or the decorated function), every staged equation carries these attributes
    (``name=value``; a value of ``None`` removes a name set outside), and its lowered ops get them as
    ``mhlo.frontend_attributes = {name = "value"}``; ``eqn.ctx.xla_metadata`` shows them."""

    def __init__(self, **kwargs: Any):
        self._kwargs = kwargs
        self._prev: list = []

    def __enter__(self) -> set_xla_metadata:
        st = _trace.state
        self._prev.append(st.xla_metadata)
        meta = dict(st.xla_metadata)
        for k, v in self._kwargs.items():
            if v is None:
                meta.pop(k, None)
            else:
                meta[k] = _text(v)
        st.xla_metadata = tuple(sorted(meta.items()))
        return self

    def __exit__(self, *exc: Any) -> None:
        _trace.state.xla_metadata = self._prev.pop()

    def __call__(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with set_xla_metadata(**self._kwargs):
                return fn(*args, **kwargs)

        return wrapped
