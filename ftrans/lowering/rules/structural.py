"""Lowering of the structural primitives: dtype changes, selection, shapes, slicing, iota.

Most map one-to-one onto a StableHLO op.  The exceptions follow the NumPy impl
rules (which were written to match XLA): conversions to ``bool`` compare with
zero instead of truncating bits, complex-to-real conversions keep the real part,
``select_n`` with an integer selector becomes a binary tree of selects (so an
out-of-range selector clamps to the first or last case, as ``np.choose(...,
mode="clip")`` does), and dynamic-slice start indices share one index type.
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import is_poly_shape
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering


def _compare(ctx: LoweringContext, x: str, y: str, aval: ShapedArray, direction: str) -> str:
    """``x <direction> y`` elementwise, both of ``aval``'s type; a bool tensor of its shape."""
    return ctx.compare(x, y, direction, aval.dtype, aval.shape)


def _full(ctx: LoweringContext, value, aval: ShapedArray) -> str:
    """A constant ``value`` broadcast to ``aval``."""
    return ctx.broadcast(ctx.scalar(value, aval.dtype), aval.update(shape=()), aval.shape)


# ---------------------------------------------------------------- dtype changes
@register_lowering(S.convert_element_type_p)
def _convert_element_type(ctx: LoweringContext, x, *, new_dtype, weak_type):
    a = ctx.avals_in[0]
    new_dtype = np.dtype(new_dtype)
    if np.dtype(a.dtype) == new_dtype:
        return x
    if a.dtype.kind == "c" and new_dtype.kind != "c":
        # Complex to real keeps the real part (XLA's convert would reject complex -> real).
        part = dtypes.float64 if a.dtype == dtypes.complex128 else dtypes.float32
        a = a.update(dtype=np.dtype(part))
        x = ctx.emit1("stablehlo.real", [x], mt.aval_type(a))
        if a.dtype == new_dtype:
            return x
    if new_dtype == dtypes.bool_:
        # ``x != 0``: a plain convert would keep the low bit of integers, not their truthiness.
        return _compare(ctx, x, _full(ctx, 0, a), a, "NE")
    # XLA's convert saturates float -> int and maps NaN to 0, as the impl rule does.
    return ctx.emit1("stablehlo.convert", [x])


@register_lowering(S.to_edtype_p)
def _to_edtype(ctx: LoweringContext, x, *, edtype):
    return x  # an extended-dtype array is its representation array (mlir_text.aval_type)


@register_lowering(S.from_edtype_p)
def _from_edtype(ctx: LoweringContext, x, *, dtype):
    return x


@register_lowering(S.bitcast_convert_type_p)
def _bitcast_convert_type(ctx: LoweringContext, x, *, new_dtype):
    # StableHLO's bitcast_convert adds/removes the trailing axis of a width change itself.
    if np.dtype(ctx.avals_in[0].dtype) == np.dtype(new_dtype):
        return x
    return ctx.emit1("stablehlo.bitcast_convert", [x])


# ---------------------------------------------------------------- select / clamp
@register_lowering(S.select_n_p)
def _select_n(ctx: LoweringContext, which, *cases):
    wa = ctx.avals_in[0]
    out = ctx.avals_out[0]
    if len(cases) == 1:
        return cases[0]
    if wa.dtype == dtypes.bool_:
        return ctx.emit1("stablehlo.select", [which, cases[1], cases[0]])
    # An integer selector: bisect the cases with ``which < mid`` so out-of-range values clamp.
    wa_full = wa.update(shape=out.shape)
    which = ctx.broadcast(which, wa, out.shape)

    def tree(lo: int, hi: int) -> str:
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        pred = _compare(ctx, which, _full(ctx, mid, wa_full), wa_full, "LT")
        return ctx.emit1("stablehlo.select", [pred, tree(lo, mid), tree(mid, hi)])

    return tree(0, len(cases))


@register_lowering(S.clamp_p)
def _clamp(ctx: LoweringContext, lo, x, hi):
    la, xa, ha = ctx.avals_in
    if xa.dtype.kind == "c":
        return _clamp_complex(ctx, ctx.broadcast(lo, la, xa.shape), x, ctx.broadcast(hi, ha, xa.shape), xa)
    return ctx.emit1("stablehlo.clamp", [lo, x, hi])


