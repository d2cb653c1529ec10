"""``ftrans.scipy.linalg``: JAX's ``scipy.linalg`` subset.

Written with ``ftrans.lax.linalg`` and ``ftrans.numpy``: the factorizations
bind the linear-algebra primitives; ``solve_triangular``, ``cho_solve`` and
``lu_solve`` are triangular solves whose batch axes broadcast; ``expm`` is
the scaling-and-squaring Padé method (Higham 2005) with the top-order
approximant for the dtype (13 for float64, 7 for float32) and the squarings
as selects, so it is one fixed program under ``jit`` and differentiable.
``expm_frechet`` is the forward-mode derivative of ``expm``; ``polar`` comes
from the SVD.  ``schur`` binds LAPACK's ``gees`` (CPU only, as in JAX), and
``sqrtm`` (Björck–Hammarling), ``funm`` (Schur–Parlett), ``rsf2csf`` and
``solve_sylvester`` (Bartels–Stewart, or eigendecomposition) build on it;
``hessenberg`` is a Householder reduction with LAPACK's conventions and
``eigh_tridiagonal`` bisects on Sturm counts.  Those written as loops run as
one compiled program even when called eagerly, so eager and ``jit`` values
agree, as in JAX.  ``overwrite_*`` and ``check_finite`` are accepted and
ignored, as in JAX.
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
from ftrans.transforms.jit import jit

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "eigh_tridiagonal", "expm",
           "expm_frechet", "funm", "hessenberg", "inv", "lu", "lu_factor", "lu_solve", "polar", "rsf2csf", "schur",
           "qr_multiply", "solve_sylvester", "sqrtm", "circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion",
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
    """``(p, l, u)`` with ``a = p @ l @ u`` (or ``(p @ l, u)`` with ``permute_l``); ``p`` is real for a complex
    ``a``, and batch axes are factored one matrix at a time."""
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
    return jnp.real(p), l_, u  # the permutation matrix is real, whatever a's dtype (as SciPy's and JAX's)


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple:
    """``(q, r)`` (``mode`` "full" or "economic") or ``(r,)`` (``mode="r"``); with ``pivoting`` also the
    zero-based column permutation ``p`` (``a[..., :, p] = q r``, ``|diag r|`` non-increasing), as
    ``(q, r, p)`` or ``(r, p)``: Householder QR with column pivoting, as LAPACK's ``geqp3``."""
    if mode not in ("full", "economic", "r"):
        if mode == "raw":
            raise NotImplementedError("qr: mode='raw' is not implemented in ftrans")
        raise FtransValueError(f"qr: unsupported mode {mode!r}; use 'full', 'economic' or 'r'")
    (a,) = _inexact("qr", a)
    jnp_linalg._matrix("qr", a)
    if pivoting:
        q, r, p = _qr_pivoted(a, full=mode != "economic")
        return (r, p) if mode == "r" else (q, r, p)
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
    """Eigenvalues (and eigenvectors) of a Hermitian matrix, or of a generalized Hermitian-definite problem.

    Without ``b`` this is the standard problem ``a @ v = v * w``; with a Hermitian positive-definite ``b`` it
    is the generalized problem ``type`` names: ``1`` is ``a @ v = (b @ v) * w``, ``2`` is
    ``a @ b @ v = v * w`` and ``3`` is ``b @ a @ v = v * w``.  The generalized problem is reduced to a
    standard one through the Cholesky factor ``b = L L^H``; ``a`` is symmetrized first (which keeps
    derivatives symmetric), and a ``b`` that is not positive definite gives NaNs.  Batch axes of ``a`` and
    ``b`` broadcast.  ``eigvals`` (a subset) is not supported, as in JAX; ``overwrite_*``, ``turbo`` and
    ``check_finite`` are accepted and ignored.

    Args:
        a: Hermitian array of shape ``(..., N, N)``.
        b: ``None`` (the identity) or a Hermitian positive-definite array of shape ``(..., N, N)``.
        lower: whether the lower (default) or upper triangle is read (after symmetrization with ``b``).
        eigvals_only: return only the eigenvalues.
        type: the generalized problem, 1, 2 or 3 (see above); ``ValueError`` for any other value.

    Returns:
        ``w`` (shape ``(..., N)``, ascending) if ``eigvals_only``, else ``(w, v)`` with the eigenvectors as
        the columns of ``v`` (shape ``(..., N, N)``), normalized so that ``v^H @ b @ v`` (types 1 and 2),
        ``v^H @ inv(b) @ v`` (type 3) or ``v^H @ v`` (no ``b``) is the identity.

    Examples:
        >>> import ftrans.numpy as jnp
        >>> import ftrans.scipy.linalg as fsl
        >>> a = jnp.array([[2., 1.], [1., 2.]])
        >>> fsl.eigh(a, eigvals_only=True)
        Array([1., 3.], dtype=float32)
        >>> b = jnp.diag(jnp.array([2., 1.]))
        >>> w, v = fsl.eigh(a, b)
        >>> bool(jnp.allclose(a @ v, (b @ v) * w, atol=1e-5))
        True
        >>> bool(jnp.allclose(v.T @ b @ v, jnp.eye(2), atol=1e-5))
        True
    """
    if type not in (1, 2, 3):
        raise FtransValueError(f"eigh: type must be 1, 2, or 3, got {type!r}")
    if eigvals is not None:
        raise NotImplementedError("eigh: eigvals (a subset) is not supported, as in JAX")
    if b is None:
        (a,) = _inexact("eigh", a)
        _square_value("eigh", "a", a)
        w, v = jnp_linalg.eigh(a, UPLO="L" if lower else "U")
        return w if eigvals_only else (w, v)
    a, b = _inexact("eigh", a, b)
    _square_value("eigh", "a", a)
    _square_value("eigh", "b", b)
    if a.shape[-1] != b.shape[-1]:
        raise FtransShapeError(f"eigh: a and b must be matrices of the same size, got {a.shape} and {b.shape}")
    batch = jnp_linalg._broadcast(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    return _eigh_generalized(a, b, lower, eigvals_only, type)


def _square_value(name: str, arg: str, a: Any) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise FtransShapeError(f"{name}: argument {arg} must have shape [..., n, n], got {a.shape}")


def _eigh_generalized(a: Any, b: Any, lower: bool, eigvals_only: bool, kind: int) -> Any:
    """The generalized problem by ``b = L L^H``: type 1 is the standard problem of ``C = L^-1 A L^-H`` with
    ``v = L^-H y``; types 2 and 3 that of ``C = L^H A L`` with ``v = L^-H y`` (2) or ``v = L y`` (3)."""
    from ftrans import lax

    def ct(x: Any) -> Any:
        return jnp.conj(jnp.swapaxes(x, -1, -2))

    hi = lax.Precision.HIGHEST
    chol = lax_linalg.cholesky(b)
    a = (a + ct(a)) / 2
    if kind == 1:
        c = lax_linalg.triangular_solve(chol, a, left_side=True, lower=True)
        c = lax_linalg.triangular_solve(chol, c, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    else:
        c = jnp.matmul(jnp.matmul(ct(chol), a, precision=hi), chol, precision=hi)
    y, w = lax_linalg.eigh(c, lower=lower)
    if eigvals_only:
        return w
    if kind == 3:
        v = jnp.matmul(chol, y, precision=hi)
    else:
        v = lax_linalg.triangular_solve(chol, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
    return w, v


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


# ---------------------------------------------------------------- polar, expm_frechet

def polar(a: Any, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Any, Any]:
    """The polar decomposition ``a = u p`` (``side='right'``) or ``a = p u`` (``side='left'``).

    ``u`` (``[..., m, n]``) has orthonormal columns (rows when ``n > m``) and ``p`` is
    Hermitian positive semidefinite, ``[..., n, n]`` on the right or ``[..., m, m]`` on the
    left.  Both factors come from the reduced SVD ``a = W Σ Vᴴ``: ``u = W Vᴴ`` and
    ``p = V Σ Vᴴ`` (right) or ``W Σ Wᴴ`` (left).  ``method='qdwh'`` (the default) accepts the
    shapes JAX's QDWH iteration does (``m >= n`` on the right, ``m < n`` on the left; other
    combinations raise ``NotImplementedError``) and gives the same factors; ``eps`` and
    ``max_iterations`` only tune that iteration in JAX and are accepted.
    """
    if side not in ("right", "left"):
        raise FtransValueError(f"polar: the argument `side` must be either 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise FtransValueError(f"polar: unknown polar decomposition method {method!r}; use 'qdwh' or 'svd'")
    (a,) = _inexact("polar", a)
    if a.ndim < 2:
        raise FtransShapeError(f"polar: the input `a` must be at least a 2-D array, got shape {tuple(a.shape)}")
    m, n = a.shape[-2:]
    if method == "qdwh" and not ((m >= n and side == "right") or (m < n and side == "left")):
        raise NotImplementedError(f"polar: method='qdwh' only supports m x n matrices with m >= n for "
                                  f"side='right' and m < n for side='left', got shape {tuple(a.shape)} with "
                                  f"side={side!r}; use method='svd'")
    return _polar_jit(a, side)


def _polar_core(a: Any, side: str) -> tuple[Any, Any]:
    u, s, vh = jnp_linalg.svd(a, full_matrices=False)
    s = s.astype(u.dtype)
    unitary = jnp.matmul(u, vh)
    if side == "right":
        v = jnp.conj(jnp.swapaxes(vh, -1, -2))
        posdef = jnp.matmul(v * s[..., None, :], vh)
    else:
        posdef = jnp.matmul(u * s[..., None, :], jnp.conj(jnp.swapaxes(u, -1, -2)))
    return unitary, posdef


# Compiled as one program each (as JAX's are), so eager calls give the values jit does.
_polar_jit = jit(_polar_core, static_argnums=(1,))


def expm_frechet(A: Any, E: Any, *, method: str | None = None, compute_expm: bool = True) -> Any:  # noqa: N803
    """The Fréchet derivative of ``expm`` at ``A`` in the direction ``E`` (both ``[..., n, n]``).

    Computed as the forward-mode derivative of ``expm`` (so exactly the tangent ``jvp`` gives);
    returns ``(expm(A), L(A, E))``, or only ``L(A, E)`` when ``compute_expm`` is false.
    ``method`` is accepted and ignored, as in JAX.
    """
    from ftrans.transforms.ad import jvp

    a, e = jnp.asarray(as_operand(A)), jnp.asarray(as_operand(E))
    for what, x in (("A", a), ("E", e)):
        if x.ndim < 2 or x.shape[-2] != x.shape[-1]:
            raise FtransShapeError(f"expm_frechet: expected {what} to be a (batched) square matrix, got "
                                   f"{what}.shape={tuple(x.shape)}")
    if a.shape != e.shape:
        raise FtransShapeError(f"expm_frechet: expected A and E to be the same shape, got A.shape={tuple(a.shape)} "
                               f"E.shape={tuple(e.shape)}")
    out, tangent = jvp(lambda x: expm(x, upper_triangular=False, max_squarings=16), (a,), (e,))
    return (out, tangent) if compute_expm else tangent


# ---------------------------------------------------------------- eigh_tridiagonal

def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None) -> Any:
    """Eigenvalues (and eigenvectors) of the Hermitian tridiagonal matrix with diagonal ``d`` (``[n]``)
    and superdiagonal ``e`` (``[n - 1]``; the subdiagonal is its conjugate).

    The eigenvalues, ascending, are found by parallel bisection on Sturm-sequence counts,
    starting from the Gershgorin interval, until every interval is narrower than
    ``max(tol, eps * ‖T‖)`` (at most as many halvings as the mantissa has bits).
    ``select='a'`` gives all of them, ``select='i'`` those with indices
    ``select_range[0] <= i <= select_range[1]``; ``select='v'`` is not implemented (as in
    JAX).  With ``eigvals_only=False`` the matching eigenvectors (columns of ``[n, k]``)
    come from a Hermitian eigensolver on the assembled matrix; ``key`` is accepted for
    JAX's signature (JAX seeds an inverse iteration with it).
    """
    name = "eigh_tridiagonal"
    alpha, beta = jnp.asarray(as_operand(d)), jnp.asarray(as_operand(e))
    if alpha.dtype != beta.dtype:
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(f"{name}: diagonal and off-diagonal values must have same dtype, got {alpha.dtype} "
                              f"and {beta.dtype}")
    if alpha.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(f"{name}: only float32, float64, complex64 and complex128 inputs are supported, got "
                              f"{alpha.dtype} and {beta.dtype}")
    if alpha.ndim != 1 or beta.ndim != 1 or beta.shape[0] != max(alpha.shape[0] - 1, 0):
        raise FtransShapeError(f"{name}: d must be [n] and e [n - 1], got shapes {tuple(alpha.shape)} and "
                               f"{tuple(beta.shape)}")
    n = alpha.shape[0]
    if select == "a":
        lo_i, hi_i = 0, n - 1
    elif select == "i":
        if select_range is None:
            raise FtransValueError(f"{name}: for select='i', select_range must be specified")
        lo_i, hi_i = int(select_range[0]), int(select_range[1])
        if lo_i > hi_i:
            raise FtransValueError(f"{name}: got empty index range in select_range: {select_range!r}")
    elif select == "v":
        raise NotImplementedError(f"{name}: select='v' is not implemented")
    else:
        raise FtransValueError(f"{name}: select must have a value in {{'a', 'i', 'v'}}, got {select!r}")
    if n <= 1:
        w = jnp.real(alpha)
        return w if eigvals_only else (w, jnp.eye(n, dtype=alpha.dtype))
    return _tridiag_jit(alpha, beta, tol, bool(eigvals_only), lo_i, hi_i)


def _tridiag_core(alpha: Any, beta: Any, tol: Any, eigvals_only: bool, lo_i: int, hi_i: int) -> Any:
    from ftrans import lax

    n = alpha.shape[0]
    real = jnp.real(alpha)
    beta_sq = jnp.real(beta * jnp.conj(beta))
    beta_abs = jnp.sqrt(beta_sq)
    finfo = np.finfo(real.dtype)
    rowsum = jnp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]])
    est_max = jnp.max(real + rowsum)
    est_min = jnp.min(real - rowsum)
    t_norm = jnp.maximum(jnp.abs(est_min), jnp.abs(est_max))
    safemin = max(1 / float(finfo.max), (1 + float(finfo.eps)) * float(finfo.tiny))
    pivmin = safemin * jnp.maximum(1, jnp.max(beta_sq))
    perturb0 = jnp.square(float(finfo.eps) * beta_abs[0])
    targets = jnp.arange(lo_i, hi_i + 1, dtype=np.int32)
    slack = n * 2.1 * float(finfo.eps) * t_norm
    lower = jnp.broadcast_to(est_min - slack - 2 * 2.1 * pivmin, targets.shape)
    upper = jnp.broadcast_to(est_max + slack + 2.1 * pivmin, targets.shape)

    def count_below(x: Any) -> Any:
        """How many eigenvalues are below each ``x`` (the negative pivots of the Sturm sequence)."""
        q = real[0] - x
        count = (q < 0).astype(np.int32)
        q = jnp.where(real[0] == x, perturb0, q)

        def step(i: Any, qc: Any) -> Any:
            q, count = qc
            q = real[i] - beta_sq[i - 1] / q - x
            neg = q <= pivmin
            return jnp.where(neg, jnp.minimum(q, -pivmin), q), count + neg.astype(np.int32)

        return lax.fori_loop(1, n, step, (q, count))[1]

    abs_tol = float(finfo.eps) * t_norm
    if tol is not None:
        abs_tol = jnp.maximum(tol, abs_tol)

    def unconverged(state: Any) -> Any:
        i, lower, upper = state
        return (i < finfo.nmant + 1) & (jnp.max(upper - lower) > abs_tol)

    def bisect(state: Any) -> Any:
        i, lower, upper = state
        mid = 0.5 * (lower + upper)
        below = count_below(mid) <= targets
        return i + 1, jnp.where(below, mid, lower), jnp.where(below, upper, mid)

    _, lower, upper = lax.while_loop(unconverged, bisect, (0, lower, upper))
    w = 0.5 * (lower + upper)
    if eigvals_only:
        return w
    t = jnp.diag(alpha) + jnp.diag(beta, 1) + jnp.diag(jnp.conj(beta), -1)
    _, v = jnp_linalg.eigh(t)
    return w, v[:, lo_i:hi_i + 1]


