"""Nested shard_map/smap and shard_map under vmap over Explicit-split arguments, run under ftrans and under
jax (the oracle): the varying-manual-axes types each body sees, values and gradients, result shardings, and
JAX's errors (pcast called eagerly outside a body; axis_names naming a vmapped-away Explicit axis).
"""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNS
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import NamedSharding as FNS
from ftrans.sharding import P

pytestmark = pytest.mark.needs_devices(8)


def _mesh(lib, shape, names, kind="Auto"):
    types = ftrans.sharding.AxisType if lib is ftrans else jax.sharding.AxisType
    return lib.make_mesh(shape, names, axis_types=(getattr(types, kind),) * len(shape))


def _nested_smap(lib, seen):
    def g(x):
        seen.append(("g", set(lib.typeof(x).mat.varying)))
        out = x * x
        seen.append(("g out", set(lib.typeof(out).mat.varying)))
        return out

    def h(x):
        seen.append(("h", set(lib.typeof(x).mat.varying)))
        out = lib.smap(g, in_axes=0, out_axes=0, axis_name="y")(x)
        seen.append(("h out", set(lib.typeof(out).mat.varying)))
        return out

    return lambda x: lib.smap(h, in_axes=0, out_axes=0, axis_name="x")(x)


@pytest.mark.parametrize("use_jit", [False, True])
def test_nested_smap_types_and_values_match_jax(use_jit):
    v = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    res = {}
    for lib in (ftrans, jax):
        seen: list = []
        f = _nested_smap(lib, seen)
        f = lib.jit(f) if use_jit else f
        mesh = _mesh(lib, (2, 2, 2), ("x", "y", "z"))
        with lib.set_mesh(mesh):
            out = f(v)
        res[lib.__name__] = (seen, np.asarray(out))
    assert res["ftrans"][0] == res["jax"][0]
    assert res["ftrans"][0][1] == ("g", {"x", "y"})
    np.testing.assert_allclose(res["ftrans"][1], res["jax"][1])


@pytest.mark.parametrize("use_jit", [False, True])
def test_nested_smap_psum_types_match_jax(use_jit):
    res = {}
    for lib, jnp_ in ((ftrans, fjnp), (jax, jjnp)):
        seen: list = []

        def f(x, lib=lib, jnp_=jnp_, seen=seen):
            x = jnp_.sin(x)

            def g(x):
                seen.append(set(lib.typeof(x).mat.varying))
                x = lib.lax.psum(x, "y")
                seen.append(set(lib.typeof(x).mat.varying))
                return x

            x = lib.smap(g, axis_name="y", in_axes=0, out_axes=None)(x)
            seen.append(set(lib.typeof(x).mat.varying))
            return x

        f = lib.smap(f, axis_name="x", in_axes=0, out_axes=0)
        f = lib.jit(f) if use_jit else f
        with lib.set_mesh(_mesh(lib, (2, 2), ("x", "y"))):
            out = f(np.arange(4.0, dtype=np.float32))
        res[lib.__name__] = (seen, np.asarray(out))
    assert res["ftrans"][0] == res["jax"][0] == [{"x", "y"}, {"x"}, {"x"}]
    np.testing.assert_allclose(res["ftrans"][1], res["jax"][1], rtol=1e-6)


@pytest.mark.parametrize("inner_check", [True, False])
def test_grad_of_nested_shard_map_matches_jax(inner_check):
    v = np.arange(32.0, dtype=np.float32).reshape(4, 8)

    def build(lib, P_):
        def g(x):
            return x * x * x

        def h(x):
            return lib.shard_map(g, in_specs=P_(None, "j"), out_specs=P_(None, "j"), check_vma=inner_check)(x)

        return lambda x: lib.shard_map(h, in_specs=P_("i", None), out_specs=P_("i", None), check_vma=False,
                                       axis_names=frozenset({"i"}))(x).sum()

    outs = []
    for lib, P_ in ((ftrans, P), (jax, JP)):
        f = build(lib, P_)
        with lib.set_mesh(_mesh(lib, (2, 2), ("i", "j"))):
            outs.append((np.asarray(lib.jit(f)(v)), np.asarray(lib.jit(lib.grad(f))(v))))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(outs[0][1], 3 * v * v, rtol=1e-6)


