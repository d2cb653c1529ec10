"""``vmap`` of control flow (``cond``/``switch``, ``while_loop``/``fori_loop``, ``scan``/``map``) against ``jax.vmap``.

Each program is written once against a library namespace (``L.lax``, ``L.np``)
and batched by ftrans (eagerly, and under ``jit`` where it matters) and by jax;
results must agree in pytree structure, shape, dtype, weak type and value.
The printed IR is checked too: an unbatched decision stays one ``cond`` /
``while`` / ``scan``; a batched ``cond`` index becomes ``select_n``; a batched
``while`` predicate becomes one masked ``while`` whose condition is a
``reduce_or``.  Every batched program is ``typecheck``-ed with its bodies.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core.ir import ClosedJaxpr, Jaxpr, typecheck
from tests.hypothesis_budget import examples
from tests.test_control_flow import assert_same as _assert_same

FT = SimpleNamespace(name="ftrans", lax=lax, np=jnp, vmap=ftrans.vmap, jit=ftrans.jit, grad=ftrans.grad)
JX = SimpleNamespace(name="jax", lax=jax.lax, np=jjnp, vmap=jax.vmap, jit=jax.jit, grad=jax.grad)

F32 = np.float32
I32 = np.int32
rng = np.random.default_rng(0)
X43 = rng.standard_normal((4, 3)).astype(F32)
X4 = np.array([1.5, -0.5, 2.0, -2.25], F32)
XS = rng.standard_normal((4, 5, 3)).astype(F32)  # batch 4, scan length 5, feature 3
W3 = np.array([0.5, -1.0, 2.0], F32)


# ----------------------------------------------------------------------------
# Helpers


# test_control_flow's comparison, with this module's looser default atol.
assert_same = functools.partial(_assert_same, atol=1e-5)


def vdiff(prog, *args, in_axes=0, out_axes=0, jit=False, **tol):
    """``vmap(prog(L), in_axes, out_axes)(*args)`` by ftrans (eagerly, and jitted with ``jit``) vs jax."""
    want = jax.jit(jax.vmap(prog(JX), in_axes=in_axes, out_axes=out_axes))(*args)
    f = ftrans.vmap(prog(FT), in_axes=in_axes, out_axes=out_axes)
    assert_same(f(*args), want, what="eager", **tol)
    if jit:
        assert_same(ftrans.jit(f)(*args), want, what="jit", **tol)
    return f


def sub_jaxprs(jaxpr):
    """Every jaxpr nested in the params of ``jaxpr``'s equations, recursively."""
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

    for eqn in (jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr).eqns:
        for p in eqn.params.values():
            visit(p)
    return found


def ir(f, *args):
    """The IR of ``f`` (typechecked with all its bodies) and the primitive names of its top-level equations."""
    closed = ftrans.make_jaxpr(f)(*args)
    typecheck(closed)
    for j in sub_jaxprs(closed):
        typecheck(j)
    return closed, [e.primitive.name for e in closed.jaxpr.eqns]


def all_names(closed):
    names = [e.primitive.name for e in closed.jaxpr.eqns]
    for j in sub_jaxprs(closed):
        names += [e.primitive.name for e in j.eqns]
    return names


# ----------------------------------------------------------------------------
# cond and switch


def _cond_batched_pred(L):
    def f(x):
        return L.lax.cond(x.sum() > 0, lambda v: L.np.sin(v) * 2.0, lambda v: L.np.cos(v) - v, x)
    return f


def test_cond_batched_predicate_becomes_select():
    f = vdiff(_cond_batched_pred, X43, jit=True)
    closed, names = ir(f, X43)
    assert "cond" not in all_names(closed)
    assert names.count("select_n") >= 1 and names[-1] == "select_n"
    # The index is clamped before it selects (cond's contract).
    assert "clamp" in names


def _cond_unbatched_pred(L):
    def f(p, x):
        return L.lax.cond(p > 0, lambda v: (v * 2.0, L.np.float32(1.0)), lambda v: (-v, L.np.float32(2.0)), x)
    return f


