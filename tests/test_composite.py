"""``lax.composite``: a ``composite`` equation lowered to ``stablehlo.composite``, compared with JAX's."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import UnexpectedTracerError

X4 = np.array([0.0, 0.5, 1.0, 2.0], np.float32)


def _tangent(lax):
    def f(x):
        return lax.composite(lambda y, **_: lax.sin(y) / lax.cos(y), "my.tangent", version=2)(
            x, dtype=np.dtype(np.float32), int=1, omit=None, str="bar", tensor=np.zeros((1, 2), np.float32),
            flag=True, ratio=0.5)
    return f


def _eqn(closed):
    (eqn,) = closed.eqns
    return eqn


def test_composite_values_jaxpr_and_op_match_jax():
    f, g = _tangent(flax), _tangent(jlax)
    np.testing.assert_allclose(np.asarray(f(X4)), np.asarray(g(X4)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(f)(X4)), np.asarray(jax.jit(g)(X4)), rtol=1e-6)
    ours, theirs = _eqn(ftrans.make_jaxpr(f)(X4)), _eqn(jax.make_jaxpr(g)(X4))
    assert ours.primitive.name == theirs.primitive.name == "composite"
    assert (ours.params["name"], ours.params["version"]) == (theirs.params["name"], theirs.params["version"])
    assert [k for k, *_ in ours.params["attributes"]] == [k for k, *_ in theirs.params["attributes"]]
    text = ftrans.jit(f).lower(X4).as_text()
    (op,) = [ln for ln in text.splitlines() if "stablehlo.composite" in ln]
    assert 'stablehlo.composite "my.tangent" %arg0 {' in op and "decomposition = @my.tangent" in op
    assert "version = 2 : i32" in op and "omit" not in op
    for attr in ("dtype = f32", "int = 1 : i64", 'str = "bar"', ": tensor<1x2xf32>", "flag = true", ": f64"):
        assert attr in op, attr
    assert "func.func private @my.tangent(%arg0: tensor<4xf32>) -> tensor<4xf32>" in text
    # the module compiles as JAX's does (XLA inlines the decomposition)
    assert "stablehlo.composite" in jax.jit(g).lower(X4).as_text()


def test_composite_pytrees_no_args_and_constants():
    def make(lax, jnp):
        ident = lax.composite(lambda *a: a, "my.ident")
        one = lax.composite(lambda: jnp.array(1.0, jnp.float32), "my.one")
        scaled = lax.composite(lambda d: {"s": jnp.round(d["x"] / np.array([0.5, 0.4, 0.3], np.float32))}, "my.c")
        return ident, one, scaled

    (fi, fo, fs), (ji, jo, js) = make(flax, fjnp), make(jlax, jjnp)
    args = (np.float32(1), np.float32(2), np.float32(3))
    assert [float(v) for v in ftrans.jit(fi)(*args)] == [float(v) for v in jax.jit(ji)(*args)]
    assert float(fo()) == float(jo()) == float(ftrans.jit(fo)())
    x = {"x": np.array([1.0, 2.0, 3.0], np.float32)}
    np.testing.assert_array_equal(np.asarray(ftrans.jit(fs)(x)["s"]), np.asarray(js(x)["s"]))
    # the decomposition's constants lead the op's operands
    text = ftrans.jit(fs).lower(x).as_text()
    assert 'stablehlo.composite "my.c" %cst, %arg0' in text or 'stablehlo.composite "my.c" %arg0, %arg1' in text, text


def test_composite_has_no_derivative_or_batching_rule_as_in_jax():
    sq = flax.composite(lambda x: x ** 2, "my.square")
    jsq = jlax.composite(lambda x: x ** 2, "my.square")
    for ours, theirs in ((lambda: ftrans.grad(sq)(1.0), lambda: jax.grad(jsq)(1.0)),
                         (lambda: ftrans.jvp(sq, (1.0,), (2.0,)), lambda: jax.jvp(jsq, (1.0,), (2.0,)))):
        with pytest.raises(ValueError, match="JVP rule for composite not implemented") as e:
            ours()
        assert "test_composite.py" in str(e.value)
        with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
            theirs()
    with pytest.raises(NotImplementedError, match="composite"):
        ftrans.vmap(sq)(X4)
    with pytest.raises(NotImplementedError, match="composite"):
        jax.vmap(jsq)(X4)
    # a composite that takes no tangent is fine under grad (its value is a constant there)
    assert float(ftrans.grad(lambda x: x * sq(2.0))(1.0)) == float(jax.grad(lambda x: x * jsq(2.0))(1.0))


def test_composite_rejects_traced_attributes_and_closed_over_tracers():
    def closes(x, scale):
        return flax.composite(lambda y: fjnp.round(y / scale), "my.consts")(x)

    s = fjnp.array([0.5, 0.4, 0.3])
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(closes(x, s)), np.round(x / np.asarray(s)))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(partial(closes, scale=s))(x)), np.round(x / np.asarray(s)))
    with pytest.raises(UnexpectedTracerError, match="as a constant in the decomposition"):
        ftrans.jit(closes)(x, s)
    attr = flax.composite(lambda y, **_: y, "my.attr")
    with pytest.raises(UnexpectedTracerError, match="use numpy arrays instead"):
        ftrans.jit(lambda y: attr(y, t=fjnp.zeros(2)))(x)
