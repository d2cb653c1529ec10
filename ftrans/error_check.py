"""JAX's error checking inside traced code (JAX's internal ``error_check`` module): ``set_error_if`` records an error
while a function runs (eagerly or compiled), ``raise_if_error`` raises the first one as a
:class:`JaxValueError`; ``error_checking_context`` gives the block its own error state (shaped by the mesh
in context); ``wrap_for_export`` / ``unwrap_from_import`` carry it through ``ftrans.export``.
``error_checking_behavior`` switches jnp's own checks (NaN results, zero divisors, out-of-bounds gathers).
The implementation is ``ftrans/numpy/error.py``."""

import json

from ftrans.export import register_pytree_node_serialization
from ftrans.numpy.error import (
    JaxValueError,
    _ensure_state,
    _ErrorClass,
    error_checking_behavior,
    error_checking_context,
    raise_if_error,
    set_error_if,
    unwrap_from_import,
    wrap_for_export,
)
from ftrans.tree_util import register_dataclass

__all__ = ["JaxValueError", "set_error_if", "raise_if_error", "error_checking_context", "wrap_for_export",
           "unwrap_from_import", "error_checking_behavior"]

# Importing the module makes the calling thread's error state (ftrans's staged functions thread a ref only
# once some ref exists, so the state must exist before the first traced ``set_error_if``); ``ftrans``
# imports this module only when ``ftrans.error_check`` is first used, so programs without checks pay nothing.
_ensure_state()

register_dataclass(_ErrorClass, data_fields=("error_code",), meta_fields=("error_list",))
register_pytree_node_serialization(
    _ErrorClass,
    serialized_name=f"{_ErrorClass.__module__}.{_ErrorClass.__name__}",
    serialize_auxdata=lambda x: json.dumps(x, ensure_ascii=False).encode("utf-8"),
    deserialize_auxdata=lambda x: json.loads(x.decode("utf-8")),
)
