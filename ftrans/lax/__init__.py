"""``ftrans.lax``: primitive-level operations (JAX's ``jax.lax``)."""

from ftrans.lax._indexing import *  # noqa: F401,F403
from ftrans.lax._ops import *  # noqa: F401,F403
from ftrans.lax._reductions import *  # noqa: F401,F403
from ftrans.lax._windowed import *  # noqa: F401,F403
