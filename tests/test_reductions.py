"""Differential tests of ftrans.numpy reductions (and the lax reduction wrappers) against jax.

Every function runs eagerly and staged (make_jaxpr, typecheck, eval_jaxpr) and
is compared with jax on the same inputs: values, shapes, dtypes, weak types.
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


def _jax(module, fn, args):
    """``fn(module, *args)`` under ``jax.jit`` (one compile; eagerly jax compiles each operation apart): the
    array arguments traced, the others fixed.  jit keeps the outputs' weak types."""
    return _jax_all(module, [fn], args)[0]


def _jax_all(module, fns, args):
    """``[fn(module, *args) for fn in fns]`` as one ``jax.jit`` program (one compile for all of them)."""
    at = [i for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.generic))]

    def call(*arrays):
        full = list(args)
        for i, a in zip(at, arrays):
            full[i] = a
        return [fn(module, *full) for fn in fns]

    with host_oracle():  # ftrans's results compared with it are eager and eval_jaxpr's: host arithmetic
        return jax.jit(call)(*[args[i] for i in at])


def check_all(fns, *args, staged=True):
    """``check`` of each of ``fns`` (each a function, or ``(function, staged)``) on the same arguments, jax's
    side of all of them one compiled program."""
    fns = [f if isinstance(f, tuple) else (f, staged) for f in fns]
    for (fn, st_), exp in zip(fns, _jax_all(jnp, [f for f, _ in fns], args), strict=True):
        check(fn, *args, staged=st_, exp=exp)


def check(fn, *args, staged=True, exp=None):
    """``fn(module, *args)`` under ftrans (eager and staged) must match it under jax (``exp``: jax's result
    computed already)."""
    exp = _jax(jnp, fn, args) if exp is None else exp
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


def check_lax_all(fns, *args):
    """``check_lax`` of each of ``fns`` on the same arguments, jax's side one compiled program."""
    for fn, exp in zip(fns, _jax_all(jax.lax, fns, args), strict=True):
        check_lax(fn, *args, exp=exp)


def check_lax(fn, *args, exp=None):
    """The same for lax-level functions (``fn(lax_module, *args)``)."""
    exp = _jax(jax.lax, fn, args) if exp is None else exp
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


def _nonempty(x, axis):
    if axis is None:
        return x.size > 0
    axes = axis if isinstance(axis, tuple) else (axis,)
    return all(x.shape[a] > 0 for a in axes)


# ---------------------------------------------------------------- sum / prod / max / min / all / any
@given(st.data(), arrays(), st.booleans())
def test_sum_prod_all_any(data, x, keepdims):
    axis = data.draw(axis_for(x.ndim))
    fns = [lambda m, a, name=name: getattr(m, name)(a, axis=axis, keepdims=keepdims) for name in ("sum", "any")]
    if x.dtype != np.uint8 and x.dtype.kind != "i" or x.size <= 4:
        fns.append(lambda m, a: m.prod(a, axis=axis, keepdims=keepdims))
    check_all(fns, x)


@given(st.data(), arrays(nan=True), st.booleans())
def test_max_min_ptp(data, x, keepdims):
    axis = data.draw(axis_for(x.ndim))
    if not _nonempty(x, axis):
        for name in ("max", "min"):
            with pytest.raises(ValueError, match="zero-size array"):
                getattr(fnp, name)(x, axis=axis)
        return
    fns = [lambda m, a, name=name: getattr(m, name)(a, axis=axis, keepdims=keepdims) for name in ("max", "amin")]
    if x.dtype != np.bool_:
        fns.append(lambda m, a: m.ptp(a, axis=axis, keepdims=keepdims))
    check_all(fns, x)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.int8, np.bool_, BF16]))
def test_where_and_initial(data, x):
    axis = data.draw(axis_for(x.ndim))
    mask = data.draw(hnp.arrays(np.bool_, x.shape[-1:] if x.ndim else ()))
    check_all([lambda m, a, w: m.sum(a, axis=axis, where=w),
               lambda m, a, w: m.prod(a, axis=axis, where=w, initial=2),
               lambda m, a, w: m.max(a, axis=axis, where=w, initial=-3),
               lambda m, a, w: m.min(a, axis=axis, initial=3, where=w),
               lambda m, a, w: m.any(a, axis=axis, where=w),
               lambda m, a, w: m.all(a, axis=axis, where=w, keepdims=True)], x, mask)


