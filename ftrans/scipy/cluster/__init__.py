"""``ftrans.scipy.cluster``: vector quantisation (JAX's ``scipy.cluster`` subset)."""

from ftrans.scipy.cluster import vq

__all__ = ["vq"]
