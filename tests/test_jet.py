"""``ftrans.experimental.jet`` (Taylor-mode AD) against JAX's ``jet`` and against nested ``jvp`` in JAX."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.experimental import jet as jjet_mod

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.experimental.jet import jet, jet2, zero_series

ORDER = 4


def _taylor_by_jvp(fun, primals, series):
    """The derivatives of ``fun`` along the input path, by nested forward mode in JAX (the slow oracle)."""
    order = len(series[0])

    def path(eps):
        return fun(*[x + sum(eps ** (k + 1) * t[k] / math.factorial(k + 1) for k in range(order))
                     for x, t in zip(primals, series)])

    out = fun(*primals)
    terms, g = [], path
    for _ in range(order):
        g = jax.jacfwd(g)
        terms.append(g(0.0))
    return out, terms


def _jjet(g, primals, series, **kw):
    """jax's ``jet`` as one jitted program (eager, jax compiles each operation of each Taylor rule apart)."""
    return jax.jit(lambda p, s: jjet_mod.jet(g, p, s, **kw))(primals, series)


def _check(got, want, rtol=2e-4, atol=2e-4):
    (y, ts), (wy, wts) = got, want
    np.testing.assert_allclose(np.asarray(y), np.asarray(wy), rtol=rtol, atol=atol)
    assert len(ts) == len(wts)
    for a, b in zip(ts, wts):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _inputs(n_args, lims, shape=(2, 3), seed=0, order=ORDER):
    rng = np.random.RandomState(seed)
    lo, hi = lims
    primals = [(lo + (hi - lo) * rng.rand(*shape)).astype(np.float32) for _ in range(n_args)]
    series = [[rng.randn(*shape).astype(np.float32) for _ in range(order)] for _ in range(n_args)]
    return primals, series


# (name, ftrans function, jax function, input range); JAX's jet has a rule for these.
UNARY = [
    ("exp", jnp.exp, jjnp.exp, (-2, 2)),
    ("log", jnp.log, jjnp.log, (0.8, 4)),
    ("log1p", jnp.log1p, jjnp.log1p, (0, 4)),
    ("expm1", jnp.expm1, jjnp.expm1, (-2, 2)),
    ("sin", jnp.sin, jjnp.sin, (-2, 2)),
    ("cos", jnp.cos, jjnp.cos, (-2, 2)),
    ("sinh", jnp.sinh, jjnp.sinh, (-2, 2)),
    ("cosh", jnp.cosh, jjnp.cosh, (-2, 2)),
    ("tanh", jnp.tanh, jjnp.tanh, (-3, 3)),
    ("logistic", lax.logistic, jax.lax.logistic, (-5, 5)),
    ("sqrt", jnp.sqrt, jjnp.sqrt, (0.5, 5)),
    ("rsqrt", lax.rsqrt, jax.lax.rsqrt, (0.5, 5)),
    ("erf", lax.erf, jax.lax.erf, (-2, 2)),
    ("erfc", lax.erfc, jax.lax.erfc, (-2, 2)),
    ("erf_inv", lax.erf_inv, jax.lax.erf_inv, (-0.9, 0.9)),
    ("asinh", lax.asinh, jax.lax.asinh, (-3, 3)),
    ("acosh", lax.acosh, jax.lax.acosh, (1.5, 4)),
    ("atanh", lax.atanh, jax.lax.atanh, (-0.8, 0.8)),
    ("abs", jnp.abs, jjnp.abs, (-2, 2)),
    ("int_pow3", lambda x: x ** 3, lambda x: x ** 3, (-2, 2)),
    ("int_pow_neg", lambda x: x ** -2, lambda x: x ** -2, (0.5, 2)),
    ("int_pow0", lambda x: x ** 0, lambda x: x ** 0, (-2, 2)),
    ("float_pow", lambda x: x ** 0.7, lambda x: x ** 0.7, (0.5, 2)),
    ("floor", jnp.floor, jjnp.floor, (-2, 2)),
    ("sign", jnp.sign, jjnp.sign, (-2, 2)),
    ("reduce_max", lambda x: x.max(axis=1), lambda x: x.max(axis=1), (-2, 2)),
    ("reduce_min_all", jnp.min, jjnp.min, (-2, 2)),
    ("sum", lambda x: jnp.sum(x, axis=0), lambda x: jjnp.sum(x, axis=0), (-2, 2)),
    ("cumsum", jnp.cumsum, jjnp.cumsum, (-2, 2)),
    ("cumprod", partial(jnp.cumprod, axis=1), partial(jjnp.cumprod, axis=1), (-2, 2)),
    ("cummax", partial(lax.cummax, axis=0), partial(jax.lax.cummax, axis=0), (-2, 2)),
    ("cummin_reverse", partial(lax.cummin, axis=1, reverse=True), partial(jax.lax.cummin, axis=1, reverse=True),
     (-2, 2)),
    ("gather", lambda x: x[1:, ::2], lambda x: x[1:, ::2], (-2, 2)),
    ("dynamic_slice", partial(lax.dynamic_slice, start_indices=(1, 1), slice_sizes=(1, 2)),
     partial(jax.lax.dynamic_slice, start_indices=(1, 1), slice_sizes=(1, 2)), (-2, 2)),
    ("transpose_reshape", lambda x: x.T.reshape(3, 2, 1), lambda x: x.T.reshape(3, 2, 1), (-2, 2)),
    ("pad_rev", lambda x: jnp.pad(x, ((1, 0), (0, 2)))[::-1], lambda x: jjnp.pad(x, ((1, 0), (0, 2)))[::-1],
     (-2, 2)),
    ("fft", jnp.fft.fft, jjnp.fft.fft, (-2, 2)),
    ("dot", lambda x: x @ x.T, lambda x: x @ x.T, (-2, 2)),
    ("composite", lambda x: jnp.sin(x) * jnp.exp(-x * x) / (1.0 + x ** 2),
     lambda x: jjnp.sin(x) * jjnp.exp(-x * x) / (1.0 + x ** 2), (-2, 2)),
]


