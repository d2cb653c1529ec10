"""Primitives that move, select or retype data without arithmetic."""

from __future__ import annotations

import math

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive, first_weak, mark_unsupported, never_weak
from ftrans.core.prims._base import (
    ANY,
    INT,
    normalize_axes,
    prim_type_error,
    prim_value_error,
    quiet,
    standard_primitive,
)


def _same_dtype(*avals, **params):
    return avals[0].dtype


# ---------------------------------------------------------------- dtype changes
def _convert_dtype(x, *, new_dtype, weak_type):
    return new_dtype


def _convert_impl(x, *, new_dtype, weak_type):
    if x.dtype == new_dtype:
        return x
    if x.dtype.kind in "iub" and new_dtype.kind in "iufc" and new_dtype.itemsize > 2 and type(new_dtype) in _NUMPY_DTYPES:
        return x.astype(new_dtype)  # (an integer or bool cast to a NumPy number past float16: nothing warns)
    return _convert_quiet(x, new_dtype)


@quiet
def _convert_quiet(x, new_dtype):
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = x.real  # XLA drops the imaginary part (bool included)
    if new_dtype == dtypes.bool_:
        return x != 0
    if dtypes.is_int(new_dtype) and dtypes.is_float(x.dtype):
        # XLA saturates float->int conversion and maps NaN to 0.
        # (``nan_to_num`` and ``clip`` spelt as the ufuncs they run: their Python was most of the cost)
        info = dtypes.iinfo(new_dtype)
        xf = np.array(x, dtype=np.float64)  # (a copy, written in place below)
        xf[np.isnan(xf)] = 0.0
        np.trunc(xf, out=xf)
        np.minimum(np.maximum(xf, float(info.min), out=xf), float(info.max), out=xf)
        return _astype(xf, new_dtype)
    return _astype(x, new_dtype)


# NumPy's own dtype classes (ml_dtypes' narrow types are not among them: their casts go through _astype)
_NUMPY_DTYPES = frozenset(type(np.dtype(c)) for c in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))


def _astype(x, new_dtype):
    """``astype``, through float64 or int64 between ml_dtypes types NumPy has no direct cast for
    (int4 -> uint4, float8_e4m3fn -> float8_e5m2, ...); integer casts keep the low bits, as XLA's do."""
    try:
        return x.astype(new_dtype)
    except TypeError:
        mid = np.float64 if dtypes.is_float(x.dtype) or dtypes.is_float(new_dtype) else np.int64
        return x.astype(mid).astype(new_dtype)


convert_element_type_p = standard_primitive(
    "convert_element_type", lambda x, **p: x.shape, _convert_dtype, _convert_impl,
    weak_type_rule=lambda weaks, *, new_dtype, weak_type: weak_type,
)


# ---------------------------------------------------------------- user-defined extended dtypes
# JAX's ``to_edtype`` / ``from_edtype``: ``lax.convert_element_type`` between a user-defined extended dtype
# (``ExtendedDType`` with a rules object) and its representation dtype.  An array of the extended dtype is,
# physically, its representation array: the element's representation axes trail its own shape.  Both are
# identities on the physical data (lowering: the operand itself).
def _edtype_str(d) -> str:
    return getattr(d, "name", None) or str(d)


def _conversion_allowed(edtype, convert_name: str, other) -> bool:
    rules = edtype._rules
    hook = getattr(rules, convert_name, None)
    if hook is not None:
        return bool(hook(other, edtype) if convert_name == "convert_to" else hook(edtype, other))
    return bool(getattr(rules, "allow_conversion", False))


