"""``ftrans.scipy.ndimage``: ``map_coordinates`` (JAX's ``scipy.ndimage`` subset).

Interpolation is of order 0 (nearest) or 1 (linear).  Each axis contributes
one (order 0) or two (order 1) integer indices with weights; the output is the
weighted sum over all combinations of the per-axis indices.  Out-of-range
indices are brought back into the array by the boundary ``mode``; with
``mode='constant'`` they read ``cval`` instead.  As in JAX, ``'wrap'`` and
``'constant'`` behave as SciPy's ``'grid-wrap'`` and ``'grid-constant'``.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans import lax
from ftrans import numpy as jnp
from ftrans.errors import FtransValueError
from ftrans.transforms.jit import jit

__all__ = ["map_coordinates"]


def _mirror(i: Any, n: int) -> Any:
    # A triangular wave of period 2 (n - 1): ..., 1, 0, 1, ..., n-1, n-2, ...
    p = n - 1
    return jnp.abs((i + p) % (2 * p) - p)


def _reflect(i: Any, n: int) -> Any:
    # Reflection about the array's outer edges (-0.5 and n - 0.5): a mirror of the doubled grid.
    return jnp.floor_divide(_mirror(2 * i + 1, 2 * n + 1) - 1, 2)


_MODES = {
    "constant": lambda i, n: i,
    "nearest": lambda i, n: jnp.clip(i, 0, n - 1),
    "wrap": lambda i, n: i % n,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round(a: Any) -> Any:
    # Half away from zero (SciPy's rounding); integers are left alone.
    return a if jnp.issubdtype(a.dtype, jnp.integer) else lax.round(a)


def _nearest(c: Any) -> list[tuple[Any, Any]]:
    return [(_round(c).astype(np.int32), c.dtype.type(1))]


def _linear(c: Any) -> list[tuple[Any, Any]]:
    lo = jnp.floor(c)
    w_hi = c - lo
    i = lo.astype(np.int32)
    return [(i, 1 - w_hi), (i + 1, w_hi)]


def _impl(input: Any, coordinates: Sequence[Any], order: int, mode: str, cval: Any) -> Any:
    arr = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, arr.dtype)
    if len(coords) != arr.ndim:
        raise FtransValueError("coordinates must be a sequence of length input.ndim, but "
                               f"{len(coords)} != {arr.ndim}")
    fix = _MODES.get(mode)
    if fix is None:
        raise NotImplementedError(
            f"ftrans.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
            f"Currently supported modes are {set(_MODES)}.")
    if order == 0:
        nodes = _nearest
    elif order == 1:
        nodes = _linear
    else:
        raise NotImplementedError("ftrans.scipy.ndimage.map_coordinates currently requires order<=1")
    constant = mode == "constant"

    per_axis = []
    for c, n in zip(coords, arr.shape):
        per_axis.append([(fix(i, n), ((i >= 0) & (i < n)) if constant else None, w) for i, w in nodes(c)])

    terms = []
    for combo in itertools.product(*per_axis):
        idx = tuple(i for i, _, _ in combo)
        value = arr[idx]
        if constant:
            ok = functools.reduce(operator.and_, [v for _, v, _ in combo])
            value = jnp.where(ok, value, cval)
        weight = functools.reduce(operator.mul, [w for _, _, w in combo])
        terms.append(weight * value)
    out = functools.reduce(operator.add, terms)
    if jnp.issubdtype(arr.dtype, jnp.integer):
        out = _round(out)
    return out.astype(arr.dtype)


_impl_jit = jit(_impl, static_argnums=(2, 3, 4))


def map_coordinates(input: Any, coordinates: Sequence[Any], order: int, mode: str = "constant",
                    cval: Any = 0.0) -> Any:
    """Interpolate ``input`` at the given coordinates (JAX's ``scipy.ndimage.map_coordinates``).

    Args:
      input: an N-dimensional array.
      coordinates: N arrays (one per axis of ``input``, broadcast together)
        giving the fractional index at which each output value is sampled.
      order: 0 (nearest neighbour, rounding half away from zero) or 1 (linear).
      mode: ``'constant'``, ``'nearest'``, ``'mirror'``, ``'wrap'`` or
        ``'reflect'``; ``'wrap'`` and ``'constant'`` are SciPy's
        ``'grid-wrap'`` and ``'grid-constant'``.
      cval: the value read outside the array when ``mode='constant'``.

    Returns:
      The interpolated values, in ``input``'s dtype (rounded for integer input).
    """
    return _impl_jit(input, coordinates, order, mode, cval)
