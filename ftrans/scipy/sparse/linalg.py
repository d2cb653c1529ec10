"""``ftrans.scipy.sparse.linalg``: Krylov solvers for ``A x = b`` (JAX's ``scipy.sparse.linalg``).

``A`` (and the preconditioner ``M``) is a function computing the matrix-vector
product, a square matrix, or any object with ``@``; ``b`` and the solution are
arrays or pytrees of arrays.  Each solver is a ``lax.while_loop`` wrapped in
``lax.custom_linear_solve``, so it works under ``jit`` and ``vmap`` and is
differentiated implicitly (the derivative of the solution is another solve,
not a derivative through the iterations).  Tolerances follow SciPy's
non-legacy rule, ``norm(residual) <= max(tol * norm(b), atol)``; the second
result (``info``) is None for ``cg``/``bicgstab`` and a 0/-1 failure flag for
``gmres``, as in JAX.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.core import dtypes
from ftrans.core.array import is_foreign_array
from ftrans.core.operands import as_operand, dtype_weak, is_array
from ftrans.core.pytrees import tree_leaves, tree_map, tree_structure
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._creation import retype
from ftrans.scipy import linalg as sp_linalg

__all__ = ["bicgstab", "cg", "gmres"]

_HIGHEST = lax.Precision.HIGHEST

# ----------------------------------------------------------------------------
# vectors as pytrees


def _inner_real(x: Any, y: Any) -> Any:
    """``Re(x^H y)`` leaf by leaf, ignoring the imaginary cross terms (the quadratic forms the
    solvers take are real for Hermitian operators)."""
    out = jnp.vdot(x.real, y.real, precision=_HIGHEST)
    if jnp.iscomplexobj(x) or jnp.iscomplexobj(y):
        out = out + jnp.vdot(x.imag, y.imag, precision=_HIGHEST)
    return out


def _tree_inner_real(x: Any, y: Any) -> Any:
    return sum(tree_leaves(tree_map(_inner_real, x, y)))


def _tree_inner(x: Any, y: Any) -> Any:
    return sum(tree_leaves(tree_map(partial(jnp.vdot, precision=_HIGHEST), x, y)))


def _tree_norm(x: Any) -> Any:
    return jnp.sqrt(sum(_inner_real(v, v) for v in tree_leaves(x)))


def _scale(c: Any, x: Any) -> Any:
    return tree_map(lambda v: c * v, x)


def _plus(x: Any, y: Any) -> Any:
    return tree_map(operator.add, x, y)


def _minus(x: Any, y: Any) -> Any:
    return tree_map(operator.sub, x, y)


def _tree_dtype(x: Any) -> tuple[np.dtype, bool]:
    """The promoted dtype of a pytree's leaves, and whether it is weak."""
    return dtypes.promote(tuple(dtype_weak(v) for v in tree_leaves(x)))


def _identity(x: Any) -> Any:
    return x


def _as_operator(op: Any, what: str) -> Callable:
    """A matrix-vector product function for ``A`` or ``M``."""
    if callable(op):
        return op
    if is_foreign_array(op) and not is_array(op):
        op = as_operand(op)
    if isinstance(op, np.ndarray) or is_array(op):
        if op.ndim != 2 or op.shape[0] != op.shape[1]:
            raise FtransValueError(f"{what}: linear operator must be a square matrix, but has shape: "
                                   f"{tuple(op.shape)}")
        return partial(jnp.dot, op, precision=_HIGHEST)
    if hasattr(op, "__matmul__"):
        shape = getattr(op, "shape", None)
        if shape is not None and (len(shape) != 2 or shape[0] != shape[1]):
            raise FtransValueError(f"{what}: linear operator must be a square matrix, but has shape: "
                                   f"{tuple(shape)}")
        return partial(operator.matmul, op)
    raise FtransTypeError(f"{what}: linear operator must be either a function or ndarray (or have __matmul__), "
                          f"got {type(op).__name__}: {op!r}")


