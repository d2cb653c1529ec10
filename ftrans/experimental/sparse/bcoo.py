"""BCOO: batched coordinate-format sparse arrays (JAX's ``jax.experimental.sparse.bcoo``).

Layout of a BCOO array of ``shape = batch + sparse + dense`` (``n_batch``,
``n_sparse``, ``n_dense`` dimensions):

* ``data``: ``batch + (nse,) + dense``, the stored values (a batch axis may have size 1: broadcast);
* ``indices``: ``batch + (nse, n_sparse)``, the sparse coordinates of each stored value.

An index that is out of bounds in any sparse dimension marks a padding slot: it
contributes nothing.  Duplicate indices are summed.

Every operation here is built from ftrans's numpy/lax functions (gathers with
fill, scatter-adds with drop, ``dot_general``, sorts) applied to the buffers of
one batch element and mapped over the batch dimensions with ``vmap``.  No new
primitives: ``jit``, ``grad`` (with respect to ``data`` and dense operands) and
``vmap`` follow from the rules of those primitives, and the values are the same
as JAX's sparse primitives give.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import lax
from ftrans.core import dtypes as _dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError, user_stacklevel
from ftrans.experimental.sparse._base import JAXSparse
from ftrans.experimental.sparse.util import (
    SparseEfficiencyError,
    SparseEfficiencyWarning,
    SparseInfo,
    _concrete_int,
    _count_stored_elements,
    _dot_general_validated_shape,
    nfold_vmap,
)

__all__ = [
    "BCOO", "bcoo_fromdense", "bcoo_todense", "bcoo_extract", "bcoo_transpose", "bcoo_dot_general",
    "bcoo_dot_general_sampled", "bcoo_reduce_sum", "bcoo_sum_duplicates", "bcoo_sort_indices",
    "bcoo_eliminate_zeros", "bcoo_update_layout", "bcoo_concatenate", "bcoo_broadcast_in_dim",
    "bcoo_reshape", "bcoo_slice", "bcoo_dynamic_slice", "bcoo_conv_general_dilated", "bcoo_squeeze", "bcoo_rev", "bcoo_multiply_sparse", "bcoo_multiply_dense",
]


class BCOOProperties(tuple):
    """``(n_batch, n_sparse, n_dense, nse)`` of a BCOO buffer pair."""

    def __new__(cls, n_batch: int, n_sparse: int, n_dense: int, nse: int):
        return super().__new__(cls, (n_batch, n_sparse, n_dense, nse))

    n_batch = property(lambda self: self[0])
    n_sparse = property(lambda self: self[1])
    n_dense = property(lambda self: self[2])
    nse = property(lambda self: self[3])


def _validate_bcoo_indices(indices: Any, shape: Sequence[int]) -> BCOOProperties:
    shape = tuple(shape)
    ishape = tuple(np.shape(indices))
    if len(ishape) < 2:
        raise FtransValueError(f"BCOO: indices must have at least 2 dimensions (batch..., nse, n_sparse), "
                               f"got shape {ishape}")
    if not _dtypes.issubdtype(indices.dtype, np.integer):
        raise FtransTypeError(f"BCOO: indices must be an integer array, got dtype {indices.dtype}")
    n_batch = len(ishape) - 2
    n_sparse = ishape[-1]
    nse = ishape[-2]
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise FtransValueError(f"BCOO: indices of shape {ishape} (n_batch={n_batch}, n_sparse={n_sparse}) "
                               f"are too many dimensions for shape {shape}")
    if any(s1 not in (1, s2) for s1, s2 in zip(ishape[:n_batch], shape[:n_batch])):
        raise FtransValueError(f"BCOO: indices batch dimensions {ishape[:n_batch]} are incompatible with "
                               f"shape {shape}")
    return BCOOProperties(n_batch, n_sparse, n_dense, nse)


def _validate_bcoo(data: Any, indices: Any, shape: Sequence[int]) -> BCOOProperties:
    props = _validate_bcoo_indices(indices, shape)
    n_batch, n_sparse, n_dense, nse = props
    shape = tuple(shape)
    dshape = tuple(np.shape(data))
    if len(dshape) != n_batch + 1 + n_dense:
        raise FtransValueError(f"BCOO: data of shape {dshape} does not match indices of shape "
                               f"{tuple(np.shape(indices))} for shape {shape}: expected data.ndim == "
                               f"{n_batch + 1 + n_dense}")
    if any(s1 not in (1, s2) for s1, s2 in zip(dshape[:n_batch], shape[:n_batch])):
        raise FtransValueError(f"BCOO: data batch dimensions {dshape[:n_batch]} are incompatible with shape {shape}")
    if dshape[n_batch] != nse:
        raise FtransValueError(f"BCOO: data has nse={dshape[n_batch]} but indices have nse={nse}")
    if dshape[n_batch + 1:] != shape[len(shape) - n_dense:]:
        raise FtransValueError(f"BCOO: data dense dimensions {dshape[n_batch + 1:]} do not match the trailing "
                               f"dimensions of shape {shape}")
    return props


def _cols(indices: Any) -> tuple:
    return tuple(indices[..., i] for i in range(indices.shape[-1]))


def _batch_shape(data: Any, indices: Any, n_batch: int) -> tuple[int, ...]:
    return tuple(max(a, b) for a, b in zip(data.shape[:n_batch], indices.shape[:n_batch]))


def _broadcast_batch(x: Any, batch: tuple[int, ...]) -> Any:
    n = len(batch)
    if tuple(x.shape[:n]) == batch:
        return x
    return jnp.broadcast_to(x, batch + tuple(x.shape[n:]))


def _sentinel(shape: Sequence[int], dtype: Any) -> Any:
    return jnp.asarray(np.array(shape, dtype=np.int64), dtype=dtype)


def _oob(indices: Any, sparse_shape: Sequence[int]) -> Any:
    """True where an index row is out of bounds (a padding slot)."""
    if indices.shape[-1] == 0:
        return jnp.zeros(indices.shape[:-1], bool)
    bound = _sentinel(sparse_shape, indices.dtype)
    return ((indices < 0) | (indices >= bound)).any(-1)


# ---------------------------------------------------------------------------------------------
# todense / fromdense / extract


def bcoo_todense(mat: BCOO) -> Any:
    """The dense array a BCOO array stands for (duplicates summed, padding dropped)."""
    return _bcoo_todense(mat.data, mat.indices, spinfo=mat._info)


def _bcoo_todense(data: Any, indices: Any, *, spinfo: SparseInfo) -> Any:
    data, indices = jnp.asarray(data), jnp.asarray(indices)
    shape = tuple(spinfo.shape)
    n_batch, n_sparse, _, _ = _validate_bcoo(data, indices, shape)
    inner = shape[n_batch:]

    def one(d, i):
        if n_sparse == 0:
            return d.sum(0)
        return jnp.zeros(inner, d.dtype).at[_cols(i)].add(d, mode="drop")

    out = nfold_vmap(one, n_batch)(data, indices)
    return _broadcast_to(out, shape)


def _broadcast_to(x: Any, shape: tuple) -> Any:
    return x if tuple(x.shape) == shape else jnp.broadcast_to(x, shape)


def bcoo_fromdense(mat: Any, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype: Any = np.int32) -> BCOO:
    """The BCOO array holding the nonzeros of dense ``mat`` (``nse`` slots per batch, padded)."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = _count_stored_elements(mat, n_batch, n_dense)
    nse = _concrete_int(nse, "bcoo_fromdense")
    data, indices = _bcoo_fromdense(mat, nse=nse, n_batch=n_batch, n_dense=n_dense, index_dtype=index_dtype)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def _bcoo_fromdense(mat: Any, *, nse: int, n_batch: int = 0, n_dense: int = 0,
                    index_dtype: Any = np.int32) -> tuple[Any, Any]:
    mat = jnp.asarray(mat)
    nse = _concrete_int(nse, "bcoo_fromdense")
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > mat.ndim:
        raise FtransValueError(f"bcoo_fromdense: n_batch={n_batch} and n_dense={n_dense} must be non-negative "
                               f"with a sum at most mat.ndim={mat.ndim}")
    if nse < 0:
        raise FtransValueError(f"bcoo_fromdense: nse must be non-negative, got {nse}")
    n_sparse = mat.ndim - n_batch - n_dense
    sparse_shape = mat.shape[n_batch:n_batch + n_sparse]

    def one(m):
        mask = m != 0
        if n_dense:
            mask = mask.any(tuple(range(n_sparse, m.ndim)))
        if n_sparse == 0:
            # The one element is the whole block (all zeros when it has no nonzero): slot 0 holds it
            # unmasked, so its derivative is the identity, as JAX's extract-based rule gives.
            data = jnp.concatenate([m[None][:nse], jnp.zeros((max(nse - 1, 0),) + m.shape, m.dtype)])
            return data, jnp.zeros((nse, 0), index_dtype)
        idx = jnp.nonzero(mask, size=nse, fill_value=tuple(sparse_shape))
        data = m.at[idx].get(mode="fill", fill_value=0)
        return data, jnp.stack(idx, axis=1).astype(index_dtype)

    return nfold_vmap(one, n_batch)(mat)


