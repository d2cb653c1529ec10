"""Shardy's text for shardings: ``#sdy.sharding<@mesh, [{"x"}, {}]>`` per array (see docs/architecture.md)."""

from __future__ import annotations

from typing import Any


def _dim(e: Any) -> str:
    if e is None:
        return "{}"
    if type(e).__name__ == "_Unconstrained":
        return "{?}"
    names = (e,) if isinstance(e, str) else tuple(e)
    return "{" + ", ".join(f'"{n}"' for n in names) + "}"


def sharding_attr(sym: str, spec: Any, ndim: int) -> str:
    """The sharding of an array of rank ``ndim`` split as ``spec`` over the mesh declared as ``@sym``."""
    entries = list(spec)[:ndim] + [None] * (ndim - len(spec))
    return f"#sdy.sharding<@{sym}, [{', '.join(_dim(e) for e in entries)}]>"
