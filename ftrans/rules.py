"""Where each rule of a primitive lives: ``python -m ftrans.rules PRIM``.

A primitive's rules are spread over one file per table (core/prims, lowering/rules,
transforms/ad_rules, linear_rules, batch_rules), and many rules are closures built
by a small factory, so grepping for the primitive's name rarely finds them.  This
walks the registered rule tables (``ftrans.core.primitive.rule_tables``) and says,
for each, where the rule is defined, or why it is deliberately absent, or that it
is missing.  ``--all`` (or no argument) prints one line per primitive, and exits
1 when any rule is missing, so it doubles as a quick coverage check.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ftrans  # noqa: F401  (importing the package registers every table and rule)
from ftrans.core import primitive as P

__all__ = ["rule_location", "describe", "summary", "main"]

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(ftrans.__file__)))

# Per-table status words of the summary.
HAS, UNSUPPORTED, NOT_APPLICABLE, MISSING = "yes", "n/s", "n/a", "MISSING"


def _relpath(path: str) -> str:
    path = os.path.abspath(path)
    if path.startswith(_PKG_PARENT + os.sep):
        return os.path.relpath(path, _PKG_PARENT)
    return path


def _unwrap(rule: Any) -> tuple[Any, list[str]]:
    """The function behind ``rule``, and notes on what was peeled off (partial arguments, decorators)."""
    notes: list[str] = []
    for _ in range(10):
        if isinstance(rule, functools.partial):
            bound = [repr(a) for a in rule.args] + [f"{k}={v!r}" for k, v in rule.keywords.items()]
            notes.append(f"partial({', '.join(_short(b) for b in bound)})")
            rule = rule.func
        elif inspect.isfunction(rule) and hasattr(rule, "__wrapped__"):
            notes.append(f"wrapped by {rule.__qualname__}")
            rule = rule.__wrapped__
        else:
            break
    return rule, notes


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def rule_location(rule: Any) -> str:
    """``path:line qualname`` for a Python rule (path relative to the package's parent), or what it is."""
    fn, notes = _unwrap(rule)
    if isinstance(fn, np.ufunc):
        where = f"numpy ufunc {fn.__name__}"
    elif inspect.isfunction(fn) or inspect.ismethod(fn):
        code = fn.__code__
        where = f"{_relpath(code.co_filename)}:{code.co_firstlineno} {fn.__qualname__}"
    else:
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
        module = getattr(fn, "__module__", None)
        where = f"{module}.{name}" if module else str(name)
    return " ".join([where, *(f"[{n}]" for n in notes)])


def _captured(rule: Any) -> list[str]:
    """The functions a factory-built rule closes over (the part that differs per primitive)."""
    fn, _ = _unwrap(rule)
    if not inspect.isfunction(fn) or not fn.__closure__:
        return []
    out = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        inner, _ = _unwrap(value)
        if inspect.isfunction(inner) or isinstance(inner, np.ufunc):
            out.append(f"{name} = {rule_location(value)}")
    return out


def _status(prim: P.Primitive, table: P.RuleTable) -> tuple[str, str]:
    """(status word, detail) of ``prim`` in ``table``."""
    rule = table.rules.get(prim)
    if rule is not None:
        return HAS, rule_location(rule)
    reason = P.not_supported.get((prim, table.name))
    if reason is not None:
        return UNSUPPORTED, f"not supported: {reason}"
    if not table.applies_to(prim):
        return NOT_APPLICABLE, "not applicable: first-order primitive (this table is for primitives that run a body)"
    return MISSING, "MISSING"


def _lookup(name: str) -> P.Primitive:
    prim = P.registry.get(name) or (P.registry.get(name[:-2]) if name.endswith("_p") else None)
    if prim is None:
        close = difflib.get_close_matches(name, list(P.registry), n=5, cutoff=0.6)
        hint = f"; did you mean: {', '.join(close)}?" if close else "; `python -m ftrans.rules --all` lists them"
        raise KeyError(f"no primitive named {name!r}{hint}")
    return prim


def describe(name: str) -> str:
    """Every table's rule for primitive ``name``: location (plus captured functions), reason, or MISSING."""
    prim = _lookup(name)
    kind = ["higher-order" if prim.higher_order else "first-order",
            "multiple results" if prim.multiple_results else "one result"]
    lines = [f"{prim.name}  ({', '.join(kind)})"]
    width = max(len(n) for n in P.rule_tables)
    for table in P.rule_tables.values():
        status, detail = _status(prim, table)
        lines.append(f"  {table.name:<{width}}  {detail}")
        if status == HAS:
            lines.extend(f"  {'':<{width}}    {c}" for c in _captured(table.rules[prim]))
    return "\n".join(lines)


def summary() -> tuple[str, int]:
    """One line per primitive with its status in every table, and the number of missing rules."""
    tables = list(P.rule_tables.values())
    width = max(len(n) for n in P.registry)
    cols = [max(len(t.name), len(MISSING)) for t in tables]
    head = "  ".join([f"{'primitive':<{width}}", *(f"{t.name:<{c}}" for t, c in zip(tables, cols))])
    lines = [head.rstrip()]
    missing = 0
    for name in sorted(P.registry):
        prim = P.registry[name]
        words = [_status(prim, t)[0] for t in tables]
        missing += words.count(MISSING)
        lines.append("  ".join([f"{name:<{width}}", *(f"{w:<{c}}" for w, c in zip(words, cols))]).rstrip())
    lines.append("")
    lines.append(f"{len(P.registry)} primitives, {len(tables)} tables; {HAS}: a rule, {UNSUPPORTED}: deliberately "
                 f"absent (reason in `python -m ftrans.rules PRIM`), {NOT_APPLICABLE}: table is for higher-order "
                 f"primitives only; {missing} {MISSING}")
    return "\n".join(lines), missing


def main(argv: Sequence[str] | None = None, out: Callable[[str], Any] = print) -> int:
    """Exit status: 0 done, 1 ``--all`` found a missing rule, 2 unknown primitive."""
    parser = argparse.ArgumentParser(prog="python -m ftrans.rules", description=__doc__.split("\n\n")[0])
    parser.add_argument("primitives", nargs="*", metavar="PRIM", help="primitive names (e.g. sin, scan, jit_call)")
    parser.add_argument("--all", action="store_true", help="one line per primitive (the default with no PRIM)")
    args = parser.parse_args(argv)
    if args.all or not args.primitives:
        text, missing = summary()
        out(text)
        return 1 if missing else 0
    status = 0
    for i, name in enumerate(args.primitives):
        try:
            text = describe(name)
        except KeyError as e:
            print(e.args[0], file=sys.stderr)
            status = 2
            continue
        out(("\n" if i else "") + text)
    return status


if __name__ == "__main__":
    sys.exit(main())
