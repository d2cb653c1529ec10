"""Collectives over named axes (``psum``, ``pmean``, ``pmax``, ``pmin``, ``all_gather``, ``all_to_all``,
``ppermute``, ``psum_scatter``, ``axis_index``) under ``vmap(..., axis_name=...)``, against ``jax.vmap``.

Each program is written once against a ``(transforms, numpy, lax)`` triple and run with ftrans and with
jax on the same inputs: alone, in nested vmaps with two names, under ``jit``, under ``grad`` (inside and
outside the vmap) and ``jvp``.  Where jax's vmap itself lacks a case (partial permutations, gathering over
several names, the transpose of ``all_to_all``) the result is checked against NumPy or against the
adjoint identity ``<f(x), c> == <x, f^T(c)>``.  Bad inputs raise the exception class jax raises.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import FtransNameError

FT, JX = (ftrans, fjnp, flax), (jax, jjnp, jlax)
RNG = np.random.default_rng(0)
HERE = os.path.abspath(__file__)


def arr(*shape, dtype=np.float32):
    return RNG.normal(size=shape).astype(dtype)


def assert_tree(got, want, tol=1e-5):
    g, gt = jax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.shape, a.dtype) == (b.shape, b.dtype), ((a.shape, a.dtype), (b.shape, b.dtype))
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def both(build, *args, tol=1e-5):
    """``build(t, np, lax)`` run with ftrans and with jax on the same arguments; the results must agree."""
    got = build(*FT)(*args)
    want = build(*JX)(*args)
    assert_tree(got, want, tol)
    return got


# ----------------------------------------------------------------------------
# Each collective alone

X = arr(4, 3)
CUBE = arr(3, 2, 3, 4)  # batch 3; per example (2, 3, 4): axis 1 has the batch size
TILES = arr(3, 6, 2, 3)  # per example (6, 2, 3): axes 0 and 2 split into 3 tiles

ALONE = {
    "psum": (lambda t, np_, lax: t.vmap(lambda v: lax.psum(v, "i"), axis_name="i"), X),
    "psum_in_axes_1": (lambda t, np_, lax: t.vmap(lambda v: lax.psum(v, "i"), in_axes=1, axis_name="i"), X),
    "psum_out_axes_none": (lambda t, np_, lax: t.vmap(lambda v: lax.psum(v, "i"), axis_name="i", out_axes=None), X),
    "psum_constant": (lambda t, np_, lax: t.vmap(lambda v: v * lax.psum(2.0, "i"), axis_name="i"), X),
    "psum_unmapped_array": (lambda t, np_, lax: t.vmap(lambda v: v + lax.psum(np_.ones(3), "i"), axis_name="i"), X),
    "psum_int": (lambda t, np_, lax: t.vmap(lambda v: lax.psum(v.astype(np_.int32), "i"), axis_name="i"), X * 4),
    "psum_bool": (lambda t, np_, lax: t.vmap(lambda v: lax.psum(v > 0, "i"), axis_name="i"), X),
    "psum_positional": (lambda t, np_, lax: t.vmap(lambda v: lax.psum(v, ("i", 0)), axis_name="i"), X),
    "psum_pytree": (lambda t, np_, lax: t.vmap(lambda v: lax.psum({"a": v, "b": (v * 2, v[0])}, "i"),
                                                 axis_name="i"), X),
    "pmean": (lambda t, np_, lax: t.vmap(lambda v: lax.pmean(v, "i"), axis_name="i"), X),
    "pmean_int": (lambda t, np_, lax: t.vmap(lambda v: lax.pmean(v.astype(np_.int32), "i"), axis_name="i"), X * 4),
    "pmax": (lambda t, np_, lax: t.vmap(lambda v: lax.pmax(v, "i"), axis_name="i"), X),
    "pmin": (lambda t, np_, lax: t.vmap(lambda v: lax.pmin(v, "i"), axis_name="i"), X),
    "pmax_bool": (lambda t, np_, lax: t.vmap(lambda v: lax.pmax(v > 1, "i"), axis_name="i"), X),
    "pmin_out_axes_1": (lambda t, np_, lax: t.vmap(lambda v: lax.pmin(v, "i"), axis_name="i", out_axes=1), X),
    "axis_index": (lambda t, np_, lax: t.vmap(lambda v: v * lax.axis_index("i"), axis_name="i"), X),
    "axis_index_alone": (lambda t, np_, lax: t.vmap(lambda v: lax.axis_index("i"), axis_name="i"), X),
    "all_gather": (lambda t, np_, lax: t.vmap(lambda v: lax.all_gather(v, "i"), axis_name="i"), X),
    "all_gather_axis_1": (lambda t, np_, lax: t.vmap(lambda v: lax.all_gather(v, "i", axis=1), axis_name="i"), X),
    "all_gather_axis_neg": (lambda t, np_, lax: t.vmap(lambda v: lax.all_gather(v, "i", axis=-1), in_axes=1,
                                                         axis_name="i"), X),
    "all_gather_tiled": (lambda t, np_, lax: t.vmap(lambda v: lax.all_gather(v, "i", tiled=True), axis_name="i"),
                         X),
    "all_gather_tiled_axis_1": (lambda t, np_, lax: t.vmap(lambda v: lax.all_gather(v, "i", axis=1, tiled=True),
                                                             axis_name="i"), CUBE),
    "all_gather_out_axes_none": (lambda t, np_, lax: t.vmap(lambda v: lax.all_gather(v, "i"), axis_name="i",
                                                              out_axes=None), X),
    "all_gather_unmapped": (lambda t, np_, lax: t.vmap(lambda v: v[0] + lax.all_gather(np_.arange(2.0), "i"),
                                                         axis_name="i"), X),
    "all_to_all_1_0": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 1, 0), axis_name="i"), CUBE),
    "all_to_all_1_2": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 1, 2), axis_name="i"), CUBE),
    "all_to_all_1_1": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 1, 1), axis_name="i"), CUBE),
    "all_to_all_in_axes_2": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 1, 0), in_axes=2,
                                                          axis_name="i"), np.moveaxis(CUBE, 0, 2).copy()),
    "all_to_all_tiled_0_2": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 0, 2, tiled=True),
                                                          axis_name="i"), TILES),
    "all_to_all_tiled_0_0": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True),
                                                          axis_name="i"), TILES),
    "all_to_all_tiled_2_1": (lambda t, np_, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 2, 1, tiled=True),
                                                          axis_name="i"), TILES),
    "ppermute_cycle": (lambda t, np_, lax: t.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]),
                                                    axis_name="i"), X),
    "ppermute_swap_in_axes_1": (lambda t, np_, lax: t.vmap(lambda v: lax.ppermute(v, "i", [(0, 2), (2, 0), (1, 1)]),
                                                             in_axes=1, axis_name="i"), X),
    "psum_scatter": (lambda t, np_, lax: t.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i"), arr(3, 3, 2)),
    "psum_scatter_dim_1": (lambda t, np_, lax: t.vmap(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1),
                                                        axis_name="i"), CUBE),
    "psum_scatter_tiled": (lambda t, np_, lax: t.vmap(lambda v: lax.psum_scatter(v, "i", tiled=True),
                                                        axis_name="i"), TILES),
}


@pytest.mark.parametrize("name", list(ALONE))
def test_collective_alone(name):
    build, x = ALONE[name]
    both(build, x)


def test_psum_of_a_python_scalar_is_the_axis_size_now():
    seen = []

    def f(v):
        n = flax.psum(1, "i")
        seen.append(n)
        return v * n

    np.testing.assert_allclose(ftrans.vmap(f, axis_name="i")(X), X * 4)
    assert seen == [4] and type(seen[0]) is int
    assert ftrans.vmap(lambda v: flax.pmean(1.0, "i"), axis_name="i", out_axes=None)(X) == 1.0


def test_negative_axes():
    f = ftrans.vmap(lambda v: (flax.all_to_all(v, "i", -1, -2, tiled=True), flax.all_to_all(v, "i", 2, 1, tiled=True),
                               flax.psum_scatter(v, "i", scatter_dimension=-3, tiled=True),
                               flax.psum_scatter(v, "i", scatter_dimension=0, tiled=True)), axis_name="i")
    a, b, c, d = f(TILES)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(c), np.asarray(d))


def test_partial_ppermute_fills_zeros():
    """jax's vmap only takes full permutations; unsent elements get zeros, as under pmap."""
    got = ftrans.vmap(lambda v: flax.ppermute(v, "i", [(0, 1), (1, 2)]), axis_name="i")(X)
    want = np.zeros_like(X)
    want[1], want[2] = X[0], X[1]
    np.testing.assert_array_equal(np.asarray(got), want)


