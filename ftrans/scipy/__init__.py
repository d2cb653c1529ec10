"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``, ``scipy.linalg``)."""

from ftrans.scipy import linalg, special

__all__ = ["linalg", "special"]
