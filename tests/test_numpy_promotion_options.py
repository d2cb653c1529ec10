"""JAX's ``numpy_rank_promotion`` and ``numpy_dtype_promotion`` options, and the JAX options ftrans accepts
without acting on them: each compared with jax under the same setting."""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

DTYPES = ["bool", "int8", "int32", "uint8", "float16", "bfloat16", "float32", "complex64"]
SCALARS = [True, 2, 2.5, 1j]


def _outcome(fn):
    try:
        out = fn()
    except (TypeError, ValueError) as e:  # JAX's TypePromotionError is a ValueError
        return ("error", type(e).__mro__[1] if type(e).__name__ == "TypePromotionError" else ValueError)
    return ("ok", np.dtype(out.dtype), bool(getattr(out, "weak_type", False)))


def _both(option, value):
    """Set ``option`` in both libraries for a ``with`` block."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        f_before, j_before = ftrans.config.read(option), getattr(jax.config, "jax_" + option)
        ftrans.config.update("jax_" + option, value)
        jax.config.update("jax_" + option, value)
        try:
            yield
        finally:
            ftrans.config.update("jax_" + option, f_before)
            jax.config.update("jax_" + option, j_before)

    return ctx()


@pytest.mark.parametrize("da,db", list(itertools.product(DTYPES, DTYPES)))
def test_strict_dtype_promotion_matches_jax(da, db):
    a, b = np.ones(3, da), np.ones(3, db)
    with _both("numpy_dtype_promotion", "strict"):
        got = _outcome(lambda: fjnp.add(fjnp.asarray(a), fjnp.asarray(b)))
        want = _outcome(lambda: jjnp.add(jjnp.asarray(a), jjnp.asarray(b)))
        assert got[0] == want[0], (da, db, got, want)
        if got[0] == "ok":
            assert got == want
        assert _outcome(lambda: fjnp.asarray(a) * fjnp.asarray(b))[0] == want[0]  # the operator's fast path too
        assert _outcome(lambda: ftrans.jit(lambda x, y: x + y)(a, b))[0] == want[0]
    # standard promotion again afterwards
    assert _outcome(lambda: fjnp.add(fjnp.asarray(a), fjnp.asarray(b)))[0] == "ok" or "bfloat16" in (da, db)


@pytest.mark.parametrize("d", DTYPES)
@pytest.mark.parametrize("s", SCALARS, ids=repr)
def test_strict_dtype_promotion_with_python_scalars_matches_jax(d, s):
    a = np.ones(3, d)
    with _both("numpy_dtype_promotion", "strict"):
        got = _outcome(lambda: fjnp.asarray(a) + s)
        want = _outcome(lambda: jjnp.asarray(a) + s)
        assert got[0] == want[0], (d, s, got, want)
        if got[0] == "ok":
            assert got[1] == want[1]


def test_rank_promotion_raise_warn_allow_match_jax():
    x, y = np.ones(3, np.float32), np.ones((2, 3), np.float32)
    cases = [lambda m, a, b: m.add(a, b), lambda m, a, b: a * b, lambda m, a, b: m.arctan2(a, b),
             lambda m, a, b: m.maximum(a, b), lambda m, a, b: m.clip(b, a, 2.0)]
    for case in cases:
        with _both("numpy_rank_promotion", "raise"):
            with pytest.raises(ValueError):
                case(jjnp, jjnp.asarray(x), jjnp.asarray(y))
            with pytest.raises(ValueError, match="numpy_rank_promotion"):
                case(fjnp, fjnp.asarray(x), fjnp.asarray(y))
            with pytest.raises(ValueError, match="numpy_rank_promotion"):
                ftrans.jit(lambda a, b, c=case: c(fjnp, a, b))(x, y)
            # a rank-0 operand and equal ranks are not rank promotion
            assert case(fjnp, fjnp.asarray(x), fjnp.asarray(2.0)).shape == (3,)
            assert case(fjnp, fjnp.asarray(y), fjnp.asarray(np.ones((1, 3), np.float32))).shape == (2, 3)
        with _both("numpy_rank_promotion", "warn"):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                out = case(fjnp, fjnp.asarray(x), fjnp.asarray(y))
            assert out.shape == (2, 3) and any("rank promotion" in str(m.message) for m in w)
            assert all(m.filename == __file__ for m in w if "rank promotion" in str(m.message))
        assert case(fjnp, fjnp.asarray(x), fjnp.asarray(y)).shape == (2, 3)
    with _both("numpy_rank_promotion", "raise"):  # JAX's where and matmul broadcast without the check
        assert jjnp.where(jjnp.asarray(x) > 0, x, y).shape == fjnp.where(fjnp.asarray(x) > 0, x, y).shape
        assert (fjnp.asarray(x) @ fjnp.asarray(y).T).shape == (2,)


def test_rank_promotion_context_manager_and_jit_retrace():
    f = ftrans.jit(lambda a, b: a + b)
    x, y = np.ones(3, np.float32), np.ones((2, 3), np.float32)
    assert f(x, y).shape == (2, 3)  # traced under "allow"
    with ftrans.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="numpy_rank_promotion"):
            f(x, y)  # traced again: the option is read while tracing
    assert f(x, y).shape == (2, 3)
    with ftrans.numpy_dtype_promotion("strict"):
        with pytest.raises(ValueError, match="strict"):
            fjnp.ones(2, fjnp.int32) + fjnp.ones(2, fjnp.float32)
        with pytest.raises(ValueError, match="strict"):
            fjnp.promote_types(np.int32, np.float32)


def test_bad_option_values_are_errors():
    with pytest.raises(ValueError, match="allow"):
        ftrans.config.update("jax_numpy_rank_promotion", "sometimes")
    with pytest.raises(ValueError, match="standard"):
        ftrans.config.update("jax_numpy_dtype_promotion", "loose")
    assert ftrans.config.numpy_rank_promotion == "allow" and ftrans.config.numpy_dtype_promotion == "standard"


def test_jax_options_ftrans_accepts():
    """A JAX script's top lines set these; ftrans takes each at the values where it behaves as JAX does."""
    for name, value in [("jax_traceback_filtering", "off"), ("jax_softmax_custom_jvp", True),
                        ("jax_persistent_cache_min_compile_time_secs", 0), ("jax_threefry_partitionable", True),
                        ("jax_transfer_guard", "allow"), ("jax_platforms", "cpu")]:
        before = ftrans.config.read(name)
        ftrans.config.update(name, value)
        try:
            assert ftrans.config.read(name) == value == getattr(ftrans.config, name)
        finally:
            if name != "jax_platforms":
                ftrans.config.update(name, before)
    for name, value in [("jax_thread_guard", True)]:
        with pytest.raises(ValueError, match="not supported by ftrans"):
            ftrans.config.update(name, value)
    # an option neither library has: JAX raises AttributeError, ftrans an error that is one (and a ValueError)
    with pytest.raises(AttributeError):
        jax.config.update("jax_no_such_option", 1)
    with pytest.raises(AttributeError, match="no_such_option"):
        ftrans.config.update("jax_no_such_option", 1)


def test_default_prng_impl_change_retraces_a_jitted_function():
    split = ftrans.jit(lambda k: ftrans.random.split(k))
    raw = np.arange(4, dtype=np.uint32)
    with ftrans.default_prng_impl("rbg"):
        a = np.asarray(split(raw))
    with ftrans.default_prng_impl("unsafe_rbg"):
        b = np.asarray(split(raw))
        want = jax.random.key_data(jax.random.split(jax.random.wrap_key_data(raw, impl="unsafe_rbg")))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(b, np.asarray(want))
