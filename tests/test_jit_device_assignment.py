"""jit's device-assignment checks, against jax on 8 host devices: arguments committed to different devices,
an argument laid out over other devices than the mesh in context, layouts of one program over different
meshes, a committed argument laid out otherwise than ``in_shardings`` (or than a compiled program takes),
``jit(device=...)`` of an argument laid out over a mesh (moved) or under a mesh context (refused).  The errors
are JAX's: the same class, the same wording (each argument named as written, with its type and device ids)."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

LIBS = ((jax, jjnp), (ftrans, fjnp))


def _mesh(lib, shape):
    return lib.make_mesh(shape, ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)


def _ns(lib, mesh, *spec):
    return lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec(*spec))


def _both(match, make):
    """``make(lib, jnp)`` raises ValueError matching ``match`` for jax and for ftrans."""
    for lib, np_ in LIBS:
        with pytest.raises(ValueError, match=match):
            make(lib, np_)


def _dev(lib, v, i):
    return lib.device_put(v, lib.devices()[i])


def test_arguments_committed_to_different_devices():
    a3, b3 = np.array([1, 2, 3]), np.array([4, 5, 6])
    _both(r"Received incompatible devices for jitted computation. Got argument x of.*<lambda> with shape "
          r"int32\[3\] and.*device ids \[0\].*and argument y of.*<lambda> with shape int32\[3\] and.*device ids \[1\]",
          lambda lib, _: lib.jit(lambda x, y: (x, y))(_dev(lib, a3, 0), _dev(lib, b3, 1)))
    _both(r"Got argument x\[0\] of.*<lambda> with shape int.*\[3\] and.*device ids \[0\].*and argument x\[1\]",
          lambda lib, _: lib.jit(lambda *x: x)(_dev(lib, a3, 0), _dev(lib, b3, 1)))
    _both(r"Got argument args\[0\] of concatenate with shape int32\[8\].*and argument args\[1\] of concatenate",
          lambda lib, np_: np_.concatenate([_dev(lib, np.arange(8), 0), _dev(lib, np.arange(8), 1)]))


def test_argument_on_one_device_and_one_over_a_mesh_named_by_path():
    def make(lib, _):
        c = lib.device_put(np.arange(16).reshape(8, 2), _ns(lib, _mesh(lib, (2, 2)), "x", "y"))
        a, b = _dev(lib, np.array([1, 2, 3]), 0), _dev(lib, np.array([4, 5, 6]), 1)
        return lib.jit(lambda dict_inp: dict_inp)({"d": a, "a": {"y": b, "b": {"g": c, "c": a}}})

    _both(r"Got argument dict_inp\['a'\]\['b'\]\['c'\] of.*<lambda> with shape int32\[3\] and.*device ids \[0\].*"
          r"and argument dict_inp\['a'\]\['b'\]\['g'\] of.*<lambda> with shape int32\[8,2\] and.*device ids", make)


def test_committed_argument_and_a_constraint_over_other_devices():
    def make(lib, np_):
        s = _ns(lib, _mesh(lib, (2, 2)), "x", "y")
        f = lib.jit(lambda inp: lib.lax.with_sharding_constraint(inp, s))
        return f(_dev(lib, np_.zeros((8, 2), np_.bfloat16), 0))

    _both(r"Got argument inp of.*<lambda> with shape bfloat16\[8,2\] and.*device ids \[0\].*"
          r"sharding_constraint inside jit with device ids \[0, 1, 2, 3\]", make)


def test_layouts_over_different_meshes_and_the_mesh_in_context():
    x = np.arange(16).reshape(8, 2)

    def out_shardings(lib, np_):
        m1, m2 = _mesh(lib, (4, 2)), _mesh(lib, (2, 2))
        with lib.set_mesh(m1):
            return lib.jit(lambda a, b: (a, b), out_shardings=(_ns(lib, m1, "x", "y"), _ns(lib, m2, "x", "y")))(
                np_.asarray(x), np_.asarray(x))

    _both(r"Received incompatible devices for jitted computation. Got.*context mesh with device ids "
          r"\[0, 1, 2, 3, 4, 5, 6, 7\] on platform CPU and explicit output sharding with device ids \[0, 1, 2, 3\]",
          out_shardings)

    def argument(lib, np_):
        carr = lib.device_put(x, _ns(lib, _mesh(lib, (4, 2)), "x", "y"))
        with lib.set_mesh(_mesh(lib, (2, 2))):
            return lib.jit(lambda a, b: (a, b))(np_.asarray(x), carr)

    _both(r"Received incompatible devices for jitted computation. Got argument b of.*<lambda> with shape "
          r"int32\[8,2\] and with device ids \[0, 1, 2, 3, 4, 5, 6, 7\].*context mesh with device ids \[0, 1, 2, 3\]",
          argument)


def test_committed_argument_laid_out_otherwise_than_in_shardings():
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)

    def make(lib, _):
        m = _mesh(lib, (4, 2))
        a = lib.device_put(x, _ns(lib, m, "x", "y"))
        return lib.jit(lambda v: v, in_shardings=_ns(lib, m, "x"))(a)

    _both(r"(?s)Sharding passed to jit does not match the sharding on the respective arg.*arg sharding.*"
          r"for arg type: float32\[8,2\]", make)
    for lib, _ in LIBS:  # the same layout (or an uncommitted array) is taken as it is
        m = _mesh(lib, (4, 2))
        a = lib.device_put(x, _ns(lib, m, "x", "y"))
        out = lib.jit(lambda v: v * 2, in_shardings=_ns(lib, m, "x", "y"))(a)
        np.testing.assert_array_equal(np.asarray(out), x * 2)


def test_compiled_program_refuses_arguments_laid_out_otherwise():
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    got = []
    for lib, _ in LIBS:
        m = _mesh(lib, (4, 2))
        a1, a2 = lib.device_put(x, _ns(lib, m, "x", "y")), lib.device_put(x, _ns(lib, m, "x"))
        sds = lib.ShapeDtypeStruct(x.shape, x.dtype)
        c = lib.jit(lambda p, q: (p @ q.T, q), in_shardings=_ns(lib, m, "x", "y")).lower(sds, sds).compile()
        got.append(np.asarray(c(a1, a1)[0]))
        with pytest.raises(ValueError, match=r"Computation was compiled for input shardings.* that disagree with "
                                             r"the shardings.* of arguments passed to it. Here are the 2 mismatches"):
            c(a2, a2)
    np.testing.assert_array_equal(got[0], got[1])


def test_jit_device_moves_an_argument_laid_out_over_a_mesh_and_refuses_a_mesh_context():
    x = np.arange(8).reshape(4, 2)
    for lib, np_ in LIBS:
        y = lib.device_put(x, _ns(lib, _mesh(lib, (2, 2)), "x", "y"))
        with warnings.catch_warnings():  # jit's device= is deprecated (in both)
            warnings.simplefilter("ignore", DeprecationWarning)
            f = lib.jit(lambda v: v @ v.T, device=lib.devices()[1])
            out = f(y)
            assert out.devices() == {lib.devices()[1]}
            np.testing.assert_array_equal(np.asarray(out), x @ x.T)
            with lib.set_mesh(_mesh(lib, (1, 1))):
                with pytest.raises(ValueError, match="Mesh context manager should not be used with jit when backend "
                                                     "or device is also specified as an argument to jit"):
                    lib.jit(lambda v: v, device=lib.devices()[0])(np_.arange(8))


def test_eager_sharding_constraint_over_the_devices_in_another_order():
    def make(lib, _):
        m1 = lib.sharding.Mesh(np.array(lib.devices()[:2]), ("x",))
        m2 = lib.sharding.Mesh(np.array([lib.devices()[1], lib.devices()[0]]), ("x",))
        inp = lib.device_put(np.arange(8), lib.sharding.NamedSharding(m1, lib.sharding.PartitionSpec()))
        return lib.lax.with_sharding_constraint(inp, lib.sharding.NamedSharding(m2, lib.sharding.PartitionSpec("x")))

    _both("Received incompatible devices for jitted computation", make)
    for lib, _ in LIBS:  # over the same devices in the same order: laid out as asked
        m1 = lib.sharding.Mesh(np.array(lib.devices()[:2]), ("x",))
        inp = lib.device_put(np.arange(8), lib.sharding.NamedSharding(m1, lib.sharding.PartitionSpec()))
        out = lib.lax.with_sharding_constraint(inp, lib.sharding.NamedSharding(m1, lib.sharding.PartitionSpec("x")))
        assert tuple(out.sharding.spec) == ("x",)


def test_shape_dtype_struct_update_of_a_laid_out_struct():
    import importlib

    for lib in (jax, ftrans):
        layout = importlib.import_module(lib.__name__ + ".experimental.layout")
        fmt, lay = layout.Format, layout.Layout
        m = lib.make_mesh((2, 1), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
        sh = lib.sharding.NamedSharding(m, lib.sharding.PartitionSpec())
        s4 = lib.ShapeDtypeStruct((2, 2), np.int32, sharding=fmt(lay((0, 1)), sh))
        new = fmt(lay((1, 0)), lib.sharding.NamedSharding(m, lib.sharding.PartitionSpec("x")))
        assert s4.update(sharding=new).sharding == new.sharding
        with pytest.raises(ValueError, match="updating ShapeDtypeStruct"):
            s4.update(sharding=lib.sharding.NamedSharding(m, lib.sharding.PartitionSpec("x")))
        s3 = lib.ShapeDtypeStruct((2, 2), np.int32, sharding=sh)
        assert s3.update(shape=(4, 2)).sharding == sh


def test_in_shardings_given_as_a_list_prefix():
    """A list in ``in_shardings`` is a tree prefix like any other (one sharding per list element)."""
    got = []
    for lib, np_ in LIBS:
        m = _mesh(lib, (2, 1))
        p = [None, _ns(lib, m, "x"), None]
        x = np_.arange(4.0)
        outs = lib.jit(lambda v: [e * 2 for e in v], in_shardings=(p,), out_shardings=p)([x, x, x])
        got.append([np.asarray(o) for o in outs])
        assert tuple(outs[1].sharding.spec) == ("x",)
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def test_empty_mesh_sharding_refused_by_jit():
    from jax._src import mesh as mesh_lib  # JAX's empty concrete mesh (ftrans takes JAX's meshes too)

    for lib, np_ in LIBS:
        s = lib.sharding.NamedSharding(mesh_lib.empty_concrete_mesh, lib.sharding.PartitionSpec())
        with pytest.raises(ValueError, match="One of out_shardings leaf specifications got an empty NamedSharding"):
            lib.jit(lambda x: x, out_shardings=s)(np_.ones((32,)))


def test_mesh_as_a_decorator():
    x = np.arange(8)
    got = []
    for lib, np_ in LIBS:
        mesh = lib.sharding.Mesh(np.array(lib.devices()[:4]).reshape(2, 2), ("x", "y"))

        @mesh
        def dec(lib=lib, np_=np_, mesh=mesh):
            assert lib is jax or ftrans.sharding.get_mesh() is mesh  # the mesh is current inside
            return lib.jit(lambda v: v * 2, in_shardings=lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x")))(
                np_.asarray(x))

        got.append(np.asarray(dec()))
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], x * 2)


def test_shaped_array_with_an_untyped_sharding_is_the_plain_type():
    """``ShapedArray(..., sharding=NamedSharding(mesh, P()))`` (nothing split over an Explicit axis) equals the
    plain type, as a lowered program's ``in_avals`` compare in JAX; a split over an Explicit axis is a type of
    its own."""
    from jax._src import core as jcore

    for lib, shaped in ((jax, jcore.ShapedArray), (ftrans, ftrans.core.ShapedArray)):
        m = _mesh(lib, (2, 2))
        x = np.arange(64).reshape(8, 8)
        f = lib.jit(lambda a, b: a @ b, in_shardings=_ns(lib, m, ("x", "y")), out_shardings=_ns(lib, m, ("x", "y")))
        lowered = f.lower(x, x + 1)
        assert lowered.in_avals == lowered.compile().in_avals
        want = shaped(x.shape, lowered.in_avals[0][0].dtype, sharding=lib.sharding.NamedSharding(m.abstract_mesh,
                                                                                                lib.P()))
        assert lowered.in_avals == ((want,) * 2, {})


def test_results_of_single_device_shardings_are_committed():
    for lib, np_ in LIBS:
        s = lib.sharding.SingleDeviceSharding(lib.devices()[0])
        x = np_.arange(10)
        f = lib.jit(lambda v: v * 2, out_shardings=s)
        assert f(x).committed and f(x).committed  # (the second call too)
        assert lib.lax.with_sharding_constraint(x, s).committed
        assert lib.device_put(x, s).committed
        assert not lib.jit(lambda v: v * 2)(x).committed


def test_partitioned_lowered_and_compiled_in_tree():
    for lib, np_ in LIBS:
        m = _mesh(lib, (2, 2))
        x = np_.arange(64).reshape(8, 8)
        f = lib.jit(lambda a, b: a @ b, in_shardings=_ns(lib, m, ("x", "y")))
        lowered = f.lower(x, x + 1)
        for obj in (lowered, lowered.compile()):
            assert not obj._no_kwargs
            assert obj.in_tree == lib.tree.flatten(((0, 0), {}))[1]
