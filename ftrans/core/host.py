"""The host CPU device, as the PJRT client that jax ships names it."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def host_device():
    from jax.extend import backend

    return backend.get_backend("cpu").local_devices()[0]
