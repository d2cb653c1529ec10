"""Batched matrix products (matmul over broadcast batch axes) and ``dot_general`` plumbing.

``matmul`` broadcasts leading batch axes as NumPy does.  When only one side has
batch axes they are folded into that side's free axes, so ``x @ w`` with ``x``
of shape ``(b, n, k)`` and ``w`` of shape ``(k, m)`` is one ``dot_general``
without materialising a broadcast copy of ``w``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core.operands import broadcast_shapes, broadcast_to_shape, dtype_weak, shape_of
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.errors import FtransTypeError, FtransValueError


def _kind(d: np.dtype) -> str:
    if d.kind == "c":
        return "c"
    if dtypes.is_float(d):
        return "f"
    return "i"


def dot_general(x: Any, y: Any, dnums: Any, preferred_element_type: Any = None, precision: Any = None,
                weak: bool = False) -> Any:
    """``dot_general`` on operands of one dtype or mixed ones (as JAX's products pass them).

    A ``preferred_element_type`` the primitive can take (same kind, not narrower)
    is passed on, so int8 x int8 accumulates in int32; otherwise the operands are
    converted to it first, which is what jnp does for, e.g., a float result of an
    integer product.  ``precision`` (already canonical) is kept in the equation, as JAX does; ``weak`` is
    whether the result is weakly typed (JAX's products: the join's weakness unless a preferred type is named).
    """
    if preferred_element_type is None:
        return R.dot_general_p.bind(x, y, dimension_numbers=dnums, precision=precision, preferred_element_type=None)
    pet = dtypes.kept_wide(preferred_element_type) or dtypes.to_dtype(preferred_element_type)
    d = R.dot_result_dtype(dtype_weak(x)[0], dtype_weak(y)[0])  # mixed operands: the one XLA ranks higher
    if d is not None and (pet == d or (d != dtypes.bool_ and _kind(pet) == _kind(d) and (dtypes.is_float(d) or pet.itemsize >= d.itemsize))):
        out = R.dot_general_p.bind(x, y, dimension_numbers=dnums, precision=precision, preferred_element_type=pet)
    else:
        x = S.convert_element_type_p.bind(x, new_dtype=pet, weak_type=False)
        y = S.convert_element_type_p.bind(y, new_dtype=pet, weak_type=False)
        out = R.dot_general_p.bind(x, y, dimension_numbers=dnums, precision=precision, preferred_element_type=None)
    if dtype_weak(out) != (pet, weak):  # a named preferred type gives a strong result; the join's keeps its weakness
        out = S.convert_element_type_p.bind(out, new_dtype=pet, weak_type=weak)
    return out


def _reshape(x: Any, shape: tuple[int, ...]) -> Any:
    if tuple(shape_of(x)) == tuple(shape):
        return x
    return S.reshape_p.bind(x, new_sizes=tuple(shape), dimensions=None)


def batched_matmul(name: str, x: Any, y: Any, preferred_element_type: Any = None, precision: Any = None,
                   weak: bool = False) -> Any:
    """``x @ y`` for operands of one dtype, with NumPy's rules for 1-D operands and batch axes."""
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    if not xs or not ys:
        raise FtransValueError(
            f"{name}: operands must not be 0-d (scalars); got shapes {xs} and {ys}. Use * for scaling."
        )
    x_vec, y_vec = len(xs) == 1, len(ys) == 1
    if x_vec or y_vec:
        # A vector operand is contracted as it is (as JAX does): its axis against the other's matrix axis,
        # whose free axes (batch axes included) are the result's in order; no unit axes added and removed.
        kx = len(xs) - 1
        ky = 0 if y_vec else len(ys) - 2
        if xs[kx] != ys[ky]:
            raise FtransTypeError(
                f"{name}: the last axis of the first operand ({xs[kx]}) must match the "
                f"{'only' if y_vec else 'second-to-last'} axis of the second ({ys[ky]}); got shapes {xs} and {ys}"
            )
        return dot_general(x, y, (((kx,), (ky,)), ((), ())), preferred_element_type, precision, weak)
    if x_vec:
        x = _reshape(x, (1, xs[0]))
    if y_vec:
        y = _reshape(y, (ys[0], 1))
    xs2, ys2 = tuple(shape_of(x)), tuple(shape_of(y))
    if xs2[-1] != ys2[-2]:
        raise FtransTypeError(
            f"{name}: the last axis of the first operand ({xs2[-1]}) must match the second-to-last axis "
            f"of the second ({ys2[-2]}); got shapes {xs} and {ys}"
        )
    xb, yb = xs2[:-2], ys2[:-2]
    if not yb:
        # Fold x's batch axes into its free axes: one plain matrix product.
        out = dot_general(x, y, (((len(xs2) - 1,), (0,)), ((), ())), preferred_element_type, precision, weak)
    elif not xb:
        # (n, k) @ (..., k, m): contract, then move n behind the batch axes.
        out = dot_general(x, y, (((1,), (len(ys2) - 2,)), ((), ())), preferred_element_type, precision, weak)
        nb = len(yb)
        out = S.transpose_p.bind(out, permutation=(*range(1, nb + 1), 0, nb + 1))
    else:
        batch = broadcast_shapes(name, [xb, yb], (x, y))
        sq = _squeezable(batch, ((x, xb), (y, yb))) if 1 in batch else frozenset()
        if sq:
            # Batch axes of size 1 on both sides and sharded on neither (as JAX, which squeezes them): the
            # product without them, then the axes put back.  A sharded one stays a batch axis of the product.
            def drop(v: Any, vb: tuple) -> Any:
                off = len(batch) - len(vb)
                kept = tuple(d for i, d in enumerate(vb) if off + i not in sq)
                return _reshape(v, kept + tuple(shape_of(v))[-2:])

            inner = batched_matmul(name, drop(x, xb), drop(y, yb), preferred_element_type, precision, weak)
            out = _reshape(inner, batch + tuple(shape_of(inner))[-2:])
            return _unvec(out, x_vec, y_vec)
        x = broadcast_to_shape(x, batch + xs2[-2:])
        y = broadcast_to_shape(y, batch + ys2[-2:])
        nb = len(batch)
        dn = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
        out = dot_general(x, y, dn, preferred_element_type, precision, weak)
    return _unvec(out, x_vec, y_vec)


def _squeezable(batch: tuple, operands: tuple) -> frozenset:
    """The positions of the size-1 broadcast batch axes that no operand shards (JAX's matmul squeezes only
    those; a batch axis typed over a mesh axis stays one, so the product keeps its sharding type)."""
    from ftrans.core.sharding_rules import array_aval, spec_of

    out = set(i for i, d in enumerate(batch) if d == 1)
    for v, vb in operands:
        spec = spec_of(array_aval(v))
        off = len(batch) - len(vb)
        out -= {off + i for i in range(len(vb)) if spec[i] is not None}
    return frozenset(out)


def _unvec(out: Any, x_vec: bool, y_vec: bool) -> Any:
    """Drop the unit axes a 1-D operand of matmul was given."""
    oshape = tuple(shape_of(out))
    if x_vec and y_vec:
        return _reshape(out, oshape[:-2])
    if x_vec:
        return _reshape(out, oshape[:-2] + oshape[-1:])
    if y_vec:
        return _reshape(out, oshape[:-1])
    return out
