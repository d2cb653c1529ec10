"""JAX's multi-device helpers on 8 host devices, against jax: ``experimental.mesh_utils``,
``experimental.multihost_utils`` (one process; tests/test_distributed.py runs two), and the rest of
``jax.sharding`` (``AbstractMesh``, ``AbstractDevice``, ``ManualAxisType``, ``use_abstract_mesh``, ``auto_axes``,
``explicit_axes``, ``make_single_device_sharding``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest
from jax.experimental import mesh_utils as jmu
from jax.experimental import multihost_utils as jmh

import ftrans
import ftrans.numpy as fjnp
from ftrans.experimental import mesh_utils as fmu
from ftrans.experimental import multihost_utils as fmh
from ftrans.sharding import AxisType, NamedSharding, P

JNS, JP = jax.sharding.NamedSharding, jax.sharding.PartitionSpec

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
HERE = os.path.abspath(__file__)


def ids(a):
    return np.vectorize(lambda d: d.id, otypes=[int])(a)


# ---------------------------------------------------------------- mesh_utils


@pytest.mark.parametrize("shape", [(8,), (2, 4), (4, 2), (2, 2, 2), (1, 8), [2, 4]])
def test_create_device_mesh_matches_jax(shape):
    got, want = fmu.create_device_mesh(shape), jmu.create_device_mesh(shape)
    assert got.shape == want.shape and got.dtype == object
    np.testing.assert_array_equal(ids(got), ids(want))


def test_create_device_mesh_of_given_devices_keeps_their_order():
    devs = ftrans.devices()[::-1][:4]
    jdevs = jax.devices()[::-1][:4]
    np.testing.assert_array_equal(ids(fmu.create_device_mesh((2, 2), devs)),
                                  ids(jmu.create_device_mesh((2, 2), jdevs)))
    np.testing.assert_array_equal(ids(fmu.create_device_mesh((2, 2), devs, contiguous_submeshes=True,
                                                             allow_split_physical_axes=True)), [[7, 6], [5, 4]])


@pytest.mark.parametrize("shape,match", [((3,), "must equal the product"), (("a",), "sequence of ints")])
def test_create_device_mesh_errors_match_jax(shape, match):
    with pytest.raises(ValueError, match=match):
        jmu.create_device_mesh(shape)
    with pytest.raises(ValueError, match=match) as info:
        fmu.create_device_mesh(shape)
    assert HERE in str(info.value)


def test_create_hybrid_device_mesh_matches_jax():
    got = fmu.create_hybrid_device_mesh((2, 4), (1, 1), process_is_granule=True)
    want = jmu.create_hybrid_device_mesh((2, 4), (1, 1), process_is_granule=True)
    np.testing.assert_array_equal(ids(got), ids(want))
    with pytest.raises(ValueError, match="slice_index"):
        jmu.create_hybrid_device_mesh((8,), (1,))
    with pytest.raises(ValueError, match="slice_index"):
        fmu.create_hybrid_device_mesh((8,), (1,))
    with pytest.raises(ValueError, match="Number of slices 1 must equal"):
        jmu.create_hybrid_device_mesh((4,), (2,), process_is_granule=True)
    with pytest.raises(ValueError, match="Number of slices 1 must equal"):
        fmu.create_hybrid_device_mesh((4,), (2,), process_is_granule=True)


class _FakeDevice:
    def __init__(self, i, granule):
        self.id, self.slice_index, self.platform, self.device_kind = i, granule, "cpu", "fake"


def test_hybrid_mesh_tiles_the_granules_as_jax():
    devs = [_FakeDevice(i, i // 4) for i in range(8)]
    got, want = fmu.create_hybrid_device_mesh((2, 2), (2, 1), devs), jmu.create_hybrid_device_mesh((2, 2), (2, 1), devs)
    np.testing.assert_array_equal(ids(got), ids(want))
    got, want = fmu.create_hybrid_device_mesh((1, 4), (1, 2), devs), jmu.create_hybrid_device_mesh((1, 4), (1, 2), devs)
    np.testing.assert_array_equal(ids(got), ids(want))


def test_device_kind_handler_is_consulted():
    calls = []

    def handler(shape, devices, contiguous_submeshes=False):
        calls.append(shape)
        return np.asarray(devices[::-1], dtype=object).reshape(shape)

    fmu.device_kind_handler_dict["fake"] = handler
    try:
        devs = [_FakeDevice(i, 0) for i in range(4)]
        np.testing.assert_array_equal(ids(fmu.create_device_mesh((4,), devs)), [3, 2, 1, 0])
        assert calls == [(4,)]
    finally:
        del fmu.device_kind_handler_dict["fake"]


# ---------------------------------------------------------------- multihost_utils (one process)

TREE = {"a": np.arange(6.0).reshape(2, 3), "b": 3, "c": [np.float32(2.5), np.arange(4, dtype=np.int32)]}


def _same(a, b):
    fa, ta = jax.tree_util.tree_flatten(a)
    fb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(fa, fb):
        assert type(x) is type(y) and x.shape == y.shape and x.dtype == y.dtype, (x, y)
        np.testing.assert_array_equal(x, y)


def test_broadcast_one_to_all_matches_jax():
    _same(fmh.broadcast_one_to_all(TREE), jmh.broadcast_one_to_all(TREE))
    _same(fmh.broadcast_one_to_all(TREE, is_source=False), jmh.broadcast_one_to_all(TREE, is_source=False))


@pytest.mark.parametrize("tiled", [False, True])
def test_process_allgather_matches_jax(tiled):
    _same(fmh.process_allgather(TREE, tiled=tiled), jmh.process_allgather(TREE, tiled=tiled))
    x = fjnp.arange(8.0)
    _same(fmh.process_allgather(x, tiled=tiled), jmh.process_allgather(jax.numpy.arange(8.0), tiled=tiled))


def test_sync_and_assert_equal_pass_in_one_process():
    assert fmh.sync_global_devices("step") is None and jmh.sync_global_devices("step") is None
    assert fmh.assert_equal(TREE, "same") is None and jmh.assert_equal(TREE, "same") is None
    assert fmh.reached_preemption_sync_point(3) is jmh.reached_preemption_sync_point(3) is False


@pytest.mark.parametrize("spec", [("x",), ("x", "y"), (), (None, "y"), (("x", "y"),)])
def test_host_local_to_global_and_back_matches_jax(spec):
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    local = np.arange(64.0).reshape(8, 8)
    g = fmh.host_local_array_to_global_array({"w": local}, fm, P(*spec))["w"]
    jg = jmh.host_local_array_to_global_array({"w": local}, jm, jax.sharding.PartitionSpec(*spec))["w"]
    assert g.shape == jg.shape and g.dtype == jg.dtype
    assert g.sharding == NamedSharding(fm, P(*spec))
    np.testing.assert_array_equal(np.asarray(g), np.asarray(jg))
    back = fmh.global_array_to_host_local_array(g, fm, P(*spec))
    jback = jmh.global_array_to_host_local_array(jg, jm, jax.sharding.PartitionSpec(*spec))
    assert back is g and jback is jg  # fully addressable: returned as is, in both


def test_host_local_to_global_inside_jit_is_the_value():
    fm = ftrans.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    out = ftrans.jit(lambda a: fmh.host_local_array_to_global_array(a * 2, fm, P("x")))(np.arange(8.0))
    np.testing.assert_array_equal(np.asarray(out), np.arange(8.0) * 2)


def test_none_pspec_is_an_error_as_in_jax():
    fm = ftrans.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    jm = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    with pytest.raises(ValueError, match="`None` is not a valid input to the pspecs"):
        jmh.host_local_array_to_global_array(np.arange(8.0), jm, None)
    with pytest.raises(ValueError, match="`None` is not a valid input to the pspecs"):
        fmh.host_local_array_to_global_array(np.arange(8.0), fm, None)


# ---------------------------------------------------------------- jax.sharding's other names


def test_abstract_mesh_matches_jax():
    from ftrans.sharding import AbstractMesh

    am = AbstractMesh((2, 4), ("x", "y"), (AxisType.Explicit, AxisType.Auto))
    jam = jax.sharding.AbstractMesh((2, 4), ("x", "y"), (jax.sharding.AxisType.Explicit,
                                                            jax.sharding.AxisType.Auto))
    assert repr(am) == repr(jam)
    assert am.shape == dict(jam.shape) and am.size == jam.size and am.shape_tuple == jam.shape_tuple
    assert am.explicit_axes == jam.explicit_axes and am.auto_axes == jam.auto_axes
    assert am == AbstractMesh((2, 4), ("x", "y"), (AxisType.Explicit, AxisType.Auto)) and hash(am) == hash(
        AbstractMesh((2, 4), ("x", "y"), (AxisType.Explicit, AxisType.Auto)))
    up = am.update_axis_types({"x": AxisType.Auto})
    jup = jam.update_axis_types({"x": jax.sharding.AxisType.Auto})
    assert repr(up) == repr(jup)
    for what in ("devices", "device_ids", "local_mesh"):
        with pytest.raises(ValueError):
            getattr(jam, what)
        with pytest.raises(ValueError):
            getattr(am, what)
    fm = ftrans.make_mesh((2, 4), ("x", "y"))
    jm = jax.make_mesh((2, 4), ("x", "y"))
    assert repr(fm.abstract_mesh) == repr(jm.abstract_mesh)
    assert repr(fm.abstract_mesh.abstract_device) == repr(jm.abstract_mesh.abstract_device)


def test_printed_meshes_and_shardings_match_jax():
    """What JAX's sharding docs print: a mesh (repr and str), shardings (with their memory kind) and specs."""
    def texts(lib, arr):
        m = lib.make_mesh((2, 4), ("x", "y"))
        m1 = lib.make_mesh((8,), ("x",), axis_types=(lib.sharding.AxisType.Auto,))
        p = lib.sharding.PartitionSpec
        ns = lib.sharding.NamedSharding(m, p("x", None))
        sd = lib.sharding.SingleDeviceSharding(lib.devices()[0])
        put = lib.device_put(arr, lib.sharding.NamedSharding(m1, p("x")))
        return [repr(m), str(m), repr(m1), repr(ns), str(ns), repr(sd), str(sd), repr(put.sharding),
                ns.memory_kind, sd.memory_kind, repr(p()), repr(p("x")), repr(p(None)), repr(p("x", ("x", "y")))]

    assert texts(ftrans, fjnp.arange(8.0)) == texts(jax, jax.numpy.arange(8.0))
    with pytest.raises(NotImplementedError, match="memory_kind='pinned_host'"):
        NamedSharding(ftrans.make_mesh((8,), ("x",)), P("x"), memory_kind="pinned_host")


