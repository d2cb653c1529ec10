"""Reverse mode of ``lax.while_loop`` (issue 21): checkpointed, with a trip count known only at run time.

jax cannot differentiate a ``while_loop`` in reverse mode, so every reference is the
same loop with its trip count fixed ahead of time (a Python loop or a static
``fori_loop``, i.e. a ``scan``) differentiated by jax.  The number of checkpoint
slots is varied down to 1 so that thinning (stride doubling) and recomputation
from a checkpoint run many times.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import FtransValueError
from tests.hypothesis_budget import examples

F32 = np.float32


@pytest.fixture
def slots():
    """Set ``while_checkpoints`` for one test and restore it after."""
    old = ftrans.config.while_checkpoints
    yield lambda k: ftrans.config.update("while_checkpoints", k)
    ftrans.config.update("while_checkpoints", old)


def close(a, b, rtol=2e-4, atol=2e-5):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def loop(x, w, n):
    """An n-step recurrence; the trip count is a traced value inside the loop's predicate."""
    def body(c):
        i, y = c
        return i + 1, fjnp.sin(y * w) + 0.1 * y
    return flax.while_loop(lambda c: c[0] < n, body, (0, x))[1].sum()


def loop_ref(x, w, n):
    y = x
    for _ in range(int(n)):
        y = jjnp.sin(y * w) + 0.1 * y
    return y.sum()


X = np.linspace(0.1, 1.0, 3).astype(F32)
W = F32(0.7)


@settings(max_examples=examples(12), deadline=None)
@given(n=st.integers(0, 40), k=st.integers(1, 6))
def test_grad_matches_unrolled_for_any_trip_count_and_slots(n, k):
    old = ftrans.config.while_checkpoints
    ftrans.config.update("while_checkpoints", k)
    try:
        got = ftrans.grad(loop, argnums=(0, 1))(X, W, n)
    finally:
        ftrans.config.update("while_checkpoints", old)
    close(got, jax.grad(loop_ref, argnums=(0, 1))(X, W, n))


@pytest.mark.parametrize("k", [1, 2, 5, 64])
def test_jit_grad_traced_trip_count(slots, k):
    slots(k)
    g = ftrans.jit(ftrans.grad(loop, argnums=(0, 1)))
    for n in (0, 1, 7, 33):  # one compilation: n is traced
        close(g(X, W, n), jax.grad(loop_ref, argnums=(0, 1))(X, W, n))


def test_vjp_jacrev_hessian_and_linearize(slots):
    slots(3)
    n = 7  # more than twice the slots: the slots fill and are thinned, steps are recomputed from them
    t = np.ones(3, F32)
    # the jax references as one program (eagerly, jax compiles each operation of each transform apart)
    want_vjp, want_jacrev, want_hessian, want_jvp = jax.jit(lambda x, w, t: (
        jax.vjp(lambda x: loop_ref(x, w, n), x)[1](F32(2.0)), jax.jacrev(loop_ref)(x, w, n),
        jax.hessian(loop_ref)(x, w, n), jax.jvp(lambda x: loop_ref(x, w, n), (x,), (t,))))(X, W, t)
    _, pb = ftrans.vjp(lambda x: loop(x, W, n), X)
    close(pb(F32(2.0)), want_vjp)
    close(ftrans.jacrev(loop)(X, W, n), want_jacrev)
    close(ftrans.hessian(loop)(X, W, n), want_hessian, rtol=1e-3, atol=1e-4)
    close(ftrans.jacrev(ftrans.jacrev(loop))(X, W, n), want_hessian, rtol=1e-3, atol=1e-4)
    _, lin = ftrans.linearize(lambda x: loop(x, W, n), X)
    close(lin(t), want_jvp[1])
    close(ftrans.jvp(lambda x: loop(x, W, n), (X,), (t,)), want_jvp)


def test_vmap_with_per_example_trip_counts(slots):
    slots(2)
    ns = np.array([0, 3, 9, 4], np.int32)
    xs = np.stack([X * (i + 1) for i in range(4)])
    refs = [jax.grad(loop_ref, argnums=(0, 1))(xs[i], W, ns[i]) for i in range(4)]
    want = (np.stack([r[0] for r in refs]), np.stack([r[1] for r in refs]))
    g = ftrans.vmap(ftrans.grad(loop, argnums=(0, 1)), in_axes=(0, None, 0))
    close(g(xs, W, ns), want)
    close(ftrans.jit(g)(xs, W, ns), want)
    gv = ftrans.grad(lambda xs, w: ftrans.vmap(loop, in_axes=(0, None, 0))(xs, w, ns).sum(), argnums=(0, 1))
    close(gv(xs, W), (want[0], want[1].sum()))


def test_nested_in_scan_cond_and_jit(slots):
    slots(2)

    def g(x, w):
        return flax.scan(lambda c, _: (loop(c, w, 3) * c * 0.5, None), x, None, length=3)[0].sum()

    def g_ref(x, w):
        c = x
        for _ in range(3):
            c = loop_ref(c, w, 3) * c * 0.5
        return c.sum()

    want = jax.grad(g_ref, argnums=(0, 1))(X, W)
    close(ftrans.grad(g, argnums=(0, 1))(X, W), want)
    close(ftrans.jit(ftrans.grad(g, argnums=(0, 1)))(X, W), want)

    def h(x, w):
        return flax.cond(w > 0, lambda: loop(x, w, 6), lambda: x.sum())

    want = jax.grad(lambda x, w: loop_ref(x, w, 6), argnums=(0, 1))(X, W)
    close(ftrans.grad(h, argnums=(0, 1))(X, W), want)
    close(ftrans.jit(ftrans.grad(h, argnums=(0, 1)))(X, W), want)
    close(ftrans.grad(ftrans.jit(loop, static_argnums=2), argnums=(0, 1))(X, W, 9),
          jax.grad(loop_ref, argnums=(0, 1))(X, W, 9))


