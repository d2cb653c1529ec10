"""``ftrans.numpy.linalg``: JAX's ``numpy.linalg``.

The decompositions bind the primitives of ``ftrans.lax.linalg`` (Cholesky,
LU, QR, symmetric eigendecomposition, SVD, general eigendecomposition on the
CPU); everything else is written with them and ``ftrans.numpy``: ``solve``
and ``inv`` are an LU factorization and two triangular solves, ``det`` and
``slogdet`` read the LU diagonal and the pivots' parity (``det`` has its own
JVP, ``tr(adj(A) dA)``, finite at singular matrices), ``lstsq``, ``pinv``, ``matrix_rank``, ``cond``
and the 2-norms use the SVD.  Leading axes are batch axes and broadcast
between operands, as in NumPy.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ftrans import numpy as jnp
from ftrans.core.operands import as_operand, canonicalize_axes, check_arraylike
from ftrans.core.shape_poly import is_poly_shape
from ftrans.core.trace import outputs_checked
from ftrans.errors import FtransShapeError, FtransTypeError, FtransValueError
from ftrans.lax import linalg as lax_linalg
from ftrans.transforms.ad_rules import linalg as M
from ftrans.transforms.custom_derivatives import custom_jvp

__all__ = [
    "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
    "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer",
    "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
    "vecdot", "vector_norm", "EighResult", "EigResult", "QRResult", "SlogdetResult", "SVDResult",
]


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def _inexact(name: str, *xs: Any) -> list[Any]:
    check_arraylike(name, *xs)
    arrs = [jnp.asarray(as_operand(x)) for x in xs]
    dtype = jnp.result_type(*arrs, 1.0)
    if dtype in (np.dtype(np.float16), jnp.bfloat16):
        from ftrans.errors import UnsupportedDtypeError

        raise UnsupportedDtypeError(f"{name}: Unsupported dtype {dtype}: LAPACK has no half-precision routines; "
                                    "convert to float32 first")
    return [a if a.dtype == dtype else a.astype(dtype) for a in arrs]


def _square(name: str, a: Any) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise FtransShapeError(f"{name}: argument must have shape [..., n, n], got {a.shape}")


def _matrix(name: str, a: Any) -> None:
    if a.ndim < 2:
        raise FtransShapeError(f"{name}: argument must have shape [..., m, n] (rank >= 2), got {a.shape}")


def _broadcast(*shapes: tuple) -> tuple:
    """NumPy's broadcast of ``shapes``, whose sizes may be symbolic (ValueError when they do not broadcast)."""
    if not any(is_poly_shape(s) for s in shapes):
        return tuple(np.broadcast_shapes(*shapes))
    nd = max(len(s) for s in shapes)
    out: list = [1] * nd
    for s in shapes:
        for i, d in enumerate(s, nd - len(s)):
            if d == out[i] or d == 1:
                continue
            if out[i] != 1:
                raise ValueError(shapes)
            out[i] = d
    return tuple(out)


def _batch(name: str, *shapes: tuple) -> tuple:
    try:
        return _broadcast(*shapes)
    except ValueError:
        raise FtransShapeError(
            f"{name}: the batch shapes {' and '.join(str(s) for s in shapes)} of the operands do not broadcast "
            "(their leading axes must be equal or 1)") from None


# ---------------------------------------------------------------- decompositions


