"""NumPy indexing (``x[idx]``), ``x.at[idx]`` updates, ``take``, ``nonzero``, ``select``, ...

Indexing follows JAX's ``numpy``: an index is parsed once (``_parse``) into a list
of typed entries, then lowered by the cheapest strategy that can express it,
which keeps the staged IR readable:

1. only static ints, slices, ``None`` and ``...``: ``slice`` / ``rev`` /
   ``squeeze`` / ``expand_dims``;
2. additionally scalar *array* indices (e.g. a traced loop counter) and unit
   step slices: ``dynamic_slice`` (XLA clamps the start, as jax does);
3. everything else (integer arrays, boolean masks, strided slices mixed with
   arrays, a non-default ``mode``): one ``gather``.

Indexed updates (``x.at[idx].set(v)`` ...) always use the gather description
of the index, transposed into a scatter, as jax does.

Out of bounds: a static Python int out of range raises ``IndexError`` when
reading (jax does this with ``jax_check_static_indices``); array indices are
clamped when reading (jax's default "promise_in_bounds" gather) and dropped
when updating (jax's default FILL_OR_DROP scatter).
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ftrans.core import array as _array_mod
from ftrans.core import dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array, DeviceArray, stays_on_device
from ftrans.core.config import trace_mode_on
from ftrans.core.operands import (
    as_operand,
    broadcast_shapes,
    broadcast_to_shape,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    convert,
    dtype_weak,
    maybe_concrete,
    promote_dtypes,
    shape_of,
)
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from ftrans.core.shape_poly import DimExpr, max_dim, min_dim
from ftrans.core.trace import Tracer
from ftrans.errors import (
    ConcretizationTypeError,
    FtransIndexError,
    FtransTypeError,
    FtransValueError,
    InconclusiveDimensionOperation,
    NonConcreteBooleanIndexError,
    user_stacklevel,
)

__all__ = [
    "argwhere", "choose", "compress", "flatnonzero", "nonzero", "put", "select", "take",
    "take_along_axis",
]

# ============================================================================
# Small helpers


def _const(value: Any, dtype: np.dtype) -> Array:
    """A host constant (it stages as a literal or a captured constant)."""
    return Array._new(np.asarray(value, dtype), False)


def _is_host(x: Any) -> bool:
    """Concrete index data we may inspect with NumPy (index bookkeeping, like jax's np.where)."""
    if isinstance(x, np.ndarray):
        return True
    # (not a device array whose operations run on its device, such as an accelerator's buffer, which reading
    # would copy to the host and wait for: it indexes with device operations, as a traced index does)
    return isinstance(x, Array) and not (type(x) is DeviceArray and stays_on_device(x))


def _host_value(x: Any) -> np.ndarray:
    return x._value if isinstance(x, Array) else np.asarray(x)


def _index_dtype(shape: tuple[int, ...]) -> np.dtype:
    """int32, unless an axis is too long for it (then the default int, int64 under x64)."""
    if any(not isinstance(d, DimExpr) and d > np.iinfo(np.int32).max for d in shape):  # symbolic: int32 (JAX's)
        return dtypes.default_int()
    return dtypes.canonicalize(np.int32)


def _full(shape: tuple[int, ...], value: Any, dtype: np.dtype, weak: bool = False) -> Any:
    return S.broadcast_in_dim_p.bind(_scalar(value, dtype, weak), shape=tuple(shape), broadcast_dimensions=())


def _scalar(value: Any, dtype: np.dtype, weak: bool = False) -> Array:
    return Array._new(np.asarray(value, dtype), weak)


def _dim_scalar(value: Any, dtype: np.dtype) -> Any:
    """A scalar of ``dtype`` holding ``value``: an int, or a symbolic dimension's value when the program runs."""
    if isinstance(value, DimExpr):
        return _convert(S.dim_as_value_p.bind(dim=value), dtype)
    return _scalar(value, dtype)


def _iota(n: int, dtype: np.dtype) -> Any:
    return S.iota_p.bind(dtype=dtype, shape=(n,), dimension=0)


def _reshape(x: Any, shape: tuple[int, ...]) -> Any:
    if shape_of(x) == tuple(shape):
        return x
    return S.reshape_p.bind(x, new_sizes=tuple(shape), dimensions=None)


def _convert(x: Any, dtype: np.dtype) -> Any:
    if _is_host(x):
        return _const(_host_value(x).astype(dtype), dtype)
    if x.dtype == dtype:
        return x
    return S.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=False)


def _broadcast(x: Any, shape: tuple[int, ...], dims: tuple[int, ...] | None = None) -> Any:
    """``broadcast_in_dim``; on the host for constants so staged programs keep one constant."""
    xs = shape_of(x)
    if dims is None:
        dims = tuple(range(len(shape) - len(xs), len(shape)))
    if xs == tuple(shape) and dims == tuple(range(len(shape))):
        return x
    if _is_host(x):
        v = _host_value(x)
        view = [1] * len(shape)
        for i, d in enumerate(dims):
            view[d] = v.shape[i]
        return _const(np.broadcast_to(v.reshape(view), shape), v.dtype)
    return S.broadcast_in_dim_p.bind(x, shape=tuple(shape), broadcast_dimensions=tuple(dims))


def _normalize(idx: Any, size: int, strong_add: bool = False) -> Any:
    """Wrap negative indices once (``i + size`` where ``i < 0``); unsigned indices are left alone.
    ``strong_add``: a weak-typed traced index is made strong before the add, as JAX's ``dynamic_slice``
    start (``i + size``, a promoting add) is."""
    if isinstance(idx, (int, np.integer)):
        return idx + size if idx < 0 else idx
    d = _host_value(idx).dtype if _is_host(idx) else idx.dtype
    if d.kind == "u":
        return idx
    if isinstance(size, DimExpr):  # a symbolic size: its run-time value in the index's dtype (as JAX's)
        idx = as_operand(idx) if not _is_host(idx) else _const(_host_value(idx), d)
        size_c = _convert(S.dim_as_value_p.bind(dim=size), d)
        return S.select_n_p.bind(E.lt_p.bind(idx, _scalar(0, d)), idx, E.add_p.bind(idx, size_c))
    if d.kind == "i" and np.iinfo(d).max < size:
        # A narrow index type cannot hold ``i + size``: widen it first (as JAX does), so -1 of int8 on an
        # axis of 200 is 199, not an overflow.
        idx = _convert(idx, _index_dtype((size,)))
    if _is_host(idx):
        v = _host_value(idx)
        return _const(np.where(v < 0, v + size, v), v.dtype)
    size_c = _scalar(size, idx.dtype)
    zero = _scalar(0, idx.dtype)
    neg = E.lt_p.bind(idx, _broadcast_scalar(zero, idx))
    addend = idx
    if strong_add and isinstance(idx, Tracer) and idx.aval.weak_type:
        addend = S.convert_element_type_p.bind(idx, new_dtype=idx.dtype, weak_type=False)
    return S.select_n_p.bind(neg, idx, E.add_p.bind(addend, _broadcast_scalar(size_c, idx)))


def _broadcast_scalar(c: Any, like: Any) -> Any:
    """Elementwise primitives take rank-0 operands alongside arrays, so nothing to do."""
    return c


# ============================================================================
# Parsing


class Slice:
    """A slice of ``size`` elements from ``start``, every ``stride``-th (``ftrans.ds(start, size, stride)``).

    ``start`` may be traced (the slice's position is chosen when the program runs); ``size`` and ``stride``
    are static. Reading clamps the window into the axis, as ``lax.dynamic_slice`` does; an update whose
    window falls outside the axis is dropped, as JAX's default scatter mode. A pytree: a traced ``start``
    is its leaf, the static parts its structure.
    """

    __slots__ = ("start", "size", "stride")

    def __init__(self, start: Any, size: Any, stride: int = 1):
        if stride < 0:
            raise FtransValueError("`stride` must be >= 0.")
        self.start, self.size, self.stride = start, size, stride

    def __repr__(self) -> str:
        return f"Slice(start={self.start!r}, size={self.size!r}, stride={self.stride!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Slice):
            return NotImplemented
        return all(a is b or (isinstance(a, int) and isinstance(b, int) and a == b)
                   for a, b in zip((self.start, self.size, self.stride), (other.start, other.size, other.stride)))

    __hash__ = None  # type: ignore[assignment]

    def tree_flatten(self) -> tuple:
        static_start = isinstance(self.start, (int, np.integer))
        return ((None if static_start else self.start,),
                (self.start if static_start else None, self.size, self.stride))

    @classmethod
    def tree_unflatten(cls, aux: tuple, children: tuple) -> Slice:
        return cls(children[0] if aux[0] is None else aux[0], aux[1], aux[2])


def dslice(start: Any, size: Any = None, stride: int | None = None) -> slice | Slice:
    """A slice whose ``start`` may be traced, for indexing (``x[ftrans.ds(i, 2)]``, ``x.at[ftrans.ds(i, 2)]``).

    As the builtin ``slice``: ``dslice(None)`` is ``:``, ``dslice(j)`` is ``:j``, ``dslice(i, n)`` is
    ``i:i+n`` and ``dslice(i, n, stride)`` is ``i:i+n*stride:stride`` (``n`` elements), but ``i`` may be a
    traced integer; ``n`` and ``stride`` must be static.

    Args:
      start: the first index (an int, or a traced integer scalar); ``None`` for ``:``.
      size: the number of elements (a static int); ``None`` makes ``start`` the size, from 0.
      stride: the step between elements (a static int >= 0; default 1).

    Returns:
      ``slice(None)`` when ``start`` is ``None``, otherwise a :class:`Slice`.

    Examples:
      >>> import ftrans, ftrans.numpy as jnp
      >>> x = jnp.arange(10)
      >>> ftrans.jit(lambda x, i: x[ftrans.ds(i, 2)])(x, 4)
      Array([4, 5], dtype=int32)
    """
    if start is None:
        return slice(None)
    if stride is None:
        stride = 1
    if not isinstance(stride, (int, np.integer)):
        raise FtransValueError(f"ds: the stride must be a static int, got {stride!r}")
    if size is None:
        start, size = 0, start
    size = operator.index(np.asarray(concrete_or_error(size, "ds: the size (number of elements)")).item())
    return Slice(start, size, int(stride))