def bcoo_extract(sparr: BCOO, arr: Any, *, assume_unique: bool | None = None) -> BCOO:
    """The values of dense ``arr`` at the indices of ``sparr``, as a BCOO array with ``sparr``'s indices."""
    if not isinstance(sparr, BCOO):
        raise FtransTypeError(f"bcoo_extract: first argument must be a BCOO array, got {type(sparr).__name__}")
    arr = jnp.asarray(arr)
    if tuple(arr.shape) != sparr.shape:
        raise FtransValueError(f"bcoo_extract: sparr.shape={sparr.shape} must match arr.shape={tuple(arr.shape)}")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    data = _bcoo_extract(sparr.indices, arr, assume_unique=assume_unique)
    return BCOO((data, sparr.indices), **sparr._info._asdict())


def _first_occurrence(indices: Any) -> Any:
    """For one batch's ``(nse, n_sparse)`` indices: True at the first slot holding each distinct index."""
    n = indices.shape[0]
    if n == 0:
        return jnp.zeros((0,), bool)
    if indices.shape[1] == 0:
        return jnp.arange(n) == 0
    order = jnp.lexsort(tuple(indices[:, i] for i in reversed(range(indices.shape[1]))))
    s = indices[order]
    new = jnp.concatenate([jnp.ones((1,), bool), (s[1:] != s[:-1]).any(1)])
    return jnp.zeros((n,), bool).at[order].set(new)


def _bcoo_extract(indices: Any, arr: Any, *, assume_unique: bool = True) -> Any:
    indices, arr = jnp.asarray(indices), jnp.asarray(arr)
    n_batch, n_sparse, n_dense, nse = _validate_bcoo_indices(indices, arr.shape)
    dense_shape = tuple(arr.shape[arr.ndim - n_dense:])

    def one(i, a):
        if n_sparse == 0:
            out = jnp.broadcast_to(a, (nse,) + tuple(a.shape))
        else:
            out = a.at[_cols(i)].get(mode="fill", fill_value=0)
        if not assume_unique:
            keep = _first_occurrence(i)
            out = jnp.where(keep.reshape((nse,) + (1,) * n_dense), out, jnp.zeros((), out.dtype))
        return out

    out = nfold_vmap(one, n_batch)(indices, arr)
    return _broadcast_to(out, tuple(arr.shape[:n_batch]) + (nse,) + dense_shape)


# ---------------------------------------------------------------------------------------------
# structure: transpose, sort, duplicates, layout


def bcoo_transpose(mat: BCOO, *, permutation: Sequence[int]) -> BCOO:
    """``mat`` with its axes permuted; batch, sparse and dense axes must each stay in their own block."""
    permutation = tuple(operator.index(p) for p in permutation)
    data, indices = _bcoo_transpose(mat.data, mat.indices, permutation=permutation, spinfo=mat._info)
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    sparse_perm = permutation[n_batch:n_batch + n_sparse]
    keeps_order = sparse_perm == tuple(range(n_batch, n_batch + n_sparse))
    return BCOO((data, indices), shape=tuple(mat.shape[p] for p in permutation),
                indices_sorted=mat.indices_sorted and keeps_order, unique_indices=mat.unique_indices)


def _validate_permutation(permutation: tuple, shape: tuple, n_batch: int, n_sparse: int, n_dense: int) -> None:
    if sorted(permutation) != list(range(len(shape))):
        raise FtransTypeError(f"bcoo_transpose: permutation {permutation} is not a permutation of the axes of "
                              f"an array of shape {shape}")
    blocks = (range(0, n_batch), range(n_batch, n_batch + n_sparse), range(n_batch + n_sparse, len(shape)))
    for rng, name in zip(blocks, ("batch", "sparse", "dense")):
        if sorted(permutation[rng.start:rng.stop]) != list(rng):
            raise NotImplementedError(
                f"bcoo_transpose: {name} dimensions must be permuted among themselves; got permutation="
                f"{permutation} for n_batch={n_batch}, n_sparse={n_sparse}, n_dense={n_dense}")


def _bcoo_transpose(data: Any, indices: Any, *, permutation: Sequence[int], spinfo: SparseInfo) -> tuple[Any, Any]:
    n_batch, n_sparse, n_dense, _ = _validate_bcoo(data, indices, spinfo.shape)
    permutation = tuple(permutation)
    _validate_permutation(permutation, tuple(spinfo.shape), n_batch, n_sparse, n_dense)
    batch_perm = list(permutation[:n_batch])
    sparse_perm = [p - n_batch for p in permutation[n_batch:n_batch + n_sparse]]
    dense_perm = [p - n_sparse + 1 for p in permutation[n_batch + n_sparse:]]
    data = data.transpose(batch_perm + [n_batch] + dense_perm)
    indices = indices.transpose(batch_perm + [n_batch, n_batch + 1])
    if sparse_perm != list(range(n_sparse)):
        indices = indices[..., np.array(sparse_perm, dtype=np.int32)]
    return data, indices


def bcoo_sort_indices(mat: BCOO) -> BCOO:
    """``mat`` with each batch's stored elements in lexicographic order of their indices."""
    data, indices = _bcoo_sort_indices(mat.data, mat.indices, spinfo=mat._info)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=mat.unique_indices)


def _bcoo_sort_indices(data: Any, indices: Any, *, spinfo: SparseInfo) -> tuple[Any, Any]:
    n_batch, n_sparse, n_dense, nse = _validate_bcoo(data, indices, spinfo.shape)
    if n_sparse == 0 or nse == 0:
        return data, indices

    def order_of(i):
        return jnp.lexsort(tuple(i[:, k] for k in reversed(range(n_sparse))))

    order = nfold_vmap(order_of, n_batch)(indices)  # the indices' batch shape + (nse,)
    indices = jnp.take_along_axis(indices, order[..., None], axis=n_batch)
    batch = _batch_shape(data, indices, n_batch)
    data = _broadcast_batch(data, batch)
    order = jnp.broadcast_to(order, batch + (nse,)).reshape(batch + (nse,) + (1,) * n_dense)
    data = jnp.take_along_axis(data, order, axis=n_batch)
    return data, indices


def bcoo_sum_duplicates(mat: BCOO, nse: int | None = None) -> BCOO:
    """``mat`` with duplicate indices summed into one slot, sorted, padding at the end.

    Without ``nse`` the result holds exactly the distinct in-bounds indices (the
    count must be concrete: pass ``nse`` under ``jit``).
    """
    data, indices = _bcoo_sum_duplicates(mat.data, mat.indices, spinfo=mat._info, nse=nse)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def _unique_one(d: Any, i: Any, sparse_shape: tuple, nse_out: int, dense_shape: tuple) -> tuple[Any, Any, Any]:
    """One batch: (summed data, unique sorted indices padded with out-of-bounds rows, count)."""
    n, n_sparse = i.shape
    if n_sparse == 0:
        total = d.sum(0)
        out_d = jnp.zeros((nse_out,) + dense_shape, d.dtype)
        if nse_out:
            out_d = out_d.at[0].set(total)
        count = jnp.asarray(min(n, 1), np.int32)
        return out_d, jnp.zeros((nse_out, 0), i.dtype), count
    if n == 0:
        return (jnp.zeros((nse_out,) + dense_shape, d.dtype),
                jnp.broadcast_to(_sentinel(sparse_shape, i.dtype), (nse_out, n_sparse)), jnp.asarray(0, np.int32))
    oob = _oob(i, sparse_shape)
    sentinel = _sentinel(sparse_shape, i.dtype)
    i = jnp.where(oob[:, None], sentinel, i)
    d = jnp.where(oob.reshape((n,) + (1,) * len(dense_shape)), jnp.zeros((), d.dtype), d)
    order = jnp.lexsort(tuple(i[:, k] for k in reversed(range(n_sparse))))
    s = i[order]
    new = jnp.concatenate([jnp.ones((1,), bool), (s[1:] != s[:-1]).any(1)])
    group = jnp.cumsum(new.astype(np.int32)) - 1
    inverse = jnp.zeros((n,), np.int32).at[order].set(group)
    out_i = jnp.broadcast_to(sentinel, (nse_out, n_sparse)).at[group].set(s, mode="drop")
    out_d = jnp.zeros((nse_out,) + dense_shape, d.dtype).at[inverse].add(d, mode="drop")
    count = (new & ~oob[order]).sum().astype(np.int32)
    return out_d, out_i, count


def _bcoo_sum_duplicates(data: Any, indices: Any, *, spinfo: SparseInfo, nse: int | None) -> tuple[Any, Any]:
    data, indices = jnp.asarray(data), jnp.asarray(indices)
    n_batch, n_sparse, n_dense, nse_in = _validate_bcoo(data, indices, spinfo.shape)
    shape = tuple(spinfo.shape)
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    nse_out = nse_in if nse is None else operator.index(nse)

    def one(d, i):
        return _unique_one(d, i, sparse_shape, nse_out, dense_shape)

    out_d, out_i, count = nfold_vmap(one, n_batch)(data, indices)
    if nse is None:
        if isinstance(count, Tracer):
            from ftrans.errors import ConcretizationTypeError
            raise ConcretizationTypeError(
                "bcoo_sum_duplicates: the number of distinct indices is not known at trace time; pass nse= "
                "explicitly (for example under jit)")
        true_nse = int(np.max(np.asarray(count), initial=0))
        if n_sparse == 0:
            true_nse = min(nse_in, 1)
        out_d = out_d[(slice(None),) * n_batch + (slice(0, true_nse),)]
        out_i = out_i[(slice(None),) * n_batch + (slice(0, true_nse),)]
    return out_d, out_i


