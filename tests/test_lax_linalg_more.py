"""lax.linalg's reductions and helpers against jax: tridiagonal, tridiagonal_solve (pivoting, perturbed),
hessenberg, householder_product, ormqr, qr(pivoting=True), cholesky_update, symmetric_product, qdwh, the
algorithm enums and the ``*_p`` primitive objects (eager, jit, vmap, derivatives, errors)."""

from __future__ import annotations

import jax
import jax.lax.linalg as JL
import numpy as np
import pytest

import ftrans
import ftrans.lax.linalg as FL
from ftrans.errors import FtransShapeError, FtransTypeError
from tests.backend_util import cpu_only, host_oracle, on_cpu

DTYPES = [np.float32, np.complex64]


def _gen(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _close(got, want, tol=1e-4):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_matches_jax(dtype, lower):
    a = _gen(np.random.default_rng(0), (2, 5, 5), dtype)
    want = JL.tridiagonal(a, lower=lower)
    _close(FL.tridiagonal(a, lower=lower), want)
    _close(ftrans.jit(lambda a: FL.tridiagonal(a, lower=lower))(a), want)
    _close(ftrans.vmap(lambda a: FL.tridiagonal(a, lower=lower))(a), want)


def test_tridiagonal_errors():
    with pytest.raises(FtransShapeError, match="square"):
        FL.tridiagonal(np.ones((2, 3), np.float32))
    with pytest.raises(FtransShapeError, match="non-empty"):
        FL.tridiagonal(np.ones((0, 0), np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("perturb", [False, True])
def test_tridiagonal_solve_matches_jax(dtype, perturb):
    rng = np.random.default_rng(1)
    dl, d, du = (_gen(rng, (3, 6), dtype) for _ in range(3))
    b = _gen(rng, (3, 6, 2), dtype)
    f = lambda *z: FL.tridiagonal_solve(*z, perturb_singular=perturb)  # noqa: E731
    g = lambda *z: JL.tridiagonal_solve(*z, perturb_singular=perturb)  # noqa: E731
    want = g(dl, d, du, b)
    _close(f(dl, d, du, b), want, 1e-3)
    _close(ftrans.jit(f)(dl, d, du, b), want, 1e-3)
    _close(ftrans.vmap(f)(dl, d, du, b), jax.vmap(g)(dl, d, du, b), 1e-3)
    # only b batched: more columns of one solve
    bb = np.stack([b[0], 2 * b[0]])
    _close(ftrans.vmap(lambda b: f(dl[0], d[0], du[0], b))(bb), jax.vmap(lambda b: g(dl[0], d[0], du[0], b))(bb), 1e-3)


@pytest.mark.parametrize("perturb", [False, True])
def test_tridiagonal_solve_pivots_and_singular(perturb):
    # needs row pivoting: the Thomas algorithm without pivoting divides by zero here
    dl = np.array([0.0, 2.0, -2.0, 3.0], np.float32)
    d = np.array([1.0, 4.0, 1.0, -1.0], np.float32)
    du = np.array([2.0, -1.0, 1.0, 0.0], np.float32)
    b = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    for fn in (FL.tridiagonal_solve, ftrans.jit(FL.tridiagonal_solve, static_argnames="perturb_singular")):
        _close(fn(dl, d, du, b, perturb_singular=perturb), JL.tridiagonal_solve(dl, d, du, b, perturb_singular=perturb))
    z = np.zeros(3, np.float32)
    for fn in (FL.tridiagonal_solve, ftrans.jit(FL.tridiagonal_solve, static_argnames="perturb_singular")):
        got = np.asarray(fn(z, z, z, np.ones((3, 1), np.float32), perturb_singular=perturb))
        want = np.asarray(JL.tridiagonal_solve(z, z, z, np.ones((3, 1), np.float32), perturb_singular=perturb))
        np.testing.assert_allclose(got, want, equal_nan=True)
        assert perturb == bool(np.all(np.isfinite(got)))


@pytest.mark.parametrize("perturb", [False, True])
def test_tridiagonal_solve_derivatives_match_jax(perturb):
    rng = np.random.default_rng(2)
    dl, du = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
    d = 3 + rng.random(5).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    f = lambda *z: (FL.tridiagonal_solve(*z, perturb_singular=perturb) ** 2).sum()  # noqa: E731
    g = lambda *z: (JL.tridiagonal_solve(*z, perturb_singular=perturb) ** 2).sum()  # noqa: E731
    _close(ftrans.grad(f, argnums=(0, 1, 2, 3))(dl, d, du, b), jax.jit(jax.grad(g, argnums=(0, 1, 2, 3)))(dl, d, du, b),
           1e-3)
    lin = lambda b: FL.tridiagonal_solve(dl, d, du, b, perturb_singular=perturb)  # noqa: E731
    ct = rng.standard_normal((5, 2)).astype(np.float32)
    (got,) = ftrans.linear_transpose(lin, b)(ct)
    (want,) = jax.jit(lambda c: jax.linear_transpose(
        lambda b: JL.tridiagonal_solve(dl, d, du, b, perturb_singular=perturb), b)(c))(ct)
    _close(got, want, 1e-3)


def test_tridiagonal_solve_errors():
    v = np.ones(3, np.float32)
    with pytest.raises(FtransTypeError, match="same shape"):
        FL.tridiagonal_solve(v, np.ones(4, np.float32), v, np.ones((3, 1), np.float32))
    with pytest.raises(FtransTypeError, match=r"\[..., m, n\]"):
        FL.tridiagonal_solve(v, v, v, np.ones((4, 1), np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@cpu_only("the Hessenberg reduction (LAPACK gehrd) is CPU-only in JAX as in ftrans")
def test_hessenberg_householder_ormqr_match_jax(dtype):
    a = _gen(np.random.default_rng(3), (2, 5, 5), dtype)
    h, t = JL.hessenberg(a)
    _close(FL.hessenberg(a), (h, t))
    _close(ftrans.jit(FL.hessenberg)(a), (h, t))
    h, t = np.asarray(h), np.asarray(t)
    want = JL.householder_product(h, t)
    _close(FL.householder_product(h, t), want)
    _close(ftrans.jit(FL.householder_product)(h, t), want)
    _close(ftrans.vmap(FL.householder_product)(h, t), want)
    c = _gen(np.random.default_rng(4), (2, 5, 3), dtype)
    for left in (True, False):
        for tr in (True, False):
            cc = c if left else np.swapaxes(c, -1, -2)
            want = JL.ormqr(h, t, cc, left=left, transpose=tr)
            _close(FL.ormqr(h, t, cc, left=left, transpose=tr), want)
            _close(ftrans.jit(lambda *z: FL.ormqr(*z, left=left, transpose=tr))(h, t, cc), want)
    with pytest.raises(FtransShapeError, match="rows"):
        FL.ormqr(h, t, c[..., :4, :])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", [(6, 4), (3, 5)])
def test_qr_pivoting_matches_jax(dtype, full, shape):
    x = _gen(np.random.default_rng(5), (2,) + shape, dtype)
    want = JL.qr(x, pivoting=True, full_matrices=full)
    _close(FL.qr(x, pivoting=True, full_matrices=full), want)
    _close(ftrans.jit(lambda x: FL.qr(x, pivoting=True, full_matrices=full))(x), want)


def test_qr_pivoting_jvp_matches_jax():
    x = np.random.default_rng(6).standard_normal((5, 3)).astype(np.float32)
    t = np.random.default_rng(7).standard_normal((5, 3)).astype(np.float32)
    got = ftrans.jvp(lambda x: FL.qr(x, pivoting=True, full_matrices=False)[:2], (x,), (t,))
    want = jax.jit(lambda x, t: jax.jvp(lambda x: JL.qr(x, pivoting=True, full_matrices=False)[:2], (x,), (t,)))(x, t)
    _close(got, want, 1e-3)


def test_cholesky_update_and_symmetric_product_match_jax():
    rng = np.random.default_rng(8)
    r = (np.triu(rng.standard_normal((4, 4))) + 4 * np.eye(4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    want = jax.jit(JL.cholesky_update)(r, w)
    _close(FL.cholesky_update(r, w), want)
    _close(ftrans.jit(FL.cholesky_update)(r, w), want)
    a = rng.standard_normal((2, 4, 3)).astype(np.float32)
    c = rng.standard_normal((2, 4, 4)).astype(np.float32)
    def jax_products():
        return jax.jit(lambda a, c: [JL.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=sym)
                                     for sym in (False, True)])(a, c)

    wants = jax_products()
    with host_oracle():  # the eager calls run on the host
        wants_host = jax_products()
    for sym, want, want_host in zip((False, True), wants, wants_host):
        _close(FL.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=sym), want_host)
        got = ftrans.jit(lambda a, c: FL.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=sym))(a, c)
        if not sym and not on_cpu():  # unsymmetrized, only the lower triangle is specified (a GPU's syrk)
            got, want = np.tril(np.asarray(got)), np.tril(np.asarray(want))
        _close(got, want)
    # JAX has no derivative rule for symmetric_product; ftrans's is checked against the formula
    _, dt = ftrans.jvp(lambda a: FL.symmetric_product(a, c, alpha=2.0, beta=0.5), (a,), (a,))
    _close(dt, 4.0 * a @ np.swapaxes(a, -1, -2), 1e-3)
    with pytest.raises(FtransShapeError, match="same size"):
        FL.cholesky_update(r, w[:3])


def test_qdwh_matches_jax():
    x = np.random.default_rng(9).standard_normal((6, 4)).astype(np.float32)
    want = jax.jit(JL.qdwh)(x)
    got = FL.qdwh(x)
    _close(got[:2], want[:2], 1e-3)
    assert int(got[2]) == int(want[2]) and bool(got[3]) == bool(want[3])
    _close(ftrans.jit(FL.qdwh)(x)[:2], want[:2], 1e-3)
    with pytest.raises(FtransShapeError, match="M >= N"):
        FL.qdwh(x.T)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 2), (8, 5), (10, 10)])
def test_qdwh_dynamic_shape_matches_jax(shape, dtype):
    """A padded input with its true shape: the padding (NaNs here) is ignored and comes back as zeros."""
    rng = np.random.default_rng(11)
    x = np.full((10, 10), np.nan, dtype)
    x[:shape[0], :shape[1]] = rng.uniform(size=shape) + (1j * rng.uniform(size=shape) if dtype == np.complex64 else 0)
    want = JL.qdwh(x, dynamic_shape=shape)
    got = FL.qdwh(x, dynamic_shape=shape)
    _close(got[:2], want[:2], 1e-4)
    assert int(got[2]) == int(want[2]) and bool(got[3]) == bool(want[3])
    # the true shape may be traced
    f = ftrans.jit(lambda a, m, n: FL.qdwh(a, dynamic_shape=(m, n))[:2])
    _close(f(x, *shape), want[:2], 1e-4)


def test_algorithm_enums():
    x = np.random.default_rng(10).standard_normal((5, 3)).astype(np.float32)
    for name in ("DEFAULT", "QR", "DIVIDE_AND_CONQUER"):
        with host_oracle():  # ftrans's eager call runs LAPACK on the host, where JAX has these algorithms
            want = JL.svd(x, algorithm=JL.SvdAlgorithm[name], full_matrices=False)
        got = FL.svd(x, algorithm=FL.SvdAlgorithm[name], full_matrices=False)
        _close(got[1], want[1], 1e-4)
        _close(np.abs(got[0]), np.abs(want[0]), 1e-4)
    for name in ("JACOBI", "POLAR"):
        with pytest.raises(NotImplementedError):
            FL.svd(x, algorithm=FL.SvdAlgorithm[name])
    assert [e.value for e in FL.SvdAlgorithm] == [e.value for e in JL.SvdAlgorithm]
    assert [e.value for e in FL.EighImplementation] == [e.value for e in JL.EighImplementation]
    assert [e.value for e in FL.EigImplementation] == [e.value for e in JL.EigImplementation]
    s = x.T @ x
    with host_oracle():
        _close(FL.eigh(s, implementation=FL.EighImplementation.QR)[1], JL.eigh(s)[1], 1e-3)
    with pytest.raises(NotImplementedError, match="JACOBI"):
        FL.eigh(s, implementation=FL.EighImplementation.JACOBI)


def test_primitives_exported_under_jax_names():
    names = [n for n in dir(JL) if n.endswith("_p")]
    missing = [n for n in names if not hasattr(FL, n)]
    assert not missing
    assert FL.tridiagonal_p.name == "tridiagonal" and FL.qr_p.multiple_results
    a = np.eye(3, dtype=np.float32)
    assert "cholesky" in str(ftrans.make_jaxpr(lambda a: FL.cholesky_p.bind(a))(a))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("left,right", [(False, True), (True, False), (True, True)])
def test_eig_eigenvector_derivatives_match_jax(dtype, left, right):
    rng = np.random.default_rng(11)
    with jax.enable_x64(True), ftrans.enable_x64(True):
        a = _gen(rng, (4, 4), dtype)
        t = _gen(rng, (4, 4), dtype)
        kw = dict(compute_left_eigenvectors=left, compute_right_eigenvectors=right, enable_eigvec_derivs=True)
        pj, tj = jax.jit(lambda a, t: jax.jvp(lambda a: JL.eig(a, **kw), (a,), (t,)))(a, t)
        pf, tf = ftrans.jvp(lambda a: FL.eig(a, **kw), (a,), (t,))
        oj, of = np.argsort(np.asarray(pj[0])), np.argsort(np.asarray(pf[0]))
        for x, y in zip(tj, tf):
            x, y = np.asarray(x), np.asarray(y)
            np.testing.assert_allclose(y[..., of], x[..., oj], atol=1e-8)
        with pytest.raises(NotImplementedError, match="enable_eigvec_derivs"):
            ftrans.jvp(lambda a: FL.eig(a, compute_left_eigenvectors=left, compute_right_eigenvectors=right),
                       (a,), (t,))
        FL.eig(a, implementation=FL.EigImplementation.LAPACK)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 6), (2, 6, 3), (4, 4)])
