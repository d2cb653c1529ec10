"""The rest of jax 0.10.2's ``lax`` names (issue 18): ``pswapaxes``, ``pshuffle``, ``pbroadcast``, ``pcast``,
``stage``, ... against jax under ``vmap(axis_name=)``, ``pmap``, ``grad`` and ``jit``."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import FtransNameError
from tests.backend_util import on_cpu

FT, JX = (ftrans, fjnp, flax), (jax, jjnp, jlax)
from tests.test_collectives import arr, assert_tree  # noqa: E402  the shared differential helpers


def both(build, *args, tol=1e-5, jit=True):
    """``build(t, np, lax)`` run with ftrans and with jax (under ``jax.jit`` unless ``jit=False``: one compiled
    program, not one per primitive) on the same arguments; the results must agree."""
    got = build(*FT)(*args)
    want = (jax.jit(build(*JX)) if jit else build(*JX))(*args)
    assert_tree(got, want, tol)
    return got


X = arr(4, 3)
SQ = arr(4, 4)
CUBE = arr(4, 2, 4)
multi = pytest.mark.skipif(jax.local_device_count() < 4, reason="needs 4 host devices (tests/conftest.py)")


# ----------------------------------------------------------------------------
# pswapaxes


@pytest.mark.parametrize("axis", [0, 1])
def test_pswapaxes_vmap(axis):
    x = SQ if axis == 0 else CUBE  # per example (4,) on axis 0, or (2, 4) with axis 1 of size 4
    both(lambda t, np_, lax: t.vmap(lambda v: lax.pswapaxes(v, "i", axis), axis_name="i"), x)


def test_pswapaxes_negative_axis():
    # jax 0.10.2's all_to_all batching mishandles axis=-1 under vmap (a reshape error); compare with axis=1
    got = ftrans.vmap(lambda v: flax.pswapaxes(v, "i", -1), axis_name="i")(CUBE)
    assert_tree(got, jax.vmap(lambda v: jlax.pswapaxes(v, "i", 1), axis_name="i")(CUBE))


def test_pswapaxes_pytree_and_grad():
    both(lambda t, np_, lax: t.vmap(lambda v: lax.pswapaxes({"a": v, "b": (v * 2,)}, "i", 0), axis_name="i"), SQ)
    w = arr(4, 4)
    both(lambda t, np_, lax: t.grad(lambda x: (t.vmap(lambda v: lax.pswapaxes(v, "i", 0), axis_name="i")(x)
                                               * w).sum()), SQ)


def test_pswapaxes_jit_vmap():
    both(lambda t, np_, lax: t.jit(t.vmap(lambda v: lax.pswapaxes(v, "i", 1), axis_name="i")), CUBE)


def test_pswapaxes_errors():
    with pytest.raises(ValueError, match="size"):
        ftrans.vmap(lambda v: flax.pswapaxes(v, "i", 0), axis_name="i")(arr(4, 3))
    with pytest.raises(FtransNameError):
        ftrans.vmap(lambda v: flax.pswapaxes(v, "j", 0), axis_name="i")(SQ)
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        ftrans.vmap(lambda v: flax.pswapaxes(v, "i", 0, axis_index_groups=[[0, 1], [2, 3]]), axis_name="i")(SQ)


@multi
def test_pswapaxes_pmap():
    both(lambda t, np_, lax: t.pmap(lambda v: lax.pswapaxes(v, "i", 0), axis_name="i"), SQ, jit=False)


# ----------------------------------------------------------------------------
# pshuffle


@pytest.mark.parametrize("perm", [[0, 1, 2, 3], [1, 2, 3, 0], [3, 0, 2, 1]])
def test_pshuffle_vmap(perm):
    both(lambda t, np_, lax: t.vmap(lambda v: lax.pshuffle(v, "i", perm), axis_name="i"), X)


def test_pshuffle_pytree_int_grad_jit():
    perm = [2, 0, 3, 1]
    both(lambda t, np_, lax: t.vmap(lambda v: lax.pshuffle((v, v.astype(np_.int32)), "i", perm), axis_name="i"),
         X * 4)
    w = arr(4, 3)
    both(lambda t, np_, lax: t.grad(lambda x: (t.vmap(lambda v: lax.pshuffle(v, "i", perm), axis_name="i")(x)
                                               * w).sum()), X)
    both(lambda t, np_, lax: t.jit(t.vmap(lambda v: lax.pshuffle(v, "i", tuple(perm)), axis_name="i")), X)


def test_pshuffle_errors():
    with pytest.raises(ValueError, match="does not represent a permutation"):
        ftrans.vmap(lambda v: flax.pshuffle(v, "i", [1, 1, 3, 0]), axis_name="i")(X)
    with pytest.raises(ValueError, match="does not represent a permutation"):
        jax.vmap(lambda v: jlax.pshuffle(v, "i", [1, 1, 3, 0]), axis_name="i")(X)
    with pytest.raises(ValueError, match="has size 4"):  # jax: a bare AssertionError
        ftrans.vmap(lambda v: flax.pshuffle(v, "i", [1, 0]), axis_name="i")(X)
    with pytest.raises(TypeError, match="sequence of ints"):
        ftrans.vmap(lambda v: flax.pshuffle(v, "i", [0.5, 1]), axis_name="i")(X)
    with pytest.raises(FtransNameError):
        ftrans.vmap(lambda v: flax.pshuffle(v, "j", [1, 2, 3, 0]), axis_name="i")(X)


@multi
def test_pshuffle_pmap():
    both(lambda t, np_, lax: t.pmap(lambda v: lax.pshuffle(v, "i", [3, 2, 0, 1]), axis_name="i"), X, jit=False)


# ----------------------------------------------------------------------------
# pbroadcast: jax 0.10.2's primitive fails under vmap and has no CPU lowering, so the oracle is the
# equivalent jax documents, psum(where(axis_index == source, x, 0)).


def _jax_pbroadcast(v, name, source):
    return jax.tree_util.tree_map(
        lambda leaf: jlax.psum(jjnp.where(jlax.axis_index(name) == source, leaf, jjnp.zeros_like(leaf)), name), v)


def _check_pbroadcast(fbuild, jbuild, *args):
    assert_tree(fbuild(*args), jbuild(*args))


@pytest.mark.parametrize("source", [0, 2, 3])
def test_pbroadcast_vmap(source):
    got = ftrans.vmap(lambda v: flax.pbroadcast(v, "i", source), axis_name="i")(X)
    want = jax.jit(jax.vmap(lambda v: _jax_pbroadcast(v, "i", source), axis_name="i"))(X)
    assert_tree(got, want)
    # jax's own primitive batches a NumPy operand (a jax array hits a bug in its vmap rule)
    assert_tree(got, jax.vmap(lambda v: jlax.pbroadcast(v, "i", source), axis_name="i")(X))
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(X[source], X.shape))


def test_pbroadcast_dtypes_pytree_scalar():
    xi = (X * 4).astype(np.int32)
    got = ftrans.vmap(lambda v, w: flax.pbroadcast({"f": v, "i": w, "b": w > 0, "s": v[0]}, "i", 1),
                      axis_name="i")(X, xi)
    want = {"f": np.broadcast_to(X[1], X.shape), "i": np.broadcast_to(xi[1], xi.shape),
            "b": np.broadcast_to(xi[1] > 0, xi.shape), "s": np.full((4,), X[1, 0])}
    assert_tree(got, want)


def test_pbroadcast_grad_jit():
    w = arr(4, 3)

    def f(t, lax, pb):
        return lambda x: (t.vmap(lambda v: pb(v, "i", 2), axis_name="i")(x) * w).sum()

    got = ftrans.grad(f(ftrans, flax, flax.pbroadcast))(X)
    want = jax.jit(jax.grad(f(jax, jlax, _jax_pbroadcast)))(X)
    assert_tree(got, want)
    got = ftrans.jit(ftrans.vmap(lambda v: flax.pbroadcast(v, "i", 3), axis_name="i"))(X)
    assert_tree(got, np.broadcast_to(X[3], X.shape))


def test_pbroadcast_errors():
    with pytest.raises(ValueError, match="out of range"):
        ftrans.vmap(lambda v: flax.pbroadcast(v, "i", 4), axis_name="i")(X)
    with pytest.raises(TypeError, match="source must be a Python int"):
        ftrans.vmap(lambda v: flax.pbroadcast(v, "i", 1.0), axis_name="i")(X)
    with pytest.raises(FtransNameError):
        ftrans.vmap(lambda v: flax.pbroadcast(v, "j", 0), axis_name="i")(X)


@multi
def test_pbroadcast_pmap():
    got = ftrans.pmap(lambda v: flax.pbroadcast(v, "i", 1), axis_name="i")(X)
    want = jax.pmap(lambda v: _jax_pbroadcast(v, "i", 1), axis_name="i")(X)
    assert_tree(got, want)


# ----------------------------------------------------------------------------
# pcast


def test_pcast_varying_is_identity():
    got = ftrans.vmap(lambda v: flax.pcast({"a": v}, "i", to="varying"), axis_name="i")(X)
    assert_tree(got, {"a": X})
    # jax, outside shard_map, refuses; ftrans has no varying types and accepts (docs/differences.md)
    with pytest.raises(ValueError, match="shard_map"):
        jax.vmap(lambda v: jlax.pcast(v, "i", to="varying"), axis_name="i")(X)


def test_pcast_empty_axes_and_errors():
    assert_tree(flax.pcast(X, (), to="varying"), jlax.pcast(X, (), to="varying"))
    for lib in (flax, jlax):
        with pytest.raises(TypeError, match="must be a tuple or a str"):
            lib.pcast(X, {"i"}, to="varying")
        with pytest.raises(ValueError, match="Allowed `to` values"):
            jax.vmap(lambda v, lib=lib: lib.pcast(v, "i", to="invariant"), axis_name="i")(X) if lib is jlax else \
                ftrans.vmap(lambda v: flax.pcast(v, "i", to="invariant"), axis_name="i")(X)
    with pytest.raises(NotImplementedError, match="reduced"):
        ftrans.vmap(lambda v: flax.pcast(v, "i", to="reduced"), axis_name="i")(X)
    for lib in (flax, jlax):  # eagerly, outside any shard_map body: JAX's ValueError
        with pytest.raises(ValueError, match="pvary should be called under jax.shard_map"):
            lib.pcast(X, "i", to="varying")


# ----------------------------------------------------------------------------
# stage


@pytest.mark.parametrize("x", [3, 2.5, True, np.arange(3), np.float32(1.5), np.ones((2, 2), np.int8)])
def test_stage_values(x):
    got, want = flax.stage(x), jlax.stage(x)
    assert isinstance(got, ftrans.Array)
    assert_tree(got, want)
    assert got.weak_type == want.weak_type


def test_stage_transforms():
    both(lambda t, np_, lax: t.grad(lambda v: lax.stage(v) * 2.0), 1.5)
    both(lambda t, np_, lax: t.vmap(lambda v: lax.stage(v) + 1), X)
    both(lambda t, np_, lax: t.jit(lambda v: lax.stage(v) * lax.stage(2)), X)
    jp = ftrans.make_jaxpr(lambda v: flax.stage(v))(1.0)
    assert not jp.jaxpr.eqns


def test_stage_errors():
    for bad in ("a", [1, 2]):
        with pytest.raises(TypeError, match="stage"):
            flax.stage(bad)
        with pytest.raises(TypeError, match="stage"):
            jlax.stage(bad)


# ----------------------------------------------------------------------------
# rng_uniform: XLA's stateful generator, whose values are unspecified (not seeded): shape, dtype, weak type and
# range are checked against jax, not the values.


@pytest.mark.parametrize("a,b,shape", [(0.0, 1.0, (3,)), (np.float32(-2), np.float32(5), (4, 5)), (0, 10, (50,)),
                                       (np.int32(3), np.int32(7), ()), (np.float16(0), np.float16(1), (8,))])
def test_rng_uniform_shape_dtype_range(a, b, shape):
    for f in (lambda: flax.rng_uniform(a, b, shape), ftrans.jit(lambda: flax.rng_uniform(a, b, shape))):
        got = f()
        want = jlax.rng_uniform(a, b, shape)
        assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
        v = np.asarray(got)
        assert np.all(v >= a) and np.all(v < b), v
    if shape == (50,):
        assert len(np.unique(np.asarray(flax.rng_uniform(a, b, shape)))) > 1


def test_rng_uniform_traced_bounds():
    got = ftrans.jit(lambda lo, hi: flax.rng_uniform(lo, hi, (100,)))(np.float32(3), np.float32(4))
    assert got.shape == (100,) and got.dtype == np.float32
    v = np.asarray(got)
    assert v.min() >= 3 and v.max() < 4


def test_rng_uniform_errors():
    for lib in (flax, jlax):
        with pytest.raises(ValueError, match="identical dtypes"):
            lib.rng_uniform(0, 1.0, (2,))
        with pytest.raises(ValueError, match="must be scalars"):
            lib.rng_uniform(np.zeros(2, np.float32), np.float32(1), (2,))
    with pytest.raises(TypeError, match="integers or real floats"):
        flax.rng_uniform(True, False, (2,))
    with pytest.raises(TypeError, match="rng_uniform"):
        flax.rng_uniform("a", 1.0, (2,))
    with pytest.raises(NotImplementedError, match="derivative"):
        ftrans.grad(lambda a: flax.rng_uniform(a, 2.0, (2,)).sum())(1.0)
    with pytest.raises(NotImplementedError, match="vmap"):
        ftrans.vmap(lambda a: flax.rng_uniform(a, np.float32(2), (2,)))(np.zeros(3, np.float32))


# ----------------------------------------------------------------------------
# scaled_dot


def _sd_inputs(lshape, rshape, lsshape, rsshape):
    r = np.random.default_rng(7)
    return (r.normal(size=lshape).astype(np.float32), r.normal(size=rshape).astype(np.float32),
            r.uniform(0.5, 2, size=lsshape).astype(np.float32), r.uniform(0.5, 2, size=rsshape).astype(np.float32))


SD_CASES = [
    ((3, 8), (8, 2), (3, 2), (2, 2), None),
    ((3, 8), (2, 8), (3, 4), (2, 4), (((1,), (1,)), ((), ()))),
    ((2, 3, 8), (2, 8, 5), (2, 3, 4), (2, 2, 5), None),
    ((8, 3), (8, 2), (2, 3), (4, 2), (((0,), (0,)), ((), ()))),
    ((2, 6, 3), (3, 2, 6), (2, 3, 3), (3, 2, 2), (((1,), (2,)), ((0,), (1,)))),
]


@pytest.mark.parametrize("case", range(len(SD_CASES)))
@pytest.mark.parametrize("pref", [None, np.float32])
def test_scaled_dot_values(case, pref):
    *shapes, dn = SD_CASES[case]
    lhs, rhs, ls, rs = _sd_inputs(*shapes)
    kws = ({}, {"lhs_scale": ls, "rhs_scale": rs}, {"lhs_scale": ls.astype(jjnp.float8_e8m0fnu)}, {"rhs_scale": rs})

    def every_kw(lib):  # the scaling variants in one program (one compilation on each side, not four)
        return lambda *a: [lib.scaled_dot(*a, dimension_numbers=dn, preferred_element_type=pref, **kw) for kw in kws]

    wants, jitteds = jax.jit(every_kw(jlax))(lhs, rhs), ftrans.jit(every_kw(flax))(lhs, rhs)
    for kw, want, jitted in zip(kws, wants, jitteds):
        got = flax.scaled_dot(lhs, rhs, dimension_numbers=dn, preferred_element_type=pref, **kw)
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        # eagerly each bfloat16 product is rounded; XLA's fused program (jax's, or ftrans's under jit) may not round
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=3e-2, atol=3e-2)
        # (on a GPU the two programs' fusions round bfloat16 intermediates apart: a few ulps, as eagerly)
        tol = 1e-2 if on_cpu() else 3e-2
        np.testing.assert_allclose(np.asarray(jitted, np.float32), np.asarray(want, np.float32), rtol=tol,
                                   atol=tol)


def test_scaled_dot_vmap():
    lhs, rhs, ls, rs = _sd_inputs((4, 3, 8), (8, 2), (4, 3, 2), (2, 2))

    def f(lib):
        return lambda a, s: lib.scaled_dot(a, rhs, lhs_scale=s, rhs_scale=rs, preferred_element_type=np.float32)

    got = ftrans.jit(ftrans.vmap(f(flax)))(lhs, ls)
    want = jax.jit(jax.vmap(f(jlax)))(lhs, ls)
    # the closed-over rhs * rhs_scale is folded eagerly (rounded to bfloat16 per product), not in XLA's fusion
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=3e-2, atol=6e-2)
    got = ftrans.vmap(f(flax))(lhs, ls)
    assert got.shape == want.shape == (4, 3, 2) and got.dtype == want.dtype


def test_scaled_dot_grad():
    # jax's scaled_dot has no differentiation rule; ftrans's composition differentiates like jax's reference
    lhs, rhs, ls, rs = _sd_inputs((3, 8), (8, 2), (3, 2), (2, 2))
    with pytest.raises(NotImplementedError):
        jax.grad(lambda a: jlax.scaled_dot(a, rhs, preferred_element_type=np.float32).sum())(lhs)

    def ref(a):
        s = jjnp.repeat(jjnp.asarray(ls, jjnp.bfloat16), 4, axis=1)
        r_ = jjnp.asarray(rhs, jjnp.bfloat16) * jjnp.repeat(jjnp.asarray(rs, jjnp.bfloat16), 4, axis=0)
        return jlax.dot(a.astype(jjnp.bfloat16) * s, r_, preferred_element_type=jjnp.float32).sum()

    got = ftrans.grad(lambda a: flax.scaled_dot(a, rhs, lhs_scale=ls, rhs_scale=rs,
                                                preferred_element_type=np.float32).sum())(lhs)
    want = jax.jit(jax.grad(ref))(lhs)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("args,kw,match", [
    ((np.ones(8, np.float32), np.ones(8, np.float32)), {}, "0-rank and 1-rank"),
    ((np.ones((3, 8), np.float32), np.ones((8, 2), np.float32)), {"lhs_scale": np.ones((3, 3), np.float32)},
     "must be divisible"),
    ((np.ones((3, 8), np.float32), np.ones((8, 2), np.float32)), {"lhs_scale": np.ones((3, 8), np.float32)},
     "at least 2"),
    ((np.ones((3, 8), np.float32), np.ones((8, 2), np.float32)), {"lhs_scale": np.ones((3,), np.float32)},
     "same rank"),
    ((np.ones((3, 8), np.float32), np.ones((8, 2), np.float32)), {"rhs_scale": np.ones((2, 3), np.float32)},
     "does not match scale dim size"),
    ((np.ones((3, 8), np.float32), np.ones((6, 2), np.float32)), {}, "does not match RHS"),
])
def test_scaled_dot_errors(args, kw, match):
    with pytest.raises(TypeError, match=match):
        flax.scaled_dot(*args, **kw)
    with pytest.raises(TypeError):
        jlax.scaled_dot(*args, **kw)


# ----------------------------------------------------------------------------
# create_token / after_all: ftrans's tokens carry no data (a pytree with no leaves), so they pass through
# jit / vmap / grad as jax's do.


def test_tokens_pass_through_jit_vmap_grad():
    ft, jt = flax.create_token(), jlax.create_token()
    for t, lib, tr in ((ft, flax, ftrans), (jt, jlax, jax)):
        tok, y = tr.jit(lambda t, x, lib=lib: (lib.after_all(t, lib.create_token(x)), x + 1))(t, 1.0)
        assert type(tok) is type(t)
        assert float(y) == 2.0
        tok2 = tr.jit(lambda x, lib=lib: lib.create_token(x))(1.0)
        assert type(tok2) is type(t)
    # (jax 0.10.2's vmap cannot return a token: AttributeError on AbstractToken.sharding)
    got = ftrans.vmap(lambda x: (flax.create_token(x), x * 2))(X)
    assert type(got[0]) is flax.Token
    assert_tree(got[1], jax.vmap(lambda x: x * 2)(X))
    g = ftrans.grad(lambda x: flax.after_all(flax.create_token(x)) and x * 3.0)(2.0)
    assert float(g) == float(jax.grad(lambda x: jlax.after_all(jlax.create_token(x)) and x * 3.0)(2.0)) == 3.0
    assert flax.after_all() == ft and ft.block_until_ready() is ft


def test_after_all_rejects_non_tokens():
    with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
        flax.after_all(flax.create_token(), 1.0)
    with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
        ftrans.jit(lambda x: flax.after_all(x))(1.0)


# ----------------------------------------------------------------------------
# shard_map: the collectives over a mesh axis, against jax.shard_map


@multi
@pytest.mark.parametrize("which", ["pswapaxes", "pshuffle", "pbroadcast", "pcast"])
def test_collectives_shard_map(which):
    from jax.sharding import AxisType as JA
    from jax.sharding import PartitionSpec as JP

    from ftrans.sharding import AxisType, P

    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    fm = ftrans.make_mesh((4,), ("i",), axis_types=(AxisType.Auto,), devices=ftrans.devices()[:4])
    jm = jax.make_mesh((4,), ("i",), axis_types=(JA.Auto,), devices=jax.devices()[:4])
    body = {
        "pswapaxes": lambda lax: (lambda a: lax.pswapaxes(a.reshape(4, 4), "i", 0).reshape(1, 16)),
        "pshuffle": lambda lax: (lambda a: lax.pshuffle(a, "i", [2, 0, 3, 1])),
        "pbroadcast": lambda lax: (lambda a: lax.pbroadcast(a, "i", 2)) if lax is flax else
        (lambda a: _jax_pbroadcast(a, "i", 2)),
        # psum's result is invariant over "i" (jax refuses to pcast a value that already varies)
        "pcast": lambda lax: (lambda a: lax.pcast(lax.psum(a, "i"), "i", to="varying") + a),
    }[which]
    got = ftrans.shard_map(body(flax), mesh=fm, in_specs=P("i"), out_specs=P("i"))(x)
    want = jax.jit(jax.shard_map(body(jlax), mesh=jm, in_specs=JP("i"), out_specs=JP("i")))(x)
    assert_tree(got, want)


@multi
def test_pbroadcast_pmap_grad_and_vmap_inside():
    """jax's own (GPU-only) pmap tests of pbroadcast: grad sends every device's cotangent to the source."""
    f = lambda x: flax.pbroadcast(x, source=0, axis_name="i")  # noqa: E731
    x = np.arange(1, 5, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(ftrans.pmap(ftrans.grad(f), "i")(x)), [4.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(ftrans.pmap(f, "i")(x)), [1.0] * 4)
    x3 = np.arange(64, dtype=np.float32).reshape(4, 4, 4)
    np.testing.assert_array_equal(np.asarray(ftrans.pmap(ftrans.vmap(f), "i")(x3)), np.broadcast_to(x3[:1], x3.shape))
