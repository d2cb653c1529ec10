"""Differential tests of ftrans.numpy's array-creation functions against jax.numpy.

Every function is run eagerly and staged (make_jaxpr, typecheck, eval_jaxpr)
and compared with jax: values, shapes, dtypes and weak types exactly.  Staged
creation with static arguments must not capture large constants.
"""

import array as pyarray

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fnp
from ftrans.core.ir import typecheck
from ftrans.errors import ConcretizationTypeError
from tests.hypothesis_budget import examples

DTYPE_ARGS = [None, int, float, bool, "float32", "int8", np.uint8, np.float16, "bfloat16", np.int32]


# ---------------------------------------------------------------- helpers
def _flat(x):
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _flat(e)]
    return [x]


def _as_jax(e):
    return e if isinstance(e, jax.Array) else jnp.asarray(e)


def _assert_leaf(got, exp, what, rtol, int_tol=0, values=True):
    exp = _as_jax(exp)
    assert isinstance(got, ftrans.Array), f"{what}: expected an ftrans.Array, got {type(got)}"
    assert got.shape == exp.shape, f"{what}: shape {got.shape} != {exp.shape}"
    assert got.dtype == exp.dtype, f"{what}: dtype {got.dtype} != {exp.dtype}"
    assert got.weak_type == exp.weak_type, f"{what}: weak_type {got.weak_type} != {exp.weak_type}"
    if not values:
        return
    g, e = np.asarray(got), np.asarray(exp)
    if e.dtype.kind in "fc" or e.dtype == jnp.bfloat16:
        np.testing.assert_allclose(g.astype(np.complex128), e.astype(np.complex128), rtol=rtol, atol=rtol,
                                   equal_nan=True, err_msg=what)
    elif int_tol:
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=0, atol=int_tol, err_msg=what)
    else:
        np.testing.assert_array_equal(g, e, err_msg=what)


def oracle(fn, *args):
    """jax's result, from one jitted program (one XLA compile instead of one per operation)."""
    try:
        return jax.jit(lambda *a: fn(jnp, *a))(*args)
    except (jax.errors.ConcretizationTypeError, TypeError, ValueError):
        return fn(jnp, *args)  # needs concrete values (or fails): run it eagerly


def check(fn, *args, staged=True, rtol=1e-6, int_tol=0, values=True):
    """``fn(module, *args)`` under ftrans (eager and staged) must match it under jax.numpy.

    Where jax raises, ftrans must raise the same kind of exception. ``values=False``: only the types
    (``empty``: jax 0.11's is uninitialised memory, not zeros, on a GPU).
    """
    try:
        exp_l = _flat(oracle(fn, *args))
    except (TypeError, ValueError, OverflowError) as e:
        kind = next(k for k in (OverflowError, TypeError, ValueError) if isinstance(e, k))
        with pytest.raises(kind):
            fn(fnp, *args)
        return None
    got = fn(fnp, *args)
    got_l = _flat(got)
    assert len(got_l) == len(exp_l)
    for g, e in zip(got_l, exp_l):
        _assert_leaf(g, e, "eager", rtol, int_tol, values)
    if staged:
        closed = ftrans.make_jaxpr(lambda *a: fn(fnp, *a))(*args)
        typecheck(closed)
        for aval, e in zip(closed.out_avals, exp_l):
            e = _as_jax(e)
            assert (aval.shape, aval.dtype, aval.weak_type) == (e.shape, e.dtype, e.aval.weak_type)
        outs = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *[fnp.asarray(a) for a in args])
        for g, e in zip(outs, exp_l):
            _assert_leaf(g, e, "staged", rtol, int_tol, values)
    return got


def no_big_consts(fn, *args):
    """The staged program of ``fn`` captures no array constants (only literals)."""
    closed = ftrans.make_jaxpr(fn)(*args)
    typecheck(closed)
    assert not closed.consts, f"captured constants: {[np.shape(c) for c in closed.consts]}"
    return closed


shapes = st.one_of(st.integers(0, 4), st.lists(st.integers(0, 4), max_size=3).map(tuple))
dtype_args = st.sampled_from(DTYPE_ARGS)


