"""Control flow (``lax.cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``) against jax.

Every program is written once against a library namespace (``L.lax``, ``L.np``)
and run by ftrans and by jax, eagerly and under ``jit``; the results must agree
in pytree structure, shape, dtype, weak type and value.  The rest checks the
printed IR (nested bodies), ``typecheck`` on every (sub-)jaxpr, and the
StableHLO a jitted loop lowers to.
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as fjnp
from ftrans.core.ir import ClosedJaxpr, Jaxpr, typecheck
from tests.hypothesis_budget import examples

FT = SimpleNamespace(name="ftrans", lax=ftrans.lax, np=fjnp, jit=ftrans.jit)
JX = SimpleNamespace(name="jax", lax=jax.lax, np=jjnp, jit=jax.jit)

rng = np.random.default_rng(0)
X3 = np.arange(3, dtype=np.float32) + 0.5
Y3 = np.array([2.0, -1.0, 0.25], np.float32)
M23 = rng.standard_normal((2, 3)).astype(np.float32)
W33 = rng.standard_normal((3, 3)).astype(np.float32) / 2
XS5 = rng.standard_normal((5, 3)).astype(np.float32)
F32 = np.float32


# ----------------------------------------------------------------------------
# Comparison helpers


def assert_same(got, want, rtol=1e-5, atol=1e-6, what=""):
    """Same pytree structure; per leaf an ftrans Array of jax's shape, dtype and weak type, close values."""
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"{what}: ftrans returns {g_tree}, jax {w_tree}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        where = f"{what} leaf {i}"
        assert isinstance(g, ftrans.Array), f"{where}: {type(g).__name__} is not an ftrans.Array"
        assert g.shape == w.shape, f"{where}: shape {g.shape} vs jax {w.shape}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} vs jax {w.dtype}"
        assert g.weak_type == w.weak_type, f"{where}: weak_type {g.weak_type} vs jax {w.weak_type}"
        a, b = np.asarray(g), np.asarray(w)
        if np.issubdtype(b.dtype, np.inexact):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)


def differential(prog, *args, cases=None, modes=("eager", "jit"), **tol):
    """Run ``prog(L)(*args)`` with ftrans (eagerly and/or jitted) and with ``jax.jit``, and compare.

    ``cases`` (a list of argument tuples) runs the same functions on each, so ftrans's and jax's jit caches
    answer every call whose argument types repeat.  jax's jitted result is the reference for both of
    ftrans's modes: it has the types jax's eager control flow gives (which is jit underneath) without
    compiling every call a second time.
    """
    cases = [args] if cases is None else cases
    f, g = prog(FT), jax.jit(prog(JX))
    jf = ftrans.jit(f)
    for a in cases:
        want = g(*a)
        for mode in modes:
            got = (jf if mode == "jit" else f)(*a)
            assert_same(got, want, what=f"{mode} {a!r:.60}", **tol)


def sub_jaxprs(jaxpr):
    """Every jaxpr nested in the params of ``jaxpr``'s equations, recursively (not ``jaxpr`` itself)."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    found = []

    def visit(p):
        if isinstance(p, ClosedJaxpr):
            p = p.jaxpr
        if isinstance(p, Jaxpr):
            found.append(p)
            found.extend(sub_jaxprs(p))
        elif isinstance(p, (tuple, list)):
            for q in p:
                visit(q)

    for eqn in jaxpr.eqns:
        for p in eqn.params.values():
            visit(p)
    return found


def typecheck_all(closed):
    """``typecheck`` the program and every body nested in it; returns the number of jaxprs checked."""
    typecheck(closed)
    subs = sub_jaxprs(closed)
    for j in subs:
        typecheck(j)
    return 1 + len(subs)


def primitive_names(jaxpr):
    """The names of every primitive in ``jaxpr`` and its nested bodies."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    names = [e.primitive.name for e in jaxpr.eqns]
    for j in sub_jaxprs(jaxpr):
        names.extend(e.primitive.name for e in j.eqns)
    return names


# ----------------------------------------------------------------------------
# cond


def test_cond_with_operands():
    differential(lambda L: lambda p, x: L.lax.cond(p, lambda a: L.np.sin(a) * 2.0, lambda a: a - 1.0, x),
                 cases=[(True, X3), (False, X3)])
    differential(lambda L: lambda p, x, y: L.lax.cond(p, lambda a, b: a * b, lambda a, b: a - b, x, y),
                 cases=[(True, X3, Y3), (False, X3, Y3)])


def test_cond_zero_operands():
    # Python-scalar branches: a weakly typed f32 result in both libraries.
    preds = [(True,), (False,)]
    differential(lambda L: lambda p: L.lax.cond(p, lambda: 1.0, lambda: 2.0), cases=preds)
    differential(lambda L: lambda p: L.lax.cond(p, lambda: 3, lambda: -4), cases=preds)
    differential(lambda L: lambda p: L.lax.cond(p, lambda: L.np.ones(3), lambda: L.np.zeros(3)), cases=preds)


