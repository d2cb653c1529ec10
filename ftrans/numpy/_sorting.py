"""Sorting, searching, uniqueness: sort, argsort, lexsort, searchsorted, unique.

All of them are built on the variadic ``sort`` primitive: ``argsort`` sorts
``(keys, iota)``, ``lexsort`` sorts several keys at once, and ``unique``
compacts the first element of each run of equal values with a second stable
sort (on the "is not first" flag), so the static-``size`` form needs no
scatter and traces to a fixed-shape program.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ftrans.core import config as _config
from ftrans.core import dtypes
from ftrans.core.array import Array
from ftrans.core.operands import (
    as_operand,
    broadcast_to_shape,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    dtype_weak,
    maybe_concrete,
    promote_dtypes,
    shape_of,
)
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["sort", "argsort", "lexsort", "searchsorted", "unique", "sort_complex"]


def _operand(name: str, a: Any) -> Any:
    check_arraylike(name, a)
    return as_operand(a)


def _ravel(x: Any) -> Any:
    shape = tuple(shape_of(x))
    if len(shape) == 1:
        return x
    return S.reshape_p.bind(x, new_sizes=(math.prod(shape),), dimensions=None)


def _sort_axis(name: str, x: Any, axis: Any) -> tuple[Any, int]:
    """The operand and the (non-negative) axis to sort along; ``axis=None`` flattens."""
    if axis is None:
        return _ravel(x), 0
    nd = len(shape_of(x))
    if nd == 0:
        raise FtransValueError(f"{name}: cannot sort a 0-d array along axis {axis}; use axis=None")
    return x, canonicalize_axis(name, concrete_or_error(axis, f"{name}: axis"), nd)


def _check_unsupported(name: str, kind: Any, order: Any) -> None:
    if order is not None:
        raise NotImplementedError(f"{name}: order is not supported (structured arrays do not exist in ftrans)")
    if kind not in (None, "stable", "quicksort", "mergesort", "heapsort"):
        raise FtransValueError(f"{name}: unknown sort kind {kind!r}")


def _iota(shape: tuple[int, ...], dimension: int, dtype: np.dtype | None = None) -> Any:
    return S.iota_p.bind(dtype=dtype or dtypes.default_int(), shape=tuple(shape), dimension=dimension)


def sort(a: Any, axis: int | None = -1, *, kind: Any = None, order: Any = None, stable: bool = True,
         descending: bool = False) -> Any:
    """Return a sorted copy of an array.

    The sort is stable. NaNs sort last (first with `descending=True`), and `-0.0` ties `+0.0`. Complex numbers
    sort by real part, then imaginary part.

    Args:
        a: Input array.
        axis: Axis to sort along (default -1); None sorts the flattened array.
        kind: Ignored (the sort is always stable); accepted for NumPy compatibility.
        order: Not supported (structured arrays do not exist here); must be None.
        stable: Accepted for compatibility; the sort is always stable.
        descending: If True, sort in descending order (ties keep their order).
    Returns:
        A sorted array of `a`'s shape (1-D for `axis=None`) and dtype.

    Examples:
        >>> x = jnp.array([[3, 1, 2], [0, 5, 4]])
        >>> jnp.sort(x)
        Array([[1, 2, 3],
               [0, 4, 5]], dtype=int32)
        >>> jnp.sort(x, axis=0)
        Array([[0, 1, 2],
               [3, 5, 4]], dtype=int32)
        >>> jnp.sort(jnp.array([2., jnp.nan, 1.]), descending=True)
        Array([nan,  2.,  1.], dtype=float32)

    See also:
        `argsort`, `lexsort`, `partition`.
    """
    _check_unsupported("sort", kind, order)
    x, ax = _sort_axis("sort", _operand("sort", a), axis)
    (out,) = So.sort_p.bind(x, dimension=ax, is_stable=bool(stable), num_keys=1)
    if descending:
        out = S.rev_p.bind(out, dimensions=(ax,))
    return out


def argsort(a: Any, axis: int | None = -1, *, kind: Any = None, order: Any = None, stable: bool = True,
            descending: bool = False, dtype: Any = None) -> Any:
    """Return the indices that sort an array.

    The sort is stable: ties keep their order (their order is reversed when `descending`).

    Args:
        a: Input array.
        axis: Axis to sort along (default -1); None sorts the flattened array.
        kind: Ignored; accepted for NumPy compatibility.
        order: Not supported; must be None.
        stable: Accepted for compatibility; the sort is always stable.
        descending: If True, indices for descending order.
        dtype: The index dtype (default int32, as in JAX; int64 is narrowed unless x64 is on).
    Returns:
        An integer array of `a`'s shape (1-D for `axis=None`).

    Examples:
        >>> x = jnp.array([30, 10, 20, 10])
        >>> jnp.argsort(x)
        Array([1, 3, 2, 0], dtype=int32)
        >>> jnp.argsort(x, descending=True)
        Array([0, 2, 1, 3], dtype=int32)

    See also:
        `sort`, `take_along_axis`, `lexsort`.
    """
    _check_unsupported("argsort", kind, order)
    x, ax = _sort_axis("argsort", _operand("argsort", a), axis)
    idx = _iota(tuple(shape_of(x)), ax)
    if descending:
        x = S.rev_p.bind(x, dimensions=(ax,))
        idx = S.rev_p.bind(idx, dimensions=(ax,))
    _, perm = So.sort_p.bind(x, idx, dimension=ax, is_stable=bool(stable), num_keys=1)
    if descending:
        perm = S.rev_p.bind(perm, dimensions=(ax,))
    if dtype is not None:
        d = dtypes.canonicalize(dtypes.to_dtype(dtype))
        if d != dtype_weak(perm)[0]:
            perm = S.convert_element_type_p.bind(perm, new_dtype=d, weak_type=False)
    return perm


def sort_complex(a: Any) -> Any:
    """Sort an array along its last axis and return it as complex numbers.

    Args:
        a: Input array.
    Returns:
        A sorted complex array of `a`'s shape.

    Examples:
        >>> jnp.sort_complex(jnp.array([3, 1, 2]))
        Array([1.+0.j, 2.+0.j, 3.+0.j], dtype=complex64)

    See also:
        `sort`.
    """
    x = sort(a)
    d = dtype_weak(x)[0]
    if d.kind != "c":
        target = dtypes.default_complex() if d != dtypes.float64 else dtypes.complex128
        x = S.convert_element_type_p.bind(x, new_dtype=target, weak_type=False)
    return x


def lexsort(keys: Any, axis: int = -1, *, batch_size: int = 16) -> Any:
    """Return the indices that sort by several keys.

    The last key is the primary one, then the others in reverse order.

    Args:
        keys: Sequence of arrays (or a 2-D array whose rows are the keys) of one shape.
        axis: Axis to sort along.
        batch_size: jax 0.12's bound on the keys one sort takes (it sorts more keys in several passes);
            ftrans's one stable sort takes every key, so the result is the same whatever it is.
    Returns:
        An integer array of indices.

    Examples:
        >>> surnames = jnp.array([1, 0, 1, 0])
        >>> ages = jnp.array([30, 40, 20, 10])
        >>> jnp.lexsort((ages, surnames))
        Array([3, 1, 2, 0], dtype=int32)

    See also:
        `argsort`.
    """
    if isinstance(keys, (Array,)) or hasattr(keys, "aval"):
        n = shape_of(keys)[0] if shape_of(keys) else 0
        keys = [keys[i] for i in range(n)]
    keys = list(keys)
    if not keys:
        raise FtransTypeError("lexsort: need a sequence of keys with len > 0")
    try:  # (as jax 0.12: a non-integer is a TypeError, a non-positive one a ValueError)
        bs = operator.index(concrete_or_error(batch_size, "batch_size argument of jnp.lexsort()"))
    except TypeError:
        raise FtransTypeError(f"lexsort: batch_size must be a positive int, got {batch_size!r}") from None
    if bs < 1:
        raise FtransValueError(f"lexsort: batch_size must be positive, got {batch_size!r}")
    check_arraylike("lexsort", *keys)
    ops = [as_operand(k) for k in keys]
    shapes = {tuple(shape_of(k)) for k in ops}
    if len(shapes) != 1:
        raise FtransValueError(f"lexsort: all keys need to be the same shape; got {sorted(shapes)}")
    shape = shapes.pop()
    if not shape:  # scalar keys: one element, at index 0 (as NumPy and JAX)
        return Array._new(np.zeros((), dtypes.default_int()), False)
    ax = canonicalize_axis("lexsort", axis, len(shape))
    idx = _iota(shape, ax)
    *_, perm = So.sort_p.bind(*ops[::-1], idx, dimension=ax, is_stable=True, num_keys=len(ops))
    return perm


# ---------------------------------------------------------------- searchsorted
def _total_lt(p: Any, q: Any) -> Any:
    """``p < q`` in the order ``sort`` uses: NaN is largest and equals NaN, ``-0.0 == +0.0``."""
    d = dtype_weak(p)[0]
    if d.kind == "c":
        pr, qr, pi, qi = E.real_p.bind(p), E.real_p.bind(q), E.imag_p.bind(p), E.imag_p.bind(q)
        eq_r = E.not_p.bind(E.or_p.bind(_total_lt(pr, qr), _total_lt(qr, pr)))
        return E.or_p.bind(_total_lt(pr, qr), E.and_p.bind(eq_r, _total_lt(pi, qi)))
    lt = E.lt_p.bind(p, q)
    if not dtypes.is_float(d):
        return lt
    p_nan, q_nan = E.ne_p.bind(p, p), E.ne_p.bind(q, q)
    return E.or_p.bind(lt, E.and_p.bind(q_nan, E.not_p.bind(p_nan)))


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan") -> Any:
    """Find the indices at which values would be inserted to keep a sorted array sorted.

    Every `method` gives the same result; the default compares each query with every element.

    Args:
        a: Sorted 1-D array.
        v: Values to insert (any shape).
        side: `'left'`: the first suitable index; `'right'`: the last.
        sorter: Optional indices that sort `a` (as from `argsort`).
        method: `'scan'`, `'scan_unrolled'`, `'sort'` or `'compare_all'`; the same result for each.
    Returns:
        An integer array of `v`'s shape.

    Examples:
        >>> a = jnp.array([1, 3, 3, 7])
        >>> jnp.searchsorted(a, jnp.array([0, 3, 5, 9]))
        Array([0, 1, 3, 4], dtype=int32)
        >>> jnp.searchsorted(a, 3, side="right")
        Array(3, dtype=int32)

    See also:
        `digitize`.
    """
    if side not in ("left", "right"):
        raise FtransValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise FtransValueError(
            f"searchsorted: method must be one of 'scan', 'scan_unrolled', 'sort', 'compare_all'; got {method!r}"
        )
    check_arraylike("searchsorted", a, v)
    if len(shape_of(a)) != 1:
        raise FtransValueError(f"searchsorted: a should be 1-dimensional, got shape {tuple(shape_of(a))}")
    (x, q), _, _ = promote_dtypes("searchsorted", a, v)
    if sorter is not None:
        # ``a[sorter]`` is the sorted array; the indices are into it (as NumPy and JAX).
        from ftrans.numpy._indexing import take

        check_arraylike("searchsorted", sorter)
        if len(shape_of(sorter)) != 1 or not dtypes.is_int(dtype_weak(sorter)[0]):
            raise FtransValueError(f"searchsorted: sorter must be a 1-d integer array, got "
                                   f"{dtype_weak(sorter)[0]}{list(shape_of(sorter))}")
        x = take(x, sorter, axis=0)
    n = shape_of(x)[0]
    qshape = tuple(shape_of(q))
    full = qshape + (n,)
    xb = S.broadcast_in_dim_p.bind(x, shape=full, broadcast_dimensions=(len(qshape),))
    qb = S.broadcast_in_dim_p.bind(q, shape=full, broadcast_dimensions=tuple(range(len(qshape))))
    # left: count of a < v; right: count of a <= v, i.e. of not (v < a).
    hit = _total_lt(xb, qb) if side == "left" else E.not_p.bind(_total_lt(qb, xb))
    from ftrans.numpy._reductions import sum as _sum

    return _sum(hit, axis=-1, dtype=_index_dtype(n))


def _index_dtype(n: Any) -> np.dtype:
    """JAX's index dtype for a dimension of size ``n``: int32 whenever it fits (x64 or not), int64 beyond
    (asked for explicitly: without x64 JAX's warning, then the size does not fit an int32); the default
    int for a symbolic size."""
    if not isinstance(n, (int, np.integer)):
        return dtypes.default_int()
    if n <= np.iinfo(np.int32).max:
        return np.dtype(np.int32)
    dtypes.check_requested(np.int64, "searchsorted")
    if not _config.config.enable_x64:
        raise OverflowError(f"Python integer {n} out of bounds for int32: searchsorted's indices into an array "
                            "that long need int64, which needs 64-bit mode (ftrans.config.update('jax_enable_x64', "
                            "True))")
    return np.dtype(np.int64)


# ---------------------------------------------------------------- unique
def _slice1(x: Any, start: int, stop: int) -> Any:
    return S.slice_p.bind(x, start_indices=(start,), limit_indices=(stop,), strides=None)


def _concat(*xs: Any) -> Any:
    xs = [x for x in xs if shape_of(x)[0] > 0] or [xs[0]]
    return xs[0] if len(xs) == 1 else S.concatenate_p.bind(*xs, dimension=0)


def _const(value: Any, dtype: np.dtype, n: int = 1) -> Any:
    return broadcast_to_shape(Array._new(np.asarray(value, dtype), False), (n,))


def _resize(x: Any, size: int) -> Any:
    """First ``size`` entries, padded (with zeros that are overwritten later) when ``x`` is shorter."""
    n = shape_of(x)[0]
    if size <= n:
        return x if size == n else _slice1(x, 0, size)
    d, w = dtype_weak(x)
    pad = _const(0, d, size - n)
    if w:
        pad = S.convert_element_type_p.bind(pad, new_dtype=d, weak_type=True)
    return _concat(x, pad)


def _select(mask: Any, on_true: Any, on_false: Any) -> Any:
    return S.select_n_p.bind(mask, on_false, on_true)


def _run_starts(srt: Any, equal_nan: bool) -> Any:
    """True at the first element of each run of equal values in the sorted 1-D ``srt``."""
    n = shape_of(srt)[0]
    cur, prev = _slice1(srt, 1, n), _slice1(srt, 0, n - 1)
    new = E.ne_p.bind(cur, prev)
    if equal_nan and dtypes.is_inexact(dtype_weak(srt)[0]):
        both_nan = E.and_p.bind(E.ne_p.bind(cur, cur), E.ne_p.bind(prev, prev))
        new = E.and_p.bind(new, E.not_p.bind(both_nan))
    return _concat(_const(True, dtypes.bool_), new)


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: Any = None, sorted: bool = True) -> Any:  # noqa: A002
    """Return the sorted unique elements of an array.

    Without `size` the number of unique values decides the output shape, so the input must be concrete
    (eager); with `size` the result has exactly `size` entries, padded with `fill_value` (default: the
    smallest unique value), and it works under `jit`.

    Args:
        ar: Input array; flattened unless `axis` is given.
        return_index: Also return the index of each value's first occurrence.
        return_inverse: Also return the indices that rebuild `ar` from the unique values.
        return_counts: Also return how often each unique value occurs.
        axis: Optional axis along which to find unique slices.
        equal_nan: Whether all NaNs count as one value.
        size: Optional static number of unique values to return.
        fill_value: Value used to pad up to `size`.
        sorted: Accepted for compatibility; the values always come back sorted.
    Returns:
        The unique values, or a tuple of them and the requested extra arrays.

    Examples:
        >>> x = jnp.array([3, 1, 3, 2, 1])
        >>> jnp.unique(x)
        Array([1, 2, 3], dtype=int32)
        >>> values, counts = jnp.unique(x, return_counts=True)
        >>> counts
        Array([2, 1, 2], dtype=int32)
        >>> jnp.unique(x, size=5, fill_value=-1)
        Array([ 1,  2,  3, -1, -1], dtype=int32)

    See also:
        `unique_values`, `unique_counts`, `unique_inverse`, `unique_all`.
    """
    x = _operand("unique", ar)
    if axis is not None:
        return _unique_along(x, axis, return_index, return_inverse, return_counts, equal_nan, size, fill_value)
    in_shape = tuple(shape_of(x))
    if size is None:
        x = maybe_concrete(x)  # as in JAX, a concrete autodiff value is read as a constant (zero derivative)
        concrete_or_error(x, "unique: the input (when size= is not given, the output shape depends on its values)")
    else:
        size = int(concrete_or_error(size, "unique: size"))
        if size < 0:
            raise FtransValueError(f"unique: size must be non-negative, got {size}")
    flat = _ravel(x)
    n = shape_of(flat)[0]
    if n == 0:
        return _unique_empty(flat, size, fill_value, return_index, return_inverse, return_counts, in_shape)
    iota = _iota((n,), 0)
    if equal_nan and dtypes.is_inexact(dtype_weak(flat)[0]):
        keys = _nan_last_keys(flat)
        *_, srt, perm = So.sort_p.bind(*keys, flat, iota, dimension=0, is_stable=True, num_keys=len(keys))
    else:
        srt, perm = So.sort_p.bind(flat, iota, dimension=0, is_stable=True, num_keys=1)
    starts = _run_starts(srt, equal_nan)
    starts_i = S.convert_element_type_p.bind(starts, new_dtype=dtypes.default_int(), weak_type=False)
    one = Array._new(np.asarray(1, dtypes.default_int()), False)
    run_id = E.sub_p.bind(So.cumsum_p.bind(starts_i, axis=0, reverse=False), one)
    n_unique = S.slice_p.bind(run_id, start_indices=(n - 1,), limit_indices=(n,), strides=None)
    n_unique = E.add_p.bind(S.reshape_p.bind(n_unique, new_sizes=(), dimensions=None), one)
    if size is None:
        size = int(np.asarray(concrete_or_error(n_unique, "unique: the number of unique values")))
    # Stable sort on "not a run start" moves the run starts, in order, to the front.
    not_start = E.not_p.bind(starts)
    _, u_vals, u_idx, u_pos = So.sort_p.bind(not_start, srt, perm, iota, dimension=0, is_stable=True, num_keys=1)
    valid = E.lt_p.bind(_iota((size,), 0), broadcast_to_shape(n_unique, (size,)))
    vals = _resize(u_vals, size)
    fill = _first(u_vals) if fill_value is None else _scalar_like(fill_value, u_vals)
    outs = [_select(valid, vals, broadcast_to_shape(fill, (size,)))]
    if return_index:
        outs.append(_select(valid, _resize(u_idx, size), broadcast_to_shape(_first(u_idx), (size,))))
    if return_inverse:
        _, inv = So.sort_p.bind(perm, run_id, dimension=0, is_stable=True, num_keys=1)
        outs.append(S.reshape_p.bind(inv, new_sizes=in_shape, dimensions=None) if in_shape != (n,) else inv)
    if return_counts:
        outs.append(_counts(u_pos, n_unique, n, size, valid))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _nan_last_keys(x: Any) -> list:
    """Sort keys that order ``x`` as NumPy's sort does: NaNs (of either part) last, together.

    Complex NaNs come as NumPy orders them, ``R + nan j`` before ``nan + R j``
    before ``nan + nan j``, so the NaN kept by ``unique`` is NumPy's.
    """
    def isnan(v: Any) -> Any:
        return E.ne_p.bind(v, v)

    if dtype_weak(x)[0].kind != "c":
        return [isnan(x), x]
    re, im = E.real_p.bind(x), E.imag_p.bind(x)
    return [isnan(x), isnan(re), re, isnan(im), im]


def _unique_along(x: Any, axis: Any, return_index: bool, return_inverse: bool, return_counts: bool,
                  equal_nan: bool, size: int | None, fill_value: Any) -> Any:
    """``unique`` of the slices of ``x`` along ``axis``, compared whole, in lexicographic order."""
    import ftrans.numpy as jnp
    from ftrans import lax

    ndim = len(shape_of(x))
    axis = canonicalize_axis("unique", concrete_or_error(axis, "unique: axis"), ndim)
    rows = jnp.moveaxis(x, axis, 0)
    rest = tuple(shape_of(rows))[1:]
    n = shape_of(rows)[0]
    if size is None:
        rows = maybe_concrete(rows)
        concrete_or_error(rows, "unique: the input (when size= is not given, the output shape depends on its values)")
    else:
        size = int(concrete_or_error(size, "unique: size"))
        if size < 0:
            raise FtransValueError(f"unique: size must be non-negative, got {size}")
    di = dtypes.default_int()
    flat = jnp.reshape(rows, (n, math.prod(rest)))
    m = shape_of(flat)[1]
    if n == 0 or m == 0:
        k = min(n, 1) if size is None else size
        vals = jnp.zeros((k, *rest), dtype_weak(x)[0]) if fill_value is None else \
            jnp.full((k, *rest), fill_value, dtype_weak(x)[0])
        outs = [jnp.moveaxis(vals, 0, axis) if ndim else vals]
        if return_index:
            outs.append(jnp.zeros((k,), di))
        if return_inverse:
            outs.append(jnp.zeros((n,), di))
        if return_counts:
            outs.append(jnp.full((k,), n, di) if k else jnp.zeros((0,), di))
        return outs[0] if len(outs) == 1 else tuple(outs)
    cols = [flat[:, j] for j in range(m)]
    *srt_cols, perm = lax.sort((*cols, lax.iota(di, n)), num_keys=m, is_stable=True)
    srt = jnp.stack(srt_cols, axis=1)
    same = jnp.equal(srt[1:], srt[:-1])
    if equal_nan and dtypes.is_inexact(dtype_weak(x)[0]):
        same = jnp.logical_or(same, jnp.logical_and(jnp.isnan(srt[1:]), jnp.isnan(srt[:-1])))
    starts = jnp.concatenate([jnp.ones(1, np.bool_), jnp.logical_not(jnp.all(same, axis=1))])
    run_id = (jnp.cumsum(starts.astype(di)) - 1).astype(di)
    n_unique = run_id[-1] + 1
    if size is None:
        size = int(np.asarray(concrete_or_error(n_unique, "unique: the number of unique values")))
    (pos,) = jnp.nonzero(starts, size=size, fill_value=0)
    valid = jnp.less(jnp.arange(size), n_unique)
    vals = srt[pos]
    fill = vals[0] if fill_value is None else jnp.asarray(fill_value, dtype_weak(x)[0])
    vals = jnp.where(valid[:, None], vals, fill)
    outs = [jnp.moveaxis(jnp.reshape(vals, (size, *rest)), 0, axis)]
    if return_index:
        outs.append(jnp.where(valid, perm[pos], perm[0]).astype(di))
    if return_inverse:
        outs.append(jnp.zeros((n,), di).at[perm].set(run_id))
    if return_counts:
        nxt = jnp.concatenate([pos[1:], jnp.full((1,), n, di)]).astype(di)
        nxt = jnp.where(jnp.less(jnp.arange(size) + 1, n_unique), nxt, n)
        outs.append(jnp.where(valid, nxt - pos, 0).astype(di))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _first(x: Any) -> Any:
    return S.reshape_p.bind(_slice1(x, 0, 1), new_sizes=(), dimensions=None)


def _scalar_like(value: Any, like: Any) -> Any:
    d, w = dtype_weak(like)
    check_arraylike("unique", value)
    v = as_operand(value)
    if shape_of(v) != ():
        raise FtransValueError(f"unique: fill_value must be a scalar, got shape {shape_of(v)}")
    return S.convert_element_type_p.bind(v, new_dtype=d, weak_type=w)


def _counts(u_pos: Any, n_unique: Any, n: int, size: int, valid: Any) -> Any:
    """Run lengths: the next run's start (or ``n`` after the last run) minus this run's start."""
    di = dtypes.default_int()
    nxt = _concat(_slice1(u_pos, 1, n), _const(n, di))
    j1 = E.add_p.bind(_iota((n,), 0), Array._new(np.asarray(1, di), False))
    has_next = E.lt_p.bind(j1, broadcast_to_shape(n_unique, (n,)))
    end = _select(has_next, nxt, _const(n, di, n))
    counts = E.sub_p.bind(end, u_pos)
    return _select(valid, _resize(counts, size), _const(0, di, size))


def _unique_empty(flat: Any, size: int | None, fill_value: Any, return_index: bool, return_inverse: bool,
                  return_counts: bool, in_shape: tuple[int, ...]) -> Any:
    d, w = dtype_weak(flat)
    di = dtypes.default_int()
    k = size or 0
    if k and fill_value is None:
        raise FtransValueError("unique: fill_value is required when size > 0 and the input is empty")
    vals = broadcast_to_shape(_scalar_like(fill_value, flat), (k,)) if k else flat
    outs = [vals]
    if return_index:
        outs.append(_const(0, di, k))
    if return_inverse:
        outs.append(broadcast_to_shape(Array._new(np.asarray(0, di), False), in_shape))
    if return_counts:
        outs.append(_const(0, di, k))
    return outs[0] if len(outs) == 1 else tuple(outs)

