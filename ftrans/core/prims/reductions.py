"""Reductions over axes, arg-reductions, and ``dot_general``."""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.primitive import first_weak, never_weak
from ftrans.core.prims._base import (
    ANY,
    INT,
    INT_OR_BOOL,
    NUM,
    class_name,
    normalize_axes,
    prim_type_error,
    prim_value_error,
    standard_primitive,
)


def _reduce_shape(name: str, allowed: frozenset):
    def rule(x, *, axes):
        if x.dtype not in allowed:
            raise prim_type_error(name, [x], f"expects {class_name(allowed)} operands")
        axes_n = normalize_axes(name, axes, x.ndim)
        return tuple(s for i, s in enumerate(x.shape) if i not in axes_n)

    return rule


def _keep(fn):
    def impl(x, *, axes):
        with np.errstate(all="ignore"):
            out = fn(x, axis=tuple(axes))
        return np.asarray(out, dtype=x.dtype)

    return impl


def _reduce_minmax(fn, name):
    def impl(x, *, axes):
        axes = tuple(axes)
        if any(x.shape[a] == 0 for a in axes):
            # XLA reduces an empty axis to the operation's identity.
            if x.dtype == np.bool_:
                ident = name == "min"
            elif dtypes.is_float(x.dtype):
                ident = np.inf if name == "min" else -np.inf
            else:
                info = np.iinfo(x.dtype)
                ident = info.max if name == "min" else info.min
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
            return np.full(shape, ident, dtype=x.dtype)
        return np.asarray(fn(x, axis=axes), dtype=x.dtype)

    return impl


reduce_sum_p = standard_primitive(
    "reduce_sum", _reduce_shape("reduce_sum", NUM), lambda x, **p: x.dtype, _keep(np.sum),
    weak_type_rule=first_weak,
)
reduce_prod_p = standard_primitive(
    "reduce_prod", _reduce_shape("reduce_prod", NUM), lambda x, **p: x.dtype, _keep(np.prod),
    weak_type_rule=first_weak,
)
reduce_max_p = standard_primitive(
    "reduce_max", _reduce_shape("reduce_max", ANY), lambda x, **p: x.dtype,
    _reduce_minmax(np.max, "max"), weak_type_rule=first_weak,
)
reduce_min_p = standard_primitive(
    "reduce_min", _reduce_shape("reduce_min", ANY), lambda x, **p: x.dtype,
    _reduce_minmax(np.min, "min"), weak_type_rule=first_weak,
)
reduce_and_p = standard_primitive(
    "reduce_and", _reduce_shape("reduce_and", INT_OR_BOOL), lambda x, **p: x.dtype,
    _keep(lambda x, axis: np.bitwise_and.reduce(x, axis=axis) if x.dtype != np.bool_ else np.all(x, axis=axis)),
    weak_type_rule=first_weak,
)
reduce_or_p = standard_primitive(
    "reduce_or", _reduce_shape("reduce_or", INT_OR_BOOL), lambda x, **p: x.dtype,
    _keep(lambda x, axis: np.bitwise_or.reduce(x, axis=axis) if x.dtype != np.bool_ else np.any(x, axis=axis)),
    weak_type_rule=first_weak,
)
reduce_xor_p = standard_primitive(
    "reduce_xor", _reduce_shape("reduce_xor", INT_OR_BOOL), lambda x, **p: x.dtype,
    _keep(lambda x, axis: np.bitwise_xor.reduce(x, axis=axis)),
    weak_type_rule=first_weak,
)


def _arg_shape(name):
    def rule(x, *, axes, index_dtype):
        if len(axes) != 1:
            raise prim_value_error(name, f"reduces exactly one axis, got axes={axes}")
        (ax,) = normalize_axes(name, axes, x.ndim)
        if x.shape[ax] == 0:
            raise prim_value_error(name, f"cannot take {name} of an empty axis {ax} in shape {x.shape}")
        if index_dtype not in INT:
            raise prim_type_error(name, [x], f"index_dtype must be an integer dtype, got {index_dtype}")
        return tuple(s for i, s in enumerate(x.shape) if i != ax)

    return rule


