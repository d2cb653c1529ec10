"""Key-reuse tracking: the engine behind ``ftrans.experimental.key_reuse`` (JAX's ``jax_debug_key_reuse``).

ftrans's IR never sees keys (a key array crosses every transform as its ``uint32`` base array,
``core/keys.py``), so the checker works on the key arrays themselves while a program is traced or run:

* Every key array made while checking is on carries a ``Use``: whether it (or, as a bool mask of its
  shape, which of its keys) has been consumed, in which traced body (``Frame``) it was made, and where
  the user consumed it.  Structural views (``reshape``, ``squeeze``, broadcasting, ``lax.dynamic_slice``,
  copies) share their source's ``Use``; a static index or slice consumes the part it takes and gives
  fresh keys (as JAX's ``slice`` signature: ``Sink(mask)`` and ``Source``); ``concatenate`` and ``stack``
  consume their inputs and give fresh keys.
* A sampler (``ftrans.random.bits``, ``uniform``, ``split``, ...) *consumes* its key (``sink``): a key
  consumed before raises ``KeyReuseError``.  ``random.key``, ``split``'s results, ``wrap_key_data``
  and ``clone`` are fresh keys; ``fold_in`` and ``key_data`` consume nothing (JAX's signatures).
* A traced body (a ``jit`` call, a ``check_key_reuse`` analysis, a ``cond`` branch, a ``scan`` or
  ``while_loop`` body) is a ``Frame``: its input keys start unconsumed and keys it closes over are
  tracked in the frame's own table, so the body's effect is a signature (which inputs and closed-over
  keys it consumes, which outputs are fresh, consumed, or forwarded inputs), as JAX derives one from a
  jaxpr.  The caller then applies the signature to its own keys (``apply``): passing a consumed key to
  a function that consumes it raises, as JAX's "Previously-consumed key passed to jit-compiled function".
  A loop body that consumes a closed-over key, or a carried key it does not replace with a fresh one,
  would reuse it on the next iteration, and raises at once.

Checking is on while ``config.debug_key_reuse`` is True, and inside a ``check_key_reuse`` analysis.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from ftrans.core import config as _config
from ftrans.core import keys as _keys
from ftrans.errors import KeyReuseError, user_location

__all__ = ["Use", "Frame", "on", "tracking", "use_of", "sink", "sink_use", "alias", "fresh", "exempt", "taken",
           "consumed_all", "frame", "current", "suspended", "key_leaves", "apply", "apply_outputs", "merged",
           "traced_body", "loop_check"]


class Use:
    """The consumption state shared by a key array and its structural views."""

    __slots__ = ("consumed", "frame", "where", "shape")

    def __init__(self, consumed: Any, frame: Frame | None, shape: tuple = ()) -> None:
        self.consumed = consumed  # bool, or a bool array of ``shape``
        self.frame = frame
        self.where: str | None = None
        self.shape = shape


EXEMPT = Use(False, None)  # a sampler's own handle on its key (its inner calls consume nothing again)


class Frame:
    """A traced body under analysis: its inputs' and closed-over keys' consumption, and its outputs."""

    __slots__ = ("kind", "loop", "owner", "local", "order", "inputs", "outputs")

    def __init__(self, kind: str, loop: str | None = None, owner: Any = None) -> None:
        self.kind = kind
        self.loop = loop  # "scan body", "while_loop body", "while_loop cond" for a loop's body, else None
        self.owner = owner
        self.local: dict[Use, Any] = {}  # a key made outside -> its consumption here (starts unconsumed)
        self.order: list[Use] = []  # those keys, in order of first use (the closed-over keys)
        self.inputs: list[Use | None] | None = None  # per flat input leaf: its key's Use, or None
        self.outputs: list[tuple[str, Any]] | None = None  # per flat output leaf: a signature entry

    # -- the signature ------------------------------------------------------------
    def input_sinks(self) -> list[tuple[int, Any]]:
        return [(i, u.consumed) for i, u in enumerate(self.inputs or ()) if u is not None and np.any(u.consumed)]

    def const_sinks(self) -> list[tuple[Use, Any]]:
        return [(u, self.local[u]) for u in self.order if np.any(self.local[u])]

    def set_inputs(self, leaves: list) -> None:
        ins: list[Use | None] = []
        for x in leaves:
            if _keys.is_key(x):
                u = Use(False, self, _shape(x))
                x._use = u
                ins.append(u)
            else:
                ins.append(None)
        self.inputs = ins

    def set_outputs(self, leaves: list) -> None:
        outs: list[tuple[str, Any]] = []
        for x in leaves:
            if not _keys.is_key(x):
                outs.append(("none", None))
                continue
            u = use_of(x)
            if self.inputs is not None and u in self.inputs:
                outs.append(("forward", self.inputs.index(u)))
            elif u.frame is not self and u is not EXEMPT:
                outs.append(("const", u))
            elif np.any(u.consumed):
                outs.append(("consumed", None))
            else:
                outs.append(("source", None))
        self.outputs = outs


class _State(threading.local):
    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.suspended = 0


_tls = _State()
_analyses = 0  # frames open in any thread
# Whether checking may be on in some thread (the option set, or a context of it open, or an analysis
# running): the one test ``jit`` calls make (``transforms/jit.py``).
hot = False
# Called with the new value when ``hot`` changes (``jit`` swaps in its checking call then, so its hot path
# makes no test while checking is off).
hot_listeners: list = []


def on() -> bool:
    """Whether key arrays are being tracked (the option is on, or an analysis is running)."""
    return _analyses > 0 or bool(_config.config.debug_key_reuse)


def _on_option(name: str, value: Any = None) -> None:
    if name == "debug_key_reuse":
        _refresh()


_config.config._listeners.append(_on_option)
_config.scope_listeners.append(_on_option)


def tracking() -> bool:
    """Whether this thread tracks consumption now (on, and not inside a call being run for real after its
    analysis)."""
    return on() and not _tls.suspended


def _refresh() -> None:
    global hot
    # (Outside an analysis, a key made while the option is on gets its state when first used.)
    _keys.reuse_new = _new_use if _analyses > 0 else None
    was = hot
    hot = _analyses > 0 or bool(_config.config.__dict__.get("debug_key_reuse")) or \
        "debug_key_reuse" in _config._scoped
    if hot != was:
        for f in hot_listeners:
            f(hot)


def _shape(k: Any) -> tuple:
    try:
        return tuple(k.shape)
    except (AttributeError, TypeError):  # a key node over a placeholder (pytree bookkeeping)
        return ()


def _new_use(k: Any) -> Use:
    return Use(False, _tls.frames[-1] if _tls.frames else None, _shape(k))


def use_of(k: Any) -> Use:
    u = getattr(k, "_use", None)
    if u is None:  # made while checking was off: a key of no frame, unconsumed
        u = k._use = Use(False, None, _shape(k))
    return u


def alias(src: Any, dst: Any) -> Any:
    """``dst`` (a structural view of ``src``) shares ``src``'s consumption."""
    if on():
        dst._use = use_of(src)
    return dst


