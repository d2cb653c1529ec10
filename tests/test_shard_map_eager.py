"""shard_map called outside jit runs its body device by device (JAX's eager shard_map), and shard_map's errors
for bad specs and abstract meshes; each compared with jax (the oracle) on 8 CPU devices."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNS
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import P


def _libs(lib):
    if lib == "ftrans":
        return ftrans, fjnp, P
    return jax, jjnp, JP


def _mesh(lib, shape, names):
    types = lib.sharding.AxisType
    return lib.make_mesh(shape, names, axis_types=(types.Auto,) * len(shape))


def _both(fn):
    outs = [fn(*_libs(name)) for name in ("ftrans", "jax")]
    return outs


@pytest.mark.needs_devices(4)
def test_print_inside_an_eager_body_shows_each_devices_block():
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 2), ("x", "y"))
        seen = []

        @partial(lib.shard_map, mesh=mesh, in_specs=P_("x", "y"), out_specs=P_("x", "y"))
        def f(x):
            seen.append(str(x))
            seen.append(str(jnp.sin(x) * 0 + lib.lax.axis_index("y")))
            return x
        f(np.arange(16.0, dtype=np.float32).reshape(4, 4))
        return seen

    ft, jx = _both(run)
    assert "at mesh coordinates (x, y,) = (1, 0):" in ft[0]
    assert ft == jx


@pytest.mark.needs_devices(8)
def test_debug_print_in_an_eager_body_prints_each_devices_values(capfd):
    lines = []
    for lib, jnp, P_ in (_libs("ftrans"), _libs("jax")):
        mesh = lib.sharding.Mesh(np.array(lib.devices()), ("i",))

        @partial(lib.shard_map, mesh=mesh, in_specs=P_("i"), out_specs=P_("i"))
        def f(x):
            lib.debug.print("x={x}", x=x)
            return jnp.cos(x)
        f(np.arange(16))
        lib.effects_barrier()
        lines.append(sorted(capfd.readouterr().out.splitlines()))
    assert lines[0] == lines[1]
    assert "x=[2 3]" in lines[0]


@pytest.mark.needs_devices(4)
def test_python_control_flow_on_values_the_same_on_every_device():
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 2), ("x", "y"))
        x = np.arange(4.0, dtype=np.float32).reshape(2, 2)

        def f(x):
            y = lib.lax.psum(x, ("x", "y"))
            return x if y < 0 else -x
        a = lib.shard_map(f, mesh=mesh, in_specs=(P_("x", "y"),), out_specs=P_("x", "y"))(x)

        @partial(lib.shard_map, mesh=mesh, in_specs=(), out_specs=P_())
        def foo():
            val = lib.lax.psum(lib.lax.axis_index("x"), "x")
            return 1.0 if val > 0 else -1.0
        b = foo()
        return np.asarray(a), float(b)

    (fa, fb), (ja, jb) = _both(run)
    np.testing.assert_array_equal(fa, ja)
    assert fb == jb == 1.0


@pytest.mark.needs_devices(4)
def test_bool_of_a_varying_value_in_an_eager_body_raises():
    for lib, jnp, P_ in (_libs("ftrans"), _libs("jax")):
        mesh = _mesh(lib, (4,), ("i",))

        @partial(lib.shard_map, mesh=mesh, in_specs=P_("i"), out_specs=P_("i"))
        def f(x):
            if x.sum() > 0:  # varies over 'i': no one value
                return x
            return -x
        with pytest.raises(lib.errors.TracerBoolConversionError):
            f(np.arange(8.0))


def _eager_or_oracle(lib, f):
    """ftrans's shard_map called eagerly (what these tests check); jax's, the oracle, jitted: the same values
    from one program, where jax's eager body compiles op by op."""
    return jax.jit(f) if lib is jax else f


