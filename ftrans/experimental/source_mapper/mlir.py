"""Source maps of MLIR text (StableHLO as ``Lowered.as_text(debug_info=True)`` prints it).

An op's location is either written on it (``loc("file":line:col)``, ``loc("name"(...))``,
``loc(callsite(callee at caller))``) or named (``loc(#loc12)``) and defined after the module
(``#loc12 = loc(...)``). A named-scope location stands for the location inside it, a call site for its
callee: the innermost user frame. ``loc(unknown)`` and the ``"-"`` file (MLIR's stand-in for text parsed
without a location) map nowhere.
"""

from __future__ import annotations

import re

from ftrans.experimental.source_mapper.sourcemap import MappingsGenerator, SourceMap

__all__ = ["create_mlir_sourcemap", "parse_mlir_locations"]

_DEF = re.compile(r"^(#loc\d*)\s*=\s*(loc\(.*\))\s*$")
_USE = re.compile(r"loc\((#loc\d*)\)")
_INLINE = re.compile(r'loc\((?:"[^"]*"|callsite|fused)')
_FILE = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+):(\d+)')

# a resolved location: (file, 1-based line, column)
_Location = tuple[str, int, int]
_Loc = _Location | str | None  # a location, the name of another, or nowhere


def _loc_body(text: str, start: int) -> tuple[str, int]:
    """The text between ``loc(`` at ``start`` and its closing parenthesis (quotes respected), and the index
    after that parenthesis."""
    i = start + 4
    depth, body_start = 1, i
    in_str = False
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[body_start:i], i + 1
        i += 1
    return text[body_start:], len(text)


def _parse(body: str) -> _Loc:
    """What a location's body says: a file location, the name of another (``#loc3``), or None."""
    body = body.strip()
    if body.startswith("#loc"):
        return body
    m = _FILE.match(body)
    if m:
        return (m.group(1), int(m.group(2)), int(m.group(3)))
    if body.startswith("callsite("):  # callsite(callee at caller): the callee is the innermost frame
        inner = body[len("callsite("):]
        callee = _split_at(inner)
        return _parse(callee)
    if body.startswith('"'):  # "name"(inner) or "name"
        m = re.match(r'^"(?:[^"\\]|\\.)*"\s*(\((.*)\))?\s*$', body, re.S)
        if m and m.group(2) is not None:
            return _parse(m.group(2))
        return None
    if body.startswith("fused"):  # fused[...]: its first location
        m = re.search(r"\[(.*)\]", body, re.S)
        return _parse(_split_top(m.group(1))[0]) if m else None
    return None


def _split_at(text: str) -> str:
    """The callee of ``callee at caller)``."""
    depth, in_str = 0, False
    for i, c in enumerate(text):
        if in_str:
            in_str = c != '"'
        elif c == '"':
            in_str = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and text.startswith(" at ", i):
            return text[:i]
    return text


def _split_top(text: str) -> list[str]:
    parts, depth, in_str, start = [], 0, False, 0
    for i, c in enumerate(text):
        if in_str:
            in_str = c != '"'
        elif c == '"':
            in_str = True
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _resolve(loc: _Loc, table: dict[str, _Loc]) -> _Location | None:
    seen = set()
    while isinstance(loc, str):
        if loc in seen:
            return None
        seen.add(loc)
        loc = table.get(loc)
    if loc is None or loc[0] in ("-", ""):
        return None
    return loc


def parse_mlir_locations(lines: list[str]) -> dict[str, _Location]:
    """The named locations (``#locN = loc(...)``) a module's text defines, each resolved to its file location
    (those resolving nowhere left out)."""
    table: dict[str, _Loc] = {}
    for line in lines:
        m = _DEF.match(line.strip())
        if m:
            body, _ = _loc_body(m.group(2), 0)
            table[m.group(1)] = _parse(body)
    out = {}
    for name in table:
        loc = _resolve(name, table)
        if loc is not None:
            out[name] = loc
    return out


def _op_location(line: str, named: dict[str, _Location]) -> _Location | None:
    """The location of the op a line of the module holds: its last ``loc(...)`` (an op's own comes after its
    operands' and arguments')."""
    found = None
    for m in _USE.finditer(line):
        found = (m.start(), named.get(m.group(1)))
    for m in _INLINE.finditer(line):
        if found is None or m.start() > found[0]:
            body, _ = _loc_body(line, m.start())
            found = (m.start(), _resolve(_parse(body), {}))
    return found[1] if found else None


def create_mlir_sourcemap(mlir_dump: str) -> SourceMap:
    """The source map of MLIR text: each line holding an op with a user location maps, from its first
    non-blank column, to that location's file, line and column."""
    lines = mlir_dump.split("\n")
    named = parse_mlir_locations(lines)
    gen = MappingsGenerator()
    sources: list[str] = []
    for line in lines:
        gen.new_group()
        stripped = line.strip()
        if not stripped or _DEF.match(stripped):
            continue
        loc = _op_location(line, named)
        if loc is None:
            continue
        file, lineno, col = loc
        if file not in sources:
            sources.append(file)
        gen.new_segment(len(line) - len(line.lstrip()), sources.index(file), lineno - 1, col)
    gen.new_group()
    return SourceMap(version=3, sources=sources, sources_content=[""] * len(sources), mappings=gen.mappings(),
                     names=[])
