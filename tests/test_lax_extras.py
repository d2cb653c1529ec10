"""``lax.reduce`` (monoids and general computations), ``lax.reduce_precision`` and ``lax.ragged_dot`` /
``ragged_dot_general`` against jax: values, gradients, vmap, jit, and the errors."""

from __future__ import annotations

import functools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from tests.backend_util import host_oracle, on_cpu


def close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype, (x.dtype, y.dtype)
        assert x.shape == y.shape, (x.shape, y.shape)
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=tol, atol=tol)


rng = np.random.RandomState(0)
X = rng.randn(3, 4, 5).astype(np.float32)


# ---------------------------------------------------------------- lax.reduce

MONOIDS = [("add", 0.0, "reduce_sum"), ("mul", 1.0, "reduce_prod"), ("max", -np.inf, "reduce_max"),
           ("min", np.inf, "reduce_min")]


@pytest.mark.parametrize("op,init,prim", MONOIDS)
@pytest.mark.parametrize("dims", [(0,), (1, 2), (0, 1, 2)])
def test_monoid_reduce_binds_the_reduction(op, init, prim, dims):
    fo, jo = getattr(flax, op), getattr(jlax, op)
    close(flax.reduce(X, np.float32(init), fo, dims), jlax.reduce(X, np.float32(init), jo, dims), 1e-4)
    eqns = ftrans.make_jaxpr(lambda x: flax.reduce(x, np.float32(init), fo, dims))(X).eqns
    assert [e.primitive.name for e in eqns] == [prim]
    # a lambda of the same op is recognised too
    eqns = ftrans.make_jaxpr(lambda x: flax.reduce(x, np.float32(init), lambda a, b: fo(a, b), dims))(X).eqns
    assert [e.primitive.name for e in eqns] == [prim]


@pytest.mark.parametrize("op,init,prim", [("bitwise_or", False, "reduce_or"), ("bitwise_and", True, "reduce_and"),
                                          ("bitwise_xor", False, "reduce_xor")])
def test_boolean_monoids(op, init, prim):
    b = rng.rand(4, 6) > 0.5
    close(flax.reduce(b, init, getattr(flax, op), (1,)), jlax.reduce(b, init, getattr(jlax, op), (1,)))
    eqns = ftrans.make_jaxpr(lambda x: flax.reduce(x, np.bool_(init), getattr(flax, op), (1,)))(b).eqns
    assert [e.primitive.name for e in eqns] == [prim]


def test_weak_types_follow_jax():
    for operand, init in [(2.0, 0.0), (np.float32(2), 0.0), (np.ones(3, np.float32), 0.0)]:
        fo = flax.reduce(operand, init, flax.add, () if np.ndim(operand) == 0 else (0,))
        jo = jlax.reduce(operand, init, jlax.add, () if np.ndim(operand) == 0 else (0,))
        assert fo.weak_type == jo.weak_type
        close(fo, jo)


def _argmax_like(L):
    def comp(a, b):
        take = L.gt(b[0], a[0])
        return (L.select(take, b[0], a[0]), L.select(take, b[1], a[1]))
    return comp


def _general(L, np_):
    def f(x):
        idx = L.broadcasted_iota(np.int32, x.shape, 1)
        return L.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), _argmax_like(L), (1,))
    return f


def test_general_variadic_reduce_values_jit_vmap():
    ff, jf = _general(flax, fjnp), _general(jlax, jjnp)
    close(ff(X), jf(X))
    close(ftrans.jit(ff)(X), jf(X))
    close(ftrans.vmap(ff)(X), jax.vmap(jf)(X))
    close(ftrans.vmap(ff, in_axes=2)(X), jax.vmap(jf, in_axes=2)(X))
    closed = ftrans.make_jaxpr(ff)(X)
    assert [e.primitive.name for e in closed.eqns][-1] == "reduce"
    assert "stablehlo.reduce" in ftrans.jit(ff).lower(X).as_text()


def test_non_identity_init_is_the_general_reduce():
    f = lambda L: (lambda x: L.reduce(x, np.float32(0.25), L.max, (0, 2)))  # noqa: E731
    close(f(flax)(X), f(jlax)(X))
    close(ftrans.jit(f(flax))(X), f(jlax)(X))
    assert [e.primitive.name for e in ftrans.make_jaxpr(f(flax))(X).eqns] == ["reduce"]


def _smooth(L, np_):
    """A differentiable non-monoid computation: a sum of squares' accumulator (a + b*b is not associative in
    general, so use a commutative, associative one: logaddexp)."""
    def f(x):
        comp = lambda a, b: L.max(a, b) + L.log1p(L.exp(-L.abs(a - b)))  # noqa: E731
        return L.reduce(x, np.float32(-np.inf), comp, (1,))
    return f


