"""``ftrans.scipy.special`` against ``jax.scipy.special``: values and gradients, eager, ``jit`` and ``vmap``.

``logsumexp`` is exercised with every argument (``axis``, ``b`` with negative
weights, ``keepdims``, ``return_sign``, ``where``) and with huge and ``-inf``
entries. Eager ftrans evaluates the special functions with SciPy and NumPy,
jax with XLA's approximations, so the comparisons allow a few float32 ulps
(relative where values are O(1), absolute near zeros of the function).
"""

from __future__ import annotations

import jax
import jax.scipy.special as jsp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as jnp
from ftrans.scipy import special as fsp

SHAPE = (2, 3)
_ORACLES: dict = {}


def oracle(key, make):
    """A ``jax.jit``-ed reference, built once per key (jax's op-by-op mode compiles every primitive per shape)."""
    fn = _ORACLES.get(key)
    if fn is None:
        fn = _ORACLES[key] = jax.jit(make())
    return fn


def close(ours, theirs, rtol=2e-5, atol=1e-6):
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(a.astype(wide), b.astype(wide), rtol=rtol, atol=atol, equal_nan=True)


def arrays(lo, hi, shape=SHAPE):
    lo, hi = float(np.float32(lo)), float(np.float32(hi))
    return hnp.arrays(np.float32, shape, elements=st.floats(lo, hi, width=32, allow_subnormal=False,
                                                            exclude_min=True, exclude_max=True))