def test_use_abstract_mesh_sets_get_abstract_mesh():
    from ftrans.sharding import AbstractMesh, get_abstract_mesh, use_abstract_mesh

    am = AbstractMesh((8,), ("x",))
    with use_abstract_mesh(am):
        assert get_abstract_mesh() == am
    jam = jax.sharding.AbstractMesh((8,), ("x",))
    with jax.sharding.use_abstract_mesh(jam):
        assert jax.sharding.get_abstract_mesh() == jam
    with pytest.raises(TypeError):
        with use_abstract_mesh("x"):
            pass


def test_manual_axis_type_matches_jax():
    from ftrans.sharding import ManualAxisType

    m = ManualAxisType(varying={"x"}, reduced={"y"})
    jm = jax.sharding.ManualAxisType(varying=frozenset({"x"}), reduced=frozenset({"y"}))
    def jrepr(x):  # jax 0.11's repr adds the unreduced_kind, which ftrans's unreduced axes (sums) do not have
        return re.sub(r", unreduced_kind=[\w.]+", "", repr(x))

    assert repr(m) == jrepr(jm) and m.vur == jm.vur
    assert repr(m.to_ct_mat()) == jrepr(jm.to_ct_mat())
    assert ManualAxisType().empty
    with pytest.raises(ValueError, match="varying and unreduced cannot have common mesh axes"):
        jax.sharding.ManualAxisType(varying=frozenset({"x"}), unreduced=frozenset({"x"}))
    with pytest.raises(ValueError, match="varying and unreduced cannot have common mesh axes"):
        ManualAxisType(varying={"x"}, unreduced={"x"})