@pytest.mark.parametrize("name,f,g,lims", UNARY, ids=[u[0] for u in UNARY])
def test_unary_rules_match_jax_jet(name, f, g, lims):
    primals, series = _inputs(1, lims)
    _check(jet(f, primals, series), _jjet(g, primals, series))


# Rules JAX's jet lacks: checked against nested forward mode.
EXTRA = [
    ("tan", jnp.tan, jjnp.tan, (-1, 1)),
    ("cbrt", jnp.cbrt, jjnp.cbrt, (0.5, 3)),
    ("exp2", jnp.exp2, jjnp.exp2, (-2, 2)),
    ("asin", jnp.arcsin, jjnp.arcsin, (-0.8, 0.8)),
    ("acos", jnp.arccos, jjnp.arccos, (-0.8, 0.8)),
    ("atan", jnp.arctan, jjnp.arctan, (-2, 2)),
    ("clamp_scalar_bounds", lambda x: lax.clamp(-1.0, x, 1.0), lambda x: jax.lax.clamp(-1.0, x, 1.0), (-2, 2)),
]


@pytest.mark.parametrize("name,f,g,lims", EXTRA, ids=[u[0] for u in EXTRA])
def test_rules_jax_lacks_match_nested_jvp(name, f, g, lims):
    primals, series = _inputs(1, lims, order=3)
    # the oracle as one jitted jax program (eager nested jacfwd compiles each of its operations on its own)
    want = jax.jit(lambda p, s: _taylor_by_jvp(g, p, s))(primals, series)
    _check(jet(f, primals, series), want, rtol=1e-3, atol=1e-3)


