"""The on-disk cache of compiled executables (``config.compilation_cache_dir``).

Each test points the cache at its own temporary directory and empties the
in-memory executable cache, so every ``jit`` call below reaches the disk
cache; the fixture restores the configured directory afterwards.
"""

import hashlib
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core.config import DEFAULT_CACHE_MAX_SIZE, Config, default_cache_dir
from ftrans.lowering import compat, disk_cache
from ftrans.lowering import executable as X

LOGGER = "ftrans.lowering.disk_cache"


@pytest.fixture
def cache(tmp_path):
    """The cache on, in a fresh directory, with zeroed counters and no in-memory executables."""
    # Earlier tests' entries may still wait on the background writer (``write_delay_s``): land them
    # first, so that they are not counted here.
    disk_cache.flush()
    old = ftrans.config.compilation_cache_dir
    d = tmp_path / "xla-cache"
    ftrans.config.update("compilation_cache_dir", str(d))
    X._xla_cache.clear()
    saved = dict(disk_cache.stats)
    for k in disk_cache.stats:
        disk_cache.stats[k] = 0
    # These tests count writes right after a call: write in the caller's thread
    # (the background writer has its own tests below).
    background = disk_cache.background_writes
    disk_cache.background_writes = False
    yield d
    disk_cache.background_writes = background
    ftrans.config.update("compilation_cache_dir", old)
    X._xla_cache.clear()
    disk_cache.stats.update(saved)


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir()) if d.is_dir() else []


def _fresh_call(f, *args):
    """Call ``f`` as a new process would: no in-memory executable, a new jit object."""
    ftrans.clear_caches()  # jit objects of one function share its cache, as in JAX
    return ftrans.jit(f)(*args)


def _f(x):
    return jnp.sin(x) * 2.0 + x


def _g(x):
    return jnp.cos(x) + x * x


X_IN = np.linspace(-2.0, 2.0, 7, dtype=np.float32)


def _cpu():
    """The client and device the calls here compile for: the default device's (the CPU's in CI)."""
    dev = ftrans.devices()[0]
    return dev.client, dev


# ----------------------------------------------------------------------------
# Round trip


def test_first_call_writes_one_file_then_second_loads_it(cache):
    r1 = np.asarray(_fresh_call(_f, X_IN))
    files = _files(cache)
    assert len(files) == 1
    assert disk_cache.stats["writes"] == 1 and disk_cache.stats["misses"] == 1
    assert disk_cache.stats["hits"] == 0

    compiles = X.stats["compiles"]
    disk_hits = X.stats["disk_hits"]
    r2 = np.asarray(_fresh_call(_f, X_IN))
    assert disk_cache.stats["hits"] == 1
    assert X.stats["disk_hits"] == disk_hits + 1
    assert X.stats["compiles"] == compiles  # nothing was compiled the second time
    assert disk_cache.stats["writes"] == 1
    assert _files(cache) == files
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_allclose(r2, np.sin(X_IN) * 2 + X_IN, rtol=1e-6)
    assert r2.dtype == np.float32


