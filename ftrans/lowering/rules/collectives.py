"""Lowering of the collectives over ``pmap`` axes: cross-replica StableHLO ops with replica groups.

A ``pmap`` program runs as ``R`` replicas (``ftrans/lowering/parallel.py``).
While its body is lowered, the module's ``replica_axes`` lists the named axes
the code is mapped over, outermost first (one per enclosing ``pmap``).  Replica
``r``'s position along them is ``r`` written in the mixed radix of their sizes,
with a last digit for replicas no axis tells apart (``R`` may exceed the
product when a sibling nested ``pmap`` is larger), exactly the layout XLA's
device assignment gives.  A collective over some of the names talks to the
replicas that agree on every other digit: those are its replica groups.
Collectives over ``vmap`` axes never reach the lowering (vmap batches them away).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.prims import collectives as C
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of, stage
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, LoweringError, register_lowering

I32 = np.dtype(np.int32)


def _mesh(ctx: LoweringContext) -> tuple[list, list[int]]:
    m = ctx.module
    names = [n for n, _ in m.replica_axes]
    sizes = [s for _, s in m.replica_axes]
    if not names:
        raise LoweringError(
            f"{ctx.eqn.primitive.name} (from {ctx.eqn.source_info}) names axis "
            f"{ctx.eqn.params.get('axis_name')!r}, but it is being compiled outside any pmap "
            "(a collective inside jit must run inside pmap or vmap binding its axis)")
    rest = (m.num_partitions if m.meshes else m.num_replicas) // math.prod(sizes)
    return names + [None], sizes + [rest]


def _channel(ctx: LoweringContext, global_ids: bool = True) -> dict:
    """In a partitioned program (shard_map), collectives name devices by global id over a fresh channel."""
    m = ctx.module
    if not m.meshes:
        return {}
    n = getattr(m, "_channels", 0) + 1
    m._channels = n
    out = {"channel_handle": f"#stablehlo.channel_handle<handle = {n}, type = 1>"}
    if global_ids:
        out["use_global_device_ids"] = "unit"
    return out


def _dims_of(ctx: LoweringContext, axis_names: Any) -> tuple[list[int], list[int]]:
    names, sizes = _mesh(ctx)
    wanted = axis_names if isinstance(axis_names, tuple) else (axis_names,)
    dims = []
    for n in wanted:
        # The innermost axis of that name (a nested pmap may shadow an outer one).
        hits = [i for i, m in enumerate(names) if m == n]
        if not hits:
            raise LoweringError(f"{ctx.eqn.primitive.name}: axis {n!r} is not a pmap axis of this program")
        dims.append(hits[-1])
    return dims, sizes


def groups(ctx: LoweringContext, axis_names: Any) -> np.ndarray:
    """Replica groups (rows) for a collective over ``axis_names``; in each row, ordered along those axes."""
    dims, sizes = _dims_of(ctx, axis_names)
    ids = np.arange(math.prod(sizes)).reshape(sizes)
    others = [d for d in range(len(sizes)) if d not in dims]
    ids = np.transpose(ids, others + dims)
    return ids.reshape(-1, math.prod(sizes[d] for d in dims))


def grouped(ctx: LoweringContext, axis_names: Any, axis_index_groups: Any) -> np.ndarray:
    """``groups``, each row split further by ``axis_index_groups`` (indices along the axes) when given."""
    g = groups(ctx, axis_names)
    if axis_index_groups is None:
        return g
    return np.array([[row[i] for i in grp] for row in g for grp in axis_index_groups])


def int_matrix(g: np.ndarray) -> str:
    """A 2-D i64 elements attribute written out (``dense<[[0, 1], [2, 3]]>``), readable in printed modules."""
    g = np.asarray(g, np.int64)
    return f"dense<{g.tolist()}> : tensor<{g.shape[0]}x{g.shape[1]}xi64>"


_groups_attr = int_matrix


def axis_index(ctx: LoweringContext, name: Any) -> str:
    """This replica's int32 index along the pmap axis ``name``."""
    (d,), sizes = _dims_of(ctx, name)
    auto = getattr(ctx.module, "auto_axes", None)
    if auto and auto[1]:
        # A partially manual shard_map body: the partition id means nothing while some mesh axes are left
        # to the partitioner, so (as JAX's) the index is computed in a manual computation over those axes.
        if sizes[d] == 1:
            return ctx.scalar(0, I32)
        from ftrans.lowering.rules.shard_map import _region

        sym, rest = auto
        region = _region(ctx.fn, [], lambda f, _: [_axis_index_ops(f, d, sizes, True)])
        return ctx.emit("sdy.manual_computation", [], [mt.tensor_type((), I32)],
                        {"in_shardings": "#sdy.sharding_per_value<[]>",
                         "out_shardings": f"#sdy.sharding_per_value<[<@{sym}, []>]>",
                         "manual_axes": "#sdy<manual_axes{" + ", ".join(f'"{a}"' for a in rest) + "}>"},
                        [region])[0]
    return _axis_index_ops(ctx.fn, d, sizes, bool(ctx.module.meshes))


