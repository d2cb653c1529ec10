"""``checkpoint``/``remat``: gradients unchanged, saved residuals as the policy says, recomputation in the IR."""

from __future__ import annotations

import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.ad_checkpoint
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals
from ftrans.core.ir import typecheck

cp = ftrans.checkpoint_policies
API_F = (ftrans, fjnp, ftrans.lax)
API_J = (jax, jjnp, jax.lax)
RNG = np.random.RandomState(0)
W1 = (RNG.randn(6, 6) / 3).astype(np.float32)
W2 = (RNG.randn(6, 6) / 3).astype(np.float32)
X = RNG.randn(6).astype(np.float32)


def block(np_, name_fn):
    def f(w1, w2, x):
        h = name_fn(np_.tanh(w1 @ x), "hidden")
        return np_.sin(w2 @ h)

    return f


def loss(np_, ck, name_fn, **kw):
    blk = ck(block(np_, name_fn), **kw)

    def f(w1, w2, x):
        for _ in range(2):
            x = blk(w1, w2, x)
        return np_.sum(x * x)

    return f


POLICIES = {
    "default": {},
    "everything": {"policy": cp.everything_saveable},
    "nothing": {"policy": cp.nothing_saveable},
    "dots": {"policy": cp.dots_saveable},
    "checkpoint_dots": {"policy": cp.checkpoint_dots},
    "names": {"policy": cp.save_only_these_names("hidden")},
    "names_but": {"policy": cp.save_any_names_but_these("hidden")},
}
JAX_POLICIES = {
    "default": {},
    "everything": {"policy": jax.checkpoint_policies.everything_saveable},
    "nothing": {"policy": jax.checkpoint_policies.nothing_saveable},
    "dots": {"policy": jax.checkpoint_policies.dots_saveable},
    "checkpoint_dots": {"policy": jax.checkpoint_policies.checkpoint_dots},
    "names": {"policy": jax.checkpoint_policies.save_only_these_names("hidden")},
    "names_but": {"policy": jax.checkpoint_policies.save_any_names_but_these("hidden")},
}


