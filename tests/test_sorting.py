"""Differential tests of sorting, searching and uniqueness (ftrans.numpy and ftrans.lax) against jax.

Every function runs eagerly and staged (make_jaxpr, typecheck, eval_jaxpr),
except ``unique`` without ``size=``, which needs concrete input as in jax.
"""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax
from ftrans.core.ir import typecheck
from ftrans.errors import ConcretizationTypeError
from tests.backend_util import host_oracle
from tests.hypothesis_budget import examples

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.float32, np.int32, np.int8, np.uint8, np.bool_, BF16, np.float16]


# ---------------------------------------------------------------- helpers
def _flat(x):
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _flat(e)]
    return [x]


def _tol(dtype):
    return {np.dtype(np.float16): 2e-2, BF16: 5e-2}.get(np.dtype(dtype), 2e-5)


def _assert_leaf(got, exp, what):
    exp = exp if isinstance(exp, jax.Array) else jnp.asarray(exp)
    assert isinstance(got, ftrans.Array), f"{what}: expected an ftrans.Array, got {type(got)}"
    assert got.shape == exp.shape, f"{what}: shape {got.shape} != {exp.shape}"
    assert got.dtype == exp.dtype, f"{what}: dtype {got.dtype} != {exp.dtype}"
    assert got.weak_type == exp.weak_type, f"{what}: weak_type {got.weak_type} != {exp.weak_type}"
    g, e = np.asarray(got), np.asarray(exp)
    if e.dtype.kind in "fc" or e.dtype == BF16:
        t = _tol(e.dtype)
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=t, atol=t,
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(g, e, err_msg=what)


def _arrays(args):
    """NumPy inputs as ftrans Arrays, so an output that is an input comes back as an Array."""
    return [ftrans.Array._make(a) if isinstance(a, np.ndarray) else a for a in args]


def check(fn, *args, staged=True):
    """``fn(module, *args)`` under ftrans (eager and staged) must match it under jax."""
    exp = fn(jnp, *args)
    got = fn(fnp, *args)
    exp_l, got_l = _flat(exp), _flat(got)
    assert len(got_l) == len(exp_l)
    for g, e in zip(got_l, exp_l):
        _assert_leaf(g, e, "eager")
    if staged:
        closed = ftrans.make_jaxpr(lambda *a: fn(fnp, *a))(*args)
        typecheck(closed)
        for aval, e in zip(closed.out_avals, exp_l):
            e = e if isinstance(e, jax.Array) else jnp.asarray(e)
            assert (aval.shape, aval.dtype, aval.weak_type) == (e.shape, e.dtype, e.aval.weak_type), \
                f"staged aval {aval} vs jax {e.aval}"
        outs = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *_arrays(args))
        for g, e in zip(outs, exp_l):
            _assert_leaf(g, e, "staged")


def check_lax(fn, *args):
    """The same for lax-level functions (``fn(lax_module, *args)``)."""
    exp = fn(jax.lax, *args)
    got = fn(flax, *args)
    for g, e in zip(_flat(got), _flat(exp)):
        _assert_leaf(g, e, "eager")
    closed = ftrans.make_jaxpr(lambda *a: fn(flax, *a))(*args)
    typecheck(closed)
    for g, e in zip(ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *_arrays(args)), _flat(exp)):
        _assert_leaf(g, e, "staged")


def _elements(dtype, nan=False):
    d = np.dtype(dtype)
    if d == np.bool_:
        return st.booleans()
    if d.kind in "iu":
        info = np.iinfo(d)
        return st.integers(max(info.min, -20), min(info.max, 20))
    vals = st.floats(-8, 8, width=32).map(lambda v: float(np.float16(v)))
    return st.one_of(vals, st.just(float("nan"))) if nan else vals


@st.composite
def arrays(draw, dtypes=DTYPES, min_dims=0, max_dims=3, min_side=0, nan=False):
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=4))
    base = np.float32 if dtype == BF16 else dtype
    x = draw(hnp.arrays(base, shape, elements=_elements(dtype, nan)))
    return x.astype(dtype)


@st.composite
def axis_for(draw, ndim, allow_none=True, allow_tuple=True):
    opts = []
    if allow_none:
        opts.append(st.none())
    if ndim:
        opts.append(st.integers(-ndim, ndim - 1))
        if allow_tuple:
            opts.append(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).flatmap(
                lambda axes: st.tuples(*[st.sampled_from([a, a - ndim]) for a in axes])))
    if not opts:
        return None
    return draw(st.one_of(*opts))




