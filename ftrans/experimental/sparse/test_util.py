"""Test helpers for sparse arrays (JAX's ``jax.experimental.sparse.test_util``).

``SparseTestCase`` extends JAX's test case (the oracle's harness, reached
through ``ftrans.lowering.compat``) with checks that run a sparse operation
against its dense counterpart, under ``jit``, ``vmap`` and forward/reverse
differentiation, all with ftrans's transforms.  The random generators make BCOO
and BCSR arrays of a given layout.  Importing this module needs JAX's test
dependencies (absl).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import pytrees as tree_util
from ftrans.experimental import sparse
from ftrans.lowering.compat import jax_test_harness
from ftrans.transforms.batching import vmap
from ftrans.transforms.jit import jit
from ftrans.transforms.reverse import jacfwd, jacrev

_jtu = jax_test_harness()

# Tolerances for products (sums of many terms), by dtype.
MATMUL_TOL = {
    np.float32: 1e-5,
    np.float64: 1e-10,
    np.complex64: 1e-5,
    np.complex128: 1e-10,
}


def is_sparse(x: Any) -> bool:
    return isinstance(x, sparse.JAXSparse)


class BatchedDotGeneralProperties(NamedTuple):
    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    n_batch: int
    n_dense: int
    dimension_numbers: Any


class SparseLayout(NamedTuple):
    n_batch: int
    n_dense: int
    n_sparse: int


def _densify(tree: Any) -> Any:
    return tree_util.tree_map(sparse.todense, tree, is_leaf=is_sparse)


class SparseTestCase(_jtu.JaxTestCase):
    """JAX's test case plus sparse-versus-dense checks."""

    def assertSparseArraysEquivalent(self, x, y, *, check_dtypes=True, atol=None, rtol=None,
                                     canonicalize_dtypes=True, err_msg=""):
        xb, xt = tree_util.tree_flatten(x)
        yb, yt = tree_util.tree_flatten(y)
        self.assertEqual(xt, yt)
        self.assertAllClose(xb, yb, check_dtypes=check_dtypes, atol=atol, rtol=rtol,
                            canonicalize_dtypes=canonicalize_dtypes, err_msg=err_msg)

    def _CheckAgainstDense(self, dense_op, sparse_op, args_maker, check_jit=True, check_dtypes=True, tol=None,
                           atol=None, rtol=None, canonicalize_dtypes=True):
        sparse_args = args_maker()
        expected = dense_op(*_densify(sparse_args))
        sparse_ans = sparse_op(*sparse_args)
        self.assertAllClose(expected, _densify(sparse_ans), check_dtypes=check_dtypes, atol=atol or tol,
                            rtol=rtol or tol, canonicalize_dtypes=canonicalize_dtypes)
        if check_jit:
            jitted = jit(sparse_op)(*sparse_args)
            self.assertSparseArraysEquivalent(sparse_ans, jitted, atol=atol or tol, rtol=rtol or tol)

    def _CheckGradsSparse(self, dense_fun, sparse_fun, args_maker, *, argnums=None, modes=("fwd", "rev"),
                          atol=None, rtol=None):
        if any(m not in ("fwd", "rev") for m in modes):
            raise ValueError(f"modes must be among 'fwd' and 'rev', got {modes}")
        args = args_maker()
        flat, tree = tree_util.tree_flatten(args)
        counts = [len(tree_util.tree_leaves(a)) for a in args]
        starts = np.cumsum([0, *counts[:-1]]).tolist()
        if argnums is not None:
            starts = [starts[n] for n in argnums]

        def dense_flat(*leaves):
            return dense_fun(*_densify(tree_util.tree_unflatten(tree, leaves)))

        def sparse_flat(*leaves):
            return _densify(sparse_fun(*tree_util.tree_unflatten(tree, leaves)))

        for mode, jac in (("rev", jacrev), ("fwd", jacfwd)):
            if mode in modes:
                self.assertAllClose(jac(dense_flat, argnums=starts)(*flat), jac(sparse_flat, argnums=starts)(*flat),
                                    atol=atol, rtol=rtol)

    def _random_bdims(self, *args):
        rng = self.rng()
        return [rng.randint(0, a + 1) for a in args]

    def _CheckBatchingSparse(self, dense_fun, sparse_fun, args_maker, *, batch_size=3, bdims=None,
                             check_jit=False, check_dtypes=True, tol=None, atol=None, rtol=None,
                             canonicalize_dtypes=True):
        if bdims is None:
            bdims = self._random_bdims(*(a.n_batch if is_sparse(a) else a.ndim for a in args_maker()))

        def stack(xs, bdim):
            expand = sparse.sparsify(functools.partial(lax.expand_dims, dimensions=[bdim]))
            concat = sparse.sparsify(functools.partial(lax.concatenate, dimension=bdim))
            return concat([expand(x) for x in xs])

        def batched_args_maker():
            per_arg = list(zip(*(args_maker() for _ in range(batch_size))))
            return [xs[0] if bd is None else stack(xs, bd) for xs, bd in zip(per_arg, bdims)]

        self._CheckAgainstDense(vmap(dense_fun, bdims), vmap(sparse_fun, bdims), batched_args_maker,
                                check_dtypes=check_dtypes, tol=tol, atol=atol, rtol=rtol, check_jit=check_jit,
                                canonicalize_dtypes=canonicalize_dtypes)


