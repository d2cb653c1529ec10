"""Linear-algebra primitives: factorizations and triangular solves over the last two axes.

Every primitive here works on a stack of matrices: the last two axes are the
matrix, any leading axes are batch axes (strict: operands of a two-operand
primitive share their batch shape; ``ftrans.numpy.linalg`` broadcasts).  The
NumPy rules call LAPACK through NumPy and SciPy (vectorised over the batch
where NumPy's ``linalg`` is, a loop over the batch where only SciPy has the
routine); a stack of several matrices runs the primitive's compiled CPU
program instead (``_batched``), whose LAPACK kernel loops in C.  As in JAX,
a factorization that LAPACK reports as failed (a Cholesky of a matrix that
is not positive definite, an SVD that does not converge) gives NaNs for that
matrix instead of raising.

``lu`` returns ``(lu, pivots, permutation)`` as JAX's ``lu_p`` does:
``pivots`` are LAPACK's row swaps (zero-based), ``permutation`` the row
permutation they amount to.  ``qr`` returns ``(q, r)``; ``eigh`` returns
``(v, w)`` with ascending eigenvalues; ``svd`` returns ``[s, u, vh]`` (or
``[s]`` when ``compute_uv=False``); ``eig`` returns the eigenvalues and the
requested left/right eigenvectors, all complex.
"""

from __future__ import annotations

import enum
import functools
import math

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive, never_weak
from ftrans.core.prims._base import prim_type_error, prim_value_error, quiet
from ftrans.core.shape_poly import max_dim, min_dim

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
    return a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])


# ---------------------------------------------------------------- large stacks: the compiled program

# The runner of a primitive's one-primitive compiled program on the host CPU, ``(prim, operands, params) ->
# NumPy results`` (or NotImplemented), installed by ``ftrans.lowering.device_eager``: core cannot compile.
_stack_runner = None
# A stack of at least this many matrices runs the compiled program (the LAPACK kernel looping over the batch
# in C, as JAX's eager ops do) instead of the per-matrix LAPACK calls below: the same routines of the same
# library, so the same bits, without a Python call per matrix.  Measured (benchmarks/README.md, "linalg
# batches"): a compiled call costs 15-25 us, a per-matrix call 1.5-10 us, more where a SciPy wrapper runs
# per matrix (lu, pivoted qr, eig, schur); single matrices never take the compiled program.
STACK_THRESHOLD = 8
STACK_THRESHOLDS: dict = {}  # per primitive, filled in below the primitives


def set_stack_runner(fn) -> None:
    global _stack_runner
    _stack_runner = fn


def _batched(prim: Primitive, impl, batch_arg: int = 0, batch_rank: int = 2, check=None):
    """``impl``, except that a stack of ``STACK_THRESHOLD`` or more non-empty matrices (operand ``batch_arg``'s
    leading axes, all but its last ``batch_rank``) runs through ``_stack_runner``; ``check(params)`` first
    refuses what the NumPy rule refuses."""

    def rule(*args, **params):
        runner = _stack_runner
        if runner is not None:
            if check is not None:
                check(params)
            shape = args[batch_arg].shape
            if (len(shape) > batch_rank and _batch_size(shape[:-batch_rank]) >= STACK_THRESHOLDS.get(prim, STACK_THRESHOLD)
                    and all(a.size for a in args)):
                out = runner(prim, args, params)
                if out is not NotImplemented:
                    return out
        return impl(*args, **params)

    rule.__wrapped__ = impl
    return rule


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
    if a.size == 0:
        return a.copy()
    potrf = _lapack("potrf", a.dtype)
    if a.ndim == 2:
        return np.asarray(_cholesky_one(a, potrf), a.dtype)
    flat = _flat(a)
    out = np.empty(flat.shape, a.dtype)
    for i in range(flat.shape[0]):
        out[i] = _cholesky_one(flat[i], potrf)
    return out.reshape(a.shape)


cholesky_p = Primitive("cholesky")
cholesky_p.def_abstract_eval(_cholesky_abstract)
cholesky_p.def_impl(_batched(cholesky_p, _cholesky_impl))
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
    if b.size == 0:
        return b.copy()
    if conjugate_a and not transpose_a:
        a = np.conj(a)
    trans = 0 if not transpose_a else (2 if conjugate_a else 1)
    trsm = _blas("trsm", b.dtype)
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
triangular_solve_p.def_impl(_batched(triangular_solve_p, _triangular_solve_impl))
triangular_solve_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- lu and lu_pivots_to_permutation