BINARY = [
    ("add", lambda x, y: x + y, lambda x, y: x + y, (-2, 2)),
    ("sub", lambda x, y: x - y, lambda x, y: x - y, (-2, 2)),
    ("mul", lambda x, y: x * y, lambda x, y: x * y, (-2, 2)),
    ("div", lambda x, y: x / y, lambda x, y: x / y, (0.8, 4)),
    ("pow", lambda x, y: x ** y, lambda x, y: x ** y, (0.5, 2)),
    ("atan2", lax.atan2, jax.lax.atan2, (-4, 4)),
    ("rem", lax.rem, jax.lax.rem, (0.8, 4)),
    ("max", lax.max, jax.lax.max, (-2, 2)),
    ("min", lax.min, jax.lax.min, (-2, 2)),
    ("where", lambda x, y: jnp.where(x > y, x, y * 2), lambda x, y: jjnp.where(x > y, x, y * 2), (-2, 2)),
    ("stack", lambda x, y: jnp.stack([x, y], axis=1), lambda x, y: jjnp.stack([x, y], axis=1), (-2, 2)),
    ("dus", lambda x, y: lax.dynamic_update_slice(x, y[:1, :2], (1, 1)),
     lambda x, y: jax.lax.dynamic_update_slice(x, y[:1, :2], (1, 1)), (-2, 2)),
    ("dot_general", lambda x, y: x @ y.T, lambda x, y: x @ y.T, (-2, 2)),
]


@pytest.mark.parametrize("name,f,g,lims", BINARY, ids=[b[0] for b in BINARY])
def test_binary_rules_match_jax_jet(name, f, g, lims):
    primals, series = _inputs(2, lims)
    _check(jet(f, primals, series), _jjet(g, primals, series))


def test_conv_matches_jax_jet():
    rng = np.random.RandomState(1)
    x, w = rng.randn(1, 1, 5, 5).astype(np.float32), rng.randn(2, 1, 2, 2).astype(np.float32)
    xs = [rng.randn(*x.shape).astype(np.float32) for _ in range(3)]
    ws = [rng.randn(*w.shape).astype(np.float32) for _ in range(3)]
    f = lambda conv: lambda a, b: conv(a, b, (1, 1), "VALID")  # noqa: E731
    _check(jet(f(lax.conv), (x, w), (xs, ws)), _jjet(f(jax.lax.conv), (x, w), (xs, ws)))


def test_logistic_taylor_is_exposed_like_jax():
    primals, series = _inputs(1, (-5, 5), order=3)
    from ftrans.experimental.jet import _logistic_taylor

    _check(_logistic_taylor(primals, series), jjet_mod._logistic_taylor(primals, series))


def test_calls_and_closures_inside_jet():
    primals, series = _inputs(1, (-2, 2))
    f = lambda j, np_: lambda x: j(lambda y: x * np_.sin(y))(2.0 * x)  # noqa: E731
    _check(jet(f(ftrans.jit, jnp), primals, series), _jjet(f(jax.jit, jjnp), primals, series))
    g = lambda cp, np_: lambda x: cp(lambda y: np_.exp(y) * y)(x)  # noqa: E731
    # JAX's jet has no rule for checkpoint; ftrans's runs the body (compared with nested jvp)
    _check(jet(g(ftrans.checkpoint, jnp), primals, series),
           jax.jit(lambda p, s: _taylor_by_jvp(g(jax.checkpoint, jjnp), p, s))(primals, series), rtol=1e-3, atol=1e-3)


def test_grad_and_jacfwd_inside_jet():
    # scatter-add, gather and the transposed program of grad, all under jet (JAX issue 5365).
    def h(grad, jacfwd, np_):
        def inner(eps):
            x = np_.array([1.0, 1.0])
            f = lambda t: ((x + t * eps * x)[0] ** 5 + (x + t * eps * x)[1] ** 5).sum()  # noqa: E731
            return grad(jacfwd(f))(0.0)
        return inner

    got = jet(h(ftrans.grad, ftrans.jacfwd, jnp), (0.0,), ([1.0, 2.0, 3.0],))
    want = _jjet(h(jax.grad, jax.jacfwd, jjnp), (0.0,), ([1.0, 2.0, 3.0],))
    _check(got, want, rtol=1e-3)


