"""``random_bcoo``: random BCOO arrays (JAX's ``sparse.random_bcoo``)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import random as _random
from ftrans.core import dtypes as _dtypes
from ftrans.errors import FtransValueError
from ftrans.experimental.sparse.bcoo import BCOO
from ftrans.transforms.batching import vmap

__all__ = ["random_bcoo"]


def random_bcoo(key: Any, shape: Sequence[int], *, dtype: Any = None, indices_dtype: Any = None,
                nse: float | int = 0.2, n_batch: int = 0, n_dense: int = 0, unique_indices: bool = True,
                sorted_indices: bool = False, generator: Callable[..., Any] = _random.uniform, **kwds: Any) -> BCOO:
    """A BCOO array with ``nse`` random positions per batch (a fraction of the sparse size if ``0 < nse < 1``)
    and values drawn by ``generator(key, shape=..., dtype=..., **kwds)``."""
    shape = tuple(operator.index(s) for s in shape)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise FtransValueError(f"random_bcoo: invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise FtransValueError(f"random_bcoo: got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = operator.index(nse)
    dtype = (_dtypes.canonicalize(dtype) if dtype is not None else _dtypes.default_float())
    indices_dtype = np.dtype(indices_dtype) if indices_dtype is not None else _dtypes.default_int()
    if sparse_size > np.iinfo(indices_dtype).max:
        raise FtransValueError(f"random_bcoo: indices_dtype={indices_dtype} cannot hold indices of a sparse size "
                               f"{sparse_size}")

    def one_indices(k: Any) -> Any:
        if not sparse_shape:
            return jnp.zeros((nse, n_sparse), indices_dtype)
        flat = _random.choice(k, sparse_size, shape=(nse,), replace=not unique_indices).astype(indices_dtype)
        return jnp.stack(jnp.unravel_index(flat, sparse_shape), axis=1).astype(indices_dtype)

    batch_size = math.prod(batch_shape)
    keys = _random.split(key, batch_size + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = vmap(one_indices)(keys[1:]).reshape(batch_shape + (nse, n_sparse))
    mat = BCOO((data, indices), shape=shape, unique_indices=unique_indices)
    return mat.sort_indices() if sorted_indices else mat
