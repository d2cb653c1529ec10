"""Meshes in context and in types, as JAX's pjit_test.py exercises them: ``typeof(x).sharding.mesh`` /
``x.aval.sharding.mesh`` is the value's ``AbstractMesh`` (inside ``jit`` and under ``set_mesh``), ``eval_shape`` and
``out_info`` carry typed outputs' shardings, ``use_abstract_mesh`` cannot change the mesh's size, an
``out_sharding=`` over another mesh than the context one is refused, a nested jit cannot change the mesh's size,
and a jit tracing a sharding over an abstract mesh takes the devices of each call's arguments.  Each compared
with jax on the host devices tests/conftest.py sets up."""

from __future__ import annotations

import os
import warnings
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import AxisType as JAxisType
from jax.sharding import NamedSharding as JNamedSharding

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import AbstractMesh, AxisType, NamedSharding, P

HERE = os.path.abspath(__file__)

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

X = np.arange(16.0, dtype=np.float32).reshape(8, 2)


def _am(m) -> tuple:
    """An abstract mesh as plain data (either library's)."""
    return tuple(m.axis_names), tuple(m.axis_sizes), tuple(t.name for t in m.axis_types)


def _explicit_meshes(shape=(4, 2), names=("x", "y")):
    return (ftrans.make_mesh(shape, names, axis_types=(AxisType.Explicit,) * len(names)),
            jax.make_mesh(shape, names, axis_types=(JAxisType.Explicit,) * len(names)))


def test_aval_sharding_mesh_is_abstract_inside_jit_without_a_context_mesh():
    fm, jm = _explicit_meshes()
    seen: dict = {"ftrans": [], "jax": []}

    def prog(lib, NS, mesh, out):
        x = lib.device_put(X, NS(mesh, lib.P("x", None)))
        y = lib.device_put(X.T, NS(mesh, lib.P(None, "y")))

        @lib.jit
        def f(a, b):
            z = a @ b
            for v in (a, b, z, z * 2):
                out.append((type(v.aval.sharding.mesh).__name__, _am(v.aval.sharding.mesh),
                            tuple(v.aval.sharding.spec), _am(lib.typeof(v).sharding.mesh)))
            return z * 2

        r = f(x, y)
        return r

    rf = prog(ftrans, NamedSharding, fm, seen["ftrans"])
    rj = prog(jax, JNamedSharding, jm, seen["jax"])
    assert seen["ftrans"] == seen["jax"]
    assert all(t == "AbstractMesh" for t, *_ in seen["ftrans"])
    assert rf.sharding == NamedSharding(fm, P("x", "y"))  # the result is over the concrete mesh
    np.testing.assert_allclose(np.asarray(rf), np.asarray(rj))


def test_type_sharding_equals_and_is_usable_as_a_sharding():
    fm, _ = _explicit_meshes()
    with ftrans.set_mesh(fm):
        x = ftrans.device_put(X, P("x", "y"))
        ts = ftrans.typeof(x).sharding
        assert isinstance(ts.mesh, AbstractMesh) and ts.mesh == fm.abstract_mesh
        assert ts == NamedSharding(fm.abstract_mesh, P("x", "y")) == NamedSharding(fm, P("x", "y"))
        y = ftrans.device_put(np.ones_like(X), ts)  # lays out over the value's devices
        assert y.sharding == NamedSharding(fm, P("x", "y"))
    assert hash(ts) == hash(NamedSharding(fm.abstract_mesh, P("x", "y")))  # (no mesh in context: stays abstract)
    z = ftrans.device_put(np.ones_like(X), ts)  # outside the mesh too: the type keeps the concrete mesh
    assert z.sharding == NamedSharding(fm, P("x", "y"))


def test_typeof_of_uncommitted_and_single_device_arrays_under_set_mesh():
    fm, jm = _explicit_meshes((2,), ("x",))
    got, want = [], []
    for lib, mesh, out, mk in ((ftrans, fm, got, ftrans.numpy.zeros), (jax, jm, want, jjnp.zeros)):
        with lib.set_mesh(mesh):
            a = mk(8)
            sh = lib.typeof(a).sharding
            out.append((_am(sh.mesh), tuple(sh.spec)))
            b = lib.device_put(a, lib.sharding.SingleDeviceSharding(lib.devices()[0]))
            out.append(lib.typeof(b).sharding.mesh.empty)
    assert got == want
    assert got[0][0] == (("x",), (2,), ("Explicit",)) and got[1] is True


