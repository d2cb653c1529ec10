"""reduce_window (pooling) against jax.lax.reduce_window."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
from ftrans import lax
from ftrans.core.ir import typecheck
from ftrans.test_util import check_grads

_COMPUTATIONS = {
    "sum": (lax.add, jax.lax.add, 0.0),
    "max": (lax.max, jax.lax.max, -np.inf),
    "min": (lax.min, jax.lax.min, np.inf),
}


@st.composite
def _window_case(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(nd))
    window = tuple(draw(st.integers(1, max(1, n))) for n in shape)
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    padding = draw(st.one_of(
        st.sampled_from(["VALID", "SAME"]),
        st.tuples(*[st.tuples(st.integers(0, 2), st.integers(0, 2)) for _ in range(nd)]),
    ))
    base = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    wdil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    kind = draw(st.sampled_from(sorted(_COMPUTATIONS)))
    seed = draw(st.integers(0, 2**16))
    return shape, window, strides, padding, base, wdil, kind, seed


@given(_window_case())
def test_reduce_window_matches_jax(case):
    shape, window, strides, padding, base, wdil, kind, seed = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    ours_c, theirs_c, init = _COMPUTATIONS[kind]
    if isinstance(padding, str) and (base != (1,) * len(shape) or wdil != (1,) * len(shape)):
        padding = "VALID"

    def f(a):
        return lax.reduce_window(a, np.float32(init), ours_c, window, strides, padding, base, wdil)

    expected = jax.lax.reduce_window(jnp.asarray(x), np.float32(init), theirs_c, window, strides, padding,
                                     base, wdil)
    got = f(x)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)
    closed = ftrans.make_jaxpr(f)(x)
    typecheck(closed)
    staged = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x)[0]
    np.testing.assert_allclose(np.asarray(staged), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_max_pool_int_and_padding_helpers():
    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    got = lax.reduce_window_max(x, (2, 2), (2, 2), "VALID")
    np.testing.assert_array_equal(np.asarray(got), [[5, 7], [13, 15]])
    assert got.dtype == np.int32
    assert lax.padtype_to_pads((5,), (3,), (2,), "SAME") == jax.lax.padtype_to_pads((5,), (3,), (2,), "SAME")


def test_reduce_window_errors():
    x = np.ones((3, 3), np.float32)
    # A product is not a monoid ftrans has a primitive for: it binds the general reduce_window, as in JAX.
    np.testing.assert_array_equal(lax.reduce_window(x * 2, 1.0, lambda a, b: a * b, (2, 2), (1, 1), "VALID"),
                                  jax.lax.reduce_window(x * 2, 1.0, lambda a, b: a * b, (2, 2), (1, 1), "VALID"))
    with pytest.raises(ValueError, match="window_dimensions"):
        lax.reduce_window_sum(x, (2,), (1, 1), "VALID")
    with pytest.raises(ValueError, match="padding"):
        lax.reduce_window_sum(x, (2, 2), (1, 1), "FULL")


@pytest.mark.parametrize(("ours", "theirs", "init"), [
    (lambda a, b: a + b, jax.lax.add, 0.0),
    (lambda a, b: ftrans.numpy.maximum(b, a), jax.lax.max, -np.inf),
    (ftrans.numpy.add, jax.lax.add, 0.0),
    (ftrans.numpy.minimum, jax.lax.min, np.inf),
])
def test_reduce_window_recognises_equivalent_computations(ours, theirs, init):
    """Any computation that stages one add/max/min of its two arguments is that reduction (as in JAX)."""
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    got = lax.reduce_window(x, np.float32(init), ours, (2, 2), (1, 2), "SAME")
    want = jax.lax.reduce_window(jnp.asarray(x), np.float32(init), theirs, (2, 2), (1, 2), "SAME")
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_reduce_window_non_monoid_computations_use_the_general_primitive():
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    for comp in (lambda a, b: a + b + 1, lambda a, b: a, lambda a, b: a - b):
        f = lambda a: lax.reduce_window(a, 0.0, comp, (2, 2), (1, 1), "VALID")  # noqa: E731
        assert [e.primitive.name for e in ftrans.make_jaxpr(f)(x).jaxpr.eqns] == ["reduce_window"]
        want = jax.lax.reduce_window(x, 0.0, comp, (2, 2), (1, 1), "VALID")
        np.testing.assert_array_equal(f(x), want)
        np.testing.assert_array_equal(ftrans.jit(f)(x), want)


# ---------------------------------------------------------------- general reduce_window (reduce_window_p)
_GENERAL_WINDOWS = [
    ((4, 6), (2, 1), (1, 2), [(0, 3), (1, 2)], (2, 3), (1, 2)),
    ((4, 6), (1, 2), (2, 1), "SAME", (1, 1), (1, 1)),
    ((3, 2, 4, 6), (2, 1, 2, 1), (1, 2, 2, 1), [(0, 1), (1, 0), (2, 3), (0, 2)], (2, 1, 3, 2), (1, 2, 2, 1)),
]


@pytest.mark.parametrize("shape,dims,strides,padding,bd,wd", _GENERAL_WINDOWS)
@pytest.mark.parametrize("op,init", [("mul", 0.0), ("add", 1.0), ("sub", 0.0), ("mul", 1.0)])
def test_reduce_window_general_computation_matches_jax(shape, dims, strides, padding, bd, wd, op, init):
    fop = {"mul": lambda a, b: a * b, "add": ftrans.lax.add, "sub": lambda a, b: a - b}[op]
    jop = {"mul": lambda a, b: a * b, "add": jax.lax.add, "sub": lambda a, b: a - b}[op]
    rng = np.random.RandomState(0)
    x = rng.randn(*shape).astype(np.float32)
    t = rng.randn(*shape).astype(np.float32)
    iv = np.float32(init)
    f = lambda a, i: ftrans.lax.reduce_window(a, i, fop, dims, strides, padding, bd, wd)  # noqa: E731
    jf = lambda a, i: jax.lax.reduce_window(a, i, jop, dims, strides, padding, bd, wd)  # noqa: E731
    want = jf(x, iv)
    np.testing.assert_allclose(f(x, iv), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ftrans.jit(f)(x, iv), want, rtol=1e-5, atol=1e-5)  # init traced
    got_p, got_t = ftrans.jvp(lambda a: f(a, iv), (x,), (t,))
    want_p, want_t = jax.jvp(lambda a: jf(a, iv), (x,), (t,))
    np.testing.assert_allclose(got_p, want_p, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_t, want_t, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ftrans.vmap(lambda a: f(a, iv))(np.stack([x, t])),
                               jax.vmap(lambda a: jf(a, iv))(np.stack([x, t])), rtol=1e-5, atol=1e-5)


def test_reduce_window_general_jvp_higher_order():
    x = np.random.RandomState(1).randn(4, 6).astype(np.float32)
    f = lambda a: ftrans.lax.reduce_window(a, np.float32(1), lambda u, v: u * v, (2, 1), (1, 2),  # noqa: E731
                                           [(0, 3), (1, 2)], (2, 3), (1, 2))
    check_grads(f, (x,), 3, ["fwd"], eps=1.0)


@pytest.mark.parametrize("shape,dims,strides,padding,bd,wd", _GENERAL_WINDOWS)
def test_reduce_window_variadic_matches_jax(shape, dims, strides, padding, bd, wd):
    rng = np.random.RandomState(2)
    x, y = rng.randn(*shape).astype(np.float32), rng.randn(*shape).astype(np.float32)
    inits = (np.float32(0), np.float32(-np.inf))

    def red(mod):
        return lambda a, b: (a[0] + b[0], mod.max(a[1], b[1]))

    f = lambda a, b: ftrans.lax.reduce_window((a, b), inits, red(ftrans.lax), dims, strides, padding, bd, wd)  # noqa: E731
    want = jax.lax.reduce_window((x, y), inits, red(jax.lax), dims, strides, padding, bd, wd)
    for got in (f(x, y), ftrans.jit(f)(x, y)):
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5)
    jaxpr = ftrans.make_jaxpr(f)(x, y)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["reduce_window"]


def test_reduce_window_structure_errors():
    x = np.ones((1,), np.float32)
    for mod in (jax.lax, ftrans.lax):
        with pytest.raises(ValueError, match="same tree structure"):
            mod.reduce_window(x, 0.0, lambda a, b: [a + b], (1,), (1,), "VALID")
        with pytest.raises(ValueError):
            mod.reduce_window((x, x), (0.0,), lambda a, b: a, (1,), (1,), "VALID")
    with pytest.raises(ValueError, match="non-scalar initial value"):
        ftrans.lax.reduce({"x": np.ones(5)}, {"x": np.ones(5)}, lambda a, b: {"x": a["x"] + b["x"]}, [0])
