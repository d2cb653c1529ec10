"""Lowering of key-typed values: a key array is its ``uint32`` data at the StableHLO boundary.

A value of a key dtype (``key<fry>[3]``) has the StableHLO type of its data (``tensor<3x2xui32>``:
``mlir_text.aval_type``), so call-like and control-flow primitives, whose rules only pass values along,
carry keys unchanged.  The PRNG primitives lower to their implementation's function traced on the
physical types (``core.prims.random.physical``, registered by ``ftrans.random``) and inlined; the
structural primitives that move keys around (``key_lowering_rules``) lower to the same primitive on the
data, with the trailing key-data axes left whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.keys import KeyDtype, PRNGKeyArray, is_key
from ftrans.core.primitive import Primitive
from ftrans.core.prims import elementwise as E
from ftrans.core.prims import indexing as I
from ftrans.core.prims import random as R
from ftrans.core.prims import structural as S
from ftrans.core.trace import stage
from ftrans.lowering.lower import LoweringContext, key_lowering_rules, register_lowering


def lower_physical(ctx: LoweringContext, fn: Callable[..., Any], args: tuple, label: str) -> list[str]:
    """Lower ``fn`` (ftrans code over the physical values of the equation's operands, returning its
    physical results) inline: traced on the physical types, its equations emitted into ``ctx``'s function."""
    in_avals = [R.physical_aval(a) for a in ctx.avals_in]

    def flat(*xs: Any) -> list:
        out = fn(*xs)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    closed, _ = stage(flat, in_avals)
    consts = [ctx.constant(np.asarray(c)) for c in closed.consts]
    return ctx.module.inline(ctx.fn, closed.jaxpr, [*consts, *args], label)


def _impl(ctx: LoweringContext, params: dict) -> Any:
    if "impl" in params:
        return params["impl"]
    return ctx.avals_in[0].dtype._impl


def _install(prim: Primitive) -> None:
    def rule(ctx: LoweringContext, *args: str, **params: Any) -> list[str]:
        impl = _impl(ctx, params)
        fn = R.physical[prim]  # (registered by ftrans.random, which ftrans imports)
        kw = {k: v for k, v in params.items() if k != "impl"}
        return lower_physical(ctx, lambda *xs: fn(impl, *xs, **kw), args, prim.name)

    rule.__name__ = f"lower_{prim.name}"
    register_lowering(prim)(rule)


for _p in (R.random_seed_p, R.random_bits_p, R.random_split_p, R.random_fold_in_p, R.random_gamma_p):
    _install(_p)


@register_lowering(R.random_wrap_p)
def _wrap(ctx: LoweringContext, x: str, *, impl: Any) -> str:
    return x  # the same data, typed as keys


@register_lowering(R.random_unwrap_p)
@register_lowering(R.random_clone_p)
@register_lowering(R.consume_p)
def _unwrap(ctx: LoweringContext, x: str) -> str:
    return x  # the same data


# ---------------------------------------------------------------- structural primitives over keys
def _tail(aval: Any) -> tuple[int, ...]:
    d = aval.dtype
    return tuple(d._impl.key_shape) if type(d) is KeyDtype else ()


def _key_rule(prim: Primitive, adjust: Callable[..., tuple]) -> None:
    """``prim`` on key operands: the same primitive on their data, ``adjust(ctx, tail, xs, params)``
    giving the physical operands and params."""
    def rule(ctx: LoweringContext, *args: str, **params: Any) -> list[str]:
        tail = next(_tail(a) for a in (*ctx.avals_in, *ctx.avals_out) if type(a.dtype) is KeyDtype)

        def fn(*xs: Any) -> Any:
            ops, ps = adjust(ctx, tail, list(xs), dict(params))
            return prim.bind(*ops, **ps)

        return lower_physical(ctx, fn, args, prim.name)

    rule.__name__ = f"lower_{prim.name}_keys"
    key_lowering_rules[prim] = rule


def _trailing(n: int, k: int) -> tuple[int, ...]:
    return tuple(range(n, n + k))


def _bcast(ctx, tail, xs, p):
    n = len(p["shape"])
    p["shape"] = (*p["shape"], *tail)
    p["broadcast_dimensions"] = (*p["broadcast_dimensions"], *_trailing(n, len(tail)))
    return xs, p


def _reshape(ctx, tail, xs, p):
    p["new_sizes"] = (*p["new_sizes"], *tail)
    if p.get("dimensions") is not None:
        n = len(p["dimensions"])
        p["dimensions"] = (*p["dimensions"], *_trailing(n, len(tail)))
    return xs, p


def _transpose(ctx, tail, xs, p):
    n = len(p["permutation"])
    p["permutation"] = (*p["permutation"], *_trailing(n, len(tail)))
    return xs, p


