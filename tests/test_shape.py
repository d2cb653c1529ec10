"""Differential tests of ftrans.numpy's shape functions against jax.numpy.

Every function is run eagerly and staged (make_jaxpr, typecheck, eval_jaxpr)
and compared with jax on the same inputs: values, shapes, dtypes, weak types.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as fnp
from ftrans.core.ir import typecheck
from ftrans.errors import ConcretizationTypeError
from tests.hypothesis_budget import examples

DTYPES = [np.float32, np.int32, np.bool_, np.int8, np.uint8]


# ---------------------------------------------------------------- helpers
def _flat(x):
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _flat(e)]
    return [x]


def _assert_leaf(got, exp, what):
    if not isinstance(exp, jax.Array):  # jax passes some NumPy inputs straight through
        exp = jnp.asarray(exp)
    assert isinstance(got, ftrans.Array), f"{what}: expected an ftrans.Array, got {type(got)}"
    assert got.shape == exp.shape, f"{what}: shape {got.shape} != {exp.shape}"
    assert got.dtype == exp.dtype, f"{what}: dtype {got.dtype} != {exp.dtype}"
    assert got.weak_type == exp.weak_type, f"{what}: weak_type {got.weak_type} != {exp.weak_type}"
    g, e = np.asarray(got), np.asarray(exp)
    if e.dtype.kind in "fc":
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=1e-6, atol=1e-6,
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(g, e, err_msg=what)


# jax's oracle programs are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less
# compile time, the same values up to float rounding (which the tolerances are for).  ftrans's compile as always.
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def oracle(fn, *args):
    """jax's result, from one jitted program (one XLA compile instead of one per operation)."""
    try:
        return jax.jit(lambda *a: fn(jnp, *a), compiler_options=_ORACLE_OPTIONS)(*args)
    except (jax.errors.ConcretizationTypeError, TypeError, ValueError):
        return fn(jnp, *args)  # needs concrete values (or fails): run it eagerly


def check(fn, *args, staged=True):
    """``fn(module, *args)`` under ftrans (eager and staged) must match it under jax.numpy."""
    exp = oracle(fn, *args)
    got = fn(fnp, *args)
    assert type(got) in (list, tuple) if isinstance(exp, (list, tuple)) else True
    exp_l, got_l = _flat(exp), _flat(got)
    assert len(got_l) == len(exp_l)
    for g, e in zip(got_l, exp_l):
        _assert_leaf(g, e, "eager")
    if staged:
        closed = ftrans.make_jaxpr(lambda *a: fn(fnp, *a))(*args)
        typecheck(closed)
        for aval, e in zip(closed.out_avals, exp_l):
            e = e if isinstance(e, jax.Array) else jnp.asarray(e)
            assert (aval.shape, aval.dtype, aval.weak_type) == (e.shape, e.dtype, e.aval.weak_type)
        outs = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *[fnp.asarray(a) for a in args])
        assert len(outs) == len(exp_l)
        for g, e in zip(outs, exp_l):
            _assert_leaf(g, e, "staged")


def arrays(min_dims=0, max_dims=4, min_side=0, max_side=4, dtypes=DTYPES):
    return st.sampled_from(dtypes).flatmap(
        lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                                 max_side=max_side),
                             elements=hnp.from_dtype(np.dtype(d), allow_nan=False, allow_infinity=False,
                                                     min_value=None if d is np.bool_ else -50,
                                                     max_value=None if d is np.bool_ else 50)
                             if d is not np.uint8 else st.integers(0, 200))
    )


