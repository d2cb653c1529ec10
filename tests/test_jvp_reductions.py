"""Forward-mode derivatives of reductions, products, sorting, cumulative and windowed reductions.

Each case is a small program written once against a ``(jnp, lax)`` pair and
run with ftrans's and jax's modules on the same hypothesis-drawn primals and
tangents (``ftrans.jvp`` against ``jax.jvp``: values, dtypes and shapes of
both outputs), under ``ftrans.make_jaxpr`` (typechecked, re-evaluated) and
``ftrans.jit``, and, where the function is smooth, against central finite
differences in float64.  JAX's conventions at non-smooth points (ties of
max/min, zeros in products, the first element of a pooling window) are
tested explicitly.
"""

from __future__ import annotations

import contextlib
import functools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.core.ir import typecheck
from ftrans.core.prims import reductions as R
from ftrans.core.prims import sorting as So
from ftrans.core.prims import windowed as W
from ftrans.transforms.ad import jvp_rules

FT, JX = (fjnp, flax), (jjnp, jax.lax)


@contextlib.contextmanager
def x64():
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    try:
        yield
    finally:
        ftrans.config.update("enable_x64", before)


def assert_close(got, want, rtol=2e-5, atol=2e-6):
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.dtype == want_a.dtype, (got_a.dtype, want_a.dtype)
    assert got_a.shape == want_a.shape, (got_a.shape, want_a.shape)
    np.testing.assert_allclose(got_a, want_a, rtol=rtol, atol=atol)


def assert_tree_close(got, want, **kw):
    g = jax.tree_util.tree_leaves(got)
    w = jax.tree_util.tree_leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        if np.asarray(b).dtype == jax.dtypes.float0:
            assert np.asarray(a).dtype == jax.dtypes.float0 and np.shape(a) == np.shape(b)
            continue
        assert_close(a, b, **kw)


def staged_jvp(f, primals, tangents):
    closed = ftrans.make_jaxpr(lambda p, t: ftrans.jvp(f, p, t))(primals, tangents)
    typecheck(closed)
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves((primals, tangents))]
    return closed, ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *flat)


def _pool(kind, window, strides, padding, base=None, wdil=None):
    def build(np_, lx):
        init, op = {"max": (-np.inf, lx.max), "min": (np.inf, lx.min), "sum": (0.0, lx.add)}[kind]
        return lambda x: lx.reduce_window(x, init, op, window, strides, padding, base, wdil)

    return build


