"""Linear algebra (lax.linalg, numpy.linalg, scipy.linalg) against jax: values, jit, gradients, vmap, errors.

Matrices are built well conditioned (``Q diag(d) Qᵀ`` with ``d`` in [1, 3] for
the positive-definite ones, a random matrix plus a multiple of the identity for
general ones) over hypothesis-drawn sizes and batch shapes.  Decompositions
whose factors are unique only up to signs are compared through invariants
(reconstructions, ``|R|``, singular values, projectors).
"""

from __future__ import annotations

import functools
import re
from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ftrans
import ftrans.numpy as fnp
import ftrans.scipy.linalg as fsl
from ftrans import lax as flax
from ftrans.test_util import check_grads
from tests.backend_util import cpu_only, host_oracle
from tests.hypothesis_budget import examples

BATCHES = [(), (2,), (2, 3)]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def spd(rng, n, batch=(), dtype=np.float32, lo=1.0, hi=3.0):
    q, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
    d = rng.uniform(lo, hi, batch + (n,))
    return ((q * d[..., None, :]) @ np.swapaxes(q, -1, -2)).astype(dtype)


def general(rng, m, n, batch=(), dtype=np.float32):
    a = rng.standard_normal(batch + (m, n))
    k = min(m, n)
    a[..., range(k), range(k)] += 3.0 * np.sign(a[..., range(k), range(k)] + 0.5)
    return a.astype(dtype)


def close(got, want, tol=2e-3):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


shapes = st.tuples(st.integers(1, 5), st.sampled_from(BATCHES), st.integers(0, 2**16))


# ---------------------------------------------------------------- values, eager and jit


@settings(max_examples=examples(6), deadline=None)
@given(shapes)
def test_factorizations_match_jax(args):
    n, batch, seed = args
    rng = _rng(seed)
    a = spd(rng, n, batch)
    g = general(rng, n, n, batch)
    # the oracle as one jitted jax program (eagerly, jax compiles each operation on its own)
    jchol, (jlu, jpiv, jperm), jw, jsv, jr = _factorizations_oracle(a, g)
    for f in (lambda x: x, ftrans.jit):
        close(f(flax.linalg.cholesky)(a), jchol)
        lu, piv, perm = f(flax.linalg.lu)(g)
        close(lu, jlu)
        np.testing.assert_array_equal(piv, jpiv)
        np.testing.assert_array_equal(perm, jperm)
        w = f(fnp.linalg.eigvalsh)(a)
        close(w, jw)
        v = f(fnp.linalg.eigh)(a).eigenvectors
        close(np.asarray(v) @ (np.asarray(w)[..., None] * np.swapaxes(np.asarray(v), -1, -2)), a)
        close(f(fnp.linalg.svdvals)(g), jsv)
        q, r = f(fnp.linalg.qr)(g)
        close(np.abs(np.asarray(r)), np.abs(np.asarray(jr)))
        close(np.asarray(q) @ np.asarray(r), g)


@jax.jit
def _factorizations_oracle(a, g):
    return (jax.lax.linalg.cholesky(a), jax.lax.linalg.lu(g), jnp.linalg.eigvalsh(a), jnp.linalg.svdvals(g),
            jnp.linalg.qr(g).R)


@settings(max_examples=examples(6), deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.sampled_from(BATCHES[:2]), st.integers(0, 2**16),
       st.booleans())
def test_rectangular_decompositions(m, n, batch, seed, full):
    g = general(_rng(seed), m, n, batch)
    q, r = fnp.linalg.qr(g, mode="complete" if full else "reduced")
    (jq, jr), (ju, js, jvh), (jlu, jpiv, jperm) = _rectangular_oracle(g, full)
    assert q.shape == jq.shape and r.shape == jr.shape
    close(np.asarray(q) @ np.asarray(r), g)
    close(np.abs(np.asarray(r)), np.abs(np.asarray(jr)))
    u, s, vh = ftrans.jit(lambda x: fnp.linalg.svd(x, full_matrices=full))(g)
    assert (u.shape, s.shape, vh.shape) == (ju.shape, js.shape, jvh.shape)
    close(s, js)
    k = min(m, n)
    close((np.asarray(u)[..., :, :k] * np.asarray(s)[..., None, :]) @ np.asarray(vh)[..., :k, :], g)
    lu, piv, perm = ftrans.jit(flax.linalg.lu)(g)
    close(lu, jlu)
    np.testing.assert_array_equal(perm, jperm)