def test_cond_unbatched_predicate_stays_one_cond():
    for p in (F32(1.0), F32(-1.0)):
        f = vdiff(_cond_unbatched_pred, p, X43, in_axes=(None, 0), jit=True)
    closed, names = ir(f, F32(1.0), X43)
    assert names.count("cond") == 1 and "select_n" not in names
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "cond"]
    # The first output is batched (at dimension 0), the second is the same for every element.
    assert [v.aval.shape for v in eqn.outvars] == [(4, 3), ()]


def _cond_mixed_outputs(L):
    # Branch 0 makes output 0 depend on the batched x, branch 1 returns a constant there: both must agree.
    def f(p, x):
        return L.lax.cond(p, lambda: (x * 3.0, L.np.zeros(3, L.np.float32)), lambda: (L.np.ones(3, L.np.float32),
                                                                                   L.np.zeros(3, L.np.float32)))
    return f


def test_cond_branches_disagreeing_on_batchedness_are_forced():
    for p in (True, False):
        f = vdiff(_cond_mixed_outputs, p, X43, in_axes=(None, 0), jit=True)
    closed, names = ir(f, True, X43)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "cond"]
    assert [v.aval.shape for v in eqn.outvars] == [(4, 3), (3,)]
    for b in eqn.params["branches"]:
        assert [a.shape for a in b.out_avals] == [(4, 3), (3,)]


def _cond_captures_batched(L):
    # The predicate is batched; the operand is not, but a branch captures a batched value.
    def f(x, y):
        return L.lax.cond(x > 0, lambda v: v + x, lambda v: v * x * y, y)
    return f


def test_cond_batched_pred_unbatched_operand_closure():
    vdiff(_cond_captures_batched, X4, W3, in_axes=(0, None), jit=True)


def _switch(L):
    def f(i, x):
        return L.lax.switch(i, [lambda v: v + 1.0, lambda v: L.np.sin(v), lambda v: v * v], x)
    return f


def test_switch_batched_index_clamps_out_of_range():
    idx = np.array([-3, 0, 1, 2, 7, 2], I32)
    x = rng.standard_normal((6, 3)).astype(F32)
    f = vdiff(_switch, idx, x, jit=True)
    got = np.asarray(f(idx, x))
    np.testing.assert_allclose(got[0], x[0] + 1.0, rtol=1e-6)  # -3 runs branch 0
    np.testing.assert_allclose(got[4], x[4] * x[4], rtol=1e-6)  # 7 runs branch 2
    closed, names = ir(f, idx, x)
    assert "cond" not in all_names(closed) and names[-1] == "select_n"


def test_switch_batched_index_unbatched_operand():
    idx = np.array([5, 1, -1, 0], I32)
    vdiff(_switch, idx, W3, in_axes=(0, None))


def test_switch_unbatched_index_batched_operand():
    for i in (-1, 1, 9):
        f = vdiff(_switch, I32(i), X43, in_axes=(None, 0))
    _, names = ir(f, I32(1), X43)
    assert names.count("cond") == 1


def _cond_int_and_weak(L):
    def f(p, x):
        return L.lax.cond(p, lambda v: (v, 1), lambda v: (v * 2, 2), x)
    return f


def test_cond_integer_operand_and_weak_outputs():
    p = np.array([True, False, True])
    x = np.array([[1, 2], [3, 4], [5, 6]], I32)
    vdiff(_cond_int_and_weak, p, x)


def _cond_sqrt(L):
    def f(x):
        return L.lax.cond(x > 0, lambda v: L.np.sqrt(v), lambda v: v * 0.5, x)
    return f


def test_grad_of_vmapped_cond_takes_no_nan_from_untaken_branch():
    """Batched predicate: the untaken ``sqrt`` branch sees a negative x, but its derivative must not leak."""
    def loss(L):
        return lambda x: L.vmap(_cond_sqrt(L))(x).sum()

    x = np.array([4.0, -1.0, 0.25, -9.0], F32)
    want = jax.grad(loss(JX))(x)
    got = ftrans.grad(loss(FT))(x)
    assert np.all(np.isfinite(np.asarray(got)))
    assert_same(got, want)


