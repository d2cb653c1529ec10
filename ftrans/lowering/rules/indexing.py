"""Lowering of ``gather`` and the ``scatter`` family to ``stablehlo.gather`` / ``stablehlo.scatter``.

The primitives follow JAX's ``lax``: the index vector is always the *last*
dimension of ``indices``, so ``index_vector_dim`` is ``indices.ndim - 1``.
Out-of-bounds handling is where the primitives and XLA differ, and is done here:

* gather, ``CLIP`` / ``PROMISE_IN_BOUNDS``: XLA's gather clamps start indices
  natively, which is exactly the clip semantics;
* gather, ``FILL_OR_DROP``: an in-bounds mask is computed from the start
  indices (``0 <= i <= dim - slice_size`` for every component, reduced over
  the index vector) and ``select`` puts ``fill_value`` into whole windows
  whose start is out of bounds;
* scatter, ``FILL_OR_DROP`` / ``PROMISE_IN_BOUNDS``: XLA's scatter already
  skips update windows that are not fully in bounds;
* scatter, ``CLIP``: the indices are clamped to ``[0, dim - window_size]``
  before the scatter.

Indices are first widened to a signed type wide enough for the bound
arithmetic (the NumPy rule does all index arithmetic in int64), so narrow or
unsigned index dtypes can neither overflow nor wrap around in the comparisons.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.gather import default_fill_value
from ftrans.core.prims import indexing as I
from ftrans.core.shape_poly import DimExpr
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MAX = int(np.iinfo(np.int64).max)


def _dims(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _struct(kind: str, fields: list[tuple[str, Sequence[int]]], index_vector_dim: int) -> str:
    """A ``#stablehlo.gather<...>`` / ``#stablehlo.scatter<...>`` attribute.

    Empty dimension lists are left out, as StableHLO's own printer does, so the
    text parses on every jaxlib (older parsers reject some empty fields).
    """
    parts = [f"{name} = {_dims(v)}" for name, v in fields if len(v)]
    parts.append(f"index_vector_dim = {int(index_vector_dim)}")
    return f"#stablehlo.{kind}<{', '.join(parts)}>"


# ---------------------------------------------------------------- indices
def _index_dtype(idx_dtype: np.dtype, operand_shape: Sequence[int]) -> np.dtype:
    """The signed dtype the lowering computes indices in.

    int32 suffices when every index value and every bound fits in it; uint32,
    uint64 and int64 indices (or huge operands) use int64.
    """
    idx_dtype = np.dtype(idx_dtype)
    small = idx_dtype.itemsize < 4 or idx_dtype == np.dtype(np.int32)
    static = [d for d in operand_shape if not isinstance(d, DimExpr)]  # a symbolic size is taken to fit int32
    if small and max(static, default=0) <= _INT32_MAX:
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def _prepare_indices(ctx: LoweringContext, indices: str, aval: ShapedArray,
                     operand_shape: Sequence[int]) -> tuple[str, ShapedArray]:
    """``indices`` converted to the signed working dtype (uint64 saturates rather than wraps)."""
    target = _index_dtype(aval.dtype, operand_shape)
    if aval.dtype == target:
        return indices, aval
    if aval.dtype == np.dtype(np.uint64):
        # Values past int64's range would turn negative (in bounds after
        # clamping, or a different drop decision); saturate them first.
        cap = ctx.broadcast(ctx.scalar(_INT64_MAX, np.uint64), aval.update(shape=()), aval.shape)
        indices = ctx.emit1("stablehlo.minimum", [indices, cap], mt.aval_type(aval))
    out = ctx.convert(indices, aval, target)
    return out, ShapedArray(aval.shape, target, False)


def _upper_bounds(ctx: LoweringContext, aval: ShapedArray, uppers: Sequence[int]) -> str:
    """The per-component largest valid start index, broadcast to the indices' shape."""
    if any(isinstance(u, DimExpr) for u in uppers):  # symbolic sizes: computed when the program runs
        vec = ctx.fn.shape_tensor(uppers)
        if aval.dtype != np.dtype(np.int32):
            vec = ctx.convert(vec, ShapedArray((len(uppers),), np.dtype(np.int32), False), aval.dtype)
    else:
        vec = ctx.constant(np.asarray(uppers, dtype=aval.dtype))
    return ctx.broadcast(vec, ShapedArray((len(uppers),), aval.dtype, False), aval.shape,
                         dims=(aval.ndim - 1,))


def _compare(ctx: LoweringContext, a: str, b: str, shape: Sequence[int], direction: str) -> str:
    return ctx.emit1("stablehlo.compare", [a, b], mt.tensor_type(shape, dtypes.bool_), {
        "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
        "compare_type": "#stablehlo<comparison_type SIGNED>",
    })


