"""JVP rules of the linear-algebra primitives.

The derivations are the standard ones JAX uses (written here with ftrans's
own primitives, since transforms sit below ``ftrans.numpy``):

- ``cholesky``: ``dL = L · Φ(L⁻¹ dΣ L⁻ᴴ)`` with ``Φ`` the lower triangle with
  a halved diagonal (two triangular solves and a product).
- ``triangular_solve``: linear in ``b``; for ``a``, ``dX = -op(A)⁻¹ op(dA) X``
  (or ``-X op(dA) op(A)⁻¹`` on the right side), ordered so the cheaper
  product comes first.
- ``lu``: with ``P A = L U``, ``L⁻¹ P dA U⁻¹ = dL' + dU'`` split into its
  strictly lower and upper parts; the pivots are integers (zero tangent).
- ``qr``: ``dQ = Q (dΩ - Qᴴ dA R⁻¹) + dA R⁻¹``, ``dR = (Qᴴ dA R⁻¹ - dΩ) R``
  (for ``m >= n``, reduced or square).
- ``eigh``: ``dw = diag(Vᴴ dA V)``, ``dV = V (F ∘ Vᴴ dA V)`` with
  ``F_ij = 1/(w_j - w_i)`` off the diagonal.
- ``svd``: the formulas of Townsend's notes as JAX writes them, with the
  extra terms for non-square matrices (``full_matrices=False``).
- ``eig``: eigenvalues only (``dw = diag(V⁻¹ dA V)``); like JAX, eigenvector
  derivatives are not implemented.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import building as B
from ftrans.core.primitive import mark_unsupported
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import linalg as L
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero, add_tangents, instantiate, register_jvp

_I32 = np.dtype(np.int32)


# ---------------------------------------------------------------- matrix helpers (primitives only)


def _shape(x: Any) -> tuple:
    return tuple(aval_of(x).shape)


def _dtype(x: Any) -> np.dtype:
    return aval_of(x).dtype


def mT(x: Any) -> Any:
    nd = len(_shape(x))
    return S.transpose_p.bind(x, permutation=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def conj(x: Any) -> Any:
    return E.conj_p.bind(x) if _dtype(x).kind == "c" else x


def mH(x: Any) -> Any:
    return conj(mT(x))


def matmul(a: Any, b: Any) -> Any:
    """Batched ``a @ b`` for operands of one rank and batch shape."""
    nd = len(_shape(a))
    batch = tuple(range(nd - 2))
    return R.dot_general_p.bind(a, b, dimension_numbers=(((nd - 1,), (nd - 2,)), (batch, batch)),
                                precision=None, preferred_element_type=None)


def tri_mask(shape: tuple, lower: bool, k: int = 0) -> Any:
    nd = len(shape)
    rows = S.iota_p.bind(dtype=_I32, shape=shape, dimension=nd - 2)
    cols = S.iota_p.bind(dtype=_I32, shape=shape, dimension=nd - 1)
    if k:
        rows = B.add(rows, np.int32(k))
    return E.ge_p.bind(rows, cols) if lower else E.le_p.bind(rows, cols)


def tril(x: Any, k: int = 0) -> Any:
    return B.select(tri_mask(_shape(x), True, k), x, B.zeros(_shape(x), _dtype(x)))


def triu(x: Any, k: int = 0) -> Any:
    return B.select(tri_mask(_shape(x), False, k), x, B.zeros(_shape(x), _dtype(x)))


def eye_like(shape: tuple, dtype: np.dtype) -> Any:
    """Identity matrices (ones where row == col) of ``shape``."""
    nd = len(shape)
    rows = S.iota_p.bind(dtype=_I32, shape=shape, dimension=nd - 2)
    cols = S.iota_p.bind(dtype=_I32, shape=shape, dimension=nd - 1)
    return S.convert_element_type_p.bind(E.eq_p.bind(rows, cols), new_dtype=np.dtype(dtype), weak_type=False)


def diagonal(x: Any) -> Any:
    """The main diagonal of square matrices ``x`` (as a sum over the masked last axis)."""
    shape = _shape(x)
    return R.reduce_sum_p.bind(E.mul_p.bind(x, eye_like(shape, _dtype(x))), axes=(len(shape) - 1,))


def real(x: Any) -> Any:
    return E.real_p.bind(x) if _dtype(x).kind == "c" else x


def as_dtype(x: Any, dtype: np.dtype) -> Any:
    return B.convert_element_type(x, dtype)


def expand_last(x: Any, axis: int) -> Any:
    """Insert a unit axis at ``axis`` (-1 or -2) of ``x``."""
    shape = _shape(x)
    nd = len(shape)
    pos = nd + 1 + axis
    new = shape[:pos] + (1,) + shape[pos:]
    return S.reshape_p.bind(x, new_sizes=new, dimensions=None)


def bcast_to(x: Any, shape: tuple) -> Any:
    xs = _shape(x)
    if xs == shape:
        return x
    keep = tuple(i for i in range(len(xs)))
    squeezed = [i for i, (a, b) in enumerate(zip(xs, shape)) if a == 1 and b != 1]
    if squeezed:
        x = S.reshape_p.bind(x, new_sizes=tuple(s for i, s in enumerate(xs) if i not in squeezed), dimensions=None)
        keep = tuple(i for i in keep if i not in squeezed)
    return S.broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=keep)


def permutation_matrix(perm: Any, dtype: np.dtype) -> Any:
    """``P`` with ``P[..., i, j] = (perm[..., i] == j)``, so ``P @ x`` is ``x[..., perm, :]``."""
    shape = _shape(perm)
    m = shape[-1]
    full = shape + (m,)
    nd = len(full)
    p = S.broadcast_in_dim_p.bind(perm, shape=full, broadcast_dimensions=tuple(range(nd - 1)))
    cols = S.iota_p.bind(dtype=_I32, shape=full, dimension=nd - 1)
    return S.convert_element_type_p.bind(E.eq_p.bind(p, cols), new_dtype=np.dtype(dtype), weak_type=False)


def tsolve(a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool = False, conjugate_a: bool = False,
           unit_diagonal: bool = False) -> Any:
    return L.triangular_solve_p.bind(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                                     conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def lu_solve(lu: Any, perm: Any, b: Any) -> Any:
    """``A⁻¹ b`` from ``A``'s LU factorization (square ``A``, matrix ``b``)."""
    pb = matmul(permutation_matrix(perm, _dtype(b)), b)
    y = tsolve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
    return tsolve(lu, y, left_side=True, lower=False)


