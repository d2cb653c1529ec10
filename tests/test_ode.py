"""``ftrans.experimental.ode.odeint`` against ``jax.experimental.ode.odeint`` (same algorithm: same steps)."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental.ode import odeint as jodeint

import ftrans
import ftrans.numpy as jnp
from ftrans.experimental.ode import odeint


def _close(a, b, rtol=1e-4, atol=1e-5):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def _pend(np_, y, t, m, g):
    theta, omega = y[0], y[1]
    return np_.stack([omega, -m * omega - g * np_.sin(theta) * (1.0 + 0.1 * t)])


Y0 = np.array([np.pi - 0.1, 0.0], np.float32)
TS = np.linspace(0.0, 1.0, 6, dtype=np.float32)


def test_values_and_gradients_match_jax():
    f = lambda np_: lambda y, t, m, g: _pend(np_, y, t, m, g)  # noqa: E731

    def loss(ode, np_):
        return lambda y0, ts, m: (ode(f(np_), y0, ts, m, 9.8) ** 2).sum()

    # both jax references from one program (eagerly, jax compiles each operation apart)
    want_value, want_grad = jax.jit(lambda y0, ts, m: (jodeint(f(jjnp), y0, ts, m, 9.8), jax.grad(
        loss(jodeint, jjnp), argnums=(0, 1, 2))(y0, ts, m)))(Y0, TS, np.float32(0.25))
    _close(odeint(f(jnp), Y0, TS, 0.25, 9.8), want_value, rtol=1e-5, atol=1e-5)
    got = ftrans.grad(loss(odeint, jnp), argnums=(0, 1, 2))(Y0, TS, np.float32(0.25))
    _close(got, want_grad, rtol=2e-3, atol=2e-3)


def test_pytree_state_and_closure_and_jit():
    k = np.float32(0.7)

    def dyn(np_, kk):
        return lambda y, t: {"a": -kk * y["a"], "b": (y["b"][0] * 0.5, -y["a"].sum() * np_.ones(2))}

    y0 = {"a": np.array([1.0, 2.0], np.float32), "b": (np.float32(0.5), np.zeros(2, np.float32))}
    ts = np.array([0.0, 0.5, 1.0], np.float32)
    got = ftrans.jit(lambda y0: odeint(dyn(jnp, k), y0, ts))(y0)
    want, jg = jax.jit(lambda y0, k: (jodeint(dyn(jjnp, k), y0, ts), jax.grad(
        lambda kk: jodeint(dyn(jjnp, kk), y0, ts)["a"][-1].sum())(k)))(y0, k)
    _close(got, want, rtol=1e-5)
    # the closed-over rate is differentiated (closure_convert makes it an argument)
    g = ftrans.grad(lambda kk: odeint(dyn(jnp, kk), y0, ts)["a"][-1].sum())(k)
    _close(g, jg, rtol=1e-3)


def test_vmap_of_grad_matches_jax():
    ts = np.array([0.0, 2.0], np.float32)

    def g(ode, np_):
        def one(x):
            return ode(lambda y, t: -x * y + np_.sin(t), np.float32(1.0), ts)[-1]
        return one

    xs = np.array([0.1, 0.5, 1.0], np.float32)
    got = ftrans.vmap(ftrans.grad(g(odeint, jnp)))(xs)
    want = jax.jit(jax.vmap(jax.grad(g(jodeint, jjnp))))(xs)
    _close(got, want, rtol=1e-3)


def test_hmax_limits_the_step():
    rhs = lambda np_: lambda y, t: np_.where(t <= 2.0, 1.0, np_.where((t >= 5.0) & (t <= 7.0), -1.0, 0.0))  # noqa: E731
    ts = np.array([0.0, 5.0, 10.0], np.float32)
    got = odeint(rhs(jnp), np.float32(0.0), ts, hmax=1.0)
    want = jax.jit(lambda y0, ts: jodeint(rhs(jjnp), y0, ts, hmax=1.0))(jjnp.float32(0.0), ts)
    _close(got, want, atol=1e-4)
    assert abs(float(got[1]) - 2.0) < 1e-4 and abs(float(got[2])) < 1e-4


def test_errors():
    with pytest.raises(TypeError, match="t must be an array of floats"):
        odeint(lambda y, t: -y, np.float32(1.0), np.arange(3))
    with pytest.raises(TypeError, match="odeint \\*args must be arrays or scalars"):
        odeint(lambda y, t, s: -y, np.float32(1.0), TS, "fast")
    with pytest.raises(TypeError, match="can't apply forward-mode"):
        ftrans.jacfwd(lambda k: odeint(lambda x, t: k * x, 1.0, jnp.linspace(0.0, 1.0, 5)).sum())(3.0)
