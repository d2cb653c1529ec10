"""Reverse-mode derivatives of the structural and indexing primitives: ``ftrans.vjp`` against ``jax.vjp``.

The programs are the ``CASES`` of ``tests/test_jvp_structural.py`` (written
once against a ``(jnp, lax)`` pair).  For each one, on hypothesis-drawn
primals and a random output cotangent, ``ftrans.vjp``'s outputs and the
pullback's cotangents must equal jax's (value, dtype, shape); the pullback
must stage (``make_jaxpr``: typechecked, re-evaluated) and run under
``ftrans.jit`` (alone, and together with the forward pass); ``ftrans.grad`` of
a scalar-output variant must equal ``jax.grad``; the same holds in float64
under x64 and, for the programs that accept them, complex64 operands.
Non-differentiable outputs (integers, booleans, bitcasts) pull back zeros.

The shared harness (``check_case`` and friends) lives here and is imported by
``test_vjp_reductions.py`` and ``test_vjp_elementwise.py``.  The jax side of
each case is ``jax.jit``-compiled once and reused across hypothesis examples,
which keeps the suite fast.
"""

from __future__ import annotations

import functools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans.core.ir import typecheck
from tests.backend_util import host_oracle, on_cpu
from tests.test_jvp_structural import CASES, FD_ONLY, FINITE_DIFF, FT, JX, x64

F0 = jax.dtypes.float0
tree_flatten, tree_unflatten, tree_leaves = (jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten,
                                             jax.tree_util.tree_leaves)


# ----------------------------------------------------------------------------
# The harness


def nondiff(dtype) -> bool:
    """Integer, boolean and float0 values carry no cotangent (their cotangent is float0)."""
    d = np.dtype(dtype)
    return d == F0 or d.kind in "iub"


def assert_close(got, want, rtol=2e-5, atol=2e-6):
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.dtype == want_a.dtype, (got_a.dtype, want_a.dtype)
    assert got_a.shape == want_a.shape, (got_a.shape, want_a.shape)
    if want_a.dtype == F0:
        return
    np.testing.assert_allclose(got_a, want_a, rtol=rtol, atol=atol)


def assert_leaves_close(got, want, **kw):
    g, w = tree_leaves(got), tree_leaves(want)
    assert len(g) == len(w), (len(g), len(w))
    for a, b in zip(g, w):
        assert_close(a, b, **kw)


