"""The eager operator and jit hot paths after issue 20's trimming (items 5 and 6): what they keep.

* ``Array``'s operators test an operand's type against ``array._eager_array``, which ``trace`` keeps equal to
  ``Array`` while ``eager_everywhere`` holds and None otherwise: under a transform, a debug check or in
  another thread's trace the operators take the general path.
* The scalar case (``x * 2.0``, ``2.0 * x``) is computed inline: same values, dtype and weak type as jax.
* Results are made by calling the concrete class (``Array()``, C): the public ``ftrans.Array`` /
  ``jnp.ndarray`` still cannot be called, and the concrete class takes no arguments.
"""

from __future__ import annotations

import threading
import warnings

import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core import array as array_mod
from ftrans.core import trace as trace_mod
from ftrans.core.array import Array


def _same(got, want):
    got_np, want_np = np.asarray(got), np.asarray(want)
    assert got_np.dtype == want_np.dtype, (got_np.dtype, want_np.dtype)
    assert got_np.shape == want_np.shape
    np.testing.assert_array_equal(got_np, want_np)
    assert got.weak_type == want.weak_type


def test_eager_array_mirrors_eager_everywhere():
    assert trace_mod.eager_everywhere
    assert array_mod._eager_array is Array
    seen = []

    def f(x):
        seen.append((trace_mod.eager_everywhere, array_mod._eager_array))
        return x + x

    ftrans.make_jaxpr(f)(jnp.ones(3))
    assert seen == [(False, None)]
    assert array_mod._eager_array is Array
    with ftrans.debug_nans(True):
        assert array_mod._eager_array is None
    assert array_mod._eager_array is Array


def test_operator_stages_under_jit_and_other_threads_trace():
    x = jnp.arange(4.0, dtype=jnp.float32)
    jaxpr = ftrans.make_jaxpr(lambda a: (a + x, a * 2.0, 2.0 * a, a < x))(x)
    prims = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert prims.count("add") == 1 and prims.count("mul") == 2 and prims.count("lt") == 1

    # another thread tracing makes every thread's operators take the general path meanwhile (same values)
    started, release = threading.Event(), threading.Event()

    def body(a):
        started.set()
        release.wait(10)
        return a + 1.0

    t = threading.Thread(target=lambda: ftrans.make_jaxpr(body)(x))
    t.start()
    try:
        assert started.wait(10)
        assert array_mod._eager_array is None
        _same(x + x, jjnp.arange(4.0, dtype=jjnp.float32) * 2)
        _same(x * 2.0, jjnp.arange(4.0, dtype=jjnp.float32) * 2.0)
    finally:
        release.set()
        t.join()
    assert array_mod._eager_array is Array


def test_debug_nans_sees_operators():
    x = jnp.array([0.0, 1.0], dtype=jnp.float32)
    with ftrans.debug_nans(True):
        with pytest.raises(FloatingPointError):
            x / x
        with pytest.raises(FloatingPointError):
            (x * np.inf) - (x * np.inf)
        with pytest.raises(FloatingPointError):
            (x - x) * np.inf


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8", "uint8", "bool", "bfloat16", "complex64"])
def test_same_dtype_operators_match_jax(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(6) * 4).astype(dtype) if dtype != "bool" else rng.standard_normal(6) > 0
    b = (rng.standard_normal(6) * 4).astype(dtype) if dtype != "bool" else rng.standard_normal(6) > 0
    fa, fb, ja, jb = jnp.asarray(a), jnp.asarray(b), jjnp.asarray(a), jjnp.asarray(b)
    ops = [lambda p, q: p + q, lambda p, q: p * q, lambda p, q: p == q, lambda p, q: p != q]
    if dtype != "bool":
        ops += [lambda p, q: p - q]
    if dtype != "complex64":
        ops += [lambda p, q: p < q, lambda p, q: p <= q, lambda p, q: p > q, lambda p, q: p >= q]
    for op in ops:
        _same(op(fa, fb), op(ja, jb))


def test_zero_d_operands_give_arrays():
    for f, j in ((jnp.float32(1.5), jjnp.float32(1.5)), (jnp.asarray(2, jnp.int32), jjnp.asarray(2, jjnp.int32))):
        for op in (lambda p, q: p + q, lambda p, q: p * q, lambda p, q: p < q):
            r = op(f, f)
            assert type(r) is Array and type(r._value) is np.ndarray and r.shape == ()
            _same(r, op(j, j))
        r = f * 2.0
        assert type(r._value) is np.ndarray
        _same(r, j * 2.0)


def test_weak_types_through_operators():
    w = jnp.asarray(2.0)  # weak float32 (no x64)
    s = jnp.asarray(np.float32(3.0))
    jw, js = jjnp.asarray(2.0), jjnp.asarray(np.float32(3.0))
    for op in (lambda p, q: p + q, lambda p, q: p * q, lambda p, q: p - q, lambda p, q: p < q):
        _same(op(w, w), op(jw, jw))  # weak with weak: weak (comparisons: bool, never weak)
        _same(op(w, s), op(jw, js))
        _same(op(s, w), op(js, jw))
    h = jnp.ones(3, jnp.float16)
    _same(w + h, jw + jjnp.ones(3, jjnp.float16))  # a weak float joins the other dtype: the general path
    _same(w * 2.0, jw * 2.0)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_scalar_operands_inline_match_jax(dtype):
    a = np.arange(-3, 3).astype(dtype)
    f, j = jnp.asarray(a), jjnp.asarray(a)
    for s in (2.0, 3, -1.5, 2**31 - 1, -(2**31), 2**40):
        for op in (lambda p: p * s, lambda p: s * p, lambda p: p + s, lambda p: s + p, lambda p: p - s,
                   lambda p: s - p, lambda p: p < s, lambda p: p >= s):
            try:
                want = op(j)
            except OverflowError:
                with pytest.raises(OverflowError):
                    op(f)
                continue
            _same(op(f), want)


