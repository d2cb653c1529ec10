"""Reverse-mode derivatives of the elementwise primitives: ``ftrans.vjp`` against ``jax.vjp``.

The primitives, domains and shapes are those of ``tests/test_jvp_elementwise.py``.
Each primitive is reached through ``ftrans.lax`` and compared with ``jax.lax``
on hypothesis-drawn primals and a random output cotangent: primal outputs and
input cotangents (value, dtype, shape), ``ftrans.grad`` of a scalar-output
variant against ``jax.grad``, the pullback staged (``make_jaxpr``: typechecked,
re-evaluated) and under ``ftrans.jit``, float64 under x64 (against jax's values
and, where smooth, against finite differences), complex operands, float16 and
bfloat16.  Binary primitives are also differentiated with one operand closed
over (its tangent a symbolic zero) and with a rank-0 operand broadcast against
a shaped one.  Non-differentiable primitives (comparisons, rounding, bit
operations, ``is_finite``, ``stop_gradient``) pull back zeros, as in JAX.  The
transposes of the linear elementwise primitives are checked with
``linear_transpose`` against ``jax.linear_transpose``.

The harness (``check_case`` and friends) is ``tests/test_vjp_structural.py``'s.
"""

from __future__ import annotations

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
from tests.test_jvp_elementwise import (
    BINARY,
    NONSMOOTH,
    SHAPES,
    UNARY,
    ZERO_DERIV,
    draw_values,
)
from tests.test_vjp_structural import (
    F0,
    FT,
    JX,
    _jax_oracle,
    assert_close,
    assert_leaves_close,
    check_case,
    check_case_x64,
    check_fd_x64,
    check_grad,
    check_staged,
    make_weights,
    random_like,
)


def _jax_pullback(f, *args):
    """jax's cotangents of ``f`` at ``args[:-1]`` for the cotangent ``args[-1]``, as one compiled jax program."""
    return jax.jit(lambda *a: jax.vjp(f, *a[:-1])[1](a[-1]))(*args)


@functools.cache  # one builder per primitive, so jax's compiled oracle is reused across examples
def unary(name):
    def build(np_, lx):
        return getattr(lx, name)

    return build


def _unary_tol(name):
    return (1e-4, 1e-5) if name in ("digamma", "lgamma", "erf_inv", "tan") else (2e-5, 1e-5)


# ----------------------------------------------------------------------------
# Unary primitives


PAD = 6  # every unary oracle runs on a flat vector of this length: one jax compilation per primitive


def _filler(domain):
    return 1.0 if isinstance(domain, str) else (domain[0] + domain[1]) / 2


def _padded(a, fill):
    flat = np.ravel(a)
    return np.concatenate([flat, np.full(PAD - flat.size, fill, flat.dtype)])


def check_unary(name, x, rng, *, staged=False, grad=False):
    """``vjp`` (or ``grad`` of ``sum(f(x) * w)``) of a unary primitive at ``x`` against jax.

    Elementwise, so jax's oracle is evaluated on ``x`` flattened and padded (with a value inside the domain).
    """
    rtol, atol = _unary_tol(name)
    f = getattr(lax, name)
    fill = _filler(UNARY[name])
    out, pb = ftrans.vjp(f, x)
    ct = random_like(rng, np.shape(x), np.float32)
    w = random_like(rng, np.shape(x), np.float32)
    want_out, (want,), (want_grad,) = _jax_oracle(("E", name), unary(name), False)(
        (_padded(x, fill),), [_padded(ct, 0.0)], (_padded(w, 0.0),))

    def unpad(v):
        return np.asarray(v)[: np.size(x)].reshape(np.shape(x))

    if grad:
        got = ftrans.grad(lambda v: fjnp.sum(f(v) * w))(x)
        assert_close(got, unpad(want_grad), rtol=rtol, atol=atol)
        return got
    assert_close(out, unpad(want_out[0]), rtol=rtol, atol=atol)
    (g,) = pb(ct)
    assert_close(g, unpad(want), rtol=rtol, atol=atol)
    if staged:
        _, tree = jax.tree_util.tree_flatten(out)
        check_staged(f, (x,), [ct], pb, tree, [(np.shape(x), np.dtype(np.float32))], [unpad(want)], rtol=rtol,
                     atol=atol)
    return g