# name -> (input range, value atol, grad rtol)
UNARY = {
    "erf": ((-4, 4), 1e-6, 1e-4),
    "erfc": ((-4, 9), 1e-6, 1e-4),
    "erfinv": ((-0.99, 0.99), 1e-5, 1e-3),
    "expit": ((-30, 30), 1e-6, 1e-4),
    "logit": ((0.01, 0.99), 1e-5, 1e-4),
    "gammaln": ((0.1, 20), 2e-5, 1e-3),
    "digamma": ((0.1, 20), 2e-5, 1e-3),
    "entr": ((0.0, 10), 1e-5, 1e-4),
    "ndtr": ((-8, 8), 1e-6, 1e-4),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_values_and_grads(name, data):
    (lo, hi), atol, grtol = UNARY[name]
    x = data.draw(arrays(lo, hi))
    f, g = getattr(fsp, name), getattr(jsp, name)
    want_v, want_g = oracle(name, lambda: lambda v: (g(v), jax.grad(lambda u: g(u).sum())(v)))(x)
    close(f(x), want_v, rtol=1e-4, atol=atol)
    close(ftrans.grad(lambda u: f(u).sum())(x), want_g, rtol=grtol, atol=atol)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_under_jit_and_vmap(name):
    (lo, hi), atol, _ = UNARY[name]
    x = np.linspace(lo + 0.01, hi - 0.01, 6, dtype=np.float32).reshape(SHAPE)
    f, g = getattr(fsp, name), getattr(jsp, name)
    want = jax.jit(lambda v: (g(v), jax.vmap(jax.grad(g))(v.ravel())))(x)
    close(ftrans.jit(f)(x), want[0], rtol=1e-4, atol=atol)
    close(ftrans.vmap(f)(x), want[0], rtol=1e-4, atol=atol)
    close(ftrans.jit(ftrans.vmap(ftrans.grad(f)))(x.ravel()), want[1], rtol=1e-3, atol=atol)


def test_integer_inputs_promote():
    i = np.array([1, 2, 3], np.int32)
    for name in ["erf", "expit", "gammaln", "digamma", "erfc", "entr"]:
        ours, theirs = getattr(fsp, name)(i), getattr(jsp, name)(i)
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype == np.float32, name
    assert np.asarray(fsp.xlogy(2, 3)).dtype == np.float32
    assert np.asarray(fsp.expit(1.0)).dtype == np.float32


def test_special_points():
    """xlogy(0, 0) = 0, entr(0) = 0, entr(<0) = -inf, and the custom derivatives there."""
    x = np.array([0.0, 0.0, 1.0, 2.0, 0.0], np.float32)
    y = np.array([0.0, 2.0, 0.0, 3.0, np.nan], np.float32)
    for name in ["xlogy", "xlog1py"]:
        f, g = getattr(fsp, name), getattr(jsp, name)
        close(f(x, y), g(x, y))
        close(ftrans.jit(f)(x, y), jax.jit(g)(x, y))
        yy = np.array([0.5, 2.0, 1.0, 3.0, 0.25], np.float32)
        ours = ftrans.grad(lambda a, b: f(a, b).sum(), (0, 1))(x, yy)
        theirs = jax.jit(jax.grad(lambda a, b: g(a, b).sum(), (0, 1)))(x, yy)
        close(ours[0], theirs[0])
        close(ours[1], theirs[1])
    e = np.array([-1.0, 0.0, 0.5, 1.0, np.inf], np.float32)
    close(fsp.entr(e), jsp.entr(e))
    close(ftrans.vmap(ftrans.grad(fsp.entr))(e[1:4]), jax.jit(jax.vmap(jax.grad(jsp.entr)))(e[1:4]))
    close(fsp.logit(np.float32([0.0, 1.0, 0.5])), jsp.logit(np.float32([0.0, 1.0, 0.5])))
    close(fsp.erfinv(np.float32([-1.0, 1.0, 0.0])), jsp.erfinv(np.float32([-1.0, 1.0, 0.0])))


@given(x=arrays(0.0, 5.0), y=arrays(-0.9, 5.0))
def test_xlogy_xlog1py_hypothesis(x, y):
    for name in ["xlogy", "xlog1py"]:
        f, g = getattr(fsp, name), getattr(jsp, name)
        y2 = np.abs(y) + np.float32(0.1) if name == "xlogy" else y
        want = oracle(name, lambda g=g: lambda a, b: (g(a, b), jax.grad(lambda u, v: g(u, v).sum(), (0, 1))(a, b)))
        want_v, (want_gx, want_gy) = want(x, y2)
        close(f(x, y2), want_v, rtol=1e-5, atol=1e-5)
        gx, gy = ftrans.grad(lambda u, v: f(u, v).sum(), (0, 1))(x, y2)
        close(gx, want_gx, rtol=1e-5, atol=1e-5)
        close(gy, want_gy, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------
# logsumexp


@given(a=arrays(-80, 80), axis=st.sampled_from([None, 0, 1, -1, (0, 1)]), keepdims=st.booleans())
def test_logsumexp_axis_keepdims(a, axis, keepdims):
    def ref(v):
        return jsp.logsumexp(v, axis=axis, keepdims=keepdims), jax.grad(lambda u: jsp.logsumexp(u, axis=axis).sum())(v)

    want_v, want_g = oracle(("lse", axis, keepdims), lambda: ref)(a)
    close(fsp.logsumexp(a, axis=axis, keepdims=keepdims), want_v)
    close(ftrans.grad(lambda u: fsp.logsumexp(u, axis=axis).sum())(a), want_g, rtol=1e-4, atol=1e-6)


@given(a=arrays(-20, 20), b=arrays(-2, 2), axis=st.sampled_from([None, 1]))
def test_logsumexp_with_b_and_sign(a, b, axis):
    def ref(u, w):
        out, sign = jsp.logsumexp(u, axis=axis, b=w, return_sign=True)
        plain = jsp.logsumexp(u, axis=axis, b=jax.numpy.abs(w))
        return out, sign, plain, jax.grad(lambda v: jsp.logsumexp(v, axis=axis, b=jax.numpy.abs(w)).sum())(u)

    b = np.where(np.abs(b) < 1e-3, 0, b).astype(np.float32)  # no subnormal products: XLA flushes them
    out, sign, plain, grad = oracle(("lse_b", axis), lambda: ref)(a, b)
    got_out, got_sign = fsp.logsumexp(a, axis=axis, b=b, return_sign=True)
    # a signed sum can cancel, which amplifies the rounding differences of exp
    close(got_out, out, rtol=1e-3, atol=1e-3)
    close(got_sign, sign)
    close(fsp.logsumexp(a, axis=axis, b=np.abs(b)), plain)
    close(ftrans.grad(lambda v: fsp.logsumexp(v, axis=axis, b=np.abs(b)).sum())(a), grad, rtol=1e-4, atol=1e-6)


def test_logsumexp_negative_sum_is_nan_and_b_zero_masks():
    a = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], np.float32)
    b = np.array([[1.0, -5.0, 0.0], [0.0, 1.0, 1.0]], np.float32)
    close(fsp.logsumexp(a, axis=1, b=b), jsp.logsumexp(a, axis=1, b=b))
    assert np.isnan(np.asarray(fsp.logsumexp(a, axis=1, b=b))[0])
    close(ftrans.jit(lambda u, w: fsp.logsumexp(u, axis=1, b=w))(a, b),
          jax.jit(lambda u, w: jsp.logsumexp(u, axis=1, b=w))(a, b))
    # gradient with respect to b
    close(ftrans.grad(lambda w: fsp.logsumexp(a, b=w))(np.abs(b)), jax.jit(jax.grad(lambda w: jsp.logsumexp(a, b=w)))(
        np.abs(b)), rtol=1e-5)


