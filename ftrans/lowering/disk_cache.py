"""The on-disk cache of compiled executables (on by default; ``docs/compilation_cache.md``).

XLA compilation dominates the first call of a jitted function; a process that
starts often (tests, scripts, notebooks) pays it every time.  Every executable
compiled by ``executable.compile_text`` is also written to
``config.compilation_cache_dir`` (by default ``$XDG_CACHE_HOME/ftrans/compilation``
or ``~/.cache/ftrans/compilation``), and a later process that lowers the same
module for the same backend loads it instead of compiling.  It is turned off
with ``config.enable_compilation_cache = False`` (``FTRANS_ENABLE_COMPILATION_CACHE=0``)
or an empty directory, and bounded by ``config.compilation_cache_max_size``
bytes: after a write that takes the directory past the bound, the least
recently used entries (oldest modification time; a hit touches its file) are
removed.

One file per executable, named by the hex of its key.  The key is a sha256 over
the module text (compiler options included), the backend's identity (platform,
platform version, jaxlib version), ftrans's version, the kind and number of
devices, and ``FORMAT_VERSION``: anything that could make a compiled program
invalid changes the name, so a stale file is never even opened.

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

Files are written to a temporary file in the same directory and
``os.replace``d into place, so a reader sees either no file or a whole one,
whatever races happen; a file a crash left short fails its checks.  Every
field is checked on load; a file that fails a check (or that PJRT cannot
deserialize) is logged as a warning, removed, and treated as a miss.  A
directory that cannot be read or written is warned about once and then left
alone for the rest of the process, so the cache can only ever cost a compile,
never an error.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import logging
import os
import re
import struct
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftrans.core.config import config
from ftrans.core.version import __version__ as FTRANS_VERSION
from ftrans.lowering import compat

__all__ = ["FORMAT_VERSION", "MAGIC", "HEADER", "stats", "cache_dir", "key_for", "path_for", "load",
           "store", "store_soon", "flush", "clear", "evict", "size_of"]

log = logging.getLogger(__name__)

MAGIC = b"FTRXLA\r\n"  # the CR/LF pair catches files mangled by text-mode transfers
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sIIQ32s32s")  # magic, version, reserved, length, payload sha256, key
_TMP_PREFIX = ".ftrans-tmp-"
_NAME = re.compile(r"[0-9a-f]{64}")

stats: dict[str, int] = {"hits": 0, "misses": 0, "writes": 0, "corrupt": 0, "errors": 0, "evictions": 0}
_stats_lock = threading.Lock()
_STALE_TMP_S = 3600.0  # a temporary file this old was left by a writer that died; eviction removes it
_RESCAN_EVERY = 64  # writes between rescans of the directory's size (other processes write too)

# Per-process state of each directory: directories that failed a write (not tried again), the
# warnings already given, and the running estimate of each directory's size in bytes.
_dir_lock = threading.Lock()
_unwritable: set[str] = set()
_warned: set[tuple[str, str]] = set()
_size_estimate: dict[str, list[int]] = {}  # dir -> [bytes, writes since the last scan]


def _warn_once(directory: Path, what: str, msg: str, *args: Any, level: int = logging.WARNING) -> None:
    key = (str(directory), what)
    with _dir_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.log(level, msg, *args)


_EVENTS = {"hits": "/jax/compilation_cache/cache_hits", "misses": "/jax/compilation_cache/cache_misses"}


def _count(name: str) -> None:
    with _stats_lock:
        stats[name] += 1
    event = _EVENTS.get(name)
    if event is not None:  # JAX's monitoring events for the persistent cache
        from ftrans.monitoring import record_event

        record_event(event)


def cache_dir() -> Path | None:
    """The configured directory, or None when the cache is off (read at each call: it may change)."""
    if not config.enable_compilation_cache:
        return None
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
        f"ftrans-{FTRANS_VERSION}",
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
    if _pending_paths and str(path) in _pending_paths:
        flush()  # this process is still writing this very entry (on the background writer)
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # a plain miss; ``store`` reports a bad directory
        _count("misses")
        return None
    except OSError as e:
        _warn_once(directory, "read", "ftrans compilation cache: cannot read %s (%s); compiling instead", path, e)
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
    _touch(path)
    _count("hits")
    return exe


def _touch(path: Path) -> None:
    """Mark an entry as just used (its mtime orders eviction); best effort."""
    try:
        os.utime(path)
    except OSError:
        pass


def store(client: Any, text: str, devices: list, executable: Any, directory: Path | None = None) -> None:
    """Write ``executable`` to the cache atomically; failures are logged, never raised.

    ``directory`` defaults to the configured one, read now.
    """
    directory = directory if directory is not None else cache_dir()
    if directory is None or str(directory) in _unwritable:
        return
    _store_at(client, devices, executable, directory, key_for(client, text, devices))


def _store_at(client: Any, devices: list, executable: Any, directory: Path, key: bytes) -> None:
    try:
        payload = compat.serialize(client, executable)
    except Exception as e:  # some backends cannot serialize; the in-memory cache still works
        # Some programs never serialize (XLA's CPU sort with a custom comparator, for one): say so once per
        # reason, not at every such compile.
        # XLA's own "not serializable" (UNIMPLEMENTED) is a property of the program, nothing the user can act
        # on, so it is logged at DEBUG (JAX's cache is silent there too); anything else is a WARNING.
        inherent = "UNIMPLEMENTED" in str(e) and "serializ" in str(e)
        _warn_once(directory, f"serialize {type(e).__name__}: {e}"[:300],
                   "ftrans compilation cache: cannot serialize the executable (%s: %s); not cached (said once "
                   "per reason)", type(e).__name__, e, level=logging.DEBUG if inherent else logging.WARNING)
        _count("errors")
        return
    data = encode(key, bytes(payload))
    try:
        _write_atomic(directory, key.hex(), data)
    except OSError as e:
        with _dir_lock:
            _unwritable.add(str(directory))
        _warn_once(directory, "write", "ftrans compilation cache: cannot write to %s (%s); not caching "
                   "executables there for the rest of this process", directory, e)
        _count("errors")
        return
    _count("writes")
    _account(directory, key.hex(), len(data))


# Background writes. Serialising an executable and writing it took 7-55 ms on first_result.py's
# programs (49 ms of it serialising the 60-layer gradient): time the first call need not wait for,
# since the result does not depend on it. ``compiled`` hands the write to one writer thread; a
# process that exits right after its first call still writes, because ``flush`` runs at exit.
# Tests that count writes set ``background_writes = False`` or call ``flush`` first.
background_writes = True
# The writer starts a job only once it is this many seconds old (``flush`` cuts the wait short): the
# program's first run follows its compile at once, and serialising the executable beside it made the
# empty-cache first call of first_result.py's 60-layer gradient cost ~21 ms more CPU (12 rounds,
# benchmarks/README.md, "first_result.py"). A process killed within it simply has no entry.
write_delay_s = 0.5
_hurry = 0  # ``flush`` calls waiting: the writer does not delay while there are any
_jobs: collections.deque = collections.deque()
_jobs_cv = threading.Condition()
_pending = 0
_pending_paths: collections.Counter = collections.Counter()  # entries queued or being written
_writer: threading.Thread | None = None


def store_soon(client: Any, text: str, devices: list, executable: Any) -> None:
    """``store``, on the writer thread when ``background_writes`` is on (the directory is read now)."""
    global _pending, _writer
    directory = cache_dir()
    if directory is None or str(directory) in _unwritable:
        return
    if not background_writes:
        store(client, text, devices, executable, directory)
        return
    key = key_for(client, text, devices)
    path = str(directory / key.hex())
    with _jobs_cv:
        _jobs.append((time.monotonic(), client, list(devices), executable, directory, key, path))
        _pending += 1
        _pending_paths[path] += 1
        if _writer is None or not _writer.is_alive():
            _writer = threading.Thread(target=_write_jobs, name="ftrans-cache-writer", daemon=True)
            _writer.start()
        _jobs_cv.notify()


def _write_jobs() -> None:
    global _pending
    while True:
        with _jobs_cv:
            while not _jobs:
                _jobs_cv.wait()
            due = _jobs[0][0] + write_delay_s  # only this thread removes jobs: the first stays first
            while not _hurry and (left := due - time.monotonic()) > 0:
                _jobs_cv.wait(left)
            job = _jobs.popleft()
        _, client, devices, executable, directory, key, path = job
        try:
            if str(directory) not in _unwritable:
                _store_at(client, devices, executable, directory, key)
        except Exception as e:  # ``_store_at`` logs its own failures; this is a last guard for the thread
            log.warning("ftrans compilation cache: background write failed (%s: %s)", type(e).__name__, e)
        finally:
            del job, executable, client  # a freed program must not stay alive here until the next job
            with _jobs_cv:
                _pending -= 1
                _pending_paths[path] -= 1
                if _pending_paths[path] <= 0:
                    del _pending_paths[path]
                _jobs_cv.notify_all()


def flush(timeout: float | None = None) -> bool:
    """Wait until every background write has finished (queued ones start at once); False if ``timeout``
    seconds passed first."""
    global _hurry
    with _jobs_cv:
        _hurry += 1
        _jobs_cv.notify_all()
        try:
            return _jobs_cv.wait_for(lambda: _pending == 0, timeout)
        finally:
            _hurry -= 1


def _forget_writer_in_child() -> None:
    """A forked child has no writer thread and must not wait for its parent's jobs."""
    global _pending, _writer, _jobs_cv, _hurry
    _jobs.clear()
    _pending = 0
    _hurry = 0
    _pending_paths.clear()
    _writer = None
    _jobs_cv = threading.Condition()


