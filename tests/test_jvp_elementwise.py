"""Forward-mode derivatives of the elementwise primitives: ``ftrans.jvp`` against ``jax.jvp``.

Each primitive is reached through ``ftrans.lax`` and compared with ``jax.lax``
on the same hypothesis-drawn primals and tangents (values, dtypes, shapes of
both outputs), checked against central finite differences in float64, and
run under ``ftrans.jit`` and ``ftrans.make_jaxpr`` (whose printed IR must show
the tangent computation).  The core of the JVP layer (symbolic zeros, float0
tangents, pytrees, errors, ``jit_call``) is tested at the end.
"""

from __future__ import annotations

import contextlib
import functools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax
from ftrans.core.ir import typecheck
from ftrans.transforms import ad
from ftrans.transforms.ad import Zero, float0, jvp_rules

# name -> (arity, domain of each operand).  Domains keep the functions smooth
# (away from poles, branch cuts and kinks) so finite differences are meaningful.
ANY, POS, UNIT, GT1, AWAY0, GAMMA = (-3.0, 3.0), (0.2, 3.0), (-0.9, 0.9), (1.2, 3.0), "away0", (0.3, 4.0)
UNARY = {
    "neg": ANY, "exp": ANY, "exp2": ANY, "log": POS, "log1p": POS, "expm1": ANY, "sqrt": POS,
    "rsqrt": POS, "cbrt": POS, "tanh": ANY, "logistic": ANY, "sin": ANY, "cos": ANY, "tan": UNIT,
    "asin": UNIT, "acos": UNIT, "atan": ANY, "sinh": ANY, "cosh": ANY, "asinh": ANY, "acosh": GT1,
    "atanh": UNIT, "erf": ANY, "erfc": ANY, "erf_inv": UNIT, "lgamma": GAMMA, "digamma": GAMMA,
    "abs": AWAY0, "square": ANY,
}
BINARY = {
    "add": (ANY, ANY), "sub": (ANY, ANY), "mul": (ANY, ANY), "div": (ANY, AWAY0),
    "rem": (ANY, AWAY0), "max": (ANY, ANY), "min": (ANY, ANY), "pow": (POS, ANY),
    "atan2": (AWAY0, AWAY0),
}
# Piecewise-constant functions: the derivative is zero (as in JAX).
ZERO_DERIV = ["sign", "floor", "ceil", "round"]
# Kinks at ties or at integer quotients: finite differences are skipped there.
NONSMOOTH = {"rem", "max", "min", "abs"}
SHAPES = [(), (3,), (2, 3)]


@contextlib.contextmanager
def x64():
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    try:
        yield
    finally:
        ftrans.config.update("enable_x64", before)


def draw_values(rng: np.random.Generator, domain, shape, dtype=np.float32) -> np.ndarray:
    if domain == AWAY0:
        mag = rng.uniform(0.3, 3.0, size=shape)
        return (mag * rng.choice([-1.0, 1.0], size=shape)).astype(dtype)
    lo, hi = domain
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def f_lax(name):
    return getattr(lax, name)


def j_lax(name):
    return getattr(jax.lax, name)


def jax_jvp(f, primals, tangents):
    """``jax.jvp`` under ``jax.jit``: one compiled program instead of one per primitive of the JVP."""
    return jax.jit(lambda p, t: jax.jvp(f, p, t))(primals, tangents)


PAD = 8  # the oracle's operand length: every operand of this file's elementwise cases fits


@functools.cache
def _padded_jax_jvp(name, zero):
    g = j_lax(name)
    if zero is None:
        return jax.jit(lambda p, t: jax.jvp(g, p, t))
    if zero == 0:
        return jax.jit(lambda p, t: jax.jvp(lambda b: g(p[0], b), (p[1],), (t[1],)))
    return jax.jit(lambda p, t: jax.jvp(lambda a: g(a, p[1]), (p[0],), (t[0],)))


