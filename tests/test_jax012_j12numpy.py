"""jax 0.11/0.12's ``jax.numpy`` and ``jax.nn`` changes that ftrans follows whichever jax is installed.

- ``jnp.top_k`` and ``jnp.minmax`` (public since jax 0.11): checked against jax where it has them, else against
  NumPy. ``top_k(mode='smallest')`` ranks integers by ``~x`` (jax 0.12's fix: jax 0.11 negated, so the type's
  minimum, whose negation overflows to itself, came last); ``minmax`` takes ``initial`` as a pair and raises
  jax 0.12's errors;
- further hunks of jax 0.12's ``jax/_src/numpy`` and ``jax/_src/nn`` (see each section).

Each value is checked eagerly and under ``ftrans.jit`` (and ``vmap``/``grad`` where they apply).
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

JAX011 = jax.__version_info__ >= (0, 11)
JAX012 = jax.__version_info__ >= (0, 12)


def _eq(got, want):
    """Same values (NaN = NaN, and -0.0 != +0.0), dtype and shape."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _eq_tree(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _eq(g, w)


# ---------------------------------------------------------------- top_k
def _np_top_k(x, k, axis, mode):
    """NumPy's reference (for inputs without NaN or zeros): a stable sort, ties by index."""
    key = np.asarray(x).astype(np.float64)
    order = np.argsort(-key if mode == "largest" else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(np.asarray(x), idx, axis), idx.astype(np.int32)


TOP_K_CASES = [
    (np.float32([np.nan, 1.0, -0.0, 0.0, -np.inf, np.inf, np.nan, 2.0]), 5, -1),
    (np.float32([[3.0, 1.0, 2.0, 1.0], [-1.0, -5.0, 7.0, 0.5]]), 2, 1),
    (np.float32([[3.0, 1.0, 2.0, 1.0], [-1.0, -5.0, 7.0, 0.5]]), 1, 0),
    (np.int8([-128, 5, -128, 127, 0, -1]), 3, 0),
    (np.int32([np.iinfo(np.int32).min, 0, 7, np.iinfo(np.int32).max]), 2, -1),
    (np.uint8([0, 255, 3, 0, 254]), 3, -1),
    (np.array([True, False, True, False]), 3, -1),
    (np.array([1, 3, 1, 3, 1], np.int32), 4, -1),
    (np.float16([1, -2, 3, -2]), 2, -1),
    (np.arange(24, dtype=np.float32).reshape(2, 3, 4) % 5, 2, 1),
    (np.float32([4.0, 1.0]), 0, -1),
]

# jax 0.11 ranked integers for mode='smallest' by their negation, which overflows at the type's minimum (and
# bitwise_not(-128) is 127): the minimum came last.  jax 0.12 ranks by ~x, as ftrans.
_JAX011_SMALLEST_INT_MIN = {3, 4}


@pytest.mark.parametrize("mode", ["largest", "smallest"])
@pytest.mark.parametrize("i", range(len(TOP_K_CASES)))
def test_top_k_matches_jax_and_numpy(i, mode):
    x, k, axis = TOP_K_CASES[i]
    f = lambda v: fnp.top_k(v, k, axis=axis, mode=mode)  # noqa: E731
    got, got_jit = f(x), ftrans.jit(f)(x)
    _eq_tree(got, got_jit)
    if x.dtype.kind != "f" or not np.isnan(x).any() and not (x == 0).any():
        ref = _np_top_k(x, k, axis, mode)
        _eq(got[1], ref[1])
        _eq(got[0], ref[0])
    if JAX011 and not (not JAX012 and mode == "smallest" and i in _JAX011_SMALLEST_INT_MIN):
        _eq_tree(got, jjnp.top_k(x, k, axis=axis, mode=mode))


def test_top_k_smallest_puts_nan_last_and_minus_zero_first():
    x = np.float32([np.nan, 1.0, 0.0, -0.0, -np.inf, np.nan])
    vals, idx = fnp.top_k(x, 6, mode="smallest")
    _eq(vals, np.float32([-np.inf, -0.0, 0.0, 1.0, np.nan, np.nan]))
    _eq(idx, np.int32([4, 3, 2, 1, 0, 5]))
    vals, idx = fnp.top_k(x, 3)
    _eq(vals, np.float32([np.nan, np.nan, 1.0]))
    _eq(idx, np.int32([0, 5, 1]))


def test_top_k_vmap_and_grad_like_jax():
    x = np.float32([[3.0, 1.0, 2.0], [0.5, -2.0, 9.0]])
    got = ftrans.vmap(lambda v: fnp.top_k(v, 2, mode="smallest"))(x)
    _eq_tree(got, (np.float32([[1.0, 2.0], [-2.0, 0.5]]), np.int32([[1, 2], [1, 0]])))
    g = ftrans.grad(lambda v: fnp.top_k(v, 2, mode="smallest")[0].sum())(x[0])
    np.testing.assert_array_equal(np.asarray(g), [0.0, 1.0, 1.0])
    g = ftrans.grad(lambda v: (fnp.top_k(v, 1)[0] * 3.0).sum())(x[1])
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 3.0])
    if JAX011:
        jg = jax.grad(lambda v: jjnp.top_k(v, 2, mode="smallest")[0].sum())(x[0])
        np.testing.assert_array_equal(np.asarray(jg), [0.0, 1.0, 1.0])


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.top_k(m.array([1j, 2.0]), 1), ValueError),
    (lambda m: m.top_k(m.arange(3), 1, mode="big"), ValueError),
    (lambda m: m.top_k(m.arange(3), -1), ValueError),
    (lambda m: m.top_k(m.arange(3), 4), ValueError),
    (lambda m: m.top_k(m.arange(3), 1.0), TypeError),
    (lambda m: m.top_k(m.arange(6).reshape(2, 3), 1, axis=2), ValueError),
    (lambda m: m.top_k(m.array(1.0), 1), ValueError),
    (lambda m: m.top_k([3, 1, 2], 1), TypeError),
    (lambda m: m.top_k(m.arange(3), k=1), TypeError),
])
def test_top_k_errors_like_jax(call, exc):
    with pytest.raises(exc):
        call(fnp)
    if JAX011:
        with pytest.raises(exc):
            call(jjnp)


