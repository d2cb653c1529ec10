"""Places where ftrans used to differ from JAX (issue 14), each checked against jax itself."""

import functools
import warnings

import jax
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.lax as flax
import ftrans.numpy as fnp
from ftrans import errors
from tests.thorough import THOROUGH


def _both(fn, *args):
    """fn(mod, *args) run with (jax, jnp, lax) and with (ftrans, fnp, flax)."""
    return fn((jax, jnp, jlax), *args), fn((ftrans, fnp, flax), *args)


def _close(a, b, **kw):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, **kw)


# ------------------------------------------------- 6: scalar type objects
NAMES = ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint32", "float16", "float32",
         "float64", "bfloat16", "complex64"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("other", [np.float32, np.int32, np.dtype("float32"), "float32", None,
                                   jnp.float32])
def test_scalar_types_compare_like_jax(name, other):
    jt, ft = getattr(jnp, name), getattr(fnp, name)
    assert (ft == other) == (jt == other)
    assert (ft != other) == (jt != other)
    assert (other != ft) == (other != jt)
    assert (other == ft) == (other == jt)


@pytest.mark.parametrize("name", NAMES)
def test_scalar_types_hash_and_work_as_dtypes(name):
    jt, ft = getattr(jnp, name), getattr(fnp, name)
    assert (hash(ft) == hash(np.dtype(ft).type)) == (hash(jt) == hash(np.dtype(jt).type))
    assert {ft: 1}.get(np.dtype(jt).type) == {jt: 1}.get(np.dtype(jt).type)
    assert fnp.zeros(2, ft).dtype == jnp.zeros(2, jt).dtype
    assert fnp.ones(2).astype(ft).dtype == jnp.ones(2).astype(jt).dtype
    assert (ft != getattr(fnp, "int16")) == (jt != jnp.int16)


# ------------------------------------------------- 11 / 15: tracer and Array attributes
@pytest.mark.parametrize("dtype", ["float32", "int8", "complex64", "bool"])
def test_tracer_itemsize_nbytes_copy(dtype):
    def f(mod, x):
        _, np_, _ = mod
        return mod[0].jit(lambda x: (x.copy(), np_.full((), x.itemsize), np_.full((), x.nbytes)))(x)

    x = np.ones((2, 3), dtype)
    for a, b in zip(*_both(f, x)):
        _close(a, b)
    g = ftrans.grad(lambda x: x * x.nbytes + x.itemsize)(1.0)
    assert float(g) == float(jax.grad(lambda x: x * x.nbytes + x.itemsize)(1.0))
    got = ftrans.vmap(lambda x: x.copy() + x.nbytes)(fnp.ones((4, 3)))
    _close(got, jax.vmap(lambda x: x.copy() + x.nbytes)(jnp.ones((4, 3))))


VIEW_CASES = [("float32", (2, 6), "int32"), ("float32", (6,), "uint8"), ("int8", (2, 8), "int32"),
              ("int16", (4,), "float16"), ("bool", (4,), "uint8"), ("uint8", (4,), "bool"),
              ("complex64", (3,), "float32"), ("float32", (4,), "complex64"),
              ("int32", (), "float32"), ("float32", (3,), None),
              # 4-bit types pack two elements to a byte: widths are counted in bits, not bytes
              ("int4", (2, 8), "int16"), ("int16", (3,), "uint4")]


def _view_input(src, shape):
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 2, shape) if src in ("bool", "uint8") else rng.integers(-8, 8, shape)
         if src in ("int4", "uint4") else rng.standard_normal(shape) * 100)
    return np.asarray(x).astype(src)


@functools.cache
def _jax_view(src, shape, dst):
    """jax's view, computed once for both of ftrans's modes (a view is the same bytes eager and jitted)."""
    return jax.jit(lambda x: x.view(dst))(jnp.asarray(_view_input(src, shape)))


@pytest.mark.parametrize("src, shape, dst", VIEW_CASES)
@pytest.mark.parametrize("jit", [False, True])
def test_view_matches_jax(src, shape, dst, jit):
    x = _view_input(src, shape)
    fn = lambda x: x.view(dst)  # noqa: E731
    a, b = _jax_view(src, shape, dst), (ftrans.jit(fn) if jit else fn)(fnp.asarray(x))
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("dst, shape", [("int8", (4,)), ("uint8", ()), ("int16", (4,)), ("float8_e4m3fn", (4,))])
@pytest.mark.parametrize("jit", [False, True])
def test_view_of_bools_holding_other_bytes_keeps_the_bytes_like_jax(dst, shape, jit):
    # A bool array made by viewing bytes (NumPy's uint8 -> bool view) may hold 96 in a byte; viewing it back
    # reads the stored byte, eagerly as under jit (jax's lax_numpy_test testViewScalar draws such bools).
    x = np.array([96, 0, 3, 1], np.uint8)[: int(np.prod(shape)) or 1].reshape(shape).view(np.bool_)

    def f(mod, x):
        fn = lambda x: x.view(dst)  # noqa: E731
        return (mod[0].jit(fn) if jit else fn)(mod[1].asarray(x))

    a, b = _both(f, x)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes() == x.view(dst).tobytes()


def test_view_errors_like_jax():
    for x, d in [(np.ones((), "int32"), "int8"), (np.ones(3, "int8"), "int16")]:
        with pytest.raises(ValueError):
            jnp.asarray(x).view(d)
        with pytest.raises(ValueError):
            fnp.asarray(x).view(d)


@pytest.mark.parametrize("dtype", ["int32", "float32", "int8", "uint16", "complex64", "float64"])
def test_byteswap_matches_jax(dtype):
    x = (np.arange(12).reshape(3, 4) * 1234567 - 5).astype(dtype)
    a, b = _both(lambda m, x: m[1].asarray(x).byteswap(), x)
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert np.asarray(b).tobytes() == x.astype(b.dtype).byteswap().tobytes()
    b2 = ftrans.jit(lambda x: x.byteswap().byteswap())(fnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(b2), np.asarray(fnp.asarray(x)))


