"""Shape manipulation: reshape, transpose, stacking, splitting, tiling, padding, ...

Everything here is a rearrangement of data whose pattern is known statically,
so each function lowers to the structural primitives (``reshape``,
``transpose``, ``slice``, ``concatenate``, ``broadcast_in_dim``, ``rev``,
``pad``) with static parameters: no gathers, no captured index constants.
Rearrangements that NumPy describes with an index list (``repeat``, ``roll``,
``pad(mode='wrap')``) are decomposed into runs of contiguous slices.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.operands import (
    as_operand,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    dtype_weak,
    index_seq,
    maybe_concrete,
    shape_of,
)
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import DimExpr, as_dim, min_dim
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError, InconclusiveDimensionOperation, user_stacklevel

__all__ = [
    "reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis",
    "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays", "broadcast_shapes", "concatenate",
    "concat", "stack", "unstack", "hstack", "vstack", "dstack", "column_stack", "append", "split",
    "array_split", "hsplit", "vsplit", "dsplit", "tile", "repeat", "flip", "fliplr", "flipud",
    "rot90", "roll", "pad", "atleast_1d", "atleast_2d", "atleast_3d", "shape", "ndim", "size",
    "_method_reshape", "_method_transpose", "_method_flatten",
]


# ---------------------------------------------------------------- helpers
def _operand(name: str, a: Any) -> Any:
    check_arraylike(name, a)
    return as_operand(a)


def _shp(x: Any) -> tuple[int, ...]:
    return tuple(shape_of(x))


def _static_int(name: str, what: str, v: Any) -> int:
    v = concrete_or_error(v, f"{name}: argument '{what}'")
    try:
        return operator.index(v)
    except TypeError:
        raise FtransTypeError(f"{name}: {what} must be an integer, got {v!r}") from None


def _axis_seq(axis: Any) -> tuple | list:
    """An axis argument as a sequence: one int, or any iterable of ints (a range, a generator)."""
    if hasattr(axis, "__iter__") and not hasattr(axis, "__index__") and not hasattr(axis, "shape"):
        return tuple(axis)
    return index_seq(axis)


def _axes_tuple(name: str, axis: Any, nd: int) -> tuple[int, ...]:
    """Normalised axes (ints or a sequence of ints); repeats are a ValueError."""
    seq = _axis_seq(axis)
    axes = tuple(canonicalize_axis(name, _static_int(name, "axis", a), nd) for a in seq)
    if len(set(axes)) != len(axes):
        raise FtransValueError(f"{name}: repeated axis in {tuple(seq)}")
    return axes


def _retype(x: Any, dtype: np.dtype) -> Any:
    """Convert to ``dtype`` with a strong type (an explicit ``dtype=`` argument was given)."""
    d, w = dtype_weak(x)
    if d == dtype and not w:
        return x
    if d == dtype and type(x) is Array:
        return Array._new(x._value, False)
    return S.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=False)


def _promote(name: str, arrays: list) -> list:
    """Promote to one dtype *and* one weak type, as JAX does before joining arrays."""
    from ftrans.numpy._creation import retype

    check_arraylike(name, *arrays)
    d, w = dtypes.promote(tuple(dtype_weak(a) for a in arrays))
    return [retype(a, d, w) for a in arrays]


def _dtype_arg(name: str, dtype: Any) -> np.dtype | None:
    if dtype is None:
        return None
    try:
        return dtypes.requested(dtype, name)
    except TypeError as e:
        raise FtransTypeError(f"{name}: invalid dtype {dtype!r}: {e}") from None


def _slice_axis(x: Any, axis: int, start: int, stop: int, stride: int = 1) -> Any:
    shp = _shp(x)
    if start == 0 and stop == shp[axis] and stride == 1:
        return x
    starts = [0] * len(shp)
    limits = list(shp)
    strides = [1] * len(shp)
    starts[axis], limits[axis], strides[axis] = start, stop, stride
    return S.slice_p.bind(x, start_indices=tuple(starts), limit_indices=tuple(limits),
                          strides=None if stride == 1 else tuple(strides))


def _concat(parts: list, axis: int) -> Any:
    return parts[0] if len(parts) == 1 else S.concatenate_p.bind(*parts, dimension=axis)


def _rev(x: Any, axes: tuple[int, ...]) -> Any:
    return S.rev_p.bind(x, dimensions=tuple(axes)) if axes else x


def _repeat_each(x: Any, axis: int, count: int) -> Any:
    """Every element along ``axis`` repeated ``count`` times in place (a broadcast and a reshape)."""
    shp = _shp(x)
    if count == 1:
        return x
    wide = shp[:axis + 1] + (count,) + shp[axis + 1:]
    dims = tuple(i if i <= axis else i + 1 for i in range(len(shp)))
    b = S.broadcast_in_dim_p.bind(x, shape=wide, broadcast_dimensions=dims)
    return reshape(b, shp[:axis] + (shp[axis] * count,) + shp[axis + 1:])


def _take_static(x: Any, axis: int, idx: Sequence[int]) -> Any:
    """``x`` indexed along ``axis`` by a static index list, as runs of slices.

    Consecutive indices that step by +1 become one slice, by -1 a reversed
    slice, and by 0 a broadcast of one slice, so ``roll``, ``wrap`` and
    ``edge`` padding cost a handful of equations however long the axis.
    """
    idx = [int(i) for i in idx]
    if not idx:
        return _slice_axis(x, axis, 0, 0)
    parts = []
    p = 0
    while p < len(idx):
        q = p + 1
        step = idx[q] - idx[p] if q < len(idx) else 1
        if step not in (-1, 0, 1):
            step = 1
        else:
            while q < len(idx) and idx[q] - idx[q - 1] == step:
                q += 1
        first, last = idx[p], idx[q - 1]
        if step == 1:
            parts.append(_slice_axis(x, axis, first, last + 1))
        elif step == -1:
            parts.append(_rev(_slice_axis(x, axis, last, first + 1), (axis,)))
        else:
            parts.append(_repeat_each(_slice_axis(x, axis, first, first + 1), axis, q - p))
        p = q
    return _concat(parts, axis)


def _as_list(name: str, arrays: Any) -> list:
    """A sequence of arrays; an array argument stands for the list of its rows."""
    if isinstance(arrays, (Array, Tracer, np.ndarray)):
        x = as_operand(arrays)
        if not _shp(x):
            raise FtransValueError(f"{name}: a 0-d array is not a sequence of arrays")
        return unstack(x)
    if not isinstance(arrays, (list, tuple)):
        try:
            arrays = list(arrays)
        except TypeError:
            raise FtransTypeError(f"{name}: expected a sequence of arrays, got {type(arrays).__name__}") from None
    return list(arrays)


# ---------------------------------------------------------------- reshape family
def _compute_newshape(name: str, old: tuple[int, ...], newshape: Any) -> tuple[int, ...]:
    if isinstance(newshape, Tracer):
        newshape = maybe_concrete(newshape)
    if isinstance(newshape, Tracer) or not isinstance(newshape, (Sequence, np.ndarray, Array)):
        # Any sized iterable is a shape (JAX reads it with ``tuple``); anything else is one dimension.
        newshape = tuple(newshape) if hasattr(newshape, "__len__") and hasattr(newshape, "__getitem__") \
            and not isinstance(newshape, Tracer) else (newshape,)
    dims = [concrete_or_error(d, f"{name}: the new shape") for d in newshape]
    try:
        new = tuple(as_dim(d) for d in dims)
    except TypeError:
        raise FtransTypeError(f"{name}: the new shape must be a sequence of ints, got {newshape!r}") from None
    total = math.prod(old)
    if new.count(-1) > 1:
        raise FtransTypeError(f"{name}: can only specify one unknown dimension (-1), got {new}")
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        size = None if known == 0 or total % known else total // known
        if size is None and known != 0 and not isinstance(total, int):
            # symbolic: divided by -known, as JAX divides (an equality constraint may name that quotient)
            q, r = divmod(total, -known)
            size = -q if r == 0 else None
        if size is None and known != 0 and not isinstance(total, int):  # JAX's error for symbolic sizes
            raise InconclusiveDimensionOperation(
                f"Cannot divide evenly the sizes of shapes {tuple(old)} and {tuple(new)}. The remainder "
                f"{divmod(total, -known)[1]} should be 0.")
        if size is None:
            raise FtransTypeError(
                f"{name}: cannot reshape array of shape {old} (size {total}) into shape {new}"
            )
        new = tuple(size if d == -1 else d for d in new)
    if any(d < 0 for d in new) or math.prod(new) != total:
        raise FtransTypeError(
            f"{name}: cannot reshape array of shape {old} (size {total}) into shape {new} "
            f"(size {math.prod(new)})"
        )
    return new


def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None,
            out_sharding: Any = None) -> Any:
    """Give an array a new shape without changing its data.

    `order='F'` is done as transposes around a row-major reshape. `out_sharding` lays the result out (its
    sharding type over Explicit mesh axes). The shape must be static; one entry may be -1, to be inferred.

    Args:
        a: Input array.
        shape: The new shape: an int or a tuple of ints, one of which may be -1.
        order: `'C'` (row-major, the default) or `'F'` (column-major) reading and writing order.
        newshape: Deprecated name of `shape`.
        copy: Accepted for NumPy compatibility (arrays are immutable).
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array with the data of `a` in the new shape, of `a`'s dtype.

    Examples:
        >>> x = jnp.arange(6)
        >>> jnp.reshape(x, (2, 3))
        Array([[0, 1, 2],
               [3, 4, 5]], dtype=int32)
        >>> jnp.reshape(x, (3, -1))
        Array([[0, 1],
               [2, 3],
               [4, 5]], dtype=int32)
        >>> jnp.reshape(x, (2, 3), order="F")
        Array([[0, 2, 4],
               [1, 3, 5]], dtype=int32)

    See also:
        `ravel`, `Array.reshape`, `expand_dims`, `squeeze`.
    """
    if shape is None:
        shape = newshape
    if shape is None:
        raise FtransTypeError("reshape: a shape is required")
    x = _operand("reshape", a)
    old = _shp(x)
    new = _compute_newshape("reshape", old, shape)
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("reshape", out_sharding, lambda: reshape(x, new, order), (x,), new)
    if order == "F":
        xt = transpose(x)
        return transpose(reshape(xt, new[::-1]))
    if order != "C":
        raise NotImplementedError(f"reshape: order={order!r} is not supported (use 'C' or 'F')")
    if new == old:
        return x
    return S.reshape_p.bind(x, new_sizes=new, dimensions=None)


def _method_reshape(a: Any, *args: Any, order: str = "C", **kw: Any) -> Any:
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` both work, as in NumPy."""
    if len(args) == 1:
        return reshape(a, args[0], order=order, **kw)
    if not args:
        return reshape(a, order=order, **kw)
    return reshape(a, args, order=order, **kw)


