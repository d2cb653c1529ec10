"""The IR: printing, source info, type checking, evaluation, and make_jaxpr/eval_shape plumbing."""

from __future__ import annotations

import itertools
import re
import string

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core import ir
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import registry
from ftrans.errors import JaxprTypeError

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
x3 = np.arange(3, dtype=np.float32)


def staged_str(f, *args, **kw) -> str:
    return str(ftrans.make_jaxpr(f)(*args, **kw))


# ----------------------------------------------------------------------------
# Printing


def test_print_unary():
    assert staged_str(jnp.sin, x3) == "{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }"


def test_print_chain_and_literal():
    # Short enough for one line: the equations are separated by "; ", as JAX prints them.
    expected = "{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] in (c,) }"
    assert staged_str(lambda x: jnp.sin(x) * 2.0, x3) == expected
    expected = (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3] = sin a\n"
        "    c:f32[3] = mul b 2.0:f32[]\n"
        "    d:f32[3] = add c a\n"
        "  in (d,) }"
    )
    assert staged_str(lambda x: jnp.sin(x) * 2.0 + x, x3) == expected


def test_print_int_literal_and_weak_scalar_input():
    xi = np.arange(3, dtype=np.int32)
    assert staged_str(lambda x: x + 1, xi) == (
        "{ lambda ; a:i32[3]. let b:i32[3] = add a 1:i32[] in (b,) }"
    )
    # A Python float argument is a weakly typed f32[] input.
    closed = ftrans.make_jaxpr(lambda x, s: x * s)(x3, 2.0)
    assert closed.in_avals[1] == ShapedArray((), F32, True)
    # Joined with a strong f32, the weak input is first made strong, as JAX stages it (its transpose
    # gives the cotangent back its weak type).
    assert str(closed) == (
        "{ lambda ; a:f32[3] b:f32[]. let\n"
        "    c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b\n"
        "    d:f32[3] = mul a c\n  in (d,) }"
    )


def test_names_past_z():
    def f(x):
        for _ in range(30):
            x = jnp.sin(x)
        return x

    letters = string.ascii_lowercase
    names = list(letters) + ["b" + c for c in letters]
    lines = ["{ lambda ; a:f32[]. let"]
    for prev, cur in itertools.pairwise(names[:31]):
        lines.append(f"    {cur}:f32[] = sin {prev}")
    lines.append(f"  in ({names[30]},) }}")
    out = staged_str(f, np.float32(1.0))
    assert out == "\n".join(lines)
    assert "ba:f32[] = sin z" in out and "be:f32[] = sin bd" in out


def _layout_cases(np_mod, lax_mod):
    """Programs whose ftrans and JAX jaxprs have the same equations and parameters, so the printed
    texts differ only if the layouts do."""
    x3 = np.arange(3, dtype=np.float32)
    c1 = np.zeros(1, np.float32)

    def cond3(x):
        return lax_mod.cond(x >= 0., lambda xt, _: xt + x, lambda _, xf: xf - x, x + 1., x + 2.)

    return [
        (np_mod.sin, (x3,)),  # one line
        (lambda x: np_mod.sin(x) * 2.0, (x3,)),  # one line, equations joined by "; "
        (lambda x: x, (x3,)),  # no equations: "let  in"
        (lambda x: (x, 1., c1), (np.float32(0.),)),  # a constvar and a literal output
        (lambda x: np_mod.sin(np_mod.cos(x)) * 2.0 + x, (x3,)),  # too long: one equation a line
        (cond3, (np.float32(3.),)),  # branches that fit on a line each, inside a broken equation
        (lambda x: lax_mod.scan(lambda c, y: (c + y, c * y), x[0], x), (x3,)),  # a broken body
        (lambda x: lax_mod.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.), (0, x)), (x3,)),
        (lambda *a: sum(a), (x3,) * 12),  # a binder list that fills its lines
        (lambda *a: lax_mod.concatenate(a, 0), (x3,) * 30),  # an equation too long for its line
        (lambda x: lax_mod.scan(_long_body(np_mod), x[0], x), (x3,)),  # a body printed first, by name
    ]


def _long_body(np_mod):
    def body(c, y):
        for _ in range(11):
            c = np_mod.sin(c)
        return c, c * y

    return body


def test_shared_bodies_print_once_by_name():
    """A body used twice (here a jitted function's, cached) is printed once, before the program,
    named after the call (JAX's `let name = { lambda ... } in`); its uses name it."""
    f = ftrans.jit(lambda x: x * 2.0)
    text = str(ftrans.make_jaxpr(lambda x: f(x) + f(x + 1.0))(x3))
    assert text.startswith("let lambda = { lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) } in\n{ lambda ; c:f32[3]. let")
    assert text.count("jaxpr=lambda") == 2 and text.count("{ lambda") == 2
    # Two different shared bodies under the same name are told apart by a number.
    g = ftrans.jit(lambda x: x * 3.0)
    text = str(ftrans.make_jaxpr(lambda x: f(x) + f(x) + g(x) + g(x))(x3))
    assert "let lambda = " in text and "let lambda1 = " in text and text.count("jaxpr=lambda1") == 2


