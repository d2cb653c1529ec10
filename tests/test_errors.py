"""Errors a user can cause: the exception type, and a message that points at the user's line.

DESIGN.md section 8: every error names the user's source line, the operation,
and the shapes/dtypes involved, and says what to do; a failed call leaves
global state as it was.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import errors
from ftrans.core import trace

ME = os.path.basename(__file__)
x3 = np.arange(3, dtype=np.float32)


def here() -> int:
    """The line number of the caller (call it on the line before the offending call, +1)."""
    return sys._getframe(1).f_lineno


def assert_points_here(exc: BaseException, line: int) -> None:
    msg = str(exc)
    assert f"{ME}:{line}" in msg, f"message does not name {ME}:{line}:\n{msg}"


def assert_clean_trace_state() -> None:
    st = trace.state
    assert st.eval_only is True
    assert len(st.stack) == 1 and st.dynamic is st.base
    out = jnp.sin(jnp.asarray(x3)) + 1.0  # eager ops still work
    assert isinstance(out, ftrans.Array)
    np.testing.assert_allclose(np.asarray(out), np.sin(x3) + 1, rtol=1e-6)


# ----------------------------------------------------------------------------
# Concretization errors


def test_bool_of_tracer():
    lines = []

    def f(x):
        lines.append(here() + 1)
        return bool(x.sum())

    with pytest.raises(errors.TracerBoolConversionError) as ei:
        ftrans.make_jaxpr(f)(x3)
    e = ei.value
    assert isinstance(e, errors.ConcretizationTypeError) and isinstance(e, TypeError)
    assert_points_here(e, lines[0])
    assert "lax.cond" in str(e) and "static" in str(e)
    assert "f32[]" in str(e)
    assert_clean_trace_state()


def test_python_if_on_traced_value():
    lines = []

    def f(x):
        lines.append(here() + 1)
        if x[0] > 0:
            return x
        return -x

    with pytest.raises(errors.TracerBoolConversionError) as ei:
        ftrans.make_jaxpr(f)(x3)
    assert isinstance(ei.value, TypeError)
    assert_points_here(ei.value, lines[0])
    assert "lax.cond" in str(ei.value)
    assert_clean_trace_state()


def test_python_while_and_and_on_traced_value():
    def f(x):
        return x[0] > 0 and x[1] > 0

    with pytest.raises(errors.TracerBoolConversionError):
        ftrans.make_jaxpr(f)(x3)
    assert_clean_trace_state()


def test_int_of_tracer():
    lines = []

    def f(x):
        lines.append(here() + 1)
        return int(x[0])

    with pytest.raises(errors.TracerIntegerConversionError) as ei:
        ftrans.make_jaxpr(f)(x3)
    e = ei.value
    assert isinstance(e, errors.ConcretizationTypeError) and isinstance(e, TypeError)
    assert_points_here(e, lines[0])
    assert "static" in str(e)
    assert_clean_trace_state()


def test_tracer_as_python_index():
    def f(x):
        return [1, 2, 3][x[0]]

    with pytest.raises(errors.TracerIntegerConversionError) as ei:
        ftrans.make_jaxpr(f)(np.arange(3, dtype=np.int32))
    assert isinstance(ei.value, TypeError)


def test_float_of_tracer():
    lines = []

    def f(x):
        lines.append(here() + 1)
        return float(x.sum())

    with pytest.raises(errors.ConcretizationTypeError) as ei:
        ftrans.make_jaxpr(f)(x3)
    assert isinstance(ei.value, TypeError)
    assert_points_here(ei.value, lines[0])
    assert "static" in str(ei.value)
    assert_clean_trace_state()


def test_numpy_asarray_of_tracer():
    lines = []

    def f(x):
        lines.append(here() + 1)
        return np.asarray(x)

    with pytest.raises(errors.TracerArrayConversionError) as ei:
        ftrans.make_jaxpr(f)(x3)
    e = ei.value
    assert isinstance(e, errors.ConcretizationTypeError) and isinstance(e, TypeError)
    assert_points_here(e, lines[0])
    assert "f32[3]" in str(e)
    assert_clean_trace_state()


def test_numpy_function_on_tracer():
    with pytest.raises(errors.TracerArrayConversionError):
        ftrans.make_jaxpr(lambda x: np.sin(x))(x3)
    assert_clean_trace_state()


def test_item_and_tolist_of_tracer():
    for method in ("item", "tolist"):
        with pytest.raises(errors.ConcretizationTypeError, match=method):
            ftrans.make_jaxpr(lambda x, m=method: getattr(x, m)())(np.float32(1))


def test_concretization_errors_mirror_jax_hierarchy():
    import jax.errors as jerr

    for name in ("ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError",
                 "TracerArrayConversionError"):
        ours, theirs = getattr(errors, name), getattr(jerr, name)
        assert issubclass(ours, TypeError) and issubclass(theirs, TypeError)
    assert issubclass(errors.TracerBoolConversionError, errors.ConcretizationTypeError)
    assert issubclass(errors.TracerIntegerConversionError, errors.ConcretizationTypeError)


# ----------------------------------------------------------------------------
# API-layer errors


def test_shape_mismatch_names_both_shapes():
    line = here() + 2
    with pytest.raises(ValueError) as ei:
        jnp.add(np.ones(3, np.float32), np.ones(4, np.float32))
    msg = str(ei.value)
    assert "(3,)" in msg and "(4,)" in msg and "add" in msg
    assert_points_here(ei.value, line)


def test_shape_mismatch_under_tracing():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        ftrans.make_jaxpr(lambda a, b: a * b)(np.ones((2, 3), np.float32), np.ones(4, np.float32))
    assert_clean_trace_state()


def test_bad_axis():
    line = here() + 2
    with pytest.raises(ValueError) as ei:
        jnp.sum(x3, axis=3)
    assert "axis 3" in str(ei.value) and "sum" in str(ei.value)
    assert_points_here(ei.value, line)
    with pytest.raises(ValueError, match="axis"):
        jnp.sum(np.ones((2, 2), np.float32), axis=-3)
    with pytest.raises(ValueError, match="axis"):
        ftrans.make_jaxpr(lambda x: jnp.sum(x, axis=1))(x3)
    assert_clean_trace_state()


def test_unknown_dtype():
    with pytest.raises(TypeError, match="float7"):
        jnp.zeros(3, dtype="float7")
    with pytest.raises(TypeError, match="float7"):
        jnp.asarray(x3, dtype="float7")
    with pytest.raises(TypeError):
        jnp.zeros(3, dtype=np.str_)


@pytest.mark.parametrize("bad", [[1.0, 2.0], "abc", object()], ids=["list", "str", "object"])
def test_non_array_argument(bad):
    kind = type(bad).__name__
    line = here() + 2
    with pytest.raises(TypeError) as ei:
        jnp.sin(bad)
    assert "sin" in str(ei.value) and kind in str(ei.value)
    assert_points_here(ei.value, line)
    with pytest.raises(TypeError, match="add"):
        jnp.add(x3, bad)
    with pytest.raises(TypeError, match=kind):
        jnp.sum(bad)


def test_non_array_argument_under_tracing():
    with pytest.raises(TypeError, match="list"):
        ftrans.make_jaxpr(lambda x: jnp.add(x, [1.0, 2.0, 3.0]))(x3)
    assert_clean_trace_state()


def test_errors_are_ftrans_errors_with_builtin_bases():
    assert issubclass(errors.FtransTypeError, TypeError)
    assert issubclass(errors.FtransValueError, ValueError)
    assert issubclass(errors.FtransIndexError, IndexError)
    with pytest.raises(errors.FtransError):
        jnp.add(np.ones(3), np.ones(4))


# ----------------------------------------------------------------------------
# Escaped tracers and trace-state hygiene


def test_escaped_tracer():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0

    ftrans.make_jaxpr(f)(x3)
    assert_clean_trace_state()
    line = here() + 2
    with pytest.raises(errors.UnexpectedTracerError) as ei:
        jnp.sin(leaked[0])
    assert "escaped" in str(ei.value) or "after the transformation" in str(ei.value)
    assert_points_here(ei.value, line)
    with pytest.raises(errors.UnexpectedTracerError):
        leaked[0] + 1.0
    with pytest.raises(errors.UnexpectedTracerError):
        ftrans.make_jaxpr(lambda y: y + leaked[0])(x3)
    assert_clean_trace_state()


def test_escaped_staged_tracer_says_where_it_was_created():
    """As JAX's "The leaked intermediate value was created on line ...": the equation that made the
    escaped value names the user's line; an escaped input says it was one."""
    leaked = []

    def f(x):
        y = jnp.sin(x)
        leaked.append(y)
        leaked.append(x)
        return y

    line = here() - 5
    ftrans.jit(f)(1.0)
    with pytest.raises(errors.UnexpectedTracerError, match=r"created on line .*test_errors.py:\d+ \(f\) by `sin`") as ei:
        leaked[0] + 1.0
    assert f"{ME}:{line} (f)" in str(ei.value)
    with pytest.raises(errors.UnexpectedTracerError, match="It was an input of the traced function"):
        leaked[1] * 2.0
    assert_clean_trace_state()