atexit.register(flush)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_writer_in_child)


def size_of(directory: Path) -> int:
    """Total bytes of the cache's entries in ``directory``."""
    return sum(size for _, size, _ in _entries(directory))


def _entries(directory: Path) -> list[tuple[float, int, Path]]:
    """(mtime, size, path) of each cache entry; stale temporary files are removed on the way."""
    out = []
    now = time.time()
    try:
        it = list(os.scandir(directory))
    except OSError:
        return out
    for e in it:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if e.name.startswith(_TMP_PREFIX):
            if now - st.st_mtime > _STALE_TMP_S:
                _discard(Path(e.path))
            continue
        if _NAME.fullmatch(e.name) and e.is_file(follow_symlinks=False):
            out.append((st.st_mtime, st.st_size, Path(e.path)))
    return out


def _account(directory: Path, name: str, nbytes: int) -> None:
    """Add a write to the directory's size estimate; evict when it goes past the bound."""
    limit = config.compilation_cache_max_size
    if limit is None or limit < 0:
        return
    d = str(directory)
    with _dir_lock:
        est = _size_estimate.get(d)
        if est is not None:
            est[0] += nbytes
            est[1] += 1
            if est[0] <= limit and est[1] < _RESCAN_EVERY:
                return
    evict(directory, limit, keep=name)


