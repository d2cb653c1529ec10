"""``vmap(..., spmd_axis_name=...)``: the batch dimension split over mesh axes, against jax."""

import jax
import numpy as np
import pytest

import ftrans
from ftrans.sharding import AxisType, NamedSharding
from ftrans.sharding import PartitionSpec as P

pytestmark = pytest.mark.needs_devices(8)


@pytest.fixture(scope="module")
def meshes():
    fm = ftrans.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jm = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    return fm, jm


X = np.arange(8 * 4 * 6, dtype=np.float32).reshape(8, 4, 6)


def _constraint(lib, mesh, NS, PS):
    def f(a):
        return lib.lax.with_sharding_constraint(a * 2, NS(mesh, PS("y"))) + 1
    return f


def _smap(lib, mesh, PS):
    def g(a):
        body = lambda b: b * lib.lax.axis_index("y").astype(b.dtype) + lib.lax.psum(b.sum(), "y")  # noqa: E731
        return lib.shard_map(body, mesh=mesh, in_specs=PS("y"), out_specs=PS("y"))(a)
    return g


def test_constraint_gets_the_spmd_axis(meshes):
    fm, jm = meshes
    f = _constraint(ftrans, fm, NamedSharding, P)
    j = _constraint(jax, jm, jax.sharding.NamedSharding, jax.sharding.PartitionSpec)
    got = ftrans.jit(ftrans.vmap(f, spmd_axis_name="x"))(X)
    want = jax.jit(jax.vmap(j, spmd_axis_name="x"))(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    assert tuple(got.sharding.spec) == tuple(want.sharding.spec) == ("x", "y")
    text = ftrans.jit(ftrans.vmap(f, spmd_axis_name="x")).lower(X).as_text()
    assert '[{"x"}, {"y"}, {}]' in text
    # without it the batch dimension stays unsplit
    assert tuple(ftrans.jit(ftrans.vmap(f))(X).sharding.spec) == tuple(jax.jit(jax.vmap(j))(X).sharding.spec)


def test_shard_map_under_spmd_vmap_values_and_grad(meshes):
    fm, jm = meshes
    g = _smap(ftrans, fm, P)
    h = _smap(jax, jm, jax.sharding.PartitionSpec)
    want = jax.jit(jax.vmap(h, spmd_axis_name="x"))(X)
    np.testing.assert_allclose(np.asarray(ftrans.jit(ftrans.vmap(g, spmd_axis_name="x"))(X)), np.asarray(want))
    np.testing.assert_allclose(np.asarray(ftrans.vmap(g, spmd_axis_name=("x",))(X)), np.asarray(want))
    gf = ftrans.grad(lambda a: ftrans.vmap(g, spmd_axis_name="x")(a).sum())(X)
    gj = jax.grad(lambda a: jax.vmap(h, spmd_axis_name="x")(a).sum())(X)
    np.testing.assert_allclose(np.asarray(gf), np.asarray(gj))


def test_spmd_axis_name_errors(meshes):
    fm, _ = meshes
    g = _smap(ftrans, fm, P)
    with pytest.raises(ValueError, match="cannot appear in shard_map in_specs"):
        ftrans.vmap(g, spmd_axis_name="y")(X)
    with pytest.raises(ValueError, match="lacks"):
        ftrans.vmap(g, spmd_axis_name="z")(X)
    with pytest.raises(ValueError, match="not divisible by the 4 devices"):
        ftrans.vmap(g, spmd_axis_name="x")(X[:6])
    with pytest.raises(TypeError, match="spmd_axis_name must be"):
        ftrans.vmap(g, spmd_axis_name=3)
