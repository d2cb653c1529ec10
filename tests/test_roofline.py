"""``ftrans.experimental.roofline`` against ``jax.experimental.roofline``: the same function written with each
library's ops, costed by each library's roofline, gives the same ``RooflineResult`` (FLOPs, HBM bytes,
interconnect bytes and hops, peak live bytes), and bad input raises a specific error."""

from __future__ import annotations

import dataclasses
import logging
import types
from functools import partial

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np
import pytest
from jax import lax as jlax  # noqa: E402

from tests.backend_util import import_jax_module_without_absl  # noqa: E402

jroof = import_jax_module_without_absl("jax.experimental.roofline")

import ftrans  # noqa: E402
import ftrans.numpy as fnp  # noqa: E402
from ftrans import lax as flax  # noqa: E402
from ftrans.experimental import roofline as froof  # noqa: E402

J = types.SimpleNamespace(ft=jax, np=jnp, lax=jlax, roof=jroof, P=jax.sharding.PartitionSpec,
                          NS=jax.sharding.NamedSharding, mesh=jax.sharding.Mesh, devices=jax.devices)
F = types.SimpleNamespace(ft=ftrans, np=fnp, lax=flax, roof=froof, P=ftrans.sharding.PartitionSpec,
                          NS=ftrans.sharding.NamedSharding, mesh=ftrans.sharding.Mesh, devices=ftrans.devices)


def _d(r) -> dict:
    return dataclasses.asdict(r)


def same(make, *args_of):
    """``make(lib)`` gives ``(roofline-wrapped function, args)``; both libraries' results agree."""
    jf, jargs = make(J)
    ff, fargs = make(F)
    jr = jf(*jargs)
    fr = ff(*fargs)
    jres = [_d(r) for r in jr[1:]]
    fres = [_d(r) for r in fr[1:]]
    assert fres == jres
    return fr


@pytest.mark.parametrize("name,dtype", [("sin", np.float32), ("exp", np.float32), ("abs", np.int32),
                                        ("neg", np.float32), ("sqrt", np.float32), ("logistic", np.float32),
                                        ("erf_inv", np.float32), ("lgamma", np.float32), ("real", np.complex64),
                                        ("bitwise_not", np.bool_), ("is_finite", np.float32),
                                        ("round", np.float32), ("sign", np.float32)])
def test_unary_ops(name, dtype):
    same(lambda L: (L.roof.roofline(getattr(L.lax, name)), (L.np.zeros((3, 8), dtype),)))


_BINARY = {"add": "add", "mul": "mul", "max": "max", "lt": "lt", "rem": "rem", "sub": "sub", "xor": "bitwise_xor",
           "ne": "ne", "div": "div"}


@pytest.mark.parametrize("op", sorted(_BINARY))
def test_binary_ops(op):
    dtype = np.int32 if op == "xor" else np.float32
    f = lambda L: lambda a, b: getattr(L.lax, _BINARY[op])(a, b)  # noqa: E731
    same(lambda L: (L.roof.roofline(f(L)), (L.np.ones((3, 8), dtype), L.np.ones((3, 8), dtype))))
    same(lambda L: (L.roof.roofline(lambda a: f(L)(a, dtype(2))), (L.np.ones((3, 8), dtype),)))
    g = lambda L: lambda a, b: getattr(L.np, {"mul": "multiply", "max": "maximum", "lt": "less", "sub": "subtract",  # noqa: E731
                                             "xor": "bitwise_xor", "ne": "not_equal", "add": "add"}[op])(a, b)
    if op not in ("rem", "div"):  # (jnp's remainder and division are several primitives each)
        same(lambda L: (L.roof.roofline(g(L)), (L.np.ones((3, 8), dtype), L.np.ones((), dtype))))


def test_integer_pow():
    same(lambda L: (L.roof.roofline(lambda a: L.lax.integer_pow(a, 5)), (L.np.ones((3, 8), np.int32),)))


