"""Forward-mode derivatives of the structural and indexing primitives: ``ftrans.jvp`` against ``jax.jvp``.

Each case is a small program written once against a ``(jnp, lax)`` pair and
run with ftrans's and jax's modules on the same hypothesis-drawn primals and
tangents: primal and tangent outputs must agree in value, dtype and shape.
The same programs run under ``ftrans.make_jaxpr`` (typechecked, re-evaluated)
and ``ftrans.jit``; a few are checked against central finite differences in
float64.  Conversions, selection, clamping, padding, concatenation, slicing
(static and dynamic), gather and every scatter are covered here.
"""

from __future__ import annotations

import contextlib
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
from ftrans.core.prims import indexing as I
from ftrans.core.prims import structural as S
from ftrans.transforms.ad import Zero, jvp_rules

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
    g, gt = jax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert len(g) == len(w), (gt, wt)
    for a, b in zip(g, w):
        if np.asarray(b).dtype == jax.dtypes.float0:
            assert np.asarray(a).dtype == jax.dtypes.float0
            assert np.shape(a) == np.shape(b)
            continue
        assert_close(a, b, **kw)


def staged_jvp(f, primals, tangents):
    """jvp under make_jaxpr: typecheck the program and run it again."""
    closed = ftrans.make_jaxpr(lambda p, t: ftrans.jvp(f, p, t))(primals, tangents)
    typecheck(closed)
    flat = [np.asarray(a) for a in jax.tree_util.tree_leaves((primals, tangents))]
    out = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *flat)
    return closed, out


IDX = np.array([2, 0, 3, 2], np.int32)
IDX_UNIQUE = np.array([3, 0, 1], np.int32)

