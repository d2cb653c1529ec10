"""JAX's ``profiler``: traces for TensorBoard/Perfetto, trace annotations, device memory profiles.

The profiler lives in the XLA runtime that jaxlib ships (the same runtime that
compiles and runs ftrans's programs); this module drives it. A trace started
with :func:`start_trace` (or the :func:`trace` context manager) records host
activity, the runtime's work and every :class:`TraceAnnotation` span, and is
written under ``log_dir`` as TensorBoard's profile plugin expects
(``plugins/profile/<run>/*.xplane.pb``).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ftrans.errors import FtransRuntimeError, FtransValueError
from ftrans.lowering import compat

__all__ = ["ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function", "device_memory_profile",
           "save_device_memory_profile", "start_server", "stop_server", "start_trace", "stop_trace", "trace"]

_runtime = compat.profiler_runtime()

ProfileOptions = _runtime.ProfileOptions


class _State:
    """The one trace the runtime can record at a time, and the profiler server."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.session: Any = None
        self.log_dir: str | None = None
        self.perfetto = False
        self.server: Any = None


_state = _State()


def start_server(port: int) -> Any:
    """Start the runtime's profiler server on ``port`` (TensorBoard's "capture profile" connects to it)."""
    if _state.server is not None:
        raise FtransValueError("start_server: a profiler server is already running; call stop_server() first")
    _state.server = _runtime.start_server(int(port))
    return _state.server


def stop_server() -> None:
    """Stop the server :func:`start_server` started."""
    if _state.server is None:
        raise FtransValueError("stop_server: no profiler server is running")
    _state.server = None  # the runtime stops it when the object is released


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
                profiler_options: Any = None) -> None:
    """Start recording a trace, written to ``log_dir`` by :func:`stop_trace`.

    ``create_perfetto_trace`` also writes ``perfetto_trace.json.gz`` beside it, which
    https://ui.perfetto.dev opens. ``create_perfetto_link`` (JAX serves the file to the Perfetto UI and
    blocks until it is fetched) is not offered: open the written file in the UI instead.
    """
    if create_perfetto_link:
        raise FtransValueError("start_trace: create_perfetto_link is not supported; use create_perfetto_trace=True "
                               "and open the written perfetto_trace.json.gz at https://ui.perfetto.dev")
    with _state.lock:
        if _state.session is not None:
            raise FtransRuntimeError("start_trace: a trace is already being recorded (only one at a time); call "
                                     "stop_trace() first")
        compat.backend(None)  # the backends exist before the session, so their activity is included
        _state.session = _runtime.ProfilerSession(profiler_options if profiler_options is not None
                                                  else ProfileOptions())
        _state.log_dir = os.fspath(log_dir)
        _state.perfetto = bool(create_perfetto_trace)


def stop_trace() -> None:
    """Stop the trace :func:`start_trace` started and write it to its ``log_dir``."""
    with _state.lock:
        if _state.session is None:
            raise FtransRuntimeError("stop_trace: no trace is being recorded; call start_trace(log_dir) first")
        session, log_dir, perfetto = _state.session, _state.log_dir, _state.perfetto
        _state.session, _state.log_dir, _state.perfetto = None, None, False
        session.stop_and_export(log_dir)
        if perfetto:
            _write_perfetto(log_dir)


def _write_perfetto(log_dir: str) -> pathlib.Path:
    """The newest run's Chrome-format trace, without the metadata block the Perfetto UI rejects."""
    runs = [p for p in (pathlib.Path(log_dir).absolute() / "plugins" / "profile").iterdir() if p.is_dir()]
    run = max(runs, key=os.path.getmtime)
    found = sorted(run.glob("*.trace.json.gz"))
    if len(found) != 1:
        raise FtransRuntimeError(f"stop_trace: expected one *.trace.json.gz in {run}, found {len(found)}")
    with gzip.open(found[0], "rb") as f:
        data = json.load(f)
    data.pop("metadata", None)
    out = run / "perfetto_trace.json.gz"
    with gzip.open(out, "wb") as f:
        f.write(json.dumps(data).encode("utf-8"))
    return out


@contextlib.contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
          profiler_options: Any = None) -> Iterator[None]:
    """Record a trace of the ``with`` block into ``log_dir``."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation(_runtime.TraceMe):
    """A named span on the trace timeline for the duration of a ``with`` block (keyword arguments are
    attached to the event)."""


class StepTraceAnnotation(TraceAnnotation):
    """A span marking one training step (``step_num=`` numbers it), which the profiler analyses step by step."""

    def __init__(self, name: str, **kwargs: Any):
        super().__init__(name, _r=1, **kwargs)


def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs: Any) -> Callable:
    """``func`` with each call recorded as a span named ``name`` (default: its qualified name)."""
    label = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with TraceAnnotation(label, **decorator_kwargs):
            return func(*args, **kwargs)

    return wrapper


def device_memory_profile(backend: str | None = None) -> bytes:
    """A snapshot of the device memory the runtime holds (arrays and executables, with their allocation
    sites), as a gzipped ``pprof`` protocol buffer for the ``pprof`` tool."""
    return gzip.compress(compat.backend(backend).heap_profile())


def save_device_memory_profile(filename: os.PathLike | str, backend: str | None = None) -> None:
    """:func:`device_memory_profile` written to ``filename``."""
    data = device_memory_profile(backend)
    with open(filename, "wb") as f:
        f.write(data)
