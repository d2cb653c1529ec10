"""``ftrans.Array``: properties, methods and Python operators, differential against jax arrays."""

from __future__ import annotations

import copy
import operator
import pickle

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as jnp

RNG = np.random.default_rng(0)


def pair(value):
    """The same values as an ftrans Array and a jax Array."""
    v = np.asarray(value)
    return jnp.asarray(v), jjnp.asarray(v)


def weak_scalar_pair(s):
    """A weakly typed rank-0 array from a Python scalar, in both libraries."""
    return jnp.asarray(s), jjnp.asarray(s)


def check(ours, theirs, rtol=1e-6, atol=1e-6):
    """Same type (Array), shape, dtype, weak type, and values."""
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, type(theirs)) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            check(o, t, rtol, atol)
        return
    assert isinstance(ours, ftrans.Array), type(ours)
    t_aval = theirs.aval
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert ours.weak_type == t_aval.weak_type, ("weak_type", ours.weak_type, t_aval.weak_type)
    o, t = np.asarray(ours), np.asarray(theirs)
    if o.dtype.kind == "c":
        np.testing.assert_allclose(o.astype(np.complex128), t.astype(np.complex128), rtol=rtol, atol=atol)
    elif o.dtype.kind == "f" or o.dtype.name == "bfloat16":
        np.testing.assert_allclose(o.astype(np.float64), t.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(o, t)


M23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
I23 = np.arange(6, dtype=np.int32).reshape(2, 3) - 2


# ----------------------------------------------------------------------------
# Properties


@pytest.mark.parametrize("value", [M23, I23, np.float32(3.0), np.ones((2, 1, 3), np.uint8),
                                   np.array([True, False])], ids=["f32", "i32", "scalar", "u8", "bool"])
def test_properties(value):
    a, j = pair(value)
    assert a.shape == j.shape and a.ndim == j.ndim and a.size == j.size and a.dtype == j.dtype
    assert isinstance(a.shape, tuple) and isinstance(a.size, int) and isinstance(a.ndim, int)
    assert a.weak_type is False
    check(a.T, j.T)
    assert a.nbytes == j.nbytes and a.itemsize == j.itemsize


def test_transpose_property_3d():
    v = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    a, j = pair(v)
    check(a.T, j.T)
    check(a.transpose(), j.transpose())
    check(a.transpose(2, 0, 1), j.transpose(2, 0, 1))
    check(a.transpose((1, 0, 2)), j.transpose((1, 0, 2)))
    check(a.transpose(-1, 0, 1), j.transpose(-1, 0, 1))


def test_isinstance_and_array_type():
    a = jnp.asarray(M23)
    assert isinstance(a, ftrans.Array) and isinstance(a, jnp.ndarray)


# ----------------------------------------------------------------------------
# Methods


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_, jnp.bfloat16, np.uint8, np.complex64, float, int])
def test_astype(dtype):
    a, j = pair(M23)
    check(a.astype(dtype), j.astype(dtype))
    ai, ji = pair(I23)
    check(ai.astype(dtype), ji.astype(dtype))


@pytest.mark.parametrize("change_dtype", [False, True])
def test_astype_copy_gives_a_new_array_like_jax(change_dtype):
    dtype = "float32" if change_dtype else "int32"
    for lib in (jnp, jjnp):
        x = lib.arange(5, dtype="int32")
        y = x.astype(dtype, copy=True)
        assert y is not x
        y.delete()
        assert not x.is_deleted()
        assert x.astype("int32", copy=False) is x
    got = [str(e.primitive) for e in ftrans.make_jaxpr(lambda v: v.astype(dtype, copy=True))(I23).jaxpr.eqns]
    want = [str(e.primitive) for e in jax.make_jaxpr(lambda v: v.astype(dtype, copy=True))(I23).jaxpr.eqns]
    assert got == want