def ravel(a: Any, order: str = "C", *, out_sharding: Any = None) -> Any:
    """Return the elements of an array as a 1-D array.

    `out_sharding` lays the result out, as `reshape`'s does.

    Args:
        a: Input array.
        order: `'C'` (row-major, the default) or `'F'` (column-major).
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        A 1-D array of `a.size` elements, of `a`'s dtype.

    Examples:
        >>> x = jnp.array([[1, 2], [3, 4]])
        >>> jnp.ravel(x)
        Array([1, 2, 3, 4], dtype=int32)
        >>> jnp.ravel(x, order="F")
        Array([1, 3, 2, 4], dtype=int32)

    See also:
        `reshape`, `Array.flatten`.
    """
    x = _operand("ravel", a)
    if order not in ("C", "F"):
        raise NotImplementedError(f"ravel: order={order!r} is not supported (use 'C' or 'F')")
    return reshape(x, (math.prod(_shp(x)),), order=order, out_sharding=out_sharding)


def _method_flatten(a: Any, order: str = "C") -> Any:
    """``x.flatten()``: JAX has no ``jnp.flatten``; the method is ``ravel``."""
    return ravel(a, order)


def transpose(a: Any, axes: Any = None) -> Any:
    """Permute the axes of an array (reverse them by default).

    Negative axes are allowed. Like all ftrans arrays, the result is a new array, not a view.

    Args:
        a: Input array.
        axes: Optional permutation of `range(a.ndim)`; by default the axes are reversed.
    Returns:
        An array with the permuted shape, of `a`'s dtype.

    Examples:
        >>> x = jnp.arange(6).reshape(2, 3)
        >>> jnp.transpose(x)
        Array([[0, 3],
               [1, 4],
               [2, 5]], dtype=int32)
        >>> jnp.transpose(jnp.ones((2, 3, 4)), (1, 0, 2)).shape
        (3, 2, 4)

    See also:
        `permute_dims`, `swapaxes`, `moveaxis`, `matrix_transpose`.
    """
    x = _operand("transpose", a)
    nd = len(_shp(x))
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        axes = tuple(axes)
        if len(axes) != nd:
            raise FtransTypeError(
                f"transpose: axes {axes} is not a permutation of the axes of an array of shape {_shp(x)}"
            )
        perm = tuple(canonicalize_axis("transpose", _static_int("transpose", "axes", ax), nd) for ax in axes)
        if len(set(perm)) != nd:
            raise FtransTypeError(
                f"transpose: axes {axes} is not a permutation of the axes of an array of shape {_shp(x)}"
            )
    if perm == tuple(range(nd)):
        return x
    return S.transpose_p.bind(x, permutation=perm)


def _method_transpose(a: Any, *args: Any) -> Any:
    """``x.transpose(1, 0)``, ``x.transpose((1, 0))`` and ``x.transpose()``."""
    if not args:
        return transpose(a)
    if len(args) == 1 and (args[0] is None or isinstance(args[0], (tuple, list))):
        return transpose(a, args[0])
    return transpose(a, args)


def permute_dims(a: Any, /, axes: tuple[int, ...]) -> Any:
    """Permute the axes of an array (the array-API name of `transpose`).

    Args:
        a: Input array.
        axes: A permutation of `range(a.ndim)`.
    Returns:
        An array with the permuted shape, of `a`'s dtype.

    Examples:
        >>> jnp.permute_dims(jnp.ones((2, 3, 4)), (2, 0, 1)).shape
        (4, 2, 3)

    See also:
        `transpose`.
    """
    return transpose(a, axes)


def matrix_transpose(x: Any, /) -> Any:
    """Swap the last two axes of an array (a stack of matrices).

    Args:
        x: Array with at least 2 dimensions.
    Returns:
        An array of `x`'s dtype whose last two axes are exchanged.

    Examples:
        >>> x = jnp.arange(6).reshape(1, 2, 3)
        >>> jnp.matrix_transpose(x)
        Array([[[0, 3],
                [1, 4],
                [2, 5]]], dtype=int32)

    See also:
        `transpose`, `swapaxes`.
    """
    xx = _operand("matrix_transpose", x)
    if len(_shp(xx)) < 2:
        raise FtransValueError(f"matrix_transpose: needs at least 2 dimensions, got shape {_shp(xx)}")
    return swapaxes(xx, -1, -2)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    """Exchange two axes of an array.

    Args:
        a: Input array.
        axis1: First axis.
        axis2: Second axis.
    Returns:
        An array of `a`'s dtype with `axis1` and `axis2` exchanged.

    Examples:
        >>> jnp.swapaxes(jnp.ones((2, 3, 4)), 0, 2).shape
        (4, 3, 2)

    See also:
        `moveaxis`, `transpose`.
    """
    x = _operand("swapaxes", a)
    nd = len(_shp(x))
    i = canonicalize_axis("swapaxes", _static_int("swapaxes", "axis1", axis1), nd)
    j = canonicalize_axis("swapaxes", _static_int("swapaxes", "axis2", axis2), nd)
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    """Move axes of an array to new positions, keeping the others in their order.

    Args:
        a: Input array.
        source: Axis or sequence of axes to move.
        destination: Their positions in the result (as many as `source`).
    Returns:
        An array of `a`'s dtype with the axes moved.

    Examples:
        >>> x = jnp.ones((2, 3, 4))
        >>> jnp.moveaxis(x, 0, -1).shape
        (3, 4, 2)
        >>> jnp.moveaxis(x, [0, 1], [2, 0]).shape
        (3, 4, 2)

    See also:
        `rollaxis`, `swapaxes`, `transpose`.
    """
    x = _operand("moveaxis", a)
    nd = len(_shp(x))
    src = _axis_seq(source)
    dst = _axis_seq(destination)
    if len(src) != len(dst):
        raise FtransValueError(
            f"moveaxis: source {tuple(src)} and destination {tuple(dst)} need the same number of elements"
        )
    src = _axes_tuple("moveaxis", src, nd)
    dst = _axes_tuple("moveaxis", dst, nd)
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def expand_dims(a: Any, axis: Any) -> Any:
    """Insert size-1 axes into the shape of an array.

    The axes are positions in the result.

    Args:
        a: Input array.
        axis: Position or tuple of positions (in the result) of the new axes.
    Returns:
        An array of `a`'s dtype with `a.ndim + len(axis)` dimensions.

    Examples:
        >>> x = jnp.array([1, 2, 3])
        >>> jnp.expand_dims(x, 0)
        Array([[1, 2, 3]], dtype=int32)
        >>> jnp.expand_dims(x, (0, 2)).shape
        (1, 3, 1)

    See also:
        `squeeze`, `reshape`.
    """
    x = _operand("expand_dims", a)
    axis = _axis_seq(axis)
    out_nd = len(_shp(x)) + len(axis)
    dims = sorted(_axes_tuple("expand_dims", axis, out_nd))
    new = list(_shp(x))
    for d in dims:
        new.insert(d, 1)
    return S.reshape_p.bind(x, new_sizes=tuple(new), dimensions=None)


def squeeze(a: Any, axis: Any = None) -> Any:
    """Remove size-1 axes from an array.

    Named axes must have size 1.

    Args:
        a: Input array.
        axis: Axis or tuple of axes to remove; by default every size-1 axis.
    Returns:
        An array of `a`'s dtype without those axes.

    Examples:
        >>> x = jnp.ones((1, 3, 1))
        >>> jnp.squeeze(x).shape
        (3,)
        >>> jnp.squeeze(x, axis=2).shape
        (1, 3)

    See also:
        `expand_dims`.
    """
    x = _operand("squeeze", a)
    shp = _shp(x)
    if axis is None:
        if any(isinstance(d, DimExpr) for d in shp):  # a symbolic size may or may not be 1
            raise FtransValueError(f"jnp.squeeze with axis=None is not supported with shape polymorphism (the array "
                                   f"has shape {shp}): name the axes to squeeze")
        dims = tuple(i for i, d in enumerate(shp) if d == 1)
    else:
        dims = _axes_tuple("squeeze", axis, len(shp))
        bad = [d for d in dims if shp[d] != 1]
        if bad:
            raise FtransValueError(  # (JAX's words, then which axis)
                f"cannot select an axis to squeeze out which has size not equal to one, got shape={shp} and "
                f"dimensions={dims} (axis {bad[0]} of size {shp[bad[0]]})")
    if not dims:
        return x
    return S.squeeze_p.bind(x, dimensions=dims)