@pytest.mark.parametrize("pol", sorted(POLICIES))
def test_gradients_match_jax_for_every_policy(pol):
    f = loss(fjnp, ftrans.checkpoint, checkpoint_name, **POLICIES[pol])
    g = loss(jjnp, jax.checkpoint, jax.ad_checkpoint.checkpoint_name, **JAX_POLICIES[pol])
    want = jax.grad(g, argnums=(0, 1, 2))(W1, W2, X)
    for got in (ftrans.grad(f, argnums=(0, 1, 2))(W1, W2, X),
                ftrans.jit(ftrans.grad(f, argnums=(0, 1, 2)))(W1, W2, X),
                ftrans.grad(ftrans.jit(f), argnums=(0, 1, 2))(W1, W2, X)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


def _count(pol):
    f = loss(fjnp, ftrans.checkpoint, checkpoint_name, **POLICIES[pol])
    return saved_residuals(f, W1, W2, X)


def test_saved_residuals_follow_the_policy():
    plain = saved_residuals(loss(fjnp, lambda fn, **_: fn, checkpoint_name), W1, W2, X)
    nothing = _count("nothing")
    everything = _count("everything")
    dots = _count("dots")
    names = _count("names")
    # Nothing saved: only the block inputs (the weights, x, and the first block's output).
    assert [str(what).split(" ")[0] for _, what in nothing].count("from") == 3
    assert all(what.startswith("from the argument") or "sin" in what for _, what in nothing)
    assert len(nothing) < len(names) < len(everything)
    assert len(nothing) < len(dots) < len(everything)
    assert len(everything) >= len(plain) - 1
    assert sum("dot_general" in what for _, what in dots) == 4  # two dots per block, two blocks
    assert sum(what.startswith("named 'hidden' from") for _, what in names) == 2  # the tagged value per block
    assert _count("default") == nothing


def test_print_saved_residuals_names_sources(capsys):
    f = loss(fjnp, ftrans.checkpoint, checkpoint_name, policy=cp.dots_saveable)
    print_saved_residuals(f, W1, W2, X)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "f32[6,6] from the argument w1"
    assert any("output of dot_general from" in ln and "test_remat.py" in ln for ln in lines)


def _describe(res):
    """(shape, description) per residual, without the column and function qualname JAX adds to source lines."""
    return [(tuple(a.shape), re.sub(r"(\.py:\d+)(:\d+)?( \(.*\))?$", r"\1", what)) for a, what in res]


def test_saved_residuals_describe_and_order_like_jax():
    """Constants, then arguments by parameter name and path, then intermediates in program order, with a
    ``checkpoint_name`` tag shown as ``named '...'``: JAX's descriptions, word for word."""
    from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

    def make(np_, name_fn):
        def f(x, y):
            x1, x2 = x
            z = name_fn(np_.sin(3.0), "z")
            return z * ((x1 * x2) * y) * np.array([3.0])

        return f

    def make_named(T, np_, name_fn):
        def g(w, *rest, scale):
            h = name_fn(np_.dot(w, w), "foo")
            return np_.dot(h, w) * scale + rest[0]["b"]

        return T.checkpoint(g, policy=T.checkpoint_policies.save_only_these_names("foo"))

    got = _describe(saved_residuals(make(fjnp, checkpoint_name), (2.0, 3.0), y=4.0))
    want = _describe(jax_saved_residuals(make(jjnp, jax.ad_checkpoint.checkpoint_name), (2.0, 3.0), y=4.0))
    assert got == want, (got, want)
    w = np.ones((3, 3), np.float32)
    got = _describe(saved_residuals(make_named(ftrans, fjnp, checkpoint_name), w, {"b": w}, scale=2.0))
    want = _describe(jax_saved_residuals(make_named(jax, jjnp, jax.ad_checkpoint.checkpoint_name), w, {"b": w},
                                         scale=2.0))
    assert got == want, (got, want)


def test_backward_program_recomputes_behind_a_barrier():
    f = loss(fjnp, ftrans.checkpoint, checkpoint_name)
    closed = ftrans.make_jaxpr(ftrans.grad(f))(W1, W2, X)
    typecheck(closed)
    names = [e.primitive.name for e in closed.eqns]
    assert "optimization_barrier" in names
    after = names[names.index("optimization_barrier"):]
    assert "tanh" in after  # the forward tanh runs again in the backward pass
    no_cse = loss(fjnp, ftrans.checkpoint, checkpoint_name, prevent_cse=False)
    assert "optimization_barrier" not in str(ftrans.make_jaxpr(ftrans.grad(no_cse))(W1, W2, X))


def test_remat_is_a_call_when_not_differentiated():
    f = ftrans.checkpoint(lambda x: fjnp.sin(x) * 2.0)
    closed = ftrans.make_jaxpr(f)(X)
    assert [e.primitive.name for e in closed.eqns] == ["remat2"]
    np.testing.assert_allclose(np.asarray(f(X)), np.sin(X) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(X)), np.sin(X) * 2.0, rtol=1e-6)
    assert ftrans.remat is ftrans.checkpoint


def test_remat_names_in_jaxpr_and_hlo_match_jax():
    # The primitive prints as JAX's ``remat2``; in the compiled program the call is named ``checkpoint``
    # (``jit(f)/checkpoint/sin``) and only the differentiated program names ``rematted_computation``.
    def run(api):
        jit, remat, grad = api
        f = remat(lambda x: jjnp.sin(x) if api[0] is jax.jit else fjnp.sin(x))
        return (str(ftrans.make_jaxpr(f)(2.0)) if api[0] is ftrans.jit else str(jax.make_jaxpr(f)(2.0)),
                jit(f).lower(2.0).as_text("hlo", debug_info=True),
                jit(grad(f)).lower(2.0).as_text("hlo", debug_info=True))

    for jaxpr_text, hlo, hlo_grad in (run((ftrans.jit, ftrans.remat, ftrans.grad)),
                                      run((jax.jit, jax.remat, jax.grad))):
        assert "remat2[" in jaxpr_text
        # (the test's file and function names have "remat" too: look at op names and instructions only)
        ops = " ".join(re.findall(r'op_name="([^"]*)"', hlo) + re.findall(r"^\s*(?:ROOT )?(\S+) = ", hlo, re.M))
        assert "remat" not in ops and "checkpoint" in ops
        assert "rematted_computation" in hlo_grad


