"""``lax.create_token`` / ``lax.after_all``: XLA token values.

JAX threads tokens (a ``Tok``-typed value lowering to ``!stablehlo.token``) to order side effects.  ftrans orders
its own effects (callbacks thread a token internally, see ``ftrans/lowering/rules/callbacks.py``) and has no
token type in its IR, so a :class:`Token` here carries no data: it is a pytree node with no leaves, which passes
through ``jit`` (as an argument or a result), ``vmap`` and ``grad`` unchanged, and ``after_all`` checks that it
merges only tokens.  (A ``Token`` is therefore not a pytree leaf, and a program shows no ``create_token``
equation: see ``docs/differences.md``.)
"""

from __future__ import annotations

from typing import Any

from ftrans.core import pytrees as tree_util
from ftrans.errors import FtransTypeError

__all__ = ["Token", "create_token", "after_all"]


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