# ---------------------------------------------------------------- broadcasting
def _shape_tuple(name: str, shape: Any) -> tuple[int, ...]:
    seq = index_seq(shape)
    dims = [concrete_or_error(d, f"{name}: the shape") for d in seq]
    try:
        out = tuple(as_dim(d) for d in dims)
    except TypeError:
        raise FtransTypeError(f"{name}: the shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise FtransValueError(f"{name}: shape {out} has a negative dimension")
    return out


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """Compute the broadcast of several shapes, with NumPy's rules.

    Args:
        *shapes: Shapes (tuples of ints, or ints).
    Returns:
        The broadcast shape, a tuple of ints.

    Examples:
        >>> jnp.broadcast_shapes((2, 1), (3,), (1, 1))
        (2, 3)

    See also:
        `broadcast_to`, `broadcast_arrays`.
    """
    tuples = [_shape_tuple("broadcast_shapes", s) for s in shapes]
    if not tuples:
        return ()
    nd = max(len(s) for s in tuples)
    out = [1] * nd
    for s in tuples:
        for i, d in enumerate(s, nd - len(s)):
            if d == out[i] or d == 1:
                continue
            if out[i] != 1:
                raise FtransValueError(f"broadcast_shapes: incompatible shapes for broadcasting: {tuples}")
            out[i] = d
    return tuple(out)


def broadcast_to(array: Any, shape: Any, *, out_sharding: Any = None) -> Any:
    """Broadcast an array to a new shape.

    NumPy's broadcasting rules apply: `shape` cannot have fewer axes than the input. `out_sharding` lays the
    result out (its sharding type over Explicit mesh axes).

    Args:
        array: Input array.
        shape: Target shape.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array of shape `shape` and `array`'s dtype.

    Examples:
        >>> jnp.broadcast_to(jnp.array([1, 2, 3]), (2, 3))
        Array([[1, 2, 3],
               [1, 2, 3]], dtype=int32)

    See also:
        `broadcast_arrays`, `broadcast_shapes`.
    """
    x = _operand("broadcast_to", array)
    old, new = _shp(x), _shape_tuple("broadcast_to", shape)
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("broadcast_to", out_sharding, lambda: broadcast_to(x, new), (x,), new)
    if old == new:
        return x
    lead = len(new) - len(old)
    if lead < 0:
        raise FtransValueError(
            f"broadcast_to: cannot broadcast an array of shape {old} to a shape with fewer dimensions, {new}"
        )
    if any(d not in (1, new[lead + i]) for i, d in enumerate(old)):
        raise FtransValueError(f"broadcast_to: incompatible shapes for broadcasting: {old} to {new}")
    return S.broadcast_in_dim_p.bind(x, shape=new, broadcast_dimensions=tuple(range(lead, len(new))))


def broadcast_arrays(*args: Any) -> list:
    """Broadcast several arrays against each other.

    Dtypes are not changed.

    Args:
        *args: Arrays (or scalars) to broadcast.
    Returns:
        A list of arrays, all of the common broadcast shape.

    Examples:
        >>> a, b = jnp.broadcast_arrays(jnp.array([1, 2, 3]), jnp.array([[10], [20]]))
        >>> a
        Array([[1, 2, 3],
               [1, 2, 3]], dtype=int32)
        >>> b.shape
        (2, 3)

    See also:
        `broadcast_to`, `broadcast_shapes`.
    """
    ops = [_operand("broadcast_arrays", a) for a in args]
    shape_ = broadcast_shapes(*[_shp(o) for o in ops]) if ops else ()
    return [broadcast_to(o, shape_) for o in ops]


# ---------------------------------------------------------------- joining
def _concatenate_array(x: Any, axis: Any, dtype: np.dtype | None) -> Any:
    """``concatenate`` of the rows of one array: a transpose and a reshape."""
    shp = _shp(x)
    if len(shp) < 2:
        raise FtransValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    if axis is None:
        out = ravel(x)
    else:
        ax = canonicalize_axis("concatenate", _static_int("concatenate", "axis", axis), len(shp) - 1)
        moved = moveaxis(x, 0, ax)
        rest = shp[1:]
        out = reshape(moved, rest[:ax] + (shp[0] * rest[ax],) + rest[ax + 1:])
    return _retype(out, dtype) if dtype is not None else out


def concatenate(arrays: Any, axis: int | None = 0, dtype: Any = None) -> Any:
    """Join a sequence of arrays along an existing axis.

    Dtypes are promoted with JAX's rules. `axis=None` flattens the inputs first.

    Args:
        arrays: Sequence of arrays with the same shape except along `axis`.
        axis: Axis to join along (default 0), or None.
        dtype: Optional dtype of the result.
    Returns:
        The joined array.

    Examples:
        >>> a = jnp.array([[1, 2], [3, 4]])
        >>> jnp.concatenate([a, jnp.array([[5, 6]])])
        Array([[1, 2],
               [3, 4],
               [5, 6]], dtype=int32)
        >>> jnp.concatenate([a, a], axis=1)
        Array([[1, 2, 1, 2],
               [3, 4, 3, 4]], dtype=int32)
        >>> jnp.concatenate([a, jnp.array([7.5])], axis=None)
        Array([1. , 2. , 3. , 4. , 7.5], dtype=float32)

    See also:
        `concat`, `stack`, `hstack`, `vstack`, `block`.
    """
    d = _dtype_arg("concatenate", dtype)
    if isinstance(arrays, (Array, Tracer, np.ndarray)):
        return _concatenate_array(as_operand(arrays), axis, d)
    arrays = _as_list("concatenate", arrays)
    if not arrays:
        raise FtransValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        return concatenate([ravel(_operand("concatenate", a)) for a in arrays], 0, dtype)
    ops = _promote("concatenate", arrays)
    if d is not None:
        ops = [_retype(o, d) for o in ops]
    shapes = [_shp(o) for o in ops]
    nd = len(shapes[0])
    if nd == 0:
        raise FtransValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    if any(len(s) != nd for s in shapes):
        raise FtransTypeError(
            f"concatenate: arrays must have the same number of dimensions, got shapes {shapes}"
        )
    ax = canonicalize_axis("concatenate", _static_int("concatenate", "axis", axis), nd)
    if any(s[:ax] + s[ax + 1:] != shapes[0][:ax] + shapes[0][ax + 1:] for s in shapes):
        raise FtransTypeError(
            f"concatenate: all dimensions except axis {ax} must match, got shapes {shapes}"
        )
    return _concat(ops, ax)


def concat(arrays: Any, /, *, axis: int | None = 0) -> Any:
    """Join a sequence of arrays along an existing axis (the array-API name of `concatenate`).

    Args:
        arrays: Sequence of arrays with the same shape except along `axis`.
        axis: Axis to join along (default 0), or None to flatten first.
    Returns:
        The joined array, in the promoted dtype.

    Examples:
        >>> jnp.concat([jnp.array([1, 2]), jnp.array([3])])
        Array([1, 2, 3], dtype=int32)

    See also:
        `concatenate`.
    """
    return concatenate(arrays, axis=axis)


def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    """Append values to the end of an array.

    It is `concatenate` of the two arrays; both are flattened when `axis` is None.

    Args:
        arr: Input array.
        values: Values to append; with an `axis`, of matching shape except along it.
        axis: Axis to append along, or None to flatten both.
    Returns:
        A new array with `values` after `arr`.

    Examples:
        >>> jnp.append(jnp.array([1, 2]), jnp.array([[3, 4]]))
        Array([1, 2, 3, 4], dtype=int32)
        >>> jnp.append(jnp.array([[1, 2]]), jnp.array([[3, 4]]), axis=0)
        Array([[1, 2],
               [3, 4]], dtype=int32)

    See also:
        `concatenate`, `insert`.
    """
    if axis is None:
        return concatenate([ravel(_operand("append", arr)), ravel(_operand("append", values))], 0)
    return concatenate([arr, values], axis=axis)


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    """Join arrays of one shape along a new axis.

    Args:
        arrays: Sequence of arrays with the same shape.
        axis: Position of the new axis in the result.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        dtype: Optional dtype of the result.
    Returns:
        An array with one more dimension than the inputs.

    Examples:
        >>> a, b = jnp.array([1, 2]), jnp.array([3, 4])
        >>> jnp.stack([a, b])
        Array([[1, 2],
               [3, 4]], dtype=int32)
        >>> jnp.stack([a, b], axis=1)
        Array([[1, 3],
               [2, 4]], dtype=int32)

    See also:
        `concatenate`, `unstack`, `vstack`.
    """
    if out is not None:
        raise NotImplementedError("stack: the 'out' argument is not supported (arrays are immutable)")
    d = _dtype_arg("stack", dtype)
    if isinstance(arrays, (Array, Tracer, np.ndarray)):
        x = as_operand(arrays)
        nd = len(_shp(x))
        if nd == 0:
            raise FtransValueError("stack: a 0-d array is not a sequence of arrays")
        res = moveaxis(x, 0, canonicalize_axis("stack", _static_int("stack", "axis", axis), nd))
        return _retype(res, d) if d is not None else res
    arrays = _as_list("stack", arrays)
    if not arrays:
        raise FtransValueError("stack: need at least one array to stack")
    ops = _promote("stack", arrays)
    if d is not None:
        ops = [_retype(o, d) for o in ops]
    shapes = [_shp(o) for o in ops]
    if any(s != shapes[0] for s in shapes):
        raise FtransValueError(f"stack: all input arrays must have the same shape, got {shapes}")
    ax = canonicalize_axis("stack", _static_int("stack", "axis", axis), len(shapes[0]) + 1)
    return _concat([expand_dims(o, ax) for o in ops], ax)


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    """Split an array into its slices along an axis.

    Args:
        x: Input array.
        axis: The axis to split along.
    Returns:
        A tuple of `x.shape[axis]` arrays, each without that axis.

    Examples:
        >>> jnp.unstack(jnp.array([[1, 2], [3, 4]]))
        (Array([1, 2], dtype=int32), Array([3, 4], dtype=int32))
        >>> jnp.unstack(jnp.array([[1, 2], [3, 4]]), axis=1)
        (Array([1, 3], dtype=int32), Array([2, 4], dtype=int32))

    See also:
        `stack`, `split`.
    """
    xx = _operand("unstack", x)
    shp = _shp(xx)
    if not shp:
        raise FtransValueError("unstack: the input must be at least 1-D")
    ax = canonicalize_axis("unstack", _static_int("unstack", "axis", axis), len(shp))
    from ftrans.core.sharding_rules import operand_type

    typed = operand_type(xx)
    if typed is not None and typed.typed_sharding.spec[ax] is not None:  # (JAX's unstack primitive's check)
        from ftrans.errors import ShardingTypeError

        raise ShardingTypeError(f"unstack operand cannot be sharded on the unstacking axis {ax}. Got operand "
                                f"type={typed.str_short()}; reshard it first")
    return tuple(
        S.squeeze_p.bind(_slice_axis(xx, ax, i, i + 1), dimensions=(ax,)) for i in range(shp[ax])
    )


def _stack_family(name: str, tup: Any, lift: Any, axis_of: Any, dtype: Any) -> Any:
    arrs = [lift(_operand(name, a)) for a in _as_list(name, tup)]
    if not arrs:
        raise FtransValueError(f"{name}: need at least one array")
    return concatenate(arrs, axis=axis_of(arrs[0]), dtype=dtype)


def hstack(tup: Any, dtype: Any = None) -> Any:
    """Join arrays horizontally (column-wise).

    This is concatenation along axis 1, or axis 0 for 1-D inputs.

    Args:
        tup: Sequence of arrays.
        dtype: Optional dtype of the result.
    Returns:
        The joined array.

    Examples:
        >>> jnp.hstack([jnp.array([1, 2]), jnp.array([3])])
        Array([1, 2, 3], dtype=int32)
        >>> jnp.hstack([jnp.ones((2, 1)), jnp.zeros((2, 2))])
        Array([[1., 0., 0.],
               [1., 0., 0.]], dtype=float32)

    See also:
        `vstack`, `concatenate`, `column_stack`.
    """
    return _stack_family("hstack", tup, atleast_1d, lambda a: 0 if len(_shp(a)) == 1 else 1, dtype)


def vstack(tup: Any, dtype: Any = None) -> Any:
    """Join arrays vertically (row-wise).

    This is concatenation along axis 0 after making every input at least 2-D.

    Args:
        tup: Sequence of arrays.
        dtype: Optional dtype of the result.
    Returns:
        The joined array, at least 2-D.

    Examples:
        >>> jnp.vstack([jnp.array([1, 2]), jnp.array([3, 4])])
        Array([[1, 2],
               [3, 4]], dtype=int32)

    See also:
        `hstack`, `stack`, `concatenate`.
    """
    return _stack_family("vstack", tup, atleast_2d, lambda a: 0, dtype)


def dstack(tup: Any, dtype: Any = None) -> Any:
    """Join arrays along the third axis.

    Every input is made at least 3-D first.

    Args:
        tup: Sequence of arrays.
        dtype: Optional dtype of the result.
    Returns:
        The joined array, at least 3-D.

    Examples:
        >>> jnp.dstack([jnp.array([1, 2]), jnp.array([3, 4])])
        Array([[[1, 3],
                [2, 4]]], dtype=int32)

    See also:
        `hstack`, `vstack`, `concatenate`.
    """
    return _stack_family("dstack", tup, atleast_3d, lambda a: 2, dtype)


def column_stack(tup: Any) -> Any:
    """Stack 1-D arrays as the columns of a 2-D array.

    1-D inputs become columns; 2-D inputs are joined as they are, along axis 1.

    Args:
        tup: Sequence of 1-D or 2-D arrays.
    Returns:
        A 2-D array.

    Examples:
        >>> jnp.column_stack([jnp.array([1, 2]), jnp.array([3, 4])])
        Array([[1, 3],
               [2, 4]], dtype=int32)

    See also:
        `hstack`, `stack`.
    """

    def as_column(a: Any) -> Any:
        s = _shp(a)
        return reshape(a, (math.prod(s), 1)) if len(s) < 2 else a

    return _stack_family("column_stack", tup, as_column, lambda a: 1, None)


# ---------------------------------------------------------------- splitting
def _split_sizes(name: str, n: int, ios: Any, equal: bool) -> list[int]:
    ios = maybe_concrete(ios)
    if isinstance(ios, (list, tuple)) or (isinstance(ios, (np.ndarray, Array, Tracer)) and np.ndim(
            np.empty(shape_of(ios), np.int8)) > 0):
        if isinstance(ios, Tracer):
            concrete_or_error(ios, f"{name}: the split indices")
        points = [0] + [i if isinstance(i, DimExpr) else _static_int(name, "indices_or_sections", i)
                        for i in ios] + [n]
        sizes = [b - a for a, b in zip(points, points[1:])]
        if any(s < 0 for s in sizes):
            raise FtransValueError(
                f"{name}: split indices {points[1:-1]} must be non-decreasing and within the axis "
                f"of size {n} (section sizes would be {sizes})"
            )
        return sizes
    if isinstance(ios, DimExpr):
        raise FtransValueError(f"jax.numpy.{name} with a symbolic number of sections is not supported")
    k = _static_int(name, "indices_or_sections", ios)
    if k <= 0:
        raise FtransValueError(f"{name}: the number of sections must be larger than 0, got {k}")
    if equal and n % k:
        raise FtransValueError(
            f"{name}: array split does not result in an equal division: an axis of size {n} "
            f"into {k} sections (rest {n % k}); use jnp.array_split for unequal sections"
        )
    q, r = divmod(n, k)
    return [q + 1] * r + [q] * (k - r)


def _split(name: str, ary: Any, ios: Any, axis: int, equal: bool) -> list:
    x = _operand(name, ary)
    shp = _shp(x)
    ax = canonicalize_axis(name, _static_int(name, "axis", axis), len(shp))
    sizes = _split_sizes(name, shp[ax], ios, equal)
    out, start = [], 0
    for s in sizes:
        out.append(_slice_axis(x, ax, start, start + s) if len(sizes) > 1 else x)
        start += s
    return out


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split an array into sub-arrays along an axis.

    The sections must be static: an int that divides the axis, or the indices where to split.

    Args:
        ary: Input array.
        indices_or_sections: Number of equal sections, or a sequence of split indices.
        axis: The axis to split along.
    Returns:
        A list of arrays.

    Examples:
        >>> x = jnp.arange(6)
        >>> jnp.split(x, 3)
        [Array([0, 1], dtype=int32), Array([2, 3], dtype=int32), Array([4, 5], dtype=int32)]
        >>> jnp.split(x, [1, 4])
        [Array([0], dtype=int32), Array([1, 2, 3], dtype=int32), Array([4, 5], dtype=int32)]

    See also:
        `array_split`, `hsplit`, `vsplit`, `unstack`.
    """
    return _split("split", ary, indices_or_sections, axis, equal=True)


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split an array into sub-arrays, allowing unequal sections.

    Like `split`, but `n` sections need not divide the axis: the first ones are one element longer.

    Args:
        ary: Input array.
        indices_or_sections: Number of sections, or a sequence of split indices.
        axis: The axis to split along.
    Returns:
        A list of arrays.

    Examples:
        >>> jnp.array_split(jnp.arange(5), 3)
        [Array([0, 1], dtype=int32), Array([2, 3], dtype=int32), Array([4], dtype=int32)]

    See also:
        `split`.
    """
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


def hsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split an array horizontally (along axis 1, or axis 0 for 1-D arrays).

    Args:
        ary: Input array.
        indices_or_sections: Number of equal sections, or a sequence of split indices.
    Returns:
        A list of arrays.

    Examples:
        >>> jnp.hsplit(jnp.arange(8).reshape(2, 4), 2)
        [Array([[0, 1],
               [4, 5]], dtype=int32), Array([[2, 3],
               [6, 7]], dtype=int32)]

    See also:
        `split`, `vsplit`.
    """
    x = _operand("hsplit", ary)
    nd = len(_shp(x))
    if nd == 0:
        raise FtransValueError("hsplit: the array must be at least 1-D, got a 0-d array")
    return _split("hsplit", x, indices_or_sections, 1 if nd > 1 else 0, equal=True)


def vsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split an array vertically (along axis 0).

    Args:
        ary: Input array with at least 2 dimensions.
        indices_or_sections: Number of equal sections, or a sequence of split indices.
    Returns:
        A list of arrays.

    Examples:
        >>> jnp.vsplit(jnp.arange(4).reshape(2, 2), 2)
        [Array([[0, 1]], dtype=int32), Array([[2, 3]], dtype=int32)]

    See also:
        `split`, `hsplit`.
    """
    return _split("vsplit", ary, indices_or_sections, 0, equal=True)


def dsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split an array along the third axis.

    Args:
        ary: Input array with at least 3 dimensions.
        indices_or_sections: Number of equal sections, or a sequence of split indices.
    Returns:
        A list of arrays.

    Examples:
        >>> [p.shape for p in jnp.dsplit(jnp.ones((1, 2, 4)), 2)]
        [(1, 2, 2), (1, 2, 2)]

    See also:
        `split`.
    """
    return _split("dsplit", ary, indices_or_sections, 2, equal=True)


# ---------------------------------------------------------------- tile / repeat
def tile(A: Any, reps: Any) -> Any:  # noqa: N803 - NumPy's name
    """Build an array by repeating an array a number of times per axis.

    It is a broadcast between reshapes.

    Args:
        A: Input array.
        reps: Number of repetitions per axis (an int or a tuple).
    Returns:
        The tiled array, of `A`'s dtype.

    Examples:
        >>> jnp.tile(jnp.array([1, 2]), 2)
        Array([1, 2, 1, 2], dtype=int32)
        >>> jnp.tile(jnp.array([1, 2]), (2, 1))
        Array([[1, 2],
               [1, 2]], dtype=int32)

    See also:
        `repeat`, `broadcast_to`.
    """
    x = _operand("tile", A)
    seq = _axis_seq(reps)  # (as JAX: any iterable of integers, a NumPy or ftrans array of them too)
    r = tuple(v if isinstance(v, DimExpr) else _static_int("tile", "reps", v) for v in seq)
    if any(v < 0 for v in r):
        raise FtransValueError(f"tile: reps {r} must be non-negative")
    a_shape = (1,) * (len(r) - len(_shp(x))) + _shp(x)
    r = (1,) * (len(a_shape) - len(r)) + r
    x = reshape(x, a_shape)
    if all(v == 1 for v in r):
        return x
    from ftrans.core.sharding_rules import operand_type

    typed = operand_type(x)
    if typed is not None:  # (JAX's tile primitive's check)
        for i, (v, e) in enumerate(zip(r, typed.typed_sharding.spec)):
            if v != 1 and e is not None:
                from ftrans.errors import ShardingTypeError

                raise ShardingTypeError(f"Operand cannot be sharded on dimension {i} when the tiling is non-trivial. "
                                        f"Got input type: {typed.str_short()} with reps: {r}")
    wide = tuple(v for pair in zip(r, a_shape) for v in pair)
    b = S.broadcast_in_dim_p.bind(x, shape=wide, broadcast_dimensions=tuple(range(1, 2 * len(a_shape), 2)))
    return reshape(b, tuple(v * s for v, s in zip(r, a_shape)))


def _repeat_counts(name: str, repeats: Any, n: int, total: int | None) -> np.ndarray:
    repeats = maybe_concrete(repeats)  # a concrete autodiff value (outside jit) decides the shape
    if isinstance(repeats, Tracer):
        if total is not None:
            raise NotImplementedError(
                f"{name}: traced repeats (with total_repeat_length) are not supported; pass static repeats"
            )
        concrete_or_error(repeats, f"{name}: argument 'repeats'")
    r = np.asarray(concrete_or_error(repeats, f"{name}: argument 'repeats'"))
    if r.dtype.kind not in "iub":
        raise FtransTypeError(f"{name}: repeats must be integers, got dtype {r.dtype}")
    if r.ndim > 1 or (r.ndim == 1 and r.shape[0] not in (1, n)):
        raise FtransValueError(
            f"{name}: repeats of shape {r.shape} do not match the axis of size {n} (need a scalar or ({n},))"
        )
    counts = np.broadcast_to(r.astype(np.int64), (n,))
    if (counts < 0).any():
        raise FtransValueError(f"{name}: repeats must be non-negative, got {r.tolist()}")
    if total is not None:
        idx = np.repeat(np.arange(n), counts)[:total]
        if len(idx) < total:
            if n == 0:  # nothing to repeat: the axis stays empty whatever the total, as in JAX
                return counts
            idx = np.concatenate([idx, np.full(total - len(idx), n - 1)])
        counts = np.bincount(idx, minlength=n)
    return counts


def _repeat_traced(x: Any, repeats: Any, ax: int, n: int, total: int) -> Any:
    """Traced ``repeats`` with a static ``total_repeat_length``: mark where each element's run starts
    in a length-``total`` buffer, and a cumulative sum of the marks gathers the elements (runs past
    ``total`` are cut, a short total is filled with the last element), as JAX does."""
    from ftrans.numpy._creation import zeros
    from ftrans.numpy._indexing import take
    from ftrans.numpy._reductions import cumsum

    if not dtypes.is_int(dtype_weak(repeats)[0]) and dtype_weak(repeats)[0] != np.bool_:
        raise FtransTypeError(f"repeat: repeats must be integers, got dtype {dtype_weak(repeats)[0]}")
    r = ravel(repeats)
    if _shp(r)[0] not in (1, n):
        raise FtransValueError(
            f"repeat: repeats of shape {_shp(repeats)} do not match the axis of size {n} (need a scalar or ({n},))")
    if total == 0 or n == 0:
        return _slice_axis(x, ax, 0, 0)
    r = broadcast_to(r, (n,))
    starts = cumsum(S.concatenate_p.bind(zeros((1,), dtype_weak(r)[0]), _slice_axis(r, 0, 0, n - 1), dimension=0))
    marks = zeros((total,), np.int32).at[starts].add(1)
    idx = E.sub_p.bind(cumsum(marks), Array._new(np.asarray(1, np.int32), False))
    return take(x, idx, axis=ax)


def repeat(a: Any, repeats: Any, axis: int | None = None, *, total_repeat_length: int | None = None,
           out_sharding: Any = None) -> Any:
    """Repeat each element of an array.

    Without `total_repeat_length` the counts must be static (a scalar, or one per element along `axis`). Runs
    of elements with the same count become one broadcast-and-reshape, so a uniform count costs two operations
    whatever the size. `out_sharding` lays the result out.

    Args:
        a: Input array.
        repeats: Number of repetitions: an int, or an array with one count per element along `axis`.
        axis: The axis along which to repeat; by default the flattened array.
        total_repeat_length: The static length of the result along `axis`, which lets `repeats` be traced (as
            in JAX).
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        An array with the repeated elements.

    Examples:
        >>> jnp.repeat(jnp.array([1, 2]), 3)
        Array([1, 1, 1, 2, 2, 2], dtype=int32)
        >>> jnp.repeat(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 2]), axis=0)
        Array([[1, 2],
               [3, 4],
               [3, 4]], dtype=int32)

    See also:
        `tile`.
    """
    if out_sharding is not None:  # (the intermediates typed leniently, the result laid out as asked)
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("repeat", out_sharding, lambda: repeat(
            a, repeats, axis, total_repeat_length=total_repeat_length), (a,))
    x = _operand("repeat", a)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = canonicalize_axis("repeat", _static_int("repeat", "axis", axis), len(_shp(x)))
    total = None if total_repeat_length is None else _static_int("repeat", "total_repeat_length",
                                                                  total_repeat_length)
    n = _shp(x)[ax]
    if isinstance(repeats, DimExpr) or (isinstance(n, DimExpr) and isinstance(repeats, (int, np.integer))):
        # shape polymorphism: a scalar count (symbolic, or of an axis of symbolic size) is one broadcast
        if isinstance(repeats, DimExpr) and total is not None:
            raise FtransValueError("jnp.repeat with a non-constant `repeats` is supported only when "
                                   "`total_repeat_length` is None")
        if total is None:
            return _repeat_each(x, ax, repeats if isinstance(repeats, DimExpr) else int(repeats))
    if total is not None and isinstance(maybe_concrete(repeats), Tracer):
        return _repeat_traced(x, repeats, ax, n, total)
    counts = _repeat_counts("repeat", repeats, n, total)
    if n and (counts == counts[0]).all():
        out = _repeat_each(x, ax, int(counts[0]))
        if out is x and _trace._mesh_eager:  # (no operation ran: placed on the mesh in context, as one would be)
            from ftrans.numpy._creation import _on_context_mesh

            out = _on_context_mesh(out, True)
        return out
    parts, start = [], 0
    while start < n:
        stop = start + 1
        while stop < n and counts[stop] == counts[start]:
            stop += 1
        if counts[start]:
            parts.append(_repeat_each(_slice_axis(x, ax, start, stop), ax, int(counts[start])))
        start = stop
    return _concat(parts, ax) if parts else _slice_axis(x, ax, 0, 0)


# ---------------------------------------------------------------- flips and rolls
def flip(m: Any, axis: Any = None) -> Any:
    """Reverse the order of elements along the given axes.

    Args:
        m: Input array.
        axis: Axis or tuple of axes to reverse; by default all of them.
    Returns:
        An array of `m`'s shape and dtype.

    Examples:
        >>> x = jnp.array([[1, 2], [3, 4]])
        >>> jnp.flip(x)
        Array([[4, 3],
               [2, 1]], dtype=int32)
        >>> jnp.flip(x, axis=1)
        Array([[2, 1],
               [4, 3]], dtype=int32)

    See also:
        `fliplr`, `flipud`, `rot90`.
    """
    x = _operand("flip", m)
    nd = len(_shp(x))
    axes = tuple(range(nd)) if axis is None else _axes_tuple("flip", axis, nd)
    return _rev(x, axes)


def fliplr(m: Any) -> Any:
    """Reverse the order of elements along axis 1 (left/right).

    Args:
        m: Array with at least 2 dimensions.
    Returns:
        An array of `m`'s shape and dtype.

    Examples:
        >>> jnp.fliplr(jnp.array([[1, 2], [3, 4]]))
        Array([[2, 1],
               [4, 3]], dtype=int32)

    See also:
        `flipud`, `flip`.
    """
    return flip(m, 1)


def flipud(m: Any) -> Any:
    """Reverse the order of elements along axis 0 (up/down).

    Args:
        m: Array with at least 1 dimension.
    Returns:
        An array of `m`'s shape and dtype.

    Examples:
        >>> jnp.flipud(jnp.array([[1, 2], [3, 4]]))
        Array([[3, 4],
               [1, 2]], dtype=int32)

    See also:
        `fliplr`, `flip`.
    """
    return flip(m, 0)


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """Rotate an array by 90 degrees in the plane of two axes.

    The rotation goes from the first axis towards the second, `k` times.

    Args:
        m: Array with at least 2 dimensions.
        k: Number of quarter turns (may be negative).
        axes: The two axes of the plane of rotation.
    Returns:
        An array of `m`'s dtype (with the two axis lengths exchanged for odd `k`).

    Examples:
        >>> x = jnp.array([[1, 2], [3, 4]])
        >>> jnp.rot90(x)
        Array([[2, 4],
               [1, 3]], dtype=int32)
        >>> jnp.rot90(x, k=2)
        Array([[4, 3],
               [2, 1]], dtype=int32)

    See also:
        `flip`, `transpose`.
    """
    x = _operand("rot90", m)
    nd = len(_shp(x))
    if nd < 2:
        raise FtransValueError(f"rot90: the array must have at least 2 dimensions, got shape {_shp(x)}")
    if len(axes) != 2:
        raise FtransValueError(f"rot90: axes must name exactly two axes, got {axes}")
    a0, a1 = (canonicalize_axis("rot90", _static_int("rot90", "axes", a), nd) for a in axes)
    if a0 == a1:
        raise FtransValueError(f"rot90: axes must be different, got {axes}")
    k = _static_int("rot90", "k", k) % 4
    if k == 0:
        return x
    if k == 2:
        return _rev(x, (a0, a1))
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(_rev(x, (a1,)), perm)
    return _rev(transpose(x, perm), (a1,))


def _roll_static(x: Any, shift: int, axis: int) -> Any:
    shp = _shp(x)
    n = shp[axis]
    if n == 0:
        return x
    i = (-shift) % n  # (JAX's form: x[i:] and x[:i] concatenated)
    if i == 0:
        if not _trace.active_anywhere or _trace.state.eval_only:
            return x  # eagerly the array itself
        # traced, as JAX's: the whole operand sliced and an empty slice concatenated, whose transpose pads with
        # a strong zero (the cotangent of a weakly typed operand is strong)
        whole = S.slice_p.bind(x, start_indices=(0,) * len(shp), limit_indices=tuple(shp), strides=None)
        return S.concatenate_p.bind(whole, _slice_axis(x, axis, 0, 0), dimension=axis)
    return _concat([_slice_axis(x, axis, i, n), _slice_axis(x, axis, 0, i)], axis)


def _roll_traced(x: Any, shift: Any, axis: int) -> Any:
    """Roll by a run-time amount: slice a window out of ``x`` concatenated with itself."""
    shp = _shp(x)
    n = shp[axis]
    if n == 0:
        return x
    d = shift.dtype
    if not dtypes.is_int(d):
        raise FtransTypeError(f"roll: shift must be an integer, got {shift.aval.str_short()}")
    nn = Array._new(np.asarray(n, d), False)
    # start = (-shift) mod n, computed without negative intermediates for unsigned shifts.
    start = E.rem_p.bind(E.sub_p.bind(nn, E.rem_p.bind(shift, nn)), nn)
    doubled = S.concatenate_p.bind(x, x, dimension=axis)
    zero = Array._new(np.asarray(0, d), False)
    idx = [zero] * len(shp)
    idx[axis] = start
    return S.dynamic_slice_p.bind(doubled, *idx, slice_sizes=shp)


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """Shift elements cyclically along the given axes.

    `shift` may be traced; the axes must be static.

    Args:
        a: Input array.
        shift: Number of places to shift by (an int, or one per axis).
        axis: Axis or tuple of axes; by default the flattened array is rolled and the shape restored.
    Returns:
        An array of `a`'s shape and dtype.

    Examples:
        >>> x = jnp.arange(5)
        >>> jnp.roll(x, 2)
        Array([3, 4, 0, 1, 2], dtype=int32)
        >>> jnp.roll(jnp.arange(6).reshape(2, 3), -1, axis=1)
        Array([[1, 2, 0],
               [4, 5, 3]], dtype=int32)

    See also:
        `rollaxis`.
    """
    x = _operand("roll", a)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), _shp(x))
    nd = len(_shp(x))
    axes = index_seq(axis)
    axes = [canonicalize_axis("roll", _static_int("roll", "axis", ax), nd) for ax in axes]
    shift = maybe_concrete(shift)
    if isinstance(shift, Tracer):
        sshape = _shp(shift)
        if len(sshape) > 1 or (sshape and sshape[0] not in (1, len(axes)) and len(axes) != 1):
            raise FtransValueError(f"roll: shift of shape {sshape} does not match axes {tuple(axes)}")
        shifts = list(unstack(shift)) if sshape else [shift]
    else:
        shifts = np.asarray(concrete_or_error(shift, "roll: argument 'shift'"))
        if shifts.size == 0 and not axes:  # nothing to roll (fftshift with axes=())
            return x
        if shifts.dtype.kind not in "iub":
            raise FtransTypeError(f"roll: shift must be integers, got {shifts.tolist()!r}")
        shifts = [int(s) for s in np.ravel(shifts)]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise FtransValueError(f"roll: {len(shifts)} shifts do not match {len(axes)} axes")
    for s, ax in zip(shifts, axes):
        x = _roll_traced(x, s, ax) if isinstance(s, Tracer) else _roll_static(x, s, ax)
    return x


# ---------------------------------------------------------------- pad
_PAD_KWARGS = {
    "constant": {"constant_values"}, "edge": set(), "wrap": set(), "empty": set(),
    "reflect": {"reflect_type"}, "symmetric": {"reflect_type"}, "linear_ramp": {"end_values"},
    "maximum": {"stat_length"}, "minimum": {"stat_length"}, "mean": {"stat_length"}, "median": {"stat_length"},
}


def _pad_width(pad_width: Any, nd: int) -> list[tuple[int, int]]:
    pw = np.asarray(concrete_or_error(pad_width, "pad: argument 'pad_width'"))
    if pw.dtype == object and any(isinstance(v, DimExpr) for v in pw.reshape(-1)):
        # symbolic widths (shape polymorphism): kept as dimension expressions
        if pw.shape not in ((2,), (1, 2), (nd, 2)):
            raise FtransValueError(f"pad: pad_width of shape {pw.shape} does not fit an array with {nd} dimensions")
        pw = np.broadcast_to(pw, (nd, 2))
        return [tuple(v if isinstance(v, DimExpr) else operator.index(v) for v in pair) for pair in pw]
    if pw.dtype.kind not in "iu" and not (pw.size == 0 and pw.dtype.kind == "f"):
        raise FtransTypeError(f"pad: pad_width must be of integral type, got {pad_width!r}")
    if pw.shape not in ((), (1,), (2,), (1, 2), (nd, 2)):
        raise FtransValueError(
            f"pad: pad_width of shape {pw.shape} does not fit an array with {nd} dimensions; valid shapes "
            f"are ({nd}, 2), (1, 2), (2,), (1,) or ()"
        )
    pw = np.broadcast_to(pw.astype(np.int64), (nd, 2))
    if (pw < 0).any():
        raise FtransValueError(f"pad: pad_width must not contain negative values, got {pad_width!r}")
    return [(int(lo), int(hi)) for lo, hi in pw]


def _pad_value(x: Any, v: Any) -> Any:
    """A rank-0 padding value of ``x``'s dtype and weak type (pad needs them to match)."""
    from ftrans.numpy._creation import retype

    d, w = dtype_weak(x)
    if isinstance(v, (Array, Tracer)) and _shp(v):
        v = reshape(v, ())
    return retype(v, d, w)


