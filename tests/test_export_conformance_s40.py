"""Export / shape-polymorphism conformance gaps found by JAX's export_test.py, each checked against jax.export:
the symbolic dimensions' max/min methods (what ``core.max_dim`` calls), the calling-convention version option,
results typed by the exported out shardings (unreduced axes), a polymorphic shard_map module called on a mesh,
``use_shardy_partitioner`` off, and ``jax.memory.Space`` / ``aval.memory_space``."""
import copy
import functools

import jax
import numpy as np
import pytest

import ftrans

# ---------------------------------------------------------------- symbolic dimensions


def _dims(lib):
    return lib.export.symbolic_shape("a, b", constraints=("a >= 3", "b <= 20"))


@pytest.mark.parametrize("expr", [
    "a.max(b)", "a.rmax(b)", "a.min(b)", "a.rmin(b)", "a.max(1)", "a.rmax(7)", "a.min(2)", "b.min(30)",
    "(a - 5).max(0)", "(a + 1).max(a)", "(a + 1).min(a)", "a.max(b) + 1",
    "core.max_dim(a - 5, 0)", "core.max_dim(0, a - 5)", "core.min_dim(7, a)", "core.max_dim(a, b) >= a",
    "divmod(7, a)", "divmod(0, a)", "divmod(2 * a + 1, a)", "divmod(a, 2)",
])
def test_dim_expr_max_min_divmod_like_jax(expr):
    def ev(lib):
        a, b = _dims(lib)
        return repr(eval(expr, {"a": a, "b": b, "core": lib.core}))

    assert ev(ftrans) == ev(jax)


def test_dim_expr_copies_are_the_expression():
    a, _ = _dims(ftrans)
    e = 2 * a + 1
    assert copy.copy(e) is e and copy.deepcopy(e) is e
    assert copy.deepcopy([e, a])[0] == e  # same scope: still comparable


def test_poly_output_shape_with_max_dim_like_jax():
    """JAX's test_poly_expressions: an exported module whose output shape holds symbolic expressions (with
    core.max_dim) is called, and re-exported polymorphically."""
    def run(lib):
        def output_shape(b):
            return (b + b, b - b, b * b, (b + 13) // b, (b + 13) % b, lib.core.max_dim(b - 5, 0))

        f = lib.jit(lambda x: lib.numpy.ones(output_shape(x.shape[0]), dtype=x.dtype))
        x = np.arange(5, dtype=np.float32)
        exp = lib.export.export(f)(lib.ShapeDtypeStruct(lib.export.symbolic_shape("b"), x.dtype))
        res = exp.call(x)
        exp2 = lib.export.export(lib.jit(exp.call))(lib.ShapeDtypeStruct(lib.export.symbolic_shape("a"), x.dtype))
        a = exp2.in_avals[0].shape[0]
        assert exp2.out_avals[0].shape == output_shape(a)
        return np.asarray(res), str(exp2.out_avals[0].shape)

    got, want = run(ftrans), run(jax)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]


# ---------------------------------------------------------------- calling convention version


@pytest.mark.parametrize("v", [8, 9, 10, 11])
def test_calling_convention_version_option_like_jax(v):
    from ftrans.core.config import config_context

    def run(lib, ctx):
        with ctx(v):
            try:
                return lib.export.export(lib.jit(lib.numpy.sin))(np.ones(3, np.float32)).calling_convention_version
            except ValueError as e:
                return str(e).splitlines()[0]

    got = run(ftrans, config_context("export_calling_convention_version"))
    want = run(jax, jax._src.config.jax_export_calling_convention_version)
    assert got == want
    if v in (8, 11):
        assert "outside the range of supported versions [9..10]" in got


# ---------------------------------------------------------------- sharding of results


def _unreduced(lib):
    sh = lib.sharding
    mesh = lib.make_mesh((2,), ("x",), axis_types=(sh.AxisType.Explicit,))
    inp = np.arange(4).reshape(2, 2)
    with lib.set_mesh(mesh):
        x = lib.device_put(inp, sh.PartitionSpec(None, "x"))
        y = lib.device_put(inp, sh.PartitionSpec("x", None))
        f = lib.jit(lambda x, y: lib.numpy.einsum("ab,bc->ac", x, y,
                                                 out_sharding=sh.PartitionSpec(None, None, unreduced={"x"})))
        exp = lib.export.export(f)(x, y)
        out = exp.call(x, y)
        typed = []
        lib.jit(lambda x, y: typed.append(lib.typeof(exp.call(x, y)).sharding.spec) or 0)(x, y)
        red = lib.reshard(out, sh.PartitionSpec(None, None))
    return out, typed[0], red


