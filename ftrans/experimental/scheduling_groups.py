"""JAX's ``jax.experimental.scheduling_groups``: run a function as one call whose call op carries XLA
frontend attributes (``xla_metadata_call``), for instance the ``scheduling_group`` XLA's scheduler reads.

ftrans stages the function as a nested ``jit`` call and tags the call's results with the attributes
(``set_xla_metadata(value, ...)``), so the lowered ``func.call`` gets ``mhlo.frontend_attributes``; the
equations inside the call do not.  Derivatives and ``vmap`` are those of the nested call (JAX's own
``xla_metadata_call`` primitive carries the attributes on the differentiated call as well).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ftrans.errors import FtransNotImplementedError

__all__ = ["scheduling_group", "xla_metadata_call"]


def scheduling_group(name: str) -> Callable:
    """A decorator running the function as one call in XLA scheduling group ``name`` (the call op's
    ``scheduling_group`` frontend attribute)."""
    return xla_metadata_call(scheduling_group=name)


def xla_metadata_call(f: Callable | None = None, **meta: str) -> Any:
    """``f`` run as one call whose call op carries ``meta`` as XLA frontend attributes; without ``f``, a
    decorator.  The values must be strings, as in JAX."""
    for k, v in meta.items():
        if not isinstance(v, str):
            raise FtransNotImplementedError(
                f"xla_metadata_call: attribute {k}={v!r} is a {type(v).__name__}; only string values can be "
                "written as XLA frontend attributes")
    if f is None:
        return lambda g: _xla_metadata_call(g, meta)
    return _xla_metadata_call(f, meta)


def _xla_metadata_call(fun: Callable, meta: dict) -> Callable:
    from ftrans.experimental.xla_metadata import set_xla_metadata
    from ftrans.transforms.jit import jit

    inner = jit(fun)

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        return set_xla_metadata(out, **meta) if meta else out

    return wrapped
