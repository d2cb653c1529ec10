"""The HLO passes: StableHLO (``hlo:stable-hlo``), the HLO module XLA is given (``hlo:original``) and the one
it compiled (``hlo:optimized``), each line holding an instruction with a user location mapped to it.

HLO text names an instruction's place in its ``metadata``: XLA's current format lists the module's
``FileNames``, ``FunctionNames``, ``FileLocations`` and ``StackFrames`` before the computations and gives each
instruction a ``stack_frame_id``; the older one writes ``source_file="..." source_line=N`` on the instruction.
Both are read. HLO has no columns worth mapping: segments point at column 0 of the source line.
"""

from __future__ import annotations

import enum
import re
from typing import Any

from ftrans.experimental.source_mapper import common, mlir
from ftrans.experimental.source_mapper.sourcemap import MappingsGenerator, SourceMap

__all__ = ["HloPass", "parse_hlo_dump"]


class HloPass(enum.Enum):
    STABLE_HLO = "hlo:stable-hlo"
    ORIGINAL = "hlo:original"
    OPTIMIZED = "hlo:optimized"


_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_OLD_META = re.compile(r'metadata=\{[^}]*?source_file="(?P<file>(?:[^"\\]|\\.)*)"[^}]*?source_line=(?P<line>\d+)')
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_ENTRY = re.compile(r"^(\d+)\s+(.*)$")
_FIELDS = {"FileLocations": ("file_name_id", "function_name_id", "line", "end_line", "column", "end_column"),
           "StackFrames": ("file_location_id", "parent_frame_id")}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _source_map(gen: MappingsGenerator, sources: list[str]) -> SourceMap:
    gen.new_group()
    return SourceMap(version=3, sources=sources, sources_content=[], mappings=gen.mappings(), names=[])


def _parse_hlo_old_format(lines: list[str]) -> SourceMap:
    """Instructions carrying ``source_file``/``source_line`` in their metadata."""
    gen = MappingsGenerator()
    sources: list[str] = []
    for line in lines:
        gen.new_group()
        m = _OLD_META.search(line)
        if m:
            file = m.group("file")
            if file not in sources:
                sources.append(file)
            gen.new_segment(_indent(line), sources.index(file), int(m.group("line")) - 1, 0)
    return _source_map(gen, sources)


def _fields(section: str, body: str) -> dict[str, int]:
    body = body.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError(f"HLO {section} entry is not a {{...}} record: {body!r}")
    out = {}
    for part in body[1:-1].split():
        k, sep, v = part.partition("=")
        if not sep:
            continue
        if k not in _FIELDS[section]:
            raise ValueError(f"Unknown attribute for {section}: {k}")
        out[k] = int(v)
    return out


def _parse_hlo_new_format(lines: list[str]) -> SourceMap:
    """Instructions naming a ``stack_frame_id`` of the module's ``StackFrames`` table."""
    file_names: dict[int, str] = {}
    locations: dict[int, dict[str, int]] = {}
    frames: dict[int, dict[str, int]] = {}
    section = None
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line in _SECTIONS:
            section = line
            continue
        m = _ENTRY.match(line)
        if m is None or section is None:
            if not m:
                section = None if "{" in line or "=" in line else section
            continue
        key, body = int(m.group(1)), m.group(2)
        if section == "FileNames":
            fm = re.match(r'^"((?:[^"\\]|\\.)*)"$', body.strip())
            if fm:
                file_names[key] = fm.group(1)
        elif section == "FileLocations":
            locations[key] = _fields(section, body)
        elif section == "StackFrames":
            frames[key] = _fields(section, body)
    gen = MappingsGenerator()
    sources: list[str] = []
    for line in lines:
        gen.new_group()
        if "metadata={" not in line:
            continue
        m = _FRAME_ID.search(line)
        if m is None:
            continue
        frame_id = int(m.group(1))
        frame = frames.get(frame_id)
        if frame is None:
            raise ValueError(f"Could not find mapping for stack_frame_id={frame_id}")
        loc = locations.get(frame.get("file_location_id", -1))
        if loc is None:
            raise ValueError(f"Could not find mapping for file_location_id={frame.get('file_location_id')}")
        file = file_names.get(loc.get("file_name_id", -1))
        if not file:
            continue
        if file not in sources:
            sources.append(file)
        gen.new_segment(_indent(line), sources.index(file), loc.get("line", 1) - 1, 0)
    return _source_map(gen, sources)


def parse_hlo_dump(text: str) -> SourceMap:
    """The source map of HLO text, in either metadata format."""
    lines = text.split("\n")
    if any(line.strip() == "FileNames" for line in lines):
        return _parse_hlo_new_format(lines)
    return _parse_hlo_old_format(lines)


def trace_and_lower(work_dir: str, f: Any, f_args: Any, f_kwargs: dict, **_: Any) -> tuple[Any, str]:
    from ftrans.transforms.jit import jit

    return jit(lambda *args: f(*args, **f_kwargs)).lower(*f_args), work_dir


def stable_hlo_generate_dump(args: tuple[Any, str], **_: Any) -> common.SourceMapDump:
    lowered, _work_dir = args
    text = lowered.as_text(debug_info=True)
    return common.SourceMapDump(source_map=mlir.create_mlir_sourcemap(text), generated_code=text,
                                pass_name=HloPass.STABLE_HLO.value)


def original_hlo_generate_dump(args: tuple[Any, str], **_: Any) -> common.SourceMapDump:
    lowered, _work_dir = args
    text = lowered.as_text(dialect="hlo", debug_info=True)
    return common.SourceMapDump(source_map=parse_hlo_dump(text), generated_code=text,
                                pass_name=HloPass.ORIGINAL.value)


def optimized_generate_dump(args: tuple[Any, str], xla_compiler_flags: dict | None = None,
                            **_: Any) -> common.SourceMapDump:
    lowered, work_dir = args
    text = lowered.compile({"xla_dump_to": work_dir, **(xla_compiler_flags or {})}).as_text()
    return common.SourceMapDump(source_map=parse_hlo_dump(text), generated_code=text,
                                pass_name=HloPass.OPTIMIZED.value)


PASSES = [common.Pass(name=p.value, compile_fn=trace_and_lower, generate_dump=dump)
          for p, dump in ((HloPass.STABLE_HLO, stable_hlo_generate_dump), (HloPass.ORIGINAL, original_hlo_generate_dump),
                          (HloPass.OPTIMIZED, optimized_generate_dump))]
