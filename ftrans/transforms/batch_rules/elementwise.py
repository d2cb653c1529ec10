"""Batching rules of the elementwise primitives (and the elementwise-like ``select_n`` and ``clamp``).

Operands that are batched share one batch dimension: the rule keeps it where
it already is when every batched operand agrees (no data movement), and
otherwise moves the others to the first batched full-rank operand's.
Unbatched operands are broadcast along the batch dimension, except rank-0
ones, which elementwise primitives broadcast themselves.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import broadcast_batch, moveaxis, not_mapped, register_batching


def align(vals: list, dims: list, size: int, full: frozenset = frozenset()) -> tuple[list, int]:
    """Operands with one common batch dimension; ``full`` marks operands that may not stay rank 0."""
    unbatched = [tuple(aval_of(v).shape) if d is not_mapped else
                 tuple(aval_of(v).shape[:d] + aval_of(v).shape[d + 1:]) for v, d in zip(vals, dims)]
    top = max(len(s) for s in unbatched)
    base = next(s for s in unbatched if len(s) == top)
    target = next((d for s, d in zip(unbatched, dims) if d is not not_mapped and len(s) == top), 0)
    like = base[:target] + (size,) + base[target:]
    typed = _batch_entry(vals, dims, unbatched, top)
    out = []
    for i, (v, d, s) in enumerate(zip(vals, dims, unbatched)):
        if d is not_mapped:
            if not s and i not in full:
                out.append(v)  # elementwise primitives broadcast rank-0 operands themselves
            elif not s:
                out.append(_typed_like(S.broadcast_in_dim_p.bind(v, shape=like, broadcast_dimensions=()), v,
                                       typed, target))
            else:
                out.append(_typed_like(broadcast_batch(v, size, target), v, typed, target))
        elif len(s) == top:
            out.append(moveaxis(v, d, target))
        else:  # a batched scalar among higher-rank operands
            out.append(S.broadcast_in_dim_p.bind(v, shape=like, broadcast_dimensions=(target,)))
    return out, target


def _batch_entry(vals: list, dims: list, unbatched: list, top: int) -> Any:
    """(mesh, spec entry) of the batch dimension of a full-rank batched operand typed over Explicit mesh axes
    (a vmap over an array split there), or None."""
    for v, d, s in zip(vals, dims, unbatched):
        if d is not not_mapped and len(s) == top:
            sh = aval_of(v).typed_sharding
            if sh is not None and d < len(sh.spec) and sh.spec[d] is not None:
                return sh.mesh, sh.spec[d]
    return None


def _typed_like(b: Any, v: Any, typed: Any, target: int) -> Any:
    """An unbatched operand broadcast along the batch dimension, split there as the batched operands are (JAX
    broadcasts it with the vmap's explicit mesh axis), so the primitive sees one layout."""
    if typed is None:
        return b
    from ftrans.core.prims.sharding import sharding_constraint_p
    from ftrans.core.sharding import NamedSharding, PartitionSpec

    mesh, entry = typed
    own = aval_of(v).typed_sharding
    rank = len(aval_of(b).shape)
    if own is None or own.mesh != mesh:  # (an untyped operand: the rules take it as it is)
        return b
    entries = list(own.spec)
    entries += [None] * (rank - 1 - len(entries))
    entries.insert(target, entry)
    return sharding_constraint_p.bind(b, sharding=NamedSharding(mesh, PartitionSpec(*entries[:rank])))


def elementwise_rule(prim: Primitive, full: frozenset = frozenset()) -> None:
    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        ops, d = align(vals, dims, frame.size, full)
        out = prim.bind(*ops, **params)
        if prim.multiple_results:
            return out, [d] * len(out)
        return out, d

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in list(vars(E).values()):
    if isinstance(_p, Primitive):
        elementwise_rule(_p)
elementwise_rule(S.convert_element_type_p)


@register_batching(S.bitcast_convert_type_p)
def _bitcast_batch(vals: list, dims: list, *, frame: Any, new_dtype: Any) -> tuple[Any, Any]:
    """A width-changing bitcast adds or removes a trailing dimension: keep the batch dimension first."""
    (x,), (d,) = vals, dims
    return S.bitcast_convert_type_p.bind(moveaxis(x, d, 0), new_dtype=new_dtype), 0


@register_batching(S.to_edtype_p)
def _to_edtype_batch(vals: list, dims: list, *, frame: Any, edtype: Any) -> tuple[Any, Any]:
    """Converting to an extended dtype drops the representation's trailing axes: batch dimension first."""
    (x,), (d,) = vals, dims
    return S.to_edtype_p.bind(moveaxis(x, d, 0), edtype=edtype), 0


@register_batching(S.from_edtype_p)
def _from_edtype_batch(vals: list, dims: list, *, frame: Any, dtype: Any) -> tuple[Any, Any]:
    """Converting from an extended dtype appends the representation's trailing axes: the batch dimension
    stays where it is."""
    (x,), (d,) = vals, dims
    return S.from_edtype_p.bind(x, dtype=dtype), d


@register_batching(S.select_n_p)
def _select_n_batch(vals: list, dims: list, *, frame: Any) -> tuple[Any, Any]:
    ops, d = align(vals, dims, frame.size, frozenset(range(1, len(vals))))
    return S.select_n_p.bind(*ops), d


@register_batching(S.clamp_p)
def _clamp_batch(vals: list, dims: list, *, frame: Any) -> tuple[Any, Any]:
    ops, d = align(vals, dims, frame.size, frozenset({1}))
    return S.clamp_p.bind(*ops), d