def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The Cholesky factor of Hermitian positive-definite ``a`` (lower, or upper with ``upper``).

    Like JAX, a matrix that is not positive definite gives NaNs, not an error.
    """
    (a,) = _inexact("cholesky", a)
    _square("cholesky", a)
    lo = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return M.mH(lo) if upper else lo


def qr(a: Any, mode: str = "reduced") -> Any:
    """``QRResult(Q, R)`` (``mode`` "reduced" or "complete"), or ``R`` alone (``mode="r"``)."""
    (a,) = _inexact("qr", a)
    _matrix("qr", a)
    if mode == "raw":  # NumPy's (h, tau): geqrf's result with h transposed (LAPACK's column-major layout)
        h, taus = _geqrf(a)
        return M.mT(h), taus
    if mode == "full":  # NumPy's deprecated name for "reduced", which JAX still accepts
        mode = "reduced"
    if mode not in ("reduced", "complete", "r"):
        raise FtransValueError(f"qr: unsupported mode {mode!r}; use 'reduced', 'complete', 'r' or 'raw'")
    q, r = lax_linalg.qr(a, full_matrices=(mode == "complete"))
    return r if mode == "r" else QRResult(q, r)


def _geqrf(a: Any) -> tuple[Any, Any]:
    """The QR factorization of ``a`` (``[..., m, n]``) as Householder reflectors (``lax.linalg.geqrf``):
    ``R`` on and above the diagonal, the reflectors' vectors (unit first entry implied) below it, and their
    scalar factors ``taus`` (``[..., min(m, n)]``); ``jnp.linalg.qr(a, mode="raw")`` returns them."""
    (a,) = _inexact("qr", a)
    return lax_linalg.geqrf(a)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None) -> Any:
    """``SVDResult(U, S, Vh)`` with descending ``S``, or ``S`` alone without ``compute_uv``."""
    (a,) = _inexact("svd", a)
    _matrix("svd", a)
    if hermitian:
        _square("svd", a)
        v, w = lax_linalg.eigh(a, subset_by_index=subset_by_index)
        s = jnp.abs(w)
        order = jnp.flip(jnp.argsort(s, axis=-1, stable=True), axis=-1)
        s = jnp.take_along_axis(s, order, axis=-1)
        if not compute_uv:
            return s
        # A zero eigenvalue counts as positive (jax 0.12's fix: sign(0) = 0 zeroed that row of Vh)
        sign = jnp.take_along_axis(jnp.where(w < 0, -1, 1), order, axis=-1)
        u = jnp.take_along_axis(v, order[..., None, :], axis=-1)
        vh = M.mH(u * sign[..., None, :].astype(u.dtype))
        return SVDResult(u, s, vh)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x: Any, /) -> Any:
    """The singular values of ``x``, descending."""
    return svd(x, compute_uv=False)


def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:  # noqa: N803
    """``EighResult(eigenvalues, eigenvectors)`` of Hermitian ``a``, eigenvalues ascending."""
    (a,) = _inexact("eigh", a)
    _square("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise FtransValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax_linalg.eigh(a, lower=(UPLO != "U"), symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a: Any, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Any:  # noqa: N803
    """The eigenvalues of Hermitian ``a``, ascending."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def eig(a: Any) -> EigResult:
    """``EigResult(eigenvalues, eigenvectors)`` of a general square matrix (complex; CPU only, as in JAX)."""
    (a,) = _inexact("eig", a)
    _square("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: Any) -> Any:
    """The (complex) eigenvalues of a general square matrix."""
    (a,) = _inexact("eigvals", a)
    _square("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


# ---------------------------------------------------------------- solves, inverse, determinants


def _lu_solve(lu: Any, perm: Any, b: Any) -> Any:
    pb = jnp.take_along_axis(b, jnp.broadcast_to(perm[..., :, None], perm.shape + (b.shape[-1],)), axis=-2)
    y = lax_linalg.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a: Any, b: Any) -> Any:
    """Solve ``a x = b``: ``b`` is a vector (1-D) or a stack of matrices; batch axes broadcast."""
    a, b = _inexact("solve", a, b)
    _square("solve", a)
    n = a.shape[-1]
    vector = b.ndim == 1
    if vector:
        if b.shape[0] != n:
            raise FtransShapeError(f"solve: b of shape {b.shape} does not match a of shape {a.shape} "
                                   f"(b needs {n} entries)")
        b = b[:, None]
    elif b.shape[-2] != n:
        raise FtransShapeError(
            f"solve: b of shape {b.shape} does not match a of shape {a.shape}: b must be [..., {n}] (1-D) or "
            f"[..., {n}, k] (for a stack of vectors use b[..., None] and take [..., 0] of the result)")
    batch = _batch("solve", a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    lu, _, perm = lax_linalg.lu(a)
    x = _lu_solve(lu, perm, b)
    return x[..., 0] if vector else x


def inv(a: Any) -> Any:
    """The inverse of square ``a`` (a stack of them)."""
    (a,) = _inexact("inv", a)
    _square("inv", a)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return solve(a, eye)


def _lu_det_parts(a: Any) -> tuple[Any, Any]:
    lu, piv, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    swaps = jnp.count_nonzero(piv != jnp.arange(piv.shape[-1], dtype=piv.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    return diag, parity


def _adjugate_solve(a: Any, b: Any) -> tuple[Any, Any]:
    """``(det(a), adj(a) @ b)`` for square ``a`` and ``b`` of ``a``'s shape, defined at singular ``a`` too.

    With ``a[perm] = L U`` and ``U = [[U11, u12], [0, unn]]``, ``adj(a) = ±adj(U) L⁻¹ P`` and
    ``adj(U) = det(U11) [[unn U11⁻¹, -U11⁻¹ u12], [0, 1]]``: exact when ``U11`` is invertible, which
    partial pivoting gives for every matrix of rank ``n - 1`` whose zero pivot comes last. Where
    ``U11`` is singular the rank is below ``n - 1`` (in the common case) and the result is zero.
    """
    n = a.shape[-1]
    if n == 0:
        return jnp.ones(a.shape[:-2], a.dtype), b
    if n == 1:
        return a[..., 0, 0], b
    lu, piv, perm = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    swaps = jnp.count_nonzero(piv != jnp.arange(n, dtype=piv.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    c = jnp.take_along_axis(b, jnp.broadcast_to(perm[..., :, None], perm.shape + (b.shape[-1],)), axis=-2)
    c = lax_linalg.triangular_solve(lu, c, left_side=True, lower=True, unit_diagonal=True)
    minor = (parity * jnp.prod(diag[..., :-1], axis=-1))[..., None, None]
    u11, u12, unn = lu[..., :-1, :-1], lu[..., :-1, -1:], lu[..., -1:, -1:]
    c1, cn = c[..., :-1, :], c[..., -1:, :]
    # A singular U11 has a zero on its diagonal, so its minor is zero: solve with the identity instead
    # (no inf * 0, in the values or in their derivatives).
    invertible = jnp.all(diag[..., :-1] != 0, axis=-1)[..., None, None]
    u11 = jnp.where(invertible, u11, jnp.eye(n - 1, dtype=a.dtype))
    top = lax_linalg.triangular_solve(u11, unn * c1 - u12 * cn, left_side=True, lower=False)
    return minor[..., 0, 0] * diag[..., -1], minor * jnp.concatenate([top, cn], axis=-2)


@custom_jvp
def _det(a: Any) -> Any:
    diag, parity = _lu_det_parts(a)
    return parity * jnp.prod(diag, axis=-1)


@_det.defjvp
def _det_jvp(primals: tuple, tangents: tuple) -> tuple:
    # d det = tr(adj(a) da), through the adjugate so that singular matrices get their (finite) derivative.
    (a,), (t,) = primals, tangents
    y, z = _adjugate_solve(a, t)
    return y, jnp.trace(z, axis1=-2, axis2=-1)


def det(a: Any) -> Any:
    """The determinant of square ``a``; its derivative is ``tr(adj(a) da)`` (finite at singular ``a``).

    2x2 and 3x3 matrices use the expansion formula, as JAX does (no factorization, and
    its derivative, the adjugate, is exact at singular matrices too).
    """
    (a,) = _inexact("det", a)
    _square("det", a)
    n = a.shape[-1]
    if n == 2:
        return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]
    if n == 3:
        return (a[..., 0, 0] * a[..., 1, 1] * a[..., 2, 2] + a[..., 0, 1] * a[..., 1, 2] * a[..., 2, 0]
                + a[..., 0, 2] * a[..., 1, 0] * a[..., 2, 1] - a[..., 0, 2] * a[..., 1, 1] * a[..., 2, 0]
                - a[..., 0, 0] * a[..., 1, 2] * a[..., 2, 1] - a[..., 0, 1] * a[..., 1, 0] * a[..., 2, 2])
    return _det(a)


def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """``SlogdetResult(sign, logabsdet)`` of square ``a``: by LU (``method`` None or 'lu'), or by a QR
    factorization (``method='qr'``, real matrices only, as in JAX): ``|det a|`` from ``r``'s diagonal and
    the sign from it and ``q``'s (``±1``) determinant."""
    (a,) = _inexact("slogdet", a)
    _square("slogdet", a)
    if method not in (None, "lu", "qr"):
        raise FtransValueError(f"slogdet: method must be None, 'lu' or 'qr', got {method!r}")
    if method == "qr":
        if jnp.iscomplexobj(a):
            raise NotImplementedError("slogdet: method='qr' is not implemented for complex inputs (as in JAX)")
        from ftrans.lax import linalg as lax_linalg

        q, r = lax_linalg.qr(a, full_matrices=True)
        d = jnp.diagonal(r, axis1=-2, axis2=-1)
        qdiag, qparity = _lu_det_parts(q)
        sign = jnp.prod(jnp.sign(d), axis=-1) * qparity * jnp.prod(jnp.sign(qdiag), axis=-1)
        return SlogdetResult(sign, jnp.sum(jnp.log(jnp.abs(d)), axis=-1))
    diag, parity = _lu_det_parts(a)
    is_zero = jnp.any(diag == 0, axis=-1)
    absd = jnp.abs(diag)
    if jnp.iscomplexobj(a):
        sign = parity * jnp.prod(diag / absd.astype(a.dtype), axis=-1)
    else:
        sign = parity * jnp.prod(jnp.sign(diag), axis=-1)
    logdet = jnp.sum(jnp.log(absd), axis=-1)
    sign = jnp.where(is_zero, jnp.zeros_like(sign), sign)
    logdet = jnp.where(is_zero, -jnp.inf, logdet)
    return SlogdetResult(sign, logdet)


def lstsq(a: Any, b: Any, rcond: float | None = None, *, numpy_resid: bool = False) -> tuple:
    """Least squares by SVD: ``(x, residuals, rank, singular values)`` for 2-D ``a``."""
    a, b = _inexact("lstsq", a, b)
    if a.ndim != 2:
        raise FtransShapeError(f"lstsq: a must be 2-D, got shape {a.shape}")
    if b.ndim not in (1, 2):
        raise FtransShapeError(f"lstsq: b must be 1-D or 2-D, got shape {b.shape}")
    if a.shape[0] != b.shape[0]:
        raise FtransShapeError(f"lstsq: leading dimensions of a {a.shape} and b {b.shape} must match")
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    m, n = a.shape
    real = jnp.finfo(a.dtype).dtype
    eps = float(jnp.finfo(a.dtype).eps)
    if rcond is None:
        rcond = eps * max(m, n)
    elif rcond < 0:
        rcond = eps
    u, s, vt = svd(a, full_matrices=False)
    if s.shape[-1] == 0:
        mask = s > 0
    else:  # zero singular values never count (a zero matrix has rank 0), as in JAX
        mask = (s > 0) & (s >= jnp.asarray(rcond, real) * s[0])
    rank = jnp.sum(mask).astype(jnp.int32)
    safe_s = jnp.where(mask, s, 1).astype(a.dtype)
    s_inv = jnp.where(mask, 1 / safe_s, 0)[:, None]
    x = jnp.matmul(M.mH(vt), s_inv * jnp.matmul(M.mH(u), b))
    if numpy_resid and (int(rank) < n or m <= n):
        resid = jnp.asarray([], dtype=real)
    else:
        resid = norm(b - jnp.matmul(a, x), axis=0) ** 2
    if vector:
        x = jnp.ravel(x)
    return x, resid, rank, s


def _pinv_svd(a: Any, rtol: Any, hermitian: bool) -> Any:
    u, s, vh = svd(jnp.conj(a), full_matrices=False, hermitian=hermitian)
    rtol = rtol.astype(s.dtype)
    rtol = jnp.reshape(rtol, rtol.shape + (1,) * (s.ndim - rtol.ndim)) if rtol.ndim else rtol
    cutoff = rtol * s[..., 0:1]
    s = jnp.where(s > cutoff, s, jnp.inf).astype(u.dtype)
    return jnp.matmul(M.mT(vh), M.mT(u) / s[..., None]).astype(a.dtype)


_pinv = custom_jvp(_pinv_svd, nondiff_argnums=(2,))


@_pinv.defjvp
def _pinv_jvp(hermitian: bool, primals: tuple, tangents: tuple) -> tuple:
    # The derivative of the pseudo-inverse along a rank-preserving direction (Golub & Pereyra, 1973):
    #   dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P,
    # with no identity matrix formed and each product taken in its cheaper order. It never divides
    # by a singular value, so repeated or dropped ones are fine (the SVD's own derivative is not).
    # The cutoff ``rtol`` gets no derivative.
    (a, rtol), (da, _) = primals, tangents
    p = _pinv(a, rtol, hermitian)
    ph, dah = M.mH(p), M.mH(da)
    x = _chain(p, ph, dah)
    y = _chain(dah, ph, p)
    return p, -_chain(p, da, p) + (x - _chain(x, a, p)) + (y - _chain(p, a, y))


def _chain(a: Any, b: Any, c: Any) -> Any:
    """``a @ b @ c`` in the cheaper order (a tall ``a`` must never make an ``m x m`` matrix)."""
    (i, j), k, r = a.shape[-2:], b.shape[-1], c.shape[-1]
    if i * j * k + i * k * r <= j * k * r + i * j * r:
        return jnp.matmul(jnp.matmul(a, b), c)
    return jnp.matmul(a, jnp.matmul(b, c))


@outputs_checked
def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse by SVD; singular values ``<= rtol * max`` are dropped.

    Its derivative is the pseudo-inverse's own (finite where singular values repeat or are dropped),
    not the SVD's.
    """
    (a,) = _inexact("pinv", a)
    _matrix("pinv", a)
    if rcond is not None:
        if rtol is not None:
            raise FtransValueError("pinv: pass rtol or its old name rcond, not both")
        rtol = rcond
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return jnp.empty(a.shape[:-2] + (n, m), a.dtype)
    if rtol is None:
        rtol = 10.0 * max(m, n) * float(jnp.finfo(a.dtype).eps)
    return _pinv(a, jnp.asarray(rtol), bool(hermitian))


def matrix_power(a: Any, n: int) -> Any:
    """``a`` to the integer power ``n`` by repeated squaring (``inv`` first for negative ``n``)."""
    a = jnp.asarray(as_operand(a))
    _square("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError:
        raise FtransTypeError(f"matrix_power: exponent must be an integer, got {type(n).__name__}") from None
    if n == 0:
        return jnp.broadcast_to(jnp.eye(a.shape[-2], dtype=a.dtype), a.shape)
    if n < 0:
        a = inv(a)
        n = -n
    z = result = None
    while n > 0:
        z = a if z is None else jnp.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else jnp.matmul(result, z)
    return result


def matrix_rank(M: Any, rtol: Any = None, *, hermitian: bool = False, tol: Any = None) -> Any:  # noqa: N803
    """The number of singular values above a threshold: ``rtol`` (or its alias ``tol``) when given, compared
    with the singular values as they are (as JAX does), else ``max(s) * max(m, n) * eps``."""
    if tol is not None:
        if rtol is not None:
            raise FtransValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    (m,) = _inexact("matrix_rank", M)
    if m.ndim < 2:
        return jnp.any(m != 0).astype(jnp.int32)
    s = svd(m, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        thresh = jnp.max(s, axis=-1) * (max(m.shape[-2:]) * float(jnp.finfo(s.dtype).eps))
    else:
        thresh = jnp.asarray(rtol, s.dtype)
    return jnp.sum(s > thresh[..., None], axis=-1)


def cond(x: Any, p: Any = None) -> Any:
    """The condition number of ``x`` in the ``p`` norm (2-norm by SVD by default)."""
    (x,) = _inexact("cond", x)
    _matrix("cond", x)
    if p is None or p == 2:
        s = svdvals(x)
        r = s[..., 0] / s[..., -1]
    elif p == -2:
        s = svdvals(x)
        r = s[..., -1] / s[..., 0]
    else:
        _square("cond", x)
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    nan_mask = jnp.isnan(r) & ~jnp.any(jnp.isnan(x), axis=(-2, -1))
    return jnp.where(nan_mask, jnp.inf, r)


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse of ``a`` seen as a matrix from its first ``ind`` axes to the rest."""
    arr = jnp.asarray(as_operand(a))
    ind = operator.index(ind)
    if ind <= 0:
        raise FtransValueError(f"tensorinv: ind must be a positive integer, got {ind}")
    contracting, batch = arr.shape[:ind], arr.shape[ind:]
    flat = (math.prod(contracting), math.prod(batch))
    if flat[0] != flat[1]:
        raise FtransShapeError(
            f"tensorinv: the product of the first ind={ind} dimensions must equal that of the others; "
            f"got shape {arr.shape}")
    return jnp.reshape(inv(jnp.reshape(arr, flat)), (*batch, *contracting))


def tensorsolve(a: Any, b: Any, axes: tuple[int, ...] | None = None) -> Any:
    """Solve ``tensordot(a, x, x.ndim) = b`` for ``x``."""
    a_arr, b_arr = jnp.asarray(as_operand(a)), jnp.asarray(as_operand(b))
    if axes is not None:  # those axes of a to the end, in the order given (NumPy's rule)
        from ftrans.core.operands import canonicalize_axes

        moved = canonicalize_axes("tensorsolve", tuple(axes), a_arr.ndim)
        a_arr = jnp.transpose(a_arr, [d for d in range(a_arr.ndim) if d not in moved] + list(moved))
    out_shape = a_arr.shape[b_arr.ndim:]
    if a_arr.shape[:b_arr.ndim] != b_arr.shape:
        raise FtransShapeError(f"tensorsolve: b.shape {b_arr.shape} must match a.shape[:b.ndim] "
                               f"{a_arr.shape[:b_arr.ndim]}")
    a_arr = jnp.reshape(a_arr, (b_arr.size, math.prod(out_shape)))
    return jnp.reshape(solve(a_arr, jnp.ravel(b_arr)), out_shape)


# ---------------------------------------------------------------- products and views


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """``arrays[0] @ arrays[1] @ ...`` (the first may be 1-D, a row; the last 1-D, a column)."""
    arrs = [jnp.asarray(as_operand(x)) for x in arrays]
    if len(arrs) < 2:
        raise FtransValueError(f"multi_dot: expects at least two arrays, got {len(arrs)}")
    for i, x in enumerate(arrs):
        ok = x.ndim == 2 or (x.ndim == 1 and i in (0, len(arrs) - 1))
        if not ok:
            raise FtransShapeError(f"multi_dot: array {i} must be 2-D (the first and last may be 1-D), got "
                                   f"shape {x.shape}")
    # One einsum over the chain, contracted in the cheapest order opt_einsum finds (as JAX does): for
    # shapes (200, 5) (5, 100) (100, 10) that is x @ (y @ z), 20x fewer flops than left to right.
    letters = [chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26) for i in range(len(arrs) + 1)]
    terms = [letters[i] + letters[i + 1] for i in range(len(arrs))]
    if arrs[0].ndim == 1:
        terms[0] = terms[0][1:]
    if arrs[-1].ndim == 1:
        terms[-1] = terms[-1][:1]
    out_term = (terms[0][0] if arrs[0].ndim == 2 else "") + (terms[-1][-1] if arrs[-1].ndim == 2 else "")
    return jnp.einsum(",".join(terms) + "->" + out_term, *arrs, optimize="auto", precision=precision)


def matmul(x1: Any, x2: Any, /, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    return jnp.matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    return jnp.tensordot(x1, x2, axes=axes, precision=precision, preferred_element_type=preferred_element_type)


def outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two 1-D arrays."""
    a, b = jnp.asarray(as_operand(x1)), jnp.asarray(as_operand(x2))
    if a.ndim != 1 or b.ndim != 1:
        raise FtransShapeError(f"outer: inputs must be 1-D, got shapes {a.shape} and {b.shape}")
    return jnp.outer(a, b)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of 3-vectors along ``axis``."""
    a, b = jnp.asarray(as_operand(x1)), jnp.asarray(as_operand(x2))
    if a.ndim == 0 or b.ndim == 0 or a.shape[axis] != 3 or b.shape[axis] != 3:
        raise FtransShapeError(f"cross: both inputs must have size 3 along axis {axis}, got shapes {a.shape} "
                               f"and {b.shape}")
    return jnp.cross(a, b, axis=axis)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sum of the ``offset`` diagonal of the last two axes."""
    a = jnp.asarray(as_operand(x))
    _matrix("trace", a)
    return jnp.trace(a, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """The ``offset`` diagonal of the last two axes."""
    a = jnp.asarray(as_operand(x))
    _matrix("diagonal", a)
    return jnp.diagonal(a, offset=offset, axis1=-2, axis2=-1)


def matrix_transpose(x: Any, /) -> Any:
    """``x`` with its last two axes swapped."""
    a = jnp.asarray(as_operand(x))
    _matrix("matrix_transpose", a)
    return jnp.swapaxes(a, -1, -2)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """``sum(conj(x1) * x2, axis)`` with broadcasting."""
    return jnp.vecdot(x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type)


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:  # noqa: A002
    """The vector ``ord``-norm over ``axis`` (all axes, flattened, by default)."""
    a = jnp.asarray(as_operand(x))
    if axis is None:
        out = norm(jnp.ravel(a), ord=ord)
        return jnp.reshape(out, (1,) * a.ndim) if keepdims else out
    if isinstance(axis, (tuple, list)) and len(axis) != 1:
        # A vector norm over several axes (or none): those axes flattened into one, as NumPy's vector_norm.
        from ftrans.core.operands import canonicalize_axes

        axes = canonicalize_axes("vector_norm", tuple(axis), a.ndim)
        rest = [d for d in range(a.ndim) if d not in axes]
        flat = jnp.reshape(jnp.transpose(a, rest + list(axes)),
                           tuple(a.shape[d] for d in rest) + (math.prod(a.shape[d] for d in axes),))
        out = norm(flat, ord=ord, axis=-1)
        if keepdims:
            out = jnp.reshape(out, tuple(1 if d in axes else a.shape[d] for d in range(a.ndim)))
        return out
    return norm(a, ord=ord, axis=axis, keepdims=keepdims)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    """The matrix ``ord``-norm over the last two axes."""
    a = jnp.asarray(as_operand(x))
    _matrix("matrix_norm", a)
    return norm(a, ord=ord, axis=(-2, -1), keepdims=keepdims)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """``jnp.linalg.norm``: vector norms over one axis, matrix norms over two (2, -2, 'nuc' by SVD)."""
    check_arraylike("norm", x)
    a = as_operand(x)
    if a.dtype.kind in "iub":
        a = jnp.astype(a, jnp.float32 if not jnp.dtype(jnp.result_type(1.0)).itemsize == 8 else jnp.float64)
    nd = a.ndim
    if axis is None:
        axes = tuple(range(nd))
        if ord is not None and nd not in (1, 2):
            raise FtransValueError(f"norm: ord={ord!r} needs a 1-D or 2-D input or an explicit axis; got {nd}-D")
    else:
        axes = canonicalize_axes("norm", axis, nd)
    absx = jnp.abs(a)
    if len(axes) == 1 or (ord is None and axis is None):
        ax = axes if len(axes) != 1 else axes[0]
        if ord is None or ord == 2:
            return jnp.sqrt(jnp.sum(jnp.real(a * jnp.conj(a)) if a.dtype.kind == "c" else a * a,
                                    axis=ax, keepdims=keepdims))
        if ord == jnp.inf:
            # initial=0 as in JAX: at an all-zero vector the derivative is shared with the initial value.
            return jnp.max(absx, axis=ax, keepdims=keepdims, initial=0)
        if ord == -jnp.inf:
            return jnp.min(absx, axis=ax, keepdims=keepdims)
        if ord == 0:
            return jnp.sum(jnp.astype(absx != 0, absx.dtype), axis=ax, keepdims=keepdims)
        if ord == 1:
            return jnp.sum(absx, axis=ax, keepdims=keepdims)
        if isinstance(ord, str):
            raise FtransValueError(f"norm: invalid ord {ord!r} for a vector norm")
        return jnp.power(jnp.sum(jnp.power(absx, ord), axis=ax, keepdims=keepdims), 1.0 / ord)
    if len(axes) != 2:
        raise FtransValueError(f"norm: axis must name 1 or 2 axes, got {axis}")
    r, c = axes
    if ord in (None, "fro", "f"):
        out = jnp.sqrt(jnp.sum(absx * absx, axis=axes, keepdims=keepdims))
        return out
    if ord in (1, -1):
        red = jnp.max if ord == 1 else jnp.min
        col = jnp.sum(absx, axis=r, keepdims=True)
        out = red(col, axis=c, keepdims=True, **({"initial": 0} if ord == 1 else {}))
    elif ord in (jnp.inf, -jnp.inf):
        red = jnp.max if ord == jnp.inf else jnp.min
        row = jnp.sum(absx, axis=c, keepdims=True)
        out = red(row, axis=r, keepdims=True, **({"initial": 0} if ord == jnp.inf else {}))
    elif ord in (2, -2, "nuc"):
        moved = jnp.moveaxis(a, (r, c), (-2, -1))
        sv = svdvals(moved)
        if ord == "nuc":
            out = jnp.sum(sv, axis=-1)
        else:  # an empty matrix's 2-norm is 0, as in JAX; its -2-norm has no value
            out = jnp.max(sv, axis=-1, initial=0) if ord == 2 else jnp.min(sv, axis=-1)
        if keepdims:
            out = jnp.expand_dims(out, axes)
        return out
    else:
        raise FtransValueError(f"norm: invalid ord {ord!r} for a matrix norm")
    return out if keepdims else jnp.squeeze(out, axis=axes)


# Eager calls run from a program traced once per signature (``core/eager_programs.py``): each of these is
# several primitives and argument checks, which op by op cost two to five times the program's time.
from ftrans.core import eager_programs as _eager_programs  # noqa: E402

_eager_programs.install(globals(), (
    "cholesky", "cond", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq", "matmul",
    "matrix_norm", "matrix_rank", "matrix_transpose", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
))