def _axis_index_ops(f: mt.FuncEmitter, d: int, sizes: Any, partitioned: bool) -> str:
    stride = math.prod(sizes[d + 1:])
    op = "stablehlo.partition_id" if partitioned else "stablehlo.replica_id"
    rid = f.emit(op, [], [mt.tensor_type((), np.dtype(np.uint32))])[0]
    r = f.emit("stablehlo.convert", [rid], [mt.tensor_type((), I32)])[0]

    def const(v: int) -> str:
        return f.constant(np.asarray(v, I32))

    if stride != 1:
        r = f.emit("stablehlo.divide", [r, const(stride)], [mt.tensor_type((), I32)])[0]
    if sizes[d] * stride != math.prod(sizes):
        r = f.emit("stablehlo.remainder", [r, const(sizes[d])], [mt.tensor_type((), I32)])[0]
    return r


@register_lowering(C.axis_index_p)
def _axis_index_lowering(ctx: LoweringContext, *, axis_name: Any) -> str:
    return axis_index(ctx, axis_name)


def _all_reduce(op: str, bool_op: str) -> Any:
    def rule(ctx: LoweringContext, x: str, *, axis_name: Any, axis_index_groups: Any) -> str:
        aval = ctx.avals_in[0]
        body = bool_op if aval.dtype == dtypes.bool_ else op
        region = ctx.reduce_region(body, aval.dtype)
        return ctx.emit1("stablehlo.all_reduce", [x], mt.aval_type(aval),
                         {"replica_groups": _groups_attr(grouped(ctx, axis_name, axis_index_groups)),
                          **_channel(ctx)}, [region])

    return rule


register_lowering(C.psum_p)(_all_reduce("stablehlo.add", "stablehlo.or"))
register_lowering(C.pmax_p)(_all_reduce("stablehlo.maximum", "stablehlo.or"))


@register_lowering(C.psum_invariant_p)
def _psum_invariant_lowering(ctx: LoweringContext, x: str, *, axes: tuple) -> str:
    return _all_reduce("stablehlo.add", "stablehlo.or")(ctx, x, axis_name=axes, axis_index_groups=None)


@register_lowering(C.preduced_p)
@register_lowering(C.vary_unreduced_cast_p)
@register_lowering(C.reduced_vary_cast_p)
@register_lowering(C.pvary_p)
def _pvary_lowering(ctx: LoweringContext, x: str, *, axes: tuple) -> str:
    return x  # a change of type only
register_lowering(C.pmin_p)(_all_reduce("stablehlo.minimum", "stablehlo.and"))


def _reshape(ctx: LoweringContext, x: str, shape: tuple, dtype: Any) -> str:
    return ctx.emit1("stablehlo.reshape", [x], mt.tensor_type(shape, dtype))