def random_like(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if nondiff(dtype):
        return np.zeros(shape, F0)
    x = rng.normal(size=shape)
    if dtype.kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return np.asarray(x).astype(dtype)


def fill_cts(out_avals, float_cts):
    """Full output cotangents: float0 zeros for the non-differentiable outputs, ``float_cts`` elsewhere."""
    it = iter(float_cts)
    return [np.zeros(shape, F0) if nondiff(dtype) else next(it) for shape, dtype in out_avals]


def _avals(leaves):
    return [(tuple(np.shape(x)), np.dtype(np.asarray(x).dtype if not hasattr(x, "dtype") else x.dtype))
            for x in leaves]


def _jax_vjp_via_jacfwd(f, prims, cts):
    """``ct @ J`` from the forward-mode Jacobian, for the programs whose ``jax.vjp`` is not implemented."""
    n = len(prims)
    jac = tree_leaves(jax.jacfwd(lambda *a: tree_leaves(f(*a)), argnums=tuple(range(n)))(*prims))
    out = []
    for i in range(n):
        acc = jjnp.zeros(jjnp.shape(prims[i]), prims[i].dtype)
        for k, ct in enumerate(cts):
            if ct.dtype != F0:
                acc = acc + jjnp.tensordot(ct, jac[k * n + i], axes=np.ndim(ct))
        out.append(acc)
    return tuple(out)


def make_weights(rng, avals):
    """Weights of the scalar variant of a case (``None`` for the non-differentiable outputs)."""
    return tuple(None if nondiff(d) else random_like(rng, s, np.float32 if d.itemsize < 4 else d) for s, d in avals)


def scalarize(build, weights):
    """A scalar-output variant of a case: ``sum(out_k * w_k)`` over the floating outputs."""

    def b(np_, lx):
        f = build(np_, lx)

        def s(*a):
            total = 0.0
            for leaf, w in zip(tree_leaves(f(*a)), weights):
                if w is not None:
                    total = total + np_.sum(leaf * w)
            return total

        return s

    return b


@functools.cache
def _jax_oracle(key, build, via_jacfwd=False):
    """jax's side of a case, ``jax.jit``-compiled once per case and dtype (one compilation serves every example).

    ``(prims, float cotangents, weights or None) -> (output leaves, input cotangents, grad of the scalar
    variant or None)``.
    """
    f = build(*JX)

    def run(prims, float_cts, weights):
        out = f(*prims)
        leaves, tree = tree_flatten(out)
        cts = fill_cts(_avals(leaves), float_cts)
        if via_jacfwd:
            in_cts = _jax_vjp_via_jacfwd(f, prims, cts)
        else:
            in_cts = jax.vjp(f, *prims)[1](tree_unflatten(tree, cts))
        grads = None
        if weights is not None:
            grads = jax.grad(scalarize(build, weights)(*JX), argnums=tuple(range(len(prims))))(*prims)
        return leaves, in_cts, grads

    return jax.jit(run)


def _has_grad(weights):
    return weights is not None and any(w is not None for w in weights)


def check_case(key, build, prims, rng, *, rtol, atol, staged=False, via_jacfwd=False, with_grad=True):
    """vjp (and optionally the staged and jitted pullbacks) of ``build`` against jax at ``prims``.

    Returns ftrans's input cotangents.
    """
    f = build(*FT)
    out, pb = ftrans.vjp(f, *prims)
    leaves, tree = tree_flatten(out)
    avals = _avals(leaves)
    float_cts = [random_like(rng, s, d) for s, d in avals if not nondiff(d)]
    cts = tree_unflatten(tree, fill_cts(avals, float_cts))
    got = pb(cts)
    assert isinstance(got, tuple) and len(got) == len(prims)
    weights = make_weights(rng, avals) if with_grad and not via_jacfwd else None
    with host_oracle():  # ftrans's vjp above ran eagerly: host arithmetic, whose oracle is XLA on the CPU
        want_out, want, _ = _jax_oracle(key, build, via_jacfwd)(prims, float_cts,
                                                                weights if _has_grad(weights) else None)
    assert_leaves_close(leaves, want_out, rtol=rtol, atol=atol)
    assert_leaves_close(got, want, rtol=rtol, atol=atol)
    for g, p in zip(got, prims):  # a cotangent has its primal's type
        assert np.shape(g) == np.shape(p)
    if staged:
        check_staged(f, prims, float_cts, pb, tree, avals, want, rtol=rtol, atol=atol)
    return got


def check_staged(f, prims, float_cts, pb, tree, avals, want, *, rtol, atol):
    """The pullback under ``make_jaxpr`` (typechecked, re-evaluated); the whole vjp (forward and pullback) under
    ``jit``, which also lowers and compiles the backward program."""

    def pull(*fc):
        return pb(tree_unflatten(tree, fill_cts(avals, fc)))

    closed = ftrans.make_jaxpr(pull)(*float_cts)
    typecheck(closed)
    staged = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *[np.asarray(c) for c in float_cts])
    assert_leaves_close(staged, want, rtol=rtol, atol=atol)

    def whole(p, fc):
        out, pb2 = ftrans.vjp(f, *p)
        return pb2(tree_unflatten(tree, fill_cts(avals, fc)))

    assert_leaves_close(ftrans.jit(whole)(tuple(prims), list(float_cts)), want, rtol=rtol, atol=atol)
    return closed


def check_grad_against_vjp(build, prims, rng, *, rtol, atol):
    """``ftrans.grad`` of the scalar variant equals ftrans's pullback of its weights (checked against jax)."""
    f = build(*FT)
    out, pb = ftrans.vjp(f, *prims)
    leaves, tree = tree_flatten(out)
    avals = _avals(leaves)
    weights = tuple(None if nondiff(d) else random_like(rng, s, d) for s, d in avals)
    if all(w is None for w in weights):
        return None
    got = ftrans.grad(scalarize(build, weights)(*FT), argnums=tuple(range(len(prims))))(*prims)
    want = pb(tree_unflatten(tree, fill_cts(avals, [w for w in weights if w is not None])))
    assert_leaves_close(got, want, rtol=rtol, atol=atol)
    return got