def test_cond_mixed_weak_branches_strong_branch_0():
    # true_fun weakly typed, false_fun (branch 0) not: the result is strong in both libraries.
    differential(lambda L: lambda p, x: L.lax.cond(p, lambda a: 1.0, lambda a: a, x),
                 cases=[(True, F32(2.5)), (False, F32(2.5))])


@pytest.mark.xfail(strict=True, reason="ftrans: a cond result is weak only if every branch's is; jax: branch 0's "
                   "weak type (its abstract eval returns branches[0].out_avals)")
def test_cond_weak_type_follows_branch_0():
    # Branch 0 weakly typed, another branch not: jax's result is weakly typed.
    differential(lambda L: lambda p, x: L.lax.cond(p, lambda a: a.sum(), lambda a: 0.0, x),
                 cases=[(True, X3), (False, X3)])
    differential(lambda L: lambda i, x: L.lax.switch(i, [lambda a: 0.0, lambda a: a.sum(), lambda a: 1.0], x),
                 cases=[(0, X3), (1, X3), (2, X3)])


def test_cond_operand_keyword():
    differential(lambda L: lambda p, x: L.lax.cond(p, lambda a: a + 1.0, lambda a: a * 3.0, operand=x),
                 cases=[(True, X3), (False, X3)])
    differential(lambda L: lambda p, x, y: L.lax.cond(p, lambda t: t[0] + t[1], lambda t: t[0] - t[1],
                                                      operand=(x, y)), cases=[(True, X3, Y3), (False, X3, Y3)])


def test_cond_five_argument_form_with_per_branch_operands():
    # JAX's older form cond(pred, true_operand, true_fun, false_operand, false_fun).
    differential(lambda L: lambda p, x, y: L.lax.cond(p, x, lambda a: a * 2.0, (x, y), lambda t: t[0] - t[1]),
                 cases=[(True, X3, Y3), (False, X3, Y3)])
    g = lambda L: L.grad(lambda x, y: L.lax.cond(x.sum() > 0, x, L.numpy.sin, y, L.numpy.cos).sum())  # noqa: E731
    np.testing.assert_allclose(g(ftrans)(X3, Y3), g(jax)(X3, Y3), rtol=1e-6)


NUMERIC_PREDICATES = [
    0, 1, 7, -3, np.int32(0), np.int32(5), np.uint8(0), np.uint8(200), np.int8(-1),
    0.0, 0.5, -0.0, F32(0.0), F32(-2.5), F32(np.nan), np.array(0, np.int32), np.array(2.0, np.float32),
    np.float16(0.5), np.bool_(True), np.array(False),
]


def test_cond_numeric_predicates():
    differential(lambda L: lambda p, x: L.lax.cond(p, lambda a: a + 1.0, lambda a: a - 1.0, x),
                 cases=[(p, X3) for p in NUMERIC_PREDICATES])


def test_cond_pytree_operands_and_outputs():
    def prog(L):
        def true_fun(tree, scale):
            return {"out": (tree["a"] * scale, [tree["b"].sum(), tree["c"][0]]), "flag": tree["b"] > 0}

        def false_fun(tree, scale):
            return {"out": (tree["a"] - scale, [tree["b"].max(), tree["c"][1]]), "flag": tree["b"] < 0}

        return lambda p, tree, s: L.lax.cond(p, true_fun, false_fun, tree, s)

    tree = {"a": M23, "b": Y3, "c": (np.int32(4), np.int32(-7))}
    differential(prog, cases=[(p, tree, s) for p in (True, False) for s in (F32(3.0), 3.0)])


def test_cond_closures_over_outer_arrays():
    w = W33
    b = np.float32(0.5)

    def prog(L):
        return lambda p, x: L.lax.cond(p, lambda a: L.np.tanh(a @ w + b), lambda a: a @ w.T - b, x)

    differential(prog, cases=[(True, X3), (False, X3)])


def test_cond_closures_over_outer_traced_values():
    # Under jit the branches capture tracers of the enclosing trace: they become operands of the cond.
    def prog(L):
        def f(x, y):
            s = x.sum()
            return L.lax.cond(s > 4.0, lambda: (y * s, x + y), lambda: (y - x, L.np.exp(-x)))
        return f

    differential(prog, cases=[(X3, Y3), (-X3, Y3)])

    def prog2(L):
        def f(x, y):  # true_fun captures x and y, false_fun only y; x is also the operand
            return L.lax.cond(x[0] > 0.0, lambda a: a * y + x, lambda a: a + y, x)
        return f

    differential(prog2, cases=[(X3, Y3), (-X3, Y3)])
    jaxpr = ftrans.make_jaxpr(prog2(FT))(X3, Y3)
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "cond"]
    x, y = jaxpr.jaxpr.invars
    assert y in eqn.invars and x in eqn.invars  # captured tracers are explicit operands, y passed once
    assert sum(v is y for v in eqn.invars) == 1
    assert all(not b.consts for b in eqn.params["branches"])
    assert len({len(b.jaxpr.invars) for b in eqn.params["branches"]}) == 1
    typecheck_all(jaxpr)


