"""Lowering of the host callbacks (``ftrans/core/prims/callbacks.py``).

Each becomes XLA's host-callback custom call, the typed-FFI target jaxlib registers
(``xla_ffi_python_cpu_callback``; the GPU one on a GPU, see ``compat.compile``): the
call names an index into the module's ``host_callbacks``, the Python functions handed
to the compiler with the module. ``debug_callback`` and ``io_callback`` are marked
``has_side_effect`` so XLA keeps them when nothing reads their results; an ordered
one also takes and returns a token, threaded through the function (or loop body,
branch) being lowered, so they run in program order.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.prims.callbacks import (
    dce_sink_p,
    debug_callback_p,
    debug_print_p,
    inspect_sharding_p,
    io_callback_p,
    pure_callback_p,
)
from ftrans.errors import FtransNotImplementedError, FtransValueError
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.rules.ffi import layouts_text

TARGET = "xla_ffi_python_cpu_callback"
PARTITIONED_TARGET = "xla_ffi_partitioned_python_cpu_callback"  # (runs on each device's own shards)


def _with_token(host_fn: Any) -> Any:
    """The runtime passes an ordered call's token to the callback first and expects it back first."""
    def run(token: Any, *arrays: Any) -> tuple:
        return (token, *host_fn(*arrays))

    return run


def _placement(ctx: LoweringContext, sharding: Any, n_results: int) -> list[str] | None:
    """The call's ``sdy.sharding``, one entry per result, in a partitioned program (None in any other).

    Inside a ``shard_map`` body (every mesh axis manual) the program is per-device code: the call runs on
    every device, replicated over the empty mesh. Elsewhere the program is over whole arrays: the call
    runs once, on the device ``sharding`` names (the program's first device without one), as in JAX.
    """
    m = ctx.module
    if not m.meshes:
        return None
    if m.replica_axes:  # lowering a manual region's body
        if sharding is not None:
            raise FtransNotImplementedError(
                f"callbacks do not support specifying sharding inside spmd computations (the callback at "
                f"{ctx.eqn.source_info} runs on every device of its shard_map); drop sharding=")
        sym = m.empty_mesh()
        dims = ["[" + ", ".join(["{}"] * len(a.shape)) + "]" for a in ctx.avals_out]
        if len(ctx.avals_out) < n_results:  # the token comes first
            dims = ["[]", *dims]
        return [f"<@{sym}, {d}>" for d in dims or ["[]"]]
    index = 0
    if sharding is not None:
        devices = getattr(sharding, "device_set", None)
        if devices is None or len(devices) != 1:
            raise FtransNotImplementedError(
                f"a callback's sharding must name one device (a SingleDeviceSharding), got {sharding!r} (the "
                f"callback at {ctx.eqn.source_info})")
        device = next(iter(devices))
        ids = [d.id for d in m.device_assignment]
        if device.id not in ids:
            raise FtransValueError(
                f"Sharding provided to the callback at {ctx.eqn.source_info} specifies a device {device} that "
                f"is not in the device assignment ({m.device_assignment})")
        index = ids.index(device.id)
    sym = m.maximal_mesh(index)
    return [f"<@{sym}, []>"] * max(1, n_results)


def _per_value(entries: list[str]) -> str:
    return "#sdy.sharding_per_value<[" + ", ".join(entries) + "]>"


def _emit(ctx: LoweringContext, host_fn: Any, args: tuple, side_effect: bool, ordered: bool,
          sharding: Any = None, partitioned: bool = False) -> list[str]:
    index = ctx.module.add_host_callback(_with_token(host_fn) if ordered else host_fn)
    fn = ctx.fn
    operands = list(args)
    result_types = [mt.aval_type(a) for a in ctx.avals_out]
    placement = None if partitioned else _placement(ctx, sharding, len(result_types) + ordered)
    if ordered:
        token = getattr(fn, "callback_token", None)
        if token is None:
            tok_attrs = {}
            if placement is not None:
                tok_attrs["sdy.sharding"] = _per_value(placement[:1])
            token = fn.emit("stablehlo.create_token", [], ["!stablehlo.token"], tok_attrs)[0]
        operands = [token, *operands]
        result_types = ["!stablehlo.token", *result_types]
    attrs = {
        "api_version": "4 : i32",
        "backend_config": f"{{index = {index} : ui64}}",
        "call_target_name": f'"{PARTITIONED_TARGET if partitioned else TARGET}"',
        "has_side_effect": "true" if side_effect else "false",
    }
    if placement is not None:
        attrs["sdy.sharding"] = _per_value(placement)
    if partitioned:  # XLA's partitioner of this target needs the layouts spelt out (row-major; a token's empty)
        ranks = [0] * ordered + [len(a.shape) for a in ctx.avals_in]
        attrs["operand_layouts"] = layouts_text([range(r - 1, -1, -1) for r in ranks])
        attrs["result_layouts"] = layouts_text([()] * ordered + [range(len(a.shape) - 1, -1, -1)
                                                                  for a in ctx.avals_out])
    outs = ctx.emit("stablehlo.custom_call", operands, result_types, attrs)
    if ordered:
        fn.callback_token = outs[0]
        outs = outs[1:]
    return outs


