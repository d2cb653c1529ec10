"""NumPy indexing, ``x.at[]`` updates, gather/scatter and friends, differential against jax."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fnp
from ftrans import lax as flax
from ftrans.core.ir import typecheck
from ftrans.errors import ConcretizationTypeError, NonConcreteBooleanIndexError
from tests.backend_util import host_oracle
from tests.hypothesis_budget import examples

jlax = jax.lax


# ---------------------------------------------------------------- helpers
def staged(f, *args):
    """Stage ``f``, typecheck it, and re-run it; results carry the staged program's weak types.

    (eval_jaxpr re-binds literals as NumPy scalars, which drops their weak
    type, so the weak type is taken from the jaxpr's output avals.)
    """
    closed = ftrans.make_jaxpr(f)(*args)
    typecheck(closed)
    outs = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *[fnp.asarray(a) for a in args])
    outs = [ftrans.Array._make(np.asarray(o), aval.weak_type) for o, aval in zip(outs, closed.out_avals)]
    return outs


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def assert_same(got, want, *, rtol=1e-6):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        assert isinstance(g, ftrans.Array), type(g)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.weak_type == w.weak_type, (g.weak_type, w.weak_type)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-6, equal_nan=True)


# jax's oracle programs are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less
# compile time, the same values up to float rounding (which the tolerances are for).  ftrans's compile as always.
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def _jax_oracle(g, args, traceable):
    """``g`` on jax: one ``jax.jit`` program where ``g`` traces (eager jax compiles every op of an indexing
    expression by itself), eagerly where it cannot (value-dependent shapes: boolean masks, nonzero)."""
    if traceable:
        try:
            return jax.jit(g, compiler_options=_ORACLE_OPTIONS)(*args)
        except (jax.errors.JAXTypeError, jax.errors.JAXIndexError):  # needs concrete values after all: as eager jax answers
            pass
    return g(*args)


def both(f, *args, jf=None, stage=True):
    """Run ``f(fnp, ...)`` eagerly and staged, ``f(jnp, ...)`` on jax, and compare all three."""
    with host_oracle():  # both of ftrans's runs are host arithmetic (a GPU scatter picks any duplicate)
        want = _jax_oracle(jf or (lambda *a: f(jnp, *a)), [jnp.asarray(a) for a in args], stage)
    assert_same(f(fnp, *[fnp.asarray(a) for a in args]), want)
    if stage:
        assert_same(staged(lambda *a: f(fnp, *a), *args), want)
    return want


def arr(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * 10).astype(dtype)


def eqn_names(f, *args):
    return [e.primitive.name for e in ftrans.make_jaxpr(f)(*args).jaxpr.eqns]


# ---------------------------------------------------------------- strategies
shapes = st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple)


@st.composite
def basic_index(draw, shape):
    """A tuple of static ints (in range), slices, None and at most one Ellipsis."""
    out = []
    axis = 0
    used_ellipsis = False
    for _ in range(draw(st.integers(0, len(shape) + 2))):
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis"]))
        if kind == "ellipsis" and not used_ellipsis:
            used_ellipsis = True
            out.append(Ellipsis)
            axis = len(shape) - sum(1 for i in out if isinstance(i, (int, slice)))
            continue
        if kind == "none":
            out.append(None)
            continue
        if axis >= len(shape) or (used_ellipsis and sum(isinstance(i, (int, slice)) for i in out) >= len(shape)):
            continue
        n = shape[axis]
        if kind == "int" and n > 0:
            out.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
            step = draw(st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2, -3])))
            out.append(slice(draw(bound), draw(bound), step))
        axis += 1
    return tuple(out)


@st.composite
def shape_and_basic_index(draw):
    shape = draw(shapes)
    return shape, draw(basic_index(shape))


@st.composite
def advanced_case(draw):
    """Integer arrays (broadcasting together, negative, out of range) mixed with basic entries."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    bshape = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    idx = []
    n_adv = 0
    for n in shape:
        kind = draw(st.sampled_from(["array", "array", "slice", "int", "none"]))
        if kind == "none":
            idx.append(None)
            kind = "array"
        if kind == "array":
            sub = bshape[len(bshape) - draw(st.integers(0, len(bshape))):]
            lo, hi = (-n, n) if not draw(st.booleans()) else (-n - 3, n + 3)
            idx.append(rng.integers(lo, hi, size=sub).astype(draw(st.sampled_from([np.int32, np.int64, np.int8]))))
            n_adv += 1
        elif kind == "slice":
            idx.append(slice(draw(st.sampled_from([None, 0, 1, -1])), None, draw(st.sampled_from([None, 2, -1]))))
        else:
            idx.append(int(rng.integers(-n, n)))
    if n_adv == 0:
        idx[0] = np.array([0, -1], np.int32)
    return shape, tuple(idx)


# ---------------------------------------------------------------- basic indexing
@given(shape_and_basic_index())
def test_basic_indexing_matches_jax(case):
    shape, idx = case
    x = arr(shape)
    both(lambda m, x: x[idx], x)


@given(shape_and_basic_index())
def test_basic_indexing_lowers_without_gather(case):
    shape, idx = case
    names = eqn_names(lambda x: x[idx], arr(shape))
    assert set(names) <= {"slice", "rev", "squeeze", "expand_dims"}, names


def test_basic_index_forms():
    x = arr((4, 5, 6))
    for idx in [0, -1, (1, 2), (slice(None), -2), (Ellipsis, 0), (None, 1, Ellipsis, None),
                (slice(10, -10, -1),), (slice(-100, 100, 3), None), (Ellipsis,), (), (slice(3, 1),)]:
        both(lambda m, x: x[idx], x)


def test_weak_typed_and_integer_operands():
    both(lambda m, x: (x + 1)[1:], np.arange(5, dtype=np.int32))
    w = fnp.asarray(2.0) * fnp.ones(3) if hasattr(fnp, "ones") else None
    if w is not None:
        assert w[0].weak_type == (jnp.asarray(2.0) * jnp.ones(3))[0].aval.weak_type


def test_scalar_array_index_uses_dynamic_slice_and_clamps():
    x = arr((5, 3))
    f = lambda x, i: x[i, 1:]  # noqa: E731
    assert "dynamic_slice" in eqn_names(f, x, np.int32(2))
    assert "gather" not in eqn_names(f, x, np.int32(2))
    for i in [0, 3, -1, -5, 7, -9]:
        want = jnp.asarray(x)[jnp.asarray(i, jnp.int32), 1:]
        assert_same(staged(f, x, np.int32(i)), want)
        assert_same(fnp.asarray(x)[fnp.asarray(np.int32(i)), 1:], want)


def test_traced_scalar_with_reversed_slice_and_newaxis():
    x = arr((4, 5))
    for i in [1, -2]:
        want = jnp.asarray(x)[jnp.asarray(i), None, ::-1]
        assert_same(staged(lambda x, i: x[i, None, ::-1], x, np.int32(i)), want)


# ---------------------------------------------------------------- advanced indexing
@settings(max_examples=examples(8))
@given(advanced_case())
def test_advanced_indexing_matches_jax(case):
    shape, idx = case
    x = arr(shape)
    both(lambda m, x: x[idx], x)


@settings(max_examples=examples(8))
@given(advanced_case())
def test_advanced_indexing_with_traced_index_arrays(case):
    shape, idx = case
    x = arr(shape)
    pos = [k for k, i in enumerate(idx) if isinstance(i, np.ndarray)]
    arrays = [idx[k] for k in pos]

    def f(x, *arrs):
        full = list(idx)
        for k, a in zip(pos, arrs):
            full[k] = a
        return x[tuple(full)]

    want = f(jnp.asarray(x), *[jnp.asarray(a) for a in arrays])
    assert_same(staged(f, x, *arrays), want)
    names = eqn_names(f, x, *arrays)
    if want.size == 0:
        assert "gather" not in names  # an empty result is just zeros
    elif any(a.ndim for a in arrays):
        assert "gather" in names
    else:  # scalar array indices: a dynamic slice where the rest allows it, as in jax
        assert "gather" in names or "dynamic_slice" in names


def test_advanced_dims_go_first_when_separated():
    x = arr((3, 4, 5, 6))
    i = np.array([[0, 1], [2, 0]])
    both(lambda m, x: x[i, :, i], x)          # separated -> broadcast dims first
    both(lambda m, x: x[:, i, i], x)          # adjacent -> in place
    both(lambda m, x: x[:, i, :, 1], x)       # an int counts as advanced
    both(lambda m, x: x[None, i, None, i], x)


def test_index_sources_lists_ftrans_and_numpy_arrays():
    x = arr((5, 4))
    both(lambda m, x: x[[0, 4, -1], 1], x)
    both(lambda m, x: x[([1, 2], [0, 3])], x)
    both(lambda m, x: x[m.asarray(np.array([3, 1]))], x)
    both(lambda m, x: x[np.array([], np.int32)], x)
    both(lambda m, x: x[np.array([2, 2], np.uint8)], x)


def test_out_of_range_array_indices_are_clamped_on_read():
    x = arr((4, 3))
    want = both(lambda m, x: x[np.array([10, -10, 2])], x)
    np.testing.assert_array_equal(np.asarray(want), x[[3, 0, 2]])


def test_empty_axes():
    both(lambda m, x: x[np.array([], np.int32)], np.zeros((0, 3), np.float32))
    both(lambda m, x: x[1:1, np.array([0, 1])], arr((3, 3)))


# ---------------------------------------------------------------- boolean masks
@settings(max_examples=examples(8))
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.integers(0, 1000))
def test_boolean_masks_eager_and_concrete_in_staging(shape, seed):
    x = arr(shape, seed=seed)
    m = arr(shape, np.bool_, seed=seed + 1)
    both(lambda mod, x: x[m], x)
    both(lambda mod, x: x[mod.asarray(m)], x, stage=False)
    m0 = m.reshape(-1)[: shape[0]] if m.size >= shape[0] else np.ones(shape[0], bool)
    both(lambda mod, x: x[m0, ...], x)
    both(lambda mod, x: x[x > 0], x, stage=False)