def test_general_reduce_gradients():
    ff, jf = _smooth(flax, fjnp), _smooth(jlax, jjnp)
    lf = lambda x: fjnp.sum(ff(x) ** 2)  # noqa: E731
    lj = lambda x: jjnp.sum(jf(x) ** 2)  # noqa: E731
    t = np.ones_like(X)
    # the oracle as one jitted jax program (eager jax compiles each operation of each transform anew)
    value, grad, vgrad, jvp, softmax = jax.jit(lambda x, t: (
        jf(x), jax.grad(lj)(x), jax.vmap(jax.grad(lj))(x), jax.jvp(jf, (x,), (t,)),
        jax.grad(lambda x: jjnp.sum(jax.nn.logsumexp(x, 1)))(x)))(X, t)
    close(ff(X), value, 1e-4)
    close(ftrans.grad(lf)(X), grad, 1e-4)
    close(ftrans.jit(ftrans.grad(lf))(X), grad, 1e-4)
    close(ftrans.vmap(ftrans.grad(lf))(X), vgrad, 1e-4)
    close(ftrans.jvp(ff, (X,), (t,)), jvp, 1e-4)
    # and against the closed form: the gradient of logsumexp is softmax
    close(ftrans.grad(lambda x: fjnp.sum(ff(x)))(X), softmax, 1e-4)


@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), seed=st.integers(0, 50))
def test_general_reduce_hypothesis(shape, seed):
    r = np.random.RandomState(seed)
    x = r.randn(*shape).astype(np.float32)
    dims = tuple(d for d in range(len(shape)) if r.rand() < 0.6)
    ff = lambda L: (lambda x: L.reduce(x, np.float32(-3.0), L.max, dims))  # noqa: E731
    close(flax.reduce(x, np.float32(-3.0), flax.max, dims), jlax.reduce(x, np.float32(-3.0), jlax.max, dims))
    close(ftrans.jit(ff(flax))(x), ff(jlax)(x))


def test_reduce_errors():
    with pytest.raises(ValueError, match="tree structure"):
        flax.reduce((X, X), (0.0,), flax.add, (0,))
    with pytest.raises(TypeError, match="dtypes should match"):
        flax.reduce(X, np.int32(0), flax.add, (0,))
    with pytest.raises(ValueError, match="out of bounds"):
        flax.reduce(X, 0.0, flax.add, (3,))
    with pytest.raises(TypeError, match="structure"):
        flax.reduce((X, X), (0.0, 0.0), lambda a, b: a[0] + b[0], (0,))


def test_reduce_init_gradient_is_not_supported():
    f = lambda i: fjnp.sum(flax.reduce(X, i, lambda a, b: flax.max(a, b) * 1.0, (0,)))  # noqa: E731
    with pytest.raises(NotImplementedError, match="init"):
        ftrans.jit(ftrans.grad(f))(np.float32(0.5))


# ---------------------------------------------------------------- reduce_precision

VALUES = np.concatenate([rng.randn(400) * 10.0 ** rng.randint(-40, 40, 400),
                         [np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, 65520, 1e-8, 6e-8, 3e-8, 3.0, 2.5]])


_RP_BITS = [(5, 10), (8, 7), (4, 3), (5, 2), (2, 0), (8, 23), (11, 52)]


@functools.cache
def _xla_reduce_precision(dtype):
    """XLA's ``reduce_precision`` of ``VALUES`` at every width of ``_RP_BITS``, from one jax program."""
    with np.errstate(over="ignore"):
        x = VALUES.astype(dtype)
    return [np.asarray(v) for v in jax.jit(lambda x: [jlax.reduce_precision(x, e, m) for e, m in _RP_BITS])(x)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("bits", _RP_BITS)
def test_reduce_precision_bits_match_xla(dtype, bits):
    with np.errstate(over="ignore"):
        x = VALUES.astype(dtype)
    e, m = bits
    want = _xla_reduce_precision(dtype)[_RP_BITS.index(bits)]
    # With no mantissa bits a NaN has no payload to keep: XLA's code gives NaN or infinity there by
    # emitter and LLVM level (its fusion emitters NaN, its loop emitters and some levels infinity).
    either = np.isnan(x) if m == 0 else np.zeros(x.shape, bool)
    for got in (flax.reduce_precision(x, e, m), ftrans.jit(lambda x: flax.reduce_precision(x, e, m))(x)):
        got = np.asarray(got)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float64)[~either], want.astype(np.float64)[~either])
        assert (np.isnan(got[either]) | np.isinf(got[either])).all()


def test_reduce_precision_transforms():
    x = rng.randn(6).astype(np.float32)
    f = lambda L, np_: (lambda x: np_.sum(L.reduce_precision(x * 3.0, 5, 2) ** 2))  # noqa: E731
    close(ftrans.grad(f(flax, fjnp))(x), jax.grad(f(jlax, jjnp))(x))
    close(ftrans.vmap(lambda x: flax.reduce_precision(x, 4, 3))(x.reshape(2, 3)),
          jax.vmap(lambda x: jlax.reduce_precision(x, 4, 3))(x.reshape(2, 3)))
    with pytest.raises(TypeError):
        flax.reduce_precision(np.arange(3), 5, 2)


# ---------------------------------------------------------------- ragged_dot


def _sizes(m, g, r):
    cuts = np.sort(r.choice(m + 1, size=g - 1))
    return np.diff(np.concatenate([[0], cuts, [m]])).astype(np.int32)