# Values: "normal" (distinct almost surely), "ties" (a few integers, many ties),
# "zeros" (normal with some exact zeros), "positive".
# name -> (operand shapes, value kind, program builder (jnp, lax) -> f)
CASES = {
    "sum": ([(3, 4)], "normal", lambda np_, lx: lambda x: np_.sum(x)),
    "sum_axis_keepdims": ([(3, 4, 2)], "normal", lambda np_, lx: lambda x: np_.sum(x, axis=(0, -1), keepdims=True)),
    "mean_var_std": ([(5, 3)], "normal", lambda np_, lx: lambda x: (np_.mean(x, 0), np_.var(x, 1), np_.std(x))),
    "prod": ([(3, 4)], "normal", lambda np_, lx: lambda x: np_.prod(x, axis=1)),
    "prod_all": ([(2, 3, 2)], "normal", lambda np_, lx: lambda x: np_.prod(x, axis=(0, 2))),
    "prod_zeros": ([(4, 5)], "zeros", lambda np_, lx: lambda x: np_.prod(x, axis=1)),
    "prod_empty_axis": ([(3, 0)], "normal", lambda np_, lx: lambda x: np_.prod(x, axis=1)),
    "max": ([(4, 5)], "normal", lambda np_, lx: lambda x: np_.max(x, axis=1)),
    "min_all": ([(4, 5)], "normal", lambda np_, lx: lambda x: np_.min(x)),
    "max_ties": ([(6, 5)], "ties", lambda np_, lx: lambda x: np_.max(x, axis=1)),
    "min_ties": ([(6, 5)], "ties", lambda np_, lx: lambda x: np_.min(x, axis=0)),
    "amax_keepdims": ([(3, 4)], "ties", lambda np_, lx: lambda x: np_.amax(x, axis=-1, keepdims=True)),
    "logsumexp_like": ([(3, 4)], "normal", lambda np_, lx: lambda x: np_.log(np_.sum(np_.exp(x - np_.max(x))))),
    "argmax": ([(4, 5)], "normal", lambda np_, lx: lambda x: (np_.argmax(x, axis=1), np_.argmin(x))),
    "all_any": ([(4,)], "normal", lambda np_, lx: lambda x: (np_.all(x > 0), np_.any(x > 1))),
    "dot_vec": ([(5,), (5,)], "normal", lambda np_, lx: lambda a, b: np_.dot(a, b)),
    "matmul": ([(3, 4), (4, 2)], "normal", lambda np_, lx: lambda a, b: a @ b),
    "matmul_batched": ([(2, 3, 4), (2, 4, 5)], "normal", lambda np_, lx: lambda a, b: np_.matmul(a, b)),
    "matvec_one_side": ([(3, 4)], "normal", lambda np_, lx: lambda a: a @ np.arange(4.0, dtype=np.float32)),
    "einsum": ([(2, 3, 4), (4, 3)], "normal", lambda np_, lx: lambda a, b: np_.einsum("bij,ji->bj", a, b)),
    "tensordot": ([(2, 3, 4), (3, 4, 5)], "normal", lambda np_, lx: lambda a, b: np_.tensordot(a, b, 2)),
    "outer": ([(3,), (4,)], "normal", lambda np_, lx: lambda a, b: np_.outer(a, b)),
    "dot_general_pet": ([(3, 4), (4, 2)], "normal", lambda np_, lx: lambda a, b: lx.dot_general(
        a.astype(np_.bfloat16), b.astype(np_.bfloat16), (((1,), (0,)), ((), ())),
        preferred_element_type=np_.float32)),
    "cumsum": ([(3, 5)], "normal", lambda np_, lx: lambda x: np_.cumsum(x, axis=1)),
    "cumsum_reverse": ([(6,)], "normal", lambda np_, lx: lambda x: lx.cumsum(x, 0, reverse=True)),
    "cumprod": ([(2, 7)], "normal", lambda np_, lx: lambda x: np_.cumprod(x, axis=1)),
    "cumprod_zeros": ([(9,)], "zeros", lambda np_, lx: lambda x: np_.cumprod(x)),
    "cumprod_reverse": ([(5, 3)], "normal", lambda np_, lx: lambda x: lx.cumprod(x, 0, reverse=True)),
    "cummax": ([(3, 6)], "normal", lambda np_, lx: lambda x: lx.cummax(x, 1)),
    "cummin_reverse": ([(10,)], "normal", lambda np_, lx: lambda x: lx.cummin(x, 0, reverse=True)),
    "cummax_ties": ([(3, 11)], "ties", lambda np_, lx: lambda x: lx.cummax(x, 1)),
    "cummin_ties_reverse": ([(2, 8)], "ties", lambda np_, lx: lambda x: lx.cummin(x, 1, reverse=True)),
    "cumprod_ties": ([(13,)], "ties", lambda np_, lx: lambda x: np_.cumprod(x)),
    "cumlogsumexp": ([(4, 5)], "normal", lambda np_, lx: lambda x: lx.cumlogsumexp(x, 1)),
    "cumlogsumexp_reverse": ([(7,)], "normal", lambda np_, lx: lambda x: lx.cumlogsumexp(x, 0, reverse=True)),
    "sort": ([(3, 5)], "normal", lambda np_, lx: lambda x: np_.sort(x, axis=1)),
    "sort_axis0": ([(4, 3)], "normal", lambda np_, lx: lambda x: np_.sort(x, axis=0)),
    "sort_ties": ([(8,)], "ties", lambda np_, lx: lambda x: np_.sort(x)),
    "argsort": ([(6,)], "normal", lambda np_, lx: lambda x: np_.argsort(x)),
    "sort_key_val": ([(6,), (6,)], "normal", lambda np_, lx: lambda k, v: lx.sort_key_val(k, v)),
    "sort_multi_keys": ([(7,), (7,), (7,)], "ties", lambda np_, lx: lambda a, b, c: lx.sort((a, b, c), num_keys=2)),
    "top_k": ([(3, 6)], "normal", lambda np_, lx: lambda x: lx.top_k(x, 3)),
    "median": ([(7,)], "normal", lambda np_, lx: lambda x: np_.median(x)),
    "pool_sum": ([(1, 6, 6, 2)], "normal", _pool("sum", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")),
    "pool_max": ([(1, 6, 6, 2)], "normal", _pool("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")),
    "pool_max_same": ([(5, 7)], "normal", _pool("max", (3, 3), (2, 1), "SAME")),
    "pool_min_pad": ([(6,)], "normal", _pool("min", (3,), (1,), ((2, 1),))),
    "pool_max_dilated": ([(9,)], "normal", _pool("max", (2,), (2,), ((1, 0),), (1,), (3,))),
    "pool_max_base_dilated": ([(4,)], "normal", _pool("max", (3,), (1,), ((1, 1),), (2,), (1,))),
    "pool_max_ties": ([(8,)], "ties", _pool("max", (3,), (1,), "SAME")),
    "pool_min_ties_2d": ([(4, 5)], "ties", _pool("min", (2, 2), (1, 1), "VALID")),
    "pool_sum_strided": ([(7, 5)], "normal", _pool("sum", (3, 2), (2, 2), ((1, 1), (0, 1)))),
    "mlp": ([(4, 3), (3, 5)], "normal",
            lambda np_, lx: lambda x, w: np_.sum(np_.tanh(x @ w).max(axis=1) * np_.arange(4.0))),
}

FINITE_DIFF = ["sum_axis_keepdims", "mean_var_std", "prod", "prod_all", "prod_zeros", "max", "min_all",
               "matmul_batched", "einsum", "tensordot", "cumsum", "cumprod", "cumprod_zeros", "cumprod_reverse",
               "cummax", "cummin_reverse", "cumlogsumexp", "sort", "sort_key_val", "top_k", "pool_sum",
               "pool_max", "pool_max_same", "pool_min_pad", "pool_max_dilated", "pool_sum_strided", "mlp"]


def values(rng, kind, shape, dtype):
    if kind == "ties":
        return rng.integers(-2, 3, size=shape).astype(dtype)
    x = rng.normal(size=shape)
    if kind == "zeros":
        x = np.where(rng.random(size=shape) < 0.3, 0.0, x)
    return x.astype(dtype)


def draw(rng, shapes, kind, dtype=np.float32):
    prim = tuple(values(rng, kind, s, dtype) for s in shapes)
    tan = tuple(rng.normal(size=s).astype(dtype) for s in shapes)
    return prim, tan


def _rtol(name):
    return 2e-2 if name == "dot_general_pet" else 1e-4


@functools.cache
def jax_jvp(name):
    """``jax.jvp`` of a case, ``jax.jit``-compiled once (jax's op-by-op jvp of, e.g., a cumulative reduction
    dispatches hundreds of primitives per call); every example and test of the case reuses it."""
    build = CASES[name][2]
    return jax.jit(lambda p, t: jax.jvp(build(*JX), p, t))


@pytest.mark.parametrize("name", sorted(CASES))
@given(seed=st.integers(0, 2**31 - 1))
def test_matches_jax(name, seed):
    shapes, kind, build = CASES[name]
    prim, tan = draw(np.random.default_rng(seed), shapes, kind)
    got = ftrans.jvp(build(*FT), prim, tan)
    want = jax_jvp(name)(prim, tan)
    assert_tree_close(got, want, rtol=_rtol(name), atol=1e-4)


NON_FLOAT_OUT = {"argmax", "all_any", "argsort", "top_k"}  # float0 outputs cannot be staged yet


@pytest.mark.parametrize("name", sorted(set(CASES) - NON_FLOAT_OUT))
def test_staged_and_jit_match_jax(name):
    shapes, kind, build = CASES[name]
    prim, tan = draw(np.random.default_rng(1), shapes, kind)
    f = build(*FT)
    want = jax_jvp(name)(prim, tan)
    _, staged = staged_jvp(f, prim, tan)
    flat_want = jax.tree_util.tree_leaves(want)
    assert len(staged) == len(flat_want)
    for a, b in zip(staged, flat_want):
        assert_close(a, b, rtol=_rtol(name), atol=1e-4)
    jitted = ftrans.jit(lambda p, t: ftrans.jvp(f, p, t))(prim, tan)
    assert_tree_close(jitted, want, rtol=_rtol(name), atol=1e-4)


@pytest.mark.parametrize("name", FINITE_DIFF)
@given(seed=st.integers(0, 2**31 - 1))
def test_finite_differences(name, seed):
    shapes, kind, build = CASES[name]
    rng = np.random.default_rng(seed)
    with x64():
        prim, tan = draw(rng, shapes, kind, np.float64)
        f = build(*FT)
        _, t_out = ftrans.jvp(f, prim, tan)
        eps = 1e-6
        plus = f(*[p + eps * t for p, t in zip(prim, tan)])
        minus = f(*[p - eps * t for p, t in zip(prim, tan)])
        for a, hi, lo in zip(*(jax.tree_util.tree_leaves(v) for v in (t_out, plus, minus))):
            if np.asarray(a).dtype == jax.dtypes.float0:
                continue
            fd = (np.asarray(hi) - np.asarray(lo)) / (2 * eps)
            np.testing.assert_allclose(np.asarray(a), fd, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------
# Conventions at non-smooth points


def test_max_ties_average_the_tangent():
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 0.0, 2.0, -1.0]], np.float32)
    t = np.array([[1.0, 2.0, 4.0, 9.0], [10.0, 1.0, 20.0, 1.0]], np.float32)
    _, tan = ftrans.jvp(lambda v: fjnp.max(v, axis=1), (x,), (t,))
    np.testing.assert_allclose(np.asarray(tan), [5.0, 15.0])


