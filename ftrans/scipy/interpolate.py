"""``ftrans.scipy.interpolate``: ``RegularGridInterpolator`` (JAX's ``scipy.interpolate`` subset)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ftrans import numpy as jnp
from ftrans.core.operands import check_arraylike
from ftrans.errors import FtransValueError
from ftrans.image import _promote_inexact
from ftrans.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _points_array(xi: Any, ndim: int) -> Any:
    """Query points as one ``(..., ndim)`` array (a tuple of per-axis coordinate arrays is stacked)."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = jnp.broadcast_arrays(*xi)
        return jnp.stack([p.astype(float) for p in parts], axis=-1).astype(float)
    check_arraylike("RegularGridInterpolator", xi)
    xi = jnp.asarray(xi)
    if xi.ndim == 1:
        xi = xi.reshape(-1, ndim)
    return xi


class RegularGridInterpolator:
    """Interpolation on a rectilinear grid (JAX's ``scipy.interpolate.RegularGridInterpolator``).

    Args:
      points: one strictly increasing coordinate array per leading axis of
        ``values``.
      values: the grid values, of shape ``(len(points[0]), ..., len(points[-1]), *trailing)``.
      method: ``"linear"`` or ``"nearest"``.
      bounds_error: must be False (an error cannot be raised under ``jit``).
      fill_value: the value at points outside the grid (NaN by default);
        ``None`` extrapolates.

    Calling the interpolator with query points of shape ``(..., ndim)``
    returns values of shape ``(..., *trailing)``.  The interpolator is a
    pytree (grid, values and fill value are its leaves).
    """

    def __init__(self, points: Any, values: Any, method: str = "linear", bounds_error: bool = False,
                 fill_value: Any = np.nan):
        if method not in _METHODS:
            raise FtransValueError(f"method {method!r} is not defined")
        self.method = method
        self.bounds_error = bounds_error
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT")
        check_arraylike("RegularGridInterpolator", values)
        if len(points) > np.ndim(values):
            raise FtransValueError(f"there are {len(points)} point arrays, but values has {np.ndim(values)} "
                                   "dimensions")
        (values,) = _promote_inexact(values)
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise FtransValueError("fill_value must be either 'None' or of a type compatible with values")
        self.fill_value = fill_value
        check_arraylike("RegularGridInterpolator", *points)
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi: Any, method: str | None = None) -> Any:
        method = self.method if method is None else method
        if method not in _METHODS:
            raise FtransValueError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = _points_array(xi, ndim)
        if xi.shape[-1] != ndim:
            raise FtransValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, but this "
                                   f"RegularGridInterpolator has dimension {ndim}")
        lead = xi.shape[:-1]
        flat = xi.reshape(-1, ndim)
        idx, frac, outside = self._locate(flat.T)
        out = self._linear(idx, frac) if method == "linear" else self._nearest(idx, frac)
        if self.fill_value is not None:
            out = jnp.where(outside.reshape(out.shape[:1] + (1,) * (out.ndim - 1)), self.fill_value, out)
        return out.reshape(lead + self.values.shape[ndim:])

    def _locate(self, xs: Any) -> tuple[list[Any], list[Any], Any]:
        """Per axis: the cell's lower index, the fractional position in it, and the out-of-grid mask."""
        idx, frac = [], []
        outside = jnp.zeros((xs.shape[1],), dtype=bool)
        for x, g in zip(xs, self.grid):
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            idx.append(i)
            frac.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return idx, frac, outside

    def _linear(self, idx: list[Any], frac: list[Any]) -> Any:
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(idx))
        out = jnp.asarray(0.0)
        for corner in itertools.product(*[(i, i + 1) for i in idx]):
            w = jnp.asarray(1.0)
            for c, i, t in zip(corner, idx, frac):
                w = w * jnp.where(c == i, 1 - t, t)
            out = out + self.values[corner] * w[trailing]
        return out

    def _nearest(self, idx: list[Any], frac: list[Any]) -> Any:
        return self.values[tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(idx, frac))]


register_pytree_node(
    RegularGridInterpolator,
    lambda r: ((r.grid, r.values, r.fill_value), (r.method, r.bounds_error)),
    lambda aux, ch: RegularGridInterpolator(ch[0], ch[1], aux[0], aux[1], ch[2]),
)