# ---------------------------------------------------------------- array / asarray
def test_array_dtype_rules():
    check(lambda m: m.array([1, 2.0]))
    check(lambda m: m.array(1.0))
    check(lambda m: m.array(1))
    check(lambda m: m.array(True))
    check(lambda m: m.array([True, 1]))
    check(lambda m: m.array([1j, 2]))
    check(lambda m: m.array([]))
    check(lambda m: m.array([[]]))
    check(lambda m: m.array(()))
    check(lambda m: m.array([np.uint8(1), 2]))
    check(lambda m: m.array([np.float32(2), 1]))
    check(lambda m: m.array([1, np.float64(2)]))
    check(lambda m: m.array([m.float16(1.0), 2]))
    check(lambda m: m.array(np.float32(2)))
    check(lambda m: m.asarray(np.arange(3, dtype=np.float64)))
    check(lambda m: m.asarray(np.float64(1.0)))
    check(lambda m: m.array(np.array([2**40])))
    check(lambda m: m.array([[1], [2.5]], dtype=int))
    check(lambda m: m.array((1, 2), dtype="float16"))
    check(lambda m: m.array(3.7, dtype=m.int32))
    check(lambda m: m.array(2, dtype=bool))
    check(lambda m: m.array([1, 2], ndmin=3))
    check(lambda m: m.array(1.0, ndmin=2))


def test_array_of_arrays_and_weak_inputs():
    w = 2.0
    check(lambda m: m.array(m.asarray(w)))  # weak stays weak
    check(lambda m: m.array(m.asarray(w), dtype=m.float32))  # explicit dtype is strong
    check(lambda m: m.asarray(m.asarray(w)))
    check(lambda m: m.array([m.asarray(w), m.asarray(w)]))
    check(lambda m: m.array([m.ones(2), m.zeros(2)]))
    check(lambda m: m.array([[m.ones(2)], [np.zeros(2)]]))
    check(lambda m: m.copy(w))
    check(lambda m, x: m.copy(x), np.arange(3, dtype=np.int8))
    # Traced elements: the nested list is stacked, so the result stays traced.
    check(lambda m, x, y: m.array([[x, y], [y, x]]), np.float32(1), 2.0)
    check(lambda m, x: m.array([x, x + 1], dtype=m.int8), np.arange(3, dtype=np.float32))
    check(lambda m, x: m.asarray(x, dtype=float), np.arange(3, dtype=np.int32))


@settings(max_examples=examples(8))
@given(st.lists(st.one_of(st.integers(-100, 100), st.floats(-1e3, 1e3, width=32), st.booleans()),
                max_size=5), dtype_args)
def test_array_from_lists(data, dtype):
    check(lambda m: m.array(data, dtype=dtype), staged=False)
    check(lambda m: m.asarray([data, data], dtype=dtype), staged=False)


def test_array_errors():
    with pytest.raises(OverflowError):
        fnp.array(2**40)
    with pytest.raises(OverflowError):
        fnp.array([2**40])
    with pytest.raises(OverflowError):
        fnp.array(-1, dtype=fnp.uint8)
    with pytest.raises(TypeError, match="string"):
        fnp.array("a")
    with pytest.raises(TypeError, match="string"):
        fnp.array(["a", 1])
    with pytest.raises(ValueError, match="nested sequence"):
        fnp.array([[1, 2], [3]])
    with pytest.raises(NotImplementedError, match="order='F'"):
        fnp.array([1, 2], order="F")
    with pytest.raises(TypeError, match="dtype"):
        fnp.array([1, 2], dtype="not-a-dtype")


@pytest.mark.parametrize("make", [lambda: pyarray.array("l", [0, 1, 2, 3]), lambda: pyarray.array("d", [1.5, -2]),
                                  lambda: bytearray(b"\x2a\xf3"), lambda: memoryview(b"ab")])
@pytest.mark.parametrize("kw", [{}, {"copy": False}, {"copy": True}, {"ndmin": 2}, {"dtype": np.float32}])
def test_array_from_buffer_protocol_objects(make, kw):
    """array.array, bytearray and memoryview are read through the buffer protocol, as JAX does."""
    for f_fn, j_fn in ((fnp.array, jnp.array), (fnp.asarray, jnp.asarray)):
        if "ndmin" in kw and f_fn is fnp.asarray:
            continue
        try:
            exp = j_fn(make(), **kw)
        except ValueError:  # asarray(copy=False) off the CPU (a GPU default device): host memory needs a copy
            with pytest.raises(ValueError, match="copy=False"):
                f_fn(make(), **kw)
            continue
        got = f_fn(make(), **kw)
        assert isinstance(got, ftrans.Array)
        assert (got.shape, got.dtype, got.weak_type) == (exp.shape, exp.dtype, exp.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(exp))
    with pytest.raises(TypeError, match="object"):
        fnp.array(object())


