"""Tracebacks that end in the user's code: ftrans's frames filtered out of exceptions as JAX filters its own
(``traceback_filtering``), differentially against jax: the same user program fails the same way under both,
and the frames left in the filtered traceback are the same user frames."""

import contextlib
import gc
import traceback
import weakref

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core.config import config_context
from ftrans.extend import source_info_util as siu

MODES = ("remove_frames", "quiet_remove_frames", "tracebackhide")


@contextlib.contextmanager
def filtering(lib, mode):
    if lib is ftrans:
        with config_context("traceback_filtering")(mode):
            yield
    else:
        prev = jax.config.jax_traceback_filtering
        jax.config.update("jax_traceback_filtering", mode)
        try:
            yield
        finally:
            jax.config.update("jax_traceback_filtering", prev)


def _raised(lib, mode, thunk):
    with filtering(lib, mode):
        try:
            thunk()
        except Exception as e:  # noqa: BLE001 - whatever the program raises is compared
            return e
    raise AssertionError("no exception")


def _builtin_base(cls):
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def _user_frames(e, mode):
    """(function, source line) of the frames left in ``e``'s traceback that are in this file."""
    out = []
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if mode == "tracebackhide" and "__tracebackhide__" in frame.f_locals:
            continue
        out.append((frame.f_code.co_filename, frame.f_code.co_name, lineno))
    return [(name, line) for fn, name, line in out if fn == __file__], len(out)


# Each program takes the library (jax or ftrans) and its numpy, and returns a thunk that fails.
def _nested_jit(lib, np_):
    @lib.jit
    def innermost(x):
        assert False

    @lib.jit
    def inbetween(x):
        return 1 + lib.vmap(innermost)(x)

    @lib.jit
    def outermost(x):
        return 2 + inbetween(x)

    return lambda: outermost(np_.array([1, 2]))


def _grad_of_int(lib, np_):
    @lib.jit
    def inbetween(x):
        return 1 + lib.grad(lambda y: y)(x)

    return lambda: inbetween(np_.array([1, 2]))


def _err(*_):
    assert False


def _cond(lib, np_):
    return lambda: lib.lax.cond(True, _err, lambda _: (), ())


def _switch(lib, np_):
    return lambda: lib.lax.switch(1, [lambda _: (), _err], ())


def _scan(lib, np_):
    return lambda: lib.lax.scan(_err, (), (), 3)


def _fori(lib, np_):
    return lambda: lib.lax.fori_loop(0, 3, _err, ())


def _while(lib, np_):
    return lambda: lib.lax.while_loop(lambda _: False, _err, ())


def _map(lib, np_):
    return lambda: lib.lax.map(_err, np_.ones(3))


def _custom_jvp(lib, np_):
    @lib.custom_jvp
    def f(x):
        return x

    @f.defjvp
    def f_jvp(x, tx):
        _err(x)
        return x, tx

    return lambda: lib.jvp(f, [1.0], [1.0])


def _custom_vjp_bwd(lib, np_):
    @lib.custom_vjp
    def f(x):
        return x

    def bwd(_, g):
        _err(g)
        return (g,)

    f.defvjp(lambda x: (x, ()), bwd)
    return lambda: lib.grad(f)(1.0)


def _vjp(lib, np_):
    return lambda: lib.vjp(_err, 1.0)


def _bad_argument(lib, np_):
    class NotAnArray:
        pass

    return lambda: lib.jit(lambda a: a + 1)(NotAnArray())


def _cause_chain(lib, np_):
    @lib.jit
    def inner(x):
        raise ValueError("inner")

    @lib.jit
    def outer(x):
        try:
            inner(x)
        except ValueError as e:
            raise TypeError("outer") from e

    return lambda: outer(1.0)