def test_ppermute_int_pytree():
    xi = np.arange(12, dtype=np.int32).reshape(4, 3)
    got = ftrans.vmap(lambda v: flax.ppermute((v, v > 4), "i", [(3, 0)]), axis_name="i")(xi)
    assert np.asarray(got[0]).dtype == np.int32 and np.asarray(got[1]).dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(got[0]), np.stack([xi[3], 0 * xi[0], 0 * xi[0], 0 * xi[0]]))
    np.testing.assert_array_equal(np.asarray(got[1]), np.stack([xi[3] > 4] + [np.zeros(3, bool)] * 3))


# ----------------------------------------------------------------------------
# Two names


Y = arr(2, 3, 4)  # outer axis 'i' of size 2, inner 'j' of size 3


def _nested(t, np_, lax):
    def body(v):
        return {
            "i": lax.psum(v, "i"), "j": lax.psum(v, "j"), "ij": lax.psum(v, ("i", "j")),
            "max_ji": lax.pmax(v, ("j", "i")), "min_i": lax.pmin(v, "i"), "mean_ij": lax.pmean(v, ("i", "j")),
            "idx": lax.axis_index("i") * 10 + lax.axis_index("j"), "idx_ij": lax.axis_index(("i", "j")),
            "gather_i": lax.all_gather(v, "i"), "gather_j": lax.all_gather(v, "j", axis=1),
            "perm_i": lax.ppermute(v, "i", [(0, 1), (1, 0)]), "perm_j": lax.ppermute(v, "j", [(0, 2), (2, 1), (1, 0)]),
            "scatter_j": lax.psum_scatter(v[:3], "j"),
        }

    return t.vmap(t.vmap(body, axis_name="j"), axis_name="i")


