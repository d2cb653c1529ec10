"""Instances of subclasses of Python's int/float/complex (an ``enum.IntEnum`` member, a ``float``
subclass) are the builtin scalar they extend, weakly typed, everywhere a Python scalar is accepted,
as in JAX (jax-ml/jax#6129: its type handlers walk the class's MRO). Differential against jax."""

import enum

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp


class Color(enum.IntEnum):
    RED = 1
    BLUE = 3


class MyFloat(float):
    pass


class MyInt(int):
    pass


class MyComplex(complex):
    pass


VALUES = [Color.BLUE, MyFloat(2.5), MyInt(3), MyComplex(1 + 2j)]


def _cases(lib, jnp_):
    return {
        "asarray": lambda v: jnp_.asarray(v),
        "array": lambda v: jnp_.array(v),
        "array_seq": lambda v: jnp_.array([v, v]),
        "jit_out": lambda v: lib.jit(lambda: v)(),
        "jit_arg": lambda v: lib.jit(lambda x: x)(v),
        "add": lambda v: jnp_.add(v, 1),
        "lax_add": lambda v: lib.lax.add(v, v),
        "device_put": lambda v: lib.device_put(v),
        "mul_int8": lambda v: jnp_.ones(2, "int8") * v,
        "jit_mul_int8": lambda v: lib.jit(lambda y: y * v)(jnp_.ones(2, "int8")),
        "vmap_const": lambda v: lib.vmap(lambda a: a * v)(jnp_.ones(2, "int8")),
        "sin": lambda v: jnp_.sin(v),
        "where": lambda v: jnp_.where(True, v, 0),
        "full": lambda v: jnp_.full(2, v),
        "eval_shape": lambda v: lib.eval_shape(lambda a: a, v),
    }


@pytest.mark.parametrize("v", VALUES, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("case", sorted(_cases(jax, jjnp)))
def test_scalar_subclass_matches_jax(v, case):
    want = _cases(jax, jjnp)[case](v)
    got = _cases(ftrans, jnp)[case](v)
    assert got.shape == want.shape
    assert np.dtype(got.dtype) == np.dtype(want.dtype)
    assert got.weak_type == want.weak_type
    if case != "eval_shape":
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_intenum_constant_in_pmap_and_jaxpr():
    # jax-ml/jax#6129: an IntEnum returned from a pmapped function is a constant of the body.
    out = ftrans.pmap(lambda _: Color.RED)(jnp.arange(1))
    np.testing.assert_array_equal(np.asarray(out), [1])
    jaxpr = ftrans.make_jaxpr(lambda: jnp.sin(MyFloat(2.0)))()
    assert "sin 2.0:f32[]" in str(jaxpr)  # a weakly typed literal, as JAX prints it
    assert jaxpr.jaxpr.eqns[0].invars[0].aval.weak_type


def test_scalar_subclass_grad_and_control_flow():
    assert float(ftrans.grad(lambda a: a * 2.0)(MyFloat(2.0))) == float(jax.grad(lambda a: a * 2.0)(MyFloat(2.0)))
    assert float(ftrans.lax.cond(Color.RED, lambda: 1.0, lambda: 2.0)) == 1.0
    assert int(ftrans.lax.fori_loop(0, Color.BLUE, lambda i, c: c + i, 0)) == 3
    c = ftrans.lax.scan(lambda c, _: (c + MyFloat(1.5), None), 0.0, None, length=2)[0]
    assert float(c) == 3.0
    assert float(jnp.arange(4.0)[Color.BLUE]) == 3.0


def test_numpy_scalars_are_not_weak():
    # np.float64 subclasses float, but a NumPy scalar keeps its own (strong) dtype.
    assert not jnp.asarray(np.float32(1.0)).weak_type
    assert not ftrans.device_put(np.float64(1.0)).weak_type
    assert ftrans.jit(lambda x: x)(np.float32(2.0)).weak_type is False


def test_isscalar_of_jax_array_protocol():
    class Wrapper:
        def __init__(self, v):
            self.v = v

        def __jax_array__(self):
            return self.v

    for val in (jnp.array(1), jnp.array([1, 2])):
        jval = jjnp.asarray(np.asarray(val))
        assert jnp.isscalar(Wrapper(val)) == jjnp.isscalar(Wrapper(jval))
    assert jnp.isscalar(Color.RED) and jnp.isscalar(MyFloat(1.0))


class _StandsForArray:
    """Not a pytree: stands for an array only through ``__jax_array__``."""

    def __init__(self, v):
        self.v = v

    def __jax_array__(self):
        return self.v


def _transform_calls(lib, a):
    return {
        "jit": lambda: lib.jit(lambda x: x)(a),
        "grad": lambda: lib.grad(lambda x: x.sum())(a),
        "vmap": lambda: lib.vmap(lambda x: x)(a),
        "device_put": lambda: lib.device_put(a),
        "eval_shape": lambda: lib.eval_shape(lambda x: x, a),
        "make_jaxpr": lambda: lib.make_jaxpr(lambda x: x)(a),
        "jvp": lambda: lib.jvp(lambda x: x, (a,), (a,)),
        "vjp": lambda: lib.vjp(lambda x: x, a),
        "linearize": lambda: lib.linearize(lambda x: x * 2, a),
        "hessian": lambda: lib.hessian(lambda x: (x ** 3).sum())(a),
        "checkpoint": lambda: lib.checkpoint(lambda x: x * 2)(a),
        "cond_operand": lambda: lib.lax.cond(True, lambda x: x, lambda x: x, a),
        "scan_xs": lambda: lib.lax.scan(lambda c, x: (c, x), 0.0, a),
    }


@pytest.mark.parametrize("name", sorted(_transform_calls(jax, None)))
def test_jax_array_object_as_transform_argument_is_a_value_error(name):
    # JAX: "Triggering __jax_array__() during abstractification is no longer supported" (ValueError).
    with pytest.raises(ValueError):
        _transform_calls(jax, _StandsForArray(jjnp.arange(4.0)))[name]()
    with pytest.raises(ValueError, match="__jax_array__"):
        _transform_calls(ftrans, _StandsForArray(jnp.arange(4.0)))[name]()


def test_jax_array_object_still_an_operand_and_convertible():
    a = _StandsForArray(jnp.arange(4.0))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda x: x)(jnp.asarray(a))), np.arange(4.0))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda y: y * _StandsForArray(y))(2.0)), 4.0)
    np.testing.assert_array_equal(np.asarray(jnp.sin(a)), np.sin(np.arange(4.0, dtype=np.float32)))
