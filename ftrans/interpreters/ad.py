"""JAX's ``jax.interpreters.ad``: giving a user's primitive its differentiation rules, JAX's way.

These are views of ftrans's own tables (``ftrans.transforms.ad.jvp_rules``, ``ftrans.transforms.transpose
.transpose_rules``), whose rules already take JAX's arguments:

* ``primitive_jvps[p] = rule``: ``rule(primals, tangents, **params) -> (primal_out, tangent_out)``; a tangent
  may be a symbolic ``Zero`` (``instantiate_zeros`` makes it an array), and the rule may return one.
* ``primitive_transposes[p] = rule``: ``rule(ct, *operands, **params)`` -> one cotangent (or ``None``) per
  operand; the linear operands arrive as ``UndefinedPrimal`` (``is_undefined_primal``), with only an ``aval``.
* ``defjvp``, ``defjvp2``, ``deflinear``, ``deflinear2``, ``defbilinear``, ``defjvp_zero``: JAX's shorthands.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ftrans.core.primitive import Primitive
from ftrans.transforms.ad import Zero, add_tangents, instantiate, jvp_rules, zeros_like_aval
from ftrans.transforms.transpose import UndefinedPrimal, is_undefined, transpose_rules

__all__ = [
    "Zero", "UndefinedPrimal", "add_jaxvals", "add_tangents", "defbilinear", "defjvp", "defjvp2",
    "defjvp_zero", "deflinear", "deflinear2", "get_primitive_transpose", "instantiate_zeros",
    "is_undefined_primal", "primitive_jvps", "primitive_transposes", "zeros_like_aval",
]

primitive_jvps = jvp_rules
primitive_transposes = transpose_rules
add_jaxvals = add_tangents


def instantiate_zeros(tangent: Any) -> Any:
    """A symbolic ``Zero`` as an array of zeros; any other tangent as it is."""
    return instantiate(tangent)


def is_undefined_primal(x: Any) -> bool:
    """Whether a transpose rule's operand ``x`` is a linear input (an ``UndefinedPrimal``)."""
    return is_undefined(x)


def get_primitive_transpose(p: Primitive) -> Callable:
    try:
        return transpose_rules[p]
    except KeyError as err:
        raise NotImplementedError(
            f"Transpose rule (for reverse-mode differentiation) for '{p}' not implemented") from err


def _sum_tangents(contributions: list, out: Any) -> Any:
    return functools.reduce(add_tangents, contributions, Zero.from_primal_value(out))


def defjvp(primitive: Primitive, *jvprules: Callable | None) -> None:
    """One rule per operand, ``jvprule(t, *primals, **params)`` -> that operand's part of the output tangent
    (``None``: the output does not depend on the operand); symbolic-zero tangents are skipped."""
    assert isinstance(primitive, Primitive)
    assert not primitive.multiple_results

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        parts = [r(t, *primals, **params) for r, t in zip(jvprules, tangents)
                 if r is not None and type(t) is not Zero]
        return out, _sum_tangents(parts, out)

    jvp_rules[primitive] = rule


def defjvp2(primitive: Primitive, *jvprules: Callable | None) -> None:
    """As ``defjvp``, with the primal output passed too: ``jvprule(t, out, *primals, **params)``."""
    assert isinstance(primitive, Primitive)
    assert not primitive.multiple_results

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        parts = [r(t, out, *primals, **params) for r, t in zip(jvprules, tangents)
                 if r is not None and type(t) is not Zero]
        return out, _sum_tangents(parts, out)

    jvp_rules[primitive] = rule


def defjvp_zero(primitive: Primitive) -> None:
    """The primitive's outputs have zero derivative."""
    assert isinstance(primitive, Primitive)

    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return out, [Zero.from_primal_value(o) for o in out]
        return out, Zero.from_primal_value(out)

    jvp_rules[primitive] = rule


def _linear_jvp(primitive: Primitive) -> Callable:
    def rule(primals: list, tangents: list, **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            zero = ([Zero.from_primal_value(o) for o in out] if primitive.multiple_results
                    else Zero.from_primal_value(out))
            return out, zero
        return out, primitive.bind(*[instantiate(t) for t in tangents], **params)

    return rule


def deflinear(primitive: Primitive, transpose_rule: Callable) -> None:
    """A primitive linear in all its operands jointly; ``transpose_rule(ct, **params)`` -> operands' cts."""
    jvp_rules[primitive] = _linear_jvp(primitive)

    def transpose(ct: Any, *args: Any, **params: Any) -> list:
        if type(ct) is Zero:
            return [None] * len(args)
        return transpose_rule(ct, **params)

    transpose_rules[primitive] = transpose


def deflinear2(primitive: Primitive, transpose_rule: Callable) -> None:
    """As ``deflinear``, with the operands passed on: ``transpose_rule(ct, *operands, **params)``."""
    jvp_rules[primitive] = _linear_jvp(primitive)

    def transpose(ct: Any, *args: Any, **params: Any) -> list:
        if type(ct) is Zero:
            return [None] * len(args)
        return transpose_rule(ct, *args, **params)

    transpose_rules[primitive] = transpose


def defbilinear(prim: Primitive, lhs_rule: Callable, rhs_rule: Callable) -> None:
    """``prim(x, y)`` linear in each of ``x`` and ``y``: ``lhs_rule(ct, x, y, **params)`` is ``x``'s
    cotangent (``x`` undefined), ``rhs_rule(ct, x, y, **params)`` is ``y``'s."""
    assert isinstance(prim, Primitive)
    defjvp(prim, lambda t, x, y, **kw: prim.bind(t, y, **kw), lambda t, x, y, **kw: prim.bind(x, t, **kw))

    def transpose(ct: Any, x: Any, y: Any, **params: Any) -> tuple:
        if is_undefined(x) == is_undefined(y):
            raise ValueError(f"{prim}: a bilinear transpose needs exactly one linear operand")
        if type(ct) is Zero:
            return None, None
        if is_undefined(x):
            return lhs_rule(ct, x, y, **params), None
        return None, rhs_rule(ct, x, y, **params)

    transpose_rules[prim] = transpose
