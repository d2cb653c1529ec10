"""Lowering of the reductions over axes, the arg-reductions and ``dot_general``.

Each reduction is one ``stablehlo.reduce`` whose init value is the operation's
identity, so reducing an empty axis gives the identity exactly as the impl rule
does.  Half-precision sums and products accumulate in float32 and round once at
the end, as the impl rule does (XLA's CPU backend would otherwise accumulate in
bfloat16).  ``argmax``/``argmin`` reduce (value, index) pairs together with a
comparator that is a total order -- NaN beats every number, equal values prefer
the lower index -- so the reduction is associative and commutative and XLA may
evaluate it in any order.  ``dot_general`` accumulates in the same dtype as the
impl rule (float32 for half precision, int32 for bool) and converts the result.
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.prims import reductions as R
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

_HALF = (np.dtype(dtypes.bfloat16), np.dtype(dtypes.float16))
_BOOL = np.dtype(dtypes.bool_)
_I1 = mt.tensor_type((), _BOOL)


def identity(kind: str, dtype: np.dtype) -> np.ndarray:
    """The init value that leaves a ``kind`` reduction over ``dtype`` unchanged."""
    dtype = np.dtype(dtype)
    if kind in ("sum", "or", "xor"):
        return np.zeros((), dtype)
    if kind == "prod":
        return np.ones((), dtype)
    if kind == "and":
        return np.asarray(True) if dtype == _BOOL else np.asarray(-1).astype(dtype)
    if dtype == _BOOL:
        return np.asarray(kind == "min")
    if dtypes.is_float(dtype):
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    if dtype.kind == "c":  # (-+inf, 0), as JAX's identity for an inexact max/min
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    info = dtypes.iinfo(dtype)
    return np.asarray(info.min if kind == "max" else info.max, dtype)


def body_op(kind: str, dtype: np.dtype) -> str:
    """The StableHLO op combining two partial results of a ``kind`` reduction."""
    if np.dtype(dtype) == _BOOL and kind in ("max", "min"):
        return "stablehlo.or" if kind == "max" else "stablehlo.and"
    return {
        "sum": "stablehlo.add", "prod": "stablehlo.multiply", "max": "stablehlo.maximum",
        "min": "stablehlo.minimum", "and": "stablehlo.and", "or": "stablehlo.or", "xor": "stablehlo.xor",
    }[kind]


def compare(f: mt.FuncEmitter, x: str, y: str, dtype: np.dtype, direction: str,
            compare_type: str | None = None, shape: tuple[int, ...] = ()) -> str:
    """``x <direction> y`` (both of ``dtype`` and ``shape``) as a boolean tensor, emitted on ``f``."""
    dtype = np.dtype(dtype)
    if compare_type is None:
        if dtypes.is_float(dtype) or dtype.kind == "c":
            compare_type = "FLOAT"
        elif dtypes.is_unsigned(dtype) or dtype == _BOOL:
            compare_type = "UNSIGNED"
        else:
            compare_type = "SIGNED"
    return f.emit("stablehlo.compare", [x, y], [mt.tensor_type(shape, _BOOL)], {
        "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
        "compare_type": f"#stablehlo<comparison_type {compare_type}>",
    })[0]


def complex_minmax_body(g: mt.FuncEmitter, args: list[str], kind: str, dtype: np.dtype) -> list[str]:
    """The body combining two complex scalars for a max/min reduction: ordered lexicographically (real part,
    then imaginary part), as the elementwise ``max``/``min``; ``stablehlo.maximum`` on complex scalars is
    not. A comparison with a NaN is false, so the second value wins, as in JAX's lowering."""
    x, y = args
    t = mt.tensor_type((), dtype)
    part = np.dtype(dtypes.float64 if np.dtype(dtype) == dtypes.complex128 else dtypes.float32)
    pt = mt.tensor_type((), part)
    direction = "GT" if kind == "max" else "LT"
    xr, yr = (g.emit("stablehlo.real", [v], [pt])[0] for v in (x, y))
    xi, yi = (g.emit("stablehlo.imag", [v], [pt])[0] for v in (x, y))
    which = g.emit("stablehlo.select", [compare(g, xr, yr, part, "EQ"), compare(g, xi, yi, part, direction),
                                        compare(g, xr, yr, part, direction)], [_I1])[0]
    return g.emit("stablehlo.select", [which, x, y], [t])