@pytest.mark.parametrize("name", sorted(UNARY))
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from(SHAPES))
def test_unary_vjp_matches_jax(name, seed, shape):
    rng = np.random.default_rng(seed)
    g = check_unary(name, draw_values(rng, UNARY[name], shape), rng)
    assert np.asarray(g).dtype == np.float32 and np.shape(g) == shape


@pytest.mark.parametrize("name", sorted(UNARY))
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from(SHAPES))
def test_unary_grad_matches_jax(name, seed, shape):
    rng = np.random.default_rng(seed)
    check_unary(name, draw_values(rng, UNARY[name], shape), rng, grad=True)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_pullback_staged_and_jit(name):
    rng = np.random.default_rng(0)
    check_unary(name, draw_values(rng, UNARY[name], (2, 3)), rng, staged=True)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float64_matches_jax(name):
    rng = np.random.default_rng(1)
    x = draw_values(rng, UNARY[name], (PAD,))
    rtol, atol = _unary_tol(name)
    check_case_x64(("E", name), unary(name), (x,), rng, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(set(UNARY) - NONSMOOTH))
@given(seed=st.integers(0, 2**31 - 1))
def test_unary_float64_finite_differences(name, seed):
    check_fd_x64(unary(name), None, np.random.default_rng(seed),
                 draw_prims=lambda r, d: (draw_values(r, UNARY[name], (4,), d),), rtol=1e-5, atol=1e-7)


COMPLEX_UNARY = ["exp", "log", "sin", "cos", "tanh", "sqrt", "logistic", "tan", "atan", "sinh", "asinh", "expm1",
                 "log1p", "rsqrt", "abs", "neg"]


def _complex_values(rng, n=4):
    return (rng.uniform(0.3, 1.5, n) + 1j * rng.uniform(-1.0, 1.0, n)).astype(np.complex64)


@pytest.mark.parametrize("name", COMPLEX_UNARY)
def test_complex_unary_vjp_matches_jax(name):
    """Complex cotangents follow JAX's convention (the pullback of a holomorphic f is ct * f'(z))."""
    rng = np.random.default_rng(0)
    (g,) = check_case(("E", name, "c64"), unary(name), (_complex_values(rng),), rng, rtol=1e-4, atol=1e-5,
                      with_grad=False)
    assert np.asarray(g).dtype == np.complex64


def test_holomorphic_grad_matches_jax():
    z = _complex_values(np.random.default_rng(2), 3)

    def make(np_, lx):
        return lambda v: np_.sum(lx.sin(v) * lx.exp(v) + v * v)

    got = ftrans.grad(make(*FT), holomorphic=True)(z)
    want = jax.jit(jax.grad(make(*JX), holomorphic=True))(z)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_real_valued_function_of_complex_input_grad_matches_jax():
    """grad of a real function of z is the conjugate of JAX's convention: both give the same value."""
    z = _complex_values(np.random.default_rng(3), 3)

    def make(np_, lx):
        return lambda v: np_.sum(lx.abs(v) ** 2 + lx.real(v * v) - lx.imag(v))

    assert_close(ftrans.grad(make(*FT))(z), jax.jit(jax.grad(make(*JX)))(z), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, ftrans.dtypes.bfloat16])
@pytest.mark.parametrize("name", ["sin", "exp", "tanh", "digamma", "lgamma"])
def test_unary_low_precision(name, dtype):
    """Cotangents keep the primal's dtype in float16 and bfloat16."""
    x = np.array([0.5, 1.25, 2.0]).astype(dtype)
    ct = np.array([1.0, -0.5, 2.0]).astype(dtype)
    out, pb = ftrans.vjp(getattr(lax, name), x)
    (g,) = pb(ct)
    assert np.asarray(out).dtype == np.dtype(dtype) and np.asarray(g).dtype == np.dtype(dtype)
    (w,) = _jax_pullback(getattr(jax.lax, name), x, ct)
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=3e-2, atol=1e-2)