@register_lowering(C.all_gather_p)
def _all_gather_lowering(ctx: LoweringContext, x: str, *, axis_name: Any, axis: int, tiled: bool,
                         axis_index_groups: Any = None, to: str = "varying") -> str:
    aval = ctx.avals_in[0]
    if not tiled:
        shape = aval.shape[:axis] + (1,) + aval.shape[axis:]
        x = _reshape(ctx, x, shape, aval.dtype)
    return ctx.emit1("stablehlo.all_gather", [x], mt.aval_type(ctx.avals_out[0]), {
        "all_gather_dim": f"{axis} : i64",
        "replica_groups": _groups_attr(grouped(ctx, axis_name, axis_index_groups)),
        **_channel(ctx)})


@register_lowering(C.all_gather_reduced_p)
def _all_gather_reduced_lowering(ctx: LoweringContext, x: str, *, all_gather_dimension: int, axis_name: tuple,
                                 axis_size: int, tiled: bool) -> str:
    return _all_gather_lowering(ctx, x, axis_name=axis_name, axis=all_gather_dimension, tiled=tiled)


@register_lowering(C.unreduced_psum_p)
def _unreduced_psum_lowering(ctx: LoweringContext, x: str, *, axes: tuple) -> str:
    return _all_reduce("stablehlo.add", "stablehlo.or")(ctx, x, axis_name=axes, axis_index_groups=None)


@register_lowering(C.all_to_all_p)
def _all_to_all_lowering(ctx: LoweringContext, x: str, *, axis_name: Any, split_axis: int, concat_axis: int,
                         tiled: bool, axis_index_groups: Any = None) -> str:
    aval = ctx.avals_in[0]
    g = grouped(ctx, axis_name, axis_index_groups)
    n = g.shape[1]
    if tiled:
        return ctx.emit1("stablehlo.all_to_all", [x], mt.aval_type(ctx.avals_out[0]), {
            "split_dimension": f"{split_axis} : i64", "concat_dimension": f"{concat_axis} : i64",
            "split_count": f"{n} : i64", "replica_groups": _groups_attr(g), **_channel(ctx, False)})
    # Untiled: exchange one slice of the split axis with each member (their order then indexes that axis),
    # then move the axis to where the result keeps it.
    y = ctx.emit1("stablehlo.all_to_all", [x], mt.aval_type(aval), {
        "split_dimension": f"{split_axis} : i64", "concat_dimension": f"{split_axis} : i64",
        "split_count": f"{n} : i64", "replica_groups": _groups_attr(g), **_channel(ctx, False)})
    perm = list(range(len(aval.shape)))
    d = perm.pop(split_axis)
    perm.insert(concat_axis, d)
    if perm == sorted(perm):
        return y
    return ctx.emit1("stablehlo.transpose", [y], mt.aval_type(ctx.avals_out[0]),
                     {"permutation": mt.i64_array(perm)})


@register_lowering(C.ppermute_p)
def _ppermute_lowering(ctx: LoweringContext, x: str, *, axis_name: Any, perm: tuple) -> str:
    aval = ctx.avals_in[0]
    g = groups(ctx, axis_name)
    pairs = [(int(row[s]), int(row[d])) for row in g for s, d in perm]
    if not pairs:
        zero = ctx.scalar(0, aval.dtype)
        return ctx.broadcast(zero, aval.update(shape=()), aval.shape, ())
    return ctx.emit1("stablehlo.collective_permute", [x], mt.aval_type(aval), {
        "source_target_pairs": int_matrix(np.array(pairs)), **_channel(ctx, False)})


@register_lowering(C.psum_scatter_p)
def _psum_scatter_lowering(ctx: LoweringContext, x: str, *, axis_name: Any, scatter_dimension: int,
                           tiled: bool, axis_index_groups: Any = None) -> str:
    aval = ctx.avals_in[0]
    out = ctx.avals_out[0]
    g = grouped(ctx, axis_name, axis_index_groups)
    shape = list(aval.shape)
    shape[scatter_dimension] //= g.shape[1]
    region = ctx.reduce_region("stablehlo.add", aval.dtype)
    y = ctx.emit1("stablehlo.reduce_scatter", [x], mt.tensor_type(tuple(shape), aval.dtype), {
        "scatter_dimension": f"{scatter_dimension} : i64", "replica_groups": _groups_attr(g), **_channel(ctx)},
        [region])
    if tuple(shape) != tuple(out.shape):
        y = _reshape(ctx, y, out.shape, out.dtype)
    return y