def test_astype_from_complex_like_jax():
    z = np.array([1j, 0, 2 + 0j, -1 - 1j], np.complex64)
    a, j = pair(z)
    check(a.astype(bool), j.astype(bool))  # nonzero, imaginary part included
    check(jnp.astype(a, None), jjnp.astype(j, None))
    for lib, v in ((jnp, a), (jjnp, j)):
        with pytest.warns(DeprecationWarning, match="Casting from complex to real dtypes") as rec:
            out = lib.astype(v, "float32")
        assert rec[0].filename == __file__
        np.testing.assert_array_equal(np.asarray(out), z.real)


def test_reshape():
    a, j = pair(M23)
    for args in [((3, 2),), (3, 2), ((-1,),), (-1,), ((1, 6),), (6, 1, 1), ((-1, 2),)]:
        check(a.reshape(*args), j.reshape(*args))
    check(a.reshape((3, 2), order="C"), j.reshape((3, 2), order="C"))
    with pytest.raises((TypeError, ValueError)):
        a.reshape(4, 2)


@pytest.mark.parametrize("method", ["sum", "mean", "max", "min"])
def test_reductions(method):
    for v in (M23, I23):
        a, j = pair(v)
        check(getattr(a, method)(), getattr(j, method)())
        check(getattr(a, method)(axis=0), getattr(j, method)(axis=0))
        check(getattr(a, method)(axis=-1, keepdims=True), getattr(j, method)(axis=-1, keepdims=True))
        check(getattr(a, method)(axis=(0, 1)), getattr(j, method)(axis=(0, 1)))


def test_argmax():
    for v in (M23, I23, np.array([1.0, np.nan, 3.0], np.float32)):
        a, j = pair(v)
        check(a.argmax(), j.argmax())
        if v.ndim > 1:
            check(a.argmax(axis=1), j.argmax(axis=1))
            check(a.argmax(axis=0, keepdims=True), j.argmax(axis=0, keepdims=True))


def test_squeeze_ravel_flatten():
    v = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3)
    a, j = pair(v)
    check(a.squeeze(), j.squeeze())
    check(a.squeeze(axis=0), j.squeeze(axis=0))
    check(a.squeeze(axis=(0, 2)), j.squeeze(axis=(0, 2)))
    check(a.squeeze(-2), j.squeeze(-2))
    check(a.ravel(), j.ravel())
    check(a.flatten(), j.flatten())
    with pytest.raises(ValueError):
        a.squeeze(axis=1)


def test_item_and_tolist():
    a, j = pair(M23)
    assert a.tolist() == j.tolist()
    assert a.item(4) == j.item(4)
    s, js = pair(np.float32(2.5))
    assert s.item() == js.item() == 2.5 and type(s.item()) is float
    i, ji = pair(np.int32(7))
    assert i.item() == 7 and type(i.item()) is int
    b, _ = pair(np.bool_(True))
    assert b.item() is True
    assert jnp.asarray(I23).tolist() == I23.tolist()


def test_array_protocol():
    a, j = pair(M23)
    out = np.asarray(a)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.asarray(j))
    assert a.__array__().dtype == np.float32
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.array(a), M23)
    # NumPy functions accept ftrans arrays and give NumPy results.
    assert isinstance(np.sum(np.asarray(a)), np.floating)


def test_dlpack():
    a = jnp.asarray(M23)
    out = np.from_dlpack(a)
    np.testing.assert_array_equal(out, M23)
    assert out.dtype == np.float32
    assert a.__dlpack_device__()[0] == 1  # kDLCPU


def test_block_until_ready():
    a = jnp.asarray(M23) + 1.0
    assert a.block_until_ready() is a


def test_at_updates():
    v = np.arange(5, dtype=np.float32)
    a, j = pair(v)
    check(a.at[1].set(10.0), j.at[1].set(10.0))
    check(a.at[1:3].add(1.0), j.at[1:3].add(1.0))
    check(a.at[-1].multiply(3.0), j.at[-1].multiply(3.0))
    check(a.at[0].min(-1.0), j.at[0].min(-1.0))
    check(a.at[0].max(7.0), j.at[0].max(7.0))
    check(a.at[2].get(), j.at[2].get())
    np.testing.assert_array_equal(np.asarray(a), v)  # the original is untouched