def test_eval_shape_and_out_info_carry_typed_outputs_shardings():
    fm, jm = _explicit_meshes((2, 2))
    res: dict = {}
    for name, lib, mesh, NS in (("ftrans", ftrans, fm, NamedSharding), ("jax", jax, jm, JNamedSharding)):
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(8, 2), lib.P("x", "y"))
            f = lib.jit(lambda x: x * 2)
            es = lib.eval_shape(f, arr).sharding
            tr = f.trace(arr).out_info.sharding
            plain = lib.eval_shape(lambda x: x * 2, arr).sharding
            low = f.lower(arr).out_info.sharding
            res[name] = ([(type(s.mesh).__name__, _am(s.mesh), tuple(s.spec)) for s in (es, tr, plain)],
                         (type(low.mesh).__name__, tuple(low.spec)))
            assert es == NS(mesh.abstract_mesh, lib.P("x", "y"))
            host = lib.eval_shape(lib.jit(lambda x: x * 2), np.ones(3)).sharding  # typed unsplit over the mesh
            res[name] += ((_am(host.mesh), tuple(host.spec)),)
        assert lib.eval_shape(lib.jit(lambda x: x * 2), np.ones(3)).sharding is None  # no mesh: none
    assert res["ftrans"] == res["jax"]


def test_zeros_like_of_a_struct_over_an_explicit_abstract_mesh_is_typed():
    fm, jm = _explicit_meshes((2,), ("x",))
    got = []
    for lib, mesh, NS, jnp in ((ftrans, fm, NamedSharding, fjnp), (jax, jm, JNamedSharding, jjnp)):
        am = mesh.abstract_mesh
        with lib.sharding.use_abstract_mesh(am):
            val = lib.ShapeDtypeStruct((32,), dtype=jnp.float32, sharding=NS(am, lib.P("x")))
            out = lib.jit(lambda: jnp.zeros_like(val)).trace().out_info
            assert out.sharding == NS(am, lib.P("x"))
            got.append((type(out.sharding.mesh).__name__, tuple(out.sharding.spec)))
    assert got[0] == got[1]


def test_use_abstract_mesh_cannot_change_the_mesh_size():
    fm, jm = _explicit_meshes((2,), ("x",))
    for lib in (ftrans, jax):
        mesh = fm if lib is ftrans else jm
        with lib.set_mesh(mesh):
            with pytest.raises(ValueError, match="use_abstract_mesh cannot change the size"):
                with lib.sharding.use_abstract_mesh(lib.sharding.AbstractMesh((4,), ("x",))):
                    pass
            with lib.sharding.use_abstract_mesh(lib.sharding.AbstractMesh((2,), ("y",))):  # same size: fine
                assert tuple(lib.sharding.get_abstract_mesh().axis_names) == ("y",)
    with ftrans.sharding.use_abstract_mesh(AbstractMesh((4,), ("x",))):  # no mesh in context: any size
        pass
    with ftrans.set_mesh(fm):
        with pytest.raises(ValueError) as e:
            with ftrans.sharding.use_abstract_mesh(AbstractMesh((4,), ("x",))):
                pass
    assert HERE in str(e.value)  # the user's line


def test_out_sharding_over_another_mesh_than_the_context_one():
    fm, jm = _explicit_meshes((2,), ("x",))
    for lib, mesh, NS, jnp, AT in ((ftrans, fm, NamedSharding, fjnp, AxisType),
                                   (jax, jm, JNamedSharding, jjnp, JAxisType)):
        with lib.set_mesh(mesh):
            a = lib.device_put(X, NS(mesh, lib.P("x", None)))
            b = lib.device_put(X.T, NS(mesh, lib.P(None, "x")))
            auto = lib.make_mesh((2,), ("x",), axis_types=(AT.Auto,)).abstract_mesh

            @lib.jit
            def f(x, y):
                return jnp.einsum("xy,yz->xz", x, y, out_sharding=NS(auto, lib.P(None, None)))

            with pytest.raises(ValueError, match="Context mesh.*should match the mesh of sharding"):
                f(a, b)

            @lib.jit
            def g(x, y):
                with lib.sharding.use_abstract_mesh(mesh.abstract_mesh.update_axis_types({"x": AT.Auto})):
                    return jnp.einsum("xy,yz->xz", x, y, out_sharding=lib.P("x", None))

            with pytest.raises(ValueError, match="cannot contain axis names.*Auto"):
                g(a, b)
            # the context mesh's own sharding is fine
            out = lib.jit(lambda x, y: jnp.einsum("xy,yz->xz", x, y, out_sharding=NS(mesh, lib.P("x", None))))(a, b)
            np.testing.assert_allclose(np.asarray(out), X @ X.T)


def test_nested_jit_cannot_change_the_mesh_size():
    from jax.experimental.pjit import pjit as jpjit

    from ftrans.experimental.pjit import pjit as fpjit

    for lib, pjit in ((ftrans, fpjit), (jax, jpjit)):
        Mesh = lib.sharding.Mesh
        big = Mesh(np.array(lib.local_devices()[:2]), ("x",))
        small = Mesh(np.array([lib.local_devices()[0]]), ("x",))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with big:
                @partial(pjit, in_shardings=lib.P("x"), out_shardings=None)
                def f(x):
                    with small:
                        @partial(pjit, in_shardings=lib.P("x"), out_shardings=None)
                        def h(x):
                            return x
                        return h(x)

                with pytest.raises(ValueError, match="cannot change the size of the mesh"):
                    f(np.arange(60).reshape(2, 5, 6))


