"""``ftrans.vmap``'s API against ``jax.vmap``: axis specifications, composition with the other
transformations, and errors.

Each program is written once against a ``(transforms, numpy)`` pair, ``(ftrans, ftrans.numpy)`` or
``(jax, jax.numpy)``, and run with both: outputs must agree in value, dtype, shape and tree structure.
Per-example gradients are also checked against a Python loop.  Bad inputs raise the exception class jax
raises, with a message naming what is wrong.
"""

from __future__ import annotations

import functools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.ad_checkpoint  # noqa: F401  (jax.ad_checkpoint.checkpoint_name)
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.core.ir import typecheck
from ftrans.transforms import batching
from tests.test_custom_derivatives import (
    make_clip_gradient,
    make_defjvps,
    make_log1pexp,
    make_nondiff,
    make_pytree_vjp,
    make_two_arg,
)

FT, JX = (ftrans, fjnp), (jax, jjnp)
RNG = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def assert_tree(got, want, tol=1e-5):
    g, gt = jax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.shape, a.dtype) == (b.shape, b.dtype), ((a.shape, a.dtype), (b.shape, b.dtype))
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def jax_jit_call(f, *args, **kwargs):
    """``f(*args, **kwargs)`` under ``jax.jit``: one compiled program instead of jax's op-by-op dispatch, which
    compiles every primitive of, e.g., a Jacobian of a vmap.  The NumPy arrays are the program's arguments;
    every other leaf (Python scalars, strings) is passed to ``f`` as it is."""
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    is_array = [isinstance(leaf, (np.ndarray, np.generic)) for leaf in leaves]

    def run(*arrays):
        it = iter(arrays)
        a, k = jax.tree_util.tree_unflatten(tree, [next(it) if arr else leaf for leaf, arr in zip(leaves, is_array)])
        return f(*a, **k)

    return jax.jit(run)(*[leaf for leaf, arr in zip(leaves, is_array) if arr])


def both(build, *args, tol=1e-5, jit=True, **kwargs):
    """``build(t, np)`` run with ftrans (as it is) and with jax (jitted unless ``jit=False``) on the same
    arguments; the results must agree."""
    got = build(*FT)(*args, **kwargs)
    want = (jax_jit_call if jit else lambda f, *a, **k: f(*a, **k))(build(*JX), *args, **kwargs)
    assert_tree(got, want, tol)
    return got


X23, X34, V3, V4 = arr(2, 3), arr(3, 4), arr(3), arr(4)

# ----------------------------------------------------------------------------
# in_axes

# name -> (program (np) -> f, in_axes, arguments)
IN_AXES = {
    "int": (lambda n: lambda a, b: a * b, 1, (X34, arr(3, 4))),
    "negative": (lambda n: lambda a, b: a @ b, -1, (X34, arr(3, 4))),
    "tuple_with_none": (lambda n: lambda a, b: a * b, (0, None), (X34, V4)),
    "list_as_tuple": (lambda n: lambda a, b: a * b, [1, None], (X34, V3)),
    "dict_prefix": (lambda n: lambda d: d["w"] * d["b"], ({"w": 0, "b": None},), ({"w": X34, "b": V4},)),
    "dict_with_int_for_subtree": (lambda n: lambda d, x: d["p"][0] + d["p"][1] * x, ({"p": 0}, -1),
                                  ({"p": (X34, X34)}, arr(4, 3))),
    "nested_pytree": (lambda n: lambda t: t[0] * t[1][0] + n.sum(t[1][1]),
                      ((1, (None, 0)),), ((X34.T, (V4, arr(3, 2))),)),
    "list_spec_for_list_arg": (lambda n: lambda xs, y: xs[0] + xs[1] * y, ([0, None], 1), ([X34, V4], X34.T)),
    "top_list_for_list_arg": (lambda n: lambda xs: xs[0] + xs[1], [[0, None]], ([X34, V4],)),
    "none_leaves_in_args": (lambda n: lambda a, nothing, b: a + b, (0, None, None), (X34, None, V4)),
    "non_array_unmapped": (lambda n: lambda a, k, s: a * k + len(s), (0, None, None), (X34, 3, "ab")),
    "int_and_bool_args": (lambda n: lambda i, m: n.where(m, i, -i), (0, 1), (
        RNG.integers(0, 9, (3, 4)).astype(np.int32), RNG.random((4, 3)) < 0.5)),
    "zero_size_batch": (lambda n: lambda a, b: a @ b, (0, None), (np.zeros((0, 3), np.float32), X34)),
    "python_list_arg": (lambda n: lambda xs: xs[0] * xs[1], 0, ([V3, V3 * 2],)),
}


