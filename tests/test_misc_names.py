"""JAX's remaining top-level, ``dtypes``, ``errors``, ``debug`` and ``stages`` names in ftrans, against jax:
transfer guards, the configuration context managers, ``live_arrays``, ``dtypes.itemsize_bits`` /
``scalar_type_of`` / ``TypePromotionError`` / ``extended`` / ``prng_key``, the error classes, and
``debug.breakpoint`` / ``log`` / ``inspect_array_sharding``."""

from __future__ import annotations

import io
import logging
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fnp


def test_names_exist_like_jax():
    for mod_j, mod_f, names in [
        (jax, ftrans, ["transfer_guard", "transfer_guard_host_to_device", "transfer_guard_device_to_host",
                       "transfer_guard_device_to_device", "live_arrays", "enable_checks", "debug_key_reuse",
                       "legacy_prng_key", "threefry_partitionable", "enable_custom_prng", "softmax_custom_jvp",
                       "thread_guard", "array_garbage_collection_guard"]),
        (jax.dtypes, ftrans.dtypes, ["TypePromotionError", "extended", "itemsize_bits", "prng_key", "scalar_type_of"]),
        (jax.errors, ftrans.errors, ["JAXTypeError", "JAXIndexError", "KeyReuseError", "InconclusiveDimensionOperation"]),
        (jax.debug, ftrans.debug, ["breakpoint", "log", "inspect_array_sharding"]),
        (jax.stages, ftrans.stages, ["CompilerOptions"]),
    ]:
        for n in names:
            assert hasattr(mod_j, n) and hasattr(mod_f, n), n


def test_transfer_guard_host_to_device_matches_jax():
    fj = jax.jit(lambda a: a + 1)
    ff = ftrans.jit(lambda a: a + 1)
    x = np.ones(3, np.float32)
    on_device_f, on_device_j = fnp.ones(3), jnp.ones(3)
    for level in ("disallow", "disallow_explicit"):
        for arg in (x, 1.0):  # (jax's guard also watches ftrans's own buffers: one library at a time)
            with jax.transfer_guard(level), pytest.raises(jax.errors.JaxRuntimeError, match="Disallowed host-to-device"):
                fj(arg)
            with ftrans.transfer_guard(level), pytest.raises(ftrans.errors.JaxRuntimeError,
                                                             match="Disallowed host-to-device"):
                ff(arg)
        # device-resident arguments are not transfers
        with jax.transfer_guard(level):
            want = fj(on_device_j)
        with ftrans.transfer_guard(level):
            np.testing.assert_array_equal(ff(on_device_f), want)
    with jax.transfer_guard("disallow"):  # explicit transfers stay allowed
        want = jax.device_put(x)
    with ftrans.transfer_guard("disallow"):
        np.testing.assert_array_equal(ftrans.device_put(x), want)
    with ftrans.transfer_guard_host_to_device("disallow_explicit"):
        with pytest.raises(ftrans.errors.JaxRuntimeError, match="explicit"):
            ftrans.device_put(x)
    np.testing.assert_array_equal(ff(x), fj(x))  # allowed again after the block
    assert ftrans.config.transfer_guard_host_to_device is None
    with pytest.raises(ValueError):
        ftrans.config.update("jax_transfer_guard", "sometimes")


def test_jax_transfer_guard_counts_ftrans_device_put_as_explicit():
    # ftrans shares jax's runtime, so jax's guard watches ftrans's transfers: device_put and its kin are
    # the user's explicit transfers there too (allowed under "disallow", refused under "disallow_explicit").
    x = np.arange(3, dtype=np.int32)
    with jax.transfer_guard("disallow"):  # (reading a GPU array back is a transfer too: compared after)
        want = jax.device_put(x)
        got = [ftrans.device_put(x), ftrans.device_put(42), ftrans.device_put_replicated(x, ftrans.devices()[:2])]
        fkey, jkey = ftrans.random.key(ftrans.device_put(42)), jax.random.key(jax.device_put(42))
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], jax.device_put(42))
    np.testing.assert_array_equal(got[2], np.stack([want] * min(2, len(ftrans.devices()))))
    np.testing.assert_array_equal(ftrans.random.key_data(fkey), jax.random.key_data(jkey))
    with jax.transfer_guard("disallow_explicit"):
        with pytest.raises(jax.errors.JaxRuntimeError, match="Disallowed host-to-device"):
            jax.device_put(x)
        with pytest.raises(jax.errors.JaxRuntimeError, match="Disallowed host-to-device"):
            ftrans.device_put(x)


