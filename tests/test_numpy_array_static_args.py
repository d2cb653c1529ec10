"""Axes, shapes and repeat counts given as NumPy or ftrans arrays, as JAX reads them (its
``ensure_index_tuple``: an int, or any sequence of ints, an array of them included)."""

from __future__ import annotations

import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.nn as fnn
import ftrans.numpy as fjnp

_X = np.arange(6.0, dtype=np.float32).reshape(2, 3)
_V = np.arange(4.0, dtype=np.float32)

CASES = {
    "tile_np": lambda m, a: m.tile(_V, a.array([2])),
    "tile_0d": lambda m, a: m.tile(_V, a.array(2)),
    "tile_range": lambda m, a: m.tile(_V, range(1, 3)),
    "broadcast_to": lambda m, a: m.broadcast_to(_V, a.array([2, 4])),
    "roll_axis": lambda m, a: m.roll(_X, a.array([1]), axis=a.array([0])),
    "expand_dims": lambda m, a: m.expand_dims(_V, a.array([0, 2])),
    "moveaxis": lambda m, a: m.moveaxis(_X, a.array([0]), a.array([1])),
    "squeeze": lambda m, a: m.squeeze(_X[None], axis=a.array([0])),
    "flip": lambda m, a: m.flip(_X, a.array([0, 1])),
}


@pytest.mark.parametrize("kind", ["numpy", "ftrans"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_array_valued_static_arguments_match_jax(name, kind):
    f = CASES[name]
    got = f(fjnp, np if kind == "numpy" else fjnp)
    want = f(jjnp, np if kind == "numpy" else jjnp)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_broadcast_shapes_of_an_array_shape():
    assert fjnp.broadcast_shapes(np.array([2, 1]), (1, 3)) == (2, 3)


@pytest.mark.parametrize("fn", [lambda x: fjnp.flip(x, x.astype(int)[:1]),
                                lambda x: fjnp.roll(x, 1, axis=x.astype(int)[:1]),
                                lambda x: fjnp.tile(x, x.astype(int)[:1])])
def test_a_traced_array_is_refused_as_not_static(fn):
    with pytest.raises(ftrans.errors.ConcretizationTypeError, match="concrete"):
        ftrans.jit(fn)(fjnp.zeros(3))


@pytest.mark.parametrize("name", ["hard_sigmoid", "sparse_sigmoid"])
def test_nn_functions_convert_a_numpy_argument_first(name):
    """``x + 3.0`` on a raw NumPy int array would be NumPy's float64 arithmetic: the result then came back
    strongly typed, where JAX's (a jitted function) is a weakly typed float32."""
    import jax

    e = np.arange(-4, 5, dtype=np.int32)
    got, want = getattr(fnn, name)(e), getattr(jax.nn, name)(e)
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-7)
