"""Writing StableHLO as MLIR text.

ftrans emits the textual form of a StableHLO module rather than building it
through jaxlib's MLIR Python bindings: the text format is a stable, documented
interface that every jaxlib from 0.10 to 0.12 parses, it needs nothing from
``jax._src``, and emitting it is plain string work, which is fast and readable
in ``jit(f).lower(x).as_text()``.  Ops are written in MLIR's *generic* form
(``"stablehlo.add"(%0, %1) : (types) -> type``), which is uniform for every op
and immune to differences in each op's custom pretty syntax.

``FuncEmitter`` hands out SSA names and collects lines for one function;
regions (reduction bodies, comparators) are emitted by nested emitters that
share the function's name counter so every value name stays unique.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.keys import KeyDtype, is_user_edtype, physical_element
from ftrans.core.shape_poly import DimExpr

_ELEMENT = {
    np.dtype(np.bool_): "i1",
    np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "ui8", np.dtype(np.uint16): "ui16", np.dtype(np.uint32): "ui32",
    np.dtype(np.uint64): "ui64",
    np.dtype(np.float16): "f16", np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.complex64): "complex<f32>", np.dtype(np.complex128): "complex<f64>",
    np.dtype(ml_dtypes.int2): "i2", np.dtype(ml_dtypes.int4): "i4", np.dtype(ml_dtypes.uint2): "ui2",
    np.dtype(ml_dtypes.uint4): "ui4",
    np.dtype(ml_dtypes.float4_e2m1fn): "f4E2M1FN", np.dtype(ml_dtypes.float8_e3m4): "f8E3M4",
    np.dtype(ml_dtypes.float8_e4m3): "f8E4M3", np.dtype(ml_dtypes.float8_e4m3b11fnuz): "f8E4M3B11FNUZ",
    np.dtype(ml_dtypes.float8_e4m3fn): "f8E4M3FN", np.dtype(ml_dtypes.float8_e4m3fnuz): "f8E4M3FNUZ",
    np.dtype(ml_dtypes.float8_e5m2): "f8E5M2", np.dtype(ml_dtypes.float8_e5m2fnuz): "f8E5M2FNUZ",
    np.dtype(ml_dtypes.float8_e8m0fnu): "f8E8M0FNU",
}
_NARROW_INTS = {np.dtype(ml_dtypes.int2), np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint2),
                np.dtype(ml_dtypes.uint4)}
_FLOAT_LIKE = {d for d, name in _ELEMENT.items() if name.startswith(("f", "bf"))}
_UNSIGNED_LIKE = {np.dtype(ml_dtypes.uint2), np.dtype(ml_dtypes.uint4)}


def element_type(dtype: np.dtype) -> str:
    return _ELEMENT[np.dtype(dtype)]


def tensor_type(shape: Sequence[int], dtype: np.dtype) -> str:
    dims = "".join(f"{d}x" if d.__class__ is not DimExpr else _symbolic(d) for d in shape)
    return f"tensor<{dims}{_ELEMENT[np.dtype(dtype)]}>"


# Symbolic dimensions (shape polymorphism). While a module is written, a symbolic size is ``?{n}`` in its
# types (``n`` numbers the expression in ``_SYMS``), so the emitter knows which expression each dynamic
# size stands for; ``strip_symbolic`` turns them into MLIR's ``?`` when the text is finished. Ops whose
# result shape is an attribute (``broadcast_in_dim``, ``iota``, ``reshape``) become their dynamic forms, with
# the sizes computed from the function's arguments (``get_dimension_size``): ``dim_sources`` says, for the
# function being written, which argument dimension gives each dimension variable.
_SYM_IDS: dict[DimExpr, int] = {}
_SYMS: list[DimExpr] = []
_PLACEHOLDER = re.compile(r"\?\{(\d+)\}")
_TYPE_DIM = re.compile(r"(?:(\d+)|\?\{(\d+)\})x")
_NO_DIM_ARGS: dict = {}  # (never written: a module's own table replaces it)
_DYNAMIC_FORMS = {"stablehlo.broadcast_in_dim": "stablehlo.dynamic_broadcast_in_dim",
                  "stablehlo.iota": "stablehlo.dynamic_iota", "stablehlo.reshape": "stablehlo.dynamic_reshape"}


def _symbolic(d: DimExpr) -> str:
    i = _SYM_IDS.get(d)
    if i is None:
        i = _SYM_IDS[d] = len(_SYMS)
        _SYMS.append(d)
    return f"?{{{i}}}x"


def strip_symbolic(text: str) -> str:
    """``text`` with its symbolic sizes written as MLIR's ``?``."""
    return _PLACEHOLDER.sub("?", text) if "?{" in text else text