def _constant_values(x: Any, cv: Any, nd: int) -> Any:
    """One scalar for every side, or an ``(nd, 2)`` table of scalars."""
    if isinstance(cv, Tracer):
        if not _shp(cv):
            return _pad_value(x, cv)
        table = broadcast_to(reshape(cv, (-1,)) if len(_shp(cv)) == 1 else cv, (nd, 2))
        return [[_pad_value(x, _slice_axis(_slice_axis(table, 0, i, i + 1), 1, j, j + 1)) for j in (0, 1)]
                for i in range(nd)]
    c = np.asarray(concrete_or_error(cv, "pad: constant_values"))
    if c.ndim == 0:
        return _pad_value(x, cv if not isinstance(cv, (list, tuple)) else c[()])
    try:
        c = np.broadcast_to(c, (nd, 2))
    except ValueError:
        raise FtransValueError(f"pad: constant_values of shape {c.shape} do not fit {nd} dimensions") from None
    return [[_pad_value(x, c[i, j]) for j in (0, 1)] for i in range(nd)]


def _pad_constant(x: Any, widths: list, cv: Any) -> Any:
    nd = len(widths)
    vals = _constant_values(x, cv, nd)
    if not isinstance(vals, list):
        if all(w == (0, 0) for w in widths):
            return x
        return S.pad_p.bind(x, vals, padding_config=tuple((lo, hi, 0) for lo, hi in widths))
    # Per-side values: pad one axis at a time, so corners take the later axis's value (as NumPy).
    for ax, (lo, hi) in enumerate(widths):
        for side, amount in ((0, lo), (1, hi)):
            if amount:
                cfg = [(0, 0, 0)] * nd
                cfg[ax] = (amount, 0, 0) if side == 0 else (0, amount, 0)
                x = S.pad_p.bind(x, vals[ax][side], padding_config=tuple(cfg))
    return x


