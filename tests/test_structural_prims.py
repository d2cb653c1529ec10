"""Each structural primitive's NumPy rule against jax.lax's equivalent, bound directly.

Besides values, every test checks that the impl returns exactly the dtype and
shape its abstract-eval rule promises (``run`` below), and that the rule
rejects ill-typed operands with ftrans's own errors.
"""

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
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import abstract_eval
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.errors import FtransTypeError, FtransValueError

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(prim, *ops, **params):
    """Abstract-eval and impl of ``prim``; they must agree exactly."""
    ops = [np.asarray(o) for o in ops]
    out_aval = abstract_eval(prim, [ShapedArray(o.shape, o.dtype) for o in ops], params)
    out = prim.impl(*ops, **params)
    assert isinstance(out, np.ndarray), type(out)
    assert out.dtype == out_aval.dtype and out.shape == out_aval.shape, (out.dtype, out.shape, out_aval)
    return out


def same(got, want):
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f" or want.dtype == BF16:
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    else:
        np.testing.assert_array_equal(got, want)


def arr(shape, dtype=np.float32):
    return (np.arange(int(np.prod(shape))).reshape(shape) - 3).astype(dtype)


# ---------------------------------------------------------------- dtype changes
DTYPES = [np.dtype(d) for d in (np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint32, np.float16,
                                np.float32, np.complex64)] + [BF16]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7, 2.5, -2.5, 300.0, -1.0, 0.0, -0.0,
                    65504.0, 255.5, 2.0**31, -(2.0**31) - 256])


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # jax's, for complex -> real
@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
def test_convert_element_type_matches_xla(src):
    """Saturating float->int, NaN->0, wraparound int->int, rounding to half types."""
    with np.errstate(over="ignore"):
        x = SPECIAL.astype(src) if src.kind in "fcV" or src == BF16 else \
            np.array([0, 1, -1, 127, -128, 200, 65535, 2**31 - 1]).astype(np.int64).astype(src)
    if src.kind == "c":
        x = x + 1j
    for dst in DTYPES:
        got = run(S.convert_element_type_p, x, new_dtype=dst, weak_type=False)
        # XLA's conversion is jax's under jit (jax 0.11 converts a NumPy operand eagerly with NumPy's astype)
        same(got, jax.jit(lambda a, d=dst: jlax.convert_element_type(a, d))(x))


@pytest.mark.parametrize("pair", [(np.float32, np.int32), (np.float32, np.uint8), (np.int32, np.float32),
                                  (np.float16, np.int16), (np.uint8, np.int8), (BF16, np.uint16)],
                         ids=lambda p: f"{np.dtype(p[0]).name}-{np.dtype(p[1]).name}")
def test_bitcast_convert_type(pair):
    src, dst = (np.dtype(d) for d in pair)
    x = arr((2, 4), src)
    got = run(S.bitcast_convert_type_p, x, new_dtype=dst)
    same(got, jlax.bitcast_convert_type(x, dst))
    if src.itemsize > dst.itemsize:  # and back again
        same(run(S.bitcast_convert_type_p, got, new_dtype=src), x)


def test_bitcast_rejects_bad_widths_and_bool():
    with pytest.raises(FtransTypeError, match="last dimension"):
        run(S.bitcast_convert_type_p, arr((3, 3), np.uint8), new_dtype=np.dtype(np.float32))
    with pytest.raises(FtransTypeError, match="bool"):
        run(S.bitcast_convert_type_p, arr((3,), np.int8), new_dtype=np.dtype(np.bool_))


# ---------------------------------------------------------------- select / clamp
def test_select_n_bool_and_int_selector():
    a, b, c = arr((2, 3)), arr((2, 3)) * 2, arr((2, 3)) * 3
    pred = np.array([[True, False, True], [False, False, True]])
    same(run(S.select_n_p, pred, a, b), jlax.select_n(pred, a, b))
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    same(run(S.select_n_p, which, a, b, c), jlax.select_n(which, a, b, c))
    same(run(S.select_n_p, np.array(True), a, b), jlax.select_n(True, a, b))
    with pytest.raises(FtransTypeError, match="one shape and dtype"):
        run(S.select_n_p, pred, a, b.astype(np.int32))
    with pytest.raises(FtransTypeError, match="selector"):
        run(S.select_n_p, pred[:1], a, b)