@pytest.mark.parametrize("make", [lambda: bytearray(b"\x2a\xf3"), lambda: np.arange(3.0)])
def test_asarray_without_copy_off_the_cpu_is_refused_as_jax(make):
    # The array API's rule, as JAX applies it: host memory becomes an array of another platform only by copying.
    for m in (jnp, fnp):
        with pytest.raises(ValueError, match="platform=gpu with copy=False"):
            m.asarray(make(), copy=False, device="gpu")
    np.testing.assert_array_equal(np.asarray(fnp.asarray(make(), copy=False, device=ftrans.devices("cpu")[0])),
                                  np.asarray(jnp.asarray(make(), copy=False, device=jax.devices("cpu")[0])))


def test_array_none_is_a_value_error():
    for obj, kw in ((None, {}), ([0.0, None], {}), ([[1, 2], [None, 3]], {}), ([1.0, None], {"dtype": np.float32})):
        for m in (jnp, fnp):
            with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
                m.array(obj, **kw)


def test_array_x64_off_narrowing():
    a = fnp.asarray(np.ones(3, np.float64))
    assert a.dtype == np.float32 and not a.weak_type
    b = fnp.array(np.int64(7))
    assert b.dtype == np.int32 and int(b) == 7


# ---------------------------------------------------------------- filled arrays
@settings(max_examples=examples(8))
@given(shapes, dtype_args)
def test_zeros_ones_empty_full(shape, dtype):
    check(lambda m: m.zeros(shape, dtype=dtype))
    check(lambda m: m.ones(shape, dtype))
    check(lambda m: m.empty(shape, dtype=dtype), values=False)
    check(lambda m: m.full(shape, 3, dtype=dtype))
    check(lambda m: m.full(shape, 2.5))
    check(lambda m: m.full(shape, True))


def test_full_fill_forms():
    check(lambda m: m.full(3, 2.0))
    check(lambda m: m.full((2,), 2))
    check(lambda m: m.full((2,), 3, dtype=m.int8))
    check(lambda m: m.full((2, 3), np.array([1, 2, 3], np.int8)))
    check(lambda m: m.full((2,), m.asarray(2.0)))
    check(lambda m, v: m.full((2, 2), v), np.float32(4))
    check(lambda m, v: m.full((2, 2), v), 4.0)
    check(lambda m, v: m.full((3, 2), v, dtype=m.int32), np.arange(2, dtype=np.float32))
    check(lambda m: m.full((), 1.5))


@settings(max_examples=examples(8))
@given(shapes, dtype_args, st.sampled_from([np.float32, np.int8, np.bool_, np.uint8]))
def test_like_functions(shape, dtype, src_dtype):
    a = np.zeros(shape, src_dtype)
    check(lambda m, a: m.zeros_like(a, dtype=dtype), a)
    check(lambda m, a: m.ones_like(a, dtype), a)
    check(lambda m, a: m.empty_like(a, dtype=dtype), a, values=False)
    check(lambda m, a: m.full_like(a, 7, dtype=dtype), a)
    check(lambda m, a: m.full_like(a, 2, shape=(2, 1)), a)
    check(lambda m, a: m.zeros_like(a, shape=3), a)


def test_like_weak_types_and_fill_forms():
    w = 2.0
    check(lambda m: m.full_like(m.asarray(w), 3))
    check(lambda m: m.full_like(m.asarray(w), 3, dtype=m.float32))
    check(lambda m: m.zeros_like(m.asarray(w)))
    check(lambda m: m.zeros_like(3))
    check(lambda m: m.ones_like(3.0))
    check(lambda m: m.empty_like(m.asarray(w)), values=False)
    check(lambda m, a: m.full_like(a, 2.7), np.ones(2, np.int32))
    check(lambda m, a: m.full_like(a, np.array([1, 2])), np.ones(2, np.float32))
    check(lambda m, a, v: m.full_like(a, v), np.ones((2, 2), np.float32), 5.0)
    check(lambda m, a: m.zeros_like(a), 1.0)
    s = jax.ShapeDtypeStruct((2, 3), jnp.int8)
    got = fnp.zeros_like(ftrans.ShapeDtypeStruct((2, 3), np.int8))
    assert got.shape == s.shape and got.dtype == s.dtype


