"""JAX's ``jax.experimental.buffer_callback``: a Python callback that works in place on device buffers.

``buffer_callback(callback, result_shape_dtypes)`` returns a function of arrays (and pytrees of them)
that runs ``callback(ctx, out, *args, **kwargs)`` inside the program computing it, where ``ctx`` is an
:class:`ExecutionContext`, ``out`` the results' :class:`Buffer` objects in ``result_shape_dtypes``'s
structure and ``args``/``kwargs`` the arguments' buffers in theirs. The callback writes its results
into ``out`` (``np.asarray(out)[...] = ...`` on the CPU, through ``__cuda_array_interface__`` or
``__dlpack__`` on a GPU) and returns ``None``. Eagerly and under ``jit`` alike the call runs in a
compiled program (the buffers exist only there); it is not differentiable and batches per
``vmap_method``. The primitive is ``ftrans/core/prims/buffer_callback.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftrans._callback import _result_avals
from ftrans.core import pytrees as tree_util
from ftrans.core.operands import as_operand
from ftrans.core.prims.buffer_callback import BufferCallback as _BufferCallback
from ftrans.core.prims.buffer_callback import ExecutionContext, buffer_callback_p
from ftrans.core.trace import aval_of
from ftrans.errors import FtransTypeError, FtransValueError, user_location
from ftrans.lowering import compat as _compat

__all__ = ["Buffer", "ExecutionContext", "ExecutionStage", "buffer_callback"]

# The runtime's own types: a ``Buffer`` is an array-like view of one device buffer of the running program
# (``shape``, ``dtype``, ``writeable``, ``__array__`` on the CPU, ``__cuda_array_interface__`` on a GPU,
# ``__dlpack__`` on both); ``ExecutionStage`` names the stage a callback runs in (``ExecutionStage.EXECUTE``).
Buffer, ExecutionStage = _compat.buffer_callback_types()


class ResultShapeDtypeError(FtransTypeError, AttributeError):
    """A leaf of ``result_shape_dtypes`` without ``shape``/``dtype``: a ``TypeError``, and an
    ``AttributeError`` as JAX's (which reads the missing attribute)."""


def buffer_callback(callback: Callable[..., None], result_shape_dtypes: object, *, has_side_effect: bool = False,
                    vmap_method: str | None = None, input_output_aliases: dict[int, int] | None = None,
                    command_buffer_compatible: bool = False) -> Callable[..., Any]:
    """JAX's ``jax.experimental.buffer_callback.buffer_callback``: a function that runs ``callback`` in place
    on device buffers (CPU and GPU).

    ``callback(ctx, out, *args, **kwargs)`` gets an :class:`ExecutionContext`, the output buffers (a pytree
    of :class:`Buffer` in the structure of ``result_shape_dtypes``) and the inputs' buffers in the structure
    of the arguments; it must write every output buffer and return ``None``.

    Args:
      callback: the Python function described above.
      result_shape_dtypes: a pytree of values with ``shape`` and ``dtype`` (``ShapeDtypeStruct``): the
        results, which the callback fills.
      has_side_effect: the call has side effects: it is kept when its results are unused.
      vmap_method: how ``vmap`` batches the call, as for :func:`ftrans.pure_callback` (``'sequential'``,
        ``'sequential_unrolled'``, ``'expand_dims'``, ``'broadcast_all'``, ``'legacy_vectorized'``;
        ``None``: it cannot be batched).
      input_output_aliases: ``{input index: output index}`` (flat indices): the output is written in the
        input's buffer (their shapes and dtypes must match).
      command_buffer_compatible: on a GPU, the callback may be recorded into a command buffer (CUDA graph)
        and replayed, so it runs once and its GPU work is replayed.

    Returns:
      A function of arrays (and pytrees of them) returning the results in ``result_shape_dtypes``'s structure.
    """
    result_avals, out_tree = _result_avals(result_shape_dtypes, "buffer_callback", allow_64_bit=True,
                                           error=ResultShapeDtypeError)
    result_avals = tuple(result_avals)
    cb = _BufferCallback(callback, user_location())

    def wrapped_callback(*args: Any, **kwargs: Any) -> Any:
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        ops = [as_operand(x) for x in flat]
        aliases: list[tuple[int, int]] = []
        if input_output_aliases is not None:
            in_avals = [aval_of(x) for x in ops]
            for i_idx, o_idx in sorted(input_output_aliases.items()):
                i_idx, o_idx = int(i_idx), int(o_idx)
                if i_idx >= len(args):  # (JAX's bound: the positional arguments)
                    raise FtransValueError(
                        f"input_output_aliases contains the mapping '{i_idx}:{o_idx}' with input index {i_idx} "
                        f"outside the range [0, {len(args)}).")
                if o_idx >= len(result_avals):
                    raise FtransValueError(
                        f"input_output_aliases contains the mapping '{i_idx}:{o_idx}' with output index {o_idx} "
                        f"outside the range [0, {len(result_avals)}).")
                a, b = in_avals[i_idx], result_avals[o_idx]
                if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
                    raise FtransValueError(
                        f"input_output_aliases contains the mapping '{i_idx}:{o_idx}' referring to an input with "
                        f"abstract value {a.str_short()} and an output with a different abstract value "
                        f"{b.str_short()}.")
                aliases.append((i_idx, o_idx))
        outs = buffer_callback_p.bind(
            *ops, callback=cb, result_avals=result_avals, in_tree=in_tree, out_tree=out_tree,
            vmap_method=vmap_method, has_side_effect=bool(has_side_effect), input_output_aliases=tuple(aliases),
            command_buffer_compatible=bool(command_buffer_compatible))
        return tree_util.tree_unflatten(out_tree, list(outs))

    return wrapped_callback
