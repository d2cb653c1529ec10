"""``custom_gradient`` and ``closure_convert`` against jax's: values, gradients, vmap, jit."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.errors import FtransTypeError


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def both(build):
    return build(ftrans, fjnp), build(jax, jjnp)


def _square_with_scaled_grad(J, np_):
    @J.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * x,)   # a deliberately "wrong" gradient: x instead of 2x
    return f


def _sin_with_exp_grad(J, np_):
    @J.custom_gradient
    def f(x):
        e = np_.exp(x)                      # an intermediate the VJP closes over (a residual)
        return np_.sin(x), lambda g: g * e  # a bare cotangent for a single argument
    return f


def _two_args(J, np_):
    @J.custom_gradient
    def f(x, y):
        z = x * y
        return np_.tanh(z), lambda g: (g * y * 3.0, g * x + z)
    return f


def _pytree_io(J, np_):
    @J.custom_gradient
    def f(p):
        a, b = p["a"], p["b"]
        out = (a * b, np_.sum(a))
        return out, lambda g: ({"a": g[0] * 2.0 + g[1], "b": np_.sum(g[0] * a)},)
    return f


@pytest.mark.parametrize("build", [_square_with_scaled_grad, _sin_with_exp_grad])
def test_scalar_value_grad_jit_vmap(build):
    ff, jf = both(build)
    x = np.float32(0.7)
    close(ff(x), jf(x))
    close(ftrans.grad(ff)(x), jax.grad(jf)(x))
    close(ftrans.jit(ftrans.grad(ff))(x), jax.jit(jax.grad(jf))(x))
    xs = np.linspace(-1, 1, 5).astype(np.float32)
    close(ftrans.vmap(ftrans.grad(ff))(xs), jax.vmap(jax.grad(jf))(xs))
    close(ftrans.grad(ftrans.jit(ff))(x), jax.grad(jax.jit(jf))(x))
    # vjp of the batched function
    fo, fv = ftrans.vjp(ftrans.vmap(ff), xs)
    jo, jv = jax.vjp(jax.vmap(jf), xs)
    close(fo, jo)
    close(fv(np.ones(5, np.float32))[0], jv(np.ones(5, np.float32))[0])


def test_custom_gradient_overrides_true_gradient():
    ff, _ = both(_square_with_scaled_grad)
    assert float(ftrans.grad(ff)(3.0)) == pytest.approx(3.0)  # 2x would be 6


def test_two_arguments():
    ff, jf = both(_two_args)
    x, y = np.float32(0.3), np.float32(-1.2)
    for fg, jg in [(ftrans.grad(ff, argnums=(0, 1)), jax.grad(jf, argnums=(0, 1))),
                   (ftrans.jit(ftrans.grad(ff, argnums=(0, 1))), jax.jit(jax.grad(jf, argnums=(0, 1))))]:
        a, b = fg(x, y), jg(x, y)
        close(a[0], b[0])
        close(a[1], b[1])


def test_pytree_arguments_and_outputs():
    ff, jf = both(_pytree_io)
    p = {"a": np.arange(3, dtype=np.float32), "b": np.float32(2.0)}

    def loss(f, np_):
        return lambda p: np_.sum(f(p)[0]) + 3.0 * f(p)[1]

    gf = ftrans.grad(loss(ff, fjnp))(p)
    gj = jax.grad(loss(jf, jjnp))(p)
    close(gf["a"], gj["a"])
    close(gf["b"], gj["b"])
    gf = ftrans.jit(ftrans.grad(loss(ff, fjnp)))(p)
    close(gf["a"], gj["a"])


def test_under_jvp_is_an_error_like_jax():
    ff, jf = both(_sin_with_exp_grad)
    with pytest.raises(TypeError):
        jax.jvp(jf, (0.5,), (1.0,))
    with pytest.raises(TypeError):
        ftrans.jvp(ff, (0.5,), (1.0,))


def test_not_a_pair_is_a_type_error():
    @ftrans.custom_gradient
    def f(x):
        return x * 2

    with pytest.raises(FtransTypeError, match="pair"):
        ftrans.grad(f)(1.0)


def test_in_custom_derivatives_module():
    assert ftrans.custom_derivatives.custom_gradient is ftrans.custom_gradient
    assert ftrans.custom_derivatives.closure_convert is ftrans.closure_convert


# ---------------------------------------------------------------- closure_convert


def _make_minimize(J, np_):
    """JAX's documented closure_convert use: a custom_vjp higher-order function whose objective closes
    over a differentiated value."""

    def minimize(objective, x0):
        converted, consts = J.closure_convert(objective, x0)
        return _fixed(converted, x0, *consts)

    @partial(J.custom_vjp, nondiff_argnums=(0,))
    def _fixed(objective, x0, *args):
        # a "solver": one Newton-like step from x0 (enough to exercise the rule)
        return x0 - J.grad(objective)(x0, *args)

    def fwd(objective, x0, *args):
        y = _fixed(objective, x0, *args)
        return y, (x0, args)

    def bwd(objective, res, g):
        x0, args = res
        _, vjp_args = J.vjp(lambda *a: x0 - J.grad(objective)(x0, *a), *args)
        return (np_.zeros_like(x0), *vjp_args(g))

    _fixed.defvjp(fwd, bwd)
    return minimize


def test_closure_convert_hoists_differentiated_values():
    fm, jm = both(_make_minimize)

    def outer(minimize, np_):
        def h(c):
            return minimize(lambda x: np_.sum((x - c) ** 2 * c), np_.ones(3, np_.float32))
        return h

    c = np.array([0.5, 1.5, 2.0], np.float32)
    close(outer(fm, fjnp)(c), outer(jm, jjnp)(c))
    lf = lambda c: fjnp.sum(outer(fm, fjnp)(c) ** 2)  # noqa: E731
    lj = lambda c: jjnp.sum(outer(jm, jjnp)(c) ** 2)  # noqa: E731
    close(ftrans.grad(lf)(c), jax.grad(lj)(c), tol=1e-4)
    close(ftrans.jit(ftrans.grad(lf))(c), jax.jit(jax.grad(lj))(c), tol=1e-4)
    cs = np.stack([c, c + 1])
    close(ftrans.vmap(ftrans.grad(lf))(cs), jax.vmap(jax.grad(lj))(cs), tol=1e-4)


def test_closure_convert_consts_match_jax():
    def consts_of(J, np_, c):
        f = lambda x: np_.sin(x) * c + np.float32(2.0)  # noqa: E731
        conv, consts = J.closure_convert(f, np.float32(1.0))
        return conv, consts

    # outside any transform nothing is perturbed: nothing hoisted
    fconv, fconsts = consts_of(ftrans, fjnp, np.float32(3.0))
    jconv, jconsts = consts_of(jax, jjnp, np.float32(3.0))
    assert len(fconsts) == len(jconsts) == 0
    close(fconv(np.float32(0.4)), jconv(np.float32(0.4)))

    # under grad the closed-over tracer is hoisted; the converted function reproduces f
    def count(J, np_):
        box = []

        def g(c):
            conv, consts = consts_of(J, np_, c)
            box.append(len(consts))
            return conv(np.float32(0.4), *consts)
        return g, box

    fg, fbox = count(ftrans, fjnp)
    jg, jbox = count(jax, jjnp)
    close(ftrans.grad(fg)(np.float32(3.0)), jax.grad(jg)(np.float32(3.0)))
    assert fbox == jbox == [1]


def test_closure_convert_integer_closure_not_hoisted():
    def g(J, np_):
        def inner(c, k):
            conv, consts = J.closure_convert(lambda x: x * c + k, np.float32(1.0))
            return conv(np.float32(2.0), *consts), len(consts)
        return inner

    out = {}
    for name, J, np_ in [("f", ftrans, fjnp), ("j", jax, jjnp)]:
        out[name] = J.jit(lambda c, k, inner=g(J, np_): inner(c, k)[0])(np.float32(1.5), np.int32(3))
    close(out["f"], out["j"])
    box = []

    def count(c, k):
        conv, consts = ftrans.closure_convert(lambda x: x * c + k, np.float32(1.0))
        box.append(len(consts))
        return conv(np.float32(2.0), *consts)

    ftrans.jit(count)(np.float32(1.5), np.int32(3))
    assert box == [1]  # the float tracer, not the int one


def test_closure_convert_structure_mismatch():
    conv, _ = ftrans.closure_convert(lambda x: x[0] + x[1], (np.float32(1), np.float32(2)))
    with pytest.raises(TypeError, match="The inputs to the closure produced by closure_convert"):  # JAX's words
        conv(np.float32(1))