def test_filled_errors():
    with pytest.raises(TypeError, match="negative"):
        fnp.zeros(-1)
    with pytest.raises(TypeError, match=r"\(2, 3.0\)"):
        fnp.zeros((2, 3.0))
    with pytest.raises(TypeError, match="negative"):
        fnp.ones_like(fnp.ones(2), shape=-1)
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        fnp.full((2,), fnp.ones(3))
    with pytest.raises(ConcretizationTypeError, match="shape"):
        ftrans.make_jaxpr(lambda n: fnp.zeros(n))(3)


def test_staged_filled_arrays_are_not_constants():
    for fn in (lambda: fnp.zeros((500, 500)), lambda: fnp.ones((300, 300), int),
               lambda: fnp.full((400, 400), 2.5), lambda: fnp.empty((10, 10, 10)),
               lambda: fnp.zeros_like(np.empty((100, 100))), lambda: fnp.full_like(np.empty((64, 64)), 3)):
        closed = no_big_consts(fn)
        assert [e.primitive.name for e in closed.eqns] == ["broadcast_in_dim"]


# ---------------------------------------------------------------- ranges
@settings(max_examples=examples(8))
@given(st.integers(-5, 20), st.one_of(st.none(), st.integers(-5, 20)), st.one_of(st.none(), st.sampled_from(
    [1, 2, 3, -1, -2, 0.5, -0.75, 1.5])), st.sampled_from([None, int, float, np.int8, np.float16, "bfloat16",
                                                          np.uint8, np.int32]))
def test_arange(start, stop, step, dtype):
    if dtype in (np.uint8,) and (start < 0 or (stop is not None and stop < 0) or (step or 1) < 0):
        return
    if step is not None and stop is None:
        args, kw = (start,), {"step": step}
    else:
        args, kw = tuple(v for v in (start, stop, step) if v is not None), {}
    check(lambda m: m.arange(*args, dtype=dtype, **kw), rtol=1e-2 if dtype in (np.float16, "bfloat16") else 1e-6)


def test_arange_dtypes_and_forms():
    check(lambda m: m.arange(5))
    check(lambda m: m.arange(0.0, 1.0, 0.1))
    check(lambda m: m.arange(5.0))
    check(lambda m: m.arange(2.5))
    check(lambda m: m.arange(3, 10, 2.5))
    check(lambda m: m.arange(10, 0, -3))
    check(lambda m: m.arange(np.int8(3)))
    check(lambda m: m.arange(np.int64(3)))
    check(lambda m: m.arange(np.uint8(3), 10))
    check(lambda m: m.arange(m.asarray(4)))
    check(lambda m: m.arange(1.5, dtype=m.int32))
    check(lambda m: m.arange(0, 1, 0.3, dtype=m.bfloat16), rtol=1e-2)
    check(lambda m: m.arange(0.5, 3))
    closed = no_big_consts(lambda: fnp.arange(100000))
    assert [e.primitive.name for e in closed.eqns] == ["iota"]
    no_big_consts(lambda: fnp.arange(1.0, 5000.0, 0.5))


def test_arange_errors():
    with pytest.raises(ConcretizationTypeError, match="'stop'"):
        ftrans.make_jaxpr(lambda n: fnp.arange(n))(5)
    with pytest.raises(ConcretizationTypeError, match="'start'"):
        ftrans.make_jaxpr(lambda n: fnp.arange(n, 10))(5)
    with pytest.raises(ConcretizationTypeError, match="'step'"):
        ftrans.make_jaxpr(lambda n: fnp.arange(0, 10, n))(2)
    with pytest.raises(ValueError, match="scalars"):
        fnp.arange(fnp.ones(2))
    with pytest.raises(ValueError, match="zero"):
        fnp.arange(1, 5, 0)
    with pytest.raises(TypeError, match="bool"):
        fnp.arange(True)
    with pytest.raises(ValueError, match="complex"):
        fnp.arange(1j)


def test_arange_complex_dtype():
    check(lambda m: m.arange(3, dtype=np.complex64))
    check(lambda m: m.arange(1, 4, 0.5, dtype=np.complex64))