def jax_elementwise_jvp(name, primals, tangents, zero=None):
    """``jax.jvp`` of the elementwise ``jax.lax.<name>`` at ``primals``, in every argument (``zero=None``) or with
    argument ``zero`` not differentiated (its tangent is ignored).

    The function is elementwise, so jax computes it on the operands broadcast to the result's shape, flattened
    and padded to ``PAD`` elements: one compiled program per name, dtype and mode serves every shape (jax's
    op-by-op JVP would compile each primitive for each shape); the result is cut and reshaped back."""
    shape = np.broadcast_shapes(*(np.shape(p) for p in primals))
    n = int(np.prod(shape))
    assert n <= PAD

    def pad(a):
        a = np.asarray(a)
        return np.concatenate([np.broadcast_to(a, shape).ravel(), np.ones(PAD - n, a.dtype)])

    out = _padded_jax_jvp(name, zero)(tuple(map(pad, primals)), tuple(map(pad, tangents)))
    return tuple(np.asarray(o)[:n].reshape(shape) for o in out)


def assert_close(got, want, rtol=2e-5, atol=2e-6):
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.dtype == want_a.dtype, (got_a.dtype, want_a.dtype)
    assert got_a.shape == want_a.shape, (got_a.shape, want_a.shape)
    np.testing.assert_allclose(got_a, want_a, rtol=rtol, atol=atol)


def staged_jvp(f, primals, tangents):
    """jvp under make_jaxpr: typecheck the program and run it again."""
    closed = ftrans.make_jaxpr(lambda p, t: ftrans.jvp(f, p, t))(primals, tangents)
    typecheck(closed)
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves((primals, tangents))]
    return closed, ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *flat)


# ----------------------------------------------------------------------------
# Unary primitives


@pytest.mark.parametrize("name", sorted(UNARY))
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from(SHAPES))
def test_unary_matches_jax(name, seed, shape):
    rng = np.random.default_rng(seed)
    x = draw_values(rng, UNARY[name], shape)
    t = rng.normal(size=shape).astype(np.float32)
    p, tan = ftrans.jvp(f_lax(name), (x,), (t,))
    jp, jt = jax_elementwise_jvp(name, (x,), (t,))
    rtol = 1e-4 if name in ("digamma", "lgamma", "erf_inv", "tan") else 2e-5
    assert_close(p, jp, rtol=rtol, atol=1e-5)
    assert_close(tan, jt, rtol=rtol, atol=1e-5)
    _, (sp, st_) = staged_jvp(f_lax(name), (x,), (t,))
    assert_close(st_, jt, rtol=rtol, atol=1e-5)


@pytest.mark.parametrize("name", sorted(set(UNARY) - NONSMOOTH))
@given(seed=st.integers(0, 2**31 - 1))
def test_unary_finite_differences(name, seed):
    rng = np.random.default_rng(seed)
    with x64():
        x = draw_values(rng, UNARY[name], (4,), np.float64)
        t = rng.normal(size=(4,))
        f = f_lax(name)
        _, tan = ftrans.jvp(f, (x,), (t,))
        assert np.asarray(tan).dtype == np.float64
        eps = 1e-6
        fd = (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(tan), fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "tanh", "sqrt", "logistic", "tan", "atan",
                                  "sinh", "asinh", "expm1", "log1p", "rsqrt", "abs", "neg"])
