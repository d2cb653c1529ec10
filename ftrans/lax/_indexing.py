"""lax gather / scatter and their dimension-number types."""

__all__: list[str] = []
