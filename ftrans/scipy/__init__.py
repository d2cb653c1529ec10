"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``)."""

from ftrans.scipy import special

__all__ = ["special"]