@partial(jax.jit, static_argnums=1)
def _rectangular_oracle(g, full):
    return (jnp.linalg.qr(g, mode="complete" if full else "reduced"), jnp.linalg.svd(g, full_matrices=full),
            jax.lax.linalg.lu(g))


def _spd_b(seed):
    rng = _rng(seed)
    return spd(rng, 4, (2,)), general(rng, 4, 4, (2,)), rng.standard_normal((2, 4, 3)).astype(np.float32), \
        rng.standard_normal(4).astype(np.float32)


NUMPY_CASES = {
    "solve_vector": lambda m, a, g, b, v: m.linalg.solve(a[0], v),
    "solve_matrix": lambda m, a, g, b, v: m.linalg.solve(a, b),
    "solve_broadcast": lambda m, a, g, b, v: m.linalg.solve(a, b[0]),
    "inv": lambda m, a, g, b, v: m.linalg.inv(g),
    "det": lambda m, a, g, b, v: m.linalg.det(g),
    "slogdet": lambda m, a, g, b, v: tuple(m.linalg.slogdet(g)),
    "pinv": lambda m, a, g, b, v: m.linalg.pinv(g[:, :3]),
    "lstsq": lambda m, a, g, b, v: m.linalg.lstsq(g[0, :, :3], v)[:3],
    "matrix_power": lambda m, a, g, b, v: m.linalg.matrix_power(a, 3),
    "matrix_power_neg": lambda m, a, g, b, v: m.linalg.matrix_power(a, -2),
    "matrix_rank": lambda m, a, g, b, v: m.linalg.matrix_rank(g),
    "cond": lambda m, a, g, b, v: m.linalg.cond(a),
    "cond_1": lambda m, a, g, b, v: m.linalg.cond(a, 1),
    "norm_2": lambda m, a, g, b, v: m.linalg.norm(g, 2, axis=(1, 2)),
    "norm_nuc": lambda m, a, g, b, v: m.linalg.norm(g[0], "nuc"),
    "matrix_norm": lambda m, a, g, b, v: m.linalg.matrix_norm(g, ord=-2),
    "vector_norm": lambda m, a, g, b, v: m.linalg.vector_norm(g, ord=3),
    "cross": lambda m, a, g, b, v: m.linalg.cross(g[..., :3], b[..., :3]),
    "outer": lambda m, a, g, b, v: m.linalg.outer(v, v),
    "tensorsolve": lambda m, a, g, b, v: m.linalg.tensorsolve(g[0].reshape(4, 2, 2), v),
    "tensorinv": lambda m, a, g, b, v: m.linalg.tensorinv(a[0].reshape(4, 2, 2), ind=1),
    "multi_dot": lambda m, a, g, b, v: m.linalg.multi_dot([v, g[0], a[0], v]),
    "trace": lambda m, a, g, b, v: m.linalg.trace(g),
    "diagonal": lambda m, a, g, b, v: m.linalg.diagonal(g, offset=1),
    "matrix_transpose": lambda m, a, g, b, v: m.linalg.matrix_transpose(b),
    "vecdot": lambda m, a, g, b, v: m.linalg.vecdot(g, a),
    "eigvals": lambda m, a, g, b, v: m.sort(m.linalg.eigvals(g)),
    "cholesky_upper": lambda m, a, g, b, v: m.linalg.cholesky(a, upper=True),
    "qr_r": lambda m, a, g, b, v: m.abs(m.linalg.qr(g, mode="r")),
    "svd_hermitian": lambda m, a, g, b, v: m.linalg.svd(a, hermitian=True, compute_uv=False),
}


