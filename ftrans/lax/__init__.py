"""``ftrans.lax``: primitive-level operations (JAX's ``jax.lax``)."""

from ftrans.lax._indexing import *  # noqa: F401,F403
from ftrans.lax._ops import *  # noqa: F401,F403
from ftrans.lax._reductions import *  # noqa: F401,F403
from ftrans.lax._windowed import *  # noqa: F401,F403


def optimization_barrier(operand):  # noqa: ANN001, ANN201 - mirrors jax.lax's signature
    """``jax.lax.optimization_barrier``: an identity on a pytree that XLA may not optimize across."""
    from ftrans.transforms.remat import optimization_barrier as _barrier

    return _barrier(operand)