def test_static_argnums_and_jvp_and_linearize():
    f = ftrans.checkpoint(lambda x, n: fjnp.sin(x) ** n, static_argnums=(1,))
    g = lambda x: jjnp.sin(x) ** 3  # noqa: E731
    np.testing.assert_allclose(np.asarray(ftrans.grad(lambda x: f(x, 3).sum())(X)),
                               np.asarray(jax.grad(lambda x: g(x).sum())(X)), rtol=1e-5, atol=1e-6)
    out, t = ftrans.jvp(lambda x: f(x, 3), (X,), (np.ones_like(X),))
    _, jt = jax.jvp(g, (X,), (np.ones_like(X),))
    np.testing.assert_allclose(np.asarray(t), np.asarray(jt), rtol=1e-5, atol=1e-6)
    _, f_lin = ftrans.linearize(lambda x: f(x, 3), X)
    np.testing.assert_allclose(np.asarray(f_lin(np.ones_like(X))), np.asarray(jt), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("static", [False, True])
def test_checkpoint_traces_once_per_signature_like_jax(static):
    """Calling a checkpointed function again (eagerly or under grad) reuses its staged body: the Python
    function runs once per argument signature and static arguments, as in JAX."""
    counts = []
    for T, lax_ in ((ftrans, ftrans.lax), (jax, jax.lax)):
        n = [0]

        def g(x, k, lax_=lax_, n=n):
            n[0] += 1
            return lax_.sin(x) * k, 3.0

        h = T.checkpoint(g, static_argnums=(1,)) if static else T.checkpoint(lambda x: g(x, 2.0))
        call = (lambda x, h=h: h(x, 2.0)[0]) if static else (lambda x, h=h: h(x)[0])
        vals = [np.asarray(call(2.0)) for _ in range(5)]
        vals.append(np.asarray(T.grad(call)(2.0)))
        vals.append(np.asarray(call(np.float32(1.0))))  # a new signature (a strong float): traced again
        counts.append(n[0])
        if T is ftrans:
            got = vals
    assert counts[0] == counts[1]
    for a, b in zip(got, vals):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_checkpoint_static_arguments_are_part_of_the_trace_key():
    n = [0]

    def g(x, k):
        n[0] += 1
        return x * k

    h = ftrans.checkpoint(g, static_argnums=1)
    assert [float(h(1.0, k)) for k in (2.0, 3.0, 2.0)] == [2.0, 3.0, 2.0]
    assert n[0] == 2
    unhashable = ftrans.checkpoint(lambda x, d: x * d["k"], static_argnums=-1)  # by identity, as in JAX
    assert float(unhashable(2.0, {"k": 4.0})) == 8.0
    with pytest.raises(ValueError, match="static_argnums"):
        h(1.0)
    with pytest.raises(ValueError):
        jax.checkpoint(lambda x, k: x * k, static_argnums=1)(1.0)


def test_python_control_flow_inside_checkpoint_raises_like_jax():
    """As in JAX, checkpoint stages its function even outside any transform: a Python ``if`` on an
    argument is a concretization error naming the user's line (JAX: the same class of error)."""
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.checkpoint(f)(3.0)
    with pytest.raises(ftrans.errors.TracerBoolConversionError, match="test_remat.py"):
        ftrans.checkpoint(f)(3.0)
    with pytest.raises(ftrans.errors.TracerBoolConversionError):
        ftrans.checkpoint(lambda x, _: f(x), static_argnums=(1,))(3.0, 1.0)


def test_bad_arguments():
    with pytest.raises(TypeError, match="checkpoint: expected a function"):
        ftrans.checkpoint(3)
    f = ftrans.checkpoint(lambda s, x: x * 2.0)
    with pytest.raises(TypeError, match="mark other arguments with static_argnums"):
        ftrans.grad(lambda x: f("not an array", x))(1.0)


# ---------------------------------------------------------------- HLO text: the no-CSE barrier, as XLA sees it
def _sin_sin_remat(T, lax_, **kw):
    @T.checkpoint if not kw else (lambda f: T.checkpoint(f, **kw))
    def g(x):
        return lax_.sin(lax_.sin(x)), 3.0

    return lambda x: g(x)[0]


@pytest.mark.parametrize("kw", [{}, {"policy": cp.nothing_saveable}, {"prevent_cse": False}])
def test_hlo_text_shows_the_barrier_only_in_the_backward_pass(kw):
    jkw = {k: (jax.checkpoint_policies.nothing_saveable if k == "policy" else v) for k, v in kw.items()}
    for T, lax_, k in ((ftrans, ftrans.lax, kw), (jax, jax.lax, jkw)):
        f = _sin_sin_remat(T, lax_, **k)
        fwd = T.jit(f).lower(2.0).as_text("hlo")
        bwd = T.jit(T.grad(f)).lower(2.0).as_text("hlo")
        assert fwd.startswith("HloModule") and "sine(" in fwd
        assert "opt-barrier" not in fwd and "while" not in fwd and "conditional" not in fwd
        assert ("opt-barrier" in bwd) == kw.get("prevent_cse", True), (T.__name__, bwd)
        assert "cosine(" in bwd


def test_hlo_text_of_a_program_and_unknown_dialect():
    lowered = ftrans.jit(lambda x, y: fjnp.dot(x, y) + 1.0).lower(W1, X)
    text = lowered.as_text("hlo")
    assert text.startswith("HloModule") and " dot(" in text and "ROOT" in text
    assert lowered.as_text() == lowered.as_text("stablehlo")
    with pytest.raises(ValueError, match="dialect"):
        lowered.as_text("llvm")


# ---------------------------------------------------------------- a custom_jvp rule that applies the function to tangents
def _linear_custom_sum(T, np_):
    @T.custom_jvp
    def csum(x):
        return np_.sum(x, axis=0)

    @csum.defjvp
    def csum_jvp(primals, tangents):
        (x,), (xdot,) = primals, tangents
        return csum(x), csum(xdot)  # the function itself, on the tangent

    return csum


def test_custom_jvp_applied_to_tangents_inside_checkpoint_transposes():
    """Its tangent half is a custom_jvp call on a linear value; reverse mode transposes it through its body."""
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    outs = []
    for T, np_, lax_, pol in ((ftrans, fjnp, ftrans.lax, cp.checkpoint_dots),
                              (jax, jjnp, jax.lax, jax.checkpoint_policies.checkpoint_dots)):
        csum = _linear_custom_sum(T, np_)
        f = T.checkpoint(lambda v: np_.sin(csum(v)), policy=pol)
        g = lambda xs: lax_.scan(lambda _, v: (None, f(v)), None, xs)[1]  # noqa: E731
        outs.append((T.grad(lambda v: f(v).sum())(x[0]), T.grad(lambda xs: g(xs).sum())(x),
                     T.jvp(g, (x,), (np.ones_like(x),))[1]))
        if T is ftrans:
            ftrans.test_util.check_grads(f, (x[0],), order=2, modes=["fwd", "rev"])
            ftrans.test_util.check_grads(g, (x,), order=2, modes=["fwd", "rev"])
    for a, b in zip(*outs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- the policy reaches into cond / scan / jit bodies
def _counts(text):
    return text.count(" sin "), text.count(" cos "), text.count(" dot_general")


def _funky_sin(T, np_, lax_, inner):
    """A custom_jvp sin whose rule computes sin and cos together inside a jit (or a cond)."""
    @T.custom_jvp
    def sin(x):
        return np_.sin(x)

    def sin_jvp(primals, tangents):
        (x,), (xdot,) = primals, tangents
        if inner == "jit":
            y, c = T.jit(lambda: (np_.sin(x), np_.cos(x)))()
        else:
            y, c = lax_.cond(True, lambda xs: (np_.sin(xs[0]), np_.cos(xs[1])), lambda xs: xs, (x, x))
        return y, c * xdot

    sin.defjvp(sin_jvp)
    return sin


def _policies(T):
    save = lambda name: (lambda prim, *_, **__: str(prim) == name)  # noqa: E731
    cps = T.checkpoint_policies
    return {"save_cos": save("cos"), "save_sin": save("sin"), "everything": cps.everything_saveable,
            "nothing": cps.nothing_saveable}


@pytest.mark.parametrize("inner", ["jit", "cond"])
@pytest.mark.parametrize("pol", ["save_cos", "save_sin", "everything", "nothing"])
def test_policy_inside_cond_saves_and_recomputes_like_jax(pol, inner):
    """What the linear program of checkpoint(cond(custom_jvp sin)) recomputes follows the policy inside the
    branch and inside the jit/cond of the rule (JAX: sin 0 and cos 0 when cos may be saved, cos 1 when not)."""
    got = []
    for T, np_, lax_ in (API_F, API_J):
        sin = _funky_sin(T, np_, lax_, inner)
        f = T.checkpoint(lambda x: lax_.cond(x.sum() > -np.inf, sin, lambda x: x, x), policy=_policies(T)[pol])
        got.append(_counts(str(T.make_jaxpr(T.linearize(f, 4.0)[1])(1.0))))
        np.testing.assert_allclose(np.asarray(T.grad(f)(3.0)), np.cos(3.0), rtol=1e-5)
        if T is ftrans:
            ftrans.test_util.check_grads(f, (3.0,), order=2, modes=["rev"])
    assert got[0] == got[1]


def test_policy_inside_nested_conds_recomputes_the_inner_output():
    got = []
    for T, np_, lax_ in (API_F, API_J):
        sin = _funky_sin(T, np_, lax_, "cond")
        app = lambda x: lax_.cond(True, sin, lambda x: x, x)  # noqa: E731
        f = T.checkpoint(lambda x: app(app(x)), policy=T.checkpoint_policies.nothing_saveable)
        got.append(_counts(str(T.make_jaxpr(T.linearize(f, 4.0)[1])(1.0))))
        np.testing.assert_allclose(np.asarray(T.grad(f)(3.0)), np.cos(np.sin(3.0)) * np.cos(3.0), rtol=1e-5)
    assert got[0] == got[1] == (1, 2, 0)


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_checkpoint_dots_with_cond_saves_the_dots(where):
    """Under checkpoint_dots the backward pass recomputes the sins and cosines of a cond's branch from the
    saved dots (2 sin, 3 cos, 5 dots in the backward program), as JAX's does."""
    got = []
    for T, np_, lax_ in (API_F, API_J):
        x = np_.ones((5,))

        def f(W):
            def body(x):
                for _ in range(3):
                    x = np_.sin(np_.dot(x, W))
                return x
            return lax_.cond(x.sum() > 0, body, lambda x: x, x)

        f = T.checkpoint(f, policy=T.checkpoint_policies.checkpoint_dots)
        y, f_vjp = T.vjp(f, np_.ones((5, 5)))
        got.append(_counts(str(T.make_jaxpr(f_vjp)(y))))
        got.append(np.asarray(f_vjp(np_.ones((5,)))[0]))
    assert got[0] == got[2] == (2, 3, 5)
    np.testing.assert_allclose(got[1], got[3], rtol=1e-5, atol=1e-6)


def test_policy_inside_scan_saves_what_it_may():
    """checkpoint(scan) with a policy saving cos: the linear program recomputes nothing (JAX: 0 sin, 0 cos);
    without a policy the scan is recomputed (sin and cos both appear)."""
    got = []
    for T, np_, lax_ in (API_F, API_J):
        to_scan = lambda c, _: (np_.sin(c), np_.sin(c))  # noqa: E731
        f = T.checkpoint(lambda x: lax_.scan(to_scan, x, None, length=3),
                         policy=lambda prim, *_, **__: str(prim) == "cos")
        got.append(_counts(str(T.make_jaxpr(T.linearize(f, 4.0)[1])(1.0))))
        g = T.checkpoint(lambda x: lax_.scan(to_scan, x, None, length=3))
        text = str(T.make_jaxpr(T.linearize(g, 4.0)[1])(1.0))
        assert " sin " in text and " cos " in text
        got.append(np.asarray(T.grad(lambda x: f(x)[1].sum())(3.0)))
    assert got[0] == got[2] == (0, 0, 0)
    np.testing.assert_allclose(got[1], got[3], rtol=1e-5)


def _dots_in_scan(T, np_, lax_, n_layers):
    x0 = np_.ones((5,))

    def f(W):
        def layer(x):
            for _ in range(n_layers):
                x = np_.sin(np_.dot(x, W, precision=lax_.Precision.HIGHEST))
            return x

        return lax_.scan(lambda x, _: (layer(x), None), x0, None, length=2)[0]

    return T.checkpoint(f, policy=T.checkpoint_policies.checkpoint_dots)


@pytest.mark.parametrize("n_layers", [1, 3])
def test_checkpoint_dots_outside_scan_saves_the_dots_and_recomputes_the_carry_chain(n_layers):
    """checkpoint(scan) saving only the dots: the carry (the previous step's sin) is not saved per step, so
    the backward pass reruns the scan forward from the saved dots (sin/cos only) and then the transposed scan
    (two dots per forward one), as JAX does; gradients agree."""
    got = []
    for T, np_, lax_ in (API_F, API_J):
        f = _dots_in_scan(T, np_, lax_, n_layers)
        W = np_.ones((5, 5)) * 0.1
        y, f_vjp = T.vjp(f, W)
        got.append(_counts(str(T.make_jaxpr(f_vjp)(y))))
        got.append(np.asarray(f_vjp(np_.ones((5,)))[0]))
        got.append(np.asarray(T.jit(T.grad(lambda w, f=f: f(w).sum()))(W)))
    assert got[0] == got[3] == (n_layers, n_layers, 2 * n_layers)
    np.testing.assert_allclose(got[1], got[4], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], got[5], rtol=1e-5, atol=1e-6)
    ftrans.test_util.check_grads(_dots_in_scan(*API_F, n_layers), (np.ones((5, 5), np.float32) * 0.1,), order=2,
                                 modes=["fwd", "rev"])


@pytest.mark.parametrize("pol", ["save_cos", "save_sin", "everything", "nothing"])
def test_policy_reaches_a_scan_inside_a_custom_jvp_rule_inside_a_scan(pol):
    """The custom_jvp rule runs a scan returning (sin x, cos x) as its carries; the outer tangent reads the
    inner scan's final cos carry. Under a policy saving cos, that known final carry comes from the saved
    value (the inner scan is split, its carry threaded) instead of the inner scan being recomputed whole."""
    def build(T, np_, lax_):
        def scan_apply(f, x):
            return lax_.scan(lambda c, _: (f(c), None), x, None, length=1)[0]

        @T.custom_jvp
        def sin(x):
            return np_.sin(x)

        def sin_jvp(primals, tangents):
            (x,), (xdot,) = primals, tangents
            y, c = scan_apply(lambda xs: (np_.sin(xs[0]), np_.cos(xs[1])), (x, x))
            return y, c * xdot

        sin.defjvp(sin_jvp)
        return T.checkpoint(lambda x: scan_apply(sin, x), policy=_policies(T)[pol])

    got = []
    for T, np_, lax_ in (API_F, API_J):
        f = build(T, np_, lax_)
        got.append(_counts(str(T.make_jaxpr(T.linearize(f, 4.0)[1])(1.0))))
        got.append(np.asarray(T.grad(f)(3.0)))
        if T is ftrans:
            ftrans.test_util.check_grads(f, (3.0,), order=2, modes=["rev"])
    assert got[0] == got[2], got
    np.testing.assert_allclose(got[1], got[3], rtol=1e-6)


def test_known_output_of_a_split_jit_feeds_a_later_one_under_checkpoint():
    """remat(f) where f calls a jitted multiply twice: the second call's known operand (the first's primal
    output) is recomputed under the policy, and the backward pass stays linear."""
    for pol in (None, cp.nothing_saveable, cp.everything_saveable):
        mul = ftrans.jit(lambda a, b: a * b)
        f = ftrans.checkpoint(lambda w, x: mul(mul(w, x), mul(w, x)), policy=pol)
        g = ftrans.grad(f, argnums=(0, 1))(1.5, 2.0)
        np.testing.assert_allclose([float(v) for v in g], [2 * 1.5 * 4.0, 2 * 2.0 * 2.25], rtol=1e-6)
        ftrans.test_util.check_grads(f, (1.5, 2.0), order=2, modes=["rev"])


def test_prevent_cse_per_argument_barrier_text_and_gradients():
    """prevent_cse as a tuple (one flag per argument): the backward pass's barrier prints as MLIR's
    custom assembly (``stablehlo.optimization_barrier %a, %b : ...``), as JAX's lowering does."""
    import re

    outs = []
    for T, np_, _ in (API_F, API_J):
        layer = T.checkpoint(lambda W, x: x @ W + np_.array([1.0, 2.0, 3.0]), prevent_cse=(False, True))

        def loss(Ws, x, layer=layer, np_=np_):
            for W in Ws:
                x = layer(W, x)
            return np_.sum(x ** 2)

        Ws = [np_.ones((3, 3)) * 0.5 for _ in range(2)]
        txt = T.jit(T.grad(loss, (0, 1))).lower(Ws, np_.ones(3)).as_text()
        assert re.search(r"optimization_barrier %[a-z0-9]+, %[a-z0-9]+ :", txt), T.__name__
        outs.append(T.jit(T.grad(loss, (0, 1)))(Ws, np_.ones(3)))
    for a, b in zip(jax.tree_util.tree_leaves(outs[0]), jax.tree_util.tree_leaves(outs[1])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)


def test_residual_logging_at_debug_level(caplog):
    """As JAX does, linearizing a checkpoint logs (DEBUG) which inputs and intermediates it saves."""
    import logging

    def f(x):
        return fjnp.cos(fjnp.sin(x).sum())

    x = fjnp.arange(3.0)
    cases = [(None, True, False), (cp.everything_saveable, False, True),
             (lambda p, *_, **__: str(p) == "cos", True, True)]
    for pol, inputs, intermediates in cases:
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="ftrans.ad_checkpoint"):
            g = ftrans.grad(ftrans.checkpoint(f, policy=pol))(x)
        text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ftrans.ad_checkpoint")
        assert ("saving inputs with shapes:\n  f32[3]" in text) == inputs, text
        assert ("saving these intermediates:" in text) == intermediates, text
        if intermediates:
            assert "output of cos from" in text and "test_remat.py" in text
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="jax._src.ad_checkpoint"):
            jax.grad(jax.checkpoint(lambda v: jjnp.cos(jjnp.sin(v).sum()), policy=pol))(np.arange(3.0))
        jtext = "\n".join(r.getMessage() for r in caplog.records if r.name == "jax._src.ad_checkpoint")
        # the same residuals as JAX's: cos x for sin, and sin (not -sin) for cos under everything_saveable
        assert re.findall(r"output of (\w+) from", text) == re.findall(r"output of (\w+) from", jtext), (text, jtext)
        np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(
            lambda v: jjnp.cos(jjnp.sin(v).sum()))(np.arange(3.0, dtype=np.float32))), rtol=1e-5)