def test_nested_two_names():
    both(_nested, Y)


def test_nested_inner_over_mapped_outer_dims():
    """The outer axis mapped at dimension 1 and the inner at 0: each rule carries the other's batch dimension."""
    def build(t, np_, lax):
        inner = t.vmap(lambda v: (lax.psum(v, "i") * lax.axis_index("j"), lax.all_gather(v, "i", axis=1),
                                  lax.all_to_all(v[:2, None] * np_.ones((2, 2)), "i", 0, 1)), axis_name="j")
        return t.vmap(inner, in_axes=1, axis_name="i")

    both(build, arr(3, 2, 2))


def test_same_name_shadows():
    def build(t, np_, lax):
        return t.vmap(t.vmap(lambda v: (lax.psum(v, "i"), lax.axis_index("i")), axis_name="i"), axis_name="i")

    both(build, Y)


def test_unnamed_inner_vmap_carries_the_outer_axis():
    def build(t, np_, lax):
        return t.vmap(t.vmap(lambda v: lax.all_gather(v, "i") + lax.psum(v, "i")), axis_name="i")

    both(build, Y)


def test_all_gather_over_two_names_is_row_major():
    got = ftrans.vmap(ftrans.vmap(lambda v: flax.all_gather(v, ("i", "j")), axis_name="j"), axis_name="i")(Y)
    want = np.broadcast_to(Y.reshape(6, 4), (2, 3, 6, 4))
    np.testing.assert_allclose(np.asarray(got), want)
    tiled = ftrans.vmap(ftrans.vmap(lambda v: flax.all_gather(v, ("i", "j"), tiled=True), axis_name="j"),
                        axis_name="i")(Y)
    np.testing.assert_allclose(np.asarray(tiled), np.broadcast_to(Y.reshape(24), (2, 3, 24)))


