"""The built-in roofline rules, over ftrans's primitives (the figures are JAX's ``jax.experimental.roofline``'s).

Elementwise ops cost one flop per output element and their operands' and result's bytes; ``dot_general`` and
the convolutions count two flops per multiply-add; reductions and cumulative ops, gathers and scatters, host
callbacks and the collectives inside ``shard_map`` have rules of their own.  Every other ftrans primitive
(data movement, control flow, PRNG plumbing) costs nothing.
"""

from __future__ import annotations

import itertools as it
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import registry
from ftrans.experimental.roofline.roofline import (
    RooflineResult,
    RooflineRuleContext,
    RooflineShape,
    register_roofline,
    register_standard_roofline,
)

# One fused multiply-add is two flops.
_FMA_FLOPS_FACTOR = 2


def _prim(name: str) -> Any:
    return registry[name]


for _p in list(registry.values()):
    if getattr(_p, "ftrans_owned", False):
        register_standard_roofline(_p)


def _shapes_in(ctx: RooflineRuleContext) -> list[RooflineShape]:
    return [RooflineShape.from_aval(a) for a in ctx.avals_in]


def _unary_roofline(ctx: RooflineRuleContext, *args: Any, **kw: Any) -> RooflineResult:
    (x,) = _shapes_in(ctx)
    out = RooflineShape.from_aval(ctx.avals_out[0])
    return RooflineResult(unfused_flops=x.size, unfused_hbm_bytes=x.bytes + out.bytes)


for _name in ("abs", "acos", "asin", "atan", "cbrt", "ceil", "conj", "cos", "cosh", "exp", "expm1", "floor",
              "imag", "integer_pow", "is_finite", "log", "log1p", "logistic", "neg", "not", "real", "round", "rsqrt",
              "sign", "sin", "sinh", "sqrt", "square", "tan", "bessel_i0e", "bessel_i1e", "digamma", "erf_inv",
              "erf", "erfc", "lgamma"):
    register_roofline(_prim(_name))(_unary_roofline)


def _binary_roofline(ctx: RooflineRuleContext, *args: Any, **kw: Any) -> RooflineResult:
    lhs, rhs = _shapes_in(ctx)
    out = RooflineShape.from_aval(ctx.avals_out[0])
    flops = 1
    for a, b in it.zip_longest(lhs.shape, rhs.shape, fillvalue=1):
        flops *= max(int(a), int(b))
    return RooflineResult(unfused_flops=flops, unfused_hbm_bytes=lhs.bytes + rhs.bytes + out.bytes)


for _name in ("add", "sub", "mul", "div", "rem", "and", "or", "xor", "gt", "lt", "ge", "le", "eq", "ne", "min",
              "max"):
    register_roofline(_prim(_name))(_binary_roofline)


def _cumulative_roofline(ctx: RooflineRuleContext, *args: Any, axis: int, **kw: Any) -> RooflineResult:
    (x,) = _shapes_in(ctx)
    out = RooflineShape.from_aval(ctx.avals_out[0])
    # Counted along the scanned axis only, as JAX's rule.
    return RooflineResult(unfused_flops=int(x.shape[axis]), unfused_hbm_bytes=x.bytes + out.bytes)


for _name in ("cummax", "cummin", "cumprod", "cumsum"):
    register_roofline(_prim(_name))(_cumulative_roofline)


@register_roofline(_prim("cumlogsumexp"))
def _cumlogsumexp_roofline(ctx: RooflineRuleContext, *args: Any, axis: int, **kw: Any) -> RooflineResult:
    (x,) = _shapes_in(ctx)
    out = RooflineShape.from_aval(ctx.avals_out[0])
    # An exp and an add per element along the axis (the final log rounds into it).
    return RooflineResult(unfused_flops=int(x.shape[axis]) * 2, unfused_hbm_bytes=x.bytes + out.bytes)


@register_roofline(_prim("dot_general"))
def _dot_general_roofline(ctx: RooflineRuleContext, *args: Any, dimension_numbers: Any,
                          **kw: Any) -> RooflineResult:
    lhs, rhs = _shapes_in(ctx)
    out = RooflineShape.from_aval(ctx.avals_out[0])
    (lhs_contract, _), (lhs_batch, _) = dimension_numbers
    flops = (_FMA_FLOPS_FACTOR * lhs.size * rhs.size
             / np.prod([lhs.shape[i] for i in lhs_contract])
             / np.prod([lhs.shape[i] for i in lhs_batch]))
    hbm = 0
    if not ctx.pin_lhs_in_vmem:
        hbm += lhs.bytes + out.bytes
    if not ctx.pin_rhs_in_vmem:
        hbm += rhs.bytes
    return RooflineResult(flops=int(flops), unfused_flops=int(flops), hbm_bytes=hbm, unfused_hbm_bytes=hbm)