@settings(max_examples=examples(8))
@given(st.floats(-10, 10, width=32), st.floats(-10, 10, width=32), st.integers(0, 7), st.booleans(),
       st.booleans(), st.sampled_from([None, float, int, np.float16, np.int8]))
def test_linspace(start, stop, num, endpoint, retstep, dtype):
    if dtype in (int, np.int8):
        start, stop = float(np.round(start)), float(np.round(stop))
    # Integer linspace floors values that are whole numbers only up to rounding, and XLA (the oracle)
    # divides by a constant as a multiply by its reciprocal, so a result can land one lower than NumPy's.
    check(lambda m: m.linspace(start, stop, num, endpoint=endpoint, retstep=retstep, dtype=dtype),
          rtol=1e-2 if dtype is np.float16 else 1e-5, int_tol=1 if dtype in (int, np.int8) else 0)


def test_linspace_arrays_axis_and_traced_bounds():
    a = np.array([0.0, 1.0], np.float32)
    b = np.array([[2.0, 3.0], [4.0, 5.0]], np.float32)
    for axis in (0, 1, -1, 2, -3):
        check(lambda m, a, b: m.linspace(a, b, 4, axis=axis), a, b, rtol=1e-5)
    check(lambda m, a, b: m.linspace(a, b, 5, endpoint=False, retstep=True, axis=-1), a, b, rtol=1e-5)
    check(lambda m, a, b: m.linspace(a, b, 1, retstep=True), a, b)
    check(lambda m, a, b: m.linspace(a, b, 0, retstep=True, axis=1), a, b)
    check(lambda m: m.linspace(np.int8(0), np.int8(10), 5))
    check(lambda m: m.linspace(0, 10, 4, dtype=m.int8))
    check(lambda m, s: m.linspace(s, 10.0, 6), 1.0, rtol=1e-5)
    no_big_consts(lambda: fnp.linspace(0.0, 1.0, 10000))
    with pytest.raises(ValueError, match="non-negative"):
        fnp.linspace(0, 1, -1)
    with pytest.raises(ConcretizationTypeError, match="num"):
        ftrans.make_jaxpr(lambda n: fnp.linspace(0, 1, n))(3)


def test_logspace_geomspace():
    check(lambda m: m.logspace(0, 2, 5), rtol=1e-5)
    check(lambda m: m.logspace(0, 2, 3, dtype=int))
    check(lambda m: m.logspace(0, 2, 7, base=2, endpoint=False), rtol=1e-5)
    check(lambda m, a: m.logspace(a, 3.0, 4, axis=-1), np.array([0.0, 1.0], np.float32), rtol=1e-5)
    check(lambda m: m.geomspace(1, 1000, 4), rtol=1e-5)
    check(lambda m: m.geomspace(-1, -1000, 4, endpoint=False), rtol=1e-5)
    check(lambda m: m.geomspace(2, 3, 1), rtol=1e-5)
    check(lambda m, a, b: m.geomspace(a, b, 3, axis=1), np.array([1.0, 2.0], np.float32),
          np.array([8.0, 32.0], np.float32), rtol=1e-5)


# ---------------------------------------------------------------- matrices
@settings(max_examples=examples(8))
@given(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 5)), st.integers(-6, 6),
       st.sampled_from([None, int, bool, np.float16, "int8"]))
def test_eye_tri_identity(n, m_, k, dtype):
    check(lambda m: m.eye(n, m_, k=k, dtype=dtype))
    check(lambda m: m.eye(n, M=m_, k=k))
    check(lambda m: m.tri(n, m_, k, dtype=dtype))
    check(lambda m: m.identity(n, dtype=dtype))


@pytest.mark.parametrize("k", [2**31, -2**31, 2**40])
def test_eye_offset_beyond_int32_like_jax(k):
    # the array API suite draws such offsets: no diagonal element is set, and nothing overflows
    check(lambda m: m.eye(0, k=k))
    check(lambda m: m.eye(3, 4, k=k))


def test_eye_traced_k_and_staging():
    check(lambda m, k: m.eye(4, k=k), np.int32(1))
    check(lambda m, k: m.eye(3, 5, k=k, dtype=int), -1)
    closed = no_big_consts(lambda: fnp.eye(2000))
    assert {e.primitive.name for e in closed.eqns} <= {"iota", "eq", "convert_element_type"}
    no_big_consts(lambda: fnp.tri(500, 300, 2))
    with pytest.raises(ValueError, match="negative"):
        fnp.eye(-1)
    with pytest.raises(ConcretizationTypeError, match="'N'"):
        ftrans.make_jaxpr(lambda n: fnp.eye(n))(3)


