"""Pure-NumPy reference semantics for XLA's general ``gather`` and ``scatter``.

These exist so that every indexing primitive in ``ftrans`` has one
unambiguous executable definition: backends that lower to NumPy call them
directly, and faster lowerings are tested against them.  The semantics are
those of XLA / StableHLO (and therefore of JAX's ``lax.gather`` and the
JAX's ``lax.scatter*`` family), restricted to the convention used by
JAX's ``lax`` that the index-vector dimension is always the *last* dimension of
``indices``.

Both operations are expressed as a single fancy-indexing step on the
flattened operand: for every element of the gather output (or of the scatter
``updates``) we compute the linear offset of the operand element it touches
by broadcasting one small integer array per operand dimension.  This keeps the
work fully vectorised (Python only loops over dimensions, never over index
points) and makes zero-size and 0-d cases fall out naturally.

Out-of-bounds handling (``mode``):

* ``"clip"``: start indices are clamped to ``[0, operand_dim - window_size]``
  so the whole window is in bounds.  This is XLA's native gather behaviour and
  what jax's ``GatherScatterMode.CLIP`` does for both gather and scatter (jax's
  ``PROMISE_IN_BOUNDS`` gather also ends up here).
* ``"fill"`` (alias ``"drop"``): for gather, every output window whose start
  index would put any part of the window out of bounds is replaced entirely by
  ``fill_value``; for scatter such update windows are discarded entirely.  This
  matches jax's ``GatherScatterMode.FILL_OR_DROP``.  Only the dimensions named
  in ``start_index_map`` / ``scatter_dims_to_operand_dims`` are checked,
  because batching dimensions are indexed by iteration position and can never
  be out of bounds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "GatherDimensionNumbers",
    "ScatterDimensionNumbers",
    "check_scatter_shapes",
    "default_fill_value",
    "gather",
    "gather_shape",
    "scatter",
]


class GatherDimensionNumbers(NamedTuple):
    """Mirrors JAX's ``lax.GatherDimensionNumbers`` so either can be passed."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """Mirrors JAX's ``lax.ScatterDimensionNumbers`` so either can be passed."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


_MODES = {"clip": "clip", "fill": "fill", "drop": "fill"}
_COMBINERS = ("set", "add", "sub", "mul", "min", "max")


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _is_symbolic(v: object) -> bool:
    return type(v).__name__ == "DimExpr"


def _int_tuple(values: Sequence[int], what: str) -> tuple[int, ...]:
    """Normalise user-provided dimension lists (lists, numpy ints, ...).

    Dimension numbers are compared, hashed and used as Python indices, so
    they must be plain ``int`` tuples; anything else is a caller bug worth a
    clear message rather than an obscure failure deep inside indexing.
    """
    try:  # a symbolic dimension (shape polymorphism) stays as it is
        out = tuple(v if _is_symbolic(v) else int(v) for v in values)
    except TypeError as e:
        raise ValueError(f"{what} must be a sequence of ints; got {values!r}") from e
    for v, orig in zip(out, values):
        if v != orig:
            raise ValueError(f"{what} must contain integers; got {values!r}")
    return out


def _check_sorted(dims: tuple[int, ...], op: str, what: str) -> None:
    if any(b < a for a, b in itertools.pairwise(dims)):
        raise ValueError(f"{op}: {what} must be sorted; got {dims}")


def _check_unique(dims: tuple[int, ...], op: str, what: str) -> None:
    if len(set(dims)) != len(dims):
        raise ValueError(f"{op}: {what} must not repeat; got {dims}")


def _check_range(dims: tuple[int, ...], rank: int, op: str, what: str) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise ValueError(
                f"{op}: {what} entries must be in [0, {rank}); got {d} in {dims}"
            )


def _check_disjoint(
    a: tuple[int, ...], b: tuple[int, ...], op: str, what_a: str, what_b: str
) -> None:
    common = sorted(set(a) & set(b))
    if common:
        raise ValueError(
            f"{op}: {what_a} {a} and {what_b} {b} must be disjoint; "
            f"both contain {common}"
        )