def _to_edtype_abstract_eval(x, *, edtype):
    from ftrans.core.keys import physical_element

    if not _conversion_allowed(edtype, "convert_to", x.dtype):
        raise prim_value_error("convert_element_type", f"cannot convert from {_edtype_str(x.dtype)} to "
                               f"{_edtype_str(edtype)}: its rules do not allow conversion")
    el_shape, el_dtype = physical_element(edtype)
    if x.dtype != el_dtype:
        raise prim_value_error(
            "convert_element_type",
            f"can only convert to extended dtype from its representation dtype, but tried to convert from "
            f"{_edtype_str(x.dtype)} to {_edtype_str(edtype)}, whose representation dtype is {el_dtype.name}")
    n = len(x.shape) - len(el_shape)
    if n < 0 or tuple(x.shape[n:]) != el_shape:
        raise prim_value_error(
            "convert_element_type",
            f"can only convert to extended dtype from an array of its representation type, but "
            f"{_edtype_str(edtype)} has a representation shape {el_shape} and the given array has shape "
            f"{tuple(x.shape)}: its trailing axes must be {el_shape}")
    return ShapedArray(tuple(x.shape[:n]), edtype, False)


def _from_edtype_abstract_eval(x, *, dtype):
    from ftrans.core.keys import physical_element

    if not _conversion_allowed(x.dtype, "convert_from", dtype):
        raise prim_value_error("convert_element_type", f"cannot convert from {_edtype_str(x.dtype)} to "
                               f"{_edtype_str(dtype)}: its rules do not allow conversion")
    el_shape, el_dtype = physical_element(x.dtype)
    if np.dtype(dtype) != el_dtype:
        raise prim_value_error(
            "convert_element_type",
            f"can only convert from extended dtype to its representation dtype, but tried to convert from "
            f"{_edtype_str(x.dtype)} to {_edtype_str(dtype)}, whose representation dtype is {el_dtype.name}")
    return ShapedArray((*x.shape, *el_shape), el_dtype, False)


def _edtype_impl(name):
    def impl(x, **params):
        from ftrans.errors import FtransNotImplementedError

        raise FtransNotImplementedError(
            f"{name}: arrays of a user-defined extended dtype exist only inside jit-compiled code in ftrans "
            "(there is no eager array of one); convert inside a jax.jit-compiled function")
    return impl


to_edtype_p = Primitive("to_edtype")
to_edtype_p.def_abstract_eval(_to_edtype_abstract_eval)
to_edtype_p.def_impl(_edtype_impl("to_edtype"))
from_edtype_p = Primitive("from_edtype")
from_edtype_p.def_abstract_eval(_from_edtype_abstract_eval)
from_edtype_p.def_impl(_edtype_impl("from_edtype"))


def _bitcast_shape(x, *, new_dtype):
    odd = (dtypes.bool_, dtypes.complex64, dtypes.complex128)
    if x.dtype != new_dtype and (x.dtype in odd or new_dtype in odd):
        raise prim_type_error(
            "bitcast_convert_type", [x],
            f"cannot bitcast to {new_dtype.name}: bool and complex values only bitcast to their own type",
        )
    a, b = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(new_dtype)
    if a == b:
        return x.shape
    if a > b:
        return (*x.shape, a // b)
    if not x.shape or x.shape[-1] != b // a:
        raise prim_type_error(
            "bitcast_convert_type", [x],
            f"converting to the wider {new_dtype.name} needs a last dimension of {b // a}",
        )
    return x.shape[:-1]


def _bits_of(x) -> np.ndarray:
    """Each element's bit pattern as uint64 (sub-byte types: their low bits)."""
    n = dtypes.itemsize_bits(x.dtype)
    raw = np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64).reshape(x.shape)
    return raw & np.uint64((1 << n) - 1) if n < 8 else raw


def _from_bits(bits: np.ndarray, dtype) -> np.ndarray:
    n = dtypes.itemsize_bits(dtype)
    if n >= 8:
        return bits.astype(np.dtype(f"u{n // 8}")).view(dtype)
    if dtypes.is_int(dtype):  # ml_dtypes' narrow ints take their value (two's complement for the signed ones)
        v = bits.astype(np.int16)
        if not dtypes.is_unsigned(dtype):
            sign = 1 << (n - 1)
            v = (v ^ sign) - sign
        return v.astype(dtype)
    return bits.astype(np.uint8).view(dtype)  # float4: the pattern sits in the byte's low bits