def test_cond_int_and_bool_outputs():
    i4, m2 = np.arange(4, dtype=np.int32), np.array([True, False])
    differential(lambda L: lambda p, i, m: L.lax.cond(p, lambda a, b: (a * 2, ~b), lambda a, b: (a - 1, b), i, m),
                 cases=[(True, i4, m2), (False, i4, m2)])


# ----------------------------------------------------------------------------
# switch


def _three_branches(L):
    return [lambda a: a + 1.0, lambda a: L.np.sin(a), lambda a: a * a - 2.0]


SWITCH_INDICES = [
    -(2**31), -5, -1, 0, 1, 2, 3, 10, 2**31 - 1, np.int32(-7), np.int32(1), np.uint8(2), np.uint8(250),
    np.int8(-3), np.int16(2), np.uint32(2**32 - 1), np.array(1, np.int32),
]


def test_switch_index_clamping():
    differential(lambda L: lambda i, x: L.lax.switch(i, _three_branches(L), x),
                 cases=[(i, X3) for i in SWITCH_INDICES])


def test_switch_one_branch():
    # jax (and ftrans) call a lone branch directly, without binding a cond
    differential(lambda L: lambda i, x: L.lax.switch(i, [lambda a: L.np.sin(a) * 2.0], x),
                 cases=[(-3, X3), (0, X3), (5, X3)])


def test_switch_many_branches():
    def prog(L):
        branches = [lambda a, b, k=k: (a * k + b, b - k) for k in range(12)]
        return lambda i, x, y: L.lax.switch(i, branches, x, y)

    differential(prog, cases=[(i, X3, F32(0.5)) for i in (-1, 0, 3, 7, 11, 100)])


def test_switch_operand_keyword_and_zero_operands():
    differential(lambda L: lambda i, x: L.lax.switch(i, _three_branches(L), operand=x),
                 cases=[(i, X3) for i in range(3)])
    differential(lambda L: lambda i: L.lax.switch(i, [lambda: 1.0, lambda: 2.0, lambda: 3.0]),
                 cases=[(i,) for i in range(3)])


def test_switch_closures_over_traced_values():
    def prog(L):
        def f(i, x, y):
            return L.lax.switch(i, [lambda: x + y, lambda: x * y, lambda: y, lambda: x.sum() + y])
        return f

    differential(prog, cases=[(i, X3, Y3) for i in range(-1, 5)])


# ----------------------------------------------------------------------------
# while_loop


def test_while_loop_pytree_carry():
    def prog(L):
        def body(c):
            i, (x, acc) = c
            return i + 1, (x * 1.5, {"s": acc["s"] + x.sum(), "n": acc["n"] + 1})

        return lambda x: L.lax.while_loop(lambda c: c[0] < 5, body, (0, (x, {"s": 0.0, "n": np.int32(0)})))

    differential(prog, X3)


def test_while_loop_zero_iterations():
    differential(lambda L: lambda x: L.lax.while_loop(lambda c: c.sum() < 0.0, lambda c: c * 2.0, x), X3)
    differential(lambda L: lambda n: L.lax.while_loop(lambda c: c < n, lambda c: c + 1, 10), 3)


@pytest.mark.parametrize("init", [1.0, 1], ids=repr)
def test_while_loop_weak_carry_promotion(init):
    # `c * x` promotes a weakly typed Python-scalar carry to x's dtype, as jax.lax.while_loop does.
    xs = [F32(2.0), np.float16(2.0), ml_dtypes.bfloat16(2.0), np.int32(2), np.int8(2), 2.0, 2]
    differential(lambda L: lambda x: L.lax.while_loop(lambda c: c < 50, lambda c: c * x, init),
                 cases=[(x,) for x in xs])


def test_while_loop_weak_carry_stays_weak():
    differential(lambda L: lambda: L.lax.while_loop(lambda c: c < 10.0, lambda c: c + 1.5, 0.0))
    differential(lambda L: lambda: L.lax.while_loop(lambda c: c < 10, lambda c: c + 3, 0))


def test_while_loop_closures_over_traced_values():
    def prog(L):
        def f(x, limit):
            return L.lax.while_loop(lambda c: c[1].sum() < limit, lambda c: (c[0] + 1, c[1] + x), (0, x))
        return f

    differential(prog, X3, F32(40.0))


