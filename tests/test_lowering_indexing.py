"""StableHLO lowering of gather and the scatter family, differential against eager ftrans and jax.

Every indexing form is written once as ``f(np_like, *args)`` and run three
ways: eagerly in ftrans (the NumPy reference rules), through ftrans's
StableHLO lowering compiled by XLA (``run_lowered``), and through
``jax.jit`` of the same code on ``jax.numpy``.  All three must agree in
dtype, shape and values (exactly, except float accumulation order).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans.numpy as fnp
from ftrans import lax as flax
from ftrans.core.prims import indexing as I
from ftrans.lowering.lower import lowering_rules
from tests.hypothesis_budget import examples
from tests.lowering_util import run_lowered

DTYPES = [np.float32, np.int32, np.uint8, np.int16, np.bool_, np.float16]
NUM_DTYPES = [np.float32, np.int32, np.uint8, np.int16, np.float16]
INDEX_DTYPES = [np.int32, np.int8, np.int16, np.uint8, np.uint32]


# ---------------------------------------------------------------- helpers
def _value(dtype, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 20, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-20, 20, shape).astype(dtype)
    return (rng.standard_normal(shape) * 4).astype(dtype)


def check(f, *args, rtol: float = 0.0, ops=("gather", "scatter")):
    """Lowered ftrans == eager ftrans == jax.jit(jax.numpy) for ``f(np_like, *args)``."""
    eager = np.asarray(f(fnp, *[fnp.asarray(a) for a in args]))
    (got,), text = run_lowered(lambda *a: f(fnp, *a), *args)
    want = np.asarray(jax.jit(lambda *a: f(jnp, *a))(*[jnp.asarray(a) for a in args]))
    if got.size and all(np.size(a) for a in args):  # empty cases need no gather/scatter
        assert any(f"stablehlo.{op}" in text for op in ops), text
    for ref, who in ((eager, "eager ftrans"), (want, "jax")):
        assert got.dtype == ref.dtype, (who, got.dtype, ref.dtype)
        assert got.shape == ref.shape, (who, got.shape, ref.shape)
        if rtol and got.dtype.kind == "f":
            np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                                       atol=rtol, equal_nan=True, err_msg=f"vs {who}\n{text}")
        else:
            np.testing.assert_array_equal(got, ref, err_msg=f"vs {who}\n{text}")
    return got


@st.composite
def operand_and_axis(draw, min_rank=1, max_rank=3, dtypes=DTYPES):
    rank = draw(st.integers(min_rank, max_rank))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    dtype = draw(st.sampled_from(dtypes))
    axis = draw(st.integers(-rank, rank - 1))
    return _value(dtype, shape, draw(st.integers(0, 2**16))), axis


def _index_values(draw, n: int, shape, oob: bool = False, signed: bool = True) -> np.ndarray:
    """Index values for an axis of size ``n``: in ``[-n, n)``, or ``[-2n, 2n]`` when ``oob``.

    Unsigned index dtypes cannot hold the negative in-bounds values, so
    ``signed=False`` draws from ``[0, n)`` (or ``[0, 2n]``) instead.
    """
    lo, hi = (-2 * n, 2 * n) if oob else (-n, n - 1)
    if not signed:
        lo = 0
    size = int(np.prod(shape, dtype=np.int64))
    vals = draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size))
    return np.asarray(vals, np.int64).reshape(shape)


def _draw_index(draw, n: int, shape, dtype=np.int32, oob: bool = False) -> np.ndarray:
    signed = np.dtype(dtype).kind == "i"
    return _index_values(draw, n, shape, oob, signed).astype(dtype)


# ---------------------------------------------------------------- reading
def test_rules_are_registered():
    for prim in (I.gather_p, I.scatter_p, I.scatter_add_p, I.scatter_mul_p, I.scatter_min_p, I.scatter_max_p):
        assert prim in lowering_rules, prim.name


@given(operand_and_axis(), st.data())
def test_integer_array_index(xa, data):
    """x[i] for 1-D and 2-D index arrays, negative indices included, every index dtype."""
    x, _ = xa
    idx_shape = data.draw(st.sampled_from([(3,), (2, 2), (1,), (0,)]))
    idt = data.draw(st.sampled_from(INDEX_DTYPES))
    i = _draw_index(data.draw, x.shape[0], idx_shape, idt)
    check(lambda m, x, i: x[i], x, i)


@settings(max_examples=examples(6))  # several compiles per example
@given(operand_and_axis(min_rank=2), st.data())
def test_two_index_arrays(xa, data):
    """x[i, j] with broadcasting index arrays, and x[i, 1:] / x[1:, j] mixing slices."""
    x, _ = xa
    i = _draw_index(data.draw, x.shape[0], (2, 1), np.int32)
    j = _draw_index(data.draw, x.shape[1], (3,), data.draw(st.sampled_from(INDEX_DTYPES)))
    check(lambda m, x, i, j: x[i, j], x, i, j)
    check(lambda m, x, i: x[i, 1:], x, i)
    check(lambda m, x, j: x[1:, j], x, j)


@settings(max_examples=examples(6))  # several compiles per example
@given(operand_and_axis(min_rank=2), st.data())
def test_index_on_inner_axes(xa, data):
    """x[:, idx], x[..., idx], x[idx, ..., None], x[None, idx]."""
    x, _ = xa
    idx = _draw_index(data.draw, x.shape[-1], (2, 2), np.int32)
    lead = _draw_index(data.draw, x.shape[0], (3,), np.int32)
    if x.shape[1] == x.shape[-1]:
        check(lambda m, x, i: x[:, i], x, idx)
    check(lambda m, x, i: x[..., i], x, idx)
    check(lambda m, x, i: x[i, ..., None], x, lead)
    check(lambda m, x, i: x[None, i], x, lead)


@given(operand_and_axis(), st.sampled_from(["clip", "fill"]), st.sampled_from([None, -1, 7]), st.data())
def test_at_get_modes(xa, mode, fill_value, data):
    """x.at[i].get with clip and fill modes on out-of-bounds indices (default fill values too)."""
    x, _ = xa
    idt = data.draw(st.sampled_from(INDEX_DTYPES))
    i = _draw_index(data.draw, x.shape[0], (4,), idt, oob=True)
    if x.dtype == np.bool_ and fill_value is not None:
        fill_value = bool(fill_value)
    check(lambda m, x, i: x.at[i].get(mode=mode, fill_value=fill_value), x, i)


@given(operand_and_axis(), st.sampled_from([None, "clip", "fill"]), st.data())
def test_take(xa, mode, data):
    """jnp.take along any axis (its default mode is fill), with out-of-bounds indices."""
    x, axis = xa
    n = x.shape[axis]
    shape = data.draw(st.sampled_from([(3,), (2, 3)]))
    i = _draw_index(data.draw, n, shape, data.draw(st.sampled_from(INDEX_DTYPES)), oob=True)
    check(lambda m, x, i: m.take(x, i, axis=axis, mode=mode), x, i)


@given(operand_and_axis(min_rank=1), st.data())
def test_take_along_axis(xa, data):
    x, axis = xa
    shape = list(x.shape)
    shape[axis] = data.draw(st.integers(1, 4))
    i = _draw_index(data.draw, x.shape[axis], tuple(shape), np.int32)
    check(lambda m, x, i: m.take_along_axis(x, i, axis=axis), x, i)


# ---------------------------------------------------------------- updating
def _update_values(x: np.ndarray, idx_shape, seed: int) -> np.ndarray:
    return _value(x.dtype, tuple(idx_shape) + x.shape[1:], seed)


@settings(max_examples=examples(6))  # several compiles per example
@given(operand_and_axis(dtypes=DTYPES), st.sampled_from([None, "clip", "drop"]), st.data())
def test_at_set_unique(xa, mode, data):
    """x.at[i].set with unique indices (XLA leaves the winner among duplicates unspecified)."""
    x, _ = xa
    n = x.shape[0]
    k = data.draw(st.integers(0, n))
    perm = data.draw(st.permutations(range(n)))[:k]
    vals = np.asarray(perm, np.int64)
    if mode is not None:  # push some indices out of bounds, keeping them distinct
        vals = np.where(np.arange(k) % 2 == 1, vals + 2 * n, vals)
    i = vals.astype(data.draw(st.sampled_from([np.int32, np.int16, np.uint32])))
    u = _update_values(x, (k,), data.draw(st.integers(0, 99)))
    check(lambda m, x, i, u: x.at[i].set(u, mode=mode), x, i, u)
    check(lambda m, x, i: x.at[i].set(x[0], mode=mode), x, i)


@given(operand_and_axis(dtypes=NUM_DTYPES), st.sampled_from(["add", "multiply", "min", "max"]),
       st.sampled_from([None, "clip", "drop"]), st.data())
def test_at_combine_duplicates(xa, op, mode, data):
    """add / multiply / min / max with duplicate and (for clip/drop) out-of-bounds indices."""
    x, _ = xa
    n = x.shape[0]
    k = data.draw(st.integers(1, 6))
    i = _draw_index(data.draw, n, (k,), data.draw(st.sampled_from(INDEX_DTYPES)), oob=mode is not None)
    u = _update_values(x, (k,), data.draw(st.integers(0, 99)))
    if op == "multiply" and x.dtype.kind in "iu":
        u = (u % 3).astype(x.dtype)  # keep products small so no accumulation order matters
    rtol = 2e-2 if x.dtype == np.float16 else 1e-5
    check(lambda m, x, i, u: getattr(x.at[i], op)(u, mode=mode), x, i, u, rtol=rtol)


@settings(max_examples=examples(6))  # several compiles per example
@given(st.sampled_from(["add", "min", "max"]), st.data())
def test_scalar_update_and_2d_index(op, data):
    """A scalar update broadcast over a 2-D index array with repeats."""
    x = _value(np.int32, (5, 3), data.draw(st.integers(0, 99)))
    i = _draw_index(data.draw, 5, (2, 3), np.int32)
    check(lambda m, x, i: getattr(x.at[i], op)(4), x, i)
    check(lambda m, x, i: getattr(x.at[:, i[0, :2]], op)(-3), x, i)


@settings(max_examples=examples(6))  # several compiles per example
@given(st.data())
def test_two_array_update(data):
    """x.at[i, j].add(u): a scatter with a two-component index vector."""
    x = _value(np.float32, (4, 5), data.draw(st.integers(0, 99)))
    i = _draw_index(data.draw, 4, (6,), np.int32)
    j = _draw_index(data.draw, 5, (6,), np.int32)
    u = _value(np.float32, (6,), 1)
    check(lambda m, x, i, j, u: x.at[i, j].add(u), x, i, j, u, rtol=1e-5)
    check(lambda m, x, i, j, u: x.at[i, j].set(u, unique_indices=False), x, i[:1], j[:1], u[:1])


# ---------------------------------------------------------------- lax with batching dims
def _lax(m):
    return jax.lax if m is jnp else flax


@given(st.sampled_from([None, "clip", "fill"]), st.sampled_from([np.int32, np.uint8, np.uint32]), st.data())
def test_lax_gather_batching_dims(mode, idt, data):
    """lax.gather with operand/start-indices batching dims and a slice window."""
    b, n, w = 2, 6, 3
    x = _value(np.float32, (b, n, 4), data.draw(st.integers(0, 99)))
    i = _draw_index(data.draw, n, (b, 5, 1), idt, oob=mode is not None)

    def f(m, x, i):
        lx = _lax(m)
        dn = lx.GatherDimensionNumbers(offset_dims=(2, 3), collapsed_slice_dims=(), start_index_map=(1,),
                                       operand_batching_dims=(0,), start_indices_batching_dims=(0,))
        return lx.gather(x, i, dn, (1, w, 4), mode=mode, fill_value=None)

    check(f, x, i)


@given(st.sampled_from(["scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"]),
       st.sampled_from([None, "clip", "promise_in_bounds"]), st.data())
def test_lax_scatter_batching_dims(name, mode, data):
    """lax.scatter* with batching dims and 2-wide update windows that can hang off the end."""
    b, n = 3, 5
    x = _value(np.int32, (b, n), data.draw(st.integers(0, 99)))
    if name == "scatter":
        base = np.array([data.draw(st.permutations(range(0, 2 * n, 2)))[:2] for _ in range(b)])
        i = base.reshape(b, 2, 1).astype(np.int32)
    else:
        i = _draw_index(data.draw, n, (b, 2, 1), np.int32, oob=True)
    u = (_value(np.int32, (b, 2, 2), data.draw(st.integers(0, 99))) % 4).astype(np.int32)
    if mode == "promise_in_bounds":
        i = np.clip(i, 0, n - 2).astype(np.int32)
        if name == "scatter":
            u[:, 1] = u[:, 0]  # clipped windows may collide; make any winner give the same result

    def f(m, x, i, u):
        lx = _lax(m)
        dn = lx.ScatterDimensionNumbers(update_window_dims=(2,), inserted_window_dims=(),
                                        scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                        scatter_indices_batching_dims=(0,))
        return getattr(lx, name)(x, i, u, dn, mode=mode)

    if name == "scatter" and mode == "clip":
        return  # clamping can merge distinct windows, where XLA leaves the winner unspecified
    check(f, x, i, u)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.bool_])
def test_fill_default_values(dtype):
    """The default fill of an out-of-bounds gather: NaN, the type's min (signed) / max (unsigned), True."""
    x = _value(dtype, (3, 2), 0)
    i = np.array([0, 3, -4, 2], np.int32)
    got = check(lambda m, x, i: x.at[i].get(mode="fill"), x, i)
    assert got.dtype == np.dtype(dtype)


