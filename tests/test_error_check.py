"""``ftrans.error_check`` (JAX's ``jax._src.error_check``) and jnp's error checks (JAX's
``jax._src.numpy.error``), differential against jax: the same program records (or does not record) the
same first error, eagerly, under ``jit`` and inside control flow."""

from __future__ import annotations

import importlib
import operator
import threading
import traceback
import warnings
from typing import Any

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax._src import error_check as jec
from jax._src.numpy import error as jnp_jerr

import ftrans
import ftrans.numpy as fjnp
from ftrans.numpy import error as jnp_ferr
from tests.thorough import THOROUGH

# ``ftrans.error_check`` is imported by the first test that runs, not at collection: importing it makes the
# error state (a ref), and the other test modules of this process should run as they would without it.
fec: Any = None
SIDES: dict = {}


def _outcome(ec) -> str | None:
    """The message of the first recorded error (None when none), the state cleared."""
    try:
        ec.raise_if_error()
    except ec.JaxValueError as e:
        return str(e).split("\n")[0]
    return None


@pytest.fixture(autouse=True)
def _clean_state():
    global fec
    if fec is None:
        fec = importlib.import_module("ftrans.error_check")
        SIDES.update(jax=(jax, jjnp, jec, jnp_jerr), ftrans=(ftrans, fjnp, fec, jnp_ferr))
    for _, _, ec, _ in SIDES.values():
        _outcome(ec)
    yield
    for _, _, ec, _ in SIDES.values():
        _outcome(ec)


def _both(program):
    out = {}
    for name, side in SIDES.items():
        out[name] = program(*side)
    assert out["ftrans"] == out["jax"], out
    return out["jax"]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("value", [-1, 1])
def test_set_error_if(jit, value):
    def program(lib, jnp, ec, _):
        def f(x):
            ec.set_error_if(x <= 0, "x must be greater than 0")
            return x + 1

        g = lib.jit(f) if jit else f
        y = g(jnp.full((4,), value, dtype=jnp.int32))
        return np.asarray(y).tolist(), _outcome(ec), _outcome(ec)

    out = _both(program)
    assert out[1] == (None if value > 0 else "x must be greater than 0") and out[2] is None


@pytest.mark.parametrize("jit", [False, True])
def test_first_error_is_kept(jit):
    def program(lib, jnp, ec, _):
        def make(tag):
            def f(x):
                ec.set_error_if(x >= 1, f"x must be less than 1 in {tag}")
                return x + 1
            return lib.jit(f) if jit else f

        f, g = make("f"), make("g")
        x = jnp.zeros((4,), jnp.int32)
        x = f(x)
        x = g(x)
        f(x)
        return _outcome(ec)

    assert _both(program) == "x must be less than 1 in g"


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("kind", ["cond", "while", "scan"])
def test_control_flow(jit, kind):
    def program(lib, jnp, ec, _):
        def chk(msg):
            def f(x):
                ec.set_error_if(x == 0, msg)
                return x + 1
            return f

        if kind == "cond":
            def body(p, x):
                return lib.lax.cond(p, chk("in f"), chk("in g"), x)
            b = lib.jit(body) if jit else body
            x = jnp.zeros((4,), jnp.int32)
            b(jnp.bool_(True), x)
            first = _outcome(ec)
            b(jnp.bool_(False), x)
            return first, _outcome(ec)
        if kind == "while":
            def body(x):
                def step(x):
                    ec.set_error_if(x >= 10, "x must be less than 10")
                    return x + 1
                return lib.lax.while_loop(lambda x: (x < 10).any(), step, x)
            b = lib.jit(body) if jit else body
            out = b(jnp.arange(4, dtype=jnp.int32))
            return np.asarray(out).tolist(), _outcome(ec)

        def step(c, x):
            ec.set_error_if(x >= 4, "x must be less than 4")
            return c + x, x + 1

        def body(init, xs):
            return lib.lax.scan(step, init, xs)
        b = lib.jit(body) if jit else body
        b(jnp.int32(0), jnp.arange(5, dtype=jnp.int32))
        first = _outcome(ec)
        b(jnp.int32(0), jnp.arange(4, dtype=jnp.int32))
        return first, _outcome(ec)

    _both(program)