def pivots_to_permutation_np(pivots: np.ndarray, size: int) -> np.ndarray:
    batch = pivots.shape[:-1]
    if not batch:  # one matrix: plain Python swaps (the common eager case)
        perm = list(range(size))
        for i, j in enumerate(pivots.tolist()):
            perm[i], perm[j] = perm[j], perm[i]
        return np.array(perm, np.int32)
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
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(batch + (min_dim(m, n),), dtypes.int32, False),
            ShapedArray(batch + (m,), dtypes.int32, False)]


@quiet
def _lu_impl(a: np.ndarray):
    # SciPy's raw LAPACK getrf (zero-based pivots), the routine the compiled CPU kernel calls.  A singular
    # matrix (info > 0) keeps its factors, as in JAX.
    m, n = a.shape[-2:]
    k = min(m, n)
    if a.size == 0:
        lu = a.copy()
        piv = np.zeros(a.shape[:-2] + (k,), np.int32)
    else:
        from scipy.linalg.lapack import get_lapack_funcs

        (getrf,) = get_lapack_funcs(("getrf",), dtype=a.dtype)
        if a.ndim == 2:
            lu, piv, _ = getrf(a)
        else:
            lu, piv = _each(lambda x: getrf(x)[:2], a, [(m, n), (k,)], [a.dtype, np.int32])
    return [lu, piv, pivots_to_permutation_np(piv, m)]


lu_p = Primitive("lu", multiple_results=True)
lu_p.def_abstract_eval(_lu_abstract)
lu_p.def_impl(_batched(lu_p, _lu_impl))
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


def _qr_abstract(a: ShapedArray, *, full_matrices: bool, pivoting: bool = False) -> list[ShapedArray]:
    _check_matrix("qr", a, square=False)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    k = m if full_matrices else min_dim(m, n)
    outs = [ShapedArray(batch + (m, k), a.dtype, False), ShapedArray(batch + (k, n), a.dtype, False)]
    if pivoting:
        outs.append(ShapedArray(batch + (n,), dtypes.int32, False))
    return outs


def _qr_pivoted_impl(a, full_matrices):
    import scipy.linalg

    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)

    def one(x):
        if x.size == 0:
            return np.eye(m, k, dtype=a.dtype), np.zeros((k, n), a.dtype), np.zeros((n,), np.int32)
        q, r, p = scipy.linalg.qr(x, mode="full" if full_matrices else "economic", pivoting=True,
                                  check_finite=False)
        return q, r, p

    return _each(one, a, [(m, k), (k, n), (n,)], [a.dtype, a.dtype, np.int32])


@quiet
def _qr_impl(a, *, full_matrices, pivoting=False):
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)
    if pivoting:
        return _qr_pivoted_impl(a, full_matrices)
    if a.size == 0:
        q = np.broadcast_to(np.eye(m, k, dtype=a.dtype), a.shape[:-2] + (m, k)).copy()
        return [q, np.zeros(a.shape[:-2] + (k, n), a.dtype)]
    # SciPy's LAPACK geqrf/orgqr (ungqr), the routines (and the library) the compiled CPU kernel calls, with
    # the optimal workspace: an eager qr returns the same factors, to the last bit, as a jitted one (NumPy's
    # own LAPACK rounds differently).  The workspace is queried once for the whole stack.
    setup = _QR_SETUP.get((a.dtype, m, n, k))
    if setup is None:
        from scipy.linalg.lapack import get_lapack_funcs

        geqrf, orgqr = get_lapack_funcs(("geqrf", "orgqr"), dtype=a.dtype)
        lw_f = _lwork(geqrf(np.zeros((m, n), a.dtype), lwork=-1)[-2])
        # orgqr's operand: the first min(m, n) reflectors, in an m x k array (k = m when full and m > n).
        lw_g = _lwork(orgqr(np.zeros((m, k), a.dtype), np.zeros(min(m, n), a.dtype), lwork=-1)[-2])
        if len(_QR_SETUP) >= 256:
            _QR_SETUP.clear()
        setup = _QR_SETUP[(a.dtype, m, n, k)] = (geqrf, orgqr, lw_f, lw_g)
    geqrf, orgqr, lw_f, lw_g = setup

    def one(x):
        qr, tau, _, info = geqrf(x, lwork=lw_f)
        if info != 0:
            return np.full((m, k), np.nan, a.dtype), np.full((k, n), np.nan, a.dtype)
        r = np.triu(qr[:k, :])
        if k == n and m > n:  # economic, tall: the reflectors fill qr
            v = qr
        elif k == m and m > n:  # full, tall: room for the whole square Q
            v = np.zeros((m, m), a.dtype, order="F")
            v[:, :n] = qr
        else:
            v = qr[:, :k]
        q, _, info = orgqr(v, tau, lwork=lw_g, overwrite_a=1)
        if info != 0:
            return np.full((m, k), np.nan, a.dtype), np.full((k, n), np.nan, a.dtype)
        return q, r

    if a.ndim == 2:
        return list(one(a))
    q, r = _each(one, a, [(m, k), (k, n)], [a.dtype, a.dtype])
    return [q, r]


