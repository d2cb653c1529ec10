"""``experimental.custom_partitioning`` (declarations accepted; the function runs unpartitioned and XLA
partitions it) and ``experimental.layout`` (default layouts only), against jax on 8 host devices."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from functools import partial

import jax
import numpy as np
import pytest
from jax.experimental import custom_partitioning as jcp
from jax.experimental import layout as jlayout

import ftrans
import ftrans.numpy as fjnp
from ftrans.experimental import custom_partitioning as fcp
from ftrans.experimental import layout as flayout
from ftrans.sharding import NamedSharding, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")
HERE = os.path.abspath(__file__)
RNG = np.random.default_rng(0)


def _partition(precision, mesh, arg_shapes, result_shape):  # never called by ftrans
    raise AssertionError("ftrans runs the function unpartitioned")


def _infer(precision, mesh, arg_shapes, result_shape):
    raise AssertionError("ftrans runs the function unpartitioned")


def build(cp, jnp):
    @partial(cp.custom_partitioning, static_argnums=(2,))
    def f(x, y, precision=None):
        z = jnp.matmul(x, y, precision=precision)
        return z, z * z

    f.def_partition(infer_sharding_from_operands=_infer, partition=_partition,
                    sharding_rule=cp.SdyShardingRule(operand_mappings=(("i", "j"), ("j", "k")),
                                                     result_mappings=(("i", "k"), ("i", "k"))))
    return f


def test_custom_partitioned_matmul_gives_the_values_of_the_plain_function():
    x = RNG.integers(0, 20, (32, 16)).astype(np.float32)
    y = RNG.integers(0, 20, (16, 32)).astype(np.float32)
    f = build(fcp, fjnp)
    mesh = ftrans.make_mesh((4, 2), ("x", "y"))
    with ftrans.sharding.set_mesh(mesh):
        xs = ftrans.device_put(x, NamedSharding(mesh, P("x")))
        ys = ftrans.device_put(y, NamedSharding(mesh, P("y")))
        r0 = ftrans.jit(f, in_shardings=(NamedSharding(mesh, P("x")), NamedSharding(mesh, P("y"))),
                        out_shardings=NamedSharding(mesh, P("x")))(xs, ys)
        r1 = ftrans.jit(f)(xs, ys)
    r2 = f(x, y)
    want = x @ y
    for r in (r0, r1, r2):
        np.testing.assert_array_equal(np.asarray(r[0]), want)
        np.testing.assert_array_equal(np.asarray(r[1]), want * want)
    assert r0[0].sharding.spec == P("x")


def test_rule_objects_match_jax():
    def rule(cp, **kw):
        return cp.SdyShardingRule((cp.ArrayMapping(cp.BATCHING, "i", cp.CompoundFactor("j", "k")), ("i", "m")),
                                  (cp.ArrayMapping(cp.BATCHING, "i"),), j=2, k=3, **kw)

    assert str(rule(fcp)) == str(rule(jcp))
    assert str(rule(fcp, reduction_factors=("m",))) == str(rule(jcp, reduction_factors=("m",)))
    assert fcp.BATCHING == jcp.BATCHING
    bad = [lambda cp: cp.CompoundFactor("j"), lambda cp: cp.ArrayMapping("i", cp.BATCHING),
           lambda cp: cp.ArrayMapping("1i"), lambda cp: cp.SdyShardingRule((("i",),), (("i",),), i=2),
           lambda cp: cp.SdyShardingRule(((cp.CompoundFactor("i", "j"),),), (("i",),)),
           lambda cp: cp.SdyShardingRule((("i",),), (("i",),), reduction_factors=("z",))]
    for b in bad:
        with pytest.raises(ValueError) as want:
            b(jcp)
        with pytest.raises(ValueError) as got:
            b(fcp)
        assert str(want.value).splitlines()[0] == str(got.value).splitlines()[0]


def test_def_partition_records_the_rules_and_returns_partition():
    @fcp.custom_partitioning
    def f(x):
        return x + 1

    assert f.def_partition(partition=_partition, sharding_rule="i -> i") is _partition
    assert f.partition is _partition and f.sharding_rule == "i -> i"
    np.testing.assert_array_equal(np.asarray(ftrans.jit(f)(np.arange(4.0))), np.arange(4.0) + 1)
    np.testing.assert_array_equal(np.asarray(f(x=np.arange(2.0))), [1.0, 2.0])  # keywords resolve as in JAX
    with pytest.raises(TypeError) as info:
        f.def_partition(partition=3)
    assert HERE in str(info.value)


def test_grad_through_a_custom_partitioned_function():
    @fcp.custom_partitioning
    def f(x):
        return fjnp.sin(x) * 2

    f.def_partition(partition=_partition, sharding_rule="i -> i")
    x = np.linspace(0, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(ftrans.grad(lambda a: f(a).sum())(x)), 2 * np.cos(x), rtol=1e-6)



def test_callbacks_without_a_sharding_rule_are_refused_as_jax():
    """Under Shardy (the default in both), propagation callbacks with no sharding_rule raise JAX's
    NotImplementedError at the call; a sharding_rule, or no callbacks, is accepted."""

    x = np.arange(8.0, dtype=np.float32)
    for cp, F in ((jcp, jax), (fcp, ftrans)):
        for kw in ({"infer_sharding_from_operands": lambda *a: None}, {"propagate_user_sharding": lambda *a: None}):
            f = cp.custom_partitioning(lambda a: a + 1)
            f.def_partition(partition=_partition, **kw)
            with pytest.raises(NotImplementedError, match="provide sharding_rule to migrate to Shardy"):
                F.jit(f)(x)
        g = cp.custom_partitioning(lambda a: a + 1)
        g.def_partition(partition=_partition, infer_sharding_from_operands=lambda *a: None, sharding_rule="i -> i")
        np.testing.assert_array_equal(np.asarray(F.jit(g)(x)), x + 1)

# ---------------------------------------------------------------- layout


def test_layout_and_format_compare_and_print_as_jax():
    lay, jlay = flayout.Layout((1, 0)), jlayout.Layout((1, 0))
    assert repr(lay) == repr(jlay)
    assert lay == flayout.Layout((1, 0)) and hash(lay) == hash(flayout.Layout((1, 0)))
    assert lay.update(major_to_minor=(0, 1)) == flayout.Layout((0, 1))
    # ftrans prints Layout.AUTO as jax 0.10 does ("AUTO"; jax 0.11 prints "AutoLayout")
    assert repr(flayout.Layout.AUTO) == repr(jlayout.Layout.AUTO).replace("AutoLayout", "AUTO") == "AUTO"
    assert repr(flayout.Format()) == repr(jlayout.Format())
    assert repr(flayout.Format(flayout.Layout.AUTO)) == \
        repr(jlayout.Format(jlayout.Layout.AUTO)).replace("AutoLayout", "AUTO")
    with pytest.raises(ValueError, match="Sharding has to be concrete"):
        jlayout.Format(jlayout.Layout((0, 1)))
    with pytest.raises(ValueError, match="Sharding has to be concrete"):
        flayout.Format(flayout.Layout((0, 1)))
    with pytest.raises(TypeError, match="Invalid value received for the layout argument"):
        flayout.Format("row-major")
    d = ftrans.devices()[0]
    assert flayout.Format(lay, ftrans.sharding.SingleDeviceSharding(d)).layout == lay


def test_with_layout_constraint_accepts_the_default_layout():
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    tree = {"a": x, "b": x[0]}
    out = flayout.with_layout_constraint(tree, {"a": flayout.Layout((0, 1)), "b": flayout.Layout((0,))})
    jout = jlayout.with_layout_constraint(jax.tree.map(jax.numpy.asarray, tree),
                                          {"a": jlayout.Layout((0, 1)), "b": jlayout.Layout((0,))})
    for k in tree:
        np.testing.assert_array_equal(np.asarray(out[k]), np.asarray(jout[k]))
    got = ftrans.jit(lambda a: flayout.with_layout_constraint(a * 2, flayout.Layout((0, 1))))(x)
    np.testing.assert_array_equal(np.asarray(got), x * 2)


def test_with_layout_constraint_errors():
    x = np.zeros((2, 3), np.float32)
    jx = jax.numpy.zeros((2, 3))
    with pytest.raises(ValueError, match="Length of major_to_minor and the rank of the value should match"):
        jlayout.with_layout_constraint(jx, jlayout.Layout((0,)))
    with pytest.raises(ValueError, match="Length of major_to_minor and the rank of the value should match"):
        flayout.with_layout_constraint(x, flayout.Layout((0,)))
    with pytest.raises(ValueError, match="must be of type `Layout`"):
        jlayout.with_layout_constraint(jx, None)
    with pytest.raises(ValueError, match="must be of type `Layout`"):
        flayout.with_layout_constraint(x, None)
    # JAX on CPU lays the value out column-major; ftrans keeps row-major only and says so.
    with pytest.raises(NotImplementedError, match="not the default layout"):
        flayout.with_layout_constraint(x, flayout.Layout((1, 0)))


def test_formats_with_the_default_layout_stand_for_their_sharding():
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(ftrans.sharding.AxisType.Auto,) * 2,
                          devices=ftrans.devices()[:4])
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2, devices=jax.devices()[:4])
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    fs, js = NamedSharding(fm, P("x", "y")), jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec("x", "y"))
    fx = ftrans.device_put(x, flayout.Format(flayout.Layout((0, 1)), fs))
    jx = jax.device_put(x, jlayout.Format(jlayout.Layout((0, 1)), js))
    assert fx.sharding == fs and repr(fx.format.layout) == repr(jx.format.layout)
    fo = ftrans.jit(lambda a: a * 2, in_shardings=flayout.Format(flayout.Layout((0, 1)), fs),
                    out_shardings=flayout.Format(flayout.Layout.AUTO, NamedSharding(fm, P("x"))))(fx)
    jo = jax.jit(lambda a: a * 2, in_shardings=jlayout.Format(jlayout.Layout((0, 1)), js),
                 out_shardings=jlayout.Format(jlayout.Layout.AUTO, jax.sharding.NamedSharding(
                     jm, jax.sharding.PartitionSpec("x"))))(jx)
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    assert fo.sharding == NamedSharding(fm, P("x"))
    got = ftrans.jit(lambda a: ftrans.lax.with_sharding_constraint(
        a + 1, flayout.Format(flayout.Layout((0, 1)), NamedSharding(fm, P("y")))))(fx)
    np.testing.assert_array_equal(np.asarray(got), x + 1)
    assert ftrans.device_put(x, jlayout.Format(jlayout.Layout((0, 1)), js)).sharding == fs  # JAX's Format too
    fl = ftrans.device_put(x, flayout.Format(flayout.Layout((1, 0)), fs))  # another layout: XLA lays it out
    jl = jax.device_put(x, jlayout.Format(jlayout.Layout((1, 0)), js))
    assert fl.format.layout.major_to_minor == jl.format.layout.major_to_minor == (1, 0)
    np.testing.assert_array_equal(np.asarray(fl), np.asarray(jl))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda a: a + 1)(fl)), x + 1)  # read in its layout


def _m2m(fmt):
    return tuple(fmt.layout.major_to_minor)


def test_layouts_compiled_for_match_jax():
    # Layout.AUTO lets XLA choose (a transpose's result comes back in the transposed layout), a concrete
    # layout is compiled for, and the arrays carry the layouts they were computed in; values are jax's.
    fm = ftrans.make_mesh((2, 2), ("x", "y"), axis_types=(ftrans.sharding.AxisType.Auto,) * 2,
                          devices=ftrans.devices()[:4])
    jm = jax.make_mesh((2, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2, devices=jax.devices()[:4])
    fs, js = NamedSharding(fm, P("x", "y")), jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec("x", "y"))
    x = np.arange(128.0, dtype=np.float32).reshape(8, 16)
    fa, ja = ftrans.device_put(x, fs), jax.device_put(x, js)
    fc = ftrans.jit(lambda a: a.T, in_shardings=flayout.Format(), out_shardings=flayout.Format(
        flayout.Layout.AUTO)).lower(fa).compile()
    jc = jax.jit(lambda a: a.T, in_shardings=jlayout.Format(), out_shardings=jlayout.Format(
        jlayout.Layout.AUTO)).lower(ja).compile()
    assert _m2m(fc.output_formats) == _m2m(jc.output_formats) == (1, 0)
    assert _m2m(fc.input_formats[0][0]) == _m2m(jc.input_formats[0][0])
    fo, jo = fc(fa), jc(ja)
    assert _m2m(fo.format) == _m2m(jo.format) and fo.format == fc.output_formats
    np.testing.assert_array_equal(np.asarray(fo), np.asarray(jo))
    np.testing.assert_array_equal(np.asarray(ftrans.jit(lambda a: a * 2)(fo)), x.T * 2)  # default-layout reader
    # a concrete layout for an argument: an uncommitted array is laid out so, a committed one must already be
    one = ftrans.sharding.SingleDeviceSharding(ftrans.devices()[0])
    f = ftrans.jit(lambda a: a + 1, in_shardings=flayout.Format(flayout.Layout((1, 0)), one))
    np.testing.assert_array_equal(np.asarray(f(fjnp.asarray(x))), x + 1)
    np.testing.assert_array_equal(np.asarray(f(x)), x + 1)
    g = ftrans.jit(lambda a: a.T, in_shardings=flayout.Format(flayout.Layout((1, 0)), fs))
    with pytest.raises(ValueError, match="Layout passed to jit does not match the layout on the respective arg"):
        g(fa)
    with pytest.raises(ValueError, match="does not accept device-local layouts directly"):
        ftrans.jit(lambda a: a, in_shardings=flayout.Layout.AUTO).lower(x)


def test_layout_donation_errors_match_jax():
    for kw, which in [(dict(in_shardings=flayout.Format(flayout.Layout.AUTO)), "output"),
                      (dict(out_shardings=flayout.Format(flayout.Layout.AUTO)), "input")]:
        with pytest.raises(ValueError, match=f"Did you mean to set the .*{which} layout.*AUTO"):
            ftrans.jit(lambda a: a * 2, donate_argnums=0, **kw)(fjnp.arange(8))
        jkw = {k: jlayout.Format(jlayout.Layout.AUTO) for k in kw}
        with pytest.raises(ValueError, match=f"Did you mean to set the .*{which} layout.*AUTO"):
            jax.jit(lambda a: a * 2, donate_argnums=0, **jkw)(jax.numpy.arange(8))


def _fmt(f):
    if f.layout is None:
        return (None, f.sharding)
    return (f.layout.major_to_minor, f.sharding.spec if hasattr(f.sharding, "spec") else type(f.sharding).__name__)


def test_compiled_input_and_output_formats_match_jax():
    # (args, kwargs) of Formats for the inputs (an unread one included) and the outputs' pytree, for a
    # one-device and a partitioned program; a ShapeDtypeStruct takes a Format, never Layout.AUTO.
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    fm = ftrans.make_mesh((2,), ("x",), axis_types=(ftrans.sharding.AxisType.Auto,), devices=ftrans.devices()[:2])
    jm = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,), devices=jax.devices()[:2])
    fa = ftrans.device_put(x, NamedSharding(fm, P("x")))
    ja = jax.device_put(x, jax.sharding.NamedSharding(jm, jax.sharding.PartitionSpec("x")))
    for fin, jin in [(x, x), (fa, ja)]:
        fc = ftrans.jit(lambda a, dead: (a.T, a)).lower(fin, fin).compile()
        jc = jax.jit(lambda a, dead: (a.T, a)).lower(jin, jin).compile()
        (fargs, fkw), (jargs, jkw) = fc.input_formats, jc.input_formats
        assert fkw == jkw == {} and [_fmt(f) for f in fargs] == [_fmt(f) for f in jargs]
        assert [f.layout.major_to_minor for f in fc.output_formats] == [
            f.layout.major_to_minor for f in jc.output_formats]
    sds = ftrans.ShapeDtypeStruct(x.shape, x.dtype, sharding=fc.output_formats[1])
    assert sds.sharding == fc.output_formats[1].sharding and sds.format == fc.output_formats[1]
    assert ftrans.ShapeDtypeStruct((2,), np.float32).format.layout is None
    with pytest.raises(TypeError, match="`Layout.AUTO` cannot be used"):
        ftrans.ShapeDtypeStruct(x.shape, x.dtype, sharding=flayout.Format(flayout.Layout.AUTO))
    with pytest.raises(TypeError, match="`Layout.AUTO` cannot be used"):
        jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=jlayout.Format(jlayout.Layout.AUTO))


def test_device_put_needs_a_concrete_format_of_the_values_rank_as_jax():
    x = np.arange(8)
    for lib, lay in [(jax, jlayout), (ftrans, flayout)]:
        s = lib.sharding.SingleDeviceSharding(lib.devices()[0])
        for fmt in (lay.Format(lay.Layout.AUTO, s), lay.Format(lay.Layout.AUTO)):
            with pytest.raises(ValueError, match="sharding and layout.*should be concrete"):
                lib.device_put(x, fmt)
        with pytest.raises(ValueError, match="Length of major_to_minor and the rank of the value should match"):
            lib.device_put(x, lay.Format(lay.Layout((0, 1, 2)), s))
        np.testing.assert_array_equal(np.asarray(lib.device_put(x, lay.Format(None, s))), x)


def test_a_layout_of_the_wrong_rank_is_refused_like_jax():
    # jit's in_shardings and make_array_from_callback check a concrete layout against the value's rank.
    x = np.arange(8)
    for lib, lay in ((jax, jlayout), (ftrans, flayout)):
        s = lib.sharding.SingleDeviceSharding(lib.devices()[0])
        fmt = lay.Format(lay.Layout((0, 1, 2)), s)
        with pytest.raises(ValueError, match="Length of major_to_minor and the rank of the value should match"):
            lib.jit(lambda v: v * 2, in_shardings=fmt)(x)
        np.testing.assert_array_equal(lib.jit(lambda v: v * 2, in_shardings=lay.Format(lay.Layout((0,)), s))(x),
                                      x * 2)


def test_make_array_from_callback_needs_a_concrete_format_like_jax():
    x = np.arange(16).reshape(8, 2)
    for lib, lay in ((jax, jlayout), (ftrans, flayout)):
        s = lib.sharding.SingleDeviceSharding(lib.devices()[0])
        out = lib.make_array_from_callback(x.shape, lay.Format(lay.Layout((0, 1)), s), lambda i: x[i])
        np.testing.assert_array_equal(out, x)
        with pytest.raises(TypeError, match="`Layout.AUTO` cannot be used in place of a device-local layout"):
            lib.make_array_from_callback(x.shape, lay.Format(lay.Layout.AUTO, s), lambda i: x[i])
        with pytest.raises(TypeError, match="sharding should be an instance of `jax.sharding`"):
            lib.make_array_from_callback(x.shape, lay.Format(None, None), lambda i: x[i])


def test_eval_shape_keeps_the_out_format_like_jax():
    x = np.arange(16.0).reshape(8, 2)
    got = []
    for lib, lay in ((jax, jlayout), (ftrans, flayout)):
        mesh = lib.sharding.Mesh(np.array(lib.devices()[:4]).reshape(2, 2), ("x", "y"))
        s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x", "y"))
        fmt = lay.Format(lay.Layout((0, 1)), s)
        f = lib.jit(lambda v: v * v, in_shardings=fmt, out_shardings=fmt)
        out = lib.eval_shape(f, lib.device_put(x, fmt))
        assert out.format == fmt and out.sharding == s
        got.append(out.format.layout.major_to_minor)
    assert got[0] == got[1]
