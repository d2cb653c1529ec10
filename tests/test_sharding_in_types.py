"""Sharding in types over Explicit mesh axes, against jax: ``typeof(x).sharding`` while tracing, the errors of
the sharding rules (naming the user's line), ``out_sharding=``, ``reshard``, ``auto_axes``, cotangents typed as
their primals, results laid out as their types, and ``shard_map`` inferring ``in_specs`` from the types.

Types are compared through ``make_jaxpr``/``eval_shape``-like tracing (no compile) wherever that suffices; a
few programs also run, to check that XLA's layouts are the types.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNamedSharding

import ftrans
import ftrans.numpy as fjnp
from ftrans import lax as flax
from ftrans.errors import ShardingTypeError
from ftrans.sharding import NamedSharding, P, auto_axes, reshard

HERE = os.path.abspath(__file__)

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")

X = np.arange(16.0, dtype=np.float32).reshape(8, 2)


@pytest.fixture(scope="module")
def meshes():
    return ftrans.make_mesh((2, 2), ("x", "y")), jax.make_mesh((2, 2), ("x", "y"))


def norm(spec) -> tuple:
    t = [e[0] if isinstance(e, tuple) and len(e) == 1 else (e or None) if isinstance(e, tuple) else e
         for e in tuple(spec)]
    while t and t[-1] is None:
        t.pop()
    return tuple(t)


def put_both(meshes, x, spec):
    fm, jm = meshes
    return (ftrans.device_put(x, NamedSharding(fm, P(*spec))),
            jax.device_put(x, JNamedSharding(jm, jax.P(*spec))))


def types_of(typeof, f, *args):
    """The specs of ``typeof`` of every value ``f`` reports through its ``seen`` callback, while tracing."""
    seen = []
    f(lambda v: seen.append(norm(typeof(v).sharding.spec)), *args)
    return seen


# Each program reports the types of its intermediate values (same code under both libraries).
def _prog_elementwise(np_, lax_, report, x, y):
    a = x * 2.0
    report(a)
    b = a + y  # y replicated: the result keeps x's layout
    report(b)
    report(np_.sin(b).astype(np_.int32))
    report(np_.where(b > 0, b, 0.0))
    return b


def _prog_structural(np_, lax_, report, x, y):
    report(np_.sum(x, axis=0))  # the reduced dimension's axis leaves the type
    report(np_.max(x, axis=1))
    report(x.T)
    report(np_.reshape(x, (4, 2, 2)))  # split: the major dimension keeps the axis
    report(np_.reshape(x, (16,)))  # merge
    report(np_.expand_dims(x, 0))
    report(np_.broadcast_to(x[None], (3, 8, 2)))
    report(np_.concatenate([x, x], axis=1))
    report(lax_.slice(x, (0, 0), (4, 2)))
    report(np_.cumsum(x, axis=1))
    return x


def _prog_dot(np_, lax_, report, x, y):
    report(x @ y)  # x: (8@x, 2), y: (2, 8@y)
    report(np_.einsum("ab,bc->ac", x, y))
    return x @ y


@pytest.mark.parametrize("prog, specs", [
    (_prog_elementwise, (("x", "y"), ())),
    (_prog_structural, (("x", None), ())),
    (_prog_dot, (("x", None), (None, "y"))),
])
def test_types_propagate_as_in_jax(meshes, prog, specs):
    fx, jx = put_both(meshes, X, specs[0])
    other = X if prog is not _prog_dot else X.T
    fy, jy = put_both(meshes, other if specs[1] else np.float32(1.5), specs[1])

    def run(typeof, jit, np_, lax_, x, y):
        seen = []
        jit(lambda a, b: prog(np_, lax_, lambda v: seen.append(norm(typeof(v).sharding.spec)), a, b)).trace(x, y)
        return seen

    got = run(ftrans.typeof, ftrans.jit, fjnp, flax, fx, fy)
    want = run(jax.typeof, jax.jit, jjnp, jax.lax, jx, jy)
    assert got == want


def test_typeof_of_arrays_and_the_aval_string(meshes):
    fx, jx = put_both(meshes, X, ("x", "y"))
    assert norm(ftrans.typeof(fx).sharding.spec) == norm(jax.typeof(jx).sharding.spec) == ("x", "y")
    assert ftrans.typeof(fx).str_short() == "f32[8@x,2@y]"
    # untyped values (one device, Auto axes) show each dimension unsplit, over their mesh, as JAX's types
    assert repr(ftrans.typeof(ftrans.numpy.ones(3)).sharding) == repr(jax.typeof(jjnp.ones(3)).sharding)
    auto = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(ftrans.sharding.AxisType.Auto,) * 2)
    jauto = jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    fa = ftrans.device_put(X, NamedSharding(auto, P("x")))
    ja = jax.device_put(X, JNamedSharding(jauto, jax.P("x")))
    assert repr(ftrans.typeof(fa).sharding) == repr(jax.typeof(ja).sharding)
    assert repr(ftrans.typeof(fx).sharding) == repr(jax.typeof(jx).sharding)
    assert fa.aval.typed_sharding is None  # the IR's value stays untyped


@pytest.mark.parametrize("specs, fragment", [
    ((("x", None), (None, "x")), "produces an illegally sharded result"),
    # jax 0.11's check (ftrans's); jax 0.10 first said "requires contracting dimensions to have consistent sharding"
    ((("x", "y"), ("x", "y")), "Contracting dimensions are sharded|contracting dimensions to have consistent"),
    ((("x", "y"), ("y", None)), "Contracting dimensions are sharded"),
])
def test_dot_general_errors_as_jax_and_name_the_line(meshes, specs, fragment):
    fx, jx = put_both(meshes, X, specs[0])
    fy, jy = put_both(meshes, X.T, specs[1])
    with pytest.raises(Exception, match=fragment):
        jax.jit(lambda a, b: a @ b).trace(jx, jy)
    with pytest.raises(ShardingTypeError, match=fragment.split("|")[0]) as e:
        ftrans.jit(lambda a, b: a @ b).trace(fx, fy)
    assert HERE in str(e.value)


def test_elementwise_conflict_errors_as_jax(meshes):
    fx, jx = put_both(meshes, X, ("x", "y"))
    fy, jy = put_both(meshes, X, ("y", "x"))
    msg = "mul got incompatible shardings for broadcasting"
    with pytest.raises(Exception, match=msg):
        jax.jit(lambda a, b: a * b).trace(jx, jy)
    with pytest.raises(ShardingTypeError, match=msg):
        ftrans.jit(lambda a, b: a * b).trace(fx, fy)


def test_results_and_cotangents_are_laid_out_as_their_types(meshes):
    """A contraction with out_sharding, then grad under jit: the gradients' types are jax's (traced), their
    values NumPy's and their layouts their types."""
    fm, jm = meshes
    fx, jx = put_both(meshes, X, ("x", None))
    fy, jy = put_both(meshes, X.T, (None, "x"))

    def make(np_, sh):
        def f(a, b):
            return np_.sum(np_.einsum("ab,bc->ac", a, b, out_sharding=sh("x", None)) ** 2)
        return f

    with ftrans.set_mesh(fm):
        fg = ftrans.jit(ftrans.grad(make(fjnp, P), argnums=(0, 1)))(fx, fy)
        lowered = ftrans.jit(lambda a: a * 2).lower(fx).as_text()
    with jax.set_mesh(jm):
        jt = jax.jit(jax.grad(make(jjnp, jax.P), argnums=(0, 1))).trace(jx, jy).out_info
    p = X @ X.T
    for a, want, b in zip(fg, (2 * p @ X, X.T @ (2 * p)), jt):
        np.testing.assert_allclose(np.asarray(a), want, rtol=1e-5)
        assert norm(a.sharding.spec) == norm(b.sharding.spec)
    assert "sdy.sharding_constraint" in lowered


