"""``JAXSparse``: the base class of ftrans's sparse array types (JAX's ``jax.experimental.sparse.JAXSparse``).

A sparse array is a pytree of ordinary arrays (its buffers) plus static metadata
(its logical ``shape`` and layout flags).  Every operation on it is written with
ftrans's own numpy/lax functions on the buffers, so ``jit``, ``grad`` and
``vmap`` see only ordinary arrays and need no sparse-specific rules.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError


def _canonical_shape(shape: Sequence[int], owner: str) -> tuple[int, ...]:
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise FtransTypeError(f"{owner}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise FtransTypeError(f"{owner}: shape entries must be non-negative, got {out}")
    return out


class JAXSparse(abc.ABC):
    """The base of ftrans's sparse arrays: ``data``, a static ``shape``, and the array-like properties."""

    data: Any
    shape: tuple[int, ...]

    __hash__ = None  # type: ignore[assignment]
    # Dense operands defer their binary operators to a sparse right operand.
    __array_priority__ = 2000

    def __init__(self, args: tuple[Any, ...], *, shape: Sequence[int]):
        self.shape = _canonical_shape(shape, type(self).__name__)

    @property
    @abc.abstractmethod
    def dtype(self) -> np.dtype: ...

    @property
    @abc.abstractmethod
    def nse(self) -> int: ...

    def __len__(self) -> int:
        if not self.shape:
            raise FtransTypeError("len() of unsized object")
        return self.shape[0]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        name = type(self).__name__
        try:
            text = f"{name}({self.dtype}{list(self.shape)}, nse={self.nse})"
        except Exception:  # a half-built object (for example a pytree placeholder) still prints
            text = f"{name}(<invalid>)"
        if isinstance(self.data, Tracer):
            text = f"{type(self.data).__name__}[{text}]"
        return text

    @abc.abstractmethod
    def tree_flatten(self): ...

    @classmethod
    @abc.abstractmethod
    def tree_unflatten(cls, aux_data, children): ...

    @abc.abstractmethod
    def transpose(self, axes=None): ...

    @property
    def T(self):
        return self.transpose()

    def block_until_ready(self):
        for buf in self.tree_flatten()[0]:
            if hasattr(buf, "block_until_ready"):
                buf.block_until_ready()
        return self

    # Operators: each routes through ``sparsify`` of the matching ftrans.numpy function.
    def __neg__(self):
        return _op("negative")(self)

    def __pos__(self):
        return self

    def __matmul__(self, other):
        return _op("matmul")(self, other)

    def __rmatmul__(self, other):
        return _op("matmul")(other, self)

    def __mul__(self, other):
        return _op("multiply")(self, other)

    def __rmul__(self, other):
        return _op("multiply")(other, self)

    def __add__(self, other):
        return _op("add")(self, other)

    def __radd__(self, other):
        return _op("add")(other, self)

    def __sub__(self, other):
        return _op("subtract")(self, other)

    def __rsub__(self, other):
        return _op("subtract")(other, self)

    def __truediv__(self, other):
        return _op("divide")(self, other)

    def __pow__(self, other):
        return _op("power")(self, other)

    def __getitem__(self, idx):
        from ftrans.experimental.sparse.transform import _getitem
        return _getitem(self, idx)

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def _op(name: str):
    import ftrans.numpy as jnp
    from ftrans.experimental.sparse.transform import sparsify
    return sparsify(getattr(jnp, name))