def test_prod_with_zeros_is_exact():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]], np.float32)
    t = np.ones_like(x)
    _, tan = ftrans.jvp(lambda v: fjnp.prod(v, axis=1), (x,), (t,))
    np.testing.assert_allclose(np.asarray(tan), [6.0, 0.0])
    _, tan = ftrans.jvp(lambda v: fjnp.cumprod(v, axis=1), (x,), (t,))
    np.testing.assert_allclose(np.asarray(tan), [[1.0, 2.0, 6.0], [1.0, 0.0, 0.0]])


def test_pool_max_passes_first_maximum_of_each_window():
    x = np.array([1.0, 1.0, 1.0, 0.0, 2.0, 2.0], np.float32)
    t = np.array([1.0, 10.0, 100.0, 1000.0, 1e4, 1e5], np.float32)
    f = _pool("max", (3,), (1,), "SAME")
    got = ftrans.jvp(f(*FT), (x,), (t,))
    want = jax.jit(lambda x, t: jax.jvp(f(*JX), (x,), (t,)))(x, t)
    assert_tree_close(got, want)
    np.testing.assert_allclose(np.asarray(got[1]), [1.0, 1.0, 10.0, 1e4, 1e4, 1e4])


def test_sort_permutes_tangents_and_jaxpr_shows_gather():
    x = np.array([3.0, 1.0, 2.0], np.float32)
    t = np.array([30.0, 10.0, 20.0], np.float32)
    p, tan = ftrans.jvp(fjnp.sort, (x,), (t,))
    np.testing.assert_array_equal(np.asarray(p), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(tan), [10.0, 20.0, 30.0])
    closed, _ = staged_jvp(fjnp.sort, (x,), (t,))
    text = str(closed)
    assert "iota" in text and "sort" in text and "gather" in text


