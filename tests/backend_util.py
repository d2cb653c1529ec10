"""What the suite needs to know about the machine it runs on (the CPU in CI, a GPU on a lent machine).

On the CPU (CI) ``tests/conftest.py`` gives eight host devices and every helper here is a no-op.
On a GPU machine (``JAX_PLATFORMS=cuda,cpu``) the default backend is the GPU, with one device, and
the host platform stays available beside it:

- ``needs_devices(n)``: a marker (registered in ``tests/conftest.py``) that skips a test, or a whole
  module through ``pytestmark``, unless the default backend has ``n`` devices.
- ``cpu_only(reason)``: a marker for what JAX itself has on the CPU only (LAPACK-only
  factorizations, LAPACK FFI targets called by name, integer convolutions cuDNN cannot do).
- ``host_oracle()``: a context in which jax computes on the CPU device. ftrans's eager operations on
  default-device arrays run NumPy on the host (docs/differences.md, "Arrays"); their bit-for-bit
  oracle is XLA on the CPU, which is what jax's eager operations are on the CPU, but not on a GPU.
  Tests that compare eager ftrans with jax bit for bit compute jax's side inside it.
"""

from __future__ import annotations

import contextlib
import functools
import os

import jax
import pytest


@functools.cache
def default_backend() -> str:
    """jax's default backend; ``FTRANS_TEST_AS_BACKEND=gpu`` makes a CPU run take the GPU branches of
    these helpers (to check them where no GPU is)."""
    return os.environ.get("FTRANS_TEST_AS_BACKEND") or jax.default_backend()


def on_cpu() -> bool:
    """Whether the default backend (jax's and ftrans's) is the CPU."""
    return default_backend() == "cpu"


def needs_devices(n: int):
    """Skip unless the default backend has at least ``n`` devices (``pytest.mark.needs_devices(n)``)."""
    return pytest.mark.needs_devices(n)


def cpu_only(reason: str):
    """Skip on a non-CPU default backend: ``reason`` says what JAX has on the CPU only."""
    return pytest.mark.cpu_only(reason)


@functools.cache
def host_device():
    return jax.devices("cpu")[0]


@contextlib.contextmanager
def host_oracle():
    """A context in which jax, and ftrans's compiled programs, run on the CPU device: the oracle of
    ftrans's eager host arithmetic (a no-op when the CPU is the default backend)."""
    if on_cpu():
        yield
        return
    import ftrans

    with jax.default_device(host_device()), ftrans.default_device(ftrans.devices("cpu")[0]):
        yield


def require_cpu(reason: str) -> None:
    """Inside a test: skip it unless the default backend is the CPU (``cpu_only`` for one case of many)."""
    if not on_cpu():
        pytest.skip(f"CPU only: {reason}")


def assert_same_samples(ours, theirs, ulps: int = 8) -> None:
    """Random samples drawn from the same key by ftrans and by jax, both on the default device. On the CPU:
    bit for bit. On a GPU: to ``ulps`` units in the last place (of the largest value, and relative):
    the random bits are the same, but ftrans's sampler programs and jax's differ in structure, and
    XLA's GPU compiler fuses and rounds them differently (it allows excess precision: an 8-bit float
    sampler's intermediate values may stay in float32), so their floats may differ in the last bits."""
    import ml_dtypes
    import numpy as np

    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    if on_cpu() or a.dtype.kind not in "fc" and "float" not in a.dtype.name:
        np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))
        return
    eps = float(ml_dtypes.finfo(a.dtype).eps)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    wa, wb = a.astype(wide), b.astype(wide)
    top = float(np.abs(wb[np.isfinite(wb)]).max(initial=1.0))
    np.testing.assert_allclose(wa, wb, rtol=ulps * eps, atol=ulps * eps * top, equal_nan=True)


def import_jax_module_without_absl(name: str):
    """Import ``name`` (one of jax's modules that imports absl at import time only for a logger or a flag,
    as ``jax.experimental.roofline`` and ``jax.experimental.source_mapper`` do) where absl is not
    installed: a stand-in ``absl`` with ``logging.warning`` and ``flags.FLAGS`` is in ``sys.modules``
    for that import alone, so no other test sees it."""
    import importlib
    import logging
    import sys
    import types

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] != "absl":
            raise
    absl = types.ModuleType("absl")
    absl.logging = types.ModuleType("absl.logging")
    absl.logging.warning = logging.getLogger("absl").warning
    absl.flags = types.ModuleType("absl.flags")
    absl.flags.FLAGS = types.SimpleNamespace()
    stand_ins = {"absl": absl, "absl.logging": absl.logging, "absl.flags": absl.flags}
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == name or k.startswith(name + ".")}
    sys.modules.update(stand_ins)
    try:
        return importlib.import_module(name)
    except BaseException:
        sys.modules.update(saved)
        raise
    finally:
        for k in stand_ins:
            sys.modules.pop(k, None)


def default_codegen_options() -> dict:
    """``compiler_options`` that give one jitted program XLA:CPU's default code generation where the suite
    compiles with the loop emitters (tests/conftest.py, jaxlib 0.10): for a test that pins what the
    default code rounds (an optimizer's evaluation count).  Elsewhere, none."""
    if "--xla_cpu_use_fusion_emitters=false" in os.environ.get("XLA_FLAGS", ""):
        return {"xla_cpu_use_fusion_emitters": True}
    return {}