def _in_bounds(ctx: LoweringContext, indices: str, aval: ShapedArray, uppers: Sequence[int]) -> str:
    """Which index vectors put their whole window in bounds: a bool array of the batch shape."""
    zero = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), aval.shape)
    upper = _upper_bounds(ctx, aval, uppers)
    ge = _compare(ctx, indices, zero, aval.shape, "GE")
    le = _compare(ctx, indices, upper, aval.shape, "LE")
    both = ctx.emit1("stablehlo.and", [ge, le], mt.tensor_type(aval.shape, dtypes.bool_))
    init = ctx.scalar(True, dtypes.bool_)
    return ctx.emit1(
        "stablehlo.reduce", [both, init], mt.tensor_type(aval.shape[:-1], dtypes.bool_),
        {"dimensions": mt.i64_array([aval.ndim - 1])},
        [ctx.reduce_region("stablehlo.and", dtypes.bool_)],
    )


# ---------------------------------------------------------------- gather
@register_lowering(I.gather_p)
def _gather(ctx: LoweringContext, operand: str, indices: str, *, dimension_numbers, slice_sizes, mode,
            fill_value, indices_are_sorted, unique_indices):
    op_aval, idx_aval = ctx.avals_in
    out_aval = ctx.avals_out[0]
    dn = dimension_numbers
    if 0 in out_aval.shape:
        # Nothing to gather. (A batching dimension of size 0 would also make its slice size of 1
        # invalid StableHLO.) The empty result is a constant.
        return ctx.broadcast(ctx.scalar(0, out_aval.dtype), out_aval.update(shape=()), out_aval.shape)
    indices, idx_aval = _prepare_indices(ctx, indices, idx_aval, op_aval.shape)
    attr = _struct("gather", [
        ("offset_dims", dn.offset_dims),
        ("collapsed_slice_dims", dn.collapsed_slice_dims),
        ("operand_batching_dims", dn.operand_batching_dims),
        ("start_indices_batching_dims", dn.start_indices_batching_dims),
        ("start_index_map", dn.start_index_map),
    ], idx_aval.ndim - 1)
    if any(isinstance(s, DimExpr) for s in slice_sizes):  # symbolic slice sizes: an operand (JAX's too)
        out = ctx.emit1("stablehlo.dynamic_gather", [operand, indices, ctx.fn.shape_tensor(slice_sizes)], attrs={
            "dimension_numbers": attr,
            "indices_are_sorted": mt.bool_attr(bool(indices_are_sorted)),
        })
    else:
        out = ctx.emit1("stablehlo.gather", [operand, indices], attrs={
            "dimension_numbers": attr,
            "slice_sizes": mt.i64_array(slice_sizes),
            "indices_are_sorted": mt.bool_attr(bool(indices_are_sorted)),
        })
    if mode is not I.GatherScatterMode.FILL_OR_DROP or not dn.start_index_map:
        return out
    return _fill_out_of_bounds(ctx, out, out_aval, indices, idx_aval, dn, slice_sizes, fill_value)


def _fill_out_of_bounds(ctx: LoweringContext, out: str, out_aval: ShapedArray, indices: str,
                        idx_aval: ShapedArray, dn, slice_sizes, fill_value) -> str:
    """Replace whole output windows whose start index is out of bounds by ``fill_value``."""
    uppers = [ctx.avals_in[0].shape[d] - slice_sizes[d] for d in dn.start_index_map]
    mask = _in_bounds(ctx, indices, idx_aval, uppers)
    offset = set(dn.offset_dims)
    batch_positions = [p for p in range(out_aval.ndim) if p not in offset]
    mask = ctx.broadcast(mask, ShapedArray(idx_aval.shape[:-1], dtypes.bool_, False), out_aval.shape,
                         dims=batch_positions)
    if fill_value is None:
        fill_value = default_fill_value(out_aval.dtype)
    with np.errstate(all="ignore"):
        fill = np.asarray(fill_value).astype(out_aval.dtype)
    fill_b = ctx.broadcast(ctx.fn.constant(fill), out_aval.update(shape=()), out_aval.shape)
    return ctx.emit1("stablehlo.select", [mask, out, fill_b])


# ---------------------------------------------------------------- scatter family
def _combiner(kind: str, dtype: np.dtype):
    """The update computation's body: how an update combines with the current value."""
    t = mt.tensor_type((), dtype)
    op = {"add": "stablehlo.add", "sub": "stablehlo.subtract", "mul": "stablehlo.multiply",
          "min": "stablehlo.minimum", "max": "stablehlo.maximum"}.get(kind)

    def body(f: mt.FuncEmitter, args: list[str]) -> list[str]:
        if op is None:  # plain scatter: the update replaces the current value
            return [args[1]]
        if kind in ("min", "max") and np.dtype(dtype).kind == "c":
            return [_complex_minmax(f, kind, dtype, *args)]
        return f.emit(op, args, [t])

    return body


