"""Sharding-in-types rules of individual operations against jax (Explicit mesh axes, 8 host devices): the types
the rules give (extended dtypes, singleton reshapes, typed transposes), the errors they raise (tile, split,
unstack, unmapped vmap arguments, UNCONSTRAINED over Explicit axes, ``ShapedArray(sharding=)`` divisibility),
with_sharding_constraint as an assert, and the constraints the lowering writes (open dimensions over a mesh
with Auto axes, an elementwise operation's operands, reshards over Auto axes)."""

from __future__ import annotations

import re
from functools import partial

import jax
import jax.experimental
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans.core.avals import ShapedArray

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

LIBS = {"ftrans": (ftrans, fjnp), "jax": (jax, jjnp)}


def _mesh(lib, shape, names, types):
    A = lib.sharding.AxisType
    return lib.make_mesh(shape, names, axis_types=tuple(getattr(A, t) for t in types))


def _both(fn):
    return {name: fn(lib, np_) for name, (lib, np_) in LIBS.items()}


def test_extended_dtype_conversions_keep_the_type():
    def run(lib, jnp):
        mesh = _mesh(lib, (2,), ("x",), ("Explicit",))
        specs = []
        with lib.set_mesh(mesh):
            ptd = ftrans.dtypes.primal_tangent_dtype if lib is ftrans else jax.experimental.primal_tangent_dtype
            dtype = ptd(np.dtype("int8"), jnp.dtype("bfloat16"))

            @lib.jit
            def f(x):
                y = lib.lax.convert_element_type(x, dtype)
                specs.append(tuple(y.aval.sharding.spec))
                z = lib.lax.convert_element_type(y, "int8")
                specs.append(tuple(z.aval.sharding.spec))
                return z

            out = f(lib.device_put(np.arange(8, dtype="int8"), lib.P("x")))
            return specs, tuple(out.sharding.spec), np.asarray(out).tolist()

    r = _both(run)
    assert r["ftrans"] == r["jax"] and r["ftrans"][0] == [("x",), ("x",)]


def test_unconstrained_over_explicit_axes_raises_and_wsc_asserts():
    def run(lib, jnp):
        mesh = _mesh(lib, (2, 1), ("x", "y"), ("Explicit", "Explicit"))
        with pytest.raises(ValueError, match="cannot contain `P.UNCONSTRAINED` when no mesh axis_types are `Auto`"):
            lib.NamedSharding(mesh, lib.P(lib.P.UNCONSTRAINED))
        with lib.set_mesh(mesh):
            f = lib.jit(lambda x: lib.lax.with_sharding_constraint(x, lib.P("x")))
            with pytest.raises(AssertionError, match="acts as an assert when all axes of mesh are of type"):
                f(lib.device_put(np.arange(8), lib.P()))
            arr = lib.device_put(np.arange(8), lib.P("x"))
            return "sharding_constraint" in str(lib.make_jaxpr(f)(arr)), np.asarray(f(arr)).tolist()

    r = _both(run)
    assert r["ftrans"] == r["jax"] and r["ftrans"][0] is False


def test_vmap_of_an_unmapped_argument_split_over_the_mapped_axes_raises():
    def run(lib, jnp):
        mesh = _mesh(lib, (2, 2), ("x", "y"), ("Explicit", "Explicit"))
        with lib.set_mesh(mesh):
            a = lib.device_put(np.ones((32, 64), np.float32), lib.P(None, "y"))
            b = lib.device_put(np.ones((8, 1, 32, 64), np.float32), lib.P(("x", "y"), None, None))
            loss = lambda a, b: jnp.sum(jnp.einsum("xyz,wz->xyw", b, a, out_sharding=lib.P()))  # noqa: E731
            with pytest.raises(ValueError, match="Unmapped values passed to vmap cannot be sharded along the mesh"):
                lib.jit(lib.vmap(lib.grad(loss), in_axes=(None, 0)))(a, b)

    _both(run)