def test_output_that_ignores_the_input_has_zero_series():
    x = np.ones(3, np.float32)
    y, terms = jet(lambda x: jnp.full_like(x, 2.0), (x,), ([x, x],))
    assert terms is not zero_series and len(terms) == 2
    for t in terms:
        np.testing.assert_array_equal(np.asarray(t), np.zeros(3, np.float32))


def test_pytree_output_and_unscaled_series():
    primals, series = _inputs(1, (-1, 1), order=3)
    f = lambda np_: lambda x: {"s": np_.sin(x), "e": (np_.exp(x),)}  # noqa: E731
    got = jet2(f(jnp), primals, series)
    want = _jjet(f(jjnp), primals, series, factorial_scaled=False)
    _check((got[0]["s"], got[1]["s"]), (want[0]["s"], want[1]["s"]))
    _check((got[0]["e"][0], got[1]["e"][0]), (want[0]["e"][0], want[1]["e"][0]))


def test_jet_under_jit_and_vmap():
    primals, series = _inputs(1, (-1, 1))
    f = lambda x: jnp.tanh(x) * x  # noqa: E731
    want = _jjet(lambda x: jjnp.tanh(x) * x, primals, series)
    _check(ftrans.jit(lambda p, s: jet(f, (p,), (s,)))(primals[0], series[0]), want)
    out = ftrans.vmap(lambda p, s: jet(f, (p,), (s,)))(primals[0], series[0])
    _check(out, want)


def test_errors_name_the_problem():
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(lambda a, b: a * b, (x, x), ([x], [x, x]))
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        jet(lambda a: a, ((x, x),), ([x],))
    with pytest.raises(NotImplementedError, match="'sort'"):
        jet(jnp.sort, (x,), ([x],))
    with pytest.raises(NotImplementedError, match="'while'"):
        jet(lambda a: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, a))[1], (x,), ([x],))


def test_jit_inside_jet_stays_one_compiled_call():
    x = np.linspace(0.0, 1.0, 3).astype(np.float32)
    f = ftrans.jit(lambda y: y * jnp.sin(y))
    jaxpr = ftrans.make_jaxpr(lambda x: jet(f, (x,), ([x, x],)))(x)
    calls = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "jit_call"]
    assert len(calls) == 1 and len(calls[0].outvars) == 3  # the primal and two terms
    _check(jet(f, (x,), ([x, x],)), jjet_mod.jet(jax.jit(lambda y: y * jjnp.sin(y)), (x,), ([x, x],)))


def test_window_sum_and_psum_under_vmap():
    x = np.linspace(0.1, 1.0, 8).astype(np.float32).reshape(2, 4)
    f = lambda lx, np_: lambda a: lx.reduce_window(np_.sin(a), 0.0, lx.add, (1, 2), (1, 1), "VALID")  # noqa: E731
    _check(jet(f(lax, jnp), (x,), ([x, x],)), _jjet(f(jax.lax, jjnp), (x,), ([x, x],)))
    # JAX's jet has no psum rule; the first term is the JVP
    got = ftrans.vmap(lambda v: jet(lambda a: lax.psum(a * a, "i"), (v,), ([v],))[1][0], axis_name="i")(x)
    want = jax.vmap(lambda v: jax.jvp(lambda a: jax.lax.psum(a * a, "i"), (v,), (v,))[1], axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_fact_of_a_python_int_under_strict_promotion():
    # JAX's fact(n) is exp(lgamma(n + 1.)), a Python sum: JAX's jet tests call it under strict promotion.
    from ftrans.experimental.jet import fact

    with ftrans.numpy_dtype_promotion("strict"):
        assert [float(fact(n)) for n in (0, 1, 3, 4)] == pytest.approx([1.0, 1.0, 6.0, 24.0], rel=1e-5)
    assert float(fact(np.float32(4))) == pytest.approx(24.0, rel=1e-5)
