"""JAX's ``typing`` module: the type aliases user code annotates its functions with.

``ArrayLike`` is what every ``ftrans.numpy`` function accepts as an array
argument (an ftrans Array, a NumPy array or scalar, a Python scalar);
``DTypeLike`` is what a ``dtype=`` argument accepts. They are for annotations
and static checkers: ftrans never checks them at run time.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ftrans.core.array import PublicArray as Array

__all__ = ["ArrayLike", "DTypeLike"]


class SupportsDType(Protocol):
    """Anything with a ``dtype`` attribute (a NumPy scalar type, a ShapeDtypeStruct, ...)."""

    @property
    def dtype(self) -> np.dtype: ...


ArrayLike = Array | np.ndarray | np.bool_ | np.number | bool | int | float | complex
DTypeLike = str | type[Any] | np.dtype | SupportsDType