def test_while_loop_matrix_power_iteration():
    def prog(L):
        def f(w, v):
            def body(c):
                k, v = c
                v = w @ v
                return k + 1, v / L.np.linalg.norm(v)
            return L.lax.while_loop(lambda c: c[0] < 20, body, (0, v))
        return f

    differential(prog, W33 @ W33.T, X3, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# fori_loop


def _fori(L, lo, hi, **kw):
    return lambda x: L.lax.fori_loop(lo, hi, lambda i, c: c * 1.1 + i, x, **kw)


@pytest.mark.parametrize("lo,hi", [(0, 5), (2, 7), (5, 5), (7, 2), (-3, 2)])
def test_fori_loop_static_bounds(lo, hi):
    differential(lambda L: _fori(L, lo, hi), X3)
    differential(lambda L: _fori(L, np.int32(lo), np.int32(hi)), X3)
    names = primitive_names(ftrans.make_jaxpr(_fori(FT, lo, hi))(X3))
    assert "scan" in names and "while" not in names, names


def test_fori_loop_traced_bounds_use_while():
    def prog(L):
        return lambda lo, hi, x: L.lax.fori_loop(lo, hi, lambda i, c: c * 1.1 + i, x)

    bounds = [(0, 5), (2, 7), (5, 5), (7, 2)]
    differential(prog, modes=("jit",), cases=[(np.int32(lo), np.int32(hi), X3) for lo, hi in bounds]
                 + [(lo, hi, X3) for lo, hi in bounds])
    names = primitive_names(ftrans.make_jaxpr(prog(FT))(np.int32(0), np.int32(5), X3))
    assert "while" in names and "scan" not in names, names
    # One bound static, the other traced.
    differential(lambda L: lambda hi, x: L.lax.fori_loop(1, hi, lambda i, c: c + i, x), modes=("jit",),
                 cases=[(np.int32(hi), X3) for hi in (0, 1, 4)])


@pytest.mark.parametrize("unroll", [1, 2, 3, True, False])
@pytest.mark.parametrize("n", [0, 5, 7])
def test_fori_loop_unroll(unroll, n):
    differential(lambda L: _fori(L, 0, n, unroll=unroll), X3)


def test_fori_loop_pytree_and_int_carry():
    def prog(L):
        def body(i, c):
            s, (v, k) = c
            return s + i * i, (v + L.np.float32(i), k * 2)
        return lambda x: L.lax.fori_loop(0, 6, body, (0, (x, np.int32(1))))

    differential(prog, X3)


def test_fori_loop_index_is_weakly_typed():
    # jax's loop index is a weak int32 (static bounds: `int(lower)`; traced bounds: lower kept as given), so
    # `c + i` keeps an int8 carry int8.  The index's weak type is visible when the body returns it.
    def prog_static(L):
        return lambda c: L.lax.fori_loop(np.int32(0), np.int32(3), lambda i, c: (c[0] + i, i), c)

    def prog_traced(L):
        return lambda n, c: L.lax.fori_loop(0, n, lambda i, c: (c[0] + i, i), c)

    differential(prog_static, (np.int8(1), 0))
    differential(prog_traced, np.int32(3), (np.int8(1), 0), modes=("jit",))
    differential(prog_traced, 3, (np.int8(1), 0), modes=("jit",))


# ----------------------------------------------------------------------------
# scan


def test_scan_pytree_carry_xs_ys():
    def prog(L):
        def body(c, x):
            h, n = c["h"], c["n"]
            h = L.np.tanh(h @ x["w"] + x["b"])
            return {"h": h, "n": n + 1}, (h.sum(), {"hb": h * x["b"], "n": n})

        return lambda h, w, b: L.lax.scan(body, {"h": h, "n": np.int32(0)}, {"w": w, "b": b})

    ws = rng.standard_normal((4, 3, 3)).astype(np.float32) / 2
    bs = rng.standard_normal((4, 3)).astype(np.float32)
    differential(prog, X3, ws, bs, rtol=1e-4, atol=1e-5)


def test_scan_xs_none_with_length():
    differential(lambda L: lambda c: L.lax.scan(lambda c, _: (c * 2.0, c + 1.0), c, None, length=4), X3)
    differential(lambda L: lambda c: L.lax.scan(lambda c, _: (c + 1, None), c, length=3), np.int32(2))
    # length together with xs that agree with it
    differential(lambda L: lambda c, xs: L.lax.scan(lambda c, x: (c + x, c), c, xs, length=5), X3, XS5)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_reverse(reverse):
    def prog(L):
        return lambda c, xs: L.lax.scan(lambda c, x: (c * 0.9 + x, c * x), c, xs, reverse=reverse)

    differential(prog, cases=[(X3, XS5), (Y3, XS5[:2])])


@settings(max_examples=examples(8))
@given(length=st.integers(0, 9), unroll=st.sampled_from([1, 2, 3, 4, True, False]), reverse=st.booleans())
def test_scan_unroll_any_length(length, unroll, reverse):
    xs = np.arange(length * 2, dtype=np.float32).reshape(length, 2) / 3

    def prog(L):
        def body(c, x):
            c = c * 0.5 + x
            return c, (c.sum(), x[0] > 1.0)
        return lambda c, xs: L.lax.scan(body, c, xs, reverse=reverse, unroll=unroll)

    differential(prog, np.ones(2, np.float32), xs)


@settings(max_examples=examples(6))
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4), length=st.integers(0, 4),
       dtype=st.sampled_from([np.float32, np.int32]))
