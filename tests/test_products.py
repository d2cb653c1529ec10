"""Differential tests of ftrans.numpy products (dot, matmul, einsum, ...) against jax.

Every function runs eagerly and staged (make_jaxpr, typecheck, eval_jaxpr) and
is compared with jax on the same inputs: values, shapes, dtypes, weak types.
"""

import math
from functools import partial

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


def check(fn, *args, staged=True):
    """``fn(module, *args)`` under ftrans (eager and staged) must match it under jax."""
    with host_oracle():  # both of ftrans's runs are host arithmetic
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
    with host_oracle():
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




# ---------------------------------------------------------------- matmul / dot family
NUMS = [np.float32, np.int32, np.int8, np.bool_, BF16, np.float16]


@st.composite
def matmul_pair(draw):
    """Operands for matmul: 1-D or n-D with broadcastable batch axes (including size-1 axes)."""
    n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
    batch = draw(st.lists(st.integers(1, 3), max_size=2))
    xb = [draw(st.sampled_from([b, 1])) for b in batch][draw(st.integers(0, len(batch))):]
    yb = [draw(st.sampled_from([b, 1])) for b in batch][draw(st.integers(0, len(batch))):]
    xs = tuple(xb) + (n, k) if draw(st.booleans()) else (k,)
    ys = tuple(yb) + (k, m) if draw(st.booleans()) else (k,)
    dx, dy = draw(st.sampled_from(NUMS)), draw(st.sampled_from(NUMS))
    x = draw(hnp.arrays(np.float32 if dx == BF16 else dx, xs, elements=_elements(dx))).astype(dx)
    y = draw(hnp.arrays(np.float32 if dy == BF16 else dy, ys, elements=_elements(dy))).astype(dy)
    return x, y


@settings(max_examples=examples(10))
@given(matmul_pair())
def test_matmul(xy):
    x, y = xy
    check(lambda m, a, b: m.matmul(a, b), x, y)
    check(lambda m, a, b: a @ m.asarray(b), x, y)


@pytest.mark.parametrize("xs,ys", [((1, 5, 4), (1, 4, 3)), ((1, 1, 5, 4), (4, 3)), ((2, 1, 5, 4), (1, 4, 3)),
                                     ((1, 2, 5, 4), (1, 2, 4, 3)), ((1, 4), (1, 4, 3))])
def test_matmul_squeezes_batch_axes_of_size_one_like_jax(xs, ys):
    """Batch axes of size 1 on both sides are squeezed before the dot_general, as in JAX's jaxpr."""
    x, y = np.ones(xs, np.float32), np.ones(ys, np.float32)
    check(lambda m, a, b: m.matmul(a, b), x, y)
    dots = [e for e in ftrans.make_jaxpr(fnp.matmul)(x, y).jaxpr.eqns if e.primitive.name == "dot_general"]
    want = [e for e in jax.make_jaxpr(jnp.matmul)(x, y).jaxpr.eqns if e.primitive.name == "dot_general"]
    assert [[v.aval.shape for v in e.invars] for e in dots] == [[v.aval.shape for v in e.invars] for e in want]
    assert [e.params["dimension_numbers"] for e in dots] == [e.params["dimension_numbers"] for e in want]


@settings(max_examples=examples(10))
@given(st.data(), arrays(dtypes=NUMS, min_dims=0, max_dims=3, min_side=1))
def test_dot_inner_vdot_outer(data, x):
    k = x.shape[-1] if x.ndim else 1
    yshape = data.draw(st.sampled_from([(k,), (k, 2), (3, k, 2), ()]))
    d = data.draw(st.sampled_from(NUMS))
    y = data.draw(hnp.arrays(np.float32 if d == BF16 else d, yshape, elements=_elements(d))).astype(d)
    check(lambda m, a, b: m.dot(a, b), x, y)
    check(lambda m, a, b: m.outer(a, b), x, y)
    if x.ndim and y.ndim and y.shape[-1] == k:
        check(lambda m, a, b: m.inner(a, b), x, y)
    if x.size == y.size:
        check(lambda m, a, b: m.vdot(a, b), x, y)