def _scan_params_alike(ours: str, want: str) -> tuple[str, str]:
    """jax 0.11's scan has other parameters (``ft_in``/``ft_out``, no ``num_carry``/``num_consts``); ftrans
    keeps jax 0.10's, so against jax 0.11 each side's own scan parameter lines are left out."""
    if "ft_in=" not in want:
        return ours, want
    want = re.sub(r"\n *ft_(in|out)=[^\n]*", "", want)
    return re.sub(r"\n *num_(carry|consts)=[^\n]*", "", ours), want


def test_layout_matches_jax():
    """Where the programs agree, ftrans prints them exactly as JAX does: a jaxpr, a parameter list
    or a tuple of branches stays on one line when it fits in 80 columns, else breaks at each part."""
    ours = _layout_cases(jnp, ftrans.lax)
    theirs = _layout_cases(jjnp, jax.lax)
    for (f, args), (g, _) in zip(ours, theirs):
        want = jax.make_jaxpr(g)(*args).pretty_print(use_color=False)
        got, want = _scan_params_alike(str(ftrans.make_jaxpr(f)(*args)), want)
        assert got == want


def _jit_cases(lib, np_mod, lax_mod):
    """Programs calling jitted functions whose ftrans and JAX jaxprs hold the same equations."""
    x1 = np.array([4.2], np.float32)
    x3 = np.arange(3, dtype=np.float32)

    def large_inner(x):  # a body of eleven equations is printed first, by name; the small one in place
        small = lib.jit(lambda y: y + 1)

        @lib.jit
        def large(y):
            for _ in range(11):
                y = y + 1
            return y

        return large(small(x))

    def nested3(x):
        f = lib.jit(lambda y: y + 1)
        g = lib.jit(lambda y: f(y) * 2)
        return lib.jit(lambda y: g(y) - 3)(x)

    def shared(x):  # a cached body called twice (outside any jit): printed once, by name
        f = lib.jit(lambda y: y ** 2)
        return f(x) + f(x)

    def dropped(x):  # a result nobody reads prints as `_`, in the body too
        a, b = lib.jit(lambda y: (np_mod.sin(y), np_mod.cos(y)))(x)
        return b

    return [
        (lambda x: x + lib.jit(lambda a, b: a)(x, x), (x1,)),  # the body's inputs named as the operands
        (lambda x: lib.jit(lambda a, b, c: a * b * c)(x, x, x), (x1,)),  # an operand passed thrice
        (lambda x: lib.jit(lambda a, b: a * b)(x, np.float32(1.0)), (x1,)),  # a literal operand
        (lib.jit(lambda x: (np.int32(2), x)), (x1,)),  # a literal result
        (lambda x, y: lib.jit(lambda a, b: (b, a))(x, y), (x3, x3)),
        (lambda x: lib.jit(lambda a: (a, a))(x), (x3,)),  # an input returned twice
        (lambda x: lib.jit(lambda a: a * 2, donate_argnums=0)(x), (x3,)),  # donation is shown
        (lambda x: lib.vmap(lib.jit(lambda y: y * 2))(x), (x3,)),
        (large_inner, (np.zeros(2, np.int32),)),
        (nested3, (x3,)),
        (shared, (x1,)),
        (dropped, (x3,)),
        (lambda x: lib.linearize(np_mod.sin, x)[1](x), (x3,)),  # unread results of the top level print as `_`
        (lambda x: lax_mod.fori_loop(0, 3, lambda i, c: c + i, x), (x3,)),
        (lambda a, b: a @ b, (np.ones((4, 5), np.float32), np.ones((5, 4), np.float32))),  # dot_general's params
    ]


def test_jitted_calls_print_as_jax():
    """A jitted call prints as JAX's `jit[name=f jaxpr={ lambda ... }]` (its defaults left out), the body's
    inputs and outputs named as the call's operands and results, exactly as JAX prints the same program."""
    ours = _jit_cases(ftrans, jnp, ftrans.lax)
    theirs = _jit_cases(jax, jjnp, jax.lax)
    for (f, args), (g, _) in zip(ours, theirs):
        want = jax.make_jaxpr(g)(*args).pretty_print(use_color=False)
        got, want = _scan_params_alike(ftrans.make_jaxpr(f)(*args).pretty_print(), want)
        assert got == want
    assert "jit[name=large jaxpr=large]" in ftrans.make_jaxpr(ours[8][0])(*ours[8][1]).pretty_print()


def test_html_output_format_matches_jax():
    """`output_format="html"` (or JAX's own `OutputFormat.HTML`) is JAX's HTML: the text, escaped, each
    binder an anchor (`<a id="v_a">`), each use a link to it, a shared body's name linked to its definition."""
    from jax._src import pretty_printer as jpp

    ours = _jit_cases(ftrans, jnp, ftrans.lax)
    theirs = _jit_cases(jax, jjnp, jax.lax)
    for (f, args), (g, _) in zip(ours, theirs):
        want = jax.make_jaxpr(g)(*args).pretty_print(use_color=False, output_format=jpp.OutputFormat.HTML)
        closed = ftrans.make_jaxpr(f)(*args)
        assert _scan_params_alike(closed.pretty_print(output_format="html"), want) == \
            _scan_params_alike(closed.pretty_print(output_format=jpp.OutputFormat.HTML), want)
        got, want = _scan_params_alike(closed.pretty_print(output_format="html"), want)
        assert got == want
    text = ftrans.make_jaxpr(ours[10][0])(*ours[10][1]).pretty_print(output_format="html")
    assert '<a id="g_lambda">lambda</a>' in text and 'jaxpr=<a href="#g_lambda">lambda</a>' in text
    assert "name=&lt;lambda&gt;" in text
    with pytest.raises(ValueError, match="output_format must be 'text' or 'html'"):
        closed.pretty_print(output_format="pdf")