@pytest.mark.parametrize("name", sorted(IN_AXES))
def test_in_axes_forms_match_jax(name):
    build, in_axes, args = IN_AXES[name]
    both(lambda t, n: t.vmap(build(n), in_axes=in_axes), *args)


def test_keyword_arguments_are_mapped_over_axis_0():
    got = both(lambda t, n: t.vmap(lambda a, *, b: a * b, in_axes=None), V4, b=X34)
    assert np.shape(got) == (3, 4)
    got = both(lambda t, n: t.vmap(lambda a, b=None: a * b["u"][0] + n.sum(b["u"][1]), in_axes=(1,)),
               X34, b={"u": (V4, arr(4, 2))})
    assert np.shape(got) == (4, 3)
    with pytest.raises(ValueError, match=r"argument kwargs\['b'\] has size 2"):
        ftrans.vmap(lambda a, b: a + b[0])(X34, b=X23)


def test_axis_size_without_mapped_inputs():
    got = both(lambda t, n: t.vmap(lambda a: a * 2, in_axes=None, axis_size=4), V3)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(V3 * 2, (4, 3)))
    got = both(lambda t, n: t.vmap(lambda: n.arange(3.0), in_axes=(), axis_size=2, out_axes=1))
    assert np.shape(got) == (3, 2)
    both(lambda t, n: t.vmap(lambda a: a, axis_size=3), X34)  # consistent with the mapped size


def test_axis_name_is_in_scope_with_its_size():
    seen = []

    def f(x):
        seen.append(batching.axis_env.lookup("batch").size)
        return x * 2

    ftrans.vmap(ftrans.vmap(f, axis_name="batch"), in_axes=1)(X34)
    assert seen == [3]
    assert batching.axis_env.lookup("batch") is None


# ----------------------------------------------------------------------------
# out_axes

OUT_AXES = {
    "negative": (lambda n: lambda a: a[:, None] * a, -2),
    "tuple": (lambda n: lambda a: (a, n.sum(a)), (1, 0)),
    "dict_prefix": (lambda n: lambda a: {"x": (a, a * 2), "s": n.sum(a)}, {"x": -1, "s": 0}),
    "list_for_list": (lambda n: lambda a: [a, a + 1], [1, 0]),
    "none_for_unbatched": (lambda n: lambda a: (a * 2, n.ones(3) * 5.0), (0, None)),
    "none_for_python_scalar": (lambda n: lambda a: (a, 7.0), (0, None)),
    "int_broadcasts_unbatched": (lambda n: lambda a: (a, n.arange(5.0)), (0, 1)),
    "python_scalar_broadcast": (lambda n: lambda a: 2.0, 0),
}


@pytest.mark.parametrize("name", sorted(OUT_AXES))
def test_out_axes_forms_match_jax(name):
    build, out_axes = OUT_AXES[name]
    # (an unbatched Python scalar output stays one, which jax.jit would make an array)
    both(lambda t, n: t.vmap(build(n), out_axes=out_axes), X34, jit=name != "none_for_python_scalar")


def test_unbatched_output_broadcast_along_negative_out_axis():
    got = both(lambda t, n: t.vmap(lambda a, b: b * 2, in_axes=(0, None), out_axes=-1), X34, X23)
    assert np.shape(got) == (2, 3, 3)
    np.testing.assert_array_equal(np.asarray(got)[..., 1], X23 * 2)


# ----------------------------------------------------------------------------
# Composition with the other transformations


def mlp_loss(n):
    def loss(params, x, y):
        h = n.tanh(x @ params["w1"] + params["b1"])
        return n.mean((h @ params["w2"] - y) ** 2)

    return loss


PARAMS = {"w1": arr(3, 5), "b1": arr(5), "w2": arr(5, 2)}
XS, YS = arr(6, 3), arr(6, 2)


def test_per_example_gradients_match_a_loop_and_jax():
    got = both(lambda t, n: t.vmap(t.grad(mlp_loss(n)), in_axes=(None, 0, 0)), PARAMS, XS, YS)
    loop = [ftrans.grad(mlp_loss(fjnp))(PARAMS, XS[i], YS[i]) for i in range(len(XS))]
    assert_tree(got, jax.tree_util.tree_map(lambda *g: np.stack(g), *loop))