def test_jit_constants_are_part_of_the_program_under_jax_transfer_guard():
    # JAX embeds a jitted function's captured constants in the program: no transfer its guard could refuse.
    c = np.arange(4.0, dtype=np.float32)
    x = np.ones(4, np.float32)
    fx, jx = ftrans.device_put(x), jax.device_put(x)
    mesh = ftrans.sharding.Mesh(np.array(ftrans.devices()[:2]), ("x",))
    sx = ftrans.device_put(x, ftrans.sharding.NamedSharding(mesh, ftrans.sharding.PartitionSpec("x")))
    with jax.transfer_guard("disallow"):
        got = [ftrans.jit(lambda v: v * c)(fx), ftrans.jit(lambda v: v - c)(sx)]
        want = jax.jit(lambda v: v * c)(jx)
        key = ftrans.random.key(ftrans.device_put(np.int32(7)))
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], x - c)
    np.testing.assert_array_equal(ftrans.random.key_data(key), jax.random.key_data(jax.random.key(7)))


def test_transfer_guard_log_level(caplog):
    ff = ftrans.jit(lambda a: a * 3)
    with caplog.at_level(logging.WARNING, logger="ftrans"), ftrans.transfer_guard("log"):
        np.testing.assert_array_equal(ff(np.ones(2, np.float32)), 3 * np.ones(2))
    assert any("host-to-device" in r.getMessage() for r in caplog.records)


def test_remat3_option_is_accepted_like_jax():
    """JAX's remat doc sets ``jax_remat3`` first; ftrans accepts it, reads it back, and rematerialises as before."""
    def run(lib, np_):
        before = lib.config.jax_remat3
        lib.config.update("jax_remat3", True)
        try:
            on = lib.config.jax_remat3
            g = lib.grad(lambda x: lib.checkpoint(lambda y: np_.sin(np_.sin(y)))(x))(np.float32(0.5))
        finally:
            lib.config.update("jax_remat3", before)
        return before, on, float(g)

    (fb, fon, fg), (jb, jon, jg) = run(ftrans, fnp), run(jax, jax.numpy)
    assert (fb, fon) == (jb, jon) == (False, True)
    np.testing.assert_allclose(fg, jg, rtol=1e-6)


def test_compilation_cache_doc_options_are_accepted_like_jax():
    """The options JAX's compilation-cache doc sets first are accepted and read back with JAX's defaults."""
    name = "jax_persistent_cache_enable_xla_caches"
    assert getattr(ftrans.config, name) == getattr(jax.config, name)
    for lib in (ftrans, jax):
        before = getattr(lib.config, name)
        lib.config.update(name, "none")
        assert getattr(lib.config, name) == "none"
        lib.config.update(name, before)


def test_config_context_managers():
    for name, value in [("enable_checks", True), ("softmax_custom_jvp", True), ("enable_custom_prng", True),
                        ("thread_guard", False), ("array_garbage_collection_guard", "allow"),
                        ("threefry_partitionable", True), ("debug_key_reuse", False), ("debug_key_reuse", True),
                        ("legacy_prng_key", "allow")]:
        with getattr(ftrans, name)(value):
            assert getattr(ftrans.config, name) == value
    with pytest.raises(ValueError, match="thread_guard"):
        ftrans.config.update("jax_thread_guard", True)


def test_live_arrays():
    keep = fnp.arange(5.0) + 1
    live = ftrans.live_arrays()
    assert any(a is keep for a in live)
    assert any(a is keep for a in ftrans.live_arrays(ftrans.default_backend()))  # where it reports it is
    assert not any(a is keep for a in ftrans.live_arrays("cpu")) or ftrans.default_backend() == "cpu"
    keep.delete()
    assert not any(a is keep for a in ftrans.live_arrays())