_tridiag_jit = jit(_tridiag_core, static_argnums=(3, 4, 5))


# ---------------------------------------------------------------- solve_sylvester

def _ct(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur", tol: float = 1e-8) -> Any:  # noqa: N803
    """Solve the Sylvester equation ``A X + X B = C`` (``A`` ``[..., m, m]``, ``B`` ``[..., n, n]``,
    ``C`` ``[..., m, n]``; the batch axes broadcast).

    ``method='schur'`` is the Bartels–Stewart algorithm: complex Schur forms ``A = U R Uᴴ``
    and ``Bᴴ = V S Vᴴ`` reduce the equation to a triangular one, solved entry by entry from
    the bottom-right corner.  ``method='eigen'`` diagonalizes ``A`` and ``B`` instead (faster,
    but only as good as their eigenvectors' conditioning).  Where some ``λᵢ(A) + μⱼ(B)`` is
    smaller than ``tol`` in magnitude (no unique solution) the result is all NaN, as in JAX.
    Real inputs give a real result.
    """
    a, b, c = _inexact("solve_sylvester", A, B, C)
    if method not in ("schur", "eigen"):
        raise FtransValueError(f"solve_sylvester: unrecognized method {method!r}; the two valid methods are "
                               f"'schur' and 'eigen'")
    if c.ndim < 2 or a.ndim < 2 or b.ndim < 2:
        raise FtransShapeError(f"solve_sylvester: A, B and C must be (batched) matrices, got shapes "
                               f"{tuple(a.shape)}, {tuple(b.shape)} and {tuple(c.shape)}")
    m, n = c.shape[-2:]
    if a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise FtransShapeError(f"solve_sylvester: incompatible shapes for the Sylvester equation: A {tuple(a.shape)}, "
                               f"B {tuple(b.shape)}, C {tuple(c.shape)}")
    batch = jnp_linalg._batch("solve_sylvester", a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a = jnp.broadcast_to(a, batch + (m, m))
    b = jnp.broadcast_to(b, batch + (n, n))
    c = jnp.broadcast_to(c, batch + (m, n))
    return _sylvester_jit(a, b, c, tol, method)


def _sylvester_core(a: Any, b: Any, c: Any, tol: Any, method: str) -> Any:
    wa = jnp_linalg.eigvals(a)
    wb = jnp_linalg.eigvals(b)
    if method == "eigen":
        la, ua = lax_linalg.eig(a, compute_left_eigenvectors=False)
        lb, ub = lax_linalg.eig(b, compute_left_eigenvectors=False)
        f = jnp_linalg.solve(ua, jnp.matmul(c.astype(la.dtype), ub))
        y = f / (la[..., :, None] + lb[..., None, :])
        x = jnp.matmul(jnp.matmul(ua, y), jnp_linalg.inv(ub))
    else:
        r, u = schur(a, output="complex")
        s, v = schur(_ct(b), output="complex")
        f = jnp.matmul(jnp.matmul(_ct(u), c.astype(r.dtype)), v)
        y = _sylvester_triangular(r, _ct(s), f)
        x = jnp.matmul(jnp.matmul(u, y), _ct(v))
    if not jnp.iscomplexobj(c):
        x = jnp.real(x)
    singular = jnp.any(jnp.abs(wa[..., :, None] + wb[..., None, :]) < tol, axis=(-2, -1))
    return jnp.where(singular[..., None, None], jnp.full_like(x, np.nan), x)


_sylvester_jit = jit(_sylvester_core, static_argnums=(4,))


def _sylvester_triangular(r: Any, s: Any, f: Any) -> Any:
    """Solve ``R Y + Y S = F`` for upper-triangular ``R`` ``[..., m, m]`` and lower-triangular ``S``
    ``[..., n, n]``, entry by entry from ``(m-1, n-1)`` backwards (each entry needs only later ones)."""
    from ftrans import lax

    m, n = f.shape[-2:]
    rows = jnp.arange(m)
    cols = jnp.arange(n)

    def step(k: Any, y: Any) -> Any:
        idx = m * n - 1 - k
        i, j = idx // n, idx % n
        r_row = jnp.where(rows > i, jnp.take(r, i, axis=-2), 0)        # R[i, k] for k > i
        s_col = jnp.where(cols > j, jnp.take(s, j, axis=-1), 0)        # S[k, j] for k > j
        known = jnp.sum(r_row * jnp.take(y, j, axis=-1), axis=-1) + jnp.sum(jnp.take(y, i, axis=-2) * s_col, axis=-1)
        rhs = f[..., i, j] - known
        val = rhs / (r[..., i, i] + s[..., j, j])
        hit = (rows[:, None] == i) & (cols[None, :] == j)
        return jnp.where(hit, val[..., None, None], y)

    return lax.fori_loop(0, m * n, step, jnp.zeros_like(f))


# ---------------------------------------------------------------- schur and the functions built on it

def schur(a: Any, output: str = "real") -> tuple[Any, Any]:
    """The Schur decomposition ``a = Z T Zᴴ`` of a square matrix (``[..., n, n]``): ``(T, Z)``.

    ``output='real'`` keeps a real input real: ``T`` is quasi-upper-triangular, with 2x2
    blocks for complex-conjugate eigenvalue pairs.  ``output='complex'`` converts the
    input to complex first, so ``T`` is upper triangular with the eigenvalues on its
    diagonal.  ``Z`` is unitary.  LAPACK's ``gees`` on the CPU, as in JAX; no derivative.
    """
    if output not in ("real", "complex"):
        raise FtransValueError(f"schur: expected 'output' to be either 'real' or 'complex', got {output!r}")
    (x,) = _inexact("schur", a)
    jnp_linalg._square("schur", x)
    if output == "complex":
        x = x.astype(jnp.result_type(x, 1j))
    return lax_linalg.schur(x)


def _sqrtm_upper(t: Any) -> Any:
    """The upper-triangular square root ``U`` (``U @ U = T``) of an upper-triangular ``T`` (Björck and
    Hammarling): the diagonal is ``sqrt(diag T)``; each entry above it, a column at a time from the
    diagonal upwards, solves ``U[i,i] U[i,j] + U[i,j] U[j,j] = T[i,j] - Σ_{i<k<j} U[i,k] U[k,j]``
    (zero where that right-hand side is exactly zero)."""
    from ftrans import lax

    n = t.shape[-1]
    diag = jnp.sqrt(jnp.diagonal(t))
    u = jnp.diag(diag)
    pairs = [(i, j) for j in range(n) for i in range(j - 1, -1, -1)]
    if not pairs:
        return u
    ii = jnp.asarray(np.array([p[0] for p in pairs], np.int32))
    jj = jnp.asarray(np.array([p[1] for p in pairs], np.int32))
    ks = jnp.arange(n)

    def step(k: Any, u: Any) -> Any:
        i, j = ii[k], jj[k]
        inner = (ks > i) & (ks < j)
        s = jnp.sum(jnp.where(inner, u[i, :] * u[:, j], 0))
        tij = t[i, j]
        val = jnp.where(tij == s, jnp.zeros_like(s), (tij - s) / (diag[i] + diag[j]))
        return jnp.where((ks[:, None] == i) & (ks[None, :] == j), val, u)

    return lax.fori_loop(0, len(pairs), step, u)


def sqrtm(A: Any, blocksize: int = 1) -> Any:  # noqa: N803
    """The principal matrix square root ``X`` with ``X @ X = A`` (complex, ``[n, n]``).

    Björck and Hammarling's complex Schur method: ``A = Z T Zᴴ`` with ``T`` upper triangular,
    ``X = Z sqrt(T) Zᴴ`` where the triangular square root is built entry by entry.  Only
    ``blocksize=1`` is supported (the unblocked method), as in JAX; CPU only (Schur).
    """
    if blocksize > 1:
        raise NotImplementedError("sqrtm: the blocked version (blocksize > 1) is not implemented, as in JAX")
    (a,) = _inexact("sqrtm", A)
    jnp_linalg._square("sqrtm", a)
    return _sqrtm_jit(a.astype(jnp.result_type(a, 1j)))


def _sqrtm_core(a: Any) -> Any:
    from ftrans import lax

    t, z = lax_linalg.schur(a)
    r = jnp.vectorize(_sqrtm_upper, signature="(n,n)->(n,n)")(t)
    hi = lax.Precision.HIGHEST
    return jnp.matmul(jnp.matmul(z, r, precision=hi), _ct(z), precision=hi)


_sqrtm_jit = jit(_sqrtm_core)


def _rsf2csf_2d(t: Any, z: Any) -> tuple[Any, Any]:
    from ftrans import lax

    n = t.shape[-1]
    cd = jnp.result_type(t, z, 1j)
    t, z = t.astype(cd), z.astype(cd)
    if n == 1:
        return t, z
    eps = float(jnp.finfo(cd).eps)
    rows = jnp.arange(n)

    def rotate(m: Any, t: Any, z: Any) -> tuple[Any, Any]:
        mu = jnp_linalg.eigvals(lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))) - t[m, m]
        r = jnp_linalg.norm(jnp.stack([mu[0], t[m, m - 1]])).astype(cd)
        c, s = mu[0] / r, t[m, m - 1] / r
        g = jnp.stack([jnp.stack([jnp.conj(c), s]), jnp.stack([-s, c])])
        trows = lax.dynamic_slice(t, (m - 1, 0), (2, n))
        right = rows >= m - 1
        trows = jnp.where(right, jnp.matmul(g, jnp.where(right, trows, 0)), trows)
        t = lax.dynamic_update_slice(t, trows, (m - 1, 0))
        tcols = lax.dynamic_slice(t, (0, m - 1), (n, 2))
        upper = (rows < m + 1)[:, None]
        tcols = jnp.where(upper, jnp.matmul(jnp.where(upper, tcols, 0), _ct(g)), tcols)
        t = lax.dynamic_update_slice(t, tcols, (0, m - 1))
        zcols = jnp.matmul(lax.dynamic_slice(z, (0, m - 1), (n, 2)), _ct(g))
        return t, lax.dynamic_update_slice(z, zcols, (0, m - 1))

    def step(i: Any, tz: Any) -> Any:
        t, z = tz
        m = n - i
        big = jnp.abs(t[m, m - 1]) > eps * (jnp.abs(t[m - 1, m - 1]) + jnp.abs(t[m, m]))
        t, z = lax.cond(big, rotate, lambda m, t, z: (t, z), m, t, z)
        return t.at[m, m - 1].set(0), z

    return lax.fori_loop(1, n, step, (t, z))


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:  # noqa: N803
    """Convert a real Schur form ``(T, Z)`` (as from ``schur(a)``) to the complex one (``[..., n, n]``;
    the batch axes of ``T`` and ``Z`` broadcast).

    Each 2x2 diagonal block of ``T`` (a complex-conjugate eigenvalue pair) is made upper
    triangular by a complex Givens rotation applied to ``T``'s rows and columns and to
    ``Z``'s columns, from the bottom-right corner upwards, as SciPy does; the result is
    complex with ``T`` upper triangular and ``Z T Zᴴ`` unchanged.
    """
    t, z = _inexact("rsf2csf", T, Z)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise FtransShapeError(f"rsf2csf: input 'T' must be square, got shape {tuple(t.shape)}")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise FtransShapeError(f"rsf2csf: input 'Z' must be square, got shape {tuple(z.shape)}")
    if t.shape[-1] != z.shape[-1]:
        raise FtransShapeError(f"rsf2csf: input array shapes must match: Z: {tuple(z.shape)} vs. T: "
                               f"{tuple(t.shape)}")
    return _rsf2csf_jit(t, z)