SORTABLE = [np.float32, np.int32, np.int8, np.uint8, np.bool_, BF16, np.float16]


def _with_zeros(x):
    """Sprinkle -0.0 / +0.0 ties into float inputs (jax treats them as equal when sorting)."""
    if x.dtype.kind == "f" or x.dtype == BF16:
        x = x.copy()
        flat = x.reshape(-1)
        flat[::3] = np.array(-0.0, x.dtype)
        flat[1::4] = np.array(0.0, x.dtype)
    return x


# ---------------------------------------------------------------- sort / argsort
@settings(max_examples=examples(12))
@given(st.data(), arrays(dtypes=SORTABLE, min_dims=0, nan=True))
def test_sort_argsort(data, x):
    x = _with_zeros(x)
    axis = data.draw(st.sampled_from([None] + list(range(-x.ndim, x.ndim))))
    desc = data.draw(st.booleans())
    check(lambda m, a: m.sort(a, axis=axis, descending=desc), x)
    check(lambda m, a: m.argsort(a, axis=axis, descending=desc, stable=True), x)


def test_sort_nans_signed_zeros_and_weak():
    x = np.array([0.0, -0.0, np.nan, -np.nan, 1.0, -np.inf, 0.0, -0.0, np.inf], np.float32)
    check(lambda m, a: m.sort(a), x)
    check(lambda m, a: m.argsort(a), x)
    check(lambda m, a: m.argsort(a, descending=True), x)
    check(lambda m, a: m.sort(a * 1.0, axis=None), 2.0)
    check(lambda m, a: m.sort(a * 1.0), np.ones(3, np.float32) * 2.0)
    got = np.asarray(fnp.sort(x))
    assert np.array_equal(np.signbit(got[:5]), np.signbit(np.asarray(jnp.sort(x))[:5]))
    z = np.array([1 + 2j, 1 - 1j, np.nan, -1j], np.complex64)
    check(lambda m, a: m.sort(a), z)
    check(lambda m, a: m.argsort(a), z)
    check(lambda m, a: m.sort_complex(a), np.array([3.0, 1.0, 2.0], np.float32))


def test_argsort_stability():
    x = np.array([[2, 1, 2, 1, 0, 2], [5, 5, 5, 5, 5, 5]], np.int32)
    check(lambda m, a: m.argsort(a, axis=1), x)
    check(lambda m, a: m.argsort(a, axis=-1, descending=True), x)
    check(lambda m, a: m.argsort(a, axis=None), x)


def test_lexsort():
    k1 = np.array([1, 1, 0, 2, 1], np.int32)
    k2 = np.array([2.0, 1.0, 1.0, np.nan, 2.0], np.float32)
    check(lambda m, a, b: m.lexsort([a, b]), k1, k2)
    check(lambda m, a, b: m.lexsort((b, a)), k1, k2)
    check(lambda m, a: m.lexsort(a), np.stack([k1, k1[::-1]]))
    check(lambda m, a: m.lexsort([a], axis=0), np.arange(6, dtype=np.int8).reshape(3, 2)[::-1])
    # Scalar keys (e.g. a tuple of a 1-d array's elements): index 0, as JAX and NumPy.
    check(lambda m, a: m.lexsort(tuple(a)), k1, staged=False)
    check(lambda m, a: m.lexsort(a), k1)
    check(lambda m: m.lexsort((np.float32(2.0), np.float32(1.0))))


def test_sort_errors():
    with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of dimension 2"):
        fnp.sort(np.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="axis -3"):
        fnp.argsort(np.ones((2, 3)), axis=-3)
    with pytest.raises(NotImplementedError, match="order"):
        fnp.sort(np.ones(3), order="x")
    with pytest.raises(TypeError, match="lexsort"):
        fnp.lexsort([])


# ---------------------------------------------------------------- lax.sort / sort_key_val / top_k
@settings(max_examples=examples(12))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.bool_, BF16], min_dims=1, nan=True))
def test_lax_sort(data, x):
    x = _with_zeros(x)
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    vals = np.arange(x.size, dtype=np.int32).reshape(x.shape)
    check_lax(lambda m, a: m.sort(a, dimension=dim), x)
    check_lax(lambda m, a, b: m.sort((a, b), dimension=dim, num_keys=1), x, vals)
    check_lax(lambda m, a, b: m.sort([b % 2, a], dimension=dim, num_keys=2), x, vals)
    check_lax(lambda m, a, b: m.sort_key_val(a, b, dimension=dim), x, vals)


