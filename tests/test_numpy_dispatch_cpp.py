"""jit's NumPy-argument calls answered by jaxlib's C++ dispatcher (``JitWrapped._remember_cpp``).

After a first call with host NumPy arrays, later calls with arrays of the same
signature are transferred, run and wrapped by the runtime's dispatcher without
ftrans's general path. These tests check that such calls answer exactly as the
general path and jax do (values, dtypes, ftrans Array results, pytrees in and
out), that config switches (x64, disable_jit, debug_nans, the transfer guard,
clear_caches) still take effect, and that unusual host arrays (strided,
unaligned, read-only, float64, byte-swapped, masked) give the right values or
the same errors as before.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.lowering import compat
from ftrans.transforms import jit as jit_mod

needs_cpp = pytest.mark.skipif(compat.cpp_dispatcher("probe", lambda: None, lambda: None) is None,
                               reason="this jaxlib has no C++ jit dispatcher")


def _general_calls(monkeypatch) -> list:
    """Record each call that reaches the general path (``JitWrapped._call``)."""
    seen = []
    orig = jit_mod.JitWrapped._call

    def spy(self, args, kwargs):
        seen.append(len(args))
        return orig(self, args, kwargs)

    monkeypatch.setattr(jit_mod.JitWrapped, "_call", spy)
    return seen


def _same(got, want) -> None:
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(gl, wl):
        assert isinstance(g, ftrans.Array)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


@needs_cpp
def test_repeated_calls_match_jax_and_skip_the_general_path(monkeypatch):
    seen = _general_calls(monkeypatch)
    fun = lambda x, y: (x * y + 1.0, {"s": x.sum(), "i": (y > 0).astype(np.int32)})  # noqa: E731
    f = ftrans.jit(lambda x, y: (x * y + 1.0, {"s": fjnp.sum(x), "i": (y > 0).astype(np.int32)}))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = jax.jit(fun)(a, b)
    for _ in range(4):
        _same(f(a, b), want)
    assert len(seen) == 2  # the first call compiles, the second teaches the dispatcher; then none
    assert f.hits == 3 and f.misses == 1
    # Another signature and back: each learnt once, the first kept.
    c = np.ones((4,), np.float32)
    for _ in range(3):
        _same(f(c, c), jax.jit(fun)(c, c))
    _same(f(a, b), want)
    assert len(seen) == 3  # (the dispatcher exists: a new signature needs one general call)


@needs_cpp
def test_unused_argument_constants_and_single_output(monkeypatch):
    seen = _general_calls(monkeypatch)
    k = np.arange(3, dtype=np.float32)  # a constant of the program
    f = ftrans.jit(lambda x, unused, y: fjnp.sin(x) * k + y)
    x = np.full((3,), 0.5, np.float32)
    y = np.float32(2) * np.ones(3, np.float32)
    u = np.zeros((7,), np.int32)
    want = jax.jit(lambda x, unused, y: jax.numpy.sin(x) * k + y)(x, u, y)
    for _ in range(3):
        out = f(x, u, y)
        _same(out, want)
    assert len(seen) == 2
    assert type(out) is type(ftrans.jit(lambda v: v * 1)(ftrans.device_put(x)))
    assert not out.weak_type


@needs_cpp
def test_pytree_of_numpy_arrays(monkeypatch):
    seen = []  # calls that go past the fast keys (the tree keys sit inside the general path)
    orig = jit_mod.JitWrapped._remember_fast
    monkeypatch.setattr(jit_mod.JitWrapped, "_remember_fast", lambda self, *a: seen.append(1) or orig(self, *a))
    ws = [np.eye(3, dtype=np.float32) * (i + 1) for i in range(3)]
    x = np.arange(3, dtype=np.float32)

    def fun(ws, x):
        for w in ws:
            x = x @ w
        return {"y": x, "n": (x * x).sum()}

    f, want = ftrans.jit(fun), jax.jit(fun)(ws, x)
    for _ in range(3):
        _same(f(ws, x), want)
    assert len(seen) == 2
    assert all(type(v[0]).__name__ == "PjitFunction" for v in f._tree_fast.values())
    _same(f(ws[:2], x), jax.jit(fun)(ws[:2], x))  # another tree: its own signature


@needs_cpp
def test_unusual_host_arrays():
    f = ftrans.jit(lambda x, y: x * y + 1.0)
    jf = jax.jit(lambda x, y: x * y + 1.0)
    a = np.arange(4, dtype=np.float32)
    ones = np.ones(4, np.float32)
    for _ in range(3):
        f(a, ones)
    strided = np.arange(8, dtype=np.float32)[::2]
    unaligned = np.zeros(17, np.uint8)[1:].view(np.float32)
    unaligned[:] = [1, 2, 3, 4]
    readonly = a + 3
    readonly.setflags(write=False)
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    for x, y in [(strided, ones), (unaligned, ones), (readonly, ones), (a.astype(np.float64), ones),
                 (fortran, fortran.T.copy().T)]:
        for _ in range(2):
            _same(f(x, y), jf(x, y))
    with pytest.raises(ftrans.errors.FtransValueError, match="masked arrays"):
        f(np.ma.array(a, mask=[0, 1, 0, 0]), ones)
    with pytest.raises(ftrans.errors.FtransTypeError, match="not a valid JAX type"):
        f(a.astype(">f4"), ones)


@needs_cpp
def test_config_switches_still_apply():
    calls = []

    def fun(x, y):
        calls.append(1)
        return x / y

    f = ftrans.jit(fun)
    a = np.array([1.0, 0.0], np.float32)
    b = np.array([3.0, 0.0], np.float32)
    for _ in range(3):
        f(a, b)
    n = len(calls)
    with ftrans.disable_jit():
        f(a, b)
    assert len(calls) == n + 1
    with ftrans.debug_nans(True), pytest.raises(FloatingPointError):
        f(a, b)
    ftrans.clear_caches()
    np.testing.assert_array_equal(np.isnan(np.asarray(f(a, b))), [False, True])
    with ftrans.transfer_guard("disallow"), pytest.raises(ftrans.errors.JaxRuntimeError, match="host-to-device"):
        f(a, b)
    old = ftrans.config.enable_x64
    try:  # ftrans's x64 on while JAX's stays off: 64-bit arrays must not be narrowed
        ftrans.config.update("enable_x64", True)
        x = np.array([1.0 + 1e-12], np.float64)
        for _ in range(3):
            out = f(x, np.ones(1, np.float64))
            assert out.dtype == np.float64 and np.asarray(out)[0] == 1.0 + 1e-12
    finally:
        ftrans.config.update("enable_x64", old)
    out = f(np.array([1.0 + 1e-12]), np.ones(1))
    assert out.dtype == np.float32


@needs_cpp
def test_one_array_programs_come_back_bare_and_are_wrapped(monkeypatch):
    """The dispatcher's first one-array program returns the runtime array itself (``__call__`` wraps it);
    any other signature keeps an output structure. Both answer as the general path does."""
    seen = _general_calls(monkeypatch)
    f = ftrans.jit(lambda x, y: x * y + 1.0)
    jf = jax.jit(lambda x, y: x * y + 1.0)
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = f(a, b)  # the general path's answer (compiles)
    for _ in range(3):
        got = f(a, b)
        _same(got, jf(a, b))
        assert type(got) is type(want) and got._aval == want._aval and got._sig == want._sig
        assert got.weak_type is want.weak_type is False
    cpp, aux = f._fast[jit_mod._CPP_KEY]
    assert aux is not None and aux[0] == want._aval  # this signature is the bare one
    assert type(cpp(a, b)) is compat._xc.ArrayImpl
    for _ in range(3):  # a second one-array signature: wrapped by its output structure
        _same(f(c, c), jf(c, c))
        _same(f(a, b), jf(a, b))
    assert type(cpp(c, c)) is not compat._xc.ArrayImpl
    assert len(seen) == 3  # (compile + teach a, b; then c, c: the dispatcher already exists)
    # The outputs feed the device-argument fast path like any other result.
    g = ftrans.jit(lambda x: x * 2)
    out = f(a, b)
    np.testing.assert_array_equal(np.asarray(g(out)), (a * b + 1.0) * 2)
    np.testing.assert_array_equal(np.asarray(g(f(a, b))), (a * b + 1.0) * 2)
    assert g.hits == 1
    # A weakly typed output keeps its weak type; and one wrapped after the tables were cleared (the
    # dispatcher's description gone) is rebuilt from the runtime array with the same aval and signature.
    h = ftrans.jit(lambda x: 2.0 + 0 * x.sum().astype(int))
    want = h(a)
    assert want.weak_type
    for _ in range(3):
        got = h(a)
        assert got.weak_type == want.weak_type and got._aval == want._aval and got._sig == want._sig
    hcpp = h._fast[jit_mod._CPP_KEY][0]
    rebuilt = jit_mod._cpp_single_output(hcpp(a), hcpp, {})
    assert rebuilt._aval == want._aval and rebuilt._sig == want._sig and rebuilt.weak_type == want.weak_type
    assert float(rebuilt) == 2.0


@needs_cpp
def test_bare_output_chosen_once_across_threads():
    """Threads teaching one dispatcher several one-array signatures at once: each answer is right."""
    import threading

    f = ftrans.jit(lambda x: x * 3 - 1)
    shapes = [(n,) for n in range(1, 9)]
    errors = []

    def run(shape):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        try:
            for _ in range(6):
                out = f(x)
                assert out.shape == shape and out._aval.shape == shape and out._sig[0] == shape
                np.testing.assert_array_equal(np.asarray(out), x * 3 - 1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(s,)) for s in shapes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for s in shapes:  # and afterwards, one thread
        x = np.ones(s, np.float32)
        assert f(x).shape == s and np.asarray(f(x))[0] == 2


@needs_cpp
def test_pytree_of_numpy_arrays_to_one_array(monkeypatch):
    seen = []  # calls that go past the fast keys (the tree keys sit inside the general path)
    orig = jit_mod.JitWrapped._remember_fast
    monkeypatch.setattr(jit_mod.JitWrapped, "_remember_fast", lambda self, *a: seen.append(1) or orig(self, *a))
    f = ftrans.jit(lambda p, x: p["w"] @ x + p["b"])
    jf = jax.jit(lambda p, x: p["w"] @ x + p["b"])
    p = {"w": np.eye(3, dtype=np.float32) * 2, "b": np.arange(3, dtype=np.float32)}
    x = np.ones(3, np.float32)
    want = f(p, x)
    for _ in range(3):
        got = f(p, x)
        _same(got, jf(p, x))
        assert got._aval == want._aval and got._sig == want._sig
    assert len(seen) == 2
    assert f._fast[jit_mod._CPP_KEY][1] is not None  # the dispatcher's bare program


@needs_cpp
def test_one_and_three_arguments_take_the_fast_paths_and_keep_their_guards(monkeypatch):
    # ``__call__`` spells out one and two arguments (no comprehension); other counts keep the general loop.
    seen = _general_calls(monkeypatch)
    f1 = ftrans.jit(lambda x: x * 2.0)
    f3 = ftrans.jit(lambda x, y, z: x * y + z)
    j1, j3 = jax.jit(lambda x: x * 2.0), jax.jit(lambda x, y, z: x * y + z)
    a = np.arange(4, dtype=np.float32)
    b = np.linspace(-1, 1, 4, dtype=np.float32)
    for _ in range(3):
        f1(a), f3(a, b, a)
    seen.clear()
    for _ in range(3):
        _same(f1(a), j1(a))
        _same(f3(a, b, a), j3(a, b, a))
    assert seen == []
    # Byte-swapped and masked arrays never reach the dispatcher's learnt signature, whatever their position.
    with pytest.raises(ftrans.errors.FtransTypeError, match="not a valid JAX type"):
        f1(a.astype(">f4"))
    with pytest.raises(ftrans.errors.FtransValueError, match="masked arrays"):
        f1(np.ma.array(a, mask=[0, 1, 0, 0]))
    with pytest.raises(ftrans.errors.FtransTypeError, match="not a valid JAX type"):
        f3(a, b, a.astype(">f4"))
    with pytest.raises(ftrans.errors.FtransValueError, match="masked arrays"):
        f3(a, np.ma.array(b, mask=[0, 1, 0, 0]), a)
    # Device arguments: one, two and three take the Array key once learnt.
    f2 = ftrans.jit(lambda x, y: x - y)
    da, db = ftrans.device_put(a), ftrans.device_put(b)
    for _ in range(2):
        f1(da), f2(da, db), f3(da, db, da)
    seen.clear()
    hits = (f1.cache_info()["hits"], f2.cache_info()["hits"], f3.cache_info()["hits"])
    np.testing.assert_allclose(np.asarray(f1(da)), a * 2.0)
    np.testing.assert_allclose(np.asarray(f2(da, db)), a - b)
    np.testing.assert_allclose(np.asarray(f3(da, db, da)), a * b + a)
    assert seen == []
    assert (f1.cache_info()["hits"], f2.cache_info()["hits"], f3.cache_info()["hits"]) == tuple(h + 1 for h in hits)
