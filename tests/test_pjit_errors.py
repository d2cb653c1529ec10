"""Behaviour JAX's pjit_test.py expects, as jax's (errors of the same class, naming the user's line): a None
spec, a mesh with Manual axes set as the mesh, an ``out_shardings`` tree that is no prefix of the outputs (also
with all-None leaves), a ShapeDtypeStruct sharding of too high a rank, ``compiler_options`` on a jit staged into
another, ``jnp.array(committed, device=other)``, a bare ``out_sharding`` spec inside jit with no mesh in context,
vmap over mapped dimensions split differently (or otherwise than ``spmd_axis_name``), concatenating operands
split differently, ``jit(device=d)`` of a program laid out over other devices; an eager sharding
constraint to one device places and commits the value; a partitioned Compiled's input shardings are
``(args, kwargs)``."""

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
from ftrans.sharding import AxisType, NamedSharding, P

HERE = os.path.abspath(__file__)

pytestmark = pytest.mark.skipif(jax.local_device_count() < 2, reason="needs 2 host devices (tests/conftest.py)")


def both_raise(exc, match, jax_fn, ftrans_fn):
    with pytest.raises(exc, match=match):
        jax_fn()
    with pytest.raises(exc, match=match) as info:
        ftrans_fn()
    assert HERE in str(info.value), str(info.value)


def test_sharding_and_mesh_argument_errors():
    jm = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    fm = ftrans.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    both_raise(TypeError, "None", lambda: jax.NamedSharding(jm, None), lambda: NamedSharding(fm, None))
    jman = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",), (jax.sharding.AxisType.Manual,))
    fman = ftrans.sharding.Mesh(np.array(ftrans.devices()[:2]), ("x",), (AxisType.Manual,))
    both_raise(ValueError, "manual axes", lambda: jax.set_mesh(jman), lambda: ftrans.set_mesh(fman))
    assert ftrans.sharding.get_mesh().empty
    both_raise(ValueError, "rank at least 3, but was applied to a value of rank 2",
               lambda: jax.ShapeDtypeStruct((4, 4), np.float32, sharding=jax.NamedSharding(jm, jax.P(None, "x", None))),
               lambda: ftrans.ShapeDtypeStruct((4, 4), np.float32, sharding=NamedSharding(fm, P(None, "x", None))))
    both_raise(ValueError, "rank at least 3",
               lambda: jax.ShapeDtypeStruct((4, 4), np.float32, sharding=jax.P(None, "x", None)),
               lambda: ftrans.ShapeDtypeStruct((4, 4), np.float32, sharding=P(None, "x", None)))
    # a bare spec is over the mesh in context when read (none: TypeError), as JAX's
    fs, js = ftrans.ShapeDtypeStruct((4, 4), np.float32, sharding=P("x")), jax.ShapeDtypeStruct((4, 4), np.float32,
                                                                                               sharding=jax.P("x"))
    both_raise(TypeError, "the context mesh cannot be empty", lambda: js.sharding, lambda: fs.sharding)
    with ftrans.set_mesh(fm), jax.set_mesh(jm):
        assert fs.sharding == NamedSharding(fm, P("x"))
        assert js.sharding == jax.NamedSharding(jm, jax.P("x"))


def test_jit_errors():
    bad = {"a": [None, None], "b": (None, None)}
    both_raise(ValueError, r"Mismatch details \(2 found\)",
               lambda: jax.jit(lambda x: x, out_shardings=bad)({"a": 1.0, "b": 1.0}),
               lambda: ftrans.jit(lambda x: x, out_shardings=bad)({"a": 1.0, "b": 1.0}))
    jg = jax.jit(lambda x: x * 2, compiler_options={"xla_embed_ir_in_executable": True})
    fg = ftrans.jit(lambda x: x * 2, compiler_options={"xla_embed_ir_in_executable": True})
    x = np.arange(4.0, dtype=np.float32)
    both_raise(ValueError, "`compiler_options` can only be passed to top-level `jax.jit`",
               lambda: jax.jit(lambda v: jg(v + 1))(x),
               lambda: ftrans.jit(lambda v: fg(v + 1))(x))
    if jax.__version_info__ < (0, 12):
        both_raise(ValueError, "can only be passed to top-level", lambda: jax.grad(lambda v: jg(v).sum())(x),
                   lambda: ftrans.grad(lambda v: fg(v).sum())(x))
    else:  # jax 0.12 differentiates it; ftrans keeps jax 0.10's refusal (docs/differences.md)
        with pytest.raises(ValueError, match="can only be passed to top-level"):
            ftrans.grad(lambda v: fg(v).sum())(x)
    np.testing.assert_array_equal(np.asarray(ftrans.vmap(fg)(x)), np.asarray(jax.vmap(jg)(x)))


