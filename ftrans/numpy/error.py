"""Error checking inside traced code (JAX's internal ``error_check`` and ``numpy.error`` modules).

``set_error_if(pred, msg)`` records, while the function runs (eagerly or compiled), that ``msg`` happened
if any element of ``pred`` is true; ``raise_if_error()``, called outside any transform, raises the first
recorded error as a :class:`JaxValueError` whose traceback is the user's line that called
``set_error_if`` (the line being traced, under ``jit``), and clears it.

The state is one ``uint32`` error code held in a mutable array reference (``ftrans.core.ref``), per
thread: ``_NO_ERROR`` (the largest uint32, so a ``min`` over several codes picks the first error) or the
index of the error in a process-wide list of ``(message, traceback)``.  Staged functions thread the ref
like any closed-over ref, so the checks work under ``jit`` and inside ``cond``, ``while_loop`` and
``scan`` bodies.  Over a mesh in context (``error_checking_context`` under ``set_mesh``) the code is an
array of the mesh's shape laid out one element per device.

jnp's own checks (``error_checking_behavior(nan=, divide=, oob=)``, JAX's ``jax_error_checking_behavior_*``
options, "ignore" by default): the functions JAX checks record a NaN result ("NaN encountered"), a zero
divisor ("Division by zero encountered") or an out-of-bounds gather index.  While every option is
"ignore" (``core.trace._error_checks`` is false) they cost one global read.

``wrap_for_export`` / ``unwrap_from_import`` carry a function's error state through ``ftrans.export``:
the exported function returns its error code and messages (an :class:`_ErrorClass`, serialized by
``ftrans.error_check``) and the importer merges them into its own state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import traceback as tb_lib
import warnings
from types import TracebackType
from typing import Any, Literal

import numpy as np

from ftrans.core import ref as _ref
from ftrans.core import trace as _trace
from ftrans.core.config import config, config_context
from ftrans.errors import LIBRARY_DIRS, FtransError, FtransValueError

__all__ = ["JaxValueError", "set_error_if", "raise_if_error", "error_checking_context", "wrap_for_export",
           "unwrap_from_import", "error_checking_behavior"]


class JaxValueError(FtransError, ValueError):
    """Raised by :func:`raise_if_error` for an error recorded by :func:`set_error_if` (JAX's
    ``JaxValueError``)."""


# The code of "no error": the largest uint32, so that ``min`` over several codes gives the first error.
_NO_ERROR = np.iinfo(np.uint32).max

_error_list_lock = threading.RLock()
# (message, traceback) pairs; the traceback is a string for errors from an imported (exported) function.
_error_list: list[tuple[str, TracebackType | str]] = []

_INVALID_ERROR_CODE_MSG = (
    "An unknown error occurred during execution of an AOT-imported function. This may indicate data corruption "
    "during AOT serialization/deserialization, or a version mismatch between the exporting and importing "
    "versions.")
_INVALID_ERROR_CODE_TRACEBACK = "Traceback not available for corrupted error codes."


class _ErrorStorage(threading.local):
    def __init__(self) -> None:
        self.ref: Any = None


_error_storage = _ErrorStorage()


def _context_mesh() -> Any:
    from ftrans.core import sharding as _sh

    return _sh.get_mesh()


def _new_code(mesh: Any) -> Any:
    """A fresh error code: a scalar, or (over a mesh) one element per device of the mesh."""
    from ftrans.core.array import Array

    if mesh is None or not mesh.shape:
        return Array._new(np.asarray(_NO_ERROR, np.uint32), False)
    import ftrans.numpy as jnp
    from ftrans.core import sharding as _sh

    sizes = tuple(mesh.shape.values())
    sharding = _sh.NamedSharding(mesh, _sh.PartitionSpec(*mesh.axis_names))
    return jnp.full(sizes, np.uint32(_NO_ERROR), dtype=np.uint32, device=sharding)


def _initialize_error_code_ref(*, outside: bool = True) -> None:
    """Give this thread a fresh error code ref (its shape from the mesh in context).  ``outside``: made as
    if outside every transform (JAX's ``eval_context``), so it outlives a ``jit`` being traced now."""
    mesh = _context_mesh()
    if not outside:
        _error_storage.ref = _ref.new_ref(_new_code(mesh), kind="no_grad_no_remat")
        return
    with _trace.ensure_compile_time_eval():
        code = _new_code(mesh)
    _error_storage.ref = _ref.new_ref_outside(code, kind="no_grad_no_remat",
                                              origin="ftrans/numpy/error.py (ftrans.error_check's error state)")


class error_checking_context:  # noqa: N801 - JAX's name
    """JAX's ``error_checking_context``: inside the block the error state is a new one, shaped by the mesh
    in context (one error code per device of a ``set_mesh`` mesh); leaving the block restores the previous
    state."""

    __slots__ = ("old_ref",)

    def __init__(self) -> None:
        self.old_ref: Any = None

    def __enter__(self) -> error_checking_context:
        self.old_ref = _error_storage.ref
        _initialize_error_code_ref()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _error_storage.ref = self.old_ref


def _user_traceback() -> TracebackType | None:
    """The current Python stack without ftrans's and jax's frames, as a traceback (outermost first)."""
    frames = []
    f = sys._getframe(1)
    while f is not None:
        if not f.f_code.co_filename.startswith(LIBRARY_DIRS):
            frames.append(f)
        f = f.f_back
    tb = None
    for fr in frames:  # innermost first: each becomes the ``tb_next`` of the next one out
        tb = TracebackType(tb, fr, fr.f_lasti, fr.f_lineno)
    return tb


def _mesh_of(x: Any) -> Any:
    sh = getattr(x, "sharding", None)
    return getattr(sh, "mesh", None), getattr(sh, "spec", None)


def set_error_if(pred: Any, /, msg: str) -> None:
    """Record ``msg`` as an error if any element of ``pred`` is true (JAX's ``set_error_if``).

    Traced (under ``jit``) the message and the user's traceback are recorded when the function is traced,
    and the error state is set when the program runs, without stopping it; :func:`raise_if_error` raises
    the first error recorded.  An error already set is never replaced by a later one.
    """
    import ftrans.numpy as jnp
    from ftrans.core.operands import as_operand

    if _error_storage.ref is None:
        if not _ref.created and not _trace.is_eager():
            # Staged functions thread refs only once some ref exists (so code without refs pays nothing):
            # the state must exist before the first staged check. Importing ftrans.error_check and
            # switching jnp's checks on create it.
            from ftrans.errors import FtransRuntimeError

            raise FtransRuntimeError(
                "set_error_if: the error state does not exist yet and a function is being traced; create it "
                "first, outside any transform (import ftrans.error_check, or enter "
                "ftrans.error_check.error_checking_context())")
        _initialize_error_code_ref()
    ref = _error_storage.ref
    traceback = _user_traceback()
    with _error_list_lock:
        new_error_code = np.uint32(len(_error_list))
        _error_list.append((msg, traceback))
    pred = as_operand(pred)
    error_code = ref[...]
    if error_code.ndim == 0:  # one code (no mesh in context when the state was made)
        pred = jnp.any(pred)
    else:  # one code per device of the mesh in context
        pred = _reduce_per_device(pred, ref)
    should_update = jnp.logical_and(error_code == np.uint32(_NO_ERROR), pred)
    ref[...] = jnp.where(should_update, new_error_code, error_code)


def _reduce_per_device(pred: Any, ref: Any) -> Any:
    """``pred`` reduced to one element per device of the error code's mesh (each device's own part), or to
    one value for all when ``pred``'s mesh has automatic axes (with JAX's warning: that communicates) or the
    state's has no Explicit axis."""
    import ftrans.numpy as jnp
    from ftrans.core import sharding as _sh

    code = ref[...]
    code_mesh = _context_mesh() if isinstance(code, _trace.Tracer) else getattr(code.sharding, "mesh", None)
    mesh, spec = _mesh_of(pred)
    if isinstance(pred, _trace.Tracer) or mesh is None:
        from ftrans.core.trace import aval_of

        s = getattr(aval_of(pred), "typed_sharding", None)
        mesh, spec = getattr(s, "mesh", mesh), getattr(s, "spec", spec)
    types = tuple(getattr(mesh, "axis_types", ()) or ())
    code_types = tuple(getattr(code_mesh, "axis_types", ()) or ())
    if mesh is None or not getattr(mesh, "shape", None) or _sh.AxisType.Explicit not in code_types:
        # not laid out over the mesh (every device sees all of it), or a state over Auto axes only (whose
        # type is unsplit, as JAX's): one value for all
        return jnp.any(pred)
    if any(t == _sh.AxisType.Auto for t in types):
        warnings.warn(
            "When at least one mesh axis of `pred` is in auto mode, calling `set_error_if` will cause implicit "
            "communication between devices. To avoid this, consider converting the mesh axis in auto mode to "
            "explicit mode.", RuntimeWarning, stacklevel=3)
        return jnp.any(pred)
    if code_mesh is None or (tuple(mesh.axis_names), tuple(mesh.shape.values())) != \
            (tuple(code_mesh.axis_names), tuple(code_mesh.shape.values())):
        raise FtransValueError(
            f"The error code state and the predicate must be on the same mesh, but got {code_mesh} and {mesh} "
            "respectively. Please use `with error_checking_context()` to redefine the error code state based "
            "on the mesh.")
    from ftrans.transforms.shard_map import shard_map

    out_spec = _sh.PartitionSpec(*code_mesh.axis_names)
    return shard_map(lambda p: jnp.any(p, keepdims=True).reshape((1,) * len(code_mesh.axis_names)),
                     mesh=code_mesh, in_specs=spec, out_specs=out_spec)(pred)


def raise_if_error() -> None:
    """Raise the first error recorded by :func:`set_error_if` as a :class:`JaxValueError` (with the
    traceback of the line that recorded it), and clear it; nothing when no error is set.  Called inside a
    traced function it raises ``ValueError`` (the error state is known only once a program ran)."""
    ref = _error_storage.ref
    if ref is None:
        return
    code = ref[...]
    error_code = code.min() if code.ndim else code
    if isinstance(error_code, _trace.Tracer):
        raise ValueError("raise_if_error() should not be called within a traced context, such as within a "
                         "jitted function.")
    error_code = int(np.asarray(error_code))
    if error_code == _NO_ERROR:
        return
    ref[...] = _new_code(_context_mesh() if code.ndim else None) if code.ndim == 0 else _reset_like(code)
    with _error_list_lock:
        if error_code < 0 or error_code >= len(_error_list):
            msg, traceback = _INVALID_ERROR_CODE_MSG, _INVALID_ERROR_CODE_TRACEBACK
        else:
            msg, traceback = _error_list[error_code]
    if isinstance(traceback, str):  # from an imported function
        raise JaxValueError(f"{msg}\nThe original traceback is shown below:\n{traceback}")
    raise JaxValueError(msg).with_traceback(traceback)


def _reset_like(code: Any) -> Any:
    import ftrans.numpy as jnp

    return jnp.full_like(code, np.uint32(_NO_ERROR))


# ------------------------------------------------------------------ export
@dataclasses.dataclass(frozen=True, slots=True)
class _ErrorClass:
    """The error state of an exported function: its error code (an array) and its own ``(message,
    traceback text)`` list (static).  A pytree (registered, with its serialization, by
    ``ftrans.error_check``)."""

    error_code: Any
    error_list: list


def _traceback_to_str(traceback: TracebackType) -> str:
    return "".join(tb_lib.format_list(tb_lib.extract_tb(traceback))).rstrip("\n")


def wrap_for_export(f: Any) -> Any:
    """JAX's ``wrap_for_export``: ``f`` with its own error state, returned beside its outputs as an
    :class:`_ErrorClass`, so the function can be exported (the state is not global then) and, once
    imported, rejoin the importer's with :func:`unwrap_from_import`."""

    def inner(*args: Any, **kwargs: Any) -> Any:
        global _error_list
        old_ref = _error_storage.ref
        _initialize_error_code_ref(outside=False)
        with _error_list_lock:
            old_error_list, _error_list = _error_list, []
            try:
                out = f(*args, **kwargs)
                code = _error_storage.ref[...]
                error_code = code.min() if code.ndim else code
            finally:
                _error_list, new_error_list = old_error_list, _error_list
                _error_storage.ref = old_ref
        new_error_list = [(msg, tb if isinstance(tb, str) else _traceback_to_str(tb)) for msg, tb in new_error_list]
        return out, _ErrorClass(error_code, new_error_list)

    return inner


def unwrap_from_import(f: Any) -> Any:
    """JAX's ``unwrap_from_import``: ``f`` (an imported function wrapped by :func:`wrap_for_export`)
    returning only its outputs, its errors merged into this process's error state (an error already set
    stays the first)."""
    import ftrans.numpy as jnp

    if _error_storage.ref is None:
        _initialize_error_code_ref()

    def inner(*args: Any, **kwargs: Any) -> Any:
        out, error_class = f(*args, **kwargs)
        new_error_code, error_list = error_class.error_code, error_class.error_list
        with _error_list_lock:
            offset = len(_error_list)
            _error_list.extend(error_list)
        ref = _error_storage.ref
        error_code = ref[...]
        new_error_code = jnp.asarray(new_error_code, dtype=np.uint32)
        should_update = jnp.logical_and(error_code == np.uint32(_NO_ERROR), new_error_code != np.uint32(_NO_ERROR))
        ref[...] = jnp.where(should_update, new_error_code + np.uint32(offset), error_code)
        return out

    return inner


# ------------------------------------------------------------------ jnp's checks (JAX's internal numpy.error module)
Category = Literal["nan", "divide", "oob"]
Behavior = Literal["ignore", "raise"]


def _is_category_disabled(category: Category | None) -> bool:
    if category is None:
        return False
    if category == "nan":
        raise ValueError("nan is deprecated. Use `_set_error_if_nan` instead.")
    if category == "divide":
        raise ValueError("divide is deprecated. Use `_set_error_if_divide_by_zero` instead.")
    if category == "oob":
        return config.error_checking_behavior_oob == "ignore"
    raise ValueError(f"Invalid category: {category}")


def _set_error_if_with_category(pred: Any, /, msg: str, category: Category | None = None) -> None:
    """:func:`set_error_if`, skipped while the option of ``category`` ("oob") is "ignore"."""
    if _is_category_disabled(category):
        return
    set_error_if(pred, msg)


def _set_error_if_nan(pred: Any, /) -> None:
    """Record "NaN encountered" if a floating-point ``pred`` has a NaN (``error_checking_behavior(nan=)``)."""
    if config.error_checking_behavior_nan == "ignore":
        return
    from ftrans.core import dtypes
    from ftrans.core.operands import dtype_weak

    if not dtypes.issubdtype(dtype_weak(pred)[0], np.floating):  # only real floats, as JAX
        return
    import ftrans.numpy as jnp

    set_error_if(jnp.isnan(pred), "NaN encountered")


def _set_error_if_divide_by_zero(pred: Any, /) -> None:
    """Record "Division by zero encountered" if a divisor ``pred`` has a zero
    (``error_checking_behavior(divide=)``)."""
    if config.error_checking_behavior_divide == "ignore":
        return
    import ftrans.numpy as jnp

    set_error_if(pred == jnp.zeros((), jnp.result_type(pred)), "Division by zero encountered")


def _check_precondition_oob_gather(shape: tuple, gather_indices: Any) -> None:
    """Record an out-of-bounds error for gather indices outside ``[-n, n)`` of their dimension
    (``error_checking_behavior(oob=)``)."""
    if config.error_checking_behavior_oob == "ignore":
        return
    size = getattr(gather_indices, "size", None)
    if (np.size(gather_indices) if size is None else size) == 0:
        return
    import ftrans.numpy as jnp

    idx = jnp.asarray(gather_indices)
    bounds = jnp.array(shape, dtype=idx.dtype)
    set_error_if(jnp.logical_or(jnp.min(idx) < -bounds, jnp.max(idx) >= bounds),
                 "Out of bounds encountered before calling `lax.gather`")


def _ensure_state() -> None:
    """This thread's error state, made now if it has none (outside any transform, so that staged functions
    traced later thread it)."""
    if _error_storage.ref is None:
        _initialize_error_code_ref()


def _on_config(name: str, value: Any = None) -> None:
    if name.startswith("error_checking_behavior_") and getattr(config, name) == "raise":
        _ensure_state()


config._listeners.append(_on_config)


def nan_check(out: Any) -> Any:
    """``out``, with a NaN recorded when the nan check is on (the hook jnp's functions call)."""
    if config.error_checking_behavior_nan != "ignore":
        _set_error_if_nan(out)
    return out


def divide_check(divisor: Any) -> None:
    if config.error_checking_behavior_divide != "ignore":
        _set_error_if_divide_by_zero(divisor)


class error_checking_behavior:  # noqa: N801 - JAX's name
    """JAX's ``error_checking_behavior``: set, for the block, what jnp's checks do ("ignore", or "raise": record
    the error for :func:`raise_if_error`); ``all`` sets every category, a category's own argument wins."""

    def __init__(self, *, all: Behavior | None = None, nan: Behavior | None = None,  # noqa: A002 - JAX's name
                 divide: Behavior | None = None, oob: Behavior | None = None) -> None:
        new_settings: dict[str, str] = {}
        if all is not None:
            new_settings["nan"] = new_settings["divide"] = new_settings["oob"] = all
        if nan is not None:
            new_settings["nan"] = nan
        if divide is not None:
            new_settings["divide"] = divide
        if oob is not None:
            new_settings["oob"] = oob
        self.new_settings = new_settings
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> error_checking_behavior:
        for key, value in self.new_settings.items():
            self.stack.enter_context(config_context(f"error_checking_behavior_{key}")(value))
        if "raise" in self.new_settings.values():
            _ensure_state()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self.stack.close()