def test_pretty_print_options_match_jax():
    """`print_shapes=False`, `print_effects`, `width` and `name_stack` print as JAX's do."""

    def build(lib, np_mod):
        def f(x):
            lib.debug.print("{}", x)  # (only its effect is compared: the two primitives' params differ)
            return x

        return lambda x: lib.jit(lambda y: np_mod.sin(y) * 2.0)(x) + 1.0, f

    x3 = np.arange(3, dtype=np.float32)
    (f, eff), (g, jeff) = build(ftrans, jnp), build(jax, jjnp)
    ours, theirs = ftrans.make_jaxpr(f)(x3), jax.make_jaxpr(g)(x3)
    for kw in ({"print_shapes": False}, {"print_effects": True}, {"width": 40}, {"width": 200}):
        assert ours.pretty_print(**kw) == theirs.pretty_print(use_color=False, **kw), kw
    assert ftrans.make_jaxpr(eff)(x3).pretty_print(print_effects=True).endswith(" in (a,) : { Debug } }")
    assert jax.make_jaxpr(jeff)(x3).pretty_print(print_effects=True, use_color=False).endswith(" : { Debug } }")
    # without the primitives' own printing rules, a jitted call is the primitive it is, with every param
    plain = ours.pretty_print(custom_pp_eqn_rules=False)
    assert "= jit_call[" in plain and "donated_invars=(False,)" in plain


def test_pp_context_and_kv_pairs_as_jax():
    """`JaxprPpContext`, `JaxprPpSettings` and `pp_kv_pair` (jax.core's), for printing rules and interpreters."""
    from ftrans import core

    context, settings = core.JaxprPpContext(), core.JaxprPpSettings()
    assert str(core.pp_kv_pair("test", frozenset({"b", "a", "c"}), context, settings)) == "test=frozenset({'a', 'b', 'c'})"
    assert str(core.pp_kv_pair("test_empty", frozenset(), context, settings)) == "test_empty=frozenset({})"

    def my_function():
        pass

    text = str(core.pp_kv_pair("policy", my_function, context, settings))
    assert re.fullmatch(r"policy=<function test_pp_context_and_kv_pairs_as_jax\.<locals>\.my_function at 0xX+>", text)
    closed = ftrans.make_jaxpr(lambda x: ftrans.jit(lambda y: y * 2.0)(x))(x3)
    body = closed.eqns[0].params["jaxpr"]
    assert str(core.pp_kv_pair("jaxpr", body)) == "jaxpr={ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }"
    assert str(core.pp_toplevel_jaxpr(closed)) == closed.pretty_print()
    # suggest_same_var_names: a body's variables named after the caller's
    ctx = core.JaxprPpContext()
    ctx.suggest_same_var_names(body.jaxpr.invars, closed.jaxpr.invars)
    assert ctx.var_names[body.jaxpr.invars[0]] == ctx.var_names[closed.jaxpr.invars[0]] == "a"


def test_printing_a_large_program_stays_fast():
    """Printing is linear in the program: 9,000 equations (and 2,000 calls of a shared jitted body) print in well
    under a second each."""
    import time

    def f(x):
        for _ in range(3000):
            x = jnp.sin(x) * 2.0 + x
        return x

    g = ftrans.jit(lambda y: jnp.cos(y) * 3.0)

    def h(x):
        for _ in range(2000):
            x = g(x) + 1.0
        return x

    for fn in (f, h):
        closed = ftrans.make_jaxpr(fn)(x3)
        t0 = time.perf_counter()
        text = str(closed)
        assert time.perf_counter() - t0 < 3.0 and text.count("\n") > 4000


def test_eqn_str_matches_jax():
    x3 = np.arange(3, dtype=np.float32)
    ours = ftrans.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(x3).eqns
    theirs = jax.make_jaxpr(lambda x: jjnp.sin(x) * 2.0)(x3).eqns
    assert [str(e) for e in ours] == [str(e) for e in theirs] == ["a:f32[3] = sin b", "a:f32[3] = mul b 2.0:f32[]"]


def _noted(np_mod, named_scope):
    def f(x):
        with named_scope("foo"):
            y = np_mod.sin(x) * 2.0
        return y + x if x.ndim else y

    return f


