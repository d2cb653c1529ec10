"""Host callbacks in programs run by several devices, against JAX: an ordered ``io_callback`` in a sharded
``jit`` (once, on one device, in program order), in ``pmap`` and in ``shard_map`` (per device); every call
has run when ``effects_barrier`` returns; ``sharding=`` picks the device of a sharded program's call; a
failing callback in ``pmap`` re-raises its own exception; an ordered ``debug.print`` stays refused there.
(A failing callback in a partitioned program aborts the process, in JAX too, so it is not tested.)"""

import time

import jax
import numpy as np
import pytest
from jax.experimental import io_callback as jax_io_callback

import ftrans
from ftrans.experimental import io_callback

N = 2


def _mesh(J):
    return J.sharding.Mesh(np.array(J.devices()[:N]), ("x",))


def _sharded_jit(J, f):
    mesh = _mesh(J)
    P = J.sharding.PartitionSpec
    return J.jit(f, in_shardings=J.sharding.NamedSharding(mesh, P("x")),
                 out_shardings=J.sharding.NamedSharding(mesh, P()))


def _collect_sharded(J, cb_api, ordered, slow=0.0):
    got = []

    def cb(x):
        time.sleep(slow)
        got.append(int(np.asarray(x).sum()))

    def f(x):
        cb_api(cb, None, x, ordered=ordered)
        cb_api(cb, None, x + 1, ordered=ordered)
        return x

    g = _sharded_jit(J, f)
    x = np.arange(N, dtype=np.int32)
    g(x)
    g(x + 5)
    J.effects_barrier()
    return got


@pytest.mark.parametrize("ordered", [True, False])
def test_io_callback_in_sharded_jit(ordered):
    want = _collect_sharded(jax, jax_io_callback, ordered)
    got = _collect_sharded(ftrans, io_callback, ordered, slow=0.02)
    assert len(want) == 4
    assert got == want if ordered else sorted(got) == sorted(want)


def _per_device(J, cb_api, kind):
    got = []

    def cb(x):
        got.append(np.asarray(x).tolist())
        return x

    def body(x):
        y = cb_api(cb, J.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)
        cb_api(lambda v: None, None, y, ordered=True)  # no results: the token alone
        return cb_api(cb, J.ShapeDtypeStruct(x.shape, x.dtype), y * 2, ordered=True)

    x = np.arange(N, dtype=np.float32)
    if kind == "pmap":
        out = J.pmap(body, devices=J.devices()[:N])(x)
    else:
        P = J.sharding.PartitionSpec
        out = J.jit(J.shard_map(body, mesh=_mesh(J), in_specs=P("x"), out_specs=P("x")))(x)
    J.effects_barrier()
    return np.asarray(out), got


@pytest.mark.parametrize("kind", ["pmap", "shard_map"])
@pytest.mark.needs_devices(8)
def test_ordered_io_callback_per_device(kind):
    want_out, want = _per_device(jax, jax_io_callback, kind)
    got_out, got = _per_device(ftrans, io_callback, kind)
    np.testing.assert_array_equal(got_out, want_out)
    assert sorted(map(str, got)) == sorted(map(str, want))
    for v in range(N):  # each device's second call sees its first call's result
        firsts = [i for i, g in enumerate(got) if np.ravel(g).tolist() == [float(v)]]
        seconds = [i for i, g in enumerate(got) if np.ravel(g).tolist() == [2.0 * v]]
        if v:
            assert firsts[0] < seconds[-1]


def _sharding_lowering(J, cb_api, make_sharding):
    dev = J.devices()[N - 1]

    def f(x):
        return cb_api(lambda v: v + 1, J.ShapeDtypeStruct(x.shape, x.dtype), x, sharding=make_sharding(dev))

    g = _sharded_jit(J, f)
    x = np.arange(N, dtype=np.float32)
    return np.asarray(g(x)), g.lower(x).as_text()


@pytest.mark.parametrize("api", ["pure", "io"])
@pytest.mark.needs_devices(8)
def test_callback_sharding_picks_the_device(api):
    want_out, want_text = _sharding_lowering(
        jax, jax.pure_callback if api == "pure" else jax_io_callback, jax.sharding.SingleDeviceSharding)
    got_out, got_text = _sharding_lowering(
        ftrans, ftrans.pure_callback if api == "pure" else io_callback, ftrans.sharding.SingleDeviceSharding)
    np.testing.assert_array_equal(got_out, want_out)
    decl = f"sdy.mesh @maximal_mesh_{N - 1} = <[], device_ids=[{N - 1}]>"
    use = f"sdy.sharding_per_value<[<@maximal_mesh_{N - 1}, []>"
    for text in (want_text, got_text):
        assert decl in text and use in text


