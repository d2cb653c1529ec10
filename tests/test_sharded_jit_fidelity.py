"""Sharded ``jit`` against jax on 8 CPU devices: lowering over an ``AbstractMesh`` (``lowering_platforms`` and
``compile(device_assignment=)``), eager ``vmap`` of sharded programs, ``vmap`` over arrays split on Explicit axes,
``out_sharding=`` of the segment reductions, ``bincount`` and ``percentile``, mixed Explicit/Auto meshes, and
JAX's errors for operands over another mesh, scans over split xs and manual-to-auto retyping."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def _libs():
    return ((ftrans, fnp, ftrans.sharding), (jax, jax.numpy, jax.sharding))


def _mesh(lib, shape, names, types, devices=None):
    sh = lib.sharding
    t = tuple(getattr(sh.AxisType, n) for n in types)
    devs = np.array(devices if devices is not None else lib.devices()[:int(np.prod(shape))]).reshape(shape)
    return sh.Mesh(devs, names, axis_types=t)


def _spec(s):
    """A PartitionSpec's entries less trailing Nones (the two libraries may state those differently)."""
    t = list(s)
    while t and t[-1] is None:
        t.pop()
    return tuple(t)


def _shard_data(arr):
    return [np.asarray(s.data) for s in sorted(arr.addressable_shards, key=lambda s: s.device.id)]


# ----------------------------------------------------------------------------------------------- AbstractMesh


def test_trace_lower_over_abstract_mesh_matches_jax():
    """``trace(sds over an AbstractMesh).lower(lowering_platforms=)`` is a module of the mesh's partitions with
    the argument's sharding, ``compile(device_assignment=)`` runs it on those devices, as JAX's."""
    outs = {}
    for lib, _, sh in _libs():
        mesh = _mesh(lib, (2, 1), ("x", "y"), ("Auto", "Auto"))
        sds = lib.ShapeDtypeStruct((8, 2), np.float32, sharding=sh.NamedSharding(mesh.abstract_mesh, sh.PartitionSpec("x")))
        lowered = lib.jit(lambda x: x * 2).trace(sds).lower(lowering_platforms=("cpu",))
        text = lowered.as_text()
        assert "mhlo.num_partitions = 2" in text
        assert '"x"' in text
        with pytest.raises(RuntimeError, match="device_assignment cannot be `None` during compilation"):
            lowered.compile()
        if lib is jax and jax.__version_info__ < (0, 11):  # jax 0.10's error; ftrans raises jax 0.11's
            err, msg = ValueError, "The size of abstract mesh 2.*must match the length of device"
        else:
            err, msg = RuntimeError, r"Length of device_assignment \(1\) passed to `.compile\(\)` must be equal"
        with pytest.raises(err, match=msg):
            lowered.compile(device_assignment=(lib.devices()[0],))
        compiled = lowered.compile(device_assignment=tuple(mesh.devices.flat))
        arr = lib.device_put(np.arange(16, dtype=np.float32).reshape(8, 2), sh.NamedSharding(mesh, sh.PartitionSpec("x")))
        out = compiled(arr)
        outs[lib.__name__] = (np.asarray(out), _spec(out.sharding.spec))
    np.testing.assert_array_equal(outs["ftrans"][0], outs["jax"][0])
    assert outs["ftrans"][1] == outs["jax"][1] == ("x",)


