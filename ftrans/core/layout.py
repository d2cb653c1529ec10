"""Array layouts in device memory (JAX's ``Layout`` and ``Format``), for ``ftrans.experimental.layout``.

They live in core so that arrays (``Array.format``) and the sharding helpers (a ``Format`` passed where a
sharding is expected) can read them.  ftrans keeps every array in XLA's default layout (row-major, untiled);
a ``Format`` whose layout is that one, ``Layout.AUTO`` or None stands for its sharding, any other layout is a
``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftrans.core.sharding import Sharding, as_sharding
from ftrans.errors import FtransTypeError, FtransValueError

__all__ = ["Layout", "Format", "AutoLayout", "default_layout", "format_sharding", "as_format", "as_layout",
           "layout_attr", "requested_layout"]


class _AutoLayout:
    """``Layout.AUTO``: let the compiler choose the layout."""

    _inst = None

    def __new__(cls) -> _AutoLayout:
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "AUTO"


class Layout:
    """An array's memory layout: the order of its dimensions from major to minor, and an optional tiling."""

    AUTO = _AutoLayout()

    def __init__(self, major_to_minor: Sequence[int], tiling: Sequence[Sequence[int]] | None = None,
                 sub_byte_element_size_in_bits: int = 0):
        self.major_to_minor = tuple(int(d) for d in major_to_minor)
        self.tiling = None if tiling is None else tuple(tuple(int(t) for t in tile) for tile in tiling)
        self.sub_byte_element_size_in_bits = int(sub_byte_element_size_in_bits)

    def _key(self) -> tuple:
        return (self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits)

    def __repr__(self) -> str:
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Layout) and self._key() == other._key()

    def update(self, **kwargs: Any) -> Layout:
        for k in ("major_to_minor", "tiling", "sub_byte_element_size_in_bits"):
            kwargs.setdefault(k, getattr(self, k))
        return Layout(kwargs["major_to_minor"], kwargs["tiling"], kwargs["sub_byte_element_size_in_bits"])

    def check_compatible_aval(self, aval_shape: Sequence[int]) -> None:
        if len(self.major_to_minor) != len(aval_shape):
            raise FtransValueError(
                "Length of major_to_minor and the rank of the value should match. Got "
                f"major_to_minor={self.major_to_minor} and shape={tuple(aval_shape)}")

    @property
    def is_default(self) -> bool:
        """Row-major with no tiling: the only layout ftrans lays arrays out in."""
        return (self.major_to_minor == tuple(range(len(self.major_to_minor))) and not self.tiling
                and self.sub_byte_element_size_in_bits == 0)


class Format:
    """A layout (a ``Layout``, ``Layout.AUTO`` or None) and a sharding (or None); a concrete layout needs a
    concrete sharding, as in JAX."""

    __slots__ = ("layout", "sharding")

    def __init__(self, layout: Any = None, sharding: Any = None):
        sharding = as_sharding(sharding) if sharding is not None else None
        if isinstance(layout, Layout) and sharding is None:
            raise FtransValueError(
                f"Sharding has to be concrete when layout is of type {type(layout)}. Please pass a "
                "`ftrans.sharding.NamedSharding` or `ftrans.sharding.SingleDeviceSharding` to the sharding "
                f"argument. Got sharding {sharding}")
        if not isinstance(layout, (Layout, _AutoLayout, type(None))):
            raise FtransTypeError(
                "Invalid value received for the layout argument. Expected values are `None`, `Layout.AUTO` or an "
                f"instance of `Layout`. Got {layout} of type {type(layout)}")
        if not isinstance(sharding, (Sharding, type(None))):
            raise FtransTypeError(
                "Invalid value received for the sharding argument. Expected values are `None` or an instance of "
                f"a sharding. Got {sharding} of type {type(sharding)}")
        self.layout = layout
        self.sharding = sharding

    def __repr__(self) -> str:
        return f"Format(layout={self.layout}, sharding={self.sharding})"

    def __hash__(self) -> int:
        return hash((self.layout, self.sharding))

    def __eq__(self, other: Any) -> bool:
        other = as_format(other)  # (JAX's Format compares as ftrans's)
        return isinstance(other, Format) and self.layout == other.layout and self.sharding == other.sharding



AutoLayout = _AutoLayout


def default_layout(ndim: int) -> Layout:
    """The layout every ftrans array has: row-major, untiled (as JAX reports XLA's default on CPU)."""
    return Layout(tuple(range(ndim)), ())


def as_layout(lay: Any) -> Any:
    """ftrans's layout (a ``Layout``, ``Layout.AUTO`` or None) for JAX's (or a runtime buffer's) layout."""
    if lay is None or isinstance(lay, (Layout, _AutoLayout)):
        return lay
    if hasattr(lay, "major_to_minor"):
        return Layout(lay.major_to_minor, lay.tiling, getattr(lay, "sub_byte_element_size_in_bits", 0))
    if type(lay).__name__ == "AutoLayoutSingleton":
        return Layout.AUTO
    return lay


def as_format(x: Any) -> Any:
    """ftrans's ``Format`` for JAX's (its layout as ftrans's); anything else as is."""
    if isinstance(x, Format) or type(x).__name__ != "Format" or not hasattr(x, "layout"):
        return x
    lay = x.layout
    if lay is not None and not hasattr(lay, "major_to_minor"):
        lay = Layout.AUTO
    return Format(as_layout(lay), x.sharding)


def requested_layout(x: Any) -> Any:
    """The layout a jit ``in_shardings``/``out_shardings`` entry asks for: ``Layout.AUTO``, a ``Layout`` other
    than the default one, or None (the default: a plain sharding, a ``Format`` without a layout)."""
    x = as_format(x)
    if not isinstance(x, Format):
        return None
    lay = x.layout
    if isinstance(lay, Layout) and lay.is_default:
        return None
    return lay


def layout_attr(lay: Any, ndim: int) -> str | None:
    """The ``mhlo.layout_mode`` a program's argument or result gets for ``lay`` (as JAX writes it: ``auto``, or
    XLA's minor-to-major layout string); None for the default layout."""
    if lay is None:
        return None
    if isinstance(lay, _AutoLayout):
        return "auto"
    lay.check_compatible_aval((0,) * ndim)
    out = "{" + ",".join(str(d) for d in lay.major_to_minor[::-1])
    if lay.tiling:
        out += ":T" + "".join("(" + ",".join(str(t) for t in tile) + ")" for tile in lay.tiling)
    return out + "}"


def format_sharding(fmt: Format) -> Any:
    """The sharding a ``Format`` stands for, where its layout is one ftrans can give (the default, AUTO, None)."""
    lay = fmt.layout
    if isinstance(lay, Layout) and not lay.is_default:
        raise NotImplementedError(f"{fmt}: {lay} is not the default layout; ftrans lays every array out "
                                  "row-major with no tiling, so it supports only that one")
    return fmt.sharding
