"""Differential tests of the less central jax.numpy functions (ftrans/numpy/_extras.py,
_index_tricks.py, _io.py) against jax.numpy: values, shapes, dtypes and weak types,
eagerly, staged through make_jaxpr (typechecked), and a few under ftrans.jit."""

import io

import jax
import jax.numpy as jn
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ftrans
import ftrans.numpy as fn
from ftrans.core.ir import typecheck
from ftrans.errors import ConcretizationTypeError, FtransTypeError, FtransValueError
from tests.thorough import THOROUGH


def _info(x):
    if isinstance(x, fn.ndarray):
        return tuple(x.shape), np.dtype(x.dtype), x.weak_type, np.asarray(x)
    return tuple(x.shape), np.dtype(x.dtype), x.aval.weak_type, np.asarray(x)


def _staged(f, *args):
    closed = ftrans.make_jaxpr(f)(*args)
    typecheck(closed)
    return ftrans.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _with_arrays(f, args, dyn, kw):
    """``f(*args, **kw)`` as a function of the arguments at positions ``dyn``."""
    def part(*d):
        full = list(args)
        for i, v in zip(dyn, d):
            full[i] = v
        return f(*full, **kw)

    return part


def _static_key(v):
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_static_key(x) for x in v))
    return (type(v).__name__, repr(v))


_JAX_PROGRAMS: dict = {}
# jax's programs are compiled without LLVM's optimizing passes (level 0; the suite's default is 1): less compile
# time, the same values up to float rounding (which the tolerances are for).  ftrans's compile as they always do.
_ORACLE_OPTIONS = {"xla_backend_optimization_level": 0}


def _jax_oracle(name, args, dyn, kw):
    """jax.numpy.<name> under ``jax.jit`` (one XLA program, not one per eager op), the array arguments
    traced; eagerly where jax cannot trace it (value-dependent shapes, concrete-only arguments).

    The jitted function is kept per static arguments, so hypothesis examples of one shape share a program."""
    key = (name, tuple(dyn), tuple(_static_key(a) for i, a in enumerate(args) if i not in dyn),
           tuple((k, _static_key(v)) for k, v in sorted(kw.items())))
    if key not in _JAX_PROGRAMS:
        _JAX_PROGRAMS[key] = jax.jit(_with_arrays(getattr(jn, name), args, dyn, kw), compiler_options=_ORACLE_OPTIONS)
    try:
        return _JAX_PROGRAMS[key](*[args[i] for i in dyn])
    except Exception:  # noqa: BLE001 - eager jax then raises or answers as before
        return getattr(jn, name)(*args, **kw)


def check(name, *args, staged=True, tol=1e-5, **kw):
    """ftrans.numpy.<name> agrees with jax.numpy.<name>; array arguments are traced when staged."""
    dyn = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    want = [_info(x) for x in jax.tree_util.tree_leaves(_jax_oracle(name, args, dyn, kw))]
    runs = {"eager": lambda: getattr(fn, name)(*args, **kw)}
    if staged:
        runs["staged"] = lambda: _staged(_with_arrays(getattr(fn, name), args, dyn, kw), *[args[i] for i in dyn])
    for mode, run in runs.items():
        got = [_info(x) for x in jax.tree_util.tree_leaves(run())]
        assert len(got) == len(want), (name, mode)
        for (s1, d1, w1, v1), (s2, d2, w2, v2) in zip(got, want):
            assert (s1, d1, w1) == (s2, d2, w2), (name, mode, (s1, d1, w1), (s2, d2, w2))
            np.testing.assert_allclose(v1.astype(np.complex128), v2.astype(np.complex128), rtol=tol, atol=tol,
                                       equal_nan=True, err_msg=f"{name} {mode}")


F = np.array([1.0, 2.0, np.nan, np.inf, -np.inf, 0.0, 1e-30, -3.5], np.float32)
G = np.array([1.0, 2.1, np.nan, np.inf, np.inf, 1e-9, 0.0, -3.5], np.float32)
I = np.array([12, -18, 0, 7, 0, 100, 35, -9], np.int32)  # noqa: E741
J = np.array([8, 27, 5, 0, 0, 75, 21, 6], np.int32)
M3 = (np.arange(24.0).reshape(2, 3, 4) ** 2).astype(np.float32)
R = np.random.RandomState(0).randn(3, 7).astype(np.float32)
RI = np.random.RandomState(1).randint(0, 4, (3, 7)).astype(np.int32)

# subnormals excluded: eager NumPy keeps them where XLA flushes them (docs/differences.md)
floats = hnp.arrays(np.float32, st.integers(1, 9), elements=st.floats(-1e3, 1e3, width=32, allow_subnormal=False))


# ---------------------------------------------------------------- priority 1: math
@pytest.mark.parametrize("a,b", [(F, G), (I, J), (F, 2.0), (3, 3.0)])
def test_isclose_allclose(a, b):
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.1, "atol": 0.5}):
        check("isclose", a, b, **kw)
        check("allclose", a, b, **kw)


