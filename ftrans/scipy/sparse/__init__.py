"""``ftrans.scipy.sparse``: iterative solvers for linear systems given as operators (JAX's
``scipy.sparse``); see :mod:`ftrans.scipy.sparse.linalg`."""

from ftrans.scipy.sparse import linalg

__all__ = ["linalg"]