# ----------------------------------------------------------------------------
# while_loop and fori_loop


def _while_trip(L):
    # Per-example trip count: double until above a threshold.
    def f(x):
        return L.lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1, c[1] * 2.0 + 0.5), (0, x))
    return f


def test_while_per_example_trip_counts():
    x = np.array([0.1, 3.0, 20.0, 1.0, 7.0], F32)
    f = vdiff(_while_trip, x, jit=True)
    counts = np.asarray(f(x)[0])
    assert len(set(counts.tolist())) > 2  # the examples really stop at different iterations
    closed, names = ir(f, x)
    assert names.count("while") == 1
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "while"]
    cond_names = [e.primitive.name for e in eqn.params["cond_jaxpr"].jaxpr.eqns]
    body_names = [e.primitive.name for e in eqn.params["body_jaxpr"].jaxpr.eqns]
    assert cond_names[-1] == "reduce_or"
    assert body_names.count("select_n") == 2  # one per carry keeps finished examples unchanged


def _while_fixed(L):
    # The trip count is shared; only the value is batched.
    def f(x):
        return L.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, L.np.sin(c[1]) + c[1]), (0, x))
    return f


def test_while_unbatched_predicate_keeps_plain_loop():
    f = vdiff(_while_fixed, X43, jit=True)
    closed, names = ir(f, X43)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "while"]
    assert "reduce_or" not in [e.primitive.name for e in eqn.params["cond_jaxpr"].jaxpr.eqns]
    assert "select_n" not in all_names(closed)
    # The counter stays unbatched.
    assert [v.aval.shape for v in eqn.outvars] == [(), (4, 3)]


def _while_carry_becomes_batched(L):
    # The carry starts unbatched (zeros) and the body adds the batched x: a fixed point makes it batched.
    def f(x):
        return L.lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] + x * c[0]),
                                (0, L.np.zeros(3, L.np.float32)))
    return f


def test_while_carry_batched_by_the_body():
    f = vdiff(_while_carry_becomes_batched, X43)
    closed, _ = ir(f, X43)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "while"]
    assert [v.aval.shape for v in eqn.outvars] == [(), (4, 3)]


def _while_batched_bound(L):
    # Batched cond consts, unbatched init: the predicate is batched, so every carry becomes batched.
    def f(n, x):
        return L.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x), (0, F32(1.0)))
    return f


def test_while_batched_cond_consts():
    vdiff(_while_batched_bound, np.array([0, 3, 1, 5], I32), X4, jit=True)


def _fori(L, traced):
    def f(n, x):
        upper = n if traced else 4
        return L.lax.fori_loop(0, upper, lambda i, c: c * 0.5 + L.np.cos(c) * i, x)
    return f


@pytest.mark.parametrize("traced", [False, True], ids=["static_bounds", "traced_bounds"])
def test_fori_loop(traced):
    n = np.array([3, 0, 5, 2], I32) if traced else I32(4)
    in_axes = (0 if traced else None, 0)
    f = vdiff(lambda L: _fori(L, traced), n, X43, in_axes=in_axes, jit=True)
    closed, names = ir(f, n, X43)
    assert names.count("while" if traced else "scan") == 1


def test_fori_loop_traced_unbatched_bound():
    f = vdiff(lambda L: _fori(L, True), I32(3), X43, in_axes=(None, 0))
    closed, names = ir(f, I32(3), X43)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "while"]
    assert "reduce_or" not in [e.primitive.name for e in eqn.params["cond_jaxpr"].jaxpr.eqns]


# ----------------------------------------------------------------------------
# scan and map


def _scan(L, reverse=False):
    def f(w, c0, xs):
        def step(c, x):
            c = L.np.tanh(c * w + x)
            return c, (c.sum(), x * w)
        return L.lax.scan(step, c0, xs, reverse=reverse)
    return f


C3 = np.array([0.1, 0.2, -0.3], F32)
W43 = rng.standard_normal((4, 3)).astype(F32)
C43 = rng.standard_normal((4, 3)).astype(F32)


