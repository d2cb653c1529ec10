"""``ftrans.profiler``: traces with annotations written where TensorBoard looks, memory profiles."""

from __future__ import annotations

import gzip
import json

import jax
import numpy as np
import pytest

import ftrans
import ftrans.numpy as fjnp
from ftrans import profiler


def _events(log_dir) -> list:
    (run,) = (log_dir / "plugins" / "profile").iterdir()
    assert list(run.glob("*.xplane.pb")), "no xplane file (TensorBoard's profile format)"
    with gzip.open(run / "perfetto_trace.json.gz") as f:
        return json.load(f)["traceEvents"]


def test_trace_records_annotations_and_the_program(tmp_path):
    f = ftrans.jit(lambda x: (x @ x).sum())
    x = fjnp.ones((32, 32))
    f(x).block_until_ready()
    with profiler.trace(tmp_path, create_perfetto_trace=True):
        for step in range(2):
            with profiler.StepTraceAnnotation("train", step_num=step):
                with profiler.TraceAnnotation("inner_span", tag="t"):
                    np.testing.assert_allclose(float(f(x)), 32.0 ** 3)
        profiler.annotate_function(lambda: f(x).block_until_ready(), name="annotated_fn")()
    names = {e.get("name") for e in _events(tmp_path)}
    assert {"train", "inner_span", "annotated_fn"} <= names


def test_start_stop_errors(tmp_path):
    with pytest.raises(RuntimeError, match="no trace"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="already"):
            profiler.start_trace(tmp_path)
    finally:
        profiler.stop_trace()
    assert list((tmp_path / "plugins" / "profile").iterdir())
    with pytest.raises(ValueError, match="create_perfetto_trace"):
        profiler.start_trace(tmp_path, create_perfetto_link=True)


def test_device_memory_profile_is_gzipped_pprof(tmp_path):
    keep = ftrans.device_put(np.ones((256, 256), np.float32))
    data = profiler.device_memory_profile()
    assert data[:2] == b"\x1f\x8b" and len(gzip.decompress(data)) > 0
    profiler.save_device_memory_profile(tmp_path / "mem.prof")
    assert (tmp_path / "mem.prof").read_bytes()[:2] == b"\x1f\x8b"
    del keep


def test_names_match_jax():
    # ProfileData/ProfileEvent/ProfilePlane (reading xplane files) and register_subprocess are not offered
    ours = set(dir(profiler))
    theirs = {n for n in dir(jax.profiler) if not n.startswith("_")}
    # (jax 0.12's ProfileSession, ProfileLine and export_profile_data read and write profile data too)
    assert theirs - ours <= {"ProfileData", "ProfileEvent", "ProfilePlane", "register_subprocess",
                             "ProfileSession", "ProfileLine", "export_profile_data"}
