"""The eager fast paths give exactly the general path's results, and jax's types.

``jnp.sin(x)``, ``jnp.negative(x)``, ``x * 2.0``, ``jnp.sum(x)`` and friends
skip promotion and ``bind`` when their operand is an ftrans Array and no
transform is active.  Each case here is computed three ways: eagerly (the fast
path where it applies), staged (``make_jaxpr`` + ``typecheck`` + ``eval_jaxpr``,
which runs the primitives' own rules through ``bind``), and with jax.  Eager
and staged results must agree bit for bit, in dtype and in weak type; both must
match jax in dtype and weak type and in value to float tolerance.
"""

import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax._src.lax.lax import _convert_element_type as jax_convert

import ftrans
import ftrans.numpy as fnp
from ftrans.core import trace as ftrace
from ftrans.core.array import Array
from ftrans.core.ir import typecheck

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(d) for d in (np.bool_, np.int8, np.int32, np.uint32, np.float16, BF16,
                                np.float32, np.complex64)]
SHAPES = [(), (5,), (0,), (2, 3)]

UNARY = ["sin", "cos", "exp", "log", "sqrt", "tanh", "arctanh", "expm1", "log1p",
         "negative", "square", "reciprocal", "abs", "sign", "cbrt", "floor", "ceil", "rint"]
SCALAR_BINARY = ["multiply", "add", "subtract", "maximum", "minimum", "true_divide", "less"]
REDUCTIONS = ["sum", "max", "min", "mean"]


# ---------------------------------------------------------------- helpers
def _value(dtype: np.dtype, shape: tuple) -> np.ndarray:
    """Deterministic values inside every tested function's domain (0.1 .. 0.9, or 1 .. 4)."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(n + len(shape))
    if dtype == np.bool_:
        v = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        v = rng.integers(1, 5, n).astype(dtype)
    elif dtype.kind == "c":
        v = (rng.uniform(0.1, 0.9, n) + 1j * rng.uniform(-0.5, 0.5, n)).astype(dtype)
    else:
        v = rng.uniform(0.1, 0.9, n).astype(dtype)
    return v.reshape(shape)


def _inputs(dtype: np.dtype, shape: tuple, weak: bool):
    v = _value(dtype, shape)
    return Array._new(v, weak), jax_convert(v, weak_type=weak)


def staged(f, *args):
    closed = ftrans.make_jaxpr(f)(*args)
    typecheck(closed)
    out = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return out[0] if isinstance(out, (list, tuple)) else out


def _run(f, *args):
    try:
        return f(*args), None
    except Exception as e:  # noqa: BLE001 - the error type itself is compared
        return None, e


def _bits(a) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).tobytes()


def _tol(d: np.dtype) -> float:
    return {np.dtype(np.float16): 2e-3, BF16: 1e-2}.get(d, 2e-6)


def _jax_values(f_jaxes, x_j) -> list:
    """``_run(f, x_j)`` for each of ``f_jaxes``, the values from one jitted jax program: which functions jax
    refuses comes from tracing (``jax.eval_shape``), and one compile serves them all where eager jax would
    compile each function separately."""
    errs = [_run(lambda x, f=f: jax.eval_shape(f, x), x_j)[1] for f in f_jaxes]
    ok = [f for f, e in zip(f_jaxes, errs) if e is None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = iter(jax.jit(lambda x: [f(x) for f in ok])(x_j) if ok else [])
    return [(None, e) if e is not None else (next(values), None) for e in errs]


def check_all(checks, x_f, x_j) -> None:
    """``check`` for each ``(name, f_ftrans, f_jax, values)`` of ``checks``, jax's values from one program."""
    wants = iter(_jax_values([c[2] for c in checks if c[3]], x_j))
    for name, f_ftrans, f_jax, values in checks:
        check(name, f_ftrans, f_jax, x_f, x_j, values, want=next(wants) if values else None)