def test_file_is_header_plus_serialized_executable(cache):
    _fresh_call(_f, X_IN)
    (path,) = _files(cache)
    data = path.read_bytes()
    magic, version, reserved, length, digest, key = disk_cache.HEADER.unpack_from(data)
    assert magic == disk_cache.MAGIC
    assert version == disk_cache.FORMAT_VERSION
    assert reserved == 0
    assert length == len(data) - disk_cache.HEADER.size
    assert digest == hashlib.sha256(data[disk_cache.HEADER.size:]).digest()
    assert key.hex() == path.name
    assert b"pickle" not in data[:disk_cache.HEADER.size]
    assert data[disk_cache.HEADER.size:disk_cache.HEADER.size + 2] != b"\x80\x04"  # not a pickle stream


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """Two processes on one cache directory (a process costs seconds of imports, so two tests share them).
    The first compiles a program, flushes its write and prints its counters, then compiles a second program
    and exits at once, its write still in the background writer's hands; the second process runs the
    first program again. The directory's files are listed after each."""
    tmp_path = tmp_path_factory.mktemp("two_processes")
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import ftrans, ftrans.numpy as jnp
        from ftrans.lowering import disk_cache
        out = ftrans.jit(lambda x: jnp.sin(x) + x * 3.0)(np.arange(5, dtype=np.float32))
        disk_cache.flush()  # the write runs on the background writer
        print(disk_cache.stats["hits"], disk_cache.stats["writes"], np.asarray(out).tolist(), flush=True)
        if sys.argv[1] == "first":  # exit right after a call: its entry is flushed at exit
            assert disk_cache.background_writes
            ftrans.jit(lambda x: jnp.cos(x) * 5.0)(np.arange(3, dtype=np.float32)).block_until_ready()
    """))
    env = dict(os.environ, FTRANS_COMPILATION_CACHE_DIR=str(tmp_path / "c"), JAX_PLATFORMS="cpu",
               PYTHONPATH=str(Path(ftrans.__file__).resolve().parents[1]))

    def run(which):
        p = subprocess.run([sys.executable, str(script), which], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        hits, writes, vals = p.stdout.strip().split(" ", 2)
        return (int(hits), int(writes), vals), sorted(f.name for f in (tmp_path / "c").iterdir())

    first, files_after_first = run("first")
    second, files_after_second = run("second")
    return SimpleNamespace(first=first, second=second, files_after_first=files_after_first,
                           files_after_second=files_after_second)


def test_cross_process_hit(two_processes):
    """The point of the cache: a second process loads what the first compiled."""
    first, second = two_processes.first, two_processes.second
    assert first[:2] == (0, 1)
    assert second[:2] == (1, 0)
    assert first[2] == second[2]
    # the first program's entry and the one flushed at exit; the second process added none
    assert len(two_processes.files_after_first) == 2
    assert two_processes.files_after_second == two_processes.files_after_first


# ----------------------------------------------------------------------------
# Corruption and mismatch: detected, removed, recompiled, logged


def _flip_payload_byte(data: bytes) -> bytes:
    i = disk_cache.HEADER.size + (len(data) - disk_cache.HEADER.size) // 2
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


CORRUPTIONS = {
    "flipped_payload_byte": _flip_payload_byte,
    "truncated_payload": lambda d: d[: len(d) - 17],
    "truncated_header": lambda d: d[:40],
    "empty": lambda d: b"",
    "wrong_magic": lambda d: b"NOTFTRNS" + d[8:],
    "wrong_version": lambda d: d[:8] + (99).to_bytes(4, "little") + d[12:],
    "wrong_length": lambda d: d[:16] + (5).to_bytes(8, "little") + d[24:],
    "wrong_key": lambda d: d[:56] + bytes(32) + d[88:],
    "extra_bytes": lambda d: d + b"junk",
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupt_file_is_detected_and_recompiled(cache, caplog, name):
    expected = np.asarray(_fresh_call(_f, X_IN))
    (path,) = _files(cache)
    good = path.read_bytes()
    path.write_bytes(CORRUPTIONS[name](good))

    compiles = X.stats["compiles"]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = np.asarray(_fresh_call(_f, X_IN))
    np.testing.assert_array_equal(got, expected)
    assert X.stats["compiles"] == compiles + 1
    assert disk_cache.stats["corrupt"] == 1 and disk_cache.stats["hits"] == 0
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "corrupt" in warnings[0].getMessage()
    # The bad entry was replaced by a good one, which the next fresh call uses.
    (path2,) = _files(cache)
    assert path2 == path
    assert disk_cache.decode(bytes.fromhex(path.name), path.read_bytes())
    np.testing.assert_array_equal(np.asarray(_fresh_call(_f, X_IN)), expected)
    assert disk_cache.stats["hits"] == 1


def test_entry_of_another_module_under_this_name_is_rejected(cache, caplog):
    _fresh_call(_f, X_IN)
    _fresh_call(_g, X_IN)
    a, b = _files(cache)
    a.write_bytes(b.read_bytes())  # a well-formed file whose key is b's
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        r = np.asarray(_fresh_call(_f, X_IN))
        r2 = np.asarray(_fresh_call(_g, X_IN))
    np.testing.assert_allclose(r, np.sin(X_IN) * 2 + X_IN, rtol=1e-6)
    np.testing.assert_allclose(r2, np.cos(X_IN) + X_IN * X_IN, rtol=1e-6)
    assert disk_cache.stats["corrupt"] == 1
    assert any("key" in rec.getMessage() for rec in caplog.records if rec.name == LOGGER)


def test_program_xla_cannot_serialize_is_not_cached_quietly(cache, caplog, monkeypatch):
    """XLA's "UNIMPLEMENTED: ... is not serializable" (its CPU sort comparator, for one) is a property of the
    program, nothing the user can act on: not cached, logged at DEBUG only (JAX's cache says nothing
    either), and the result is still right. Another serialization failure stays a WARNING."""
    import jax.numpy as jjnp

    def refuse(why):
        def serialize(client, exe):
            raise RuntimeError(why)
        return serialize

    x = np.arange(8, dtype=np.float32)[::-1].copy()
    monkeypatch.setattr(compat, "serialize", refuse("UNIMPLEMENTED: `LessThan` is not serializable."))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = np.asarray(_fresh_call(jnp.sort, x))
        disk_cache.flush()
    np.testing.assert_array_equal(got, np.asarray(jjnp.sort(x)))
    assert disk_cache.stats["errors"] >= 1 and disk_cache.stats["writes"] == 0
    assert not [r for r in caplog.records if r.name == LOGGER]
    monkeypatch.setattr(compat, "serialize", refuse("INTERNAL: disk full"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _fresh_call(jnp.cumsum, x)
        disk_cache.flush()
    assert any("disk full" in r.getMessage() for r in caplog.records if r.name == LOGGER)


def test_undeserializable_payload_is_a_miss(cache, caplog):
    """A well-formed file PJRT cannot load (e.g. written by another jaxlib) is a miss, not an error."""
    expected = np.asarray(_fresh_call(_f, X_IN))
    (path,) = _files(cache)
    key = bytes.fromhex(path.name)
    path.write_bytes(disk_cache.encode(key, b"\x00" * 64 + os.urandom(64)))
    compiles = X.stats["compiles"]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = np.asarray(_fresh_call(_f, X_IN))
    np.testing.assert_array_equal(got, expected)
    assert X.stats["compiles"] == compiles + 1
    assert disk_cache.stats["errors"] == 1 and disk_cache.stats["hits"] == 0
    assert any("deserialize" in r.getMessage() for r in caplog.records if r.name == LOGGER)
    assert disk_cache.decode(key, path.read_bytes())  # rewritten with a loadable executable


def test_unwritable_directory_logs_and_still_runs(tmp_path, cache, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    ftrans.config.update("compilation_cache_dir", str(blocker / "sub"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        r = np.asarray(_fresh_call(_f, X_IN))
    np.testing.assert_allclose(r, np.sin(X_IN) * 2 + X_IN, rtol=1e-6)
    assert disk_cache.stats["writes"] == 0 and disk_cache.stats["errors"] == 1
    assert any("cannot write" in r.getMessage() for r in caplog.records if r.name == LOGGER)


def test_decode_names_the_failed_check():
    key = bytes(range(32))
    good = disk_cache.encode(key, b"payload bytes")
    assert disk_cache.decode(key, good) == b"payload bytes"
    with pytest.raises(ValueError, match="checksum"):
        disk_cache.decode(key, _flip_payload_byte(good))
    with pytest.raises(ValueError, match="magic"):
        disk_cache.decode(key, b"X" * 8 + good[8:])
    with pytest.raises(ValueError, match="truncated"):
        disk_cache.decode(key, good[:10])
    with pytest.raises(ValueError, match="bytes, header says"):
        disk_cache.decode(key, good[:-1])
    with pytest.raises(ValueError, match="key"):
        disk_cache.decode(bytes(32), good)


# ----------------------------------------------------------------------------
# On/off, keys


@pytest.mark.parametrize("off", [None, ""])
def test_disabled_when_unset(cache, off):
    ftrans.config.update("compilation_cache_dir", off)
    assert disk_cache.cache_dir() is None
    r = np.asarray(_fresh_call(_f, X_IN))
    np.testing.assert_allclose(r, np.sin(X_IN) * 2 + X_IN, rtol=1e-6)
    assert not cache.exists()
    assert disk_cache.stats == {k: 0 for k in disk_cache.stats}
    client, dev = _cpu()
    assert disk_cache.load(client, "module {}", [dev]) is None
    assert disk_cache.path_for(client, "module {}", [dev]) is None


def test_config_is_read_at_each_call(tmp_path, cache):
    _fresh_call(_f, X_IN)
    other = tmp_path / "other"
    ftrans.config.update("compilation_cache_dir", str(other))
    _fresh_call(_f, X_IN)
    assert len(_files(cache)) == 1 and len(_files(other)) == 1
    assert _files(cache)[0].name == _files(other)[0].name
    assert disk_cache.stats["writes"] == 2


def test_env_variable_enables_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FTRANS_COMPILATION_CACHE_DIR", str(tmp_path))
    assert Config().compilation_cache_dir == str(tmp_path)
    monkeypatch.setenv("FTRANS_COMPILATION_CACHE_DIR", "")  # empty: off
    assert Config().compilation_cache_dir is None
    monkeypatch.delenv("FTRANS_COMPILATION_CACHE_DIR")  # unset: the default directory (on by default)
    monkeypatch.delenv("FTRANS_CACHE_DIR", raising=False)
    assert Config().compilation_cache_dir == default_cache_dir()


def test_default_directory_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == str(tmp_path / "xdg" / "ftrans" / "compilation")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == str(tmp_path / "home" / ".cache" / "ftrans" / "compilation")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert default_cache_dir() == str(tmp_path / "home" / ".cache" / "ftrans" / "compilation")


def test_default_on_and_short_env_alias(monkeypatch, tmp_path):
    monkeypatch.delenv("FTRANS_COMPILATION_CACHE_DIR")
    monkeypatch.delenv("FTRANS_ENABLE_COMPILATION_CACHE", raising=False)
    monkeypatch.setenv("FTRANS_CACHE_DIR", str(tmp_path / "alias"))
    c = Config()
    assert c.enable_compilation_cache is True and c.compilation_cache_dir == str(tmp_path / "alias")
    assert c.compilation_cache_max_size == DEFAULT_CACHE_MAX_SIZE
    monkeypatch.setenv("FTRANS_CACHE_DIR", "")
    assert Config().compilation_cache_dir is None
    monkeypatch.setenv("FTRANS_ENABLE_COMPILATION_CACHE", "0")
    monkeypatch.setenv("FTRANS_COMPILATION_CACHE_MAX_SIZE", "512M")
    c = Config()
    assert c.enable_compilation_cache is False and c.compilation_cache_max_size == 512 * 2**20


def test_tests_never_use_the_real_home_cache():
    """conftest points the cache at a private temporary directory before any compile."""
    d = disk_cache.cache_dir()
    assert d is not None and Path(d) != Path(default_cache_dir())
    assert "ftrans-test-compilation-cache-" in str(d) or "xla-cache" in str(d)


def test_enable_switch_turns_the_cache_off_and_on(cache):
    ftrans.config.update("jax_enable_compilation_cache", False)  # JAX's spelling works too
    try:
        assert disk_cache.cache_dir() is None
        _fresh_call(_f, X_IN)
        assert not cache.exists() and disk_cache.stats["writes"] == 0
    finally:
        ftrans.config.update("enable_compilation_cache", True)
    _fresh_call(_f, X_IN)
    assert len(_files(cache)) == 1


def test_max_size_option_parses_units_and_rejects_junk():
    old = ftrans.config.compilation_cache_max_size
    try:
        ftrans.config.update("compilation_cache_max_size", "2G")
        assert ftrans.config.compilation_cache_max_size == 2 * 2**30
        ftrans.config.update("compilation_cache_max_size", -1)
        assert ftrans.config.compilation_cache_max_size == -1
        with pytest.raises(ValueError, match="size in bytes"):
            ftrans.config.update("compilation_cache_max_size", "lots")
        with pytest.raises(TypeError):
            ftrans.config.update("compilation_cache_max_size", True)
    finally:
        ftrans.config.update("compilation_cache_max_size", old)


# ----------------------------------------------------------------------------
# Size bound: least recently used entries are evicted


def _fill(cache, n):
    """Write ``n`` distinct entries, oldest first (mtimes spaced a second apart)."""
    fns = [lambda x, k=k: jnp.sin(x) * float(k + 2) for k in range(n)]
    for f in fns:
        _fresh_call(f, X_IN)
    files = sorted(_files(cache), key=lambda p: p.stat().st_mtime_ns)
    assert len(files) == n
    for i, p in enumerate(files):
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
    return files, fns


def test_eviction_removes_least_recently_used_first(cache):
    files, _ = _fill(cache, 4)
    sizes = [p.stat().st_size for p in files]
    # a hit on the oldest entry makes it the most recently used
    ftrans.clear_caches()
    X._xla_cache.clear()
    client, dev = _cpu()
    os.utime(files[1], (999_000, 999_000))  # now the least recently used
    removed = disk_cache.evict(cache, max_size=sum(sizes) - 1)
    assert removed == 1 and not files[1].exists()
    assert all(p.exists() for i, p in enumerate(files) if i != 1)
    assert disk_cache.stats["evictions"] == 1
    assert disk_cache.size_of(cache) == sum(sizes) - sizes[1]


def test_hit_refreshes_recency(cache):
    r = np.asarray(_fresh_call(_f, X_IN))
    (path,) = _files(cache)
    os.utime(path, (1_000_000, 1_000_000))
    np.testing.assert_allclose(np.asarray(_fresh_call(_f, X_IN)), r)
    assert disk_cache.stats["hits"] == 1
    assert path.stat().st_mtime > 1_000_000 + 3600


def test_writes_keep_the_directory_under_its_bound(cache):
    _fresh_call(_f, X_IN)
    one = disk_cache.size_of(cache)
    old = ftrans.config.compilation_cache_max_size
    ftrans.config.update("compilation_cache_max_size", int(one * 2.5))
    try:
        disk_cache.evict(cache)  # reset the estimate under the new bound
        for k in range(5):
            _fresh_call(lambda x, k=k: jnp.cos(x) + float(k), X_IN)
            assert disk_cache.size_of(cache) <= int(one * 2.5) * 1.2  # entries differ a little in size
        assert 1 <= len(_files(cache)) <= 3
        assert disk_cache.stats["evictions"] >= 3
        # the newest entry survives and loads
        ftrans.clear_caches()
        X._xla_cache.clear()
        r = np.asarray(ftrans.jit(lambda x, k=4: jnp.cos(x) + float(k))(X_IN))
        np.testing.assert_allclose(r, np.cos(X_IN) + 4.0, rtol=1e-6)
    finally:
        ftrans.config.update("compilation_cache_max_size", old)


def test_eviction_removes_stale_temporary_files_only(cache):
    _fresh_call(_f, X_IN)
    stale = cache / (disk_cache._TMP_PREFIX + "old")
    fresh = cache / (disk_cache._TMP_PREFIX + "new")
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (1_000_000, 1_000_000))
    disk_cache.evict(cache)
    assert not stale.exists() and fresh.exists() and len(_files(cache)) == 2


def test_concurrent_evictors_never_raise(cache):
    _fill(cache, 4)
    errors = []

    def work():
        try:
            disk_cache.evict(cache, max_size=0)
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and _files(cache) == []


# ----------------------------------------------------------------------------
# Bad directories: one warning, correct results, no exception


def test_cache_path_that_is_a_file_warns_once(tmp_path, cache, caplog):
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    ftrans.config.update("compilation_cache_dir", str(blocker))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        r1 = np.asarray(_fresh_call(_f, X_IN))
        r2 = np.asarray(_fresh_call(_g, X_IN))
    np.testing.assert_allclose(r1, np.sin(X_IN) * 2 + X_IN, rtol=1e-6)
    np.testing.assert_allclose(r2, np.cos(X_IN) + X_IN * X_IN, rtol=1e-6)
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1 and "cannot write" in warnings[0].getMessage()
    assert blocker.read_text() == "x"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_directory_warns_once(tmp_path, cache, caplog):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    ftrans.config.update("compilation_cache_dir", str(ro))
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            _fresh_call(_f, X_IN)
            r = np.asarray(_fresh_call(_g, X_IN))
        np.testing.assert_allclose(r, np.cos(X_IN) + X_IN * X_IN, rtol=1e-6)
        assert len([r for r in caplog.records if r.name == LOGGER]) == 1
    finally:
        ro.chmod(0o700)


def test_full_disk_warns_once_and_stops_writing(cache, caplog, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(disk_cache, "_write_atomic", full)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        r1 = np.asarray(_fresh_call(_f, X_IN))
        r2 = np.asarray(_fresh_call(_g, X_IN))
    np.testing.assert_allclose(r1, np.sin(X_IN) * 2 + X_IN, rtol=1e-6)
    np.testing.assert_allclose(r2, np.cos(X_IN) + X_IN * X_IN, rtol=1e-6)
    warnings = [r for r in caplog.records if r.name == LOGGER]
    assert len(warnings) == 1 and "No space" in warnings[0].getMessage()
    assert disk_cache.stats["errors"] == 1  # the second compile did not even try


def test_key_covers_ftrans_version(monkeypatch):
    dev = SimpleNamespace(device_kind="cpu")
    base = disk_cache.key_for(_fake_client(), "m", [dev])
    monkeypatch.setattr(disk_cache, "FTRANS_VERSION", "999.0")
    assert disk_cache.key_for(_fake_client(), "m", [dev]) != base


def test_different_modules_get_different_files(cache):
    _fresh_call(_f, X_IN)
    _fresh_call(_g, X_IN)
    _fresh_call(_f, X_IN.astype(np.int32))  # same function, other signature: other module text
    _fresh_call(_f, X_IN[:3])
    assert len(_files(cache)) == 4
    assert disk_cache.stats["writes"] == 4 and disk_cache.stats["hits"] == 0


def _fake_client(platform="cpu", version="cpu"):
    return SimpleNamespace(platform=platform, platform_version=version)


def test_key_covers_text_backend_and_devices():
    dev = SimpleNamespace(device_kind="cpu")
    base = disk_cache.key_for(_fake_client(), "module A", [dev])
    assert base == disk_cache.key_for(_fake_client(), "module A", [SimpleNamespace(device_kind="cpu")])
    others = [
        disk_cache.key_for(_fake_client(), "module B", [dev]),
        disk_cache.key_for(_fake_client("cuda", "12.4"), "module A", [dev]),
        disk_cache.key_for(_fake_client("cpu", "cpu-2"), "module A", [dev]),
        disk_cache.key_for(_fake_client(), "module A", [SimpleNamespace(device_kind="NVIDIA H100")]),
        disk_cache.key_for(_fake_client(), "module A", [dev, dev]),
    ]
    assert len({base, *others}) == 1 + len(others)
    assert all(len(k) == 32 for k in others)


def test_key_covers_jaxlib_version_and_format(monkeypatch):
    dev = SimpleNamespace(device_kind="cpu")
    base = disk_cache.key_for(_fake_client(), "m", [dev])
    monkeypatch.setattr(compat, "JAX_VERSION", "999.0")
    assert disk_cache.key_for(_fake_client(), "m", [dev]) != base
    monkeypatch.undo()
    monkeypatch.setattr(disk_cache, "FORMAT_VERSION", disk_cache.FORMAT_VERSION + 1)
    assert disk_cache.key_for(_fake_client(), "m", [dev]) != base


# ----------------------------------------------------------------------------
# Concurrency


def test_concurrent_writes_never_leave_partial_files(cache):
    client, dev = _cpu()
    _fresh_call(_f, X_IN)
    (path,) = _files(cache)
    text = next(X.disk_text_of(k[0], k[3]) for k in X._xla_cache)  # the text the entry was stored under
    exe = disk_cache.load(client, text, [dev])
    assert exe is not None
    key = bytes.fromhex(path.name)
    stop = threading.Event()
    bad: list = []

    def reader():
        while not stop.is_set():
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                disk_cache.decode(key, data)
            except ValueError as e:
                bad.append(e)

    def writer():
        for _ in range(5):
            disk_cache.store(client, text, [dev], exe)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer) for _ in range(6)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert bad == []
    assert _files(cache) == [path]  # no temporary files left behind
    assert disk_cache.stats["writes"] == 1 + 30
    assert disk_cache.load(client, text, [dev]) is not None


def test_concurrent_jit_calls_share_the_directory(cache):
    fns = [lambda x, k=k: jnp.sin(x) + float(k) for k in range(4)]
    X._xla_cache.clear()
    results: dict = {}

    def work(i):
        results[i] = np.asarray(ftrans.jit(fns[i])(X_IN))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_allclose(results[i], np.sin(X_IN) + i, rtol=1e-6)
    files = _files(cache)
    assert len(files) == 4
    for p in files:
        disk_cache.decode(bytes.fromhex(p.name), p.read_bytes())


# ----------------------------------------------------------------------------
# clear


def test_clear_removes_only_cache_files(cache):
    _fresh_call(_f, X_IN)
    _fresh_call(_g, X_IN)
    keep = cache / "README.txt"
    keep.write_text("user file")
    (cache / ".ftrans-tmp-leftover").write_bytes(b"partial")
    assert disk_cache.clear() == 3
    assert _files(cache) == [keep]
    assert disk_cache.clear() == 0
    # after clearing, the next fresh call compiles and writes again
    _fresh_call(_f, X_IN)
    assert disk_cache.stats["hits"] == 0 and len(_files(cache)) == 2


def test_clear_explicit_path_and_when_off(tmp_path, cache):
    _fresh_call(_f, X_IN)
    ftrans.config.update("compilation_cache_dir", None)
    assert disk_cache.clear() == 0  # off and no path: nothing to do
    assert len(_files(cache)) == 1
    assert disk_cache.clear(cache) == 1
    assert _files(cache) == []
    assert disk_cache.clear(tmp_path / "does-not-exist") == 0


def test_entry_of_another_jaxlib_version_is_never_opened(cache, caplog, monkeypatch):
    r = np.asarray(_fresh_call(_f, X_IN))
    (old_entry,) = _files(cache)
    monkeypatch.setattr(compat, "JAX_VERSION", "0.0.1-other")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        np.testing.assert_allclose(np.asarray(_fresh_call(_f, X_IN)), r)
    assert disk_cache.stats["hits"] == 0 and disk_cache.stats["writes"] == 2
    assert old_entry.exists() and len(_files(cache)) == 2  # left alone, not "corrupt"
    assert not [rec for rec in caplog.records if rec.name == LOGGER]


def test_concurrent_processes_write_and_evict_one_directory(tmp_path):
    """Several processes compiling into one small cache: all succeed, every file left is whole."""
    d = tmp_path / "shared"
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import ftrans, ftrans.numpy as jnp
        k = int(sys.argv[1])
        x = np.arange(5, dtype=np.float32)
        for j in range(4):
            out = ftrans.jit(lambda x, j=j: jnp.sin(x) * float(j % 2 + 2) + float(k % 2))(x)
            np.testing.assert_allclose(np.asarray(out), np.sin(x) * (j % 2 + 2) + k % 2, rtol=1e-6)
        print("ok")
    """))
    env = dict(os.environ, FTRANS_COMPILATION_CACHE_DIR=str(d), FTRANS_COMPILATION_CACHE_MAX_SIZE="40K",
               JAX_PLATFORMS="cpu", PYTHONPATH=str(Path(ftrans.__file__).resolve().parents[1]))
    procs = [subprocess.Popen([sys.executable, str(script), str(k)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err
        assert "Traceback" not in err
    files = [p for p in _files(d) if disk_cache._NAME.fullmatch(p.name)]
    assert files  # something was cached
    for path in files:
        key = bytes.fromhex(path.name)
        assert disk_cache.decode(key, path.read_bytes())  # whole, checked files only
    assert not [p for p in _files(d) if p.name.startswith(disk_cache._TMP_PREFIX)]


def test_created_directory_is_private(cache):
    _fresh_call(_f, X_IN)
    assert cache.is_dir() and (cache.stat().st_mode & 0o077) == 0


# ----------------------------------------------------------------------------
# Background writes: the first result does not wait for serialising and writing


def test_background_write_lands_and_is_loaded(cache):
    """With background writes on, the call returns; the file appears once ``flush`` returns, and loads."""
    disk_cache.background_writes = True
    out = _fresh_call(_f, X_IN)
    assert disk_cache.flush(timeout=60)
    assert disk_cache.stats["writes"] == 1
    assert len(_files(cache)) == 1
    again = _fresh_call(_f, X_IN)
    assert disk_cache.stats["hits"] == 1
    np.testing.assert_array_equal(np.asarray(out), np.asarray(again))


def test_background_write_waits_out_the_first_run_unless_flushed(cache, monkeypatch):
    """The writer leaves a job alone for ``write_delay_s`` (the program's first run has the CPU); ``flush``
    starts it at once."""
    disk_cache.background_writes = True
    monkeypatch.setattr(disk_cache, "write_delay_s", 30.0)
    _fresh_call(_f, X_IN)
    time.sleep(0.3)
    assert disk_cache.stats["writes"] == 0 and not _files(cache)  # still waiting
    t0 = time.monotonic()
    assert disk_cache.flush(timeout=60)
    assert time.monotonic() - t0 < 20  # not the 30 s delay
    assert disk_cache.stats["writes"] == 1 and len(_files(cache)) == 1
    monkeypatch.setattr(disk_cache, "write_delay_s", 0.05)
    _fresh_call(_g, X_IN)
    deadline = time.monotonic() + 60
    while disk_cache.stats["writes"] < 2 and time.monotonic() < deadline:  # lands by itself, no flush
        time.sleep(0.02)
    assert disk_cache.stats["writes"] == 2


def test_load_waits_for_this_process_own_pending_write(cache):
    """A lookup of an entry the writer thread has not finished yet waits for it: a hit, not a second compile."""
    disk_cache.background_writes = True
    release = threading.Event()
    real = disk_cache._store_at

    def slow_store(*a):
        release.wait(30)
        real(*a)

    disk_cache._store_at = slow_store
    try:
        _fresh_call(_g, X_IN)
        assert disk_cache.stats["writes"] == 0  # still queued behind the event
        threading.Timer(0.2, release.set).start()
        _fresh_call(_g, X_IN)
    finally:
        disk_cache._store_at = real
        release.set()
    assert disk_cache.stats["writes"] == 1 and disk_cache.stats["hits"] == 1
    assert X.stats["compiles"] >= 1


def test_background_write_survives_an_immediate_exit(two_processes):
    """A script that exits right after its first call of a program still leaves the entry (flushed at exit):
    the first of ``two_processes`` leaves two entries, one written before the call that ends it."""
    assert two_processes.first[1] == 1  # written before the last call
    assert len(two_processes.files_after_first) == 2


def test_background_write_to_an_unwritable_directory_warns_and_never_raises(tmp_path, caplog):
    """The writer thread reports a bad directory as the foreground write does: a warning, no exception."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    old = ftrans.config.compilation_cache_dir
    ftrans.config.update("compilation_cache_dir", str(blocker / "sub"))
    X._xla_cache.clear()
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            out = _fresh_call(_g, X_IN)
            assert disk_cache.flush(timeout=60)
        np.testing.assert_allclose(np.asarray(out), np.cos(X_IN) + X_IN * X_IN, rtol=1e-6)
        assert any("cannot write" in r.getMessage() for r in caplog.records)
    finally:
        ftrans.config.update("compilation_cache_dir", old)
        X._xla_cache.clear()


def test_clear_cache_frees_programs_still_queued_for_the_disk(cache, monkeypatch):
    """A queued background write holds its executable until written; ``clear_cache`` finishes the queue, so
    the programs it drops are freed at once (JAX's ``test_jit_cache_clear`` counts live executables), and the
    entry is still written."""
    import gc

    monkeypatch.setattr(disk_cache, "background_writes", True)
    monkeypatch.setattr(disk_cache, "write_delay_s", 60.0)  # the write would otherwise wait a minute

    @ftrans.jit
    def f(x, y):
        return x * 3.0 + y

    client = ftrans.devices()[0].client
    gc.collect()
    before = len(client.live_executables())
    f(np.float32(1.0), np.float32(2.0)).block_until_ready()
    gc.collect()
    assert len(client.live_executables()) == before + 1
    assert disk_cache._pending == 1
    X._xla_cache.clear()
    f.clear_cache()
    gc.collect()
    assert disk_cache._pending == 0
    assert len(client.live_executables()) <= before
    assert len(_files(cache)) == 1
