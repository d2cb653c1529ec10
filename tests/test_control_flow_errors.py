"""Bad input to control flow: a specific exception type, and a message that names the user's line.

Each failing call below is a one-line lambda, so the line the message must name
is the lambda's own (``co_firstlineno``); errors raised while tracing a body
name the body's line instead.  After every failure the trace state is clean and
a jitted function that failed can be called again with good input.
"""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import errors, lax
from ftrans.core import trace

ME = os.path.basename(__file__)
X3 = np.arange(3, dtype=np.float32)
XS = np.ones((2, 3), np.float32)


def here() -> int:
    return sys._getframe(1).f_lineno


def assert_clean_trace_state() -> None:
    st = trace.state
    assert st.eval_only is True
    assert len(st.stack) == 1 and st.dynamic is st.base
    out = lax.cond(True, lambda a: jnp.sin(a), lambda a: a, X3)  # control flow still works eagerly
    np.testing.assert_allclose(np.asarray(out), np.sin(X3), rtol=1e-6)


def jitted(fun):
    """``ftrans.jit(fun)`` and the line of ``fun``'s body, which errors raised while tracing it name."""
    return ftrans.jit(fun), fun.__code__.co_firstlineno


def expect(exc_type, call, *fragments, line=None):
    """``call()`` raises exactly ``exc_type`` (a subclass counts), naming ``line`` (default: call's own line)."""
    with pytest.raises(exc_type) as ei:
        call()
    e = ei.value
    msg = str(e)
    assert isinstance(e, errors.FtransError), f"{type(e).__name__} is not an ftrans error: {msg}"
    line = call.__code__.co_firstlineno if line is None else line
    assert f"{ME}:{line}" in msg, f"message does not name {ME}:{line}:\n{msg}"
    assert msg.rstrip().endswith(f"{ME}:{line})"), msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in message:\n{msg}"
    assert_clean_trace_state()
    return e


# ----------------------------------------------------------------------------
# Python control flow on traced values


def test_python_if_on_traced_value_suggests_cond():
    lines = []

    def f(x):
        lines.append(here() + 1)
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(errors.TracerBoolConversionError) as ei:
        ftrans.jit(f)(X3)
    msg = str(ei.value)
    assert isinstance(ei.value, errors.ConcretizationTypeError) and isinstance(ei.value, TypeError)
    assert f"{ME}:{lines[0]}" in msg, msg
    assert "lax.cond" in msg and "static" in msg
    assert_clean_trace_state()


def test_python_while_on_traced_value_suggests_while_loop():
    lines = []

    def f(x):
        lines.append(here() + 1)
        while x.sum() < 10:
            x = x * 2
        return x

    with pytest.raises(errors.TracerBoolConversionError) as ei:
        ftrans.jit(f)(X3)
    msg = str(ei.value)
    assert f"{ME}:{lines[0]}" in msg, msg
    assert "while_loop" in msg
    assert_clean_trace_state()


def test_python_if_inside_a_scan_body_even_eagerly():
    # Bodies are always staged (as in JAX), so a Python `if` on the carry fails even outside jit.
    lines = []

    def body(c, x):
        lines.append(here() + 1)
        if c > 0:
            return c - x, c
        return c + x, c

    with pytest.raises(errors.TracerBoolConversionError) as ei:
        lax.scan(body, 0.0, X3)
    assert f"{ME}:{lines[0]}" in str(ei.value) and "lax.cond" in str(ei.value)
    assert_clean_trace_state()


def test_int_of_traced_loop_index():
    lines = []

    def body(i, c):
        lines.append(here() + 1)
        return c + X3[: int(i) + 1].sum()

    with pytest.raises(errors.ConcretizationTypeError) as ei:
        ftrans.jit(lambda n: lax.fori_loop(0, n, body, 0.0))(3)
    assert f"{ME}:{lines[0]}" in str(ei.value)
    assert_clean_trace_state()


# ----------------------------------------------------------------------------
# Branches that disagree