@functools.cache
def _jax_numpy_cases():
    """jax's value of every case, from one jax program (a program per case was mostly fixed compile cost)."""
    return jax.jit(lambda *xs: {name: fn(jnp, *xs) for name, fn in NUMPY_CASES.items()})(*_spd_b(7))


@pytest.mark.parametrize("name", sorted(NUMPY_CASES))
def test_numpy_linalg_matches_jax(name):
    fn = NUMPY_CASES[name]
    args = _spd_b(7)
    want = _jax_numpy_cases()[name]
    for got in (fn(fnp, *args), ftrans.jit(lambda *xs: fn(fnp, *xs))(*args)):
        for x, y in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            close(x, y)


SCIPY_CASES = {
    "solve_triangular": lambda m, a, g, b, v: m.solve_triangular(a, b, lower=True),
    "solve_triangular_T": lambda m, a, g, b, v: m.solve_triangular(a[0], v, trans=1),
    "cho_solve_upper": lambda m, a, g, b, v: m.cho_solve(m.cho_factor(a), b),
    "cho_solve_lower": lambda m, a, g, b, v: m.cho_solve(m.cho_factor(a, lower=True), b),
    "lu_factor": lambda m, a, g, b, v: m.lu_factor(g),
    "lu_solve": lambda m, a, g, b, v: m.lu_solve(m.lu_factor(g), b),
    "lu_solve_T": lambda m, a, g, b, v: m.lu_solve(m.lu_factor(g), b, trans=1),
    "lu": lambda m, a, g, b, v: m.lu(g[0, :3]),
    "lu_permute_l": lambda m, a, g, b, v: m.lu(g[0], permute_l=True),
    "inv": lambda m, a, g, b, v: m.inv(g),
    "det": lambda m, a, g, b, v: m.det(g),
    "solve_pos": lambda m, a, g, b, v: m.solve(a, b, assume_a="pos"),
    "solve_gen": lambda m, a, g, b, v: m.solve(g, b),
    "expm": lambda m, a, g, b, v: m.expm(g / 4),
    "expm_large": lambda m, a, g, b, v: m.expm(3 * g[0]),
    "expm_small": lambda m, a, g, b, v: m.expm(0.01 * g[0]),
    "block_diag": lambda m, a, g, b, v: m.block_diag(a[0], v, 3.0),
    "eigh_values": lambda m, a, g, b, v: m.eigh(a[0], eigvals_only=True),
    "qr_economic": lambda m, a, g, b, v: tuple(abs(x) for x in m.qr(g[0, :, :3], mode="economic")),
    "svd": lambda m, a, g, b, v: m.svd(g, compute_uv=False),
}


@functools.cache
def _jax_scipy_cases():
    """jax's value of every case, from one jax program (a program per case was mostly fixed compile cost)."""
    return jax.jit(lambda *xs: {name: fn(jsl, *xs) for name, fn in SCIPY_CASES.items()})(*_spd_b(11))


@pytest.mark.parametrize("name", sorted(SCIPY_CASES))
def test_scipy_linalg_matches_jax(name):
    fn = SCIPY_CASES[name]
    args = _spd_b(11)
    want = _jax_scipy_cases()[name]
    for got in (fn(fsl, *args), ftrans.jit(lambda *xs: fn(fsl, *xs))(*args)):
        for x, y in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            close(x, y, tol=5e-3 if "expm" in name else 2e-3)


