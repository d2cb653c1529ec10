"""``ftrans.ops``: JAX's ``jax.ops`` segment reductions.

``segment_sum(data, segment_ids, num_segments)`` reduces the rows of ``data``
(its leading axis) into ``num_segments`` buckets named by ``segment_ids``.
Like JAX, each is a scatter into an array filled with the reduction's identity
(``0`` for sums, ``1`` for products, the dtype's largest / smallest value -- or
``inf`` / ``-inf``, ``True`` / ``False`` for booleans -- for min / max), so an
empty segment holds the identity, and by default (``mode=None``, i.e.
``"fill"``/``"drop"``) a segment id outside ``[0, num_segments)`` -- negative
ones included -- is dropped.  Gradients and ``vmap`` come from the scatter's
rules.  ``bucket_size`` scatters into ``ceil(len(segment_ids) / bucket_size)``
partial results first and then reduces them (better rounding for long sums).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.operands import check_arraylike, concrete_or_error
from ftrans.core.shape_poly import DimExpr
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy import _creation, _reductions
from ftrans.numpy._extras import unreduced_scatter_add

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(kind: str, dtype: np.dtype) -> Any:
    """The value an empty segment holds: the identity of the reduction in ``dtype``."""
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if dtype == np.bool_:
        return kind == "min"
    if dtypes.is_int(dtype):
        info = np.iinfo(dtype)
        return int(info.max) if kind == "min" else int(info.min)
    return float("inf") if kind == "min" else -float("inf")


def _num_segments(name: str, num_segments: Any, segment_ids: Any) -> int:
    if num_segments is None:
        ids = concrete_or_error(segment_ids, f"{name}: segment_ids (used to infer num_segments)")
        ids = np.asarray(ids)
        num_segments = int(ids.max()) + 1 if ids.size else 0
    elif isinstance(num_segments, DimExpr):  # a symbolic size (shape polymorphism)
        return num_segments
    else:
        num_segments = concrete_or_error(num_segments, f"{name}: num_segments")
        if np.ndim(num_segments) != 0 or not isinstance(np.asarray(num_segments).item(), (int, bool)):
            raise FtransTypeError(
                f"{name}: num_segments must be a Python int (the number of output rows), got {num_segments!r}"
            )
        num_segments = int(num_segments)
    if num_segments < 0:
        raise FtransValueError(f"{name}: num_segments must be non-negative, got {num_segments}")
    return num_segments


def _segment_update(name: str, kind: str, data: Any, segment_ids: Any, num_segments: Any,
                    indices_are_sorted: bool, unique_indices: bool, bucket_size: Any, mode: Any,
                    out_sharding: Any) -> Any:
    check_arraylike(name, data, segment_ids)
    if out_sharding is not None:
        spec = getattr(out_sharding, "spec", out_sharding)
        if kind != "add" and getattr(spec, "unreduced", None):
            raise NotImplementedError(f"unreduced for {kind[:3] if kind != 'mul' else 'prod'} is not yet supported "
                                      f"({name}: out_sharding={out_sharding!r}; only segment_sum leaves partial sums)")
        if bucket_size is not None:
            raise NotImplementedError(f"{name}: out_sharding with bucket_size is not supported (as in JAX)")
    data = _creation.asarray(data)
    segment_ids = _creation.asarray(segment_ids)
    dtype = np.dtype(data.dtype)
    if kind in ("add", "mul") and dtype == np.bool_:
        raise FtransTypeError(
            f"{name}: boolean data is not supported (a sum or product of booleans has no bool result); "
            "convert the data to an integer dtype first, or use segment_max / segment_min for any / all"
        )
    n = _num_segments(name, num_segments, segment_ids)
    mode = "fill" if mode is None else mode
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
              wrap_negative_indices=False)
    ident = _identity(kind, dtype)
    if bucket_size is None:
        out = _creation.full((n,) + tuple(data.shape[1:]), ident, dtype=dtype)
        if out_sharding is not None and getattr(getattr(out_sharding, "spec", out_sharding), "unreduced", None):
            return unreduced_scatter_add(out, data, segment_ids, out_sharding, kw)
        if out_sharding is not None:
            kw["out_sharding"] = out_sharding
        return getattr(out.at[segment_ids], kind)(data, **kw)
    if not isinstance(bucket_size, DimExpr):
        bucket_size = int(concrete_or_error(bucket_size, f"{name}: bucket_size"))
        if bucket_size <= 0:
            raise FtransValueError(f"{name}: bucket_size must be a positive int, got {bucket_size}")
    size = math.prod(segment_ids.shape)
    num_buckets = -(-size // bucket_size)
    out = _creation.full((num_buckets, n) + tuple(data.shape[1:]), ident, dtype=dtype)
    if segment_ids.ndim == 0:
        segment_ids = segment_ids.reshape((1,))
    bucket = _creation.arange(segment_ids.shape[0]) // bucket_size
    out = getattr(out.at[bucket, segment_ids[None, :]], kind)(data, **kw)
    reducer = {"add": _reductions.sum, "mul": _reductions.prod,
               "min": _reductions.min, "max": _reductions.max}[kind]
    return reducer(out, axis=0).astype(dtype)


def segment_sum(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Any:
    """JAX's ``jax.ops.segment_sum``: ``out[s] = sum(data[i] for i where segment_ids[i] == s)``.

    The result has shape ``(num_segments,) + data.shape[1:]`` and data's dtype;
    an empty segment is 0.  ``num_segments`` defaults to ``max(segment_ids) + 1``
    (which needs concrete ids: pass it under ``jit``).  Ids outside
    ``[0, num_segments)`` are dropped unless ``mode`` says otherwise
    (``"clip"`` clamps them, ``"promise_in_bounds"`` leaves it to the backend).
    """
    return _segment_update("segment_sum", "add", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_prod(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                 unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                 out_sharding: Any = None) -> Any:
    """JAX's ``jax.ops.segment_prod``: the product of the rows of each segment (1 for an empty one).

    Arguments as in :func:`segment_sum`.  Its gradient, like the scatter-multiply
    it is built on, needs ``unique_indices=True`` (as in JAX).
    """
    return _segment_update("segment_prod", "mul", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_max(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Any:
    """JAX's ``jax.ops.segment_max``: the maximum of the rows of each segment.

    An empty segment holds ``-inf`` (floats), the dtype's minimum (integers) or
    ``False`` (booleans, where this is "any").  Arguments as in :func:`segment_sum`.
    """
    return _segment_update("segment_max", "max", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_min(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Any:
    """JAX's ``jax.ops.segment_min``: the minimum of the rows of each segment.

    An empty segment holds ``inf`` (floats), the dtype's maximum (integers) or
    ``True`` (booleans, where this is "all").  Arguments as in :func:`segment_sum`.
    """
    return _segment_update("segment_min", "min", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)
