"""The optimiser passes (cse, simplify, fold_constants, stability, dce on control flow), each
alone and together, against jax on the same inputs; the switches and the report."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax
from ftrans.core.ir import Jaxpr, JaxprEqn, typecheck
from ftrans.transforms import passes
from ftrans.transforms.passes import Pass, PassError, register_pass

ALL = passes.registered_passes()


def only(*names):
    return list(names)


def prims(closed):
    from ftrans.core.ir import all_jaxprs

    return [e.primitive.name for j in all_jaxprs(closed) for e in j.eqns]


def trace(f, *args, optimizations=None):
    return ftrans.jit(f, optimizations=optimizations).trace(*args).jaxpr


X = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)


# ---------------------------------------------------------------- dce through control flow
def test_dce_drops_unused_while_carries():
    def f(x):
        return flax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0, fnp.sin(c[2])), (0, x, x))[0]

    j = trace(f, 1.0, optimizations=only("dce"))
    (w,) = [e for e in j.jaxpr.eqns if e.primitive.name == "while"]
    assert len(w.outvars) == 1 and "sin" not in prims(j)
    assert int(ftrans.jit(f)(1.0)) == 3


def test_dce_drops_unused_scan_carries_and_outputs():
    def f(xs):
        def step(c, x):
            a, b = c
            return (a + x, fnp.exp(b)), (a * x, fnp.cos(x))
        (a, _), (ys, _) = flax.scan(step, (0.0, 1.0), xs)
        return a + ys.sum()

    xs = np.arange(5, dtype=np.float32)
    j = trace(f, xs, optimizations=only("dce"))
    (s,) = [e for e in j.jaxpr.eqns if e.primitive.name == "scan"]
    assert s.params["num_carry"] == 1 and len(s.outvars) == 2
    assert "exp" not in prims(j) and "cos" not in prims(j)

    def g(xs):
        def step(c, x):
            a, b = c
            return (a + x, jnp.exp(b)), (a * x, jnp.cos(x))
        (a, _), (ys, _) = jax.lax.scan(step, (0.0, 1.0), xs)
        return a + ys.sum()

    np.testing.assert_allclose(ftrans.jit(f)(xs), jax.jit(g)(xs), rtol=1e-6)


def test_dce_drops_unused_cond_outputs_in_every_branch():
    def f(p, x):
        a, b = flax.cond(p, lambda v: (fnp.sin(v), fnp.exp(v)), lambda v: (v, fnp.tanh(v)), x)
        return a

    j = trace(f, True, 1.0, optimizations=only("dce"))
    (c,) = [e for e in j.jaxpr.eqns if e.primitive.name == "cond"]
    assert len(c.outvars) == 1 and "exp" not in prims(j) and "tanh" not in prims(j)
    assert float(ftrans.jit(f)(True, 1.0)) == pytest.approx(np.sin(1.0))


# ---------------------------------------------------------------- cse, fold, simplify
def test_cse_merges_repeated_equations_in_bodies_too():
    def f(x):
        y = fnp.exp(x) + fnp.exp(x)
        return flax.cond(True, lambda v: fnp.sin(v) * fnp.sin(v), lambda v: v, y)

    assert prims(trace(f, 1.0, optimizations="none")).count("exp") == 2
    j = trace(f, 1.0, optimizations=only("cse"))
    assert prims(j).count("exp") == 1 and prims(j).count("sin") == 1
    rep = passes.report_for(j)
    assert len(rep.by_pass("cse")) == 2 and all(r.source_info.filename == __file__ for r in rep.by_pass("cse"))
    np.testing.assert_allclose(ftrans.jit(f)(1.0), np.sin(2 * np.e) ** 2, rtol=1e-5)


def test_fold_constants_small_and_not_large():
    def f(x):
        return x * (fnp.arange(3.0) * 2 + 1).sum()

    j = trace(f, 2.0, optimizations=only("fold_constants", "dce"))
    # the weak scalar argument becomes strong before meeting the strong constant, as JAX records it
    assert prims(j) == ["convert_element_type", "mul"] and "9.0" in str(j)
    assert float(ftrans.jit(f)(2.0)) == 18.0

    def big(x):
        return x + (fnp.arange(20000.0) * 2)

    j = trace(big, 1.0, optimizations=only("fold_constants"))
    assert "iota" in prims(j) and not j.consts
    np.testing.assert_allclose(ftrans.jit(big)(1.0), np.arange(20000.0) * 2 + 1)


@pytest.mark.parametrize("name, f, gone", [
    ("mul_one", lambda x: x * 1.0 + 0.0, ["mul", "add"]),
    ("neg_neg", lambda x: -(-x), ["neg"]),
    ("transposes", lambda x: x.T.T, ["transpose"]),
    ("reshapes", lambda x: x.reshape(12).reshape(3, 4), ["reshape"]),
    ("converts", lambda x: x.astype(fnp.float64).astype(fnp.float32) if False else x.astype(fnp.float32), ["convert_element_type"]),
    ("select_same", lambda x: fnp.where(x > 0, x, x), ["select_n"]),
    ("sum_of_broadcast", lambda x: fnp.broadcast_to(x, (5, 3, 4)).sum(0), ["reduce_sum", "broadcast_in_dim"]),
])
def test_simplify(name, f, gone):
    j = trace(f, X, optimizations=only("simplify", "dce"))
    for p in gone:
        assert p not in prims(j), (name, str(j))
    np.testing.assert_allclose(ftrans.jit(f)(X), f(X), rtol=1e-6)
    typecheck(j)


def test_simplify_removes_zero_cotangent_debris_from_grad():
    def loss(x):
        return fnp.sum(fnp.where(x > 0, x * x, 0.0) + x * 0.0)

    def jloss(x):
        return jnp.sum(jnp.where(x > 0, x * x, 0.0) + x * 0.0)

    raw = trace(ftrans.grad(loss), X, optimizations="none")
    opt = trace(ftrans.grad(loss), X)
    assert len(opt.jaxpr.eqns) < len(raw.jaxpr.eqns)
    assert passes.report_for(opt).by_pass("simplify")
    np.testing.assert_allclose(ftrans.jit(ftrans.grad(loss))(X), jax.jit(jax.grad(jloss))(X), rtol=1e-6)


@pytest.mark.parametrize("name,f", [
    ("mul", lambda np_, x: 1 + x * 0),
    ("mul_left", lambda np_, x: 0.0 * x - 2),
    ("broadcast_zero", lambda np_, x: x * np_.zeros((3, 4), np_.float32)),
    ("dot", lambda np_, x: x @ np_.zeros((4, 2), np_.float32)),
    ("neg_reshaped", lambda np_, x: (-x).reshape(12) * 0.0),
])
def test_simplify_keeps_ieee_inf_and_nan_times_zero_like_jax(name, f):
    """jax-ml/jax#4780: under jit, nan * 0 and inf * 0 stay nan, as eagerly and in jax.jit (the pass folds
    x * 0 only where x is known finite, as the ones seeding a cotangent)."""
    x = X.copy()
    x[0, 0], x[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    got = np.asarray(ftrans.jit(lambda a: f(fnp, a))(x))
    np.testing.assert_array_equal(got, np.asarray(jax.jit(lambda a: f(jnp, a))(x)))
    np.testing.assert_array_equal(got, np.asarray(f(fnp, x)))
    assert np.isnan(np.asarray(ftrans.jit(lambda a: 1 + a * 0)(np.nan)))
    # an integer or finite operand still folds
    j = trace(lambda a: (a.astype(fnp.int32) * 0).astype(fnp.float32) + fnp.ones_like(a) * 0.0, X)
    assert "mul" not in prims(j), str(j)


# ---------------------------------------------------------------- stability
V = np.array([0.0, 100.0, 200.0, -300.0], np.float32)


def test_log_softmax_is_finite_and_matches_jax_nn():
    f = lambda x: fnp.log(fnp.exp(x) / fnp.sum(fnp.exp(x)))  # noqa: E731
    got = np.asarray(ftrans.jit(f)(V))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, jax.nn.log_softmax(V), rtol=1e-6)
    g = lambda x: fnp.log(fnp.exp(x) / fnp.sum(fnp.exp(x), axis=-1, keepdims=True))  # noqa: E731
    M = np.stack([V, V[::-1]])
    np.testing.assert_allclose(ftrans.jit(g)(M), jax.nn.log_softmax(M, axis=-1), rtol=1e-6)
    rep = passes.report_for(trace(f, V))
    assert rep.by_pass("stability")[0].source_info.filename == __file__


def test_stable_gradient_of_a_jitted_loss():
    f = ftrans.jit(lambda x: fnp.log(fnp.exp(x) / fnp.sum(fnp.exp(x)))[1])
    g = np.asarray(ftrans.grad(f)(V))
    np.testing.assert_allclose(g, jax.jit(jax.grad(lambda x: jax.nn.log_softmax(x)[1]))(V), atol=1e-6)


@pytest.mark.parametrize("f, ref", [
    (lambda m: (lambda x: m.log(1 + x)), jnp.log1p),
    (lambda m: (lambda x: m.exp(x) - 1), jnp.expm1),
    (lambda m: (lambda x: m.log(m.sum(m.exp(x)))), jax.nn.logsumexp),
])
def test_stability_rewrites_match_the_stable_functions(f, ref):
    x = np.array([1e-7, -0.5, 3.0, 80.0], np.float32)
    np.testing.assert_allclose(ftrans.jit(f(fnp))(x), ref(x), rtol=1e-6)


def test_log_sigmoid_forms():
    x = np.array([-200.0, -1.0, 0.0, 3.0, 200.0], np.float32)
    a = ftrans.jit(lambda v: fnp.log(ftrans.nn.sigmoid(v)))(x)
    b = ftrans.jit(lambda v: fnp.log(1 - ftrans.nn.sigmoid(v)))(x)
    np.testing.assert_allclose(a, jax.nn.log_sigmoid(x), rtol=1e-6)
    np.testing.assert_allclose(b, jax.nn.log_sigmoid(-x), rtol=1e-6)


# ------------------------------------------- stability of gradients under jit(grad), vmap(grad)
_XS = np.array([[0.0, 100.0, 200.0, -300.0], [3.0, -1.0, 0.5, 90.0]], np.float32)
_SIG = np.array([-200.0, -1.0, 0.0, 3.0, 200.0], np.float32)
_SMALL = np.array([1e-7, -0.5, 3.0, 80.0], np.float32)
_Y = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]], np.float32)
_B = np.array([1.0, 0.0, 1.0, 0.0, 1.0], np.float32)

# (name, loss written naively in module m (fnp or jnp), its stable reference in jax, input batch
# (vmap maps axis 0), whether the naive gradient is non-finite on the input)
_GRAD_FORMS = [
    ("log_softmax", lambda m: lambda x: m.log(m.exp(x) / m.sum(m.exp(x)))[1],
     lambda x: jax.nn.log_softmax(x)[1], _XS, True),
    ("logsumexp", lambda m: lambda x: m.log(m.sum(m.exp(x))), jax.nn.logsumexp, _XS, True),
    ("log1p", lambda m: lambda x: m.sum(m.log(1 + x)), lambda x: jnp.sum(jnp.log1p(x)),
     np.stack([_SMALL, _SMALL * 0.5]), False),
    ("expm1", lambda m: lambda x: m.sum(m.exp(x) - 1), lambda x: jnp.sum(jnp.expm1(x)),
     np.stack([_SMALL, -_SMALL]), False),
    ("log_sigmoid", lambda m: lambda x: m.sum(m.log(_sig(m)(x))), lambda x: jnp.sum(jax.nn.log_sigmoid(x)),
     np.stack([_SIG, _SIG[::-1]]), True),
    ("log_one_minus_sigmoid", lambda m: lambda x: m.sum(m.log(1 - _sig(m)(x))),
     lambda x: jnp.sum(jax.nn.log_sigmoid(-x)), np.stack([_SIG, _SIG[::-1]]), True),
    ("softmax_cross_entropy",
     lambda m: lambda x: -m.sum(_Y * m.log(m.exp(x) / m.sum(m.exp(x), axis=-1, keepdims=True))),
     lambda x: -jnp.sum(_Y * jax.nn.log_softmax(x, axis=-1)), np.stack([_XS, _XS[::-1]]), True),
    ("log_of_nn_softmax", lambda m: lambda x: m.log(_nn(m).softmax(x))[2] - m.log(_nn(m).softmax(x))[3],
     lambda x: jax.nn.log_softmax(x)[2] - jax.nn.log_softmax(x)[3], _XS, True),
    ("binary_cross_entropy",
     lambda m: lambda z: -m.mean(_B * m.log(_sig(m)(z)) + (1 - _B) * m.log(1 - _sig(m)(z))),
     lambda z: -jnp.mean(_B * jax.nn.log_sigmoid(z) + (1 - _B) * jax.nn.log_sigmoid(-z)),
     np.stack([_SIG, -_SIG]), True),
]


def _sig(m):
    return ftrans.nn.sigmoid if m is fnp else jax.nn.sigmoid


def _nn(m):
    return ftrans.nn if m is fnp else jax.nn


@pytest.mark.parametrize("name, loss, ref, xs, naive_nonfinite", _GRAD_FORMS, ids=[f[0] for f in _GRAD_FORMS])
def test_stable_gradients_under_jit_grad_grad_jit_and_vmap(name, loss, ref, xs, naive_nonfinite):
    f = loss(fnp)
    jref = jax.jit(jax.grad(ref))  # the oracle jitted: one compile for both rows (eager compiles op by op)
    want = np.stack([np.asarray(jref(x)) for x in xs])
    assert np.all(np.isfinite(want))
    naive = np.stack([np.asarray(ftrans.grad(f)(x)) for x in xs])  # eager: what the user wrote
    if naive_nonfinite:
        assert not np.all(np.isfinite(naive))
        # so is jax's gradient of the naive form, and ours with the pass switched off
        jnaive = jax.jit(jax.grad(loss(jnp)))
        assert not np.all(np.isfinite(np.stack([jnaive(x) for x in xs])))
        off = ftrans.jit(ftrans.grad(f), optimizations=["cse", "simplify", "dce"])
        assert not np.all(np.isfinite(np.stack([off(x) for x in xs])))
    else:
        np.testing.assert_allclose(naive, want, rtol=1e-5, atol=1e-6)
    # each transformed function is built once and applied to every row (a fresh jit per row would compile
    # the same program again)
    jit_grad, grad_jit = ftrans.jit(ftrans.grad(f)), ftrans.grad(ftrans.jit(f))
    jit_vg = ftrans.jit(ftrans.value_and_grad(f))
    jit_vjp = ftrans.jit(lambda x: ftrans.vjp(f, x)[1](np.float32(1.0))[0])
    pmap_grad = ftrans.pmap(ftrans.grad(f))
    got = {
        "jit(grad)": np.stack([jit_grad(x) for x in xs]),
        "grad(jit)": np.stack([grad_jit(x) for x in xs]),
        "jit(vmap(grad))": ftrans.jit(ftrans.vmap(ftrans.grad(f)))(xs),
        "vmap(grad(jit))": ftrans.vmap(ftrans.grad(ftrans.jit(f)))(xs),
        "jit(value_and_grad)": np.stack([jit_vg(x)[1] for x in xs]),
        "jit(vjp)": np.stack([jit_vjp(x) for x in xs]),
        "pmap(grad)": np.concatenate([pmap_grad(x[None]) for x in xs]),
    }
    for how, g in got.items():
        assert np.all(np.isfinite(g)), how
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6, err_msg=how)


def test_stable_forward_derivative_under_jit_jvp():
    f = lambda x: fnp.log(fnp.exp(x) / fnp.sum(fnp.exp(x)))  # noqa: E731
    t = np.array([1.0, 0.0, -1.0, 2.0], np.float32)
    _, got = ftrans.jit(lambda x: ftrans.jvp(f, (x,), (t,)))(V)
    _, want = jax.jit(lambda x, t: jax.jvp(jax.nn.log_softmax, (x,), (t,)))(V, t)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert not np.all(np.isfinite(ftrans.jvp(f, (V,), (t,))[1]))  # eager: as written


def test_differentiated_function_is_traced_once_and_make_jaxpr_shows_it_as_written():
    calls = []

    def f(x):
        calls.append(1)
        return fnp.log(fnp.sum(fnp.exp(x)))

    g = ftrans.jit(ftrans.grad(f))
    np.testing.assert_allclose(g(V), jax.jit(jax.grad(jax.nn.logsumexp))(V), atol=1e-6)
    assert len(calls) == 1
    rep = ftrans.jit(ftrans.grad(f)).lower(V).optimization_report
    [rw] = [r for r in rep.by_pass("stability") if "before differentiating" in r.what]
    assert rw.source_info.filename == __file__
    assert "reduce_max" not in prims(ftrans.make_jaxpr(ftrans.grad(f))(V))
    assert "reduce_max" in prims(trace(ftrans.grad(f), V))


def test_rewriting_before_differentiation_keeps_aux_and_python_control_flow():
    def f(x, flag):
        if flag > 0:  # concrete: a Python branch
            x = x * 2.0
        return fnp.log(fnp.sum(fnp.exp(x))), {"x": x, "tag": "seen"}

    tags = []

    def outer(x):
        g, aux = ftrans.grad(f, has_aux=True)(x, 1.0)
        tags.append(aux["tag"])
        return g, aux["x"]

    g, ax = ftrans.jit(outer)(V)
    np.testing.assert_allclose(g, 2 * jax.jit(jax.grad(jax.nn.logsumexp))(2 * V), atol=1e-6)
    np.testing.assert_allclose(ax, 2 * V)
    assert tags == ["seen"]

    def k(x):  # staging fails (a concretization on a traced value): the same error as without it
        return x if x > 0 else -x

    with pytest.raises(ftrans.errors.ConcretizationTypeError):
        ftrans.jit(ftrans.grad(k))(np.float32(1.0))


# ---------------------------------------------------------------- switches and report
def test_config_optimizations_and_per_jit_option():
    f = lambda x: fnp.log(fnp.exp(x) / fnp.sum(fnp.exp(x)))  # noqa: E731
    before = ftrans.config.optimizations
    try:
        ftrans.config.update("optimizations", ["cse", "dce"])
        assert passes.report_for(trace(f, V)).passes_run == ("cse", "dce")
        assert not np.all(np.isfinite(ftrans.jit(f)(V)))
        assert np.all(np.isfinite(ftrans.jit(f, optimizations="all")(V)))
        with pytest.raises(ValueError, match="unknown pass name 'stabilty'"):
            ftrans.config.update("optimizations", ["stabilty"])
    finally:
        ftrans.config.update("optimizations", before)
    with pytest.raises(ftrans.errors.FtransValueError, match="unknown pass name 'cs'.*the passes are: cse"):
        ftrans.jit(f, optimizations=["cs"])
    assert passes.report_for(trace(f, V, optimizations="none")).passes_run == ()


def test_lowered_report_lists_rewrites_and_ir_before_after():
    f = lambda x: fnp.log(fnp.exp(x) / fnp.sum(fnp.exp(x)))  # noqa: E731
    rep = ftrans.jit(f).lower(V).optimization_report
    assert rep.by_pass("stability")
    before, after = rep.before_after("stability")
    assert "div" in before and "reduce_max" in after
    html = rep._repr_html_()
    assert "stability" in html and "test_optimizer.py" in html and "IR before / after" in html


class _Broken(Pass):
    name = "broken_for_test"

    def rewrite(self, jaxpr, ctx, *, top):
        if not top or not jaxpr.eqns:
            return jaxpr
        e = jaxpr.eqns[0]
        bad = JaxprEqn(e.primitive, list(e.invars), [type(e.outvars[0])(e.outvars[0].aval.update(shape=(7,)))
                                                     if hasattr(e.outvars[0].aval, "update") else e.outvars[0]],
                       e.params, e.source_info)
        from ftrans.core.avals import ShapedArray
        from ftrans.core.ir import Var
        bad = bad._replace(outvars=[Var(ShapedArray((7,), e.outvars[0].aval.dtype, False))])
        ctx.record(e, "broke it")
        return Jaxpr(jaxpr.constvars, jaxpr.invars, [bad] + list(jaxpr.eqns[1:]), jaxpr.outvars)


def test_a_pass_that_breaks_typechecking_is_named_and_can_be_switched_off():
    from ftrans.transforms.passes import pipeline

    register_pass(_Broken())
    try:
        f = lambda x: fnp.sin(x) + 1.0  # noqa: E731
        with pytest.raises(PassError, match="(?s)pass 'broken_for_test' produced an ill-typed program.*sin"):
            ftrans.jit(f)(X)
        np.testing.assert_allclose(ftrans.jit(f, optimizations=list(ALL))(X), np.sin(X) + 1, rtol=1e-6)
    finally:
        pipeline._passes.pop("broken_for_test")


# ---------------------------------------------------------------- differential: random programs


def _build(m, ops):
    def f(x, w):
        y = x
        for op in ops:
            kind = op[0]
            if kind == "un":
                y = getattr(m, op[1])(m.clip(y, -5, 5)) if op[1] == "exp" else getattr(m, op[1])(y)
            elif kind == "mul1":
                y = y * 1.0 + 0.0
            elif kind == "zero":
                y = y + 0.0 * m.sum(y)
            elif kind == "sum":
                y = y + m.sum(y, axis=op[1], keepdims=True)
            elif kind == "matmul":
                y = m.tanh(y @ w)
            elif kind == "tt":
                y = y.T.T + m.exp(m.clip(y, -3, 3)) * m.exp(m.clip(y, -3, 3))
            elif kind == "where":
                y = m.where(y > 0, y, y * 0.5)
            elif kind == "lse":
                y = y - m.log(m.sum(m.exp(y), axis=1, keepdims=True))
            elif kind == "log1p":
                y = m.log(1 + m.abs(y)) + m.exp(m.clip(y, -3, 3)) - 1
            elif kind == "lsig":
                y = m.log(_sig(m)(y)) - m.log(1 - _sig(m)(y))
            elif kind == "scan":
                def step(c, row):
                    c = m.tanh(c * 0.5 + row @ w + m.sum(w) * 0.01)
                    return c, c * 1.0 + row
                y = lax_of(m).scan(step, m.zeros(4, y.dtype), y)[1]
            elif kind == "cond":
                y = lax_of(m).cond(m.sum(y) > 0, lambda v: m.sin(v) @ w, lambda v: v * 0.0 + v, y)
        return m.sum(y * y)
    return f


def lax_of(m):
    return jax.lax if m is jnp else flax


_op = st.one_of(
    st.tuples(st.just("un"), st.sampled_from(["sin", "exp", "negative", "tanh"])),
    st.tuples(st.just("mul1")), st.tuples(st.just("zero")), st.tuples(st.just("sum"), st.sampled_from([0, 1])),
    st.tuples(st.just("matmul")), st.tuples(st.just("tt")), st.tuples(st.just("where")), st.tuples(st.just("lse")),
    st.tuples(st.just("scan")), st.tuples(st.just("cond")), st.tuples(st.just("log1p")), st.tuples(st.just("lsig")),
)


@settings(deadline=None)  # examples: the hypothesis profile's (conftest.py)
@given(st.lists(_op, min_size=1, max_size=5))
def test_random_programs_agree_with_and_without_the_optimiser(ops):
    x = X
    w = (np.arange(16, dtype=np.float32).reshape(4, 4) - 8) / 16
    ff, fj = _build(fnp, ops), _build(jnp, ops)
    # the oracle as one jitted program (jax eager compiles op by op): value, gradient and vmap
    ref, gref, vref = map(np.asarray, jax.jit(lambda x, w, xb: (fj(x, w), jax.grad(fj)(x, w), jax.vmap(
        fj, (0, None))(xb, w)))(x, w, np.stack([x, x + 1])))
    for opt in ("all", "none"):
        np.testing.assert_allclose(ftrans.jit(ff, optimizations=opt)(x, w), ref, rtol=2e-5, atol=1e-5)
        jgrad = ftrans.jit(ftrans.grad(ff), optimizations=opt)
        np.testing.assert_allclose(jgrad(x, w), gref, rtol=2e-4, atol=1e-4)
        np.testing.assert_allclose(ftrans.grad(ftrans.jit(ff, optimizations=opt))(x, w), gref, rtol=2e-4, atol=1e-4)
        np.testing.assert_allclose(ftrans.jit(ftrans.vmap(ff, (0, None)), optimizations=opt)(np.stack([x, x + 1]), w),
                                   vref, rtol=2e-5, atol=1e-5)
        typecheck(jgrad.trace(x, w).jaxpr)  # the program that just ran
    np.testing.assert_allclose(ff(x, w), ref, rtol=2e-5, atol=1e-5)


# ---------------------------------------------------------------- licm and scan hoisting
def _rnn(m, scan):
    def f(W, U, xs):
        def step(h, x):
            h = m.tanh(x @ W + h @ U + m.sum(W * 2.0))
            return h, h
        return scan(step, m.zeros((2, 3)), xs)[1]
    return f


_R = np.random.default_rng(0)
RNN_ARGS = (_R.normal(size=(5, 3)).astype(np.float32), _R.normal(size=(3, 3)).astype(np.float32),
            _R.normal(size=(7, 2, 5)).astype(np.float32))


def test_scan_hoists_invariants_and_the_input_projection():
    j = trace(_rnn(fnp, flax.scan), *RNN_ARGS, optimizations=only("licm", "dce"))
    top = [e.primitive.name for e in j.jaxpr.eqns]
    assert "dot_general" in top and "reduce_sum" in top  # xs @ W and sum(W * 2) before the scan
    (s,) = [e for e in j.jaxpr.eqns if e.primitive.name == "scan"]
    body = [e.primitive.name for e in s.params["jaxpr"].jaxpr.eqns]
    assert body.count("dot_general") == 1 and "reduce_sum" not in body
    (dot,) = [e for e in j.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert dot.outvars[0].aval.shape == (7, 2, 3)  # one product over the whole sequence
    rep = passes.report_for(j)
    assert any("batched over the sequence" in r.what for r in rep.by_pass("licm"))
    np.testing.assert_allclose(ftrans.jit(_rnn(fnp, flax.scan))(*RNN_ARGS),
                               jax.jit(_rnn(jnp, jax.lax.scan))(*RNN_ARGS), rtol=1e-5, atol=1e-6)


def test_scan_hoisting_in_the_gradient():
    def loss(m, scan):
        return lambda *a: _rnn(m, scan)(*a).sum()

    g = ftrans.jit(ftrans.grad(loss(fnp, flax.scan), (0, 1, 2)))
    rep = g.lower(*RNN_ARGS).optimization_report
    assert any("batched over the sequence" in r.what for r in rep.by_pass("licm"))
    ref = jax.jit(jax.grad(loss(jnp, jax.lax.scan), (0, 1, 2)))(*RNN_ARGS)
    for got, want in zip(g(*RNN_ARGS), ref):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    typecheck(g.trace(*RNN_ARGS).jaxpr)


def test_while_moves_invariants_out():
    def w(x, y):
        return flax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + fnp.sin(y) * 2), (0, x))[1]

    j = trace(w, 1.0, 2.0, optimizations=only("licm"))
    assert "sin" in [e.primitive.name for e in j.jaxpr.eqns]
    (loop,) = [e for e in j.jaxpr.eqns if e.primitive.name == "while"]
    assert "sin" not in [e.primitive.name for e in loop.params["body_jaxpr"].jaxpr.eqns]
    assert float(ftrans.jit(w)(1.0, 2.0)) == pytest.approx(1 + 10 * np.sin(2.0), rel=1e-6)


def _loopy(m, lax_, which):
    def f(x, w):
        if which == "scan":
            def step(c, xt):
                c = m.tanh(c * 0.5 + xt @ w)
                return c, c * 1.0
            return lax_.scan(step, m.zeros(4, x.dtype), x)[1].sum() + 0.0
        if which == "while":
            return lax_.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] @ w + m.sum(w * 1.0)),
                                   (0, x))[1].sum()
        return lax_.cond(m.sum(x) > 0, lambda v: m.sin(v) @ w, lambda v: v * 0.0, x).sum()
    return f


@pytest.mark.parametrize("which", ["scan", "while", "cond"])
def test_control_flow_programs_agree_with_and_without_the_optimiser(which):
    x = X
    w = (np.arange(16, dtype=np.float32).reshape(4, 4) - 8) / 32
    ff, fj = _loopy(fnp, flax, which), _loopy(jnp, jax.lax, which)
    xb = np.stack([x, -x])
    # the oracle: one jitted jax program for the value, the gradient and the vmap, computed once
    ref, gj, vref = jax.jit(lambda x, w, xb: (fj(x, w), jax.grad(fj, (0, 1))(x, w) if which != "while" else None,
                                              jax.vmap(fj, (0, None))(xb, w)))(x, w, xb)
    for opt in ("all", "none"):
        np.testing.assert_allclose(ftrans.jit(ff, optimizations=opt)(x, w), ref, rtol=1e-5, atol=1e-5)
        if which != "while":
            for got, want in zip(ftrans.jit(ftrans.grad(ff, (0, 1)), optimizations=opt)(x, w), gj):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ftrans.jit(ftrans.vmap(ff, (0, None)), optimizations=opt)(xb, w),
                                   vref, rtol=1e-5, atol=1e-5)
        typecheck(ftrans.jit(ff, optimizations=opt).trace(x, w).jaxpr)


# ---------------------------------------------------------------- merged matmuls
def _lstm(m, sig):
    def f(Ws, x, h, c):
        i = sig(x @ Ws[0] + h @ Ws[1])
        fg = sig(x @ Ws[2] + h @ Ws[3])
        o = sig(x @ Ws[4] + h @ Ws[5])
        g = m.tanh(x @ Ws[6] + h @ Ws[7])
        c = fg * c + i * g
        return o * m.tanh(c), c
    return f


def test_merge_dots_on_lstm_gates():
    r = np.random.default_rng(1)
    Ws = [r.normal(size=(4, 4)).astype(np.float32) for _ in range(8)]
    x, h, c = (r.normal(size=(2, 4)).astype(np.float32) for _ in range(3))
    j = trace(_lstm(fnp, ftrans.nn.sigmoid), Ws, x, h, c, optimizations=only("merge_dots", "dce"))
    dots = [e for e in j.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 2 and all(d.outvars[0].aval.shape == (2, 16) for d in dots)
    assert len(passes.report_for(j).by_pass("merge_dots")) == 8
    typecheck(j)
    for got, want in zip(ftrans.jit(_lstm(fnp, ftrans.nn.sigmoid))(Ws, x, h, c),
                         jax.jit(_lstm(jnp, jax.nn.sigmoid))(Ws, x, h, c)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    g = ftrans.jit(ftrans.grad(lambda *a: _lstm(fnp, ftrans.nn.sigmoid)(*a)[0].sum()))(Ws, x, h, c)
    gj = jax.jit(jax.grad(lambda *a: _lstm(jnp, jax.nn.sigmoid)(*a)[0].sum()))(Ws, x, h, c)
    for a, b in zip(g, gj):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _lstm_seq(m, sig, scan):
    cell = _lstm(m, sig)

    def f(Ws, xs, h, c):
        def step(hc, x):
            h, c = cell(Ws, x, *hc)
            return (h, c), h
        return scan(step, (h, c), xs)[1]
    return f


def test_merge_dots_cost_rule_large_argument_weights_stay_apart_loop_invariant_ones_merge():
    r = np.random.default_rng(2)
    Ws = [r.normal(size=(128, 128)).astype(np.float32) * 0.1 for _ in range(8)]
    x, h, c = (r.normal(size=(4, 128)).astype(np.float32) for _ in range(3))
    # one step, weights are arguments: concatenating 4 x 64 KiB on every call costs more than
    # the 3 dispatches it saves, so the products stay apart
    j = trace(_lstm(fnp, ftrans.nn.sigmoid), Ws, x, h, c)
    assert prims(j).count("dot_general") == 8 and "concatenate" not in prims(j)
    assert not passes.report_for(j).by_pass("merge_dots")
    # what XLA compiled (``Compiled.as_text`` is the optimised HLO, as in JAX): no weight copies
    hlo = ftrans.jit(_lstm(fnp, ftrans.nn.sigmoid)).lower(Ws, x, h, c).compile().as_text()
    jhlo = jax.jit(_lstm(jnp, jax.nn.sigmoid)).lower(Ws, x, h, c).compile().as_text()
    assert "HloModule" in hlo and "HloModule" in jhlo
    if ftrans.default_backend() == "cpu":
        assert "concatenate(" not in hlo
    else:  # XLA:GPU fuses sibling products into one GEMM itself (a concatenate inside the fusion), as for JAX's
        assert ("concatenate(" in hlo) == ("concatenate(" in jhlo)
    # the same cell in a scan: the weights are loop constants, so the concatenations leave the
    # loop (licm) and each step runs one product per shared operand
    xs = r.normal(size=(6, 4, 128)).astype(np.float32)
    j = trace(_lstm_seq(fnp, ftrans.nn.sigmoid, flax.scan), Ws, xs, h, c)
    [scan] = [e for e in j.jaxpr.eqns if e.primitive.name == "scan"]
    body = [e.primitive.name for e in scan.params["jaxpr"].jaxpr.eqns]
    assert body.count("dot_general") == 1 and "concatenate" not in body  # h @ concat(W_h...)
    top = [e.primitive.name for e in j.jaxpr.eqns]
    assert top.count("concatenate") == 2 and top.count("dot_general") == 1  # xs @ concat(W_x...)
    assert "slice" not in top  # the batched gate product enters the loop whole, sliced per step
    assert len(passes.report_for(j).by_pass("merge_dots")) == 8
    got = ftrans.jit(_lstm_seq(fnp, ftrans.nn.sigmoid, flax.scan))(Ws, xs, h, c)
    want = jax.jit(_lstm_seq(jnp, jax.nn.sigmoid, jax.lax.scan))(Ws, xs, h, c)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    loss = lambda m, sc: lambda *a: _lstm_seq(m, ftrans.nn.sigmoid if m is fnp else jax.nn.sigmoid, sc)(*a).sum()  # noqa: E731
    g = ftrans.jit(ftrans.grad(loss(fnp, flax.scan)))(Ws, xs, h, c)
    gj = jax.jit(jax.grad(loss(jnp, jax.lax.scan)))(Ws, xs, h, c)
    for a, b in zip(g, gj):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_merge_dots_leaves_dependent_weights_alone():
    def f(x, w):
        a = x @ w
        return x @ (a[:, :4] * 2.0)  # the second weights read the first product

    x = np.ones((4, 4), np.float32)
    j = trace(f, x, x, optimizations=only("merge_dots"))
    assert [e.primitive.name for e in j.jaxpr.eqns].count("dot_general") == 2
    np.testing.assert_allclose(ftrans.jit(f)(x, x), f(x, x), rtol=1e-6)


def test_scan_gradient_accumulators_become_one_product_after_the_loop():
    def loss(m, scan):
        def f(W, U, xs):
            def step(h, x):
                h = m.tanh(x @ W + h @ U)
                return h, h
            return scan(step, m.zeros((2, 3)), xs)[1].sum()
        return f

    g = ftrans.jit(ftrans.grad(loss(fnp, flax.scan), (0, 1, 2)))
    j = g.trace(*RNN_ARGS).jaxpr
    scans = [e for e in j.jaxpr.eqns if e.primitive.name == "scan"]
    back = [s for s in scans if s.params["reverse"]]
    assert back and all(s.params["num_carry"] == 1 for s in back)  # only the hidden-state cotangent is carried
    after = [e for e in j.jaxpr.eqns[j.jaxpr.eqns.index(back[0]):] if e.primitive.name == "dot_general"]
    assert {e.outvars[0].aval.shape for e in after} == {(5, 3), (3, 3)}
    assert any("after the loop" in r.what for r in passes.report_for(j).by_pass("licm"))
    ref = jax.jit(jax.grad(loss(jnp, jax.lax.scan), (0, 1, 2)))(*RNN_ARGS)
    for got, want in zip(g(*RNN_ARGS), ref):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


class _Crashing(Pass):
    name = "crashing_for_test"

    def rewrite(self, jaxpr, ctx, *, top):
        raise KeyError("boom")


def test_a_crashing_pass_is_named():
    from ftrans.transforms.passes import pipeline

    register_pass(_Crashing())
    try:
        with pytest.raises(PassError, match="pass 'crashing_for_test' failed .*KeyError.*disabled_passes"):
            ftrans.jit(lambda x: fnp.cos(x))(X)
        np.testing.assert_allclose(ftrans.jit(lambda x: fnp.cos(x), optimizations=list(ALL))(X), np.cos(X), rtol=1e-6)
    finally:
        pipeline._passes.pop("crashing_for_test")


def test_cse_keeps_one_of_two_identical_scan_outputs():
    def f(xs):
        def step(c, x):
            y = fnp.sin(x) + c
            return c + 1.0, (y, y)
        _, (a, b) = flax.scan(step, 0.0, xs)
        return a + 2 * b

    xs = np.arange(4, dtype=np.float32)
    j = trace(f, xs, optimizations=only("cse"))
    (s,) = [e for e in j.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(s.outvars) == 2
    np.testing.assert_allclose(ftrans.jit(f)(xs), 3 * (np.sin(xs) + np.arange(4)), rtol=1e-6)


def test_pass_reports_do_not_outlive_their_programs():
    """``report_for`` keys reports weakly on the program; a report must not hold its program (or the
    program's constants), else every rewritten jit would stay in memory for good."""
    import gc

    from ftrans.transforms.passes import pipeline

    before = len(pipeline._reports)
    for _ in range(5):
        c = fnp.ones(100)
        g = ftrans.jit(lambda y, c=c: y * c + 0.0)
        g(fnp.ones(100))
        rep = ftrans.jit(lambda y, c=c: y * c + 0.0).lower(fnp.ones(100)).optimization_report
        assert rep is not None and rep.before_after("simplify") is not None  # the report still reads
        del g, rep
    gc.collect()
    assert len(pipeline._reports) <= before
