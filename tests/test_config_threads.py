"""Config contexts (``ftrans.enable_x64(...)``, ``numpy_rank_promotion``, ``debug_nans``, ...) hold for the
calling thread only, as JAX's do; threads without one read the global value ``config.update`` set."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core import config as config_mod


def _two_threads(lib, ctx, inner, outer):
    """Thread A opens ``ctx`` and, while it is open, thread B (no context) runs ``outer``; then A runs
    ``inner`` inside its context. Returns (A's result, B's result, the main thread's ``outer`` after)."""
    opened, b_done = threading.Event(), threading.Event()
    out = {}

    def a():
        with ctx:
            opened.set()
            b_done.wait(30)
            out["a"] = inner()

    def b():
        opened.wait(30)
        try:
            out["b"] = outer()
        finally:
            b_done.set()

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    return out["a"], out["b"], outer()


def _libs():
    return [(jax, jjnp), (ftrans, jnp)]


def test_enable_x64_is_thread_local_as_in_jax():
    results = []
    for lib, np_ in _libs():
        f = lib.jit(lambda x, np_=np_: np_.arange(3) + x)

        def run(f=f, np_=np_):
            return str(f(1).dtype), str(np_.asarray(1.0).dtype), str(f(np.ones(3, np.int32)).dtype)

        run()  # compiled (and in the fast tiers) before the context opens
        results.append(_two_threads(lib, lib.enable_x64(True), run, run))
    assert results[1] == results[0]
    assert results[1][0][0] == "int64" and results[1][1][0] == "int32"


def test_enable_x64_off_in_a_thread_while_global_on():
    results = []
    for lib, np_ in _libs():
        lib.config.update("jax_enable_x64", True)
        try:
            f = lib.jit(lambda x, np_=np_: np_.arange(3) * x)

            def run(f=f, np_=np_):
                return str(f(2).dtype), str(np_.zeros(2).dtype)

            results.append(_two_threads(lib, lib.enable_x64(False), run, run))
        finally:
            lib.config.update("jax_enable_x64", False)
    assert results[1] == results[0]


def test_rank_promotion_raise_in_one_thread_only():
    results = []
    for lib, np_ in _libs():
        x, y = np.ones((2, 3), np.float32), np.ones(3, np.float32)
        f = lib.jit(lambda a, b, np_=np_: np_.add(a, b))

        def run(f=f, np_=np_, x=x, y=y):
            got = []
            for g in (lambda: np_.add(x, y), lambda: f(x, y)):
                try:
                    got.append(np.asarray(g()).shape)
                except ValueError:
                    got.append("raised")
            return tuple(got)

        results.append(_two_threads(lib, lib.numpy_rank_promotion("raise"), run, run))
    assert results[1] == results[0]
    assert results[1][0] == ("raised", "raised") and results[1][1] == ((2, 3), (2, 3))


def test_debug_nans_in_one_thread_only():
    results = []
    for lib, np_ in _libs():
        f = lib.jit(lambda x, np_=np_: np_.log(x))

        def run(f=f, np_=np_):
            got = []
            for g in (lambda: np_.log(np_.asarray(-1.0)), lambda: f(-1.0)):
                try:
                    got.append(bool(np.isnan(np.asarray(g()))))
                except FloatingPointError:
                    got.append("raised")
            return tuple(got)

        results.append(_two_threads(lib, lib.debug_nans(True), run, run))
    assert results[1] == results[0]
    assert results[1][0] == ("raised", "raised") and results[1][1] == (True, True)


def test_dtype_promotion_strict_in_one_thread_only():
    results = []
    for lib, np_ in _libs():
        def run(np_=np_):
            try:
                return str((np_.ones(2, np_.int32) + np_.ones(2, np_.float32)).dtype)
            except Exception as e:  # noqa: BLE001 -- each library's promotion error
                return "raised" if "promot" in str(e).lower() else repr(e)

        results.append(_two_threads(lib, lib.numpy_dtype_promotion("strict"), run, run))
    assert results[1] == results[0]
    assert results[1] == ("raised", "float32", "float32")


def test_disable_jit_in_one_thread_only():
    results = []
    for lib, _ in _libs():
        runs = []

        def g(x, runs=runs):
            runs.append(1)  # once per trace, or once per call without jit
            return x * 2

        f = lib.jit(g)
        f(1.0)

        def run(f=f, runs=runs):
            before = len(runs)
            f(1.0)
            f(1.0)
            return len(runs) - before

        results.append(_two_threads(lib, lib.disable_jit(True), run, run))
    assert results[1] == results[0] == (2, 0, 0)


def test_update_inside_a_context_sets_the_global_value():
    """``config.update`` inside a context changes the global value; the context still shadows it in
    its thread, and the thread's previous value returns when it closes (as in JAX)."""
    results = []
    for lib, _ in _libs():
        got = []
        with lib.enable_x64(True):
            lib.config.update("jax_enable_x64", False)
            got.append(bool(lib.config.jax_enable_x64))
        got.append(bool(lib.config.jax_enable_x64))
        results.append(got)
    assert results[1] == results[0] == [True, False]


def test_contexts_nest_and_leave_no_property_behind():
    with ftrans.enable_x64(True):
        with ftrans.enable_x64(False):
            assert ftrans.config.enable_x64 is False
        assert ftrans.config.enable_x64 is True
    assert ftrans.config.enable_x64 is False
    assert not config_mod.scoped_anywhere()
    assert "enable_x64" not in vars(config_mod.Config)  # the no-context read is a plain attribute again


def test_a_context_checks_its_value():
    with pytest.raises(ValueError, match="numpy_rank_promotion"):
        with ftrans.numpy_rank_promotion("sometimes"):
            pass
    assert not config_mod.scoped_anywhere()


def test_matmul_precision_context_keys_the_cache_as_in_jax():
    x = np.ones((2, 2), np.float32)
    counts = []
    for lib, np_ in _libs():
        n = [0]

        @lib.jit
        def f(a, n=n, np_=np_):
            n[0] += 1
            return np_.dot(a, a)

        f(x)
        with lib.default_matmul_precision("float32"):
            f(x)
        f(x)
        with lib.default_matmul_precision("float32"):
            f(x)
        counts.append(n[0])
    assert counts[1] == counts[0] == 2


def test_a_context_that_changes_no_trace_reuses_the_compiled_program():
    n = [0]

    @ftrans.jit
    def f(a):
        n[0] += 1
        return a + 1

    f(1.0)
    with ftrans.no_tracing():
        assert float(f(1.0)) == 2.0
    assert n[0] == 1


def test_concurrent_x64_and_x32_contexts_as_in_jax():
    """Two pool threads open opposite contexts at once; each sees its own (JAX's x64_context_test)."""
    import concurrent.futures
    import time

    got = []
    for lib, np_ in _libs():
        def run(on, lib=lib, np_=np_):
            with lib.enable_x64(on):
                time.sleep(0.05)
                return str(np_.array(np.int64(0)).dtype)

        with concurrent.futures.ThreadPoolExecutor() as ex:
            x32, x64 = ex.submit(run, False), ex.submit(run, True)
            got.append((x64.result(), x32.result()))
    assert got[1] == got[0] == ("int64", "int32")
