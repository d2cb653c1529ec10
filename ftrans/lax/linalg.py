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
from ftrans.core.prims.linalg import (  # noqa: F401  (JAX's names for the primitives and enums)
    EighImplementation,
    EigImplementation,
    SvdAlgorithm,
    cholesky_p,
    cholesky_update_p,
    eig_p,
    eigh_p,
    hessenberg_p,
    householder_product_p,
    lu_p,
    lu_pivots_to_permutation_p,
    ormqr_p,
    qr_p,
    schur_p,
    svd_p,
    symmetric_product_p,
    triangular_solve_p,
    tridiagonal_p,
    tridiagonal_solve_p,
)
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError
from ftrans.transforms.ad_rules import linalg as M

__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "cholesky_p", "cholesky_update",
           "cholesky_update_p", "eig", "eig_p", "eigh", "eigh_p", "geqrf", "hessenberg", "hessenberg_p", "householder_product",
           "householder_product_p", "lu", "lu_p", "lu_pivots_to_permutation", "lu_pivots_to_permutation_p", "ormqr",
           "ormqr_p", "qdwh", "qr", "qr_p", "schur", "schur_p", "svd", "svd_p", "symmetric_product",
           "symmetric_product_p", "triangular_solve", "triangular_solve_p", "tridiagonal", "tridiagonal_p",
           "tridiagonal_solve", "tridiagonal_solve_p"]


def _default_float() -> np.dtype:
    return dtypes.canonicalize(np.dtype(np.float64))