def test_weak_scalar_vjp_like_jax():
    g = ftrans.vjp(lax.sin, 1.0)[1](1.0)[0]
    w = jax.vjp(jax.lax.sin, 1.0)[1](1.0)[0]
    assert g.weak_type == w.aval.weak_type is True
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_weak_scalar_grad_like_jax():
    g = ftrans.grad(lax.sin)(1.0)
    w = jax.grad(jax.lax.sin)(1.0)
    assert g.weak_type == w.aval.weak_type
    assert np.asarray(g).dtype == np.asarray(w).dtype
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


@pytest.mark.parametrize("name", ZERO_DERIV + ["stop_gradient"])
def test_piecewise_constant_pull_back_zeros(name):
    x = np.array([-1.5, 0.2, 2.5], np.float32)
    rng = np.random.default_rng(0)
    (g,) = check_case(("E", name), unary(name), (x,), rng, rtol=0, atol=0)
    assert np.asarray(g).dtype == np.float32 and not np.asarray(g).any()


def test_digamma_at_poles_like_jax():
    x = np.array([-0.5, -1.5, 0.3, 2.0, 25.0, -2.0, 0.0], np.float32)
    ct = np.ones_like(x)
    (g,) = ftrans.vjp(lax.digamma, x)[1](ct)
    (w,) = _jax_pullback(jax.lax.digamma, x, ct)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4)
    assert np.isinf(np.asarray(g)[-2:]).all()


# ----------------------------------------------------------------------------
# Binary primitives

BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (2, 3)), ((3,), ()), ((), (2, 2))]


@functools.cache
def binary(name):
    def build(np_, lx):
        return getattr(lx, name)

    return build


def _binary_values(rng, name, shapes, dtype=np.float32):
    dx, dy = BINARY[name]
    return draw_values(rng, dx, shapes[0], dtype), draw_values(rng, dy, shapes[1], dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(seed=st.integers(0, 2**31 - 1), shapes=st.sampled_from(BINARY_SHAPES), zero=st.sampled_from([None, 0, 1]))
def test_binary_vjp_matches_jax(name, seed, shapes, zero):
    """Both operands, or only one (the other closed over: its tangent is a symbolic zero); rank-0 operands
    broadcast against shaped ones get the sum of the cotangent."""
    rng = np.random.default_rng(seed)
    x, y = _binary_values(rng, name, shapes)
    key = ("E", name, shapes)
    if zero is None:
        got = check_case(key, binary(name), (x, y), rng, rtol=1e-4, atol=1e-5)
        assert [np.shape(g) for g in got] == [np.shape(x), np.shape(y)]
        return
    f = getattr(lax, name)
    closed = (lambda b: f(x, b)) if zero == 0 else (lambda a: f(a, y))
    out, pb = ftrans.vjp(closed, y if zero == 0 else x)
    ct = random_like(rng, np.shape(out), np.float32)
    (g,) = pb(ct)
    weights = make_weights(rng, [(np.shape(out), np.dtype(np.float32))])
    want_out, want, _ = _jax_oracle(key, binary(name), False)((x, y), [ct], weights)
    assert_close(out, want_out[0], rtol=1e-5, atol=1e-6)
    assert_close(g, want[1 - zero], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(seed=st.integers(0, 2**31 - 1), shapes=st.sampled_from(BINARY_SHAPES))
def test_binary_grad_matches_jax(name, seed, shapes):
    rng = np.random.default_rng(seed)
    check_grad(("E", name, shapes), binary(name), _binary_values(rng, name, shapes), rng, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((3,), ())], ids=["same", "scalar"])
def test_binary_pullback_staged_and_jit(name, shapes):
    rng = np.random.default_rng(0)
    check_case(("E", name, shapes), binary(name), _binary_values(rng, name, shapes), rng, rtol=1e-4, atol=1e-5,
               staged=True)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float64_matches_jax(name):
    rng = np.random.default_rng(1)
    shapes = ((2, 3), (2, 3))
    check_case_x64(("E", name, shapes), binary(name), _binary_values(rng, name, shapes), rng, rtol=1e-4,
                   atol=1e-5)


@pytest.mark.parametrize("name", sorted(set(BINARY) - NONSMOOTH))
@given(seed=st.integers(0, 2**31 - 1))
def test_binary_float64_finite_differences(name, seed):
    check_fd_x64(binary(name), None, np.random.default_rng(seed),
                 draw_prims=lambda r, d: _binary_values(r, name, ((4,), (4,)), d), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f_name", ["max", "min"])
def test_max_min_ties_split_evenly_like_jax(f_name):
    x = np.array([1.0, 2.0, 3.0, np.nan], np.float32)
    y = np.array([1.0, 3.0, 3.0, 0.0], np.float32)
    ct = np.array([2.0, 1.0, 4.0, 1.0], np.float32)
    got = ftrans.vjp(getattr(lax, f_name), x, y)[1](ct)
    want = _jax_pullback(getattr(jax.lax, f_name), x, y, ct)
    assert_leaves_close(got, want)
    assert np.asarray(got[0])[0] == 1.0 and np.asarray(got[1])[0] == 1.0


def test_pow_with_integer_exponent_and_zero_base():
    x = np.array([0.0, 2.0, -1.5, 0.0], np.float32)
    y = np.array([0, 3, 2, 1], np.int32)
    ct = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    (gx, gy) = ftrans.vjp(lax.pow, x, y)[1](ct)
    (wx, wy) = jax.vjp(jax.lax.pow, x, y)[1](ct)  # eager: an integer exponent's float0 cotangent
    assert_close(gx, wx)
    assert np.asarray(gy).dtype == F0 == np.asarray(wy).dtype and np.shape(gy) == (4,)
    xf = np.array([0.0, 0.0, 2.0], np.float32)
    yf = np.array([2.0, 0.5, -1.0], np.float32)
    assert_leaves_close(ftrans.vjp(lax.pow, xf, yf)[1](ct[:3]), _jax_pullback(jax.lax.pow, xf, yf, ct[:3]))


@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 3, 5])
def test_integer_pow(n):
    x = np.array([0.5, -1.5, 2.0], np.float32)
    ct = np.array([1.0, 2.0, -1.0], np.float32)
    (g,) = ftrans.vjp(lambda a: lax.integer_pow(a, n), x)[1](ct)
    (w,) = _jax_pullback(lambda a: jax.lax.integer_pow(a, n), x, ct)
    assert_close(g, w)