def _rsf2csf_core(t: Any, z: Any) -> tuple[Any, Any]:
    return jnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


_rsf2csf_jit = jit(_rsf2csf_core)


def _parlett(f: Any, t: Any) -> tuple[Any, Any]:
    """Parlett's recurrence (Golub and Van Loan, Algorithm 11.1.1): ``F = f(T)`` for upper-triangular ``T``
    from its diagonal ``f(diag T)``, one superdiagonal at a time; also the smallest ``|T[j,j] - T[i,i]|``
    divided by (where that is zero the entry is left undivided)."""
    from ftrans import lax

    n = t.shape[-1]
    pairs = [(i, i + p) for p in range(1, n) for i in range(n - p)]
    minden = jnp.abs(t[0, 0])
    if not pairs:
        return f, minden
    ii = jnp.asarray(np.array([p[0] for p in pairs], np.int32))
    jj = jnp.asarray(np.array([p[1] for p in pairs], np.int32))
    ks = jnp.arange(n)

    def step(k: Any, fm: Any) -> Any:
        f, minden = fm
        i, j = ii[k], jj[k]
        inner = (ks > i) & (ks < j)
        s = t[i, j] * (f[j, j] - f[i, i])
        s = s + jnp.sum(jnp.where(inner, t[i, :] * f[:, j] - f[i, :] * t[:, j], 0))
        den = t[j, j] - t[i, i]
        s = jnp.where(den != 0, s / jnp.where(den != 0, den, 1), s)
        f = jnp.where((ks[:, None] == i) & (ks[None, :] == j), s, f)
        return f, jnp.minimum(minden, jnp.abs(den))

    return lax.fori_loop(0, len(pairs), step, (f, minden))


