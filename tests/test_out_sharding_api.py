"""``out_sharding=`` of the random samplers, ``nn.initializers``, ``lax.rng_bit_generator``, ``x.at[idx]``
and ``lax.conv_general_dilated``, against jax: the same values as without it, laid out as asked, typed so over
Explicit mesh axes; and an array laid out anew eagerly is typed by its new layout."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

import ftrans
from ftrans.sharding import NamedSharding, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 4, reason="needs 4 host devices (tests/conftest.py)")


@pytest.fixture(scope="module")
def meshes():
    ex = ftrans.sharding.AxisType.Explicit
    jex = jax.sharding.AxisType.Explicit
    return (ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(ex, ex)),
            jax.make_mesh((2, 2), ("x", "y"), axis_types=(jex, jex)))


def _spec(s):
    t = list(s)
    while t and t[-1] is None:
        t.pop()
    return tuple(t)


SAMPLERS = [
    ("normal", lambda r, k, **kw: r.normal(k, (8, 4), **kw)),
    ("randint", lambda r, k, **kw: r.randint(k, (8, 4), 0, 10, **kw)),
    ("permutation", lambda r, k, **kw: r.permutation(k, 8, **kw)),
]


@pytest.mark.parametrize("name,draw", SAMPLERS, ids=[n for n, _ in SAMPLERS])
def test_sampler_out_sharding_under_jit(meshes, name, draw):
    fm, jm = meshes
    spec = ("x",) if name == "permutation" else ("x", "y")
    seen = {}

    def run(lib, mesh, ns):
        def f(key):
            out = draw(lib.random, key, out_sharding=ns(mesh, lib.sharding.PartitionSpec(*spec)))
            seen[lib.__name__] = _spec(out.aval.sharding.spec)
            return out

        with lib.set_mesh(mesh):
            return lib.jit(f)(lib.random.key(3))

    got = run(ftrans, fm, NamedSharding)
    want = run(jax, jm, jax.sharding.NamedSharding)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert seen["ftrans"] == seen["jax"] == spec
    assert _spec(got.sharding.spec) == _spec(want.sharding.spec) == spec


def test_sampler_out_sharding_bare_spec_and_eager(meshes):
    fm, jm = meshes
    with ftrans.set_mesh(fm):
        got = ftrans.random.uniform(ftrans.random.key(1), (8, 4), out_sharding=P("x"))
    with jax.set_mesh(jm):
        want = jax.random.uniform(jax.random.key(1), (8, 4), out_sharding=jax.P("x"))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert _spec(got.sharding.spec) == _spec(want.sharding.spec) == ("x",)
    with pytest.raises(ftrans.errors.FtransValueError, match="no mesh is set"):
        ftrans.random.normal(ftrans.random.key(1), (8,), out_sharding=P("x"))


def test_initializers_and_rng_bit_generator_out_sharding(meshes):
    fm, jm = meshes
    cases = [lambda nn: nn.initializers.he_normal(in_axis=0, out_axis=1), lambda nn: nn.initializers.constant(-7)]
    for make in cases:
        with ftrans.set_mesh(fm):
            got = make(ftrans.nn)(ftrans.random.key(0), (8, 2), np.float32, out_sharding=P("x"))
        with jax.set_mesh(jm):
            want = make(jax.nn)(jax.random.key(0), (8, 2), np.float32, out_sharding=jax.P("x"))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert _spec(got.sharding.spec) == _spec(want.sharding.spec) == ("x",)
    key = np.array((1, 2, 3, 4), np.uint32)
    with ftrans.set_mesh(fm):
        k1, b1 = ftrans.jit(lambda k: ftrans.lax.rng_bit_generator(k, (4, 8), out_sharding=P("x")))(key)
    with jax.set_mesh(jm):
        k2, b2 = jax.jit(lambda k: jax.lax.rng_bit_generator(k, (4, 8), out_sharding=jax.P("x")))(key)
    np.testing.assert_array_equal(np.asarray(b1), np.asarray(b2))
    np.testing.assert_array_equal(np.asarray(k1), np.asarray(k2))
    assert _spec(b1.sharding.spec) == _spec(b2.sharding.spec) == ("x",)
    assert _spec(k1.sharding.spec) == _spec(k2.sharding.spec) == ()


def test_at_get_and_scatter_out_sharding(meshes):
    fm, jm = meshes
    e_np = np.arange(64.0, dtype=np.float32).reshape(16, 4)
    t_np = np.arange(8, dtype=np.int32).reshape(4, 2) % 16
    res = {}
    for lib, mesh, ns in ((ftrans, fm, NamedSharding), (jax, jm, jax.sharding.NamedSharding)):
        PS = lib.sharding.PartitionSpec
        seen = []

        def f(e, t, PS=PS, seen=seen):
            g = e.at[t].get(out_sharding=PS("x", None, None))
            s = e.at[t[:, 0]].add(1.0, out_sharding=PS(None, "x"))
            seen.extend([_spec(g.aval.sharding.spec), _spec(s.aval.sharding.spec)])
            return g, s

        with lib.set_mesh(mesh):
            e = lib.device_put(e_np, ns(mesh, PS(None, "x")))
            t = lib.device_put(t_np, ns(mesh, PS("x", None)))
            out = lib.jit(f)(e, t)
        res[lib.__name__] = (seen, [np.asarray(o) for o in out], [_spec(o.sharding.spec) for o in out])
    (fs, fv, fo), (js, jv, jo) = res["ftrans"], res["jax"]
    assert fs == js == [("x",), (None, "x")]
    assert fo == jo
    for a, b in zip(fv, jv):
        np.testing.assert_array_equal(a, b)


def test_eager_reshard_retypes_the_array(meshes):
    """An array laid out anew eagerly (reshard, device_put) has the new layout's type, so an eager einsum on
    it is typed as under jit (JAX's pjit_test test_reshard_eager_mode)."""
    fm, jm = meshes
    v = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    got = []
    for lib, mesh, ns, np_ in ((ftrans, fm, NamedSharding, ftrans.numpy), (jax, jm, jax.sharding.NamedSharding,
                                                                          jax.numpy)):
        PS = lib.sharding.PartitionSpec
        a1 = lib.device_put(v, ns(mesh, PS("x", "y")))
        a2 = lib.device_put(v.T, ns(mesh, PS("y", "x")))
        with lib.set_mesh(mesh):
            r = lib.sharding.reshard(a2, PS("y", None))
            out = np_.einsum("xy,yz->xz", a1, r, out_sharding=PS("x", "y"))
        got.append((_spec(r.aval.sharding.spec), _spec(out.aval.sharding.spec), _spec(out.sharding.spec),
                    np.asarray(out)))
    assert got[0][:3] == got[1][:3] == (("y",), ("x", "y"), ("x", "y"))
    np.testing.assert_array_equal(got[0][3], got[1][3])


def test_conv_general_dilated_out_sharding(meshes):
    fm, jm = meshes
    lhs = np.arange(2 * 8 * 3, dtype=np.float32).reshape(2, 8, 3) / 10
    rhs = np.ones((3, 3, 4), np.float32)
    got = []
    for lib, mesh, ns in ((ftrans, fm, NamedSharding), (jax, jm, jax.sharding.NamedSharding)):
        PS = lib.sharding.PartitionSpec
        seen = []

        def f(a, b, lib=lib, PS=PS, seen=seen):
            out = lib.lax.conv_general_dilated(a, b, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"),
                                               out_sharding=PS("x", None, None))
            seen.append(_spec(out.aval.sharding.spec))
            return out

        with lib.set_mesh(mesh):
            a = lib.device_put(lhs, ns(mesh, PS("x")))
            out = lib.jit(f)(a, rhs)
        got.append((seen[0], _spec(out.sharding.spec), np.asarray(out)))
    assert got[0][:2] == got[1][:2] == (("x",), ("x",))
    np.testing.assert_allclose(got[0][2], got[1][2], rtol=1e-6)


SHARDED_INPUT_CASES = [
    ("categorical_replace", lambda r, np_, k, n, s: r.categorical(k, np_.ones((n, 3), out_sharding=s), shape=(n,),
                                                               out_sharding=s, replace=True)),
    ("categorical_no_replace", lambda r, np_, k, n, s: r.categorical(k, np_.ones((n, 3), out_sharding=s), shape=(n,),
                                                                  out_sharding=s, replace=False)),
    ("multivariate_normal", lambda r, np_, k, n, s: r.multivariate_normal(k, mean=np_.zeros((n,)), cov=np_.eye(n),
                                                                       shape=(n,), out_sharding=s)),
]


@pytest.mark.parametrize("name,draw", SHARDED_INPUT_CASES, ids=[n for n, _ in SHARDED_INPUT_CASES])
def test_sampler_out_sharding_draws_with_the_axes_auto(name, draw):
    # JAX's samplers draw under auto_axes over the out_sharding's Explicit axes (maybe_auto_axes), so a
    # reshape of explicitly sharded logits inside categorical(replace=False) needs no out_sharding of its own
    # (JAX's random_lax_test RandomOutShardingTest, which builds its mesh with jax's test utilities).
    def run(lib, np_):
        mesh = lib.make_mesh((4,), ("x",), axis_types=(lib.sharding.AxisType.Explicit,))
        s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x"))
        with lib.set_mesh(mesh):
            eager = draw(lib.random, np_, lib.random.key(0), 4, s)
            jitted = lib.jit(lambda k: draw(lib.random, np_, k, 4, s))(lib.random.key(0))
        assert eager.sharding.is_equivalent_to(s, eager.ndim) and jitted.sharding.is_equivalent_to(s, jitted.ndim)
        return np.asarray(eager), np.asarray(jitted)

    got, want = run(ftrans, ftrans.numpy), run(jax, jax.numpy)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