ds = dslice

from ftrans.core.pytrees import register_pytree_node_class as _register  # noqa: E402

_register(Slice)


class _Entry(NamedTuple):
    kind: str  # "none" | "ellipsis" | "slice" | "int" | "array" | "bool" | "dslice"
    value: Any


def _as_index_tuple(idx: Any) -> tuple:
    if isinstance(idx, tuple):
        return idx
    if isinstance(idx, list):
        # jax rejects every non-tuple sequence (NumPy's heuristics here are deprecated).
        raise FtransTypeError(
            "Using a non-tuple sequence for multidimensional indexing is not allowed; use "
            "`arr[tuple(seq)]` for a tuple of indices, or `arr[jnp.array(seq)]` for an index array."
        )
    return (idx,)


def _float_index_error(dtype: Any) -> FtransTypeError:
    return FtransTypeError(
        f"Indexer must have integer or boolean type, got indexer with type {np.dtype(dtype).name}. "
        "Convert float indices with .astype(jnp.int32)."
    )


def _sequence_entry(seq: Any) -> _Entry:
    """A (nested) list used as one index: an integer or boolean index array."""
    if len(seq) == 0:
        return _Entry("array", np.zeros((0,), dtypes.canonicalize(np.int32)))
    from ftrans.numpy._creation import asarray

    def has_traced(o):
        return isinstance(o, Tracer) or (isinstance(o, (list, tuple)) and any(has_traced(e) for e in o))

    if has_traced(seq):
        arr = asarray(seq)
        d = dtype_weak(arr)[0]
    else:
        try:
            arr = np.asarray([_host_value(e) if isinstance(e, Array) else e for e in seq])
        except ValueError:
            raise FtransIndexError(f"a ragged nested list {seq!r} is not a valid index") from None
        d = arr.dtype
        if d.kind in "iu":
            arr = arr.astype(dtypes.canonicalize(d))
    if d == np.bool_:
        return _Entry("bool", arr)
    if d.kind in "iu":
        return _Entry("array", arr)
    raise _float_index_error(d)


def _entry(i: Any) -> _Entry:
    if i is None:
        return _Entry("none", None)
    if i is Ellipsis:
        return _Entry("ellipsis", None)
    if isinstance(i, slice):
        return _Entry("slice", i)
    if isinstance(i, Slice):
        return _Entry("dslice", i)
    if isinstance(i, (bool, np.bool_)):
        return _Entry("bool", np.asarray(i))
    if isinstance(i, (int, np.integer)):
        return _Entry("int", int(i))
    if isinstance(i, (Array, Tracer, np.ndarray)):
        d = dtype_weak(i)[0] if not isinstance(i, np.ndarray) else i.dtype
        if d == np.bool_:
            return _Entry("bool", i)
        if d.kind in "iu":
            return _Entry("array", i)
        raise _float_index_error(d)
    if isinstance(i, str):
        raise FtransTypeError(f"ftrans does not support string indexing; got idx={i!r}")
    if isinstance(i, (list, tuple)):
        return _sequence_entry(i)
    if isinstance(i, (float, complex, np.generic)):
        raise _float_index_error(np.asarray(i).dtype)
    if type(i) is _array_mod.buffer_type:  # a jax.Array index: as the ftrans array over its buffer
        f = _array_mod.from_foreign(i)
        if f is not None:
            return _entry(f)
    raise FtransIndexError(
        "only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and integer or boolean "
        f"arrays are valid indices; got {i!r} of type {type(i).__name__}"
    )


def _consumed(e: _Entry) -> int:
    if e.kind in ("none", "ellipsis"):
        return 0
    if e.kind == "bool":
        return len(shape_of(e.value))
    return 1


class _Entries(list):
    """Parsed entries. ``split``: an ellipsis that expands to no axes stands between two advanced (integer or
    array) indices; as for any other separation, NumPy then puts the broadcast index dimensions first."""

    split = False


def _parse(idx: Any, shape: tuple[int, ...]) -> list[_Entry]:
    """Typed entries with the ellipsis (and implicit trailing ``:``) expanded to slices."""
    entries = [_entry(i) for i in _as_index_tuple(idx)]
    n_ell = sum(e.kind == "ellipsis" for e in entries)
    if n_ell > 1:
        raise FtransIndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed(e) for e in entries)
    if used > len(shape):
        raise FtransIndexError(
            f"Too many indices: array is {len(shape)}-dimensional, but {used} were indexed "
            f"(array shape {shape})"
        )
    fill = [_Entry("slice", slice(None))] * (len(shape) - used)
    if n_ell:
        k = next(i for i, e in enumerate(entries) if e.kind == "ellipsis")
        out = _Entries(entries[:k] + fill + entries[k + 1:])
        adv = ("int", "array", "bool")
        out.split = not fill and any(e.kind in adv for e in entries[:k]) and any(e.kind in adv for e in entries[k + 1:])
        return out
    return entries + fill


def _slice_entry(v: Any, where: str) -> int | None:
    if v is None or type(v) is DimExpr:  # a symbolic bound (shape polymorphism) stays symbolic
        return v
    if isinstance(v, Tracer):
        v = maybe_concrete(v)  # an autodiff tracer outside jit has its value
    if isinstance(v, Tracer):
        raise FtransIndexError(
            f"Slice entries must be static integers, but the slice {where} is a traced value "
            f"{v.aval.str_short()}. Use lax.dynamic_slice(x, start, size) for a traced start with a "
            "static size."
        )
    try:
        return operator.index(_host_value(v).item() if isinstance(v, (Array, np.ndarray)) else v)
    except TypeError:
        raise FtransTypeError(f"slice indices must be integers or None, got {v!r} in {where}") from None


def _slice_indices(s: slice, size: int) -> tuple[int, int, int]:
    start = _slice_entry(s.start, "start")
    stop = _slice_entry(s.stop, "stop")
    step = _slice_entry(s.step, "step")
    if step == 0:
        raise FtransValueError("slice step cannot be zero")
    if isinstance(size, DimExpr):
        return _symbolic_slice_indices(start, stop, step, size)
    return slice(start, stop, step).indices(size)


def _symbolic_slice_indices(start: Any, stop: Any, step: Any, size: DimExpr) -> tuple:
    """``slice.indices`` for an axis of symbolic ``size``: the same normalisation, with ``max``/``min`` of
    dimensions where a comparison depends on the size (as JAX's shape polymorphism does)."""
    step = 1 if step is None else step
    lo, hi = (0, size) if step > 0 else (-1, size - 1)

    def norm(v: Any, default: Any) -> Any:
        if v is None:
            return default
        if v < 0:
            return max_dim(lo, v + size)
        return min_dim(hi, v)

    return norm(start, lo if step > 0 else hi), norm(stop, hi if step > 0 else lo), step


def _surely(cmp: Callable[[Any, Any], Any], a: Any, b: Any) -> bool:
    """Whether a comparison of dimensions holds for every value of their variables."""
    try:
        return bool(cmp(a, b))
    except InconclusiveDimensionOperation:
        return False


def _axes_of(entries: list[_Entry]) -> list[int]:
    """The first array axis each entry consumes."""
    out, ax = [], 0
    for e in entries:
        out.append(ax)
        ax += _consumed(e)
    return out


_DEFERRED = "static index errors reported later"


def static_index_errors_reported_later() -> Any:
    """Inside: a static integer index out of range is not refused while tracing but indexed as a traced one
    (clamped, as in JAX), so a run-time index check sees it (``checkify`` with ``index_checks`` reports it in
    its error value, as JAX does).  A tracing mode, so jitted functions traced inside are cached apart."""
    from ftrans.core.config import trace_mode

    return trace_mode(_DEFERRED)


def _static_ints_traced(entries: list[_Entry], shape: tuple[int, ...], normalize: bool) -> list[_Entry]:
    """``entries`` with each out-of-range static integer made an index array (a run-time index)."""
    out = []
    for e, ax in zip(entries, _axes_of(entries)):
        if e.kind == "int" and shape[ax] and not 0 <= (e.value + shape[ax] if normalize and e.value < 0
                                                       else e.value) < shape[ax]:
            e = _Entry("array", np.asarray(e.value, dtypes.canonicalize(np.int32)))
        out.append(e)
    if getattr(entries, "split", False):
        out = _Entries(out)
        out.split = True
    return out


def _check_static_ints(entries: list[_Entry], shape: tuple[int, ...], normalize: bool) -> None:
    for e, ax in zip(entries, _axes_of(entries)):
        if e.kind == "int":
            size = shape[ax]
            i = e.value + size if normalize and e.value < 0 else e.value
            if isinstance(size, DimExpr):
                try:
                    inside = 0 <= i < size
                except InconclusiveDimensionOperation:  # in range for some sizes: clamped (as JAX's gather)
                    inside = True
            else:
                inside = 0 <= i < size
            if not inside:
                raise FtransIndexError(
                    f"index {e.value} is out of bounds for axis {ax} with size {size} "
                    f"(array shape {shape}); use an in-range index, or x.at[i].get(mode='clip') / "
                    "mode='fill' for clamped or filled reads"
                )


# ============================================================================
# Strategy 1 and 2: static and dynamic slices


def _finish_slice(out: Any, rev: list[int], squeeze: list[int], newaxis: list[int]) -> Any:
    if rev:
        out = S.rev_p.bind(out, dimensions=tuple(rev))
    if squeeze:
        out = S.squeeze_p.bind(out, dimensions=tuple(squeeze))
    if newaxis:
        out = S.expand_dims_p.bind(out, dimensions=tuple(newaxis))
    return out