# ----------------------------------------------------------------------------
# Operators

ARITH = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
         operator.pow]
BITS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]
COMPARE = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


def _operands(op, dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(0.5, 3, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)
        y = rng.uniform(0.5, 3, shape).astype(dtype) * rng.choice([-1, 1], shape).astype(dtype)
        if op is operator.pow:
            x = np.abs(x)
        return x, y
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5, rng.random(shape) < 0.5
    lo = 0 if np.dtype(dtype).kind == "u" else -20
    x = rng.integers(lo, 20, shape).astype(dtype)
    y = rng.integers(1, 8, shape).astype(dtype)  # non-zero divisors, valid shifts and exponents
    if op in (operator.lshift, operator.rshift, operator.pow):
        y = rng.integers(0, 5, shape).astype(dtype)
    return x, y


@given(st.sampled_from(ARITH), st.sampled_from([np.float32, np.int32, np.uint8]),
       st.sampled_from([(), (3,), (2, 3)]), st.integers(0, 2**16))
def test_arithmetic_operators(op, dtype, shape, seed):
    x, y = _operands(op, dtype, shape, seed)
    a, ja = pair(x)
    b, jb = pair(y)
    check(op(a, b), op(ja, jb), rtol=1e-5)


@given(st.sampled_from(BITS), st.sampled_from([np.int32, np.uint8, np.bool_]), st.integers(0, 2**16))
def test_bitwise_operators(op, dtype, seed):
    if dtype is np.bool_ and op in (operator.lshift, operator.rshift):
        dtype = np.int32
    x, y = _operands(op, dtype, (4,), seed)
    a, ja = pair(x)
    b, jb = pair(y)
    check(op(a, b), op(ja, jb))


@given(st.sampled_from(COMPARE), st.sampled_from([np.float32, np.int32, np.bool_]), st.integers(0, 2**16))
def test_comparisons(op, dtype, seed):
    x, y = _operands(op, dtype, (5,), seed)
    y[:2] = x[:2]  # some equal elements
    a, ja = pair(x)
    b, jb = pair(y)
    check(op(a, b), op(ja, jb))
    check(op(a, 1), op(ja, 1))


def test_unary_operators():
    for v in (M23, I23):
        a, j = pair(v)
        check(-a, -j)
        check(+a, +j)
        check(abs(a), abs(j))
    ai, ji = pair(I23)
    check(~ai, ~ji)
    ab, jb = pair(np.array([True, False]))
    check(~ab, ~jb)


def test_matmul_operator():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    y = RNG.standard_normal((3, 4)).astype(np.float32)
    a, ja = pair(x)
    b, jb = pair(y)
    check(a @ b, ja @ jb, rtol=1e-5)
    check(a @ y, ja @ y, rtol=1e-5)
    check(x @ b, x @ jb, rtol=1e-5)
    v, jv = pair(y[:, 0])
    check(a @ v, ja @ jv, rtol=1e-5)


SCALARS = [2, 2.5, True, 3j]


@pytest.mark.parametrize("op", ARITH + BITS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_python_scalar_on_either_side(op, scalar):
    """Reflected operators with a weakly typed Python scalar: dtype and weak type as in jax."""
    for v in (np.array([1.5, 2.0, 3.0], np.float32), np.array([1, 2, 3], np.int32),
              np.array([1, 2, 3], np.uint8)):
        a, j = pair(v)
        for f in (lambda p, q: op(p, scalar), lambda p, q: op(scalar, p)):
            try:
                theirs = f(j, None)
            except (TypeError, ValueError, OverflowError):
                with pytest.raises((TypeError, ValueError, OverflowError)):
                    f(a, None)
                continue
            check(f(a, None), theirs, rtol=1e-5)


@pytest.mark.parametrize("op", ARITH + COMPARE, ids=lambda o: o.__name__)
def test_numpy_array_on_either_side(op):
    x = np.array([1.5, 2.0, 3.0], np.float32)
    y = np.array([0.5, 2.0, 4.0], np.float32)
    a, ja = pair(x)
    for ours, theirs in ((op(a, y), op(ja, y)), (op(y, a), op(y, ja))):
        check(ours, theirs, rtol=1e-5)
    yi = np.array([1, 2, 3], np.int64)  # a 64-bit NumPy array is narrowed, as in jax
    check(op(yi, a), op(yi, ja), rtol=1e-5)


@pytest.mark.parametrize("op", BITS + [operator.floordiv, operator.mod], ids=lambda o: o.__name__)
def test_numpy_int_array_on_either_side(op):
    x = np.array([5, 6, 7], np.int32)
    y = np.array([1, 2, 3], np.int32)
    a, ja = pair(x)
    check(op(a, y), op(ja, y))
    check(op(y, a), op(y, ja))


def test_divmod():
    a, ja = pair(np.array([7, -7, 5], np.int32))
    b, jb = pair(np.array([2, 2, -3], np.int32))
    check(divmod(a, b), divmod(ja, jb))


def test_weak_type_propagates_through_operators():
    w, jw = weak_scalar_pair(2.0)
    assert w.weak_type and jw.aval.weak_type
    check(w * 3, jw * 3)
    check(w + jnp.ones(3, np.float16), jw + jjnp.ones(3, np.float16))


METHOD_CALLS = {
    "T": lambda x: x.T,
    "astype": lambda x: x.astype(np.int32),
    "reshape": lambda x: x.reshape(3, 2),
    "sum": lambda x: x.sum(axis=0),
    "mean": lambda x: x.mean(),
    "max": lambda x: x.max(axis=1, keepdims=True),
    "min": lambda x: x.min(),
    "argmax": lambda x: x.argmax(axis=-1),
    "transpose": lambda x: x.transpose(1, 0),
    "squeeze": lambda x: x.reshape(1, 6).squeeze(),
    "ravel": lambda x: x.ravel(),
    "flatten": lambda x: x.flatten(),
    "at_set": lambda x: x.at[0, 1].set(9.0),
    "getitem": lambda x: x[1, ::2],
    "operators": lambda x: (x @ x.T) // 2 % 3 ** 1 - (-x).sum() * abs(x)[0, 0],
    "compare": lambda x: (x > 0) & (x <= 1.5) | ~(x == 0.5) ^ (x != x),
}


@pytest.mark.parametrize("name", list(METHOD_CALLS))
def test_methods_under_tracing(name):
    """Tracers share the methods: staged programs typecheck and re-evaluate to the eager result."""
    fn = METHOD_CALLS[name]
    a = jnp.asarray(M23)
    eager = fn(a)
    closed = ftrans.make_jaxpr(fn)(a)
    ftrans.core.ir.typecheck(closed)
    (staged,) = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, a)
    assert (staged.shape, staged.dtype, staged.weak_type) == (eager.shape, eager.dtype, eager.weak_type)
    np.testing.assert_allclose(np.asarray(staged), np.asarray(eager), rtol=1e-6)
    check(eager, fn(jjnp.asarray(M23)), rtol=1e-5)


# ----------------------------------------------------------------------------
# Sequence protocol, conversion, printing, pickling, immutability


def test_len_and_iteration():
    a, j = pair(M23)
    assert len(a) == len(j) == 2
    rows = list(a)
    assert len(rows) == 2
    for r, jr in zip(rows, j):
        check(r, jr)
    s, _ = pair(np.float32(1))
    with pytest.raises(TypeError):
        len(s)
    with pytest.raises(TypeError):
        iter(s)


REPR_CASES = {
    "f32": np.arange(3, dtype=np.float32),
    "f32_2d": np.arange(6, dtype=np.float32).reshape(2, 3) / 3,
    "i32": np.arange(4, dtype=np.int32) - 2,
    "bool": np.array([True, False]),
    "scalar": np.float32(1.5),
    "empty": np.zeros((0, 3), np.float32),
    "u8": np.array([1, 200], np.uint8),
    "f16": np.array([0.5, 1.25], np.float16),
    "bf16": np.array([0.5, 1.25], jnp.bfloat16),
    "c64": np.array([1 + 2j, 0.5j], np.complex64),
    "wide": np.arange(30, dtype=np.float32).reshape(3, 10),
}


@pytest.mark.parametrize("name", list(REPR_CASES))
def test_repr_and_str_match_jax(name):
    a, j = pair(REPR_CASES[name])
    assert repr(a) == repr(j)
    assert str(a) == str(j)


def test_repr_of_weak_array_matches_jax():
    w, jw = weak_scalar_pair(1.0)
    assert repr(w) == repr(jw) == "Array(1., dtype=float32, weak_type=True)"


def test_format():
    a, j = pair(np.float32(1.5))
    assert f"{a:.3f}" == f"{j:.3f}" == "1.500"


def test_pickle_round_trip():
    for v in (M23, I23, np.array([True]), np.float32(2.0)):
        a = jnp.asarray(v)
        b = pickle.loads(pickle.dumps(a))
        assert isinstance(b, ftrans.Array)
        assert (b.shape, b.dtype, b.weak_type) == (a.shape, a.dtype, a.weak_type)
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    w, _ = weak_scalar_pair(3.0)
    assert pickle.loads(pickle.dumps(w)).weak_type is True
    c = copy.deepcopy(jnp.asarray(M23))
    np.testing.assert_array_equal(np.asarray(c), M23)


def test_immutability():
    a = jnp.asarray(M23)
    with pytest.raises(TypeError, match="immutable"):
        a[0, 0] = 1.0
    with pytest.raises(TypeError):
        hash(a)
    for arr in (a, a + 1.0, jnp.sin(a), a.reshape(6), a.T):
        before = np.array(arr, copy=True)
        view = np.asarray(arr)
        try:
            view[...] = 42.0
        except ValueError:
            pass  # read-only, as jax's host views are
        np.testing.assert_array_equal(np.asarray(arr), before)


def test_creating_from_numpy_copies_or_freezes():
    v = M23.copy()
    a = jnp.asarray(v)
    v[0, 0] = 99.0
    assert np.asarray(a)[0, 0] == M23[0, 0]


def test_jax_interop_via_numpy():
    a = jnp.asarray(M23)
    j = jjnp.asarray(np.asarray(a))
    np.testing.assert_array_equal(np.asarray(j), M23)
    assert isinstance(a.devices(), set) and len(a.devices()) == 1
    assert next(iter(a.devices())).platform == next(iter(jjnp.asarray(M23).devices())).platform  # the default


def test_contains_matches_jax():
    """``v in x`` (Array.__contains__): 1-d arrays and scalar queries only, as JAX."""
    for v in (1, 100, 2.0, np.int32(3), -0.5):
        assert (v in jnp.arange(4)) == (v in jjnp.arange(4))
    assert (1.5 in jnp.array([0.5, 1.5])) and (1.5 in jjnp.array([0.5, 1.5]))
    bad = [(ValueError, "search array must be one-dimensional", lambda m: 1 in m.array(1)),
           (ValueError, "search array must be one-dimensional", lambda m: 1 in m.ones((2, 2))),
           (ValueError, "query value must be a scalar", lambda m: m.arange(2) in m.arange(2)),
           (TypeError, "unsupported operand type", lambda m: "abc" in m.arange(2)),
           (TypeError, "unsupported operand type", lambda m: None in m.arange(2))]
    for exc, msg, f in bad:
        with pytest.raises(exc, match=msg):
            f(jjnp)
        with pytest.raises(exc, match=msg):
            f(jnp)
    assert bool(ftrans.jit(lambda x: x.__contains__(2))(jnp.arange(3)))


def test_deepcopy_of_traced_values():
    """copy.deepcopy of a traced array is a copy inside the trace (it escaped the trace before)."""
    x = np.arange(4.0, dtype=np.float32)
    for f in (copy.copy, copy.deepcopy):
        np.testing.assert_array_equal(np.asarray(ftrans.jit(f)(x)), np.asarray(jax.jit(f)(x)))
        np.testing.assert_array_equal(np.asarray(ftrans.vmap(f)(x)), np.asarray(jax.vmap(f)(x)))
        g = ftrans.grad(lambda v, f=f: (f(v) * v).sum())(x)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.grad(lambda v, f=f: (f(v) * v).sum())(x)))
    c = copy.deepcopy({"a": jnp.arange(3), "b": 2.0 * jnp.ones(2)})
    assert c["a"].dtype == jnp.int32 and c["b"].weak_type is False