def test_reshard_auto_axes_and_shard_map_infer(meshes):
    fm, jm = meshes

    def prog(lib, sh, out):
        def f(a):
            b = lib.sharding.auto_axes(lambda z: z @ z.T, out_sharding=sh("x", None))(a)
            out["auto"] = norm(lib.typeof(b).sharding.spec)
            c = lib.sharding.reshard(b, sh(None, "y"))
            out["reshard"] = norm(lib.typeof(c).sharding.spec)
            d = lib.shard_map(lambda v: v * 2, out_specs=sh(None, "y"))(c)  # in_specs inferred from the type
            out["shard_map"] = norm(lib.typeof(d).sharding.spec)
            return d
        return f

    fx, jx = put_both(meshes, X, ("x", "y"))
    got, want = {}, {}
    with ftrans.set_mesh(fm):
        r = ftrans.jit(prog(ftrans, P, got))(fx)
    with jax.set_mesh(jm):
        jax.jit(prog(jax, jax.P, want)).trace(jx)
    assert got == want
    np.testing.assert_allclose(np.asarray(r), 2 * X @ X.T)
    assert norm(r.sharding.spec) == want["shard_map"]
    assert auto_axes is ftrans.sharding.auto_axes and reshard is ftrans.sharding.reshard


def test_unsupported_primitives_leave_values_untyped(meshes):
    """Outside the rules' subset a result has no type (the partitioner lays it out), as for Auto axes."""
    fx, _ = put_both(meshes, X, ("x", None))
    seen = []

    def f(a):
        b = ftrans.pure_callback(np.sin, ftrans.ShapeDtypeStruct(a.shape, a.dtype), a)
        seen.append(b.aval.typed_sharding)
        return b + a

    ftrans.jit(f).trace(fx)
    assert seen == [None]