def test_python_scalar_promotion_and_weak_types():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    i = np.arange(6, dtype=np.int32).reshape(3, 2)
    check(lambda m, a: m.dot(a, 2), x)
    check(lambda m, a: m.dot(2.5, a), i)
    check(lambda m, a, b: m.matmul(a, b), i, x)  # int x float -> float
    check(lambda m, a, b: m.matmul(a, b), i.astype(np.int8), i.T.astype(np.uint8))
    check(lambda m: m.dot(2.0, 3.0), staged=False)
    check(lambda m, a: m.tensordot(a * 1.0, a, axes=0), 2.0)
    with pytest.raises(TypeError, match="tensordot"):
        fnp.tensordot(2.0, 3.0, axes=1)
    check(lambda m, a, b: m.matmul(a, b, preferred_element_type=np.float32), i, i.T)
    check(lambda m, a, b: m.dot(a, b, preferred_element_type=np.int32), i.astype(np.int8), i.T.astype(np.int8))
    check(lambda m, a, b: m.einsum("ij,jk->ik", a, b, preferred_element_type=np.float32), i, i.T)


def test_vdot_complex_and_vecdot():
    a = (np.arange(4) + 1j).astype(np.complex64)
    b = (np.arange(4)[::-1] - 2j).astype(np.complex64)
    check(lambda m, x, y: m.vdot(x, y), a, b)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    check(lambda m, p, q: m.vecdot(p, q), x, x[:1])
    check(lambda m, p, q: m.vecdot(p, q, axis=0), x, x)


@settings(max_examples=examples(10))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, BF16], min_dims=1, max_dims=3, min_side=1))
def test_tensordot(data, x):
    n = data.draw(st.integers(0, x.ndim))
    extra = data.draw(st.lists(st.integers(1, 3), max_size=2))
    y = data.draw(hnp.arrays(np.float32, x.shape[x.ndim - n:] + tuple(extra), elements=_elements(np.float32)))
    check(lambda m, a, b: m.tensordot(a, b, axes=n), x, y)
    axes_a = tuple(range(x.ndim - n, x.ndim))
    check(lambda m, a, b: m.tensordot(a, b, axes=([ax - x.ndim for ax in axes_a], list(range(n)))), x, y)


@settings(max_examples=examples(10))
@given(arrays(dtypes=[np.float32, np.int32, np.bool_], max_dims=3, min_side=1),
       arrays(dtypes=[np.float32, np.int8], max_dims=2, min_side=1))
def test_kron(x, y):
    check(lambda m, a, b: m.kron(a, b), x, y)


@settings(max_examples=examples(10))
@given(st.data(), arrays(dtypes=[np.float32, np.int32, np.int8, np.bool_, BF16], min_dims=2, max_dims=4))
def test_diagonal_trace(data, x):
    offset = data.draw(st.integers(-4, 4))
    a1, a2 = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=2, max_size=2, unique_by=lambda v: v % x.ndim))
    check(lambda m, a: m.diagonal(a, offset, a1, a2), x)
    check(lambda m, a: m.trace(a, offset, a1, a2), x)
    check(lambda m, a: m.trace(a, dtype=np.float32), x)


# ---------------------------------------------------------------- einsum
EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 1)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)]),
    ("...j,j", [(2, 3, 4), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ijk->", [(2, 3, 4)]),
    ("ij->", [(2, 3)]),
    ("i,i", [(4,), (4,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ijk,ikl,lm->jm", [(2, 3, 4), (2, 4, 5), (5, 2)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 2), (2, 3)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("bij,jk->bik", [(2, 3, 1), (1, 4)]),
    ("i...,i...->...", [(3, 2), (3, 1)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum(eq, shapes):
    rng = np.random.default_rng(0)
    ops = [rng.normal(size=s).astype(np.float32) for s in shapes]
    check(lambda m, *o: m.einsum(eq, *o), *ops)
    check(lambda m, *o: m.einsum(eq, *o, optimize=False), *ops, staged=False)


def test_einsum_dtypes_and_interleaved():
    i = np.arange(6, dtype=np.int8).reshape(2, 3)
    f = np.ones((3, 2), BF16)
    check(lambda m, a, b: m.einsum("ij,jk->ik", a, b), i, f)
    check(lambda m, a, b: m.einsum("ij,jk->ik", a, b), i, i.T)
    check(lambda m, a: m.einsum("ij->i", a), i)
    check(lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), i, f)
    check(lambda m, a: m.einsum("ij->j", a), i.astype(np.float16))


def test_einsum_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="operands"):
        fnp.einsum("ij,jk->ik", x)
    with pytest.raises(ValueError, match="rank"):
        fnp.einsum("ijk->i", x)
    with pytest.raises(ValueError, match="does not match"):
        fnp.einsum("ij,ij->i", x, np.ones((2, 4)))
    with pytest.raises(ValueError, match="output label 'z'"):
        fnp.einsum("ij->z", x)
    with pytest.raises(ValueError, match="repeats"):
        fnp.einsum("ij->ii", x)


# ---------------------------------------------------------------- errors
def test_shape_mismatch_errors_name_both_shapes():
    a, b = np.ones((2, 3)), np.ones((4, 5))
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4, 5\)"):
        fnp.matmul(a, b)
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4, 5\)"):
        ftrans.make_jaxpr(fnp.matmul)(a, b)
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4, 5\)"):
        fnp.dot(a, b)
    with pytest.raises(ValueError, match="0-d"):
        fnp.matmul(a, 2.0)
    with pytest.raises(ValueError, match="broadcasting"):
        fnp.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 1)))
    with pytest.raises(TypeError, match="inner"):
        fnp.inner(a, b)
    with pytest.raises(TypeError, match="vdot"):
        fnp.vdot(a, b)
    with pytest.raises(TypeError, match="tensordot"):
        fnp.tensordot(a, b, axes=1)
    with pytest.raises(ValueError, match="diagonal"):
        fnp.diagonal(np.ones(3))
    with pytest.raises(ValueError, match="axis1 and axis2"):
        fnp.diagonal(a, 0, 1, -1)


