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