# name -> (operand shapes, program builder (jnp, lax) -> f).  All operands are float32.
CASES = {
    "reshape": ([(2, 6)], lambda np_, lx: lambda x: np_.reshape(x, (3, 4))),
    "reshape_order_f": ([(2, 3)], lambda np_, lx: lambda x: np_.reshape(x, (3, 2), order="F")),
    "transpose": ([(2, 3, 4)], lambda np_, lx: lambda x: np_.transpose(x, (2, 0, 1))),
    "x.T": ([(2, 5)], lambda np_, lx: lambda x: x.T),
    "squeeze": ([(1, 3, 1)], lambda np_, lx: lambda x: np_.squeeze(x)),
    "expand_dims": ([(3, 2)], lambda np_, lx: lambda x: np_.expand_dims(x, -1)),
    "broadcast_to": ([(3, 1)], lambda np_, lx: lambda x: np_.broadcast_to(x, (2, 3, 4))),
    "broadcast_in_dim": ([(3,)], lambda np_, lx: lambda x: lx.broadcast_in_dim(x, (2, 3), (1,))),
    "flip": ([(3, 4)], lambda np_, lx: lambda x: np_.flip(x, (0, 1))),
    "rev": ([(5,)], lambda np_, lx: lambda x: lx.rev(x, (0,))),
    "pad_constant": ([(2, 3)], lambda np_, lx: lambda x: np_.pad(x, ((1, 2), (0, 1)), constant_values=3.0)),
    "pad_edge": ([(4,)], lambda np_, lx: lambda x: np_.pad(x, 2, mode="edge")),
    "pad_reflect": ([(5,)], lambda np_, lx: lambda x: np_.pad(x, 2, mode="reflect")),
    "lax_pad_value_tangent": ([(3,), ()], lambda np_, lx: lambda x, v: lx.pad(x, v, ((1, 2, 1),))),
    "lax_pad_negative": ([(6,), ()], lambda np_, lx: lambda x, v: lx.pad(x, v, ((-1, 2, 0),))),
    "concatenate": ([(2, 3), (4, 3)], lambda np_, lx: lambda a, b: np_.concatenate([a, b, a])),
    "stack": ([(3,), (3,)], lambda np_, lx: lambda a, b: np_.stack([a, b], axis=1)),
    "basic_slice": ([(5, 4)], lambda np_, lx: lambda x: x[1:3, ::2]),
    "negative_step": ([(6,)], lambda np_, lx: lambda x: x[::-2]),
    "int_index": ([(4, 3)], lambda np_, lx: lambda x: x[2]),
    "dynamic_slice": ([(6, 4)], lambda np_, lx: lambda x: lx.dynamic_slice(x, (np.int32(4), np.int32(1)), (3, 2))),
    "dynamic_update_slice": ([(5, 4), (2, 3)],
                             lambda np_, lx: lambda x, u: lx.dynamic_update_slice(x, u, (np.int32(1), np.int32(2)))),
    "gather_fancy": ([(5, 3)], lambda np_, lx: lambda x: x[IDX]),
    "gather_2d": ([(5, 3)], lambda np_, lx: lambda x: x[IDX, np.array([0, 2, 1, 1])]),
    "gather_fill": ([(4,)], lambda np_, lx: lambda x: x.at[np.array([1, 7, 3])].get(mode="fill", fill_value=-1.0)),
    "take": ([(6,)], lambda np_, lx: lambda x: np_.take(x, np.array([[0, 5], [2, 2]]))),
    "take_along_axis": ([(3, 4)], lambda np_, lx: lambda x: np_.take_along_axis(
        x, np.array([[0, 3], [1, 1], [2, 0]]), axis=1)),
    "at_set": ([(5, 3), (3,)], lambda np_, lx: lambda x, u: x.at[2].set(u)),
    "at_set_fancy": ([(6,), (3,)], lambda np_, lx: lambda x, u: x.at[IDX_UNIQUE].set(u)),
    "at_add": ([(5,), (4,)], lambda np_, lx: lambda x, u: x.at[IDX].add(u)),
    "at_mul_operand": ([(5,)], lambda np_, lx: lambda x: x.at[IDX].multiply(3.0)),
    "at_mul_unique": ([(5,), (3,)], lambda np_, lx: lambda x, u: x.at[IDX_UNIQUE].multiply(u, unique_indices=True)),
    "at_max": ([(5,), (4,)], lambda np_, lx: lambda x, u: x.at[IDX].max(u)),
    "at_min": ([(5,), (4,)], lambda np_, lx: lambda x, u: x.at[IDX].min(u)),
    "at_add_drop": ([(4,), (3,)], lambda np_, lx: lambda x, u: x.at[np.array([0, 9, 2])].add(u, mode="drop")),
    "where": ([(3, 4), (3, 4), (3, 4)], lambda np_, lx: lambda c, a, b: np_.where(c > 0, a, b)),
    "where_scalar": ([(5,), (5,)], lambda np_, lx: lambda c, a: np_.where(c > 0, a, 2.0)),
    "select_n": ([(4,), (4,), (4,), (4,)],
                 lambda np_, lx: lambda w, a, b, c: lx.select_n(np_.clip(w, 0, 2).astype(np_.int32), a, b, c)),
    "clip": ([(6,)], lambda np_, lx: lambda x: np_.clip(x, -0.5, 0.7)),
    "lax_clamp": ([(6,)], lambda np_, lx: lambda x: lx.clamp(np.float32(-0.5), x, np.float32(0.5))),
    "lax_clamp_arrays": ([(5,), (5,), (5,)], lambda np_, lx: lambda lo, x, hi: lx.clamp(lo, x, lo + np_.abs(hi))),
    "astype_f16": ([(4,)], lambda np_, lx: lambda x: x.astype(np_.float16)),
    "astype_bf16_back": ([(4,)], lambda np_, lx: lambda x: x.astype(np_.bfloat16).astype(np_.float32) * x),
    "astype_complex": ([(3,)], lambda np_, lx: lambda x: (x.astype(np_.complex64) * (1 + 2j)).real),
    "astype_int": ([(4,)], lambda np_, lx: lambda x: x.astype(np_.int32)),
    "astype_bool": ([(4,)], lambda np_, lx: lambda x: x.astype(bool)),
    "bitcast": ([(3,)], lambda np_, lx: lambda x: lx.bitcast_convert_type(x, np_.int32)),
    "iota_mix": ([(4,)], lambda np_, lx: lambda x: x * lx.iota(np_.float32, 4)),
    "ravel_tile": ([(2, 3)], lambda np_, lx: lambda x: np_.tile(np_.ravel(x), 2)),
    "roll": ([(5,)], lambda np_, lx: lambda x: np_.roll(x, 2)),
    "triu": ([(4, 4)], lambda np_, lx: lambda x: np_.triu(x, 1)),
    "diagonal": ([(3, 4)], lambda np_, lx: lambda x: np_.diagonal(x)),
    "split": ([(6, 2)], lambda np_, lx: lambda x: np_.split(x, 3)),
    "copy": ([(3,)], lambda np_, lx: lambda x: np_.array(x, copy=True) * 2),
}