def _shape_tuple(shape: Sequence[int], what: str) -> tuple[int, ...]:
    out = _int_tuple(shape, what)
    if any(s < 0 for s in out):
        raise ValueError(f"{what} must be non-negative; got {out}")
    return out


def _normalise_mode(mode: str) -> str:
    try:
        return _MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(
            f"mode must be one of {sorted(_MODES)}; got {mode!r}"
        ) from None


def _as_index_array(indices: np.ndarray) -> np.ndarray:
    """Convert indices to int64 without wrap-around.

    All bound arithmetic is done in int64 so clamping and bounds checks can't
    overflow for narrow index dtypes; very large unsigned values are saturated
    rather than wrapped so they still count as out of bounds.
    """
    indices = np.asarray(indices)
    if not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"indices must have an integer dtype; got {indices.dtype}")
    if indices.dtype == np.uint64:
        indices = np.minimum(indices, np.uint64(np.iinfo(np.int64).max))
    return indices.astype(np.int64)


# --------------------------------------------------------------------------
# Shared index arithmetic
# --------------------------------------------------------------------------


def _place(arr: np.ndarray, positions: Sequence[int], rank: int) -> np.ndarray:
    """View ``arr`` with its axes moved to ``positions`` of a rank-``rank`` shape.

    ``positions`` must be increasing, so a reshape (no transpose) suffices and
    the result broadcasts against the full output / updates shape.
    """
    shape = [1] * rank
    for p, n in zip(positions, arr.shape):
        shape[p] = n
    return arr.reshape(shape)


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    strides = [1] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    return strides


def _linear_offsets(
    operand_shape: tuple[int, ...],
    starts: np.ndarray,
    index_map: tuple[int, ...],
    operand_batching_dims: tuple[int, ...],
    indices_batching_dims: tuple[int, ...],
    window_operand_dims: tuple[int, ...],
    window_sizes: tuple[int, ...],
    full_shape: tuple[int, ...],
    batch_positions: Sequence[int],
    window_positions: Sequence[int],
) -> np.ndarray:
    """Linear operand offset touched by every element of ``full_shape``.

    Gather and scatter share the same addressing: an element is identified by
    a batch coordinate (one per index-array batch dim) and a window coordinate
    (one per non-collapsed / non-inserted operand dim); its operand position
    is start + batching coordinate + window coordinate.  Summing broadcast
    per-dimension contributions times C strides gives that position without
    ever materialising a per-point Python loop.
    """
    rank = len(full_shape)
    strides = _c_strides(operand_shape)
    batch_shape = starts.shape[:-1]
    lin: np.ndarray = np.zeros((), dtype=np.int64)
    for k, d in enumerate(index_map):
        lin = lin + _place(starts[..., k], batch_positions, rank) * strides[d]
    for od, idim in zip(operand_batching_dims, indices_batching_dims):
        iota = np.arange(batch_shape[idim], dtype=np.int64)
        lin = lin + _place(iota, (batch_positions[idim],), rank) * strides[od]
    for d, size, pos in zip(window_operand_dims, window_sizes, window_positions):
        iota = np.arange(size, dtype=np.int64)
        lin = lin + _place(iota, (pos,), rank) * strides[d]
    return np.broadcast_to(lin, full_shape)