PROGRAMS = [_nested_jit, _grad_of_int, _cond, _switch, _scan, _fori, _while, _map, _custom_jvp,
            _custom_vjp_bwd, _vjp, _bad_argument, _cause_chain]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_filtered_traceback_keeps_the_user_frames_jax_keeps(program, mode):
    ej = _raised(jax, mode, program(jax, jjnp))
    ef = _raised(ftrans, mode, program(ftrans, jnp))
    assert _builtin_base(type(ef)) is _builtin_base(type(ej))
    user_j, _ = _user_frames(ej, mode)
    user_f, n_f = _user_frames(ef, mode)
    assert user_f == user_j
    assert n_f == len(user_f)  # nothing but user frames (this file's) is left
    if mode == "remove_frames":
        assert type(ef.__cause__) is siu.UnfilteredStackTrace
        assert len(list(traceback.walk_tb(ef.__cause__.__traceback__))) > n_f  # the whole traceback
    else:
        assert not isinstance(ef.__cause__, siu.UnfilteredStackTrace)
    notes = [n for n in getattr(ef, "__notes__", []) if "For simplicity" in n]
    assert len(notes) == (1 if mode == "quiet_remove_frames" else 0)  # one note, however deep the nesting


def test_off_leaves_ftrans_frames_and_default_is_quiet():
    e = _raised(ftrans, "off", _scan(ftrans, jnp))
    files = [f.f_code.co_filename for f, _ in traceback.walk_tb(e.__traceback__)]
    assert any("/ftrans/" in f for f in files)
    assert not getattr(e, "__notes__", None)
    try:  # the default ("auto", outside IPython) is "quiet_remove_frames", as JAX's
        _scan(ftrans, jnp)()
    except AssertionError as e2:
        assert any("For simplicity" in n for n in e2.__notes__)
        assert not any("/ftrans/" in f.f_code.co_filename for f, _ in traceback.walk_tb(e2.__traceback__))


def test_bad_mode_is_a_value_error():
    with pytest.raises(ValueError, match="traceback_filtering"):
        ftrans.config.update("jax_traceback_filtering", "sometimes")


@pytest.mark.parametrize("mode", MODES)
def test_api_boundary_leaves_no_garbage(mode):
    class MyObject:
        def __call__(self):
            f()

    @siu.api_boundary
    def f():
        g()

    @siu.api_boundary
    def g():
        raise ValueError("f")

    with filtering(ftrans, mode):
        gc.collect()
        gc.disable()
        try:
            o = MyObject()
            weak = weakref.ref(o)
            try:
                o()
            except ValueError:
                pass
            del o
            assert weak() is None
            # and through jit's inline boundary too
            try:
                ftrans.jit(lambda x: _err(x))(1.0)
            except AssertionError:
                pass
        finally:
            gc.enable()


def test_debug_nans_reruns_the_python_function_like_jax():
    def make(lib):
        @lib.jit
        def f(x):
            return 0.0 / x

        f(2.0)
        return f

    for lib, ctx in ((jax, jax.debug_nans), (ftrans, ftrans.debug_nans)):
        f = make(lib)
        with ctx(True), pytest.raises(ZeroDivisionError) as info:
            f(0.0)  # a Python float: the de-optimized run divides Python floats
        names = [fr.f_code.co_name for fr, _ in traceback.walk_tb(info.value.__traceback__)]
        assert names[-1] == "f"
        with ctx(True), pytest.raises(FloatingPointError, match="invalid value"):
            f(lib.numpy.array(0.0))


def test_failure_after_transformation_says_where_the_operation_was_traced_like_jax():
    causes = []
    for lib, ctx in ((jax, jax.debug_nans), (ftrans, ftrans.debug_nans)):
        with ctx(True), pytest.raises(FloatingPointError, match="invalid value") as info:
            lib.grad(lib.numpy.linalg.norm)(lib.numpy.zeros((3, 3), np.float32))
        causes.append(info.value.__cause__)
    assert type(causes[0]).__name__ == type(causes[1]).__name__ == "JaxStackTraceBeforeTransformation"
    assert isinstance(causes[1], siu.JaxStackTraceBeforeTransformation)
    frames = list(traceback.walk_tb(causes[1].__traceback__))
    assert frames and frames[-1][0].f_code.co_filename == __file__  # the line of this test that traced it
    assert "grad(lib.numpy.linalg.norm)" in "".join(traceback.format_tb(causes[1].__traceback__))


