"""Source maps in the TC39 format (https://tc39.es/source-map): what ``source_mapper`` produces.

A source map relates positions in a generated text (a printed jaxpr, a StableHLO or HLO module) to positions
in the sources it came from. Its ``mappings`` hold, per generated line, a list of *segments*: tuples of 1, 4
or 5 integers ``(generated_column[, source_index, source_line, source_column[, name_index]])``, every field
relative to the same field of the previous segment (the generated column only within its line), as the
format stores them. ``MappingsGenerator`` builds them from absolute positions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence

__all__ = ["Mappings", "MappingsGenerator", "Segment", "SourceMap", "decode_segment", "decode_vlq",
           "deserialize_mappings", "encode_segment", "encode_vlq", "serialize_mappings"]

Segment = tuple[int] | tuple[int, int, int, int] | tuple[int, int, int, int, int]
Mappings = Sequence[Sequence[Segment]]

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_VALUE = {c: i for i, c in enumerate(_B64)}
_CONTINUE = 32  # a digit's sixth bit: more digits follow
_DIGIT = 31  # its five value bits


@dataclasses.dataclass(frozen=True, slots=True)
class SourceMap:
    """A version-3 source map: the ``sources`` (file names) with their optional ``sources_content``, the
    ``names`` segments may refer to, and the ``mappings`` (one list of segments per generated line)."""

    version: int
    sources: Sequence[str]
    sources_content: Sequence[str]
    names: Sequence[str]
    mappings: Mappings

    @classmethod
    def from_json(cls, json_data: str) -> SourceMap:
        """The source map a JSON document (``to_json``'s, or any tool's) describes."""
        data = json.loads(json_data)
        try:
            return cls(version=data["version"], sources=data["sources"],
                       sources_content=data.get("sourcesContent", []), names=data.get("names", []),
                       mappings=deserialize_mappings(data["mappings"]))
        except KeyError as e:
            raise ValueError(f"SourceMap.from_json: the source map has no {e.args[0]!r} field") from None

    def to_json(self) -> str:
        """The source map as JSON, its mappings VLQ-encoded, as browsers' and editors' tools read it."""
        return json.dumps({"version": self.version, "sources": self.sources, "sourcesContent": self.sources_content,
                           "names": self.names, "mappings": serialize_mappings(self.mappings)})


def encode_vlq(value: int) -> bytes:
    """``value`` as base-64 VLQ digits: the sign in the lowest bit, then five bits a digit, low ones first."""
    n = (-value << 1) | 1 if value < 0 else value << 1
    out = []
    while True:
        digit, n = n & _DIGIT, n >> 5
        out.append(_B64[digit | (_CONTINUE if n else 0)])
        if not n:
            return "".join(out).encode("ascii")


def _values(enc: Iterable[int]) -> Iterator[int]:
    """The integers a run of VLQ digits (bytes or characters) spells, one after another."""
    n = shift = 0
    for ch in enc:
        try:
            d = _B64_VALUE[chr(ch) if isinstance(ch, int) else ch]
        except KeyError:
            raise ValueError(f"invalid base-64 VLQ digit {ch!r} in a source map") from None
        n |= (d & _DIGIT) << shift
        if d & _CONTINUE:
            shift += 5
            continue
        yield -(n >> 1) if n & 1 else n >> 1
        n = shift = 0
    if shift:
        raise ValueError("a source map's VLQ value ends in the middle of its digits")


def decode_vlq(enc: Iterable[int]) -> int:
    """The first integer the VLQ digits ``enc`` spell."""
    for v in _values(enc):
        return v
    raise ValueError("decode_vlq: no digits")


def encode_segment(seg: Segment) -> bytes:
    """A segment's fields as consecutive VLQs."""
    return b"".join(encode_vlq(v) for v in seg)


def decode_segment(enc: Iterable[int]) -> Segment:
    """The segment a run of VLQs spells (1, 4 or 5 fields)."""
    vals = tuple(_values(enc))
    if len(vals) not in (1, 4, 5):
        raise ValueError(f"a source map segment has 1, 4 or 5 fields, not {len(vals)}")
    return vals  # type: ignore[return-value]


def serialize_mappings(mappings: Mappings) -> str:
    """The ``mappings`` string: lines separated by ``;``, a line's segments by ``,``."""
    return ";".join(",".join(encode_segment(seg).decode("ascii") for seg in line) for line in mappings)


def deserialize_mappings(mappings_str: str) -> Mappings:
    """The segments per line a ``mappings`` string holds."""
    return [[decode_segment(seg.encode("ascii")) for seg in line.split(",")] if line else []
            for line in mappings_str.split(";")]


class MappingsGenerator:
    """Builds ``mappings`` from absolute positions: ``new_group()`` starts the next generated line,
    ``new_segment(col[, source, line, col[, name]])`` maps a place on it; ``mappings()`` is the result, each
    field stored relative to the one before, as the format wants."""

    def __init__(self) -> None:
        self._groups: list[list[Segment]] = []
        self._line: list[Segment] | None = None
        self._col = 0
        self._prev = [0, 0, 0, 0]  # source, source line, source column, name

    def new_group(self) -> None:
        """Start the next generated line."""
        self._line = []
        self._groups.append(self._line)
        self._col = 0

    def new_segment(self, *seg: int) -> None:
        """Map generated column ``seg[0]`` of the current line to ``seg[1:]`` (source index, line, column,
        optional name index; all absolute)."""
        if self._line is None:
            raise RuntimeError("MappingsGenerator.new_segment: no current line; call new_group() first")
        if len(seg) not in (1, 4, 5):
            raise ValueError(f"a source map segment has 1, 4 or 5 fields, not {len(seg)}")
        rel = [seg[0] - self._col]
        self._col = seg[0]
        for k, v in enumerate(seg[1:]):
            rel.append(v - self._prev[k])
            self._prev[k] = v
        self._line.append(tuple(rel))  # type: ignore[arg-type]

    def mappings(self) -> Mappings:
        return self._groups
