"""Imports run one way: down the layers of DESIGN.md section 6.

core < lowering/runtime < transforms < lax < numpy < {nn, random, scipy,
example_libraries} < the top-level modules.  A module may import its own layer
or any layer below it, never one above, whether at module level or inside a
function (an in-function import is still a dependency; hiding it in a function
only hides the cycle).  The scan is AST-based like ``test_boundary.py``: it
resolves relative imports, ``from ftrans import lax``, ``import ftrans.x as y``
and ``importlib.import_module`` / ``__import__`` with a constant (or f-string
prefix) module name.

Every module under ``ftrans/`` must belong to a layer: a new top-level module
or subpackage is placed in ``LAYERS`` deliberately, not by default.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ftrans"

# (module or package, layer); the longest matching prefix wins.
LAYERS: tuple[tuple[str, str], ...] = (
    ("ftrans.core", "core"),
    ("ftrans.errors", "core"),
    ("ftrans.tree_util", "core"),
    ("ftrans.tree", "core"),
    ("ftrans.monitoring", "core"),
    ("ftrans.lowering", "lowering"),
    ("ftrans.devices", "lowering"),
    ("ftrans.distributed", "lowering"),
    ("ftrans.transforms", "transforms"),
    ("ftrans.lax", "lax"),
    ("ftrans.numpy", "numpy"),
    ("ftrans.nn", "libraries"),
    ("ftrans.ops", "libraries"),
    ("ftrans.random", "libraries"),
    ("ftrans.scipy", "libraries"),
    ("ftrans.example_libraries", "libraries"),
    ("ftrans.dtypes", "top"),
    ("ftrans.test_util", "top"),
    ("ftrans.ad_checkpoint", "top"),
    ("ftrans.custom_derivatives", "top"),
    ("ftrans.rules", "top"),
    ("ftrans.sharding", "top"),
    ("ftrans.debug", "top"),
    ("ftrans._callback", "top"),
    ("ftrans.experimental", "top"),
    ("ftrans.extend", "top"),
    ("ftrans.custom_batching", "lax"),
    ("ftrans.image", "libraries"),
    ("ftrans.dlpack", "top"),
    ("ftrans.profiler", "top"),
    ("ftrans.stages", "top"),
    ("ftrans.typing", "top"),
    ("ftrans.flatten_util", "libraries"),
    ("ftrans.experimental.checkify", "top"),
    ("ftrans.ffi", "top"),
    ("ftrans.export", "top"),
    ("ftrans.ref", "top"),
    ("ftrans.error_check", "top"),
    ("ftrans.experimental.sparse", "top"),
    ("ftrans.experimental.key_reuse", "top"),
    ("ftrans.interpreters", "top"),
    ("ftrans.api_util", "top"),
    ("ftrans.version", "top"),
)
# The package itself (``ftrans/__init__.py``) is the top; it is matched exactly,
# so an unlisted ``ftrans.something`` has no layer instead of silently the top one.
PACKAGE_LAYER = "top"
RANK = {name: i for i, name in enumerate(("core", "lowering", "transforms", "lax", "numpy", "libraries", "top"))}


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name inside ``ftrans``, or None when it has none."""
    if module == "ftrans":
        return PACKAGE_LAYER
    best = None
    for prefix, layer in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def _module_name(relpath: str) -> tuple[str, bool]:
    """``ftrans/lax/_ops.py`` -> (``ftrans.lax._ops``, False); a package's ``__init__`` -> (pkg, True)."""
    parts = list(pathlib.PurePosixPath(relpath).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


class _Imports(ast.NodeVisitor):
    """Every ``ftrans`` module one source file imports, with its line."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, int]] = []

    def _add(self, target: str, line: int) -> None:
        if target == "ftrans" or target.startswith("ftrans."):
            self.found.append((target, line))

    def _relative(self, level: int, module: str | None) -> str:
        base = self.package.split(".")
        if level > 1:
            base = base[: len(base) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._add(a.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = self._relative(node.level, node.module) if node.level else (node.module or "")
        for a in node.names:
            # ``from ftrans import lax`` imports the submodule ``ftrans.lax``;
            # ``from ftrans import Array`` imports an attribute of ``ftrans``.
            sub = f"{mod}.{a.name}"
            placed = layer_of(sub)
            precise = placed is not None and (mod == "ftrans" or placed != layer_of(mod))
            self._add(sub if precise else mod, node.lineno)

    def _constant_prefix(self, node: ast.AST) -> str | None:
        """The module name a dynamic import names: a string, or an f-string's leading part."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            out = ""
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out += str(v.value)
                elif (isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)
                      and v.value.id in ("__name__", "__package__")):
                    out += self.module if v.value.id == "__name__" else self.package
                else:
                    break
            return out.rstrip(".") or None
        return None

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if fname in ("import_module", "__import__") and node.args:
            name = self._constant_prefix(node.args[0])
            if name is not None:
                if name.startswith("."):
                    level = len(name) - len(name.lstrip("."))
                    name = self._relative(level, name.lstrip(".") or None)
                self._add(name, node.lineno)
        self.generic_visit(node)


