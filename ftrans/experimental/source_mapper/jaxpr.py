"""The ``jaxpr`` pass: the program as ``make_jaxpr`` prints it, each equation mapped to its user line."""

from __future__ import annotations

import re
from typing import Any

from ftrans.core.config import config
from ftrans.experimental.source_mapper import common
from ftrans.experimental.source_mapper.sourcemap import MappingsGenerator, SourceMap

__all__ = ["canonicalize_filename", "compile_jaxpr", "make_jaxpr_dump"]


def compile_jaxpr(work_dir: str, f: Any, f_args: Any, f_kwargs: dict, **_: Any) -> Any:
    from ftrans.core.jaxpr_api import make_jaxpr

    del work_dir
    return make_jaxpr(f)(*f_args, **f_kwargs)


def canonicalize_filename(file_name: str) -> str:
    """``file_name`` with what ``config.hlo_source_file_canonicalization_regex`` matches removed (unchanged when
    the option is unset, its default)."""
    pattern = config.hlo_source_file_canonicalization_regex
    return re.sub(pattern, "", file_name) if pattern else file_name


def _column(info: Any) -> int:
    """The 0-based column of the expression an equation came from (0 when unknown)."""
    code, lasti = info.code, info.lasti
    if code is None or lasti < 0:
        return 0
    try:
        col = list(code.co_positions())[lasti // 2][2]
    except (AttributeError, IndexError):  # (co_positions is Python 3.11's)
        return 0
    return col or 0


def make_jaxpr_dump(jaxpr: Any, **_: Any) -> common.SourceMapDump:
    lines_map: list = []
    text = jaxpr.pretty_print(source_map=lines_map)
    sources: list[str] = []
    gen = MappingsGenerator()
    for segments in lines_map:
        gen.new_group()
        for start, _end, info in segments:
            if info is None or not info.filename:
                continue
            name = canonicalize_filename(info.filename)
            if name not in sources:
                sources.append(name)
            gen.new_segment(start, sources.index(name), info.lineno - 1, _column(info))
    gen.new_group()
    return common.SourceMapDump(
        source_map=SourceMap(version=3, sources=sources, sources_content=[], mappings=gen.mappings(), names=[]),
        generated_code=text, pass_name="jaxpr")


PASSES = [common.Pass(name="jaxpr", compile_fn=compile_jaxpr, generate_dump=make_jaxpr_dump)]
