"""lax sort, cumulative reductions and other reduction helpers."""

__all__: list[str] = []
