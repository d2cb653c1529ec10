"""JAX's ``flatten_util``: one pytree of arrays as one flat vector, and back.

``ravel_pytree(tree)`` concatenates every leaf, flattened in row-major order,
into a rank-1 array and returns it with an ``unravel`` function that splits a
vector of the same length back into the tree.  Leaves of different dtypes are
promoted to one dtype by ``ftrans.numpy``'s promotion table (the same table,
and the same ``numpy_dtype_promotion`` option, as ``jnp.result_type``); then
``unravel`` converts each piece back to its leaf's dtype and accepts only a
vector of the promoted dtype.  When every leaf already has that dtype,
``unravel`` accepts a vector of any dtype and leaves it alone (JAX does the
same, so an ``unravel`` can be applied to, say, a gradient of another dtype).

Everything is written with ``ftrans.lax``, so both functions work on concrete
arrays and under ``jit``, ``grad`` and ``vmap``.  The ``unravel`` function
compares and hashes by the tree structure, shapes and dtypes, so it can be a
static argument of ``jit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans import lax
from ftrans.core import pytrees as tree_util
from ftrans.core.operands import dtype_weak, shape_of
from ftrans.core.operands import result_type as _result_type
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """Flatten a pytree of arrays and scalars into one rank-1 array.

    Returns ``(flat, unravel)``: ``flat`` holds every leaf's elements in leaf
    order, with the dtype the leaves' dtypes promote to; ``unravel(v)`` turns a
    rank-1 array of ``flat``'s length back into a pytree of ``pytree``'s
    structure, shapes and dtypes.  A tree without leaves gives an empty
    float32 vector (JAX's convention).
    """
    leaves, treedef = tree_util.tree_flatten(pytree)
    if not leaves:
        return lax.full((0,), 0, np.dtype(np.float32)), _Unravel(treedef, (), (), None, None)
    from_dtypes = tuple(_leaf_dtype(x) for x in leaves)
    to_dtype = _result_type(*from_dtypes)
    shapes = tuple(tuple(shape_of(x)) for x in leaves)
    sizes = tuple(int(np.prod(s, dtype=np.int64)) for s in shapes)
    if all(d == to_dtype for d in from_dtypes):
        pieces = [lax.reshape(x, (n,)) for x, n in zip(leaves, sizes)]
        unravel = _Unravel(treedef, sizes, shapes, None, None)
    else:
        pieces = [lax.reshape(lax.convert_element_type(x, to_dtype), (n,)) for x, n in zip(leaves, sizes)]
        unravel = _Unravel(treedef, sizes, shapes, from_dtypes, to_dtype)
    return lax.concatenate(pieces, 0), unravel


def _leaf_dtype(x: Any) -> np.dtype:
    try:
        return dtype_weak(x)[0]
    except TypeError:
        raise FtransTypeError(
            f"ravel_pytree: a leaf of type {type(x).__name__} is not an array or a scalar"
        ) from None


class _Unravel:
    """The inverse of one ``ravel_pytree`` call (equal and hashable by what it rebuilds)."""

    __slots__ = ("treedef", "sizes", "shapes", "from_dtypes", "to_dtype")

    def __init__(self, treedef: Any, sizes: tuple, shapes: tuple, from_dtypes: tuple | None,
                 to_dtype: np.dtype | None):
        self.treedef = treedef
        self.sizes = sizes
        self.shapes = shapes
        self.from_dtypes = from_dtypes
        self.to_dtype = to_dtype

    def _key(self) -> tuple:
        return (self.treedef, self.sizes, self.shapes, self.from_dtypes, self.to_dtype)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Unravel and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"unravel_pytree({self.treedef}, sizes={self.sizes})"

    def __call__(self, flat: Any) -> Any:
        try:
            d, _ = dtype_weak(flat)
        except TypeError:
            raise FtransTypeError(
                f"unravel function given a value of type {type(flat).__name__}; expected a rank-1 array"
            ) from None
        shape = tuple(shape_of(flat))
        total = sum(self.sizes)
        if shape != (total,):
            raise FtransValueError(
                f"unravel function given array of shape {shape}, but expected shape ({total},): the "
                "vector must have the length of the one ravel_pytree returned"
            )
        if self.to_dtype is not None and d != self.to_dtype:
            raise FtransTypeError(
                f"unravel function given array of dtype {d}, but expected dtype {self.to_dtype} "
                "(the dtype ravel_pytree promoted the leaves to)"
            )
        if not self.sizes:
            return tree_util.tree_unflatten(self.treedef, [])
        chunks = lax.split(flat, self.sizes) if len(self.sizes) > 1 else [flat]
        out = [lax.reshape(c, s) for c, s in zip(chunks, self.shapes)]
        if self.from_dtypes is not None:
            out = [_convert(c, dt) for c, dt in zip(out, self.from_dtypes)]
        return tree_util.tree_unflatten(self.treedef, out)


def _convert(x: Any, dtype: np.dtype) -> Any:
    """``x`` as ``dtype``; a complex piece of a real leaf keeps its real part (no warning, as in JAX)."""
    if np.issubdtype(dtype_weak(x)[0], np.complexfloating) and not np.issubdtype(dtype, np.complexfloating):
        x = lax.real(x)
    return lax.convert_element_type(x, dtype)
