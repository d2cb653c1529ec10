"""Lowered (StableHLO -> XLA) reductions, products, sorts and scans agree with eager ftrans and with jax.

Each test draws shapes, dtypes and parameters, runs a public ``ftrans.numpy`` /
``ftrans.lax`` function three ways -- lowered and compiled by XLA, eagerly on
NumPy, and as ``jax.jit`` of the jax equivalent -- and compares values, dtypes
and shapes.  Inputs are small integers (stored in every dtype), so integer and
ordering results compare exactly and floating sums to a tolerance that only
covers summation order and half-precision rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax import lax as jlax

import ftrans
import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core.array import Array
from ftrans.core.ir import typecheck
from tests.hypothesis_budget import examples
from tests.lowering_util import run_lowered

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
C64 = np.dtype(np.complex64)
I8, I32, U8, U32 = (np.dtype(d) for d in (np.int8, np.int32, np.uint8, np.uint32))
BOOL = np.dtype(np.bool_)
NUMERIC = [I8, I32, U8, U32, F16, F32, BF16, C64]
REAL = [I8, I32, U8, F16, F32, BF16]
FLOATS = [F16, F32, BF16]
SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0]


def _values(dtype: np.dtype, shape, lo: int = -4, hi: int = 4, special: bool = False):
    """Arrays of ``dtype`` holding small integers; ``special`` mixes in NaN, +-inf and -0.0 for floats."""
    if dtype == BOOL:
        return hnp.arrays(np.bool_, shape)
    if dtype.kind == "u":
        lo = 0
    if special and (dtype.kind == "f" or dtype == BF16):
        elems = st.one_of(st.integers(lo, hi).map(float), st.sampled_from(SPECIAL))
        return hnp.arrays(np.float64, shape, elements=elems).map(lambda a: a.astype(dtype))
    if dtype.kind == "c":
        parts = hnp.arrays(np.int64, (2, *shape), elements=st.integers(lo, hi))
        return parts.map(lambda p: (p[0] + 1j * p[1]).astype(dtype))
    return hnp.arrays(np.int64, shape, elements=st.integers(lo, hi)).map(lambda a: a.astype(dtype))


@st.composite
def arrays(draw, dtypes=tuple(NUMERIC), min_dims=1, max_dims=3, min_side=1, max_side=4, special=False):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side))
    return draw(_values(dtype, shape, special=special))


def _np(x) -> np.ndarray:
    return x._value if isinstance(x, Array) else np.asarray(x)


def _tol(dtype: np.dtype) -> float:
    return 3e-2 if np.dtype(dtype).itemsize <= 2 and np.dtype(dtype).kind != "c" else 1e-5


def _same(got: np.ndarray, want, *, tol: float | None, what: str) -> None:
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    if tol is None:  # exact, NaNs and the sign of zero included
        if got.dtype.kind in "fc" or got.dtype == BF16:
            g, w = got.astype(wide), want.astype(wide)
            np.testing.assert_array_equal(g, w, err_msg=what)
            zero = w.real == 0
            np.testing.assert_array_equal(np.signbit(g.real[zero]), np.signbit(w.real[zero]),
                                          err_msg=f"{what} (sign of zero)")
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=what)


def check(f, jf, *args, tol: float | None = None) -> list[np.ndarray]:
    """Lowered == eager (to ``tol``, or exactly) == ``jax.jit(jf)``; the staged program typechecks."""
    typecheck(ftrans.make_jaxpr(f)(*args))
    lowered, text = run_lowered(f, *args)
    eager = f(*[jnp.asarray(a) for a in args])
    eager = list(eager) if isinstance(eager, (list, tuple)) else [eager]
    want = jax.jit(jf)(*args)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(lowered) == len(eager) == len(want)
    for g, e, w in zip(lowered, eager, want):
        _same(g, _np(e), tol=tol, what=f"lowered vs eager\n{text}")
        _same(g, np.asarray(w), tol=tol, what="lowered vs jax")
    return lowered


@st.composite
def axis_for(draw, ndim: int, allow_none: bool = True, allow_tuple: bool = True):
    """An ``axis`` argument: None, a (possibly negative) int, or a tuple of distinct axes."""
    choices = ["int"] + (["none"] if allow_none else []) + (["tuple"] if allow_tuple else [])
    kind = draw(st.sampled_from(choices))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


# ---------------------------------------------------------------- reductions over axes
_REDUCTIONS = {
    "sum": (jnp.sum, jjnp.sum), "prod": (jnp.prod, jjnp.prod), "max": (jnp.max, jjnp.max),
    "min": (jnp.min, jjnp.min), "all": (jnp.all, jjnp.all), "any": (jnp.any, jjnp.any),
    "mean": (jnp.mean, jjnp.mean), "var": (jnp.var, jjnp.var),
}


@given(st.sampled_from(sorted(_REDUCTIONS)), arrays(dtypes=(*NUMERIC, BOOL), min_side=0), st.data())
def test_reductions(name, x, data):
    f, jf = _REDUCTIONS[name]
    assume(not (name in ("max", "min") and x.dtype.kind == "c"))  # jax orders complex; not in ftrans' scope
    assume(not (name == "var" and x.dtype == BOOL))
    axis = data.draw(axis_for(x.ndim))
    keepdims = data.draw(st.booleans())
    if name in ("max", "min"):  # no identity for an empty reduction without ``initial``
        axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        assume(all(x.shape[a] for a in axes))
    exact = name in ("max", "min", "all", "any") or x.dtype.kind in "iub"
    tol = None if exact else _tol(x.dtype) * (10 if name in ("var", "prod") else 1)
    check(lambda v: f(v, axis=axis, keepdims=keepdims), lambda v: jf(v, axis=axis, keepdims=keepdims), x, tol=tol)


@settings(max_examples=examples(10))  # three compilations per check; keeps the file fast
@given(arrays(dtypes=tuple(FLOATS), special=True), st.data())
def test_max_min_with_nan_inf(x, data):
    axis = data.draw(axis_for(x.ndim))
    check(lambda v: jnp.max(v, axis=axis), lambda v: jjnp.max(v, axis=axis), x)
    check(lambda v: jnp.min(v, axis=axis), lambda v: jjnp.min(v, axis=axis), x)


@given(arrays(dtypes=(I8, I32, U8, U32, BOOL), min_side=0), st.sampled_from(["and", "or", "xor"]), st.data())
def test_bitwise_reductions(x, op, data):
    """lax.reduce_and/or/xor (empty axes give the identity: all ones, zero)."""
    axes = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True, max_size=x.ndim)))
    f, jf = getattr(lax, f"reduce_{op}"), getattr(jlax, f"reduce_{op}")
    check(lambda v: f(v, axes), lambda v: jf(v, axes), x)


# ---------------------------------------------------------------- argmax / argmin
@given(arrays(dtypes=(I8, I32, U8, F16, F32, BF16, BOOL), special=True), st.data())
def test_argmax_argmin(x, data):
    """Ties take the first index; NaN counts as the extreme value (its first occurrence wins)."""
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    keepdims = data.draw(st.booleans())
    for f, jf in ((jnp.argmax, jjnp.argmax), (jnp.argmin, jjnp.argmin)):
        check(lambda v: f(v, axis=axis, keepdims=keepdims), lambda v: jf(v, axis=axis, keepdims=keepdims), x)


def test_argmax_complex_matches_eager():
    """Complex operands (which jax rejects) order by real part, then imaginary part, NaN first."""
    x = np.array([[1 + 2j, 1 + 3j, np.nan + 0j, 0j], [1 + 1j, 1 - 1j, 1 + 1j, 0j]], np.complex64)
    for f, want in ((jnp.argmax, [2, 0]), (jnp.argmin, [2, 3])):
        got, _ = run_lowered(lambda v: f(v, axis=1), x)
        np.testing.assert_array_equal(got[0], np.asarray(want, np.int32))
        np.testing.assert_array_equal(got[0], _np(f(x, axis=1)))


# ---------------------------------------------------------------- products
_DOT_DTYPES = (I8, I32, U8, F16, F32, BF16, BOOL, C64)


@settings(max_examples=examples(10))  # three compilations per check; keeps the file fast
@given(st.sampled_from(_DOT_DTYPES), st.integers(1, 4), st.integers(1, 4), st.integers(0, 4), st.data())
def test_dot_matmul(dtype, m, n, k, data):
    a = data.draw(_values(dtype, (m, k)))
    b = data.draw(_values(dtype, (k, n)))
    v = data.draw(_values(dtype, (k,)))
    tol = None if dtype.kind in "iub" else _tol(dtype)
    check(jnp.dot, jjnp.dot, a, b, tol=tol)
    check(jnp.matmul, jjnp.matmul, a, v, tol=tol)
    check(jnp.dot, jjnp.dot, v, v, tol=tol)


@settings(max_examples=examples(10))  # three compilations per check; keeps the file fast
@given(st.sampled_from((I8, I32, F32, BF16)), st.data())
def test_matmul_batched(dtype, data):
    """Batch dimensions (broadcast between the operands) become dot_general batch dimensions."""
    batch = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=3))
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    bb = batch[-1:] if data.draw(st.booleans()) else batch
    a = data.draw(_values(dtype, (*batch, m, k)))
    b = data.draw(_values(dtype, (*bb, k, n)))
    check(jnp.matmul, jjnp.matmul, a, b, tol=None if dtype.kind == "i" else _tol(dtype))


_EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]), ("ij->j", [(3, 4)]),
    ("i,i->", [(5,), (5,)]), ("bi,bj->bij", [(2, 3), (2, 4)]), ("abc,cba->b", [(2, 3, 4), (4, 3, 2)]),
    ("ij,kj,k->i", [(2, 3), (4, 3), (4,)]),
]


@given(st.sampled_from(_EINSUMS), st.sampled_from((I32, F32, BF16)), st.data())
def test_einsum(spec, dtype, data):
    subscripts, shapes = spec
    ops = [data.draw(_values(dtype, s)) for s in shapes]
    check(lambda *xs: jnp.einsum(subscripts, *xs), lambda *xs: jjnp.einsum(subscripts, *xs), *ops,
          tol=None if dtype.kind == "i" else _tol(dtype))


@settings(max_examples=examples(10))  # three compilations per check; keeps the file fast
@given(st.sampled_from((I8, I32, F32, BF16)), st.sampled_from([0, 1, 2, ((1, 0), (0, 1)), ([2], [0])]),
       st.data())
def test_tensordot(dtype, axes, data):
    a = data.draw(_values(dtype, (2, 3, 4)))
    b = data.draw(_values(dtype, {0: (5,), 1: (4, 2), 2: (3, 4, 2)}.get(axes, (3, 2, 4))
                                if not isinstance(axes, tuple) else ((3, 2) if axes[0] == (1, 0) else (4, 3))))
    check(lambda x, y: jnp.tensordot(x, y, axes), lambda x, y: jjnp.tensordot(x, y, axes), a, b,
          tol=None if dtype.kind == "i" else _tol(dtype))


@given(st.sampled_from([(BF16, F32), (F16, F32), (I8, I32), (U8, U32), (I8, I8), (BOOL, I32)]), st.data())
def test_dot_general_preferred_element_type(dtypes, data):
    """``preferred_element_type`` sets the result (and accumulation) dtype; int8 products do not wrap."""
    dt, pet = dtypes
    a = data.draw(_values(dt, (2, 3, 4), lo=-100, hi=100))
    b = data.draw(_values(dt, (2, 4, 3), lo=-100, hi=100))
    dn = (((2,), (1,)), ((0,), (0,)))
    check(lambda x, y: lax.dot_general(x, y, dn, preferred_element_type=pet),
          lambda x, y: jlax.dot_general(x, y, dn, preferred_element_type=pet), a, b,
          tol=None if pet.kind in "iu" else _tol(dt))


# ---------------------------------------------------------------- sorting
@given(arrays(dtypes=(I8, I32, U8, F16, F32, BF16, BOOL), special=True), st.data())
def test_sort_argsort(x, data):
    """NaNs sort last, -0.0 ties +0.0 (ties keep their input order), as in jax."""
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    descending = data.draw(st.booleans())
    check(lambda v: jnp.sort(v, axis=axis, descending=descending),
          lambda v: jjnp.sort(v, axis=axis, descending=descending), x)
    check(lambda v: jnp.argsort(v, axis=axis, descending=descending),
          lambda v: jjnp.argsort(v, axis=axis, descending=descending), x)


@given(st.integers(1, 3), st.integers(1, 6), st.data())
def test_lax_sort_multi_operand(nops, n, data):
    """Keys compare lexicographically; every operand is permuted together."""
    dts = [data.draw(st.sampled_from((I32, U8, F32, BF16, BOOL))) for _ in range(nops)]
    ops = [data.draw(_values(d, (2, n), lo=-2, hi=2, special=True)) for d in dts]
    ops.append(np.broadcast_to(np.arange(n, dtype=np.int32), (2, n)).copy())  # the permutation
    num_keys = data.draw(st.integers(1, nops))
    dim = data.draw(st.sampled_from([1, -1]))
    check(lambda *xs: lax.sort(list(xs), dimension=dim, num_keys=num_keys),
          lambda *xs: jlax.sort(list(xs), dimension=dim, num_keys=num_keys), *ops)


@given(arrays(dtypes=(I32, F32, BF16), special=True, max_dims=2, max_side=6), st.data())
def test_top_k(x, data):
    k = data.draw(st.integers(0, x.shape[-1]))
    assume(not (np.isnan(x.astype(np.float64)).any() and x.dtype != I32))  # XLA TopK's NaN order is its own
    check(lambda v: lax.top_k(v, k), lambda v: jlax.top_k(v, k), x)


def test_sort_comparator_uses_total_order():
    _, text = run_lowered(lambda v: jnp.sort(v), np.array([np.nan, -0.0, 0.0, 1.0], np.float32))
    assert "stablehlo.sort" in text and "TOTALORDER" in text


# ---------------------------------------------------------------- cumulative reductions
@given(arrays(dtypes=(I8, I32, U8, F16, F32, BF16, C64), max_dims=2, max_side=5), st.data())
def test_cumsum_cumprod(x, data):
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    tol = None if x.dtype.kind in "iu" else _tol(x.dtype)
    check(lambda v: jnp.cumsum(v, axis=axis), lambda v: jjnp.cumsum(v, axis=axis), x, tol=tol)
    check(lambda v: jnp.cumprod(v, axis=axis), lambda v: jjnp.cumprod(v, axis=axis), x, tol=tol)


_LAX_CUMULATIVE = {
    "cumsum": (lax.cumsum, jlax.cumsum), "cumprod": (lax.cumprod, jlax.cumprod),
    "cummax": (lax.cummax, jlax.cummax), "cummin": (lax.cummin, jlax.cummin),
    "cumlogsumexp": (lax.cumlogsumexp, jlax.cumlogsumexp),
}


@given(st.sampled_from(sorted(_LAX_CUMULATIVE)), st.booleans(), st.data())
def test_lax_cumulative(name, reverse, data):
    f, jf = _LAX_CUMULATIVE[name]
    dts = tuple(FLOATS) if name == "cumlogsumexp" else (I8, I32, U8, F16, F32, BF16)
    x = data.draw(arrays(dtypes=dts, max_dims=3, max_side=5, special=name in ("cummax", "cummin",
                                                                               "cumlogsumexp")))
    axis = data.draw(st.integers(0, x.ndim - 1))
    exact = name in ("cummax", "cummin") or x.dtype.kind in "iu"
    check(lambda v: f(v, axis=axis, reverse=reverse), lambda v: jf(v, axis=axis, reverse=reverse), x,
          tol=None if exact else _tol(x.dtype))


def test_cumlogsumexp_infinities():
    """Equal infinities combine without NaN: -inf stays -inf, +inf stays +inf."""
    x = np.array([-np.inf, -np.inf, 0.0, np.inf, np.inf, 1.0], np.float32)
    got = check(lambda v: lax.cumlogsumexp(v, axis=0), lambda v: jlax.cumlogsumexp(v, axis=0), x, tol=1e-6)
    np.testing.assert_array_equal(got[0][:2], [-np.inf, -np.inf])
    np.testing.assert_array_equal(got[0][3:], [np.inf] * 3)


def test_empty_cumulative_and_reduction():
    x = np.zeros((0, 3), np.float32)
    check(lambda v: lax.cumsum(v, axis=0), lambda v: jlax.cumsum(v, axis=0), x)
    got = check(lambda v: jnp.prod(v, axis=0), lambda v: jjnp.prod(v, axis=0), x)
    np.testing.assert_array_equal(got[0], np.ones(3, np.float32))