def test_complex_unary_matches_jax(name):
    rng = np.random.default_rng(0)
    x = (rng.uniform(0.3, 1.5, 4) + 1j * rng.uniform(-1.0, 1.0, 4)).astype(np.complex64)
    t = (rng.normal(size=4) + 1j * rng.normal(size=4)).astype(np.complex64)
    p, tan = ftrans.jvp(f_lax(name), (x,), (t,))
    jp, jt = jax_elementwise_jvp(name, (x,), (t,))
    assert_close(p, jp, rtol=1e-5, atol=1e-5)
    assert_close(tan, jt, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, ftrans.dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("name", ["sin", "exp", "tanh", "digamma", "lgamma"])
def test_unary_dtypes(name, dtype):
    """Tangents keep the primal's dtype (float64 under x64)."""
    x = np.array([0.5, 1.25, 2.0]).astype(dtype)
    t = np.ones(3, dtype)
    ctx = x64() if dtype == np.float64 else contextlib.nullcontext()
    with ctx:
        p, tan = ftrans.jvp(f_lax(name), (x,), (t,))
        assert np.asarray(p).dtype == np.dtype(dtype)
        assert np.asarray(tan).dtype == np.dtype(dtype)
    if dtype != np.float64:
        _, jt = jax_elementwise_jvp(name, (x,), (t,))
        np.testing.assert_allclose(np.asarray(tan, np.float32), np.asarray(jt, np.float32), rtol=2e-2)


def test_weak_scalar_tangent_is_weak_like_jax():
    p, t = ftrans.jvp(lax.sin, (1.0,), (1.0,))
    jp, jt = jax.jvp(jax.lax.sin, (1.0,), (1.0,))
    assert t.weak_type == jt.aval.weak_type
    assert p.weak_type == jp.aval.weak_type
    np.testing.assert_allclose(np.asarray(t), np.asarray(jt), rtol=1e-6)


def test_digamma_negative_arguments_and_poles():
    x = np.array([-0.5, -1.5, -2.7, 0.3, 2.0, 25.0, -2.0, 0.0], np.float32)
    t = np.ones_like(x)
    _, tan = ftrans.jvp(lax.digamma, (x,), (t,))
    _, jt = jax_elementwise_jvp("digamma", (x,), (t,))
    np.testing.assert_allclose(np.asarray(tan), np.asarray(jt), rtol=1e-4)
    assert np.isinf(np.asarray(tan)[-2:]).all()


def test_digamma_float64_precision():
    import scipy.special as sps

    with x64():
        x = np.array([-3.3, -0.5, 0.1, 0.7, 1.0, 3.5, 9.9, 40.0, 1e4])
        _, tan = ftrans.jvp(lax.digamma, (x,), (np.ones_like(x),))
        np.testing.assert_allclose(np.asarray(tan), sps.polygamma(1, x), rtol=1e-12)


@pytest.mark.parametrize("name", ZERO_DERIV)
def test_piecewise_constant_have_zero_tangent(name):
    x = np.array([-1.5, 0.2, 2.5], np.float32)
    t = np.ones(3, np.float32)
    p, tan = ftrans.jvp(f_lax(name), (x,), (t,))
    jp, jt = jax_elementwise_jvp(name, (x,), (t,))
    assert_close(p, jp)
    assert_close(tan, jt)
    assert not np.asarray(tan).any()


# ----------------------------------------------------------------------------
# Binary primitives


@pytest.mark.parametrize("name", sorted(BINARY))
@given(seed=st.integers(0, 2**31 - 1),
       shapes=st.sampled_from([((), ()), ((3,), (3,)), ((2, 3), (2, 3)), ((3,), ()), ((), (2, 2))]),
       zero=st.sampled_from([None, 0, 1]))
def test_binary_matches_jax(name, seed, shapes, zero):
    """Both tangents, or one of them symbolically zero (the operand is closed over)."""
    rng = np.random.default_rng(seed)
    dx, dy = BINARY[name]
    x = draw_values(rng, dx, shapes[0])
    y = draw_values(rng, dy, shapes[1])
    tx = rng.normal(size=shapes[0]).astype(np.float32)
    ty = rng.normal(size=shapes[1]).astype(np.float32)
    f = f_lax(name)
    if zero is None:
        got = ftrans.jvp(f, (x, y), (tx, ty))
        want = jax_elementwise_jvp(name, (x, y), (tx, ty))
    elif zero == 0:
        got = ftrans.jvp(lambda b: f(x, b), (y,), (ty,))
        want = jax_elementwise_jvp(name, (x, y), (tx, ty), zero=0)
    else:
        got = ftrans.jvp(lambda a: f(a, y), (x,), (tx,))
        want = jax_elementwise_jvp(name, (x, y), (tx, ty), zero=1)
    assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert_close(got[1], want[1], rtol=1e-4, atol=1e-5)
    if zero is None:
        _, (sp, stan) = staged_jvp(f, (x, y), (tx, ty))
        assert_close(stan, want[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(seed=st.integers(0, 2**31 - 1))
def test_binary_finite_differences(name, seed):
    rng = np.random.default_rng(seed)
    dx, dy = BINARY[name]
    with x64():
        x = draw_values(rng, dx, (4,), np.float64)
        y = draw_values(rng, dy, (4,), np.float64)
        if name in NONSMOOTH:  # keep away from ties and integer quotients
            x = np.floor(x) + 0.5
            y = np.where(np.abs(y) < 0.3, 0.3, y) if name == "rem" else x + np.sign(y) * 0.7
            if name == "rem":
                y = np.full(4, 2.0) * np.sign(rng.normal(size=4))
        tx, ty = rng.normal(size=4), rng.normal(size=4)
        f = f_lax(name)
        _, tan = ftrans.jvp(f, (x, y), (tx, ty))
        eps = 1e-6
        fd = (np.asarray(f(x + eps * tx, y + eps * ty)) - np.asarray(f(x - eps * tx, y - eps * ty))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(tan), fd, rtol=1e-5, atol=1e-6)


def test_max_min_ties_split_evenly_like_jax():
    x = np.array([1.0, 2.0, 3.0, np.nan], np.float32)
    y = np.array([1.0, 3.0, 3.0, 0.0], np.float32)
    tx = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    ty = np.array([10.0, 10.0, 20.0, 10.0], np.float32)
    for f, g in ((lax.max, jax.lax.max), (lax.min, jax.lax.min)):
        _, tan = ftrans.jvp(f, (x, y), (tx, ty))
        _, jt = jax_jvp(g, (x, y), (tx, ty))
        assert_close(tan, jt)
    _, tan = ftrans.jvp(lax.max, (x, y), (tx, ty))
    assert np.asarray(tan)[0] == 5.5 and np.asarray(tan)[2] == 10.5


def test_pow_integer_exponent_and_zero_base():
    x = np.array([0.0, 2.0, -1.5, 0.0], np.float32)
    y = np.array([0, 3, 2, 1], np.int32)
    tx = np.ones(4, np.float32)
    p, tan = ftrans.jvp(lambda a: lax.pow(a, y), (x,), (tx,))
    jp, jt = jax_jvp(lambda a: jax.lax.pow(a, y), (x,), (tx,))
    assert_close(p, jp)
    assert_close(tan, jt)
    # Integer exponent given as a primal: its tangent must be float0.
    p, (t1) = ftrans.jvp(lax.pow, (x, y), (tx, np.zeros(4, float0)))
    assert_close(t1, jt)


def test_pow_float_exponent_at_zero_base():
    x = np.array([0.0, 0.0, 2.0], np.float32)
    y = np.array([2.0, 0.5, -1.0], np.float32)
    t = np.ones(3, np.float32)
    got = ftrans.jvp(lax.pow, (x, y), (t, t))
    want = jax_jvp(jax.lax.pow, (x, y), (t, t))
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 3, 5])
def test_integer_pow(n):
    x = np.array([0.5, -1.5, 2.0], np.float32)
    t = np.array([1.0, 2.0, -1.0], np.float32)
    got = ftrans.jvp(lambda a: lax.integer_pow(a, n), (x,), (t,))
    want = jax_jvp(lambda a: jax.lax.integer_pow(a, n), (x,), (t,))
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_nextafter_derivative_is_identity_in_x():
    x = np.array([1.0, -2.0], np.float32)
    y = np.array([2.0, -3.0], np.float32)
    _, tan = ftrans.jvp(lax.nextafter, (x, y), (np.full(2, 3.0, np.float32), np.ones(2, np.float32)))
    np.testing.assert_array_equal(np.asarray(tan), [3.0, 3.0])


# ----------------------------------------------------------------------------
# Complex parts


def test_complex_parts_match_jax():
    rng = np.random.default_rng(1)
    z = (rng.normal(size=3) + 1j * rng.normal(size=3)).astype(np.complex64)
    tz = (rng.normal(size=3) + 1j * rng.normal(size=3)).astype(np.complex64)
    x, y = rng.normal(size=3).astype(np.float32), rng.normal(size=3).astype(np.float32)
    tx, ty = np.ones(3, np.float32), np.full(3, 2.0, np.float32)
    parts = ("real", "imag", "conj", "abs")

    def jax_side(z, tz, x, y, tx, ty):  # every jax JVP of the test in one compiled program
        return ([jax.jvp(j_lax(name), (z,), (tz,)) for name in parts], jax.jvp(jax.lax.complex, (x, y), (tx, ty)),
                jax.jvp(lambda a: jax.lax.complex(a, y), (x,), (tx,)), jax.jvp(jax.lax.conj, (x,), (tx,)))

    want_parts, want_complex, want_complex_x, want_conj = jax.jit(jax_side)(z, tz, x, y, tx, ty)
    for name, want in zip(parts, want_parts):
        got = ftrans.jvp(f_lax(name), (z,), (tz,))
        assert_close(got[0], want[0])
        assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)
    got = ftrans.jvp(lax.complex, (x, y), (tx, ty))
    assert_close(got[1], want_complex[1])
    got = ftrans.jvp(lambda a: lax.complex(a, y), (x,), (tx,))
    assert_close(got[1], want_complex_x[1])
    # conj of a real operand gives a complex tangent.
    got = ftrans.jvp(lax.conj, (x,), (tx,))
    assert_close(got[1], want_conj[1])


