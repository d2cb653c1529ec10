"""Compiled programs: lowering a closed jaxpr, compiling it once, and running it on buffers.

Two caches sit here.  ``_xla_cache`` maps (module text, device, compiler
options) to the XLA executable, so two jitted functions (or two eager
on-device ops) that lower to the same program share one compilation.  It holds
its executables *weakly*: an entry lives exactly as long as some ``Executable``
(kept by a jitted function's cache, the eager op cache, a ``Compiled``) uses
it, so the programs of functions that are gone are released with them and the
cache is bounded by what is alive.  The optional on-disk cache (``disk_cache``)
sits behind it.  The per-function cache keyed by argument signatures lives with
``jit``.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.array import Array, DeviceArray, device_array, device_key, from_foreign, is_foreign_array
from ftrans.core.avals import ShapedArray, ShapeDtypeStruct, shape_only_constant_error
from ftrans.core.config import config as _config
from ftrans.core.ir import ClosedJaxpr
from ftrans.core.prims.random import physical_aval
from ftrans.errors import CompilerOptionError, JaxRuntimeError
from ftrans.lowering import compat, lower
from ftrans.monitoring import record_event_duration_secs


class _Xla:
    """A compiled XLA program, as ``_xla_cache`` holds it (jaxlib's executables take no weak references)."""

    __slots__ = ("xla", "from_disk", "__weakref__")

    def __init__(self, xla: Any, from_disk: bool = False):
        self.xla = xla
        # loaded from the on-disk cache: XLA's CPU runtime cannot serialize such a program again
        self.from_disk = from_disk


_xla_cache: weakref.WeakValueDictionary[tuple, _Xla] = weakref.WeakValueDictionary()
_xla_lock = threading.Lock()
stats = {"compiles": 0, "xla_cache_hits": 0, "disk_hits": 0}
# Compilations (``ftrans.log_compiles``) and ``explain_cache_misses`` reports go to this logger.
logger = logging.getLogger("ftrans.jit")


class XlaRejectedError(JaxRuntimeError):
    """XLA refused a module ftrans produced: a bug in ftrans's lowering, reported with its context."""


def sig_of(aval: ShapedArray, device_id: int) -> tuple:
    """The per-argument part of a jit cache key (hashable, cheap: shape, dtype, weak type, device)."""
    return (aval.shape, aval.dtype, aval.weak_type, device_id)


class Executable:
    """One compiled program for one device, and the conventions to call it.

    The jaxpr's constants are passed as the program's leading arguments
    (``const_bufs``), transferred to the device once, here.
    """

    __slots__ = ("name", "text", "xla", "device", "device_id", "in_avals", "out_avals", "out_sigs",
                 "const_bufs", "_run", "donated", "_held", "options", "__weakref__")

    def __init__(self, closed: ClosedJaxpr, device: Any, name: str = "jit_fn",
                 donated: Sequence[bool] = (), compiler_options: tuple = (), text: str | None = None):
        self.name = name
        self.device = device
        self.device_id = device.id
        # a key-typed value crosses the boundary as its uint32 data (core/prims/random.py)
        self.in_avals = [physical_aval(a) for a in closed.in_avals]
        self.out_avals = [physical_aval(a) for a in closed.out_avals]
        self.donated = tuple(donated) if any(donated) else ()
        n_consts = len(closed.jaxpr.constvars)
        donated_args = (False,) * n_consts + self.donated if self.donated else ()
        # ``text``: the module already lowered (``Lowered.compile``) with these same arguments.
        if text is None:
            t0 = time.perf_counter()
            text = lower.lower_jaxpr(closed.jaxpr, name, donated_args=donated_args,
                                     platform=compat.lowering_platform(device))
            log_compile_step("Finished jaxpr to MLIR module conversion jit(%s) in %.9f sec", name,
                             time.perf_counter() - t0)
        self.text = text
        self.options = compiler_options
        # keeps the shared entry alive
        self._held = compiled(self.text, device, closed, compiler_options, log_name=f"jit({name})")
        self.xla = self._held.xla
        self._attach(closed.consts)

    @classmethod
    def loaded(cls, xla: Any, device: Any, name: str, text: str, in_avals: list, out_avals: list, consts: list,
               donated: Sequence[bool] = ()) -> Executable:
        """An ``Executable`` over an XLA program loaded on ``device`` (``serialize_executable``), for a program
        of these (logical) argument and result types whose leading arguments are ``consts``."""
        self = cls.__new__(cls)
        self.name, self.text, self.device, self.device_id = name, text, device, device.id
        self.in_avals = [physical_aval(a) for a in in_avals]
        self.out_avals = [physical_aval(a) for a in out_avals]
        self.donated = tuple(donated) if any(donated) else ()
        self.options = ()
        self._held = _Xla(xla)
        self.xla = xla
        self._attach(consts)
        return self

    def _attach(self, consts: list) -> None:
        """The constants on the device and the runner of ``self.xla``."""
        device = self.device
        self.out_sigs = [sig_of(a, device_key(device)) for a in self.out_avals]
        if consts:  # part of the program, as JAX's embedded constants: no transfer the user's guard refuses
            with compat.program_constants():
                self.const_bufs = [to_buffer(c, device) for c in consts]
        else:
            self.const_bufs = []
        if lower.host_callbacks_of(self.text):  # it calls back into Python: run to completion, map errors
            self._run = _reporting_callback_errors(compat.execute_fn_sync(self.xla, self.out_avals, device))
        else:
            self._run = compat.execute_fn(self.xla, self.out_avals, device)
        if device.platform != "cpu":
            from ftrans.lowering import device_eager

            device_eager.install(accelerator=True)

    def run(self, bufs: list) -> list:
        """Run on device buffers (constants prepended); returns one buffer per output."""
        if self.const_bufs:
            bufs = self.const_bufs + bufs
        return self._run(bufs)

    def wrap(self, out_bufs: list) -> list:
        return [device_array(b, a, s) for b, a, s in zip(out_bufs, self.out_avals, self.out_sigs)]

    def __call__(self, *arrays: Any) -> list:
        return self.wrap(self.run([to_buffer(a, self.device) for a in arrays]))


def _reporting_callback_errors(run: Any) -> Any:
    """``run`` re-raising the exception a host callback raised (the runtime only reports its text)."""
    from ftrans.core.prims.callbacks import take_callback_error

    def call(bufs: list) -> list:
        take_callback_error()  # a stale one from a program that failed elsewhere
        try:
            return run(bufs)
        except Exception as e:  # the runtime's error type varies by release
            err = take_callback_error()
            if err is not None:
                raise err from None
            raise e

    return call


def replicated_runner(xla: Any, out_avals: list, out_shardings: list, text: str, replicas: bool = False) -> Any:
    """``buffers -> buffers`` for a multi-device (replicated or partitioned) program. One that calls back
    into Python runs to completion on every device before the call returns and re-raises a failing
    callback's own exception, as a single-device one does.  ``replicas``: pmap's program of replicas."""
    if not lower.host_callbacks_of(text):
        return compat.execute_replicated_fn(xla, out_avals, out_shardings, replicas=replicas)
    return _reporting_callback_errors(compat.execute_replicated_fn(xla, out_avals, out_shardings, sync=True,
                                                                   replicas=replicas))


def compile_text(text: str, device: Any, closed: ClosedJaxpr | None = None, options: tuple = ()) -> Any:
    """XLA-compile ``text`` for ``device``, through the in-memory and on-disk caches.

    ``options`` (sorted ``(name, value)`` pairs) are part of both caches' keys:
    the same module compiled with other XLA options is another executable.
    The in-memory entry lasts only while the caller keeps the result alive;
    ``Executable`` holds it through ``compiled``.
    """
    return compiled(text, device, closed, options).xla


def compile_log_level() -> int:
    """The level compilations are logged at: WARNING with ``config.log_compiles`` (``ftrans.log_compiles()``),
    else DEBUG, as JAX logs them."""
    return logging.WARNING if _config.log_compiles else logging.DEBUG


def log_compile_step(msg: str, *args: Any) -> None:
    level = compile_log_level()
    if logger.isEnabledFor(level):
        logger.log(level, msg, *args)



# XLA options ftrans compiles with unless a jit's compiler_options name them, per platform.
# benchmarks/README.md ("compile_options.py") has the measurements: on the CPU, LLVM's level 1
# instead of XLA's default 2 cut compile CPU time to 0.55-1.0x on first_result's programs with
# run times equal within noise (medians 0.95-1.02x), elementwise, reduction and loop programs included.
DEFAULT_COMPILER_OPTIONS: dict[str, tuple] = {"cpu": (("xla_backend_optimization_level", 1),)}


@functools.cache
def options_in_xla_flags() -> frozenset:
    """The XLA options the ``XLA_FLAGS`` environment variable sets (``--xla_backend_optimization_level=3``
    gives ``xla_backend_optimization_level``). They are XLA's defaults for every compile in the process, as
    JAX's programs get them, so ftrans's own defaults step aside for them. Read once: XLA reads the variable
    when its first backend starts."""
    names = set()
    for tok in os.environ.get("XLA_FLAGS", "").split():
        if tok.startswith("--"):
            names.add(tok[2:].split("=", 1)[0])
    return frozenset(names)


def with_default_options(options: tuple, platform: str) -> tuple:
    """``options`` (sorted ``(name, value)`` pairs) plus the platform's defaults that neither they nor the
    user's ``XLA_FLAGS`` name."""
    defaults = DEFAULT_COMPILER_OPTIONS.get(platform, ())
    if not defaults:
        return options
    in_env = options_in_xla_flags()
    if in_env:
        defaults = tuple(kv for kv in defaults if kv[0] not in in_env)
    named = {k for k, _ in options}
    extra = tuple(kv for kv in defaults if kv[0] not in named)
    return tuple(sorted(options + extra)) if extra else options


def disk_text_of(text: str, options: tuple) -> str:
    """What the disk cache keys a program on: its text, with the XLA options as a trailing comment."""
    return text if not options else f"{text}\n// compiler_options: {options!r}"


def compiled(text: str, device: Any, closed: ClosedJaxpr | None = None, options: tuple = (),
             log_name: str | None = None) -> _Xla:
    """``compile_text``'s result in its cache holder: the in-memory entry lives as long as the holder.

    ``log_name`` (``jit(f)``) names the program in the compile log."""
    options = with_default_options(options, device.platform)
    callbacks = lower.host_callbacks_of(text)
    # A program calling back into Python is bound to those functions: they are part of its key, and
    # it never goes to disk (the functions cannot be stored with it).
    key = (text, device.id, device.platform, options, callbacks) if callbacks else \
        (text, device.id, device.platform, options)
    # HLO passes registered with XLA (``ftrans.extend.xla``) rewrite what it compiles: another executable. Their
    # registrations are in the key; such a program never goes to disk (the passes are Python functions).
    passes = compat.hlo_passes(device.platform)
    if passes:
        key += ("hlo_passes", passes)
    t0 = time.perf_counter()
    with _xla_lock:
        held = _xla_cache.get(key)
        if held is not None:
            stats["xla_cache_hits"] += 1
            if log_name:  # JAX logs this step on every jit cache miss, however the executable is found
                log_compile_step("Finished XLA compilation of %s in %.9f sec (the same program was already "
                                 "compiled in this process)", log_name, time.perf_counter() - t0)
            return held
    client = device.client
    from ftrans.lowering import disk_cache

    # The disk cache keys on the text: options ride along as a trailing comment.
    disk_text = disk_text_of(text, options)
    exe = disk_cache.load(client, disk_text, [device]) if not (callbacks or passes) else None
    from_disk = exe is not None
    if from_disk:
        stats["disk_hits"] += 1
        if log_name:
            log_compile_step("Finished XLA compilation of %s in %.9f sec (loaded from the persistent compilation "
                             "cache)", log_name, time.perf_counter() - t0)
    else:
        t_compile = time.perf_counter()
        try:
            exe = compat.compile(client, text, [device], options, callbacks)
        except Exception as e:  # XLA's own error types vary by release
            if options and _names_option(str(e)):
                raise CompilerOptionError(f"jit: XLA rejected compiler_options {dict(options)!r}: {e}") from None
            raise _rejected(e, text) from None
        stats["compiles"] += 1
        record_event_duration_secs("/jax/core/compile/backend_compile_duration", time.perf_counter() - t_compile)
        if log_name:
            log_compile_step("Finished XLA compilation of %s in %.9f sec", log_name, time.perf_counter() - t0)
        if not (callbacks or passes):
            disk_cache.store_soon(client, disk_text, [device], exe)
    with _xla_lock:
        held = _xla_cache.get(key)  # another thread may have compiled the same program meanwhile
        if held is None:
            held = _xla_cache[key] = _Xla(exe, from_disk)
    return held


def compiled_program(key: tuple, build: Any, text: str, options: tuple = (), platform: str | None = None) -> _Xla:
    """A multi-device program (pmap's replicas, sharded jit's partitions) through the shared cache.

    ``build()`` compiles on a miss. As with ``compiled``, the entry lives as
    long as the caller keeps the returned holder; ``options`` are the compiler
    options ``build`` passes, so that XLA's refusal of one is reported as such.
    The HLO passes registered for ``platform`` (every platform's when None) are
    part of the key.
    """
    passes = compat.hlo_passes(platform)
    if passes:
        key += ("hlo_passes", passes)
    with _xla_lock:
        held = _xla_cache.get(key)
        if held is not None:
            stats["xla_cache_hits"] += 1
            return held
    try:
        exe = build()
    except Exception as e:  # XLA's own error types vary by release
        if options and _names_option(str(e)):
            raise CompilerOptionError(f"XLA rejected compiler_options {dict(options)!r}: {e}") from None
        raise _rejected(e, text) from None
    stats["compiles"] += 1
    with _xla_lock:
        held = _xla_cache.get(key)  # another thread may have compiled the same program meanwhile
        if held is None:
            held = _xla_cache[key] = _Xla(exe)
    return held


def _names_option(msg: str) -> bool:
    return "compile option" in msg or "setting option" in msg or "compiler option" in msg


def _rejected(e: Exception, text: str) -> JaxRuntimeError:
    msg = str(e)
    if "Error calling inspect_sharding" in msg:  # the callback of debug.inspect_array_sharding raised (as JAX's)
        return JaxRuntimeError(msg)
    if "No FFI handler registered for" in msg:  # the user's ffi_call names a target nobody registered
        return JaxRuntimeError(
            f"{msg.strip()}\nthe program calls a foreign function (ffi_call) whose target is not registered for "
            "this platform: register it first with ftrans.ffi.register_ffi_target(name, capsule, platform=...)")
    lines = text.splitlines()
    shown = ""
    # XLA names the op by its loc("file":line:0) and prints the op itself; show the module line too.
    for ln in lines:
        if ln.strip().startswith(("%", '"')) and any(part in msg for part in _op_names(ln)):
            shown = ln.strip()
            break
    return XlaRejectedError(
        "XLA rejected the StableHLO module ftrans produced (this is a bug in ftrans; please report it).\n"
        f"XLA said: {msg.strip()}\n"
        + (f"offending op: {shown}\n" if shown else "")
        + "the op's loc(...) names the line of your code that produced the IR equation."
    )


def _op_names(line: str) -> list[str]:
    start = line.find('"stablehlo.')
    if start < 0:
        start = line.find('"chlo.')
    if start < 0:
        return []
    end = line.find('"', start + 1)
    return [f"'{line[start + 1:end]}'"]


def to_buffer(x: Any, device: Any) -> Any:
    """A device buffer for an operand: reuse a resident one, else transfer (and cache on host Arrays)."""
    if type(x) is DeviceArray:
        buf = x._buf
        if buf.is_deleted():
            x._value  # raises DeletedArrayError  # noqa: B018
        if x._sig[3] == device_key(device):
            return buf
        return compat.copy_to_device(buf, device)
    if isinstance(x, Array):
        try:
            buf = x._buf
        except AttributeError:
            buf = None
        if buf is not None:
            if compat.buf_device(buf) == device:
                return buf
            return compat.device_put(x._value, device)  # the cached copy stays where it is
        buf = compat.device_put(x._value, device)
        x._buf = buf
        return buf
    if isinstance(x, DeviceArray):
        return compat.copy_to_device(x._buf, device)
    if is_foreign_array(x):  # a jax.Array (its buffer, when it fits) or anything with __array__/__dlpack__
        return to_buffer(from_foreign(x), device)
    if isinstance(x, ShapeDtypeStruct):
        raise shape_only_constant_error(x)
    arr = np.asarray(x)
    canon = dtypes.canonicalize(arr.dtype)
    if arr.dtype != canon:
        arr = arr.astype(canon)
    return compat.device_put(arr, device)