# ---------------------------------------------------------------- convolution
def _valid_positions_one_dim(stride: int, base_dilation: int, window_dilation: int, kernel: int, inp: int,
                             outp: int, padding: tuple[int, int]) -> int:
    """How many (output position, kernel tap) pairs along one spatial dimension read a real input element
    (not padding, not a hole of the input's dilation)."""
    lo, hi = padding
    # Two layouts whose pair count is known in closed form (the loops below would take N**2 steps).
    if (inp == outp and kernel == outp and inp == base_dilation and window_dilation == 1
            and max(1, inp - 1) == stride and lo == 0 and hi == 0):
        return inp
    if (inp == 1 and kernel == outp and window_dilation == 1 and base_dilation == 1 and stride == 1
            and lo == outp - 1 and hi == outp - 1):
        return outp
    count = 0
    for k in range(kernel):
        if stride == 1 and base_dilation == 1:
            base = lo - k * window_dilation
            count += max(min(inp + base, outp) - max(0, base), 0)
            continue
        for o in range(outp):
            undilated = o * stride - lo + k * window_dilation
            idx = int(undilated / base_dilation)
            if undilated != idx * base_dilation or idx < 0 or idx >= inp:
                continue
            count += 1
    return count


def _conv_dnums(lhs: RooflineShape, rhs: RooflineShape, dimension_numbers: Any) -> Any:
    if hasattr(dimension_numbers, "lhs_spec"):
        return dimension_numbers
    from ftrans.lax import conv_dimension_numbers

    return conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)


def _conv_flops(lhs: RooflineShape, rhs: RooflineShape, out: RooflineShape, window_strides: Sequence[int],
                padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
                dimension_numbers: Any, batch_group_count: int) -> int:
    dn = _conv_dnums(lhs, rhs, dimension_numbers)
    positions = 1
    for d, (li, ri, oi) in enumerate(zip(dn.lhs_spec[2:], dn.rhs_spec[2:], dn.out_spec[2:])):
        positions *= _valid_positions_one_dim(window_strides[d], lhs_dilation[d], rhs_dilation[d], rhs.shape[ri],
                                              lhs.shape[li], out.shape[oi], tuple(padding[d]))
    batch = lhs.shape[dn.lhs_spec[0]]
    out_features = out.shape[dn.out_spec[1]]
    in_features = rhs.shape[dn.rhs_spec[1]]
    fmas = in_features * out_features * (batch / batch_group_count) * positions
    return int(fmas * _FMA_FLOPS_FACTOR)


@register_roofline(_prim("conv_general_dilated"))
def _conv_general_dilated_roofline(ctx: RooflineRuleContext, *args: Any, window_strides: Sequence[int],
                                   padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                                   rhs_dilation: Sequence[int], dimension_numbers: Any, batch_group_count: int,
                                   **kw: Any) -> RooflineResult:
    lhs, rhs = _shapes_in(ctx)
    out = RooflineShape.from_aval(ctx.avals_out[0])
    return RooflineResult(
        unfused_flops=_conv_flops(lhs, rhs, out, window_strides, padding, lhs_dilation, rhs_dilation,
                                  dimension_numbers, batch_group_count),
        unfused_hbm_bytes=lhs.bytes + rhs.bytes + out.bytes)


# ---------------------------------------------------------------- collectives (inside shard_map)
def _axes(names: Any) -> tuple:
    return tuple(names) if isinstance(names, (tuple, list)) else (names,)


def _mesh_shape(ctx: RooflineRuleContext, axes: tuple) -> dict:
    if ctx.mesh is None:
        raise ValueError(f"roofline: {ctx.primitive.name} over {axes} needs a mesh; pass roofline(f, mesh=..., "
                         "in_specs=..., out_specs=...)")
    shape = dict(ctx.mesh.shape)
    for a in axes:
        if a not in shape:
            raise ValueError(f"roofline: {ctx.primitive.name} names axis {a!r}, which the mesh (axes "
                             f"{tuple(shape)}) lacks")
    return shape


def _zeros_if_one_sized(ctx: RooflineRuleContext, axes: tuple) -> RooflineResult | None:
    mesh = _mesh_shape(ctx, axes)
    if np.prod([mesh[a] for a in axes]) > 1:
        return None
    return RooflineResult(ici_bytes={a: 0 for a in axes}, ici_latency={a: 0 for a in axes})