def test_committed_array_not_moved_by_device_and_bare_out_sharding_needs_a_mesh():
    jd, fd = jax.devices(), ftrans.devices()
    ja, fa = jax.device_put(np.arange(8), jd[0]), ftrans.device_put(np.arange(8), fd[0])
    both_raise(ValueError, "Received incompatible devices", lambda: jjnp.array(ja, device=jd[1]),
               lambda: fjnp.array(fa, device=fd[1]))
    assert fjnp.array(fa, device=fd[0]).sharding == jjnp.array(ja, device=jd[0]).sharding
    assert fjnp.array(fjnp.arange(8), device=fd[1]).sharding == jjnp.array(jjnp.arange(8), device=jd[1]).sharding
    jm = jax.make_mesh((1, 1), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    fm = ftrans.make_mesh((1, 1), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    v = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    jx = jax.device_put(v, jax.NamedSharding(jm, jax.P("x", "y")))
    fx = ftrans.device_put(v, NamedSharding(fm, P("x", "y")))
    both_raise(ValueError, "not under a mesh context",
               lambda: jax.jit(lambda a: jjnp.einsum("xy,zy->xz", a, a, out_sharding=jax.P("x", "y")))(jx),
               lambda: ftrans.jit(lambda a: fjnp.einsum("xy,zy->xz", a, a, out_sharding=P("x", "y")))(fx))


def test_eager_sharding_constraint_to_one_device_places_and_commits():
    jd, fd = jax.devices(), ftrans.devices()
    for v in (np.arange(10), None):
        jy = jax.lax.with_sharding_constraint(jjnp.arange(10) if v is None else v, jax.sharding.SingleDeviceSharding(jd[1]))
        fy = ftrans.lax.with_sharding_constraint(fjnp.arange(10) if v is None else v,
                                                 ftrans.sharding.SingleDeviceSharding(fd[1]))
        assert fy.committed == jy.committed is True
        assert fy.sharding == jy.sharding
        np.testing.assert_array_equal(np.asarray(fy), np.asarray(jy))


def test_sharded_compiled_input_shardings_are_args_and_kwargs():
    fm = ftrans.make_mesh((2,), ("x",))
    jm = jax.make_mesh((2,), ("x",))
    v = np.arange(16).reshape(8, 2)
    fa = ftrans.device_put(v, NamedSharding(fm, P("x")))
    ja = jax.device_put(v, jax.NamedSharding(jm, jax.P("x")))
    got = ftrans.jit(lambda x, y, z: (x * y, z.T), static_argnums=1).lower(fa, 3, z=v).compile().input_shardings
    want = jax.jit(lambda x, y, z: (x * y, z.T), static_argnums=1).lower(ja, 3, z=v).compile().input_shardings
    assert jax.tree.structure(got) == jax.tree.structure(want)
    assert [tuple(s.spec) for s in jax.tree.leaves(got)] == [tuple(s.spec) for s in jax.tree.leaves(want)]


def test_vmap_mapped_dimensions_split_alike():
    got = []
    for lib in (jax, ftrans):
        at = lib.sharding.AxisType.Explicit
        mesh = lib.make_mesh((2, 1), ("x", "y"), axis_types=(at, at))
        ns, ps = lib.sharding.NamedSharding, lib.sharding.PartitionSpec
        v = np.arange(16).reshape(8, 2)
        with lib.set_mesh(mesh):
            a = lib.device_put(v, ns(mesh, ps("x", None)))
            b = lib.device_put(v.T, ns(mesh, ps(None, "y")))
            with pytest.raises(ValueError, match="Mapped away dimension of inputs passed to vmap should be sharded"):
                lib.vmap(lambda p, q: p @ q, in_axes=(0, 1))(a, b)
            with pytest.raises(ValueError, match="Only one of spmd_axis_name or arrays sharded"):
                lib.jit(lib.vmap(lambda p: p * 2, spmd_axis_name="y"))(a)
            got.append(tuple(lib.vmap(lambda p, q: p * q, spmd_axis_name="x")(a, a).sharding.spec))
    assert got[0] == got[1]


def test_concatenate_of_differently_split_operands():
    """Operands split differently (not one of them wholly unsplit) are JAX's ShardingTypeError."""
    for lib, err in ((jax, jax._src.core.ShardingTypeError), (ftrans, ftrans.errors.ShardingTypeError)):
        at = lib.sharding.AxisType.Explicit
        mesh = lib.make_mesh((2, 1), ("x", "y"), axis_types=(at, at))
        ns, ps = lib.sharding.NamedSharding, lib.sharding.PartitionSpec
        a = lib.device_put(np.ones((4, 4)), ns(mesh, ps("x", "y")))
        b = lib.device_put(np.ones((4, 1)), ns(mesh, ps("x")))
        with pytest.raises(err, match="All operands should have the same sharding"):
            lib.jit(lambda u, v, lib=lib: lib.numpy.concatenate([u, v], axis=1))(a, b)
        c = lib.device_put(np.ones((4, 1)), ns(mesh, ps("x", "y")))
        out = lib.jit(lambda u, v, lib=lib: lib.numpy.concatenate([u, v], axis=1))(a, c)
        assert tuple(out.sharding.spec) == ("x", "y")


def test_jit_device_with_a_constraint_over_other_devices():
    match = (r"Received incompatible devices for jitted computation. Got explicit output sharding with device ids "
             r"\[0\].*sharding_constraint inside jit with device ids")
    for lib in (jax, ftrans):
        mesh = lib.make_mesh((2, 1), ("x", "y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
        s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x", "y"))
        with warnings.catch_warnings():  # jit's device= is deprecated (in both)
            warnings.simplefilter("ignore", DeprecationWarning)
            f = lib.jit(lambda shape, s=s, lib=lib: lib.lax.with_sharding_constraint(lib.numpy.zeros(shape), s),
                        static_argnums=0, device=lib.devices()[0])
        with pytest.raises(ValueError, match=match):
            f((4, 2))