def check_grad(key, build, prims, rng, *, rtol, atol):
    """``ftrans.grad`` of the scalar variant against ``jax.grad`` (or, with no floating output, both refuse)."""
    out = build(*FT)(*[fjnp.asarray(p) for p in prims])
    weights = make_weights(rng, _avals(tree_leaves(out)))
    argnums = tuple(range(len(prims)))
    if not _has_grad(weights):  # an integer or boolean output: both refuse to differentiate it

        def first(np_, lx):
            return lambda *a: np_.sum(tree_leaves(build(np_, lx)(*a))[0])

        with pytest.raises(TypeError, match="float"):
            ftrans.grad(first(*FT), argnums=argnums)(*prims)
        with pytest.raises(TypeError):
            jax.grad(first(*JX), argnums=argnums)(*prims)
        return None
    got = ftrans.grad(scalarize(build, weights)(*FT), argnums=argnums)(*prims)
    float_cts = [random_like(rng, s, d) for s, d in _avals(tree_leaves(out)) if not nondiff(d)]
    _, _, want = _jax_oracle(key, build, False)(prims, float_cts, weights)
    assert_leaves_close(got, want, rtol=rtol, atol=atol)
    return got


def check_case_x64(key, build, prims, rng, *, rtol, atol, via_jacfwd=False):
    """The case in float64 under x64: the same values as jax's (float32-compiled) oracle, and float64 types.

    ``prims`` are float32 and the cotangents are drawn float32-representable, so the float64 program sees exactly
    the float32 case's inputs and jax's already-compiled float32 oracle is the reference (to float32 accuracy;
    ``check_fd_x64`` checks float64 accuracy).
    """
    f = build(*FT)
    with x64():
        prims64 = tuple(np.asarray(p, np.float64) for p in prims)
        out, pb = ftrans.vjp(f, *prims64)
        leaves, tree = tree_flatten(out)
        avals = _avals(leaves)
        float_cts = [random_like(rng, s, np.float32).astype(d) for s, d in avals if not nondiff(d)]
        got = pb(tree_unflatten(tree, fill_cts(avals, float_cts)))
    for g, p in zip(got, prims64):
        assert np.asarray(g).dtype == p.dtype and np.shape(g) == p.shape
    for leaf, (shape, d) in zip(leaves, avals):
        assert np.asarray(leaf).dtype == d
    avals32 = [(s, np.dtype(np.float32) if d == np.float64 else d) for s, d in avals]
    weights = None if via_jacfwd else make_weights(rng, avals32)
    want_out, want, _ = _jax_oracle(key, build, via_jacfwd)(
        prims, [np.asarray(c, np.float32) if c.dtype == np.float64 else c for c in float_cts],
        weights if _has_grad(weights) else None)
    for a, b, (_, d) in zip(leaves, want_out, avals):
        if not nondiff(d):  # (integer outputs may differ: a float64 bitcast has another shape)
            assert_close(a, np.asarray(b, d), rtol=rtol, atol=atol)
    assert_leaves_close(got, [np.asarray(w, np.float64) for w in want], rtol=rtol, atol=atol)
    return got


