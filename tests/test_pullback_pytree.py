"""``vjp``'s pullback and ``linearize``'s linear function are pytrees whose leaves are the residuals.

JAX returns a ``tree_util.Partial`` from both, so a pullback can be returned from ``jit``, passed into
one, traced by ``make_jaxpr``, carried through ``scan``/``while_loop`` and called later.  Each case runs
the same program on ftrans and on jax and compares the results.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fjnp
from ftrans import errors
from ftrans.core.array import Array
from ftrans.core.jaxpr_api import eval_jaxpr

API = {"ftrans": (ftrans, fjnp, ftrans.lax), "jax": (jax, jjnp, jax.lax)}


def close(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def tree_close(a, b, tol=1e-5):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, (ta, tb)
    for x, y in zip(la, lb):
        close(x, y, tol)


def both(case):
    """Run ``case(T, np_, lax_)`` for ftrans and for jax."""
    return case(*API["ftrans"]), case(*API["jax"])


X3 = np.array([0.3, -1.2, 2.0], np.float32)


def _fn(np_):
    return lambda x: np_.sin(x) * x + np_.exp(-x * x)


def test_pullback_returned_from_jit():
    def case(T, np_, lax_):
        y, f_vjp = T.jit(lambda x: T.vjp(np_.sin, x))(1.0)
        return y, f_vjp(1.0)

    tree_close(*both(case))


def test_pullback_from_jit_called_twice_with_new_values():
    def case(T, np_, lax_):
        g = T.jit(lambda x: T.vjp(_fn(np_), x))
        _, p1 = g(X3)
        _, p2 = g(X3 * 2)
        ct = np.ones(3, np.float32)
        return p1(ct), p2(ct)

    f, j = both(case)
    tree_close(f, j)
    assert not np.allclose(np.asarray(f[0][0]), np.asarray(f[1][0]))


def test_pullback_leaves_are_the_residual_arrays():
    _, pf = ftrans.vjp(_fn(fjnp), X3)
    _, pj = jax.vjp(_fn(jjnp), X3)
    lf, lj = jax.tree_util.tree_leaves(pf), jax.tree_util.tree_leaves(pj)
    assert lf and all(isinstance(x, Array) for x in lf)
    assert all(tuple(x.shape) == (3,) for x in lf)
    assert len(lf) <= len(lj) + 2  # same order of residuals as jax's (not necessarily the same count)
    # the leaves are the linear program's constants
    assert [id(c) for c in pf.linear_jaxpr.consts] == [id(x) for x in lf]


def test_pullback_rebuilt_from_its_leaves():
    """tree_map over the residuals gives a pullback that reads the new residuals, as jax's Partial does."""
    def case(T, np_, lax_):
        _, pb = T.vjp(_fn(np_), X3)
        pb2 = jax.tree_util.tree_map(lambda r: r * 2, pb)
        return pb(np.ones(3, np.float32)), pb2(np.ones(3, np.float32))

    tree_close(*both(case))
    _, pb = ftrans.vjp(_fn(fjnp), X3)
    assert jax.tree_util.tree_structure(pb) == jax.tree_util.tree_structure(pb)
    assert hash(jax.tree_util.tree_structure(pb)) == hash(jax.tree_util.tree_structure(pb))
    _, other = ftrans.vjp(_fn(fjnp), X3)
    assert jax.tree_util.tree_structure(pb) != jax.tree_util.tree_structure(other)


def test_pullback_through_make_jaxpr():
    jf = ftrans.make_jaxpr(lambda x: ftrans.vjp(fjnp.sin, x)[1])(1.0)
    jj = jax.make_jaxpr(lambda x: jax.vjp(jjnp.sin, x)[1])(1.0)
    # both return the residual (cos x) as the program's output
    assert len(jf.jaxpr.outvars) == len(jj.jaxpr.outvars) == 1
    assert "cos" in str(jf)
    out_f = eval_jaxpr(jf.jaxpr, jf.consts, np.float32(1.0))
    out_j = jax.core.eval_jaxpr(jj.jaxpr, jj.consts, np.float32(1.0))
    close(out_f[0], out_j[0])


