"""JAX's ``jax.debug``: ``print``, ``log`` and ``callback`` (host callbacks that work under every transform), and
``visualize_array_sharding`` for looking at layouts."""

from __future__ import annotations

import builtins
from typing import Any

from ftrans._callback import debug_callback as callback
from ftrans._callback import debug_log as log
from ftrans._callback import debug_print as print  # noqa: A004 - JAX's name
from ftrans.errors import FtransValueError

__all__ = ["visualize_array_sharding", "visualize_sharding", "ShardingTable", "callback", "print", "log"]


class ShardingTable:
    """A rank-1 or rank-2 array's blocks and the devices holding each; prints as a text table and shows as
    an HTML table in a notebook."""

    def __init__(self, shape: tuple, rows: list, cols: list, cells: dict):
        self.shape = shape
        self.rows = rows  # (start, stop) of each block along dimension 0
        self.cols = cols  # the same along dimension 1 (one full block for rank 1)
        self.cells = cells  # (row, col) -> device labels

    @staticmethod
    def _label(devs: list) -> str:
        plat = devs[0].platform.upper()
        return f"{plat} " + ",".join(str(d.id) for d in sorted(devs, key=lambda d: d.id))

    def __str__(self) -> str:
        labels = {k: self._label(v) for k, v in self.cells.items()}
        width = max(len(s) for s in labels.values()) + 2
        sep = "+" + "+".join(["-" * width] * len(self.cols)) + "+"
        lines = [sep]
        for r in range(len(self.rows)):
            lines.append("|" + "|".join(labels[(r, c)].center(width) for c in range(len(self.cols))) + "|")
            lines.append(sep)
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        palette = ["#d6e9f8", "#fde2c4", "#d9f2d0", "#f7d4e4", "#e6dcf5", "#fff3bf", "#d1f0ee", "#eadbc8"]
        out = ['<table style="border-collapse:collapse;font-family:monospace">']
        for r in range(len(self.rows)):
            out.append("<tr>")
            for c in range(len(self.cols)):
                devs = self.cells[(r, c)]
                color = palette[min(d.id for d in devs) % len(palette)]
                out.append(f'<td style="border:1px solid #444;padding:6px 12px;text-align:center;'
                           f'background:{color}">{self._label(devs)}</td>')
            out.append("</tr>")
        out.append("</table>")
        return "".join(out)


def visualize_sharding(shape: Any, sharding: Any, **_: Any) -> ShardingTable:
    """The table of which devices hold each block of an array of ``shape`` laid out as ``sharding``."""
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise FtransValueError(f"visualize_array_sharding: only rank-1 and rank-2 arrays can be shown, got an array "
                               f"of shape {shape}; reshape it first")
    idx = sharding.devices_indices_map(shape)
    full2 = shape if len(shape) == 2 else (1, shape[0])

    def bounds(sl: slice, n: int) -> tuple:
        start, stop, _ = sl.indices(n)
        return (start, stop)

    blocks: dict = {}
    for dev, index in idx.items():
        index = tuple(index) + (slice(None),) * (len(shape) - len(index))
        if len(shape) == 1:
            key = ((0, 1), bounds(index[0], shape[0]))
        else:
            key = (bounds(index[0], full2[0]), bounds(index[1], full2[1]))
        blocks.setdefault(key, []).append(dev)
    rows = sorted({k[0] for k in blocks})
    cols = sorted({k[1] for k in blocks})
    cells = {(rows.index(k[0]), cols.index(k[1])): v for k, v in blocks.items()}
    return ShardingTable(shape, rows, cols, cells)


def visualize_array_sharding(arr: Any, **kwargs: Any) -> ShardingTable:
    """Print which device holds each block of ``arr`` (rank 1 or 2) and return the table (it shows as
    HTML in a notebook)."""
    table = visualize_sharding(arr.shape, arr.sharding, **kwargs)
    builtins.print(table)
    return table
