"""Host callbacks: primitives that run a Python function on the values of a program.

Three primitives, as JAX has them:

* ``debug_callback`` (``ftrans.debug.callback``/``ftrans.debug.print``): no results, an
  *effect* (never removed by dead-code elimination, never merged or moved by a pass);
  ``ordered=True`` keeps program order among ordered callbacks.
* ``pure_callback``: results of declared shapes and dtypes, no effect (an unused one may be
  dropped, as in JAX); not differentiable (wrap it in ``custom_jvp``).
* ``io_callback`` (``ftrans.experimental.io_callback``): results and an effect.

Each holds its Python function in a :class:`HostCallback` parameter, which runs it on
flat arrays (the eager NumPy rule and, under ``jit``, XLA's host-callback custom call
both go through it), checks what it returns against the declared results, and records
the user's line of the call so a mismatch names it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import effect_rules, effectful_primitives, named_effect
from ftrans.core.primitive import Primitive, never_weak
from ftrans.errors import FtransError

__all__ = ["debug_callback_p", "debug_print_p", "pure_callback_p", "io_callback_p", "inspect_sharding_p", "HostCallback",
           "CallbackResultError", "take_callback_error", "note_callback_error", "VMAP_METHODS"]

logger = logging.getLogger("ftrans.callback")

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized", None)


class CallbackResultError(FtransError, RuntimeError):
    """A host callback returned values that do not match the shapes and dtypes it declared
    (JAX raises ``RuntimeError`` here)."""


# The runtime's host-callback threads while they run a user's callback: eager operations there stay on the host
# (a program on the devices the running computation holds would wait for it: a deadlock).
_host = threading.local()


def in_host_callback() -> bool:
    """Whether this thread is running a callback for a compiled program (see ``host_fn``)."""
    return bool(getattr(_host, "depth", 0))


# The exception a callback raised while XLA ran it: the runtime reports only a string, so the
# executable that ran the program re-raises this one (see ``take_callback_error``).
_errors_lock = threading.Lock()
_last_error: list[BaseException] = []


_both: dict[type, type | None] = {}


def also_runtime_error(e: Exception) -> Exception:
    """``e`` as an instance of a subclass of both its own class and ``RuntimeError``.

    JAX reports a failing callback as a ``RuntimeError`` (its runtime error);
    ftrans raises the callback's own exception. This way ``except ValueError``
    written for the callback and ``except RuntimeError`` written for JAX both
    catch it. Classes that cannot be combined (a layout conflict, a final
    class) are raised as they are.
    """
    cls = type(e)
    if isinstance(e, RuntimeError):
        return e
    if cls not in _both:
        try:
            _both[cls] = type(cls.__name__, (cls, RuntimeError), {
                "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                "__doc__": f"{cls.__qualname__} raised by a host callback (also a RuntimeError, as in JAX)"})
        except TypeError:
            _both[cls] = None
    both = _both[cls]
    if both is None:
        return e
    try:
        new = both.__new__(both, *e.args)
        new.__dict__.update(getattr(e, "__dict__", {}))
        new.args = e.args
    except Exception:  # an exception class with an unusual constructor
        return e
    new.__context__ = e.__context__
    return new


def note_callback_error(e: BaseException) -> None:
    """Remember ``e``, raised by a callback a running program made, for ``take_callback_error``."""
    with _errors_lock:
        _last_error.append(e)


def take_callback_error() -> BaseException | None:
    """The exception the last failing host callback raised (and forget it), or None."""
    with _errors_lock:
        if not _last_error:
            return None
        e = _last_error[-1]
        _last_error.clear()
        return e


class HostCallback:
    """A user's function over a pytree of arguments, called on flat arrays.

    ``in_tree`` is the structure of ``(args, kwargs)``; ``static`` maps the positions of
    leaves that are not arrays (strings, ``None``, ...) to their values, which stay on the
    host and never enter the program. ``where`` is the user's ``file:line`` of the call.
    Equal (for jit's caches and CSE) only to itself.
    """

    __slots__ = ("fn", "in_tree", "static", "n_leaves", "where", "kind", "weak", "__weakref__")

    def __init__(self, fn: Callable, in_tree: Any, static: dict, n_leaves: int, where: str, kind: str,
                 weak: tuple = ()):
        self.weak = weak  # the operands' weak types (Python scalars stay weakly typed, as in JAX)
        self.fn = fn
        self.in_tree = in_tree
        self.static = static
        self.n_leaves = n_leaves
        self.where = where
        self.kind = kind

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", None) or type(self.fn).__name__
        return f"{name} at {self.where}"

    def _args(self, flat: Sequence[Any]) -> tuple:
        from ftrans.core import pytrees as tree_util
        from ftrans.core.array import Array

        it = iter(flat)
        weak = iter(self.weak)
        leaves = [self.static[i] if i in self.static else _as_array(next(it), Array, next(weak, False))
                  for i in range(self.n_leaves)]
        return tree_util.tree_unflatten(self.in_tree, leaves)

    def call(self, flat: Sequence[Any], result_avals: Sequence[ShapedArray]) -> list[np.ndarray]:
        """Run the function on flat values; its results, checked against ``result_avals``, as NumPy arrays."""
        from ftrans.core import pytrees as tree_util

        args, kwargs = self._args(flat)
        try:
            out = self.fn(*args, **kwargs)
        except Exception as e:
            # As JAX: the traceback is logged where it happened (inside a compiled program the runtime
            # would otherwise keep only its text); the exception itself is raised again by the caller,
            # as its own type and, as JAX's runtime error is, a RuntimeError.
            logger.exception("%s failed: the callback %r raised", self.api_name(), self)
            raise also_runtime_error(e).with_traceback(e.__traceback__) from e.__cause__
        if not result_avals and self.kind == "debug":
            return []
        leaves = tree_util.tree_leaves(out)
        if len(leaves) != len(result_avals):
            raise self._mismatch(f"returned {len(leaves)} value(s) but declared {len(result_avals)} "
                                 f"({', '.join(a.str_short() for a in result_avals) or 'none'})")
        res = []
        for i, (v, aval) in enumerate(zip(leaves, result_avals)):
            arr = np.asarray(v)
            canon = dtypes.canonicalize(arr.dtype) if arr.dtype != object else arr.dtype
            if arr.shape != tuple(aval.shape) or canon != aval.dtype:
                raise self._mismatch(
                    f"result #{i} has shape {arr.shape} and dtype {canon}, but the callback declared "
                    f"{aval.str_short()} (shape {tuple(aval.shape)}, dtype {aval.dtype})")
            res.append(np.asarray(arr, dtype=aval.dtype, order="C"))  # keeps rank 0 (ascontiguousarray would not)
        return res

    def api_name(self) -> str:
        return {"pure": "ftrans.pure_callback", "io": "ftrans.experimental.io_callback"}.get(
            self.kind, "ftrans.debug.callback")

    def _mismatch(self, what: str) -> CallbackResultError:
        name = {"pure": "pure_callback", "io": "io_callback"}.get(self.kind, "callback")
        return CallbackResultError(
            f"{name}: the callback {self!r} {what}. Return arrays of exactly the shapes and dtypes given in "
            f"result_shape_dtypes (or change the declaration)\n  (in your code at {self.where})")

    def host_fn(self, result_avals: Sequence[ShapedArray]) -> Callable:
        """What XLA's host-callback custom call runs: NumPy arrays in, a tuple of NumPy arrays out.

        An exception is remembered (``take_callback_error``) before the runtime turns it into a string.
        """
        avals = tuple(result_avals)

        def run(*arrays: Any) -> tuple:
            _host.depth = getattr(_host, "depth", 0) + 1
            try:
                return tuple(self.call([np.array(a) for a in arrays], avals))
            except BaseException as e:
                note_callback_error(e)
                raise
            finally:
                _host.depth -= 1

        return run


def _as_array(v: Any, array_type: type, weak: bool) -> Any:
    if isinstance(v, array_type):
        return v
    return array_type._new(np.asarray(v), weak)


# ----------------------------------------------------------------------------
# The primitives: abstract evaluation and the eager rule


debug_callback_p = Primitive("debug_callback", multiple_results=True)
# ``debug.print``: a debug callback of its own name, as JAX stages ``debug_print`` equations; every rule is the
# debug callback's (the printing is in its HostCallback).
debug_print_p = Primitive("debug_print", multiple_results=True)
pure_callback_p = Primitive("pure_callback", multiple_results=True)
io_callback_p = Primitive("io_callback", multiple_results=True)
for _p in (debug_callback_p, debug_print_p, pure_callback_p, io_callback_p):
    _p.def_weak_type(never_weak)
effectful_primitives.update({debug_callback_p, debug_print_p, io_callback_p})
# Their effects, as JAX names them (``eqn.effects``/``jaxpr.effects``).
_DEBUG, _ORDERED_DEBUG = named_effect("DebugEffect"), named_effect("OrderedDebugEffect", ordered=True)
_IO, _ORDERED_IO = named_effect("IOEffect"), named_effect("OrderedIOEffect", ordered=True)
for _p in (debug_callback_p, debug_print_p):
    effect_rules[_p] = lambda eqn: {_ORDERED_DEBUG if eqn.params.get("ordered") else _DEBUG}
effect_rules[io_callback_p] = lambda eqn: {_ORDERED_IO if eqn.params.get("ordered") else _IO}


@debug_callback_p.def_abstract_eval
def _debug_abstract(*avals: ShapedArray, callback: HostCallback, ordered: bool, partitioned: bool = False) -> list:
    return []


@debug_callback_p.def_impl
def _debug_impl(*vals: Any, callback: HostCallback, ordered: bool, partitioned: bool = False) -> list:
    callback.call(vals, ())
    return []


debug_print_p.def_abstract_eval(_debug_abstract)
debug_print_p.def_impl(_debug_impl)


@pure_callback_p.def_abstract_eval
def _pure_abstract(*avals: ShapedArray, callback: HostCallback, result_avals: tuple, vmap_method: Any,
                   sharding: Any = None) -> list:
    return list(result_avals)


@pure_callback_p.def_impl
def _pure_impl(*vals: Any, callback: HostCallback, result_avals: tuple, vmap_method: Any,
               sharding: Any = None) -> list:
    return callback.call(vals, result_avals)


@io_callback_p.def_abstract_eval
def _io_abstract(*avals: ShapedArray, callback: HostCallback, result_avals: tuple, ordered: bool,
                 sharding: Any = None) -> list:
    return list(result_avals)


@io_callback_p.def_impl
def _io_impl(*vals: Any, callback: HostCallback, result_avals: tuple, ordered: bool,
             sharding: Any = None) -> list:
    return callback.call(vals, result_avals)


# ---------------------------------------------------------------- dce_sink
# JAX's ``dce_sink_p``: marks its operands as used, so dead-code elimination keeps what computes them. It
# is effectful (no pass drops it) and has no results; with ``prevent_mlir_dce`` its lowering is a
# side-effecting custom call, which keeps the computation alive through XLA's dead-code elimination too.
dce_sink_p = Primitive("dce_sink", multiple_results=True)
dce_sink_p.def_weak_type(never_weak)
effectful_primitives.add(dce_sink_p)


@dce_sink_p.def_abstract_eval
def _dce_sink_abstract(*avals: ShapedArray, prevent_mlir_dce: bool) -> list:
    return []


@dce_sink_p.def_impl
def _dce_sink_impl(*args: Any, prevent_mlir_dce: bool) -> list:
    return []


# ---------------------------------------------------------------- inspect_sharding
# ``debug.inspect_array_sharding`` of a traced value (JAX's ``inspect_sharding_p``): no results, a debug
# effect (no pass drops it). Eagerly it reports the array's own sharding; in a program the lowering reports
# the layout XLA's partitioner chose for the value (``ftrans/lowering/rules/callbacks.py``).
inspect_sharding_p = Primitive("inspect_sharding", multiple_results=True)
inspect_sharding_p.def_weak_type(never_weak)
effectful_primitives.add(inspect_sharding_p)
effect_rules[inspect_sharding_p] = lambda eqn: {_DEBUG}


class ShardingInspector:
    """``inspect_sharding``'s ``callback`` parameter: the user's callback, and what to report where no
    partitioner chooses a layout (a program on one device: ``fallback``, the layout known when the value was
    traced). Prints as the user's callback, compares by both."""

    __slots__ = ("callback", "fallback")

    def __init__(self, callback: Callable, fallback: Any = None):
        self.callback, self.fallback = callback, fallback

    def __call__(self, sharding: Any) -> None:
        self.callback(sharding)

    def __repr__(self) -> str:
        return repr(self.callback)

    def __eq__(self, other: Any) -> bool:
        return (type(other) is ShardingInspector and self.callback is other.callback
                and self.fallback == other.fallback)

    def __hash__(self) -> int:
        try:
            return hash((id(self.callback), self.fallback))
        except TypeError:  # an unhashable layout: the callback alone
            return hash(id(self.callback))


@inspect_sharding_p.def_abstract_eval
def _inspect_sharding_abstract(aval: ShapedArray, *, callback: Any) -> list:
    return []


@inspect_sharding_p.def_impl
def _inspect_sharding_impl(value: Any, *, callback: Any) -> list:
    sharding = getattr(value, "sharding", None)
    if sharding is None:  # a host value (NumPy) staged as an operand: where ftrans would put it
        sharding = getattr(callback, "fallback", None)
    callback(sharding)
    return []
