"""Products: dot, matmul, vdot, inner, outer, tensordot, einsum, kron, trace, diagonal.

Every product lowers to ``dot_general`` plus transposes, reshapes and
``reduce_sum``; operands are first promoted with jnp's rules (Python scalars are
weak).  ``einsum`` chooses its pairwise contraction order with ``opt_einsum``
(a jax dependency) and then lowers each pair itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ftrans.core import dtypes
from ftrans.core.operands import (
    as_operand,
    broadcast_operands,
    broadcast_shapes,
    broadcast_to_shape,
    canonicalize_axis,
    check_arraylike,
    concrete_or_error,
    convert,
    dtype_weak,
    shape_of,
)
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import DimExpr
from ftrans.errors import FtransNotImplementedError, FtransTypeError, FtransValueError
from ftrans.lax._ops import canonicalize_precision
from ftrans.numpy._batched import _reshape, batched_matmul, dot_general

__all__ = ["matmul", "dot", "vdot", "vecdot", "inner", "outer", "tensordot", "einsum", "kron", "trace", "diagonal"]


def _precision(name: str, precision: Any) -> Any:
    """The canonical precision (``None`` or one per operand) that the staged ``dot_general`` keeps, as JAX
    (``None`` takes the ``default_matmul_precision`` config option)."""
    return canonicalize_precision(name, precision)


def _promote(name: str, a: Any, b: Any) -> tuple[Any, Any]:
    # jnp.dot/matmul/... join the dtypes without JAX's weak-stripping conversion (they pass a preferred type
    # to dot_general), so a weak operand's cotangent stays strong here, as in JAX.
    check_arraylike(name, a, b)
    dt, weak = dtypes.promote((dtype_weak(a), dtype_weak(b)))
    return convert(a, dt, weak), convert(b, dt, weak)


def _as_given(name: str, a: Any, b: Any) -> tuple[Any, Any, tuple]:
    """The operands of a product of arrays, in their own dtypes (JAX's products hand mixed operands to
    ``dot_general`` as they are, naming the joined dtype as the preferred one), and that join."""
    check_arraylike(name, a, b)
    joined = dtypes.promote((dtype_weak(a), dtype_weak(b)))
    return as_operand(a), as_operand(b), joined


def _preferred(x: Any, y: Any, preferred_element_type: Any, joined: tuple | None = None,
               where: str | None = "dot") -> tuple[Any, bool]:
    """(the ``preferred_element_type`` a product's ``dot_general`` names, whether the result is weak): as
    JAX, the joined dtype of the promoted operands when none is given, the result weak when both operands
    are; an explicit preferred type gives a strong result (a 64-bit one without x64: JAX's warning, naming
    ``where`` as JAX's does; None: narrowed quietly)."""
    if preferred_element_type is None:
        if joined is not None:
            return joined
        return dtype_weak(x)[0], bool(dtype_weak(x)[1] and dtype_weak(y)[1])
    if where is None:
        return preferred_element_type, False
    return dtypes.requested(preferred_element_type, where), False


def _multiply(x: Any, y: Any) -> Any:
    from ftrans.numpy._elementwise import multiply

    return multiply(x, y)


def _scalar_product(x: Any, y: Any) -> Any:
    """``x * y`` for operands already joined to one dtype, with no weak-stripping conversion (JAX's
    scalar ``dot``/``inner`` are a dot_general of the operands as given)."""
    if dtype_weak(x)[0] == dtypes.bool_:
        return _multiply(x, y)
    return E.mul_p.bind(*broadcast_operands("dot", [x, y]))


# ---------------------------------------------------------------- matmul, dot, vdot, inner, outer
def matmul(a: Any, b: Any, /, *, precision: Any = None, preferred_element_type: Any = None,
           out_sharding: Any = None) -> Any:
    """Matrix product of two arrays (the `@` operator).

    Leading (batch) axes broadcast with NumPy's rules; a 1-D operand is treated as a vector and its axis
    removed from the result. `out_sharding` lays the result out.

    Args:
        a: First array (not a scalar).
        b: Second array (not a scalar).
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        The product, in the promoted dtype.

    Examples:
        >>> a = jnp.array([[1, 2], [3, 4]])
        >>> jnp.matmul(a, a)
        Array([[ 7, 10],
               [15, 22]], dtype=int32)
        >>> jnp.matmul(a, jnp.array([1, 0]))
        Array([1, 3], dtype=int32)
        >>> jnp.matmul(jnp.ones((5, 2, 3)), jnp.ones((3, 4))).shape
        (5, 2, 4)

    See also:
        `dot`, `matvec`, `vecmat`, `einsum`.
    """
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("matmul", out_sharding, lambda: matmul(
            a, b, precision=precision, preferred_element_type=preferred_element_type), (a, b))
    prec = _precision("matmul", precision)
    x, y, joined = _as_given("matmul", a, b)
    pet, weak = _preferred(x, y, preferred_element_type, joined, where="matmul")
    return batched_matmul("matmul", x, y, pet, prec, weak)


def dot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None,
        out_sharding: Any = None) -> Any:
    """Dot product of two arrays.

    For 1-D operands it is the inner product, for 2-D the matrix product; in general it sums over the last
    axis of `a` and the second-to-last of `b` (the last if `b` is 1-D). Scalars multiply. `out_sharding` lays
    the result out.

    Args:
        a: First array.
        b: Second array.
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        The product, in the promoted dtype, of shape `a.shape[:-1] + b.shape[:-2] + b.shape[-1:]`.

    Examples:
        >>> jnp.dot(jnp.array([1, 2, 3]), jnp.array([4, 5, 6]))
        Array(32, dtype=int32)
        >>> jnp.dot(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1]))
        Array([3, 7], dtype=int32)

    See also:
        `matmul`, `vdot`, `tensordot`, `einsum`.
    """
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("dot", out_sharding, lambda: dot(
            a, b, precision=precision, preferred_element_type=preferred_element_type), (a, b))
    prec = _precision("dot", precision)
    if not shape_of(a) or not shape_of(b):
        x, y = _promote("dot", a, b)
        out = _scalar_product(x, y)
        if preferred_element_type is not None:
            out = S.convert_element_type_p.bind(out, new_dtype=dtypes.requested(preferred_element_type, "dot"),
                                                weak_type=False)
        return out
    x, y, joined = _as_given("dot", a, b)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    lc = len(xs) - 1
    rc = 0 if len(ys) == 1 else len(ys) - 2
    if xs[lc] != ys[rc]:
        raise FtransTypeError(
            f"dot: dot_general requires contracting dimensions to have the same shape, got ({xs[lc]},) and "
            f"({ys[rc]},). The shapes {xs} and {ys} are not aligned: axis {lc} of the first ({xs[lc]}) "
            f"!= axis {rc} of the second ({ys[rc]})"
        )
    pet, weak = _preferred(x, y, preferred_element_type, joined)
    return dot_general(x, y, (((lc,), (rc,)), ((), ())), pet, prec, weak)


def _ravel(x: Any) -> Any:
    return _reshape(x, (math.prod(shape_of(x)),))


def vdot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Dot product of two flattened arrays, conjugating the first.

    Args:
        a: First array (conjugated if complex).
        b: Second array, with as many elements as `a`.
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
    Returns:
        A 0-d array in the promoted dtype.

    Examples:
        >>> jnp.vdot(jnp.array([[1, 2], [3, 4]]), jnp.array([[1, 1], [1, 1]]))
        Array(10, dtype=int32)
        >>> jnp.vdot(jnp.array([1j, 2]), jnp.array([1j, 1]))
        Array(3.+0.j, dtype=complex64)

    See also:
        `dot`, `vecdot`.
    """
    prec = _precision("vdot", precision)
    x, y, joined = _as_given("vdot", a, b)
    if dtype_weak(x)[0].kind == "c":
        x = E.conj_p.bind(x)
    xr, yr = _ravel(x), _ravel(y)
    if shape_of(xr) != shape_of(yr):
        raise FtransTypeError(
            f"vdot: the operands must have the same number of elements; got shapes {shape_of(x)} and {shape_of(y)}"
        )
    pet, weak = _preferred(xr, yr, preferred_element_type, joined)
    return dot_general(xr, yr, (((0,), (0,)), ((), ())), pet, prec, weak)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Vector dot product along an axis, conjugating the first operand.

    The other axes broadcast.

    Args:
        x1: First array (conjugated if complex).
        x2: Second array.
        axis: The axis of the vectors (the same length in both).
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
    Returns:
        An array of the broadcast shape without `axis`.

    Examples:
        >>> jnp.vecdot(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 10]))
        Array([21, 43], dtype=int32)

    See also:
        `vdot`, `matvec`.
    """
    prec = _precision("vecdot", precision)
    x, y, joined = _as_given("vecdot", x1, x2)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    ax_x = canonicalize_axis("vecdot", axis, len(xs))
    ax_y = canonicalize_axis("vecdot", axis, len(ys))
    if xs[ax_x] != ys[ax_y]:
        raise FtransTypeError(f"vecdot: axis {axis} has size {xs[ax_x]} in {xs} but {ys[ax_y]} in {ys}")
    if dtype_weak(x)[0].kind == "c":
        x = E.conj_p.bind(x)
    x = _moveaxis(x, ax_x, len(xs) - 1)
    y = _moveaxis(y, ax_y, len(ys) - 1)
    batch = broadcast_shapes("vecdot", [tuple(shape_of(x))[:-1], tuple(shape_of(y))[:-1]], (x, y))
    x = broadcast_to_shape(x, batch + tuple(shape_of(x))[-1:])
    y = broadcast_to_shape(y, batch + tuple(shape_of(y))[-1:])
    nb = len(shape_of(x)) - 1
    pet, weak = _preferred(x, y, preferred_element_type, joined)
    return dot_general(x, y, (((nb,), (nb,)), (tuple(range(nb)), tuple(range(nb)))), pet, prec, weak)


def _moveaxis(x: Any, src: int, dst: int) -> Any:
    if src == dst:
        return x
    perm = [i for i in range(len(shape_of(x))) if i != src]
    perm.insert(dst, src)
    return S.transpose_p.bind(x, permutation=tuple(perm))


def inner(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Inner product of two arrays over their last axes.

    Args:
        a: First array.
        b: Second array, with the same last-axis length.
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
    Returns:
        An array of shape `a.shape[:-1] + b.shape[:-1]`.

    Examples:
        >>> jnp.inner(jnp.array([1, 2, 3]), jnp.array([0, 1, 0]))
        Array(2, dtype=int32)
        >>> jnp.inner(jnp.eye(2), jnp.array([[1., 2.], [3., 4.]]))
        Array([[1., 3.],
               [2., 4.]], dtype=float32)

    See also:
        `dot`, `outer`.
    """
    prec = _precision("inner", precision)
    if not shape_of(a) or not shape_of(b):
        return _scalar_product(*_promote("inner", a, b))
    x, y, joined = _as_given("inner", a, b)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    if xs[-1] != ys[-1]:
        raise FtransTypeError(f"inner: the last axes of shapes {xs} and {ys} differ ({xs[-1]} != {ys[-1]})")
    pet, weak = _preferred(x, y, preferred_element_type, joined, where="tensordot")
    return dot_general(x, y, (((len(xs) - 1,), (len(ys) - 1,)), ((), ())), pet, prec, weak)


def outer(a: Any, b: Any, out: None = None) -> Any:
    """Outer product of two vectors.

    The inputs are flattened: the result is `ravel(a)[:, None] * ravel(b)[None, :]`.

    Args:
        a: First array.
        b: Second array.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        A 2-D array of shape `(a.size, b.size)`.

    Examples:
        >>> jnp.outer(jnp.array([1, 2]), jnp.array([1, 10, 100]))
        Array([[  1,  10, 100],
               [  2,  20, 200]], dtype=int32)

    See also:
        `inner`, `kron`, `ufunc.outer`.
    """
    if out is not None:
        raise NotImplementedError("outer: the out argument is not supported")
    x, y = _promote("outer", a, b)
    x, y = _ravel(x), _ravel(y)
    return _multiply(_reshape(x, (shape_of(x)[0], 1)), _reshape(y, (1, shape_of(y)[0])))


# ---------------------------------------------------------------- tensordot, kron
def _axes_list(name: str, axes: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(axes, (int,)) or not isinstance(axes, Sequence):
        axes = (axes,)
    return tuple(canonicalize_axis(name, int(concrete_or_error(ax, f"{name}: axes")), ndim) for ax in axes)


def tensordot(a: Any, b: Any, axes: Any = 2, *, precision: Any = None, preferred_element_type: Any = None,
              out_sharding: Any = None) -> Any:
    """Tensor dot product over chosen axes.

    `axes` is a count (the last `axes` axes of `a` with the first of `b`) or a pair of axis lists.
    `out_sharding` lays the result out, as `einsum`'s does.

    Args:
        a: First array.
        b: Second array.
        axes: An int, or a pair of sequences of axes to contract.
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        The remaining axes of `a` followed by those of `b`.

    Examples:
        >>> a = jnp.ones((2, 3, 4))
        >>> jnp.tensordot(a, jnp.ones((3, 4, 5))).shape
        (2, 5)
        >>> jnp.tensordot(a, jnp.ones((4, 2)), axes=([0, 2], [1, 0])).shape
        (3,)

    See also:
        `dot`, `einsum`.
    """
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("tensordot", out_sharding, lambda: tensordot(
            a, b, axes, precision=precision, preferred_element_type=preferred_element_type), (a, b))
    prec = _precision("tensordot", precision)
    x, y, joined = _as_given("tensordot", a, b)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    if isinstance(axes, int) and not isinstance(axes, bool):
        if not 0 <= axes <= min(len(xs), len(ys)):
            raise FtransTypeError(
                f"tensordot: axes={axes} must be between 0 and the smaller rank of shapes {xs} and {ys}"
            )
        lc = tuple(range(len(xs) - axes, len(xs)))
        rc = tuple(range(axes))
    elif isinstance(axes, Sequence) and len(axes) == 2:
        lc = _axes_list("tensordot", axes[0], len(xs))
        rc = _axes_list("tensordot", axes[1], len(ys))
        if len(lc) != len(rc):
            raise FtransTypeError(
                f"tensordot: the two axis lists must have equal lengths; got {axes[0]} and {axes[1]}"
            )
    else:
        raise FtransTypeError(
            f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}"
        )
    for i, j in zip(lc, rc):
        if xs[i] != ys[j]:
            raise FtransTypeError(
                f"tensordot: shape mismatch between axis {i} of {xs} ({xs[i]}) and axis {j} of {ys} ({ys[j]})"
            )
    pet, weak = _preferred(x, y, preferred_element_type, joined, where="tensordot")
    return dot_general(x, y, ((lc, rc), ((), ())), pet, prec, weak)


def kron(a: Any, b: Any) -> Any:
    """Kronecker product of two arrays.

    Computed by interleaving axes and broadcasting a multiply.

    Args:
        a: First array.
        b: Second array.
    Returns:
        An array whose blocks are `a[i, j] * b`.

    Examples:
        >>> jnp.kron(jnp.array([[1, 2], [3, 4]]), jnp.array([[1, 1]]))
        Array([[1, 1, 2, 2],
               [3, 3, 4, 4]], dtype=int32)

    See also:
        `outer`.
    """
    x, y = _promote("kron", a, b)
    xs, ys = tuple(shape_of(x)), tuple(shape_of(y))
    nd = max(len(xs), len(ys))
    xs, ys = (1,) * (nd - len(xs)) + xs, (1,) * (nd - len(ys)) + ys
    xr = _reshape(x, tuple(d for s in xs for d in (s, 1)))
    yr = _reshape(y, tuple(d for s in ys for d in (1, s)))
    return _reshape(_multiply(xr, yr), tuple(p * q for p, q in zip(xs, ys)))


# ---------------------------------------------------------------- diagonal, trace
def _diagonal_last2(x: Any, offset: int) -> Any:
    """The diagonal of the last two axes, appended as the last axis.

    Built from slices and reshapes only: the square ``L x L`` corner that holds
    the diagonal, flattened, has its diagonal at stride ``L + 1``.
    """
    shape = tuple(shape_of(x))
    lead, n, m = shape[:-2], shape[-2], shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    L = max(0, min(n - r0, m - c0))
    nd = len(shape)
    starts = (0,) * (nd - 2) + (min(r0, n), min(c0, m))
    limits = lead + (min(r0, n) + L, min(c0, m) + L)
    sq = S.slice_p.bind(x, start_indices=starts, limit_indices=limits, strides=None)
    flat = _reshape(sq, lead + (L * L,))
    return S.slice_p.bind(flat, start_indices=(0,) * (nd - 1), limit_indices=lead + (L * L,),
                          strides=(1,) * (nd - 2) + (L + 1,))


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """Return the specified diagonal of an array.

    For more than two dimensions the diagonal of axes `axis1`/`axis2` becomes the last axis of the result.

    Args:
        a: Array with at least 2 dimensions.
        offset: Diagonal offset: positive above the main diagonal, negative below.
        axis1: First axis of the 2-D planes.
        axis2: Second axis of the 2-D planes.
    Returns:
        An array of `a`'s dtype holding the diagonal(s).

    Examples:
        >>> x = jnp.arange(9).reshape(3, 3)
        >>> jnp.diagonal(x)
        Array([0, 4, 8], dtype=int32)
        >>> jnp.diagonal(x, offset=1)
        Array([1, 5], dtype=int32)

    See also:
        `diag`, `trace`.
    """
    check_arraylike("diagonal", a)
    x = as_operand(a)
    nd = len(shape_of(x))
    if nd < 2:
        raise FtransValueError(f"diagonal requires an array of at least two dimensions, got shape {shape_of(x)}")
    a1 = canonicalize_axis("diagonal", axis1, nd)
    a2 = canonicalize_axis("diagonal", axis2, nd)
    if a1 == a2:
        raise FtransValueError(f"diagonal: axis1 and axis2 cannot be the same (both {a1})")
    offset = int(concrete_or_error(offset, "diagonal: offset"))
    perm = tuple(i for i in range(nd) if i not in (a1, a2)) + (a1, a2)
    if perm != tuple(range(nd)):
        x = S.transpose_p.bind(x, permutation=perm)
    out = _diagonal_last2(x, offset)
    d, w = dtype_weak(out)
    return S.convert_element_type_p.bind(out, new_dtype=d, weak_type=False) if w else out


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: None = None) -> Any:
    """Sum along a diagonal of an array.

    It is the sum of `diagonal`; small integers sum in the default int type.

    Args:
        a: Array with at least 2 dimensions.
        offset: Diagonal offset: positive above the main diagonal, negative below.
        axis1: First axis of the 2-D planes.
        axis2: Second axis of the 2-D planes.
        dtype: Optional dtype to sum in.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
    Returns:
        The sums, with `axis1` and `axis2` removed.

    Examples:
        >>> jnp.trace(jnp.arange(9).reshape(3, 3))
        Array(12, dtype=int32)
        >>> jnp.trace(jnp.ones((2, 2, 3)), axis1=0, axis2=1)
        Array([2., 2., 2.], dtype=float32)

    See also:
        `diagonal`.
    """
    from ftrans.numpy._reductions import sum as _sum

    if out is not None:
        raise NotImplementedError("trace: the out argument is not supported")
    if dtype is not None and dtypes.narrowed(dtype) is not None:  # (JAX's warning names trace)
        dtype = dtypes.requested(dtype, "trace")
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ---------------------------------------------------------------- einsum
_ELL = "..."


def _ellipsis_labels(k: int) -> list[str]:
    # Private-use code points stand for the axes an ellipsis covers.
    return [chr(0xE000 + i) for i in range(k)]


def _parse_term(term: str, ndim: int | None, n_ell: int, where: str) -> list[str]:
    if term.count(_ELL) > 1 or ("." in term.replace(_ELL, "")):
        raise FtransValueError(f"einsum: invalid subscript {term!r} in {where} (at most one '...')")
    for ch in term.replace(_ELL, ""):
        # any character labels an axis, as in JAX (``"bsd,3dkh->bs3kh"``), except the ones that separate terms
        if ch in "->" or ch.isspace() or 0xE000 <= ord(ch) < 0xF900:
            raise FtransValueError(f"einsum: invalid subscript character {ch!r} in {where}")
    if _ELL not in term:
        if ndim is not None and len(term) != ndim:
            raise FtransValueError(
                f"einsum: subscript {term!r} has {len(term)} labels but the {where} has rank {ndim}"
            )
        return list(term)
    head, tail = term.split(_ELL)
    k = n_ell if ndim is None else ndim - len(head) - len(tail)
    if k < 0:
        raise FtransValueError(f"einsum: subscript {term!r} has more labels than the rank {ndim} of the {where}")
    return list(head) + _ellipsis_labels(n_ell)[n_ell - k:] + list(tail)


def _parse(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[list[str]], list[str]]:
    subscripts = subscripts.replace(" ", "")
    lhs, arrow, rhs = subscripts.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise FtransValueError(
            f"einsum: {len(terms)} input subscripts in {subscripts!r} but {len(shapes)} operands"
        )
    n_ell = 0
    for t, s in zip(terms, shapes):
        if _ELL in t:
            n_ell = max(n_ell, len(s) - len(t.replace(_ELL, "")))
    ins = [_parse_term(t, len(s), n_ell, f"operand {i}") for i, (t, s) in enumerate(zip(terms, shapes))]
    if arrow:
        out = _parse_term(rhs, None, n_ell, "output")
        if len(set(out)) != len(out):
            raise FtransValueError(f"einsum: output subscript {rhs!r} repeats a label")
        known = {c for t in ins for c in t}
        for c in out:
            if c not in known:
                raise FtransValueError(f"einsum: output label {c!r} does not appear in any input subscript")
    else:
        counts: dict[str, int] = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        ell = _ellipsis_labels(n_ell)
        out = ell + sorted(c for c, k in counts.items() if k == 1 and c not in ell)
    return ins, out


def _sum_axes(x: Any, axes: tuple[int, ...]) -> Any:
    if not axes:
        return x
    prim = R.reduce_or_p if dtype_weak(x)[0] == dtypes.bool_ else R.reduce_sum_p
    return prim.bind(x, axes=tuple(sorted(axes)))


def _diag_repeated(x: Any, labels: list[str]) -> tuple[Any, list[str]]:
    """Replace each label repeated within one operand by the diagonal over its axes."""
    while True:
        dup = next((c for c in labels if labels.count(c) > 1), None)
        if dup is None:
            return x, labels
        i = labels.index(dup)
        j = labels.index(dup, i + 1)
        nd = len(labels)
        perm = tuple(k for k in range(nd) if k not in (i, j)) + (i, j)
        x = S.transpose_p.bind(x, permutation=perm)
        x = _diagonal_last2(x, 0)
        labels = [labels[k] for k in perm[:-2]] + [dup]


class _Operand:
    __slots__ = ("x", "labels")

    def __init__(self, x: Any, labels: list[str]):
        self.x = x
        self.labels = labels


def _sum_unneeded(op: _Operand, needed: set[str], pet: Any = None) -> _Operand:
    """Sum out the labels no later step needs (in ``pet`` where joining with it widens the operand)."""
    drop = tuple(i for i, c in enumerate(op.labels) if c not in needed)
    if not drop:
        return op
    x = op.x
    if pet is not None:
        d, weak = dtype_weak(x)
        target = dtypes.to_dtype(pet)
        if dtypes.promote(((d, weak), (target, False)))[0] != d:
            x = S.convert_element_type_p.bind(x, new_dtype=target, weak_type=False)
    return _Operand(_sum_axes(x, drop), [c for i, c in enumerate(op.labels) if i not in drop])


def _contract_pair(a: _Operand, b: _Operand, needed: set[str], pet: Any, prec: Any = None,
                   weak: bool = False, user_dot: Any = None) -> _Operand:
    """One pairwise contraction as a ``dot_general``: shared labels still needed are batch axes.

    ``user_dot`` is einsum's ``_dot_general``: ``(user_fn, precision as given)``, called in place of
    ``lax.dot_general`` with its arguments."""
    a = _sum_unneeded(a, needed | set(b.labels), pet)
    b = _sum_unneeded(b, needed | set(a.labels), pet)
    shared = [c for c in a.labels if c in b.labels]
    batch = [c for c in shared if c in needed]
    contract = [c for c in shared if c not in needed]
    dn = ((tuple(a.labels.index(c) for c in contract), tuple(b.labels.index(c) for c in contract)),
          (tuple(a.labels.index(c) for c in batch), tuple(b.labels.index(c) for c in batch)))
    if user_dot is None:
        out = dot_general(a.x, b.x, dn, pet, prec, weak)
    else:
        fn, precision = user_dot
        out = fn(a.x, b.x, dn, precision, preferred_element_type=pet)
    labels = batch + [c for c in a.labels if c not in shared] + [c for c in b.labels if c not in shared]
    return _Operand(out, labels)


def _path(optimize: Any, inputs: list[list[str]], output: list[str], sizes: dict[str, int]) -> list[tuple[int, ...]]:
    n = len(inputs)
    if n < 2:
        return []
    if optimize is False or optimize is None:
        return [(0, 1)] * (n - 1)
    if isinstance(optimize, (list, tuple)):
        steps = [tuple(p) for p in optimize if not isinstance(p, str)]
        return steps
    kind = "auto" if optimize is True else optimize
    if not isinstance(kind, str):
        raise NotImplementedError(f"einsum: optimize={optimize!r} is not supported")
    from opt_einsum import paths

    try:
        fn = paths.get_path_fn(kind)
    except KeyError:
        raise FtransValueError(f"einsum: unknown optimize strategy {optimize!r}") from None
    # a symbolic size (shape polymorphism) counts as a size of 8 for the choice of path
    sizes = {k: 8 if isinstance(v, DimExpr) else v for k, v in sizes.items()}
    return [tuple(p) for p in fn([frozenset(t) for t in inputs], frozenset(output), sizes, None)]


def _interleaved_to_subscripts(args: tuple) -> tuple[str, list[Any]]:
    """``einsum(x, [0, 1], y, [1, 2], [0, 2])`` -> ``("ab,bc->ac", [x, y])``."""
    n = len(args) // 2
    ops, subs = list(args[0:2 * n:2]), list(args[1:2 * n:2])

    def term(sub: Any) -> str:
        return "".join(_ELL if s is Ellipsis else _letter(s) for s in sub)

    eq = ",".join(term(s) for s in subs)
    if len(args) % 2 == 1:
        eq += "->" + term(args[-1])
    return eq, ops


def _letter(i: Any) -> str:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if not isinstance(i, int) or not 0 <= i < len(letters):
        raise FtransValueError(f"einsum: sublist labels must be ints in [0, 52), got {i!r}")
    return letters[i]


def einsum(subscripts: Any, /, *operands: Any, out: None = None, optimize: Any = "auto",
           precision: Any = None, preferred_element_type: Any = None, _dot_general: Any = None,
           out_sharding: Any = None) -> Any:
    """Einstein summation over the operands' axes.

    The subscripts are a string (with `...` for broadcast axes and an implicit output when `->` is absent) or
    interleaved sublists. The contraction order comes from opt_einsum when `optimize` asks for it.
    `out_sharding` lays the result out (its sharding type over Explicit mesh axes).

    Args:
        subscripts: The subscripts string, e.g. `"ij,jk->ik"` (or the first operand in the sublist form).
        *operands: The arrays.
        out: Unused; must be `None` (ftrans arrays are immutable, so there is nothing to write into).
        optimize: Contraction-order strategy (`"auto"`, `"greedy"`, `"optimal"`, True/False, or a path).
        precision: Optional `lax.Precision` (or pair) for the underlying dot or convolution.
        preferred_element_type: Optional dtype to accumulate in and return.
        out_sharding: Optional sharding to lay the result out with (as JAX's `out_sharding`).
    Returns:
        The contracted array, in the promoted dtype.

    Examples:
        >>> a = jnp.array([[1, 2], [3, 4]])
        >>> jnp.einsum("ij,jk->ik", a, a)
        Array([[ 7, 10],
               [15, 22]], dtype=int32)
        >>> jnp.einsum("ii", a)
        Array(5, dtype=int32)
        >>> jnp.einsum("ij->j", a)
        Array([4, 6], dtype=int32)
        >>> jnp.einsum("bi,bi->b", a, a)
        Array([ 5, 25], dtype=int32)

    See also:
        `einsum_path`, `tensordot`, `matmul`.
    """
    if out_sharding is not None:
        from ftrans.lax._sharding import with_out_sharding

        return with_out_sharding("einsum", out_sharding, lambda: einsum(
            subscripts, *operands, out=out, optimize=optimize, precision=precision,
            preferred_element_type=preferred_element_type, _dot_general=_dot_general), operands)
    if out is not None:
        raise NotImplementedError("einsum: the out argument is not supported")
    if _dot_general is not None and not callable(_dot_general):
        raise FtransTypeError(f"einsum: _dot_general must be a callable like lax.dot_general, got {_dot_general!r}")
    user_dot = None if _dot_general is None else (_dot_general, precision)
    prec = _precision("einsum", precision)
    if not isinstance(subscripts, str):
        subscripts, ops = _interleaved_to_subscripts((subscripts, *operands))
    else:
        ops = list(operands)
    if not ops:
        raise FtransValueError("einsum: needs at least one operand")
    check_arraylike("einsum", *ops)
    # As JAX: the operands stay in their own dtypes; the products accumulate in the joined dtype (each
    # dot_general names it as its preferred type), a sum first converts an operand the join widens, and
    # the result takes the join's weak type back; an explicit preferred type gives a strong result.
    ops = [as_operand(o) for o in ops]
    joined, joined_weak = dtypes.promote(tuple(dtype_weak(o) for o in ops))
    if preferred_element_type is None:
        pet, out_weak = joined, joined_weak
    else:
        pet, out_weak = dtypes.requested(preferred_element_type, "einsum"), False
    shapes = [tuple(shape_of(o)) for o in ops]
    ins, output = _parse(subscripts, shapes)
    sizes = _label_sizes(ins, shapes)
    work = []
    for x, labels in zip(ops, ins):
        x, labels = _diag_repeated(x, list(labels))
        x, labels = _drop_broadcast_axes(x, labels, sizes)
        work.append(_Operand(x, labels))
    for i, op in enumerate(work):
        others = {c for j, o in enumerate(work) if j != i for c in o.labels}
        work[i] = _sum_unneeded(op, set(output) | others, pet)
    for step in _path(optimize, [o.labels for o in work], output, sizes):
        if len(step) > 2:  # as JAX: each step of a contraction path is one dot_general of two operands
            raise FtransNotImplementedError(
                f"einsum does not support simultaneous contraction of 3 or more operands (the path step "
                f"{step} of optimize={optimize!r}); give a path of pairwise steps")
        picked = [work[i] for i in step]
        for i in sorted(step, reverse=True):
            del work[i]
        rest = {c for o in work for c in o.labels}
        acc = picked[0]
        for k, nxt in enumerate(picked[1:]):
            later = {c for o in picked[k + 2:] for c in o.labels}
            acc = _contract_pair(acc, nxt, set(output) | rest | later, pet, prec, joined_weak, user_dot)
        if len(picked) == 1:
            acc = _sum_unneeded(acc, set(output) | rest, pet)
        work.append(acc)
    while len(work) > 1:
        b = work.pop()
        a = work.pop()
        rest = {c for o in work for c in o.labels}
        work.append(_contract_pair(a, b, set(output) | rest, pet, prec, joined_weak, user_dot))
    res = _sum_unneeded(work[0], set(output), pet)
    return _finish(res, output, pet, out_weak)


def _label_sizes(ins: list[list[str]], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for i, (labels, shape) in enumerate(zip(ins, shapes)):
        for c, d in zip(labels, shape):
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = d
            elif d != prev and d != 1:
                what = "an ellipsis axis" if ord(c) >= 0xE000 else f"label {c!r}"
                raise FtransValueError(
                    f"einsum: size of {what} in operand {i} ({d}) does not match previous terms ({prev}); "
                    f"operand shapes {shapes}"
                )
    return sizes


def _drop_broadcast_axes(x: Any, labels: list[str], sizes: dict[str, int]) -> tuple[Any, list[str]]:
    """Size-1 axes that broadcast against a longer axis elsewhere are removed (the value is constant)."""
    shape = tuple(shape_of(x))
    keep = [i for i, (c, d) in enumerate(zip(labels, shape)) if not (d == 1 and sizes[c] != 1)]
    if len(keep) == len(labels):
        return x, labels
    return _reshape(x, tuple(shape[i] for i in keep)), [labels[i] for i in keep]


def _finish(res: _Operand, output: list[str], pet: Any, weak: bool = False) -> Any:
    x, labels = res.x, res.labels
    perm = tuple(labels.index(c) for c in output)
    if perm != tuple(range(len(perm))):
        x = S.transpose_p.bind(x, permutation=perm)
    if pet is not None:
        d = dtypes.to_dtype(pet)
        if dtype_weak(x) != (d, weak):
            x = S.convert_element_type_p.bind(x, new_dtype=d, weak_type=weak)
    return x