def funm(A: Any, func: Any, disp: bool = True) -> Any:  # noqa: N803
    """The matrix function ``func(A)`` of a square ``[n, n]`` matrix, by Schur–Parlett.

    ``A = Z T Zᴴ`` (complex Schur form, from the real one through ``rsf2csf`` as SciPy does);
    ``func`` (elementwise, written with ``ftrans.numpy``) is applied to the eigenvalues on
    ``T``'s diagonal and Parlett's recurrence fills in the rest of ``F = func(T)``; the result
    ``Z F Zᴴ`` is complex.  With ``disp=False`` also returns an estimate of the relative error
    (large when ``A`` has close or repeated eigenvalues).
    """
    a = jnp.asarray(as_operand(A))
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise FtransShapeError(f"funm: expected a square matrix, got shape {tuple(a.shape)}")
    (a,) = _inexact("funm", a)
    t, z = rsf2csf(*schur(a))
    f = jnp.diag(func(jnp.diagonal(t))).astype(t.dtype)
    f, minden = _parlett(f, t)
    f = jnp.matmul(jnp.matmul(z, f), _ct(z))
    if disp:
        return f
    tol = float(np.finfo(np.float32 if f.dtype == np.complex64 else np.float64).eps)
    minden = jnp.where(minden == 0.0, tol, minden)
    err = jnp.where(jnp.any(jnp.isinf(f)), np.inf,
                    jnp.minimum(1, jnp.maximum(tol, (tol / minden) * jnp_linalg.norm(jnp.triu(t, 1), 1))))
    return f, err