def test_abs_at_zero_like_jax():
    x = np.array([0.0, -0.0, 1.0, -2.0], np.float32)
    t = np.ones(4, np.float32)
    assert_close(ftrans.jvp(lax.abs, (x,), (t,))[1], jax_jvp(jax.lax.abs, (x,), (t,))[1])
    z = np.array([0j, 3 + 4j], np.complex64)
    tz = np.array([1 + 1j, 1j], np.complex64)
    assert_close(ftrans.jvp(lax.abs, (z,), (tz,))[1], jax_jvp(jax.lax.abs, (z,), (tz,))[1])


# ----------------------------------------------------------------------------
# Non-differentiable outputs: zero tangents, never a crash


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_have_float0_tangents(name):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([2.0, 2.0, 2.0], np.float32)
    p, tan = ftrans.jvp(f_lax(name), (x, y), (np.ones(3, np.float32), np.ones(3, np.float32)))
    jp, jt = jax_jvp(j_lax(name), (x, y), (np.ones(3, np.float32), np.ones(3, np.float32)))
    np.testing.assert_array_equal(np.asarray(p), np.asarray(jp))
    assert np.asarray(tan).dtype == float0 == np.asarray(jt).dtype
    assert np.asarray(tan).shape == (3,)


def test_is_finite_and_stop_gradient():
    x = np.array([1.0, np.inf], np.float32)
    t = np.ones(2, np.float32)
    _, tan = ftrans.jvp(lax.is_finite, (x,), (t,))
    assert np.asarray(tan).dtype == float0
    p, tan = ftrans.jvp(lambda a: lax.stop_gradient(a) * a, (x[:1],), (t[:1],))
    jp, jt = jax_jvp(lambda a: jax.lax.stop_gradient(a) * a, (x[:1],), (t[:1],))
    assert_close(tan, jt)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
                                  "shift_right_logical", "shift_right_arithmetic"])