def test_per_example_gradients_with_a_mapped_parameter_and_argnums():
    in_axes = ({"w1": None, "b1": 0, "w2": None}, 0, None)
    params = {**PARAMS, "b1": arr(6, 5)}
    got = both(lambda t, n: t.vmap(t.value_and_grad(mlp_loss(n), argnums=(0, 1)), in_axes=in_axes),
               params, XS, YS[0])
    (val, (gp, gx)) = got
    assert np.shape(val) == (6,) and np.shape(gp["w1"]) == (6, 3, 5) and np.shape(gx) == (6, 3)
    for i in (0, 5):
        p_i = {**PARAMS, "b1": params["b1"][i]}
        assert_tree(jax.tree_util.tree_map(lambda a, i=i: a[i], gp), ftrans.grad(mlp_loss(fjnp))(p_i, XS[i], YS[0]))


def test_grad_of_a_vmapped_loss():
    def build(t, n):
        return t.grad(lambda p, x, y: n.mean(t.vmap(mlp_loss(n), in_axes=(None, 0, 0))(p, x, y)))

    got = both(build, PARAMS, XS, YS)
    assert_tree(got, ftrans.grad(mlp_loss(fjnp))(PARAMS, XS, YS))  # the same loss, written batched


def test_jit_of_nested_vmap():
    def build(t, n):
        return t.jit(t.vmap(t.vmap(lambda a, b: n.dot(a, b), in_axes=(0, None)), in_axes=(None, 1), out_axes=-1))

    a, b = arr(2, 4), X34.T
    got = both(build, a, b)
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-5, atol=1e-5)  # got[i, j] = a[i] . b[:, j]


def test_vmap_of_jit_is_one_jit_call():
    def build(t, n):
        return t.vmap(t.jit(lambda a, b: n.sin(a) * b + n.sum(a)), in_axes=(1, None))

    both(build, X34, V3)
    closed = ftrans.make_jaxpr(build(*FT))(X34, V3)
    typecheck(closed)
    assert [e.primitive.name for e in closed.eqns if e.primitive.name == "jit_call"] == ["jit_call"]
    inner = next(e for e in closed.eqns if e.primitive.name == "jit_call").params["jaxpr"]
    assert "= jit[" not in str(inner)
    assert "f32[4,3]" in str(closed)  # the batched call takes the whole batch


def test_vmap_of_jit_with_unbatched_outputs_and_kwargs():
    both(lambda t, n: t.vmap(t.jit(lambda a, b: (a * b, b * 2)), in_axes=(0, None)), X34, V4)
    both(lambda t, n: t.vmap(t.jit(lambda a, b: a * b)), X34, b=X34)


F_JAC = {
    "sin_times_norm": (lambda n: lambda x: n.sin(x) * n.sum(x ** 2), (X23,)),
    "pytree_in_out": (lambda n: lambda d: (d["a"] @ d["b"], n.sum(d["a"])), ({"a": X23, "b": arr(3, 2)},)),
}


@pytest.mark.parametrize("name", sorted(F_JAC))
@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobians_are_unchanged(name, jac):
    build, args = F_JAC[name]
    both(lambda t, n: getattr(t, jac)(build(n)), *args)
    both(lambda t, n: t.vmap(getattr(t, jac)(build(n))), *jax.tree_util.tree_map(lambda a: np.stack([a, a * 2]), args))
    both(lambda t, n: getattr(t, jac)(t.vmap(build(n))), *jax.tree_util.tree_map(lambda a: np.stack([a, -a]), args))


def test_hessian_of_vmapped_function():
    both(lambda t, n: t.vmap(t.hessian(lambda x: n.sum(n.sin(x) * x))), X34)


