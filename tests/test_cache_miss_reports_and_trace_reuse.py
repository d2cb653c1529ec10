"""What api_test.py checks of ``explain_cache_misses``' reports, of the reuse of control-flow traces (and the
retraces a configuration change forces), next to JAX's."""

import logging
import re

import jax
import jax.numpy as jnp_jax
import pytest
from jax._src.lib import jaxlib_extension_version

import ftrans
import ftrans.numpy as jnp
from ftrans import lax


def _reports(caplog, fn) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fn()
    return [r.getMessage() for r in caplog.records if "TRACING CACHE MISS" in r.getMessage()]


LIBS = [("jax", jax, jnp_jax), ("ftrans", ftrans, jnp)]


@pytest.mark.parametrize("name,J,np_", LIBS, ids=["jax", "ftrans"])
def test_weak_type_miss_shows_both_flags_and_the_docs(caplog, name, J, np_):
    @J.jit
    def f(x, y):
        return np_.sin(x) + y

    y = np_.arange(4, dtype="float32")
    f(np_.float32(0.), y)
    with J.explain_cache_misses(True):
        (msg,) = _reports(caplog, lambda: f(0., y))
    assert "different input types" in msg
    assert "at x, now f32[]{weak_type=True} and before f32[]{weak_type=False}" in msg
    # (jax 0.12 moved its type-promotion page under 101/; ftrans links the page where it is now)
    assert re.search(r"https://docs\.jax\.dev/en/latest/(101/)?type_promotion\.html#weak-types", msg)
    assert name == "jax" or "latest/101/type_promotion.html" in msg


@pytest.mark.jax_default_precision
@pytest.mark.parametrize("name,J,np_", LIBS, ids=["jax", "ftrans"])
def test_tracing_context_miss_names_each_option(caplog, name, J, np_):
    @J.jit
    def f(x, y):
        return np_.sin(x) + y

    f(0., 1.)
    with J.explain_cache_misses(True):
        def call():
            with J.numpy_rank_promotion("warn"), J.default_matmul_precision("high"):
                f(0., 1.)
        msg = _reports(caplog, call)[0]
    assert "racing context" in msg
    if name == "ftrans" or jaxlib_extension_version >= 455:
        assert "now warn and before" in msg
        assert "now high and before" in msg
    if name == "ftrans":
        assert "* numpy_rank_promotion differs: now warn and before allow" in msg
        assert "* default_matmul_precision differs: now high and before None" in msg


@pytest.mark.parametrize("name,J,np_", LIBS, ids=["jax", "ftrans"])
def test_new_function_each_pass_of_a_loop_is_pointed_out(caplog, name, J, np_):
    with J.explain_cache_misses(True):
        def loop():
            for _ in range(2):
                J.jit(lambda x: 2 * x)(3)
        msgs = _reports(caplog, loop)
    assert len(msgs) == 2
    assert "never seen function" in msgs[0] and "another function defined on the same line" not in msgs[0]
    assert "another function defined on the same line" in msgs[1]


def _cond_trace_counts(J, np_, L) -> list[int]:
    n = 0

    def g(x):
        nonlocal n
        n += 1
        return np_.dot(x, x)

    def f(x):
        return L.cond(True, g, g, x)

    x = np_.zeros((2, 2))
    counts = []
    f(x)
    counts.append(n)  # both branches are g: traced once
    f(x)
    counts.append(n)  # the trace is reused
    with J.default_matmul_precision("tensorfloat32"):
        f(x)
        counts.append(n)  # a configuration context changes the program: traced again
        f(x)
        counts.append(n)
    f(x)
    counts.append(n)  # back to the first configuration: reused
    f(np_.zeros((3, 3)))
    counts.append(n)  # another operand type: traced again
    return counts


def test_cond_traces_a_branch_function_once_and_reuses_it_like_jax():
    assert _cond_trace_counts(ftrans, jnp, lax) == _cond_trace_counts(jax, jnp_jax, jax.lax) == [1, 1, 2, 2, 2, 3]


@pytest.mark.jax_default_precision
def test_matmul_precision_update_forces_retrace_of_jit_and_cond_like_jax():
    def counts(J, np_, L):
        out = []
        for kind in ("jit", "cond"):
            n = 0

            def g(x):
                nonlocal n
                n += 1
                return np_.dot(x, x)

            f = J.jit(g) if kind == "jit" else (lambda x: L.cond(True, g, g, x))
            x = np_.zeros((2, 2))
            try:
                f(x)
                f(x)
                out.append(n)
                with J.default_matmul_precision("tensorfloat32"):
                    f(x)
                    out.append(n)
                    J.config.update("jax_default_matmul_precision", "float32")
                    f(x)
                nt = n
                f(x)
                f(x)
                out.append(n - nt)
            finally:
                J.config.update("jax_default_matmul_precision", None)
        return out

    assert counts(ftrans, jnp, lax) == counts(jax, jnp_jax, jax.lax) == [1, 2, 1, 1, 2, 1]


def test_recursive_cond_still_becomes_a_loop_when_called_again():
    """A trace that met a recursive cond call holds placeholders of that call and is never reused: calling
    the recursive function again (same types) gives the right answer each time."""
    def fact(acc, n):
        return lax.cond(n <= 1, lambda: acc, lambda: fact(acc * n, n - 1))

    f = ftrans.jit(fact)
    for n, want in ((5, 120.), (4, 24.), (6, 720.)):
        assert float(f(1., n)) == want
        assert float(fact(jnp.float32(1.), jnp.int32(n))) == want


@pytest.mark.parametrize("name,J,np_", LIBS, ids=["jax", "ftrans"])
def test_user_context_values_key_the_jit_cache(name, J, np_):
    """api_test.py's test_user_trace_context_hooks, counted by the function itself."""
    my = J.make_user_context()
    n = 0

    @J.jit
    def f(x):
        nonlocal n
        n += 1
        return x * (my.value or 1)

    assert float(f(1.)) == 1.
    with my(2):
        assert float(f(1.)) == 2. and my.value == 2
    with my(3):
        f(1.)
        with my(4):
            assert float(f(1.)) == 4.
        assert my.value == 3
        f(1.)
    f(1.)
    assert n == 4 and my.value is None
    with my(2):
        f(1.)  # seen before
    assert n == 4
    # a cond body reading the context is traced again too
    m = 0

    def body(x):
        nonlocal m
        m += 1
        return x * (my.value or 1)

    def g(x):
        return J.lax.cond(True, body, body, x)

    g(np_.float32(1.))
    g(np_.float32(1.))
    with my(5):
        assert float(g(np_.float32(1.))) == 5.
    assert m == 2


@pytest.mark.parametrize("name,J", [("jax", jax), ("ftrans", ftrans)], ids=["jax", "ftrans"])
def test_user_context_global_value(name, J):
    my = J.make_user_context(7)
    assert my.get_global() == 7 and my.value == 7
    n = 0

    @J.jit
    def f(x):
        nonlocal n
        n += 1
        return x * my.value

    assert float(f(1.)) == 7.
    try:
        my.set_global(2)
        assert my.get_global() == 2 and my.value == 2
        assert float(f(1.)) == 2.  # traced again: the value is part of the key
        with my(3):
            assert my.value == 3 and my.get_global() == 2
    finally:
        my.set_global(7)
    assert n == 2
