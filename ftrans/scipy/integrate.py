"""``ftrans.scipy.integrate``: the composite trapezoid rule (JAX's ``scipy.integrate``)."""

from __future__ import annotations

from typing import Any

from ftrans import numpy as jnp
from ftrans.transforms.jit import jit

__all__ = ["trapezoid"]


@jit(static_argnames=("axis",))
def _trapezoid(y: Any, x: Any, dx: Any, axis: int) -> Any:
    return jnp.trapezoid(y, x, dx, axis)


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """Integrate ``y`` along ``axis`` with the composite trapezoidal rule, as ``scipy.integrate.trapezoid``.

    Args:
        y: the samples to integrate.
        x: the sample points of ``y`` (default: equally spaced, ``dx`` apart).
        dx: the spacing of the samples when ``x`` is None (default 1.0).
        axis: the axis to integrate along (default the last).

    Returns:
        The integral, of ``y``'s shape without ``axis``.

    This is :func:`ftrans.numpy.trapezoid` under ``jit`` (``axis`` static).
    """
    return _trapezoid(y, x, dx, axis)
