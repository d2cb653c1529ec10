"""Committed arrays and computation follows data on 8 host devices, against jax: ``device_put`` with a
device commits its result there, operations (eager and jitted) run where their committed operands are and
commit their results, uncommitted operands move, and operands committed to two devices are an error."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import pytest
from jax import lax as jlax

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax

pytestmark = pytest.mark.skipif(jax.local_device_count() < 4, reason="needs host devices (tests/conftest.py)")


def placement(x):
    return x._committed, {d.id for d in x.devices()}


def _cases(lib, np_, lax_):
    d = lib.devices()
    x = np_.ones(2)
    z = lib.device_put(1, d[1])
    u = lib.device_put(np_.zeros(2), d[2])
    return {
        "default": x,
        "eager_uncommitted": np_.sin(x + x * 1) + 2,
        "device_put": z,
        "device_put_none_keeps": lib.device_put(lib.device_put(2, d[1])),
        "device_put_none_host": lib.device_put(np_.zeros(2)),
        "device_put_default_device": lib.device_put(np_.zeros(2), d[0]),
        "eager_follows": z + x,
        "lax_follows": lax_.add(z, z),
        "reshape_follows": z.reshape((1, 1)),
        "transpose_follows": lax_.transpose(lib.device_put(np_.ones((2, 3)), d[2]), (1, 0)),
        "broadcast_follows": lib.device_put(1, d[2]) + np_.ones((2, 3)),
        "convert_follows": u.astype(np_.int32),
        "jit_uncommitted": lib.jit(lambda a, b: a + b)(1, 2),
        "jit_follows": lib.jit(lambda a, b: a + b)(x, u),
        "jit_device": lib.jit(lambda a: a * 2, device=d[3])(u),
    }


def test_committed_placement_matches_jax():
    with pytest.warns(DeprecationWarning):
        want = {k: placement(v) for k, v in _cases(jax, jjnp, jlax).items()}
    got = {k: placement(v) for k, v in _cases(ftrans, fjnp, flax).items()}
    assert got == want


@pytest.mark.parametrize("how", ["eager", "jit"])
def test_operands_committed_to_two_devices_raise(how):
    for lib in (jax, ftrans):
        d = lib.devices()
        a, b = lib.device_put(1, d[0]), lib.device_put(2, d[1])
        f = (lambda p, q: p + q) if how == "eager" else lib.jit(lambda p, q: p + q)
        with pytest.raises(ValueError, match="incompatible devices"):
            f(a, b)


def _layouts(lib, np_, lax_, sharding_mod):
    d = lib.devices()
    x = lib.device_put(np_.ones((8, 8)), d[1])
    a = np_.arange(10, device=d[1])
    mesh = sharding_mod.Mesh(d, axis_names=("i",))
    s = sharding_mod.NamedSharding(mesh, sharding_mod.PartitionSpec("i"))
    m = np_.asarray([1], device=d[2])
    return {
        "full_like_same_device": lax_.full_like(x, 1),
        "full_like_new_shape_one_device": lax_.full_like(x, 1.0, shape=()),
        "full_like_arange": lax_.full_like(a, 1, shape=(5,)),
        "full_like_uncommitted": lax_.full_like(np_.ones(3), 2),
        "full_like_weak": lax_.full_like(lib.device_put(1.0, d[3]), 2),
        "full_sharding": lax_.full((8,), 1.0, sharding=s),
        # a spec longer than the rank, its extra entries unsplit: JAX's lax.full accepts it
        "full_sharding_trailing_none": lax_.full((8,), 1.0, sharding=sharding_mod.NamedSharding(
            mesh, sharding_mod.PartitionSpec("i", None))),
        "full_like_sharding": lax_.full_like(lax_.iota("float32", 8), 1, sharding=s),
        "full_like_sharded_new_shape": lax_.full_like(lib.device_put(np_.ones(8), s), 1.0, shape=(3,)),
        "empty_mask": m[np_.asarray([False], device=d[2])],
        "mask": m[np_.asarray([True], device=d[2])],
    }


def test_creation_and_indexing_keep_committed_layout_as_jax():
    import jax.sharding as jsh

    import ftrans.sharding as fsh

    def describe(v):
        return v.shape, v._committed, sorted(dv.id for dv in v.devices())

    want = {k: describe(v) for k, v in _layouts(jax, jjnp, jlax, jsh).items()}
    got = {k: describe(v) for k, v in _layouts(ftrans, fjnp, flax, fsh).items()}
    assert got == want
