"""Differential tests of ``ftrans.numpy``'s elementwise functions against ``jax.numpy``.

Every function is run on the same inputs by jax and by ftrans, eagerly and
staged (``make_jaxpr`` + ``typecheck`` + ``eval_jaxpr``), and the results must
agree in dtype, shape, weak type and value (to a float tolerance).  Where jax
raises, ftrans must raise the same kind of error.

Known, deliberate value differences are kept out of the inputs: complex
infinities (XLA's complex division/sqrt/abs use other formulas at infinity
than NumPy), ``bool * nan`` (XLA rewrites ``convert(bool) * x`` into a select
that drops the NaN), and bfloat16 ``exp2`` of large arguments (XLA's is
inexact there).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans.core.ir import typecheck
from tests.thorough import THOROUGH

# The full cross product (every function x every dtype / dtype pair / scalar) costs one
# jax compilation per case, several minutes in all; by default each function gets a
# few rotating cases so the file stays fast. FTRANS_EXHAUSTIVE_TESTS=1 (or the "full"
# hypothesis profile) runs everything.
EXHAUSTIVE = THOROUGH
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(d) for d in (np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
                                np.float16, BF16, np.float32, np.complex64)]
DTYPE_IDS = [d.name for d in DTYPES]

UNARY = ("negative positive abs absolute sign exp exp2 expm1 log log2 log10 log1p sqrt cbrt square "
         "reciprocal sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh floor ceil "
         "round rint trunc isnan isinf isfinite nan_to_num logical_not invert deg2rad rad2deg signbit "
         "real imag conjugate").split()
BINARY = ("add subtract multiply divide true_divide floor_divide mod remainder power arctan2 maximum "
          "minimum fmax fmin logaddexp greater greater_equal less less_equal equal not_equal logical_and "
          "logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift right_shift heaviside "
          "hypot copysign fmod nextafter logaddexp2").split()

# Finite values that exercise signs, zeros, halves (rounding) and integer wraparound.
BASE = np.array([0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.5, 1.5, 2.5, -2.5, 7.0, 100.0, -100.0, 3.7, 130.0, -129.0])
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e-30])


def values(dtype: np.dtype, n: int = len(BASE), special: bool = False) -> np.ndarray:
    """Deterministic test values of ``dtype`` (integers wrap like a C cast)."""
    base = np.concatenate([BASE, SPECIAL]) if special else BASE
    base = np.resize(base, n)
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 1)
    if dtype.kind in "iu":
        return base.astype(np.int64).astype(dtype)
    out = base.astype(dtype)
    if dtype.kind == "c":
        out = out + 1j * np.roll(base, 3).astype(dtype)
    return out


def cases(names: list[str], options: list, k: int) -> list:
    """(name, option) pairs: all options when exhaustive, else ``k`` rotating ones per name."""
    out = []
    for i, name in enumerate(names):
        if EXHAUSTIVE:
            picked = list(options)
        else:
            picked = [options[(i * 5 + j * 3) % len(options)] for j in range(k)]
        seen = []
        for o in picked:
            if not any(o is p or (type(o) is type(p) and o == p) for p in seen):
                seen.append(o)
                out.append(pytest.param(name, o, id=f"{name}-{_case_id(o)}"))
    return out


def _case_id(o) -> str:
    if isinstance(o, np.dtype):
        return o.name
    if isinstance(o, tuple):
        return "-".join(_case_id(x) for x in o)
    if isinstance(o, type):
        return np.dtype(o).name
    return repr(o)


def staged(f, *args):
    """Run ``f`` through make_jaxpr (typechecked) and eval_jaxpr; also return the staged out aval."""
    closed = ftrans.make_jaxpr(f)(*args)
    typecheck(closed)
    (out,) = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    aval = closed.out_avals[0]
    if not isinstance(out, ftrans.Array):  # an identity program hands back its input
        out = ftrans.Array._make(np.asarray(out, aval.dtype), aval.weak_type)
    return out, aval


def _tol(d: np.dtype) -> float:
    if d == BF16:
        return 2e-2
    if d in (np.float16, np.complex64) or d.itemsize == 2:
        return 3e-3
    return 2e-5


def assert_matches(got, want, *, check_weak: bool = True) -> None:
    want_np = np.asarray(want)
    got_np = np.asarray(got)
    assert got_np.dtype == want_np.dtype, (got_np.dtype, want_np.dtype)
    assert got_np.shape == want_np.shape, (got_np.shape, want_np.shape)
    if check_weak:
        assert bool(got.weak_type) == bool(want.weak_type), ("weak_type", got.weak_type, want.weak_type)
    d = want_np.dtype
    if d.kind in "fc" or d == BF16:
        wide = np.complex128 if d.kind == "c" else np.float64
        a, b = got_np.astype(wide), want_np.astype(wide)
        tol = _tol(d)
        ok = np.isclose(a, b, rtol=tol, atol=tol * 1e-2, equal_nan=True)
        assert ok.all(), f"values differ: got {a[~ok]}, want {b[~ok]}"
    else:
        np.testing.assert_array_equal(got_np, want_np)


def differential(name: str, *args, module_f=None, jax_f=None) -> None:
    """Compare ftrans.numpy.<name> with jax.numpy.<name> eagerly and staged."""
    jf = jax_f or getattr(jjnp, name)
    ff = module_f or getattr(fjnp, name)
    try:
        want = jf(*args)
    except (TypeError, ValueError, NotImplementedError) as e:
        with pytest.raises(type(e) if isinstance(e, NotImplementedError) else (TypeError, ValueError)):
            ff(*args)
        return
    got = ff(*args)
    assert isinstance(got, ftrans.Array)
    assert_matches(got, want)
    if True:
        got_s, aval = staged(ff, *args)
        assert_matches(got_s, want)
        assert aval.dtype == np.asarray(want).dtype and aval.weak_type == bool(want.weak_type)


def tame(name: str, x: np.ndarray) -> np.ndarray:
    """Keep inputs away from known XLA-vs-NumPy differences that are not bugs.

    bfloat16 exp2 of large arguments is inexact in XLA; exp2 and powers of large
    arguments overflow to infinities that the two libraries spell differently.
    """
    if name in ("exp2", "power") and (x.dtype.kind in "fc" or x.dtype == BF16):
        mag = np.abs(x.astype(np.complex64 if x.dtype.kind == "c" else np.float32))
        return np.where(mag > 20, np.ones_like(x), x).astype(x.dtype)
    return x


# ---------------------------------------------------------------- unary functions
@pytest.mark.parametrize("name,dtype", cases(UNARY, DTYPES, 2))
def test_unary_arrays(name, dtype):
    differential(name, tame(name, values(dtype)))


@pytest.mark.parametrize("name,scalar", cases(UNARY, [True, 3, -2, 2.5, -0.5, 1 + 2j], 1))
def test_unary_python_scalars(name, scalar):
    """Python scalars are weakly typed; the result's weak type must follow jax's."""
    # log2 keeps a weak type as in jax 0.11 (jax 0.10's result was strong): compare with what 0.11 computes
    jax_f = (lambda x: jjnp.log(x) / math.log(2)) if name == "log2" else None
    differential(name, scalar, jax_f=jax_f)


@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("invert", "logical_not")][:: 1 if EXHAUSTIVE else 4])
def test_unary_special_values_float32(name):
    """NaN, infinities, signed zeros and huge values (float32, where NumPy and XLA agree)."""
    differential(name, values(np.dtype(np.float32), special=True, n=len(BASE) + len(SPECIAL)))


# ---------------------------------------------------------------- binary functions
PAIRS = [(np.int32, np.int32), (np.float32, np.float32), (np.int8, np.uint8), (np.uint8, np.int32),
         (np.int32, np.uint32), (np.uint32, np.int8), (np.bool_, np.int32), (np.bool_, np.bool_),
         (np.float16, np.int16), (BF16, np.float16), (BF16, np.float32), (np.int32, np.float16),
         (np.float32, np.complex64), (np.uint16, np.float32)]


@pytest.mark.parametrize("name,pair", cases(BINARY, PAIRS, 1))
def test_binary_dtype_pairs(name, pair):
    d1, d2 = (np.dtype(d) for d in pair)
    differential(name, tame(name, values(d1)), tame(name, np.roll(values(d2), 5)))


SCALAR_CASES = [(np.dtype(d), s) for d in (np.int8, np.uint8, np.int32, np.float16, BF16, np.float32, np.bool_)
                for s in (True, 2, -3, 2.5, 1 + 2j)]


@pytest.mark.parametrize("name,case", cases(BINARY, SCALAR_CASES, 1))
def test_binary_python_scalar_promotion(name, case):
    """A Python scalar never widens an array (weak typing), in either operand position."""
    dtype, scalar = case
    a = values(dtype)
    differential(name, a, scalar)
    differential(name, scalar, a)


@pytest.mark.parametrize("name", ["add", "multiply", "power", "maximum", "less", "logaddexp", "arctan2",
                                  "floor_divide", "remainder", "hypot", "copysign", "fmax", "fmin"])
def test_binary_special_values_float32(name):
    a = values(np.dtype(np.float32), special=True, n=len(BASE) + len(SPECIAL))
    b = np.roll(a, 7)
    differential(name, a, b)


def test_integer_division_and_remainder_by_zero():
    """XLA semantics that NumPy does not share: x // 0, x % 0 and fmod(x, 0) for integers."""
    a = np.array([-7, 7, -7, 0, 5, -128, 127], np.int8)
    b = np.array([2, -2, 0, 0, 0, -1, 0], np.int8)
    for name in ("floor_divide", "remainder", "fmod", "true_divide"):
        differential(name, a, b)
    ua = np.array([7, 0, 255], np.uint8)
    ub = np.array([0, 0, 2], np.uint8)
    for name in ("floor_divide", "remainder", "fmod"):
        differential(name, ua, ub)


