"""The few IR-building helpers that transform rules need, below the API layer.

Transforms sit under ``ftrans.lax`` and ``ftrans.numpy`` and may not import
them, yet their rules keep writing small expressions such as ``t * 2`` or
``zeros(shape)``.  These helpers bind primitives directly, with the one
convenience ``lax`` has (a Python scalar takes the other operand's dtype,
weakly, through ``operands.strict_operands``), so a rule stages exactly the
equations the public ``lax`` call would.  No promotion and no broadcasting
beyond that: a rule that needs either says so explicitly.

Keep this module small: anything more than a handful of lines belongs in a
primitive or in the API layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core.array import Array
from ftrans.core.operands import dtype_weak, shape_of, strict_operands
from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S


def apply(prim: Primitive, *args: Any, **params: Any) -> Any:
    """``prim`` on ``args`` after lax's operand rule (Python scalars join the array's dtype)."""
    return prim.bind(*strict_operands(prim.name, args), **params)


def add(x: Any, y: Any) -> Any:
    return apply(E.add_p, x, y)


def sub(x: Any, y: Any) -> Any:
    return apply(E.sub_p, x, y)


def mul(x: Any, y: Any) -> Any:
    return apply(E.mul_p, x, y)


def div(x: Any, y: Any) -> Any:
    return apply(E.div_p, x, y)


def neg(x: Any) -> Any:
    return apply(E.neg_p, x)


def eq(x: Any, y: Any) -> Any:
    return apply(E.eq_p, x, y)


def integer_pow(x: Any, y: int) -> Any:
    return apply(E.integer_pow_p, x, y=int(y))


def square(x: Any) -> Any:
    return integer_pow(x, 2)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` else ``on_false`` (``select_n`` takes the false case first)."""
    t, f = strict_operands("select", (on_true, on_false))
    (p,) = strict_operands("select", (pred,))
    return S.select_n_p.bind(p, f, t)


def convert_element_type(x: Any, dtype: np.dtype) -> Any:
    """``x`` as a strongly typed ``dtype`` array; no equation when it already is one."""
    (x,) = strict_operands("convert_element_type", (x,))
    xd, xw = dtype_weak(x)
    if xd == dtype and not xw:
        return x
    return S.convert_element_type_p.bind(x, new_dtype=np.dtype(dtype), weak_type=False)


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    shape, dims = tuple(shape), tuple(broadcast_dimensions)
    if tuple(shape_of(x)) == shape and dims == tuple(range(len(shape))):
        return x
    return S.broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


def reshape(x: Any, shape: Sequence[int]) -> Any:
    shape = tuple(shape)
    if tuple(shape_of(x)) == shape:
        return x
    return S.reshape_p.bind(x, new_sizes=shape, dimensions=None)


def full(shape: Sequence[int], value: Any, dtype: np.dtype, weak: bool = False) -> Any:
    """``value`` everywhere, staged as one broadcast of a literal rather than a captured constant."""
    scalar = Array._new(np.asarray(value, dtype), weak)
    return broadcast_in_dim(scalar, shape, ())


def zeros(shape: Sequence[int], dtype: np.dtype) -> Any:
    return full(shape, 0, dtype)