@pytest.mark.parametrize("case", ["grad", "vmap", "jit", "scan", "collectives", "nested", "check_vma_false"])
@pytest.mark.needs_devices(8)
def test_transforms_inside_an_eager_body_match_jax(case):
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 4), ("x", "y"))
        x = np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(4, 8)
        lax = lib.lax
        kw = {}
        if case == "grad":
            def body(b):
                return lib.grad(lambda v: jnp.sum(jnp.sin(v) * lax.psum(v, "y")))(b)
        elif case == "vmap":
            def body(b):
                return lib.vmap(lambda r: r * lax.axis_index("x") + jnp.cumsum(r))(b)
        elif case == "jit":
            def body(b):
                return lib.jit(lambda v: jnp.tanh(v) + lax.pmean(v, ("x", "y")))(b)
        elif case == "scan":
            def body(b):
                return lax.scan(lambda c, r: (c + r, c * r), jnp.zeros_like(b[0]), b)[1]
        elif case == "collectives":
            def body(b):
                g = lax.all_gather(b, "y", axis=1, tiled=True)[:, :2]
                p = lax.ppermute(b, "x", [(0, 1), (1, 0)])
                return g + p + lax.pmax(b, "x")
        elif case == "nested":
            def body(b):
                inner = lib.shard_map(lambda c: c * lax.axis_index("y"), in_specs=P_(None, "y"),
                                      out_specs=P_(None, "y"), axis_names={"y"})
                return inner(b)
            kw = {"axis_names": {"x"}}
            out = _eager_or_oracle(lib, lib.shard_map(body, mesh=mesh, in_specs=P_("x"), out_specs=P_("x"), **kw))(x)
            return np.asarray(out)
        else:
            def body(b):
                return b + lax.axis_index("y")
            kw = {"check_vma": False}
        out = _eager_or_oracle(lib, lib.shard_map(body, mesh=mesh, in_specs=P_("x", "y"), out_specs=P_("x", "y"),
                                                  **kw))(x)
        return np.asarray(out)

    ft, jx = _both(run)
    np.testing.assert_allclose(ft, jx, rtol=1e-5, atol=1e-6)


@pytest.mark.needs_devices(8)
def test_eager_results_keep_the_out_specs_layout():
    mesh = _mesh(ftrans, (2, 4), ("x", "y"))
    out = ftrans.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x"),
                           check_vma=False)(np.arange(32.0).reshape(4, 8))
    assert out.sharding == ftrans.sharding.NamedSharding(mesh, P("x"))
    np.testing.assert_allclose(np.asarray(out), (np.arange(32.0).reshape(4, 8) * 2)[:, :2])


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares what each library raises
        return type(e), str(e)
    raise AssertionError("no error raised")