def test_overflow_warning_as_error_still_computes_quietly():
    big = jnp.asarray(np.float32([3e38, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = big * 10.0
        r2 = 10.0 * big
        r3 = big + big
    want = jjnp.asarray(np.float32([3e38, 1.0]))
    _same(r, want * 10.0)
    _same(r2, 10.0 * want)
    _same(r3, want + want)


def test_public_array_type_cannot_be_called():
    for make in (lambda: ftrans.Array(), lambda: jnp.ndarray((2,)), lambda: ftrans.Array(np.ones(2))):
        with pytest.raises(TypeError, match="cannot be instantiated"):
            make()
    # the concrete class takes no arguments (its empty instance is filled in by ftrans's own makers)
    with pytest.raises(TypeError):
        type(jnp.ones(2))(np.ones(2))
    with pytest.raises(TypeError):
        Array(shape=(2,))


def test_results_are_concrete_arrays_of_host_memory():
    x = jnp.arange(4.0)
    for r in (x + x, x * 2.0, 2.0 * x, x < x, jnp.sin(x), ftrans.lax.add(x, x)):
        assert type(r) is Array
        assert isinstance(r, ftrans.Array)
        assert type(r._value) is np.ndarray
        assert r.__dict__ == {}
    r = x + x
    r.note = 1  # users' attributes, as on jax.Array instances
    assert r.note == 1


def test_device_array_operand_still_fast_and_equal():
    f = ftrans.jit(lambda a: a * 3.0)
    d = f(jnp.arange(4.0))
    x = jnp.arange(4.0)
    j = jjnp.arange(4.0)
    _same(d + x, j * 3.0 + j)
    _same(x + d, j + j * 3.0)
    _same(d * 2.0, j * 3.0 * 2.0)


_ALL_DTYPES = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16",
               "complex64", "int4", "uint4", "int2", "float8_e4m3fn", "float8_e5m2"]


def _noted_dtype_is_values(r):
    """``_dt`` (the operators' dtype test), where noted, is the host value's dtype."""
    assert r._dt == r._value.dtype, (r._dt, r._value.dtype)


@pytest.mark.parametrize("dtype", _ALL_DTYPES)
def test_noted_dtype_matches_value_for_every_maker(dtype):
    import ml_dtypes  # noqa: F401  (the narrow and float8 dtypes)

    a = jnp.asarray(np.arange(3).astype(dtype) if dtype != "bool" else np.array([True, False, True]))
    made = [a, a.copy(), jnp.asarray(np.asarray(a)), ftrans.lax.neg(a) if dtype != "bool" else ~a,
            a == a, a < a, a + a, a * a]
    if dtype != "bool":
        made.append(a - a)
    if np.dtype(dtype).kind in "fc" or dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        made += [jnp.sin(a) if dtype not in ("float8_e4m3fn", "float8_e5m2") else a, a * 2.0, 2.0 * a, a < 1.0]
    for r in made:
        _noted_dtype_is_values(r)
    d = ftrans.jit(lambda v: v)(a)  # a device Array: noted from its value on first use
    assert d._dt == np.asarray(a).dtype
    for r in (d + a, a + d, d == a):
        _noted_dtype_is_values(r)


def test_operator_on_array_without_noted_dtype_still_fast_and_right():
    x = jnp.arange(4.0, dtype=jnp.float32)
    y = Array()  # as a maker that does not note the dtype
    y._value = np.arange(4.0, dtype=np.float32)
    y.weak_type = False
    z = Array()
    z._value = np.arange(4, dtype=np.int32)
    z.weak_type = False
    want = jjnp.arange(4.0, dtype=jjnp.float32)
    _same(x + y, want + want)
    _same(y + x, want + want)
    _same(y * 2.0, want * 2.0)
    _same(2.0 * y, 2.0 * want)
    _same(x + z, want + jjnp.arange(4, dtype=jjnp.int32))  # mixed dtypes: the general path's promotion
    _same(z + x, jjnp.arange(4, dtype=jjnp.int32) + want)


def test_mixed_dtypes_take_general_promotion():
    a32, a16, i32 = jnp.ones(3, jnp.float32), jnp.ones(3, jnp.float16), jnp.ones(3, jnp.int32)
    j32, j16, ji32 = jjnp.ones(3, jjnp.float32), jjnp.ones(3, jjnp.float16), jjnp.ones(3, jjnp.int32)
    for (p, q), (jp, jq) in (((a32, a16), (j32, j16)), ((a16, i32), (j16, ji32)), ((i32, a32), (ji32, j32))):
        for op in (lambda u, v: u + v, lambda u, v: u * v, lambda u, v: u < v):
            r = op(p, q)
            _same(r, op(jp, jq))
            _noted_dtype_is_values(r)


def test_concrete_class_called_without_arguments_differs_from_jax():
    """docs/differences.md ("Arrays"): ``type(x)()`` is an empty instance in ftrans, a TypeError in JAX."""
    import jax.numpy as real_jnp

    with pytest.raises(TypeError):
        type(real_jnp.ones(2))()
    empty = type(jnp.ones(2))()
    assert type(empty) is Array
    with pytest.raises(AttributeError):
        empty._value
    with pytest.raises(TypeError):
        type(jnp.ones(2))(np.ones(2))
