"""Sharded jit's API as JAX's pjit_test.py exercises it, each case side by side with jax on 8 CPU devices:
``pjit``'s ``None`` shardings, which donated arguments are invalidated, the partitioned ``Lowered``/``Compiled``
objects, ``with_sharding_constraint`` under ``vmap`` and with a list of shardings, JAX's argument errors, the
sharding types of ``optimization_barrier``/``rng_bit_generator``, and ``PartitionSpec``'s unreduced/reduced
sets."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding as JNamedSharding
from jax.sharding import PartitionSpec as JP

import ftrans
import ftrans.lax as flax
from ftrans.sharding import AxisType, NamedSharding, P

pytestmark = pytest.mark.skipif(jax.local_device_count() < 8, reason="needs 8 host devices (tests/conftest.py)")


def _jax_pjit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from jax.experimental.pjit import pjit
    return pjit


def _ftrans_pjit():
    from ftrans.experimental import pjit as m

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return m.pjit


def _auto_meshes(shape=(2,), names=("x",)):
    auto = (AxisType.Auto,) * len(names)
    return (ftrans.make_mesh(shape, names, axis_types=auto),
            jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(names)))


def test_pjit_none_out_shardings_are_replicated_under_a_mesh():
    fm, jm = _auto_meshes()
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    outs = []
    for pjit, mesh, spec in ((_ftrans_pjit(), fm, P), (_jax_pjit(), jm, JP)):
        f = pjit(lambda a, b: a + b, in_shardings=(spec("x"), spec("x")), out_shardings=None)
        with mesh:
            out = f(x, x + 1)
        outs.append(out)
        assert len(out.addressable_shards) == 2
        np.testing.assert_array_equal(np.asarray(out.addressable_shards[0].data), x + x + 1)
    assert outs[0].sharding.is_fully_replicated == outs[1].sharding.is_fully_replicated is True


def test_pjit_none_without_a_mesh_is_unspecified():
    f = _ftrans_pjit()(lambda a: a * 2, out_shardings=None)
    np.testing.assert_array_equal(np.asarray(f(np.arange(4.0))), np.arange(4.0) * 2)


@pytest.mark.parametrize("case", ["no_output_of_its_size", "output_of_another_layout"])
def test_which_donated_arguments_are_invalidated_matches_jax(case):
    fm, jm = _auto_meshes()
    deleted = []
    for lib, mesh, NS, PS in ((ftrans, fm, NamedSharding, P), (jax, jm, JNamedSharding, JP)):
        s, rs = NS(mesh, PS("x")), NS(mesh, PS())
        if case == "no_output_of_its_size":
            f = lib.jit(lambda a: a @ a.T, donate_argnums=0)
            args = (lib.device_put(np.arange(16).reshape(8, 2), s),)
        else:  # an input split over 'x' whose same-shaped output is replicated: XLA may reuse it, not alias it
            wsc = flax.with_sharding_constraint if lib is ftrans else jax.lax.with_sharding_constraint
            f = lib.jit(lambda a, b: (wsc(a, rs), a, wsc(b, rs), b), donate_argnums=1)
            args = (lib.device_put(np.ones((2, 5)), s), lib.device_put(np.ones((2, 7)), s))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = f(*args)
        jax.block_until_ready(outs) if lib is jax else None
        deleted.append([a.is_deleted() for a in args])
    assert deleted[0] == deleted[1]


def test_partitioned_lowered_and_compiled_objects():
    fm, _ = _auto_meshes((2, 2), ("x", "y"))
    x = np.arange(64, dtype=np.int32).reshape(8, 8)
    with fm:
        f = ftrans.jit(lambda a, b: a @ b, in_shardings=NamedSharding(fm, P(("x", "y"))),
                       out_shardings=NamedSharding(fm, P(("x", "y"))), donate_argnums=0)
        low = f.lower(x, x + 1)
        exe = low.compile()
    assert isinstance(exe, ftrans.stages.Compiled)
    assert low.donate_argnums == exe.donate_argnums == (0,)
    assert low.in_avals == exe.in_avals
    assert isinstance(exe.in_avals, tuple) and exe.in_avals[1] == {} and len(exe.in_avals[0]) == 2
    assert exe.runtime_executable() is not None
    assert exe.cost_analysis() is not None and low.cost_analysis() is not None
    exe.memory_analysis()
    with pytest.raises(TypeError, match="Function compiled with input pytree does not match"):
        exe([x], [x + 1])
    with pytest.raises(TypeError, match=r"Argument types differ(.|\n)*Argument 'b' compiled with.*int32.*"
                                        r"and called with.*float32"):
        exe(x, (x + 1).astype(np.float32))
    # an abstract value stands for arguments of its type
    f2 = ftrans.jit(lambda a: a + 1, in_shardings=NamedSharding(fm, P("x")))
    exe2 = f2.lower(ftrans.core.ShapedArray((8, 8), np.dtype(np.int32))).compile()
    np.testing.assert_array_equal(np.asarray(exe2(x)), x + 1)


def test_with_sharding_constraint_takes_a_list_prefix():
    fm, jm = _auto_meshes((2, 2), ("x", "y"))
    v = np.arange(128).reshape(2, 8, 8)
    tree = [{"a": v, "b": v * 2}, v * 3]
    outs = []
    for lib, wsc, mesh, NS, PS in ((ftrans, flax.with_sharding_constraint, fm, NamedSharding, P),
                                   (jax, jax.lax.with_sharding_constraint, jm, JNamedSharding, JP)):
        shs = [NS(mesh, PS(PS.UNCONSTRAINED, "y", None)), NS(mesh, PS("x", PS.UNCONSTRAINED, None))]
        outs.append(lib.jit(lambda t: wsc(t, shs))(tree))
    for a, b in zip(jax.tree_util.tree_leaves(outs[0]), jax.tree_util.tree_leaves(outs[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_vmap_of_a_constraint_leaves_the_batch_dimension_to_the_partitioner():
    fm, jm = _auto_meshes((2, 2), ("x", "y"))
    x = np.arange(128.0).reshape(2, 8, 8)
    ft = str(ftrans.make_jaxpr(ftrans.vmap(lambda a: flax.with_sharding_constraint(a, NamedSharding(fm, P("x")))))(x))
    jt = str(jax.make_jaxpr(jax.vmap(lambda a: jax.lax.with_sharding_constraint(a, JNamedSharding(jm, JP("x")))))(x))
    spec = lambda text: text[text.index("spec=") + 5:].split(")", 1)[0] + ")"  # noqa: E731
    assert spec(ft) == spec(jt) and spec(ft).startswith("P(UNCONSTRAINED, 'x'")


def test_vmap_spmd_axis_name_in_the_constraint_is_an_error():
    fm, jm = _auto_meshes((2, 2), ("x", "y"))
    x = np.arange(64.0).reshape(8, 8)
    for lib, wsc, mesh, NS, PS in ((ftrans, flax.with_sharding_constraint, fm, NamedSharding, P),
                                   (jax, jax.lax.with_sharding_constraint, jm, JNamedSharding, JP)):
        f = lib.jit(lib.vmap(lambda a: wsc(a, NS(mesh, PS("x"))), spmd_axis_name="x"))
        with pytest.raises(ValueError, match="spmd_axis_name.*cannot appear in with_sharding_constraint spec"):
            f(x)


def test_jit_placement_errors_match_jax():
    dev = jax.devices()[0]
    fs = ftrans.sharding.SingleDeviceSharding(dev)
    with pytest.raises(ValueError, match="If backend or device is specified on jit, then in_shardings should not"):
        ftrans.jit(lambda x: x, in_shardings=fs, backend="cpu")
    with pytest.raises(ValueError, match="If backend or device is specified on jit, then out_shardings should not"):
        ftrans.jit(lambda x: x, out_shardings=fs, device=dev)
    for lib, s in ((ftrans, fs), (jax, jax.sharding.SingleDeviceSharding(dev))):
        with pytest.raises(ValueError, match="pjit does not support kwargs when in_shardings is specified"):
            lib.jit(lambda x: x, in_shardings=s)(x=np.arange(8.0))


def test_optimization_barrier_and_rng_bit_generator_keep_sharding_types():
    em = ftrans.make_mesh((2,), ("x",))
    jm = jax.make_mesh((2,), ("x",))
    for lib, mesh, PS in ((ftrans, em, P), (jax, jm, JP)):
        lax = flax if lib is ftrans else jax.lax
        with lib.set_mesh(mesh):
            a = lib.device_put(np.arange(8.0), PS("x"))
            key = lib.device_put(np.array([1, 2, 3, 4], np.uint32), PS())
            seen = {}

            @lib.jit
            def f(x, k):
                y = lax.optimization_barrier(x * 2)
                seen["barrier"] = lib.typeof(y).sharding.spec
                nk, bits = lax.rng_bit_generator(k, (4, 8), out_sharding=PS("x"))
                seen["key"], seen["bits"] = lib.typeof(nk).sharding.spec, lib.typeof(bits).sharding.spec
                return y, nk, bits

            y, nk, bits = f(a, key)
        assert seen["barrier"] == PS("x") and seen["key"] == PS(None) and seen["bits"] == PS("x", None)
        assert y.sharding.spec == PS("x") and bits.sharding.spec == PS("x", None)


def test_partition_spec_carries_unreduced_and_reduced_sets_as_jax():
    for make in (P, JP):
        s = make("x", None, unreduced={"y"}, reduced={"z"})
        assert s.unreduced == {"y"} and s.reduced == {"z"}
    # jax 0.11's repr adds the kind of the unreduced sum (its PartitionSpec has an `unreduced_kind`, `sum` by
    # default); ftrans's unreduced axes are always sums, printed as jax 0.10 did (docs/differences.md)
    def jrepr(s):
        return repr(s).replace(", unreduced_kind=sum", "")
    assert repr(P("x", unreduced={"y"})) == jrepr(JP("x", unreduced={"y"}))
    assert repr(P(unreduced={"y"}, reduced={"z"})) == jrepr(JP(unreduced={"y"}, reduced={"z"}))
    assert P("x", unreduced={"y"}) == JP("x", unreduced={"y"}) and P("x", unreduced={"y"}) != P("x")
    assert P("x", reduced={"y"}).to_ct_spec() == P("x", unreduced={"y"})
    assert P("x").update(unreduced={"y"}) == P("x", unreduced={"y"})
    for make in (P, JP):
        with pytest.raises(ValueError, match="partitions cannot overlap with unreduced axes"):
            make("x", unreduced={"x"})
        with pytest.raises(ValueError, match="`unreduced` and `reduced` argument to PartitionSpec cannot overlap"):
            make(unreduced={"x"}, reduced={"x"})
        with pytest.raises(TypeError, match="unreduced argument of PartitionSpec should"):
            make("x", unreduced=["y"])


def test_pjit_errors_carry_jax_words():
    fm = ftrans.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    pjit = _ftrans_pjit()
    with pytest.raises(ValueError, match="can't specify both a device and a backend for jit"):
        pjit(lambda x: x, device=jax.devices()[0], backend="cpu")
    with pytest.raises(RuntimeError, match="with_sharding_constraint requires a non-empty mesh in context"):
        pjit(lambda x: flax.with_sharding_constraint(x, P("x")))(np.arange(4.0))
    with fm:
        with pytest.raises(ValueError, match="should evenly divide the shape"):
            pjit(lambda x: {"r": x}, in_shardings=None, out_shardings=P("x", None))(np.ones((3, 2)))
        with pytest.raises(ValueError, match=r"One of pjit arguments.*rank at least 2, but was applied to a value "
                                             r"of rank 1"):
            pjit(lambda x: x, in_shardings=P("x", None))(np.arange(2.0))
        with pytest.raises(ValueError, match=r"One of with_sharding_constraint arguments.*rank at least 2"):
            pjit(lambda x: flax.with_sharding_constraint(x, P("x", None)))(np.arange(2.0))
        # the options are positional too, as pjit's
        out = pjit(lambda x: x * 2, P("x"), P("x"))(np.arange(4.0))
        np.testing.assert_array_equal(np.asarray(out), np.arange(4.0) * 2)
    zm = ftrans.make_mesh((1,), ("z",), axis_types=(AxisType.Auto,))
    with zm, pytest.raises(ValueError, match=r"Resource axis: x of.*P\('x',\) is not found in mesh: \(.*\)\."):
        pjit(lambda x: x, in_shardings=P("x"))(np.ones((2, 2)))


def test_out_sharding_of_ravel_broadcast_to_tensordot_matches_jax():
    em, jm = ftrans.make_mesh((2, 2), ("x", "y")), jax.make_mesh((2, 2), ("x", "y"))
    a, b = np.arange(16).reshape(8, 2), np.arange(12).reshape(2, 6)
    res = []
    for lib, mesh, PS in ((ftrans, em, P), (jax, jm, JP)):
        jnp = ftrans.numpy if lib is ftrans else jax.numpy
        with lib.set_mesh(mesh):
            x, y = lib.device_put(a, PS("x", "y")), lib.device_put(b, PS("x", "y"))
            z = lib.device_put(np.arange(8).reshape(1, 8), PS(None, "y"))

            @lib.jit
            def f(x, y, z):
                return (jnp.ravel(x, out_sharding=PS("x")),
                        jnp.tensordot(x, y, axes=([1], [0]), out_sharding=PS("x", None)),
                        jnp.broadcast_to(z, (4, 8), out_sharding=PS("x", "y")))

            outs = f(x, y, z)
        res.append([(o.sharding.spec, np.asarray(o)) for o in outs])
    for (fs, fv), (js, jv) in zip(*res):
        assert fs == js
        np.testing.assert_array_equal(fv, jv)


def test_select_cases_and_flattening_cumsum_type_errors_match_jax():
    em, jm = ftrans.make_mesh((2, 2), ("x", "y")), jax.make_mesh((2, 2), ("x", "y"))
    a = np.arange(16.0).reshape(8, 2)
    for lib, mesh, PS in ((ftrans, em, P), (jax, jm, JP)):
        jnp = ftrans.numpy if lib is ftrans else jax.numpy
        with lib.set_mesh(mesh):
            x, y = lib.device_put(a, PS("x", "y")), lib.device_put(a, PS("y", "x"))
            err = TypeError if lib is ftrans else Exception  # (JAX's ShardingTypeError is no TypeError)
            with pytest.raises(err, match="select cases must have the same shardings"):
                lib.jit(lambda p, u, v: lib.lax.select(p, u, v))(x == x, x, y)
            with pytest.raises(err, match="The input should be fully replicated when axis is not specified"):
                lib.jit(lambda u: jnp.cumsum(u))(x)


def test_asarray_out_sharding_matches_jax():
    em, jm = ftrans.make_mesh((2, 2), ("x", "y")), jax.make_mesh((2, 2), ("x", "y"))
    a = np.arange(16).reshape(8, 2)
    with ftrans.set_mesh(em):
        f = ftrans.numpy.asarray(a, dtype=np.int32, out_sharding=P("x"))
    with jax.set_mesh(jm):
        j = jax.numpy.asarray(a, dtype=np.int32, out_sharding=JP("x"))
    assert f.sharding.spec == j.sharding.spec == P("x", None)
    np.testing.assert_array_equal(np.asarray(f), np.asarray(j))