def test_top_k_signature_like_jax():
    import inspect

    def sig(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    assert [(n, d) for n, _, d in sig(fnp.top_k)][1:] == [("k", inspect.Parameter.empty), ("axis", -1),
                                                          ("mode", "largest"), ("sorted", True)]
    if JAX011:
        assert sig(fnp.top_k) == sig(jjnp.top_k)


# ---------------------------------------------------------------- minmax
X = np.int32([[2, 5, 1, 6], [3, -7, -2, 4], [8, -4, 1, -3]])
XF = np.float32([[2.5, np.nan, 1.0], [-3.0, 4.0, 0.5]])

MINMAX_CASES = [
    (X, {}),
    (X, {"axis": 0, "keepdims": True}),
    (X, {"axis": (0, 1)}),
    (X, {"axis": [1]}),
    (X, {"axis": -1}),
    (X, {"initial": 0}),
    (X, {"axis": 1, "initial": (0, 5)}),
    (X, {"initial": (-9.5, 9.5)}),
    (X, {"initial": (None, 50)}),
    (X, {"axis": 1, "where": X > 0, "initial": (100, -100)}),
    (X, {"axis": 0, "where": np.array([True, False, True, False]), "initial": (100, -100)}),
    (np.zeros((0, 3), np.float32), {"axis": 0, "initial": (1.0, 2.0)}),
    (np.zeros((0, 3), np.float32), {"axis": 1}),
    (XF, {}),
    (XF, {"axis": 1}),
    (np.array([True, False]), {}),
    (np.array([True, False]), {"where": np.array([True, False]), "initial": (True, False)}),
    (np.array([1 + 2j, 1 - 1j, -1 + 0j], np.complex64), {}),
    (np.uint8([3, 200]), {"where": np.array([True, False]), "initial": (255, 0)}),
    (np.float16([1, 2, -3]), {"axis": 0}),
    (np.float32([np.inf, -np.inf]), {"initial": (0.0, 0.0)}),
    (3.0, {}),
    (np.arange(24, dtype=np.float32).reshape(2, 3, 4), {"axis": (0, 2), "keepdims": True}),
]


def _np_minmax(x, axis=None, keepdims=False, initial=None, where=None):
    init_min, init_max = initial if isinstance(initial, tuple) else (initial, initial)
    x = np.asarray(x)
    axis = tuple(axis) if isinstance(axis, list) else axis
    kw = dict(axis=axis, keepdims=keepdims)
    if where is not None:
        kw["where"] = where
    lo = np.min(x, **kw, **({} if init_min is None else {"initial": np.asarray(init_min).astype(x.dtype)}))
    hi = np.max(x, **kw, **({} if init_max is None else {"initial": np.asarray(init_max).astype(x.dtype)}))
    return np.asarray(lo, x.dtype), np.asarray(hi, x.dtype)


@pytest.mark.parametrize("i", range(len(MINMAX_CASES)))
def test_minmax_matches_jax_and_numpy(i):
    x, kw = MINMAX_CASES[i]
    got = fnp.minmax(x, **kw)
    assert isinstance(got, tuple) and len(got) == 2
    _eq_tree(ftrans.jit(lambda v: fnp.minmax(v, **kw))(x), got)
    if np.asarray(x).dtype.kind != "c":
        ref = _np_minmax(x, **kw)
        _eq(got[0], ref[0].astype(np.asarray(got[0]).dtype))
        _eq(got[1], ref[1].astype(np.asarray(got[1]).dtype))
    if JAX011:
        _eq_tree(got, jjnp.minmax(x, **kw))


def test_minmax_is_the_pair_of_min_and_max_under_transforms():
    x = np.float32([1.0, 3.0, 2.0, 3.0])
    g = ftrans.grad(lambda v: sum(fnp.minmax(v)))(x)
    np.testing.assert_array_equal(np.asarray(g), [1.0, 0.5, 0.0, 0.5])
    got = ftrans.vmap(lambda v: fnp.minmax(v))(XF)
    _eq_tree(got, (np.float32([np.nan, -3.0]), np.float32([np.nan, 4.0])))
    if JAX011:
        np.testing.assert_array_equal(np.asarray(jax.grad(lambda v: sum(jjnp.minmax(v)))(x)), np.asarray(g))


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.minmax(m.asarray(X), where=X > 0), ValueError),
    (lambda m: m.minmax(m.asarray(X), where=X > 0, initial=(None, 5)), ValueError),
    (lambda m: m.minmax(m.zeros((0, 3)), axis=0), ValueError),
    (lambda m: m.minmax(m.zeros((0, 3)), axis=0, initial=(None, 1.0)), ValueError),
    (lambda m: m.minmax(m.asarray(X), out=np.zeros(2)), NotImplementedError),
    (lambda m: m.minmax(m.asarray(X), initial=(m.zeros(2), 1)), ValueError),
    (lambda m: m.minmax(m.asarray(X), initial=[0, 5]), TypeError),
    (lambda m: m.minmax([1, 2, 3]), TypeError),
    (lambda m: m.minmax(m.asarray(X), axis=2), ValueError),
])
def test_minmax_errors_like_jax(call, exc):
    with pytest.raises(exc):
        call(fnp)
    if JAX011:
        with pytest.raises(exc):
            call(jjnp)