# (dtype, m, n, k) -> the LAPACK routines and optimal workspaces of a qr: the queries cost as much as a
# small factorization, and their answers depend only on these.
_QR_SETUP: dict = {}


def _lwork(work: np.ndarray) -> int:
    """The optimal workspace size a LAPACK query returned, as an int.  The query returns it as a float of the
    routine's precision, which rounds sizes above 2**24 in single precision: round those up a step."""
    w = np.asarray(work).ravel()[0].real
    if w.dtype == np.float32 and w > 2**24:
        w = np.nextafter(w, np.float32(np.inf))
    return max(1, int(np.ceil(w)))


qr_p = Primitive("qr", multiple_results=True)
qr_p.def_abstract_eval(_qr_abstract)
qr_p.def_impl(_batched(qr_p, _qr_impl))
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
    # SciPy's LAPACK syevd/heevd, the routine (and the library) the compiled CPU kernel calls, so an
    # eager eigh returns the same eigenvectors (phases included) as a jitted one.
    n = a.shape[-1]
    rdt = real_dtype(a.dtype)
    if a.size == 0:
        return [a.copy(), np.zeros(a.shape[:-1], rdt)]
    evd = _lapack("heevd" if a.dtype.kind == "c" else "syevd", a.dtype)

    def one(m):
        w, v, info = evd(m, compute_v=1, lower=int(bool(lower)))
        if info != 0:
            return np.full((n, n), np.nan, a.dtype), np.full((n,), np.nan, rdt)
        return v, w

    if a.ndim == 2:
        return list(one(a))
    v, w = _each(one, a, [(n, n), (n,)], [a.dtype, rdt])
    return [v, w]


eigh_p = Primitive("eigh", multiple_results=True)
eigh_p.def_abstract_eval(_eigh_abstract)
eigh_p.def_impl(_batched(eigh_p, _eigh_impl))
eigh_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- svd


def _svd_abstract(a: ShapedArray, *, full_matrices: bool, compute_uv: bool, algorithm=None) -> list[ShapedArray]:
    _check_matrix("svd", a, square=False)
    m, n = a.shape[-2:]
    k = min_dim(m, n)
    batch = a.shape[:-2]
    s = ShapedArray(batch + (k,), real_dtype(a.dtype), False)
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(batch + (m, ku), a.dtype, False), ShapedArray(batch + (kv, n), a.dtype, False)]


def check_svd_algorithm(algorithm) -> None:
    """Refuse the SVD algorithms that have no CPU implementation (JAX's behaviour on the CPU)."""
    if algorithm in (SvdAlgorithm.JACOBI, SvdAlgorithm.POLAR):
        raise NotImplementedError(
            f"svd: algorithm={algorithm} is not implemented on the CPU (as in JAX); use SvdAlgorithm.DEFAULT, "
            "QR or DIVIDE_AND_CONQUER")


def _svd_qr_one(x, full_matrices, compute_uv):
    import scipy.linalg

    return scipy.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv, check_finite=False,
                            lapack_driver="gesvd")


@quiet
def _svd_impl(a, *, full_matrices, compute_uv, algorithm=None):
    check_svd_algorithm(algorithm)
    if algorithm == SvdAlgorithm.QR and a.size:
        m, n = a.shape[-2:]
        k = min(m, n)
        rd = real_dtype(a.dtype)
        ku, kv = (m, n) if full_matrices else (k, k)
        if not compute_uv:
            (s,) = _nan_failed(lambda x: (np.stack([_svd_qr_one(y, False, False) for y in _flat(x)]).reshape(
                x.shape[:-2] + (k,)),), a, [((k,), rd)])
            return [s.astype(rd, copy=False)]

        def one(x):
            u, s, vh = _svd_qr_one(x, full_matrices, True)
            return s, u, vh

        try:
            s, u, vh = _each(one, a, [(k,), (m, ku), (kv, n)], [rd, a.dtype, a.dtype])
        except (np.linalg.LinAlgError, ValueError):
            s, u, vh = _svd_impl(a, full_matrices=full_matrices, compute_uv=True)
        return [s, u, vh]
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
    # SciPy's LAPACK gesdd, the routine (and the library) the compiled CPU kernel calls, with the optimal
    # workspace: an eager svd returns the same singular vectors as a jitted one (NumPy's LAPACK picks other
    # signs and null-space bases).
    ku, kv = (m, n) if full_matrices else (k, k)
    gesdd = _lapack("gesdd", a.dtype)
    uv = int(bool(compute_uv))
    lw = _query_lwork("gesdd_lwork", a.dtype, m, n, compute_uv=uv, full_matrices=int(bool(full_matrices)))

    def one(x):
        u, s, vh, info = gesdd(x, compute_uv=uv, lwork=lw, full_matrices=int(bool(full_matrices)))
        if info != 0:
            s = np.full((k,), np.nan, rd)
            if uv:
                u, vh = np.full((m, ku), np.nan, a.dtype), np.full((kv, n), np.nan, a.dtype)
        return (s, u, vh) if uv else (s,)

    if a.ndim == 2:
        return list(one(a))
    if not compute_uv:
        (s,) = _each(one, a, [(k,)], [rd])
        return [s]
    s, u, vh = _each(one, a, [(k,), (m, ku), (kv, n)], [rd, a.dtype, a.dtype])
    return [s, u, vh]