@pytest.mark.parametrize("tiled", [False, True])
@pytest.mark.parametrize("split,concat,in_axis", [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 0), (1, 0, 1)])
def test_all_to_all_over_two_names_matches_jax(split, concat, in_axis, tiled):
    """Several names act as one axis of their product size, indexed row-major (as jax's batching test)."""
    x = np.arange(64, dtype=np.float32).reshape(4, 4, 4)
    shape = [4, 4, 4]
    shape[in_axis:in_axis + 1] = [2, 2]

    def build(t, np_, lax):
        inner = t.vmap(lambda v: lax.all_to_all(v, ("i", "j"), split, concat, tiled=tiled), in_axes=in_axis,
                       axis_name="j")
        return t.vmap(inner, in_axes=in_axis, axis_name="i")

    got = both(build, x.reshape(shape))
    # Negative axes count from the end (jax's vmap asserts on them here).
    neg = ftrans.vmap(ftrans.vmap(lambda v: flax.all_to_all(v, ("i", "j"), split - 2, concat - 2, tiled=tiled),
                                  in_axes=in_axis, axis_name="j"), in_axes=in_axis, axis_name="i")
    np.testing.assert_array_equal(np.asarray(neg(x.reshape(shape))), np.asarray(got))


def test_all_to_all_over_two_names_grad_and_jit():
    y = arr(2, 2, 4, 3)
    c = arr(2, 2, 3, 4)

    def build(t, np_, lax):
        f = t.vmap(t.vmap(lambda v: lax.all_to_all(v, ("i", "j"), 0, 1), axis_name="j"), axis_name="i")
        return t.jit(t.grad(lambda v: (f(v) * c).sum()))

    both(build, y)


def test_all_to_all_over_two_names_checks_the_product_size():
    def build(t, lax):
        return t.vmap(t.vmap(lambda v: lax.all_to_all(v, ("i", "j"), 0, 0), axis_name="j"), axis_name="i")

    z = arr(2, 3, 5, 2)  # the split axis has 5 elements, the two axes 6
    with pytest.raises(ValueError):
        build(jax, jlax)(z)
    with pytest.raises(ValueError, match="size 6") as e:
        build(ftrans, flax)(z)
    _located(e)


@pytest.mark.parametrize("tiled", [False, True])
def test_psum_scatter_over_two_names_is_row_major(tiled):
    """jax's own vmap fails on this (an internal assertion); the result is checked against NumPy."""
    k = 2 if tiled else 1
    x = arr(2, 3, 6 * k, 5)
    got = ftrans.vmap(ftrans.vmap(lambda v: flax.psum_scatter(v, ("i", "j"), tiled=tiled), axis_name="j"),
                      axis_name="i")(x)
    total = x.sum((0, 1)).reshape(2, 3, k, 5)
    want = total if tiled else total[:, :, 0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------
# jit


def test_jit_of_vmap_lowers_without_collectives():
    def build(t, np_, lax):
        return t.jit(t.vmap(lambda v: lax.psum(v, "i") * lax.axis_index("i") + lax.all_gather(v, "i")[0],
                            axis_name="i"))

    both(build, X)
    jaxpr = ftrans.make_jaxpr(build(*FT))(X)
    names = {str(e.primitive) for e in jaxpr.jaxpr.eqns}
    assert not names & {"psum", "axis_index", "all_gather"}, names


def test_vmap_of_jit():
    def build(t, np_, lax):
        f = t.jit(lambda v: lax.psum(v, "i") * lax.axis_index("i") + lax.psum(1.0, "i") + lax.pmax(v, "i"))
        return t.vmap(f, axis_name="i")

    both(build, X)


def test_jit_inside_nested_vmaps():
    def build(t, np_, lax):
        f = t.jit(lambda v: lax.pmean(v, "i") - lax.psum(v, "j") + lax.axis_index(("i", "j")))
        return t.vmap(t.vmap(f, axis_name="j"), axis_name="i")

    both(build, Y)


# ----------------------------------------------------------------------------
# Differentiation


V = arr(4)


@pytest.mark.parametrize("name,fn", [
    ("psum", lambda np_, lax, v: lax.psum(v ** 2, "i")),
    ("pmean", lambda np_, lax, v: lax.pmean(np_.sin(v) * v, "i")),
    ("all_gather", lambda np_, lax, v: (lax.all_gather(v, "i") * np_.arange(4.0)).sum()),
    ("ppermute", lambda np_, lax, v: (lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]) * v).sum()),
    ("psum_scatter", lambda np_, lax, v: (lax.psum_scatter(v * np_.arange(4.0), "i") ** 2)),
    ("axis_index", lambda np_, lax, v: v * lax.axis_index("i")),
])
def test_vmap_of_grad(name, fn):
    both(lambda t, np_, lax: t.vmap(t.grad(lambda v: fn(np_, lax, v)), axis_name="i"), V)