def test_checkpoint_of_jit_compiles_once_across_calls(caplog):
    """vjp/linearize of checkpoint(jit(f)) in a loop: the checkpointed body is traced and split once, so the
    jit calls inside its halves are the same programs each time and compile once (JAX: one lowering)."""
    import logging

    def compiles():
        return sum(r.getMessage().startswith("Finished jaxpr to MLIR module conversion") for r in caplog.records
                   if r.name.startswith("ftrans"))

    caplog.set_level(logging.DEBUG, logger="ftrans")
    for static in (False, True):
        identity = (ftrans.checkpoint(ftrans.jit(lambda x: 2 * x), static_argnums=(0,)) if static
                    else ftrans.checkpoint(ftrans.jit(lambda x: 2 * x)))
        caplog.clear()
        for _ in range(4):
            y = identity(1.0) if static else ftrans.vjp(identity, 1.0)[0]
            assert float(y) == 2.0
        assert compiles() == 1, [r.getMessage() for r in caplog.records]
    identity = ftrans.checkpoint(ftrans.jit(lambda x: 2 * x))
    _, f_lin = ftrans.linearize(identity, 1.0)
    caplog.clear()
    assert [float(f_lin(1.0)) for _ in range(4)] == [2.0] * 4
    assert compiles() <= 1