def test_nextafter_pulls_back_through_x_only():
    """Consistent with its JVP (identity in x, nothing in y); jax defines no derivative to compare with."""
    x = np.array([1.0, -2.0], np.float32)
    y = np.array([2.0, -3.0], np.float32)
    gx, gy = ftrans.vjp(lax.nextafter, x, y)[1](np.array([3.0, 5.0], np.float32))
    np.testing.assert_array_equal(np.asarray(gx), [3.0, 5.0])
    np.testing.assert_array_equal(np.asarray(gy), [0.0, 0.0])


# ----------------------------------------------------------------------------
# Complex parts: real, imag, conj, complex, abs


@pytest.mark.parametrize("name", ["real", "imag", "conj", "abs"])
def test_complex_parts_vjp_matches_jax(name):
    rng = np.random.default_rng(1)
    z = _complex_values(rng, 3)
    (g,) = check_case(("E", name, "parts"), unary(name), (z,), rng, rtol=1e-5, atol=1e-6, with_grad=False,
                      staged=True)
    assert np.asarray(g).dtype == np.complex64


def test_complex_constructor_and_real_conj_vjp_match_jax():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=3).astype(np.float32), rng.normal(size=3).astype(np.float32)
    got = check_case(("E", "complex"), binary("complex"), (x, y), rng, rtol=1e-6, atol=1e-6, with_grad=False,
                     staged=True)
    assert all(np.asarray(g).dtype == np.float32 for g in got)
    # complex with one operand closed over, and conj of a real operand (a complex output).
    ct = _complex_values(rng, 3)
    assert_close(ftrans.vjp(lambda a: lax.complex(a, y), x)[1](ct)[0],
                 _jax_pullback(lambda a: jax.lax.complex(a, y), x, ct)[0])
    assert_close(ftrans.vjp(lambda b: lax.complex(x, b), y)[1](ct)[0],
                 _jax_pullback(lambda b: jax.lax.complex(x, b), y, ct)[0])
    (g,) = check_case(("E", "conj_real"), unary("conj"), (x,), rng, rtol=1e-6, atol=1e-6, with_grad=False)
    assert np.asarray(g).dtype == np.float32