def test_integer_bit_ops_have_float0_tangents(name):
    x = np.array([1, 6, 7], np.int32)
    y = np.array([1, 2, 3], np.int32)
    z = np.zeros(3, float0)
    p, tan = ftrans.jvp(f_lax(name), (x, y), (z, z))
    jp, jt = jax_jvp(j_lax(name), (x, y), (z, z))
    np.testing.assert_array_equal(np.asarray(p), np.asarray(jp))
    assert np.asarray(tan).dtype == float0


def test_every_elementwise_primitive_has_a_jvp_rule():
    from ftrans.core.primitive import Primitive
    from ftrans.core.prims import elementwise as E

    prims = [v for v in vars(E).values() if isinstance(v, Primitive)]
    assert len(prims) > 60
    assert [p.name for p in prims if p not in jvp_rules] == []


@pytest.mark.parametrize("name", ["not", "population_count", "sign", "floor", "round", "eq", "and",
                                  "shift_left", "is_finite", "stop_gradient"])
def test_zero_rules_return_symbolic_zero(name):
    """Called directly, the zero rules never materialise a tangent."""
    from ftrans.core.primitive import registry

    prim = registry[name]
    is_float = name in ("sign", "floor", "round", "is_finite", "stop_gradient")
    n = 1 if name in ("not", "population_count", "sign", "floor", "round", "is_finite", "stop_gradient") else 2
    x = ftrans.numpy.asarray(np.array([1.5, 2.0], np.float32) if is_float else np.array([1, 2], np.int32))
    params = {"rounding_method": 0} if name == "round" else {}
    out, tan = jvp_rules[prim]([x] * n, [ad.Zero.from_primal_value(x)] * n, **params)
    assert type(tan) is Zero
    assert tan.aval.shape == (2,)