@pytest.mark.parametrize("dtype", [np.complex64, np.float64])
def test_other_dtypes(dtype):
    with _x64():
        rng = _rng(3)
        g = general(rng, 3, 3, (2,), np.float64)
        a = spd(rng, 3, (2,), np.float64)
        if np.dtype(dtype).kind == "c":
            g = (g + 0.5j * rng.standard_normal(g.shape)).astype(dtype)
            a = (a + 0.3j * (lambda h: h - np.swapaxes(h, -1, -2))(rng.standard_normal(a.shape))).astype(dtype)
        chol, solve, eigvalsh, svdvals, det = jax.jit(lambda g, a: (
            jnp.linalg.cholesky(a), jnp.linalg.solve(g, a), jnp.linalg.eigvalsh(a), jnp.linalg.svdvals(g),
            jnp.linalg.det(g)))(g, a)
        close(fnp.linalg.cholesky(a), chol, 1e-4)
        close(ftrans.jit(fnp.linalg.cholesky)(a), chol, 1e-4)
        close(ftrans.jit(fnp.linalg.solve)(g, a), solve, 1e-4)
        close(ftrans.jit(fnp.linalg.eigvalsh)(a), eigvalsh, 1e-4)
        close(ftrans.jit(fnp.linalg.svdvals)(g), svdvals, 1e-4)
        close(ftrans.jit(fnp.linalg.det)(g), det, 1e-4)


class _x64:
    def __enter__(self):
        self.old = ftrans.config.enable_x64
        ftrans.config.update("enable_x64", True)
        jax.config.update("jax_enable_x64", True)

    def __exit__(self, *exc):
        ftrans.config.update("enable_x64", self.old)
        jax.config.update("jax_enable_x64", False)


# ---------------------------------------------------------------- gradients


def _loss(lib, fn):
    def loss(x):
        outs = jax.tree_util.tree_leaves(fn(lib, x))
        return sum(lib.sum(lib.sin(o)) for o in outs)
    return loss


GRAD_CASES = {
    "cholesky": (lambda m, x: m.linalg.cholesky(x), "spd"),
    "eigh_values": (lambda m, x: m.linalg.eigvalsh(x), "spd"),
    "eigh_projector": (lambda m, x: (lambda v: v[..., :, -1:] * v[..., None, :, -1])(m.linalg.eigh(x)[1]), "spd"),
    "svdvals": (lambda m, x: m.linalg.svdvals(x), "general"),
    "svd_reconstruct": (lambda m, x: (lambda u, s, vh: (u * s[..., None, :]) @ vh)(
        *m.linalg.svd(x, full_matrices=False)), "wide"),
    "svd_u_abs": (lambda m, x: m.abs(m.linalg.svd(x, full_matrices=False)[0]), "tall"),
    "qr": (lambda m, x: m.abs(m.linalg.qr(x)[1]), "tall"),
    "qr_q": (lambda m, x: m.linalg.qr(x)[0] * m.sign(m.diagonal(m.linalg.qr(x)[1], axis1=-2, axis2=-1))[..., None, :],
             "tall"),
    "lu": (lambda m, x: (m if m is jnp else flax).linalg.lu(x)[0] if m is not jnp else jax.lax.linalg.lu(x)[0],
           "general"),
    "solve": (lambda m, x: m.linalg.solve(x, x[..., :1] + 1.0), "general"),
    "inv": (lambda m, x: m.linalg.inv(x), "general"),
    "det": (lambda m, x: m.linalg.det(x), "general"),
    "slogdet": (lambda m, x: m.linalg.slogdet(x)[1], "general"),
    "pinv": (lambda m, x: m.linalg.pinv(x), "tall"),
    "triangular_solve": (lambda m, x: (flax if m is fnp else jax.lax).linalg.triangular_solve(
        x, x + 1.0, left_side=True, lower=True), "spd"),
    "triangular_solve_right_T": (lambda m, x: (flax if m is fnp else jax.lax).linalg.triangular_solve(
        x, x * 2.0, left_side=False, lower=False, transpose_a=True), "spd"),
    "expm": (lambda m, x: (fsl if m is fnp else jsl).expm(x / 3), "general"),
    # jax's factors the upper triangle mirrored explicitly: jax 0.11's cholesky JVP (ftrans's) gives the unread
    # triangle no cotangent, jax 0.10's gave it one
    "cho_solve": (lambda m, x: fsl.cho_solve(fsl.cho_factor(x), x[..., :2]) if m is fnp else
                  jsl.cho_solve(jsl.cho_factor(jnp.triu(x) + jnp.triu(x, 1).mT), x[..., :2]), "spd"),
}