# ---------------------------------------------------------------- atleast_nd: several inputs give a tuple
@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
def test_atleast_nd_of_several_inputs_is_a_tuple_as_jax012(name):
    """jax 0.12 (and NumPy 2) return a tuple for several inputs or none; jax 0.10 and 0.11 returned a list."""
    f = getattr(fnp, name)
    x, y = np.float32(1.0), np.arange(4, dtype=np.int32)
    got = f(x, y)
    assert type(got) is tuple and len(got) == 2
    assert f() == ()
    staged = ftrans.jit(lambda a, b: f(a, b))(x, y)
    assert type(staged) is tuple
    ndim = int(name[-2])
    for g, s, v in zip(got, staged, (x, y)):
        want = getattr(np, name)(v)
        _eq(g, want.astype(g.dtype))
        _eq(s, want.astype(g.dtype))
        assert np.ndim(g) >= ndim
    if JAX012:
        want = getattr(jjnp, name)(x, y)
        assert type(want) is tuple
        _eq_tree(got, want)
        assert getattr(jjnp, name)() == ()


# ---------------------------------------------------------------- nonzero: the fill value sets a strong dtype
NZ_X = np.array([[0, 1], [2, 0]], np.int32)
NONZERO_CASES = [
    ("nonzero", {"size": 3, "fill_value": -1.5}, np.float32),
    ("nonzero", {"size": 3, "fill_value": (1.5, 2)}, np.float32),
    ("nonzero", {"size": 3, "fill_value": 1j}, np.complex64),
    ("nonzero", {"size": 3, "fill_value": np.nan}, np.float32),
    ("nonzero", {"size": 3, "fill_value": np.float16(2)}, np.float16),
    ("nonzero", {"size": 3, "fill_value": 7}, np.int32),
    ("nonzero", {"size": 3, "fill_value": True}, np.int32),
    ("nonzero", {"size": 3, "fill_value": np.uint8(3)}, np.int32),
    ("nonzero", {"size": 0, "fill_value": 1.5}, np.float32),
    ("nonzero", {"fill_value": 1.5}, np.float32),
    ("flatnonzero", {"size": 5, "fill_value": 1.5}, np.float32),
    ("argwhere", {"size": 3, "fill_value": 1.5}, np.float32),
    ("argwhere", {"size": 3, "fill_value": (1.5, 2)}, np.float32),
]


