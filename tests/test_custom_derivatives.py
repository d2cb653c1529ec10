"""``custom_jvp`` and ``custom_vjp`` against jax's, eagerly, under jit, and through jit boundaries.

Each function is written once against a numpy module and built with ftrans's
and jax's decorators; values, JVPs, gradients and errors must agree.
"""

from __future__ import annotations

import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.core.ir import typecheck


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def tree_close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        close(x, y, tol)


# ---------------------------------------------------------------- custom_jvp


def make_log1pexp(cj, np_):
    """The classic numerically stable softplus whose naive derivative is nan at large x."""

    @cj
    def log1pexp(x):
        return np_.log(1.0 + np_.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1.0 - 1.0 / (1.0 + np_.exp(x)))

    return log1pexp


F_SP, J_SP = make_log1pexp(ftrans.custom_jvp, fjnp), make_log1pexp(jax.custom_jvp, jjnp)


@pytest.mark.parametrize("x", [0.3, 10.0, 100.0])
def test_custom_jvp_rule_is_used(x):
    close(ftrans.grad(F_SP)(x), jax.grad(J_SP)(x))
    assert np.isfinite(np.asarray(ftrans.grad(F_SP)(x)))
    close(ftrans.jvp(F_SP, (x,), (2.0,))[1], jax.jvp(J_SP, (x,), (2.0,))[1])


def test_custom_jvp_under_jit_both_ways_and_higher_order():
    x = 3.0
    want = jax.grad(J_SP)(x)
    close(ftrans.jit(ftrans.grad(F_SP))(x), want)
    close(ftrans.grad(ftrans.jit(F_SP))(x), want)
    close(ftrans.grad(ftrans.grad(F_SP))(x), jax.grad(jax.grad(J_SP))(x))
    xs = np.linspace(-3, 3, 5).astype(np.float32)
    close(ftrans.jit(lambda v: F_SP(v))(xs), J_SP(xs))


def test_custom_jvp_is_one_equation_in_the_ir():
    closed = ftrans.make_jaxpr(F_SP)(1.0)
    typecheck(closed)
    assert [e.primitive.name for e in closed.eqns] == ["custom_jvp_call"]
    assert "jvp=log1pexp_jvp" in str(closed)


def make_two_arg(cj, np_):
    @cj
    def f(x, y):
        return np_.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), 10.0 * np_.cos(x) * y * tx + np_.sin(x) * ty

    return f


def test_custom_jvp_two_args_argnums_and_arrays():
    f, g = make_two_arg(ftrans.custom_jvp, fjnp), make_two_arg(jax.custom_jvp, jjnp)
    x = np.array([0.1, 0.7, -1.2], np.float32)
    y = np.array([2.0, -1.0, 0.5], np.float32)
    loss_f = lambda a, b: fjnp.sum(f(a, b))  # noqa: E731
    loss_j = lambda a, b: jjnp.sum(g(a, b))  # noqa: E731
    tree_close(ftrans.grad(loss_f, argnums=(0, 1))(x, y), jax.grad(loss_j, argnums=(0, 1))(x, y))
    tree_close(ftrans.jacrev(f)(x, y), jax.jacrev(g)(x, y))
    tree_close(ftrans.jacfwd(f)(x, y), jax.jacfwd(g)(x, y))


def make_defjvps(cj, np_):
    @cj
    def f(x, y):
        return x * y

    f.defjvps(lambda g, ans, x, y: 3.0 * g * y, lambda g, ans, x, y: 5.0 * g * x)
    return f


def test_custom_jvp_defjvps():
    f, g = make_defjvps(ftrans.custom_jvp, fjnp), make_defjvps(jax.custom_jvp, jjnp)
    tree_close(ftrans.grad(f, argnums=(0, 1))(2.0, 3.0), jax.grad(g, argnums=(0, 1))(2.0, 3.0))


def make_nondiff(cj, np_):
    @cj
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return apply(fn, x), 2.0 * t

    return apply


def test_custom_jvp_nondiff_argnums_with_a_function_argument():
    import functools

    f = make_nondiff(functools.partial(ftrans.custom_jvp, nondiff_argnums=(0,)), fjnp)
    g = make_nondiff(functools.partial(jax.custom_jvp, nondiff_argnums=(0,)), jjnp)
    close(ftrans.grad(lambda x: f(fjnp.sin, x))(1.0), jax.grad(lambda x: g(jjnp.sin, x))(1.0))
    close(ftrans.jit(ftrans.grad(lambda x: f(fjnp.sin, x)))(1.0), 2.0)


def test_custom_jvp_symbolic_zeros():
    seen = []

    @ftrans.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        seen.append(tuple(type(t).__name__ for t in tangents))
        x, y = primals
        tx, ty = tangents
        out = 0.0
        if not isinstance(tx, ftrans.custom_derivatives.SymbolicZero):
            out = out + tx * y
        if not isinstance(ty, ftrans.custom_derivatives.SymbolicZero):
            out = out + x * ty
        return f(x, y), out

    f.defjvp(f_jvp, symbolic_zeros=True)
    close(ftrans.grad(f)(2.0, 3.0), 3.0)
    assert seen[-1][1] == "Zero"


