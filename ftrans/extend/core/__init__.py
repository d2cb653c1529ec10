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
from ftrans.core.tokens import AbstractToken, Token
from ftrans.errors import InconclusiveDimensionOperation, JaxprTypeError
from ftrans.extend.core import primitives

__all__ = [
    "CallPrimitive", "ClosedJaxpr", "DropVar", "Effect", "EffectTypeSet", "Effects", "Jaxpr", "JaxprEqn",
    "JaxprInputEffect", "JaxprTypeError", "Literal", "Primitive", "Var", "check_jaxpr",
    "control_flow_allowed_effects", "custom_derivatives_allowed_effects", "eval_jaxpr", "jaxpr_as_fun",
    "jaxprs_in_params", "no_effects", "primitives", "remat_allowed_effects", "subjaxprs", "valid_jaxtype",
    "AbstractToken", "Token", "InconclusiveDimensionOperation", "primal_dtype_to_tangent_dtype",
]


def primal_dtype_to_tangent_dtype(primal_dtype: Any) -> Any:
    """JAX's ``extend.core.primal_dtype_to_tangent_dtype``: the dtype of a tangent of ``primal_dtype``.

    Args:
        primal_dtype: a dtype (NumPy's, or an extended dtype).

    Returns:
        ``primal_dtype`` itself for a floating or complex dtype, ``float0`` for an integer or boolean one, and
        for an extended dtype what its rules' ``tangent_dtype`` says.

    Examples:
        >>> import numpy as np
        >>> from ftrans.extend.core import primal_dtype_to_tangent_dtype
        >>> primal_dtype_to_tangent_dtype(np.dtype("float32"))
        dtype('float32')
        >>> primal_dtype_to_tangent_dtype(np.dtype("int32"))
        dtype([('float0', 'V')])
    """
    import numpy as np

    from ftrans.core import dtypes
    from ftrans.dtypes import float0

    rules = getattr(primal_dtype, "_rules", None)
    if rules is not None and not isinstance(primal_dtype, np.dtype):
        return rules.tangent_dtype(primal_dtype)
    return primal_dtype if dtypes.issubdtype(primal_dtype, np.inexact) else float0

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