def test_source_info_and_name_stack_notes_match_jax():
    """The notes follow the text, each line's aligned one column past the widest line, a line's second note on
    a line of its own (`# file:line:column (function)`, `# [scope]`), exactly as JAX's printer places them."""
    x3 = np.arange(3, dtype=np.float32)
    for x in (x3, np.float32(1)):  # a program on one line (two notes on it), one broken into lines
        ours = ftrans.make_jaxpr(_noted(jnp, ftrans.named_scope))(x)
        theirs = jax.make_jaxpr(_noted(jjnp, jax.named_scope))(x)
        for kw in ({"source_info": True}, {"name_stack": True}, {"source_info": True, "name_stack": True},
                   {"source_info": True, "annotation_prefix": " ## "}):
            assert ours.pretty_print(**kw) == theirs.pretty_print(use_color=False, **kw), kw


def test_names_match_jax_past_z():
    def make(np_mod):
        def f(x):
            for _ in range(28):
                x = np_mod.sin(x)
            return x
        return f

    ours = staged_str(make(jnp), np.float32(1.0)).split()
    theirs = str(jax.make_jaxpr(make(jjnp))(np.float32(1.0))).split()
    assert ours == theirs


def test_print_params():
    out = staged_str(lambda x: x.reshape(3, 1).T, x3)
    assert out == (
        "{ lambda ; a:f32[3]. let\n"
        "    b:f32[3,1] = reshape[dimensions=None new_sizes=(3, 1)] a\n"
        "    c:f32[1,3] = transpose[permutation=(1, 0)] b\n"
        "  in (c,) }"
    )
    assert "reduce_sum[axes=(0,)] a" in staged_str(jnp.sum, x3)


def test_print_dtype_param_uses_numpy_name():
    # A dtype parameter prints as NumPy names it (JAX's printer), unlike the short names of types.
    closed = ftrans.make_jaxpr(
        lambda x: ftrans.core.prims.structural.convert_element_type_p.bind(x, new_dtype=I32, weak_type=False)
    )(x3)
    assert "b:i32[3] = convert_element_type[new_dtype=int32 weak_type=False] a" in str(closed)


def test_print_constvars_exact():
    c = np.arange(3, dtype=np.float32)
    assert staged_str(lambda x: x + c, x3) == (
        "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add b a in (c,) }"
    )


def test_print_multiple_outputs_exact():
    assert staged_str(lambda x: (x * 2.0, 3), x3) == (
        "{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b, 3:i32[]) }"
    )


def test_print_dropvar_and_no_eqns():
    a = ir.Var(ShapedArray((3,), F32))
    d = ir.DropVar(ShapedArray((3,), F32))
    jaxpr = ir.Jaxpr([], [a], [ir.JaxprEqn(registry["sin"], [a], [d], {}, None)], [a])
    assert "_:f32[3] = sin a" in str(jaxpr)
    assert staged_str(lambda x: x, x3) == "{ lambda ; a:f32[3]. let  in (a,) }"


# ----------------------------------------------------------------------------
# Constants and source info


def test_constvars_capture_concrete_closure():
    c_np = np.arange(3, dtype=np.float32) + 1
    c_arr = jnp.asarray(c_np * 2)
    closed = ftrans.make_jaxpr(lambda x: x * c_np + c_arr)(x3)
    assert len(closed.jaxpr.constvars) == 2 and len(closed.consts) == 2
    assert [v.aval for v in closed.jaxpr.constvars] == [ShapedArray((3,), F32)] * 2
    np.testing.assert_array_equal(np.asarray(closed.consts[0]), c_np)
    np.testing.assert_array_equal(np.asarray(closed.consts[1]), c_np * 2)
    (out,) = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x3)
    np.testing.assert_allclose(np.asarray(out), x3 * c_np + c_np * 2)


def test_same_array_constant_captured_once():
    c = jnp.ones(3)
    closed = ftrans.make_jaxpr(lambda x: x * c + c)(x3)
    assert len(closed.consts) == 1


def test_same_numpy_constant_captured_once():
    """JAX captures a NumPy constant used twice as one constvar."""
    c = np.ones(3, np.float32)
    closed = ftrans.make_jaxpr(lambda x: x * c + c)(x3)
    assert len(closed.consts) == 1
    assert len(jax.make_jaxpr(lambda x: x * c + c)(x3).consts) == 1


def test_copies_of_one_numpy_constant_are_one_constvar_like_jax():
    """jnp.array(c) of a NumPy constant c, used next to c itself, is one constvar (as in JAX); equal values that
    differ in dtype or weak type, or device-resident arrays, are not merged."""
    c = np.ones(3, np.float32)

    def f(lib, np_):
        return lambda: (np_.array(c), np_.sum(c), c, np_.array(c), np_.sum(c), c)

    ours, theirs = ftrans.make_jaxpr(f(ftrans, jnp))(), jax.make_jaxpr(f(jax, jjnp))()
    assert len(ours.consts) == len(theirs.consts) == 1
    def pattern(outs):
        return [next(i for i, p in enumerate(outs) if p is o) for o in outs]

    assert pattern(ours.jaxpr.outvars) == pattern(theirs.jaxpr.outvars) == [0, 1, 0, 0, 4, 0]
    two = ftrans.make_jaxpr(lambda: (np.ones(3, np.float32), np.ones(3, np.int32), jnp.ones(3) * 1))()
    assert len(two.consts) == 2  # the i32 ones stay apart; the f32 result of an eager op is the f32 constant
    on_device = ftrans.device_put(np.ones(3, np.float32), ftrans.devices()[0])
    assert len(ftrans.make_jaxpr(lambda: (on_device, np.ones(3, np.float32)))().consts) == 2