@settings(max_examples=examples(8))
@given(st.lists(st.integers(0, 4), min_size=2, max_size=4).map(tuple), st.integers(-5, 5),
       st.sampled_from([np.float32, np.int32, np.bool_, np.uint8]))
def test_tril_triu(shape, k, dtype):
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 7).astype(dtype)
    check(lambda m, x: m.tril(x, k), x)
    check(lambda m, x: m.triu(x, k=k), x)


def test_tril_triu_weak_and_errors():
    check(lambda m: m.tril(m.atleast_2d(2.0)))
    check(lambda m: m.triu(m.atleast_2d(2.0), 1))
    check(lambda m, k: m.tril(np.ones((3, 3), np.float32), k), np.int32(-1))
    with pytest.raises(ValueError, match=r"at least 2-D.*\(3,\)"):
        fnp.tril(fnp.ones(3))
    with pytest.raises(ValueError, match="at least 2-D"):
        fnp.triu(fnp.ones(3))


@settings(max_examples=examples(8))
@given(st.lists(st.integers(0, 4), max_size=4), st.sampled_from(["xy", "ij"]), st.booleans())
def test_meshgrid(sizes, indexing, sparse):
    dts = [np.float32, np.int32, np.int8, np.bool_]
    xs = [np.arange(n).astype(dts[i % 4]) for i, n in enumerate(sizes)]
    check(lambda m, *xs: m.meshgrid(*xs, indexing=indexing, sparse=sparse), *xs)


def test_meshgrid_weak_and_errors():
    check(lambda m: m.meshgrid(m.atleast_1d(2.0), m.atleast_1d(2)))
    assert fnp.meshgrid() == []
    with pytest.raises(ValueError, match=r"1-D.*\(2, 2\)"):
        fnp.meshgrid(fnp.ones((2, 2)))
    with pytest.raises(ValueError, match="'q'"):
        fnp.meshgrid(fnp.ones(2), indexing="q")


@settings(max_examples=examples(8))
@given(st.integers(0, 5), st.integers(-6, 6), st.sampled_from([np.float32, np.int32, np.bool_]))
def test_diag_1d(n, k, dtype):
    v = (np.arange(n) + 1).astype(dtype)
    check(lambda m, v: m.diag(v, k), v)
    check(lambda m, v: m.diagflat(v, k=k), v)


@settings(max_examples=examples(8))
@given(st.integers(0, 5), st.integers(0, 5), st.integers(-6, 6))
def test_diag_2d(rows, cols, k):
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    check(lambda m, x: m.diag(x, k), x)
    check(lambda m, x: m.diagflat(x, k), x)