def test_make_single_device_sharding():
    from ftrans.sharding import SingleDeviceSharding, make_single_device_sharding

    d = ftrans.devices()[3]
    s = make_single_device_sharding(d)
    assert s == SingleDeviceSharding(d) and s.device_set == jax.sharding.SingleDeviceSharding(
        jax.devices()[3]).device_set
    x = ftrans.device_put(np.arange(4.0), s)
    assert x.devices() == {d}


def test_auto_and_explicit_axes_give_jax_values_and_layouts():
    from ftrans.sharding import auto_axes, explicit_axes, set_mesh

    fm = ftrans.make_mesh((2, 4), ("x", "y"))
    jm = jax.make_mesh((2, 4), ("x", "y"))
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4)

    def f(a):
        return a * 2 + 1

    with jax.set_mesh(jm):
        jx = jax.device_put(x, jax.sharding.PartitionSpec("x"))
        jout = jax.jit(lambda a: jax.sharding.auto_axes(f, out_sharding=jax.sharding.PartitionSpec("y"))(a))(jx)
        jout2 = jax.jit(lambda a: jax.sharding.explicit_axes(f, in_sharding=jax.sharding.PartitionSpec("x"))(a))(jx)
    with set_mesh(fm):
        fx = ftrans.device_put(x, NamedSharding(fm, P("x")))
        out = ftrans.jit(lambda a: auto_axes(f, out_sharding=P("y"))(a))(fx)
        out2 = ftrans.jit(lambda a: explicit_axes(f, in_sharding=P("x"))(a))(fx)
        eager = auto_axes(f)(fx, out_sharding=P("y"))
    for a, b in ((out, jout), (out2, jout2), (eager, jout)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert out.sharding.spec == P(*jout.sharding.spec) == P("y")
    with pytest.raises(TypeError, match="Missing required keyword argument: 'out_sharding'"):
        auto_axes(f)(x)
    with pytest.raises(ValueError, match="Context mesh cannot be empty"):
        explicit_axes(f, in_sharding=P("x"))(x)
    np.testing.assert_array_equal(np.asarray(auto_axes(f, out_sharding=P())(x)), f(x))  # no mesh: a plain call


# ---------------------------------------------------------------- Mesh and Sharding attributes


def test_mesh_attributes_match_jax():
    types = (AxisType.Explicit, AxisType.Auto)
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=types)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto))
    for name in ("shape_tuple", "auto_axes", "explicit_axes", "manual_axes", "are_all_axes_auto",
                 "are_all_axes_explicit", "are_all_axes_manual", "is_scalar", "is_multi_process"):
        assert getattr(fm, name) == getattr(jm, name), name
    assert [d.id for d in fm.local_devices] == [d.id for d in jm.local_devices]
    np.testing.assert_array_equal(ids(fm.local_mesh.devices), ids(jm.local_mesh.devices))
    assert fm.local_mesh.axis_names == jm.local_mesh.axis_names
    up, jup = fm.update(axis_names=("a", "b")), jm.update(axis_names=("a", "b"))
    assert up.axis_names == jup.axis_names and [t.name for t in up.axis_types] == [t.name for t in jup.axis_types]