SCAN_CASES = {  # name: (in_axes of (consts, init, xs), reverse)
    "xs": ((None, None, 0), False),
    "consts_xs_reverse": ((0, None, 0), True),
    "carry": ((None, 0, None), False),
    "carry_reverse": ((None, 0, None), True),
    "consts": ((0, None, None), False),
    "all": ((0, 0, 0), False),
    "all_reverse": ((0, 0, 0), True),
}


@pytest.mark.parametrize("case", SCAN_CASES)
def test_scan_batched_operands(case):
    axes, reverse = SCAN_CASES[case]
    args = [W43 if axes[0] == 0 else W3, C43 if axes[1] == 0 else C3, XS if axes[2] == 0 else XS[0]]
    f = vdiff(lambda L: _scan(L, reverse), *args, in_axes=axes, jit=(axes == (0, 0, 0)))
    closed, names = ir(f, *args)
    assert names.count("scan") == 1
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert eqn.params["reverse"] == reverse and eqn.params["length"] == 5
    assert "transpose" not in [e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns]


def test_scan_carry_unbatched_when_nothing_batches_it():
    # Only the ys depend on the batch; the carry (a counter) stays unbatched.
    def prog(L):
        return lambda xs: L.lax.scan(lambda c, x: (c + 1, x * c), 0, xs)

    f = vdiff(prog, XS)
    closed, _ = ir(f, XS)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert eqn.outvars[0].aval.shape == ()


def test_scan_in_axes_and_out_axes():
    xs = np.moveaxis(XS, 0, 2)  # (5, 3, 4): mapped over the last axis
    vdiff(lambda L: _scan(L), W3, C3, xs, in_axes=(None, None, -1), out_axes=-1, jit=True)
    vdiff(lambda L: _scan(L), W43.T.copy(), C3, xs, in_axes=(1, None, 2), out_axes=(1, (0, 2)))


@settings(max_examples=examples(4))
@given(data=st.data())
def test_scan_axes_hypothesis(data):
    """Random in_axes for a 3-d ``xs`` and a batched carry, random out_axes for the stacked ys."""
    x_axis = data.draw(st.integers(-3, 2), label="x_axis")
    c_axis = data.draw(st.integers(-2, 1), label="c_axis")
    y_axis = data.draw(st.integers(-3, 2), label="y_axis")
    xs = np.moveaxis(XS, 0, x_axis)
    c0 = np.moveaxis(C43, 0, c_axis)

    def prog(L):
        def f(c0, xs):
            return L.lax.scan(lambda c, x: (c * 0.9 + x, L.np.sin(c) + x), c0, xs)
        return f

    vdiff(prog, c0, xs, in_axes=(c_axis, x_axis), out_axes=(0, y_axis))


def test_scan_zero_length():
    def prog(L):
        return lambda c, xs: L.lax.scan(lambda c, x: (c + x, c * 2.0), c, xs)

    vdiff(prog, C43, np.zeros((4, 0, 3), F32))


def test_scan_unroll_kept():
    def prog(L):
        return lambda xs: L.lax.scan(lambda c, x: (c + x, c), F32(0.0), xs, unroll=2)

    x = rng.standard_normal((3, 7)).astype(F32)
    f = vdiff(prog, x, jit=True)
    closed, _ = ir(f, x)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    assert eqn.params["unroll"] == 2


def test_map_under_vmap():
    def prog(L):
        return lambda xs: L.lax.map(lambda r: L.np.cumsum(r) * r[0], xs)

    vdiff(prog, XS)

    def prog_batched(L):
        return lambda xs: L.lax.map(lambda r: r * r.sum(), xs, batch_size=2)

    vdiff(prog_batched, XS)


# ----------------------------------------------------------------------------
# Composition: nested vmap, jit, nested control flow, collectives, autodiff


def test_nested_vmap_while_per_example():
    x = np.abs(rng.standard_normal((3, 4)).astype(F32)) * 4

    def prog(L):
        return L.vmap(_while_trip(L))

    f = vdiff(prog, x, in_axes=1, jit=True)  # the outer vmap maps columns, the inner one their elements
    closed, names = ir(f, x)
    assert names.count("while") == 1


