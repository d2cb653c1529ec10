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


def sharding_attr(sym: str, spec: Any, ndim: int, axis_names: Any = None) -> str:
    """The sharding of an array of rank ``ndim`` split as ``spec`` over the mesh declared as ``@sym``
    (``axis_names``: the mesh's, ordering a spec's unreduced axes as Shardy wants them)."""
    return f"#sdy.sharding<{sharding_body(sym, spec, ndim, axis_names)}>"


def sharding_body(sym: str, spec: Any, ndim: int, axis_names: Any = None) -> str:
    """``@mesh, [{"x"}, {}]`` (and ``, unreduced={"y"}`` for JAX's unreduced axes: blocks that are partial sums
    over those mesh axes); a spec's reduced axes are a type only (the value is replicated along them)."""
    entries = list(spec)[:ndim] + [None] * (ndim - len(spec))
    out = f"@{sym}, [{', '.join(_dim(e) for e in entries)}]"
    unreduced = getattr(spec, "unreduced", None)
    if unreduced:
        order = list(axis_names or ())
        names = sorted(unreduced, key=lambda a: (order.index(a) if a in order else len(order), a))
        out += ", unreduced={" + ", ".join(f'"{n}"' for n in names) + "}"
    return out
