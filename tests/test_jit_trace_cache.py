"""A jitted function is traced once per abstract signature, whoever asks: a call under grad/vmap/jvp,
a nested jit, make_jaxpr, trace/lower/eval_shape and the compiled call share the trace, as in JAX
(api_test.py test_grad_of_jit). Counted against jax with the same Python side effect."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


def _counting(lib):
    calls = []

    @lib.jit
    def h(x):
        calls.append(None)
        return x * x

    return h, calls


def _scenarios(lib, np_):
    return {
        "grad_twice": lambda h: (lib.grad(h)(1.0), lib.grad(h)(2.0)),
        "vmap_twice": lambda h: (lib.vmap(h)(np_.ones(3)), lib.vmap(h)(np_.ones(3))),
        "jvp_twice": lambda h: (lib.jvp(h, (1.0,), (1.0,)), lib.jvp(h, (2.0,), (1.0,))),
        "grad_then_jvp": lambda h: (lib.grad(h)(1.0), lib.jvp(h, (2.0,), (1.0,))),
        "nested_jit": lambda h: (lib.jit(lambda x: h(x) + 1)(1.0), lib.jit(lambda x: h(x) + 2)(1.0)),
        "make_jaxpr_then_grad": lambda h: (lib.make_jaxpr(h)(1.0), lib.grad(h)(3.0)),
        "eval_shape_then_call": lambda h: (h.eval_shape(1.0), h.lower(1.0), h(1.0), h(2.0)),
        "grad_of_vmap": lambda h: (lib.grad(lambda x: lib.vmap(h)(x).sum())(np_.ones(3)),
                                   lib.grad(lambda x: lib.vmap(h)(x).sum())(np_.ones(3))),
        "unnamed_axis_size_is_not_in_the_key": lambda h: (lib.vmap(h)(np_.ones(3)), lib.vmap(h)(np_.ones(4))),
        "named_axis_is_in_the_key": lambda h: (lib.vmap(h)(np_.ones(3)), lib.vmap(h, axis_name="i")(np_.ones(3)),
                                               lib.vmap(h, axis_name="i")(np_.ones(3)),
                                               lib.vmap(h, axis_name="k")(np_.ones(3))),
        "new_shape_traces_again": lambda h: (lib.vmap(h)(np_.ones(3)), lib.vmap(h)(np_.ones((3, 2)))),
    }


@pytest.mark.parametrize("name", sorted(_scenarios(jax, jjnp)))
def test_trace_count_matches_jax(name):
    h_j, calls_j = _counting(jax)
    _scenarios(jax, jjnp)[name](h_j)
    h_f, calls_f = _counting(ftrans)
    _scenarios(ftrans, jnp)[name](h_f)
    assert len(calls_f) == len(calls_j)


def test_grad_of_jit_traces_once_and_stays_right():
    h, calls = _counting(ftrans)
    for v in (1.0, 2.0, 3.0):
        assert float(ftrans.grad(h)(v)) == 2 * v
    assert len(calls) == 1


def test_closure_over_an_outer_tracer_traces_every_call():
    # The staged body captured a tracer of this grad call: reusing it in the next call would be an escaped
    # tracer (JAX raises UnexpectedTracerError there); ftrans traces again and gets the right answer.
    calls, box = [], [None]

    @ftrans.jit
    def f(x):
        calls.append(None)
        return x * box[0]

    def g(y):
        box[0] = y
        return f(y)

    assert float(ftrans.grad(g)(1.0)) == 2.0
    assert float(ftrans.grad(g)(3.0)) == 6.0
    assert len(calls) == 2


def test_clear_cache_and_pass_switches_trace_again():
    h, calls = _counting(ftrans)
    ftrans.grad(h)(1.0)
    h.clear_cache()
    ftrans.grad(h)(1.0)
    assert len(calls) == 2
    ftrans.clear_caches()
    ftrans.grad(h)(1.0)
    assert len(calls) == 3
    before = ftrans.config.disabled_passes
    try:
        ftrans.config.update("disabled_passes", ["dce"])
        ftrans.grad(h)(1.0)
        assert len(calls) == 4
    finally:
        ftrans.config.update("disabled_passes", before)


def test_axis_env_is_part_of_the_signature():
    @ftrans.jit
    def f(x):
        return x * ftrans.lax.psum(1, "i")

    a = ftrans.vmap(f, axis_name="i")(jnp.ones(3))
    b = ftrans.vmap(f, axis_name="i")(jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(a), 3 * np.ones(3))
    # Same argument signature inside the body (a scalar), another axis size: a trace of its own.
    c = ftrans.vmap(f, axis_name="i")(jnp.ones(5))
    np.testing.assert_array_equal(np.asarray(c), 5 * np.ones(5))


def test_registering_a_pass_traces_again():
    from ftrans.transforms.passes import pipeline

    class Noop(pipeline.Pass):
        name = "apiA_noop_for_trace_cache_test"

        def rewrite(self, jaxpr, ctx, *, top):
            return jaxpr

    h, calls = _counting(ftrans)
    h.trace(1.0)
    h.trace(1.0)
    assert len(calls) == 1
    pipeline.register_pass(Noop())
    try:
        h.trace(1.0)
        assert len(calls) == 2
    finally:
        pipeline._passes.pop(Noop.name, None)
