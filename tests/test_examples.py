"""The example scripts run, learn, and reject bad command-line arguments with a message, not a traceback.

Each runs with small settings so the suite stays fast; the full runs (README's
command) reach the accuracies their docstrings state.  A script runs as
``__main__`` in this process (a fresh interpreter costs seconds of imports, and
this process already has the eight host devices and the environment a child
would inherit); only the multi-process run starts interpreters of its own.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import runpy
import subprocess
import sys
import types

import numpy as np
import pytest
import sklearn  # noqa: F401  (the examples' dependencies are test dependencies: missing ones fail here)
import tqdm  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def run_here(script: str, *args: str) -> types.SimpleNamespace:
    """``script`` with ``args`` run as ``__main__`` in this process: its exit status, stdout and stderr (as
    ``run`` returns them); ``sys.argv``, ``sys.path`` and the environment are restored after."""
    path = os.path.join(ROOT, "examples", script)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, sys.path[:], dict(os.environ), os.getcwd()
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))  # as for a script: its own folder first
    os.chdir(ROOT)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        os.environ.clear()
        os.environ.update(saved[2])
        os.chdir(saved[3])
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@functools.cache
def train_digits_4_epochs() -> types.SimpleNamespace:
    """One run for the two tests that read it."""
    return run_here("train_digits.py", "--epochs", "4", "--no-progress")


def test_train_digits_learns():
    r = train_digits_4_epochs()
    assert r.returncode == 0, r.stderr
    acc = float(re.search(r"test accuracy ([0-9.]+)", r.stdout).group(1))
    assert acc >= 0.9, r.stdout


@pytest.mark.needs_devices(8)
def test_data_parallel_digits_learns_like_train_digits():
    r = run_here("data_parallel_digits.py", "--epochs", "4", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "on 8 devices" in r.stdout, r.stdout
    acc = float(re.search(r"test accuracy ([0-9.]+)", r.stdout).group(1))
    assert acc >= 0.9, r.stdout
    single = train_digits_4_epochs()
    # per-device gradients averaged with pmean are the whole batch's: the same training, the same accuracy
    assert abs(float(re.search(r"test accuracy ([0-9.]+)", single.stdout).group(1)) - acc) <= 0.01


def test_cnn_digits_learns():
    r = run_here("cnn_digits.py", "--epochs", "2", "--channels", "8", "--no-progress")
    assert r.returncode == 0, r.stderr
    acc = float(re.search(r"test accuracy ([0-9.]+)", r.stdout).group(1))
    assert acc >= 0.85, r.stdout


def test_rnn_scan_learns():
    r = run_here("rnn_scan.py", "--steps", "60", "--hidden", "16")
    assert r.returncode == 0, r.stderr
    first = float(re.search(r"initial mean squared error ([0-9.]+)", r.stdout).group(1))
    last = float(re.search(r"final mean squared error ([0-9.]+)", r.stdout).group(1))
    assert last < first / 3, r.stdout


def test_per_example_grads_match_a_loop_and_learn():
    r = run_here("per_example_grads.py", "--steps", "60")
    assert r.returncode == 0, r.stderr
    assert "match a loop of grad calls" in r.stdout
    acc = float(re.search(r"test accuracy .*: ([0-9.]+)", r.stdout).group(1))
    assert acc >= 0.8, r.stdout


def test_gaussian_process_fits_its_hyperparameters():
    r = run_here("gaussian_process.py", "--steps", "60", "--points", "40")
    assert r.returncode == 0, r.stderr
    nll = [float(v) for v in re.findall(r"negative log likelihood (-?[0-9.]+)", r.stdout)]
    rmse = [float(v) for v in re.findall(r"test rmse ([0-9.]+)", r.stdout)]
    assert len(nll) == 2 and nll[1] < nll[0] - 20, r.stdout
    assert len(rmse) == 2 and rmse[1] < rmse[0] / 3 and rmse[1] < 0.2, r.stdout


@pytest.mark.parametrize("script,args", [
    ("gaussian_process.py", ["--steps", "0"]),
    ("gaussian_process.py", ["--points", "few"]),
    ("train_digits.py", ["--epochs", "0"]),
    ("train_digits.py", ["--batch-size", "many"]),
    ("train_digits.py", ["--test-fraction", "1.5"]),
    pytest.param("data_parallel_digits.py", ["--batch-size", "60"],  # 60 does not split over 8 devices
                 marks=pytest.mark.needs_devices(8)),
    ("data_parallel_digits.py", ["--host-devices", "0"]),


    ("cnn_digits.py", ["--channels", "0"]),
    ("cnn_digits.py", ["--epochs", "two"]),
    ("rnn_scan.py", ["--steps", "-3"]),
    ("per_example_grads.py", ["--clip", "0"]),
    ("per_example_grads.py", ["--noise", "loud"]),
])
def test_bad_arguments_give_a_message_not_a_traceback(script, args):
    """The script must stop with argparse's exit status 2 and an ``error:`` line, not an exception."""
    r = run_here(script, *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "error:" in r.stderr, r.stderr


@pytest.mark.needs_devices(8)
def test_sharded_transformer_learns_with_split_weights():
    r = run_here("sharded_transformer.py", "--steps", "120")
    assert r.returncode == 0, r.stderr
    assert "on 8 devices" in r.stdout and "each device holds (64, 16) of (64, 64)" in r.stdout, r.stdout
    m = re.search(r"first loss ([0-9.]+), final loss ([0-9.]+), reversal accuracy ([0-9.]+)", r.stdout)
    assert float(m.group(2)) < 0.1 * float(m.group(1)) and float(m.group(3)) >= 0.95, r.stdout
    assert "parameters still split: P(None, 'model')" in r.stdout


def test_sharded_transformer_losses_match_across_processes_and_one_device():
    """The same 20 steps sharded over 8 devices in one process, over 2 processes of 4, and on one device unsharded:
    the same seed gives the same batches, so the losses agree up to float rounding."""
    losses = {}
    for name, extra in [("one process", ()), ("two processes", ("--processes", "2")),
                        ("one device", ("--single-device",))]:
        # the launcher's process 0 writes to the real stdout: that run needs a subprocess to be read
        r = (run("sharded_transformer.py", "--steps", "20", "--no-progress", *extra, timeout=240) if extra[:1] ==
             ("--processes",) else run_here("sharded_transformer.py", "--steps", "20", "--no-progress", *extra))
        assert r.returncode == 0, (name, r.stderr[-3000:])
        m = re.search(r"first loss ([0-9.]+), final loss ([0-9.]+)", r.stdout)
        assert m, (name, r.stdout)
        losses[name] = float(m.group(2))
        steps = [float(x) for x in re.findall(r"step +\d+  loss ([0-9.]+)", r.stdout)]
        assert len(steps) == 5 and steps[-1] < steps[0], (name, r.stdout)
        if name == "two processes":  # process 0 reports, once
            assert r.stdout.count("on 8 devices in 2 processes; wq is split P(None, 'model'), each device holds "
                                  "(64, 16)") == 1, r.stdout
            assert r.stdout.count("final loss") == 1, r.stdout
    assert losses["one process"] < 1.5, losses  # it learned something in 20 steps
    np.testing.assert_allclose(losses["two processes"], losses["one process"], rtol=1e-4)
    np.testing.assert_allclose(losses["one device"], losses["one process"], rtol=1e-4)


def test_sharded_transformer_rejects_processes_that_do_not_divide_the_devices():
    r = run_here("sharded_transformer.py", "--processes", "3")
    assert r.returncode == 2 and "--processes 3 must divide --host-devices (8)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
