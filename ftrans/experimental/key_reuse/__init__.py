"""JAX's experimental PRNG key-reuse checker (``jax.experimental.key_reuse``).

With ``ftrans.config.update("jax_debug_key_reuse", True)`` (or inside ``with
ftrans.debug_key_reuse(True):``), consuming a typed key array twice raises ``KeyReuseError``: two
samplers on one key, a key split and then drawn from, a consumed key passed to a jitted function that
consumes it, a loop body that consumes a key it closes over.  It works eagerly and while tracing
(``jit``, ``cond``, ``scan``, ``while_loop``, ``vmap``, ``grad``); ``ftrans.random.clone`` makes a copy
counted as fresh.  ``check_key_reuse(f, *args)`` checks one function whatever the option says.  See
``docs/key_reuse.md``.
"""

from ftrans.errors import KeyReuseError
from ftrans.experimental.key_reuse._core import (
    Forward,
    KeyReuseSignature,
    Sink,
    Source,
    assert_consumed,
    assert_unconsumed,
    check_key_reuse,
    consume,
    function_type_signature,
)

__all__ = ["KeyReuseError", "Source", "Sink", "Forward", "KeyReuseSignature", "consume", "assert_consumed",
           "assert_unconsumed", "check_key_reuse", "function_type_signature"]