@settings(max_examples=examples(12))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.int8, BF16], min_dims=1, min_side=1, nan=True))
def test_top_k(data, x):
    k = data.draw(st.integers(0, x.shape[-1]))
    check_lax(lambda m, a: m.top_k(a, k), x)


def test_lax_sort_errors_and_structure():
    x = np.array([3.0, 1.0, 2.0], np.float32)
    out = flax.sort([x])
    assert isinstance(out, tuple) and len(out) == 1
    np.testing.assert_array_equal(np.asarray(out[0]), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="num_keys=2"):
        flax.sort([x], num_keys=2)
    with pytest.raises(TypeError, match="same shape"):
        flax.sort([x, np.ones(4)])
    with pytest.raises(ValueError, match="k argument"):
        flax.top_k(x, 4)
    with pytest.raises(TypeError, match="same shape"):
        ftrans.make_jaxpr(lambda a, b: flax.sort([a, b]))(x, np.ones((2, 3)))


# ---------------------------------------------------------------- searchsorted
@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, BF16], min_dims=1, max_dims=1, nan=True))
def test_searchsorted(data, a):
    a = np.sort(a.astype(np.float32)).astype(a.dtype)
    v = data.draw(arrays(dtypes=[np.float32, np.int32], max_dims=2, nan=True))
    side = data.draw(st.sampled_from(["left", "right"]))
    method = data.draw(st.sampled_from(["scan", "sort", "compare_all"]))
    check(lambda m, p, q: m.searchsorted(p, q, side=side, method=method), a, v)
    check(lambda m, p: m.searchsorted(p, 1.5, side=side), a)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32], min_dims=1, max_dims=1))
def test_searchsorted_sorter(data, a):
    """With sorter, ``a[sorter]`` is searched (a stays unsorted), as NumPy and JAX."""
    srt = np.argsort(a, kind="stable").astype(np.int32)
    v = data.draw(arrays(dtypes=[np.float32, np.int32], max_dims=2))
    side = data.draw(st.sampled_from(["left", "right"]))
    check(lambda m, p, q, s: m.searchsorted(p, q, side=side, sorter=s), a, v, srt)
    check(lambda m, p, s: m.asarray(p).searchsorted(2, side=side, sorter=s), a, srt)
    np.testing.assert_array_equal(np.asarray(fnp.searchsorted(a, v, side=side, sorter=srt)),
                                  np.searchsorted(a, v, side=side, sorter=srt))


def test_searchsorted_errors():
    with pytest.raises(ValueError, match="1-dimensional"):
        fnp.searchsorted(np.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="sorter must be a 1-d integer array"):
        fnp.searchsorted(np.ones(3), 1.0, sorter=np.ones(3))
    with pytest.raises(ValueError, match="side"):
        fnp.searchsorted(np.ones(3), 1.0, side="middle")


# ---------------------------------------------------------------- unique
def _unique_all(m, a, **kw):
    return m.unique(a, return_index=True, return_inverse=True, return_counts=True, **kw)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.int8, np.bool_], min_dims=0, nan=True))
def test_unique(data, x):
    if x.dtype.kind in "iu":
        x = x % 4
    check(lambda m, a: _unique_all(m, a), x, staged=False)
    size = data.draw(st.integers(1, 6))
    fill = data.draw(st.sampled_from([None, 7]))
    if x.size:
        check(lambda m, a: _unique_all(m, a, size=size, fill_value=fill), x)
    check(lambda m, a: m.unique(a, equal_nan=False), x, staged=False)


def test_unique_needs_size_under_tracing():
    x = np.array([3, 1, 1, 2], np.int32)
    with pytest.raises(ConcretizationTypeError, match="size"):
        ftrans.make_jaxpr(lambda a: fnp.unique(a))(x)
    closed = ftrans.make_jaxpr(lambda a: fnp.unique(a, size=3))(x)
    typecheck(closed)
    np.testing.assert_array_equal(np.asarray(ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x)[0]), [1, 2, 3])
    check(lambda m, a: m.unique(a, size=2, fill_value=0), np.zeros((0,), np.float32), staged=False)
    check(lambda m, a: _unique_all(m, a), np.zeros((0, 2), np.float32), staged=False)