@pytest.mark.parametrize("shapes", [((3, 8), (1, 1)), ((1, 8), (3, 1)), ((3, 8), (8,))])
def test_broadcasting_flops(shapes):
    # FLOPs agree; the bytes differ by design: JAX's elementwise primitives take size-1 dimensions as they are,
    # ftrans's take operands of one shape (the API broadcasts first), so the broadcast operand counts in full
    # (docs/differences.md).
    def make(L):
        return L.roof.roofline(lambda a, b: a + b), (L.np.ones(shapes[0]), L.np.ones(shapes[1]))
    (jf, ja), (ff, fa) = make(J), make(F)
    jr, fr = jf(*ja)[1], ff(*fa)[1]
    assert fr.unfused_flops == jr.unfused_flops == 24
    assert fr.unfused_hbm_bytes >= jr.unfused_hbm_bytes


def test_elementwise_program_and_peak_bytes():
    def make(L):
        def f(x, y):
            z = L.np.sin(x) * y + x ** 2
            return L.np.exp(z) - y
        return L.roof.roofline(f), (L.np.ones((4, 8)), L.np.ones((4, 8)))

    r = same(make)
    assert r[1].peak_hbm_bytes > 0


@pytest.mark.parametrize("axis", [0, 1, (0, 1), (), None])
def test_reduce_sum(axis):
    # axis=() stages reduce_sum over no axes (as JAX's): it costs the input and output bytes.
    same(lambda L: (L.roof.roofline(lambda x: L.np.sum(x, axis=axis)), (L.np.zeros((11, 4)),)))


@pytest.mark.parametrize("fn", ["cumsum", "cummax", "cummin", "cumprod", "cumlogsumexp"])
@pytest.mark.parametrize("axis", [0, 2])
def test_cumulative(fn, axis):
    dtype = np.float32 if fn == "cumlogsumexp" else np.int32
    same(lambda L: (L.roof.roofline(lambda x: getattr(L.lax, fn)(x, axis=axis)), (L.np.zeros((3, 8, 5), dtype),)))


def test_dot_general_and_pinning():
    for pin in [dict(), dict(pin_lhs_in_vmem=True), dict(pin_rhs_in_vmem=True)]:
        same(lambda L: (L.roof.roofline(lambda a, b: a @ b, **pin), (L.np.zeros((3, 7)), L.np.ones((7, 5)))))
    same(lambda L: (L.roof.roofline(lambda a, b: L.np.einsum("bij,bjk->bik", a, b)),
                    (L.np.zeros((2, 3, 7)), L.np.ones((2, 7, 5)))))


@pytest.mark.parametrize("kw", [dict(window_strides=(1, 1), padding="SAME"),
                                dict(window_strides=(2, 1), padding=((1, 2), (3, 0))),
                                dict(window_strides=(1, 1), padding="VALID", rhs_dilation=(2, 1)),
                                dict(window_strides=(2, 2), padding=((1, 1), (0, 2)), lhs_dilation=(2, 1)),
                                dict(window_strides=(1, 1), padding="VALID", feature_group_count=3),
                                dict(window_strides=(1, 1), padding="VALID", batch_group_count=3)])
def test_conv(kw):
    fg, bg = kw.get("feature_group_count", 1), kw.get("batch_group_count", 1)
    lhs, rhs = (6, 6, 10, 9), (6 if bg == 1 else 3 * bg, 6 // fg, 3, 2)

    def make(L):
        return (L.roof.roofline(lambda a, b: L.lax.conv_general_dilated(a, b, **kw)),
                (L.np.zeros(lhs, np.float32), L.np.ones(rhs, np.float32)))
    same(make)


@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
def test_gather(mode):
    def make(L):
        dn = L.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
        m = {"clip": L.lax.GatherScatterMode.CLIP, "fill": L.lax.GatherScatterMode.FILL_OR_DROP,
             "promise_in_bounds": L.lax.GatherScatterMode.PROMISE_IN_BOUNDS}[mode]
        return (L.roof.roofline(lambda x, i: L.lax.gather(x, i, dn, (1, 3), mode=m)),
                (L.np.zeros((5, 3), np.int32), L.np.zeros((4, 1), np.int32)))
    same(make)


@pytest.mark.parametrize("fn", ["scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max", "scatter"])
def test_scatter(fn):
    def make(L):
        dn = L.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                           scatter_dims_to_operand_dims=(0,))
        return (L.roof.roofline(lambda x, i, u: getattr(L.lax, fn)(x, i, u, dn)),
                (L.np.zeros((3, 3)), L.np.zeros((2, 1), np.int32), L.np.ones((2, 3))))
    same(make)


