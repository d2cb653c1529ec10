"""Refs against JAX's, more: staged functions closing over refs are traced once, as JAX's (so their
Python side effects run once), key-array refs, checkpoint with closed-over no_grad_no_remat refs,
array (traced) indices; each scenario runs on ftrans and on JAX and the results must agree.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

LIBS = [(ftrans, fjnp), (jax, jjnp)]
IDS = ["ftrans", "jax"]

GLOBAL_REF = {}


def _agree(scenario):
    got, want = scenario(ftrans, fjnp), scenario(jax, jjnp)
    g, w = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    return got


@pytest.mark.parametrize("outer_jit", [False, True])
def test_jit_closing_over_refs_in_a_container_traces_once(outer_jit):
    def scenario(lib, jnp):
        traces = []
        consts = ([2.0], [lib.new_ref(1.0), lib.new_ref(3.0)])

        @lib.jit
        def inner(x):
            traces.append(1)
            a, b = consts[1]
            b[...] += a[...]
            return x * consts[0][0] + a[...] + b[...]

        run = lib.jit(lambda x: inner(x)) if outer_jit else inner
        y = run(1.0)
        return y, consts[1][1][...], float(len(traces))

    _agree(scenario)


@pytest.mark.parametrize("kind", ["scan", "while_loop", "cond", "fori_loop"])
@pytest.mark.parametrize("jit", [False, True])
def test_control_flow_bodies_closing_over_refs_trace_once(kind, jit):
    def scenario(lib, jnp):
        traces = []
        r, s = lib.new_ref(0.0), lib.new_ref(2.0)

        def run():
            if kind == "scan":
                def body(c, x):
                    traces.append(1)
                    r[...] += x * s[...]
                    return c + r[...], c
                return lib.lax.scan(body, 0.0, jnp.arange(3.0))
            if kind == "while_loop":
                def body(i):
                    traces.append(1)
                    r[...] += s[...]
                    return i + 1
                return lib.lax.while_loop(lambda i: i < 3, body, 0)
            if kind == "fori_loop":
                def body(i, c):
                    traces.append(1)
                    r[...] += s[...] * i
                    return c + r[...]
                return lib.lax.fori_loop(0, 3, body, 1.0)

            def t():
                traces.append(1)
                r[...] = s[...] + 1.0
                return r[...]

            def f():
                r[...] = -s[...]
                return s[...]
            return lib.lax.cond(True, t, f)

        out = (lib.jit(run) if jit else run)()
        return out, r[...], s[...], float(len(traces))

    _agree(scenario)


def test_globals_refs_are_threaded_from_the_first_trace():
    def scenario(lib, jnp):
        GLOBAL_REF["r"] = lib.new_ref(jnp.zeros(3))
        traces = []

        @lib.jit
        def f(x):
            traces.append(1)
            _global_bump(x)
            return x + 1

        out = f(jnp.ones(3))
        f(jnp.ones(3))
        return out, GLOBAL_REF["r"][...], float(len(traces))

    _agree(scenario)


def _global_bump(x):
    GLOBAL_REF["r"][...] += x


def test_a_closed_over_ref_passed_as_an_argument_too_still_raises():
    for lib, jnp in LIBS:
        x_ref = lib.new_ref(0.0)
        with pytest.raises(ValueError, match="closed over and passed as the argument y_ref"):
            lib.jit(lambda y_ref: x_ref[...] + y_ref[...])(x_ref)


def test_an_unused_closed_over_ref_may_also_be_passed():
    def scenario(lib, jnp):
        x_ref = lib.new_ref(1.0)
        holder = [x_ref]

        def g(y_ref):
            _ = holder
            y_ref[...] += 1.0

        lib.jit(g)(x_ref)
        return x_ref[...]

    _agree(scenario)


def test_freed_refs_in_a_closure_are_not_threaded():
    def scenario(lib, jnp):
        dead = lib.new_ref(1.0)
        lib.freeze(dead)
        live = lib.new_ref(2.0)
        refs = [dead, live]

        @lib.jit
        def f(x):
            refs[1][...] += x
            return x

        f(3.0)
        return live[...]

    _agree(scenario)


def test_refs_of_prng_keys():
    def scenario(lib, jnp):
        key = lib.new_ref(lib.random.key(0))
        key[...] = lib.random.fold_in(key[...], 1)  # eagerly

        @lib.jit
        def draw():
            key[...] = lib.random.fold_in(key[...], 2)
            return lib.random.normal(key[...], (3,))

        x = draw()
        ks = lib.new_ref(lib.random.split(lib.random.key(1), 3))
        ks[1] = lib.random.key(5)

        @lib.vmap
        def per_example(k_ref):
            k_ref[...] = lib.random.fold_in(k_ref[...], 7)

        per_example(ks)

        def body(c, _):
            key[...] = lib.random.split(key[...])[0]
            return c, None

        lib.lax.scan(body, 0, None, length=2)
        assert key.shape == () and str(key.dtype) == "key<fry>" and len(ks) == 3
        assert str(lib.typeof(key) if hasattr(lib, "typeof") else key.aval) == "Ref{key<fry>[]}"
        return x, lib.random.key_data(key[...]), lib.random.key_data(ks[...])

    _agree(scenario)


def test_a_key_ref_refuses_raw_data():
    for lib, jnp in LIBS:
        key = lib.new_ref(lib.random.key(0))
        with pytest.raises(ValueError):
            key[...] = jnp.zeros(2, "uint32")


def _new_ref(lib):
    if lib is jax:
        from jax._src import core

        return core.new_ref
    return lib.new_ref


@pytest.mark.parametrize("jit", [False, True])
def test_checkpoint_threads_closed_over_no_grad_no_remat_refs(jit):
    """A remat body writing a closed-over ``no_grad_no_remat`` ref: the forward pass writes it once, the
    recomputation (which runs the body's callbacks again) does not write it again, as JAX's."""
    from functools import partial

    def scenario(lib, jnp):
        calls = []
        x_ref = _new_ref(lib)(1.0, kind="no_grad_no_remat")

        @lib.remat
        @partial(lib.remat, policy=lambda *_, **__: False)
        @lib.remat
        def f(y):
            lib.debug.callback(lambda _: calls.append(1), y)
            out = y * x_ref[...]
            x_ref[...] += 1
            return jnp.sin(out)

        g = (lib.jit(lib.grad(f)) if jit else lib.grad(f))(2.0)
        y_ref = _new_ref(lib)(1.0, kind="no_grad_no_remat")

        def f2(y):
            out = y * y_ref[...]
            y_ref[...] += 1
            return out

        f2 = lib.remat(f2)
        g2 = lib.grad(lib.jit(f2) if jit else f2)(2.0)
        return g, x_ref[...], float(len(calls)), g2, y_ref[...]

    _agree(scenario)


def test_make_jaxpr_and_eval_shape_with_closed_over_refs():
    def scenario(lib, jnp):
        traces = []
        r, unused = lib.new_ref(jnp.zeros(3)), lib.new_ref(jnp.ones(2))
        hold = [r, unused]

        def f(x, a_ref):
            traces.append(1)
            a_ref[...] += x
            return hold[0][...] * 2

        a = lib.new_ref(jnp.zeros(3))
        j, shape = lib.make_jaxpr(f, return_shape=True)(1.0, a)
        n_traces = float(len(traces))
        shape2 = lib.eval_shape(f, 1.0, a)
        assert shape.shape == shape2.shape == (3,)
        kinds = sorted(type(e).__name__ for e in j.effects)
        assert kinds == ["ReadEffect", "ReadEffect", "WriteEffect"]
        return n_traces, a[...], r[...]

    _agree(scenario)


@pytest.mark.parametrize("jit", [False, True])
def test_array_indices_into_a_ref(jit):
    def scenario(lib, jnp):
        r = lib.new_ref(jnp.zeros(4))

        def f(i, x):
            r[i] = x
            r[jnp.array([0, 3])] += x
            return r[i]

        y = (lib.jit(f) if jit else f)(jnp.int32(1), 5.0)

        def loop(x):
            def body(c):
                r[c[0]] = c[1]
                return c[0] + 1, c[1] * 2
            return lib.lax.while_loop(lambda c: c[0] < 3, body, (0, x))

        out = (lib.jit(loop) if jit else loop)(1.0)
        return y, out, r[...]

    _agree(scenario)


def test_control_flow_traces_are_reused_once_refs_exist():
    """Refs existing somewhere in the process do not stop lax.while_loop/cond/scan from reusing the trace of
    the same functions (as JAX's); a body touching a ref (found on touch, through an attribute) still writes
    it on every call."""
    def scenario(lib, jnp):
        lib.new_ref(0.0)  # some ref exists
        calls = []

        def cond(x):
            calls.append(1)
            return x < 5

        def body(x):
            calls.append(1)
            return x + 2

        outs = [lib.lax.while_loop(cond, body, 0) for _ in range(3)]

        class Holder:
            pass

        h = Holder()
        h.r = lib.new_ref(0.0)

        def body2(c, x):
            h.r[...] += x
            return c, None

        for _ in range(2):
            lib.lax.scan(body2, 0.0, jnp.arange(3.0))
        return outs, float(len(calls)), h.r[...]

    _agree(scenario)
