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
    ir.user_effect_primitives.discard(prim)


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


@pytest.mark.parametrize("where", ["cond", "while", "scan", "custom_jvp", "custom_vjp"])
def test_a_users_effect_is_refused_in_bodies_as_jax(effect_p, where):
    def body(x):
        effect_p.bind(effect=_foo)
        return x

    def f(x):
        if where == "cond":
            return ftrans.lax.cond(x > 0, body, lambda v: v, x)
        if where == "while":
            return ftrans.lax.while_loop(lambda v: v < 0, body, x)
        if where == "scan":
            return ftrans.lax.scan(lambda c, _: (body(c), None), x, None, length=2)[0]
        if where == "custom_jvp":
            g = ftrans.custom_jvp(body)
            g.defjvp(lambda p, t: (p[0], t[0]))
            return g(x)
        g = ftrans.custom_vjp(body)
        g.defvjp(lambda v: (v, None), lambda _, ct: (ct,))
        return g(x)

    with pytest.raises(NotImplementedError, match=f"Effects not supported in `{where}`"):
        ftrans.make_jaxpr(f)(2.0)
    # ftrans's own effects are allowed there, as JAX's debug and IO effects
    ftrans.make_jaxpr(lambda x: ftrans.lax.cond(x > 0, lambda v: ftrans.debug.print("{}", v) or v,
                                                lambda v: v, x))(2.0)
    # and a type registered as allowed is
    reg = ir.control_flow_allowed_effects if where in ("cond", "while", "scan") else \
        ir.custom_derivatives_allowed_effects
    reg.add(_Named)
    try:
        ftrans.make_jaxpr(f)(2.0)
    finally:
        reg.discard(_Named)


def test_typecheck_checks_equation_effects_against_declared_ones(effect_p):
    def f(x):
        effect_p.bind(effect=_foo)
        effect_p.bind(effect=_bar)
        return x + 1.0

    j = ftrans.make_jaxpr(f)(2.0).jaxpr
    fcore.check_jaxpr(j)
    fcore.check_jaxpr(j.replace(effects={_foo, _bar}))
    with pytest.raises(fcore.JaxprTypeError, match="Equation effect not present in jaxpr effects"):
        fcore.check_jaxpr(j.replace(effects={_foo}))
    assert j.replace(effects={_foo}).effects == {_foo}


def _ref_effect_kinds(lib, jnp, case):
    r, s = lib.new_ref(jnp.zeros(3)), lib.new_ref(jnp.ones(3))

    def reads_closed(x, a_ref):
        return x + r[...] + len(s)

    def writes(a_ref, x):
        a_ref[...] = x * jnp.ones(3)

    def updates(a_ref, x):
        a_ref[...] += x

    def passes(a_ref, b_ref):
        return b_ref[...]

    j = {
        "reads_closed": lambda: lib.make_jaxpr(reads_closed)(1.0, s),
        "writes": lambda: lib.make_jaxpr(writes)(s, 2.0),
        "writes_jit": lambda: lib.make_jaxpr(lib.jit(writes))(s, 2.0),
        "updates": lambda: lib.make_jaxpr(updates)(s, 2.0),
        "jit_passes_one_through": lambda: lib.make_jaxpr(lambda: lib.jit(passes)(r, s))(),
        "len_only": lambda: lib.make_jaxpr(lambda a_ref: len(a_ref) * 1.0)(s),
    }[case]()
    return sorted(type(e).__name__ for e in j.effects)


@pytest.mark.parametrize("case", ["reads_closed", "writes", "writes_jit", "updates", "jit_passes_one_through",
                                  "len_only"])
def test_make_jaxpr_lists_ref_effects_as_jax(case):
    assert _ref_effect_kinds(ftrans, fjnp, case) == _ref_effect_kinds(jax, jjnp, case)