def test_select_n_and_indexing():
    same(lambda L: (L.roof.roofline(L.lax.select_n), (L.np.zeros((4, 8), np.int32),) + (L.np.zeros((4, 8)),) * 3))
    same(lambda L: (L.roof.roofline(lambda x, i: x[i]), (L.np.zeros((6, 3)), L.np.zeros((4,), np.int32))))
    same(lambda L: (L.roof.roofline(lambda x: L.np.where(x > 0, x, -x)), (L.np.zeros((6, 3)),)))


def _custom(L):
    @L.ft.custom_jvp
    def f(x):
        return L.np.sin(x) + x ** 2

    f.defjvp(lambda p, t: (f(*p), t[0]))

    @L.ft.custom_vjp
    def g(x):
        return L.np.cos(x) * x

    g.defvjp(lambda x: (g(x), x), lambda r, c: (c,))
    return f, g


def test_calls_are_costed_through_their_bodies():
    def make(L):
        f, g = _custom(L)

        def h(x, y):
            inner = L.ft.jit(lambda a: a * y)
            c = L.ft.checkpoint(lambda a: L.np.tanh(a) @ a)
            return L.lax.neg(f(x)) + g(inner(x)) + c(x) + inner(y)
        return L.roof.roofline(h), (L.np.ones((4, 4)), L.np.ones((4, 4)))
    same(make)


def test_control_flow_as_jax():
    # scan's body is costed once; cond and while_loop cost nothing (JAX's model).
    def make(L):
        def h(x):
            c, ys = L.lax.scan(lambda c, a: (c + a, L.np.sin(c * a)), x[0], x)
            w = L.lax.while_loop(lambda v: v[0] < 3, lambda v: v + 1, c)
            k = L.lax.cond(w[0] > 0, L.np.sin, L.np.cos, w)
            return k, ys
        return L.roof.roofline(h), (L.np.ones((5, 8)),)
    same(make)


def test_callbacks():
    def make(L):
        def h(x):
            y = L.ft.pure_callback(lambda v: np.asarray(v) * 2, L.ft.ShapeDtypeStruct(x.shape, x.dtype), x)
            L.ft.debug.callback(lambda v: None, y)
            return y + 1
        return L.roof.roofline(h), (L.np.zeros((3, 8)),)
    same(make)


def test_vjp_costs_the_backward_pass():
    args = lambda L: (L.ft.ShapeDtypeStruct((4, 8), L.np.bfloat16), L.ft.ShapeDtypeStruct((8, 2), L.np.bfloat16))  # noqa: E731
    same(lambda L: (L.roof.roofline(lambda a, b: (L.np.sin(a) @ b).sum(), vjp=True), args(L)))
    # Where a value fans out, JAX sums its cotangents with ``add_any``, which JAX's roofline costs nothing;
    # ftrans sums them with ``add``, costed as any add (docs/differences.md).
    (jf, ja), (ff, fa) = [(L.roof.roofline(lambda a, b, L=L: L.np.tanh(a @ b).sum(), vjp=True), args(L))
                          for L in (J, F)]
    jr, fr = jf(*ja)[1], ff(*fa)[1]
    assert fr.flops == jr.flops and fr.unfused_flops > jr.unfused_flops


# ---------------------------------------------------------------- shard_map and collectives
def _mesh(L, shape=(2, 2, 2)):
    return L.mesh(np.array(L.devices()[:int(np.prod(shape))]).reshape(shape), ("x", "y", "z"))


