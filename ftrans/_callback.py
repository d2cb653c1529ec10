"""The user-facing host callbacks: ``debug.callback``, ``debug.print``, ``pure_callback`` and
``experimental.io_callback`` (the primitives are ``ftrans/core/prims/callbacks.py``).

Each flattens its arguments: array leaves (arrays, tracers, NumPy values, Python numbers)
become the primitive's operands, any other leaf (a string, ``None``) stays with the
callback on the host. The callback is called with ``ftrans.Array`` values in the
arguments' structure, eagerly at once, under ``jit`` when the compiled program runs.
"""

from __future__ import annotations

import copy
import logging
import string
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.operands import as_operand
from ftrans.core.prims.callbacks import (
    VMAP_METHODS,
    HostCallback,
    debug_callback_p,
    debug_print_p,
    io_callback_p,
    pure_callback_p,
)
from ftrans.core.sharding import Sharding, as_sharding
from ftrans.core.trace import Tracer
from ftrans.errors import (
    FtransIndexError,
    FtransKeyError,
    FtransTypeError,
    FtransValueError,
    user_frame,
    user_location,
)

__all__ = ["debug_callback", "debug_print", "pure_callback", "io_callback"]

_ARRAY_LEAVES = (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex)


def _split_args(fn: Callable, args: tuple, kwargs: dict, kind: str) -> tuple[HostCallback, list]:
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    static: dict[int, Any] = {}
    dynamic = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, _ARRAY_LEAVES) or (hasattr(leaf, "__array__") and hasattr(leaf, "dtype")):
            dynamic.append(as_operand(leaf))
        else:
            static[i] = leaf
    # Staged (under jit), the callback gets the values of a running program, never weakly typed, as in JAX;
    # eagerly a Python scalar's stays weak.
    from ftrans.core.trace import state

    weak = () if state.dynamic is not state.base else tuple(bool(getattr(d, "weak_type", False)) for d in dynamic)
    return HostCallback(fn, in_tree, static, len(leaves), user_location(), kind, weak), dynamic


def _partitioned(partitioned: bool) -> dict:
    """The equation's ``partitioned`` parameter: only when set, so the common equation prints as before."""
    return {"partitioned": True} if partitioned else {}


def debug_callback(callback: Callable[..., Any] | None = None, *args: Any, ordered: bool = False,
                   partitioned: bool = False, **kwargs: Any) -> Any:
    """JAX's ``jax.debug.callback``: call ``callback(*args, **kwargs)`` on the arguments' values, eagerly
    at once and, under ``jit``, when the program runs; under ``vmap`` once per batch element, under
    ``grad`` on the primal values. ``ordered=True`` keeps program order among ordered callbacks.
    Its return value is ignored. The two-call form ``debug.callback(ordered=True)(fn, *args)`` takes the
    options first."""
    def do_callback(callback: Callable[..., Any], *c_args: Any, **c_kwargs: Any) -> None:
        if not callable(callback):
            raise FtransTypeError(f"debug.callback: expected a callable, got {type(callback).__name__}")
        cb, dynamic = _split_args(callback, c_args, c_kwargs, "debug")
        debug_callback_p.bind(*dynamic, callback=cb, ordered=bool(ordered), **_partitioned(partitioned))

    if callback is not None:
        do_callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise FtransTypeError(f"debug_callback received unexpected arguments in the two-call form: {args=} "
                              f"{kwargs=}; pass the callback and its arguments to the function it returns")
    return do_callback


