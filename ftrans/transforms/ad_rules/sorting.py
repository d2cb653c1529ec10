"""JVP rules of ``sort`` and ``top_k``: the tangents are permuted exactly as the primals are.

As in JAX, the permutation is obtained by sorting one extra operand, an iota
along the sort dimension, together with the others (same keys, so the order of
the primal outputs is unchanged); each non-zero tangent is then gathered along
the sort dimension by that permutation (``take_along_axis``, written here as
the one gather it stages, since transforms sit below ``ftrans.numpy``).  Keys
and values alike get their tangents permuted.
"""

from __future__ import annotations

from typing import Any

from ftrans.core import building as B
from ftrans.core import dtypes
from ftrans.core.prims import indexing as I
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import is_symbolic_dim
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero, register_jvp


def _permute_along(t: Any, perm: Any, axis: int) -> Any:
    """``take_along_axis(t, perm, axis)`` for in-bounds indices ``perm``: ``t``'s shape but for ``axis``."""
    aval = aval_of(t)
    shape = tuple(aval.shape)
    n_out = aval_of(perm).shape[axis]
    if shape[axis] == 0 or n_out == 0:
        return B.zeros(shape[:axis] + (n_out,) + shape[axis + 1:], aval.dtype)
    # Axes of size 1 (other than ``axis``) are taken whole; the others are batch axes.
    kept = [i for i, s in enumerate(shape) if i == axis or s != 1]
    indices = B.reshape(perm, (*[n_out if i == axis else shape[i] for i in kept], 1))
    sizes, offset, start_map, collapsed, op_batch, idx_batch = [], [], [], [], [], []
    j = 0
    for i, s in enumerate(shape):
        if i == axis:
            sizes.append(1), start_map.append(i), collapsed.append(i)
            j += 1
        elif s == 1:
            offset.append(i), sizes.append(1)
        else:
            sizes.append(0 if s == 0 else 1)
            op_batch.append(i), idx_batch.append(j)
            j += 1
    mode = I.GatherScatterMode.PROMISE_IN_BOUNDS
    dn = I.GatherDimensionNumbers(tuple(offset), tuple(collapsed), tuple(start_map), tuple(op_batch),
                                  tuple(idx_batch))
    return I.gather_p.bind(
        t, indices, dimension_numbers=dn, slice_sizes=tuple(sizes), mode=mode,
        fill_value=I.gather_fill_param(aval.dtype, mode, None), indices_are_sorted=False, unique_indices=False,
    )


@register_jvp(So.sort_p)
def _sort_jvp(primals: list, tangents: list, *, dimension: int, is_stable: bool, num_keys: int) -> tuple[list, list]:
    shape = tuple(aval_of(primals[0]).shape)
    n = shape[dimension]  # (a symbolic size is taken to fit int32)
    iota = S.iota_p.bind(dtype=dtypes.int32 if is_symbolic_dim(n) or n < 2**31 else dtypes.int64, shape=shape,
                         dimension=dimension)
    *outs, perm = So.sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    tangents_out = [
        Zero.from_primal_value(o) if type(t) is Zero else _permute_along(t, perm, dimension)
        for o, t in zip(outs, tangents)
    ]
    return outs, tangents_out


@register_jvp(So.top_k_p)
def _top_k_jvp(primals: list, tangents: list, *, k: int, axis: int) -> tuple[list, list]:
    """The tangent of the values is the operand's tangent at the selected indices; the indices have none."""
    vals, idx = So.top_k_p.bind(*primals, k=k, axis=axis)
    (t,) = tangents
    t_vals = Zero.from_primal_value(vals) if type(t) is Zero else _permute_along(t, idx, axis)
    return [vals, idx], [t_vals, Zero.from_primal_value(idx)]