@pytest.mark.parametrize("spec", [("x",), ("x", "y"), (None, "y"), ()])
def test_named_sharding_attributes_match_jax(spec):
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    fs, js = NamedSharding(fm, P(*spec)), jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec(*spec))
    assert {d.id for d in fs.addressable_devices} == {d.id for d in js.addressable_devices}
    assert fs.is_fully_addressable == js.is_fully_addressable and fs.has_addressable_devices
    assert fs.replicated_axes == js.replicated_axes
    fmap = {d.id: i for d, i in fs.addressable_devices_indices_map((8, 8)).items()}
    jmap = {d.id: i for d, i in js.addressable_devices_indices_map((8, 8)).items()}
    assert fmap == jmap
    assert fs.is_equivalent_to(fs.update(spec=P(*spec, None)), 2)
    assert js.is_equivalent_to(js.update(spec=jax.sharding.PartitionSpec(*spec, None)), 2)
    other = P("y") if spec != ("y",) else P("x")
    assert fs.is_equivalent_to(fs.update(spec=other), 2) == js.is_equivalent_to(
        js.update(spec=jax.sharding.PartitionSpec(*other)), 2)
    assert fs.with_memory_kind("device") == fs
    if len(spec) > 1:  # a spec longer than the rank
        with pytest.raises(ValueError):
            js.check_compatible_aval((8,))
        with pytest.raises(ValueError):
            fs.check_compatible_aval((8,))
    fs.check_compatible_aval((8, 8))
    js.check_compatible_aval((8, 8))


