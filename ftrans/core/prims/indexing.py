"""Gather and scatter primitives (XLA's general semantics).

``gather`` reads windows of an operand at positions given by an index array;
the ``scatter`` family writes (or combines) windows of ``updates`` into a copy
of the operand.  Both follow the convention of JAX's ``lax`` that the index vector is
the *last* dimension of the index array.  The dimension numbers are the
NamedTuples of ``ftrans.core.gather`` (field-compatible with jax's),
always with plain ``int`` tuples so parameters are hashable and print well.

Out-of-bounds handling is a parameter (``GatherScatterMode``) as in jax:

* ``CLIP``: clamp start indices so the whole window is in bounds;
* ``FILL_OR_DROP``: a gather window that is partly out of bounds reads
  ``fill_value``; a scatter window that is partly out of bounds is skipped;
* ``PROMISE_IN_BOUNDS``: the user promises in-bounds indices; what XLA then does
  (and so what we do) is clamp for gather and skip for scatter.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import gather as G
from ftrans.core.avals import ShapedArray
from ftrans.core.primitive import Primitive
from ftrans.core.prims._base import ANY, ANY_OR_KEY, INT, NUM, class_name, prim_type_error, prim_value_error

GatherDimensionNumbers = G.GatherDimensionNumbers
ScatterDimensionNumbers = G.ScatterDimensionNumbers


class GatherScatterMode(enum.Enum):
    """How a gather or scatter treats out-of-bounds indices (JAX's ``lax.GatherScatterMode``)."""

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s: Any) -> GatherScatterMode:
        """Parse a mode the way jax does: ``None``, ``"fill"`` and ``"drop"`` mean FILL_OR_DROP."""
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            raise NotImplementedError("gather/scatter: mode='one_hot' is not supported")
        raise prim_value_error(
            "gather/scatter",
            f"unknown mode {s!r}; use 'clip', 'fill' (or 'drop') or 'promise_in_bounds'",
        )

    def __repr__(self) -> str:
        return f"GatherScatterMode.{self.name}"

    __str__ = __repr__


def canonical_gather_dnums(dn: Any) -> GatherDimensionNumbers:
    """Any GatherDimensionNumbers-like object (ours or jax's) as ours, with int tuples."""
    try:
        return GatherDimensionNumbers(
            tuple(int(d) for d in dn.offset_dims),
            tuple(int(d) for d in dn.collapsed_slice_dims),
            tuple(int(d) for d in dn.start_index_map),
            tuple(int(d) for d in getattr(dn, "operand_batching_dims", ())),
            tuple(int(d) for d in getattr(dn, "start_indices_batching_dims", ())),
        )
    except (AttributeError, TypeError):
        raise prim_value_error(
            "gather", f"dimension_numbers must be a lax.GatherDimensionNumbers, got {dn!r}"
        ) from None


def canonical_scatter_dnums(dn: Any) -> ScatterDimensionNumbers:
    """Any ScatterDimensionNumbers-like object (ours or jax's) as ours, with int tuples."""
    try:
        return ScatterDimensionNumbers(
            tuple(int(d) for d in dn.update_window_dims),
            tuple(int(d) for d in dn.inserted_window_dims),
            tuple(int(d) for d in dn.scatter_dims_to_operand_dims),
            tuple(int(d) for d in getattr(dn, "operand_batching_dims", ())),
            tuple(int(d) for d in getattr(dn, "scatter_indices_batching_dims", ())),
        )
    except (AttributeError, TypeError):
        raise prim_value_error(
            "scatter", f"dimension_numbers must be a lax.ScatterDimensionNumbers, got {dn!r}"
        ) from None


def _check_mode(name: str, mode: Any) -> None:
    if not isinstance(mode, GatherScatterMode):
        raise prim_value_error(name, f"mode must be a GatherScatterMode, got {mode!r}")


def _check_indices(name: str, avals: list, indices: ShapedArray) -> None:
    if indices.dtype not in INT:
        raise prim_type_error(
            name, avals,
            f"indices must have an integer dtype, got {indices.dtype.name} "
            "(convert them with lax.convert_element_type or .astype(jnp.int32))",
        )
    if indices.ndim < 1:
        raise prim_type_error(
            name, avals,
            "indices must have rank >= 1: their last dimension is the index vector "
            "(add a trailing axis of size 1 to index with scalars)",
        )


def _strip(op: str, e: Exception) -> str:
    """core.gather's message without its own ``op:`` prefix (ours adds the primitive name)."""
    msg = str(e)
    return msg[len(op) + 2:] if msg.startswith(op + ": ") else msg


def _aval(x: np.ndarray) -> ShapedArray:
    return ShapedArray(x.shape, x.dtype, False)


# ---------------------------------------------------------------- gather
def _gather_abstract_eval(operand: ShapedArray, indices: ShapedArray, *, dimension_numbers,
                          slice_sizes, mode, fill_value, indices_are_sorted, unique_indices) -> ShapedArray:
    avals = [operand, indices]
    _check_indices("gather", avals, indices)
    _check_mode("gather", mode)
    try:
        shape = G.gather_shape(operand.shape, indices.shape, dimension_numbers, slice_sizes)
    except ValueError as e:
        raise prim_type_error("gather", avals, _strip("gather", e)) from None
    return ShapedArray(tuple(shape), operand.dtype, operand.weak_type)


