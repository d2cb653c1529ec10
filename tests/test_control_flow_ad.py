"""Derivatives through control flow (``cond``/``switch``, ``while_loop``/``fori_loop``, ``scan``/``map``) against jax.

Every program is written once as a function of a ``(lax, jnp)`` pair and run
by ftrans and by jax on the same hypothesis-drawn values:

* forward mode: ``ftrans.jvp`` against ``jax.jvp`` (every case, ``while_loop``
  included);
* reverse mode: ``ftrans.vjp`` (outputs and pullback of a random cotangent)
  against ``jax.vjp``, and ``ftrans.grad`` of a scalar variant eagerly, as
  ``jit(grad(f))`` and as ``grad(jit(f))`` against ``jax.grad``;
* nesting (scan in cond in scan, cond in scan in jit), second order
  (``grad(grad)``, ``jvp(grad)``), ``check_grads`` in float64, an Elman RNN,
  ``checkpoint`` and custom rules inside bodies, the printed backward IR, and
  reverse mode through ``while`` (checkpointed, against the loop unrolled in jax).

``jacfwd``/``jacrev``/``hessian`` are built on ``vmap``; their tests skip only
while ``ftrans.vmap`` of the control-flow primitive raises
``NotImplementedError``, so they turn on by themselves when batching rules land.

The jax side of each case is ``jax.jit``-compiled once and reused across
examples, and ftrans's jitted functions are built once per case, so repeated
examples hit both libraries' compilation caches.
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
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.core.ir import typecheck
from ftrans.test_util import check_grads
from tests.hypothesis_budget import examples

FT, JX = (flax, fjnp), (jax.lax, jjnp)
F0 = jax.dtypes.float0
F32 = np.float32
tree_flatten, tree_unflatten, tree_leaves = (jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten,
                                             jax.tree_util.tree_leaves)
RTOL, ATOL = 2e-4, 2e-5


FEW, JAC_FEW = examples(4, slow=True), examples(2, slow=True)

# The jax oracles are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): about half
# the compile time of a differentiated control-flow program, and the same values up to float rounding, which the
# comparisons' tolerances are for.  (ftrans's programs are compiled as they always are.)
ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def jax_jit(f):
    """``jax.jit`` for a jax oracle (see ORACLE_OPTIONS)."""
    return jax.jit(f, compiler_options=ORACLE_OPTIONS)


def lib_of(lax):
    """The library a builder runs against (for ``jit``, ``checkpoint``, ``custom_jvp`` and friends)."""
    return ftrans if lax is flax else jax


_ONCE: dict = {}


def once(key, make):
    """``make()``, built once per ``key``: transformed functions (and so ftrans's and jax's jit caches) are
    reused across hypothesis examples."""
    if key not in _ONCE:
        _ONCE[key] = make()
    return _ONCE[key]


@contextlib.contextmanager
def x64_enabled():
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    try:
        yield
    finally:
        ftrans.config.update("enable_x64", before)


# ----------------------------------------------------------------------------
# Comparison helpers


def nondiff(dtype) -> bool:
    d = np.dtype(dtype)
    return d == F0 or d.kind in "iub"


def assert_close(got, want, rtol=RTOL, atol=ATOL, what=""):
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} vs jax {w.shape}"
    if w.dtype == F0 or g.dtype == F0:
        assert nondiff(g.dtype) and nondiff(w.dtype), f"{what}: dtype {g.dtype} vs jax {w.dtype}"
        return
    assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} vs jax {w.dtype}"
    if np.issubdtype(w.dtype, np.inexact):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


def assert_tree_close(got, want, rtol=RTOL, atol=ATOL, what=""):
    g, gt = tree_flatten(got)
    w, wt = tree_flatten(want)
    assert gt == wt, f"{what}: ftrans returns {gt}, jax {wt}"
    for i, (a, b) in enumerate(zip(g, w)):
        assert_close(a, b, rtol=rtol, atol=atol, what=f"{what} leaf {i}")


def _avals(leaves):
    return [(tuple(np.shape(x)), np.dtype(x.dtype)) for x in leaves]


def random_like(rng, shape, dtype):
    if nondiff(dtype):
        return np.zeros(shape, F0)
    return rng.normal(size=shape).astype(dtype)


def floats(shape, lo=-2.0, hi=2.0, dtype=F32):
    return hnp.arrays(dtype, shape, elements=st.floats(lo, hi, width=np.dtype(dtype).itemsize * 8))


# ----------------------------------------------------------------------------
# The programs: name -> (float32 operand shapes, builder (lax, jnp) -> f).  Outputs are pytrees.

C3 = np.array([0.5, -1.0, 1.5], F32)


def _cond_basic(pred):
    def build(lax, jnp):
        def f(x, y):
            return lax.cond(pred, lambda a, b: (jnp.sin(a) * b, a), lambda a, b: (a * a + b, jnp.cos(b)), x, y)
        return f
    return build


def _cond_closure(pred):
    """Branches capture an outer differentiated value ``w`` and an outer constant; one ignores its operand."""
    def build(lax, jnp):
        def f(x, w):
            out1 = lax.cond(pred, lambda v: v * w + C3, lambda v: jnp.tanh(w) * C3 - v, x)
            out2 = lax.cond(pred, lambda v: w * w, lambda v: jnp.sin(w) + v, x)
            return out1, out2
        return f
    return build


def _cond_data_pred(lax, jnp):
    def f(x, y):
        return lax.cond(jnp.sum(x) > 0, lambda a, b: jnp.exp(a * 0.5) * b, lambda a, b: a - b * b, x, y)
    return f


def _cond_pytree(lax, jnp):
    def f(x, y, z):
        def tb(ops):
            return {"o": ops["a"] * ops["b"][0], "p": [jnp.sin(ops["b"][1]), ops["a"].sum()]}

        def fb(ops):
            return {"o": ops["b"][1] - ops["a"], "p": [ops["b"][0] * 2.0, (ops["a"] * ops["b"][1]).sum()]}
        return lax.cond(x[0] > 0, tb, fb, {"a": x, "b": (y, z)})
    return f


def _cond_int_output(lax, jnp):
    """A branch output that is an integer (float0 tangent / cotangent) beside a float one; zero operands."""
    def f(x, y):
        a = lax.cond(x[1] > 0, lambda: (x * y, jnp.int32(1)), lambda: (y - x, jnp.int32(2)))
        return a
    return f


def _switch(index):
    """Four branches that close over the differentiated ``w``; the index may be out of range (clamped)."""
    def build(lax, jnp):
        branches = [lambda v, w: jnp.sin(v) * w, lambda v, w: v * w * w, lambda v, w: jnp.cos(w) + v,
                    lambda v, w: v - w]

        def f(x, w):
            return lax.switch(np.int32(index), [functools.partial(lambda b, v: b(v, w), b) for b in branches], x)
        return f
    return build


def _switch_data_index(lax, jnp):
    def f(x, y):
        i = (x[0] * 3.0).astype(jnp.int32)  # anywhere in [-6, 6]: clamped into [0, 2]
        return lax.switch(i, [lambda a, b: a * b, lambda a, b: jnp.sin(a + b), lambda a, b: b * b - a], x, y)
    return f


def _while_zero_tangent_carry(lax, jnp):
    """``b`` starts as a constant (zero tangent) and picks up a tangent from ``a * y`` in the body."""
    def f(x, y):
        def cond(c):
            i, a, _ = c
            return jnp.logical_and(i < 6, jnp.sum(a * a) < 40.0)

        def body(c):
            i, a, b = c
            return i + 1, a * 1.3 + 0.25, b + jnp.sin(a) * y

        i, a, b = lax.while_loop(cond, body, (0, x, jnp.zeros_like(x)))
        return a, b, i
    return f


def _while_closure(lax, jnp):
    def f(x, w):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.tanh(c[1] * w) + w), (0, x))[1]
    return f


def _fori_static(lax, jnp):
    def f(x, y):
        def body(i, c):
            a, b = c
            return a * jnp.cos(b) + i, b * 0.9 + a * 0.1 * i
        return lax.fori_loop(2, 6, body, (x, y))
    return f


def _scan_pytree(lax, jnp):
    def f(h, c, xs1, xs2):
        def body(carry, x):
            x1, x2 = x[0], x[1]["z"]
            h2 = jnp.tanh(carry["h"] * x1 + carry["c"][0])
            c2 = carry["c"][0] * 0.5 + x2.sum()
            return {"h": h2, "c": (c2,)}, (h2 * c2, [x2 * carry["h"].sum()])
        return lax.scan(body, {"h": h, "c": (c,)}, (xs1, {"z": xs2}))
    return f


def _scan_opts(reverse=False, unroll=1):
    def build(lax, jnp):
        def f(h, xs):
            def body(c, x):
                c2 = jnp.sin(c) * x + c * 0.5
                return c2, c2 * c
            return lax.scan(body, h, xs, reverse=reverse, unroll=unroll)
        return f
    return build


def _scan_consts(lax, jnp):
    """The body captures the differentiated ``w`` (matrix) and ``b`` from the outer scope."""
    def f(h, xs, w, b):
        def body(c, x):
            c2 = jnp.tanh(w @ c + x + b)
            return c2, jnp.sum(c2 * b)
        return lax.scan(body, h, xs)
    return f


def _scan_ys_unused(lax, jnp):
    def f(h, xs):
        c, _ = lax.scan(lambda c, x: (c * jnp.cos(x) + x, jnp.exp(c)), h, xs)
        return c
    return f


def _scan_carry_unused(lax, jnp):
    def f(h, xs):
        _, ys = lax.scan(lambda c, x: (c + x, jnp.sin(c * x)), h, xs)
        return ys
    return f


def _scan_int_carry(lax, jnp):
    def f(h, xs):
        def body(c, x):
            i, v = c
            return (i + 1, v * x + i.astype(jnp.float32) * 0.1), v * i.astype(jnp.float32)
        return lax.scan(body, (jnp.int32(0), h), xs)
    return f


def _scan_short(lax, jnp):
    """Used with lengths 0 and 1."""
    def f(h, xs, w):
        return lax.scan(lambda c, x: (c * x + w, jnp.sin(c) * w), h, xs)
    return f


def _scan_no_xs(lax, jnp):
    def f(h, w):
        return lax.scan(lambda c, _: (jnp.sin(c) * w + c, c * c), h, None, length=4)
    return f


def _map(lax, jnp):
    def f(xs, w):
        return lax.map(lambda x: jnp.sin(x) * w + x.sum(), xs)
    return f


def _map_pytree(lax, jnp):
    def f(xs, ys):
        return lax.map(lambda t: {"s": t[0] * t[1], "c": jnp.cos(t[0]).sum()}, (xs, ys))
    return f


def _scan_cond_scan(lax, jnp):
    """A scan inside a cond inside a scan."""
    def f(h, xs, w):
        def inner(c, t):
            return c * jnp.cos(t) + w, c.sum()

        def outer(c, t):
            def tb(c):
                c2, ys = lax.scan(inner, c, jnp.stack([t, t * 0.5]))
                return c2 + ys.sum()

            c = lax.cond(t.sum() > 0, tb, lambda c: jnp.sin(c) * t, c)
            return c, c * w
        return lax.scan(outer, h, xs)
    return f


def _cond_in_scan_in_jit(lax, jnp):
    lib = lib_of(lax)

    def f(h, xs, w):
        def body(c, t):
            c = lax.cond(t[0] > 0, lambda c: c * w + t, lambda c: jnp.tanh(c - t), c)
            return c, c.sum()
        return lib.jit(lambda h, xs: lax.scan(body, h, xs))(h, xs)
    return f


CASES = {
    "cond_true": ([(3,), (3,)], _cond_basic(True)),
    "cond_false": ([(3,), (3,)], _cond_basic(False)),
    "cond_data_pred": ([(3,), (3,)], _cond_data_pred),
    "cond_pytree": ([(3,), (3,), (3,)], _cond_pytree),
    "cond_closure_true": ([(3,), (3,)], _cond_closure(True)),
    "cond_closure_false": ([(3,), (3,)], _cond_closure(False)),
    "cond_int_output": ([(3,), (3,)], _cond_int_output),
    **{f"switch_{i}": ([(3,), (3,)], _switch(i)) for i in (-2, 1, 2, 9)},
    "switch_data_index": ([(2,), (2,)], _switch_data_index),
    "while_zero_tangent_carry": ([(3,), (3,)], _while_zero_tangent_carry),
    "while_closure": ([(3,), (3,)], _while_closure),
    "fori_static": ([(3,), (3,)], _fori_static),
    "scan_pytree": ([(3,), (), (4, 3), (4, 2)], _scan_pytree),
    "scan_forward": ([(3,), (5, 3)], _scan_opts()),
    "scan_reverse": ([(3,), (5, 3)], _scan_opts(reverse=True)),
    "scan_unroll2_len5": ([(3,), (5, 3)], _scan_opts(unroll=2)),
    "scan_unroll3_len7_reverse": ([(2,), (7, 2)], _scan_opts(reverse=True, unroll=3)),
    "scan_consts": ([(3,), (4, 3), (3, 3), (3,)], _scan_consts),
    "scan_ys_unused": ([(3,), (4, 3)], _scan_ys_unused),
    "scan_carry_unused": ([(3,), (4, 3)], _scan_carry_unused),
    "scan_int_carry": ([(2,), (5, 2)], _scan_int_carry),
    "scan_length0": ([(3,), (0, 3), (3,)], _scan_short),
    "scan_length1": ([(3,), (1, 3), (3,)], _scan_short),
    "scan_no_xs": ([(2,), (2,)], _scan_no_xs),
    "map": ([(4, 3), (3,)], _map),
    "map_pytree": ([(3, 2), (3, 2)], _map_pytree),
    "scan_cond_scan": ([(3,), (4, 3), (3,)], _scan_cond_scan),
    "cond_in_scan_in_jit": ([(3,), (4, 3), (3,)], _cond_in_scan_in_jit),
}
FORWARD_ONLY = {"while_zero_tangent_carry", "while_closure"}
REVERSE = sorted(set(CASES) - FORWARD_ONLY)


def draw_args(data, name, lo=-2.0, hi=2.0):
    shapes, _ = CASES[name]
    return tuple(data.draw(floats(s, lo, hi), label=f"arg{i}") for i, s in enumerate(shapes))


# ----------------------------------------------------------------------------
# jax oracles, compiled once per case


@functools.cache
def jax_jvp(name):
    f = CASES[name][1](*JX)
    return jax_jit(lambda p, t: jax.jvp(f, p, t))


@functools.cache
def jax_vjp(name):
    f = CASES[name][1](*JX)

    def run(prims, cts):
        out, pb = jax.vjp(f, *prims)
        return out, pb(cts)

    return jax_jit(run)


def scalar_loss(build):
    """``loss(weights, *args) = sum_k sum(out_k * weights_k)`` over the floating outputs of a case."""

    def b(lax, jnp):
        f = build(lax, jnp)

        def loss(weights, *args):
            total = 0.0
            for leaf, w in zip(tree_leaves(f(*args)), weights):
                if w is not None:
                    total = total + jnp.sum(leaf * w)
            return total

        return loss

    return b


def _argnums(name):
    return tuple(range(1, len(CASES[name][0]) + 1))


@functools.cache
def jax_grad(name):
    return jax_jit(jax.grad(scalar_loss(CASES[name][1])(*JX), argnums=_argnums(name)))


@functools.cache
def ftrans_grad(name, mode):
    loss = scalar_loss(CASES[name][1])(*FT)
    nums = _argnums(name)
    if mode == "eager":
        return ftrans.grad(loss, argnums=nums)
    if mode == "jit_of_grad":
        return ftrans.jit(ftrans.grad(loss, argnums=nums))
    assert mode == "grad_of_jit"
    return ftrans.grad(ftrans.jit(loss), argnums=nums)


# ----------------------------------------------------------------------------
# 1. jvp, vjp and grad of every case against jax


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=examples(5))
@given(data=st.data())
def test_jvp(name, data):
    prims = draw_args(data, name)
    tans = draw_args(data, name)
    f = CASES[name][1](*FT)
    got = ftrans.jvp(f, prims, tans)
    want = jax_jvp(name)(prims, tans)
    assert_tree_close(got[0], want[0], what="primal out")
    assert_tree_close(got[1], want[1], what="tangent out")


@pytest.mark.parametrize("name", REVERSE)
@settings(max_examples=examples(5))
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_vjp(name, data, seed):
    prims = draw_args(data, name)
    f = CASES[name][1](*FT)
    out, pb = ftrans.vjp(f, *prims)
    leaves, tree = tree_flatten(out)
    rng = np.random.default_rng(seed)
    cts = tree_unflatten(tree, [random_like(rng, s, d) for s, d in _avals(leaves)])
    got = pb(cts)
    want_out, want = jax_vjp(name)(prims, cts)
    assert_tree_close(out, want_out, what="primal out")
    assert isinstance(got, tuple) and len(got) == len(prims)
    assert_tree_close(got, want, what="cotangents")


@pytest.mark.parametrize("name", REVERSE)
@settings(max_examples=examples(3))
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_grad_modes(name, data, seed):
    """``grad``, ``jit(grad(f))`` and ``grad(jit(f))`` of the scalar variant against ``jax.grad``."""
    prims = draw_args(data, name)
    rng = np.random.default_rng(seed)
    weights = tuple(None if nondiff(d) else random_like(rng, s, d)
                    for s, d in _avals(tree_leaves(jax.eval_shape(CASES[name][1](*JX), *prims))))
    want = jax_grad(name)(weights, *prims)
    for mode in ("eager", "jit_of_grad", "grad_of_jit"):
        got = ftrans_grad(name, mode)(weights, *prims)
        assert_tree_close(got, want, what=mode)


@settings(max_examples=FEW)
@given(length=st.integers(0, 6), unroll=st.integers(1, 4), reverse=st.booleans(), d=st.integers(1, 3),
       data=st.data())
def test_scan_any_length_unroll_direction(length, unroll, reverse, d, data):
    """Drawn length, unroll and direction: vjp and jvp of a scan with consts and a two-part carry."""
    h = data.draw(floats((d,)))
    xs = data.draw(floats((length, d)))
    w = data.draw(floats((d,)))

    def build(lax, jnp):
        def f(h, xs, w):
            def body(c, x):
                a, s = c
                a2 = jnp.sin(a * w) + x
                return (a2, s + a2.sum()), a2 * s
            return lax.scan(body, (h, jnp.float32(0.0)), xs, reverse=reverse, unroll=unroll)
        return f

    rng = np.random.default_rng(length * 97 + unroll)
    out, pb = ftrans.vjp(build(*FT), h, xs, w)
    j_out, j_pb = jax.vjp(build(*JX), h, xs, w)
    assert_tree_close(out, j_out)
    leaves, tree = tree_flatten(out)
    cts = tree_unflatten(tree, [random_like(rng, s, dt) for s, dt in _avals(leaves)])
    assert_tree_close(pb(cts), j_pb(cts))
    tans = (h * 0.5 + 1.0, xs - 0.25, w * 2.0)
    assert_tree_close(ftrans.jvp(build(*FT), (h, xs, w), tans), jax.jvp(build(*JX), (h, xs, w), tans))


_WEAK_LOOPS = {
    "scan": lambda lax, jnp: lambda h: lax.scan(lambda c, x: (c * 1.5 + x, None), h, jnp.ones(3, jnp.float32))[0],
    "while": lambda lax, jnp: lambda h: lax.while_loop(lambda c: c < 3, lambda c: c * 1.5 + jnp.float32(1), h),
    "fori": lambda lax, jnp: lambda h: lax.fori_loop(0, 3, lambda i, c: c * 1.5 + jnp.float32(1), h),
}


@pytest.mark.parametrize("loop", sorted(_WEAK_LOOPS))
def test_jvp_loop_tangent_carry_weak_type_follows_primal(loop):
    p, t = ftrans.jvp(_WEAK_LOOPS[loop](*FT), (0.5,), (1.0,))
    pj, tj = jax.jvp(_WEAK_LOOPS[loop](*JX), (0.5,), (1.0,))
    assert p.weak_type is False and pj.weak_type is False and tj.weak_type is False
    assert t.weak_type == tj.weak_type, f"tangent weak_type {t.weak_type}, jax {tj.weak_type}; primal {p.weak_type}"


# ----------------------------------------------------------------------------
# 3. Second order through scan and cond


def _second_order(lax, jnp):
    def f(x):
        def body(c, t):
            c = lax.cond(t > 0, lambda c: jnp.sin(c * x) + c, lambda c: c * c * x, c)
            return c, c * t
        c, ys = lax.scan(body, x, jnp.array([0.5, -1.0, 2.0, -0.3], jnp.float32))
        return c + ys.sum()
    return f


@settings(max_examples=FEW)
@given(x=st.floats(-1.5, 1.5, width=32))
def test_grad_of_grad_through_scan_and_cond(x):
    x = F32(x)
    want = once("gg_jax", lambda: jax_jit(jax.grad(jax.grad(_second_order(*JX)))))(x)
    f = _second_order(*FT)
    assert_close(ftrans.grad(ftrans.grad(f))(x), want, rtol=1e-3, atol=1e-4)
    jit_gg = once("gg_jit", lambda: ftrans.jit(ftrans.grad(ftrans.grad(f))))
    assert_close(jit_gg(x), want, rtol=1e-3, atol=1e-4, what="jit(grad(grad))")
    g_jit_g = once("g_jit_g", lambda: ftrans.grad(ftrans.jit(ftrans.grad(f))))
    assert_close(g_jit_g(x), want, rtol=1e-3, atol=1e-4, what="grad(jit(grad))")


def _hvp_program(lax, jnp):
    def f(x, w):
        def body(c, t):
            c = jnp.tanh(c * w + t)
            return c, jnp.sum(c * c)
        c, ys = lax.scan(body, x, jnp.stack([x, x * 0.5, w]))
        return jnp.sum(c * w) + ys.sum()
    return f


@given(x=floats((3,), -1.0, 1.0), w=floats((3,), -1.0, 1.0), v=floats((3,)))
def test_hessian_vector_product_through_scan(x, w, v):
    """``jvp`` of ``grad`` (forward over reverse) through a scan whose xs depend on the differentiated input."""
    f, g = _hvp_program(*FT), _hvp_program(*JX)
    got = ftrans.jvp(lambda x: ftrans.grad(f)(x, w), (x,), (v,))
    want = once("hvp_jax", lambda: jax_jit(lambda x, w, v: jax.jvp(lambda x: jax.grad(g)(x, w), (x,), (v,))))(x, w, v)
    assert_tree_close(got, want, rtol=1e-3, atol=1e-4)
    # reverse over reverse: the hvp as the gradient of <grad f, v>
    got_rr = ftrans.grad(lambda x: fjnp.vdot(ftrans.grad(f)(x, w), v))(x)
    assert_close(got_rr, want[1], rtol=1e-3, atol=1e-4)


def _second_order_switch_while(lax, jnp):
    """Forward over forward through a while loop and a switch."""
    def f(x):
        def body(c):
            i, v = c
            return i + 1, lax.switch(i, [jnp.sin, lambda u: u * u * 0.5, jnp.cos], v) + x
        return lax.while_loop(lambda c: c[0] < 4, body, (0, x))[1]
    return f


@given(x=st.floats(-1.5, 1.5, width=32))
def test_second_order_forward_through_while_and_switch(x):
    x = F32(x)
    f, g = _second_order_switch_while(*FT), _second_order_switch_while(*JX)

    def d(fun, jvp):
        return lambda x: jvp(fun, (x,), (F32(1.0),))[1]

    want = once("ff_jax", lambda: jax_jit(d(d(g, jax.jvp), jax.jvp)))(x)
    assert_close(d(d(f, ftrans.jvp), ftrans.jvp)(x), want, rtol=1e-3, atol=1e-4)


# ----------------------------------------------------------------------------
# jacfwd / jacrev / hessian (built on vmap)


JAC_CASES = {
    # name: (primitives involved, reverse differentiable)
    "cond_true": (("cond",), True),
    "cond_data_pred": (("cond",), True),
    "switch_2": (("cond",), True),
    "switch_data_index": (("cond",), True),
    "scan_consts": (("scan",), True),
    "scan_reverse": (("scan",), True),
    "fori_static": (("scan",), True),
    "map": (("scan",), True),
    "scan_cond_scan": (("scan", "cond"), True),
    "while_zero_tangent_carry": (("while",), False),
}


def _jac_params(rev_only=False):
    return [pytest.param(n, id=n) for n, (prims, rev) in JAC_CASES.items() if rev or not rev_only]


def _float_outputs(build):
    def b(lax, jnp):
        f = build(lax, jnp)
        return lambda *a: [leaf for leaf in tree_leaves(f(*a)) if jnp.issubdtype(leaf.dtype, jnp.floating)]
    return b


@pytest.mark.parametrize("name", _jac_params())
@settings(max_examples=JAC_FEW)
@given(data=st.data())
def test_jacfwd(name, data):
    prims = draw_args(data, name)
    build = _float_outputs(CASES[name][1])
    nums = tuple(range(len(prims)))
    got = ftrans.jacfwd(build(*FT), argnums=nums)(*prims)
    want = once(("jacfwd", name), lambda: jax_jit(jax.jacfwd(build(*JX), argnums=nums)))(*prims)
    assert_tree_close(got, want)


@pytest.mark.parametrize("name", _jac_params(rev_only=True))
@settings(max_examples=JAC_FEW)
@given(data=st.data())
def test_jacrev(name, data):
    prims = draw_args(data, name)
    build = _float_outputs(CASES[name][1])
    nums = tuple(range(len(prims)))
    got = ftrans.jacrev(build(*FT), argnums=nums)(*prims)
    want = once(("jacrev", name), lambda: jax_jit(jax.jacrev(build(*JX), argnums=nums)))(*prims)
    assert_tree_close(got, want)


@pytest.mark.parametrize("name", _jac_params(rev_only=True))
@settings(max_examples=JAC_FEW)
@given(data=st.data())
def test_hessian(name, data):
    prims = draw_args(data, name, -1.0, 1.0)
    rng = np.random.default_rng(0)
    shapes = _avals(tree_leaves(jax.eval_shape(_float_outputs(CASES[name][1])(*JX), *prims)))
    weights = tuple(rng.normal(size=s).astype(d) for s, d in shapes)
    loss = scalar_loss(_float_outputs(CASES[name][1]))
    got = ftrans.hessian(loss(*FT), argnums=tuple(range(1, len(prims) + 1)))(weights, *prims)
    want = once(("hessian", name), lambda: jax_jit(jax.hessian(loss(*JX), argnums=tuple(range(1, len(prims) + 1)))))(
        weights, *prims)
    assert_tree_close(got, want, rtol=1e-3, atol=1e-4)


# ----------------------------------------------------------------------------
# 4. check_grads in float64 on composite programs


def _cg_scan_cond_switch(lax, jnp):
    def f(h, xs, w):
        def body(c, x):
            c = lax.cond(x[0] > 0, lambda c: jnp.sin(c * w) + x, lambda c: c * jnp.cos(x) - w, c)
            k = (jnp.abs(x[1]) * 2).astype(jnp.int32)
            y = lax.switch(k, [lambda c: c * c, lambda c: jnp.tanh(c), lambda c: c * w], c)
            return c, y
        c, ys = lax.scan(body, h, xs, reverse=True, unroll=2)
        return c, ys
    return f


def _cg_fori_map(lax, jnp):
    def f(x, w):
        v = lax.fori_loop(0, 3, lambda i, v: jnp.sin(v * w) + v * 0.5, x)
        return lax.map(lambda r: jnp.exp(r * 0.3) * v, jnp.stack([x, w, v]))
    return f


def _cg_while(lax, jnp):
    def f(x, w):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.sin(c[1]) * w + c[1]), (0, x))[1]
    return f


@pytest.mark.parametrize("build,nargs,modes", [
    (_cg_scan_cond_switch, 3, ("fwd", "rev")),
    (_cg_fori_map, 2, ("fwd", "rev")),
    (_cg_while, 2, ("fwd",)),
    (_scan_cond_scan, 3, ("fwd", "rev")),
    (_scan_pytree, 4, ("fwd", "rev")),
], ids=["scan_cond_switch", "fori_map", "while", "scan_cond_scan", "scan_pytree"])
def test_check_grads_float64(build, nargs, modes):
    rng = np.random.default_rng(3)
    shapes = {3: [(3,), (4, 3), (3,)], 2: [(3,), (3,)], 4: [(3,), (), (4, 3), (4, 2)]}[nargs]
    with x64_enabled():
        args = tuple(fjnp.asarray(rng.uniform(-1.0, 1.0, size=s)) for s in shapes)
        if build is _cg_scan_cond_switch:  # keep the switch index away from its jumps (finite differences)
            args = (args[0], fjnp.asarray(np.round(rng.uniform(-1.4, 1.4, size=(4, 3)), 1) + 0.05), args[2])
        assert all(a.dtype == np.float64 for a in args)
        check_grads(build(*FT), args, order=2, modes=modes)


# ----------------------------------------------------------------------------
# 5. An Elman RNN: scan against an unrolled Python loop and against jax

HIDDEN, INPUT, OUTPUT, STEPS = 8, 4, 2, 20


def _rnn(lax, jnp, unrolled=False):
    def loss(params, xs, targets):
        def step(h, x):
            h = jnp.tanh(params["W"] @ h + params["U"] @ x + params["b"])
            return h, params["V"] @ h

        h = jnp.zeros((HIDDEN,), jnp.float32)
        if unrolled:
            ys = []
            for t in range(xs.shape[0]):
                h, y = step(h, xs[t])
                ys.append(y)
            ys = jnp.stack(ys)
        else:
            h, ys = lax.scan(step, h, xs)
        return jnp.mean((ys - targets) ** 2) + 0.1 * jnp.sum(h * h)
    return loss


def _rnn_params(rng):
    return {"W": (rng.normal(size=(HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(F32),
            "U": (rng.normal(size=(HIDDEN, INPUT)) / 2).astype(F32),
            "b": (rng.normal(size=(HIDDEN,)) * 0.1).astype(F32),
            "V": (rng.normal(size=(OUTPUT, HIDDEN)) / np.sqrt(HIDDEN)).astype(F32)}


@settings(max_examples=examples(3))
@given(seed=st.integers(0, 2**16))
def test_elman_rnn_gradients(seed):
    rng = np.random.default_rng(seed)
    params = _rnn_params(rng)
    xs = rng.normal(size=(STEPS, INPUT)).astype(F32)
    targets = rng.normal(size=(STEPS, OUTPUT)).astype(F32)
    want_val, want = once("rnn_jax", lambda: jax_jit(jax.value_and_grad(_rnn(*JX), argnums=(0, 1))))(
        params, xs, targets)
    val, got = ftrans.value_and_grad(_rnn(*FT), argnums=(0, 1))(params, xs, targets)
    assert_close(val, want_val, rtol=1e-4, atol=1e-5)
    assert_tree_close(got, want, rtol=1e-3, atol=1e-5)
    unrolled = ftrans.grad(_rnn(*FT, unrolled=True), argnums=(0, 1))(params, xs, targets)
    assert_tree_close(got, unrolled, rtol=1e-3, atol=1e-5, what="scan vs unrolled")
    jitted = once("rnn_jit", lambda: ftrans.jit(ftrans.grad(_rnn(*FT), argnums=(0, 1))))(params, xs, targets)
    assert_tree_close(jitted, want, rtol=1e-3, atol=1e-5, what="jit(grad)")


# ----------------------------------------------------------------------------
# 6. checkpoint and custom rules inside control flow


def _checkpointed_scan(use_checkpoint):
    def build(lax, jnp):
        lib = lib_of(lax)

        def body(c, x):
            a = jnp.sin(c * x)
            b = jnp.tanh(a + c)
            return b * x, a * b

        step = lib.checkpoint(body) if use_checkpoint else body

        def f(h, xs):
            c, ys = lax.scan(step, h, xs)
            return jnp.sum(c) + jnp.sum(ys * ys)
        return f
    return build


@settings(max_examples=FEW)
@given(h=floats((3,)), xs=floats((5, 3)))
def test_checkpoint_around_scan_body(h, xs):
    want = once("ckpt_jax", lambda: jax_jit(jax.grad(_checkpointed_scan(True)(*JX), argnums=(0, 1))))(h, xs)
    plain = ftrans.grad(_checkpointed_scan(False)(*FT), argnums=(0, 1))(h, xs)
    got = ftrans.grad(_checkpointed_scan(True)(*FT), argnums=(0, 1))(h, xs)
    assert_tree_close(got, want)
    assert_tree_close(got, plain, what="checkpointed vs plain")
    jitted = once("ckpt_jit", lambda: ftrans.jit(ftrans.grad(_checkpointed_scan(True)(*FT), argnums=(0, 1))))(
        h, xs)
    assert_tree_close(jitted, want, what="jit(grad(scan(checkpoint)))")


def _custom_fns(lib, jnp):
    """A custom_jvp and a custom_vjp whose rules deliberately differ from the true derivative."""

    @lib.custom_jvp
    def soft(x):
        return jnp.sin(x)

    @soft.defjvp
    def soft_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return jnp.sin(x), 2.0 * jnp.cos(x) * t

    @lib.custom_vjp
    def clip_grad(x, y):
        return x * y

    def fwd(x, y):
        return x * y, (x, y)

    def bwd(res, ct):
        x, y = res
        return jnp.clip(ct * y, -0.5, 0.5), ct * x * 3.0

    clip_grad.defvjp(fwd, bwd)
    return soft, clip_grad


def _custom_in_control_flow(lax, jnp):
    soft, clip_grad = _custom_fns(lib_of(lax), jnp)

    def f(h, xs, w):
        def body(c, x):
            c = clip_grad(soft(c) + x, w)
            return c, soft(c * x)

        c, ys = lax.scan(body, h, xs)
        d = lax.cond(c[0] > 0, lambda v: soft(v * w), lambda v: clip_grad(v, w) - 1.0, c)
        return jnp.sum(d) + jnp.sum(ys)
    return f


def _custom_jvp_only(lax, jnp):
    soft, _ = _custom_fns(lib_of(lax), jnp)

    def f(h, xs, w):
        c, ys = lax.scan(lambda c, x: (soft(c * w) + x, soft(c)), h, xs)
        return lax.cond(c.sum() > 0, lambda v: soft(v), lambda v: v * soft(w), c), ys
    return f


@settings(max_examples=FEW)
@given(h=floats((3,)), xs=floats((4, 3)), w=floats((3,)))
def test_custom_rules_inside_scan_and_cond(h, xs, w):
    want = once("custom_jax", lambda: jax_jit(jax.grad(_custom_in_control_flow(*JX), argnums=(0, 1, 2))))(
        h, xs, w)
    got = ftrans.grad(_custom_in_control_flow(*FT), argnums=(0, 1, 2))(h, xs, w)
    assert_tree_close(got, want)
    jitted = once("custom_jit", lambda: ftrans.jit(ftrans.grad(_custom_in_control_flow(*FT), argnums=(0, 1, 2))))(
        h, xs, w)
    assert_tree_close(jitted, want, what="jit(grad)")
    # custom_jvp is also used in forward mode
    tans = (h * 0.5, xs + 1.0, w - 0.5)
    want_jvp = once("custom_jvp_jax", lambda: jax_jit(lambda p, t: jax.jvp(_custom_jvp_only(*JX), p, t)))(
        (h, xs, w), tans)
    assert_tree_close(ftrans.jvp(_custom_jvp_only(*FT), (h, xs, w), tans), want_jvp, what="jvp custom_jvp")


# ----------------------------------------------------------------------------
# 7. The printed backward program


def _count(text, word):
    return text.count(word)


def test_printed_grad_of_scan_has_forward_and_reverse_scan():
    f = _scan_consts(*FT)

    def single(h, xs, w, b):
        c, ys = f(h, xs, w, b)
        return fjnp.sum(c) + fjnp.sum(ys)

    args = (np.ones(3, F32), np.ones((4, 3), F32), np.eye(3, dtype=F32), np.ones(3, F32))
    closed = ftrans.make_jaxpr(ftrans.grad(single, argnums=(0, 1, 2, 3)))(*args)
    typecheck(closed)
    text = str(closed)
    assert _count(text, "scan[") == 2, text
    assert "reverse=True" in text and "reverse=False" in text, text
    out = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    want = jax.grad(lambda *a: sum(jjnp.sum(v) for v in _scan_consts(*JX)(*a)), argnums=(0, 1, 2, 3))(*args)
    assert_tree_close(tuple(out), want)


def test_printed_grad_of_reverse_scan_runs_forward_backward():
    closed = ftrans.make_jaxpr(ftrans.grad(lambda h, xs: fjnp.sum(_scan_opts(reverse=True)(*FT)(h, xs)[1])))(
        np.ones(3, F32), np.ones((5, 3), F32))
    typecheck(closed)
    text = str(closed)
    assert _count(text, "scan[") == 2, text
    # the forward scan runs in reverse, so its transpose runs forward
    assert "reverse=True" in text and "reverse=False" in text, text


def test_printed_grad_of_cond_has_two_conds():
    def f(x, w):
        return fjnp.sum(flax.cond(x[0] > 0, lambda v: fjnp.sin(v) * w, lambda v: v * v, x))

    closed = ftrans.make_jaxpr(ftrans.grad(f, argnums=(0, 1)))(np.ones(3, F32), np.ones(3, F32))
    typecheck(closed)
    text = str(closed)
    assert _count(text, "cond[") == 2, text
    ftrans.eval_jaxpr(closed.jaxpr, closed.consts, np.ones(3, F32), np.ones(3, F32))


def test_printed_linearize_of_while_typechecks():
    f = _while_closure(*FT)
    _, f_jvp = ftrans.linearize(f, np.ones(3, F32), np.full(3, 0.5, F32))
    closed = ftrans.make_jaxpr(f_jvp)(np.ones(3, F32), np.ones(3, F32))
    typecheck(closed)
    assert "while[" in str(closed)


# ----------------------------------------------------------------------------
# 8. Reverse mode through while_loop (checkpointed; more in test_while_grad.py); fori_loop with static bounds


def _while_grad_program(x):
    return flax.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] * 2.0 + 1.0, c[1] + c[0]), (x, x))[1]


def _while_trips(x):
    c, n = float(x), 0
    while c < 10.0:
        c, n = c * 2.0 + 1.0, n + 1
    return n


def _while_grad_unrolled(x, n):
    """The same loop with its trip count fixed, which jax can differentiate in reverse mode."""
    return jax.lax.fori_loop(0, n, lambda i, c: (c[0] * 2.0 + 1.0, c[1] + c[0]), (x, x))[1]


def test_grad_of_while_loop():
    # jax raises here (reverse mode of while_loop); ftrans checkpoints (docs/differences.md)
    want = jax.grad(_while_grad_unrolled)(F32(0.5), _while_trips(0.5))
    assert_close(ftrans.grad(_while_grad_program)(F32(0.5)), want)
    assert_close(ftrans.jit(ftrans.grad(_while_grad_program))(F32(0.5)), want)
    with pytest.raises(ValueError):
        jax.grad(_while_grad_jax)(F32(0.5))
    f = _scan_ys_unused(*FT)
    got = ftrans.grad(lambda h: fjnp.sum(f(h, XS43)))(X3)
    assert_close(got, jax.grad(lambda h: jjnp.sum(_scan_ys_unused(*JX)(h, XS43)))(X3))
    assert_close(ftrans.jvp(_while_grad_program, (F32(0.5),), (F32(1.0),))[1],
                 jax.jvp(_while_grad_jax, (F32(0.5),), (F32(1.0),))[1])


X3 = np.array([0.3, -0.7, 1.2], F32)
XS43 = np.linspace(-1.0, 1.0, 12, dtype=F32).reshape(4, 3)


def _while_grad_jax(x):
    return jax.lax.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] * 2.0 + 1.0, c[1] + c[0]), (x, x))[1]


def test_grad_of_fori_loop_with_traced_bounds():
    def f(x, n):
        return flax.fori_loop(0, n, lambda i, v: fjnp.sin(v) + v, x)

    want = jax.grad(_fori_traced_jax)(F32(0.5), 3)
    assert_close(ftrans.grad(ftrans.jit(f))(F32(0.5), 3), want)
    assert_close(ftrans.jit(ftrans.grad(f))(F32(0.5), 3), want)
    # forward mode works through the same loop
    got = ftrans.jvp(ftrans.jit(f), (F32(0.5), 3), (F32(1.0), np.zeros((), F0)))
    want = jax.jvp(jax.jit(functools.partial(_fori_traced_jax)), (F32(0.5), 3), (F32(1.0), np.zeros((), F0)))
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def _fori_traced_jax(x, n):
    return jax.lax.fori_loop(0, n, lambda i, v: jjnp.sin(v) + v, x)


def test_vjp_of_while_loop():
    want = jax.vjp(lambda x: _while_grad_unrolled(x, _while_trips(0.5)), F32(0.5))[1](F32(1.0))
    _, pb = ftrans.vjp(_while_grad_program, F32(0.5))
    assert_close(pb(F32(1.0))[0], want[0])


@given(x=st.floats(-1.0, 1.0, width=32), n=st.integers(0, 5))
def test_grad_of_fori_loop_with_static_bounds(x, n):
    def prog(lax, jnp):
        return lambda x: lax.fori_loop(0, n, lambda i, v: jnp.sin(v) * (i + 1) + v, x)

    x = F32(x)
    want = once(("fori_jax", n), lambda: jax_jit(jax.grad(prog(*JX))))(x)
    assert_close(ftrans.grad(prog(*FT))(x), want, rtol=1e-4, atol=1e-5)


@given(x=floats((3,), -1.0, 1.0), w=floats((3,), -1.0, 1.0), t1=floats((3,)), t2=floats((3,)))
def test_linearize_through_while_loop(x, w, t1, t2):
    f, g = _while_zero_tangent_carry(*FT), _while_zero_tangent_carry(*JX)
    y, f_jvp = ftrans.linearize(f, x, w)

    def jax_side(x, w, t1, t2):
        y, g_jvp = jax.linearize(g, x, w)
        return y, g_jvp(t1, t2), g_jvp(t2, t1)

    y_j, want1, want2 = once("linearize_jax", lambda: jax_jit(jax_side))(x, w, t1, t2)
    assert_tree_close(y, y_j)
    assert_tree_close(f_jvp(t1, t2), want1)
    assert_tree_close(f_jvp(t2, t1), want2)


def test_switch_branches_share_residual_slots_like_jax():
    """Only one branch runs, so the forward cond returns per type as many residuals as the hungriest
    branch needs (as JAX merges them), not the sum over branches; gradients are unchanged."""
    import jax

    def conds(mod, branches):
        f = lambda x, i: mod.lax.switch(i + 1, branches(mod), x)  # noqa: E731
        jaxpr = mod.make_jaxpr(mod.grad(f))(0.0, 0)
        eqns = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "cond"]
        shapes = [(len(e.params["branches"][0].jaxpr.invars), len(e.params["branches"][0].jaxpr.outvars))
                  for e in eqns]
        return shapes

    b3 = lambda m: [m.numpy.sin, m.numpy.cos, m.numpy.sinh, lambda x: m.numpy.sin(x) + m.numpy.cos(x)]  # noqa: E731
    for branches in (lambda m: b3(m)[:2], lambda m: b3(m)[:3], b3):
        assert conds(ftrans, branches) == conds(jax, branches)
    g = ftrans.jit(ftrans.vmap(ftrans.grad(lambda x, i: ftrans.lax.switch(i, b3(ftrans), x)), (None, 0)))
    want = [np.cos(0.3), -np.sin(0.3), np.cosh(0.3), np.cos(0.3) - np.sin(0.3)]
    np.testing.assert_allclose(g(0.3, np.arange(4)), want, rtol=1e-6)