def test_abs_at_zero_like_jax():
    x = np.array([0.0, -0.0, 1.0, -2.0], np.float32)
    ct = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert_close(ftrans.vjp(lax.abs, x)[1](ct)[0], _jax_pullback(jax.lax.abs, x, ct)[0])
    z = np.array([0j, 3 + 4j], np.complex64)
    assert_close(ftrans.vjp(lax.abs, z)[1](ct[:2])[0], _jax_pullback(jax.lax.abs, z, ct[:2])[0])


# ----------------------------------------------------------------------------
# Non-differentiable primitives: zero cotangents, never a crash


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_pull_back_zeros_like_jax(name):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([2.0, 2.0, 2.0], np.float32)
    out, pb = ftrans.vjp(getattr(lax, name), x, y)
    jout, jpb = jax.vjp(getattr(jax.lax, name), x, y)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jout))
    ct = np.zeros(3, F0)
    got, want = pb(ct), jpb(ct)
    assert_leaves_close(got, want)
    assert all(np.asarray(g).dtype == np.float32 and not np.asarray(g).any() for g in got)


def test_comparison_inside_a_program_passes_nothing_back():
    x = np.array([0.5, -1.0, 2.0], np.float32)

    def make(np_, lx):
        return lambda v: np_.where(v > 0, v * 3.0, lx.sin(v)) + (v >= 1).astype(np_.float32)

    rng = np.random.default_rng(0)
    check_case(("E", "where_cmp"), make, (x,), rng, rtol=1e-6, atol=1e-6, staged=True)


def test_is_finite_pulls_back_zeros():
    x = np.array([1.0, np.inf], np.float32)
    (g,) = ftrans.vjp(lax.is_finite, x)[1](np.zeros(2, F0))
    (w,) = jax.vjp(jax.lax.is_finite, x)[1](np.zeros(2, F0))
    assert_close(g, w)
    assert not np.asarray(g).any()


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
                                  "shift_right_logical", "shift_right_arithmetic"])
def test_integer_bit_ops_pull_back_float0(name):
    x = np.array([1, 6, 7], np.int32)
    y = np.array([1, 2, 3], np.int32)
    out, pb = ftrans.vjp(getattr(lax, name), x, y)
    jout, jpb = jax.vjp(getattr(jax.lax, name), x, y)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jout))
    got = pb(np.zeros(3, F0))
    assert all(np.asarray(g).dtype == F0 and np.shape(g) == (3,) for g in got)
    assert len(got) == len(jpb(np.zeros(3, F0)))


# ----------------------------------------------------------------------------
# The linear elementwise primitives: linear_transpose against jax