def _grad_inputs():
    rng = _rng(5)
    xs = {"spd": spd(rng, 4, (2,)), "general": general(rng, 4, 4, (2,)), "tall": general(rng, 5, 3, (2,)),
          "wide": general(rng, 3, 5, (2,))}
    return {kind: x.astype(np.float32) for kind, x in xs.items()}


@functools.cache
def _jax_gradients():
    """jax's gradient of every case's loss, from one jitted jax program (eager jax compiles op by op, and a
    program per case was mostly fixed compile cost)."""
    return jax.jit(lambda xs: {name: jax.grad(_loss(jnp, fn))(xs[kind])
                               for name, (fn, kind) in GRAD_CASES.items()})(_grad_inputs())


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_jax(name):
    fn, kind = GRAD_CASES[name]
    x = _grad_inputs()[kind]
    # Each case's loss is a sum over the batch of terms that read one matrix each, so the gradient over the
    # batch is also the vmapped per-matrix gradient: jax.vmap(jax.grad(loss))(x) equals it bit for bit
    # (checked for every case), and compiling it as well doubled the oracle's cost.
    want = vwant = _jax_gradients()[name]
    close(ftrans.grad(_loss(fnp, fn))(x), want, 5e-3)
    close(ftrans.jit(ftrans.grad(_loss(fnp, fn)))(x), want, 5e-3)
    # vmap over the batch axis of the gradient, against jax.vmap
    close(ftrans.vmap(ftrans.grad(_loss(fnp, fn)))(x), vwant, 5e-3)


def test_check_grads_float64():
    with _x64():
        rng = _rng(9)
        a = spd(rng, 3, (), np.float64)
        g = general(rng, 3, 3, (), np.float64)
        check_grads(lambda x: fnp.linalg.cholesky(x), (a,), order=2, modes=("fwd", "rev"))
        check_grads(lambda x: fnp.linalg.det(x), (g,), order=2, modes=("fwd", "rev"))
        check_grads(lambda x: fnp.linalg.eigvalsh(x), (a,), order=1, modes=("fwd", "rev"))
        check_grads(lambda x: fnp.linalg.solve(x, a), (g,), order=1, modes=("fwd", "rev"))
        check_grads(lambda x: fsl.expm(x / 4), (g,), order=1, modes=("fwd", "rev"))
        check_grads(lambda b: flax.linalg.triangular_solve(a, b, left_side=True, lower=True), (g,), order=1,
                    modes=("fwd", "rev"))


def test_vmap_of_factorizations_matches_jax():
    rng = _rng(12)
    a = spd(rng, 3, (4,))
    b = rng.standard_normal((3, 2)).astype(np.float32)
    at = np.moveaxis(a, 0, 2)
    piv = np.array([[2, 2, 2], [1, 2, 2]], np.int32)
    tri = np.tril(a)
    # the oracle: every jax.vmap in one jitted program (eagerly, jax compiles each operation anew)
    chol, solve0, solve1, det, eigvalsh, svdvals, perm, trisolve = jax.jit(lambda a, b, at, piv, tri: (
        jax.vmap(jnp.linalg.cholesky)(a), jax.vmap(jnp.linalg.solve, in_axes=(0, None))(a, b),
        jax.vmap(jnp.linalg.solve, in_axes=(None, 1), out_axes=1)(a[0], b),
        jax.vmap(jnp.linalg.det, in_axes=2)(at), jax.vmap(jnp.linalg.eigvalsh)(a),
        jax.vmap(jnp.linalg.svdvals, in_axes=1)(a),
        jax.vmap(lambda p: jax.lax.linalg.lu_pivots_to_permutation(p, 4))(piv),
        jax.vmap(lambda t: jax.lax.linalg.triangular_solve(t, b, left_side=True, lower=True))(tri)))(a, b, at, piv, tri)
    close(ftrans.vmap(fnp.linalg.cholesky)(a), chol)
    close(ftrans.vmap(fnp.linalg.solve, in_axes=(0, None))(a, b), solve0)
    close(ftrans.vmap(fnp.linalg.solve, in_axes=(None, 1), out_axes=1)(a[0], b), solve1)
    close(ftrans.vmap(fnp.linalg.det, in_axes=2)(at), det)
    close(ftrans.vmap(fnp.linalg.eigvalsh)(a), eigvalsh)
    close(ftrans.jit(ftrans.vmap(fnp.linalg.svdvals, in_axes=1))(a), svdvals)
    np.testing.assert_array_equal(ftrans.vmap(lambda p: flax.linalg.lu_pivots_to_permutation(p, 4))(piv), perm)
    close(ftrans.vmap(lambda t: flax.linalg.triangular_solve(t, b, left_side=True, lower=True))(tri), trisolve)


