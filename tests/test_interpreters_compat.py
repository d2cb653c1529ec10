"""JAX's documented way to give a user primitive its rules (``jax.interpreters.ad``/``batching``/``mlir``,
the "Writing custom primitives" tutorial's ``multiply_add``), run on ftrans's ``ftrans.interpreters`` and on
jax, with the same results under jit, grad, vmap and their compositions."""

import types

import jax
import jax.extend.core
import jax.interpreters.ad
import jax.interpreters.batching
import jax.interpreters.mlir
import jax.numpy
import numpy as np
import pytest
from jax import lax as jax_lax

import ftrans
import ftrans.extend.core
import ftrans.interpreters.ad
import ftrans.interpreters.batching
import ftrans.interpreters.mlir
import ftrans.interpreters.xla
import ftrans.lax
import ftrans.numpy

FT = types.SimpleNamespace(api=ftrans, core=ftrans.extend.core, ShapedArray=ftrans.core.ShapedArray,
                           ad=ftrans.interpreters.ad, batching=ftrans.interpreters.batching,
                           mlir=ftrans.interpreters.mlir, lax=ftrans.lax, jnp=ftrans.numpy)
JX = types.SimpleNamespace(api=jax, core=jax.extend.core, ShapedArray=jax.core.ShapedArray,
                           ad=jax.interpreters.ad, batching=jax.interpreters.batching,
                           mlir=jax.interpreters.mlir, lax=jax_lax, jnp=jax.numpy)


def _tutorial(m, name):
    """The tutorial's program, written once against namespace ``m``."""
    ad, batching, mlir, lax = m.ad, m.batching, m.mlir, m.lax
    p = m.core.Primitive(name)

    def multiply_add_prim(x, y, z):
        return p.bind(x, y, z)

    def square_add_prim(a, b):
        return multiply_add_prim(a, a, b)

    p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))

    def abstract_eval(xs, ys, zs):
        assert xs.shape == ys.shape == zs.shape
        return m.ShapedArray(xs.shape, xs.dtype)

    p.def_abstract_eval(abstract_eval)
    mlir.register_lowering(p, mlir.lower_fun(lambda x, y, z: lax.add(lax.mul(x, y), z), multiple_results=False))

    def jvp(arg_values, arg_tangents):
        x, y, z = arg_values
        xt, yt, zt = arg_tangents
        primal_out = multiply_add_prim(x, y, z)

        def make_zero(tan):
            return lax.full_like(x, 0) if type(tan) is ad.Zero else tan

        out_t = multiply_add_prim(make_zero(xt), y, multiply_add_prim(x, make_zero(yt), make_zero(zt)))
        return primal_out, out_t

    ad.primitive_jvps[p] = jvp

    def transpose(ct, x, y, z):
        if not ad.is_undefined_primal(x):
            assert ad.is_undefined_primal(y)
            ct_y = ad.Zero(y.aval) if type(ct) is ad.Zero else multiply_add_prim(x, ct, lax.full_like(x, 0))
            return None, ct_y, ct
        assert ad.is_undefined_primal(x)
        ct_x = ad.Zero(x.aval) if type(ct) is ad.Zero else multiply_add_prim(ct, y, lax.full_like(y, 0))
        return ct_x, None, ct

    ad.primitive_transposes[p] = transpose

    def batch(vector_arg_values, batch_axes):
        assert batch_axes[0] == batch_axes[1] == batch_axes[2]
        return multiply_add_prim(*vector_arg_values), batch_axes[0]

    batching.primitive_batchers[p] = batch
    assert p in ad.primitive_jvps and p in ad.primitive_transposes
    return p, square_add_prim


def _runs(m, name):
    api, jnp = m.api, m.jnp
    p, sq = _tutorial(m, name)
    x = np.float32(2.0)
    xs = np.array([1.0, 2.0, 3.0], np.float32)
    return [
        sq(x, np.float32(10.0)),
        api.jit(sq)(x, np.float32(10.0)),
        api.jvp(sq, (x, np.float32(10.0)), (np.float32(1.0), np.float32(1.0))),
        api.grad(sq)(x, np.float32(10.0)),
        api.jit(api.grad(sq, argnums=(0, 1)))(x, np.float32(10.0)),
        api.vmap(sq)(xs, xs),
        api.vmap(sq, in_axes=(1, 1), out_axes=1)(np.stack([xs, xs]), np.stack([xs, xs])),
        api.jit(api.vmap(sq))(xs, xs),
        api.jvp(api.vmap(sq), (xs, xs), (xs, xs)),
        api.vjp(lambda a: jnp.sum(sq(a, a)), xs)[1](np.float32(1.0)),
    ]


