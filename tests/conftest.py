"""Test set-up: eight host devices for multi-device tests, XLA options that compile quickly, a private
compilation cache, hypothesis profiles, and the garbage collector kept off long-lived objects.

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
# jaxlib 0.10's XLA:CPU still has its older loop emitters beside the fusion emitters it uses by default.
# They compile the suite's many small programs (both libraries': the differential tests compare two
# programs XLA compiled alike) a quarter to a third faster: the whole suite's summed test time 4,495 s ->
# 3,300 s.  A few tests pin what XLA's default code computes at edges the two emitters round differently
# (float4 conversions, an optimizer's iteration count); they carry the ``xla_default_codegen`` marker and
# run in a subprocess with XLA's defaults (pytest_pyfunc_call below).  Later jaxlibs removed the flag (XLA
# aborts on an unknown flag), so it is set for 0.10 alone, and never over a choice the caller made.
#
# With them, both libraries compile at LLVM level 0 instead of 1 (ftrans's own default on the CPU steps
# aside for a level XLA_FLAGS names: lowering/executable.py): a third less time per compile, and the suite
# is about half compiles.  Two programs compiled alike still agree bit for bit, so the differential tests
# hold; the tests that pin what optimised code computes (ftrans's host-side NumPy results against compiled
# ones, a dot algorithm's rounding, results that must not depend on the batch) carry the ``xla_optimized``
# marker and run in a subprocess at level 1.  On jaxlib 0.11 and later the suite compiles at level 1 (the
# level ftrans ships), where XLA's default for jax's programs would be 2.
_LOOP_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
_LEVEL_0, _LEVEL_1 = "--xla_backend_optimization_level=0", "--xla_backend_optimization_level=1"
try:
    from importlib.metadata import version as _dist_version

    _jaxlib_minor = tuple(int(p) for p in _dist_version("jaxlib").split(".")[:2])
except Exception:  # noqa: BLE001 - no jaxlib metadata: leave XLA's defaults
    _jaxlib_minor = None
if _jaxlib_minor == (0, 10) and "xla_cpu_use_fusion_emitters" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " " + _LOOP_EMITTERS
    os.environ["FTRANS_TESTS_LOOP_EMITTERS"] = "1"  # (pytest-xdist's workers inherit both)
    if "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
        os.environ["XLA_FLAGS"] += " " + _LEVEL_0
        os.environ["FTRANS_TESTS_LEVEL_0"] = "1"
if "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " " + _LEVEL_1
_SUITE_SET_LOOP_EMITTERS = os.environ.get("FTRANS_TESTS_LOOP_EMITTERS") == "1"
_SUITE_SET_LEVEL_0 = os.environ.get("FTRANS_TESTS_LEVEL_0") == "1"
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


# ---------------------------------------------------------------- the cyclic garbage collector
# A full collection walks every object the process holds: jax, ftrans, NumPy and the collected test items are
# over half a million, and a worker's caches of compiled programs double that.  The collector ran 30-odd full
# collections while a worker imported and collected, 7 s a worker, and a tenth of a second each afterwards;
# the tests that call gc.collect() themselves (the leak checker, the cache-lifetime tests) took seconds each.
# So the collector is off while the test modules import, and what exists after collection, or survives a
# collection every few hundred tests, is frozen (gc.freeze): out of the collector's sight, as long-lived as
# it looks.  A test's own objects are created after the last freeze, so a test that collects and checks what
# was freed sees them as before.  (A frozen object that later joins a garbage cycle is not freed: caches the
# tests empty hold few cycles.)
# Eager library programs that are expensive on the host compile in a background thread once they have cost
# 50 ms (core/eager_programs.py). In the suite such a compile, started by one test, would finish during a later
# one and move its compile counters or the bits it compares; so the suite keeps them on the host, and the tests
# of the switch (tests/test_eager_programs_compiled.py, test_differences.py) set the threshold themselves.
os.environ.setdefault("FTRANS_EAGER_COMPILE_AFTER", "off")

import gc  # noqa: E402

_REFREEZE_EVERY = 250  # tests
_tests_since_freeze = 0
if os.environ.get("FTRANS_TESTS_GC_FREEZE", "1") == "1":  # (=0: the collector as Python sets it)
    gc.disable()


def _collect_and_freeze():
    global _tests_since_freeze
    gc.collect()
    gc.freeze()
    _tests_since_freeze = 0


def pytest_runtestloop(session):
    """(Collection is over: in a worker, in a run without workers, and in pytest-xdist's controller too.)"""
    if os.environ.get("FTRANS_TESTS_GC_FREEZE", "1") == "1" and not gc.isenabled():
        gc.enable()
        _collect_and_freeze()


def pytest_runtest_logfinish(nodeid, location):
    global _tests_since_freeze
    _tests_since_freeze += 1
    if _tests_since_freeze >= _REFREEZE_EVERY and gc.isenabled():
        _collect_and_freeze()


# ---------------------------------------------------------------- the machine the suite runs on
# tests/backend_util.py has the helpers; on the CPU (CI) none of this skips or changes anything.
import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_devices(n): skip unless the default backend has at least n devices (a GPU "
        "machine has one; on the CPU tests/conftest.py gives eight)")
    config.addinivalue_line(
        "markers", "cpu_only(reason): skip when the default backend is not the CPU (what JAX itself "
        "has on the CPU only)")
    config.addinivalue_line(
        "markers", "jax_default_precision: on a GPU, run with jax_default_matmul_precision at JAX's "
        "default (None) instead of the suite's 'highest' (tests of the option itself)")
    config.addinivalue_line(
        "markers", "xla_default_codegen: the test pins what XLA:CPU's default code generation computes; "
        "where the suite compiles with the loop emitters (jaxlib 0.10), it runs in a subprocess with XLA's "
        "defaults")
    config.addinivalue_line(
        "markers", "xla_optimized: the test pins what XLA:CPU computes with LLVM's optimisations on (level 1, "
        "ftrans's default); where the suite compiles at level 0 (jaxlib 0.10), it runs in a subprocess at "
        "level 1")


def _child_xla_flags(item):
    """The XLA_FLAGS a marked test runs under in a child pytest, or None where this process's flags do: XLA's
    default emitters for ``xla_default_codegen``, level 1 for it and for ``xla_optimized``."""
    default_codegen = item.get_closest_marker("xla_default_codegen") is not None
    optimized = default_codegen or item.get_closest_marker("xla_optimized") is not None
    flags = os.environ["XLA_FLAGS"]
    if default_codegen and _SUITE_SET_LOOP_EMITTERS:
        flags = flags.replace(_LOOP_EMITTERS, "--xla_cpu_use_fusion_emitters=true")
    if optimized and _SUITE_SET_LEVEL_0:
        flags = flags.replace(_LEVEL_0, _LEVEL_1)
    return None if flags == os.environ["XLA_FLAGS"] else flags


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``xla_default_codegen`` or ``xla_optimized``, where this process compiles otherwise
    (the loop emitters, level 0): the same test in a child pytest whose XLA_FLAGS name what it pins (so its
    conftest adds nothing)."""
    flags = _child_xla_flags(pyfuncitem)
    if flags is None:
        return None
    import subprocess

    env = dict(os.environ)
    env["XLA_FLAGS"] = flags
    for name in ("FTRANS_TESTS_LOOP_EMITTERS", "FTRANS_TESTS_LEVEL_0", "PYTEST_XDIST_WORKER",
                 "PYTEST_XDIST_WORKER_COUNT"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "--durations=0",
           "--no-header", "-W", "ignore::DeprecationWarning", pyfuncitem.nodeid]
    done = subprocess.run(cmd, cwd=str(pyfuncitem.config.rootpath), env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        pytest.fail(f"under XLA_FLAGS={flags!r} (a child pytest):\n{done.stdout[-6000:]}"
                    f"{done.stderr[-2000:]}", pytrace=False)
    return True


def pytest_runtest_setup(item):
    marks = list(item.iter_markers("needs_devices"))
    if marks:
        import jax

        n = max(m.args[0] for m in marks)
        have = jax.local_device_count()
        if have < n:
            pytest.skip(f"needs {n} devices of the default backend ({jax.default_backend()} has {have})")
    cpu_mark = item.get_closest_marker("cpu_only")
    if cpu_mark is not None:
        from tests.backend_util import default_backend

        if default_backend() != "cpu":
            pytest.skip(f"CPU only: {cpu_mark.args[0] if cpu_mark.args else 'as in JAX'}")


def _set_matmul_precision(value):
    import jax

    import ftrans

    if jax.config.jax_default_matmul_precision != value:
        jax.config.update("jax_default_matmul_precision", value)
    if ftrans.config.default_matmul_precision != value:
        ftrans.config.update("jax_default_matmul_precision", value)


@pytest.fixture(autouse=True)
def _full_float32_matmuls_on_a_gpu(request):
    """On a GPU, XLA computes float32 matrix products and convolutions in TF32 unless told otherwise,
    in jax's programs and ftrans's alike; two programs that order a contraction differently then
    differ far beyond float32 tolerances, and ftrans's eager host products (NumPy, full float32)
    differ from jax's GPU ones.  The suite compares at float32 tolerances, so on a GPU every test
    runs with ``jax_default_matmul_precision="highest"`` in both libraries (docs/differences.md,
    "Running on a GPU"), except the tests of the option itself, marked ``jax_default_precision``,
    which start from JAX's default (None).  On the CPU nothing changes."""
    from tests.backend_util import default_backend

    if default_backend() != "cpu":
        _set_matmul_precision(None if request.node.get_closest_marker("jax_default_precision") else "highest")
    yield