@pytest.mark.parametrize("src", [np.int8, np.uint8, np.bool_, np.float16, BF16, np.int32])
def test_sum_prod_dtype_rules(src):
    x = np.array([[1, 0, 2], [3, 1, 1]]).astype(src)
    fns = []
    for dtype in (None, np.float32, np.int8, np.bool_):
        fns += [(lambda m, a, dtype=dtype: m.sum(a, axis=0, dtype=dtype, keepdims=True), dtype is None),
                (lambda m, a, dtype=dtype: m.prod(a, axis=1, dtype=dtype), dtype is None),
                (lambda m, a, dtype=dtype: m.cumsum(a, axis=1, dtype=dtype), dtype is None)]
    fns += [lambda m, a: m.sum(a, promote_integers=False), lambda m, a: m.cumprod(a)]
    check_all(fns, x)


def test_python_scalars_and_weak_inputs():
    for v in (2, 2.5, True):
        check(lambda m: m.sum(v), staged=False)
        check(lambda m: m.mean(v), staged=False)
        check(lambda m: m.max(v), staged=False)
        check(lambda m: m.argmax(v), staged=False)
    check(lambda m, a: m.sum(a * 2.0), np.float32(1.5))
    check(lambda m, a: m.sum(a), 3.0)
    check(lambda m, a: m.mean(a), 3)


def test_bfloat16_accumulates_in_float32():
    x = np.full((4096,), 1.0, BF16)
    check(lambda m, a: m.sum(a), x)
    check(lambda m, a: m.mean(a), x)
    check(lambda m, a: m.var(a), x)


# ---------------------------------------------------------------- mean / var / std / average
@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.int8, np.bool_, BF16, np.float16]),
       st.booleans())
def test_mean_var_std(data, x, keepdims):
    axis = data.draw(axis_for(x.ndim))
    ddof = data.draw(st.integers(0, 2))
    check_all([lambda m, a: m.mean(a, axis=axis, keepdims=keepdims),
               lambda m, a: m.var(a, axis=axis, ddof=ddof, keepdims=keepdims),
               lambda m, a: m.std(a, axis=axis, ddof=ddof, keepdims=keepdims)], x)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32], min_dims=1, min_side=1))
def test_mean_var_where_dtype(data, x):
    axis = data.draw(axis_for(x.ndim))
    mask = data.draw(hnp.arrays(np.bool_, x.shape))
    check_all([lambda m, a, w: m.mean(a, axis=axis, where=w), lambda m, a, w: m.var(a, axis=axis, where=w)], x, mask)
    check_all([lambda m, a: m.mean(a, axis=axis, dtype=np.float16), lambda m, a: m.std(a, axis=axis, correction=1)], x)


def test_var_complex_and_empty():
    z = (np.arange(6) + 1j * np.arange(6)[::-1]).astype(np.complex64).reshape(2, 3)
    check(lambda m, a: m.var(a, axis=1), z)
    check(lambda m, a: m.mean(a), np.zeros((0, 3), np.float32))
    check(lambda m, a: m.var(a, axis=0, ddof=1), np.ones((1, 3), np.float32))
    with pytest.raises(ValueError, match="ddof and correction"):
        fnp.var(np.ones(3), ddof=1, correction=1)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32], min_dims=1, min_side=1))
def test_average(data, x):
    axis = data.draw(axis_for(x.ndim, allow_tuple=False))
    check(lambda m, a: m.average(a, axis=axis), x)
    check(lambda m, a: m.average(a, axis=axis, returned=True), x)
    w = data.draw(hnp.arrays(np.float32, x.shape, elements=st.floats(0.5, 2, width=32)))
    check(lambda m, a, ww: m.average(a, axis=axis, weights=ww, returned=True), x, w)
    if axis is not None:
        w1 = np.linspace(0.5, 2, x.shape[axis]).astype(np.float32)
        check(lambda m, a, ww: m.average(a, axis=axis, weights=ww), x, w1)


