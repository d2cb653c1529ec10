"""``custom_vjp`` options against jax's: ``symbolic_zeros`` (``CustomVJPPrimal`` arguments of ``fwd``,
``SymbolicZero`` cotangents of ``bwd``, ``None``/``SymbolicZero`` results), ``optimize_remat`` (the function runs
where the residuals are dead), ``nondiff_argnames``, and what a ``bwd`` rule may return."""

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


def test_optimize_remat_runs_the_function_on_a_checkpoints_forward_pass():
    """A ``fwd`` deliberately unlike the function (sin for tan) shows which one ran: under ``checkpoint`` the
    forward pass runs the function (its residuals are recomputed by the backward pass, which runs ``fwd``
    once), without it ``fwd`` gives the value; eagerly and inside ``scan``, as JAX; staged, the forward
    pass holds ``tan`` alone."""
    out = []
    for api, _, jnp_ in LIBS:
        @api.custom_vjp
        def f(x):
            return jnp_.tan(x)

        f.defvjp(lambda x: (jnp_.sin(x), (x,)), lambda res, g: (jnp_.cos(res[0]) * g,), optimize_remat=True)

        def temp(x):
            return api.checkpoint(f)(x) ** 2

        def looped(x):
            return api.lax.scan(lambda c, _: (api.checkpoint(f)(c), None), x, None, length=2)[0]

        out.append((api.value_and_grad(temp)(3.2), api.value_and_grad(f)(3.2), api.grad(looped)(0.3)))
    close(out[1], out[0])
    text = str(ftrans.make_jaxpr(ftrans.grad(lambda x: ftrans.checkpoint(f)(x) ** 2))(3.2))
    assert text.count("sin") == 1 and text.count("tan") == 1, text


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


@pytest.mark.parametrize("make", [
    lambda np_, f0: np_.zeros((2, 3), f0), lambda np_, f0: np_.ones((2,), f0), lambda np_, f0: np_.full((), 0, f0),
    lambda np_, f0: np_.empty((1,), dtype=f0), lambda np_, f0: np_.zeros_like(np.ones(3), dtype=f0),
    lambda np_, f0: np_.zeros_like(np.zeros(2, f0)),
])
def test_float0_creation(make):
    f0 = jax.dtypes.float0
    j, f = make(jjnp, f0), make(fjnp, f0)
    assert f.dtype == j.dtype == f0 and f.shape == j.shape


def test_float0_tangents_through_custom_rules_in_scan():
    out = []
    for api, cd, jnp_ in LIBS:
        f0 = jax.dtypes.float0

        @api.custom_vjp
        def f(x):
            return x

        f.defvjp(lambda x: (x, (2.0, x)), lambda *_: ((2.0, jnp_.zeros((), f0)),))

        def foo(x, y):
            out, _ = api.lax.scan(lambda c, _: (f(c), None), (x, y), None, length=1)
            return out[0]

        @api.custom_jvp
        def g(x, y):
            return x, y

        g.defjvp(lambda p, t: (p, (2.0, cd.zero_from_primal(p[1]))))

        def goo(x, y):
            out, _ = api.lax.scan(lambda c, _: (g(*c), None), (x, y), None, length=1)
            return out

        gr = api.grad(foo, allow_int=True, argnums=(0, 1))(2.0, 3)
        assert gr[1].dtype == f0
        p, t = api.jvp(goo, (2.0, 3), (np.ones((), np.float32), np.zeros((), f0)))
        assert t[1].dtype == f0
        out.append((gr[0], p, t[0]))
    close(out[1], out[0])


def test_custom_jvp_traced_nondiff_arg_under_vmap():
    import functools

    out = []
    for api, _, jnp_ in LIBS:
        @functools.partial(api.custom_jvp, nondiff_argnums=(0,))
        def f(x, y):
            return x * y

        f.defjvp(lambda x, p, t: (f(x, p[0]), 5 * x * t[0]))
        g = api.vmap(f)
        out.append((api.jvp(lambda y: g(jnp_.array([2.0, 3.0]), y), (jnp_.array([3.0, 4.0]),),
                            (jnp_.array([1.0, 1.0]),)),
                    api.grad(lambda y: g(jnp_.array([2.0, 3.0]), y).sum())(jnp_.array([3.0, 4.0])),
                    api.vmap(lambda x: api.grad(lambda y: f(x, y))(2.0))(jnp_.array([1.0, 2.0]))))
    close(out[1], out[0])


