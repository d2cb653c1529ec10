"""Gaps JAX's own test files found (custom_api, lax_numpy_indexing, ...), against jax: dead-code elimination
of ``custom_jvp``/``custom_vjp`` calls (the unread output goes from the call's body and from its rules), the
printed ``custom_lin`` equation, ``disable_bwd_checks``, and the equations of a traced ``dynamic_slice`` start
given as a Python int (weak-typed)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.interpreters import partial_eval as jpe

import ftrans
import ftrans.numpy as fjnp
from ftrans.extend.core import ClosedJaxpr as FClosedJaxpr
from ftrans.extend.core import jaxpr_as_fun as f_jaxpr_as_fun
from ftrans.interpreters import partial_eval as fpe

LIBS = {"jax": (jax, jjnp), "ftrans": (ftrans, fjnp)}


def _custom_vjp_f(api, np_):
    @api.custom_vjp
    def f(x, y):
        return np_.sin(x), x + np_.cos(y)

    def f_fwd(x, y):
        return f(x, y), (np_.cos(x), np_.sin(y))

    def f_bwd(res, cts):
        cos_x, sin_y = res
        ct_a, ct_b = cts
        return 2.0 * cos_x * ct_a + 1.5 * ct_b, -0.5 * sin_y * ct_b

    f.defvjp(f_fwd, f_bwd)
    return f


def _custom_jvp_f(api, np_):
    @api.custom_jvp
    def f(x, y):
        return np_.sin(x), x + np_.cos(y)

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        dx, dy = tangents
        return f(x, y), (2.0 * np_.cos(x) * dx, 1.5 * dx - 0.5 * np_.sin(y) * dy)

    return f


def _dce_fun(lib, jaxpr, used):
    if lib == "jax":
        j, used_in = jpe.dce_jaxpr(jaxpr, used)
        return j, used_in, jax.extend.core.jaxpr_as_fun(jax.extend.core.ClosedJaxpr(j, []))
    j, used_in = fpe.dce_jaxpr(jaxpr, used)
    return j, used_in, f_jaxpr_as_fun(FClosedJaxpr(j, []))


@pytest.mark.parametrize("kind", ["custom_vjp", "custom_jvp"])
@pytest.mark.parametrize("used", [(True, False), (False, True), (True, True)])
def test_dce_of_custom_call_prunes_its_body_and_rules(kind, used):
    x, y = 0.1, -1.3
    got = {}
    for lib, (api, np_) in LIBS.items():
        f = (_custom_vjp_f if kind == "custom_vjp" else _custom_jvp_f)(api, np_)
        jaxpr = api.make_jaxpr(f)(x, y).jaxpr
        j, used_in, fun = _dce_fun(lib, jaxpr, list(used))
        (eqn,) = j.eqns
        body = [str(e.primitive) for e in eqn.params["call_jaxpr"].eqns]
        assert len(eqn.outvars) == sum(used)
        g = api.grad(lambda *a: fun(*a)[0], argnums=(0, 1))
        vals = [fun(x, y)[0], g(x, y), api.jit(g)(x, y)]
        if kind == "custom_jvp":
            vals.append(api.jvp(lambda *a: fun(*a)[0], (x, y), (1.0, 1.0)))
        got[lib] = (body, list(used_in), vals)
    assert got["ftrans"][0] == got["jax"][0]
    assert got["ftrans"][1] == got["jax"][1]
    for a, b in zip(jax.tree_util.tree_leaves(got["ftrans"][2]), jax.tree_util.tree_leaves(got["jax"][2])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_dce_of_custom_vjp_inside_jit_keeps_gradients():
    """The compile-time dead-code elimination prunes an unread custom_vjp output; its gradient is unchanged."""
    out = {}
    for lib, (api, np_) in LIBS.items():
        f = _custom_vjp_f(api, np_)
        out[lib] = api.jit(api.grad(lambda a, b: f(a, b)[1], argnums=(0, 1)))(0.3, 0.7)
    np.testing.assert_allclose(np.asarray(out["ftrans"]), np.asarray(out["jax"]), rtol=1e-6)


def test_custom_lin_prints_as_jax():
    text = {}
    for lib, (api, np_) in LIBS.items():
        @api.custom_vjp
        def f(x):
            return x + 1

        def f_fwd(x):
            return f(x), ()

        def f_bwd(_, g):
            return (g,)

        f.defvjp(f_fwd, f_bwd)
        x = np_.array([4.2], dtype=np.float32)
        jaxpr = api.make_jaxpr(lambda x: api.jvp(f, (x,), (x,)))(x)
        dce = jpe.dce_jaxpr if lib == "jax" else fpe.dce_jaxpr
        j, _ = dce(jaxpr.jaxpr, [False, True])
        text[lib] = j.pretty_print(use_color=False)
    assert text["ftrans"] == text["jax"]
    assert "in_zeros=[False]" in text["ftrans"] and "bwd=f_bwd" in text["ftrans"]


def test_disable_bwd_checks_lets_a_cotangent_of_another_shape_through():
    got = {}
    for lib, (api, np_) in LIBS.items():
        @api.custom_vjp
        def foo(x, y):
            return x

        foo.defvjp(lambda x, y: (x, None), lambda _, g: (np_.zeros(3), np_.zeros(3)))
        g = api.grad(lambda x, y: foo(x, y).sum(), 1)
        api.config.update("jax_disable_bwd_checks", True)
        try:
            got[lib] = (g(np_.ones(3), np_.ones(4)), api.jit(g)(np_.ones(3), np_.ones(4)))
        finally:
            api.config.update("jax_disable_bwd_checks", False)
    for a, b in zip(got["ftrans"], got["jax"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bwd_shape_mismatch_still_raises_by_default():
    @ftrans.custom_vjp
    def foo(x, y):
        return x

    foo.defvjp(lambda x, y: (x, None), lambda _, g: (fjnp.zeros(3), fjnp.zeros(3)))
    with pytest.raises(ValueError, match=r"must produce an output with the same type.*f32\[3\].*f32\[4\]"):
        ftrans.grad(lambda x, y: foo(x, y).sum(), 1)(fjnp.ones(3), fjnp.ones(4))


@pytest.mark.parametrize("case", ["getitem", "dynamic_slice", "dynamic_update_slice", "strong_index"])
def test_traced_weak_start_index_equations_match_jax(case):
    """A Python-int start traced as a weak int32 is made strong before its wrap-around add, as in JAX."""
    prims, vals = {}, {}
    for lib, (api, np_) in LIBS.items():
        fn = {
            "getitem": lambda x, i: x[i],
            "dynamic_slice": lambda x, i: api.lax.dynamic_slice(x, (i,), (2,)),
            "dynamic_update_slice": lambda x, i: api.lax.dynamic_update_slice(x, np_.ones(2), (i,)),
            "strong_index": lambda x, i: x[i.astype(np.int32)],
        }[case]
        x = np_.arange(4.0)
        jaxpr = api.make_jaxpr(fn)(x, 2)
        prims[lib] = [(str(e.primitive), e.params.get("weak_type")) for e in jaxpr.jaxpr.eqns]
        vals[lib] = [api.jit(fn)(x, i) for i in (-3, -1, 0, 2)]
    assert prims["ftrans"] == prims["jax"]
    for a, b in zip(vals["ftrans"], vals["jax"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_batched_while_predicate_recomputed_in_body_is_named_body_pred():
    """A ``while`` whose predicate ``vmap`` batches recomputes the predicate in its body; its operations are
    named ``while/body_pred/...`` in the StableHLO locations, as JAX's (the body's own stay ``while/body``)."""
    texts = {}
    for lib, (api, np_) in LIBS.items():
        @api.named_scope("foo")
        def f(x):
            @api.named_scope("bar")
            def body(x):
                return x + 1.0

            @api.named_scope("bar_cond")
            def cond(x):
                return x < 5.0

            return api.lax.while_loop(cond, body, x)

        g = api.vmap(lambda x, t: api.jvp(f, (x,), (t,)))
        texts[lib] = api.jit(g).lower(np_.arange(2.0), np_.ones(2)).as_text(debug_info=True)
        np.testing.assert_array_equal(np.asarray(api.jit(g)(np_.arange(2.0) + 3, np_.ones(2))[0]), [5.0, 5.0])
    for name in ("vmap(jvp(foo))/while/body/bar/add", "vmap(jvp(foo))/while/body_pred/bar_cond/lt",
                 "vmap(jvp(foo))/while/cond/bar_cond/lt"):
        assert name in texts["jax"]
        assert name in texts["ftrans"], name
    assert "while/body/bar_cond" not in texts["ftrans"]


def test_in_place_of_last_name_stack():
    from ftrans.core.ir import NameStack

    inner = NameStack().in_place_of_last("body_pred").extend("c")
    assert str(inner) == "body_pred/c"
    assert str(NameStack(("jit(f)/while/body",)) + inner) == "jit(f)/while/body_pred/c"
    assert str(NameStack(("outer",)).transform("vmap").extend("f")) == "outer/vmap(f)"


def test_pmap_jaxpr_layout_differs_from_jax_as_documented():
    """docs/differences.md, "pmap": jax 0.10 stages pmap as jit(shard_map(...)); ftrans as one pmap equation.
    The names inside are the same."""
    eqns = {}
    for lib, (api, np_) in LIBS.items():
        @api.named_scope("foo")
        @api.pmap
        def f(x):
            with api.named_scope("bar"):
                return x + 1

        jaxpr = api.make_jaxpr(f)(np_.ones(1)).jaxpr
        eqns[lib] = jaxpr.eqns[0]
        assert str(jaxpr.eqns[0].source_info.name_stack) == "foo"
    assert str(eqns["jax"].primitive) == "jit"
    assert str(eqns["jax"].params["jaxpr"].eqns[0].primitive) == "shard_map"
    assert str(eqns["ftrans"].primitive) == "pmap"
    (inner,) = eqns["ftrans"].params["jaxpr"].eqns
    assert str(inner.source_info.name_stack) == "bar"


@pytest.mark.needs_devices(2)
@pytest.mark.parametrize("op", ["set", "add", "multiply", "divide"])
def test_scatter_out_sharding_program_replays_under_checkify(op):
    """``x.at[idx].op(v, out_sharding=)`` under an Explicit mesh stages as JAX's (the scatter over Auto axes,
    resharded): ``checkify`` and ``eval_jaxpr`` replay the program (they raised an ambiguous-sharding error)."""
    from jax.experimental import checkify as jcheckify

    from ftrans.experimental import checkify as fcheckify

    out = {}
    for lib, (api, np_) in LIBS.items():
        ck = jcheckify if lib == "jax" else fcheckify
        P = api.sharding.PartitionSpec
        mesh = api.make_mesh((2,), ("x",), axis_types=(api.sharding.AxisType.Explicit,))
        with api.set_mesh(mesh):
            x = api.device_put(np.arange(1.0, 5.0, dtype=np.float32), api.sharding.NamedSharding(mesh, P("x")))

            def g(x):
                return getattr(x.at[1:3], op)(2.0, out_sharding=P("x"))

            err, y = api.jit(ck.checkify(g))(x)
            err.throw()
            closed = api.make_jaxpr(g)(x)
            z = api.jit(lambda x: api.extend.core.jaxpr_as_fun(closed)(x)[0])(x)
            out[lib] = (np.asarray(y), np.asarray(z), tuple(y.sharding.spec))
    np.testing.assert_allclose(out["ftrans"][0], out["jax"][0])
    np.testing.assert_allclose(out["ftrans"][1], out["jax"][1])
    assert out["ftrans"][2] == out["jax"][2]
