"""``jnp.copy`` / ``jnp.array(x, copy=True)`` of a device-resident array gives new buffers laid out as the
original (same sharding, devices, indices, committed-ness), as JAX's; ``copy=False`` keeps the buffers."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans

pytestmark = pytest.mark.skipif(jax.local_device_count() < 2, reason="needs host devices (tests/conftest.py)")


def _sources(lib):
    d = lib.devices()
    mesh = lib.sharding.Mesh(np.array(d), ("x",))
    s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x"))
    return {"sharded": lib.device_put(lib.numpy.ones((len(d),)), s),
            "one_device": lib.device_put(lib.numpy.arange(3.0), d[1])}


def _describe(lib, x, y):
    return {
        "committed": (x._committed, y._committed),
        "devices": sorted(dv.id for dv in y.devices()),
        "shards": [(s.device.id, str(s.index), s.replica_id) for s in y.addressable_shards],
        "fresh": all(a.data.unsafe_buffer_pointer() != b.data.unsafe_buffer_pointer()
                     for a, b in zip(x.addressable_shards, y.addressable_shards)),
        "same_values": bool(np.array_equal(np.asarray(x), np.asarray(y))),
    }


@pytest.mark.parametrize("how", ["copy", "array"])
def test_copy_gives_new_buffers_laid_out_alike(how):
    def run(lib):
        out = {}
        for k, x in _sources(lib).items():
            y = lib.numpy.copy(x) if how == "copy" else lib.numpy.array(x, copy=True)
            out[k] = _describe(lib, x, y)
        return out

    assert run(ftrans) == run(jax)
