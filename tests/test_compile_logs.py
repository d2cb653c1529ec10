"""``ftrans.log_compiles`` / the ``log_compiles`` option and ``explain_cache_misses``, next to JAX's."""

import logging
import os

import jax
import jax.numpy as jnp_jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp

THIS = os.path.abspath(__file__)


def _line_of(marker: str) -> int:
    src = open(THIS).read().splitlines()
    return next(i + 1 for i, s in enumerate(src) if marker in s and "_line_of" not in s)


def _warnings(caplog, prefix: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith(prefix)]


@pytest.fixture(autouse=True)
def _restore_options():
    yield
    ftrans.config.update("log_compiles", False)
    ftrans.config.update("explain_cache_misses", False)
    jax.config.update("jax_explain_cache_misses", False)


def test_log_compiles_context_names_function_types_and_line(caplog):
    def scaled(x):
        return x * 2

    f = ftrans.jit(scaled)
    caplog.set_level(logging.WARNING)
    with ftrans.log_compiles():
        f(jnp.ones(3))  # MARK-call
        f(jnp.ones(3))  # a cache hit: nothing logged
    msgs = _warnings(caplog, "ftrans")
    assert any(m.startswith("Finished tracing scaled for jit in ") for m in msgs)
    (compiling,) = [m for m in msgs if m.startswith("Compiling jit(scaled)")]
    assert "ShapedArray(float32[3])" in compiling
    assert f"{THIS}:{_line_of('MARK-call')}" in compiling  # the user's call
    assert f"defined at {THIS}:" in compiling
    assert any(m.startswith("Finished jaxpr to MLIR module conversion jit(scaled)") for m in msgs)
    assert sum(m.startswith("Finished XLA compilation of jit(scaled)") or "persistent compilation cache" in m
               for m in msgs) == 1
    # JAX logs the same steps under the same names
    caplog.clear()
    with jax.log_compiles():
        jax.jit(scaled)(jnp_jax.ones(3))
    jmsgs = _warnings(caplog, "jax")
    assert any(m.startswith("Compiling jit(scaled) with global shapes and types (ShapedArray(float32[3]),)")
               for m in jmsgs)
    assert any(m.startswith("Finished tracing scaled for jit in ") for m in jmsgs)
    assert compiling.startswith("Compiling jit(scaled) with global shapes and types (ShapedArray(float32[3]),)")


def test_log_compiles_option_and_default_level(caplog):
    def g(x):
        return x + 1

    caplog.set_level(logging.DEBUG, logger="ftrans.jit")
    ftrans.jit(g)(np.float32(1))
    assert not _warnings(caplog, "ftrans")  # off: DEBUG only, as JAX
    assert any(r.levelno == logging.DEBUG and r.getMessage().startswith("Compiling jit(g)") for r in caplog.records)
    caplog.clear()
    ftrans.config.update("jax_log_compiles", True)
    assert ftrans.config.log_compiles and ftrans.config.jax_log_compiles
    ftrans.jit(g)(np.int32(1))
    assert any(m.startswith("Compiling jit(g)") for m in _warnings(caplog, "ftrans"))


def _explained(caplog, run) -> list[str]:
    caplog.clear()
    run()
    return [m for m in _warnings(caplog, "ftrans") + _warnings(caplog, "jax") if "TRACING CACHE MISS" in m]


def test_explain_cache_misses_shapes_dtypes_like_jax(caplog):
    caplog.set_level(logging.WARNING)

    def f(x, n=1):
        return x * n

    reports = {}
    for name, J, np_ in (("jax", jax, jnp_jax), ("ftrans", ftrans, jnp)):
        J.config.update("jax_explain_cache_misses", True)
        g = J.jit(f, static_argnums=1)
        first = _explained(caplog, lambda: g(np_.ones(3), 1))
        shape = _explained(caplog, lambda: g(np_.ones(4), 1))
        dtype = _explained(caplog, lambda: g(np_.ones(4, np.int32), 1))
        hit = _explained(caplog, lambda: g(np_.ones(4, np.int32), 1))
        reports[name] = (first, shape, dtype, hit)
        J.config.update("jax_explain_cache_misses", False)
    for name in ("jax", "ftrans"):
        first, shape, dtype, hit = reports[name]
        assert len(first) == 1 and "never seen function" in first[0]
        assert "* at x, now f32[4] and before f32[3]" in shape[0]
        assert "* at x, now i32[4] and before f32[4]" in dtype[0] or "* at x, now i32[4] and before f32[3]" in dtype[0]
        assert hit == []
    assert f"{THIS}:" in reports["ftrans"][1][0]  # the user's line of the call that missed
    # ... named as JAX names it: file:line:column (function)
    assert reports["ftrans"][1][0].splitlines()[0] == reports["jax"][1][0].splitlines()[0]


