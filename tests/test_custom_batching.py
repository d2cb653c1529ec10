"""``custom_batching.custom_vmap`` and ``sequential_vmap``, against jax on the same programs."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp


def make(lib, np_mod):
    """f(x, y) = sin(x) * y, whose vmap rule computes cos(x) * y instead (so the rule's use is visible)."""

    @lib.custom_batching.custom_vmap
    def f(x, y):
        return np_mod.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        assert isinstance(in_batched, list) and len(in_batched) == 2
        for v, b in zip((xs, ys), in_batched):
            assert not b or (np.ndim(v) > 0 and np.shape(v)[0] == axis_size)
        return np_mod.cos(xs) * ys, any(in_batched)

    return f


F, J = make(ftrans, fjnp), make(jax, jjnp)
XS = np.linspace(0.1, 1.0, 4).astype(np.float32)
YS = np.linspace(2.0, 3.0, 4).astype(np.float32)


def close(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-6, atol=2e-6)
        assert np.shape(x) == np.shape(y)


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_vmap_uses_the_rule_like_jax(in_axes):
    args = tuple(XS if a == 0 else np.float32(0.5) for a in in_axes)
    for wrap in (lambda g: g, ftrans.jit):
        got = wrap(ftrans.vmap(F, in_axes=in_axes))(*args)
        close(got, jax.vmap(J, in_axes=in_axes)(*args))
    close(ftrans.vmap(ftrans.jit(F), in_axes=in_axes)(*args), jax.vmap(jax.jit(J), in_axes=in_axes)(*args))
    close(F(0.3, 2.0), np.sin(np.float32(0.3)) * 2)  # unbatched: the function itself


def test_nested_vmap_and_pytrees():
    def mk(lib, m):
        @lib.custom_batching.custom_vmap
        def g(p):
            return {"s": m.sum(p["a"]) + p["b"]}

        @g.def_vmap
        def g_rule(axis_size, in_batched, p):
            (pb,) = in_batched
            a = p["a"] if pb["a"] else m.broadcast_to(p["a"], (axis_size,) + p["a"].shape)
            b = p["b"] if pb["b"] else m.broadcast_to(p["b"], (axis_size,))
            return {"s": m.max(a, axis=-1) * b}, {"s": True}

        return g

    gf, gj = mk(ftrans, fjnp), mk(jax, jjnp)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    for in_axes in [({"a": 0, "b": 0},), ({"a": 0, "b": None},)]:
        bb = b if in_axes[0]["b"] == 0 else np.float32(2.0)
        close(ftrans.vmap(ftrans.vmap(gf, in_axes=in_axes), in_axes=in_axes)({"a": a, "b": bb}),
              jax.vmap(jax.vmap(gj, in_axes=in_axes), in_axes=in_axes)({"a": a, "b": bb}))


@pytest.mark.parametrize("axes", [((0, 0), (0, 0)), ((0, None), (0, None)), ((None, None), (0, 0)),
                                  ((0, 0), (None, None)), ((0, None), (None, 0))])
def test_jvp_keeps_the_rule_like_jax(axes):
    """Primals and tangents batched together, or only one of them (the rule's JVP is then mapped over it)."""
    p_axes, t_axes = axes

    def pick(a, v, scalar):
        return v if a == 0 else np.float32(scalar)

    ps = (pick(p_axes[0], XS, 0.4), pick(p_axes[1], YS, 1.5))
    ts = (pick(t_axes[0], YS, 1.0), pick(t_axes[1], XS, 0.5))
    out_axes = 0 if any(a == 0 for a in p_axes + t_axes) else None
    got = ftrans.vmap(lambda p, t: ftrans.jvp(F, p, t), in_axes=(p_axes, t_axes), out_axes=out_axes)(ps, ts)
    want = jax.vmap(lambda p, t: jax.jvp(J, p, t), in_axes=(p_axes, t_axes), out_axes=out_axes)(ps, ts)
    close(got, want)
    close(ftrans.jvp(ftrans.vmap(F), (XS, YS), (YS, XS)), jax.jvp(jax.vmap(J), (XS, YS), (YS, XS)))


def test_extra_batched_tangents_keep_an_unbatched_primal():
    got = ftrans.vmap(lambda x, t: ftrans.jvp(F, (x, 2.0), (t, 0.0)), in_axes=(None, 0), out_axes=(None, 0))(
        np.float32(0.7), YS)
    want = jax.vmap(lambda x, t: jax.jvp(J, (x, 2.0), (t, 0.0)), in_axes=(None, 0), out_axes=(None, 0))(
        np.float32(0.7), YS)
    close(got, want)
    close(ftrans.jacfwd(lambda x: F(x, 2.0))(XS), jax.jacfwd(lambda x: J(x, 2.0))(XS))


def test_sequential_vmap_like_jax():
    hf = ftrans.custom_batching.sequential_vmap(lambda x, y: x * y + fjnp.sum(x))
    hj = jax.custom_batching.sequential_vmap(lambda x, y: x * y + jjnp.sum(x))
    m = np.arange(12, dtype=np.float32).reshape(4, 3)
    for in_axes, args in [((0, 0), (m, m)), ((0, None), (m, np.float32(2))), ((None, 0), (m[0], m))]:
        close(ftrans.vmap(hf, in_axes=in_axes)(*args), jax.vmap(hj, in_axes=in_axes)(*args))
        close(ftrans.jit(ftrans.vmap(hf, in_axes=in_axes))(*args), jax.vmap(hj, in_axes=in_axes)(*args))
    assert "scan" in str(ftrans.make_jaxpr(ftrans.vmap(hf))(m, m))


@pytest.mark.parametrize("how", ["grad", "grad_jit", "vmap_grad", "linearize", "checkpoint", "cond"])
def test_reverse_mode_refused_like_jax(how):
    """Reverse mode through a custom_vmap call that reads a tangent is refused with JAX's ValueError (a
    custom_vjp around the function is JAX's way); forward mode, and grad with respect to another argument,
    work."""
    def run(lib, f):
        g = lambda x: f(x, 2.0)  # noqa: E731
        return {
            "grad": lambda: lib.grad(g)(0.5),
            "grad_jit": lambda: lib.grad(lib.jit(g))(0.5),
            "vmap_grad": lambda: lib.vmap(lib.grad(g))(XS),
            "linearize": lambda: lib.linearize(g, 0.5),
            "checkpoint": lambda: lib.grad(lib.checkpoint(g))(0.5),
            "cond": lambda: lib.grad(lambda x: lib.lax.cond(True, g, lambda z: z, x))(0.5),
        }[how]()

    for lib, f in ((ftrans, F), (jax, J)):
        with pytest.raises(ValueError, match="Linearization failed to produce known values for all output primals"):
            run(lib, f)


def test_grad_of_other_arguments_and_of_vmap_works():
    close(ftrans.grad(lambda x, y: F(y, 2.0).sum() * x)(0.5, XS), jax.grad(lambda x, y: J(y, 2.0).sum() * x)(0.5, XS))
    close(ftrans.grad(lambda x: ftrans.vmap(F)(x, YS).sum())(XS), jax.grad(lambda x: jax.vmap(J)(x, YS).sum())(XS))


def test_custom_vjp_around_custom_vmap_forwards_def_vmap():
    for lib, m in ((ftrans, fjnp), (jax, jjnp)):
        @lib.custom_vjp
        @lib.custom_batching.custom_vmap
        def f(x):
            return m.sin(x)

        @f.def_vmap
        def f_rule(axis_size, in_batched, xs):
            return m.cos(xs), in_batched[0]

        f.defvjp(lambda x: (f(x), m.cos(x)), lambda c, g: (c * g,))
        close(lib.vmap(f)(XS), np.cos(XS))
        close(lib.grad(f)(0.3), np.cos(np.float32(0.3)))


def test_staged_as_a_custom_vmap_call():
    text = str(ftrans.make_jaxpr(F)(0.1, 2.0))
    assert "custom_vmap_call" in text and "sin" in text
    assert "cos" in str(ftrans.make_jaxpr(ftrans.vmap(F))(XS, YS))


def test_errors():
    @ftrans.custom_batching.custom_vmap
    def norule(x):
        return x

    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap function norule"):
        norule(1.0)

    @ftrans.custom_batching.custom_vmap
    def f(x):
        return x, x

    @f.def_vmap
    def bad_tree(axis_size, in_batched, xs):
        return (xs, xs), True  # the batching spec is one bool for two outputs

    with pytest.raises(ValueError, match=r"output batching specification returned by custom vmap rule \(bad_tree\) "
                                         "do not match"):  # JAX's words
        ftrans.vmap(f)(XS)

    @ftrans.custom_batching.custom_vmap
    def g(x):
        return x

    @g.def_vmap
    def bad_dim(axis_size, in_batched, xs):
        return xs[:2], True

    with pytest.raises(TypeError, match="batch size 4"):
        ftrans.vmap(g)(XS)

    @g.def_vmap
    def wrong_out_tree(axis_size, in_batched, xs):
        return [xs], [True]

    with pytest.raises(ValueError, match=r"custom vmap rule \(wrong_out_tree\) does not match that of original "
                                         "custom-vmapped function"):
        ftrans.vmap(g)(XS)

    def closes_over(y):
        @ftrans.custom_batching.custom_vmap
        def h(x):
            return x * y

        h.def_vmap(lambda n, b, xs: (xs, True))
        return h(1.0)

    with pytest.raises(TypeError, match="closes over a value this vmap batches"):
        ftrans.vmap(closes_over)(XS)


def test_lax_map_batch_size_zero_is_one_vmap():
    x = np.arange(10, dtype=np.float32)
    for bs in (0, 3, 10):
        close(ftrans.lax.map(lambda v: v ** 2, x, batch_size=bs), jax.lax.map(lambda v: v ** 2, x, batch_size=bs))
    with pytest.raises(ValueError, match="non-negative"):
        ftrans.lax.map(lambda v: v, x, batch_size=-1)
