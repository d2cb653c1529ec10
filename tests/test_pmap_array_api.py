"""The jax.Array API on pmap results and other multi-device arrays, checked against jax on 8 host devices:
the mesh axis of a pmap result's sharding (named after the pmap's axis, as JAX's), device_put_sharded of
arrays already on their devices (no trip through the host), the per-device arrays (``_arrays``), the
host copy (``_npy_value``), deletion checks, ``is_ready``, ``_fully_replicated_shard``, the XLA/Shardy
views of a sharding, iteration keeping rows on their devices, and make_array_from_* argument checks."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import Mesh as FMesh
from ftrans.sharding import NamedSharding as FNamed
from ftrans.sharding import PartitionSpec as FP

FD, JD = ftrans.devices(), jax.devices()
X = np.arange(16, dtype=np.float32).reshape(8, 2)


@pytest.mark.parametrize("axis_name", ["i", None])
@pytest.mark.parametrize("out_axes", [0, 1])
@pytest.mark.needs_devices(8)
def test_pmap_result_sharding_names_the_axis(axis_name, out_axes):
    f = ftrans.pmap(lambda x: x * 2, axis_name=axis_name, out_axes=out_axes)(X)
    j = jax.pmap(lambda x: x * 2, axis_name=axis_name, out_axes=out_axes)(X)
    assert tuple(f.sharding.spec) == tuple(j.sharding.spec)
    assert tuple(f.sharding.mesh.axis_names) == tuple(j.sharding.mesh.axis_names)
    np.testing.assert_array_equal(np.asarray(f), np.asarray(j))


@pytest.mark.needs_devices(8)
def test_pmap_result_passes_to_another_axis_name_in_place():
    y = ftrans.pmap(lambda x: x + 1, axis_name="i")(X)
    g = ftrans.pmap(lambda x: x * 3, axis_name="j")
    g(y)
    with jax.transfer_guard("disallow"):  # split the same way: used where it is, whatever the axis is called
        out = g(y)
    np.testing.assert_array_equal(np.asarray(out), (X + 1) * 3)
    assert tuple(out.sharding.spec) == ("j",)


@pytest.mark.needs_devices(8)
def test_device_put_sharded_of_arrays_on_their_devices_stays_on_device():
    inp = fjnp.arange(8)
    parts = [ftrans.device_put(i, d) for i, d in zip(inp, FD)]
    with jax.transfer_guard("disallow_explicit"):
        y = ftrans.device_put_sharded(parts, FD)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8))
    assert [s.device for s in y.addressable_shards] == FD
    assert tuple(y.sharding.spec) == ("_device_put_sharded",)
    r = ftrans.device_put_replicated(np.arange(3), FD[:2])
    assert tuple(r.sharding.spec) == ("_device_put_replicated",)


@pytest.mark.needs_devices(8)
def test_arrays_npy_value_and_deletion():
    y = ftrans.device_put_replicated(np.arange(1, 5), FD)
    bufs = y._arrays
    assert len(bufs) == len(FD) and all(b.devices() == {d} for b, d in zip(bufs, FD))
    # the per-device arrays reassemble, in another device order, as JAX's test of pmap does
    z = ftrans.pmap(lambda x: x * 2, axis_name="i")(X)
    rev = z._arrays[::-1]
    devs = [next(iter(b.devices())) for b in rev]
    s = FNamed(FMesh(np.array(devs), ("i",)), z.sharding.spec)
    w = ftrans.make_array_from_single_device_arrays(z.shape, s, rev)
    out = ftrans.pmap(lambda x: x + 1, axis_name="i", devices=devs)(w)
    np.testing.assert_array_equal(np.asarray(out), 2 * X[::-1] + 1)

    a = ftrans.device_put(np.arange(3), FD[1])
    assert a._npy_value is None  # not fetched yet
    np.asarray(a)
    np.testing.assert_array_equal(a._npy_value, np.arange(3))
    assert a.is_ready() is True and fjnp.arange(3).is_ready() is True
    a._check_if_deleted()
    a.delete()
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        a._check_if_deleted()
    assert a._npy_value is None and a._arrays is None


@pytest.mark.needs_devices(8)
def test_fully_replicated_shard_and_hlo_sharding():
    fm = FMesh(np.array(FD).reshape(4, 2), ("x", "y"))
    jm = jax.sharding.Mesh(np.array(JD).reshape(4, 2), ("x", "y"))
    a = ftrans.device_put(X, FNamed(fm, FP()))
    fs = a._fully_replicated_shard()
    assert fs.shape == X.shape and fs.sharding.num_devices == 1
    np.testing.assert_array_equal(np.asarray(fs), X)
    for spec in [("y", "x"), ("x",), (None, "y"), (("x", "y"),), ()]:
        f = FNamed(fm, FP(*spec))._to_xla_hlo_sharding(2)
        j = jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec(*spec))._to_xla_hlo_sharding(2)
        assert f == j, spec
        assert str(FNamed(fm, FP(*spec))._to_sdy_sharding(2)) == str(
            jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec(*spec))._to_sdy_sharding(2))


@pytest.mark.needs_devices(8)
def test_iteration_keeps_rows_where_the_array_is():
    fm = FMesh(np.array(FD).reshape(4, 2), ("x", "y"))
    rep = ftrans.device_put(X, FNamed(fm, FP()))
    rows = list(rep)
    assert all(len(r.sharding.device_set) == 8 for r in rows)
    np.testing.assert_array_equal(np.stack([np.asarray(r) for r in rows]), X)
    one = ftrans.device_put(np.arange(4), FD[3])
    assert [r.devices() for r in one] == [{FD[3]}] * 4
    jone = jax.device_put(np.arange(4), JD[3])
    assert [{d.id for d in r.devices()} for r in jone] == [{3}] * 4


def test_make_array_from_process_local_data_on_a_device():
    data = {"a": np.arange(10).reshape(2, 5)}
    for gs in [None, (2, 5), {"a": (2, 5)}]:
        f = ftrans.make_array_from_process_local_data(FD[0], data, gs)
        j = jax.make_array_from_process_local_data(JD[0], data, gs)
        np.testing.assert_array_equal(np.asarray(f["a"]), np.asarray(j["a"]))
    for gs in [(2, 8), {"a": (2, 6)}]:
        with pytest.raises(ValueError):
            jax.make_array_from_process_local_data(JD[0], data, gs)
        with pytest.raises(ValueError):
            ftrans.make_array_from_process_local_data(FD[0], data, gs)


@pytest.mark.needs_devices(8)
def test_make_array_from_single_device_arrays_checks_its_arrays():
    fm = FMesh(np.array(FD[:2]), ("x",))
    x = ftrans.device_put(fjnp.arange(10), FNamed(fm, FP("x")))
    with pytest.raises(ValueError, match=r"must have one shard each. An argument array had 2 shard\(s\)"):
        ftrans.make_array_from_single_device_arrays(x.shape, x.sharding, [x, x])
    with pytest.raises(TypeError, match="`arrays` argument"):
        ftrans.make_array_from_single_device_arrays(x.shape, x.sharding, x)
    a = ftrans.device_put(np.arange(4), FD[0])
    with pytest.raises(ValueError, match="it must match the dtype of the addressable shards"):
        ftrans.make_array_from_single_device_arrays((4,), a.sharding, [a], dtype=np.float32)
    ok = ftrans.make_array_from_single_device_arrays((4,), a.sharding, [a], dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(ok), np.arange(4))
    with pytest.raises(ValueError, match="requires a list of concrete arrays"):
        ftrans.jit(lambda v: ftrans.make_array_from_single_device_arrays(v.shape, a.sharding, [v]))(a)


@pytest.mark.needs_devices(8)
def test_jit_capturing_a_sharded_array():
    fy = ftrans.pmap(lambda v: v * 2, axis_name="i")(X[:, 0])
    jy = jax.pmap(lambda v: v * 2, axis_name="i")(X[:, 0])
    fo, jo = ftrans.jit(lambda z: z + fy)(7), jax.jit(lambda z: z + jy)(7)
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))  # (JAX puts this result on one device)
    fm = FMesh(np.array(FD), ("a",))
    fw = ftrans.device_put(X[:, 0], FNamed(fm, FP("a")))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda z: z * fw)(2.0)), X[:, 0] * 2)


@pytest.mark.needs_devices(8)
def test_shape_dtype_struct_like_keeps_a_committed_arrays_sharding():
    for lib, jnp, devs in ((ftrans, fjnp, FD), (jax, jax.numpy, JD)):
        assert lib.ShapeDtypeStruct.like(jnp.arange(8)).sharding is None  # uncommitted
        s = lib.ShapeDtypeStruct.like(lib.device_put(jnp.arange(8), devs[2])).sharding
        assert s.device_set == {devs[2]}
        mesh = lib.sharding.Mesh(np.array(devs[:2]), ("x",))
        x = lib.device_put(jnp.arange(8), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x")))
        assert tuple(lib.ShapeDtypeStruct.like(x).sharding.spec) == ("x",)


def test_empty_mesh_and_partition_spec_errors():
    for lib in (ftrans, jax):
        mesh = lib.sharding.Mesh(devices=np.empty((), dtype=object), axis_names=[])
        assert mesh.empty and mesh.size == 0
        assert mesh.abstract_mesh.empty and mesh.abstract_mesh.size == 0
        with pytest.raises(ValueError, match="A tuple inside PartitionSpec cannot contain a nested tuple"):
            lib.P("x", "y", ("z", ("a",)))
        with pytest.raises(TypeError, match="Subclassing `jax.P` is prohibited"):
            type("MyP", (lib.P,), {})


@pytest.mark.needs_devices(8)
def test_make_array_from_callback_errors():
    fm = FMesh(np.array(FD).reshape(4, 2), ("x", "y"))
    with pytest.raises(ValueError, match=r"Expected shard shape \(2, 4\) doesn't match the single device array shape"):
        ftrans.make_array_from_callback((8, 4), FNamed(fm, FP("x")), lambda idx: np.arange(5))
    s = FNamed(FMesh(np.array(FD[:2]), ("x",)), FP("x"))
    f = lambda a: ftrans.make_array_from_callback(a.shape, s, lambda i: a[i])  # noqa: E731
    np.testing.assert_array_equal(np.asarray(f(fjnp.arange(4))), np.arange(4))
    with pytest.raises(ftrans.errors.UnexpectedTracerError, match="cannot be called within a traced context"):
        ftrans.jit(f)(fjnp.arange(4))


def _layout(o):
    return (o.shape, tuple(o.sharding.spec), tuple(o.sharding.mesh.axis_names), o.is_fully_replicated,
            [(s.device.id, s.index, s.replica_id) for s in o.addressable_shards])


@pytest.mark.parametrize("case", ["psum_out_none", "out1", "four", "devices", "getitem"])
@pytest.mark.needs_devices(8)
def test_pmap_result_shards_match_jax(case):
    outs = []
    for lib in (ftrans, jax):
        devs = lib.devices()
        if case == "psum_out_none":
            o = lib.pmap(lambda v, lib=lib: lib.lax.psum(v, "i"), axis_name="i", out_axes=None)(X)
        elif case == "out1":
            o = lib.pmap(lambda v: v, axis_name="i", out_axes=1)(X)
        elif case == "four":
            o = lib.pmap(lambda v: v)(X[:4])
        elif case == "devices":
            o = lib.pmap(lambda v: v, devices=devs[4:])(X[:4])
        else:
            o = lib.pmap(lambda v: v * 2)(X)[1:3]
        outs.append(_layout(o))
    assert outs[0] == outs[1]


@pytest.mark.needs_devices(8)
def test_uneven_layouts_are_refused_as_jax():
    fm = FMesh(np.array(FD).reshape(4, 2), ("x", "y"))
    jm = jax.sharding.Mesh(np.array(JD).reshape(4, 2), ("x", "y"))
    fs, js = FNamed(fm, FP("x", "y")), jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec("x", "y"))
    for shape in [(8, 3), (1, 2)]:
        for call in ("shard_shape", "devices_indices_map"):
            with pytest.raises(ValueError, match="should evenly divide the shape"):
                getattr(js, call)(shape)
            with pytest.raises(ValueError, match="should evenly divide the shape"):
                getattr(fs, call)(shape)
    assert fs.shard_shape((8, 4)) == js.shard_shape((8, 4))


def test_pmap_compiled_type_mismatch_says_what_jax_says():
    x = np.ones((1, 4), np.float32)
    for lib in (ftrans, jax):
        c = lib.pmap(lambda v: v + 1).lower(x).compile()
        with pytest.raises(TypeError, match=r"Argument types differ .*The mismatches are:\nArgument 'flat_args\[0\]' "
                                            r"compiled with float32\[1,4\] and called with int32\[1,4\]"):
            c(x.astype(np.int32))