def test_diag_weak_and_errors():
    check(lambda m: m.diag(m.atleast_1d(2.0)))
    check(lambda m: m.diag(m.atleast_2d(2.0)))
    check(lambda m: m.diagflat(m.atleast_1d(2.0)))
    with pytest.raises(ValueError, match=r"1-D or 2-D.*\(2, 2, 2\)"):
        fnp.diag(fnp.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        fnp.diag(fnp.asarray(2.0))


def test_array_copy_of_traced_value_is_a_copy_equation():
    """jnp.array(tracer) stages a copy (as JAX), so transformed results are new arrays."""
    x = fnp.ones(10)
    f = lambda v: fnp.array(v, copy=True)  # noqa: E731
    y, ydot = ftrans.jvp(f, (x,), (x,))
    assert y is not x and ydot is not x
    y, f_vjp = ftrans.vjp(f, x)
    ybar = fnp.ones(10)
    (xbar,) = f_vjp(ybar)
    assert y is not x and xbar is not ybar
    np.testing.assert_array_equal(np.asarray(xbar), np.ones(10))
    assert ftrans.vmap(f)(x) is not x
    for fn in (lambda m, v: m.array(v), lambda m, v: m.array(v, dtype=m.int32), lambda m, v: m.asarray(v)):
        got = [e.primitive.name for e in ftrans.make_jaxpr(lambda v: fn(fnp, v))(np.ones(3, np.float32)).eqns]
        want = [e.primitive.name for e in jax.make_jaxpr(lambda v: fn(jnp, v))(np.ones(3, np.float32)).eqns]
        assert got == want


def test_array_positional_copy_order_ndmin_warn_like_jax():
    """jnp.array(x, dtype, copy, order, ndmin): still accepted, with JAX's DeprecationWarning (jax 0.10 and
    0.11; jax 0.12 ended the deprecation and refuses them: docs/differences.md)."""
    import jax

    if jax.__version_info__ >= (0, 12):
        with pytest.raises(TypeError, match="positional argument"):
            jnp.array(jnp.array([1, 2, 3]), None, False)
    for lib in (fnp, jnp) if jax.__version_info__ < (0, 12) else (fnp,):
        x = lib.array([1, 2, 3])
        with pytest.warns(DeprecationWarning, match="Passing the copy, order, and ndmin arguments") as rec:
            same = lib.array(x, None, False)
        assert same is x and rec[0].filename == __file__
        with pytest.warns(DeprecationWarning, match="positionally"):
            assert lib.array(x, None, True) is not x
        with pytest.warns(DeprecationWarning):
            assert lib.array([1, 2], "float32", True, "K", 3).shape == (1, 1, 2)
        with pytest.raises(TypeError, match="got multiple values for argument 'copy'"):
            lib.array(x, None, True, copy=False)
        with pytest.raises(TypeError, match="takes at most 5 positional arguments but 6 were given"):
            lib.array(x, None, True, "K", 0, "extra")


@pytest.mark.parametrize("value", [2**32 - 1, 2**31, 2**31 - 1, -1, 300, 2**33, -2**31, 2**63])
@pytest.mark.parametrize("dtype", ["uint32", "int32", "uint8", "int8", "bfloat16", "float16", "complex64", "bool"])
def test_python_int_with_an_explicit_dtype(value, dtype):
    """An explicit dtype takes any Python int it can hold (jnp.uint32(2**32 - 1)), and raises
    OverflowError for one it cannot, as JAX does; the default int32 range does not apply."""
    if dtype == "bfloat16" and value == 2**63:
        # JAX raises "TypeError: expected number, got int" here (ml_dtypes rejects ints past int64);
        # ftrans gives 9.2e18, as jnp.float16 / float32 do: not copied
        assert float(fnp.array(value, dtype=dtype)) == float(np.float32(2.0**63))
        return
    check(lambda m: m.array(value, dtype=dtype), staged=False)
    check(lambda m: m.asarray(value, dtype=dtype), staged=False)
    if dtype not in ("bool", "bfloat16", "float16", "complex64"):
        check(lambda m: getattr(m, dtype)(value), staged=False)
    check(lambda m: m.zeros(2, dtype).at[0].set(m.asarray(value, dtype=dtype)) if value < 2**32 else m.asarray(0),
          staged=False)


def test_scatter_of_a_large_python_int_into_uint32():
    a = fnp.zeros(1, dtype=fnp.uint32)
    assert int(a.at[0].set(fnp.uint32(2**32 - 1))[0]) == 2**32 - 1
    assert int(a.at[0].set(2**32 - 1)[0]) == 2**32 - 1


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_int_as_dtype_hints_at_a_shape_tuple_like_jax(name):
    """``jnp.zeros(2, 3)``: a TypeError (as JAX's) that suggests ``jnp.zeros((2, 3))``."""
    with pytest.raises(TypeError) as want:
        getattr(jnp, name)(2, 3)
    with pytest.raises(TypeError, match=r"Did you accidentally write `jax\.numpy\.\w+\(2, 3\)` when you meant "
                                        r"`jax\.numpy\.\w+\(\(2, 3\)\)`") as got:
        getattr(fnp, name)(2, 3)
    assert "Did you accidentally write" in str(want.value)
    assert got.value is not None


@pytest.mark.parametrize("make", [
    lambda m: m.zeros(3, dtype=m.arange(4)),
    lambda m: m.arange(3).astype(m.arange(2.0)),
    lambda m: m.full(2, 1, m.ones(2, "int8")),
])
def test_an_array_as_dtype_is_a_value_error_like_jax(make):
    with pytest.raises(ValueError, match="Passing an array as a dtype argument"):
        make(jnp)
    with pytest.raises(ValueError, match="Passing an array as a dtype argument"):
        make(fnp)
    with pytest.raises(ValueError, match="Passing an array as a dtype argument"):
        ftrans.jit(lambda x: fnp.zeros(2, x))(fnp.arange(2))