def _type_dims(t: str) -> list:
    """The dimensions of a ranked tensor type written by ``tensor_type`` (ints and DimExprs)."""
    inner = t[t.index("<") + 1:t.rindex(">")]
    out: list = []
    m = _TYPE_DIM.match(inner)
    while m:  # leading ``3x``, ``?{0}x``, up to the element type (``complex<f32>`` has an x of its own)
        out.append(_SYMS[int(m.group(2))] if m.group(2) is not None else int(m.group(1)))
        m = _TYPE_DIM.match(inner, m.end())
    return out


def _partial_order(shapes: list) -> list:
    """The dimension variables that can be solved from ``shapes`` (in order), when some cannot."""
    from ftrans.core.shape_poly import _linear_in

    known: dict = {}
    out = []
    progress = True
    while progress:
        progress = False
        for i, shape in enumerate(shapes):
            for ax, d in enumerate(shape):
                if d.__class__ is DimExpr:
                    lin = _linear_in(d, known)
                    if lin is not None:
                        known[lin[0]] = True
                        out.append((lin[0], i, ax))
                        progress = True
    return out


def aval_type(aval: ShapedArray) -> str:
    d = aval.dtype
    if type(d) is KeyDtype:  # a key array: its uint32 data (the key shape trailing)
        return tensor_type((*aval.shape, *d._impl.key_shape), np.dtype(np.uint32))
    if is_user_edtype(d):  # a user-defined extended dtype: its representation array
        el_shape, el_dtype = physical_element(d)
        return tensor_type((*aval.shape, *el_shape), el_dtype)
    return tensor_type(aval.shape, d)