def _nonzero_ref(name, x, size=None, fill_value=None):
    """NumPy's indices, truncated or padded to ``size`` with ``fill_value``."""
    cols = np.nonzero(np.ravel(x) if name == "flatnonzero" else x)
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(cols)
    n = len(cols[0]) if size is None else size
    cols = [np.concatenate([c[:n], np.full(max(0, n - len(c)), f if f is not None else 0)]) for c, f in
            zip(cols, fills)]
    if name == "argwhere":
        return np.stack(cols, axis=1)
    return cols[0] if name == "flatnonzero" else tuple(cols)


@pytest.mark.parametrize("i", range(len(NONZERO_CASES)))
def test_nonzero_fill_value_sets_a_strong_dtype_as_jax012(i):
    """jax 0.12: the indices take ``result_type(default int, *fill values)``, strongly typed, the same for every
    axis (jax 0.10/0.11: a float fill gave weak float indices, and a tuple of fills a dtype per axis; ftrans's
    argwhere of mixed fills was even float64)."""
    name, kw, dt = NONZERO_CASES[i]
    f = lambda v: getattr(fnp, name)(v, **kw)  # noqa: E731
    got = f(NZ_X)
    outs = got if isinstance(got, tuple) else (got,)
    ref = _nonzero_ref(name, NZ_X, **kw)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for g, r in zip(outs, refs):
        assert g.dtype == dt and not g.weak_type, (g.dtype, g.weak_type)
        _eq(g, r.astype(dt))
    if "size" in kw:
        staged = ftrans.jit(f)(NZ_X)
        _eq_tree(staged if isinstance(staged, tuple) else (staged,), outs)
        assert all(not s.weak_type for s in (staged if isinstance(staged, tuple) else (staged,)))
    if JAX012:
        want = getattr(jjnp, name)(NZ_X, **kw)
        wants = want if isinstance(want, tuple) else (want,)
        _eq_tree(outs, wants)
        assert [w.weak_type for w in wants] == [g.weak_type for g in outs]


def test_nonzero_fill_value_errors_and_vmap():
    with pytest.raises(ValueError, match="length equal to number of axes"):
        fnp.nonzero(NZ_X, size=3, fill_value=(1, 2, 3))
    with pytest.raises(ValueError, match="scalar"):
        fnp.nonzero(NZ_X, size=3, fill_value=np.ones(2))
    got = ftrans.vmap(lambda v: fnp.nonzero(v, size=3, fill_value=-1.5))(NZ_X)
    _eq_tree(got, (np.float32([[1, -1.5, -1.5], [0, -1.5, -1.5]]),))
    if JAX012:
        _eq_tree(got, jax.vmap(lambda v: jjnp.nonzero(v, size=3, fill_value=-1.5))(NZ_X))


# ---------------------------------------------------------------- svd(hermitian=True) at a zero eigenvalue
SVD_HERM_CASES = [
    np.diag([2.0, -3.0, 0.0, 1.0]).astype(np.float32),
    np.zeros((2, 2), np.float32),
    np.float32([[1.0, 1.0], [1.0, 1.0]]),  # eigenvalues 0 and 2
    np.stack([np.diag([0.0, -1.0]), np.diag([4.0, 0.0])]).astype(np.float32),
    np.diag([0.0, 2.0 + 0j]).astype(np.complex64),
]


