"""Reductions: sum, prod, mean, var, max, argmax, any, all, cumulative sums, ..."""

from __future__ import annotations

from typing import Any

from ftrans.core import dtypes
from ftrans.core.prims import reductions as R
from ftrans.numpy._util import as_operand, canonicalize_axes, check_arraylike, check_dtype_arg, convert

__all__ = ["sum"]


def _sum_dtype(d):
    # NumPy/JAX sum bools and small ints in the default int type.
    if d == dtypes.bool_ or (d.kind == "i" and d.itemsize < dtypes.default_int().itemsize):
        return dtypes.default_int()
    if d.kind == "u" and d.itemsize < dtypes.default_uint().itemsize:
        return dtypes.default_uint()
    return d


def sum(a: Any, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    check_arraylike("sum", a)
    x = as_operand(a)
    d = check_dtype_arg(dtype) or (_sum_dtype(x.dtype) if promote_integers else x.dtype)
    x = convert(x, d, x.weak_type)
    axes = canonicalize_axes("sum", axis, x.ndim)
    out_ = R.reduce_sum_p.bind(x, axes=axes)
    if keepdims:
        from ftrans.numpy._shape import expand_dims

        out_ = expand_dims(out_, axes) if axes else out_
    return out_