def test_explain_cache_misses_static_weak_and_pytree(caplog):
    caplog.set_level(logging.WARNING)
    ftrans.config.update("explain_cache_misses", True)

    def f(x, n=1):
        return x * n

    g = ftrans.jit(f, static_argnums=1)
    g(jnp.ones(2), 1)
    (static,) = _explained(caplog, lambda: g(jnp.ones(2), 2))
    assert "static argument 'n' (position 1): now 2 and before 1" in static
    g(np.float32(1), 2)
    (weak,) = _explained(caplog, lambda: g(1.0, 2))
    assert "now f32[]{weak_type=True} and before f32[]" in weak and "weak type" in weak

    h = ftrans.jit(lambda d: d["a"] * 2)
    h({"a": 1.0})
    (tree,) = _explained(caplog, lambda: h({"a": 1.0, "b": 2.0}))
    assert "different input pytree" in tree and "'b'" in tree

    k = ftrans.jit(lambda params, x: params["w"] * x)
    k({"w": np.ones(2, np.float32)}, np.ones(2, np.float32))
    (named,) = _explained(caplog, lambda: k({"w": np.ones(3, np.float32)}, np.ones(3, np.float32)))
    assert "* at params['w'], now f32[3] and before f32[2]" in named
    assert "* at x, now f32[3] and before f32[2]" in named


def test_explain_off_by_default(caplog):
    caplog.set_level(logging.WARNING)
    g = ftrans.jit(lambda x: x)
    g(np.ones(2, np.float32))
    assert _explained(caplog, lambda: g(np.ones(3, np.float32))) == []


@pytest.mark.parametrize("first", ["grad", "trace", "lower", "call"])
def test_finished_tracing_logged_only_on_a_real_top_level_trace(caplog, first):
    """JAX logs "Finished tracing" when it really traces at top level (a call, trace(), lower()), not when a
    call compiles a trace it already has (e.g. the one grad staged); ftrans logs the same number of times."""
    def counts(lib, np_, prefix):
        def scaled(x):
            return (x * 2).sum()

        f = lib.jit(scaled)
        x = np_.ones(3)
        caplog.clear()
        caplog.set_level(logging.WARNING)
        with lib.log_compiles():
            if first == "grad":
                lib.grad(f)(x)
            elif first == "trace":
                f.trace(x)
            elif first == "lower":
                f.lower(x)
            else:
                f(x)
            before = sum(m.startswith("Finished tracing") for m in _warnings(caplog, prefix))
            f(x)
            f(x)
        after = sum(m.startswith("Finished tracing") for m in _warnings(caplog, prefix))
        return before, after

    want = counts(jax, jnp_jax, "jax")
    got = counts(ftrans, jnp, "ftrans")
    assert got == want
    assert want == ((0, 0) if first == "grad" else (1, 1))


def test_grad_of_jit_announces_each_compile_like_jax(caplog):
    """grad of a jitted function compiles its forward and backward programs: each gets a "Compiling jit(...)"
    line, as in JAX, and a second grad at the same types compiles (and announces) nothing."""
    def counts(lib, np_, prefix):
        @lib.jit
        def f(x):
            return np_.sin(x) * 3.0

        caplog.clear()
        caplog.set_level(logging.WARNING)
        with lib.log_compiles():
            lib.grad(f)(np.float32(2.0))
            first = sum(m.startswith("Compiling jit(") for m in _warnings(caplog, prefix))
            lib.grad(f)(np.float32(3.0))
        second = sum(m.startswith("Compiling jit(") for m in _warnings(caplog, prefix)) - first
        return first, second

    assert counts(ftrans, jnp, "ftrans") == counts(jax, jnp_jax, "jax") == (2, 0)