@pytest.mark.parametrize("name,fn", [
    ("psum", lambda np_, lax, v: lax.psum(v ** 2, "i") * v),
    ("all_gather", lambda np_, lax, v: lax.all_gather(v, "i", tiled=True) * v[0]),
    ("all_to_all", lambda np_, lax, v: lax.all_to_all(v, "i", 0, 0) ** 2),
    ("ppermute", lambda np_, lax, v: lax.ppermute(np_.exp(v), "i", [(0, 3), (3, 0), (1, 2), (2, 1)])),
    ("psum_scatter", lambda np_, lax, v: lax.psum_scatter(v, "i", tiled=True) * 3.0),
])
def test_grad_of_vmap(name, fn):
    def build(t, np_, lax):
        return t.grad(lambda x: t.vmap(lambda v: fn(np_, lax, v), axis_name="i")(x).sum())

    both(build, arr(4, 4))


def test_grad_of_vmap_of_pmax_is_that_of_max():
    """Outside the vmap, pmax is batched into a max before differentiation (jax raises here instead)."""
    x = arr(4, 3)
    got = ftrans.grad(lambda x: (ftrans.vmap(lambda v: flax.pmax(v, "i") * v, axis_name="i")(x)).sum())(x)
    want = jax.grad(lambda x: (jjnp.max(x, axis=0) * x).sum())(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_jvp_through_collectives():
    def build(t, np_, lax):
        f = t.vmap(lambda v: lax.all_gather(v, "i") * lax.psum(v, "i") + lax.ppermute(v, "i", [(0, 1), (1, 0)]),
                   axis_name="i")
        return lambda x, dx: t.jvp(f, (x,), (dx,))

    both(build, arr(2, 3), arr(2, 3))


def test_grad_under_jit_inside_and_outside():
    loss = lambda np_, lax, v: lax.pmean(v ** 2, "i") + lax.psum(v, "i") * lax.axis_index("i")  # noqa: E731
    both(lambda t, np_, lax: t.jit(t.vmap(t.grad(lambda v: loss(np_, lax, v)), axis_name="i")), V)
    both(lambda t, np_, lax: t.vmap(t.jit(t.grad(lambda v: loss(np_, lax, v))), axis_name="i"), V)


def test_pmax_has_no_derivative_as_in_jax():
    for t, np_, lax in (FT, JX):
        with pytest.raises(NotImplementedError, match="pmax"):
            t.vmap(t.grad(lambda v, lax=lax: lax.pmax(v, "i")), axis_name="i")(V)


# ----------------------------------------------------------------------------
# Typical uses


def test_pmean_normalization():
    def build(t, np_, lax):
        def normalize(v):
            mu = lax.pmean(v, "i")
            var = lax.pmean((v - mu) ** 2, "i")
            return (v - mu) / np_.sqrt(var + 1e-5)

        return t.vmap(normalize, axis_name="i")

    out = both(build, arr(8, 3), tol=1e-4)
    np.testing.assert_allclose(np.asarray(out).mean(0), 0.0, atol=1e-5)
    both(lambda t, np_, lax: t.grad(lambda x: (build(t, np_, lax)(x) * np_.arange(24.0).reshape(8, 3)).sum()),
         arr(8, 3), tol=1e-3)


def test_per_example_gradients_averaged_with_pmean():
    xs, ys, w = arr(8, 3), arr(8), arr(3)

    def build(t, np_, lax):
        def loss(w, x, y):
            return (np_.tanh(x @ w) - y) ** 2

        def step(x, y, w):
            g = t.grad(loss)(w, x, y)
            return lax.pmean(g, "i"), g

        return t.vmap(step, in_axes=(0, 0, None), axis_name="i", out_axes=(None, 0))

    mean_g, per_ex = both(build, xs, ys, w, tol=1e-5)
    full = jax.grad(lambda w: jjnp.mean((jjnp.tanh(xs @ w) - ys) ** 2))(w)
    np.testing.assert_allclose(np.asarray(mean_g), full, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(per_ex).mean(0), full, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------
# Transposes: <f(x), c> == <x, f^T(c)> for the linear collectives under vmap


LINEAR = {
    "psum": (lambda v: flax.psum(v, "i"), (3, 2)),
    "all_gather": (lambda v: flax.all_gather(v, "i", axis=1), (3, 2)),
    "all_gather_tiled": (lambda v: flax.all_gather(v, "i", tiled=True), (3, 2)),
    "all_to_all": (lambda v: flax.all_to_all(v, "i", 1, 0), (3, 2, 3)),
    "all_to_all_tiled": (lambda v: flax.all_to_all(v, "i", 0, 1, tiled=True), (3, 6, 2)),
    "ppermute_partial": (lambda v: flax.ppermute(v, "i", [(0, 2), (2, 1)]), (3, 2)),
    "psum_scatter": (lambda v: flax.psum_scatter(v, "i", scatter_dimension=1), (3, 2, 3)),
    "psum_scatter_tiled": (lambda v: flax.psum_scatter(v, "i", tiled=True), (3, 6)),
}


@pytest.mark.parametrize("name", list(LINEAR))
def test_transpose_is_the_adjoint(name):
    f, shape = LINEAR[name]
    x = arr(*shape)
    fx = np.asarray(ftrans.vmap(f, axis_name="i")(x))
    c = arr(*fx.shape)
    ft_c = ftrans.vmap(lambda v, cv: ftrans.vjp(f, v)[1](cv)[0], axis_name="i")(x, c)
    np.testing.assert_allclose(np.vdot(fx, c), np.vdot(x, np.asarray(ft_c)), rtol=1e-4)


def test_grad_of_all_to_all_inside_vmap():
    """jax's vmap-of-grad of all_to_all fails on a shape check; the cotangent follows from the definition."""
    w = np.arange(24.0, dtype=np.float32).reshape(3, 2, 4)
    g = ftrans.vmap(ftrans.grad(lambda v: (flax.all_to_all(v, "i", 1, 0) * w).sum()), axis_name="i")(CUBE)
    # out_k[j, a, c] = x_j[a, k, c], so d/dx_j[a, k, c] of sum_k <out_k, w> is w[j, a, c] for every k.
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(w[:, :, None, :], CUBE.shape))


# ----------------------------------------------------------------------------
# Errors


def _located(excinfo):
    assert f"{HERE}:" in str(excinfo.value), str(excinfo.value)


def test_unbound_axis_name_in_vmap():
    with pytest.raises(NameError):
        jax.vmap(lambda v: jlax.psum(v, "j"), axis_name="i")(X)
    with pytest.raises(FtransNameError, match=r"unbound axis name: j") as e:
        ftrans.vmap(lambda v: flax.psum(v, "j"), axis_name="i")(X)
    msg = str(e.value)
    assert "'i'" in msg and "vmap(..., axis_name='j')" in msg and "pmap" in msg, msg
    _located(e)


@pytest.mark.parametrize("call", [
    lambda: flax.psum(X, "i"),
    lambda: flax.axis_index("i"),
    lambda: ftrans.jit(lambda v: flax.all_gather(v, "i"))(X),
    lambda: ftrans.vmap(lambda v: flax.ppermute(v, ("k"), [(0, 1)]))(X),
    lambda: ftrans.vmap(ftrans.grad(lambda v: flax.pmean(v, ("i", "z")).sum()), axis_name="i")(X),
])
def test_unbound_axis_name_outside(call):
    with pytest.raises(FtransNameError, match=r"unbound axis name: \w") as e:
        call()
    assert isinstance(e.value, NameError)
    _located(e)


# jax's vmap checks these two; for the others it asserts (ppermute) or computes without checking.
JAX_CHECKS = ("all_to_all_size", "all_gather_axis")


@pytest.mark.parametrize("name,build,exc,match", [
    ("all_to_all_size", lambda t, lax: t.vmap(lambda v: lax.all_to_all(v, "i", 0, 0), axis_name="i"),
     ValueError, "split axis"),
    ("all_gather_axis", lambda t, lax: t.vmap(lambda v: lax.all_gather(v, "i", axis=3), axis_name="i"),
     ValueError, "axis"),
    ("psum_scatter_size", lambda t, lax: t.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i"),
     ValueError, "scatter"),
    ("ppermute_duplicate", lambda t, lax: t.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (0, 2), (1, 0), (2, 3),
                                                                                (3, 2)]), axis_name="i"),
     ValueError, "twice"),
    ("ppermute_range", lambda t, lax: t.vmap(lambda v: lax.ppermute(v, "i", [(0, 9)]), axis_name="i"),
     ValueError, "out of range"),
])
def test_bad_arguments(name, build, exc, match):
    if name in JAX_CHECKS:
        with pytest.raises(exc):
            build(jax, jlax)(X)
    with pytest.raises(exc, match=match) as e:
        build(ftrans, flax)(X)
    _located(e)