def test_multiply_add_tutorial_matches_jax():
    got, want = _runs(FT, "ft_multiply_add"), _runs(JX, "jx_multiply_add")
    for g, w in zip(got, want):
        for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(w)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_tables_are_dict_like():
    ad, batching = FT.ad, FT.batching
    p, _ = _tutorial(FT, "ft_multiply_add_tables")
    assert p in batching.primitive_batchers and batching.primitive_batchers.get(p) is not None
    assert ad.primitive_jvps.get(p) is not None and p in ad.primitive_transposes
    assert ftrans.lax.sin_p in ad.primitive_jvps
    assert ad.primitive_jvps.get(FT.core.Primitive("never_ruled")) is None
    assert ftrans.lax.sin_p in batching.primitive_batchers
    rule = batching.primitive_batchers[ftrans.lax.sin_p]  # ftrans's own rule, with JAX's signature
    out, d = rule([ftrans.numpy.ones((2, 3))], [1])
    assert d == 1 and out.shape == (2, 3)
    assert batching.not_mapped is None


def test_defjvp_deflinear_and_vectorized():
    ad, batching, mlir = FT.ad, FT.batching, FT.mlir
    cube = FT.core.Primitive("interp_cube")
    cube.def_impl(lambda x: x ** 3)
    cube.def_abstract_eval(lambda x: x)
    mlir.register_lowering(cube, mlir.lower_fun(lambda x: x * x * x, multiple_results=False))
    ad.defjvp(cube, lambda g, x: g * 3 * x * x)
    batching.defvectorized(cube)
    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_allclose(ftrans.vmap(ftrans.grad(cube.bind))(x), 3 * x * x)
    np.testing.assert_allclose(ftrans.jit(ftrans.vmap(cube.bind))(x), x ** 3)

    dbl = FT.core.Primitive("interp_double")
    dbl.def_impl(lambda x: 2 * x)
    dbl.def_abstract_eval(lambda x: x)
    mlir.register_lowering(dbl, mlir.lower_fun(lambda x: x + x, multiple_results=False))
    ad.deflinear(dbl, lambda ct: [dbl.bind(ct)])
    batching.defvectorized(dbl)
    np.testing.assert_allclose(ftrans.grad(lambda x: dbl.bind(x).sum())(x), [2.0, 2.0])
    np.testing.assert_allclose(ftrans.linear_transpose(dbl.bind, x)(x)[0], 2 * x)

    mad = FT.core.Primitive("interp_fma")
    mad.def_impl(lambda x, y: x * y + 1)
    mad.def_abstract_eval(lambda x, y: x)
    mlir.register_lowering(mad, mlir.lower_fun(lambda x, y: x * y + 1, multiple_results=False))
    batching.defbroadcasting(mad)
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(ftrans.vmap(mad.bind, in_axes=(0, None))(m, m[0]), m * m[0] + 1)
    np.testing.assert_allclose(ftrans.vmap(mad.bind, in_axes=(1, 0))(m, m.T), m.T * m.T + 1)


def test_text_lowering_rule_is_refused_with_a_pointer_to_lower_fun():
    p = FT.core.Primitive("interp_bad_lowering")
    with pytest.raises(NotImplementedError, match="lower_fun"):
        FT.mlir.register_lowering(p, lambda ctx, x: [x], platform="cpu")


def test_apply_primitive_and_platform_lowering():
    p = FT.core.Primitive("interp_plat")
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda x: ftrans.interpreters.xla.apply_primitive(p, x))
    from ftrans.lowering import compat

    here = compat.lowering_platform(ftrans.devices()[0])  # "cpu", or "cuda" on an NVIDIA GPU
    FT.mlir.register_lowering(p, FT.mlir.lower_fun(lambda x: x + 1, multiple_results=False), platform=here)
    np.testing.assert_allclose(p.bind(np.float32(1.0)), 2.0)
    np.testing.assert_allclose(ftrans.jit(p.bind)(np.float32(1.0)), 2.0)


