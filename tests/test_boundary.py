"""The jax boundary: ftrans may use jax's PJRT client and pytrees, never its tracing machinery.

DESIGN.md section 5: ftrans's tracing, transforms and lowering are its own, so
no module under ``ftrans/`` may import or touch ``jax.numpy``, ``jax.lax``,
``jax.jit`` and friends; calls into ``jax._src`` are confined to
``ftrans/lowering/``.  The scan is AST-based: it resolves import aliases
(``import jax as J``, ``from jax import lax as L``) and attribute chains
(``J.numpy.sin``) to full dotted names, and also catches
``importlib.import_module("jax.numpy")``-style dynamic imports.
"""

from __future__ import annotations

import ast
import pathlib
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ftrans"

FORBIDDEN = (
    "jax.numpy", "jax.lax", "jax.jit", "jax.grad", "jax.vmap", "jax.pmap", "jax.random", "jax.nn",
    "jax.scipy", "jax.make_jaxpr", "jax.value_and_grad", "jax.jvp", "jax.vjp", "jax.linearize",
    "jax.checkpoint", "jax.custom_jvp", "jax.custom_vjp", "jax.eval_shape", "jax.core",
    "jax.interpreters", "jax.extend.core",
)
PRIVATE = "jax._src"
PRIVATE_ALLOWED_UNDER = "ftrans/lowering/"


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


class _Scanner(ast.NodeVisitor):
    """Collects every dotted jax name a module imports or uses, with its line."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> dotted module/attribute path
        self.uses: list[tuple[str, int]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name == "jax" or a.name.startswith("jax."):
                self.uses.append((a.name, node.lineno))
                if a.asname:
                    self.aliases[a.asname] = a.name
                else:  # ``import jax.numpy`` binds ``jax``
                    self.aliases[a.name.split(".")[0]] = "jax"
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level == 0 and (mod == "jax" or mod.startswith("jax.")):
            self.uses.append((mod, node.lineno))
            for a in node.names:
                full = f"{mod}.{a.name}"
                self.uses.append((full, node.lineno))
                self.aliases[a.asname or a.name] = full
        self.generic_visit(node)

    def _dotted(self, node: ast.AST) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return ".".join([self.aliases[node.id], *reversed(parts)])
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self._dotted(node)
        if name is not None:
            self.uses.append((name, node.lineno))
            return  # the inner chain is a prefix of this one
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases:
            self.uses.append((self.aliases[node.id], node.lineno))

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("jax.numpy") / __import__("jax.lax")
        fn = node.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if fname in ("import_module", "__import__") and node.args:
            a0 = node.args[0]
            if isinstance(a0, ast.Constant) and isinstance(a0.value, str) and a0.value.startswith("jax"):
                self.uses.append((a0.value, node.lineno))
        self.generic_visit(node)


def scan_source(source: str, relpath: str) -> list[str]:
    """Boundary violations in one module's source, as ``path:line: name`` strings."""
    tree = ast.parse(source, filename=relpath)
    sc = _Scanner()
    sc.visit(tree)
    bad = []
    for name, line in sc.uses:
        for f in FORBIDDEN:
            if _matches(name, f):
                bad.append(f"{relpath}:{line}: uses {name} (forbidden: {f})")
                break
        else:
            if _matches(name, PRIVATE) and not relpath.startswith(PRIVATE_ALLOWED_UNDER):
                bad.append(f"{relpath}:{line}: uses {name} ({PRIVATE} only inside {PRIVATE_ALLOWED_UNDER})")
    return sorted(set(bad))


def scan_package(root: pathlib.Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        bad += scan_source(path.read_text(encoding="utf-8"), rel)
    return bad


def test_package_has_modules():
    files = list(PACKAGE.rglob("*.py"))
    assert len(files) > 5, "the scan found no ftrans modules; is PACKAGE right?"


def test_ftrans_respects_the_jax_boundary():
    bad = scan_package()
    assert not bad, "ftrans crosses the jax boundary (DESIGN.md section 5):\n" + "\n".join(bad)


PLANTED = {
    "import jax.numpy as jnp": "jax.numpy",
    "from jax import lax": "jax.lax",
    "from jax import numpy as np2": "jax.numpy",
    "from jax.numpy import sin": "jax.numpy",
    "import jax\ny = jax.jit(f)": "jax.jit",
    "import jax as J\ny = J.numpy.sin(1.0)": "jax.numpy",
    "import jax\ng = jax.grad": "jax.grad",
    "import jax\njax.vmap(f)(x)": "jax.vmap",
    "from jax import random as R": "jax.random",
    "import jax\njax.make_jaxpr(f)": "jax.make_jaxpr",
    "from jax.interpreters import ad": "jax.interpreters",
    "import jax.core": "jax.core",
    "from jax.extend import core": "jax.extend.core",
    "import jax\nc = jax.extend.core.Primitive": "jax.extend.core",
    "from jax import custom_vjp": "jax.custom_vjp",
    "import jax\njax.eval_shape(f, x)": "jax.eval_shape",
    "import importlib\nm = importlib.import_module('jax.lax')": "jax.lax",
    "m = __import__('jax.scipy')": "jax.scipy",
    "def f():\n    import jax.nn\n    return 1": "jax.nn",
    "from jax._src import core": "jax._src",
    "import jax._src.api": "jax._src",
}


@pytest.mark.parametrize("src", list(PLANTED), ids=list(range(len(PLANTED))))
def test_scanner_catches_planted_violation(src):
    bad = scan_source(src + "\n", "ftrans/core/planted.py")
    assert bad, f"scanner missed a violation in:\n{src}"
    assert any(PLANTED[src] in b for b in bad), bad


ALLOWED = """
    import jax
    from jax import tree_util
    from jax.tree_util import tree_map
    from jax.extend import backend
    import jax.extend.backend as be

    def f(x):
        d = jax.devices()
        n = jax.device_count()
        ok = isinstance(x, jax.Array)
        t = jax.tree_util.tree_leaves(x)
        c = jax.extend.backend.get_backend("cpu")
        return d, n, ok, t, c, tree_map, tree_util, backend, be
"""


def test_scanner_allows_client_and_pytree_use():
    assert scan_source(textwrap.dedent(ALLOWED), "ftrans/core/allowed.py") == []


def test_private_jax_only_inside_lowering():
    src = "from jax._src.interpreters import mlir\n"
    assert scan_source(src, "ftrans/lowering/compat.py") == []
    assert scan_source(src, "ftrans/core/trace.py")


def test_scanner_on_a_planted_file(tmp_path):
    """The package-level scan (file walking included) finds a planted violation."""
    pkg = tmp_path / "ftrans"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import jax.tree_util\n")
    (pkg / "core" / "bad.py").write_text("import numpy as np\n\n\ndef f(x):\n    import jax\n    return jax.lax.sin(x)\n")
    bad = scan_package(pkg)
    assert len(bad) == 1
    assert bad[0].startswith("ftrans/core/bad.py:6:") and "jax.lax" in bad[0]


def test_unrelated_names_are_not_flagged():
    src = "import numpy as jax_like\njax = object()\nlax = 3\nx = jax_like.numpy\n"
    assert scan_source(src, "ftrans/core/ok.py") == []