@pytest.mark.parametrize("case", ["psum", "single", "two_axes"])
def test_vmap_of_shard_map_over_explicit_split_batch_matches_jax(case):
    res = []
    for lib, P_, NS, jnp_ in ((ftrans, P, FNS, fjnp), (jax, JP, JNS, jjnp)):
        if case == "two_axes":
            mesh = _mesh(lib, (1, 2, 2), ("z", "x", "y"), "Explicit")
            x = lib.device_put(np.arange(16).reshape(4, 4), NS(mesh, P_(("z", "x"), "y")))
            f = lib.shard_map(lambda x: x * 2, mesh=mesh, in_specs=P_("y"), out_specs=P_("y"))
        else:
            mesh = _mesh(lib, (2, 2), ("x", "y"), "Explicit")
            x = lib.device_put(np.arange(16.0, dtype=np.float32).reshape(2, 8) if case == "psum"
                               else np.arange(16).reshape(4, 4), NS(mesh, P_("x", "y")))
            if case == "psum":
                f = lib.shard_map(lambda x: lib.lax.psum(x, "y"), mesh=mesh, in_specs=P_("y"), out_specs=P_(None))
            else:
                f = lib.shard_map(lambda x: jnp_.cos(x), mesh=mesh, in_specs=P_("y"), out_specs=P_("y"))
        with lib.set_mesh(mesh):
            eager = lib.vmap(f)(x)
            jitted = lib.jit(lib.vmap(f))(x)
        res.append([(np.asarray(o), tuple(o.sharding.spec)) for o in (eager, jitted)])
    for (fa, fs), (ja, js) in zip(*res):
        np.testing.assert_allclose(fa, ja, rtol=1e-6)
        assert fs == js


def test_vmap_grad_of_shard_map_under_explicit_vmap_matches_jax():
    np_inp = np.arange(6 * 24, dtype=np.float32).reshape(6, 24)
    res = []
    for lib, P_ in ((ftrans, P), (jax, JP)):
        mesh = _mesh(lib, (2, 2), ("x", "y"), "Explicit")
        with lib.set_mesh(mesh):
            arr = lib.device_put(np_inp, P_("x", None))

            def g(x, lib=lib, P_=P_):
                x = lib.reshard(x, P_("y"))
                out = lib.shard_map(lib.numpy.cos, in_specs=P_("y"), out_specs=P_("y"))(x)
                return out.sum()

            out = lib.jit(lib.vmap(lib.grad(g)))(arr)
        res.append((np.asarray(out), tuple(out.sharding.spec)))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    assert res[0][1] == res[1][1] == ("x", None)


def test_shard_map_under_explicit_vmap_axis_names_error():
    mesh = _mesh(ftrans, (2, 2), ("x", "y"), "Explicit")
    f = ftrans.shard_map(lambda x: x, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x", "y"})
    x = ftrans.device_put(np.arange(16).reshape(4, 4), FNS(mesh, P("x", "y")))
    with pytest.raises(ValueError, match="jax.shard_map requires axis_names.*subset of"):
        ftrans.jit(ftrans.vmap(f))(x)
    with pytest.raises(ValueError, match="Only one of spmd_axis_name or arrays sharded on `Explicit` mesh axis"):
        ftrans.jit(ftrans.vmap(f, spmd_axis_name="y"))(x)


@pytest.mark.parametrize("lib", ["ftrans", "jax"])
def test_pcast_called_eagerly_outside_shard_map_raises(lib):
    lib_ = ftrans if lib == "ftrans" else jax
    P_ = P if lib == "ftrans" else JP
    inp = np.arange(8.0, dtype=np.float32)
    with lib_.set_mesh(_mesh(lib_, (2,), ("x",), "Explicit")):
        def f(x):
            return lib_.lax.pcast(x, "x", to="varying")

        fs = lib_.shard_map(f, in_specs=P_(), out_specs=P_("x"))
        np.testing.assert_array_equal(np.asarray(fs(inp)), np.concatenate([inp, inp]))
        np.testing.assert_array_equal(np.asarray(lib_.jit(lib_.grad(lambda x: fs(x).sum()))(inp)), 2 * np.ones(8))
        with pytest.raises(ValueError, match="pvary should be called under jax.shard_map"):
            f(inp)


def test_mat_invarying_matches_jax():
    res = []
    for lib, P_ in ((ftrans, P), (jax, JP)):
        mesh = _mesh(lib, (2,), ("x",), "Explicit")
        seen = []
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(8), P_())
            seen.append(set(lib.typeof(arr).mat.invarying(mesh)))

            @lib.jit
            @lib.shard_map(out_specs=P_(), in_specs=P_())
            def f(x, lib=lib, seen=seen):
                am = lib.sharding.get_abstract_mesh()
                seen.append(set(lib.typeof(x).mat.invarying(am)))
                v = lib.lax.pcast(x, "x", to="varying")
                seen.append(set(lib.typeof(v).mat.invarying(am)))
                return x * 2

            f(arr)
        res.append(seen)
    assert res[0] == res[1] == [set(), {"x"}, set()]


@pytest.mark.parametrize("use_jit", [False, True])
def test_eval_shape_in_a_body_keeps_the_varying_axes_as_jax(use_jit):
    res = []
    for lib, P_, jnp_ in ((ftrans, P, fjnp), (jax, JP, jjnp)):
        seen = []
        with lib.set_mesh(_mesh(lib, (2,), ("x",), "Explicit")):
            p = lib.device_put(np.arange(5.0, dtype=np.float32), P_())
            x = lib.device_put(np.arange(40.0, dtype=np.float32).reshape(8, 5), P_("x"))

            def f(p, x, jnp_=jnp_):
                return jnp_.einsum("i, i->", x, p)

            @lib.shard_map(in_specs=(P_(), P_("x")), out_specs=P_("x"))
            def g(p, x, lib=lib, f=f, seen=seen):
                def one_row(x):
                    _, vjp_fun = lib.vjp(f, p, x)
                    y = lib.eval_shape(f, p, x)
                    one = lib.lax.full_like(y, 1)
                    seen.append((y.shape, set(lib.typeof(y).mat.varying), set(lib.typeof(one).mat.varying)))
                    return vjp_fun(one)[1]

                return lib.lax.map(one_row, x)

            out = (lib.jit(g) if use_jit else g)(p, x)
        res.append((seen[0], np.asarray(out)))
    assert res[0][0] == res[1][0] == ((), {"x"}, {"x"})
    np.testing.assert_allclose(res[0][1], res[1][1])


