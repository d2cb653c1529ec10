"""``custom_vjp`` options against jax's: ``symbolic_zeros`` (``CustomVJPPrimal`` arguments of ``fwd``,
``SymbolicZero`` cotangents of ``bwd``, ``None``/``SymbolicZero`` results), ``optimize_remat`` (accepted,
same values), ``nondiff_argnames``, and what a ``bwd`` rule may return."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import custom_derivatives as fcd


def close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


LIBS = [(jax, jax.custom_derivatives, jjnp), (ftrans, fcd, fjnp)]


def _sym_f(api, cd, log):
    """f(x, y, z) = (x * y, x + z); fwd records perturbation, bwd records which cotangents are symbolic."""

    @api.custom_vjp
    def f(x, y, z):
        return x * y, x + z

    def fwd(x, y, z):
        assert all(type(a) is cd.CustomVJPPrimal for a in (x, y, z))
        log.append(("fwd", x.perturbed, y.perturbed, z.perturbed))
        xv, yv, zv = cd.custom_vjp_primal_tree_values((x, y, z))
        return f(xv, yv, zv), (xv, yv)

    def bwd(res, g):
        x, y = res
        g1, g2 = g
        log.append(("bwd", type(g1) is cd.SymbolicZero, type(g2) is cd.SymbolicZero))
        if type(g1) is cd.SymbolicZero:
            return g2, None, g2
        if type(g2) is cd.SymbolicZero:
            return g1 * y, g1 * x, cd.SymbolicZero(jax.core.ShapedArray((), np.float32)) \
                if cd is jax.custom_derivatives else fcd.zero_from_primal(x, symbolic_zeros=True)
        return g1 * y + g2, g1 * x, g2

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


@pytest.mark.parametrize("wrap", ["none", "jit", "vmap"])
def test_symbolic_zeros_perturbation_and_cotangents(wrap):
    results = []
    for api, cd, jnp_ in LIBS:
        log: list = []
        f = _sym_f(api, cd, log)
        g = f
        if wrap == "jit":
            g = api.jit(f)
        x, y, z = np.float32(2.0), np.float32(3.0), np.float32(5.0)
        out = []
        if wrap == "vmap":
            xs = jnp_.arange(3.0) + 1
            out.append(api.grad(lambda xs: api.vmap(g, (0, None, None))(xs, y, z)[0].sum())(xs))
            out.append(api.vmap(api.grad(lambda x: g(x, y, z)[1]))(xs))
        else:
            out.append(api.grad(lambda x: g(x, y, z)[0])(x))  # only x perturbed; output 1's ct symbolic
            out.append(api.grad(lambda x, z: g(x, y, z)[1], (0, 1))(x, z))  # output 0's ct symbolic
            out.append(api.grad(lambda x, y, z: sum(g(x, y, z)), (0, 1, 2))(x, y, z))
        results.append((out, log))
    (jo, jlog), (fo, flog) = results
    close(fo, jo)
    assert flog == jlog


def test_symbolic_zero_wrong_shape_is_value_error():
    @ftrans.custom_vjp
    def f(x, y):
        return x * 2, y

    def fwd(x, y):
        return f(x.value, y.value), None

    def bwd(_, g):
        a, b = g
        return b, a  # swapped: a symbolic zero of the wrong shape

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    with pytest.raises(ValueError, match="Consider just returning a None"):
        ftrans.grad(lambda x, y: f(x, y)[0].sum())(fjnp.ones(2), fjnp.ones(3))


def test_zero_from_primal_matches_jax():
    val = {"a": np.ones((2, 3), np.float32), "b": np.int32(3)}
    j = jax.custom_derivatives.zero_from_primal(val)
    f = fcd.zero_from_primal(val)
    assert j["b"].dtype == f["b"].dtype  # float0
    close(f["a"], j["a"])
    fs = fcd.zero_from_primal(val, symbolic_zeros=True)
    assert type(fs["a"]) is fcd.SymbolicZero and fs["a"].shape == (2, 3)


def test_optimize_remat_accepted():
    out = []
    for api, _, jnp_ in LIBS:
        @api.custom_vjp
        def f(x, y):
            return jnp_.sin(x) * y

        def f_fwd(x, y):
            return f(x, y), (jnp_.cos(x), jnp_.sin(x), y)

        def f_bwd(res, g):
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)

        f.defvjp(f_fwd, f_bwd, optimize_remat=True)
        xs, ys = jnp_.linspace(0.0, 1.0, 5), jnp_.linspace(2.0, 5.0, 5)
        out.append((api.grad(f)(3.2, 1.0), api.jit(api.vmap(api.grad(f)))(xs, ys),
                    api.grad(lambda x: api.checkpoint(f)(x, 2.0) ** 2)(0.3)))
    close(out[1], out[0])
    with pytest.raises(NotImplementedError):
        ftrans.custom_vjp(lambda x: x).defvjp(lambda x: (x, None), lambda r, g: (g,), symbolic_zeros=True,
                                              optimize_remat=True)


def test_nondiff_argnames():
    out = []
    for api, _, jnp_ in LIBS:
        @__import__("functools").partial(api.custom_vjp, nondiff_argnums=(0,), nondiff_argnames=("g",))
        def app(f, g, x):
            return f(x) + g(x)

        app.defvjp(lambda f, g, x: (app(f, g, x), jnp_.cos(x)), lambda f, g, c, v: (c * v,))

        @__import__("functools").partial(api.custom_jvp, nondiff_argnames=("f",))
        def app2(f, x):
            return f(x)

        app2.defjvp(lambda f, p, t: (app2(f, *p), 3 * t[0]))
        h = lambda x: 2 * x  # noqa: E731
        out.append((api.value_and_grad(lambda x: app(h, h, x))(1.0), api.jvp(lambda x: app2(h, x), (1.0,), (1.0,))))
    close(out[1], out[0])


def test_bwd_results_none_in_pytrees_and_prefixes():
    out = []
    for api, _, _ in LIBS:
        @api.custom_vjp
        def f(x):
            return x[0] + x[1][0]

        f.defvjp(lambda x: (f(x), None), lambda _, g: ((g, (None, None)),))
        out.append(api.grad(f)((1.0, (2.0, None))))

        @api.custom_vjp
        def h(x, y):
            return x["a"] * y

        h.defvjp(lambda x, y: (h(x, y), None), lambda _, g: (g, [g, g][0]))
        out.append(api.grad(lambda x, y: h(x, y), (0, 1))({"a": 1.0}, 2.0))
    close(out[2:], out[:2])


def test_bwd_shape_mismatch_is_value_error():
    @ftrans.custom_vjp
    def foo(x, y):
        return x

    foo.defvjp(lambda x, y: (x, None), lambda _, g: (fjnp.zeros(3), fjnp.zeros(3)))
    with pytest.raises(ValueError, match=r"output\[1\] the bwd rule produced an output of type f32\[3\]"):
        ftrans.grad(lambda x, y: foo(x, y * y).sum(), 1)(fjnp.ones(3), fjnp.ones(4))