# ---------------------------------------------------------------- reshape family
@settings(max_examples=examples(6))
@given(arrays(), st.data())
def test_reshape_and_ravel(x, data):
    n = x.size
    divisors = [d for d in range(1, n + 1) if n % d == 0] or [1]
    a = data.draw(st.sampled_from(divisors))
    shape = data.draw(st.sampled_from([(n,), (a, -1), (-1, a), (a, n // a, 1) if n else (0, 1)]))
    order = data.draw(st.sampled_from(["C", "F"]))
    check(lambda m, x: m.reshape(x, shape, order=order), x)
    check(lambda m, x: m.ravel(x, order=order), x)
    check(lambda m, x: m.asarray(x).reshape(*shape) if len(shape) > 1 else m.asarray(x).reshape(shape), x)


def test_reshape_method_forms_and_weak_scalar():
    x = np.arange(6, dtype=np.float32)
    check(lambda m, x: m.asarray(x).reshape(2, 3), x)
    check(lambda m, x: m.asarray(x).reshape((3, 2)), x)
    check(lambda m, x: m.asarray(x).reshape(-1, 2, order="F"), x)
    check(lambda m, x: m.asarray(x).reshape(2, 3).flatten(), x)
    check(lambda m, x: m.asarray(x).reshape(2, 3).ravel(), x)
    check(lambda m: m.reshape(3.0, (1, 1)))  # weak scalar stays weak


@settings(max_examples=examples(6))
@given(arrays(), st.data())
def test_transpose_swapaxes_moveaxis(x, data):
    nd = x.ndim
    perm = tuple(data.draw(st.permutations(range(nd))))
    neg = tuple(p - nd if data.draw(st.booleans()) else p for p in perm)
    check(lambda m, x: m.transpose(x), x)
    check(lambda m, x: m.transpose(x, neg), x)
    check(lambda m, x: m.asarray(x).transpose(*perm) if perm else m.asarray(x).transpose(), x)
    check(lambda m, x: m.asarray(x).T, x)
    if nd:
        i, j = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
        check(lambda m, x: m.swapaxes(x, i, j), x)
        k = data.draw(st.integers(0, nd))
        src = tuple(data.draw(st.permutations(range(nd))))[:k]
        dst = tuple(data.draw(st.permutations(range(-nd, 0))))[:k]
        check(lambda m, x: m.moveaxis(x, src, dst), x)
        check(lambda m, x: m.moveaxis(x, i, j), x)


@settings(max_examples=examples(6))
@given(arrays(max_dims=3), st.data())
def test_expand_dims_squeeze(x, data):
    nd = x.ndim
    k = data.draw(st.integers(1, 3))
    axes = tuple(data.draw(st.lists(st.integers(-(nd + k), nd + k - 1), min_size=k, max_size=k,
                                    unique_by=lambda a: a % (nd + k))))
    check(lambda m, x: m.expand_dims(x, axes), x)
    a0 = data.draw(st.integers(-nd - 1, nd))
    check(lambda m, x: m.expand_dims(x, a0), x)
    y = np.expand_dims(x, tuple(a % (nd + k) for a in axes))
    check(lambda m, y: m.squeeze(y), y)
    ones = tuple(i - y.ndim if data.draw(st.booleans()) else i for i, d in enumerate(y.shape) if d == 1)
    check(lambda m, y: m.squeeze(y, ones), y)
    if ones:
        check(lambda m, y: m.squeeze(y, ones[0]), y)
        check(lambda m, y: m.asarray(y).squeeze(ones[0]), y)


def test_squeeze_and_expand_dims_errors():
    x = fnp.ones((2, 1, 3))
    with pytest.raises(ValueError, match=r"axis 0 of size 2"):
        fnp.squeeze(x, 0)
    with pytest.raises(ValueError, match=r"axis 5 .*dimension 3"):
        fnp.squeeze(x, 5)
    with pytest.raises(ValueError, match=r"axis 5 .*dimension 4"):
        fnp.expand_dims(x, 5)
    with pytest.raises(ValueError, match="repeated axis"):
        fnp.expand_dims(x, (0, -5))


def test_transpose_and_reshape_errors():
    x = fnp.ones((2, 3))
    with pytest.raises(TypeError, match=r"\(0,\).*\(2, 3\)"):
        fnp.transpose(x, (0,))
    with pytest.raises(TypeError, match="permutation"):
        fnp.transpose(x, (0, 0))
    with pytest.raises(ValueError, match=r"axis 2 .*dimension 2"):
        fnp.swapaxes(x, 0, 2)
    with pytest.raises(ValueError, match=r"axis -3 .*dimension 2"):
        fnp.moveaxis(x, -3, 0)
    with pytest.raises(ValueError, match="same number"):
        fnp.moveaxis(x, (0, 1), 0)
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4,\)"):
        fnp.reshape(x, (4,))
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4, -1\)"):
        fnp.reshape(x, (4, -1))
    with pytest.raises(TypeError, match="one unknown"):
        fnp.reshape(x, (-1, -1))
    with pytest.raises(NotImplementedError, match="order='A'"):
        fnp.reshape(x, (6,), order="A")
    with pytest.raises(ConcretizationTypeError, match="shape"):
        ftrans.make_jaxpr(lambda x, n: fnp.reshape(x, (n, 3)))(np.ones((2, 3)), 2)


# ---------------------------------------------------------------- broadcasting
@settings(max_examples=examples(6))
@given(arrays(max_dims=3), st.data())
def test_broadcast_to_arrays_shapes(x, data):
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    target = lead + tuple(data.draw(st.sampled_from([d, 3])) if d == 1 else d for d in x.shape)
    check(lambda m, x: m.broadcast_to(x, target), x)
    y = np.ones(target[len(target) - x.ndim:] if x.ndim else target, np.float32)
    check(lambda m, x, y: m.broadcast_arrays(x, y), x, y)
    assert fnp.broadcast_shapes(x.shape, target, ()) == jnp.broadcast_shapes(x.shape, target, ())


def test_broadcast_weak_and_errors():
    check(lambda m: m.broadcast_to(2.0, (3,)))
    check(lambda m: m.broadcast_arrays(2.0, np.ones(2, np.int8)))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 2\)"):
        fnp.broadcast_to(fnp.ones(3), (2, 2))
    with pytest.raises(ValueError, match="fewer dimensions"):
        fnp.broadcast_to(fnp.ones((2, 3)), (3,))
    with pytest.raises(ValueError, match="incompatible"):
        fnp.broadcast_shapes((2,), (3,))
    assert fnp.broadcast_shapes(3, (2, 1)) == (2, 3)


# ---------------------------------------------------------------- joining
@settings(max_examples=examples(6))
@given(arrays(min_dims=1, max_dims=3), st.data())
def test_concatenate_stack(x, data):
    nd = x.ndim
    ax = data.draw(st.integers(-nd, nd - 1))
    other_shape = list(x.shape)
    other_shape[ax] = data.draw(st.integers(0, 3))
    other_dtype = data.draw(st.sampled_from(DTYPES))
    y = np.ones(other_shape, other_dtype)
    check(lambda m, x, y: m.concatenate([x, y], axis=ax), x, y)
    check(lambda m, x, y: m.concatenate((x, y, x), axis=None), x, y)
    check(lambda m, x, y: m.concatenate([x, y], axis=ax, dtype=np.float32), x, y)
    sax = data.draw(st.integers(-nd - 1, nd))
    check(lambda m, x: m.stack([x, x + 1 if x.dtype != np.bool_ else x], axis=sax), x)
    if x.shape[0]:
        check(lambda m, x: m.stack(x, axis=ax), x)
    if nd > 1 and x.shape[0]:
        ax2 = data.draw(st.integers(-nd + 1, nd - 2))
        check(lambda m, x: m.concatenate(x, axis=ax2), x)


def test_stack_and_concatenate_promotion_and_weak():
    check(lambda m: m.stack([1.0, 2.0]))
    check(lambda m: m.stack([np.int8(1), 2.5]))
    check(lambda m, a: m.stack([a, a * 2], axis=-1, dtype=np.float32), np.arange(3, dtype=np.int8))
    check(lambda m, a, b: m.concatenate([a, b]), np.ones(2, np.int8), np.ones(3, np.uint8))
    check(lambda m, a: m.concatenate([a, m.atleast_1d(2.0)]), np.ones(2, np.float32))
    check(lambda m, a: m.concat([a, a], axis=0), np.ones(2, np.int32))
    check(lambda m, a: m.append(a, a[:1]), np.ones((2, 2), np.int32))
    check(lambda m, a: m.append(a, a[:1], axis=0), np.ones((2, 2), np.int32))
    check(lambda m, a: m.unstack(a, axis=1), np.arange(6, dtype=np.float32).reshape(2, 3))


@settings(max_examples=examples(6))
@given(arrays(max_dims=3, dtypes=[np.float32, np.int32]))
def test_hstack_vstack_dstack_column_stack(x):
    check(lambda m, x: m.hstack([x, x]), x)
    check(lambda m, x: m.vstack([x, x]), x)
    check(lambda m, x: m.dstack([x, x]), x)
    check(lambda m, x: m.vstack((x, 1.0)) if x.ndim <= 1 and x.size == 1 else m.vstack((x,)), x)
    if x.ndim <= 2:
        check(lambda m, x: m.column_stack([x, x]), x)
    if x.ndim >= 1 and x.shape[0]:
        check(lambda m, x: m.hstack(x), x)
        check(lambda m, x: m.vstack(x, dtype=np.float32), x)


def test_join_errors():
    with pytest.raises(ValueError, match="at least one array"):
        fnp.concatenate([])
    with pytest.raises(ValueError, match="zero-dimensional"):
        fnp.concatenate([fnp.array(1.0), fnp.array(2.0)])
    with pytest.raises(TypeError, match=r"number of dimensions.*\(2,\).*\(2, 2\)"):
        fnp.concatenate([fnp.ones(2), fnp.ones((2, 2))])
    with pytest.raises(TypeError, match=r"except axis 0.*\(2, 3\).*\(2, 2\)"):
        fnp.concatenate([fnp.ones((2, 3)), fnp.ones((2, 2))])
    with pytest.raises(ValueError, match=r"axis 2 .*dimension 2"):
        fnp.concatenate([fnp.ones((2, 3)), fnp.ones((2, 3))], axis=2)
    with pytest.raises(ValueError, match=r"same shape.*\(2,\).*\(3,\)"):
        fnp.stack([fnp.ones(2), fnp.ones(3)])
    with pytest.raises(ValueError, match="at least one array"):
        fnp.stack([])
    with pytest.raises(TypeError, match="asarray"):
        fnp.concatenate([[1, 2], [3]])


# ---------------------------------------------------------------- splitting
@settings(max_examples=examples(6))
@given(arrays(min_dims=1, max_dims=3, max_side=6), st.data())
def test_split_family(x, data):
    nd = x.ndim
    ax = data.draw(st.integers(-nd, nd - 1))
    n = x.shape[ax]
    sections = data.draw(st.sampled_from([k for k in range(1, 7) if n % k == 0]))
    check(lambda m, x: m.split(x, sections, axis=ax), x)
    idx = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    check(lambda m, x: m.split(x, idx, axis=ax), x)
    check(lambda m, x: m.split(x, np.array(idx, np.int32), axis=ax), x)
    k = data.draw(st.integers(1, 5))
    check(lambda m, x: m.array_split(x, k, axis=ax), x)
    hk = data.draw(st.sampled_from([k for k in range(1, 7) if x.shape[1 if nd > 1 else 0] % k == 0]))
    check(lambda m, x: m.hsplit(x, hk), x)
    if x.shape[0] % 2 == 0:
        check(lambda m, x: m.vsplit(x, 2), x)
    if nd >= 3:
        check(lambda m, x: m.dsplit(x, [1]), x)


def test_split_errors():
    x = fnp.ones(5)
    with pytest.raises(ValueError, match=r"equal division.*size 5.*2 sections"):
        fnp.split(x, 2)
    with pytest.raises(ValueError, match="larger than 0"):
        fnp.array_split(x, 0)
    with pytest.raises(ValueError, match="non-decreasing"):
        fnp.split(fnp.arange(6), [4, 2])
    with pytest.raises(ValueError, match=r"axis 1 .*dimension 1"):
        fnp.split(x, 1, axis=1)
    with pytest.raises(ValueError, match="0-d"):
        fnp.hsplit(fnp.array(1.0), 1)
    assert isinstance(fnp.split(x, 1), list)


# ---------------------------------------------------------------- tile / repeat
@settings(max_examples=examples(6))
@given(arrays(max_dims=3), st.data())
def test_tile(x, data):
    reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4).map(tuple)))
    check(lambda m, x: m.tile(x, reps), x)