def _matrix(name: str, x: Any, *, square: bool) -> Any:
    """``x`` as an operand of a linear-algebra primitive, or a specific error naming the user's line."""
    x = as_operand(x)
    aval = aval_of(x)
    if name in ("cholesky", "eigh") and (aval.ndim < 2 or aval.shape[-1] != aval.shape[-2]):  # (jax 0.12's words)
        raise FtransShapeError(f"The input to linalg.{name} must have shape [..., n, n], got shape {aval.shape}")
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
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for triangular ``a``; batch shapes must agree.
    A ``b`` of one rank less than ``a`` is one vector per matrix (a column on the left side, a row on the
    right), as in JAX."""
    from ftrans import lax

    a = _matrix("triangular_solve", a, square=True)
    b = as_operand(b)
    singleton = aval_of(b).ndim == aval_of(a).ndim - 1
    if singleton:
        b = lax.expand_dims(b, (aval_of(b).ndim if left_side else aval_of(b).ndim - 1,))
    out = _triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                            conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    if singleton:
        nd = aval_of(out).ndim
        out = lax.squeeze(out, (nd - 1 if left_side else nd - 2,))
    return out


def _triangular_solve(a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool, conjugate_a: bool,
                      unit_diagonal: bool) -> Any:
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
            f"lu_pivots_to_permutation: Output permutation size {permutation_size} has to exceed the trailing "
            f"dimension of the pivots. Got pivots size {aval.shape[-1]}")
    return L.lu_pivots_to_permutation_p.bind(p, permutation_size=int(permutation_size))


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True, use_magma: Any = None) -> tuple:
    """``(q, r)`` with ``x = q r``; ``q`` is ``m x m`` with ``full_matrices`` else ``m x min(m, n)``.

    With ``pivoting``, ``(q, r, p)``: the column-pivoted QR ``x[..., :, p] = q r`` (LAPACK's geqp3), the
    diagonal of ``r`` non-increasing in magnitude and ``p`` the zero-based int32 column permutation.
    """
    x = _matrix("qr", x, square=False)
    extra = {"pivoting": True} if pivoting else {}
    return tuple(L.qr_p.bind(x, full_matrices=bool(full_matrices), **extra))


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: Any = None, implementation: Any = None) -> tuple[Any, Any]:
    """``(v, w)``: eigenvectors (columns) and ascending eigenvalues of a Hermitian ``x``.

    ``implementation`` is ``None`` or ``EighImplementation.QR`` (LAPACK's syevd/heevd, cuSOLVER's
    syevd); ``JACOBI`` and ``QDWH`` raise ``NotImplementedError``, as JAX does on the CPU.
    """
    if implementation is not None and EighImplementation(implementation) != EighImplementation.QR:
        raise NotImplementedError(
            f"eigh: implementation={EighImplementation(implementation)} is not implemented in ftrans (as in JAX on "
            "the CPU); use EighImplementation.QR")
    if subset_by_index is not None:
        raise NotImplementedError("eigh: subset_by_index is not implemented in ftrans")
    x = _matrix("eigh", x, square=True)
    if symmetrize_input:
        x = symmetrize(x)
    return tuple(L.eigh_p.bind(x, lower=bool(lower)))


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index: Any = None,
        algorithm: Any = None) -> Any:
    """``(u, s, vh)`` with ``x = u diag(s) vh`` (descending ``s``), or ``s`` alone without ``compute_uv``.

    ``algorithm`` (a ``SvdAlgorithm``): ``QR`` runs LAPACK's gesvd, ``None``/``DEFAULT``/``DIVIDE_AND_CONQUER``
    its gesdd; ``JACOBI`` and ``POLAR`` raise ``NotImplementedError`` (as JAX on the CPU).
    """
    if subset_by_index is not None and tuple(subset_by_index) != (0, min(aval_of(as_operand(x)).shape[-2:])):
        raise NotImplementedError("svd: subset_by_index is not implemented in ftrans")
    extra = {}
    if algorithm is not None:
        algorithm = SvdAlgorithm(algorithm)
        L.check_svd_algorithm(algorithm)
        if algorithm == SvdAlgorithm.QR:  # LAPACK's gesvd; the default and DIVIDE_AND_CONQUER are gesdd
            extra["algorithm"] = algorithm
    x = _matrix("svd", x, square=False)
    outs = L.svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv), **extra)
    if not compute_uv:
        return outs[0]
    s, u, vh = outs
    return u, s, vh


def eig(x: Any, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: Any = None, use_magma: Any = None) -> list[Any]:
    """``[w, vl, vr]`` (those requested): eigenvalues and eigenvectors of a general square matrix (CPU).

    ``implementation`` (an ``EigImplementation``) is checked and otherwise only matters on a GPU, where
    ftrans picks cuSOLVER or the host kernel itself.  Eigenvector derivatives need
    ``enable_eigvec_derivs=True`` (they assume distinct eigenvalues, as in JAX).
    """
    if implementation is not None:
        EigImplementation(implementation)
    x = _matrix("eig", x, square=True)
    extra = {"enable_eigvec_derivs": True} if enable_eigvec_derivs else {}
    return list(L.eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                             compute_right_eigenvectors=bool(compute_right_eigenvectors), **extra))


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

    Gaussian elimination with partial (row) pivoting: LAPACK's gtsv on the CPU, cuSPARSE's gtsv2 on a GPU; a
    singular system gives NaNs (or infinities).  With ``perturb_singular``, tiny pivots are perturbed by
    about ``eps * max|U|`` so a (numerically) singular system still has a finite, large solution, as used
    by inverse iteration (JAX's kernel, after LAPACK's xLAGTF/xLAGTS).
    """
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
    return L.tridiagonal_solve_p.bind(*ops, perturb_singular=bool(perturb_singular))


def tridiagonal(a: Any, *, lower: bool = True) -> tuple[Any, Any, Any, Any]:
    """Reduce a Hermitian ``a`` (``[..., n, n]``) to tridiagonal form (LAPACK's sytrd/hetrd; on a GPU cuSOLVER's).

    Returns ``(a, d, e, taus)``: the diagonal and first sub- (``lower``) or super-diagonal of ``a`` hold the
    tridiagonal matrix and the rest of that triangle the Householder reflectors; ``d`` (``[..., n]``) and
    ``e`` (``[..., n - 1]``) are its real diagonal and off-diagonal, ``taus`` the reflectors' scalar factors.
    Only the triangle ``lower`` names is read.  No derivative rule (as in JAX).
    """
    a = _matrix("tridiagonal", a, square=True)
    if aval_of(a).shape[-1] == 0:
        raise FtransShapeError(f"tridiagonal: expects a non-empty square matrix, got shape {aval_of(a).shape}")
    return tuple(L.tridiagonal_p.bind(a, lower=bool(lower)))


def hessenberg(a: Any) -> tuple[Any, Any]:
    """Reduce a square ``a`` to upper Hessenberg form (LAPACK's gehrd; CPU only, as in JAX).

    Returns ``(a, taus)``: the upper triangle and first subdiagonal of ``a`` hold the Hessenberg matrix, the
    entries below the Householder reflectors, and ``taus`` (``[..., n - 1]``) their scalar factors.
    """
    a = _matrix("hessenberg", a, square=True)
    return tuple(L.hessenberg_p.bind(a))


def _same_dtype(name: str, *xs: Any) -> list[Any]:
    dts = {aval_of(x).dtype for x in xs}
    if len(dts) != 1:
        raise FtransTypeError(f"{name}: the operands must have the same dtype, got {', '.join(map(str, dts))}")
    return list(xs)


def geqrf(a: Any) -> tuple[Any, Any]:
    """The QR factorization of ``a`` (``[..., m, n]``) as Householder reflectors (LAPACK's geqrf): ``(a_out, taus)``
    with ``R`` on and above the diagonal of ``a_out``, the reflectors' vectors (unit first entry implied) below it,
    and their scalar factors ``taus`` (``[..., min(m, n)]``), as ``householder_product`` and ``ormqr`` take them.
    JAX's private ``geqrf`` in its lax linalg module.

    Computed with LAPACK's dlarfg/zlarfg reflector rule, column by column in a ``fori_loop`` of ordinary
    operations (no primitive of its own), so it batches and lowers as they do; its values agree with
    LAPACK's to rounding (no rescaling of very small columns)."""
    from ftrans import lax

    a = _matrix("geqrf", a, square=False)
    aval = aval_of(a)
    shape, dt = tuple(aval.shape), aval.dtype
    nd, (m, n) = len(shape), shape[-2:]
    k = min(m, n)
    cplx = dt.kind == "c"
    rdt = np.dtype(np.float32 if dt == np.complex64 else np.float64) if cplx else dt
    i32 = np.dtype(np.int32)
    rows = lax.broadcasted_iota(i32, shape, nd - 2)
    cols = lax.broadcasted_iota(i32, shape, nd - 1)
    kidx = lax.broadcasted_iota(i32, shape[:-2] + (k,), nd - 2)
    cols_row = lax.broadcasted_iota(i32, shape[:-2] + (1, n), nd - 1)

    def full(x: Any) -> Any:
        return M.bcast_to(x, shape)

    def zeros(like_shape: tuple, d: np.dtype) -> Any:
        return lax.full(like_shape, 0, d)

    def msum(x: Any, axis: int) -> Any:  # keepdims
        return lax.expand_dims(lax.reduce_sum(x, (axis,)), (axis,))

    def step(j: Any, carry: Any) -> Any:
        x, taus = carry
        row_is_j, row_below = lax.eq(rows, j), lax.gt(rows, j)
        col = msum(lax.select(lax.eq(cols, j), x, zeros(shape, dt)), nd - 1)  # [..., m, 1]
        colf = full(col)
        alpha = msum(lax.select(row_is_j, colf, zeros(shape, dt)), nd - 2)  # [..., 1, n] (all columns alike)
        below = lax.select(row_below, colf, zeros(shape, dt))
        sq = M.real(lax.mul(below, M.conj(below)))
        xnorm = lax.sqrt(msum(sq, nd - 2))  # [..., 1, n]
        ar = M.real(alpha)
        ai = lax.imag(alpha) if cplx else zeros(ar.shape, rdt)
        r = lax.sqrt(lax.add(lax.add(lax.mul(ar, ar), lax.mul(ai, ai)), lax.mul(xnorm, xnorm)))
        beta = lax.select(lax.lt(ar, zeros(ar.shape, rdt)), r, lax.neg(r))
        trivial = lax.bitwise_and(lax.eq(xnorm, zeros(ar.shape, rdt)), lax.eq(ai, zeros(ar.shape, rdt)))
        safe_beta = lax.select(trivial, lax.full(ar.shape, 1, rdt), beta)
        safe_beta_c = M.as_dtype(safe_beta, dt)
        zero_c, one_c = zeros(ar.shape, dt), lax.full(ar.shape, 1, dt)
        tau = lax.select(trivial, zero_c, lax.div(lax.sub(safe_beta_c, alpha), safe_beta_c))
        scale = lax.select(trivial, zero_c,
                           lax.div(one_c, lax.select(trivial, one_c, lax.sub(alpha, safe_beta_c))))
        v = lax.add(lax.mul(below, full(scale)), M.as_dtype(row_is_j, dt))  # v[j] = 1
        w = msum(lax.mul(M.conj(v), x), nd - 2)  # vᴴ x, [..., 1, n]
        upd = lax.sub(x, lax.mul(lax.mul(full(M.conj(tau)), v), full(w)))
        x = lax.select(lax.gt(cols, j), upd, x)  # Hᴴ applied to the columns right of j
        top = lax.select(trivial, alpha, M.as_dtype(beta, dt))
        newcol = lax.select(row_is_j, full(top), lax.select(row_below, v, colf))
        x = lax.select(lax.eq(cols, j), newcol, x)
        tau_j = lax.reduce_sum(lax.select(lax.eq(cols_row, j), tau, zero_c), (nd - 2, nd - 1))  # [...]
        tau_k = M.bcast_to(lax.expand_dims(tau_j, (nd - 2,)), shape[:-2] + (k,))
        taus = lax.select(lax.eq(kidx, j), tau_k, taus)
        return x, taus

    return lax.fori_loop(0, k, step, (a, zeros(shape[:-2] + (k,), dt)))


def householder_product(a: Any, taus: Any) -> Any:
    """The product ``H_1 ... H_k`` of the Householder reflectors in the lower triangle of ``a`` (``[..., m, n]``,
    ``m >= n``) with scalar factors ``taus`` (``[..., k]``, ``k <= n``): the first ``n`` columns of ``Q``
    (LAPACK's orgqr/ungqr)."""
    a = _matrix("householder_product", a, square=False)
    taus = as_operand(taus)
    a, taus = _same_dtype("householder_product", a, taus)
    aa, ta = aval_of(a), aval_of(taus)
    m, n = aa.shape[-2:]
    if m < n:
        raise FtransShapeError(
            f"householder_product: a must have at least as many rows as columns, got shape {aa.shape}")
    if ta.ndim != aa.ndim - 1 or ta.shape[:-1] != aa.shape[:-2] or ta.shape[-1] > min(m, n):
        raise FtransShapeError(
            f"householder_product: taus must have shape [..., k] with a's batch shape {aa.shape[:-2]} and "
            f"k <= min(m, n) = {min(m, n)}, got {ta.shape}")
    return L.householder_product_p.bind(a, taus)


def ormqr(a: Any, taus: Any, c: Any, *, left: bool = True, transpose: bool = False) -> Any:
    """``Q c`` (``left``) or ``c Q`` with ``Q`` given by Householder reflectors (``a``, ``taus``, as from geqrf)
    without forming ``Q``; ``transpose`` uses ``Qᵀ`` (``Qᴴ`` for complex).  LAPACK's ormqr/unmqr."""
    a = _matrix("ormqr", a, square=False)
    c = _matrix("ormqr", c, square=False)
    a, taus, c = _same_dtype("ormqr", a, as_operand(taus), c)
    aa, ta, ca = aval_of(a), aval_of(taus), aval_of(c)
    m = aa.shape[-2]
    if ta.ndim != aa.ndim - 1 or ta.shape[:-1] != aa.shape[:-2] or ta.shape[-1] > min(aa.shape[-2:]):
        raise FtransShapeError(f"ormqr: taus must have shape [..., k] with a's batch shape and k <= min(m, n), "
                               f"got a {aa.shape} and taus {ta.shape}")
    if ca.shape[:-2] != aa.shape[:-2]:
        raise FtransShapeError(f"ormqr: a and c must have the same batch shape, got {aa.shape} and {ca.shape}")
    if (ca.shape[-2] if left else ca.shape[-1]) != m:
        raise FtransShapeError(
            f"ormqr: with left={left}, c must have as many {'rows' if left else 'columns'} as a has rows ({m}), "
            f"got a {aa.shape} and c {ca.shape}")
    return L.ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


def cholesky_update(r_matrix: Any, w_vector: Any) -> Any:
    """The upper Cholesky factor of ``Rᵀ R + w wᵀ`` from the upper factor ``R`` (``[n, n]``) and ``w`` (``[n]``),
    in ``O(n²)`` by Givens rotations.  Real matrices only, as in JAX; no derivative rule."""
    r = _matrix("cholesky_update", r_matrix, square=True)
    w = as_operand(w_vector)
    ra, wa = aval_of(r), aval_of(w)
    if ra.dtype.kind == "c":
        raise FtransTypeError(f"cholesky_update: expects real float matrices, got {ra.dtype}")
    if wa.shape != ra.shape[:-1]:
        raise FtransShapeError(
            "cholesky_update: takes a square matrix and a vector of the same size, got shapes "
            f"{ra.shape} and {wa.shape}")
    if wa.dtype != ra.dtype:
        from ftrans.lax import convert_element_type

        w = convert_element_type(w, ra.dtype)
    return L.cholesky_update_p.bind(r, w)


def symmetric_product(a_matrix: Any, c_matrix: Any, *, alpha: float = 1., beta: float = 0.,
                      symmetrize_output: bool = False) -> Any:
    """``alpha a aᵀ + beta c`` for ``a`` ``[..., m, n]`` and a symmetric ``c`` ``[..., m, m]``.  Only the lower
    triangle is guaranteed (as in JAX); ``symmetrize_output`` mirrors it onto the upper one."""
    from ftrans import lax

    a = _matrix("symmetric_product", a_matrix, square=False)
    c = _matrix("symmetric_product", c_matrix, square=True)
    a, c = _same_dtype("symmetric_product", a, c)
    aa, ca = aval_of(a), aval_of(c)
    if ca.shape[:-2] != aa.shape[:-2] or ca.shape[-1] != aa.shape[-2]:
        raise FtransShapeError(
            f"symmetric_product: expects a of shape [..., m, n] and c of shape [..., m, m], got {aa.shape} and "
            f"{ca.shape}")
    out = L.symmetric_product_p.bind(a, c, alpha=float(alpha), beta=float(beta))
    if symmetrize_output:
        lower = M.tril(out)
        out = lax.add(lower, M.mT(M.tril(out, -1)))
    return out


def qdwh(x: Any, *, is_hermitian: bool = False, max_iterations: int | None = None, eps: float | None = None,
         dynamic_shape: Any = None) -> tuple[Any, Any, Any, Any]:
    """The polar decomposition ``x = u h`` of a full-rank ``x`` (``M x N``, ``M >= N``) by the QR-based
    dynamically weighted Halley iteration (Nakatsukasa, Bai and Gygi, 2010).

    Returns ``(u, h, num_iters, is_converged)``: ``u`` with orthonormal columns, ``h`` Hermitian positive
    semi-definite, the number of iterations run and whether ``|u_k - u_(k-1)|_F`` fell below
    ``(5 eps)^(1/3)`` within ``max_iterations`` (default 10).  The first iterations (large weights) use QR,
    the later ones a Cholesky factorization, then a Newton-Schulz refinement, as JAX's.
    ``is_hermitian`` is accepted and unused (as in JAX).

    ``dynamic_shape=(m, n)`` (ints or traced integer scalars, ``m <= M``, ``n <= N``): ``x`` is an ``m x n``
    matrix padded up to ``M x N``; the padding is ignored (whatever it holds) and comes back as zeros in ``u``
    and ``h``, as in JAX.
    """
    from ftrans import lax

    x = _matrix("qdwh", x, square=False)
    xa = aval_of(x)
    if xa.ndim != 2:
        raise FtransShapeError(f"qdwh: expects one matrix (shape [M, N]), got shape {xa.shape}")
    big_m, n = xa.shape
    if big_m < n:
        raise FtransShapeError(f"qdwh: the input matrix of shape M x N must have M >= N, got {xa.shape}")
    dt = xa.dtype
    if dynamic_shape is not None:
        if len(dynamic_shape) != 2:
            raise FtransShapeError(f"qdwh: dynamic_shape must be an (m, n) pair, got {dynamic_shape!r}")
        dm, dn = (lax.convert_element_type(v, np.int32) for v in dynamic_shape)

        def mask(v: Any, dims: Any, alternative: Any) -> Any:
            """``v`` inside its leading ``dims`` block, ``alternative`` outside (JAX's ``_mask``)."""
            keep = None
            for axis, d in enumerate(dims):
                inside = lax.lt(lax.broadcasted_iota(np.int32, v.shape, axis), d)
                keep = inside if keep is None else lax.bitwise_and(keep, inside)
            return lax.select(keep, v, alternative)

        x = mask(x, (dm, dn), lax.full(xa.shape, 0, dt))
    else:
        dm = dn = mask = None
    max_iterations = 10 if max_iterations is None else int(max_iterations)
    rd = L.real_dtype(dt)
    eps = float(np.finfo(rd).eps) if eps is None else float(eps)

    def c(v: Any) -> Any:
        return np.asarray(v, dt)

    ax = lax.abs(x)
    one_norm = lax.reduce_max(lax.reduce_sum(ax, (0,)), (0,))
    inf_norm = lax.reduce_max(lax.reduce_sum(ax, (1,)), (0,))
    alpha_inv = lax.mul(lax.rsqrt(one_norm), lax.rsqrt(inf_norm))
    alpha_inv = lax.select(lax.eq(one_norm, np.asarray(0, rd)), np.asarray(1, rd), alpha_inv)
    u = lax.mul(x, lax.convert_element_type(alpha_inv, dt))
    tol_l = 10.0 * eps / 2.0
    tol_norm = np.asarray(np.cbrt(tol_l), rd)
    eye = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                          lax.broadcasted_iota(np.int32, (n, n), 1)), dt)

    def mm(p: Any, q: Any) -> Any:
        return lax.dot_general(p, q, (((1,), (0,)), ((), ())), precision=lax.Precision.HIGHEST)

    zeros = lax.full((big_m, n), 0, dt)

    def qr_step(u: Any, a_minus_e_by_sqrt_c: float, sqrt_c: float, e: float) -> Any:
        if mask is None:
            y = lax.concatenate([lax.mul(c(sqrt_c), u), eye], 0)
        else:  # the identity right under the m true rows
            y = lax.dynamic_update_slice(lax.concatenate([lax.mul(c(sqrt_c), u), lax.mul(eye, c(0))], 0), eye,
                                         (dm, np.int32(0)))
        q, _ = qr(y, full_matrices=False)
        q1 = lax.slice(q, (0, 0), (big_m, n))
        if mask is None:
            q2 = M.mH(lax.slice(q, (big_m, 0), (big_m + n, n)))
        else:
            q1 = mask(q1, (dm, dn), zeros)
            q2 = M.mH(mask(lax.dynamic_slice(q, (dm, np.int32(0)), (n, n)), (dn, dn), lax.mul(eye, c(0))))
        return lax.add(lax.mul(c(e), u), lax.mul(c(a_minus_e_by_sqrt_c), mm(q1, q2)))

    def chol_step(u: Any, a_minus_e: Any, cc: Any, e: Any) -> Any:
        z = lax.add(lax.mul(cc, mm(M.mH(u), u)), eye)
        if mask is not None:  # the identity in the padded corner keeps z positive definite
            z = mask(z, (dn, dn), eye)
        y = cholesky(z, symmetrize_input=False)
        w = triangular_solve(y, M.mH(u), left_side=True, lower=True)
        w = triangular_solve(y, w, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
        return lax.add(lax.mul(e, u), lax.mul(a_minus_e, M.mH(w)))

    def fro(v: Any) -> Any:
        av = lax.abs(v)
        return lax.sqrt(lax.reduce_sum(lax.mul(av, av), (0, 1)))

    # The weights depend only on eps: computed here in Python, as JAX does.
    ell, k = eps, 0
    qr_coefs, chol_coefs = [], []
    while ell + tol_l < 1 and k < max_iterations:
        k += 1
        l2 = ell * ell
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1.0 + dd) ** 0.5
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** 0.5
        b = (a - 1) ** 2 / 4
        cw = a + b - 1
        ell = ell * (a + b * l2) / (1 + cw * l2)
        e = b / cw
        if cw > 100:
            qr_coefs.append(((a - e) / cw ** 0.5, cw ** 0.5, e))
        else:
            chol_coefs.append((a - e, cw, e))
    for coef in qr_coefs:
        u = qr_step(u, *coef)
    not_converged = np.asarray(True)
    if chol_coefs:
        table = np.asarray(chol_coefs, dt)

        def body(i: Any, state: Any) -> Any:
            u, _ = state
            row = lax.dynamic_index_in_dim(table, i, keepdims=False)
            new = chol_step(u, *(lax.index_in_dim(row, j, keepdims=False) for j in range(3)))
            return new, lax.gt(fro(lax.sub(new, u)), tol_norm)

        u, not_converged = lax.fori_loop(0, len(chol_coefs), body, (u, not_converged))

    def cond(state: Any) -> Any:
        i, _, nc = state
        return lax.bitwise_and(nc, lax.lt(i, max_iterations))

    def halley(state: Any) -> Any:
        i, u, _ = state
        new = chol_step(u, c(3 - 1 / 3), c(3.0), c(1 / 3))
        return lax.add(i, 1), new, lax.gt(fro(lax.sub(new, u)), tol_norm)

    num_iters, u, not_converged = lax.while_loop(
        cond, halley, (len(qr_coefs) + len(chol_coefs), u, not_converged))
    u = lax.sub(lax.mul(c(1.5), u), lax.mul(c(0.5), mm(u, mm(M.mH(u), u))))
    h = mm(M.mH(u), x)
    h = lax.div(lax.add(h, M.mH(h)), c(2))
    return u, h, num_iters, lax.bitwise_not(not_converged)