# Every effectful callback threads the token, ordered or not: unordered prints then also come out in
# program order (JAX gives no guarantee for them; XLA's CPU runtime would otherwise reorder them).


@register_lowering(debug_print_p)
@register_lowering(debug_callback_p)
def _debug_callback_lowering(ctx: LoweringContext, *args: str, callback: Any, ordered: bool,
                             partitioned: bool = False) -> list[str]:
    if partitioned and ctx.module.replica_axes:  # per-device code (a shard_map body) calls it per device anyway
        partitioned = False
    auto = getattr(ctx.module, "auto_axes", None)
    if auto and auto[1] and ctx.module.replica_axes and not ctx.avals_out:
        return _in_manual_over(ctx, auto, args, lambda: _debug_callback_lowering(
            ctx, *ctx.fn.region_args, callback=callback, ordered=ordered, partitioned=partitioned))
    # A partitioned call takes no token unless ordered (XLA's partitioner of its target takes arrays only;
    # an ordered one is refused in a program over several devices, see ``check_no_ordered_effects``).
    return _emit(ctx, callback.host_fn(()), args, True, ordered or not partitioned, partitioned=partitioned)


def _in_manual_over(ctx: LoweringContext, auto: tuple, args: tuple, lower: Any) -> list[str]:
    """In a partially manual shard_map body (XLA cannot replicate a side effect over the axes left to the
    partitioner): the call in a manual computation over those axes, its operands gathered whole along
    them, made by the devices at index 0 along them only (as JAX's)."""
    import numpy as np

    from ftrans.lowering.rules.collectives import _axis_index_ops
    from ftrans.lowering.rules.shard_map import _region

    m = ctx.module
    sym, rest = auto
    saved_fn, saved_auto = ctx.fn, m.auto_axes
    names, sizes = [n for n, _ in m.replica_axes], [s for _, s in m.replica_axes]
    i32 = mt.tensor_type((), np.dtype(np.int32))

    def call(g: mt.FuncEmitter, bargs: list) -> list:
        ctx.fn, m.auto_axes = g, None
        g.region_args = bargs
        try:
            lower()
        finally:
            ctx.fn, m.auto_axes = saved_fn, saved_auto
        return []

    def body(f: mt.FuncEmitter, bargs: list) -> list:
        tot = None
        for a in rest:
            r = _axis_index_ops(f, names.index(a), sizes, True)
            tot = r if tot is None else f.emit("stablehlo.add", [tot, r], [i32])[0]
        zero, one = f.constant(np.asarray(0, np.int32)), f.constant(np.asarray(1, np.int32))
        idx = f.emit("stablehlo.clamp", [zero, tot, one], [i32])[0]  # 0: this device makes the call
        f.emit("stablehlo.case", [idx], [], regions=[f.region([], lambda g, _: call(g, bargs)),
                                                      f.region([], lambda g, _: [])])
        return []

    region = _region(ctx.fn, [ctx.fn.types[a] for a in args], body)
    ins = [f"<@{sym}, [" + ", ".join(["{}"] * len(a.shape)) + "]>" for a in ctx.avals_in]
    ctx.emit("sdy.manual_computation", list(args), [],
             {"in_shardings": _per_value(ins), "out_shardings": _per_value([]),
              "manual_axes": "#sdy<manual_axes{" + ", ".join(f'"{a}"' for a in rest) + "}>"}, [region])
    return []


@register_lowering(pure_callback_p)
def _pure_callback_lowering(ctx: LoweringContext, *args: str, callback: Any, result_avals: tuple,
                            vmap_method: Any, sharding: Any = None) -> list[str]:
    return _emit(ctx, callback.host_fn(result_avals), args, False, False, sharding)


@register_lowering(io_callback_p)
def _io_callback_lowering(ctx: LoweringContext, *args: str, callback: Any, result_avals: tuple,
                          ordered: bool, sharding: Any = None) -> list[str]:
    return _emit(ctx, callback.host_fn(result_avals), args, True, True, sharding)


def check_no_ordered_effects(jaxpr: Any, devices: int, what: str) -> None:
    """Ordered debug callbacks are refused in a program run by several devices (JAX's ``ValueError``).

    An ordered ``io_callback`` is allowed there, as in JAX: in a program over whole arrays it runs once,
    on one device; in per-device code (``pmap``, ``shard_map``) each device keeps its own calls in program
    order. Either way the program's calls have finished before the next program starts.
    """
    if devices <= 1:
        return
    from ftrans.core.ir import all_jaxprs

    for j in all_jaxprs(jaxpr):
        for e in j.eqns:
            if (e.primitive is debug_callback_p or e.primitive is debug_print_p) and e.params.get("ordered"):
                raise FtransValueError(
                    f"The following ordered effects are not supported for more than 1 device: "
                    f"[ordered {e.primitive.name} at {e.source_info}] in {what} over {devices} devices; "
                    "use ordered=False there")


