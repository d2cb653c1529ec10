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
    with pytest.raises(NotImplementedError, match="computation"):
        lax.reduce_window(x, 0.0, lambda a, b: a * b, (2, 2), (1, 1), "VALID")
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


def test_reduce_window_rejects_non_monoid_computations():
    x = np.ones((3, 3), np.float32)
    for comp in (lambda a, b: a + b + 1, lambda a, b: a, lambda a, b: a - b):
        with pytest.raises(NotImplementedError, match="computation"):
            lax.reduce_window(x, 0.0, comp, (2, 2), (1, 1), "VALID")
