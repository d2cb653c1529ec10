"""``ftrans.lax`` argument checks and edge cases, each compared with ``jax.lax`` (0.10.2): which inputs are
accepted, what they compute, and which exception type a wrong call raises."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import functools
from functools import partial

import jax
import jax.lax as jlax
import numpy as np
import pytest

import ftrans
from ftrans import lax
from tests.backend_util import host_oracle


@pytest.mark.parametrize("inshape,outshape,dims", [((3, 1), (2, 3, 4), (1, 0)), ((2, 3), (3, 4, 2), (2, 0)),
                                                   ((2, 3, 4), (4, 2, 3), (1, 2, 0))])
def test_broadcast_in_dim_any_axis_order(inshape, outshape, dims):
    x = np.arange(np.prod(inshape), dtype=np.float32).reshape(inshape)
    # jax.grad itself fails on unsorted dims (its transpose mixes up the axis order), so the reference
    # transposes the operand into output order first.
    perm = tuple(sorted(range(len(dims)), key=dims.__getitem__))
    want, jg = jax.jit(lambda a: (jlax.broadcast_in_dim(a, outshape, dims), jax.grad(
        lambda a: (jlax.broadcast_in_dim(jlax.transpose(a, perm), outshape, sorted(dims))
                   * np.arange(np.prod(outshape)).reshape(outshape)).sum())(a)))(x)
    np.testing.assert_array_equal(lax.broadcast_in_dim(x, outshape, dims), want)
    np.testing.assert_array_equal(ftrans.jit(lambda a: lax.broadcast_in_dim(a, outshape, dims))(x), want)
    g = ftrans.grad(lambda a: (lax.broadcast_in_dim(a, outshape, dims) * np.arange(np.prod(outshape)).reshape(outshape)).sum())(x)
    np.testing.assert_allclose(g, jg)


@pytest.mark.parametrize("inshape,outshape,dims", [([2], [2, 2], [0, 1]), ([2, 2], [2], [0, 1]),
                                                   ([2], [2, 3], [2]), ([2], [3], [0]), ([2, 2], [2, 2], [0, 0])])
def test_broadcast_in_dim_shape_errors_are_type_errors(inshape, outshape, dims):
    x = np.ones(inshape, np.float32)
    with pytest.raises(TypeError):
        jlax.broadcast_in_dim(x, outshape, dims)
    with pytest.raises(TypeError):
        lax.broadcast_in_dim(x, outshape, dims)


def test_squeeze_repeated_dimensions():
    x = np.ones((1, 2, 3), np.float32)
    with pytest.raises(ValueError, match="not unique"):
        jlax.squeeze(x, (0, 0))
    with pytest.raises(ValueError, match="not unique"):
        lax.squeeze(x, (0, 0))


@pytest.mark.parametrize("args,exc", [
    ((np.zeros(2), np.zeros(2), [(0, 0, 0)]), ValueError),
    ((np.zeros(2), 0., [(0, 1, 0), (0, 1, 0)]), ValueError),
    ((np.zeros(2), 0., [(0, 1, -1)]), ValueError),
    ((np.zeros(2), 0., [(-3, 0, 0)]), ValueError),
])
def test_pad_errors(args, exc):
    with pytest.raises(exc):
        jlax.pad(*args)
    with pytest.raises(exc, match="padding"):
        lax.pad(*args)


@pytest.mark.parametrize("idx", [(np.int32(1), np.int16(2)), (np.int16(1), 2), (np.uint32(1), np.int32(2))])
def test_dynamic_slice_mixed_index_dtypes(idx):
    x = np.ones((3, 4), np.float32)
    u = np.zeros((2, 2), np.float32)
    for mod in (jlax, lax):
        with pytest.raises(TypeError, match="integers of the same type"):
            mod.dynamic_slice(x, idx, (2, 2))
        with pytest.raises(TypeError, match="integers of the same type"):
            mod.dynamic_update_slice(x, u, idx)


@pytest.mark.parametrize("idx", [(np.int32(1), 2), (np.int64(1), np.int32(2)), (np.int16(1), np.int16(2))])
def test_dynamic_slice_one_index_dtype(idx):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(lax.dynamic_slice(x, idx, (2, 2)), jlax.dynamic_slice(x, idx, (2, 2)))


def test_top_k_index_overflow():
    x = jax.ShapeDtypeStruct((2 ** 31 + 1,), np.dtype("bfloat16"))
    with pytest.raises(ValueError, match="int32 indices"):
        jax.eval_shape(lambda a: jlax.top_k(a, 100), x)
    with pytest.raises(ValueError, match="int32 indices"):
        ftrans.eval_shape(lambda a: lax.top_k(a, 100), ftrans.ShapeDtypeStruct((2 ** 31 + 1,), np.dtype("bfloat16")))


@pytest.mark.parametrize("value,dtype", [(2 ** 32, "int32"), (-1, "uint8"), (2 ** 31, "int32"), (3, "float32"),
                                         (300, "int8")])
def test_convert_element_type_python_int_wraps(value, dtype):
    got, want = lax.convert_element_type(value, dtype), jlax.convert_element_type(value, dtype)
    assert got.dtype == want.dtype and not got.weak_type
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dims,strides", [((0,), (1,)), ((1,), (0,))])
def test_reduce_window_nonpositive_window_is_type_error(dims, strides):
    for mod in (jlax, lax):
        with pytest.raises(TypeError, match="strictly positive"):
            mod.reduce_window(np.ones((1,), np.float32), np.float32(0), mod.add, dims, strides, "VALID")


@pytest.mark.parametrize("prec", [jlax.Precision.HIGHEST, "highest", ("high", "highest")])
def test_dot_general_precision_kept_as_pair_through_transpose(prec):
    fprec = prec if isinstance(prec, (str, tuple)) else lax.Precision.HIGHEST
    x, y = np.ones((3, 2), np.float32), np.ones((2, 4), np.float32)
    dot = partial(lax.dot, precision=fprec)
    r, pb = ftrans.vjp(dot, x, y)
    eqns = ftrans.make_jaxpr(pb)(r).jaxpr.eqns
    precs = [e.params["precision"] for e in eqns if e.primitive.name == "dot_general"]
    assert precs and all(len(p) == 2 and all(isinstance(q, lax.Precision) for q in p) for p in precs)
    jr, jpb = jax.vjp(partial(jlax.dot, precision=prec), x, y)
    assert "Precision.HIGHEST" in str(jax.make_jaxpr(jpb)(jr))
    assert "Precision.HIGHEST" in str(ftrans.make_jaxpr(pb)(r))
    assert "precision = [" in ftrans.jit(dot).lower(x, y).as_text()
    np.testing.assert_allclose(dot(x, y), jlax.dot(x, y, precision=prec))


@pytest.mark.parametrize("dx,dy,out", [(np.int8, np.int8, np.float32), (np.float16, np.float32, np.float32),
                                       (np.int8, np.int8, np.int16), (np.float32, np.float32, np.float16)])
def test_mul_out_dtype(dx, dy, out):
    x, y = np.arange(1, 5).astype(dx), (np.arange(4) * 3 - 2).astype(dy)
    differentiable = np.issubdtype(dx, np.floating) and np.issubdtype(out, np.floating)
    want, jg = jax.jit(lambda a, b: (jlax.mul(a, b, out_dtype=out), jax.grad(
        lambda a, b: jlax.mul(a, b, out_dtype=out).astype(np.float32).sum(), (0, 1))(a, b)
        if differentiable else None))(x, y)
    got = lax.mul(x, y, out_dtype=out)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ftrans.jit(partial(lax.mul, out_dtype=out))(x, y), want)
    if differentiable:
        g = ftrans.grad(lambda a, b: lax.mul(a, b, out_dtype=out).astype(np.float32).sum(), (0, 1))(x, y)
        for a, b in zip(g, jg):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b)


def test_exp_expm1_rounded_like_xla():
    # NumPy's float32 exp is an ulp off in places (exp(77)); ftrans's eager exp and expm1 round the double
    # result once, so exp(x) and expm1(x) + 1 agree as XLA's do.
    x = np.arange(-80.0, 80.0, 1.0, dtype=np.float32)
    np.testing.assert_array_equal(lax.exp(x), np.exp(x.astype(np.float64)).astype(np.float32))
    np.testing.assert_allclose(lax.exp(x), jlax.exp(x), rtol=2e-7)
    e = ftrans.vmap(ftrans.grad(lax.exp))(x)
    a = ftrans.vmap(ftrans.grad(lax.expm1))(x)
    np.testing.assert_allclose(a, e, atol=1e-6, rtol=0)


def test_complex_log1p_near_zero():
    want = np.log1p(np.float32(1e-5))
    np.testing.assert_array_almost_equal_nulp(want.astype(np.complex64), lax.log1p(np.complex64(1e-5)))
    z = ((np.random.RandomState(0).randn(200) + 1j * np.random.RandomState(1).randn(200)) * 0.3).astype(np.complex64)
    z = np.concatenate([z, np.array([-1 + 0j, -1 + 1e-3j, 1e-30 + 1e-30j, -2 + 0j, 1e-6 - 1e-6j], np.complex64)])
    np.testing.assert_allclose(lax.log1p(z), jlax.log1p(z), rtol=3e-6, atol=1e-30)


# ---------------------------------------------------------------- narrow storage dtypes (int4, float8, ...)
import ml_dtypes  # noqa: E402

_INT4S = [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2]


def _narrow(values, dt):
    return np.asarray(values, np.int8).astype(dt)


def _same(got, want):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got).astype(np.int16), np.asarray(want).astype(np.int16))


def _jitted_together(mod, jit, names, *args):
    """``{name: mod.<name>(*args)}`` for every name, computed by one program under ``jit`` (jax's or ftrans's):
    one compilation per dtype instead of one per operation."""
    return dict(zip(names, jit(lambda *a: [getattr(mod, n)(*a) for n in names])(*args)))


_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "shift_left", "shift_right_arithmetic",
           "shift_right_logical", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne", "gt", "ge", "lt", "le"]
_UNARY = ["bitwise_not", "neg", "sign", "population_count", "clz"]


def _binary_operands(dt):
    x = _narrow([1, -2, 7, -8, 3, 0, 5, 1], dt)
    y = _narrow([2, 3, -1, -1, 4, 2, 1, 7], dt)
    y_nonzero = np.where(np.asarray(y).astype(np.int8) == 0, np.asarray(1, dt), y).astype(dt)  # for div and rem
    return x, y, y_nonzero


@functools.cache
def _narrow_binary(dt):
    """jax's and ftrans's jitted results of every binary operation on ``dt``."""
    x, y, y_nonzero = _binary_operands(dt)
    out = []
    for mod, jit in ((jlax, jax.jit), (lax, ftrans.jit)):
        res = _jitted_together(mod, jit, [n for n in _BINARY if n not in ("div", "rem")], x, y)
        res.update(_jitted_together(mod, jit, ["div", "rem"], x, y_nonzero))
        out.append(res)
    return out


@pytest.mark.parametrize("dt", _INT4S, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", _BINARY)
def test_narrow_int_binary_ops_match_jax(name, dt):
    x, y, y_nonzero = _binary_operands(dt)
    if name in ("div", "rem"):
        y = y_nonzero
    want, jitted = (res[name] for res in _narrow_binary(dt))
    _same(getattr(lax, name)(x, y), want)
    _same(jitted, want)


@functools.cache
def _narrow_unary(dt):
    """jax's and ftrans's jitted results of every unary operation on ``dt``."""
    x = _narrow([1, -2, 7, -8, 3, 0, 5], dt)
    return [_jitted_together(mod, jit, _UNARY, x) for mod, jit in ((jlax, jax.jit), (lax, ftrans.jit))]


@pytest.mark.parametrize("dt", _INT4S, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", _UNARY)
def test_narrow_int_unary_ops_match_jax(name, dt):
    x = _narrow([1, -2, 7, -8, 3, 0, 5], dt)
    # (population_count of int4: XLA counts a negative value's bits sign-extended to 8, popcount(-2) = 7, and
    # wraps the count, where it gives 2 for int2's -2; ftrans's eager rule counts as XLA does, so eager, jit and
    # jax agree.)
    want, jitted = (res[name] for res in _narrow_unary(dt))
    _same(getattr(lax, name)(x), want)
    _same(jitted, want)


@pytest.mark.parametrize("dt", [ml_dtypes.int4, ml_dtypes.uint4])
def test_narrow_int_refusals(dt):
    for mod in (jlax, lax):
        with pytest.raises(TypeError, match=f"abs does not accept dtype {np.dtype(dt).name}"):
            mod.abs(mod.iota(dt, 3))
    with pytest.raises(ValueError, match="promotion"):
        ftrans.numpy.add(np.ones(2, dt), np.ones(2, np.int8))


_CONV_DSTS = [ml_dtypes.int4, ml_dtypes.uint4, np.float32, np.int8, np.bool_, ml_dtypes.float8_e4m3fn,
              ml_dtypes.float8_e5m2]


def _conversion_operand(src):
    x = np.array([-100, -7.6, -2, 0, 1.5, 3, 7, 100], np.float32)
    return x.astype(src) if np.dtype(src) not in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)) \
        else _narrow([-8, -2, 0, 1, 3, 7, 5, -1], src)


@functools.cache
def _conversions(src):
    """jax's and ftrans's jitted conversions of ``src``'s operand to every destination, one program each."""
    x = _conversion_operand(src)
    return [dict(zip(_CONV_DSTS, jit(lambda v: [mod.convert_element_type(v, d) for d in _CONV_DSTS])(x)))
            for mod, jit in ((jlax, jax.jit), (lax, ftrans.jit))]