def check_fd_x64(build, shapes, rng, *, draw_prims, rtol=1e-6, atol=1e-8):
    """In float64: ``<ct, f'(x) t>`` by central finite differences equals ``<vjp(ct), t>``; grad agrees with vjp."""
    f = build(*FT)
    with x64():
        prims = tuple(fjnp.asarray(p) for p in draw_prims(rng, np.float64))
        tans = [rng.normal(size=np.shape(p)) for p in prims]
        out, pb = ftrans.vjp(f, *prims)
        leaves, tree = tree_flatten(out)
        avals = _avals(leaves)
        float_cts = [random_like(rng, s, d) for s, d in avals if not nondiff(d)]
        cts = fill_cts(avals, float_cts)
        got = pb(tree_unflatten(tree, cts))
        assert all(np.asarray(g).dtype == np.float64 for g in got)
        eps = 1e-6
        plus = tree_leaves(f(*[p + eps * t for p, t in zip(prims, tans)]))
        minus = tree_leaves(f(*[p - eps * t for p, t in zip(prims, tans)]))
        lhs = sum(np.vdot(c, (np.asarray(a) - np.asarray(b)) / (2 * eps))
                  for c, a, b in zip(cts, plus, minus) if c.dtype != F0)
        rhs = sum(np.vdot(np.asarray(g), t) for g, t in zip(got, tans))
        np.testing.assert_allclose(rhs, lhs, rtol=rtol, atol=atol)
        check_grad_against_vjp(build, prims, rng, rtol=1e-12, atol=1e-12)
    return got


def check_adjoint(make, prims, rng):
    """Drawn configurations of a linear program ``make(jnp, lax, dtype)``.

    The float32 forward matches jax's; then, in float64, the pullback and ``linear_transpose`` satisfy the
    adjoint identity ``<ct, f(x)> == <f^T(ct), x>`` for random ``x`` and ``ct`` (a wrong transpose fails it
    almost surely) and agree with each other.
    """
    assert_leaves_close(make(*FT, np.float32)(*map(fjnp.asarray, prims)), jax.jit(make(*JX, np.float32))(*prims),
                        rtol=1e-5, atol=1e-5)
    f = make(*FT, np.float64)
    with x64():
        xs = [rng.normal(size=np.shape(p)) for p in prims]
        out, pb = ftrans.vjp(f, *xs)
        leaves, tree = tree_flatten(out)
        cts = [rng.normal(size=np.shape(o)) for o in leaves]
        lhs = sum(np.vdot(c, np.asarray(o)) for c, o in zip(cts, leaves))
        via_vjp = pb(tree_unflatten(tree, cts))
        via_lt = ftrans.linear_transpose(f, *xs)(tree_unflatten(tree, cts))
        for got in (via_vjp, via_lt):
            assert all(np.asarray(g).dtype == np.float64 and np.shape(g) == np.shape(x) for g, x in zip(got, xs))
            rhs = sum(np.vdot(np.asarray(g), x) for g, x in zip(got, xs))
            np.testing.assert_allclose(rhs, lhs, rtol=1e-10, atol=1e-10)
        assert_leaves_close(via_vjp, via_lt, rtol=1e-12, atol=1e-12)
    return via_vjp


# ----------------------------------------------------------------------------
# Every case of the forward-mode suite, in reverse


def draw(rng, shapes, dtype=np.float32):
    if np.dtype(dtype).kind == "c":
        return tuple((rng.normal(size=s) + 1j * rng.normal(size=s)).astype(dtype) for s in shapes)
    return tuple(rng.normal(size=s).astype(dtype) for s in shapes)


def _tol(name):
    return (2e-2, 1e-3) if "16" in name else (2e-5, 1e-5)


NON_FLOAT_OUT = {"astype_int", "astype_bool", "bitcast"}

# Programs that also accept complex operands (no ordering, no real-only conversion).
COMPLEX = sorted(set(CASES) - NON_FLOAT_OUT - {
    "where", "where_scalar", "select_n", "clip", "lax_clamp", "lax_clamp_arrays", "astype_f16",
    "astype_bf16_back", "at_max", "at_min"})


@pytest.mark.parametrize("name", sorted(CASES))
@given(seed=st.integers(0, 2**31 - 1))
def test_vjp_matches_jax(name, seed):
    shapes, build = CASES[name]
    rng = np.random.default_rng(seed)
    rtol, atol = _tol(name)
    got = check_case(("S", name, "f32"), build, draw(rng, shapes), rng, rtol=rtol, atol=atol)
    if name in NON_FLOAT_OUT:  # nothing flows back through an integer, boolean or bitcast output
        assert all(np.asarray(g).dtype == np.float32 and not np.asarray(g).any() for g in got)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pullback_staged_and_jit(name):
    shapes, build = CASES[name]
    rng = np.random.default_rng(7)
    rtol, atol = _tol(name)
    check_case(("S", name, "f32"), build, draw(rng, shapes), rng, rtol=rtol, atol=atol, staged=True)