def test_branches_return_different_structures():
    e = expect(errors.FtransTypeError, lambda: lax.cond(True, lambda a: (a, a), lambda a: a, X3),
               "cond", "true_fun", "false_fun", "pytree structure")
    assert "(*, *)" in str(e)
    expect(errors.FtransTypeError, lambda: lax.cond(True, lambda a: {"x": a}, lambda a: {"y": a}, X3),
           "'x'", "'y'")
    expect(errors.FtransTypeError, lambda: lax.switch(2, [lambda: 1.0, lambda: 2.0, lambda: (3.0,)]),
           "switch", "branches[0]", "branches[2]", "pytree structure")


def test_branches_return_different_types():
    # The message names both branches, the output path, and both types.
    expect(errors.FtransTypeError,
           lambda: lax.cond(True, lambda a: {"x": (a, a)}, lambda a: {"x": (a, a.astype(np.int32))}, X3),
           "false_fun", "true_fun", "output['x'][1]", "i32[3]", "f32[3]")
    expect(errors.FtransTypeError, lambda: lax.cond(True, lambda a: a, lambda a: a.sum(), X3),
           "f32[]", "f32[3]")
    expect(errors.FtransTypeError, lambda: lax.cond(False, lambda: 1, lambda: 1.0), "i32[]", "f32[]")
    expect(errors.FtransTypeError, lambda: lax.switch(0, [lambda a: a, lambda a: a, lambda a: a[:2]], X3),
           "branches[0]", "branches[2]", "f32[3]", "f32[2]")


def test_branches_disagree_under_jit():
    f, line = jitted(lambda p, x: lax.cond(p, lambda a: a, lambda a: a.astype(np.int32), x))
    expect(errors.FtransTypeError, lambda: f(True, X3), "i32[3]", "f32[3]", line=line)
    g = ftrans.jit(lambda p, x: lax.cond(p, lambda a: a, lambda a: a * 2, x))
    np.testing.assert_allclose(np.asarray(g(False, X3)), X3 * 2)


def test_branch_raising_points_at_the_branch():
    lines = []

    def bad_branch(a):
        lines.append(here() + 1)
        return a + jnp.ones(4)

    with pytest.raises(errors.FtransShapeError) as ei:
        lax.cond(True, bad_branch, lambda a: a, X3)
    assert f"{ME}:{lines[0]}" in str(ei.value)
    assert_clean_trace_state()


# ----------------------------------------------------------------------------
# Loop bodies that change the carry


def test_scan_carry_changes_type():
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: (c.astype(np.int32), x), X3, XS),
           "scan", "carry", "f32[3]", "i32[3]")
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: (c.sum(), x), X3, XS), "f32[3]", "f32[]")
    expect(errors.FtransTypeError,
           lambda: lax.scan(lambda c, x: ({"a": c["a"], "b": c["b"] * 1.5}, x), {"a": X3, "b": np.int32(1)}, XS),
           "carry['b']", "i32[]", "f32[]")


def test_scan_carry_changes_structure():
    e = expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: ((c, c), x), X3, XS),
               "scan", "pytree structure")
    assert "(*, *)" in str(e)
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: ({"b": c["a"]}, x), {"a": X3}, XS), "'a'", "'b'")


def test_scan_bool_carry_cannot_be_promoted():
    # jax: a Python bool is not weakly typed, so `True * x` changes the carry's dtype: TypeError.
    with pytest.raises(TypeError):
        jax.lax.scan(lambda c, x: (c * x, c), True, X3)
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: (c * x, c), True, X3), "bool[]", "f32[]")


def test_scan_body_not_returning_a_pair():
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: c + x, X3, XS), "scan", "pair")
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: (c, x, x), X3, XS), "pair", "length 3")
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: None, X3, XS), "pair")


