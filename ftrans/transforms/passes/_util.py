"""Small helpers shared by the rewriting passes: forwarding results, building replacement
equations by staging a few primitive binds, and hashing params."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, SourceInfo, Var, subjaxprs

__all__ = ["Rewriter", "stage_expr", "literal_value", "is_literal_value", "params_key", "IMPURE"]

# Primitives a pass must never merge, move or fold as if pure (a host callback runs Python: folding
# one would call it at compile time). All but ``pure_callback`` are never dropped either; effectful
# equations (``core.ir.eqn_has_effects``: callbacks that print or do I/O, or bodies holding them) are
# never dropped, merged or moved.
IMPURE = frozenset({"optimization_barrier", "pure_callback", "debug_callback", "debug_print", "io_callback",
                    "buffer_callback"})
# (a ``buffer_callback`` with ``has_side_effect=True`` is effectful, so kept all the same)
DROPPABLE_IMPURE = frozenset({"pure_callback", "buffer_callback"})


def literal_value(a: Any) -> Any:
    """The value of a scalar literal (``None`` for a variable)."""
    return a.val if isinstance(a, Literal) else None


def is_literal_value(a: Any, v: float) -> bool:
    if not isinstance(a, Literal):
        return False
    try:
        return bool(np.all(np.asarray(a.val) == v))
    except Exception:  # noqa: BLE001 - odd literal types are simply not matched
        return False


def _hashable(v: Any) -> Any:
    if isinstance(v, (Jaxpr, ClosedJaxpr)):
        return ("jaxpr", id(v))
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    hash(v)
    return v


def params_key(params: dict) -> Any:
    """A hashable key for ``params`` (raises TypeError when some value cannot be hashed)."""
    return tuple(sorted((k, _hashable(v)) for k, v in params.items()))


def stage_expr(fn: Callable[..., Any], avals: Sequence[ShapedArray], source_info: SourceInfo | None) -> Jaxpr:
    """A jaxpr of ``fn`` (binding primitives on its tracer arguments), its equations attributed to
    ``source_info``."""
    from ftrans.core.trace import source_info_as, stage

    def flat(*args: Any) -> list:
        out = fn(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    with source_info_as(source_info):
        closed, _ = stage(flat, list(avals))
    if closed.consts:
        raise RuntimeError("stage_expr: the replacement captured constants")
    return closed.jaxpr


class Rewriter:
    """Walks one jaxpr's equations, keeping an alias map (a result that now equals another
    atom) and the list of equations emitted."""

    def __init__(self, jaxpr: Jaxpr):
        self.jaxpr = jaxpr
        self.alias: dict[int, Any] = {}
        self.eqns: list[JaxprEqn] = []
        self.changed = False

    def read(self, a: Any) -> Any:
        if isinstance(a, Var):
            seen = self.alias.get(id(a))
            while seen is not None:
                a = seen
                seen = self.alias.get(id(a)) if isinstance(a, Var) else None
        return a

    def forward(self, old: Var, new: Any) -> None:
        self.alias[id(old)] = new
        self.changed = True

    def emit(self, eqn: JaxprEqn) -> None:
        invars = [self.read(a) for a in eqn.invars]
        if any(x is not y for x, y in zip(invars, eqn.invars)):
            eqn = eqn.replace(invars=invars)
        self.eqns.append(eqn)

    def inline(self, body: Jaxpr, args: Sequence[Any], outs: Sequence[Var]) -> None:
        """Emit ``body`` applied to ``args``; its results become ``outs`` (by aliasing)."""
        env: dict[int, Any] = {id(v): a for v, a in zip(body.invars, args)}

        def r(a: Any) -> Any:
            return env.get(id(a), a) if isinstance(a, Var) else a

        for e in body.eqns:
            self.eqns.append(e.replace(invars=[r(a) for a in e.invars]))
        for o, v in zip(outs, body.outvars):
            self.forward(o, r(v))

    def finish(self) -> Jaxpr:
        if not self.changed:
            return self.jaxpr
        j = self.jaxpr
        return Jaxpr(j.constvars, j.invars, self.eqns, [self.read(v) for v in j.outvars])


def has_bodies(eqn: JaxprEqn) -> bool:
    return eqn.primitive.higher_order and bool(subjaxprs(eqn))
