"""``lax.create_token`` / ``lax.after_all``: XLA token values, and token operands of a user's primitive.

JAX threads tokens (a ``Tok``-typed value lowering to ``!stablehlo.token``) to order side effects.  ftrans orders
its own effects (callbacks thread a token internally, see ``ftrans/lowering/rules/callbacks.py``) and has no
token type in its IR, so a :class:`Token` here carries no data: it is a pytree node with no leaves, which passes
through ``jit`` (as an argument or a result), ``vmap`` and ``grad`` unchanged, and ``after_all`` checks that it
merges only tokens.  (A ``Token`` is therefore not a pytree leaf, and a program shows no ``create_token``
equation: see ``docs/differences.md``.)

A user's primitive bound with token operands (``p.bind(x, token)``, as JAX's tests and effect-ordering code do)
is bound as a primitive of the same name over its array operands only (:func:`_bind_with_tokens`): its rules
put a ``Token()`` back where each token was (``core.abstract_token`` in abstract evaluation, a symbolic zero
tangent of that type in a JVP rule, no batch dimension in a batching rule, no cotangent out of a transpose rule)
and call ``p``'s own rules, so ``p`` works eagerly and under every transform; the token does not appear in the
printed program.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ftrans.core import ir as _ir
from ftrans.core import tokens as _core_tokens
from ftrans.core.primitive import Primitive, abstract_eval_rules, registry
from ftrans.core.tokens import Token, abstract_token
from ftrans.errors import FtransTypeError
from ftrans.lowering.lower import MissingLoweringRule, lowering_rules
from ftrans.transforms import batching as _batching
from ftrans.transforms.ad import Zero, jvp_rules
from ftrans.transforms.transpose import transpose_rules

__all__ = ["Token", "create_token", "after_all"]


def create_token(_: Any = None) -> Token:
    """``lax.create_token``: a token with no preconditions for sequencing effects (the argument is ignored, as
    in JAX)."""
    return Token()


def after_all(*operands: Any) -> Token:
    """``lax.after_all``: merge tokens into one."""
    for i, t in enumerate(operands):
        if type(t) is not Token:
            raise FtransTypeError(f"Arguments to after_all must be tokens; argument {i} is a {type(t).__name__}. "
                                  "Make one with lax.create_token()")
    return Token()


# ----------------------------------------------------------------------------
# Token operands of a user's primitive


def _put_back(vals: Any, positions: tuple[int, ...], filler: Any) -> list:
    """``vals`` (the operands other than the tokens) with ``filler`` inserted at each token position."""
    out = list(vals)
    for i in positions:
        out.insert(i, filler)
    return out


def _drop(vals: Any, positions: tuple[int, ...]) -> list:
    return [v for i, v in enumerate(vals) if i not in positions]


class _TokenlessPrimitive(Primitive):
    """``base`` over its operands other than the tokens at ``positions``: same name, rules that call ``base``'s
    with the tokens put back."""

    __slots__ = ("base", "token_positions")

    def __init__(self, base: Primitive, positions: tuple[int, ...]):
        tmp = f"{base.name}[tokens at {positions}]@{id(base)}"
        super().__init__(tmp, multiple_results=base.multiple_results, higher_order=base.higher_order)
        if registry.get(tmp) is self:
            del registry[tmp]
        self.name, self.ftrans_owned = base.name, False
        self.base, self.token_positions = base, positions
        base_weak = base.weak_type_rule
        self.weak_type_rule = lambda weaks, **params: base_weak(tuple(_put_back(weaks, positions, False)), **params)
        self.def_impl(self._impl)

    def _impl(self, *vals: Any, **params: Any) -> Any:
        impl = self.base.impl
        if impl is None:
            raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented "
                                      f"(primitive {self.name} has no eager (NumPy) rule)")
        return impl(*_put_back(vals, self.token_positions, Token()), **params)

    def sync_rules(self) -> None:
        """Give this primitive each rule ``base`` has (rules may be registered after the first bind)."""
        base, pos = self.base, self.token_positions
        if base in abstract_eval_rules and self not in abstract_eval_rules:
            rule = abstract_eval_rules[base]
            abstract_eval_rules[self] = lambda *avals, **p: rule(*_put_back(avals, pos, abstract_token), **p)
        if base in jvp_rules and self not in jvp_rules:
            jrule = jvp_rules[base]

            def jvp(primals: list, tangents: list, **p: Any) -> Any:
                return jrule(_put_back(primals, pos, Token()), _put_back(tangents, pos, Zero(abstract_token)), **p)

            jvp_rules[self] = jvp
        if base in transpose_rules and self not in transpose_rules:
            trule = transpose_rules[base]
            transpose_rules[self] = lambda ct, *ops, **p: _drop(trule(ct, *_put_back(ops, pos, Token()), **p), pos)
        if base in _batching.batching_rules and self not in _batching.batching_rules:
            brule = _batching.batching_rules[base]
            _batching.batching_rules[self] = lambda vals, dims, **p: brule(
                _put_back(vals, pos, Token()), _put_back(dims, pos, _batching.not_mapped), **p)
        if self not in lowering_rules:
            lowering_rules[self] = self._lower
        if base in _ir.effect_rules and self not in _ir.effect_rules:
            erule = _ir.effect_rules[base]
            _ir.effect_rules[self] = lambda eqn: erule(SimpleNamespace(
                invars=_put_back(eqn.invars, pos, SimpleNamespace(aval=abstract_token)), params=eqn.params))
            if base in _ir.effectful_if:
                _ir.effectful_if[self] = _ir.effectful_if[base]
            if base in _ir.user_effect_primitives:
                _ir.user_effect_primitives.add(self)

    def _lower(self, ctx: Any, *args: str, **params: Any) -> Any:
        rule = lowering_rules.get(self.base)
        rule = getattr(rule, "per_platform", {}).get(ctx.platform, getattr(rule, "default", rule))
        if rule is None:
            raise MissingLoweringRule(
                f"MLIR translation rule for primitive '{self.name}' not found for platform {ctx.platform}: "
                f"primitive {self.name} has no StableHLO lowering rule")
        fun = getattr(rule, "fun", None)
        if fun is None:  # a StableHLO-text rule: it would need a token value, which ftrans's IR has none of
            raise NotImplementedError(
                f"lowering {self.name} with token operands: its lowering rule is written in StableHLO text, which "
                "would need a token value (ftrans has none in its IR); register "
                "`mlir.lower_fun(impl, multiple_results=...)` for it instead")
        pos = self.token_positions
        wrapped = type(rule)(lambda *xs, **p: fun(*_put_back(xs, pos, Token()), **p), rule.multiple_results)
        return wrapped(ctx, *args, **params)


_tokenless: dict[tuple[Primitive, tuple[int, ...]], _TokenlessPrimitive] = {}


def _bind_with_tokens(prim: Primitive, args: tuple, params: dict) -> Any:
    """``prim.bind(*args, **params)`` where some of ``args`` are tokens."""
    positions = tuple(i for i, a in enumerate(args) if type(a) is Token)
    if isinstance(prim, _TokenlessPrimitive) or prim.ftrans_owned:
        raise FtransTypeError(f"{prim.name} got a token (lax.create_token()) as operand {positions[0]}, where it "
                              "takes arrays")
    key = (prim, positions)
    p = _tokenless.get(key)
    if p is None:
        p = _tokenless[key] = _TokenlessPrimitive(prim, positions)
    p.sync_rules()
    return p.bind(*_drop(args, positions), **params)


_core_tokens.token_binder = _bind_with_tokens
