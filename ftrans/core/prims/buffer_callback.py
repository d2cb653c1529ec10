"""``buffer_callback``: a Python function that works in place on the device buffers of a running program.

JAX's ``jax.experimental.buffer_callback`` (the public function is ``ftrans/experimental/buffer_callback.py``).
The primitive's results are exactly ``result_avals``; the function is called as
``callback(ctx, out, *args, **kwargs)`` with an :class:`ExecutionContext`, the output buffers in
``out_tree``'s structure and the input buffers in ``in_tree``'s, and fills the output buffers instead of
returning values. The buffers are the runtime's own (they exist only while a compiled program runs), so
every run goes through XLA: under ``jit`` the lowering (``ftrans/lowering/rules/buffer_callback.py``) is
the runtime's buffer-callback custom call, and eagerly the call is a one-call program compiled once per
signature (its impl rule lives with the lowering). A call made with ``has_side_effect=True`` has JAX's
``BufferCallback`` effect, so no pass removes it when its results are unused. Not differentiable; batched
per ``vmap_method``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import effect_rules, effectful_if, named_effect
from ftrans.core.primitive import Primitive, never_weak
from ftrans.core.prims import callbacks as _cb
from ftrans.errors import FtransValueError, JaxRuntimeError

__all__ = ["buffer_callback_p", "BufferCallback", "ExecutionContext", "BUFFER_CALLBACK_EFFECT"]

logger = logging.getLogger("ftrans.callback")


class ExecutionContext:
    """What a buffer callback gets first (JAX's ``ExecutionContext``): the runtime's context of the running
    call. ``stage`` is the runtime's execution stage (``ExecutionStage.EXECUTE`` when the callback runs);
    ``stream`` the GPU stream the program runs on (an integer handle), a :class:`JaxRuntimeError` on the CPU,
    which has none."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: Any):
        self._ctx = ctx

    @property
    def stage(self) -> Any:
        return self._ctx.stage

    @property
    def stream(self) -> int:
        try:
            return self._ctx.stream
        except Exception as e:  # the runtime's own error type (it varies by release): ftrans's, as JAX's
            raise JaxRuntimeError(str(e)) from e

    def __repr__(self) -> str:
        return f"ExecutionContext(stage={self.stage!r})"


class BufferCallback:
    """A user's buffer callback and the structures it is called with; equal only to itself (one is made per
    ``buffer_callback(...)``, so every call of the function it returns shares the compiled programs).

    ``where`` is the user's ``file:line`` of the ``buffer_callback`` call, named by errors.
    """

    __slots__ = ("fn", "where", "__weakref__")

    def __init__(self, fn: Callable, where: str):
        self.fn = fn
        self.where = where

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", None) or type(self.fn).__name__
        return f"{name} at {self.where}"

    def host_fn(self, in_tree: Any, out_tree: Any) -> Callable:
        """What the runtime's buffer-callback custom call runs: ``(ctx, *input buffers, *output buffers) -> ()``.

        An exception is remembered (``take_callback_error``) before the runtime turns it into a string, so the
        program's caller raises the callback's own (also a ``RuntimeError``, as JAX's runtime error is).
        """
        from ftrans.core import pytrees as tree_util

        n_in = in_tree.num_leaves

        def run(ctx: Any, *bufs: Any) -> tuple:
            _cb._host.depth = getattr(_cb._host, "depth", 0) + 1
            try:
                args, kwargs = tree_util.tree_unflatten(in_tree, list(bufs[:n_in]))
                out = tree_util.tree_unflatten(out_tree, list(bufs[n_in:]))
                try:
                    ret = self.fn(ExecutionContext(ctx), out, *args, **kwargs)
                except Exception as e:
                    # As JAX: the traceback is logged where it happened; the exception is raised again by the
                    # program's caller as its own type and, as JAX's runtime error is, a RuntimeError, with a
                    # note naming the user's ``buffer_callback`` line.
                    logger.exception("ftrans.experimental.buffer_callback failed: the callback %r raised", self)
                    err = _cb.also_runtime_error(e)
                    if hasattr(err, "add_note"):
                        err.add_note(f"(raised by the callback of buffer_callback, in your code at {self.where})")
                    raise err.with_traceback(e.__traceback__) from e.__cause__
                if ret is not None:
                    raise _cb.also_runtime_error(FtransValueError(
                        f"buffer_callback callback must not return any values: the callback {self!r} returned a "
                        f"value of type {type(ret).__name__}; write the results into the output buffers (its "
                        f"second argument) instead\n  (in your code at {self.where})"))
                return ()
            except BaseException as e:
                _cb.note_callback_error(e)
                raise
            finally:
                _cb._host.depth -= 1

        return run


buffer_callback_p = Primitive("buffer_callback", multiple_results=True)
buffer_callback_p.def_weak_type(never_weak)
# JAX's ``BufferCallbackEffect`` (printed ``BufferCallback``), only with ``has_side_effect=True``: such a call is
# kept (and kept in order) even when nothing reads its results.
BUFFER_CALLBACK_EFFECT = named_effect("BufferCallbackEffect")
effectful_if[buffer_callback_p] = lambda params: bool(params.get("has_side_effect"))
effect_rules[buffer_callback_p] = lambda eqn: {BUFFER_CALLBACK_EFFECT} if eqn.params.get("has_side_effect") else set()


@buffer_callback_p.def_abstract_eval
def _buffer_callback_abstract(*avals: ShapedArray, callback: BufferCallback, result_avals: Sequence[ShapedArray],
                              **params: Any) -> list:
    return list(result_avals)
