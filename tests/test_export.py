"""``ftrans.export`` against ``jax.export``: the exported function's calling conventions (trees, abstract
values, platforms), running it eagerly, in ``jit`` and ``vmap``, its derivatives through exported VJPs,
serialization round trips with registered pytree types, and JAX's errors."""

import collections

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans import export, lax


def _both(f_ft, f_jax, *args, ser=True, vjp_order=0, **kwargs):
    """The ftrans and jax Exported of the same function (ftrans's after a serialization round trip)."""
    e = export.export(ftrans.jit(f_ft))(*args, **kwargs)
    if ser:
        e = export.deserialize(e.serialize(vjp_order=vjp_order))
    j = jax.export.export(jax.jit(f_jax))(*args, **kwargs)
    return e, j


def _same_conventions(e, j):
    assert e.in_tree == j.in_tree and e.out_tree == j.out_tree
    assert [(a.shape, a.dtype) for a in e.in_avals] == [(a.shape, a.dtype) for a in j.in_avals]
    assert [(a.shape, a.dtype) for a in e.out_avals] == [(a.shape, a.dtype) for a in j.out_avals]
    assert e.platforms == j.platforms and e.nr_devices == j.nr_devices == 1
    assert e.in_shardings_hlo == (None,) * len(e.in_avals)


@pytest.mark.parametrize("ser", [False, True])
def test_pytree_kwargs_and_results_match_jax(ser):
    a, b = np.arange(4, dtype=np.float32), np.arange(6, dtype=np.float32)

    def f(J):
        return lambda pair, *, a, b: (dict(res=pair, a=a, b=b), J.sin(a), J.cos(b))

    e, j = _both(f(jnp), f(jjnp), (a, b), a=a, b=b, ser=ser)
    _same_conventions(e, j)
    assert e.fun_name == j.fun_name == "<lambda>"
    got, want = e.call((a, b), a=a, b=b), j.call((a, b), a=a, b=b)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)


def test_static_args_constants_and_the_module():
    c = np.linspace(0, 1, 5).astype(np.float32)
    x = np.arange(5, dtype=np.float32)

    @ftrans.jit(static_argnums=1)
    def g(x, k):
        return k * jnp.sin(x) + c

    e = export.export(g)(x, 3.0)
    assert e.fun_name == "g" and len(e.in_avals) == 1
    np.testing.assert_allclose(np.asarray(e.call(x)), 3.0 * np.sin(x) + c, rtol=1e-6)
    text = e.mlir_module()
    assert "func.func public @main" in text and "stablehlo.sine" in text
    assert e.mlir_module_serialized == text.encode()
    assert e.calling_convention_version == jax.export.maximum_supported_calling_convention_version
    # every argument stays in the signature, used or not (as JAX's)
    e2 = export.export(ftrans.jit(lambda x, y: jnp.sin(x)))(x, np.ones(3, np.float32))
    assert len(e2.in_avals) == 2
    np.testing.assert_allclose(np.asarray(e2.call(x, np.ones(3, np.float32))), np.sin(x), rtol=1e-6)


def test_library_functions_export_as_jax_jitted_ones():
    x = np.float32(1.5)
    e = export.export(jnp.sin)(x)
    j = jax.export.export(jjnp.sin)(x)
    assert e.platforms == j.platforms == (export.default_export_platform(),)
    assert export.default_export_platform() == jax.export.default_export_platform()
    np.testing.assert_allclose(np.asarray(e.call(x)), np.asarray(j.call(x)), rtol=1e-6)
    with pytest.raises(ValueError, match="Function to be exported must be the result of `jit`"):
        export.export(lambda x: jnp.sin(x))
    with pytest.raises(ValueError, match="Function to be exported must be the result of `jit`"):
        export.export(ftrans.grad(jnp.sin))  # a transformed library function is not one of the library's