def _ring_collective_roofline(ctx: RooflineRuleContext, *args: Any, axes: Any, is_reduce: bool = True,
                              **kw: Any) -> RooflineResult:
    axes = _axes(axes)
    if (zeros := _zeros_if_one_sized(ctx, axes)) is not None:
        return zeros
    mesh = _mesh_shape(ctx, axes)
    shard = RooflineShape.total_bytes(ctx.avals_in)
    if is_reduce:
        shard /= np.prod([mesh[a] for a in axes])
    # The axis with the most devices is the bottleneck; one phase per axis, the shard growing each phase.
    order = sorted(axes, key=lambda a: mesh[a], reverse=True)
    shard //= len(order)
    ici = 0
    for a in order:
        ici += shard * (mesh[a] - 1)
        shard *= mesh[a]
    latency = mesh[order[0]] * len(order)
    return RooflineResult(ici_bytes={a: int(ici) for a in order}, ici_latency={a: int(latency) for a in order})


@register_roofline(_prim("psum_scatter"))
def _psum_scatter_roofline(ctx: RooflineRuleContext, *args: Any, axis_name: Any, **kw: Any) -> RooflineResult:
    return _ring_collective_roofline(ctx, *args, axes=axis_name)


@register_roofline(_prim("all_gather"))
def _all_gather_roofline(ctx: RooflineRuleContext, *args: Any, axis_name: Any, **kw: Any) -> RooflineResult:
    return _ring_collective_roofline(ctx, *args, axes=axis_name, is_reduce=False)


def _scalar_collective_roofline(ctx: RooflineRuleContext, *args: Any, axis_name: Any, **kw: Any) -> RooflineResult:
    # pmin/pmax are costed as a ring over one element per operand (JAX's model).
    ctx = replace(ctx, avals_in=[ShapedArray((1,), RooflineShape.from_aval(a).dtype) for a in ctx.avals_in])
    return _ring_collective_roofline(ctx, *args, axes=axis_name, is_reduce=False)


register_roofline(_prim("pmin"))(_scalar_collective_roofline)
register_roofline(_prim("pmax"))(_scalar_collective_roofline)


@register_roofline(_prim("psum_invariant"))
def _psum_invariant_roofline(ctx: RooflineRuleContext, *args: Any, axes: Any, **kw: Any) -> RooflineResult:
    # A reduce-scatter then an all-gather: twice the ring.
    ring = _ring_collective_roofline(ctx, *args, axes=axes)
    return RooflineResult(ici_bytes={k: v * 2 for k, v in ring.ici_bytes.items()},
                          ici_latency={k: v * 2 for k, v in ring.ici_latency.items()})


@register_roofline(_prim("all_to_all"))
def _all_to_all_roofline(ctx: RooflineRuleContext, *args: Any, axis_name: Any, **kw: Any) -> RooflineResult:
    axes = _axes(axis_name)
    if (zeros := _zeros_if_one_sized(ctx, axes)) is not None:
        return zeros
    mesh = _mesh_shape(ctx, axes)
    size = RooflineShape.total_bytes(ctx.avals_in) * np.prod([mesh[a] for a in axes])
    smallest = sorted(axes, key=lambda a: mesh[a])[0]
    bisection = mesh[smallest] ** (len(axes) - 1)
    if mesh[smallest] > 2:
        bisection *= 2  # wraparound links
    ici = size / 2 / bisection  # half the data crosses the bisection
    latency = sum(mesh[a] / 2 for a in axes)
    return RooflineResult(ici_bytes={a: int(ici) for a in axes}, ici_latency={a: int(latency) for a in axes})


@register_roofline(_prim("ppermute"))
def _ppermute_roofline(ctx: RooflineRuleContext, *args: Any, axis_name: Any, perm: Any, **kw: Any) -> RooflineResult:
    axes = _axes(axis_name)
    if (zeros := _zeros_if_one_sized(ctx, axes)) is not None:
        return zeros
    mesh = _mesh_shape(ctx, axes)
    dims = [mesh.get(a, 1) for a in axes]
    shard = RooflineShape.total_bytes(ctx.avals_in)
    contention: dict[tuple, float] = defaultdict(float)
    latency = 0
    for src, dst in perm:
        if src == dst:
            continue
        s = tuple(int(i) for i in np.unravel_index(src, dims))
        d = tuple(int(i) for i in np.unravel_index(dst, dims))
        hops = 0
        for i, n in enumerate(dims):
            if s[i] == d[i]:
                continue
            fwd, back = (d[i] - s[i]) % n, (s[i] - d[i]) % n
            step = 1 if fwd <= back else -1
            pos = s[i]
            while pos != d[i]:
                here = s[:i] + (pos,) + s[i + 1:]
                nxt = (pos + step) % n
                there = here[:i] + (nxt,) + here[i + 1:]
                contention[tuple(sorted([here, there]))] += 1
                pos = nxt
            hops += min(fwd, back)
        latency = max(latency, hops)
    ici = shard * max(contention.values(), default=0)
    return RooflineResult(ici_bytes={a: int(ici) for a in axes}, ici_latency={a: int(latency) for a in axes})