@settings(max_examples=examples(8))
@given(st.data(), arrays(dtypes=[np.float32, np.int32], min_dims=1, max_dims=3))
def test_unique_along_an_axis(data, x):
    x = np.nan_to_num(x % 3 if x.dtype.kind == "i" else np.round(np.clip(x, -2, 2)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    check(lambda m, a: _unique_all(m, a, axis=axis), x, staged=False)
    if x.size:
        check(lambda m, a: _unique_all(m, a, axis=axis, size=4, fill_value=-1), x)


def test_unique_groups_nans_as_numpy_does():
    base = [-0.0, 0.0, 1.0, 1.0, np.nan, -np.nan]
    for x in (np.array(base, np.float32),
              np.array([complex(i, j) for i in base for j in base], np.complex64)):
        want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
        got = fnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
        for w, g in zip(want, got):
            g = np.asarray(g)
            assert w.shape == g.shape
            np.testing.assert_allclose(g.real, w.real, equal_nan=True)
            np.testing.assert_allclose(np.imag(g), np.imag(w), equal_nan=True)


# ---------------------------------------------------------------- primitive
def test_sort_primitive_rules():
    from ftrans.core.prims import sorting as So

    x = np.array([[2.0, np.nan, -0.0, 0.0]], np.float32)
    out = So.sort_p.bind(x, np.arange(4, dtype=np.int32).reshape(1, 4), dimension=1, is_stable=True, num_keys=1)
    np.testing.assert_array_equal(np.asarray(out[1]), [[2, 3, 0, 1]])
    assert x[0, 1] != x[0, 1], "impl must not mutate its input"
    with pytest.raises(ValueError, match="dimension -1"):
        ftrans.make_jaxpr(lambda a: So.sort_p.bind(a, dimension=-1, is_stable=True, num_keys=1))(x)
    with pytest.raises(ValueError, match="num_keys"):
        ftrans.make_jaxpr(lambda a: So.sort_p.bind(a, dimension=0, is_stable=True, num_keys=0))(x)
    with pytest.raises(TypeError, match="cumsum: expects numeric"):
        ftrans.make_jaxpr(lambda a: So.cumsum_p.bind(a, axis=0, reverse=False))(np.array([True]))
    with pytest.raises(TypeError, match="rank >= 1"):
        ftrans.make_jaxpr(lambda a: So.cumsum_p.bind(a, axis=0, reverse=False))(np.float32(1))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8, np.uint8, np.bool_])
def test_top_k_is_one_equation_in_xla_total_order(dtype):
    # lax.top_k binds one top_k equation lowered to chlo.top_k (as JAX): floats in XLA's total order
    # (NaN > inf, +0.0 > -0.0, a negative NaN lowest), equal entries lower index first, eagerly and
    # compiled; the result is a list, as JAX's.
    x = np.array([[0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, 1.0]] * 2, np.float32)
    x[1] = x[1][::-1]
    x = (x > 0) if dtype is np.bool_ else np.nan_to_num(x, nan=7, posinf=9, neginf=-9).astype(dtype) \
        if np.dtype(dtype).kind in "iu" else x.astype(dtype)
    want_device = jax.jit(lambda v: jax.lax.top_k(v, 5, axis=1))(x)
    with host_oracle():  # the eager call runs on the host (a GPU's NaNs have other payload bits)
        want_host = jax.jit(lambda v: jax.lax.top_k(v, 5, axis=1))(x)
    for got, want in ((flax.top_k(x, 5, axis=1), want_host),
                      (ftrans.jit(lambda v: flax.top_k(v, 5, axis=1))(x), want_device)):
        assert type(got) is list
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))
    assert [e.primitive.name for e in ftrans.make_jaxpr(lambda v: flax.top_k(v, 2, axis=0))(x).jaxpr.eqns] == ["top_k"]
    def ops(text):
        return [ln.strip() for ln in text.splitlines() if "chlo.top_k" in ln or "stablehlo.transpose" in ln]

    ours = ops(ftrans.jit(lambda v: flax.top_k(v, 2, axis=0)).lower(x).as_text())
    assert ours and ours == ops(jax.jit(lambda v: jax.lax.top_k(v, 2, axis=0)).lower(x).as_text())


def test_top_k_refuses_complex_operands_as_jax():
    x = np.ones(3, np.complex64)
    with pytest.raises(ValueError, match="top_k is not compatible with complex inputs"):
        jax.lax.top_k(x, 1)
    with pytest.raises(ValueError, match="top_k is not compatible with complex inputs"):
        flax.top_k(x, 1)
