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


def type_sharding_attr(sym: str, spec: Any, ndim: int, mesh: Any) -> str:
    """The constraint of a value to its sharding type (JAX's lowering of one): over a mesh with Auto axes every
    dimension is open (the partitioner may split it further over them) and the Explicit axes the type leaves
    unused are replicated (it may not); otherwise the type as it is."""
    types = tuple(getattr(mesh, "axis_types", None) or ())
    if not any(t.name == "Auto" for t in types):
        return sharding_attr(sym, spec, ndim, mesh.axis_names)
    entries = list(spec)[:ndim] + [None] * (ndim - len(spec))
    dims, used = [], set(getattr(spec, "unreduced", None) or ()) | set(getattr(spec, "reduced", None) or ())
    for e in entries:
        if e is None or type(e).__name__ == "_Unconstrained":
            dims.append("{?}")
            continue
        names = (e,) if isinstance(e, str) else tuple(e)
        used.update(names)
        dims.append("{" + ", ".join(f'"{n}"' for n in names) + ", ?}")
    out = f"@{sym}, [{', '.join(dims)}]"
    rep = [a for a, t in zip(mesh.axis_names, types) if t.name == "Explicit" and a not in used]
    if rep:
        out += ", replicated={" + ", ".join(f'"{a}"' for a in rep) + "}"
    unreduced = getattr(spec, "unreduced", None)
    if unreduced:
        order = list(mesh.axis_names)
        names = sorted(unreduced, key=lambda a: (order.index(a) if a in order else len(order), a))
        out += ", unreduced={" + ", ".join(f'"{n}"' for n in names) + "}"
    return f"#sdy.sharding<{out}>"


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