def test_clamp_scalar_and_array_bounds_with_nan():
    x = np.array([-2.0, 0.5, np.nan, 7.0, 1.0], np.float32)
    lo, hi = np.float32(0), np.float32(1)
    same(run(S.clamp_p, lo, x, hi), jlax.clamp(lo, x, hi))
    lo_a = np.array([0, 1, 0, 8, 2], np.float32)
    same(run(S.clamp_p, lo_a, x, hi), jlax.clamp(lo_a, x, hi))
    xi = np.array([-5, 0, 9], np.int8)
    same(run(S.clamp_p, np.int8(-1), xi, np.int8(3)), jlax.clamp(np.int8(-1), xi, np.int8(3)))
    with pytest.raises(FtransTypeError, match="share one dtype"):
        run(S.clamp_p, np.int32(0), x, hi)


# ---------------------------------------------------------------- shapes
def test_broadcast_in_dim():
    x = arr((3, 1))
    same(run(S.broadcast_in_dim_p, x, shape=(2, 3, 4), broadcast_dimensions=(1, 2)),
         jlax.broadcast_in_dim(x, (2, 3, 4), (1, 2)))
    same(run(S.broadcast_in_dim_p, np.float32(2), shape=(2,), broadcast_dimensions=()),
         jlax.broadcast_in_dim(np.float32(2), (2,), ()))
    with pytest.raises(FtransTypeError, match="cannot broadcast"):
        run(S.broadcast_in_dim_p, x, shape=(2, 4, 4), broadcast_dimensions=(1, 2))
    with pytest.raises(FtransValueError, match="strictly increasing"):
        run(S.broadcast_in_dim_p, x, shape=(3, 3), broadcast_dimensions=(1, 0))


shapes_st = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


@given(shape=shapes_st, data=st.data())
def test_reshape_and_transpose(shape, data):
    x = arr(shape)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    same(run(S.transpose_p, x, permutation=perm), jlax.transpose(x, perm))
    new = (int(np.prod(shape)),)
    same(run(S.reshape_p, x, new_sizes=new, dimensions=None), jlax.reshape(x, new))
    same(run(S.reshape_p, x, new_sizes=new, dimensions=perm), jlax.reshape(x, new, perm))


def test_reshape_transpose_errors():
    with pytest.raises(FtransTypeError, match="cannot reshape 6"):
        run(S.reshape_p, arr((2, 3)), new_sizes=(4,), dimensions=None)
    with pytest.raises(FtransValueError, match="permutation"):
        run(S.transpose_p, arr((2, 3)), permutation=(0, 0))


def test_squeeze_expand_dims_rev():
    x = arr((1, 3, 1, 2))
    same(run(S.squeeze_p, x, dimensions=(0, 2)), jlax.squeeze(x, (0, 2)))
    same(run(S.expand_dims_p, x, dimensions=(0, 5)), jlax.expand_dims(x, (0, 5)))
    same(run(S.rev_p, x, dimensions=(1, 3)), jlax.rev(x, (1, 3)))
    same(run(S.rev_p, x, dimensions=()), x)
    with pytest.raises(FtransValueError, match="cannot squeeze axis 1"):
        run(S.squeeze_p, x, dimensions=(1,))


pad_st = st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(0, 2))


@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple), data=st.data())
def test_pad_negative_and_interior(shape, data):
    x = arr(shape)
    config = tuple(data.draw(pad_st) for _ in shape)
    try:
        want = jlax.pad(x, np.float32(-9), config)
    except (TypeError, ValueError):
        with pytest.raises((FtransTypeError, FtransValueError)):
            run(S.pad_p, x, np.float32(-9), padding_config=config)
        return
    same(run(S.pad_p, x, np.float32(-9), padding_config=config), want)


def test_pad_errors():
    with pytest.raises(FtransTypeError, match="padding value"):
        run(S.pad_p, arr((3,)), np.int32(0), padding_config=((0, 0, 0),))
    with pytest.raises(FtransValueError, match="interior"):
        run(S.pad_p, arr((3,)), np.float32(0), padding_config=((0, 0, -1),))


def test_concatenate():
    a, b = arr((2, 3)), arr((2, 1))
    same(run(S.concatenate_p, a, b, a, dimension=1), jlax.concatenate([a, b, a], 1))
    with pytest.raises(FtransTypeError, match="share dtype"):
        run(S.concatenate_p, a, b.astype(np.int32), dimension=1)
    with pytest.raises(FtransTypeError, match="rank-0"):
        run(S.concatenate_p, np.float32(1), np.float32(2), dimension=0)