def test_shifts_by_bit_width_or_more():
    a = np.array([-100, 3, 1, -1, 64], np.int8)
    s = np.array([1, 8, 9, 7, -1], np.int8)
    for name in ("left_shift", "right_shift"):
        differential(name, a, s)
        differential(name, a.astype(np.uint8), s.astype(np.uint8))


def test_integer_power_edge_cases():
    base = np.array([0, 1, -1, 2, -2, 3, 0], np.int32)
    exp_ = np.array([0, -1, -1, -2, 3, 40, 5], np.int32)
    differential("power", base, exp_)
    differential("power", base, 3)
    differential("power", np.array([True, False]), np.array([True, True]))
    differential("power", 2.0, np.arange(4, dtype=np.int32))
    with pytest.raises(TypeError, match="negative"):
        fjnp.power(np.arange(3, dtype=np.int32), -2)


def test_complex_ordering_max_min_comparisons():
    nan = np.nan
    a = np.array([1 + 2j, 1 + 3j, nan + 0j, 2 + 0j, 0 + 1j], np.complex64)
    b = np.array([1 + 3j, 1 + 2j, 1 + 1j, nan + 0j, 0 + 1j], np.complex64)
    for name in ("maximum", "minimum", "less", "greater_equal", "equal"):
        differential(name, a, b)