@pytest.mark.parametrize("src", [ml_dtypes.int4, ml_dtypes.uint4, np.float32, np.int8])
@pytest.mark.parametrize("dst", _CONV_DSTS)
def test_narrow_conversions_match_jax(src, dst):
    x = _conversion_operand(src)
    want, jitted = (res[dst] for res in _conversions(src))
    for got in (lax.convert_element_type(x, dst), jitted):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32))


@pytest.mark.parametrize("da,db", [(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2),
                                   (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn)])
def test_mixed_fp8_dot_with_preferred_type(da, db):
    a = np.array([[1, 2, 3], [0.5, -1, 2]], np.float32).astype(da)
    b = np.array([[1, -2], [0.25, 4], [3, 1]], np.float32).astype(db)
    want = jlax.dot(a, b, preferred_element_type=np.float32)
    for got in (lax.dot(a, b, preferred_element_type=np.float32),
                ftrans.jit(lambda u, v: lax.dot(u, v, preferred_element_type=np.float32))(a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_fp8_arrays_and_jaxprs():
    x = ftrans.numpy.arange(8, dtype=ftrans.numpy.float8_e4m3fn)
    assert x.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(np.asarray(x).astype(np.float32), np.arange(8))
    assert "f8_e4m3fn[8]" in str(ftrans.make_jaxpr(lambda v: v * 2)(x))
    assert "i4[3]" in str(ftrans.make_jaxpr(lambda v: lax.add(v, v))(_narrow([1, 2, 3], ml_dtypes.int4)))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda v: v * 2)(x)).astype(np.float32), np.arange(8) * 2)