def _inputs(L, mesh, *specs, dtype=np.float32):
    return tuple(L.ft.ShapeDtypeStruct((8, 8), dtype, sharding=L.NS(mesh, s)) for s in specs)


def _sharded(make_body, specs, out_specs, *, dtype=np.float32, shape=(2, 2, 2), grad=False):
    def make(L):
        mesh = _mesh(L, shape)
        ins = tuple(L.P(*s) for s in specs)
        outs = out_specs(L)
        wrap = L.roof.roofline_and_grad if grad else L.roof.roofline
        return wrap(make_body(L), mesh=mesh, in_specs=ins, out_specs=outs), _inputs(L, mesh, *ins, dtype=dtype)
    return same(make)


@pytest.mark.needs_devices(8)
def test_matmul_psum():
    _sharded(lambda L: lambda a, b: L.lax.psum(a @ b, ("x", "y")), [("z", ("x", "y")), (("x", "y"), None)],
             lambda L: L.P("z", None))


@pytest.mark.needs_devices(8)
def test_collective_matmul_int8():
    def body(L):
        def f(a, b, c):
            a = L.lax.all_gather(a, "x", axis=1, tiled=True)
            ab = L.np.einsum("bij,jbk->ikb", a[None], b[:, None]).astype(np.int8)[..., 0]
            abc = (ab @ c).astype(np.int8)
            return L.lax.psum_scatter(abc, "x", scatter_dimension=1, tiled=True)
        return f
    _sharded(body, [(None, "x"), (None, "x"), ("x", None)], lambda L: L.P(None, "x"), dtype=np.int8)


@pytest.mark.needs_devices(8)
def test_scalar_collectives():
    def body(L):
        return lambda a, b: (L.lax.pmin(a, ("x", "y")), L.lax.pmax(b, "z"))
    _sharded(body, [("z", ("x", "y")), (("x", "y"), "z")], lambda L: (L.P("z", None), L.P(("x", "y"), None)))


@pytest.mark.needs_devices(8)
def test_ppermute():
    def body(L):
        def f(a, b):
            a = L.lax.ppermute(a, ("x", "y"), perm=((0, 3), (3, 0), (1, 2), (2, 1)))
            return a, L.lax.ppermute(b, "z", perm=((1, 0), (0, 1)))
        return f
    specs = [("z", ("x", "y")), (("x", "y"), "z")]
    _sharded(body, specs, lambda L: (L.P(*specs[0]), L.P(*specs[1])))


@pytest.mark.needs_devices(8)
def test_all_to_all_one_axis():
    _sharded(lambda L: lambda b: L.lax.all_to_all(b, "z", split_axis=0, concat_axis=1, tiled=True),
             [(("x", "y"), "z")], lambda L: L.P(("x", "y", "z"), None))


@pytest.mark.needs_devices(8)
def test_one_sized_axis_collectives_cost_nothing():
    def body(L):
        def f(a):
            a = L.lax.pmin(a, "x")
            a = L.lax.all_gather(a, "x", axis=1, tiled=True)
            a = L.lax.psum_scatter(a, "x", scatter_dimension=1, tiled=True)
            a = L.lax.psum(a, "x")
            return L.lax.all_to_all(a, "x", split_axis=0, concat_axis=1, tiled=True)
        return f
    _sharded(body, [("x",)], lambda L: L.P("x"), shape=(1, 2, 4))


@pytest.mark.needs_devices(8)
def test_roofline_and_grad_matmuls():
    def body(L):
        return lambda a, b: L.lax.all_gather(a, "x", axis=1, tiled=True) @ b
    r = _sharded(body, [(None, "x"), (None, None)], lambda L: L.P("x", None), dtype=np.int8, grad=True)
    out = r[0]
    assert isinstance(out.sharding, ftrans.sharding.NamedSharding) and out.sharding.spec == ftrans.sharding.PartitionSpec("x", None)


def test_out_shapes():
    out, res = froof.roofline(lambda x: (x.sum(0), {"y": x * 2}))(fnp.ones((3, 4), np.int32))
    assert out[0].shape == (4,) and out[1]["y"].shape == (3, 4) and out[1]["y"].dtype == np.int32
    assert isinstance(res, froof.RooflineResult)