svd_p = Primitive("svd", multiple_results=True)
svd_p.def_abstract_eval(_svd_abstract)
svd_p.def_impl(_batched(svd_p, _svd_impl, check=lambda params: check_svd_algorithm(params.get("algorithm"))))
svd_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- eig (general, CPU)


def _eig_abstract(a: ShapedArray, *, compute_left_eigenvectors: bool,
                  compute_right_eigenvectors: bool, enable_eigvec_derivs: bool = False) -> list[ShapedArray]:
    _check_matrix("eig", a, square=True)
    c = _COMPLEX[a.dtype]
    outs = [ShapedArray(a.shape[:-1], c, False)]
    if compute_left_eigenvectors:
        outs.append(ShapedArray(a.shape, c, False))
    if compute_right_eigenvectors:
        outs.append(ShapedArray(a.shape, c, False))
    return outs


def _unpack_pairs(wi: np.ndarray, v: np.ndarray, c) -> np.ndarray:
    """A real geev's eigenvectors as complex columns: a conjugate pair (``wi[j]`` neither 0 nor NaN) stores
    ``re, im`` in columns ``j, j + 1`` (LAPACK's packing, which the compiled kernel unpacks the same way)."""
    out = np.zeros(v.shape, c)
    out.real = v
    n = wi.shape[0]
    j = 0
    while j < n:
        if wi[j] == 0 or np.isnan(wi[j]) or j + 1 == n:
            j += 1
            continue
        im = v[:, j + 1]
        out.real[:, j + 1] = v[:, j]
        out.imag[:, j] = im
        out.imag[:, j + 1] = -im
        j += 2
    return out


@quiet
def _eig_impl(a, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs=False):
    c = _COMPLEX[a.dtype]
    n = a.shape[-1]
    left, right = bool(compute_left_eigenvectors), bool(compute_right_eigenvectors)
    if a.size == 0:
        outs = [np.zeros(a.shape[:-1], c)]
        outs += [np.zeros(a.shape, c)] * (int(left) + int(right))
        return outs
    # SciPy's LAPACK geev, the routine (and the library) the compiled CPU kernel calls, with the same
    # options and the optimal workspace: an eager eig gives the compiled program's bits.
    geev = _lapack("geev", a.dtype)
    lw = _query_lwork("geev_lwork", a.dtype, n, compute_vl=int(left), compute_vr=int(right))
    cplx = a.dtype.kind == "c"
    nan_v = np.full((n, n), np.nan, c)

    def one(m):
        if not np.isfinite(m).all():  # as the compiled kernel: NaNs, LAPACK not called
            return np.full((n,), np.nan, c), nan_v, nan_v
        if cplx:
            w, vl, vr, info = geev(m, compute_vl=int(left), compute_vr=int(right), lwork=lw)
        else:
            wr, wi, vl, vr, info = geev(m, compute_vl=int(left), compute_vr=int(right), lwork=lw)
            if info == 0:
                w = np.empty((n,), c)
                w.real, w.imag = wr, wi
                vl = _unpack_pairs(wi, vl, c) if left else vl
                vr = _unpack_pairs(wi, vr, c) if right else vr
        if info != 0:
            return np.full((n,), np.nan, c), nan_v, nan_v
        return w, (vl if left else nan_v), (vr if right else nan_v)

    if a.ndim == 2:
        w, vl, vr = one(a)
    else:
        w, vl, vr = _each(one, a, [(n,), (n, n), (n, n)], [c, c, c])
    outs = [w]
    if left:
        outs.append(vl)
    if right:
        outs.append(vr)
    return outs


eig_p = Primitive("eig", multiple_results=True)
eig_p.def_abstract_eval(_eig_abstract)
eig_p.def_impl(_batched(eig_p, _eig_impl))
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
schur_p.def_impl(_batched(schur_p, _schur_impl))
schur_p.def_weak_type(never_weak)


