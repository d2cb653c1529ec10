"""JAX's ``jax.debug``: ``print``, ``log`` and ``callback`` (host callbacks that work under every transform), and
``visualize_array_sharding`` for looking at layouts."""

from __future__ import annotations

import builtins
import sys
import warnings
from typing import Any

import numpy as np

from ftrans._callback import debug_callback as callback
from ftrans._callback import debug_log as log
from ftrans._callback import debug_print as print  # noqa: A004 - JAX's name
from ftrans.core.ir import DebugEffect, OrderedDebugEffect  # noqa: F401  (JAX's effect types of debug callbacks)
from ftrans.errors import FtransValueError

__all__ = ["visualize_array_sharding", "visualize_sharding", "ShardingTable", "callback", "print", "log",
           "inspect_array_sharding", "breakpoint", "DebugEffect", "OrderedDebugEffect"]


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


def sharding_table(shape: Any, sharding: Any) -> ShardingTable:
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


def _show(table: ShardingTable) -> None:
    # In IPython/Jupyter the table is displayed (as HTML in a notebook); elsewhere printed as text. Nothing
    # is returned, as in JAX, so a notebook cell ending in the call shows the table once.
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is not None:
        from IPython.display import display

        display(table)
    else:
        builtins.print(table)


def visualize_sharding(shape: Any, sharding: Any, **_: Any) -> None:
    """Show which devices hold each block of an array of ``shape`` (rank 1 or 2) laid out as ``sharding``.

    Printed as a text table (displayed as HTML in a notebook); returns None, as JAX's does.
    """
    _show(sharding_table(shape, sharding))


def visualize_array_sharding(arr: Any, **kwargs: Any) -> None:
    """Show which device holds each block of ``arr`` (rank 1 or 2): ``visualize_sharding`` of its shape and
    sharding."""
    visualize_sharding(arr.shape, arr.sharding, **kwargs)




# ---------------------------------------------------------------- inspect_array_sharding (log: _callback.debug_log)


def inspect_array_sharding(value: Any, *, callback: Any) -> None:
    """JAX's ``jax.debug.inspect_array_sharding``: call ``callback`` with the sharding of every array in the
    pytree ``value``.  Concrete arrays (and autodiff tracers of concrete values) report their own
    sharding at once.  Inside ``jit`` the report comes when the program is lowered or compiled, as JAX's:
    in a program partitioned over several devices, when XLA compiles it, with the layout XLA's partitioner
    chose for the value (a ``NamedSharding`` over the program's mesh); in a program on one device, when it
    is lowered, with the sharding the value is constrained to, or for an argument its layout, else the
    device's.  Once the program is compiled and cached, calls of it report nothing."""
    from ftrans.core import pytrees as tree_util
    from ftrans.core.array import Array

    if not callable(callback):
        from ftrans.errors import FtransTypeError

        raise FtransTypeError(f"inspect_array_sharding: callback must be callable, got {type(callback).__name__}")
    from ftrans.core.prims.callbacks import ShardingInspector, inspect_sharding_p
    from ftrans.core.trace import Tracer

    for leaf in tree_util.tree_leaves(value):
        # An autodiff tracer outside jit (an eager grad's) reports the layout of its concrete primal.
        known = leaf
        while isinstance(known, Tracer) and hasattr(known, "primal") and known.to_concrete_value() is not None:
            known = known.primal
        if isinstance(known, Array):
            callback(known.sharding)
            continue
        # a traced value: the equation reports it when the program is lowered (see the lowering rule)
        inspect_sharding_p.bind(leaf, callback=ShardingInspector(callback, _traced_layout(leaf)))


def _traced_layout(leaf: Any) -> Any:
    """What a traced value's layout is known to be while tracing: its type's sharding, an argument's layout
    (one device holding it whole: replicated over its mesh, as the compiler reports it), else the default
    device."""
    from ftrans.core.trace import Tracer

    sharding = getattr(getattr(leaf, "aval", None), "typed_sharding", None)
    if sharding is None and isinstance(leaf, Tracer):
        from ftrans.transforms.jit import input_layout

        sharding = input_layout(leaf)
        if sharding is not None and hasattr(sharding, "spec") and len(sharding.device_set) == 1:
            from ftrans.sharding import PartitionSpec

            sharding = type(sharding)(sharding.mesh, PartitionSpec())
    if sharding is None:
        from ftrans.devices import default_device
        from ftrans.sharding import SingleDeviceSharding

        sharding = SingleDeviceSharding(default_device())
    return sharding


# ---------------------------------------------------------------- breakpoint


def _user_frames(num_frames: int | None) -> list:
    """``(filename, line, function, locals, globals, source, offset)`` of the innermost user frames (outside
    ftrans and jax): ``source`` is the lines of the frame's function (or module), ``offset`` the index of the
    current line among them (None when the source cannot be read)."""
    import inspect
    import sys

    from ftrans.errors import LIBRARY_DIRS

    out = []
    f = sys._getframe(2)
    while f is not None and (num_frames is None or len(out) < num_frames):
        if not f.f_code.co_filename.startswith(LIBRARY_DIRS):
            try:
                _, start = inspect.getsourcelines(f)
                source = inspect.getsource(f).split("\n")
                offset = f.f_lineno - max(start, 1)
            except (OSError, TypeError):
                source, offset = [], None
            out.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name, dict(f.f_locals), f.f_globals,
                        source, offset))
        f = f.f_back
    return out


