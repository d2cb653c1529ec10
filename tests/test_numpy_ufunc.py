"""``jnp.ufunc``/``jnp.frompyfunc`` and the ufunc methods of the builtin binary functions (``jnp.add.outer``,
``jnp.multiply.reduce``, ...) against ``jax.numpy``: values and dtypes, ``jit``, ``grad`` of a sample."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

X = np.arange(1, 13, dtype=np.float32).reshape(3, 4) / 4
INTS = np.arange(1, 6, dtype=np.int32)
B = X > 1.2
IDX = np.array([0, 0, 2])


def operand(name):
    return {"bitwise_and": INTS, "bitwise_or": INTS, "bitwise_xor": INTS, "logical_and": B, "logical_or": B,
            "logical_xor": B}.get(name, X)


BINARY = ["add", "multiply", "subtract", "maximum", "minimum", "logaddexp", "logaddexp2", "bitwise_and",
          "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor"]


def close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", BINARY)
def test_builtin_methods(name):
    f, g = getattr(fjnp, name), getattr(jjnp, name)
    a = operand(name)
    assert (f.nin, f.nout, f.identity) == (g.nin, g.nout, g.identity)
    close(f.reduce(a), g.reduce(a))
    close(f.reduce(a, axis=None, keepdims=True), g.reduce(a, axis=None, keepdims=True))
    close(f.accumulate(a), g.accumulate(a))
    close(f.outer(a[:2], a[:3]), g.outer(a[:2], a[:3]))
    axis = 0 if a.ndim == 1 else 1
    close(f.reduceat(a, np.array([0, 2, 1]), axis=axis), g.reduceat(a, np.array([0, 2, 1]), axis=axis))
    if not name.startswith("logical"):
        close(f.at(a, IDX, a[:1] if a.ndim > 1 else a[1], inplace=False),
              g.at(a, IDX, a[:1] if a.ndim > 1 else a[1], inplace=False))


def test_reduce_where_initial_dtype():
    w = X > 0.6
    close(fjnp.add.reduce(X, axis=1, where=w), jjnp.add.reduce(X, axis=1, where=w))
    close(fjnp.multiply.reduce(X, initial=2.0, dtype=np.float32), jjnp.multiply.reduce(X, initial=2.0, dtype=np.float32))
    close(fjnp.maximum.reduce(X, axis=0, where=w, initial=-1.0), jjnp.maximum.reduce(X, axis=0, where=w, initial=-1.0))
    close(fjnp.subtract.reduce(X, axis=1, where=w, initial=0.0), jjnp.subtract.reduce(X, axis=1, where=w, initial=0.0))
    with pytest.raises(ValueError, match="identity"):
        fjnp.subtract.reduce(X, where=w)


def test_frompyfunc():
    f = fjnp.frompyfunc(lambda a, b: a * b + 1, 2, 1, identity=0)
    g = jjnp.frompyfunc(lambda a, b: a * b + 1, 2, 1, identity=0)
    close(f(X, 2.0), g(X, 2.0))
    close(f.reduce(X, axis=1), g.reduce(X, axis=1))
    close(f.reduce(X, axis=None), g.reduce(X, axis=None))
    close(f.accumulate(X, axis=1), g.accumulate(X, axis=1))
    close(f.outer(INTS, INTS), g.outer(INTS, INTS))
    close(f.at(X, (0, np.array([1, 1])), 3.0, inplace=False), g.at(X, (0, np.array([1, 1])), 3.0, inplace=False))
    close(f.reduceat(X, np.array([0, 1]), axis=0), g.reduceat(X, np.array([0, 1]), axis=0))
    close(ftrans.jit(lambda x: f.reduce(x, axis=0))(X), g.reduce(X, axis=0))
    close(ftrans.grad(lambda x: f.accumulate(x, axis=1).sum())(X), jax.grad(lambda x: g.accumulate(x, axis=1).sum())(X))
    assert isinstance(f, fjnp.ufunc) and repr(f) == "<jnp.ufunc '<lambda>'>"
    unary = fjnp.frompyfunc(lambda a: a * a, 1, 1)
    close(unary(X), X * X)
    with pytest.raises(ValueError, match="binary"):
        unary.reduce(X)
    with pytest.raises(NotImplementedError, match="in-place"):
        f.at(X, 0, 1.0)
    with pytest.raises(NotImplementedError):
        f(X, X, out=X)


def test_builtins_stay_plain_functions_under_jit_and_grad():
    close(ftrans.jit(lambda a, b: fjnp.add.outer(a, b))(X[0], X[1]), jjnp.add.outer(X[0], X[1]))
    close(ftrans.grad(lambda x: fjnp.multiply.reduce(x, axis=None))(X), jax.grad(lambda x: jjnp.multiply.reduce(x, axis=None))(X))
    close(fjnp.add(X, 1.0), X + 1.0)


def test_isinstance_of_ufunc_matches_jax_for_every_name():
    names = sorted(n for n in dir(jjnp) if isinstance(getattr(jjnp, n), jjnp.ufunc))
    ours = sorted(n for n in dir(fjnp) if isinstance(getattr(fjnp, n), fjnp.ufunc))
    assert ours == names
    for n in names:
        f, j = getattr(fjnp, n), getattr(jjnp, n)
        assert (f.nin, f.nout, f.nargs, f.identity) == (j.nin, j.nout, j.nargs, j.identity), n


def test_frompyfunc_is_read_only_and_equal_by_definition():
    def f(a, b):
        return a + 2 * b

    u, v = fjnp.frompyfunc(f, 2, 1, identity=0), fjnp.frompyfunc(f, 2, 1, identity=0)
    assert u == v and hash(u) == hash(v)
    assert u != fjnp.frompyfunc(f, 2, 1, identity=1)
    for attr in ("nin", "nout", "nargs", "identity", "_func"):
        with pytest.raises(AttributeError):
            setattr(u, attr, None)


def test_negative_at_matches_numpy_with_repeated_indices():
    x = np.arange(6, dtype=np.float32)
    idx = np.array([0, 2, 2, 5, -1], np.int32)
    want = x.copy()
    np.negative.at(want, idx)
    got = fjnp.negative.at(x, idx, inplace=False)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(jjnp.negative.at(x, idx, inplace=False)), want)


@pytest.mark.parametrize("name", BINARY + ["negative"])
def test_builtin_is_a_ufunc_with_read_only_properties_as_in_jax(name):
    import pickle

    f, g = getattr(fjnp, name), getattr(jjnp, name)
    assert isinstance(f, fjnp.ufunc) and isinstance(g, jjnp.ufunc)
    for attr in ("nargs", "nin", "nout", "identity", "_func"):
        assert getattr(f, attr) == getattr(g, attr) or attr == "_func"
        with pytest.raises(AttributeError):
            setattr(f, attr, None)
        with pytest.raises(AttributeError):
            setattr(g, attr, None)
    assert f.__name__ == g.__name__ == name and f == getattr(fjnp, name) and hash(f) == hash(getattr(fjnp, name))
    assert pickle.loads(pickle.dumps(f)) is f
    args = (operand(name),) * f.nin
    close(f(*args), g(*args))
    close(ftrans.jit(f)(*args), g(*args))


_BUILTIN_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "logical_and", "logical_or",
                   "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp", "logaddexp2"]


@pytest.mark.parametrize("name", _BUILTIN_BINARY + ["negative"])
def test_builtin_ufunc_call_accepts_out_and_where_none_as_jax(name):
    nin = 1 if name == "negative" else 2
    dt = np.int32 if name.startswith("bitwise") else np.float32
    args = [np.arange(1, 5, dtype=dt)] * nin
    got = getattr(fjnp, name)(*args, out=None, where=None)
    want = getattr(jjnp, name)(*args, out=None, where=None)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert got.dtype == want.dtype


@pytest.mark.parametrize("kw", ["out", "where"])
@pytest.mark.parametrize("name", ["add", "logical_or", "bitwise_and", "logaddexp", "negative"])
def test_builtin_ufunc_call_refuses_out_and_where_values_as_jax(name, kw):
    nin = 1 if name == "negative" else 2
    args = [np.arange(1, 5, dtype=np.int32)] * nin
    with pytest.raises(NotImplementedError):
        getattr(jjnp, name)(*args, **{kw: args[0]})
    with pytest.raises(NotImplementedError, match=f"{kw}= argument"):
        getattr(fjnp, name)(*args, **{kw: args[0]})
