"""Background compilation: first calls answered by the host interpreter while XLA compiles in a thread.

Each program is run with the background compile held back (``gate``), so the
first calls are certainly answered on the host; then the compile is let go
and the later calls must come from the executable. Both answers must agree
with jax (the oracle) to float tolerance, in dtype, shape and weak type.
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core.array import Array, DeviceArray
from ftrans.transforms import jit as J


@pytest.fixture
def gate(monkeypatch):
    """Hold every background compile until the test sets the returned event."""
    go = threading.Event()
    real = J.JitWrapped._entry_for

    def held(self, *args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            assert go.wait(60), "the test never let the background compile go"
        return real(self, *args, **kwargs)

    monkeypatch.setattr(J.JitWrapped, "_entry_for", held)
    yield go
    go.set()


def _wait_compiled(f, timeout: float = 60.0) -> None:
    store = f._store
    for job in list(store.background.values()):
        assert job.ready.wait(timeout)
    assert all(job.error is not None for job in store.background.values())  # only failed ones stay


def _assert_like(got, want, rtol=2e-5, atol=2e-5):
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(gl, wl):
        assert isinstance(g, Array)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.weak_type == w.aval.weak_type
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- the suite's programs, written once for both
def _programs(lib, np_, lax_):
    rng = np.random.default_rng(0)

    def dense(sizes):
        return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32), np.zeros(n, np.float32))
                for m, n in zip(sizes[:-1], sizes[1:])]

    def mlp(params, x):
        for w, b in params[:-1]:
            x = np_.maximum(x @ w + b, 0.0)
        w, b = params[-1]
        return x @ w + b

    def xent(params, x, y):
        logits = mlp(params, x)
        m = np_.max(logits, axis=-1, keepdims=True)
        logz = np_.log(np_.sum(np_.exp(logits - m), axis=-1, keepdims=True)) + m
        return -np_.mean(np_.sum(y * (logits - logz), axis=-1))

    def mlp_step(params, x, y):
        value, grads = lib.value_and_grad(xent)(params, x, y)
        return lib.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    def rnn_loss(params, xs):
        wx, wh, b = params

        def cell(h, x):
            h = np_.tanh(x @ wx + h @ wh + b)
            return h, np_.sum(h * h)

        _, ys = lax_.scan(cell, np_.zeros((4, 16), np_.float32), xs)
        return np_.sum(ys)

    def while_prog(x, n):
        def body(c):
            i, v = c
            return i + 1, v * 0.5 + np_.sin(v)

        return lax_.while_loop(lambda c: c[0] < n, body, (0, x))[1]

    def cond_prog(x):
        return lax_.cond(np_.sum(x) > 0, lambda v: np_.cos(v) * 2.0, lambda v: v - 1.0, x)

    def per_example(params, x, y):
        def one(params, x, y):
            return xent(params, x[None], y[None])

        return lib.vmap(lib.grad(one), in_axes=(None, 0, 0))(params, x, y)

    x8 = rng.standard_normal((8, 12)).astype(np.float32)
    y8 = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 8)]
    xs = rng.standard_normal((6, 4, 8)).astype(np.float32)
    rnn = ((rng.standard_normal((8, 16)) / 3).astype(np.float32), (rng.standard_normal((16, 16)) / 4).astype(np.float32),
           np.zeros(16, np.float32))
    v = rng.standard_normal(7).astype(np.float32)
    return {
        "mlp_step": (mlp_step, (dense((12, 16, 5)), x8, y8)),
        "rnn_scan_grad": (lib.grad(rnn_loss), (rnn, xs)),
        "while_loop": (while_prog, (v, np.int32(9))),
        "cond_true": (cond_prog, (np.abs(v),)),
        "cond_false": (cond_prog, (-np.abs(v),)),
        "per_example_grads": (per_example, (dense((12, 6, 5)), x8, y8)),
    }


PROGRAMS = list(_programs(ftrans, jnp, lax))


@pytest.mark.parametrize("name", PROGRAMS)
def test_host_answers_then_the_executable_and_both_match_jax(gate, name):
    fn, args = _programs(ftrans, jnp, lax)[name]
    jfn, jargs = _programs(jax, jjnp, jax.lax)[name]
    want = jax.jit(jfn)(*jargs)
    f = ftrans.jit(fn, background_compilation=True)
    before = J.stats["host_calls"]
    first = f(*args)
    second = f(*args)
    assert J.stats["host_calls"] == before + 2  # both answered by the host interpreter
    assert all(type(x) is Array for x in jax.tree_util.tree_leaves(first))  # host Arrays, not device ones
    assert f.cache_info()["misses"] == 1  # traced once: the second call reused the traced program
    gate.set()
    _wait_compiled(f)
    third = f(*args)
    assert J.stats["host_calls"] == before + 2
    assert all(type(x) is DeviceArray for x in jax.tree_util.tree_leaves(third))
    for got in (first, second, third):
        _assert_like(got, want)


def test_nested_jit_is_interpreted_not_compiled(gate):
    inner = ftrans.jit(lambda a: jnp.tanh(a) * 3.0)
    f = ftrans.jit(lambda a: inner(a) + 1.0, background_compilation=True)
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    from ftrans.lowering import executable as X

    compiles = X.stats["compiles"]
    got = f(x)
    assert X.stats["compiles"] == compiles  # the inner jit_call ran on the host too
    np.testing.assert_allclose(np.asarray(got), np.tanh(x) * 3.0 + 1.0, rtol=1e-6)


def test_weak_types_and_x64_conversion_of_arguments(gate):
    f = ftrans.jit(lambda a, s: a * s, background_compilation=True)
    g = jax.jit(lambda a, s: a * s)
    x64 = np.arange(4.0)  # float64: float32 without x64, as the compiled program sees it
    _assert_like(f(x64, 2.0), g(x64, 2.0))
    _assert_like(f(2.0, 3.0), g(2.0, 3.0))  # two weak scalars: a weak result


# ---------------------------------------------------------------- where it never applies
def _no_host_call(f, *args):
    before = J.stats["host_calls"]
    out = f(*args)
    assert J.stats["host_calls"] == before
    assert type(out) is DeviceArray
    return out


def test_off_by_default_and_the_option_overrides_the_config():
    x = np.ones(3, np.float32)
    assert ftrans.config.background_compilation is False
    _no_host_call(ftrans.jit(lambda a: a + 1), x)
    old = ftrans.config.background_compilation
    ftrans.config.update("background_compilation", True)
    try:
        _no_host_call(ftrans.jit(lambda a: a + 2, background_compilation=False), x)
    finally:
        ftrans.config.update("background_compilation", old)


def test_config_turns_it_on(gate):
    old = ftrans.config.background_compilation
    ftrans.config.update("background_compilation", True)
    try:
        before = J.stats["host_calls"]
        out = ftrans.jit(lambda a: a * 5)(np.ones(3, np.float32))
        assert J.stats["host_calls"] == before + 1 and type(out) is Array
    finally:
        ftrans.config.update("background_compilation", old)


def test_never_with_determinism_donation_debug_checks_or_accelerator_arrays():
    x = np.ones(3, np.float32)
    ftrans.config.update("deterministic", True)
    try:
        _no_host_call(ftrans.jit(lambda a: a * 2, background_compilation=True), x)
    finally:
        ftrans.config.update("deterministic", False)
    donating = ftrans.jit(lambda a: a * 3, background_compilation=True, donate_argnums=0)
    before = J.stats["host_calls"]
    donating(ftrans.device_put(x))
    assert J.stats["host_calls"] == before
    ftrans.config.update("debug_nans", True)
    try:
        _no_host_call(ftrans.jit(lambda a: a * 4, background_compilation=True), x)
    finally:
        ftrans.config.update("debug_nans", False)
    f = ftrans.jit(lambda a: a * 6, background_compilation=True)
    d = ftrans.device_put(x)
    # a CPU-resident array may be read on the host; one on a GPU (the default device there) may not
    assert f._background_applies([d, x]) == (d.device.platform == "cpu")


def test_never_with_arrays_on_an_accelerator(monkeypatch):
    f = ftrans.jit(lambda a: a * 6, background_compilation=True)
    d = ftrans.device_put(np.ones(3, np.float32))

    class Accelerator:
        platform = "gpu"

    monkeypatch.setattr(DeviceArray, "device", property(lambda self: Accelerator()))
    assert not f._background_applies([d])
    assert not f._background_applies([np.ones(3, np.float32), d])


def test_under_a_transform_the_body_is_staged(gate):
    f = ftrans.jit(lambda a: jnp.sin(a) * 2.0, background_compilation=True)
    closed = ftrans.make_jaxpr(f)(np.ones(3, np.float32))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["jit_call"]
    g = ftrans.grad(lambda a: jnp.sum(f(a)))(np.ones(3, np.float32))
    np.testing.assert_allclose(np.asarray(g), 2.0 * np.cos(np.ones(3)), rtol=1e-6)


def test_bad_option_is_a_type_error():
    with pytest.raises(TypeError, match="background_compilation"):
        ftrans.jit(lambda a: a, background_compilation="yes")


# ---------------------------------------------------------------- failures fall back to the ordinary path
def test_a_failed_background_compile_is_reported_by_the_next_call(monkeypatch):
    calls = []
    answered = threading.Event()

    def broken(self, *args, **kwargs):
        in_thread = threading.current_thread() is not threading.main_thread()
        calls.append(not in_thread)
        if in_thread:
            assert answered.wait(60)
        raise RuntimeError("XLA said no")

    monkeypatch.setattr(J.JitWrapped, "_entry_for", broken)
    f = ftrans.jit(lambda a: a - 1, background_compilation=True)
    x = np.ones(2, np.float32)
    first = f(x)  # the host answers; the compile fails in its thread
    answered.set()
    assert type(first) is Array
    np.testing.assert_array_equal(np.asarray(first), x - 1)
    _wait_compiled(f)
    with pytest.raises(RuntimeError, match="XLA said no"):
        f(x)  # the foreground compile reports it
    assert calls == [False, True]


def test_a_program_the_host_cannot_run_waits_for_the_executable(gate, monkeypatch):
    def cannot(*args):
        raise NotImplementedError("no host rule")

    monkeypatch.setattr(J, "_host_evaluate", cannot)
    f = ftrans.jit(lambda a: a * 7, background_compilation=True)
    threading.Timer(0.05, gate.set).start()
    out = f(np.ones(2, np.float32))
    assert type(out) is DeviceArray
    np.testing.assert_array_equal(np.asarray(out), np.full(2, 7.0, np.float32))


def test_threads_share_one_background_compile(gate):
    f = ftrans.jit(lambda a: jnp.exp(a) - 1.0, background_compilation=True)
    x = np.linspace(0, 1, 6, dtype=np.float32)
    results, errors = [], []

    def worker():
        try:
            results.append(np.asarray(f(x)))
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert f.cache_info()["misses"] == 1
    for r in results:
        np.testing.assert_allclose(r, np.expm1(x), rtol=1e-6, atol=1e-7)
    gate.set()
    _wait_compiled(f)
    assert f.cache_info()["size"] == 1


def test_host_blas_leaves_a_core_to_the_compile_and_is_restored(gate, monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import os

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    if not before:
        pytest.skip("no BLAS threadpoolctl can see")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    want = max(1, (cpus or 1) - 1)
    seen = []
    real = J._host_evaluate

    def spy(*args):
        seen.append(blas_threads())
        return real(*args)

    monkeypatch.setattr(J, "_host_evaluate", spy)
    f = ftrans.jit(lambda a, b: jnp.tanh(a @ b), background_compilation=True)
    a = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    got = f(a, a)
    np.testing.assert_allclose(np.asarray(got), np.tanh(a @ a), rtol=2e-5, atol=2e-5)
    assert seen and all(n <= max(want, b) and (b <= want or n == want) for n, b in zip(seen[0], before))
    assert blas_threads() == before  # restored once the host answer is out
    gate.set()
    _wait_compiled(f)
    assert blas_threads() == before
