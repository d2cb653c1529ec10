"""Helpers shared by the sparse formats (JAX's ``jax.experimental.sparse.util``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

import ftrans.numpy as jnp
from ftrans.core import pytrees as tree_util
from ftrans.core.trace import Tracer
from ftrans.errors import ConcretizationTypeError
from ftrans.transforms.batching import vmap


class SparseEfficiencyError(ValueError):
    """An operation would densify a sparse array (JAX's ``SparseEfficiencyError``)."""


class SparseEfficiencyWarning(UserWarning):
    """An operation densifies a sparse array or loses its structure (JAX's ``SparseEfficiencyWarning``)."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """A GPU sparse kernel is unavailable and a generic lowering is used instead."""


class SparseInfo(NamedTuple):
    """The static metadata of a sparse array: its logical shape and layout flags."""

    shape: tuple[int, ...]
    indices_sorted: bool = False
    unique_indices: bool = False


def nfold_vmap(fun: Callable, N: int, *, broadcasted: bool = True, in_axes: Any = 0) -> Callable:
    """``fun`` mapped over ``N`` leading axes; with ``broadcasted``, axes of size 1 broadcast."""
    in_axes_tup = in_axes if isinstance(in_axes, tuple) else None
    for _ in range(N):
        fun = _broadcast_vmap(fun, in_axes_tup if in_axes_tup is not None else in_axes, broadcasted)
    return fun


def _broadcast_vmap(fun: Callable, in_axes: Any, broadcasted: bool) -> Callable:
    def mapped(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        if broadcasted:
            sizes = {np.shape(a)[0] for a, ax in zip(args, axes) if ax is not None and np.shape(a)[0] != 1}
            size = max(sizes) if sizes else 1
            new_args, new_axes = [], []
            for a, ax in zip(args, axes):
                if ax is not None and np.shape(a)[0] == 1 and size != 1:
                    new_args.append(a[0])  # a broadcast axis of size 1: the same value for every element
                    new_axes.append(None)
                else:
                    new_args.append(a)
                    new_axes.append(ax)
            if size == 0:
                return _empty_map(fun, new_args, new_axes)
            return vmap(fun, in_axes=tuple(new_axes))(*new_args)
        if any(ax is not None and np.shape(a)[0] == 0 for a, ax in zip(args, axes)):
            return _empty_map(fun, args, axes)
        return vmap(fun, in_axes=tuple(axes))(*args)
    return mapped


def _empty_map(fun: Callable, args: Sequence[Any], axes: Sequence[Any]) -> Any:
    """``fun`` mapped over an axis of size 0: empty results of the right shapes, with nothing computed
    (so no program ever holds a zero-sized batch dimension)."""
    from ftrans.core.avals import ShapeDtypeStruct
    from ftrans.transforms.jit import eval_shape
    specs = [ShapeDtypeStruct(tuple(np.shape(a))[1:] if ax is not None else tuple(np.shape(a)), jnp.asarray(a).dtype)
             for a, ax in zip(args, axes)]
    out = eval_shape(fun, *specs)
    return tree_util.tree_map(lambda s: jnp.zeros((0,) + tuple(s.shape), s.dtype), out)


def _concrete_int(value: Any, what: str) -> int:
    if isinstance(value, Tracer):
        raise ConcretizationTypeError(
            f"{what}: the number of stored elements must be known at trace time; pass nse= explicitly "
            f"(for example when calling under jit)")
    return int(np.asarray(value))


def _count_stored_elements_per_batch(mat: Any, n_batch: int = 0, n_dense: int = 0) -> Any:
    """The number of stored elements each batch needs to hold the nonzeros of dense ``mat``."""
    mat = jnp.asarray(mat)
    mask = mat != 0
    if n_dense > 0:
        mask = mask.any(tuple(range(-n_dense, 0)))
    mask = mask.sum(tuple(range(n_batch, mask.ndim)))
    return mask


def _count_stored_elements(mat: Any, n_batch: int = 0, n_dense: int = 0) -> Any:
    """The ``nse`` a BCOO conversion of ``mat`` needs: the largest per-batch count of nonzeros."""
    mat = jnp.asarray(mat)
    counts = _count_stored_elements_per_batch(mat, n_batch, n_dense)
    return counts.max(initial=0) if counts.size else jnp.asarray(0)


def _dot_general_validated_shape(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                                 dimension_numbers: Any) -> tuple[int, ...]:
    """The result shape of a dot_general of these shapes (checked as JAX's ``lax`` checks it)."""
    from ftrans import lax
    from ftrans.core.avals import ShapeDtypeStruct
    from ftrans.transforms.jit import eval_shape
    out = eval_shape(functools.partial(lax.dot_general, dimension_numbers=dimension_numbers),
                     ShapeDtypeStruct(tuple(lhs_shape), np.float32), ShapeDtypeStruct(tuple(rhs_shape), np.float32))
    return tuple(out.shape)


def _csr_to_coo(indices: Any, indptr: Any) -> tuple[Any, Any]:
    """Row and column indices of CSR ``(indices, indptr)``."""
    indices, indptr = jnp.asarray(indices), jnp.asarray(indptr)
    nrows = indptr.shape[0] - 1
    nse = indices.shape[0]
    rows = jnp.cumsum(jnp.zeros(nse, indptr.dtype).at[indptr[1:-1]].add(1, mode="drop")) if nrows > 0 else \
        jnp.zeros(nse, indptr.dtype)
    return rows, indices


def _coo_extract(row: Any, col: Any, mat: Any) -> Any:
    return jnp.asarray(mat).at[row, col].get(mode="fill", fill_value=0)


def _safe_asarray(args: Sequence[Any]) -> list[Any]:
    return [jnp.asarray(a) for a in args]
