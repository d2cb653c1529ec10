"""Every notebook in notebooks/ executes without an error (a cell that raises fails the test).

The kernel is ``python3`` pinned to this interpreter (``sys.executable``), so the
notebooks run against the ftrans and jax of the environment running the tests,
whatever kernelspecs a user has registered elsewhere.  Nothing is installed or
registered globally.  The kernel inherits this process's environment
(``JAX_PLATFORMS``, ``XLA_FLAGS`` from conftest.py), with this checkout on
``PYTHONPATH``; an extra in-memory cell checks the kernel's interpreter and ftrans.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import RESOURCES, get_kernel_dict
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import ftrans

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
CELL_TIMEOUT_S = 120


class _ThisInterpreter(AsyncKernelManager):
    """The ``python3`` kernel on ``sys.executable``.

    jupyter_client already maps a kernelspec whose ``argv[0]`` is ``python`` to
    ``sys.executable``; this also rules out a user-level ``python3`` kernelspec
    that names another interpreter with an absolute path.
    """

    @property
    def kernel_spec(self):
        if self._kernel_spec is None:
            d = get_kernel_dict()
            self._kernel_spec = KernelSpec(resource_dir=RESOURCES, argv=d["argv"],
                                           display_name=d["display_name"], language=d["language"])
        return self._kernel_spec


def execute(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    client = NotebookClient(
        nb, kernel_name="python3", kernel_manager_class=_ThisInterpreter,
        timeout=CELL_TIMEOUT_S, startup_timeout=120,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb


def test_there_are_notebooks():
    assert {p.name for p in PATHS} >= {"quickstart.ipynb", "autodiff.ipynb", "control_flow.ipynb"}


def test_notebooks_match_their_generator():
    """The committed notebooks are what notebooks/build_notebooks.py writes (its source is the reviewed one)."""
    sys.path.insert(0, str(NOTEBOOKS))
    try:
        import build_notebooks
    finally:
        sys.path.remove(str(NOTEBOOKS))
    for name, cells in build_notebooks.NOTEBOOKS.items():
        want = nbformat.writes(build_notebooks.build(name, cells)) + "\n"  # as nbformat.write writes it
        assert (NOTEBOOKS / name).read_text() == want, (
            f"notebooks/{name} differs from notebooks/build_notebooks.py; run it to regenerate"
        )


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_notebook_executes(path, monkeypatch):
    # The kernel imports the ftrans of this checkout even where it is not installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name} is committed with outputs; run notebooks/build_notebooks.py to regenerate it"
    )
    # One extra cell (in memory only) checks the kernel runs this interpreter and this ftrans.
    nb.cells.append(nbformat.v4.new_code_cell("import sys, ftrans; print(sys.executable); print(ftrans.__file__)"))
    t0 = time.perf_counter()
    try:
        execute(nb, path.parent)
    except CellExecutionError as e:
        msg = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # IPython's colours
        pytest.fail(f"{path.name}: a cell raised\n{msg}", pytrace=False)
    elapsed = time.perf_counter() - t0
    # The kernel may send the two prints as one stream message or as two: join them.
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    exe, ftrans_file = printed.splitlines()
    assert Path(exe).resolve() == Path(sys.executable).resolve()
    assert Path(ftrans_file).resolve() == Path(ftrans.__file__).resolve()
    # Each notebook executes in a few seconds; flag one that grows slow.
    assert elapsed < 90, f"{path.name} took {elapsed:.1f} s"
