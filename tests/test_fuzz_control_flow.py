"""Differential fuzzing of control-flow programs under composed transforms, ftrans against jax.

A program is data: a small expression tree over float32 vectors of length 3
whose nodes are elementwise/matmul/reduction ops and control flow (``cond``
with operands, pytree operands or closures, ``switch`` with out-of-range
indices, ``while_loop`` with data-dependent trip counts, ``fori_loop`` with
static and traced bounds, ``scan`` with int/bool/pytree carries, ``xs`` or
``length``, ``reverse`` and ``unroll``, ``map`` with ``batch_size``,
``associative_scan``, ``where``, ``select_n``, ``checkpoint``, and
``custom_jvp``/``custom_vjp`` functions), nested up to three deep.  One
interpreter (``build``) turns it into a Python function against a namespace,
ftrans's or jax's, so the same program runs on both.  A stack of one to three
transforms (``jit``, ``grad`` with ``argnums``/``has_aux``, ``value_and_grad``,
``jvp``, ``vjp``, ``vmap`` over a batch derived from the inputs, so predicates,
indices and trip counts get batched, ``jacfwd``, ``jacrev``, ``linearize``,
``checkpoint``) wraps it, and ftrans's results must match jax's in pytree
structure, shape, dtype, weak type and value, or raise the error type jax does.

Reverse-mode through a ``while_loop`` (or a ``fori_loop`` with traced bounds)
is an ftrans extension (docs/differences.md, "Control flow"): where jax raises
its "Reverse-mode differentiation does not work for lax.while_loop", the
reference is jax on the same program with each loop unrolled to its bound as a
chain of selects, which computes the same function.

Run thoroughly with ``HYPOTHESIS_PROFILE=full``; ``python -m
tests.test_fuzz_control_flow SEED COUNT`` runs COUNT random programs from SEED
and prints every distinct failure.
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
import ftrans.numpy as fjnp
from ftrans import lax as flax
from tests.hypothesis_budget import examples

N = 3  # every value of a program is a float32 vector of this length
MAX_TRIP = 3  # the most iterations a data-dependent loop runs
W = np.array([[0.5, -0.25, 0.75], [0.3, 0.6, -0.4], [-0.8, 0.1, 0.2]], np.float32)
TX = np.array([0.3, -0.7, 1.1], np.float32)
TS = np.float32(0.4)
CT = 0.7


def _namespace(mod, jnp, lax, name):
    ns = SimpleNamespace(name=name, np=jnp, lax=lax, api=mod)

    @mod.custom_jvp
    def cj(a):
        return jnp.sin(a) * 2.0

    @cj.defjvp
    def _cj_jvp(primals, tangents):
        (a,), (ta,) = primals, tangents
        return cj(a), jnp.cos(a) * 2.0 * ta

    @mod.custom_vjp
    def cv(a, b):
        return a * jnp.tanh(b)

    def _cv_fwd(a, b):
        return cv(a, b), (a, b)

    def _cv_bwd(res, g):
        a, b = res
        t = jnp.tanh(b)
        return g * t, g * a * (1.0 - t * t)

    cv.defvjp(_cv_fwd, _cv_bwd)
    ns.cj, ns.cv = cj, cv
    return ns


FT = _namespace(ftrans, fjnp, flax, "ftrans")
JX = _namespace(jax, jjnp, jax.lax, "jax")


# ----------------------------------------------------------------------------
# Programs as data


class Chooser:
    """The draws a program generator makes: from hypothesis (``draw``) or from a seeded numpy generator."""

    def __init__(self, draw=None, rng=None):
        self._draw, self._rng = draw, rng

    def choice(self, options):
        options = list(options)
        if self._draw is not None:
            return self._draw(st.sampled_from(options))
        return options[int(self._rng.integers(len(options)))]

    def integer(self, lo, hi):
        if self._draw is not None:
            return self._draw(st.integers(lo, hi))
        return int(self._rng.integers(lo, hi + 1))


CF_KINDS = ("cond", "cond_closure", "cond_pytree", "switch", "while", "fori", "fori_traced", "scan", "map",
            "assoc", "where", "select_n", "ckpt", "cjvp", "cvjp")


def gen_expr(c: Chooser, depth: int, size: list) -> tuple:
    """A random expression; ``depth`` is how many more control-flow levels may nest, ``size`` a budget."""
    size[0] -= 1
    if size[0] <= 0:
        return ("v", c.integer(0, 7))
    kinds = ["v", "un", "bin", "red", "mm"] + (list(CF_KINDS) * 2 if depth > 0 else [])
    k = c.choice(kinds)
    sub = functools.partial(gen_expr, c, depth, size)
    inner = functools.partial(gen_expr, c, depth - 1, size)
    if k == "v":
        return ("v", c.integer(0, 7))
    if k == "un":
        return ("un", c.choice(("sin", "cos", "tanh", "neg", "sq", "abs", "exp1")), sub())
    if k == "bin":
        return ("bin", c.choice(("add", "sub", "mul", "max", "min")), sub(), sub())
    if k == "red":
        return ("red", c.choice(("sum", "max", "mean", "center")), sub())
    if k == "mm":
        return ("mm", sub())
    if k in ("cond", "cond_pytree"):
        return (k, sub(), sub(), inner(), inner())
    if k == "cond_closure":
        return (k, sub(), inner(), inner())
    if k == "switch":
        nb = c.integer(1, 3)
        return (k, sub(), c.integer(-2, 2), tuple(inner() for _ in range(nb)), sub())
    if k == "while":
        return (k, sub(), sub(), inner(), c.choice(("count", "count_and_value")))
    if k == "fori":
        return (k, c.integer(0, 1), c.integer(1, MAX_TRIP), sub(), inner())
    if k == "fori_traced":
        return (k, sub(), sub(), inner(), c.choice(("hi", "lo_hi")))
    if k == "scan":
        return (k, sub(), inner(), c.choice(("xs", "none", "xs_length")), c.choice((False, True)),
                c.choice((1, 2, True)), c.integer(1, 4), c.choice(("f", "fib", "tree")), c.choice((True, False)))
    if k == "map":
        return (k, sub(), inner(), c.choice((None, 1, 2)), c.integer(1, 4))
    if k == "assoc":
        return (k, c.choice(("add", "max", "mul")), c.choice((False, True)), sub())
    if k == "where":
        return (k, sub(), sub(), sub())
    if k == "select_n":
        nb = c.integer(1, 3)
        return (k, sub(), tuple(sub() for _ in range(nb)), c.choice((True, False)))
    if k == "ckpt":
        return (k, sub(), inner(), c.choice((None, "dots", "nothing")))
    if k == "cjvp":
        return (k, sub())
    if k == "cvjp":
        return (k, sub(), sub())
    raise AssertionError(k)


# Decisions read a weighted sum with an offset, not the plain sum: a centred vector sums to a rounding error
# (whose sign the two libraries need not share), a vector of zeros to exactly zero.
PW = np.array([0.45, -0.7, 0.95], np.float32)


def _mix(ns, p):
    return ns.np.dot(p, PW) + 0.137


def _pred_scalar(ns, p):
    return _mix(ns, p) > 0.0


def _int_of(ns, p, lo, hi):
    """An int32 scalar in [lo, hi] from a vector (a data-dependent count)."""
    return ns.np.clip(ns.np.floor(ns.np.abs(_mix(ns, p)) * 1.5), lo, hi).astype(np.int32)


def ev(e, ns, env, unroll_loops):
    """Evaluate expression ``e`` in namespace ``ns`` over ``env`` (a list of vectors)."""
    jnp, lax = ns.np, ns.lax
    k = e[0]
    r = functools.partial(ev, ns=ns, unroll_loops=unroll_loops)

    def sub(x, extra=()):
        return r(x, env=env + list(extra))

    if k == "v":
        return env[e[1] % len(env)]
    if k == "un":
        a = sub(e[2])
        op = e[1]
        if op == "sin":
            return jnp.sin(a)
        if op == "cos":
            return jnp.cos(a)
        if op == "tanh":
            return jnp.tanh(a)
        if op == "neg":
            return -a
        if op == "sq":
            return jnp.tanh(a * a)
        if op == "abs":
            return jnp.abs(a)
        if op == "exp1":
            return jnp.exp(jnp.tanh(a)) - 1.0
    if k == "bin":
        a, b = sub(e[2]), sub(e[3])
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: jnp.tanh(a * b),
                "max": lambda: jnp.maximum(a, b), "min": lambda: jnp.minimum(a, b)}[e[1]]()
    if k == "red":
        a = sub(e[2])
        if e[1] == "sum":
            return jnp.zeros_like(a) + jnp.sum(a)
        if e[1] == "max":
            return jnp.zeros_like(a) + jnp.max(a)
        if e[1] == "mean":
            return a * jnp.mean(a)
        return a - jnp.mean(a)
    if k == "mm":
        return jnp.tanh(jnp.dot(W, sub(e[1])))
    if k == "cond":
        pred = _pred_scalar(ns, sub(e[1]))
        return lax.cond(pred, lambda o: sub(e[3], [o]), lambda o: sub(e[4], [o]) * 0.5, sub(e[2]))
    if k == "cond_closure":
        pred = _pred_scalar(ns, sub(e[1]))
        return lax.cond(pred, lambda: sub(e[2]), lambda: -sub(e[3]))
    if k == "cond_pytree":
        pred = _pred_scalar(ns, sub(e[1]))
        op = {"a": sub(e[2]), "b": (env[0], jnp.int32(2))}

        def br(body, sign):
            def f(o):
                a, (b, i) = o["a"], o["b"]
                return {"u": sub(body, [a, b]), "i": i + sign, "w": a * sign}
            return f

        out = lax.cond(pred, br(e[3], 1), br(e[4], -1), op)
        return out["u"] + out["w"] + out["i"].astype(np.float32) * 0.1
    if k == "switch":
        idx = jnp.floor(_mix(ns, sub(e[1])) * 1.5).astype(np.int32) + e[2]
        branches = [functools.partial(lambda b, o: sub(b, [o]), b) for b in e[3]]
        return lax.switch(idx, branches, sub(e[4]))
    if k == "while":
        n = _int_of(ns, sub(e[1]), 0, MAX_TRIP)
        init = (jnp.int32(0), sub(e[2]))
        with_value = e[4] == "count_and_value"

        def cond_fun(c):
            i, v = c
            ok = i < n
            return (ok & (_mix(ns, v) < 1.0)) if with_value else ok

        def body_fun(c):
            i, v = c
            return i + 1, jnp.tanh(sub(e[3], [v]) + v * 0.5)

        if unroll_loops:
            c = init
            for _ in range(MAX_TRIP):
                go = cond_fun(c)
                c = jax.tree_util.tree_map(lambda a, b: jnp.where(go, a, b), body_fun(c), c)
            return c[1]
        return lax.while_loop(cond_fun, body_fun, init)[1]
    if k == "fori":
        lo, hi = e[1], e[2]
        return lax.fori_loop(lo, hi, lambda i, v: jnp.tanh(sub(e[4], [v]) + i * 0.25), sub(e[3]))
    if k == "fori_traced":
        n = _int_of(ns, sub(e[1]), 0, MAX_TRIP)
        lo = jnp.minimum(n, 1) if e[4] == "lo_hi" else 0

        def body(i, v):
            return jnp.tanh(sub(e[3], [v]) + i.astype(np.float32) * 0.25)

        init = sub(e[2])
        if unroll_loops:
            v = init
            for i in range(MAX_TRIP):
                go = (i >= lo) & (i < n)
                v = jnp.where(go, body(jnp.int32(i), v), v)
            return v
        return lax.fori_loop(lo, n, body, init)
    if k == "scan":
        _, xe, body, xs_kind, reverse, unroll, length, carry_kind, emit = e
        base = sub(xe)
        steps = np.linspace(0.5, -0.5, length, dtype=np.float32)
        xs = base[None, :] * steps[:, None] if xs_kind != "none" else None
        if carry_kind == "f":
            init = base * 0.5
        elif carry_kind == "fib":
            init = (base * 0.5, jnp.int32(0), jnp.bool_(False))
        else:
            init = {"v": base * 0.5, "n": (jnp.int32(1), jnp.zeros((), np.float32))}

        def f(carry, x):
            v = carry if carry_kind == "f" else carry[0] if carry_kind == "fib" else carry["v"]
            extra = [v] if x is None else [v, x]
            nv = jnp.tanh(sub(body, extra) + v * 0.5)
            if carry_kind == "f":
                nc = nv
            elif carry_kind == "fib":
                nc = (nv, carry[1] + (_mix(ns, nv) > 0).astype(np.int32), jnp.logical_xor(carry[2], nv[0] > 0.0123))
            else:
                nc = {"v": nv, "n": (carry["n"][0] * 2, carry["n"][1] + jnp.sum(nv))}
            return nc, (nv * 0.5 if emit else None)

        kw = {} if xs_kind == "xs" else {"length": length}
        carry, ys = lax.scan(f, init, xs, reverse=reverse, unroll=unroll, **kw)
        if carry_kind == "f":
            out = carry
        elif carry_kind == "fib":
            out = carry[0] + carry[1].astype(np.float32) * 0.1 + jnp.where(carry[2], 0.2, -0.2)
        else:
            out = carry["v"] + carry["n"][0].astype(np.float32) * 0.01 + carry["n"][1]
        return out + (jnp.sum(ys, axis=0) if emit else 0.0)
    if k == "map":
        _, xe, body, batch_size, length = e
        steps = np.linspace(1.0, -1.0, length, dtype=np.float32)
        xs = sub(xe)[None, :] * steps[:, None]
        kw = {} if batch_size is None else {"batch_size": batch_size}
        return jnp.sum(lax.map(lambda row: sub(body, [row]), xs, **kw), axis=0)
    if k == "assoc":
        fn = {"add": lambda a, b: a + b, "max": jnp.maximum, "mul": lambda a, b: a * b}[e[1]]
        return jnp.tanh(lax.associative_scan(fn, sub(e[3]), reverse=e[2]))
    if k == "where":
        return jnp.where(sub(e[1]) > 0.0123, sub(e[2]), sub(e[3]))
    if k == "select_n":
        cases = [sub(x) for x in e[2]]
        p = sub(e[1])
        if len(cases) == 2 and e[3]:
            which = p > 0.0123
        else:
            which = jnp.clip(jnp.floor(p * 2.0 + 0.37), 0, len(cases) - 1).astype(np.int32)
        return lax.select_n(which, *cases)
    if k == "ckpt":
        policy = {None: None, "dots": ns.api.checkpoint_policies.checkpoint_dots,
                  "nothing": ns.api.checkpoint_policies.nothing_saveable}[e[3]]
        return ns.api.checkpoint(lambda o: sub(e[2], [o]), policy=policy)(sub(e[1]))
    if k == "cjvp":
        return ns.cj(sub(e[1]))
    if k == "cvjp":
        return ns.cv(sub(e[1]), sub(e[2]))
    raise AssertionError(k)


def build(prog, ns, unroll_loops=False):
    """The program as a function ``(x, s) -> vector`` against namespace ``ns``."""

    def f(x, s):
        jnp = ns.np
        env = [x, s * jnp.ones((N,), np.float32), jnp.sin(x), x * s, jnp.cos(x) - s, x[::-1], -x, jnp.tanh(x + s)]
        return ev(prog, ns, env, unroll_loops)

    return f


# ----------------------------------------------------------------------------
# Transform stacks

TRANSFORMS = ("jit", "grad0", "grad1", "grad01", "grad_aux", "vag", "jvp", "vjp", "vmap_x", "vmap_s", "vmap_xs",
              "jacfwd", "jacrev", "linearize", "remat")


def _scalarise(ns, out):
    leaves = jax.tree_util.tree_leaves(out)
    tot = 0.0
    for i, leaf in enumerate(leaves):
        if np.issubdtype(np.dtype(leaf.dtype), np.inexact):
            tot = tot + ns.np.sum(ns.np.sin(leaf * (1.0 + 0.25 * i)))
    return tot


def apply_transform(t, g, ns):
    api, jnp = ns.api, ns.np
    if t == "jit":
        return api.jit(g)
    if t.startswith("grad") and t != "grad_aux":
        argnums = {"grad0": 0, "grad1": 1, "grad01": (0, 1)}[t]
        return api.grad(lambda x, s: _scalarise(ns, g(x, s)), argnums=argnums)
    if t == "grad_aux":
        def h(x, s):
            out = g(x, s)
            leaf = jax.tree_util.tree_leaves(out)[0]
            return _scalarise(ns, out), (leaf, jnp.sum(leaf > 0))
        return api.grad(h, has_aux=True)
    if t == "vag":
        return api.value_and_grad(lambda x, s: _scalarise(ns, g(x, s)), argnums=(0, 1))
    if t == "jvp":
        return lambda x, s: api.jvp(g, (x, s), (jnp.asarray(TX) * jnp.ones_like(x), TS * jnp.ones_like(s)))
    if t == "vjp":
        def h(x, s):
            out, pull = api.vjp(g, x, s)
            return out, pull(jax.tree_util.tree_map(lambda o: jnp.full_like(o, CT) if
                                                    np.issubdtype(np.dtype(o.dtype), np.inexact) else
                                                    np.zeros(o.shape, jax.dtypes.float0), out))
        return h
    if t == "vmap_x":
        return lambda x, s: api.vmap(g, in_axes=(0, None))(jnp.stack([x, x * 0.5 + 1.0, -x]), s)
    if t == "vmap_s":
        return lambda x, s: api.vmap(g, in_axes=(None, 0))(x, jnp.stack([s, s + 1.0, -s * 2.0]))
    if t == "vmap_xs":
        return lambda x, s: api.vmap(g, in_axes=(1, 0), out_axes=-1)(
            jnp.stack([x, x[::-1] - 0.5, x * 1.5], axis=1), jnp.stack([s, -s, s + 0.5]))
    if t == "jacfwd":
        return api.jacfwd(g)
    if t == "jacrev":
        return api.jacrev(g, argnums=(0, 1))
    if t == "linearize":
        def h(x, s):
            out, lin = api.linearize(g, x, s)
            return out, lin(jnp.asarray(TX) * jnp.ones_like(x), TS * jnp.ones_like(s))
        return h
    if t == "remat":
        return api.checkpoint(g)
    raise AssertionError(t)


def stacked(prog, stack, ns, unroll_loops=False):
    """``stack[0](stack[1](...(program)))``: the last transform applies first."""
    f = build(prog, ns, unroll_loops)
    for t in reversed(stack):
        f = apply_transform(t, f, ns)
    return f


def gen_case(c: Chooser, big: bool = True):
    """A program, a transform stack and inputs; small ones (two levels, two transforms) unless ``big``."""
    size = [c.integer(3, 14 if big else 6)]
    prog = gen_expr(c, c.integer(1, 3 if big else 2), size)
    stack = tuple(c.choice(TRANSFORMS) for _ in range(c.integer(0, 3 if big else 2)))
    seed = c.integer(0, 2**16)
    r = np.random.default_rng(seed)
    x = (r.standard_normal(N) * 1.5).astype(np.float32)
    s = np.float32(r.standard_normal() * 1.5)
    return prog, stack, x, s


# ----------------------------------------------------------------------------
# Checking

REVERSE_WHILE = "Reverse-mode differentiation does not work for lax.while_loop"
REVERSE_LIN = "linearized lax.while_loop's tangent function"
TOL = {np.dtype(np.float32): (2e-4, 2e-5), np.dtype(np.float64): (1e-9, 1e-11)}


def _dtype(a):
    return np.dtype(a.dtype)


def compare(got, want, what=""):
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert str(g_tree) == str(w_tree), f"{what}: ftrans returns {g_tree}, jax {w_tree}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        where = f"{what} leaf {i}"
        assert np.shape(g) == np.shape(w), f"{where}: shape {np.shape(g)} vs jax {np.shape(w)}"
        assert _dtype(g) == _dtype(w), f"{where}: dtype {_dtype(g)} vs jax {_dtype(w)}"
        # (a NumPy array handed back as given, as eager jax does for the identity, is not weakly typed)
        gw, ww = getattr(g, "weak_type", False), getattr(w, "weak_type", False)
        assert gw == ww, f"{where}: weak_type {gw} vs jax {ww}"
        if _dtype(w) == jax.dtypes.float0:
            continue
        a, b = np.asarray(g), np.asarray(w)
        if np.issubdtype(b.dtype, np.inexact):
            rtol, atol = TOL.get(b.dtype, (2e-3, 2e-3))
            # A result that loops and Jacobians built up scales with its largest entry.
            atol = atol * max(1.0, float(np.max(np.abs(b), initial=0.0)))
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)


def run_jax(prog, stack, x, s):
    """jax's result, or the exception it raises; reverse-mode through while falls back to unrolled loops."""
    # jax jitted: one compile instead of its eager op-by-op dispatch, which is what made cases slow
    try:
        return "ok", jax.jit(stacked(prog, stack, JX))(x, s)
    except ValueError as err:
        if REVERSE_WHILE not in str(err):
            return "err", err
    except Exception as err:  # noqa: BLE001 - the error type is what gets compared
        return "err", err
    return "unrolled", jax.jit(stacked(prog, stack, JX, unroll_loops=True))(x, s)