def _pad_index_map(x: Any, widths: list, mode: str) -> Any:
    for ax, (lo, hi) in enumerate(widths):
        n = _shp(x)[ax]
        if not (lo or hi):
            continue
        if n == 0:
            raise FtransValueError(f"pad: cannot apply '{mode}' padding to the empty axis {ax}")
        if any(isinstance(v, DimExpr) for v in (n, lo, hi)):  # symbolic sizes: slices, broadcasts, copies
            x = _pad_index_map_symbolic(x, ax, n, lo, hi, mode)
            continue
        j = np.arange(-lo, n + hi)
        idx = np.clip(j, 0, n - 1) if mode == "edge" else j % n
        x = _take_static(x, ax, idx)
    return x


def _pad_index_map_symbolic(x: Any, ax: int, n: Any, lo: Any, hi: Any, mode: str) -> Any:
    """'edge' or 'wrap' padding of axis ``ax`` where its size or the widths are symbolic: the edge slices
    broadcast, or whole copies of the axis and the remainders' slices (which must come out constant)."""
    shp = _shp(x)
    parts = []
    if mode == "edge":
        for amount, start, stop in ((lo, 0, 1), (None, 0, 0), (hi, n - 1, n)):
            if amount is None:
                parts.append(x)
            elif not (isinstance(amount, int) and amount == 0):
                edge = _slice_axis(x, ax, start, stop)
                parts.append(S.broadcast_in_dim_p.bind(edge, shape=shp[:ax] + (amount,) + shp[ax + 1:],
                                                       broadcast_dimensions=tuple(range(len(shp)))))
    else:
        (lq, lr), (rq, rr) = (lo // n, lo % n), (hi // n, hi % n)
        if lr != 0:
            parts.append(_slice_axis(x, ax, n - lr, n))
        parts += [x] * operator.index(lq + rq + 1)
        if rr != 0:
            parts.append(_slice_axis(x, ax, 0, rr))
    return parts[0] if len(parts) == 1 else S.concatenate_p.bind(*parts, dimension=ax)


def _pairs(name: str, v: Any, nd: int, cast: Any = None) -> np.ndarray:
    """A static ``(nd, 2)`` table from a scalar, ``(before, after)``, ``((before, after),)`` or one pair per axis."""
    a = np.asarray(concrete_or_error(v, f"pad: argument {name!r}"))
    if a.shape not in ((), (1,), (2,), (1, 2), (nd, 2)):
        raise FtransValueError(
            f"pad: {name} of shape {a.shape} does not fit an array with {nd} dimensions; valid shapes "
            f"are ({nd}, 2), (1, 2), (2,), (1,) or ()"
        )
    return np.broadcast_to(a if cast is None else a.astype(cast), (nd, 2))


def _pad_concat(x: Any, before: Any, after: Any, ax: int, lo: int, hi: int) -> Any:
    parts = ([before] if lo else []) + [x] + ([after] if hi else [])
    return x if len(parts) == 1 else S.concatenate_p.bind(*parts, dimension=ax)


def _pad_linear_ramp(x: Any, widths: list, end_values: Any) -> Any:
    """Ramps from ``end_values`` to the edge values (exclusive), as NumPy's 'linear_ramp'."""
    from ftrans.numpy._creation import linspace, retype

    d, w = dtype_weak(x)
    ends = _pairs("end_values", end_values, len(widths))
    for ax, (lo, hi) in enumerate(widths):
        if not (lo or hi):
            continue
        n = _shp(x)[ax]
        if n == 0:
            raise FtransValueError(f"pad: cannot apply 'linear_ramp' padding to the empty axis {ax}")
        ramps = []
        for side, amount in ((0, lo), (1, hi)):
            edge = _slice_axis(x, ax, 0, 1) if side == 0 else _slice_axis(x, ax, n - 1, n)
            edge = reshape(edge, _shp(edge)[:ax] + _shp(edge)[ax + 1:])
            r = retype(linspace(ends[ax, side][()], edge, amount, endpoint=False, dtype=d, axis=ax), d, w)
            ramps.append(_rev(r, (ax,)) if side == 1 else r)
        x = _pad_concat(x, ramps[0], ramps[1], ax, lo, hi)
    return x


def _pad_stats(x: Any, widths: list, mode: str, stat_length: Any) -> Any:
    """Pads with the maximum/minimum/mean/median of the first/last ``stat_length`` elements of each axis."""
    from ftrans.numpy._creation import retype
    from ftrans.numpy._elementwise import round as round_
    from ftrans.numpy._reductions import amax, amin, mean, median

    stat = {"maximum": amax, "minimum": amin, "mean": mean, "median": median}[mode]
    d, w = dtype_weak(x)
    nd = len(widths)
    if stat_length is not None and any(isinstance(v, DimExpr) for v in np.ravel(np.asarray(stat_length, object))):
        a = np.asarray(stat_length, object)  # symbolic lengths: the table kept as objects
        lengths = np.broadcast_to(a, (nd, 2)) if a.shape in ((), (1,), (2,), (1, 2), (nd, 2)) else \
            _pairs("stat_length", stat_length, nd, np.int64)
    else:
        lengths = None if stat_length is None else _pairs("stat_length", stat_length, nd, np.int64)
    for ax, (lo, hi) in enumerate(widths):
        n = _shp(x)[ax]
        if lengths is None:
            if n == 0 and (lo or hi):
                raise FtransValueError(f"pad: cannot apply {mode!r} padding to the empty axis {ax}")
            sb = sa = stat(x, axis=ax, keepdims=True)
        else:
            lb, la = (v if isinstance(v, DimExpr) else int(v) for v in lengths[ax])
            if lb <= 0 or la <= 0:
                raise FtransValueError(
                    f"pad: stat_length of 0 yields no value for padding (axis {ax} has stat_length ({lb}, {la}))")
            lb, la = min_dim(lb, n), min_dim(la, n)
            sb = stat(_slice_axis(x, ax, 0, lb), axis=ax, keepdims=True)
            sa = stat(_slice_axis(x, ax, n - la, n), axis=ax, keepdims=True)
        if dtypes.is_int(d):
            sb, sa = round_(sb), round_(sa)
        sb, sa = retype(sb, d, w), retype(sa, d, w)

        def grow(v: Any, amount: int, ax: int = ax) -> Any:
            shp = list(_shp(v))
            shp[ax] = amount
            return broadcast_to(v, tuple(shp))

        x = _pad_concat(x, grow(sb, lo), grow(sa, hi), ax, lo, hi)
    return x


def _pad_func(x: Any, widths: list, func: Any, kwargs: dict) -> Any:
    """A callable mode: zero-pad, then ``func(vector, (before, after), axis, kwargs)`` along each axis."""
    from ftrans.numpy._functional import apply_along_axis

    padded = _pad_constant(x, widths, 0)
    for ax in range(len(widths)):
        padded = apply_along_axis(func, ax, padded, widths[ax], ax, kwargs)
    return padded


def _reflect_side(x: Any, ax: int, amount: int, before: bool, offset: int, period: int, odd: bool) -> Any:
    """Grow one side of ``ax`` by reflection, at most ``period`` elements per step (NumPy's rule for
    pads longer than the axis)."""
    while amount > 0:
        n = _shp(x)[ax]
        take = min(amount, period)
        if before:
            chunk = _rev(_slice_axis(x, ax, offset, offset + take), (ax,))
            edge = _slice_axis(x, ax, 0, 1)
        else:
            chunk = _rev(_slice_axis(x, ax, n - offset - take, n - offset), (ax,))
            edge = _slice_axis(x, ax, n - 1, n)
        if odd:
            edge = S.broadcast_in_dim_p.bind(edge, shape=_shp(chunk), broadcast_dimensions=tuple(range(len(_shp(x)))))
            two = Array._new(np.asarray(2, dtype_weak(x)[0]), False)
            chunk = E.sub_p.bind(E.mul_p.bind(edge, two), chunk)
        x = S.concatenate_p.bind(*((chunk, x) if before else (x, chunk)), dimension=ax)
        amount -= take
    return x


def _pad_reflect(x: Any, widths: list, mode: str, reflect_type: str) -> Any:
    if reflect_type not in ("even", "odd"):
        raise FtransValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    odd = reflect_type == "odd"
    for ax, (lo, hi) in enumerate(widths):
        n = _shp(x)[ax]
        if not (lo or hi):
            continue
        if n == 0:
            raise FtransValueError(f"pad: cannot apply '{mode}' padding to the empty axis {ax}")
        if isinstance(n, DimExpr) or isinstance(lo, DimExpr) or isinstance(hi, DimExpr):
            for side, amount in (("left", lo), ("right", hi)):  # one reflection step must do (JAX's rule)
                msg = ("Shape polymorphism is supported for jnp.pad with 'reflect' or 'symmetric' padding mode only "
                       "when it is possible to determine at lowering time that the axis size (= "
                       f"{n}) is larger than 1 and larger or equal than the padding length (= {amount}). Error "
                       f"while handling {side} padding on axis {ax}.")
                try:
                    ok = n > 1 and n - (1 if mode == "reflect" else 0) >= amount
                except InconclusiveDimensionOperation as e:
                    raise FtransValueError(msg) from e
                if not ok:
                    raise FtransValueError(msg)
        offset = 1 if mode == "reflect" and n > 1 else 0
        period = n - offset
        x = _reflect_side(x, ax, lo, True, offset, period, odd)
        x = _reflect_side(x, ax, hi, False, offset, period, odd)
    return x


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    """Pad an array.

    Every NumPy mode is supported (constant, edge, wrap, reflect, symmetric, empty, linear_ramp, maximum,
    minimum, mean, median) and a callable mode. `pad_width` must be static; `constant_values` may be traced.

    Args:
        array: Input array.
        pad_width: Number of elements to add: an int, a `(before, after)` pair, or one pair per axis.
        mode: Padding mode (default `'constant'`), or a function as in NumPy.
        **kwargs: Mode options: `constant_values`, `end_values`, `reflect_type`, `stat_length`.
    Returns:
        The padded array, of `array`'s dtype.

    Examples:
        >>> x = jnp.array([1, 2, 3])
        >>> jnp.pad(x, 2)
        Array([0, 0, 1, 2, 3, 0, 0], dtype=int32)
        >>> jnp.pad(x, (1, 2), mode="edge")
        Array([1, 1, 2, 3, 3, 3], dtype=int32)
        >>> jnp.pad(x, 2, mode="reflect")
        Array([3, 2, 1, 2, 3, 2, 1], dtype=int32)
        >>> jnp.pad(jnp.ones((1, 2)), ((1, 0), (0, 1)), constant_values=9)
        Array([[9., 9., 9.],
               [1., 1., 9.]], dtype=float32)

    See also:
        `concatenate`.
    """
    x = _operand("pad", array)
    if callable(mode):
        return _pad_func(x, _pad_width(pad_width, len(_shp(x))), mode, kwargs)
    if not isinstance(mode, str) or mode not in _PAD_KWARGS:
        raise NotImplementedError(
            f"pad: Unimplemented padding mode '{mode}' for np.pad; the modes are {sorted(_PAD_KWARGS)} "
            "or a callable")
    extra = set(kwargs) - _PAD_KWARGS[mode]
    if extra:
        raise FtransValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(extra)}")
    nd = len(_shp(x))
    widths = _pad_width(pad_width, nd)
    if nd == 0:
        return x
    if mode in ("constant", "empty"):
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    if mode in ("edge", "wrap"):
        return _pad_index_map(x, widths, mode)
    if mode == "linear_ramp":
        return _pad_linear_ramp(x, widths, kwargs.get("end_values", 0))
    if mode in ("maximum", "minimum", "mean", "median"):
        return _pad_stats(x, widths, mode, kwargs.get("stat_length"))
    return _pad_reflect(x, widths, mode, kwargs.get("reflect_type", "even"))