def test_the_array_type_cannot_be_instantiated_like_jax():
    """jnp.ndarray / ftrans.Array is for isinstance checks, as jax.Array: calling it raises TypeError."""
    for make in (lambda: jjnp.ndarray((1, 1)), lambda: jax.Array(np.ones(2))):
        with pytest.raises(TypeError):
            make()
    for make in (lambda: jnp.ndarray((1, 1)), lambda: ftrans.Array(np.ones(2)), lambda: ftrans.Array()):
        with pytest.raises(TypeError, match="jnp.array") as e:
            make()
        assert __file__ in str(e.value)
    a = jnp.asarray(np.arange(3))
    assert isinstance(a, jnp.ndarray) and isinstance(a, ftrans.Array)
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, ftrans.Array) and np.array_equal(np.asarray(b), np.arange(3))


def test_traced_values_are_array_instances_like_jax():
    """As jax.Array: the values a function sees under jit / vmap / grad / jvp / make_jaxpr are instances of
    ftrans.Array (and jnp.ndarray), NumPy arrays and Python scalars are not, and tracer classes are not
    subclasses."""
    def checks(mod, np_mod):
        seen = []

        def fresh():  # a new function per transform (JAX caches traces by function)
            def f(x):
                seen.append((isinstance(x, mod.Array), isinstance(x, np_mod.ndarray), isinstance(x, np.ndarray)))
                return x * 2.0
            return f

        for run in (lambda f: mod.jit(f)(3.0), lambda f: mod.vmap(f)(np.arange(3.0)), lambda f: mod.grad(f)(1.0),
                    lambda f: mod.jvp(f, (1.0,), (1.0,)), lambda f: mod.make_jaxpr(f)(1.0)):
            seen.clear()
            run(fresh())
            assert seen == [(True, True, False)], (mod.__name__, seen)
        seen.append((isinstance(np.ones(2), mod.Array), isinstance(1.0, mod.Array),
                     issubclass(np.ndarray, mod.Array)))
        seen.append((isinstance(np_mod.ones(2), mod.Array), issubclass(type(np_mod.ones(2)), mod.Array), True))
        return seen

    assert checks(ftrans, jnp) == checks(jax, jjnp)
    from ftrans.core.trace import Tracer

    assert not issubclass(Tracer, ftrans.Array)
    assert ftrans.Array.__name__ == "Array" and ftrans.Array.astype is not None  # methods for introspection


