"""CSR and CSC: unbatched compressed matrices (JAX's ``jax.experimental.sparse.csr``).

``CSR((data, indices, indptr), shape=(n, m))`` compresses rows, ``CSC`` columns.
The operations go through BCOO, with rows (or columns) recovered from ``indptr``.
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
from ftrans.experimental.sparse.bcsr import _bcoo_to_bcsr, _bcsr_to_bcoo
from ftrans.experimental.sparse.util import _concrete_int, _count_stored_elements

__all__ = ["CSR", "CSC", "csr_todense", "csr_fromdense", "csr_matvec", "csr_matmat"]


def _shape2(shape: Sequence[int], owner: str) -> tuple[int, int]:
    shape = tuple(operator.index(s) for s in shape)
    if len(shape) != 2:
        raise FtransValueError(f"{owner}: only 2-D matrices are supported, got shape {shape}")
    return shape  # type: ignore[return-value]


def _csr_bcoo(data: Any, indices: Any, indptr: Any, shape: Sequence[int]) -> BCOO:
    coo = _bcsr_to_bcoo(jnp.asarray(indices), jnp.asarray(indptr), shape=shape)
    return BCOO((jnp.asarray(data), coo), shape=tuple(shape))


def _csr_todense(data: Any, indices: Any, indptr: Any, *, shape: Sequence[int]) -> Any:
    return _csr_bcoo(data, indices, indptr, shape).todense()


def csr_todense(mat: CSR) -> Any:
    """The dense matrix a CSR matrix stands for."""
    return _csr_todense(mat.data, mat.indices, mat.indptr, shape=mat.shape)


def _csr_fromdense(mat: Any, *, nse: int, index_dtype: Any = np.int32) -> tuple[Any, Any, Any]:
    mat = jnp.asarray(mat)
    _shape2(mat.shape, "csr_fromdense")
    nse = _concrete_int(nse, "csr_fromdense")
    data, indices = _bcoo._bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype)
    col, indptr = _bcoo_to_bcsr(indices, shape=mat.shape, index_dtype=index_dtype)
    return data, col, indptr


def csr_fromdense(mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> CSR:
    """The CSR matrix holding the nonzeros of dense ``mat``."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = _count_stored_elements(mat)
    nse = _concrete_int(nse, "csr_fromdense")
    return CSR(_csr_fromdense(mat, nse=nse, index_dtype=index_dtype), shape=mat.shape)


def _csr_matvec(data: Any, indices: Any, indptr: Any, v: Any, *, shape: Sequence[int], transpose: bool = False) -> Any:
    m = _csr_bcoo(data, indices, indptr, shape)
    dn = (((0,), (0,)), ((), ())) if transpose else (((1,), (0,)), ((), ()))
    return _bcoo.bcoo_dot_general(m, jnp.asarray(v), dimension_numbers=dn)


def csr_matvec(mat: CSR, v: Any, transpose: bool = False) -> Any:
    """``mat @ v`` (or ``mat.T @ v``) for a CSR matrix."""
    return _csr_matvec(mat.data, mat.indices, mat.indptr, v, shape=mat.shape, transpose=transpose)


def _csr_matmat(data: Any, indices: Any, indptr: Any, B: Any, *, shape: Sequence[int], transpose: bool = False) -> Any:
    return _csr_matvec(data, indices, indptr, B, shape=shape, transpose=transpose)


def csr_matmat(mat: CSR, B: Any, *, transpose: bool = False) -> Any:
    """``mat @ B`` (or ``mat.T @ B``) for a CSR matrix."""
    return _csr_matmat(mat.data, mat.indices, mat.indptr, B, shape=mat.shape, transpose=transpose)


class _Compressed(JAXSparse):
    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int]):
        try:
            data, indices, indptr = args
        except (TypeError, ValueError):
            raise FtransTypeError(f"{type(self).__name__}: args must be a triple (data, indices, indptr)") from None
        self.data, self.indices, self.indptr = jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr)
        super().__init__(args, shape=_shape2(shape, type(self).__name__))

    @property
    def nse(self) -> int:
        return self.indices.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def _bufs(self) -> tuple[Any, Any, Any]:
        return self.data, self.indices, self.indptr

    def tree_flatten(self):
        return (self.data, self.indices, self.indptr), {"shape": self.shape}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        obj.shape = tuple(aux_data["shape"])
        return obj

    def _matmul_dense(self, other: Any, bcoo: BCOO) -> Any:
        other = jnp.asarray(other)
        if other.dtype != bcoo.dtype:
            dt = jnp.promote_types(bcoo.dtype, other.dtype)
            bcoo, other = bcoo.astype(dt), other.astype(dt)
        return bcoo @ other

    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, JAXSparse):
            raise NotImplementedError(f"{type(self).__name__} @ sparse: convert with .to_bcoo() first")
        return self._matmul_dense(other, self.to_bcoo())

    def __rmatmul__(self, other: Any) -> Any:
        b = self.to_bcoo()
        other = jnp.asarray(other)
        if other.dtype != b.dtype:
            dt = jnp.promote_types(b.dtype, other.dtype)
            b, other = b.astype(dt), other.astype(dt)
        return other @ b


@tree_util.register_pytree_node_class
class CSR(_Compressed):
    """A 2-D compressed-sparse-row matrix: ``CSR((data, indices, indptr), shape=(n, m))``."""

    def to_bcoo(self) -> BCOO:
        return _csr_bcoo(self.data, self.indices, self.indptr, self.shape)

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> CSR:
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32") -> CSR:
        shape = _shape2(shape, "CSR._empty")
        return cls((jnp.zeros((0,), dtype if dtype is not None else jnp.float32), jnp.zeros((0,), index_dtype),
                    jnp.zeros((shape[0] + 1,), index_dtype)), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32") -> CSR:
        m = BCOO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype)
        col, indptr = _bcoo_to_bcsr(m.indices, shape=(N, M), index_dtype=np.dtype(index_dtype))
        return cls((m.data, col, indptr), shape=(N, M))

    def todense(self) -> Any:
        return csr_todense(self)

    def transpose(self, axes: Any = None) -> CSC:
        if axes is not None and tuple(axes) != (1, 0):
            raise NotImplementedError(f"CSR.transpose: axes={axes} (only the full transpose is supported)")
        return CSC((self.data, self.indices, self.indptr), shape=self.shape[::-1])


@tree_util.register_pytree_node_class
class CSC(_Compressed):
    """A 2-D compressed-sparse-column matrix: ``CSC((data, indices, indptr), shape=(n, m))``."""

    def to_bcoo(self) -> BCOO:
        t = _csr_bcoo(self.data, self.indices, self.indptr, self.shape[::-1])
        return _bcoo.bcoo_transpose(t, permutation=(1, 0))

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> CSC:
        mat = jnp.asarray(mat)
        if nse is None:
            nse = _count_stored_elements(mat)
        nse = _concrete_int(nse, "CSC.fromdense")
        return cls(_csr_fromdense(mat.T, nse=nse, index_dtype=index_dtype), shape=mat.shape)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32") -> CSC:
        shape = _shape2(shape, "CSC._empty")
        return CSR._empty(shape[::-1], dtype=dtype, index_dtype=index_dtype).T

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32") -> CSC:
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self) -> Any:
        return self.to_bcoo().todense()

    def transpose(self, axes: Any = None) -> CSR:
        if axes is not None and tuple(axes) != (1, 0):
            raise NotImplementedError(f"CSC.transpose: axes={axes} (only the full transpose is supported)")
        return CSR((self.data, self.indices, self.indptr), shape=self.shape[::-1])
