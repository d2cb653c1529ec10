"""``array_garbage_collection_guard="log"``: an array freed by the garbage collector (part of, or reachable
only from, a reference cycle) is reported on the process's stderr, as JAX reports its arrays; an array
freed by reference counting, or any array without the option, is not. Differential: the same programs run
on jax and on ftrans, each in its own process (JAX writes its report from native code)."""
import functools
import os
import subprocess
import sys
import textwrap

import pytest

import ftrans

MESSAGE = "`jax.Array` was deleted by the Python garbage collector"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = [("log", "cycle"), ("log", "reachable_from_cycle"), ("log", "refcounted"), ("allow", "cycle")]
SEP = "=== ftrans-gc-guard-case {} ==="

# One process per library runs every case, each between two collections and after a marker line on
# stderr; the report (written synchronously by the collection, from native code in JAX) falls in its
# case's section. A process costs seconds of imports; the cases share it.
PROGRAM = textwrap.dedent('''
    import dataclasses, gc, sys
    import {lib} as lib
    import {lib}.numpy as np_mod

    @dataclasses.dataclass
    class A:
        a: object
        ref: object

    @dataclasses.dataclass
    class B:
        ref: object = None

    def cycle():
        a = np_mod.ones((2, 2)); b = np_mod.zeros((2, 2)); a.next = b; b.next = a

    def reachable_from_cycle():
        b = B(); a = A(a=np_mod.array([1, 2, 3]), ref=b); b.ref = a

    def refcounted():
        x = np_mod.arange(3)
        del x

    for i, (mode, case) in enumerate({cases!r}):
        gc.collect()
        sys.stderr.flush()
        print({sep!r}.format(i), file=sys.stderr, flush=True)
        ctx = lib.array_garbage_collection_guard(mode)
        with ctx:
            globals()[case]()
            gc.collect()
        sys.stderr.flush()
    print({sep!r}.format("end"), file=sys.stderr, flush=True)
''')


@functools.cache
def _stderr(lib):
    """Each case's share of ``lib``'s process's stderr, in CASES's order."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", PROGRAM.format(lib=lib, cases=CASES, sep=SEP)], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    starts = [err.index(SEP.format(i)) for i in range(len(CASES))] + [err.index(SEP.format("end"))]
    return [err[a:b] for a, b in zip(starts, starts[1:])]


@pytest.mark.parametrize("mode,case", CASES)
def test_reports_match_jax(mode, case):
    i = CASES.index((mode, case))
    want = _stderr("jax")[i]
    got = _stderr("ftrans")[i]
    assert (MESSAGE in got) == (MESSAGE in want) == (mode == "log" and case != "refcounted"), (want, got)


def test_guard_costs_nothing_when_off_and_update_sets_it():
    from ftrans.core.array import Array

    assert "__del__" not in Array.__dict__
    with ftrans.array_garbage_collection_guard("log"):
        assert "__del__" in Array.__dict__
    assert "__del__" not in Array.__dict__
    ftrans.config.update("jax_array_garbage_collection_guard", "log")
    try:
        assert "__del__" in Array.__dict__
    finally:
        ftrans.config.update("jax_array_garbage_collection_guard", "allow")
    assert "__del__" not in Array.__dict__
    with pytest.raises(ValueError, match="array_garbage_collection_guard"):
        ftrans.config.update("jax_array_garbage_collection_guard", "fatal")
