"""dtype conversion: ``astype`` and ``can_cast``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.keys import is_user_edtype  # noqa: E402
from ftrans.core.operands import as_operand, check_arraylike, convert, dtype_weak
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.errors import user_stacklevel

__all__ = ["astype", "can_cast"]


def astype(x: Any, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """Convert an array to a given dtype.

    The result is never weakly typed. Complex to real keeps the real part, with JAX's DeprecationWarning
    (NumPy and JAX do the same); complex to bool is `x != 0`. `copy=True` always gives a new array, as in JAX.

    Args:
        x: Input array.
        dtype: Target dtype (None: the default float type).
        copy: If True, always return a new array; otherwise `x` may be returned when it already has `dtype`.
        device: Not supported yet: must be None.
    Returns:
        An array with `x`'s values and shape, of dtype `dtype`.

    Examples:
        >>> x = jnp.array([1.7, -2.2, 3.5])
        >>> jnp.astype(x, jnp.int32)
        Array([ 1, -2,  3], dtype=int32)
        >>> jnp.astype(jnp.array([0, 2]), bool)
        Array([False,  True], dtype=bool)

    See also:
        `Array.astype`, `can_cast`.
    """
    if device is not None:
        raise NotImplementedError("astype: the 'device' argument is not supported yet")
    if is_user_edtype(dtype) or is_user_edtype(getattr(x, "dtype", None)):  # to/from a user extended dtype
        from ftrans import lax

        out = lax.convert_element_type(x, dtype)
        return E.copy_p.bind(out) if copy else out
    check_arraylike("astype", x)
    arr = as_operand(x)
    target = dtypes.default_float() if dtype is None else dtypes.requested(dtype, "astype")
    src, weak = dtype_weak(arr)
    if src.kind == "c" and target.kind != "c":
        if target == dtypes.bool_:
            arr = E.ne_p.bind(arr, convert(0, src, False))
        else:
            warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. Please first use "
                          "jnp.real or jnp.imag to take the real/imaginary component of your input.",
                          DeprecationWarning, stacklevel=user_stacklevel())
            arr = E.real_p.bind(arr)
    out = arr
    if dtype_weak(arr) != (target, False):
        out = S.convert_element_type_p.bind(arr, new_dtype=target, weak_type=False)
    return E.copy_p.bind(out) if copy else out


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Tell whether a cast between two dtypes is allowed under a casting rule.

    The answer follows NumPy's rules for the dtypes ftrans supports; it is about dtypes, not values.

    Args:
        from_: Source dtype, array or scalar type.
        to: Target dtype.
        casting: One of `'no'`, `'equiv'`, `'safe'` (the default), `'same_kind'` or `'unsafe'`.
    Returns:
        A Python bool.

    Examples:
        >>> jnp.can_cast(jnp.int8, jnp.int32)
        True
        >>> jnp.can_cast(jnp.float32, jnp.int32)
        False
        >>> jnp.can_cast(jnp.float32, jnp.int32, casting="unsafe")
        True

    See also:
        `result_type`, `promote_types`.
    """
    src = from_ if isinstance(from_, np.dtype) else dtype_weak(from_)[0] if not isinstance(from_, (str, type)) else np.dtype(from_)
    return bool(np.can_cast(src, dtypes.to_dtype(to), casting=casting))
