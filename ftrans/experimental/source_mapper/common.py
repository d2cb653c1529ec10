"""The registry of source-map passes and what a pass returns (JAX's ``jax.experimental.source_mapper.common``)."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ftrans.experimental.source_mapper.sourcemap import SourceMap

__all__ = ["Pass", "SourceMapDump", "all_passes", "compile_with_env", "filter_passes", "flag_env", "register_pass"]


@dataclasses.dataclass(frozen=True, slots=True)
class SourceMapDump:
    """One pass's result: the text it generated and the source map relating that text to the user's code."""

    source_map: SourceMap
    generated_code: str
    pass_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Pass:
    """A way to generate code and its source map. ``compile_fn(work_dir, f, args, kwargs, **pass_kwargs)``
    traces or compiles ``f`` (passes sharing one ``compile_fn`` share its result);
    ``generate_dump(result, **pass_kwargs)`` returns the ``SourceMapDump``."""

    name: str
    compile_fn: Callable[..., Any]
    generate_dump: Callable[..., SourceMapDump]


_pass_registry: dict[str, Pass] = {}


def register_pass(pass_: Pass) -> None:
    """Add a pass; its name must be new."""
    if not isinstance(pass_, Pass):
        raise TypeError(f"register_pass: expected a source_mapper.Pass, got {type(pass_).__name__}")
    if pass_.name in _pass_registry:
        raise ValueError(f"Pass {pass_.name} already registered")
    _pass_registry[pass_.name] = pass_


def all_passes() -> Sequence[Pass]:
    """Every registered pass, in registration order (``jaxpr``, ``hlo:stable-hlo``, ``hlo:original``,
    ``hlo:optimized``, then yours)."""
    return list(_pass_registry.values())


def filter_passes(regex: str) -> Sequence[Pass]:
    """The registered passes whose name matches ``regex`` at its start (``re.match``)."""
    return [p for p in _pass_registry.values() if re.match(regex, p.name)]


@contextlib.contextmanager
def flag_env(**kwargs: Any) -> Iterator[None]:
    """Set ftrans configuration options (JAX's flag names, with or without ``jax_``) for the block, then put
    the old values back."""
    from ftrans.core.config import config

    old = {k: getattr(config, k[4:] if k.startswith("jax_") else k) for k in kwargs}
    try:
        for k, v in kwargs.items():
            config.update(k, v)
        yield
    finally:
        for k, v in old.items():
            config.update(k, v)


def compile_with_env(f: Callable, f_args: Sequence, f_kwargs: dict, env_flags: dict, compiler_flags: Any) -> None:
    """Lower and compile ``f(*f_args, **f_kwargs)`` with ``jit`` under the configuration ``env_flags`` and the
    XLA options ``compiler_flags``."""
    from ftrans.transforms.jit import jit

    with flag_env(**env_flags):
        jit(lambda *args, **kwargs: f(*args, **kwargs)).lower(*f_args, **f_kwargs).compile(compiler_flags)