def test_huge_unsigned_indices_stay_out_of_bounds():
    """uint32 indices past int32's range are out of bounds, not wrapped to negatives."""
    x = np.arange(8, dtype=np.float32)
    i = np.array([[1], [2**32 - 1], [2**31 + 3], [7]], np.uint32)

    def gather(m, x, i):
        lx = _lax(m)
        dn = lx.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
        return lx.gather(x, i, dn, (1,), mode="fill", fill_value=-5.0)

    got = check(gather, x, i)
    np.testing.assert_array_equal(got, [1.0, -5.0, -5.0, 7.0])

    def scatter(m, x, i):
        lx = _lax(m)
        dn = lx.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
        return lx.scatter_add(x, i, m.ones(4, np.float32), dn, mode="drop")

    got = check(scatter, x, i)
    np.testing.assert_array_equal(got, x + np.array([0, 1, 0, 0, 0, 0, 0, 1], np.float32))

    def clipped(m, x, i):
        lx = _lax(m)
        dn = lx.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
        return lx.scatter_add(x, i, m.ones(4, np.float32), dn, mode="clip")

    got = check(clipped, x, i)
    np.testing.assert_array_equal(got, x + np.array([0, 1, 0, 0, 0, 0, 0, 3], np.float32))


@pytest.mark.parametrize("op", ["min", "max"])
def test_complex_min_max_is_lexicographic(op):
    """Complex scatter-min/max order by (real, imag), as NumPy and jax do (XLA's own min/max do not)."""
    x = np.array([0 + 2j, 1 + 0j, 3 + 1j, 1 + 5j], np.complex64)
    u = np.array([0 + 0j, 1 - 2j, 1 + 0j, 1 + 5j, 3 + 2j, 0 + 3j], np.complex64)
    i = np.array([0, 1, 2, 3, 2, 0], np.int32)
    got = check(lambda m, x, i, u: getattr(x.at[i], op)(u), x, i, u)
    want = x.copy()
    for k, v in zip(i, u):
        a, b = want[k], v
        less = (a.real, a.imag) < (b.real, b.imag)
        want[k] = (a if less else b) if op == "min" else (b if less else a)
    np.testing.assert_array_equal(got, want)


def test_empty_gather_and_scatter_under_vmap_of_size_zero_lower_as_in_jax():
    """A batching dimension of size 0 used to give invalid StableHLO (a slice size of 1 on it)."""
    import ftrans

    x, i, u = np.zeros((0, 5), np.float32), np.zeros((0,), np.int32), np.zeros((0,), np.float32)
    for f in (lambda a, j: a[j], lambda a, j, v: a.at[j].add(v)):
        args = (x, i) if f.__code__.co_argcount == 2 else (x, i, u)
        got = ftrans.jit(ftrans.vmap(f))(*args)
        want = jax.jit(jax.vmap(f))(*args)
        assert got.shape == want.shape and got.dtype == want.dtype
    a = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(
        np.asarray(ftrans.jit(lambda a, j, v: a.at[j].set(v))(a, np.zeros((0,), np.int32), np.zeros((0, 4), np.float32))), a)
    assert ftrans.jit(lambda a, j: a[j])(a, np.zeros((0,), np.int32)).shape == (0, 4)