def _lex_less(ctx: LoweringContext, a: str, b: str, aval: ShapedArray) -> str:
    """``a < b`` for complex values in NumPy's lexicographic (real, then imaginary) order."""
    part = aval.update(dtype=np.dtype(dtypes.float64 if aval.dtype == dtypes.complex128 else dtypes.float32))
    ra, ia = (ctx.emit1(op, [a], mt.aval_type(part)) for op in ("stablehlo.real", "stablehlo.imag"))
    rb, ib = (ctx.emit1(op, [b], mt.aval_type(part)) for op in ("stablehlo.real", "stablehlo.imag"))
    real_lt = _compare(ctx, ra, rb, part, "LT")
    real_eq = _compare(ctx, ra, rb, part, "EQ")
    imag_lt = _compare(ctx, ia, ib, part, "LT")
    bool_t = mt.tensor_type(aval.shape, dtypes.bool_)
    tie = ctx.emit1("stablehlo.and", [real_eq, imag_lt], bool_t)
    return ctx.emit1("stablehlo.or", [real_lt, tie], bool_t)


def _clamp_complex(ctx: LoweringContext, lo: str, x: str, hi: str, aval: ShapedArray) -> str:
    """``minimum(maximum(x, lo), hi)`` in NumPy's order for complex numbers.

    XLA's clamp orders complex values differently from NumPy's ``maximum`` /
    ``minimum``, which define the impl rule (and so eager results).
    """
    m = ctx.emit1("stablehlo.select", [_lex_less(ctx, x, lo, aval), lo, x])
    return ctx.emit1("stablehlo.select", [_lex_less(ctx, hi, m, aval), hi, m])


# ---------------------------------------------------------------- shapes
@register_lowering(S.broadcast_in_dim_p)
def _broadcast_in_dim(ctx: LoweringContext, x, *, shape, broadcast_dimensions):
    return ctx.emit1("stablehlo.broadcast_in_dim", [x],
                     attrs={"broadcast_dimensions": mt.i64_array(broadcast_dimensions)})


def _reshape_to_out(ctx: LoweringContext, x: str) -> str:
    if tuple(ctx.avals_in[0].shape) == tuple(ctx.avals_out[0].shape):
        return x
    return ctx.emit1("stablehlo.reshape", [x])


@register_lowering(S.reshape_p)
def _reshape(ctx: LoweringContext, x, *, new_sizes, dimensions):
    a = ctx.avals_in[0]
    if dimensions is not None and tuple(dimensions) != tuple(range(a.ndim)):
        shape = tuple(a.shape[d] for d in dimensions)
        x = ctx.emit1("stablehlo.transpose", [x], mt.tensor_type(shape, a.dtype),
                      {"permutation": mt.i64_array(dimensions)})
        return ctx.emit1("stablehlo.reshape", [x])
    return _reshape_to_out(ctx, x)


@register_lowering(S.transpose_p)
def _transpose(ctx: LoweringContext, x, *, permutation):
    if tuple(permutation) == tuple(range(len(permutation))):
        return x
    return ctx.emit1("stablehlo.transpose", [x], attrs={"permutation": mt.i64_array(permutation)})


@register_lowering(S.squeeze_p)
def _squeeze(ctx: LoweringContext, x, *, dimensions):
    return _reshape_to_out(ctx, x)


@register_lowering(S.expand_dims_p)
def _expand_dims(ctx: LoweringContext, x, *, dimensions):
    return _reshape_to_out(ctx, x)


@register_lowering(S.rev_p)
def _rev(ctx: LoweringContext, x, *, dimensions):
    nd = ctx.avals_in[0].ndim
    dims = sorted({int(d) % nd for d in dimensions}) if nd else []
    if not dims:
        return x
    return ctx.emit1("stablehlo.reverse", [x], attrs={"dimensions": mt.i64_array(dims)})