@pytest.mark.parametrize("full", [True, False])
def test_qr_jvp_wide_and_full_match_jax(shape, full):
    rng = np.random.default_rng(12)
    with jax.enable_x64(True), ftrans.enable_x64(True):
        a, t = _gen(rng, shape, np.float64), _gen(rng, shape, np.float64)
        want = jax.jit(lambda a, t: jax.jvp(lambda a: JL.qr(a, full_matrices=full), (a,), (t,)))(a, t)
        got = ftrans.jvp(lambda a: FL.qr(a, full_matrices=full), (a,), (t,))
        _close(got, want, 1e-8)


@pytest.mark.parametrize("left_side", [True, False])
def test_triangular_solve_vector_b_matches_jax(left_side):
    rng = np.random.default_rng(13)
    a = (np.tril(rng.standard_normal((4, 4))) + 5 * np.eye(4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    want = JL.triangular_solve(a, b, left_side=left_side, lower=True)
    _close(FL.triangular_solve(a, b, left_side=left_side, lower=True), want)
    got = ftrans.grad(lambda b: FL.triangular_solve(a, b, left_side=left_side, lower=True).sum())(b)
    _close(got, jax.jit(jax.grad(lambda b: JL.triangular_solve(a, b, left_side=left_side, lower=True).sum()))(b))


def _solver_calls(text):
    """(target, backend_config) of each cuSOLVER call in a module's text (pretty or generic form)."""
    import re

    out = []
    for line in text.splitlines():
        m = re.search(r'custom_call @(\w+solver\w+)\(|call_target_name = "(\w+solver\w+)"', line)
        if m:
            cfg = re.search(r"mhlo.backend_config = \{([^}]*)\}", line)
            out.append((m.group(1) or m.group(2), cfg.group(1) if cfg else None))
    return out


@pytest.mark.parametrize("shape", [(3, 5), (40, 36), (2, 5, 3)])
@pytest.mark.parametrize("name", ["DEFAULT", "QR"])
def test_gpu_svd_lowering_calls_jaxs_routine(shape, name):
    """Lowered for CUDA (no GPU needed): the algorithm picks cuSOLVER's routine and attributes as in JAX (QR is
    gesvd, wide matrices transposed; the default is Jacobi's gesvdj up to 1024x1024)."""
    a = np.ones(shape, np.float32)
    for full in (False, True):
        for uv in (False, True):
            jtext = jax.jit(lambda a: JL.svd(a, full_matrices=full, compute_uv=uv, algorithm=JL.SvdAlgorithm[name])
                            ).trace(a).lower(lowering_platforms=("cuda",)).as_text()
            ftext = ftrans.export.export(ftrans.jit(
                lambda a: FL.svd(a, full_matrices=full, compute_uv=uv, algorithm=FL.SvdAlgorithm[name])),
                platforms=("cuda",))(a).mlir_module()
            assert _solver_calls(ftext) == _solver_calls(jtext) != [], (full, uv)


def test_eig_of_nan_matrix_is_nan_like_jax():
    a = np.full((3, 3), np.nan, np.float32)
    want = JL.eig(a)
    _close(FL.eig(a), want)
    _close(ftrans.jit(FL.eig)(a), want)


def test_qr_of_float16_is_not_implemented_like_jax():
    import ftrans.numpy as fnp

    # jax 0.10: NotImplementedError "Unsupported dtype float16"; jax 0.11: TypeError "qr does not accept dtype
    # float16"; ftrans's UnsupportedDtypeError is both
    with pytest.raises((NotImplementedError, TypeError), match="Unsupported dtype float16|does not accept dtype"), \
            host_oracle():
        jax.numpy.linalg.qr(np.ones((5, 6), np.float16))  # as on the host, where ftrans's eager call runs
    for kind in (NotImplementedError, TypeError):
        with pytest.raises(kind, match="Unsupported dtype float16"):
            fnp.linalg.qr(np.ones((5, 6), np.float16))