def test_abstract_mesh_context_sets_partitions_and_mismatch_errors():
    """Under ``use_abstract_mesh`` a program with no sharded argument is lowered for the mesh's partitions;
    an argument over an abstract mesh of another size is JAX's ValueError, and ``jit.lower`` of only abstract
    shardings asks for ``lowering_platforms``."""
    for lib, lnp, sh in _libs():
        am = sh.AbstractMesh((2,), ("x",), axis_types=(sh.AxisType.Explicit,))
        f = lib.jit(lambda x: x * 2)
        with sh.use_abstract_mesh(am):
            text = f.trace(lib.ShapeDtypeStruct((8, 2), np.float32)).lower(lowering_platforms=("cpu",)).as_text()
        assert "mhlo.num_partitions = 2" in text
        am1 = sh.AbstractMesh((1,), ("x",), axis_types=(sh.AxisType.Explicit,))
        sds1 = lib.ShapeDtypeStruct((8, 2), np.float32, sharding=sh.NamedSharding(am1, sh.PartitionSpec("x")))
        with pytest.raises(ValueError), sh.use_abstract_mesh(am):
            f.trace(sds1).lower(lowering_platforms=("cpu",))
        sds2 = lib.ShapeDtypeStruct((8, 2), np.float32, sharding=sh.NamedSharding(am, sh.PartitionSpec("x")))
        with pytest.raises(ValueError, match="Passing lowering_platforms.*is required"):
            lib.jit(lambda x, y: (x, y)).lower(sds2, np.arange(8))


def test_compile_device_assignment_must_match_concrete_program():
    for lib, _, sh in _libs():
        mesh = _mesh(lib, (2,), ("x",), ("Auto",))
        sds = lib.ShapeDtypeStruct((8, 2), np.float32, sharding=sh.NamedSharding(mesh, sh.PartitionSpec("x")))
        with pytest.raises(ValueError, match="device_assignment passed to `.compile` must match"):
            lib.jit(lambda x: x).lower(sds).compile(device_assignment=(lib.devices()[0],))


def test_constraint_over_abstract_mesh_eagerly_takes_the_arrays_devices():
    got = {}
    for lib, lnp, sh in _libs():
        mesh = _mesh(lib, (2, 2), ("x", "y"), ("Auto", "Auto"))
        arr = lib.device_put(np.arange(16).reshape(8, 2), sh.NamedSharding(mesh, sh.PartitionSpec("x", "y")))
        target = sh.NamedSharding(mesh.abstract_mesh, sh.PartitionSpec("x"))
        out = lib.lax.with_sharding_constraint(arr, target)
        got[lib.__name__] = (np.asarray(out), _spec(out.sharding.spec))
        with pytest.raises(ValueError, match="requires the input passed should be a `jax.Array`"):
            lib.lax.with_sharding_constraint(np.arange(8), target)
        with pytest.raises(TypeError, match="The sharding on the input must be a `NamedSharding`"):
            lib.lax.with_sharding_constraint(lnp.arange(8), sh.NamedSharding(mesh.abstract_mesh, sh.PartitionSpec()))
        # staged with no mesh to take devices from (eval_shape): no error
        sds = lib.ShapeDtypeStruct((8, 2), np.float32)
        lib.eval_shape(lambda x: lib.lax.with_sharding_constraint(x, target), sds)
    np.testing.assert_array_equal(got["ftrans"][0], got["jax"][0])
    assert got["ftrans"][1] == got["jax"][1]


# ---------------------------------------------------------------------------------------------------- vmap


def test_eager_vmap_of_sharded_jit_keeps_its_layouts():
    """An eager ``vmap`` of a jit with in/out shardings, and of a jit whose body constrains (with
    ``spmd_axis_name``): the results are laid out as JAX's."""
    got = {}
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (2,), ("x",), ("Auto",))
        f = lib.jit(lambda x, y: (x + y, x), in_shardings=sh.NamedSharding(mesh, P("x")),
                    out_shardings=sh.NamedSharding(mesh, P("x")))
        z, w = lib.vmap(f, in_axes=(None, 0), out_axes=(0, None))(lnp.arange(4), lnp.arange(20).reshape(5, 4))
        mesh3 = _mesh(lib, (2, 2, 2), ("replica", "data", "mdl"), ("Auto",) * 3)
        g = lib.jit(lambda v: lib.lax.with_sharding_constraint(v, sh.NamedSharding(mesh3, P("data", None, None))))
        out = lib.vmap(g, spmd_axis_name="mdl")(lnp.arange(8 * 4 * 2 * 2).reshape(8, 4, 2, 2))
        got[lib.__name__] = [(np.asarray(a), _spec(a.sharding.spec)) for a in (z, w, out)]
    for (a, sa), (b, sb) in zip(got["ftrans"], got["jax"]):
        np.testing.assert_array_equal(a, b)
        assert sa == sb


