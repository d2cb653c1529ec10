"""eval_shape corners JAX supports: a ShapeDtypeStruct passed to a jitted function while staging (a
value-less constant: shapes only), and the out_shardings of a jitted function on its eval_shape results."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.sharding import SingleDeviceSharding


def _nested(lib, np_):
    inner = lib.jit(lambda x: x + 1)
    return lambda: inner(lib.ShapeDtypeStruct((2, 3), np_.float32))


def test_shape_dtype_struct_into_a_nested_jit_under_eval_shape():
    ours = ftrans.eval_shape(_nested(ftrans, jnp))
    theirs = jax.eval_shape(_nested(jax, jjnp))
    assert (ours.shape, np.dtype(ours.dtype)) == (theirs.shape, np.dtype(theirs.dtype)) == ((2, 3), np.float32)
    jaxpr = ftrans.make_jaxpr(_nested(ftrans, jnp))()
    assert len(jaxpr.jaxpr.constvars) == 1 == len(jax.make_jaxpr(_nested(jax, jjnp))().jaxpr.constvars)


def test_shape_dtype_struct_has_no_value_to_run_or_lower():
    for call in (lambda: ftrans.jit(_nested(ftrans, jnp))(),
                 lambda: ftrans.jit(_nested(ftrans, jnp)).lower(),
                 lambda: ftrans.jit(lambda x: x + 1)(ftrans.ShapeDtypeStruct((), jnp.float32))):
        with pytest.raises(TypeError, match="ShapeDtypeStruct"):
            call()
    for call in (lambda: jax.jit(_nested(jax, jjnp))(), lambda: jax.jit(_nested(jax, jjnp)).lower()):
        with pytest.raises(TypeError):
            call()
    # as an argument of trace/lower it is what it is for: a stand-in
    out = ftrans.jit(lambda x: x + 1).lower(ftrans.ShapeDtypeStruct((4,), jnp.float32)).compile()(jnp.ones(4))
    np.testing.assert_array_equal(np.asarray(out), 2 * np.ones(4))


def test_eval_shape_carries_out_shardings():
    s = SingleDeviceSharding(ftrans.devices()[0])
    f = ftrans.jit(lambda x: x * 2, out_shardings=s)
    inp = np.arange(8)
    for out in (f.eval_shape(inp), ftrans.eval_shape(f, inp)):
        assert out.sharding == s and out.shape == (8,)
    mesh = ftrans.sharding.Mesh(ftrans.devices()[:1], ("x",))
    ns = ftrans.NamedSharding(mesh, ftrans.P("x"))
    a, b = ftrans.jit(lambda x: (x * 2, x), out_shardings=(ns, None)).eval_shape(inp)
    assert a.sharding == ns and b.sharding is None
    assert ftrans.jit(lambda x: x * 2).eval_shape(inp).sharding is None
    # jax does the same with its own shardings
    js = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    assert jax.jit(lambda x: x * 2, out_shardings=js).eval_shape(inp).sharding == js
