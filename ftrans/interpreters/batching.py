"""JAX's ``jax.interpreters.batching``: giving a user's primitive its ``vmap`` rule JAX's way, and
registering container types that ``vmap`` maps over.

``primitive_batchers[p] = rule`` with JAX's signature ``rule(batched_args, batch_dims, **params) ->
(out, out_dim)``, where an unmapped operand's (or result's) dimension is ``not_mapped`` (``None``, as in
JAX); it is a view of ftrans's table (``ftrans.transforms.batching.batching_rules``, whose rules also take
the ``frame`` of the ``vmap``), converting between the two.  ``defvectorized`` and ``defbroadcasting`` are
JAX's shorthands for elementwise primitives; ``bdim_at_front``, ``moveaxis`` and ``broadcast`` help rules.

``register_vmappable(data_type, spec_type, axis_size_type, to_elt, from_elt, make_iota)`` lets
``vmap`` take values of ``data_type`` apart into batched arrays and build them again, with map specs
of ``spec_type`` in ``in_axes``/``out_axes`` (see ``ftrans/transforms/batching.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from ftrans.core.axis_env import AxisFrame
from ftrans.core.primitive import Primitive
from ftrans.core.trace import aval_of
from ftrans.transforms import batching as _b
from ftrans.transforms.batching import is_vmappable, register_vmappable, spec_types, unregister_vmappable

__all__ = [
    "bdim_at_front", "broadcast", "defbroadcasting", "defvectorized", "is_vmappable", "moveaxis", "not_mapped",
    "primitive_batchers", "register_vmappable", "spec_types", "unregister_vmappable",
]

not_mapped = None  # JAX's: the batch dimension of an operand or result that does not vary over the batch


def _to_jax(d: Any) -> Any:
    return None if d is _b.not_mapped else d


def _to_ftrans(d: Any) -> Any:
    return _b.not_mapped if d is None else d


def _from_jax_rule(prim: Primitive, rule: Callable) -> Callable:
    def adapted(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        out, out_dim = rule(list(vals), [_to_jax(d) for d in dims], **params)
        if prim.multiple_results:
            if isinstance(out_dim, (list, tuple)):
                return out, [_to_ftrans(d) for d in out_dim]
            return out, [_to_ftrans(out_dim)] * len(out)
        return out, _to_ftrans(out_dim)

    adapted.jax_rule = rule  # type: ignore[attr-defined]
    return adapted


def _to_jax_rule(rule: Callable) -> Callable:
    def jax_rule(vals: Any, dims: Any, **params: Any) -> tuple[Any, Any]:
        size = next((aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None), 1)
        out, out_dim = rule(list(vals), [_to_ftrans(d) for d in dims], frame=AxisFrame(None, size, None), **params)
        if isinstance(out_dim, (list, tuple)):
            return out, [_to_jax(d) for d in out_dim]
        return out, _to_jax(out_dim)

    return jax_rule


class _PrimitiveBatchers(MutableMapping):
    """``primitive_batchers``: ftrans's batching table, read and written with JAX's rule signature."""

    def __getitem__(self, prim: Primitive) -> Callable:
        rule = _b.batching_rules[prim]
        return getattr(rule, "jax_rule", None) or _to_jax_rule(rule)

    def __setitem__(self, prim: Primitive, rule: Callable) -> None:
        _b.batching_rules[prim] = _from_jax_rule(prim, rule)

    def __delitem__(self, prim: Primitive) -> None:
        del _b.batching_rules[prim]

    def __contains__(self, prim: object) -> bool:
        return prim in _b.batching_rules

    def __iter__(self) -> Iterator[Primitive]:
        return iter(_b.batching_rules)

    def __len__(self) -> int:
        return len(_b.batching_rules)

    def __repr__(self) -> str:
        return f"<primitive_batchers: {len(self)} rules>"


primitive_batchers = _PrimitiveBatchers()


def bdim_at_front(x: Any, bdim: Any, size: int) -> Any:
    """``x`` with its batch dimension first (an unmapped ``x``, ``bdim`` None, is broadcast to ``size``)."""
    return _b.bdim_at_front(x, _to_ftrans(bdim), size)


def moveaxis(x: Any, src: int, dst: int) -> Any:
    nd = len(aval_of(x).shape)
    return _b.moveaxis(x, src % nd, dst % nd)


def broadcast(x: Any, sz: int, axis: int) -> Any:
    """``x`` given a new dimension of size ``sz`` at ``axis``."""
    return _b.broadcast_batch(x, sz, axis)


def defvectorized(prim: Primitive) -> None:
    """A unary elementwise primitive: the result is batched where the operand is."""

    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        return prim.bind(x, **params), d

    _b.batching_rules[prim] = rule


def defbroadcasting(prim: Primitive) -> None:
    """An n-ary elementwise primitive whose operands agree in shape (a rank-0 one may stand for any shape):
    batched operands are lined up, unmapped ones broadcast along the batch."""

    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        shapes = {(tuple(aval_of(x).shape), d) for x, d in zip(vals, dims)}
        if len(shapes) == 1 and next(iter(shapes))[1] is not _b.not_mapped:
            return prim.bind(*vals, **params), dims[0]
        size = next(aval_of(x).shape[d] for x, d in zip(vals, dims) if d is not _b.not_mapped)
        rank = max(len(aval_of(x).shape) - (d is not _b.not_mapped) for x, d in zip(vals, dims))
        args = []
        for x, d in zip(vals, dims):
            if d is _b.not_mapped and len(aval_of(x).shape) == 0 and rank == 0:
                args.append(_b.bdim_at_front(x, d, size))
            elif d is _b.not_mapped and len(aval_of(x).shape) == 0:
                args.append(x)  # a rank-0 operand stands for any shape
            else:
                x = _b.bdim_at_front(x, d, size)
                if len(aval_of(x).shape) - 1 < rank:  # a mapped rank-0 operand: spread over the others' shape
                    args.append(("spread", x))
                else:
                    args.append(x)
        full = next(tuple(aval_of(a).shape) for a in args if not isinstance(a, tuple)
                    and len(aval_of(a).shape) == rank + 1)
        args = [_spread(a[1], full) if isinstance(a, tuple) else a for a in args]
        return prim.bind(*args, **params), 0

    _b.batching_rules[prim] = rule


def _spread(x: Any, shape: tuple) -> Any:
    from ftrans.core.prims import structural as S

    return S.broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=(0,))