# Where the per-matrix rule runs a SciPy wrapper (lu_factor, eig, schur) or two LAPACK calls (qr), the
# compiled program is the faster from a few matrices on.
STACK_THRESHOLDS.update({lu_p: 4, qr_p: 4, eig_p: 4, schur_p: 4})


# ---------------------------------------------------------------- algorithm choices (JAX's enums)


class EigImplementation(enum.Enum):
    """Which library computes ``eig`` (JAX's enum): LAPACK on the host, or on a GPU cuSOLVER or MAGMA."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """Which algorithm computes ``eigh`` (JAX's enum); ftrans runs ``QR`` (LAPACK's syevd/heevd, cuSOLVER's
    syevd) and refuses the others, as JAX does on the CPU."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """Which algorithm computes ``svd`` (JAX's enum): on the CPU ``DEFAULT`` and ``DIVIDE_AND_CONQUER`` run
    LAPACK's gesdd, ``QR`` its gesvd; ``JACOBI`` and ``POLAR`` are refused there, as in JAX."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


@functools.lru_cache(maxsize=512)
def _lapack(name: str, dtype: np.dtype):
    """SciPy's wrapper of LAPACK routine ``name`` for ``dtype`` (``orgqr`` is ``ungqr`` for complex, ...)."""
    from scipy.linalg.lapack import get_lapack_funcs

    return get_lapack_funcs((name,), dtype=dtype)[0]


@functools.lru_cache(maxsize=64)
def _blas(name: str, dtype: np.dtype):
    from scipy.linalg.blas import get_blas_funcs

    return get_blas_funcs((name,), dtype=dtype)[0]


@functools.lru_cache(maxsize=256)
def _query_lwork(name: str, dtype: np.dtype, *args, **kwargs) -> int:
    """The optimal workspace that ``name``'s workspace query (``gesdd_lwork``, ...) answers, remembered:
    the query costs as much as a small factorization, and its answer depends only on these arguments."""
    return _lwork(_lapack(name, dtype)(*args, **kwargs)[0])


def _batch_size(shape: tuple) -> int:
    return math.prod(shape)


# ---------------------------------------------------------------- tridiagonal (sytrd / hetrd)


def _tridiagonal_abstract(a: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrix("tridiagonal", a, square=True)
    n = a.shape[-1]
    if n == 0:
        raise prim_type_error("tridiagonal", (a,), "expects non-empty square matrices, got 0x0")
    batch = a.shape[:-2]
    r = real_dtype(a.dtype)
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(batch + (n,), r, False),
            ShapedArray(batch + (n - 1,), r, False), ShapedArray(batch + (n - 1,), a.dtype, False)]


@quiet
def _tridiagonal_impl(a, *, lower):
    n = a.shape[-1]
    r = real_dtype(a.dtype)
    fn = _lapack("hetrd" if a.dtype.kind == "c" else "sytrd", a.dtype)

    def one(m):
        c, d, e, tau, info = fn(m, lower=int(lower))
        if info != 0:
            return (np.full(m.shape, np.nan, m.dtype), np.full((n,), np.nan, r), np.full((n - 1,), np.nan, r),
                    np.full((n - 1,), np.nan, m.dtype))
        return c, d, e, tau

    return _each(one, a, [(n, n), (n,), (n - 1,), (n - 1,)], [a.dtype, r, r, a.dtype])


tridiagonal_p = Primitive("tridiagonal", multiple_results=True)
tridiagonal_p.def_abstract_eval(_tridiagonal_abstract)
tridiagonal_p.def_impl(_batched(tridiagonal_p, _tridiagonal_impl))
tridiagonal_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- tridiagonal_solve (gtsv, or perturbed)


def _tridiagonal_solve_abstract(dl: ShapedArray, d: ShapedArray, du: ShapedArray, b: ShapedArray, *,
                                perturb_singular: bool) -> ShapedArray:
    avals = (dl, d, du, b)
    for a in avals:
        if a.dtype not in LINALG_DTYPES:
            raise prim_type_error("tridiagonal_solve", avals,
                                  f"expects float32, float64, complex64 or complex128 operands, got {a.dtype}")
    if len({a.dtype for a in avals}) != 1:
        raise prim_type_error("tridiagonal_solve", avals, "all four operands must have the same dtype")
    if not dl.shape == d.shape == du.shape:
        raise prim_type_error("tridiagonal_solve", avals,
                              "the diagonals dl, d and du must have the same shape [..., m]")
    if d.ndim < 1 or b.ndim != d.ndim + 1 or b.shape[:-1] != d.shape:
        raise prim_type_error("tridiagonal_solve", avals,
                              "b must have shape [..., m, n] with [..., m] the diagonals' shape")
    return ShapedArray(b.shape, b.dtype, False)


def _perturbed_pivot(p, rhs, perturb):
    """The pivot ``p`` nudged (and ``rhs`` scaled) so ``rhs / p`` cannot overflow (LAPACK xLAGTS's rule)."""
    r = np.finfo(rhs.dtype).dtype
    one = r.type(1)
    safemin = np.finfo(r).tiny
    small = one / np.finfo(r).max
    if small >= safemin:
        safemin = small * (one + np.finfo(r).eps)
    bignum = one / safemin
    if abs(p) >= one:
        return p, rhs
    perturb = np.copysign(max(abs(perturb), safemin), np.real(p))
    big = np.max(np.abs(rhs)) if rhs.size else r.type(0)
    while abs(p) < one:
        if abs(p) < safemin:
            if abs(p) == 0 or big * safemin > abs(p):
                p, perturb = p + perturb, perturb * 2
            else:
                return p * bignum, rhs * bignum
        elif big > abs(p) * bignum:
            p, perturb = p + perturb, perturb * 2
        else:
            break
    return p, rhs


def _solve_perturbed_one(dl, d, du, b):
    """Gaussian elimination with row pivoting over one tridiagonal system, tiny pivots perturbed by
    ``eps * max|U|`` (the scheme of LAPACK's xLAGTF/xLAGTS, as JAX's CPU and GPU kernels run it)."""
    n = d.shape[0]
    dt = b.dtype
    eps = np.finfo(dt).eps
    x = np.array(b, copy=True)
    if n == 1:
        p, row = _perturbed_pivot(d[0], x[0], eps * abs(d[0]))
        return (row / p)[None].astype(dt)
    u = np.zeros((n, 3), dt)
    u[0, 0], u[0, 1] = d[0], du[0]
    max_u = max(abs(u[0, 0]), abs(u[0, 1]))
    scale1 = abs(u[0, 0]) + abs(u[0, 1])
    for k in range(n - 1):
        u[k + 1, 0] = d[k + 1]
        scale2 = abs(dl[k + 1]) + abs(u[k + 1, 0]) + (abs(du[k + 1]) if k < n - 2 else 0)
        if dl[k + 1] == 0:
            scale1 = scale2
            u[k + 1, 1] = du[k + 1]
            u[k, 2] = 0
        else:
            piv1 = 0 if u[k, 0] == 0 else abs(u[k, 0]) / scale1
            piv2 = abs(dl[k + 1]) / scale2
            if piv2 <= piv1:
                scale1 = scale2
                f = dl[k + 1] / u[k, 0]
                u[k + 1, 0] -= f * u[k, 1]
                u[k + 1, 1] = du[k + 1]
                u[k, 2] = 0
                x[k + 1] = x[k + 1] - f * x[k]
            else:
                f = u[k, 0] / dl[k + 1]
                ut = u[k, 1]
                u[k, 0] = dl[k + 1]
                u[k + 1, 0] = ut - f * d[k + 1]
                u[k, 1] = d[k + 1]
                if k < n - 2:
                    u[k, 2] = du[k + 1]
                    u[k + 1, 1] = -f * du[k + 1]
                xk = x[k].copy()
                x[k] = x[k + 1]
                x[k + 1] = xk - f * x[k + 1]
                scale1 = abs(u[k + 1, 0]) + abs(u[k + 1, 1])
        if k < n - 2:
            max_u = max(max_u, *np.abs(u[k]))
    max_u = max(max_u, abs(u[n - 1, 0]))
    perturb = eps * max_u
    for k in range(n - 1, -1, -1):
        row = x[k].copy()
        if k + 1 < n:
            row = row - u[k, 1] * x[k + 1]
        if k + 2 < n:
            row = row - u[k, 2] * x[k + 2]
        p, row = _perturbed_pivot(u[k, 0], row, perturb)
        x[k] = row * (dt.type(1) / p)
    return x


def _gtsv_one(dl, d, du, b):
    n = d.shape[0]
    if n == 1:
        return (b / d[0]).astype(b.dtype)
    *_, x, info = _lapack("gtsv", b.dtype)(dl[1:], d, du[:-1], b)
    if info != 0:  # a zero pivot: as JAX, NaNs for that system
        return np.full(b.shape, np.nan, b.dtype)
    return x


@quiet
def _tridiagonal_solve_impl(dl, d, du, b, *, perturb_singular):
    m = d.shape[-1]
    if b.size == 0 or m == 0:
        return np.zeros(b.shape, b.dtype)
    one = _solve_perturbed_one if perturb_singular else _gtsv_one
    batch = b.shape[:-2]
    nb = _batch_size(batch)
    fl = [v.reshape((nb, m)) for v in (dl, d, du)]
    fb = b.reshape((nb,) + b.shape[-2:])
    out = np.empty(fb.shape, b.dtype)
    for i in range(nb):
        out[i] = one(fl[0][i], fl[1][i], fl[2][i], fb[i])
    return out.reshape(b.shape)


tridiagonal_solve_p = Primitive("tridiagonal_solve")
tridiagonal_solve_p.def_abstract_eval(_tridiagonal_solve_abstract)
tridiagonal_solve_p.def_impl(_batched(tridiagonal_solve_p, _tridiagonal_solve_impl, batch_arg=3))
tridiagonal_solve_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- hessenberg (gehrd)


def _hessenberg_abstract(a: ShapedArray) -> list[ShapedArray]:
    _check_matrix("hessenberg", a, square=True)
    n = a.shape[-1]
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(a.shape[:-2] + (max_dim(n - 1, 0),), a.dtype, False)]