def test_boolean_list_and_mixed():
    x = arr((3, 4))
    both(lambda m, x: x[[True, False, True], ], x)
    both(lambda m, x: x[np.array([True, False, True]), 1:], x)
    both(lambda m, x: x[1, np.array([True, False, True, True])], x)


def test_scalar_boolean_index():
    x = arr((3, 4))
    for idx in [True, False, (0, True), (True, 0), (Ellipsis, True), (False, Ellipsis, 1)]:
        want = np.asarray(x)[idx]
        got = fnp.asarray(x)[idx]
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), want)
    both(lambda m, x: x[True], x)
    both(lambda m, x: x[0, True], x)


def test_traced_boolean_mask_raises():
    x = arr((4,))
    with pytest.raises(NonConcreteBooleanIndexError, match="jnp.where"):
        ftrans.make_jaxpr(lambda x: x[x > 0])(x)
    with pytest.raises(IndexError, match="size="):
        ftrans.make_jaxpr(lambda x, b: x[b])(x, np.bool_(True))


# ---------------------------------------------------------------- error cases
def test_static_out_of_range_int_raises_index_error():
    x = fnp.asarray(arr((3, 4)))
    with pytest.raises(IndexError, match="axis 1 with size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match="index -4 .* axis 0 with size 3"):
        x[-4]
    with pytest.raises(IndexError, match="axis 0 with size 3"):
        ftrans.make_jaxpr(lambda x: x[3, np.array([0])])(x)
    with pytest.raises(IndexError, match="Too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    # explicit modes instead clamp or fill, like jax
    assert_same(x.at[5].get(mode="clip"), jnp.asarray(np.asarray(x)).at[5].get(mode="clip"))
    assert_same(x.at[5].get(mode="fill"), jnp.asarray(np.asarray(x)).at[5].get(mode="fill"))


def test_bad_index_types_raise_type_error():
    x = fnp.asarray(arr((3, 4)))
    for bad in [1.0, np.float32(1), np.array([0.5]), fnp.asarray(np.array([1.0], np.float32)), "a"]:
        with pytest.raises(TypeError):
            x[bad]
    with pytest.raises(TypeError, match="integer or boolean"):
        x[np.array([1.5])]
    with pytest.raises(TypeError, match="non-tuple sequence"):
        x[[0, 1]]
    with pytest.raises(IndexError, match="valid indices"):
        x[object()]
    with pytest.raises(IndexError, match="static integers"):
        ftrans.make_jaxpr(lambda x, i: x[i:])(x, 1)


def test_item_assignment_raises_type_error():
    x = fnp.asarray(arr((3,)))
    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        x[0] = 1

    def f(x):
        x[0] = 1
        return x

    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        ftrans.make_jaxpr(f)(np.ones(3, np.float32))


# ---------------------------------------------------------------- x.at[...]
UPDATE_OPS = ["set", "add", "multiply", "min", "max", "subtract", "divide", "power", "mul"]


@settings(max_examples=examples(8))
@given(advanced_case(), st.sampled_from(UPDATE_OPS), st.sampled_from([None, "clip", "drop", "promise_in_bounds"]))
def test_at_updates_match_jax(case, op, mode):
    shape, idx = case
    x = np.abs(arr(shape)) + 1
    xj = jnp.asarray(x)
    target_shape = xj[idx].shape
    vals = np.abs(arr(target_shape, seed=3)) + 0.5
    if op == "set":
        # which write wins for repeated indices is unspecified (as in XLA): use unique positions
        flat = np.asarray(jnp.arange(x.size).reshape(shape).at[idx].get(mode="clip" if mode == "clip" else None))
        if mode != "clip":
            flat = np.asarray(jnp.arange(x.size).reshape(shape).at[idx].get(mode="fill", fill_value=-1))
        kept = flat[flat >= 0]
        if len(np.unique(kept)) != len(kept):
            return
    if op == "power":
        vals = np.round(vals) % 3
    f = lambda m, x, v: getattr(x.at[idx], op)(v, mode=mode)  # noqa: E731
    want = getattr(xj.at[idx], op)(jnp.asarray(vals), mode=mode)
    assert_same(f(fnp, fnp.asarray(x), fnp.asarray(vals)), want, rtol=1e-5)
    assert_same(staged(lambda x, v: f(fnp, x, v), x, vals), want, rtol=1e-5)


def test_at_add_with_repeated_and_negative_indices():
    x = np.zeros(5, np.float32)
    i = np.array([0, 0, -1, 4, 2, 0])
    want = both(lambda m, x: x.at[i].add(1.0), x)
    np.testing.assert_array_equal(np.asarray(want), [3, 0, 1, 0, 2])
    both(lambda m, x: x.at[i].multiply(2.0), x + 1)
    both(lambda m, x: x.at[i].min(np.arange(6, dtype=np.float32) - 3), x)
    both(lambda m, x: x.at[i].max(np.arange(6, dtype=np.float32) - 3), x)


def test_at_out_of_range_updates_are_dropped_by_default():
    x = np.zeros((4, 2), np.float32)
    i = np.array([1, 9, -9])
    want = both(lambda m, x: x.at[i].set(5.0), x)
    assert np.asarray(want).sum() == 10
    both(lambda m, x: x.at[i].add(5.0, mode="clip"), x)
    both(lambda m, x: x.at[9].set(5.0), x)
    both(lambda m, x: x.at[-9, 1].add(5.0), x)


def test_at_dtype_casting_and_broadcasting():
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    both(lambda m, x: x.at[0].set(2.7), xi)
    both(lambda m, x: x.at[0].add(1.5), xi)
    both(lambda m, x: x.at[0].divide(2), xi)
    both(lambda m, x: x.at[:, 1].set(np.array([7, 8], np.int64)), xi)
    both(lambda m, x: x.at[:, None, 1:].set(np.array([1.0, 2.0], np.float32)), xi.astype(np.float32))
    both(lambda m, x: x.at[1].set(True), np.zeros(3, bool))
    both(lambda m, x: x.at[np.array([0, 2])].max(np.array([True, False])), np.zeros(3, bool))
    both(lambda m, x: x.at[...].set(3), np.zeros((2, 2), np.float16))
    both(lambda m, x: x.at[::-1].set(np.arange(3, dtype=np.float32)), np.zeros(3, np.float32))
    both(lambda m, x: x.at[x > 1].set(0), np.arange(4, dtype=np.float32), stage=False)
    both(lambda m, x: x.at[True].add(1), np.arange(4, dtype=np.float32))


def test_at_get_modes_and_fill_value():
    x = arr((4, 3))
    i = np.array([0, 5, -1, -7])
    both(lambda m, x: x.at[i].get(), x)
    both(lambda m, x: x.at[i].get(mode="clip"), x)
    both(lambda m, x: x.at[i].get(mode="fill"), x)
    both(lambda m, x: x.at[i, 1].get(mode="fill", fill_value=-2.0), x)
    both(lambda m, x: x.at[i].get(mode="fill"), np.arange(12, dtype=np.int32).reshape(4, 3))
    both(lambda m, x: x.at[i].get(mode="fill"), np.arange(12, dtype=np.uint8).reshape(4, 3))
    both(lambda m, x: x.at[i].get(mode="fill"), np.ones((4, 3), bool))
    both(lambda m, x: x.at[i].get(wrap_negative_indices=False), x)


def test_at_apply():
    x = np.arange(5, dtype=np.float32)
    i = np.array([0, 0, 3])
    got = fnp.asarray(x).at[i].apply(lambda v: v * 2 + 1)
    assert_same(got, jnp.asarray(x).at[i].apply(lambda v: v * 2 + 1))
    want = jnp.asarray(x).at[1:3].apply(fnp_sq := (lambda v: v * v))
    assert_same(staged(lambda x: x.at[1:3].apply(fnp_sq), x), want)
    # traced indices that may repeat: func runs once per occurrence (JAX's scatter-apply semantics),
    # checked against NumPy's ufunc.at (out-of-bounds 9 is dropped) and against jax
    idx = np.array([0, 1, 1, 3, -1, 4, 4, 4, 9])
    ref = x.copy()
    with np.errstate(over="ignore"):
        np.exp.at(ref, idx[idx < 5])
    got = ftrans.jit(lambda x, i: x.at[i].apply(fnp.exp))(x, idx)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5)
    assert_same(ftrans.jit(lambda x, i: x.at[i].apply(fnp.sin))(x, idx),
                jax.jit(lambda x, i: x.at[i].apply(jnp.sin))(x, idx))
    # under vmap (JAX issue 16655): the batched counts drive the loop
    arr, ind = np.array([[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]]), np.array([3, 0])
    g = lambda a, i: a.at[i].apply(lambda v: v - 1)  # noqa: E731
    assert_same(ftrans.vmap(g)(fnp.asarray(arr), fnp.asarray(ind)), jax.vmap(g)(jnp.asarray(arr), jnp.asarray(ind)))
    rep = np.array([[0, 0, 2], [1, 1, 1]])
    assert_same(ftrans.vmap(g)(fnp.asarray(arr), fnp.asarray(rep)), jax.vmap(g)(jnp.asarray(arr), jnp.asarray(rep)))
    # forward-mode derivative through the loop: the chain rule once per occurrence
    f = ftrans.jit(lambda x, i: x.at[i].apply(fnp.sin))
    _, t = ftrans.jvp(lambda x: f(x, idx), (x,), (np.ones(5, np.float32),))
    v, want_t = x.astype(np.float64), np.ones(5)
    for k in idx[idx < 5]:
        want_t[k] *= np.cos(v[k])
        v[k] = np.sin(v[k])
    np.testing.assert_allclose(np.asarray(t), want_t, rtol=1e-5)
    g = ftrans.grad(lambda x: f(x, idx).sum())(x)  # reverse mode too (JAX's scatter-apply has neither)
    np.testing.assert_allclose(np.asarray(g), want_t, rtol=1e-5)


def test_at_errors():
    x = fnp.asarray(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="broadcast"):
        x.at[0].set(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="bool"):
        fnp.asarray(np.zeros(3, bool)).at[0].add(True)
    with pytest.raises(TypeError, match="bool"):
        ftrans.make_jaxpr(lambda b: b.at[0].multiply(True))(np.zeros(3, bool))
    with pytest.raises(ValueError, match="mode"):
        x.at[0].set(1.0, mode="bogus")
    with pytest.raises(TypeError, match="out_sharding"):  # not a sharding (jax: an internal AssertionError)
        x.at[0].set(1.0, out_sharding=object())


# ---------------------------------------------------------------- lax.gather / scatter
def _gather_patterns():
    G = flax.GatherDimensionNumbers
    JG = jlax.GatherDimensionNumbers
    rng = np.random.default_rng(1)
    return [
        # rows of a matrix
        ((5, 3), rng.integers(-2, 7, (4, 1)), (G((1,), (0,), (0,)), JG((1,), (0,), (0,))), (1, 3)),
        # points of a matrix, batch shape (2, 3)
        ((4, 5), rng.integers(0, 6, (2, 3, 2)), (G((), (0, 1), (0, 1)), JG((), (0, 1), (0, 1))), (1, 1)),
        # 2x2 windows, kept uncollapsed, offset dims in the middle
        ((4, 5), rng.integers(0, 4, (3, 2)), (G((0, 1), (), (0, 1)), JG((0, 1), (), (0, 1))), (2, 2)),
        # index only axis 1 of a 3-D array, offsets around the batch dim
        ((3, 6, 2), rng.integers(0, 6, (4, 1)), (G((0, 2), (1,), (1,)), JG((0, 2), (1,), (1,))), (3, 1, 2)),
        # batching dims (take_along_axis-like)
        ((3, 5), rng.integers(0, 5, (3, 4, 1)),
         (G((), (1,), (1,), (0,), (0,)), JG((), (1,), (1,), (0,), (0,))), (1, 1)),
        # empty index vector: a slice of the whole operand
        ((3, 2), np.zeros((0,), np.int32), (G((0, 1), (), ()), JG((0, 1), (), ())), (2, 2)),
    ]


@pytest.mark.parametrize("k", range(6))
@pytest.mark.parametrize("mode", [None, "clip", "fill"])
def test_lax_gather_patterns(k, mode):
    shape, idx, (dn, jdn), sizes = _gather_patterns()[k]
    idx = idx.astype(np.int32)
    x = arr(shape)
    want = jlax.gather(jnp.asarray(x), jnp.asarray(idx), jdn, sizes, mode=mode)
    assert_same(flax.gather(x, idx, dn, sizes, mode=mode), want)
    assert_same(staged(lambda x, i: flax.gather(x, i, dn, sizes, mode=mode), x, idx), want)
    assert_same(flax.gather(x, idx, jdn, sizes, mode=mode), want)  # jax's dnums type is accepted


def _scatter_patterns():
    S = flax.ScatterDimensionNumbers
    JS = jlax.ScatterDimensionNumbers
    rng = np.random.default_rng(2)
    return [
        ((5, 3), rng.integers(-2, 7, (4, 1)), (4, 3), (S((1,), (0,), (0,)), JS((1,), (0,), (0,)))),
        ((4, 5), rng.integers(0, 6, (2, 3, 2)), (2, 3), (S((), (0, 1), (0, 1)), JS((), (0, 1), (0, 1)))),
        ((4, 5), rng.integers(0, 4, (3, 2)), (3, 2, 2), (S((1, 2), (), (0, 1)), JS((1, 2), (), (0, 1)))),
        ((3, 5), rng.integers(0, 5, (3, 4, 1)), (3, 4),
         (S((), (1,), (1,), (0,), (0,)), JS((), (1,), (1,), (0,), (0,)))),
    ]


@pytest.mark.parametrize("k", range(4))
@pytest.mark.parametrize("op", ["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"])
@pytest.mark.parametrize("mode", [None, "clip"])
def test_lax_scatter_patterns(k, op, mode):
    shape, idx, ushape, (dn, jdn) = _scatter_patterns()[k]
    idx = idx.astype(np.int32)
    x, upd = arr(shape), arr(ushape, seed=4)
    if op == "scatter":
        # unique targets only: XLA leaves the winner of colliding writes unspecified
        hits = np.asarray(jlax.scatter_add(jnp.zeros(shape), jnp.asarray(idx), jnp.ones(ushape), jdn, mode=mode))
        if hits.max() > 1:
            upd = np.full(ushape, 3.5, np.float32)  # colliding writes then agree
    want = getattr(jlax, op)(jnp.asarray(x), jnp.asarray(idx), jnp.asarray(upd), jdn, mode=mode)
    assert_same(getattr(flax, op)(x, idx, upd, dn, mode=mode), want, rtol=1e-5)
    assert_same(staged(lambda x, i, u: getattr(flax, op)(x, i, u, dn, mode=mode), x, idx, upd), want, rtol=1e-5)


def test_lax_scatter_weak_scalar_updates_and_dtype_errors():
    S = flax.ScatterDimensionNumbers((), (0,), (0,))
    x = np.zeros(4, np.float32)
    out = flax.scatter_add(x, np.array([[1], [1]], np.int32), np.array([1.0, 2.0], np.float32), S)
    np.testing.assert_array_equal(np.asarray(out), [0, 3, 0, 0])
    with pytest.raises(TypeError, match="dtype"):
        flax.scatter(x, np.array([[1]], np.int32), np.array([1], np.int32), S)
    with pytest.raises(TypeError, match="rank"):
        flax.scatter(x, np.array([[1]], np.int32), np.ones((1, 2), np.float32), S)
    with pytest.raises(TypeError, match="integer"):
        flax.gather(x, np.array([[1.0]], np.float32), flax.GatherDimensionNumbers((), (0,), (0,)), (1,))
    with pytest.raises(TypeError, match="slice size"):
        ftrans.make_jaxpr(lambda x: flax.gather(x, np.array([[1]], np.int32),
                                                flax.GatherDimensionNumbers((), (0,), (0,)), (2,)))(x)
    assert flax.GatherScatterMode.from_any(None) is flax.GatherScatterMode.FILL_OR_DROP
    assert flax.GatherScatterMode.from_any("clip") is flax.GatherScatterMode.CLIP
    with pytest.raises(ValueError):
        flax.GatherScatterMode.from_any("nope")


def test_gather_ir_prints_readably():
    text = str(ftrans.make_jaxpr(lambda x, i: x[i])(arr((3, 4)), np.array([0, 2], np.int32)))
    assert "gather[" in text and "GatherScatterMode.PROMISE_IN_BOUNDS" in text


# ---------------------------------------------------------------- take / take_along_axis
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.data())
def test_take_matches_jax(shape, data):
    x = arr(shape)
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    n = x.size if axis is None else shape[axis]
    idx = np.asarray(data.draw(st.lists(st.integers(-n - 2, n + 2), min_size=0, max_size=4)), np.int32)
    idx = idx.reshape(data.draw(st.sampled_from([(-1,), (1, -1)]))) if idx.size else idx
    mode = data.draw(st.sampled_from([None, "fill", "clip", "wrap"]))
    both(lambda m, x, i: m.take(x, i, axis=axis, mode=mode), x, idx)