# custom_jvp / custom_vjp built once per library from the custom-derivative tests' factories.
CUSTOM = {
    "log1pexp": lambda t, n: make_log1pexp(t.custom_jvp, n),
    "two_arg": lambda t, n: make_two_arg(t.custom_jvp, n),
    "defjvps": lambda t, n: make_defjvps(t.custom_jvp, n),
    "nondiff_jvp": lambda t, n: functools.partial(
        make_nondiff(functools.partial(t.custom_jvp, nondiff_argnums=(0,)), n), n.sin),
    "clip_gradient": lambda t, n: functools.partial(make_clip_gradient(t.custom_vjp, n), -0.5, 0.5),
    "clip_gradient_bounds": lambda t, n: lambda lo, x: make_clip_gradient(t.custom_vjp, n)(-n.abs(lo), 0.1, x),
    "pytree_vjp": lambda t, n: lambda w, b, x: make_pytree_vjp(t.custom_vjp, n)({"w": w, "b": b}, x)["y"],
}
# name -> (arguments, in_axes); the values are scaled so that clip_gradient clips some cotangents
CUSTOM_ARGS = {
    "log1pexp": ((X34 * 30,), 0),
    "two_arg": ((X34, V4), (0, None)),
    "defjvps": ((X34, X34.T), (1, 0)),
    "nondiff_jvp": ((X34,), 1),
    "clip_gradient": ((X34 * 10,), 0),
    "clip_gradient_bounds": ((V3, X34 * 10), (0, 0)),
    "pytree_vjp": ((V3, V4, V3), (0, None, 0)),
}


def _sum_out(f, n):
    return lambda *a: n.sum(f(*a))


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_custom_derivatives_under_vmap(name):
    args, in_axes = CUSTOM_ARGS[name]
    both(lambda t, n: t.vmap(CUSTOM[name](t, n), in_axes=in_axes), *args)


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_vmap_of_grad_of_custom_derivatives(name):
    args, in_axes = CUSTOM_ARGS[name]
    argnums = tuple(range(len(args)))
    both(lambda t, n: t.vmap(t.grad(_sum_out(CUSTOM[name](t, n), n), argnums=argnums), in_axes=in_axes), *args)


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_grad_of_vmap_of_custom_derivatives(name):
    args, in_axes = CUSTOM_ARGS[name]
    argnums = tuple(range(len(args)))
    both(lambda t, n: t.grad(_sum_out(t.vmap(CUSTOM[name](t, n), in_axes=in_axes), n), argnums=argnums), *args)


@pytest.mark.parametrize("name", ["two_arg", "clip_gradient", "log1pexp"])
def test_custom_derivatives_under_jit_and_nested_vmap(name):
    args, in_axes = CUSTOM_ARGS[name]
    args = tuple(np.stack([a, a * 0.5], axis=-1) for a in args)

    def build(t, n):
        per = t.grad(_sum_out(CUSTOM[name](t, n), n))
        return t.jit(t.vmap(t.vmap(per, in_axes=in_axes), in_axes=-1, out_axes=1))

    both(build, *args)


def make_mixing_jvp(cj, n):
    """A rule whose tangent mixes every argument's tangent (a zero one included)."""

    @cj
    def f(x, y):
        return n.sin(x) * y

    f.defjvp(lambda p, t: (f(*p), 2.0 * t[0] + 0.5 * t[1]))
    return f


@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0)])
def test_grad_of_vmap_of_custom_jvp_with_a_zero_tangent(in_axes):
    """grad w.r.t. x only: y's tangent is a symbolic zero, batched when y is; the rule sees one element's."""
    x = V3 if in_axes[0] is None else X23
    y = V3 if in_axes[1] is None else X23

    def build(t, n):
        f = make_mixing_jvp(t.custom_jvp, n)
        return t.grad(lambda x, y: n.sum(t.vmap(f, in_axes=in_axes)(x, y)))

    got = both(build, x, y)
    assert np.shape(got) == np.shape(x)


def make_passthrough_jvp(cj, n):
    """A symbolic-zeros rule that returns x's tangent as it is: a symbolic zero when x is not differentiated."""

    @cj
    def f(x, w):
        return x + 0.0 * w

    f.defjvp(lambda p, t: (f(*p), t[0]), symbolic_zeros=True)
    return f


@pytest.mark.parametrize("in_axes", [(0, None), (0, 0), (None, 0)])
def test_custom_jvp_symbolic_zero_tangent_passes_through_vmap(in_axes):
    """Differentiating w only: the rule sees one element's zero tangent, and the output tangent is the batch's."""
    x = X34 if in_axes[0] == 0 else V4
    w = X34 if in_axes[1] == 0 else V4

    def build(t, n):
        f = make_passthrough_jvp(t.custom_jvp, n)
        return lambda w: t.jvp(lambda v: t.vmap(f, in_axes=in_axes)(x, v), (w,), (n.ones_like(w),))

    # (jax 0.10.2 under jit fails here: a closed-over NumPy operand reaches the symbolic-zeros rule as a
    # non-canonical constant)
    p, tan = both(build, w, jit=False)
    assert np.shape(tan) == (3, 4)
    assert not np.asarray(tan).any()
    both(lambda t, n: t.grad(lambda v: n.sum(t.vmap(make_passthrough_jvp(t.custom_jvp, n), in_axes=in_axes)(x, v))),
         w, jit=False)