def test_compress_argpartition_methods_match_jax():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)[::-1]
    cond = np.array([True, False, True, True])
    for fn in [lambda x: x.compress(cond), lambda x: x.compress(cond, axis=1),
               lambda x: x.compress(cond[:3], axis=0), lambda x: x.argpartition(1),
               lambda x: x.argpartition(0, axis=0)]:
        a, b = _both(lambda m, x: fn(m[1].asarray(x)), x)
        _close(a, b)
    a, b = _both(lambda m, x: m[0].jit(lambda x: x.compress(cond, size=3, fill_value=-1))(x), x)
    _close(a, b)


def test_tobytes_and_delete_like_jax():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert fnp.asarray(x).tobytes() == jnp.asarray(x).tobytes() == x.tobytes()
    assert fnp.asarray(x).tobytes("F") == jnp.asarray(x).tobytes("F")
    for mod, arr in [(jnp, jnp.asarray(x)), (fnp, fnp.asarray(x)), (fnp, ftrans.device_put(x)),
                     (fnp, ftrans.jit(lambda v: v * 2)(x))]:
        assert not arr.is_deleted()
        arr.delete()
        assert arr.is_deleted()
        with pytest.raises(RuntimeError):
            np.asarray(arr + 1)
    y = fnp.asarray(x)
    y.delete()
    with pytest.raises(errors.DeletedArrayError):
        ftrans.jit(lambda v: v + 1)(y)
    with pytest.raises(errors.ConcretizationTypeError):
        ftrans.jit(lambda v: v.tobytes())(x)


@pytest.mark.parametrize("value", [2.5, 3.5, -2.5, 2.66, -7.49, 1e6 + 0.5])
@pytest.mark.parametrize("ndigits", [None, 0, 1, -1])
def test_round_builtin_matches_jax(value, ndigits):
    def f(mod, v):
        return round(mod[1].float32(v)) if ndigits is None else round(mod[1].float32(v), ndigits)

    _close(*_both(f, value))
    x = np.array([0.5, 1.5, 2.45, -3.5], np.float32)
    _close(*_both(lambda m, x: m[0].jit(lambda x: round(x) if ndigits is None else round(x, ndigits))(x), x))


# ------------------------------------------------- 12: check_grads treats NaN == NaN
@pytest.mark.parametrize("fn, x", [
    (lambda np_, x: x * np_.nan, 1.0),
    (lambda np_, x: np_.sqrt(x), 0.0),
    (lambda np_, x: x * np_.inf, 1.0),
    (lambda np_, x: np_.where(x > 0, np_.nan, x), 1.0),
    (lambda np_, x: np_.stack([x, np_.nan * x]), 2.0),
    (lambda np_, x: np_.sin(x), 0.3),
])
@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_check_grads_nan_handling_matches_jax(fn, x, mode):
    import jax.test_util as jtu

    import ftrans.test_util as ftu

    def outcome(tu, np_):
        try:
            tu.check_grads(lambda v: fn(np_, v), (x,), 2, modes=[mode])
            return True
        except AssertionError:
            return False

    assert outcome(ftu, fnp) == outcome(jtu, jnp)