def test_take_fill_value_and_errors():
    x = arr((3, 4))
    both(lambda m, x: m.take(x, np.array([0, 9]), axis=1, fill_value=-1.0), x)
    with pytest.raises(TypeError, match="integer"):
        fnp.take(x, np.array([0.5]))
    with pytest.raises(NotImplementedError, match="raise"):
        fnp.take(x, np.array([0]), mode="raise")
    with pytest.raises(ValueError, match="axis"):
        fnp.take(x, np.array([0]), axis=3)


@settings(max_examples=examples(8))
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.data())
def test_take_along_axis_matches_jax(shape, data):
    x = arr(shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = tuple(data.draw(st.sampled_from([1, s])) for s in shape)
    ishape = ishape[:axis % len(shape)] + (data.draw(st.integers(1, 5)),) + ishape[axis % len(shape) + 1:]
    n = shape[axis]
    idx = np.random.default_rng(data.draw(st.integers(0, 99))).integers(-n - 1, n + 1, ishape).astype(np.int32)
    mode = data.draw(st.sampled_from([None, "clip", "fill", "one_hot"]))
    both(lambda m, x, i: m.take_along_axis(x, i, axis=axis, mode=mode), x, idx)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64])
def test_take_along_axis_one_hot(dtype):
    """mode='one_hot' (a one-hot contraction): broadcasting index/array dims, axis=None, out of range -> 0."""
    x = arr((2, 3, 4), dtype)
    idx = np.array([[[0, -1, 3, 7]], [[2, 1, -4, 0]]], np.int32)  # (2, 1, 4) against (2, 3, 4)
    both(lambda m, x, i: m.take_along_axis(x, i, axis=0, mode="one_hot"),
         x, np.concatenate([idx] * 3, axis=1)[:, :, :1])
    both(lambda m, x, i: m.take_along_axis(x, i, axis=2, mode="one_hot"), x, idx)
    both(lambda m, x: m.take_along_axis(x, np.array([0, 23, -1, 30]), axis=None, mode="one_hot"), x)


