"""Batching rules of the host callbacks (``ftrans/core/prims/callbacks.py``).

* ``debug_callback`` is unrolled over the batch, as in JAX: one call per element, on that
  element's values (``vmap`` of a ``debug.print`` prints each element on its own line).
* ``pure_callback`` follows its ``vmap_method``: ``sequential`` calls it once per element
  in a ``scan`` over the batch (JAX's ``lax.map``), ``sequential_unrolled`` in a fully
  unrolled one; ``expand_dims`` calls it once with batched operands first
  and a size-1 leading axis on the others; ``broadcast_all`` broadcasts the others to the
  batch; ``legacy_vectorized`` moves batched operands' axis first and leaves the others.
  Without a ``vmap_method`` it cannot be batched (JAX's ``NotImplementedError``).
* an unordered ``io_callback`` is called once per element (a ``scan``); an ordered one cannot be
  batched.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import hoist_consts
from ftrans.core.prims import structural as S
from ftrans.core.prims.callbacks import (
    dce_sink_p,
    debug_callback_p,
    debug_print_p,
    inspect_sharding_p,
    io_callback_p,
    pure_callback_p,
)
from ftrans.core.prims.control_flow import scan_p
from ftrans.core.trace import aval_of, stage
from ftrans.errors import FtransValueError
from ftrans.transforms.batching import broadcast_batch, moveaxis, not_mapped, register_batching


def _size(vals: list, dims: list) -> int:
    return next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)


def _element(x: Any, d: Any, i: int) -> Any:
    """Element ``i`` of ``x`` along its batch dimension ``d`` (``x`` itself when unmapped)."""
    if d is not_mapped:
        return x
    shape = aval_of(x).shape
    start = [0] * len(shape)
    limit = list(shape)
    start[d], limit[d] = i, i + 1
    piece = S.slice_p.bind(x, start_indices=tuple(start), limit_indices=tuple(limit), strides=None)
    return S.squeeze_p.bind(piece, dimensions=(d,))


def _unrolled(prim: Any, vals: list, dims: list, params: dict) -> tuple[list, list]:
    """One call per batch element, each on that element's values, unrolled in the program (JAX's rule for
    debug callbacks: they have no results to stack)."""
    for i in range(_size(vals, dims)):
        prim.bind(*[_element(v, d, i) for v, d in zip(vals, dims)], **params)
    return [], []


def _looped(prim: Any, vals: list, dims: list, params: dict, unrolled: bool = False) -> tuple[list, list]:
    """One call per batch element, in a ``scan`` over the batched operands (JAX's ``lax.map``): the
    program holds one call however large the batch."""
    n = _size(vals, dims)
    fixed = [v for v, d in zip(vals, dims) if d is not_mapped]
    xs = [moveaxis(v, d, 0) for v, d in zip(vals, dims) if d is not not_mapped]

    def body(*args: Any) -> list:
        c, x = iter(args[:len(fixed)]), iter(args[len(fixed):])
        ops = [next(c) if d is not_mapped else next(x) for d in dims]
        return list(prim.bind(*ops, **params))

    in_avals = [aval_of(v) for v in fixed] + [ShapedArray(aval_of(x).shape[1:], aval_of(x).dtype, aval_of(x).weak_type)
                                              for x in xs]
    closed, _ = stage(body, in_avals)
    body_jaxpr, consts = hoist_consts(closed)
    outs = scan_p.bind(*consts, *fixed, *xs, jaxpr=body_jaxpr, num_consts=len(consts) + len(fixed), num_carry=0,
                       length=n, reverse=False, unroll=max(n, 1) if unrolled else 1)
    return list(outs), [0] * len(outs)


@register_batching(debug_callback_p)
def _debug_callback_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    return _unrolled(debug_callback_p, vals, dims, params)


@register_batching(debug_print_p)
def _debug_print_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    return _unrolled(debug_print_p, vals, dims, params)


def _batched_avals(result_avals: tuple, n: int) -> tuple:
    return tuple(ShapedArray((n, *a.shape), a.dtype, a.weak_type) for a in result_avals)


def batch_by_vmap_method(prim: Any, vals: list, dims: list, params: dict, *, what: str, api: str,
                         adjust: Any = None) -> tuple[list, list]:
    """The ``vmap_method`` rule every call to foreign code shares (``pure_callback``, ``ffi_call``,
    ``buffer_callback``): the foreign function cannot be traced, so the method the user named says how
    it sees the batch. ``what`` names the function in the error, ``api`` the call that takes the method;
    ``adjust(params, method, dims)`` edits the batched call's other params (an ffi call's layouts)."""
    method = params["vmap_method"]
    if method in ("sequential", "sequential_unrolled"):
        return _looped(prim, vals, dims, params, unrolled=method == "sequential_unrolled")
    if method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap is only supported for the {prim.name} primitive when vmap_method is one of 'sequential', "
            f"'sequential_unrolled', 'expand_dims', 'broadcast_all', or 'legacy_vectorized'. Got "
            f"vmap_method={method!r} ({what}); pass vmap_method= to {api}")
    n = _size(vals, dims)
    front = [v if d is not_mapped else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    if method == "legacy_vectorized":
        args = front
    else:
        size = n if method == "broadcast_all" else 1
        args = [broadcast_batch(v, size, 0) if d is not_mapped else v for v, d in zip(front, dims)]
    p = dict(params, result_avals=_batched_avals(params["result_avals"], n))
    if adjust is not None:
        adjust(p, method, dims)
    outs = prim.bind(*args, **p)
    return list(outs), [0] * len(outs)


@register_batching(pure_callback_p)
def _pure_callback_batch(vals: list, dims: list, *, frame: Any, callback: Any, result_avals: tuple,
                         vmap_method: Any, sharding: Any = None) -> tuple[list, list]:
    params = dict(callback=callback, result_avals=result_avals, vmap_method=vmap_method, sharding=sharding)
    return batch_by_vmap_method(pure_callback_p, vals, dims, params, what=f"the callback {callback!r}",
                                api="pure_callback")


@register_batching(io_callback_p)
def _io_callback_batch(vals: list, dims: list, *, frame: Any, callback: Any, result_avals: tuple,
                       ordered: bool, sharding: Any = None) -> tuple[list, list]:
    if ordered:
        raise FtransValueError(f"Cannot `vmap` ordered IO callback ({callback!r}): its calls would have no "
                               "order; use ordered=False, or loop with lax.map / lax.scan")
    return _looped(io_callback_p, vals, dims, dict(callback=callback, result_avals=result_avals, ordered=ordered,
                                                   sharding=sharding))


@register_batching(dce_sink_p)
def _dce_sink_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    return list(dce_sink_p.bind(*vals, **params)), []


@register_batching(inspect_sharding_p)
def _inspect_sharding_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[list, list]:
    # the batched value itself, as JAX's rule reports it
    return list(inspect_sharding_p.bind(*vals, **params)), []