def test_call_inside_jit_twice_nested_and_under_vmap():
    x = np.arange(4, dtype=np.float32)
    e = export.export(ftrans.jit(jnp.sin))(x)
    got = ftrans.jit(lambda x: e.call(x) + e.call(e.call(x)))(x)
    np.testing.assert_allclose(np.asarray(got), np.sin(x) + np.sin(np.sin(x)), rtol=1e-6)
    # an exported function calling another exported function, exported again
    e2 = export.export(ftrans.jit(lambda x: jnp.cos(e.call(e.call(x)))))(x)
    np.testing.assert_allclose(np.asarray(export.deserialize(e2.serialize()).call(x)),
                               np.cos(np.sin(np.sin(x))), rtol=1e-6)
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(ftrans.vmap(e.call)(xs)), np.sin(xs), rtol=1e-6)


def test_grad_through_serialized_vjps_matches_jax():
    f = lambda x: x ** 3  # noqa: E731
    x = np.float32(4.0)
    e, j = _both(f, f, x, vjp_order=3)
    g, jg = e.call, j.call
    for _ in range(3):
        g, jg = ftrans.grad(g), jax.grad(jg)
        np.testing.assert_allclose(np.asarray(g(x)), np.asarray(jg(x)), rtol=1e-6)
    with pytest.raises(ValueError, match="cannot be differentiated: no VJP is available"):
        ftrans.grad(g)(x)
    # without serialization the VJPs are exported on demand
    e0 = export.export(ftrans.jit(lambda x: jnp.sum(jnp.sin(x) * x)))(np.arange(3, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(ftrans.grad(e0.call)(np.arange(3, dtype=np.float32))),
                               np.asarray(jax.grad(lambda x: jjnp.sum(jjnp.sin(x) * x))(np.arange(3.0,
                                                                                          dtype=np.float32))),
                               rtol=1e-6)
    e_none = export.deserialize(e0.serialize())
    with pytest.raises(ValueError, match="no VJP is available"):
        ftrans.grad(e_none.call)(np.arange(3, dtype=np.float32))


def test_vjp_with_integer_inputs_and_outputs_matches_jax():
    def f(xi, xf):
        return 2 * xi.T, xf.T * xf.T

    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    xf = np.arange(12, dtype=np.float32).reshape(3, 4)
    e, j = _both(f, f, xi, xf, vjp_order=2)
    (oi, of), pb = ftrans.vjp(e.call, xi, xf)
    (joi, jof), jpb = jax.vjp(j.call, xi, xf)
    np.testing.assert_array_equal(np.asarray(oi), np.asarray(joi))
    cts = (np.zeros(oi.shape, jax.dtypes.float0), np.ones(of.shape, np.float32))
    ci, cf = pb(cts)
    jci, jcf = jpb(cts)
    assert ci.dtype == jci.dtype == jax.dtypes.float0
    np.testing.assert_allclose(np.asarray(cf), np.asarray(jcf))


def test_serialization_of_registered_pytree_types():
    T = collections.namedtuple("T", ("a", "b"))
    export.register_namedtuple_serialization(T, serialized_name="tests.test_export.T")

    @jax.tree_util.register_pytree_node_class
    class Box:
        def __init__(self, x, tag):
            self.x, self.tag = x, tag

        def tree_flatten(self):
            return (self.x,), self.tag

        @classmethod
        def tree_unflatten(cls, tag, children):
            return cls(children[0], tag)

    export.register_pytree_node_serialization(Box, serialized_name="tests.test_export.Box",
                                              serialize_auxdata=lambda t: t.encode(),
                                              deserialize_auxdata=lambda b: b.decode())
    od = collections.OrderedDict([("z", np.float32(1.0)), ("y", np.float32(2.0))])
    args = (T(np.float32(1.0), np.float32(2.0)), Box(np.arange(3, dtype=np.float32), "tag"), od)
    e = export.export(ftrans.jit(lambda t, b, o: (t, b, o, t)))(*args)
    e2 = export.deserialize(e.serialize())
    assert e2.in_tree == e.in_tree and e2.out_tree == e.out_tree
    res = e2.call(*args)
    assert type(res[0]) is T and type(res[1]) is Box and res[1].tag == "tag" and type(res[2]) is type(od)
    assert list(res[2]) == ["z", "y"]

    with pytest.raises(ValueError, match="Duplicate serialization registration .*tests.test_export.T"):
        export.register_namedtuple_serialization(T, serialized_name="other")
    with pytest.raises(ValueError, match="Use .*register_pytree_node_serialization"):
        export.register_namedtuple_serialization(str, serialized_name="n/a")
    U = collections.namedtuple("U", ("a",))
    with pytest.raises(ValueError, match="If `from_children` is not present.*register_pytree_node"):
        export.register_pytree_node_serialization(U, serialized_name="U", serialize_auxdata=lambda x: b"",
                                                  deserialize_auxdata=lambda b: None)
    with pytest.raises(ValueError, match="Cannot serialize .* unregistered type .*U"):
        export.export(ftrans.jit(lambda x: x))(U(np.float32(1))).serialize()
    with pytest.raises(TypeError, match="Serialization is supported only for dictionaries with string keys"):
        export.export(ftrans.jit(lambda d: d[(0, 1)]))({(0, 1): np.float32(1)}).serialize()


def test_serialized_bytes_are_ftrans_own_versioned_format():
    x = np.arange(3, dtype=np.float32)
    blob = export.export(ftrans.jit(jnp.sin))(x).serialize()
    assert isinstance(blob, bytearray) and bytes(blob).startswith(b"FTRANS-EXPORT")
    try:  # JAX's flatbuffer bytes, when flatbuffers is installed
        foreign = bytes(jax.export.export(jax.jit(jjnp.sin))(x).serialize())
    except ImportError:
        foreign = bytes(range(64))
    with pytest.raises(ValueError, match="not an ftrans serialization"):
        export.deserialize(foreign)
    newer = bytearray(blob)
    newer[len(b"FTRANS-EXPORT\x00")] = 99
    with pytest.raises(ValueError, match="newer"):
        export.deserialize(newer)


def test_call_errors_follow_jax():
    f32 = np.arange(4, dtype=np.float32)
    e = export.deserialize(export.export(ftrans.jit(lambda a, *, b: jnp.sin(a) + jnp.cos(b)))(f32, b=f32).serialize())
    with pytest.raises(ValueError, match=r"Shape mismatch for args\[0\].shape\[0\]"):
        e.call(np.arange(6, dtype=np.float32), b=f32)
    with pytest.raises(ValueError, match=r"Shape mismatch for kwargs\['b'\].shape\[0\]"):
        e.call(f32, b=np.arange(6, dtype=np.float32))
    with pytest.raises(ValueError, match=r"Rank mismatch for args\[0\]"):
        e.call(f32.reshape(1, 4), b=f32)
    with pytest.raises(ValueError, match=r"Dtype mismatch for args\[0\]"):
        e.call(f32.astype(np.float16), b=f32)
    with pytest.raises(ValueError, match="must have the same pytree structure"):
        e.call(f32, f32, b=f32)


@pytest.mark.parametrize("platform", ["cuda", "rocm", "tpu"])
def test_platform_check_and_disabling_it(platform):
    a = np.arange(4, dtype=np.float32)
    e = export.deserialize(export.export(jnp.sin, platforms=(platform,))(a).serialize())
    assert e.platforms == (platform,)
    if platform == {"gpu": "cuda"}.get(jax.default_backend(), jax.default_backend()):  # exported for here
        np.testing.assert_allclose(np.asarray(e.call(a)), np.sin(a), rtol=1e-6)
        return
    with pytest.raises(ValueError, match="Function .* was exported for platform"):
        e.call(a)
    e2 = export.export(jnp.sin, platforms=(platform,), disabled_checks=[export.DisabledSafetyCheck.platform()])(a)
    np.testing.assert_allclose(np.asarray(export.deserialize(e2.serialize()).call(a)), np.sin(a), rtol=1e-6)


def test_platform_dependent_takes_the_export_platform_branch():
    def f(x):
        return x + lax.platform_dependent(cpu=lambda: 1.0, cuda=lambda: 2.0, default=lambda: 3.0)

    x = np.zeros(2, np.float32)
    off = [export.DisabledSafetyCheck.platform()]
    here = {"cpu": 1.0, "gpu": 2.0}.get(jax.default_backend(), 3.0)  # the default platform's branch
    assert float(export.export(ftrans.jit(f))(x).call(x)[0]) == here
    assert float(export.export(ftrans.jit(f), platforms=("cpu",), disabled_checks=off)(x).call(x)[0]) == 1.0
    assert float(export.export(ftrans.jit(f), platforms=("cuda",), disabled_checks=off)(x).call(x)[0]) == 2.0
    assert float(export.export(ftrans.jit(f), platforms=("tpu",), disabled_checks=off)(x).call(x)[0]) == 3.0
    assert float(ftrans.jit(f)(x)[0]) == here  # the cached trace of the default platform is not disturbed
    e = export.export(jnp.sin, platforms=("cpu", "cuda"))(x)  # the same module on both: no platform index
    assert e.platforms == ("cpu", "cuda") and not e.uses_global_constants


def test_multi_platform_module_takes_the_platform_index():
    def f(J, L):
        return lambda x: J.sin(x) + L.platform_dependent(tpu=lambda: 3.0, cuda=lambda: 4.0, default=lambda: 2.0)

    x = np.arange(3, dtype=np.float32)
    plats = ("tpu", "cpu", "cuda", "rocm")
    e = export.deserialize(export.export(ftrans.jit(f(jnp, lax)), platforms=plats)(x).serialize(vjp_order=1))
    j = jax.export.export(jax.jit(f(jjnp, jax.lax)), platforms=plats)(x)
    assert e.platforms == j.platforms and e.uses_global_constants == j.uses_global_constants is True
    text = e.mlir_module()
    assert '%arg0: tensor<i32> {jax.global_constant = "_platform_index"}, %arg1: tensor<3xf32>' in text
    from ftrans.lowering import compat

    compat.parsed_module(text)  # a valid module
    np.testing.assert_allclose(np.asarray(e.call(x)), np.asarray(j.call(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.jit(lambda x: e.call(x) * 2)(x)), 2 * np.asarray(j.call(x)),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ftrans.grad(lambda x: e.call(x).sum())(x)), np.cos(x), rtol=1e-6)
    # a module calling it takes a platform index too: marked as JAX marks it, where a plain module is not
    outer_e = export.export(ftrans.jit(e.call))(x).mlir_module()
    outer_j = jax.export.export(jax.jit(j.call))(x).mlir_module()
    plain_e = export.export(ftrans.jit(jnp.sin))(x).mlir_module()
    plain_j = jax.export.export(jax.jit(jjnp.sin))(x).mlir_module()
    for text in (outer_e, outer_j):
        assert "jax.uses_shape_polymorphism = true" in text
    for text in (plain_e, plain_j):
        assert "jax.uses_shape_polymorphism = false" in text
    # platform check off: the first platform's program runs (as in JAX)
    off = export.export(ftrans.jit(f(jnp, lax)), platforms=("cuda", "tpu"),
                        disabled_checks=[export.DisabledSafetyCheck.platform()])(x)
    np.testing.assert_allclose(np.asarray(off.call(x)), np.sin(x) + 4.0, rtol=1e-6)


def test_custom_calls_without_compatibility_guarantee_are_refused():
    from ftrans import ffi

    x = np.ones(3, np.float32)
    f = ftrans.jit(lambda x: ffi.ffi_call("my_target", x)(x))
    with pytest.raises(ValueError, match="Cannot serialize code with custom calls whose targets"):
        export.export(f)(x)
    e = export.export(f, disabled_checks=[export.DisabledSafetyCheck.custom_call("my_target")])(x)
    assert "my_target" in e.mlir_module()
    # jaxlib's LAPACK kernels have the guarantee
    export.export(ftrans.jit(lambda x: jnp.linalg.cholesky(x)))(np.eye(3, dtype=np.float32))
    with pytest.raises(NotImplementedError, match="host callback"):
        export.export(ftrans.jit(lambda x: ftrans.pure_callback(np.sin, x, x)))(x)


def test_symbolic_shapes_parse_as_jax():
    dims = export.symbolic_shape("b, 2*w, 3")
    assert str(dims[0]) == "b" and str(dims[1]) == "2*w" and dims[2] == 3
    assert export.is_symbolic_dim(dims[0]) and not export.is_symbolic_dim(3)
    assert str(jax.export.symbolic_shape("b, 2*w, 3")) == str(dims).replace("'", "")
    assert ftrans.ShapeDtypeStruct(dims, np.float32).shape == dims
    assert export.symbolic_shape("4, ...", like=(4, 5, 6)) == (4, 5, 6)
    assert export.minimum_supported_calling_convention_version == \
        jax.export.minimum_supported_calling_convention_version


def test_platform_names_and_multi_device_programs():
    x = np.arange(4, dtype=np.float32)
    e = export.export(jnp.sin, platforms=("tpu", "cpu", "cuda", "other"))(x)
    j = jax.export.export(jjnp.sin, platforms=("tpu", "cpu", "cuda", "other"))(x)
    assert e.platforms == j.platforms
    np.testing.assert_allclose(np.asarray(e.call(x)), np.sin(x), rtol=1e-6)


def test_deserialized_nodes_see_their_leaves_shapes():
    """A registered node whose unflatten checks its children's shapes is rebuilt on the abstract values."""

    @jax.tree_util.register_pytree_node_class
    class Described:
        def __init__(self, array, names):
            assert len(array.shape) == 1 and len(names) == array.shape[0]
            self.array, self.names = array, names

        def tree_flatten(self):
            return (self.array,), self.names

        @classmethod
        def tree_unflatten(cls, names, children):
            return cls(children[0], names)

    export.register_pytree_node_serialization(Described, serialized_name="tests.test_export.Described",
                                              serialize_auxdata=lambda a: "/".join(a).encode(),
                                              deserialize_auxdata=lambda b: tuple(b.decode().split("/")))

    def d(n):
        return Described(np.arange(n, dtype=np.float32), tuple(str(i) for i in range(n)))

    x1 = collections.OrderedDict([("foo", d(2)), ("baz", d(3))])
    x2 = ([d(4), d(5)], {"b": d(6), "a": d(7)})
    e = export.export(ftrans.jit(lambda x1, x2: (x1, x2, x1)))(x1, x2)
    e2 = export.deserialize(e.serialize())
    assert e2.in_tree == e.in_tree and e2.out_tree == e.out_tree
    res = e2.call(x1, x2)
    assert jax.tree.structure(res) == jax.tree.structure((x1, x2, x1))


def test_shardings_on_one_device_export_a_single_device_program():
    mesh_1 = ftrans.make_mesh((1,), ("i",))
    f = ftrans.jit(lambda x: jnp.sum(x ** 2, axis=0), in_shardings=ftrans.NamedSharding(mesh_1, ftrans.P("i")))
    a = np.arange(80, dtype=np.float32).reshape(8, 10)
    e = export.export(f)(a)
    assert e.nr_devices == 1
    np.testing.assert_allclose(np.asarray(e.call(a)), np.sum(a ** 2, axis=0))


def _mesh(lib, names):
    return lib.sharding.Mesh(np.array(lib.devices()[:2]), names)


@pytest.mark.needs_devices(8)
def test_partitioned_programs_export_with_their_shardings_as_jax():
    """A program partitioned over 2 devices: nr_devices, the shardings (over a mesh given when calling), the
    annotated module; it runs where the call is partitioned over 2 devices (results laid out as exported),
    and elsewhere gives JAX's error; its VJP is partitioned alike."""
    a = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)

    def exported(lib, jit, ex):
        m = _mesh(lib, ("x",))
        f = jit(lambda b: lib.numpy.sin(b) * 2., in_shardings=(lib.sharding.NamedSharding(m, lib.sharding.PartitionSpec("x", None)),),
                out_shardings=lib.sharding.NamedSharding(m, lib.sharding.PartitionSpec(None, "x")))
        return ex.export(f)(a)

    blob = exported(ftrans, ftrans.jit, export).serialize(vjp_order=1)
    # format 2: a reader of format 1 (which would drop the shardings) refuses it
    assert int.from_bytes(blob[len(b"FTRANS-EXPORT\x00"):][:4], "little") == 2
    e = export.deserialize(blob)
    j = exported(jax, jax.jit, jax.export)
    assert e.nr_devices == j.nr_devices == 2
    with pytest.raises(ValueError, match="does not match the mesh used for export"):
        e.in_shardings_jax(_mesh(ftrans, ("y",)))
    run_f, run_j = _mesh(ftrans, ("x",)), _mesh(jax, ("x",))
    assert [s.spec for s in e.in_shardings_jax(run_f)] == [tuple(s.spec) for s in j.in_shardings_jax(run_j)]
    assert [s.spec for s in e.out_shardings_jax(run_f)] == [tuple(s.spec) for s in j.out_shardings_jax(run_j)]
    assert '#sdy.sharding<@mesh, [{"x"}, {}]>' in e.mlir_module()
    # Called on arguments replicated over another mesh of 2 devices (reversed): results laid out as exported
    run_f = ftrans.sharding.Mesh(np.array(ftrans.devices()[:2][::-1]), ("y",))
    run_j = jax.sharding.Mesh(np.array(jax.devices()[:2][::-1]), ("y",))
    res = e.call(ftrans.device_put(a, ftrans.NamedSharding(run_f, ftrans.P())))
    want = j.call(jax.device_put(a, jax.sharding.NamedSharding(run_j, jax.sharding.PartitionSpec())))
    np.testing.assert_allclose(np.asarray(res), np.asarray(want), rtol=1e-6)
    assert [s.index for s in res.addressable_shards] == [s.index for s in want.addressable_shards]
    assert [s.device.id for s in res.addressable_shards] == [s.device.id for s in want.addressable_shards]
    with pytest.raises(ValueError, match="was exported for 2 devices and is called in a context with 1 devices"):
        e.call(a)
    with pytest.raises(ValueError, match="was exported for 2 devices and is called in a context with 1 devices"):
        j.call(a)
    # The VJP: partitioned alike; its cotangent matches
    assert e.vjp().nr_devices == j.vjp().nr_devices == 2
    put = ftrans.device_put(a, ftrans.NamedSharding(run_f, ftrans.P()))
    g = ftrans.grad(lambda x: jnp.sum(e.call(x)))(put)
    np.testing.assert_allclose(np.asarray(g), 2 * np.cos(a), rtol=1e-5)