def _window_bounds_mask(raw: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Which index vectors keep their whole window in bounds (for fill/drop)."""
    if raw.shape[-1] == 0:
        return np.ones(raw.shape[:-1], dtype=bool)
    return np.all((raw >= 0) & (raw <= upper), axis=-1)


# --------------------------------------------------------------------------
# Gather
# --------------------------------------------------------------------------


class _GatherPlan(NamedTuple):
    out_shape: tuple[int, ...]
    offset_dims: tuple[int, ...]
    batch_positions: tuple[int, ...]
    window_operand_dims: tuple[int, ...]
    slice_sizes: tuple[int, ...]
    dnums: GatherDimensionNumbers


def _plan_gather(
    operand_shape: Sequence[int],
    indices_shape: Sequence[int],
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: Sequence[int],
) -> _GatherPlan:
    """Validate like XLA's ShapeInference::InferGatherShape and precompute layout.

    Mirrors the checks jax performs so that a lowering which passes here will
    not later be rejected by a real XLA backend.  One deliberate difference:
    jax skips the ``slice_size <= operand_dim`` check whenever ``indices`` is
    empty, even if the output is not; we only skip it when no slice is
    gathered at all, since otherwise the result would be ill-defined.
    """
    op = "gather"
    operand_shape = _shape_tuple(operand_shape, "operand shape")
    indices_shape = _shape_tuple(indices_shape, "indices shape")
    dn = GatherDimensionNumbers(
        offset_dims=_int_tuple(dimension_numbers.offset_dims, "offset_dims"),
        collapsed_slice_dims=_int_tuple(
            dimension_numbers.collapsed_slice_dims, "collapsed_slice_dims"
        ),
        start_index_map=_int_tuple(
            dimension_numbers.start_index_map, "start_index_map"
        ),
        operand_batching_dims=_int_tuple(
            getattr(dimension_numbers, "operand_batching_dims", ()),
            "operand_batching_dims",
        ),
        start_indices_batching_dims=_int_tuple(
            getattr(dimension_numbers, "start_indices_batching_dims", ()),
            "start_indices_batching_dims",
        ),
    )
    slice_sizes = _int_tuple(slice_sizes, "slice_sizes")
    rank = len(operand_shape)

    if len(indices_shape) < 1:
        raise ValueError(
            f"{op}: indices must have rank >= 1 (the last dimension is the "
            f"index vector); got shape {indices_shape}"
        )
    batch_shape = indices_shape[:-1]
    index_vector_size = indices_shape[-1]
    out_rank = len(dn.offset_dims) + len(batch_shape)

    _check_sorted(dn.offset_dims, op, "offset_dims")
    _check_unique(dn.offset_dims, op, "offset_dims")
    _check_range(dn.offset_dims, out_rank, op, "offset_dims")

    if len(dn.start_index_map) != index_vector_size:
        raise ValueError(
            f"{op}: start_index_map has {len(dn.start_index_map)} entries but the "
            f"index vector (last dim of indices, shape {indices_shape}) has size "
            f"{index_vector_size}; they must be equal"
        )
    _check_range(dn.start_index_map, rank, op, "start_index_map")
    _check_unique(dn.start_index_map, op, "start_index_map")

    _check_sorted(dn.collapsed_slice_dims, op, "collapsed_slice_dims")
    _check_unique(dn.collapsed_slice_dims, op, "collapsed_slice_dims")
    _check_range(dn.collapsed_slice_dims, rank, op, "collapsed_slice_dims")

    _check_sorted(dn.operand_batching_dims, op, "operand_batching_dims")
    _check_unique(dn.operand_batching_dims, op, "operand_batching_dims")
    _check_range(dn.operand_batching_dims, rank, op, "operand_batching_dims")
    _check_disjoint(
        dn.collapsed_slice_dims, dn.operand_batching_dims, op,
        "collapsed_slice_dims", "operand_batching_dims",
    )
    _check_disjoint(
        dn.start_index_map, dn.operand_batching_dims, op,
        "start_index_map", "operand_batching_dims",
    )

    _check_unique(dn.start_indices_batching_dims, op, "start_indices_batching_dims")
    _check_range(
        dn.start_indices_batching_dims, len(batch_shape), op,
        "start_indices_batching_dims (the index vector dim cannot be batched)",
    )
    if len(dn.operand_batching_dims) != len(dn.start_indices_batching_dims):
        raise ValueError(
            f"{op}: operand_batching_dims {dn.operand_batching_dims} and "
            f"start_indices_batching_dims {dn.start_indices_batching_dims} must "
            f"have the same length"
        )
    op_batch = tuple(operand_shape[d] for d in dn.operand_batching_dims)
    idx_batch = tuple(indices_shape[d] for d in dn.start_indices_batching_dims)
    if op_batch != idx_batch:
        raise ValueError(
            f"{op}: operand batching dims have sizes {op_batch} but indices "
            f"batching dims have sizes {idx_batch}; they must match"
        )

    if len(slice_sizes) != rank:
        raise ValueError(
            f"{op}: need one slice size per operand dimension; got "
            f"slice_sizes={slice_sizes} for operand shape {operand_shape}"
        )
    n_window = len(dn.offset_dims)
    if n_window + len(dn.collapsed_slice_dims) + len(dn.operand_batching_dims) != rank:
        raise ValueError(
            f"{op}: every operand dimension must be exactly one of an offset "
            f"dim, a collapsed dim or a batching dim; got {n_window} offset_dims "
            f"{dn.offset_dims}, collapsed_slice_dims {dn.collapsed_slice_dims}, "
            f"operand_batching_dims {dn.operand_batching_dims} for operand rank "
            f"{rank}"
        )
    if any(_is_symbolic(n) for n in batch_shape) or int(np.prod(batch_shape, dtype=np.int64)) != 0:
        for d, (s, n) in enumerate(zip(slice_sizes, operand_shape)):
            if not 0 <= s <= n:
                raise ValueError(
                    f"{op}: slice_sizes[{d}]={s} out of range [0, {n}] for "
                    f"operand shape {operand_shape}"
                )
    elif any(s < 0 for s in slice_sizes):
        raise ValueError(f"{op}: slice_sizes must be non-negative; got {slice_sizes}")
    for d in dn.collapsed_slice_dims:
        if slice_sizes[d] != 1:
            raise ValueError(
                f"{op}: collapsed_slice_dims may only collapse dims with slice "
                f"size 1; slice_sizes[{d}]={slice_sizes[d]}"
            )
    for d in dn.operand_batching_dims:
        if slice_sizes[d] > 1:
            raise ValueError(
                f"{op}: operand batching dims must have slice size 0 or 1; "
                f"slice_sizes[{d}]={slice_sizes[d]}"
            )

    skipped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_operand_dims = tuple(d for d in range(rank) if d not in skipped)
    offset_set = set(dn.offset_dims)
    batch_positions = tuple(p for p in range(out_rank) if p not in offset_set)
    out = [0] * out_rank
    for p, n in zip(batch_positions, batch_shape):
        out[p] = n
    for p, d in zip(dn.offset_dims, window_operand_dims):
        out[p] = slice_sizes[d]
    return _GatherPlan(
        out_shape=tuple(out),
        offset_dims=dn.offset_dims,
        batch_positions=batch_positions,
        window_operand_dims=window_operand_dims,
        slice_sizes=slice_sizes,
        dnums=dn,
    )


def gather_shape(
    operand_shape: Sequence[int],
    indices_shape: Sequence[int],
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: Sequence[int],
) -> tuple[int, ...]:
    """Shape inference for ``gather``, raising ``ValueError`` on bad inputs.

    Exposed separately so abstract evaluation can validate and size a gather
    without touching data.
    """
    return _plan_gather(operand_shape, indices_shape, dimension_numbers,
                        slice_sizes).out_shape


def default_fill_value(dtype: np.dtype | type) -> object:
    """The value jax's FILL_OR_DROP gather uses when none is given.

    jax picks a value that is obviously "not real data" for each dtype class:
    NaN for inexact types, the minimum for signed and the maximum for
    unsigned integers, and ``True`` for bool.  Extension types such as
    ml_dtypes' bfloat16 are not ``np.inexact`` / ``np.integer`` subtypes, so
    they are classified by whether ``ml_dtypes.finfo`` / ``iinfo`` accept them.
    """
    dt = np.dtype(dtype)
    if np.issubdtype(dt, np.inexact):
        return np.nan
    if dt == np.bool_:
        return True
    if np.issubdtype(dt, np.signedinteger):
        return np.iinfo(dt).min
    if np.issubdtype(dt, np.unsignedinteger):
        return np.iinfo(dt).max
    try:  # ml_dtypes extension types (bfloat16, float8_*, int4, ...)
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes ships with jax/ftrans
        ml_dtypes = None
    if ml_dtypes is not None:
        try:
            ml_dtypes.finfo(dt)
        except (ValueError, TypeError, KeyError):
            pass
        else:
            return np.nan
        try:
            info = ml_dtypes.iinfo(dt)
        except (ValueError, TypeError, KeyError):
            pass
        else:
            return info.min if info.min < 0 else info.max
    raise TypeError(f"no default gather fill value for dtype {dt}")


def gather(
    operand: np.ndarray,
    indices: np.ndarray,
    dimension_numbers: GatherDimensionNumbers,
    slice_sizes: tuple[int, ...],
    mode: str,
    fill_value: object = None,
) -> np.ndarray:
    """XLA ``gather`` with jax's CLIP / FILL_OR_DROP out-of-bounds handling.

    The result always has ``operand.dtype`` and is a fresh array, so callers
    may mutate it freely.  ``fill_value`` is only consulted in ``"fill"``
    mode; ``None`` selects jax's per-dtype default (see
    ``default_fill_value``).
    """
    mode = _normalise_mode(mode)
    operand = np.asarray(operand)
    raw = _as_index_array(indices)
    plan = _plan_gather(operand.shape, raw.shape, dimension_numbers, slice_sizes)
    dn = plan.dnums
    if int(np.prod(plan.out_shape, dtype=np.int64)) == 0:
        return np.empty(plan.out_shape, dtype=operand.dtype)

    upper = np.array(
        [operand.shape[d] - plan.slice_sizes[d] for d in dn.start_index_map],
        dtype=np.int64,
    )
    starts = np.clip(raw, 0, upper) if raw.shape[-1] else raw
    lin = _linear_offsets(
        operand.shape,
        starts,
        dn.start_index_map,
        dn.operand_batching_dims,
        dn.start_indices_batching_dims,
        plan.window_operand_dims,
        tuple(plan.slice_sizes[d] for d in plan.window_operand_dims),
        plan.out_shape,
        plan.batch_positions,
        plan.offset_dims,
    )
    out = operand.reshape(-1)[lin]
    if mode == "fill":
        in_bounds = _window_bounds_mask(raw, upper)
        if not in_bounds.all():
            if fill_value is None:
                fill_value = default_fill_value(operand.dtype)
            fill = np.asarray(fill_value).astype(operand.dtype)
            mask = _place(in_bounds, plan.batch_positions, len(plan.out_shape))
            out = np.where(mask, out, fill)
    return out


# --------------------------------------------------------------------------
# Scatter
# --------------------------------------------------------------------------


class _ScatterPlan(NamedTuple):
    update_scatter_dims: tuple[int, ...]
    window_operand_dims: tuple[int, ...]
    window_sizes: tuple[int, ...]
    dnums: ScatterDimensionNumbers


def _plan_scatter(
    operand_shape: Sequence[int],
    indices_shape: Sequence[int],
    updates_shape: Sequence[int],
    dimension_numbers: ScatterDimensionNumbers,
) -> _ScatterPlan:
    """Validate like XLA's ShapeInference::InferScatterShape; precompute layout."""
    op = "scatter"
    operand_shape = _shape_tuple(operand_shape, "operand shape")
    indices_shape = _shape_tuple(indices_shape, "indices shape")
    updates_shape = _shape_tuple(updates_shape, "updates shape")
    dn = ScatterDimensionNumbers(
        update_window_dims=_int_tuple(
            dimension_numbers.update_window_dims, "update_window_dims"
        ),
        inserted_window_dims=_int_tuple(
            dimension_numbers.inserted_window_dims, "inserted_window_dims"
        ),
        scatter_dims_to_operand_dims=_int_tuple(
            dimension_numbers.scatter_dims_to_operand_dims,
            "scatter_dims_to_operand_dims",
        ),
        operand_batching_dims=_int_tuple(
            getattr(dimension_numbers, "operand_batching_dims", ()),
            "operand_batching_dims",
        ),
        scatter_indices_batching_dims=_int_tuple(
            getattr(dimension_numbers, "scatter_indices_batching_dims", ()),
            "scatter_indices_batching_dims",
        ),
    )
    rank = len(operand_shape)
    if len(indices_shape) < 1:
        raise ValueError(
            f"{op}: indices must have rank >= 1 (the last dimension is the "
            f"index vector); got shape {indices_shape}"
        )
    batch_shape = indices_shape[:-1]
    expected_updates_rank = len(batch_shape) + len(dn.update_window_dims)
    if len(updates_shape) != expected_updates_rank:
        raise ValueError(
            f"{op}: updates must have rank {expected_updates_rank} "
            f"(= {len(batch_shape)} indices batch dims + "
            f"{len(dn.update_window_dims)} update_window_dims); got shape "
            f"{updates_shape}"
        )

    _check_sorted(dn.update_window_dims, op, "update_window_dims")
    _check_unique(dn.update_window_dims, op, "update_window_dims")
    _check_range(dn.update_window_dims, len(updates_shape), op, "update_window_dims")

    _check_sorted(dn.inserted_window_dims, op, "inserted_window_dims")
    _check_unique(dn.inserted_window_dims, op, "inserted_window_dims")
    _check_range(dn.inserted_window_dims, rank, op, "inserted_window_dims")

    _check_sorted(dn.operand_batching_dims, op, "operand_batching_dims")
    _check_unique(dn.operand_batching_dims, op, "operand_batching_dims")
    _check_range(dn.operand_batching_dims, rank, op, "operand_batching_dims")
    _check_disjoint(
        dn.inserted_window_dims, dn.operand_batching_dims, op,
        "inserted_window_dims", "operand_batching_dims",
    )
    _check_disjoint(
        dn.scatter_dims_to_operand_dims, dn.operand_batching_dims, op,
        "scatter_dims_to_operand_dims", "operand_batching_dims",
    )
    _check_unique(
        dn.scatter_indices_batching_dims, op, "scatter_indices_batching_dims"
    )
    _check_range(
        dn.scatter_indices_batching_dims, len(batch_shape), op,
        "scatter_indices_batching_dims (the index vector dim cannot be batched)",
    )
    if len(dn.operand_batching_dims) != len(dn.scatter_indices_batching_dims):
        raise ValueError(
            f"{op}: operand_batching_dims {dn.operand_batching_dims} and "
            f"scatter_indices_batching_dims {dn.scatter_indices_batching_dims} "
            f"must have the same length"
        )
    op_batch = tuple(operand_shape[d] for d in dn.operand_batching_dims)
    idx_batch = tuple(indices_shape[d] for d in dn.scatter_indices_batching_dims)
    if op_batch != idx_batch:
        raise ValueError(
            f"{op}: operand batching dims have sizes {op_batch} but indices "
            f"batching dims have sizes {idx_batch}; they must match"
        )

    n_window = len(dn.update_window_dims)
    if n_window + len(dn.inserted_window_dims) + len(dn.operand_batching_dims) != rank:
        raise ValueError(
            f"{op}: every operand dimension must be exactly one of an update "
            f"window dim, an inserted dim or a batching dim; got "
            f"update_window_dims {dn.update_window_dims}, inserted_window_dims "
            f"{dn.inserted_window_dims}, operand_batching_dims "
            f"{dn.operand_batching_dims} for operand rank {rank}"
        )

    if len(dn.scatter_dims_to_operand_dims) != indices_shape[-1]:
        raise ValueError(
            f"{op}: scatter_dims_to_operand_dims has "
            f"{len(dn.scatter_dims_to_operand_dims)} entries but the index "
            f"vector (last dim of indices, shape {indices_shape}) has size "
            f"{indices_shape[-1]}; they must be equal"
        )
    _check_range(
        dn.scatter_dims_to_operand_dims, rank, op, "scatter_dims_to_operand_dims"
    )
    _check_unique(
        dn.scatter_dims_to_operand_dims, op, "scatter_dims_to_operand_dims"
    )

    skipped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_operand_dims = tuple(d for d in range(rank) if d not in skipped)
    window_sizes = tuple(updates_shape[u] for u in dn.update_window_dims)
    for u, d, size in zip(dn.update_window_dims, window_operand_dims, window_sizes):
        if size > operand_shape[d]:
            raise ValueError(
                f"{op}: updates window dim {u} has size {size}, larger than "
                f"the corresponding operand dim {d} of size {operand_shape[d]}"
            )

    window_set = set(dn.update_window_dims)
    update_scatter_dims = tuple(
        u for u in range(len(updates_shape)) if u not in window_set
    )
    for u, n in zip(update_scatter_dims, batch_shape):
        if updates_shape[u] != n:
            raise ValueError(
                f"{op}: updates scatter dims {update_scatter_dims} have shape "
                f"{tuple(updates_shape[i] for i in update_scatter_dims)} but "
                f"indices batch shape is {batch_shape}; they must match"
            )
    return _ScatterPlan(
        update_scatter_dims=update_scatter_dims,
        window_operand_dims=window_operand_dims,
        window_sizes=window_sizes,
        dnums=dn,
    )