@quiet
def _hessenberg_impl(a):
    n = a.shape[-1]
    k = max(n - 1, 0)
    if a.size == 0:
        return [a.copy(), np.zeros(a.shape[:-2] + (k,), a.dtype)]
    fn = _lapack("gehrd", a.dtype)

    def one(m):
        h, tau, info = fn(m, lo=0, hi=n - 1)
        if info != 0:
            return np.full(m.shape, np.nan, m.dtype), np.full((k,), np.nan, m.dtype)
        return h, tau[:k]

    return _each(one, a, [(n, n), (k,)], [a.dtype, a.dtype])


hessenberg_p = Primitive("hessenberg", multiple_results=True)
hessenberg_p.def_abstract_eval(_hessenberg_abstract)
hessenberg_p.def_impl(_batched(hessenberg_p, _hessenberg_impl))
hessenberg_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- householder_product (orgqr / ungqr)


def _householder_product_abstract(a: ShapedArray, taus: ShapedArray) -> ShapedArray:
    _check_matrix("householder_product", a, square=False, others=(taus,))
    m, n = a.shape[-2:]
    if taus.dtype != a.dtype:
        raise prim_type_error("householder_product", (a, taus), "a and taus must have the same dtype")
    if m < n:
        raise prim_type_error("householder_product", (a, taus),
                              f"a must have at least as many rows as columns, got {m}x{n}")
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > min(m, n):
        raise prim_type_error("householder_product", (a, taus),
                              "taus must have shape [..., k] with a's batch shape and k <= min(m, n)")
    return ShapedArray(a.shape, a.dtype, False)


