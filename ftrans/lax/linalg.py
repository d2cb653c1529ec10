"""``ftrans.lax.linalg``: JAX's ``lax.linalg`` decompositions and triangular solves.

Each function checks its operands (a stack of matrices in the last two axes,
a float or complex dtype; integers are converted to the default float type)
and binds one primitive of ``ftrans.core.prims.linalg``.  Like JAX, a failed
factorization gives NaNs rather than an error: ``cholesky`` of a matrix that
is not positive definite is all NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.operands import as_operand, aval_of
from ftrans.core.prims import linalg as L
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError
from ftrans.transforms.ad_rules import linalg as M

__all__ = ["cholesky", "eig", "eigh", "lu", "lu_pivots_to_permutation", "qr", "schur", "svd", "triangular_solve",
           "tridiagonal_solve"]


def _default_float() -> np.dtype:
    return dtypes.canonicalize(np.dtype(np.float64))


def _matrix(name: str, x: Any, *, square: bool) -> Any:
    """``x`` as an operand of a linear-algebra primitive, or a specific error naming the user's line."""
    x = as_operand(x)
    aval = aval_of(x)
    if aval.ndim < 2:
        raise FtransShapeError(
            f"{name}: expects a matrix or a stack of matrices (shape [..., m, n]), got shape {aval.shape}")
    if square and aval.shape[-1] != aval.shape[-2]:
        raise FtransShapeError(
            f"{name}: expects square matrices in the last two axes (shape [..., n, n]), got shape {aval.shape}")
    d = aval.dtype
    if d.kind in "iub":
        from ftrans.lax import convert_element_type

        return convert_element_type(x, _default_float())
    if d not in L.LINALG_DTYPES:
        raise FtransTypeError(
            f"{name}: expects float32, float64, complex64 or complex128 matrices, got {d} "
            f"(convert with .astype(jnp.float32) first)")
    return x