@register_lowering(C.unreduced_reduce_scatter_p)
def _unreduced_reduce_scatter_lowering(ctx: LoweringContext, x: str, *, axis_name: tuple, scatter_dimension: int,
                                       axis_size: int, tiled: bool) -> str:
    return _psum_scatter_lowering(ctx, x, axis_name=axis_name, scatter_dimension=scatter_dimension, tiled=tiled)


# ----------------------------------------------------------------------------
# ragged_all_to_all: XLA's op on GPU and TPU; on CPU (which has none) a dense all_to_all of padded slices


def _index_dtype(avals: list) -> np.dtype:
    return np.dtype(np.int64) if any(np.dtype(a.dtype).itemsize > 4 for a in avals) else I32


def _scalar_at(v: Any, i: int, dt: np.dtype) -> Any:
    """``v[i]`` of a 1-D index array, as a rank-0 value of ``dt``."""
    s = S.slice_p.bind(v, start_indices=(i,), limit_indices=(i + 1,), strides=None)
    s = S.reshape_p.bind(s, new_sizes=(), dimensions=None)
    if aval_of(s).dtype != dt:
        s = S.convert_element_type_p.bind(s, new_dtype=dt, weak_type=False)
    return s


def _zeros(shape: tuple, dtype: Any) -> Any:
    return S.broadcast_in_dim_p.bind(np.zeros((), dtype), shape=shape, broadcast_dimensions=())


def _ragged_pack(operand: ShapedArray, io: ShapedArray, ss: ShapedArray, dt: np.dtype) -> Any:
    """``S[i, r] = operand[io[i] + r]`` for ``r < ss[i]``, else 0: each slice padded to the operand's length."""
    n_rows, rest = operand.shape[0], tuple(operand.shape[1:])
    block = (n_rows, *rest)
    k = io.shape[0]

    def run(x: Any, offs: Any, sizes: Any) -> list:
        zero = _zeros(block, operand.dtype)
        padded = S.concatenate_p.bind(x, zero, dimension=0)
        rows = S.iota_p.bind(dtype=dt, shape=block, dimension=0)
        pieces = []
        for i in range(k):
            start, size = _scalar_at(offs, i, dt), _scalar_at(sizes, i, dt)
            sl = S.dynamic_slice_p.bind(padded, start, *[np.zeros((), dt)] * len(rest), slice_sizes=block)
            keep = E.lt_p.bind(rows, S.broadcast_in_dim_p.bind(size, shape=block, broadcast_dimensions=()))
            sl = S.select_n_p.bind(keep, zero, sl)
            pieces.append(S.reshape_p.bind(sl, new_sizes=(1, *block), dimensions=None))
        return [S.concatenate_p.bind(*pieces, dimension=0)]

    return stage(run, [operand, io, ss])[0]


def _ragged_meta(oo: ShapedArray, ss: ShapedArray, dt: np.dtype) -> Any:
    """``[output_offsets, send_sizes]`` as one ``(K, 2)`` array of ``dt`` (exchanged in one all_to_all)."""
    k = oo.shape[0]

    def run(a: Any, b: Any) -> list:
        cols = []
        for v in (a, b):
            if aval_of(v).dtype != dt:
                v = S.convert_element_type_p.bind(v, new_dtype=dt, weak_type=False)
            cols.append(S.reshape_p.bind(v, new_sizes=(k, 1), dimensions=None))
        return [S.concatenate_p.bind(*cols, dimension=1)]

    return stage(run, [oo, ss])[0]