def test_control_flow_any_shape(shape, length, dtype):
    # One program with all three primitives over carries and slices of any shape (empty ones included).
    c0 = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    xs = np.ones((length,) + shape, dtype)

    def prog(L):
        def body(c, x):
            c = L.lax.cond(c.sum() % 2 == 0, lambda a: a + x, lambda a: a - x, c)
            c = L.lax.while_loop(lambda t: t[0] < 2, lambda t: (t[0] + 1, t[1] * 2), (0, c))[1]
            return c, c.sum()
        return lambda c, xs: L.lax.scan(body, c, xs)

    differential(prog, c0, xs)


@pytest.mark.parametrize("length,unroll", [(1, 3), (5, 2), (7, 3), (5, True)])
def test_scan_unroll_ir_and_lowering(length, unroll):
    f = FT.lax.scan
    fun = ftrans.jit(lambda c, xs: f(lambda c, x: (c + x, c), c, xs, unroll=unroll))
    xs = XS5[:1].repeat(length, 0)
    jaxpr = ftrans.make_jaxpr(fun)(X3, xs)
    text = str(jaxpr)
    want_unroll = length if unroll is True else unroll
    assert f"unroll={want_unroll}" in text, text
    typecheck_all(jaxpr)
    # a loop unless fully unrolled (then straight-line steps, as JAX lowers it)
    jfun = jax.jit(lambda c, xs: jax.lax.scan(lambda c, x: (c + x, c), c, xs, unroll=unroll))
    assert ("stablehlo.while" in fun.lower(X3, xs).as_text()) == (want_unroll < length) == \
        ("stablehlo.while" in jfun.lower(X3, xs).as_text())
    differential(lambda L: lambda c, xs: L.lax.scan(lambda c, x: (c + x, c), c, xs, unroll=unroll), X3, xs)


def test_scan_y_none_and_length_zero():
    differential(lambda L: lambda c, xs: L.lax.scan(lambda c, x: (c + x, None), c, xs), X3, XS5)
    empty = np.zeros((0, 3), np.float32)
    differential(lambda L: lambda c, xs: L.lax.scan(lambda c, x: (c + x, (c * 2, x.sum())), c, xs), X3, empty)
    differential(lambda L: lambda c: L.lax.scan(lambda c, _: (c + 1.0, c), c, None, length=0), X3)


def test_scan_scalar_int_and_bool_carries():
    def prog(L):
        def body(c, x):
            f, i, b = c
            return (f + x, i * 3 + 1, L.np.logical_xor(b, x > 0)), (f, i, b)
        return lambda xs: L.lax.scan(body, (F32(0.0), np.int32(1), np.bool_(False)), xs)

    differential(prog, np.array([0.5, -1.0, 2.0, 0.0], np.float32))

    def prog_weak(L):  # Python-scalar carries: weak i32 / f32 / bool
        return lambda xs: L.lax.scan(lambda c, x: ((c[0] + 1, c[1] * 2.0, L.np.logical_not(c[2])), c[0]),
                                    (0, 1.0, True), xs)

    differential(prog_weak, np.zeros(3, np.float32))


@pytest.mark.parametrize("init", [1.0, 1], ids=repr)
def test_scan_weak_carry_promotion(init):
    def prog(L):
        return lambda xs: L.lax.scan(lambda c, x: (c * x, c), init, xs)

    differential(prog, np.array([1.5, 2.0, -1.0], np.float32))
    differential(prog, np.array([2, 3, 4], np.int32))
    differential(prog, np.array([1.5, 2.0, -1.0], np.float16))


def test_scan_closures_over_traced_values():
    def prog(L):
        def f(w, h0, xs):
            return L.lax.scan(lambda h, x: (L.np.tanh(w @ h + x), h.sum() * w[0, 0]), h0, xs)
        return f

    differential(prog, W33, X3, XS5, rtol=1e-4, atol=1e-5)


def test_scan_matrix_slices():
    xs = rng.standard_normal((4, 2, 3)).astype(np.float32)
    differential(lambda L: lambda c, xs: L.lax.scan(lambda c, x: (c + x @ x.T, x.T), c, xs),
                 np.zeros((2, 2), np.float32), xs)


# ----------------------------------------------------------------------------
# lax.map


@pytest.mark.parametrize("batch_size", [None, 1, 2, 3, 7, 10])
def test_map(batch_size):
    kw = {} if batch_size is None else {"batch_size": batch_size}

    def prog(L):
        return lambda xs, ys: L.lax.map(lambda t: (L.np.sin(t[0]) * t[1], t[0].sum()), (xs, ys), **kw)

    xs = rng.standard_normal((7, 3)).astype(np.float32)
    ys = rng.standard_normal((7,)).astype(np.float32)[:, None]
    differential(prog, xs, ys)