def test_print_jaxpr(capsys):
    froof.roofline(lambda x: fnp.sin(x), print_jaxpr=True)(fnp.ones(3))
    assert "sin" in capsys.readouterr().out


# ---------------------------------------------------------------- results, shapes and rules
def test_result_arithmetic_like_jax():
    a = dict(flops=3, unfused_flops=5, ici_bytes={"x": 2}, ici_latency={"x": 1}, hbm_bytes=7, peak_hbm_bytes=9,
             unfused_hbm_bytes=11)
    b = dict(flops=1, ici_bytes={"x": 1, "y": 4}, peak_hbm_bytes=20)
    for L in (J, F):
        ra, rb = L.roof.RooflineResult(**a), L.roof.RooflineResult(**b)
        setattr(L, "_sum", _d(ra + rb))
        setattr(L, "_mul", (_d(ra * 2.5), _d(3 * rb)))
        setattr(L, "_zero", _d(L.roof.RooflineResult.zeros()))
    assert (F._sum, F._mul, F._zero) == (J._sum, J._mul, J._zero)
    with pytest.raises(dataclasses.FrozenInstanceError):
        froof.RooflineResult().flops = 1  # type: ignore[misc]


def test_roofline_shape():
    from ftrans.core.avals import ShapedArray

    s = froof.RooflineShape.from_aval(ShapedArray((3, 4), np.dtype(np.float16)))
    assert (s.shape, s.size, s.bytes) == ((3, 4), 12, 24)
    assert froof.RooflineShape.total_bytes([ShapedArray((2,), np.dtype(np.int8))] * 3) == 6
    with pytest.raises(TypeError, match="Expected ShapedArray"):
        froof.RooflineShape.from_aval(np.zeros(3))


def test_register_roofline_for_a_new_primitive():
    from ftrans.extend.core import Primitive

    p = Primitive("roofline_test_double")
    p.def_impl(lambda x: x * 2)
    p.def_abstract_eval(lambda x: x)
    seen = {}

    @froof.register_roofline(p)
    def rule(ctx, x, **params):
        seen["ctx"] = ctx
        return froof.RooflineResult(unfused_flops=x.size, unfused_hbm_bytes=2 * x.bytes)

    _, r = froof.roofline(lambda x: fnp.abs(p.bind(x)))(fnp.ones((3, 8)))
    assert (r.unfused_flops, r.unfused_hbm_bytes) == (2 * 24, 4 * 96)
    assert seen["ctx"].primitive is p and seen["ctx"].mesh is None and seen["ctx"].avals_in[0].shape == (3, 8)
    froof.register_standard_roofline(p)
    _, r2 = froof.roofline(lambda x: fnp.abs(p.bind(x)))(fnp.ones((3, 8)))
    _, r3 = froof.roofline(fnp.abs)(fnp.ones((3, 8)))
    assert _d(r2) == _d(r3)


def test_primitive_without_rule_contributes_nothing(caplog):
    from ftrans.extend.core import Primitive

    p = Primitive("roofline_test_no_rule")
    p.def_impl(lambda x: x)
    p.def_abstract_eval(lambda x: x)
    with caplog.at_level(logging.WARNING, logger="ftrans.experimental.roofline"):
        _, r = froof.roofline(lambda x: fnp.abs(p.bind(x)))(fnp.ones((3, 8)))
    _, want = froof.roofline(fnp.abs)(fnp.ones((3, 8)))
    assert _d(r) == _d(want)
    assert "No roofline rule for roofline_test_no_rule" in caplog.text


