"""Linear-algebra primitives: factorizations and triangular solves over the last two axes.

Every primitive here works on a stack of matrices: the last two axes are the
matrix, any leading axes are batch axes (strict: operands of a two-operand
primitive share their batch shape; ``ftrans.numpy.linalg`` broadcasts).  The
NumPy rules call LAPACK through NumPy and SciPy (vectorised over the batch
where NumPy's ``linalg`` is, a loop over the batch where only SciPy has the
routine).  As in JAX, a factorization that LAPACK reports as failed (a
Cholesky of a matrix that is not positive definite, an SVD that does not
converge) gives NaNs for that matrix instead of raising.

``lu`` returns ``(lu, pivots, permutation)`` as JAX's ``lu_p`` does:
``pivots`` are LAPACK's row swaps (zero-based), ``permutation`` the row
permutation they amount to.  ``qr`` returns ``(q, r)``; ``eigh`` returns
``(v, w)`` with ascending eigenvalues; ``svd`` returns ``[s, u, vh]`` (or
``[s]`` when ``compute_uv=False``); ``eig`` returns the eigenvalues and the
requested left/right eigenvectors, all complex.
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive, never_weak
from ftrans.core.prims._base import prim_type_error, prim_value_error, quiet

LINALG_DTYPES = frozenset({dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128})

_REAL = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_COMPLEX = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128,
            dtypes.complex64: dtypes.complex64, dtypes.complex128: dtypes.complex128}


def real_dtype(d: np.dtype) -> np.dtype:
    return _REAL.get(d, d)


def _check_matrix(name: str, a: ShapedArray, *, square: bool, others: tuple = ()) -> None:
    avals = (a, *others)
    if a.ndim < 2:
        raise prim_type_error(name, avals, f"expects a matrix or a stack of matrices (rank >= 2), got rank {a.ndim}")
    if a.dtype not in LINALG_DTYPES:
        raise prim_type_error(
            name, avals, f"expects float32, float64, complex64 or complex128 operands, got {a.dtype} "
            "(ftrans.numpy.linalg converts integer inputs for you)",
        )
    if square and a.shape[-1] != a.shape[-2]:
        raise prim_type_error(
            name, avals, f"expects square matrices in the last two axes, got {a.shape[-2]}x{a.shape[-1]}",
        )


def _flat(a: np.ndarray) -> np.ndarray:
    """The stack of matrices as one leading axis (its length spelled out: ``-1`` is ambiguous for 0x0 matrices)."""
    return a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)),) + a.shape[-2:])


def _each(fn, a: np.ndarray, out_shapes, out_dtypes):
    """Apply ``fn`` (one matrix -> tuple of arrays) to each matrix of the stack ``a``."""
    batch = a.shape[:-2]
    flat = _flat(a)
    outs = [np.empty((flat.shape[0],) + s, d) for s, d in zip(out_shapes, out_dtypes)]
    for i in range(flat.shape[0]):
        for o, r in zip(outs, fn(flat[i])):
            o[i] = r
    return [o.reshape(batch + s) for o, s in zip(outs, out_shapes)]


# ---------------------------------------------------------------- cholesky


def _cholesky_abstract(a: ShapedArray) -> ShapedArray:
    _check_matrix("cholesky", a, square=True)
    return ShapedArray(a.shape, a.dtype, False)


def _cholesky_one(m: np.ndarray, potrf) -> np.ndarray:
    c, info = potrf(m, lower=1, clean=1, overwrite_a=0)
    if info != 0:  # not positive definite: as JAX, NaN on and below the diagonal, zeros above
        return np.tril(np.full(m.shape, np.nan, m.dtype))
    return c


@quiet
def _cholesky_impl(a: np.ndarray) -> np.ndarray:
    # SciPy's LAPACK potrf, one matrix at a time: on this project's machines NumPy's batched
    # np.linalg.cholesky ran an order of magnitude slower for a single 256x256 matrix.
    from scipy.linalg.lapack import get_lapack_funcs

    if a.size == 0:
        return a.copy()
    (potrf,) = get_lapack_funcs(("potrf",), (a,))
    if a.ndim == 2:
        return np.asarray(_cholesky_one(a, potrf), a.dtype)
    flat = _flat(a)
    out = np.empty(flat.shape, a.dtype)
    for i in range(flat.shape[0]):
        out[i] = _cholesky_one(flat[i], potrf)
    return out.reshape(a.shape)


cholesky_p = Primitive("cholesky")
cholesky_p.def_abstract_eval(_cholesky_abstract)
cholesky_p.def_impl(_cholesky_impl)
cholesky_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- triangular_solve


def _triangular_solve_abstract(a: ShapedArray, b: ShapedArray, *, left_side: bool, lower: bool,
                               transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> ShapedArray:
    _check_matrix("triangular_solve", a, square=True, others=(b,))
    if b.ndim != a.ndim:
        raise prim_type_error("triangular_solve", (a, b), "a and b must have the same rank (the same batch axes)")
    if b.dtype != a.dtype:
        raise prim_type_error("triangular_solve", (a, b), "a and b must have the same dtype")
    if a.shape[:-2] != b.shape[:-2]:
        raise prim_type_error(
            "triangular_solve", (a, b),
            f"batch dimensions differ: {a.shape[:-2]} and {b.shape[:-2]} (ftrans.scipy.linalg broadcasts them)",
        )
    n = a.shape[-1]
    k = b.shape[-2] if left_side else b.shape[-1]
    if k != n:
        side = "rows" if left_side else "columns"
        raise prim_type_error(
            "triangular_solve", (a, b),
            f"with left_side={left_side}, b must have {n} {side} to match the {n}x{n} matrix a, got {k}",
        )
    return ShapedArray(b.shape, b.dtype, False)


def _solve_tri_one(a: np.ndarray, b: np.ndarray, left_side: bool, lower: bool, transpose_a: bool,
                   conjugate_a: bool, unit_diagonal: bool) -> np.ndarray:
    """BLAS ``trsm``: like XLA, a zero on the diagonal gives infinities or NaNs rather than an error."""
    from scipy.linalg.blas import get_blas_funcs

    if b.size == 0:
        return b.copy()
    if conjugate_a and not transpose_a:
        a = np.conj(a)
    trans = 0 if not transpose_a else (2 if conjugate_a else 1)
    (trsm,) = get_blas_funcs(("trsm",), (a, b))
    return trsm(1.0, a, b, side=0 if left_side else 1, lower=int(lower), trans_a=trans,
                diag=int(unit_diagonal))


@quiet
def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    batch = a.shape[:-2]
    if not batch:
        out = _solve_tri_one(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal)
        return np.asarray(out, dtype=b.dtype)
    fa, fb = _flat(a), _flat(b)
    out = np.empty(fb.shape, b.dtype)
    for i in range(fa.shape[0]):
        out[i] = _solve_tri_one(fa[i], fb[i], left_side, lower, transpose_a, conjugate_a, unit_diagonal)
    return out.reshape(b.shape)


triangular_solve_p = Primitive("triangular_solve")
triangular_solve_p.def_abstract_eval(_triangular_solve_abstract)
triangular_solve_p.def_impl(_triangular_solve_impl)
triangular_solve_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- lu and lu_pivots_to_permutation


def pivots_to_permutation_np(pivots: np.ndarray, size: int) -> np.ndarray:
    batch = pivots.shape[:-1]
    flat = pivots.reshape(int(np.prod(batch, dtype=np.int64)), pivots.shape[-1])  # not -1: 0 pivots
    perm = np.broadcast_to(np.arange(size, dtype=np.int32), (flat.shape[0], size)).copy()
    rows = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        j = flat[:, i]
        pi, pj = perm[rows, i].copy(), perm[rows, j].copy()
        perm[rows, i], perm[rows, j] = pj, pi
    return perm.reshape(batch + (size,))


def _lu_abstract(a: ShapedArray) -> list[ShapedArray]:
    _check_matrix("lu", a, square=False)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(batch + (min(m, n),), dtypes.int32, False),
            ShapedArray(batch + (m,), dtypes.int32, False)]


def _lu_one(m: np.ndarray):
    from scipy.linalg import lu_factor

    if m.size == 0:
        return m, np.zeros(min(m.shape), np.int32)
    lu, piv = lu_factor(m, check_finite=False)
    return lu, piv


@quiet
def _lu_impl(a: np.ndarray):
    m, n = a.shape[-2:]
    k = min(m, n)
    lu, piv = _each(_lu_one, a, [(m, n), (k,)], [a.dtype, np.int32])
    return [lu, piv, pivots_to_permutation_np(piv, m)]


lu_p = Primitive("lu", multiple_results=True)
lu_p.def_abstract_eval(_lu_abstract)
lu_p.def_impl(_lu_impl)
lu_p.def_weak_type(never_weak)


def _p2p_abstract(pivots: ShapedArray, *, permutation_size: int) -> ShapedArray:
    if pivots.ndim < 1 or pivots.dtype != dtypes.int32:
        raise prim_type_error("lu_pivots_to_permutation", (pivots,), "expects int32 pivots of rank >= 1")
    if not isinstance(permutation_size, (int, np.integer)) or permutation_size < pivots.shape[-1]:
        raise prim_value_error(
            "lu_pivots_to_permutation",
            f"permutation_size={permutation_size} must be an int at least the number of pivots ({pivots.shape[-1]})",
        )
    return ShapedArray(pivots.shape[:-1] + (int(permutation_size),), dtypes.int32, False)


def _p2p_impl(pivots, *, permutation_size):
    return pivots_to_permutation_np(pivots, permutation_size)


lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")
lu_pivots_to_permutation_p.def_abstract_eval(_p2p_abstract)
lu_pivots_to_permutation_p.def_impl(_p2p_impl)
lu_pivots_to_permutation_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- qr


def _qr_abstract(a: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    _check_matrix("qr", a, square=False)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    k = m if full_matrices else min(m, n)
    return [ShapedArray(batch + (m, k), a.dtype, False), ShapedArray(batch + (k, n), a.dtype, False)]


@quiet
def _qr_impl(a, *, full_matrices):
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)
    if a.size == 0:
        q = np.broadcast_to(np.eye(m, k, dtype=a.dtype), a.shape[:-2] + (m, k)).copy()
        return [q, np.zeros(a.shape[:-2] + (k, n), a.dtype)]
    q, r = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return [q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)]


qr_p = Primitive("qr", multiple_results=True)
qr_p.def_abstract_eval(_qr_abstract)
qr_p.def_impl(_qr_impl)
qr_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- eigh


def _eigh_abstract(a: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrix("eigh", a, square=True)
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(a.shape[:-1], real_dtype(a.dtype), False)]


def _nan_failed(fn, a, outs_like):
    """``fn(a)``; if LAPACK fails on the stack, per matrix with NaNs for the failures."""
    try:
        return fn(a)
    except np.linalg.LinAlgError:
        pass
    flat = _flat(a)
    res = []
    for m in flat:
        try:
            res.append(fn(m))
        except np.linalg.LinAlgError:
            res.append(tuple(np.full(s, np.nan, d) for s, d in outs_like))
    return tuple(np.stack([r[i] for r in res]).reshape(a.shape[:-2] + res[0][i].shape) for i in range(len(res[0])))


@quiet
def _eigh_impl(a, *, lower):
    n = a.shape[-1]
    if a.size == 0:
        return [a.copy(), np.zeros(a.shape[:-1], real_dtype(a.dtype))]
    w, v = _nan_failed(lambda x: np.linalg.eigh(x, UPLO="L" if lower else "U"), a,
                       [((n,), real_dtype(a.dtype)), ((n, n), a.dtype)])
    return [v.astype(a.dtype, copy=False), w.astype(real_dtype(a.dtype), copy=False)]


eigh_p = Primitive("eigh", multiple_results=True)
eigh_p.def_abstract_eval(_eigh_abstract)
eigh_p.def_impl(_eigh_impl)
eigh_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- svd


def _svd_abstract(a: ShapedArray, *, full_matrices: bool, compute_uv: bool) -> list[ShapedArray]:
    _check_matrix("svd", a, square=False)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    s = ShapedArray(batch + (k,), real_dtype(a.dtype), False)
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(batch + (m, ku), a.dtype, False), ShapedArray(batch + (kv, n), a.dtype, False)]


@quiet
def _svd_impl(a, *, full_matrices, compute_uv):
    m, n = a.shape[-2:]
    k = min(m, n)
    rd = real_dtype(a.dtype)
    batch = a.shape[:-2]
    if a.size == 0:
        ku, kv = (m, n) if full_matrices else (k, k)
        s = np.zeros(batch + (k,), rd)
        if not compute_uv:
            return [s]
        return [s, np.broadcast_to(np.eye(m, ku, dtype=a.dtype), batch + (m, ku)).copy(),
                np.broadcast_to(np.eye(kv, n, dtype=a.dtype), batch + (kv, n)).copy()]
    if not compute_uv:
        (s,) = _nan_failed(lambda x: (np.linalg.svd(x, compute_uv=False),), a, [((k,), rd)])
        return [s.astype(rd, copy=False)]
    ku, kv = (m, n) if full_matrices else (k, k)
    u, s, vh = _nan_failed(lambda x: tuple(np.linalg.svd(x, full_matrices=full_matrices)), a,
                           [((m, ku), a.dtype), ((k,), rd), ((kv, n), a.dtype)])
    return [s.astype(rd, copy=False), u.astype(a.dtype, copy=False), vh.astype(a.dtype, copy=False)]


svd_p = Primitive("svd", multiple_results=True)
svd_p.def_abstract_eval(_svd_abstract)
svd_p.def_impl(_svd_impl)
svd_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- eig (general, CPU)


def _eig_abstract(a: ShapedArray, *, compute_left_eigenvectors: bool,
                  compute_right_eigenvectors: bool) -> list[ShapedArray]:
    _check_matrix("eig", a, square=True)
    c = _COMPLEX[a.dtype]
    outs = [ShapedArray(a.shape[:-1], c, False)]
    if compute_left_eigenvectors:
        outs.append(ShapedArray(a.shape, c, False))
    if compute_right_eigenvectors:
        outs.append(ShapedArray(a.shape, c, False))
    return outs


def _normalize_columns(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-2, keepdims=True)


@quiet
def _eig_impl(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    c = _COMPLEX[a.dtype]
    n = a.shape[-1]
    if a.size == 0:
        outs = [np.zeros(a.shape[:-1], c)]
        outs += [np.zeros(a.shape, c)] * (int(compute_left_eigenvectors) + int(compute_right_eigenvectors))
        return outs
    import scipy.linalg

    def one(m):
        w, vl, vr = scipy.linalg.eig(m, left=True, right=True, check_finite=False)
        return w, vl, vr

    w, vl, vr = _each(one, a, [(n,), (n, n), (n, n)], [c, c, c])
    outs = [w.astype(c)]
    if compute_left_eigenvectors:
        outs.append(_normalize_columns(vl).astype(c))
    if compute_right_eigenvectors:
        outs.append(_normalize_columns(vr).astype(c))
    return outs


eig_p = Primitive("eig", multiple_results=True)
eig_p.def_abstract_eval(_eig_abstract)
eig_p.def_impl(_eig_impl)
eig_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- schur (CPU)


def _schur_abstract(a: ShapedArray) -> list[ShapedArray]:
    _check_matrix("schur", a, square=True)
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(a.shape, a.dtype, False)]


@quiet
def _schur_impl(a):
    if a.size == 0:
        return [np.zeros(a.shape, a.dtype), np.zeros(a.shape, a.dtype)]
    import scipy.linalg

    out = "complex" if a.dtype.kind == "c" else "real"

    def one(m):
        try:
            return scipy.linalg.schur(m, output=out, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            nan = np.full(m.shape, np.nan, m.dtype)
            return nan, nan

    t, z = _each(one, a, [a.shape[-2:], a.shape[-2:]], [a.dtype, a.dtype])
    return [t, z]


schur_p = Primitive("schur", multiple_results=True)
schur_p.def_abstract_eval(_schur_abstract)
schur_p.def_impl(_schur_impl)
schur_p.def_weak_type(never_weak)


__all__ = [n for n in dir() if n.endswith("_p")]