def test_take_along_axis_none_and_errors():
    x = arr((3, 4))
    both(lambda m, x: m.take_along_axis(x, np.array([0, 11, -1]), axis=None), x)
    with pytest.raises(ValueError, match="same number of dimensions"):
        fnp.take_along_axis(x, np.array([0]), axis=1)


# ---------------------------------------------------------------- nonzero and friends
@settings(max_examples=examples(6))
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), st.integers(0, 1000),
       st.one_of(st.none(), st.integers(0, 30)), st.sampled_from([None, -1, 7]))
def test_nonzero_matches_jax(shape, seed, size, fill):
    x = arr(shape, np.int32, seed=seed) * (arr(shape, np.bool_, seed=seed + 1))
    fill = None if size is None else fill
    both(lambda m, x: m.nonzero(x, size=size, fill_value=fill), x, stage=size is not None)
    both(lambda m, x: m.flatnonzero(x, size=size, fill_value=fill), x, stage=size is not None)
    both(lambda m, x: m.argwhere(x, size=size, fill_value=fill), x, stage=size is not None)


def test_nonzero_edge_cases():
    both(lambda m, x: m.nonzero(x), np.zeros((0, 3), np.float32), stage=False)
    both(lambda m, x: m.nonzero(x, size=2), np.zeros(4, bool))
    both(lambda m, x: m.argwhere(x), np.float32(3.0), stage=False)
    both(lambda m, x: m.nonzero(x, size=3, fill_value=(1, 2)), np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="0d"):
        fnp.nonzero(np.float32(1))
    with pytest.raises(ConcretizationTypeError, match="size"):
        ftrans.make_jaxpr(lambda x: fnp.nonzero(x))(np.ones(3, np.float32))
    with pytest.raises(ConcretizationTypeError, match="size"):
        ftrans.make_jaxpr(lambda x: fnp.where(x))(np.ones(3, np.float32))
    both(lambda m, x: m.where(x > 0, size=4, fill_value=-1), np.arange(-3, 3, dtype=np.float32))


