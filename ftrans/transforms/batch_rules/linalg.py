"""Batching rules of the linear-algebra primitives.

Every linear-algebra primitive already works on a stack of matrices (leading
batch axes), so the batch axis is moved to the front and the primitive runs
once on the larger stack; ``triangular_solve`` broadcasts an unbatched
operand along the new axis so both share their batch shape.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import linalg as L
from ftrans.transforms.batching import bdim_at_front, register_batching


def _leading(prim: Any) -> None:
    def rule(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
        (x,), (d,) = vals, dims
        out = prim.bind(bdim_at_front(x, d, frame.size), **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)

    rule.__name__ = f"{prim.name}_batch"
    register_batching(prim)(rule)


for _p in (L.cholesky_p, L.lu_p, L.qr_p, L.eigh_p, L.svd_p, L.eig_p, L.lu_pivots_to_permutation_p, L.schur_p):
    _leading(_p)


@register_batching(L.triangular_solve_p)
def _triangular_solve_batch(vals: list, dims: list, *, frame: Any, **params: Any) -> tuple[Any, Any]:
    a, b = vals
    da, db = dims
    return L.triangular_solve_p.bind(bdim_at_front(a, da, frame.size), bdim_at_front(b, db, frame.size),
                                     **params), 0
