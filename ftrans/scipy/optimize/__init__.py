"""``ftrans.scipy.optimize``: unconstrained minimisation (JAX's ``scipy.optimize``).

:func:`minimize` with ``method="BFGS"`` or the experimental limited-memory
``"l-bfgs-experimental-do-not-rely-on-this"``; both search along each
direction with a strong-Wolfe line search and run as one ``lax.while_loop``
(so they can be ``jit``-ted).
"""

from ftrans.scipy.optimize._minimize import OptimizeResults, minimize

__all__ = ["OptimizeResults", "minimize"]
