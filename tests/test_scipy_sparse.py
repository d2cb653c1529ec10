"""``ftrans.scipy.sparse.linalg`` (``cg``, ``bicgstab``, ``gmres``) against ``jax.scipy.sparse.linalg``: matrix,
function and ``@`` operators, preconditioners, ``maxiter``/``tol``, pytree right-hand sides, weak types,
``jit``, ``vmap`` and derivatives (implicit, through ``custom_linear_solve``); against SciPy in 64-bit; errors."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import jax.scipy.sparse.linalg as jsp
import numpy as np
import pytest
import scipy.sparse.linalg

import ftrans
import ftrans.numpy as fjnp
import ftrans.scipy.sparse.linalg as fsp
from ftrans.errors import FtransTypeError, FtransValueError
from tests.thorough import THOROUGH

SOLVERS = ["cg", "bicgstab", "gmres"]


def system(n, dtype, seed=0, spd=True):
    rng = np.random.RandomState(seed)
    a = rng.randn(n, n)
    b = rng.randn(n)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.randn(n, n)
        b = b + 1j * rng.randn(n)
    if spd:
        a = a @ a.conj().T + n * np.eye(n)
    else:
        a = a + n * np.eye(n)
    return a.astype(dtype), b.astype(dtype)


def check(a, b, tol):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        assert np.asarray(x).dtype == np.asarray(y).dtype and np.shape(x) == np.shape(y)
        np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=tol, atol=tol)


def kwargs_for(solver):
    if solver == "gmres":
        return [{"solve_method": "batched"}, {"solve_method": "incremental"},
                {"solve_method": "incremental", "restart": 1, "maxiter": 2}, {"restart": 2, "maxiter": 1}]
    return [{}, {"maxiter": 1}, {"maxiter": 3}, {"tol": 1e-2}]


# Every solver with every dtype and preconditioner; the sizes take turns, so each meets every dtype and every
# preconditioner of every solver.  The keyword sets take turns too (every other one, from the first or the
# second), so that each half meets both sizes, both dtypes and every preconditioner of every solver; the
# thorough run solves with all four keyword sets in every case.
@pytest.mark.parametrize("solver,dtype,n,precond,half", [
    (solver, dtype, [2, 5][(i + j) % 2], precond, (i + [0, 0, 1][j]) % 2) for solver in SOLVERS
    for i, dtype in enumerate([np.float32, np.complex64]) for j, precond in enumerate([None, "inverse", "function"])])
def test_matches_jax(solver, dtype, n, precond, half):
    kwargs = kwargs_for(solver) if THOROUGH else kwargs_for(solver)[half::2]
    a, b = system(n, dtype, spd=solver == "cg")
    m_mat = np.linalg.inv(a + 0.3 * np.eye(n)).astype(dtype)
    if precond == "function":
        mj, mf = (lambda v: jjnp.dot(m_mat, v)), (lambda v: fjnp.dot(m_mat, v))
    else:
        mj = mf = None if precond is None else m_mat
    # one jax program for all the keyword sets (eager jax would compile each solve separately)
    want = jax.jit(lambda a, b: [getattr(jsp, solver)(a, b, M=mj, **kw) for kw in kwargs])(a, b)
    for kw, (xa, ia) in zip(kwargs, want, strict=True):
        xb, ib = getattr(fsp, solver)(a, b, M=mf, **kw)
        check(xa, xb, 1e-4)
        if solver == "gmres":
            check(ia, ib, 0)
        else:
            assert ia is None and ib is None


@pytest.mark.parametrize("solver", SOLVERS)
def test_under_jit_and_vmap_match_jax(solver):
    a, b = system(4, np.float32, spd=True)
    bs = np.stack([b, 2 * b + 1, -b])
    xa, va = jax.jit(lambda a, b, bs: (getattr(jsp, solver)(a, b)[0],
                                       jax.vmap(lambda b: getattr(jsp, solver)(a, b, maxiter=2)[0])(bs)))(a, b, bs)
    xb = ftrans.jit(lambda a, b: getattr(fsp, solver)(a, b)[0])(a, b)
    check(xa, xb, 1e-5)
    vb = ftrans.vmap(lambda b: getattr(fsp, solver)(a, b, maxiter=2)[0])(bs)
    check(va, vb, 1e-4)


@pytest.mark.parametrize("solver", SOLVERS)
def test_derivatives_match_jax(solver):
    a, b = system(3, np.float32, spd=True)

    def loss(mod, sol):
        return lambda a, b: mod.sum(getattr(sol, solver)(lambda v: mod.dot(a, v), b)[0] ** 2)

    ga, ta = jax.jit(lambda a, b: (jax.grad(loss(jjnp, jsp), argnums=(0, 1))(a, b),
                                   jax.jvp(lambda b: getattr(jsp, solver)(a, b)[0], (b,), (b[::-1],))))(a, b)
    gb = ftrans.grad(loss(fjnp, fsp), argnums=(0, 1))(a, b)
    check(ga, gb, 1e-3)
    tb = ftrans.jvp(lambda b: getattr(fsp, solver)(a, b)[0], (b,), (b[::-1].copy(),))
    check(ta, tb, 1e-4)


def test_jacrev_of_pytree_solve():
    # JAX's issue 14249: batching the transposed solve of a tuple right-hand side.
    rng = np.random.RandomState(0)
    m = rng.randn(5, 5).astype(np.float32)
    a = m @ m.T
    b = rng.randn(5).astype(np.float32)
    ja = jax.jit(jax.jacrev(lambda b: jsp.cg(lambda x: (jjnp.dot(a, x[0]), jjnp.dot(a, x[1])), (b, b))[0]))(b)
    jb = ftrans.jacrev(lambda b: fsp.cg(lambda x: (fjnp.dot(a, x[0]), fjnp.dot(a, x[1])), (b, b))[0])(b)
    check(ja, jb, 1e-3)


class Operator:
    def __init__(self, a):
        self.a = a
        self.shape = a.shape

    def __matmul__(self, x):
        return self.a @ x


@pytest.mark.parametrize("solver", SOLVERS)
def test_operator_forms_pytrees_and_weak_types(solver):
    jfun, ffun = getattr(jsp, solver), getattr(fsp, solver)
    # a pytree right-hand side with Python scalars: the solution keeps the tree and the weak type
    mv_j = lambda x: {"a": x["a"] + 0.5 * x["b"], "b": 0.5 * x["a"] + x["b"]}  # noqa: E731
    b = np.arange(9.0, dtype=np.float32).reshape(3, 3)
    a, rhs = system(4, np.float32)
    # the three jax solves below as one jax program
    want = jax.jit(lambda tree, b, a, rhs: (jfun(mv_j, tree)[0], jfun(Operator(2 * jjnp.eye(3)), b)[0],
                                            jfun(a, rhs, x0=rhs, maxiter=1)[0]))({"a": 1.0, "b": -4.0}, b, a, rhs)
    xb, _ = ffun(mv_j, {"a": 1.0, "b": -4.0})
    assert set(xb) == {"a", "b"}
    check(want[0], xb, 1e-5)
    assert xb["a"].weak_type and xb["b"].weak_type
    assert ffun(lambda v: v, 1.0)[0].weak_type
    # an object with @, and a matrix right-hand side (the operator acts on its columns)
    xb, _ = ffun(Operator(2 * fjnp.eye(3)), b)
    check(want[1], xb, 1e-5)
    np.testing.assert_allclose(np.asarray(xb), b / 2, rtol=1e-5)
    # an explicit starting guess
    check(want[2], ffun(a, rhs, x0=rhs, maxiter=1)[0], 1e-4)


@pytest.mark.parametrize("solver,kw", [("cg", {"maxiter": 1}), ("cg", {"maxiter": 3}), ("bicgstab", {"maxiter": 1}),
                                       ("bicgstab", {"maxiter": 2}), ("gmres", {"restart": 1, "maxiter": 2}),
                                       ("gmres", {"restart": 2, "maxiter": 1})])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_against_scipy_x64(solver, kw, dtype):
    a, b = system(5, dtype, seed=3, spd=solver == "cg")
    m = np.linalg.inv(a + 0.5 * np.eye(5))
    with ftrans.enable_x64(True):
        for precond in [None, m]:
            x, _ = getattr(fsp, solver)(a, b, M=precond, atol=0.0, **kw)
            expected, _ = getattr(scipy.sparse.linalg, solver)(a, b, M=precond, atol=0.0, **kw)
            np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-9, atol=1e-9)
        x, _ = getattr(fsp, solver)(a, b, atol=1e-12, tol=1e-12)
        np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-8, atol=1e-8)


def test_gmres_reports_failure():
    x, info = fsp.gmres(np.zeros((2, 2), np.float32), np.ones(2, np.float32), maxiter=1)
    xa, ia = jax.jit(lambda a, b: jsp.gmres(a, b, maxiter=1))(np.zeros((2, 2), np.float32), np.ones(2, np.float32))
    assert int(info) == int(ia)
    check(xa, x, 1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_errors(solver):
    f = getattr(fsp, solver)
    b = fjnp.zeros((2,))
    with pytest.raises(FtransValueError, match="x0 and b must have matching tree structure"):
        f(lambda x: x, {"x": b}, {"y": b})
    with pytest.raises(FtransValueError, match="x0 and b must have matching shapes"):
        f(lambda x: x, b, b[:, None])
    with pytest.raises(FtransValueError, match="must be a square matrix"):
        f(fjnp.zeros((3, 2)), fjnp.zeros((2,)))
    with pytest.raises(FtransValueError, match="must be a square matrix"):
        f(Operator(np.zeros((3, 2))), fjnp.zeros((2,)))
    with pytest.raises(FtransTypeError, match="linear operator must be either a function or ndarray"):
        f([[1]], fjnp.zeros((1,)))
    with pytest.raises(FtransTypeError, match="linear operator must be either a function or ndarray"):
        f(lambda x: x, b, M="identity")


def test_gmres_solve_method_error():
    with pytest.raises(FtransValueError, match="invalid solve_method 'qr'"):
        fsp.gmres(lambda x: x, fjnp.ones(2), solve_method="qr")
