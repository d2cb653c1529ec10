"""The named-axis environment: which axis names are bound here, their sizes, and the trace owning each.

``vmap(..., axis_name=...)`` (and, later, ``pmap``) pushes a frame for the
duration of the mapped function; collectives (``ftrans/core/prims/collectives.py``)
look their axis names up here to check them, learn sizes, and find the trace
that owns the axis.  It lives in core so that the collective primitives can bind
without knowing which transform bound the name: a frame's owner (``main``) is a
``MainTrace`` whose trace implements ``process_collective`` (``BatchTrace``
does), and ``main`` is None for an axis no trace owns (a ``pmap`` axis).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from ftrans.errors import FtransNameError

__all__ = ["AxisFrame", "axis_env", "extend_axis_env", "bound_names", "frames_of", "axis_size"]


class AxisFrame:
    """One named axis in scope: its name, its size, and the trace that owns it (None for pmap).

    ``spmd_name``: for ``vmap(..., spmd_axis_name=...)``, the mesh axis names (a tuple) the batch
    dimension is split over wherever a sharding is stated inside (constraints, ``shard_map``).
    ``explicit``: for a ``vmap`` over arguments whose mapped dimension is split over Explicit mesh axes, those
    axes (JAX's ``explicit_mesh_axis``): a ``shard_map`` inside leaves them out of its manual axes.
    """

    __slots__ = ("name", "size", "main", "spmd_name", "explicit")

    def __init__(self, name: Any, size: int, main: Any, spmd_name: tuple | None = None,
                 explicit: tuple | None = None):
        self.name = name
        self.size = size
        self.main = main
        self.spmd_name = spmd_name
        self.explicit = explicit


class _AxisEnv(threading.local):
    def __init__(self) -> None:
        self.frames: list[AxisFrame] = []

    def lookup(self, name: Any) -> AxisFrame | None:
        for f in reversed(self.frames):
            if f.name == name:
                return f
        return None


axis_env = _AxisEnv()


def vmapped_explicit_axes() -> frozenset:
    """The Explicit mesh axes that enclosing ``vmap``s map over (JAX's ``explicit_mesh_axis_names``)."""
    return frozenset(a for f in axis_env.frames if f.explicit for a in f.explicit)


@contextlib.contextmanager
def extend_axis_env(name: Any, size: int, main: Any, explicit: tuple | None = None) -> Iterator[None]:
    axis_env.frames.append(AxisFrame(name, size, main, None, explicit))
    try:
        yield
    finally:
        axis_env.frames.pop()


def bound_names() -> list:
    """The axis names bound here, outermost first, each once."""
    seen: list = []
    for f in axis_env.frames:
        if f.name is not None and f.name not in seen:
            seen.append(f.name)
    return seen


def _unbound(op: str, name: Any) -> FtransNameError:
    bound = bound_names()
    where = ("the axis names bound here are " + ", ".join(repr(n) for n in bound)) if bound else \
        "no axis name is bound here"
    return FtransNameError(
        f"Found an unbound axis name: {name}. To fix this, please call {op} under `jax.shard_map` "
        f"(ftrans.shard_map over a mesh with axis {name!r}), or inside a function that vmap(..., "
        f"axis_name={name!r}) or pmap(..., axis_name={name!r}) maps ({op} over axis {name!r}; {where}). A "
        "collective works over an axis that an enclosing shard_map, vmap or pmap binds"
    )


def frames_of(op: str, names: Sequence[Any]) -> list[AxisFrame]:
    """The innermost frame of each name, or an ``FtransNameError`` (naming ``op``) for the first unbound one."""
    out = []
    for n in names:
        f = axis_env.lookup(n) if n is not None else None
        if f is None:
            raise _unbound(op, n)
        out.append(f)
    return out


def axis_size(op: str, name: Any) -> int:
    return frames_of(op, (name,))[0].size