def bcoo_eliminate_zeros(mat: BCOO, nse: int | None = None) -> BCOO:
    """``mat`` without its explicitly stored zeros (their slots become padding), duplicates summed."""
    data, indices = mat.data, mat.indices
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    zero = data == 0
    if mat.n_dense:
        zero = zero.all(tuple(range(n_batch + 1, data.ndim)))
    sentinel = _sentinel(mat.shape[n_batch:n_batch + n_sparse], indices.dtype)
    batch = _batch_shape(zero, indices, n_batch)
    indices = jnp.where(_broadcast_batch(zero, batch)[..., None], sentinel, _broadcast_batch(indices, batch))
    return bcoo_sum_duplicates(BCOO((data, indices), shape=mat.shape), nse=nse)


def _bcoo_set_nse(mat: BCOO, nse: int) -> BCOO:
    """``mat`` with ``nse`` slots per batch (padded with out-of-bounds indices, or truncated)."""
    nse = operator.index(nse)
    if nse == mat.nse:
        return mat
    n_batch = mat.n_batch
    if nse < mat.nse:
        sl = (slice(None),) * n_batch + (slice(0, nse),)
        return BCOO((mat.data[sl], mat.indices[sl]), **mat._info._asdict())
    pad = nse - mat.nse
    sentinel = _sentinel(mat.shape[n_batch:n_batch + mat.n_sparse], mat.indices.dtype)
    data = jnp.concatenate([mat.data, jnp.zeros(mat.data.shape[:n_batch] + (pad,) + mat.data.shape[n_batch + 1:],
                                                mat.dtype)], axis=n_batch)
    indices = jnp.concatenate([mat.indices, jnp.broadcast_to(sentinel, mat.indices.shape[:n_batch] + (pad, mat.n_sparse))],
                              axis=n_batch)
    return BCOO((data, indices), **mat._info._asdict())


def bcoo_update_layout(mat: BCOO, *, n_batch: int | None = None, n_dense: int | None = None,
                       on_inefficient: str | None = "error") -> BCOO:
    """``mat`` stored with ``n_batch`` batch and ``n_dense`` dense dimensions (same dense value).

    Turning sparse dimensions into batch or dense ones stores many zeros; that raises
    ``SparseEfficiencyError`` unless ``on_inefficient`` is ``'warn'`` or ``None``.
    """
    n_batch = mat.n_batch if n_batch is None else operator.index(n_batch)
    n_dense = mat.n_dense if n_dense is None else operator.index(n_dense)
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    if on_inefficient not in ("error", "warn", None):
        raise FtransValueError(f"bcoo_update_layout: on_inefficient={on_inefficient!r}; expected one of "
                               "['error', 'warn', None]")
    n_sparse = mat.ndim - n_batch - n_dense
    if n_batch < 0:
        raise FtransValueError(f"bcoo_update_layout: n_batch must be non-negative; got {n_batch}")
    if n_dense < 0:
        raise FtransValueError(f"bcoo_update_layout: n_dense must be non-negative; got {n_dense}")
    if n_sparse < 0:
        raise FtransValueError(f"bcoo_update_layout: the sum of n_batch={n_batch} and n_dense={n_dense} cannot be "
                               f"larger than mat.ndim={mat.ndim}")

    def inefficient(msg: str) -> None:
        if on_inefficient == "error":
            raise SparseEfficiencyError(msg + " Pass on_inefficient='warn' or None to bcoo_update_layout to allow it.")
        if on_inefficient == "warn":
            warnings.warn(msg + " Pass on_inefficient=None to bcoo_update_layout to silence this warning.",
                          SparseEfficiencyWarning, stacklevel=user_stacklevel())

    shape = mat.shape
    if n_dense > mat.n_dense and any(d > 1 for d in shape[mat.ndim - n_dense:mat.ndim - mat.n_dense]):
        inefficient(f"For a matrix of shape {shape}, increasing n_dense from {mat.n_dense} to {n_dense} results in "
                    "inefficient storage.")
    if n_batch > mat.n_batch and any(d > 1 for d in shape[mat.n_batch:n_batch]):
        inefficient(f"For a matrix of shape {shape}, increasing n_batch from {mat.n_batch} to {n_batch} results in "
                    "inefficient storage.")

    data, indices = mat.data, mat.indices
    cur_b, cur_d = mat.n_batch, mat.n_dense
    batch = tuple(mat.shape[:cur_b])
    data, indices = _broadcast_batch(data, batch), _broadcast_batch(indices, batch)

    if n_dense < cur_d:  # leading dense dims become trailing sparse dims
        k = cur_d - n_dense
        moved = data.shape[cur_b + 1:cur_b + 1 + k]
        m = math.prod(moved)
        grids = np.indices(moved).reshape(k, m).T.astype(np.int64)  # (m, k)
        nse = data.shape[cur_b]
        data = data.reshape(batch + (nse * m,) + data.shape[cur_b + 1 + k:])
        old = jnp.broadcast_to(indices[..., :, None, :], batch + (nse, m, indices.shape[-1]))
        new = jnp.broadcast_to(jnp.asarray(grids, indices.dtype), batch + (nse, m, k))
        indices = jnp.concatenate([old, new], axis=-1).reshape(batch + (nse * m, indices.shape[-1] + k))
        cur_d = n_dense

    if n_batch < cur_b:  # trailing batch dims become leading sparse dims
        k = cur_b - n_batch
        moved = batch[n_batch:]
        m = math.prod(moved)
        nse = indices.shape[-2]
        grids = np.indices(moved).reshape(k, m).T.astype(np.int64)  # (m, k)
        outer = batch[:n_batch]
        data = data.reshape(outer + (m * nse,) + data.shape[cur_b + 1:])
        new = jnp.broadcast_to(jnp.asarray(grids, indices.dtype)[:, None, :], outer + (m, nse, k))
        old = indices.reshape(outer + (m, nse, indices.shape[-1]))
        indices = jnp.concatenate([new, old], axis=-1).reshape(outer + (m * nse, k + indices.shape[-1]))
        batch = outer
        cur_b = n_batch

    if n_dense > cur_d:  # trailing sparse dims become leading dense dims
        k = n_dense - cur_d
        dense_new = shape[mat.ndim - n_dense:]

        def to_dense(d, i):
            nse = i.shape[0]
            cols = tuple(i[:, i.shape[1] - k + j] for j in range(k))
            out = jnp.zeros((nse,) + tuple(dense_new), d.dtype)
            return out.at[(jnp.arange(nse),) + cols].add(d, mode="drop"), i[:, :i.shape[1] - k]

        data, indices = nfold_vmap(to_dense, cur_b)(data, indices)
        cur_d = n_dense

    if n_batch > cur_b:  # leading sparse dims become trailing batch dims
        k = n_batch - cur_b
        new_batch = shape[cur_b:n_batch]

        def to_batch(d, i):
            nse = i.shape[0]
            cols = tuple(i[:, j] for j in range(k))
            out = jnp.zeros(tuple(new_batch) + (nse,) + tuple(d.shape[1:]), d.dtype)
            out = out.at[cols + (jnp.arange(nse),)].add(d, mode="drop")
            rest = jnp.broadcast_to(i[:, k:], tuple(new_batch) + (nse, i.shape[1] - k))
            return out, rest

        data, indices = nfold_vmap(to_batch, cur_b)(data, indices)
        cur_b = n_batch

    return BCOO((data, indices), shape=shape)


# ---------------------------------------------------------------------------------------------
# products


def _ensure_tuple(x: Any) -> tuple:
    if isinstance(x, (int, np.integer)):
        return (int(x),)
    return tuple(operator.index(v) for v in x)


def _normalize_dimension_numbers(dimension_numbers: Any) -> tuple:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise FtransTypeError(f"bcoo_dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                              f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    return (_ensure_tuple(lc), _ensure_tuple(rc)), (_ensure_tuple(lb), _ensure_tuple(rb))


def bcoo_dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                     preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """JAX's ``lax`` ``dot_general`` with either operand (or both) a BCOO array.

    Sparse times dense (either order) gives a dense array; sparse times sparse a BCOO array.
    """
    del precision, out_sharding
    dimension_numbers = _normalize_dimension_numbers(dimension_numbers)
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        return _bcoo_spdot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                   preferred_element_type=preferred_element_type)
    if isinstance(lhs, BCOO):
        return _bcoo_dot_general(lhs.data, lhs.indices, rhs, dimension_numbers=dimension_numbers,
                                 preferred_element_type=preferred_element_type, lhs_spinfo=lhs._info)
    if isinstance(rhs, BCOO):
        return _bcoo_rdot_general(lhs, rhs.data, rhs.indices, dimension_numbers=dimension_numbers,
                                  preferred_element_type=preferred_element_type, rhs_spinfo=rhs._info)
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)


def _dot_out_dtype(a: Any, b: Any, preferred_element_type: Any) -> Any:
    if preferred_element_type is not None:
        return np.dtype(preferred_element_type)
    return None