def test_weak_types_are_kept_as_jax_keeps_them():
    e = export.deserialize(export.export(ftrans.jit(lambda x: x * 2))(1.0).serialize())
    j = jax.export.export(jax.jit(lambda x: x * 2))(1.0)
    assert [a.weak_type for a in e.in_avals] == [a.weak_type for a in j.in_avals] == [True]
    assert [a.weak_type for a in e.out_avals] == [a.weak_type for a in j.out_avals] == [True]
    assert e.call(1.0).weak_type and ftrans.jit(e.call)(1.0).weak_type
    np.testing.assert_allclose(np.asarray(e.call(np.float32(1.0))), 2.0)


def test_main_names_arguments_and_results_as_jax():
    """``main``'s arguments are ``%arg0``... located at their names in the call, results carry ``jax.result_info``
    (what tools reading JAX's modules look for)."""
    x = np.ones(3, np.float32)
    e = export.export(ftrans.jit(lambda x, y: {"a": jnp.sin(x) + y["w"]}))(x, {"w": x})
    j = jax.export.export(jax.jit(lambda x, y: {"a": jjnp.sin(x) + y["w"]}))(x, {"w": x})
    for text in (e.mlir_module(), j.mlir_module()):
        assert '%arg0: tensor<3xf32> loc("x")' in text and "%arg1: tensor<3xf32> loc(\"y['w']\")" in text
        assert "jax.result_info = \"result['a']\"" in text