@quiet
def _householder_product_impl(a, taus):
    if a.size == 0:
        return np.broadcast_to(np.eye(*a.shape[-2:], dtype=a.dtype), a.shape).copy()
    fn = _lapack("ungqr" if a.dtype.kind == "c" else "orgqr", a.dtype)
    k = taus.shape[-1]
    ft = taus.reshape((_batch_size(a.shape[:-2]), k))
    fa = _flat(a)
    out = np.empty(fa.shape, a.dtype)
    for i in range(fa.shape[0]):
        q, _, info = fn(fa[i], ft[i])
        out[i] = q if info == 0 else np.nan
    return out.reshape(a.shape)


householder_product_p = Primitive("householder_product")
householder_product_p.def_abstract_eval(_householder_product_abstract)
householder_product_p.def_impl(_batched(householder_product_p, _householder_product_impl))
householder_product_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- ormqr (ormqr / unmqr)


def _ormqr_abstract(a: ShapedArray, taus: ShapedArray, c: ShapedArray, *, left: bool,
                    transpose: bool) -> ShapedArray:
    avals = (a, taus, c)
    _check_matrix("ormqr", a, square=False, others=(taus, c))
    if not taus.dtype == c.dtype == a.dtype:
        raise prim_type_error("ormqr", avals, "a, taus and c must have the same dtype")
    m, n = a.shape[-2:]
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > min(m, n):
        raise prim_type_error("ormqr", avals, "taus must have shape [..., k] with a's batch shape and k <= min(m, n)")
    if c.ndim != a.ndim or c.shape[:-2] != a.shape[:-2]:
        raise prim_type_error("ormqr", avals, "c must be a stack of matrices with a's batch shape")
    if (c.shape[-2] if left else c.shape[-1]) != m:
        side = "rows" if left else "columns"
        raise prim_type_error("ormqr", avals, f"with left={left}, c must have {m} {side} (the rows of a)")
    return ShapedArray(c.shape, c.dtype, False)


@quiet
def _ormqr_impl(a, taus, c, *, left, transpose):
    if c.size == 0 or taus.shape[-1] == 0:
        return c.copy()
    cplx = a.dtype.kind == "c"
    fn = _lapack("unmqr" if cplx else "ormqr", a.dtype)
    trans = ("C" if cplx else "T") if transpose else "N"
    k = taus.shape[-1]
    fa, fc = _flat(a), _flat(c)
    ft = taus.reshape((fa.shape[0], k))
    out = np.empty(fc.shape, c.dtype)
    for i in range(fa.shape[0]):
        # LAPACK reads the first k reflectors (columns) of a, which must be m x k.
        lwork = 64 * max(1, *fc[i].shape)
        cq, _, info = fn("L" if left else "R", trans, np.asfortranarray(fa[i][:, :k]), ft[i], fc[i], lwork)
        out[i] = cq if info == 0 else np.nan
    return out.reshape(c.shape)