def test_array_equal_equiv():
    check("array_equal", F, G)
    check("array_equal", F, F, equal_nan=True)
    check("array_equal", F, F[:3])
    check("array_equiv", I[None], I)
    assert not bool(fn.array_equiv(F, F[:3]))  # JAX documents False here (its lax error escapes instead)


@given(floats, st.integers(1, 2))
def test_diff_hypothesis(x, n):
    check("diff", x, n=n)
    check("diff", x, n=n, prepend=1.5, append=x[:2])


def test_diff_ediff1d():
    check("diff", M3)
    check("diff", M3, n=2, axis=1)
    check("diff", M3, prepend=1.0, append=M3[:, :, :2])
    check("diff", I > 0)
    np.testing.assert_array_equal(np.asarray(fn.diff(F, n=0)), F)
    check("diff", I, n=3, axis=0)
    check("ediff1d", M3)
    check("ediff1d", I, to_begin=5, to_end=np.array([1.5, 2.5], np.float32))
    with pytest.raises(FtransValueError, match="order must be non-negative"):
        fn.diff(F, n=-1)
    with pytest.raises(FtransValueError, match="at least one dimensional"):
        fn.diff(np.float32(1))


def test_cross():
    a = np.arange(12.0).reshape(4, 3).astype(np.float32)
    b = np.cos(a)
    check("cross", a, b)
    if jax.__version_info__ < (0, 12):  # jax 0.12 refuses 2-vectors (ftrans takes them, as NumPy 1 and 0.10)
        check("cross", a[:, :2], b[:, :2])
        check("cross", a[:, :2], b)
    check("cross", a[:3], b[:3], axis=0)
    with pytest.raises(FtransValueError, match="2 or 3"):
        fn.cross(np.ones((2, 4)), np.ones((2, 4)))


@given(hnp.arrays(np.int32, 6, elements=st.integers(-1000, 1000)),
       hnp.arrays(np.int32, 6, elements=st.integers(-1000, 1000)))
def test_gcd_lcm_hypothesis(a, b):
    check("gcd", a, b)
    check("lcm", a, b)


def test_gcd_lcm_dtypes():
    check("gcd", I.astype(np.uint8), 6)
    check("lcm", I, 4)
    with pytest.raises(FtransValueError, match="must be integers"):
        fn.gcd(F, F)


def test_frexp_ldexp():
    for x in (F, I, 3.0, F.astype(np.float16), np.asarray(F[:6], jn.bfloat16)):
        check("frexp", x)
    check("ldexp", F, I % 5)
    check("ldexp", F, 3)
    check("ldexp", 2.0, I % 4)
    check("ldexp", np.float32(3), np.int32(200))
    with pytest.raises(FtransTypeError, match="complex"):
        fn.frexp(np.ones(2, np.complex64))
    with pytest.raises(FtransValueError, match="ldexp"):
        fn.ldexp(F, F)


@given(floats)
def test_frexp_roundtrip_hypothesis(x):
    check("frexp", x)
    m, e = fn.frexp(x)
    np.testing.assert_array_equal(np.asarray(fn.ldexp(m, e)), x)


def test_unary_float_functions():
    for x in (F, 2.5, I):
        check("modf", x)
        check("fabs", x)
        check("sinc", x[np.isfinite(x)] if isinstance(x, np.ndarray) else x)
        check("spacing", x)
    check("spacing", F.astype(np.float16))
    check("sinc", F[:6][np.isfinite(F[:6])].astype(np.complex64))
    # sinc(+-inf) is NaN as in jax 0.10 (sin(inf)/inf); jax 0.11 gives the limit 0 (docs/differences.md)
    assert np.isnan(np.asarray(fn.sinc(np.float32([np.inf, -np.inf])))).all()
    check("float_power", F, 2)
    check("float_power", I, J % 3)
    check("float_power", 2, 3)
    check("i0", np.linspace(-20, 20, 41).astype(np.float32), tol=1e-4)
    check("i0", 3.0)
    check("i0", I % 9, tol=1e-4)
    with pytest.raises(FtransTypeError, match="fabs"):
        fn.fabs(np.ones(2, np.complex64))
    with pytest.raises(FtransValueError, match="complex"):
        fn.spacing(np.ones(2, np.complex64))