def scan_source(source: str, relpath: str) -> list[str]:
    """Upward imports in one module, as ``path:line: A (layer) -> B (layer)`` strings."""
    module, is_package = _module_name(relpath)
    own = layer_of(module)
    if own is None:
        return []  # reported by test_every_module_has_a_layer
    visitor = _Imports(module, is_package)
    visitor.visit(ast.parse(source, filename=relpath))
    bad = []
    for target, line in visitor.found:
        theirs = layer_of(target)
        if theirs is not None and RANK[theirs] > RANK[own]:
            bad.append(f"{relpath}:{line}: {module} ({own}) -> {target} ({theirs})")
    return sorted(set(bad), key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s))


def _modules(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def scan_package(root: pathlib.Path = PACKAGE) -> list[str]:
    bad = []
    for path in _modules(root):
        rel = path.relative_to(root.parent).as_posix()
        bad += scan_source(path.read_text(encoding="utf-8"), rel)
    return bad


def test_package_has_modules():
    assert len(_modules(PACKAGE)) > 20, "the scan found few ftrans modules; is PACKAGE right?"


def test_every_module_has_a_layer():
    unplaced = [p.relative_to(ROOT).as_posix() for p in _modules(PACKAGE)
                if layer_of(_module_name(p.relative_to(ROOT).as_posix())[0]) is None]
    assert not unplaced, ("modules with no layer; add them to LAYERS in tests/test_layers.py "
                          "(and to DESIGN.md section 6):\n" + "\n".join(unplaced))


def test_imports_run_down_the_layers():
    bad = scan_package()
    assert not bad, "imports that run up a layer (DESIGN.md section 6):\n" + "\n".join(bad)


def test_layer_table_is_consistent():
    assert layer_of("ftrans") == "top"
    assert layer_of("ftrans.core.trace") == "core"
    assert layer_of("ftrans.tree_util") == "core" and layer_of("ftrans.tree") == "core"
    assert layer_of("ftrans.lowering.rules.indexing") == "lowering"
    assert layer_of("ftrans.transforms.ad_rules.elementwise") == "transforms"
    assert layer_of("ftrans.nn.initializers") == "libraries"
    assert layer_of("ftrans.somewhere_new") is None
    assert all(layer in RANK for _, layer in LAYERS)


# (source, path it is planted at, the target the scanner must report)
PLANTED = [
    ("from ftrans import lax\n", "ftrans/transforms/ad.py", "ftrans.lax (lax)"),
    ("from ftrans import numpy as jnp\n", "ftrans/lax/_ops.py", "ftrans.numpy (numpy)"),
    ("import ftrans.numpy\n", "ftrans/core/trace.py", "ftrans.numpy (numpy)"),
    ("import ftrans.numpy as jnp\n", "ftrans/transforms/batching.py", "ftrans.numpy (numpy)"),
    ("import ftrans\n", "ftrans/core/array.py", "ftrans (top)"),
    ("from ftrans import Array\n", "ftrans/lowering/lower.py", "ftrans (top)"),
    ("from ftrans.lowering.device_eager import backend\n", "ftrans/core/trace.py",
     "ftrans.lowering.device_eager (lowering)"),
    ("from ftrans.numpy._creation import zeros\n", "ftrans/transforms/reverse.py", "ftrans.numpy._creation (numpy)"),
    ("def f():\n    from ftrans import lax\n    return lax.add\n", "ftrans/transforms/ad.py", "ftrans.lax (lax)"),
    ("class C:\n    def m(self):\n        import ftrans.random\n", "ftrans/numpy/_creation.py",
     "ftrans.random (libraries)"),
    ("from ..lowering import lower\n", "ftrans/core/trace.py", "ftrans.lowering (lowering)"),
    ("from .. import numpy\n", "ftrans/lax/_ops.py", "ftrans.numpy (numpy)"),
    ("from ...numpy import sin\n", "ftrans/transforms/ad_rules/elementwise.py", "ftrans.numpy (numpy)"),
    ("from .. import dtypes\n", "ftrans/nn/__init__.py", "ftrans.dtypes (top)"),
    ("import importlib\nm = importlib.import_module('ftrans.numpy')\n", "ftrans/transforms/jit.py",
     "ftrans.numpy (numpy)"),
    ("from importlib import import_module\nm = import_module('ftrans.lax._ops')\n", "ftrans/lowering/lower.py",
     "ftrans.lax._ops (lax)"),
    ("m = __import__('ftrans.transforms.ad')\n", "ftrans/core/primitive.py", "ftrans.transforms.ad (transforms)"),
    ("m = __import__(f'ftrans.numpy.{name}')\n", "ftrans/lax/_ops.py", "ftrans.numpy (numpy)"),
    ("import importlib\nm = importlib.import_module('..scipy', __package__)\n", "ftrans/numpy/linalg.py",
     "ftrans.scipy (libraries)"),
]


@pytest.mark.parametrize(("src", "path", "target"), PLANTED, ids=[str(i) for i in range(len(PLANTED))])
def test_scanner_catches_planted_violation(src, path, target):
    bad = scan_source(src, path)
    assert bad, f"scanner missed the upward import in {path}:\n{src}"
    assert any(b.endswith(f"-> {target}") for b in bad), bad


ALLOWED = [
    ("from ftrans.core import dtypes\nfrom ftrans.core.prims import structural as S\n", "ftrans/transforms/ad.py"),
    ("from ftrans.lowering import lower\nimport ftrans.core.trace\n", "ftrans/transforms/jit.py"),
    ("from ftrans import lax\nfrom ftrans.lax import _ops\n", "ftrans/numpy/_creation.py"),
    ("from ftrans import random\nfrom ftrans import nn\n", "ftrans/example_libraries/stax.py"),
    ("from . import _ops\nfrom ._ops import add\n", "ftrans/lax/__init__.py"),
    ("from .prims import structural\n", "ftrans/core/operands.py"),
    ("from ftrans import numpy, lax, transforms, core\nimport ftrans.nn\n", "ftrans/__init__.py"),
    ("import importlib\nm = importlib.import_module(f'{__name__}.optimizers')\n", "ftrans/example_libraries/__init__.py"),
    ("from ftrans import errors, tree_util\n", "ftrans/core/trace.py"),
    ("import numpy as np\nimport jax\nfrom jax import tree_util\n", "ftrans/core/trace.py"),
]


@pytest.mark.parametrize(("src", "path"), ALLOWED, ids=[str(i) for i in range(len(ALLOWED))])
def test_scanner_allows_imports_that_run_down_or_sideways(src, path):
    assert scan_source(src, path) == []


def test_scanner_on_a_planted_package(tmp_path):
    """The package walk (file discovery, paths and package names included) reports a planted violation."""
    pkg = tmp_path / "ftrans"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ftrans import core\n")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "bad.py").write_text("import numpy as np\n\n\ndef f(x):\n    from .. import lax\n    return lax\n")
    bad = scan_package(pkg)
    assert bad == ["ftrans/core/bad.py:5: ftrans.core.bad (core) -> ftrans.lax (lax)"]