# ---------------------------------------------------------------- cholesky


@register_jvp(L.cholesky_p)
def _cholesky_jvp(primals: list, tangents: list) -> tuple:
    (x,), (t,) = primals, tangents
    lo = L.cholesky_p.bind(x)
    if type(t) is Zero:
        return lo, Zero.from_primal_value(lo)
    # cholesky reads the lower triangle only: the tangent is the Hermitian matrix of t's lower triangle, so
    # the upper triangle gets no cotangent (jax 0.11's rule; jax 0.10 used t whole)
    if _dtype(t).kind == "c":
        re, im = E.real_p.bind(t), E.imag_p.bind(t)
        t = E.complex_p.bind(B.add(tril(re), mT(tril(re, -1))), B.sub(tril(im, -1), mT(tril(im, -1))))
    else:
        t = B.add(tril(t), mT(tril(t, -1)))
    tmp = tsolve(lo, t, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    inner = tsolve(lo, tmp, left_side=True, lower=True)
    shape, dtype = _shape(lo), _dtype(lo)
    half_diag = B.sub(B.full(shape, 1, dtype), B.mul(eye_like(shape, dtype), np.asarray(0.5, dtype)))
    phi = E.mul_p.bind(tril(inner), half_diag)
    return lo, matmul(lo, phi)


# ---------------------------------------------------------------- triangular_solve


@register_jvp(L.triangular_solve_p)
def _triangular_solve_jvp(primals: list, tangents: list, **params: Any) -> tuple:
    a, b = primals
    ta, tb = tangents
    ans = L.triangular_solve_p.bind(a, b, **params)
    out: Any = Zero.from_primal_value(ans)
    if type(tb) is not Zero:
        out = add_tangents(out, L.triangular_solve_p.bind(a, tb, **params))
    if type(ta) is not Zero:
        k = 1 if params["unit_diagonal"] else 0
        g = tril(ta, -k) if params["lower"] else triu(ta, k)
        g = E.neg_p.bind(g)
        if params["transpose_a"]:
            g = mT(g)
        if params["conjugate_a"]:
            g = conj(g)
        m, n = _shape(b)[-2:]

        def a_inv(rhs: Any) -> Any:
            return L.triangular_solve_p.bind(a, rhs, **params)

        if params["left_side"]:
            d = a_inv(matmul(g, ans)) if m > n else matmul(a_inv(g), ans)
        else:
            d = a_inv(matmul(ans, g)) if m < n else matmul(ans, a_inv(g))
        out = add_tangents(out, d)
    return ans, out


# ---------------------------------------------------------------- lu


@register_jvp(L.lu_p)
def _lu_jvp(primals: list, tangents: list) -> tuple:
    (a,), (ta,) = primals, tangents
    lu, piv, perm = L.lu_p.bind(a)
    zeros = [Zero.from_primal_value(piv), Zero.from_primal_value(perm)]
    if type(ta) is Zero:
        return [lu, piv, perm], [Zero.from_primal_value(lu)] + zeros
    shape = _shape(a)
    m, n = shape[-2:]
    k = min(m, n)
    dtype = _dtype(a)
    nd = len(shape)
    batch = shape[:-2]
    x = matmul(permutation_matrix(perm, dtype), ta)
    zero = np.zeros((), dtype)
    # l: m x m unit lower; u: n x n upper (identity padding beyond k).
    lk = S.slice_p.bind(lu, start_indices=(0,) * nd, limit_indices=batch + (m, k), strides=None)
    lpad = S.pad_p.bind(tril(lk, -1), zero, padding_config=((0, 0, 0),) * (nd - 1) + ((0, m - k, 0),))
    l_full = B.add(lpad, eye_like(batch + (m, m), dtype))
    uk = S.slice_p.bind(lu, start_indices=(0,) * nd, limit_indices=batch + (k, n), strides=None)
    upad = S.pad_p.bind(triu(uk), zero, padding_config=((0, 0, 0),) * (nd - 2) + ((0, n - k, 0), (0, 0, 0)))
    if n > k:
        rows = S.iota_p.bind(dtype=_I32, shape=batch + (n, n), dimension=nd - 2)
        extra = E.mul_p.bind(eye_like(batch + (n, n), dtype),
                             S.convert_element_type_p.bind(E.ge_p.bind(rows, B.full(batch + (n, n), k, _I32)),
                                                           new_dtype=dtype, weak_type=False))
        upad = B.add(upad, extra)
    la = tsolve(l_full, x, left_side=True, lower=True, unit_diagonal=True)
    lau = tsolve(upad, la, left_side=False, lower=False)
    l_dot = matmul(l_full, tril(lau, -1))
    u_dot = matmul(triu(lau), upad)
    return [lu, piv, perm], [B.add(l_dot, u_dot)] + zeros


# ---------------------------------------------------------------- qr


def _cols(x: Any, start: int, stop: int) -> Any:
    """``x[..., :, start:stop]``."""
    shape = _shape(x)
    nd = len(shape)
    return S.slice_p.bind(x, start_indices=(0,) * (nd - 1) + (start,), limit_indices=shape[:-1] + (stop,),
                          strides=None)


def _rows(x: Any, start: int, stop: int) -> Any:
    """``x[..., start:stop, :]``."""
    shape = _shape(x)
    nd = len(shape)
    return S.slice_p.bind(x, start_indices=(0,) * (nd - 2) + (start, 0),
                          limit_indices=shape[:-2] + (stop, shape[-1]), strides=None)


def _thin_qr_jvp(q: Any, r: Any, dx: Any) -> tuple[Any, Any]:
    """``(dq, dr)`` of the QR decomposition of an ``m x n`` matrix with ``m >= n`` (q ``m x n``, r ``n x n``)."""
    dx_rinv = tsolve(r, dx, left_side=False, lower=False)
    qt_dx_rinv = matmul(mH(q), dx_rinv)
    low = tril(qt_dx_rinv, -1)
    do = B.sub(low, mH(low))
    if _dtype(q).kind == "c":
        im_part = B.sub(qt_dx_rinv, as_dtype(real(qt_dx_rinv), _dtype(q)))
        do = B.add(do, E.mul_p.bind(eye_like(_shape(do), _dtype(q)), im_part))
    dq = B.add(matmul(q, B.sub(do, qt_dx_rinv)), dx_rinv)
    dr = matmul(B.sub(qt_dx_rinv, do), r)
    return dq, dr


@register_jvp(L.qr_p)
def _qr_jvp(primals: list, tangents: list, *, full_matrices: bool, pivoting: bool = False) -> tuple:
    (a,), (ta,) = primals, tangents
    extra = {"pivoting": True} if pivoting else {}
    q, r, *p = L.qr_p.bind(a, full_matrices=full_matrices, **extra)
    if type(ta) is Zero:
        return [q, r, *p], [Zero.from_primal_value(x) for x in (q, r, *p)]
    if pivoting:  # a[..., :, p] = q r: differentiate the column-permuted matrix
        ta = matmul(instantiate(ta), mT(permutation_matrix(p[0], _dtype(a))))
    m, n = _shape(a)[-2:]
    ta = instantiate(ta)
    if m < n:  # wide: a = [a1 a2] with a1 square; q and r1 from a1, then r2 = qᴴ a2
        a2 = _cols(a, m, n)
        dq, dr1 = _thin_qr_jvp(q, _cols(r, 0, m), _cols(ta, 0, m))
        dr2 = B.add(matmul(mH(dq), a2), matmul(mH(q), _cols(ta, m, n)))
        dr = S.concatenate_p.bind(dr1, dr2, dimension=len(_shape(a)) - 1)
    elif not full_matrices or m == n:
        dq, dr = _thin_qr_jvp(q, r, ta)
    else:  # tall with the full m x m q: the extra columns follow from qᴴ q = I (JAX's rule)
        q_mn, r_nn = _cols(q, 0, n), _rows(r, 0, n)
        dq_mn, dr_nn = _thin_qr_jvp(q_mn, r_nn, ta)
        q_nn, q_pn, q_mp = _rows(q_mn, 0, n), _rows(q_mn, n, m), _cols(q, n, m)
        dq_nn, dq_pn = _rows(dq_mn, 0, n), _rows(dq_mn, n, m)
        shift = B.sub(q_nn, eye_like(_shape(q_nn), _dtype(q)))
        lu, _, perm = L.lu_p.bind(mH(shift))
        z_pn_h = lu_solve(lu, perm, mH(q_pn))  # (q_nn - I)⁻ᴴ q_pnᴴ
        z_pn = mH(z_pn_h)
        dq_mp = B.sub(matmul(dq_mn, z_pn_h),
                      matmul(B.add(q_mn, matmul(q_mp, z_pn)), mH(B.sub(dq_pn, matmul(z_pn, dq_nn)))))
        nd = len(_shape(a))
        dq = S.concatenate_p.bind(dq_mn, dq_mp, dimension=nd - 1)
        dr = S.concatenate_p.bind(dr_nn, B.zeros(_shape(r_nn)[:-2] + (m - n, n), _dtype(r)), dimension=nd - 2)
    return [q, r, *p], [dq, dr, *(Zero.from_primal_value(x) for x in p)]


# ---------------------------------------------------------------- eigh


@register_jvp(L.eigh_p)
def _eigh_jvp(primals: list, tangents: list, *, lower: bool) -> tuple:
    (a,), (ta,) = primals, tangents
    v, w_real = L.eigh_p.bind(a, lower=lower)
    if type(ta) is Zero:
        return [v, w_real], [Zero.from_primal_value(v), Zero.from_primal_value(w_real)]
    dtype = _dtype(a)
    shape = _shape(a)
    w = as_dtype(w_real, dtype)
    eye = eye_like(shape, dtype)
    diff = B.sub(bcast_to(expand_last(w, -2), shape), bcast_to(expand_last(w, -1), shape))
    fmat = B.sub(E.integer_pow_p.bind(B.add(eye, diff), y=-1), eye)
    vav = matmul(matmul(mH(v), ta), v)
    dv = matmul(v, E.mul_p.bind(fmat, vav))
    dw = real(diagonal(vav))
    return [v, w_real], [dv, dw]


# ---------------------------------------------------------------- svd


@register_jvp(L.svd_p)
def _svd_jvp(primals: list, tangents: list, *, full_matrices: bool, compute_uv: bool, algorithm=None) -> tuple:
    (a,), (da,) = primals, tangents
    shape = _shape(a)
    m, n = shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            f"svd: the derivative with full_matrices=True is implemented for square matrices only, got {m}x{n} "
            "(as in JAX; use full_matrices=False)")
    s, u, vt = L.svd_p.bind(a, full_matrices=False, compute_uv=True, **({"algorithm": algorithm} if algorithm else {}))
    primal_out = [s, u, vt] if compute_uv else [s]
    if type(da) is Zero:
        return primal_out, [Zero.from_primal_value(p) for p in primal_out]
    dtype = _dtype(a)
    ut, v = mH(u), mH(vt)
    ds_mat = matmul(matmul(ut, da), v)
    ds = real(diagonal(ds_mat))
    if not compute_uv:
        return [s], [ds]
    k = min(m, n)
    kk = shape[:-2] + (k, k)
    rd = _dtype(s)
    s_row = bcast_to(expand_last(s, -2), kk)  # s_j along columns
    s_col = mT(s_row)
    s_diffs = E.mul_p.bind(B.add(s_row, s_col), B.sub(s_row, s_col))
    eye_r = eye_like(kk, rd)
    f = B.sub(E.div_p.bind(B.full(kk, 1, rd), B.add(s_diffs, eye_r)), eye_r)
    s_row_c = as_dtype(s_row, dtype)
    dss = E.mul_p.bind(s_row_c, ds_mat)
    sds = E.mul_p.bind(mT(s_row_c), ds_mat)
    s_zeros = as_dtype(E.eq_p.bind(s, B.zeros(_shape(s), rd)), rd)
    s_inv = B.sub(E.div_p.bind(B.full(_shape(s), 1, rd), B.add(s, s_zeros)), s_zeros)
    s_inv_mat = E.mul_p.bind(bcast_to(expand_last(s_inv, -2), kk), eye_r)
    du_dv_diag = E.mul_p.bind(B.mul(B.sub(ds_mat, mH(ds_mat)), np.asarray(0.5, dtype)), as_dtype(s_inv_mat, dtype))
    fc = as_dtype(f, dtype)
    du = matmul(u, B.add(E.mul_p.bind(fc, B.add(dss, mH(dss))), du_dv_diag))
    dv = matmul(v, E.mul_p.bind(fc, B.add(sds, mH(sds))))
    if m > n:
        dav = matmul(da, v)
        corr = B.sub(dav, matmul(u, matmul(ut, dav)))
        du = B.add(du, E.div_p.bind(corr, bcast_to(expand_last(as_dtype(s, dtype), -2), _shape(corr))))
    if n > m:
        dahu = matmul(mH(da), u)
        corr = B.sub(dahu, matmul(v, matmul(vt, dahu)))
        dv = B.add(dv, E.div_p.bind(corr, bcast_to(expand_last(as_dtype(s, dtype), -2), _shape(corr))))
    return [s, u, vt], [ds, du, mH(dv)]