def test_while_body_changes_carry():
    expect(errors.FtransTypeError, lambda: lax.while_loop(lambda c: c.sum() < 3, lambda c: c.astype(np.int32), X3),
           "while_loop", "f32[3]", "i32[3]")
    expect(errors.FtransTypeError, lambda: lax.while_loop(lambda c: c[0].sum() < 3, lambda c: c[0], (X3, X3)),
           "while_loop", "pytree structure")
    expect(errors.FtransTypeError, lambda: lax.fori_loop(0, 3, lambda i, c: c[None], X3), "f32[3]", "f32[1,3]")


def test_scan_body_error_points_at_body_line():
    lines = []

    def body(c, x):
        lines.append(here() + 1)
        return c + jnp.ones(4), x

    with pytest.raises(errors.FtransShapeError) as ei:
        ftrans.jit(lambda c, xs: lax.scan(body, c, xs))(X3, XS)
    assert f"{ME}:{lines[0]}" in str(ei.value)
    assert_clean_trace_state()


# ----------------------------------------------------------------------------
# Predicates and indices


def test_non_scalar_predicate():
    expect(errors.FtransTypeError, lambda: lax.cond(X3 > 0, lambda: 1.0, lambda: 2.0), "scalar", "bool[3]",
           "jnp.where")
    f, line = jitted(lambda x: lax.cond(x > 0, lambda: 1.0, lambda: 2.0))
    expect(errors.FtransTypeError, lambda: f(X3), "scalar", "bool[3]", line=line)
    expect(errors.FtransTypeError, lambda: lax.cond([True], lambda: 1.0, lambda: 2.0), "scalar", "list")


def test_non_boolean_non_numeric_predicate():
    expect(errors.FtransTypeError, lambda: lax.cond(np.complex64(1), lambda: 1.0, lambda: 2.0), "c64[]")
    expect(errors.FtransTypeError, lambda: lax.cond("yes", lambda: 1.0, lambda: 2.0), "str")
    expect(errors.FtransTypeError, lambda: lax.cond(None, lambda: 1.0, lambda: 2.0), "None")


@pytest.mark.parametrize("index,what", [(1.0, "f32[]"), (np.array([0, 1]), "i32[2]"), (True, "bool[]"),
                                        (np.float32(0), "f32[]")], ids=repr)
def test_switch_index_not_an_integer_scalar(index, what):
    with pytest.raises(TypeError):  # jax agrees
        jax.lax.switch(index, [lambda: 1.0, lambda: 2.0])
    expect(errors.FtransTypeError, lambda: lax.switch(index, [lambda: 1.0, lambda: 2.0]), "switch", "integer",
           what)
    f, line = jitted(lambda i: lax.switch(i, [lambda: 1.0, lambda: 2.0]))
    expect(errors.FtransTypeError, lambda: f(index), "integer", what, line=line)


def test_switch_branches_empty_or_not_callable():
    expect(errors.FtransValueError, lambda: lax.switch(0, []), "switch", "non-empty")
    expect(errors.FtransTypeError, lambda: lax.switch(0, [lambda: 1.0, 3]), "branches[1]", "callable", "int")


@pytest.mark.xfail(strict=True, reason="switch raises FtransValueError (a ValueError) for branches that are not a "
                   "list/tuple; jax raises TypeError (only an empty sequence is a ValueError)")
def test_switch_branches_not_a_sequence_is_a_type_error():
    with pytest.raises(TypeError):  # jax: "branches argument should be a sequence of callables"
        jax.lax.switch(0, lambda: 1.0)
    expect(errors.FtransTypeError, lambda: lax.switch(0, lambda: 1.0), "switch", "sequence")


@pytest.mark.parametrize("cond_fun,what", [
    (lambda c: c < 3, "bool[3]"),
    (lambda c: c.sum().astype(np.int32), "i32[]"),
    (lambda c: c.sum(), "f32[]"),
    (lambda c: (c.sum() > 0, True), "bool[], bool[]"),
])
def test_cond_fun_not_a_boolean_scalar(cond_fun, what):
    with pytest.raises(TypeError):  # jax agrees
        jax.lax.while_loop(cond_fun, lambda c: c + 1, X3)
    expect(errors.FtransTypeError, lambda: lax.while_loop(cond_fun, lambda c: c + 1, X3), "cond_fun", "boolean",
           what)


