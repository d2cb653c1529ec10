"""The opt-in on-disk cache of compiled executables (``config.compilation_cache_dir``).

XLA compilation dominates the first call of a jitted function; a process that
starts often (tests, scripts, notebooks) pays it every time.  When
``ftrans.config.compilation_cache_dir`` names a directory, every executable
compiled by ``executable.compile_text`` is also written there, and a later
process that lowers the same module text for the same backend loads it instead
of compiling.

One file per executable, named by the hex of its key.  The key is a sha256 over
the module text, the backend's identity (platform, platform version, jaxlib
version), the kind and number of devices, and ``FORMAT_VERSION``: anything that
could make a compiled program invalid changes the name, so a stale file is
never even opened.

A file is a fixed header followed by the payload (the bytes PJRT's own
serializer produced; no pickle anywhere)::

    offset  size  field
    0       8     MAGIC (b"FTRXLA\\r\\n")
    8       4     format version (little-endian uint32)
    12      4     reserved, zero
    16      8     payload length in bytes (uint64)
    24      32    sha256 of the payload
    56      32    the key (raw sha256 digest; also the file's name, in hex)
    88      ...   payload

Files are written to a temporary file in the same directory, fsynced and
``os.replace``d into place, so a reader sees either no file or a whole one,
whatever crashes or races happen.  Every field is checked on load; a file that
fails a check (or that PJRT cannot deserialize) is logged as a warning,
removed, and treated as a miss, so the cache can only ever cost a compile,
never an error.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftrans.core.config import config
from ftrans.lowering import compat

__all__ = ["FORMAT_VERSION", "MAGIC", "HEADER", "stats", "cache_dir", "key_for", "path_for", "load",
           "store", "clear"]

log = logging.getLogger(__name__)

MAGIC = b"FTRXLA\r\n"  # the CR/LF pair catches files mangled by text-mode transfers
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIIQ32s32s")  # magic, version, reserved, length, payload sha256, key
_TMP_PREFIX = ".ftrans-tmp-"
_NAME = re.compile(r"[0-9a-f]{64}")

stats: dict[str, int] = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "errors": 0}
_stats_lock = threading.Lock()


def _count(name: str) -> None:
    with _stats_lock:
        stats[name] += 1


def cache_dir() -> Path | None:
    """The configured directory, or None when the cache is off (read at each call: it may change)."""
    d = config.compilation_cache_dir
    if d is None:
        return None
    d = os.fspath(d)
    if not d:
        return None
    return Path(d).expanduser()


def key_for(client: Any, text: str, devices: Sequence[Any]) -> bytes:
    """The raw sha256 key of a module compiled by ``client`` for ``devices``.

    Each field is length-prefixed so no two different field tuples hash the same bytes.
    """
    fields = [
        f"ftrans-xla-cache-v{FORMAT_VERSION}",
        compat.backend_version(client),
        str(len(devices)),
        *(str(getattr(d, "device_kind", "")) for d in devices),
        text,
    ]
    h = hashlib.sha256()
    for f in fields:
        b = f.encode()
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return h.digest()


def path_for(client: Any, text: str, devices: Sequence[Any], directory: Path | None = None) -> Path | None:
    """Where the executable for this module would be cached (None when the cache is off)."""
    directory = directory if directory is not None else cache_dir()
    if directory is None:
        return None
    return directory / key_for(client, text, devices).hex()


def encode(key: bytes, payload: bytes) -> bytes:
    """Header plus payload: the exact bytes of a cache file."""
    return HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(payload), hashlib.sha256(payload).digest(), key) + payload


def decode(key: bytes, data: bytes) -> bytes:
    """The payload of a cache file's bytes; raises ValueError naming the first check that fails."""
    if len(data) < HEADER.size:
        raise ValueError(f"truncated header ({len(data)} bytes, need {HEADER.size})")
    magic, version, _reserved, length, digest, file_key = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"bad magic {magic!r}")
    if version != FORMAT_VERSION:
        raise ValueError(f"format version {version}, expected {FORMAT_VERSION}")
    if file_key != key:
        raise ValueError("key in header does not match the file's module")
    payload = data[HEADER.size:]
    if len(payload) != length:
        raise ValueError(f"payload is {len(payload)} bytes, header says {length}")
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("payload checksum mismatch")
    return payload


def load(client: Any, text: str, devices: list) -> Any:
    """The cached executable for ``text`` on ``devices``, or None (cache off, miss, or a bad file)."""
    directory = cache_dir()
    if directory is None:
        return None
    key = key_for(client, text, devices)
    path = directory / key.hex()
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # a plain miss; ``store`` reports a bad directory
        _count("misses")
        return None
    except OSError as e:
        log.warning("ftrans compilation cache: cannot read %s (%s); compiling instead", path, e)
        _count("errors")
        _count("misses")
        return None
    try:
        payload = decode(key, data)
    except ValueError as e:
        log.warning("ftrans compilation cache: ignoring and removing corrupt entry %s: %s", path, e)
        _discard(path)
        _count("corrupt")
        _count("misses")
        return None
    try:
        exe = compat.deserialize(client, payload, devices)
    except Exception as e:  # PJRT's error types vary by release; any failure is a miss
        log.warning("ftrans compilation cache: cannot deserialize %s (%s: %s); removing it and compiling",
                    path, type(e).__name__, e)
        _discard(path)
        _count("errors")
        _count("misses")
        return None
    _count("hits")
    return exe


def store(client: Any, text: str, devices: list, executable: Any) -> None:
    """Write ``executable`` to the cache atomically; failures are logged, never raised."""
    directory = cache_dir()
    if directory is None:
        return
    key = key_for(client, text, devices)
    try:
        payload = compat.serialize(client, executable)
    except Exception as e:  # some backends cannot serialize; the in-memory cache still works
        log.warning("ftrans compilation cache: cannot serialize the executable (%s: %s); not cached",
                    type(e).__name__, e)
        _count("errors")
        return
    try:
        _write_atomic(directory, key.hex(), encode(key, bytes(payload)))
    except OSError as e:
        log.warning("ftrans compilation cache: cannot write to %s (%s); not cached", directory, e)
        _count("errors")
        return
    _count("writes")


def _write_atomic(directory: Path, name: str, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename: readers see no file or a whole one."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / name)
    except BaseException:
        _discard(Path(tmp))
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable too (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def clear(path: str | os.PathLike | None = None) -> int:
    """Delete the cache's files in ``path`` (default: the configured directory); returns how many.

    Only files the cache wrote are touched (64-hex-digit names and leftover
    temporary files), so pointing the cache at a shared directory is safe.
    """
    directory = Path(path).expanduser() if path is not None else cache_dir()
    if directory is None or not directory.is_dir():
        return 0
    removed = 0
    for entry in directory.iterdir():
        if not (_NAME.fullmatch(entry.name) or entry.name.startswith(_TMP_PREFIX)):
            continue
        if not entry.is_file():
            continue
        try:
            entry.unlink()
        except FileNotFoundError:
            continue
        removed += 1
    return removed