def check(name: str, f_ftrans, f_jax, x_f, x_j, values: bool = True, want=None) -> None:
    """Eager == staged bit for bit; jax's dtype and weak type (``jax.eval_shape``: no compiling),
    and jax's values when ``values`` (each new jax shape and dtype costs a compile; ``want``: jax's
    ``(value, error)`` computed already)."""
    eager, e_err = _run(f_ftrans, x_f)
    traced, t_err = _run(lambda x: staged(f_ftrans, x), x_f)
    want, j_err = want or _run(lambda x: (f_jax(x) if values else jax.eval_shape(f_jax, x)), x_j)
    want_aval = None if want is None else (want.aval if values else want)
    assert (e_err is None) == (t_err is None), f"{name}: eager {e_err!r} vs staged {t_err!r}"
    assert (e_err is None) == (j_err is None), f"{name}: ftrans {e_err!r} vs jax {j_err!r}"
    if e_err is not None:
        assert type(e_err) is type(t_err), f"{name}: eager {e_err!r} vs staged {t_err!r}"
        return
    assert isinstance(eager, Array), f"{name}: got {type(eager)}"
    # Fast path == general path, bit for bit.
    assert eager.dtype == traced.dtype and eager.shape == traced.shape, f"{name}: {eager.aval} vs {traced.aval}"
    assert eager.weak_type == traced.weak_type, f"{name}: weak {eager.weak_type} vs staged {traced.weak_type}"
    assert _bits(eager) == _bits(traced), f"{name}: eager {eager} != staged {traced}"
    # And jax's type and value.
    assert eager.shape == want_aval.shape and eager.dtype == want_aval.dtype, f"{name}: {eager.aval} vs jax {want_aval}"
    assert eager.weak_type == want_aval.weak_type, f"{name}: weak {eager.weak_type} vs jax {want_aval}"
    if not values:
        return
    g, w = np.asarray(eager), np.asarray(want)
    if w.dtype.kind in "fcV":
        t = _tol(w.dtype)
        np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128), rtol=t, atol=t,
                                   equal_nan=True, err_msg=name)
    else:
        np.testing.assert_array_equal(g, w, err_msg=name)


CASES = [(d, s, w) for d in DTYPES for s in SHAPES for w in (False, True)
         if not w or d in (np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.complex64))]
# Elementwise functions do not care about rank beyond 0-d versus not.
ELEMENTWISE_CASES = [c for c in CASES if len(c[1]) < 2]


def _id(case):
    d, s, w = case
    return f"{d.name}-{'x'.join(map(str, s)) or 'scalar'}{'-weak' if w else ''}"


# ---------------------------------------------------------------- the fast paths agree with the general path and jax
@pytest.mark.parametrize("case", ELEMENTWISE_CASES, ids=_id)
def test_unary(case):
    d, s, w = case
    x_f, x_j = _inputs(d, s, w)
    check_all([(f"{name}({_id(case)})", getattr(fnp, name), getattr(jnp, name), s == (5,)) for name in UNARY],
              x_f, x_j)


# Overflow in NumPy's +, -, * (1e30 * 2.0 in float16) warns unless ftrans's
# module warnings filter is active, which pytest drops after collection.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("case", ELEMENTWISE_CASES, ids=_id)
def test_scalar_binary(case):
    d, s, w = case
    x_f, x_j = _inputs(d, s, w)
    checks = [(f"{name}({_id(case)}, {c})", lambda x, n=name, c=c: getattr(fnp, n)(x, c),
               lambda x, n=name, c=c: getattr(jnp, n)(x, c), s == (5,) and c == 2.0)
              for name in SCALAR_BINARY for c in (2.0, -0.5, 1e30)]
    checks.append((f"x * 2.0 ({_id(case)})", lambda x: x * 2.0, lambda x: x * 2.0, False))
    # The operator slots' own scalar path (float arrays, Python float or int32-sized int, either side).
    for c in (2.0, -3, 1e30, 7):
        for name, op in (("x + c", lambda x, c=c: x + c), ("c + x", lambda x, c=c: c + x),
                         ("x - c", lambda x, c=c: x - c), ("c - x", lambda x, c=c: c - x),
                         ("x * c", lambda x, c=c: x * c), ("c * x", lambda x, c=c: c * x),
                         ("x < c", lambda x, c=c: x < c), ("c >= x", lambda x, c=c: c >= x)):
            checks.append((f"{name} ({_id(case)}, {c})", op, op, s == (5,)))
    check_all(checks, x_f, x_j)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_reductions(case):
    d, s, w = case
    x_f, x_j = _inputs(d, s, w)
    check_all([c for name in REDUCTIONS for c in (
        (f"{name}({_id(case)})", getattr(fnp, name), getattr(jnp, name), s == (5,)),
        (f"x.{name}() ({_id(case)})", lambda x, n=name: getattr(x, n)(), lambda x, n=name: getattr(x, n)(), False))],
        x_f, x_j)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int8], ids=str)
