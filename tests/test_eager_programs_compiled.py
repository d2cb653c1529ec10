"""Replayed eager programs that are expensive on the host are compiled by XLA once they have cost enough
host time (``eager_programs.RENT_SECONDS``, the ski-rental rule): the switch, its results (jit's, bit for
bit; the host's to float tolerance; the same types), what is never compiled (cheap programs,
``config.deterministic``), and what happens when a compile fails."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
import ftrans.scipy.special as sp
from ftrans.core import eager_programs as ep
from ftrans.core.array import Array


@pytest.fixture
def cheap_rent(monkeypatch):
    """Compile as soon as the probe runs are done (no host time needs to be spent first)."""
    monkeypatch.setattr(ep, "RENT_SECONDS", 0.0)
    monkeypatch.setattr(ep, "MIN_HOST_SECONDS", 0.0)
    ep.clear()
    yield
    _join()
    ep.clear()


def _join() -> None:
    for t in threading.enumerate():
        if t.name == "ftrans-compile-eager-program":
            t.join(120)


def _program(fn):
    progs = [p for p in fn._replay_state.programs.values() if isinstance(p, ep._Program)]
    assert len(progs) == 1, progs
    return progs[0]


def _bits(a) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).tobytes()


def _started(fn) -> bool:
    progs = [p for p in fn._replay_state.programs.values() if isinstance(p, ep._Program)]
    return bool(progs) and all(p.compiled is not None or (p.rent is not None and p.rent.started) for p in progs)


def _call_until_compiled(f, *fns) -> None:
    """Call ``f`` until the programs of the replayed ``fns`` have started compiling (with the rent at zero: at
    their last probe run), and wait for the compiles: each executable is then ready before any compiled run,
    so the check that drops a compiled form slower than the host (a timing a loaded machine could tip) has not
    run yet."""
    for _ in range(2 + ep._PROBE_RUNS):  # (the first call of a signature runs op by op, the second builds)
        f()
        if all(_started(fn) for fn in fns):
            break
    _join()


X = np.linspace(0.3, 4.0, 16).astype(np.float32)


def test_an_expensive_program_switches_to_its_compiled_form(cheap_rent):
    x = jnp.asarray(X)
    host = sp.expi(x)
    _call_until_compiled(lambda: sp.expi(x), sp.expi)
    prog = _program(sp.expi)
    assert prog.compiled is not None
    got = sp.expi(x)
    assert type(got) is Array and got.dtype == np.float32 and got.shape == (16,) and got.weak_type == host.weak_type
    # jit's bits (both are XLA's), the host's to float tolerance
    assert _bits(got) == _bits(ftrans.jit(sp.expi)(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(host), rtol=2e-6)


def test_several_outputs_and_a_weak_input_keep_their_types(cheap_rent):
    x = jnp.asarray(X)
    half = jnp.asarray(np.float32(0.5))
    a = jnp.asarray(X[::-1].copy())
    want = sp.gammainc(a, x)
    w = sp.hyp1f1(a, a + 1.0, half * x)
    _call_until_compiled(lambda: (sp.gammainc(a, x), sp.hyp1f1(a, a + 1.0, half * x)), sp.gammainc, sp.hyp1f1)
    assert _program(sp.gammainc).compiled is not None and _program(sp.hyp1f1).compiled is not None
    got = sp.gammainc(a, x)
    assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(sp.hyp1f1(a, a + 1.0, half * x)), np.asarray(w), rtol=1e-5)


def test_a_weakly_typed_argument_enters_the_compiled_program_weak(cheap_rent):
    weak = Array._new(np.asarray(X), True)  # as a Python-scalar-derived value would be
    host = sp.expi(weak)
    _call_until_compiled(lambda: sp.expi(weak), sp.expi)
    assert _program(sp.expi).compiled is not None
    got = sp.expi(weak)
    assert got.weak_type == host.weak_type and got.dtype == host.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(host), rtol=2e-6)


def test_tuple_results_come_back_as_tuples(cheap_rent):
    x = jnp.asarray(X)
    host = sp.sici(x)
    _call_until_compiled(lambda: sp.sici(x), sp.sici)
    got = sp.sici(x)
    assert type(got) is type(host) and len(got) == len(host) == 2
    for g, h in zip(got, host):
        assert type(g) is Array and g.dtype == h.dtype and g.shape == h.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=2e-6, atol=1e-7)


def test_a_cheap_program_stays_on_the_host():
    ep.clear()
    x = jnp.asarray(X)
    for _ in range(50):
        jnp.var(x)
    prog = _program(jnp.var)
    assert prog.rent is None and prog.compiled is None  # judged cheap after the probe runs: never timed again


def test_a_program_called_rarely_never_compiles(monkeypatch):
    monkeypatch.setattr(ep, "RENT_SECONDS", 60.0)
    ep.clear()
    x = jnp.asarray(X)
    for _ in range(6):
        sp.expi(x)
    _join()
    prog = _program(sp.expi)
    assert prog.compiled is None and prog.rent is not None and not prog.rent.started
    ep.clear()


def test_deterministic_mode_never_switches(cheap_rent):
    x = jnp.asarray(X)
    want = _bits(sp.expi(x))
    _join()
    ftrans.config.update("deterministic", True)  # (a config change drops every program)
    try:
        before = ep.stats["compiled"]
        results = [_bits(sp.expi(x)) for _ in range(2 * ep._PROBE_RUNS)]
        _join()
        assert ep.stats["compiled"] == before
        assert _program(sp.expi).compiled is None
        assert all(r == want for r in results)  # the host's bits on every call
    finally:
        ftrans.config.update("deterministic", False)


def test_a_failed_compile_leaves_the_host_answering(cheap_rent, monkeypatch):
    from ftrans.transforms import jit as jit_mod

    def broken(self):
        raise RuntimeError("XLA could not compile this")

    monkeypatch.setattr(jit_mod.Lowered, "compile", broken)
    x = jnp.asarray(X)
    want = _bits(sp.expi(x))
    failures = ep.stats["compile_failures"]
    for _ in range(2 * ep._PROBE_RUNS):
        assert _bits(sp.expi(x)) == want
    _join()
    assert ep.stats["compile_failures"] == failures + 1  # tried once, not on every call
    assert _program(sp.expi).compiled is None
    assert _bits(sp.expi(x)) == want


def test_the_loop_functions_agree_with_jax_after_the_switch(cheap_rent):
    jax = pytest.importorskip("jax")
    import jax.scipy.special as jsp

    x = X
    cases = [("expi", (x,)), ("exp1", (x,)), ("gammainc", (x[::-1].copy(), x)), ("gammaincc", (x[::-1].copy(), x)),
             ("betainc", (x, x[::-1].copy(), x / 5)), ("hyp1f1", (x / 2, x, x / 3))]
    for name, args in cases:
        f = getattr(sp, name)
        fargs = [jnp.asarray(a) for a in args]
        _call_until_compiled(lambda f=f, fargs=fargs: f(*fargs), f)
        assert _program(f).compiled is not None, name
        want = np.asarray(getattr(jsp, name)(*[jax.numpy.asarray(a) for a in args]))
        np.testing.assert_allclose(np.asarray(f(*fargs)), want, rtol=2e-5, atol=1e-6, err_msg=name)


def test_a_compiled_form_slower_than_the_host_is_dropped(cheap_rent, monkeypatch):
    import time

    slow = ep._run_compiled

    def slower(prog, compiled, vals):  # as XLA's kernels are for some programs (ndtri on 16 elements)
        time.sleep(0.02)
        return slow(prog, compiled, vals)

    monkeypatch.setattr(ep, "_run_compiled", slower)
    x = jnp.asarray(X)
    host = _bits(sp.expi(x))
    _call_until_compiled(lambda: sp.expi(x), sp.expi)
    prog = _program(sp.expi)
    assert prog.compiled is not None
    dropped = ep.stats["compiled_slower"]
    for _ in range(ep._PROBE_RUNS):
        sp.expi(x)
    assert prog.compiled is None and prog.rent is None  # back on the host for good, not timed any more
    assert ep.stats["compiled_slower"] == dropped + 1
    assert _bits(sp.expi(x)) == host