def test_pullback_passed_into_jit():
    def case(T, np_, lax_):
        _, pb = T.vjp(_fn(np_), X3)
        return T.jit(lambda pb, c: pb(c))(pb, np.ones(3, np.float32))

    tree_close(*both(case))


@pytest.mark.parametrize("jit", [False, True])
def test_pullback_in_a_scan_carry(jit):
    def case(T, np_, lax_):
        _, pb = T.vjp(_fn(np_), X3)

        def body(c, x):
            return c, c(x)[0]

        run = lambda pb: lax_.scan(body, pb, np.arange(12, dtype=np.float32).reshape(4, 3))[1]  # noqa: E731
        return T.jit(run)(pb) if jit else run(pb)

    tree_close(*both(case))


def test_pullback_in_a_while_carry():
    def case(T, np_, lax_):
        _, pb = T.vjp(_fn(np_), X3)
        init = (0, pb, np.ones(3, np.float32))
        return lax_.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1], c[2] + c[1](c[2])[0]), init)[2]

    tree_close(*both(case))


def test_pullback_with_aux_from_jit():
    def case(T, np_, lax_):
        y, pb, aux = T.jit(lambda x: T.vjp(lambda x: (np_.sin(x), x * 2), x, has_aux=True))(1.0)
        return y, pb(1.0), aux

    tree_close(*both(case))


def test_pullback_from_jit_keeps_its_cotangent_checks():
    _, pb = ftrans.jit(lambda x: ftrans.vjp(fjnp.sin, x))(X3)
    with pytest.raises(errors.FtransValueError, match="shape"):
        pb(np.ones(2, np.float32))


def test_linearized_function_returned_from_jit():
    def case(T, np_, lax_):
        y, f_jvp = T.jit(lambda x: T.linearize(_fn(np_), x))(X3)
        return y, f_jvp(np.full(3, 2.0, np.float32)), len(jax.tree_util.tree_leaves(f_jvp)) > 0

    tree_close(*both(case))


def test_linearized_function_leaves_and_scan():
    def case(T, np_, lax_):
        _, f_jvp = T.linearize(_fn(np_), X3)
        leaves = jax.tree_util.tree_leaves(f_jvp)
        out = lax_.scan(lambda c, t: (c, c(t)), f_jvp, np.ones((2, 3), np.float32))[1]
        return out, [tuple(x.shape) for x in leaves]

    (of, lf), (oj, lj) = both(case)
    close(of, oj)
    assert lf and all(s == (3,) for s in lf)
    _, f_jvp = ftrans.linearize(_fn(fjnp), X3)
    assert f_jvp.__name__.startswith("linearize(")
    assert "sin" not in str(ftrans.make_jaxpr(f_jvp)(X3))  # the linear program only: no primal recomputed


@given(st.lists(st.floats(-2, 2, width=32), min_size=1, max_size=5))
def test_hypothesis_pullback_from_jit_matches_jax(vals):
    x = np.array(vals, np.float32)
    ct = np.linspace(-1, 1, x.size).astype(np.float32)

    def case(T, np_, lax_):
        y, pb = T.jit(lambda x: T.vjp(lambda x: np_.tanh(x) * np_.cos(x) ** 2, x))(x)
        return y, pb(ct)

    tree_close(*both(case))


# ---------------------------------------------------------------- residuals: args_res / opaque_residuals
def test_eager_scalar_residual_is_a_leaf_as_in_jax():
    """cos(1.0), computed eagerly, is a residual (a leaf and a constant of the linear program), not a literal."""
    leaves = jax.tree_util.tree_leaves
    _, pb = ftrans.vjp(fjnp.sin, 1.0)
    lf, lj = leaves(pb), leaves(jax.vjp(jjnp.sin, 1.0)[1])
    assert len(lf) == len(lj) == 1
    close(lf[0], lj[0])
    assert "0.5403" not in str(pb.linear_jaxpr.jaxpr)
    close(pb(1.0)[0], np.float32(np.cos(1.0)))
    # tree_map over the leaves reaches the scalar residual
    pb2 = jax.tree_util.tree_map(lambda r: r * 2, pb)
    close(pb2(1.0)[0], np.float32(2 * np.cos(1.0)))


