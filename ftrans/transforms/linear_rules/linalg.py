"""Transpose rules of the linear-algebra primitives.

``triangular_solve`` is linear in its right-hand side ``b`` (with ``a``
known): the transpose solves with ``op(a)`` transposed, ``X = op(A)⁻ᵀ ct``
(``ct op(A)⁻ᵀ`` on the right side), keeping the conjugation.  The
factorizations are not linear in anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import linalg as L
from ftrans.core.prims import structural as S
from ftrans.transforms.transpose import is_undefined, register_transpose


@register_transpose(L.triangular_solve_p)
def _triangular_solve_t(ct: Any, a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool,
                        conjugate_a: bool, unit_diagonal: bool) -> list:
    if is_undefined(a):
        raise NotImplementedError(
            "transpose of `triangular_solve` with respect to the matrix a: the solve is linear only in b "
            "(linear_transpose needs a function linear in its arguments)")
    ct_b = L.triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower, transpose_a=not transpose_a,
                                     conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    return [None, ct_b]


for _p in (L.cholesky_p, L.lu_p, L.qr_p, L.eigh_p, L.svd_p, L.eig_p, L.lu_pivots_to_permutation_p, L.schur_p,
           L.tridiagonal_p, L.hessenberg_p, L.householder_product_p, L.ormqr_p, L.cholesky_update_p,
           L.symmetric_product_p):
    mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear in any operand")


def shifted_diagonals(dl: Any, du: Any) -> tuple[Any, Any]:
    """The sub- and super-diagonals of the transposed tridiagonal matrix: ``[0, du[:-1]]`` and ``[dl[1:], 0]``."""
    from ftrans.core.trace import aval_of

    nd = aval_of(dl).ndim
    zero = np.zeros((), aval_of(dl).dtype)
    keep = ((0, 0, 0),) * (nd - 1)
    return (S.pad_p.bind(du, zero, padding_config=keep + ((1, -1, 0),)),
            S.pad_p.bind(dl, zero, padding_config=keep + ((-1, 1, 0),)))


@register_transpose(L.tridiagonal_solve_p)
def _tridiagonal_solve_t(ct: Any, dl: Any, d: Any, du: Any, b: Any, *, perturb_singular: bool) -> list:
    if is_undefined(dl) or is_undefined(d) or is_undefined(du):
        raise NotImplementedError(
            "transpose of `tridiagonal_solve` with respect to the diagonals: the solve is linear only in b "
            "(linear_transpose needs a function linear in its arguments)")
    dl_t, du_t = shifted_diagonals(dl, du)
    return [None, None, None, L.tridiagonal_solve_p.bind(dl_t, d, du_t, ct, perturb_singular=perturb_singular)]