def test_logsumexp_extremes_and_where():
    a = np.array([[3e38, 3e38, 1.0], [-np.inf, -np.inf, -np.inf], [1e30, -np.inf, 5.0], [np.inf, 0.0, 1.0]],
                 np.float32)
    for axis in [1, None]:
        close(fsp.logsumexp(a, axis=axis), jsp.logsumexp(a, axis=axis))
        close(ftrans.jit(lambda u, axis=axis: fsp.logsumexp(u, axis=axis))(a),
              jax.jit(lambda u, axis=axis: jsp.logsumexp(u, axis=axis))(a))
    finite_rows = a[1:3]
    close(ftrans.grad(lambda u: fsp.logsumexp(u, axis=1).sum())(finite_rows),
          jax.jit(jax.grad(lambda u: jsp.logsumexp(u, axis=1).sum()))(finite_rows))
    mask = np.array([[True, False, True], [False, False, False], [True, True, False], [False, True, True]])
    x = np.where(np.isfinite(a), a, 7.0).astype(np.float32) / 1e30
    for axis in [1, None, 0]:
        close(fsp.logsumexp(x, axis=axis, where=mask), jsp.logsumexp(x, axis=axis, where=mask))
    close(fsp.logsumexp(x, axis=1, where=mask, keepdims=True, b=np.float32(2.0)),
          jsp.logsumexp(x, axis=1, where=mask, keepdims=True, b=np.float32(2.0)))
    close(ftrans.grad(lambda u: fsp.logsumexp(u, axis=1, where=mask).sum())(x),
          jax.jit(jax.grad(lambda u: jsp.logsumexp(u, axis=1, where=mask).sum()))(x))


def test_logsumexp_vmap_jit_and_dtypes():
    a = np.random.RandomState(0).randn(3, 4).astype(np.float32) * 10
    close(ftrans.vmap(fsp.logsumexp)(a), jax.jit(jax.vmap(jsp.logsumexp))(a))
    close(ftrans.jit(ftrans.vmap(ftrans.grad(fsp.logsumexp)))(a), jax.jit(jax.vmap(jax.grad(jsp.logsumexp)))(a))
    close(ftrans.vmap(lambda u, w: fsp.logsumexp(u, b=w), in_axes=(0, None))(a, a[0]),
          jax.jit(jax.vmap(lambda u, w: jsp.logsumexp(u, b=w), in_axes=(0, None)))(a, a[0]))
    i = np.arange(4, dtype=np.int32)
    close(fsp.logsumexp(i), jsp.logsumexp(i))
    h = a.astype(np.float16)
    close(fsp.logsumexp(h, axis=1), jsp.logsumexp(h, axis=1), rtol=2e-3, atol=2e-3)
    c = (a[:2] + 1j * a[1:3]).astype(np.complex64)
    close(fsp.logsumexp(c, axis=1), jsp.logsumexp(c, axis=1), rtol=1e-5, atol=1e-5)
    o, s = fsp.logsumexp(c, axis=1, return_sign=True)
    jo, js = jsp.logsumexp(c, axis=1, return_sign=True)
    close(o, jo, rtol=1e-5, atol=1e-5)
    close(s, js, rtol=1e-5, atol=1e-5)


def test_nn_logsumexp_is_scipy_logsumexp():
    assert ftrans.nn.logsumexp is fsp.logsumexp
    assert jnp.asarray(fsp.logsumexp(np.zeros(4, np.float32))).dtype == np.float32