def _kinds(pb, T):
    """'in' for an input the backward pass reads, '-' for one it does not (JAX's NotNeeded)."""
    from jax._src.api import NotNeeded as JNotNeeded

    from ftrans.transforms.reverse import NotNeeded as FNotNeeded

    nn = FNotNeeded if T is ftrans else JNotNeeded
    return [jax.tree_util.tree_map(lambda x: "-" if isinstance(x, nn) else "in", a,
                                   is_leaf=lambda x: isinstance(x, nn)) for a in pb.args_res]


def _fsdp(np_):
    def f2(x, w):
        x = 1. * x
        x = x @ w
        x = 2. * x
        return x
    return f2


@pytest.mark.parametrize("case", ["sin", "fsdp", "cond", "pytree"])
def test_args_res_and_opaque_residuals_match_jax(case):
    x = np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)

    def run(T, np_, lax_):
        if case == "sin":
            return T.vjp(np_.sin, np_.asarray(x))
        if case == "fsdp":
            return T.vjp(_fsdp(np_), np_.asarray(x), np_.asarray(w))
        if case == "cond":
            return T.vjp(lambda a: lax_.cond(a.sum() > 0, np_.sin, np_.cos, a), np_.asarray(x))
        return T.vjp(lambda d: d["w"] @ d["x"].T, {"x": np_.asarray(x), "w": np_.asarray(w)})

    (yf, pf), (yj, pj) = run(*API["ftrans"]), run(*API["jax"])
    tree_close(yf, yj)
    if jax.__version_info__ >= (0, 12):  # jax 0.12 keeps each argument's pytree in args_res (ftrans: 0.10's)
        assert _kinds(pf, ftrans) == [tuple(jax.tree_util.tree_leaves(k)) if isinstance(k, dict) else k
                                      for k in _kinds(pj, jax)]
    else:
        assert _kinds(pf, ftrans) == _kinds(pj, jax)
    assert bool(pf.opaque_residuals) == bool(pj.opaque_residuals)
    ct = np.ones(np.shape(yj), np.float32)
    tree_close(pf(ct), pj(ct))


def test_args_res_input_can_be_dropped_and_put_back():
    """The FSDP pattern: drop the weight while holding the pullback, restore it before calling."""
    x = np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    outs = []
    for T, np_, _ in (API["ftrans"], API["jax"]):
        wa = np_.asarray(w)
        y, pb = T.vjp(_fsdp(np_), np_.asarray(x), wa)
        assert pb.args_res[1] is wa
        pb.args_res[1] = None
        pb.args_res[1] = wa * 2  # a different weight: the pullback reads what args_res holds
        outs.append(pb(np.ones(np.shape(y), np.float32)))
    tree_close(*outs)


def test_pullback_with_a_dropped_input_says_to_put_it_back():
    x, w = fjnp.ones((3, 4)), fjnp.ones((4, 4))
    y, pb = ftrans.vjp(_fsdp(fjnp), x, w)
    pb.args_res[1] = None
    with pytest.raises(errors.FtransValueError, match="put back"):
        pb(fjnp.ones_like(y))
    pb.args_res[1] = fjnp.ones((4, 5))
    with pytest.raises(errors.FtransValueError, match="f32\\[4,5\\].*f32\\[4,4\\]"):
        pb(fjnp.ones_like(y))


def test_pullback_with_args_res_through_jit():
    def case(T, np_, lax_):
        def f(a, b):
            return a * np_.sin(b)
        y, pb = T.jit(lambda a, b: T.vjp(f, a, b))(X3, X3 + 1)
        return T.jit(lambda p: p(np.ones(3, np.float32)))(pb)
    tree_close(*both(case))