def check_scatter_shapes(
    operand_shape: Sequence[int],
    indices_shape: Sequence[int],
    updates_shape: Sequence[int],
    dimension_numbers: ScatterDimensionNumbers,
) -> None:
    """Raise ``ValueError`` for a scatter XLA would reject.

    Scatter's output shape is just the operand shape, so abstract evaluation
    only needs this consistency check.
    """
    _plan_scatter(operand_shape, indices_shape, updates_shape, dimension_numbers)


def scatter(
    operand: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    dimension_numbers: ScatterDimensionNumbers,
    combine: str,
    mode: str,
) -> np.ndarray:
    """XLA ``scatter`` with a built-in combiner and jax's CLIP / DROP handling.

    The operand is copied, never mutated, and the result keeps
    ``operand.dtype``; ``updates`` are cast to that dtype because XLA requires
    the two to agree (callers are expected to have promoted already).

    Duplicate target positions: ``add``/``mul``/``min``/``max`` accumulate
    every contribution (via unbuffered ``ufunc.at``).  For ``set`` XLA leaves
    the winner unspecified; here the update that comes last in row-major order
    of ``updates`` wins, which is deterministic and matches what most backends
    do in practice, but callers must not rely on it for cross-backend
    agreement.  On bool operands ``add``/``mul`` act as logical or/and, as
    XLA's PRED arithmetic does (jax itself rejects those combinations).
    """
    if combine not in _COMBINERS:
        raise ValueError(f"combine must be one of {_COMBINERS}; got {combine!r}")
    mode = _normalise_mode(mode)
    operand = np.asarray(operand)
    raw = _as_index_array(indices)
    updates = np.asarray(updates)
    plan = _plan_scatter(operand.shape, raw.shape, updates.shape, dimension_numbers)
    dn = plan.dnums
    out = operand.copy(order="C")
    if updates.size == 0:
        return out
    updates = updates.astype(operand.dtype, copy=False)

    window_size_of = dict(zip(plan.window_operand_dims, plan.window_sizes))
    upper = np.array(
        [operand.shape[d] - window_size_of.get(d, 1)
         for d in dn.scatter_dims_to_operand_dims],
        dtype=np.int64,
    )
    if mode == "clip":
        starts = np.clip(raw, 0, upper) if raw.shape[-1] else raw
    else:
        starts = raw
    lin = _linear_offsets(
        operand.shape,
        starts,
        dn.scatter_dims_to_operand_dims,
        dn.operand_batching_dims,
        dn.scatter_indices_batching_dims,
        plan.window_operand_dims,
        plan.window_sizes,
        updates.shape,
        plan.update_scatter_dims,
        dn.update_window_dims,
    ).reshape(-1)
    vals = updates.reshape(-1)
    if mode == "fill":
        in_bounds = _window_bounds_mask(raw, upper)
        if not in_bounds.all():
            keep = np.broadcast_to(
                _place(in_bounds, plan.update_scatter_dims, updates.ndim),
                updates.shape,
            ).reshape(-1)
            lin = lin[keep]
            vals = vals[keep]

    flat = out.reshape(-1)  # a view: `out` is a fresh C-contiguous copy
    if combine == "set":
        # Keep only the last write to each position so the result does not
        # depend on NumPy's (unspecified) order for repeated fancy assignment.
        _, first_in_reversed = np.unique(lin[::-1], return_index=True)
        last = lin.size - 1 - first_in_reversed
        flat[lin[last]] = vals[last]
    elif combine == "add":
        np.add.at(flat, lin, vals)
    elif combine == "sub":
        np.subtract.at(flat, lin, vals)
    elif combine == "mul":
        np.multiply.at(flat, lin, vals)
    elif combine == "min":
        np.minimum.at(flat, lin, vals)
    else:
        np.maximum.at(flat, lin, vals)
    return out
