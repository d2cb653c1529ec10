"""lax gather / scatter and their dimension-number types (with the signatures of JAX's ``lax``).

These are thin, checked wrappers: they canonicalise the dimension numbers, the
mode and the fill value into hashable parameters and bind one primitive.  Like
every ``lax`` function they do not broadcast or promote, except that a weakly
typed scalar (a Python number) is converted to the operand's dtype, as jax's
``lax`` functions allow.
"""

from __future__ import annotations

from typing import Any

from ftrans.core.operands import as_operand, check_arraylike, convert, dtype_weak
from ftrans.core.prims import indexing as I
from ftrans.core.prims.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from ftrans.core.shape_poly import DimExpr
from ftrans.errors import FtransTypeError

__all__ = [
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather", "scatter",
    "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub",
]


def _gather_mode(mode: Any) -> GatherScatterMode:
    # jax: a gather with no mode promises in-bounds indices (XLA then clamps).
    return GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)


def gather(operand: Any, start_indices: Any, dimension_numbers: Any, slice_sizes: Any, *,
           unique_indices: bool = False, indices_are_sorted: bool = False, mode: Any = None,
           fill_value: Any = None) -> Any:
    """JAX's ``lax.gather``: XLA's gather; the index vector is the last axis of ``start_indices``."""
    check_arraylike("gather", operand, start_indices)
    operand, start_indices = as_operand(operand), as_operand(start_indices)
    parsed = _gather_mode(mode)
    try:
        sizes = tuple(s if isinstance(s, DimExpr) else int(s) for s in slice_sizes)  # (symbolic: shape poly)
    except TypeError:
        raise FtransTypeError(f"gather: slice_sizes must be a sequence of ints, got {slice_sizes!r}") from None
    return I.gather_p.bind(
        operand, start_indices,
        dimension_numbers=I.canonical_gather_dnums(dimension_numbers),
        slice_sizes=sizes,
        mode=parsed,
        fill_value=I.gather_fill_param(dtype_weak(operand)[0], parsed, fill_value),
        indices_are_sorted=bool(indices_are_sorted),
        unique_indices=bool(unique_indices),
    )


def _updates_like(name: str, operand: Any, updates: Any) -> Any:
    """``updates`` in the operand's dtype; only weakly typed values convert implicitly."""
    od, _ = dtype_weak(operand)
    ud, uweak = dtype_weak(updates)
    if ud == od:
        return as_operand(updates)
    if uweak:
        return convert(updates, od, False)
    raise FtransTypeError(
        f"{name}: updates of dtype {ud.name} do not match the operand's dtype {od.name}; "
        "lax.scatter* requires equal dtypes (convert with lax.convert_element_type, or use "
        "x.at[idx].set/add/..., which promotes and casts)"
    )


def _scatter(prim, name: str, operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any,
             indices_are_sorted: bool, unique_indices: bool, mode: Any) -> Any:
    check_arraylike(name, operand, scatter_indices, updates)
    operand, scatter_indices = as_operand(operand), as_operand(scatter_indices)
    updates = _updates_like(name, operand, updates)
    return prim.bind(
        operand, scatter_indices, updates,
        dimension_numbers=I.canonical_scatter_dnums(dimension_numbers),
        mode=GatherScatterMode.from_any(mode),
        indices_are_sorted=bool(indices_are_sorted),
        unique_indices=bool(unique_indices),
    )


def scatter(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
            indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """JAX's ``lax.scatter``: write ``updates`` windows into a copy of ``operand``.

    The default mode (None) is FILL_OR_DROP, as in jax: out-of-bounds windows are skipped.
    """
    return _scatter(I.scatter_p, "scatter", operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_add(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """JAX's ``lax.scatter_add``: add ``updates`` windows (repeated indices accumulate)."""
    return _scatter(I.scatter_add_p, "scatter_add", operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_sub(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """JAX's ``lax.scatter_sub``: subtract ``updates`` windows (repeated indices accumulate; ints wrap)."""
    return _scatter(I.scatter_sub_p, "scatter_sub", operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_mul(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """JAX's ``lax.scatter_mul``: multiply by ``updates`` windows (repeated indices accumulate)."""
    return _scatter(I.scatter_mul_p, "scatter_mul", operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_min(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """JAX's ``lax.scatter_min``: elementwise minimum with ``updates`` windows."""
    return _scatter(I.scatter_min_p, "scatter_min", operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)


def scatter_max(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """JAX's ``lax.scatter_max``: elementwise maximum with ``updates`` windows."""
    return _scatter(I.scatter_max_p, "scatter_max", operand, scatter_indices, updates, dimension_numbers,
                    indices_are_sorted, unique_indices, mode)
