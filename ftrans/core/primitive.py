"""Primitives and the rule tables core owns (abstract eval and the NumPy impl).

Each transform keeps its own table in its own module (``transforms/ad.py`` has
the JVP table, ``lowering`` the StableHLO table, ...).  ``registry`` lists every
primitive so a coverage test can walk all (primitive, table) pairs, and
``not_supported`` records, with a user-facing reason, the pairs that are
deliberately absent (no transpose for a non-linear primitive, say).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ftrans.core.avals import ShapedArray

registry: dict[str, Primitive] = {}
abstract_eval_rules: dict[Primitive, Callable[..., Any]] = {}
impl_rules: dict[Primitive, Callable[..., Any]] = {}
# (primitive, table name) -> reason shown to a user who hits the gap.
not_supported: dict[tuple[Primitive, str], str] = {}


class Primitive:
    """A strict operation: operands already agree in shape and dtype, as in XLA.

    ``weak_type_rule`` says whether the result is weakly typed given the
    operands' weakness; eager execution uses it instead of a full abstract
    evaluation so a small eager op costs little more than the NumPy call.
    """

    __slots__ = ("name", "multiple_results", "weak_type_rule", "impl", "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False):
        if name in registry:
            raise ValueError(f"primitive {name!r} is registered twice")
        self.name = name
        self.multiple_results = multiple_results
        self.weak_type_rule: Callable[..., bool] = _all_weak
        self.impl: Callable[..., Any] | None = None
        registry[name] = self

    def bind(self, *args: Any, **params: Any) -> Any:
        return _bind(self, args, params)

    def def_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        abstract_eval_rules[self] = rule
        return rule

    def def_impl(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        impl_rules[self] = rule
        self.impl = rule
        return rule

    def def_weak_type(self, rule: Callable[..., bool]) -> Callable[..., bool]:
        self.weak_type_rule = rule
        return rule

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


def _all_weak(weaks: tuple[bool, ...], **params: Any) -> bool:
    return all(weaks) if weaks else False


def never_weak(weaks: tuple[bool, ...], **params: Any) -> bool:
    return False


def first_weak(weaks: tuple[bool, ...], **params: Any) -> bool:
    return weaks[0]


def abstract_eval(prim: Primitive, avals: list[ShapedArray], params: dict) -> Any:
    rule = abstract_eval_rules.get(prim)
    if rule is None:
        raise NotImplementedError(f"primitive {prim.name} has no abstract evaluation rule")
    return rule(*avals, **params)


def mark_unsupported(prim: Primitive, table: str, reason: str) -> None:
    not_supported[(prim, table)] = reason


def _bind(prim: Primitive, args: tuple, params: dict) -> Any:  # replaced by trace.bind
    from ftrans.core.trace import bind

    return bind(prim, args, params)
