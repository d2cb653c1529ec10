"""Run a function through the StableHLO lowering and XLA, without jit's caches.

Used by the lowering tests so that each primitive's lowering is checked on its
own against its NumPy rule.
"""

from __future__ import annotations

import numpy as np

import ftrans
from ftrans.core.array import Array
from ftrans.lowering import compat, lower


def run_lowered(fun, *args, platform: str = "cpu"):
    """make_jaxpr -> StableHLO -> XLA -> run on ``args``; returns NumPy outputs (flat list)."""
    closed = ftrans.make_jaxpr(fun)(*args)
    text = lower.lower_jaxpr(closed.jaxpr)
    client = compat.backend(platform)
    dev = client.local_devices()[0]
    exe = compat.compile(client, text, [dev], (), lower.host_callbacks_of(text))
    vals = [c._value if isinstance(c, Array) else np.asarray(c) for c in closed.consts]
    vals += [a._value if isinstance(a, Array) else np.asarray(a) for a in args]
    bufs = [compat.device_put(np.asarray(v), dev) for v in vals]
    return [np.asarray(o) for o in compat.execute(exe, bufs)], text