def test_nested_vmap_cond_and_scan_axes():
    def inner(L):
        def f(p, xs):
            return L.lax.cond(p > 0, lambda v: L.lax.scan(lambda c, x: (c + x, c * x), 0.0, v),
                              lambda v: (v.sum(), -v), xs)
        return f

    p = rng.standard_normal((2, 3)).astype(F32)
    xs = rng.standard_normal((3, 5, 2)).astype(F32)

    def prog(L):
        return L.vmap(inner(L), in_axes=(0, 1))  # inner: p over its axis 0, xs over its axis 1

    vdiff(prog, p, xs, in_axes=(1, 0), jit=True)
    # The outer vmap over an unbatched predicate only: the cond stays a cond.
    vdiff(prog, p[:, 0], xs, in_axes=(None, 0))


def _nested_control_flow(L):
    # scan inside cond inside while, with a per-example trip count and captured batched values.
    def f(x, n):
        def body(c):
            i, v = c

            def yes(u):
                s, _ = L.lax.scan(lambda a, t: (a * 0.5 + t * x[0], a), u[0], u)
                return u + s

            v = L.lax.cond(i % 2 == 0, yes, lambda u: u * 0.75, v)
            return i + 1, v

        return L.lax.while_loop(lambda c: c[0] < n, body, (0, x))
    return f


def test_nested_control_flow_under_vmap():
    x = rng.standard_normal((4, 3)).astype(F32)
    n = np.array([0, 1, 4, 3], I32)
    f = vdiff(_nested_control_flow, x, n, jit=True)
    closed, names = ir(f, x, n)
    assert names.count("while") == 1
    inner = all_names(closed)
    assert "scan" in inner  # the scan survives batching
    # Unbatched trip count: the cond's predicate depends on the unbatched counter only, so it stays a cond.
    g = vdiff(_nested_control_flow, x, I32(3), in_axes=(0, None))
    closed, _ = ir(g, x, I32(3))
    assert "cond" in all_names(closed) and "reduce_or" not in all_names(closed)


def test_jit_of_vmap_and_vmap_of_jit():
    x = np.array([0.1, 3.0, 20.0, 1.0], F32)
    want = jax.vmap(_while_trip(JX))(x)
    assert_same(ftrans.jit(ftrans.vmap(_while_trip(FT)))(x), want)
    assert_same(ftrans.vmap(ftrans.jit(_while_trip(FT)))(x), want)
    text = ftrans.jit(ftrans.vmap(_while_trip(FT))).lower(x).as_text()
    assert text.count("stablehlo.while") == 1


def test_collective_inside_scan_body():
    def prog(L):
        def f(xs):
            return L.lax.scan(lambda c, x: (c + L.lax.psum(x, "i"), L.lax.pmax(x, "i") - x), F32(0.0), xs)
        return L.vmap(f, axis_name="i")

    x = rng.standard_normal((4, 6)).astype(F32)
    got = prog(FT)(x)
    want = prog(JX)(x)
    assert_same(got, want)


