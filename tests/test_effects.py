"""Effects on equations and programs (``eqn.effects``, ``jaxpr.effects``) against JAX's, and a user's
effectful primitive (``Primitive.def_effectful_abstract_eval`` with ``ftrans.extend.core.Effect``)."""

from __future__ import annotations

import jax
import jax.experimental
import jax.numpy as jjnp
import pytest

import ftrans
import ftrans.experimental
import ftrans.numpy as fjnp
from ftrans.core import ir
from ftrans.core import primitive as P
from ftrans.extend import core as fcore


def _program(lib, jnp):
    sds = lib.ShapeDtypeStruct((), "float32")

    def f(x):
        lib.debug.print("{}", x)
        lib.debug.print("{}", x, ordered=True)
        lib.experimental.io_callback(lambda v: v, sds, x, ordered=True)
        lib.experimental.io_callback(lambda v: v, sds, x)
        lib.pure_callback(lambda v: v, sds, x)
        lib.lax.cond(x > 0, lambda: lib.debug.callback(print, x), lambda: None)
        return x + 1

    return lib.make_jaxpr(f)(1.0)


def _names(effects, own: bool):
    return sorted(repr(e) if own else type(e).__name__ for e in effects)


def test_eqn_and_jaxpr_effects_as_jax():
    got, want = _program(ftrans, fjnp), _program(jax, jjnp)
    assert _names(got.effects, True) == _names(want.effects, False) == [
        "DebugEffect", "IOEffect", "OrderedDebugEffect", "OrderedIOEffect"]
    assert got.jaxpr.effects == got.effects
    g = [(str(e.primitive), _names(e.effects, True)) for e in got.jaxpr.eqns]
    w = [(str(e.primitive), _names(e.effects, False)) for e in want.jaxpr.eqns]
    assert g == w


def test_pure_programs_have_no_effects():
    j = ftrans.make_jaxpr(lambda x: fjnp.sin(x) + 1)(1.0)
    assert j.effects == fcore.no_effects == jax.make_jaxpr(lambda x: jjnp.sin(x) + 1)(1.0).effects
    assert all(e.effects == set() for e in j.jaxpr.eqns)


class _Named(fcore.Effect):
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_foo, _bar = _Named("foo"), _Named("bar")


@pytest.fixture
def effect_p():
    """A user's effectful primitive, unregistered afterwards (the registry tests check every registered one)."""
    prim = fcore.Primitive("test_effects_effect")
    prim.multiple_results = True

    @prim.def_effectful_abstract_eval
    def _abstract(*avals, effect):
        return avals, {effect}

    yield prim
    del P.registry[prim.name]
    P.abstract_eval_rules.pop(prim, None)
    ir.effectful_if.pop(prim, None)
    ir.effect_rules.pop(prim, None)


def test_a_users_effectful_primitive(effect_p):
    def user(x):
        effect_p.bind(effect=_foo)
        effect_p.bind(effect=_bar)
        return x + 1.0

    j = ftrans.make_jaxpr(user)(2.0)
    assert [e.effects for e in j.jaxpr.eqns] == [{_foo}, {_bar}, set()]
    assert j.effects == {_foo, _bar}
    # inherited by the equations that hold them
    assert ftrans.make_jaxpr(ftrans.jit(user))(2.0).effects == {_foo, _bar}
    assert ftrans.make_jaxpr(ftrans.checkpoint(user))(2.0).effects == {_foo, _bar}
    # and kept by dead-code elimination though nobody reads them
    assert len(ftrans.make_jaxpr(ftrans.jit(user))(2.0).jaxpr.eqns[0].params["jaxpr"].jaxpr.eqns) == 3