# ---------------------------------------------------------------- argmax / argmin / count_nonzero
@given(st.data(), arrays(nan=True, min_dims=1, min_side=1))
def test_argmax_argmin(data, x):
    axis = data.draw(axis_for(x.ndim, allow_tuple=False))
    keepdims = data.draw(st.sampled_from([None, False, True]))
    check_all([lambda m, a: m.argmax(a, axis=axis, keepdims=keepdims),
               lambda m, a: m.argmin(a, axis=axis, keepdims=keepdims),
               lambda m, a: m.count_nonzero(a, axis=axis, keepdims=bool(keepdims))], x)


def test_argmax_nan_and_ties():
    x = np.array([[1, np.nan, 3, np.nan], [2, 2, -1, -1]], np.float32)
    check_all([lambda m, a: m.argmax(a, axis=1), lambda m, a: m.argmin(a, axis=-1),
               lambda m, a: m.nanargmax(a, axis=1), lambda m, a: m.nanargmin(a, axis=1)], x)
    with pytest.raises(ValueError, match="empty"):
        fnp.argmax(np.zeros((0,)))
    with pytest.raises(ValueError, match="empty"):
        fnp.argmin(np.zeros((2, 0)), axis=1)


# ---------------------------------------------------------------- cumulative
@given(st.data(), arrays(nan=True))
def test_cumsum_cumprod(data, x):
    axis = data.draw(axis_for(x.ndim, allow_tuple=False))
    fns = [lambda m, a: m.cumsum(a, axis=axis), lambda m, a: m.nancumsum(a, axis=axis)]
    if x.dtype.kind in "fb" or x.dtype == BF16 or x.size <= 6:
        fns.append(lambda m, a: m.cumprod(a, axis=axis))
    check_all(fns, x)


def test_cumulative_sum_array_api():
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    check(lambda m, a: m.cumulative_sum(a, axis=1), x)
    check(lambda m, a: m.cumulative_sum(a, axis=0, include_initial=True), x)
    check(lambda m, a: m.cumulative_prod(a, axis=-1, include_initial=True), x.astype(np.float32))
    with pytest.raises(ValueError, match="axis"):
        fnp.cumulative_sum(x)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.int8, BF16], min_dims=1, nan=True))
def test_lax_cumulative(data, x):
    axis = data.draw(st.integers(0, x.ndim - 1))
    reverse = data.draw(st.booleans())
    fns = [lambda m, a, name=name: getattr(m, name)(a, axis=axis, reverse=reverse) for name in ("cumsum", "cummax")]
    if x.dtype.kind == "f" or x.dtype == BF16:
        fns += [lambda m, a: m.cumlogsumexp(a, axis=axis, reverse=reverse),
                lambda m, a: m.cumprod(a, axis=axis, reverse=reverse)]
    check_lax_all(fns, x)


def test_lax_cumulative_errors():
    with pytest.raises(ValueError, match="dimension -1 is out of range"):
        flax.cumsum(np.ones((2, 3)), axis=-1)
    with pytest.raises(TypeError, match="cummax"):
        flax.cummax(np.array([True, False]))
    with pytest.raises(TypeError, match="cumlogsumexp"):
        flax.cumlogsumexp(np.arange(3))


# ---------------------------------------------------------------- median / nan-reductions
@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, BF16], min_dims=1, min_side=1, nan=True),
       st.booleans())
def test_median(data, x, keepdims):
    axis = data.draw(axis_for(x.ndim))
    check(lambda m, a: m.median(a, axis=axis, keepdims=keepdims), x)


@settings(max_examples=examples(6))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, BF16], min_dims=1, min_side=1, nan=True),
       st.booleans())
def test_nan_reductions(data, x, keepdims):
    axis = data.draw(axis_for(x.ndim))
    check_all([lambda m, a, name=name: getattr(m, name)(a, axis=axis, keepdims=keepdims)
               for name in ("nansum", "nanmax", "nanmean", "nanvar")], x)


def test_nan_reductions_fixed():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]], np.float32)
    for name in ("nansum", "nanmax", "nanmin", "nanmean", "nanprod", "nanvar", "nanstd"):
        check(lambda m, a: getattr(m, name)(a, axis=1), x)
    check(lambda m, a: m.nanstd(a, ddof=1), x)
    check(lambda m, a: m.nanmin(a, axis=0, initial=0.5), x)
    check(lambda m, a: m.nansum(a, axis=0, where=np.array([True, False, True])), x)