# ----------------------------------------------------------------------------
# scan lengths


def test_scan_xs_of_different_lengths():
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0, (np.ones(3), np.ones(4))),
           "different leading axis sizes", "xs[0]: 3", "xs[1]: 4")
    expect(errors.FtransValueError,
           lambda: lax.scan(lambda c, x: (c, None), 0.0, {"a": np.ones(3), "b": np.ones((5, 2))}), "['a']", "['b']")


def test_scan_length_disagrees_with_xs():
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0, np.ones(3), length=4),
           "length=4", "3")


def test_scan_without_xs_or_length():
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0), "length")
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0, None), "length")
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0, ()), "length")


def test_scan_scalar_xs_and_bad_length():
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0, 3.0), "scalar", "leading axis")
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, None), 0.0, None, length=-1), "-1")
    f, line = jitted(lambda n: lax.scan(lambda c, x: (c + 1.0, None), 0.0, None, length=n))
    expect(errors.ConcretizationTypeError, lambda: f(3), "length", "static", line=line)


def test_bad_unroll():
    # unroll=0 is valid (JAX: it unrolls the whole loop); tests/test_jax_parity.py checks it.
    expect(errors.FtransTypeError, lambda: lax.scan(lambda c, x: (c, x), 0.0, X3, unroll=1.5), "unroll")
    expect(errors.FtransValueError, lambda: lax.scan(lambda c, x: (c, x), 0.0, X3, unroll=-2), "unroll")
    f, line = jitted(lambda n: lax.fori_loop(0, n, lambda i, c: c, 0.0, unroll=2))
    expect(errors.FtransValueError, lambda: f(3), "unroll", "static", line=line)


# ----------------------------------------------------------------------------
# fori_loop bounds and lax.map arguments


def test_fori_loop_bad_bounds():
    expect(errors.FtransTypeError, lambda: lax.fori_loop(0.0, 3, lambda i, c: c, 0.0), "lower", "integer")
    expect(errors.FtransTypeError, lambda: lax.fori_loop(0, np.ones(2, np.int32), lambda i, c: c, 0.0), "upper")
    expect(errors.FtransTypeError, lambda: lax.fori_loop(0, "3", lambda i, c: c, 0.0), "upper")


def test_fori_loop_bounds_of_different_dtypes():
    # jax: "lower and upper arguments to fori_loop must have equal types, got int16 and int32".
    with pytest.raises(TypeError):
        jax.lax.fori_loop(np.int16(0), np.int32(3), lambda i, c: c, 0.0)
    expect(errors.FtransTypeError, lambda: lax.fori_loop(np.int16(0), np.int32(3), lambda i, c: c, 0.0),
           "int16", "int32")


def test_fori_loop_bound_types_like_jax():
    """Equal types (floats too), or a Python int beside a signed integer; static float bounds give a scan, so
    reverse mode works, as in JAX."""
    for lo, hi in [(np.int16(0), 3), (0, np.int16(3)), (0.5, 3.0), (np.float32(1.0), np.float32(4.0))]:
        got = lax.fori_loop(lo, hi, lambda i, c: c + i, 0.0)
        want = jax.lax.fori_loop(lo, hi, lambda i, c: c + i, 0.0)
        assert float(got) == float(want)
    for lo, hi in [(np.uint8(0), 3), (0.0, 3)]:
        with pytest.raises(TypeError):
            jax.lax.fori_loop(lo, hi, lambda i, c: c, 0.0)
        expect(errors.FtransTypeError, lambda lo=lo, hi=hi: lax.fori_loop(lo, hi, lambda i, c: c, 0.0), "equal types")

    def f(t):
        return lambda x: t.lax.fori_loop(x, x + 2.0, lambda i, c: c * i, x)

    assert float(ftrans.grad(f(ftrans))(1.5)) == float(jax.grad(f(jax))(1.5))
    y, f_lin = ftrans.linearize(f(ftrans), 1.5)
    assert float(f_lin(1.0)) == float(jax.linearize(f(jax), 1.5)[1](1.0))