def _bitcast_sub_byte(x, new_dtype):
    """Bitcasts involving 2/4-bit types, on bit patterns; narrower elements take the lower bits first."""
    a, b = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(new_dtype)
    bits = _bits_of(x)
    if a == b:
        return _from_bits(bits, new_dtype)
    if a < b:
        k = b // a
        acc = np.zeros(x.shape[:-1], np.uint64)
        for j in range(k):
            acc |= bits[..., j] << np.uint64(j * a)
        return _from_bits(acc, new_dtype)
    k = a // b
    mask = np.uint64((1 << b) - 1)
    parts = np.stack([(bits >> np.uint64(j * b)) & mask for j in range(k)], axis=-1)
    return _from_bits(parts, new_dtype)


def _bitcast_impl(x, *, new_dtype):
    if dtypes.itemsize_bits(x.dtype) < 8 or dtypes.itemsize_bits(new_dtype) < 8:
        return _bitcast_sub_byte(x, new_dtype)
    a, b = x.dtype.itemsize, new_dtype.itemsize
    if a == b:
        return x.view(new_dtype)
    if a > b:
        return np.ascontiguousarray(x).view(new_dtype).reshape(*x.shape, a // b)
    return np.ascontiguousarray(x).view(new_dtype).reshape(x.shape[:-1])


bitcast_convert_type_p = standard_primitive(
    "bitcast_convert_type", _bitcast_shape, lambda x, *, new_dtype: new_dtype, _bitcast_impl,
    weak_type_rule=never_weak,
)


# ---------------------------------------------------------------- select / clamp
def _select_n_shape(which, *cases):
    if not cases:
        raise prim_value_error("select_n", "needs at least one case")
    shape = cases[0].shape
    for c in cases[1:]:
        if c.shape != shape or c.dtype != cases[0].dtype:
            raise prim_type_error("select_n", [which, *cases], "cases must all have one shape and dtype")
    if which.shape not in ((), shape):
        raise prim_type_error("select_n", [which, *cases], "the selector must be a scalar or match the cases' shape")
    if which.dtype != dtypes.bool_ and which.dtype.kind not in "iu":
        raise prim_type_error("select_n", [which, *cases], "the selector must be bool or an integer")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise prim_type_error("select_n", [which, *cases], "a bool selector picks from at most 2 cases")
    return shape


def _select_n_impl(which, *cases):
    if len(cases) == 1:
        return cases[0]
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    return np.choose(which.astype(np.int64), cases, mode="clip").astype(cases[0].dtype, copy=False)


select_n_p = standard_primitive(
    "select_n", _select_n_shape, lambda which, *cases: cases[0].dtype, _select_n_impl,
    weak_type_rule=lambda weaks: all(weaks[1:]),
)


def _clamp_shape(lo, x, hi):
    for b in (lo, hi):
        if b.shape not in ((), x.shape):
            raise prim_type_error("clamp", [lo, x, hi], "min and max must be scalars or match the operand's shape")
        if b.dtype != x.dtype:
            raise prim_type_error("clamp", [lo, x, hi], "min, operand and max must share one dtype")
    return x.shape


def _clamp_impl(lo, x, hi):
    return np.minimum(np.maximum(x, lo), hi).astype(x.dtype, copy=False)


clamp_p = standard_primitive("clamp", _clamp_shape, lambda lo, x, hi: x.dtype, _clamp_impl)


# ---------------------------------------------------------------- shapes
def _broadcast_in_dim_shape(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise prim_type_error(
            "broadcast_in_dim", [x],
            f"broadcast_dimensions {broadcast_dimensions} must name one output axis per operand axis",
        )
    if len(shape) < x.ndim:
        raise prim_type_error(
            "broadcast_in_dim", [x],
            f"target broadcast shape must have equal or higher rank to the operand shape; got {shape}",
        )
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise prim_type_error(
            "broadcast_in_dim", [x],
            f"broadcast_in_dim broadcast_dimensions must be a subset of output dimensions "
            f"(axes of {shape}), got {broadcast_dimensions}",
        )
    if len(set(broadcast_dimensions)) != len(broadcast_dimensions):
        raise prim_type_error(
            "broadcast_in_dim", [x],
            f"broadcast_in_dim broadcast_dimensions must not contain duplicates, got {broadcast_dimensions}",
        )
    if list(broadcast_dimensions) != sorted(broadcast_dimensions):
        raise prim_value_error(
            "broadcast_in_dim",
            f"broadcast_dimensions {broadcast_dimensions} must be strictly increasing axes of {shape}",
        )
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise prim_type_error(
                "broadcast_in_dim", [x],
                f"operand dimension {i} of size {x.shape[i]} cannot broadcast to size {shape[d]} of {shape}",
            )
    return shape


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    if x.flags.c_contiguous and type(x.dtype) in _NUMPY_DTYPES:
        # The read-only stride-0 view ``np.broadcast_to`` makes, built directly (its Python costs five
        # times the constructor's).
        strides = [0] * len(shape)
        for i, d in enumerate(broadcast_dimensions):
            if x.shape[i] != 1:
                strides[d] = x.strides[i]
        try:
            out = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
        except (TypeError, ValueError):
            pass
        else:
            out.flags.writeable = False
            return out
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


broadcast_in_dim_p = standard_primitive(
    "broadcast_in_dim", _broadcast_in_dim_shape, _same_dtype, _broadcast_in_dim_impl,
    weak_type_rule=first_weak,
)


def _reshape_shape(x, *, new_sizes, dimensions):
    if math.prod(new_sizes) != x.size:
        raise prim_type_error(
            "reshape", [x], f"cannot reshape {x.size} elements into shape {new_sizes}",
        )
    if dimensions is not None and sorted(dimensions) != list(range(x.ndim)):
        raise prim_value_error("reshape", f"dimensions {dimensions} must be a permutation of the axes")
    return new_sizes


def _reshape_impl(x, *, new_sizes, dimensions):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return x.reshape(new_sizes)


reshape_p = standard_primitive(
    "reshape", _reshape_shape, _same_dtype, _reshape_impl, weak_type_rule=first_weak,
)


def _transpose_shape(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise prim_value_error(
            "transpose", f"permutation {permutation} is not a permutation of the axes of a rank-{x.ndim} array",
        )
    return tuple(x.shape[p] for p in permutation)


transpose_p = standard_primitive(
    "transpose", _transpose_shape, _same_dtype, lambda x, *, permutation: np.transpose(x, permutation),
    weak_type_rule=first_weak,
)


def _squeeze_shape(x, *, dimensions):
    dims = normalize_axes("squeeze", dimensions, x.ndim)
    for d in dims:
        if x.shape[d] != 1:
            raise prim_value_error("squeeze", f"cannot squeeze axis {d} of size {x.shape[d]} in shape {x.shape}")
    return tuple(s for i, s in enumerate(x.shape) if i not in dims)


squeeze_p = standard_primitive(
    "squeeze", _squeeze_shape, _same_dtype,
    lambda x, *, dimensions: np.squeeze(x, tuple(dimensions)) if dimensions else x,
    weak_type_rule=first_weak,
)


def _expand_dims_shape(x, *, dimensions):
    out_ndim = x.ndim + len(dimensions)
    dims = normalize_axes("expand_dims", dimensions, out_ndim)
    shape = list(x.shape)
    for d in sorted(dims):
        shape.insert(d, 1)
    return tuple(shape)


expand_dims_p = standard_primitive(
    "expand_dims", _expand_dims_shape, _same_dtype,
    lambda x, *, dimensions: np.expand_dims(x, tuple(dimensions)),
    weak_type_rule=first_weak,
)


def _rev_shape(x, *, dimensions):
    normalize_axes("rev", dimensions, x.ndim)
    return x.shape


rev_p = standard_primitive(
    "rev", _rev_shape, _same_dtype,
    lambda x, *, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x,
    weak_type_rule=first_weak,
)


def _pad_shape(x, padval, *, padding_config):
    if padval.shape != ():
        raise prim_value_error("pad", f"padding_value must be a scalar; got shape {padval.shape}")
    if padval.dtype != x.dtype:
        raise prim_type_error("pad", [x, padval], "the padding value must be a scalar of the operand's dtype")
    if len(padding_config) != x.ndim:
        raise prim_value_error("pad", f"padding_config needs one (low, high, interior) per axis; got {padding_config} for rank {x.ndim}")
    out = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise prim_value_error("pad", f"interior padding must be non-negative, got {interior}")
        size = lo + hi + n + (_max_dim(n - 1, 0) * interior if interior else 0)
        if _maybe_negative(size):
            raise prim_value_error("pad", f"padding {(lo, hi, interior)} removes more than the {n} elements of an axis")
        out.append(size)
    return tuple(out)


def _max_dim(a, b):
    from ftrans.core.shape_poly import max_dim
    return max_dim(a, b)


def _maybe_negative(size) -> bool:
    """``size < 0``, where a symbolic size that may or may not be negative counts as not (JAX's shape
    assertions check it when the program runs)."""
    from ftrans.errors import InconclusiveDimensionOperation

    try:
        return bool(size < 0)
    except InconclusiveDimensionOperation:
        return False


def _pad_impl(x, padval, *, padding_config):
    # Interior padding first (spread the elements), then edges, where negative
    # edge padding crops.
    shape = [n + max(n - 1, 0) * interior for n, (_, _, interior) in zip(x.shape, padding_config)]
    spread = np.full(shape, padval, dtype=x.dtype)
    spread[tuple(slice(None, None, it + 1) for (_, _, it) in padding_config)] = x
    pads = [(max(lo, 0), max(hi, 0)) for lo, hi, _ in padding_config]
    out = np.pad(spread, pads, constant_values=padval) if any(p != (0, 0) for p in pads) else spread
    crop = tuple(
        slice(-lo if lo < 0 else 0, (out.shape[i] + hi) if hi < 0 else None)
        for i, (lo, hi, _) in enumerate(padding_config)
    )
    return out[crop]


pad_p = standard_primitive("pad", _pad_shape, _same_dtype, _pad_impl)


def _concat_shape(*xs, dimension):
    if not xs:
        raise prim_value_error("concatenate", "needs at least one operand")
    x0 = xs[0]
    if x0.ndim == 0:
        raise prim_type_error("concatenate", xs, "cannot concatenate rank-0 (scalar) operands")
    if not isinstance(dimension, (int, np.integer)) or not 0 <= dimension < x0.ndim:
        raise prim_value_error("concatenate", f"dimension {dimension} is out of range for rank {x0.ndim}")
    for x in xs[1:]:
        if x.dtype != x0.dtype or x.ndim != x0.ndim or any(
            a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape)) if i != dimension
        ):
            raise prim_type_error(
                "concatenate", xs,
                f"operands must share dtype and all dimensions except {dimension}",
            )
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return tuple(shape)


concatenate_p = standard_primitive(
    "concatenate", _concat_shape, _same_dtype,
    lambda *xs, dimension: np.concatenate(xs, axis=dimension),
)


def _slice_shape(x, *, start_indices, limit_indices, strides):
    if not (len(start_indices) == len(limit_indices) == x.ndim) or (strides is not None and len(strides) != x.ndim):
        raise prim_value_error("slice", f"start/limit/strides need one entry per axis of {x.shape}")
    out = []
    for i, (n, s, e) in enumerate(zip(x.shape, start_indices, limit_indices)):
        st = 1 if strides is None else strides[i]
        if not 0 <= s <= e <= n or st < 1:
            raise prim_value_error(
                "slice",
                f"axis {i}: start {s}, limit {e}, stride {st} is not a valid slice of size {n} "
                "(need 0 <= start <= limit <= size and stride >= 1)",
            )
        out.append(max(0, -(-(e - s) // st)) if type(e) is int and type(s) is int else _symbolic_size(s, e, st))
    return tuple(out)


def _symbolic_size(s, e, st):
    """The size of a slice with a symbolic bound: ``ceil((e - s) / st)``, at least 0 (written as JAX's
    ``(e - s - 1) // st + 1``, so the expressions print alike)."""
    from ftrans.core.shape_poly import max_dim

    return max_dim(0, (e - s - 1) // st + 1)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    st = strides or (1,) * x.ndim
    return x[tuple(slice(s, e, k) for s, e, k in zip(start_indices, limit_indices, st))]


slice_p = standard_primitive("slice", _slice_shape, _same_dtype, _slice_impl, weak_type_rule=first_weak)


def _split_abstract(x, *, sizes, axis):
    if not 0 <= axis < x.ndim:
        raise prim_value_error("split", f"axis {axis} is out of bounds for an operand of rank {x.ndim}")
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise prim_value_error("split", f"Sum of sizes {sum(sizes)} must be equal to dimension {x.shape[axis]} "
                                        f"of the operand shape {x.shape}")
    return [ShapedArray(x.shape[:axis] + (int(s),) + x.shape[axis + 1:], x.dtype, x.weak_type) for s in sizes]


def _split_impl(x, *, sizes, axis):
    return [np.ascontiguousarray(p) for p in np.split(x, np.cumsum(sizes)[:-1].astype(int), axis=axis)]


# JAX's ``split_p`` (``lax.split``): consecutive pieces along one axis. Its transpose concatenates the
# cotangents, a missing one as zeros of its piece's type (weak for a weak piece), where slices' transposes pad
# with a strong zero.
split_p = Primitive("split", multiple_results=True)
split_p.def_abstract_eval(_split_abstract)
split_p.def_impl(_split_impl)
split_p.def_weak_type(lambda weaks, *, sizes, axis: (weaks[0],) * len(sizes))


def _dyn_slice_shape(x, *idx, slice_sizes):
    if len(idx) != x.ndim or len(slice_sizes) != x.ndim:
        raise prim_value_error("dynamic_slice", f"needs one start index and slice size per axis of {x.shape}")
    for i in idx:
        if i.shape != () or i.dtype not in INT:
            raise prim_type_error("dynamic_slice", [x, *idx], "start indices must be integer scalars")
    for n, s in zip(x.shape, slice_sizes):
        if not 0 <= s <= n:
            raise prim_value_error("dynamic_slice", f"slice sizes {slice_sizes} do not fit in shape {x.shape}")
    return tuple(slice_sizes)


def _clamped_starts(shape, idx, sizes):
    return [int(min(max(int(i), 0), n - s)) for i, n, s in zip(idx, shape, sizes)]


def _dyn_slice_impl(x, *idx, slice_sizes):
    starts = _clamped_starts(x.shape, idx, slice_sizes)
    return x[tuple(slice(s, s + k) for s, k in zip(starts, slice_sizes))]


dynamic_slice_p = standard_primitive(
    "dynamic_slice", _dyn_slice_shape, _same_dtype, _dyn_slice_impl, weak_type_rule=first_weak,
)


def _dus_shape(x, update, *idx):
    if update.dtype != x.dtype or update.ndim != x.ndim:
        raise prim_type_error("dynamic_update_slice", [x, update], "update must have the operand's rank and dtype")
    if len(idx) != x.ndim:
        raise prim_value_error("dynamic_update_slice", f"needs one start index per axis of {x.shape}")
    for i in idx:
        if i.shape != () or i.dtype not in INT:
            raise prim_type_error("dynamic_update_slice", [x, update, *idx], "start indices must be integer scalars")
    if any(u > n for u, n in zip(update.shape, x.shape)):
        raise prim_type_error("dynamic_update_slice", [x, update], "update is larger than the operand")
    return x.shape


def _dus_impl(x, update, *idx):
    starts = _clamped_starts(x.shape, idx, update.shape)
    out = x.copy()
    out[tuple(slice(s, s + k) for s, k in zip(starts, update.shape))] = update
    return out


# Weak only when every operand, indices included, is weak (JAX's standard rule).
dynamic_update_slice_p = standard_primitive("dynamic_update_slice", _dus_shape, _same_dtype, _dus_impl)


# ---------------------------------------------------------------- iota
def _iota_abstract(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise prim_value_error("iota", f"dimension {dimension} is out of range for shape {shape}")
    if dtype not in ANY - {dtypes.bool_}:
        raise prim_value_error("iota", f"dtype {dtype} is not numeric")
    return ShapedArray(tuple(shape), dtype, False)


def _iota_impl(*, dtype, shape, dimension):
    r = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(r.reshape(view), shape)


iota_p = Primitive("iota")
iota_p.def_abstract_eval(_iota_abstract)
iota_p.def_impl(_iota_impl)
iota_p.def_weak_type(never_weak)


# ---------------------------------------------------------------- dim_as_value
# The value of a symbolic dimension (shape polymorphism: ``x * x.shape[0]``, ``x.mean()``): an integer scalar
# computed from the arguments' sizes when the program runs. Its param ``dim`` is the dimension expression.
def _dim_as_value_abstract(*, dim):
    return ShapedArray((), dtypes.default_int(), True)


def _dim_as_value_impl(*, dim):
    from ftrans.core.shape_poly import DimExpr

    if isinstance(dim, DimExpr):
        raise NotImplementedError(f"the symbolic dimension '{dim}' has a value only in an exported program "
                                  "that runs (Exported.call); it cannot be evaluated here")
    return np.asarray(int(dim), dtypes.default_int())


dim_as_value_p = Primitive("dim_as_value")
dim_as_value_p.def_abstract_eval(_dim_as_value_abstract)
dim_as_value_p.def_impl(_dim_as_value_impl)
dim_as_value_p.def_weak_type(lambda weaks, **_: True)

__all__ = [n for n in dir() if n.endswith("_p")]


# ---------------------------------------------------------------- rng_bit_generator
#
# XLA's RngBitGenerator: ``(key uint32[4]) -> (new key uint32[4], bits of shape/dtype)``.  Its bits are the
# backend's (the algorithm's reference is XLA's implementation), so its eager impl compiles the one op; that
# impl is registered by ``lowering/rules/structural.py``, as ``jit_call``'s is by the lowering layer.

rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True)
_RNG_DTYPES = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)


@rng_bit_generator_p.def_abstract_eval
def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm):
    if key.dtype != dtypes.uint32 or tuple(key.shape) != (4,):
        raise prim_type_error("rng_bit_generator", [key], "the key must be a uint32[4] array")
    if np.dtype(dtype) not in _RNG_DTYPES:
        raise prim_type_error("rng_bit_generator", [key], f"unsupported dtype {np.dtype(dtype).name}")
    from ftrans.core.shape_poly import is_symbolic_dim

    if any(not is_symbolic_dim(d) and (not isinstance(d, (int, np.integer)) or d < 0) for d in shape):
        raise prim_type_error("rng_bit_generator", [key], f"shape must be non-negative ints, got {shape}")
    return [ShapedArray((4,), dtypes.uint32, key.weak_type), ShapedArray(tuple(shape), np.dtype(dtype), False)]


@rng_bit_generator_p.def_weak_type
def _rng_bit_generator_weak(weaks, *, shape, dtype, algorithm):
    return (weaks[0], False)


# ---------------------------------------------------------------- rng_uniform
#
# XLA's stateful ``Rng`` op with the UNIFORM distribution: ``shape`` values in ``[a, b)`` from scalars ``a``, ``b``
# of one dtype.  Its values are the backend's and unspecified (neither seeded nor reproducible), so it has no
# NumPy impl (``lowering/rules/structural.py`` registers one that compiles the op), no derivative and no batching
# rule, as in JAX.

rng_uniform_p = Primitive("rng_uniform")


@rng_uniform_p.def_abstract_eval
def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.dtype != b.dtype:
        raise prim_value_error("rng_uniform", f"Arguments to rng_uniform must have identical dtypes, got "
                                              f"{a.dtype.name} and {b.dtype.name}")
    if a.shape != () or b.shape != ():
        raise prim_value_error("rng_uniform", f"Arguments to rng_uniform must be scalars; got shapes "
                                              f"{tuple(a.shape)} and {tuple(b.shape)}")
    if not (dtypes.issubdtype(a.dtype, np.integer) or dtypes.issubdtype(a.dtype, np.floating)):
        raise prim_type_error("rng_uniform", [a, b], "the bounds must be integers or real floats")
    if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        raise prim_type_error("rng_uniform", [a, b], f"shape must be non-negative ints, got {shape}")
    return ShapedArray(tuple(int(d) for d in shape), a.dtype, a.weak_type and b.weak_type)


@rng_uniform_p.def_weak_type
def _rng_uniform_weak(weaks, *, shape):
    return weaks[0] and weaks[1]


for _table, _why in (("jvp", "rng_uniform's values are an unseeded generator's; it has no derivative (as in JAX)"),
                     ("transpose", "rng_uniform makes random values; it is not linear"),
                     ("batching", "rng_uniform has no vmap rule (as in JAX); call it with the batch in `shape`")):
    mark_unsupported(rng_uniform_p, _table, _why)


# ----------------------------------------------------------------------------
# Sharding rules (values with sharding types over Explicit mesh axes: core/sharding_rules.py)

from ftrans.core import sharding_rules as _sr  # noqa: E402

convert_element_type_p.sharding_rule = _sr.same_as_first
bitcast_convert_type_p.sharding_rule = _sr.bitcast_convert_type
select_n_p.sharding_rule = _sr.elementwise("select_n")
clamp_p.sharding_rule = _sr.elementwise("clamp")
broadcast_in_dim_p.sharding_rule = _sr.broadcast_in_dim
reshape_p.sharding_rule = _sr.reshape
transpose_p.sharding_rule = _sr.transpose
squeeze_p.sharding_rule = _sr.squeeze
expand_dims_p.sharding_rule = _sr.expand_dims
rev_p.sharding_rule = _sr.same_as_first
pad_p.sharding_rule = _sr.slicing("padding")
concatenate_p.sharding_rule = _sr.concatenate
slice_p.sharding_rule = _sr.slicing("slicing")
dynamic_slice_p.sharding_rule = _sr.slicing("dynamic_slice")
dynamic_update_slice_p.sharding_rule = _sr.same_as_first
rng_bit_generator_p.sharding_rule = _sr.rng_bit_generator
to_edtype_p.sharding_rule = _sr.to_edtype
from_edtype_p.sharding_rule = _sr.from_edtype
_sr.typed_by_api.add(reshape_p)
_sr.typed_by_api.add(broadcast_in_dim_p)  # (typed by transposition rules: JAX's ``sharding`` param)


# ---------------------------------------------------------------- printing
from ftrans.core.ir import pp_params_rules as _pp_params_rules  # noqa: E402


def _broadcast_in_dim_printed(params: dict) -> list:
    """As JAX prints a ``broadcast_in_dim``: without ``shape`` and ``sharding`` (the result's type shows
    them) and without empty ``broadcast_dimensions``."""
    return sorted((k, v) for k, v in params.items()
                  if k not in ("shape", "sharding") and not (k == "broadcast_dimensions" and not v))


def _convert_element_type_printed(params: dict) -> list:
    """As JAX prints a ``convert_element_type``: without ``sharding`` (the result's type shows it)."""
    return sorted((k, v) for k, v in params.items() if k != "sharding")


_pp_params_rules[broadcast_in_dim_p] = _broadcast_in_dim_printed
_pp_params_rules[convert_element_type_p] = _convert_element_type_printed