JAX_NAMED = ["ConcretizationTypeError", "JAXIndexError", "KeyReuseError", "NonConcreteBooleanIndexError",
             "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
             "UnexpectedTracerError", "JAXTypeError"]


@pytest.mark.parametrize("name", JAX_NAMED)
def test_errors_link_their_entry_on_jax_errors_page(name):
    page = f"https://docs.jax.dev/en/latest/errors.html#jax.errors.{name}"

    class Opaque:  # a value that cannot even print itself (JAX's test passes a bare tracer)
        def __str__(self):
            raise AttributeError("no")

    for arg in ("some message", Opaque()):
        err = getattr(ftrans.errors, name)(arg)
        assert page in str(err)
        assert isinstance(err, _builtin_base(getattr(jax.errors, name)))  # caught by the same except as JAX's
        assert str(err).rstrip().endswith(")")  # still ending with the user's line


def test_tracer_errors_raised_by_ftrans_link_the_page():
    with pytest.raises(ftrans.errors.TracerBoolConversionError,
                       match="errors.html#jax.errors.TracerBoolConversionError"):
        ftrans.jit(lambda x: 1 if x > 0 else 2)(1.0)


def test_device_array_traceback_is_the_runtimes():
    x = ftrans.device_put(jnp.arange(3))
    tb = x.traceback
    assert tb is None or type(tb) is type(jax.device_put(jjnp.arange(3)).traceback)
    assert jnp.arange(3).traceback is None  # held on the host: no buffer, no traceback


def _fails(*a, **k):
    raise ValueError("user")


_X = np.ones(3, np.float32)
ENTRY_POINTS = {
    "make_jaxpr": lambda: ftrans.make_jaxpr(_fails)(_X),
    "eval_shape": lambda: ftrans.eval_shape(_fails, _X),
    "jacfwd": lambda: ftrans.jacfwd(_fails)(_X),
    "jacrev": lambda: ftrans.jacrev(_fails)(_X),
    "hessian": lambda: ftrans.hessian(_fails)(_X),
    "checkpoint": lambda: ftrans.checkpoint(_fails)(_X),
    "linearize": lambda: ftrans.linearize(_fails, _X),
    "linear_transpose": lambda: ftrans.linear_transpose(_fails, _X)(_X),
    "jit.lower": lambda: ftrans.jit(_fails).lower(_X),
    "jit.trace": lambda: ftrans.jit(_fails).trace(_X),
    "jit.eval_shape": lambda: ftrans.jit(_fails).eval_shape(_X),
    "value_and_grad": lambda: ftrans.value_and_grad(_fails)(1.0),
    "pmap": lambda: ftrans.pmap(_fails)(np.ones((1, 3), np.float32)),
    "closure_convert": lambda: ftrans.closure_convert(_fails, _X),
    "named_call": lambda: ftrans.named_call(_fails, name="n")(_X),
    "checkify": lambda: __import__("ftrans.experimental.checkify", fromlist=["x"]).checkify(_fails)(_X),
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_every_entry_point_leaves_only_user_frames(name):
    e = _raised(ftrans, "remove_frames", ENTRY_POINTS[name])
    assert type(e) is ValueError
    names = [f.f_code.co_name for f, _ in traceback.walk_tb(e.__traceback__)]
    assert names[0] == "_raised" and names[-1] == "_fails"
    assert all(f.f_code.co_filename == __file__ for f, _ in traceback.walk_tb(e.__traceback__))


def test_pullbacks_and_compiled_calls_are_boundaries():
    @ftrans.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: (x, ()), lambda _, g: _fails(g))
    _, pullback = ftrans.vjp(f, 1.0)
    compiled = ftrans.jit(lambda x: x + 1).lower(_X).compile()
    for thunk, exc in ((lambda: pullback(1.0), ValueError), (lambda: compiled(_X, _X), TypeError)):
        e = _raised(ftrans, "remove_frames", thunk)
        assert isinstance(e, exc)
        assert all(fr.f_code.co_filename == __file__ for fr, _ in traceback.walk_tb(e.__traceback__))