@pytest.mark.parametrize("name", sorted(CASES))
@given(seed=st.integers(0, 2**31 - 1))
def test_grad_matches_jax(name, seed):
    shapes, build = CASES[name]
    rng = np.random.default_rng(seed)
    rtol, atol = _tol(name)
    check_grad(("S", name, "f32"), build, draw(rng, shapes), rng, rtol=rtol, atol=atol)


# The bounds are float32 literals: a float64 operand is a dtype error (see the xfail below).
X64_SKIP = {"lax_clamp"}


@pytest.mark.parametrize("name", sorted(set(CASES) - X64_SKIP))
def test_vjp_float64_matches_jax(name):
    shapes, build = CASES[name]
    rng = np.random.default_rng(11)
    rtol, atol = _tol(name)
    check_case_x64(("S", name, "f32"), build, draw(rng, shapes), rng, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", FINITE_DIFF)
@given(seed=st.integers(0, 2**31 - 1))
def test_vjp_float64_finite_differences(name, seed):
    shapes, build = {**CASES, **FD_ONLY}[name]
    check_fd_x64(build, shapes, np.random.default_rng(seed), draw_prims=lambda r, d: draw(r, shapes, d))


@pytest.mark.xfail(strict=True, reason=(
    "outside linear_rules: ftrans.lax._ops._bind type-checks only when no trace is active, and the JVP "
    "trace binds the primal at the level below without abstract eval, so under jvp/vjp/grad a lax "
    "primitive accepts mismatched dtypes that eager, jit and jax reject"))
def test_float64_clamp_with_float32_bounds_is_an_error_like_jax():
    build = CASES["lax_clamp"][1]
    with x64(), jax.enable_x64(True):
        x = np.linspace(-1, 1, 7)
        with pytest.raises(TypeError):
            jax.vjp(build(*JX), x)
        with pytest.raises(TypeError):
            build(*FT)(x)  # eager: refused
        with pytest.raises(TypeError):
            ftrans.vjp(build(*FT), x)  # traced by the JVP: accepted


@pytest.mark.parametrize("name", COMPLEX)
def test_vjp_complex_matches_jax(name):
    shapes, build = CASES[name]
    rng = np.random.default_rng(3)
    got = check_case(("S", name, "c64"), build, draw(rng, shapes, np.complex64), rng, rtol=2e-5, atol=1e-5,
                     with_grad=False)
    assert all(np.asarray(g).dtype == np.complex64 for g in got)


# ----------------------------------------------------------------------------
# Particular conventions


def test_scatter_with_duplicate_indices_sends_the_cotangent_to_the_winner_only():
    idx = np.array([2, 0, 3, 2], np.int32)

    def build(np_, lx):
        return lambda x, u: x.at[idx].set(u)

    rng = np.random.default_rng(5)
    x, u = draw(rng, [(5,), (4,)])
    # (staged includes the jitted vjp, which on a GPU runs a scatter that may let either duplicate win)
    got = check_case(("S", "at_set_dup"), build, (x, u), rng, rtol=1e-6, atol=1e-6, staged=on_cpu())
    _, pb = ftrans.vjp(build(*FT), x, u)
    ct = np.arange(1.0, 6.0, dtype=np.float32)
    gx, gu = pb(ct)
    np.testing.assert_array_equal(np.asarray(gx), [0.0, 2.0, 0.0, 0.0, 5.0])  # overwritten positions get nothing
    gu = np.asarray(gu)
    assert gu[1] == 1.0 and gu[2] == 4.0
    assert sorted([gu[0], gu[3]]) == [0.0, 3.0]  # one of the two writes to position 2 won
    assert got[1].shape == (4,)


def test_nondifferentiable_outputs_pull_back_zeros_like_jax():
    """Comparisons, integer conversions and bitcasts: float0 output cotangents, zero input cotangents."""
    x = np.array([1.5, -2.5, 0.25], np.float32)
    for make in (lambda np_, lx: lambda v: (v > 0, v.astype(np_.int32), lx.bitcast_convert_type(v, np_.uint32)),
                 lambda np_, lx: lambda v: (np_.argmax(v), v * 2.0)):
        out, pb = ftrans.vjp(make(*FT), x)
        jout = jax.eval_shape(make(*JX), x)
        cts = [np.zeros(o.shape, F0) if nondiff(o.dtype) else np.ones(o.shape, np.float32) for o in jout]
        (g,), (w,) = pb(tuple(cts)), jax.jit(lambda v, c, make=make: jax.vjp(make(*JX), v)[1](c))(x, tuple(cts))
        assert_close(g, w)
    assert_close(pb((np.zeros((), F0), np.ones(3, np.float32)))[0], np.full(3, 2.0, np.float32))
    (g,) = ftrans.vjp(lambda v: v > 0, x)[1](np.zeros(3, F0))
    assert np.asarray(g).dtype == np.float32 and not np.asarray(g).any()


def test_integer_primal_gets_float0_cotangent_like_jax():
    x = np.arange(6.0, dtype=np.float32)
    i = np.array([4, 1], np.int32)
    _, pb = ftrans.vjp(lambda v, k: v[k] * 3.0, x, i)
    ct = np.array([1.0, 2.0], np.float32)
    (gx, gi), (wx, _) = pb(ct), jax.jit(lambda v, k, c: jax.vjp(lambda v, k: v[k] * 3.0, v, k)[1](c))(x, i, ct)
    assert_close(gx, wx)
    assert np.asarray(gi).dtype == F0 and np.shape(gi) == (2,)


def test_outputs_that_are_inputs_constants_or_empty_like_jax():
    """Outputs repeated, equal to an input, constant, empty; inputs unused: the pullback still matches jax."""
    x = np.array([1.0, 2.0], np.float32)
    y = np.array([3.0], np.float32)
    programs = [lambda np_: lambda a, b: (a, a, np_.ones(2, np.float32) * 2.0, a[:1] * b),
                lambda np_: lambda a, b: (a * 2.0,),
                lambda np_: lambda a, b: {"k": b, "z": np_.zeros(3, np.float32)},
                lambda np_: lambda a, b: (a[0:0], np_.reshape(b, ()), np_.sum(a[0:0]))]
    for make in programs:
        out, pb = ftrans.vjp(make(fjnp), x, y)
        jout = jax.eval_shape(make(jjnp), x, y)
        cts = jax.tree_util.tree_map(lambda o: np.full(o.shape, 1.5, np.float32), jout)
        want = jax.jit(lambda a, b, c, make=make: jax.vjp(make(jjnp), a, b)[1](c))(x, y, cts)
        assert_leaves_close(pb(cts), want)
        closed = ftrans.make_jaxpr(pb)(cts)
        typecheck(closed)
        assert_leaves_close(ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *tree_leaves(cts)), want)