def minmax_region(ctx: LoweringContext, kind: str, dtype: np.dtype) -> str:
    """A reduction region for ``kind`` over ``dtype``: ``body_op``'s, or the lexicographic one for a complex
    max/min."""
    dtype = np.dtype(dtype)
    if kind in ("max", "min") and dtype.kind == "c":
        t = mt.tensor_type((), dtype)
        return ctx.fn.region([t, t], lambda g, args: complex_minmax_body(g, args, kind, dtype))
    return ctx.reduce_region(body_op(kind, dtype), dtype)


def _reduce(kind: str):
    def rule(ctx: LoweringContext, x, *, axes):
        a = ctx.avals_in[0]
        out = ctx.avals_out[0]
        wide = kind in ("sum", "prod") and np.dtype(a.dtype) in _HALF
        calc = np.dtype(dtypes.float32) if wide else np.dtype(a.dtype)
        x = ctx.convert(x, a, calc)
        init = ctx.scalar(identity(kind, calc), calc)
        y = ctx.emit1("stablehlo.reduce", [x, init], mt.tensor_type(out.shape, calc),
                      attrs={"dimensions": mt.i64_array(sorted(int(d) for d in axes))},
                      regions=[minmax_region(ctx, kind, calc)])
        return ctx.convert(y, out.update(dtype=calc), out.dtype)

    rule.__name__ = f"_lower_reduce_{kind}"
    return rule


for _prim, _kind in [(R.reduce_sum_p, "sum"), (R.reduce_prod_p, "prod"), (R.reduce_max_p, "max"),
                     (R.reduce_min_p, "min"), (R.reduce_and_p, "and"), (R.reduce_or_p, "or"),
                     (R.reduce_xor_p, "xor")]:
    register_lowering(_prim)(_reduce(_kind))


# ---------------------------------------------------------------- argmax / argmin
def _and(f: mt.FuncEmitter, x: str, y: str) -> str:
    return f.emit("stablehlo.and", [x, y], [_I1])[0]


def _or(f: mt.FuncEmitter, x: str, y: str) -> str:
    return f.emit("stablehlo.or", [x, y], [_I1])[0]