def test_reductions_long_and_strided(dtype):
    """Past NumPy's pairwise-summation blocks and its 8192-element buffers, and on a strided view."""
    d = np.dtype(dtype)
    big = _value(d, (3, 5000))
    for v in (big, big.T, big[:, ::3]):
        x_f, x_j = Array._new(v, False), jnp.asarray(v)
        for name in REDUCTIONS:
            check(f"{name}({d.name}{v.shape})", getattr(fnp, name), getattr(jnp, name), x_f, x_j)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # x * 1e30 overflows: see test_scalar_binary
def test_special_values_bitwise():
    """-0.0, infinities and NaN go through the fast paths exactly as through the primitives."""
    v = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1e38, 1e-30], np.float32)
    x_f, x_j = Array._new(v, False), jnp.asarray(v)
    for name in ["sin", "exp", "log", "sqrt", "negative", "abs", "sign", "floor", "reciprocal"]:
        check(name, getattr(fnp, name), getattr(jnp, name), x_f, x_j)
    for name in REDUCTIONS:
        check(name, getattr(fnp, name), getattr(jnp, name), x_f, x_j)
    check("x * 1e30", lambda x: x * 1e30, lambda x: x * 1e30, x_f, x_j)


# ---------------------------------------------------------------- the fast paths are taken
@pytest.mark.parametrize("expr", [
    lambda x: fnp.sin(x), lambda x: fnp.tanh(x), lambda x: fnp.negative(x), lambda x: fnp.abs(x),
    lambda x: x * 2.0, lambda x: fnp.sum(x), lambda x: fnp.max(x), lambda x: fnp.min(x),
    lambda x: fnp.mean(x), lambda x: x + x, lambda x: 2.0 * x, lambda x: 1 - x, lambda x: x + 3,
])
def test_fast_path_skips_bind(expr, monkeypatch):
    """On a float32 Array these run no primitive through ``bind``: that is what makes them fast."""
    calls = []
    real = ftrace.eager_apply
    monkeypatch.setattr(ftrace, "eager_apply", lambda *a: calls.append(a[0]) or real(*a))
    x = fnp.asarray(np.linspace(0.1, 0.9, 8, dtype=np.float32))
    out = expr(x)
    assert isinstance(out, Array)
    assert calls == [], f"went through bind for {calls}"


def test_fast_path_not_taken_under_tracing():
    """Inside make_jaxpr every function is staged (the fast path would leak a constant)."""
    closed = ftrans.make_jaxpr(lambda x: fnp.sum(fnp.sin(x) * 2.0))(np.ones(3, np.float32))
    prims = [e.primitive.name for e in closed.jaxpr.eqns]
    assert prims == ["sin", "mul", "reduce_sum"], prims