def test_static_argnames_concrete_and_prevent_cse_arguments():
    """static_argnames marks keyword arguments static (JAX's checkpoint with remat3, which honours it);
    the removed ``concrete`` option and a prevent_cse that is not a bool or tuple are TypeErrors, as in JAX 0.11."""
    from jax._src import config as jax_config

    n = [0]

    def f(x, *, flag):
        n[0] += 1
        return x * 2.0 if flag else -x

    g = ftrans.checkpoint(f, static_argnames="flag")
    got = [float(g(3.0, flag=True)), float(ftrans.grad(lambda x: g(x, flag=False))(3.0)), float(g(3.0, flag=True))]
    with jax_config.remat3(True):
        jg = jax.checkpoint(f, static_argnames="flag")
        want = [float(jg(3.0, flag=True)), float(jax.grad(lambda x: jg(x, flag=False))(3.0)),
                float(jg(3.0, flag=True))]
    assert got == want == [6.0, -1.0, 6.0]
    with pytest.raises(TypeError, match="static_argnums"):
        ftrans.checkpoint(f, concrete=True)
    # jax 0.11 has no such parameter (TypeError, which ftrans follows); jax 0.10 raised NotImplementedError
    with pytest.raises(TypeError if jax.__version_info__ >= (0, 11) else NotImplementedError):
        jax.checkpoint(f, concrete=True)
    with pytest.raises(TypeError, match="prevent_cse"):
        ftrans.checkpoint(f, prevent_cse=None)
    with pytest.raises(TypeError):
        jax.checkpoint(f, prevent_cse=None)