def _static_slice(x: Any, entries: list[_Entry], normalize: bool) -> Any:
    shape = shape_of(x)
    starts, limits, strides, rev, squeeze, newaxis = [], [], [], [], [], []
    pre_rev: list[int] = []
    for e in entries:
        if e.kind == "none":
            newaxis.append(len(starts) - len(squeeze) + len(newaxis))
            continue
        ax = len(starts)
        size = shape[ax]
        if e.kind == "int":
            if size == 0:
                raise FtransIndexError(f"index is out of bounds for axis {ax} with size 0")
            i = e.value + size if normalize and e.value < 0 else e.value
            i = min_dim(max_dim(i, 0), size - 1)  # only reachable out of range in mode='clip' (or symbolic)
            starts.append(i), limits.append(i + 1), strides.append(1), squeeze.append(ax)
        else:
            start, stop, step = _slice_indices(e.value, size)
            if step < 0 and (isinstance(size, DimExpr) or isinstance(step, DimExpr)):
                # symbolic: the axis reversed first, then a forward slice of it (element j of the reversed
                # axis is element size-1-j), so no bound needs the symbolic count of elements
                lo = size - 1 - start
                starts.append(lo), limits.append(max_dim(lo, size - 1 - stop)), strides.append(-step)
                pre_rev.append(ax)
            elif step < 0:
                first = min(size, stop + 1 + abs(start - stop - 1) % -step) if step != -1 else \
                    min_dim(size, stop + 1)
                starts.append(first), limits.append(max(first, start + 1)), strides.append(-step)
                rev.append(ax)
            elif step != 1 and any(isinstance(v, DimExpr) for v in (start, stop, step)):
                # symbolic: the limit just past the last element taken, so the size prints as JAX's
                # ``floordiv(stop - start + step - 1, step)``
                n = max_dim(0, (stop - start + step - 1) // step)
                last = start + (n - 1) * step + 1
                if not (_surely(operator.ge, n, 1) and _surely(operator.le, last, size)):
                    last = max_dim(start, stop)
                starts.append(start), limits.append(last), strides.append(step)
            else:
                starts.append(start), limits.append(max_dim(start, stop)), strides.append(step)
    out = x = S.rev_p.bind(x, dimensions=tuple(pre_rev)) if pre_rev else x
    if tuple(starts) != (0,) * len(shape) or tuple(limits) != tuple(shape) or any(s != 1 for s in strides):
        out = S.slice_p.bind(
            x, start_indices=tuple(starts), limit_indices=tuple(limits),
            strides=None if all(s == 1 for s in strides) else tuple(strides),
        )
    return _finish_slice(out, rev, squeeze, newaxis)


def _dynamic_slice_ok(entries: list[_Entry]) -> bool:
    for e in entries:
        if e.kind == "array":
            if isinstance(e.value, (list, tuple)) or shape_of(e.value) != ():
                return False
        elif e.kind == "slice":
            if e.value.step not in (None, 1, -1):
                return False
        elif e.kind not in ("none", "int"):
            return False
    return True


def _dynamic_slice(x: Any, entries: list[_Entry], normalize: bool) -> Any:
    shape = shape_of(x)
    starts: list[Any] = []
    sizes, rev, squeeze, newaxis = [], [], [], []
    for e in entries:
        if e.kind == "none":
            newaxis.append(len(starts) - len(squeeze) + len(newaxis))
            continue
        ax = len(starts)
        size = shape[ax]
        if e.kind in ("int", "array"):
            if size == 0:
                raise FtransIndexError(f"index is out of bounds for axis {ax} with size 0")
            starts.append(e.value), sizes.append(1), squeeze.append(ax)
        else:
            start, stop, step = _slice_indices(e.value, size)
            if step < 0:
                first = stop + 1
                starts.append(first), sizes.append(max(0, start + 1 - first)), rev.append(ax)
            else:
                starts.append(start), sizes.append(max(0, stop - start))
    idx_dtype = _index_dtype(shape)
    operands = []
    for ax, s in enumerate(starts):
        if isinstance(s, int):
            s = min(max(s + shape[ax] if normalize and s < 0 else s, 0), max(shape[ax] - 1, 0))
            operands.append(_scalar(s, idx_dtype))
            continue
        s = as_operand(s) if not isinstance(s, np.ndarray) else _const(s, s.dtype)
        if len(starts) > 1:
            s = _convert(s, idx_dtype)
        operands.append(_normalize(s, shape[ax], strong_add=True) if normalize else s)
    out = S.dynamic_slice_p.bind(x, *operands, slice_sizes=tuple(sizes))
    return _finish_slice(out, rev, squeeze, newaxis)


# ============================================================================
# Strategy 3: gather (and, transposed, scatter)


class _GatherIndexer(NamedTuple):
    slice_shape: tuple[int, ...]  # the result shape, including newaxis dims
    gather_slice_shape: tuple[int, ...]
    indices: Any  # None when no index array is needed
    dnums: GatherDimensionNumbers
    unique_indices: bool
    indices_are_sorted: bool
    newaxis_dims: tuple[int, ...]
    scalar_bool_dims: tuple[int, ...]


def _expand_bool(entries: list[_Entry], shape: tuple[int, ...]) -> tuple[list[_Entry], list[bool]]:
    """Concrete boolean masks become integer index arrays; scalar bools stay (marked).

    Returns the new entries and, per entry, whether it came from a scalar bool.
    """
    out: list[_Entry] = []
    scalar: list[bool] = []
    for e, ax in zip(entries, _axes_of(entries)):
        if e.kind != "bool":
            out.append(e)
            scalar.append(False)
            continue
        value = maybe_concrete(e.value)  # an autodiff tracer outside jit: its mask is known
        if isinstance(value, Tracer):
            raise NonConcreteBooleanIndexError(
                f"Array boolean indices must be concrete; got a traced mask {e.value.aval.str_short()}. "
                "The result's shape would depend on the mask's values. Use jnp.where(mask, x, fill) "
                "to keep the shape, or jnp.nonzero(mask, size=N) / jnp.where(mask, size=N) for a "
                "static number of indices."
            )
        mask = _host_value(value)
        if mask.ndim == 0:
            out.append(_Entry("bool", bool(mask)))
            scalar.append(True)
            continue
        expected = shape[ax:ax + mask.ndim]
        if not all(s1 in (0, s2) for s1, s2 in zip(mask.shape, expected)):
            raise FtransIndexError(
                f"boolean index did not match shape of indexed array: got mask shape {mask.shape}, "
                f"expected {tuple(expected)} (axes {ax}..{ax + mask.ndim - 1} of {shape})"
            )
        for arr in np.nonzero(mask):
            out.append(_Entry("array", arr.astype(dtypes.canonicalize(np.int32))))
            scalar.append(False)
    return out, scalar


def _to_gather(x_shape: tuple[int, ...], entries: list[_Entry], normalize: bool,
               wrap_ds: bool = False) -> _GatherIndexer:
    """The gather description of ``entries``. ``wrap_ds``: a unit-stride ``ds`` start below 0 counts from the
    end (JAX reads such an index with a dynamic slice, which wraps it; its gathers and scatters do not)."""
    split = getattr(entries, "split", False)
    entries, from_scalar_bool = _expand_bool(entries, x_shape)
    # Scalar bools add a length-1 axis to x, indexed by arange(1) (True) or arange(0) (False).
    shape = list(x_shape)
    scalar_bool_dims = []
    ax = 0
    for k, e in enumerate(entries):
        if from_scalar_bool[k]:
            shape.insert(ax, 1)
            scalar_bool_dims.append(ax)
            entries[k] = _Entry("array", np.arange(int(e.value), dtype=dtypes.canonicalize(np.int32)))
        ax += _consumed(entries[k])
    shape = tuple(shape)
    idx_dtype = _index_dtype(shape)
    axes = _axes_of(entries)

    adv_pos = [k for k, e in enumerate(entries) if e.kind in ("int", "array")]
    adv_contiguous = not split and all(b - a == 1 for a, b in zip(adv_pos, adv_pos[1:]))
    adv_arrays = []
    for k in adv_pos:
        v = entries[k].value
        if isinstance(v, (int, np.integer)) or _is_host(v):
            v = v if isinstance(v, (int, np.integer)) else _const(_host_value(v), _host_value(v).dtype)
        else:
            v = as_operand(v)
        v = _normalize(v, shape[axes[k]]) if normalize else v
        adv_arrays.append(v if not isinstance(v, (int, np.integer)) else _scalar(v, idx_dtype))
    adv_shape = broadcast_shapes("indexing", [shape_of(a) for a in adv_arrays], adv_arrays) if adv_arrays else ()
    insert_at = (adv_pos[0] if adv_contiguous else 0) if adv_pos else -1

    offset_dims: list[int] = []
    collapsed: list[int] = []
    start_index_map: list[int] = []
    pieces: list[tuple[Any, int]] = []  # (index array, first batch dim it spans)
    batch_shape: list[int] = []
    slice_shape: list[int] = []
    newaxis_dims: list[int] = []
    gather_slice_shape: list[int] = []
    y_axis = 0  # axis of the result (with newaxis dims)
    g_axis = 0  # axis of the gather output (without them)

    def window(axis: int, n: Any, size: Any, first: Callable[[], Any]) -> None:
        # ``n`` consecutive elements of ``axis`` from ``first()`` (read only where the window is not the whole
        # axis): one offset dimension of the gather
        if n != size:
            pieces.append((first(), len(batch_shape)))
            start_index_map.append(axis)
        gather_slice_shape.append(n)
        offset_dims.append(g_axis)

    def gathered(axis: int, n: Any, positions: Any) -> None:
        # ``n`` positions of ``axis`` (strided): one batch dimension of the gather's indices
        pieces.append((positions, len(batch_shape)))
        start_index_map.append(axis)
        collapsed.append(axis)
        batch_shape.append(n)
        gather_slice_shape.append(1)

    for k, e in enumerate(entries):
        if k == insert_at:
            start = len(batch_shape)
            for a in adv_arrays:
                pieces.append((_broadcast(_convert(a, idx_dtype), adv_shape), start))
            batch_shape += adv_shape
            start_index_map += [axes[p] for p in adv_pos]
            collapsed += [axes[p] for p in adv_pos]
            slice_shape += adv_shape
            y_axis += len(adv_shape)
            g_axis += len(adv_shape)
        if e.kind in ("int", "array"):
            gather_slice_shape.append(1)
            continue
        if e.kind == "none":
            slice_shape.append(1)
            newaxis_dims.append(y_axis)
            y_axis += 1
            continue
        size = shape[axes[k]]
        if e.kind == "dslice":  # ds(start, n, stride): n elements from a start that may be traced
            n, step = e.value.size, e.value.stride
            first = e.value.start
            wrap = normalize and wrap_ds and step == 1
            if isinstance(first, (int, np.integer)):
                first = _scalar(_normalize(int(first), size) if wrap else int(first), idx_dtype)
            else:
                first = _convert(as_operand(first) if not isinstance(first, np.ndarray) else
                                 _const(first, first.dtype), idx_dtype)
                first = _normalize(first, size) if wrap else first
            slice_shape.append(n)
            if step == 1:
                window(axes[k], n, size, lambda first=first: first)
            else:
                gathered(axes[k], n, E.add_p.bind(_const(np.arange(n) * step, idx_dtype), first))
            y_axis += 1
            g_axis += 1
            continue
        start, stop, step = _slice_indices(e.value, size)
        symbolic = any(isinstance(v, DimExpr) for v in (start, stop, step))
        if symbolic and start == stop:
            n = 0
        elif symbolic:  # shape polymorphism: the count of elements as a dimension expression
            n = max_dim(0, (stop - start + step - 1) // step if step > 0 else (start - stop - step - 1) // -step)
        else:
            n = len(range(start, stop, step))
        slice_shape.append(n)
        if step == 1:
            window(axes[k], n, size, lambda start=start: _dim_scalar(start, idx_dtype))
        elif symbolic:  # start + step * iota(n), computed when the program runs
            iota = S.iota_p.bind(dtype=idx_dtype, shape=(n,), dimension=0)
            gathered(axes[k], n, E.add_p.bind(E.mul_p.bind(iota, _dim_scalar(step, idx_dtype)),
                                              _dim_scalar(start, idx_dtype)))
        else:
            gathered(axes[k], n, _const(np.arange(start, stop, step), idx_dtype))
        y_axis += 1
        g_axis += 1

    if not pieces:
        indices = None
    elif len(pieces) == 1:
        g = pieces[0][0]
        indices = _broadcast(g, (*shape_of(g), 1), tuple(range(len(shape_of(g)))))
    else:
        full = (*batch_shape, 1)
        indices = _concat([
            _broadcast(g, full, tuple(range(s, s + len(shape_of(g))))) for g, s in pieces
        ], len(batch_shape))
    dnums = GatherDimensionNumbers(tuple(offset_dims), tuple(sorted(collapsed)), tuple(start_index_map))
    return _GatherIndexer(
        tuple(slice_shape), tuple(gather_slice_shape), indices, dnums,
        # (scalar integer indices pick one window: unique and sorted, as JAX's basic integer indexing)
        unique_indices=not adv_shape, indices_are_sorted=not adv_shape,
        newaxis_dims=tuple(newaxis_dims), scalar_bool_dims=tuple(scalar_bool_dims),
    )


def _concat(parts: list, axis: int) -> Any:
    if all(_is_host(p) for p in parts):
        vals = [_host_value(p) for p in parts]
        return _const(np.concatenate(vals, axis=axis), vals[0].dtype)
    return S.concatenate_p.bind(*parts, dimension=axis)


def _gather_index(x: Any, entries: list[_Entry], mode: GatherScatterMode, fill_value: Any,
                  indices_are_sorted: bool, unique_indices: bool, normalize: bool) -> Any:
    wrap_ds = mode is not GatherScatterMode.FILL_OR_DROP and all(
        e.kind != "dslice" or e.value.stride == 1 for e in entries) and _dynamic_slice_ok(
        [_Entry("none", None) if e.kind == "dslice" else e for e in entries])
    ix = _to_gather(shape_of(x), entries, normalize, wrap_ds)
    d, weak = dtype_weak(x)
    if 0 in ix.slice_shape:  # nothing to gather; still on the device x is committed to, as in JAX
        out = _full(ix.slice_shape, 0, d, weak)
        if type(x) is DeviceArray and x._committed:
            from ftrans.devices import device_put

            out = device_put(out, x.device)
        return out
    y = x
    if ix.scalar_bool_dims:
        y = S.expand_dims_p.bind(y, dimensions=ix.scalar_bool_dims)
    if ix.indices is not None and _trace._error_checks:  # error_checking_behavior(oob="raise")
        from ftrans.numpy import error as _err

        _err._check_precondition_oob_gather(shape_of(x), ix.indices)
    if ix.indices is not None:
        y = I.gather_p.bind(
            y, ix.indices, dimension_numbers=ix.dnums, slice_sizes=ix.gather_slice_shape, mode=mode,
            fill_value=I.gather_fill_param(d, mode, fill_value),
            indices_are_sorted=bool(indices_are_sorted or ix.indices_are_sorted),
            unique_indices=bool(unique_indices or ix.unique_indices),
        )
    if ix.newaxis_dims:
        y = S.expand_dims_p.bind(y, dimensions=ix.newaxis_dims)
    return y


# ============================================================================
# x[idx]


_STRATEGIES = ("auto", "gather", "scatter", "static_slice", "dynamic_slice")


def _indexing_strategy(strategy: Any) -> str:
    """``x.at[idx].get(strategy=)``'s value (jax 0.12): one of JAX's strategy names, or its enum member."""
    value = strategy if isinstance(strategy, str) else getattr(strategy, "value", None)
    if not isinstance(value, str) or (not isinstance(strategy, str) and type(strategy).__name__ != "IndexingStrategy"):
        raise FtransTypeError(f"Expected strategy to be IndexingStrategy or str; got {strategy!r}")
    if value not in _STRATEGIES:
        raise FtransValueError(f"Unknown indexing strategy: {strategy!r}; use 'auto', 'gather', 'static_slice' "
                               "or 'dynamic_slice'")
    if value == "scatter":
        raise FtransValueError("Indexing strategy IndexingStrategy.SCATTER is not supported for take.")
    return value


def _check_strategy(strategy: str, entries: list[_Entry], parsed: Any) -> None:
    """JAX's refusals of a slicing strategy the index does not allow."""
    if parsed not in (GatherScatterMode.PROMISE_IN_BOUNDS, GatherScatterMode.CLIP):
        raise FtransValueError(f"{strategy} requires mode='promise_in_bounds' or mode='clip'")
    for e in entries:
        if strategy == "static_slice":
            static_ds = e.kind == "dslice" and isinstance(e.value.start, (int, np.integer))
            if e.kind not in ("none", "slice", "int") and not static_ds:
                raise FtransTypeError("static_slice: indices must be static scalars or slices. Got index of type "
                                      f"{type(e.value).__name__}; use strategy='dynamic_slice' or 'gather'")
        elif e.kind == "bool":
            raise FtransTypeError("dynamic_slice: indices must be scalars or slices. Got a boolean index")
        elif e.kind == "array" and (isinstance(e.value, (list, tuple)) or shape_of(e.value) != ()):
            raise FtransTypeError("dynamic_slice: only scalar indices allowed. Got an index array of shape "
                                  f"{tuple(np.shape(e.value))}")
        elif (e.kind == "slice" and e.value.step not in (None, 1, -1)) or (e.kind == "dslice" and e.value.stride != 1):
            raise FtransTypeError(f"dynamic_slice: only unit steps supported in slice. Got {e.value}")


def _rewriting_take(x: Any, idx: Any, *, mode: Any = None, fill_value: Any = None,
                    indices_are_sorted: bool = False, unique_indices: bool = False,
                    normalize: bool = True, out_sharding: Any = None, strategy: str = "auto") -> Any:
    x = as_operand(x)
    shape = shape_of(x)
    entries = _parse(idx, shape)
    parsed = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    if parsed is GatherScatterMode.PROMISE_IN_BOUNDS:
        if trace_mode_on(_DEFERRED):
            entries = _static_ints_traced(entries, shape, normalize)
        else:
            _check_static_ints(entries, shape, normalize)
    if strategy in ("static_slice", "dynamic_slice"):
        _check_strategy(strategy, entries, parsed)
        kinds = {e.kind for e in entries}
        if strategy == "static_slice" and kinds <= {"none", "slice", "int"}:
            return _static_slice(x, entries, normalize)
        if strategy == "dynamic_slice" and _dynamic_slice_ok(entries):
            return _dynamic_slice(x, entries, normalize)
    if parsed is not GatherScatterMode.FILL_OR_DROP and strategy != "gather":
        kinds = {e.kind for e in entries}
        if kinds <= {"none", "slice", "int"}:
            return _static_slice(x, entries, normalize)
        if _dynamic_slice_ok(entries):
            return _dynamic_slice(x, entries, normalize)
    # (``x.at[idx].get(out_sharding=)``: as JAX's, only a gather is laid out so; a slice keeps x's layout)
    return _laid_out("get", out_sharding, x, lambda: _gather_index(x, entries, parsed, fill_value,
                                                                  indices_are_sorted, unique_indices, normalize))


def _getitem(x: Any, idx: Any) -> Any:
    """``x[idx]``: full NumPy indexing, lowered to slices, a dynamic slice, or a gather."""
    return _rewriting_take(x, idx)


# ============================================================================
# x.at[idx]


def _values_for(x: Any, values: Any) -> Any:
    """Update values as an array; an in-range Python int keeps an integer x's dtype (as in jax)."""
    d, _ = dtype_weak(x)
    if type(values) is int and d.kind in "iu" and np.iinfo(d).min <= values <= np.iinfo(d).max:
        return _scalar(values, d)
    if isinstance(values, (list, tuple)):
        from ftrans.numpy._creation import asarray

        return asarray(values)
    check_arraylike("x.at[idx] update", values)
    return as_operand(values)


def _scatter_update(x: Any, idx: Any, values: Any, prim: Any, name: str, *, indices_are_sorted: bool,
                    unique_indices: bool, mode: Any, normalize: bool) -> Any:
    x = as_operand(x)
    d, weak = dtype_weak(x)
    y = _values_for(x, values)
    ix = _to_gather(shape_of(x), _parse(idx, shape_of(x)), normalize)
    if 0 in ix.slice_shape:
        return x
    (xp, yp), pd, _ = promote_dtypes(name, x, y)
    if pd != d:
        _unsafe_cast_warning(name, dtype_weak(y)[0], d)
    if prim in (I.scatter_add_p, I.scatter_sub_p, I.scatter_mul_p) and pd == np.bool_:
        raise FtransTypeError(
            f"{name}: boolean arrays do not support this update (x has dtype bool); "
            "use .set, .min or .max, or convert x to an integer dtype"
        )
    ys = shape_of(yp)
    try:
        broadcast_shapes(name, [ys, ix.slice_shape])
        if len(ys) > len(ix.slice_shape):
            raise ValueError
    except ValueError:
        raise FtransValueError(
            f"{name}: cannot broadcast update values of shape {ys} to the indexed shape "
            f"{ix.slice_shape} of x[idx] (x has shape {shape_of(x)})"
        ) from None
    yp = broadcast_to_shape(yp, ix.slice_shape)
    if ix.newaxis_dims:
        yp = S.squeeze_p.bind(yp, dimensions=ix.newaxis_dims)
    if ix.scalar_bool_dims:
        xp = S.expand_dims_p.bind(xp, dimensions=ix.scalar_bool_dims)
    indices = ix.indices
    if indices is None:
        indices = _const(np.zeros((0,)), _index_dtype(shape_of(xp)))
    dn = ix.dnums
    yp = _typed_updates(xp, indices, yp, dn)
    out = prim.bind(
        xp, indices, yp,
        dimension_numbers=ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map),
        mode=GatherScatterMode.from_any(mode),
        indices_are_sorted=bool(indices_are_sorted or ix.indices_are_sorted),
        unique_indices=bool(unique_indices or ix.unique_indices),
    )
    if ix.scalar_bool_dims:
        out = S.squeeze_p.bind(out, dimensions=ix.scalar_bool_dims)
    if dtype_weak(out) != (d, weak):
        out = S.convert_element_type_p.bind(out, new_dtype=d, weak_type=weak)
    return out


def _typed_updates(xp: Any, indices: Any, yp: Any, dn: Any) -> Any:
    """Over Explicit mesh axes, untyped update values laid out as the slices of ``x`` they update (JAX's
    slice sharding): a window dimension taken whole keeps x's entry, the others the indices' entries."""
    from ftrans.core.sharding_rules import array_aval, overriding, spec_of

    xa = array_aval(xp)
    if xa.typed_sharding is None:
        return yp
    ya = array_aval(yp)
    if ya.typed_sharding is not None and any(e is not None for e in ya.typed_sharding.spec):
        return yp  # (typed replicated, as values made under a mesh context are, they are laid out as untyped ones)
    ospec, ispec = spec_of(xa), spec_of(array_aval(indices))
    owindow = [d for d in range(len(xa.shape)) if d not in dn.collapsed_slice_dims]
    from_indices = iter(ispec[:-1])
    spec = []
    for u in range(len(ya.shape)):
        if u in dn.offset_dims:
            o = owindow[dn.offset_dims.index(u)]
            spec.append(ospec[o] if ya.shape[u] == xa.shape[o] else None)
        else:
            spec.append(next(from_indices, None))
    named = [a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)]
    if not named or len(set(named)) != len(named) or overriding():  # (out_sharding= given: as JAX's auto_axes)
        return yp
    from ftrans.core.sharding import NamedSharding, PartitionSpec
    from ftrans.lax._sharding import with_sharding_constraint

    return with_sharding_constraint(yp, NamedSharding(xa.sharding.mesh, PartitionSpec(*spec)),
                                    _what="with_sharding_constraint" if ya.typed_sharding is None else "reshard")


