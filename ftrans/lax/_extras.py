"""The rest of JAX's public ``lax`` names that are thin compositions of existing primitives: array creation
(``full``, ``full_like``, ``empty``), shape helpers, ``batch_matmul``, ``index_take``, ``tile``, ``split``,
integer bit tricks (``clz``, ``mulhi``), ``approx_max_k``/``approx_min_k`` (exact, as JAX on CPU),
``platform_dependent``, ``composite`` (its decomposition, inlined) and the type names JAX exports."""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.avals import ShapeDtypeStruct
from ftrans.core.axis_env import frames_of
from ftrans.core.operands import as_operand, check_arraylike, convert, dtype_weak, shape_of
from ftrans.core.prims import structural as S
from ftrans.core.prims.indexing import GatherDimensionNumbers
from ftrans.core.shape_poly import as_dim, is_symbolic_dim
from ftrans.core.sharding import AbstractMesh, get_mesh
from ftrans.errors import FtransNotImplementedError, FtransTypeError, FtransValueError
from ftrans.lax import _indexing
from ftrans.lax import _ops as lax
from ftrans.lax._reductions import top_k

__all__ = [
    "full", "full_like", "empty", "broadcast_shapes", "broadcast_to_rank", "broadcast_like", "collapse",
    "batch_matmul", "index_take", "tile", "split", "reciprocal", "log2", "polynomial", "one_minus_square", "clz", "mulhi", "dtype", "shape_as_value",
    "conv_shape_tuple", "reduce_window_shape_tuple", "approx_max_k", "approx_min_k", "platform_dependent",
    "composite", "axis_size", "dce_sink", "scatter_apply", "stack", "unstack", "rng_bit_generator", "stage", "rng_uniform", "scaled_dot",
    "DotDimensionNumbers", "PrecisionLike",
    "ConvGeneralDilatedDimensionNumbers", "DotAlgorithmPreset", "DotAlgorithm", "AccuracyMode", "Tolerance",
    "RandomAlgorithm",
]


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(as_dim(d) for d in shape)
    except TypeError:
        raise FtransTypeError(f"{name}: shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise FtransTypeError(f"{name}: shape {out} has a negative dimension")
    return out


# ---------------------------------------------------------------- creation
def full(shape: Sequence[int], fill_value: Any, dtype: Any = None, *, sharding: Any = None) -> Any:
    """``lax.full``: an array of ``shape`` filled with the scalar ``fill_value`` (weakly typed when
    ``dtype`` is None and the fill value is a Python scalar)."""
    shape = _shape("lax.full", shape)
    if np.shape(fill_value) if not hasattr(fill_value, "aval") else fill_value.aval.shape:
        raise FtransTypeError(
            f"full must be called with scalar fill_value, got fill_value.shape {tuple(shape_of(fill_value))}."
        )
    check_arraylike("lax.full", fill_value)
    if dtype is None:
        d, weak = dtype_weak(fill_value)
    else:
        d, weak = dtypes.requested(dtype, "full"), False
    v = convert(fill_value, d, weak)
    return _laid_out(lax.broadcast_in_dim(v, shape, ()), sharding, "lax.full")


def _laid_out(out: Any, sharding: Any, what: str) -> Any:
    """``out`` with the ``sharding=`` of a creation function: a concrete array placed (committed) there,
    a traced one constrained to it."""
    if sharding is None:
        return out
    from ftrans.core.sharding import NamedSharding, PartitionSpec, as_sharding

    sharding = as_sharding(sharding)
    nd = len(shape_of(out))
    if isinstance(sharding, NamedSharding) and len(sharding.spec) > nd and all(
            e is None for e in tuple(sharding.spec)[nd:]):  # unsplit trailing entries past the rank: as JAX accepts
        sharding = sharding.update(spec=PartitionSpec(*tuple(sharding.spec)[:nd]))
    if isinstance(out, Array) and _trace.is_eager():
        from ftrans.devices import device_put

        return device_put(out, sharding)
    from ftrans.lax._sharding import with_sharding_constraint

    return with_sharding_constraint(out, sharding, what)


def like_sharding(x: Any, fill_shape: tuple, weak: bool, same_shape: bool) -> Any:
    """The layout a ``full_like``-style result takes from ``x`` (None: placed by default), as JAX's rule: a
    traced ``x``'s sharding type when no shape is given; a committed array's (or a ``ShapeDtypeStruct``'s
    concrete) sharding when the result is not weakly typed and has ``x``'s shape or ``x`` is replicated."""
    if isinstance(x, _trace.Tracer):
        return getattr(x.aval, "typed_sharding", None) if same_shape else None
    if isinstance(x, ShapeDtypeStruct):
        sh = x.sharding
        m = getattr(sh, "mesh", None)
        # (JAX's: a concrete sharding, or a mesh in context, or one of only Explicit axes)
        concrete = sh is not None and (not isinstance(m, AbstractMesh) or get_mesh() is not None or (
            not m.empty and m.are_all_axes_explicit))
        if not concrete or not hasattr(sh, "is_fully_replicated"):
            return None
    elif isinstance(x, Array) and x._committed:
        sh = x.sharding
    else:
        return None
    if weak or not (fill_shape == tuple(x.shape) or sh.is_fully_replicated):
        return None
    return sh


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None, sharding: Any = None) -> Any:
    """``lax.full_like``: ``full`` with ``x``'s shape and dtype (and weak type, when ``dtype`` is None).

    Without ``sharding``, the result is laid out as ``x`` when ``x`` is a committed array that is not weakly
    typed and either the shape is ``x``'s or ``x`` is replicated on its devices (one device included), as
    in JAX; otherwise it is placed by default."""
    if isinstance(x, ShapeDtypeStruct):
        xd, xw = dtypes.canonicalize(x.dtype), bool(x.weak_type)
    else:
        xd, xw = dtype_weak(x)
    d = xd if dtype is None else dtypes.requested(dtype, "full_like")
    weak = dtype is None and xw
    fill_shape = tuple(x.shape if isinstance(x, ShapeDtypeStruct) else shape_of(x)) if shape is None else _shape(
        "lax.full_like", shape)
    if sharding is None:
        sharding = like_sharding(x, fill_shape, weak, shape is None)
    out = full(fill_shape, fill_value, d)
    if weak:
        out = S.convert_element_type_p.bind(out, new_dtype=d, weak_type=True)
    from ftrans.transforms.shard_map import like_vma

    return like_vma(x, _laid_out(out, sharding, "lax.full_like"))