def test_defjvp2_defbilinear_deflinear2_match_jax():
    def program(m, tag):
        ad, mlir, api = m.ad, m.mlir, m.api
        ex = m.core.Primitive(f"{tag}_exp")
        ex.def_impl(np.exp)
        ex.def_abstract_eval(lambda x: x)
        mlir.register_lowering(ex, mlir.lower_fun(lambda x: m.lax.exp(x), multiple_results=False))
        ad.defjvp2(ex, lambda t, ans, x: t * ans)
        mul = m.core.Primitive(f"{tag}_mul")
        mul.def_impl(np.multiply)
        mul.def_abstract_eval(lambda x, y: x)
        mlir.register_lowering(mul, mlir.lower_fun(lambda x, y: x * y, multiple_results=False))
        ad.defbilinear(mul, lambda ct, x, y: mul.bind(ct, y), lambda ct, x, y: mul.bind(x, ct))
        neg = m.core.Primitive(f"{tag}_neg")
        neg.def_impl(np.negative)
        neg.def_abstract_eval(lambda x: x)
        mlir.register_lowering(neg, mlir.lower_fun(lambda x: -x, multiple_results=False))
        ad.deflinear2(neg, lambda ct, x: [neg.bind(ct)])

        def f(x, y):
            return neg.bind(mul.bind(ex.bind(x), y)).sum()

        x = np.array([0.5, 1.0], np.float32)
        return [api.grad(f, argnums=(0, 1))(x, x), api.jit(api.grad(f))(x, x), api.jvp(f, (x, x), (x, x))]

    got, want = program(FT, "ft2"), program(JX, "jx2")
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def _lowering_only(m, name):
    """A primitive with an abstract eval and a ``lower_fun`` lowering, no eager rule (``def_impl``)."""
    p = m.core.Primitive(name)
    p.def_abstract_eval(lambda x: x)
    m.mlir.register_lowering(p, m.mlir.lower_fun(lambda x: x * 2 + 1, multiple_results=False))
    return p


def _in_control_flow(m, p, where):
    lax, x = m.lax, m.jnp.arange(3.0)
    if where == "cond":
        return lax.cond(True, p.bind, lambda v: v, x)
    if where == "switch":
        return lax.switch(1, [lambda v: v, p.bind], x)
    if where == "scan":
        return lax.scan(lambda c, _: (p.bind(c), c), x, None, length=3)
    if where == "while":
        return lax.while_loop(lambda c: c[0] < 20, p.bind, x)
    return lax.fori_loop(0, 2, lambda i, c: p.bind(c), x)


@pytest.mark.parametrize("where", ["cond", "switch", "scan", "while", "fori"])
def test_a_lowering_only_primitive_runs_in_eager_control_flow_as_jax(where):
    """JAX runs an eager cond/while_loop/scan compiled, so a primitive with only a lowering rule works in
    their bodies (alone, eagerly, it has no evaluation rule in either)."""
    got = _in_control_flow(FT, _lowering_only(FT, f"interp_lowers_only_{where}"), where)
    want = _in_control_flow(JX, _lowering_only(JX, f"interp_lowers_only_{where}"), where)
    for g, w in zip(ftrans.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    p = _lowering_only(FT, f"interp_lowers_only_alone_{where}")
    with pytest.raises(NotImplementedError, match="Evaluation rule for"):
        p.bind(np.float32(1.0))


def test_a_primitive_without_any_rule_in_eager_control_flow_fails_only_when_reached():
    p = FT.core.Primitive("interp_no_rules")
    p.def_abstract_eval(lambda x: x)
    with pytest.raises(NotImplementedError, match="Evaluation rule for 'interp_no_rules'"):
        ftrans.lax.cond(True, p.bind, lambda v: v, np.float32(1.0))
    # a body that never runs is not compiled for it
    assert ftrans.lax.while_loop(lambda c: c > 5, p.bind, np.float32(1.0)) == 1.0
    assert ftrans.lax.cond(False, p.bind, lambda v: v, np.float32(2.0)) == 2.0