def _bcoo_dot_general(lhs_data: Any, lhs_indices: Any, rhs: Any, *, dimension_numbers: Any,
                      preferred_element_type: Any = None, lhs_spinfo: SparseInfo) -> Any:
    lhs_data, lhs_indices, rhs = jnp.asarray(lhs_data), jnp.asarray(lhs_indices), jnp.asarray(rhs)
    shape = tuple(lhs_spinfo.shape)
    (lc, rc), (lb, rb) = _normalize_dimension_numbers(dimension_numbers)
    n_batch, n_sparse, n_dense, _ = _validate_bcoo(lhs_data, lhs_indices, shape)
    out_shape = _dot_general_validated_shape(shape, rhs.shape, ((lc, rc), (lb, rb)))
    if lhs_data.dtype != rhs.dtype:
        # Mixed operand dtypes compute in their promoted type, as JAX's (and ftrans's) dot_general does.
        dt = jnp.promote_types(lhs_data.dtype, rhs.dtype)
        lhs_data, rhs = lhs_data.astype(dt), rhs.astype(dt)
    if lb and max(lb) >= n_batch:
        raise NotImplementedError(
            "bcoo_dot_general batch dimensions must be among the batch dimensions in the sparse representation.\n"
            f"got lhs_batch={lb}, n_batch={n_batch}")
    if any(d >= n_batch + n_sparse for d in lc):
        raise NotImplementedError("bcoo_dot_general: contracting over dense dimensions.")

    pairs = list(zip(lc, rc))
    cb = [(l_, r_) for l_, r_ in pairs if l_ < n_batch]          # contracted batch dims
    cs = [(l_ - n_batch, r_) for l_, r_ in pairs if l_ >= n_batch]  # contracted sparse dims
    free_b = [d for d in range(n_batch) if d not in lb and d not in [p[0] for p in cb]]
    free_s = [d for d in range(n_sparse) if d not in [p[0] for p in cs]]
    rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]

    batch = tuple(shape[:n_batch])
    batch_perm = list(lb) + free_b + [p[0] for p in cb]
    data = _broadcast_batch(lhs_data, batch).transpose(batch_perm + list(range(n_batch, lhs_data.ndim)))
    indices = _broadcast_batch(lhs_indices, batch).transpose(batch_perm + [n_batch, n_batch + 1])
    rhs_t = rhs.transpose(list(rb) + [p[1] for p in cb] + [p[1] for p in cs] + rfree)
    pet = _dot_out_dtype(lhs_data, rhs, preferred_element_type)
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    free_sparse_shape = tuple(sparse_shape[d] for d in free_s)
    n_cs = len(cs)

    def inner(d, i, r):
        # d: (nse, *dense); i: (nse, n_sparse); r: (contracted sparse..., rhs free...)
        if n_cs:
            rows = r.at[tuple(i[:, p[0]] for p in cs)].get(mode="fill", fill_value=0)
        else:
            rows = jnp.broadcast_to(r[None], (i.shape[0],) + tuple(r.shape))
        prod = lax.dot_general(d, rows, (((), ()), ((0,), (0,))), preferred_element_type=pet)
        if free_s:
            out = jnp.zeros(free_sparse_shape + tuple(prod.shape[1:]), prod.dtype)
            return out.at[tuple(i[:, k] for k in free_s)].add(prod, mode="drop")
        return prod.sum(0)

    fn = inner
    for _ in cb:
        fn = _summed_vmap(fn)
    for _ in free_b:
        fn = nfold_vmap(fn, 1, in_axes=(0, 0, None))
    for _ in lb:
        fn = nfold_vmap(fn, 1)
    out = fn(data, indices, rhs_t)
    return _broadcast_to(out, out_shape)


def _summed_vmap(fn):
    def mapped(d, i, r):
        return nfold_vmap(fn, 1)(d, i, r).sum(0)
    return mapped


def _bcoo_rdot_general(lhs: Any, rhs_data: Any, rhs_indices: Any, *, dimension_numbers: Any,
                       preferred_element_type: Any = None, rhs_spinfo: SparseInfo) -> Any:
    (lc, rc), (lb, rb) = _normalize_dimension_numbers(dimension_numbers)
    result = _bcoo_dot_general(rhs_data, rhs_indices, lhs, dimension_numbers=((rc, lc), (rb, lb)),
                               preferred_element_type=preferred_element_type, lhs_spinfo=rhs_spinfo)
    n_b = len(lb)
    n_rhs_free = len(rhs_spinfo.shape) - len(rc) - len(rb)
    perm = list(range(n_b)) + list(range(n_b + n_rhs_free, result.ndim)) + list(range(n_b, n_b + n_rhs_free))
    return result.transpose(perm)


def bcoo_dot_general_sampled(A: Any, B: Any, indices: Any, *, dimension_numbers: Any) -> Any:
    """The values of ``dot_general(A, B)`` at ``indices`` only (the data of a BCOO result)."""
    A, B, indices = jnp.asarray(A), jnp.asarray(B), jnp.asarray(indices)
    dn = _normalize_dimension_numbers(dimension_numbers)
    out = lax.dot_general(A, B, dn)
    return _bcoo_extract(indices, out)


def _bcoo_spdot_general(lhs: BCOO, rhs: BCOO, *, dimension_numbers: Any, preferred_element_type: Any) -> BCOO:
    """Sparse x sparse: every pair of stored elements whose contracted coordinates agree, then summed."""
    (lc, rc), (lb, rb) = dimension_numbers
    out_shape = _dot_general_validated_shape(lhs.shape, rhs.shape, dimension_numbers)
    if lhs.n_dense or rhs.n_dense:
        raise NotImplementedError("bcoo_spdot_general with dense dimensions.")
    if (lb and max(lb) >= lhs.n_batch) or (rb and max(rb) >= rhs.n_batch):
        raise NotImplementedError("bcoo_spdot_general: batch_dims must correspond to batch dimensions of the "
                                  "sparse representation.")
    if (lc and (min(lc) < lhs.n_batch or max(lc) >= lhs.n_batch + lhs.n_sparse)) or \
            (rc and (min(rc) < rhs.n_batch or max(rc) >= rhs.n_batch + rhs.n_sparse)):
        raise NotImplementedError("bcoo_spdot_general only supports contraction of sparse indices.")
    if rhs.n_batch > len(rb) and lhs.n_sparse > len(lc):
        raise FtransValueError("bcoo_spdot_general: cannot have unused batch dims on rhs with unused sparse dims "
                               "on lhs.")
    if lhs.dtype != rhs.dtype:
        dt = jnp.promote_types(lhs.dtype, rhs.dtype)
        lhs, rhs = lhs.astype(dt), rhs.astype(dt)
    lnb, rnb = lhs.n_batch, rhs.n_batch
    lcs = [d - lnb for d in lc]
    rcs = [d - rnb for d in rc]
    lfree = [d for d in range(lhs.n_sparse) if d not in lcs]
    rfree = [d for d in range(rhs.n_sparse) if d not in rcs]
    lss = lhs.shape[lnb:]
    rss = rhs.shape[rnb:]
    free_shape = tuple(lss[d] for d in lfree) + tuple(rss[d] for d in rfree)
    pet = _dot_out_dtype(lhs.data, rhs.data, preferred_element_type)
    out_nb = lnb + rnb - len(lb)
    out_nse = (lhs.nse if lfree else 1) * (rhs.nse if rfree else 1)
    out_nse = min(out_nse, math.prod(out_shape[out_nb:]))

    def one(ld, li, rd, ri):
        nl, nr = li.shape[0], ri.shape[0]
        match = ~(_oob(li, lss)[:, None] | _oob(ri, rss)[None, :])
        for a, b in zip(lcs, rcs):
            match = match & (li[:, a][:, None] == ri[:, b][None, :].astype(li.dtype))
        if pet is not None:
            ld, rd = ld.astype(pet), rd.astype(pet)
        vals = jnp.where(match, ld[:, None] * rd[None, :], jnp.zeros((), ld.dtype))
        parts = [jnp.broadcast_to(li[:, np.array(lfree, dtype=np.int32)][:, None, :], (nl, nr, len(lfree))),
                 jnp.broadcast_to(ri[:, np.array(rfree, dtype=np.int32)][None, :, :],
                                  (nl, nr, len(rfree))).astype(li.dtype)]
        idx = jnp.concatenate(parts, axis=-1)
        idx = jnp.where(match[..., None], idx, _sentinel(free_shape, li.dtype))
        d, i = vals.reshape(nl * nr), idx.reshape(nl * nr, len(free_shape))
        return _unique_one(d, i, free_shape, out_nse, ())[:2]

    lfree_b = [d for d in range(lnb) if d not in lb]
    rfree_b = [d for d in range(rnb) if d not in rb]
    lperm = list(lb) + lfree_b
    rperm = list(rb) + rfree_b
    lbatch = tuple(lhs.shape[:lnb])
    rbatch = tuple(rhs.shape[:rnb])
    ld = _broadcast_batch(lhs.data, lbatch).transpose(lperm + [lnb])
    li = _broadcast_batch(lhs.indices, lbatch).transpose(lperm + [lnb, lnb + 1])
    rd = _broadcast_batch(rhs.data, rbatch).transpose(rperm + [rnb])
    ri = _broadcast_batch(rhs.indices, rbatch).transpose(rperm + [rnb, rnb + 1])
    fn = one
    for _ in rfree_b:
        fn = nfold_vmap(fn, 1, in_axes=(None, None, 0, 0))
    for _ in lfree_b:
        fn = nfold_vmap(fn, 1, in_axes=(0, 0, None, None))
    for _ in lb:
        fn = nfold_vmap(fn, 1)
    data, indices = fn(ld, li, rd, ri)
    return BCOO((data, indices), shape=out_shape, indices_sorted=True, unique_indices=True)