@pytest.mark.parametrize("use_jit", [True, False])
def test_vmap_over_explicit_axes_keeps_the_batch_split(use_jit):
    """vmap over arrays split on an Explicit axis: an einsum's ``out_sharding`` inside (jitted or not), and a
    select of a batched and an unbatched case, keep the batch dimension on that axis, as JAX's."""
    got = {}
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (2, 2), ("x", "y"), ("Explicit", "Explicit"))
        with lib.set_mesh(mesh):
            a = lib.device_put(np.arange(16.).reshape(4, 2, 2), sh.NamedSharding(mesh, P("x", None, "y")))
            b = lib.device_put(np.arange(16.).reshape(2, 4, 2), sh.NamedSharding(mesh, P(None, "x", "y")))

            def f(x, y):
                return lnp.einsum("xy,yz->xz", x, y, out_sharding=P(None, "y"))

            out = lib.vmap(lib.jit(f) if use_jit else f, in_axes=(0, 1), out_axes=2)(a, b)
            c = lib.device_put(np.arange(8.), sh.NamedSharding(mesh, P("x")))
            sel = lib.jit(lib.vmap(lambda v: lnp.where(v > 2, v, lnp.float32(0))))(c)
            got[lib.__name__] = [(np.asarray(o), _spec(o.sharding.spec)) for o in (out, sel)]
    for (a, sa), (b, sb) in zip(got["ftrans"], got["jax"]):
        np.testing.assert_array_equal(a, b)
        assert sa == sb


# --------------------------------------------------------------------------------------------- out_sharding


@pytest.mark.parametrize("name", ["segment_sum", "segment_max", "segment_prod", "segment_min"])
def test_segment_out_sharding_matches_jax(name):
    got = {}
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (4,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            a = lib.device_put(lnp.arange(8, dtype=np.int32), P("x"))
            ids = lib.device_put(lnp.array([0, 0, 1, 1, 1, 2, 2, 3]), P("x"))
            f = lib.jit(lambda x, y, s: getattr(lib.ops, name)(x, y, num_segments=4, out_sharding=s), static_argnums=2)
            out = f(a, ids, P())
            res = [(np.asarray(out), _spec(out.sharding.spec))]
            if name == "segment_sum":
                u = f(a, ids, P(unreduced={"x"}))
                res.append((np.stack(_shard_data(u)), tuple(sorted(u.sharding.spec.unreduced))))
                r = lib.sharding.reshard(u, P())
                res.append((np.asarray(r), _spec(r.sharding.spec)))
            else:
                with pytest.raises(NotImplementedError):
                    f(a, ids, P(unreduced={"x"}))
            got[lib.__name__] = res
    for (a, sa), (b, sb) in zip(got["ftrans"], got["jax"]):
        np.testing.assert_array_equal(a, b)
        assert sa == sb


def test_bincount_and_percentile_out_sharding_match_jax():
    got = {}
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (2,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            a = lnp.ones((4,), dtype=np.int32, out_sharding=P("x"))
            f = lib.jit(lambda x, s: lnp.bincount(x, length=2, out_sharding=s), static_argnums=1)
            rep, unr = f(a, P()), f(a, P(unreduced={"x"}))
            with pytest.raises(Exception, match="can only be fully replicated or fully unreduced") as e:
                f(a, P("x"))
            assert type(e.value).__name__ == "ShardingTypeError"
            arr = lib.device_put(np.arange(100), P("x"))
            pct = lib.jit(lambda x: lnp.percentile(x, 50, axis=0, out_sharding=P()))(arr)
            got[lib.__name__] = [(np.asarray(rep), _spec(rep.sharding.spec)), (np.stack(_shard_data(unr)), ()),
                                 (np.asarray(pct), _spec(pct.sharding.spec))]
    for (a, sa), (b, sb) in zip(got["ftrans"], got["jax"]):
        np.testing.assert_allclose(a, b)
        assert sa == sb


# ------------------------------------------------------------------------------------------- types and errors


def test_mixed_axis_types_constraint_and_out_shardings_match_jax():
    got = {}
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (2, 2), ("x", "y"), ("Explicit", "Auto"))
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(8, 2), P("x"))
            out = lib.jit(lambda x: lib.lax.with_sharding_constraint(x, P("y")))(arr)
            mesh2 = _mesh(lib, (2, 2), ("x", "y"), ("Explicit", "Explicit"))
        with lib.set_mesh(mesh2):
            arr2 = lib.device_put(np.arange(8).reshape(4, 2), P("x", None))
            o2 = lib.jit(lambda x: x * 2, out_shardings=P("x", "y"))(arr2)
            got[lib.__name__] = [(np.asarray(out), _spec(out.sharding.spec)),
                                 (np.asarray(o2), _spec(o2.sharding.spec)), (None, _spec(o2.aval.sharding.spec))]
    for (a, sa), (b, sb) in zip(got["ftrans"], got["jax"]):
        if a is not None:
            np.testing.assert_array_equal(a, b)
        assert sa == sb