def alias_leaves(outer: Any, inner: Any) -> None:
    """The key arrays of ``inner`` (a transform's traced view of ``outer``, the same tree) share the
    consumption of ``outer``'s."""
    if not tracking():
        return
    for o, i in zip(key_leaves(outer), key_leaves(inner)):
        if _keys.is_key(o) and _keys.is_key(i):
            i._use = use_of(o)


def fresh(k: Any) -> Any:
    """``k`` as a new, unconsumed key (made in the current frame)."""
    if on():
        k._use = _new_use(k)
    return k


def taken(src: Any, idx: Any, out: Any) -> Any:
    """``out = src[idx]``: a static index (integers and slices) consumes the keys it takes and gives fresh
    ones (JAX's ``slice`` signature); any other index (an array, a traced one) gives a view of ``src``
    (JAX's ``gather``, which forwards)."""
    if not on():
        return out
    parts = idx if isinstance(idx, tuple) else (idx,)
    if all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) and not isinstance(p, bool)
           for p in parts) and all(isinstance(getattr(p, a, None), (int, np.integer, type(None)))
                                    for p in parts if isinstance(p, slice) for a in ("start", "stop", "step")):
        try:
            mask = np.zeros(src.shape, np.bool_)
            mask[idx] = True
        except (IndexError, TypeError, ValueError):
            mask = None
        if mask is not None and not (mask.all() and out.size == src.size):
            sink(src, "slice", mask=mask)
            return fresh(out)
    return alias(src, out)


