"""Lowering of ``sort``, ``top_k`` and the cumulative reductions.

``sort`` becomes one variadic ``stablehlo.sort`` whose comparator orders the
first ``num_keys`` operands lexicographically.  Floating keys are compared in
XLA's total order after the same canonicalisation the impl rule (and jax) use:
``-0.0`` becomes ``+0.0`` and every NaN the positive quiet NaN, so zeros tie,
NaNs tie and sort after ``+inf``.  The sort is always emitted stable: the impl
rule is stable whatever ``is_stable`` says, and the non-key operands would
otherwise come out in an unspecified order among equal keys.

The cumulative reductions are a ``stablehlo.reduce_window`` whose window spans
the whole axis and whose padding (``n - 1`` before, or after for ``reverse``)
makes output ``i`` reduce elements ``0..i`` (or ``i..n-1``), as XLA's own
lowering for CPU does.  Half-precision sums, products and log-sum-exps
accumulate in float32 and round once, as the impl rule does.
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.prims import sorting as So
from ftrans.core.shape_poly import is_symbolic_dim
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.rules.reductions import body_op, compare, complex_minmax_body, identity, minmax_region

_HALF = (np.dtype(dtypes.bfloat16), np.dtype(dtypes.float16))
_BOOL = np.dtype(dtypes.bool_)
_I1 = mt.tensor_type((), _BOOL)


# ---------------------------------------------------------------- sort
def _canonical_float(f: mt.FuncEmitter, x: str, dtype: np.dtype) -> str:
    """``x`` with ``-0.0`` replaced by ``+0.0`` and any NaN by the canonical NaN."""
    t = mt.tensor_type((), dtype)
    zero = f.constant(np.zeros((), dtype))
    nan = f.constant(np.asarray(np.nan, dtype))
    x0 = f.emit("stablehlo.select", [compare(f, x, zero, dtype, "EQ"), zero, x], [t])[0]
    return f.emit("stablehlo.select", [compare(f, x, x, dtype, "NE"), nan, x0], [t])[0]


def _sort_keys(f: mt.FuncEmitter, x: str, dtype: np.dtype) -> list[tuple[str, np.dtype, str]]:
    """The scalar sub-keys (most significant first) of one operand, with their dtype and compare type."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        part = np.dtype(dtypes.float64 if dtype == dtypes.complex128 else dtypes.float32)
        pt = mt.tensor_type((), part)
        re = f.emit("stablehlo.real", [x], [pt])[0]
        im = f.emit("stablehlo.imag", [x], [pt])[0]
        return [(_canonical_float(f, re, part), part, "TOTALORDER"),
                (_canonical_float(f, im, part), part, "TOTALORDER")]
    if dtypes.is_float(dtype):
        return [(_canonical_float(f, x, dtype), dtype, "TOTALORDER")]
    ct = "UNSIGNED" if dtypes.is_unsigned(dtype) or dtype == _BOOL else "SIGNED"
    return [(x, dtype, ct)]


def _comparator(f: mt.FuncEmitter, args: list[str], key_dtypes: list[np.dtype]) -> list[str]:
    """``lhs < rhs`` lexicographically over the keys (args pair up lhs/rhs per operand)."""
    lhs_keys: list[tuple[str, np.dtype, str]] = []
    rhs_keys: list[tuple[str, np.dtype, str]] = []
    for i, dt in enumerate(key_dtypes):
        lhs_keys += _sort_keys(f, args[2 * i], dt)
        rhs_keys += _sort_keys(f, args[2 * i + 1], dt)
    result = None
    for (a, dt, ct), (b, _, _) in zip(reversed(lhs_keys), reversed(rhs_keys)):
        lt = compare(f, a, b, dt, "LT", ct)
        if result is None:
            result = lt
        else:
            eq = compare(f, a, b, dt, "EQ", ct)
            tie = f.emit("stablehlo.and", [eq, result], [_I1])[0]
            result = f.emit("stablehlo.or", [lt, tie], [_I1])[0]
    return [result]


@register_lowering(So.sort_p)
def _sort(ctx: LoweringContext, *xs, dimension, is_stable, num_keys):
    avals = ctx.avals_in
    arg_types = [t for a in avals for t in (mt.tensor_type((), a.dtype),) * 2]
    key_dtypes = [np.dtype(a.dtype) for a in avals[:num_keys]]
    region = ctx.fn.region(arg_types, lambda f, args: _comparator(f, args, key_dtypes))
    return ctx.emit("stablehlo.sort", list(xs), attrs={
        "dimension": f"{int(dimension)} : i64", "is_stable": mt.bool_attr(True),
    }, regions=[region])