# jax.jvp itself fails on tangents for scalar clamp bounds (it selects between a scalar
# and an array), so this case is checked against finite differences only (with lo < hi:
# JAX's rule, which ftrans follows, passes no tangent where lo > hi and x < hi).
FD_ONLY = {
    "lax_clamp_scalar_bounds": ([(), (6,), ()], lambda np_, lx: lambda lo, x, hi: lx.clamp(
        -np_.abs(lo) - 0.5, x, np_.abs(hi) + 0.5)),
}

# Smooth in every operand on their whole domain: checked against finite differences.
FINITE_DIFF = ["reshape", "transpose", "pad_constant", "lax_pad_value_tangent", "concatenate", "basic_slice",
               "dynamic_update_slice", "gather_2d", "at_set", "at_add", "at_mul_unique", "where",
               "roll", "dynamic_slice", "lax_clamp_scalar_bounds"]


def draw(rng, shapes, dtype=np.float32):
    prim = tuple(rng.normal(size=s).astype(dtype) for s in shapes)
    tan = tuple(rng.normal(size=s).astype(dtype) for s in shapes)
    return prim, tan


@pytest.mark.parametrize("name", sorted(CASES))
@given(seed=st.integers(0, 2**31 - 1))
def test_matches_jax(name, seed):
    shapes, build = CASES[name]
    rng = np.random.default_rng(seed)
    prim, tan = draw(rng, shapes)
    got = ftrans.jvp(build(*FT), prim, tan)
    want = jax.jvp(build(*JX), prim, tan)
    rtol = 2e-2 if "16" in name else 2e-5
    assert_tree_close(got, want, rtol=rtol, atol=1e-5)


# Cases with float0 tangent outputs: make_jaxpr cannot yet return a float0 array.
NON_FLOAT_OUT = {"astype_int", "astype_bool", "bitcast"}


@pytest.mark.parametrize("name", sorted(set(CASES) - NON_FLOAT_OUT))
def test_staged_and_jit_match_eager(name):
    shapes, build = CASES[name]
    prim, tan = draw(np.random.default_rng(0), shapes)
    f = build(*FT)
    want = jax.jvp(build(*JX), prim, tan)
    _, staged = staged_jvp(f, prim, tan)
    flat_want = jax.tree_util.tree_leaves(want)
    assert len(staged) == len(flat_want)
    rtol = 2e-2 if "16" in name else 2e-5
    for a, b in zip(staged, flat_want):
        if np.asarray(b).dtype != jax.dtypes.float0:
            assert_close(a, b, rtol=rtol, atol=1e-5)
    jitted = ftrans.jit(lambda p, t: ftrans.jvp(f, p, t))(prim, tan)
    assert_tree_close(jitted, want, rtol=rtol, atol=1e-5)


@pytest.mark.parametrize("name", FINITE_DIFF)
@given(seed=st.integers(0, 2**31 - 1))
def test_finite_differences(name, seed):
    shapes, build = {**CASES, **FD_ONLY}[name]
    rng = np.random.default_rng(seed)
    with x64():
        prim, tan = draw(rng, shapes, np.float64)
        prim = tuple(fjnp.asarray(p) for p in prim)
        f = build(*FT)
        _, t_out = ftrans.jvp(f, prim, tan)
        eps = 1e-6
        plus = f(*[p + eps * t for p, t in zip(prim, tan)])
        minus = f(*[p - eps * t for p, t in zip(prim, tan)])
        fd = jax.tree_util.tree_map(lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * eps), plus, minus)
        for a, b in zip(jax.tree_util.tree_leaves(t_out), jax.tree_util.tree_leaves(fd)):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------
# Particular conventions


def test_clamp_ties_pass_no_tangent_like_jax():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0], np.float32)
    t = np.arange(1, 6, dtype=np.float32)
    lo, hi = np.zeros(5, np.float32), np.ones(5, np.float32)
    for args, tans in [((lo, x, hi), (lo + 10, t, hi + 100)),
                       ((lo, x, hi), (lo, t, lo))]:
        got = ftrans.jvp(flax.clamp, args, tans)
        want = jax.jvp(jax.lax.clamp, args, tans)
        assert_tree_close(got, want)