def test_donation_is_exported_and_mixed_platforms_refuse_it_as_jax():
    x = np.arange(3, dtype=np.float32)
    e = export.export(ftrans.jit(jnp.sin, donate_argnums=(0,)))(x)
    j = jax.export.export(jax.jit(jjnp.sin, donate_argnums=(0,)))(x)
    assert "tf.aliasing_output = 0 : i32" in e.mlir_module() and "tf.aliasing_output = 0 : i32" in j.mlir_module()
    np.testing.assert_allclose(np.asarray(ftrans.jit(lambda x: x + e.call(x))(x)), x + np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(e.call(x)), np.sin(x), rtol=1e-6)
    for ex, f in ((export, ftrans.jit(jnp.sin, donate_argnums=(0,))), (jax.export, jax.jit(jjnp.sin, donate_argnums=0))):
        with pytest.raises(NotImplementedError, match="either all or no lowering platforms should support donation"):
            ex.export(f, platforms=["cpu", "tpu", "other"])(x)


@pytest.mark.needs_devices(2)
def test_hlo_shardings_of_jax_lay_out_arrays_as_jax():
    """JAX's GSPMDSharding (an HLO sharding over a device assignment) as jit's shardings and device_put's target:
    the exported program's layouts and the results' shards match JAX's; the call runs under a set mesh."""
    from jax._src.sharding_impls import GSPMDSharding

    devs = jax.devices()[:2]
    jmesh = jax.sharding.Mesh(np.array(devs).reshape(2, 1), ("x", "y"))
    gs = [GSPMDSharding(devs, jax.sharding.NamedSharding(jmesh, jax.sharding.PartitionSpec(*p))._to_xla_hlo_sharding(2))
          for p in ((), ("x",))]
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)
    e = export.export(ftrans.jit(lambda a, b: (a, b * 2), in_shardings=tuple(gs), out_shardings=tuple(gs)))(x, x)
    j = jax.export.export(jax.jit(lambda a, b: (a, b * 2), in_shardings=tuple(gs), out_shardings=tuple(gs)))(x, x)
    assert e.nr_devices == j.nr_devices == 2
    with ftrans.sharding.set_mesh(ftrans.sharding.Mesh(np.array(ftrans.devices()[:2]), ("i",))):
        res = e.call(x, x)
    with jax.sharding.set_mesh(jax.sharding.Mesh(np.array(devs), ("i",))):
        want = j.call(x, x)
    for r, w in zip(res, want):
        np.testing.assert_allclose(np.asarray(r), np.asarray(w))
        assert [s.index for s in r.addressable_shards] == [s.index for s in w.addressable_shards]
    put = ftrans.device_put(x, gs[1])
    assert [s.index for s in put.addressable_shards] == [s.index for s in jax.device_put(x, gs[1]).addressable_shards]