def test_map_empty_xs():
    differential(lambda L: lambda xs: L.lax.map(lambda x: x * 2.0, xs), np.zeros((0, 3), np.float32))


@pytest.mark.xfail(strict=True, reason="lax.map(batch_size=...) on a zero-length xs has no full batch and no "
                   "remainder, and calls tree_map on an empty list: TypeError from jax.tree_util")
def test_map_batch_size_empty_xs():
    differential(lambda L: lambda xs: L.lax.map(lambda x: x * 2.0, xs, batch_size=2), np.zeros((0, 3), np.float32))


def test_map_pytree_output_and_closure():
    def prog(L):
        def f(w, xs):
            return L.lax.map(lambda x: {"y": w @ x, "n": x.sum()}, xs)
        return f

    differential(prog, W33, XS5, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# Nesting


def _nested(L):
    """scan ⊃ while ⊃ cond ⊃ scan."""
    def inner_scan(v):
        c, ys = L.lax.scan(lambda c, x: (c + x * v, c), 0.0 * v, L.np.arange(3.0))
        return c + ys.sum()

    def while_body(c):
        i, v = c
        v = L.lax.cond(i % 2 == 0, inner_scan, lambda v: v * 0.5, v)
        return i + 1, v

    def outer(carry, x):
        _, v = L.lax.while_loop(lambda c: c[0] < 3, while_body, (0, carry + x))
        return v * 0.1, v.sum()

    return lambda c, xs: L.lax.scan(outer, c, xs)


def test_nested_control_flow():
    differential(_nested, X3, XS5, rtol=1e-4, atol=1e-5)
    jaxpr = ftrans.make_jaxpr(_nested(FT))(X3, XS5)
    names = primitive_names(jaxpr)
    for p in ("scan", "while", "cond"):
        assert p in names
    assert names.count("scan") == 2
    assert typecheck_all(jaxpr) >= 5  # top, outer scan body, while cond+body, 2 branches, inner scan body
    text = ftrans.jit(_nested(FT)).lower(X3, XS5).as_text()
    assert "stablehlo.while" in text and "stablehlo.case" in text


def test_nested_under_outer_jit_call():
    inner = ftrans.jit(lambda v: FT.lax.fori_loop(0, 3, lambda i, c: c * 2.0, v))
    outer = ftrans.jit(lambda x: FT.lax.cond(x.sum() > 0, inner, lambda v: -v, x))
    ref = jax.jit(lambda x: jax.lax.cond(x.sum() > 0, lambda v: jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, v),
                                         lambda v: -v, x))
    for x in (X3, -X3):
        assert_same(outer(x), ref(x))


# ----------------------------------------------------------------------------
# Printed IR


def test_printed_cond():
    def f(p, x):
        return FT.lax.cond(p, lambda a: FT.np.sin(a) * 2.0, lambda a: a - 1.0, x)

    jaxpr = ftrans.make_jaxpr(f)(True, X3)
    text = str(jaxpr)
    assert "cond[" in text and "branches=(" in text
    assert text.count("{ lambda") == 3, text
    before, branches = text.split("branches=(", 1)
    false_b, true_b = branches.split("{ lambda", 2)[1:]
    assert "sub" in false_b and "sin" not in false_b
    assert "sin" in true_b and "mul" in true_b
    assert "convert_element_type" in before  # the bool predicate becomes an int32 index
    typecheck_all(jaxpr)


def test_printed_switch_has_clamp_and_all_branches():
    jaxpr = ftrans.make_jaxpr(lambda i, x: FT.lax.switch(i, _three_branches(FT), x))(1, X3)
    text = str(jaxpr)
    assert "clamp" in text and "branches=(" in text and text.count("{ lambda") == 4
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns][-1] == "cond"
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "cond"]
    assert len(eqn.params["branches"]) == 3
    typecheck_all(jaxpr)


def test_printed_scan():
    def f(c, xs):
        return FT.lax.scan(lambda c, x: (c * 0.5 + x, FT.np.cos(c)), c, xs, reverse=True)

    jaxpr = ftrans.make_jaxpr(f)(X3, XS5)
    text = str(jaxpr)
    assert "scan[" in text and "jaxpr={ lambda" in text
    for want in ("length=5", "num_carry=1", "num_consts=0", "reverse=True", "unroll=1", "cos", "mul", "add"):
        assert want in text, want
    (eqn,) = jaxpr.jaxpr.eqns
    body = eqn.params["jaxpr"]
    assert [e.primitive.name for e in body.jaxpr.eqns] == ["mul", "add", "cos"]
    typecheck_all(jaxpr)


