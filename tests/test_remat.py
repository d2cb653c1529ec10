"""``checkpoint``/``remat``: gradients unchanged, saved residuals as the policy says, recomputation in the IR."""

from __future__ import annotations

import os

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
    assert sum("output of name" in what for _, what in names) == 2  # the tagged hidden value per block
    assert _count("default") == nothing


def test_print_saved_residuals_names_sources(capsys):
    f = loss(fjnp, ftrans.checkpoint, checkpoint_name, policy=cp.dots_saveable)
    print_saved_residuals(f, W1, W2, X)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "f32[6,6] from the argument args[0][0]"
    assert any("output of dot_general from" in ln and "test_remat.py" in ln for ln in lines)


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
    assert [e.primitive.name for e in closed.eqns] == ["remat"]
    np.testing.assert_allclose(np.asarray(f(X)), np.sin(X) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(X)), np.sin(X) * 2.0, rtol=1e-6)
    assert ftrans.remat is ftrans.checkpoint


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
