"""JAX's ``monitoring``: listeners for the events ftrans records (compiles, cache hits), and user events.

A listener is called synchronously with the event's name and its keyword
metadata each time the event is recorded. ftrans records, under JAX's names:

* ``/jax/core/compile/backend_compile_duration`` (a duration, seconds): each XLA compile;
* ``/jax/compilation_cache/cache_hits`` / ``/jax/compilation_cache/cache_misses`` (events): each lookup of
  the persistent compilation cache that found / did not find the executable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["clear_event_listeners", "record_event", "record_event_duration_secs", "record_event_time_span",
           "record_scalar", "register_event_duration_secs_listener", "register_event_listener",
           "register_event_time_span_listener", "register_scalar_listener", "unregister_event_duration_listener",
           "unregister_event_listener", "unregister_event_time_span_listener", "unregister_scalar_listener"]

_event: list[Callable[..., Any]] = []
_duration: list[Callable[..., Any]] = []
_time_span: list[Callable[..., Any]] = []
_scalar: list[Callable[..., Any]] = []


def record_event(event: str, **kwargs: str | int) -> None:
    """Record that ``event`` happened."""
    for cb in list(_event):
        cb(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Record that ``event`` took ``duration`` seconds."""
    for cb in list(_duration):
        cb(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs: str | int) -> None:
    """Record that ``event`` ran from ``start_time`` to ``end_time`` (seconds)."""
    for cb in list(_time_span):
        cb(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Record a value for ``event``."""
    for cb in list(_scalar):
        cb(event, value, **kwargs)


def register_event_listener(callback: Callable[..., Any]) -> None:
    """Call ``callback(event, **kwargs)`` on every recorded event."""
    _event.append(callback)


def register_event_duration_secs_listener(callback: Callable[..., Any]) -> None:
    """Call ``callback(event, duration, **kwargs)`` on every recorded duration."""
    _duration.append(callback)


def register_event_time_span_listener(callback: Callable[..., Any]) -> None:
    """Call ``callback(event, start_time, end_time, **kwargs)`` on every recorded time span."""
    _time_span.append(callback)


def register_scalar_listener(callback: Callable[..., Any]) -> None:
    """Call ``callback(event, value, **kwargs)`` on every recorded scalar."""
    _scalar.append(callback)


def _unregister(listeners: list, callback: Callable[..., Any], kind: str) -> None:
    try:
        listeners.remove(callback)
    except ValueError:
        from ftrans.errors import FtransValueError

        raise FtransValueError(f"unregister: {callback!r} is not a registered {kind} listener") from None


def unregister_event_listener(callback: Callable[..., Any]) -> None:
    _unregister(_event, callback, "event")


def unregister_event_duration_listener(callback: Callable[..., Any]) -> None:
    _unregister(_duration, callback, "duration")


def unregister_event_time_span_listener(callback: Callable[..., Any]) -> None:
    _unregister(_time_span, callback, "time-span")


def unregister_scalar_listener(callback: Callable[..., Any]) -> None:
    _unregister(_scalar, callback, "scalar")


def clear_event_listeners() -> None:
    """Remove every listener."""
    for listeners in (_event, _duration, _time_span, _scalar):
        listeners.clear()
