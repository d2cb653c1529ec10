"""Thin, checked wrappers that bind one primitive each."""

from __future__ import annotations

from typing import Any

from ftrans.core.prims import elementwise as E

__all__ = ["add", "sub", "mul", "tanh"]


def add(x: Any, y: Any) -> Any:
    return E.add_p.bind(x, y)


def sub(x: Any, y: Any) -> Any:
    return E.sub_p.bind(x, y)


def mul(x: Any, y: Any) -> Any:
    return E.mul_p.bind(x, y)


def tanh(x: Any) -> Any:
    return E.tanh_p.bind(x)
