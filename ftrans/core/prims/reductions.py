"""Reductions over axes, arg-reductions, and ``dot_general``."""

from __future__ import annotations

import math

import numpy as np

from ftrans.core import dtypes
from ftrans.core.config import config as _config
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
    quiet,
    standard_primitive,
)
from ftrans.errors import FtransValueError


def strict_axes(name: str, axes, ndim: int) -> tuple[int, ...]:
    """XLA reduction axes: distinct and in ``[0, ndim)`` (negative axes are the API layer's job)."""
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool) or not 0 <= ax < ndim:
            raise prim_value_error(
                name, f"reduction axes {tuple(axes)} contain {ax!r}, out of bounds for an operand of rank {ndim} "
                "(primitives take non-negative axes)",
            )
    return normalize_axes(name, axes, ndim)


def _reduce_shape(name: str, allowed: frozenset):
    def rule(x, *, axes):
        if x.dtype not in allowed:
            raise prim_type_error(name, [x], f"expects {class_name(allowed)} operands")
        axes_n = strict_axes(name, axes, x.ndim)
        return tuple(s for i, s in enumerate(x.shape) if i not in axes_n)

    return rule


def _keep(fn):
    """A NumPy reduction that returns the operand's dtype.

    Half-precision floats are accumulated in float32 and rounded once, which is
    what XLA's CPU/GPU reductions effectively do (NumPy would accumulate in
    bfloat16 and lose most of the sum).
    """

    @quiet
    def impl(x, *, axes):
        v = x.astype(np.float32) if x.dtype in _HALF else x
        out = fn(v, axis=tuple(axes))
        return np.asarray(out).astype(x.dtype, copy=False)

    return impl


# The accumulator of an eager (NumPy) sum: floats narrower than float64 add up in
# float64 and are rounded once.  NumPy's own float32 sum is pairwise only along a
# contiguous axis (a column sum of 10,000 rows was off by 1e-6 relative); XLA's
# sums are tree-shaped and about as accurate as the rounded float64 sum.
SUM_ACCUMULATOR = {np.dtype(np.float16): np.dtype(np.float64), np.dtype(dtypes.bfloat16): np.dtype(np.float64),
                   np.dtype(np.float32): np.dtype(np.float64), np.dtype(np.complex64): np.dtype(np.complex128)}
_HALF = (np.dtype(np.float16), np.dtype(dtypes.bfloat16))
_PAIRWISE_MIN_SIZE = 1 << 16  # from here on a float64 copy costs more than a tree of float32 adds


def _pairwise(x: np.ndarray, axis: int) -> np.ndarray:
    """Sum over ``axis`` as a balanced tree of whole-slice adds (XLA's shape of sum)."""
    v = np.moveaxis(x, axis, 0)
    n = v.shape[0]
    while n > 1:
        h = n // 2
        s = v[:h] + v[h:2 * h]
        if n & 1:
            s[0] += v[2 * h]
        v, n = s, h
    return v[0]


@quiet
def sum_impl(x, *, axes):
    axes = tuple(sorted(axes))
    acc = SUM_ACCUMULATOR.get(x.dtype)
    if acc is not None:
        k, nd = len(axes), x.ndim
        trailing = axes == tuple(range(nd - k, nd)) and x.flags.c_contiguous
        if trailing and x.dtype not in _HALF:
            # Trailing axes of a C-contiguous array: NumPy adds them as one contiguous run,
            # pairwise, as accurately as XLA and with no copy.
            acc = None
        elif not trailing and x.size >= _PAIRWISE_MIN_SIZE and 0 not in x.shape:
            # A large sum over other axes: a tree of adds in (at least) float32.
            v = x.astype(np.float32) if x.dtype in _HALF else x
            for ax in reversed(axes):
                v = _pairwise(v, ax)
            return np.asarray(v).astype(x.dtype, copy=False)
    # (``np.add.reduce`` is what ``np.sum`` calls, without its Python wrapper)
    out = np.add.reduce(x, axis=axes, dtype=acc or x.dtype)
    return np.asarray(out).astype(x.dtype, copy=False)