def test_unsupported_arguments_are_named():
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        ftrans.vmap(lambda v: flax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), axis_name="i")(X)
    with pytest.raises(NotImplementedError, match="several axis names"):
        ftrans.vmap(ftrans.vmap(lambda v: flax.ppermute(v, ("i", "j"), []), axis_name="j"), axis_name="i")(Y)


def test_axis_owner_handles_collectives_through_its_trace():
    """The named-axis environment is core's; the trace owning an axis (a BatchTrace under vmap) computes the
    collective through ``process_collective``, so core binds it without knowing which transform owns the axis."""
    from ftrans.core import axis_env as core_axis_env
    from ftrans.transforms import batching

    assert batching.axis_env is core_axis_env.axis_env
    seen = []
    original = batching.BatchTrace.process_collective

    def spy(self, prim, args, params):
        seen.append(prim.name)
        return original(self, prim, args, params)

    batching.BatchTrace.process_collective = spy
    try:
        out = ftrans.vmap(lambda v: flax.psum(v, "i") + flax.axis_index("i"), axis_name="i")(X)
    finally:
        batching.BatchTrace.process_collective = original
    assert seen == ["psum", "axis_index"]
    np.testing.assert_allclose(np.asarray(out), jax.vmap(lambda v: jlax.psum(v, "i") + jlax.axis_index("i"),
                                                         axis_name="i")(X), rtol=1e-6)