@pytest.mark.needs_devices(8)
def test_bad_input():
    with pytest.raises(TypeError, match="callable"):
        froof.roofline(5)
    with pytest.raises(TypeError, match="callable"):
        froof.roofline_and_grad(None, None, None, None)
    with pytest.raises(TypeError, match="Primitive"):
        froof.register_roofline("sin")
    with pytest.raises(TypeError, match="Primitive"):
        froof.register_standard_roofline(fnp.sin)
    # A collective costed without a mesh: JAX fails on an assert; ftrans says what is missing.
    mesh = _mesh(F)
    P = F.P
    f = ftrans.shard_map(lambda a: flax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
    with pytest.raises(ValueError, match="needs a mesh"):
        froof.roofline(f)(fnp.ones((8, 2)))
    # out_specs that are no prefix of the outputs
    with pytest.raises(ValueError):
        froof.roofline(lambda a: (a, a), mesh=mesh, in_specs=P("x"), out_specs=(P("x"), P("x"), P("x")))(
            ftrans.ShapeDtypeStruct((8, 2), np.float32))


def test_public_names_like_jax():
    want = {n for n in dir(jroof) if not n.startswith("_") and n not in ("roofline",)} | {"roofline"}
    want -= {"rooflines"}
    have = {n for n in dir(froof) if not n.startswith("_")}
    assert want <= have, want - have
    assert set(froof.__all__) == {"RooflineResult", "RooflineRuleContext", "RooflineShape", "register_roofline",
                                  "register_standard_roofline", "roofline", "roofline_and_grad"}


def test_typed_keys_ordered_callbacks_and_vmap():
    same(lambda L: (L.roof.roofline(lambda k: L.ft.random.split(k, 3)), (L.ft.random.key(0),)))
    same(lambda L: (L.roof.roofline(lambda k: L.ft.random.fold_in(k, 3)), (L.ft.random.key(0),)))

    def io(L):
        cb = L.ft.experimental.io_callback
        return lambda x: cb(lambda v: v, L.ft.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)
    same(lambda L: (L.roof.roofline(io(L)), (L.np.ones(3),)))
    same(lambda L: (L.roof.roofline(lambda x: L.ft.vmap(lambda v: L.np.sin(v) @ v)(x)), (L.np.ones((2, 3, 3)),)))


@pytest.mark.needs_devices(8)
def test_all_gather_records_a_tuple_of_names_and_remat_policies_see_it():
    # JAX's all_gather records axis_name=('x',); a checkpoint policy comparing it with "x" does not match, so the
    # gathered value is recomputed in the backward pass on both (the figures of JAX's test_remat).
    def body(L):
        def policy(prim, *args, **kwargs):
            return prim == L.lax.all_gather_p and kwargs["axis_name"] == "x"

        @partial(L.ft.checkpoint, policy=policy)
        def f(a, b):
            return a @ L.lax.all_gather(b, "x", axis=0, tiled=True)
        return f
    _sharded(body, [("x", None), ("x", None)], lambda L: L.P("x", None), grad=True)
    fmesh = _mesh(F)
    fj = ftrans.make_jaxpr(ftrans.shard_map(lambda a: flax.all_gather(a, "x", tiled=True), mesh=fmesh,
                                            in_specs=F.P("x"), out_specs=F.P("x")))(fnp.ones((4,)))
    jmesh = _mesh(J)
    jj = jax.make_jaxpr(jax.shard_map(lambda a: jlax.all_gather(a, "x", tiled=True), mesh=jmesh,
                                      in_specs=J.P("x"), out_specs=J.P("x")))(jnp.ones((4,)))
    assert fj.jaxpr.eqns[0].params["jaxpr"].eqns[-1].params["axis_name"] == \
        jj.eqns[0].params["jaxpr"].eqns[-1].params["axis_name"] == ("x",)


def test_constants_and_unused_inputs():
    c = np.ones((3, 8), np.float32)
    same(lambda L: (L.roof.roofline(lambda x: x * c), (L.np.ones((3, 8)),)))
    same(lambda L: (L.roof.roofline(lambda x: x * L.np.ones((3, 8))), (L.np.ones((3, 8)),)))
    # an input nothing reads is left out of the live bytes (the program is pruned first)
    same(lambda L: (L.roof.roofline(lambda x, y: x), (L.np.ones((3, 8)), L.np.ones(5))))
