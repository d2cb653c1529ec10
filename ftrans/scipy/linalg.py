"""``ftrans.scipy.linalg``: JAX's ``scipy.linalg`` subset.

Written with ``ftrans.lax.linalg`` and ``ftrans.numpy``: the factorizations
bind the linear-algebra primitives; ``solve_triangular``, ``cho_solve`` and
``lu_solve`` are triangular solves whose batch axes broadcast; ``expm`` is
the scaling-and-squaring Padé method (Higham 2005) with the top-order
approximant for the dtype (13 for float64, 7 for float32) and the squarings
as selects, so it is one fixed program under ``jit`` and differentiable.
``overwrite_*`` and ``check_finite`` are accepted and ignored, as in JAX.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans import numpy as jnp
from ftrans.core.operands import as_operand
from ftrans.errors import FtransShapeError, FtransValueError
from ftrans.lax import linalg as lax_linalg
from ftrans.numpy import linalg as jnp_linalg
from ftrans.scipy._special_matrices import (
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    hankel,
    helmert,
    hilbert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
    toeplitz,
)

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "inv", "lu", "lu_factor",
           "lu_solve", "circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion",
           "hadamard", "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal", "toeplitz",
           "qr", "solve", "solve_triangular", "svd"]

_inexact = jnp_linalg._inexact


def _rhs(name: str, a: Any, b: Any) -> tuple[Any, Any, bool]:
    """``a`` and ``b`` with broadcast batch axes; ``b`` 1-D becomes a column (the flag says so)."""
    n = a.shape[-1]
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if b.ndim < 2 or b.shape[-2] != n:
        raise FtransShapeError(
            f"{name}: b of shape {b.shape if not vector else b.shape[:1]} does not match a of shape {a.shape}: "
            f"b must be [{n}] or [..., {n}, k]")
    batch = jnp_linalg._batch(name, a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:]), vector


def _trans(trans: Any) -> tuple[bool, bool]:
    if trans in (0, "N"):
        return False, False
    if trans in (1, "T"):
        return True, False
    if trans in (2, "C"):
        return True, True
    raise FtransValueError(f"invalid trans={trans!r}; use 0/'N', 1/'T' or 2/'C'")


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug: Any = None, check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` for triangular ``a`` (``b`` is ``[n]`` or ``[..., n, k]``)."""
    a, b = _inexact("solve_triangular", a, b)
    jnp_linalg._square("solve_triangular", a)
    transpose_a, conjugate_a = _trans(trans)
    a, b, vector = _rhs("solve_triangular", a, b)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose_a,
                                    conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """SciPy's Cholesky factor: upper triangular ``U`` with ``a = U^H U`` unless ``lower`` (then ``L`` with
    ``a = L L^H``); only the named triangle of ``a`` is read."""
    return cho_factor(a, lower)[0]


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, bool]:
    """``(c, lower)``: the Cholesky factor of ``a`` (lower or upper) for ``cho_solve``."""
    (a,) = _inexact("cho_factor", a)
    jnp_linalg._square("cho_factor", a)
    # the upper factor reads a's upper triangle: factor aᴴ (whose lower triangle that is) and transpose back
    c = lax_linalg.cholesky(a if lower else jnp.conj(jnp.swapaxes(a, -1, -2)), symmetrize_input=False)
    return (c if lower else jnp.conj(jnp.swapaxes(c, -1, -2))), lower


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``a x = b`` given ``cho_factor(a)``."""
    c, lower = c_and_lower
    c, b = _inexact("cho_solve", c, b)
    jnp_linalg._square("cho_solve", c)
    c, b, vector = _rhs("cho_solve", c, b)
    # a = L Lᴴ (lower) or Uᴴ U (upper): two triangular solves.
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower, conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """``(lu, piv)``: LU factorization with LAPACK-style (zero-based) pivots."""
    (a,) = _inexact("lu_factor", a)
    jnp_linalg._matrix("lu_factor", a)
    lu_, piv, _ = lax_linalg.lu(a)
    return lu_, piv


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` given ``lu_factor(a)``."""
    lu_, piv = lu_and_piv
    lu_, b = _inexact("lu_solve", lu_, b)
    jnp_linalg._square("lu_solve", lu_)
    piv = jnp.asarray(as_operand(piv))
    transpose_a, conjugate_a = _trans(trans)
    n = lu_.shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(piv, n)
    lu_, b, vector = _rhs("lu_solve", lu_, b)
    perm = jnp.broadcast_to(perm, lu_.shape[:-2] + (n,))
    if not transpose_a:
        x = jnp_linalg._lu_solve(lu_, perm, b)
    else:
        # op(P⁻¹ L U) x = b:  op(U) op(L) (P x) = b
        y = lax_linalg.triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=conjugate_a)
        z = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=conjugate_a, unit_diagonal=True)
        inv_perm = jnp.argsort(perm, axis=-1)
        x = jnp.take_along_axis(z, jnp.broadcast_to(inv_perm[..., :, None], inv_perm.shape + (z.shape[-1],)),
                                axis=-2)
    return x[..., 0] if vector else x


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """``(p, l, u)`` with ``a = p @ l @ u`` (or ``(p @ l, u)`` with ``permute_l``)."""
    (a,) = _inexact("lu", a)
    jnp_linalg._matrix("lu", a)
    lu_, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    l_ = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.triu(lu_[..., :k, :])
    p = jnp.swapaxes(jnp.asarray(perm[..., :, None] == jnp.arange(m), dtype=a.dtype), -1, -2)
    if permute_l:
        return jnp.matmul(p, l_), u
    return p, l_, u


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple:
    """``(q, r)`` (``mode`` "full" or "economic") or ``(r,)`` (``mode="r"``)."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not implemented in ftrans")
    if mode not in ("full", "economic", "r"):
        if mode == "raw":
            raise NotImplementedError("qr: mode='raw' is not implemented in ftrans")
        raise FtransValueError(f"qr: unsupported mode {mode!r}; use 'full', 'economic' or 'r'")
    (a,) = _inexact("qr", a)
    jnp_linalg._matrix("qr", a)
    q, r = lax_linalg.qr(a, full_matrices=(mode == "full"))
    if mode == "r":
        if a.shape[-2] > a.shape[-1]:  # scipy's mode='r' keeps the full m x n R
            _, r = lax_linalg.qr(a, full_matrices=True)
        return (r,)
    return q, r


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """``(u, s, vh)`` or ``s``, as ``ftrans.numpy.linalg.svd``."""
    out = jnp_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals: Any = None, type: int = 1,  # noqa: A002
         check_finite: bool = True) -> Any:
    """``(w, v)`` (or ``w``) of Hermitian ``a``; the generalized problem (``b``) is not supported, as in JAX."""
    if b is not None:
        raise NotImplementedError("eigh: only the standard eigenvalue problem (b=None) is supported, as in JAX")
    if eigvals is not None:
        raise NotImplementedError("eigh: eigvals (a subset) is not supported, as in JAX")
    w, v = jnp_linalg.eigh(a, UPLO="L" if lower else "U")
    return w if eigvals_only else (w, v)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return jnp_linalg.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return jnp_linalg.det(a)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Any:
    """Solve ``a x = b``; ``assume_a='pos'`` uses a Cholesky factorization, the others LU."""
    valid = ("gen", "sym", "her", "pos")
    if assume_a not in valid:
        raise FtransValueError(f"solve: assume_a must be one of {list(valid)}, got {assume_a!r}")
    if assume_a != "pos":
        return jnp_linalg.solve(a, b)
    a, b = _inexact("solve", a, b)
    jnp_linalg._square("solve", a)
    return cho_solve(cho_factor(a, lower=lower), b)


# ---------------------------------------------------------------- expm

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_PADE7 = (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.)
_THETA13 = 5.371920351148152
_THETA7 = 3.925724783138660


def _pade(a: Any, eye: Any, order: int) -> tuple[Any, Any]:
    mm = jnp.matmul
    a2 = mm(a, a)
    a4 = mm(a2, a2)
    a6 = mm(a4, a2)
    if order == 7:
        b = _PADE7
        u = mm(a, b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
        return u, v
    b = _PADE13
    u = mm(a, mm(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = mm(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    return u, v


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:  # noqa: N803
    """The matrix exponential by scaling and squaring with a Padé approximant (differentiable)."""
    (a,) = _inexact("expm", A)
    jnp_linalg._square("expm", a)
    double = jnp.finfo(a.dtype).bits == 64
    order, theta = (13, _THETA13) if double else (7, _THETA7)
    norm1 = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
    s = jnp.ceil(jnp.log2(norm1 / theta))
    s = jnp.clip(jnp.where(jnp.isfinite(s), s, 0), 0, max_squarings)
    s = jnp.where(norm1 > 0, s, 0)
    scale = jnp.exp2(-s).astype(a.dtype)[..., None, None]
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    u, v = _pade(a * scale, eye, order)
    r = jnp_linalg.solve(v - u, v + u)
    for i in range(int(max_squarings)):
        r = jnp.where((i < s)[..., None, None], jnp.matmul(r, r), r)
    return r


def block_diag(*arrs: Any) -> Any:
    """A block-diagonal matrix of the given 0-, 1- or 2-D blocks."""
    if not arrs:
        return jnp.zeros((1, 0))
    blocks = [jnp.atleast_2d(jnp.asarray(as_operand(x))) for x in arrs]
    for i, b in enumerate(blocks):
        if b.ndim != 2:
            raise FtransShapeError(f"block_diag: input {i} must have rank <= 2, got shape {b.shape}")
    dtype = jnp.result_type(*blocks)
    acc = np.cumsum([0] + [b.shape[1] for b in blocks])
    total = int(acc[-1])
    rows = []
    for b, start in zip(blocks, acc[:-1]):
        rows.append(jnp.pad(b.astype(dtype), ((0, 0), (int(start), total - int(start) - b.shape[1]))))
    return jnp.concatenate(rows, axis=0)