# ---------------------------------------------------------------- atleast_nd and sizes
def _atleast(name: str, arys: tuple, fix: Any) -> Any:
    from ftrans.numpy._creation import asarray

    # Several inputs (or none) give a tuple, as NumPy 2's and jax 0.12's (jax 0.10 and 0.11: a list).
    out = tuple(fix(asarray(a) if isinstance(a, (list, tuple)) else _operand(name, a)) for a in arys)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys: Any) -> Any:
    """Convert inputs to arrays with at least one dimension.

    0-d inputs become shape `(1,)`; others are unchanged.

    Args:
        *arys: Arrays or scalars.
    Returns:
        One array for one input, or a tuple of arrays for several (or none).

    Examples:
        >>> jnp.atleast_1d(3)
        Array([3], dtype=int32, weak_type=True)
        >>> jnp.atleast_1d(1, jnp.array([2, 3]))
        (Array([1], dtype=int32, weak_type=True), Array([2, 3], dtype=int32))

    See also:
        `atleast_2d`, `atleast_3d`.
    """
    return _atleast("atleast_1d", arys, lambda a: reshape(a, (1,)) if not _shp(a) else a)


def atleast_2d(*arys: Any) -> Any:
    """Convert inputs to arrays with at least two dimensions.

    Shape `()` becomes `(1, 1)` and `(n,)` becomes `(1, n)`.

    Args:
        *arys: Arrays or scalars.
    Returns:
        One array for one input, or a tuple of arrays for several (or none).

    Examples:
        >>> jnp.atleast_2d(jnp.array([1, 2]))
        Array([[1, 2]], dtype=int32)

    See also:
        `atleast_1d`, `atleast_3d`.
    """
    return _atleast("atleast_2d", arys, lambda a: reshape(a, (1,) * (2 - len(_shp(a))) + _shp(a))
                    if len(_shp(a)) < 2 else a)


