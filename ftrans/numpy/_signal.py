"""``jnp.convolve`` and ``jnp.correlate``: 1-D convolutions as one ``conv_general_dilated``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.operands import as_operand, check_arraylike
from ftrans.errors import FtransValueError

__all__ = ["convolve", "correlate"]


def _conv1d(name: str, a: Any, v: Any, mode: str, precision: Any, preferred_element_type: Any) -> Any:
    from ftrans import lax
    from ftrans import numpy as jnp

    check_arraylike(name, a, v)
    a, v = as_operand(a), as_operand(v)
    if a.ndim != 1 or v.ndim != 1:
        raise FtransValueError(f"jnp.{name}: only 1-dimensional inputs are supported, got shapes "
                               f"{tuple(a.shape)} and {tuple(v.shape)}")
    d = jnp.result_type(a, v)
    if preferred_element_type is None and not jnp.issubdtype(d, jnp.inexact):
        # JAX's promote_dtypes_inexact: 64-bit integers to float64, the others (and bool) to float32; no
        # promotion with a Python float, which numpy_dtype_promotion='strict' refuses
        d = np.dtype(np.float64 if d.itemsize == 8 else np.float32)
    a, v = a.astype(d), v.astype(d)
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise FtransValueError(f"jnp.{name}: inputs cannot be empty, got shapes {tuple(a.shape)} and "
                               f"{tuple(v.shape)}")
    reverse_out = False
    if name == "correlate":
        v = jnp.conj(v) if jnp.issubdtype(d, jnp.complexfloating) else v
        if a.shape[0] < v.shape[0]:
            a, v, reverse_out = v, a, True
    else:
        if a.shape[0] < v.shape[0]:
            a, v = v, a
        v = jnp.flip(v)
    m = v.shape[0]
    if mode == "valid":
        pad = [(0, 0)]
    elif mode == "same":
        pad = [(m // 2, m - m // 2 - 1)]
    elif mode == "full":
        pad = [(m - 1, m - 1)]
    else:
        raise FtransValueError(f"jnp.{name}: mode must be one of 'full', 'same', 'valid', got {mode!r}")
    out = lax.conv_general_dilated(a[None, None, :], v[None, None, :], (1,), pad, precision=precision,
                                   preferred_element_type=preferred_element_type)[0, 0]
    return out[::-1] if reverse_out else out


def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """Discrete linear convolution of two 1-D arrays.

    Args:
        a: First 1-D array.
        v: Second 1-D array.
        mode: `'full'` (default), `'same'` or `'valid'`.
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
    Returns:
        A 1-D array in the promoted dtype.

    Examples:
        >>> jnp.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]))
        Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
        >>> jnp.convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]), mode="same")
        Array([1. , 2.5, 4. ], dtype=float32)

    See also:
        `correlate`, `polymul`.
    """
    return _conv1d("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """Cross-correlation of two 1-D arrays.

    `v` is conjugated, as in NumPy.

    Args:
        a: First 1-D array.
        v: Second 1-D array.
        mode: `'valid'` (default), `'same'` or `'full'`.
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
    Returns:
        A 1-D array in the promoted dtype.

    Examples:
        >>> jnp.correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1.]))
        Array([2., 3.], dtype=float32)
        >>> jnp.correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1.]), mode="full")
        Array([1., 2., 3., 0.], dtype=float32)

    See also:
        `convolve`.
    """
    return _conv1d("correlate", a, v, mode, precision, preferred_element_type)