def bcoo_multiply_dense(sp_mat: BCOO, v: Any) -> Any:
    """Elementwise ``sp_mat * v`` for dense ``v`` broadcasting to ``sp_mat.shape``: the product's data."""
    v = jnp.asarray(v)
    shape = sp_mat.shape
    if v.ndim == 0:
        return sp_mat.data * v
    if tuple(np.broadcast_shapes(v.shape, shape)) != shape:
        raise NotImplementedError(
            "multiplication between sparse and dense is only implemented for cases where the output shape "
            f"matches the sparse matrix shape. Got shape={shape}, v.shape={tuple(v.shape)}")
    v = v.reshape((1,) * (len(shape) - v.ndim) + tuple(v.shape))
    n_batch, n_sparse = sp_mat.n_batch, sp_mat.n_sparse

    def one(d, i, w):
        idx = tuple(jnp.zeros_like(i[:, k]) if w.shape[k] == 1 else i[:, k] for k in range(n_sparse))
        g = w[idx] if n_sparse else w[None]
        return d * g

    return nfold_vmap(one, n_batch)(sp_mat.data, sp_mat.indices, v)


def bcoo_multiply_sparse(lhs: BCOO, rhs: BCOO) -> BCOO:
    """Elementwise product of two BCOO arrays of the same shape (a BCOO array)."""
    if lhs.shape != rhs.shape:
        raise FtransValueError(f"bcoo_multiply_sparse: shapes must match, got {lhs.shape} and {rhs.shape}")
    n = lhs.ndim
    nb = min(lhs.n_batch, rhs.n_batch)
    nd = min(lhs.n_dense, rhs.n_dense)
    lhs = bcoo_update_layout(lhs, n_batch=nb, n_dense=nd, on_inefficient=None) if (lhs.n_batch, lhs.n_dense) != (nb, nd) else lhs
    rhs = bcoo_update_layout(rhs, n_batch=nb, n_dense=nd, on_inefficient=None) if (rhs.n_batch, rhs.n_dense) != (nb, nd) else rhs
    ns = n - nb - nd
    sshape = lhs.shape[nb:nb + ns]

    def one(ld, li, rd, ri):
        nl, nr = li.shape[0], ri.shape[0]
        match = ~(_oob(li, sshape)[:, None] | _oob(ri, sshape)[None, :])
        for k in range(ns):
            match = match & (li[:, k][:, None] == ri[:, k][None, :])
        vals = ld[:, None] * rd[None, :]
        vals = jnp.where(match.reshape(match.shape + (1,) * nd), vals, jnp.zeros((), vals.dtype))
        idx = jnp.where(match[..., None], jnp.broadcast_to(li[:, None, :], (nl, nr, ns)), _sentinel(sshape, li.dtype))
        return vals.reshape((nl * nr,) + tuple(vals.shape[2:])), idx.reshape(nl * nr, ns)

    data, indices = nfold_vmap(one, nb)(lhs.data, lhs.indices, rhs.data, rhs.indices)
    return BCOO((data, indices), shape=lhs.shape)


# ---------------------------------------------------------------------------------------------
# reductions and shape operations


def bcoo_reduce_sum(mat: BCOO, *, axes: Sequence[int]) -> BCOO:
    """Sum of ``mat`` over ``axes``, still a BCOO array."""
    ndim = mat.ndim
    axes = sorted({operator.index(a) % ndim if ndim else operator.index(a) for a in axes})
    if any(a < 0 or a >= max(ndim, 1) for a in axes):
        raise FtransValueError(f"bcoo_reduce_sum: axes {axes} out of range for an array of {ndim} dimensions")
    n_batch, n_sparse = mat.n_batch, mat.n_sparse
    data, indices = mat.data, mat.indices
    batch = tuple(mat.shape[:n_batch])
    data, indices = _broadcast_batch(data, batch), _broadcast_batch(indices, batch)
    shape = list(mat.shape)
    # Batch axes: fold them into the nse axis (their elements become more stored elements).
    b_axes = [a for a in axes if a < n_batch]
    if b_axes:
        keep = [d for d in range(n_batch) if d not in b_axes]
        perm_d = keep + b_axes + list(range(n_batch, data.ndim))
        perm_i = keep + b_axes + [n_batch, n_batch + 1]
        data = data.transpose(perm_d)
        indices = indices.transpose(perm_i)
        kb = tuple(batch[d] for d in keep)
        m = math.prod(batch[d] for d in b_axes)
        data = data.reshape(kb + (m * data.shape[len(keep) + len(b_axes)],) + tuple(data.shape[n_batch + 1:]))
        indices = indices.reshape(kb + (m * indices.shape[-2], n_sparse))
    nb_new = n_batch - len(b_axes)
    # Sparse axes: drop the column (padding in that column must not become a real entry).
    s_axes = [a - n_batch for a in axes if n_batch <= a < n_batch + n_sparse]
    if s_axes:
        col_bound = jnp.asarray(np.array([mat.shape[n_batch + k] for k in s_axes]), indices.dtype)
        cols = indices[..., np.array(s_axes, dtype=np.int32)]
        bad = ((cols < 0) | (cols >= col_bound)).any(-1)
        data = jnp.where(bad.reshape(bad.shape + (1,) * (data.ndim - bad.ndim)), jnp.zeros((), data.dtype), data)
        keep_cols = [k for k in range(n_sparse) if k not in s_axes]
        indices = indices[..., np.array(keep_cols, dtype=np.int32)]
    # Dense axes: an ordinary sum of the data.
    d_axes = [a - n_batch - n_sparse + nb_new + 1 for a in axes if a >= n_batch + n_sparse]
    if d_axes:
        data = data.sum(tuple(d_axes))
    new_shape = tuple(s for k, s in enumerate(shape) if k not in axes)
    return BCOO((data, indices), shape=new_shape)


def bcoo_broadcast_in_dim(mat: BCOO, *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                          sharding: Any = None) -> BCOO:
    """JAX's ``lax`` ``broadcast_in_dim`` of a BCOO array.

    New axes before the first sparse (or dense) axis become batch axes; new axes
    among the trailing dense block become dense axes; new sparse axes must have size 1.
    """
    del sharding
    shape = tuple(operator.index(s) for s in shape)
    bdims = tuple(operator.index(d) for d in broadcast_dimensions)
    if len(bdims) != mat.ndim:
        raise FtransValueError(f"bcoo_broadcast_in_dim: shape={mat.shape} and broadcast_dimensions={bdims} must "
                               "have the same length")
    if any(mat.shape[i] not in (1, shape[d]) for i, d in enumerate(bdims)) or list(bdims) != sorted(set(bdims)):
        raise FtransTypeError(f"bcoo_broadcast_in_dim: cannot broadcast shape {mat.shape} to {shape} with "
                              f"broadcast_dimensions={bdims}")
    nb, ns, nd = mat.n_batch, mat.n_sparse, mat.n_dense
    for k in range(ns):  # a sparse axis of size 1 broadcast to n: each stored element repeats n times
        n = shape[bdims[nb + k]]
        if mat.shape[nb + k] == 1 and n != 1:
            mat = _repeat_sparse_axis(mat, k, n)
    nse = mat.nse
    batch_dims, sparse_dims, dense_dims = bdims[:nb], bdims[nb:nb + ns], bdims[nb + ns:]
    if max(batch_dims, default=0) > min(sparse_dims, default=len(shape)):
        raise FtransValueError("bcoo_broadcast_in_dim: cannot mix batch and sparse dimensions")
    if max(sparse_dims, default=0) > min(dense_dims, default=len(shape)):
        raise FtransValueError("bcoo_broadcast_in_dim: cannot mix sparse and dense dimensions")
    new_nb = min(bdims[nb:], default=len(shape))
    new_nd = len(shape) - min(dense_dims) if nd else 0
    new_ns = len(shape) - new_nb - new_nd
    if math.prod(mat.shape[nb:nb + ns]) != math.prod(shape[new_nb:new_nb + new_ns]):
        raise NotImplementedError("bcoo_broadcast_in_dim: adding sparse dimensions of length other than 1")
    data, indices = mat.data, mat.indices
    if (new_nb, new_nd) != (nb, nd) or tuple(mat.shape[nb + ns:]) != tuple(shape[new_nb + new_ns:]):
        data = lax.broadcast_in_dim(
            data, shape[:new_nb] + (nse,) + shape[new_nb + new_ns:],
            tuple(batch_dims) + (new_nb,) + tuple(d + 1 - new_ns for d in dense_dims))
    if (new_nb, new_nd) != (nb, nd):
        indices = lax.broadcast_in_dim(indices, shape[:new_nb] + (nse, ns),
                                       tuple(batch_dims) + (new_nb, new_nb + 1))
    if new_ns != ns:
        cols = np.array([d - new_nb for d in sparse_dims], dtype=np.int32)
        indices = jnp.zeros(indices.shape[:-1] + (new_ns,), indices.dtype).at[..., cols].set(indices)
    return BCOO((data, indices), shape=shape)