@pytest.mark.parametrize("jit", [False, True])
def test_traceback_names_the_users_line(jit):
    def triggers_error_for_traceback_test(x):
        fec.set_error_if(  # the line in the traceback
            x <= 0, "x must be greater than 0")
        return x + 1

    f = ftrans.jit(triggers_error_for_traceback_test) if jit else triggers_error_for_traceback_test
    f(fjnp.zeros((4,), fjnp.int32))
    with pytest.raises(fec.JaxValueError, match="x must be greater than 0") as info:
        fec.raise_if_error()
    tb = "".join(traceback.format_tb(info.value.__traceback__))
    assert "triggers_error_for_traceback_test" in tb and "the line in the traceback" in tb
    assert "ftrans/numpy/error.py\", line" not in tb.split("raise_if_error")[0]


def test_raise_if_error_inside_jit_is_an_error():
    fec.set_error_if(fjnp.zeros(()) > 1, "never")
    with pytest.raises(ValueError, match="should not be called within a traced context"):
        ftrans.jit(fec.raise_if_error)()
    assert _outcome(fec) is None


def test_state_is_per_thread():
    """Errors recorded in one thread are raised only there (the state is thread-local, as JAX's)."""
    seen = {}

    def worker():
        fec.set_error_if(fjnp.ones(()) > 0, "in the worker")
        seen["worker"] = _outcome(fec)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["worker"] == "in the worker" and _outcome(fec) is None


def test_export_round_trip():
    def f(x):
        fec.set_error_if(x <= 0, "x must be greater than 0 in f2")
        return x + 1

    def f1(x):
        fec.set_error_if(x <= 0, "x must be greater than 0 in f1")
        return x + 1

    exp = ftrans.export.export(ftrans.jit(fec.wrap_for_export(ftrans.jit(f))))(
        ftrans.ShapeDtypeStruct((), fjnp.float32))
    g = ftrans.jit(fec.unwrap_from_import(ftrans.jit(ftrans.export.deserialize(exp.serialize()).call)))
    assert float(g(fjnp.float32(2.0))) == 3.0 and _outcome(fec) is None
    g(fjnp.float32(-3.0))
    with pytest.raises(fec.JaxValueError, match="in f2") as info:
        fec.raise_if_error()
    assert "The original traceback is shown below" in str(info.value) and ", in f\n" in str(info.value)
    f1(fjnp.float32(-1.0))  # an error already set stays the first
    g(fjnp.float32(-3.0))
    assert _outcome(fec) == "x must be greater than 0 in f1"


def test_corrupted_error_code():
    def corrupted(x):
        return x + 1, jnp_ferr._ErrorClass(fjnp.uint32(999), [])

    fec.unwrap_from_import(corrupted)(fjnp.float32(1.0))
    with pytest.raises(fec.JaxValueError, match="unknown error"):
        fec.raise_if_error()