def test_single_device_sharding_attributes_match_jax():
    from ftrans.sharding import SingleDeviceSharding

    fs, js = SingleDeviceSharding(ftrans.devices()[2]), jax.sharding.SingleDeviceSharding(jax.devices()[2])
    assert {d.id for d in fs.addressable_devices} == {d.id for d in js.addressable_devices}
    assert fs.is_fully_addressable and js.is_fully_addressable
    fmap = {d.id: i for d, i in fs.addressable_devices_indices_map((4, 2)).items()}
    assert fmap == {d.id: i for d, i in js.addressable_devices_indices_map((4, 2)).items()}
    fm = ftrans.make_mesh((1,), ("x",), devices=[ftrans.devices()[2]])
    assert fs.is_equivalent_to(NamedSharding(fm, P("x")), 1)


def test_array_shard_accessors_match_jax():
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    for fa, ja in ((fjnp.asarray(x), jax.numpy.asarray(x)),
                   (ftrans.device_put(x, ftrans.devices()[1]), jax.device_put(x, jax.devices()[1]))):
        assert len(fa.addressable_shards) == len(ja.addressable_shards) == 1
        assert fa.addressable_shards[0].index == ja.addressable_shards[0].index
        np.testing.assert_array_equal(np.asarray(fa.addressable_data(0)), np.asarray(ja.addressable_data(0)))
        assert fa.is_fully_replicated == ja.is_fully_replicated and fa.is_fully_addressable
    fm = ftrans.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    jm = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    fs = ftrans.device_put(x, NamedSharding(fm, P("x")))
    js = jax.device_put(x, jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec("x")))
    np.testing.assert_array_equal(np.asarray(fs.addressable_data(3)), np.asarray(js.addressable_data(3)))
    assert fs.is_fully_replicated == js.is_fully_replicated is False
    assert fs.is_fully_addressable and js.is_fully_addressable


def test_grad_of_a_jitted_shard_map_matches_jax():
    """grad(jit(shard_map(f))): the known half of the linearized call holds the shard_map and must run
    partitioned (it used to be compiled for one device and fail)."""
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = np.arange(32.0, dtype=np.float32).reshape(4, 8) / 10
    w = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)

    def body(lax):
        def f(a):
            return lax.psum(jax.numpy.sin(a) if lax is jax.lax else fjnp.sin(a), "y") * \
                lax.all_to_all(a, "x", 1, 1, tiled=True)
        return f

    jf = jax.jit(jax.shard_map(body(jax.lax), mesh=jm, in_specs=jax.sharding.PartitionSpec("x", "y"),
                               out_specs=jax.sharding.PartitionSpec("x", "y")))
    ff = ftrans.jit(ftrans.shard_map(body(ftrans.lax), mesh=fm, in_specs=P("x", "y"), out_specs=P("x", "y")))
    want = jax.grad(lambda a: (jf(a) * w).sum())(x)
    got = ftrans.grad(lambda a: (ff(a) * w).sum())(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    val, vjp = ftrans.vjp(ff, x)
    jval, jvjp = jax.vjp(jf, x)
    np.testing.assert_allclose(np.asarray(val), np.asarray(jval), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vjp(w)[0]), np.asarray(jvjp(w)[0]), rtol=1e-5, atol=1e-6)


def test_deprecated_pjit_is_jit_with_shardings():
    from jax.experimental import pjit as jpjit_mod

    from ftrans.experimental import pjit as fpjit_mod

    with warnings.catch_warnings():  # (jax warns on the first access in a process only: another test may have
        warnings.simplefilter("ignore")  # made it)
        jpjit = jpjit_mod.pjit
    with pytest.warns(DeprecationWarning, match="pjit has been deprecated"):
        fpjit = fpjit_mod.pjit
    fm = ftrans.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    jm = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    x = np.arange(16.0, dtype=np.float32)
    jo = jpjit(lambda a: a * 2, in_shardings=JNS(jm, JP("x")), out_shardings=JNS(jm, JP()))(x)
    fo = fpjit(lambda a: a * 2, in_shardings=NamedSharding(fm, P("x")), out_shardings=NamedSharding(fm, P()))(x)
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    assert fo.sharding == NamedSharding(fm, P()) and jo.sharding.is_fully_replicated


