"""BCSR: batched compressed-sparse-row arrays (JAX's ``jax.experimental.sparse.bcsr``).

Layout of a BCSR array of ``shape = batch + (rows, cols) + dense``: ``data`` is
``batch + (nse,) + dense``, ``indices`` (column of each stored value) is
``batch + (nse,)`` and ``indptr`` is ``batch + (rows + 1,)``.  Stored values
past ``indptr[-1]`` are padding.  Operations convert to BCOO (rows recovered
from ``indptr`` with a sorted search), which keeps every rule in one place.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans.core import pytrees as tree_util
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.experimental.sparse import bcoo as _bcoo
from ftrans.experimental.sparse._base import JAXSparse
from ftrans.experimental.sparse.bcoo import BCOO
from ftrans.experimental.sparse.util import SparseInfo, _concrete_int, _count_stored_elements, nfold_vmap

__all__ = ["BCSR", "bcsr_fromdense", "bcsr_todense", "bcsr_extract", "bcsr_dot_general",
           "bcsr_broadcast_in_dim", "bcsr_concatenate", "bcsr_sum_duplicates"]


def _validate_bcsr(data: Any, indices: Any, indptr: Any, shape: Sequence[int]) -> tuple[int, int, int]:
    shape = tuple(shape)
    n_batch = indices.ndim - 1
    n_dense = data.ndim - 1 - n_batch
    if n_batch < 0 or n_dense < 0 or len(shape) != n_batch + 2 + n_dense:
        raise FtransValueError(f"BCSR: data of shape {tuple(data.shape)} and indices of shape "
                               f"{tuple(indices.shape)} do not fit shape {shape} (BCSR has exactly 2 sparse dims)")
    if tuple(indptr.shape) != tuple(indices.shape[:n_batch]) + (shape[n_batch] + 1,):
        raise FtransValueError(f"BCSR: indptr must have shape {tuple(indices.shape[:n_batch]) + (shape[n_batch] + 1,)}"
                               f", got {tuple(indptr.shape)}")
    return n_batch, 2, n_dense


def _bcsr_to_bcoo(indices: Any, indptr: Any, *, shape: Sequence[int]) -> Any:
    """BCOO indices ``batch + (nse, 2)`` of BCSR ``indices``/``indptr``."""
    indices, indptr = jnp.asarray(indices), jnp.asarray(indptr)
    n_batch = indices.ndim - 1

    def one(ind, ptr):
        nse = ind.shape[0]
        rows = jnp.searchsorted(ptr, jnp.arange(nse, dtype=ptr.dtype), side="right") - 1
        rows = jnp.where(jnp.arange(nse) >= ptr[-1], ptr.shape[0] - 1, rows)
        return jnp.stack([rows.astype(ind.dtype), ind], axis=1)

    return nfold_vmap(one, n_batch)(indices, indptr)


def _bcoo_to_bcsr(indices: Any, *, shape: Sequence[int], index_dtype: Any = np.int32) -> tuple[Any, Any]:
    """BCSR ``(indices, indptr)`` of row-sorted BCOO indices ``batch + (nse, 2)``."""
    indices = jnp.asarray(indices)
    n_batch = indices.ndim - 2
    n_rows = tuple(shape)[n_batch]

    def one(ind):
        rows = ind[:, 0]
        counts = jnp.zeros((n_rows,), index_dtype).at[rows].add(1, mode="drop")
        indptr = jnp.concatenate([jnp.zeros((1,), index_dtype), jnp.cumsum(counts).astype(index_dtype)])
        return ind[:, 1].astype(index_dtype), indptr

    return nfold_vmap(one, n_batch)(indices)


def bcsr_fromdense(mat: Any, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype: Any = np.int32) -> BCSR:
    """The BCSR array holding the nonzeros of dense ``mat``."""
    mat = jnp.asarray(mat)
    if mat.ndim - n_batch - n_dense != 2:
        raise FtransValueError(f"bcsr_fromdense: BCSR needs exactly 2 sparse dimensions; mat.ndim={mat.ndim}, "
                               f"n_batch={n_batch}, n_dense={n_dense}")
    if nse is None:
        nse = _count_stored_elements(mat, n_batch, n_dense)
    nse = _concrete_int(nse, "bcsr_fromdense")
    data, indices = _bcoo._bcoo_fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense, index_dtype=index_dtype)
    col, indptr = _bcoo_to_bcsr(indices, shape=mat.shape, index_dtype=index_dtype)
    return BCSR((data, col, indptr), shape=mat.shape, indices_sorted=True, unique_indices=True)


def _bcsr_fromdense(mat: Any, *, nse: int, n_batch: int = 0, n_dense: int = 0,
                    index_dtype: Any = np.int32) -> tuple[Any, Any, Any]:
    m = bcsr_fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense, index_dtype=index_dtype)
    return m.data, m.indices, m.indptr


def bcsr_todense(mat: BCSR) -> Any:
    """The dense array a BCSR array stands for."""
    return mat.to_bcoo().todense()


def _bcsr_todense(data: Any, indices: Any, indptr: Any, *, spinfo: SparseInfo) -> Any:
    return BCSR((data, indices, indptr), shape=spinfo.shape).todense()


def bcsr_extract(indices: Any, indptr: Any, mat: Any) -> Any:
    """The values of dense ``mat`` at the positions of a BCSR structure (the BCSR data)."""
    mat = jnp.asarray(mat)
    coo = _bcsr_to_bcoo(indices, indptr, shape=mat.shape)
    return _bcoo._bcoo_extract(coo, mat)


def bcsr_dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                     preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """JAX's ``lax`` ``dot_general`` with a BCSR operand."""
    lhs = lhs.to_bcoo() if isinstance(lhs, BCSR) else lhs
    rhs = rhs.to_bcoo() if isinstance(rhs, BCSR) else rhs
    return _bcoo.bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers, precision=precision,
                                  preferred_element_type=preferred_element_type)