def test_printed_scan_consts_are_operands():
    def f(w, c, xs):
        return FT.lax.scan(lambda c, x: (w @ c + x, None), c, xs)

    jaxpr = ftrans.make_jaxpr(f)(W33, X3, XS5)
    (eqn,) = jaxpr.jaxpr.eqns
    assert eqn.params["num_consts"] == 1 and eqn.params["num_carry"] == 1
    assert eqn.invars[0] is jaxpr.jaxpr.invars[0]  # the captured w is the scan's first operand
    assert not eqn.params["jaxpr"].consts
    typecheck_all(jaxpr)


def test_printed_while():
    def f(x):
        return FT.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * x), (0, x))

    jaxpr = ftrans.make_jaxpr(f)(X3)
    text = str(jaxpr)
    assert "while[" in text and "body_jaxpr=" in text and "cond_jaxpr=" in text
    assert "body_nconsts=1" in text and "cond_nconsts=0" in text
    cond_part = text.split("cond_jaxpr=", 1)[1]
    assert "lt" in cond_part
    (eqn,) = jaxpr.jaxpr.eqns
    assert [e.primitive.name for e in eqn.params["cond_jaxpr"].jaxpr.eqns] == ["lt"]
    assert sorted(e.primitive.name for e in eqn.params["body_jaxpr"].jaxpr.eqns) == ["add", "mul"]
    typecheck_all(jaxpr)


def test_printed_nested_bodies_are_indented():
    text = str(ftrans.make_jaxpr(_nested(FT))(X3, XS5))
    # The while body holds more than ten equations, so (as JAX prints it) it comes first, once, as
    # `let jaxpr = ... in`, and the while equation names it; the other bodies are printed in place.
    assert text.startswith("let jaxpr = { lambda ") and "body_jaxpr=jaxpr\n" in text, text
    defn, main = text.split(" } in\n", 1)

    def indent(part, name):
        return min(len(ln) - len(ln.lstrip()) for ln in part.splitlines() if name in ln)

    assert indent(main, "scan[") < indent(main, "while["), text
    assert indent(defn, "cond[") < indent(defn, "scan["), text


# ----------------------------------------------------------------------------
# Lowering


def test_lowering_cond_and_switch_use_case():
    text = ftrans.jit(lambda p, x: FT.lax.cond(p, lambda a: a + 1.0, lambda a: a * 2.0, x)).lower(True, X3).as_text()
    assert "stablehlo.case" in text
    text = ftrans.jit(lambda i, x: FT.lax.switch(i, _three_branches(FT), x)).lower(1, X3).as_text()
    # each branch lowers inside its region of the case (as JAX's), not as a private function
    assert "stablehlo.case" in text and text.count("stablehlo.return") >= 3 and "func.func private" not in text


def test_lowering_while_and_scan_use_while():
    text = ftrans.jit(lambda x: FT.lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0, x)).lower(X3)
    assert "stablehlo.while" in text.as_text()
    text = ftrans.jit(lambda c, xs: FT.lax.scan(lambda c, x: (c + x, c), c, xs)).lower(X3, XS5).as_text()
    assert "stablehlo.while" in text


def _fori_text(n):
    f = ftrans.jit(lambda x: FT.lax.fori_loop(0, n, lambda i, c: c * 1.0001 + 1.0, x))
    return f, f.lower(X3).as_text()


def test_long_fori_loop_stays_one_loop():
    f10, t10 = _fori_text(10)
    f1000, t1000 = _fori_text(1000)
    # The trip count is one constant: the module does not grow with it.
    assert abs(len(t1000) - len(t10)) <= 8, (len(t10), len(t1000))
    assert t1000.count("stablehlo.while") == 1
    got = f1000(X3)
    want = jax.jit(lambda x: jax.lax.fori_loop(0, 1000, lambda i, c: c * 1.0001 + 1.0, x))(X3)
    assert_same(got, want, rtol=1e-4)


def test_lowered_module_compiles_and_runs():
    lowered = ftrans.jit(_nested(FT)).lower(X3, XS5)
    compiled = lowered.compile()
    want = jax.jit(_nested(JX))(X3, XS5)
    assert_same(compiled(X3, XS5), want, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# Eager control flow runs the same staged bodies


def test_eager_results_are_concrete_arrays():
    out = FT.lax.cond(True, lambda a: a * 2.0, lambda a: a, X3)
    assert type(out) is ftrans.Array or isinstance(out, ftrans.Array)
    c, ys = FT.lax.scan(lambda c, x: (c + x, c), X3, XS5)
    assert isinstance(c, ftrans.Array) and isinstance(ys, ftrans.Array)
    np.testing.assert_allclose(np.asarray(c), X3 + XS5.sum(0), rtol=1e-5)
    # Device-resident inputs (a jitted function's outputs) work eagerly too.
    xs_dev, c_dev = ftrans.jit(lambda a, b: (a * 1.0, b * 1.0))(XS5, X3)
    c2, ys2 = FT.lax.scan(lambda c, x: (c + x, c), c_dev, xs_dev)
    np.testing.assert_allclose(np.asarray(c2), np.asarray(c), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ys2), np.asarray(ys), rtol=1e-6)


