"""Tracebacks that end in the user's code: ftrans's own frames taken out of the exceptions that leave it.

An exception raised inside a transform (the user's function failing while ``jit`` traces it, a shape
error in ``lax.scan``'s body) unwinds through dozens of ftrans frames before it reaches the user. As
JAX does (its ``jax_traceback_filtering`` option), the outermost ftrans entry point it leaves through,
an *API boundary*, rewrites the exception's traceback to keep only frames outside ftrans (and the jax
package ftrans runs on); the user's frames inside, such as the traced function's, stay. The option
``traceback_filtering`` says how:

* ``"quiet_remove_frames"``: the frames are removed and a note says so (``JAX_TRACEBACK_FILTERING=off``
  to see them).
* ``"remove_frames"``: the frames are removed; the exception's ``__cause__`` becomes an
  :class:`UnfilteredStackTrace` carrying the whole traceback.
* ``"tracebackhide"``: nothing is removed; each ftrans frame gets a ``__tracebackhide__`` local, which
  IPython and pytest honour.
* ``"off"``: the traceback is left alone.
* ``"auto"`` (the default): ``"tracebackhide"`` under IPython, else ``"quiet_remove_frames"``.

The cost is paid only when an exception leaves a boundary: a boundary is a ``try`` around the call
(free in CPython 3.11 while nothing is raised), plus, for the functions :func:`api_boundary` wraps,
one Python frame. Nested boundaries are told apart by their code objects (:func:`register_boundary`),
found by walking the stack only once an exception is on its way out.
"""

from __future__ import annotations

import functools
import os
import traceback
import types
from typing import Any, TypeVar

from ftrans.errors import LIBRARY_DIRS

C = TypeVar("C")

# Path prefixes (directories end with the separator) whose frames are never the user's.
_exclude: tuple[str, ...] = LIBRARY_DIRS

MODES = ("off", "tracebackhide", "remove_frames", "quiet_remove_frames", "auto")

_simplified_tb_msg = ("For simplicity, ftrans has removed its internal frames from the traceback of the "
                      "following exception. Set JAX_TRACEBACK_FILTERING=off to include these.")
_unfiltered_msg = ("The stack trace below excludes ftrans-internal frames.\n"
                   "The preceding is the original exception that occurred, unmodified.\n"
                   "\n--------------------")


class UnfilteredStackTrace(Exception):
    """The ``__cause__`` the ``"remove_frames"`` mode gives an exception: its message is the original
    exception's, its traceback the whole one, ftrans's frames included (JAX's ``UnfilteredStackTrace``)."""


class SimplifiedTraceback(Exception):
    """JAX's ``SimplifiedTraceback``: says that ftrans's frames were removed from a traceback."""

    def __str__(self) -> str:
        return _simplified_tb_msg


def register_exclusion(path: str) -> None:
    """Treat frames from ``path`` (a file, or a directory and everything under it) as library frames:
    left out of filtered tracebacks, as ftrans's own are (JAX's ``register_exclusion``)."""
    global _exclude
    p = os.path.abspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "")
    if p not in _exclude:
        _exclude = (*_exclude, p)


def include_filename(filename: str) -> bool:
    """Whether a frame of ``filename`` is the user's (kept in a filtered traceback)."""
    return not filename.startswith(_exclude)


def include_frame(f: types.FrameType) -> bool:
    return include_filename(f.f_code.co_filename)


# The code objects of the functions that are API boundaries: the wrapper ``api_boundary`` makes, and
# the methods with a boundary written into them (``register_boundary``).
_boundary_codes: set = set()


