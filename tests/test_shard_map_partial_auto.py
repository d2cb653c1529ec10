"""``shard_map(..., axis_names=...)`` naming a subset of the mesh's axes: the body is manual over those axes
only, the others stay with the partitioner.  Each case runs under ftrans and under jax (the oracle) on the
8 CPU devices: the body's block types, the results' values and shardings, the lowered manual computation,
gradients, ``axis_index`` there, and a nested shard_map over the axes left automatic.
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp

pytestmark = pytest.mark.needs_devices(8)

LIBS = [(ftrans, fjnp), (jax, jjnp)]


def _mesh(lib, shape, names, kind):
    return lib.make_mesh(shape, names, axis_types=(getattr(lib.sharding.AxisType, kind),) * len(shape))


def _spec_str(sh):
    return tuple(sh.spec)


@pytest.mark.parametrize("kind", ["Explicit", "Auto"])
def test_partial_manual_body_types_values_and_grad_match_jax(kind):
    v = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    res = {}
    for lib, jnp_ in LIBS:
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib, (2, 2), ("i", "j"), kind)
        seen = []

        def g(x, lib=lib, seen=seen):
            sh = x.aval.sharding
            seen.append(None if sh is None else (tuple(t.name for t in sh.mesh.axis_types), tuple(sh.spec)))
            seen.append(set(x.aval.mat.varying))
            return x * x

        def f(x, lib=lib, P=P, mesh=mesh):
            return lib.shard_map(g, mesh=mesh, in_specs=P("i", None), out_specs=P("i", None),
                                 axis_names=frozenset({"i"}))(x)

        x = lib.device_put(v, lib.sharding.NamedSharding(mesh, P("i", "j")))
        with lib.set_mesh(mesh):
            out = lib.jit(f)(x)
            grad = lib.jit(lib.grad(lambda x, f=f, jnp_=jnp_: jnp_.sum(f(x))))(x)
            text = lib.jit(f).lower(x).as_text()
        line = next(ln for ln in text.splitlines() if "manual_computation" in ln)
        # (the first trace's: ftrans traces again for grad and lower; Auto: JAX's body type shows the mesh only)
        res[lib.__name__] = (seen[:2] if kind == "Explicit" else seen[1:2], np.asarray(out), _spec_str(out.sharding),
                             np.asarray(grad), line[line.index("in_shardings"):line.index("(%arg")])
    f_, j_ = res["ftrans"], res["jax"]
    assert f_[0] == j_[0]
    np.testing.assert_allclose(f_[1], j_[1])
    assert f_[2] == j_[2]
    np.testing.assert_allclose(f_[3], j_[3])
    assert f_[4] == j_[4]  # manual_axes={"i"}, the dims open over an Auto axis left automatic


def test_partial_manual_multi_explicit_result_type_matches_jax():
    v = np.arange(64.0, dtype=np.float32).reshape(4, 2, 2, 4)
    res = {}
    for lib, _ in LIBS:
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib, (2, 1, 2, 2), ("i", "j", "k", "l"), "Explicit")
        types = []

        def f(x, lib=lib, P=P, types=types):
            out = lib.shard_map(lambda b: b.T, out_specs=P("i", "j", None, None),
                                axis_names=frozenset({"i", "j"}))(x)
            types.append(tuple(out.aval.sharding.spec))
            return out

        with lib.set_mesh(mesh):
            x = lib.device_put(v, P("i", "j", "k", "l"))
            out = lib.jit(f)(x)
        res[lib.__name__] = (types, np.asarray(out), _spec_str(out.sharding))
    assert res["ftrans"][0] == res["jax"][0]
    np.testing.assert_allclose(res["ftrans"][1], res["jax"][1])
    assert res["ftrans"][2] == res["jax"][2]


def test_axis_index_in_partial_manual_body_matches_jax():
    res = {}
    for lib, jnp_ in LIBS:
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib, (2, 2, 2), ("i", "j", "k"), "Auto")

        def g(x, lib=lib, jnp_=jnp_):
            return x + lib.lax.axis_index("i").astype(x.dtype), jnp_.full((1,), lib.lax.axis_index("i"))

        def f(x, lib=lib, P=P, mesh=mesh):
            return lib.shard_map(g, mesh=mesh, in_specs=P("i"), out_specs=(P("i"), P("i")),
                                 axis_names=frozenset({"i"}))(x)

        out = lib.jit(f)(np.arange(8.0, dtype=np.float32))
        res[lib.__name__] = [np.asarray(o) for o in out]
    for a, b in zip(res["ftrans"], res["jax"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("power", [2, 3])
def test_grad_of_nested_shard_map_in_partial_manual_body_matches_jax(power):
    v = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    res = {}
    for lib, _ in LIBS:
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib, (2, 2), ("i", "j"), "Auto")

        def h(x, lib=lib, P=P):  # manual over 'i'; the nested one makes 'j' manual too
            return lib.shard_map(lambda b: b ** power, in_specs=P(None, "j"), out_specs=P(None, "j"))(x)

        @lib.jit
        def f(x, lib=lib, P=P, h=h):
            return lib.shard_map(h, in_specs=P("i", None), out_specs=P("i", None), check_vma=False,
                                 axis_names=frozenset({"i"}))(x).sum()

        with lib.set_mesh(mesh):
            x = lib.device_put(v, lib.sharding.NamedSharding(mesh, P("i", "j")))
            res[lib.__name__] = (np.asarray(f(x)), np.asarray(lib.grad(f)(x)))
    for a, b in zip(res["ftrans"], res["jax"]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_debug_print_in_partial_manual_body_matches_jax(capfd):
    lines = {}
    for lib, jnp_ in LIBS:
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib, (2, 2), ("x", "y"), "Auto")

        def f(x, lib=lib, jnp_=jnp_):
            lib.debug.print("instance {i} has value x={x}", i=lib.lax.axis_index("x"), x=x)
            return jnp_.cos(x)

        g = lib.jit(lib.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names=frozenset({"x"})))
        lib.block_until_ready(g(jnp_.arange(8)))
        lib.effects_barrier()
        lines[lib.__name__] = sorted(capfd.readouterr().out.splitlines())
    assert lines["ftrans"] == lines["jax"]
    assert len(lines["ftrans"]) == 2  # once per device along 'x' (the automatic 'y': its first device)


@pytest.mark.parametrize("use_jit", [False, True])
def test_smap_over_auto_axis_of_mixed_mesh_result_sharding_matches_jax(use_jit):
    res = {}
    for lib, _ in LIBS:
        P, A = lib.sharding.PartitionSpec, lib.sharding.AxisType
        mesh = lib.make_mesh((2, 2), ("x", "y"), axis_types=(A.Explicit, A.Auto))
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(4), P("y"))
            g = lib.smap(lambda x: x * 2, in_axes=0, out_axes=0, axis_name="y")
            out = (lib.jit(g) if use_jit else g)(arr)
        res[lib.__name__] = (np.asarray(out), tuple(out.sharding.spec))
    np.testing.assert_array_equal(res["ftrans"][0], res["jax"][0])
    assert res["ftrans"][1] == res["jax"][1] == ("y",)


def test_bare_spec_constraint_in_a_partial_manual_body_names_the_shard_map_mesh_as_jax():
    """No mesh is set: inside the body a bare PartitionSpec names the shard_map's own mesh (JAX's body takes
    it as the context mesh); the constraint lands on the body's free axis in the lowered module."""
    v = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    outs, texts = [], []
    for lib, jnp_ in LIBS:
        P, NS = lib.sharding.PartitionSpec, lib.sharding.NamedSharding
        mesh = _mesh(lib, (2, 2), ("i", "j"), "Auto")

        def g(x, lib=lib, P=P):
            return lib.lax.with_sharding_constraint(x, P(None, "j")) * x

        @lib.jit
        def f(x, lib=lib, mesh=mesh, P=P, NS=NS, g=g):
            y = lib.shard_map(g, mesh=mesh, in_specs=P("i", None), out_specs=P("i", None),
                              axis_names=frozenset({"i"}))(x)
            return lib.lax.with_sharding_constraint(y, NS(mesh, P("i", "j")))

        x = lib.device_put(v, NS(mesh, P("i", "j")))
        outs.append(np.asarray(f(x)))
        texts.append(f.lower(x).as_text())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], v * v)
    for t in texts:
        assert 'manual_axes={"i"}' in t
        assert '<@mesh, [{}, {"j"}]>' in t


def test_bare_spec_constraint_outside_any_mesh_still_refused():
    with pytest.raises(ftrans.errors.NoMeshError, match="no mesh is set"):
        ftrans.jit(lambda x: ftrans.lax.with_sharding_constraint(x, ftrans.sharding.PartitionSpec("i")))(
            np.ones(4, np.float32))
