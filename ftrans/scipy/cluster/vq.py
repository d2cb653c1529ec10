"""``ftrans.scipy.cluster.vq``: nearest-code assignment (JAX's ``scipy.cluster.vq.vq``)."""

from __future__ import annotations

from typing import Any

from ftrans import numpy as jnp
from ftrans.core.operands import check_arraylike
from ftrans.errors import FtransValueError
from ftrans.image import _promote_inexact

__all__ = ["vq"]


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """Assign each observation the nearest code of ``code_book`` (JAX's ``scipy.cluster.vq.vq``).

    Args:
      obs: observations, shape ``(M, N)`` (or ``(M,)``: scalar observations).
      code_book: codes, shape ``(K, N)`` (or ``(K,)``), the same rank as ``obs``.
      check_finite: accepted for SciPy compatibility and ignored.

    Returns:
      ``(code, dist)``: the index ``0 <= code < K`` of each observation's
      nearest code (Euclidean distance; the first on ties) and that distance,
      both of shape ``(M,)``.
    """
    del check_finite
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, book = _promote_inexact(obs, code_book)
    if obs.ndim != book.ndim:
        raise FtransValueError("Observation and code_book should have the same rank")
    if obs.ndim == 1:
        obs, book = obs[:, None], book[:, None]
    if obs.ndim != 2:
        raise FtransValueError("ndim different than 1 or 2 are not supported")
    dist = jnp.linalg.norm(obs[:, None, :] - book[None, :, :], axis=-1)
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