# ----------------------------------------------------------------------------
# Under jit and make_jaxpr


def test_jvp_under_jit_matches_eager():
    def f(x, y):
        return lax.atan2(lax.sin(x) * y, lax.exp(y)) + lax.pow(x, y)

    x = np.array([0.5, 1.5], np.float32)
    y = np.array([1.2, -0.7], np.float32)
    t = (np.ones(2, np.float32), np.full(2, 0.5, np.float32))
    eager = ftrans.jvp(f, (x, y), t)
    jitted = ftrans.jit(lambda a, b, ta, tb: ftrans.jvp(f, (a, b), (ta, tb)))(x, y, *t)
    want = jax_jvp(lambda a, b: jax.lax.atan2(jax.lax.sin(a) * b, jax.lax.exp(b)) + jax.lax.pow(a, b), (x, y), t)
    for got in (eager, jitted):
        assert_close(got[0], want[0], rtol=1e-5)
        assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)


def test_make_jaxpr_shows_tangent_computation():
    closed = ftrans.make_jaxpr(lambda x, t: ftrans.jvp(lax.sin, (x,), (t,)))(
        np.ones(3, np.float32), np.ones(3, np.float32))
    typecheck(closed)
    text = str(closed)
    assert "sin" in text and "cos" in text and "mul" in text


def test_symbolic_zeros_are_not_materialised():
    """A closed-over operand has a symbolic zero tangent: no zeros and no dead terms in the IR."""
    c = np.array([2.0, 3.0], np.float32)

    def f(x):
        return lax.mul(lax.add(x, c), c) + lax.sin(c)

    closed = ftrans.make_jaxpr(lambda x, t: ftrans.jvp(f, (x,), (t,))[1])(c, c)
    prims = [e.primitive.name for e in closed.jaxpr.eqns]
    assert "broadcast_in_dim" not in prims
    # tangent = t * c: one mul for the primal, one for the tangent, no cos (sin(c) is constant).
    assert prims.count("mul") == 2 and "cos" not in prims


def test_jvp_of_constant_function_gives_zeros():
    p, t = ftrans.jvp(lambda x: lax.sin(np.float32(1.0)), (np.float32(2.0),), (np.float32(1.0),))
    assert np.asarray(t).dtype == np.float32 and np.asarray(t) == 0.0


def test_jvp_of_jit_is_one_call():
    g = ftrans.jit(lambda x, y: lax.sin(x) * y)
    x = np.array([0.5, 1.0], np.float32)
    y = np.array([2.0, 3.0], np.float32)
    closed = ftrans.make_jaxpr(lambda a, t: ftrans.jvp(lambda u: g(u, y), (a,), (t,)))(x, x)
    typecheck(closed)
    calls = [e for e in closed.jaxpr.eqns if e.primitive.name == "jit_call"]
    assert len(calls) == 1 and str(calls[0].source_info.name_stack) == "jvp()"  # the name stays (JAX's)
    # y's tangent is a symbolic zero: the call takes x, y and only x's tangent.
    assert len(calls[0].invars) == 3
    got = ftrans.jvp(lambda u: g(u, y), (x,), (np.ones(2, np.float32),))
    want = jax_jvp(lambda u: jax.lax.sin(u) * y, (x,), (np.ones(2, np.float32),))
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_nested_jvp_second_derivative():
    x = np.array([0.3, 1.1], np.float32)
    t = np.ones(2, np.float32)

    def df(a):
        return ftrans.jvp(lax.tanh, (a,), (t,))[1]

    _, d2 = ftrans.jvp(df, (x,), (t,))
    _, jd2 = jax_jvp(lambda a: jax.jvp(jax.lax.tanh, (a,), (t,))[1], (x,), (t,))
    assert_close(d2, jd2, rtol=1e-5)