_OPERATOR_NAMES = [f"__{p}{n}__" for n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
                                           "and", "or", "xor", "lshift", "rshift") for p in ("", "r")]
_OPERATOR_NAMES += ["__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"]


class _OverrideEverything:
    pass


class _OverrideNothing:
    pass


for _n in _OPERATOR_NAMES:
    setattr(_OverrideEverything, _n, lambda self, other: self)
    setattr(_OverrideNothing, _n, lambda self, other: NotImplemented)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                                operator.mod, operator.pow, operator.and_, operator.or_, operator.xor,
                                operator.lshift, operator.rshift, operator.lt, operator.le, operator.gt,
                                operator.ge, operator.matmul])
@pytest.mark.parametrize("traced", [False, True])
def test_binary_operators_defer_to_unknown_operand_types(op, traced):
    """As JAX's: an Array operator returns NotImplemented for an operand type it does not know, so
    Python tries the other operand's (reflected) method; with none, the result is Python's TypeError."""
    x = jnp.asarray(np.int32(3)) if op is not operator.matmul else jnp.ones(2, np.int32)

    def run(x):
        other = _OverrideEverything()
        assert op(other, x) is other and op(x, other) is other
        for a, b in ((_OverrideNothing(), x), (x, _OverrideNothing())):
            with pytest.raises(TypeError):
                op(a, b)
        return x

    if traced:
        ftrans.make_jaxpr(run)(x)
    else:
        run(x)
    # the operators the shim's jax test checks behave the same on jax arrays
    other = _OverrideEverything()
    jx = jjnp.asarray(np.asarray(x))
    assert op(jx, other) is other