@pytest.mark.parametrize("i", range(len(SVD_HERM_CASES)))
def test_svd_hermitian_keeps_the_vector_of_a_zero_eigenvalue_as_jax012(i):
    """jax 0.12: a zero eigenvalue's sign is +1, so ``U @ diag(S) @ Vh`` is ``a`` and ``Vh`` is unitary (jax 0.10
    and 0.11 took ``sign(0) = 0`` and zeroed that row of ``Vh``)."""
    a = SVD_HERM_CASES[i]
    for u, s, vh in (fnp.linalg.svd(a, hermitian=True), ftrans.jit(lambda m: fnp.linalg.svd(m, hermitian=True))(a)):
        u, s, vh = np.asarray(u), np.asarray(s), np.asarray(vh)
        np.testing.assert_allclose(u @ (s[..., :, None] * vh), a, atol=1e-5)
        eye = np.broadcast_to(np.eye(a.shape[-1]), a.shape)
        np.testing.assert_allclose(vh @ np.conj(np.swapaxes(vh, -1, -2)), eye, atol=1e-5)
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=1e-5)
    if JAX012:
        _eq_tree(fnp.linalg.svd(a, hermitian=True), jjnp.linalg.svd(a, hermitian=True))


# ---------------------------------------------------------------- ufunc.reduceat(dtype=)
REDUCEAT_CASES = [
    ("add", np.uint8([200, 100, 50, 7]), [0, 2], np.int32),
    ("multiply", np.float32([1.5, 2.5, 3.5]), [0, 1], np.int32),
    ("add", np.int32([1, 2, 3, 4, 5]), [0, 3, 1], np.float32),
    ("maximum", np.float32([[1.5, -2.5], [0.5, 4.0]]), [1, 0], np.int8),
    ("add", np.bool_([True, True, False, True]), [0, 2], np.int32),
]


@pytest.mark.parametrize("i", range(len(REDUCEAT_CASES)))
def test_ufunc_reduceat_dtype_converts_the_input_first_as_jax012(i):
    """jax 0.12 converts ``a`` to ``dtype`` before reducing; jax 0.10 and 0.11 ignored ``dtype`` (uint8 sums
    wrapped around, the result kept ``a``'s dtype)."""
    name, a, idx, dt = REDUCEAT_CASES[i]
    got = getattr(fnp, name).reduceat(a, np.int32(idx), dtype=dt)
    staged = ftrans.jit(lambda v: getattr(fnp, name).reduceat(v, np.int32(idx), dtype=dt))(a)
    want = getattr(np, name).reduceat(a.astype(dt), idx).astype(dt)  # (NumPy sums int32 in int64)
    _eq(got, want)
    _eq(staged, want)
    if JAX012:
        _eq(got, getattr(jjnp, name).reduceat(a, np.int32(idx), dtype=dt))


# ---------------------------------------------------------------- x.at[idx].get(strategy=)
AT_X = np.arange(24, dtype=np.int32).reshape(4, 6)
STRATEGY_OK = [
    ((slice(1, 3),), "static_slice", {}),
    ((2, slice(None, None, 2)), "static_slice", {}),
    ((-1, None, Ellipsis), "static_slice", {}),
    ((7,), "static_slice", {"mode": "clip"}),
    ((2,), "dynamic_slice", {}),
    ((np.int32(2), slice(1, 4)), "dynamic_slice", {}),
    ((slice(None), slice(None, None, -1)), "dynamic_slice", {}),
    ((np.array(9),), "dynamic_slice", {"mode": "clip"}),
    ((slice(1, 3), 2), "gather", {}),
    ((np.array([3, 0]),), "gather", {}),
    ((np.array([3, 0]),), "auto", {}),
]


@pytest.mark.parametrize("i", range(len(STRATEGY_OK)))
def test_at_get_strategy_reads_the_same_values_as_jax012(i):
    """jax 0.12's ``x.at[idx].get(strategy=)`` picks the operation that reads ``x[idx]``; the values do not
    change."""
    idx, strategy, kw = STRATEGY_OK[i]
    want = fnp.asarray(AT_X).at[idx].get(**kw)
    got = fnp.asarray(AT_X).at[idx].get(strategy=strategy, **kw)
    staged = ftrans.jit(lambda v: v.at[idx].get(strategy=strategy, **kw))(AT_X)
    _eq(got, want)
    _eq(staged, want)
    if JAX012:
        _eq(got, jjnp.asarray(AT_X).at[idx].get(strategy=strategy, **kw))


