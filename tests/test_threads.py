"""Trace state is per thread: tracing in one thread never leaks into another."""

import threading

import numpy as np

import ftrans
import ftrans.numpy as jnp
from ftrans.core import trace
from ftrans.core.array import Array as CoreArray


def _work(seed: int, results: dict, errors: list) -> None:
    try:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((4, 3)).astype(np.float32)
        for i in range(30):
            if (i + seed) % 2:
                closed = ftrans.make_jaxpr(lambda a: jnp.tanh(a * 2.0 + 1.0).sum())(x)
                assert [e.primitive.name for e in closed.eqns] == ["mul", "add", "tanh", "reduce_sum"]
            else:
                out = jnp.tanh(jnp.asarray(x) * 2.0 + 1.0).sum()
                assert type(out) is CoreArray
                np.testing.assert_allclose(np.asarray(out), np.tanh(x * 2 + 1).sum(), rtol=1e-5)
        results[seed] = True
    except BaseException as e:  # reported by the main thread
        errors.append(e)


def test_tracing_and_eager_in_eight_threads():
    results: dict = {}
    errors: list = []
    threads = [threading.Thread(target=_work, args=(s, results, errors)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(results) == list(range(8))
    assert trace.active_anywhere == 0
    assert trace.state.eval_only


def test_trace_in_other_thread_does_not_capture_eager_ops_here():
    started = threading.Event()
    release = threading.Event()
    seen: list = []

    def f(a):
        started.set()
        release.wait(5)
        return a + 1

    t = threading.Thread(target=lambda: seen.append(ftrans.make_jaxpr(f)(np.ones(2, np.float32))))
    t.start()
    started.wait(5)
    # Another thread is mid-trace: an eager op here must still run eagerly.
    out = jnp.asarray([1.0, 2.0]) + jnp.asarray([3.0, 4.0])
    release.set()
    t.join()
    assert type(out) is CoreArray
    np.testing.assert_array_equal(np.asarray(out), [4.0, 6.0])
    assert len(seen[0].eqns) == 1