@pytest.mark.parametrize("m,k,n,g", [(11, 5, 7, 3), (8, 4, 3, 1), (9, 4, 3, 2)])
def test_ragged_dot_values_grad_vmap(m, k, n, g):
    r = np.random.RandomState(m)
    lhs, rhs = r.randn(m, k).astype(np.float32), r.randn(g, k, n).astype(np.float32)
    gs = _sizes(m, g, r)
    short = np.maximum(gs - 1, 0).astype(np.int32)  # rows past the last group are zero
    lf = lambda a, b: fjnp.sum(flax.ragged_dot(a, b, gs) ** 2)  # noqa: E731
    lj = lambda a, b: jjnp.sum(jlax.ragged_dot(a, b, gs) ** 2)  # noqa: E731
    gsb = np.stack([gs, gs[::-1].copy()])
    args = (np.stack([lhs, 2 * lhs]), np.stack([rhs, rhs + 1]), gsb)
    # the oracle as one jitted jax program
    value, value_short, grad, batched = jax.jit(lambda lhs, rhs, short, args: (
        jlax.ragged_dot(lhs, rhs, gs), jlax.ragged_dot(lhs, rhs, short), jax.grad(lj, (0, 1))(lhs, rhs),
        jax.vmap(jlax.ragged_dot)(*args)))(lhs, rhs, short, args)
    close(flax.ragged_dot(lhs, rhs, gs), value, 1e-4)
    close(ftrans.jit(flax.ragged_dot)(lhs, rhs, gs), value, 1e-4)
    close(flax.ragged_dot(lhs, rhs, short), value_short, 1e-4)
    close(ftrans.grad(lf, (0, 1))(lhs, rhs), grad, 1e-3)
    close(ftrans.vmap(flax.ragged_dot)(*args), batched, 1e-4)


GENERAL = [
    ([11, 5], [5, 7], [3], (([1], [0]), ([], [])), [1], []),                       # ragged contracting
    ([2, 11, 5], [2, 5, 7], [2, 3], (([2], [1]), ([0], [0])), [2], []),           # ... with a batch dim
    ([19, 17, 11, 5], [3, 19, 5, 7], [19, 3], (([3], [2]), ([0], [1])), [1], [0]),  # non-contracting, batched
    ([4, 6, 5], [4, 5, 7], [3], (([2], [1]), ([0], [0])), [0], []),                # ragged batch
    ([2, 11, 5], [3, 2, 5, 7], [3], (([2], [2]), ([0], [1])), [1], [0]),
]


@pytest.mark.parametrize("case", range(len(GENERAL)))
def test_ragged_dot_general_modes(case):
    ls, rs, gsh, dd, lr, rg = GENERAL[case]
    r = np.random.RandomState(case)
    x, y = r.randn(*ls).astype(np.float32), r.randn(*rs).astype(np.float32)
    g = r.randint(0, 4, size=gsh).astype(np.int32)
    fd, jd = flax.RaggedDotDimensionNumbers(dd, lr, rg), jlax.RaggedDotDimensionNumbers(dd, lr, rg)
    lf = lambda a, b: fjnp.sum(flax.ragged_dot_general(a, b, g, fd) ** 2)  # noqa: E731
    lj = lambda a, b: jjnp.sum(jlax.ragged_dot_general(a, b, g, jd) ** 2)  # noqa: E731
    transposable = lr[0] not in dd[0][0] and lr[0] not in dd[1][0]  # jax transposes the non-contracting mode only
    # the oracle as one jitted jax program: the value, and the gradient or the JVP; on the CPU device, as
    # ftrans's eager calls below run on the host (and XLA's GPU compiler rejects jax's program of case 4)
    with host_oracle():
        value, deriv = jax.jit(lambda x, y: (jlax.ragged_dot_general(x, y, g, jd), jax.grad(lj, (0, 1))(x, y)
                                             if transposable else
                                             jax.jvp(lambda a: jlax.ragged_dot_general(a, y, g, jd), (x,), (x,))))(x, y)
    close(flax.ragged_dot_general(x, y, g, fd), value, 1e-4)
    if transposable:
        close(ftrans.grad(lf, (0, 1))(x, y), deriv, 1e-3)
    else:
        close(ftrans.jvp(lambda a: flax.ragged_dot_general(a, y, g, fd), (x,), (x,)), deriv, 1e-4)


FAILURES = [
    ([11, 5], [3, 5, 7], [3], (([1], [1]), ([], [])), [0, 1], [0], "exactly one lhs ragged dimension"),
    ([11, 5], [3, 5, 7], [3], (([1], [1]), ([], [])), [2], [0], "lhs ragged dimension numbers to be nonnegative"),
    ([11, 5], [3, 5, 7], [2, 3], (([1], [1]), ([], [])), [0], [0], r"shape \(3,\), got \(2, 3\)"),
    ([19, 11, 17, 5], [19, 17, 5, 7], [19, 11, 3], (([2, 3], [1, 2]), ([0], [0])), [3], [],
     r"shape \(19, 17, 3\), got \(19, 11, 3\)"),
    ([19, 11, 5], [19, 5, 7], [19, 3], (([2], [1]), ([0], [0])), [1], [0], "distinct from contracting"),
    ([11, 5], [3, 5, 7], [2], (([1], [1]), ([], [])), [0], [0], "group dimension size to be 2, got 3"),
    ([11, 5], [3, 5, 7], [3], (([1], [1]), ([], [])), [1], [0], "zero group dimensions"),
    ([11, 5], [5, 7], [3], (([1], [0]), ([], [])), [0], [], "exactly one rhs group dimension"),
]


