"""Test set-up: eight host devices for multi-device tests, a private compilation cache, and
hypothesis profiles.

XLA_FLAGS must be set before any XLA backend starts, so it is set here, at
import time of the first thing pytest loads.

The on-disk compilation cache is on by default; the tests must never write into
the user's real cache (``~/.cache/ftrans``), and tests that count compiles must
not find programs another run left there.  So each test process (each
pytest-xdist worker too) gets its own empty temporary cache directory, set
before ftrans is imported and removed when the process ends.
"""

import atexit
import os
import shutil
import sys
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
_flags = os.environ["XLA_FLAGS"]
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = _flags + " --xla_force_host_platform_device_count=8"
# The jax oracle compiles at LLVM level 1, the level ftrans itself compiles at on the CPU
# (lowering/executable.py: DEFAULT_COMPILER_OPTIONS), instead of XLA's default 2: the suite spends
# much of its time compiling jax's eager oracles, and level 1 cuts that by a tenth of the suite's CPU
# time.  Bit-exact comparisons still hold (ftrans at level 1 matched jax at level 2 bit for bit);
# level 0 would not (it changes float32 rounding in the random samplers).  ftrans's own programs set
# the level per compile, so this flag does not change what ftrans is tested with.
if "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_backend_optimization_level=1"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

_TEST_CACHE_DIR = tempfile.mkdtemp(prefix="ftrans-test-compilation-cache-")
atexit.register(shutil.rmtree, _TEST_CACHE_DIR, ignore_errors=True)
os.environ["FTRANS_COMPILATION_CACHE_DIR"] = _TEST_CACHE_DIR
os.environ.pop("FTRANS_CACHE_DIR", None)
if "ftrans.core.config" in sys.modules:  # imported already (a plugin): point the live config too
    sys.modules["ftrans.core.config"].config.update("compilation_cache_dir", _TEST_CACHE_DIR)

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", max_examples=6, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "full", max_examples=300, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
