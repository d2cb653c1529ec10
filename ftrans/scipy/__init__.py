"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``, ``scipy.linalg``,
``scipy.signal``, ``scipy.stats``, ``scipy.fft``, ``scipy.integrate``, ``scipy.optimize``,
``scipy.sparse``)."""

from ftrans.scipy import fft, integrate, linalg, optimize, signal, sparse, special, stats

__all__ = ["fft", "integrate", "linalg", "optimize", "signal", "sparse", "special", "stats"]
