"""Gather and scatter primitives (XLA general semantics)."""

__all__: list[str] = []