# ---------------------------------------------------------------- eig (eigenvalues only)


def _eig_vec_jvp(w: Any, v: Any, da: Any) -> tuple[Any, Any]:
    """``(dw, dv)`` of eigenvalues ``w`` and right eigenvectors ``v`` (columns) for the tangent ``da``
    (non-degenerate perturbation theory), with ``dv`` keeping LAPACK's normalisation: each column of unit
    2-norm and with its largest-magnitude entry real (JAX's rule)."""
    shape = _shape(v)
    nd = len(shape)
    c = _dtype(v)
    eye = eye_like(shape, c)
    w_j = bcast_to(expand_last(w, -2), shape)  # entry (i, j): w_j
    f = B.sub(E.div_p.bind(B.full(shape, 1, c), B.add(eye, B.sub(w_j, mT(w_j)))), eye)
    lu, _, perm = L.lu_p.bind(v)
    p = matmul(lu_solve(lu, perm, da), v)
    dw = diagonal(p)
    u = matmul(v, E.mul_p.bind(f, p))
    k = R.argmax_p.bind(E.abs_p.bind(v), axes=(nd - 2,), index_dtype=_I32)
    rows = S.iota_p.bind(dtype=_I32, shape=shape, dimension=nd - 2)
    at_k = S.broadcast_in_dim_p.bind(k, shape=shape, broadcast_dimensions=tuple(d for d in range(nd) if d != nd - 2))
    mask = as_dtype(E.eq_p.bind(rows, at_k), c)
    re = E.neg_p.bind(E.real_p.bind(R.reduce_sum_p.bind(E.mul_p.bind(conj(v), u), axes=(nd - 2,))))
    num = E.imag_p.bind(R.reduce_sum_p.bind(E.mul_p.bind(mask, u), axes=(nd - 2,)))
    den = E.real_p.bind(R.reduce_sum_p.bind(E.mul_p.bind(mask, v), axes=(nd - 2,)))
    cvec = E.complex_p.bind(re, E.neg_p.bind(E.div_p.bind(num, den)))
    return dw, B.add(u, E.mul_p.bind(v, bcast_to(expand_last(cvec, -2), shape)))


