"""The tracer leak checker (JAX's ``jax.check_tracer_leaks``).

With ``config.check_tracer_leaks`` on, every transform level checks, when it
ends, that none of its tracers outlived it: a tracer kept in a list, a global,
an object or a closure of the user's is a *leak* (using it later raises
``UnexpectedTracerError`` far from the cause).  The check runs a garbage
collection, finds the tracers still pointing at the ended trace, and follows
who refers to each one.  References held by ftrans itself while it finishes
the transform (the locals of its frames, its own objects) are not leaks; a
chain ending anywhere else is, and the error shows it link by link.

The check costs a full garbage collection per transform level, so it is off
unless asked for (``with ftrans.check_tracer_leaks():``, or
``JAX_CHECK_TRACER_LEAKS=1``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import types
from typing import Any

from ftrans import errors

_FTRANS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_MAX_DEPTH = 12


def _is_ftrans_code(code: types.CodeType) -> bool:
    return code.co_filename.startswith(_FTRANS_DIR)


def _internal(obj: Any, tracer_type: type) -> bool:
    """An object ftrans owns while finishing a transform (not a place a user keeps values)."""
    if isinstance(obj, tracer_type):
        return False
    if isinstance(obj, types.FunctionType):
        return _is_ftrans_code(obj.__code__)
    if isinstance(obj, (types.GeneratorType, types.CoroutineType)):
        code = getattr(obj, "gi_code", None) or getattr(obj, "cr_code", None)
        return code is None or _is_ftrans_code(code)
    mod = getattr(type(obj), "__module__", "") or ""
    return mod.startswith("ftrans") or mod == "contextlib"


def _link(child: Any, parent: Any) -> str:
    """How ``parent`` refers to ``child``, in words."""
    if isinstance(parent, dict):
        for k, v in parent.items():
            if v is child:
                return f"[{k!r}]"
    elif isinstance(parent, (list, tuple)):
        for i, v in enumerate(parent):
            if v is child:
                return f"[{i}]"
    elif isinstance(parent, types.FunctionType):
        names = parent.__code__.co_freevars
        for name, cell in zip(names, parent.__closure__ or ()):
            if cell is child or (isinstance(child, types.CellType) and cell is child):
                return f" ({parent.__qualname__}) closed-over variable {name}"
        return f" ({parent.__qualname__})"
    elif isinstance(parent, types.CellType):
        return " (a closure cell)"
    else:
        d = getattr(parent, "__dict__", None)
        if isinstance(d, dict):
            for k, v in d.items():
                if v is child:
                    return f".{k}"
    return ""


def _name(obj: Any) -> str:
    return f"<{type(obj).__name__} {id(obj)}>"


def origin() -> str:
    """The user's line that is starting a transform (the first frame outside ftrans, jax and contextlib)."""
    return user_line(sys._getframe(1))


def user_line(f: Any) -> str:
    """The first frame from ``f`` outward outside ftrans, jax and contextlib, as ``file:line (function)``."""
    skip = errors.LIBRARY_DIRS + (os.path.dirname(contextlib.__file__) + os.sep + "contextlib.py",)
    while f is not None and f.f_code.co_filename.startswith(skip):
        f = f.f_back
    return "<unknown location>" if f is None else f"{f.f_code.co_filename}:{f.f_lineno} ({f.f_code.co_name})"


def find_leaks(main: Any, tracer_type: type) -> list[tuple[Any, list[tuple[Any, Any]]]]:
    """The tracers of ``main``'s ended trace that something outside ftrans still refers to.

    Each comes with the chain of references from it up to where it is kept.
    """
    gc.collect()
    trace = main.trace
    candidates = [r for r in gc.get_referrers(trace) if isinstance(r, tracer_type)]
    if not candidates:
        return []
    # What the running ftrans frames hold in their locals (the transform being finished).
    owned: set[int] = set()
    f = sys._getframe(1)
    while f is not None:
        if _is_ftrans_code(f.f_code):
            for v in list(f.f_locals.values()):
                owned.add(id(v))
        f = f.f_back
    return _leaked(candidates, owned, tracer_type, trace, main)


def _leaked(candidates: list, owned: set, tracer_type: type, trace: Any, main: Any) -> list:
    """Walk up the referrers of all candidates together, one heap scan per level.

    A path that reaches an object nothing visible refers to (so a running frame outside
    ftrans, i.e. the user's code, or an interpreter root holds it) is a leak; a path that
    reaches a local of a running ftrans frame or an object of ftrans is not.
    """
    parent: dict[int, tuple[Any, Any]] = {}  # id(holder) -> (holder, the object it holds on the path)
    origin: dict[int, Any] = {id(t): t for t in candidates}  # id(obj) -> the candidate its path starts at
    frontier = list(candidates)
    seen = {id(t) for t in candidates}
    mine = {id(parent), id(origin), id(seen), id(candidates), id(owned)}
    found: dict[int, tuple[Any, list]] = {}
    for _ in range(_MAX_DEPTH):
        if not frontier:
            break
        mine.add(id(frontier))
        ids = {id(o) for o in frontier}
        refs = gc.get_referrers(*frontier)
        mine.add(id(refs))
        held: set[int] = set()  # frontier objects something refers to
        nxt = []
        for r in refs:
            if id(r) in mine or isinstance(r, types.FrameType) or r is trace or r is main:
                continue
            kids = [c for c in gc.get_referents(r) if id(c) in ids]
            for c in kids:
                held.add(id(c))
            if id(r) in seen or not kids:
                continue
            if _module_globals(r) or _user(r):  # kept by the user's code: a leak, whoever else holds it
                seen.add(id(r))
                parent[id(r)] = (r, kids[0])
                start = origin[id(kids[0])]
                if id(start) not in found:
                    found[id(start)] = (start, _chain(parent, r))
                continue
            if id(r) in owned or _internal(r, tracer_type):
                continue
            seen.add(id(r))
            parent[id(r)] = (r, kids[0])
            origin[id(r)] = origin[id(kids[0])]
            nxt.append(r)
        del refs
        for o in frontier:
            start = origin[id(o)]
            if id(o) in held or id(o) in owned or o is start or id(start) in found:
                continue
            found[id(start)] = (start, _chain(parent, o))
        frontier = [r for r in nxt if id(origin[id(r)]) not in found]
    return [(t, _extend(chain, tracer_type, trace, main)) for t, chain in found.values()]