def test_scalar_constants_become_literals():
    s = np.float32(2.5)
    closed = ftrans.make_jaxpr(lambda x: x * s)(x3)
    assert closed.consts == []
    assert "mul a 2.5:f32[]" in str(closed)


def test_source_info_names_this_file_and_line():
    lines = []

    def f(x):
        lines.append(_lineno() + 1)
        y = jnp.sin(x)
        lines.append(_lineno() + 1)
        return y * 2.0

    closed = ftrans.make_jaxpr(f)(x3)
    text = closed.pretty_print(source_info=True)
    where = "(test_source_info_names_this_file_and_line.<locals>.f)"
    assert text.startswith("{ lambda ; a:f32[3]. let b:f32[3] = sin a; c:f32[3] = mul b 2.0:f32[] in (c,) } # ")
    assert f" # {__file__}:{lines[0]}:12 {where}\n" in text and text.endswith(f" # {__file__}:{lines[1]}:15 {where}")
    si = closed.eqns[0].source_info
    assert si.filename == __file__ and si.lineno == lines[0] and si.function == "f"
    assert "#" not in str(closed)


def _lineno() -> int:
    import sys

    return sys._getframe(1).f_lineno


# ----------------------------------------------------------------------------
# Type checking


def _sin_eqn(inp, out):
    return ir.JaxprEqn(registry["sin"], [inp], [out], {}, None)


def test_typecheck_accepts_staged_programs():
    def mlp(x, ws):
        for w, b in ws:
            x = jnp.tanh(x @ w + b)
        return jnp.sum(x, axis=-1), x.max()

    ws = [(np.ones((4, 4), np.float32), np.zeros(4, np.float32))] * 3
    closed = ftrans.make_jaxpr(mlp)(np.ones((2, 4), np.float32), ws)
    ir.typecheck(closed)
    ir.typecheck(closed.jaxpr)
    assert closed.out_avals == [ShapedArray((2,), F32), ShapedArray((), F32)]


def test_typecheck_rejects_wrong_out_aval():
    a = ir.Var(ShapedArray((3,), F32))
    b = ir.Var(ShapedArray((3,), I32))
    with pytest.raises(JaxprTypeError, match="sin"):
        ir.typecheck(ir.Jaxpr([], [a], [_sin_eqn(a, b)], [b]))
    c = ir.Var(ShapedArray((4,), F32))
    with pytest.raises(JaxprTypeError, match="f32\\[4\\]"):
        ir.typecheck(ir.Jaxpr([], [a], [_sin_eqn(a, c)], [c]))


def test_typecheck_rejects_use_before_def():
    a = ir.Var(ShapedArray((3,), F32))
    b = ir.Var(ShapedArray((3,), F32))
    c = ir.Var(ShapedArray((3,), F32))
    with pytest.raises(JaxprTypeError, match="Variable .* not defined"):
        ir.typecheck(ir.Jaxpr([], [a], [_sin_eqn(b, c), _sin_eqn(a, b)], [c]))
    with pytest.raises(JaxprTypeError, match="Variable .* not defined"):
        ir.typecheck(ir.Jaxpr([], [a], [], [b]))  # an output nobody defined


def test_typecheck_rejects_double_definition():
    a = ir.Var(ShapedArray((3,), F32))
    b = ir.Var(ShapedArray((3,), F32))
    with pytest.raises(JaxprTypeError, match="Variable .* already bound"):
        ir.typecheck(ir.Jaxpr([], [a], [_sin_eqn(a, b), _sin_eqn(a, b)], [b]))
    with pytest.raises(JaxprTypeError, match="Variable .* already bound"):
        ir.typecheck(ir.Jaxpr([], [a], [_sin_eqn(a, a)], [a]))
    with pytest.raises(JaxprTypeError, match="Variable .* already bound"):
        ir.typecheck(ir.Jaxpr([a], [a], [], [a]))


def test_typecheck_rejects_ill_typed_operands():
    a = ir.Var(ShapedArray((3,), F32))
    i = ir.Var(ShapedArray((3,), I32))
    out = ir.Var(ShapedArray((3,), F32))
    eqn = ir.JaxprEqn(registry["add"], [a, i], [out], {}, None)
    with pytest.raises(JaxprTypeError, match="add"):
        ir.typecheck(ir.Jaxpr([], [a, i], [eqn], [out]))
    assert issubclass(JaxprTypeError, TypeError)


def test_typecheck_accepts_hand_built_program_with_literal():
    a = ir.Var(ShapedArray((3,), F32))
    b = ir.Var(ShapedArray((3,), F32))
    two = ir.Literal(np.float32(2.0), ShapedArray((), F32, True))
    jaxpr = ir.Jaxpr([], [a], [ir.JaxprEqn(registry["mul"], [a, two], [b], {}, None)], [b])
    ir.typecheck(jaxpr)
    (out,) = ftrans.eval_jaxpr(jaxpr, [], x3)
    np.testing.assert_allclose(np.asarray(out), x3 * 2)