def test_abstract_mesh_takes_jax_axis_types():
    """A JAX mesh's axis types (what ``AbstractMesh(mesh.axis_sizes, ..., axis_types=mesh.axis_types)`` passes)."""
    types = (jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto)
    am = ftrans.sharding.AbstractMesh((2, 1), ("x", "y"), axis_types=types)
    assert am.axis_types == (ftrans.sharding.AxisType.Explicit, ftrans.sharding.AxisType.Auto)
    assert [t.name for t in jax.sharding.AbstractMesh((2, 1), ("x", "y"), axis_types=types).axis_types] == \
        [t.name for t in am.axis_types]


def test_vjp_of_a_pullback_takes_float0_cotangents_as_jax():
    """A pullback's float0 argument (an integer result's cotangent) passes through a higher-order ``vjp`` and
    gets float0 zeros back, as in JAX; so an exported function with integer inputs has second-order VJPs."""
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    xf = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = []
    for lib, exported in ((ftrans, True), (jax, False)):
        def f(a, b, lib=lib):
            return 2 * a.T, b.T * b.T
        if exported:
            f = export.deserialize(export.export(ftrans.jit(f))(xi, xf).serialize(vjp_order=2)).call
        (oi, of), pb = lib.vjp(f, xi, xf)
        cts = (np.ones(oi.shape, jax.dtypes.float0), np.ones(of.shape, np.float32))
        first = pb(cts)
        _, pb2 = lib.vjp(pb, cts)
        got.append([(np.asarray(x).dtype, np.asarray(x).shape, np.asarray(x).tolist())
                    for x in jax.tree.leaves((first, pb2(first)))])
    assert got[0] == got[1]