def _prepare(name: str, A: Any, b: Any, x0: Any, M: Any) -> tuple[Callable, Any, Any, Callable]:
    if x0 is None:
        x0 = tree_map(jnp.zeros_like, b)
    b, x0 = tree_map(as_operand, (b, x0))
    A = _as_operator(A, name)
    M = _identity if M is None else _as_operator(M, name)
    if tree_structure(x0) != tree_structure(b):
        raise FtransValueError(f"{name}: x0 and b must have matching tree structure: "
                               f"{tree_structure(x0)} vs {tree_structure(b)}")
    x_shapes = [tuple(v.shape) for v in tree_leaves(x0)]
    b_shapes = [tuple(v.shape) for v in tree_leaves(b)]
    if x_shapes != b_shapes:
        raise FtransValueError(f"{name}: arrays in x0 and b must have matching shapes: {x_shapes} vs {b_shapes}")
    return A, b, x0, M


def _size(b: Any) -> int:
    return sum(int(np.prod(v.shape, dtype=int)) for v in tree_leaves(b))


def _squared_tolerance(b: Any, tol: Any, atol: Any) -> Any:
    return jnp.maximum(jnp.square(tol) * _tree_inner_real(b, b), jnp.square(atol))


# ----------------------------------------------------------------------------
# conjugate gradients and BiCGSTAB


def _cg_iterations(A: Callable, b: Any, x0: Any, *, maxiter: int, tol: Any, atol: Any, M: Callable) -> Any:
    """Preconditioned conjugate gradients; stops when ``|r|^2 <= max(tol^2 |b|^2, atol^2)``."""
    bound = _squared_tolerance(b, tol, atol)
    r0 = _minus(b, A(x0))
    z0 = M(r0)
    dtype = jnp.result_type(*tree_leaves(z0))
    rz0 = _tree_inner_real(r0, z0).astype(dtype)

    def keep_going(state):
        _, r, rz, _, k = state
        # Without a preconditioner r.z is r.r already.
        rr = rz.real if M is _identity else _tree_inner_real(r, r)
        return (rr > bound) & (k < maxiter)

    def step(state):
        x, r, rz, p, k = state
        Ap = A(p)
        alpha = rz / _tree_inner_real(p, Ap).astype(dtype)
        x = _plus(x, _scale(alpha, p))
        r = _minus(r, _scale(alpha, Ap))
        z = M(r)
        rz_new = _tree_inner_real(r, z).astype(dtype)
        p = _plus(z, _scale(rz_new / rz, p))
        return x, r, rz_new, p, k + 1

    x, *_ = lax.while_loop(keep_going, step, (x0, r0, rz0, z0, 0))
    return x


def _bicgstab_iterations(A: Callable, b: Any, x0: Any, *, maxiter: int, tol: Any, atol: Any,
                         M: Callable) -> Any:
    """Preconditioned BiCGSTAB (van der Vorst); stops on convergence, ``maxiter``, or a breakdown
    (``rho == 0`` sets the counter to -10, ``alpha == 0`` or ``omega == 0`` to -11)."""
    bound = _squared_tolerance(b, tol, atol)
    r0 = _minus(b, A(x0))
    d, w = _tree_dtype(b)
    one = retype(jnp.ones((), d), d, w)

    def keep_going(state):
        r, k = state[1], state[-1]
        return (_tree_inner_real(r, r) > bound) & (k < maxiter) & (k >= 0)

    def step(state):
        x, r, shadow, alpha, omega, rho, p, v, k = state
        rho_new = _tree_inner(shadow, r)
        beta = rho_new / rho * alpha / omega
        p = _plus(r, _scale(beta, _minus(p, _scale(omega, v))))
        p_pre = M(p)
        v = A(p_pre)
        alpha = rho_new / _tree_inner(shadow, v)
        s = _minus(r, _scale(alpha, v))
        converged_half = _tree_inner_real(s, s) < bound
        s_pre = M(s)
        t = A(s_pre)
        omega = _tree_inner(t, s) / _tree_inner(t, t)
        half = _plus(x, _scale(alpha, p_pre))
        full = _plus(x, _plus(_scale(alpha, p_pre), _scale(omega, s_pre)))
        x = tree_map(partial(jnp.where, converged_half), half, full)
        r = tree_map(partial(jnp.where, converged_half), s, _minus(s, _scale(omega, t)))
        k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)
        k = jnp.where(rho_new == 0, -10, k)
        return x, r, shadow, alpha, omega, rho_new, p, v, k

    x, *_ = lax.while_loop(keep_going, step, (x0, r0, r0, one, one, one, r0, r0, 0))
    return x


