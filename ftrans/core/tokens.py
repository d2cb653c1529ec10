"""XLA token values (``lax.create_token``) and the hook that lets a user's primitive take one as an operand.

A :class:`Token` carries no data in ftrans (``ftrans/lax/_tokens.py`` explains why): it is a pytree node with no
leaves.  A primitive bound with token operands (JAX's ``tokentest_p.bind(x, token)``) is bound, in every
transform and eagerly, as a primitive of the same name over its other operands whose rules put the tokens back
before calling the user's rules (with :data:`abstract_token` as a token's abstract value).  Core finds a token
among a bind's operands and hands the bind to ``token_binder``, which ``ftrans.lax`` installs.
"""

from __future__ import annotations

from typing import Any

from ftrans.core import pytrees as tree_util


class Token:
    """An XLA token value (``lax.create_token()``); it carries no data in ftrans."""

    __slots__ = ()

    def block_until_ready(self) -> Token:
        return self

    def __eq__(self, other: Any) -> bool:
        return type(other) is Token

    def __hash__(self) -> int:
        return hash(Token)

    def __repr__(self) -> str:
        return "Token()"


tree_util.register_pytree_node(Token, lambda t: ((), None), lambda aux, children: Token())


class AbstractToken:
    """The abstract value of a token operand, as a user's abstract-evaluation rule sees it (JAX's
    ``core.abstract_token``); a token's tangent is a symbolic zero of this type."""

    __slots__ = ()

    def str_short(self, short_dtypes: bool = False) -> str:
        return "Tok"

    def __eq__(self, other: Any) -> bool:
        return type(other) is AbstractToken

    def __hash__(self) -> int:
        return hash(AbstractToken)

    def __repr__(self) -> str:
        return "AbstractToken()"


abstract_token = AbstractToken()

# ``token_binder(prim, args, params)``: bind ``prim`` on ``args`` some of which are tokens (installed by
# ``ftrans.lax``, whose layer owns the rules of the primitive it binds instead).
token_binder: Any = None


def bind_with_tokens(prim: Any, args: tuple, params: dict) -> Any:
    if token_binder is None:
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(f"{prim.name}: a token operand cannot be bound before ftrans.lax is imported")
    return token_binder(prim, args, params)