def test_named_sharding_over_an_abstract_mesh_uses_the_current_mesh():
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    with jax.set_mesh(jm):
        jo = jax.jit(lambda a: jax.lax.with_sharding_constraint(
            a * 2, JNS(jax.sharding.get_abstract_mesh(), JP("y"))))(x)
    with ftrans.sharding.set_mesh(fm):
        s = NamedSharding(fm.abstract_mesh, P("y"))
        assert s.mesh is fm
        fo = ftrans.jit(lambda a: ftrans.lax.with_sharding_constraint(a * 2, s))(x)
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    assert fo.sharding.spec == P(*jo.sharding.spec)
    # with no mesh current, it keeps the abstract mesh (as JAX's, a layout for export) and asks for one only
    # where it needs devices
    s = NamedSharding(fm.abstract_mesh, P("y"))
    assert s.mesh == fm.abstract_mesh and s.memory_kind is None
    assert repr(s) == repr(JNS(jm.abstract_mesh, JP("y")))
    with pytest.raises(ValueError, match="needs a current mesh with the same axes"):
        s.device_set


def test_jax_abstract_mesh_is_accepted_as_ftrans_one():
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jam = jax.sharding.AbstractMesh((2, 4), ("x", "y"), (jax.sharding.AxisType.Auto,) * 2)
    with ftrans.sharding.set_mesh(fm):
        assert NamedSharding(jam, P("x")).mesh is fm


def test_shard_map_over_an_abstract_mesh_uses_the_current_mesh():
    fm = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    with jax.set_mesh(jm):
        jo = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "y"), mesh=jm.abstract_mesh, in_specs=JP("x", "y"),
                                   out_specs=JP("x")))(x)
    with ftrans.sharding.set_mesh(fm):
        fo = ftrans.jit(ftrans.shard_map(lambda a: ftrans.lax.psum(a, "y"), mesh=fm.abstract_mesh,
                                         in_specs=P("x", "y"), out_specs=P("x")))(x)
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    # called outside jit on arrays laid out over no mesh: JAX's error (its devices come from the arguments)
    for lib, m, spec in ((ftrans, fm, P), (jax, jm, JP)):
        with pytest.raises(ValueError, match="Please pass `jax.Array`s with a `NamedSharding` as input"):
            lib.shard_map(lambda a: a, mesh=m.abstract_mesh, in_specs=spec("x"), out_specs=spec("x"))(x)


def test_programs_recompiled_after_the_runtime_clears_its_backends():
    """After JAX's ``clear_backends`` (the runtime's clients are new, their devices new objects), a pmap and a
    jit compiled before run again, on the new devices in JAX's order (jax-ml/jax
    testDefaultDeviceOrderingAfterClearBackends). In a fresh process: clearing the backends would strand
    other tests' device arrays."""
    code = """
import numpy as np, jax, jax.extend.backend as jb, ftrans
f = ftrans.pmap(lambda x: x)
g = ftrans.jit(lambda x: x + 1)
n = ftrans.device_count()
before = f(np.arange(n)).sharding._device_assignment; g(np.arange(3))
d0 = ftrans.devices()[0]; ftrans.device_put(1.0, d0)
jb.clear_backends()
out = ftrans.pmap(lambda x: x)(np.arange(n))
assert list(out.sharding._device_assignment) == jax.devices() == ftrans.devices()
assert np.asarray(out).tolist() == list(range(n))
assert np.asarray(f(np.arange(n))).tolist() == list(range(n))
assert np.asarray(g(np.arange(3))).tolist() == [1, 2, 3]
assert ftrans.device_put(1.0).devices() == {jax.devices()[0]}
print("ok")
"""
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.split()[-1:] == ["ok"], out.stderr[-2000:]
