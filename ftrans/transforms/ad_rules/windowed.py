"""JVP rules of the windowed reductions (pooling).

``reduce_window_sum`` is linear.  For ``reduce_window_max``/``_min`` JAX
passes, for each window, the tangent of the element the window selects (its
``select_and_gather_add``; on ties the first element of the window in
row-major order wins, which is what XLA's CPU reduction does).  ftrans has no
such primitive, so the rule spells it out with primitives it has: the
positions each window covers are a static function of the shapes and window
parameters, computed once with NumPy; the operand and its tangent are
gathered at those positions (padding reads the reduction's identity, whose
tangent is 0), ``argmax``/``argmin`` over each window picks the first extreme
element, and its tangent is taken.  This costs one gather of ``window size``
elements per output element, which is what pooling reads anyway.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftrans.core import building as B
from ftrans.core import dtypes
from ftrans.core import sharding_rules as _sr
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.prims import reductions as R
from ftrans.core.prims import structural as S
from ftrans.core.prims import windowed as W
from ftrans.core.trace import aval_of, stage
from ftrans.errors import FtransTypeError
from ftrans.transforms.ad import Zero, defjvp_linear, instantiate, jvp_jaxpr, register_jvp, tangent_aval
from ftrans.transforms.partial_eval import partial_eval_jaxpr_rules, partial_eval_rules

defjvp_linear(W.reduce_window_sum_p)


def window_positions(shape: tuple[int, ...], *, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation) -> np.ndarray:
    """Flat operand index of every element of every window: shape ``(*out_shape, window_size)``.

    Positions that fall on padding or between base-dilated elements hold
    ``prod(shape)``, one past the last element.  The construction mirrors the
    NumPy impl of the windowed primitives step by step.
    """
    n = int(np.prod(shape))
    out_shape = W.window_output_shape("reduce_window", shape, window_dimensions, window_strides, padding,
                                      base_dilation, window_dilation)
    size = int(np.prod(window_dimensions))
    if 0 in out_shape:
        return np.zeros((*out_shape, size), np.int64)
    pos = np.arange(n, dtype=np.int64).reshape(shape)
    dil_shape = tuple(0 if d == 0 else (d - 1) * b + 1 for d, b in zip(shape, base_dilation))
    spread = np.full(dil_shape, n, np.int64)
    spread[tuple(slice(None, None, b) for b in base_dilation)] = pos
    pads = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    padded = np.pad(spread, pads, constant_values=n)
    crop = tuple(slice(-lo if lo < 0 else 0, padded.shape[i] + hi if hi < 0 else None)
                 for i, (lo, hi) in enumerate(padding))
    padded = padded[crop]
    eff = tuple((w - 1) * wd + 1 for w, wd in zip(window_dimensions, window_dilation))
    views = np.lib.stride_tricks.sliding_window_view(padded, eff)
    views = views[tuple(slice(None, None, s) for s in window_strides)]
    views = views[(Ellipsis, *[slice(None, None, wd) for wd in window_dilation])]
    views = views[tuple(slice(0, d) for d in out_shape)]
    return np.ascontiguousarray(views).reshape(*out_shape, size)


def _take_flat(x_ext: Any, positions: Array) -> Any:
    """``x_ext[positions]`` for a rank-1 ``x_ext`` (one gather; positions are in bounds)."""
    dn = I.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    return I.gather_p.bind(x_ext, positions, dimension_numbers=dn, slice_sizes=(1,),
                           mode=I.GatherScatterMode.PROMISE_IN_BOUNDS, fill_value=None,
                           indices_are_sorted=False, unique_indices=False)


def _extend(x: Any, tail: Any) -> Any:
    """``x`` flattened, with one element ``tail`` appended (what padding positions read)."""
    n = int(np.prod(aval_of(x).shape))
    flat = S.reshape_p.bind(x, new_sizes=(n,), dimensions=None)
    return S.pad_p.bind(flat, tail, padding_config=((0, 1, 0),))


def _chooser_rule(prim, arg_prim, identity: float) -> None:
    @register_jvp(prim)
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if type(t) is Zero or not dtypes.is_inexact(aval_of(out).dtype):
            return out, Zero.from_primal_value(out)
        aval = aval_of(x)
        pos = window_positions(tuple(aval.shape), **params)
        if pos.shape[-1] == 0 or 0 in pos.shape:
            return out, S.broadcast_in_dim_p.bind(Array._new(np.zeros((), aval.dtype), False),
                                                  shape=tuple(aval_of(out).shape), broadcast_dimensions=())
        idx_dtype = np.int32 if pos.size and pos.max() < 2**31 else np.int64
        positions = Array._new(pos[..., None].astype(idx_dtype), False)
        # (over Explicit mesh axes the flattened, padded operand has no layout type: the partitioner lays it out)
        with _sr.lenient():
            vals = _take_flat(_extend(x, Array._new(np.asarray(identity, aval.dtype), False)), positions)
            t_vals = _take_flat(_extend(t, Array._new(np.zeros((), aval.dtype), False)), positions)
            last = pos.ndim - 1
            which = arg_prim.bind(vals, axes=(last,), index_dtype=np.dtype(np.int32))
            one_hot = S.convert_element_type_p.bind(
                _eq_last(which, pos.shape), new_dtype=aval.dtype, weak_type=False)
            return out, R.reduce_sum_p.bind(E.mul_p.bind(t_vals, one_hot), axes=(last,))

    rule.__name__ = f"{prim.name}_jvp"


def _eq_last(which: Any, shape: tuple[int, ...]) -> Any:
    """One-hot over the last axis of ``shape``: ``iota == which`` (broadcast along that axis)."""
    last = len(shape) - 1
    iota = S.iota_p.bind(dtype=np.dtype(np.int32), shape=shape, dimension=last)
    full = S.broadcast_in_dim_p.bind(which, shape=shape, broadcast_dimensions=tuple(range(last)))
    return E.eq_p.bind(iota, full)


_chooser_rule(W.reduce_window_max_p, R.argmax_p, -np.inf)
_chooser_rule(W.reduce_window_min_p, R.argmin_p, np.inf)


# ---------------------------------------------------------------- reduce_window with a user computation
@register_jvp(W.reduce_window_p)
def _reduce_window_general_jvp(primals: list, tangents: list, *, jaxpr: Any, **window: Any) -> tuple[list, list]:
    """JAX's rule: one ``reduce_window`` over (operands, tangents) whose computation is the JVP of the
    user's (accumulators and elements each carry their tangent), from (init values, zeros)."""
    n = len(primals) // 2
    ops, inits = list(primals[:n]), list(primals[n:])
    if any(type(t) is not Zero for t in tangents[n:]):
        raise FtransTypeError(
            "reduce_window: differentiating with respect to the init values of a windowed reduction with a "
            "general computation is not supported (as in JAX); pass init values that do not depend on the "
            "differentiated inputs"
        )
    nz = [type(t) is not Zero for t in tangents[:n]]
    if not any(nz):
        outs = W.reduce_window_p.bind(*primals, jaxpr=jaxpr, **window)
        return outs, [Zero(tangent_aval(aval_of(o))) for o in outs]
    while True:  # the tangents that flow: those given, and any the computation makes from them
        _, out_nz = jvp_jaxpr(jaxpr, nz + nz, instantiate=nz)
        grown = [a or b for a, b in zip(nz, out_nz)]
        if grown == nz:
            break
        nz = grown
    jvp_closed, _ = jvp_jaxpr(jaxpr, nz + nz, instantiate=nz)
    k = sum(nz)
    scalars = [ShapedArray((), aval_of(o).dtype) for o in ops]
    tan_scalars = [tangent_aval(s) for s, z in zip(scalars, nz) if z]

    def paired(*args: Any) -> list:
        # (acc primals, acc tangents, elem primals, elem tangents) -> (primals, tangents)
        acc_p, acc_t = args[:n], args[n:n + k]
        el_p, el_t = args[n + k:2 * n + k], args[2 * n + k:]
        return eval_jaxpr(jvp_closed.jaxpr, list(jvp_closed.consts), *acc_p, *el_p, *acc_t, *el_t)

    closed, _ = stage(paired, scalars + tan_scalars + scalars + tan_scalars)
    ts = [instantiate(t) for t, z in zip(tangents[:n], nz) if z]
    t_inits = [B.zeros(a.shape, a.dtype) for a in tan_scalars]
    outs = W.reduce_window_p.bind(*ops, *ts, *inits, *t_inits, jaxpr=closed, **window)
    p_out, t_iter = list(outs[:n]), iter(outs[n:])
    t_out = [next(t_iter) if z else Zero(tangent_aval(aval_of(p))) for p, z in zip(p_out, nz)]
    return p_out, t_out


def _reduce_window_partial_eval(trace: Any, tracers: list, params: dict) -> list:
    """The JVP binds ``reduce_window`` on primals and tangents together, so one with an unknown operand is
    kept whole (its reverse mode is not supported, as in JAX)."""
    knowns = [trace.known_value(t) for t in tracers]
    if all(k for k, _ in knowns):
        return W.reduce_window_p.bind(*[v for _, v in knowns], **params)
    return trace.record(W.reduce_window_p, tracers, params)


partial_eval_rules[W.reduce_window_p] = _reduce_window_partial_eval
partial_eval_jaxpr_rules[W.reduce_window_p] = lambda eqn, unk_in: (None, eqn, [True] * len(eqn.outvars))
