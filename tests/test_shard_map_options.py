"""shard_map's options and the collectives' options, each run under ftrans and under jax (the oracle).

- ``in_specs`` with ``None`` for an argument: it is static, handed to the body as it is (untraced);
- ``ppermute`` over several mesh axes at once (one axis over all of them, row-major).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.sharding import P

pytestmark = pytest.mark.needs_devices(8)


def _mesh(lib, shape, names):
    types = ftrans.sharding.AxisType if lib is ftrans else jax.sharding.AxisType
    return lib.make_mesh(shape, names, axis_types=(types.Auto,) * len(shape))


@pytest.mark.parametrize("lib", ["ftrans", "jax"])
def test_in_specs_none_is_static(lib):
    sm, np_, P_ = (ftrans.shard_map, fjnp, P) if lib == "ftrans" else (jax.shard_map, jjnp, JP)
    mesh = _mesh(ftrans if lib == "ftrans" else jax, (4,), ("i",))
    x = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    seen = []

    def f(o, x, scale):
        seen.append((o, scale))
        return np_.sin(x) * scale["k"]

    obj = object()
    y = sm(f, mesh=mesh, in_specs=(None, P_("i"), {"k": None}), out_specs=P_("i"))(obj, x, {"k": 3})
    np.testing.assert_allclose(np.asarray(y), np.sin(x) * 3, rtol=1e-6)
    assert seen[-1][0] is obj and seen[-1][1] == {"k": 3}  # untraced: the very objects
    # an array under a None spec is closed over whole (the same on every device)
    z = sm(lambda a, b: a[:1] + b, mesh=mesh, in_specs=(None, P_("i")), out_specs=P_("i"))(x, x)
    np.testing.assert_allclose(np.asarray(z), x[:1] + x)
    # in_specs=None: every argument static
    assert float(sm(lambda a: a, mesh=mesh, in_specs=None, out_specs=P_())(3.0)) == 3.0
    if lib == "jax":
        return
    # under jit with the static argument marked static there too
    g = (ftrans.jit if lib == "ftrans" else jax.jit)(
        sm(f, mesh=mesh, in_specs=(None, P_("i"), None), out_specs=P_("i")), static_argnums=(0,))
    np.testing.assert_allclose(np.asarray(g(None, x, {"k": 2})), np.sin(x) * 2, rtol=1e-6)


@pytest.mark.parametrize("lib", ["ftrans", "jax"])
def test_in_specs_none_errors_still_checked(lib):
    sm, P_ = (ftrans.shard_map, P) if lib == "ftrans" else (jax.shard_map, JP)
    mesh = _mesh(ftrans if lib == "ftrans" else jax, (4,), ("i",))
    x = np.arange(2.0, dtype=np.float32)
    with pytest.raises(ValueError, match="divisible"):
        sm(lambda *_: None, mesh=mesh, in_specs=(None, P_("i")), out_specs=None)(object(), x)
    with pytest.raises(ValueError, match="rank"):
        sm(lambda *_: None, mesh=mesh, in_specs=((None, None), P_("i", None)), out_specs=None)(
            (object(), object()), x)


def test_ppermute_several_axes_matches_jax():
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)

    def run(lib, lax_, P_):
        mesh = _mesh(lib, (2, 2, 2), ("x", "y", "z"))
        spec = P_("x", ("y", "z"))

        @partial(lib.shard_map, mesh=mesh, in_specs=(spec,), out_specs=spec)
        def fwd(a):
            xy = lax_.axis_size(("x", "y"))
            yz = lax_.axis_size(("y", "z"))
            return (lax_.ppermute(a, ("x", "y"), perm=[(j, (j + 1) % xy) for j in range(xy)]),
                    lax_.ppermute(a, ("y", "z"), perm=[(j, (3 * j + 1) % yz) for j in range(yz)]))

        out, grad = lib.jit(lambda a: (fwd(a), lib.grad(lambda a: (fwd(a)[0] * a).sum() + fwd(a)[1][0, 0])(a)))(x)
        return [np.asarray(o) for o in out] + [np.asarray(grad)]

    for a, b in zip(run(ftrans, flax, P), run(jax, jax.lax, JP)):
        np.testing.assert_allclose(a, b)


def _nested(lib, P_, mesh, power):
    def g(x):  # manual over 'i' (the outer's) and 'j' (its own)
        return x ** power

    def h(x):  # manual over 'i', 'j' still automatic: the nested shard_map takes the enclosing mesh
        return lib.shard_map(g, in_specs=P_(None, "j"), out_specs=P_(None, "j"))(x)

    def f(x):
        return lib.shard_map(h, mesh=mesh, in_specs=P_("i", None), out_specs=P_("i", None), check_vma=False,
                             axis_names=frozenset({"i"}))(x)

    return f


@pytest.mark.parametrize("power", [3])
def test_nested_partial_auto_shard_map_matches_jax(power):
    v = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    fmesh, jmesh = _mesh(ftrans, (2, 2), ("i", "j")), _mesh(jax, (2, 2), ("i", "j"))
    f = _nested(ftrans, P, fmesh, power)
    fout = [ftrans.jit(f)(v), ftrans.grad(lambda x: f(x).sum())(v)]
    jf = _nested(jax, JP, None, power)  # jax: the mesh from the context
    with jax.set_mesh(jmesh):
        jout = [jax.jit(jf)(v), jax.jit(jax.grad(lambda x: jf(x).sum()))(v)]
    for a, b in zip(fout, jout):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_nested_shard_map_with_its_own_mesh_raises():
    mesh = _mesh(ftrans, (2, 2), ("i", "j"))
    inner = ftrans.shard_map(lambda x: x, mesh=mesh, in_specs=P(None, "j"), out_specs=P(None, "j"))
    f = ftrans.shard_map(inner, mesh=mesh, in_specs=P("i", None), out_specs=P("i", None),
                         axis_names=frozenset({"i"}))
    with pytest.raises(ValueError, match="context mesh.*should match the mesh passed to shard_map"):
        ftrans.jit(f)(np.zeros((4, 8), np.float32))


def test_axis_index_groups_match_jax():
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)

    def run(lib, lax_, P_):
        spec = P_("x", ("y", "z"))

        @partial(lib.shard_map, mesh=_mesh(lib, (2, 2, 2), ("x", "y", "z")), in_specs=(spec,), out_specs=spec)
        def f(a):
            g = lax_.all_gather(a, ("y", "z"), axis_index_groups=((0, 1), (2, 3)), axis=-1, tiled=True)
            s = lax_.psum_scatter(a, ("x", "y", "z"), scatter_dimension=0,
                                  axis_index_groups=((0, 2, 4, 6), (1, 3, 5, 7)), tiled=True)
            t = lax_.all_to_all(a, "z", 0, 0, axis_index_groups=((0, 1),), tiled=True)
            return g[:, :2] + t[:, :2], s

        out = lib.jit(lambda a: (f(a), lib.grad(lambda a: sum((o * o).sum() for o in f(a)))(a)))(a)
        return [np.asarray(o) for o in lib.tree_util.tree_leaves(out)]

    for x, y in zip(run(ftrans, flax, P), run(jax, jax.lax, JP)):
        np.testing.assert_allclose(x, y, rtol=1e-5)


def test_axis_index_groups_reductions_under_pmap_match_jax():
    x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)

    def run(lib, lax_):
        def f(v):
            return (lax_.psum(v, "i", axis_index_groups=((0, 3, 4, 7), (1, 2, 5, 6))),
                    lax_.pmean(v, "i", axis_index_groups=((0, 1), (2, 3), (4, 5), (6, 7))),
                    lax_.pmax(v, "i", axis_index_groups=((0, 1, 2, 3), (4, 5, 6, 7))))

        return [np.asarray(o) for o in lib.pmap(f, axis_name="i")(x)]

    for a, b in zip(run(ftrans, flax), run(jax, jax.lax)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_axis_index_groups_errors():
    mesh = _mesh(ftrans, (4,), ("i",))
    for groups in [((0, 1), (2,)), ((0, 1), (1, 2)), ((0, 1),)]:
        with pytest.raises(ValueError, match="axis_index_groups"):
            ftrans.shard_map(lambda v: flax.psum(v, "i", axis_index_groups=groups), mesh=mesh, in_specs=P("i"),
                             out_specs=P("i"))(np.zeros(4, np.float32))
    # a psum within groups still varies over the axis: check_vma refuses an out_specs that drops it
    with pytest.raises(ValueError, match="out_specs"):
        ftrans.shard_map(lambda v: flax.psum(v, "i", axis_index_groups=((0, 1), (2, 3))), mesh=mesh,
                         in_specs=P("i"), out_specs=P())(np.zeros(4, np.float32))


def test_all_gather_to_invarying_matches_jax():
    a = np.arange(8 * 8, dtype=np.float32).reshape(8, 8)

    def run(lib, lax_, P_):
        mesh = _mesh(lib, (2, 2, 2), ("x", "y", "z"))

        # out_specs leave the gathered axes out: check_vma accepts it only for to='invarying'
        @partial(lib.shard_map, mesh=mesh, in_specs=(P_("z", ("x", "y")),), out_specs=(P_(None, ("x", "y")), P_("z")))
        def f(a):
            return (lax_.all_gather(a, "z", axis=0, tiled=True, to="invarying"),
                    lax_.all_gather(a, ("x", "y"), axis=-1, tiled=True, to="invarying"))

        out = lib.jit(lambda a: (f(a), lib.grad(lambda a: (f(a)[0] ** 2).sum() + f(a)[1].sum())(a)))(a)
        return [np.asarray(o) for o in lib.tree_util.tree_leaves(out)]

    for x, y in zip(run(ftrans, flax, P), run(jax, jax.lax, JP)):
        np.testing.assert_allclose(x, y, rtol=1e-6)
    mesh = _mesh(ftrans, (4,), ("i",))
    with pytest.raises(ValueError, match="out_specs"):  # the plain (varying) all_gather is refused there
        ftrans.shard_map(lambda v: flax.all_gather(v, "i", tiled=True), mesh=mesh, in_specs=P("i"),
                         out_specs=P())(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="to"):
        ftrans.shard_map(lambda v: flax.all_gather(v, "i", to="nowhere"), mesh=mesh, in_specs=P("i"),
                         out_specs=P("i"))(np.zeros(4, np.float32))


@pytest.mark.parametrize("lib", ["ftrans", "jax"])
def test_empty_mesh_raises(lib):
    sm, P_ = (ftrans.shard_map, P) if lib == "ftrans" else (jax.shard_map, JP)
    mesh = jax.sharding.Mesh(np.empty((), dtype=object), ())  # JAX's empty mesh (ftrans accepts jax meshes)
    with pytest.raises(ValueError, match="shard_map requires a non-empty mesh"):
        sm(lambda x: x, mesh=mesh, in_specs=P_("x"), out_specs=P_("x"))(np.arange(8))


@pytest.mark.parametrize("lib", ["ftrans", "jax"])
def test_device_put_on_a_device_in_an_eager_body_raises(lib):
    """A shard_map called outside jit refuses a device_put onto one device in its body (JAX's ValueError);
    under jit it is ignored, and a device_put with no device is fine either way."""
    m = ftrans if lib == "ftrans" else jax
    mesh = _mesh(m, (4,), ("i",))
    spec = P("i") if lib == "ftrans" else JP("i")
    x = np.arange(8.0, dtype=np.float32)
    ok = m.shard_map(lambda a: a + m.device_put(1), mesh=mesh, in_specs=spec, out_specs=spec)
    np.testing.assert_allclose(np.asarray(ok(x)), x + 1)
    bad = m.shard_map(lambda a: a + m.device_put(1, m.devices()[0]), mesh=mesh, in_specs=spec, out_specs=spec)
    with pytest.raises(ValueError, match="got device"):
        bad(x)
    np.testing.assert_allclose(np.asarray(m.jit(bad)(x)), x + 1)
