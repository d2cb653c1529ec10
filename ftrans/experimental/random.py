"""JAX's ``jax.experimental.random``: a stateful random generator (NumPy's ``default_rng`` style).

A :class:`StatefulPRNG` holds a typed PRNG key that never changes and a counter kept in a
:class:`ftrans.ref.Ref`.  Each draw folds the counter's current value into the key and adds one to
the counter, so repeated draws differ without the caller threading keys, eagerly and under ``jit``
and ``vmap`` alike (the ref carries the update out of the staged function).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import ftrans.numpy as jnp
from ftrans import random as _random
from ftrans.core import pytrees
from ftrans.core.ref import Ref, addupdate, get, new_ref
from ftrans.core.trace import is_eager
from ftrans.dtypes import issubdtype, prng_key
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["StatefulPRNG", "stateful_rng"]


def _size(size: Any, *params: Any) -> tuple[int, ...]:
    """The output shape: ``size`` itself, or the broadcast shape of the distribution's parameters."""
    if size is None:
        return tuple(np.broadcast_shapes(*(np.shape(p) for p in params)))
    if isinstance(size, (int, np.integer)):
        return (operator.index(size),)
    return tuple(operator.index(d) for d in size)


@dataclasses.dataclass(frozen=True)
class StatefulPRNG:
    """A random generator whose state updates implicitly (make one with :func:`stateful_rng`).

    Attributes:
        _base_key: the typed PRNG key every draw derives from.
        _counter: a scalar integer :class:`ftrans.ref.Ref` counting the keys drawn so far.
    """

    _base_key: Any
    _counter: Any

    def __post_init__(self) -> None:
        key, counter = self._base_key, self._counter
        if not (hasattr(key, "dtype") and issubdtype(key.dtype, prng_key)):
            raise FtransValueError(f"Expected base_key to be a typed PRNG key; got {key!r}")
        if not isinstance(counter, Ref):
            raise FtransValueError(f"Expected counter to be a scalar integer ref; got {counter!r}")

    def key(self, shape: int | Sequence[int] = ()) -> Any:
        """A fresh key (or an array of ``shape`` keys), advancing the generator.

        Args:
            shape: the shape of the array of keys to return; ``()`` gives one key.

        Returns:
            New keys of the base key's implementation, independent of earlier ones.
        """
        if self._base_key.shape:
            raise FtransValueError("cannot operate on split stateful generator (map over it with vmap first)")
        key = _random.fold_in(self._base_key, get(self._counter, ...))
        addupdate(self._counter, ..., 1)
        dims = _size(shape)
        return _random.split(key, dims) if dims else key

    def random(self, size: int | Sequence[int] | None = None, dtype: Any = float) -> Any:
        """Floats drawn uniformly from ``[0, 1)``.

        Args:
            size: the output shape (an int for one dimension); ``None`` draws one value.
            dtype: the floating dtype of the result.

        Returns:
            An array of ``size`` values.
        """
        return _random.uniform(self.key(), shape=_size(size), dtype=dtype)

    def uniform(self, low: Any = 0, high: Any = 1, size: int | Sequence[int] | None = None, *,
                dtype: Any = float) -> Any:
        """Floats drawn uniformly from ``[low, high)``.

        Args:
            low: the lower bound (broadcast against ``high``).
            high: the upper bound.
            size: the output shape; ``None`` uses the broadcast shape of ``low`` and ``high``.
            dtype: the floating dtype of the result.

        Returns:
            An array of ``size`` values.
        """
        return _random.uniform(self.key(), _size(size, low, high), minval=low, maxval=high, dtype=dtype)

    def normal(self, loc: Any = 0, scale: Any = 1, size: int | Sequence[int] | None = None, *,
               dtype: Any = float) -> Any:
        """Normally distributed floats with mean ``loc`` and standard deviation ``scale``.

        Args:
            loc: the mean (broadcast against ``scale``).
            scale: the standard deviation.
            size: the output shape; ``None`` uses the broadcast shape of ``loc`` and ``scale``.
            dtype: the floating dtype of the result.

        Returns:
            An array of ``size`` values.
        """
        z = _random.normal(self.key(), _size(size, loc, scale), dtype)
        return (jnp.asarray(loc) + jnp.asarray(scale) * z).astype(dtype)

    def integers(self, low: Any, high: Any = None, size: int | Sequence[int] | None = None, *,
                 dtype: Any = int) -> Any:
        """Integers drawn uniformly from ``[low, high)`` (from ``[0, low)`` when ``high`` is ``None``).

        Args:
            low: the lower bound, or the upper bound when ``high`` is ``None``.
            high: the exclusive upper bound.
            size: the output shape; ``None`` uses the broadcast shape of the bounds.
            dtype: the integer dtype of the result.

        Returns:
            An array of ``size`` values.
        """
        if high is None:
            low, high = 0, low
        return _random.randint(self.key(), _size(size, low, high), minval=low, maxval=high, dtype=dtype)

    def split(self, num: int | Sequence[int]) -> StatefulPRNG:
        """One generator holding ``num`` independent children, to be mapped over with ``vmap``.

        Args:
            num: the number (or shape) of children.

        Returns:
            A :class:`StatefulPRNG` whose key and counter have shape ``num``.
        """
        return StatefulPRNG(self.key(num), new_ref(jnp.zeros(num, dtype=int)))

    def spawn(self, n_children: int) -> list[StatefulPRNG]:
        """A list of ``n_children`` independent generators.

        Args:
            n_children: how many generators to make.

        Returns:
            The new generators, each with its own key and a counter at zero.
        """
        return [type(self)(k, new_ref(0)) for k in self.key(n_children)]


def _rebuild(_: Any, children: Any) -> StatefulPRNG:
    # Transforms rebuild the generator with stand-ins for its leaves (values, tracers, placeholders):
    # only a user's direct construction is validated.
    g = object.__new__(StatefulPRNG)
    object.__setattr__(g, "_base_key", children[0])
    object.__setattr__(g, "_counter", children[1])
    return g


pytrees.register_pytree_node(StatefulPRNG, lambda g: ((g._base_key, g._counter), None), _rebuild)


def stateful_rng(seed: Any = None, *, impl: Any = None) -> StatefulPRNG:
    """A stateful generator: each draw advances it, so repeated calls give new values.

    Args:
        seed: an integer seed; ``None`` (allowed only outside transformations) seeds from the
            operating system's entropy.
        impl: the PRNG implementation name (for example ``'threefry2x32'``), as for
            :func:`ftrans.random.key`.

    Returns:
        A :class:`StatefulPRNG`.
    """
    if seed is None:
        if not is_eager():
            raise FtransTypeError("When used within transformed code, jax.experimental.random.stateful_rng() "
                                  "requires an explicit seed to be set.")
        seed = np.int64(int(np.random.SeedSequence().entropy) & np.iinfo(np.int64).max)
    return StatefulPRNG(_random.key(seed, impl=impl), new_ref(0))