def _extend(chain: list, tracer_type: type, trace: Any, main: Any, steps: int = 6) -> list:
    """Follow the holders of a leak's top object a few more steps, for the error message."""
    chain = list(chain)
    seen = {id(c) for c, _ in chain} | {id(h) for _, h in chain}
    for _ in range(steps):
        if not chain:
            break
        top = chain[-1][1]
        if _module_globals(top):
            break
        refs = gc.get_referrers(top)
        nxt, best = None, 99
        for r in refs:
            if r is refs or r is chain or id(r) in seen or isinstance(r, types.FrameType) or r is trace or \
                    r is main or _internal(r, tracer_type):
                continue
            if isinstance(r, list) and any(x is refs for x in r):
                continue
            rank = _rank(top, r)
            if rank < best:
                nxt, best = r, rank
        del refs
        if best > 2:  # only bookkeeping of libraries refers to it (caches keyed by id, ...): stop here
            break
        if nxt is None:
            break
        seen.add(id(nxt))
        chain.append((top, nxt))
    return chain


def _rank(child: Any, holder: Any) -> int:
    """How telling ``holder`` is as the next link of a leak's chain (lower: more)."""
    if isinstance(holder, list) or _user(holder) or _module_globals(holder):
        return 0
    if isinstance(holder, dict):
        key = next((k for k, v in holder.items() if v is child), None)
        return 0 if isinstance(key, str) else 3
    if isinstance(holder, (types.CellType, types.FunctionType)):
        return 1
    if isinstance(holder, (tuple, set)):
        return 2
    return 3


def _chain(parent: dict, top: Any) -> list:
    """The references from a candidate up to ``top``: [(held, holder), ...], the candidate's first."""
    chain = []
    cur = top
    while id(cur) in parent:
        holder, child = parent[id(cur)]
        chain.append((child, holder))
        cur = child
    return list(reversed(chain))


_STDLIB = os.path.dirname(os.__file__) + os.sep


def _library_file(path: str | None) -> bool:
    return not path or path.startswith(errors.LIBRARY_DIRS) or (path.startswith(_STDLIB) and
                                                                "site-packages" not in path)


def _user(obj: Any) -> bool:
    """A function or object of the user's own code (not a container, not a library's)."""
    if isinstance(obj, types.FunctionType):
        return not _library_file(obj.__code__.co_filename)
    t = type(obj)
    if t.__module__ == "builtins":
        return False
    mod = sys.modules.get(t.__module__)
    return mod is not None and not _library_file(getattr(mod, "__file__", None))


def _module_globals(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    mod = sys.modules.get(obj.get("__name__")) if isinstance(obj.get("__name__"), str) else None
    return mod is not None and getattr(mod, "__dict__", None) is obj


def leak_error(main: Any, leaks: list) -> errors.UnexpectedTracerError:
    """The error naming each leaked tracer and the chain that keeps it alive."""
    parts = []
    for t, chain in leaks:
        lines = [f"This {type(t).__name__} with object id {id(t)} was created on line:",
                 f"  {main.origin or '<unknown location>'}  (where the transform that made it began)"]
        i = 0
        while i < len(chain):
            child, held = chain[i]
            if isinstance(held, types.CellType) and i + 2 < len(chain) and \
                    isinstance(chain[i + 2][1], types.FunctionType):  # cell -> __closure__ -> function
                fn = chain[i + 2][1]
                var = next((n for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()) if c is held), "?")
                lines.append(f"{_name(child)} is referred to by {_name(fn)} ({fn.__qualname__}) "
                             f"closed-over variable {var}")
                i += 3
                continue
            lines.append(f"{_name(child)} is referred to by {_name(held)}{_link(child, held)}")
            i += 1
        parts.append("\n".join(lines))
    return errors.UnexpectedTracerError(
        f"Leaked trace {type(main.trace).__name__} (level {main.level}). Leaked tracer(s):\n\n"
        + "\n\n".join(parts)
        + "\n\nA value computed inside a transform was kept (in a list, a global, an object or a "
        "closure) after the transform ended; return it from the transformed function instead."
        + f"\n  (in your code at {main.origin or '<unknown location>'})")