def test_linearized_function_has_partials_shape():
    """JAX's f_jvp is a Partial: f_jvp.func is a partial whose first argument is the linear jaxpr."""
    @ftrans.checkpoint
    def f(x):
        return fjnp.sin(fjnp.sin(x))

    _, f_lin = ftrans.linearize(f, 2.0)
    text = str(f_lin.func.args[0])
    assert "cos" in text and "remat" in text
    (res,) = f_lin.args
    close(f_lin.func(res, 1.0), f_lin(1.0))
    _, j_lin = jax.linearize(jax.checkpoint(lambda x: jjnp.sin(jjnp.sin(x))), 2.0)
    close(f_lin(1.0), j_lin(1.0))


# ----------------------------------------------------------------------------
# with_refs: which input cotangents are wanted (JAX's jax.ad markers)


def _with_refs_results(lib, lnp, wants_names):
    def f(x, y):
        return lnp.sin(x) * y

    x, y = lnp.arange(3.0), lnp.arange(3.0) + 1.0
    _, f_vjp = lib.vjp(f, x, y)
    wants = [getattr(lib.ad, n)() for n in wants_names]
    return f_vjp.with_refs(*wants)(lnp.ones(3)), lib.ad


@pytest.mark.parametrize("wants", [("GradValue", "GradValue"), ("DontWant", "GradValue"),
                                   ("GradValue", "DontWant"), ("DontWant", "DontWant")])
def test_with_refs_matches_jax(wants):
    ours, fad = _with_refs_results(ftrans, fjnp, wants)
    theirs, jad = _with_refs_results(jax, jjnp, wants)
    for o, t, w in zip(ours, theirs, wants):
        if w == "DontWant":
            assert isinstance(t, jad.DidntWant) and isinstance(o, fad.DidntWant) and o == fad.DidntWant()
        else:
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)


def test_with_refs_drops_the_work_of_unwanted_cotangents():
    def f(x, y):
        return x * y

    x = y = fjnp.arange(3.0)
    _, f_vjp = ftrans.vjp(f, x, y)
    pb = f_vjp.with_refs(ftrans.ad.DontWant(), ftrans.ad.GradValue())
    closed = ftrans.make_jaxpr(pb)(fjnp.ones(3))
    assert [e.primitive.name for e in closed.eqns] == ["mul"]  # only y's cotangent, ct * x
    assert len(ftrans.make_jaxpr(f_vjp)(fjnp.ones(3)).eqns) == 2
    # The pullback stays a pytree: through jit, the unwanted cotangent comes back as DidntWant().
    xg, yg = ftrans.jit(lambda p, o: p(o))(pb, fjnp.ones(3))
    assert xg == ftrans.ad.DidntWant()
    np.testing.assert_allclose(np.asarray(yg), [0.0, 1.0, 2.0])


def test_with_refs_errors():
    _, f_vjp = ftrans.vjp(lambda x, y: x * y, 1.0, 2.0)
    with pytest.raises(errors.FtransValueError, match="one GradValue"):
        f_vjp.with_refs(ftrans.ad.DontWant())
    # Any other placeholder (not an array) asks for the value, as JAX's with_refs reads it.
    got = f_vjp.with_refs(object(), ftrans.ad.GradValue())(1.0)
    _, j_vjp = jax.vjp(lambda x, y: x * y, 1.0, 2.0)
    want = j_vjp.with_refs(object(), jax.ad.GradValue())(1.0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    with pytest.raises(errors.FtransTypeError, match="pass a ref"):  # an array, where a ref would accumulate
        f_vjp.with_refs(fjnp.zeros(()), ftrans.ad.GradValue())


def test_pullback_called_with_several_arguments_says_it_takes_one():
    def foo(x):
        return x, x

    _, f_vjp = ftrans.vjp(foo, 1.0)
    _, j_vjp = jax.vjp(foo, 1.0)
    with pytest.raises(TypeError):  # JAX's is a TypeError too
        j_vjp(1.0, 1.0)
    with pytest.raises(errors.FtransTypeError, match=r"applied to foo was called with 2 arguments.*one tuple"):
        f_vjp(1.0, 1.0)
    assert len(f_vjp((1.0, 1.0))) == 1