def _better_and_equal(f: mt.FuncEmitter, a: str, b: str, dtype: np.dtype, direction: str) -> tuple[str, str]:
    """(``a`` strictly beats ``b``, ``a`` ties ``b``) for one value of an arg-reduction.

    NaN beats every non-NaN and ties another NaN, as in the impl rule; complex
    values compare by real part, then imaginary part (NumPy's order), and are
    NaN if either part is.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        part = np.dtype(dtypes.float64 if dtype == dtypes.complex128 else dtypes.float32)
        pt = mt.tensor_type((), part)
        ar, ai = (f.emit(op, [a], [pt])[0] for op in ("stablehlo.real", "stablehlo.imag"))
        br, bi = (f.emit(op, [b], [pt])[0] for op in ("stablehlo.real", "stablehlo.imag"))
        a_nan = _or(f, compare(f, ar, ar, part, "NE"), compare(f, ai, ai, part, "NE"))
        b_nan = _or(f, compare(f, br, br, part, "NE"), compare(f, bi, bi, part, "NE"))
        req = compare(f, ar, br, part, "EQ")
        num_better = _or(f, compare(f, ar, br, part, direction),
                         _and(f, req, compare(f, ai, bi, part, direction)))
        num_equal = _and(f, req, compare(f, ai, bi, part, "EQ"))
    elif dtypes.is_float(dtype):
        a_nan = compare(f, a, a, dtype, "NE")
        b_nan = compare(f, b, b, dtype, "NE")
        num_better = compare(f, a, b, dtype, direction)
        num_equal = compare(f, a, b, dtype, "EQ")
    else:
        return compare(f, a, b, dtype, direction), compare(f, a, b, dtype, "EQ")
    not_b_nan = f.emit("stablehlo.not", [b_nan], [_I1])[0]
    # With NaNs: a beats b if a is NaN and b is not; comparisons involving NaN are false anyway.
    better = _or(f, _and(f, a_nan, not_b_nan), num_better)
    equal = _or(f, _and(f, a_nan, b_nan), num_equal)
    return better, equal


def _arg(kind: str):
    direction = "GT" if kind == "max" else "LT"

    def rule(ctx: LoweringContext, x, *, axes, index_dtype):
        a = ctx.avals_in[0]
        out = ctx.avals_out[0]
        (ax,) = axes
        vt, it = mt.tensor_type((), a.dtype), mt.tensor_type((), index_dtype)
        idx = ctx.emit1("stablehlo.iota", [], mt.tensor_type(a.shape, index_dtype),
                        {"iota_dimension": f"{int(ax)} : i64"})
        inits = [ctx.scalar(identity(kind, a.dtype), a.dtype), ctx.scalar(0, index_dtype)]

        def body(f: mt.FuncEmitter, args: list[str]) -> list[str]:
            av, ai, bv, bi = args
            better, equal = _better_and_equal(f, av, bv, a.dtype, direction)
            pick = _or(f, better, _and(f, equal, compare(f, ai, bi, np.dtype(index_dtype), "LT")))
            return [f.emit("stablehlo.select", [pick, av, bv], [vt])[0],
                    f.emit("stablehlo.select", [pick, ai, bi], [it])[0]]

        region = ctx.fn.region([vt, it, vt, it], body)
        _, res = ctx.emit("stablehlo.reduce", [x, idx, *inits],
                          [mt.tensor_type(out.shape, a.dtype), mt.aval_type(out)],
                          attrs={"dimensions": mt.i64_array([ax])}, regions=[region])
        return res

    rule.__name__ = f"_lower_arg{kind}"
    return rule


register_lowering(R.argmax_p)(_arg("max"))
register_lowering(R.argmin_p)(_arg("min"))


# ---------------------------------------------------------------- dot_general
def _dims(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _algorithm_attr(fields: tuple) -> str:
    lt, rt, at, lcc, rcc, ops, imprecise = (t if isinstance(t, (str, int)) else mt.element_type(np.dtype(t))
                                            for t in fields)
    return (f"#stablehlo.dot_algorithm<lhs_precision_type = {lt}, rhs_precision_type = {rt}, accumulation_type = "
            f"{at}, lhs_component_count = {int(lcc)}, rhs_component_count = {int(rcc)}, num_primitive_operations = "
            f"{int(ops)}, allow_imprecise_accumulation = {mt.bool_attr(bool(imprecise))}>")


@register_lowering(R.dot_general_p)
def _dot_general(ctx: LoweringContext, lhs, rhs, *, dimension_numbers, precision=None,
                 preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    la, ra = ctx.avals_in
    out = ctx.avals_out[0]
    dnums = (f"#stablehlo.dot<lhs_batching_dimensions = {_dims(lb)}, rhs_batching_dimensions = {_dims(rb)}, "
             f"lhs_contracting_dimensions = {_dims(lc)}, rhs_contracting_dimensions = {_dims(rc)}>")
    if type(precision).__name__ in ("DotAlgorithm", "DotAlgorithmPreset"):
        # An explicit algorithm: the operands go to its storage types and XLA accumulates in its type.
        lt, rt, acc, fields = R.dot_algorithm_types(precision, np.dtype(la.dtype), np.dtype(ra.dtype),
                                                    np.dtype(out.dtype), ctx.platform)
        attr = None if fields is None else _algorithm_attr(fields)
        lhs = ctx.convert(lhs, la, lt)
        rhs = ctx.convert(rhs, ra, rt)
        attrs = {"dot_dimension_numbers": dnums,
                 "precision_config": "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]"}
        if attr is not None:
            attrs["algorithm"] = attr
        y = ctx.emit1("stablehlo.dot_general", [lhs, rhs], mt.tensor_type(out.shape, acc), attrs)
        return ctx.convert(y, out.update(dtype=acc), out.dtype)
    calc = np.dtype(R._dot_compute_dtype(np.dtype(la.dtype), np.dtype(out.dtype)))
    if np.dtype(la.dtype) == _BOOL and np.dtype(ra.dtype) == _BOOL:  # XLA has no boolean dot: count in int32
        lhs, rhs = ctx.convert(lhs, la, calc), ctx.convert(rhs, ra, calc)
    elif np.dtype(la.dtype) != np.dtype(ra.dtype) and not (la.dtype in dtypes.SMALL_FLOATS
                                                           and ra.dtype in dtypes.SMALL_FLOATS):
        # Mixed operands (8-bit floats aside): XLA's CPU and GPU code generators take them in the result
        # type, as jax converts them (a boolean operand counts in the product's accumulation type).
        want = calc if np.dtype(out.dtype) == _BOOL else np.dtype(out.dtype)
        lhs, rhs = ctx.convert(lhs, la, want), ctx.convert(rhs, ra, want)
    # Otherwise a wider result type makes XLA accumulate in it without widening the operands
    # (bfloat16 inputs keep using bfloat16 matrix units), as jax emits preferred_element_type.
    attrs = {"dot_dimension_numbers": dnums}
    if isinstance(precision, tuple) and len(precision) == 2 and all(type(p).__name__ == "Precision"
                                                                    for p in precision):
        # a pair of Precision members (their str is the StableHLO name)
        attrs["precision_config"] = "[" + ", ".join(f"#stablehlo<precision {p}>" for p in precision) + "]"
    y = ctx.emit1("stablehlo.dot_general", [lhs, rhs], mt.tensor_type(out.shape, calc), attrs)
    sh = getattr(out, "typed_sharding", None)
    if sh is not None and sh.spec.unreduced and calc != np.dtype(out.dtype):
        # The partial sums are the product's own (before the conversion): the partitioner then keeps them
        # unreduced rather than reducing the product and reading the full sums as partial ones.
        y = ctx.module._typed(ctx.fn, y, out)
    if np.dtype(out.dtype) == _BOOL:  # a boolean product is "any term is true"
        zero = ctx.broadcast(ctx.scalar(0, calc), ShapedArray((), calc), out.shape)
        return compare(ctx.fn, y, zero, calc, "NE", shape=tuple(out.shape))
    return ctx.convert(y, out.update(dtype=calc), out.dtype)


# ---------------------------------------------------------------- reduce with a user computation
@register_lowering(R.reduce_p)
def _lower_reduce_general(ctx: LoweringContext, *args: str, jaxpr, dimensions) -> list[str]:
    """One variadic ``stablehlo.reduce`` whose region calls the computation's function."""
    n = len(args) // 2
    sym = ctx.module.function(jaxpr.jaxpr, "reduce_computation")
    scalar_types = [mt.tensor_type((), a.dtype) for a in ctx.avals_in[:n]]

    def body(f: mt.FuncEmitter, xs: list[str]) -> list[str]:
        return f.emit("func.call", xs, scalar_types, {"callee": f"@{sym}"})

    return ctx.emit("stablehlo.reduce", list(args), [mt.aval_type(a) for a in ctx.avals_out],
                    attrs={"dimensions": mt.i64_array(sorted(int(d) for d in dimensions))},
                    regions=[ctx.fn.region(scalar_types + scalar_types, body)])