class _FormatChecker(string.Formatter):
    """Checks a format string against its arguments without formatting anything."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return ""

    def check_unused_args(self, used_args: Any, args: Any, kwargs: Any) -> None:
        unused = [a for i, a in enumerate(args) if i not in used_args]
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused:
            raise _Unused(f"Unused positional arguments to `jax.debug.print`: {len(unused)} argument(s) "
                          "no placeholder of the format string takes; add a {} for each")
        if unused_kw:
            raise _Unused(
                f"Unused keyword arguments to `jax.debug.print`: {unused_kw}. You may be passing an f-string "
                "(i.e, `f\"{x}\"`) into `debug.print` and instead should pass in a regular string.")


class _Unused(Exception):
    """Raised inside the checker (the error is made where the user's line can be found)."""


_checker = _FormatChecker()


def _check_format(fmt: str, args: tuple, kwargs: dict) -> None:
    try:
        _checker.format(fmt, *args, **kwargs)
    except _Unused as e:
        raise FtransValueError(f"{e} (format string {fmt!r})") from None
    except IndexError as e:
        raise FtransIndexError(
            f"debug.print: the format string {fmt!r} has more positional placeholders than the "
            f"{len(args)} positional argument(s) given ({e}); pass one argument per {{}}") from None
    except KeyError as e:
        raise FtransKeyError(
            f"debug.print: the format string {fmt!r} names the placeholder {e}, but no keyword argument of that "
            f"name was given (keywords: {sorted(kwargs)}); pass it as {e.args[0]}=...") from None
    except ValueError as e:
        raise FtransValueError(f"debug.print: the format string {fmt!r} is not valid: {e}") from None


class _Printer:
    """The callback ``debug.print`` runs: formats with the NumPy print options of the call."""

    __slots__ = ("fmt", "has_placeholders", "printoptions", "record", "__name__", "__qualname__")

    def __init__(self, fmt: str, has_placeholders: bool, printoptions: dict, record: logging.LogRecord | None = None):
        self.fmt = fmt
        self.has_placeholders = has_placeholders
        self.printoptions = printoptions
        self.record = record  # debug.log: the message goes to this record (the call's file and line), not stdout
        self.__name__ = self.__qualname__ = f"debug.{'log' if record is not None else 'print'}({fmt!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        with np.printoptions(**self.printoptions):
            if self.has_placeholders:
                msg = self.fmt.format(*args, **kwargs)
            else:
                msg = " ".join((self.fmt, *(str(a) for a in args)))
        if self.record is not None:
            record = copy.copy(self.record)
            record.msg = msg
            logger.handle(record)
            return
        sys.stdout.write(msg + "\n")


# debug.log's logger: its records carry the file and line of the debug.log call.
logger = logging.getLogger("ftrans.debug")


def _log_record() -> logging.LogRecord:
    f = user_frame()
    file, line = (f.f_code.co_filename, f.f_lineno) if f is not None else ("(unknown file)", 0)
    return logger.makeRecord(logger.name, logging.INFO, file, line, "", (), None)


def debug_print(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
                skip_format_check: bool = False, _use_logging: bool = False, **kwargs: Any) -> Any:
    """JAX's ``jax.debug.print``: print ``fmt.format(*args, **kwargs)`` with the arguments' values, eagerly
    and inside ``jit``, ``vmap`` (one line per batch element), ``grad`` (the primal values) and control
    flow. A format string that does not match its arguments is an error at the call. The two-call form
    ``debug.print(ordered=True)("x={x}", x=x)`` takes the options first."""
    def do_print(fmt: str, *c_args: Any, **c_kwargs: Any) -> None:
        if not isinstance(fmt, str):
            raise FtransTypeError(f"debug.print: the format must be a string, got {type(fmt).__name__}")
        if not skip_format_check:
            _check_format(fmt, c_args, c_kwargs)
        has_placeholders = False
        if fmt:
            _, field, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field is not None
        printer = _Printer(fmt, has_placeholders, dict(np.get_printoptions()),
                           _log_record() if _use_logging else None)
        cb, dynamic = _split_args(printer, c_args, c_kwargs, "debug")
        debug_print_p.bind(*dynamic, callback=cb, ordered=bool(ordered), **_partitioned(partitioned))

    if fmt is not None:
        do_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise FtransTypeError(f"debug_print received unexpected arguments in the two-call form: {args=} {kwargs=}; "
                              "pass the format and its arguments to the function it returns")
    return do_print


def debug_log(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
              skip_format_check: bool = False, **kwargs: Any) -> Any:
    """JAX's ``jax.debug.log``: ``debug.print``'s message as an INFO record of the ``ftrans.debug`` logger
    (with the file and line of this call) instead of a line on stdout; everything else as ``debug.print``."""
    return debug_print(fmt, *args, ordered=ordered, partitioned=partitioned, skip_format_check=skip_format_check,
                       _use_logging=True, **kwargs)


def _result_avals(result_shape_dtypes: Any, what: str, *, allow_64_bit: bool = False,
                  error: type = FtransTypeError) -> tuple[list, Any]:
    """The declared results' types; ``allow_64_bit``: 64-bit types kept without x64 (``buffer_callback``, as
    JAX's); ``error``: the exception class for a leaf without ``shape``/``dtype``."""
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for leaf in leaves:
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dtype is None:
            raise error(
                f"{what}: result_shape_dtypes must be a pytree of values with .shape and .dtype (for example "
                f"ShapeDtypeStruct), got a leaf of type {type(leaf).__name__}")
        dt = np.dtype(dtype)
        if not allow_64_bit and dtypes.canonicalize(dt) != dt:
            raise FtransValueError(
                f"{what}: result_shape_dtypes cannot specify 64-bit types when `jax_enable_x64` is disabled (got "
                f"{dt}); declare {dtypes.canonicalize(dt)} (a 64-bit result the callback returns is converted), "
                "or enable x64")
        avals.append(ShapedArray(tuple(int(d) for d in shape), dt, False))
    return avals, tree


def _callback_sharding(sharding: Any, what: str) -> Any:
    """``sharding=`` of a callback as ftrans's sharding (None: none given). Where a program over whole
    arrays is partitioned over several devices, the callback runs on the one device it names."""
    if sharding is None:
        return None
    sh = as_sharding(sharding)
    if not isinstance(sh, Sharding):
        raise FtransTypeError(f"{what}: sharding must be a Sharding (for example SingleDeviceSharding(device)), "
                              f"got {sharding!r} of type {type(sharding).__name__}")
    return sh


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """JAX's ``jax.pure_callback``: ``callback(*args, **kwargs)`` computed on the host, its results
    declared by ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct``-likes). The callback must be
    pure: an unused result may be dropped. Not differentiable (wrap it in ``custom_jvp``); under
    ``vmap`` it follows ``vmap_method`` ('sequential', 'sequential_unrolled', 'expand_dims',
    'broadcast_all', 'legacy_vectorized')."""
    if vmap_method not in VMAP_METHODS:
        raise FtransValueError(f"vmap_method must be on of the allowed methods {list(VMAP_METHODS)}, "
                               f"but got: {vmap_method}")
    if not callable(callback):
        raise FtransTypeError(f"pure_callback: expected a callable, got {type(callback).__name__}")
    avals, out_tree = _result_avals(result_shape_dtypes, "pure_callback")
    cb, dynamic = _split_args(callback, args, kwargs, "pure")
    outs = pure_callback_p.bind(*dynamic, callback=cb, result_avals=tuple(avals), vmap_method=vmap_method,
                                sharding=_callback_sharding(sharding, "pure_callback"))
    return tree_util.tree_unflatten(out_tree, outs)


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """JAX's ``jax.experimental.io_callback``: like ``pure_callback`` but for a callback with side
    effects: it is never dropped, merged or moved; ``ordered=True`` keeps program order (and cannot be
    ``vmap``ped). Not differentiable."""
    if not callable(callback):
        raise FtransTypeError(f"io_callback: expected a callable, got {type(callback).__name__}")
    avals, out_tree = _result_avals(result_shape_dtypes, "io_callback")
    cb, dynamic = _split_args(callback, args, kwargs, "io")
    outs = io_callback_p.bind(*dynamic, callback=cb, result_avals=tuple(avals), ordered=bool(ordered),
                              sharding=_callback_sharding(sharding, "io_callback"))
    return tree_util.tree_unflatten(out_tree, outs)
