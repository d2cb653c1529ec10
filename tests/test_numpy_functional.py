"""The ``jnp`` names added in issue 18 (vectorize, apply_along_axis, apply_over_axes, piecewise, block,
extract, place, angle, matvec/vecmat, gradient, poly/polydiv/polyfit/roots, histogram2d/histogramdd),
each against ``jax.numpy`` on the same inputs: values and dtypes eager, a sample under ``jit`` and
``vmap``, and gradients where the function is differentiable."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

_rng = np.random.default_rng(0)
X = _rng.standard_normal((3, 4)).astype(np.float32)
Y = _rng.standard_normal((3, 4)).astype(np.float32)
V4 = _rng.standard_normal(4).astype(np.float32)
Z = (X + 1j * Y).astype(np.complex64)
PTS = _rng.standard_normal((20, 3)).astype(np.float32)
XS = np.linspace(-1, 1, 9).astype(np.float32)
YS = (3 * XS**2 - XS + 0.5 + 0.01 * _rng.standard_normal(9)).astype(np.float32)
COORD = np.cumsum(_rng.random(4) + 0.5).astype(np.float32)


def _pw(np_, x):
    return np_.piecewise(x, [x < -0.5, x > 0.5], [lambda v: -v, lambda v: v * v, 2.0])


CASES = {
    "angle_complex": lambda np_: np_.angle(Z),
    "angle_deg": lambda np_: np_.angle(Z, deg=True),
    "angle_real_int": lambda np_: (np_.angle(X), np_.angle(np.arange(-2, 3)), np_.angle(np.float32(-1.0))),
    "matvec": lambda np_: np_.matvec(np.stack([X.T @ X] * 2), V4),
    "vecmat": lambda np_: np_.vecmat(Z[0], Z.T @ Z),
    "extract": lambda np_: np_.extract(X > 0, X),
    "extract_size": lambda np_: np_.extract(X > 0, X, size=8, fill_value=-1),
    "place": lambda np_: np_.place(X, X > 0, np.array([7.0, 8.0], np.float32), inplace=False),
    "block_2d": lambda np_: np_.block([[X, Y[:, :1]], [V4[None], np.ones((1, 1), np.float32)]]),
    "block_1d": lambda np_: np_.block([V4, np.float32(3.0), V4[:2]]),
    "block_depth3": lambda np_: np_.block([[[X[:1]], [Y[:1]]]]),
    "vectorize_elementwise": lambda np_: np_.vectorize(lambda a, b: a * b + 1)(X, V4),
    "vectorize_signature": lambda np_: np_.vectorize(lambda a, b: np_.dot(a, b), signature="(n),(n)->()")(X, Y),
    "vectorize_two_outputs": lambda np_: np_.vectorize(lambda a: (a.sum(), a.max()), signature="(n)->(),()")(X),
    "vectorize_excluded": lambda np_: np_.vectorize(lambda a, p: a ** p, excluded={1})(X, 2),
    "vectorize_broadcast_size1": lambda np_: np_.vectorize(lambda a, b: a - b)(X[:, :1], X[:1]),
    "apply_along_axis": lambda np_: np_.apply_along_axis(lambda v: v[::-1] * v.sum(), 1, X),
    "apply_along_axis0_scalar": lambda np_: np_.apply_along_axis(lambda v, k: (v**k).sum(), 0, X, 2),
    "apply_over_axes": lambda np_: np_.apply_over_axes(np_.sum, X, [0, 1]),
    "piecewise": lambda np_: _pw(np_, X),
    "piecewise_int_default": lambda np_: np_.piecewise(np.arange(-3, 4), [np.arange(-3, 4) > 0], [lambda v: v * 3]),
    "gradient_1d": lambda np_: np_.gradient(XS**3),
    "gradient_2d": lambda np_: np_.gradient(X),
    "gradient_spacing": lambda np_: np_.gradient(X, 0.5, COORD),
    "gradient_axis": lambda np_: np_.gradient(X, COORD, axis=-1),
    "poly_roots": lambda np_: np_.poly(np.array([1.0, -2.0, 0.5], np.float32)),
    "poly_matrix": lambda np_: np_.poly(np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)).real,
    "polydiv": lambda np_: np_.polydiv(np.array([1.0, 2, 3, 4], np.float32), np.array([2.0, 1], np.float32)),
    "polyfit": lambda np_: np_.polyfit(XS, YS, 2),
    "polyfit_weights_2d": lambda np_: np_.polyfit(XS, np.stack([YS, -YS], 1), 1, w=np.abs(XS) + 1),
    "polyfit_full": lambda np_: np_.polyfit(XS, YS, 2, full=True)[:2],
    "polyfit_cov": lambda np_: np_.polyfit(XS, YS, 2, cov=True),
    "roots": lambda np_: np_.sort_complex(np_.roots(np.array([0.0, 1.0, -6, 11, -6], np.float32))),
    "histogram2d": lambda np_: np_.histogram2d(PTS[:, 0], PTS[:, 1], bins=4),
    "histogram2d_density": lambda np_: np_.histogram2d(PTS[:, 0], PTS[:, 1], bins=[3, 5], density=True),
    "histogramdd": lambda np_: np_.histogramdd(PTS, bins=3, range=[(-2, 2), None, (-1, 1)]),
    "histogramdd_weights": lambda np_: np_.histogramdd(PTS, bins=(2, 3, 2), weights=np.abs(PTS[:, 0])),
}


def close(a, b, tol=1e-5):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, x.dtype, y.shape, y.dtype)
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def _tol(name):
    return 2e-3 if name.startswith(("polyfit", "roots", "poly_matrix")) else 1e-5


@pytest.mark.parametrize("name", sorted(CASES))
def test_values(name):
    close(CASES[name](fjnp), CASES[name](jjnp), _tol(name))


@pytest.mark.parametrize("name", ["vectorize_signature", "apply_along_axis", "gradient_spacing", "piecewise",
                                  "polyfit", "block_2d", "angle_complex", "histogramdd", "poly_roots",
                                  "matvec"])
def test_jit(name):
    close(ftrans.jit(lambda: CASES[name](fjnp))(), CASES[name](jjnp), _tol(name))


def test_vmap_over_vectorized_and_piecewise():
    def f(np_):
        return lambda x: (np_.vectorize(lambda a, b: np_.dot(a, b), signature="(n),(n)->()")(x, V4),
                          _pw(np_, x), np_.gradient(x, COORD, axis=1), np_.apply_along_axis(np_.cumsum, 0, x))
    close(ftrans.vmap(f(fjnp))(np.stack([X, Y])), jax.vmap(f(jjnp))(np.stack([X, Y])))


GRADS = {
    "angle": lambda np_, x: np_.angle(x + 1j * x[::-1]).sum(),
    "piecewise": lambda np_, x: _pw(np_, x).sum(),
    "vectorize": lambda np_, x: np_.vectorize(lambda a: np_.sin(a).sum() * a[0], signature="(n)->()")(x).sum(),
    "gradient": lambda np_, x: (np_.gradient(x, COORD, axis=1) ** 2).sum(),
    "block": lambda np_, x: (np_.block([[x, x], [x, x * 2]]) ** 2).sum(),
    "apply_along_axis": lambda np_, x: np_.apply_along_axis(lambda v: np_.exp(v).sum(), 1, x).sum(),
    "place": lambda np_, x: (np_.place(x, X > 0, np.float32(3.0), inplace=False) ** 2).sum(),
    "poly": lambda np_, x: np_.poly(x[0]).sum(),
    "polyfit": lambda np_, x: np_.polyfit(XS, YS * x[0, 0], 2).sum(),
    "matvec": lambda np_, x: np_.matvec(x, x[0]).sum(),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grads(name):
    f = GRADS[name]
    close(ftrans.grad(lambda x: f(fjnp, x))(X), jax.grad(lambda x: f(jjnp, x))(X), 1e-3)


def test_roots_traced_needs_strip_zeros_false():
    p = np.array([0.0, 1.0, -3.0, 2.0], np.float32)
    with pytest.raises(ftrans.errors.ConcretizationTypeError, match="strip_zeros"):
        ftrans.jit(fjnp.roots)(p)
    ours = ftrans.jit(lambda p: fjnp.roots(p, strip_zeros=False))(p)
    theirs = jax.jit(lambda p: jjnp.roots(p, strip_zeros=False))(p)
    np.testing.assert_allclose(np.sort_complex(np.asarray(ours)[:2]), np.sort_complex(np.asarray(theirs)[:2]), 1e-5)
    assert np.isnan(np.asarray(ours)[2]) and np.isnan(np.asarray(theirs)[2])


@pytest.mark.parametrize("call,exc,match", [
    (lambda np_: np_.place(X, X > 0, np.float32(1)), ValueError, "in-place"),
    (lambda np_: np_.vectorize(lambda a: a, excluded={-1})(X), ValueError, "negative"),
    (lambda np_: np_.vectorize(lambda a, b: a, signature="(n),(n)->()")(X, np.ones(5)), ValueError, "inconsistent"),
    (lambda np_: np_.vectorize(lambda a: a, signature="(n)->(")(X), ValueError, "signature"),
    (lambda np_: np_.vectorize(lambda *a: a, signature="(),()->(),(),()")(1, 2), TypeError, "wrong number of output"),
    (lambda np_: np_.vectorize(np_.dot, signature="(n,m),(m,k)->(n,k),()")(X[:2, :2], X[:2, :2]), TypeError,
     "must be a tuple"),
    (lambda np_: np_.vectorize(lambda a, b: a, signature="(k),(k)->(k)")(X[0], None), ValueError, "None at locations"),
    (lambda np_: np_.piecewise(X, [X > 0], [1, 2, 3]), ValueError, "functions"),
    (lambda np_: np_.gradient(X, edge_order=2), NotImplementedError, "edge_order"),
    (lambda np_: np_.gradient(X[:1]), ValueError, "at least 2"),
    (lambda np_: np_.block([[X], X]), ValueError, "depth"),
    (lambda np_: np_.polyfit(XS, YS, -1), ValueError, "deg"),
    (lambda np_: np_.histogramdd(PTS, bins=[2, 2]), ValueError, "bin for each dimension"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc):
        call(jjnp)
    with pytest.raises(exc, match=match):
        call(fjnp)


def test_names_match_jax():
    missing = {n for n in dir(jjnp) if not n.startswith("_")} - set(dir(fjnp))
    added = {"angle", "apply_along_axis", "apply_over_axes", "block", "extract", "gradient", "histogram2d",
             "histogramdd", "matvec", "piecewise", "place", "poly", "polydiv", "polyfit", "roots", "vecmat",
             "vectorize"}
    assert not (missing & added)


def test_piecewise_traces_each_function_once():
    def g(x):
        g.num_traces += 1
        return x

    g.num_traces = 0
    x = fjnp.arange(10.0)
    for _ in range(5):
        out = fjnp.piecewise(x, [x < 3], [g, 0.0])
    assert g.num_traces == 1
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jjnp.piecewise(jjnp.arange(10.0), [jjnp.arange(10.0) < 3], [g, 0.0])))


@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_vectorize_follows_numpy_rank_promotion(mode):
    # Loop axes of different ranks (0-d operands aside) raise or warn under the option, as in JAX.
    f = fjnp.vectorize(fjnp.add, signature="(),()->()")
    g = fjnp.vectorize(fjnp.dot, signature="(n),(n)->()")
    with ftrans.numpy_rank_promotion(mode):
        if mode == "raise":
            with pytest.raises(ValueError, match="rank"):
                f(np.zeros((2, 2)), np.zeros(2))
            with pytest.raises(ValueError, match="rank"):
                g(np.zeros((4, 3)), np.zeros(3))
        else:
            with pytest.warns(UserWarning, match="rank promotion"):
                f(np.zeros((2, 2)), np.zeros(2))
        assert f(np.zeros((2, 2)), np.float32(1)).shape == (2, 2)  # a 0-d operand is no rank promotion
        assert g(np.zeros((4, 3)), np.ones((4, 3))).shape == (4,)
    j = jjnp.vectorize(jjnp.dot, signature="(n),(n)->()")
    with jax.numpy_rank_promotion("raise"), pytest.raises(ValueError, match="rank"):
        j(np.zeros((4, 3)), np.zeros(3))