@settings(max_examples=examples(6))
@given(arrays(max_dims=3, max_side=5), st.data())
def test_repeat(x, data):
    nd = x.ndim
    r = data.draw(st.integers(0, 3))
    check(lambda m, x: m.repeat(x, r), x)
    if nd:
        ax = data.draw(st.integers(-nd, nd - 1))
        check(lambda m, x: m.repeat(x, r, axis=ax), x)
        check(lambda m, x: m.asarray(x).repeat(r, axis=ax), x)
        per = np.array(data.draw(st.lists(st.integers(0, 3), min_size=x.shape[ax], max_size=x.shape[ax])),
                       np.int32)
        check(lambda m, x: m.repeat(x, per, axis=ax), x)
        if x.shape[ax]:
            total = data.draw(st.integers(0, 8))
            check(lambda m, x: m.repeat(x, per, axis=ax, total_repeat_length=total), x)
            check(lambda m, x: m.repeat(x, r, axis=ax, total_repeat_length=total), x)


def test_repeat_weak_and_errors():
    check(lambda m: m.repeat(2.0, 3))
    check(lambda m: m.repeat(m.atleast_1d(2.0), np.array([2])))
    check(lambda m: m.tile(2.0, 3))
    with pytest.raises(ValueError, match=r"\(2,\).*size 3"):
        fnp.repeat(fnp.ones(3), fnp.array([1, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        fnp.repeat(fnp.ones(3), -1)
    with pytest.raises(ConcretizationTypeError, match="repeats"):
        ftrans.make_jaxpr(lambda x, r: fnp.repeat(x, r))(np.ones(3), np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"\(2,\).*size 3"):
        ftrans.jit(lambda x, r: fnp.repeat(x, r, total_repeat_length=4))(np.ones(3), np.array([1, 2]))
    with pytest.raises(TypeError, match="integers"):
        ftrans.jit(lambda x, r: fnp.repeat(x, r, total_repeat_length=4))(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        fnp.tile(fnp.ones(2), -1)


@settings(max_examples=examples(8))
@given(arrays(min_dims=1, max_dims=3, max_side=5), st.data())
def test_repeat_traced_repeats_with_total(x, data):
    """Traced repeats need total_repeat_length (as JAX): runs past it are cut, a short total is
    filled with the last element."""
    ax = data.draw(st.sampled_from([None] + list(range(-x.ndim, x.ndim))))
    n = x.size if ax is None else x.shape[ax]
    per = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int32)
    rep = data.draw(st.sampled_from([per, np.int32(2), np.array([3], np.int32)]))
    total = data.draw(st.sampled_from([0, 1, 7, int(np.repeat(np.zeros(x.shape), rep, ax).shape[ax or 0])]))
    fj = jax.jit(lambda x, r: jnp.repeat(x, r, axis=ax, total_repeat_length=total))
    ff = ftrans.jit(lambda x, r: fnp.repeat(x, r, axis=ax, total_repeat_length=total))
    _assert_leaf(ff(x, rep), fj(x, rep), "jit")
    check(lambda m, x, r: m.repeat(x, r, axis=ax, total_repeat_length=total), x, rep)


def test_repeat_stages_few_equations():
    closed = ftrans.make_jaxpr(lambda x: fnp.repeat(x, 3, axis=0))(np.ones((1000, 2), np.float32))
    assert len(closed.eqns) <= 2
    assert not closed.consts


# ---------------------------------------------------------------- flips and rolls
@settings(max_examples=examples(6))
@given(arrays(), st.data())
def test_flip_family(x, data):
    nd = x.ndim
    check(lambda m, x: m.flip(x), x)
    if nd:
        axes = tuple(data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                                        unique_by=lambda a: a % nd)))
        check(lambda m, x: m.flip(x, axes), x)
        check(lambda m, x: m.flip(x, axes[0]), x)
        check(lambda m, x: m.flipud(x), x)
    if nd >= 2:
        check(lambda m, x: m.fliplr(x), x)
        k = data.draw(st.integers(-5, 5))
        a0, a1 = data.draw(st.permutations(range(-nd, 0)))[:2]
        check(lambda m, x: m.rot90(x, k), x)
        check(lambda m, x: m.rot90(x, k, axes=(a0, a1)), x)


@settings(max_examples=examples(6))
@given(arrays(), st.data())
def test_roll(x, data):
    nd = x.ndim
    s = data.draw(st.integers(-7, 7))
    check(lambda m, x: m.roll(x, s), x)
    if nd:
        ax = data.draw(st.integers(-nd, nd - 1))
        check(lambda m, x: m.roll(x, s, axis=ax), x)
        axes = tuple(data.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=3)))
        shifts = tuple(data.draw(st.lists(st.integers(-6, 6), min_size=len(axes), max_size=len(axes))))
        check(lambda m, x: m.roll(x, shifts, axis=axes), x)
        check(lambda m, x: m.roll(x, s, axis=axes), x)
        # A traced shift.
        check(lambda m, x, sh: m.roll(x, sh, axis=ax), x, np.int32(s))