def test_data_dependent_stop_and_fori_with_traced_bounds():
    def newton_sqrt(a):  # stops on convergence: the trip count depends on the data
        def body(c):
            x, _ = c
            return 0.5 * (x + a / x), x
        return flax.while_loop(lambda c: fjnp.abs(c[0] - c[1]) > 1e-6, body, (a, a + 1.0))[0]

    for a in (F32(2.0), F32(9.0), F32(0.3)):
        np.testing.assert_allclose(ftrans.grad(newton_sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-3)
        np.testing.assert_allclose(ftrans.jit(ftrans.grad(newton_sqrt))(a), 0.5 / np.sqrt(a), rtol=1e-3)

    def k(x, n):
        return flax.fori_loop(0, n, lambda i, y: y * fjnp.cos(y) + x, x).sum()

    def k_ref(x, n):
        y = x
        for _ in range(n):
            y = y * jjnp.cos(y) + x
        return y.sum()

    close(ftrans.jit(ftrans.grad(k))(X, 13), jax.grad(k_ref)(X, 13))


def test_memory_is_bounded_by_the_slots_not_the_trip_count(slots):
    slots(8)
    n = 5000
    text = str(ftrans.make_jaxpr(ftrans.grad(loop))(X, W, n))
    leading = {int(m) for m in re.findall(r"f32\[(\d+),3\]", text)}
    # 8 slots + one scratch row (and the 4 kept when thinning, 1 row read back), whatever n is
    assert max(leading) == 9 and 9 in leading, leading
    close(ftrans.jit(ftrans.grad(loop))(X, W, n), jax.grad(
        lambda x, w: jax.lax.fori_loop(0, n, lambda i, y: jjnp.sin(y * w) + 0.1 * y, x).sum())(X, W),
        rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "many", None])
def test_bad_checkpoint_count_is_a_located_error(bad):
    old = ftrans.config.while_checkpoints
    with pytest.raises(FtransValueError) as ei:
        ftrans.config.update("while_checkpoints", bad)
    msg = str(ei.value)
    assert isinstance(ei.value, ValueError)
    assert "while_checkpoints" in msg and "positive integer" in msg and "test_while_grad.py" in msg, msg
    assert ftrans.config.while_checkpoints == old


def test_second_order_reverse_through_while_lowers_in_linear_dce_work(monkeypatch):
    """``jit(grad(grad(f)))`` of a ``while_loop`` nests the loop's recomputation loops some twenty deep (98
    loops for this 2-carry body).  Dead-code elimination reaches a fixed point per loop, and without its memo
    every level redid the levels below: lowering took more than ten minutes.  Counting the eliminator's calls
    pins the linear behaviour without timing anything; the value is checked against jax's gradient of the
    unrolled loop (eagerly, and compiled in the thorough run)."""
    from ftrans.transforms.passes import dce as dce_module
    from tests.thorough import THOROUGH

    calls = [0]
    inner = dce_module._dce

    def counting(*a, **k):
        calls[0] += 1
        return inner(*a, **k)

    monkeypatch.setattr(dce_module, "_dce", counting)

    def f(x):
        return flax.while_loop(lambda c: c[1] < 3.0, lambda c: (c[0] * fjnp.sin(c[0]) + 1.0, c[1] + 1.0),
                               (x, 0.0))[0]

    def unrolled(x):
        for _ in range(3):
            x = x * jjnp.sin(x) + 1.0
        return x

    g2 = ftrans.grad(ftrans.grad(f))
    lowered = ftrans.jit(g2).lower(F32(0.7))
    assert calls[0] < 10_000, calls[0]
    want = jax.grad(jax.grad(unrolled))(F32(0.7))
    close(g2(F32(0.7)), want)
    if THOROUGH:
        close(lowered.compile()(F32(0.7)), want)


def test_batched_second_order_reverse_through_while_stages_each_body_once(monkeypatch):
    """The same nesting under ``vmap`` and ``jacrev``: batching reaches a fixed point per loop, and without its
    memo each round re-batched every loop below (22,326 body stagings for ``vmap(grad(grad(f)))``, 34 s to
    lower; 390 now).  The thorough run also checks the values against jax's derivatives of the unrolled loop."""
    from ftrans.transforms.batch_rules import control_flow as batch_cf

    calls = [0]
    inner = batch_cf.stage

    def counting(*a, **k):
        calls[0] += 1
        return inner(*a, **k)

    monkeypatch.setattr(batch_cf, "stage", counting)

    def f(x):
        return flax.while_loop(lambda c: c[1] < 3.0, lambda c: (c[0] * fjnp.sin(c[0]) + 1.0, c[1] + 1.0),
                               (x, 0.0))[0]

    def unrolled(x):
        for _ in range(3):
            x = x * jjnp.sin(x) + 1.0
        return x

    from tests.thorough import THOROUGH

    xs = np.array([0.7, 0.3], F32)
    low_v = ftrans.jit(ftrans.vmap(ftrans.grad(ftrans.grad(f)))).lower(xs)
    assert calls[0] < 2_000, calls[0]
    calls[0] = 0
    low_j = ftrans.jit(ftrans.jacrev(ftrans.grad(f))).lower(xs[0])
    assert calls[0] < 1_000, calls[0]
    if THOROUGH:  # (XLA takes about a minute over these ~100 nested loops)
        want_v, want_j = jax.jit(lambda x: (jax.vmap(jax.grad(jax.grad(unrolled)))(x),
                                            jax.jacrev(jax.grad(unrolled))(x[0])))(xs)
        close(low_v.compile()(xs), want_v)
        close(low_j.compile()(xs[0]), want_j)