def test_at_get_out_sharding_applies_to_gathers_only():
    rng = np.random.RandomState(0)
    xv, iv, jv = rng.uniform(size=(4, 3)).astype(np.float32), rng.randint(0, 3, 4), rng.randint(0, 3, 4)

    def run(lib, jnp):
        mesh = _mesh(lib, (2,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            x, i, j = (lib.device_put(v, lib.P("x")) for v in (xv, iv, jv))

            @lib.jit
            @lib.vmap
            def f(x, i, j):  # a scalar index: a dynamic slice, which keeps x's layout whatever out_sharding says
                x_j = x.at[j].get(out_sharding=lib.typeof(x).sharding)
                return x.at[i].set(x_j, out_sharding=lib.typeof(x).sharding)

            out = f(x, i, j)
            return tuple(out.sharding.spec), np.asarray(out)

    r = _both(run)
    assert r["ftrans"][0] == r["jax"][0]
    np.testing.assert_allclose(r["ftrans"][1], r["jax"][1])


@pytest.mark.parametrize("what", ["tile", "split", "unstack"])
def test_layout_errors_of_tile_split_unstack(what):
    message = {"tile": "cannot be sharded.*tiling is non-trivial", "split": "split on sharded dims",
               "unstack": "unstack operand cannot be sharded on the unstacking axis"}[what]

    def run(lib, jnp):
        mesh = _mesh(lib, (2, 2), ("x", "y"), ("Explicit", "Explicit"))
        with lib.set_mesh(mesh):
            x = lib.device_put(np.ones((32, 64), np.float32), lib.P("x", "y"))
            f = {"tile": lambda x: jnp.tile(x, (1, 2)), "split": lambda x: lib.lax.split(x, (1, 63), axis=1),
                 "unstack": lambda x: jnp.unstack(x[:2], axis=1)}[what]
            if what == "unstack":
                x = lib.device_put(np.ones((2, 32, 64), np.float32), lib.P(None, "x", None))
                f = lambda x: jnp.unstack(x, axis=1)  # noqa: E731
            with pytest.raises(Exception, match=message) as e:
                lib.jit(f)(x)
            return type(e.value).__name__

    r = _both(run)
    assert r["ftrans"] == r["jax"] == "ShardingTypeError"


def test_shaped_array_with_a_sharding_type():
    out = {}
    for name, (lib, cls) in {"ftrans": (ftrans, ShapedArray), "jax": (jax, jax.core.ShapedArray)}.items():
        am = lib.sharding.AbstractMesh((2,), ("x",), axis_types=(lib.sharding.AxisType.Explicit,))
        s = lib.NamedSharding(am, lib.P("x"))
        aval = cls((8, 2), np.int32, sharding=s)
        with pytest.raises(ValueError, match="does not evenly divide the dimension size"):
            cls((5, 2), np.int32, sharding=s)
        out[name] = (tuple(aval.sharding.spec), aval.str_short(short_dtypes=True))
    assert out["ftrans"] == out["jax"] == (("x", None), "i32[8@x,2]")


def test_typed_transposes_of_reduce_sum_and_dot_general_have_jax_types():
    np_inp = np.arange(16.0, dtype=np.float32).reshape(8, 2)

    def run(lib, jnp):
        mesh = _mesh(lib, (4,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            a1 = lib.device_put(np_inp, lib.P("x", None))
            a2 = lib.device_put(np_inp.T, lib.P(None, "x"))
            f = lib.jit(lambda x, y: jnp.sum(jnp.einsum("xy,yz->xz", x, y, out_sharding=lib.P("x", None))))
            g = lib.jit(lib.grad(f, argnums=(0, 1)))
            jaxpr = g.trace(a1, a2).jaxpr
            bwd = next(e for e in reversed(jaxpr.eqns) if "jaxpr" in e.params).params["jaxpr"]
            types = [(e.primitive.name, tuple(e.outvars[0].aval.sharding.spec)) for e in bwd.eqns
                     if e.primitive.name in ("broadcast_in_dim", "dot_general", "transpose")]
            outs = g(a1, a2)
            return types, [tuple(o.sharding.spec) for o in outs], [np.asarray(o) for o in outs]

    r = _both(run)
    assert r["ftrans"][0] == r["jax"][0] and r["ftrans"][1] == r["jax"][1]
    for a, b in zip(r["ftrans"][2], r["jax"][2]):
        np.testing.assert_allclose(a, b)


def test_replayed_transpose_broadcast_keeps_its_type():
    # reduce_sum's transpose types its broadcast as the operand (JAX's out_sharding): replaying the jaxpr
    # (eval_jaxpr; the lowering of a scan replays its body so) gives it that type again
    def run(lib, jnp):
        mesh = _mesh(lib, (2,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            x = lib.device_put(np.arange(16.0, dtype=np.float32).reshape(8, 2), lib.P("x", None))
            g = lib.grad(lambda x: jnp.sum(x))
            jp = lib.make_jaxpr(g)(x)
            rp = lib.make_jaxpr(lambda x: lib.core.eval_jaxpr(jp.jaxpr, jp.consts, x))(x)
            types = [[tuple(e.outvars[0].aval.sharding.spec) for e in j.eqns if e.primitive.name == "broadcast_in_dim"]
                     for j in (jp.jaxpr, rp.jaxpr)]

            @lib.jit
            def step(xs):
                return lib.lax.scan(lambda acc, xb: (acc + g(xb), None), jnp.zeros_like(xs[0]), xs)[0]

            out = step(lib.device_put(np.ones((3, 8, 2), np.float32), lib.P(None, "x", None)))
            return types, tuple(out.sharding.spec), np.asarray(out)

    r = _both(run)
    assert r["ftrans"][0] == r["jax"][0] == [[("x", None)], [("x", None)]]
    assert r["ftrans"][1] == r["jax"][1]
    np.testing.assert_array_equal(r["ftrans"][2], r["jax"][2])


def test_singleton_reshape_keeps_the_other_entries():
    def run(lib, jnp):
        mesh = _mesh(lib, (1,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            x = jnp.ones((1,), out_sharding=lib.P("x"))
            y = lib.jit(lib.grad(lambda x: jnp.expand_dims(x, -1).sum()))(x)
            x2 = jnp.ones((1, 4), out_sharding=lib.P("x"))
            g = lambda x: (x * lib.lax.rsqrt(jnp.mean(x ** 2, axis=-1, keepdims=True))).sum()  # noqa: E731
            y2 = lib.jit(lib.grad(g))(x2)
            return tuple(y.sharding.spec), tuple(y2.sharding.spec), np.asarray(y2)

    r = _both(run)
    assert r["ftrans"][:2] == r["jax"][:2]
    np.testing.assert_allclose(r["ftrans"][2], r["jax"][2], rtol=1e-6)


def _spec(x):
    """An array's spec entries without trailing Nones (JAX's results may leave them out)."""
    spec = list(x.sharding.spec)
    while spec and spec[-1] is None:
        spec.pop()
    return tuple(spec)


def _lowered(lib, f, *args):
    return f.lower(*args).as_text()


def test_mixed_mesh_constraints_are_open_and_replicate_unused_explicit_axes():
    def run(lib, jnp):
        mesh = _mesh(lib, (2, 2, 2), ("x", "y", "z"), ("Explicit", "Explicit", "Auto"))
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(4, 2, 2), lib.NamedSharding(mesh, lib.P("x", None, None)))
            f = lib.jit(lambda x: x * 2)
            text = _lowered(lib, f, arr)
            counts = [text.count('[{"x", ?}, {?}, {?}], replicated={"y"}')]
        for types, s2 in ((("Explicit", "Auto"), ("y", None)), (("Auto", "Explicit"), (None, "x"))):
            m2 = _mesh(lib, (2, 2), ("x", "y"), types)
            with lib.set_mesh(m2):
                a = lib.device_put(np.arange(16.0).reshape(8, 2), lib.NamedSharding(m2, lib.P("x", "y")))
                b = lib.device_put(np.arange(16.0).reshape(2, 8), lib.NamedSharding(m2, lib.P(*s2)))
                g = lib.jit(lambda x, y: jnp.sin(x * 2) @ y)
                t = _lowered(lib, g, a, b)
                counts += [t.count("{?}"), t.count("replicated=")]
                out = g(a, b)
                counts.append(_spec(out))
        return counts

    r = _both(run)
    assert r["ftrans"] == r["jax"]


def test_elementwise_operands_are_constrained_to_the_result_layout():
    def run(lib, jnp):
        mesh = _mesh(lib, (2,), ("x",), ("Explicit",))
        with lib.set_mesh(mesh):
            arr = lib.device_put(np.arange(16).reshape(8, 2), lib.P("x"))
            f = lib.jit(lambda x: x * jnp.broadcast_to(2, x.shape))
            text = _lowered(lib, f, arr)
            return len(re.findall(r'sdy.sharding_constraint.*\[\{"x"\}, \{\}\]', text)), np.asarray(f(arr)).tolist()

    r = _both(run)
    assert r["ftrans"] == r["jax"] and r["ftrans"][0] == 2


def test_reshard_and_explicit_axes_over_auto_axes_leave_the_partitioner_free():
    np_inp = np.arange(16.0).reshape(8, 2)

    def run(lib, jnp):
        mesh = _mesh(lib, (2, 2), ("x", "y"), ("Auto", "Auto"))
        A = lib.sharding.AxisType
        out = []
        with lib.set_mesh(mesh):
            arr = lib.device_put(np_inp, lib.NamedSharding(mesh, lib.P("x", "y")))
            am = mesh.abstract_mesh

            @lib.jit
            def f(x):
                y = x * 2
                with lib.sharding.use_abstract_mesh(am.update_axis_types({"x": A.Explicit, "y": A.Explicit})):
                    z = jnp.sin(lib.sharding.reshard(y, lib.P(None, "y")))
                return lib.sharding.reshard(z, lib.P(None, None))

            out.append(_spec(f(arr)))

            @partial(lib.sharding.explicit_axes, axes="y", in_sharding=lib.P(None, "y"))
            def h(y):
                z = jnp.sin(y)
                return jnp.einsum("ab,bc->ac", z, z.T, out_sharding=lib.P(None, "y"))

            g = lib.jit(lambda x: h(x * 2))
            res = g(arr)
            out.append(_spec(res))
            out.append(np.asarray(res).round(4).tolist())
        return out

    r = _both(run)
    assert r["ftrans"] == r["jax"]
