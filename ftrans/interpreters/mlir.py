"""JAX's ``jax.interpreters.mlir``, for giving a user's primitive a lowering JAX's way.

``register_lowering(p, lower_fun(impl, multiple_results=False))`` lowers each ``p`` equation as the
program of ``impl(*operands, **params)`` traced on the equation's types (written with ``ftrans.numpy``,
``ftrans.lax`` or other primitives).  A rule written against JAX's MLIR Python bindings (``hlo.AddOp``,
``ctx.avals_in`` with ``ir.Value`` operands) cannot run here: ftrans writes StableHLO as text
(``ftrans.lowering.lower.register_lowering`` takes rules in that form, see docs/howto/write_a_primitive.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftrans.core.primitive import Primitive
from ftrans.lowering.lower import lowering_rules

__all__ = ["lower_fun", "register_lowering"]


class _LowerFun:
    """A lowering rule made from a function of the operands (``lower_fun``)."""

    __slots__ = ("fun", "multiple_results")

    def __init__(self, fun: Callable, multiple_results: bool):
        self.fun = fun
        self.multiple_results = multiple_results

    def __call__(self, ctx: Any, *args: str, **params: Any) -> Any:
        from ftrans.core.avals import ShapeDtypeStruct
        from ftrans.core.jaxpr_api import make_jaxpr
        from ftrans.core.pytrees import tree_leaves

        fun, multiple = self.fun, self.multiple_results
        specs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in ctx.avals_in]
        closed = make_jaxpr(lambda *xs: fun(*xs, **params))(*specs)
        consts = [ctx.constant(c) for c in closed.consts]
        outs = ctx.module.inline(ctx.fn, closed.jaxpr, consts + list(args), "")
        if multiple:
            return outs
        if len(outs) != 1 or len(tree_leaves(closed.out_avals)) != 1:
            raise ValueError(f"lower_fun(..., multiple_results=False): the function returned {len(outs)} values")
        return outs[0]


def lower_fun(fun: Callable, multiple_results: bool = True) -> Callable:
    """A lowering rule that lowers ``fun(*operands, **params)``: ``fun`` returns a list of results when
    ``multiple_results`` (JAX's default), else the one result."""
    return _LowerFun(fun, multiple_results)


def register_lowering(prim: Primitive, rule: Callable, platform: str | None = None, **kwargs: Any) -> Callable:
    """Lower ``prim``'s equations with ``rule``, a ``lower_fun(...)`` (on ``platform`` only, when given:
    ``cpu``, ``cuda``/``gpu``, ``rocm``, ``tpu``)."""
    if not isinstance(rule, _LowerFun):
        raise NotImplementedError(
            f"register_lowering({prim}, {getattr(rule, '__name__', rule)!r}): ftrans lowers to StableHLO text, "
            "not through JAX's MLIR Python bindings, so a lowering rule written against them cannot run. "
            "Write the primitive's computation with ftrans.numpy/ftrans.lax and register "
            "`mlir.lower_fun(impl, multiple_results=...)` instead (or write a text rule with "
            "ftrans.lowering.lower.register_lowering, see docs/howto/write_a_primitive.md)")
    if platform is None:
        lowering_rules[prim] = rule
        return rule
    prev = lowering_rules.get(prim)
    per = dict(getattr(prev, "per_platform", {}))
    default = getattr(prev, "default", prev)
    plat = "cuda" if platform == "gpu" else platform

    def by_platform(ctx: Any, *args: str, **params: Any) -> Any:
        r = per.get(ctx.platform, default)
        if r is None:
            raise NotImplementedError(f"MLIR translation rule for primitive '{prim}' not found for platform "
                                      f"{ctx.platform}")
        return r(ctx, *args, **params)

    per[plat] = rule
    by_platform.per_platform = per  # type: ignore[attr-defined]
    by_platform.default = default  # type: ignore[attr-defined]
    lowering_rules[prim] = by_platform
    return rule