def test_at_get_strategy_picks_the_operation():
    def prims(strategy, idx):
        jaxpr = ftrans.make_jaxpr(lambda v: v.at[idx].get(strategy=strategy))(AT_X)
        return {e.primitive.name for e in jaxpr.jaxpr.eqns}

    assert "gather" in prims("gather", (slice(1, 3),))
    assert "gather" not in prims("static_slice", (slice(1, 3),))
    assert "dynamic_slice" in prims("dynamic_slice", (1,))
    traced = ftrans.make_jaxpr(lambda v, i: v.at[i, 1:3].get(strategy="dynamic_slice"))(AT_X, 2)
    assert "dynamic_slice" in {e.primitive.name for e in traced.jaxpr.eqns}


STRATEGY_BAD = [
    ((np.array([1, 3]),), "static_slice", {}, TypeError),
    ((np.array(1),), "static_slice", {}, TypeError),
    ((np.array([True, False, True, False]),), "static_slice", {}, TypeError),
    ((7,), "static_slice", {}, IndexError),
    ((1,), "static_slice", {"mode": "fill"}, ValueError),
    ((np.array([1, 2]),), "dynamic_slice", {}, TypeError),
    ((slice(None), slice(None, None, 2)), "dynamic_slice", {}, TypeError),
    ((np.array([True, False, True, False]),), "dynamic_slice", {}, TypeError),
    ((1,), "dynamic_slice", {"mode": "fill"}, ValueError),
    ((1,), "foo", {}, ValueError),
    ((1,), "scatter", {}, ValueError),
    ((1,), 3, {}, TypeError),
]


@pytest.mark.parametrize("i", range(len(STRATEGY_BAD)))
def test_at_get_strategy_refuses_what_it_cannot_read_like_jax012(i):
    idx, strategy, kw, exc = STRATEGY_BAD[i]
    with pytest.raises(exc):
        fnp.asarray(AT_X).at[idx].get(strategy=strategy, **kw)
    if JAX012:
        with pytest.raises(exc):
            jjnp.asarray(AT_X).at[idx].get(strategy=strategy, **kw)


def test_at_get_strategy_with_a_traced_index():
    f = ftrans.jit(lambda v, i: v.at[i].get(strategy="static_slice"))
    with pytest.raises(TypeError, match="static_slice"):
        f(AT_X, 2)
    got = ftrans.jit(lambda v, i: v.at[ftrans.ds(i, 2)].get(strategy="dynamic_slice"))(AT_X, 1)
    _eq(got, AT_X[1:3])


# ---------------------------------------------------------------- nn: mxfp4, and block scales in float32
def test_mxfp4_config_as_jax012():
    import ml_dtypes

    import ftrans.nn as fnn

    f = fnn.get_scaled_dot_general_config("mxfp4")
    assert (f.mode, f.block_size, np.dtype(f.data_type), np.dtype(f.scale_type), f.global_scale, f.infer_only) == (
        "mxfp4", 32, np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(ml_dtypes.float8_e8m0fnu), None, False)
    with pytest.raises(ValueError, match="global_scale"):
        fnn.get_scaled_dot_general_config("mxfp4", global_scale=fnp.array([0.5], fnp.float32))
    if JAX012:
        j = jax.nn.get_scaled_dot_general_config("mxfp4")
        assert (j.mode, j.block_size, np.dtype(j.data_type), np.dtype(j.scale_type), j.global_scale) == (
            f.mode, f.block_size, np.dtype(f.data_type), np.dtype(f.scale_type), f.global_scale)
        with pytest.raises(ValueError, match="global_scale"):
            jax.nn.get_scaled_dot_general_config("mxfp4", global_scale=jjnp.array([0.5], jjnp.float32))


