"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``, ``scipy.signal``)."""

from ftrans.scipy import signal, special

__all__ = ["signal", "special"]