def test_custom_jvp_bad_rules_are_named():
    @ftrans.custom_jvp
    def f(x):
        return x * 2.0

    f.defjvp(lambda p, t: (f(*p), fjnp.ones(3)))  # wrong tangent shape
    with pytest.raises(TypeError, match=r"Expected float32\[\] \(tangent type of float32\[\]\) but got float32\[3\]"):
        ftrans.jvp(f, (1.0,), (1.0,))

    @ftrans.custom_jvp
    def g(x):
        return x

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function g"):
        g(1.0)


# ---------------------------------------------------------------- custom_vjp


def make_clip_gradient(cv, np_):
    @cv
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)

    def bwd(res, g):
        lo, hi = res
        return (None, None, np_.clip(g, lo, hi))

    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


def test_custom_vjp_clip_gradient_matches_jax():
    f = make_clip_gradient(ftrans.custom_vjp, fjnp)
    g = make_clip_gradient(jax.custom_vjp, jjnp)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    lf = lambda x: fjnp.sum(f(-0.5, 0.5, x * 10.0))  # noqa: E731
    lj = lambda x: jjnp.sum(g(-0.5, 0.5, x * 10.0))  # noqa: E731
    close(ftrans.grad(lf)(x), jax.grad(lj)(x))
    close(ftrans.jit(ftrans.grad(lf))(x), jax.grad(lj)(x))
    close(ftrans.grad(ftrans.jit(lf))(x), jax.grad(lj)(x))


def make_pytree_vjp(cv, np_):
    @cv
    def f(params, x):
        return {"y": params["w"] * x, "z": np_.sum(params["b"])}

    def fwd(params, x):
        return f(params, x), (params, x)

    def bwd(res, ct):
        params, x = res
        return ({"w": ct["y"] * x * 3.0, "b": np_.ones_like(params["b"]) * ct["z"]}, ct["y"] * params["w"])

    f.defvjp(fwd, bwd)
    return f


def test_custom_vjp_pytrees_and_vjp():
    f, g = make_pytree_vjp(ftrans.custom_vjp, fjnp), make_pytree_vjp(jax.custom_vjp, jjnp)
    params = {"w": np.float32(2.0), "b": np.arange(3, dtype=np.float32)}
    x = np.float32(1.5)
    out_f, pb_f = ftrans.vjp(f, params, x)
    out_j, pb_j = jax.vjp(g, params, x)
    tree_close(out_f, out_j)
    ct = {"y": np.float32(1.0), "z": np.float32(2.0)}
    tree_close(pb_f(ct), pb_j(ct))


def test_custom_vjp_backward_is_visible_in_the_ir():
    f = make_clip_gradient(ftrans.custom_vjp, fjnp)
    closed = ftrans.make_jaxpr(ftrans.grad(lambda x: f(-1.0, 1.0, x)))(2.0)
    typecheck(closed)
    text = str(closed)
    assert "max" in text and "min" in text  # jnp.clip from the user's bwd, staged into the backward program
    assert "custom_lin" not in text  # transposed away


def test_custom_function_closing_over_a_differentiated_value_is_refused_like_jax():
    """A custom_jvp/custom_vjp function closing over the innermost jvp/grad's value and called without it
    raises UnexpectedTracerError in both (JAX runs it below that differentiation)."""
    def make(api, kind):
        def f(x):
            if kind == "jvp":
                @api.custom_jvp
                def g(y):
                    return x + y

                g.defjvp(lambda p, t: (g(x), 2 * p[0]))
            else:
                @api.custom_vjp
                def g(y):
                    return x + y

                g.defvjp(lambda y: (g(y), None), lambda r, c: (c,))
            return g(1.0)
        return f

    for api, err in ((jax, jax.errors.UnexpectedTracerError), (ftrans, ftrans.errors.UnexpectedTracerError)):
        for kind in ("jvp", "vjp"):
            with pytest.raises(err):
                api.jvp(make(api, kind), (3.0,), (1.0,))
            with pytest.raises(err):
                api.grad(make(api, kind))(3.0)


def test_jvp_of_custom_vjp_is_an_error():
    f = make_clip_gradient(ftrans.custom_vjp, fjnp)
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        ftrans.jvp(lambda x: f(-1.0, 1.0, x), (1.0,), (1.0,))


def test_custom_vjp_bad_backward_structure_is_named():
    @ftrans.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))  # one cotangent for two arguments
    with pytest.raises(TypeError, match=r"Custom VJP bwd rule <lambda> of f must produce a tuple with one "
                                        r"cotangent per differentiable argument of f \(2\)"):
        ftrans.grad(f)(1.0, 2.0)

    @ftrans.custom_vjp
    def h(x):
        return x.sum()

    h.defvjp(lambda x: (x.sum(), None), lambda res, g: (fjnp.ones(4),))
    with pytest.raises(ValueError, match=r"at output\[0\] the bwd rule produced an output of type f32\[4\] "
                                         r"corresponding to an input of type f32\[3\]"):  # a ValueError, as in JAX
        ftrans.grad(h)(np.ones(3, np.float32))

    @ftrans.custom_vjp
    def k(p):
        return p["a"]

    k.defvjp(lambda p: (p["a"], None), lambda res, g: ([g],))
    with pytest.raises(TypeError, match="same container \\(pytree\\) structure as the args tuple"):
        ftrans.grad(k)({"a": 1.0})