@register_jvp(L.eig_p)
def _eig_jvp(primals: list, tangents: list, *, compute_left_eigenvectors: bool,
             compute_right_eigenvectors: bool, enable_eigvec_derivs: bool = False) -> tuple:
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if vectors and not enable_eigvec_derivs:
        raise NotImplementedError(
            "eig: derivatives of non-symmetric eigenvectors are valid only under assumptions on the input that "
            "ftrans cannot check (distinct eigenvalues); pass enable_eigvec_derivs=True to lax.linalg.eig to opt "
            "in (as in JAX), use ftrans.numpy.linalg.eigvals, or eigh for Hermitian matrices")
    (a,), (da,) = primals, tangents
    extra = {"enable_eigvec_derivs": True} if enable_eigvec_derivs else {}
    outs = L.eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors, compute_right_eigenvectors=True,
                        **extra)
    w, vr = outs[0], outs[-1]
    primal_out = [w] + ([outs[1]] if compute_left_eigenvectors else []) + ([vr] if compute_right_eigenvectors else [])
    if type(da) is Zero:
        return primal_out, [Zero.from_primal_value(x) for x in primal_out]
    c = _dtype(vr)
    da = as_dtype(instantiate(da), c)
    if not vectors:
        lu, _, perm = L.lu_p.bind(vr)
        return [w], [diagonal(matmul(lu_solve(lu, perm, da), vr))]
    dw, dvr = _eig_vec_jvp(w, vr, da)
    tangent_out = [dw]
    if compute_left_eigenvectors:
        _, dvl = _eig_vec_jvp(conj(w), outs[1], mH(da))
        tangent_out.append(dvl)
    if compute_right_eigenvectors:
        tangent_out.append(dvr)
    return primal_out, tangent_out