def _repeat_sparse_axis(mat: BCOO, k: int, n: int) -> BCOO:
    """``mat`` with its size-1 sparse axis ``k`` broadcast to size ``n`` (``nse`` grows ``n``-fold)."""
    nb, ns = mat.n_batch, mat.n_sparse
    batch = tuple(mat.shape[:nb])
    data = _broadcast_batch(mat.data, batch)
    indices = _broadcast_batch(mat.indices, batch)
    nse = mat.nse
    dense = tuple(data.shape[nb + 1:])
    data = jnp.broadcast_to(jnp.expand_dims(data, nb + 1), batch + (nse, n) + dense).reshape(batch + (nse * n,) + dense)
    col = indices[..., k]
    spread = jnp.where((col == 0)[..., None], jnp.arange(n, dtype=indices.dtype), jnp.asarray(n, indices.dtype))
    indices = jnp.broadcast_to(jnp.expand_dims(indices, nb + 1), batch + (nse, n, ns))
    indices = indices.at[..., k].set(spread).reshape(batch + (nse * n, ns))
    shape = list(mat.shape)
    shape[nb + k] = n
    return BCOO((data, indices), shape=tuple(shape))


def bcoo_concatenate(operands: Sequence[BCOO], *, dimension: int) -> BCOO:
    """Concatenation of BCOO arrays along ``dimension`` (layouts are brought to a common one)."""
    operands = list(operands)
    if not operands:
        raise FtransValueError("bcoo_concatenate: need at least one operand")
    if not all(isinstance(op, BCOO) for op in operands):
        raise FtransValueError("bcoo_concatenate: expected operands to be a sequence of BCOO arrays. "
                               f"Got {[type(op).__name__ for op in operands]}")
    ndim = operands[0].ndim
    dimension = operator.index(dimension)
    if any(op.ndim != ndim for op in operands) or not 0 <= dimension < ndim:
        raise FtransValueError(f"bcoo_concatenate: operands must have equal ndim and 0 <= dimension < ndim; got "
                               f"shapes {[op.shape for op in operands]} and dimension={dimension}")
    for op in operands:
        if any(a != b for k, (a, b) in enumerate(zip(op.shape, operands[0].shape)) if k != dimension):
            raise FtransTypeError(f"bcoo_concatenate: shapes {[o.shape for o in operands]} differ outside dimension "
                                  f"{dimension}")
    nb = min(op.n_batch for op in operands)
    nd = min(op.n_dense for op in operands)
    if dimension >= ndim - nd:  # a dense dimension: make it (and the dense ones before it) sparse
        nd = ndim - 1 - dimension
        nb = min(nb, dimension)
    operands = [bcoo_update_layout(op, n_batch=nb, n_dense=nd, on_inefficient=None) for op in operands]
    out_shape = list(operands[0].shape)
    out_shape[dimension] = sum(op.shape[dimension] for op in operands)
    if dimension < nb:
        datas, idxs = [], []
        for op in operands:
            batch = tuple(out_shape[:nb])
            batch = batch[:dimension] + (op.shape[dimension],) + batch[dimension + 1:]
            datas.append(_broadcast_batch(op.data, batch))
            idxs.append(_broadcast_batch(op.indices, batch))
        nse = max(op.nse for op in operands)
        datas = [_pad_nse(d, nb, nse, 0) for d in datas]
        idxs = [_pad_nse(i, nb, nse, None, operands[0].shape[nb:ndim - nd]) for i in idxs]
        return BCOO((jnp.concatenate(datas, dimension), jnp.concatenate(idxs, dimension)), shape=tuple(out_shape))
    # A sparse dimension: shift each operand's indices in that column and stack the stored elements.
    offset = 0
    pieces_d, pieces_i = [], []
    col = dimension - nb
    batch = tuple(out_shape[:nb])
    for op in operands:
        i = _broadcast_batch(op.indices, batch)
        bad = _oob(i, op.shape[nb:ndim - nd])
        shifted = i.at[..., col].add(offset) if dimension < ndim - nd else i
        sentinel = _sentinel(tuple(out_shape[nb:ndim - nd]), i.dtype)
        shifted = jnp.where(bad[..., None], sentinel, shifted)
        pieces_i.append(shifted)
        pieces_d.append(_broadcast_batch(op.data, batch))
        offset += op.shape[dimension]
    return BCOO((jnp.concatenate(pieces_d, nb), jnp.concatenate(pieces_i, nb)), shape=tuple(out_shape))


def _pad_nse(x: Any, nb: int, nse: int, fill: Any, sparse_shape: tuple | None = None) -> Any:
    cur = x.shape[nb]
    if cur == nse:
        return x
    pad_shape = tuple(x.shape[:nb]) + (nse - cur,) + tuple(x.shape[nb + 1:])
    if sparse_shape is None:
        block = jnp.zeros(pad_shape, x.dtype)
    else:
        block = jnp.broadcast_to(_sentinel(sparse_shape, x.dtype), pad_shape)
    return jnp.concatenate([x, block], nb)


def bcoo_reshape(mat: BCOO, *, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None,
                 sharding: Any = None) -> BCOO:
    """JAX's ``lax`` ``reshape`` of a BCOO array.

    The new shape must split into consecutive batch, sparse and dense blocks of
    the same sizes as the old ones: batch and dense blocks reshape the buffers,
    the sparse block re-indexes through flat (row-major) positions.
    """
    del sharding
    new_sizes = tuple(operator.index(s) for s in new_sizes)
    if math.prod(new_sizes) != mat.size:
        raise FtransTypeError(f"bcoo_reshape: cannot reshape an array of shape {mat.shape} (size {mat.size}) "
                              f"to {new_sizes}")
    nb = mat.n_batch
    ib, db, sb = tuple(mat.indices.shape[:nb]), tuple(mat.data.shape[:nb]), tuple(mat.shape[:nb])
    if ib != db and db != sb:
        raise NotImplementedError("bcoo_reshape: reshape of arrays with broadcasted batch dimensions.")
    if dimensions is not None:
        dimensions = tuple(operator.index(d) for d in dimensions)
        if dimensions != tuple(range(mat.ndim)):
            mat = bcoo_transpose(mat, permutation=dimensions)
    ns = mat.n_sparse
    batch_size = math.prod(mat.shape[:nb])
    sparse_size = math.prod(mat.shape[nb:nb + ns])
    cum = np.cumprod(new_sizes) if new_sizes else np.array([], dtype=np.int64)
    if batch_size != 1 and batch_size not in cum:
        raise FtransValueError(f"bcoo_reshape: new shape cannot mix batch and sparse dimensions; got shape="
                               f"{mat.shape} new_shape={new_sizes} with n_batch={nb}")
    if sparse_size != 1 and batch_size * sparse_size not in cum:
        raise FtransValueError(f"bcoo_reshape: new shape cannot mix sparse and dense dimensions; got shape="
                               f"{mat.shape} new_shape={new_sizes} with n_dense={mat.n_dense}")
    i1 = int(np.searchsorted(cum, batch_size, side="right"))
    i2 = int(np.searchsorted(cum, batch_size * sparse_size, side="right"))
    new_batch, new_sparse, new_dense = new_sizes[:i1], new_sizes[i1:i2], new_sizes[i2:]
    batch = tuple(mat.shape[:nb])
    data = _broadcast_batch(mat.data, batch).reshape(new_batch + (mat.nse,) + new_dense)
    indices = _broadcast_batch(mat.indices, batch).reshape(new_batch + (mat.nse, ns))
    old_sparse = mat.shape[nb:nb + ns]
    if not new_sparse:
        indices = jnp.zeros(indices.shape[:-1] + (0,), indices.dtype)
    elif tuple(new_sparse) != tuple(old_sparse):
        bad = _oob(indices, old_sparse)
        flat = jnp.zeros(indices.shape[:-1], indices.dtype)
        for k in range(ns):
            flat = flat * old_sparse[k] + jnp.clip(indices[..., k], 0, old_sparse[k] - 1)
        cols = []
        for size in reversed(new_sparse):
            cols.append(flat % size)
            flat = flat // size
        indices = jnp.stack(cols[::-1], -1).astype(indices.dtype)
        indices = jnp.where(bad[..., None], _sentinel(new_sparse, indices.dtype), indices)
    return BCOO((data, indices), shape=new_sizes)


def bcoo_squeeze(arr: BCOO, *, dimensions: Sequence[int]) -> BCOO:
    """``arr`` without the listed axes of size 1."""
    dims = sorted({operator.index(d) % arr.ndim for d in dimensions})
    if any(arr.shape[d] != 1 for d in dims):
        raise FtransValueError(f"bcoo_squeeze: cannot squeeze axes {dims} of shape {arr.shape}: not of size 1")
    nb, ns = arr.n_batch, arr.n_sparse
    bd = [d for d in dims if d < nb]
    sd = [d - nb for d in dims if nb <= d < nb + ns]
    dd = [d - nb - ns + (nb - len(bd)) + 1 for d in dims if d >= nb + ns]
    data = lax.squeeze(arr.data, bd) if bd else arr.data
    indices = lax.squeeze(arr.indices, bd) if bd else arr.indices
    if sd:
        bad = (indices[..., np.array(sd, dtype=np.int32)] != 0).any(-1)
        keep = [k for k in range(ns) if k not in sd]
        indices = indices[..., np.array(keep, dtype=np.int32)]
        indices = jnp.where(bad[..., None], _sentinel(tuple(arr.shape[nb + k] for k in keep), indices.dtype), indices)
    if dd:
        data = lax.squeeze(data, dd)
    return BCOO((data, indices), shape=tuple(s for k, s in enumerate(arr.shape) if k not in dims))