def check(prog, stack, x, s):
    kind, want = run_jax(prog, stack, x, s)
    what = f"{stack} {prog}"
    if kind == "err":
        try:
            stacked(prog, stack, FT)(x, s)
        except Exception as err:  # noqa: BLE001
            if isinstance(want, NotImplementedError) and "custom_lin" in str(want) and isinstance(err, TypeError):
                # linearize of a linearized custom_vjp: jax fails inside (no jvp rule for its custom_lin);
                # ftrans raises the TypeError of jvp of a custom_vjp, which is what is being asked for.
                return
            assert isinstance(err, type(want)), f"{what}: ftrans raises {type(err).__name__}: {err}; " \
                                                f"jax {type(want).__name__}: {want}"
            return
        raise AssertionError(f"{what}: jax raises {type(want).__name__}: {want}; ftrans does not")
    try:
        got = stacked(prog, stack, FT)(x, s)
    except Exception as err:  # noqa: BLE001
        if isinstance(err, ValueError) and kind == "unrolled" and REVERSE_LIN in str(err):
            return  # beyond ftrans's reverse mode of while (docs/differences.md); jax raises ValueError too
        # jax's jit can drop what its eager run raises on (the custom_lin of jvp of a custom_vjp function, say):
        # ftrans's eager run is compared with jax's eager run then.
        try:
            stacked(prog, stack, JX, unroll_loops=kind == "unrolled")(x, s)
        except Exception as jerr:  # noqa: BLE001
            if isinstance(err, type(jerr)):
                return
        raise
    compare(got, want, what)


