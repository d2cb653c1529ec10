"""Typed PRNG key arrays (``random.key``), against JAX's: dtype, data, structural operations, transforms,
and the errors of misuse."""

from __future__ import annotations

import warnings

import jax
import jax.random as jr
import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
import ftrans.random as fr
from ftrans import errors, lax


def data(k):
    return np.asarray(fr.key_data(k) if isinstance(k, fr.PRNGKeyArray) else jr.key_data(k))


def same_keys(ours, theirs):
    assert isinstance(ours, fr.PRNGKeyArray), type(ours)
    assert str(ours.dtype) == str(theirs.dtype) and ours.shape == theirs.shape, (ours, theirs)
    np.testing.assert_array_equal(data(ours), data(theirs))


def test_key_dtype_shape_and_printing():
    k, jk = fr.key(7), jr.key(7)
    same_keys(k, jk)
    assert repr(k) == repr(jk) and str(k.dtype) == "key<fry>" and k.dtype.name == jk.dtype.name
    assert k.dtype == fr.key_dtype() and k.dtype.itemsize == jk.dtype.itemsize == 8
    assert jnp.issubdtype(k.dtype, ftrans.dtypes.prng_key) and jnp.issubdtype(k.dtype, ftrans.dtypes.extended)
    assert jnp.issubdtype(k.dtype, np.generic) and not jnp.issubdtype(k.dtype, np.integer)
    assert not jnp.issubdtype(fr.PRNGKey(7).dtype, ftrans.dtypes.prng_key)
    kr = fr.key(3, impl="rbg")
    same_keys(kr, jr.key(3, impl="rbg"))
    assert fr.key_impl(kr) == "rbg" and str(fr.key(3, impl="unsafe_rbg").dtype) == "key<urbg>"
    same_keys(fr.key(3, dtype=kr.dtype), jr.key(3, impl="rbg"))
    same_keys(fr.wrap_key_data(np.array([1, 2], np.uint32)), jr.wrap_key_data(np.array([1, 2], np.uint32)))
    # rbg's and unsafe_rbg's data look alike; the key dtype keeps them apart.
    d = np.zeros((3, 4), np.uint32)
    assert fr.wrap_key_data(d, impl="rbg").dtype != fr.wrap_key_data(d, impl="unsafe_rbg").dtype


def test_random_functions_take_typed_and_raw_keys_bit_for_bit():
    k, jk, raw = fr.key(11), jr.key(11), fr.PRNGKey(11)
    ks, jks = fr.split(k, 3), jr.split(jk, 3)
    same_keys(ks, jks)
    assert not isinstance(fr.split(raw, 3), fr.PRNGKeyArray)  # legacy keys stay raw
    np.testing.assert_array_equal(np.asarray(fr.split(raw, 3)), data(ks))
    same_keys(fr.fold_in(k, 5), jr.fold_in(jk, 5))
    same_keys(fr.clone(ks), jks)
    np.testing.assert_array_equal(np.asarray(fr.normal(ks[1], (4,))), np.asarray(jr.normal(jks[1], (4,))))
    np.testing.assert_array_equal(np.asarray(fr.normal(fr.key_data(ks[1]), (4,))), np.asarray(fr.normal(ks[1], (4,))))


def test_structural_operations_act_on_key_axes():
    ks = fr.wrap_key_data(np.arange(12, dtype=np.uint32).reshape(6, 2))
    d = np.arange(12, dtype=np.uint32).reshape(6, 2)

    def check(out, want):
        assert isinstance(out, fr.PRNGKeyArray) and out.dtype == ks.dtype
        np.testing.assert_array_equal(data(out), want)

    m, dm = ks.reshape(2, 3), d.reshape(2, 3, 2)
    check(m, dm)
    check(m.T, dm.transpose(1, 0, 2))
    check(m[1], dm[1])
    check(m[None, :, None], dm[None, :, None])
    check(m[..., 1:], dm[:, 1:])
    check(ks[np.array([0, 2])], d[[0, 2]])
    check(jnp.concatenate([ks, ks[:2]]), np.concatenate([d, d[:2]]))
    check(jnp.stack([ks, ks], axis=-1), np.stack([d, d], axis=1))
    check(jnp.broadcast_to(ks[0], (2, 3)), np.broadcast_to(d[0], (2, 3, 2)))
    check(jnp.expand_dims(m, -1), dm[:, :, None])
    check(jnp.ravel(m), d)
    check(jnp.tile(ks[0], 3), np.tile(d[0], (3, 1)))
    c = np.array([True, False, True, False, True, False])
    check(jnp.where(c, ks, ks[::-1]), np.where(c[:, None], d, d[::-1]))
    check(lax.select(c, ks, ks[::-1]), np.where(c[:, None], d, d[::-1]))
    check(ks.at[1].set(ks[0]), np.concatenate([d[:1], d[:1], d[2:]]))
    check(ks.at[100].get(mode="fill"), np.full(2, 2**32 - 1, np.uint32))
    check(lax.dynamic_slice_in_dim(m, np.int16(1), 1), dm[1:])
    check(lax.slice_in_dim(m, 1, 3, axis=-1), dm[:, 1:])
    check(jnp.zeros_like(ks), np.zeros_like(d))
    check(jnp.full(3, fr.key(0), dtype=ks.dtype), np.zeros((3, 2), np.uint32))
    np.testing.assert_array_equal(np.asarray(ks == ks[2]), np.arange(6) == 2)
    assert (m.shape, m.ndim, m.size, len(m)) == ((2, 3), 2, 6, 2)