@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple), data=st.data())
def test_slice_with_strides(shape, data):
    x = arr(shape)
    starts, limits, strides = [], [], []
    for n in shape:
        s = data.draw(st.integers(0, n))
        starts.append(s)
        limits.append(data.draw(st.integers(s, n)))
        strides.append(data.draw(st.integers(1, 3)))
    same(run(S.slice_p, x, start_indices=tuple(starts), limit_indices=tuple(limits), strides=tuple(strides)),
         jlax.slice(x, starts, limits, strides))


def test_slice_rejects_bad_bounds():
    with pytest.raises(FtransValueError, match="not a valid slice"):
        run(S.slice_p, arr((4,)), start_indices=(3,), limit_indices=(2,), strides=None)


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), data=st.data())
def test_dynamic_slice_and_update_clamp_indices(shape, data):
    """Start indices clamp so the slice stays in bounds (XLA), including negative ones."""
    x = arr(shape)
    sizes = tuple(data.draw(st.integers(0, n)) for n in shape)
    starts = [np.int32(data.draw(st.integers(-7, 7))) for _ in shape]
    # Under jit the indices are traced, so jax applies XLA's clamping (not a Python-side check).
    ds = jax.jit(lambda a, *i: jlax.dynamic_slice(a, i, sizes, allow_negative_indices=False))
    same(run(S.dynamic_slice_p, x, *starts, slice_sizes=sizes), ds(x, *starts))
    update = np.full(sizes, 42.0, np.float32)
    dus = jax.jit(lambda a, u, *i: jlax.dynamic_update_slice(a, u, i, allow_negative_indices=False))
    same(run(S.dynamic_update_slice_p, x, update, *starts), dus(x, update, *starts))
    assert np.asarray(x).min() == -3  # the operand was not mutated


def test_dynamic_slice_errors():
    with pytest.raises(FtransTypeError, match="integer scalars"):
        run(S.dynamic_slice_p, arr((3,)), np.float32(1), slice_sizes=(1,))
    with pytest.raises(FtransValueError, match="do not fit"):
        run(S.dynamic_slice_p, arr((3,)), np.int32(0), slice_sizes=(4,))
    with pytest.raises(FtransTypeError, match="larger than the operand"):
        run(S.dynamic_update_slice_p, arr((3,)), arr((4,)), np.int32(0))


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint8, np.float16, BF16], ids=lambda d: np.dtype(d).name)
def test_iota(dtype):
    d = np.dtype(dtype)
    got = run(S.iota_p, dtype=d, shape=(3, 4), dimension=1)
    same(got, jlax.broadcasted_iota(d, (3, 4), 1))
    with pytest.raises(FtransValueError, match="out of range"):
        run(S.iota_p, dtype=d, shape=(3,), dimension=1)


def test_structural_weak_types_follow_jax():
    """Weak-type rules as in JAX: pad/clamp/dynamic_update_slice need every operand weak."""
    w = ftrans.Array._make(np.ones(3, np.float32), weak_type=True)
    s = ftrans.Array._make(np.ones(3, np.float32), weak_type=False)
    wz = ftrans.Array._make(np.float32(0), weak_type=True)
    assert S.pad_p.bind(w, wz, padding_config=((1, 1, 0),)).weak_type
    assert not S.pad_p.bind(w, ftrans.Array._make(np.float32(0)), padding_config=((1, 1, 0),)).weak_type
    assert S.clamp_p.bind(wz, w, wz).weak_type and not S.clamp_p.bind(wz, s, wz).weak_type
    assert not S.dynamic_update_slice_p.bind(w, w, ftrans.Array._make(np.int32(0))).weak_type
    assert S.dynamic_slice_p.bind(w, ftrans.Array._make(np.int32(0)), slice_sizes=(2,)).weak_type
    assert S.select_n_p.bind(ftrans.Array._make(np.array(True)), w, w).weak_type
    assert not S.bitcast_convert_type_p.bind(w, new_dtype=np.dtype(np.int32)).weak_type
    assert E.lt_p.bind(w, w).weak_type  # comparisons keep weakness, as in JAX


def test_impls_do_not_mutate_inputs():
    x = arr((3, 3))
    x.flags.writeable = False  # any in-place write raises
    run(S.dynamic_update_slice_p, x, np.zeros((1, 1), np.float32), np.int32(1), np.int32(1))
    run(S.pad_p, x, np.float32(0), padding_config=((1, 1, 1), (0, 0, 0)))
    run(S.rev_p, x, dimensions=(0,))
    run(S.convert_element_type_p, x, new_dtype=np.dtype(np.int32), weak_type=False)
