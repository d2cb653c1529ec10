"""Behaviours found by running scientific-computing JAX programs under ftrans (imports swapped), each
checked against jax on the same inputs."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import jax.scipy.special as jsp
import numpy as np
import pytest

import ftrans
import ftrans.nn  # noqa: F401
import ftrans.numpy  # noqa: F401
from ftrans.scipy import special as fsp


def close(ours, theirs, rtol=2e-5, atol=1e-6):
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ftrans's own custom-JVP special functions differentiated at Python-scalar arguments: their rules see
# arrays (the Python scalar a jvp/grad was given must not reach them as a float).
@pytest.mark.parametrize("name,args,argnum", [
    ("betainc", (2.0, 3.0, 0.4), 2),
    ("gammainc", (1.3, 2.0), 1),
    ("gammaincc", (1.3, 2.0), 1),
    ("logit", (0.3,), 0),
    ("log_ndtr", (1.3,), 0),
    ("erfcx", (1.3,), 0),
    ("expi", (1.3,), 0),
    ("exp1", (1.3,), 0),
    ("hyp1f1", (1.3, 2.0, 0.5), 2),
])
def test_special_grad_at_python_scalars(name, args, argnum):
    ours = ftrans.grad(getattr(fsp, name), argnums=argnum)(*args)
    theirs = jax.grad(getattr(jsp, name), argnums=argnum)(*args)
    close(ours, theirs, rtol=2e-5)
    ours = ftrans.jvp(lambda v: getattr(fsp, name)(*args[:argnum], v, *args[argnum + 1:]), (args[argnum],), (1.0,))
    theirs = jax.jvp(lambda v: getattr(jsp, name)(*args[:argnum], v, *args[argnum + 1:]), (args[argnum],), (1.0,))
    close(ours[1], theirs[1], rtol=2e-5)


def test_fresnel_grad_at_python_scalar():
    ours = ftrans.grad(lambda x: fsp.fresnel(x)[0])(1.3)
    theirs = jax.grad(lambda x: jsp.fresnel(x)[0])(1.3)
    close(ours, theirs, rtol=2e-5)


# The weak type of a gradient taken at Python scalars follows JAX's rules: max/min/where/clip/relu/abs/
# hypot/rem keep the cotangent weak (select_n's transpose pads with zeros of the cotangent's type, the
# tie factors of max/min are weak like their operand); pow's d/dx is strong (JAX converts both operands
# to the result dtype first). `print(jax.grad(f)(x))` shows `weak_type=True` exactly when JAX does.
_WEAK_CASES = {
    "abs": lambda x: abs(x),
    "clip": lambda x: ftrans.numpy.clip(x, 0.0, 1.0),
    "relu": lambda x: ftrans.nn.relu(x),
    "where": lambda x: ftrans.numpy.where(x > 0, x, 0.0),
    "maximum": lambda x: ftrans.numpy.maximum(x, 0.0),
    "minimum": lambda x: ftrans.numpy.minimum(x, 3.0),
    "fmax": lambda x: ftrans.numpy.fmax(x, 1.0),
    "hypot": lambda x: ftrans.numpy.hypot(x, 1.0),
    "rem": lambda x: x % 1.0,
    "select": lambda x: ftrans.lax.select(x > 1, x, 2 * x),
    "sinc": lambda x: ftrans.numpy.sinc(x),
}


def _jax_version(name):
    import jax.nn as jnn
    return {
        "abs": lambda x: abs(x),
        "clip": lambda x: jjnp.clip(x, 0.0, 1.0),
        "relu": jnn.relu,
        "where": lambda x: jjnp.where(x > 0, x, 0.0),
        "maximum": lambda x: jjnp.maximum(x, 0.0),
        "minimum": lambda x: jjnp.minimum(x, 3.0),
        "fmax": lambda x: jjnp.fmax(x, 1.0),
        "hypot": lambda x: jjnp.hypot(x, 1.0),
        "rem": lambda x: x % 1.0,
        "select": lambda x: jax.lax.select(x > 1, x, 2 * x),
        "sinc": jjnp.sinc,
    }[name]


# jax 0.11 rewrote max/min's JVP with strongly typed tie factors, so there the gradients of maximum, minimum,
# clip and hypot at Python scalars are strong; ftrans keeps jax 0.10's weak ones (docs/differences.md).
_MAX_MIN_WEAK = {"clip", "hypot", "maximum", "minimum"}


@pytest.mark.parametrize("name", sorted(_WEAK_CASES))
def test_grad_weak_type_at_python_scalar(name):
    ours, theirs = _WEAK_CASES[name], _jax_version(name)
    g, gj = ftrans.grad(ours)(1.5), jax.grad(theirs)(1.5)
    close(g, gj)
    want = True if name in _MAX_MIN_WEAK else gj.weak_type  # jax 0.10's weak type (see _MAX_MIN_WEAK)
    assert g.weak_type == want, (g.weak_type, gj.weak_type)
    h, hj = ftrans.hessian(ours)(1.5), jax.hessian(theirs)(1.5)
    assert h.weak_type == hj.weak_type
    # a strong argument gives a strong gradient in both
    assert ftrans.grad(ours)(np.float32(1.5)).weak_type is False


@pytest.mark.parametrize("f,fj", [
    (lambda x, y: x ** y, lambda x, y: x ** y),
    (lambda x, y: ftrans.numpy.power(x, y), lambda x, y: jjnp.power(x, y)),
    pytest.param(lambda x, y: ftrans.numpy.maximum(x, y), lambda x, y: jjnp.maximum(x, y), id="maximum"),
    (lambda x, y: ftrans.numpy.where(x > y, x, y), lambda x, y: jjnp.where(x > y, x, y)),
    pytest.param(lambda x, y: ftrans.numpy.hypot(x, y), lambda x, y: jjnp.hypot(x, y), id="hypot"),
])
@pytest.mark.parametrize("args", [(2.0, 3.0), (np.float32(2.0), 3.0), (2.0, np.float32(3.0))])
def test_binary_grad_weak_types(f, fj, args, request):
    g = ftrans.grad(f, argnums=(0, 1))(*args)
    gj = jax.grad(fj, argnums=(0, 1))(*args)
    # jax 0.10's weak types at two Python scalars for maximum and hypot (see _MAX_MIN_WEAK)
    max_min = any(k in request.node.callspec.id for k in ("maximum", "hypot"))
    for a, b in zip(g, gj):
        close(a, b)
        want = True if max_min and all(isinstance(v, float) for v in args) else b.weak_type
        assert a.weak_type == want, ([x.weak_type for x in g], [x.weak_type for x in gj])


@pytest.mark.parametrize("fn", ["sum", "mean", "max", "cumsum", "sort", "expand_dims"])
def test_float_axis_is_a_type_error(fn):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError):
        getattr(jjnp, fn)(x, axis=1.0)
    with pytest.raises(TypeError, match="axis must be an integer"):
        getattr(ftrans.numpy, fn)(x, axis=1.0)
    close(getattr(ftrans.numpy, fn)(x, axis=np.int64(1)), getattr(jjnp, fn)(x, axis=np.int64(1)))