# ---------------------------------------------------------------- failures and errors


def test_cholesky_of_indefinite_matrix_is_nan_as_in_jax():
    bad = np.array([[[1.0, 2.0], [2.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]]], np.float32)
    want = np.asarray(jnp.linalg.cholesky(bad))
    for got in (fnp.linalg.cholesky(bad), ftrans.jit(fnp.linalg.cholesky)(bad)):
        got = np.asarray(got)
        assert np.isnan(got[0]).any()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # NaN on and below the diagonal, as JAX
        close(got[1], want[1])


_HERE = re.escape(__file__.split("/")[-1])


@pytest.mark.parametrize("call", [
    lambda: fnp.linalg.cholesky(np.ones((2, 3), np.float32)),
    lambda: fnp.linalg.inv(np.ones((2, 3), np.float32)),
    lambda: fnp.linalg.det(np.ones((3,), np.float32)),
    lambda: fnp.linalg.eigh(np.ones((4, 2, 3), np.float32)),
    lambda: fnp.linalg.solve(np.ones((3, 3), np.float32), np.ones((4,), np.float32)),
    lambda: fnp.linalg.solve(np.ones((2, 3, 3), np.float32), np.ones((4, 3, 1), np.float32)),
    lambda: fsl.solve_triangular(np.ones((3, 3), np.float32), np.ones((4,), np.float32)),
    lambda: flax.linalg.triangular_solve(np.ones((2, 3, 3), np.float32), np.ones((3, 3, 3), np.float32)),
    lambda: flax.linalg.qr(np.ones((3,), np.float32)),
    lambda: ftrans.jit(fnp.linalg.cholesky)(np.ones((2, 3), np.float32)),
])
def test_bad_shapes_raise_errors_naming_the_users_line(call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    msg = str(info.value)
    assert re.search(_HERE + r":\d+", msg), msg
    assert "shape" in msg


@cpu_only("the lowering for the CPU calls LAPACK; a GPU's calls cuSOLVER/cuBLAS")
def test_lowering_uses_lapack_custom_calls():
    a = spd(_rng(1), 3)
    text = ftrans.jit(lambda x: fsl.solve_triangular(x, x, lower=True)).lower(a).as_text()
    assert "stablehlo.custom_call @lapack_strsm_ffi" in text and "side = 76 : ui8" in text
    for fn, target in [(fnp.linalg.cholesky, "lapack_spotrf_ffi"), (flax.linalg.lu, "lapack_sgetrf_ffi"), (fnp.linalg.qr, "lapack_sorgqr_ffi"),
                       (fnp.linalg.eigh, "lapack_ssyevd_ffi"), (fnp.linalg.svd, "lapack_sgesdd_ffi"),
                       (fnp.linalg.eig, "lapack_sgeev_ffi")]:
        assert f"stablehlo.custom_call @{target}(" in ftrans.jit(fn).lower(a).as_text()


_EMPTY_NAMES = ["inv", "det", "slogdet", "solve", "cholesky", "qr", "svd", "eigh"]


def _empty_args(name, shape):
    a = np.zeros(shape, np.float32)
    return (a, np.zeros(shape[:-1] + (1,), np.float32)) if name == "solve" else (a,)


@functools.cache
def _jax_empty(shape):
    """jax's answer for every function at ``shape``, from one jitted program (a program per function was
    mostly fixed compile cost)."""
    return jax.jit(lambda args: {name: getattr(jnp.linalg, name)(*args[name]) for name in _EMPTY_NAMES})(
        {name: _empty_args(name, shape) for name in _EMPTY_NAMES})


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
@pytest.mark.parametrize("name", _EMPTY_NAMES)
def test_empty_matrices_like_jax(name, shape):
    """0x0 matrices (the array API suite draws them): every function answers as jax does, eagerly and jitted."""
    args = _empty_args(name, shape)
    want = jax.tree_util.tree_leaves(_jax_empty(shape)[name])
    for f in (getattr(fnp.linalg, name), ftrans.jit(getattr(fnp.linalg, name))):
        got = jax.tree_util.tree_leaves(f(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w))
            assert np.shape(g) == np.shape(w)


def _tridiagonal(batch, m, n, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    dl, du = (rng.normal(size=batch + (m,)).astype(dtype) for _ in range(2))
    d = (rng.normal(size=batch + (m,)) + 4.0).astype(dtype)  # diagonally dominant: no pivoting needed
    b = rng.normal(size=batch + (m, n)).astype(dtype)
    return dl, d, du, b


@pytest.mark.parametrize("batch,m,n", [((), 1, 1), ((), 5, 3), ((2,), 4, 2), ((2, 3), 6, 1), ((), 0, 2)])
def test_tridiagonal_solve_matches_jax(batch, m, n):
    args = _tridiagonal(batch, m, n, seed=m + n)
    got = flax.linalg.tridiagonal_solve(*args)
    with host_oracle():  # the eager call runs on the host (and jax's GPU rule fails on m = 0)
        want = jax.lax.linalg.tridiagonal_solve(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    jitted = ftrans.jit(flax.linalg.tridiagonal_solve)(*args)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_tridiagonal_solve_vmap_and_grad_match_jax():
    dl, d, du, b = _tridiagonal((4,), 10, 5, seed=1)
    bb = np.stack([b[0], 2 * b[0], -b[0]], -1)  # [10, 5, 3]: batched over the last axis
    for in_axes, args in [((1, 1, 1, 2), (dl.T.copy(), d.T.copy(), du.T.copy(), np.moveaxis(b, 0, -1))),
                          ((None, None, None, 2), (dl[0], d[0], du[0], bb)),
                          ((0, 0, 0, None), (dl, d, du, b[0]))]:
        got = ftrans.vmap(flax.linalg.tridiagonal_solve, in_axes=in_axes)(*args)
        want = jax.jit(jax.vmap(jax.lax.linalg.tridiagonal_solve, in_axes=in_axes))(*args)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)

    def loss(lib):
        return lambda *a: (lib.linalg.tridiagonal_solve(*a) ** 2).sum()

    got = ftrans.grad(loss(flax), argnums=(0, 1, 2, 3))(dl, d, du, b)
    want = jax.jit(jax.grad(loss(jax.lax), argnums=(0, 1, 2, 3)))(dl, d, du, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


def test_tridiagonal_solve_bad_operands():
    dl, d, du, b = _tridiagonal((), 4, 2, seed=0)
    for args in [(dl[:3], d, du, b), (dl, d, du, b[:3]), (dl.astype(np.int32), d, du, b),
                 (dl.astype(np.complex64), d, du, b)]:
        with pytest.raises(TypeError):
            jax.lax.linalg.tridiagonal_solve(*args)
        with pytest.raises(TypeError, match="tridiagonal_solve") as e:
            flax.linalg.tridiagonal_solve(*args)
        assert e.value.__class__.__module__.startswith("ftrans")