def ckpt(t, n, **kw):
    return t.checkpoint(lambda x, w: n.sin(n.sin(x @ w)) * n.sum(x), **kw)


@pytest.mark.parametrize("policy", [None, "dots_saveable", "nothing_saveable"])
def test_checkpoint_under_vmap(policy):
    def kw(t):
        return {} if policy is None else {"policy": getattr(t.checkpoint_policies, policy)}

    w = arr(4, 2)
    both(lambda t, n: t.vmap(ckpt(t, n, **kw(t)), in_axes=(0, None)), X34, w)
    both(lambda t, n: t.vmap(t.grad(lambda x, w: n.sum(ckpt(t, n, **kw(t))(x, w)), argnums=(0, 1)),
                             in_axes=(0, None)), X34, w)
    both(lambda t, n: t.grad(lambda x, w: n.sum(t.vmap(ckpt(t, n, **kw(t)), in_axes=(0, None))(x, w)),
                             argnums=(0, 1)), X34, w)
    closed = ftrans.make_jaxpr(ftrans.vmap(ckpt(ftrans, fjnp, **kw(ftrans)), in_axes=(0, None)))(X34, w)
    typecheck(closed)
    assert [e.primitive.name for e in closed.eqns] == ["remat2"]  # still one rematerialized call, batched


def test_checkpoint_of_vmap():
    both(lambda t, n: t.grad(lambda x: n.sum(t.checkpoint(t.vmap(lambda r: n.sin(n.sin(r)) * r))(x))), X34)