def consumed_all(srcs: Any, prim: str, out: Any) -> Any:
    """``out`` made from the key arrays ``srcs`` (``concatenate``, ``stack``): they are consumed and
    ``out`` is fresh (JAX's ``concatenate`` signature)."""
    if not on():
        return out
    srcs = list(srcs)
    if len(srcs) == 1:
        return alias(srcs[0], out)
    for i, k in enumerate(srcs):
        if _keys.is_key(k):
            sink(k, prim, idx=i)
    return fresh(out)


def exempt(k: Any) -> Any:
    """``k`` as a handle whose consumption is not counted (a sampler's own calls on a key it consumed)."""
    k._use = EXEMPT
    return k


def _is_traced(k: Any) -> bool:
    from ftrans.core.trace import Tracer

    return isinstance(k._base_array, Tracer)


def _message(prim: str, eager_name: str, idx: int, traced: bool, u: Use) -> str:
    if traced:
        msg = f"In {prim}, argument {idx} is already consumed."
    else:
        msg = f"Previously-consumed key passed to {eager_name} at index {idx}"
    first = f" (it was first consumed at {u.where})" if u.where else ""
    return (f"{msg}\n  A PRNG key may be used once{first}: split it (ftrans.random.split) for independent "
            "draws, or pass ftrans.random.clone(key) where reusing it is intended")


def sink(k: Any, prim: str, eager_name: str | None = None, idx: int = 0, mask: Any = True) -> None:
    """Consume the key array ``k`` (where ``mask`` is True) in the operation ``prim``; a key consumed
    before raises ``KeyReuseError`` naming ``prim`` (traced) or ``eager_name`` (eagerly)."""
    if not tracking():
        return
    u = use_of(k)
    if u is EXEMPT:
        return
    sink_use(u, prim, eager_name or prim, idx, mask, _is_traced(k) or bool(_tls.frames))


def sink_use(u: Use, prim: str, eager_name: str, idx: int, mask: Any, traced: bool) -> None:
    if u is EXEMPT:
        return
    if isinstance(mask, np.ndarray):
        if mask.shape != u.shape:  # a view of another shape: the whole key array
            mask = bool(mask.any())
        elif not mask.any():
            return
    elif not mask:
        return
    f = _tls.frames[-1] if _tls.frames else None
    if f is None or u.frame is f:
        cur = u.consumed
        if np.any(np.logical_and(cur, mask)):
            raise KeyReuseError(_message(prim, eager_name, idx, traced, u))
        u.consumed = mask if cur is False else np.logical_or(cur, mask)
        if u.where is None or not np.any(cur):
            u.where = user_location()
        return
    if f.loop is not None:
        raise KeyReuseError(
            f"{f.loop} function leads to key reuse when repeatedly executed, because key constants are "
            f"repeatedly consumed: {prim} consumes a key the loop body closes over, so every iteration "
            "uses the same key; carry the key through the loop and split it in the body")
    if u not in f.local:
        f.local[u] = False
        f.order.append(u)
    cur = f.local[u]
    if np.any(np.logical_and(cur, mask)):
        raise KeyReuseError(_message(prim, eager_name, idx, True, u))
    f.local[u] = mask if cur is False else np.logical_or(cur, mask)
    if u.where is None:
        u.where = user_location()


@contextlib.contextmanager
def frame(kind: str, loop: str | None = None, owner: Any = None) -> Iterator[Frame]:
    """Analyse a traced body: the block runs with a new ``Frame`` innermost."""
    global _analyses
    f = Frame(kind, loop, owner)
    _tls.frames.append(f)
    _analyses += 1
    _refresh()
    try:
        yield f
    finally:
        _tls.frames.pop()
        _analyses -= 1
        _refresh()