def register_boundary(fun: Any) -> Any:
    """Mark ``fun`` (a function whose body ends its ``try`` with ``except Exception as e:
    reraise_filtered(e)``) as an API boundary, so boundaries nested inside it leave the exception to it."""
    _boundary_codes.add(getattr(fun, "__func__", fun).__code__)
    return fun


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the library frames (a new chain of traceback entries; the frames are shared)."""
    out = None
    for f, lineno in reversed(list(traceback.walk_tb(tb))):
        if include_frame(f):
            out = types.TracebackType(out, f, f.f_lasti, lineno)
    return out


def _add_call_stack_frames(tb: types.TracebackType) -> types.TracebackType:
    """``tb`` extended outwards with the callers of its first frame, up to (and through) the first run of
    module-level frames: the whole stack an unfiltered traceback shows."""
    out = tb
    reached_module_level = False
    for f, lineno in traceback.walk_stack(tb.tb_frame.f_back):
        if "importlib._bootstrap" in f.f_code.co_filename:
            continue
        if reached_module_level and f.f_code.co_name != "<module>":
            break
        out = types.TracebackType(out, f, f.f_lasti, lineno)
        if f.f_code.co_name == "<module>":
            reached_module_level = True
    return out


def _running_under_ipython() -> bool:
    try:
        get_ipython  # type: ignore[name-defined]  # noqa: B018 - IPython puts it in the builtins
    except NameError:
        return False
    try:
        import IPython

        return tuple(IPython.version_info[:2]) >= (7, 17)
    except Exception:  # noqa: BLE001 - an IPython without version_info: no __tracebackhide__ support known
        return False


def filtering_mode() -> str:
    """The ``traceback_filtering`` option's mode in effect here (``"auto"`` resolved)."""
    from ftrans.core.config import config

    mode = config.traceback_filtering
    if mode is None or mode == "auto":
        return "tracebackhide" if _running_under_ipython() else "quiet_remove_frames"
    return mode