# ---------------------------------------------------------------- top_k
@register_lowering(So.top_k_p)
def _top_k(ctx: LoweringContext, x, *, k, axis):
    """``chlo.top_k`` over the last axis (another axis is swapped with the last one around it), as JAX."""
    a = ctx.avals_in[0]
    vals, idx = ctx.avals_out
    last = a.ndim - 1
    perm = list(range(a.ndim))
    perm[axis], perm[last] = last, axis

    def swapped(shape):
        return tuple(shape[p] for p in perm)

    if axis != last:
        x = ctx.emit1("stablehlo.transpose", [x], mt.tensor_type(swapped(a.shape), a.dtype),
                      {"permutation": mt.i64_array(perm)})
    types = [mt.tensor_type(swapped(o.shape), o.dtype) for o in (vals, idx)]
    if is_symbolic_dim(k):  # JAX's dynamic form: k as an operand, made ``chlo.top_k`` by shape refinement at a call
        outs = ctx.emit("stablehlo.custom_call", [x, ctx.fn.dim_value(k)], types, {
            "api_version": "2 : i32", "call_target_name": '"stablehlo.dynamic_top_k"'})
    else:
        outs = ctx.emit("chlo.top_k", [x], types, {"k": f"{int(k)} : i64"})
    if axis != last:
        outs = [ctx.emit1("stablehlo.transpose", [o], mt.aval_type(av), {"permutation": mt.i64_array(perm)})
                for o, av in zip(outs, (vals, idx))]
    return outs


# ---------------------------------------------------------------- cumulative reductions
def _logaddexp_region(ctx: LoweringContext, dtype: np.dtype) -> str:
    """``log(exp(a) + exp(b))`` computed stably; equal arguments (incl. infinities) give ``a + log 2``."""
    return ctx.fn.region([mt.tensor_type((), dtype)] * 2, _logaddexp_body(dtype))


def _logaddexp_body(dtype: np.dtype):
    t = mt.tensor_type((), dtype)

    def body(f: mt.FuncEmitter, args: list[str]) -> list[str]:
        a, b = args
        m = f.emit("stablehlo.maximum", [a, b], [t])[0]
        d = f.emit("stablehlo.subtract", [a, b], [t])[0]
        nd = f.emit("stablehlo.negate", [f.emit("stablehlo.abs", [d], [t])[0]], [t])[0]
        l1p = f.emit("stablehlo.log_plus_one", [f.emit("stablehlo.exponential", [nd], [t])[0]], [t])[0]
        general = f.emit("stablehlo.add", [m, l1p], [t])[0]
        # a == b: a - b would be NaN for equal infinities; a + log 2 is exact for them and finite a alike.
        same = f.emit("stablehlo.add", [a, f.constant(np.asarray(np.log(2.0), dtype))], [t])[0]
        return f.emit("stablehlo.select", [compare(f, a, b, dtype, "EQ"), same, general], [t])

    return body


def _cumulative(kind: str):
    def rule(ctx: LoweringContext, x, *, axis, reverse):
        a = ctx.avals_in[0]
        out = ctx.avals_out[0]
        n = a.shape[axis]
        if 0 in a.shape:
            return x
        wide = kind in ("sum", "prod", "logsumexp") and np.dtype(a.dtype) in _HALF
        calc = np.dtype(dtypes.float32) if wide else np.dtype(a.dtype)
        x = ctx.convert(x, a, calc)
        if is_symbolic_dim(n):  # JAX's dynamic reduce_window: the window spans the symbolic axis
            from ftrans.lowering.rules.windowed import _dynamic_reduce_window, _reducer_function

            init = ctx.scalar(-np.inf if kind == "logsumexp" else identity(kind, calc), calc)
            if kind == "logsumexp":
                reducer = _reducer_function(ctx, "logaddexp", calc, _logaddexp_body(calc))
            elif kind in ("max", "min") and calc.kind == "c":
                reducer = _reducer_function(ctx, f"complex_{kind}", calc,
                                            lambda g, args: complex_minmax_body(g, args, kind, calc))
            else:
                reducer = _reducer_function(ctx, body_op(kind, calc), calc)
            ones = [1] * a.ndim
            window, pads = list(ones), [(0, 0)] * a.ndim
            window[axis], pads[axis] = n, ((0, n - 1) if reverse else (n - 1, 0))
            y, = _dynamic_reduce_window(ctx, [x], [init], [mt.tensor_type(out.shape, calc)], reducer, window, ones,
                                        pads, ones, ones)
            return ctx.convert(y, out.update(dtype=calc), out.dtype)
        if kind == "logsumexp":
            init = ctx.scalar(-np.inf, calc)
            region = _logaddexp_region(ctx, calc)
        else:
            init = ctx.scalar(identity(kind, calc), calc)
            region = minmax_region(ctx, kind, calc)
        window = [1] * a.ndim
        window[axis] = n
        pads = [0] * (2 * a.ndim)
        pads[2 * axis + (1 if reverse else 0)] = n - 1
        y = ctx.emit1("stablehlo.reduce_window", [x, init], mt.tensor_type(out.shape, calc), attrs={
            "window_dimensions": mt.i64_array(window),
            "window_strides": mt.i64_array([1] * a.ndim),
            "base_dilations": mt.i64_array([1] * a.ndim),
            "window_dilations": mt.i64_array([1] * a.ndim),
            "padding": mt.i64_elements(pads, (a.ndim, 2)),
        }, regions=[region])
        return ctx.convert(y, out.update(dtype=calc), out.dtype)

    rule.__name__ = f"_lower_cum{kind}"
    return rule


for _prim, _kind in [(So.cumsum_p, "sum"), (So.cumprod_p, "prod"), (So.cummax_p, "max"),
                     (So.cummin_p, "min"), (So.cumlogsumexp_p, "logsumexp")]:
    register_lowering(_prim)(_cumulative(_kind))