def _unsafe_cast_warning(name: str, src: np.dtype, dst: np.dtype) -> None:
    """JAX's FutureWarning for update values whose dtype does not promote to x's (int32 into int16,
    float into int, ...): the values are still cast to x's dtype, as JAX does for now."""
    warnings.warn(
        f"scatter inputs have incompatible types: cannot safely cast value from dtype={src.name} to "
        f"dtype={dst.name} in {name} (x keeps its dtype; the values are cast). JAX will make this an "
        f"error in a future release: convert the values first, e.g. values.astype({dst.name}).",
        FutureWarning, stacklevel=user_stacklevel())


def _laid_out(name: str, out_sharding: Any, operand: Any, compute: Any) -> Any:
    """``compute()`` (the gather or scatter of ``x.at[idx].name``) laid out, and over Explicit mesh axes typed,
    as ``out_sharding`` (a bare PartitionSpec takes the current mesh, or inside ``jit`` the operand's)."""
    if out_sharding is None:
        return compute()
    from ftrans.lax._sharding import with_out_sharding

    return with_out_sharding(f"x.at[idx].{name}", out_sharding, compute, operands=(operand,))


def _updated_as(name: str, out_sharding: Any, operand: Any, index: Any, values: Any, update: Any) -> Any:
    """``update(operand, index, values)`` (a scatter of ``x.at[idx].name``) laid out as ``out_sharding``.  As
    JAX's (``auto_axes``), traced operands typed sharded over Explicit axes are resharded to replicated first,
    the scatter runs on those and its result is resharded to ``out_sharding``: the staged program replays
    (``checkify``, ``eval_jaxpr``) without the out_sharding override the scatter's sharding rule would need."""
    if out_sharding is None:
        return update(operand, index, values)
    from ftrans.core import pytrees as tree_util
    from ftrans.core.sharding import NamedSharding, PartitionSpec
    from ftrans.lax._sharding import with_sharding_constraint

    def typed(a: Any) -> bool:
        sh = a.aval.typed_sharding if isinstance(a, Tracer) else None
        return sh is not None and any(e is not None for e in sh.spec) and not (sh.spec.unreduced or sh.spec.reduced)

    leaves, tree = tree_util.tree_flatten((operand, index, values))
    if not any(typed(a) for a in leaves):
        return _laid_out(name, out_sharding, operand, lambda: update(operand, index, values))
    leaves = [with_sharding_constraint(a, NamedSharding(a.aval.typed_sharding.mesh, PartitionSpec()), _what="reshard")
              if typed(a) else a for a in leaves]
    out = update(*tree_util.tree_unflatten(tree, leaves))
    return _laid_out(name, out_sharding, operand, lambda: out)