@settings(max_examples=examples(5))
@given(st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple), st.integers(0, 99), st.integers(1, 3))
def test_select_matches_jax(shape, seed, k):
    conds = [arr(shape, np.bool_, seed=seed + i) for i in range(k)]
    choices = [arr(shape, seed=seed + 10 + i) for i in range(k)]
    both(lambda m, *cc: m.select(list(cc[:k]), list(cc[k:]), -1.5), *conds, *choices)
    both(lambda m, *cc: m.select(list(cc[:k]), list(cc[k:])), *conds, *[c.astype(np.int32) for c in choices])
    both(lambda m, c, v: m.select([c], [v], 2), conds[0][..., :1], choices[0])  # broadcasting
    both(lambda m, c: m.select([c, ~c], [1.0, 2]), conds[0])  # Python scalar choices stay weak


def test_select_and_choose_errors():
    with pytest.raises(ValueError, match="length"):
        fnp.select([np.ones(2, bool)], [])
    with pytest.raises(ValueError, match="non-empty"):
        fnp.select([], [])
    with pytest.raises(ValueError, match="integer"):
        fnp.choose(np.array([0.5]), [np.ones(1)])
    with pytest.raises(ValueError, match="invalid entry"):
        fnp.choose(np.array([0, 2]), [np.ones(2), np.zeros(2)])


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_choose_matches_jax(mode):
    a = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    if mode != "raise":
        a = a * 2 - 1
    choices = [arr((2, 3), seed=i) for i in range(3)]
    both(lambda m, a, *c: m.choose(a, list(c), mode=mode), a, *choices, stage=mode != "raise")
    both(lambda m, a: m.choose(a, [1, 2.5, np.float32(3)], mode=mode), a, stage=mode != "raise")


