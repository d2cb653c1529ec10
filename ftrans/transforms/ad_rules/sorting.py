"""JVP rule of ``sort``: the tangents are permuted exactly as the primals are.

As in JAX, the permutation is obtained by sorting one extra operand, an iota
along the sort dimension, together with the others (same keys, so the order of
the primal outputs is unchanged); each non-zero tangent is then gathered with
``take_along_axis``.  Keys and values alike get their tangents permuted.
"""

from __future__ import annotations

from ftrans.core import dtypes
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.core.trace import aval_of
from ftrans.transforms.ad import Zero, register_jvp


@register_jvp(So.sort_p)
def _sort_jvp(primals: list, tangents: list, *, dimension: int, is_stable: bool, num_keys: int) -> tuple[list, list]:
    from ftrans import numpy as jnp

    shape = tuple(aval_of(primals[0]).shape)
    iota = S.iota_p.bind(dtype=dtypes.int32 if shape[dimension] < 2**31 else dtypes.int64, shape=shape,
                         dimension=dimension)
    *outs, perm = So.sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    tangents_out = [
        Zero.from_primal_value(o) if type(t) is Zero
        else jnp.take_along_axis(t, perm, axis=dimension, mode="promise_in_bounds")
        for o, t in zip(outs, tangents)
    ]
    return outs, tangents_out