def test_eq_ne_with_unknown_operands_fall_back_to_identity():
    x = jnp.asarray(np.float32(1.0))
    assert (x == _OverrideNothing()) is False and (_OverrideNothing() == x) is False
    assert (x != _OverrideNothing()) is True


def test_operators_defer_to_a_namedtuple_wrapper():
    from typing import NamedTuple

    class MyArray(NamedTuple):
        arr: object

        def __mul__(self, other):
            return MyArray(self.arr * other)

        def __rmul__(self, other):
            return MyArray(other * self.arr)

    a, b = MyArray(jnp.ones(4)), jnp.ones(4)
    assert isinstance(a * b, MyArray) and isinstance(b * a, MyArray)
    assert isinstance(ftrans.jit(operator.mul)(a, b), MyArray)
    assert isinstance(ftrans.jit(operator.mul)(b, a), MyArray)
    with pytest.raises(TypeError, match="list"):
        b + [1.0, 2.0, 3.0, 4.0]  # containers are still refused, not deferred


def test_pickling_a_traced_value_is_a_concretization_error_as_in_jax():
    import copy
    import pickle

    import jax

    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(pickle.dumps)(0)
    with pytest.raises(ftrans.errors.ConcretizationTypeError, match="Pickling"):
        ftrans.jit(pickle.dumps)(0)
    # copy.copy and copy.deepcopy of a traced value stay in the trace (both libraries)
    assert float(ftrans.jit(lambda x: copy.copy(x) + copy.deepcopy(x))(1.5)) == 3.0
    # a concrete autodiff value pickles as its value
    assert float(ftrans.grad(lambda x: x * float(pickle.loads(pickle.dumps(x)).item()))(2.0)) == 2.0


def test_arrays_take_attributes_of_the_users_as_jax_arrays():
    # jax.Array objects have a __dict__: a user may hang attributes on them (JAX's
    # garbage_collection_guard_test links arrays into a cycle this way); a cycle of arrays is collected.
    import gc
    import weakref

    def cycle(F, np_mod):
        n1 = np_mod.ones((2, 2))
        n2 = F.jit(lambda x: x + 1)(n1)  # a device result too
        n1.next, n2.next = n2, n1
        assert n1.next is n2 and n2.next is n1
        return weakref.ref(n1), weakref.ref(n2)

    for F, np_mod in ((jax, jjnp), (ftrans, jnp)):
        refs = cycle(F, np_mod)
        gc.collect()
        assert [r() for r in refs] == [None, None]
    x = jnp.arange(3.0)
    x.tag = "mine"
    assert x.tag == "mine" and x.__dict__ == {"tag": "mine"}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        x.nope  # noqa: B018
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(x)), np.arange(3.0, dtype=np.float32))
