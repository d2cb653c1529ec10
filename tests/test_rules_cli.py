"""``python -m ftrans.rules``: where each rule of a primitive lives, or why it is absent."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys

import pytest

import ftrans
from ftrans import rules
from ftrans.core import primitive as P

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ftrans.__file__)))


@pytest.fixture(autouse=True)
def _ftrans_registry(monkeypatch):
    """Only ftrans's own primitives (and each test's probe): user primitives that other test files build in
    this process are not part of what the summary here is checked against."""
    monkeypatch.setattr(P, "registry", {n: p for n, p in P.registry.items() if p.ftrans_owned})


def _run(*argv: str) -> tuple[int, str]:
    lines: list[str] = []
    code = rules.main(list(argv), out=lines.append)
    return code, "\n".join(lines)


def _table_line(text: str, table: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln.split()[:1] == [table]]
    return line


def test_module_runs_as_a_command():
    proc = subprocess.run([sys.executable, "-m", "ftrans.rules", "add", "nosuchprim"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "transforms/linear_rules/elementwise.py:" in proc.stdout
    assert "no primitive named 'nosuchprim'" in proc.stderr


def test_importing_ftrans_alone_registers_every_table():
    """A user's ``import ftrans`` (nothing else) yields every table and every rule this process sees
    for ftrans's own primitives (other test modules may have added primitives of their own here)."""
    code = ("import json, ftrans\nfrom ftrans.core import primitive as P\n"
            "print(json.dumps({n: sorted(p.name for p in t.rules) for n, t in P.rule_tables.items()}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    fresh = json.loads(proc.stdout)
    assert list(fresh) == list(P.rule_tables)
    for name, table in P.rule_tables.items():
        here = sorted(p.name for p in table.rules if p.name in fresh["abstract_eval"])
        assert fresh[name] == here, name


def test_every_table_is_listed_with_a_real_location():
    code, text = _run("add")
    assert code == 0
    assert text.splitlines()[0].startswith("add  (first-order")
    for name in P.rule_tables:
        line = _table_line(text, name)
        assert "MISSING" not in line
    for name, folder in [("lowering", "ftrans/lowering/"), ("jvp", "ftrans/transforms/"),
                         ("transpose", "ftrans/transforms/"), ("batching", "ftrans/transforms/")]:
        m = re.search(r"(\S+\.py):(\d+) ", _table_line(text, name))
        assert m and m.group(1).startswith(folder), _table_line(text, name)
        path, line = os.path.join(ROOT, m.group(1)), int(m.group(2))
        with open(path) as f:
            assert len(f.readlines()) >= line
    assert "numpy ufunc add" in _table_line(text, "impl")


def test_closures_show_what_they_capture_and_reasons_are_printed():
    _, text = _run("sin")
    jvp_at = text.splitlines().index(_table_line(text, "jvp"))
    assert "ad_rules/elementwise.py" in text.splitlines()[jvp_at + 1]  # the captured derivative
    assert "not supported: `sin` is not linear" in _table_line(text, "transpose")
    assert _table_line(text, "partial_eval").split(None, 1)[1].startswith("not applicable")


def test_higher_order_primitives_show_partial_eval_rules():
    for name in ("scan", "jit_call", "remat2"):
        _, text = _run(name)
        assert "(higher-order" in text.splitlines()[0]
        for table in ("partial_eval", "partial_eval_jaxpr"):
            assert re.search(r"\.py:\d+ ", _table_line(text, table)), text


def test_unknown_name_suggests_close_matches(capsys):
    code, _ = _run("scann")
    assert code == 2
    assert "did you mean: scan" in capsys.readouterr().err
    assert _run("sin_p")[1].startswith("sin  ")


def test_summary_lists_every_primitive():
    code, text = _run("--all")
    assert code == 0, [ln for ln in text.splitlines() if "MISSING" in ln]
    rows = {ln.split()[0]: ln.split()[1:] for ln in text.splitlines()[1:] if ln and not ln[0].isdigit()}
    assert set(rows) == set(P.registry)
    header = text.splitlines()[0].split()
    assert header[1:] == list(P.rule_tables)
    assert rows["sin"][header.index("transpose") - 1] == rules.UNSUPPORTED
    assert rows["sin"][header.index("partial_eval") - 1] == rules.NOT_APPLICABLE
    assert rows["scan"][header.index("partial_eval") - 1] == rules.HAS
    assert _run()[1] == text


def _throwaway_rule(x, *, scale):
    return x * scale


def test_a_missing_rule_is_reported_and_fails_the_summary():
    prim = P.Primitive("rules_cli_probe", higher_order=True)
    try:
        P.abstract_eval_rules[prim] = functools.partial(_throwaway_rule, scale=2)
        code, text = _run("rules_cli_probe")
        assert code == 0
        line = _table_line(text, "abstract_eval")
        assert "tests/test_rules_cli.py:" in line and "_throwaway_rule [partial(scale=2)]" in line
        assert _table_line(text, "jvp").split()[1:] == ["MISSING"]
        assert _table_line(text, "partial_eval").split()[1:] == ["MISSING"]
        code, text = _run("--all")
        assert code == 1
        assert f"{len(P.rule_tables) - 1} MISSING" in text.splitlines()[-1]
    finally:
        del P.registry[prim.name]
        P.abstract_eval_rules.pop(prim, None)


@pytest.mark.parametrize("name", sorted(n for n, p in P.registry.items() if p.ftrans_owned))
def test_describe_works_for_every_primitive(name):
    text = rules.describe(name)
    assert len(text.splitlines()) >= len(P.rule_tables) + 1