def test_compress_and_put_match_jax():
    x = arr((3, 4))
    c = np.array([True, False, True])
    both(lambda m, x: m.compress(c, x, axis=0), x)
    both(lambda m, x: m.compress(np.array([0, 1, 1, 0, 0]), x, axis=1), x)
    both(lambda m, x: m.compress(c, x), x)
    both(lambda m, x: m.compress(np.array([True, True, False, True]), x, axis=1, size=2), x)
    both(lambda m, x: m.compress(np.array([False, True]), x, axis=0, size=2, fill_value=9.0), x)
    with pytest.raises(ValueError, match="size"):
        fnp.compress(np.array([False, True]), x, axis=0, size=4)
    for mode in [None, "clip", "wrap"]:
        both(lambda m, x: m.put(x, np.array([0, 5, 100, -1]), np.array([1.0, 2.0]), mode=mode,
                                inplace=False), x)
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.put(x, np.array([0]), 1.0)
    with pytest.raises(ValueError, match="out of bounds"):
        fnp.compress(np.array([False, False, False, True]), x, axis=0)


def test_methods_forward():
    x = fnp.asarray(arr((3, 4)))
    assert_same(x.take(np.array([1, 0]), axis=1), jnp.asarray(np.asarray(x)).take(jnp.array([1, 0]), axis=1))
    assert_same(x.nonzero(size=2)[0], jnp.asarray(np.asarray(x)).nonzero(size=2)[0])


