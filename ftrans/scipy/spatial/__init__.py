"""``ftrans.scipy.spatial``: 3-d rotations (JAX's ``scipy.spatial`` subset)."""

from ftrans.scipy.spatial import transform

__all__ = ["transform"]