def test_map_bad_batch_size():
    # (batch_size=0 is one vmap over everything, as in JAX)
    expect(errors.FtransValueError, lambda: lax.map(lambda x: x, X3, batch_size=-1), "batch_size")
    expect(errors.FtransValueError, lambda: lax.map(lambda x: x, X3, batch_size=1.5), "batch_size")


# ----------------------------------------------------------------------------
# Arguments of the wrong kind


@pytest.mark.parametrize("call,what", [
    (lambda: lax.cond(True, 1.0, lambda: 2.0), "true_fun"),
    (lambda: lax.cond(True, lambda: 1.0, None), "false_fun"),
    (lambda: lax.while_loop(None, lambda c: c, 1.0), "cond_fun"),
    (lambda: lax.while_loop(lambda c: c < 1, "body", 1.0), "body_fun"),
    (lambda: lax.scan("f", 0.0, X3), "f"),
    (lambda: lax.fori_loop(0, 3, 5, 0.0), "body_fun"),
    (lambda: lax.map(5, X3), "f"),
], ids=["cond-true", "cond-false", "while-cond", "while-body", "scan", "fori", "map"])
def test_non_callable_functions(call, what):
    e = expect(errors.FtransTypeError, call, what, "callable")
    assert isinstance(e, TypeError)


@pytest.mark.parametrize("call,path", [
    (lambda: lax.cond(True, lambda a: a, lambda a: a, "hello"), "operand[0]"),
    (lambda: lax.cond(True, lambda a: a, lambda a: a, {"a": object()}), "operand[0]['a']"),
    (lambda: lax.switch(0, [lambda a, b: a, lambda a, b: b], X3, [1.0, "s"]), "operand[1][1]"),
    (lambda: lax.scan(lambda c, x: (c, x), {"k": "s"}, X3), "init['k']"),
    (lambda: lax.scan(lambda c, x: (c, x), 0.0, {"k": "s"}), "xs['k']"),
    (lambda: lax.while_loop(lambda c: False, lambda c: c, [1.0, "s"]), "init_val[1]"),
    (lambda: lax.fori_loop(0, 2, lambda i, c: c, (1.0, None, "s")), "[2]"),
    (lambda: lax.scan(lambda c, x: (c, "y"), 0.0, X3), "[1]"),
    (lambda: lax.cond(True, lambda: 1.0, lambda: object()), "false_fun"),
], ids=["cond-str", "cond-object", "switch", "scan-init", "scan-xs", "while", "fori", "scan-out", "cond-out"])
def test_non_array_leaves(call, path):
    e = expect(errors.FtransTypeError, call, path, "not an array type")
    assert isinstance(e, TypeError)


@pytest.mark.parametrize("call,name", [
    (lambda: lax.cond(True, lambda a: a, lambda a: a, "hello"), "cond"),
    (lambda: lax.scan(lambda c, x: (c, x), {"k": "s"}, X3), "scan"),
    (lambda: lax.while_loop(lambda c: False, lambda c: c, [1.0, "s"]), "while_loop"),
    (lambda: lax.cond("yes", lambda: 1.0, lambda: 2.0), "cond"),
], ids=["cond-operand", "scan-init", "while-init", "cond-pred"])
@pytest.mark.xfail(strict=True, reason="api._operand's 'has type str, which is not an array type' message does not "
                   "name the control-flow function")
def test_non_array_leaf_messages_name_the_operation(call, name):
    # DESIGN.md section 8: the message names the operation, as every other control-flow error here does.
    expect(errors.FtransTypeError, call, f"{name}:")


@pytest.mark.xfail(strict=True, reason="a bad output leaf at the root of a branch's output reads 'the output of "
                   "false_fun at  has type str' (empty keystr path)")