def evict(directory: Path | str | None = None, max_size: int | None = None, keep: str | None = None) -> int:
    """Remove least recently used entries until ``directory`` holds at most ``max_size`` bytes.

    Defaults: the configured directory and bound.  ``keep`` names an entry never
    removed (the one just written).  Returns how many entries were removed.
    Safe against other processes evicting or writing at the same time.
    """
    directory = Path(directory).expanduser() if directory is not None else cache_dir()
    if directory is None:
        return 0
    limit = config.compilation_cache_max_size if max_size is None else max_size
    entries = _entries(directory)
    total = sum(size for _, size, _ in entries)
    removed = 0
    if limit is not None and limit >= 0 and total > limit:
        entries.sort(key=lambda e: (e[0], e[2].name))
        for _mtime, size, path in entries:
            if total <= limit:
                break
            if path.name == keep:
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # another process evicted it first
            except OSError:
                continue
            total -= size
            removed += 1
        if removed:
            _count_n("evictions", removed)
    with _dir_lock:
        _size_estimate[str(directory)] = [total, 0]
    return removed


def _count_n(name: str, n: int) -> None:
    with _stats_lock:
        stats[name] += n


def _write_atomic(directory: Path, name: str, data: bytes) -> None:
    """Temp file in the same directory, then rename: readers see no file or a whole one.

    No fsync: it would cost the first call milliseconds, and a file a crash
    leaves short or empty fails the length and checksum checks on load (a miss).
    """
    # Only its owner may write executables there (loading one runs its code): 0700 when created here.
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        _discard(Path(tmp))
        raise


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def reset() -> None:
    """Forget this process's cache state (the once-per-directory warnings): the files stay."""
    _warned.clear()


def clear(path: str | os.PathLike | None = None) -> int:
    """Delete the cache's files in ``path`` (default: the configured directory); returns how many.

    Only files the cache wrote are touched (64-hex-digit names and leftover
    temporary files), so pointing the cache at a shared directory is safe.
    """
    flush()  # a write still in flight would otherwise land after the clear
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
    with _dir_lock:
        _size_estimate.pop(str(directory), None)
    return removed