@pytest.mark.parametrize("inner, outer", [(ftrans.grad, ftrans.grad), (ftrans.grad, ftrans.jit),
                                          (ftrans.jit, ftrans.jit)])
def test_escaped_inner_tracer_used_in_outer_transform_names_it(inner, outer):
    """A tracer leaked from a transform nested inside a live one (deeper than any live trace) is
    reported as the escaped value it is, with its type, like any other escaped tracer (JAX raises
    UnexpectedTracerError here too)."""
    leaked = []

    def save(v):
        leaked.append(v)
        return v

    def f(x):
        leaked.clear()
        inner(lambda v: save(v) * 1.0)(0.0)
        return x + leaked[0]

    with pytest.raises(errors.UnexpectedTracerError, match=r"traced value of type float32\[\] was used after"):
        outer(f)(2.0)
    assert_clean_trace_state()


def test_failed_make_jaxpr_leaves_state_clean():
    def boom(x):
        y = jnp.sin(x)
        raise RuntimeError("user bug")
        return y

    with pytest.raises(RuntimeError, match="user bug"):
        ftrans.make_jaxpr(boom)(x3)
    assert_clean_trace_state()

    def nested_boom(x):
        ftrans.make_jaxpr(lambda y: bool(y.sum()))(x)
        return x

    with pytest.raises(errors.TracerBoolConversionError):
        ftrans.make_jaxpr(nested_boom)(x3)
    assert_clean_trace_state()
    # And a later make_jaxpr works normally.
    assert [e.primitive.name for e in ftrans.make_jaxpr(jnp.cos)(x3).eqns] == ["cos"]


def test_eager_array_conversions_work():
    a = jnp.asarray(np.array(2.5, np.float32))
    assert bool(a) is True and int(a) == 2 and float(a) == 2.5
    assert np.asarray(a).dtype == np.float32
    v = jnp.asarray(np.array([2.5], np.float32))
    assert bool(v) is True
    with pytest.raises(TypeError):  # as in jax: only 0-d arrays convert to int/float
        int(v)