@pytest.mark.parametrize("case,phrase", [
    ("rank_out", "which has length 1"),
    ("rank_in", "which has rank 0"),
    ("scalar", r"consider using an in_specs entry of `P()`"),
    ("varargs", "shard_map applied to the function 'f'"),
    ("prefix", "shard_map in_specs[0]"),
    ("auto", "in_specs refers to 'y'"),
    ("vma", "only varying across mesh axes {x} and not {y,z}, but it was inferred to be possibly varying "
            "over {x,y,z}"),
    ("unbound", "Found an unbound axis name: x. To fix this, please call psum under `jax.shard_map`"),
    ("explicit", "in_specs passed to shard_map: P('x', 'y') does not match the specs of the input: P(None, None)"),
    ("nondiv", "which maps array axis 0 (of size 3) to mesh axis 'x' (of size 2), but 2 does not evenly divide 3"),
])
@pytest.mark.needs_devices(4)
def test_spec_errors_say_what_jax_says(case, phrase):
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 2), ("x", "y"))
        sm = lib.shard_map
        if case == "rank_out":
            return _err(lambda: sm(lambda: {"hi": [3.0]}, mesh=mesh, in_specs=(), out_specs={"hi": P_("x")})())
        if case == "rank_in":
            return _err(lambda: sm(lambda d: d, mesh=mesh, in_specs=({"hi": P_("x")},), out_specs=P_())(
                {"hi": [jnp.array(3.0)]}))
        if case == "scalar":
            return _err(lambda: sm(lambda v: v, mesh=mesh, in_specs=P_(None), out_specs=P_())(3.0))
        if case == "varargs":
            def f(*args):
                return args[0] @ args[1]
            return _err(lambda: sm(f, mesh=mesh, in_specs=(P_("x", "y", None),) * 2, out_specs=P_("x", "y"))(
                jnp.ones((8, 8)), jnp.ones((8, 8))))
        if case == "prefix":
            x = jnp.ones((8, 8))
            return _err(lambda: sm(lambda v: v, mesh=mesh, in_specs=([P_("x", "y")],), out_specs=P_())([x, x]))
        if case == "auto":
            return _err(lambda: lib.jit(sm(lambda v: v, mesh=mesh, in_specs=P_("x", "y"), out_specs=P_("x"),
                                           axis_names={"x"}, check_vma=False))(np.ones((4, 4))))
        if case == "vma":
            m3 = _mesh(lib, (2, 2, 2), ("x", "y", "z"))
            return _err(lambda: sm(lambda v: v * 2, mesh=m3, in_specs=P_("x", "y", "z"), out_specs=P_("x"))(
                np.arange(16).reshape(4, 2, 2)))
        if case == "explicit":  # make_mesh's default axis types: Explicit
            return _err(lambda: sm(lambda v: v, mesh=lib.make_mesh((2, 2), ("x", "y")), in_specs=P_("x", "y"),
                                   out_specs=P_("x", "y"))(np.ones((4, 4), np.float32)))
        if case == "nondiv":
            return _err(lambda: sm(lambda v: v, mesh=mesh, in_specs=P_("x"), out_specs=P_("x"))(np.ones((3, 5))))
        return _err(lambda: lib.jit(lambda v: lib.lax.psum(v, "x"))(jnp.arange(8.0)))

    (ft, fmsg), (jt, jmsg) = _both(run)
    assert issubclass(ft, jt), (ft, jt)
    assert phrase in jmsg and phrase in fmsg, (fmsg, jmsg)


@pytest.mark.needs_devices(4)
def test_shard_map_over_an_abstract_mesh_takes_the_arguments_devices():
    res = []
    for lib, jnp, P_ in (_libs("ftrans"), _libs("jax")):
        mesh = _mesh(lib, (2, 2), ("x", "y"))
        NS = ftrans.sharding.NamedSharding if lib is ftrans else JNS
        np_inp = np.arange(16).reshape(8, 2)
        arr = lib.device_put(np_inp, NS(mesh, P_("x", "y")))
        am = mesh.abstract_mesh

        def f(x):
            return lib.shard_map(lambda v: v, mesh=am, in_specs=P_("x"), out_specs=P_("x"))(x)
        out_jit, out_eager = lib.jit(f)(arr), f(arr)
        assert out_jit.sharding == NS(mesh, P_("x")) and out_eager.sharding == NS(mesh, P_("x"))
        e1 = _err(lambda: lib.shard_map(lambda v: v, mesh=am, in_specs=P_("x"), out_specs=P_("x"))(
            jnp.arange(8)))
        m2 = _mesh(lib, (4,), ("y",))
        e2 = _err(lambda: lib.shard_map(lambda v: v, mesh=m2.abstract_mesh, in_specs=P_("y"),
                                        out_specs=P_("y"))(arr))
        res.append((np.asarray(out_jit), np.asarray(out_eager), e1, e2))
    (fj, fe, fe1, fe2), (jj, je, je1, je2) = res
    np.testing.assert_array_equal(fj, jj)
    np.testing.assert_array_equal(fe, je)
    assert "Please pass `jax.Array`s with a `NamedSharding` as input to `shard_map`" in fe1[1]
    assert "Please pass `jax.Array`s with a `NamedSharding` as input to `shard_map`" in je1[1]
    assert "does not match the mesh shape passed to shard_map" in fe2[1]
    assert "does not match the mesh shape passed to shard_map" in je2[1]