def _krylov_solve(name: str, iterations: Callable, A: Any, b: Any, x0: Any, tol: Any, atol: Any,
                  maxiter: Any, M: Any, hermitian_if_real: bool) -> tuple[Any, None]:
    A, b, x0, M = _prepare(name, A, b, x0, M)
    if maxiter is None:
        maxiter = 10 * _size(b)  # SciPy's default
    solve = partial(iterations, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    # A real operator that CG may be given is symmetric positive definite: its transpose solve is itself.
    symmetric = hermitian_if_real and all(not jnp.iscomplexobj(v) for v in tree_leaves(b))
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=symmetric)
    return x, None


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
       M: Any = None) -> tuple[Any, None]:
    """Solve ``A x = b`` by conjugate gradients, for a Hermitian positive definite ``A``, as JAX's
    ``scipy.sparse.linalg.cg``.

    Args:
        A: a function ``x -> A x`` (returning the structure and shapes of ``x``), a square matrix,
            or an object with ``@``.
        b: the right-hand side: an array or a pytree of arrays.
        x0: the starting guess, structured like ``b`` (default zeros).
        tol: the relative tolerance: stop when ``norm(r) <= max(tol * norm(b), atol)``.
        atol: the absolute tolerance.
        maxiter: the maximum number of iterations (default ``10 * size(b)``).
        M: a preconditioner approximating the inverse of ``A`` (function, matrix or ``@`` object).

    Returns:
        ``(x, None)``: the solution, structured like ``b``, and a placeholder for convergence
        information.

    The derivative is an implicit one: another CG solve with the same operator.
    """
    return _krylov_solve("cg", _cg_iterations, A, b, x0, tol, atol, maxiter, M, True)


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
             M: Any = None) -> tuple[Any, None]:
    """Solve ``A x = b`` for a general ``A`` by the stabilised bi-conjugate gradient method, as JAX's
    ``scipy.sparse.linalg.bicgstab``.

    Args:
        A: a function ``x -> A x``, a square matrix, or an object with ``@``.
        b: the right-hand side: an array or a pytree of arrays.
        x0: the starting guess, structured like ``b`` (default zeros).
        tol: the relative tolerance: stop when ``norm(r) <= max(tol * norm(b), atol)``.
        atol: the absolute tolerance.
        maxiter: the maximum number of iterations (default ``10 * size(b)``).
        M: a preconditioner approximating the inverse of ``A``.

    Returns:
        ``(x, None)``: the solution, structured like ``b``, and a placeholder for convergence
        information.
    """
    return _krylov_solve("bicgstab", _bicgstab_iterations, A, b, x0, tol, atol, maxiter, M, False)


# ----------------------------------------------------------------------------
# GMRES


def _normalize(x: Any, thresh: Any = None) -> tuple[Any, Any]:
    """``x / norm(x)`` and ``norm(x)``, both zero when the norm is at most ``thresh`` (default the
    dtype's machine epsilon)."""
    norm = _tree_norm(x)
    d, w = _tree_dtype(x)
    if thresh is None:
        thresh = jnp.finfo(norm.dtype).eps
    thresh = jnp.asarray(thresh).astype(norm.dtype)
    big = norm > thresh
    divisor = retype(norm.astype(d), d, w)
    unit = tree_map(lambda v: jnp.where(big, v / divisor, 0.0), x)
    return unit, jnp.where(big, norm, 0.0)


def _overlaps(Q: Any, v: Any) -> Any:
    """``Q^H v`` summed over the leaves (each leaf of ``Q`` has the basis as its last axis)."""
    parts = tree_map(lambda X, y: jnp.einsum("...n,...->n", X.conj(), y, precision=_HIGHEST), Q, v)
    return sum(tree_leaves(parts))


def _orthogonalize(Q: Any, v: Any) -> tuple[Any, Any]:
    """``v`` minus its projection on the columns of ``Q`` (one classical Gram-Schmidt pass), and the
    overlaps.  JAX's solver asks for up to two passes, but its test for a second one never passes
    with that limit, so one pass is what both compute."""
    h = _overlaps(Q, v)
    v = _minus(v, tree_map(lambda X: jnp.dot(X, h, precision=_HIGHEST), Q))
    return v, h


