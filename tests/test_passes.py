"""The pass pipeline before lowering: DCE at every depth, reports naming the user's lines,
switching passes off by name, and results unchanged (jax as the oracle)."""

from __future__ import annotations

import contextlib
import inspect
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import ir
from ftrans.transforms import passes

x3 = np.arange(3, dtype=np.float32) - 1.0
C = np.linspace(0.5, 1.5, 3).astype(np.float32)


@contextlib.contextmanager
def disabled(*names):
    before = ftrans.config.disabled_passes
    ftrans.config.update("disabled_passes", names)
    try:
        yield
    finally:
        ftrans.config.update("disabled_passes", before)


def _line(marker: str) -> int:
    """The line of this file holding ``marker`` (so the tests do not hard-code numbers)."""
    src, start = inspect.getsourcelines(inspect.getmodule(_line))
    return next(i for i, text in enumerate(src, start or 1) if marker in text and "_line(" not in text)


def f_dead(x):
    dead = jnp.sin(x) * C  # noqa: F841  DEAD-TOP

    def br(a):
        unused = jnp.exp(a)  # noqa: F841  DEAD-COND
        return a + 1.0

    y = lax.cond(x[1] > 0, br, lambda a: a - 1.0, x)

    def body(c, a):
        junk = jnp.tanh(a)  # noqa: F841  DEAD-SCAN
        return c + a, c * a

    s, ys = lax.scan(body, 0.0, y)
    return ys.sum() + s


def _prims(prog) -> set[str]:
    return {e.primitive.name for j in ir.all_jaxprs(prog) for e in j.eqns}


def test_dce_is_registered_and_runs_by_default():
    assert "dce" in passes.registered_passes()
    ftrans.jit(f_dead).trace(x3)
    rep = passes.last_report()
    assert rep is not None and "dce" in rep.passes_run and rep.disabled == ()


def test_dce_removes_dead_code_at_top_level_and_in_bodies():
    staged = ftrans.make_jaxpr(f_dead)(x3)  # make_jaxpr runs no passes: the program as written
    assert {"sin", "exp", "tanh"} <= _prims(staged)
    t = ftrans.jit(f_dead).trace(x3)
    prog = t.jaxpr
    ir.typecheck(prog)
    assert not {"sin", "exp", "tanh"} & _prims(prog)
    assert {"cond", "scan", "add"} <= _prims(prog)
    assert prog.consts == []  # the captured C was only read by dead code
    text = ftrans.jit(f_dead).lower(x3).as_text()
    for op in ("stablehlo.sine", "stablehlo.exponential", "stablehlo.tanh"):
        assert op not in text


def test_dce_report_names_the_users_lines():
    t = ftrans.jit(f_dead).trace(x3)
    rep = passes.report_for(t.jaxpr)
    assert rep is passes.last_report()
    got = {(r.primitive, r.source_info.lineno) for r in rep.by_pass("dce") if r.source_info is not None}
    assert ("sin", _line("DEAD-TOP")) in got
    assert ("mul", _line("DEAD-TOP")) in got
    assert ("exp", _line("DEAD-COND")) in got
    assert ("tanh", _line("DEAD-SCAN")) in got
    assert all(r.source_info.filename == __file__ for r in rep.rewrites if r.source_info is not None)
    assert any(r.primitive == "constant" for r in rep.rewrites)
    s = str(rep)
    assert "dce: removed `exp`" in s and f"test_passes.py:{_line('DEAD-COND')}" in s


def test_switching_dce_off_keeps_the_equations():
    with disabled("dce"):
        assert ftrans.config.disabled_passes == ("dce",)
        text = ftrans.jit(f_dead).lower(x3).as_text()
        rep = passes.last_report()
        assert "dce" not in rep.passes_run and rep.disabled == ("dce",) and len(rep.by_pass("dce")) == 0
        assert rep.passes_run == tuple(n for n in passes.registered_passes() if n != "dce")
        for op in ("stablehlo.sine", "stablehlo.exponential", "stablehlo.tanh"):
            assert op in text
        np.testing.assert_allclose(np.asarray(ftrans.jit(f_dead)(x3)), _jax_f_dead(x3), rtol=1e-6)
    assert "stablehlo.sine" not in ftrans.jit(f_dead).lower(x3).as_text()


def test_switching_a_pass_off_retraces_cached_functions():
    g = ftrans.jit(f_dead)
    g(x3)
    assert g.cache_info()["size"] == 1
    with disabled("dce"):
        assert g.cache_info()["size"] == 0
        g(x3)
    assert g.cache_info()["size"] == 0


def test_disabled_passes_accepts_a_comma_separated_string():
    before = ftrans.config.disabled_passes
    try:
        ftrans.config.update("jax_disabled_passes", " dce, ")
        assert ftrans.config.disabled_passes == ("dce",)
        ftrans.config.update("disabled_passes", None)
        assert ftrans.config.disabled_passes == ()
    finally:
        ftrans.config.update("disabled_passes", before)