def test_narrow_negative_indices_are_widened_before_wrapping():
    """``i + size`` does not fit int8 on an axis of 200: the indices are widened first, as JAX's
    take_along_axis does (JAX's x[i] raises OverflowError here and its take wraps around into the fill
    value; ftrans gives the element, as NumPy does)."""
    arr = np.arange(200, dtype=np.float32)
    idx = np.array([1, -2, -100], dtype=np.int8)
    want = arr[idx]
    np.testing.assert_array_equal(np.asarray(jnp.take_along_axis(arr, idx, 0)), want)
    got = [fnp.take_along_axis(arr, idx, 0), fnp.take(arr, idx), fnp.asarray(arr)[idx],
           fnp.asarray(arr)[fnp.asarray(idx)], ftrans.jit(lambda a, i: a[i])(arr, idx),
           ftrans.jit(lambda i: fnp.take_along_axis(arr, i, 0))(idx)]
    for g in got:
        np.testing.assert_array_equal(np.asarray(g), want)
    upd = ftrans.jit(lambda a, i: a.at[i].set(-1.0))(arr, idx)
    np.testing.assert_array_equal(np.asarray(upd)[np.array([1, 198, 100])], [-1.0, -1.0, -1.0])

    def gather_index_dtypes(wrap):
        def f(i):
            return fnp.take_along_axis(arr, i, axis=0, mode="promise_in_bounds", wrap_negative_indices=wrap)

        return [[str(e.invars[1].aval.dtype) for e in j.jaxpr.eqns if e.primitive.name == "gather"]
                for j in (ftrans.make_jaxpr(f)(idx),)]

    assert gather_index_dtypes(True) == [["int32"]]  # widened to wrap
    assert gather_index_dtypes(False) == [["int8"]]  # kept when nothing is added, as in JAX


