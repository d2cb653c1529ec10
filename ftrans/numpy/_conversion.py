"""dtype conversion: ``astype`` and ``can_cast``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.operands import as_operand, check_arraylike, dtype_weak
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S

__all__ = ["astype", "can_cast"]


def astype(x: Any, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """``jnp.astype``: convert to ``dtype``; the result is never weakly typed.

    Complex to real keeps the real part (NumPy and JAX do the same).
    """
    if device is not None:
        raise NotImplementedError("astype: the 'device' argument is not supported yet")
    check_arraylike("astype", x)
    arr = as_operand(x)
    target = dtypes.to_dtype(dtype)
    src, weak = dtype_weak(arr)
    if src == target and not weak:
        return arr
    if src.kind == "c" and target.kind != "c":
        arr = E.real_p.bind(arr)
    return S.convert_element_type_p.bind(arr, new_dtype=target, weak_type=False)


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    src = from_ if isinstance(from_, np.dtype) else dtype_weak(from_)[0] if not isinstance(from_, (str, type)) else np.dtype(from_)
    return bool(np.can_cast(src, dtypes.to_dtype(to), casting=casting))
