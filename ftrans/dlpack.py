"""JAX's ``dlpack`` module: arrays from any DLPack producer, and which dtypes DLPack carries."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes as _dtypes
from ftrans.numpy import from_dlpack

__all__ = ["from_dlpack", "is_supported_dtype"]

_DLPACK_DTYPES = frozenset(np.dtype(d) for d in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128)) | {_dtypes.bfloat16}


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` can cross DLPack (the boolean, integer, float, bfloat16 and complex types)."""
    return np.dtype(dtype) in _DLPACK_DTYPES
