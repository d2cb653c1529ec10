"""Reverse-mode derivatives of reductions, products, sorting, cumulative and windowed reductions.

The programs are the ``CASES`` of ``tests/test_jvp_reductions.py``.  For each
one, on hypothesis-drawn primals (including ties and exact zeros) and a random
output cotangent, ``ftrans.vjp``'s outputs and cotangents must equal
``jax.vjp``'s; the pullback must stage (``make_jaxpr``: typechecked,
re-evaluated) and run under ``ftrans.jit``; ``ftrans.grad`` of a scalar-output
variant must equal ``jax.grad``; and all of it again in float64 under x64.
Then the transpose rules of the linear primitives (``reduce_sum``,
``cumsum``, ``dot_general``, ``reduce_window_sum``) are checked on
hypothesis-drawn configurations (axes, dimension numbers, windows, strides,
padding, dilations) with ``linear_transpose`` against jax and against the
adjoint identity.  The harness is ``tests/test_vjp_structural.py``'s.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from tests.test_jvp_reductions import CASES, FINITE_DIFF, FT, JX, draw
from tests.test_vjp_structural import (
    F0,
    assert_close,
    assert_leaves_close,
    check_adjoint,
    check_case,
    check_case_x64,
    check_fd_x64,
    check_grad,
    random_like,
)

NON_FLOAT_OUT = {"argmax", "all_any", "argsort"}  # no floating output at all
# jax.vjp is not implemented for a max pool with window dilation (jax.jvp is): the oracle is ct @ jacfwd.
VIA_JACFWD = {"pool_max_dilated"}


def _tol(name):
    return (2e-2, 2e-2) if name == "dot_general_pet" else (1e-4, 1e-4)


def _prims(name, rng, dtype=np.float32):
    shapes, kind, build = CASES[name]
    prims, _ = draw(rng, shapes, kind, dtype)
    return build, prims


@pytest.mark.parametrize("name", sorted(CASES))
@given(seed=st.integers(0, 2**31 - 1))
def test_vjp_matches_jax(name, seed):
    rng = np.random.default_rng(seed)
    build, prims = _prims(name, rng)
    rtol, atol = _tol(name)
    got = check_case(("R", name, "f32"), build, prims, rng, rtol=rtol, atol=atol, via_jacfwd=name in VIA_JACFWD)
    if name in NON_FLOAT_OUT:  # argmax, all/any, argsort: nothing flows back
        assert all(np.asarray(g).dtype == np.float32 and not np.asarray(g).any() for g in got)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pullback_staged_and_jit(name):
    rng = np.random.default_rng(7)
    build, prims = _prims(name, rng)
    rtol, atol = _tol(name)
    check_case(("R", name, "f32"), build, prims, rng, rtol=rtol, atol=atol, staged=True,
               via_jacfwd=name in VIA_JACFWD)


@pytest.mark.parametrize("name", sorted(CASES))
@given(seed=st.integers(0, 2**31 - 1))
def test_grad_matches_jax(name, seed):
    rng = np.random.default_rng(seed)
    build, prims = _prims(name, rng)
    rtol, atol = _tol(name)
    if name in VIA_JACFWD:  # jax.grad is not implemented there: grad against the vjp oracle
        got = check_case(("R", name, "f32"), build, prims, rng, rtol=rtol, atol=atol, via_jacfwd=True)
        out = build(*FT)(*map(fjnp.asarray, prims))
        w = random_like(rng, np.shape(out), np.float32)
        g = ftrans.grad(lambda *a: fjnp.sum(build(*FT)(*a) * w), argnums=tuple(range(len(prims))))(*prims)
        _, pb = ftrans.vjp(build(*FT), *prims)
        assert_leaves_close(g, pb(w), rtol=1e-6, atol=1e-6)
        assert len(got) == len(g)
        return
    check_grad(("R", name, "f32"), build, prims, rng, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vjp_float64_matches_jax(name):
    rng = np.random.default_rng(11)
    build, prims = _prims(name, rng)
    rtol, atol = _tol(name)
    check_case_x64(("R", name, "f32"), build, prims, rng, rtol=rtol, atol=atol, via_jacfwd=name in VIA_JACFWD)


@pytest.mark.parametrize("name", FINITE_DIFF)
@given(seed=st.integers(0, 2**31 - 1))
def test_vjp_float64_finite_differences(name, seed):
    shapes, kind, build = CASES[name]
    check_fd_x64(build, shapes, np.random.default_rng(seed), draw_prims=lambda r, d: draw(r, shapes, kind, d)[0],
                 rtol=1e-5, atol=1e-7)


# Complex operands: the linear reductions and products (no ordering involved).
COMPLEX = ["sum", "sum_axis_keepdims", "prod", "prod_all", "dot_vec", "matmul", "matmul_batched",
           "matvec_one_side", "einsum", "tensordot", "outer", "cumsum", "cumsum_reverse", "cumprod", "pool_sum",
           "pool_sum_strided"]


@pytest.mark.parametrize("name", COMPLEX)
def test_vjp_complex_matches_jax(name):
    rng = np.random.default_rng(3)
    shapes, _, build = CASES[name]
    prims = tuple((rng.normal(size=s) + 1j * rng.normal(size=s)).astype(np.complex64) for s in shapes)
    got = check_case(("R", name, "c64"), build, prims, rng, rtol=1e-4, atol=1e-4, with_grad=False)
    assert all(np.asarray(g).dtype == np.complex64 for g in got)


# ----------------------------------------------------------------------------
# The linear primitives on drawn configurations: linear_transpose against jax and the adjoint identity


@given(seed=st.integers(0, 2**31 - 1), rank=st.integers(0, 3), data=st.data())
def test_reduce_sum_and_cumsum_transpose(seed, rank, data):
    rng = np.random.default_rng(seed)
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, max(rank - 1, 0)), max_size=rank)))) if rank else ()
    x = rng.normal(size=shape).astype(np.float32)
    check_adjoint(lambda np_, lx, d: lambda v: np_.sum(v, axes), (x,), rng)
    if rank:
        axis = data.draw(st.integers(0, rank - 1))
        reverse = data.draw(st.booleans())
        check_adjoint(lambda np_, lx, d: lambda v: lx.cumsum(v, axis, reverse=reverse), (x,), rng)


@st.composite
def dot_configs(draw_):
    """Shapes and dimension numbers of a ``dot_general`` (batch, contracting and free dimensions in any order)."""
    nb, nc = draw_(st.integers(0, 2)), draw_(st.integers(0, 2))
    nl, nr = draw_(st.integers(0, 2)), draw_(st.integers(0, 2))
    sizes = draw_(st.lists(st.integers(1, 3), min_size=nb + nc + nl + nr, max_size=nb + nc + nl + nr))
    b, c, lf, rf = sizes[:nb], sizes[nb:nb + nc], sizes[nb + nc:nb + nc + nl], sizes[nb + nc + nl:]
    lperm = draw_(st.permutations(range(nb + nc + nl)))
    rperm = draw_(st.permutations(range(nb + nc + nr)))
    lsizes, rsizes = b + c + lf, b + c + rf
    lshape = tuple(lsizes[k] for k in lperm)
    rshape = tuple(rsizes[k] for k in rperm)
    lpos = {k: i for i, k in enumerate(lperm)}
    rpos = {k: i for i, k in enumerate(rperm)}
    dn = ((tuple(lpos[nb + i] for i in range(nc)), tuple(rpos[nb + i] for i in range(nc))),
          (tuple(lpos[i] for i in range(nb)), tuple(rpos[i] for i in range(nb))))
    return lshape, rshape, dn


@given(seed=st.integers(0, 2**31 - 1), cfg=dot_configs(), lhs_linear=st.booleans())
def test_dot_general_transpose(seed, cfg, lhs_linear):
    """Linear in one operand with the other known (a closed-over constant), on any dimension numbers."""
    lshape, rshape, dn = cfg
    rng = np.random.default_rng(seed)
    a = rng.normal(size=lshape).astype(np.float32)
    b = rng.normal(size=rshape).astype(np.float32)
    if lhs_linear:
        check_adjoint(lambda np_, lx, d: lambda v: lx.dot_general(v, b.astype(d), dn), (a,), rng)
    else:
        check_adjoint(lambda np_, lx, d: lambda v: lx.dot_general(a.astype(d), v, dn), (b,), rng)


@given(seed=st.integers(0, 2**31 - 1), cfg=dot_configs())
def test_dot_general_vjp_in_both_operands(seed, cfg):
    """Reverse mode through both operands of a bilinear ``dot_general``, in float64 against finite differences."""
    lshape, rshape, dn = cfg
    check_fd_x64(lambda np_, lx: lambda u, v: lx.dot_general(u, v, dn), None, np.random.default_rng(seed),
                 draw_prims=lambda r, d: (r.normal(size=lshape).astype(d), r.normal(size=rshape).astype(d)),
                 rtol=1e-7, atol=1e-9)


@st.composite
def window_configs(draw_):
    rank = draw_(st.integers(1, 2))
    dims = []
    for _ in range(rank):
        n = draw_(st.integers(1, 6))
        w = draw_(st.integers(1, 3))
        s = draw_(st.integers(1, 3))
        bd = draw_(st.integers(1, 2))
        wd = draw_(st.integers(1, 2))
        lo, hi = draw_(st.integers(0, 2)), draw_(st.integers(0, 2))
        span = (n - 1) * bd + 1 + lo + hi
        if (w - 1) * wd + 1 > span:
            lo = lo + (w - 1) * wd + 1 - span
        dims.append((n, w, s, (lo, hi), bd, wd))
    return [tuple(d[i] for d in dims) for i in range(6)]


@given(seed=st.integers(0, 2**31 - 1), cfg=window_configs())
def test_reduce_window_sum_transpose(seed, cfg):
    """Sum pooling on drawn windows, strides, padding and base/window dilations."""
    shape, window, strides, padding, base, wdil = cfg
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    check_adjoint(lambda np_, lx, d: lambda v: lx.reduce_window(v, d(0), lx.add, window, strides, padding, base, wdil),
                  (x,), rng)


def check_linear(f, g, prims, rng, rtol=1e-4, atol=1e-4):
    """``linear_transpose`` of a linear program (ftrans ``f``, jax ``g``) and its pullback, against jax."""
    out = jax.eval_shape(g, *prims)
    cts = jax.tree_util.tree_map(lambda o: random_like(rng, o.shape, o.dtype), out)
    got = ftrans.linear_transpose(f, *prims)(cts)
    want = jax.jit(lambda c: jax.linear_transpose(g, *prims)(c))(cts)
    assert_leaves_close(got, want, rtol=rtol, atol=atol)
    _, pb = ftrans.vjp(f, *prims)
    assert_leaves_close(pb(cts), want, rtol=rtol, atol=atol)
    return got


def test_linear_transpose_of_composite_reductions():
    rng = np.random.default_rng(4)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    x = rng.normal(size=(2, 5, 4)).astype(np.float32)

    def make(np_, lx):
        return lambda v: (np_.einsum("bti,io->bo", lx.cumsum(v, 1), w), np_.mean(v, axis=(0, 2)),
                          lx.reduce_window(v, 0.0, lx.add, (1, 2, 2), (1, 1, 2), "SAME"),
                          lx.reduce_window(v, 0.0, lx.add, (2, 2, 1), (1, 2, 1), ((0, 1), (1, 1), (0, 0)),
                                           (1, 2, 1), (1, 2, 1)))

    got = check_linear(make(*FT), make(*JX), (x,), rng)
    assert np.shape(got[0]) == (2, 5, 4)


def test_integer_reductions_pull_back_float0():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    y = np.ones((2, 3), np.float32)
    _, pb = ftrans.vjp(lambda i, v: (fjnp.sum(i, 0), fjnp.sum(v * i)), x, y)
    gi, gv = pb((np.zeros(3, F0), np.float32(2.0)))
    assert np.asarray(gi).dtype == F0 and np.shape(gi) == (2, 3)
    assert_close(gv, 2.0 * x.astype(np.float32))


def test_grad_of_max_with_ties_splits_evenly_like_jax():
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 0.0, 2.0, -1.0]], np.float32)
    g = ftrans.grad(lambda v: fjnp.sum(fjnp.max(v, axis=1)))(x)
    w = jax.jit(jax.grad(lambda v: jax.numpy.sum(jax.numpy.max(v, axis=1))))(x)
    assert_close(g, w)
    np.testing.assert_allclose(np.asarray(g), [[0, 1 / 3, 1 / 3, 1 / 3], [0.5, 0, 0.5, 0]], rtol=1e-6)


def test_grad_of_prod_with_zeros_is_exact():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]], np.float32)
    g = ftrans.grad(lambda v: fjnp.sum(fjnp.prod(v, axis=1)))(x)
    np.testing.assert_allclose(np.asarray(g), [[0, 6, 0], [0, 0, 0], [8, 4, 2]])
