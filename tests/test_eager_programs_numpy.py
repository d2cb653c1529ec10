"""NumPy-array arguments to replayed library composites (``ftrans/core/eager_programs.py``).

A NumPy array passed to ``jnp.var`` is converted by the library as ``as_operand`` does (its canonical
dtype, strongly typed), so the program traced with a strongly typed input of that dtype computes what the
op-by-op call computes. These tests hold the replay to that, bit for bit, for every replayed function,
including float64 and int64 arrays (narrowed when x64 is off) and NumPy arrays mixed with ftrans arrays.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core import eager_programs as ep
from tests.test_eager_programs import (  # (the same data)
    _E,
    _M,
    _M3,
    _P,
    _X,
    _Y,
    REPLAYED,
    _direct,
    _same,
    check_patterns,
)


def _patterns() -> list[tuple[str, tuple]]:
    """(kind, arguments): patterns of one kind differ only in shapes or values; the quick run takes the first
    of each kind a function accepts."""
    x64 = _X.astype(np.float64) * (1 + 1e-12)  # (digits float32 drops: the narrowing is part of the test)
    return [("f", (_X,)), ("ff", (_X, _Y)), ("f", (_M,)), ("fi", (_X, _E)), ("i", (_E,)), ("f", (_P,)),
            ("ff", (_P, _P)), ("ff", (_M, _M)), ("f", (_M3,)), ("f,int", (_M3, 1)), ("f,float", (_P, 2.5)),
            ("f,i0", (_X, np.array(3))), ("list", ([_X, _Y],)), ("Ff", (jnp.asarray(_X), _Y)),
            ("fF", (_Y, jnp.asarray(_X))), ("d", (x64,)), ("df", (x64, _Y)), ("l", (_E.astype(np.int64),)),
            ("d", (_M.astype(np.float64),)), ("str", ("ij,jk->ik", _M, _M))]


def _programs(fn) -> int:
    return sum(1 for p in fn._replay_state.programs.values() if type(p) is ep._Program)


@pytest.mark.parametrize("modname,name", REPLAYED, ids=[f"{m.split('.')[-1]}.{n}" for m, n in REPLAYED])
def test_numpy_arguments_replay_the_op_by_op_call(modname, name):
    """Every replayed function, on every NumPy-argument pattern it accepts: the replayed result is the
    op-by-op result (values, dtype, weak type, signed zeros, NaNs)."""
    check_patterns(getattr(importlib.import_module(modname), name), _patterns())  # (its asserts compare)



def test_numpy_arguments_reach_a_program():
    """The NumPy path is a program, not the direct call: one build per signature, hits after it."""
    ep.clear()
    x = np.linspace(-2, 3, 9, dtype=np.float32)
    for f, args in [(jnp.var, (x,)), (jnp.ldexp, (x, np.arange(9, dtype=np.int32))), (jnp.sinc, (x,)),
                    (jnp.nan_to_num, (x.astype(np.float64),))]:
        f(*args)
        assert _programs(f) == 0
        f(*args)
        assert _programs(f) == 1, f.__name__
        hits = f._replay_state.hits
        f(*args)
        assert f._replay_state.hits == hits + 1


def test_numpy_and_ftrans_arrays_are_separate_signatures():
    """A float64 NumPy array narrows to float32 while a float32 ftrans array does not change: the two do not
    share a program, and the weak type of an ftrans input is kept apart from a NumPy input's (strong)."""
    ep.clear()
    x = np.linspace(0.5, 2, 5)
    want_np, want_ft = _direct(jnp.sinc, x), _direct(jnp.sinc, jnp.asarray(x.astype(np.float32)))
    for _ in range(3):
        assert _same(jnp.sinc(x), want_np)
        assert _same(jnp.sinc(jnp.asarray(x.astype(np.float32))), want_ft)
    weak = jnp.asarray(2.0)  # a weakly typed scalar
    assert weak.weak_type
    for _ in range(3):
        assert _same(jnp.hypot(weak, np.float32(3)), _direct(jnp.hypot, weak, np.float32(3)))
        assert _same(jnp.hypot(weak, np.array(3, np.float32)), _direct(jnp.hypot, weak, np.array(3, np.float32)))


def test_results_do_not_alias_the_users_array():
    """A program that returns its input (a no-op ``nan_to_num`` of an integer array) hands back a copy: writing
    to the NumPy array afterwards does not change the result."""
    e = np.arange(6, dtype=np.int32)
    for _ in range(3):
        r = jnp.nan_to_num(e)
    e[0] = 99
    assert int(r[0]) == 0


def test_other_numpy_inputs_take_the_direct_path():
    """A masked array, a matrix subclass, a string or object array, or a NumPy array used as a static value
    (``reshape``'s shape) is answered by the function itself, with its usual result or error."""
    m = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    for _ in range(3):
        with pytest.raises(Exception) as e1:
            jnp.var(m)
    with pytest.raises(type(e1.value)):
        _direct(jnp.var, m)
    s = np.array(["a", "b"])
    for _ in range(3):
        with pytest.raises(Exception) as e2:
            jnp.var(s)
    with pytest.raises(type(e2.value)):
        _direct(jnp.var, s)
    x = np.arange(6.0, dtype=np.float32)
    for _ in range(3):
        assert jnp.reshape(x, np.array([2, 3])).shape == (2, 3)
        assert _same(jnp.tile(x, np.array([2])), _direct(jnp.tile, x, np.array([2])))


def test_a_changed_x64_setting_narrows_again():
    """The conversion is part of the signature's meaning: under x64 a float64 NumPy array stays float64."""
    x = np.linspace(0.1, 1, 5)
    for _ in range(3):
        assert jnp.sinc(x).dtype == np.float32
    with ftrans.enable_x64(True):
        for _ in range(3):
            r = jnp.sinc(x)
            assert r.dtype == np.float64
            assert _same(r, _direct(jnp.sinc, x))
    for _ in range(3):
        assert jnp.sinc(x).dtype == np.float32