def test_roll_traced_shift_and_flip_errors():
    check(lambda m, x, s: m.roll(x, s), np.arange(7, dtype=np.float32), np.int32(-9))
    check(lambda m, x, s: m.roll(x, s, axis=(0, 1)), np.arange(12).reshape(3, 4), np.array([1, -5], np.int32))
    check(lambda m: m.roll(2.0, 1))
    with pytest.raises(ValueError, match=r"axis 1 .*dimension 1"):
        fnp.flip(fnp.ones(2), 1)
    with pytest.raises(ValueError, match=r"axis 1 .*dimension 1"):
        fnp.fliplr(fnp.ones(2))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        fnp.rot90(fnp.ones(2))
    with pytest.raises(ValueError, match="different"):
        fnp.rot90(fnp.ones((2, 2)), axes=(0, -2))


# ---------------------------------------------------------------- pad
PAD_MODES = ["constant", "edge", "wrap", "reflect", "symmetric", "empty"]


def _pad_width_strategy(nd):
    w = st.integers(0, 5)
    return st.one_of(w, st.tuples(w, w), st.tuples(st.tuples(w, w)),
                     st.tuples(*[st.tuples(w, w)] * nd), st.tuples(w))


@settings(max_examples=examples(6))
@given(arrays(max_dims=3, min_side=1), st.data())
def test_pad(x, data):
    pw = data.draw(_pad_width_strategy(x.ndim))
    mode = data.draw(st.sampled_from(PAD_MODES))
    check(lambda m, x: m.pad(x, pw, mode=mode), x)
    if mode == "constant" and x.dtype != np.bool_:
        cv = data.draw(st.one_of(st.integers(-3, 3), st.tuples(st.integers(0, 9), st.integers(0, 9)),
                                 st.tuples(*[st.tuples(st.integers(0, 9), st.integers(0, 9))] * x.ndim)
                                 if x.ndim else st.just(1)))
        check(lambda m, x: m.pad(x, pw, constant_values=cv), x)
    if mode in ("reflect", "symmetric") and x.dtype.kind in "fi":
        check(lambda m, x: m.pad(x, pw, mode=mode, reflect_type="odd"), x)