class _IndexUpdateRef:
    """``x.at[idx]``: functional versions of ``x[idx] = v``, ``x[idx] += v``, ..."""

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def _update(self, values: Any, prim: Any, name: str, indices_are_sorted: bool, unique_indices: bool,
                mode: Any, out_sharding: Any, wrap_negative_indices: bool) -> Any:
        return _updated_as(name, out_sharding, self.array, self.index, values, lambda x, i, v: _scatter_update(
            x, i, v, prim, f"x.at[idx].{name}", indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices, mode=mode, normalize=wrap_negative_indices))

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True,
            strategy: Any = "auto") -> Any:
        """``x[idx]``, with control over out-of-bounds handling (``mode``, ``fill_value``) and, as jax 0.12's
        ``strategy``, over the operation that reads it: ``"auto"`` (a static slice if the index allows, else a
        dynamic slice, else a gather), ``"gather"``, ``"static_slice"`` or ``"dynamic_slice"`` (a
        ``TypeError`` or ``ValueError`` when the index or ``mode`` does not allow it). The values are the same
        whichever reads them."""
        strategy = _indexing_strategy(strategy)
        return _rewriting_take(
            self.array, self.index, mode=mode, fill_value=fill_value, indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices, normalize=wrap_negative_indices, out_sharding=out_sharding,
            strategy=strategy)

    def set(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = values`` without mutation (out-of-bounds updates are dropped by default)."""
        return self._update(values, I.scatter_p, "set", indices_are_sorted, unique_indices, mode,
                            out_sharding, wrap_negative_indices)

    def add(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] += values``; repeated indices accumulate."""
        return self._update(values, I.scatter_add_p, "add", indices_are_sorted, unique_indices, mode,
                            out_sharding, wrap_negative_indices)

    def subtract(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] -= values``: a scatter-sub, as JAX's."""
        return self._update(values, I.scatter_sub_p, "subtract", indices_are_sorted, unique_indices,
                            mode, out_sharding, wrap_negative_indices)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] *= values``; repeated indices accumulate."""
        return self._update(values, I.scatter_mul_p, "multiply", indices_are_sorted, unique_indices, mode,
                            out_sharding, wrap_negative_indices)

    mul = multiply

    def _ones_scaled(self, values: Any, name: str, indices_are_sorted: bool, unique_indices: bool,
                     mode: Any, out_sharding: Any, wrap_negative_indices: bool) -> Any:
        """Ones like x, multiplied by ``values`` at idx: jax's route to divide and power."""
        x = as_operand(self.array)
        d, weak = dtype_weak(x)
        ones = _full(shape_of(x), 1, d, weak)
        return _updated_as(name, out_sharding, ones, self.index, values, lambda o, i, v: _scatter_update(
            o, i, v, I.scatter_mul_p, f"x.at[idx].{name}", indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices, mode=mode, normalize=wrap_negative_indices))

    def divide(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
               mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] /= values`` (true division, so integer x gives a float result, as in jax)."""
        from ftrans.numpy._elementwise import true_divide

        scale = self._ones_scaled(values, "divide", indices_are_sorted, unique_indices, mode, out_sharding,
                                  wrap_negative_indices)
        return true_divide(self.array, scale)

    def power(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] **= values``."""
        from ftrans.numpy._elementwise import power

        scale = self._ones_scaled(values, "power", indices_are_sorted, unique_indices, mode, out_sharding,
                                  wrap_negative_indices)
        return power(self.array, scale)

    def min(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = minimum(x[idx], values)``; repeated indices all take part."""
        return self._update(values, I.scatter_min_p, "min", indices_are_sorted, unique_indices, mode,
                            out_sharding, wrap_negative_indices)

    def max(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[idx] = maximum(x[idx], values)``; repeated indices all take part."""
        return self._update(values, I.scatter_max_p, "max", indices_are_sorted, unique_indices, mode,
                            out_sharding, wrap_negative_indices)

    def apply(self, func: Callable[[Any], Any], *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``func`` applied (elementwise) at idx, once per occurrence of a repeated index.

        The occurrences of every position are counted (a scatter-add of ones);
        with concrete counts ``func`` is applied as many rounds as the largest
        count, each round selecting the positions with occurrences left.  With
        traced counts (traced indices, or under ``vmap``) the rounds run in a
        ``while_loop``, as JAX's scatter-apply does (and, as there, reverse-mode
        differentiation of that loop is not supported).
        """
        x = as_operand(self.array)
        d, weak = dtype_weak(x)
        kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
                  normalize=wrap_negative_indices)
        counts = _scatter_update(_full(shape_of(x), 0, dtypes.canonicalize(np.int32)), self.index, 1,
                                 I.scatter_add_p, "x.at[idx].apply", **kw)
        counts = maybe_concrete(counts)

        def step(v: Any) -> Any:
            applied = func(v)
            return convert(applied, d, weak) if dtype_weak(applied) != (d, weak) else applied

        if unique_indices or _to_gather(shape_of(x), _parse(self.index, shape_of(x)), True).unique_indices:
            most = 1
        elif isinstance(counts, Tracer):
            from ftrans.lax._extras import apply_counted

            return apply_counted(x, counts, step)
        else:
            most = int(counts._value.max()) if counts._value.size else 0
        out = x
        for k in range(1, most + 1):
            out = S.select_n_p.bind(E.ge_p.bind(counts, _scalar(k, counts.dtype)), out, step(out))
        return out


class _IndexUpdateHelper:
    """``x.at``: indexed, functional updates (``x.at[idx].set(v)``, ``.add``, ``.get``, ...)."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, idx: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, idx)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


# ============================================================================
# take, take_along_axis


def _int_indices(name: str, indices: Any) -> Any:
    if isinstance(indices, (list, tuple)):
        from ftrans.numpy._creation import asarray

        indices = asarray(indices)
    check_arraylike(name, indices)
    indices = as_operand(indices)
    d = dtype_weak(indices)[0]
    if d.kind not in "iu":
        raise FtransTypeError(f"{name}: indices must have an integer dtype, got {d.name}")
    return indices


def _ravel(x: Any) -> Any:
    return _reshape(x, (int(np.prod(shape_of(x), dtype=np.int64)),))


def take(a: Any, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Take elements of an array along an axis.

    Unlike NumPy, out-of-range indices do not raise (no errors can be raised from compiled code): the default
    mode `"fill"` returns NaN for inexact dtypes and the dtype's extreme value otherwise, after negative
    indices are wrapped once, as in JAX.

    Args:
        a: Input array.
        indices: Integer indices (any shape).
        axis: Axis to take along; None (the default) takes from the flattened array.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        mode: Out-of-range handling: `"fill"` (default), `"clip"` or `"wrap"`; `"raise"` is not supported
            (NotImplementedError).
        unique_indices: Promise that the indices are unique (an optimisation hint).
        indices_are_sorted: Promise that the indices are sorted (an optimisation hint).
        fill_value: The value for out-of-range indices in `"fill"` mode.
    Returns:
        An array of shape `a.shape[:axis] + indices.shape + a.shape[axis + 1:]` and `a`'s dtype.

    Examples:
        >>> x = jnp.array([10, 20, 30, 40])
        >>> jnp.take(x, jnp.array([0, 3, -1]))
        Array([10, 40, 40], dtype=int32)
        >>> jnp.take(x, jnp.array([5]), fill_value=-1)
        Array([-1], dtype=int32)
        >>> jnp.take(x, jnp.array([5]), mode="clip")
        Array([40], dtype=int32)
        >>> jnp.take(jnp.arange(6).reshape(2, 3), jnp.array([2, 0]), axis=1)
        Array([[2, 0],
               [5, 3]], dtype=int32)

    See also:
        `take_along_axis`, `Array.at`, `choose`.
    """
    if out is not None:
        raise NotImplementedError("take: out is not supported")
    check_arraylike("take", a)
    a = as_operand(a)
    indices = _int_indices("take", indices)
    if axis is None:
        a = _ravel(a)
        axis_idx = 0
    else:
        axis_idx = canonicalize_axis("take", axis, len(shape_of(a)))
    ashape = shape_of(a)
    n = ashape[axis_idx]
    if mode is None or mode == "fill":
        gmode = GatherScatterMode.FILL_OR_DROP
        indices = _normalize(indices, n)
    elif mode == "raise":
        raise NotImplementedError("take: mode='raise' is not supported (use 'fill', 'clip' or 'wrap')")
    elif mode == "wrap":
        from ftrans.numpy._elementwise import remainder

        indices = remainder(indices, _dim_scalar(n, dtype_weak(indices)[0]))
        gmode = GatherScatterMode.PROMISE_IN_BOUNDS
    elif mode == "clip":
        gmode = GatherScatterMode.CLIP
    else:
        raise FtransValueError(f"take: invalid mode {mode!r}; use 'fill', 'clip' or 'wrap'")
    ishape = shape_of(indices)
    d, weak = dtype_weak(a)
    if n == 0:
        if 0 not in ishape:
            raise FtransIndexError("Cannot do a non-empty jnp.take() from an empty axis.")
        return a
    if 0 in ishape:  # (a symbolic dimension is >= 1)
        return _full((*ashape[:axis_idx], *ishape, *ashape[axis_idx + 1:]), 0, d, weak)
    sizes = list(ashape)
    sizes[axis_idx] = 1
    k = len(ishape)
    dn = GatherDimensionNumbers(
        offset_dims=tuple(range(axis_idx)) + tuple(range(axis_idx + k, len(ashape) + k - 1)),
        collapsed_slice_dims=(axis_idx,), start_index_map=(axis_idx,),
    )
    return I.gather_p.bind(
        a, _broadcast(indices, (*ishape, 1), tuple(range(k))), dimension_numbers=dn,
        slice_sizes=tuple(sizes), mode=gmode, fill_value=I.gather_fill_param(d, gmode, fill_value),
        indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices),
    )


def _take_along_one_hot(a: Any, indices: Any, ax: int, n: int, out_shape: tuple) -> Any:
    """``mode='one_hot'``: a contraction of a one-hot encoding of ``indices`` with ``a`` along ``ax``
    (as JAX: out-of-range indices give 0, and a NaN/inf anywhere along the axis reaches the result)."""
    from ftrans.numpy._reductions import sum as _sum

    d, _ = dtype_weak(a)
    rank = len(out_shape)
    full = (*out_shape, n)
    idx = _broadcast(indices, full, tuple(range(rank)))
    pos = _broadcast(_iota(n, dtype_weak(indices)[0]), full, (rank,))
    hot = _convert(E.eq_p.bind(idx, pos), d)
    moved = S.transpose_p.bind(a, permutation=tuple(i for i in range(rank) if i != ax) + (ax,))
    vals = _broadcast(moved, full, tuple(i for i in range(rank) if i != ax) + (rank,))
    if d == np.bool_:
        return _sum(E.and_p.bind(hot, vals), axis=-1, dtype=d)
    # A dot (not multiply-and-sum, which XLA may simplify to a select) so NaNs propagate as in JAX.
    from ftrans.lax import dot_general

    batch = tuple(range(rank))
    return dot_general(hot, vals, (((rank,), (rank,)), (batch, batch)), preferred_element_type=d)


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: Any = None,
                    fill_value: Any = None, *, wrap_negative_indices: bool | None = None) -> Any:
    """Take values from an array by matching 1-D index slices along an axis.

    It is one gather: `indices` broadcasts against `arr` except along `axis`. Out-of-range indices follow
    `mode` as in `take`.

    Args:
        arr: Input array.
        indices: Integer array with `arr`'s number of dimensions.
        axis: The axis to index along (None: the flattened array).
        mode: Out-of-range handling, as in `take` (default `"fill"`).
        fill_value: The value for out-of-range indices in `"fill"` mode.
        wrap_negative_indices: Whether negative indices count from the end (by default they do).
    Returns:
        An array of the broadcast shape with `arr`'s dtype.

    Examples:
        >>> x = jnp.array([[10, 30, 20], [60, 40, 50]])
        >>> idx = jnp.argsort(x, axis=1)
        >>> jnp.take_along_axis(x, idx, axis=1)
        Array([[10, 20, 30],
               [40, 50, 60]], dtype=int32)
        >>> jnp.take_along_axis(x, jnp.array([[0], [2]]), axis=1)
        Array([[10],
               [50]], dtype=int32)

    See also:
        `take`, `put_along_axis`, `argsort`.
    """
    check_arraylike("take_along_axis", arr)
    a = as_operand(arr)
    indices = _int_indices("take_along_axis", indices)
    idx_shape = shape_of(indices)
    if axis is None:
        if len(idx_shape) != 1:
            raise FtransValueError(f"take_along_axis indices must be 1D if axis=None, got shape {idx_shape}")
        a = _ravel(a)
        axis = 0
    rank = len(shape_of(a))
    if rank != len(idx_shape):
        raise FtransValueError(
            f"take_along_axis: indices and arr must have the same number of dimensions; "
            f"{len(idx_shape)} vs. {rank}"
        )
    ax = canonicalize_axis("take_along_axis", axis, rank)
    axis_size = shape_of(a)[ax]
    arr_shape = tuple(1 if i == ax else s for i, s in enumerate(shape_of(a)))
    out_shape = broadcast_shapes("take_along_axis", [idx_shape, arr_shape])
    d, weak = dtype_weak(a)
    if axis_size == 0:
        return _full(out_shape, 0, d, False)
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    if wrap_negative_indices:
        indices = _normalize(_convert(indices, _index_dtype((axis_size,))), axis_size)
    if mode == "one_hot":
        return _take_along_one_hot(a, indices, ax, axis_size, out_shape)
    index_dims = [i for i, s in enumerate(idx_shape) if i == ax or s != 1]
    gather_indices = _reshape(indices, (*[out_shape[i] for i in index_dims], 1))
    sizes, offset, start_map, collapsed, op_batch, idx_batch, squeeze = [], [], [], [], [], [], []
    new_i = j = 0
    for i in range(rank):
        if i == ax:
            sizes.append(1), start_map.append(new_i), collapsed.append(new_i)
            new_i += 1
            j += 1
        elif idx_shape[i] == 1:
            offset.append(i), sizes.append(arr_shape[i])
            new_i += 1
        elif arr_shape[i] == 1:
            squeeze.append(i)
            j += 1
        else:
            sizes.append(0 if arr_shape[i] == 0 else 1)
            op_batch.append(new_i), idx_batch.append(j)
            new_i += 1
            j += 1
    if squeeze:
        a = S.squeeze_p.bind(a, dimensions=tuple(squeeze))
    gmode = GatherScatterMode.from_any("fill" if mode is None else mode)
    dn = GatherDimensionNumbers(tuple(offset), tuple(collapsed), tuple(start_map), tuple(op_batch),
                                tuple(idx_batch))
    return I.gather_p.bind(
        a, gather_indices, dimension_numbers=dn, slice_sizes=tuple(sizes), mode=gmode,
        fill_value=I.gather_fill_param(d, gmode, fill_value), indices_are_sorted=False, unique_indices=False,
    )


# ============================================================================
# nonzero and friends


def _cumsum_1d(v: Any) -> Any:
    """Inclusive prefix sum of a 1-D integer array in log2(n) shifted adds (Hillis-Steele).

    Only primitives the IR already has (pad + add), so it stages, batches and
    lowers like everything else.
    """
    n = shape_of(v)[0]
    if isinstance(n, DimExpr):  # a symbolic length (shape polymorphism): a lower-triangular mask's row sums
        d = dtype_weak(v)[0]
        rows = S.broadcast_in_dim_p.bind(_iota(n, d), shape=(n, n), broadcast_dimensions=(0,))
        cols = S.broadcast_in_dim_p.bind(_iota(n, d), shape=(n, n), broadcast_dimensions=(1,))
        wide = S.broadcast_in_dim_p.bind(v, shape=(n, n), broadcast_dimensions=(1,))
        masked = S.select_n_p.bind(E.ge_p.bind(rows, cols), _full((n, n), 0, d), wide)
        return R.reduce_sum_p.bind(masked, axes=(1,))
    zero = _scalar(0, dtype_weak(v)[0])
    k = 1
    while k < n:
        v = E.add_p.bind(v, S.pad_p.bind(v, zero, padding_config=((k, -k, 0),)))
        k *= 2
    return v


def _mask_of(name: str, a: Any) -> Any:
    check_arraylike(name, a)
    a = as_operand(a)
    d = dtype_weak(a)[0]
    if d == np.bool_:
        return a
    return E.ne_p.bind(a, _scalar(0, d))


def _static_size(name: str, mask: Any, size: Any) -> int:
    if size is None:
        mask = maybe_concrete(mask)
        if isinstance(mask, Tracer):
            raise ConcretizationTypeError(
                f"The size argument of jnp.{name} must be statically specified to use jnp.{name} "
                f"within transformations: the number of nonzero elements of the traced "
                f"{mask.aval.str_short()} is only known at run time. Pass size=N (and fill_value=...)."
            )
        return int(np.count_nonzero(mask._value))
    if isinstance(size, DimExpr):
        return size
    try:
        return operator.index(concrete_or_error(size, f"the size argument of jnp.{name}"))
    except TypeError:
        raise FtransTypeError(f"{name}: size must be an integer, got {size!r}") from None


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """Return the indices of the nonzero elements.

    The number of nonzero elements decides the output shape, so under `jit` pass `size=N`: the result then has
    static length N, truncated or padded with `fill_value` (default 0). It is built from a prefix sum and one
    scatter: element i, if nonzero, lands in slot `cumsum(mask)[i] - 1`, and slots past N are dropped.

    Args:
        a: Input array (at least 1-D).
        size: Optional static number of indices per axis to return.
        fill_value: Index (or one per axis) used to pad up to `size` (default 0).
    Returns:
        A tuple of `a.ndim` arrays, one per axis, of the default int dtype, or with `fill_value` of the dtype
        it promotes to with that (float32 for a Python float fill), as jax 0.12's.

    Examples:
        >>> x = jnp.array([[0, 3], [4, 0]])
        >>> jnp.nonzero(x)
        (Array([0, 1], dtype=int32), Array([1, 0], dtype=int32))
        >>> jnp.nonzero(jnp.array([0, 5, 0, 7]), size=3, fill_value=-1)
        (Array([ 1,  3, -1], dtype=int32),)

    See also:
        `argwhere`, `flatnonzero`, `where`.
    """
    check_arraylike("nonzero", a)
    if len(shape_of(a)) == 0:
        raise FtransValueError("Calling nonzero on 0d arrays is not allowed. "
                               "Use jnp.atleast_1d(scalar).nonzero() instead.")
    if size is None:
        a = maybe_concrete(a)  # the indices carry no derivative: a concrete autodiff value counts as concrete
    mask = _mask_of("nonzero", a)
    shape = shape_of(mask)
    n_out = _static_size("nonzero", mask, size)
    idt = dtypes.default_int()
    # The indices take the dtype the fill values promote with the default int (a strong dtype, as jax 0.12's:
    # a float fill gives float32 indices; jax 0.10 and 0.11 gave weak ones, and each axis its own dtype).
    odt, fills = _nonzero_fills(fill_value, len(shape), idt)
    if n_out < 0:
        raise FtransValueError(f"nonzero: size must be non-negative, got {n_out}")
    total = math.prod(shape)
    if total == 0 or n_out == 0:
        return tuple(_full((n_out,), 0, odt) for _ in shape)
    flat = _reshape(mask, (total,))
    ones = S.convert_element_type_p.bind(flat, new_dtype=idt, weak_type=False)
    csum = _cumsum_1d(ones)
    slot = S.select_n_p.bind(flat, S.broadcast_in_dim_p.bind(_dim_scalar(n_out, idt), shape=(total,),
                                                             broadcast_dimensions=()),
                             E.sub_p.bind(csum, _scalar(1, idt)))
    flat_idx = I.scatter_p.bind(
        _full((n_out,), 0, idt), _reshape(slot, (total, 1)), _iota(total, idt),
        dimension_numbers=ScatterDimensionNumbers((), (0,), (0,)), mode=GatherScatterMode.FILL_OR_DROP,
        indices_are_sorted=True, unique_indices=True,
    )
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    out = []
    for stride, dim in zip(strides, shape):
        v = flat_idx
        if not (isinstance(stride, int) and stride == 1):
            v = E.div_p.bind(v, _dim_scalar(stride, idt))
        if dim * stride != total:
            v = E.rem_p.bind(v, _dim_scalar(dim, idt))
        if odt != idt:
            v = S.convert_element_type_p.bind(v, new_dtype=odt, weak_type=False)
        out.append(v)
    if fills is None:
        return tuple(out)
    from ftrans.numpy._elementwise import where

    count = S.slice_p.bind(csum, start_indices=(total - 1,), limit_indices=(total,), strides=None)
    pad = E.ge_p.bind(_iota(n_out, idt), S.broadcast_in_dim_p.bind(
        count, shape=(n_out,), broadcast_dimensions=(0,)))
    return tuple(where(pad, f, o) for f, o in zip(fills, out))


def _nonzero_fills(fill_value: Any, ndim: int, idt: np.dtype) -> tuple[np.dtype, tuple | None]:
    """The dtype of ``nonzero``'s indices and its fill values, one scalar per axis, in that dtype."""
    if fill_value is None:
        return idt, None
    from ftrans.core.operands import result_type
    from ftrans.numpy._creation import asarray

    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * ndim
    if len(fills) != ndim:
        raise FtransValueError(f"nonzero: fill_value tuple must have length equal to number of axes ({ndim}); "
                               f"got {len(fills)}")
    if any(np.shape(f) != () for f in fills):
        raise FtransValueError(f"nonzero: fill_value must be a scalar or a tuple of scalars; got {fill_value!r}")
    odt = np.dtype(result_type(idt, *fills))
    return odt, tuple(asarray(f, dtype=odt) for f in fills)


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Return the indices of the nonzero elements of the flattened array.

    It is `nonzero(ravel(a))[0]`; `size` and `fill_value` make it usable under `jit`.

    Args:
        a: Input array.
        size: Optional static number of indices to return.
        fill_value: Index used to pad up to `size`.
    Returns:
        A 1-D integer array.

    Examples:
        >>> jnp.flatnonzero(jnp.array([[0, 3], [4, 0]]))
        Array([1, 2], dtype=int32)

    See also:
        `nonzero`.
    """
    check_arraylike("flatnonzero", a)
    return nonzero(_ravel(as_operand(a)), size=size, fill_value=fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Return the indices of the nonzero elements, grouped by element.

    `size` and `fill_value` make it usable under `jit`, as in `nonzero`.

    Args:
        a: Input array.
        size: Optional static number of rows to return.
        fill_value: Index used to pad up to `size`.
    Returns:
        An integer array of shape `(count, a.ndim)`.

    Examples:
        >>> jnp.argwhere(jnp.array([[0, 3], [4, 0]]))
        Array([[0, 1],
               [1, 0]], dtype=int32)
        >>> jnp.argwhere(jnp.array([1, 0, 1]), size=3, fill_value=-1)
        Array([[ 0],
               [ 2],
               [-1]], dtype=int32)

    See also:
        `nonzero`.
    """
    check_arraylike("argwhere", a)
    a = as_operand(a)
    if len(shape_of(a)) == 0:
        n = _static_size("argwhere", _mask_of("argwhere", a), size)
        n = min(n, 1) if size is None else n
        return _full((n, 0), 0, dtypes.default_int())
    cols = nonzero(a, size=size, fill_value=fill_value)
    n = shape_of(cols[0])[0]
    cols = [_reshape(c, (n, 1)) for c in cols]
    return cols[0] if len(cols) == 1 else S.concatenate_p.bind(*cols, dimension=1)


# ============================================================================
# select, choose, compress, put


def _broadcast_all(name: str, ops: list) -> list:
    shape = broadcast_shapes(name, [shape_of(o) for o in ops], ops)
    return [broadcast_to_shape(o, shape) for o in ops]


def select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    """Choose from a list of values according to a list of conditions.

    At each position, the value of the first true condition is taken, else `default`.

    Args:
        condlist: Sequence of boolean arrays.
        choicelist: Sequence of arrays, as many as `condlist`.
        default: The value where no condition holds.
    Returns:
        An array of the broadcast shape and promoted dtype.

    Examples:
        >>> x = jnp.arange(6)
        >>> jnp.select([x < 2, x > 3], [x, x * 10], default=-1)
        Array([ 0,  1, -1, -1, 40, 50], dtype=int32)

    See also:
        `where`, `choose`, `piecewise`.
    """
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise FtransValueError(
            f"select: condlist must have length equal to choicelist ({len(condlist)} vs {len(choicelist)})"
        )
    if not condlist:
        raise FtransValueError("select: condlist must be non-empty")
    check_arraylike("select", *condlist, *choicelist, default)
    conds = [_mask_of("select", c) for c in condlist]
    choices, _, _ = promote_dtypes("select", default, *choicelist)
    ops = _broadcast_all("select", conds + choices)
    conds, (out, *choices) = ops[:len(conds)], ops[len(conds):]
    for c, v in zip(reversed(conds), reversed(choices)):
        out = S.select_n_p.bind(c, out, v)
    return out


def choose(a: Any, choices: Any, out: None = None, mode: str = "raise") -> Any:
    """Build an array from an index array and a list of arrays to choose from.

    The result is `choices[a[i]][i]` at each position, computed as one `select_n`.

    Args:
        a: Integer array of indices into `choices`.
        choices: Sequence of arrays broadcastable with `a`.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        mode: How out-of-range indices are treated: `'raise'` (the default, which needs a concrete `a`: use
            `'wrap'` or `'clip'` under `jit`), `'wrap'` or `'clip'`.
    Returns:
        An array of the broadcast shape.

    Examples:
        >>> choices = [jnp.array([0, 1, 2]), jnp.array([10, 11, 12]), jnp.array([20, 21, 22])]
        >>> jnp.choose(jnp.array([2, 0, 1]), choices)
        Array([20,  1, 12], dtype=int32)
        >>> jnp.choose(jnp.array([3, -1, 1]), choices, mode="clip")
        Array([20,  1, 12], dtype=int32)

    See also:
        `select`, `where`, `take`.
    """
    if out is not None:
        raise NotImplementedError("choose: out is not supported")
    choices = list(choices)
    check_arraylike("choose", a, *choices)
    a = as_operand(a)
    d = dtype_weak(a)[0]
    if d.kind not in "iu":
        raise FtransValueError(f"choose: `a` array must be integer typed, got {d.name}")
    n = len(choices)
    if mode == "raise":
        v = concrete_or_error(a, "jnp.choose with mode='raise' needs concrete `a`; use mode='wrap' or "
                                 "mode='clip' under transformations. `a`")
        if np.any((np.asarray(v) < 0) | (np.asarray(v) >= n)):
            raise FtransValueError(f"choose: invalid entry in choice array (entries must be in [0, {n}))")
    elif mode == "wrap":
        from ftrans.numpy._elementwise import remainder

        a = remainder(a, _scalar(n, d))
    elif mode == "clip":
        a = S.clamp_p.bind(_scalar(0, d), a, _scalar(n - 1, d))
    else:
        raise FtransValueError(f"choose: mode={mode!r} not understood; must be 'raise', 'wrap', or 'clip'")
    choices, _, _ = promote_dtypes("choose", *choices)
    a, *choices = _broadcast_all("choose", [_convert(a, dtypes.canonicalize(np.int32)), *choices])
    return S.select_n_p.bind(a, *choices)


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: None = None) -> Any:
    """Select slices of an array along an axis where a condition is true.

    Without `size` the condition must be concrete; with it the result has `size` slices (at most the axis
    length), padded with `fill_value`, which works under `jit`.

    Args:
        condition: 1-D boolean array; a shorter one is treated as padded with False.
        a: Input array.
        axis: The axis to select along; None (the default) uses the flattened array.
        size: Optional static number of slices in the result.
        fill_value: Value used to pad up to `size`.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        An array with the selected slices, of `a`'s dtype.

    Examples:
        >>> x = jnp.array([[1, 2], [3, 4], [5, 6]])
        >>> jnp.compress(jnp.array([True, False, True]), x, axis=0)
        Array([[1, 2],
               [5, 6]], dtype=int32)
        >>> jnp.compress(jnp.array([False, True]), x, axis=1)
        Array([[2],
               [4],
               [6]], dtype=int32)

    See also:
        `extract`, `where`.
    """
    if out is not None:
        raise NotImplementedError("compress: out is not supported")
    check_arraylike("compress", condition, a)
    if len(shape_of(condition)) != 1:
        raise FtransValueError(f"compress: condition must be a 1D array, got shape {shape_of(condition)}")
    arr = as_operand(a)
    if axis is None:
        arr, ax = _ravel(arr), 0
    else:
        ax = canonicalize_axis("compress", axis, len(shape_of(arr)))
    rank = len(shape_of(arr))
    perm = (ax, *[i for i in range(rank) if i != ax])
    if ax != 0:
        arr = S.transpose_p.bind(arr, permutation=perm)
    n, m = shape_of(arr)[0], shape_of(condition)[0]
    condition = maybe_concrete(condition)
    if _is_host(condition) or not isinstance(condition, Tracer):
        # A concrete condition is checked (and cut to length) on the host, so it stays a constant.
        mask = np.asarray(_host_value(condition) if _is_host(condition) else condition) != 0
        if mask[n:].any():
            raise FtransValueError("compress: condition contains entries that are out of bounds")
        cond = _const(mask[:n], np.bool_)
    else:
        if m > n:
            raise ConcretizationTypeError(
                f"compress: a traced condition of length {m} is longer than the axis ({n}); whether the "
                "extra entries are all False is only known at run time. Slice the condition first."
            )
        cond = _mask_of("compress", condition)
    if m < n:
        arr = _rewriting_take(arr, slice(None, m))
    if size is None:
        result = _rewriting_take(arr, cond)
    else:
        k = operator.index(size)
        if not 0 <= k <= shape_of(arr)[0]:
            raise FtransValueError(
                "compress: size must be positive and not greater than the size of the array axis; "
                f"got size={k} for an axis of length {shape_of(arr)[0]}"
            )
        (idx,) = nonzero(cond, size=k)
        rows = take(arr, idx, axis=0, mode="clip")
        count = R.reduce_sum_p.bind(_convert_bool(cond), axes=(0,))
        keep = E.lt_p.bind(_iota(k, dtypes.default_int()), count)
        d = dtype_weak(arr)[0]
        keep = S.broadcast_in_dim_p.bind(keep, shape=shape_of(rows), broadcast_dimensions=(0,))
        result = S.select_n_p.bind(keep, _full(shape_of(rows), fill_value, d), rows)
    if ax != 0:
        result = S.transpose_p.bind(result, permutation=tuple(int(p) for p in np.argsort(perm)))
    return result


def _convert_bool(mask: Any) -> Any:
    return S.convert_element_type_p.bind(mask, new_dtype=dtypes.default_int(), weak_type=False)


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """Return a copy of an array with the elements at flat indices replaced.

    `v` is repeated (tiled) to the number of indices, as NumPy does. Arrays are immutable, so `inplace=False`
    is required.

    Args:
        a: Input array.
        ind: Flat (raveled) integer indices.
        v: Values to put there.
        mode: Out-of-range handling: None (the default: negative indices count from the end and out-of-range
            ones are dropped), `"clip"` or `"wrap"`.
        inplace: Must be False.
    Returns:
        A new array of `a`'s shape and dtype.

    Examples:
        >>> x = jnp.zeros(5, dtype=int)
        >>> jnp.put(x, jnp.array([0, 3]), jnp.array([7, 8]), inplace=False)
        Array([7, 0, 0, 8, 0], dtype=int32)

    See also:
        `Array.at`, `place`.
    """
    if inplace:
        raise FtransValueError(
            "jnp.put cannot modify arrays in-place, because ftrans arrays are immutable. "
            "Pass inplace=False to instead return an updated array."
        )
    check_arraylike("put", a, ind, v)
    arr = as_operand(a)
    ind = _ravel(_int_indices("put", ind))
    vals = _ravel(as_operand(v))
    n_ind, n_v = shape_of(ind)[0], shape_of(vals)[0]
    total = int(np.prod(shape_of(arr), dtype=np.int64))
    if not total or not n_ind or not n_v:
        return arr
    if n_v != n_ind:
        reps = -(-n_ind // n_v)
        vals = _reshape(S.broadcast_in_dim_p.bind(vals, shape=(reps, n_v), broadcast_dimensions=(1,)),
                        (reps * n_v,))
        vals = S.slice_p.bind(vals, start_indices=(0,), limit_indices=(n_ind,), strides=None)
    if mode is None:
        # jax unravels the flat indices, which clips them to [-size, size - 1].
        lo = 0 if ind.dtype.kind == "u" else -total
        ind = S.clamp_p.bind(_scalar(lo, ind.dtype), ind, _scalar(total - 1, ind.dtype))
        smode = "drop"
    elif mode == "clip":
        ind = S.clamp_p.bind(_scalar(0, ind.dtype), ind, _scalar(total - 1, ind.dtype))
        smode = "promise_in_bounds"
    elif mode == "wrap":
        from ftrans.numpy._elementwise import remainder

        ind = remainder(ind, _scalar(total, ind.dtype))
        smode = "promise_in_bounds"
    elif mode == "raise":
        raise NotImplementedError("put: mode='raise' is not supported")
    else:
        raise FtransValueError(f"put: mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    flat = _ravel(arr)
    out = _scatter_update(flat, ind, vals, I.scatter_p, "put", indices_are_sorted=False,
                          unique_indices=False, mode=smode, normalize=True)
    return _reshape(out, shape_of(arr))