def test_keys_through_transforms():
    ks = fr.wrap_key_data(np.arange(8, dtype=np.uint32).reshape(4, 2))
    split0 = fr.split(ks[0])
    same_keys(ftrans.jit(lambda k: fr.split(k[0]))(ks), split0)
    same_keys(ftrans.vmap(lambda k: fr.split(k)[0])(ks[:1]), split0[:1])
    same_keys(lax.scan(lambda c, k: (c, k), 0, ks)[1], ks)
    same_keys(lax.fori_loop(0, 2, lambda i, k: k.T, ks.reshape(2, 2)), ks.reshape(2, 2))
    same_keys(lax.cond(True, lambda k: k[1], lambda k: k[0], ks), ks[1])
    same_keys(ftrans.device_put(ks), ks)
    s = ftrans.ShapeDtypeStruct.like(ks)
    assert str(s) == str(jax.ShapeDtypeStruct.like(jr.split(jr.key(0), 4))) == "ShapeDtypeStruct(shape=(4,), dtype=key<fry>)"
    assert ftrans.eval_shape(lambda k: k[1:], s) == ftrans.ShapeDtypeStruct((3,), ks.dtype)
    m = ks.reshape(2, 2)  # a negative vmap axis counts key axes
    same_keys(ftrans.vmap(lambda k: k, in_axes=-1, out_axes=-1)(m), m)
    same_keys(ftrans.vmap(lambda k: k, in_axes=-1)(m), m.T)
    g = ftrans.grad(lambda x, k: x * lax.convert_element_type(fr.key_data(k)[0], np.float32),
                    argnums=(0, 1), allow_int=True)(1.0, ks[1])
    assert float(g[0]) == 2.0 and g[1].dtype == ftrans.dtypes.float0 and g[1].shape == ()


def test_misuse_is_a_specific_error():
    k = fr.key(0)
    with pytest.raises(errors.FtransTypeError, match="add does not accept dtypes key<fry>, int32"):
        k + 1
    with pytest.raises(errors.FtransTypeError, match="add does not accept dtype key<fry>"):
        jnp.add(k, k)
    with pytest.raises(errors.FtransTypeError, match="neg does not accept dtype key<fry>"):
        -k
    with pytest.raises(errors.FtransTypeError, match="neg does not accept dtype key<fry>"):
        jnp.negative(k)
    with pytest.raises(errors.FtransTypeError, match="different PRNG implementations"):
        jnp.concatenate([fr.key(0, impl="rbg")[None], k[None]])
    with pytest.raises(errors.FtransTypeError, match=r"ends with \(2,\)"):
        fr.wrap_key_data(np.zeros(3, np.uint32))
    with pytest.raises(errors.FtransValueError, match="Cannot specify both"):
        fr.key(0, impl="rbg", dtype=fr.key_dtype())
    with pytest.raises(errors.FtransTypeError, match="cannot be converted to a NumPy array"):
        np.asarray(k)
    with pytest.raises(errors.FtransValueError, match="Cannot convert_element_type from key<fry>"):
        lax.convert_element_type(k, np.int32)
    with pytest.raises(errors.FtransIndexError, match="Too many indices"):
        k[0]
    with pytest.raises(errors.FtransTypeError, match="key accepts a scalar seed"):
        fr.key(k)
    with pytest.raises(errors.FtransValueError, match="single key"):
        fr.normal(fr.split(k), (2,))
    with pytest.raises(TypeError, match="unhashable"):
        hash(k)