def _same(ctx, tail, xs, p):
    return xs, p


def _slice(ctx, tail, xs, p):
    k = len(tail)
    p["start_indices"] = (*p["start_indices"], *(0,) * k)
    p["limit_indices"] = (*p["limit_indices"], *tail)
    if p.get("strides") is not None:
        p["strides"] = (*p["strides"], *(1,) * k)
    return xs, p


def _zero_index(ctx, first: int) -> Any:
    d = ctx.avals_in[first].dtype if len(ctx.avals_in) > first else np.dtype(np.int32)
    return np.zeros((), d)


def _dynamic_slice(ctx, tail, xs, p):
    z = _zero_index(ctx, 1)
    p["slice_sizes"] = (*p["slice_sizes"], *tail)
    return [*xs, *[z] * len(tail)], p


def _dynamic_update_slice(ctx, tail, xs, p):
    z = _zero_index(ctx, 2)
    return [*xs, *[z] * len(tail)], p


def _select_n(ctx, tail, xs, p):
    which, *cases = xs
    wa = ctx.avals_in[0]
    if wa.shape != ():
        out_shape = (*ctx.avals_out[0].shape, *tail)
        which = S.broadcast_in_dim_p.bind(which, shape=out_shape, broadcast_dimensions=tuple(range(len(wa.shape))))
    return [which, *cases], p


def _convert(ctx, tail, xs, p):
    return xs, p


def _gather(ctx, tail, xs, p):
    dn = p["dimension_numbers"]
    out_rank = len(ctx.avals_out[0].shape)
    p["dimension_numbers"] = dn._replace(offset_dims=(*dn.offset_dims, *_trailing(out_rank, len(tail))))
    p["slice_sizes"] = (*p["slice_sizes"], *tail)
    return xs, p


def _scatter(ctx, tail, xs, p):
    dn = p["dimension_numbers"]
    upd_rank = len(ctx.avals_in[2].shape)
    p["dimension_numbers"] = dn._replace(
        update_window_dims=(*dn.update_window_dims, *_trailing(upd_rank, len(tail))))
    return xs, p


_key_rule(I.gather_p, _gather)
_key_rule(I.scatter_p, _scatter)
_key_rule(S.broadcast_in_dim_p, _bcast)
_key_rule(S.reshape_p, _reshape)
_key_rule(S.transpose_p, _transpose)
_key_rule(S.squeeze_p, _same)
_key_rule(S.expand_dims_p, _same)
_key_rule(S.rev_p, _same)
_key_rule(S.concatenate_p, _same)
_key_rule(S.slice_p, _slice)
_key_rule(S.dynamic_slice_p, _dynamic_slice)
_key_rule(S.dynamic_update_slice_p, _dynamic_update_slice)
_key_rule(S.select_n_p, _select_n)
_key_rule(E.copy_p, _same)


def _convert_element_type(ctx: LoweringContext, x: str, **params: Any) -> str:
    return x  # a key array to its own key dtype: the same data


key_lowering_rules[S.convert_element_type_p] = _convert_element_type


# ---------------------------------------------------------------- eager primitives over concrete key arrays
_compiled: dict = {}


def _run_with_keys(prim: Primitive, args: tuple, params: dict) -> Any:
    """``prim`` on concrete operands, key arrays among them: staged alone on the key types, compiled (once
    per signature) and run on the keys' data; key results come back as key arrays."""
    from ftrans.core.trace import aval_of
    from ftrans.devices import default_device
    from ftrans.lowering import executable as X

    avals = [ShapedArray(a.shape, a.dtype) if is_key(a) else aval_of(a) for a in args]
    try:
        sig = (prim, tuple(avals), tuple(sorted(params.items())))
        hash(sig)
    except TypeError:
        sig = None
    exe = _compiled.get(sig) if sig is not None else None
    if exe is None:
        def one(*xs: Any) -> list:
            out = prim.bind(*xs, **params)
            return list(out) if prim.multiple_results else [out]

        closed, _ = stage(one, avals)
        exe = X.Executable(closed, default_device(), prim.name), closed.out_avals
        if sig is not None:
            if len(_compiled) > 256:
                _compiled.clear()
            _compiled[sig] = exe
    exe, out_avals = exe
    bufs = [X.to_buffer(np.asarray(a._base_array) if is_key(a) else a, exe.device) for a in args]
    outs = [PRNGKeyArray(a.dtype._impl, o) if type(a.dtype) is KeyDtype else o
            for o, a in zip(exe.run(bufs), out_avals)]
    return outs if prim.multiple_results else outs[0]


R.run_with_keys = _run_with_keys