def test_custom_vjp_nondiff_argnums():
    import functools

    @functools.partial(ftrans.custom_vjp, nondiff_argnums=(0,))
    def scale(k, x):
        return k * x

    scale.defvjp(lambda k, x: (k * x, None), lambda k, res, g: (g * k * 100.0,))
    close(ftrans.grad(lambda x: scale(2.0, x))(1.0), 200.0)


def test_eager_calls_run_the_function():
    f = make_clip_gradient(ftrans.custom_vjp, fjnp)
    close(f(-1.0, 1.0, np.arange(3.0, dtype=np.float32)), np.arange(3.0))
    close(F_SP(np.float32(2.0)), J_SP(np.float32(2.0)))


def test_custom_vjp_bwd_cotangent_of_another_float_dtype_passes_through():
    """bwd returning f32 for a bf16 argument: the cotangent keeps bwd's dtype (JAX's exception for inexact
    arguments), so no precision is lost rounding it to bf16 -- also through a checkpoint under jit."""
    from functools import partial

    def build(T, np_):
        @T.custom_vjp
        def foo(x):
            return np_.float32(1.0) * x.astype("float32")

        foo.defvjp(lambda x: (foo(x), x), lambda x, _: (np_.float32(1.0) * x.astype("float32"),))

        @T.custom_vjp
        def sq(x):
            return np_.dot(x, x)

        sq.defvjp(lambda x: (sq(x), None), lambda _, g: (g,))
        return foo, T.jit(partial(T.checkpoint, policy=lambda *_, **__: True)(lambda x: foo(sq(x))))

    eps = np.float32(jjnp.finfo("bfloat16").eps)
    outs = []
    for T, np_ in ((ftrans, fjnp), (jax, jjnp)):
        foo, f = build(T, np_)
        x = np_.ones(2, dtype="bfloat16")
        y, pb = T.vjp(foo, x)
        (ct,) = pb(np_.ones_like(y))
        xe = (np_.bfloat16(1) + eps) * np_.eye(2, dtype="bfloat16")
        y2, pb2 = T.vjp(f, xe)
        (ct2,) = pb2(np_.ones_like(y2))
        outs.append((ct.dtype, ct2.dtype, np.asarray(y2), np.asarray(ct2)))
    assert outs[0][:2] == outs[1][:2] == (np.dtype("float32"), np.dtype("float32"))
    np.testing.assert_array_equal(outs[0][2], outs[0][3])  # y == its cotangent exactly (no bf16 rounding)
    np.testing.assert_array_equal(outs[0][3], outs[1][3])


# ---------------------------------------------------------------- printing


@pytest.mark.parametrize("kind", ["jvp", "vjp"])
def test_custom_call_prints_like_jax(kind):
    """A custom-derivative call prints its ``name`` first and hides ``num_consts=0``, as JAX's printer does
    (and a custom_vjp call shows ``symbolic_zeros``)."""
    def build(lib):
        if kind == "jvp":
            @lib.custom_jvp
            def f(x):
                return x + 1

            @f.defjvp
            def f_jvp(primals, tangents):
                return f(*primals), tangents[0]
            return f

        @lib.custom_vjp
        def f(x):
            return x + 1

        def f_fwd(x):
            return f(x), ()

        def f_bwd(_, g):
            return (g,)
        f.defvjp(f_fwd, f_bwd)
        return f

    x = np.array([4.2], np.float32)
    want = jax.make_jaxpr(build(jax))(x).pretty_print(use_color=False)
    got = ftrans.make_jaxpr(build(ftrans))(x).pretty_print(use_color=False)
    assert got == want


def test_bwd_type_mismatch_message_begins_as_jaxs():
    """The message starts with JAX's words (which users match on), the rule and function named after them."""
    import jax
    import jax.numpy as jjnp

    def build(m, zeros):
        @m.custom_vjp
        def foo(x, y):
            return x

        foo.defvjp(lambda x, y: (x, None), lambda _, g: (zeros(3), zeros(3)))
        return lambda x, y: foo(x, y).sum()

    with pytest.raises(ValueError) as theirs:
        jax.grad(build(jax, jjnp.zeros), 1)(jjnp.ones(3), jjnp.ones(4))
    with pytest.raises(ValueError) as ours:
        ftrans.grad(build(ftrans, fjnp.zeros), 1)(fjnp.ones(3), fjnp.ones(4))
    head, msg = str(theirs.value).split(" of type")[0], str(ours.value)
    assert msg.startswith("Custom VJP bwd rule attached to foo at "), msg  # jax 0.11's words
    if " attached to " not in head:  # jax 0.10's name no function
        msg = re.sub(r" attached to \S+ at \S+", "", msg, count=1)
    assert msg.startswith(head), (msg, head)
    assert "(bwd rule <lambda> of foo)" in str(ours.value)