def _rand_sparse(shape: Sequence[int], dtype: Any, *, rng: np.random.RandomState, rand_method: Callable[..., Any],
                 nse: int | float, n_batch: int, n_dense: int, sparse_format: str) -> Any:
    if sparse_format not in ("bcoo", "bcsr"):
        raise ValueError(f"Sparse format {sparse_format} not supported.")
    shape = tuple(shape)
    n_sparse = len(shape) - n_batch - n_dense
    if n_sparse < 0 or n_batch < 0 or n_dense < 0:
        raise ValueError(f"Invalid parameters: shape={shape} n_batch={n_batch} n_sparse={n_sparse}")
    if sparse_format == "bcsr" and n_sparse != 2:
        raise ValueError(f"bcsr array must have 2 sparse dimensions; {n_sparse} is given.")
    batch_shape = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    if 0 <= nse < 1:
        nse = int(np.ceil(nse * math.prod(sparse_shape)))
    nse = int(nse)
    data = jnp.array(rand_method(rng)(batch_shape + (nse,) + dense_shape, dtype))
    if sparse_format == "bcoo":
        indices = rng.randint(0, sparse_shape, size=batch_shape + (nse, n_sparse), dtype=np.int32)
        return sparse.BCOO((data, jnp.array(indices)), shape=shape)
    indices = rng.randint(0, sparse_shape[1], size=batch_shape + (nse,), dtype=np.int32)
    indptr = np.sort(rng.randint(0, nse + 1, size=batch_shape + (sparse_shape[0] + 1,), dtype=np.int32), axis=-1)
    indptr[..., 0] = 0
    return sparse.BCSR((data, jnp.array(indices), jnp.array(indptr)), shape=shape)


def rand_bcoo(rng: np.random.RandomState, rand_method: Callable[..., Any] = _jtu.rand_default,
              nse: int | float = 0.5, n_batch: int = 0, n_dense: int = 0):
    """A maker of random BCOO arrays: ``rand_bcoo(rng, ...)(shape, dtype)``."""
    return functools.partial(_rand_sparse, rng=rng, rand_method=rand_method, nse=nse, n_batch=n_batch,
                             n_dense=n_dense, sparse_format="bcoo")


def rand_bcsr(rng: np.random.RandomState, rand_method: Callable[..., Any] = _jtu.rand_default,
              nse: int | float = 0.5, n_batch: int = 0, n_dense: int = 0):
    """A maker of random BCSR arrays: ``rand_bcsr(rng, ...)(shape, dtype)``."""
    return functools.partial(_rand_sparse, rng=rng, rand_method=rand_method, nse=nse, n_batch=n_batch,
                             n_dense=n_dense, sparse_format="bcsr")


def iter_subsets(s: Sequence) -> Iterable[tuple]:
    """Every subset of ``s``, smallest first."""
    return itertools.chain.from_iterable(itertools.combinations(s, n) for n in range(len(s) + 1))


def iter_sparse_layouts(shape: Sequence[int], min_n_batch: int = 0) -> Iterator[SparseLayout]:
    """Every (n_batch, n_dense, n_sparse) split of ``shape`` with at least ``min_n_batch`` batch dims."""
    for n_batch in range(min_n_batch, len(shape) + 1):
        for n_dense in range(len(shape) + 1 - n_batch):
            yield SparseLayout(n_batch=n_batch, n_sparse=len(shape) - n_batch - n_dense, n_dense=n_dense)


def iter_bcsr_layouts(shape: Sequence[int], min_n_batch: int = 0) -> Iterator[SparseLayout]:
    """The layouts of ``shape`` with exactly two sparse dims."""
    for n_batch in range(min_n_batch, len(shape) - 1):
        yield SparseLayout(n_batch=n_batch, n_sparse=2, n_dense=len(shape) - 2 - n_batch)


def rand_sparse(rng: np.random.RandomState, nse: int | float = 0.5, post: Callable[[Any], Any] = lambda x: x,
                rand_method: Callable[..., Any] = _jtu.rand_default):
    """A maker of dense random arrays with about ``nse`` nonzeros (a fraction if below 1)."""
    def make(shape, dtype, nse=nse):
        rand = rand_method(rng)
        size = math.prod(shape)
        if 0 <= nse < 1:
            nse = nse * size
        nse = min(size, int(nse))
        M = rand(shape, dtype)
        M.flat[rng.choice(size, size - nse, replace=False)] = 0
        return post(M)
    return make
