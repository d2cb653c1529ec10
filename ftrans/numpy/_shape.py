"""Shape manipulation: reshape, transpose, stacking, splitting, padding, ..."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ftrans.core.prims import structural as S
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.numpy._util import (
    as_operand,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    promote_dtypes,
    shape_of,
)

__all__ = ["reshape", "ravel", "transpose", "stack", "concatenate", "expand_dims", "shape", "ndim", "size"]


def _compute_newshape(name: str, old: tuple[int, ...], newshape: Any) -> tuple[int, ...]:
    if isinstance(newshape, int) or not isinstance(newshape, Sequence):
        newshape = (newshape,)
    newshape = tuple(int(concrete_or_error(d, f"{name}: the new shape")) for d in newshape)
    size = math.prod(old)
    if newshape.count(-1) > 1:
        raise FtransValueError(f"{name}: can only specify one unknown dimension (-1), got {newshape}")
    if -1 in newshape:
        known = math.prod(d for d in newshape if d != -1)
        if known == 0 or size % known:
            raise FtransTypeError(f"{name}: cannot reshape array of shape {old} (size {size}) into shape {newshape}")
        newshape = tuple(size // known if d == -1 else d for d in newshape)
    if any(d < 0 for d in newshape) or math.prod(newshape) != size:
        raise FtransTypeError(f"{name}: cannot reshape array of shape {old} (size {size}) into shape {newshape}")
    return newshape


def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Any:
    """``jnp.reshape`` (C order; ``order='F'`` is done with transposes)."""
    if shape is None:
        shape = newshape
    if shape is None:
        raise FtransTypeError("reshape() needs a shape")
    check_arraylike("reshape", a)
    x = as_operand(a)
    old = tuple(x.shape)
    new = _compute_newshape("reshape", old, shape)
    if order == "F":
        xt = transpose(x)
        return transpose(S.reshape_p.bind(xt, new_sizes=new[::-1], dimensions=None))
    if order not in ("C", "A"):
        raise NotImplementedError(f"reshape: order={order!r} is not supported")
    if new == old:
        return x
    return S.reshape_p.bind(x, new_sizes=new, dimensions=None)


def _method_reshape(a: Any, *args: Any, order: str = "C", **kw: Any) -> Any:
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` both work, as in NumPy."""
    if len(args) == 1:
        return reshape(a, args[0], order=order, **kw)
    if not args:
        return reshape(a, order=order, **kw)
    return reshape(a, args, order=order)


def ravel(a: Any, order: str = "C") -> Any:
    x = as_operand(a)
    return reshape(x, (math.prod(x.shape),), order=order)


def transpose(a: Any, axes: Any = None) -> Any:
    check_arraylike("transpose", a)
    x = as_operand(a)
    nd = len(x.shape)
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        if len(axes) != nd:
            raise FtransValueError(f"transpose: axes {tuple(axes)} don't match an array of dimension {nd}")
        perm = tuple(canonicalize_axis("transpose", ax, nd) for ax in axes)
        if len(set(perm)) != nd:
            raise FtransValueError(f"transpose: repeated axis in {tuple(axes)}")
    if perm == tuple(range(nd)):
        return x
    return S.transpose_p.bind(x, permutation=perm)


def _method_transpose(a: Any, *args: Any) -> Any:
    if not args:
        return transpose(a)
    if len(args) == 1 and (args[0] is None or isinstance(args[0], (tuple, list))):
        return transpose(a, args[0])
    return transpose(a, args)


def expand_dims(a: Any, axis: Any) -> Any:
    x = as_operand(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = len(x.shape) + len(axes)
    dims = sorted(canonicalize_axis("expand_dims", ax, nd) for ax in axes)
    if len(set(dims)) != len(dims):
        raise FtransValueError(f"expand_dims: repeated axis in {axis}")
    new = list(x.shape)
    for d in dims:
        new.insert(d, 1)
    return S.reshape_p.bind(x, new_sizes=tuple(new), dimensions=None)


def concatenate(arrays: Any, axis: int | None = 0, dtype: Any = None) -> Any:
    if not isinstance(arrays, (list, tuple)) and not hasattr(arrays, "shape"):
        raise FtransTypeError("concatenate expects a sequence of arrays")
    arrays = list(arrays)
    if not arrays:
        raise FtransValueError("need at least one array to concatenate")
    if axis is None:
        return concatenate([ravel(a) for a in arrays], 0, dtype)
    ops, _, _ = promote_dtypes("concatenate", *arrays)
    if dtype is not None:
        from ftrans.numpy._util import convert
        from ftrans.core import dtypes

        ops = [convert(o, dtypes.to_dtype(dtype)) for o in ops]
    nd = len(shape_of(ops[0]))
    if nd == 0:
        raise FtransValueError("zero-dimensional arrays cannot be concatenated")
    ax = canonicalize_axis("concatenate", axis, nd)
    for o in ops[1:]:
        s0, s = shape_of(ops[0]), shape_of(o)
        if len(s) != nd or any(a != b for i, (a, b) in enumerate(zip(s0, s)) if i != ax):
            raise FtransValueError(
                f"concatenate: all input array dimensions except axis {ax} must match; "
                f"got shapes {[tuple(shape_of(x)) for x in ops]}"
            )
    if len(ops) == 1:
        return ops[0]
    return S.concatenate_p.bind(*ops, dimension=ax)


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    arrays = list(arrays)
    if not arrays:
        raise FtransValueError("need at least one array to stack")
    ops = [as_operand(a) for a in arrays]
    shapes = {tuple(shape_of(o)) for o in ops}
    if len(shapes) != 1:
        raise FtransValueError(f"stack: all input arrays must have the same shape, got {sorted(shapes)}")
    nd = len(shape_of(ops[0])) + 1
    ax = canonicalize_axis("stack", axis, nd)
    return concatenate([expand_dims(o, ax) for o in ops], ax, dtype)


def shape(a: Any) -> tuple[int, ...]:
    return tuple(shape_of(a))


def ndim(a: Any) -> int:
    return len(shape_of(a))


def size(a: Any, axis: int | None = None) -> int:
    s = shape_of(a)
    return math.prod(s) if axis is None else s[axis]