def test_call_exported_result_keeps_unreduced_type_like_jax():
    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices")
    got, want = _unreduced(ftrans), _unreduced(jax)
    assert got[0].sharding.spec.partitions == want[0].sharding.spec.partitions
    assert got[0].sharding.spec.unreduced == want[0].sharding.spec.unreduced == frozenset({"x"})
    assert got[1].unreduced == want[1].unreduced == frozenset({"x"})
    for g, w in zip(got[0].addressable_shards, want[0].addressable_shards):
        np.testing.assert_array_equal(np.asarray(g.data), np.asarray(w.data))
    np.testing.assert_array_equal(np.asarray(got[2]), np.asarray(want[2]))


def _permute(lib, poly):
    sh = lib.sharding
    mesh = sh.Mesh(np.array(lib.devices()[:2]), ("x",))
    a = np.arange(16, dtype=np.float32).reshape((4, 4))
    spec = sh.NamedSharding(mesh, sh.PartitionSpec("x", None))

    @functools.partial(lib.jit, in_shardings=spec, out_shardings=spec)
    @functools.partial(lib.shard_map, mesh=mesh, in_specs=(sh.PartitionSpec("x", None),),
                       out_specs=sh.PartitionSpec("x", None))
    def f(b):
        n = lib.lax.axis_size("x")
        return lib.lax.ppermute(b, "x", perm=[(j, (j + 1) % n) for j in range(n)])

    exp = lib.export.export(f)(*lib.export.symbolic_args_specs((a,), poly))
    with pytest.raises(ValueError, match="was exported for 2 devices and is called in a context with 1 devices"):
        exp.call(a)
    res = exp.call(lib.device_put(a, sh.NamedSharding(mesh, sh.PartitionSpec())))
    return np.asarray(res), [s.index for s in res.addressable_shards]


@pytest.mark.parametrize("poly", [None, "2*b1,_", "_,b2", "2*b1,b2"])
def test_polymorphic_shard_map_collective_permute_like_jax(poly):
    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices")
    got, want = _permute(ftrans, poly), _permute(jax, poly)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1]


def test_shardy_module_called_with_shardy_off_raises_like_jax():
    from ftrans.core.config import config_context

    def run(lib, ctx):
        sh = lib.sharding
        mesh = lib.make_mesh((2,), ("a",), axis_types=(sh.AxisType.Auto,))
        f = lib.jit(lambda x: lib.lax.with_sharding_constraint(x * 2, sh.NamedSharding(mesh, sh.PartitionSpec("a"))))
        spec = lib.ShapeDtypeStruct((4, 4), np.float32, sharding=sh.NamedSharding(mesh, sh.PartitionSpec(None, "a")))
        exp = lib.export.export(f)(spec)
        a = lib.device_put(np.ones((4, 4), np.float32), sh.NamedSharding(mesh, sh.PartitionSpec(None, "a")))
        with ctx(False):
            with pytest.raises(ValueError, match="exported with shardy enabled but you are calling it with Shardy "
                                                 "disabled. Please enable Shardy"):
                lib.jit(exp.call)(a)
        return np.asarray(lib.jit(exp.call)(a))

    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices")
    np.testing.assert_array_equal(run(ftrans, config_context("use_shardy_partitioner")),
                                  run(jax, jax._src.config.use_shardy_partitioner))


# ---------------------------------------------------------------- memory spaces


def test_memory_space_like_jax():
    assert [s.name for s in ftrans.memory.Space] == [s.name for s in jax.memory.Space]
    x = np.ones(3, np.float32)
    assert ftrans.typeof(ftrans.numpy.asarray(x)).memory_space.name == jax.typeof(jax.numpy.asarray(x)).memory_space.name
    exp = ftrans.export.export(ftrans.jit(lambda v: v * 2))(x)
    assert exp.in_avals[0].memory_space is ftrans.memory.Space.Device
    aval = ftrans.core.ShapedArray((3,), np.float32)
    assert aval.update(memory_space=ftrans.memory.Space.Device) == aval
    assert repr(ftrans.memory.Space.Host) == repr(jax.memory.Space.Host)
    with pytest.raises(NotImplementedError, match="default memory"):
        aval.update(memory_space=ftrans.memory.Space.Host)
    with pytest.raises(NotImplementedError, match="default memory"):
        ftrans.core.ShapedArray((3,), np.float32, memory_space=ftrans.memory.Space.Host)
