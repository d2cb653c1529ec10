"""lax sort, cumulative reductions, reductions over axes, arg-reductions and dot_general.

These are thin wrappers that bind one primitive each (``top_k`` binds a few).
Like JAX's ``lax`` they do not promote or broadcast; they do check their operands
with the primitive's own abstract-eval rule even eagerly, so a bad call fails
with the same message whether or not it is being traced.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import dtypes
from ftrans.core import pytrees as tree_util
from ftrans.core.ir import ClosedJaxpr
from ftrans.core.operands import as_operand, aval_of, check_arraylike, dtype_weak, shape_of
from ftrans.core.primitive import Primitive, abstract_eval_rules
from ftrans.core.prims import reductions as R
from ftrans.core.prims import sorting as So
from ftrans.core.prims import structural as S
from ftrans.core.shape_poly import is_symbolic_dim
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax._computation import flat_operands, matching_init, staged_computation

__all__ = [
    "sort", "sort_key_val", "top_k", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "reduce",
    "reduce_p",
]

reduce_p = R.reduce_p


def _bind(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Check with the abstract-eval rule (eager binds skip it), then bind."""
    ops = [as_operand(a) for a in args]
    abstract_eval_rules[prim](*[aval_of(o) for o in ops], **params)
    return prim.bind(*ops, **params)


def _dimension(name: str, dimension: Any, ndim: int) -> int:
    d = int(dimension)
    if not -ndim <= d < ndim:
        raise FtransValueError(f"{name}: dimension {dimension} is out of bounds for operands of rank {ndim}")
    return d % ndim