def atleast_3d(*arys: Any) -> Any:
    """Convert inputs to arrays with at least three dimensions.

    Shape `()` becomes `(1, 1, 1)`, `(n,)` becomes `(1, n, 1)` and `(m, n)` becomes `(m, n, 1)`.

    Args:
        *arys: Arrays or scalars.
    Returns:
        One array for one input, or a tuple of arrays for several (or none).

    Examples:
        >>> jnp.atleast_3d(jnp.array([1, 2])).shape
        (1, 2, 1)
        >>> jnp.atleast_3d(jnp.ones((2, 3))).shape
        (2, 3, 1)

    See also:
        `atleast_1d`, `atleast_2d`.
    """

    def fix(a: Any) -> Any:
        s = _shp(a)
        if len(s) == 0:
            return reshape(a, (1, 1, 1))
        if len(s) == 1:
            return reshape(a, (1, s[0], 1))
        if len(s) == 2:
            return reshape(a, s + (1,))
        return a

    return _atleast("atleast_3d", arys, fix)


def _warn_sequence(name: str, a: Any) -> None:
    """JAX deprecates lists and tuples here (they are still measured, with a DeprecationWarning)."""
    if isinstance(a, (list, tuple)):
        import warnings

        warnings.warn(f"{name} requires ndarray or scalar arguments, got {type(a)} at position 0. In a "
                      f"future release this will be an error (as in JAX); pass jnp.asarray(...) instead.",
                      DeprecationWarning, stacklevel=user_stacklevel())