def _complex_minmax_fold(x, axes, name):
    # Complex values with a NaN: the compiled reduction folds in order, keeping the running value only
    # where it compares strictly greater (less), lexicographically; a comparison with a NaN is false, so
    # the later value wins. NumPy's max/min would propagate the NaN instead.
    rest = [d for d in range(x.ndim) if d not in axes]
    v = np.transpose(x, rest + list(axes)).reshape(tuple(x.shape[d] for d in rest) + (-1,))
    acc = np.full(v.shape[:-1], -np.inf if name == "max" else np.inf, x.dtype)
    cmp = np.greater if name == "max" else np.less
    for k in range(v.shape[-1]):
        e = v[..., k]
        keep = np.where(acc.real == e.real, cmp(acc.imag, e.imag), cmp(acc.real, e.real))
        acc = np.where(keep, acc, e)
    return acc


def _reduce_minmax(fn, name):
    def impl(x, *, axes):
        axes = tuple(axes)
        if any(x.shape[a] == 0 for a in axes):
            # XLA reduces an empty axis to the operation's identity.
            if x.dtype == np.bool_:
                ident = name == "min"
            elif dtypes.is_inexact(x.dtype):  # a complex identity is (+-inf, 0), as XLA's
                ident = np.inf if name == "min" else -np.inf
            else:
                info = dtypes.iinfo(x.dtype)
                ident = info.max if name == "min" else info.min
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
            return np.full(shape, ident, dtype=x.dtype)
        if x.dtype.kind == "c" and axes and np.isnan(x).any():
            return _complex_minmax_fold(x, axes, name)
        return np.asarray(fn(x, axis=axes), dtype=x.dtype)

    return impl


def _reduce_sum_dtype(x, *, axes):
    # JAX's ``allow_f16_reductions=False``: a sum of half-precision values over an axis longer than one
    # is refused (it loses precision quickly); summing over size-1 axes only is allowed.
    if (x.dtype in (dtypes.float16, dtypes.bfloat16) and not _config.allow_f16_reductions
            and any(x.shape[a] != 1 for a in axes)):
        raise prim_value_error(
            "reduce_sum", f"reduce_sum on operand {x.dtype.name}{list(x.shape)} over axes {tuple(axes)} is not "
            "allowed when allow_f16_reductions=False; convert the operand to float32 first, or allow it "
            "(ftrans.allow_f16_reductions(True))")
    return x.dtype