@pytest.mark.parametrize("inner", ["jit", "scan"])
def test_nested_scans_share_the_recomputed_carry_under_nothing_saveable(inner):
    """checkpoint(scan(sin, scan(sin, x))) where sin's custom JVP computes (sin, cos) in a jit or a scan:
    the first scan's primal carry, which the second reads, is recomputed once (the unknown scan threads it)
    rather than by a second copy of the scan, and the backward pass transposes only the tangent halves
    (JAX: 2 sin, 2 cos in the linear program); gradients agree."""
    def build(T, np_, lax_):
        def scan_apply(f, x):
            return lax_.scan(lambda c, _: (f(c), None), x, None, length=1)[0]

        @T.custom_jvp
        def sin(x):
            return np_.sin(x)

        def sin_jvp(primals, tangents):
            (x,), (xdot,) = primals, tangents
            if inner == "jit":
                y, c = T.jit(lambda: (np_.sin(x), np_.cos(x)))()
            else:
                y, c = scan_apply(lambda xs: (np_.sin(xs[0]), np_.cos(xs[1])), (x, x))
            return y, c * xdot

        sin.defjvp(sin_jvp)
        return T.checkpoint(lambda x: scan_apply(sin, scan_apply(sin, x)),
                            policy=T.checkpoint_policies.nothing_saveable)

    got = []
    for T, np_, lax_ in (API_F, API_J):
        f = build(T, np_, lax_)
        got.append(_counts(str(T.make_jaxpr(T.linearize(f, 4.0)[1])(1.0))))
        got.append(float(T.grad(f)(3.0)))
    assert got[0] == got[2], got
    np.testing.assert_allclose(got[1], got[3], rtol=1e-6)
    np.testing.assert_allclose(got[1], np.cos(np.sin(3.0)) * np.cos(3.0), rtol=1e-5)
    ftrans.test_util.check_grads(build(*API_F), (3.0,), order=2, modes=["rev"])


def test_backward_recomputation_runs_in_rematted_computation_scope():
    """The backward pass's recomputation carries JAX's ``rematted_computation`` name scope (in front of the
    user's own scopes), once per recomputed equation, and the transposed equations do not."""
    import functools

    def run(lib, np_):
        def inner(x, w):
            with lib.named_scope("g"):
                return np_.tanh(x @ w)

        @lib.remat
        def f(x, w):
            return lib.named_call(lib.jit(lambda x, w: np_.sum(inner(x, w))), name="shard")(x, w)

        x, w = np.ones((3, 3), np.float32), np.ones((3, 2), np.float32)
        pullback = lib.vjp(functools.partial(f, x), w)[1]
        text = lib.make_jaxpr(pullback)(np.float32(1)).jaxpr.pretty_print(name_stack=True)
        return text.count("rematted_computation"), text.count("rematted_computation/shard")

    assert run(ftrans, fjnp) == run(jax, jjnp) == (1, 1)