def test_dot_general_primitive_checks():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"contracting dimensions differ.*f32\[2,3\], f32\[4,3\]"):
        ftrans.make_jaxpr(lambda a, b: flax.dot_general(a, b, (((1,), (0,)), ((), ()))))(x, np.ones((4, 3), np.float32))
    # mixed operand dtypes are taken as they are, the result in the one of higher precision, as jax's
    mixed = flax.dot_general(x, np.ones((3, 2), np.int32), (((1,), (0,)), ((), ())))
    assert mixed.dtype == jax.lax.dot_general(x, np.ones((3, 2), np.int32), (((1,), (0,)), ((), ()))).dtype
    # any preferred type is taken (a float product may ask for an integral result), as jax's
    got = flax.dot_general(x, x.T, (((1,), (0,)), ((), ())), preferred_element_type=np.int32)
    want = jax.lax.dot_general(x, x.T, (((1,), (0,)), ((), ())), preferred_element_type=np.int32)
    assert got.dtype == want.dtype and np.array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match="out of range"):
        flax.dot_general(x, x, (((-1,), (1,)), ((), ())))
    with pytest.raises(TypeError, match="narrower"):
        flax.dot_general(np.ones((2, 2), np.int32), np.ones((2, 2), np.int32), (((1,), (0,)), ((), ())),
                         preferred_element_type=np.int8)


@settings(max_examples=examples(10))
@given(st.data(), st.sampled_from([np.float32, np.int32, np.int8, BF16]))
def test_lax_dot_general(data, d):
    b, n, k, m = (data.draw(st.integers(1, 3)) for _ in range(4))
    x = data.draw(hnp.arrays(np.float32, (k, b, n), elements=_elements(np.float32))).astype(d)
    y = data.draw(hnp.arrays(np.float32, (b, m, k), elements=_elements(np.float32))).astype(d)
    dn = (((0,), (2,)), ((1,), (0,)))
    check_lax(lambda mod, p, q: mod.dot_general(p, q, dn), x, y)
    pet = np.float32 if d in (BF16, np.float32) else np.int32
    check_lax(lambda mod, p, q: mod.dot_general(p, q, dn, preferred_element_type=pet), x, y)
    check_lax(lambda mod, p, q: mod.dot(p, q), x[:, 0, :].T, y[0].T)


# ---------------------------------------------------------------- precision / preferred_element_type in the equation
def _dot_params(make_jaxpr, f, *args):
    eqns = [e for e in make_jaxpr(f)(*args).jaxpr.eqns if e.primitive.name == "dot_general"]
    assert eqns, "no dot_general staged"
    return [(str(e.params["precision"]), np.dtype(e.params["preferred_element_type"])
             if e.params["preferred_element_type"] is not None else None) for e in eqns]