def test_integer_and_bool_outputs_have_float0_tangents():
    x = np.array([1.5, -2.5], np.float32)
    t = np.ones(2, np.float32)
    for f in (lambda v: v.astype(fjnp.int32), lambda v: v > 0,
              lambda v: flax.bitcast_convert_type(v, fjnp.uint32)):
        _, tan = ftrans.jvp(f, (x,), (t,))
        assert np.asarray(tan).dtype == jax.dtypes.float0
        assert np.shape(tan) == (2,)


def test_integer_operand_of_select_and_gather_is_not_differentiated():
    x = np.arange(6.0, dtype=np.float32)
    idx = np.array([4, 1], np.int32)
    p, t = ftrans.jvp(lambda v, i: v[i], (x, idx), (np.ones(6, np.float32), np.zeros(2, jax.dtypes.float0)))
    assert_close(p, np.array([4.0, 1.0], np.float32))
    assert_close(t, np.ones(2, np.float32))


def test_symbolic_zero_tangents_stay_symbolic():
    """A rule whose linear operands all have Zero tangents returns Zero (nothing materialised)."""
    x = fjnp.ones((2, 3))
    u = fjnp.ones((1, 3))
    i0 = fjnp.int32(0)
    z = Zero.from_primal_value
    out, tan = jvp_rules[S.dynamic_update_slice_p]([x, u, i0, i0], [z(x), z(u), z(i0), z(i0)])
    assert type(tan) is Zero and tan.aval.shape == (2, 3)
    out, tan = jvp_rules[S.pad_p]([x, fjnp.float32(0)], [z(x), z(fjnp.float32(0))],
                                  padding_config=((0, 0, 0), (0, 0, 0)))
    assert type(tan) is Zero and tan.aval.shape == (2, 3)
    # Only the update has a tangent: the operand's zero tangent is instantiated inside the rule.
    out, tan = jvp_rules[S.dynamic_update_slice_p]([x, u, i0, i0], [z(x), u, z(i0), z(i0)])
    np.testing.assert_array_equal(np.asarray(tan), [[1, 1, 1], [0, 0, 0]])


def test_scatter_mul_updates_need_unique_indices_like_jax():
    x = np.ones(4, np.float32)
    u = np.full(2, 2.0, np.float32)
    idx = np.array([1, 1])
    with pytest.raises(NotImplementedError, match="scatter_mul.*unique_indices"):
        ftrans.jvp(lambda a, b: a.at[idx].multiply(b), (x, u), (x, u))
    # The operand alone is fine, as in JAX.
    p, t = ftrans.jvp(lambda a: a.at[idx].multiply(u), (x,), (x,))
    assert_close(t, np.array([1.0, 4.0, 1.0, 1.0], np.float32))


def test_scatter_max_ties_average_like_jax():
    x = np.array([1.0, 5.0, 0.0, 2.0], np.float32)
    u = np.array([5.0, 5.0, 3.0, -1.0], np.float32)
    idx = np.array([1, 1, 2, 3])
    tx = np.array([1.0, 10.0, 100.0, 1000.0], np.float32)
    tu = np.array([2.0, 4.0, 8.0, 16.0], np.float32)
    got = ftrans.jvp(lambda a, b: a.at[idx].max(b), (x, u), (tx, tu))
    want = jax.jvp(lambda a, b: a.at[idx].max(b), (x, u), (tx, tu))
    assert_tree_close(got, want)
    # Position 1: the operand and both updates tie at 5, so (10 + 2 + 4) / 3.
    np.testing.assert_allclose(np.asarray(got[1]), [1.0, 16 / 3, 8.0, 1000.0], rtol=1e-6)


def test_gather_fill_positions_have_zero_tangent():
    x = np.arange(3.0, dtype=np.float32)
    p, t = ftrans.jvp(lambda v: v.at[np.array([0, 5])].get(mode="fill"), (x,), (np.ones(3, np.float32),))
    assert np.isnan(np.asarray(p)[1])
    np.testing.assert_array_equal(np.asarray(t), [1.0, 0.0])


def test_jaxpr_shows_tangent_computation():
    x = np.ones((2, 3), np.float32)
    closed, _ = staged_jvp(lambda v: fjnp.concatenate([v, v.T.reshape(2, 3)]), (x,), (x,))
    text = str(closed)
    assert text.count("concatenate") == 2 and text.count("transpose") == 2


def test_every_structural_and_indexing_primitive_has_a_rule():
    prims = [getattr(S, n) for n in S.__all__] + [getattr(I, n) for n in I.__all__ if n.endswith("_p")]
    missing = [p.name for p in prims if p not in jvp_rules]
    assert not missing