# ---------------------------------------------------------------- no floating-point warnings
def test_no_warnings_even_when_warnings_are_errors():
    """XLA never warns; ftrans must not, even after a user's simplefilter("error")."""
    z = fnp.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.all(np.isneginf(np.asarray(fnp.log(z))))
        assert np.all(np.isinf(np.asarray(1 / z)))
        assert np.all(np.isnan(np.asarray(z / z)))
        assert np.isnan(float(fnp.arcsin(2.0)))
        assert np.isinf(float(fnp.exp(fnp.asarray([1000.0], np.float16))[0]))
        assert np.isinf(float(fnp.sum(fnp.asarray([3e38, 3e38], np.float32))))
        assert np.isnan(float(fnp.mean(fnp.zeros((0,)))))
        assert np.asarray(fnp.asarray([1, 2]) // 0).tolist() == np.asarray(
            jnp.asarray([1, 2]) // 0).tolist()
        # the cheap rules (add, mul) and the operator slots' fast paths overflow without raising
        h = fnp.asarray(np.array([6e4], np.float16))
        for big in (h + h, h * 1e30, 1e30 * h, h - (-h), ftrans.lax.add(h, h), fnp.multiply(h, h)):
            assert np.isinf(np.asarray(big)).all() and big.dtype == np.float16


def test_no_warnings_under_python_W_error():
    import subprocess
    import sys

    code = ("import ftrans.numpy as jnp; z = jnp.zeros(2); "
            "print(jnp.log(z), 1 / z, jnp.sqrt(-1.0), jnp.asarray([3e38]) * 10.0, jnp.sum(z / z))")
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True,
                       env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr, r.stderr
    assert "-inf" in r.stdout and "nan" in r.stdout


def test_jax_oracle_is_jax():
    # ftrans supports jax 0.10 through 0.12 (CI runs 0.10; the GPU machine has 0.11)
    assert (0, 10) <= tuple(int(p) for p in jax.__version__.split(".")[:2]) <= (0, 12), jax.__version__


# ---------------------------------------------------------------- the error state is skipped only when safe
def test_error_state_is_skipped_only_behind_ftrans_filter():
    from ftrans.core.prims import _base

    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ftrans(\.|$)")
        # catch_warnings copied the list: ftrans's filter is an equal tuple, not the same one
        warnings.filters[0] = _base._FTRANS_FILTER
        assert _base.warnings_filtered()
        warnings.simplefilter("always", DeprecationWarning)  # cannot match a RuntimeWarning: still safe
        assert _base.warnings_filtered()
        z = fnp.zeros(3)
        with warnings.catch_warnings(record=True) as seen:
            assert np.all(np.isneginf(np.asarray(fnp.log(z))))
            assert np.all(np.isnan(np.asarray(fnp.arcsin(z + 2.0))))
        assert not [w for w in seen if issubclass(w.category, RuntimeWarning)]
        warnings.simplefilter("error")  # ahead of ftrans's filter: the rules set the error state again
        assert not _base.warnings_filtered()
        assert np.all(np.isneginf(np.asarray(fnp.log(z))))
        assert np.all(np.isnan(np.asarray(fnp.arcsin(z + 2.0))))


def test_no_floating_point_error_under_user_seterr_raise():
    from ftrans.core.prims import _base

    z = fnp.zeros(2)
    with np.errstate(all="raise"):
        assert not _base.warnings_filtered()
        assert np.all(np.isneginf(np.asarray(fnp.log(z))))
        assert np.all(np.isnan(np.asarray(fnp.sqrt(z - 1.0))))
        assert np.all(np.isinf(np.asarray(fnp.exp(z + 1000.0))))


# ---------------------------------------------------------------- bind's eager branch for one or two Arrays
@pytest.mark.parametrize("case", ["sin", "add", "add_weak", "mul_scalar", "max_mixed", "atan2"])
def test_bind_eager_branch_matches_jax(case):
    from jax import lax as jlax

    from ftrans import lax as flax

    x = np.linspace(0.1, 0.9, 6, dtype=np.float32)
    y = np.linspace(1.0, 2.0, 6, dtype=np.float32)
    fx, fy = fnp.asarray(x), fnp.asarray(y)
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    fw, jw = fnp.asarray(2.0), jnp.asarray(2.0)  # weakly typed rank-0 values
    cases = {
        "sin": (lambda: flax.sin(fx), lambda: jlax.sin(jx)),
        "add": (lambda: flax.add(fx, fy), lambda: jlax.add(jx, jy)),
        "add_weak": (lambda: flax.add(fw, fw), lambda: jlax.add(jw, jw)),
        "mul_scalar": (lambda: flax.mul(fx, 3.0), lambda: jlax.mul(jx, 3.0)),  # a Python float: the general path
        "max_mixed": (lambda: flax.max(x, fy), lambda: jlax.max(x, jy)),  # a NumPy operand
        "atan2": (lambda: flax.atan2(fx, fy), lambda: jlax.atan2(jx, jy)),
    }
    f, j = cases[case]
    got, want = f(), j()
    assert isinstance(got, Array)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.weak_type == want.aval.weak_type
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


# ---------------------------------------------------------------- lax's eager type check is remembered only on success
def test_lax_eager_check_cache_still_raises_every_error():
    from ftrans import lax as flax

    f32 = fnp.asarray(np.ones(3, np.float32))
    i32 = fnp.asarray(np.ones(3, np.int32))
    f32_4 = fnp.asarray(np.ones(4, np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(flax.add(f32, f32)), np.full(3, 2.0, np.float32))
        with pytest.raises(TypeError):
            flax.add(f32, i32)  # a dtype mismatch: the rule raises every time
        with pytest.raises(TypeError):
            flax.add(f32, f32_4)  # shapes that do not match
        with pytest.raises(TypeError):
            flax.sin(i32)  # sin of an integer
        assert flax.sin(f32).dtype == np.float32
    w = fnp.asarray(2.0)  # weak: a different key, same check
    assert flax.add(w, w).weak_type and not flax.add(f32, f32).weak_type


def test_lax_functions_on_arrays_match_jax():
    from jax import lax as jlax

    from ftrans import lax as flax

    x = np.linspace(0.1, 0.9, 6, dtype=np.float32).reshape(2, 3)
    y = np.linspace(1.0, 2.0, 3, dtype=np.float32).reshape(1, 3)
    for name in ("add", "sub", "max", "atan2"):
        got = getattr(flax, name)(fnp.asarray(x), fnp.asarray(y))  # size-1 broadcasting of Arrays
        want = getattr(jlax, name)(jnp.asarray(x), jnp.asarray(y))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    for name in ("sin", "exp", "tanh"):
        got, want = getattr(flax, name)(fnp.asarray(x)), getattr(jlax, name)(jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


# ---------------------------------------------------------------- narrow integers on the fast operators and bind
NARROW = [np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.int2), np.dtype(ml_dtypes.uint2)]
NARROW_OPS = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
              "less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
              "greater_equal": lambda a, b: a >= b}


def _all_pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    info = ml_dtypes.iinfo(dtype)
    vals = np.arange(int(info.min), int(info.max) + 1)
    return np.repeat(vals, len(vals)).astype(dtype), np.tile(vals, len(vals)).astype(dtype)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_narrow_int_operators_match_general_path_and_jax(dtype):
    """The operators call NumPy's (ml_dtypes') own loops for 2/4-bit integers, with wraparound: every pair of
    values gives what the staged primitive gives (its rule through int8) and what jax gives."""
    a, b = _all_pairs(dtype)
    fa, fb = Array._new(a, False), Array._new(b, False)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    for name, op in NARROW_OPS.items():
        eager = op(fa, fb)
        traced = staged(lambda x, y, op=op: op(x, y), fa, fb)
        assert eager.dtype == traced.dtype and _bits(eager) == _bits(traced), name
        want = op(ja, jb)
        assert eager.dtype == want.dtype, name
        np.testing.assert_array_equal(np.asarray(eager).astype(np.int64), np.asarray(want).astype(np.int64),
                                      err_msg=name)


def test_narrow_loop_check_refuses_a_rule_that_differs():
    """A rule whose narrow-integer results differ from the int8 route (another dtype, other values, no loop)
    keeps the operator on the wrapped rule."""
    from ftrans.core.array import _narrow_loops_agree
    from ftrans.core.prims import elementwise as E

    impl = E.add_p.impl
    assert _narrow_loops_agree(impl.wide_rule, impl)
    assert not _narrow_loops_agree(lambda x, y: np.add(x.astype(np.int8), y.astype(np.int8)), impl)
    assert not _narrow_loops_agree(lambda x, y: np.subtract(x, y), impl)

    def no_loop(x, y):
        raise TypeError("no loop")

    assert not _narrow_loops_agree(no_loop, impl)


@pytest.mark.parametrize("dtype", [np.dtype(np.int8), np.dtype(np.uint32), np.dtype(np.float16), BF16,
                                   np.dtype(ml_dtypes.int4)], ids=lambda d: d.name)
def test_bind_eager_branch_narrow_wrapper_skipped_same_results(dtype):
    """bind's host apply calls the rule inside the narrow-integer wrapper for NumPy's own dtypes: eager lax
    ops give the staged primitive's bits, and jax's values."""
    from jax import lax as jlax

    from ftrans import lax as flax

    x, y = _value(dtype, (5,)), _value(dtype, (5,))[::-1].copy()
    fx, fy = Array._new(x, False), Array._new(y, False)
    for name in ("add", "sub", "mul", "max", "lt"):
        f = getattr(flax, name)
        eager = f(fx, fy)
        traced = staged(lambda a, b, f=f: f(a, b), fx, fy)
        assert eager.dtype == traced.dtype and _bits(eager) == _bits(traced), name
        want = getattr(jlax, name)(jnp.asarray(x), jnp.asarray(y))
        assert eager.dtype == want.dtype, name
        np.testing.assert_allclose(np.asarray(eager).astype(np.float64), np.asarray(want).astype(np.float64),
                                   rtol=_tol(dtype), err_msg=name)


def test_lax_flat_check_key_one_and_two_operands():
    """The eager check's flat keys (one or two Arrays, no params) tell shapes, dtypes and weak types apart:
    a signature that passed never lets a different one through unchecked."""
    from ftrans import lax as flax

    f32 = fnp.asarray(np.ones(3, np.float32))
    f32_0 = fnp.asarray(np.float32(2.0))
    i32_0 = fnp.asarray(np.int32(2))
    w = fnp.asarray(2.0)
    for _ in range(2):
        assert flax.neg(f32_0).shape == () and flax.neg(w).weak_type
        with pytest.raises(TypeError):
            flax.sin(i32_0)  # one operand: same shape as a checked one, another dtype
        assert flax.add(f32_0, f32_0).dtype == np.float32
        with pytest.raises(TypeError):
            flax.add(f32_0, i32_0)
        with pytest.raises(TypeError):
            flax.add(i32_0, f32_0)
        assert flax.add(w, w).weak_type and not flax.add(w, f32_0).weak_type
        assert flax.add(f32, np.ones(3, np.float32)).shape == (3,)  # a NumPy operand: the general key


def test_operators_of_an_accelerator_resident_array_skip_the_host_fast_path(monkeypatch):
    """On a GPU a jit output is an uncommitted device array whose buffer is device memory: its operators
    must reach the device backend (which runs them there), not copy it to the host for NumPy."""
    import ftrans.core.array as array_mod
    from ftrans.core import trace

    y = ftrans.jit(lambda x: x + 0.5)(np.ones(4, np.float32))
    assert type(y) is array_mod.DeviceArray and not y._committed
    seen = []

    def spy(prim, args, params):
        seen.append(prim.name)
        return NotImplemented  # the host rule answers

    old = trace.device_backend()
    trace.set_device_backend(spy)
    try:
        if y.device.platform == "cpu":  # (a jit output on a GPU is in device memory: the second half only)
            # with a Python scalar (an optimizer's `lr * g`) or a host array, the NumPy fast path takes a host
            # buffer
            np.testing.assert_array_equal(np.asarray(y * 2.0), np.full(4, 3.0, np.float32))
            np.testing.assert_array_equal(np.asarray(y + fnp.ones(4)), np.full(4, 2.5, np.float32))
            z = y + y  # two jit outputs in host memory: NumPy too, the result as the general path gives it
            assert seen == [] and z.dtype == np.float32 and not z.weak_type
            np.testing.assert_array_equal(np.asarray(z), np.asarray(y) + np.asarray(y))
        monkeypatch.setattr(array_mod, "_accelerator_buffers", True)
        monkeypatch.setattr(array_mod.DeviceArray, "device",
                            property(lambda self: type("Gpu", (), {"platform": "gpu", "id": 0})()))
        np.testing.assert_array_equal(np.asarray(y * 2.0), np.full(4, 3.0, np.float32))
        np.testing.assert_array_equal(np.asarray(2.0 * y), np.full(4, 3.0, np.float32))
        np.testing.assert_array_equal(np.asarray(y + fnp.ones(4)), np.full(4, 2.5, np.float32))
        np.testing.assert_array_equal(np.asarray(y + y), np.full(4, 3.0, np.float32))
        assert seen == ["mul", "mul", "add", "add"]
    finally:
        trace.set_device_backend(old)
