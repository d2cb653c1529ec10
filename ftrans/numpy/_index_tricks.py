"""Index construction helpers: ``indices``, ``ix_``, ``r_``/``c_``, ``mgrid``/``ogrid``,
triangle and diagonal index sets.

All of these take static sizes (Python ints, slices), so the index sets
themselves are computed on the host with NumPy and enter programs as
constants, while arrays passed to ``ix_``/``r_``/``c_`` go through ftrans
operations and may be traced.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import dtypes
from ftrans.core.config import config_context
from ftrans.core.operands import check_arraylike, concrete_or_error, shape_of
from ftrans.core.shape_poly import is_symbolic_dim, min_dim
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = [
    "tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from", "diag_indices",
    "diag_indices_from", "mask_indices", "indices", "ix_", "r_", "c_", "s_", "index_exp", "mgrid", "ogrid",
]


def _static_int(name: str, value: Any, what: str) -> int:
    value = concrete_or_error(value, f"{what} argument of jnp.{name}")
    try:
        return operator.index(value)
    except TypeError:
        raise FtransTypeError(f"{name}: {what} must be an integer, got {type(value).__name__}") from None


def _int_consts(*arrays: np.ndarray) -> tuple[Any, ...]:
    """Host index arrays as ftrans arrays of the default int dtype (what JAX returns)."""
    d = dtypes.default_int()
    return tuple(jnp.asarray(np.asarray(a).astype(d)) for a in arrays)


def _triu_size(n: Any, m: Any, k: Any) -> Any:
    """How many entries of an ``n x m`` matrix lie on or above diagonal ``k`` (symbolic sizes allowed)."""
    if k < 0:
        return n * m - _triu_size(m, n, 1 - k)
    if k >= m:
        return 0
    mk = min_dim(n, m - k)
    return mk * (mk + 1) // 2 + mk * (m - k - mk)


def _symbolic_tri_indices(name: str, n: Any, k: Any, m: Any) -> tuple[Any, Any] | None:
    """``tril_indices``/``triu_indices`` of symbolic sizes (shape polymorphism): the nonzero positions of the
    triangle of ones, as many as the triangle has (a symbolic count); None for static sizes."""
    if not any(is_symbolic_dim(d) for d in (n, k, m)):
        return None
    m = n if m is None else m
    ones = jnp.ones((n, m), dtype=np.int32)
    if name == "tril_indices":
        return jnp.nonzero(jnp.tril(ones, k=k), size=_triu_size(m, n, -k))
    return jnp.nonzero(jnp.triu(ones, k=k), size=_triu_size(n, m, k))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Return the row and column indices of the lower triangle of an `n x m` matrix.

    Args:
        n: Number of rows.
        k: Diagonal offset: positive values include diagonals above the main one.
        m: Number of columns (default `n`).
    Returns:
        A pair of 1-D integer arrays `(rows, cols)`.

    Examples:
        >>> jnp.tril_indices(3)
        (Array([0, 1, 1, 2, 2, 2], dtype=int32), Array([0, 0, 1, 0, 1, 2], dtype=int32))

    See also:
        `triu_indices`, `tril`.
    """
    sym = _symbolic_tri_indices("tril_indices", n, k, m)
    if sym is not None:
        return sym
    n = _static_int("tril_indices", n, "n")
    k = _static_int("tril_indices", k, "k")
    m = n if m is None else _static_int("tril_indices", m, "m")
    return _int_consts(*np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Return the row and column indices of the upper triangle of an `n x m` matrix.

    Args:
        n: Number of rows.
        k: Diagonal offset: positive values exclude diagonals above the main one.
        m: Number of columns (default `n`).
    Returns:
        A pair of 1-D integer arrays `(rows, cols)`.

    Examples:
        >>> jnp.triu_indices(3, k=1)
        (Array([0, 0, 1], dtype=int32), Array([1, 2, 2], dtype=int32))

    See also:
        `tril_indices`, `triu`.
    """
    sym = _symbolic_tri_indices("triu_indices", n, k, m)
    if sym is not None:
        return sym
    n = _static_int("triu_indices", n, "n")
    k = _static_int("triu_indices", k, "k")
    m = n if m is None else _static_int("triu_indices", m, "m")
    return _int_consts(*np.triu_indices(n, k, m))


def _check_2d(name: str, arr: Any) -> tuple[int, int]:
    check_arraylike(name, arr)
    shape = tuple(shape_of(arr))
    if len(shape) != 2:
        raise FtransValueError(f"{name} requires a 2-dimensional array, got shape {shape}")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """Return the indices of the lower triangle of a 2-D array.

    It is `tril_indices` for the shape of `arr`.

    Args:
        arr: 2-D array.
        k: Diagonal offset.
    Returns:
        A pair of 1-D integer arrays `(rows, cols)`.

    Examples:
        >>> x = jnp.arange(4).reshape(2, 2)
        >>> x[jnp.tril_indices_from(x)]
        Array([0, 2, 3], dtype=int32)

    See also:
        `tril_indices`.
    """
    n, m = _check_2d("tril_indices_from", arr)
    return tril_indices(n, k=k, m=m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """Return the indices of the upper triangle of a 2-D array.

    It is `triu_indices` for the shape of `arr`.

    Args:
        arr: 2-D array.
        k: Diagonal offset.
    Returns:
        A pair of 1-D integer arrays `(rows, cols)`.

    Examples:
        >>> x = jnp.arange(4).reshape(2, 2)
        >>> x[jnp.triu_indices_from(x)]
        Array([0, 1, 3], dtype=int32)

    See also:
        `triu_indices`.
    """
    n, m = _check_2d("triu_indices_from", arr)
    return triu_indices(n, k=k, m=m)


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    """Return the indices of the main diagonal of an `n`-per-side array.

    Args:
        n: Length of each axis.
        ndim: Number of dimensions.
    Returns:
        A tuple of `ndim` copies of `arange(n)`.

    Examples:
        >>> jnp.diag_indices(3)
        (Array([0, 1, 2], dtype=int32), Array([0, 1, 2], dtype=int32))

    See also:
        `diag_indices_from`, `fill_diagonal`.
    """
    n = _static_int("diag_indices", n, "'n'")
    ndim = _static_int("diag_indices", ndim, "'ndim'")
    if n < 0:
        raise FtransValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise FtransValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(dtypes.default_int(), n),) * ndim


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    """Return the indices of the main diagonal of a square (or hyper-cubic) array.

    Args:
        arr: Array whose axes all have the same length.
    Returns:
        A tuple of `arr.ndim` index arrays.

    Examples:
        >>> x = jnp.arange(9).reshape(3, 3)
        >>> x[jnp.diag_indices_from(x)]
        Array([0, 4, 8], dtype=int32)

    See also:
        `diag_indices`.
    """
    check_arraylike("diag_indices_from", arr)
    shape = tuple(shape_of(arr))
    if len(shape) < 2:
        raise FtransValueError(f"diag_indices_from: input array must be at least 2-d, got shape {shape}")
    if len(set(shape)) != 1:
        raise FtransValueError(f"diag_indices_from: all dimensions of input must be of equal length, got {shape}")
    return diag_indices(shape[0], len(shape))


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Any, Any]:
    """Return the indices where a masking function of a square matrix is nonzero.

    The positions are those of `mask_func(ones((n, n)), k)`; `size` makes it usable under `jit`.

    Args:
        n: Size of the square matrix.
        mask_func: A function such as `triu` or `tril` taking `(array, k)`.
        k: Offset passed to `mask_func`.
        size: Optional static number of indices to return.
    Returns:
        A pair of 1-D integer arrays `(rows, cols)`.

    Examples:
        >>> jnp.mask_indices(3, jnp.triu, 1)
        (Array([0, 0, 1], dtype=int32), Array([1, 2, 2], dtype=int32))

    See also:
        `triu_indices`, `tril_indices`.
    """
    n = _static_int("mask_indices", n, "n")
    i, j = jnp.nonzero(mask_func(jnp.ones((n, n)), k), size=size)
    return i, j


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """Return an array representing the indices of a grid.

    Args:
        dimensions: The shape of the grid.
        dtype: Integer dtype of the result (default int32).
        sparse: If True, return broadcastable arrays instead of a stacked grid.
    Returns:
        An array of shape `(len(dimensions),) + dimensions`, or a tuple of broadcastable arrays if `sparse`.

    Examples:
        >>> jnp.indices((2, 3))
        Array([[[0, 0, 0],
                [1, 1, 1]],
        <BLANKLINE>
               [[0, 1, 2],
                [0, 1, 2]]], dtype=int32)

    See also:
        `meshgrid`, `ix_`.
    """
    d = dtypes.default_int() if dtype is None else dtypes.requested(dtype, "indices")
    dims = tuple(_static_int("indices", x, "dimensions") for x in dimensions)
    nd = len(dims)
    out = []
    for i, dim in enumerate(dims):
        shp = tuple(dim if j == i else 1 for j in range(nd)) if sparse else dims
        out.append(lax.broadcasted_iota(d, shp, i))
    if sparse:
        return tuple(out)
    return jnp.stack(out, 0) if out else jnp.array([], dtype=d)


def ix_(*args: Any) -> tuple[Any, ...]:
    """Construct an open mesh from several 1-D sequences.

    Each input is reshaped so that the results broadcast to the full grid, for indexing a cross product.
    Boolean inputs are not supported.

    Args:
        *args: 1-D integer sequences.
    Returns:
        A tuple of arrays with `len(args)` dimensions each.

    Examples:
        >>> rows, cols = jnp.ix_(jnp.array([0, 1]), jnp.array([2, 0]))
        >>> jnp.arange(9).reshape(3, 3)[rows, cols]
        Array([[2, 0],
               [5, 3]], dtype=int32)

    See also:
        `meshgrid`, `indices`.
    """
    check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = jnp.asarray(a)
        if a.ndim != 1:
            raise FtransValueError(f"Arguments to jnp.ix_ must be 1-dimensional, got shape {a.shape}")
        if a.dtype == np.bool_:
            raise NotImplementedError("ix_: boolean arguments are not supported")
        shape = tuple(a.shape[0] if j == i else 1 for j in range(n))
        if a.shape[0] == 0:
            out.append(jnp.zeros(shape, dtypes.default_int()))
        else:
            out.append(jnp.reshape(a, shape))
    return tuple(out)


def _grid_from_slice(s: slice, op_name: str) -> Any:
    """``start:stop:step`` as ``arange``, or ``linspace`` when ``step`` is imaginary (a count)."""
    start = concrete_or_error(s.start, f"slice start of jnp.{op_name}") or 0
    stop = concrete_or_error(s.stop, f"slice stop of jnp.{op_name}")
    step = concrete_or_error(s.step, f"slice step of jnp.{op_name}") or 1
    if np.iscomplex(step):
        if stop is None:
            raise FtransTypeError(f"jnp.{op_name}: a slice with an imaginary step (a point count) needs an "
                                  f"explicit stop, got {s}")
        return jnp.linspace(start, stop, int(abs(step)))
    # No stop: arange(start, None, step), i.e. [0, start) as NumPy and JAX (``mgrid[:]`` is empty).
    return jnp.arange(start, stop, step)


def _promote(arrays: list) -> list:
    if not arrays:
        return arrays
    with config_context("numpy_dtype_promotion")("standard"):  # as JAX: arange's ints join linspace's floats
        d = jnp.result_type(*arrays)
    return [jnp.astype(a, d) if a.dtype != d else a for a in arrays]


class _Mgrid:
    """``jnp.mgrid[...]``: a dense stacked mesh from slices."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _grid_from_slice(key, "mgrid")
        parts = _promote([_grid_from_slice(k, "mgrid") for k in key])
        grids = jnp.meshgrid(*parts, indexing="ij", sparse=False)
        if not grids:
            return jnp.arange(0)
        return jnp.stack(grids, 0)


class _Ogrid:
    """``jnp.ogrid[...]``: an open (broadcastable) mesh from slices."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _grid_from_slice(key, "ogrid")
        parts = _promote([_grid_from_slice(k, "ogrid") for k in key])
        return jnp.meshgrid(*parts, indexing="ij", sparse=True)


mgrid = _Mgrid()
ogrid = _Ogrid()


class _AxisConcat:
    """NumPy's ``r_``/``c_`` mini-language: concatenate items along an axis.

    A leading string directive ``"axis,ndmin,trans1d[,matrix]"`` (or ``"r"``/
    ``"c"``) changes the axis, the minimum rank each item is raised to, and
    where a raised item's original axes go; slices become ranges.
    """

    axis: int
    ndmin: int
    trans1d: int
    op_name: str

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive == "r":
                params[-1] = 0
            elif directive == "c":
                params[-1] = 1
            else:
                vec: list[Any] = directive.split(",")
                vec = vec + params[len(vec):] if len(vec) < 4 else vec[:3] + [params[-1]]
                try:
                    params = [int(v) for v in vec]
                except ValueError:
                    raise FtransValueError(f"{self.op_name}: could not understand directive {directive!r}") from None
        axis, ndmin, trans1d, matrix = params
        out = []
        for item in items:
            if isinstance(item, slice):
                obj = _grid_from_slice(item, self.op_name)
                item_ndim = 0
            elif isinstance(item, str):
                raise FtransValueError(f"{self.op_name}: string directive must be placed at the beginning")
            else:
                obj = jnp.asarray(item)
                item_ndim = obj.ndim
            obj = jnp.array(obj, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                order = tuple(range(ndmin))
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                obj = jnp.transpose(obj, order[shift:] + order[:shift])
            out.append(obj)
        res = jnp.concatenate(tuple(out), axis=axis)
        if matrix != -1 and res.ndim == 1:
            res = jnp.expand_dims(res, matrix)
        return res

    def __len__(self) -> int:
        return 0


class RClass(_AxisConcat):
    """``jnp.r_``: concatenation along the first axis."""

    axis, ndmin, trans1d, op_name = 0, 1, -1, "r_"


class CClass(_AxisConcat):
    """``jnp.c_``: stacking 1-d items as columns (concatenation along the last axis, rank >= 2)."""

    axis, ndmin, trans1d, op_name = -1, 2, 0, "c_"


r_ = RClass()
c_ = CClass()
s_ = np.s_
index_exp = np.index_exp
