"""Primitives, and the registry of rule tables.

Each transform keeps its own table in its own module (``transforms/ad.py`` has
the JVP table, ``lowering`` the StableHLO table, ...), but creates it through
``rule_table`` so the table is listed in ``rule_tables``: the coverage test and
``python -m ftrans.rules`` walk that registry, and a table whose module fails
to import is then a missing name, not a table nobody checks.  ``registry``
lists every primitive, and ``not_supported`` records, with a user-facing
reason, the (primitive, table) pairs that are deliberately absent (no
transpose for a non-linear primitive, say).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ftrans.core.avals import ShapedArray

registry: dict[str, Primitive] = {}
# (primitive, table name) -> reason shown to a user who hits the gap.
not_supported: dict[tuple[Primitive, str], str] = {}


@dataclass(frozen=True)
class RuleTable:
    """A registered rule table: ``rules`` maps a primitive to its rule.

    ``higher_order_only`` tables (the partial-evaluation splits) apply only to
    primitives whose params hold jaxprs; a first-order primitive needs no entry.
    """

    name: str
    owner: str
    rules: dict
    higher_order_only: bool = False

    def applies_to(self, prim: Primitive) -> bool:
        return prim.higher_order or not self.higher_order_only


# table name -> table, in registration order (core's first, then as modules import).
rule_tables: dict[str, RuleTable] = {}


def rule_table(name: str, *, owner: str, higher_order_only: bool = False) -> dict[Primitive, Callable[..., Any]]:
    """Create the rule table ``name`` owned by module ``owner`` and register it.

    ``name`` is the one ``mark_unsupported(prim, name, reason)`` uses.  A second
    table under the same name is an error: two tables would split one kind of
    rule between them and the coverage test would only see one.
    """
    if name in rule_tables:
        raise ValueError(f"rule table {name!r} is registered twice (by {rule_tables[name].owner} and {owner})")
    rules: dict[Primitive, Callable[..., Any]] = {}
    rule_tables[name] = RuleTable(name, owner, rules, higher_order_only)
    return rules


abstract_eval_rules = rule_table("abstract_eval", owner=__name__)
impl_rules = rule_table("impl", owner=__name__)


def _created_by_ftrans() -> bool:
    """Whether the primitive being constructed is ftrans's own (created by code in the ftrans package, past
    the ``__init__`` of ``Primitive`` and its subclasses): ftrans's primitive names are unique; a user's
    primitives, as JAX's, may repeat a name."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"),
                                                                                   Primitive):
        frame = frame.f_back
    return frame is not None and str(frame.f_globals.get("__name__", "")).startswith("ftrans.")


def _defined_by_ftrans() -> bool:
    """Whether the rule being defined (``def_abstract_eval``'s caller's caller) is ftrans's own."""
    return str(sys._getframe(2).f_globals.get("__name__", "")).startswith("ftrans.")


def _checked_results(prim: Primitive, rule: Callable[..., Any]) -> Callable[..., Any]:
    """A user's abstract-evaluation rule, checked to return a sequence exactly when ``prim`` has multiple
    results (JAX's check; ftrans's own rules are trusted, keeping staging fast)."""

    def checked(*avals: Any, **params: Any) -> Any:
        out = rule(*avals, **params)
        if isinstance(out, (tuple, list)) != prim.multiple_results:
            raise ValueError(f"{prim.name}.abstract_eval() method should return a tuple or a list iff "
                             f"{prim.name}.multiple_results.")
        return out

    return checked


class Primitive:
    """A strict operation: operands already agree in shape and dtype, as in XLA.

    ``weak_type_rule`` says whether the result is weakly typed given the
    operands' weakness; eager execution uses it instead of a full abstract
    evaluation so a small eager op costs little more than the NumPy call.
    ``higher_order`` marks a primitive whose params hold jaxprs (a body it
    runs): those also need the partial-evaluation rules, and the coverage test
    checks the flag against the params the primitive is really bound with.
    """

    __slots__ = ("name", "multiple_results", "higher_order", "weak_type_rule", "impl", "sharding_rule",
                 "sets_sharding", "_narrow_impl", "_wide_impl", "ftrans_owned", "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False, higher_order: bool = False):
        # ftrans's own primitives are the ones the registry's coverage checks hold to every rule; a user's
        # (created outside the package, as JAX's tutorials do) supplies only the rules it needs.
        self.ftrans_owned = _created_by_ftrans()
        if name in registry and self.ftrans_owned:
            raise ValueError(f"primitive {name!r} is registered twice")
        self.name = name
        self.multiple_results = multiple_results
        self.higher_order = higher_order
        self.weak_type_rule: Callable[..., bool] = _all_weak
        self.impl: Callable[..., Any] | None = None
        # An impl wrapped for the narrow integers (prims/_base.py: narrow_ints_via_bytes) and the rule inside
        # it, which eager application calls directly for NumPy's own dtypes (None: impl is not wrapped).
        self._narrow_impl: Callable[..., Any] | None = None
        self._wide_impl: Callable[..., Any] | None = None
        # Sharding in types (core/sharding_rules.py): the result's spec from the operands' (None: no rule, the
        # result is untyped); ``sets_sharding``: the primitive can type an untyped value (a reshard).
        self.sharding_rule: Callable[..., Any] | None = None
        self.sets_sharding = False
        registry.setdefault(name, self)  # a user's primitive may share a name, as in JAX (the first keeps it)

    def bind(self, *args: Any, **params: Any) -> Any:
        return _bind(self, args, params)

    def def_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        abstract_eval_rules[self] = rule if _defined_by_ftrans() else _checked_results(self, rule)
        return rule

    def def_effectful_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """JAX's: ``rule(*avals, **params)`` returns ``(out_avals, effects)``, a set of
        ``ftrans.extend.core.Effect``; the equations of this primitive carry those effects (``eqn.effects``,
        ``jaxpr.effects``), and no pass drops them."""
        from ftrans.core import ir

        def plain(*avals: Any, **params: Any) -> Any:
            return rule(*avals, **params)[0]

        abstract_eval_rules[self] = plain if _defined_by_ftrans() else _checked_results(self, plain)
        ir.effectful_if[self] = lambda params: True
        ir.effect_rules[self] = lambda eqn: rule(*[v.aval for v in eqn.invars], **eqn.params)[1]
        ir.user_effect_primitives.add(self)
        return rule

    def def_impl(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        impl_rules[self] = rule
        self.impl = rule
        wide = getattr(rule, "wide_rule", None)
        self._narrow_impl, self._wide_impl = (rule, wide) if wide is not None else (None, None)
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
        raise NotImplementedError(f"Abstract evaluation for '{prim.name}' not implemented "
                                  f"(primitive {prim.name} has no abstract evaluation rule)")
    return rule(*avals, **params)


def mark_unsupported(prim: Primitive, table: str, reason: str) -> None:
    """Record that ``prim`` deliberately has no rule in ``table``, with the reason a user is shown."""
    not_supported[(prim, table)] = reason


def _bind(prim: Primitive, args: tuple, params: dict) -> Any:  # replaced by trace.bind
    from ftrans.core.trace import bind

    return bind(prim, args, params)
