"""COO: unbatched coordinate-format matrices (JAX's ``jax.experimental.sparse.coo``).

``COO((data, row, col), shape=(n, m))``: 2-D only, one stored value per
``(row, col)`` pair.  The operations are the BCOO ones on ``indices = [row, col]``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import ftrans.numpy as jnp
from ftrans.core import pytrees as tree_util
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.experimental.sparse import bcoo as _bcoo
from ftrans.experimental.sparse._base import JAXSparse
from ftrans.experimental.sparse.bcoo import BCOO
from ftrans.experimental.sparse.util import _concrete_int, _count_stored_elements

__all__ = ["COO", "COOInfo", "coo_todense", "coo_fromdense", "coo_matvec", "coo_matmat"]


class COOInfo(NamedTuple):
    shape: tuple[int, ...]
    rows_sorted: bool = False
    cols_sorted: bool = False


def _check_2d(shape: Sequence[int], owner: str) -> tuple[int, int]:
    shape = tuple(operator.index(s) for s in shape)
    if len(shape) != 2:
        raise FtransValueError(f"{owner}: only 2-D matrices are supported, got shape {shape}")
    return shape  # type: ignore[return-value]


def _to_bcoo(data: Any, row: Any, col: Any, shape: Sequence[int]) -> BCOO:
    row, col = jnp.asarray(row), jnp.asarray(col)
    return BCOO((jnp.asarray(data), jnp.stack([row, col.astype(row.dtype)], axis=1)), shape=tuple(shape))


def _coo_todense(data: Any, row: Any, col: Any, *, spinfo: COOInfo) -> Any:
    return _to_bcoo(data, row, col, spinfo.shape).todense()


def coo_todense(mat: COO) -> Any:
    """The dense matrix a COO matrix stands for."""
    return _coo_todense(mat.data, mat.row, mat.col, spinfo=mat._info)


def _coo_fromdense(mat: Any, *, nse: int, index_dtype: Any = np.int32) -> tuple[Any, Any, Any]:
    mat = jnp.asarray(mat)
    _check_2d(mat.shape, "coo_fromdense")
    nse = _concrete_int(nse, "coo_fromdense")
    data, indices = _bcoo._bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype)
    return data, indices[:, 0], indices[:, 1]


def coo_fromdense(mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> COO:
    """The COO matrix holding the nonzeros of dense ``mat`` (row-major order)."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = _count_stored_elements(mat)
    nse = _concrete_int(nse, "coo_fromdense")
    return COO(_coo_fromdense(mat, nse=nse, index_dtype=index_dtype), shape=mat.shape, rows_sorted=True)


def _coo_matvec(data: Any, row: Any, col: Any, v: Any, *, spinfo: COOInfo, transpose: bool = False) -> Any:
    m = _to_bcoo(data, row, col, spinfo.shape)
    v = jnp.asarray(v)
    if transpose:
        return _bcoo.bcoo_dot_general(m, v, dimension_numbers=(((0,), (0,)), ((), ())))
    return _bcoo.bcoo_dot_general(m, v, dimension_numbers=(((1,), (0,)), ((), ())))


def coo_matvec(mat: COO, v: Any, transpose: bool = False) -> Any:
    """``mat @ v`` (or ``mat.T @ v``) for a COO matrix and a dense vector."""
    return _coo_matvec(mat.data, mat.row, mat.col, v, spinfo=mat._info, transpose=transpose)


def _coo_matmat(data: Any, row: Any, col: Any, B: Any, *, spinfo: COOInfo, transpose: bool = False) -> Any:
    return _coo_matvec(data, row, col, B, spinfo=spinfo, transpose=transpose)


def coo_matmat(mat: COO, B: Any, *, transpose: bool = False) -> Any:
    """``mat @ B`` (or ``mat.T @ B``) for a COO matrix and a dense matrix."""
    return _coo_matmat(mat.data, mat.row, mat.col, B, spinfo=mat._info, transpose=transpose)


@tree_util.register_pytree_node_class
class COO(JAXSparse):
    """An unbatched 2-D coordinate-format matrix: ``COO((data, row, col), shape=(n, m))``."""

    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int], rows_sorted: bool = False,
                 cols_sorted: bool = False):
        try:
            data, row, col = args
        except (TypeError, ValueError):
            raise FtransTypeError("COO: args must be a triple (data, row, col)") from None
        self.data, self.row, self.col = jnp.asarray(data), jnp.asarray(row), jnp.asarray(col)
        self._rows_sorted, self._cols_sorted = bool(rows_sorted), bool(cols_sorted)
        super().__init__(args, shape=_check_2d(shape, "COO"))

    @property
    def _info(self) -> COOInfo:
        return COOInfo(self.shape, self._rows_sorted, self._cols_sorted)

    @property
    def _bufs(self) -> tuple[Any, Any, Any]:
        return self.data, self.row, self.col

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def to_bcoo(self) -> BCOO:
        return _to_bcoo(self.data, self.row, self.col, self.shape)

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> COO:
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32") -> COO:
        shape = _check_2d(shape, "COO._empty")
        data = jnp.zeros((0,), dtype if dtype is not None else jnp.float32)
        idx = jnp.zeros((0,), index_dtype)
        return cls((data, idx, idx), shape=shape, rows_sorted=True, cols_sorted=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32") -> COO:
        m = BCOO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype)
        return cls((m.data, m.indices[:, 0], m.indices[:, 1]), shape=(N, M), rows_sorted=True, cols_sorted=True)

    def todense(self) -> Any:
        return coo_todense(self)

    def _sort_indices(self) -> COO:
        """The same matrix with its stored elements in row-major order."""
        if self._rows_sorted:
            return self
        order = jnp.lexsort((self.col, self.row))
        return COO((self.data[order], self.row[order], self.col[order]), shape=self.shape, rows_sorted=True)

    def transpose(self, axes: Any = None) -> COO:
        if axes is not None and tuple(axes) != (1, 0):
            raise NotImplementedError(f"COO.transpose: axes={axes} (only the full transpose is supported)")
        return COO((self.data, self.col, self.row), shape=self.shape[::-1], rows_sorted=self._cols_sorted,
                   cols_sorted=self._rows_sorted)

    def __matmul__(self, other: Any) -> Any:
        if isinstance(other, JAXSparse):
            raise NotImplementedError("COO @ sparse: convert with .to_bcoo() first")
        other = jnp.asarray(other)
        if other.dtype != self.dtype:
            dt = jnp.promote_types(self.dtype, other.dtype)
            return COO((self.data.astype(dt), self.row, self.col), shape=self.shape) @ other.astype(dt)
        if other.ndim == 1:
            return coo_matvec(self, other)
        if other.ndim == 2:
            return coo_matmat(self, other)
        raise NotImplementedError(f"COO @ an array of {other.ndim} dimensions")

    def __rmatmul__(self, other: Any) -> Any:
        other = jnp.asarray(other)
        if other.ndim == 1:
            return coo_matvec(self, other, transpose=True)
        return coo_matmat(self, other.T, transpose=True).T

    def tree_flatten(self):
        return (self.data, self.row, self.col), self._info._asdict()

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.row, obj.col = children
        obj.shape = tuple(aux_data["shape"])
        obj._rows_sorted = aux_data["rows_sorted"]
        obj._cols_sorted = aux_data["cols_sorted"]
        return obj