def test_callback_sharding_refused_inside_shard_map():
    P = ftrans.sharding.PartitionSpec
    dev = ftrans.sharding.SingleDeviceSharding(ftrans.devices()[0])
    f = ftrans.jit(ftrans.shard_map(
        lambda x: ftrans.pure_callback(lambda v: v, ftrans.ShapeDtypeStruct(x.shape, x.dtype), x, sharding=dev),
        mesh=_mesh(ftrans), in_specs=P("x"), out_specs=P("x")))
    with pytest.raises(NotImplementedError, match="callbacks do not support specifying sharding inside spmd"):
        f(np.arange(N, dtype=np.float32))


@pytest.mark.needs_devices(2)
def test_failing_callback_keeps_its_type_in_pmap():
    def fail(x):
        raise KeyError("boom")

    f = ftrans.pmap(lambda x: io_callback(fail, ftrans.ShapeDtypeStruct(x.shape, x.dtype), x),
                    devices=ftrans.devices()[:N])
    with pytest.raises(KeyError, match="boom"):
        f(np.arange(N, dtype=np.float32))


@pytest.mark.parametrize("J", [jax, ftrans], ids=["jax", "ftrans"])
@pytest.mark.needs_devices(8)
def test_ordered_print_refused_in_sharded_jit(J):
    def f(x):
        J.debug.print("{}", x, ordered=True)
        return x

    with pytest.raises(ValueError, match="ordered effects are not supported for more than 1 device"):
        _sharded_jit(J, f)(np.arange(N, dtype=np.float32))


def _one_device_shard_map(J, cb_api):
    got = []
    mesh = J.sharding.Mesh(np.array(J.devices()[:1]), ("x",))
    P = J.sharding.PartitionSpec

    def f(s, x):
        cb_api(lambda a, b: got.append((int(a[0]), np.asarray(b).tolist())), None, s, x, ordered=True)
        cb_api(lambda a, b: got.append((int(a[0]), np.asarray(b).tolist())), None, s, x + 1, ordered=True)
        return J.lax.psum(x, "x") + J.lax.axis_index("x")

    g = J.jit(J.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x")),
              in_shardings=J.sharding.NamedSharding(mesh, P("x")))
    out = g(np.arange(1, dtype=np.int32), np.arange(2, dtype=np.int32))
    J.effects_barrier()
    return np.asarray(out).tolist(), got


def test_callbacks_in_a_one_device_shard_map():
    """A shard_map over one device is inlined, as JAX does (XLA could not compile a callback inside a
    one-partition manual region)."""
    assert _one_device_shard_map(ftrans, io_callback) == _one_device_shard_map(jax, jax_io_callback)


@pytest.mark.parametrize("J", [ftrans, jax], ids=["ftrans", "jax"])
@pytest.mark.needs_devices(8)
def test_partitioned_debug_callback_sees_each_devices_shards(J):
    """``partitioned=True`` in a sharded jit: one call per device with its own shards (no gather), as JAX;
    under vmap, grad, a one-device jit and shard_map the option changes nothing."""
    got = []

    def cb(v):
        got.append(np.asarray(v).tolist())

    def f(x):
        J.debug.callback(cb, x, partitioned=True)
        J.debug.print("p {}", x * 2, partitioned=True)
        return x + 1

    mesh = _mesh(J)
    P = J.sharding.PartitionSpec
    x = np.arange(4.0, dtype=np.float32)
    a = J.device_put(x, J.sharding.NamedSharding(mesh, P("x")))
    J.jit(f)(a)
    J.effects_barrier()
    assert sorted(got) == [[0.0, 1.0], [2.0, 3.0]]
    got.clear()
    J.jit(f)(x)
    J.vmap(J.jit(f))(x.reshape(2, 2))
    J.grad(lambda v: f(v).sum())(x)
    J.jit(J.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x")))(a)
    J.effects_barrier()
    assert sorted(got) == [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [2.0, 3.0],
                           [2.0, 3.0]]