def test_integer_reductions_have_float0_tangents():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    f0 = np.zeros((2, 3), jax.dtypes.float0)
    for f in (lambda v: fjnp.sum(v, 0), lambda v: fjnp.max(v), lambda v: fjnp.cumsum(v, 1),
              lambda v: fjnp.sort(v, 1), lambda v: v @ v.T):
        p, tan = ftrans.jvp(f, (x,), (f0,))
        assert np.asarray(tan).dtype == jax.dtypes.float0
        assert np.shape(tan) == np.shape(p)


def test_dot_with_one_constant_operand_skips_its_term():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 4), np.float32)
    closed = ftrans.make_jaxpr(lambda x, t: ftrans.jvp(lambda v: v @ b, (x,), (t,)))(a, a)
    assert str(closed).count("dot_general") == 2  # primal and one tangent term, no zero term


def test_second_order_through_reductions():
    """jvp of jvp: the rules are written with primitives that are themselves differentiable."""
    x = np.array([0.5, -1.0, 2.0, 1.5], np.float32)
    v = np.array([1.0, 2.0, -1.0, 0.5], np.float32)

    def hvp(mod):
        np_, lx = mod

        def f(y):
            return np_.sum(lx.cumprod(y, 0) * np_.sort(y)) + np_.prod(y) * np_.max(y ** 2)

        return jax.jit(lambda x: jax.jvp(lambda y: jax.jvp(f, (y,), (v,))[1], (x,), (v,)))(x) if np_ is jjnp \
            else ftrans.jvp(lambda y: ftrans.jvp(f, (y,), (v,))[1], (x,), (v,))

    assert_tree_close(hvp(FT), hvp(JX), rtol=1e-4, atol=1e-4)


def test_every_reduction_family_primitive_has_a_rule():
    prims = [getattr(m, n) for m in (R, So, W) for n in m.__all__ if n.endswith("_p")]
    missing = [p.name for p in prims if p not in jvp_rules]
    assert not missing
