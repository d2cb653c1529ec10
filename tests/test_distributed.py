"""``ftrans.distributed``: two processes of 4 CPU devices each join on localhost and run sharded programs.

Each process runs ``tests/distributed_worker.py`` (a fresh interpreter: joining must happen before the
runtime starts); the test checks what each reports against NumPy.  An unreachable coordinator must be a
``DistributedInitError`` after the timeout, never a hang.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)
    return env


def test_two_processes_share_a_mesh():
    port = _free_port()
    worker = os.path.join(HERE, "distributed_worker.py")
    procs = [subprocess.Popen([sys.executable, worker, str(port), str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env()) for i in range(2)]
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a distributed worker hung")
        assert p.returncode == 0, e[-3000:]
        outs.append(json.loads(o.strip().splitlines()[-1]))
    full = np.arange(64, dtype=np.float32).reshape(8, 8)
    for i, r in enumerate(outs):
        assert r["process_index"] == i and r["process_count"] == 2
        assert r["device_count"] == 8 and r["local_device_count"] == 4
        np.testing.assert_allclose(r["colsum"], (full * 2).sum(axis=0))
        assert r["local_shape"] == [8, 8]
        assert r["psum"] == pytest.approx(float(full.sum()))
        assert "already joined" in r["second_initialize"] and "call initialize once" in r["second_initialize"]
        assert worker in r["second_initialize"], r["second_initialize"]  # the worker's line
        assert r["still_initialized"] is True
        # experimental.multihost_utils across the two processes
        assert r["bcast_default"] == [5, 5, 5] and r["bcast_from_1"] == [2.0]
        assert r["allgather"] == [[0, 0], [1, 10]] and r["allgather_tiled"] == [0, 0, 1, 10]
        assert r["allgather_scalar"] == [0.0, 1.0]
        assert "differs" in r["assert_unequal"], r["assert_unequal"]
        assert r["ltg_shape"] == [8, 8] and r["gtl_shape"] == [4, 8]
        np.testing.assert_array_equal(r["ltg_value"], full)
        np.testing.assert_array_equal(r["gtl_value"], full[i * 4:(i + 1) * 4])


def test_unreachable_coordinator_is_an_error_after_the_timeout():
    port = _free_port()  # nobody listens there
    code = ("import ftrans\n"
            "from ftrans.errors import DistributedInitError\n"
            "try:\n"
            f"    ftrans.distributed.initialize('localhost:{port}', num_processes=2, process_id=1, "
            "initialization_timeout=3)\n"
            "except DistributedInitError as e:\n"
            "    print('ERR', e)\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERR" in r.stdout and f"localhost:{port}" in r.stdout and "within 3 s" in r.stdout, r.stdout
    assert elapsed < 60


def test_process_zero_whose_peers_never_join_stops_after_the_timeout():
    """Process 0 hosts the coordinator; when the others never register, the runtime ends the process after
    ``initialization_timeout`` (a fatal DEADLINE_EXCEEDED from the coordination service), never a hang."""
    port = _free_port()
    code = ("import ftrans\n"
            f"ftrans.distributed.initialize('localhost:{port}', num_processes=2, process_id=0, "
            "initialization_timeout=3)\n"
            "print('JOINED')\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode != 0 and "JOINED" not in r.stdout
    assert "DEADLINE_EXCEEDED" in r.stderr, r.stderr[-2000:]
    assert time.monotonic() - t0 < 60


def test_initialize_after_the_runtime_started_is_an_error():
    import ftrans
    from ftrans.errors import DistributedInitError

    ftrans.devices()  # the runtime is up in this process
    with pytest.raises(DistributedInitError, match="before anything runs") as info:
        ftrans.distributed.initialize("localhost:1", num_processes=2, process_id=0)
    assert os.path.abspath(__file__) in str(info.value)
    with pytest.raises(ValueError, match="process_id"):
        ftrans.distributed.initialize("localhost:1", num_processes=2, process_id=5)