def test_lax_exports_the_api_layer_functions():
    """``ftrans.lax`` exports control flow and collectives directly from the API layer (no lazy forwarders)."""
    from ftrans.lax import _collectives, _control_flow

    for name in _control_flow.__all__:
        assert getattr(ftrans.lax, name) is getattr(_control_flow, name)
    for name in _collectives.__all__:
        assert getattr(ftrans.lax, name) is getattr(_collectives, name)


def test_disable_jit_while_loop_under_vmap_falls_back_to_the_primitive():
    """A vmapped while_loop's condition is traced: under disable_jit it runs as the primitive (as in JAX)."""
    def f(x):
        return FT.lax.while_loop(lambda v: v < 5.0, lambda v: v + 1.0, x)

    def g(x):
        return JX.lax.while_loop(lambda v: v < 5.0, lambda v: v + 1.0, x)

    xs = np.array([1.0, 3.5, 7.0], np.float32)
    ftrans.config.update("disable_jit", True)
    try:
        with jax.disable_jit():
            want = jax.vmap(g)(xs)
        got = ftrans.vmap(f)(xs)
        # Unbatched, the loop still steps in Python with concrete values.
        assert float(f(np.float32(2.5))) == 5.5
    finally:
        ftrans.config.update("disable_jit", False)
    assert_same(got, want)


def test_while_loop_reuses_the_trace_of_the_same_functions_like_jax():
    """A second while_loop with the same cond/body objects and argument types runs no Python (as in
    JAX); new argument types, and a body closing over a jit tracer, trace again."""

    def run(lax, jit):
        calls = []

        def cond(x):
            calls.append("c")
            return x < 5

        def body(x):
            calls.append("b")
            return x + 2

        out = [lax.while_loop(cond, body, 0), lax.while_loop(cond, body, 0)]
        first = len(calls)
        out.append(lax.while_loop(cond, body, np.float32(0.5)))  # new type: traced again
        out += [jit(lambda y: lax.while_loop(lambda x: x < y, body, 0))(y) for y in (7, 9)]
        n = len(calls)
        ftrans.clear_caches()  # forgets the traces: runs the Python again
        out.append(lax.while_loop(cond, body, 0))
        return [np.asarray(o).tolist() for o in out], first, n, len(calls)

    # jax 0.10.2, 0.11.2 and 0.12.0.1 give this (the same program, ``jax.clear_caches()`` for the last
    # step); it is written out because clearing jax's caches here would make every later test in the
    # worker recompile jax's eager operations.
    assert run(ftrans.lax, ftrans.jit) == ([6, 6, 6.5, 8, 10, 6], 2, 4, 6)


def test_disable_jit_loops_copy_numpy_carries_and_empty_scan_raises_like_jax():
    def run(mod):
        def body_fun(carry):
            x, y = carry
            x += 1  # in place if x were the caller's NumPy array
            return x, y + x

        def f():
            val = np.array(1.0)
            return mod.lax.while_loop(lambda c: c[0] < 10, body_fun, (val, val))[1]

        with mod.disable_jit():
            eager = f()
            with pytest.raises(ValueError):
                mod.lax.scan(lambda c, x: (c + x, x), 0.0, np.array([]))
            empty_fori = mod.lax.fori_loop(0, 0, lambda i, x: x + i, 1.0)
        return [(np.asarray(a).item(), np.asarray(a).dtype) for a in (f(), eager, empty_fori)]

    assert run(ftrans) == run(jax)


def test_scan_forwards_xs_returned_as_ys_like_jax():
    def parts(mod):
        g = lambda x: mod.lax.scan(lambda c, x: (c + 1, (x, x * 2)), 0, x)  # noqa: E731
        jaxpr = mod.make_jaxpr(g)(np.arange(3.0))
        outs = g(np.arange(3.0))
        return (len(jaxpr.eqns[0].params["jaxpr"].jaxpr.outvars),
                [(np.asarray(o).tolist(), np.asarray(o).dtype) for o in jax.tree_util.tree_leaves(outs)])

    assert parts(ftrans) == parts(jax)
    grad = ftrans.grad(lambda x: ftrans.lax.scan(lambda c, x: (c, x), 0.0, x)[1].sum())(np.arange(3.0))
    np.testing.assert_array_equal(np.asarray(grad), np.ones(3))


def test_traced_scan_unroll_is_a_concretization_error_like_jax():
    for mod, exc in ((ftrans, ftrans.errors.ConcretizationTypeError), (jax, jax.errors.ConcretizationTypeError)):
        f = mod.jit(lambda n, x: mod.lax.scan(lambda c, z: (c, z), x, (), 10, unroll=n))
        with pytest.raises(exc):
            f(3, 1.0)
