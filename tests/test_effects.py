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


# ---- effects on an input (JaxprInputEffect), effect-type registries, and checkpoint under linearize


def _input_effect_lib(lib):
    """(bind, effect class) of an input-effect primitive for ``lib`` (ftrans, or jax through its internals),
    its effect type registered as allowed in control flow."""
    if lib is ftrans:
        base, prim_cls, reg = fcore.JaxprInputEffect, fcore.Primitive, fcore.control_flow_allowed_effects
    else:
        from jax._src import core as jcore
        from jax._src import effects as jeffects

        base, prim_cls, reg = jeffects.JaxprInputEffect, jcore.Primitive, jeffects.control_flow_allowed_effects

    class InputEffect(base):
        pass

    reg.add_type(InputEffect)
    p = prim_cls("test_effects_input_effect")
    p.multiple_results = True
    p.def_effectful_abstract_eval(lambda *avals, index: ([], {InputEffect(index)}))
    return p, InputEffect


@pytest.fixture
def input_effects():
    made = {}
    yield lambda lib: made.setdefault(lib.__name__, _input_effect_lib(lib))
    if "ftrans" in made:
        prim, cls = made["ftrans"]
        fcore.control_flow_allowed_effects.discard(cls)
        del P.registry[prim.name]
        P.abstract_eval_rules.pop(prim, None)
        ir.effectful_if.pop(prim, None)
        ir.effect_rules.pop(prim, None)
        ir.user_effect_primitives.discard(prim)


def _input_effect_positions(lib, jnp, prim, case):
    """Where the program's input effects point: positions among ``constvars + invars``."""
    import numpy as np

    c, y = np.ones(2), np.ones(2)

    def eff(*xs, index):
        prim.bind(*xs, index=index)

    def scan_fun(index):
        def f(xs, z):
            def body(z, x):
                eff(x, z, c, index=index)
                return z, x
            lib.lax.scan(body, z, xs)
        return lambda: lib.make_jaxpr(f)(jnp.arange(8), 0)

    def while_fun(index, pred_reads_x=False):
        def f(x):
            def body(v):
                eff(x, v, index=index)
                return 2 * v
            lib.lax.while_loop((lambda _: (x > 0).all()) if pred_reads_x else (lambda _: True), body, y)
        return lambda: lib.make_jaxpr(f)(0)

    def cond_fun(index):
        def f(x):
            def true_fun(x):
                eff(x, c, index=index)
                return x
            lib.lax.cond(False, true_fun, lambda x: x, x)
        return lambda: lib.make_jaxpr(f)(0)

    j = {
        "first": lambda: lib.make_jaxpr(lambda x, y: eff(x, y, index=0))(0, 1),
        "by_index": lambda: lib.make_jaxpr(lambda x, y: eff(y, x, index=1))(0, 1),
        "jit": lambda: lib.make_jaxpr(lib.jit(lambda x, y: eff(y, x, index=0)))(0, 1),
        "nested_jit": lambda: lib.make_jaxpr(lib.jit(lambda x, y: lib.jit(
            lambda a, b: eff(b, a, index=1))(x, y)))(0, 1),
        "scan_xs": scan_fun(0), "scan_carry": scan_fun(1), "scan_const": scan_fun(2),
        "while_closed": while_fun(0), "while_carry": while_fun(1), "while_carry_pred": while_fun(1, True),
        "cond_operand": cond_fun(0), "cond_const": cond_fun(1),
    }[case]().jaxpr
    inputs = [*j.constvars, *j.invars]
    return sorted(next(i for i, v in enumerate(inputs) if v is e.input) for e in j.effects)


@pytest.mark.parametrize("case", ["first", "by_index", "jit", "nested_jit", "scan_xs", "scan_carry", "scan_const",
                                  "while_closed", "while_carry", "while_carry_pred", "cond_operand", "cond_const"])
def test_input_effects_name_the_input_as_jax(input_effects, case):
    fp, fcls = input_effects(ftrans)
    jp, _ = input_effects(jax)
    got = _input_effect_positions(ftrans, fjnp, fp, case)
    assert got == _input_effect_positions(jax, jjnp, jp, case)
    assert len(got) == 1


def test_input_effect_on_the_equation_names_its_operand(input_effects):
    prim, cls = input_effects(ftrans)
    j = ftrans.make_jaxpr(lambda x, y: prim.bind(y, x, index=0) and None)(0, 1).jaxpr
    assert j.eqns[0].effects == {cls(j.invars[1])}
    assert cls(0) == cls(0) != cls(1) and repr(cls(2)) == "InputEffect(2)"
    # an effect on a literal operand names nothing and is dropped
    assert ftrans.make_jaxpr(lambda: prim.bind(1, index=0) and None)().effects == set()


def test_effect_type_sets_as_jax():
    from jax._src import effects as jeffects

    for lib_set, base in ((fcore.EffectTypeSet(), fcore.Effect), (jeffects.EffectTypeSet(), jeffects.Effect)):
        class A(base):
            pass

        class B(base):
            pass

        lib_set.add_type(A)
        assert lib_set.contains(A()) and not lib_set.contains(B())
        a, b = A(), B()
        assert lib_set.filter_in([a, b]) == [a] and lib_set.filter_not_in([a, b]) == [b]


def _remat_linearize(lib, prim, effect):
    @lib.checkpoint
    def f(x):
        x, = prim.bind(x, effect=effect)
        return x

    lib.make_jaxpr(f)(2.0)  # staging the checkpoint with the effect is fine
    return lib.make_jaxpr(lambda x: lib.linearize(f, x)[1](x))(2.0)


def test_checkpoint_under_linearize_allows_only_registered_effects_as_jax(effect_p):
    from jax._src import core as jcore
    from jax._src import effects as jeffects
    from jax._src.interpreters import ad as jad

    from ftrans.interpreters import ad as fad

    jp = jcore.Primitive("test_effects_remat_effect")
    jp.multiple_results = True
    jp.def_effectful_abstract_eval(lambda *avals, effect: (avals, {effect}))
    jad.primitive_jvps[jp] = lambda primals, tangents, effect: (jp.bind(*primals, effect=effect), tangents)
    fad.primitive_jvps[effect_p] = lambda primals, tangents, effect: (effect_p.bind(*primals, effect=effect),
                                                                        tangents)

    class JEff(jeffects.Effect):
        pass

    class FEff(fcore.Effect):
        pass

    try:
        # jax 0.11's words ("partial-eval of" in jax 0.10's)
        for lib, prim, eff, words in ((jax, jp, JEff(), "(AD|partial-eval)"), (ftrans, effect_p, FEff(), "AD")):
            with pytest.raises(NotImplementedError, match=f"Effects not supported in {words} of `checkpoint`"):
                _remat_linearize(lib, prim, eff)
        jeffects.remat_allowed_effects.add_type(JEff)
        fcore.remat_allowed_effects.add_type(FEff)
        got = _remat_linearize(ftrans, effect_p, FEff())
        want = _remat_linearize(jax, jp, JEff())
        assert [type(e).__name__[1:] for e in got.effects] == [type(e).__name__[1:] for e in want.effects] == ["Eff"]
    finally:
        fcore.remat_allowed_effects.discard(FEff)
        fad.primitive_jvps.pop(effect_p, None)
