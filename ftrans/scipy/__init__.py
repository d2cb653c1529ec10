"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``, ``scipy.linalg``,
``scipy.signal``)."""

from ftrans.scipy import linalg, signal, special, stats

__all__ = ["linalg", "signal", "special", "stats"]
