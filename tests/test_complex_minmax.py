"""Complex max/min reductions (reduce_max/min, jnp.max/min/nanmax with ``initial``, cummax/cummin,
reduce_window) against JAX: values ordered lexicographically (real part, then imaginary part), an empty
axis reducing to (-+inf, 0), and a NaN handled as JAX's compiled reduction handles it (a comparison with a
NaN is false, so the later value wins), eagerly and under jit alike."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.numpy as jnp
from ftrans import lax

NAN = np.nan


def _operand(with_nan: bool) -> np.ndarray:
    x = np.array([[1 + 2j, 1 + 1j, 3 - 1j, -2 + 0j],
                  [1 + 3j, 2 - 1j, 3 - 2j, -2 + 5j],
                  [0.5 + 9j, 2 - 3j, 3 - 1j, -3 + 0j]], np.complex64)
    if with_nan:
        x[0, 1] = NAN + 0j
        x[2, 3] = 1 + NAN * 1j
        x[1, 0] = NAN + NAN * 1j
    return x


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("with_nan", [False, True])
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_reduce_max_min_complex_matches_jax(name, axes, with_nan):
    x = _operand(with_nan)
    want = getattr(jlax, name)(x, axes)
    _same(getattr(lax, name)(x, axes), want)
    _same(ftrans.jit(lambda v: getattr(lax, name)(v, axes))(x), want)


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_reduce_max_min_complex_empty_axis_is_signed_inf(name):
    x = np.zeros((0, 3), np.complex64)
    want = getattr(jlax, name)(x, (0,))
    _same(getattr(lax, name)(x, (0,)), want)
    _same(ftrans.jit(lambda v: getattr(lax, name)(v, (0,)))(x), want)


@pytest.mark.parametrize("name", ["max", "min", "nanmax", "nanmin"])
@pytest.mark.parametrize("shape", [(0, 3), (2, 3)])
def test_jnp_max_min_complex_with_initial_matches_jax(name, shape):
    x = np.arange(np.prod(shape)).reshape(shape).astype(np.complex64) * (1 - 0.5j)
    f, g = getattr(jnp, name), getattr(jjnp, name)
    want = g(x, axis=0, initial=1 + 2j)
    _same(f(x, axis=0, initial=1 + 2j), want)
    _same(ftrans.jit(lambda v: f(v, axis=0, initial=1 + 2j))(x), want)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_complex_matches_jax(name, reverse):
    x = np.array([1 + 2j, 1 + 3j, 1 + 1j, 0.5 + 9j, 2 - 1j, 2 - 3j], np.complex64)
    want = getattr(jlax, name)(x, reverse=reverse)
    _same(getattr(lax, name)(x, reverse=reverse), want)
    _same(ftrans.jit(lambda v: getattr(lax, name)(v, reverse=reverse))(x), want)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_reduce_window_complex_matches_jax(kind, padding):
    x = np.array([1 + 2j, 1 + 3j, 1 + 1j, 0.5 + 9j, 2 - 1j, 2 - 3j], np.complex64)
    init = np.complex64(-np.inf if kind == "max" else np.inf)
    want = jlax.reduce_window(x, init, getattr(jlax, kind), (3,), (1,), padding)
    f = lambda v: lax.reduce_window(v, init, getattr(lax, kind), (3,), (1,), padding)  # noqa: E731
    _same(f(x), want)
    _same(ftrans.jit(f)(x), want)


def test_reduce_max_complex128_matches_jax():
    with jax.enable_x64(True), ftrans.enable_x64(True):
        x = _operand(True).astype(np.complex128)
        want = jlax.reduce_max(x, (0,))
        _same(lax.reduce_max(x, (0,)), want)
        _same(ftrans.jit(lambda v: lax.reduce_max(v, (0,)))(x), want)