def test_predicates():
    check("iscomplex", F.astype(np.complex64) + 1j * (I > 0))
    check("isreal", F)
    check("iscomplex", 3)
    for v in (fn.asarray(1.0), np.float32(2), fn.arange(3), [1], 3, "a", np.ones(()), None):
        jv = jn.asarray(np.asarray(v)) if isinstance(v, fn.ndarray) else v
        assert fn.isscalar(v) == jn.isscalar(jv), v
    for v in (fn.asarray(1j), 3, 1j, np.ones(2), np.complex64(1), fn.ones(2, fn.complex64)):
        assert fn.iscomplexobj(v) == jn.iscomplexobj(np.asarray(v)), v
        assert fn.isrealobj(v) == (not fn.iscomplexobj(v))
    for d in (fn.float32, np.int8, fn.bool_, np.uint16, fn.complex64, fn.bfloat16):
        for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating",
                     "complex floating", "numeric", ("bool", "integral"), np.float32):
            assert fn.isdtype(d, kind) == jn.isdtype(np.dtype(d), kind), (d, kind)
    with pytest.raises(FtransValueError, match="unrecognized kind"):
        fn.isdtype(fn.float32, "floaty")
    assert fn.iterable(fn.arange(3)) and not fn.iterable(3)


def test_rollaxis_unravel_ravel():
    check("rollaxis", M3, 2)
    check("rollaxis", M3, -1, 1)
    check("rollaxis", M3, 0, 3)
    check("unravel_index", I, (3, 4))
    check("unravel_index", 7, (3, 4))
    check("unravel_index", np.array([1, 2, 50], np.uint32), 10)
    check("ravel_multi_index", (np.array([1, 2], np.int32), np.array([3, 0], np.int32)), (3, 4), staged=False)
    check("ravel_multi_index", (I, J), (3, 4), mode="clip")
    check("ravel_multi_index", (I, J), (3, 4), mode="wrap", order="F")
    with pytest.raises(FtransValueError, match="invalid entry"):
        fn.ravel_multi_index((I, J), (3, 4))
    # The message starts as JAX's and NumPy's, so code that matches on it works alike.
    for m in (np, jn, fn):
        with pytest.raises(ValueError) as info:
            m.ravel_multi_index((np.array([1, 5]),), (3,))
        assert str(info.value).startswith("invalid entry in coordinates array")
    with pytest.raises(ConcretizationTypeError, match="mode='raise'"):
        ftrans.make_jaxpr(lambda a: fn.ravel_multi_index((a, a), (3, 4)))(I)
    with pytest.raises(ConcretizationTypeError, match="ravel_multi_index was jit-compiled with mode='raise'"):
        ftrans.jit(lambda a: fn.ravel_multi_index((a,), (3,), mode="raise"))(np.array([1], np.int32))


def test_vander_trapezoid():
    check("vander", F[:4])
    check("vander", I[:4], 3, increasing=True)
    check("trapezoid", M3)
    check("trapezoid", M3, dx=0.5, axis=1)
    check("trapezoid", M3, x=np.arange(4.0, dtype=np.float32))
    check("trapezoid", M3, x=M3)
    check("trapezoid", I)


def test_fill_diagonal_put_along_axis():
    check("fill_diagonal", M3[0], 7.0, inplace=False)
    check("fill_diagonal", np.zeros((3, 3, 3), np.float32), np.array([1.0, 2.0], np.float32), inplace=False)
    check("put_along_axis", M3, np.argsort(M3, 2)[:, :, :1].astype(np.int32), 0.0, 2, inplace=False)
    check("put_along_axis", I, np.array([1, -2], np.int32), np.array([5, 6], np.int32), None, inplace=False)
    with pytest.raises(NotImplementedError, match="inplace"):
        fn.fill_diagonal(M3[0], 1.0)
    with pytest.raises(FtransValueError, match="in-place"):
        fn.put_along_axis(M3, M3, 1.0, 0)


def test_polynomials():
    p = np.array([1.0, -2.0, 3.0], np.float32)
    # (at +-inf jax 0.12's Horner from the leading coefficient gives inf; ftrans, NumPy and jax 0.10/0.11: NaN)
    check("polyval", p, F if jax.__version_info__ < (0, 12) else F[np.isfinite(F) | np.isnan(F)])
    check("polyval", I[:3], 2)
    check("polyval", I[:3], 2.5)
    check("polyadd", p, I[:5])
    check("polysub", I[:2], p)
    check("polymul", p, I[:4])
    check("polymul", I[:2], I[:3])
    check("polymul", np.array([0.0, 0.0, 1.0, 2.0], np.float32), p, trim_leading_zeros=True, staged=False)
    # bfloat16 products accumulate in a wider type (one convolution), as JAX's do: no bf16 rounding per term
    r = np.random.default_rng(0)
    b1, b2 = ((r.standard_normal(12) * 3).astype(jn.bfloat16) for _ in range(2))
    check("polymul", b1, b2, tol=1e-6)
    check("polyder", p)
    check("polyder", I, 3)
    check("polyint", p)
    check("polyint", I[:4], 2, k=np.array([1.0, 2.0], np.float32))
    check("polyint", p, 3, k=2.0)


@given(floats, floats)
def test_polyval_polymul_hypothesis(p, x):
    check("polyval", p[:4], x, tol=1e-2)
    check("polymul", p[:4], x[:3], tol=1e-2)