def current() -> Frame | None:
    return _tls.frames[-1] if _tls.frames and not _tls.suspended else None


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Run the block without tracking (a call whose effect its analysis has already applied)."""
    _tls.suspended += 1
    try:
        yield
    finally:
        _tls.suspended -= 1


def key_leaves(tree: Any) -> list:
    """The leaves of ``tree`` as users see them (a key array is one leaf)."""
    from ftrans.core import pytrees

    return pytrees.tree_leaves(tree, is_leaf=_keys.is_key)


def apply(f: Frame, in_leaves: list, prim: str, eager_name: str) -> None:
    """Apply the signature of the analysed body ``f`` to the caller's keys: its consumed inputs
    (``in_leaves``, the caller's leaves in the body's input order) and closed-over keys are consumed
    here (a key consumed before raises, naming ``prim`` when traced, ``eager_name`` eagerly)."""
    if not tracking():
        return
    for i, mask in f.input_sinks():
        k = in_leaves[i] if i < len(in_leaves) else None
        if _keys.is_key(k):
            sink(k, prim, eager_name, i, mask)
    n = len(in_leaves)
    traced = bool(_tls.frames) or any(_keys.is_key(k) and _is_traced(k) for k in in_leaves)
    for j, (u, mask) in enumerate(f.const_sinks()):
        sink_use(u, prim, eager_name, n + j, mask, traced)


def apply_outputs(f: Frame, in_leaves: list, out_leaves: list) -> None:
    """The caller's output keys (``out_leaves``) of the analysed body ``f``: a forwarded input or
    closed-over key shares its state; a key the body consumed is consumed; any other is fresh."""
    if f.outputs is None or not on():
        return
    for x, (what, v) in zip(out_leaves, f.outputs):
        if not _keys.is_key(x):
            continue
        if what == "forward" and _keys.is_key(in_leaves[v]):
            x._use = use_of(in_leaves[v])
        elif what == "const":
            x._use = v
        elif what == "consumed":
            x._use = Use(True, _tls.frames[-1] if _tls.frames else None, _shape(x))
        else:
            fresh(x)


def merged(frames: list[Frame]) -> Frame:
    """One signature for alternatives (``cond``'s branches): a key is consumed if any branch consumes it."""
    out = Frame("cond")
    n = max((len(f.inputs or ()) for f in frames), default=0)
    ins: list[Use | None] = [None] * n
    for f in frames:
        for i, u in enumerate(f.inputs or ()):
            if u is not None:
                if ins[i] is None:
                    ins[i] = Use(False, out, u.shape)
                ins[i].consumed = np.logical_or(ins[i].consumed, u.consumed) if np.any(u.consumed) \
                    else ins[i].consumed
        for u in f.order:
            if u not in out.local:
                out.local[u] = False
                out.order.append(u)
            if np.any(f.local[u]):
                out.local[u] = np.logical_or(out.local[u], f.local[u])
    out.inputs = ins
    return out


def traced_body(fun: Any, args: tuple, kind: str, frames: list, loop: str | None = None,
                ncarry: int | None = None, carry_out: bool = True) -> Any:
    """``fun(*args)``, a body being traced, analysed as a ``Frame`` (appended to ``frames``).  For a loop
    body (``loop`` names it), ``ncarry`` counts the carried keys among the inputs' keys and ``carry_out``
    says whether the output starts with the carry (not for a while_loop's cond)."""
    with frame(kind, loop) as f:
        f.set_inputs(key_leaves(args))
        out = fun(*args)
        f.set_outputs(key_leaves(out))
        if loop is not None and ncarry:
            loop_check(f, loop, ncarry, None if carry_out else [])
    frames.append(f)
    return out


def loop_check(f: Frame, what: str, ncarry: int, out_carry: list | None) -> None:
    """A loop body consumed a carried key (one of the first ``ncarry`` input keys) without returning a
    fresh key in its place: the next iteration would consume it again."""
    ins = [u for u in (f.inputs or ()) if u is not None][:ncarry]
    outs = [o for o in (f.outputs or ()) if o[0] != "none"][:ncarry] if out_carry is None else out_carry
    for j, u in enumerate(ins):
        if np.any(u.consumed) and (j >= len(outs) or outs[j][0] != "source"):
            raise KeyReuseError(
                f"{what} function leads to key reuse when repeatedly executed, because consumed inputs don't "
                f"match sourced outputs: the carried key {j} is consumed in the body but not replaced by a "
                "fresh key in the carry it returns; return a new key (e.g. key, sub = split(key))")


_refresh()
