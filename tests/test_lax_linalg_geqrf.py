"""lax.linalg.geqrf (JAX's ``jax._src.lax.linalg.geqrf``) against jax: the Householder QR factorization
(eager, jit, vmap, tall/wide/square, real/complex), composed with ormqr as JAX's linalg_test testOrmqr."""

from __future__ import annotations

import numpy as np
import pytest
from jax._src.lax import linalg as jax_linalg  # geqrf is not in jax.lax.linalg's public names

import ftrans
import ftrans.lax.linalg as FL
from ftrans.errors import FtransShapeError
from tests.test_lax_linalg_more import _close, _gen


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3)])
def test_geqrf_matches_jax(shape, dtype):
    a = _gen(np.random.default_rng(0), shape, dtype)
    want = jax_linalg.geqrf(a)
    _close(FL.geqrf(a), want)
    _close(ftrans.jit(FL.geqrf)(a), want)
    if len(shape) == 3:
        _close(ftrans.vmap(FL.geqrf)(a), want)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_geqrf_then_ormqr_matches_jax(left, transpose):
    a = _gen(np.random.default_rng(1), (5, 3), np.float32)
    c = _gen(np.random.default_rng(2), (5, 2) if left else (2, 5), np.float32)

    def f(lin, a, c):
        r, taus = lin.geqrf(a)
        return lin.ormqr(r, taus, c, left=left, transpose=transpose)

    want = f(jax_linalg, a, c)
    _close(f(FL, a, c), want)
    _close(ftrans.jit(lambda a, c: f(FL, a, c))(a, c), want)


def test_geqrf_needs_a_matrix():
    with pytest.raises(FtransShapeError, match=r"geqrf: expects a matrix"):
        FL.geqrf(np.ones(3, np.float32))