# ---------------------------------------------------------------- lax reductions
@settings(max_examples=examples(6))
@given(st.data(), arrays(min_dims=1, nan=True))
def test_lax_reductions(data, x):
    axes = tuple(sorted(data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True, max_size=x.ndim))))
    fns = []
    if x.dtype != np.bool_:
        fns.append(lambda m, a: m.reduce_sum(a, axes))
    if all(x.shape[a] > 0 for a in axes):
        fns += [lambda m, a: m.reduce_max(a, axes), lambda m, a: m.reduce_min(a, axes)]
    if x.dtype.kind in "iub":
        fns += [lambda m, a: m.reduce_or(a, axes), lambda m, a: m.reduce_and(a, axes),
                lambda m, a: m.reduce_xor(a, axes)]
    ax = data.draw(st.integers(0, x.ndim - 1))
    if x.shape[ax] > 0 and x.dtype != np.bool_:
        fns += [lambda m, a: m.argmax(a, ax, np.int32), lambda m, a: m.argmin(a, ax, np.uint8)]
    if fns:
        check_lax_all(fns, x)


# ---------------------------------------------------------------- errors
def test_bad_axis_errors():
    x = np.ones((2, 3), np.float32)
    for fn in (fnp.sum, fnp.max, fnp.mean, fnp.var, fnp.argmax, fnp.cumsum, fnp.median, fnp.any):
        with pytest.raises(ValueError, match=r"axis 2 .*dimension 2|axis 2 is out of bounds"):
            fn(x, axis=2)
    with pytest.raises(ValueError, match="axis -3"):
        fnp.prod(x, axis=-3)
    with pytest.raises(ValueError, match="repeated axis"):
        fnp.sum(x, axis=(0, -2))
    with pytest.raises(ValueError, match=r"reduction axes .*-1"):
        flax.reduce_sum(x, (-1,))
    with pytest.raises(ValueError, match="out of bounds"):
        ftrans.make_jaxpr(lambda a: fnp.sum(a, axis=5))(x)


def test_empty_and_where_errors():
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        fnp.max(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        fnp.min(np.zeros((2, 0)), axis=1)
    check(lambda m, a: m.max(a, axis=1, initial=-1.0), np.zeros((2, 0), np.float32))
    with pytest.raises(ValueError, match="where mask"):
        fnp.max(np.ones(3), where=np.array([True, False, True]))
    with pytest.raises(ValueError, match="where must be None or a boolean"):
        fnp.sum(np.ones(3), where=np.array([1, 0, 1]))
    with pytest.raises(ValueError, match="initial value must be a scalar"):
        fnp.sum(np.ones(3), initial=np.ones(2))
    with pytest.raises(NotImplementedError, match="out"):
        fnp.sum(np.ones(3), out=np.ones(()))
    with pytest.raises(TypeError, match="ptp"):
        fnp.ptp(np.array([True, False]))
    with pytest.raises(ValueError, match="std: dtype argument must be inexact"):
        fnp.std(np.ones(3), dtype=np.int32)


def test_primitive_type_errors():
    from ftrans.core.prims import reductions as R

    with pytest.raises(TypeError, match="reduce_sum: expects numeric"):
        ftrans.make_jaxpr(lambda a: R.reduce_sum_p.bind(a, axes=(0,)))(np.array([True]))
    with pytest.raises(TypeError, match="index_dtype must be an integer"):
        ftrans.make_jaxpr(lambda a: R.argmax_p.bind(a, axes=(0,), index_dtype=np.dtype(np.float32)))(np.ones(3))
    with pytest.raises(ValueError, match="argmax"):
        flax.argmax(np.ones((2, 0)), 1, np.int32)


def test_methods_forward():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = fnp.asarray(x)
    np.testing.assert_allclose(np.asarray(a.sum(axis=0)), x.sum(axis=0))
    np.testing.assert_allclose(np.asarray(a.mean()), x.mean())
    np.testing.assert_allclose(np.asarray(a.std(axis=1)), x.std(axis=1), rtol=1e-6)
    assert int(a.argmax()) == 5
    np.testing.assert_allclose(np.asarray(a.cumsum(axis=1)), x.cumsum(axis=1))
    np.testing.assert_allclose(np.asarray(a.max(axis=1, keepdims=True)), x.max(axis=1, keepdims=True))
