"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``, ``scipy.linalg``,
``scipy.signal``, ``scipy.stats``, ``scipy.ndimage``, ``scipy.interpolate``, ``scipy.spatial``,
``scipy.cluster``)."""

from ftrans.scipy import cluster, interpolate, linalg, ndimage, signal, spatial, special, stats

__all__ = ["cluster", "interpolate", "linalg", "ndimage", "signal", "spatial", "special", "stats"]
