"""JAX's ``jax.experimental.compute_on``: run part of a program on another compute unit (the host CPU next to
an accelerator, a TPU SparseCore, a GPU stream).

ftrans accepts and checks the compute type and the outputs' memory spaces as JAX does, and runs the function
as a nested ``jit`` call of the enclosing program: the placement is not passed on to XLA, so the work runs
where the rest of the program runs (on a CPU-only machine, the host is that place).  Results, derivatives,
``vmap`` and ``remat`` are those of the function itself.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["compute_on", "compute_on2"]

_KNOWN = ("device_host", "device", "tpu_sparsecore")


def _check_compute_type(compute_type: Any) -> None:
    if not isinstance(compute_type, str):
        raise FtransTypeError(f"compute_on: compute_type must be a string naming the compute unit, got a "
                              f"{type(compute_type).__name__}")
    if compute_type not in _KNOWN and not compute_type.startswith("gpu_stream:"):
        raise FtransValueError(
            f"compute_on: unknown compute type {compute_type!r}; give one of 'device_host', 'device', "
            "'tpu_sparsecore' or 'gpu_stream:N' (N a stream number)")


_UNSET: Any = object()


def compute_on(f: Any = None, *, compute_type: Any = _UNSET, out_memory_spaces: Any = _UNSET,
               compiler_options: dict | None = None) -> Any:
    """JAX's ``compute_on``, in both of its forms. ``compute_on("device_host")`` (jax 0.10's context manager):
    the operations staged in the block are meant for the compute type; ftrans checks the name and stages them
    as usual. ``compute_on(f, compute_type=..., out_memory_spaces=...)`` (jax 0.11's, which was
    ``compute_on2``): see :func:`compute_on2`.

    Args:
        f: the compute type (the context manager), or the function (``None``: a decorator).
        compute_type: "device_host", "device", "tpu_sparsecore" or "gpu_stream:N".
        out_memory_spaces: the outputs' memory spaces (the function form).
        compiler_options: options for the part's compiler (the function form).
    """
    if out_memory_spaces is _UNSET and compiler_options is None and (
            (compute_type is _UNSET) != (f is None) and not callable(f)):
        return _compute_block(compute_type if f is None else f)
    if compute_type is _UNSET or out_memory_spaces is _UNSET:
        raise FtransTypeError("compute_on: give the compute type alone (the context manager) or a function "
                              "with compute_type= and out_memory_spaces= (the decorator)")
    return compute_on2(f, compute_type=compute_type, out_memory_spaces=out_memory_spaces,
                       compiler_options=compiler_options)


@contextlib.contextmanager
def _compute_block(compute_type: Any) -> Iterator[None]:
    _check_compute_type(compute_type)
    yield


def compute_on2(f: Callable | None = None, *, compute_type: str, out_memory_spaces: Any,
                compiler_options: dict | None = None) -> Any:
    """JAX's ``compute_on2``: ``f`` run as one call meant for ``compute_type``, its outputs placed in
    ``out_memory_spaces``; ftrans runs it as a nested ``jit`` call (see the module's note).

    Args:
        f: the function; without it, a decorator.
        compute_type: "device_host", "device", "tpu_sparsecore" or "gpu_stream:N".
        out_memory_spaces: a memory space for all outputs, or a tree prefix of the outputs with one per
            entry.
        compiler_options: options for the part's compiler (a JSON-serialisable dict), accepted as JAX's.
    """
    if f is None:
        return functools.partial(compute_on2, compute_type=compute_type, out_memory_spaces=out_memory_spaces,
                                 compiler_options=compiler_options)
    _check_compute_type(compute_type)
    if compiler_options is not None and not isinstance(compiler_options, dict):
        raise FtransTypeError(f"compute_on2: compiler_options must be a dict or None, got "
                              f"{type(compiler_options).__name__}")
    from ftrans.transforms.jit import jit

    inner = jit(f)

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        out = inner(*args)
        _check_spaces(out, out_memory_spaces)
        return out

    return wrapped


def _check_spaces(out: Any, spaces: Any) -> None:
    """``out_memory_spaces`` is one space or a tree prefix of the outputs (JAX's ``flatten_axes``)."""
    leaf = lambda x: x is None or not isinstance(x, (tuple, list, dict))  # noqa: E731
    if leaf(spaces):
        return
    try:
        tree_util.tree_map(lambda _s, _o: None, spaces, out, is_leaf=leaf)
    except (ValueError, TypeError) as e:
        raise FtransValueError(
            f"compute_on2: out_memory_spaces must be one memory space or a tree prefix of the outputs; got "
            f"{spaces!r} for outputs of structure {tree_util.tree_structure(out)} ({e})") from None