def test_grad_of_out_sharding_goes_back_to_the_operands_type():
    got = {}
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (2,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            arr = lnp.arange(8.).reshape(4, 2)
            f = lib.jit(lambda x: lib.lax.broadcast_in_dim(x, (4, 2), [0, 1], out_sharding=P("x")))
            g = lib.jit(lib.grad(lambda x: f(x).sum()))(arr)
            got[lib.__name__] = (np.asarray(g), _spec(g.sharding.spec))
    np.testing.assert_array_equal(got["ftrans"][0], got["jax"][0])
    assert got["ftrans"][1] == got["jax"][1]


def test_sharding_type_errors_match_jax():
    """Operands over a mesh other than the context's (ValueError), a scan over xs split on the scanned axis
    (ValueError), a non-named constraint under ``vmap(spmd_axis_name=)`` (ValueError), ``auto_axes`` over a
    shard_map's manual axes (NotImplementedError), as JAX raises them."""
    for lib, lnp, sh in _libs():
        P = sh.PartitionSpec
        mesh = _mesh(lib, (1,), ("x",), ("Explicit",))
        mesh2 = _mesh(lib, (1,), ("y",), ("Explicit",))
        with lib.set_mesh(mesh):
            a = lib.device_put(np.arange(8), sh.NamedSharding(mesh, P()))
            b = lib.device_put(np.arange(8), sh.NamedSharding(mesh2, P()))
            with pytest.raises(ValueError, match="For primitive.*context mesh.*aval mesh"):
                lib.jit(lambda x, y: x + y)(a, b)
        mesh4 = _mesh(lib, (2, 2), ("x", "y"), ("Explicit", "Explicit"))
        with lib.set_mesh(mesh4):
            xs = lib.device_put(np.arange(16.).reshape(8, 2), P("x", None))
            with pytest.raises(ValueError, match="0th dimension of all xs should be replicated"):
                lib.jit(lambda c, xs: lib.lax.scan(lambda c, x: (c + x, x), c, xs))(lnp.zeros(2), xs)
        one = sh.SingleDeviceSharding(lib.devices()[0])
        with pytest.raises(ValueError, match="If you are using spmd_axis_name parameter of jax.vmap.*SingleDevice"):
            lib.jit(lib.vmap(lambda v: lib.lax.with_sharding_constraint(v, one), spmd_axis_name="x"))(
                lib.device_put(np.arange(8), one))
        auto = _mesh(lib, (2, 1), ("x", "y"), ("Auto", "Auto"))
        with lib.set_mesh(auto):
            def g(x):
                return sh.auto_axes(lambda v: v * 2, axes=("x", "y"), out_sharding=P("x", "y"))(x)

            with pytest.raises(NotImplementedError, match="Going from `Manual`.*to.*`Auto`.*`Explicit`"):
                lib.jit(lib.shard_map(g, mesh=auto, in_specs=P("x", "y"), out_specs=P("x", "y")))(
                    np.arange(16).reshape(8, 2))