@pytest.mark.parametrize("impl", ["threefry4x32", "philox4x32"])
def test_four_word_generators_match_jax(impl):
    # philox4x32's data is as wide as threefry2x32's, threefry4x32's as rbg's: the key dtype tells them apart.
    k, jk = fr.key(42, impl=impl), jr.key(42, impl=impl)
    same_keys(k, jk)
    assert fr.key_impl(k) == impl and k.dtype != fr.key_dtype("threefry2x32")
    same_keys(fr.split(k, (2, 3)), jr.split(jk, (2, 3)))
    same_keys(fr.fold_in(k, 7), jr.fold_in(jk, 7))
    np.testing.assert_array_equal(np.asarray(fr.bits(k, (3, 2))), np.asarray(jr.bits(jk, (3, 2))))


def test_key_arrays_are_arrays():
    # JAX's key arrays are jax.Array instances (concrete and traced); raw keys are plain arrays.
    assert isinstance(jr.key(0), jax.Array) and issubclass(type(jr.key(0)), jax.Array)
    assert isinstance(fr.key(0), ftrans.Array) and issubclass(fr.PRNGKeyArray, ftrans.Array)
    assert isinstance(fr.key(0), jnp.ndarray) and isinstance(fr.PRNGKey(0), ftrans.Array)
    seen = []
    ftrans.jit(lambda k: seen.append(isinstance(k, ftrans.Array)) or k)(fr.split(fr.key(0)))
    ftrans.vmap(lambda k: seen.append(isinstance(k, ftrans.Array)) or k)(fr.split(fr.key(0)))
    assert seen == [True, True]
    assert not isinstance(fr.key(0).dtype, ftrans.Array) and not issubclass(type(fr.key(0).dtype), ftrans.Array)


@pytest.mark.needs_devices(2)
def test_key_array_buffer_attributes():
    seeds = np.arange(10, dtype=np.uint32)
    k, jk = ftrans.vmap(fr.key)(jnp.asarray(seeds)), jax.vmap(jr.key)(seeds)
    assert k.on_device_size_in_bytes() == jk.on_device_size_in_bytes() == k._base_array.on_device_size_in_bytes()
    for ours, theirs in ((k.addressable_shards, jk.addressable_shards), (k.global_shards, jk.global_shards)):
        assert len(ours) == len(theirs) == 1
        assert ours[0].index == theirs[0].index and ours[0].device.id == theirs[0].device.id
        same_keys(ours[0].data, theirs[0].data)
    same_keys(k.addressable_data(0), jk.addressable_data(0))
    # the plain arrays' own: on the host, on a device, over several devices
    x = np.arange(6.0, dtype=np.float32)
    assert jnp.asarray(x).on_device_size_in_bytes() == jax.numpy.asarray(x).on_device_size_in_bytes() == 24
    assert ftrans.device_put(x).on_device_size_in_bytes() == 24
    from ftrans.sharding import Mesh, NamedSharding, PartitionSpec

    sh = NamedSharding(Mesh(np.array(ftrans.devices()[:2]), ("x",)), PartitionSpec("x"))
    jsh = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",)),
                                     jax.sharding.PartitionSpec("x"))
    r, jrep = ftrans.device_put(x, sh), jax.device_put(x, jsh)
    assert r.on_device_size_in_bytes() == jrep.on_device_size_in_bytes()
    assert len(r.global_shards) == len(jrep.global_shards) == 2
    assert [s.index for s in r.global_shards] == [s.index for s in jrep.global_shards]