def test_custom_vjp_traced_nondiff_arg_is_unexpected_tracer_error():
    import functools

    @functools.partial(ftrans.custom_vjp, nondiff_argnums=(0,))
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (f(x, y), fjnp.cos(y)), lambda x, c, g: (c * g,))
    with pytest.raises(ftrans.errors.UnexpectedTracerError, match="custom_vjp"):
        ftrans.jit(lambda x, y: f(x, y))(2, 3.0)
    with pytest.raises(ftrans.errors.UnexpectedTracerError, match="custom_vjp"):
        ftrans.grad(ftrans.jit(lambda x, y: f(x, y)), 1)(2.0, 3.0)


def test_pretty_print_use_color_and_rule_names():
    texts = []
    for api, _, jnp_ in LIBS:
        @api.custom_vjp
        def f(x):
            return x + 1

        def f_fwd(x):
            return f(x), ()

        def f_bwd(_, g):
            return (g,)

        f.defvjp(f_fwd, f_bwd)
        texts.append(api.make_jaxpr(f)(jnp_.ones(1)).pretty_print(use_color=False))
    for t in texts:
        assert "fwd=f_fwd" in t and "bwd=f_bwd" in t and "custom_vjp_call[" in t


def _message(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what is compared
        return type(e), str(e).split("\n  (in your code at")[0]
    raise AssertionError("no error")


@pytest.mark.parametrize("case", ["not_pair", "tree", "tangent_shape", "primal_shape", "fwd_tree", "fwd_shape",
                                  "kwargs"])
def test_rule_error_messages_match_jax(case):
    msgs = []
    for api, _, jnp_ in LIBS:
        @api.custom_jvp
        def f(x):
            return x ** 2

        def foo_jvp(primals, tangents):
            x, = primals
            t, = tangents
            if case == "not_pair":
                return 1.0
            if case == "tree":
                return f(x), [2 * x * t, x]
            if case == "tangent_shape":
                return f(x), jnp_.reshape(t, (1,))
            return jnp_.zeros((3,), jnp_.float32), t

        f.defjvp(foo_jvp)

        @api.custom_vjp
        def h(x):
            return x

        def f_fwd(x):
            return ((x, x) if case == "fwd_tree" else jnp_.zeros((3,), x.dtype)), None

        h.defvjp(f_fwd, lambda _, g: (g,))

        @api.custom_jvp
        def k(x, y):
            return x * y

        k.defjvp(lambda p, t: (k(*p), t[0]))
        x = jnp_.float32(2.0)
        if case in ("fwd_tree", "fwd_shape"):
            scan_apply = lambda x: api.lax.scan(lambda c, _: (h(c), None), x, None, length=1)[0]  # noqa: E731
            msgs.append(_message(lambda: api.grad(scan_apply)(x)))
        elif case == "kwargs":
            msgs.append(_message(lambda: k(0.5)))
            msgs.append(_message(lambda: k(0.5, 0.1, z=1.0)))
        else:
            msgs.append(_message(lambda: api.jvp(f, (x,), (x,))))
    half = len(msgs) // 2
    for (jt, jm), (ft, fm) in zip(msgs[:half], msgs[half:]):
        assert issubclass(ft, jt)
        if case == "kwargs":  # the qualified name of the function differs between the two spellings
            jm, fm = jm.split("Binding failed")[1], fm.split("Binding failed")[1]
        if case == "fwd_shape":  # ftrans adds which output and both types
            assert fm.startswith(jm) and "got fwd output type float32[3] which doesn't match" in fm
            continue
        assert fm == jm


def test_rules_closing_over_vmap_values_under_differentiation():
    out = []
    for api, _, jnp_ in LIBS:
        def h_jvp(z):
            def f(x):
                @api.custom_jvp
                def g(y):
                    return x * y

                @g.defjvp
                def g_jvp(primals, tangents):
                    (y,), (ydot,) = primals, tangents
                    return x * y, 3 * x * ydot  # (not the true derivative: the rule must be the one used)

                return g(z)

            return api.vmap(f)(jnp_.arange(3.0, dtype="float32"))

        def h_vjp(z):
            def f(x):
                @api.custom_vjp
                def g(y):
                    return x * y

                g.defvjp(lambda y: (x * y, (x, y)), lambda res, w: (5 * res[0] * w,))
                return g(z)

            return api.vmap(f)(jnp_.arange(3.0, dtype="float32")).sum()

        out.append((api.jvp(h_jvp, (np.float32(1.0),), (np.float32(2.0),)), api.grad(h_vjp)(np.float32(3.0))))
    close(out[1], out[0])