def test_non_array_output_message_is_readable():
    # An output that is itself the bad leaf has the empty path: the message must not read "at  has type".
    expect(errors.FtransTypeError, lambda: lax.cond(True, lambda: "a", lambda: "b"), "str")
    with pytest.raises(errors.FtransTypeError) as ei:
        lax.cond(True, lambda: "a", lambda: "b")
    assert " at  " not in str(ei.value), str(ei.value)


def test_operand_and_positional_operands():
    expect(errors.FtransTypeError, lambda: lax.cond(True, lambda a: a, lambda a: a, 1.0, operand=2.0),
           "operand")
    expect(errors.FtransTypeError, lambda: lax.switch(0, [lambda a: a], 1.0, operand=2.0), "operand")


# ----------------------------------------------------------------------------
# Nothing half-done


def test_failed_jit_trace_can_be_called_again():
    def f(x, flag):
        if flag:  # a static Python flag picks a broken or a good body
            return lax.scan(lambda c, y: (c.astype(np.int32), y), x, XS)
        return lax.scan(lambda c, y: (c + y, c.sum()), x, XS)

    jf = ftrans.jit(f, static_argnums=1)
    line = f.__code__.co_firstlineno + 2
    expect(errors.FtransTypeError, lambda: jf(X3, True), "carry", line=line)
    c, ys = jf(X3, False)
    np.testing.assert_allclose(np.asarray(c), X3 + 2)
    expect(errors.FtransTypeError, lambda: jf(X3, True), "carry", line=line)  # fails again: nothing was cached
    info = jf.cache_info()
    assert info["misses"] >= 1
    c2, _ = jf(X3, False)
    np.testing.assert_allclose(np.asarray(c2), np.asarray(c))
    assert jf.cache_info()["hits"] >= 1


def test_failed_trace_with_bad_input_then_good_input():
    jf, line = jitted(lambda p, x: lax.cond(p, lambda a: a * 2.0, lambda a: a, x))
    expect(errors.FtransTypeError, lambda: jf(X3 > 0, X3), "scalar", line=line)
    np.testing.assert_allclose(np.asarray(jf(True, X3)), X3 * 2)
    np.testing.assert_allclose(np.asarray(jf(False, X3)), X3)


def test_error_in_a_nested_body_unwinds_every_level():
    def f(x):
        def outer(c, y):
            def inner(v):
                return lax.while_loop(lambda s: s.sum() < 10.0, lambda s: s.astype(np.int32), v)
            return lax.cond(y.sum() > 0, inner, lambda v: v, c), None
        return lax.scan(outer, x, XS)

    # The message names the while_loop call inside `inner` (three lines below `def f`).
    expect(errors.FtransTypeError, lambda: ftrans.jit(f)(X3), "while_loop", "i32[3]",
           line=f.__code__.co_firstlineno + 3)
    out, _ = ftrans.jit(lambda x: lax.scan(lambda c, y: (c + y, None), x, XS))(X3)
    np.testing.assert_allclose(np.asarray(out), X3 + 2)


def test_tracer_leaked_from_a_body():
    leaked = []
    lax.scan(lambda c, x: (leaked.append(c) or c + x, x), 0.0, X3)
    expect(errors.UnexpectedTracerError, lambda: leaked[0] + 1.0, "float32[]")  # JAX's type name
    leaked.clear()
    ftrans.jit(lambda x: lax.cond(x > 0, lambda: leaked.append(x) or x, lambda: x))(1.0)
    expect(errors.UnexpectedTracerError, lambda: lax.cond(True, lambda: leaked[0] * 2.0, lambda: 1.0))


def test_eager_control_flow_after_a_failure():
    expect(errors.FtransTypeError, lambda: lax.while_loop(lambda c: c, lambda c: c + 1, X3), "cond_fun")
    out = lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c + 1.0, X3)
    np.testing.assert_allclose(np.asarray(out), X3 + 3)