@pytest.mark.needs_devices(2)
def test_global_key_arrays_from_blocks():
    n = 2
    # make_array_from_callback / _single_device_arrays / _process_local_data with typed keys: the keys laid
    # out as their data, the key-data axes whole on each device, as JAX's.
    from ftrans.sharding import Mesh, NamedSharding, PartitionSpec

    devs = ftrans.devices()[:n]
    sh = NamedSharding(Mesh(np.array(devs), ("x",)), PartitionSpec("x"))
    jsh = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()[:n]), ("x",)),
                                     jax.sharding.PartitionSpec("x"))
    out = ftrans.make_array_from_callback((n,), sh, lambda i: ftrans.vmap(fr.key)(jnp.arange(n)[i[0]]))
    want = jax.make_array_from_callback((n,), jsh, lambda i: jax.vmap(jr.key)(jax.numpy.arange(n)[i[0]]))
    same_keys(out, want)
    assert out.sharding.spec == sh.spec and len(out.addressable_shards) == n
    ks, jks = fr.split(fr.key(0), n), jr.split(jr.key(0), n)
    out = ftrans.make_array_from_single_device_arrays(
        (n,), sh, [ftrans.device_put(ks[i:i + 1], d) for i, d in enumerate(devs)])
    same_keys(out, jax.make_array_from_single_device_arrays(
        (n,), jsh, [jax.device_put(jks[i:i + 1], d) for i, d in enumerate(jax.devices()[:n])]))
    same_keys(ftrans.make_array_from_process_local_data(sh, ks), jax.make_array_from_process_local_data(jsh, jks))
    np.testing.assert_array_equal(fr.normal(out[-1], (2,)), jr.normal(jks[-1], (2,)))
    blocks = [ftrans.device_put(ks[:1], devs[0]), ftrans.device_put(fr.key_data(ks[1:2]), devs[1])]
    with pytest.raises(errors.FtransTypeError, match="cannot combine key arrays"):  # keys and plain arrays
        ftrans.make_array_from_single_device_arrays((n,), sh, blocks)


def test_legacy_prng_key_option():
    raw, jraw = fr.PRNGKey(0), jr.PRNGKey(0)
    msg = "Legacy uint32 key array passed as key to"
    for ctx, k, mod in ((ftrans.legacy_prng_key, raw, fr), (jax.legacy_prng_key, jraw, jr)):
        with ctx("allow"), warnings.catch_warnings():
            warnings.simplefilter("error")
            mod.key_data(k)
        with ctx("warn"), pytest.warns(UserWarning, match=msg) as rec:
            mod.key_data(k)
        assert sum(msg in str(w.message) for w in rec) == 1
        with ctx("error"):
            for f in (lambda k: mod.split(k), lambda k: mod.key_data(k), lambda k: mod.uniform(k)):
                with pytest.raises(ValueError, match=msg):
                    f(k)
            with pytest.raises(TypeError):  # not key data at all: that error first
                mod.uniform(np.zeros(1, np.float32))
            same_keys(fr.key(3), jr.key(3))  # typed keys are not affected
    with ftrans.legacy_prng_key("warn"), pytest.warns(UserWarning, match=msg) as rec:
        fr.choice(raw, 5, (2,))  # one warning, not one more for its inner randint
    assert sum(msg in str(w.message) for w in rec) == 1
    with ftrans.legacy_prng_key("error"):
        np.testing.assert_array_equal(fr.clone(raw), raw)  # clone takes raw keys unchecked, as JAX's
    assert ftrans.config.legacy_prng_key == "allow"


def test_astype_of_a_key_array_to_its_own_dtype():
    # optax's gradient accumulation does jnp.astype(jnp.where(emit, new, old), old.dtype) over a state
    # that holds keys: JAX gives the key array itself; eagerly, under jit and under where's selection.
    import jax.numpy as jjnp

    def run(np_mod, rnd, jit):
        k = rnd.split(rnd.key(3), 4)
        return jit(lambda k, b: np_mod.astype(np_mod.where(b, k, k[::-1]), k.dtype))(k, True)

    same_keys(run(jnp, fr, ftrans.jit), run(jjnp, jr, jax.jit))
    k = fr.key(1)
    assert jnp.astype(k, k.dtype) is k and jnp.astype(k, k.dtype, copy=True) is not k
    for x, dt, jx, jdt in [(k, np.uint32, jr.key(1), np.uint32),
                           (jnp.ones(2, np.uint32), k.dtype, jjnp.ones(2, np.uint32), jr.key(1).dtype),
                           (k, fr.key(1, impl="rbg").dtype, jr.key(1), jr.key(1, impl="rbg").dtype)]:
        with pytest.raises(ValueError, match="(?i)convert"):
            jjnp.astype(jx, jdt)
        with pytest.raises(ValueError, match="(?i)convert"):
            jnp.astype(x, dt)
    # the method is not there, as in JAX (NotImplementedError), though the function takes the own dtype
    for key in (jr.key(1), k):
        with pytest.raises(NotImplementedError):
            key.astype(key.dtype)