def test_creation_out_sharding_and_lowering_a_typed_shape(meshes):
    """jnp.zeros(out_sharding=) is typed as in jax; lower(ShapeDtypeStruct(sharding=)) traces it typed and
    constrains the typed results."""
    fm, jm = meshes
    def zeros_type(lib, np_, sh):
        seen = []
        lib.jit(lambda: seen.append(norm(lib.typeof(np_.zeros((8, 4), out_sharding=sh(None, "y"))).sharding.spec))
                or 0).trace()
        return seen

    with ftrans.set_mesh(fm):
        got = zeros_type(ftrans, fjnp, P)
    with jax.set_mesh(jm):
        want = zeros_type(jax, jjnp, jax.P)
    assert got == want == [(None, "y")]
    sds = ftrans.ShapeDtypeStruct((8, 2), np.float32, sharding=NamedSharding(fm, P("x", "y")))
    text = ftrans.jit(lambda x: (x * 2) * x).lower(sds).as_text()
    assert text.count("sdy.sharding_constraint") == 3  # the broadcast 2 is typed too, as in jax


def test_grad_through_a_reshape_with_out_sharding(meshes):
    """The transposed reshape cannot be typed by the rules: its cotangent takes its primal's type (jax's)."""
    fm, jm = meshes
    x3 = np.arange(16.0, dtype=np.float32).reshape(2, 4, 2)

    def make(np_, sh):
        return lambda x: np_.sum(np_.reshape(x, (16,), out_sharding=sh("x")) ** 2)

    with ftrans.set_mesh(fm):
        fx = ftrans.device_put(x3, P(None, None, "x"))
        got = ftrans.jit(ftrans.grad(make(fjnp, P))).trace(fx).jaxpr.out_avals[0].sharding.spec
    with jax.set_mesh(jm):
        jx = jax.device_put(x3, jax.P(None, None, "x"))
        want = jax.jit(jax.grad(make(jjnp, jax.P))).trace(jx).out_info.sharding.spec
    assert norm(got) == norm(want) == (None, None, "x")