@pytest.mark.parametrize("x_dtype,y_dtype,warns", [
    (np.int32, np.int32, False), (np.float32, np.int32, False), (np.complex64, np.float32, False),
    (np.int32, np.int16, False), (np.int16, np.int32, True), (np.int32, np.float32, True),
    (np.float16, np.float32, True), (np.bool_, np.int32, True),
])
def test_at_update_warns_when_values_do_not_promote_to_x(x_dtype, y_dtype, warns):
    """JAX's FutureWarning ("scatter inputs have incompatible types") when the values' dtype does not
    promote to x's; x keeps its dtype either way, and a weak Python scalar of x's kind never warns."""
    import warnings

    def run(m):
        x = m.zeros(4, x_dtype)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = x.at[1].set(m.asarray(1, y_dtype))
        return out, [str(r.message) for r in w if issubclass(r.category, FutureWarning)]

    got, gw = run(fnp)
    want, jw = run(jnp)
    assert_same(got, want)
    assert bool(jw) is warns and bool(gw) is warns
    if warns:
        assert "scatter inputs have incompatible types" in gw[0]
    if x_dtype != np.bool_:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fnp.zeros(3, x_dtype).at[0].set(1)  # weak Python int: no warning
    else:  # a Python int into a bool array does warn, in JAX too
        with pytest.warns(FutureWarning, match="incompatible types"):
            fnp.zeros(3, x_dtype).at[0].set(1)
    with pytest.warns(FutureWarning, match="incompatible types") as rec:
        fnp.arange(5).at[0].divide(2.0)  # as JAX: the scale is scattered into ones of x's dtype
    assert rec[0].filename == __file__