# lu_pivots_to_permutation has integer outputs: its tangent is always zero.
@register_jvp(L.lu_pivots_to_permutation_p)
def _p2p_jvp(primals: list, tangents: list, **params: Any) -> tuple:
    out = L.lu_pivots_to_permutation_p.bind(*primals, **params)
    return out, Zero.from_primal_value(out)


# schur: no derivative rule (JAX defines none either).
mark_unsupported(L.schur_p, "jvp", "schur has no derivative rule (JAX defines none either)")


# ---------------------------------------------------------------- tridiagonal_solve, symmetric_product


def tridiagonal_matmul(dl: Any, d: Any, du: Any, x: Any) -> Any:
    """``A x`` for the tridiagonal ``A`` with diagonals ``dl``, ``d``, ``du`` (``dl[0]``, ``du[-1]`` unused)."""
    shape = _shape(x)
    nd = len(shape)
    zero = np.zeros((), _dtype(x))
    keep = ((0, 0, 0),) * (nd - 2)
    x_prev = S.pad_p.bind(x, zero, padding_config=keep + ((1, -1, 0), (0, 0, 0)))  # row i holds x[i - 1]
    x_next = S.pad_p.bind(x, zero, padding_config=keep + ((-1, 1, 0), (0, 0, 0)))  # row i holds x[i + 1]
    col = tuple(range(nd - 1))

    def times(v: Any, y: Any) -> Any:
        return E.mul_p.bind(S.broadcast_in_dim_p.bind(v, shape=shape, broadcast_dimensions=col), y)

    return B.add(B.add(times(d, x), times(dl, x_prev)), times(du, x_next))