@pytest.mark.parametrize("case", range(len(FAILURES)))
def test_ragged_dot_general_errors_match_jax(case):
    ls, rs, gsh, dd, lr, rg, msg = FAILURES[case]
    x, y, g = np.ones(ls, np.float32), np.ones(rs, np.float32), np.ones(gsh, np.int32)
    with pytest.raises(TypeError, match=msg):
        jlax.ragged_dot_general(x, y, g, jlax.RaggedDotDimensionNumbers(dd, lr, rg))
    with pytest.raises(TypeError, match=msg):
        flax.ragged_dot_general(x, y, g, flax.RaggedDotDimensionNumbers(dd, lr, rg))


# ---------------------------------------------------------------- thin wrappers (issue 18, item 5)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("args", [((2, 3), 1.5), ((2,), 3, np.int8), ((), True), ((0,), np.array(0, np.int32)),
                                  ((3,), np.float32(2.0), np.float16)])
def test_full(args):
    a, b = flax.full(*args), jlax.full(*args)
    same(a, b)
    assert a.weak_type == b.weak_type
    same(ftrans.jit(lambda v: flax.full(args[0], v, *args[2:]))(args[1]),
         jax.jit(lambda v: jlax.full(args[0], v, *args[2:]))(args[1]))
    with pytest.raises(TypeError, match="scalar fill_value"):
        flax.full((2,), np.ones(2))


def test_full_like_and_empty():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for args in [(x, 2.0), (x, 1, np.int32), (x, 1.0, None, (4,)), (2.0, 1)]:
        a, b = flax.full_like(*args), jlax.full_like(*args)
        same(a, b)
        assert a.weak_type == b.weak_type
    e = flax.empty((2, 3), np.int16)
    assert e.shape == (2, 3) and e.dtype == np.int16


def test_shape_helpers():
    assert flax.broadcast_shapes((2, 1), (1, 3), (3,)) == jlax.broadcast_shapes((2, 1), (1, 3), (3,))
    with pytest.raises(ValueError, match="Incompatible shapes"):
        flax.broadcast_shapes((2,), (3,))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    same(flax.broadcast_to_rank(x, 4), jlax.broadcast_to_rank(x, 4))
    same(flax.broadcast_like(np.arange(3.0), np.zeros((2, 3))),
         jlax.broadcast_like(np.arange(3.0), np.zeros((2, 3))))
    y = np.arange(24.0).reshape(2, 3, 4)
    for a in [(0, 2), (1, None), (0, 3), (1, 1), (-2, None)]:
        same(flax.collapse(y, *a), jlax.collapse(y, *a))
    same(flax.tile(x, (2, 3)), jlax.tile(x, (2, 3)))
    for a, b in zip(flax.split(y, (1, 0, 3), 2), jlax.split(y, (1, 0, 3), 2)):
        same(a, b)
    with pytest.raises(ValueError):
        flax.split(y, (1, 1), 2)
    same(flax.shape_as_value((2, 3)), jlax.shape_as_value((2, 3)))
    assert flax.conv_shape_tuple((2, 3, 10, 10), (4, 3, 3, 3), (1, 2), "SAME") == \
        jlax.conv_shape_tuple((2, 3, 10, 10), (4, 3, 3, 3), (1, 2), "SAME")
    args = ((10, 7), (3, 2), (2, 1), ((1, 1), (0, 0)), (1, 2), (2, 1))
    assert flax.reduce_window_shape_tuple(*args) == jlax.reduce_window_shape_tuple(*args)
    assert flax.dtype(1.0) == jlax.dtype(1.0) and flax.dtype(np.int8) == jlax.dtype(np.int8)


def test_wrappers_differentiate_and_batch():
    x = rng.randn(2, 3, 4).astype(np.float32)
    fns = [lambda L: (lambda v: (L.tile(v, (1, 2, 1)) ** 2).sum()),
           lambda L: (lambda v: (L.split(v, (1, 3), 2)[1] ** 3).sum()),
           lambda L: (lambda v: L.batch_matmul(v, v.transpose(0, 2, 1)).sum()),
           lambda L: (lambda v: (L.reciprocal(v + 3.0) * 2.0).sum()),
           lambda L: (lambda v: (L.collapse(v, 1) ** 2).sum())]
    xs = np.stack([x, 2 * x])
    # the oracle as one jitted jax program for all five functions
    wants = jax.jit(lambda x, xs: [(jax.grad(f(jlax))(x), jax.vmap(f(jlax))(xs), f(jlax)(x)) for f in fns])(x, xs)
    for f, (grad, batched, value) in zip(fns, wants):
        same(ftrans.grad(f(flax))(x), grad)
        same(ftrans.vmap(f(flax))(xs), batched)
        same(ftrans.jit(f(flax))(x), value)


@pytest.mark.parametrize("d", [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32])
def test_clz_and_mulhi(d):
    info = np.iinfo(d)
    r = np.random.RandomState(3)
    v = np.concatenate([[info.min, info.max, 0, 1, 2, 3], r.randint(info.min, int(info.max) + 1, 30)]).astype(d)
    w = np.concatenate([[info.max, info.min, 5, info.max, 2, 7], r.randint(info.min, int(info.max) + 1, 30)]
                       ).astype(d)
    same(flax.clz(v), jlax.clz(v))
    same(flax.mulhi(v, w), jlax.mulhi(v, w))
    same(ftrans.jit(flax.mulhi)(v, w), jlax.mulhi(v, w))
    same(ftrans.vmap(flax.clz)(v.reshape(6, 6)), jlax.clz(v.reshape(6, 6)))
    with pytest.raises(TypeError):
        flax.clz(np.ones(3, np.float32))