def empty(shape: Any, dtype: Any, *, out_sharding: Any = None) -> Any:
    """``lax.empty``: an array whose contents are unspecified (ftrans fills it with zeros)."""
    if out_sharding is not None:
        raise NotImplementedError("lax.empty: out_sharding is not supported")
    return full(shape, 0, dtypes.to_dtype(dtype))


# ---------------------------------------------------------------- shapes
def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """``lax.broadcast_shapes``: the NumPy broadcast of the given shapes."""
    shapes = [_shape("lax.broadcast_shapes", s) for s in shapes]
    if not shapes:
        return ()
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded):
        big = {d for d in sizes if d != 1}
        if len(big) > 1:
            raise FtransValueError(f"Incompatible shapes for broadcasting: shapes={[list(s) for s in shapes]}")
        out.append(big.pop() if big else 1)
    return tuple(out)


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``lax.broadcast_to_rank``: ``x`` with leading size-1 dimensions added up to ``rank``."""
    op = as_operand(x)
    nd = len(shape_of(op))
    return op if nd == rank else lax.broadcast(op, (1,) * (rank - nd))


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """``lax.broadcast_like``: ``arr`` broadcast (NumPy rules) to the shape of ``like_arr``."""
    op = as_operand(arr)
    shape = tuple(shape_of(like_arr))
    src = tuple(shape_of(op))
    if src == shape:
        return op
    if len(src) > len(shape) or any(a not in (1, b) for a, b in zip(src[::-1], shape[::-1])):
        raise FtransValueError(f"broadcast_like: cannot broadcast shape {src} to {shape}")
    lead = len(shape) - len(src)
    keep = [i for i, a in enumerate(src) if a == shape[lead + i]]
    squeezed = lax.reshape(op, tuple(src[i] for i in keep)) if len(keep) != len(src) else op
    # laid out as ``like_arr`` when its type has a sharding (over Explicit mesh axes), as JAX's
    like = getattr(getattr(like_arr, "aval", None), "typed_sharding", None)
    if like is not None:
        have = getattr(getattr(op, "aval", None), "typed_sharding", None)
        want = tuple(like.spec) + (None,) * (len(shape) - len(like.spec))
        if have is not None and any(a is not None and a != b for a, b in zip(have.spec, want[lead:])):
            raise FtransValueError(f"Incompatible types for broadcasting: input type={op.aval.str_short()} and "
                                   f"requested type={like_arr.aval.str_short()} (lax.broadcast_like: each sharded "
                                   "dimension of the input must be sharded alike in the result)")
    return lax.broadcast_in_dim(squeezed, shape, tuple(lead + i for i in keep), out_sharding=like)


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """``lax.collapse``: dimensions ``[start, stop)`` merged into one (row-major)."""
    op = as_operand(operand)
    shape = tuple(shape_of(op))
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise FtransValueError(f"Invalid dimension range passed to collapse: {shape}[{start_dimension}:{stop_dimension}]")
    return lax.reshape(op, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``lax.tile``: repeat ``operand`` ``reps[i]`` times along each axis (``len(reps) == ndim``)."""
    op = as_operand(operand)
    shape = tuple(shape_of(op))
    reps = tuple(operator.index(r) for r in reps)
    if len(reps) != len(shape):
        raise FtransValueError(f"len(reps) must be equal to the rank of operand, got {len(reps)} and {len(shape)}")
    # broadcast to interleaved (r0, s0, r1, s1, ...) and merge each pair
    inter = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    b = lax.broadcast_in_dim(op, inter, tuple(range(1, 2 * len(shape), 2)))
    return lax.reshape(b, tuple(r * s for r, s in zip(reps, shape)))


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list:
    """``lax.split``: consecutive pieces of ``sizes`` along ``axis`` (the sizes must add up to its length)."""
    op = as_operand(operand)
    shape = tuple(shape_of(op))
    ax = lax._axis("split", axis, len(shape))
    sizes = [operator.index(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != shape[ax]:
        raise FtransValueError(
            f"Sum of sizes {sum(sizes)} must be equal to dimension {shape[ax]} of the operand shape {shape}"
            if all(s >= 0 for s in sizes) else f"Sizes must be nonnegative, got {sizes}"
        )
    from ftrans.core.sharding_rules import check_split, operand_type

    typed = operand_type(op)
    if typed is not None:  # (JAX's split primitive: its own message)
        check_split("split", typed, [shape[:ax] + (s,) + shape[ax + 1:] for s in sizes])
    elif all(type(d) is int for d in shape):  # JAX's split primitive
        from ftrans.core.prims import structural as S

        return list(S.split_p.bind(op, sizes=tuple(sizes), axis=ax))
    out, start = [], 0
    for s in sizes:
        out.append(lax.slice_in_dim(op, start, start + s, axis=ax))
        start += s
    return out


def shape_as_value(shape: Sequence[int]) -> Any:
    """``lax.shape_as_value``: a shape as an integer vector (int32, int64 for a size beyond int32's
    range, the default integer type for a shape with symbolic dimensions: their values come from the
    program's arguments, as in JAX)."""
    dims = _shape("shape_as_value", shape)
    symbolic = [is_symbolic_dim(d) for d in dims]
    if any(symbolic):
        dtype = dtypes.default_int()
    else:
        dtype = np.dtype(np.int64) if any(d > np.iinfo(np.int32).max for d in dims) else np.dtype(np.int32)
    if not any(symbolic):
        return np.asarray(dims, dtype=dtype).reshape(len(dims))
    parts = [lax.reshape(lax.convert_element_type(S.dim_as_value_p.bind(dim=d) if sym else np.asarray(d, dtype),
                                                  dtype), (1,))
             for d, sym in zip(dims, symbolic)]
    return lax.concatenate(parts, 0)


def _stride(d: int, w: int, s: int) -> int:
    return 0 if d < w else (d - w) // s + 1


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """``lax.conv_shape_tuple``: a convolution's output shape in (N, C, spatial...) order."""
    from ftrans.lax._windowed import padtype_to_pads

    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise FtransTypeError(
            f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, got {len(pads)}."
        )
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise FtransValueError(
            "Negative padding is larger than the size of the corresponding dimension: "
            f"got padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}"
        )
    space = tuple(_stride(p, w, s) for p, w, s in zip(padded, rhs_shape[2:], strides))
    n = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (n, rhs_shape[0]) + space


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """``lax.reduce_window_shape_tuple``: the output shape of a windowed reduction."""
    def dilate(shape: Sequence[int], dil: Sequence[int]) -> list[int]:
        return [0 if d == 0 else 1 + k * (d - 1) for d, k in zip(shape, dil)]

    if base_dilation is not None:
        operand_shape = dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = dilate(window_dimensions, window_dilation)
    padded = [d + lo + hi for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(_stride(p, w, s) for p, w, s in zip(padded, window_dimensions, window_strides))


def dtype(x: Any) -> np.dtype:
    """``lax.dtype``: the canonical dtype of an array, scalar or dtype-like."""
    if isinstance(x, (type, np.dtype, str)) and not isinstance(x, (np.ndarray,)):
        try:
            return dtypes.to_dtype(x)
        except (TypeError, ValueError):
            pass
    return dtype_weak(x)[0]


# ---------------------------------------------------------------- arithmetic
def reciprocal(x: Any) -> Any:
    """``lax.reciprocal``: ``1 / x`` (``integer_pow(x, -1)``)."""
    return lax.integer_pow(x, -1)


def log2(x: Any, *, accuracy: Any = None) -> Any:
    """``lax.log2`` (jax 0.11): ``log(x) / log(2)`` for float or complex ``x``, staged as ``log`` and ``div``
    (JAX binds a ``log2`` primitive that lowers to the same two operations)."""
    y = lax.log(x, accuracy=accuracy)
    return lax.div(y, full_like(y, math.log(2.0)))


def polynomial(x: Any, coeffs: Sequence[Any], *, unroll: int | None = None) -> Any:
    """``lax.polynomial`` (jax 0.12): a polynomial evaluated by Horner's rule,
    ``a_0 + x (a_1 + x (a_2 + ... + x a_N))`` for ``coeffs = (a_0, ..., a_N)`` (lowest degree first).

    Binds the ``polynomial`` primitive (``lax.polynomial_p``), whose derivative in ``x`` is the derivative
    polynomial ``sum k a_k x**(k-1)`` (another ``polynomial``, so every order stays cheap) and which is
    linear in the coefficients.  The recurrence starts from the leading coefficient, so an infinite ``x``
    gives the polynomial's infinity where a recurrence started from zero would give ``0 * inf``.

    Args:
        x: the points (an array or scalar of a numeric, non-boolean dtype).
        coeffs: the coefficients ``(a_0, ..., a_N)``.  Scalars take ``x``'s dtype (and, for a weakly
            typed rank-0 ``x``, its weak type); arrays are converted to ``x``'s dtype and must have ``x``'s
            rank (or be rank 0), size-1 dimensions broadcasting.
        unroll: JAX's bound on the terms its lowering unrolls before a ``scan`` (``None``: 8); ftrans
            unrolls every term, so it changes nothing but must be a positive int if given.

    Returns:
        The polynomial at ``x``: the broadcast shape of ``x`` and the coefficients, in ``x``'s dtype.
        No coefficients give zeros like ``x``; one gives ``a_0`` at that shape.

    Examples:
        >>> from ftrans import lax
        >>> lax.polynomial(3.0, [1.0, 5.0, 2.0])
        Array(34., dtype=float32, weak_type=True)
        >>> import ftrans, ftrans.numpy as jnp
        >>> ftrans.grad(lambda x: lax.polynomial(x, [1.0, 5.0, 2.0]))(3.0)
        Array(17., dtype=float32, weak_type=True)
        >>> lax.polynomial(jnp.array([0.0, 1.0, 2.0]), [1, 1, 1])
        Array([1., 3., 7.], dtype=float32)
    """
    from ftrans.core.prims import elementwise as E
    from ftrans.core.trace import Tracer

    coeffs = tuple(coeffs)
    if unroll is not None and (isinstance(unroll, bool) or not isinstance(unroll, (int, np.integer)) or unroll < 1):
        raise FtransValueError(f"polynomial: unroll must be None or a positive int, got {unroll!r}")
    xo = as_operand(x)
    dt, weak = dtype_weak(xo)
    weak_scalar = weak and not shape_of(xo)  # (JAX's scalar coefficients take a weak rank-0 x's weak type)
    if not isinstance(dt, np.dtype) or dt == np.bool_ or dt.kind not in "iufcV" or not dtypes.issubdtype(
            dt, np.number):
        raise FtransTypeError(f"polynomial does not accept dtype {dt} at position 0. Accepted dtypes at position "
                              "0 are subtypes of integer, complexfloating, floating.")
    ops = [xo]
    for c in coeffs:
        if not isinstance(c, Tracer) and np.ndim(c) == 0:
            ops.append(_coefficient(c, dt, weak_scalar))
        else:
            ops.append(lax.convert_element_type(c, dt))
    if not coeffs:
        return full_like(xo, 0)
    shapes = [tuple(shape_of(v)) for v in ops if shape_of(v)]
    if len({len(s) for s in shapes}) > 1:  # (JAX's words: no rank promotion, only size-1 dimensions broadcast)
        raise FtransTypeError(f"polynomial: arrays must have the same number of dimensions, got "
                              f"{ {len(s) for s in shapes} }")
    out_shape: tuple = ()
    if shapes:
        out_shape = tuple(max(ds) if min(ds) == 1 or max(ds) == min(ds) else -1 for ds in zip(*shapes))
        if -1 in out_shape:
            raise FtransTypeError(f"polynomial got incompatible shapes for broadcasting: "
                                  f"{', '.join(map(str, shapes))}.")
    full = [v if shape_of(v) in ((), out_shape) else
            lax.broadcast_in_dim(v, out_shape, tuple(range(len(out_shape)))) for v in ops]
    if len(coeffs) == 1:  # a_0 alone, at the result's shape (no primitive: JAX binds none either)
        c0 = full[1]
        return c0 if shape_of(c0) == out_shape else lax.broadcast_in_dim(c0, out_shape, ())
    params = {} if unroll is None else {"unroll": int(unroll)}
    return lax._bind(E.polynomial_p, *full, **params)


def _coefficient(c: Any, dt: np.dtype, weak: bool) -> Any:
    """A scalar coefficient in ``x``'s dtype (weak for a Python-scalar ``x``, as JAX's ``_const``)."""
    return Array._new(np.asarray(np.asarray(c).astype(dt)), weak)


def _one_minus_square_fn(x: Any) -> Any:
    one = full_like(x, 1)
    return lax.mul(lax.add(one, x), lax.sub(one, x))


_one_minus_square = None


def one_minus_square(x: Any) -> Any:
    """``lax.one_minus_square`` (jax 0.11): ``1 - x**2`` evaluated as ``(1 + x) * (1 - x)`` (no cancellation
    for ``|x|`` near 1), differentiated as ``-2 x`` (no cancellation for tiny ``x``): a ``custom_jvp`` of
    ``add``/``sub``/``mul`` where JAX binds a ``one_minus_square`` primitive."""
    global _one_minus_square
    if _one_minus_square is None:
        from ftrans.transforms.custom_derivatives import custom_jvp

        f = custom_jvp(_one_minus_square_fn)

        @f.defjvp
        def _jvp(primals: tuple, tangents: tuple) -> tuple:
            (p,), (t,) = primals, tangents
            return f(p), lax.mul(t, lax.mul(full_like(p, -2), p))

        _one_minus_square = f
    check_arraylike("one_minus_square", x)
    return _one_minus_square(as_operand(x))


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Any:
    """``lax.batch_matmul``: matrix products over the leading (batch) dimensions of two arrays of one rank."""
    a, b = as_operand(lhs), as_operand(rhs)
    na, nb = len(shape_of(a)), len(shape_of(b))
    if min(na, nb) < 2:
        raise FtransValueError(f"Arguments to batch_matmul must be at least 2D, got {na}, {nb}")
    if na != nb:
        raise FtransValueError(f"Arguments to batch_matmul must have same ndim, got {na}, {nb}")
    batch = tuple(range(na - 2))
    return lax.dot_general(a, b, (((na - 1,), (nb - 2,)), (batch, batch)), precision=precision)


def _unsigned(d: np.dtype) -> np.dtype:
    d = np.dtype(d)
    if d in dtypes.NARROW_INTS:
        return {dtypes.int2: dtypes.uint2, dtypes.int4: dtypes.uint4}.get(d, d)
    return np.dtype(f"uint{d.itemsize * 8}")


def _int_operand(name: str, x: Any) -> Any:
    op = as_operand(x)
    d = dtype_weak(op)[0]
    if not dtypes.is_int(d):
        raise FtransTypeError(f"lax.{name}: expects integer operands, got {d.name}")
    return op


def clz(x: Any) -> Any:
    """``lax.clz``: the number of leading zero bits of each integer."""
    op = _int_operand("clz", x)
    d = dtype_weak(op)[0]
    if d not in dtypes.NARROW_INTS:
        from ftrans.core.prims.elementwise import clz_p

        return lax._bind(clz_p, *lax._operands("clz", (op,)))
    u = _unsigned(d)
    bits = dtypes.iinfo(u).bits
    reinterpret = lax.convert_element_type if d in dtypes.NARROW_INTS else lax.bitcast_convert_type  # same bits
    v = op if d == u else reinterpret(op, u)
    shift = 1
    while shift < bits:  # smear the highest set bit into every lower position
        v = lax.bitwise_or(v, lax.shift_right_logical(v, full_like(v, shift)))
        shift *= 2
    out = lax.sub(full_like(v, bits), lax.population_count(v))
    out = out if d == u else reinterpret(out, d)
    if dtype_weak(op)[1]:  # a Python int in, a weakly typed count out (as JAX's clz_p keeps weak types)
        out = S.convert_element_type_p.bind(out, new_dtype=d, weak_type=True)
    return out


def mulhi(x: Any, y: Any, /) -> Any:
    """``lax.mulhi``: the upper N bits of the 2N-bit product of two N-bit integers (signed or unsigned)."""
    a, b = _int_operand("mulhi", x), _int_operand("mulhi", y)
    a, b = lax._broadcast_ones("mulhi", *lax._same_dtype_operands("mulhi", (a, b)))
    d = dtype_weak(a)[0]
    if dtype_weak(b)[0] != d:
        raise FtransTypeError(f"lax.mulhi: operands must have one dtype, got {d.name} and {dtype_weak(b)[0].name}")
    u = _unsigned(d)
    h = u.itemsize * 4
    ua = a if d == u else lax.bitcast_convert_type(a, u)
    ub = b if d == u else lax.bitcast_convert_type(b, u)
    mask, sh = full_like(ua, (1 << h) - 1), full_like(ua, h)
    a_lo, a_hi = lax.bitwise_and(ua, mask), lax.shift_right_logical(ua, sh)
    b_lo, b_hi = lax.bitwise_and(ub, mask), lax.shift_right_logical(ub, sh)
    lo_lo, hi_lo, lo_hi, hi_hi = lax.mul(a_lo, b_lo), lax.mul(a_hi, b_lo), lax.mul(a_lo, b_hi), lax.mul(a_hi, b_hi)
    cross = lax.add(lax.add(lax.shift_right_logical(lo_lo, sh), lax.bitwise_and(hi_lo, mask)), lo_hi)
    out = lax.add(lax.add(hi_hi, lax.shift_right_logical(hi_lo, sh)), lax.shift_right_logical(cross, sh))
    if d == u:
        return out
    # signed: subtract y where x < 0 and x where y < 0 (mod 2^N)
    zero = full_like(ua, 0)
    out = lax.sub(out, lax.select(lax.lt(a, full_like(a, 0)), ub, zero))
    out = lax.sub(out, lax.select(lax.lt(b, full_like(b, 0)), ua, zero))
    return lax.bitcast_convert_type(out, d)


# ---------------------------------------------------------------- indexing
def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Any:
    """``lax.index_take``: ``src`` indexed by one index array per axis in ``axes`` (indices wrap around)."""
    s = as_operand(src)
    shape = tuple(shape_of(s))
    axes = tuple(operator.index(a) for a in axes)
    cols = [lax.expand_dims(as_operand(i), (1,)) for i in idxs]
    indices = lax.concatenate(cols, 1)
    d = dtype_weak(indices)[0]
    bound = np.array([shape[a] for a in axes], dtype=d)
    lead = len(shape_of(indices)) - 1
    indices = lax.rem(lax.add(lax.rem(indices, lax.broadcast_in_dim(bound, shape_of(indices), (lead,))),
                              lax.broadcast_in_dim(bound, shape_of(indices), (lead,))),
                      lax.broadcast_in_dim(bound, shape_of(indices), (lead,)))
    sizes = [1 if i in axes else n for i, n in enumerate(shape)]
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
                                collapsed_slice_dims=axes, start_index_map=axes)
    return _indexing.gather(s, indices, dn, tuple(sizes))


def _approx_k(largest: bool):
    def fn(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
           reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list[Any]:
        op = as_operand(operand)
        shape = tuple(shape_of(op))
        if not aggregate_to_topk and shape and (is_symbolic_dim(k) or is_symbolic_dim(shape[reduction_dimension])):
            raise FtransNotImplementedError(
                f"approx_top_k with aggregate_to_topk=False not yet implemented when either the `k` ({k}) or the "
                f" reduction dimension size ({shape[reduction_dimension]}) are symbolic")
        if not largest:
            vals, idx = top_k(lax.neg(op) if dtype_weak(op)[0].kind != "u" else lax.bitwise_not(op), k,
                              axis=reduction_dimension)
            return [lax.neg(vals) if dtype_weak(op)[0].kind != "u" else lax.bitwise_not(vals), idx]
        return top_k(op, k, axis=reduction_dimension)

    fn.__name__ = "approx_max_k" if largest else "approx_min_k"
    fn.__doc__ = (f"``lax.{fn.__name__}``: the {'largest' if largest else 'smallest'} ``k`` entries along "
                  "``reduction_dimension`` and their indices; exact here (JAX is exact on CPU and GPU too).")
    return fn


approx_max_k = _approx_k(True)
approx_min_k = _approx_k(False)


# ---------------------------------------------------------------- platforms, composites, named axes
def platform_dependent(*args: Any, default: Callable | None = None, **per_platform: Callable) -> Any:
    """``lax.platform_dependent``: call the branch for the platform ftrans runs on (``cpu``, ``cuda``/``rocm``
    or ``gpu``, ``tpu``), else ``default``."""
    from ftrans.core.platform import platform_override
    from ftrans.devices import default_backend

    plat = platform_override.get() or default_backend()
    names = {"cpu": ("cpu",), "gpu": ("cuda", "rocm", "gpu"), "cuda": ("cuda", "gpu"), "rocm": ("rocm", "gpu"),
             "tpu": ("tpu",)}.get(plat, (plat,))
    for n in names:
        if n in per_platform:
            return per_platform[n](*args)
    if default is None:
        raise NotImplementedError(
            f"platform_dependent: no branch for platform {plat!r} (given: {sorted(per_platform)}) and no default"
        )
    return default(*args)


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """``lax.composite``: ``decomposition`` as one named operation (a ``composite`` equation, lowered to a
    ``stablehlo.composite`` op whose decomposition is a private function).

    The returned function takes the operation's inputs positionally (any pytrees of arrays) and its
    attributes as keywords: NumPy arrays and scalars, dtypes, Python bool/int/float/str (a keyword given
    ``None`` is left out of the op's attributes). A compiler that knows ``name`` and ``version`` may put
    its own code in place of the decomposition; any other runs the decomposition. As in JAX, a composite
    has no derivative or batching rule of its own: wrap it in ``custom_jvp``/``custom_vjp`` for those.

    Args:
        decomposition: the function that gives the operation's meaning.
        name: the operation's name (``"my.tangent"``).
        version: the version of the operation's meaning.
    """
    import functools

    from ftrans.core.ir import hoist_consts
    from ftrans.core.prims.calls import HashableAttribute, composite_p
    from ftrans.errors import UnexpectedTracerError
    from ftrans.lax._control_flow import _flatten_operands

    @functools.wraps(decomposition)
    def call(*args: Any, **kwargs: Any) -> Any:
        for key, v in kwargs.items():
            if any(isinstance(x, (_trace.Tracer, Array)) for x in tree_util.tree_leaves(v)):
                raise UnexpectedTracerError(
                    f"Found a traced or device array as the attribute {key!r} of the composite op {name!r}. "
                    "Attributes are compile-time constants; any value not known at compile time must be "
                    "passed as a positional argument of the composite.\n\nNote: If you are passing jax "
                    "arrays as attributes, use numpy arrays instead.")
        flat, in_tree = _flatten_operands(args, f"the argument of composite {name!r} at args")
        out_box: list = []

        def flat_fun(*xs: Any) -> list:
            out = decomposition(*tree_util.tree_unflatten(in_tree, list(xs)), **kwargs)
            leaves, tree = _flatten_operands(out, f"the output of composite {name!r} at ")
            out_box.append(tree)
            return leaves

        closed, _ = _trace.stage(flat_fun, [x.aval for x in flat])
        body, consts = hoist_consts(closed)
        if any(isinstance(c, _trace.Tracer) for c in consts):
            raise UnexpectedTracerError(
                f"Found a JAX Tracer as a constant in the decomposition for the composite op '{name}'. This "
                "means that the decomposition function closes over a value that is involved in a "
                "transformation (a traced value). Any values that aren't explicitly known at compile time "
                "must be explicitly passed as arguments to the composite.")
        attributes = []
        for key, v in kwargs.items():
            leaves, treedef = tree_util.tree_flatten(v)
            attributes.append((key, tuple(HashableAttribute(x) if isinstance(x, np.ndarray) else x
                                          for x in leaves), treedef))
        outs = composite_p.bind(*consts, *flat, name=name, attributes=tuple(attributes), version=int(version),
                                jaxpr=body)
        return tree_util.tree_unflatten(out_box[0], list(outs))

    return call


def axis_size(axis_name: Any) -> int:
    """``lax.axis_size``: the size of a named axis bound by ``vmap``/``pmap`` (the product, for several)."""
    names = axis_name if isinstance(axis_name, (tuple, list)) else (axis_name,)
    return math.prod(f.size for f in frames_of("axis_size", tuple(names)))


def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """``lax.dce_sink``: mark every array of ``val`` as used, so dead-code elimination keeps what computes
    it (an effectful ``dce_sink`` equation per leaf, as JAX binds); with ``prevent_mlir_dce`` XLA keeps it
    too (a side-effecting custom call). Returns None."""
    from ftrans.core.prims.callbacks import dce_sink_p

    for leaf in tree_util.tree_leaves(val):
        check_arraylike("lax.dce_sink", leaf)
        dce_sink_p.bind(as_operand(leaf), prevent_mlir_dce=bool(prevent_mlir_dce))


# ---------------------------------------------------------------- type names
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
PrecisionLike = Any
ConvGeneralDilatedDimensionNumbers = Any


class DotAlgorithmPreset(enum.Enum):
    """JAX's ``lax.DotAlgorithmPreset``, a ``precision`` naming the operand storage types and accumulation
    type of a product: the operands are converted to them, the lowering carries the algorithm to XLA, and
    a preset XLA's CPU backend cannot run raises ``ValueError`` there, as in JAX."""

    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"DotAlgorithmPreset.{self.name}"


class DotAlgorithm(tuple):
    """JAX's ``lax.DotAlgorithm`` (lhs/rhs/accumulation types and options), a ``precision`` lowered to XLA's
    dot algorithm attribute (which XLA's CPU backend does not run: ``ValueError`` there, as in JAX)."""

    def __new__(cls, lhs_precision_type: Any, rhs_precision_type: Any, accumulation_type: Any,
                lhs_component_count: int = 1, rhs_component_count: int = 1, num_primitive_operations: int = 1,
                allow_imprecise_accumulation: bool = False) -> DotAlgorithm:
        return super().__new__(cls, (lhs_precision_type, rhs_precision_type, accumulation_type,
                                     lhs_component_count, rhs_component_count, num_primitive_operations,
                                     allow_imprecise_accumulation))


class AccuracyMode(enum.Enum):
    """JAX's ``lax.AccuracyMode`` for transcendental functions' ``accuracy`` argument."""

    HIGHEST = 1
    DEFAULT = 2


class Tolerance(tuple):
    """JAX's ``lax.Tolerance(atol, rtol, ulps)`` for transcendental functions' ``accuracy`` argument."""

    def __new__(cls, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0) -> Tolerance:
        return super().__new__(cls, (float(atol), float(rtol), int(ulps)))


class RandomAlgorithm(enum.IntEnum):
    """JAX's ``lax.RandomAlgorithm`` (the algorithms of XLA's RngBitGenerator)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


def scatter_apply(operand: Any, scatter_indices: Any, func: Callable, dimension_numbers: Any, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False, unique_indices: bool = False,
                  mode: Any = None) -> Any:
    """``lax.scatter_apply``: ``func`` (a scalar function) applied to every element of ``operand`` that the
    scatter windows cover, once per window covering it (as XLA applies the update computation per update).

    The hits per element are counted with a ``scatter_add`` of ones; a ``while_loop`` then applies ``func``
    (vmapped over the elements) to the elements with hits left, so repeated indices compose ``func``.
    """
    from ftrans.transforms.batching import vmap

    op = as_operand(operand)
    shape = tuple(shape_of(op))
    counts = _indexing.scatter_add(full(shape, 0, dtypes.int32), scatter_indices,
                                   full(_shape("scatter_apply", update_shape), 1, dtypes.int32), dimension_numbers,
                                   indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    flat = vmap(func)
    total = math.prod(shape)

    def apply(v: Any) -> Any:
        out = flat(lax.reshape(v, (total,)))
        return lax.reshape(lax.convert_element_type(out, dtype_weak(v)[0]), shape)

    return apply_counted(op, counts, apply)


def apply_counted(x: Any, counts: Any, step: Callable[[Any], Any]) -> Any:
    """``x`` with ``step`` (an elementwise map of the whole array) applied ``counts[i]`` times at element i:
    a ``while_loop`` over the largest count, each round updating the elements with applications left.
    The counts may be traced (or batched under ``vmap``); ``x.at[idx].apply`` and ``scatter_apply`` use it."""
    from ftrans.lax._control_flow import while_loop

    shape = tuple(shape_of(x))
    most = lax.reduce_max(counts, tuple(range(len(shape)))) if math.prod(shape) else np.int32(0)

    def cond(c: tuple) -> Any:
        return lax.lt(c[0], most)

    def body(c: tuple) -> tuple:
        i, v = c
        hit = lax.gt(counts, lax.broadcast_in_dim(i, shape, ()))
        return lax.add(i, np.int32(1)), lax.select(hit, step(v), v)

    return while_loop(cond, body, (np.int32(0), x))[1]


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """``lax.stack``: arrays of one shape and dtype joined along a new ``axis``."""
    ops = [as_operand(o) for o in operands]
    if not ops:
        raise FtransValueError("lax.stack: needs at least one array")
    nd = len(shape_of(ops[0])) + 1
    ax = lax._axis("stack", axis, nd)
    return lax.concatenate([lax.expand_dims(o, (ax,)) for o in ops], ax)


def unstack(x: Any, axis: int = 0) -> tuple:
    """``lax.unstack``: the slices of ``x`` along ``axis``, that axis removed."""
    op = as_operand(x)
    shape = tuple(shape_of(op))
    ax = lax._axis("unstack", axis, len(shape))
    return tuple(lax.squeeze(lax.slice_in_dim(op, i, i + 1, axis=ax), (ax,)) for i in range(shape[ax]))


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32,
                      algorithm: RandomAlgorithm = RandomAlgorithm.RNG_DEFAULT, *, out_sharding: Any = None
                      ) -> tuple[Any, Any]:
    """``lax.rng_bit_generator``: XLA's stateless bit generator; ``(new_key, bits)`` from a uint32[4] key.
    The bits are XLA's (and so JAX's) for the algorithm; prefer ``ftrans.random`` for portable streams.
    ``out_sharding`` lays the bits out (their values unchanged); the new key stays replicated."""
    d = dtypes.to_dtype(dtype)
    if d not in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64):
        raise FtransTypeError(f"rng_bit_generator: unsupported dtype {d.name}")
    k = as_operand(key)
    new_key, bits = lax._bind(S.rng_bit_generator_p, k, shape=_shape("rng_bit_generator", shape), dtype=d,
                              algorithm=int(RandomAlgorithm(algorithm)))
    if out_sharding is not None:
        from ftrans.lax._sharding import place_result

        bits = place_result("rng_bit_generator", out_sharding, lambda: bits)
    return new_key, bits


def stage(x: Any, /) -> Any:
    """``lax.stage``: the identity, lifting ``x`` (an array or scalar, e.g. a NumPy array or Python number) into
    the current trace; outside any trace it returns an ftrans Array (a Python scalar keeps its weak type)."""
    check_arraylike("stage", x)
    return as_operand(x)


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Any:
    """``lax.rng_uniform``: ``shape`` values uniform in ``[a, b)`` (scalars of one integer or float dtype) from
    XLA's stateful generator.  Its values are the backend's and unspecified: not seeded, not reproducible, not
    JAX's; like JAX's it has no derivative or ``vmap`` rule.  Prefer ``ftrans.random``."""
    check_arraylike("rng_uniform", a, b)
    return lax._bind(S.rng_uniform_p, as_operand(a), as_operand(b), shape=_shape("rng_uniform", shape))


def _scaled_dot_check_scale(side: str, shape: tuple, sshape: tuple, contracting: Sequence[int]) -> None:
    for i, size in enumerate(shape):
        if i in contracting:
            if sshape[i] == 0 or size % sshape[i]:
                raise FtransTypeError(f"scaled_dot: {side} contracting dim {i} of size {size} must be divisible by "
                                      f"its scale's dim size {sshape[i]}")
            if size // sshape[i] < 2:
                raise FtransTypeError(f"scaled_dot: the ratio of {side} contracting dim {i} to its scale's dim size "
                                      f"({size // sshape[i]}) must be at least 2; give a scale with at most "
                                      f"{size // 2} entries along dim {i}")
        elif sshape[i] != size:
            raise FtransTypeError(f"scaled_dot: {side} dim {i} of size {size} does not match scale dim size "
                                  f"{sshape[i]} (only contracting dims may be blocked)")


def _scaled_dot_operand(x: Any, scale: Any, contracting: Sequence[int]) -> Any:
    """``x * scale`` in bfloat16, each scale entry repeated over its block of the contracting dims."""
    bf16 = dtypes.bfloat16
    x = lax.convert_element_type(x, bf16)
    if scale is None:
        return x
    shape = tuple(shape_of(x))
    scale = lax.convert_element_type(scale, bf16)
    for i in contracting:
        sshape = tuple(shape_of(scale))
        if sshape[i] != shape[i]:
            block = shape[i] // sshape[i]
            wide = sshape[:i + 1] + (block,) + sshape[i + 1:]
            dims = tuple(d for d in range(len(wide)) if d != i + 1)
            scale = lax.reshape(lax.broadcast_in_dim(scale, wide, dims),
                                sshape[:i] + (shape[i],) + sshape[i + 1:])
    return lax.mul(x, scale)


def scaled_dot(lhs: Any, rhs: Any, *, lhs_scale: Any = None, rhs_scale: Any = None, dimension_numbers: Any = None,
               preferred_element_type: Any = None) -> Any:
    """``lax.scaled_dot``: ``dot_general(lhs * lhs_scale, rhs * rhs_scale)`` with block scales (microscaling).

    Each scale has its operand's shape except along the contracting dims, where it is smaller by an integer
    factor of at least 2 (the block size) and each entry scales its block.  As in JAX the operands and scales
    are taken to bfloat16 and multiplied there, and the product is a ``dot_general`` with
    ``preferred_element_type`` (default bfloat16).  ``dimension_numbers`` defaults to a matmul over the last two
    dims with the leading ones batched (rank >= 2).  Unlike JAX's (no differentiation rule) this composition has
    a gradient.
    """
    check_arraylike("scaled_dot", lhs, rhs, *(s for s in (lhs_scale, rhs_scale) if s is not None))
    lhs, rhs = as_operand(lhs), as_operand(rhs)
    lshape, rshape = tuple(shape_of(lhs)), tuple(shape_of(rhs))
    if dimension_numbers is None:
        if len(lshape) < 2:
            raise FtransTypeError(f"scaled_dot does not support 0-rank and 1-rank operands (got lhs of shape "
                                  f"{lshape}); pass dimension_numbers or operands of rank >= 2")
        n = len(lshape)
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (tuple(operator.index(d) for d in ds) for ds in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        raise FtransTypeError("scaled_dot: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                              f"(lhs_batch, rhs_batch)) of int tuples, got {dimension_numbers!r}") from None
    scales = [as_operand(s) if s is not None else None for s in (lhs_scale, rhs_scale)]
    ranks = [len(lshape), len(rshape)] + [len(shape_of(s)) for s in scales if s is not None]
    if len(set(ranks)) != 1:
        raise FtransTypeError(f"scaled_dot: all input tensors must have the same rank; got lhs {lshape}, rhs "
                              f"{rshape}, scales {[tuple(shape_of(s)) if s is not None else None for s in scales]}")
    if len(lb) != len(rb):
        raise FtransTypeError(f"scaled_dot: LHS and RHS must have the same number of batch dimensions, got "
                              f"{len(lb)} and {len(rb)}")
    if len(lc) != len(rc):
        raise FtransTypeError(f"scaled_dot: LHS and RHS must have the same number of contracting dimensions, got "
                              f"{len(lc)} and {len(rc)}")
    for d in lc + lb:
        lax._axis("scaled_dot", d, len(lshape))
    for d in rc + rb:
        lax._axis("scaled_dot", d, len(rshape))
    for i, j in zip(lc, rc):
        if lshape[i] != rshape[j]:
            raise FtransTypeError(f"scaled_dot: LHS contracting dim {i} of size {lshape[i]} does not match RHS "
                                  f"contracting dim {j} of size {rshape[j]}")
    for i, j in zip(lb, rb):
        sizes = {lshape[i], rshape[j]} | {tuple(shape_of(s))[d] for s, d in zip(scales, (i, j)) if s is not None}
        if len(sizes) != 1:
            raise FtransTypeError(f"scaled_dot: all input tensors must have the same batch dimension size for "
                                  f"batch dims ({i}, {j})")
    if scales[0] is not None:
        _scaled_dot_check_scale("LHS", lshape, tuple(shape_of(scales[0])), lc)
    if scales[1] is not None:
        _scaled_dot_check_scale("RHS", rshape, tuple(shape_of(scales[1])), rc)
    pref = dtypes.bfloat16 if preferred_element_type is None else dtypes.to_dtype(preferred_element_type)
    a = _scaled_dot_operand(lhs, scales[0], lc)
    b = _scaled_dot_operand(rhs, scales[1], rc)
    return lax.dot_general(a, b, ((lc, rc), (lb, rb)), preferred_element_type=pref)