def test_vmapped_concatenate_joins_a_replicated_operand(meshes):
    fm, jm = meshes
    a, b = np.ones((4, 6, 2), np.float32), np.ones((6, 3), np.float32)

    def make(lib, np_):
        return lib.jit(lib.vmap(lambda u, v: np_.concatenate([u, v], axis=-1), in_axes=(0, None)))

    fa, ja = put_both(meshes, a, ("x",))
    fb, jb = put_both(meshes, b, ())
    got = make(ftrans, fjnp).trace(fa, fb).jaxpr.out_avals[0].sharding.spec
    want = make(jax, jjnp).trace(ja, jb).out_info.sharding.spec
    assert norm(got) == norm(want) == ("x",)


def _scan_loss(np_, lax_):
    def f(c0, xs, w):
        def body(c, x):
            return c * np_.cos(x), np_.sin(x) * c + w
        c, ys = lax_.scan(body, c0, xs)
        return c.sum() + ys.sum()
    return f


def test_scan_backward_body_sees_the_forward_slice_types(meshes):
    """grad of a scan: the transposed body takes the residual slices with the types the forward body gave
    them (sharded over 'x'), as JAX's, not untyped ones rebuilt from the stacked residuals."""
    xs = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    (fxs, jxs), (fc, jc), (fw, jw) = (put_both(meshes, xs, (None, "x")), put_both(meshes, np.ones(4, np.float32), ("x",)),
                                      put_both(meshes, np.ones(4, np.float32), ("x",)))

    def body_types(make_jaxpr, grad, np_, lax_, *args):
        closed = make_jaxpr(grad(_scan_loss(np_, lax_), argnums=(0, 1, 2)))(*args)
        bwd = [e for e in closed.eqns if e.primitive.name == "scan"][-1].params["jaxpr"]
        return sorted((tuple(v.aval.shape), norm(v.aval.sharding.spec) if v.aval.sharding is not None else None)
                      for v in bwd.jaxpr.invars)

    ours = body_types(ftrans.make_jaxpr, ftrans.grad, fjnp, flax, fc, fxs, fw)
    # jax's under its mesh: without one, jax 0.11 leaves the carry's cotangent (sum's transpose) untyped
    # (jax 0.10 typed it as its primal, as ftrans does with or without a mesh: docs/differences.md)
    with jax.set_mesh(meshes[1]):
        theirs = body_types(jax.make_jaxpr, jax.grad, jjnp, jax.lax, jc, jxs, jw)
    assert ours == theirs and all(spec == ("x",) for shape, spec in ours if shape == (4,)), (ours, theirs)
    got = ftrans.jit(ftrans.grad(_scan_loss(fjnp, flax), argnums=(0, 1, 2)))(fc, fxs, fw)
    want = jax.jit(jax.grad(_scan_loss(jjnp, jax.lax), argnums=(0, 1, 2)))(jc, jxs, jw)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
        assert norm(a.sharding.spec) == norm(b.sharding.spec)


def test_scan_backward_body_keeps_weak_typed_slices_like_jax():
    """A weakly typed xs (a broadcast Python scalar) under grad: the backward body's slices stay weak, as JAX's."""
    def make(lax_):
        def f(c):
            xs = lax_.broadcast(2.0, (3,))
            return lax_.scan(lambda c, x: (c * x, c + x), c, xs)[1].sum()
        return f

    def weak_flags(make_jaxpr, grad, lax_):
        closed = make_jaxpr(grad(make(lax_)))(np.float32(1.5))
        bwd = [e for e in closed.eqns if e.primitive.name == "scan"][-1].params["jaxpr"]
        return sorted((str(v.aval.dtype), bool(v.aval.weak_type)) for v in bwd.jaxpr.invars)

    assert weak_flags(ftrans.make_jaxpr, ftrans.grad, flax) == weak_flags(jax.make_jaxpr, jax.grad, jax.lax)
    assert float(ftrans.grad(make(flax))(np.float32(1.5))) == float(jax.grad(make(jax.lax))(np.float32(1.5)))