def bcoo_rev(operand: BCOO, dimensions: Sequence[int]) -> BCOO:
    """``operand`` reversed along ``dimensions``."""
    dims = [operator.index(d) for d in dimensions]
    nb, ns = operand.n_batch, operand.n_sparse
    data, indices = operand.data, operand.indices
    batch = tuple(operand.shape[:nb])
    bd = [d for d in dims if d < nb]
    if bd:
        data, indices = _broadcast_batch(data, batch), _broadcast_batch(indices, batch)
        data, indices = lax.rev(data, bd), lax.rev(indices, bd)
    sd = [d - nb for d in dims if nb <= d < nb + ns]
    for k in sd:
        size = operand.shape[nb + k]
        col = indices[..., k]
        bad = (col < 0) | (col >= size)
        indices = indices.at[..., k].set(jnp.where(bad, col, size - 1 - col))
    dd = [d - ns + 1 for d in dims if d >= nb + ns]
    if dd:
        data = lax.rev(data, dd)
    return BCOO((data, indices), shape=operand.shape)


def bcoo_slice(mat: BCOO, *, start_indices: Sequence[int], limit_indices: Sequence[int],
               strides: Sequence[int] | None = None) -> BCOO:
    """JAX's ``lax`` ``slice`` of a BCOO array (stored elements outside the slice become padding)."""
    start = tuple(operator.index(s) for s in start_indices)
    limit = tuple(operator.index(s) for s in limit_indices)
    strides = (1,) * mat.ndim if strides is None else tuple(operator.index(s) for s in strides)
    if not (len(start) == len(limit) == len(strides) == mat.ndim):
        raise FtransTypeError(f"bcoo_slice: start_indices, limit_indices and strides must each have length "
                              f"{mat.ndim}, got {start}, {limit}, {strides}")
    if any(s < 0 or s > lim or lim > d for s, lim, d in zip(start, limit, mat.shape)) or any(st <= 0 for st in strides):
        raise FtransTypeError(f"bcoo_slice: invalid slice start={start}, limit={limit}, strides={strides} for "
                              f"shape {mat.shape}")
    nb, ns = mat.n_batch, mat.n_sparse
    out_shape = tuple(max(0, -(-(lim - s) // st)) for s, lim, st in zip(start, limit, strides))
    data, indices = mat.data, mat.indices
    # Batch dims: slice the buffers (size-1 broadcast axes stay as they are).
    bsl = tuple(slice(s, lim, st) if n != 1 else slice(None)
                for s, lim, st, n in zip(start[:nb], limit[:nb], strides[:nb], data.shape[:nb]))
    isl = tuple(slice(s, lim, st) if n != 1 else slice(None)
                for s, lim, st, n in zip(start[:nb], limit[:nb], strides[:nb], indices.shape[:nb]))
    data = data[bsl]
    indices = indices[isl]
    if ns:
        st = jnp.asarray(np.array(start[nb:nb + ns]), indices.dtype)
        stride = jnp.asarray(np.array(strides[nb:nb + ns]), indices.dtype)
        new_sparse = out_shape[nb:nb + ns]
        bad = _oob(indices, mat.shape[nb:nb + ns])
        rel = indices - st
        ok = (rel >= 0) & (rel % stride == 0)
        new = rel // stride
        ok = ok & (new < jnp.asarray(np.array(new_sparse), indices.dtype))
        keep = ok.all(-1) & ~bad
        indices = jnp.where(keep[..., None], new, _sentinel(new_sparse, indices.dtype))
        data = jnp.where(_broadcast_mask(keep, data), data, jnp.zeros((), data.dtype))
    dsl = tuple(slice(s, lim, st) for s, lim, st in zip(start[nb + ns:], limit[nb + ns:], strides[nb + ns:]))
    if dsl:
        data = data[(slice(None),) * (data.ndim - len(dsl)) + dsl]
    return _trim_nse(data, indices, out_shape, ns)


def _trim_nse(data: Any, indices: Any, shape: tuple, n_sparse: int) -> BCOO:
    """A BCOO array of these buffers, duplicates summed if it stores more elements than its sparse size."""
    nb = indices.ndim - 2
    max_nse = math.prod(shape[nb:nb + n_sparse])
    if n_sparse and indices.shape[-2] > max_nse:
        data, indices = _bcoo_sum_duplicates(data, indices, spinfo=SparseInfo(shape), nse=max_nse)
    return BCOO((data, indices), shape=shape)


def bcoo_dynamic_slice(mat: BCOO, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> BCOO:
    """JAX's ``lax`` ``dynamic_slice`` of a BCOO array (start indices may be traced; they are clamped)."""
    sizes = tuple(operator.index(s) for s in slice_sizes)
    if len(start_indices) != mat.ndim or len(sizes) != mat.ndim:
        raise FtransTypeError(f"bcoo_dynamic_slice: start_indices and slice_sizes must each have length {mat.ndim}; "
                              f"got {len(start_indices)} and {len(sizes)}")
    if any(s < 0 or s > d for s, d in zip(sizes, mat.shape)):
        raise FtransTypeError(f"bcoo_dynamic_slice: slice_sizes {sizes} must be between 0 and shape {mat.shape}")
    nb, ns = mat.n_batch, mat.n_sparse
    itype = mat.indices.dtype
    starts = [jnp.asarray(s).astype(itype) for s in start_indices]
    zero = jnp.zeros((), itype)
    d_start, d_size, i_start, i_size = [], [], [], []
    for k in range(nb):
        d_b = mat.data.shape[k] == 1 and mat.shape[k] != 1
        i_b = mat.indices.shape[k] == 1 and mat.shape[k] != 1
        d_start.append(zero if d_b else starts[k])
        d_size.append(1 if d_b else sizes[k])
        i_start.append(zero if i_b else starts[k])
        i_size.append(1 if i_b else sizes[k])
    d_start.append(zero)
    d_size.append(mat.nse)
    i_start += [zero, zero]
    i_size += [mat.nse, ns]
    d_start += starts[nb + ns:]
    d_size += list(sizes[nb + ns:])
    data = lax.dynamic_slice(mat.data, d_start, d_size)
    indices = lax.dynamic_slice(mat.indices, i_start, i_size)
    if ns:
        dims = np.array(mat.shape[nb:nb + ns], dtype=np.int64)
        size_s = np.array(sizes[nb:nb + ns], dtype=np.int64)
        st = jnp.stack(starts[nb:nb + ns])
        st = jnp.where(st < 0, st + jnp.asarray(dims, itype), st)
        st = jnp.clip(st, 0, jnp.asarray(dims - size_s, itype))
        rel = indices - st
        keep = ((rel >= 0) & (rel < jnp.asarray(size_s, itype))).all(-1)
        indices = jnp.where(keep[..., None], rel, jnp.asarray(size_s, itype))
        data = jnp.where(_broadcast_mask(keep, data), data, jnp.zeros((), data.dtype))
    return _trim_nse(data, indices, sizes, ns)


def _broadcast_mask(mask: Any, data: Any) -> Any:
    return mask.reshape(tuple(mask.shape) + (1,) * (data.ndim - mask.ndim))


def _as_1d_for_conv(x: Any, index_dtype: Any) -> tuple[Any, Any, int]:
    """(data, positions, length) of an operand of shape ``(1, 1, n)``, dense or BCOO."""
    if isinstance(x, BCOO):
        m = bcoo_update_layout(x, n_batch=2, n_dense=0, on_inefficient=None)
        data, pos = m.data[0, 0], m.indices[0, 0, :, 0]
        n = m.shape[-1]
        data = jnp.where((pos >= 0) & (pos < n), data, jnp.zeros((), data.dtype))
        return data, pos, n
    x = jnp.asarray(x)
    return x[0, 0], jnp.arange(x.shape[-1], dtype=index_dtype), x.shape[-1]


def bcoo_conv_general_dilated(lhs: Any, rhs: Any, *, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Any = None, rhs_dilation: Any = None, dimension_numbers: Any = None,
                              feature_group_count: int = 1, batch_group_count: int = 1, precision: Any = None,
                              preferred_element_type: Any = None, out_sharding: Any = None) -> BCOO:
    """JAX's ``lax`` ``conv_general_dilated`` with sparse operands, for what JAX supports: one-dimensional
    inputs of shape ``(1, 1, n)``, unit strides and dilations, no groups.  Each pair of stored elements
    contributes one stored element of the result."""
    del precision, preferred_element_type, out_sharding
    if dimension_numbers is not None:
        raise NotImplementedError("bcoo_conv_general_dilated: dimension_numbers")
    if tuple(window_strides) != (1,) or (lhs_dilation not in (None, (1,), [1])) or \
            (rhs_dilation not in (None, (1,), [1])) or feature_group_count != 1 or batch_group_count != 1:
        raise NotImplementedError("bcoo_conv_general_dilated: only unit strides and dilations, no groups")
    if len(lhs.shape) != 3 or len(rhs.shape) != 3 or tuple(lhs.shape[:2]) != (1, 1) or tuple(rhs.shape[:2]) != (1, 1):
        raise NotImplementedError("bcoo_conv_general_dilated: only operands of shape (1, 1, n)")
    index_dtype = lhs.indices.dtype if isinstance(lhs, BCOO) else rhs.indices.dtype if isinstance(rhs, BCOO) \
        else np.dtype(np.int32)
    ld, lp, n = _as_1d_for_conv(lhs, index_dtype)
    rd, rp, k = _as_1d_for_conv(rhs, index_dtype)
    if isinstance(padding, str):
        from ftrans.lax._windowed import padtype_to_pads
        (lo, hi), = padtype_to_pads([n], [k], [1], padding)
    else:
        (lo, hi), = padding
    out_size = max(0, n + lo + hi - k + 1)
    data = (ld[:, None] * rd[None, :]).ravel()
    pos = (lp[:, None] - rp[None, :] + lo).ravel().astype(index_dtype)
    ok = (pos >= 0) & (pos < out_size)
    data = jnp.where(ok, data, jnp.zeros((), data.dtype))
    pos = jnp.where(ok, pos, jnp.asarray(out_size, index_dtype))
    return BCOO((data[None, None], pos[None, None, :, None]), shape=(1, 1, out_size))


# ---------------------------------------------------------------------------------------------
# the BCOO class


def _restore_shape(aux_shape: tuple, data: Any, indices: Any) -> tuple:
    """The logical shape for buffers that ``vmap`` has mapped or stacked.

    ``vmap`` flattens a BCOO argument into its two buffers and rebuilds it from
    buffers missing the mapped axis (and stacks results along a new one); the
    stored ``shape`` still describes the unmapped array.  The batch rank of the
    buffers says how many batch axes were removed or added, and their sizes say
    which.
    """
    try:
        dshape, ishape = tuple(data.shape), tuple(indices.shape)
    except AttributeError:
        return aux_shape
    if len(ishape) < 2 or len(dshape) < 1:
        return aux_shape
    nb_new = len(ishape) - 2
    n_sparse = ishape[-1]
    n_dense = len(dshape) - 1 - nb_new
    nb_old = len(aux_shape) - n_sparse - n_dense
    if nb_old == nb_new or n_dense < 0 or nb_old < 0:
        return aux_shape

    def fits(batch: tuple) -> bool:
        return all(a in (1, b) for a, b in zip(dshape[:nb_new], batch)) and \
            all(a in (1, b) for a, b in zip(ishape[:nb_new], batch))

    rest = aux_shape[nb_old:]
    if nb_new == nb_old - 1:
        for k in range(nb_old):
            cand = aux_shape[:k] + aux_shape[k + 1:nb_old]
            if fits(cand):
                return cand + rest
    elif nb_new == nb_old + 1:
        for k in range(nb_new):
            size = max(dshape[k], ishape[k])
            cand = aux_shape[:k] + (size,) + aux_shape[k:nb_old]
            if fits(cand):
                return cand + rest
    return aux_shape


@tree_util.register_pytree_node_class
class BCOO(JAXSparse):
    """A batched coordinate-format sparse array (JAX's ``BCOO``): ``BCOO((data, indices), shape=shape)``."""

    data: Any
    indices: Any
    shape: tuple[int, ...]
    indices_sorted: bool
    unique_indices: bool

    def __init__(self, args: tuple[Any, Any], *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        try:
            data, indices = args
        except (TypeError, ValueError):
            raise FtransTypeError("BCOO: args must be a pair (data, indices)") from None
        self.data, self.indices = jnp.asarray(data), jnp.asarray(indices)
        self.indices_sorted = bool(indices_sorted)
        self.unique_indices = bool(unique_indices)
        super().__init__(args, shape=shape)
        _validate_bcoo(self.data, self.indices, self.shape)

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def _bufs(self) -> tuple[Any, Any]:
        return self.data, self.indices

    @property
    def nse(self) -> int:
        return self.indices.shape[-2]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 2

    @property
    def n_sparse(self) -> int:
        return self.indices.shape[-1]

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    def __repr__(self) -> str:
        name = type(self).__name__
        try:
            extra = []
            if self.n_batch:
                extra.append(f"n_batch={self.n_batch}")
            if self.n_dense:
                extra.append(f"n_dense={self.n_dense}")
            text = f"{name}({self.dtype}{list(self.shape)}, nse={self.nse}{''.join(', ' + e for e in extra)})"
        except Exception:
            text = f"{name}(<invalid>)"
        if isinstance(self.data, Tracer):
            text = f"{type(self.data).__name__}[{text}]"
        return text

    def reshape(self, *args: Any, **kwargs: Any) -> BCOO:
        from ftrans.experimental.sparse.transform import sparsify
        return sparsify(lambda x: x.reshape(*args, **kwargs))(self)

    def astype(self, *args: Any, **kwargs: Any) -> BCOO:
        from ftrans.experimental.sparse.transform import sparsify
        return sparsify(lambda x: x.astype(*args, **kwargs))(self)

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        from ftrans.experimental.sparse.transform import sparsify
        return sparsify(lambda x: x.sum(*args, **kwargs))(self)

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCOO:
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense, n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat: Any, *, index_dtype: Any = None, n_dense: int = 0, n_batch: int = 0) -> BCOO:
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCOO.from_scipy_sparse: n_dense and n_batch must be 0")
        mat = mat.tocoo()
        data = jnp.asarray(mat.data)
        index_dtype = index_dtype or np.int32
        indices = jnp.column_stack((jnp.asarray(mat.row, index_dtype), jnp.asarray(mat.col, index_dtype)))
        return cls((data, indices), shape=mat.shape, indices_sorted=False, unique_indices=False)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCOO:
        shape = tuple(operator.index(s) for s in shape)
        n_sparse = len(shape) - n_dense - n_batch
        if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
            raise FtransValueError(f"BCOO._empty: invalid shape={shape}, n_batch={n_batch}, n_dense={n_dense}, "
                                   f"nse={nse}")
        batch, sparse, dense = shape[:n_batch], shape[n_batch:n_batch + n_sparse], shape[n_batch + n_sparse:]
        dtype = (_dtypes.canonicalize(dtype) if dtype is not None else _dtypes.default_float())
        data = jnp.zeros(batch + (nse,) + dense, dtype)
        indices = jnp.broadcast_to(jnp.asarray(np.array(sparse, dtype=np.int64), index_dtype),
                                   batch + (nse, n_sparse))
        return cls((data, indices), shape=shape, indices_sorted=True, unique_indices=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32", n_batch: int = 0,
             n_dense: int = 0) -> BCOO:
        n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
        if n_batch + n_dense > 2:
            raise FtransValueError(f"BCOO._eye: n_batch + n_dense must be at most 2, got {n_batch} + {n_dense}")
        k = operator.index(k)
        dtype = (_dtypes.canonicalize(dtype) if dtype is not None else _dtypes.default_float())
        diag_size = 0 if k >= M or -k >= N else min(N + min(k, 0), M - max(k, 0))
        if n_batch == 0 and n_dense == 0:
            start = np.array([max(-k, 0), max(k, 0)])
            rows = np.arange(diag_size) + start[0]
            cols = np.arange(diag_size) + start[1]
            idx = np.stack([rows, cols], 1).astype(np.dtype(index_dtype))
            data = jnp.ones(diag_size, dtype)
            return cls((data, jnp.asarray(idx)), shape=(N, M), indices_sorted=True, unique_indices=True)
        if n_batch == 0 and n_dense == 1:  # one stored row per diagonal element
            base = cls._eye(N, M, k, dtype=dtype, index_dtype=index_dtype)
            return bcoo_update_layout(base, n_batch=0, n_dense=n_dense, on_inefficient=None)
        # Batched over rows, or all dense: each batch holds at most one element (row) of the diagonal.
        return bcoo_fromdense(jnp.eye(N, M, k, dtype=dtype), nse=min(1, diag_size), n_batch=n_batch,
                              n_dense=n_dense, index_dtype=index_dtype)

    def update_layout(self, *, n_batch: int | None = None, n_dense: int | None = None,
                      on_inefficient: str = "error") -> BCOO:
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense, on_inefficient=on_inefficient)

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> BCOO:
        if remove_zeros:
            return bcoo_eliminate_zeros(self, nse=nse)
        return bcoo_sum_duplicates(self, nse=nse)

    def sort_indices(self) -> BCOO:
        if self.indices_sorted:
            return self
        return bcoo_sort_indices(self)

    def todense(self) -> Any:
        return bcoo_todense(self)

    def transpose(self, axes: Sequence[int] | None = None) -> BCOO:
        if axes is None:
            axes = tuple(range(self.ndim))[::-1]
        axes = tuple(operator.index(a) % max(self.ndim, 1) for a in axes)
        if self.n_batch == 0 and self.n_dense == 0 or (
                tuple(sorted(axes[:self.n_batch])) == tuple(range(self.n_batch))
                and tuple(sorted(axes[self.ndim - self.n_dense:])) == tuple(range(self.ndim - self.n_dense,
                                                                                   self.ndim))):
            return bcoo_transpose(self, permutation=axes)
        mat = bcoo_update_layout(self, n_batch=0, n_dense=0, on_inefficient=None) \
            if self.n_batch and self.n_dense else self
        if mat.n_batch:
            mat = bcoo_update_layout(mat, n_batch=0, on_inefficient=None)
        if mat.n_dense:
            mat = bcoo_update_layout(mat, n_dense=0, on_inefficient=None)
        return bcoo_transpose(mat, permutation=axes)

    def tree_flatten(self):
        return (self.data, self.indices), self._info._asdict()

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        if set(aux_data) != {"shape", "indices_sorted", "unique_indices"}:
            raise FtransValueError(f"BCOO.tree_unflatten: invalid aux_data={aux_data!r}")
        obj.__dict__.update(**aux_data)
        obj.shape = _restore_shape(tuple(aux_data["shape"]), obj.data, obj.indices)
        return obj
