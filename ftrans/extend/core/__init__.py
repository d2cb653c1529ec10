"""``ftrans.extend.core``: the IR and primitives for writing interpreters over ftrans programs
(JAX's ``jax.extend.core``, as used by its "Writing custom interpreters" tutorial).

``ftrans.make_jaxpr(f)(*args)`` returns a :class:`ClosedJaxpr`; its ``jaxpr`` has ``constvars``, ``invars``,
``eqns`` (each a :class:`JaxprEqn` with ``primitive``, ``invars`` -- :class:`Var` or :class:`Literal` --,
``outvars`` and ``params``) and ``outvars``, and ``literals`` (also ``consts``) holds the constants' values.
An interpreter reads them, dispatches on ``eqn.primitive`` (compare with ``ftrans.lax.exp_p`` and friends, or
``primitives.exp_p``) and calls ``eqn.primitive.bind(*values, **eqn.params)`` to apply a primitive, which
composes with every transform.  Build new programs by tracing a Python function that does the rewriting
(``make_jaxpr`` of an interpreter), not by assembling equations by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftrans.core.ir import (
    ClosedJaxpr,
    DropVar,
    Effect,
    EffectTypeSet,
    Jaxpr,
    JaxprEqn,
    JaxprInputEffect,
    Literal,
    Var,
    control_flow_allowed_effects,
    custom_derivatives_allowed_effects,
    remat_allowed_effects,
)
from ftrans.core.ir import subjaxprs as _eqn_subjaxprs
from ftrans.core.ir import typecheck as check_jaxpr
from ftrans.core.jaxpr_api import eval_jaxpr
from ftrans.core.primitive import Primitive
from ftrans.core.prims.calls import CallPrimitive
from ftrans.errors import JaxprTypeError
from ftrans.extend.core import primitives

__all__ = [
    "CallPrimitive", "ClosedJaxpr", "DropVar", "Effect", "EffectTypeSet", "Effects", "Jaxpr", "JaxprEqn",
    "JaxprInputEffect", "JaxprTypeError", "Literal", "Primitive", "Var", "check_jaxpr",
    "control_flow_allowed_effects", "custom_derivatives_allowed_effects", "eval_jaxpr", "jaxpr_as_fun",
    "jaxprs_in_params", "no_effects", "primitives", "remat_allowed_effects", "subjaxprs", "valid_jaxtype",
]

# JAX's names for a set of effects and the empty one (``eqn.effects``, ``jaxpr.effects``).  A user's effect
# types that may sit in the bodies of ``cond``/``while_loop``/``scan`` (``control_flow_allowed_effects``) or of
# ``custom_jvp``/``custom_vjp`` functions (``custom_derivatives_allowed_effects``) or of a ``checkpoint`` that is
# differentiated (``remat_allowed_effects``) are registered with ``add_type`` (JAX's registries of the same
# names); other user effects there raise ``NotImplementedError``.
Effects = frozenset
no_effects: frozenset = frozenset()


def jaxpr_as_fun(closed: ClosedJaxpr) -> Callable[..., list]:
    """JAX's ``jaxpr_as_fun``: a function evaluating ``closed`` on flat arguments, returning the list of
    its outputs (by binding each equation's primitive, so it can itself be traced and transformed)."""
    if isinstance(closed, Jaxpr):
        closed = ClosedJaxpr(closed, [])
    if not isinstance(closed, ClosedJaxpr):
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(f"jaxpr_as_fun: expected a ClosedJaxpr, got {type(closed).__name__}")

    def fun(*args: Any) -> list:
        return eval_jaxpr(closed.jaxpr, list(closed.consts), *args)

    return fun


def jaxprs_in_params(params: dict) -> list[Jaxpr]:
    """The jaxprs held in an equation's params (a higher-order primitive's bodies), in parameter order; a
    ``ClosedJaxpr`` gives its ``jaxpr`` (as JAX's)."""
    out: list = []
    for v in params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, Jaxpr):
                out.append(x)
            elif isinstance(x, ClosedJaxpr):
                out.append(x.jaxpr)
    return out


def subjaxprs(jaxpr: Jaxpr | ClosedJaxpr | JaxprEqn) -> list[Jaxpr]:
    """JAX's ``subjaxprs``: the jaxprs in the params of ``jaxpr``'s equations (not descending into them).
    Given one equation, its own bodies (as ``ClosedJaxpr`` where the equation holds them so)."""
    if isinstance(jaxpr, JaxprEqn):
        return _eqn_subjaxprs(jaxpr)
    return [j for eqn in jaxpr.eqns for j in jaxprs_in_params(eqn.params)]


def valid_jaxtype(x: Any) -> bool:
    """Whether ``x`` can be an operand: an array, scalar or tracer of a dtype ftrans supports (JAX's
    ``valid_jaxtype``); a NumPy array of ``object`` or structured dtype, a string, ... is not."""
    from ftrans.core.trace import aval_of

    try:
        aval_of(x)
    except TypeError:
        return False
    return True