@register_lowering(S.pad_p)
def _pad(ctx: LoweringContext, x, padval, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    if is_poly_shape(lo) or is_poly_shape(hi) or is_poly_shape(interior):  # symbolic: operands (as JAX's)
        f = ctx.fn
        return ctx.emit1("stablehlo.dynamic_pad", [x, padval, f.shape_tensor(lo), f.shape_tensor(hi),
                                                   f.shape_tensor(interior)])
    return ctx.emit1("stablehlo.pad", [x, padval], attrs={
        "edge_padding_low": mt.i64_array(lo),
        "edge_padding_high": mt.i64_array(hi),
        "interior_padding": mt.i64_array(interior),
    })


@register_lowering(S.concatenate_p)
def _concatenate(ctx: LoweringContext, *xs, dimension):
    if len(xs) == 1:
        return xs[0]
    return ctx.emit1("stablehlo.concatenate", list(xs), attrs={"dimension": f"{int(dimension)} : i64"})


@register_lowering(S.split_p)
def _split(ctx: LoweringContext, x, *, sizes, axis):
    """One ``stablehlo.slice`` per piece (as JAX lowers ``split``)."""
    a = ctx.avals_in[0]
    outs, start = [], 0
    for s, out_aval in zip(sizes, ctx.avals_out):
        starts, limits = [0] * a.ndim, list(a.shape)
        starts[axis], limits[axis] = start, start + int(s)
        outs.append(ctx.emit1("stablehlo.slice", [x], mt.aval_type(out_aval), attrs={
            "start_indices": mt.i64_array(starts),
            "limit_indices": mt.i64_array(limits),
            "strides": mt.i64_array([1] * a.ndim),
        }))
        start += int(s)
    return outs


# ---------------------------------------------------------------- slicing
@register_lowering(S.slice_p)
def _slice(ctx: LoweringContext, x, *, start_indices, limit_indices, strides):
    st = strides if strides is not None else (1,) * len(start_indices)
    if is_poly_shape(start_indices) or is_poly_shape(limit_indices) or is_poly_shape(st):  # computed at run time
        f = ctx.fn
        return ctx.emit1("stablehlo.real_dynamic_slice", [x, f.shape_tensor(start_indices),
                                                          f.shape_tensor(limit_indices), f.shape_tensor(st)])
    # A stride past the slice's extent picks only its first element; capping it keeps
    # huge Python strides (``x[::2**63]``) inside StableHLO's i64 without changing the result.
    st = [min(int(k), max(int(e) - int(s), 1)) for s, e, k in zip(start_indices, limit_indices, st)]
    return ctx.emit1("stablehlo.slice", [x], attrs={
        "start_indices": mt.i64_array(start_indices),
        "limit_indices": mt.i64_array(limit_indices),
        "strides": mt.i64_array(st),
    })


def _start_indices(ctx: LoweringContext, idx, avals) -> list[str]:
    """The start indices in one index type, as StableHLO requires.

    Mixed types all widen to i64, which holds every value of the narrower ones
    (so clamping, done by the op, sees the true value); a uint64 index is first
    limited to int64's range, where any value already clamps to the end.
    """
    kinds = {np.dtype(a.dtype) for a in avals}
    if len(kinds) <= 1:
        return list(idx)
    out = []
    for i, a in zip(idx, avals):
        if a.dtype == dtypes.uint64:
            i = ctx.emit1("stablehlo.minimum", [i, ctx.scalar(np.iinfo(np.int64).max, a.dtype)],
                          mt.aval_type(a))
        out.append(ctx.convert(i, a, np.dtype(np.int64)))
    return out


@register_lowering(S.dynamic_slice_p)
def _dynamic_slice(ctx: LoweringContext, x, *idx, slice_sizes):
    # stablehlo.dynamic_slice clamps the starts into [0, size - slice_size], like the impl.
    if is_poly_shape(slice_sizes):  # symbolic sizes: the starts clamped here, then a slice of run-time bounds
        return _dynamic_slice_symbolic(ctx, x, idx, slice_sizes)
    starts = _start_indices(ctx, idx, ctx.avals_in[1:])
    return ctx.emit1("stablehlo.dynamic_slice", [x, *starts],
                     attrs={"slice_sizes": mt.i64_array(slice_sizes)})


def _dynamic_slice_symbolic(ctx: LoweringContext, x, idx, slice_sizes):
    f = ctx.fn
    i32 = np.dtype(np.int32)
    shape = ctx.avals_in[0].shape
    zero = ctx.scalar(0, i32)
    parts = []
    for k, (i, a) in enumerate(zip(idx, ctx.avals_in[1:])):
        v = i if a.dtype == i32 else ctx.convert(i, a, i32)
        v = ctx.emit1("stablehlo.clamp", [zero, v, f.dim_value(shape[k] - slice_sizes[k])], "tensor<i32>")
        parts.append(ctx.emit1("stablehlo.reshape", [v], "tensor<1xi32>"))
    n = len(parts)
    starts = parts[0] if n == 1 else ctx.emit1("stablehlo.concatenate", parts, f"tensor<{n}xi32>",
                                               attrs={"dimension": "0 : i64"})
    limits = ctx.emit1("stablehlo.add", [starts, f.shape_tensor(slice_sizes)], f"tensor<{n}xi32>")
    return ctx.emit1("stablehlo.real_dynamic_slice", [x, starts, limits, f.shape_tensor((1,) * n)])


@register_lowering(S.dynamic_update_slice_p)
def _dynamic_update_slice(ctx: LoweringContext, x, update, *idx):
    starts = _start_indices(ctx, idx, ctx.avals_in[2:])
    return ctx.emit1("stablehlo.dynamic_update_slice", [x, update, *starts])


# ---------------------------------------------------------------- iota
@register_lowering(S.iota_p)
def _iota(ctx: LoweringContext, *, dtype, shape, dimension):
    return ctx.emit1("stablehlo.iota", [], attrs={"iota_dimension": f"{int(dimension)} : i64"})


@register_lowering(S.dim_as_value_p)
def _dim_as_value(ctx: LoweringContext, *, dim):
    v = ctx.fn.dim_value(dim)  # an i32 scalar
    return ctx.convert(v, ShapedArray((), np.dtype(np.int32)), ctx.avals_out[0].dtype)


# ---------------------------------------------------------------- rng_bit_generator
_U64 = np.dtype(np.uint64)


@register_lowering(S.rng_bit_generator_p)
def _rng_bit_generator(ctx: LoweringContext, key, *, shape, dtype, algorithm):
    """The uint32[4] key as XLA's uint64[2] state, one ``stablehlo.rng_bit_generator``, and back."""
    u32 = np.dtype(np.uint32)
    pair = ctx.emit1("stablehlo.reshape", [key], mt.tensor_type((2, 2), u32))
    state = ctx.emit1("stablehlo.bitcast_convert", [pair], mt.tensor_type((2,), _U64))
    name = {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}[int(algorithm)]
    alg = f"#stablehlo<rng_algorithm {name}>"
    types = [mt.tensor_type((2,), _U64), mt.aval_type(ctx.avals_out[1])]
    if is_poly_shape(shape):  # JAX's dynamic form: the shape as an operand, made static by shape refinement at a call
        new_state, bits = ctx.emit("stablehlo.custom_call", [state, ctx.fn.shape_tensor(shape)], types, {
            "api_version": "2 : i32", "call_target_name": '"stablehlo.dynamic_rng_bit_generator"',
            "rng_algorithm": alg})
    else:
        new_state, bits = ctx.emit("stablehlo.rng_bit_generator", [state], types, {"rng_algorithm": alg})
    back = ctx.emit1("stablehlo.bitcast_convert", [new_state], mt.tensor_type((2, 2), u32))
    return [ctx.emit1("stablehlo.reshape", [back], mt.tensor_type((4,), u32)), bits]


_rng_programs: dict = {}


@S.rng_bit_generator_p.def_impl
def _rng_bit_generator_impl(key, *, shape, dtype, algorithm):
    """Eagerly: the one op, compiled (its bits are XLA's, so they cannot come from NumPy)."""
    from ftrans.core.trace import stage
    from ftrans.devices import default_device
    from ftrans.lowering import executable as X
    from ftrans.lowering.rules.calls import _executable_for_jaxpr

    params = dict(shape=tuple(int(d) for d in shape), dtype=np.dtype(dtype), algorithm=int(algorithm))
    k = (params["shape"], params["dtype"], params["algorithm"])
    closed = _rng_programs.get(k)
    if closed is None:
        closed, _ = stage(lambda key: list(S.rng_bit_generator_p.bind(key, **params)),
                          [ShapedArray((4,), np.dtype(np.uint32), False)])
        _rng_programs[k] = closed
    exe = _executable_for_jaxpr(closed, default_device(), "rng_bit_generator")
    outs = exe.run([X.to_buffer(np.asarray(key, np.uint32), exe.device)])
    return [np.asarray(o) for o in outs]


# ---------------------------------------------------------------- rng_uniform
@register_lowering(S.rng_uniform_p)
def _rng_uniform(ctx: LoweringContext, a, b, *, shape):
    dims = ctx.constant(np.asarray(ctx.avals_out[0].shape, np.int64))
    return [ctx.emit1("stablehlo.rng", [a, b, dims], attrs={"rng_distribution": "#stablehlo<rng_distribution UNIFORM>"})]


_rng_uniform_programs: dict = {}


@S.rng_uniform_p.def_impl
def _rng_uniform_impl(a, b, *, shape):
    """Eagerly: the one op, compiled (its values are XLA's stateful generator's)."""
    from ftrans.core.trace import stage
    from ftrans.devices import default_device
    from ftrans.lowering import executable as X
    from ftrans.lowering.rules.calls import _executable_for_jaxpr

    a, b = np.asarray(a), np.asarray(b)
    shape = tuple(int(d) for d in shape)
    k = (shape, a.dtype)
    closed = _rng_uniform_programs.get(k)
    if closed is None:
        closed, _ = stage(lambda lo, hi: [S.rng_uniform_p.bind(lo, hi, shape=shape)],
                          [ShapedArray((), a.dtype, False)] * 2)
        _rng_uniform_programs[k] = closed
    exe = _executable_for_jaxpr(closed, default_device(), "rng_uniform")
    out, = exe.run([X.to_buffer(a, exe.device), X.to_buffer(b, exe.device)])
    return np.asarray(out)