@st.composite
def cases(draw):
    # the quick ``ci`` profile draws small cases (a few seconds in all); larger profiles the full range
    return gen_case(Chooser(draw=draw), big=settings.default.max_examples > 8)


@settings(max_examples=examples(3, slow=True))
@given(cases())
def test_fuzz_control_flow_under_transforms(case):
    check(*case)


# ----------------------------------------------------------------------------
# A driver that runs many random cases and groups the failures.

def _signature(err):
    msg = str(err).split("\n")[0]
    return f"{type(err).__name__}: {msg[:160]}"


def main(seed: int, count: int, per_case_s: int = 25):
    import signal
    import sys
    import traceback

    class Slow(BaseException):  # not an error jax or ftrans raised: no `except Exception` takes it
        pass

    def alarm(*_):
        raise Slow("case ran too long")

    signal.signal(signal.SIGALRM, alarm)
    rng = np.random.default_rng(seed)
    failures: dict = {}
    counts: dict = {}
    for n in range(count):
        case = gen_case(Chooser(rng=rng))
        signal.alarm(per_case_s)
        try:
            check(*case)
        except (Exception, Slow) as err:  # noqa: BLE001
            key = _signature(err)
            counts[key] = counts.get(key, 0) + 1
            if key not in failures:
                tb = traceback.format_exc().splitlines()[-12:]
                failures[key] = (case, tb)
                print(f"--- case {n}: {key}\n    case={case!r}", flush=True)
                print("    " + "\n    ".join(tb), flush=True)
        finally:
            signal.alarm(0)
        if n % 50 == 0:
            print(f"[{n}] distinct failures: {len(failures)} {sorted(counts.values())}", file=sys.stderr, flush=True)
    print(f"done {count}; distinct failures: {len(failures)}")
    for key, k in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{k:5d}  {key}")


