"""JAX's ``jax.experimental`` names that ftrans provides."""

from ftrans._callback import io_callback
from ftrans.core.keys import primal_tangent_dtype  # noqa: E402  (JAX's jax.experimental.primal_tangent_dtype)
from ftrans.experimental import compilation_cache, sparse

__all__ = ["io_callback", "compilation_cache", "sparse", "primal_tangent_dtype"]
from ftrans.experimental import jet, ode  # noqa: E402

__all__ += ["jet", "ode"]
from ftrans.experimental import pjit  # noqa: E402

__all__ += ["pjit"]

from ftrans.experimental import checkify  # noqa: E402

__all__ += ["checkify"]
from ftrans.experimental import mesh_utils, multihost_utils  # noqa: E402

__all__ += ["mesh_utils", "multihost_utils"]
from ftrans.experimental import custom_partitioning, layout  # noqa: E402

__all__ += ["custom_partitioning", "layout"]
from ftrans.experimental import shard_alike  # noqa: E402

__all__ += ["shard_alike"]
from ftrans.experimental import random  # noqa: E402

__all__ += ["random"]
from ftrans.experimental import rnn  # noqa: E402

__all__ += ["rnn"]
from ftrans.experimental import compute_on  # noqa: E402

__all__ += ["compute_on"]
from ftrans.experimental import key_reuse  # noqa: E402

__all__ += ["key_reuse"]
from ftrans.experimental import control_deps  # noqa: E402

__all__ += ["control_deps"]
from ftrans.experimental import scheduling_groups, xla_metadata  # noqa: E402

__all__ += ["scheduling_groups", "xla_metadata"]
from ftrans.experimental import serialize_executable  # noqa: E402

__all__ += ["serialize_executable"]
from ftrans.experimental import buffer_callback  # noqa: E402

__all__ += ["buffer_callback"]