def test_nested_jit_shardings_named_in_the_device_assignment_error():
    from jax.experimental.pjit import pjit as jpjit

    from ftrans.experimental.pjit import pjit as fpjit

    for lib, pjit, NS, jnp in ((ftrans, fpjit, NamedSharding, fjnp), (jax, jpjit, JNamedSharding, jjnp)):
        mesh = lib.make_mesh((2, 2), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
        s = NS(mesh, lib.P("x", "y"))

        @pjit
        def outer(a, b):
            @partial(pjit, in_shardings=(s, s), out_shardings=(s, s))
            def inner(x, y):
                return x * 2, y * 2
            return inner(a, b)

        inp = lib.device_put(jnp.zeros((8, 2), jnp.bfloat16), lib.devices()[0])
        with pytest.raises(ValueError, match=r"Received incompatible devices for jitted computation\. Got argument "
                           r"a of.*outer with shape bfloat16\[8,2\] and.*device ids \[0\].*jit inside jit with "
                           r"device ids"):
            outer(inp, inp)


def test_abstract_mesh_constraint_takes_each_calls_devices():
    res = []
    for lib, NS in ((ftrans, NamedSharding), (jax, JNamedSharding)):
        Mesh = lib.sharding.Mesh
        m1, m2 = Mesh(lib.devices()[:2], "x"), Mesh(lib.devices()[2:4], "x")

        @lib.jit
        def f(x):
            return lib.lax.sin(lib.lax.with_sharding_constraint(x, NS(m1.abstract_mesh, lib.P("x"))))

        a = lib.device_put(np.arange(8.0, dtype=np.float32), NS(m1, lib.P()))
        out_a = f(a)
        b = lib.device_put(out_a, NS(m2, lib.P()))
        out_b = f(b)
        res.append(([d.id for d in out_a.sharding._device_assignment], [d.id for d in out_b.sharding._device_assignment],
                    np.asarray(out_b)))
    assert res[0][:2] == res[1][:2] == ([0, 1], [2, 3])
    np.testing.assert_allclose(res[0][2], res[1][2], rtol=1e-6)


# ---------------------------------------------------------------- documented differences (docs/differences.md)
def test_legacy_mesh_context_manager_serves_jit_bare_specs():
    fm = ftrans.sharding.Mesh(np.array(ftrans.devices()[:1]), ("x",))
    jm = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(RuntimeError, match="jit requires a non-empty mesh in context"):
            with jm:
                jax.jit(lambda x: x, in_shardings=jax.P("x"), out_shardings=jax.P("x"))(jjnp.arange(8))
        with fm:
            out = ftrans.jit(lambda x: x, in_shardings=P("x"), out_shardings=P("x"))(fjnp.arange(8))
    np.testing.assert_array_equal(np.asarray(out), np.arange(8))


def test_untyped_result_of_a_reshard_reported_over_its_mesh():
    fm, jm = _explicit_meshes((2,), ("x",))
    got = []
    for lib, mesh, NS, AT in ((ftrans, fm, NamedSharding, AxisType), (jax, jm, JNamedSharding, JAxisType)):
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(8, 2), NS(mesh, lib.P("x")))

            @lib.jit
            def f(x):
                with lib.sharding.use_abstract_mesh(mesh.abstract_mesh.update_axis_types({"x": AT.Auto})):
                    return lib.reshard(x, lib.P(None, None)) if lib is jax else ftrans.reshard(x, P(None, None))

            out = f(arr)
            np.testing.assert_array_equal(np.asarray(out), np.arange(16).reshape(8, 2))
            got.append(tuple(t.name for t in out.sharding.mesh.axis_types))
    assert got == [("Auto",), ("Auto",)]  # a result given by a reshard: over its mesh, as JAX's


def test_untyped_result_of_a_later_operation_reported_over_the_programs_mesh():
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(JAxisType.Auto,) * 2)
    got = []
    for lib, mesh, jnp in ((ftrans, fm, fjnp), (jax, jm, jjnp)):
        with lib.set_mesh(mesh):
            new_am = mesh.abstract_mesh.update(axis_sizes=(4, 1), axis_names=("a", "b"))

            def f(x, last):
                with lib.sharding.use_abstract_mesh(new_am):
                    x = lib.lax.with_sharding_constraint(jnp.sin(x), lib.P(("a", "b"), None))
                    return x if last else x * 2

            arr = lib.device_put(X, lib.P("x", "y"))
            for last in (True, False):
                out = lib.jit(partial(f, last=last))(arr)
                got.append((lib.__name__, last, tuple(out.sharding.mesh.axis_names), tuple(out.sharding.spec)))
    assert got[0] == ("ftrans", True, ("a", "b"), ("a",)) and got[2] == ("jax", True, ("a", "b"), ("a",))
    assert got[3] == ("jax", False, ("a", "b"), ("a",))
    assert got[1] == ("ftrans", False, ("x", "y"), (("x", "y"),))  # (docs/differences.md: the program's mesh)
