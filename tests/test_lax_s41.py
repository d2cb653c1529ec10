"""Conformance gaps found by JAX's lax/lax_numpy/fft/random test files run with JAX's configuration (strict
dtype promotion, rank promotion "raise", ...) reaching ftrans, each checked against jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

# ---------------------------------------------------------------- fft


def test_fft_norm_large_integer_shape_does_not_overflow():
    # JAX's gh-18453: the norm of a transform over 3 * 900**3 points computed in int32 overflowed
    from ftrans.numpy.fft import _norm_factor
    n = 3 * 900 ** 3
    assert _norm_factor("fft", "ortho", [3, 900, 900, 900]) == pytest.approx(1 / np.sqrt(n), rel=1e-15)
    assert _norm_factor("ifft", "forward", [3, 900, 900, 900]) == n


# ---------------------------------------------------------------- valid calls under JAX's test configuration
# (numpy_dtype_promotion="strict", numpy_rank_promotion="raise": what JAX's own test case runs under)


def _strict(lib):
    import contextlib

    stack = contextlib.ExitStack()
    stack.enter_context(lib.numpy_dtype_promotion("strict"))
    stack.enter_context(lib.numpy_rank_promotion("raise"))
    return stack


@pytest.mark.parametrize("call", [
    lambda np_: np_.packbits(np.arange(24).reshape(3, 8) % 3, axis=1),
    lambda np_: np_.packbits(np.ones((2, 3, 4, 1, 8), np.uint8), axis=-1, bitorder="little"),
    lambda np_: np_.packbits(np.arange(10) % 2),
    lambda np_: np_.unpackbits(np.arange(24, dtype=np.uint8).reshape(2, 3, 4), axis=1),
    lambda np_: np_.unpackbits(np.arange(6, dtype=np.uint8).reshape(2, 3), axis=0, count=5),
    lambda np_: np_.unpackbits(np.arange(6, dtype=np.uint8)),
    lambda np_: np_.mgrid[-1:1:5j, :3],
    lambda np_: np_.mgrid[:3:2, 0:1:4j, :2],
    lambda np_: np_.ogrid[-1:1:5j, :3][1],
    lambda np_: np_.convolve(np.arange(5, dtype=np.uint16), np.arange(3, dtype=np.uint16)),
    lambda np_: np_.correlate(np.arange(5, dtype=np.int32), np.arange(3, dtype=np.int32), mode="full"),
    lambda np_: np_.convolve(np.arange(5) % 2 == 0, np.arange(3) < 2, mode="same"),
])
def test_valid_calls_under_strict_promotion_and_rank_raise(call):
    with _strict(ftrans):
        got = call(fnp)
    with _strict(jax):
        want = call(jnp)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_key_equality_broadcasts_scalar_key_under_rank_raise():
    for lib in (ftrans, jax):
        with lib.numpy_rank_promotion("raise"):
            key = lib.random.key(123)
            keys = lib.random.split(key, 5).at[2:4].set(key)
            np.testing.assert_array_equal(np.asarray(key == keys), [False, False, True, True, False])
            np.testing.assert_array_equal(np.asarray(key != keys), [True, True, False, False, True])
    with ftrans.numpy_rank_promotion("raise"):  # non-scalar keys of different ranks: refused, as in JAX
        keys = ftrans.random.split(ftrans.random.key(0), 3)
        with pytest.raises(ValueError, match="numpy_rank_promotion"):
            keys[None] == keys  # noqa: B015
    with ftrans.numpy_rank_promotion("allow"):
        keys = ftrans.random.split(ftrans.random.key(0), 3)
        assert (keys[None] == keys).shape == (1, 3)


@pytest.mark.parametrize("wrap", [False, True])
def test_take_along_axis_promise_in_bounds_index_dtype_like_jax(wrap):
    # JAX's testTakeAlongAxisPromiseInBounds*: without wrapping the int8 indices reach the gather as int8,
    # with it they are widened first (JAX's jaxpr nests the gather in a jit equation; ftrans's is flat)
    def gather_index_dtype(lib, jaxpr):
        eqns = list(jaxpr.eqns)
        while eqns:
            e = eqns.pop()
            if e.primitive.name == "gather":
                return e.invars[1].aval.dtype
            eqns += [x for p in e.params.values() for x in getattr(getattr(p, "jaxpr", None), "eqns", [])]

    got = {}
    for lib in (ftrans, jax):
        arr = lib.numpy.arange(200, dtype=np.float32)
        f = lambda i: lib.numpy.take_along_axis(arr, i, axis=0, mode="promise_in_bounds",  # noqa: E731,B023
                                                wrap_negative_indices=wrap)
        got[lib] = gather_index_dtype(lib, lib.make_jaxpr(f)(np.array([1, 2, 3], np.int8)).jaxpr)
    assert got[ftrans] == got[jax] == (np.int32 if wrap else np.int8)
