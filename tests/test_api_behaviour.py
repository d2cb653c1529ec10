"""Small user-visible behaviours of the public transforms, each checked against JAX.

Docstrings of transformed functions, ``_std_basis``, attributes tracers refuse,
``convert_element_type`` of big Python ints, ``linearize`` tangent checks and
``linear_transpose`` (integer functions, the transposed function as a pytree).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax


def _doc_fun(a, b):
    """Does things with stuff."""
    return a * b


def _nodoc(a):
    return a


@pytest.mark.parametrize("name", ["vmap", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian"])
@pytest.mark.parametrize("fun", [_doc_fun, _nodoc])
def test_transformed_function_docstrings_match_jax(name, fun):
    assert getattr(ftrans, name)(fun).__doc__ == getattr(jax, name)(fun).__doc__
    assert getattr(ftrans, name)(fun).__name__ == fun.__name__


def test_grad_docstring_names_tuple_argnums_like_jax():
    assert ftrans.grad(_doc_fun, argnums=[0, 1]).__doc__ == jax.grad(_doc_fun, argnums=(0, 1)).__doc__


def test_make_jaxpr_wrapper_name():
    def foo(x):
        return x

    mk = ftrans.make_jaxpr(foo)
    assert mk.__name__ == jax.make_jaxpr(foo).__name__ == "make_jaxpr(foo)"
    assert mk.__qualname__ == jax.make_jaxpr(foo).__qualname__


@pytest.mark.parametrize("tree", [
    np.zeros(3, np.float32),
    np.zeros((3, 3), np.float32),
    [0.0, (np.zeros(3, np.float32), np.zeros((3, 4), np.float32))],
    [0, np.zeros(2, np.int32)],
])
def test_std_basis_matches_jax(tree):
    from jax._src import api as jax_api

    got = ftrans._std_basis(tree)
    want = jax_api._std_basis(tree)
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree
    for g, w in zip(g_leaves, w_leaves):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_tracer_sharding_and_devices_are_refused_like_jax():
    seen = {}

    @ftrans.jit
    def f(x):
        seen["has"] = hasattr(x, "sharding")
        with pytest.raises(AttributeError, match="typeof"):
            x.sharding  # noqa: B018
        with pytest.raises(ftrans.errors.ConcretizationTypeError, match="devices"):
            x.devices()
        return x

    f(fjnp.arange(2.0))
    assert seen["has"] is False
    assert hasattr(fjnp.arange(2.0), "sharding")  # the concrete array keeps it


@pytest.mark.parametrize("value,dtype", [
    (2 ** 100, np.float32), (2 ** 100, np.complex64), (2 ** 100, np.bool_), (2 ** 63, np.float16),
    (2 ** 40, np.int32), (-1, np.uint8), (2 ** 31, np.uint32), (3, np.float32),
])
def test_convert_element_type_of_big_python_ints_matches_jax(value, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's overflow warning on the host cast (JAX's too)
        got = flax.convert_element_type(value, dtype)
        want = jax.lax.convert_element_type(value, dtype)
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_convert_element_type_of_an_int_no_integer_type_holds():
    with pytest.raises(OverflowError):
        jax.lax.convert_element_type(2 ** 100, np.int32)
    with pytest.raises(OverflowError, match=r"does not fit int32"):
        flax.convert_element_type(2 ** 100, np.int32)
    with pytest.raises(OverflowError):  # an arithmetic op still reads the int as int32, as in JAX
        fjnp.multiply(2 ** 100, 3.0)


def test_linearize_rejects_tangents_inconsistent_with_integer_primals():
    t = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    x = np.array([1, 2, 3], np.int32)
    for fun in (fjnp.sum, ftrans.jit(fjnp.sum)):
        _, f_jvp = ftrans.linearize(fun, x)
        with pytest.raises(ValueError, match="tangent values inconsistent with the original primal values"):
            f_jvp(t)
    _, j_jvp = jax.linearize(jjnp.sum, x)
    with pytest.raises(ValueError, match="tangent values inconsistent"):
        j_jvp(t)

    _, f_jvp = ftrans.linearize(lambda v: v, np.ones(2, np.int32))
    out = f_jvp(np.zeros(2, ftrans.dtypes.float0))  # the right tangent: float0 of the primal's shape
    assert out.dtype == ftrans.dtypes.float0 and out.shape == (2,)
    with pytest.raises(ValueError, match=r"tangent 0 has type i32\[2\].*must be float0\[2\]"):
        f_jvp(np.ones(2, np.int32))
    _, f_jvp = ftrans.linearize(lambda v: v, 1.0)
    with pytest.raises(ValueError, match=r"tangent 0 has type i32\[\] .*must be f32\[\]"):
        f_jvp(1)


def test_linear_transpose_of_an_integer_function_matches_jax():
    got = ftrans.linear_transpose(lambda x: 2 * x, 1)(3)
    want = jax.linear_transpose(lambda x: 2 * x, 1)(3)
    assert got[0].dtype == want[0].dtype == np.int32
    assert int(got[0]) == int(want[0]) == 6
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        jax.linear_transpose(lambda x: 2.0 * x, 1)
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        ftrans.linear_transpose(lambda x: 2.0 * x, 1)


def test_linear_transpose_result_is_a_pytree_through_jit():
    w = np.arange(6.0, dtype=np.float32).reshape(2, 3)

    @ftrans.jit(static_argnums=0)
    def transpose(f, x):
        return ftrans.linear_transpose(f, x)

    t = transpose(lambda x: 2.0 * x, 1.0)
    assert ftrans.jit(lambda f, x: f(x))(t, 3.0) == (6.0,)
    ft = ftrans.linear_transpose(lambda x: fjnp.asarray(w) @ x, np.ones(3, np.float32))
    jt = jax.linear_transpose(lambda x: jjnp.asarray(w) @ x, np.ones(3, np.float32))
    assert len(jax.tree_util.tree_leaves(ft)) >= 1  # its constant (w) is a leaf
    c = np.array([1.0, -2.0], np.float32)
    np.testing.assert_allclose(np.asarray(ftrans.jit(lambda t, c: t(c))(ft, c)[0]), np.asarray(jt(c)[0]))