# ---------------------------------------------------------------- priority 1: index tricks
def test_triangle_and_diag_indices():
    for args in [(4, 1), (3, -1, 5)]:
        check("tril_indices", *args)
        check("triu_indices", *args)
    m = np.arange(12.0).reshape(3, 4).astype(np.float32)
    check("tril_indices_from", m, 1)
    check("triu_indices_from", m, -1)
    check("diag_indices", 4)
    check("diag_indices", 3, 3)
    check("diag_indices_from", np.zeros((3, 3, 3), np.float32))
    got = fn.mask_indices(4, fn.triu, 1)
    want = jn.mask_indices(4, jn.triu, 1)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    with pytest.raises(FtransValueError, match="2-dimensional"):
        fn.tril_indices_from(np.ones(3))
    with pytest.raises(FtransValueError, match="equal length"):
        fn.diag_indices_from(np.ones((2, 3)))


def test_indices_ix():
    check("indices", (2, 3))
    check("indices", (2, 3), sparse=True)
    check("indices", (2, 3, 4), dtype=jn.float32)
    check("indices", ())
    check("ix_", np.array([0, 2], np.int32), np.array([1, 2, 3.0], np.float32))
    check("ix_", np.array([], np.int32), np.array([1], np.int32))
    with pytest.raises(FtransValueError, match="1-dimensional"):
        fn.ix_(np.ones((2, 2)))


def _check_index_obj(name, key):
    got = jax.tree_util.tree_leaves(getattr(fn, name)[key])
    want = jax.tree_util.tree_leaves(getattr(jn, name)[key])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.shape, g.dtype, g.weak_type) == (w.shape, w.dtype, w.aval.weak_type), (name, key)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


A3 = np.array([1, 2, 3], np.int32)
M34 = np.arange(12.0).reshape(3, 4).astype(np.float32)


@pytest.mark.parametrize("key", [(A3, 0, 5), (A3, A3 * 2), (slice(0, 5, 2), A3), (slice(-1, 1, 5j),),
                                 ("0,2", A3, A3), ("r", A3, A3), ("1,2,0", A3, A3), (M34, M34),
                                 (2.5, A3), (np.float32(2),)])
def test_r_(key):
    _check_index_obj("r_", key)


@pytest.mark.parametrize("key", [(A3, A3 * 2), (slice(0, 3), A3), ("0,2", A3, A3), ("1,2,0", A3, A3), (M34, M34)])
def test_c_(key):
    _check_index_obj("c_", key)


@pytest.mark.parametrize("key", [slice(0, 5), (slice(0, 3), slice(1, 4, 2)), (slice(0, 1, 3j), slice(0, 3)),
                                 (slice(0.0, 2), slice(3)), (), slice(None), slice(3, None),
                                 slice(7, None, 2), (slice(2), slice(None))])
def test_mgrid_ogrid(key):
    _check_index_obj("mgrid", key)
    _check_index_obj("ogrid", key)


def test_s_index_exp():
    assert fn.s_[1:2, ::3] == jn.s_[1:2, ::3]
    assert fn.index_exp[1] == jn.index_exp[1]
    with pytest.raises(FtransValueError, match="directive"):
        fn.r_["bogus", A3]


# ---------------------------------------------------------------- priority 2
def test_bincount_digitize():
    i = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], np.int32)
    w = np.linspace(0, 1, 10).astype(np.float32)
    check("bincount", i, staged=False)
    check("bincount", i, length=12)
    check("bincount", i, w, length=5)
    check("bincount", i, minlength=15, staged=False)
    check("bincount", i > 2, staged=False)
    with pytest.raises(ConcretizationTypeError, match="length"):
        ftrans.make_jaxpr(fn.bincount)(i)
    f = np.array([0.5, 2.2, -1, 7, 3, 3.0, 9.5], np.float32)
    bins = np.array([0.0, 1.0, 3.0, 5.0], np.float32)
    check("digitize", f, bins)
    check("digitize", f, bins, right=True)
    check("digitize", f, bins[::-1].copy())
    check("digitize", i, bins)


def test_histogram():
    f = np.array([0.5, 2.2, -1, 7, 3, 3.0, 9.5], np.float32)
    check("histogram", f)
    check("histogram", f, bins=np.array([0.0, 1.0, 3.0, 5.0], np.float32), weights=f * 2, density=True)
    check("histogram_bin_edges", np.array([3, 1, 4], np.int32), 3)
    check("histogram", np.ones(3, np.float32), 2)


SA = np.array([5, 1, 3, 3, 9, 1], np.int32)
SB = np.array([3, 9, 4, 4], np.int32)


@pytest.mark.parametrize("name", ["union1d", "setdiff1d", "intersect1d", "setxor1d"])
def test_set_operations(name):
    check(name, SA, SB, staged=False)
    check(name, SA, SB, size=8)
    check(name, SA, SB, size=9, fill_value=-1)
    check(name, R[0], R[0, :3], staged=False)
    with pytest.raises(ConcretizationTypeError, match="size"):
        ftrans.make_jaxpr(lambda a, b: getattr(fn, name)(a, b))(SA, SB)