# Linear programs: ftrans.linear_transpose against jax.linear_transpose (constant operands are zeros, so the
# programs stay linear and the adjoint identity holds).
IDX = np.array([2, 0, 3, 2], np.int32)
MASK = np.array([True, False, True, True, False])
LINEAR = {
    "concat_reshape_slice": ([(3, 2), (4, 3)], lambda np_, lx: lambda x, y: (
        np_.concatenate([x.T, y]).reshape(-1)[1::3], np_.pad(x, ((1, 0), (2, 1))))),
    "gather_scatter_add": ([(5, 3), (4, 3)], lambda np_, lx: lambda x, u: x.at[IDX].add(u)[IDX] + x[::-1][IDX]),
    "dynamic_slices": ([(5, 4), (2, 3)], lambda np_, lx: lambda x, u: lx.dynamic_slice(
        lx.dynamic_update_slice(x, u, (np.int32(1), np.int32(2))), (np.int32(2), np.int32(0)), (3, 4))),
    "broadcast_transpose": ([(3, 1)], lambda np_, lx: lambda x: np_.transpose(
        np_.broadcast_to(x, (2, 3, 4)), (2, 0, 1)) * 0.5),
    "select_convert": ([(5,), (5,)], lambda np_, lx: lambda a, b: np_.where(MASK, a, -b).astype(np_.float16)),
    "lax_pad_interior": ([(4,), ()], lambda np_, lx: lambda x, v: lx.pad(x, v, ((2, -1, 2),))),
    "expand_squeeze_rev": ([(3, 1)], lambda np_, lx: lambda x: lx.rev(np_.expand_dims(np_.squeeze(x), 0), (1,))),
    "lax_reshape_dimensions": ([(2, 3, 2)], lambda np_, lx: lambda x: lx.reshape(x, (4, 3), (2, 0, 1))),
    "lax_squeeze_expand": ([(2, 1, 3)], lambda np_, lx: lambda x: lx.expand_dims(lx.squeeze(x, (1,)), (0, 3))),
    "concat_with_constant": ([(2, 3)], lambda np_, lx: lambda x: np_.concatenate([np_.zeros((1, 3), x.dtype), x,
                                                                                  np_.zeros((2, 3), x.dtype), x])),
    "dus_constant_operand": ([(2, 2)], lambda np_, lx: lambda u: lx.dynamic_update_slice(
        np_.zeros((4, 3), u.dtype), u, (np.int32(1), np.int32(1)))),
    "dus_constant_update": ([(4, 3)], lambda np_, lx: lambda x: lx.dynamic_update_slice(
        x, np_.zeros((2, 2), x.dtype), (np.int32(3), np.int32(0)))),
    "set_unique_indices": ([(6, 2), (3, 2)], lambda np_, lx: lambda x, u: x.at[np.array([4, 0, 2])].set(
        u, unique_indices=True)),
    "select_n_constant_case": ([(5,)], lambda np_, lx: lambda x: lx.select_n(
        np.array([0, 1, 2, 1, 0], np.int32), x, np_.zeros(5, x.dtype), -x)),
}