def _ragged_unpack(output: ShapedArray, recv: ShapedArray, meta: ShapedArray, dt: np.dtype) -> Any:
    """``output`` with received slice ``i`` (its first ``meta[i, 1]`` rows) written at row ``meta[i, 0]``."""
    k, n_rows = recv.shape[0], recv.shape[1]
    m_rows, rest = output.shape[0], tuple(output.shape[1:])
    block = (n_rows, *rest)

    def run(out: Any, got: Any, offs_sizes: Any) -> list:
        buf = S.concatenate_p.bind(out, _zeros(block, output.dtype), dimension=0)
        rows = S.iota_p.bind(dtype=dt, shape=block, dimension=0)
        zeros = [np.zeros((), dt)] * len(rest)
        for i in range(k):
            pair = S.reshape_p.bind(S.slice_p.bind(offs_sizes, start_indices=(i, 0), limit_indices=(i + 1, 2),
                                                   strides=None), new_sizes=(2,), dimensions=None)
            start, size = _scalar_at(pair, 0, dt), _scalar_at(pair, 1, dt)
            cur = S.dynamic_slice_p.bind(buf, start, *zeros, slice_sizes=block)
            new = S.slice_p.bind(got, start_indices=(i, 0) + (0,) * len(rest), limit_indices=(i + 1, *block),
                                 strides=None)
            new = S.reshape_p.bind(new, new_sizes=block, dimensions=None)
            keep = E.lt_p.bind(rows, S.broadcast_in_dim_p.bind(size, shape=block, broadcast_dimensions=()))
            buf = S.dynamic_update_slice_p.bind(buf, S.select_n_p.bind(keep, cur, new), start, *zeros)
        return [S.slice_p.bind(buf, start_indices=(0,) * (1 + len(rest)), limit_indices=(m_rows, *rest),
                               strides=None)]

    return stage(run, [output, recv, meta])[0]


def _call_program(ctx: LoweringContext, closed: Any, name: str, args: list) -> str:
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    sym = ctx.module.function(closed.jaxpr, name)
    return ctx.fn.emit("func.call", consts + list(args), [mt.aval_type(a) for a in closed.out_avals],
                       {"callee": f"@{sym}"})[0]


@register_lowering(C.ragged_all_to_all_p)
def _ragged_all_to_all_lowering(ctx: LoweringContext, operand: str, output: str, input_offsets: str,
                                send_sizes: str, output_offsets: str, recv_sizes: str, *, axis_name: Any,
                                axis_index_groups: Any) -> str:
    g = groups(ctx, axis_name)
    out_aval = ctx.avals_out[0]
    if ctx.platform != "cpu":
        cfg = f"replica_groups = {_groups_attr(g)}"
        if ctx.module.meshes:  # a partitioned program: JAX's fixed collective channel
            cfg = "channel_id = 1 : i64, " + cfg
        return ctx.emit1("stablehlo.custom_call",
                         [operand, output, input_offsets, send_sizes, output_offsets, recv_sizes],
                         mt.aval_type(out_aval), {"api_version": "4 : i32", "backend_config": "{" + cfg + "}",
                                                  "call_target_name": '"ragged_all_to_all"'})
    op_aval, o_aval, io_aval, ss_aval, oo_aval, _ = ctx.avals_in
    dt = _index_dtype(ctx.avals_in[2:])
    n = g.shape[1]
    a2a = {"split_dimension": "0 : i64", "concat_dimension": "0 : i64", "split_count": f"{n} : i64",
           "replica_groups": _groups_attr(g)}
    pack = _ragged_pack(op_aval, io_aval, ss_aval, dt)
    sent = _call_program(ctx, pack, "ragged_all_to_all_pack", [operand, input_offsets, send_sizes])
    got = ctx.emit1("stablehlo.all_to_all", [sent], ctx.type_of(sent), {**a2a, **_channel(ctx, False)})
    meta = _call_program(ctx, _ragged_meta(oo_aval, ss_aval, dt), "ragged_all_to_all_meta",
                         [output_offsets, send_sizes])
    meta = ctx.emit1("stablehlo.all_to_all", [meta], ctx.type_of(meta), {**a2a, **_channel(ctx, False)})
    unpack = _ragged_unpack(o_aval, pack.out_avals[0], ShapedArray((io_aval.shape[0], 2), dt, False), dt)
    return _call_program(ctx, unpack, "ragged_all_to_all_unpack", [output, got, meta])
