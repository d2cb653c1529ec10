"""``experimental.shard_alike`` against jax on 8 host devices: values unchanged, and the second value takes the
layout of the first (in jit through a Shardy sharding group, eagerly by moving it)."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNS
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans.experimental.shard_alike import shard_alike
from ftrans.sharding import AxisType, NamedSharding, P

# jax 0.11 removed jax.experimental.shard_alike (ftrans keeps it): the comparisons need jax 0.10's
jshard_alike = pytest.importorskip("jax.experimental.shard_alike", reason="removed in jax 0.11").shard_alike

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
HERE = os.path.abspath(__file__)


def meshes(shape, names):
    fm = ftrans.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape), devices=ftrans.devices()[:np.prod(shape)])
    jm = jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(shape),
                       devices=jax.devices()[:np.prod(shape)])
    return fm, jm


def spec_of(a):
    t = tuple(a.sharding.spec)
    while t and t[-1] is None:
        t = t[:-1]
    return t


@pytest.mark.parametrize("which", ["square_then_double", "output_alike_input", "arange"])
def test_jit_gives_jax_values_and_layouts(which):
    fm, jm = meshes((2, 2), ("x", "y"))
    x = np.arange(16).reshape(8, 2).astype(np.int32)

    def build(sa, jnp):
        def f(a):
            if which == "square_then_double":
                _, z = sa(a, a * a * 2)
                return z * 2
            if which == "output_alike_input":
                return sa(a, a * 2)[1]
            return sa(a, jnp.arange(16, dtype=np.int32).reshape(8, 2))[1]
        return f

    jout = jax.jit(build(jshard_alike, jax.numpy))(jax.device_put(x, JNS(jm, JP("x", "y"))))
    fout = ftrans.jit(build(shard_alike, fjnp))(ftrans.device_put(x, NamedSharding(fm, P("x", "y"))))
    np.testing.assert_array_equal(np.asarray(fout), np.asarray(jout))
    assert spec_of(fout) == spec_of(jout) == ("x", "y")
    assert "sdy.sharding_group" in ftrans.jit(build(shard_alike, fjnp)).lower(
        ftrans.device_put(x, NamedSharding(fm, P("x", "y")))).as_text()



def test_folded_constant_in_a_group_takes_the_group_layout():
    """A constant computed inside jit (an iota reshaped) grouped with a propagated layout: JAX keeps it an
    equation so both come out laid out as the partitioner chose (P('x')), not replicated."""
    fm, jm = meshes((2, 2), ("x", "y"))
    x = np.arange(16).reshape(8, 2).astype(np.int32)

    def build(sa, jnp):
        def f(a):
            _, y = sa(a, a * 2)
            return sa(y @ y.T, jnp.arange(64, dtype=np.int32).reshape(8, 8))
        return f

    j1, j2 = jax.jit(build(jshard_alike, jax.numpy))(jax.device_put(x, JNS(jm, JP("x", "y"))))
    f1, f2 = ftrans.jit(build(shard_alike, fjnp))(ftrans.device_put(x, NamedSharding(fm, P("x", "y"))))
    for f, j in ((f1, j1), (f2, j2)):
        np.testing.assert_array_equal(np.asarray(f), np.asarray(j))
        assert spec_of(f) == spec_of(j) == ("x",)

def test_different_shapes_are_an_error_as_in_jax():
    x = np.arange(16.0).reshape(8, 2)
    with pytest.raises(ValueError, match="The leaves shapes of `x` and `y` should match"):
        jax.jit(lambda a: jshard_alike(a, a @ a.T))(x)
    with pytest.raises(ValueError, match="The leaves shapes of `x` and `y` should match") as info:
        ftrans.jit(lambda a: shard_alike(a, a @ a.T))(x)
    assert HERE in str(info.value)
    with pytest.raises(ValueError, match="Trees should be equal"):
        shard_alike((x,), [x])


def test_eager_moves_the_other_value():
    fm, jm = meshes((4, 1), ("x", "y"))
    x = np.arange(16).reshape(8, 2).astype(np.int32)
    fx = ftrans.device_put(x, NamedSharding(fm, P("x", "y")))
    jx = jax.device_put(x, JNS(jm, JP("x", "y")))
    fo = shard_alike(fx, fjnp.arange(16, dtype=np.int32).reshape(8, 2))[1]
    jo = jshard_alike(jx, jax.numpy.arange(16, dtype=np.int32).reshape(8, 2))[1]
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    assert fo.sharding.is_equivalent_to(fx.sharding, 2) and jo.sharding.is_equivalent_to(jx.sharding, 2)
    a, b = shard_alike(np.arange(8.0), ftrans.device_put(np.arange(8.0), NamedSharding(fm, P("x"))))
    assert a.sharding == b.sharding == NamedSharding(fm, P("x"))


def test_grad_and_jit_of_grad():
    fm, jm = meshes((4,), ("x",))
    x = np.arange(8.0, dtype=np.float32)

    def build(sa, jnp):
        def f(a):
            a_, b_ = sa(a, jnp.arange(8.0, dtype=np.float32))
            return jnp.sum(jnp.sin(a_) * b_)
        return f

    fx = ftrans.device_put(x, NamedSharding(fm, P("x")))
    jx = jax.device_put(x, JNS(jm, JP("x")))
    want = jax.grad(build(jshard_alike, jax.numpy))(jx)
    for g in (ftrans.grad(build(shard_alike, fjnp)), ftrans.jit(ftrans.grad(build(shard_alike, fjnp))),
              ftrans.grad(ftrans.jit(build(shard_alike, fjnp)))):
        np.testing.assert_allclose(np.asarray(g(fx)), np.asarray(want), rtol=1e-6)


def test_vmap_both_mapped_matches_jax():
    fm, jm = meshes((2, 2), ("x", "y"))
    a = np.arange(16).reshape(8, 2).astype(np.int32)
    b = np.arange(16).reshape(2, 8).astype(np.int32)
    jo1, jo2 = jax.jit(jax.vmap(jshard_alike, in_axes=(0, 1)))(jax.device_put(a, JNS(jm, JP("x", "y"))),
                                                               jax.device_put(b, JNS(jm, JP("y", "x"))))
    fo1, fo2 = ftrans.jit(ftrans.vmap(shard_alike, in_axes=(0, 1)))(
        ftrans.device_put(a, NamedSharding(fm, P("x", "y"))), ftrans.device_put(b, NamedSharding(fm, P("y", "x"))))
    for f, j in ((fo1, jo1), (fo2, jo2)):
        np.testing.assert_array_equal(np.asarray(f), np.asarray(j))
    assert spec_of(fo1) == spec_of(fo2)
    # one mapped: the unmapped one is broadcast along the batch
    fo = ftrans.vmap(lambda r, c: shard_alike(r, c)[0], in_axes=(0, None))(np.tile(a[0], (8, 1)), a[0])
    np.testing.assert_array_equal(np.asarray(fo), np.tile(a[0], (8, 1)))


def test_eager_grad_lays_out_the_primal_as_jax():
    # Under an eager grad the primals are concrete: the second takes the first's layout at once, and
    # inspect_array_sharding of the traced value reports it (as JAX's does).
    fm, jm = meshes((4,), ("x",))
    x = np.arange(8.0, dtype=np.float32)
    seen = {}

    def build(sa, jnp, debug, tag):
        def f(a):
            a_, b_ = sa(a, jnp.arange(8.0, dtype=np.float32))
            debug.inspect_array_sharding(b_, callback=lambda s: seen.__setitem__(tag, s))
            return jnp.sum(a_ * b_)
        return f

    jax.grad(build(jshard_alike, jax.numpy, jax.debug, "jax"))(jax.device_put(x, JNS(jm, JP("x"))))
    ftrans.grad(build(shard_alike, fjnp, ftrans.debug, "ftrans"))(ftrans.device_put(x, NamedSharding(fm, P("x"))))
    assert not seen["jax"].is_fully_replicated and not seen["ftrans"].is_fully_replicated
    assert seen["ftrans"].shard_shape((8,)) == seen["jax"].shard_shape((8,)) == (2,)
