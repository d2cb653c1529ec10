"""``lax.custom_linear_solve`` and ``lax.custom_root`` against jax: values, JVPs, gradients, vmap, jit."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.core.ir import typecheck

F = (ftrans, fjnp, flax)
J = (jax, jjnp, jlax)


def close(a, b, tol=1e-4):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


rng = np.random.RandomState(0)
A = (rng.randn(3, 3) + 4 * np.eye(3)).astype(np.float32)
S = (A @ A.T).astype(np.float32)
B = rng.randn(3).astype(np.float32)


def linear(lib, symmetric=False, with_transpose=True, has_aux=False):
    T, np_, L = lib

    def f(a, b):
        def solve(mv, x):
            y = np_.linalg.solve(a, x)
            return (y, {"n": np_.sum(y)}) if has_aux else y

        def tsolve(vm, x):
            y = np_.linalg.solve(a.T, x)
            return (y, {"n": np_.sum(y)}) if has_aux else y

        ts = None if (symmetric or not with_transpose) else tsolve
        return L.custom_linear_solve(lambda x: a @ x, b, solve, ts, symmetric=symmetric, has_aux=has_aux)
    return f


def test_values_jvp_grad_jit():
    ff, jf = linear(F), linear(J)
    close(ff(A, B), jf(A, B))
    da, db = np.ones_like(A), np.arange(3, dtype=np.float32)
    close(ftrans.jvp(ff, (A, B), (da, db)), jax.jvp(jf, (A, B), (da, db)))
    lf = lambda a, b: fjnp.sum(ff(a, b) ** 2)  # noqa: E731
    lj = lambda a, b: jjnp.sum(jf(a, b) ** 2)  # noqa: E731
    close(ftrans.grad(lf, (0, 1))(A, B), jax.grad(lj, (0, 1))(A, B))
    close(ftrans.jit(ftrans.grad(lf, (0, 1)))(A, B), jax.grad(lj, (0, 1))(A, B))
    close(ftrans.jit(ff)(A, B), jf(A, B))
    # the gradient matches differentiating through an ordinary solve
    close(ftrans.grad(lf, (0, 1))(A, B),
          jax.grad(lambda a, b: jjnp.sum(jjnp.linalg.solve(a, b) ** 2), (0, 1))(A, B))


def test_second_order():
    ff, jf = linear(F), linear(J)
    hf = ftrans.hessian(lambda b: fjnp.sum(ff(A, b) ** 3))(B)
    hj = jax.hessian(lambda b: jjnp.sum(jf(A, b) ** 3))(B)
    close(hf, hj)
    jacf = ftrans.jacfwd(lambda a: ff(a, B))(A)
    close(jacf, jax.jacfwd(lambda a: jf(a, B))(A))


@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0)])
def test_vmap(in_axes):
    ff, jf = linear(F), linear(J)
    As = np.stack([A, A + np.eye(3, dtype=np.float32)])
    Bs = np.stack([B, 2 * B])
    args = [As if ax == 0 else A for ax in in_axes[:1]] + [Bs if in_axes[1] == 0 else B]
    close(ftrans.vmap(ff, in_axes)(*args), jax.vmap(jf, in_axes)(*args))
    lf = lambda a, b: fjnp.sum(ff(a, b) ** 2)  # noqa: E731
    lj = lambda a, b: jjnp.sum(jf(a, b) ** 2)  # noqa: E731
    close(ftrans.vmap(ftrans.grad(lf, (0, 1)), in_axes)(*args), jax.vmap(jax.grad(lj, (0, 1)), in_axes)(*args))
    close(ftrans.jit(ftrans.vmap(ff, in_axes))(*args), jax.vmap(jf, in_axes)(*args))


def test_symmetric_and_has_aux():
    ff, jf = linear(F, symmetric=True), linear(J, symmetric=True)
    lf = lambda a, b: fjnp.sum(ff(a, b) ** 2)  # noqa: E731
    lj = lambda a, b: jjnp.sum(jf(a, b) ** 2)  # noqa: E731
    close(ftrans.grad(lf, (0, 1))(S, B), jax.grad(lj, (0, 1))(S, B))
    fa, ja = linear(F, has_aux=True), linear(J, has_aux=True)
    close(fa(A, B), ja(A, B))
    lf = lambda a, b: fjnp.sum(fa(a, b)[0] ** 2)  # noqa: E731
    lj = lambda a, b: jjnp.sum(ja(a, b)[0] ** 2)  # noqa: E731
    close(ftrans.grad(lf, (0, 1))(A, B), jax.grad(lj, (0, 1))(A, B))
    close(ftrans.vmap(fa, (None, 0))(A, np.stack([B, B])), jax.vmap(ja, (None, 0))(A, np.stack([B, B])))


def test_pytree_rhs():
    def build(lib):
        T, np_, L = lib

        def f(d, b):
            mv = lambda x: {"u": d * x["u"], "v": 2.0 * x["v"]}  # noqa: E731
            sv = lambda _, x: {"u": x["u"] / d, "v": x["v"] / 2.0}  # noqa: E731
            return L.custom_linear_solve(mv, b, sv, symmetric=True)
        return f

    ff, jf = build(F), build(J)
    d = np.array([1.0, 2.0, 4.0], np.float32)
    b = {"u": B, "v": np.float32(3.0)}
    close(ff(d, b), jf(d, b))
    gf = ftrans.grad(lambda d, b: fjnp.sum(ff(d, b)["u"]) + ff(d, b)["v"], (0, 1))(d, b)
    gj = jax.grad(lambda d, b: jjnp.sum(jf(d, b)["u"]) + jf(d, b)["v"], (0, 1))(d, b)
    close(gf, gj)


def test_grad_without_transpose_solve_is_a_type_error():
    ff, jf = linear(F, with_transpose=False), linear(J, with_transpose=False)
    close(ftrans.jvp(ff, (A, B), (A, B)), jax.jvp(jf, (A, B), (A, B)))
    with pytest.raises(TypeError):
        jax.grad(lambda b: jf(A, b).sum())(B)
    with pytest.raises(TypeError, match="transpose_solve"):
        ftrans.grad(lambda b: ff(A, b).sum())(B)


def test_bad_solve_shape_is_a_value_error():
    with pytest.raises(ValueError, match="solve"):
        flax.custom_linear_solve(lambda x: x, fjnp.ones(3), lambda mv, x: x[:2])


def test_ir_typechecks_and_lowers():
    ff = linear(F)
    closed = ftrans.make_jaxpr(ftrans.grad(lambda a, b: fjnp.sum(ff(a, b)), (0, 1)))(A, B)
    typecheck(closed.jaxpr)
    assert any(e.primitive is flax.linear_solve_p for e in closed.jaxpr.eqns)
    assert "custom_linear_solve" in ftrans.jit(ff).lower(A, B).as_text()


# ---------------------------------------------------------------- custom_root


def sqrt_root(lib, has_aux=False):
    T, np_, L = lib

    def f(c):
        fun = lambda x: x ** 2 - c  # noqa: E731

        def solve(g, x0):
            x = L.fori_loop(0, 30, lambda i, x: x - g(x) / (2 * x), x0)
            return (x, g(x)) if has_aux else x

        return L.custom_root(fun, np_.ones_like(c), solve, lambda g, y: y / g(1.0), has_aux=has_aux)
    return f


def test_root_scalar():
    ff, jf = sqrt_root(F), sqrt_root(J)
    c = np.float32(2.0)
    close(ff(c), jf(c))
    close(ftrans.grad(ff)(c), jax.grad(jf)(c))
    close(ftrans.grad(ff)(c), 0.5 / np.sqrt(2.0))
    close(ftrans.jit(ftrans.grad(ff))(c), jax.grad(jf)(c))
    close(ftrans.jvp(ff, (c,), (np.float32(1.0),)), jax.jvp(jf, (c,), (np.float32(1.0),)))
    cs = np.array([1.0, 4.0, 9.0], np.float32)
    close(ftrans.vmap(ftrans.grad(ff))(cs), jax.vmap(jax.grad(jf))(cs))
    close(ftrans.grad(ftrans.grad(ff))(c), jax.grad(jax.grad(jf))(c))


def test_root_has_aux():
    ff, jf = sqrt_root(F, True), sqrt_root(J, True)
    c = np.float32(3.0)
    close(ff(c), jf(c))
    close(ftrans.grad(lambda c: ff(c)[0])(c), jax.grad(lambda c: jf(c)[0])(c))


def test_root_vector_with_linear_tangent_solve():
    def build(lib):
        T, np_, L = lib

        def f(m, y):
            fun = lambda x: m @ x + 0.1 * x ** 3 - y  # noqa: E731

            def solve(g, x0):
                def step(i, x):
                    jac = T.jacfwd(g)(x)
                    return x - np_.linalg.solve(jac, g(x))
                return L.fori_loop(0, 20, step, x0)

            def tangent_solve(g, v):
                return np_.linalg.solve(T.jacfwd(g)(v), v)

            return L.custom_root(fun, np_.zeros_like(y), solve, tangent_solve)
        return f

    ff, jf = build(F), build(J)
    close(ff(A, B), jf(A, B))
    lf = lambda m, y: fjnp.sum(ff(m, y) ** 2)  # noqa: E731
    lj = lambda m, y: jjnp.sum(jf(m, y) ** 2)  # noqa: E731
    close(ftrans.grad(lf, (0, 1))(A, B), jax.grad(lj, (0, 1))(A, B))
    close(ftrans.jit(ftrans.grad(lf, (0, 1)))(A, B), jax.grad(lj, (0, 1))(A, B))


def test_root_structure_error():
    with pytest.raises(TypeError, match="structure"):
        flax.custom_root(lambda x: (x, x), fjnp.float32(1.0), lambda f, x: x, lambda g, y: y)