_PREC_CASES = [
    ("dot", lambda m, p: (lambda x, y: m.dot(x, y, **p)), (3, 4), (4, 5)),
    ("matmul", lambda m, p: (lambda x, y: m.matmul(x, y, **p)), (2, 3, 4), (2, 4, 5)),
    ("matmul_bcast", lambda m, p: (lambda x, y: m.matmul(x, y, **p)), (2, 3, 4), (4, 5)),
    ("inner", lambda m, p: (lambda x, y: m.inner(x, y, **p)), (3, 4), (5, 4)),
    ("vdot", lambda m, p: (lambda x, y: m.vdot(x, y, **p)), (3, 4), (3, 4)),
    ("vecdot", lambda m, p: (lambda x, y: m.vecdot(x, y, **p)), (3, 4), (3, 4)),
    ("tensordot", lambda m, p: (lambda x, y: m.tensordot(x, y, axes=1, **p)), (3, 4), (4, 5)),
    ("einsum", lambda m, p: (lambda x, y: m.einsum("ij,jk->ik", x, y, **p)), (3, 4), (4, 5)),
    ("einsum3", lambda m, p: (lambda x, y: m.einsum("ij,jk,kl->il", x, y, y.T, **p)), (3, 4), (4, 4)),
    ("linalg.matmul", lambda m, p: (lambda x, y: m.linalg.matmul(x, y, **p)), (3, 4), (4, 5)),
    ("linalg.multi_dot", lambda m, p: (lambda x, y: m.linalg.multi_dot([x, y, y.T],
                                                                       precision=p.get("precision"))), (3, 4), (4, 5)),
]