# ------------------------------------------------------------------ jnp's checks
NAN_CASES = [
    ("acos", (2.0,), (0.5,)), ("acosh", (0.5,), (2.0,)), ("add", (np.inf, -np.inf), (0.0, 0.0)),
    ("arcsin", (-2.0,), (0.5,)), ("arctanh", (-2.0,), (0.5,)), ("cos", (np.inf,), (1.0,)),
    ("divide", (0.0, 0.0), (1.0, 1.0)), ("divmod", (1.0, 0.0), (1.0, 1.0)),
    ("float_power", (-1.0, 0.5), (1.0, 1.0)), ("fmod", (1.0, 0.0), (1.0, 1.0)), ("log", (-1.0,), (1.0,)),
    ("log10", (-1.0,), (1.0,)), ("log1p", (-1.5,), (1.0,)), ("log2", (-1.0,), (1.0,)),
    ("mod", (1.0, 0.0), (1.0, 1.0)), ("power", (-1.0, 0.5), (1.0, 1.0)), ("sin", (np.inf,), (1.0,)),
    ("sqrt", (-4.0,), (4.0,)), ("subtract", (np.inf, np.inf), (0.0, 0.0)), ("tan", (np.inf,), (1.0,)),
    ("floor_divide", (1.0, 0.0), (1.0, 1.0)), ("exp", (np.nan,), (1.0,)), ("multiply", (np.inf, 0.0), (1.0, 1.0)),
    (operator.truediv, (0.0, 0.0), (1.0, 1.0)), (operator.pow, (-1.0, 0.5), (1.0, 1.0)),
]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("fn,bad,good", NAN_CASES, ids=lambda v: getattr(v, "__name__", None))
def test_nan_checks(jit, fn, bad, good):
    """Which functions record a NaN (``exp`` and ``multiply`` do not, as in JAX) and when."""
    def program(lib, jnp, ec, jerr):
        f = getattr(jnp, fn) if isinstance(fn, str) else fn
        g = lib.jit(f) if jit else f
        out = []
        for behavior in ("ignore", "raise"):
            with jerr.error_checking_behavior(nan=behavior):
                g(*[jnp.float32(v) for v in good])
                out.append(_outcome(ec))
                g(*[jnp.float32(v) for v in bad])
                out.append(_outcome(ec))
        return out

    _both(program)


# Every (function, dtype) pair, eager or under jit: in the quick run a pair runs in one of the two modes
# (alternating, so each function and each dtype meets both); the thorough run takes both for every pair.
DIV_CASES = [(jit, f, d) for i, f in enumerate(("divmod", "floor_divide", "mod", "remainder", "true_divide", "fmod"))
             for j, d in enumerate(("int32", "uint8", "float32", "bfloat16"))
             for jit in ((False, True) if THOROUGH else ((False, True)[(i + j) % 2],))]


@pytest.mark.parametrize("jit,fn,dtype", DIV_CASES)
def test_divide_checks(jit, fn, dtype):
    def program(lib, jnp, ec, jerr):
        f = getattr(jnp, fn)
        g = lib.jit(f) if jit else f
        d = getattr(jnp, dtype)
        out = []
        for behavior in ("ignore", "raise"):
            with jerr.error_checking_behavior(divide=behavior):
                g(d(1), d(1))
                out.append(_outcome(ec))
                g(d(1), d(0))
                out.append(_outcome(ec))
        return out

    _both(program)


@pytest.mark.parametrize("jit", [False, True])
def test_oob_category(jit):
    def program(lib, jnp, ec, jerr):
        def f(x, start):
            jerr._set_error_if_with_category(
                jnp.logical_or(start < 0, start + jnp.array((3, 4), jnp.int32) >= jnp.array(x.shape, jnp.int32)),
                "Out of bounds in dynamic_slice", category="oob")
            return lib.lax.dynamic_slice(x, start, (3, 4))

        g = lib.jit(f) if jit else f
        x = jnp.arange(12).reshape(3, 4)
        out = []
        for behavior in ("ignore", "raise"):
            with jerr.error_checking_behavior(oob=behavior):
                g(x, jnp.array([0, -1], jnp.int32))
                out.append(_outcome(ec))
        return out

    assert _both(program) == [None, "Out of bounds in dynamic_slice"]


def test_gather_indices_and_empty_index():
    def program(lib, jnp, ec, jerr):
        x = jnp.arange(10)
        with jerr.error_checking_behavior(oob="raise"):
            jnp.zeros(1)[None]
            first = _outcome(ec)
            x[jnp.array([1, 12])]
            return first, _outcome(ec)

    assert _both(program)[0] is None


def test_invalid_category_and_behavior():
    with pytest.raises(ValueError, match="Invalid category"):
        jnp_ferr._set_error_if_with_category(fjnp.isnan(fjnp.float32(1.0)), "x is NaN", category="invalid")
    with pytest.raises(ValueError):
        with jnp_ferr.error_checking_behavior(nan="loud"):
            pass