def shape(a: Any) -> tuple[int, ...]:
    """Return the shape of an array or scalar.

    A nested Python sequence works too but warns, as in JAX.

    Args:
        a: Array or scalar.
    Returns:
        A tuple of ints.

    Examples:
        >>> jnp.shape(jnp.ones((2, 3)))
        (2, 3)
        >>> jnp.shape(3.0)
        ()

    See also:
        `ndim`, `size`.
    """
    _warn_sequence("shape", a)
    return tuple(shape_of(a))


def ndim(a: Any) -> int:
    """Return the number of dimensions of an array or scalar.

    Args:
        a: Array or scalar.
    Returns:
        A Python int.

    Examples:
        >>> jnp.ndim(jnp.ones((2, 3)))
        2
        >>> jnp.ndim(3.0)
        0

    See also:
        `shape`, `size`.
    """
    _warn_sequence("ndim", a)
    return len(shape_of(a))


def size(a: Any, axis: int | Sequence[int] | None = None) -> int:
    """Return the number of elements of an array, in total or along some axes.

    Args:
        a: Array or scalar.
        axis: Optional axis or tuple of axes whose lengths are multiplied.
    Returns:
        A Python int.

    Examples:
        >>> x = jnp.ones((2, 3, 4))
        >>> jnp.size(x)
        24
        >>> jnp.size(x, axis=(0, 2))
        8

    See also:
        `shape`, `ndim`.
    """
    _warn_sequence("size", a)
    s = tuple(shape_of(a))
    if axis is None:
        return math.prod(s)
    return math.prod(s[ax] for ax in _axes_tuple("size", axis, len(s)))