# ---------------------------------------------------------------- qr_multiply

def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple:
    """The QR decomposition ``a = Q R`` of ``a`` (``[..., m, n]``, ``k = min(m, n)``) with ``Q`` applied to ``c``.

    ``mode='left'`` returns ``(Q[:, :k] @ c, R)`` for ``c`` ``[..., k, p]``; ``mode='right'`` returns
    ``(c @ Q[:, :k], R)`` for ``c`` ``[..., p, m]``; ``R`` is ``[..., k, n]``.  ``conjugate`` uses
    ``conj(Q)``.  A 1-D ``c`` is a column (left) or a row (right) and the product is raveled back.
    The batch axes of ``a`` and ``c`` broadcast.  ``pivoting=True`` uses the column-pivoted QR
    (as ``qr(..., pivoting=True)``) and also returns the permutation: ``(result, R, P)``.
    """
    if mode not in ("right", "left"):
        raise FtransValueError(f"qr_multiply: mode must be 'right' or 'left', got {mode!r}")
    a, c = _inexact("qr_multiply", a, c)
    jnp_linalg._matrix("qr_multiply", a)
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise FtransShapeError(f"qr_multiply: array shapes are not compatible for Q @ c: a has shape "
                               f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} rows (expected {k})")
    if mode == "right" and c.shape[-1] != m:
        raise FtransShapeError(f"qr_multiply: array shapes are not compatible for c @ Q: a has shape "
                               f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} columns (expected {m})")
    batch = jnp_linalg._batch("qr_multiply", a.shape[:-2], c.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    c = jnp.broadcast_to(c, batch + c.shape[-2:])
    return _qr_multiply_jit(a, c, mode, bool(conjugate), onedim, bool(pivoting))


def _qr_multiply_core(a: Any, c: Any, mode: str, conjugate: bool, onedim: bool, pivoting: bool) -> tuple:
    from ftrans import lax

    k = min(a.shape[-2:])
    if pivoting:
        q, r, p = _qr_pivoted(a, full=False)
    else:
        q, r = lax_linalg.qr(a, full_matrices=False)
    if conjugate:
        q = jnp.conj(q)
    hi = lax.Precision.HIGHEST
    out = jnp.matmul(q, c, precision=hi) if mode == "left" else jnp.matmul(c, q, precision=hi)
    if onedim:
        out = jnp.ravel(out)
    r = jnp.triu(r[..., :k, :])
    return (out, r, p) if pivoting else (out, r)


_qr_multiply_jit = jit(_qr_multiply_core, static_argnums=(2, 3, 4, 5))


# ---------------------------------------------------------------- hessenberg

def _hessenberg_2d(a: Any) -> tuple[Any, Any]:
    """Householder reduction to upper-Hessenberg form with LAPACK's reflector convention (``?gehd2``):
    ``H(i) = I - tau v vᴴ`` with ``v[i+1] = 1``, ``beta = -sign(re α) ‖(α, x)‖``; ``A := H(i)ᴴ A H(i)``
    and ``Q := Q H(i)`` for each column ``i < n - 1``."""
    from ftrans import lax

    n = a.shape[-1]
    rows = jnp.arange(n)
    complex_ = jnp.iscomplexobj(a)

    def step(i: Any, aq: Any) -> Any:
        a, q = aq
        col = a[:, i]
        alpha = col[i + 1]
        below = rows > i + 1
        xnorm = jnp.sqrt(jnp.sum(jnp.where(below, jnp.abs(col) ** 2, 0)))
        trivial = (xnorm == 0) & (jnp.imag(alpha) == 0)
        beta = -jnp.where(jnp.real(alpha) >= 0, 1, -1) * jnp.sqrt(jnp.abs(alpha) ** 2 + xnorm ** 2)
        beta = jnp.where(trivial, jnp.real(alpha), beta)
        safe = jnp.where(trivial, 1, beta)
        tau = jnp.where(trivial, 0, (beta - alpha) / safe).astype(a.dtype)
        denom = jnp.where(trivial, 1, alpha - beta)
        v = jnp.where(below, col / denom, 0).astype(a.dtype)
        v = jnp.where(rows == i + 1, jnp.ones_like(v), v)
        vh = jnp.conj(v) if complex_ else v
        a = a - tau * jnp.outer(jnp.matmul(a, v), vh)            # A H
        ctau = jnp.conj(tau) if complex_ else tau
        a = a - ctau * jnp.outer(v, jnp.matmul(vh, a))           # Hᴴ (A H)
        newcol = jnp.where(rows == i + 1, beta.astype(a.dtype), jnp.where(rows > i + 1, 0, col)).astype(a.dtype)
        a = jnp.where((rows == i)[None, :], newcol[:, None], a)
        q = q - tau * jnp.outer(jnp.matmul(q, v), vh)
        return a, q

    q = jnp.eye(n, dtype=a.dtype)
    if n <= 1:
        return a, q
    return lax.fori_loop(0, n - 1, step, (a, q))  # the last one only makes a complex subdiagonal real


def _hessenberg_core(a: Any) -> tuple[Any, Any]:
    return jnp.vectorize(_hessenberg_2d, signature="(n,n)->(n,n),(n,n)")(a)


_hessenberg_jit = jit(_hessenberg_core)


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Hessenberg form ``H`` of a square matrix (``[..., n, n]``), and the unitary ``Q`` with
    ``a = Q H Qᴴ`` when ``calc_q``.

    ``H`` is zero below its first subdiagonal.  It is reached by Householder reflections
    with LAPACK's conventions (as ``?gehrd``, whose values SciPy returns), one column at a
    time in a ``fori_loop``; ``Q`` is the product of the reflections.  As JAX (LAPACK's
    ``gehrd``), a complex 2x2 matrix also gets its subdiagonal made real (SciPy returns 2x2
    input unchanged).
    """
    (x,) = _inexact("hessenberg", a)
    jnp_linalg._square("hessenberg", x)
    h, q = _hessenberg_jit(x)
    return (h, q) if calc_q else h


# ---------------------------------------------------------------- column-pivoted QR

def _qr_pivoted_2d(a: Any) -> tuple[Any, Any, Any]:
    """Householder QR with column pivoting, LAPACK's conventions (``?geqp3``): at step ``j`` the remaining
    column of largest norm (below row ``j``; the first on ties) is swapped into place, then reflected
    onto ``beta e_j`` (``beta = -sign(re α) ‖x‖``).  Returns the full ``Q`` (``m x m``), the reduced
    matrix (``R`` in its upper triangle) and the zero-based column permutation."""
    from ftrans import lax

    m, n = a.shape
    k = min(m, n)
    rows = jnp.arange(m)
    cols = jnp.arange(n)
    complex_ = jnp.iscomplexobj(a)

    def step(j: Any, state: Any) -> Any:
        a, q, perm = state
        live = rows >= j
        norms = jnp.sum(jnp.where(live[:, None], jnp.abs(a) ** 2, 0), axis=0)
        norms = jnp.where(cols >= j, norms, -1)
        p = jnp.argmax(norms)
        swap_j, swap_p = cols == j, cols == p
        a_j, a_p = a[:, j], a[:, p]
        a = jnp.where(swap_j[None, :], a_p[:, None], jnp.where(swap_p[None, :], a_j[:, None], a))
        perm = jnp.where(swap_j, perm[p], jnp.where(swap_p, perm[j], perm))
        col = a[:, j]
        alpha = col[j]
        below = rows > j
        xnorm = jnp.sqrt(jnp.sum(jnp.where(below, jnp.abs(col) ** 2, 0)))
        trivial = (xnorm == 0) & (jnp.imag(alpha) == 0)
        beta = -jnp.where(jnp.real(alpha) >= 0, 1, -1) * jnp.sqrt(jnp.abs(alpha) ** 2 + xnorm ** 2)
        beta = jnp.where(trivial, jnp.real(alpha), beta)
        tau = jnp.where(trivial, 0, (beta - alpha) / jnp.where(trivial, 1, beta)).astype(a.dtype)
        v = jnp.where(below, col / jnp.where(trivial, 1, alpha - beta), 0).astype(a.dtype)
        v = jnp.where(rows == j, jnp.ones_like(v), v)
        vh = jnp.conj(v) if complex_ else v
        ctau = jnp.conj(tau) if complex_ else tau
        rest = (cols > j)[None, :]
        a = jnp.where(rest, a - ctau * jnp.outer(v, jnp.matmul(vh, a)), a)      # H(j)ᴴ A on columns > j
        newcol = jnp.where(rows == j, beta.astype(a.dtype), jnp.where(below, 0, col)).astype(a.dtype)
        a = jnp.where(swap_j[None, :], newcol[:, None], a)
        q = q - tau * jnp.outer(jnp.matmul(q, v), vh)                           # Q H(j)
        return a, q, perm

    q = jnp.eye(m, dtype=a.dtype)
    perm = jnp.arange(n, dtype=np.int32)
    if k == 0:
        return q, a, perm
    a, q, perm = lax.fori_loop(0, k, step, (a, q, perm))
    return q, a, perm


def _qr_pivoted_core(a: Any) -> tuple[Any, Any, Any]:
    return jnp.vectorize(_qr_pivoted_2d, signature="(m,n)->(m,m),(m,n),(n)")(a)


_qr_pivoted_jit = jit(_qr_pivoted_core)


def _qr_pivoted(a: Any, full: bool) -> tuple[Any, Any, Any]:
    """``(q, r, p)`` of the column-pivoted QR ``a[..., :, p] = q r`` (``q`` full or reduced)."""
    q, r, p = _qr_pivoted_jit(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    r = jnp.triu(r)
    if not full:
        q, r = q[..., :, :k], r[..., :k, :]
    return q, r, p


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): each of these is
# several primitives behind argument checks, two to forty times the program's time op by op.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "block_diag", "cholesky", "companion", "eigh", "expm", "expm_frechet", "fiedler", "hankel", "lu", "lu_factor",
    "qr", "solve_triangular", "toeplitz",
))
