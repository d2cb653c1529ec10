"""``jit``'s caches behave like JAX's: shared per function, released with it, one compile per signature.

* Every ``jit(f)`` of the same function with the same options shares one cache
  (JAX keys its cache on the function and the options).
* The cache is keyed weakly on the function: when the function and its
  wrappers are gone, their compiled programs (ftrans ``Executable`` and the
  XLA program behind it) are freed; the shared XLA cache holds programs only
  while something uses them.
* Threads that make the same first call at once compile it once; different
  signatures compile in parallel; recursion through ``jit`` does not deadlock.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.lowering import executable as X
from ftrans.transforms import jit as J

X_IN = np.arange(4, dtype=np.float32)


def _compiles() -> int:
    """XLA programs built (compiled, or loaded from the disk cache when one is configured)."""
    return X.stats["compiles"] + X.stats["disk_hits"]


def _executables(f) -> list:
    return [e.exe for e in f._cache.values()]


# ---------------------------------------------------------------- one cache per function and options
@pytest.mark.parametrize("lib", ["jax", "ftrans"])
def test_two_jit_wrappers_of_one_function_trace_once(lib):
    m, np_ = (jax, jjnp) if lib == "jax" else (ftrans, jnp)
    traces = []

    def f(x):
        traces.append(1)
        return np_.sin(x) * 3.25 + 0.125

    compiles = _compiles()
    a = m.jit(f)(X_IN)
    b = m.jit(f)(X_IN)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert len(traces) == 1  # the second wrapper found the first one's executable
    if lib == "ftrans":
        assert _compiles() == compiles + 1


def test_shared_cache_matches_jax_cache_size():
    def f(x):
        return x * 1.5 - 0.75

    for m in (jax, ftrans):
        m.jit(f)(X_IN)
        m.jit(f)(X_IN[:2])
        assert m.jit(f)._cache_size() == 2
        m.jit(f).clear_cache()
        assert m.jit(f)._cache_size() == 0


def test_different_options_do_not_share():
    traces = []

    def f(x, n):
        traces.append(n)
        return x * n

    ftrans.jit(f, static_argnums=1)(X_IN, 2)
    ftrans.jit(f, static_argnums=1)(X_IN, 2)
    assert traces == [2]
    ftrans.jit(f, static_argnums=1, donate_argnums=0)(jnp.asarray(X_IN), 2)  # other options: its own cache
    assert traces == [2, 2]
    ftrans.jit(lambda x, n: f(x, n), static_argnums=1)(X_IN, 2)  # another function
    assert traces == [2, 2, 2]


def test_unhashable_or_unweakrefable_callables_still_jit():
    class Slotted:
        __slots__ = ()

        def __call__(self, x):
            return x + 1

    class Unhashable:
        __hash__ = None

        def __call__(self, x):
            return x * 2

    np.testing.assert_array_equal(np.asarray(ftrans.jit(Slotted())(X_IN)), X_IN + 1)
    np.testing.assert_array_equal(np.asarray(ftrans.jit(Unhashable())(X_IN)), X_IN * 2)


def test_bound_methods_share_like_jax():
    class M:
        def __init__(self):
            self.traces = 0

        def f(self, x):
            self.traces += 1
            return x * 2

    counts = {}
    for m in (jax, ftrans):
        obj = M()
        a, b = m.jit(obj.f), m.jit(obj.f)  # equal bound methods, both alive: one cache
        a(X_IN)
        b(X_IN)
        kept = obj.traces
        m.jit(obj.f)(X_IN)  # a new bound method whose wrapper dies at once: its cache goes with it
        m.jit(obj.f)(X_IN)
        counts[m.__name__] = (kept, obj.traces)
    assert counts["ftrans"] == counts["jax"]
    assert counts["ftrans"][0] == 1


def test_clear_caches_forces_a_new_trace():
    traces = []

    def f(x):
        traces.append(1)
        return x - 1

    ftrans.jit(f)(X_IN)
    ftrans.clear_caches()
    ftrans.jit(f)(X_IN)
    assert len(traces) == 2


# ---------------------------------------------------------------- released with the function
def _make(c: float):
    return ftrans.jit(lambda a: jnp.sin(a) * c + c)


def test_executables_of_dead_functions_are_freed():
    gc.collect()
    before = len(X._xla_cache)
    exes, xlas = [], []
    fs = []
    # Any strong reference (a bounded cache of recent programs included) keeps some of them alive, which
    # the assertions below see at any count; ten programs is as strict as more, at a compile each.
    for i in range(10):
        f = _make(float(i) + 0.5)  # distinct constants: distinct programs
        f(X_IN)
        (exe,) = _executables(f)
        exes.append(weakref.ref(exe))
        xlas.append(weakref.ref(exe._held))
        fs.append(f)
    assert len(X._xla_cache) >= before + 10
    del fs, f, exe
    gc.collect()
    assert sum(r() is not None for r in exes) == 0
    assert sum(r() is not None for r in xlas) == 0
    assert len(X._xla_cache) <= before


def test_executable_lives_while_the_function_lives():
    def f(x):
        return jnp.cos(x) * 0.375

    ftrans.jit(f)(X_IN)  # the wrapper is gone at once; f is not
    gc.collect()
    ref = weakref.ref(_executables(ftrans.jit(f))[0])
    gc.collect()
    assert ref() is not None
    assert ftrans.jit(f)._cache_size() == 1
    del f
    gc.collect()
    assert ref() is None


def test_same_program_from_two_functions_compiles_once_and_survives_either():
    def mk():
        def f(x):
            return x * 4.0625 + 1
        return f

    f1, f2 = mk(), mk()  # two function objects, one program

    compiles = _compiles()
    ftrans.jit(f1)(X_IN)
    ftrans.jit(f2)(X_IN)
    assert _compiles() == compiles + 1
    held = weakref.ref(_executables(ftrans.jit(f2))[0]._held)
    del f1
    gc.collect()
    assert held() is not None  # f2 still uses the shared XLA program
    del f2
    gc.collect()
    assert held() is None


def test_dead_closure_constants_are_released():
    class Big:
        pass

    big = np.ones(1000, np.float32)
    marker = Big()
    ref_marker = weakref.ref(marker)

    def make(keep):
        arr = jnp.asarray(big)

        def h(x):
            assert keep is not None  # h closes over keep (a Python object, never traced)
            return x + arr[:4]
        return ftrans.jit(h)

    f = make(marker)
    f(X_IN)
    del marker
    gc.collect()
    assert ref_marker() is not None
    del f
    gc.collect()
    assert ref_marker() is None


# ---------------------------------------------------------------- threads
def test_concurrent_first_calls_compile_once():
    traces = []
    barrier = threading.Barrier(8)

    def f(x):
        traces.append(threading.get_ident())
        time.sleep(0.2)  # a slow trace: every thread arrives while it runs
        return jnp.tanh(x) * 2.3125

    g = ftrans.jit(f)
    compiles = _compiles()
    results, errors = [], []

    def call():
        try:
            barrier.wait()
            results.append(np.asarray(g(X_IN)))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(results) == 8
    assert len(traces) == 1
    assert _compiles() == compiles + 1
    want = np.asarray(jax.jit(lambda x: jjnp.tanh(x) * 2.3125)(X_IN))
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-6)
    assert g.cache_info()["misses"] == 1


def test_different_signatures_compile_in_parallel():
    """No lock is held while compiling: a trace of one signature waits for a trace of another."""
    started = {2: threading.Event(), 3: threading.Event()}
    ok = []

    def f(x):
        n = x.shape[0]
        started[n].set()
        other = 3 if n == 2 else 2
        ok.append(started[other].wait(20))  # deadlocks (then times out) if compiles are serialised
        return x + 1

    g = ftrans.jit(f)
    threads = [threading.Thread(target=g, args=(np.zeros(n, np.float32),)) for n in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert ok == [True, True]
    assert g._cache_size() == 2


def test_failed_compile_lets_waiters_retry():
    calls = []
    barrier = threading.Barrier(3)

    def f(x):
        calls.append(1)
        time.sleep(0.1)
        raise ValueError("boom")

    g = ftrans.jit(f)
    errors = []

    def call():
        barrier.wait()
        try:
            g(X_IN)
        except ValueError as e:
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(errors) == 3  # each thread sees the error; nothing half-cached
    assert g._cache_size() == 0
    assert not g._store.pending


def test_recursive_jit_with_other_signatures_does_not_deadlock():
    @ftrans.jit
    def f(x):
        if x.shape[0] <= 1:
            return x * 2
        return jnp.concatenate([f(x[:1]), f(x[1:])])

    @jax.jit
    def fj(x):
        if x.shape[0] <= 1:
            return x * 2
        return jjnp.concatenate([fj(x[:1]), fj(x[1:])])

    np.testing.assert_array_equal(np.asarray(f(X_IN)), np.asarray(fj(X_IN)))

    def h(x, n):
        return x if n == 0 else hj(x, n - 1) + 1

    hj = ftrans.jit(h, static_argnums=1)
    np.testing.assert_array_equal(np.asarray(hj(X_IN, 3)), X_IN + 3)


def test_waits_that_would_close_a_cycle_compile_instead():
    me = threading.get_ident()
    ev = threading.Event()
    assert J._wait_for(me, ev) is False  # waiting for itself
    J._waits_for[12345] = me  # another thread already waits for this one
    try:
        assert J._wait_for(12345, ev) is False
    finally:
        del J._waits_for[12345]
    assert J._waits_for == {}


def test_config_change_resets_fast_keys_of_functions_without_live_wrappers():
    def f(x):
        return x * 2

    a = ftrans.device_put(np.arange(3, dtype=np.int32))
    ftrans.jit(f)(a)
    ftrans.jit(f)(a)  # registered under the fast key of f's shared store; the wrappers are gone
    gc.collect()
    assert ftrans.jit(f)._fast  # the store (and its fast key) outlives the wrappers
    old = ftrans.config.enable_x64
    try:
        ftrans.config.update("enable_x64", not old)
        assert not ftrans.jit(f)._fast
    finally:
        ftrans.config.update("enable_x64", old)


# ---------------------------------------------------------------- NumPy arguments: their own fast key
def _np_keys(f) -> list:
    return [k for k in f._fast if k and k[0] is J._NP_KEY]


def test_numpy_arguments_take_the_fast_key_and_match_jax():
    rng = np.random.default_rng(0)
    f = ftrans.jit(lambda a, b: a * b + 1.0)
    g = jax.jit(lambda a, b: a * b + 1.0)
    a, b = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    first = f(a, b)
    assert len(_np_keys(f)) == 1
    hits = f.hits
    for _ in range(3):
        a2, b2 = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
        got = f(a2, b2)  # new values every call: nothing cached but the program
        np.testing.assert_allclose(np.asarray(got), np.asarray(g(a2, b2)), rtol=1e-6, atol=1e-6)
        assert got.dtype == np.float32 and got.shape == (32, 64) and not got.weak_type
    assert f.hits == hits + 3
    np.testing.assert_allclose(np.asarray(first), a * b + 1.0, rtol=1e-6, atol=1e-6)


def test_numpy_fast_key_sees_mutation_between_calls():
    f = ftrans.jit(lambda a: a * 2)
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(f(a)), a * 2)
    np.testing.assert_array_equal(np.asarray(f(a)), a * 2)
    a[:] = 7.0
    np.testing.assert_array_equal(np.asarray(f(a)), np.full(6, 14.0, np.float32))


@pytest.mark.parametrize("shape", [(), (1,), (3, 0), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.uint8, np.complex64])
def test_numpy_fast_key_shapes_and_dtypes(shape, dtype):
    x = np.asarray(np.arange(int(np.prod(shape))).reshape(shape) % 3, dtype=dtype)
    assert type(x) is np.ndarray
    f = ftrans.jit(lambda a: a + a)
    g = jax.jit(lambda a: a + a)
    for _ in range(3):
        got, want = f(x), g(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert len(_np_keys(f)) == 1


def test_numpy_arrays_needing_conversion_keep_the_general_path():
    """float64 and int64 without x64: converted as before, never keyed."""
    f = ftrans.jit(lambda a: a * 3)
    g = jax.jit(lambda a: a * 3)
    for x in (np.arange(4.0), np.arange(4, dtype=np.int64)):
        for _ in range(2):
            got, want = f(x), g(x)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert _np_keys(f) == [] or ftrans.config.enable_x64


def test_numpy_fast_key_separates_signatures_and_mixed_arguments():
    f = ftrans.jit(lambda a, b: a - b)
    a32, b32 = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    ai, bi = np.ones(3, np.int32), np.arange(3, dtype=np.int32)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(f(a32, b32)), a32 - b32)
        np.testing.assert_array_equal(np.asarray(f(ai, bi)), ai - bi)
        r = f(a32, 2.0)  # a Python scalar: not all arrays, the general path (weak type kept)
        assert r.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(r), a32 - 2.0)
        r = f(a32, ftrans.device_put(b32))  # mixed with a device array
        np.testing.assert_array_equal(np.asarray(r), a32 - b32)
        r = f(a32[:2], b32[:2])  # another shape
        np.testing.assert_array_equal(np.asarray(r), a32[:2] - b32[:2])
    assert len(_np_keys(f)) == 3
    with pytest.raises(TypeError):
        f(a32, "x")


def test_numpy_fast_key_follows_x64():
    f = ftrans.jit(lambda a: a + 1)  # the literal 1 widens with x64 only through the weak type
    x = np.arange(3, dtype=np.int32)
    f(x)
    f(x)
    old = ftrans.config.enable_x64
    try:
        ftrans.config.update("enable_x64", not old)
        for _ in range(2):
            got = f(x)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(np.asarray(got), x + 1)
        assert all(k[1] == (not old) for k in _np_keys(f))
    finally:
        ftrans.config.update("enable_x64", old)


def test_numpy_fast_key_does_not_apply_with_static_or_donated_arguments():
    f = ftrans.jit(lambda a, n: a * n, static_argnums=1)
    x = np.arange(3, dtype=np.float32)
    for n in (2, 3, 2):
        np.testing.assert_array_equal(np.asarray(f(x, n)), x * n)
    assert _np_keys(f) == []


def test_disable_jit_overrides_the_numpy_fast_key():
    seen = []

    @ftrans.jit
    def f(x):
        seen.append(1)
        return x + 1

    x = np.ones(2, np.float32)
    for _ in range(3):
        f(x)
    assert len(seen) == 1 and _np_keys(f)
    with ftrans.disable_jit():
        np.testing.assert_array_equal(np.asarray(f(x)), x + 1)
    assert len(seen) == 2


# One call of compat.host_execute_fn per NumPy hit: every program shape it specialises must agree with jax.
_CONST = np.linspace(-1.0, 1.0, 6, dtype=np.float32)


@pytest.mark.parametrize("case", ["one", "two", "three", "unused", "none_used", "pytree_out", "const"])
def test_numpy_fast_key_program_shapes_match_jax(case):
    fns = {
        "one": (lambda a: jnp.sin(a), lambda a: jjnp.sin(a), 1),
        "two": (lambda a, b: a * b - 1.0, lambda a, b: a * b - 1.0, 2),
        "three": (lambda a, b, c: a * b + c, lambda a, b, c: a * b + c, 3),
        "unused": (lambda a, b, c: a - c, lambda a, b, c: a - c, 3),  # b pruned: not transferred
        "none_used": (lambda a, b: jnp.zeros(6) + 2.0, lambda a, b: jjnp.zeros(6) + 2.0, 2),
        "pytree_out": (lambda a, b: {"s": a + b, "p": (a * b, b)}, lambda a, b: {"s": a + b, "p": (a * b, b)}, 2),
        "const": (lambda a: a * jnp.asarray(_CONST) + 1.0, lambda a: a * jjnp.asarray(_CONST) + 1.0, 1),
    }
    ff, gf, n = fns[case]
    f, g = ftrans.jit(ff), jax.jit(gf)
    rng = np.random.default_rng(1)
    for i in range(3):
        args = [rng.standard_normal(6).astype(np.float32) for _ in range(n)]
        got, want = f(*args), g(*args)
        got_l, want_l = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        for x, y in zip(got_l, want_l):
            assert isinstance(x, ftrans.Array) and x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-6)
        if i == 0:
            hits = f.hits
    assert len(_np_keys(f)) == 1 and f.hits == hits + 2  # the second and third calls took the NumPy key


def _np_tree_keys(f) -> list:
    return [k for k in f._tree_fast if k and k[0] is J._NP_KEY]


def test_pytrees_of_numpy_arrays_take_their_own_fast_key():
    """A list of weights (the LSTM step of benchmarks/optimizer.py): one key of the tree and
    its leaves, no transfer for a leaf the program does not read, new values seen every call."""
    f = ftrans.jit(lambda ws, x: x @ ws[0] + ws[2][0])
    g = jax.jit(lambda ws, x: x @ ws[0] + ws[2][0])
    rng = np.random.default_rng(0)

    def args():
        return ([rng.standard_normal((3, 3)).astype(np.float32) for _ in range(4)],
                rng.standard_normal((2, 3)).astype(np.float32))

    f(*args())
    [key] = _np_tree_keys(f)
    _, puts = f._tree_fast[key]
    assert [p is None for p in puts] == [False, True, False, True, False]  # ws[1], ws[3] unread
    hits = f.hits
    for _ in range(3):
        a = args()
        np.testing.assert_allclose(np.asarray(f(*a)), np.asarray(g(*a)), rtol=1e-6, atol=1e-6)
    assert f.hits == hits + 3
    ws, x = args()
    ws[0][:] = 0.0  # mutation between calls is seen
    np.testing.assert_allclose(np.asarray(f(ws, x)), np.broadcast_to(ws[2][0], (2, 3)), rtol=1e-6)
    # another leaf dtype or shape, or a leaf that is not a NumPy array: another key or the general path
    ws, x = args()
    np.testing.assert_allclose(np.asarray(f(ws, x[:1])), np.asarray(g(ws, x[:1])), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f([ftrans.device_put(w) for w in ws], x)), np.asarray(g(ws, x)),
                               rtol=1e-6, atol=1e-6)
    assert len(_np_tree_keys(f)) == 2
    with pytest.raises(TypeError):
        f(ws[:3] + ["x"], x)


def test_differentiating_jitted_code_again_compiles_nothing_new():
    """``grad``/``vjp``/``jacrev`` of code calling ``jit`` (directly, or inside ``cond``/``scan``/``checkpoint``)
    called again with new values reuses its programs, as JAX does: the jvp, split and batched bodies of a call
    are the same objects each time, so their executables are found instead of being lowered again."""
    import io
    import logging

    from ftrans import lax

    inner = ftrans.jit(lambda x: jnp.tanh(x) * 2)

    def f(x):
        y, _ = lax.scan(lambda c, a: (c * a + 1.0, c), x[0], x)
        z = lax.cond(y > 0, lambda v: inner(v), lambda v: -v, x)
        return jnp.sum(ftrans.checkpoint(lambda v: jnp.sin(v) ** 2)(z)) + y

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logger = logging.getLogger("ftrans")
    logger.addHandler(handler)
    before = ftrans.config.read("log_compiles")
    ftrans.config.update("log_compiles", True)
    try:
        for name, g in {"grad": ftrans.grad(f), "vjp": lambda x: ftrans.vjp(f, x)[1](1.0),
                        "jacrev": ftrans.jacrev(f), "grad(jit)": ftrans.grad(ftrans.jit(f))}.items():
            counts = []
            for i in range(3):
                g(np.full(4, 0.1 * (i + 1), np.float32))
                counts.append(buf.getvalue().count("Finished XLA compilation"))
            assert counts[1] == counts[2] == counts[0], (name, counts)
    finally:
        ftrans.config.update("log_compiles", before)
        logger.removeHandler(handler)