# ---------------------------------------------------------------- sorting
def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """``lax.sort``: one array, or a sequence sorted together by its first ``num_keys`` arrays."""
    seq = isinstance(operand, Sequence)
    ops = list(operand) if seq else [operand]
    check_arraylike("sort", *ops)
    if not 1 <= num_keys <= len(ops):
        raise FtransValueError(f"sort: num_keys={num_keys} must be between 1 and len(operand)={len(ops)}")
    nd = len(shape_of(ops[0]))
    dim = _dimension("sort", dimension, nd) if nd else 0
    outs = _bind(So.sort_p, *ops, dimension=dim, is_stable=bool(is_stable), num_keys=int(num_keys))
    return tuple(outs) if seq else outs[0]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """``lax.sort_key_val``: sort ``values`` by ``keys`` along ``dimension``."""
    k, v = sort([keys, values], dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


def top_k(operand: Any, k: int, *, axis: int = -1, is_stable: bool = True) -> list[Any]:
    """``lax.top_k``: the ``k`` largest entries along ``axis`` (default the last), largest first, and
    their int32 indices, as a list ``[values, indices]`` (one ``top_k`` equation).

    Floats follow XLA's total order (NaN above ``inf``, ``-0.0`` below ``+0.0``, a negative NaN lowest);
    equal entries keep the lower index first, as XLA's TopK does. Complex operands have no order and are
    refused, as in JAX. ``is_stable`` (jax 0.11's keyword) is accepted: ``is_stable=False`` leaves the order
    of equal entries unspecified in JAX, and ftrans's stable order is one such order.
    """
    del is_stable
    check_arraylike("top_k", operand)
    x = as_operand(operand)
    shape = tuple(shape_of(x))
    if not shape:
        raise FtransValueError("top_k: the operand must have at least one dimension")
    if dtype_weak(x)[0].kind == "c":
        raise FtransValueError(f"top_k is not compatible with complex inputs (got {dtype_weak(x)[0]}): complex "
                               "numbers have no order; rank by a real key such as abs(x) or x.real")
    ax = operator.index(axis)
    if not -len(shape) <= ax < len(shape):
        raise FtransValueError(f"top_k: axis {axis} is out of bounds for an array of dimension {len(shape)}")
    ax %= len(shape)
    k = k if is_symbolic_dim(k) else operator.index(k)
    n = shape[ax]
    if not is_symbolic_dim(k) and k < 0:
        raise FtransValueError(f"k argument to top_k must be nonnegative, got {k}")
    if not k <= n:
        raise FtransValueError(
            f"top_k: k argument must be no larger than size along the axis; got k={k} with "
            f"shape={list(shape)} and axis={ax}"
        )
    if not is_symbolic_dim(n) and n > np.iinfo(np.int32).max:  # (a symbolic size is taken to fit)
        raise FtransValueError(
            f"top_k returns int32 indices, which will overflow for an axis of size {n} "
            f"(shape {list(shape)}, axis {ax}); split the axis into pieces of at most 2**31 - 1 elements"
        )
    return list(So.top_k_p.bind(x, k=k, axis=ax))


# ---------------------------------------------------------------- cumulative reductions
def _cumulative(prim: Primitive):
    def fn(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        check_arraylike(prim.name, operand)
        return _bind(prim, operand, axis=int(axis), reverse=bool(reverse))

    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = (f"``lax.{prim.name}``: the running {prim.name[3:]} along ``axis`` "
                  "(a non-negative axis, as XLA requires); ``reverse`` runs from the end.")
    return fn


cumsum = _cumulative(So.cumsum_p)
cumprod = _cumulative(So.cumprod_p)
cummax = _cumulative(So.cummax_p)
cummin = _cumulative(So.cummin_p)
cumlogsumexp = _cumulative(So.cumlogsumexp_p)


# ---------------------------------------------------------------- reduce with a user computation
_MONOID_PRIMS: dict[str, str] = {"add": "sum", "mul": "prod", "max": "max", "min": "min", "and": "and",
                                 "or": "or", "xor": "xor"}
_MONOID_REDUCERS = {"sum": R.reduce_sum_p, "prod": R.reduce_prod_p, "max": R.reduce_max_p,
                    "min": R.reduce_min_p, "and": R.reduce_and_p, "or": R.reduce_or_p, "xor": R.reduce_xor_p}


def _is_identity(kind: str, value: np.ndarray) -> bool:
    d = value.dtype
    if kind in ("sum", "or", "xor"):
        return bool(value == 0)
    if kind == "prod":
        return bool(value == 1)
    if kind == "and":
        return bool(value) if d == np.bool_ else bool(value == -1 if d.kind == "i" else value == np.iinfo(d).max)
    if d == np.bool_:
        return bool(value) == (kind == "min")
    if dtypes.is_float(d):
        return bool(value == (-np.inf if kind == "max" else np.inf))
    if d.kind in "iu":
        info = np.iinfo(d)
        return bool(value == (info.min if kind == "max" else info.max))
    return False


def _monoid(body: ClosedJaxpr, init: Any, dtype: np.dtype) -> str | None:
    """The reduction kind when ``body`` is one monoid op of its two arguments and ``init`` (concrete) is its
    identity, as JAX recognises ``lax.add`` with init 0 and so on; None otherwise."""
    j = body.jaxpr
    if len(j.eqns) != 1 or len(j.outvars) != 1 or j.constvars:
        return None
    (eqn,) = j.eqns
    kind = _MONOID_PRIMS.get(eqn.primitive.name)
    if kind is None or eqn.outvars[0] is not j.outvars[0]:
        return None
    if sorted(map(id, eqn.invars)) != sorted(map(id, j.invars)) or len(set(map(id, eqn.invars))) != 2:
        return None
    if kind in ("and", "or", "xor") and not (dtype == np.bool_ or np.dtype(dtype).kind in "iu"):
        return None
    if dtype == np.bool_ and kind in ("sum", "prod"):
        return None
    value = init.to_concrete_value() if isinstance(init, Tracer) else np.asarray(init)
    if value is None:
        return None
    return kind if _is_identity(kind, np.asarray(value)) else None


def reduce(operands: Any, init_values: Any, computation: Callable, dimensions: Sequence[int]) -> Any:  # noqa: A001
    """``lax.reduce``: reduce ``operands`` (a pytree of same-shaped arrays) over ``dimensions`` with
    ``computation(accumulators, elements) -> accumulators`` from ``init_values`` (one scalar per operand).

    A single operand whose computation is ``add``, ``mul``, ``max``, ``min`` (or a bitwise ``and``/``or``/
    ``xor``) with that monoid's identity as init binds the matching reduction primitive, as in JAX; anything
    else binds the general ``reduce`` primitive with the traced computation (``stablehlo.reduce``). The
    computation should be associative and commutative: XLA may combine elements in any order.
    """
    ops, flat_inits, tree, _ = flat_operands("reduce", operands, init_values)
    shape = tuple(shape_of(ops[0]))
    dims = tuple(sorted(_dimension("reduce", d, len(shape)) for d in dimensions)) if shape else ()
    if len(set(dims)) != len(dims):
        raise FtransValueError(f"reduce: dimensions {tuple(dimensions)} contain duplicates")
    inits = []
    for o, i in zip(ops, flat_inits):
        inits.append(matching_init("reduce", o, i))
        if tuple(shape_of(inits[-1])) != ():
            raise FtransValueError(f"reduce found non-scalar initial value: shape {tuple(shape_of(inits[-1]))}; "
                                   "init values must be scalars")
    closed, scalar, out_tree = staged_computation("reduce", computation, ops, tree)
    if out_tree != tree:
        raise FtransTypeError(
            f"reduce: the computation must return the structure of the operands, {tree}, but returned {out_tree}"
        )
    if len(ops) == 1:
        kind = _monoid(closed, inits[0], scalar[0].dtype)
        if kind is not None:
            out = _bind(_MONOID_REDUCERS[kind], ops[0], axes=dims)
            weak = dtype_weak(ops[0])[1] and dtype_weak(flat_inits[0])[1]
            if dtype_weak(out)[1] != weak:
                out = S.convert_element_type_p.bind(out, new_dtype=scalar[0].dtype, weak_type=weak)
            return tree_util.tree_unflatten(tree, [out])
    outs = _bind(R.reduce_p, *ops, *inits, jaxpr=closed, dimensions=dims)
    return tree_util.tree_unflatten(tree, list(outs))