if __name__ == "__main__":
    import sys

    main(int(sys.argv[1]), int(sys.argv[2]))


# ----------------------------------------------------------------------------
# Regressions: minimised programs the fuzzer found, each compared with jax.

XB = np.array([[1.0, 2.0, 0.5], [0.3, 0.1, -2.0], [-0.4, 0.9, 1.3]], np.float32)


def _fori_traced_bounds(ns, unrolled):
    """``fori_loop(lo, n, ...)`` with traced bounds whose body does not read its carry."""
    jnp = ns.np

    def f(x, s):
        n = jnp.clip(jnp.floor(jnp.abs(jnp.sum(x))), 0, 3).astype(np.int32)
        lo = jnp.minimum(n, 1)

        def body(i, v):
            return jnp.tanh(x + i.astype(np.float32))

        if unrolled:
            v = x * s
            for i in range(3):
                v = jnp.where((i >= lo) & (i < n), body(jnp.int32(i), v), v)
            return jnp.sum(v)
        return jnp.sum(ns.lax.fori_loop(lo, n, body, x * s))

    return f


def test_vmap_grad_of_while_whose_body_ignores_its_differentiated_carry():
    # The loop's carry is differentiated (its initial value reads s) but the body's new carry does not read
    # it: the known half of the split loop must still carry only the known carries (it returned one more).
    s = np.float32(0.5)
    want = jax.vmap(jax.grad(_fori_traced_bounds(JX, True), 1), (0, None))(XB, s)
    got = ftrans.vmap(ftrans.grad(_fori_traced_bounds(FT, False), 1), (0, None))(XB, s)
    compare(got, want)
    compare(ftrans.jit(ftrans.vmap(ftrans.grad(_fori_traced_bounds(FT, False), 1), (0, None)))(XB, s), want)
    want = jax.vmap(jax.linearize(jax.grad(_fori_traced_bounds(JX, True), 1), XB[0], s)[1], (0, None))(XB, s)
    got = ftrans.vmap(ftrans.linearize(ftrans.grad(_fori_traced_bounds(FT, False), 1), XB[0], s)[1],
                      (0, None))(XB, s)
    compare(got, want)