def test_pad_traced_constant_and_weak():
    check(lambda m, x, c: m.pad(x, ((1, 2), (0, 1)), constant_values=c), np.ones((2, 2), np.float32),
          np.float32(7))
    check(lambda m, x, c: m.pad(x, 1, constant_values=c), np.ones((2, 2), np.int32), 2.7)
    check(lambda m: m.pad(m.atleast_1d(2.0), 2))
    check(lambda m: m.pad(m.atleast_1d(2.0), 2, mode="reflect"))
    check(lambda m: m.pad(2.0, 1))
    check(lambda m, x: m.pad(x, 7, mode="reflect"), np.arange(3, dtype=np.float32))
    check(lambda m, x: m.pad(x, 7, mode="symmetric", reflect_type="odd"), np.arange(3, dtype=np.float32))


@settings(max_examples=examples(8))
@given(arrays(min_dims=1, max_dims=3, min_side=1, dtypes=(np.float32, np.int32, np.uint8)), st.data())
def test_pad_stat_modes(x, data):
    """'maximum'/'minimum'/'mean'/'median' with and without stat_length, against jnp.pad."""
    pw = data.draw(_pad_width_strategy(x.ndim))
    mode = data.draw(st.sampled_from(["maximum", "minimum", "mean", "median"]))
    sl = data.draw(st.sampled_from([None, 1, 2, (1, 3), ((2, 1),)]))
    check(lambda m, x: m.pad(x, pw, mode=mode, stat_length=sl), x)