_NO_TRACER_BEHIND = """
import numpy as np
import ftrans
import ftrans.numpy as fjnp
from ftrans.sharding import P
mesh = ftrans.make_mesh((4,), ("i",), axis_types=(ftrans.sharding.AxisType.Auto,))
with ftrans.checking_leaks():
    out = ftrans.shard_map(lambda a: fjnp.sin(a) * ftrans.lax.axis_index("i"), mesh=mesh, in_specs=P("i"),
                           out_specs=P("i"))(np.arange(8.0, dtype=np.float32))
np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(8.0)) * np.repeat(np.arange(4), 2), rtol=1e-6)
print("ok")
"""


@pytest.mark.needs_devices(4)
def test_eager_body_leaves_no_tracer_behind():
    """In a fresh process: the leak checker scans the whole heap (a collection and a referrer walk per
    transform level), which in a test worker that has run many tests holds millions of objects (~10 s);
    a fresh interpreter costs a few seconds, whatever ran before."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", _NO_TRACER_BEHIND], env=env, capture_output=True, text=True,
                         cwd=root, timeout=300)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr[-3000:]


@pytest.mark.needs_devices(8)
def test_custom_derivatives_random_and_control_flow_in_an_eager_body_match_jax():
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 4), ("x", "y"))
        x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
        lax = lib.lax

        def body(a):
            r = lib.nn.relu(a) + lib.nn.gelu(a)
            k = lib.random.fold_in(lib.random.key(0), lax.axis_index("x"))
            n = lib.random.normal(k, a.shape)
            c = lax.cond(a.sum() > 0, lambda v: v * 2, lambda v: v - 1, r)
            w = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 1.5), (0, c))[1]

            @lib.custom_vjp
            def h(v):
                return jnp.sin(v)
            h.defvjp(lambda v: (jnp.sin(v), jnp.cos(v)), lambda res, ct: (ct * res,))
            g = lib.grad(lambda v: jnp.sum(lib.nn.softplus(v)) + h(v).sum())(a)
            return r + w + lax.sort(a, dimension=1) + g, n

        out, n = _eager_or_oracle(lib, lib.shard_map(body, mesh=mesh, in_specs=P_("x", "y"),
                                                     out_specs=(P_("x", "y"),) * 2))(x)
        return np.asarray(out), np.asarray(n)

    (fo, fn), (jo, jn) = _both(run)
    np.testing.assert_allclose(fo, jo, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fn, jn, rtol=1e-5, atol=1e-5)


@pytest.mark.needs_devices(8)
def test_get_abstract_mesh_in_a_body_types_the_manual_axes_manual():
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 2, 2), ("x", "y", "z"))
        seen = []

        def g(a):
            m = lib.sharding.get_abstract_mesh()
            seen.append(("g", m.manual_axes, m.auto_axes))
            return a * 2

        def h(a):
            m = lib.sharding.get_abstract_mesh()
            seen.append(("h", m.manual_axes, m.auto_axes))
            return lib.shard_map(g, in_specs=P_(None, "y"), out_specs=P_(None, "y"), axis_names={"y"})(a)

        f = lib.shard_map(h, mesh=mesh, in_specs=P_("x"), out_specs=P_("x"), axis_names={"x"})
        x = np.arange(32.0, dtype=np.float32).reshape(4, 8)
        f(x)
        lib.jit(f)(x)
        return seen, lib.sharding.get_abstract_mesh().empty

    ft, jx = _both(run)
    assert ft == jx


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize("spmd", ["y", ("x", "y")])
def test_shard_map_equation_carries_jaxs_in_and_out_specs(spmd):
    def run(lib, jnp, P_):
        mesh = _mesh(lib, (2, 2), ("x", "y"))
        inner = P_("x") if spmd == "y" else P_()
        f = lib.shard_map(lambda x: x, mesh=mesh, in_specs=inner, out_specs=inner)
        x = np.arange(16).reshape(4, 4)
        (e,) = lib.make_jaxpr(lib.vmap(f, spmd_axis_name=spmd))(x).jaxpr.eqns
        return tuple(map(tuple, e.params["in_specs"])), tuple(map(tuple, e.params["out_specs"]))

    ft, jx = _both(run)
    assert ft == jx


@pytest.mark.needs_devices(2)
def test_inferred_in_specs_need_explicit_axes():
    def run(lib, jnp, P_):
        AT = lib.sharding.AxisType
        NS = ftrans.sharding.NamedSharding if lib is ftrans else JNS
        res = []
        for types in ((AT.Auto,), (AT.Explicit,)):
            mesh = lib.make_mesh((2,), ("x",), axis_types=types)
            with lib.set_mesh(mesh):
                placed = lib.device_put(np.arange(4), NS(mesh, P_("x")))
                for fn in (lambda: lib.smap(lambda v: v * 2, out_axes=0, axis_name="x")(np.arange(4)),
                           lambda: lib.smap(lambda v: v * 2, out_axes=0, axis_name="x")(placed),
                           lambda: lib.shard_map(lambda v: v * 2, out_specs=P_("x"))(placed)):
                    try:
                        res.append(tuple(np.asarray(fn()).tolist()))
                    except TypeError as e:
                        res.append("in_axes was not specified" in str(e) or "but it was `None` when" in str(e))
        return res

    ft, jx = _both(run)
    assert ft == jx and ft[:3] == [True, True, True]


@pytest.mark.needs_devices(2)
def test_ref_made_in_an_eager_body_raises_as_jax():
    """A ref made in a body run device by device raises JAX's ValueError; under jit (the body's or the
    shard_map's) it works, and refs passed in as arguments still do."""
    x = np.arange(8)

    def f(v, lib):
        return lib.freeze(lib.new_ref(v))

    for lib, PS in ((jax, JP), (ftrans, P)):
        mesh = lib.make_mesh((2,), ("x",), axis_types=(lib.sharding.AxisType.Explicit,))
        with lib.set_mesh(mesh):
            arr = lib.device_put(x, PS("x"))
            with pytest.raises(ValueError, match="Eager shard_map cannot return a `jax.Ref`"):
                lib.shard_map(partial(f, lib=lib), out_specs=PS("x"), check_vma=False)(arr)
            out = lib.shard_map(lib.jit(partial(f, lib=lib)), out_specs=PS("x"), check_vma=False)(arr)
            np.testing.assert_array_equal(np.asarray(out), x)
    with ftrans.set_mesh(ftrans.make_mesh((2,), ("x",), axis_types=(ftrans.sharding.AxisType.Explicit,))):
        r = ftrans.new_ref(ftrans.device_put(np.zeros(8), P("x")))

        def add(ref):
            ref[...] += 1.0

        ftrans.shard_map(add, in_specs=P("x"), out_specs=None)(r)
        np.testing.assert_array_equal(np.asarray(r[...]), np.ones(8))