def _complex_minmax(f: mt.FuncEmitter, kind: str, dtype: np.dtype, a: str, b: str) -> str:
    """Lexicographic (real, then imaginary) min/max of complex scalars, as NumPy and jax order them.

    XLA's own ``minimum``/``maximum`` on complex values does not use this
    order, so the comparison is spelled out.
    """
    part = np.dtype(np.float32 if np.dtype(dtype) == np.complex64 else np.float64)
    pt, bt, ct = mt.tensor_type((), part), mt.tensor_type((), dtypes.bool_), mt.tensor_type((), dtype)
    direction = "LT" if kind == "min" else "GT"

    def cmp(x: str, y: str, d: str) -> str:
        return f.emit("stablehlo.compare", [x, y], [bt], {
            "comparison_direction": f"#stablehlo<comparison_direction {d}>",
            "compare_type": "#stablehlo<comparison_type FLOAT>",
        })[0]

    ra, rb = (f.emit("stablehlo.real", [v], [pt])[0] for v in (a, b))
    ia, ib = (f.emit("stablehlo.imag", [v], [pt])[0] for v in (a, b))
    pick_a = f.emit("stablehlo.select", [cmp(ra, rb, "EQ"), cmp(ia, ib, direction), cmp(ra, rb, direction)],
                    [bt])[0]
    return f.emit("stablehlo.select", [pick_a, a, b], [ct])[0]


def _scatter_window_uppers(operand_shape: Sequence[int], updates_shape: Sequence[int], dn) -> list[int]:
    """``dim - window_size`` for each operand dim an index vector component addresses."""
    skipped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(operand_shape)) if d not in skipped]
    size_of = {d: updates_shape[u] for d, u in zip(window_dims, dn.update_window_dims)}
    return [operand_shape[d] - size_of.get(d, 1) for d in dn.scatter_dims_to_operand_dims]


def _clamp(ctx: LoweringContext, indices: str, aval: ShapedArray, uppers: Sequence[int]) -> str:
    zero = ctx.broadcast(ctx.scalar(0, aval.dtype), aval.update(shape=()), aval.shape)
    upper = _upper_bounds(ctx, aval, uppers)
    return ctx.emit1("stablehlo.clamp", [zero, indices, upper], mt.aval_type(aval))


def _register_scatter(prim, kind: str) -> None:
    def rule(ctx: LoweringContext, operand: str, indices: str, updates: str, *, dimension_numbers, mode,
             indices_are_sorted, unique_indices, update_jaxpr=None):
        op_aval, idx_aval, upd_aval = ctx.avals_in
        dn = dimension_numbers
        if 0 in upd_aval.shape or 0 in op_aval.shape:
            return operand  # no update to apply (and an empty batching dimension would be invalid StableHLO)
        indices, idx_aval = _prepare_indices(ctx, indices, idx_aval, op_aval.shape)
        clip = mode is I.GatherScatterMode.CLIP
        if clip and dn.scatter_dims_to_operand_dims:
            uppers = _scatter_window_uppers(op_aval.shape, upd_aval.shape, dn)
            indices = _clamp(ctx, indices, idx_aval, uppers)
        attr = _struct("scatter", [
            ("update_window_dims", dn.update_window_dims),
            ("inserted_window_dims", dn.inserted_window_dims),
            ("input_batching_dims", dn.operand_batching_dims),
            ("scatter_indices_batching_dims", dn.scatter_indices_batching_dims),
            ("scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims),
        ], idx_aval.ndim - 1)
        t = mt.tensor_type((), op_aval.dtype)
        region = ctx.fn.region([t, t], _combiner(kind, op_aval.dtype))
        # Clamping can map distinct indices to one position, so a promise of
        # unique indices only survives in the other modes.
        unique = bool(unique_indices) and not clip
        return ctx.emit1("stablehlo.scatter", [operand, indices, updates], attrs={
            "scatter_dimension_numbers": attr,
            "indices_are_sorted": mt.bool_attr(bool(indices_are_sorted)),
            "unique_indices": mt.bool_attr(unique),
        }, regions=[region])

    rule.__name__ = f"_lower_{prim.name}"
    register_lowering(prim)(rule)


for _prim, _kind in [(I.scatter_p, "set"), (I.scatter_add_p, "add"), (I.scatter_sub_p, "sub"), (I.scatter_mul_p, "mul"),
                     (I.scatter_min_p, "min"), (I.scatter_max_p, "max")]:
    _register_scatter(_prim, _kind)
