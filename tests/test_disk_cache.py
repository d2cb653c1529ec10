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
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ftrans
import ftrans.numpy as jnp
from ftrans.core.config import Config
from ftrans.lowering import compat, disk_cache
from ftrans.lowering import executable as X

LOGGER = "ftrans.lowering.disk_cache"


@pytest.fixture
def cache(tmp_path):
    """The cache on, in a fresh directory, with zeroed counters and no in-memory executables."""
    old = ftrans.config.compilation_cache_dir
    d = tmp_path / "xla-cache"
    ftrans.config.update("compilation_cache_dir", str(d))
    X._xla_cache.clear()
    saved = dict(disk_cache.stats)
    for k in disk_cache.stats:
        disk_cache.stats[k] = 0
    yield d
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
    client = compat.backend("cpu")
    return client, client.devices()[0]


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


def test_cross_process_hit(tmp_path):
    """The point of the cache: a second process loads what the first compiled."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import ftrans, ftrans.numpy as jnp
        from ftrans.lowering import disk_cache
        out = ftrans.jit(lambda x: jnp.sin(x) + x * 3.0)(np.arange(5, dtype=np.float32))
        print(disk_cache.stats["hits"], disk_cache.stats["writes"], np.asarray(out).tolist())
    """))
    env = dict(os.environ, FTRANS_COMPILATION_CACHE_DIR=str(tmp_path / "c"), JAX_PLATFORMS="cpu",
               PYTHONPATH=str(Path(ftrans.__file__).resolve().parents[1]))

    def run():
        p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        hits, writes, vals = p.stdout.strip().split(" ", 2)
        return int(hits), int(writes), vals

    first = run()
    second = run()
    assert first[:2] == (0, 1)
    assert second[:2] == (1, 0)
    assert first[2] == second[2]
    assert len(list((tmp_path / "c").iterdir())) == 1


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
    monkeypatch.delenv("FTRANS_COMPILATION_CACHE_DIR")
    assert Config().compilation_cache_dir is None


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
    text = next(k[0] for k in X._xla_cache)
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