def test_intersect1d_return_indices_and_setxor1d_of_repeated_values():
    check("intersect1d", SA, SB, staged=False, return_indices=True)
    check("intersect1d", SA, SB, size=6, fill_value=-1, return_indices=True)
    check("intersect1d", SA, SB, assume_unique=True, staged=False, return_indices=True)
    # NumPy's definition with assume_unique: a value repeated inside one input is not in the result.
    np.testing.assert_array_equal(np.asarray(fn.setxor1d(SA, SB, assume_unique=True)),
                                  np.setxor1d(SA, SB, assume_unique=True))
    inf = np.array([np.inf, np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(fn.setxor1d(inf, np.array([np.inf], np.float32))),
                                  np.setxor1d(inf, np.array([np.inf], np.float32)))


@given(hnp.arrays(np.int32, 7, elements=st.integers(0, 6)), hnp.arrays(np.int32, 5, elements=st.integers(0, 6)))
def test_set_operations_hypothesis(a, b):
    # Fixed shapes keep jax's compilation cache warm; the values vary.
    for name in ("union1d", "setdiff1d", "intersect1d", "setxor1d"):
        check(name, a, b, size=10, fill_value=-1)
    check("isin", a, b, invert=True)


@pytest.mark.parametrize("name", ["unique_values", "unique_counts", "unique_inverse", "unique_all"])
def test_unique_array_api(name):
    i = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], np.int32)
    check(name, i, staged=False)
    check(name, i, size=8)
    check(name, i.reshape(2, 5), size=12, fill_value=0)
    check(name, np.array([3.0, 1.0, np.nan, 3.0, 2.0, 1.0], np.float32), staged=False)
    res, want = getattr(fn, name)(i), getattr(jn, name)(i)
    for field in getattr(want, "_fields", ()):
        np.testing.assert_array_equal(np.asarray(getattr(res, field)), np.asarray(getattr(want, field)))


def test_insert_delete_resize_trim():
    m = np.arange(12.0).reshape(3, 4).astype(np.float32)
    check("insert", m, 1, 5.0)
    check("insert", m, 1, np.array([7.0, 8.0, 9.0], np.float32), axis=1)
    check("insert", m, np.array([0, 2, 4], np.int32), np.array([7.0, 8.0, 9.0], np.float32), axis=1)
    check("insert", I, -2, np.array([1, 2], np.int32))
    check("delete", m, 1)
    check("delete", m, np.array([0, 2], np.int32), axis=1, staged=False)
    check("delete", m, slice(0, 2), axis=0)
    check("delete", I, np.array([1, 3], np.int32), assume_unique_indices=True)
    check("delete", m, np.array([True, False, True]), axis=0, staged=False)
    check("resize", m, (5, 3))
    check("resize", I, 4)
    check("trim_zeros", np.array([0, 0, 1, 2, 0, 3, 0], np.int32), staged=False)
    check("trim_zeros", np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], np.int32), staged=False)
    check("trim_zeros", np.zeros(3, np.float32), staged=False)
    with pytest.raises(ConcretizationTypeError):
        ftrans.make_jaxpr(fn.trim_zeros)(I)


@pytest.mark.parametrize("kth", [0, 3, -1])
def test_partition(kth):
    check("partition", R, kth)
    check("partition", RI, kth)
    check("argpartition", R, kth)
    check("argpartition", RI, kth)
    check("argpartition", RI.astype(np.uint32), kth, axis=1)
    check("partition", R[:, :3], 1, axis=0)
    check("argpartition", RI[:, :3], 2, axis=0)


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantiles(method):
    rn = R.copy()
    rn[0, 2] = np.nan
    rn[1, :] = np.nan
    check("quantile", R, 0.3, method=method)
    check("quantile", R, np.array([0.1, 0.5, 1.0], np.float32), axis=1, method=method, keepdims=True)
    check("percentile", RI, 40, axis=0, method=method)
    check("nanquantile", rn, np.array([0.25, 0.75], np.float32), axis=1, method=method)
    check("nanpercentile", rn, 50, method=method)
    check("quantile", rn, 0.5, axis=(0, 1), method=method)


@given(floats, st.floats(0, 1))
def test_quantile_hypothesis(x, q):
    check("quantile", x, np.float32(q), tol=1e-3)
    check("nanmedian", x)


def test_nanmedian_and_errors():
    rn = R.copy()
    rn[0, 2] = np.nan
    rn[1, :] = np.nan
    check("nanmedian", rn, axis=1)
    check("nanmedian", rn)
    check("nanmedian", RI, keepdims=True, axis=0)
    with pytest.raises(FtransValueError, match="method"):
        fn.quantile(R, 0.5, method="cubic")
    with pytest.raises(FtransValueError, match="complex"):
        fn.quantile(R.astype(np.complex64), 0.5)