def test_axis_index_inside_cond_and_while():
    def prog(L):
        def f(x):
            i = L.lax.axis_index("b")
            y = L.lax.cond(i % 2 == 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
            return L.lax.while_loop(lambda c: c[0] < i, lambda c: (c[0] + 1, c[1] + y), (0, y))
        return L.vmap(f, axis_name="b")

    assert_same(prog(FT)(X43), prog(JX)(X43))


def test_vmap_of_grad_scan_and_cond():
    """Per-example gradients through a scan whose body branches on the data."""
    def prog(L):
        def loss(w, xs):
            def step(c, x):
                c = L.lax.cond(x.sum() > 0, lambda a: L.np.tanh(a * w + x), lambda a: a * 0.5 - x * w, c)
                return c, (c * c).sum()
            c, ys = L.lax.scan(step, L.np.zeros(3, L.np.float32), xs)
            return ys.sum() + c.sum()
        return L.vmap(L.grad(loss), in_axes=(None, 0))

    want = jax.jit(prog(JX))(W3, XS)
    assert_same(prog(FT)(W3, XS), want, rtol=1e-4, atol=1e-5)
    assert_same(ftrans.jit(prog(FT))(W3, XS), want, rtol=1e-4, atol=1e-5)


def test_grad_of_vmap_scan():
    def prog(L):
        def loss(w):
            def one(xs):
                return L.lax.scan(lambda c, x: (L.np.sin(c * w) + x, c), L.np.zeros(3, L.np.float32), xs)[0]
            return L.vmap(one)(XS).sum()
        return L.grad(loss)

    assert_same(prog(FT)(W3), jax.jit(prog(JX))(W3), rtol=1e-4, atol=1e-5)


def test_jvp_of_vmap_while_batched_predicate():
    def prog(L):
        f = L.vmap(_while_trip(L))
        return lambda x, t: L.jvp(lambda v: f(v)[1], (x,), (t,))

    x = np.array([0.1, 3.0, 20.0, 1.0], F32)
    t = np.ones(4, F32)
    got = prog(SimpleNamespace(**vars(FT), jvp=ftrans.jvp))(x, t)
    want = prog(SimpleNamespace(**vars(JX), jvp=jax.jvp))(x, t)
    assert_same(got, want)


# ----------------------------------------------------------------------------
# Read-only carries and forwarded cond outputs stay unbatched (JAX forwards them out of the loop / cond)


def test_while_read_only_carry_is_forwarded_like_jax():
    def make(L):
        def foo(w, x, c_max):
            def body(val):
                c, x, w = val
                return c + 1, x @ w, w

            _, x, w = L.lax.while_loop(lambda val: val[0] < c_max, body, (0, x, w))
            return w, x

        return L.vmap(foo, in_axes=(None, 0, 0), out_axes=(None, 0))

    w = np.array([[1.0, 0.5], [0.0, 1.0]], F32)
    xs = rng.standard_normal((4, 2)).astype(F32)
    c_max = np.arange(4, dtype=I32)
    got, want = make(FT)(w, xs, c_max), make(JX)(w, xs, c_max)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5)
    eqn = [e for e in ftrans.make_jaxpr(lambda x: lax.while_loop(lambda v: v[0] < 3, lambda v: (v[0] + 1, v[1]),
                                                                 (0, x)))(W3).jaxpr.eqns if e.primitive.name == "while"]
    assert len(eqn) == 1 and len(eqn[0].outvars) == 1  # the read-only carry is a constant of the loop


def test_scan_read_only_carry_inside_a_batched_cond_is_unbatched():
    def make(L):
        def f(x, y):
            def g(_, y):
                y, _ = L.lax.scan(lambda y, _: (y, None), y, None, length=1)
                return y

            return L.lax.cond(x < 0, g, g, x, y)

        return L.vmap(f, (0, None), None)

    xs = np.arange(3.0, dtype=F32)
    got, want = make(FT)(xs, 3.0), make(JX)(xs, 3.0)
    assert np.asarray(got) == np.asarray(want) == 3.0
    carry, ys = lax.scan(lambda c, x: (c, x * c), np.float32(2.0), XS[0])
    want_c, want_ys = jax.lax.scan(lambda c, x: (c, x * c), np.float32(2.0), XS[0])
    np.testing.assert_allclose(np.asarray(ys), np.asarray(want_ys))
    assert float(carry) == float(want_c) == 2.0


def test_cond_output_forwarded_from_an_operand_is_that_operand():
    def make(L):
        def f(x, y):
            return L.lax.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y), x, y)

        return L.vmap(f, in_axes=(0, None), out_axes=(0, None))

    for L, np_ in ((FT, jnp), (JX, jjnp)):
        x, y = np_.arange(3), np_.array(3.0)
        x2, y2 = make(L)(x, y)
        assert x2 is not x and y2 is y
        np.testing.assert_array_equal(np.asarray(x2), [0, 2, 4])
