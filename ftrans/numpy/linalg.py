"""``ftrans.numpy.linalg``.

Norms are built from reductions here. The decompositions (``inv solve det
slogdet cholesky qr svd eigh``) need XLA's linear-algebra custom calls and come
with the lowering; calling them now raises ``NotImplementedError``, as does a
norm that needs singular values (``ord`` 2, -2 or 'nuc' of a matrix).
"""

from __future__ import annotations

from typing import Any

from ftrans.core.operands import as_operand, canonicalize_axes, check_arraylike
from ftrans.errors import FtransValueError

__all__ = ["norm"]


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """``jnp.linalg.norm``: vector norms over one axis, matrix norms over two."""
    from ftrans import numpy as jnp

    check_arraylike("norm", x)
    a = as_operand(x)
    if a.dtype.kind in "iub":
        a = jnp.astype(a, jnp.float32 if not jnp.dtype(jnp.result_type(1.0)).itemsize == 8 else jnp.float64)
    nd = a.ndim
    if axis is None:
        axes = tuple(range(nd))
        if ord is not None and nd not in (1, 2):
            raise FtransValueError(f"norm: ord={ord!r} needs a 1-D or 2-D input or an explicit axis; got {nd}-D")
    else:
        axes = canonicalize_axes("norm", axis, nd)
    absx = jnp.abs(a)
    if len(axes) == 1 or (ord is None and axis is None):
        ax = axes if len(axes) != 1 else axes[0]
        if ord is None or ord == 2:
            return jnp.sqrt(jnp.sum(jnp.real(a * jnp.conj(a)) if a.dtype.kind == "c" else a * a,
                                    axis=ax, keepdims=keepdims))
        if ord == jnp.inf:
            # initial=0 as in JAX: at an all-zero vector the derivative is shared with the initial value.
            return jnp.max(absx, axis=ax, keepdims=keepdims, initial=0)
        if ord == -jnp.inf:
            return jnp.min(absx, axis=ax, keepdims=keepdims)
        if ord == 0:
            return jnp.sum(jnp.astype(absx != 0, absx.dtype), axis=ax, keepdims=keepdims)
        if ord == 1:
            return jnp.sum(absx, axis=ax, keepdims=keepdims)
        if isinstance(ord, str):
            raise FtransValueError(f"norm: invalid ord {ord!r} for a vector norm")
        return jnp.power(jnp.sum(jnp.power(absx, ord), axis=ax, keepdims=keepdims), 1.0 / ord)
    if len(axes) != 2:
        raise FtransValueError(f"norm: axis must name 1 or 2 axes, got {axis}")
    r, c = axes
    if ord in (None, "fro", "f"):
        out = jnp.sqrt(jnp.sum(absx * absx, axis=axes, keepdims=keepdims))
        return out
    if ord in (1, -1):
        red = jnp.max if ord == 1 else jnp.min
        col = jnp.sum(absx, axis=r, keepdims=True)
        out = red(col, axis=c, keepdims=True, **({"initial": 0} if ord == 1 else {}))
    elif ord in (jnp.inf, -jnp.inf):
        red = jnp.max if ord == jnp.inf else jnp.min
        row = jnp.sum(absx, axis=c, keepdims=True)
        out = red(row, axis=r, keepdims=True, **({"initial": 0} if ord == jnp.inf else {}))
    elif ord in (2, -2, "nuc"):
        raise NotImplementedError(f"norm: ord={ord!r} of a matrix needs singular values (svd), not built yet")
    else:
        raise FtransValueError(f"norm: invalid ord {ord!r} for a matrix norm")
    return out if keepdims else jnp.squeeze(out, axis=axes)
