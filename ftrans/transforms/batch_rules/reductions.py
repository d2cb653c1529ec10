"""Batching rules of reductions, ``dot_general``, sorting, cumulative and windowed reductions.

Reductions and cumulative ops shift their axes past the batch dimension;
``dot_general`` turns two batched operands into one more batch dimension (and
one batched operand into one more free dimension); ``sort`` sorts every
operand along the shifted dimension with a shared batch dimension; windowed
reductions get a window of size 1 along the batch dimension.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import reductions as R
from ftrans.core.prims import sorting as So
from ftrans.core.prims import windowed as W
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import bdim_at_front, moveaxis, not_mapped, register_batching


def _pos(k: int, d: int) -> int:
    return k if k < d else k + 1


def _reduction(prim: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, axes: tuple, **params: Any) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        new_axes = tuple(_pos(a, d) for a in axes)
        return prim.bind(x, axes=new_axes, **params), d - sum(1 for a in new_axes if a < d)

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (R.reduce_sum_p, R.reduce_prod_p, R.reduce_max_p, R.reduce_min_p, R.reduce_and_p, R.reduce_or_p,
           R.reduce_xor_p, R.argmax_p, R.argmin_p):
    _reduction(_p)


def _cumulative(prim: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, axis: int, reverse: bool) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        return prim.bind(x, axis=_pos(axis, d), reverse=reverse), d

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (So.cumsum_p, So.cumprod_p, So.cummax_p, So.cummin_p, So.cumlogsumexp_p):
    _cumulative(_p)


@register_batching(So.sort_p)
def _sort_batch(vals: list, dims: list, *, frame: Any, dimension: int, is_stable: bool,
                num_keys: int) -> tuple[list, list]:
    d = next(d for d in dims if d is not not_mapped)
    ops = [moveaxis(v, dv, d) if dv is not not_mapped else _broadcast_at(v, frame.size, d)
           for v, dv in zip(vals, dims)]
    outs = So.sort_p.bind(*ops, dimension=_pos(dimension, d), is_stable=is_stable, num_keys=num_keys)
    return outs, [d] * len(outs)


@register_batching(So.top_k_p)
def _top_k_batch(vals: list, dims: list, *, frame: Any, k: int, axis: int) -> tuple[list, list]:
    (x,), (d,) = vals, dims
    return So.top_k_p.bind(x, k=k, axis=_pos(axis, d)), [d, d]


def _broadcast_at(x: Any, size: int, d: int) -> Any:
    from ftrans.transforms.batching import broadcast_batch

    return broadcast_batch(x, size, d)


@register_batching(R.dot_general_p)
def _dot_general_batch(vals: list, dims: list, *, frame: Any, dimension_numbers: tuple,
                       **params: Any) -> tuple[Any, Any]:
    lhs, rhs = vals
    dl, dr = dims
    (lc, rc), (lb, rb) = dimension_numbers
    if dl is not not_mapped and dr is not not_mapped:
        lhs, rhs = moveaxis(lhs, dl, 0), moveaxis(rhs, dr, 0)
        dn = ((tuple(c + 1 for c in lc), tuple(c + 1 for c in rc)),
              ((0,) + tuple(b + 1 for b in lb), (0,) + tuple(b + 1 for b in rb)))
        return R.dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), 0
    nb = len(lb)
    if dl is not not_mapped:
        nd = len(aval_of(lhs).shape) - 1
        dn = ((tuple(_pos(c, dl) for c in lc), tuple(rc)), (tuple(_pos(b, dl) for b in lb), tuple(rb)))
        kept = [k for k in range(nd) if k not in lc and k not in lb]
        out_d = nb + sum(1 for k in kept if _pos(k, dl) < dl)
        return R.dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), out_d
    nd_l = len(aval_of(lhs).shape)
    nd = len(aval_of(rhs).shape) - 1
    dn = ((tuple(lc), tuple(_pos(c, dr) for c in rc)), (tuple(lb), tuple(_pos(b, dr) for b in rb)))
    kept_l = nd_l - len(lc) - len(lb)
    kept = [k for k in range(nd) if k not in rc and k not in rb]
    out_d = nb + kept_l + sum(1 for k in kept if _pos(k, dr) < dr)
    return R.dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), out_d


def _windowed(prim: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, window_dimensions: tuple, window_strides: tuple,
             padding: tuple, base_dilation: tuple, window_dilation: tuple) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        x = bdim_at_front(x, d, frame.size)
        out = prim.bind(x, window_dimensions=(1,) + tuple(window_dimensions),
                        window_strides=(1,) + tuple(window_strides), padding=((0, 0),) + tuple(padding),
                        base_dilation=(1,) + tuple(base_dilation), window_dilation=(1,) + tuple(window_dilation))
        return out, 0

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (W.reduce_window_sum_p, W.reduce_window_max_p, W.reduce_window_min_p):
    _windowed(_p)


@register_batching(R.reduce_p)
def _reduce_general_batch(vals: list, dims: list, *, frame: Any, jaxpr: Any, dimensions: tuple) -> tuple[list, list]:
    """Operands batched at the front (broadcast where unbatched), the reduced dimensions shifted past it."""
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError(
            "lax.reduce: vmap over the init values of a reduction with a general computation is not "
            "supported (as in JAX); pass unbatched init values"
        )
    ops = [bdim_at_front(v, d, frame.size) for v, d in zip(vals[:n], dims[:n])]
    outs = R.reduce_p.bind(*ops, *vals[n:], jaxpr=jaxpr, dimensions=tuple(int(d) + 1 for d in dimensions))
    return list(outs), [0] * len(outs)


@register_batching(W.reduce_window_p)
def _reduce_window_general_batch(vals: list, dims: list, *, frame: Any, jaxpr: Any, window_dimensions: tuple,
                                 window_strides: tuple, padding: tuple, base_dilation: tuple,
                                 window_dilation: tuple) -> tuple[list, list]:
    """Operands batched at the front (broadcast where unbatched), with a window of size 1 along it."""
    n = len(vals) // 2
    if any(d is not not_mapped for d in dims[n:]):
        raise NotImplementedError(
            "lax.reduce_window: vmap over the init values of a windowed reduction with a general computation "
            "is not supported; pass unbatched init values"
        )
    ops = [bdim_at_front(v, d, frame.size) for v, d in zip(vals[:n], dims[:n])]
    outs = W.reduce_window_p.bind(
        *ops, *vals[n:], jaxpr=jaxpr, window_dimensions=(1,) + tuple(window_dimensions),
        window_strides=(1,) + tuple(window_strides), padding=((0, 0),) + tuple(padding),
        base_dilation=(1,) + tuple(base_dilation), window_dilation=(1,) + tuple(window_dilation))
    return list(outs), [0] * len(outs)