def test_interp_cov_corrcoef():
    f = np.array([0.5, 2.2, -1, 7, 3, 3.0, 9.5], np.float32)
    xp = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    fp = np.array([1.0, -1.0, 3.0, 0.0], np.float32)
    check("interp", f, xp, fp)
    check("interp", f, xp, fp, left=-5, right=5.5)
    check("interp", I, xp, fp)
    check("interp", f, xp, fp, period=3.0)
    check("interp", 1.7, xp, fp)
    check("cov", R)
    check("cov", R, rowvar=False)
    check("cov", R[0], R[1])
    check("cov", R, ddof=2)
    check("cov", RI, fweights=np.array([1, 2, 1, 3, 1, 1, 2], np.int32),
          aweights=np.linspace(0, 1, 7).astype(np.float32), tol=1e-4)
    check("cov", R[0])
    check("corrcoef", R)
    check("corrcoef", R[0], R[1])
    check("corrcoef", RI, rowvar=False)


def test_interp_extrapolate_period_and_errors():
    f = np.array([0.5, 2.2, -1, 7, 3, 3.0, 9.5], np.float32)
    xp = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    fp = np.array([1.0, -1.0, 3.0, 0.0], np.float32)
    check("interp", f, xp, fp, left="extrapolate")
    check("interp", f, xp, fp, right="extrapolate")
    check("interp", f, xp, fp, left="extrapolate", right=2.0)
    check("interp", 0.5, np.array([1.0, 2.0, 3.0], np.float32), np.array([10.0, 20.0, 30.0], np.float32),
          left="extrapolate")
    # With a period, left/right are ignored (as JAX and NumPy), not an error.
    check("interp", f, xp, fp, period=0.59, left=0, right=1)
    z = np.exp(np.linspace(-90, -20, 200)).astype(np.float32)
    g = ftrans.grad(lambda z: fn.sum(fn.interp(z, z, fn.ones_like(z), period=0.59, left=0)))(z)
    assert np.isfinite(np.asarray(g)).all()
    with pytest.raises(FtransValueError, match="only valid string value of `left` is 'extrapolate'"):
        fn.interp(0.0, fn.arange(3.0), fn.arange(3.0), left="interpolate")
    with pytest.raises(FtransValueError, match="only valid string value of `right`"):
        fn.interp(0.0, fn.arange(3.0), fn.arange(3.0), right="interpolate")
    with pytest.raises(FtransValueError, match="complex x values not supported"):
        fn.interp(1j, 1j * np.arange(3.0), np.arange(3.0))
    with pytest.raises(FtransValueError, match="period must be a scalar"):
        fn.interp(0.0, fn.arange(3.0), fn.arange(3.0), period=np.array([1.0]))


_COV_SHAPES = [(0,), (3, 0), (0, 5), (1, 0), (1, 3), (3, 1), (0, 1)]
_COV_DTYPES = [np.float32, np.float16, np.int32]
# Every shape with every dtype; rowvar alternates over them so that every shape and every dtype meets both
# values of rowvar (the full product was 42 cases).
_COV_GRID = [(shape, (k + j) % 2 == 0, dtype) for k, shape in enumerate(_COV_SHAPES) for j, dtype in enumerate(_COV_DTYPES)]


def test_cov_grid_covers_every_pair():
    assert {(s, r) for s, r, _ in _COV_GRID} == {(s, r) for s in _COV_SHAPES for r in (True, False)}
    assert {(r, d) for _, r, d in _COV_GRID} == {(r, d) for r in (True, False) for d in _COV_DTYPES}


@pytest.mark.parametrize("shape,rowvar,dtype", _COV_GRID)
def test_cov_of_empty_and_single_row_inputs(shape, rowvar, dtype):
    """No observations give NaN covariances (not -0.0: n - ddof <= 0), and a (1, n) input with
    rowvar=False holds n variables (NumPy 2.2), both as JAX."""
    import warnings

    x = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check("cov", x, rowvar=rowvar)
        if shape[0] in (0, 1) or not rowvar:
            return
        check("cov", x, x, rowvar=rowvar)


