"""Sorting, searching, uniqueness: sort, argsort, searchsorted, unique, ..."""

__all__: list[str] = []