def bcsr_broadcast_in_dim(mat: BCSR, *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                          sharding: Any = None) -> BCSR:
    """JAX's ``lax`` ``broadcast_in_dim`` of a BCSR array (new axes are batch or dense axes)."""
    out = _bcoo.bcoo_broadcast_in_dim(mat.to_bcoo(), shape=shape, broadcast_dimensions=broadcast_dimensions)
    if out.n_sparse != 2:
        raise NotImplementedError("bcsr_broadcast_in_dim: adding sparse dimensions")
    return BCSR.from_bcoo(out)


def bcsr_concatenate(operands: Sequence[BCSR], *, dimension: int) -> BCSR:
    """Concatenation of BCSR arrays along a batch or dense ``dimension``."""
    operands = list(operands)
    if not all(isinstance(op, BCSR) for op in operands):
        raise FtransTypeError(f"bcsr_concatenate: expected BCSR operands, got {[type(o).__name__ for o in operands]}")
    nb = operands[0].n_batch
    if any(op.n_batch != nb or op.n_dense != operands[0].n_dense for op in operands):
        raise NotImplementedError("bcsr_concatenate: operands must share n_batch and n_dense")
    if nb <= dimension < nb + 2:
        raise NotImplementedError("bcsr_concatenate: concatenation along a sparse dimension")
    out = _bcoo.bcoo_concatenate([op.to_bcoo() for op in operands], dimension=dimension)
    return BCSR.from_bcoo(out)


def bcsr_sum_duplicates(mat: BCSR, nse: int | None = None) -> BCSR:
    """``mat`` with duplicate entries summed."""
    return BCSR.from_bcoo(_bcoo.bcoo_sum_duplicates(mat.to_bcoo(), nse=nse))