def test_unknown_pass_name_raises():
    expected = "unknown pass name 'nosuchpass'; the passes are: " + ", ".join(passes.registered_passes())
    assert expected.endswith("dce")
    with pytest.raises(ValueError, match=re.escape(expected)):
        ftrans.config.update("disabled_passes", ["dce", "nosuchpass"])
    assert ftrans.config.disabled_passes == ()
    with pytest.raises(TypeError, match="list of names"):
        ftrans.config.update("disabled_passes", 3)


def test_unknown_pass_name_from_the_environment_raises_at_the_first_jit():
    before = ftrans.config.disabled_passes
    ftrans.config.disabled_passes = ("nosuchpass",)  # what FTRANS_DISABLED_PASSES=nosuchpass gives
    try:
        with pytest.raises(ValueError, match="unknown pass name 'nosuchpass'"):
            ftrans.jit(lambda x: x + 1.0).trace(x3)
    finally:
        ftrans.config.disabled_passes = before


def test_nothing_dead_returns_the_program_itself():
    prog = ftrans.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(x3)
    assert passes.run_pipeline(prog) is prog
    assert len(passes.last_report()) == 0


def test_shared_bodies_stay_shared():
    inner = ftrans.jit(lambda a: (jnp.cos(a), jnp.sin(a))[0])

    def f(x):
        return inner(x) + inner(x * 2.0)

    with disabled("dce"):
        staged = ftrans.make_jaxpr(f)(x3)
    calls = [e for e in staged.eqns if e.primitive.name == "jit_call"]
    assert len(calls) == 2
    body = ir.subjaxprs(calls[0])[0]
    assert "sin" in _prims(body)
    shared = {id(calls[1]): ir.replace_subjaxprs(calls[1], [body])}
    j = staged.jaxpr
    prog = ir.ClosedJaxpr(ir.Jaxpr(j.constvars, j.invars, [shared.get(id(e), e) for e in j.eqns], j.outvars),
                          staged.consts)
    out = passes.run_pipeline(prog)
    b0, b1 = (ir.subjaxprs(e)[0] for e in out.eqns if e.primitive.name == "jit_call")
    assert b0 is b1 and "sin" not in _prims(b0)
    assert len(passes.last_report().by_pass("dce")) == 1  # rewritten once, reported once
    from ftrans.lowering.lower import lower_jaxpr

    assert lower_jaxpr(out.jaxpr).count("func.func private") == 1


def test_a_pass_that_changes_a_nested_signature_is_caught():
    class Bad(passes.Pass):
        name = "bad"

        def rewrite(self, jaxpr, ctx, *, top):
            if top:
                return jaxpr
            return ir.Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.eqns, jaxpr.outvars[:0])

    prog = ftrans.make_jaxpr(lambda x: lax.cond(x[0] > 0, jnp.sin, jnp.cos, x))(x3)
    with pytest.raises(passes.PassError, match="'bad' changed the signature of a nested jaxpr"):
        Bad().run(prog, passes.PassContext("bad", []))


def test_a_custom_pass_sees_every_jaxpr_once_innermost_first():
    seen = []

    class Spy(passes.Pass):
        name = "spy"

        def rewrite(self, jaxpr, ctx, *, top):
            seen.append((top, sorted({e.primitive.name for e in jaxpr.eqns})))
            return jaxpr

    prog = ftrans.make_jaxpr(f_dead)(x3)
    assert Spy().run(prog, passes.PassContext("spy", [])) is prog
    assert len(seen) == len(ir.all_jaxprs(prog)) == 4  # program, two branches, scan body
    assert seen[-1][0] is True and all(not top for top, _ in seen[:-1])


def _jax_f_dead(x):
    y = jax.lax.cond(x[1] > 0, lambda a: a + 1.0, lambda a: a - 1.0, x)
    s, ys = jax.lax.scan(lambda c, a: (c + a, c * a), 0.0, y)
    return ys.sum() + s


def _grad_prog(x):
    return (jnp.tanh(x) ** 2).sum() + jnp.sin(x).sum()


def _jax_grad_prog(x):
    return (jjnp.tanh(x) ** 2).sum() + jjnp.sin(x).sum()


@pytest.mark.parametrize("case", ["cond_scan", "grad", "value_and_grad", "closure"])
def test_results_match_jax(case):
    if case == "cond_scan":
        got, want = ftrans.jit(f_dead)(x3), _jax_f_dead(x3)
    elif case == "grad":
        got, want = ftrans.jit(ftrans.grad(_grad_prog))(x3), jax.grad(_jax_grad_prog)(x3)
    elif case == "value_and_grad":
        got = ftrans.jit(ftrans.value_and_grad(_grad_prog))(x3)[1]
        want = jax.value_and_grad(_jax_grad_prog)(x3)[1]
    else:
        got = ftrans.jit(lambda x: (x * C, jnp.exp(x) * C)[1])(x3)
        want = jjnp.exp(x3) * C
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
