"""Arrays and shardings as JAX's ``array_test.py`` checks them, against jax on 8 host devices: equal meshes and
partition specs made over again are one object, a sharding over an abstract mesh is equivalent to an equal one
and keeps JAX's memory kinds, and ``np.dtype(array)`` is deprecated with JAX's warning."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import AbstractMesh, Mesh, NamedSharding, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def test_equal_meshes_are_one_object_as_jax():
    assert jax.sharding.Mesh(jax.devices(), "x") is jax.sharding.Mesh(jax.devices(), "x")
    m1, m2 = Mesh(ftrans.devices(), "x"), Mesh(ftrans.devices(), "x")
    assert m1 is m2
    assert Mesh(np.array(ftrans.devices()).reshape(2, 4), ("x", "y")) is not m1  # another shape: another mesh
    assert Mesh(ftrans.devices()[:4], "x") is not m1
    with pytest.raises(ValueError):  # the constructor's checks still run for new arguments
        Mesh(ftrans.devices(), ("x", "y"))


def test_equal_partition_specs_are_one_object_as_jax():
    jp = jax.sharding.PartitionSpec
    assert jp(None, "x", "y") is jp((), "x", "y")
    assert P(None, "x", "y", "z") is P((), "x", "y", "z")
    assert hash(P(None, "x")) == hash(P((), "x")) and P("x", None) == P("x")
    assert len(P("x", None)) == 2 and len(P("x")) == 1  # (not interned together: their entries differ)
    assert P("x", unreduced={"y"}) == P("x", unreduced={"y"})


def test_sharding_over_an_abstract_mesh_is_equivalent_to_an_equal_one():
    for mesh, ns, p in [(jax.make_mesh((2,), "x", devices=jax.devices()[:2]), jax.sharding.NamedSharding,
                         jax.sharding.PartitionSpec),
                        (ftrans.make_mesh((2,), "x", devices=ftrans.devices()[:2]), NamedSharding, P)]:
        s1, s2 = ns(mesh.abstract_mesh, p("x")), ns(mesh.abstract_mesh, p("x"))
        assert s1 == s2 and s1.is_equivalent_to(s2, 2)


def test_memory_kinds_of_a_sharding_over_an_abstract_mesh_as_jax():
    for am, ns, p in [(jax.sharding.AbstractMesh((2,), ("x",)), jax.sharding.NamedSharding, jax.sharding.PartitionSpec),
                      (AbstractMesh((2,), ("x",)), NamedSharding, P)]:
        assert ns(am, p(), memory_kind="pinned_host").memory_kind == "pinned_host"
        assert ns(am, p()).memory_kind is None
        with pytest.raises(ValueError, match="Got invalid memory kind"):
            ns(am, p(), memory_kind="weird_device")


def test_np_dtype_of_an_array_is_deprecated_as_jax():
    msg = "Implicit conversion of an array to a dtype is deprecated"
    for x in (jax.numpy.arange(4), fjnp.arange(4)):
        with pytest.warns(DeprecationWarning, match=msg):
            assert np.dtype(x) == np.int32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fjnp.result_type(fjnp.arange(4), 1.0) == np.float32  # ftrans's own uses stay quiet