def test_nan_handling_in_max_min_and_fmax():
    a = np.array([np.nan, 1.0, -0.0, 0.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 0.0, -0.0, np.nan], np.float32)
    for name in ("maximum", "minimum", "fmax", "fmin"):
        differential(name, a, b)


def test_unsigned_python_int_wraps_like_jax():
    a = np.array([1, 2, 250], np.uint8)
    differential("add", a, -3)
    differential("add", a, 300)
    with pytest.raises(OverflowError):
        fjnp.add(a, 2**40)


# ---------------------------------------------------------------- broadcasting
BROADCAST_SHAPES = [((3, 1), (1, 4)), ((2, 3), (3,)), ((), (2, 2)), ((4,), ())]


@pytest.mark.parametrize("name,shapes", cases(["add", "multiply", "less", "power", "floor_divide", "arctan2",
                                                "where3", "logical_and", "hypot", "heaviside", "maximum"],
                                               BROADCAST_SHAPES, 1))
def test_broadcasting(name, shapes):
    s1, s2 = shapes
    a = np.resize(values(np.dtype(np.float32)), s1).astype(np.float32)
    b = np.resize(np.roll(values(np.dtype(np.int32)), 3), s2).astype(np.int32)
    if name == "where3":
        differential("where", a > 0, a, b)
    else:
        differential(name, a, b)