@pytest.mark.parametrize("name,dtype", [(n, d) for n in sorted(LINEAR) for d in (np.float32, np.complex64)
                                        if not (n == "select_convert" and d == np.complex64)])
def test_linear_transpose_matches_jax(name, dtype):
    shapes, build = LINEAR[name]
    rng = np.random.default_rng(2)
    prims = draw(rng, shapes, dtype)
    f, g = build(*FT), build(*JX)
    out = jax.eval_shape(g, *prims)
    cts = jax.tree_util.tree_map(lambda o: random_like(rng, o.shape, o.dtype), out)
    got = ftrans.linear_transpose(f, *prims)(cts)
    want = jax.jit(lambda c: jax.linear_transpose(g, *prims)(c))(cts)
    assert_leaves_close(got, want, rtol=2e-3 if name == "select_convert" else 1e-5, atol=1e-5)
    if dtype == np.float32 and name != "select_convert":
        # The adjoint identity <ct, f(x)> == <f^T(ct), x>.
        lhs = sum(np.vdot(np.asarray(c), np.asarray(o)) for c, o in zip(tree_leaves(cts), tree_leaves(f(*map(fjnp.asarray, prims)))))
        rhs = sum(np.vdot(np.asarray(t), np.asarray(p)) for t, p in zip(tree_leaves(got), prims))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-4)


# ----------------------------------------------------------------------------
# The linear structural primitives on drawn configurations (adjoint identity in float64; forward against jax)


@st.composite
def pad_configs(draw_):
    rank = draw_(st.integers(1, 2))
    shape, config = [], []
    for _ in range(rank):
        n = draw_(st.integers(0, 4))
        interior = draw_(st.integers(0, 2))
        inner = n + max(n - 1, 0) * interior
        lo = draw_(st.integers(-min(inner, 2), 3))
        hi = draw_(st.integers(-min(inner + lo, 2) if inner + lo > 0 else 0, 3))
        shape.append(n)
        config.append((lo, hi, interior))
    return tuple(shape), tuple(config)


