"""``ffi_call``: a call of a foreign (XLA typed-FFI) target, as JAX's ``jax.ffi.ffi_call`` binds it.

The primitive's results are exactly ``result_avals`` (the caller declares them); the call
itself is opaque, so it has no derivative and its batching follows ``vmap_method``. Its
params are all hashable: the keyword attributes are kept as sorted ``(name, value)`` pairs
with NumPy arrays wrapped in :class:`HashableArray` and dictionaries in :class:`FrozenDict`
(JAX's names, which a printed program shows). The StableHLO lowering (a
``stablehlo.custom_call``) and the eager rule (a one-call program compiled by XLA) live in
``ftrans/lowering/rules/ffi.py``; a call made with ``has_side_effect=True`` is effectful, so
no pass removes it when its results are unused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.ir import effectful_if
from ftrans.core.primitive import Primitive, never_weak

__all__ = ["ffi_call_p", "HashableArray", "FrozenDict", "wrap_attributes", "unwrap_attributes"]


class HashableArray:
    """A NumPy array attribute, hashed and compared by value (JAX's ``HashableArray``)."""

    __slots__ = ("val",)

    def __init__(self, val: Any):
        self.val = np.array(val, copy=True)
        self.val.setflags(write=False)

    def __repr__(self) -> str:
        return f"HashableArray({self.val!r})"

    def __hash__(self) -> int:
        return hash((self.val.shape, self.val.dtype.str, self.val.tobytes()))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HashableArray) and self.val.shape == other.val.shape
                and self.val.dtype == other.val.dtype and bool(np.array_equal(self.val, other.val)))


class FrozenDict(Mapping):
    """A dictionary attribute, immutable and hashed by value (JAX's ``FrozenDict``)."""

    __slots__ = ("_d",)

    def __init__(self, d: Mapping):
        self._d = {k: (wrap_value(v)) for k, v in d.items()}

    def __getitem__(self, k: Any) -> Any:
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._d.items(), key=lambda kv: str(kv[0]))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenDict) and self._d == other._d

    def __repr__(self) -> str:
        return f"FrozenDict({self._d!r})"


def wrap_value(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return HashableArray(v)
    if isinstance(v, dict):
        return FrozenDict(v)
    return v


def wrap_attributes(kwargs: dict) -> tuple:
    """``ffi_call``'s keyword attributes as sorted hashable ``(name, value)`` pairs."""
    out = []
    for k, v in sorted(kwargs.items()):
        w = wrap_value(v)
        try:
            hash(w)
        except TypeError as e:
            raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}") from e
        out.append((k, w))
    return tuple(out)


def unwrap_value(v: Any) -> Any:
    if isinstance(v, HashableArray):
        return v.val
    if isinstance(v, FrozenDict):
        return {k: unwrap_value(x) for k, x in v._d.items()}
    return v


def unwrap_attributes(attributes: tuple) -> dict:
    return {k: unwrap_value(v) for k, v in attributes}


ffi_call_p = Primitive("ffi_call", multiple_results=True)
ffi_call_p.def_weak_type(never_weak)
# A call with ``has_side_effect=True`` is kept (and kept in order) even when nothing reads its results.
effectful_if[ffi_call_p] = lambda params: bool(params.get("has_side_effect"))


@ffi_call_p.def_abstract_eval
def _ffi_call_abstract(*avals: ShapedArray, result_avals: tuple, **params: Any) -> list:
    return list(result_avals)