# ------------------------------------------------- 14: argsort dtype, top_k axis
@pytest.mark.parametrize("dtype", [None, "int32", "int16", "uint8", "int64", "float32"])
def test_argsort_dtype_matches_jax(dtype):
    x = np.array([[3, 1, 2, 2], [1, 2, 3, 0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = _both(lambda m, x: m[1].argsort(x, dtype=dtype), x)
        c, d = _both(lambda m, x: m[0].jit(lambda x: m[1].argsort(x, axis=0, descending=True,
                                                                   dtype=dtype))(x), x)
    _close(a, b)
    _close(c, d)


@given(st.integers(0, 2), st.integers(-3, 2), st.integers(0, 3))
def test_top_k_axis_matches_jax(seed, axis, k):
    x = np.random.default_rng(seed).integers(0, 4, (2, 3, 4)).astype(np.float32)
    if k > x.shape[axis]:
        with pytest.raises(ValueError):
            jlax.top_k(x, k, axis=axis)
        with pytest.raises(ValueError):
            flax.top_k(x, k, axis=axis)
        return
    (a, ai), (b, bi) = _both(lambda m, x: m[2].top_k(x, k, axis=axis), x)
    _close(a, b)
    _close(ai, bi)
    _, (c, ci) = _both(lambda m, x: m[0].jit(lambda x: m[2].top_k(x, k, axis=axis))(x), x)
    _close(a, c)
    _close(ai, ci)
    with pytest.raises(ValueError):
        flax.top_k(x, 1, axis=3)


# ------------------------------------------------- 4: unroll arguments
@pytest.mark.parametrize("unroll", [0, 1, 2, 3, 5, True, False, np.int32(0), np.int64(2)])
def test_scan_and_fori_unroll_accepted_like_jax(unroll):
    xs = np.arange(5.0, dtype=np.float32)

    def f(mod, xs):
        lax = mod[2]
        s = lax.scan(lambda c, x: (c * 0.5 + x, c), 0.0, xs, unroll=unroll)
        r = lax.fori_loop(0, 4, lambda i, c: c * 2 + i, 1, unroll=unroll)
        j = mod[0].jit(lambda xs: lax.scan(lambda c, x: (c + x, c * x), 1.0, xs, unroll=unroll,
                                         reverse=True))(xs)
        return s, r, j

    a = jax.jit(lambda xs: f((jax, jnp, jlax), xs))(xs)  # the oracle as one jitted program
    b = f((ftrans, fnp, flax), xs)
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        _close(u, v, rtol=1e-6)


@pytest.mark.parametrize("unroll, exc", [(-1, ValueError), (1.5, TypeError)])
def test_scan_bad_unroll_raises_like_jax(unroll, exc):
    for lax in (jlax, flax):
        with pytest.raises(exc):
            lax.scan(lambda c, x: (c + x, c), 0.0, np.arange(3.0), unroll=unroll)


@pytest.mark.parametrize("unroll, ok", [(None, True), (False, True), (1, True), (True, True),
                                        (0, False), (2, False)])
def test_fori_unroll_with_traced_bounds_like_jax(unroll, ok):
    for mod in (jax, ftrans):
        lax = jlax if mod is jax else flax
        f = mod.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c + i, 0, unroll=unroll))
        if ok:
            assert int(f(4)) == 6
        else:
            with pytest.raises(ValueError):
                f(4)


# ------------------------------------------------- 1: Python ints outside the default int
BIG = [2**31, 2**32, 2**40, -2**31 - 1, 2**63]
OVERFLOW_CASES = {
    "jit": lambda m, v: m[0].jit(lambda x: x)(v),
    "jit_pytree": lambda m, v: m[0].jit(lambda x: x[0])((1, v)),
    "jit_inside": lambda m, v: m[0].jit(lambda x: x * v)(1.0),
    "add_f32": lambda m, v: m[1].ones(3) + v,
    "radd_f32": lambda m, v: v + m[1].ones(3),
    "add_i32": lambda m, v: m[1].ones(3, "int32") + v,
    "uint32": lambda m, v: m[1].ones(3, "uint32") + v,
    "maximum": lambda m, v: m[1].maximum(m[1].ones(3), v),
    "where": lambda m, v: m[1].where(True, m[1].ones(3), v),
    "lax_add": lambda m, v: m[2].add(m[1].ones(3), v),
    "array": lambda m, v: m[1].array(v),
    "at_set": lambda m, v: m[1].ones(3).at[0].set(v),
    "grad": lambda m, v: m[0].grad(lambda x: x * v)(1.0),
}
FINE_CASES = {
    "array_f32": lambda m, v: m[1].array(v, dtype="float32"),
    "float32": lambda m, v: m[1].float32(v),
    "full_f32": lambda m, v: m[1].full(2, v, dtype="float32"),
    "jit_float": lambda m, v: m[0].jit(lambda x: x)(float(v)),
    "jit_static": lambda m, v: m[0].jit(lambda x, n: x + float(n), static_argnums=1)(1.0, v),
}


@pytest.mark.parametrize("case", sorted(OVERFLOW_CASES))
@pytest.mark.parametrize("value", BIG)
def test_big_python_int_overflows_like_jax(case, value):
    fn = OVERFLOW_CASES[case]
    with pytest.raises(OverflowError):
        fn((jax, jnp, jlax), value)
    with pytest.raises(errors.FtransOverflowError, match=str(value)):
        fn((ftrans, fnp, flax), value)


@pytest.mark.parametrize("case", sorted(FINE_CASES))
@pytest.mark.parametrize("value", BIG[:4])
def test_big_python_int_with_explicit_dtype_like_jax(case, value):
    _close(*_both(FINE_CASES[case], value))


@pytest.mark.parametrize("value", [2**31 - 1, -2**31, 0, -1])
def test_edge_python_ints_pass_like_jax(value):
    for case in ["jit", "jit_pytree", "add_i32", "array", "jit_inside"]:
        _close(*_both(OVERFLOW_CASES[case], value))


def test_big_python_int_under_x64_like_jax():
    with jax.enable_x64(True), _x64(True):
        for v in [2**62, -2**63, 2**40]:
            _close(jax.jit(lambda x: x)(v), ftrans.jit(lambda x: x)(v))
            _close(jnp.ones(2) + v, fnp.ones(2) + v)
        for v in [2**63, -2**63 - 1, 2**64 - 1]:
            with pytest.raises(OverflowError):
                jax.jit(lambda x: x)(v)
            with pytest.raises(errors.FtransOverflowError):
                ftrans.jit(lambda x: x)(v)
            with pytest.raises(errors.FtransOverflowError):
                fnp.ones(2, "uint64") + v


class _x64:
    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.old = ftrans.config.enable_x64
        ftrans.config.update("jax_enable_x64", self.on)

    def __exit__(self, *exc):
        ftrans.config.update("jax_enable_x64", self.old)


# ------------------------------------------------- 3: NumPy float64 into jit under transforms
HOF = {
    "jit": lambda m, x, y: m[0].jit(lambda a, b: a * b)(x, y),
    "jit_kw": lambda m, x, y: m[0].jit(lambda a, b: a * b)(x, b=y),
    "jit_nested": lambda m, x, y: m[0].jit(lambda a, b: m[0].jit(lambda c, d: c - d)(a, b) * b)(x, y),
    "cond": lambda m, x, y: m[2].cond(True, lambda a, b: a * b, lambda a, b: a + b, x, y),
    "switch": lambda m, x, y: m[2].switch(1, [lambda a, b: a * b, lambda a, b: a + b], x, y),
    "scan": lambda m, x, y: m[2].scan(lambda c, b: (c * b, c), x, np.array([2.0, 3.0]))[0] * y,
    "fori": lambda m, x, y: m[2].fori_loop(0, 2, lambda i, c: c * y, x),
    "checkpoint": lambda m, x, y: m[0].checkpoint(lambda a, b: a * b)(x, y),
}


_HOWS = ["vmap", "vmap_other", "jvp", "grad", "grad1", "jit", "eager"]
_WIDE = [np.float64, np.int64, np.float32]
# Every (function, transform) pair once, the argument dtype alternating over them (a Latin square):
# each transform and each function still meets every dtype, at a third of the full product's cost.
_WIDE_CASES = [(name, how, _WIDE[(i + j) % 3]) for i, name in enumerate(sorted(HOF)) for j, how in enumerate(_HOWS)]


@pytest.mark.parametrize("name, how, npdtype", _WIDE_CASES,
                         ids=[f"{n}-{h}-{d.__name__}" for n, h, d in _WIDE_CASES])
def test_numpy_wide_args_canonicalized_under_transforms(name, how, npdtype):
    f = HOF[name]
    y = npdtype(3)
    ya = np.arange(1, 4).astype(npdtype)

    def run(m):
        g = lambda x, y: f(m, x, y)  # noqa: E731
        if how == "vmap":
            return m[0].vmap(g, (0, None))(m[1].arange(3.0), y)
        if how == "vmap_other":
            return m[0].vmap(g, (None, 0))(2.0, ya)
        if how == "jvp":
            return m[0].jvp(g, (2.0, y), (1.0, np.float32(1) if npdtype != np.int64 else np.zeros((), jax.dtypes.float0)))
        if how == "grad":
            return m[0].grad(g)(2.0, y)
        if how == "grad1":
            if npdtype == np.int64:
                return 0.0
            return m[0].grad(g, 1)(2.0, y)
        if how == "jit":
            return m[0].jit(g)(2.0, y)
        return g(2.0, y)

    a, b = run((jax, jnp, jlax)), run((ftrans, fnp, flax))
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        u, v = np.asarray(u), np.asarray(v)
        assert u.shape == v.shape
        if u.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(u, v, rtol=1e-6)


# ------------------------------------------------- 8 / 10: static_argnums / static_argnames
def _f(x, y=2):
    return x * (10 if isinstance(y, int) else 1) * y


def _g(*a):
    return a[0] * (10 if isinstance(a[-1], int) else 1)


def _h(x, *, k=3):
    return x * k


def _kw(x, **kw):
    return x * kw.get("k", 1)


STATIC_CALLS = [
    (_f, dict(static_argnums=1), (1.0,), {}),
    (_f, dict(static_argnums=1), (1.0, 3), {}),
    (_f, dict(static_argnums=1), (1.0,), dict(y=3)),
    (_f, dict(static_argnums=-1), (1.0,), {}),
    (_f, dict(static_argnums=-1), (1.0, 4), {}),
    (_f, dict(static_argnames="y"), (1.0,), {}),
    (_f, dict(static_argnames="y"), (1.0, 4), {}),
    (_f, dict(static_argnames="y"), (1.0,), dict(y=5)),
    (_f, dict(static_argnums=1, static_argnames="y"), (1.0,), {}),
    (_g, dict(static_argnums=3), (1.0,), {}),
    (_g, dict(static_argnums=3), (1.0, 2, 3, 4, 5), {}),
    (_g, dict(static_argnums=-1), (1.0, 2), {}),
    (_g, dict(static_argnums=-1), (1.0, 2, 3), {}),
    (_g, dict(static_argnums=(0, -1)), (1.0, 2), {}),
    (_h, dict(static_argnames="k"), (1.0,), {}),
    (_h, dict(static_argnames="k"), (1.0,), dict(k=5)),
    (_kw, dict(static_argnames="k"), (1.0,), dict(k=5)),
    (_kw, dict(static_argnames="k"), (1.0,), {}),
    (lambda x, y=(1, 2): x * len(y), dict(static_argnames="y"), (1.0,), {}),
    (lambda x, y=[1]: x * len(y), dict(static_argnums=1), (1.0,), {}),
]


@pytest.mark.parametrize("i", range(len(STATIC_CALLS)))
def test_static_args_like_jax(i):
    fn, opts, args, kwargs = STATIC_CALLS[i]
    want = jax.jit(fn, **opts)(*args, **kwargs)
    jf = ftrans.jit(fn, **opts)
    _close(want, jf(*args, **kwargs))
    _close(want, jf(*args, **kwargs))  # the cached call agrees
    if not kwargs:
        _close(want, jf.lower(*args).compile()(*[a for j, a in enumerate(args)
                                                 if j not in jf._static_positions(len(args))]))


@pytest.mark.parametrize("fn, opts", [
    (_f, dict(static_argnums=5)), (_f, dict(static_argnums=2)), (_f, dict(static_argnums=-3)),
    (_f, dict(static_argnames="z")),
])
def test_bad_static_args_raise_value_error_like_jax(fn, opts):
    with pytest.raises(ValueError):
        jax.jit(fn, **opts)(1.0)
    with pytest.raises(errors.FtransValueError):
        ftrans.jit(fn, **opts)(1.0)


def test_static_argnums_of_missing_required_arg_is_the_functions_type_error():
    def k(x, y):
        return x

    with pytest.raises(TypeError):
        jax.jit(k, static_argnums=1)(1.0)
    with pytest.raises(TypeError, match="y"):
        ftrans.jit(k, static_argnums=1)(1.0)


# ------------------------------------------------- 9: copying jitted functions
def _module_fn(x, n=2):
    return x * n


@pytest.mark.parametrize("opts", [{}, dict(static_argnums=1), dict(donate_argnums=0)])
def test_copy_and_deepcopy_of_jit_like_jax(opts):
    import copy

    for mod in (jax, ftrans):
        jf = mod.jit(_module_fn, **opts)
        args = (np.float32(2.0), 3) if opts.get("static_argnums") else (np.float32(2.0),)
        for cp in (copy.copy(jf), copy.deepcopy(jf), copy.deepcopy({"f": [jf]})["f"][0]):
            assert cp is not jf
            assert float(cp(*args)) == float(_module_fn(*args))
            if mod is ftrans:  # (JAX's copies lose __name__)
                assert cp.__name__ == jf.__name__


def test_pickle_of_jit_roundtrips():
    import pickle

    jf = ftrans.jit(_module_fn, static_argnums=1)
    again = pickle.loads(pickle.dumps(jf))
    assert float(again(np.float32(2.0), 4)) == 8.0
    assert again._static_argnums == jf._static_argnums


# ------------------------------------------------- 5: size-1 broadcasting in binary lax ops
BINOPS = ["add", "sub", "mul", "div", "max", "min", "atan2", "nextafter", "pow", "complex", "eq",
          "lt", "ge", "ne", "rem"]
INT_BINOPS = ["bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_logical",
              "shift_right_arithmetic", "add", "rem"]
SHAPES = [((3, 1), (3, 4)), ((1, 4), (3, 1)), ((2, 1, 5), (1, 3, 1)), ((), (3, 4)), ((3, 4), ()),
          ((1,), (5,)), ((4,), (3, 4)), ((1,), (3, 4)), ((2, 4), (3, 4)), ((3, 1), (2, 1, 1))]


# The shapes jax accepts come in three kinds (size 1 on one side, on both sides, a scalar), two
# of each: every binop runs one of each kind, alternating between the two, plus all four shapes jax
# refuses (those compile nothing).  Each shape still meets half of the binops.
_OK_KINDS = [SHAPES[0:6:5], SHAPES[1:3], SHAPES[3:5]]
_BINOP_CASES = [(name, *kind[(i + k) % 2]) for i, name in enumerate(BINOPS) for k, kind in enumerate(_OK_KINDS)] + \
    [(name, sa, sb) for name in BINOPS for sa, sb in SHAPES[6:]]


def _binop_operands(sa, sb):
    rng = np.random.default_rng(1)
    return (rng.standard_normal(sa) + 2).astype(np.float32), (rng.standard_normal(sb) + 2).astype(np.float32)


@functools.cache
def _jax_binop_results(name):
    """jax's ``name`` at every shape pair of ``_BINOP_CASES`` it accepts (refusals: TypeError, from tracing
    alone), the values from one jitted program per op instead of an eager compile per shape pair."""
    op = getattr(jlax, name)
    ok, out = [], {}
    for n, sa, sb in _BINOP_CASES:
        if n != name:
            continue
        try:
            jax.eval_shape(op, *_binop_operands(sa, sb))
            ok.append((sa, sb))
        except TypeError:
            out[sa, sb] = TypeError
    values = jax.jit(lambda args: [op(a, b) for a, b in args])([_binop_operands(sa, sb) for sa, sb in ok])
    out.update(zip(ok, values))
    return out


@pytest.mark.parametrize("name, sa, sb", _BINOP_CASES)
def test_lax_binop_size1_broadcasting_matches_jax(name, sa, sb):
    a, b = _binop_operands(sa, sb)
    want = _jax_binop_results(name)[sa, sb]
    if want is TypeError:
        with pytest.raises(TypeError):
            getattr(jlax, name)(a, b)
        with pytest.raises(TypeError):
            getattr(flax, name)(a, b)
        with pytest.raises(TypeError):
            ftrans.jit(getattr(flax, name))(a, b)
        return
    _close(want, getattr(flax, name)(a, b), rtol=1e-5)
    _close(want, ftrans.jit(getattr(flax, name))(a, b), rtol=1e-5)


@pytest.mark.parametrize("name", INT_BINOPS)
def test_lax_int_binop_broadcasting_matches_jax(name):
    a = np.arange(3, dtype=np.int32).reshape(3, 1) + 1
    b = np.arange(4, dtype=np.int32).reshape(1, 4)
    _close(getattr(jlax, name)(a, b), getattr(flax, name)(a, b))


def test_lax_broadcasting_under_transforms_matches_jax():
    a = np.arange(1.0, 4.0, dtype=np.float32).reshape(3, 1)
    b = np.arange(1.0, 5.0, dtype=np.float32).reshape(1, 4)

    def f(m):
        lax = m[2]
        g = lambda a, b: lax.mul(lax.add(a, b), lax.max(a, b)).sum()  # noqa: E731
        return (m[0].grad(g, (0, 1))(a, b),
                m[0].jvp(lambda a, b: lax.sub(a, b), (a, b), (a, b)),
                m[0].vmap(lambda a, b: lax.div(a, b))(np.stack([a, a]), np.stack([b, b])),
                m[0].vmap(lambda a: lax.atan2(a, b), in_axes=1, out_axes=1)(np.ones((3, 2, 1), np.float32)))

    for u, v in zip(jax.tree_util.tree_leaves(f((jax, jnp, jlax))), jax.tree_util.tree_leaves(f((ftrans, fnp, flax)))):
        _close(u, v, rtol=1e-6)


def test_lax_select_and_clamp_do_not_broadcast_like_jax():
    p = np.ones((3, 1), bool)
    x = np.ones((3, 4), np.float32)
    for lax in (jlax, flax):
        with pytest.raises(TypeError):
            lax.select(p, x, x)
        with pytest.raises(TypeError):
            lax.clamp(np.zeros((3, 1), np.float32), x, x)


# ------------------------------------------------- 7: lax ops need one dtype; scalars are default-typed
ARRS = {"f32": np.ones(3, np.float32), "i32": np.ones(3, np.int32), "u8": np.ones(3, np.uint8),
        "f16": np.ones(3, np.float16), "bool": np.ones(3, bool), "f64": np.ones(3, np.float64),
        "i64": np.ones(3, np.int64)}


_SCALARS = [0, 0.0, True, 1j, np.float32(2), np.int32(2)]


_SCALAR_OPS = ["add", "mul", "max", "eq", "pow", "shift_left", "bitwise_and"]


@functools.cache
def _jax_scalar_results_all(arr, x64):
    """jax's ("ok", x op s, s op x) or ("TypeError",) for every op of ``_SCALAR_OPS`` and scalar s of ``_SCALARS``.

    Which pairs jax refuses comes from tracing alone (``eval_shape``); the values of the others come
    from one jitted program per array dtype and x64 mode, all ops together (jax's eager lax ops would
    compile two programs per scalar, and a program per op would compile seven where one does).
    """
    with jax.enable_x64(x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = jnp.asarray(ARRS[arr])
        ok = []
        for name in _SCALAR_OPS:
            op = getattr(jlax, name)
            for i, s in enumerate(_SCALARS):
                def both_orders(x, s=s, op=op, name=name):
                    return op(x, s), op(s, x) if name != "pow" else None
                try:
                    jax.eval_shape(both_orders, x)
                    ok.append((name, i, both_orders))
                except TypeError:
                    pass
        values = jax.jit(lambda x: [f(x) for _, _, f in ok])(x)
        found = {(name, i): v for (name, i, _), v in zip(ok, values)}
        return {name: [("ok", *found[name, i]) if (name, i) in found else ("TypeError", None, None)
                       for i in range(len(_SCALARS))] for name in _SCALAR_OPS}


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("arr", sorted(ARRS))
@pytest.mark.parametrize("name", _SCALAR_OPS)
def test_lax_python_scalar_dtypes_like_jax(x64, arr, name):
    def run(scalar):
        x = fnp.asarray(ARRS[arr])
        try:
            return "ok", getattr(flax, name)(x, scalar), getattr(flax, name)(scalar, x) if name != "pow" else None
        except TypeError:
            return "TypeError", None, None

    with jax.enable_x64(x64), _x64(x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wants = _jax_scalar_results_all(arr, x64)[name]
        for scalar, a in zip(_SCALARS, wants):  # every scalar kind against every array dtype and op
            b = run(scalar)
            assert a[0] == b[0], (scalar, a, b)
            if a[0] == "ok":
                _close(a[1], b[1])
                assert a[1].weak_type == b[1].weak_type, scalar
                if a[2] is not None:
                    _close(a[2], b[2])


@pytest.mark.parametrize("x64", [False, True])
def test_lax_scalar_strictness_under_jit_like_jax(x64):
    with jax.enable_x64(x64), _x64(x64):
        for mod, lax in ((jax, jlax), (ftrans, flax)):
            with pytest.raises(TypeError):
                mod.jit(lambda x: lax.add(x, 0))(np.ones(3, np.uint8))
            with pytest.raises(TypeError):
                mod.jit(lambda x: lax.clamp(0, x, 1))(np.ones(3, np.float32))
            out = mod.jit(lambda x: lax.add(x, 0))(np.ones(3, np.int64 if x64 else np.int32))
            assert out.dtype == (np.int64 if x64 else np.int32)


# ------------------------------------------------- 13: vmap in_axes given as a list
VMAP_CASES = [
    ("list2", lambda v, x: v(lambda a, b: a + b, in_axes=[0, None])(x, 1.0)),
    ("list1", lambda v, x: v(lambda a: a * 2, in_axes=[1])(x)),
    ("positional", lambda v, x: v(lambda a, b: a - b, [None, 0])(1.0, x)),
    ("dict_arg", lambda v, x: v(lambda d, y: d["a"] + d["b"] + y, [None, 0])({"a": 5.0, "b": np.ones(2)}, x[:, 0])),
    ("nested", lambda v, x: v(lambda a: a[0] + a[1], in_axes=[[0, None]])([x, 1.0])),
    ("tuple_in_list", lambda v, x: v(lambda a: a[0] * a[1], in_axes=[(0, None)])((x, 2.0))),
    ("dict_in_list", lambda v, x: v(lambda a, b: a["u"] + b, in_axes=[{"u": 1}, None])({"u": x}, 1.0)),
    ("out_list", lambda v, x: v(lambda a: [a, a], out_axes=[0, 1])(x)),
    ("under_grad", lambda v, x: v(ftrans.grad(lambda a, b: (a * b).sum()) if v is ftrans.vmap else
                                  jax.grad(lambda a, b: (a * b).sum()), in_axes=[0, None])(x, np.ones(2, np.float32))),
]


@pytest.mark.parametrize("i", range(len(VMAP_CASES)))
def test_vmap_in_axes_list_matches_jax(i):
    _, fn = VMAP_CASES[i]
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    for u, v in zip(jax.tree_util.tree_leaves(fn(jax.vmap, x)), jax.tree_util.tree_leaves(fn(ftrans.vmap, x))):
        _close(u, v)


@pytest.mark.parametrize("kw, exc", [
    (dict(in_axes={"a": 0}), TypeError), (dict(in_axes=(np.int64(0),)), TypeError),
    (dict(in_axes=[np.ones(2)]), TypeError), (dict(out_axes=(np.ones(2),)), TypeError),
    (dict(in_axes=1.5), TypeError),
])
def test_vmap_bad_axes_raise_when_applied_like_jax(kw, exc):
    with pytest.raises(exc):
        jax.vmap(lambda x: x, **kw)
    with pytest.raises(exc):
        ftrans.vmap(lambda x: x, **kw)


def test_vmap_list_length_mismatch_like_jax():
    x = np.ones((3, 2), np.float32)
    for v in (jax.vmap, ftrans.vmap):
        with pytest.raises(ValueError, match="len\\(in_axes\\)=1, len\\(args\\)=2"):
            v(lambda a, b: a + b, in_axes=[0])(x, x)


# ------------------------------------------------- 2: eager float sums as accurate as XLA's
def _rel_err(got, exact):
    return float(np.abs(np.asarray(got, np.float64) - exact).max() / np.abs(exact).max())


_RED_SHAPES = [(10000, 8), (8, 10000), (100000, 3), (300, 300), (20, 30, 40)]
_RED_AXES = [0, 1, -1, None]
_RED_NAMES = ["sum", "mean", "var", "std", "cumsum"]
# Every (shape, axis) pair with one of the reductions, chosen by a Latin square so that every (reduction,
# axis) pair meets a shape and every reduction meets four of the five shapes (20 of the 100; one summation
# rule per reduction, over more shapes); the thorough run takes two per pair by two Latin squares, so that
# every (reduction, axis) pair meets two shapes and every reduction every shape (40 of the 100).
_RED_CASES = [(shape, axis, _RED_NAMES[(i + j + k) % 5]) for i, shape in enumerate(_RED_SHAPES)
              for j, axis in enumerate(_RED_AXES) for k in ((0, 2) if THOROUGH else (0,))]


@pytest.mark.parametrize("shape, axis, name", _RED_CASES)
def test_eager_float32_reductions_as_accurate_as_xla(shape, axis, name):
    if name == "cumsum" and axis is None:
        axis = 0
    rng = np.random.default_rng(len(shape) + (axis or 0))
    x = (rng.standard_normal(shape) + 3).astype(np.float32)
    exact = getattr(np, name)(x.astype(np.float64), axis=axis)
    eager = getattr(fnp, name)(x, axis=axis)
    staged = ftrans.jit(lambda v: getattr(fnp, name)(v, axis=axis))(x)
    want = getattr(jnp, name)(x, axis=axis)
    assert eager.dtype == want.dtype == np.float32
    # XLA's own error on these is a few 1e-8..2e-7; a float32 running sum (NumPy along a
    # non-contiguous axis, and cumsum) drifted to 1e-6..1e-5.
    assert _rel_err(eager, exact) <= 1.5e-7 + 1.05 * _rel_err(want, exact)
    assert _rel_err(eager, np.asarray(want, np.float64)) < 5e-7
    assert _rel_err(eager, np.asarray(staged, np.float64)) < 5e-7
    # a strided view of the same values gives the same answer
    xs = np.asarray(fnp.asarray(np.asfortranarray(x)))
    assert _rel_err(getattr(fnp, name)(fnp.asarray(xs), axis=axis), exact) <= 1.5e-7 + 1.05 * _rel_err(want, exact)


_SUM_AXES = [(0,), (1,), (0, 2), None]


def _sum_input(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((50, 60, 70)) * 3 + 1)
    return (x + 1j * x[::-1] if dtype == "complex64" else x).astype(jnp.dtype(dtype))


@functools.cache
def _jax_sums(dtype):
    """jax's sums over every axes of ``_SUM_AXES``, from one jitted program per dtype."""
    return jax.jit(lambda x: [jnp.sum(x, axis=axes) for axes in _SUM_AXES])(_sum_input(dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "complex64", "float64", "int32"])
@pytest.mark.parametrize("axes", _SUM_AXES)
def test_eager_sums_of_other_dtypes_match_jax(dtype, axes):
    x = _sum_input(dtype)
    a, b = _jax_sums(dtype)[_SUM_AXES.index(axes)], fnp.sum(x, axis=axes)
    assert a.dtype == b.dtype and a.shape == b.shape
    t = {"float16": 2e-3, "bfloat16": 1e-2}.get(dtype, 2e-6)
    np.testing.assert_allclose(np.asarray(b, np.complex128), np.asarray(a, np.complex128), rtol=t, atol=t * 50)
    if axes != (0,):
        return  # the cumsum check does not depend on `axes`: once per dtype
    c = ftrans.jit(lambda v: fnp.cumsum(v, axis=1))(x)
    np.testing.assert_allclose(np.asarray(fnp.cumsum(x, axis=1), np.complex128), np.asarray(c, np.complex128),
                               rtol=t, atol=t * 50)


def test_choose_method_matches_jax():
    i = np.array([0, 1, 2, 1, 5])
    ch = [np.arange(5), np.arange(5) * 10, np.arange(5) * 100]
    for mode in ["clip", "wrap"]:
        _close(jnp.asarray(i).choose(ch, mode=mode), fnp.asarray(i).choose(ch, mode=mode))
        _close(jnp.asarray(i).choose(ch, mode=mode), ftrans.jit(lambda i: i.choose(ch, mode=mode))(i))


# ------------------------------------------------- ShapeDtypeStruct is Sized like an array
@pytest.mark.parametrize("shape", [(0, 2, 3), (4, 2, 3), (5,), ()])
def test_shape_dtype_struct_len_like_jax(shape):
    j = jax.ShapeDtypeStruct(shape=shape, dtype=jnp.float32)
    f = ftrans.ShapeDtypeStruct(shape=shape, dtype=fnp.float32)
    assert (f.ndim, f.size, str(f), repr(f)) == (j.ndim, j.size, str(j), repr(j))
    if shape:
        assert len(f) == len(j) == shape[0]
    else:
        with pytest.raises(TypeError):
            len(j)
        with pytest.raises(TypeError, match="unsized"):
            len(f)


@pytest.mark.parametrize("kw", [dict(shape=(4, 1)), dict(dtype=np.int32), dict(weak_type=True),
                                dict(shape=(6,), dtype=np.float16)])
def test_shape_dtype_struct_update_like_jax(kw):
    j = jax.ShapeDtypeStruct((2, 3), jnp.float32).update(**kw)
    f = ftrans.ShapeDtypeStruct((2, 3), fnp.float32).update(**kw)
    assert (f.shape, f.dtype, f.weak_type, f.size) == (j.shape, j.dtype, j.weak_type, j.size)
    assert ftrans.eval_shape(lambda x: x * 2, f).shape == j.shape


# ------------------------------------------------- signatures (parameter names) as JAX's
@pytest.mark.parametrize("name", ["real", "imag", "isposinf", "isneginf", "issubdtype", "quantile",
                                  "nanquantile", "percentile", "nanpercentile", "array"])
def test_signature_parameter_names_match_jax(name):
    import inspect

    got = list(inspect.signature(getattr(fnp, name)).parameters)
    want = list(inspect.signature(getattr(jnp, name)).parameters)
    if name == "array" and "args" not in want:  # jax 0.12 ended the positional copy/order/ndmin (ftrans: 0.10's)
        got.remove("args")
    assert got == want[:len(got)] and set(want) - set(got) <= {"out_sharding"}, (got, want)


def test_array_out_sharding_and_isposinf_out_like_jax():
    s = ftrans.sharding.SingleDeviceSharding(ftrans.devices()[0])
    np.testing.assert_array_equal(np.asarray(fnp.array([1.0, 2.0], out_sharding=s)), [1.0, 2.0])
    for mod in (jnp, fnp):
        with pytest.raises(ValueError, match="Only one of `device` or `out_sharding`|only one of `device`"):
            mod.array([1.0], device=(jax if mod is jnp else ftrans).devices()[0],
                      out_sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]) if mod is jnp else s)
        with pytest.raises(NotImplementedError):
            mod.isposinf(mod.ones(2), out=np.ones(2))
    with pytest.raises(TypeError):
        fnp.quantile(fnp.ones(3), 0.5, interpolation="linear")


# ------------------------------------------------- public names: every one of jax.numpy's (and jax.nn's) exists
# Nothing here compared whole namespaces before: ``test_numeric_signatures`` checks the parameters of the names
# that jax and ftrans *both* export (a name ftrans lacks is skipped, silently), and ``test_jnp_docstrings`` walks
# ftrans's own names. So ``jnp.top_k`` and ``jnp.minmax``, public since jax 0.11, went unnoticed. This test
# walks the installed jax's namespaces, so a name a new jax adds fails here until ftrans has it, or until it is
# listed below with the reason it is left out.
NAME_NAMESPACES = ["numpy", "numpy.linalg", "numpy.fft", "nn", "nn.initializers"]

# (namespace, name) -> why ftrans deliberately has no such name. Empty: every public name is there. An entry
# ftrans now has is stale and fails the test, so the list stays honest.
LEFT_OUT_NAMES: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("ns", NAME_NAMESPACES)
def test_public_names_of_jax_exist_in_ftrans(ns):
    import importlib

    j, f = importlib.import_module(f"jax.{ns}"), importlib.import_module(f"ftrans.{ns}")
    missing = sorted(n for n in dir(j) if not n.startswith("_") and not hasattr(f, n)
                     and (ns, n) not in LEFT_OUT_NAMES)
    assert missing == [], f"public jax.{ns} names ftrans lacks (add them, or list them in LEFT_OUT_NAMES)"
    stale = sorted(n for (s, n) in LEFT_OUT_NAMES if s == ns and hasattr(f, n))
    assert stale == [], f"LEFT_OUT_NAMES lists names ftrans.{ns} now has: {stale}"


def test_public_name_check_catches_a_missing_name(monkeypatch):
    """The check above is live: hiding ftrans's ``top_k`` makes it fail under a jax that has ``jnp.top_k``."""
    if not hasattr(jnp, "top_k"):
        pytest.skip("jax < 0.11 has no jnp.top_k")
    monkeypatch.delattr(fnp, "top_k")
    with pytest.raises(AssertionError, match="top_k"):
        test_public_names_of_jax_exist_in_ftrans("numpy")


# ------------------------------------------------- public names of jax's modules (jax 0.10 to 0.12, and later)
# Every public name of these jax modules is in the matching ftrans module (an attribute, or a submodule that
# imports), except the ones below, each left out on purpose with the reason; a name a newer jax adds fails
# here until it is implemented or listed.  ``jax.lax``'s ``*_p`` names are listed in
# tests/test_lax_prim_names.py (LEFT_OUT).
PARITY_MODULES = ["", "numpy", "lax", "scipy.special", "scipy.stats", "scipy.linalg", "nn", "nn.initializers",
                  "random", "numpy.linalg", "numpy.fft", "scipy.signal", "tree_util", "tree", "sharding",
                  "experimental", "debug", "image", "scipy.optimize", "scipy.integrate", "scipy.interpolate",
                  "scipy.ndimage", "scipy.spatial.transform", "scipy.fft", "scipy.cluster", "ops", "dtypes",
                  "errors", "stages", "export", "ffi", "profiler", "distributed", "extend.core", "ref",
                  "custom_derivatives", "typing", "monitoring", "dlpack", "flatten_util", "custom_batching"]
_INTERNALS = "jax's tracing machinery (trace stacks, tags, equation building), which ftrans's core does its own way"
NAMES_LEFT_OUT = {
    "": {
        "lib": "jaxlib's compiled extension modules (ftrans's runtime is ftrans.lowering)",
        "jax2tf_associative_scan_reductions": "a switch of jax2tf, the TensorFlow converter, which ftrans has not",
        "custom_remat": "jax 0.11 only (0.12 removed it)",
    },
    "sharding": {
        "UnreducedKind": "ftrans's unreduced values are partial sums only (UnreducedKind.sum); max/min kinds of "
                         "unreduced axes are not supported",
    },
    "experimental": {
        "EArray": "extended-dtype arrays exist only under jit in ftrans (docs/differences.md)",
        "cur_qdd": "jax 0.10's quasi-dynamic-data internals of mutable arrays (removed in 0.11)",
    },
    "profiler": {  # (tests/test_profiler.py) reading and writing XPlane profile data
        "ProfileData": "XPlane profile reading", "ProfileEvent": "XPlane profile reading",
        "ProfilePlane": "XPlane profile reading", "ProfileLine": "XPlane profile reading (jax 0.12)",
        "ProfileSession": "XPlane profile sessions (jax 0.12)", "export_profile_data": "XPlane profile data (jax 0.12)",
        "register_subprocess": "profiling of other processes",
    },
    "custom_derivatives": {"remat_opt_p": "jax's rematerialization of custom_vjp forward passes, not ftrans's"},
    "extend.core": {n: _INTERNALS for n in (
        "TraceTag", "find_top_trace", "get_opaque_trace_state", "set_current_trace", "take_current_trace",
        "nonempty_axis_env_DO_NOT_USE", "unsafe_am_i_under_a_jit_DO_NOT_USE", "unsafe_am_i_under_a_vmap_DO_NOT_USE",
        "unsafe_get_axis_names_DO_NOT_USE", "gensym", "new_jaxpr_eqn", "DebugInfo", "array_types", "call_impl",
        "concrete_or_error", "mapped_aval", "unmapped_aval", "create_call_primitive", "register_call_primitive_rules",
        "eval_jaxpr_transpose")},
}


@pytest.mark.parametrize("module", PARITY_MODULES)
def test_public_names_of_jax_modules_are_in_ftrans_or_left_out_on_purpose(module):
    import importlib

    from tests.test_lax_prim_names import LEFT_OUT as LAX_PRIMS_LEFT_OUT

    jm = importlib.import_module("jax" + ("." + module if module else ""))
    fname = "ftrans" + ("." + module if module else "")
    fm = importlib.import_module(fname)
    left_out = dict(NAMES_LEFT_OUT.get(module, {}))
    if module == "lax":
        left_out.update(dict.fromkeys(LAX_PRIMS_LEFT_OUT, "tests/test_lax_prim_names.py"))
    missing = []
    for name in sorted(n for n in dir(jm) if not n.startswith("_")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (deprecated names warn when read)
            if hasattr(fm, name):
                continue
        try:
            importlib.import_module(f"{fname}.{name}")
            continue
        except ImportError:
            pass
        if name not in left_out:
            missing.append(name)
    assert not missing, f"jax.{module or '(top level)'} names ftrans lacks (implement, or list in NAMES_LEFT_OUT " \
                        f"with the reason): {missing}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stale = sorted(n for n in NAMES_LEFT_OUT.get(module, {}) if hasattr(fm, n))
    assert not stale, f"NAMES_LEFT_OUT lists names {fname} now has (take them off the list): {stale}"
