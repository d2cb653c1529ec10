"""``ftrans.scipy``: the JAX's ``scipy`` subset ftrans provides (``scipy.special``, ``scipy.linalg``,
``scipy.signal``, ``scipy.stats``, ``scipy.fft``, ``scipy.integrate``, ``scipy.optimize``, ``scipy.sparse``,
``scipy.ndimage``, ``scipy.interpolate``, ``scipy.spatial``, ``scipy.cluster``)."""

from ftrans.scipy import (
    cluster,
    fft,
    integrate,
    interpolate,
    linalg,
    ndimage,
    optimize,
    signal,
    sparse,
    spatial,
    special,
    stats,
)

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse",
           "spatial", "special", "stats"]