def _arnoldi_step(k: Any, A: Callable, M: Callable, V: Any, H: Any) -> tuple[Any, Any, Any]:
    """Extend the Krylov basis ``V`` by the orthonormalised ``M A V[:, k]`` (column ``k + 1``) and put
    its overlaps in row ``k`` of ``H``; ``breakdown`` when the new vector vanishes (an invariant
    subspace was found)."""
    d, _ = _tree_dtype(V)
    eps = jnp.finfo(d).eps
    v = M(A(tree_map(lambda X: X[..., k], V)))
    _, norm0 = _normalize(v)
    v, h = _orthogonalize(V, v)
    unit, norm1 = _normalize(v, thresh=eps * norm0)
    V = tree_map(lambda X, u: X.at[..., k + 1].set(u), V, unit)
    h = h.at[k + 1].set(norm1.astype(d))
    return V, H.at[k, :].set(h), norm1 == 0.0


def _rotate(vec: Any, i: Any, cs: Any, sn: Any) -> Any:
    a, b = vec[i], vec[i + 1]
    return vec.at[i].set(cs.conj() * a - sn.conj() * b).at[i + 1].set(sn * a + cs * b)


def _givens(a: Any, b: Any) -> tuple[Any, Any]:
    """``(cs, sn)`` of the rotation that zeroes ``b`` in ``(a, b)``."""
    b_zero = abs(b) == 0
    a_smaller = abs(a) < abs(b)
    t = -jnp.where(a_smaller, a, b) / jnp.where(a_smaller, b, a)
    r = lax.rsqrt(1 + abs(t) ** 2).astype(t.dtype)
    cs = jnp.where(b_zero, 1, jnp.where(a_smaller, r * t, r))
    sn = jnp.where(b_zero, 0, jnp.where(a_smaller, r, r * t))
    return cs, sn


def _rotate_row(row: Any, rotations: Any, k: Any) -> tuple[Any, Any]:
    """Apply the ``k`` stored rotations to ``row``, then add (and apply) one zeroing ``row[k + 1]``."""
    row = lax.fori_loop(0, k, lambda i, r: _rotate(r, i, rotations[i, 0], rotations[i, 1]), row)
    cs, sn = _givens(row[k], row[k + 1])
    rotations = rotations.at[k, 0].set(cs).at[k, 1].set(sn)
    return _rotate(row, k, cs, sn), rotations


def _initial_basis(unit_residual: Any, restart: int) -> Any:
    return tree_map(lambda v: jnp.pad(v[..., None], ((0, 0),) * v.ndim + ((0, restart),)), unit_residual)


def _finish_cycle(A: Callable, M: Callable, b: Any, x0: Any, V: Any, y: Any) -> tuple[Any, Any, Any]:
    x = _plus(x0, tree_map(lambda X: jnp.dot(X[..., :-1], y, precision=_HIGHEST), V))
    unit, norm = _normalize(M(_minus(b, A(x))))
    return x, unit, norm


def _cycle_incremental(A: Callable, b: Any, x0: Any, unit_residual: Any, residual_norm: Any, ptol: Any,
                       restart: int, M: Callable) -> tuple[Any, Any, Any]:
    """One GMRES cycle that keeps the QR factors of the Hessenberg matrix up to date with Givens
    rotations, so it can stop as soon as the (free) residual estimate reaches ``ptol``."""
    V = _initial_basis(unit_residual, restart)
    d = jnp.result_type(*tree_leaves(b))
    R = jnp.eye(restart, restart + 1, dtype=d)  # the identity keeps an early-stopped R invertible
    rotations = jnp.zeros((restart, 2), d)
    rhs = jnp.zeros(restart + 1, d).at[0].set(residual_norm.astype(d))

    def keep_going(state):
        k, err = state[0], state[1]
        return (k < restart) & (err > ptol)

    def step(state):
        k, _, V, R, rhs, rotations = state
        V, H, _ = _arnoldi_step(k, A, M, V, R)
        row, rotations = _rotate_row(H[k, :], rotations, k)
        R = R.at[k, :].set(row)
        rhs = _rotate(rhs, k, rotations[k, 0], rotations[k, 1])
        return k + 1, abs(rhs[k + 1]), V, R, rhs, rotations

    _, _, V, R, rhs, _ = lax.while_loop(keep_going, step, (0, residual_norm, V, R, rhs, rotations))
    y = sp_linalg.solve_triangular(R[:, :-1].T, rhs[:-1])
    return _finish_cycle(A, M, b, x0, V, y)


