"""Symbolic dimensions (JAX's shape polymorphism), as far as ftrans supports them: parsing only.

``symbolic_shape("b, 2*w, 3")`` parses a shape specification into a tuple of integers and
:class:`SymbolicDim` objects (which print, compare and combine with ``+``, ``-``, ``*`` as
expressions), and ``is_symbolic_dim`` tells them apart. ftrans's IR has static shapes only
(an abstract value's dimensions are integers and every lowering rule emits static tensor
types), so a symbolic dimension cannot enter a program: turning one into an integer, which is
what building a ``ShapeDtypeStruct`` or tracing does, raises a ``NotImplementedError`` that
names the dimension and what is missing. Nothing is ever computed with a guessed size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["SymbolicDim", "SymbolicScope", "is_symbolic_dim", "symbolic_shape", "symbolic_args_specs",
           "shape_polymorphism_unsupported"]


def shape_polymorphism_unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: shape polymorphism is not supported by ftrans. Its IR has static shapes only (the dimensions "
        "of an abstract value are integers, its shape rules compute with integers, and its lowering writes "
        "static tensor types), so dimension variables would need symbolic dimensions in abstract values, "
        "symbolic arithmetic in every shape rule, and dynamically shaped StableHLO with shape assertions in the "
        "lowering. Export the function once per concrete shape instead.")


class SymbolicScope:
    """The scope that symbolic dimensions (and their constraints) belong to (JAX's ``SymbolicScope``)."""

    def __init__(self, constraints_str: Sequence[str] = ()):
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self.constraints = tuple(constraints_str)

    def __repr__(self) -> str:
        return f"SymbolicScope(constraints={list(self.constraints)!r})"


class SymbolicDim:
    """A dimension given by an expression over dimension variables (``b``, ``2*w + 1``); it has no value."""

    __slots__ = ("expr", "scope")

    def __init__(self, expr: str, scope: SymbolicScope):
        self.expr = expr
        self.scope = scope

    def __str__(self) -> str:
        return self.expr

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolicDim) and other.expr == self.expr and other.scope is self.scope

    def __hash__(self) -> int:
        return hash(self.expr)

    def _combine(self, op: str, other: Any, swap: bool = False) -> SymbolicDim:
        if isinstance(other, SymbolicDim):
            o = other.expr
        elif isinstance(other, int):
            o = str(other)
        else:
            return NotImplemented
        a, b = (o, self.expr) if swap else (self.expr, o)
        if op == "*":
            a, b = (f"({a})" if " " in a else a), (f"({b})" if " " in b else b)
        return SymbolicDim(f"{a} {op} {b}" if op != "*" else f"{a}*{b}", self.scope)

    def __add__(self, other: Any) -> SymbolicDim:
        return self._combine("+", other)

    def __radd__(self, other: Any) -> SymbolicDim:
        return self._combine("+", other, True)

    def __sub__(self, other: Any) -> SymbolicDim:
        return self._combine("-", other)

    def __rsub__(self, other: Any) -> SymbolicDim:
        return self._combine("-", other, True)

    def __mul__(self, other: Any) -> SymbolicDim:
        return self._combine("*", other)

    def __rmul__(self, other: Any) -> SymbolicDim:
        return self._combine("*", other, True)

    def _no_value(self, *args: Any) -> Any:
        raise shape_polymorphism_unsupported(f"the symbolic dimension '{self.expr}' was used as a size")

    __int__ = __index__ = __bool__ = __lt__ = __le__ = __gt__ = __ge__ = _no_value


def is_symbolic_dim(p: Any) -> bool:
    """Whether ``p`` is a symbolic dimension (not an integer)."""
    return isinstance(p, SymbolicDim)


_TERM = re.compile(r"^\s*(?:[A-Za-z_][\w.]*|\d+)(?:\s*[-+*]\s*(?:[A-Za-z_][\w.]*|\d+))*\s*$")


def _split_top(spec: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for c in spec:
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += c == "("
        depth -= c == ")"
        cur += c
    out.append(cur)
    return out


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (), scope: SymbolicScope | None = None,
                   like: Sequence[int | None] | None = None) -> tuple:
    """Parse ``shape_spec`` (``"b, 2*w, 3"``; ``...`` stands for the dimensions of ``like``) into integers and
    symbolic dimensions."""
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    spec = (shape_spec or "").strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    parts = [p.strip() for p in _split_top(spec)] if spec else []
    if parts and parts[-1] == "":
        parts = parts[:-1]
    dims: list = []
    for i, p in enumerate(parts):
        if p == "...":
            if like is None:
                raise ValueError(f"syntax error in polymorphic shape {shape_spec!r}: '...' needs `like`")
            dims.extend(like[len(dims):len(like) - (len(parts) - i - 1)])
            continue
        if p in ("_", ""):
            if like is None or i >= len(like) or like[i] is None:
                raise ValueError(f"syntax error in polymorphic shape {shape_spec!r}: '{p}' needs a known dimension "
                                 "in `like`")
            dims.append(int(like[i]))
            continue
        if p.isdigit():
            dims.append(int(p))
            continue
        if not _TERM.match(p.replace("(", " ").replace(")", " ")):
            raise ValueError(f"syntax error in polymorphic shape {shape_spec!r} in dimension {i}: {p!r}")
        dims.append(SymbolicDim(re.sub(r"\s*\*\s*", "*", re.sub(r"\s+", " ", p)), scope))
    return tuple(dims)


def symbolic_args_specs(args: Any, shapes_specs: Any, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None) -> Any:
    """``ShapeDtypeStruct``-like specs for ``args`` with symbolic shapes. ftrans cannot export them (see
    ``shape_polymorphism_unsupported``): this raises ``NotImplementedError`` when a spec has a symbolic
    dimension, and gives concrete ``ShapeDtypeStruct``s when every dimension is known."""
    from ftrans.core import pytrees as tree_util
    from ftrans.core.avals import ShapeDtypeStruct

    leaves, tree = tree_util.tree_flatten(args)
    if shapes_specs is None or isinstance(shapes_specs, str):
        specs = [shapes_specs] * len(leaves)
    else:
        specs = tree_util.tree_flatten(shapes_specs, is_leaf=lambda x: x is None or isinstance(x, str))[0]
        if len(specs) != len(leaves):
            raise ValueError(f"shapes_specs must be a prefix of the arguments: {len(specs)} specs for "
                             f"{len(leaves)} arguments")
    scope = scope or SymbolicScope(constraints)
    out = []
    for leaf, spec in zip(leaves, specs):
        shape = tuple(getattr(leaf, "shape", ()))
        dims = shape if spec is None else symbolic_shape(spec, scope=scope, like=shape)
        sym = [d for d in dims if is_symbolic_dim(d)]
        if sym:
            raise shape_polymorphism_unsupported(f"symbolic_args_specs: the dimension '{sym[0]}' of {spec!r}")
        out.append(ShapeDtypeStruct(dims, getattr(leaf, "dtype", None) or type(leaf)))
    return tree_util.tree_unflatten(tree, out)
