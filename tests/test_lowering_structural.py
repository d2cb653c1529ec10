"""Lowered (StableHLO -> XLA) structural and windowed ops agree with eager ftrans and with jax.

Each test draws shapes, dtypes and parameters, runs the public ``ftrans.numpy`` /
``ftrans.lax`` function three ways -- lowered and compiled by XLA, eagerly on
NumPy, and as ``jax.jit`` of the jax equivalent -- and compares values, dtypes
and shapes.  Structural ops move data without arithmetic, so they compare exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax import lax as jlax

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core.array import Array
from ftrans.core.ir import Jaxpr
from ftrans.lowering import lower
from ftrans.lowering.lower import LoweringError
from tests.lowering_util import run_lowered

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(d) for d in (np.bool_, np.int8, np.int32, np.uint8, np.uint32, np.float16,
                                np.float32, np.complex64)] + [BF16]
REAL = [d for d in DTYPES if d.kind != "c"]


def _values(dtype: np.dtype, shape, lo: int = -9, hi: int = 9):
    """Arrays of ``dtype``: small integers (as floats too) so every op is exact."""
    if dtype == np.bool_:
        return hnp.arrays(np.bool_, shape)
    if dtype.kind == "u":
        lo = 0
    ints = hnp.arrays(np.int64, shape, elements=st.integers(lo, hi))
    return ints.map(lambda a: a.astype(dtype))


@st.composite
def arrays(draw, dtypes=DTYPES, min_dims=0, max_dims=3, min_side=0, max_side=4):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side))
    return draw(_values(dtype, shape))


def _np(x) -> np.ndarray:
    return x._value if isinstance(x, Array) else np.asarray(x)


def _same(got: np.ndarray, want, *, tol: float | None = None, what: str = "") -> None:
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    if tol is None:
        if got.dtype.kind == "f" or got.dtype == BF16:  # compare bits, NaNs included
            np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64), err_msg=what)
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol,
                                   err_msg=what)


def check(f, jf, *args, tol: float | None = None, vs_jax: bool = True) -> list[np.ndarray]:
    """Lowered == eager (exactly, or to ``tol``) == jax.jit(jf) on ``args``."""
    lowered, text = run_lowered(lambda *xs: f(*xs), *args)
    eager = f(*[jnp.asarray(a) for a in args])  # Arrays, so methods (astype, [...]) are ftrans's
    eager = list(eager) if isinstance(eager, (list, tuple)) else [eager]
    assert len(lowered) == len(eager)
    for g, e in zip(lowered, eager):
        _same(g, _np(e), tol=tol, what=f"lowered vs eager\n{text}")
    if vs_jax:
        want = jax.jit(jf)(*args)
        want = list(want) if isinstance(want, (list, tuple)) else [want]
        for g, w in zip(lowered, want):
            _same(g, np.asarray(w), tol=tol, what=f"lowered vs jax\n{text}")
    return lowered


# ---------------------------------------------------------------- shapes
@given(arrays(), st.data())
def test_transpose_and_reshape(x, data):
    perm = tuple(data.draw(st.permutations(range(x.ndim))))
    # lax.reshape with ``dimensions`` transposes first (the reshape primitive's own param).
    check(lambda a: (jnp.transpose(a, perm), jnp.reshape(a, (-1,)), jnp.reshape(a, x.shape[::-1]),
                     lax.reshape(a, x.shape[::-1], perm)),
          lambda a: (jjnp.transpose(a, perm), jjnp.reshape(a, (-1,)), jjnp.reshape(a, x.shape[::-1]),
                     jlax.reshape(a, x.shape[::-1], perm)), x)


@given(st.sampled_from(DTYPES), st.lists(st.sampled_from([1, 1, 2, 3]), min_size=0, max_size=4), st.data())
def test_squeeze_expand_dims(dtype, shape, data):
    x = data.draw(_values(dtype, tuple(shape)))
    ones = [i for i, n in enumerate(shape) if n == 1]
    axes = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    axes = tuple(a - len(shape) if data.draw(st.booleans()) else a for a in axes)  # negative axes too
    new = data.draw(st.integers(-x.ndim - 1, x.ndim))
    check(lambda a: (jnp.squeeze(a, axes), jnp.squeeze(a), jnp.expand_dims(a, new)),
          lambda a: (jjnp.squeeze(a, axes), jjnp.squeeze(a), jjnp.expand_dims(a, new)), x)


@given(arrays(), st.data())
def test_flip(x, data):
    axes = tuple(data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), unique_by=lambda a: a % max(x.ndim, 1))
                           if x.ndim else st.just([])))
    check(lambda a: (jnp.flip(a, axes), jnp.flip(a)), lambda a: (jjnp.flip(a, axes), jjnp.flip(a)), x)


@given(arrays(min_dims=1, max_dims=2, max_side=3), st.data())
def test_broadcast_to(x, data):
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    shape = lead + tuple(n if n != 1 or not data.draw(st.booleans()) else 3 for n in x.shape)
    check(lambda a: jnp.broadcast_to(a, shape), lambda a: jjnp.broadcast_to(a, shape), x)


@given(arrays(min_dims=1, max_dims=3), st.data())
def test_lax_pad_negative_and_interior(x, data):
    config = []
    for n in x.shape:
        interior = data.draw(st.integers(0, 2))
        spread = n + max(n - 1, 0) * interior
        lo = data.draw(st.integers(-spread, 3))
        hi = data.draw(st.integers(-(spread + lo) if spread + lo > 0 else 0, 3)) if spread + lo >= 0 else 3
        assume(spread + lo + hi >= 0)
        config.append((lo, hi, interior))
    pv = np.asarray(7, x.dtype) if x.dtype != np.bool_ else np.asarray(True)
    check(lambda a: lax.pad(a, pv, config), lambda a: jlax.pad(a, pv, config), x)


@given(arrays(min_dims=1, max_dims=3), st.data())
def test_jnp_pad_constant(x, data):
    widths = [tuple(data.draw(st.tuples(st.integers(0, 2), st.integers(0, 2)))) for _ in x.shape]
    check(lambda a: jnp.pad(a, widths), lambda a: jjnp.pad(a, widths), x)


@given(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3), st.data())
def test_concatenate(dtype, shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    xs = []
    for k in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        xs.append(data.draw(_values(dtype, tuple(s))))
    check(lambda *a: jnp.concatenate(a, axis=axis), lambda *a: jjnp.concatenate(a, axis=axis), *xs)


# ---------------------------------------------------------------- slicing
@given(arrays(min_dims=1, max_dims=3, max_side=6), st.data())
def test_static_slicing(x, data):
    bound = st.none() | st.integers(-7, 7)
    idx = tuple(slice(data.draw(bound), data.draw(bound), data.draw(st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3])))
                for _ in x.shape)
    pos = tuple(slice(data.draw(st.integers(0, n)), None, data.draw(st.integers(1, 3))) for n in x.shape)
    check(lambda a: (a[idx], a[pos]), lambda a: (a[idx], a[pos]), x)


def test_slice_with_huge_stride():
    # jax itself cannot lower x[::2**63]; ftrans caps the stride at the slice's extent.
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = check(lambda a: (a[:, :: 2**63], a[1:, 2 :: 2**70]), None, x, vs_jax=False)
    np.testing.assert_array_equal(got[0], x[:, :1])
    np.testing.assert_array_equal(got[1], x[1:, 2:3])


@given(arrays(min_dims=1, max_dims=3, min_side=1, max_side=5), st.data())
def test_dynamic_slice_clamps(x, data):
    sizes = tuple(data.draw(st.integers(0, n)) for n in x.shape)
    starts = tuple(np.int32(data.draw(st.integers(-8, 8))) for _ in x.shape)
    check(lambda a, *i: lax.dynamic_slice(a, i, sizes), lambda a, *i: jlax.dynamic_slice(a, i, sizes), x, *starts)


@given(arrays(min_dims=1, max_dims=3, min_side=1, max_side=5), st.data())
def test_dynamic_update_slice_clamps(x, data):
    ushape = tuple(data.draw(st.integers(0, n)) for n in x.shape)
    u = data.draw(_values(x.dtype, ushape, 20, 30))
    starts = tuple(np.int32(data.draw(st.integers(-8, 8))) for _ in x.shape)
    check(lambda a, b, *i: lax.dynamic_update_slice(a, b, i),
          lambda a, b, *i: jlax.dynamic_update_slice(a, b, i), x, u, *starts)


def test_dynamic_slice_mixed_and_wide_index_dtypes():
    # Start indices of different types share one index type in StableHLO; a large
    # unsigned index must still clamp to the end, not wrap to a negative start.
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    prim = ftrans.core.prims.structural.dynamic_slice_p
    for i, j in [(np.uint8(200), np.int32(-3)), (np.uint32(3_000_000_000), np.int8(2)),
                 (np.int16(1), np.uint32(1)), (np.uint8(250), np.uint8(1))]:
        got, _ = run_lowered(lambda a, p, q: prim.bind(a, p, q, slice_sizes=(2, 3)), x, i, j)
        want = prim.impl(x, i, j, slice_sizes=(2, 3))
        _same(got[0], want, what=f"dynamic_slice at {i!r}, {j!r}")
    dus = ftrans.core.prims.structural.dynamic_update_slice_p
    u = np.full((2, 2), -1.0, np.float32)
    got, _ = run_lowered(lambda a, b, p, q: dus.bind(a, b, p, q), x, u, np.uint32(4_000_000_000), np.int8(-1))
    _same(got[0], dus.impl(x, u, np.uint32(4_000_000_000), np.int8(-1)), what="dynamic_update_slice")


# ---------------------------------------------------------------- iota / arange
@given(st.integers(0, 40), st.sampled_from([np.int32, np.uint8, np.float32, np.float16, BF16]))
def test_arange(n, dtype):
    check(lambda: jnp.arange(n, dtype=dtype), lambda: jjnp.arange(n, dtype=dtype))


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), st.data(),
       st.sampled_from([np.int32, np.int8, np.float32, BF16, np.complex64]))
def test_broadcasted_iota(shape, data, dtype):
    dim = data.draw(st.integers(0, len(shape) - 1))
    check(lambda: lax.broadcasted_iota(dtype, shape, dim), lambda: jlax.broadcasted_iota(dtype, shape, dim))


# ---------------------------------------------------------------- dtype changes
# Denormals are left out: XLA's CPU code flushes them to zero (so ``1e-40 != 0`` is False under jit,
# in jax as here), while the NumPy rule keeps them.
_SPECIAL = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1.5, -0.0, 0.5, 255.9, 300.0, 65504.0, 65520.0, 1e5, 2.5,
            0.1, 1 / 3, -2.0**31, 4294967296.0, 16777217.0]


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@given(st.sampled_from(DTYPES), st.sampled_from(DTYPES), hnp.array_shapes(max_dims=2, max_side=4), st.data())
def test_astype(src, dst, shape, data):
    if src.kind in "fc" or src == BF16:  # NaN, infinities, out-of-range and fractional values
        vals = hnp.arrays(np.float64, shape, elements=st.sampled_from(_SPECIAL))
        re, im = data.draw(vals), data.draw(vals)
        with np.errstate(all="ignore"):
            x = (re + 1j * im if src.kind == "c" else re).astype(src)
    else:
        x = data.draw(hnp.arrays(src, shape))  # the whole range: wrapping, saturation in float16
    # jax's astype of complex to real warns (and keeps the real part, as ftrans does).
    jf = (lambda a: jlax.convert_element_type(a, dst)) if src.kind == "c" else (lambda a: a.astype(dst))
    # jax's float->int conversion of values out of range is XLA's; ftrans defines it (saturating).
    check(lambda a: a.astype(dst), jf, x)


@given(st.sampled_from([(np.float32, np.int32), (np.int32, np.float32), (np.float32, np.uint8),
                        (np.uint8, np.float32), (np.float16, np.uint16), (np.int16, BF16),
                        (np.uint32, np.int8), (np.uint16, np.uint8), (BF16, np.float16)]),
       hnp.array_shapes(max_dims=2, max_side=4), st.data())
def test_bitcast_convert_type(pair, shape, data):
    src, dst = np.dtype(pair[0]), np.dtype(pair[1])
    if src.itemsize < dst.itemsize:
        shape = (*shape, dst.itemsize // src.itemsize)
    bits = data.draw(hnp.arrays(np.uint8, (*shape, src.itemsize)))
    x = bits.view(src).reshape(shape)
    lowered = check(lambda a: lax.bitcast_convert_type(a, dst), lambda a: jlax.bitcast_convert_type(a, dst), x,
                    vs_jax=False)
    want = np.asarray(jax.jit(lambda a: jlax.bitcast_convert_type(a, dst))(x))
    assert lowered[0].shape == want.shape and lowered[0].dtype == want.dtype
    assert lowered[0].tobytes() == want.tobytes()  # bit-exact, NaN payloads included


# ---------------------------------------------------------------- select / clamp
@given(arrays(dtypes=REAL + [np.dtype(np.complex64)], max_dims=2), st.data())
def test_where(x, data):
    cond = data.draw(hnp.arrays(np.bool_, data.draw(st.sampled_from([(), x.shape]))))
    y = data.draw(_values(x.dtype, x.shape[1:] if x.ndim else ()))
    check(lambda c, a, b: (jnp.where(c, a, b), jnp.where(c, a, 3)),
          lambda c, a, b: (jjnp.where(c, a, b), jjnp.where(c, a, 3)), cond, x, y)


@given(st.integers(1, 5), hnp.array_shapes(max_dims=2, max_side=4), st.sampled_from(DTYPES), st.data())
def test_select_n_int_selector(n, shape, dtype, data):
    which = data.draw(hnp.arrays(np.int32, data.draw(st.sampled_from([(), shape])), elements=st.integers(0, n - 1)))
    cases = [data.draw(_values(dtype, shape)) for _ in range(n)]
    check(lambda w, *c: lax.select_n(w, *c), lambda w, *c: jlax.select_n(w, *c), which, *cases)
    # Out of range selectors clamp to the first/last case, as the impl's np.choose(mode="clip").
    if n > 1:
        far = np.where(which % 2 == 0, -5, n + 3).astype(np.int32)
        check(lambda w, u, *c: (lax.select_n(w, *c), lax.select_n(u, *c)), None, far, far.astype(np.uint8),
              *cases, vs_jax=False)


@given(arrays(dtypes=[d for d in REAL if d != np.bool_], max_dims=2), st.data())
def test_clip_and_clamp(x, data):
    lo = data.draw(st.integers(-5, 2))
    hi = data.draw(st.integers(lo, 6))
    lo_a, hi_a = np.asarray(lo).astype(x.dtype), np.asarray(hi).astype(x.dtype)
    bounds = data.draw(_values(x.dtype, x.shape, -3, 3))
    check(lambda b, a: (jnp.clip(a, lo_a, hi_a), lax.clamp(lo_a, a, hi_a), lax.clamp(b, a, hi_a)),
          lambda b, a: (jjnp.clip(a, lo_a, hi_a), jlax.clamp(lo_a, a, hi_a), jlax.clamp(b, a, hi_a)), bounds, x)


def test_clamp_float_specials_and_complex():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.5, 3.0], np.float32)
    check(lambda a: lax.clamp(np.float32(0), a, np.float32(1)), lambda a: jlax.clamp(np.float32(0), a,
                                                                                    np.float32(1)), x)
    # Complex clamp follows NumPy's lexicographic order (the impl rule), so eager and jit agree.
    z = np.array([2 + 1j, -1 + 0j, 0.5 + 3j, 0.5 - 3j, 1 + 0.5j, 0 - 1j], np.complex64)
    got = check(lambda a: lax.clamp(np.complex64(0), a, np.complex64(1)), None, z, vs_jax=False)
    np.testing.assert_array_equal(got[0], np.minimum(np.maximum(z, 0), 1))


# ---------------------------------------------------------------- windowed reductions / pooling
_INIT = {"add": lambda d: np.zeros((), d),
         "max": lambda d: np.asarray(-np.inf if d.kind == "f" or d == BF16 else np.iinfo(d).min, d),
         "min": lambda d: np.asarray(np.inf if d.kind == "f" or d == BF16 else np.iinfo(d).max, d)}


@st.composite
def window_params(draw, ndim: int):
    dims = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(ndim))
    base = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    wdil = tuple(draw(st.integers(1, 2)) for _ in range(ndim))
    return dims, strides, pads, base, wdil


@given(st.sampled_from(["add", "max", "min"]), arrays(dtypes=[np.dtype(np.float32), np.dtype(np.int32),
                                                              np.dtype(np.uint8)], min_dims=1, max_dims=3,
                                                       min_side=1, max_side=5), st.data())
def test_reduce_window(op, x, data):
    dims, strides, pads, base, wdil = data.draw(window_params(x.ndim))
    init = _INIT[op](x.dtype)
    comp = {"add": lax.add, "max": lax.max, "min": lax.min}[op]
    jcomp = {"add": jlax.add, "max": jlax.max, "min": jlax.min}[op]
    check(lambda a: lax.reduce_window(a, init, comp, dims, strides, pads, base, wdil),
          lambda a: jlax.reduce_window(a, init, jcomp, dims, strides, pads, base, wdil), x)


@given(st.sampled_from(["sum", "max", "min"]), st.sampled_from(["VALID", "SAME"]),
       arrays(dtypes=[np.dtype(np.float32), np.dtype(np.float16), BF16], min_dims=2, max_dims=2, min_side=1,
              max_side=6), st.data())
def test_pooling(kind, padding, x, data):
    dims = tuple(data.draw(st.integers(1, 3)) for _ in range(x.ndim))
    strides = tuple(data.draw(st.integers(1, 2)) for _ in range(x.ndim))
    fn = {"sum": lax.reduce_window_sum, "max": lax.reduce_window_max, "min": lax.reduce_window_min}[kind]
    jcomp = {"sum": jlax.add, "max": jlax.max, "min": jlax.min}[kind]
    init = _INIT["add" if kind == "sum" else kind](x.dtype)
    # Half-precision sums accumulate in float32 here and may round differently from jax's;
    # XLA's float32 division may differ from NumPy's in the last bit.
    tol = 1e-6 if x.dtype == np.float32 else 2e-2
    zero = np.zeros((), x.dtype)
    # The second output is average pooling as a network would write it.
    check(lambda a: (fn(a, dims, strides, padding), lax.reduce_window_sum(a, dims, strides, padding) / np.prod(dims)),
          lambda a: (jlax.reduce_window(a, init, jcomp, dims, strides, padding),
                     jlax.reduce_window(a, zero, jlax.add, dims, strides, padding) / np.prod(dims)), x, tol=tol)


def test_reduce_window_bool_and_rank0():
    x = np.array([[True, False, False], [False, False, True]])
    for fn, jop, init in [(lax.reduce_window_max, jlax.max, False), (lax.reduce_window_min, jlax.min, True)]:
        check(lambda a, fn=fn: fn(a, (2, 2), (1, 1), ((0, 1), (1, 0))),
              lambda a, jop=jop, init=init: jlax.reduce_window(a, init, jop, (2, 2), (1, 1), ((0, 1), (1, 0))), x)
    # An empty operand padded into windows that cover only padding: every window is the identity.
    empty = np.zeros((0, 2), np.float32)
    check(lambda a: (lax.reduce_window_max(a, (1, 1), (1, 1), ((1, 1), (0, 0))),
                     lax.reduce_window_sum(a, (2, 1), (1, 1), ((2, 1), (0, 0)))),
          lambda a: (jlax.reduce_window(a, -np.inf, jlax.max, (1, 1), (1, 1), ((1, 1), (0, 0))),
                     jlax.reduce_window(a, 0.0, jlax.add, (2, 1), (1, 1), ((2, 1), (0, 0)))), empty)
    # A rank-0 operand is one window of one element (compared with jax only: the eager rule
    # cannot take rank 0).
    got, _ = run_lowered(lambda a: lax.reduce_window_sum(a, (), (), ()), np.float32(2.5))
    want = jax.jit(lambda a: jlax.reduce_window(a, np.float32(0), jlax.add, (), (), ()))(np.float32(2.5))
    _same(got[0], np.asarray(want), what="rank-0 reduce_window")


def test_staged_programs_typecheck_and_lower():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)

    def f(a):
        b = jnp.pad(jnp.flip(a, 0), ((1, 0), (0, 2)))[::2, 1:]
        c = lax.dynamic_slice(b, (np.int32(1), np.int32(9)), (1, 2))
        return jnp.where(c > 3, c.astype(np.int8), 0), lax.reduce_window_max(a, (2, 2), (1, 1), "SAME")

    closed = ftrans.make_jaxpr(f)(x)
    ftrans.core.ir.typecheck(closed)
    text = run_lowered(f, x)[1]
    for op in ("stablehlo.reverse", "stablehlo.pad", "stablehlo.slice", "stablehlo.dynamic_slice",
               "stablehlo.select", "stablehlo.convert", "stablehlo.reduce_window"):
        assert op in text, op
    check(f, lambda a: (jjnp.where((c := jlax.dynamic_slice(jjnp.pad(jjnp.flip(a, 0), ((1, 0), (0, 2)))[::2, 1:],
                                                               (1, 9), (1, 2))) > 3, c.astype(np.int8), 0),
                        jlax.reduce_window(a, -np.inf, jlax.max, (2, 2), (1, 1), "SAME")), x)


def test_lowering_error_names_the_equation():
    # A rule failure is reported as a LoweringError naming the primitive (a bad param injected by hand).
    closed = ftrans.make_jaxpr(lambda a: jnp.transpose(a))(np.zeros((2, 3), np.float32))
    j = closed.jaxpr
    assert j.eqns[0].primitive is ftrans.core.prims.structural.transpose_p
    bad = Jaxpr(j.constvars, j.invars, [j.eqns[0].replace(params={"permutation": None})], j.outvars)
    with pytest.raises(LoweringError, match="transpose"):
        lower.lower_jaxpr(bad)