@settings(max_examples=examples(8))
@given(arrays(min_dims=1, max_dims=3, min_side=1, dtypes=(np.float32, np.complex64)), st.data())
def test_pad_linear_ramp(x, data):
    pw = data.draw(_pad_width_strategy(x.ndim))
    ev = data.draw(st.sampled_from([0, 3.5, -5, (1, 2), ((2.0, 3.14),)]))
    check(lambda m, x: m.pad(x, pw, mode="linear_ramp", end_values=ev), x)


def test_pad_new_modes_weak_type_and_callable():
    for mode in ["linear_ramp", "maximum", "minimum", "mean", "median"]:
        check(lambda m, mode=mode: m.pad(m.atleast_1d(2.0), 2, mode=mode))
        check(lambda m, x, mode=mode: m.pad(x, ((1, 2), (2, 0)), mode=mode),
              np.arange(12, dtype=np.int32).reshape(3, 4))

    def padder(m):
        def f(v, pw, iaxis, kwargs):
            v = v.at[:pw[0]].set(kwargs.get("padder", 10))
            return v.at[v.shape[0] - pw[1]:].set(kwargs.get("padder", 10))
        return f

    check(lambda m, x: m.pad(x, 1, padder(m), padder=100), np.arange(24).reshape(2, 3, 4))
    check(lambda m, x: m.pad(x, (2, 1), padder(m)), np.arange(6.0).reshape(2, 3))


