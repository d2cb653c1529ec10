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


@pytest.mark.parametrize("mesh_shape,spec", [((4,), ("x",)), ((2, 3), ("x", None)), ((2, 3), (None, "y")),
                                             ((4, 2), ("x", "y"))])
def test_random_bits_over_a_mesh_are_a_pure_map_as_jax(mesh_shape, spec):
    # JAX's RngShardingTest through the public API: the counters are made on the device (no constant of the
    # global shape), so XLA splits the bits with no communication; the bits are jax's.
    names = ("x", "y")[:len(mesh_shape)]
    shape = tuple(d * d for d in mesh_shape)
    n = int(np.prod(shape))
    gx = np.arange(n, dtype=np.uint32).reshape(shape)
    fm = ftrans.make_mesh(mesh_shape, names, devices=ftrans.devices()[:int(np.prod(mesh_shape))])
    x = ftrans.make_array_from_callback(shape, NamedSharding(fm, P(*spec)), lambda i: gx[i])

    def bits(k, s):
        return ftrans.random.bits(ftrans.random.wrap_key_data(k, impl="threefry2x32"), s, dtype=np.uint32)

    f = ftrans.jit(lambda v: bits(fjnp.array([0, 0], dtype="uint32"), v.shape) + v)
    dims = ",".join(map(str, shape))
    assert f"[{dims}]" in f.lower(x).as_text(dialect="hlo")
    opt = f.lower(x).compile().as_text()
    assert f"[{dims}]" not in opt and "all-reduce" not in opt and "collective-permute" not in opt
    with jax.threefry_partitionable(True):
        want = jax.random.bits(jax.random.wrap_key_data(jax.numpy.array([0, 0], dtype="uint32"),
                                                        impl="threefry2x32"), shape, dtype=np.uint32)
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(want) + gx)


def test_arrays_generated_from_iotas_stay_equations_in_nested_jits():
    # Constant folding keeps what is computed from iotas and broadcasts alone (XLA makes it on the device,
    # laid out as the program needs) rather than capturing it as a whole constant argument.
    f = ftrans.jit(lambda v: ftrans.lax.reshape(ftrans.lax.iota(np.uint32, 36), (4, 9)) + v)
    closed = ftrans.make_jaxpr(ftrans.jit(f))(np.zeros((4, 9), np.uint32))
    assert not closed.consts
    np.testing.assert_array_equal(np.asarray(f(np.zeros((4, 9), np.uint32))), np.arange(36).reshape(4, 9))