@pytest.mark.parametrize("lib", ["ftrans", "jax"])
def test_linearize_in_a_body_with_a_tangent_varying_more_than_its_primal_raises(lib):
    lib_, P_, jnp_ = (ftrans, P, fjnp) if lib == "ftrans" else (jax, JP, jjnp)
    mesh = _mesh(lib_, (2,), ("x",))

    def f(x):
        return jnp_.mean(x ** 2)

    def m(p, t, cast):
        if cast:
            p = lib_.lax.pcast(p, "x", to="varying")
        _, fwd = lib_.linearize(f, p)
        return lib_.linear_transpose(fwd, p)(fwd(t))

    def run(cast):
        return lib_.shard_map(lambda t: m(jnp_.array([1.0]), t, cast), mesh=mesh, in_specs=P_("x"),
                              out_specs=P_("x"))(jnp_.ones((2,)))

    with pytest.raises(ValueError, match=r"applying `jax.lax.pcast\(..., \('x',\).*to the primal value passed"):
        run(False)
    np.testing.assert_allclose(np.asarray(run(True)[0]), [4.0, 4.0])  # (jax: d(2t)ᵀ applied to 2)
    np.testing.assert_allclose(np.asarray(lib_.jit(lambda: run(True))()[0]), [4.0, 4.0])


@pytest.mark.parametrize("use_jit", [False, True])
def test_ref_arguments_of_shard_map_match_jax(use_jit):
    res = []  # (jax 0.10.2's eager shard_map fails an internal assertion on the second call: jax runs under jit)
    for lib, P_, jnp_ in ((ftrans, P, fjnp), (jax, JP, jjnp)):
        use_jit = use_jit or lib is jax
        with lib.set_mesh(_mesh(lib, (2,), ("x",), "Explicit")):
            x_ref = lib.new_ref(jnp_.zeros(4, "float32", out_sharding=P_("x")))

            @lib.shard_map(out_specs=None)
            def f(x_ref, lib=lib):
                x_ref[...] += lib.lax.axis_index("x").astype("float32")

            def g(r, y):
                r[...] = r[...] * 2 + y
                return y * 3

            g = lib.shard_map(g, in_specs=(P_("x"), P_("x")), out_specs=P_("x"))
            (lib.jit(f) if use_jit else f)(x_ref)
            first = np.asarray(x_ref[...])
            out = (lib.jit(g) if use_jit else g)(x_ref, lib.device_put(jnp_.ones(4), P_("x")))
            res.append((first, np.asarray(out), np.asarray(x_ref[...])))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(res[0][2], [1.0, 1.0, 3.0, 3.0])
    np.testing.assert_allclose(res[0][1], [3.0] * 4)


def test_dce_prunes_shard_map_outputs_body_and_operands_as_jax():
    """``dce_jaxpr`` through a shard_map: an unread output goes from the body with the operands only it
    needed (JAX's shard_map DCE rule); values of the pruned program equal the full one's."""
    import jax
    from jax.interpreters import partial_eval as jpe

    from ftrans.interpreters.partial_eval import dce_jaxpr

    results = {}
    for name, lib, jnp_, dce in (("ftrans", ftrans, fjnp, dce_jaxpr), ("jax", jax, jjnp, jpe.dce_jaxpr)):
        P = lib.sharding.PartitionSpec
        mesh = lib.make_mesh((4, 2), ("i", "j"), axis_types=(lib.sharding.AxisType.Auto,) * 2)

        def f(x, y, z, lib=lib, jnp_=jnp_, P=P, mesh=mesh):
            def g(y, z):
                return jnp_.sin(x), jnp_.cos(z), jnp_.tan(y)
            return lib.shard_map(g, mesh=mesh, in_specs=(P("i", "j"), P(None, "i")),
                                 out_specs=(P(None, None), P(None, "i"), P("i", "j")))(y, z)

        jaxpr = lib.make_jaxpr(f)(jnp_.zeros((4, 4)), jnp_.zeros((8, 8)), jnp_.zeros((16, 16))).jaxpr
        for used in ([True, True, True], [True, True, False], [False, True, False], [False, False, False]):
            new, used_in = dce(jaxpr, used)
            n_body = sum(len(e.params["jaxpr"].eqns) for e in new.eqns if e.primitive.name == "shard_map")
            results.setdefault(name, []).append((tuple(used_in), len(new.eqns), n_body))
    assert results["ftrans"] == results["jax"]
    assert results["ftrans"][1] == ((True, False, True), 1, 2)