def test_dtypes_names_match_jax():
    for d in ["bool", "int4", "uint2", "int8", "bfloat16", "float8_e4m3fn", "float4_e2m1fn", "complex64", "float64"]:
        assert ftrans.dtypes.itemsize_bits(d) == jax.dtypes.itemsize_bits(d), d
    for x in [1, 1.0, 1j, True, np.ones(2, np.int8), np.ones(2, ml_dtypes.bfloat16), np.ones(2, ml_dtypes.int4)]:
        assert ftrans.dtypes.scalar_type_of(x) is jax.dtypes.scalar_type_of(x)
    assert ftrans.dtypes.scalar_type_of(fnp.ones(2, np.uint16)) is int
    assert issubclass(ftrans.dtypes.TypePromotionError, ValueError)
    assert fnp.issubdtype(ftrans.dtypes.prng_key, ftrans.dtypes.extended)
    assert fnp.issubdtype(ftrans.random.key(0).dtype, ftrans.dtypes.prng_key)
    assert not fnp.issubdtype(ftrans.random.PRNGKey(0).dtype, ftrans.dtypes.prng_key)
    with pytest.raises(ftrans.dtypes.TypePromotionError):
        fnp.ones(2, ml_dtypes.int4) + fnp.ones(2, ml_dtypes.float8_e4m3fn)
    with ftrans.numpy_dtype_promotion("strict"), pytest.raises(ftrans.dtypes.TypePromotionError):
        fnp.ones(2, np.int32) + fnp.ones(2, np.float32)


def test_error_classes_subclass_like_jax():
    E = ftrans.errors
    assert issubclass(E.JAXTypeError, TypeError) and issubclass(E.JAXIndexError, IndexError)
    assert issubclass(E.KeyReuseError, E.JAXTypeError)
    for n in ("ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError",
              "UnexpectedTracerError"):
        assert issubclass(getattr(E, n), E.JAXTypeError) == issubclass(getattr(jax.errors, n), jax.errors.JAXTypeError)
    assert issubclass(E.NonConcreteBooleanIndexError, E.JAXIndexError)
    assert issubclass(E.InconclusiveDimensionOperation, Exception)
    with pytest.raises(E.JAXTypeError):
        ftrans.jit(lambda x: bool(x))(fnp.ones(()))


def test_breakpoint_reads_stdin_and_never_blocks(monkeypatch, capsys):
    def f(x):
        y = x * 2
        ftrans.debug.breakpoint()
        return y + 1

    monkeypatch.setattr(sys, "stdin", io.StringIO("p y\np x.shape\nc\n"))
    out = ftrans.jit(f)(fnp.arange(3.0))
    np.testing.assert_array_equal(out, [1.0, 3.0, 5.0])
    text = capsys.readouterr().out
    assert "(jdb)" in text and "0., 2., 4." in text and "(3,)" in text
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # end of input at once: the program continues
    np.testing.assert_array_equal(f(fnp.arange(2.0)), [1.0, 3.0])
    np.testing.assert_array_equal(ftrans.vmap(f)(fnp.arange(2.0)), [1.0, 3.0])


def test_debug_log_and_inspect_array_sharding(caplog):
    def g(x):
        ftrans.debug.log("x is {}", x)
        return x + 1

    with caplog.at_level(logging.INFO, logger="ftrans.debug"):
        ftrans.jit(g)(fnp.ones(2))
        g(3)
    msgs = [r.getMessage() for r in caplog.records if r.name == "ftrans.debug"]
    assert msgs == ["x is [1. 1.]", "x is 3"]
    assert all(r.pathname == __file__ for r in caplog.records if r.name == "ftrans.debug")
    seen_f, seen_j = [], []
    ftrans.debug.inspect_array_sharding(fnp.ones(3), callback=seen_f.append)
    jax.debug.inspect_array_sharding(jnp.ones(3), callback=seen_j.append)
    assert [s.device_set for s in seen_f] == [{ftrans.devices()[0]}] and len(seen_j) == 1
    seen = []
    ftrans.jit(lambda x: ftrans.debug.inspect_array_sharding(x, callback=seen.append) or x)(fnp.ones(3))
    assert len(seen) == 1 and seen[0].device_set == {ftrans.devices()[0]}