def test_shard_map_with_collectives_exports_and_runs_as_jax():
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = []
    for lib, ex in ((ftrans, export), (jax, jax.export)):
        mesh = _mesh(lib, ("x",))
        s = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x", None))

        def body(b, lib=lib):
            n = lib.lax.axis_size("x")
            return lib.lax.ppermute(b, "x", perm=[(k, (k + 1) % n) for k in range(n)])

        f = lib.jit(lib.shard_map(body, mesh=mesh, in_specs=(s.spec,), out_specs=s.spec), in_shardings=s,
                    out_shardings=s)
        e = ex.export(f)(a)
        if lib is ftrans:
            e = export.deserialize(e.serialize())
        r = e.call(lib.device_put(a, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec())))
        out.append((e.nr_devices, np.asarray(r).tolist(), [sh.index for sh in r.addressable_shards]))
    assert out[0] == out[1]


@pytest.mark.needs_devices(4)
def test_explicit_mesh_dot_exports_with_the_typed_shardings_as_jax():
    """Arguments on Explicit mesh axes: the exported dot and its exported gradient lay results out as JAX's."""
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    out = []
    for lib, ex in ((ftrans, export), (jax, jax.export)):
        types = (lib.sharding.AxisType.Explicit,) * 2
        mesh = lib.make_mesh((2, 2), ("x", "y"), axis_types=types)
        with lib.sharding.set_mesh(mesh):
            a = lib.device_put(x, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x", None)))
            b = lib.device_put(x.T, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec(None, "y")))
            e = ex.export(lib.jit(lambda p, q: p @ q))(a, b)
            g = ex.export(lib.jit(lib.grad(lambda p, q: (p @ q).sum(), argnums=(0, 1))))(a, b)
            r, gr = e.call(a, b), g.call(a, b)
        out.append((np.asarray(r).tolist(), _spec(r.sharding.spec), [_spec(t.sharding.spec) for t in gr]))
    assert out[0] == out[1]


