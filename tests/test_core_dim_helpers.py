"""JAX's public ``jax.core`` dimension helpers (``max_dim``, ``min_dim``, ``is_constant_dim``,
``is_constant_shape``) on ``ftrans.core``, against jax's, with integers and symbolic dimensions."""
import warnings

import jax
import jax.core
import numpy as np

import ftrans
import ftrans.core
import ftrans.numpy as fnp


def _jcore(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return getattr(jax.core, name)
        except AttributeError:  # jax 0.11 removed jax.core.is_constant_dim/is_constant_shape; ftrans keeps them
            from jax._src import core as jax_core

            return getattr(jax_core, name)


def test_helpers_on_integers_match_jax():
    for name in ("max_dim", "min_dim"):
        for a, b in [(3, 5), (5, 3), (0, 0)]:
            assert getattr(ftrans.core, name)(a, b) == _jcore(name)(a, b)
    for d in (0, 3, np.int64(4)):
        assert ftrans.core.is_constant_dim(d) == _jcore("is_constant_dim")(d)
    for s in ((), (1, 2)):
        assert ftrans.core.is_constant_shape(s) == _jcore("is_constant_shape")(s)


def test_helpers_on_symbolic_dims_match_jax():
    (jb,) = jax.export.symbolic_shape("b")
    (fb,) = ftrans.export.symbolic_shape("b")
    assert str(ftrans.core.max_dim(fb - 5, 0)) == str(_jcore("max_dim")(jb - 5, 0))
    assert str(ftrans.core.min_dim(fb, 3)) == str(_jcore("min_dim")(jb, 3))
    assert ftrans.core.max_dim(fb + 1, fb) == fb + 1  # decided now, as in JAX
    assert ftrans.core.is_constant_dim(fb) is _jcore("is_constant_dim")(jb) is False
    assert ftrans.core.is_constant_shape((fb, 2)) is _jcore("is_constant_shape")((jb, 2)) is False


def test_max_dim_in_an_exported_output_shape():
    """A function whose output shape uses ``core.max_dim`` exports and calls (JAX's export_test)."""
    def f(x):
        b = x.shape[0]
        return fnp.ones((b + b, ftrans.core.max_dim(b - 5, 0)), dtype=x.dtype)

    exp = ftrans.export.export(ftrans.jit(f))(
        ftrans.ShapeDtypeStruct(ftrans.export.symbolic_shape("b"), np.float32))
    for n in (3, 7):
        assert exp.call(np.zeros(n, np.float32)).shape == (2 * n, max(n - 5, 0))


def test_dimension_as_value_in_an_exported_program_matches_jax():
    """``core.dimension_as_value`` (and a symbolic dimension's ``dimension_as_value()``, which JAX's calls)
    turns ``2*b`` into a value of the program."""
    from jax._src import core as jax_core

    spec_j = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b"), np.float32)
    spec_f = ftrans.ShapeDtypeStruct(ftrans.export.symbolic_shape("b"), np.float32)
    exp_j = jax.export.export(jax.jit(lambda x: jax_core.dimension_as_value(2 * x.shape[0]) + x))(spec_j)
    exp_f = ftrans.export.export(ftrans.jit(lambda x: ftrans.core.dimension_as_value(2 * x.shape[0]) + x))(spec_f)
    exp_f2 = ftrans.export.export(ftrans.jit(lambda x: (2 * x.shape[0]).dimension_as_value() + x))(spec_f)
    for n in (1, 4):
        x = np.arange(n, dtype=np.float32)
        want = np.asarray(exp_j.call(x))
        np.testing.assert_array_equal(np.asarray(exp_f.call(x)), want)
        np.testing.assert_array_equal(np.asarray(exp_f2.call(x)), want)
    assert ftrans.core.dimension_as_value(3) == jax_core.dimension_as_value(3) == 3