@pytest.mark.parametrize("prec", ["F32_F32_F32", "DEFAULT", jlax.DotAlgorithmPreset.F32_F32_F32])
def test_dot_algorithm_presets_accepted(prec):
    a, b = np.ones((3, 4), np.float16), np.ones((4, 3), np.float16)
    want = jlax.dot(a, b, precision=prec)
    fprec = getattr(lax.DotAlgorithmPreset, prec.name) if not isinstance(prec, str) else prec
    for got in (lax.dot(a, b, precision=fprec), ftrans.jit(lambda u, v: lax.dot(u, v, precision=fprec))(a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("prec,dt", [("F16_F16_F16", np.float32), ("BF16_BF16_F32", np.float16),
                                     pytest.param("BF16_BF16_F32_X3", np.float32, marks=pytest.mark.xla_optimized),
                                     ("TF32_TF32_F32", np.float32),
                                     (jlax.DotAlgorithm(np.float16, np.float16, np.float32), np.float16)])
@host_oracle()  # the CPU's rules (a GPU has other algorithms): on a GPU machine, on its CPU device
def test_dot_algorithm_rounds_and_lowers_as_jax(prec, dt):
    # The operands go to the algorithm's storage types and the product accumulates in its type (eagerly
    # and compiled); the lowering carries the algorithm attribute; presets XLA's CPU backend cannot run
    # (and explicit DotAlgorithms) raise ValueError, as in JAX.
    a = (np.arange(12).reshape(3, 4) * 1.1).astype(dt)
    b = (np.arange(12).reshape(4, 3) / 3).astype(dt)
    fprec = prec if isinstance(prec, str) else lax.DotAlgorithm(np.float16, np.float16, np.float32)
    jf = jax.jit(lambda u, v: jlax.dot(u, v, precision=prec))
    ff = ftrans.jit(lambda u, v: lax.dot(u, v, precision=fprec))
    if not isinstance(prec, str) or prec == "TF32_TF32_F32":
        for f in (jf, ff, lambda u, v: lax.dot(u, v, precision=fprec)):
            with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
                f(a, b)
        return
    want = jf(a, b)
    for got in (lax.dot(a, b, precision=fprec), ff(a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    mine = [ln for ln in ff.lower(a, b).as_text().splitlines() if "dot_general" in ln]
    theirs = [ln for ln in jf.lower(a, b).as_text().splitlines() if "dot_general" in ln]
    assert [ln.split("algorithm = ")[1] for ln in mine] == [ln.split("algorithm = ")[1] for ln in theirs]


_BITCAST_DTYPES = ["int4", "uint4", np.int8, np.uint8, np.int32, np.float16, np.float32]
_BASES = ((), (2, 4))


@pytest.mark.parametrize("src", _BITCAST_DTYPES)
@pytest.mark.parametrize("dst", _BITCAST_DTYPES)
def test_bitcast_convert_type_sub_byte_matches_jax(src, dst):
    k = _BITCAST_DTYPES.index(dst)
    for b, base in enumerate(_BASES):
        want, jitted = (res[k][b] for res in _bitcasts(src))
        _check_bitcast(_bitcast_operand(src, dst, base), dst, want, jitted)


def _bitcast_operand(src, dst, base):
    nin, nout = jax.dtypes.itemsize_bits(np.dtype(src)), jax.dtypes.itemsize_bits(np.dtype(dst))
    shape = base if nin >= nout else (*base, nout // nin)
    rng = np.random.RandomState(0)
    return (rng.randint(-8, 8, size=shape).astype(np.int8).astype(src) if nin == 4
            else rng.randint(0, 100, size=shape).astype(src))


@functools.cache
def _bitcasts(src):
    """jax's and ftrans's jitted bitcasts of ``src`` to every destination dtype on both bases, one program each:
    ``[jax, ftrans][dst index][base index]``."""
    xs = [[_bitcast_operand(src, dst, base) for base in _BASES] for dst in _BITCAST_DTYPES]

    def run(mod):
        return lambda xs: [[mod.bitcast_convert_type(x, dst) for x in row] for row, dst in zip(xs, _BITCAST_DTYPES)]

    return jax.jit(run(jlax))(xs), ftrans.jit(run(lax))(xs)


def _check_bitcast(x, dst, want, jitted):
    for got in (lax.bitcast_convert_type(x, dst), jitted):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.atleast_1d(np.asarray(got)).view(np.uint8),
                                      np.atleast_1d(np.asarray(want)).view(np.uint8))


def test_dce_sink_keeps_values_alive():
    x = np.float32(1.0)

    def f(a, prevent):
        y = a + 1
        assert lax.dce_sink(y, prevent_mlir_dce=prevent) is None
        return a

    jaxpr = ftrans.make_jaxpr(lambda a: f(a, True))(x)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["add", "dce_sink"]
    hlo = ftrans.jit(lambda a: f(a, True)).lower(x).compile().as_text()
    jhlo = jax.jit(lambda a: (jlax.dce_sink(a + 1, prevent_mlir_dce=True), a)[1]).lower(x).compile().as_text()
    for text in (hlo, jhlo):
        assert "custom_call" in text and "dce_sink" in text and "add" in text
    assert "add" not in ftrans.jit(lambda a: f(a, False)).lower(x).compile().as_text()
    assert float(ftrans.grad(lambda a: f(a, True))(x)) == 1.0
    np.testing.assert_array_equal(ftrans.vmap(lambda a: f(a, True))(np.ones(3, np.float32)), np.ones(3))
