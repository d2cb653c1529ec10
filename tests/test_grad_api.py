"""The public reverse-mode API (``grad``, ``value_and_grad``, ``vjp``, ``linearize``, ``linear_transpose``,
``jacfwd``, ``jacrev``, ``hessian``) against jax's on the same inputs, its composition with ``jit`` and
with itself, the printed backward programs, ``check_grads`` on composite programs, and the errors.

Programs are written once against a numpy-like module ``np_`` and instantiated for ftrans and for jax,
so the oracle computes exactly the same function.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.test_util import check_grads

RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float32, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(dtype)


def close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def tree_close(a, b, tol=1e-5):
    """Same tree structure (ftrans and jax arrays are both leaves), shapes, dtypes and values."""
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        close(x, y, tol)


def both(make):
    """``make(np_)`` instantiated for ftrans and for jax."""
    return make(fjnp), make(jjnp)


def identity(f):
    return f


WRAPS = [pytest.param(identity, id="eager"), pytest.param(ftrans.jit, id="jit")]

_ORACLES: dict = {}


def oracle(key, make):
    """``jax.jit(make())``, built once per ``key``: the eager and jit variants of a test share jax's compiled
    program (a new ``jax.jit`` of a new function compiles again)."""
    if key not in _ORACLES:
        _ORACLES[key] = jax.jit(make())
    return _ORACLES[key]


@pytest.fixture
def x64():
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", True)
    yield
    ftrans.config.update("enable_x64", before)


# ----------------------------------------------------------------------------
# grad and value_and_grad: argnums, has_aux, pytrees, allow_int, holomorphic


def _three(np_):
    def f(x, y, z):
        return np_.sum(np_.sin(x) * y) + np_.sum(z ** 2) * np_.sum(x)

    return f


X3, Y3, Z3 = rand(3), rand(3), rand(2)


@pytest.mark.parametrize("argnums", [0, 1, 2, -1, -3, (0,), (0, 2), (2, 0), (-1, 1), (0, 1, 2)])
@pytest.mark.parametrize("wrap", WRAPS)
def test_grad_argnums(argnums, wrap):
    ff, jf = both(_three)
    got = wrap(ftrans.grad(ff, argnums=argnums))(X3, Y3, Z3)
    tree_close(got, oracle(("grad_argnums", argnums), lambda: jax.grad(jf, argnums=argnums))(X3, Y3, Z3))
    assert isinstance(got, tuple) == isinstance(argnums, tuple)


@pytest.mark.parametrize("argnums", [1, (0, 2)])
def test_value_and_grad(argnums):
    ff, jf = both(_three)
    (v, g), (jv, jg) = (ftrans.value_and_grad(ff, argnums)(X3, Y3, Z3),
                        jax.jit(jax.value_and_grad(jf, argnums))(X3, Y3, Z3))
    close(v, jv)
    tree_close(g, jg)


def _aux(np_):
    def f(x, y):
        loss = np_.sum(np_.tanh(x) * y)
        return loss, {"loss": loss, "h": (np_.tanh(x), 3), "n": "text"}

    return f


def test_grad_and_value_and_grad_has_aux():
    ff, jf = both(_aux)
    g, aux = ftrans.grad(ff, argnums=(0, 1), has_aux=True)(X3, Y3)

    def jax_side(x, y):  # one jitted program; the non-array parts of the aux stay inside
        jg, jaux = jax.grad(jf, argnums=(0, 1), has_aux=True)(x, y)
        (jv, _), jg2 = jax.value_and_grad(jf, has_aux=True)(x, y)
        return jg, jaux["loss"], jaux["h"][0], jv, jg2

    jg, jloss, jh, jv, jg2 = jax.jit(jax_side)(X3, Y3)
    tree_close(g, jg)
    assert aux["n"] == "text" and aux["h"][1] == 3
    close(aux["loss"], jloss)
    close(aux["h"][0], jh)
    (v, aux2), g2 = ftrans.value_and_grad(ff, has_aux=True)(X3, Y3)
    close(v, jv)
    close(aux2["loss"], v)
    tree_close(g2, jg2)


def _pytree_loss(np_):
    def loss(params, batch):
        h = np_.tanh(batch["x"] @ params["w"] + params["b"][0])
        extra = params["b"][1]
        return np_.sum(h * h) + np_.sum(extra["s"] ** 3) + params["scale"] * np_.mean(batch["y"] * h)

    return loss


PARAMS = {"w": rand(4, 3), "b": (rand(3), {"s": rand(2, 2)}), "scale": np.float32(0.7)}
BATCH = {"x": rand(5, 4), "y": rand(5, 3)}


@pytest.mark.parametrize("wrap", WRAPS)
def test_grad_pytree_arguments(wrap):
    ff, jf = both(_pytree_loss)
    got = wrap(ftrans.grad(ff))(PARAMS, BATCH)
    want, want_both = oracle("pytree_loss", lambda: lambda p, b: (jax.grad(jf)(p, b), jax.grad(jf, argnums=(0, 1))(p, b)))(
        PARAMS, BATCH)
    tree_close(got, want, tol=1e-4)
    assert set(got) == {"w", "b", "scale"} and isinstance(got["b"], tuple)
    both_args = ftrans.grad(ff, argnums=(0, 1))(PARAMS, BATCH)
    tree_close(both_args, want_both, tol=1e-4)


def test_grad_list_and_nested_tuple_arguments():
    def make(np_):
        return lambda xs, t: sum(np_.sum(np_.exp(x)) for x in xs) * np_.sum(t[0] * t[1][0])

    ff, jf = both(make)
    xs, t = [rand(2), rand(3)], (rand(2), (rand(2),))
    got = ftrans.grad(ff, argnums=(0, 1))(xs, t)
    tree_close(got, jax.jit(jax.grad(jf, argnums=(0, 1)))(xs, t), tol=1e-4)
    assert isinstance(got[0], list)


def test_grad_allow_int_gives_float0():
    def make(np_):
        return lambda x, i, b: np_.sum(x * i) * np_.where(b, 2.0, 1.0)

    ff, jf = both(make)
    x, i = rand(3), np.arange(3, dtype=np.int32)
    gx, gi, gb = ftrans.grad(ff, argnums=(0, 1, 2), allow_int=True)(x, i, True)
    jx, ji, jb = jax.grad(jf, argnums=(0, 1, 2), allow_int=True)(x, i, True)
    close(gx, jx)
    for got, want in ((gi, ji), (gb, jb)):
        assert got.dtype == jax.dtypes.float0 == want.dtype
        assert np.shape(got) == np.shape(want)
    assert np.shape(gi) == (3,) and np.shape(gb) == ()


def test_grad_allow_int_has_aux_value_and_grad():
    def make(np_):
        return lambda i, x: (np_.sum(x ** 2) * 2.0, i)

    ff, _ = both(make)
    (v, aux), (gi, gx) = ftrans.value_and_grad(ff, (0, 1), has_aux=True, allow_int=True)(np.int32(4), X3)
    close(gx, 2.0 * 2.0 * X3)
    assert gi.dtype == jax.dtypes.float0 and int(aux) == 4
    close(v, 2.0 * np.sum(X3 ** 2))


@pytest.mark.parametrize("wrap", WRAPS)
def test_grad_holomorphic(wrap):
    def make(np_):
        return lambda z, w: np_.sum(np_.sin(z) * z ** 2 + np_.exp(w * z))

    ff, jf = both(make)
    z = (rand(3) + 1j * rand(3)).astype(np.complex64)
    w = (rand(3) + 1j * rand(3)).astype(np.complex64)
    got = wrap(ftrans.grad(ff, argnums=(0, 1), holomorphic=True))(z, w)
    want, want_h = oracle("holomorphic", lambda: lambda z, w: (jax.grad(jf, argnums=(0, 1), holomorphic=True)(z, w),
                                                                jax.hessian(lambda z: jf(z, w), holomorphic=True)(z)))(z, w)
    tree_close(got, want, tol=1e-4)
    h = ftrans.hessian(lambda z: ff(z, w), holomorphic=True)(z)
    close(h, want_h, tol=1e-4)


def test_grad_of_complex_intermediate_with_real_output():
    def make(np_):
        return lambda x: np_.sum(np_.abs(np_.exp(1j * x) * (x + 2j)) ** 2)

    ff, jf = both(make)
    close(ftrans.grad(ff)(X3), jax.jit(jax.grad(jf))(X3), tol=1e-4)


def test_grad_python_scalar_and_kwargs():
    ff = lambda x, y=2.0: x * y + x ** 3  # noqa: E731
    jf = lambda x, y=2.0: x * y + x ** 3  # noqa: E731
    close(ftrans.grad(ff)(1.5), jax.grad(jf)(1.5))
    close(ftrans.grad(ff)(1.5, y=4.0), jax.grad(jf)(1.5, y=4.0))
    assert np.asarray(ftrans.grad(ff)(1.5)).dtype == np.float32


# ----------------------------------------------------------------------------
# vjp, linearize, linear_transpose


def _multi_out(np_):
    def f(x, p):
        y = np_.sin(x) * p["a"]
        return {"y": y, "pair": (np_.sum(y * p["b"]), x[:2] * 3.0), "i": np_.argmax(x)}, {"x2": x * 2}

    return f


def test_vjp_has_aux_and_pytree_outputs():
    ff, jf = both(_multi_out)
    x, p = rand(4), {"a": rand(4), "b": rand(4)}
    out, pb, aux = ftrans.vjp(ff, x, p, has_aux=True)
    jct = {"y": rand(4), "pair": (np.float32(1.5), rand(2)), "i": np.zeros((), jax.dtypes.float0)}

    def jax_side(x, p, ct):
        jout, jpb, jaux = jax.vjp(jf, x, p, has_aux=True)
        return jout, jaux, jpb(ct)

    jout, jaux, want = jax.jit(jax_side)(x, p, jct)
    tree_close(out, jout)
    tree_close(aux, jaux)
    got = pb(jct)
    assert isinstance(got, tuple) and len(got) == 2
    tree_close(got, want)


@pytest.mark.parametrize("wrap", WRAPS)
def test_vjp_pullback_is_reusable_and_linear(wrap):
    ff, jf = both(lambda np_: lambda x: np_.tanh(x) @ np_.ones((3, 2), np.float32))
    out, pb = ftrans.vjp(wrap(ff), X3)
    jpb = oracle("reusable_pullback", lambda: lambda c: jax.vjp(jf, X3)[1](c))
    c1, c2 = rand(2), rand(2)
    (a,), (b,), (ab,) = pb(c1), pb(c2), pb(c1 + 2 * c2)
    close(ab, np.asarray(a) + 2 * np.asarray(b), tol=1e-5)
    close(a, jpb(c1)[0])
    close(ftrans.jit(pb)(c2)[0], jpb(c2)[0])


def test_linearize_matches_jax_and_prints_only_the_linear_program():
    def make(np_):
        return lambda x, y: np_.sin(x) * y + np_.exp(y)

    ff, jf = both(make)
    out, f_jvp = ftrans.linearize(ff, X3, Y3)
    t1, t2 = rand(3), rand(3)
    jout, want = jax.jit(lambda t1, t2: (lambda o, lin: (o, lin(t1, t2)))(*jax.linearize(jf, X3, Y3)))(t1, t2)
    close(out, jout)
    close(f_jvp(t1, t2), want)
    close(ftrans.jit(f_jvp)(t1, t2), want)
    text = str(ftrans.make_jaxpr(f_jvp)(t1, t2))
    assert "mul" in text and "add" in text
    # sin, cos and exp were evaluated once, at linearization: the tangent program only scales and adds.
    for name in ("sin", "cos", "exp"):
        assert f"= {name} " not in text, text


def test_linearize_has_aux_and_pytrees():
    def make(np_):
        return lambda p: ({"u": np_.log1p(p["a"] ** 2), "v": p["b"] * p["a"][:2]}, "aux")

    ff, jf = both(make)
    p = {"a": rand(3), "b": rand(2)}
    t = {"a": rand(3), "b": rand(2)}
    out, f_jvp, aux = ftrans.linearize(ff, p, has_aux=True)
    jout, want = jax.jit(lambda p, t: (lambda o, lin, _: (o, lin(t)))(*jax.linearize(jf, p, has_aux=True)))(p, t)
    assert aux == "aux"
    tree_close(out, jout)
    tree_close(f_jvp(t), want)


def test_linear_transpose_matches_jax():
    def make(np_):
        return lambda x, y: {"a": 2.0 * x.T - y[0], "b": np_.sum(x, axis=0), "c": np_.cumsum(y, axis=1)}

    ff, jf = both(make)
    x, y = rand(3, 2), rand(2, 3)
    ft = ftrans.linear_transpose(ff, x, y)
    ct = {"a": rand(2, 3), "b": rand(2), "c": rand(2, 3)}
    got = ft(ct)
    tree_close(got, jax.jit(lambda c: jax.linear_transpose(jf, x, y)(c))(ct))
    # The defining property: <ct, f(v)> == <f^T(ct), v>.
    v = (rand(3, 2), rand(2, 3))
    fv = ff(*v)
    lhs = sum(float(np.sum(np.asarray(ct[k]) * np.asarray(fv[k]))) for k in ct)
    rhs = sum(float(np.sum(np.asarray(g) * vv)) for g, vv in zip(got, v))
    assert abs(lhs - rhs) < 1e-4 * (1 + abs(lhs))
    # Shapes/dtypes only: ShapeDtypeStructs work as primals.
    ft2 = ftrans.linear_transpose(ff, ftrans.ShapeDtypeStruct((3, 2), np.float32),
                                  ftrans.ShapeDtypeStruct((2, 3), np.float32))
    tree_close(ft2(ct), got)


# ----------------------------------------------------------------------------
# Jacobians and Hessians


def _jac_fun(np_):
    def f(p, x):
        h = np_.tanh(x @ p["w"]) * p["c"]
        return {"h": h, "s": np_.sum(h ** 2) + np_.sum(p["c"])}

    return f


P_J, X_J = {"w": rand(3, 2), "c": rand(2)}, rand(4, 3)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), -1])
def test_jacobians_on_pytrees(jac, argnums):
    ff, jf = both(_jac_fun)
    got = getattr(ftrans, jac)(ff, argnums=argnums)(P_J, X_J)
    want = jax.jit(getattr(jax, jac)(jf, argnums=argnums))(P_J, X_J)
    tree_close(got, want, tol=1e-5)
    if argnums == 0:
        assert np.shape(got["h"]["w"]) == (4, 2, 3, 2)
        assert np.shape(got["s"]["c"]) == (2,)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_has_aux_and_jit(jac):
    def make(np_):
        return lambda x: (np_.sin(x)[:2] * x[1:], {"m": np_.mean(x)})

    ff, jf = both(make)
    x = rand(3)
    got, aux = ftrans.jit(getattr(ftrans, jac)(ff, has_aux=True))(x)
    want, jaux = jax.jit(getattr(jax, jac)(jf, has_aux=True))(x)
    close(got, want)
    close(aux["m"], jaux["m"])
    assert np.shape(got) == (2, 3)


def test_jacfwd_of_integer_outputs_is_zeros_of_their_dtype():
    def make(np_):
        return lambda x: {"u": x * 2.0, "i": np_.argsort(x)}

    ff, jf = both(make)
    x = np.array([0.3, -1.0, 2.0], np.float32)
    got = ftrans.jacfwd(ff)(x)
    tree_close(got, jax.jit(jax.jacfwd(jf))(x))
    assert got["i"].dtype == np.int32 and np.shape(got["i"]) == (3, 3)


def test_jacrev_allow_int_gives_zeros_of_the_input_dtype():
    def make(np_):
        return lambda x, i: {"u": x * i, "v": np_.sum(x)}

    ff, jf = both(make)
    got = ftrans.jacrev(ff, argnums=(0, 1), allow_int=True)(X3, np.int32(3))
    tree_close(got, jax.jit(jax.jacrev(jf, argnums=(0, 1), allow_int=True))(X3, np.int32(3)))
    assert got["u"][1].dtype == np.int32


def test_jacobian_dtype_errors():
    z = X3.astype(np.complex64)
    with pytest.raises(TypeError, match=r"jacrev.*real-valued outputs.*int32"):
        ftrans.jacrev(lambda x: (x * 2).astype(np.int32))(X3)
    with pytest.raises(TypeError, match=r"jacrev.*complex64.*holomorphic=True"):
        ftrans.jacrev(lambda z: z * z)(z)
    with pytest.raises(TypeError, match=r"jacfwd requires real-valued inputs.*complex64.*holomorphic=True"):
        ftrans.jacfwd(lambda z: z * z)(z)
    with pytest.raises(TypeError, match=r"jacfwd requires real-valued inputs.*int32"):
        ftrans.jacfwd(lambda i: i * 2.0)(np.arange(3, dtype=np.int32))
    for jac in (ftrans.jacfwd, ftrans.jacrev):
        with pytest.raises(TypeError, match=r"holomorphic=True requires outputs with complex dtype.*float32"):
            jac(fjnp.real, holomorphic=True)(z)
    # complex inputs with real outputs are fine for jacrev (as in JAX)
    close(ftrans.jacrev(lambda z: fjnp.abs(z))(z), jax.jit(jax.jacrev(lambda z: jjnp.abs(z)))(z))


@pytest.mark.parametrize("argnums", [0, (0, 1)])
@pytest.mark.parametrize("wrap", WRAPS)
def test_hessian_on_pytrees(argnums, wrap):
    def make(np_):
        return lambda p, y: np_.sum(np_.sin(p["a"]) * p["b"] ** 2) * np_.sum(y ** 3) + np_.sum(p["a"] * y[:2])

    ff, jf = both(make)
    p, y = {"a": rand(2), "b": rand(2)}, rand(3)
    got = wrap(ftrans.hessian(ff, argnums=argnums))(p, y)
    tree_close(got, oracle(("hessian", argnums), lambda: jax.hessian(jf, argnums=argnums))(p, y), tol=1e-4)


def test_hessian_has_aux():
    def make(np_):
        return lambda x: (np_.sum(np_.exp(x) * x), x.shape[0])

    ff, jf = both(make)
    h, aux = ftrans.hessian(ff, has_aux=True)(X3)
    auxes = []

    def jax_hessian(x):  # jitted; the aux (a Python int) is kept from the trace
        jh, jaux = jax.hessian(jf, has_aux=True)(x)
        auxes.append(jaux)
        return jh

    jh = jax.jit(jax_hessian)(X3)
    (jaux,) = auxes
    close(h, jh, tol=1e-4)
    assert aux == jaux == 3


# ----------------------------------------------------------------------------
# Higher order, and composition with jit


def _scalar(np_):
    return lambda x: np_.sin(x) * x ** 2 + np_.exp(-x * x)


@pytest.mark.parametrize("wrap", WRAPS)
def test_grad_of_grad_of_grad(wrap):
    ff, jf = both(_scalar)
    g3 = ftrans.grad(ftrans.grad(ftrans.grad(ff)))
    j3 = oracle("grad3", lambda: jax.grad(jax.grad(jax.grad(jf))))
    for x in (0.3, -1.2, 2.0):
        close(wrap(g3)(np.float32(x)), j3(np.float32(x)), tol=1e-4)
    g3_inner_jit = ftrans.grad(ftrans.jit(ftrans.grad(ftrans.jit(ftrans.grad(ff)))))
    close(wrap(g3_inner_jit)(np.float32(0.7)), j3(np.float32(0.7)), tol=1e-4)


def _vec(np_):
    return lambda x: np_.stack([np_.sum(np_.sin(x) * x), np_.prod(x[:2]) * np_.exp(x[2])])


@pytest.mark.parametrize("wrap", WRAPS)
def test_jacfwd_of_jacrev(wrap):
    ff, jf = both(_vec)
    x = rand(3)
    got = wrap(ftrans.jacfwd(ftrans.jacrev(ff)))(x)
    close(got, oracle("jacfwd_jacrev", lambda: jax.jacfwd(jax.jacrev(jf)))(x), tol=1e-4)
    assert np.shape(got) == (2, 3, 3)
    close(wrap(ftrans.jacrev(ftrans.jacfwd(ff)))(x), got, tol=1e-4)


@pytest.mark.parametrize("wrap", WRAPS)
def test_hessian_vector_product(wrap):
    def make(np_):
        return lambda w: np_.sum(np_.tanh(X_J @ w) ** 2) + np_.sum(w ** 4)

    ff, jf = both(make)
    w, v = rand(3, 2), rand(3, 2)

    def hvp_f(w, v):
        return ftrans.jvp(ftrans.grad(ff), (w,), (v,))[1]

    want = oracle("hvp", lambda: lambda w, v: jax.jvp(jax.grad(jf), (w,), (v,))[1])(w, v)
    close(wrap(hvp_f)(w, v), want, tol=1e-4)
    # Reverse-over-reverse gives the same product.
    rr = ftrans.grad(lambda w: fjnp.vdot(ftrans.grad(ff)(w), v))(w)
    close(rr, want, tol=1e-4)
    # And the full Hessian contracted with v.
    h = ftrans.hessian(ff)(w)
    close(np.einsum("ijkl,kl->ij", np.asarray(h), v), want, tol=1e-3)


def _compositions(t, n):
    """Compositions of the derivative API with itself, jit, checkpoint and vmap, for ``t`` in {ftrans, jax}."""
    return {
        # perturbation confusion: the inner derivative must not see the outer tangent
        "nested_grad_closure": lambda x: t.grad(lambda x: t.grad(lambda y: x * y)(1.0) * x)(x[0]),
        "nested_grad_sin": lambda x: t.grad(lambda x: x * t.grad(lambda y: n.sin(x * y))(x))(x[1]),
        "nested_jvp": lambda x: t.jvp(lambda x: t.jvp(lambda y: x * y, (2.0,), (1.0,))[1], (x[2],), (1.0,)),
        "grad_jit_closure": lambda x: t.grad(lambda y: n.sum(t.jit(lambda z: z * x)(y)))(x),
        "grad_jit_static": lambda x: t.grad(t.jit(lambda x, k: n.sum(x ** k), static_argnums=1))(x, 3),
        "grad_jit_int_input": lambda x: t.grad(lambda x: n.sum(t.jit(lambda a, i: a * i)(x, 3)))(x),
        "grad_jit_unused_output": lambda x: t.grad(lambda x: t.jit(lambda x: (n.sum(x ** 3), x * 2))(x)[0])(x),
        "vjp_jit_int_output": lambda x: t.vjp(t.jit(lambda x: (n.sin(x), n.argmax(x))), x)[1](
            (x, np.zeros((), jax.dtypes.float0))),
        "grad_jit_checkpoint": lambda x: t.grad(t.jit(t.checkpoint(lambda x: n.sum(n.sin(n.sin(x))))))(x),
        "hessian_jit": lambda x: t.hessian(t.jit(lambda x: n.sum(n.sin(x) * x[::-1])))(x),
        "jacfwd_jit_grad": lambda x: t.jacfwd(t.jit(t.grad(lambda x: n.sum(n.sin(x) ** 2))))(x),
        "vmap_grad_jit": lambda x: t.vmap(t.grad(t.jit(lambda r: n.sin(r) * r)))(x),
        "grad_vmap": lambda x: t.grad(lambda x: n.sum(t.vmap(lambda r: n.dot(n.sin(r), r))(n.outer(x, x))))(x),
        "jacrev_vmap": lambda x: t.jacrev(t.vmap(lambda r: n.sin(r) * r))(x),
        "linearize_jit": lambda x: t.linearize(t.jit(lambda x: n.sin(x) * x), x)[1](x),
        "jit_pullback": lambda x: t.jit(t.vjp(t.jit(n.sin), x)[1])(x),
        "grad_max_with_ties": lambda x: t.grad(lambda x: n.max(n.concatenate([x, x])))(x),
        "grad_sort_with_ties": lambda x: t.grad(lambda x: n.sum(n.sort(n.concatenate([x, x])) * n.arange(6.0)))(x),
        "grad_round_and_cast": lambda x: t.grad(lambda x: n.sum(n.round(x) * x) + x.astype(n.int32).sum())(x),
        "grad_float16": lambda x: t.grad(t.jit(lambda x: n.sum(x * x)))(x.astype(n.float16)),
    }


COMPOSITIONS_F, COMPOSITIONS_J = _compositions(ftrans, fjnp), _compositions(jax, jjnp)


@pytest.mark.parametrize("name", sorted(COMPOSITIONS_F))
def test_compositions_match_jax(name):
    x = np.array([0.5, -1.0, 2.0], np.float32)
    tree_close(COMPOSITIONS_F[name](x), jax.jit(COMPOSITIONS_J[name])(x), tol=2e-3 if "16" in name else 1e-5)


def _mlp(np_):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = np_.tanh(h @ w + b)
        w, b = params[-1]
        return np_.mean((h @ w + b - y) ** 2)

    return loss


MLP_PARAMS = [(rand(4, 8, scale=0.5), rand(8, scale=0.1)), (rand(8, 8, scale=0.5), rand(8, scale=0.1)),
              (rand(8, 2, scale=0.5), rand(2, scale=0.1))]
MLP_X, MLP_Y = rand(6, 4), rand(6, 2)


def test_grad_of_jit_and_jit_of_grad_agree_with_jax():
    ff, jf = both(_mlp)
    want = jax.jit(jax.grad(jf))(MLP_PARAMS, MLP_X, MLP_Y)
    tree_close(ftrans.grad(ftrans.jit(ff))(MLP_PARAMS, MLP_X, MLP_Y), want, tol=1e-5)
    tree_close(ftrans.jit(ftrans.grad(ff))(MLP_PARAMS, MLP_X, MLP_Y), want, tol=1e-5)
    tree_close(ftrans.jit(ftrans.grad(ftrans.jit(ff)))(MLP_PARAMS, MLP_X, MLP_Y), want, tol=1e-5)


def _prim_names(jaxpr) -> list[str]:
    return [e.primitive.name for e in jaxpr.eqns]


def test_make_jaxpr_of_grad_of_jit_has_one_forward_and_one_backward_call():
    ff, _ = both(_mlp)
    closed = ftrans.make_jaxpr(ftrans.grad(ftrans.jit(ff)))(MLP_PARAMS, MLP_X, MLP_Y)
    calls = [e for e in closed.eqns if e.primitive.name == "jit_call"]
    assert len(calls) == 2, str(closed)
    fwd, bwd = calls
    assert closed.eqns.index(fwd) < closed.eqns.index(bwd)
    # The backward call consumes residuals the forward call produced.
    fwd_outs = {id(v) for v in fwd.outvars}
    assert any(id(v) in fwd_outs for v in bwd.invars)
    fwd_prims = _prim_names(fwd.params["jaxpr"])
    bwd_prims = _prim_names(bwd.params["jaxpr"])
    assert "tanh" in fwd_prims and "tanh" not in bwd_prims
    assert "dot_general" in bwd_prims
    # Every parameter gradient comes out of the backward call.
    assert len(bwd.outvars) == len(closed.jaxpr.outvars) == 6
    assert str(closed).count("= jit[") == 2  # (a jitted call prints as JAX prints it, jit[...])


def test_make_jaxpr_of_grad_prints_the_backward_program():
    def f(x, w):
        return fjnp.sum(fjnp.sin(x @ w))

    x, w = rand(2, 3), rand(3, 4)
    text = str(ftrans.make_jaxpr(ftrans.grad(f, argnums=1))(x, w))
    for name in ("sin", "cos", "dot_general", "reduce_sum", "broadcast_in_dim", "mul"):
        assert name in text, text
    # two dot_generals: the forward x @ w and the transposed x^T @ ct
    assert text.count("dot_general[") == 2, text


def test_make_jaxpr_of_pullback_prints_only_the_backward_program():
    def f(x, w):
        return fjnp.tanh(x @ w)

    x, w = rand(2, 3), rand(3, 4)
    out, pb = ftrans.vjp(f, x, w)
    closed = ftrans.make_jaxpr(pb)(np.ones((2, 4), np.float32))
    prims = _prim_names(closed)
    assert "tanh" not in prims  # the forward program is not rerun: its results are residual constants
    assert prims.count("dot_general") == 2  # ct @ w^T and x^T @ ct
    assert len(closed.jaxpr.outvars) == 2
    assert [tuple(v.aval.shape) for v in closed.jaxpr.outvars] == [(2, 3), (3, 4)]
    # and the program computes the pullback
    ct = rand(2, 4)
    want = jax.jit(lambda x, w, ct: jax.vjp(lambda x, w: jjnp.tanh(x @ w), x, w)[1](ct))(x, w, ct)
    tree_close(tuple(ftrans.eval_jaxpr(closed.jaxpr, closed.consts, ct)), want, tol=1e-5)


# ----------------------------------------------------------------------------
# check_grads on composite programs (orders 1 and 2, both modes)


def _softmax_xent(np_):
    def f(logits, labels):
        z = logits - np_.max(logits, axis=-1, keepdims=True)
        logp = z - np_.log(np_.sum(np_.exp(z), axis=-1, keepdims=True))
        return -np_.mean(np_.sum(labels * logp, axis=-1))

    return f


def _layer_norm(np_):
    def f(x, g, b):
        mu = np_.mean(x, axis=-1, keepdims=True)
        var = np_.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / np_.sqrt(var + 1e-5) * g + b

    return f


def _pool_net(lax_, np_):
    def f(x, w, v):
        h = np_.tanh(np_.einsum("nhwc,cd->nhwd", x, w))
        m = lax_.reduce_window(h, -np_.inf, lax_.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        a = lax_.reduce_window(h, 0.0, lax_.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4.0
        feats = np_.concatenate([m.reshape(m.shape[0], -1), np_.mean(a, axis=(1, 2))], axis=1)
        logits = feats @ v
        return np_.mean(np_.log(np_.sum(np_.exp(logits), axis=1)) - logits[:, 0])

    return f


def _scatter_prog(np_):
    def f(x, u):
        y = x.at[1:3].set(u * 2.0)
        y = y.at[np_.array([0, 2, 2, 4])].add(np_.sin(x[:4]))
        y = y.at[3].set(y[3] * x[0])
        return np_.sum(y ** 2) + y[np_.array([4, 0])] @ x[:2]

    return f


def test_grad_of_at_multiply_with_a_static_index():
    x = np.arange(1.0, 6.0, dtype=np.float32)
    got = ftrans.grad(lambda x: fjnp.sum(x.at[3].multiply(x[0])))(x)
    close(got, jax.grad(lambda x: jjnp.sum(x.at[3].multiply(x[0])))(x))


def _sort_prog(np_):
    def f(x):
        s = np_.sort(x)
        c = np_.cumsum(s * x)
        return np_.sum(np_.sin(c) * s) + np_.cumprod(s[:3])[-1]

    return f


LABELS = np.eye(3, dtype=np.float32)[[0, 2, 1, 2]]
COMPOSITES = {
    "mlp": (_mlp(fjnp), (MLP_PARAMS, MLP_X, MLP_Y)),
    "softmax_xent": (_softmax_xent(fjnp), (rand(4, 3), LABELS)),
    "layer_norm": (_layer_norm(fjnp), (rand(2, 5), 1.0 + rand(5, scale=0.1), rand(5))),
    "pool_net": (_pool_net(flax, fjnp), (rand(2, 4, 4, 2), rand(2, 3), rand(15, 3))),
    "scatter": (_scatter_prog(fjnp), (rand(5), rand(2))),
    "sort_cumsum": (_sort_prog(fjnp), (np.array([0.3, -1.1, 0.8, 2.0, -0.2], np.float32),)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_check_grads_composites_float32(name):
    f, args = COMPOSITES[name]
    check_grads(f, args, order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_check_grads_composites_order2_float64(x64, name):
    f, args = COMPOSITES[name]
    args64 = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), args)
    check_grads(f, args64, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", ["mlp", "softmax_xent"])
def test_check_grads_composite_order2_float32_under_jit(name):
    f, args = COMPOSITES[name]
    check_grads(ftrans.jit(f), args, order=2, modes=("fwd", "rev"), atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("name", ["mlp", "softmax_xent", "layer_norm"])
def test_composite_gradients_match_jax(name):
    makers = {"mlp": _mlp, "softmax_xent": _softmax_xent,
              "layer_norm": lambda np_: lambda x, g, b: np_.sum(np_.sin(_layer_norm(np_)(x, g, b)))}
    ff, jf = both(makers[name])
    args = COMPOSITES[name][1]
    argnums = tuple(range(len(args)))
    tree_close(ftrans.grad(ff, argnums)(*args), jax.jit(jax.grad(jf, argnums))(*args), tol=1e-4)


def test_pool_net_gradient_matches_jax():
    ff, jf = _pool_net(flax, fjnp), _pool_net(jax.lax, jjnp)
    args = COMPOSITES["pool_net"][1]
    tree_close(ftrans.grad(ff, (0, 1, 2))(*args), jax.jit(jax.grad(jf, (0, 1, 2)))(*args), tol=1e-4)


# ----------------------------------------------------------------------------
# check_grads itself: it must catch wrong derivatives, name the mode and order, and check its inputs


def _sin_with_jvp(scale: float, second_order_ok: bool = True):
    @ftrans.custom_jvp
    def f(x):
        return fjnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        c = fjnp.cos(x) if second_order_ok else fjnp.cos(flax.stop_gradient(x))
        return f(x), scale * c * t

    return f


@pytest.mark.parametrize("mode,label", [("fwd", "forward mode"), ("rev", "reverse mode")])
def test_check_grads_catches_a_wrong_jvp_rule(mode, label):
    f = _sin_with_jvp(1.3)
    with pytest.raises(AssertionError, match=rf"{label} \((JVP|VJP)\), order 1.*max abs discrepancy"):
        check_grads(f, (np.float32([0.3, 1.0]),), order=1, modes=(mode,))
    check_grads(_sin_with_jvp(1.0), (np.float32([0.3, 1.0]),), order=2, modes=(mode,))


def test_check_grads_catches_a_wrong_second_derivative_only_at_order_2():
    f = _sin_with_jvp(1.0, second_order_ok=False)
    x = (np.float32([0.3, 1.0]),)
    check_grads(f, x, order=1)
    with pytest.raises(AssertionError, match=r"of JVP, order 2"):
        check_grads(f, x, order=2, modes=("fwd",))
    with pytest.raises(AssertionError, match=r"of VJP, order 2"):
        check_grads(f, x, order=2, modes=("rev",))


def test_check_grads_catches_a_wrong_vjp_rule_in_reverse_only():
    @ftrans.custom_vjp
    def f(x):
        return fjnp.sin(x)

    f.defvjp(lambda x: (fjnp.sin(x), x), lambda x, ct: (1.1 * fjnp.cos(x) * ct,))
    with pytest.raises(AssertionError, match=r"reverse mode \(VJP\), order 1: .*finite-difference"):
        check_grads(f, (np.float32(0.4),), order=1, modes=("rev",))

    @ftrans.custom_vjp
    def g(x):
        return fjnp.sin(x)

    g.defvjp(lambda x: (fjnp.sin(x), x), lambda x, ct: (fjnp.cos(x) * ct,))
    check_grads(g, (np.float32(0.4),), order=2, modes=("rev",))


def test_check_grads_tolerances_follow_dtype(x64):
    f = _sin_with_jvp(1.0 + 1e-4)  # off by 1e-4 relative: invisible in float32, caught in float64
    check_grads(f, (np.float32([0.3, 1.0]),), order=1)
    with pytest.raises(AssertionError, match="max abs discrepancy"):
        check_grads(f, (np.float64([0.3, 1.0]),), order=1)
    check_grads(f, (np.float64([0.3, 1.0]),), order=1, atol=1e-3, rtol=1e-3)
    check_grads(f, (np.float64([0.3, 1.0]),), order=1, atol={np.float64: 1e-3}, rtol={np.float64: 1e-3})


def test_check_grads_complex_and_pytree_outputs():
    z = (rand(3) + 1j * rand(3)).astype(np.complex64)

    def f(z, x):
        return {"a": fjnp.conj(z) * fjnp.exp(z), "b": (fjnp.real(z) * x, fjnp.abs(z) ** 2), "i": fjnp.argmax(x)}

    check_grads(f, (z, X3), order=2)


def _scaled_with_jvp(scale: float):
    @ftrans.custom_jvp
    def f(x):
        return 2.0 * x

    f.defjvp(lambda primals, tangents: (f(primals[0]), scale * tangents[0]))
    return f


def test_check_grads_differences_along_the_step_actually_taken():
    # x +- eps*t rounds to float32: at |x| ~ 4096 the rounding is ~5e-4 against a step of 1e-3, so a
    # difference taken along t itself is off by tens of percent; along the realised step it is exact.
    x = np.float32([1000.5, -2000.25, 4096.0, 3.0])
    check_grads(_scaled_with_jvp(2.0), (x,), order=2, atol=1e-4, rtol=1e-4)
    check_grads(lambda a: 2.0 * a, (x,), order=2, atol=1e-4, rtol=1e-4)
    with pytest.raises(AssertionError, match="max abs discrepancy"):
        check_grads(_scaled_with_jvp(2.002), (x,), order=1, modes=("fwd",), atol=1e-4, rtol=1e-4)
    with pytest.raises(AssertionError, match="finite-difference"):
        check_grads(_scaled_with_jvp(2.02), (x,), order=1, modes=("rev",), atol=1e-4, rtol=1e-4)
    # The derivative compared is JAX's: the JVP of a small symmetric eigenproblem, the case that met
    # this rounding in JAX's own eigh tests.
    a = np.float32([[0.081]])
    got = ftrans.jvp(lambda m: fjnp.linalg.eigh(m)[0], (a,), (np.float32([[0.034]]),))[1]
    want = jax.jvp(lambda m: jjnp.linalg.eigh(m)[0], (a,), (np.float32([[0.034]]),))[1]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    check_grads(lambda m: fjnp.linalg.eigh(m)[0], (a,), order=2, atol=1e-4, rtol=1e-3)


def test_check_grads_rejects_bad_arguments():
    with pytest.raises(TypeError, match=r"args\[0\] has dtype int32"):
        check_grads(lambda i: i * 2.0, (np.arange(3, dtype=np.int32),), order=1)
    with pytest.raises(ValueError, match="modes"):
        check_grads(fjnp.sin, (X3,), order=1, modes=("bwd",))
    with pytest.raises(ValueError, match="order"):
        check_grads(fjnp.sin, (X3,), order=0)


def test_test_util_is_a_submodule():
    assert ftrans.test_util.check_grads is check_grads


# ----------------------------------------------------------------------------
# Errors


def test_grad_of_non_scalar_output():
    with pytest.raises(TypeError, match=r"scalar-output functions. Output had shape: \(3,\).*jacrev.*vjp"):
        ftrans.grad(fjnp.sin)(X3)
    with pytest.raises(TypeError, match=r"single scalar.*jacrev or vjp"):
        ftrans.grad(lambda x: (fjnp.sum(x), fjnp.sum(x)))(X3)


def test_grad_of_integer_output():
    with pytest.raises(TypeError, match=r"real-valued outputs.*but got int32.*vjp"):
        ftrans.grad(lambda x: fjnp.sum(x).astype(np.int32))(X3)
    with pytest.raises(TypeError, match=r"complex64.*holomorphic=True"):
        ftrans.grad(lambda x: fjnp.sum(x * 1j))(X3)


def test_grad_wrt_integer_input_needs_allow_int():
    with pytest.raises(TypeError, match=r"int32.*allow_int=True"):
        ftrans.grad(lambda i: fjnp.sum(i * 2.0))(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match=r"but got bool \(argument 1\[.k.\]\).*allow_int"):
        ftrans.grad(lambda x, d: x * 2.0, argnums=(0, 1))(1.0, {"k": True})
    with pytest.raises(TypeError, match="allow_int"):
        ftrans.jacrev(lambda i: i * 2.0)(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        ftrans.grad(fjnp.sum, holomorphic=True)(X3)


def test_argnums_out_of_range():
    f = lambda x, y: fjnp.sum(x * y)  # noqa: E731
    # JAX's grad: TypeError when too few positional arguments were passed, ValueError for a negative
    # index; its jacfwd/jacrev/hessian: ValueError for both
    with pytest.raises(TypeError, match=r"argnums=\(0, 2\) requires at least 3 positional arguments"):
        ftrans.grad(f, argnums=(0, 2))(X3, Y3)
    with pytest.raises(ValueError, match=r"argnums=-3"):
        ftrans.value_and_grad(f, argnums=-3)(X3, Y3)
    for jac in (ftrans.jacfwd, ftrans.jacrev, ftrans.hessian):
        with pytest.raises(ValueError, match=r"argnums"):
            jac(f, argnums=2)(X3, Y3)
    with pytest.raises(TypeError, match="argnums must be an int"):
        ftrans.grad(f, argnums=1.0)(X3, Y3)


def test_vjp_pullback_rejects_wrong_cotangents():
    _, pb = ftrans.vjp(lambda x: (x, fjnp.sum(x)), X3)
    # JAX raises ValueError for all three
    with pytest.raises(ValueError, match=r"structure"):
        pb(X3)
    with pytest.raises(ValueError, match=r"structure"):
        pb([X3, np.float32(1.0)])
    with pytest.raises(ValueError, match=r"shape \(2,\).*shape \(3,\)"):
        pb((X3[:2], np.float32(1.0)))
    with pytest.raises(ValueError, match=r"dtype int32.*float32"):
        pb((X3.astype(np.int32), np.float32(1.0)))
    with pytest.raises(ValueError, match=r"dtype float16.*float32"):
        pb((X3.astype(np.float16), np.float32(1.0)))
    (g,) = pb((X3, np.float32(1.0)))  # still usable after the errors
    close(g, X3 + 1.0)


def test_linearize_and_linear_transpose_reject_wrong_arguments():
    _, f_jvp = ftrans.linearize(lambda a, b: a * b, X3, Y3)
    with pytest.raises(TypeError, match="structure"):
        f_jvp(X3)
    with pytest.raises(ValueError, match=r"tangent 1 has type f16\[3\].*f32\[3\]"):  # JAX: ValueError
        f_jvp(X3, Y3.astype(np.float16))
    with pytest.raises(ValueError, match=r"f32\[2\]"):
        f_jvp(X3[:2], Y3)
    ft = ftrans.linear_transpose(lambda a: (a * 2.0, a), X3)
    with pytest.raises(TypeError, match="structure"):
        ft(X3)
    with pytest.raises(TypeError, match=r"cotangent 0 has type f32\[2\]"):
        ft((X3[:2], X3))
    with pytest.raises(TypeError, match=r"integer -> integer.*\['int32'\] -> \['float32'\]"):
        ftrans.linear_transpose(lambda i: i * 2.0, np.arange(3, dtype=np.int32))
    with pytest.raises(NotImplementedError, match="not linear"):
        ftrans.linear_transpose(lambda a: a * a, X3)(X3)


def test_has_aux_without_a_pair():
    def my_loss(x):
        return fjnp.sum(x)

    with pytest.raises(TypeError, match=r"my_loss.*has_aux=True.*pair"):
        ftrans.grad(my_loss, has_aux=True)(X3)


def test_grad_through_argmax_is_zero_not_an_error():
    def make(np_):
        return lambda x: x[np_.argmax(x)] * np_.argmax(x).astype(np.float32) + np_.argmin(x).astype(np.float32)

    ff, jf = both(make)
    x = np.array([0.5, 2.0, -1.0, 1.5], np.float32)
    got = ftrans.grad(ff)(x)
    close(got, jax.jit(jax.grad(jf))(x))
    close(got, np.array([0.0, 1.0, 0.0, 0.0], np.float32))
    only_idx = ftrans.grad(lambda x: fjnp.argmax(x).astype(np.float32) * 1.0)(x)
    close(only_idx, np.zeros(4, np.float32))


@pytest.mark.parametrize("bad", [3, "f"])
def test_not_callable(bad):
    for t in (ftrans.grad, ftrans.value_and_grad):
        with pytest.raises(TypeError, match="expected a function"):
            t(bad)
    with pytest.raises(TypeError, match="expected a function"):
        ftrans.vjp(bad, X3)
