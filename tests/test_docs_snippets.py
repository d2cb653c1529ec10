"""The Python snippets of the docs run: each page's ```python blocks, in order, as one script.

The pages are tutorials whose printed outputs are shown next to the code, so
they must keep working as ftrans changes.  They run in a subprocess: the
how-to on primitives registers new primitives, which must not leak into the
registry of the test process (tests/test_registry.py walks it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["index.md", "quickstart.md", "howto/write_a_primitive.md", "howto/write_a_pass.md",
         "howto/debugging_with_ir.md", "optimizer.md",
         "api/tree_util.md", "api/extend.md", "api/errors.md", "api/linalg.md", "api/convolution_fft.md", "api/image_interpolation.md", "api/scipy_solvers.md", "autodiff.md", "vmap.md", "random.md",
         "nn.md", "parallelism.md", "debugging.md", "../README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

_RUNNER = """
import runpy, sys, traceback
failed = []
for path in sys.argv[1:]:
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:
        failed.append(path)
        print(f"=== {path} failed:", file=sys.stderr)
        traceback.print_exc()
sys.exit(1 if failed else 0)
"""


def snippets(page: str) -> str:
    return "\n\n".join(_BLOCK.findall((ROOT / "docs" / page).read_text()))


def test_every_page_has_snippets():
    for page in PAGES:
        assert snippets(page).strip(), page


def test_doc_snippets_run(tmp_path):
    scripts = []
    for page in PAGES:
        # A prefix, so that random.md's script does not shadow the standard library's random.
        name = page.replace("../", "").replace("/", "_").removesuffix(".md")
        script = tmp_path / f"page_{name}.py"
        script.write_text(snippets(page))
        scripts.append(str(script))
    # On the CPU, whatever the suite runs on: the pages show outputs of the CPU with tests/conftest.py's
    # eight host devices (parallelism.md maps over several; a GPU machine has one GPU).
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", _RUNNER, *scripts], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-6000:]
    out = r.stdout
    # A few of the outputs the pages show.
    assert "all rules check out" in out
    assert "mul_by_one: forwarded `mul` by one to its operand at" in out   # write_a_pass.md's report
    assert "sqrt" in out and "(layer)" in out          # the NaN hunt found the line
    assert "[-6. -4. -4. 14.]" in out                  # grad through forward_diff's transpose
    assert "[0.947667   0.9785799  0.33229148]" in out   # random.md: jax.random's bits for PRNGKey(0)
    assert "[-200. -100.    0. -500.]" in out   # optimizer.md: the stable log-softmax under jit
    assert "[ 0.e+00 -1.e+30    -inf]" in out           # nn.md: log_softmax does not overflow
    assert "[[28. 28. 28. 28.]" in out                   # parallelism.md: psum over both axes of a 2x4 pmap
    # debugging.md: debug.print under vmap and in a scan, callbacks, the NaN hunt, named scopes
    assert "element 0\nelement 1\nelement 2\n" in out and "carry 1.0 x 2.0" in out
    assert "[2.0, 1.0, 0.5]" in out and "invalid value (nan) encountered in log" in out
    assert "c:f32[] = mul b 2.0:f32[] # [attention/proj]" in out
