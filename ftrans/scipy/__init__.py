"""``ftrans.scipy``: the ``jax.scipy`` subset ftrans provides (``scipy.special``)."""

from ftrans.scipy import special

__all__ = ["special"]
