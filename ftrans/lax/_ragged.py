"""``lax.ragged_dot``, ``lax.ragged_dot_general`` and ``RaggedDotDimensionNumbers``.

A ragged dot is an ordinary ``dot_general`` once the ragged dimension of ``lhs`` is expanded into one slice per
group (zeros outside the group's rows): built that way from ``iota``, comparisons, ``select`` and one
``dot_general``, it needs no primitive of its own and every transform already handles it.  The three modes
(the ragged dimension non-contracting, contracting, or batch) and the shape checks and messages are JAX's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.operands import as_operand, dtype_weak, shape_of
from ftrans.core.prims import sorting as So
from ftrans.core.shape_poly import is_symbolic_dim
from ftrans.errors import FtransTypeError
from ftrans.lax import _ops as lax

__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """JAX's ``RaggedDotDimensionNumbers``: ``dot_dimension_numbers`` (``((lhs_contracting, rhs_contracting),
    (lhs_batch, rhs_batch))``), the one ``lhs_ragged_dimensions`` entry, and ``rhs_group_dimensions`` (one
    dimension when the ragged dimension is non-contracting, none otherwise)."""

    dot_dimension_numbers: Any
    lhs_ragged_dimensions: Sequence[int]
    rhs_group_dimensions: Sequence[int]

    def __init__(self, dot_dimension_numbers: Any, lhs_ragged_dimensions: Sequence[int],
                 rhs_group_dimensions: Sequence[int]):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(tuple(int(d) for d in s) for s in t) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(int(d) for d in lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(int(d) for d in rhs_group_dimensions))


_BASIC = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def _remaining(n: int, *taken: Sequence[int]) -> list[int]:
    used = {d for t in taken for d in t}
    return [d for d in range(n) if d not in used]


def _in_range(dim: int, rank: int, what: str, arg: str) -> None:
    if not 0 <= dim < rank:
        raise FtransTypeError(
            f"ragged_dot_general requires {what} numbers to be nonnegative and less than the number of axes of "
            f"the {arg} value, got {dim} for {arg} of rank {rank}."
        )


def _mode(rank: int, dn: RaggedDotDimensionNumbers) -> tuple[str, int]:
    ragged = dn.lhs_ragged_dimensions[0]
    (lc, _), (lb, _) = dn.dot_dimension_numbers
    if ragged in lc:
        return "contracting", ragged
    if ragged in lb:
        return "batch", ragged
    return "noncontracting", ragged


def _prefix(mode: str, rank: int, ragged: int, batch: Sequence[int], contract: Sequence[int]) -> list[int]:
    """The lhs dimensions ``group_sizes`` is indexed by before its group axis (``[b..., x...]``)."""
    batch, contract = list(batch), list(contract)
    if mode == "noncontracting":
        free = _remaining(rank, contract, batch)
        return batch + free[:free.index(ragged)]
    if mode == "contracting":
        return batch + contract[:contract.index(ragged)]
    return batch[:batch.index(ragged)]


def _expand(x: Any, dim: int, sizes: Any, prefix: Sequence[int]) -> Any:
    """``x`` with a new leading group axis: slice ``g`` keeps the positions of ``dim`` in group ``g`` (zeros
    elsewhere).  ``sizes`` has shape ``[x.shape[p] for p in prefix] + [g]``."""
    shape = tuple(shape_of(x))
    g = shape_of(sizes)[-1]
    full = (g,) + shape
    sd = dtype_weak(sizes)[0]
    ends = lax._bind(So.cumsum_p, sizes, axis=len(shape_of(sizes)) - 1, reverse=False)
    starts = lax.sub(ends, sizes)
    # group_sizes' axes land on (1 + prefix..., 0) of the expanded shape; broadcast_in_dim wants them in order
    targets = [1 + p for p in prefix] + [0]
    order = sorted(range(len(targets)), key=targets.__getitem__)

    def spread(v: Any) -> Any:
        return lax.broadcast_in_dim(lax.transpose(v, order), full, tuple(sorted(targets)))

    pos = lax.broadcasted_iota(sd, full, 1 + dim)
    inside = lax.bitwise_and(lax.le(spread(starts), pos), lax.lt(pos, spread(ends)))
    xb = lax.broadcast_in_dim(x, full, tuple(range(1, len(full))))
    zero = lax.broadcast_in_dim(lax.convert_element_type(0, dtype_weak(x)[0]), full, ())
    return lax.select(inside, xb, zero)


def ragged_dot_general(lhs: Any, rhs: Any, group_sizes: Any, ragged_dot_dimension_numbers: RaggedDotDimensionNumbers,
                       precision: Any = None, preferred_element_type: Any = None, group_offset: Any = None,
                       out_sharding: Any = None) -> Any:
    """JAX's ``lax.ragged_dot_general``: a ``dot_general`` in which ``lhs``'s ragged dimension is split into
    consecutive groups of ``group_sizes`` rows.  Non-contracting ragged dimension: each group's rows multiply
    their own slice of ``rhs``'s group dimension; contracting: one result per group (a new leading axis), each
    contracting only its group's positions; batch: a plain batched ``dot_general``."""
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general: group_offset is not supported (as in JAX on CPU and GPU)")
    if out_sharding is not None:
        from ftrans.core.jaxpr_api import eval_shape
        from ftrans.lax._sharding import with_out_sharding

        def rdg(a: Any, b: Any, g: Any) -> Any:
            return ragged_dot_general(a, b, g, ragged_dot_dimension_numbers, precision, preferred_element_type,
                                      group_offset)

        shape = tuple(eval_shape(rdg, lhs, rhs, group_sizes).shape)
        return with_out_sharding("ragged_dot_general", out_sharding, lambda: rdg(lhs, rhs, group_sizes),
                                 (lhs, rhs), shape)
    dn = ragged_dot_dimension_numbers
    if not isinstance(dn, RaggedDotDimensionNumbers):
        raise FtransTypeError(
            f"ragged_dot_general: ragged_dot_dimension_numbers must be a RaggedDotDimensionNumbers, got "
            f"{type(dn).__name__}"
        )
    x, y, gs = as_operand(lhs), as_operand(rhs), as_operand(group_sizes)
    xs, ys, gshape = tuple(shape_of(x)), tuple(shape_of(y)), tuple(shape_of(gs))
    if len(dn.lhs_ragged_dimensions) != 1:
        raise FtransTypeError("ragged_dot_general expects exactly one lhs ragged dimension.")
    ragged = dn.lhs_ragged_dimensions[0]
    _in_range(ragged, len(xs), "lhs ragged dimension", "lhs")
    mode, ragged = _mode(len(xs), dn)
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    if not dtypes.issubdtype(dtype_weak(gs)[0], np.integer):
        raise FtransTypeError("ragged_dot_general requires that group_sizes.dtype is subtype of np.integer.")
    if len(gshape) == 0:
        raise FtransTypeError("expected rank of group_sizes to be >=1.")
    prefix = _prefix(mode, len(xs), ragged, lb, lc)
    want = tuple(xs[i] for i in prefix) + (gshape[-1],)
    if len(gshape) != 1 and gshape != want:
        raise FtransTypeError(f"expected group_sizes to have shape {want}, got {gshape}.")
    g = gshape[-1]
    if mode in ("contracting", "noncontracting") and is_symbolic_dim(g):
        raise FtransTypeError("ragged_dot_general requires the group count (last dimension of group_sizes) to be "
                              "static in Mode 1 (non-contracting) and Mode 2 (contracting).")
    groups = dn.rhs_group_dimensions
    if mode in ("contracting", "batch"):
        if groups:
            raise FtransTypeError(
                "ragged_dot_general requires zero group dimensions in the rhs when lhs ragged dimension is "
                "contracting or batch."
            )
    else:
        if len(groups) != 1:
            raise FtransTypeError(
                "ragged_dot_general requires exactly one rhs group dimension when lhs ragged dimension is "
                "noncontracting."
            )
        _in_range(groups[0], len(ys), "rhs group dimension", "rhs")
        if groups[0] in rb or groups[0] in rc:
            raise FtransTypeError(
                "ragged_dot_general requires rhs group dimension numbers to be distinct from contracting and "
                "batch dimensions."
            )
        if ys[groups[0]] != g:
            raise FtransTypeError(f"expected rhs group dimension size to be {g}, got {ys[groups[0]]}.")
    if len(gshape) == 1 and prefix:
        gs = lax.broadcast_in_dim(gs, want, (len(want) - 1,))

    def bump(dims: Sequence[int]) -> tuple[int, ...]:
        return tuple(d + 1 for d in dims)

    def dot(a: Any, b: Any, dims: Any) -> Any:
        return lax.dot_general(a, b, dims, precision=precision, preferred_element_type=preferred_element_type)

    if mode == "noncontracting":
        return dot(_expand(x, ragged, gs, prefix), y, ((bump(lc) + (0,), tuple(rc) + (groups[0],)), (bump(lb), rb)))
    if mode == "contracting":
        r_ragged = rc[list(lc).index(ragged)]
        r_prefix = _prefix(mode, len(ys), r_ragged, rb, rc)
        return dot(_expand(x, ragged, gs, prefix), _expand(y, r_ragged, gs, r_prefix),
                   ((bump(lc), bump(rc)), ((0,) + bump(lb), (0,) + bump(rb))))
    return dot(x, y, dn.dot_dimension_numbers)


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None, preferred_element_type: Any = None,
               group_offset: Any = None, out_sharding: Any = None) -> Any:
    """JAX's ``lax.ragged_dot``: ``lhs`` ``(m, k)`` split into consecutive row groups of ``group_sizes``
    ``(g,)``, group ``i`` multiplied by ``rhs[i]`` (``rhs`` is ``(g, k, n)``); rows past the last group are 0."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision=precision,
                              preferred_element_type=preferred_element_type, group_offset=group_offset,
                              out_sharding=out_sharding)