def symmetrize(x: Any) -> Any:
    """``(x + xᴴ) / 2``: the Hermitian part of ``x``."""
    from ftrans import lax

    return lax.div(lax.add(x, M.mH(x)), np.asarray(2, aval_of(x).dtype))


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Any:
    """The lower Cholesky factor ``L`` of ``x = L Lᴴ`` (NaNs where ``x`` is not positive definite)."""
    x = _matrix("cholesky", x, square=True)
    if symmetrize_input:
        x = symmetrize(x)
    return L.cholesky_p.bind(x)


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Any:
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for triangular ``a``; batch shapes must agree."""
    a = _matrix("triangular_solve", a, square=True)
    b = _matrix("triangular_solve", b, square=False)
    aa, ba = aval_of(a), aval_of(b)
    if aa.dtype != ba.dtype:
        from ftrans.lax import convert_element_type

        d = np.promote_types(aa.dtype, ba.dtype)
        a, b = convert_element_type(a, d), convert_element_type(b, d)
    if aa.shape[:-2] != ba.shape[:-2]:
        raise FtransShapeError(
            f"triangular_solve: a and b must have the same batch dimensions, got shapes {aa.shape} and {ba.shape} "
            "(ftrans.scipy.linalg.solve_triangular broadcasts them)")
    n = aa.shape[-1]
    k = ba.shape[-2] if left_side else ba.shape[-1]
    if k != n:
        raise FtransShapeError(
            f"triangular_solve: with left_side={left_side}, b of shape {ba.shape} must have {n} "
            f"{'rows' if left_side else 'columns'} to match a of shape {aa.shape}")
    return L.triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                     transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                                     unit_diagonal=bool(unit_diagonal))


def lu(x: Any) -> tuple[Any, Any, Any]:
    """``(lu, pivots, permutation)`` with ``x[..., permutation, :] = L U`` (partial pivoting)."""
    x = _matrix("lu", x, square=False)
    return tuple(L.lu_p.bind(x))


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The row permutation that LAPACK-style row swaps ``pivots`` amount to."""
    p = as_operand(pivots)
    aval = aval_of(p)
    if aval.ndim < 1:
        raise FtransShapeError(f"lu_pivots_to_permutation: pivots must have rank >= 1, got shape {aval.shape}")
    if aval.dtype != np.int32:
        from ftrans.lax import convert_element_type

        if aval.dtype.kind not in "iu":
            raise FtransTypeError(f"lu_pivots_to_permutation: pivots must be integers, got {aval.dtype}")
        p = convert_element_type(p, np.dtype(np.int32))
    if int(permutation_size) < aval.shape[-1]:
        raise FtransValueError(
            f"lu_pivots_to_permutation: permutation_size={permutation_size} is smaller than the number of "
            f"pivots ({aval.shape[-1]})")
    return L.lu_pivots_to_permutation_p.bind(p, permutation_size=int(permutation_size))


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True, use_magma: Any = None) -> tuple[Any, Any]:
    """``(q, r)`` with ``x = q r``; ``q`` is ``m x m`` with ``full_matrices`` else ``m x min(m, n)``."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True (LAPACK geqp3) is not implemented in ftrans")
    x = _matrix("qr", x, square=False)
    return tuple(L.qr_p.bind(x, full_matrices=bool(full_matrices)))


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: Any = None) -> tuple[Any, Any]:
    """``(v, w)``: eigenvectors (columns) and ascending eigenvalues of a Hermitian ``x``."""
    if subset_by_index is not None:
        raise NotImplementedError("eigh: subset_by_index is not implemented in ftrans")
    x = _matrix("eigh", x, square=True)
    if symmetrize_input:
        x = symmetrize(x)
    return tuple(L.eigh_p.bind(x, lower=bool(lower)))


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index: Any = None,
        algorithm: Any = None) -> Any:
    """``(u, s, vh)`` with ``x = u diag(s) vh`` (descending ``s``), or ``s`` alone without ``compute_uv``."""
    if subset_by_index is not None:
        raise NotImplementedError("svd: subset_by_index is not implemented in ftrans")
    x = _matrix("svd", x, square=False)
    outs = L.svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vh = outs
    return u, s, vh


def eig(x: Any, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        use_magma: Any = None) -> list[Any]:
    """``[w, vl, vr]`` (those requested): eigenvalues and eigenvectors of a general square matrix (CPU)."""
    x = _matrix("eig", x, square=True)
    return list(L.eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                             compute_right_eigenvectors=bool(compute_right_eigenvectors)))


def schur(x: Any, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Any = None) -> tuple[Any, Any] | Any:
    """``(t, z)`` with ``x = z t zᴴ``: the Schur form ``t`` (quasi-upper-triangular with 2x2 blocks for
    complex-conjugate eigenvalue pairs when ``x`` is real, upper triangular when complex) and the unitary
    Schur vectors ``z`` (LAPACK's ``gees``; CPU only, as in JAX).  Only ``t`` when ``compute_schur_vectors``
    is false.  Sorting the eigenvalues is not implemented (as in JAX); no derivative rule."""
    if sort_eig_vals:
        raise NotImplementedError("schur: the sort feature of LAPACK's gees routine is not implemented")
    x = _matrix("schur", x, square=True)
    t, z = L.schur_p.bind(x)
    return (t, z) if compute_schur_vectors else t


def tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any, *, perturb_singular: bool = False) -> Any:
    """Solve ``A x = b`` for the tridiagonal ``A`` with sub-, main and super-diagonals ``dl``, ``d``, ``du``
    (each ``[..., m]``; ``dl[..., 0]`` and ``du[..., m - 1]`` are not used) and ``b`` of shape ``[..., m, n]``.

    The Thomas algorithm (elimination without pivoting) as two ``scan``s over the ``m`` rows, so vmap, grad
    and jit follow from ``scan``'s rules.
    """
    from ftrans import lax

    if perturb_singular:
        raise NotImplementedError("tridiagonal_solve: perturb_singular=True is not implemented in ftrans")
    ops = [as_operand(v) for v in (dl, d, du, b)]
    avals = [aval_of(v) for v in ops]
    for nm, a in zip(("dl", "d", "du", "b"), avals):
        if a.dtype not in L.LINALG_DTYPES:
            raise FtransTypeError(
                f"tridiagonal_solve: {nm} must be float32, float64, complex64 or complex128, got {a.dtype}")
    if len({a.dtype for a in avals}) != 1:
        raise FtransTypeError(
            "tridiagonal_solve: all four operands must have the same dtype, got "
            f"{', '.join(str(a.dtype) for a in avals)}")
    if not avals[0].shape == avals[1].shape == avals[2].shape:
        raise FtransTypeError(
            "tridiagonal_solve: the diagonals dl, d and du must have the same shape, got "
            f"{avals[0].shape}, {avals[1].shape} and {avals[2].shape}")
    if avals[0].ndim < 1 or avals[3].shape[:-1] != avals[0].shape:
        raise FtransTypeError(
            f"tridiagonal_solve: b must have shape [..., m, n] with [..., m] the diagonals' shape "
            f"{avals[0].shape}, got {avals[3].shape}")
    dl, d, du, b = ops
    nd = avals[0].ndim
    m = avals[0].shape[-1]
    if m == 0:
        return b
    front = (nd - 1,) + tuple(range(nd - 1))  # rows first: [m, ...] and [m, ..., n]
    rows = [lax.transpose(v, front) for v in (dl, d, du)]
    rhs = lax.transpose(b, front + (nd,))
    dtype = avals[0].dtype

    def col(v: Any) -> Any:  # [...] -> [..., 1], against the right-hand sides' columns
        return lax.expand_dims(v, (v.ndim,))

    def eliminate(carry: Any, row: Any) -> Any:
        cp, dp = carry
        lo, mid, up, r = row
        denom = lax.sub(mid, lax.mul(lo, cp))
        cp = lax.div(up, denom)
        dp = lax.div(lax.sub(r, lax.mul(col(lo), dp)), col(denom))
        return (cp, dp), (cp, dp)

    zeros = (lax.full(avals[0].shape[:-1], 0, dtype), lax.full(avals[3].shape[:-2] + avals[3].shape[-1:], 0, dtype))
    _, (cps, dps) = lax.scan(eliminate, zeros, (*rows, rhs))

    def substitute(x_next: Any, row: Any) -> Any:
        cp, dp = row
        x = lax.sub(dp, lax.mul(col(cp), x_next))
        return x, x

    _, xs = lax.scan(substitute, zeros[1], (cps, dps), reverse=True)
    back = tuple(range(1, nd)) + (0, nd)
    return lax.transpose(xs, back)