def test_index_take_and_approx_k():
    src = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
    idx = (np.array([0, 2, -1], np.int32), np.array([1, 3, 5], np.int32))
    same(flax.index_take(src, idx, (0, 2)), jlax.index_take(src, idx, (0, 2)))
    same(ftrans.grad(lambda s: flax.index_take(s, idx, (0, 2)).sum())(src),
         jax.grad(lambda s: jlax.index_take(s, idx, (0, 2)).sum())(src))
    z = rng.randn(3, 10).astype(np.float32)
    for f, j in [(flax.approx_max_k, jlax.approx_max_k), (flax.approx_min_k, jlax.approx_min_k)]:
        for a, b in zip(f(z, 3), j(z, 3)):
            same(a, b)
        for a, b in zip(f(z, 2, reduction_dimension=0), j(z, 2, reduction_dimension=0)):
            same(a, b)


def test_platform_composite_axis_size_types():
    # the branch of the default backend (the CPU in CI), as jax's
    want = float(jlax.platform_dependent(2.0, cpu=lambda x: x * 3, default=lambda x: x))
    assert want == (6.0 if on_cpu() else 2.0)
    assert float(flax.platform_dependent(2.0, cpu=lambda x: x * 3, default=lambda x: x)) == want
    assert float(flax.platform_dependent(2.0, tpu=lambda x: x * 3, default=lambda x: x)) == 2.0
    with pytest.raises(NotImplementedError):
        flax.platform_dependent(2.0, tpu=lambda x: x)
    sq = flax.composite(lambda x: x ** 2, name="my.square")
    assert float(sq(2.0)) == 4.0 and float(ftrans.jit(sq)(2.0)) == 4.0  # tests/test_composite.py: the rest
    same(ftrans.vmap(lambda x: x * flax.axis_size("i"), axis_name="i")(np.ones(3, np.float32)),
         jax.vmap(lambda x: x * jlax.axis_size("i"), axis_name="i")(np.ones(3, np.float32)))
    assert flax.dce_sink(np.ones(2)) is None
    assert {m.name for m in flax.RandomAlgorithm} == {m.name for m in jlax.RandomAlgorithm}
    assert {m.name for m in flax.DotAlgorithmPreset} >= {"DEFAULT", "F32_F32_F32", "BF16_BF16_F32"}
    assert {m.name for m in flax.AccuracyMode} == {m.name for m in jlax.AccuracyMode}


# ---------------------------------------------------------------- bessel_i0e, bessel_i1e

BESSEL_X = np.concatenate([np.linspace(-40, 40, 801), [0.0, 1e-6, -1e-6, 14.99, 15.0, 15.01, 29.9, 30.1, 100.0, 1e4,
                                                       np.inf, -np.inf, np.nan]]).astype(np.float32)