def compare_type(dtype: np.dtype) -> str:
    """StableHLO's comparison type for operands of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc" or dtype in _FLOAT_LIKE:
        return "FLOAT"
    if dtype.kind in "ub" or dtype in _UNSIGNED_LIKE:
        return "UNSIGNED"
    return "SIGNED"


def i64_array(values: Sequence[int]) -> str:
    """A ``DenseI64ArrayAttr`` (``array<i64: 1, 2>``), as StableHLO ops take dimension lists."""
    vals = ", ".join(str(int(v)) for v in values)
    return f"array<i64: {vals}>" if vals else "array<i64>"


def i64_elements(values: Sequence[int], shape: Sequence[int] | None = None) -> str:
    """A ``DenseIntElementsAttr`` of i64 (``dense<[1, 2]> : tensor<2xi64>``)."""
    arr = np.asarray(values, np.int64)
    if shape is not None:
        arr = arr.reshape(shape)
    return f"{dense(arr)} : {tensor_type(arr.shape, np.dtype(np.int64))}"


def bool_attr(b: bool) -> str:
    return "true" if b else "false"


def dense(value: np.ndarray) -> str:
    """``dense<...>`` for any array: hex of the raw little-endian bytes, exact for every dtype.

    Booleans are written as a list of ``true``/``false``, since MLIR's hex form
    for ``i1`` packs bits differently across versions.
    """
    value = np.asarray(value)
    if value.dtype == np.bool_:
        if value.ndim == 0:
            return f"dense<{bool_attr(bool(value))}>"
        if value.size and (value.all() or not value.any()):
            return f"dense<{bool_attr(bool(value.flat[0]))}>"
        return f"dense<{_nested(value)}>"
    if value.dtype in _NARROW_INTS:  # sub-byte integers: decimal literals, whatever MLIR's storage layout
        ints = value.astype(np.int8)
        if ints.size and ints.ndim and _all_equal(ints):
            return f"dense<{int(ints.reshape(-1)[0])}>"
        return f"dense<{int(ints)}>" if ints.ndim == 0 else f"dense<{_nested_ints(ints)}>"
    if value.size and value.ndim and _all_equal(value):
        value = value.reshape(-1)[:1].reshape(())  # a splat: one element stands for all
    raw = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"), copy=False).tobytes()
    return f'dense<"0x{raw.hex().upper()}">'


def _all_equal(value: np.ndarray) -> bool:
    flat = value.reshape(-1)
    first = flat[:1]
    return bool(flat.view(np.uint8).reshape(flat.size, -1).__eq__(first.view(np.uint8)).all()) if flat.size else True


def _nested(value: np.ndarray) -> str:
    if value.ndim == 0:
        return bool_attr(bool(value))
    return "[" + ", ".join(_nested(v) for v in value) + "]"


def _nested_ints(value: np.ndarray) -> str:
    if value.ndim == 0:
        return str(int(value))
    return "[" + ", ".join(_nested_ints(v) for v in value) + "]"


def _quoted(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


@functools.lru_cache(maxsize=8192)
def _frame_loc(code: Any, lasti: int) -> str:
    """One frame as an MLIR location: its function's qualified name around its file, line and column."""
    line, col = code.co_firstlineno, 0
    if lasti >= 0:
        try:
            pos = list(code.co_positions())[lasti // 2]
            line = pos[0] if pos[0] is not None else line
            col = pos[2] or 0
        except (AttributeError, IndexError):
            pass
    name = getattr(code, "co_qualname", code.co_name)
    return f'"{_quoted(name)}"("{_quoted(code.co_filename)}":{line}:{col})'


def _frames_loc(frames: Sequence[tuple]) -> str:
    """Frames (innermost first) as nested MLIR call-site locations, as JAX writes a traceback."""
    out = _frame_loc(*frames[-1])
    for code, lasti in reversed(frames[:-1]):
        out = f"callsite({_frame_loc(code, lasti)} at {out})"
    return out


def loc(source_info: Any, name: str | None = None, outer: Sequence[tuple] = ()) -> str:
    """An MLIR location naming the user's line (shown by XLA's errors and profiles).

    With ``name`` (``jit(f)/outer/inner/sin``: the program, the ``named_scope`` names, the
    primitive) it is a name location around the line, as JAX writes them, which XLA keeps as
    the op's name in its HLO metadata and profiles.  An equation that recorded the user's
    frames gets them all, then ``outer`` (the frames ``jit`` was lowered from, for ``main``),
    as call sites: ``"jit(f)/sin"(callsite("f"("a.py":3:9) at "g"("a.py":7:2)))``."""
    code = getattr(source_info, "code", None)
    if code is not None or outer:
        frames = (((code, source_info.lasti),) + source_info.callers if code is not None else ()) + tuple(outer)
        where = _frames_loc(frames)
    elif source_info is None:
        return f' loc("{_quoted(name)}")' if name else ""
    else:
        where = f'"{_quoted(source_info.filename)}":{source_info.lineno}:0'
    if name:
        return f' loc("{_quoted(name)}"({where}))'
    return f" loc({where})"


class FuncEmitter:
    """The body of one function (or region): SSA names and lines of ops."""

    def __init__(self, counter: list[int] | None = None, indent: str = "    ",
                 types: dict[str, str] | None = None):
        self.counter = counter if counter is not None else [0]
        self.types: dict[str, str] = types if types is not None else {}  # ssa name -> type
        self.lines: list[str] = []
        self.indent = indent
        self.location = ""  # appended to each op; set per equation by the lowering
        # ``{a = "b"}``: the running equation's ``set_xla_metadata`` attributes, put on each op ("": none)
        self.frontend_attributes = ""
        # dimension variable -> (argument SSA name, axis, coefficient, offset): the argument's size on that
        # axis is ``coefficient * variable + offset`` (a function whose arguments have symbolic sizes); or the
        # SSA name of a ``tensor<i32>`` argument holding its value (a dimension argument)
        self.dim_sources: dict[str, tuple | str] = {}
        # private function -> the dimension variables whose values its calls pass first (shared module-wide)
        self.func_dim_args: dict[str, list[str]] = _NO_DIM_ARGS

    def fresh(self) -> str:
        n = self.counter[0]
        self.counter[0] = n + 1
        return f"%{n}"

    def argument(self, type_: str) -> str:
        """A new block argument of ``type_`` (the caller writes the block header)."""
        a = self.fresh()
        self.types[a] = type_
        return a

    def emit(self, name: str, operands: Sequence[str], result_types: Sequence[str],
             attrs: dict[str, str] | None = None, regions: Sequence[str] = ()) -> list[str]:
        """Emit one op in generic form and return the SSA names of its results.

        ``operands`` are SSA names (their types are known to the emitter);
        ``attrs`` maps attribute names to formatted attribute text; ``regions``
        are texts from ``region``.
        """
        types = self.types
        if self.func_dim_args and name == "func.call":  # a function taking dimension values first
            dvars = self.func_dim_args.get(attrs["callee"][1:]) if attrs else None
            if dvars:
                operands = [*(self.dim_value(v) for v in dvars), *operands]
        if name in _DYNAMIC_FORMS and "?{" in result_types[0]:
            operands = [*operands, self.shape_tensor(_type_dims(result_types[0]))]
            name = _DYNAMIC_FORMS[name]
        ops = ", ".join(operands)
        in_types = ", ".join(types[o] for o in operands)
        nres = len(result_types)
        if nres == 0:
            lhs = ""
            outs: list[str] = []
        elif nres == 1:
            r = self.fresh()
            lhs = f"{r} = "
            outs = [r]
        else:
            r = self.fresh()
            lhs = f"{r}:{nres} = "
            outs = [f"{r}#{i}" for i in range(nres)]
        reg = f" ({', '.join(regions)})" if regions else ""
        att = ""
        if self.frontend_attributes and name not in ("stablehlo.return", "func.return"):
            attrs = dict(attrs or {})
            attrs.setdefault("mhlo.frontend_attributes", self.frontend_attributes)
        if attrs:
            att = " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}"
        for o, t in zip(outs, result_types):
            types[o] = t
        out_t = result_types[0] if nres == 1 else f"({', '.join(result_types)})"
        self.lines.append(
            f'{self.indent}{lhs}"{name}"({ops}){reg}{att} : ({in_types}) -> {out_t}{self.location}'
        )
        return outs

    def add_frontend_attributes(self, value: str, kvs: Sequence[tuple[str, Any]]) -> None:
        """Put ``kvs`` in the ``mhlo.frontend_attributes`` of the op of this body that defined ``value``
        (``set_xla_metadata(x, ...)``); names the op already has keep their values, as in JAX. Nothing for a
        block argument or a value defined outside this body."""
        base = value.split("#")[0]
        heads = (f"{self.indent}{base} = ", f"{self.indent}{base}:")
        for i in range(len(self.lines) - 1, -1, -1):
            line = self.lines[i]
            if not line.startswith(heads):
                continue
            cut = line.rfind(" : (")
            if cut < 0:  # an op in custom assembly form (optimization_barrier)
                return
            head, tail = line[:cut], line[cut:]
            key = "mhlo.frontend_attributes = {"
            at = head.rfind(key)
            present = set()
            if at >= 0:
                inner = head[at + len(key):head.index("}", at)]
                present = {kv.split(" = ")[0].strip() for kv in inner.split(", ") if kv}
            new = ", ".join(f'{k} = "{_quoted(str(v).lower() if isinstance(v, bool) else str(v))}"'
                            for k, v in kvs if k not in present)
            if not new:
                return
            if at >= 0:
                j = at + len(key)
                head = head[:j] + new + (", " if present else "") + head[j:]
            elif head.endswith("}"):  # other attributes
                head = head[:-1] + f", {key}{new}}}}}"
            else:
                head = head + f" {{{key}{new}}}}}"
            self.lines[i] = head + tail
            return

    def emit_barrier(self, operands: Sequence[str]) -> list[str]:
        """``stablehlo.optimization_barrier`` in its custom assembly form (the form MLIR prints and JAX's
        ``as_text`` shows: ``%r:2 = stablehlo.optimization_barrier %a, %b : t1, t2``); results typed as
        the operands."""
        types = self.types
        in_types = [types[o] for o in operands]
        r = self.fresh()
        n = len(operands)
        outs = [r] if n == 1 else [f"{r}#{i}" for i in range(n)]
        for o, t in zip(outs, in_types):
            types[o] = t
        lhs = f"{r} = " if n == 1 else f"{r}:{n} = "
        self.lines.append(f"{self.indent}{lhs}stablehlo.optimization_barrier {', '.join(operands)} : "
                          f"{', '.join(in_types)}{self.location}")
        return outs

    def constant(self, value: np.ndarray) -> str:
        value = np.asarray(value)
        t = tensor_type(value.shape, value.dtype)
        return self.emit("stablehlo.constant", [], [t], {"value": f"{dense(value)} : {t}"})[0]

    def region(self, arg_types: Sequence[str], body: Callable[[FuncEmitter, list[str]], list[str]]) -> str:
        """A one-block region: ``body(emitter, arg_names)`` returns the SSA names it yields."""
        inner = FuncEmitter(self.counter, self.indent + "  ", self.types)
        inner.location = self.location
        inner.frontend_attributes = self.frontend_attributes
        inner.dim_sources = self.dim_sources
        inner.func_dim_args = self.func_dim_args
        args = [inner.argument(t) for t in arg_types]
        results = body(inner, args)
        inner.emit("stablehlo.return", results, [])
        head = ", ".join(f"{a}: {t}" for a, t in zip(args, arg_types))
        body_text = "\n".join(inner.lines)
        return f"{{\n{self.indent}  ^bb0({head}):\n{body_text}\n{self.indent}}}"

    # -- symbolic sizes ---------------------------------------------------------
    def find_dim_sources(self, args: Sequence[str], avals: Sequence[ShapedArray]) -> None:
        """Record, for each dimension variable, the argument dimension it is computed from: one whose size is
        ``k*v + rest``, ``rest`` an expression of variables found before it (JAX's order of solving)."""
        from ftrans.core.shape_poly import _linear_in, solve_order

        shapes = [tuple(getattr(a, "shape", ())) for a in avals]
        try:
            order = solve_order(shapes)
        except ValueError:  # some variable cannot be computed: reported if it is ever needed
            order = []
            for v, i, ax in _partial_order(shapes):
                order.append((v, i, ax))
        known: dict = {}
        for v, i, ax in order:
            _, k, rest = _linear_in(shapes[i][ax], known)
            known[v] = True
            self.dim_sources[v] = (args[i], ax, k, rest)

    def _i32(self, v: int) -> str:
        return self.constant(np.asarray(v, np.int32))

    def dim_value(self, d: Any) -> str:
        """A ``tensor<i32>`` holding the size ``d`` (an int, a DimExpr or a dimension variable's name) in the
        function being written."""
        if d.__class__ is not DimExpr:
            return self._atom_value(d) if isinstance(d, str) else self._i32(int(d))
        scalar = "tensor<i32>"
        total = None
        for mono, c in d._terms:
            term = None
            for atom, p in mono:
                v = self._atom_value(atom)
                for _ in range(p):
                    term = v if term is None else self.emit("stablehlo.multiply", [term, v], [scalar])[0]
            if term is None:
                term = self._i32(c)
            elif c != 1:
                term = self.emit("stablehlo.multiply", [term, self._i32(c)], [scalar])[0]
            total = term if total is None else self.emit("stablehlo.add", [total, term], [scalar])[0]
        return total

    def _atom_value(self, atom: Any) -> str:
        scalar = "tensor<i32>"
        if isinstance(atom, str):
            src = self.dim_sources.get(atom)
            if isinstance(src, str):  # a dimension argument of the function: the value itself
                return src
            if src is None:
                raise NotImplementedError(
                    f"shape polymorphism: the dimension variable '{atom}' is not the size of a dimension of an "
                    "argument (alone or as k*v + c) of the function being lowered, so its value cannot be "
                    "computed; ftrans does not support this yet")
            a, axis, k, rest = src
            size = self.emit("stablehlo.get_dimension_size", [a], [scalar], {"dimension": f"{axis} : i64"})[0]
            if not (isinstance(rest, int) and rest == 0):
                size = self.emit("stablehlo.subtract", [size, self.dim_value(rest)], [scalar])[0]
            if k != 1:
                size = self.emit("stablehlo.divide", [size, self._i32(k)], [scalar])[0]
            return size
        x, y = (self.dim_value(v) for v in atom.args)
        if atom.kind in ("max", "min"):
            return self.emit(f"stablehlo.{atom.kind}imum", [x, y], [scalar])[0]
        # Python's remainder (the divisor's sign) and floor division from the truncating ops, with only
        # arithmetic (which shape refinement folds): mod = rem(rem(x, y) + y, y), floordiv = (x - mod) / y
        r = self.emit("stablehlo.remainder", [x, y], [scalar])[0]
        r = self.emit("stablehlo.add", [r, y], [scalar])[0]
        mod = self.emit("stablehlo.remainder", [r, y], [scalar])[0]
        if atom.kind == "mod":
            return mod
        diff = self.emit("stablehlo.subtract", [x, mod], [scalar])[0]
        return self.emit("stablehlo.divide", [diff, y], [scalar])[0]

    def shape_tensor(self, dims: Sequence[Any]) -> str:
        """A ``tensor<Nxi32>`` of the sizes ``dims`` (ints and DimExprs)."""
        if not dims:
            return self.constant(np.zeros((0,), np.int32))
        parts = [self.emit("stablehlo.reshape", [self.dim_value(d)], ["tensor<1xi32>"])[0] for d in dims]
        if len(parts) == 1:
            return parts[0]
        return self.emit("stablehlo.concatenate", parts, [f"tensor<{len(parts)}xi32>"],
                         {"dimension": "0 : i64"})[0]