# ----------------------------------------------------------------------------
# The public API: pytrees, has_aux, errors


def test_pytrees_and_has_aux():
    def f(d, s):
        out = {"a": lax.sin(d["x"]) * s, "b": (lax.exp(d["y"]),)}
        return out, {"aux": d["x"] + 1}

    prim = ({"x": np.float32(0.5), "y": np.array([1.0, 2.0], np.float32)}, np.float32(3.0))
    tang = ({"x": np.float32(1.0), "y": np.array([0.5, 0.5], np.float32)}, np.float32(0.0))
    p, t, aux = ftrans.jvp(f, prim, tang, has_aux=True)
    jp, jt, jaux = jax.jit(lambda p, t: jax.jvp(lambda d, s: (
        {"a": jjnp.sin(d["x"]) * s, "b": (jjnp.exp(d["y"]),)}, {"aux": d["x"] + 1}), p, t, has_aux=True))(prim, tang)
    for g, w in zip(jax.tree_util.tree_leaves((p, t, aux)), jax.tree_util.tree_leaves((jp, jt, jaux))):
        assert_close(g, w)
    assert jax.tree_util.tree_structure(t) == jax.tree_util.tree_structure(jt)
    assert isinstance(aux["aux"], ftrans.Array)


def test_int_primal_takes_float0_tangent():
    p, t = ftrans.jvp(lambda n, x: x * n, (np.int32(3), np.float32(2.0)),
                      (np.zeros((), float0), np.float32(1.0)))
    assert np.asarray(t) == 3.0
    p, t = ftrans.jvp(lambda n: n * 2, (np.int32(3),), (np.zeros((), float0),))
    assert np.asarray(p) == 6 and np.asarray(t).dtype == float0


def test_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="tuples or lists"):
        ftrans.jvp(lax.sin, x, x)
    with pytest.raises(TypeError, match="same tree structure"):
        ftrans.jvp(lambda a, b: a, (x, x), (x,))
    with pytest.raises(ValueError, match=r"shapes.*\(3,\).*\(2,\)"):  # a ValueError, as JAX's
        ftrans.jvp(lax.sin, (x,), (np.ones(2, np.float32),))
    with pytest.raises(TypeError, match="float32.*int32"):
        ftrans.jvp(lax.sin, (x,), (np.ones(3, np.int32),))
    with pytest.raises(TypeError, match="float0"):
        ftrans.jvp(lambda n: n, (np.int32(1),), (np.float32(1.0),))
    with pytest.raises(TypeError, match="pair"):
        ftrans.jvp(lax.sin, (x,), (x,), has_aux=True)
    with pytest.raises(TypeError, match="function"):
        ftrans.jvp(3, (x,), (x,))


def test_fjnp_functions_differentiate():
    """The jnp layer is built from primitives, so its functions differentiate too."""
    x = np.array([0.2, 0.7, 1.9], np.float32)
    t = np.ones(3, np.float32)
    names = ("log2", "deg2rad", "reciprocal", "arctan2", "power", "float_power", "maximum", "true_divide", "fmod")
    arg_lists = [(x,) if fname in ("log2", "deg2rad", "reciprocal") else (x, x[::-1].copy()) for fname in names]
    # jax's JVPs of all of them in one compiled program
    wants = jax.jit(lambda arg_lists: [jax.jvp(getattr(jjnp, fname), args, (t,) * len(args))
                                       for fname, args in zip(names, arg_lists)])(arg_lists)
    for fname, args, want in zip(names, arg_lists, wants):
        got = ftrans.jvp(getattr(fjnp, fname), args, (t,) * len(args))
        assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)