reduce_sum_p = standard_primitive(
    "reduce_sum", _reduce_shape("reduce_sum", NUM), _reduce_sum_dtype, sum_impl,
    weak_type_rule=first_weak,
)
reduce_prod_p = standard_primitive(
    "reduce_prod", _reduce_shape("reduce_prod", NUM), lambda x, **p: x.dtype,
    _keep(lambda v, axis: np.multiply.reduce(v, axis=axis, dtype=v.dtype)),  # (np.prod, without its wrapper)
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
    _keep(lambda x, axis: np.bitwise_and.reduce(x, axis=axis) if x.dtype != np.bool_ else
          np.logical_and.reduce(x, axis=axis)),
    weak_type_rule=first_weak,
)
reduce_or_p = standard_primitive(
    "reduce_or", _reduce_shape("reduce_or", INT_OR_BOOL), lambda x, **p: x.dtype,
    _keep(lambda x, axis: np.bitwise_or.reduce(x, axis=axis) if x.dtype != np.bool_ else
          np.logical_or.reduce(x, axis=axis)),
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
        (ax,) = strict_axes(name, axes, x.ndim)
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
def _dims_tuple(side: str, what: str, dims, ndim: int) -> tuple[int, ...]:
    """XLA wants explicit, non-negative, in-range axes (the API layer normalises negatives)."""
    out = []
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not 0 <= d < ndim:
            raise prim_value_error(
                "dot_general",
                f"{side} {what} dimension {d!r} is out of range for an operand of rank {ndim} "
                "(dimension numbers must be non-negative axes)",
            )
        out.append(int(d))
    return tuple(out)


def _unpack_dnums(lhs, rhs, dimension_numbers):
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise prim_value_error(
            "dot_general",
            f"dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), "
            f"got {dimension_numbers!r}",
        ) from None
    lc, lb = _dims_tuple("lhs", "contracting", lc, lhs.ndim), _dims_tuple("lhs", "batch", lb, lhs.ndim)
    rc, rb = _dims_tuple("rhs", "contracting", rc, rhs.ndim), _dims_tuple("rhs", "batch", rb, rhs.ndim)
    return lc, rc, lb, rb


def _dot_shape(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    lc, rc, lb, rb = _unpack_dnums(lhs, rhs, dimension_numbers)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise prim_value_error("dot_general", f"dimension_numbers {dimension_numbers} pair up unequal numbers of axes")
    for side, dims in (("lhs", lc + lb), ("rhs", rc + rb)):
        if len(set(dims)) != len(dims):
            raise prim_value_error(
                "dot_general", f"{side} contracting and batch dimensions {dims} must be distinct axes",
            )
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


def _kind(d: np.dtype) -> str:
    if d.kind == "c":
        return "complex"
    if dtypes.is_float(d):
        return "floating-point"
    return "integer"


def _bits(d: np.dtype) -> int:
    return 1 if d == np.bool_ else d.itemsize * 8


def _dot_rank(d: np.dtype) -> tuple:
    """How XLA orders element types when a product's operands differ (its ``HigherPrecisionType``): complex
    first, then the wider exponent range, the more mantissa bits, the more bits, signed before unsigned."""
    base = np.dtype(dtypes.finfo(d).dtype) if d.kind == "c" else d
    flt = dtypes.is_float(base)
    info = dtypes.finfo(base) if flt else None
    bits = 1 if base == np.bool_ else dtypes.itemsize_bits(base)
    return (d.kind == "c", info.maxexp if flt else -1, info.nmant if flt else -1, bits, not dtypes.is_unsigned(base))


def dot_result_dtype(lhs: np.dtype, rhs: np.dtype) -> np.dtype | None:
    """The element type of a product of ``lhs`` and ``rhs`` operands with no preferred type (the one of
    higher precision, as XLA and JAX take mixed operands as they are); None when they differ but neither
    ranks higher."""
    if lhs == rhs:
        return lhs
    a, b = _dot_rank(lhs), _dot_rank(rhs)
    if a == b:
        return None
    return lhs if a > b else rhs


def _dot_dtype(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    if lhs.dtype not in ANY or rhs.dtype not in ANY:
        raise prim_type_error("dot_general", [lhs, rhs], "expects numeric or bool operands")
    res = dot_result_dtype(lhs.dtype, rhs.dtype)
    if res is None:
        raise prim_type_error("dot_general", [lhs, rhs], f"argument type error: {lhs.dtype}, {rhs.dtype}")
    pet = preferred_element_type
    if pet is None or pet == res:
        return res
    if not isinstance(pet, np.dtype) or pet not in ANY:
        raise prim_type_error(
            "dot_general", [lhs, rhs], f"preferred_element_type must be a supported dtype, got {pet!r}",
        )
    # Any preferred type is taken (as XLA's MaybeUpcast and JAX), but an integral result must not narrow.
    if not dtypes.is_float(res) and res.kind != "c" and _bits(pet) < _bits(res):
        raise prim_type_error(
            "dot_general", [lhs, rhs],
            f"preferred_element_type {pet} must not be narrower than the operands' result dtype {res}",
        )
    return pet


def _dot_weak(weaks, *, dimension_numbers, precision=None, preferred_element_type=None) -> bool:
    # As JAX: weak when both operands are, whatever the preferred type (jnp's products strip it themselves
    # when the user names a preferred type).
    return all(weaks)


def _dot_compute_dtype(in_dtype: np.dtype, out_dtype: np.dtype) -> np.dtype:
    """The NumPy dtype the product is accumulated in (wider than the result where XLA is)."""
    d = out_dtype
    if d in (dtypes.bfloat16, dtypes.float16):
        return np.dtype(np.float32)
    if d == np.bool_:
        return np.dtype(np.int32)
    return d


_F32, _F16, _F64, _BF16 = (np.dtype(d) for d in (np.float32, np.float16, np.float64, dtypes.bfloat16))
_F8 = tuple(d for d in dtypes.SMALL_FLOATS if d.name.startswith("float8"))
# Dot algorithm presets: (operand storage types, accumulation type, (lhs, rhs, accumulation) types of the
# StableHLO algorithm attribute, its number of primitive operations); None where the preset leaves it open.
_PRESETS: dict[str, tuple] = {
    "F16_F16_F16": ((_F16,), _F16, ("f16", "f16", "f16"), 1),
    "F16_F16_F32": ((_F16,), _F32, ("f16", "f16", "f32"), 1),
    "BF16_BF16_BF16": ((_BF16, _F32), _BF16, ("bf16", "bf16", "bf16"), 1),
    "BF16_BF16_F32": ((_BF16, _F32), _F32, ("bf16", "bf16", "f32"), 1),
    "BF16_BF16_F32_X3": ((_F32,), _F32, ("bf16", "bf16", "f32"), 3),
    "BF16_BF16_F32_X6": ((_F32,), _F32, ("bf16", "bf16", "f32"), 6),
    "BF16_BF16_F32_X9": ((_F32,), _F32, ("bf16", "bf16", "f32"), 9),
    "TF32_TF32_F32": ((_F32,), _F32, ("tf32", "tf32", "f32"), 1),
    "TF32_TF32_F32_X3": ((_F32,), _F32, ("tf32", "tf32", "f32"), 3),
    "F32_F32_F32": ((_F32,), _F32, ("f32", "f32", "f32"), 1),
    "F64_F64_F64": ((_F64,), _F64, ("f64", "f64", "f64"), 1),
}
# XLA's CPU backend ignores an algorithm it cannot run, so (as JAX does) only these presets lower for it.
_CPU_PRESETS = frozenset(("DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
                          "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"))


def is_dot_algorithm(precision) -> bool:
    """Whether a ``dot_general`` precision is a dot algorithm (ftrans's or JAX's) rather than Precisions."""
    return type(precision).__name__ in ("DotAlgorithm", "DotAlgorithmPreset")


def dot_algorithm_types(precision, lhs_dtype: np.dtype, rhs_dtype: np.dtype, out_dtype: np.dtype,
                        platform: str) -> tuple[np.dtype, np.dtype, np.dtype, tuple | None]:
    """The operand and accumulation dtypes a dot algorithm computes in on ``platform``, and the fields of
    its StableHLO attribute (element types as dtypes or MLIR names, counts, imprecise flag; ``None`` for
    the default algorithm), as JAX lowers it."""
    custom = type(precision).__name__ == "DotAlgorithm"
    name = str(precision) if custom else precision.name
    if platform == "cpu" and (custom or name not in _CPU_PRESETS):
        raise FtransValueError(f"The precision '{name}' is not supported by dot_general on CPU (XLA's CPU "
                               f"backend runs only the presets {', '.join(sorted(_CPU_PRESETS))})")
    if custom:  # explicit types (ftrans's tuple or JAX's dataclass)
        fields = tuple(precision) if isinstance(precision, tuple) else (
            precision.lhs_precision_type, precision.rhs_precision_type, precision.accumulation_type,
            precision.lhs_component_count, precision.rhs_component_count,
            precision.num_primitive_operations, precision.allow_imprecise_accumulation)
        lt, rt, at = (np.dtype(t) for t in fields[:3])
        return lt, rt, at, (lt, rt, at, *fields[3:6], bool(fields[6]))
    if name == "DEFAULT":
        return lhs_dtype, rhs_dtype, out_dtype, None
    if name.startswith("ANY_F8_ANY_F8_"):
        if lhs_dtype not in _F8 or rhs_dtype not in _F8:
            raise FtransValueError(f"The dot algorithm '{name}' requires both inputs to have float8 dtypes; "
                                   f"got {lhs_dtype} and {rhs_dtype}")
        f32_outs = (_F32, _F16, _BF16, *(np.dtype(getattr(dtypes, n)) for n in (
            "float8_e4m3fn", "float8_e5m2", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e4m3b11fnuz")))
        acc = out_dtype if "_ANY" in name[len("ANY_F8_ANY_F8"):] or out_dtype in f32_outs else _F32
        return lhs_dtype, rhs_dtype, acc, (lhs_dtype, rhs_dtype, "f32", 1, 1, 1,
                                           name == "ANY_F8_ANY_F8_F32_FAST_ACCUM")
    inputs, acc, (lt, rt, at), ops = _PRESETS[name]
    lhs_c = lhs_dtype if lhs_dtype in inputs else inputs[0]
    rhs_c = rhs_dtype if rhs_dtype in inputs else inputs[0]
    outs = (acc,)
    if name in ("F16_F16_F32", "BF16_BF16_F32"):  # a half-precision result only from half-precision inputs
        half = _F16 if name.startswith("F16") else _BF16
        if lhs_c == rhs_c == half:
            outs = (_F32, half)
    return lhs_c, rhs_c, (out_dtype if out_dtype in outs else outs[0]), (lt, rt, at, 1, 1, ops, False)


def _dot_impl(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    if is_dot_algorithm(precision):  # the operands in the algorithm's storage types, accumulated in its type
        out_dtype = preferred_element_type if preferred_element_type is not None else \
            dot_result_dtype(lhs.dtype, rhs.dtype)
        lt, rt, acc, _ = dot_algorithm_types(precision, lhs.dtype, rhs.dtype, np.dtype(out_dtype), "cpu")
        out = _dot_impl(lhs.astype(lt, copy=False), rhs.astype(rt, copy=False),
                        dimension_numbers=dimension_numbers, preferred_element_type=np.dtype(acc))
        return out.astype(out_dtype, copy=False)
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = tuple(lc), tuple(rc), tuple(lb), tuple(rb)
    if lhs.dtype != rhs.dtype and not (lhs.dtype in dtypes.SMALL_FLOATS and rhs.dtype in dtypes.SMALL_FLOATS):
        # Mixed operands go through the result type first, as the compiled lowering converts them.
        via = preferred_element_type if preferred_element_type is not None else \
            dot_result_dtype(lhs.dtype, rhs.dtype)
        if via != np.bool_:
            lhs, rhs = lhs.astype(via, copy=False), rhs.astype(via, copy=False)
    out_dtype = preferred_element_type if preferred_element_type is not None else \
        dot_result_dtype(lhs.dtype, rhs.dtype)
    lfree = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rfree = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    # Bring both to (batch, free, contract) / (batch, contract, free) and matmul.
    lt = np.transpose(lhs, (*lb, *lfree, *lc))
    rt = np.transpose(rhs, (*rb, *rc, *rfree))
    bshape = tuple(lhs.shape[a] for a in lb)
    lf = tuple(lhs.shape[a] for a in lfree)
    rf = tuple(rhs.shape[a] for a in rfree)
    k = math.prod(lhs.shape[a] for a in lc)
    compute = _dot_compute_dtype(lhs.dtype, out_dtype)  # mixed operands: both in it, as XLA on CPU/GPU
    lm = lt.reshape(*bshape, math.prod(lf), k).astype(compute, copy=False)
    rm = rt.reshape(*bshape, k, math.prod(rf)).astype(compute, copy=False)
    with np.errstate(all="ignore"):
        out = np.matmul(lm, rm)
    out = out.reshape(bshape + lf + rf)
    if out_dtype == np.bool_:
        out = out != 0
    return out.astype(out_dtype, copy=False)


dot_general_p = standard_primitive(
    "dot_general", _dot_shape, _dot_dtype, _dot_impl, weak_type_rule=_dot_weak,
)

__all__ = [n for n in dir() if n.endswith("_p")]


# ---------------------------------------------------------------- reduce with a user computation
#
# ``reduce``  ``(*operands, *init_values)`` with ``jaxpr`` (a ClosedJaxpr over 2n scalars -- n accumulators,
# then n elements -- returning n scalars) and ``dimensions`` (distinct, non-negative).  JAX's ``reduce_p``:
# what ``lax.reduce`` binds when its computation is not a monoid it knows (``add``, ``max``, ...).

from ftrans.core.avals import ShapedArray  # noqa: E402
from ftrans.core.primitive import Primitive  # noqa: E402

reduce_p = Primitive("reduce", multiple_results=True, higher_order=True)


def _reduce_check(avals: tuple, jaxpr, dimensions) -> tuple[list, list, tuple]:
    n = len(avals) // 2
    if n == 0 or len(avals) != 2 * n:
        raise prim_type_error("reduce", list(avals), "takes n operands followed by n init values (n >= 1)")
    ops, inits = list(avals[:n]), list(avals[n:])
    shape = ops[0].shape
    for o in ops:
        if o.shape != shape:
            raise prim_type_error("reduce", ops, "operands must all have the same shape")
    for o, i in zip(ops, inits):
        if i.shape != () or i.dtype != o.dtype:
            raise prim_type_error("reduce", [o, i], "each init value must be a scalar of its operand's dtype")
    dims = strict_axes("reduce", dimensions, len(shape))
    want = [ShapedArray((), a.dtype, False) for a in ops]
    ins, outs = jaxpr.in_avals, jaxpr.out_avals
    if (len(ins) != 2 * n or len(outs) != n
            or any(a.shape != () or a.dtype != w.dtype for a, w in zip(ins, want + want))
            or any(a.shape != () or a.dtype != w.dtype for a, w in zip(outs, want))):
        sig = ", ".join(a.str_short() for a in ins) + " -> " + ", ".join(a.str_short() for a in outs)
        raise prim_type_error(
            "reduce", list(avals),
            f"the computation must map {2 * n} scalars (accumulators, then elements) of the operands' dtypes "
            f"to {n}, but it is ({sig})",
        )
    return ops, inits, dims


@reduce_p.def_abstract_eval
def _reduce_abstract_eval(*avals, jaxpr, dimensions):
    ops, inits, dims = _reduce_check(avals, jaxpr, dimensions)
    shape = tuple(s for i, s in enumerate(ops[0].shape) if i not in dims)
    return [ShapedArray(shape, o.dtype, o.weak_type and i.weak_type) for o, i in zip(ops, inits)]


@reduce_p.def_weak_type
def _reduce_weak(weaks: tuple, *, jaxpr, dimensions) -> tuple:
    n = len(weaks) // 2
    return tuple(a and b for a, b in zip(weaks[:n], weaks[n:]))


_ELEMENTWISE: set = set()


def _elementwise_body(jaxpr) -> bool:
    """Whether every equation of ``jaxpr`` is elementwise, so it can run on whole arrays at once."""
    if not _ELEMENTWISE:
        from ftrans.core.prims import elementwise as E
        from ftrans.core.prims import structural as S

        _ELEMENTWISE.update(v for v in vars(E).values() if isinstance(v, Primitive))
        _ELEMENTWISE.update((S.select_n_p, S.convert_element_type_p, S.clamp_p))
    return all(e.primitive in _ELEMENTWISE for e in jaxpr.jaxpr.eqns)


@reduce_p.def_impl
def _reduce_impl(*vals, jaxpr, dimensions):
    """A fold from the init values over the reduced elements: vectorised over the kept positions when the
    computation is elementwise, element by element otherwise."""
    from ftrans.core.array import Array
    from ftrans.core.jaxpr_api import eval_jaxpr

    n = len(vals) // 2
    ops = [np.asarray(v) for v in vals[:n]]
    inits = [np.asarray(v) for v in vals[n:]]
    dims = tuple(sorted(int(d) for d in dimensions))
    keep = [d for d in range(ops[0].ndim) if d not in dims]
    out_shape = tuple(ops[0].shape[d] for d in keep)
    k = math.prod(ops[0].shape[d] for d in dims)
    flat = [np.transpose(o, dims + tuple(keep)).reshape((k,) + out_shape) for o in ops]
    run = lambda *a: eval_jaxpr(jaxpr.jaxpr, list(jaxpr.consts), *a)  # noqa: E731

    def wrap(x):
        return Array._new(np.asarray(x), False)

    if _elementwise_body(jaxpr):
        acc = [np.broadcast_to(i, out_shape).copy() for i in inits]
        for j in range(k):
            res = run(*[wrap(a) for a in acc], *[wrap(f[j]) for f in flat])
            acc = [np.broadcast_to(np.asarray(r, o.dtype), out_shape) for r, o in zip(res, ops)]
        return [np.array(a, dtype=o.dtype) for a, o in zip(acc, ops)]
    outs = [np.empty(out_shape, o.dtype) for o in ops]
    for idx in np.ndindex(*out_shape):
        acc = [wrap(i) for i in inits]
        for j in range(k):
            acc = run(*acc, *[wrap(f[(j,) + idx]) for f in flat])
        for o, a in zip(outs, acc):
            o[idx] = np.asarray(a)
    return outs


# ----------------------------------------------------------------------------
# Sharding rules (values with sharding types over Explicit mesh axes: core/sharding_rules.py)

from ftrans.core import sharding_rules as _sr  # noqa: E402

for _p in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p, reduce_xor_p,
           argmax_p, argmin_p):
    _p.sharding_rule = _sr.reduce_axes
reduce_sum_p.sharding_rule = _sr.reduce_sum
dot_general_p.sharding_rule = _sr.dot_general
del _p
_sr.typed_by_api.add(dot_general_p)


# ---------------------------------------------------------------- printing
from ftrans.core.ir import pp_params_rules as _pp_params_rules  # noqa: E402


def _dot_general_printed(params: dict) -> list:
    """As JAX prints a ``dot_general``: its dimension numbers as lists, without the parameters that are
    None (``precision``, ``preferred_element_type``) nor ``out_sharding`` (the result's type shows it)."""
    out = {k: v for k, v in params.items() if v is not None and k != "out_sharding"}
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    out["dimension_numbers"] = ((list(lc), list(rc)), (list(lb), list(rb)))
    return sorted(out.items())


_pp_params_rules[dot_general_p] = _dot_general_printed