def test_broadcast_error_names_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)|incompatible"):
        fjnp.add(np.ones((2, 3), np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError):
        fjnp.add(fjnp.ones((2, 3)), fjnp.ones(4))  # the fast path falls back to the checked one


dtype_st = st.sampled_from(DTYPES)
shape_st = st.sampled_from([(), (1,), (3,), (2, 3), (1, 3), (2, 1)])


@given(name=st.sampled_from(BINARY), d1=dtype_st, d2=dtype_st, s1=shape_st, s2=shape_st)
def test_binary_random_dtypes_and_shapes(name, d1, d2, s1, s2):
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        return
    a = tame(name, np.resize(values(d1), s1).astype(d1))
    b = tame(name, np.resize(np.roll(values(d2), 4), s2).astype(d2))
    differential(name, a, b)


# ---------------------------------------------------------------- other functions
def test_where_clip_and_nan_to_num():
    x = values(np.dtype(np.float32), special=True, n=20)
    differential("where", x > 0, x, 0)
    differential("where", 1, 2.0, x)
    differential("where", np.int32(0), x, np.float16(3))
    differential("clip", x, -1, 2)
    differential("clip", values(np.dtype(np.int8)), 0, 2.5)
    differential("clip", 5, module_f=lambda v: fjnp.clip(v, max=3), jax_f=lambda v: jjnp.clip(v, max=3))
    differential("nan_to_num", x)
    differential("nan_to_num", x.astype(np.float16))
    fn = lambda v: fjnp.nan_to_num(v, nan=-1.0, posinf=9.0, neginf=-9.0)  # noqa: E731
    jn = lambda v: jjnp.nan_to_num(v, nan=-1.0, posinf=9.0, neginf=-9.0)  # noqa: E731
    differential("nan_to_num", x, module_f=fn, jax_f=jn)
    with pytest.raises(ValueError, match="complex"):
        fjnp.clip(np.ones(2, np.complex64), 0, 1)
    with pytest.raises(ValueError, match="both"):
        fjnp.where(x > 0, x)


@pytest.mark.parametrize("dtype,decimals", [(np.float32, 0), (np.float32, 2), (np.float16, 1), (BF16, 1),
                                            (np.complex64, 1), (np.int32, 0), (np.int32, -1), (np.float32, -1)])
def test_round_decimals(dtype, decimals):
    d = np.dtype(dtype)
    x = (values(d) / 3).astype(d) if d.kind in "fc" or d == BF16 else values(d)
    f = lambda v: fjnp.round(v, decimals)  # noqa: E731
    j = lambda v: jjnp.round(v, decimals)  # noqa: E731
    differential("round", x, module_f=f, jax_f=j)


def test_bool_arithmetic_follows_jax():
    t = np.array([True, False, True])
    f = np.array([True, True, False])
    differential("add", t, f)  # logical or
    differential("multiply", t, f)  # logical and
    differential("subtract", t, f)  # TypeError in both
    differential("negative", t)
    differential("sign", t)
    differential("square", t)
    with pytest.raises(TypeError, match="subtract"):
        fjnp.subtract(fjnp.asarray(t), fjnp.asarray(f))


def test_errors_name_the_function():
    with pytest.raises(TypeError, match="bitwise_and"):
        fjnp.bitwise_and(np.ones(2, np.float32), 1)
    with pytest.raises(TypeError, match="invert"):
        fjnp.invert(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="left_shift"):
        fjnp.left_shift(np.ones(2, np.float32), 1)
    with pytest.raises(ValueError, match="hypot"):
        fjnp.hypot(np.ones(2, np.complex64), 1)
    with pytest.raises(TypeError, match="requires ndarray or scalar"):
        fjnp.add([1, 2], 1)
    with pytest.raises(TypeError, match="floor_divide"):
        fjnp.floor_divide(np.ones(2, np.complex64), 1)


def test_operators_use_the_same_rules():
    x = fjnp.asarray(np.array([1, -2, 3], np.int8))
    jx = jjnp.asarray(np.array([1, -2, 3], np.int8))
    for op in (lambda a: a + 1, lambda a: a * 2.5, lambda a: a // 0, lambda a: a % -2, lambda a: -a,
               lambda a: a ** 2, lambda a: 2 ** a, lambda a: a < 1.5, lambda a: ~a, lambda a: a >> 1,
               lambda a: abs(a), lambda a: a / 2, lambda a: 1 - a):
        assert_matches(op(x), op(jx))


def test_staged_program_is_strict_and_typechecks():
    """Under tracing, promotion and broadcasting appear as explicit equations."""
    closed = ftrans.make_jaxpr(lambda a, b: fjnp.add(a, b))(np.ones((2, 3), np.int8), np.ones(3, np.float32))
    typecheck(closed)
    prims = [e.primitive.name for e in closed.jaxpr.eqns]
    assert "convert_element_type" in prims and "broadcast_in_dim" in prims and prims[-1] == "add"


def test_x64_mode_promotion():
    ftrans.config.update("enable_x64", True)
    jax.config.update("jax_enable_x64", True)
    try:
        differential("add", np.ones(3, np.int64), 2.5)
        differential("true_divide", np.arange(3, dtype=np.int64), 2)
        differential("multiply", np.ones(3, np.float32), np.ones(3, np.int64))
    finally:
        ftrans.config.update("enable_x64", False)
        jax.config.update("jax_enable_x64", False)
