"""Symbolic dimensions for ``export`` (JAX's shape polymorphism): parsing shape specifications.

``symbolic_shape("b, 2*w, 3")`` parses a shape specification into integers and symbolic dimensions
(:class:`ftrans.core.shape_poly.DimExpr`: integer polynomials over dimension variables, which compute
with ``+``, ``-``, ``*``, ``//``, ``%`` and compare as JAX's do); a ``ShapeDtypeStruct`` of such a
shape stands for the arguments of every size when exported (``export(jit(f))(spec)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftrans.core.shape_poly import DimExpr, SymbolicScope, parse_dim

__all__ = ["SymbolicScope", "is_symbolic_dim", "symbolic_shape", "symbolic_args_specs",
           "shape_polymorphism_unsupported", "symbolic_dim_bounds"]


def shape_polymorphism_unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: this use of shape polymorphism is not supported by ftrans yet (see the export section of "
        "its documentation for what is). Export the function once per concrete shape instead.")


def is_symbolic_dim(p: Any) -> bool:
    """Whether ``p`` is a symbolic dimension (not an integer)."""
    return isinstance(p, DimExpr)


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
    if shape_spec is not None and not isinstance(shape_spec, str):
        raise ValueError(f"polymorphic shape spec should be None or a string. Found {shape_spec!r}.")
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
        try:
            d = parse_dim(p, scope)
        except ValueError as e:
            raise ValueError(f"syntax error in polymorphic shape {shape_spec!r} in dimension {i}: {p!r}") from e
        if like is not None and i < len(like) and like[i] is not None and not isinstance(d, DimExpr) \
                and d != like[i]:
            raise ValueError(f"polymorphic shape {shape_spec!r} in dimension {i} must match the known "
                             f"dimension size {like[i]} for argument shape {tuple(like)}")
        dims.append(d)
    return tuple(dims)


class _Group:
    """The specs of the leaves under one spec of a prefix pytree (a leaf of ``tree_map``'s result)."""

    def __init__(self, specs: list):
        self.specs = specs


def symbolic_args_specs(args: Any, shapes_specs: Any, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None) -> Any:
    """``ShapeDtypeStruct``s for ``args`` (arrays or anything with a shape and dtype) whose shapes are given by
    ``shapes_specs`` (one spec string for all, or a prefix pytree of strings; None keeps a leaf's shape), for
    ``export``."""
    from ftrans.core import pytrees as tree_util
    from ftrans.core.avals import ShapeDtypeStruct

    leaves, tree = tree_util.tree_flatten(args)
    if shapes_specs is None or isinstance(shapes_specs, str):
        specs = [shapes_specs] * len(leaves)
    else:
        prefix = tuple(shapes_specs) if isinstance(args, tuple) and isinstance(shapes_specs, list) else shapes_specs
        try:  # each spec applies to every leaf of the argument subtree at its place (a prefix pytree)
            per = tree_util.tree_map(lambda spec, sub: _Group([spec] * len(tree_util.tree_leaves(sub))), prefix, args,
                                     is_leaf=lambda x: x is None or not isinstance(x, (list, tuple, dict)))
        except (ValueError, TypeError) as e:
            raise ValueError(f"pytree structure error: different types between export.symbolic_args_specs "
                             f"shapes_specs {shapes_specs!r} and the arguments: the specs must be a prefix pytree of "
                             f"the arguments ({e})") from None
        specs = [spec for group in tree_util.tree_leaves(per, is_leaf=lambda x: isinstance(x, _Group))
                 for spec in group.specs]
    scope = scope or SymbolicScope(constraints)
    out = []
    for leaf, spec in zip(leaves, specs):
        shape = tuple(getattr(leaf, "shape", ()))
        dims = shape if spec is None else symbolic_shape(spec, scope=scope, like=shape)
        out.append(ShapeDtypeStruct(dims, getattr(leaf, "dtype", None) or type(leaf)))
    return tree_util.tree_unflatten(tree, out)


def symbolic_dim_bounds(dimension: Any) -> tuple:
    """Inclusive bounds ftrans can prove for a dimension (JAX's ``export.symbolic_dim_bounds``, jax 0.11).

    The bounds hold for every value of the dimension variables that the expression's ``SymbolicScope``
    (its constraints) allows; they are conservative, and may be looser than JAX's where a bound needs
    chaining constraints (``d <= c`` with ``c <= 10`` gives ``d <= inf`` here, ``10`` in JAX).

    Args:
        dimension: an integer or a symbolic dimension expression.

    Returns:
        ``(lower, upper)``: integers, or ``-inf``/``inf`` where no finite bound was established.

    Examples:
        >>> from ftrans import export
        >>> b, = export.symbolic_shape("b")
        >>> export.symbolic_dim_bounds(2 * b - 3)
        (-1, inf)
        >>> c, = export.symbolic_shape("c", constraints=("c >= 4", "c <= 10"))
        >>> export.symbolic_dim_bounds(c // 2)
        (2, 5)
        >>> export.symbolic_dim_bounds(7)
        (7, 7)
    """
    import math
    import operator

    from ftrans.core.shape_poly import _bounds

    if not isinstance(dimension, DimExpr):
        v = operator.index(dimension)  # (a float or string: TypeError, as JAX's)
        return v, v
    lo, hi = _bounds(dimension, dimension.scope)
    return tuple(int(b) if math.isfinite(b) else b for b in (lo, hi))
