"""Differential tests of ``ftrans.lax`` against ``jax.lax``: values, dtypes, shapes, weak types,
eagerly and staged (typechecked), plus the strictness errors lax promises."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.lax as jlax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
from ftrans import lax
from ftrans.core.ir import typecheck
from ftrans.lax import _ops as lax_ops  # mixed-dtype dot_general, dot(dimension_numbers=)
from tests.backend_util import host_oracle

BF16 = np.dtype(ml_dtypes.bfloat16)
F32, F16, I32, I8, U8, U32, C64, BOOL = (np.dtype(d) for d in (np.float32, np.float16, np.int32, np.int8,
                                                              np.uint8, np.uint32, np.complex64, np.bool_))
VALS = np.array([0.25, -0.5, 0.75, 1.5, -2.5, 3.0, 0.0, -0.0, 2.5, -3.7, 0.9, 4.0])


def vals(dtype, shape=(12,), positive=False, unit=False):
    d = np.dtype(dtype)
    base = np.resize(VALS, int(np.prod(shape))).reshape(shape)
    if positive:
        base = np.abs(base) + 1.25
    if unit:
        base = np.clip(base / 5, -0.9, 0.9)
    if d == BOOL:
        return base > 0
    if d.kind in "iu":
        return (base * 3).astype(np.int64).astype(d)
    out = base.astype(d)
    if d.kind == "c":
        out = out + 1j * np.roll(base, 1).astype(d) / 2
    return out


def staged(f, *args):
    closed = ftrans.make_jaxpr(f)(*args)
    typecheck(closed)
    outs = ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return outs, closed.out_avals


def _tol(d):
    return 3e-2 if d == BF16 else 3e-3 if d.itemsize == 2 or d == C64 else 2e-5


def assert_same(got, want, aval=None):
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    assert g.shape == w.shape, (g.shape, w.shape)
    want_weak = bool(getattr(want, "weak_type", False))
    if isinstance(got, ftrans.Array):
        assert got.weak_type == want_weak, ("weak_type", got.weak_type, want_weak)
    if aval is not None:
        assert (aval.dtype, aval.shape, aval.weak_type) == (w.dtype, w.shape, want_weak)
    if w.dtype.kind in "fc" or w.dtype == BF16:
        wide = np.complex128 if w.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=_tol(w.dtype), atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def check(name, *args, f=None, jf=None, **kw):
    """ftrans.lax.<name> vs jax.lax.<name>: same result or the same kind of error; eager and staged."""
    ff = f or (lambda *a: getattr(lax, name)(*a, **kw))
    jff = jf or (lambda *a: getattr(jlax, name)(*a, **kw))
    try:
        with host_oracle():  # both of ftrans's results below are eager: host arithmetic
            want = jff(*args)
    except (TypeError, ValueError, IndexError):
        # jax reports some shape errors only when lowering (as ValueError); ftrans
        # reports them while checking types, so any of the three kinds is accepted.
        kind = (TypeError, ValueError, IndexError)
        with pytest.raises(kind):
            ff(*args)
        with pytest.raises(kind):
            ftrans.make_jaxpr(ff)(*args)
        return None
    got = ff(*args)
    wants = want if isinstance(want, (tuple, list)) else [want]
    gots = got if isinstance(got, (tuple, list)) else [got]
    for g, w in zip(gots, wants):
        assert_same(g, w)
    outs, avals = staged(ff, *args)
    for g, w, a in zip(outs, wants, avals):
        assert_same(np.asarray(g), w, a)
    return got


# ---------------------------------------------------------------- elementwise
FLOAT_UNARY = ["exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos",
               "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc",
               "erf_inv", "lgamma", "digamma", "floor", "ceil", "round", "is_finite", "neg", "abs", "sign",
               "square", "real", "imag", "conj"]
POSITIVE = {"log", "sqrt", "rsqrt", "lgamma", "digamma", "acosh"}
UNIT = {"asin", "acos", "atanh", "erf_inv"}


@pytest.mark.parametrize("dtype", [F32, F16, BF16, C64, I32], ids=lambda d: d.name)
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_unary(name, dtype):
    if dtype in (F16, BF16, I32) and FLOAT_UNARY.index(name) % 3:
        # Half precision and int (mostly a dtype error) on a third of the functions keeps
        # the file fast; every function still runs on float32 and complex64.
        return
    check(name, vals(dtype, positive=name in POSITIVE, unit=name in UNIT))


def test_unary_python_scalars_are_weak():
    for name in ("exp", "neg", "sin", "sqrt", "is_finite", "floor"):
        check(name, 2.0)
    check("neg", 3)
    check("abs", -3)


BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "pow", "atan2", "nextafter", "complex", "eq", "ne",
          "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("dtype", [F32, I32, BF16, C64, BOOL, U8], ids=lambda d: d.name)
@pytest.mark.parametrize("name", BINARY)
def test_binary_same_dtype(name, dtype):
    if dtype in (BF16, BOOL, U8) and BINARY.index(name) % 2:
        return  # half of the functions on the rarer dtypes keeps the file fast
    if name == "atan2" and dtype == C64:
        return  # complex atan2 differs from XLA's on its branch cut (signed zeros)
    a = vals(dtype, positive=name == "pow")
    b = np.roll(vals(dtype), 3)
    if dtype.kind in "iu" and name in ("div", "rem"):
        b = np.where(b == 0, 1, b).astype(dtype)
    check(name, a, b)


def test_integer_division_by_zero_and_overflow():
    a = np.array([7, -7, 0, -128, 5], np.int8)
    b = np.array([0, 0, 0, -1, 2], np.int8)
    check("div", a, b)
    check("rem", a, b)
    check("div", a.astype(np.uint8), b.astype(np.uint8))
    # The most negative divisor: rounded toward zero, 0 for every other dividend (abs(-128) is -128 in int8).
    for dt in (np.int8, np.int16, np.int32):
        lo = np.iinfo(dt).min
        check("div", np.array([lo + 1, -7, -1, 1, 5, lo, 100], dt), np.full(7, lo, dt))


def test_bitwise_and_shifts():
    a = np.array([-100, 3, 1, -1, 64, 127], np.int8)
    s = np.array([1, 8, 9, 7, -1, 3], np.int8)
    for name in ("shift_left", "shift_right_logical", "shift_right_arithmetic", "bitwise_and",
                 "bitwise_or", "bitwise_xor"):
        check(name, a, s)
        check(name, a.astype(np.uint8), s.astype(np.uint8))
    check("bitwise_not", a)
    check("bitwise_not", np.array([True, False]))
    check("population_count", a)
    check("population_count", np.array([0, 1, 255, 2**31], np.uint32))
    check("bitwise_and", np.array([True, False]), np.array([True, True]))


def test_pow_mixed_dtypes_and_integer_pow():
    x = vals(F32, positive=True)
    check("pow", x, np.arange(12, dtype=np.int32) - 4)
    check("pow", x, 2.5)
    check("pow", np.array([0j, 0j, 1 + 1j], np.complex64), np.array([2 + 0j, 1 + 2j, 2 + 0j], np.complex64))
    check("pow", np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32))  # TypeError in both
    for y in (0, 1, 2, 3, -2, 7):
        check("integer_pow", x, y=y)
    check("integer_pow", np.arange(5, dtype=np.int32), y=3)
    check("integer_pow", np.arange(5, dtype=np.int32), y=-1)  # TypeError in both
    check("square", np.arange(5, dtype=np.int32))
    with pytest.raises(TypeError, match="static Python int"):
        lax.integer_pow(x, 2.0)


def test_round_methods():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, -2.4, 3.0], np.float32)
    check("round", x)
    check("round", x, f=lambda a: lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN),
          jf=lambda a: jlax.round(a, jlax.RoundingMethod.TO_NEAREST_EVEN))
    check("round", x.astype(BF16), f=lambda a: lax.round(a, 1), jf=lambda a: jlax.round(a, 1))
    assert int(lax.RoundingMethod.TO_NEAREST_EVEN) == 1
    with pytest.raises(ValueError, match="rounding_method"):
        lax.round(x, 5)


def test_python_scalars_take_the_array_dtype():
    x = vals(F32)
    with pytest.raises(TypeError, match="same dtype"):
        lax.add(x, 2)  # as in jax 0.10: an int is int32, which a float32 array does not take
    got = lax.add(x, 2.0)
    assert got.dtype == F32 and not got.weak_type
    np.testing.assert_allclose(np.asarray(got), x + 2)
    check("add", x, 2.5)
    check("mul", 2.0, x)
    check("add", 2, 3)  # both weak: weak int32
    check("lt", 2.0, 3.0)
    check("add", vals(F16), np.float64(2))  # NumPy scalars are strong: a dtype error in both
    with pytest.raises(TypeError, match="same dtype"):
        lax.add(vals(I32), 2.5)  # a float never silently becomes an int


def test_strictness_errors_eager_and_staged():
    x, i = vals(F32), vals(I32)
    with pytest.raises(TypeError, match=r"add.*f32\[12\].*i32\[12\]"):
        lax.add(x, i)
    with pytest.raises(TypeError, match="add"):
        ftrans.make_jaxpr(lambda a, b: lax.add(a, b))(x, i)
    with pytest.raises(TypeError, match="same number of dimensions"):
        lax.mul(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="incompatible shapes"):
        lax.mul(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="floating-point"):
        lax.exp(i)
    with pytest.raises(TypeError, match="numeric"):
        lax.neg(np.array([True]))
    with pytest.raises(NotImplementedError, match="accuracy"):
        lax.exp(x, accuracy=1e-3)
    with pytest.raises(TypeError, match="requires ndarray"):
        lax.add([1.0], x)


def test_complex_parts():
    c = vals(C64)
    check("real", c)
    check("imag", c)
    check("conj", c)
    check("conj", vals(F32))
    check("complex", vals(F32), np.roll(vals(F32), 1))
    check("complex", 1.0, 2.0)
    check("real", vals(F32))  # TypeError in both


# ---------------------------------------------------------------- selection and types
def test_select_select_n_clamp():
    p = vals(F32) > 0
    a, b = vals(F32), np.roll(vals(F32), 2)
    check("select", p, a, b)
    check("select", True, a, b)
    check("select_n", p, a, b)
    check("select_n", np.array([0, 1, 2, 0], np.int32), a[:4], b[:4], a[:4] * 2)
    check("select_n", np.int32(1), a)
    check("select", p, a, vals(I32))  # TypeError: case dtypes differ
    check("select", p[:3], a, b)  # TypeError: shapes
    check("clamp", 0.0, a, 1.0)
    check("clamp", np.zeros(12, np.float32), a, np.float32(2))
    check("clamp", np.int8(-1), vals(I8), np.int8(2))
    check("clamp", np.zeros(3, np.float32), 2.0, 1.0)  # TypeError in both


CONVERT_DTYPES = [F32, F16, BF16, I32, I8, U8, U32, BOOL, C64]
CONVERT_SRC = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7, 300.0, -1.0, 0.5, 255.5, 65504.0])


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # jax's, for complex -> real
@pytest.mark.parametrize("src", [F32, F16, I32, C64, BOOL], ids=lambda d: d.name)
def test_convert_element_type(src):
    if src.kind in "iub":
        x = vals(src)
    else:
        with np.errstate(over="ignore"):
            x = CONVERT_SRC.astype(src) if src.kind != "c" else (CONVERT_SRC + 1j).astype(src)
    # The oracle is jax under jit (XLA's conversion: NaN -> 0, out-of-range floats saturate): jax 0.11 converts
    # a NumPy operand eagerly with NumPy's astype (NaN and inf -> INT_MIN on x86); ftrans keeps XLA's
    # semantics eagerly too, as jax 0.10 did (docs/differences.md).
    for dst in CONVERT_DTYPES:
        check("convert_element_type", x, f=lambda a, d=dst: lax.convert_element_type(a, d),
              jf=jax.jit(lambda a, d=dst: jlax.convert_element_type(a, d)))
    check("convert_element_type", 2.5, I32, f=lambda a: lax.convert_element_type(a, np.int32),
          jf=lambda a: jlax.convert_element_type(a, np.int32))


def test_bitcast_convert_type():
    x = vals(F32)
    for dst in (I32, U32, np.dtype(np.uint8), np.dtype(np.int16)):
        check("bitcast_convert_type", x, f=lambda a, d=dst: lax.bitcast_convert_type(a, d),
              jf=lambda a, d=dst: jlax.bitcast_convert_type(a, d))
    u8 = np.arange(16, dtype=np.uint8).reshape(4, 4)
    check("bitcast_convert_type", u8, F32, f=lambda a: lax.bitcast_convert_type(a, np.float32),
          jf=lambda a: jlax.bitcast_convert_type(a, np.float32))
    with pytest.raises(TypeError, match="bool"):
        lax.bitcast_convert_type(np.ones(3, np.int8), np.bool_)


def test_stop_gradient_maps_over_pytrees():
    tree = {"a": vals(F32), "b": (vals(I32), vals(C64))}
    got = lax.stop_gradient(tree)
    want = jlax.stop_gradient(tree)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert_same(g, w)
    closed = ftrans.make_jaxpr(lax.stop_gradient)(vals(F32))
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["stop_gradient"]


# ---------------------------------------------------------------- shapes
def test_broadcasting_and_iota():
    x = vals(F32, (3,))
    check("broadcast", x, f=lambda a: lax.broadcast(a, (2, 4)), jf=lambda a: jlax.broadcast(a, (2, 4)))
    check("broadcast_in_dim", x, f=lambda a: lax.broadcast_in_dim(a, (3, 2), (0,)),
          jf=lambda a: jlax.broadcast_in_dim(a, (3, 2), (0,)))
    check("broadcast_in_dim", 2.0, f=lambda a: lax.broadcast_in_dim(a, (2,), ()),
          jf=lambda a: jlax.broadcast_in_dim(a, (2,), ()))
    check("broadcast_in_dim", x, f=lambda a: lax.broadcast_in_dim(a, (4, 2), (0,)),
          jf=lambda a: jlax.broadcast_in_dim(a, (4, 2), (0,)))  # TypeError in both
    for dt in (np.int32, np.float32, np.uint8):
        assert_same(lax.iota(dt, 5), jlax.iota(dt, 5))
        assert_same(lax.broadcasted_iota(dt, (2, 3), 1), jlax.broadcasted_iota(dt, (2, 3), 1))
    with pytest.raises(ValueError, match="iota"):
        lax.iota(np.bool_, 3)


def test_reshape_transpose_squeeze_expand_rev():
    x = vals(F32, (2, 3, 1))
    check("reshape", x, f=lambda a: lax.reshape(a, (3, 2)), jf=lambda a: jlax.reshape(a, (3, 2)))
    check("reshape", x, f=lambda a: lax.reshape(a, (6,), (2, 1, 0)), jf=lambda a: jlax.reshape(a, (6,), (2, 1, 0)))
    check("reshape", x, f=lambda a: lax.reshape(a, (5,)), jf=lambda a: jlax.reshape(a, (5,)))
    check("transpose", x, f=lambda a: lax.transpose(a, (2, 0, 1)), jf=lambda a: jlax.transpose(a, (2, 0, 1)))
    check("squeeze", x, f=lambda a: lax.squeeze(a, (-1,)), jf=lambda a: jlax.squeeze(a, (-1,)))
    check("squeeze", x, f=lambda a: lax.squeeze(a, (0,)), jf=lambda a: jlax.squeeze(a, (0,)))  # ValueError
    check("expand_dims", x, f=lambda a: lax.expand_dims(a, (0, -1)), jf=lambda a: jlax.expand_dims(a, (0, -1)))
    check("rev", x, f=lambda a: lax.rev(a, (0, 1)), jf=lambda a: jlax.rev(a, (0, 1)))


@pytest.mark.parametrize("config", [[(1, 2, 0), (0, 0, 1)], [(-1, 1, 2), (2, -2, 0)], [(0, 0, 0), (-3, -1, 1)]])
def test_pad(config):
    x = vals(F32, (3, 4))
    check("pad", x, f=lambda a: lax.pad(a, -1.0, config), jf=lambda a: jlax.pad(a, -1.0, config))
    check("pad", x, f=lambda a: lax.pad(a, np.float32(7), config), jf=lambda a: jlax.pad(a, np.float32(7), config))


def test_concatenate_and_slices():
    x, y = vals(F32, (2, 3)), vals(F32, (2, 2))
    check("concatenate", x, y, f=lambda a, b: lax.concatenate([a, b], 1),
          jf=lambda a, b: jlax.concatenate([a, b], 1))
    check("concatenate", x, y, f=lambda a, b: lax.concatenate([a, b], 0),
          jf=lambda a, b: jlax.concatenate([a, b], 0))  # TypeError: shapes
    check("concatenate", x, vals(I32, (2, 2)), f=lambda a, b: lax.concatenate([a, b], 1),
          jf=lambda a, b: jlax.concatenate([a, b], 1))  # TypeError: dtypes
    z = vals(F32, (5, 6))
    check("slice", z, f=lambda a: lax.slice(a, (1, 0), (4, 6), (2, 3)), jf=lambda a: jlax.slice(a, (1, 0), (4, 6), (2, 3)))
    check("slice", z, f=lambda a: lax.slice(a, (1, 2), (3, 5)), jf=lambda a: jlax.slice(a, (1, 2), (3, 5)))
    # jax clamps this out-of-range limit for a NumPy operand (it slices with NumPy) but
    # rejects it under jit; ftrans is strict everywhere.
    with pytest.raises(ValueError, match="slice"):
        lax.slice(z, (1, 2), (6, 5))
    check("slice_in_dim", z, f=lambda a: lax.slice_in_dim(a, -4, None, 2, -1),
          jf=lambda a: jlax.slice_in_dim(a, -4, None, 2, -1))
    check("index_in_dim", z, f=lambda a: lax.index_in_dim(a, -1, 1, False),
          jf=lambda a: jlax.index_in_dim(a, -1, 1, False))
    check("index_in_dim", z, f=lambda a: lax.index_in_dim(a, 2), jf=lambda a: jlax.index_in_dim(a, 2))
    with pytest.raises(IndexError):
        lax.index_in_dim(z, 9, 1)


@given(starts=st.lists(st.integers(-8, 8), min_size=2, max_size=2),
       sizes=st.lists(st.integers(0, 4), min_size=2, max_size=2))
def test_dynamic_slice_clamps_like_xla(starts, sizes):
    x = vals(F32, (4, 5))
    check("dynamic_slice", x, f=lambda a: lax.dynamic_slice(a, starts, sizes),
          jf=lambda a: jlax.dynamic_slice(a, starts, sizes))
    upd = np.full(sizes, 9.0, np.float32)
    check("dynamic_update_slice", x, upd, f=lambda a, u: lax.dynamic_update_slice(a, u, starts),
          jf=lambda a, u: jlax.dynamic_update_slice(a, u, starts))


def test_dynamic_slices_with_traced_indices():
    x = vals(F32, (4, 5))
    i = np.int32(-2)
    check("dynamic_slice", x, i, f=lambda a, j: lax.dynamic_slice(a, (j, 1), (2, 2)),
          jf=lambda a, j: jlax.dynamic_slice(a, (j, 1), (2, 2)))
    check("dynamic_slice", x, np.array([1, 3], np.int32), f=lambda a, j: lax.dynamic_slice(a, j, (2, 2)),
          jf=lambda a, j: jlax.dynamic_slice(a, j, (2, 2)))
    check("dynamic_slice_in_dim", x, np.int32(3), f=lambda a, j: lax.dynamic_slice_in_dim(a, j, 2, 1),
          jf=lambda a, j: jlax.dynamic_slice_in_dim(a, j, 2, 1))
    check("dynamic_index_in_dim", x, np.int32(-1), f=lambda a, j: lax.dynamic_index_in_dim(a, j, 0, False),
          jf=lambda a, j: jlax.dynamic_index_in_dim(a, j, 0, False))
    row = np.full((5,), 7.0, np.float32)
    check("dynamic_update_index_in_dim", x, row, np.int32(2),
          f=lambda a, u, j: lax.dynamic_update_index_in_dim(a, u, j, 0),
          jf=lambda a, u, j: jlax.dynamic_update_index_in_dim(a, u, j, 0))
    check("dynamic_update_slice_in_dim", x, np.ones((4, 2), np.float32), np.int32(9),
          f=lambda a, u, j: lax.dynamic_update_slice_in_dim(a, u, j, 1),
          jf=lambda a, u, j: jlax.dynamic_update_slice_in_dim(a, u, j, 1))
    with pytest.raises(TypeError, match="integer"):
        lax.dynamic_slice(x, (1.0, 1), (2, 2))


# ---------------------------------------------------------------- contractions and reductions
def test_dot_general_and_dot():
    a, b = vals(F32, (2, 3, 4)), vals(F32, (2, 4, 5))
    dn = (((2,), (1,)), ((0,), (0,)))
    check("dot_general", a, b, f=lambda x, y: lax.dot_general(x, y, dn), jf=lambda x, y: jlax.dot_general(x, y, dn))
    check("dot_general", a, b.astype(BF16), f=lambda x, y: lax_ops.dot_general(x, y, dn),
          jf=lambda x, y: jlax.dot_general(x, y, dn))
    i8 = vals(I8, (3, 4))
    check("dot_general", i8, i8, f=lambda x, y: lax.dot_general(x, y, (((1,), (1,)), ((), ())), preferred_element_type=np.int32),
          jf=lambda x, y: jlax.dot_general(x, y, (((1,), (1,)), ((), ())), preferred_element_type=np.int32))
    m, v = vals(F32, (3, 4)), vals(F32, (4,))
    check("dot", m, v)
    check("dot", v, v)
    check("dot", m, m.T)
    check("dot", m, m)  # TypeError in both
    check("dot", a, b, f=lambda x, y: lax_ops.dot(x, y, dimension_numbers=dn),
          jf=lambda x, y: jlax.dot(x, y, dimension_numbers=dn))


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("dtype", [F32, I32, F16], ids=lambda d: d.name)
def test_reductions(name, dtype):
    x = vals(dtype, (3, 4))
    check(name, x, f=lambda a: getattr(lax, name)(a, (1,)), jf=lambda a: getattr(jlax, name)(a, (1,)))
    check(name, x, f=lambda a: getattr(lax, name)(a, (0, 1)), jf=lambda a: getattr(jlax, name)(a, (0, 1)))


def test_logical_reductions_and_argminmax():
    b = vals(BOOL, (3, 4))
    for name in ("reduce_and", "reduce_or"):
        got = getattr(lax, name)(b, (1,))
        want = getattr(jlax, name)(b, (1,))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got.dtype == want.dtype
    x = vals(F32, (3, 4))
    x[1, 2] = np.nan
    for name in ("argmax", "argmin"):
        check(name, x, f=lambda a, n=name: getattr(lax, n)(a, 1, np.int32),
              jf=lambda a, n=name: getattr(jlax, n)(a, 1, np.int32))
        check(name, x, f=lambda a, n=name: getattr(lax, n)(a, 0, np.uint8),
              jf=lambda a, n=name: getattr(jlax, n)(a, 0, np.uint8))


def test_lax_functions_record_one_primitive_each():
    closed = ftrans.make_jaxpr(lambda a, b: lax.sub(lax.mul(a, b), lax.exp(a)))(vals(F32), vals(F32))
    typecheck(closed)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["mul", "exp", "sub"]
