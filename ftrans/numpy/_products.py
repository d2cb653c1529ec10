"""Products: dot, matmul, vdot, inner, outer, tensordot, einsum, kron, trace."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import reductions as R
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._util import promote_dtypes, shape_of

__all__ = ["matmul", "dot"]


def matmul(a: Any, b: Any, /, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """``jnp.matmul`` / ``@``: batched matrix product with NumPy's broadcasting of batch axes."""
    (x, y), _, _ = promote_dtypes("matmul", a, b)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    if not xs or not ys:
        raise FtransValueError(f"matmul: operands must not be 0-d; got shapes {xs} and {ys}")
    if len(xs) <= 2 and len(ys) <= 2:
        lc = len(xs) - 1
        rc = 0 if len(ys) == 1 else len(ys) - 2
        if xs[lc] != ys[rc]:
            raise FtransTypeError(
                f"matmul: contracting dimensions differ: shapes {xs} and {ys} ({xs[lc]} != {ys[rc]})"
            )
        return R.dot_general_p.bind(x, y, dimension_numbers=(((lc,), (rc,)), ((), ())),
                                    precision=None, preferred_element_type=None)
    from ftrans.numpy._batched import batched_matmul

    return batched_matmul(x, y)


def dot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    (x, y), _, _ = promote_dtypes("dot", a, b)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    if not xs or not ys:
        from ftrans.numpy._elementwise import multiply

        return multiply(x, y)
    lc = len(xs) - 1
    rc = 0 if len(ys) == 1 else len(ys) - 2
    if xs[lc] != ys[rc]:
        raise FtransTypeError(f"dot: shapes {xs} and {ys} are not aligned ({xs[lc]} != {ys[rc]})")
    out = R.dot_general_p.bind(x, y, dimension_numbers=(((lc,), (rc,)), ((), ())),
                               precision=None, preferred_element_type=None)
    return out