@pytest.mark.parametrize("name,make,sa,sb", _PREC_CASES, ids=[c[0] for c in _PREC_CASES])
@pytest.mark.parametrize("prec", ["highest", ("high", "highest"), None])
def test_products_keep_precision_in_staged_dot_general(name, make, sa, sb, prec):
    a = np.linspace(-1, 1, math.prod(sa), dtype=np.float32).reshape(sa)
    b = np.linspace(-2, 1, math.prod(sb), dtype=np.float32).reshape(sb)
    jprec = None if prec is None else (jax.lax.Precision(prec) if isinstance(prec, str)
                                       else tuple(jax.lax.Precision(p) for p in prec))
    fprec = None if prec is None else (flax.Precision(prec) if isinstance(prec, str)
                                       else tuple(flax.Precision(p) for p in prec))
    want = [p for p, _ in _dot_params(jax.make_jaxpr, make(jnp, {"precision": jprec}), a, b)]
    got = [p for p, _ in _dot_params(ftrans.make_jaxpr, make(fnp, {"precision": fprec}), a, b)]
    assert got == want
    # the string form and ftrans's or JAX's enum are all accepted
    for p in (prec, jprec):
        assert [q for q, _ in _dot_params(ftrans.make_jaxpr, make(fnp, {"precision": p}), a, b)] == want
    np.testing.assert_allclose(np.asarray(ftrans.jit(make(fnp, {"precision": fprec}))(a, b)),
                               np.asarray(jax.jit(make(jnp, {"precision": jprec}))(a, b)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["dot", "matmul", "inner", "tensordot", "einsum", "vdot"])
@pytest.mark.parametrize("dt,pet", [(np.float32, np.float32), (np.int8, np.int32), (np.float16, np.float32)])
def test_products_keep_explicit_preferred_element_type(name, dt, pet):
    make = dict((c[0], c[1]) for c in _PREC_CASES)[name]
    sa, sb = {"vdot": ((3, 4), (3, 4)), "inner": ((3, 4), (5, 4))}.get(name, ((3, 4), (4, 5)))
    a = (np.arange(math.prod(sa)) % 5 - 2).astype(dt).reshape(sa)
    b = (np.arange(math.prod(sb)) % 3 - 1).astype(dt).reshape(sb)
    p = {"preferred_element_type": pet, "precision": "highest"}
    want = _dot_params(jax.make_jaxpr, make(jnp, p), a, b)
    got = _dot_params(ftrans.make_jaxpr, make(fnp, p), a, b)
    assert [g[1] for g in got] == [w[1] for w in want]
    r, e = ftrans.jit(make(fnp, p))(a, b), jax.jit(make(jnp, p))(a, b)
    assert r.dtype == e.dtype
    np.testing.assert_allclose(np.asarray(r), np.asarray(e), rtol=1e-3)


def test_products_reject_unknown_precision_with_value_error():
    a = np.ones((2, 2), np.float32)
    for fn in ("dot", "matmul", "inner", "tensordot", "vdot"):
        with pytest.raises(ValueError):
            getattr(jnp, fn)(a, a, precision="bogus")
        with pytest.raises(ValueError, match="precision"):
            getattr(fnp, fn)(a, a, precision="bogus")
    with pytest.raises(ValueError, match="precision"):
        fnp.einsum("ij,jk", a, a, precision="bogus")


@pytest.mark.jax_default_precision
@pytest.mark.parametrize("value", [None, "bfloat16", "tensorfloat32", "float32", "highest"])
def test_default_matmul_precision_fills_in_an_unset_precision(value):
    """JAX's default_matmul_precision option (and context manager) sets the precision of products given
    none; an explicit precision wins; a jitted function traces again when it changes."""
    import operator

    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(2, 2)
    fns = [lambda m, lib: m.dot, lambda m, lib: operator.matmul, lambda m, lib: (lambda a, b: m.einsum("ij,jk", a, b)),
           lambda m, lib: (lambda a, b: lib.lax.dot_general(a, b, (((1,), (0,)), ((), ())))),
           lambda m, lib: (lambda a, b: m.dot(a, b, precision="bfloat16"))]
    got, want = [], []
    for lib, m, res in ((jax, jnp, want), (ftrans, fnp, got)):
        with lib.default_matmul_precision(value):
            for mk in fns:
                res.append(str(lib.make_jaxpr(mk(m, lib))(x, x).jaxpr.eqns[0].params["precision"]))
    assert got == want
    assert ftrans.config.default_matmul_precision is None
    with pytest.raises(ValueError):
        ftrans.config.update("jax_default_matmul_precision", "bogus")
    assert ftrans.config.default_matmul_precision is None


@pytest.mark.jax_default_precision
def test_default_matmul_precision_change_retraces_jit():
    """Entering and leaving the context changes what a jitted function stages, in ftrans as in JAX (ftrans
    may trace again when the option returns to a value it traced before: tests/test_differences.py)."""
    x = np.ones((2, 2), np.float32)
    for lib, m in ((jax, jnp), (ftrans, fnp)):
        n = [0]

        @lib.jit
        def f(a, n=n, m=m):
            n[0] += 1
            return m.dot(a, a)

        f(x)
        f(x)
        assert n[0] == 1
        with lib.default_matmul_precision("tensorfloat32"):
            np.testing.assert_allclose(np.asarray(f(x)), np.full((2, 2), 2.0))
            assert n[0] == 2
            assert "Precision.HIGH" in str(f.trace(x).jaxpr)
            f(x)
            assert n[0] == 2
        f(x)
        assert "Precision" not in str(f.trace(x).jaxpr)


@pytest.mark.parametrize("xs,ys", [((3,), (3,)), ((3,), (3, 4)), ((3,), (2, 3, 4)), ((2, 5, 3), (3,))])
def test_matmul_with_a_vector_is_one_dot_general_as_in_jax(xs, ys):
    """A 1-D operand is contracted as it is: the staged program is jax's single ``dot_general`` (no unit
    axes added and removed), which is what remat policies and printed IR see."""
    x = np.linspace(-1, 1, math.prod(xs), dtype=np.float32).reshape(xs)
    y = np.linspace(0, 2, math.prod(ys), dtype=np.float32).reshape(ys)
    fj = ftrans.make_jaxpr(fnp.matmul)(x, y)
    jj = jax.make_jaxpr(jnp.matmul)(x, y)
    assert [e.primitive.name for e in fj.jaxpr.eqns] == [e.primitive.name for e in jj.jaxpr.eqns] == ["dot_general"]
    assert fj.eqns[0].params["dimension_numbers"] == tuple(
        tuple(tuple(d) for d in part) for part in jj.eqns[0].params["dimension_numbers"])
    np.testing.assert_allclose(fnp.matmul(x, y), jnp.matmul(x, y), rtol=1e-6)


@pytest.mark.parametrize("da,db", [(np.float32, BF16), (np.int8, np.float32),
                                   (np.bool_, np.int32)])
def test_mixed_precision_dot_takes_operands_as_they_are_like_jax(da, db):
    x = (np.arange(12).reshape(3, 4) % 5).astype(da)
    y = (np.arange(8).reshape(4, 2) % 3).astype(db)
    S = (jax.ShapeDtypeStruct((3, 4), da), jax.ShapeDtypeStruct((4, 2), db))
    for fmod, jmod in ((fnp, jnp), (flax, jax.lax)):
        f = fmod.dot if fmod is fnp else (lambda a, b, m=fmod: m.dot_general(a, b, (((1,), (0,)), ((), ()))))
        g = jmod.dot if jmod is jnp else (lambda a, b, m=jmod: m.dot_general(a, b, (((1,), (0,)), ((), ()))))
        prims = [e.primitive.name for e in ftrans.make_jaxpr(f)(*S).eqns]
        assert prims == [e.primitive.name for e in jax.make_jaxpr(g)(*S).eqns], prims
        for got in (f(x, y), ftrans.jit(f)(x, y)):
            want = g(x, y)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32))
    if np.dtype(da).kind == "f":  # the gradient of the float operand: JAX's transpose, converted back to its dtype
        def loss(m, a):
            return m.dot_general(a, y, (((1,), (0,)), ((), ())), preferred_element_type=np.float32).sum()
        got, want = ftrans.grad(partial(loss, flax))(x), jax.grad(partial(loss, jax.lax))(x)
        assert got.dtype == want.dtype == np.dtype(da)
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32))


