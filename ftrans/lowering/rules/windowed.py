"""Lowering of the windowed reductions (``reduce_window_sum`` / ``_max`` / ``_min``).

Each becomes one ``stablehlo.reduce_window`` whose init value is the
reduction's identity, so padding and base dilation (which XLA fills with the
init value) never change a window's result, as in the impl rule.  Half-precision
sums accumulate in float32 and round once at the end, as the impl rule does;
boolean max/min are ``or``/``and``.
"""

from __future__ import annotations

import numpy as np

from ftrans.core import dtypes
from ftrans.core.prims import windowed as W
from ftrans.core.shape_poly import is_poly_shape
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.rules.reductions import complex_minmax_body, minmax_region

_HALF = (np.dtype(dtypes.bfloat16), np.dtype(dtypes.float16))


def _identity(kind: str, dtype: np.dtype) -> np.ndarray:
    """The init value that leaves every window's reduction unchanged."""
    if kind == "sum":
        return np.zeros((), dtype)
    if dtype == dtypes.bool_:
        return np.asarray(kind == "min")
    if dtypes.is_inexact(dtype):  # complex: (-+inf, 0), as JAX's identity
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    info = dtypes.iinfo(dtype)
    return np.asarray(info.min if kind == "max" else info.max, dtype)


def _body_op(kind: str, dtype: np.dtype) -> str:
    if kind == "sum":
        return "stablehlo.add"
    if dtype == dtypes.bool_:
        return "stablehlo.or" if kind == "max" else "stablehlo.and"
    return "stablehlo.maximum" if kind == "max" else "stablehlo.minimum"


def _symbolic(*params) -> bool:
    return any(is_poly_shape(p) for p in params[:2] + params[3:]) or any(is_poly_shape(p) for p in params[2])


def _dynamic_reduce_window(ctx: LoweringContext, operands: list, inits: list, result_types: list, reducer: str,
                           window_dimensions, window_strides, padding, base_dilation, window_dilation) -> list:
    """JAX's form for symbolic window sizes, strides, dilations or padding: a ``stablehlo.dynamic_reduce_window``
    custom call taking them as operands and the reducer as a function (shape refinement makes it static)."""
    f = ctx.fn
    pads = [f.emit("stablehlo.reshape", [f.shape_tensor(pair)], ["tensor<1x2xi32>"])[0] for pair in padding]
    pad = pads[0] if len(pads) == 1 else f.emit("stablehlo.concatenate", pads, [f"tensor<{len(pads)}x2xi32>"],
                                                {"dimension": "0 : i64"})[0]
    shapes = [f.shape_tensor(v) for v in (window_dimensions, window_strides, base_dilation, window_dilation)]
    return ctx.emit("stablehlo.custom_call", [*operands, *inits, *shapes, pad], result_types, {
        "api_version": "2 : i32", "call_target_name": '"stablehlo.dynamic_reduce_window"',
        "called_computations": f"[@{reducer}]"})


def _reducer_function(ctx: LoweringContext, op: str, dtype: np.dtype, body=None) -> str:
    """A private function ``(a, b) -> op(a, b)`` of scalars of ``dtype`` (or ``body(emitter, [a, b])``'s one
    result, ``op`` then naming it): a dynamic reduce_window's reducer."""
    cache = ctx.module.__dict__.setdefault("_window_reducers", {})
    key = (op, np.dtype(dtype))
    sym = cache.get(key)
    if sym is None:
        sym = cache[key] = f"_reduce_window_{op.split('.')[-1]}_{len(cache)}"
        t = mt.tensor_type((), dtype)
        fn = mt.FuncEmitter()
        a, b = fn.argument(t), fn.argument(t)
        r = body(fn, [a, b])[0] if body is not None else fn.emit(op, [a, b], [t])[0]
        fn.emit("func.return", [r], [])
        ctx.module.private.append(f"  func.func private @{sym}({a}: {t}, {b}: {t}) -> ({t}) {{\n"
                                  + "\n".join(fn.lines) + "\n  }")
    return sym


