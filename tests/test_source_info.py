"""Each equation's user traceback (``eqn.source_info.traceback``) and the call-site locations the lowering
writes from it, checked against JAX's."""

from __future__ import annotations

import inspect
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
from jax._src.lib.mlir import ir

import ftrans
from ftrans import lax


def _ops(op, name):
    """The operations named ``name`` inside ``op`` (an MLIR module or operation), depth first."""
    op = op.operation if isinstance(op, ir.Module) else op
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                if child.operation.name == name:
                    yield child
                yield from _ops(child, name)


def _func(module, sym):
    return next(f for f in _ops(module, "func.func") if f.attributes["sym_name"].value == sym)


def _names(loc) -> list[str]:
    """The function names of a location's call-site chain, innermost first (its name location unwrapped)."""
    while isinstance(loc, ir.NameLoc) and not isinstance(loc.child_loc, (ir.FileLineColLoc, ir.UnknownLoc)):
        loc = loc.child_loc
    out = []
    while isinstance(loc, ir.CallSiteLoc):
        out.append(loc.callee.name_str)
        loc = loc.caller
    if isinstance(loc, ir.NameLoc):
        out.append(loc.name_str)
    return out


def test_traceback_holds_the_users_frames_up_to_the_traced_function():
    def helper(x):
        return lax.sin(x)

    def f(x):
        return helper(x) * 2.0

    eqns = ftrans.make_jaxpr(f)(1.0).eqns
    sin_tb = eqns[0].source_info.traceback
    assert [fr.function_name.rsplit(".", 1)[-1] for fr in sin_tb.frames] == ["helper", "f"]
    codes, lastis = sin_tb.raw_frames()
    assert codes[0] is helper.__code__ and len(lastis) == 2
    assert sin_tb.frames[0].line_num == inspect.getsourcelines(helper)[1] + 1
    assert len(eqns[1].source_info.traceback) == 1  # the mul: f's frame only
    assert sin_tb == ftrans.make_jaxpr(f)(1.0).eqns[0].source_info.traceback  # hashable and comparable
    assert hash(sin_tb) == hash(ftrans.make_jaxpr(f)(1.0).eqns[0].source_info.traceback)


def test_inline_jit_equations_are_at_the_call():
    for api in (jax, ftrans):
        @api.jit(inline=True)
        def f(x):
            return api.lax.add(x, 3)

        def g(x):
            return api.lax.add(f(x), 4)

        lines, start = inspect.getsourcelines(g)
        for eqn in api.make_jaxpr(g)(2).eqns:
            from jax._src import source_info_util

            frame = source_info_util.user_frame(eqn.source_info.traceback)
            assert start <= frame.start_line < start + len(lines), (api.__name__, eqn)


def test_locations_are_call_sites_as_jax_writes_them():
    def run(api):
        @api.jit
        def inner(x):
            return api.lax.add(x, 1)

        @api.jit
        def outer(x):
            return inner(api.lax.mul(x, 2))

        return outer.lower(0).compiler_ir()

    for api in (jax, ftrans):
        m = run(api)
        (add,) = _ops(_func(m, "inner"), "stablehlo.add")
        (mul,) = _ops(_func(m, "main"), "stablehlo.multiply")
        (call,) = _ops(_func(m, "main"), "func.call")
        (ret,) = _ops(_func(m, "main"), "func.return")
        # a nested jit's ops name its own frame only; main's ops also the caller of the jitted function
        assert _names(add.location)[0].endswith(".inner") and len(_names(add.location)) == 1, api.__name__
        for op in (mul, call):
            names = _names(op.location)
            assert names[0].endswith(".outer") and names[1].endswith(".run"), (api.__name__, names)
        assert isinstance(ret.location, ir.NameLoc) and isinstance(ret.location.child_loc, ir.CallSiteLoc)
        assert _names(ret.location)[0].endswith(".run")  # where the program was lowered


def test_control_flow_bodies_keep_the_jitted_functions_frame():
    @ftrans.jit
    def cond_test(x):
        return lax.cond(lax.lt(x, 10), lambda v: lax.add(v, 1), lambda v: lax.mul(v, 2), x)

    m = cond_test.lower(0).compiler_ir()
    adds = list(_ops(m, "stablehlo.add"))
    assert adds and all(".cond_test" in str(a.location) for a in adds)
    np.testing.assert_equal(np.asarray(cond_test(3)), 4)


def test_equations_from_one_helper_called_from_two_lines_record_each_caller():
    # (current_source_info reuses the callers of the previous equation while its calling frame is at the same
    # instruction: a helper called from another line must get that line, and a loop's calls theirs)
    def helper(x):
        return x * 2.0 + 1.0

    def outer(x):
        a = helper(x)
        b = helper(a)
        for _ in range(2):
            b = helper(b)
        return b

    eqns = ftrans.make_jaxpr(outer)(1.0).jaxpr.eqns
    src = inspect.getsourcelines(outer)[1]
    callers = [[ln for code, ln in _caller_lines(e) if code == "outer"] for e in eqns]
    assert [c[0] - src for c in callers] == [1, 1, 2, 2, 4, 4, 4, 4]
    # the same in a nested function's trace (its own boundary)
    eqns = ftrans.make_jaxpr(lambda x: ftrans.jit(outer)(x) + 1.0)(1.0).jaxpr.eqns[0].params["jaxpr"].jaxpr.eqns
    assert [[ln for code, ln in _caller_lines(e) if code == "outer"][0] - src for e in eqns] == [1, 1, 2, 2, 4, 4, 4, 4]


def _caller_lines(eqn):
    """(function name, line) of an equation's recorded frames, innermost first."""
    return [(f.function_name.rsplit(".", 1)[-1], f.line_num) for f in eqn.source_info.traceback.frames]


def test_lowered_module_is_jit_name_with_result_info_as_jax():
    def g(x):
        return {"a": x, "b": (x * 2.0, x)}

    ours, theirs = ftrans.jit(g).lower(1.0).as_text(), jax.jit(g).lower(1.0).as_text()
    head = [t.splitlines()[0].split(" attributes")[0] for t in (ours, theirs)]
    assert head[0] == head[1] == "module @jit_g"
    infos = [[line for line in t.split('"') if line.startswith("result")] for t in (ours, theirs)]
    assert infos[0] == infos[1] == ["result['a']", "result['b'][0]", "result['b'][1]"]
    out = ftrans.jit(g).lower(1.0).compile()(3.0)
    assert float(out["b"][0]) == 6.0