_MIXED_PRODUCTS = [
    ("vdot", lambda L: lambda x, y: L.vdot(x, y), ((3,), np.float16), ((3,), np.float32)),
    ("inner", lambda L: lambda x, y: L.inner(x, y), ((2, 3), np.int8), ((4, 3), np.float32)),
    ("tensordot", lambda L: lambda x, y: L.tensordot(x, y, 1), ((2, 3), np.int8), ((3, 2), np.float32)),
    ("vecdot", lambda L: lambda x, y: L.vecdot(x, y), ((2, 3), np.float32), ((2, 3), np.complex64)),
    ("einsum", lambda L: lambda x, y: L.einsum("ij,jk->ik", x, y), ((2, 3), np.int8), ((3, 2), np.float16)),
    # an int8 operand summed over an axis the output drops: converted to the join first (no wrap-around)
    ("einsum_sum", lambda L: lambda x, y: L.einsum("ij,k->k", x, y), ((4, 8), np.int8), ((2,), np.float32)),
]


@pytest.mark.parametrize("name,mk,xs,ys", _MIXED_PRODUCTS, ids=[c[0] for c in _MIXED_PRODUCTS])
def test_mixed_dtype_products_pass_operands_as_given(name, mk, xs, ys):
    # As JAX: vdot/inner/tensordot/vecdot/einsum hand mixed operands to dot_general in their own dtypes
    # (naming the joined dtype as the preferred one) instead of converting them first.
    x = (np.arange(math.prod(xs[0])).reshape(xs[0]) * 7 + 50).astype(xs[1])
    y = (np.arange(math.prod(ys[0])).reshape(ys[0]) / 2).astype(ys[1])
    want_jaxpr = jax.make_jaxpr(mk(jnp))(x, y)
    got_jaxpr = ftrans.make_jaxpr(mk(fnp))(x, y)
    assert [e.primitive.name for e in got_jaxpr.jaxpr.eqns] == [e.primitive.name for e in want_jaxpr.jaxpr.eqns]
    want, got = jax.jit(mk(jnp))(x, y), mk(fnp)(x, y)
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3)


def test_einsum_path_steps_of_three_operands_raise_as_jax():
    a, b, c = np.ones((2, 3), np.float32), np.ones((2, 4), np.float32), np.ones((2, 5), np.float32)
    with pytest.raises(NotImplementedError, match="simultaneous contraction of 3 or more operands"):
        jnp.einsum("ij,ik,il->jkl", a, b, c, optimize=[(0, 1, 2)])
    with pytest.raises(NotImplementedError, match="simultaneous contraction of 3 or more operands"):
        fnp.einsum("ij,ik,il->jkl", a, b, c, optimize=[(0, 1, 2)])
    np.testing.assert_allclose(fnp.einsum("ij,ik,il->jkl", a, b, c, optimize=[(0, 1), (0, 1)]),
                               jnp.einsum("ij,ik,il->jkl", a, b, c, optimize=[(0, 1), (0, 1)]))


def test_einsum_dot_general_argument_like_jax():
    # einsum(_dot_general=fn) calls fn in place of lax.dot_general for each pairwise contraction (flax's
    # attention passes one); a scaling fn shows it is used, and jit traces through it.
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = np.arange(20, dtype=np.float32).reshape(5, 4) / 7
    z = np.arange(10, dtype=np.float32).reshape(2, 5)
    for eq, ops in [("bqd,kd->bqk", (x, y)), ("bqd,kd,bk->q", (x, y, z))]:
        want = jnp.einsum(eq, *ops, _dot_general=lambda *a, **k: 2 * jax.lax.dot_general(*a, **k))
        got = ftrans.jit(lambda *o, eq=eq: fnp.einsum(
            eq, *o, _dot_general=lambda *a, **k: 2 * flax.dot_general(*a, **k)))(*ops)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
        assert got.dtype == want.dtype