def _rule(kind: str):
    def rule(ctx: LoweringContext, x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        a = ctx.avals_in[0]
        out = ctx.avals_out[0]
        if a.ndim == 0:  # one window of one element
            return x
        calc = np.dtype(dtypes.float32) if kind == "sum" and np.dtype(a.dtype) in _HALF else np.dtype(a.dtype)
        x = ctx.convert(x, a, calc)
        init = ctx.scalar(_identity(kind, calc), calc)
        if _symbolic(window_dimensions, window_strides, padding, base_dilation, window_dilation):
            if kind != "sum" and calc.kind == "c":
                reducer = _reducer_function(ctx, f"complex_{kind}", calc,
                                            lambda g, args: complex_minmax_body(g, args, kind, calc))
            else:
                reducer = _reducer_function(ctx, _body_op(kind, calc), calc)
            y, = _dynamic_reduce_window(ctx, [x], [init], [mt.tensor_type(out.shape, calc)], reducer,
                                        window_dimensions, window_strides, padding, base_dilation,
                                        window_dilation)
            return ctx.convert(y, out.update(dtype=calc), out.dtype)
        pads = [int(v) for pair in padding for v in pair]
        y = ctx.emit1("stablehlo.reduce_window", [x, init], mt.tensor_type(out.shape, calc), attrs={
            "window_dimensions": mt.i64_array(window_dimensions),
            "window_strides": mt.i64_array(window_strides),
            "base_dilations": mt.i64_array(base_dilation),
            "window_dilations": mt.i64_array(window_dilation),
            "padding": mt.i64_elements(pads, (a.ndim, 2)),
        }, regions=[minmax_region(ctx, kind, calc) if kind != "sum" and calc.kind == "c"
                    else ctx.reduce_region(_body_op(kind, calc), calc)])
        return ctx.convert(y, out.update(dtype=calc), out.dtype)

    rule.__name__ = f"_lower_reduce_window_{kind}"
    return rule


register_lowering(W.reduce_window_sum_p)(_rule("sum"))
register_lowering(W.reduce_window_max_p)(_rule("max"))
register_lowering(W.reduce_window_min_p)(_rule("min"))


@register_lowering(W.reduce_window_p)
def _lower_reduce_window_general(ctx: LoweringContext, *args: str, jaxpr, window_dimensions, window_strides,
                                 padding, base_dilation, window_dilation) -> list[str]:
    """One variadic ``stablehlo.reduce_window`` whose region calls the computation's function."""
    n = len(args) // 2
    a = ctx.avals_in[0]
    if a.ndim == 0:  # no window dimensions: each output is computation(init, element)
        sym0 = ctx.module.function(jaxpr.jaxpr, "reduce_window_computation")
        types = [mt.tensor_type((), x.dtype) for x in ctx.avals_in[:n]]
        return ctx.emit("func.call", list(args[n:]) + list(args[:n]), types, {"callee": f"@{sym0}"})
    sym = ctx.module.function(jaxpr.jaxpr, "reduce_window_computation")
    scalar_types = [mt.tensor_type((), x.dtype) for x in ctx.avals_in[:n]]
    if _symbolic(window_dimensions, window_strides, padding, base_dilation, window_dilation):
        return _dynamic_reduce_window(ctx, list(args[:n]), list(args[n:]), [mt.aval_type(o) for o in ctx.avals_out],
                                      sym, window_dimensions, window_strides, padding, base_dilation,
                                      window_dilation)

    def body(f: mt.FuncEmitter, xs: list[str]) -> list[str]:
        return f.emit("func.call", xs, scalar_types, {"callee": f"@{sym}"})

    pads = [int(v) for pair in padding for v in pair]
    return ctx.emit("stablehlo.reduce_window", list(args), [mt.aval_type(o) for o in ctx.avals_out], attrs={
        "window_dimensions": mt.i64_array(window_dimensions),
        "window_strides": mt.i64_array(window_strides),
        "base_dilations": mt.i64_array(base_dilation),
        "window_dilations": mt.i64_array(window_dilation),
        "padding": mt.i64_elements(pads, (a.ndim, 2)),
    }, regions=[ctx.fn.region(scalar_types + scalar_types, body)])
