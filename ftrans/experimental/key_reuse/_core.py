"""ftrans's key-reuse checker: signatures, the consume/assert helpers, ``check_key_reuse``.

The tracking itself is ``ftrans.core.key_reuse`` (keys carry their consumption state; a traced body's
effect on keys is a ``Frame``); this module gives it JAX's public face.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ftrans.core import key_reuse as _kr
from ftrans.core.keys import PRNGKeyArray, is_key
from ftrans.core.prims import random as _R
from ftrans.errors import FtransTypeError, KeyReuseError

__all__ = ["KeyReuseError", "Source", "Sink", "Forward", "KeyReuseSignature", "consume", "assert_consumed",
           "assert_unconsumed", "check_key_reuse", "function_type_signature", "jaxpr_type_signature",
           "key_reuse_signatures"]


def _frozen_mask(mask: Any) -> bool | np.ndarray:
    if isinstance(mask, np.ndarray):
        if mask.dtype != np.bool_:
            raise FtransTypeError(f"a key-reuse mask must be a boolean array, got {mask.dtype}")
        if not mask.any():  # an empty mask (a zero-sized key array) consumes nothing
            return False
        if mask.all():
            return True
        mask = np.array(mask, copy=True)
        mask.flags.writeable = False
        return mask
    if isinstance(mask, (bool, np.bool_)):
        return bool(mask)
    raise FtransTypeError(f"a key-reuse mask must be a bool or a boolean array, got {type(mask).__name__}")


@functools.total_ordering
class _Entry:
    """A signature entry naming one argument (``idx``) and which of its keys (``mask``, True for all)."""

    __slots__ = ("idx", "mask")

    def __init__(self, idx: int, mask: bool | np.bool_ | np.ndarray = True) -> None:
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
            raise FtransTypeError(f"{type(self).__name__}: idx must be an integer, got {idx!r}")
        object.__setattr__(self, "idx", int(idx))
        object.__setattr__(self, "mask", _frozen_mask(mask))

    def __setattr__(self, name: str, value: Any) -> None:
        raise ValueError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple:
        m = self.mask
        return (type(self).__name__, self.idx, m if isinstance(m, bool) else (m.shape, tuple(m.ravel().tolist())))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Forward):
            return True
        if isinstance(other, _Entry):
            return (type(self).__name__, self.idx) < (type(other).__name__, other.idx)
        return NotImplemented

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}({self.idx})" if self.mask is True else f"{name}({self.idx}, {self.mask})"


class Sink(_Entry):
    """Input ``idx`` is consumed (where ``mask`` is True)."""

    __slots__ = ()


class Source(_Entry):
    """Output ``idx`` is a fresh, unconsumed key array (where ``mask`` is True)."""

    __slots__ = ()


class Forward(NamedTuple):
    """Output ``out_idx`` is input ``in_idx`` passed through: consuming either consumes both."""

    in_idx: int
    out_idx: int

    def __repr__(self) -> str:
        return f"Forward({self.in_idx}, {self.out_idx})"


class KeyReuseSignature:
    """What a function does to keys: a set of ``Sink``, ``Source`` and ``Forward`` entries, whose indices
    count the function's flattened inputs (closed-over keys after them) and outputs."""

    __slots__ = ("_args",)

    def __init__(self, *args: Sink | Source | Forward) -> None:
        self._args = frozenset(args)

    def __repr__(self) -> str:
        return f"KeyReuseSignature{tuple(sorted(self._args))}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyReuseSignature) and self._args == other._args

    def __hash__(self) -> int:
        return hash(self._args)

    @property
    def sinks(self) -> Iterator[Sink]:
        """The ``Sink`` entries."""
        return (a for a in self._args if isinstance(a, Sink))

    @property
    def sources(self) -> Iterator[Source]:
        """The ``Source`` entries."""
        return (a for a in self._args if isinstance(a, Source))

    @property
    def forwards(self) -> Iterator[Forward]:
        """The ``Forward`` entries."""
        return (a for a in self._args if isinstance(a, Forward))


def consume(key: Any) -> Any:
    """Mark ``key`` consumed, as a sampler would (while checking is on), and return it (a key array sharing
    its state).

    Args:
      key: a typed key array.

    Returns:
      ``key``, consumed.
    """
    if not is_key(key):
        raise FtransTypeError(f"consume: expected a typed key array (ftrans.random.key), got {type(key).__name__}")
    _kr.sink(key, "consume")
    base = _R.consume_p.bind(key._base_array) if key._typed else key._base_array
    return _kr.alias(key, PRNGKeyArray(key._impl, base))