# ---------------------------------------------------------------- gather / scatter
def _gather_flops(mode: Any, indices_size: int, output_size: int) -> int:
    # FILL_OR_DROP checks each index (upper bound, lower bound, and, reduce per window: four ops per index)
    # and masks the output (one select per element).
    if _mode_name(mode) == "FILL_OR_DROP":
        return indices_size * 4 + output_size
    return 0


def _mode_name(mode: Any) -> str:
    name = getattr(mode, "name", None)
    return name if isinstance(name, str) else str(mode).rsplit(".", 1)[-1].upper()


@register_roofline(_prim("gather"))
def _gather_roofline(ctx: RooflineRuleContext, *args: Any, mode: Any = None, **kw: Any) -> RooflineResult:
    _, indices = _shapes_in(ctx)[:2]
    out = RooflineShape.from_aval(ctx.avals_out[0])
    # A gather reads only what it copies: the output's bytes twice and the indices.
    return RooflineResult(unfused_flops=_gather_flops(mode, indices.size, out.size),
                          unfused_hbm_bytes=out.bytes * 2 + indices.bytes)


def _scatter_roofline_with(flops_per_update: int):
    def rule(ctx: RooflineRuleContext, *args: Any, **kw: Any) -> RooflineResult:
        _, indices, updates = _shapes_in(ctx)[:3]
        # The operand, the result and the updates (each as big as the updates), and the indices.
        return RooflineResult(unfused_flops=flops_per_update * updates.size,
                              unfused_hbm_bytes=3 * updates.bytes + indices.bytes)

    return rule


# scatter_add/sub/mul/min/max combine each update with one binary op; a plain scatter only copies.
for _name in ("scatter_add", "scatter_sub", "scatter_max", "scatter_min", "scatter_mul"):
    register_roofline(_prim(_name))(_scatter_roofline_with(1))
register_roofline(_prim("scatter"))(_scatter_roofline_with(0))


@register_roofline(_prim("reduce_sum"))
def _reduce_sum_roofline(ctx: RooflineRuleContext, *args: Any, axes: Sequence[int], **kw: Any) -> RooflineResult:
    (x,) = _shapes_in(ctx)
    domain = int(np.prod([x.shape[i] for i in axes]))
    result_size = int(np.prod([x.shape[i] for i in set(range(len(x.shape))) - set(axes)]))
    # n - 1 adds per result element; the input read once and the result (the accumulator) written.
    return RooflineResult(unfused_flops=(domain - 1) * result_size,
                          unfused_hbm_bytes=int(x.dtype.itemsize * (x.size + result_size)))


@register_roofline(_prim("select_n"))
def _select_n_roofline(ctx: RooflineRuleContext, *args: Any, **kw: Any) -> RooflineResult:
    x = RooflineShape.from_aval(ctx.avals_in[0])
    out = RooflineShape.from_aval(ctx.avals_out[0])
    return RooflineResult(unfused_flops=out.size, unfused_hbm_bytes=x.bytes + out.bytes)


# ---------------------------------------------------------------- host callbacks
def _callback_with_output_roofline(ctx: RooflineRuleContext, *args: Any, **kw: Any) -> RooflineResult:
    # The operands go to the host and the results come back; the callback's own work is not seen.
    return RooflineResult(unfused_hbm_bytes=RooflineShape.total_bytes(_arrays(ctx.avals_in))
                          + RooflineShape.total_bytes(_arrays(ctx.avals_out)))


def _arrays(avals: Sequence[Any]) -> list:
    return [a for a in avals if isinstance(a, ShapedArray)]


register_roofline(_prim("pure_callback"))(_callback_with_output_roofline)
register_roofline(_prim("io_callback"))(_callback_with_output_roofline)


@register_roofline(_prim("debug_callback"))
def _debug_callback_roofline(ctx: RooflineRuleContext, *args: Any, **kw: Any) -> RooflineResult:
    # Nothing comes back to the program: only the operands' bytes.
    return RooflineResult(unfused_hbm_bytes=RooflineShape.total_bytes(_arrays(ctx.avals_in)))
