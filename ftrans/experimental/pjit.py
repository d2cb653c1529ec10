"""JAX's older ``pjit`` entry point: ``jit`` with shardings, under its former name.

``pjit(f, in_shardings=..., out_shardings=...)`` is ``jit`` with the same
arguments (JAX merged the two); scripts written against it run unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["pjit"]


def pjit(fun: Callable | None = None, in_shardings: Any = None, out_shardings: Any = None,
         static_argnums: Any = None, static_argnames: Any = None, donate_argnums: Any = None,
         donate_argnames: Any = None, keep_unused: bool = False, device: Any = None, backend: str | None = None,
         inline: bool = False, compiler_options: dict | None = None) -> Any:
    """``jit`` under its old name; the same options (``pjit(f)`` or ``pjit(in_shardings=...)(f)``)."""
    from ftrans.transforms.jit import jit

    kw = dict(in_shardings=in_shardings, out_shardings=out_shardings, static_argnums=static_argnums,
              static_argnames=static_argnames, donate_argnums=donate_argnums, donate_argnames=donate_argnames,
              keep_unused=keep_unused, device=device, backend=backend, inline=inline,
              compiler_options=compiler_options)
    if fun is None:
        return lambda f: jit(f, **kw)
    return jit(fun, **kw)
