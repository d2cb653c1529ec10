"""``lax.reduce_window`` and its sum/max/min forms (pooling)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import pytrees as tree_util
from ftrans.core.operands import as_operand, check_arraylike, convert, dtype_weak
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import windowed as W
from ftrans.core.shape_poly import is_symbolic_dim, max_dim
from ftrans.core.trace import Tracer
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax import _ops
from ftrans.lax._computation import flat_operands, matching_init, staged_computation

__all__ = ["reduce_window", "padtype_to_pads", "reduce_window_sum", "reduce_window_max",
           "reduce_window_min"]


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str) -> list[tuple[int, int]]:
    """'VALID' or 'SAME' (or 'SAME_LOWER') as explicit (low, high) pairs, as XLA computes them."""
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind in ("SAME", "SAME_LOWER"):
        out = []
        for n, w, s in zip(in_shape, window_shape, window_strides):
            if is_symbolic_dim(n) or is_symbolic_dim(w):  # shape polymorphism: the same arithmetic, symbolically
                out_size = -(-n // int(s))
                total = max_dim((out_size - 1) * int(s) + w - n, 0)
                lo, hi = total // 2, total - total // 2
                out.append((hi, lo) if kind == "SAME_LOWER" else (lo, hi))
                continue
            out_size = -(-int(n) // int(s))
            total = max(0, (out_size - 1) * int(s) + int(w) - int(n))
            lo, hi = int(total // 2), int(total - total // 2)
            out.append((hi, lo) if kind == "SAME_LOWER" else (lo, hi))
        return out
    raise FtransValueError(f"unknown padding {padding!r}; use 'VALID', 'SAME', 'SAME_LOWER' or (low, high) pairs")


def _dim(d: Any) -> Any:
    return d if is_symbolic_dim(d) else int(d)


def _params(x: Any, window_dimensions, window_strides, padding, base_dilation, window_dilation) -> dict:
    nd = len(x.shape)
    wd = tuple(_dim(d) for d in window_dimensions)  # (symbolic sizes allowed: shape polymorphism)
    ws = tuple(_dim(d) for d in window_strides) if window_strides is not None else (1,) * nd
    if isinstance(padding, str):
        pads = padtype_to_pads(x.shape, wd, ws, padding)
    else:
        pads = padding
    pads = tuple((_dim(lo), _dim(hi)) for lo, hi in pads)
    bd = tuple(base_dilation) if base_dilation is not None else (1,) * nd
    wdl = tuple(window_dilation) if window_dilation is not None else (1,) * nd
    return dict(window_dimensions=wd, window_strides=ws, padding=pads, base_dilation=bd, window_dilation=wdl)


def _windowed(prim):
    def fn(operand: Any, window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
           padding: Any = "VALID", base_dilation: Sequence[int] | None = None,
           window_dilation: Sequence[int] | None = None) -> Any:
        check_arraylike(prim.name, operand)
        x = as_operand(operand)
        return prim.bind(x, **_params(x, window_dimensions, window_strides, padding, base_dilation,
                                      window_dilation))

    fn.__name__ = prim.name
    return fn


reduce_window_sum = _windowed(W.reduce_window_sum_p)
reduce_window_max = _windowed(W.reduce_window_max_p)
reduce_window_min = _windowed(W.reduce_window_min_p)


_MONOIDS = {E.add_p: "sum", E.max_p: "max", E.min_p: "min"}
# On booleans ``or``/``and`` are max/min (``jnp.add`` of two bools stages ``or``).
_BOOL_MONOIDS = {E.or_p: "max", E.and_p: "min"}


def _monoid_kind(computation: Callable, dtype: np.dtype) -> str | None:
    """"sum", "max" or "min" when ``computation`` is that monoid on scalars of ``dtype``, else None.

    Recognised by tracing it on two scalars (JAX does the same), so ``lax.add``,
    ``jnp.add`` and ``lambda a, b: a + b`` are all a sum, and ``lax`` need not know
    the functions of the API layers above it.
    """
    if computation is _ops.add:
        return "sum"
    if computation is _ops.max or computation is _ops.min:
        return computation.__name__
    try:
        seen = _monoid_cache.setdefault(computation, {})
    except TypeError:  # not weakly referenceable: trace it every time
        seen = {}
    if dtype not in seen:
        seen[dtype] = _traced_monoid_kind(computation, dtype)
    return seen[dtype]


_monoid_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _traced_monoid_kind(computation: Callable, dtype: np.dtype) -> str | None:
    from ftrans.core.jaxpr_api import make_jaxpr

    probe = np.zeros((), dtype)
    leaf: list = []

    def call(a: Any, b: Any) -> Any:
        out = computation(a, b)
        leaf.append(tree_util.treedef_is_leaf(tree_util.tree_structure(out)))
        return out

    jaxpr = make_jaxpr(call)(probe, probe).jaxpr
    if not leaf[0] or len(jaxpr.eqns) != 1 or len(jaxpr.outvars) != 1:
        return None
    (eqn,) = jaxpr.eqns
    if set(map(id, eqn.invars)) != set(map(id, jaxpr.invars)) or eqn.outvars[0] is not jaxpr.outvars[0]:
        return None
    kinds = _BOOL_MONOIDS if dtype == np.bool_ else {}
    return _MONOIDS.get(eqn.primitive) or kinds.get(eqn.primitive)


def reduce_window(operand: Any, init_value: Any, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: Any = "VALID",
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """``lax.reduce_window``: reduce each window of ``operand`` (an array or a pytree of same-shaped arrays)
    with ``computation(accumulators, elements)`` from ``init_value`` (one scalar per operand).

    As in JAX, one operand whose computation is add, max or min binds the matching windowed reduction (a
    sum only with a static init value of 0; max and min combine any init value afterwards, which is exact
    as both are idempotent); anything else binds the general ``reduce_window`` primitive with the traced
    computation (``stablehlo.reduce_window``), where padding and base-dilation holes hold the init value.
    """
    ops, flat_inits, tree, init_tree = flat_operands("reduce_window", operand, init_value)
    params = _params(ops[0], window_dimensions, window_strides, padding, base_dilation, window_dilation)
    if tree_util.treedef_is_leaf(tree):
        x = ops[0]
        d, _ = dtype_weak(x)
        kind = _monoid_kind(computation, d)
        init = convert(flat_inits[0], d)
        if len(getattr(init, "shape", ())) != 0:
            raise FtransTypeError(f"reduce_window: init_value must be a scalar, got shape {tuple(init.shape)}")
        if kind == "sum" and not isinstance(init, Tracer) and np.asarray(init) == 0:
            return W.reduce_window_sum_p.bind(x, **params)
        if kind in ("max", "min"):
            prim = W.reduce_window_max_p if kind == "max" else W.reduce_window_min_p
            combine = E.max_p if kind == "max" else E.min_p
            return combine.bind(prim.bind(x, **params), init)
    inits = []
    for o, i in zip(ops, flat_inits):
        iv = matching_init("reduce_window", o, i)
        if len(getattr(iv, "shape", ())) != 0:
            raise FtransTypeError(f"reduce_window: init values must be scalars, got shape {tuple(iv.shape)}")
        inits.append(iv)
    closed, scalar, out_tree = staged_computation("reduce_window", computation, ops, tree)
    if out_tree != tree:
        raise FtransValueError(
            f"reduce_window output must have the same tree structure as the operands {tree} as init_values "
            f"{init_tree}, but the computation returned {out_tree}"
        )
    if closed.out_avals and any(a.dtype != s.dtype for a, s in zip(closed.out_avals, scalar)):
        raise FtransTypeError(
            "reduce_window: the computation must return scalars of the operands' dtypes, got "
            + ", ".join(a.str_short() for a in closed.out_avals)
        )
    for o in ops[1:]:
        if tuple(o.shape) != tuple(ops[0].shape):
            raise FtransTypeError(
                f"reduce_window: operands must all have the same shape, got {[tuple(o.shape) for o in ops]}"
            )
    outs = W.reduce_window_p.bind(*ops, *inits, jaxpr=closed, **params)
    return tree_util.tree_unflatten(tree, list(outs))