class _Debugger:
    """A small pdb-like console over the frames a ``breakpoint`` captured, with JAX's CLI debugger's
    commands and output: ``p``/``pp`` EXPR, a bare expression, ``l``/``list``, ``w``/``where``/``bt``,
    ``u``/``up``, ``d``/``down``, ``c``/``cont``/``continue``, ``q``/``quit``/``exit``.  Expressions see the
    frame's globals and, over them, its locals.  It reads ``stdin`` (``sys.stdin`` unless the breakpoint
    was given one); at the end of input it continues, so a non-interactive run never blocks."""

    def __init__(self, frames: list, stdin: Any = None, stdout: Any = None):
        self.frames = frames
        self.index = 0
        self.stdin, self.stdout = stdin, stdout

    def _write(self, text: str) -> None:
        import sys

        out = self.stdout if self.stdout is not None else sys.stdout
        out.write(text)
        out.flush()

    def _out(self, text: str) -> None:
        self._write(text + "\n")

    def _eval(self, expr: str) -> Any:
        frame = self.frames[self.index]
        env = {**frame[4], **frame[3]}
        return eval(expr, {}, env)  # noqa: S307  (the user's own debugger expression)

    def _error(self, e: BaseException) -> None:
        import traceback

        self._out("*** " + traceback.format_exception_only(type(e), e)[-1].strip())

    def _where(self) -> None:
        lines = ["Traceback:"]
        for fn, line, _, _, _, source, offset in reversed(self.frames):
            lines.append(f'  File "{fn}", line {line}')
            lines.append("    <no source>" if offset is None else f"    {source[offset].strip()}")
        self._out("\n".join(lines))

    def _context(self, num_lines: int = 2) -> None:
        fn, line, _, _, _, source, offset = self.frames[self.index]
        lines = [f"> {fn}({line})"]
        if offset is not None:
            for i, src in enumerate(source):
                if offset - 1 - num_lines <= i <= offset + num_lines:
                    lines.append(("->  " if i == offset else "    ") + src)
        self._out("\n".join(lines))

    def run(self) -> None:
        import sys

        stdin = self.stdin if self.stdin is not None else sys.stdin
        interactive = self.stdin is None and bool(getattr(stdin, "isatty", lambda: False)())
        self._out("Entering jdb:")
        while True:
            self._write("(jdb) ")
            try:
                cmd = stdin.readline()
            except (OSError, ValueError):  # stdin closed or unreadable: continue the program
                cmd = ""
            if not cmd:  # end of input: continue (never block a non-interactive run)
                if not interactive and self.stdin is None:
                    self._out("")
                return
            cmd = cmd.strip()
            head, _, rest = cmd.partition(" ")
            try:
                if head in ("c", "cont", "continue", "q", "quit", "exit"):
                    return
                if head in ("p", "pp"):
                    import pprint

                    val = self._eval(rest)
                    self._out(pprint.pformat(val) if head == "pp" else repr(val))
                elif head in ("l", "list"):
                    self._context(num_lines=5)
                elif head in ("w", "where", "bt"):
                    self._where()
                elif head in ("u", "up"):
                    if self.index == len(self.frames) - 1:
                        self._out("At topmost frame.")
                    else:
                        self.index += 1
                    self._context()
                elif head in ("d", "down"):
                    if self.index == 0:
                        self._out("At bottommost frame.")
                    else:
                        self.index -= 1
                    self._context()
                elif cmd:
                    self._out(repr(self._eval(cmd)))
            except Exception as e:  # noqa: BLE001  (a bad expression is reported, as pdb does)
                self._error(e)


def breakpoint(*, backend: Any = None, filter_frames: bool = True, num_frames: int | None = None,  # noqa: A001
               ordered: bool = False, token: Any = None, **kwargs: Any) -> Any:
    """JAX's ``jax.debug.breakpoint``: stop at this line when it runs (eagerly, or inside ``jit``/``vmap``/
    control flow when the compiled program reaches it) and open a debugger over the user's frames, with
    the arrays among their local variables holding their run-time values.  Commands come from
    ``sys.stdin`` (``p x``, ``l``, ``w``, ``u``/``d``, ``c``), or from the ``stdin`` keyword with the output
    going to ``stdout`` (as JAX's CLI debugger takes them); at the end of input the program continues, so a
    non-interactive run never waits.  ``backend`` is accepted (ftrans has one console debugger)."""
    from ftrans.core import pytrees as tree_util
    from ftrans.core.array import Array
    from ftrans.core.trace import Tracer

    frames = _user_frames(num_frames)
    if not frames:
        return token
    arrays, layout = [], []
    array_types = (Array, Tracer, np.ndarray)
    for fn, line, name, env, globs, source, offset in frames:
        static, dyn = {}, []
        for k, v in env.items():
            try:
                with warnings.catch_warnings():  # (generators and other odd locals are leaves, quietly)
                    warnings.simplefilter("ignore")
                    leaves, tree = tree_util.tree_flatten(v)
            except Exception:  # noqa: BLE001  (an object pytrees cannot take: shown as it is)
                leaves, tree = [], None
            if any(isinstance(x, array_types) for x in leaves):  # its arrays travel as run-time values
                dyn.append((k, tree, len(leaves)))
                arrays.extend(leaves)
            else:
                static[k] = v
        layout.append((fn, line, name, static, dyn, globs, source, offset))

    def host(*vals: Any) -> None:
        pos = 0
        captured = []
        for fn, line, name, static, dyn, globs, source, offset in layout:
            env = dict(static)
            for k, tree, n in dyn:
                env[k] = tree_util.tree_unflatten(tree, list(vals[pos:pos + n]))
                pos += n
            captured.append((fn, line, name, env, globs, source, offset))
        _Debugger(captured, kwargs.get("stdin"), kwargs.get("stdout")).run()

    callback(host, *arrays, ordered=ordered)
    return token
