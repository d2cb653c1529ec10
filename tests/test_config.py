"""``ftrans.config``: the 64-bit switch and friends, from the environment and from ``update``."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core.config import Config


@contextlib.contextmanager
def x64(on: bool):
    before = ftrans.config.enable_x64
    ftrans.config.update("enable_x64", on)
    try:
        yield
    finally:
        ftrans.config.update("enable_x64", before)


def test_default_is_32_bit():
    assert ftrans.config.enable_x64 is False
    assert jnp.zeros(3).dtype == np.float32
    assert jnp.asarray(1).dtype == np.int32


def test_arange_default_int_follows_x64():
    with x64(False):
        assert jnp.arange(3).dtype == np.int32
    with x64(True):
        assert jnp.arange(3).dtype == np.int64
    assert jnp.arange(3).dtype == np.int32


def test_x64_changes_default_dtypes():
    with x64(True):
        assert jnp.zeros(3).dtype == np.float64
        assert jnp.asarray(1.0).dtype == np.float64
        assert jnp.asarray(1).dtype == np.int64
        assert jnp.asarray(np.ones(2, np.float64)).dtype == np.float64
        assert (jnp.ones(2, np.float32) + 1.0).dtype == np.float32  # weak scalars still yield
    with x64(False):
        assert jnp.zeros(3).dtype == np.float32
        assert jnp.asarray(np.ones(2, np.float64)).dtype == np.float32
        assert jnp.asarray(np.ones(2, np.int64)).dtype == np.int32
        assert jnp.asarray(1j).dtype == np.complex64


def test_x64_under_tracing():
    with x64(True):
        closed = ftrans.make_jaxpr(lambda x: x * 2.0)(np.ones(2, np.float64))
        assert closed.in_avals[0].dtype == np.float64
        assert "f64[2]" in str(closed)
    closed = ftrans.make_jaxpr(lambda x: x * 2.0)(np.ones(2, np.float64))
    assert "f32[2]" in str(closed)


def test_jax_spelling_accepted():
    before = ftrans.config.enable_x64
    try:
        ftrans.config.update("jax_enable_x64", True)
        assert ftrans.config.enable_x64 is True
        assert ftrans.config.jax_enable_x64 is True
        assert ftrans.config.read("jax_enable_x64") is True
        assert jnp.zeros(1).dtype == np.float64
    finally:
        ftrans.config.update("jax_enable_x64", before)
    assert ftrans.config.read("enable_x64") is before


def test_unknown_option_is_a_value_error():
    with pytest.raises(ValueError, match="no_such_option"):
        ftrans.config.update("no_such_option", True)
    with pytest.raises(ValueError, match="enable_x64"):  # the message lists the known options
        ftrans.config.update("jax_enable_x65", True)
    with pytest.raises(AttributeError):
        ftrans.config.jax_no_such_option  # noqa: B018


def test_other_switches_update():
    for name in ("disable_jit", "debug_nans"):
        before = ftrans.config.read(name)
        try:
            ftrans.config.update(name, 1)
            assert ftrans.config.read(name) is True
            ftrans.config.update("jax_" + name, 0)
            assert ftrans.config.read(name) is False
        finally:
            ftrans.config.update(name, before)


@pytest.mark.parametrize("value,expected", [
    ("1", True), ("true", True), ("True", True), ("yes", True), ("on", True), (" TRUE ", True),
    ("0", False), ("false", False), ("", False), ("no", False), ("off", False),
])
def test_env_var_parsing(monkeypatch, value, expected):
    monkeypatch.delenv("FTRANS_ENABLE_X64", raising=False)
    monkeypatch.setenv("JAX_ENABLE_X64", value)
    assert Config().enable_x64 is expected
    monkeypatch.delenv("JAX_ENABLE_X64")
    monkeypatch.setenv("FTRANS_ENABLE_X64", value)
    assert Config().enable_x64 is expected


def test_env_vars_absent(monkeypatch):
    for v in ("JAX_ENABLE_X64", "FTRANS_ENABLE_X64", "JAX_DISABLE_JIT", "JAX_DEBUG_NANS"):
        monkeypatch.delenv(v, raising=False)
    c = Config()
    assert (c.enable_x64, c.disable_jit, c.debug_nans) == (False, False, False)
    monkeypatch.setenv("JAX_DEBUG_NANS", "1")
    monkeypatch.setenv("JAX_DISABLE_JIT", "true")
    c = Config()
    assert c.debug_nans and c.disable_jit


def test_env_var_at_import_in_a_fresh_process():
    """JAX_ENABLE_X64 read at import; and ``jax_num_cpu_devices`` (set at the top of JAX's sharding docs)
    sizes the CPU backend, as in JAX: once the backend runs, changing it is a RuntimeError in both
    (setting the same value again is not). One fresh process for both, to keep the suite fast."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(JAX_ENABLE_X64="1", JAX_PLATFORMS="cpu")
    code = (
        "import ftrans, jax\n"
        "import ftrans.numpy as jnp; print(jnp.zeros(1).dtype, jnp.asarray(1).dtype)\n"
        "ftrans.config.update('jax_num_cpu_devices', 4)\n"
        "print(ftrans.device_count(), jax.device_count(), ftrans.config.jax_num_cpu_devices)\n"
        "ftrans.config.update('jax_num_cpu_devices', 4)\n"
        "for lib in (ftrans, jax):\n"
        "    try:\n"
        "        lib.config.update('jax_num_cpu_devices', 2)\n"
        "    except RuntimeError:\n"
        "        print('RuntimeError')\n"
        "print(ftrans.config.jax_num_cpu_devices, ftrans.device_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.split() == ["float64", "int64", "4", "4", "4", "RuntimeError", "RuntimeError", "4", "4"]



def test_every_jax_option_is_accepted_at_jax_default():
    """A swapped-in JAX script may set any of jax's options at its top: each is accepted at jax's own
    default (and read back), except ``explicit_x64_dtypes``, whose default warns where ftrans narrows
    quietly (accepted as "allow"); an option that changes results refuses other values by name."""
    import jax

    refused = []
    for name, value in sorted(jax.config.values.items()):
        try:
            before = ftrans.config.read(name)
        except (AttributeError, ValueError):
            before = None
        try:
            ftrans.config.update(name, value)
        except ValueError:
            refused.append(name)
            continue
        finally_value = before
        assert ftrans.config.read(name) == getattr(value, "value", value) or name in (
            "jax_platforms", "jax_compilation_cache_dir", "jax_default_device", "jax_platform_name",
            "jax_num_cpu_devices", "jax_default_prng_impl", "jax_legacy_prng_key"), name
        if before is not None or name.startswith(("jax_compilation_cache_dir", "jax_default_device")):
            ftrans.config.update(name, finally_value)
    assert refused == []
    ftrans.config.update("jax_debug_log_modules", "ftrans")  # a diagnostics option: any value
    ftrans.config.update("jax_debug_log_modules", "")
    with pytest.raises(ValueError, match="cpu_collectives_implementation.*'gloo'"):
        ftrans.config.update("jax_cpu_collectives_implementation", "mpi")
    try:
        ftrans.config.update("jax_platform_name", "cpu")
        assert ftrans.config.default_device == "cpu" and jnp.ones(2).devices() == {ftrans.devices("cpu")[0]}
    finally:
        ftrans.config.update("jax_platform_name", "")
    assert ftrans.config.default_device is None


def test_explicit_64_bit_dtypes_without_x64_warn_like_jax():
    import warnings

    import jax
    import jax.numpy as jjnp

    calls = [
        lambda np_: np_.zeros(3, np.float64),
        lambda np_: np_.ones(2).astype("int64"),
        lambda np_: np_.sum(np.ones(2, np.float32), dtype=np.float64),
        lambda np_: np_.arange(3, dtype=np.int64),
    ]
    for call in calls:
        for np_ in (jnp, jjnp):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                out = call(np_)
            assert out.dtype in (np.float32, np.int32)
            mine = [w for w in seen if str(w.message).startswith("Explicitly requested dtype")]
            assert len(mine) >= 1 and all(w.category is UserWarning for w in mine), (np_, seen)
            if np_ is jnp:
                assert mine[0].filename == __file__  # points at the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.zeros(3, float).dtype == jjnp.zeros(3, float).dtype == np.float32  # Python types: no warning
        assert jnp.zeros(3, np.float32).dtype == np.float32
    try:
        ftrans.config.update("jax_explicit_x64_dtypes", "error")
        with pytest.raises(ValueError, match=r"Explicitly requested dtype float64 requested in zeros is not available"):
            jnp.zeros(3, np.float64)
        ftrans.config.update("jax_explicit_x64_dtypes", jax.config.values["jax_explicit_x64_dtypes"].__class__.ALLOW)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jnp.zeros(3, np.float64).dtype == np.float64  # "allow" keeps it, as JAX's
            assert (jnp.zeros(3, np.float64) + 1).dtype == np.float64
            assert jnp.zeros(3).dtype == jnp.asarray(np.zeros(3)).dtype == np.float32
    finally:
        ftrans.config.update("jax_explicit_x64_dtypes", "warn")
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.zeros(3, np.float64).dtype == np.float64


def test_parse_flags_with_absl_like_jax():
    # JAX's test files call it at import time; without --jax_* flags it changes nothing.
    import jax

    assert callable(jax.config.parse_flags_with_absl)  # JAX's needs absl installed; ftrans's does not
    before = ftrans.config.enable_x64
    ftrans.config.parse_flags_with_absl()
    assert ftrans.config.enable_x64 == before
    c = Config()
    c.parse_flags_with_absl(["prog", "--jax_enable_x64=true", "--nojax_debug_nans", "--jax_no_such_option=1",
                             "--jax_numpy_rank_promotion=raise", "-k", "x"])
    assert c.enable_x64 is True and c.debug_nans is False and c.numpy_rank_promotion == "raise"
    c.parse_flags_with_absl(["prog", "--jax_enable_x64=false"])  # only the first call reads flags, as JAX's
    assert c.enable_x64 is True
    with pytest.raises(ftrans.errors.FtransValueError):
        Config().parse_flags_with_absl(["prog", "--jax_enable_x64=maybe"])