def _cycle_batched(A: Callable, b: Any, x0: Any, unit_residual: Any, residual_norm: Any, ptol: Any,
                   restart: int, M: Callable) -> tuple[Any, Any, Any]:
    """One GMRES cycle that builds the whole Krylov basis (unless it breaks down) and then solves the
    small least-squares problem through its normal equations."""
    del ptol
    V = _initial_basis(unit_residual, restart)
    d, w = _tree_dtype(b)
    H = retype(jnp.eye(restart, restart + 1, dtype=d), d, w)

    def keep_going(state):
        return (state[3] < restart) & ~state[2]

    def step(state):
        V, H, _, k = state
        V, H, breakdown = _arnoldi_step(k, A, M, V, H)
        return V, H, breakdown, k + 1

    V, H, _, _ = lax.while_loop(keep_going, step, (V, H, False, 0))
    rhs = jnp.zeros_like(H, shape=(restart + 1,)).at[0].set(residual_norm.astype(d))
    Ht = H.T
    y = sp_linalg.solve(jnp.dot(Ht.T.conj(), Ht, precision=_HIGHEST),
                        jnp.dot(Ht.T.conj(), rhs, precision=_HIGHEST), assume_a="pos")
    return _finish_cycle(A, M, b, x0, V, y)


def _gmres_iterations(A: Callable, b: Any, x0: Any, atol: Any, ptol: Any, restart: int, maxiter: int,
                      M: Callable, cycle: Callable) -> Any:
    unit, norm = _normalize(M(_minus(b, A(x0))))

    def keep_going(state):
        return (state[1] < maxiter) & (state[3] > atol)

    def step(state):
        x, k, unit, norm = state
        x, unit, norm = cycle(A, b, x, unit, norm, ptol, restart, M)
        return x, k + 1, unit, norm

    x, *_ = lax.while_loop(keep_going, step, (x0, 0, unit, norm))
    return x


def gmres(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, restart: int = 20,
          maxiter: int | None = None, M: Any = None, solve_method: str = "batched") -> tuple[Any, Any]:
    """Solve ``A x = b`` for a general ``A`` by restarted GMRES, as JAX's ``scipy.sparse.linalg.gmres``.

    Args:
        A: a function ``x -> A x``, a square matrix, or an object with ``@``.
        b: the right-hand side: an array or a pytree of arrays.
        x0: the starting guess, structured like ``b`` (default zeros).
        tol: the relative tolerance: stop when ``norm(r) <= max(tol * norm(b), atol)``.
        atol: the absolute tolerance.
        restart: the dimension of the Krylov space built in each cycle (at most ``size(b)``).
        maxiter: the maximum number of cycles (default ``10 * size(b)``).
        M: a (left) preconditioner approximating the inverse of ``A``.
        solve_method: ``"batched"`` (build the whole space, then solve the small least-squares
            problem; fewer, larger operations) or ``"incremental"`` (Givens rotations as the space
            grows, which can stop early within a cycle).

    Returns:
        ``(x, info)``: the solution, structured like ``b``, and ``-1`` where it is not finite, else ``0``.
    """
    if solve_method == "incremental":
        cycle = _cycle_incremental
    elif solve_method == "batched":
        cycle = _cycle_batched
    else:
        raise FtransValueError(f"gmres: invalid solve_method {solve_method!r}, must be either 'incremental' "
                               "or 'batched'")
    A, b, x0, M = _prepare("gmres", A, b, x0, M)
    size = _size(b)
    if maxiter is None:
        maxiter = 10 * size  # SciPy's default
    restart = min(operator.index(restart), size)
    b_norm = _tree_norm(b)
    atol = jnp.maximum(tol * b_norm, atol)
    ptol = _tree_norm(M(b)) * jnp.minimum(1.0, atol / b_norm)

    def solve(A: Callable, b: Any) -> Any:
        return _gmres_iterations(A, b, x0, atol, ptol, restart, maxiter, M, cycle)

    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    info = jnp.where(jnp.isnan(_tree_norm(x)), -1, 0)
    return x, info