@register_jvp(L.tridiagonal_solve_p)
def _tridiagonal_solve_jvp(primals: list, tangents: list, *, perturb_singular: bool) -> tuple:
    dl, d, du, b = primals
    *ddiags, db = tangents
    x = L.tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)
    if all(type(t) is Zero for t in tangents):
        return x, Zero.from_primal_value(x)
    if all(type(t) is Zero for t in ddiags):
        rhs = db
    else:
        prod = tridiagonal_matmul(*(instantiate(t) for t in ddiags), x)
        rhs = add_tangents(db, E.neg_p.bind(prod)) if type(db) is not Zero else E.neg_p.bind(prod)
    return x, L.tridiagonal_solve_p.bind(dl, d, du, instantiate(rhs), perturb_singular=perturb_singular)


@register_jvp(L.symmetric_product_p)
def _symmetric_product_jvp(primals: list, tangents: list, *, alpha: Any, beta: Any) -> tuple:
    a, c = primals
    da, dc = tangents
    out = L.symmetric_product_p.bind(a, c, alpha=alpha, beta=beta)
    dt = _dtype(out)
    parts = []
    if type(da) is not Zero:
        da = instantiate(da)
        parts.append(B.mul(B.add(matmul(da, mT(a)), matmul(a, mT(da))), np.asarray(alpha, dt)))
    if type(dc) is not Zero:
        parts.append(B.mul(instantiate(dc), np.asarray(beta, dt)))
    if not parts:
        return out, Zero.from_primal_value(out)
    return out, parts[0] if len(parts) == 1 else B.add(parts[0], parts[1])


# No derivative rules in JAX either: the reductions to condensed forms and the Householder products.
for _p, _why in ((L.tridiagonal_p, "tridiagonal"), (L.hessenberg_p, "hessenberg"),
                 (L.householder_product_p, "householder_product"), (L.ormqr_p, "ormqr"),
                 (L.cholesky_update_p, "cholesky_update")):
    mark_unsupported(_p, "jvp", f"{_why} has no derivative rule (JAX defines none either)")