def test_pad_errors():
    x = fnp.ones(3)
    with pytest.raises(ValueError, match="negative"):
        fnp.pad(x, -1)
    with pytest.raises(NotImplementedError, match="foo"):
        fnp.pad(x, 1, mode="foo")
    with pytest.raises(NotImplementedError, match="Unimplemented padding mode 'None'"):
        fnp.pad(x, 1, mode=None)
    with pytest.raises(ValueError, match="stat_length of 0"):
        fnp.pad(x, 1, mode="mean", stat_length=0)
    with pytest.raises(ValueError, match="unsupported keyword arguments for mode 'maximum'"):
        fnp.pad(x, 1, mode="maximum", end_values=0)
    with pytest.raises(ValueError, match="constant_values"):
        fnp.pad(x, 1, mode="edge", constant_values=1)
    with pytest.raises(ValueError, match="empty axis 0"):
        fnp.pad(fnp.ones(0), 1, mode="edge")
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        fnp.pad(x, ((1, 2), (3, 4)))
    with pytest.raises(TypeError, match="integral"):
        fnp.pad(x, 1.5)
    with pytest.raises(ConcretizationTypeError, match="pad_width"):
        ftrans.make_jaxpr(lambda x, w: fnp.pad(x, w))(np.ones(3), 1)