def test_closed_jaxpr_checks_const_count():
    a = ir.Var(ShapedArray((3,), F32))
    with pytest.raises(ValueError):
        ir.ClosedJaxpr(ir.Jaxpr([a], [], [], [a]), [])


# ----------------------------------------------------------------------------
# eval_jaxpr, eval_shape


def test_eval_jaxpr_round_trips():
    def f(x, y):
        return jnp.tanh(x @ y) + 1.0, jnp.sum(x * 2, axis=0)

    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((4, 2)).astype(np.float32)
    closed = ftrans.make_jaxpr(f)(x, y)
    got = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    want = f(x, y)
    assert len(got) == 2
    for g, w in zip(got, want):
        assert isinstance(g, ftrans.Array)
        assert (g.shape, g.dtype, g.weak_type) == (w.shape, w.dtype, w.weak_type)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    jx = jax.jit(lambda x, y: (jjnp.tanh(x @ y) + 1.0, jjnp.sum(x * 2, axis=0)))(x, y)
    for g, w in zip(got, jx):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_eval_jaxpr_accepts_closed_jaxpr_and_checks_arity():
    c = np.full(3, 2.0, np.float32)
    closed = ftrans.make_jaxpr(lambda x: x * c)(x3)
    (out,) = ftrans.eval_jaxpr(closed, [], x3)
    np.testing.assert_allclose(np.asarray(out), x3 * 2)
    with pytest.raises(TypeError, match="1 inputs, got 2"):
        ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x3, x3)


def test_eval_jaxpr_restages():
    """eval_jaxpr binds primitives, so staging it again gives the same program."""
    closed = ftrans.make_jaxpr(lambda x: jnp.sin(x) * 2.0 + jnp.sum(x))(x3)
    again = ftrans.make_jaxpr(lambda x: ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x)[0])(x3)
    assert str(again) == str(closed)


def test_eval_shape_returns_shape_dtype_structs():
    def f(x, y):
        return {"s": jnp.sum(x), "pair": (x @ y, x * 2)}

    x = np.ones((2, 3), np.float32)
    y = np.ones((3, 5), np.float32)
    out = ftrans.eval_shape(f, x, y)
    want = jax.eval_shape(lambda x, y: {"s": jjnp.sum(x), "pair": (x @ y, x * 2)}, x, y)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(want)
    for o, w in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(want)):
        assert isinstance(o, ftrans.ShapeDtypeStruct)
        assert (o.shape, o.dtype) == (w.shape, w.dtype)


def test_eval_shape_does_not_compute():
    big = ftrans.ShapeDtypeStruct((100_000, 100_000), np.float32)
    out = ftrans.eval_shape(lambda a: (a @ a.T).sum(axis=0), big)
    assert out.shape == (100_000,) and out.dtype == F32


def test_eval_shape_weak_type():
    out = ftrans.eval_shape(lambda s: s * 2, 1.0)
    assert out.weak_type and out.dtype == F32
    assert not ftrans.eval_shape(lambda x: x * 2, x3).weak_type


# ----------------------------------------------------------------------------
# make_jaxpr plumbing: pytrees, kwargs, static args


def test_pytree_inputs_and_outputs():
    def f(d, t, nothing):
        assert nothing is None
        return {"sum": d["a"] + t[0], "none": None, "pair": (t[1], d["b"])}

    d = {"a": x3, "b": np.int32(4)}
    t = (x3 * 2, 7.0)
    closed, shapes = ftrans.make_jaxpr(f, return_shape=True)(d, t, None)
    assert [a.str_short() for a in closed.in_avals] == ["f32[3]", "i32[]", "f32[3]", "f32[]"]
    assert closed.in_avals[3].weak_type
    assert len(closed.out_avals) == 3
    assert shapes["none"] is None
    assert shapes["sum"].shape == (3,) and shapes["pair"][0].weak_type
    assert shapes["pair"][1].dtype == I32
    ir.typecheck(closed)


def test_kwargs_become_inputs():
    closed = ftrans.make_jaxpr(lambda x, *, scale: x * scale)(x3, scale=np.float32(3))
    assert len(closed.jaxpr.invars) == 2
    (out,) = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, x3, np.float32(3))
    np.testing.assert_allclose(np.asarray(out), x3 * 3)


def test_static_argnums():
    def f(x, n, mode):
        y = x
        for _ in range(n):
            y = jnp.sin(y)
        return y * 2.0 if mode == "double" else y

    closed = ftrans.make_jaxpr(f, static_argnums=(1, 2))(x3, 3, "double")
    assert len(closed.jaxpr.invars) == 1
    assert [e.primitive.name for e in closed.eqns] == ["sin", "sin", "sin", "mul"]
    closed1 = ftrans.make_jaxpr(f, static_argnums=(1, 2))(x3, 1, "plain")
    assert [e.primitive.name for e in closed1.eqns] == ["sin"]
    closed2 = ftrans.make_jaxpr(lambda x, n: x * n, static_argnums=1)(x3, 5)
    assert "mul a 5.0:f32[]" in str(closed2)