def test_config_option_and_jit_cache():
    """``config.update('jax_error_checking_behavior_nan', ...)`` switches the check globally; a jitted
    function traced with the check off traces again with it on (the option is in jit's key, as JAX's)."""
    f = ftrans.jit(fjnp.log)
    f(fjnp.float32(-1.0))
    assert _outcome(fec) is None
    try:
        ftrans.config.update("jax_error_checking_behavior_nan", "raise")
        f(fjnp.float32(-1.0))
        assert _outcome(fec) == "NaN encountered"
    finally:
        ftrans.config.update("jax_error_checking_behavior_nan", "ignore")
    f(fjnp.float32(-1.0))
    assert _outcome(fec) is None


def test_checks_off_keep_fast_paths():
    """With every check "ignore", eager jnp calls take their fast paths (no state is made or read)."""
    from ftrans.core import trace

    assert not trace._error_checks and trace.eager_everywhere
    with jnp_ferr.error_checking_behavior(nan="raise"):
        assert trace._error_checks
    assert not trace._error_checks


def test_grad_with_nan_check():
    """A check inside a differentiated function records the primal's NaN (the state takes no tangent)."""
    with jnp_ferr.error_checking_behavior(nan="raise"):
        g = ftrans.grad(lambda x: fjnp.sqrt(x))(-1.0)
        assert np.isnan(float(g))
        assert _outcome(fec) == "NaN encountered"
        with jnp_jerr.error_checking_behavior(nan="raise"):
            jax.grad(lambda x: jjnp.sqrt(x))(-1.0)
        assert _outcome(jec) == "NaN encountered"


def test_vmap_is_refused_as_in_jax():
    """A check under ``vmap`` would write a batched value into the one error state: refused, as JAX's."""
    with jnp_jerr.error_checking_behavior(nan="raise"), pytest.raises(Exception, match="set/swap operation"):
        jax.vmap(jjnp.log)(jjnp.array([1.0, -1.0]))
    with jnp_ferr.error_checking_behavior(nan="raise"), pytest.raises(ValueError, match="set/swap operation"):
        ftrans.vmap(fjnp.log)(fjnp.array([1.0, -1.0]))
    # a check of an unbatched value inside the vmapped function too (the state is written under vmap)
    with jnp_jerr.error_checking_behavior(nan="raise"), pytest.raises(Exception, match="set/swap operation"):
        jax.vmap(lambda x: jjnp.log(jjnp.float32(-1.0)) + x)(jjnp.array([1.0, 2.0]))
    with jnp_ferr.error_checking_behavior(nan="raise"), pytest.raises(ValueError, match="set/swap operation"):
        ftrans.vmap(lambda x: fjnp.log(fjnp.float32(-1.0)) + x)(fjnp.array([1.0, 2.0]))


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("auto", [False, True])
@pytest.mark.needs_devices(4)
def test_error_checking_context_over_a_mesh(jit, auto):
    """Over a mesh in context the error state is one code per device (JAX's explicit mode); a predicate
    laid out over Auto axes is reduced for all devices at once, with JAX's warning."""
    def program(lib, jnp, ec, _):
        AxisType = lib.sharding.AxisType
        t = AxisType.Auto if auto else AxisType.Explicit
        mesh = lib.make_mesh((2, 2), ("x", "y"), axis_types=(t, t), devices=lib.devices()[:4])
        sharding = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x", "y"))

        def f(x):
            ec.set_error_if(x <= 0, "x must be greater than 0")
            return x + 1

        g = lib.jit(f) if jit else f
        out = []
        # (the outer context keeps the thread's state as it was for the other tests: a state made under the
        # mesh would be mesh-shaped)
        with warnings.catch_warnings(record=True) as w, ec.error_checking_context(), lib.sharding.set_mesh(mesh):
            warnings.simplefilter("always")
            with ec.error_checking_context():
                for v in (-1, 1):
                    g(jnp.full((4, 4), v, dtype=jnp.int32, device=sharding))
                    out.append(_outcome(ec))
        out.append(any("auto mode" in str(x.message) for x in w))
        return out

    assert _both(program)[:2] == ["x must be greater than 0", None]