@tree_util.register_pytree_node_class
class BCSR(JAXSparse):
    """A batched compressed-sparse-row array (JAX's ``BCSR``): ``BCSR((data, indices, indptr), shape=shape)``."""

    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        try:
            data, indices, indptr = args
        except (TypeError, ValueError):
            raise FtransTypeError("BCSR: args must be a triple (data, indices, indptr)") from None
        self.data, self.indices, self.indptr = jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr)
        self.indices_sorted = bool(indices_sorted)
        self.unique_indices = bool(unique_indices)
        super().__init__(args, shape=shape)
        _validate_bcsr(self.data, self.indices, self.indptr, self.shape)

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def _bufs(self) -> tuple[Any, Any, Any]:
        return self.data, self.indices, self.indptr

    @property
    def nse(self) -> int:
        return self.indices.shape[-1]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 1

    @property
    def n_sparse(self) -> int:
        return 2

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    def to_bcoo(self) -> BCOO:
        indices = _bcsr_to_bcoo(self.indices, self.indptr, shape=self.shape)
        return BCOO((self.data, indices), shape=self.shape, indices_sorted=self.indices_sorted,
                    unique_indices=self.unique_indices)

    @classmethod
    def from_bcoo(cls, arr: BCOO) -> BCSR:
        if arr.n_sparse != 2:
            raise NotImplementedError(f"BCSR.from_bcoo: BCSR needs n_sparse == 2, got {arr.n_sparse}")
        if not arr.indices_sorted:
            arr = _bcoo.bcoo_sort_indices(arr)
        batch = tuple(arr.shape[:arr.n_batch])
        data = _bcoo._broadcast_batch(arr.data, batch)
        idx = _bcoo._broadcast_batch(arr.indices, batch)
        col, indptr = _bcoo_to_bcsr(idx, shape=arr.shape, index_dtype=arr.indices.dtype)
        return cls((data, col, indptr), shape=arr.shape, indices_sorted=True, unique_indices=arr.unique_indices)

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCSR:
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense, n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat: Any, *, index_dtype: Any = None, n_dense: int = 0, n_batch: int = 0) -> BCSR:
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCSR.from_scipy_sparse: n_dense and n_batch must be 0")
        mat = mat.tocsr()
        index_dtype = index_dtype or np.int32
        return cls((jnp.asarray(mat.data), jnp.asarray(mat.indices, index_dtype), jnp.asarray(mat.indptr, index_dtype)),
                   shape=mat.shape)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCSR:
        shape = tuple(operator.index(s) for s in shape)
        if len(shape) - n_batch - n_dense != 2:
            raise FtransValueError(f"BCSR._empty: BCSR needs 2 sparse dimensions, got shape={shape}, "
                                   f"n_batch={n_batch}, n_dense={n_dense}")
        return cls.from_bcoo(BCOO._empty(shape, dtype=dtype, index_dtype=index_dtype, n_dense=n_dense,
                                         n_batch=n_batch, nse=nse))

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32", n_batch: int = 0,
             n_dense: int = 0) -> BCSR:
        if n_batch or n_dense:
            raise FtransValueError("BCSR._eye: a 2-D eye has no batch or dense dimensions in BCSR format")
        return cls.from_bcoo(BCOO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype))

    def todense(self) -> Any:
        return bcsr_todense(self)

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> BCSR:
        return BCSR.from_bcoo(self.to_bcoo().sum_duplicates(nse=nse, remove_zeros=remove_zeros))

    def transpose(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("BCSR.transpose is not implemented; convert with .to_bcoo() first")

    def __matmul__(self, other: Any) -> Any:
        return self.to_bcoo() @ (other.to_bcoo() if isinstance(other, BCSR) else other)

    def __rmatmul__(self, other: Any) -> Any:
        return other @ self.to_bcoo()

    def tree_flatten(self):
        return (self.data, self.indices, self.indptr), self._info._asdict()

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        if set(aux_data) != {"shape", "indices_sorted", "unique_indices"}:
            raise FtransValueError(f"BCSR.tree_unflatten: invalid aux_data={aux_data!r}")
        obj.__dict__.update(**aux_data)
        return obj