@pytest.mark.parametrize("name", ["bessel_i0e", "bessel_i1e"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_bessel_values_eager_and_jit(name, dtype):
    f, j = getattr(flax, name), getattr(jlax, name)
    x = BESSEL_X.astype(dtype)
    want = np.asarray(j(x)).astype(np.float64)
    tol = 2e-6 if dtype == np.float32 else 1e-2
    for got in (f(x), ftrans.jit(f)(x)):
        got = np.asarray(got)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("name", ["bessel_i0e", "bessel_i1e"])
def test_bessel_grad_vmap(name):
    f, j = getattr(flax, name), getattr(jlax, name)
    x = BESSEL_X[:-3]
    # the oracle as one jitted jax program
    grad, batched = jax.jit(lambda x, xb: (jax.grad(lambda v: j(v).sum())(x), jax.vmap(j)(xb)))(
        x, x[:810].reshape(-1, 2))
    close(ftrans.grad(lambda v: f(v).sum())(x), grad, 1e-6)
    close(ftrans.jit(ftrans.grad(lambda v: f(v).sum()))(x), grad, 1e-6)
    close(ftrans.vmap(f)(x[:810].reshape(-1, 2)), batched, 2e-6)
    assert f(2.0).weak_type == j(2.0).weak_type


# ---------------------------------------------------------------- igamma, igammac


def test_igamma_special_values_match_jax():
    a = np.array([0.0, -1.0, 1.0, 2.0, 0.5, 1.0, 1.0, np.nan, 3.0], np.float32)
    x = np.array([1.0, 1.0, 0.0, -1.0, np.inf, np.nan, 1e-30, 1.0, 1e3], np.float32)
    for f, j in [(flax.igamma, jlax.igamma), (flax.igammac, jlax.igammac)]:
        np.testing.assert_allclose(np.asarray(f(a, x)), np.asarray(j(a, x)), rtol=1e-6, equal_nan=True)
    with pytest.raises(TypeError, match="floating"):
        flax.igamma(1, 2.0)


@given(seed=st.integers(0, 100))
def test_igamma_against_scipy_and_jax(seed):
    import scipy.special as sps

    r = np.random.RandomState(seed)
    a = np.concatenate([r.rand(40) * 30 + 0.01, [1000, 100, 0.1, 50]]).astype(np.float32)
    x = np.concatenate([r.rand(40) * 40, [990, 120, 30, 0.01]]).astype(np.float32)
    want_p = sps.gammainc(a.astype(np.float64), x.astype(np.float64))
    for fn, want, jf in [(flax.igamma, want_p, jlax.igamma), (flax.igammac, 1 - want_p, jlax.igammac)]:
        got = np.asarray(ftrans.jit(fn)(a, x)).astype(np.float64)
        ref = np.asarray(jf(a, x)).astype(np.float64)
        err, jerr = np.abs(got - want), np.abs(ref - want)
        assert np.all(err <= np.maximum(3 * jerr, 2e-5)), (a[err.argmax()], x[err.argmax()], err.max(), jerr.max())


def test_igamma_derivatives_vmap():
    a = np.array([0.5, 1.0, 3.0, 10.0], np.float32)
    x = np.array([0.3, 2.0, 2.5, 14.0], np.float32)
    ab, xb = a.astype(ml_dtypes.bfloat16), x.astype(ml_dtypes.bfloat16)
    for f, j in [(flax.igamma, jlax.igamma), (flax.igammac, jlax.igammac)]:
        # the oracle as one jitted jax program
        gx, ga, batched, low = jax.jit(lambda a, x, ab, xb: (
            jax.grad(lambda x: j(a, x).sum())(x), jax.grad(lambda a: j(a, x).sum())(a),
            jax.vmap(j)(a.reshape(2, 2), x.reshape(2, 2)), j(ab, xb)))(a, x, ab, xb)
        close(ftrans.grad(lambda x: f(a, x).sum())(x), gx, 1e-4)
        close(ftrans.grad(lambda a: f(a, x).sum())(a), ga, 1e-4)
        close(ftrans.jit(ftrans.grad(lambda x: f(a, x).sum()))(x), gx, 1e-4)
        close(ftrans.vmap(f)(a.reshape(2, 2), x.reshape(2, 2)), batched, 1e-5)
        close(f(ab, xb), low, 2e-2)


def test_betainc_against_scipy_and_jax():
    import scipy.special as sps

    a = np.array([1.0, 2.0, 0.0, -1.0, 1.0, 2.0, np.nan, 0.5, 3.0], np.float32)
    b = np.array([1.0, 3.0, 1.0, 1.0, 0.0, 2.0, 1.0, 0.5, 0.5], np.float32)
    x = np.array([0.5, 0.3, 0.5, 0.5, 0.5, -0.1, 0.5, 1.0, 0.0], np.float32)
    np.testing.assert_allclose(np.asarray(flax.betainc(a, b, x)), np.asarray(jlax.betainc(a, b, x)), rtol=2e-6,
                               atol=2e-6, equal_nan=True)
    r = np.random.RandomState(0)
    A, B = (r.rand(200) * 20 + 0.05).astype(np.float32), (r.rand(200) * 20 + 0.05).astype(np.float32)
    X = r.rand(200).astype(np.float32)
    want = sps.betainc(A.astype(np.float64), B.astype(np.float64), X.astype(np.float64))
    jerr = np.abs(np.asarray(jlax.betainc(A, B, X)) - want).max()
    for got in (flax.betainc(A, B, X), ftrans.jit(flax.betainc)(A, B, X)):
        assert np.abs(np.asarray(got) - want).max() <= max(2 * jerr, 1e-5)
    grad, batched = jax.jit(lambda x, A, B, X: (jax.grad(lambda x: jlax.betainc(2.0, 3.0, x))(x),
                                                jax.vmap(jlax.betainc)(A, B, X)))(0.3, A[:4], B[:4], X[:4])
    close(ftrans.grad(lambda x: flax.betainc(2.0, 3.0, x))(0.3), grad)
    close(ftrans.vmap(flax.betainc)(A[:4], B[:4], X[:4]), batched, 2e-6)
    with pytest.raises(ValueError, match="with respect to a and b"):
        ftrans.grad(lambda a: flax.betainc(a, 3.0, 0.3))(2.0)
    with pytest.raises(ValueError, match="with respect to a and b"):
        jax.grad(lambda a: jlax.betainc(a, 3.0, 0.3))(2.0)


def test_padtype_to_pads_gives_python_ints_and_clz_keeps_weak_type():
    pads = flax.padtype_to_pads(np.array([5, 6]), np.array([2, 3]), np.array([1, 2]), "SAME")
    assert pads == jlax.padtype_to_pads(np.array([5, 6]), np.array([2, 3]), np.array([1, 2]), "SAME")
    assert all(type(v) is int for p in pads for v in p)
    assert flax.clz(5).weak_type == jlax.clz(5).weak_type is True
    assert flax.clz(np.int32(5)).weak_type == jlax.clz(np.int32(5)).weak_type is False


SCATTER_APPLY = [
    ((5,), [[0], [2], [2]], (3,), dict(update_window_dims=(), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))),
    ((10,), [[0], [0], [1]], (3, 2), dict(update_window_dims=(1,), inserted_window_dims=(),
                                          scatter_dims_to_operand_dims=(0,))),
    ((10, 5), [[0], [2], [1]], (3, 3), dict(update_window_dims=(1,), inserted_window_dims=(0,),
                                            scatter_dims_to_operand_dims=(0,))),
    ((2, 5), [[[0], [2]], [[1], [1]]], (2, 2), dict(update_window_dims=(), inserted_window_dims=(1,),
                                                    scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                                    scatter_indices_batching_dims=(0,))),
]


@pytest.mark.parametrize("case", range(len(SCATTER_APPLY)))
def test_scatter_apply_repeats_func_per_window(case):
    shape, idx, us, dn = SCATTER_APPLY[case]
    idx = np.asarray(idx, np.int32)
    x = rng.rand(*shape).astype(np.float32)
    want = jlax.scatter_apply(x, idx, jjnp.sin, jlax.ScatterDimensionNumbers(**dn), update_shape=us)
    f = lambda x: flax.scatter_apply(x, idx, fjnp.sin, flax.ScatterDimensionNumbers(**dn), update_shape=us)  # noqa: E731
    close(f(x), want)
    close(ftrans.jit(f)(x), want)


@pytest.mark.parametrize("specs", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("CHWN", "IHOW", "WNCH")])
def test_conv_general_dilated_local(specs):
    lhs_spec, rhs_spec, out_spec = specs
    r = np.random.RandomState(0)
    n, c, h, w, o = 2, 3, 6, 6, 4
    fs, strides = (3, 2), (1, 2)
    sizes = {"N": n, "C": c, "H": h, "W": w}
    lhs = r.randn(*[sizes[ch] for ch in lhs_spec]).astype(np.float32)
    rsizes = {"O": o, "I": c * fs[0] * fs[1], "H": h, "W": -(-w // strides[1])}
    rhs = r.randn(*[rsizes[ch] for ch in rhs_spec]).astype(np.float32)

    def run(L):
        return lambda a, b: L.conv_general_dilated_local(a, b, strides, "SAME", fs, dimension_numbers=specs)

    lf = lambda a, b: (run(flax)(a, b) ** 2).sum()  # noqa: E731
    lj = lambda a, b: (run(jlax)(a, b) ** 2).sum()  # noqa: E731
    # the oracle as one jitted jax program
    value, grad = jax.jit(lambda a, b: (run(jlax)(a, b), jax.grad(lj, (0, 1))(a, b)))(lhs, rhs)
    close(run(flax)(lhs, rhs), value, 1e-5)
    close(ftrans.jit(run(flax))(lhs, rhs), value, 1e-5)
    close(ftrans.grad(lf, (0, 1))(lhs, rhs), grad, 1e-4)


def test_zeta_and_polygamma_match_jax():
    import scipy.special as sps

    s = np.array([2, 2, 2.5, 2.5, 3, 2, 2.5, 1.5, 1.0001, 2.0, 1.0, 0.5, 3.0, 2.0, 2.0, np.nan, -1.0, 2.5], np.float32)
    q = np.array([0, -2, -1, 0, 0, -0.5, -0.5, 3, 1, 1.0, 1.0, 1.0, 0.5, -1.0, -1.5, 1.0, 2.0, 0.0], np.float32)
    np.testing.assert_allclose(np.asarray(flax.zeta(s, q)), np.asarray(jlax.zeta(s, q)), rtol=2e-6, equal_nan=True)
    r = np.random.RandomState(0)
    S, Q = (r.rand(200) * 10 + 1.05).astype(np.float32), (r.rand(200) * 10 + 0.01).astype(np.float32)
    want = sps.zeta(S.astype(np.float64), Q.astype(np.float64))
    for got in (flax.zeta(S, Q), ftrans.jit(flax.zeta)(S, Q)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6)
    m = np.array([0.0, 1.0, 2.0, 3.0, 1.0, 0.5, 1, 4, 6], np.float32)
    x = np.array([2.0, 2.0, 2.0, 0.5, -1.5, 1.0, 0, 0.3, 7.0], np.float32)
    np.testing.assert_allclose(np.asarray(flax.polygamma(m, x)), np.asarray(jlax.polygamma(m, x)), rtol=2e-6,
                               equal_nan=True)
    grad, batched = jax.jit(lambda x, S, Q: (jax.grad(lambda x: jlax.polygamma(1.0, x))(x),
                                             jax.vmap(jlax.zeta)(S, Q)))(2.0, S[:4], Q[:4])
    close(ftrans.grad(lambda x: flax.polygamma(1.0, x))(2.0), grad)
    close(ftrans.vmap(flax.zeta)(S[:4], Q[:4]), batched, 1e-5)


def test_igamma_grad_a_and_random_gamma_grad():
    a = np.array([0.5, 1.0, 3.0, 10.0], np.float32)
    x = np.array([0.3, 2.0, 2.5, 14.0], np.float32)
    grad_a, gamma_grad = jax.jit(lambda a, x: (jlax.igamma_grad_a(a, x), jlax.random_gamma_grad(a, x)))(a, x)
    close(flax.igamma_grad_a(a, x), grad_a, 2e-6)
    close(flax.random_gamma_grad(a, x), gamma_grad, 2e-6)
    close(ftrans.jit(flax.random_gamma_grad)(a, x), gamma_grad, 2e-6)


def test_stack_unstack():
    xs = [rng.randn(2, 3).astype(np.float32) for _ in range(3)]
    axes = (0, 1, 2, -1)
    # the oracle as one jitted jax program
    stacks, unstacks, grad = jax.jit(lambda xs: (
        [jlax.stack(xs, axis) for axis in axes], [jlax.unstack(xs[0], axis if axis != 2 else 1) for axis in axes],
        jax.grad(lambda v: (jlax.stack([v, v * 2], 1) ** 2).sum())(xs[0])))(xs)
    for axis, stacked, unstacked in zip(axes, stacks, unstacks):
        same(flax.stack(xs, axis), stacked)
        for a, b in zip(flax.unstack(xs[0], axis if axis != 2 else 1), unstacked, strict=True):
            same(a, b)
    close(ftrans.grad(lambda v: (flax.stack([v, v * 2], 1) ** 2).sum())(xs[0]), grad)


_RBG_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64]


@functools.cache
def _xla_rng_bits(algorithm):
    """XLA's ``rng_bit_generator`` output for every dtype of ``_RBG_DTYPES``, from one jax program."""
    key = np.array([1, 2, 3, 4], np.uint32)
    return jax.jit(lambda k: [jlax.rng_bit_generator(k, (3, 2), d, jlax.RandomAlgorithm(algorithm))
                              for d in _RBG_DTYPES])(key)


@pytest.mark.parametrize("algorithm", [0, 1, 2])
@pytest.mark.parametrize("dtype", _RBG_DTYPES)
def test_rng_bit_generator_bits_are_xlas(algorithm, dtype):
    key = np.array([1, 2, 3, 4], np.uint32)
    want = _xla_rng_bits(algorithm)[_RBG_DTYPES.index(dtype)]
    for got in (flax.rng_bit_generator(key, (3, 2), dtype, algorithm),
                ftrans.jit(lambda k: flax.rng_bit_generator(k, (3, 2), dtype, algorithm))(key)):
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_rng_bit_generator_vmap_and_errors():
    keys = np.arange(12, dtype=np.uint32).reshape(3, 4)
    f = lambda L: (lambda k: L.rng_bit_generator(k, (2,)))  # noqa: E731
    for got, want in [(ftrans.vmap(f(flax))(keys), jax.vmap(f(jlax))(keys)),
                      (ftrans.vmap(ftrans.vmap(f(flax)))(keys.reshape(3, 1, 4)),
                       jax.vmap(jax.vmap(f(jlax)))(keys.reshape(3, 1, 4)))]:
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    with pytest.raises(TypeError, match="unsupported dtype"):
        flax.rng_bit_generator(keys[0], (2,), np.int32)
    with pytest.raises(TypeError, match="uint32"):
        flax.rng_bit_generator(keys[0, :2], (2,))


# ---------------------------------------------------------------- convert_element_type of a scalar constant
_CET_CASES = [(3.0, "float16"), (3, "float32"), (True, "int32"), (3.7, "int32"), (-3.7, "int32"),
              (np.float32(2.5), "int8"), (np.int64(300), "uint8"), (2.5, "bool"), (0.0, "bool"),
              (2 ** 40, "float16"), (3.0, "float64"), (5, "complex64"), (300, "uint8"), (2 ** 32, "int32")]


@pytest.mark.parametrize("v, d", _CET_CASES)
def test_convert_element_type_of_a_scalar_folds_like_jax(v, d):
    """JAX folds convert_element_type of a Python/NumPy scalar into a constant: no equation is staged."""
    f_eqns = ftrans.make_jaxpr(lambda: ftrans.lax.convert_element_type(v, d))().eqns
    j_eqns = jax.make_jaxpr(lambda: jax.lax.convert_element_type(v, d))().eqns
    assert len(f_eqns) == len(j_eqns) == 0
    want = jax.lax.convert_element_type(v, d)
    for got in (ftrans.lax.convert_element_type(v, d), ftrans.jit(lambda: ftrans.lax.convert_element_type(v, d))()):
        assert got.dtype == want.dtype and not got.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("v, d", [(1e10, "int32"), (-1.5, "uint8"), (float("nan"), "int32")])
def test_convert_element_type_of_a_scalar_keeps_xla_semantics_out_of_range(v, d):
    """Where NumPy's cast and XLA's differ (out of range, NaN to an integer) the conversion stays an
    operation, so staged and eager results agree with jax's eager (XLA) answer."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.asarray(jax.lax.convert_element_type(v, d))
    assert len(ftrans.make_jaxpr(lambda: ftrans.lax.convert_element_type(v, d))().eqns) == 1
    for got in (ftrans.lax.convert_element_type(v, d), ftrans.jit(lambda: ftrans.lax.convert_element_type(v, d))()):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_shape_as_value_of_symbolic_shapes_matches_jax():
    # A shape with symbolic dimensions becomes a vector computed from the arguments' sizes, as in JAX.
    from jax import export as jexport

    from ftrans import export as fexport

    for spec, x in (("a", np.ones(2, np.float32)), ("a, 3", np.ones((4, 3), np.float32))):
        want = jexport.export(jax.jit(lambda v: jlax.shape_as_value(v.shape)))(
            jax.ShapeDtypeStruct(jexport.symbolic_shape(spec), np.float32)).call(x)
        got = fexport.export(ftrans.jit(lambda v: flax.shape_as_value(v.shape)))(
            ftrans.ShapeDtypeStruct(fexport.symbolic_shape(spec), np.float32)).call(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert flax.shape_as_value((2**33,)).dtype == jlax.shape_as_value((2**33,)).dtype