def _arg_impl(fn):
    def impl(x, *, axes, index_dtype):
        ax = axes[0]
        if dtypes.is_float(x.dtype) or x.dtype.kind == "c":
            # NaN counts as the extreme value (first NaN wins), as in XLA and NumPy.
            nan = np.isnan(x)
            if nan.any():
                first_nan = np.argmax(nan, axis=ax)
                has_nan = nan.any(axis=ax)
                base = fn(np.where(nan, 0, x), axis=ax)
                return np.where(has_nan, first_nan, base).astype(index_dtype)
        return fn(x, axis=ax).astype(index_dtype)

    return impl


argmax_p = standard_primitive(
    "argmax", _arg_shape("argmax"), lambda x, *, axes, index_dtype: index_dtype, _arg_impl(np.argmax),
    weak_type_rule=never_weak,
)
argmin_p = standard_primitive(
    "argmin", _arg_shape("argmin"), lambda x, *, axes, index_dtype: index_dtype, _arg_impl(np.argmin),
    weak_type_rule=never_weak,
)


# ---------------------------------------------------------------- dot_general
def _dot_shape(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise prim_value_error("dot_general", f"dimension_numbers {dimension_numbers} pair up unequal numbers of axes")
    for axes, x in ((lc + lb, lhs), (rc + rb, rhs)):
        normalize_axes("dot_general", axes, x.ndim)
    for a, b in zip(lc, rc):
        if lhs.shape[a] != rhs.shape[b]:
            raise prim_type_error(
                "dot_general", [lhs, rhs],
                f"contracting dimensions differ: lhs axis {a} has size {lhs.shape[a]}, rhs axis {b} has size {rhs.shape[b]}",
            )
    for a, b in zip(lb, rb):
        if lhs.shape[a] != rhs.shape[b]:
            raise prim_type_error(
                "dot_general", [lhs, rhs],
                f"batch dimensions differ: lhs axis {a} has size {lhs.shape[a]}, rhs axis {b} has size {rhs.shape[b]}",
            )
    batch = tuple(lhs.shape[a] for a in lb)
    lfree = tuple(s for i, s in enumerate(lhs.shape) if i not in lc and i not in lb)
    rfree = tuple(s for i, s in enumerate(rhs.shape) if i not in rc and i not in rb)
    return batch + lfree + rfree


def _dot_dtype(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    if lhs.dtype != rhs.dtype:
        raise prim_type_error(
            "dot_general", [lhs, rhs],
            "operands must have the same dtype (ftrans.numpy.dot / matmul promote for you)",
        )
    if lhs.dtype not in ANY:
        raise prim_type_error("dot_general", [lhs, rhs], "expects numeric operands")
    return preferred_element_type if preferred_element_type is not None else lhs.dtype


def _dot_impl(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = preferred_element_type if preferred_element_type is not None else lhs.dtype
    lfree = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rfree = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    # Bring both to (batch, free, contract) / (batch, contract, free) and matmul.
    lt = np.transpose(lhs, (*lb, *lfree, *lc))
    rt = np.transpose(rhs, (*rb, *rc, *rfree))
    bshape = tuple(lhs.shape[a] for a in lb)
    lf = tuple(lhs.shape[a] for a in lfree)
    rf = tuple(rhs.shape[a] for a in rfree)
    k = int(np.prod([lhs.shape[a] for a in lc], dtype=np.int64))
    compute = lhs.dtype
    if compute in (dtypes.bfloat16, dtypes.float16):
        compute = np.dtype(np.float32)
    elif compute == np.bool_:
        compute = np.dtype(np.int32)
    lm = lt.reshape(*bshape, int(np.prod(lf, dtype=np.int64)), k).astype(compute, copy=False)
    rm = rt.reshape(*bshape, k, int(np.prod(rf, dtype=np.int64))).astype(compute, copy=False)
    with np.errstate(all="ignore"):
        out = np.matmul(lm, rm)
    out = out.reshape(*bshape, *lf, *rf)
    if lhs.dtype == np.bool_ and out_dtype == np.bool_:
        out = out != 0
    return out.astype(out_dtype, copy=False)


dot_general_p = standard_primitive(
    "dot_general", _dot_shape, _dot_dtype, _dot_impl,
    weak_type_rule=lambda weaks, **params: all(weaks),
)

__all__ = [n for n in dir() if n.endswith("_p")]