def _gather_impl(operand: np.ndarray, indices: np.ndarray, *, dimension_numbers, slice_sizes, mode,
                 fill_value, indices_are_sorted, unique_indices) -> np.ndarray:
    # Eager execution skips abstract evaluation; validate here so bad calls get
    # the same located, typed errors eagerly as when staged.
    _gather_abstract_eval(
        _aval(operand), _aval(indices), dimension_numbers=dimension_numbers, slice_sizes=slice_sizes,
        mode=mode, fill_value=fill_value, indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices,
    )
    how = "fill" if mode is GatherScatterMode.FILL_OR_DROP else "clip"
    out = G.gather(operand, indices, dimension_numbers, slice_sizes, how, fill_value)
    return out if out.dtype == operand.dtype else out.astype(operand.dtype)


gather_p = Primitive("gather")
gather_p.def_abstract_eval(_gather_abstract_eval)
gather_p.def_impl(_gather_impl)
gather_p.def_weak_type(lambda weaks, **params: weaks[0])


# ---------------------------------------------------------------- scatter family
_COMBINE = {"scatter": "set", "scatter_add": "add", "scatter_sub": "sub", "scatter_mul": "mul",
            "scatter_min": "min", "scatter_max": "max"}
_ALLOWED = {"scatter": ANY_OR_KEY, "scatter_add": NUM, "scatter_sub": NUM, "scatter_mul": NUM,
            "scatter_min": ANY, "scatter_max": ANY}


def _scatter_rules(name: str):
    combine = _COMBINE[name]
    allowed = _ALLOWED[name]

    def abstract_eval(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *,
                      dimension_numbers, mode, indices_are_sorted, unique_indices,
                      update_jaxpr=None) -> ShapedArray:
        avals = [operand, indices, updates]
        _check_indices(name, avals, indices)
        _check_mode(name, mode)
        if updates.dtype != operand.dtype:
            raise prim_type_error(
                name, avals,
                "updates must have the operand's dtype (convert them first; "
                "x.at[idx] updates do this for you)",
            )
        if operand.dtype not in allowed:
            raise prim_type_error(name, avals, f"expects {class_name(allowed)} operands")
        try:
            G.check_scatter_shapes(operand.shape, indices.shape, updates.shape, dimension_numbers)
        except ValueError as e:
            raise prim_type_error(name, avals, _strip("scatter", e)) from None
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)

    def impl(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, dimension_numbers,
             mode, indices_are_sorted, unique_indices, update_jaxpr=None) -> np.ndarray:
        abstract_eval(_aval(operand), _aval(indices), _aval(updates), dimension_numbers=dimension_numbers,
                      mode=mode, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
        how = "clip" if mode is GatherScatterMode.CLIP else "fill"
        with np.errstate(all="ignore"):
            out = G.scatter(operand, indices, updates, dimension_numbers, combine, how)
        return out if out.dtype == operand.dtype else out.astype(operand.dtype)

    return abstract_eval, impl


def _make_scatter(name: str) -> Primitive:
    prim = Primitive(name)
    abstract_eval, impl = _scatter_rules(name)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    prim.def_weak_type(lambda weaks, **params: weaks[0])
    return prim


scatter_p = _make_scatter("scatter")
scatter_add_p = _make_scatter("scatter_add")
scatter_sub_p = _make_scatter("scatter_sub")
scatter_mul_p = _make_scatter("scatter_mul")
scatter_min_p = _make_scatter("scatter_min")
scatter_max_p = _make_scatter("scatter_max")


def default_gather_fill_value(dtype: np.dtype) -> Any:
    """jax's FILL_OR_DROP default: NaN for inexact, min for signed, max for unsigned, True for bool; for keys,
    the key whose ``uint32`` data words are all the maximum (JAX's)."""
    if type(dtype).__name__ == "KeyDtype":
        return int(np.iinfo(np.uint32).max)
    if dtypes.is_inexact(dtype):
        return float("nan")
    if dtype == dtypes.bool_:
        return True
    info = dtypes.iinfo(dtype)
    return int(info.min) if dtype.kind == "i" else int(info.max)


def gather_fill_param(dtype: np.dtype, mode: GatherScatterMode, fill_value: Any) -> Any:
    """The ``fill_value`` parameter a gather records: a Python scalar in FILL_OR_DROP mode, else None.

    jax ignores ``fill_value`` outside FILL_OR_DROP mode and picks a per-dtype
    default inside it; keeping it a plain Python scalar keeps the parameter
    hashable and printable.
    """
    if mode is not GatherScatterMode.FILL_OR_DROP:
        return None
    if fill_value is None:
        return default_gather_fill_value(dtype)
    v = _concrete_scalar(fill_value)
    return np.asarray(v).item()


def _concrete_scalar(v: Any) -> Any:
    from ftrans.core.array import Array
    from ftrans.core.trace import Tracer

    if isinstance(v, Tracer):
        from ftrans.errors import ConcretizationTypeError

        raise ConcretizationTypeError(
            f"the fill_value of a gather must be a concrete scalar, but a traced {v.aval.str_short()} "
            "was given; use jnp.where(mask, x[idx], value) for a traced fill"
        )
    v = v._value if isinstance(v, Array) else v
    if np.ndim(v) != 0:
        raise prim_value_error("gather", f"fill_value must be a scalar, got shape {np.shape(v)}")
    return v


__all__ = [
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers",
    "canonical_gather_dnums", "canonical_scatter_dnums", "default_gather_fill_value", "gather_fill_param",
    "gather_p", "scatter_add_p", "scatter_max_p", "scatter_min_p", "scatter_mul_p", "scatter_p",
    "scatter_sub_p",
]


# Sharding in types (core/sharding_rules.py): JAX's gather and scatter rules
from ftrans.core import sharding_rules as _sr  # noqa: E402

gather_p.sharding_rule = _sr.gather
for _p in (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    _p.sharding_rule = _sr.scatter
    _sr.typed_by_api.add(_p)
_sr.typed_by_api.add(gather_p)