def _state(key: Any) -> Any:
    u = _kr.use_of(key)
    f = _kr.current()
    if f is None or u.frame is f:
        return u.consumed
    return f.local.get(u, False)


def assert_consumed(key: Any, value: Any = True) -> None:
    """Raise ``AssertionError`` unless the checker counts ``key`` as consumed (``value``: True, or a mask of
    the keys that should be); nothing while no checking is on.

    Args:
      key: a typed key array.
      value: the expected consumption: True, False, or a boolean array of ``key``'s shape.
    """
    if not is_key(key):
        raise FtransTypeError(f"assert_consumed: expected a typed key array, got {type(key).__name__}")
    if not _kr.tracking():  # nothing is tracked (checking is off, or a call whose analysis already ran)
        return
    got = _state(key)
    if not np.all(np.asarray(got) == np.asarray(value)):
        if np.all(value):
            raise AssertionError(f"expected the key to be consumed; it is not ({got})")
        if not np.any(value):
            raise AssertionError(f"expected the key not to be consumed; it is ({got})")
        raise AssertionError(f"expected the key's consumption to be {value}, got {got}")


def assert_unconsumed(key: Any) -> None:
    """Raise ``AssertionError`` if the checker counts ``key`` (or any key in it) as consumed.

    Args:
      key: a typed key array.
    """
    assert_consumed(key, False)


def function_type_signature(fun: Callable[..., Any], *args: Any) -> KeyReuseSignature:
    """Trace ``fun(*args)`` and return what it does to keys; reuse inside it raises ``KeyReuseError``.

    Args:
      fun: the function to analyse.
      *args: its arguments (arrays, key arrays, or pytrees of them; traced abstractly).

    Returns:
      The function's ``KeyReuseSignature``: indices count the flattened arguments (then the keys it
      closes over) and the flattened outputs.
    """
    from ftrans import make_jaxpr

    with _kr.frame("check") as f:
        def analysed(*inner: Any) -> Any:
            f.set_inputs(_kr.key_leaves(inner))
            out = fun(*inner)
            f.set_outputs(_kr.key_leaves(out))
            return out

        make_jaxpr(analysed)(*args)
    n = len(f.inputs or ())
    entries: list[Any] = [Sink(i, m) for i, m in f.input_sinks()]
    entries += [Sink(n + j, m) for j, (_, m) in enumerate(f.const_sinks())]
    consts = {u: n + j for j, u in enumerate(f.order)}
    for j, (what, v) in enumerate(f.outputs or ()):
        if what == "source":
            entries.append(Source(j))
        elif what == "forward":
            entries.append(Forward(v, j))
        elif what == "const" and v in consts:
            entries.append(Forward(consts[v], j))
    return KeyReuseSignature(*entries)


def check_key_reuse(fun: Callable[..., Any], /, *args: Any) -> None:
    """Check ``fun(*args)`` for key reuse statically (by tracing it), whatever ``debug_key_reuse`` says.

    Args:
      fun: the function to check.
      *args: its arguments.

    Raises:
      KeyReuseError: a key is consumed twice (naming the operation and your line).
    """
    function_type_signature(fun, *args)


# ---------------------------------------------------------------- signatures read off the IR
# What each primitive does to the keys among its operands and results: a ``KeyReuseSignature``, or a
# function of the equation giving one (call-like primitives: their body's). A primitive not listed consumes
# every key it takes and makes fresh ones of every key it gives (JAX's rule for an unknown primitive).
key_reuse_signatures: dict[Any, KeyReuseSignature | Callable[[Any], KeyReuseSignature]] = {}


def _install_signatures() -> None:
    from ftrans.core.prims import elementwise as E
    from ftrans.core.prims import indexing as I
    from ftrans.core.prims import structural as S

    sig = KeyReuseSignature
    key_reuse_signatures.update({
        _R.consume_p: sig(Sink(0), Forward(0, 0)),
        _R.random_clone_p: sig(Source(0)),
        _R.random_bits_p: sig(Sink(0)),
        _R.random_gamma_p: sig(Sink(0)),
        _R.random_fold_in_p: sig(Source(0)),
        _R.random_seed_p: sig(Source(0)),
        _R.random_split_p: sig(Sink(0), Source(0)),
        _R.random_wrap_p: sig(Source(0)),
        _R.random_unwrap_p: sig(),
        S.dynamic_update_slice_p: sig(Sink(1), Forward(0, 0)),
        I.scatter_p: sig(Sink(2), Forward(0, 0)),
        E.eq_p: sig(),
        E.ne_p: sig(),
    })
    for p in (S.broadcast_in_dim_p, E.copy_p, S.convert_element_type_p, S.reshape_p, S.squeeze_p,
              S.expand_dims_p, S.transpose_p, S.rev_p, S.slice_p, S.dynamic_slice_p, I.gather_p):
        key_reuse_signatures[p] = sig(Forward(0, 0))