@register_lowering(dce_sink_p)
def _dce_sink_lowering(ctx: LoweringContext, *args: str, prevent_mlir_dce: bool) -> list[str]:
    """Nothing, or (``prevent_mlir_dce``) the side-effecting ``dce_sink`` FFI call XLA keeps, as JAX emits."""
    if prevent_mlir_dce:
        ctx.emit("stablehlo.custom_call", list(args), [], {
            "api_version": "4 : i32",
            "backend_config": "{}",
            "call_target_name": '"dce_sink"',
            "has_side_effect": "true",
        })
    return []


# ---------------------------------------------------------------- inspect_sharding
# In a program partitioned over several devices the value's layout is XLA's partitioner's choice, known only
# when it compiles: the lowering writes the ``InspectSharding`` custom call jaxlib gives a partitioner, whose
# ``backend_config`` names a Python function the partitioner calls with the operand's HLO sharding (as JAX
# lowers ``inspect_sharding_p``); that function states it over the program's mesh and calls the user's
# callback, then the partitioner drops the call. Elsewhere (one device, a manual shard_map body, no devices)
# the layout is known when lowering, and the callback is called then, as JAX's.

# The functions named by lowered modules' ``InspectSharding`` calls, by (user callback, mesh, rank): the bytes
# only point at them, so they live as long as the process (one per distinct callback, mesh and rank).
_inspectors: dict[tuple, tuple[Any, bytes]] = {}


def _reported(hlo: Any, mesh: Any, devices: list, ndim: int) -> Any:
    """An ``HloSharding`` as JAX's ``inspect_array_sharding`` reports it: a ``NamedSharding`` over the program's
    mesh (its spec without trailing unsplit dimensions), else JAX's ``GSPMDSharding`` of it."""
    from ftrans.core.sharding import NamedSharding, PartitionSpec

    if mesh is not None:
        if hlo.is_manual():
            return NamedSharding(mesh, PartitionSpec())
        from ftrans.lowering import compat

        compat.runtime_sharding(NamedSharding(mesh, PartitionSpec()), 0)  # (makes the mesh's runtime twin)
        spec = compat.spec_matching(hlo, mesh, ndim)
        if spec is not None:
            spec = list(spec)
            while spec and spec[-1] is None:
                spec.pop()
            return NamedSharding(mesh, PartitionSpec(*spec))
    from ftrans.lowering import compat

    return compat.gspmd_sharding(devices, hlo)


def _inspector(callback: Any, mesh: Any, devices: list, ndim: int) -> bytes:
    from ftrans.lowering import compat

    user = getattr(callback, "callback", callback)
    try:
        key = (user, mesh, tuple(d.id for d in devices), ndim)
        hash(key)
    except TypeError:  # an unhashable callable: a function of its own
        key = None
    got = _inspectors.get(key) if key is not None else None
    if got is not None:
        return got[1]

    def on_partitioned(hlo: Any) -> None:
        user(_reported(hlo, mesh, devices, ndim))

    config = compat.inspect_sharding_key(on_partitioned)
    _inspectors[key if key is not None else ("unhashable", id(on_partitioned))] = (on_partitioned, config)
    return config


def _mlir_bytes(data: bytes) -> str:
    """``data`` as an MLIR string literal's contents (printable ASCII as is, other bytes as ``\\XX``)."""
    return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)


@register_lowering(inspect_sharding_p)
def _inspect_sharding_lowering(ctx: LoweringContext, value: str, *, callback: Any) -> list[str]:
    from ftrans.core.sharding import NamedSharding, PartitionSpec

    m = ctx.module
    mesh = next((k for k, sym in m.meshes.items() if sym == "mesh"), None)
    devices = list(m.device_assignment)
    if mesh is None or not devices:  # one device (or no devices yet): what was known when it was traced
        pmap_mesh = m.pmap_mesh
        if pmap_mesh is not None:  # a pmap body's value: replicated over the pmap's devices, as JAX's pmap says
            callback(NamedSharding(pmap_mesh, PartitionSpec()))
        elif mesh is None:
            callback(getattr(callback, "fallback", None))
        return []
    if m.replica_axes or len(devices) == 1:  # a manual region's per-device value, or one device: replicated
        callback(NamedSharding(mesh, PartitionSpec()))
        return []
    ty = mt.aval_type(ctx.avals_in[0])
    ctx.emit("stablehlo.custom_call", [value], [ty], {
        "backend_config": f'"{_mlir_bytes(_inspector(callback, mesh, devices, len(ctx.avals_in[0].shape)))}"',
        "call_target_name": '"InspectSharding"',
        "has_side_effect": "true",
    })
    return []