@given(seed=st.integers(0, 2**31 - 1), cfg=pad_configs())
def test_pad_transpose(seed, cfg):
    """``pad`` is linear in the operand and the padding value jointly (negative and interior padding included)."""
    shape, config = cfg
    rng = np.random.default_rng(seed)
    x, v = rng.normal(size=shape).astype(np.float32), np.float32(rng.normal())
    check_adjoint(lambda np_, lx, d: lambda a, b: lx.pad(a, b, config), (x, v), rng)


@given(seed=st.integers(0, 2**31 - 1), data=st.data())
def test_slice_and_transpose_transpose(seed, data):
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    starts = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
    limits = tuple(data.draw(st.integers(s + 1, n)) for s, n in zip(starts, shape))
    strides = tuple(data.draw(st.integers(1, 3)) for _ in shape)
    perm = tuple(data.draw(st.permutations(range(rank))))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    check_adjoint(lambda np_, lx, d: lambda a: lx.transpose(lx.slice(a, starts, limits, strides), perm), (x,), rng)


@given(seed=st.integers(0, 2**31 - 1), data=st.data())
def test_broadcast_in_dim_transpose(seed, data):
    """Operand dimensions of size 1 expanded, new dimensions inserted anywhere."""
    in_shape = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=2)))
    n_new = data.draw(st.integers(0, 2))
    out_rank = len(in_shape) + n_new
    dims = tuple(sorted(data.draw(st.lists(st.integers(0, out_rank - 1), min_size=len(in_shape),
                                           max_size=len(in_shape), unique=True)))) if in_shape else ()
    out = [data.draw(st.integers(1, 3)) for _ in range(out_rank)]
    for d, n in zip(dims, in_shape):
        out[d] = n if n != 1 else data.draw(st.integers(1, 3))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=in_shape).astype(np.float32)
    check_adjoint(lambda np_, lx, d: lambda a: lx.broadcast_in_dim(a, tuple(out), dims), (x,), rng)


@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 6), k=st.integers(1, 5),
       get_mode=st.sampled_from(["clip", "fill"]), set_mode=st.sampled_from(["clip", "drop"]),
       op=st.sampled_from(["add", "set"]))
def test_gather_scatter_out_of_bounds_transpose(seed, n, k, get_mode, set_mode, op):
    """Indices out of bounds (both signs; negative ones count from the end), every index mode, duplicates."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(-n - 2, n + 3, size=k).astype(np.int32)
    x, u = rng.normal(size=(n, 2)).astype(np.float32), rng.normal(size=(k, 2)).astype(np.float32)
    if op == "set" and not on_cpu():
        # Which of two writes to one place wins is XLA's choice on a GPU (JAX: implementation-defined), and
        # ftrans's program and jax's may choose differently: compare only writes to distinct places there.
        norm = np.where(idx < 0, idx + n, idx)
        placed = np.clip(norm, 0, n - 1) if set_mode == "clip" else norm[(norm >= 0) & (norm < n)]
        assume(len(set(placed.tolist())) == len(placed))

    def make(np_, lx, d):
        def f(a, b):
            written = getattr(a.at[idx], op)(b, mode=set_mode)
            return written.at[idx[::-1]].get(mode=get_mode, fill_value=0.0), written

        return f

    check_adjoint(make, (x, u), rng)


@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 6), k=st.integers(1, 6), start=st.integers(-3, 8),
       start2=st.integers(-3, 8))
def test_dynamic_slices_clamp_transpose(seed, n, k, start, start2):
    """Start indices out of range are clamped (so the window fits), in both directions."""
    k = min(k, n)
    rng = np.random.default_rng(seed)
    x, u = rng.normal(size=(n, 3)).astype(np.float32), rng.normal(size=(k, 2)).astype(np.float32)
    s1, s2 = np.int32(start), np.int32(start2)

    def make(np_, lx, d):
        return lambda a, b: lx.dynamic_slice(lx.dynamic_update_slice(a, b, (s1, np.int32(1))), (s2, np.int32(0)),
                                             (k, 3))

    check_adjoint(make, (x, u), rng)


def test_linear_transpose_of_a_nonlinear_program_is_refused():
    with pytest.raises(NotImplementedError, match="not linear"):
        ftrans.linear_transpose(lambda x: x * x, np.ones(3, np.float32))(np.ones(3, np.float32))