ormqr_p = Primitive("ormqr")
ormqr_p.def_abstract_eval(_ormqr_abstract)
ormqr_p.def_impl(_batched(ormqr_p, _ormqr_impl))
ormqr_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- cholesky_update (Givens rotations)


def _cholesky_update_abstract(r: ShapedArray, w: ShapedArray) -> ShapedArray:
    avals = (r, w)
    _check_matrix("cholesky_update", r, square=True, others=(w,))
    if r.dtype.kind == "c" or w.dtype != r.dtype:
        raise prim_type_error("cholesky_update", avals, "expects real float r and w of one dtype")
    if w.ndim != r.ndim - 1 or w.shape != r.shape[:-1]:
        raise prim_type_error("cholesky_update", avals,
                              "takes a square matrix r [..., n, n] and a vector w [..., n] of the same size")
    return ShapedArray(r.shape, r.dtype, False)


def givens(x, y):
    """``(c, s)`` rotating ``(x, y)`` onto ``(·, 0)``, computed without overflow (BLAS drotg's scaling)."""
    ax, ay = np.abs(x), np.abs(y)
    den = np.where(ay == 0, 1, np.maximum(ax, ay))
    xs, ys = x / den, y / den
    rh = 1 / np.sqrt(xs * xs + ys * ys)
    return np.where(ay == 0, 1, xs * rh), np.where(ay == 0, 0, -ys * rh)


@quiet
def _cholesky_update_impl(r, w):
    r = np.array(r, copy=True)
    z = np.array(w, copy=True)
    n = r.shape[-1]
    for k in range(n):
        c, s = givens(r[..., k, k], z[..., k])
        c, s = c[..., None].astype(r.dtype), s[..., None].astype(r.dtype)
        row = r[..., k, :]
        r[..., k, :], z = c * row - s * z, c * z + s * row
    return r


cholesky_update_p = Primitive("cholesky_update")
cholesky_update_p.def_abstract_eval(_cholesky_update_abstract)
cholesky_update_p.def_impl(_cholesky_update_impl)
cholesky_update_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- symmetric_product (syrk)


def _symmetric_product_abstract(a: ShapedArray, c: ShapedArray, *, alpha, beta) -> ShapedArray:
    avals = (a, c)
    _check_matrix("symmetric_product", a, square=False, others=(c,))
    if c.dtype != a.dtype:
        raise prim_type_error("symmetric_product", avals, "a and c must have the same dtype")
    if c.ndim != a.ndim or c.shape[:-2] != a.shape[:-2] or c.shape[-1] != c.shape[-2] or c.shape[-1] != a.shape[-2]:
        raise prim_type_error("symmetric_product", avals,
                              "expects a of shape [..., m, n] and a square c of shape [..., m, m]")
    return ShapedArray(c.shape, c.dtype, False)


def _symmetric_product_impl(a, c, *, alpha, beta):
    at = np.swapaxes(a, -1, -2)
    out = np.asarray(alpha, a.dtype) * np.matmul(a, at) + np.asarray(beta, a.dtype) * c
    return out.astype(c.dtype, copy=False)


symmetric_product_p = Primitive("symmetric_product")
symmetric_product_p.def_abstract_eval(_symmetric_product_abstract)
symmetric_product_p.def_impl(_symmetric_product_impl)
symmetric_product_p.def_weak_type(never_weak)


__all__ = [n for n in dir() if n.endswith("_p")]


# Sharding in types (core/sharding_rules.py): batched operands keep their batch layout, as JAX's
from ftrans.core import sharding_rules as _sr  # noqa: E402

for _p, _ranks in ((cholesky_p, (2,)), (lu_p, (2,)), (lu_pivots_to_permutation_p, (1,)), (qr_p, (2,)),
                   (eigh_p, (2,)), (svd_p, (2,)), (eig_p, (2,)), (schur_p, (2,)), (tridiagonal_p, (2,)),
                   (tridiagonal_solve_p, (1, 1, 1, 2)), (hessenberg_p, (2,)), (householder_product_p, (2, 1)),
                   (cholesky_update_p, (2, 1)), (symmetric_product_p, (2, 2)), (ormqr_p, (2, 1, 2))):
    _p.sharding_rule = _sr.linalg(_p.name, _ranks)
triangular_solve_p.sharding_rule = _sr.triangular_solve