COMPOSITIONS = {
    "vmap_jit_vmap": (lambda t, n: t.vmap(t.jit(t.vmap(lambda a, b: n.sin(a) * b, in_axes=(1, None))),
                                          in_axes=(2, 0)), (arr(2, 3, 4), arr(4, 2))),
    "closure_over_a_jit_tracer": (lambda t, n: t.jit(lambda w: t.vmap(lambda a: a * w)(X34)), (V4,)),
    "closure_over_an_outer_batch": (lambda t, n: t.vmap(lambda w: t.vmap(lambda a: n.sum(a * w))(X34)), (arr(2, 4),)),
    "jit_closing_over_a_batched_value": (lambda t, n: t.vmap(lambda w: t.jit(lambda a: a @ w)(X34)),
                                         (arr(2, 4, 3),)),
    "grad_through_a_closure": (lambda t, n: t.grad(lambda w: n.sum(t.vmap(lambda a: n.sin(a @ w))(X34))),
                               (arr(4, 2),)),
    "checkpoint_closing_over_a_batched_value": (lambda t, n: t.vmap(lambda w: t.grad(
        lambda v: n.sum(t.checkpoint(lambda a: n.sin(a * w))(v)))(V4)), (X34,)),
    "checkpoint_name_policy": (lambda t, n: t.vmap(t.grad(lambda a: n.sum(t.checkpoint(
        lambda b: n.sin(t.ad_checkpoint.checkpoint_name(n.sin(b), "s")) * b,
        policy=t.checkpoint_policies.save_only_these_names("s"))(a)))), (X34,)),
    "optimization_barrier": (lambda t, n: t.vmap(t.grad(lambda a, b: n.sum(t.lax.optimization_barrier(
        (a * 2, b))[0] * b)), in_axes=(1, None)), (X34, V3)),
    "jvp_of_jit": (lambda t, n: t.vmap(lambda a, b: t.jvp(t.jit(n.sin), (a,), (b,)), in_axes=(0, None)), (X34, V4)),
    "vjp_with_a_batched_cotangent": (lambda t, n: t.vmap(lambda c: t.vjp(n.sin, V4)[1](c)), (X34,)),
    "linear_transpose": (lambda t, n: t.vmap(lambda c: t.linear_transpose(lambda v: v * 2.0 + n.sum(v), V4)(c)),
                         (X34,)),
    "linearize": (lambda t, n: t.vmap(lambda a: t.linearize(n.sin, a)[1](a * 2)), (X34,)),
    "grad_under_vmap_with_axis_size": (lambda t, n: t.grad(lambda x: n.sum(t.vmap(
        lambda: n.sin(x), in_axes=(), axis_size=3)())), (V4,)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_compositions_match_jax(name):
    build, args = COMPOSITIONS[name]
    both(build, *args)


# ----------------------------------------------------------------------------
# Errors: the exception class jax raises, and a message naming the problem


def raises_like_jax(exc, match, build, *args, **kwargs):
    with pytest.raises(exc, match=match):
        build(*FT)(*args, **kwargs)
    with pytest.raises(exc):
        build(*JX)(*args, **kwargs)


def test_inconsistent_sizes_list_every_mapped_argument():
    msg = (r"inconsistent sizes for the mapped axis:\n  argument args\[0\] has size 3 along its mapped axis\n"
           r"  argument args\[1\]\['k'\]\[0\] has size 3 along its mapped axis\n"
           r"  argument args\[1\]\['k'\]\[1\] has size 4 along its mapped axis\n")
    raises_like_jax(ValueError, msg, lambda t, n: t.vmap(lambda a, b: a),
                    X34, {"k": (V3, arr(4, 2))})
    raises_like_jax(ValueError, r"argument args\[1\] has size 4 along its mapped axis",
                    lambda t, n: t.vmap(lambda a, b: a, in_axes=(0, 1)), X34, X34)
    with pytest.raises(ValueError, match=r"args\[0\] has size 3 along its mapped axis\n  axis_size=5"):
        ftrans.vmap(lambda a: a, axis_size=5)(X34)


def test_in_axes_not_matching_the_arguments():
    raises_like_jax(ValueError, r"len\(in_axes\)=1, len\(args\)=2",
                    lambda t, n: t.vmap(lambda a, b: a, in_axes=(0,)), X34, V3)
    raises_like_jax(ValueError, r"in_axes specification must be a tree prefix of the corresponding value.*"
                                r"\{'a': 0, 'c': 0\}",
                    lambda t, n: t.vmap(lambda d: d["a"], in_axes=({"a": 0, "c": 0},)), {"a": X34, "b": V3})
    raises_like_jax(ValueError, "tree prefix", lambda t, n: t.vmap(lambda p: p[0], in_axes=((0, 0, 0),)), (X34, X34))
    raises_like_jax(TypeError, r"in_axes must be an int, None, or a tuple.*got \{'a': 0\}",
                    lambda t, n: t.vmap(lambda d: d["a"], in_axes={"a": 0}), {"a": X34})
    raises_like_jax(TypeError, "in_axes entries must be ints or None, got '0'",
                    lambda t, n: t.vmap(lambda a: a, in_axes=("0",)), X34)
    raises_like_jax(TypeError, "in_axes entries must be ints or None, got True",
                    lambda t, n: t.vmap(lambda a: a, in_axes=(True,)), X34)
    raises_like_jax(TypeError, r"in_axes must be an int, None, or a tuple.*got 1\.5",
                    lambda t, n: t.vmap(lambda a: a, in_axes=1.5), X34)
    raises_like_jax(TypeError, r"in_axes must be an int, None, or a tuple.*got np\.int64\(1\)",
                    lambda t, n: t.vmap(lambda a: a, in_axes=np.int64(1)), X34)


def test_axis_out_of_range():
    raises_like_jax(ValueError, r"map its argument along axis 2, which implies that its rank should be at least 3, "
                                r"but is only 2 \(its shape is \(3, 4\)\); argument args\[1\]",
                    lambda t, n: t.vmap(lambda a, b: a, in_axes=(0, 2)), X34, X34)
    raises_like_jax(ValueError, "along axis -3", lambda t, n: t.vmap(lambda a: a, in_axes=-3), X34)
    raises_like_jax(ValueError, r"rank should be at least 1, but is only 0",
                    lambda t, n: t.vmap(lambda a: a), np.float32(1.0))


def test_out_axes_none_for_a_batched_output():
    raises_like_jax(ValueError, r"out_axes=None for output \['q'\]\[0\], but that output is batched",
                    lambda t, n: t.vmap(lambda a, b: {"p": a, "q": (a + b, b)}, in_axes=(0, None),
                                        out_axes={"p": 0, "q": (None, None)}), X34, V4)
    raises_like_jax(ValueError, "out_axes=None for the output, but that output is batched",
                    lambda t, n: t.vmap(lambda a: a, out_axes=None), X34)


def test_out_axes_out_of_range():
    raises_like_jax(ValueError, r"out_axes=2 is out of range for the output: its unbatched rank is 1",
                    lambda t, n: t.vmap(lambda a: a, out_axes=2), X34)
    raises_like_jax(ValueError, r"out_axes=-3 is out of range for output \[1\]",
                    lambda t, n: t.vmap(lambda a, b: (a, b), in_axes=(0, None), out_axes=(0, -3)), X34, V4)
    raises_like_jax(ValueError, r"out_axes=3 is out of range for output \[1\]: its unbatched rank is 1",
                    lambda t, n: t.vmap(lambda a, b: (a, b), in_axes=(0, None), out_axes=(0, 3)), X34, V4)
    # JAX words it as NumPy's axis errors do: "axis -4 is out of bounds"
    for mod in (FT, JX):
        with pytest.raises(ValueError, match="axis -4 is out of bounds"):
            mod[0].vmap(lambda a: a, out_axes=-4)(np.ones((3, 4, 5), np.float32))
    raises_like_jax(TypeError, r"traced for vmap returned a value of type <class 'str'> \('hello'\).*not a valid JAX type",
                    lambda t, n: t.vmap(lambda a: "hello"), X34)
    raises_like_jax(ValueError, r"out_axes specification must be a tree prefix",
                    lambda t, n: t.vmap(lambda a: [a, a], out_axes=(0, 1)), X34)


def test_no_mapped_input_and_no_axis_size():
    raises_like_jax(ValueError, "must have at least one non-None value in in_axes, or be given axis_size",
                    lambda t, n: t.vmap(lambda a: a, in_axes=None), X34)
    # no array among the arguments at all: JAX's other wording, which names the arguments
    empty = r"must be passed at least one argument containing an array or axis_size must be specified, got empty"
    raises_like_jax(ValueError, empty + r" \*args=\(\) and \*\*kwargs=\{\}",
                    lambda t, n: t.vmap(lambda: 1.0, in_axes=()))
    raises_like_jax(ValueError, empty + r" \*args=\(\{\},\)", lambda t, n: t.vmap(lambda x: x), {})


def test_not_a_function():
    with pytest.raises(TypeError, match="vmap: expected a function, got int"):
        ftrans.vmap(3)


# ---------------------------------------------------------------- float0 outputs
def _float0_cases(lib):
    g1 = lib.grad(lambda x, n: x * n, argnums=1, allow_int=True)
    g2 = lib.grad(lambda x, n: (x * n).sum(), argnums=(0, 1), allow_int=True)
    return [
        ("scalar_int_unbatched", lib.vmap(g1, in_axes=(0, None)), (np.arange(3.0, dtype=np.float32), 2)),
        ("scalar_int_batched", lib.vmap(g1, in_axes=(0, 0)),
         (np.arange(3.0, dtype=np.float32), np.arange(3, dtype=np.int32))),
        ("pytree_out_axes1", lib.vmap(g2, in_axes=(0, None), out_axes=1),
         (np.ones((4, 2), np.float32), np.arange(2, dtype=np.int32))),
        ("nested", lib.vmap(lib.vmap(g1, in_axes=(0, None)), in_axes=(0, None)),
         (np.ones((2, 3), np.float32), 3)),
        ("out_axes_none", lib.vmap(g1, in_axes=(0, None), out_axes=None), (np.arange(3.0, dtype=np.float32), 2)),
    ]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("case", range(5))
def test_vmap_of_float0_output_matches_jax(case, jit):
    name, f, args = _float0_cases(ftrans)[case]
    _, jf, _ = _float0_cases(jax)[case]
    if jit:
        f = ftrans.jit(f)
    got, want = f(*args), jax_jit_call(jf, *args)  # (the oracle is jitted either way)
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(gl) == len(wl), name
    for g, w in zip(gl, wl):
        assert np.shape(g) == np.shape(w), name
        assert np.asarray(g).dtype == np.asarray(w).dtype, name
        if np.asarray(w).dtype != jax.dtypes.float0:
            np.testing.assert_allclose(np.asarray(g), np.asarray(w))
