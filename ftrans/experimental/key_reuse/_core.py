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
from ftrans.errors import FtransTypeError, KeyReuseError

__all__ = ["KeyReuseError", "Source", "Sink", "Forward", "KeyReuseSignature", "consume", "assert_consumed",
           "assert_unconsumed", "check_key_reuse", "function_type_signature"]


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
    return _kr.alias(key, PRNGKeyArray(key._impl, key._base_array))


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