_WQ_NAMES = ["quantile", "nanquantile", "percentile", "nanpercentile"]
_WQ_SHAPES = [((10,), 0), ((4, 3, 5), -1), ((4, 3, 5), None), ((2, 3, 4, 5), (0, 2)), ((4, 3, 5), 0)]
# Every function meets every (shape, axis); the dtype alternates over them so that each function and each
# (shape, axis) meets both dtypes (the full product was 40 cases).  The quick run asks each case for a vector
# q or a scalar q, taking turns so that each function, each (shape, axis) and each dtype meets both; the
# thorough run asks every case for both.
_WQ_GRID = [(name, shape, axis, [np.float32, np.float16][(i + k) % 2], "both" if THOROUGH else (k + i // 2) % 2)
            for i, name in enumerate(_WQ_NAMES) for k, (shape, axis) in enumerate(_WQ_SHAPES)]


def test_weighted_quantile_grid_covers_every_pair():
    assert {(n, d) for n, _, _, d, _ in _WQ_GRID} == {(n, d) for n in _WQ_NAMES for d in (np.float32, np.float16)}
    assert {(repr((s, a)), d) for _, s, a, d, _ in _WQ_GRID} == {
        (repr(sa), d) for sa in _WQ_SHAPES for d in (np.float32, np.float16)}
    if not THOROUGH:  # each function, (shape, axis) and dtype asks for a vector q and a scalar q
        for part in (0, 1, 3):
            assert {(repr(c[part]), c[4]) for c in _WQ_GRID} == {(repr(c[part]), q) for c in _WQ_GRID for q in (0, 1)}


@pytest.mark.parametrize("name,shape,axis,dtype,q_kind", _WQ_GRID)
def test_weighted_quantile_inverted_cdf(name, shape, axis, dtype, q_kind):
    """``weights=`` with method='inverted_cdf' (JAX 0.10): against jax and against NumPy's weighted
    quantile, for scalar and vector q, eager and staged.  keepdims alternates with the function and the
    dtype (each function meets both) rather than doubling the grid."""
    import warnings
    import zlib

    keepdims = (name in ("nanquantile", "percentile")) == (dtype == np.float32)

    rng = np.random.default_rng(zlib.crc32(repr((name, shape, axis, keepdims, dtype)).encode()))
    data = rng.normal(size=shape).astype(dtype)
    if name.startswith("nan"):
        data[rng.random(shape) < 0.3] = np.nan
    scale = 100.0 if "percentile" in name else 1.0
    # float16: small integer weights, so the cumulative weights and q * total are exact in any
    # accumulation order (else a rounding tie decides between neighbouring order statistics)
    w = (rng.integers(1, 4, size=shape) if dtype == np.float16 else rng.uniform(0.1, 2.0, size=shape)).astype(dtype)
    qs = (np.array([0.0, 0.25, 0.5, 0.75, 1.0], dtype) * scale, dtype(0.5 * scale))
    for q in qs if q_kind == "both" else qs[q_kind:q_kind + 1]:
        check(name, data, q, axis=axis, weights=w, method="inverted_cdf", keepdims=keepdims, tol=1e-3)
        check(name, data, q, axis=axis, method="inverted_cdf", keepdims=keepdims, tol=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(data.astype(np.float32), np.asarray(q, np.float32), axis=axis,
                                     weights=w.astype(np.float32), method="inverted_cdf", keepdims=keepdims)
        got = getattr(fn, name)(data, q, axis=axis, weights=w, method="inverted_cdf", keepdims=keepdims)
        np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=1e-2, equal_nan=True)


def test_weighted_quantile_weights_by_reduced_axes_and_errors():
    data = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    for w in (np.array([1.0, 2.0, 0.5, 1.0], np.float32), np.array([1.0, -1.0, 2.0, 1.0], np.float32),
              np.array([1.0, np.nan, 2.0, 1.0], np.float32), np.ones(4, np.int32)):
        check("quantile", data, np.float32(0.5), axis=1, weights=w, method="inverted_cdf")
    check("quantile", data.astype(np.float16), np.float32(0.3), axis=1, weights=np.ones(4, np.float32),
          method="inverted_cdf")  # data and weights promote together, as in JAX
    with pytest.raises(NotImplementedError, match="inverted_cdf"):
        fn.quantile(data, 0.5, axis=1, weights=np.ones(4))
    with pytest.raises(ValueError, match="axis=None"):
        fn.quantile(data, 0.5, weights=np.ones(4), method="inverted_cdf")
    with pytest.raises(ValueError, match="reduced axes"):
        fn.quantile(data, 0.5, axis=0, weights=np.ones(4), method="inverted_cdf")
    with pytest.raises(ValueError, match="complex"):
        fn.quantile(data, 0.5, axis=1, weights=np.ones(4, np.complex64), method="inverted_cdf")


def test_cov_corrcoef_dtype():
    x = np.arange(5, dtype=np.int32)
    check("corrcoef", x, x, dtype="bfloat16", tol=1e-2)
    check("corrcoef", R, dtype=np.float16, tol=1e-2)
    check("cov", R, dtype="float16", tol=1e-2)
    check("cov", RI, fweights=np.array([1, 2, 1, 3, 1, 1, 2], np.int32), dtype=np.float16, tol=1e-1)
    with pytest.raises(FtransValueError, match="corrcoef: dtype must be a subclass of float or complex"):
        fn.corrcoef(x, x, dtype=int)
    with pytest.raises(FtransValueError, match="cov: dtype must be a subclass of float or complex"):
        fn.cov(x, dtype=np.int32)


def test_unwrap_integer_period_keeps_integer_dtype():
    """As JAX: p and period promote together (int data, int period -> int result, half-period rounded down)."""
    x = (np.random.RandomState(3).randn(3, 7) * 6).astype(np.int16)
    check("unwrap", x, period=4)
    check("unwrap", x, period=5, discont=2, axis=0)
    check("unwrap", x.astype(np.uint8), period=2)
    check("unwrap", x, period=np.pi, tol=1e-3)
    check("unwrap", x.astype(np.float16), period=4, tol=1e-2)


def test_unwrap_bits():
    ph = np.cumsum(np.random.RandomState(2).randn(2, 12) * 2.5, 1).astype(np.float32)
    check("unwrap", ph, tol=1e-4)
    check("unwrap", ph, axis=0, tol=1e-4)
    check("unwrap", ph, discont=1.0, tol=1e-4)
    check("unwrap", ph, period=4.0, tol=1e-4)
    check("unwrap", I)
    bits = RI > 1
    check("packbits", bits)
    check("packbits", bits, axis=1)
    check("packbits", RI, axis=0, bitorder="little")
    u8 = np.array([[1, 255, 7], [128, 0, 33]], np.uint8)
    check("unpackbits", u8)
    check("unpackbits", u8, axis=1)
    check("unpackbits", u8, axis=0, count=5)
    check("unpackbits", u8, count=30, bitorder="little")
    check("unpackbits", u8, axis=1, count=20)
    for x in (RI - 2, u8, bits, np.array([-1, 2**31 - 1], np.int32)):
        check("bitwise_count", x)
    with pytest.raises(FtransTypeError, match="unsigned byte"):
        fn.unpackbits(RI)


@pytest.mark.parametrize("m", [0, 1, 5, 8])
def test_windows(m):
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        check(name, m, tol=1e-6)
    check("kaiser", m, 3.5, tol=1e-4)


# ---------------------------------------------------------------- under ftrans.jit
def test_under_jit():
    f = ftrans.jit(lambda a, b: (fn.isclose(a, b), fn.diff(a, n=2), fn.gcd(fn.astype(a, fn.int32), 6),
                                 fn.quantile(a, 0.25), fn.cross(a[:3], b[:3]), fn.sinc(a),
                                 fn.setdiff1d(a, b, size=4), fn.i0(a)))
    a = np.linspace(-3, 3, 8).astype(np.float32)
    b = np.cos(a)
    got = f(a, b)
    want = (jn.isclose(a, b), jn.diff(a, n=2), jn.gcd(a.astype(np.int32), 6), jn.quantile(a, 0.25),
            jn.cross(a[:3], b[:3]), jn.sinc(a), jn.setdiff1d(a, b, size=4), jn.i0(a))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- priority 3: aliases and host helpers
def test_scalar_aliases():
    for name in ("float_", "int_", "uint", "complex_", "double", "single", "cdouble", "csingle", "bool"):
        ft, jt = getattr(fn, name), getattr(jn, name)
        assert np.dtype(ft) == np.dtype(jt), name
        g, w = ft(1), jt(1)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), name
    assert fn.bool is fn.bool_
    assert fn.issubdtype(np.str_, fn.character) and fn.issubdtype(np.str_, fn.flexible)
    assert fn.object_ is np.object_ and fn.ComplexWarning is jn.ComplexWarning


def test_io_helpers(tmp_path):
    x = fn.arange(6.0).reshape(2, 3)
    fn.save(tmp_path / "a.npy", x)
    y = fn.load(tmp_path / "a.npy")
    assert isinstance(y, fn.ndarray) and y.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    buf = io.BytesIO()
    fn.savez(buf, a=np.ones(2))
    buf.seek(0)
    assert set(fn.load(buf).files) == {"a"}
    g = fn.frombuffer(b"\x01\x02\x03\x04", np.uint8)
    assert g.dtype == np.uint8 and list(np.asarray(g)) == [1, 2, 3, 4]
    g = fn.fromstring("1 2 3", sep=" ")
    assert g.dtype == jn.fromstring("1 2 3", sep=" ").dtype
    g = fn.from_dlpack(np.arange(3.0))
    assert g.dtype == np.float32 and list(np.asarray(g)) == [0, 1, 2]
    for fun in (fn.fromfile, fn.fromiter):
        with pytest.raises(NotImplementedError, match="not supported"):
            fun(iter([1]), float)
    with fn.printoptions(precision=2):
        assert fn.get_printoptions()["precision"] == 2
    assert fn.array_str(np.array([1.5])) == jn.array_str(np.array([1.5]))
    assert fn.array_repr(np.array([1.5])) == jn.array_repr(np.array([1.5]))


def test_fromfunction_einsum_path():
    for shape, dt in (((2, 3), float), ((3,), int), ((2, 2, 2), fn.float32)):
        g = fn.fromfunction(lambda *ix: sum(ix), shape, dtype=dt)
        w = jn.fromfunction(lambda *ix: sum(ix), shape, dtype=dt)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    ops = (np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    for opt in ("auto", True, False, "greedy"):
        assert fn.einsum_path("ij,jk,kl->il", *ops, optimize=opt)[0] == \
            jn.einsum_path("ij,jk,kl->il", *ops, optimize=opt)[0]
