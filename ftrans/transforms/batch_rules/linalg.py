"""Batching rules of the linear-algebra primitives.

Every linear-algebra primitive already works on a stack of matrices (leading
batch axes), so the batch axis is moved to the front and the primitive runs
once on the larger stack; ``triangular_solve`` broadcasts an unbatched
operand along the new axis so both share their batch shape.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import linalg as L
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.batching import bdim_at_front, moveaxis, not_mapped, register_batching


def _leading(prim: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        out = prim.bind(bdim_at_front(x, d, frame.size), **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (L.cholesky_p, L.lu_p, L.qr_p, L.eigh_p, L.svd_p, L.eig_p, L.lu_pivots_to_permutation_p, L.schur_p,
           L.tridiagonal_p, L.hessenberg_p):
    _leading(_p)


@register_batching(L.triangular_solve_p)
def _triangular_solve_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
    a, b = vals
    da, db = dims
    return L.triangular_solve_p.bind(bdim_at_front(a, da, frame.size), bdim_at_front(b, db, frame.size),
                                     **params), 0


def _all_leading(prim: Any) -> None:
    """Several operands sharing their batch shape: each gets the new axis first (broadcast if unbatched)."""
    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        return prim.bind(*(bdim_at_front(x, d, frame.size) for x, d in zip(vals, dims)), **params), 0

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (L.householder_product_p, L.ormqr_p, L.cholesky_update_p, L.symmetric_product_p):
    _all_leading(_p)


@register_batching(L.tridiagonal_solve_p)
def _tridiagonal_solve_batch(vals: list, dims: list, *, frame: Any, perturb_singular: bool) -> tuple[Any, Any]:
    dl, d, du, b = vals
    if all(x is not_mapped for x in dims[:3]):
        # Only the right-hand sides vary: they become more columns of one solve.
        b = moveaxis(b, dims[3], aval_of(b).ndim - 1)
        shape = tuple(aval_of(b).shape)
        flat = S.reshape_p.bind(b, new_sizes=shape[:-2] + (shape[-2] * shape[-1],), dimensions=None)
        out = L.tridiagonal_solve_p.bind(dl, d, du, flat, perturb_singular=perturb_singular)
        return S.reshape_p.bind(out, new_sizes=shape, dimensions=None), len(shape) - 1
    ops = [bdim_at_front(x, dd, frame.size) for x, dd in zip(vals, dims)]
    return L.tridiagonal_solve_p.bind(*ops, perturb_singular=perturb_singular), 0