def _is_key_var(v: Any) -> bool:
    return type(getattr(getattr(v, "aval", None), "dtype", None)).__name__ == "KeyDtype"


def _unknown_signature(eqn: Any) -> KeyReuseSignature:
    """Every key operand consumed; the key results of a primitive with a body (control flow) fresh, those of
    any other primitive consumed too (JAX's rule for a primitive the checker does not know)."""
    from ftrans.core.ir import subjaxprs

    sources = (Source(j) for j, v in enumerate(eqn.outvars) if _is_key_var(v)) if subjaxprs(eqn) else ()
    return KeyReuseSignature(*(Sink(i) for i, v in enumerate(eqn.invars) if _is_key_var(v)), *sources)


def _signature_of_eqn(eqn: Any) -> KeyReuseSignature:
    s = key_reuse_signatures.get(eqn.primitive)
    if isinstance(s, KeyReuseSignature):
        return s
    if s is not None:
        return s(eqn)
    from ftrans.core.ir import subjaxprs

    subs = subjaxprs(eqn)
    if len(subs) == 1 and eqn.primitive.name in _CALL_LIKE:  # a call: its body's signature
        body = getattr(subs[0], "jaxpr", subs[0])
        if len(body.invars) == len(eqn.invars) and len(body.outvars) == len(eqn.outvars):
            return jaxpr_type_signature(body)
    return _unknown_signature(eqn)


_CALL_LIKE = frozenset(("jit_call", "pjit", "remat", "checkpoint", "custom_jvp_call", "custom_vjp_call",
                        "closed_call", "core_call"))


class _KeyState:
    __slots__ = ("consumed", "origin")

    def __init__(self, origin: int | None) -> None:
        self.consumed = False
        self.origin = origin  # the input it is (forwarded), or None: made inside


def jaxpr_type_signature(jaxpr: Any) -> KeyReuseSignature:
    """What the staged program ``jaxpr`` does to its key inputs and outputs, read off its equations (keys are
    typed in ftrans's IR); raises ``KeyReuseError`` where a key is consumed twice.

    Args:
      jaxpr: a ``Jaxpr`` (or ``ClosedJaxpr``), as ``make_jaxpr`` gives.

    Returns:
      Its ``KeyReuseSignature``: ``Sink(i)`` for an input it consumes, ``Source(j)`` for an output key it
      makes, ``Forward(i, j)`` for an output that is input ``i``.
    """
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    state: dict[Any, _KeyState] = {}
    for i, v in enumerate(jaxpr.invars):
        if _is_key_var(v):
            state[v] = _KeyState(i)
    for v in jaxpr.constvars:
        if _is_key_var(v):
            state[v] = _KeyState(None)

    def st(a: Any) -> _KeyState | None:
        return state.get(a) if _is_key_var(a) else None

    for eqn in jaxpr.eqns:
        sig = _signature_of_eqn(eqn)
        for s in sig.sinks:
            k = st(eqn.invars[s.idx]) if s.idx < len(eqn.invars) else None
            if k is None or s.mask is False:
                continue
            if k.consumed:
                raise KeyReuseError(f"In {eqn.primitive.name}, argument {s.idx} is already consumed.")
            k.consumed = True
        for s in sig.sources:
            if s.idx < len(eqn.outvars) and _is_key_var(eqn.outvars[s.idx]):
                state[eqn.outvars[s.idx]] = _KeyState(None)
        for f in sig.forwards:
            k = st(eqn.invars[f.in_idx]) if f.in_idx < len(eqn.invars) else None
            if k is not None and f.out_idx < len(eqn.outvars):
                state[eqn.outvars[f.out_idx]] = k
        for v in eqn.outvars:  # a key result no entry names: consumed (JAX's: fresh only where a Source says)
            if _is_key_var(v) and v not in state:
                state[v] = _KeyState(None)
                state[v].consumed = True
    entries: list[Any] = [Sink(i) for i, v in enumerate(jaxpr.invars) if _is_key_var(v) and state[v].consumed]
    for j, a in enumerate(jaxpr.outvars):
        k = st(a)
        if k is None:
            continue
        if k.origin is None:
            if not k.consumed:
                entries.append(Source(j))
        else:
            entries.append(Forward(k.origin, j))
    return KeyReuseSignature(*entries)


_install_signatures()