def _spec(spec):
    """A partition spec as a tuple without trailing Nones (P('x') and P('x', None) are the same layout)."""
    t = list(spec)
    while t and t[-1] is None:
        t.pop()
    return tuple(t)


def test_captured_constants_of_any_layout_are_inlined():
    c = np.arange(6, dtype=np.float32).reshape(2, 3).T  # a transposed (non-contiguous) constant
    x = np.ones((3, 2), np.float32)
    e = export.export(ftrans.jit(lambda x: x + c))(x)
    j = jax.export.export(jax.jit(lambda x: x + c))(x)
    np.testing.assert_allclose(np.asarray(e.call(x)), np.asarray(j.call(x)))


def test_typed_key_arguments_and_results_export_serialize_and_call_as_jax():
    """A typed PRNG key is one leaf of ``in_tree``/``out_tree`` with a key-dtype aval, as JAX's, and an export
    taking and returning keys round-trips through serialization and calls like the function (jax here cannot
    serialize without flatbuffers, so its unserialized export is the oracle)."""
    def body(random):
        return lambda k, x: (random.normal(k, (3,)) + x, random.split(k))

    x = np.arange(3, dtype=np.float32)
    exp = export.export(ftrans.jit(body(ftrans.random)))(ftrans.random.key(1), x)
    jexp = jax.export.export(jax.jit(body(jax.random)))(jax.random.key(1), x)
    back = export.deserialize(exp.serialize(vjp_order=1))
    for e in (exp, back):
        assert e.in_tree == jexp.in_tree and e.out_tree == jexp.out_tree
        assert [(a.shape, str(a.dtype)) for a in e.in_avals + e.out_avals] == \
            [(a.shape, str(a.dtype)) for a in jexp.in_avals + jexp.out_avals]
        got, want = e.call(ftrans.random.key(2), x), jexp.call(jax.random.key(2), x)
        np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
        assert str(got[1].dtype) == "key<fry>"
        np.testing.assert_array_equal(np.asarray(ftrans.random.key_data(got[1])),
                                      np.asarray(jax.random.key_data(want[1])))
        jitted = ftrans.jit(lambda k, e=e: e.call(k, x)[0])(ftrans.random.key(2))
        np.testing.assert_array_equal(np.asarray(jitted), np.asarray(want[0]))
    g = ftrans.grad(lambda v: back.call(ftrans.random.key(2), v)[0].sum())(x)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.grad(lambda v: jexp.call(jax.random.key(2), v)[0].sum())(x)))