def _while_in_body(ns, unrolled):
    jnp = ns.np

    def f(x):
        def body(c):
            i, v = c
            return i + 1, jnp.tanh(x + v * 0.5)

        def cond(c):
            return (c[0] < 3) & (jnp.sum(c[1]) < 2.0)

        c = (jnp.int32(0), x)
        if unrolled:
            for _ in range(3):
                go = cond(c)
                c = jax.tree_util.tree_map(lambda a, b: jnp.where(go, a, b), body(c), c)
            return jnp.sum(c[1])
        return jnp.sum(ns.lax.while_loop(cond, body, c)[1])

    return f


def test_grad_of_checkpointed_while_loop():
    # The checkpoint's transpose splits its body by linearity again: the while_lin in it must stay whole
    # (with its backward loop), not be rebuilt as a plain call that cannot be transposed.
    x = XB[1]
    want = jax.grad(_while_in_body(JX, True))(x)
    for policy in (None, ftrans.checkpoint_policies.nothing_saveable, ftrans.checkpoint_policies.everything_saveable):
        f = ftrans.checkpoint(_while_in_body(FT, False), policy=policy)
        compare(ftrans.grad(f)(x), want, f"{policy}")
        compare(ftrans.jit(ftrans.grad(f))(x), want, f"jit {policy}")
    want = jax.value_and_grad(lambda x: jnp_vmap_sum(JX, x))(x)
    compare(ftrans.value_and_grad(lambda x: jnp_vmap_sum(FT, x))(x), want)


def jnp_vmap_sum(ns, x):
    f = _while_in_body(ns, ns is JX)
    g = f if ns is JX else ns.api.checkpoint(f)
    return ns.np.sum(ns.api.vmap(g)(ns.np.stack([x, -x, x * 0.5])))


def test_vmap_of_jvp_of_custom_vjp_raises_jaxs_type_error():
    # A forward-mode tangent of a custom_vjp function under vmap (vmap(jvp), jacfwd inside a cond or a
    # checkpoint) raises jax's TypeError, not NotImplementedError from custom_lin's missing batching rule.
    xb = XB[:2]

    def progs(ns):
        return [lambda x: ns.cv(x, x),
                ns.api.checkpoint(lambda x: ns.cv(x, x)),
                lambda x: ns.lax.cond(x.sum() > 0, lambda x: ns.cv(x, x), lambda x: x, x)]

    for f, g in zip(progs(JX), progs(FT)):
        for ns, h in ((JX, f), (FT, g)):
            with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
                ns.api.vmap(lambda x: ns.api.jvp(h, (x,), (x,)))(xb)
            with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
                ns.api.vmap(ns.api.jacfwd(h))(xb)
