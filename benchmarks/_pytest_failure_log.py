"""A pytest plugin that writes each failing test's report the moment it fails.

Why: on a lent GPU a suite run may be cut off at the call's time limit, and pytest prints its
failure summary only at the end; this log keeps every failure seen so far (xdist workers too).
Load it with ``-p _pytest_failure_log`` (this folder on ``PYTHONPATH``) and name the file in
``FTRANS_FAILURE_LOG``.
"""

from __future__ import annotations

import os


def pytest_runtest_logreport(report) -> None:  # noqa: ANN001 (pytest's hook signature)
    path = os.environ.get("FTRANS_FAILURE_LOG")
    if not path or not report.failed:
        return
    text = getattr(report, "longreprtext", "") or ""
    if len(text) > 6000:
        text = text[:1500] + "\n...\n" + text[-4500:]
    with open(path, "a") as f:
        f.write(f"===== {report.nodeid} [{report.when}]\n{text}\n")