def _under_boundary(frame: types.FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code in _boundary_codes:
            return True
        frame = frame.f_back
    return False


def reraise_filtered(e: BaseException) -> None:
    """Called by an API boundary's ``except`` clause, before its bare ``raise``: filter ``e``'s traceback
    per the ``traceback_filtering`` option, unless another boundary further out will."""
    tb = e.__traceback__
    if tb is None:
        return
    try:
        if _under_boundary(tb.tb_frame.f_back):
            return
        _materialize_user_context(e)
        mode = filtering_mode()
        if mode == "off":
            return
        if mode == "tracebackhide":
            for f, _ in traceback.walk_tb(tb):
                if f.f_code is _wrapper_code or include_frame(f):  # (the wrapper has its own local)
                    continue
                loc = f.f_locals  # a snapshot, kept on the frame: it must not hold the exception (a cycle)
                loc["__tracebackhide__"] = True
                if f.f_code in _boundary_codes:
                    for k in [k for k, v in loc.items() if v is e]:
                        del loc[k]
                del loc
            return
        e.with_traceback(filter_traceback(tb))
        if mode == "quiet_remove_frames":
            e.add_note("--------------------\n" + _simplified_tb_msg)
        elif mode == "remove_frames":
            msg = "".join(traceback.format_exception_only(type(e), e)).strip()
            unfiltered = UnfilteredStackTrace(f"{msg}\n\n{_unfiltered_msg}")
            unfiltered.with_traceback(_add_call_stack_frames(tb))
            unfiltered.__cause__ = e.__cause__
            unfiltered.__context__ = e.__context__
            unfiltered.__suppress_context__ = e.__suppress_context__
            e.__cause__ = unfiltered
            e.__context__ = None
            del unfiltered
    finally:
        del tb, e  # (the traceback refers to the frames that refer to it: no cycle left behind)


def api_boundary(fun: C) -> C:
    """Wrap ``fun`` (a public entry point of ftrans) so an exception leaving it has ftrans's frames filtered
    out of its traceback (``traceback_filtering``). Boundaries compose: only the outermost one filters."""

    @functools.wraps(fun)  # type: ignore[arg-type]
    def reraise_with_filtered_traceback(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - read by IPython and pytest
        try:
            return fun(*args, **kwargs)  # type: ignore[operator]
        except Exception as e:
            reraise_filtered(e)
            raise

    return reraise_with_filtered_traceback  # type: ignore[return-value]


_wrapper_code = api_boundary(lambda: None).__code__
_boundary_codes.add(_wrapper_code)


# ---------------------------------------------------------------------------------------------------------
# Where a failing operation came from, when it fails after tracing (JAX's ``JaxStackTraceBeforeTransformation``)

_before_msg = ("The preceding stack trace is the source of the ftrans operation that, once transformed by ftrans, "
               "triggered the following exception.\n\n--------------------")


class JaxStackTraceBeforeTransformation(Exception):
    """The ``__cause__`` given to an exception raised while an operation is re-run or transformed after it was
    traced (a ``debug_nans`` re-run, ``eval_jaxpr`` of a staged program): its traceback is the user's stack
    where the operation was traced (JAX's class of the same name)."""


def has_user_context(e: BaseException | None) -> bool:
    """Whether ``e``'s chain of causes already says where its operation was traced."""
    while e is not None:
        if isinstance(e, JaxStackTraceBeforeTransformation):
            return True
        e = e.__cause__
    return False


def _frame_raising_at(code: Any, lasti: int) -> types.TracebackType | None:
    """A traceback entry whose frame shows as ``code``'s file, function and line at instruction ``lasti`` (a
    stand-in frame: the real one finished when tracing did), its raise spanning the same columns."""
    from ftrans.core.ir import _line_of

    line = _line_of(code, lasti)
    name, indent = "__ftrans_marker__", 0
    try:
        _l, end, col, end_col = list(code.co_positions())[lasti // 2]
        if end == line and col is not None and end_col is not None and end_col - col >= 8 and col != 1:
            name, indent = "_" * (end_col - col - 6), col  # ``raise ___...`` as wide as the real expression
    except (AttributeError, IndexError, TypeError, ValueError):
        pass
    try:
        lead = "0;" + " " * (indent - 2) if indent else ""  # (a statement before, not an indentation)
        stub = compile("\n" * max(line - 1, 0) + lead + "raise " + name, code.co_filename, "exec")
        stub = stub.replace(co_name=code.co_name, **({"co_qualname": code.co_qualname}
                                                     if hasattr(code, "co_qualname") else {}))
        exec(stub, {name: _Marker(), "__name__": "__ftrans_stub__"})
    except _Marker as m:
        tb = m.__traceback__
        return tb.tb_next if tb is not None else None
    except Exception:  # noqa: BLE001 - best effort: a location that cannot be shown is left out
        return None
    return None


class _Marker(Exception):
    pass


def traceback_from_frames(raw: Any) -> types.TracebackType | None:
    """A Python traceback (outermost first) of ``(code, lasti)`` pairs given innermost first, as
    ``SourceInfo.traceback`` keeps a traced equation's frames (JAX's ``Traceback.as_python_traceback``)."""
    out = None
    for code, lasti in raw:  # innermost first: each becomes the next entry's caller
        entry = _frame_raising_at(code, lasti)
        if entry is not None:
            out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def attach_user_context(e: BaseException, info: Any) -> None:
    """Note that ``e`` was raised while an equation staged at ``info`` (a ``SourceInfo``) ran again or was
    transformed; the innermost such note wins. When ``e`` leaves ftrans through an API boundary it becomes a
    :class:`JaxStackTraceBeforeTransformation` cause showing the user's stack where the equation was traced
    (made only then: an exception ftrans catches itself costs one attribute)."""
    if info is None or getattr(info, "code", None) is None:
        return
    try:
        if getattr(e, "_ftrans_traced_at", None) is None:
            e._ftrans_traced_at = info  # type: ignore[attr-defined]
    except AttributeError:  # an exception type without attributes of its own
        pass


def _materialize_user_context(e: BaseException) -> None:
    info = getattr(e, "_ftrans_traced_at", None)
    if info is None or has_user_context(e):
        return
    try:
        e._ftrans_traced_at = None  # type: ignore[attr-defined]
    except AttributeError:
        pass
    tb = traceback_from_frames(info.traceback._raw)
    if tb is None:
        return
    msg = "".join(traceback.format_exception_only(type(e), e)).strip()
    before = JaxStackTraceBeforeTransformation(f"{msg}\n\n{_before_msg}").with_traceback(tb)
    before.__cause__, before.__context__ = e.__cause__, e.__context__
    before.__suppress_context__ = e.__suppress_context__
    e.__cause__, e.__context__ = before, None