def test_non_array_argument_without_static_is_an_error():
    with pytest.raises(TypeError, match="str"):
        ftrans.make_jaxpr(lambda x, s: x)(x3, "hello")


def test_make_jaxpr_unsupported_arguments_name_themselves():
    with pytest.raises(NotImplementedError, match="abstracted_axes"):
        ftrans.make_jaxpr(jnp.sin, abstracted_axes=({0: "n"},))


def test_make_jaxpr_preserves_function_metadata():
    def my_function(x):
        """doc"""
        return x

    class C:
        def method(self, x):
            return x

    for f in (my_function, C().method):
        m, jm = ftrans.make_jaxpr(f), jax.make_jaxpr(f)
        assert (m.__name__, m.__qualname__) == (jm.__name__, jm.__qualname__)
        assert m.__wrapped__ is f and m.__module__ == "ftrans"  # JAX's is "jax"
    assert ftrans.make_jaxpr(my_function).__name__ == "make_jaxpr(my_function)"
    assert ftrans.make_jaxpr(my_function).__doc__ == "doc"
    assert ftrans.make_jaxpr(C().method).__qualname__.endswith("C.method)")


def test_staged_operations_on_constants_are_recorded():
    """Under make_jaxpr even arithmetic on closed-over constants is staged, as in JAX."""
    c = np.ones(3, np.float32)
    closed = ftrans.make_jaxpr(lambda x: x + jnp.sin(c))(x3)
    assert [e.primitive.name for e in closed.eqns] == ["sin", "add"]
    jclosed = jax.make_jaxpr(lambda x: x + jjnp.sin(c))(x3)
    assert [e.primitive.name for e in jclosed.eqns] == ["sin", "add"]


# ----------------------------------------------------------------------------
# Nested jaxprs: subjaxprs / replace_subjaxprs on every higher-order primitive


@ftrans.custom_jvp
def _cj(a):
    return jnp.sin(a)


_cj.defjvp(lambda p, t: (_cj(p[0]), jnp.cos(p[0]) * t[0]))


@ftrans.custom_vjp
def _cv(a):
    return jnp.exp(a)


_cv.defvjp(lambda a: (jnp.exp(a), jnp.exp(a)), lambda r, g: (r * g,))

# primitive name -> (function staging it, how many jaxprs the equation holds)
HIGHER_ORDER = {
    "cond": (lambda x: ftrans.lax.cond(x[0] > 0, jnp.sin, jnp.cos, x), 2),
    "while": (lambda x: ftrans.lax.while_loop(lambda c: c[0] < 5.0, lambda c: c + 1.0, x), 2),
    "scan": (lambda x: ftrans.lax.scan(lambda c, a: (c + a, c * a), 0.0, x), 1),
    "jit_call": (lambda x: ftrans.jit(lambda a: a * 2.0)(x), 1),
    "remat2": (lambda x: ftrans.checkpoint(lambda a: jnp.exp(a))(x), 1),
    "custom_jvp_call": (_cj, 1),
    "custom_vjp_call": (_cv, 1),
}


def _the_eqn(closed, name):
    eqns = [e for e in closed.eqns if e.primitive.name == name]
    assert len(eqns) == 1, [e.primitive.name for e in closed.eqns]
    return eqns[0]


@pytest.mark.parametrize("name", sorted(HIGHER_ORDER))
def test_subjaxprs_finds_every_body(name):
    f, n = HIGHER_ORDER[name]
    closed = ftrans.make_jaxpr(f)(x3)
    eqn = _the_eqn(closed, name)
    subs = ir.subjaxprs(eqn)
    assert len(subs) == n
    assert all(isinstance(s, (ir.Jaxpr, ir.ClosedJaxpr)) for s in subs)
    # each one is held by a parameter that subjaxpr_params names
    held = [eqn.params[k] for k in ir.subjaxpr_params(eqn)]
    flat = [x for v in held for x in (v if isinstance(v, (tuple, list)) else [v])]
    assert [id(s) for s in flat] == [id(s) for s in subs]
    # the walk over the program visits the program and every body once
    assert len(ir.all_jaxprs(closed)) == 1 + n


