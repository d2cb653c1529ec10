"""Lowering of ``conv_general_dilated`` (``stablehlo.convolution``) and ``fft`` (``stablehlo.fft``).

A complex convolution is written as four real ones (XLA's CPU and GPU
backends have no complex convolution, which is also why JAX expands it);
``precision`` becomes the ``precision_config`` attribute when given.
"""

from __future__ import annotations

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.prims import convolution as C
from ftrans.core.prims import fft as F
from ftrans.core.shape_poly import is_poly_shape
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering

_REAL = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}


def _layout(spec, first: str, second: str) -> str:
    names = [""] * len(spec)
    names[spec[0]], names[spec[1]] = first, second
    for k, ax in enumerate(spec[2:]):
        names[ax] = str(k)
    return "[" + ", ".join(names) + "]"


def _conv(ctx: LoweringContext, lhs: str, rhs: str, out_type: str, params: dict) -> str:
    lspec, rspec, ospec = params["dimension_numbers"]
    nsp = len(lspec) - 2
    pads = [v for pair in params["padding"] for v in pair]
    symbolic = is_poly_shape(pads)
    if not symbolic:
        pads = [int(v) for v in pads]
    attrs = {
        "dimension_numbers": (f"#stablehlo.conv<{_layout(lspec, 'b', 'f')}x{_layout(rspec, 'o', 'i')}"
                              f"->{_layout(ospec, 'b', 'f')}>"),
        "window_strides": mt.i64_array(params["window_strides"]),
        "padding": "" if symbolic else mt.i64_elements(pads, (nsp, 2)),
        "lhs_dilation": mt.i64_array(params["lhs_dilation"]),
        "rhs_dilation": mt.i64_array(params["rhs_dilation"]),
        "feature_group_count": f"{int(params['feature_group_count'])} : i64",
        "batch_group_count": f"{int(params['batch_group_count'])} : i64",
    }
    prec = params.get("precision")
    if prec is not None:
        attrs["precision_config"] = "[" + ", ".join(f"#stablehlo<precision {p}>" for p in prec) + "]"
    if symbolic:  # padding of symbolic size: an operand, computed when the program runs (as JAX's)
        del attrs["padding"]
        pad = ctx.emit1("stablehlo.reshape", [ctx.fn.shape_tensor(pads)], f"tensor<{nsp}x2xi32>")
        return ctx.emit1("stablehlo.dynamic_conv", [lhs, rhs, pad], out_type, attrs)
    return ctx.emit1("stablehlo.convolution", [lhs, rhs], out_type, attrs)


@register_lowering(C.conv_general_dilated_p)
def _lower_conv(ctx: LoweringContext, lhs, rhs, **params):
    la, ra = ctx.avals_in
    out = ctx.avals_out[0]
    dt = np.dtype(la.dtype)
    if dt.kind != "c":
        return _conv(ctx, lhs, rhs, mt.aval_type(out), params)
    real = _REAL[dt]
    out_real = _REAL[np.dtype(out.dtype)]
    rtype = mt.tensor_type(out.shape, out_real)

    def part(op, x, aval):
        return ctx.emit1(op, [x], mt.tensor_type(aval.shape, real))

    lr, li = part("stablehlo.real", lhs, la), part("stablehlo.imag", lhs, la)
    rr, ri = part("stablehlo.real", rhs, ra), part("stablehlo.imag", rhs, ra)
    re = ctx.emit1("stablehlo.subtract", [_conv(ctx, lr, rr, rtype, params), _conv(ctx, li, ri, rtype, params)],
                   rtype)
    im = ctx.emit1("stablehlo.add", [_conv(ctx, lr, ri, rtype, params), _conv(ctx, li, rr, rtype, params)], rtype)
    return ctx.emit1("stablehlo.complex", [re, im], mt.aval_type(out))


@register_lowering(F.fft_p)
def _lower_fft(ctx: LoweringContext, x, *, fft_type, fft_lengths):
    if 0 in ctx.avals_in[0].shape or 0 in ctx.avals_out[0].shape:
        out = ctx.avals_out[0]
        zero = ctx.scalar(0, out.dtype)
        return ctx.broadcast(zero, ShapedArray((), out.dtype), out.shape)
    return ctx.emit1("stablehlo.fft", [x], attrs={
        "fft_type": f"#stablehlo<fft_type {F.FftType(fft_type).name}>",
        "fft_length": mt.i64_array(fft_lengths),
    })