# ---------------------------------------------------------------- atleast_nd, sizes
@settings(max_examples=examples(6))
@given(arrays(max_dims=4))
def test_atleast(x):
    check(lambda m, x: m.atleast_1d(x), x)
    check(lambda m, x: m.atleast_2d(x), x)
    check(lambda m, x: m.atleast_3d(x), x)
    check(lambda m, x: m.atleast_3d(x, x[..., None]), x)
    assert fnp.shape(x) == jnp.shape(x) and fnp.ndim(x) == jnp.ndim(x) and fnp.size(x) == jnp.size(x)
    if x.ndim:
        assert fnp.size(x, -1) == x.shape[-1]


def test_atleast_weak_and_sizes():
    check(lambda m: m.atleast_1d(2.0))
    check(lambda m: m.atleast_2d(2.0))
    check(lambda m: m.atleast_3d(2, 3.0))
    assert fnp.atleast_1d() == () and fnp.atleast_2d() == () and fnp.atleast_3d() == ()
    for fn in ("shape", "ndim", "size"):  # sequences still work but are deprecated, as in JAX
        for m in (jnp, fnp):
            with pytest.warns(DeprecationWarning, match=f"{fn} requires ndarray or scalar arguments"):
                got = getattr(m, fn)([[1, 2, 3]])
            assert got == {"shape": (1, 3), "ndim": 2, "size": 3}[fn]
    assert fnp.size(fnp.ones((2, 3, 4)), (0, 2)) == 8
    assert fnp.ndim(3.0) == 0
    closed = ftrans.make_jaxpr(lambda x: fnp.size(x) + fnp.ndim(x))(np.ones((2, 3)))
    assert not closed.eqns or all(e.primitive.name != "reshape" for e in closed.eqns)


def test_matrix_transpose_permute_dims():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check(lambda m, x: m.matrix_transpose(x), x)
    check(lambda m, x: m.permute_dims(x, (2, 0, 1)), x)
    check(lambda m, x: m.asarray(x).mT, x)


@pytest.mark.parametrize("fn,args", [
    ("expand_dims", (range(2),)),
    ("squeeze", (range(2),)),
    ("moveaxis", (range(2), range(1, 3))),
    ("flip", (range(2),)),
    ("size", (range(2),)),
])
def test_axis_given_as_any_iterable(fn, args):
    # JAX takes any iterable of ints (a range, a generator) where an axis tuple is expected
    x = np.arange(3.0).reshape(1, 1, 3) if fn != "expand_dims" else np.arange(3.0)
    want = getattr(jnp, fn)(x, *args)
    got = getattr(fnp, fn)(x, *args)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.shape(got) == np.shape(want)
    gen = fnp.expand_dims(np.arange(3.0), (a for a in (0, 2)))
    assert gen.shape == jnp.expand_dims(np.arange(3.0), (0, 2)).shape


def test_repeat_of_an_empty_axis_with_a_total_stays_empty_like_jax():
    for x, r, kw in [(np.zeros(0, np.float32), np.zeros(0, np.int32), {}), (np.zeros(0, np.float32), 2, {}),
                     (np.zeros((2, 0), np.float32), 2, {"axis": 1})]:
        want = jnp.repeat(x, r, total_repeat_length=3, **kw)
        got = fnp.repeat(x, r, total_repeat_length=3, **kw)
        assert got.shape == want.shape and got.dtype == want.dtype