C = np.complex64(1.5 - 0.5j)
LINEAR = {
    "add_sub_neg_scalar": ([((3,), np.float32), ((), np.float32)], lambda np_, lx: lambda x, s: lx.neg(
        lx.sub(lx.add(x, s), lx.mul(s, np.float32(2.0))))),
    "mul_div_const": ([((2, 3), np.float32)], lambda np_, lx: lambda x: lx.div(lx.mul(x, np.float32(3.0)),
                                                                                 np.float32(-4.0))),
    "copy_convert": ([((4,), np.float32)], lambda np_, lx: lambda x: (lx.convert_element_type(x, np_.float16),
                                                                       x * 1.0)),
    "real_imag": ([((3,), np.complex64)], lambda np_, lx: lambda z: (lx.real(z), lx.imag(z) * 2.0)),
    "complex_ctor": ([((3,), np.float32), ((3,), np.float32)], lambda np_, lx: lambda a, b: lx.complex(a, -b)),
    "conj_mul": ([((3,), np.complex64)], lambda np_, lx: lambda z: lx.conj(z) * C + z),
    "to_complex": ([((3,), np.float32)], lambda np_, lx: lambda x: lx.convert_element_type(x, np_.complex64) * C),
    "conj_of_real": ([((3,), np.float32)], lambda np_, lx: lambda x: lx.conj(x)),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_linear_transpose_matches_jax(name):
    specs, build = LINEAR[name]
    rng = np.random.default_rng(5)
    prims = tuple(random_like(rng, s, d) for s, d in specs)
    f, g = build(*FT), build(*JX)
    out = jax.eval_shape(g, *prims)
    cts = jax.tree_util.tree_map(lambda o: random_like(rng, o.shape, o.dtype), out)
    got = ftrans.linear_transpose(f, *prims)(cts)
    want = jax.jit(lambda p, c: jax.linear_transpose(g, *p)(c))(prims, cts)
    assert_leaves_close(got, want, rtol=2e-3 if name == "copy_convert" else 1e-6, atol=1e-5)


def test_linear_transpose_of_a_product_of_inputs_is_refused():
    x = np.ones(3, np.float32)
    with pytest.raises(NotImplementedError, match="not linear"):
        ftrans.linear_transpose(lambda a, b: lax.mul(a, b), x, x)(x)
    with pytest.raises(NotImplementedError, match="not linear"):
        ftrans.linear_transpose(lambda a: lax.div(x, a), x)(x)


# ----------------------------------------------------------------------------
# Through jit: the backward of a jitted function is one jit_call


def test_vjp_of_jit_matches_jax_and_transposes_as_one_call():
    def make(np_, lx):
        return lambda a, b: lx.atan2(lx.sin(a) * b, lx.exp(b)) + lx.pow(a, b)

    x = np.array([0.5, 1.5], np.float32)
    y = np.array([1.2, -0.7], np.float32)
    ct = np.array([1.0, -2.0], np.float32)
    g = ftrans.jit(make(*FT))
    got = ftrans.vjp(g, x, y)[1](ct)
    want = _jax_pullback(make(*JX), x, y, ct)
    assert_leaves_close(got, want, rtol=1e-5, atol=1e-6)
    _, pb = ftrans.vjp(g, x, y)
    closed = ftrans.make_jaxpr(pb)(ct)
    calls = [e for e in closed.jaxpr.eqns if e.primitive.name == "jit_call"]
    jcalls = [e for e in jax.make_jaxpr(jax.vjp(jax.jit(make(*JX)), x, y)[1])(ct).jaxpr.eqns if e.primitive.name == "jit"]
    # one call, named as the function (JAX keeps the name; the transform shows in the name stack)
    assert len(calls) == len(jcalls) == 1 and calls[0].params["name"] == jcalls[0].params["name"] == "<lambda>"
    assert_leaves_close(ftrans.jit(lambda a, b, c: ftrans.vjp(g, a, b)[1](c))(x, y, ct), want, rtol=1e-5,
                        atol=1e-6)


def test_fjnp_functions_grad_matches_jax():
    """The jnp layer is built from primitives, so its functions differentiate in reverse too."""
    x = np.array([0.2, 0.7, 1.9], np.float32)
    names = ("log2", "deg2rad", "reciprocal", "arctan2", "power", "float_power", "maximum", "true_divide", "fmod",
             "hypot", "logaddexp", "logaddexp2")

    def operands(fname, x):
        return (x,) if fname in ("log2", "deg2rad", "reciprocal") else (x, x[::-1] + 0.25)  # no ties

    def jax_grads(x):  # every jax gradient from one compiled program
        return [jax.grad(lambda *a, jf=getattr(jjnp, fname): jjnp.sum(jf(*a)),
                         argnums=tuple(range(len(operands(fname, x)))))(*operands(fname, x)) for fname in names]

    for fname, want in zip(names, jax.jit(jax_grads)(x)):
        ff = getattr(fjnp, fname)
        args = operands(fname, x)
        got = ftrans.grad(lambda *a, ff=ff: fjnp.sum(ff(*a)), argnums=tuple(range(len(args))))(*args)
        assert_leaves_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fname", ["logaddexp", "logaddexp2"])
def test_logaddexp_gradient_at_equal_arguments_like_jax(fname):
    x = np.array([0.7, -1.0], np.float32)
    got = ftrans.grad(lambda a, b: fjnp.sum(getattr(fjnp, fname)(a, b)), argnums=(0, 1))(x, x)
    want = jax.jit(jax.grad(lambda a, b: jjnp.sum(getattr(jjnp, fname)(a, b)), argnums=(0, 1)))(x, x)
    assert_leaves_close(got, want, rtol=1e-5, atol=1e-6)