@pytest.mark.parametrize("out_spec,axis_name,aval_spec", [
    (("x", None), "x", (None, "y")), ((None, "y"), "y", ("x", None))])
@pytest.mark.needs_devices(4)
def test_partially_manual_body_over_explicit_axes_is_typed_called_eagerly(out_spec, axis_name, aval_spec):
    """A partially manual shard_map over Explicit axes called outside jit: the body's values are typed over
    the axes left automatic, as JAX's, and the result's layout is the jitted call's."""

    def run(lib, PS):
        seen = []
        mesh = lib.make_mesh((2, 2), ("x", "y"), axis_types=(lib.sharding.AxisType.Explicit,) * 2)
        with lib.set_mesh(mesh):
            @partial(lib.shard_map, out_specs=PS(*out_spec), axis_names={axis_name})
            def f(v):
                seen.append(tuple(lib.typeof(v).sharding.spec))
                return v * 2

            arr = lib.device_put(np.arange(16).reshape(8, 2), PS("x", "y"))
            out, out2 = f(arr), lib.jit(f)(arr)
            assert out.sharding == out2.sharding
            return seen, tuple(out.sharding.spec), np.asarray(out)

    want, got = run(jax, JP), run(ftrans, P)
    assert want[0] == got[0] and tuple(got[0][0]) == aval_spec
    assert want[1] == got[1]
    np.testing.assert_array_equal(want[2], got[2])