@pytest.mark.parametrize("kind", ["while", "cond", "scan", "jit"])
def test_body_reading_the_axis_with_unbatched_operands_matches_jax(kind):
    """No operand is batched, yet the body reads axis_index: the loop / call is per element, as in jax."""
    def build(t, np_, lax):
        def per_element(x):
            if kind == "while":
                return lax.while_loop(lambda v: v < lax.axis_index("i"), lambda v: v + 2, x)
            if kind == "cond":
                return lax.cond(x < 5, lambda v: v + lax.axis_index("i"), lambda v: v, x)
            if kind == "scan":
                return lax.scan(lambda c, _: (c + lax.axis_index("i"), None), x, None, length=3)[0]
            return t.jit(lambda v: v * lax.axis_index("i"))(x)

        return t.jit(t.vmap(lambda _, x: per_element(x), axis_name="i", in_axes=(0, None)))

    got = both(build, np.zeros(4, np.float32), np.int32(1))
    assert got.shape == (4,)
    if kind == "while":  # eager, and a jitted loop (its body batched as a jaxpr) on an unbatched operand
        for f in (lax_while, ftrans.jit(lax_while)):
            eager = ftrans.vmap(lambda _, x, f=f: f(x), axis_name="i", in_axes=(0, None))
            np.testing.assert_array_equal(np.asarray(eager(np.zeros(4), np.int32(0))), [0, 2, 2, 4])


def lax_while(x):
    return flax.while_loop(lambda v: v < flax.axis_index("i"), lambda v: v + 2, x)