def _np_quantize(x, mode):
    """NumPy's reference of the mx recipes (jax 0.12's): per 32-element block, the e8m0 power of two at least
    ``amax / MAX`` (computed in float32), the values divided by it in float32, clipped, rounded to the type."""
    import ml_dtypes

    dt = ml_dtypes.float8_e4m3fn if mode == "mxfp8" else ml_dtypes.float4_e2m1fn
    big = np.float32(ml_dtypes.finfo(dt).max)
    xb = np.asarray(x, np.float32).reshape(x.shape[:-1] + (x.shape[-1] // 32, 32))
    ratio = np.max(np.abs(xb), axis=-1, keepdims=True) / big
    scale = np.where(ratio > 0, 2.0 ** np.ceil(np.log2(np.where(ratio > 0, ratio, 1))), 2.0 ** -127).astype(np.float32)
    q = np.clip(xb / scale, -big, big).astype(dt).astype(np.float32)
    return (q * scale).reshape(x.shape)


@pytest.mark.parametrize("mode", ["mxfp8", "mxfp4"])
@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_mx_scaled_dot_general_quantizes_in_float32_as_jax012(mode, dtype):
    """The forward product is the float32 product of the quantized operands, whose block scales jax 0.12 takes
    in float32 for every input dtype (in bfloat16, a block whose largest value is 6 got the mxfp4 scale 2, so
    its 1.5 became 2 and its 0.5 became 0)."""
    import ml_dtypes

    import ftrans.nn as fnn

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 64)).astype(dt)
    x[0, 0, :32] = np.float32([6.0, 1.5, 0.5, -3.0] * 8).astype(dt)  # exact in e2m1 with the scale 1
    y = rng.standard_normal((2, 4, 64)).astype(dt)
    dn = (((2,), (2,)), ((0,), (0,)))
    cfg = [fnn.get_scaled_dot_general_config(mode)] * 2 + [fnn.get_scaled_dot_general_config("mxfp8")]
    want = np.einsum("bmk,bnk->bmn", _np_quantize(x, mode).astype(np.float64), _np_quantize(y, mode).astype(np.float64))
    for got in (fnn.scaled_dot_general(x, y, dn, preferred_element_type=np.float32, configs=cfg),
                ftrans.jit(lambda a, b: fnn.scaled_dot_general(a, b, dn, preferred_element_type=np.float32,
                                                               configs=cfg))(x, y)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    if JAX012:
        from jax._src.cudnn import scaled_matmul_stablehlo as jq

        jcfg = jax.nn.get_scaled_dot_general_config(mode)
        xq, xs = jq.quantize(jjnp.asarray(x), jcfg)
        ref = np.asarray(xq, np.float32) * np.repeat(np.asarray(xs, np.float32), 32, axis=-1)
        np.testing.assert_array_equal(ref, _np_quantize(x, mode))


# ---------------------------------------------------------------- what ftrans already did as jax 0.12 does
PARTITION_CASES = [
    (np.array([True, False, True, False, True]), 1),  # jax 0.10/0.11: neg of bool is a TypeError
    (np.int8([-128, 5, -128, 3, 127]), 1),  # jax 0.10/0.11: -(-128) overflows, the minimum came last
    (np.int32([np.iinfo(np.int32).min, 0, 7, np.iinfo(np.int32).min]), 2),
    (np.uint8([0, 5, 255, 3, 0]), 1),
    (np.float32([np.nan, 1.0, -0.0, 0.0, -np.inf, np.nan, 2.0]), 2),
]
_OLD_JAX_PARTITION_WRONG = {0, 1, 2}


@pytest.mark.parametrize("i", range(len(PARTITION_CASES)))
def test_partition_ranks_bools_and_int_minimum_as_jax012(i):
    x, kth = PARTITION_CASES[i]
    got, idx = fnp.partition(x, kth), fnp.argpartition(x, kth)
    _eq(ftrans.jit(lambda v: fnp.partition(v, kth))(x), got)
    _eq(ftrans.jit(lambda v: fnp.argpartition(v, kth))(x), idx)
    s = np.sort(x)  # (NaN last, as lax.sort)
    if x.dtype.kind != "f":
        _eq(np.asarray(got)[:kth + 1], s[:kth + 1])
        assert sorted(np.asarray(got)[kth + 1:].tolist()) == sorted(s[kth + 1:].tolist())
        _eq(x[np.asarray(idx)][:kth + 1], s[:kth + 1])  # (the rest: the other indices, in increasing order)
        assert sorted(np.asarray(idx).tolist()) == list(range(len(x)))
    if JAX012 or i not in _OLD_JAX_PARTITION_WRONG:
        _eq(got, jjnp.partition(x, kth))
        _eq(idx, jjnp.argpartition(x, kth))


def test_sum_method_takes_initial_as_jax012():
    """jax 0.10/0.11's ``x.sum(initial=)`` dropped ``initial``; jax 0.12 (and ftrans) add it."""
    x = fnp.arange(3.0)
    _eq(x.sum(initial=10.0), np.float32(13.0))
    _eq(x.sum(initial=10.0, where=np.array([True, False, True])), np.float32(12.0))
    _eq(ftrans.jit(lambda v: v.sum(initial=10.0))(x), np.float32(13.0))
    if JAX012:
        _eq(jjnp.arange(3.0).sum(initial=10.0), np.float32(13.0))


@pytest.mark.parametrize("name", ["cholesky", "eigh"])
@pytest.mark.parametrize("shape", [(2, 3), (3,)])
def test_cholesky_eigh_of_a_non_square_argument_is_a_value_error_as_jax012(name, shape):
    """jax 0.12 checks the shape first ("must have shape [..., n, n]", ValueError); jax 0.10/0.11 failed later
    with a TypeError. ftrans's error is both."""
    with pytest.raises(ValueError, match=r"\[\.\.\., n, n\]"):
        getattr(fnp.linalg, name)(np.ones(shape, np.float32))
    if JAX012:
        with pytest.raises(ValueError, match=r"\[\.\.\., n, n\]"):
            getattr(jjnp.linalg, name)(np.ones(shape, np.float32))


def test_pinv_rtol_may_be_traced_as_jax012():
    """jax 0.12 made ``rtol`` a differentiable argument of pinv's custom JVP (jit, vmap and grad over it)."""
    a = np.float32([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    want = np.linalg.pinv(a.astype(np.float64), rcond=0.1)
    np.testing.assert_allclose(np.asarray(ftrans.jit(lambda m, r: fnp.linalg.pinv(m, rtol=r))(a, 0.1)), want,
                               rtol=1e-4, atol=1e-5)
    got = ftrans.vmap(lambda r: fnp.linalg.pinv(a, rtol=r))(np.float32([0.1, 0.9]))
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-4, atol=1e-5)
    g = ftrans.grad(lambda r: fnp.linalg.pinv(a, rtol=r).sum())(np.float32(0.5))
    assert float(g) == 0.0
    if JAX012:
        _eq(got, jax.vmap(lambda r: jjnp.linalg.pinv(a, rtol=r))(np.float32([0.1, 0.9])))


def test_polyval_unroll_defaults_to_none_as_jax012():
    import inspect

    assert inspect.signature(fnp.polyval).parameters["unroll"].default is None
    p, x = np.float32([1.0, 2.0, 3.0]), np.float32([2.0, 3.0])
    for unroll in (None, 1, 16):
        _eq(fnp.polyval(p, x, unroll=unroll), np.polyval(p, x).astype(np.float32))
    if JAX012:
        assert inspect.signature(jjnp.polyval).parameters["unroll"].default is None


@pytest.mark.parametrize("call", [lambda m, r: m.array(r), lambda m, r: m.asarray(r), lambda m, r: m.sin(r)])
def test_a_ref_where_an_array_is_expected_says_to_read_it_as_jax012(call):
    """jax 0.12 refuses a Ref passed as an array with a TypeError that says to read it (``ref[...]``)."""
    r = ftrans.new_ref(fnp.zeros(2))
    with pytest.raises(TypeError, match=r"ref\[\.\.\.\]"):
        call(fnp, r)
    if JAX012:
        with pytest.raises(TypeError, match=r"ref\[\.\.\.\]"):
            call(jjnp, jax.new_ref(jjnp.zeros(2)))


@pytest.mark.parametrize("bs, exc", [(2.0, TypeError), ("a", TypeError), (0, ValueError), (-1, ValueError)])
def test_lexsort_batch_size_errors_as_jax012(bs, exc):
    keys = np.int32([[1, 0, 1], [0, 0, 1]])
    with pytest.raises(exc):
        fnp.lexsort(keys, batch_size=bs)
    if JAX012:
        with pytest.raises(exc):
            jjnp.lexsort(keys, batch_size=bs)


def test_lexsort_in_batches_as_jax012():
    """More keys than ``batch_size``, stacked or of mixed dtypes: the same permutation as one sort."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2, (40, 3, 9)).astype(np.int32)
    _eq(fnp.lexsort(keys, axis=1, batch_size=4), np.lexsort(keys, axis=1).astype(np.int32))
    mixed = [k.astype(np.float32) if i % 2 else k for i, k in enumerate(keys)]
    _eq(fnp.lexsort(mixed, axis=0, batch_size=3), np.lexsort(mixed, axis=0).astype(np.int32))
    if JAX012:
        _eq(fnp.lexsort(keys, axis=1, batch_size=4), jjnp.lexsort(keys, axis=1, batch_size=4))
