"""Transpose rules of the linear-algebra primitives.

``triangular_solve`` is linear in its right-hand side ``b`` (with ``a``
known): the transpose solves with ``op(a)`` transposed, ``X = op(A)⁻ᵀ ct``
(``ct op(A)⁻ᵀ`` on the right side), keeping the conjugation.  The
factorizations are not linear in anything.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import linalg as L
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


for _p in (L.cholesky_p, L.lu_p, L.qr_p, L.eigh_p, L.svd_p, L.eig_p, L.lu_pivots_to_permutation_p, L.schur_p):
    mark_unsupported(_p, "transpose", f"`{_p.name}` is not linear in any operand")