@pytest.mark.parametrize("name", sorted(HIGHER_ORDER))
def test_replace_subjaxprs_round_trips(name):
    f, _ = HIGHER_ORDER[name]
    closed = ftrans.make_jaxpr(f)(x3)
    eqn = _the_eqn(closed, name)
    subs = ir.subjaxprs(eqn)
    assert ir.replace_subjaxprs(eqn, subs) is eqn  # nothing changed: the same equation

    def copy(s):
        j = s.jaxpr if isinstance(s, ir.ClosedJaxpr) else s
        j2 = ir.Jaxpr(j.constvars, j.invars, j.eqns, j.outvars)
        return ir.ClosedJaxpr(j2, s.consts) if isinstance(s, ir.ClosedJaxpr) else j2

    new = [copy(s) for s in subs]
    eqn2 = ir.replace_subjaxprs(eqn, new)
    assert eqn2 is not eqn and eqn2.primitive is eqn.primitive
    assert [id(s) for s in ir.subjaxprs(eqn2)] == [id(s) for s in new]
    assert {k: v for k, v in eqn2.params.items() if k not in ir.subjaxpr_params(eqn)} == \
        {k: v for k, v in eqn.params.items() if k not in ir.subjaxpr_params(eqn)}
    assert ir.map_subjaxprs(eqn, lambda s: s) is eqn
    # the rebuilt program is well typed, prints the same, and computes the same
    prog = ir.ClosedJaxpr(ir.Jaxpr(closed.jaxpr.constvars, closed.jaxpr.invars,
                                   [eqn2 if e is eqn else e for e in closed.eqns], closed.jaxpr.outvars),
                          closed.consts)
    ir.typecheck(prog)
    assert str(prog) == str(closed)
    want = ftrans.core.jaxpr_api.eval_jaxpr(closed.jaxpr, closed.consts, x3)
    got = ftrans.core.jaxpr_api.eval_jaxpr(prog.jaxpr, prog.consts, x3)
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w))


def test_replace_subjaxprs_checks_the_count():
    closed = ftrans.make_jaxpr(HIGHER_ORDER["cond"][0])(x3)
    eqn = _the_eqn(closed, "cond")
    with pytest.raises(ValueError, match="holds 2 jaxprs but 1 were given"):
        ir.replace_subjaxprs(eqn, ir.subjaxprs(eqn)[:1])
    plain = closed.eqns[0]
    assert ir.subjaxprs(plain) == [] and ir.replace_subjaxprs(plain, []) is plain


def test_subjaxprs_of_nested_programs_and_grad():
    def f(x):
        y = ftrans.lax.cond(x[0] > 0, lambda a: ftrans.jit(jnp.sin)(a), jnp.cos, x)
        s, ys = ftrans.lax.scan(lambda c, a: (c + a, c * a), 0.0, y)
        return (_cv(_cj(ftrans.checkpoint(jnp.exp)(ys)))).sum() + s

    for prog in (ftrans.make_jaxpr(f)(x3), ftrans.make_jaxpr(ftrans.grad(f))(x3)):
        ir.typecheck(prog)
        names = {e.primitive.name for j in ir.all_jaxprs(prog) for e in j.eqns}
        assert {"cond", "scan", "jit_call"} <= names
        nested_sin = [e for j in ir.all_jaxprs(prog)[1:] for e in j.eqns if e.primitive.name == "sin"]
        assert nested_sin  # found two levels down (cond branch -> jit_call body)


def test_printer_shows_nested_bodies_and_custom_params():
    s = staged_str(HIGHER_ORDER["while"][0], x3)
    assert "body_jaxpr={ lambda" in s and "cond_jaxpr={ lambda" in s
    s = staged_str(HIGHER_ORDER["cond"][0], x3)
    assert "branches=(\n" in s and s.count("{ lambda") == 3
    h = ftrans.make_jaxpr(HIGHER_ORDER["scan"][0])(x3)._repr_html_()
    assert h.count("<details>") == 1 and "jaxpr: " in h


def test_typecheck_rejects_an_ill_typed_nested_body():
    closed = ftrans.make_jaxpr(HIGHER_ORDER["jit_call"][0])(x3)
    eqn = _the_eqn(closed, "jit_call")
    body = ir.subjaxprs(eqn)[0]
    j = body.jaxpr
    a = j.invars[0]
    bad_out = ir.Var(ShapedArray((4,), F32))  # mul of f32[3] declared as f32[4]
    bad_eqn = j.eqns[0].replace(outvars=[bad_out])
    bad = ir.ClosedJaxpr(ir.Jaxpr(j.constvars, [a], [bad_eqn], [bad_out]), body.consts)
    eqn2 = ir.replace_subjaxprs(eqn, [bad])
    prog = ir.Jaxpr(closed.jaxpr.constvars, closed.jaxpr.invars,
                    [eqn2 if e is eqn else e for e in closed.eqns], closed.jaxpr.outvars)
    with pytest.raises(JaxprTypeError,
                       match="in the body of `jit_call`.*inconsistently typed as f32\\[3\\] for let-binder of type f32\\[4\\]"):
        ir.typecheck(prog)


def test_jaxpr_effects_empty_for_pure_programs_as_jax():
    pure = ftrans.make_jaxpr(lambda x: x + 1.0)(2.0)
    assert pure.effects == pure.jaxpr.effects == jax.make_jaxpr(lambda x: x + 1.0)(2.0).effects == set()

    def f(x):
        ftrans.debug.print("{}", x)
        return ftrans.lax.cond(x > 0, lambda v: ftrans.debug.callback(print, v) or v, lambda v: v, x)

    def g(x):
        jax.debug.print("{}", x)
        return jax.lax.cond(x > 0, lambda v: jax.debug.callback(print, v) or v, lambda v: v, x)

    # at any depth, named as JAX's effect classes (one DebugEffect for both)
    got = ftrans.make_jaxpr(f)(2.0).effects
    assert {repr(e) for e in got} == {type(e).__name__ for e in jax.make_jaxpr(g)(2.0).effects} == {"DebugEffect"}
