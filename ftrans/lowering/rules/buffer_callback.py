"""Lowering of ``buffer_callback`` (``ftrans/core/prims/buffer_callback.py``) and its eager rule.

The call becomes one ``stablehlo.custom_call`` of the typed-FFI target jaxlib's runtime registers for
buffer callbacks (``xla_buffer_python_cpu_callback``; ``xla_buffer_python_gpu_callback`` on a GPU, its
``_cmd_buffer`` variant there for ``command_buffer_compatible``), as JAX writes it: the call names an
index into the module's host callbacks (``backend_config = {index = i : ui64}``), the operands' and
results' layouts are row-major, ``output_operand_aliases`` carries ``input_output_aliases`` and
``has_side_effect`` keeps a call with side effects. The runtime runs the Python function with the
execution context, the input buffers and then the output buffers.

Eagerly a ``buffer_callback`` runs as a one-call XLA program (the buffers exist only in a running
program; there is no NumPy rule), compiled once per signature as on-device eager operations are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core.prims.buffer_callback import buffer_callback_p
from ftrans.errors import FtransValueError
from ftrans.lowering import mlir_text as mt
from ftrans.lowering.lower import LoweringContext, register_lowering
from ftrans.lowering.rules.ffi import layouts_text

_TARGETS = {"cpu": "xla_buffer_python_cpu_callback", "cuda": "xla_buffer_python_gpu_callback",
            "rocm": "xla_buffer_python_gpu_callback", "gpu": "xla_buffer_python_gpu_callback"}


def _row_major(avals: Any) -> str:
    return layouts_text([range(len(a.shape) - 1, -1, -1) for a in avals])


@register_lowering(buffer_callback_p)
def _buffer_callback_lowering(ctx: LoweringContext, *args: str, callback: Any, result_avals: tuple, in_tree: Any,
                              out_tree: Any, vmap_method: Any, has_side_effect: bool, input_output_aliases: tuple,
                              command_buffer_compatible: bool) -> list[str]:
    platform = ctx.platform or "cpu"
    target = _TARGETS.get(platform)
    if target is None:  # (JAX's ValueError)
        raise FtransValueError(f"`buffer_callback` not supported on {platform} backend (the callback {callback!r} "
                               "runs on CPU and GPU devices only)")
    if command_buffer_compatible and target.endswith("_gpu_callback"):
        target += "_cmd_buffer"
    index = ctx.module.add_host_callback(callback.host_fn(in_tree, out_tree))
    many = len(result_avals) > 1
    attrs = {
        "api_version": "4 : i32",
        "backend_config": f"{{index = {index} : ui64}}",
        "call_target_name": f'"{target}"',
        "called_computations": "[]",
        "has_side_effect": mt.bool_attr(has_side_effect),
        "operand_layouts": _row_major(ctx.avals_in),
        "result_layouts": _row_major(ctx.avals_out),
        "output_operand_aliases": "[" + ", ".join(
            f"#stablehlo.output_operand_alias<output_tuple_indices = {f'[{o}]' if many else '[]'}, "
            f"operand_index = {i}, operand_tuple_indices = []>" for i, o in input_output_aliases) + "]",
    }
    return ctx.emit("stablehlo.custom_call", list(args), [mt.aval_type(a) for a in ctx.avals_out], attrs)


def _buffer_callback_impl(*args: Any, **params: Any) -> list:
    """The host rule (NumPy arrays in and out): a one-call program run on the default device, whose results
    come back to the host. (Operands already on an accelerator take core's device path instead.)"""
    from ftrans.devices import default_device
    from ftrans.lowering import device_eager

    outs = device_eager.apply(buffer_callback_p, args, params, default_device())
    return [np.asarray(o) for o in outs]


buffer_callback_p.def_impl(_buffer_callback_impl)
