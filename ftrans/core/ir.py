"""The IR: a typed, first-order, functional program (``Jaxpr``).

Variables are identified by object identity and named only when printed, so
building IR never pays for name bookkeeping and passes can freely rebuild it.
Every equation keeps the user's source location, which is what makes printed
IR and error messages point at the user's code rather than at ftrans.
"""

from __future__ import annotations

import collections
import gc
import itertools
import re
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ftrans.core.avals import ShapedArray


class Var:
    """A variable in a jaxpr; compared by identity."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        # JAX's: the identity and the type with its dtype's full name (``Var(id=1404...):float32[5]``)
        a = self.aval
        try:
            t = a.str_short(short_dtypes=False)
        except TypeError:  # a type with no short dtype names (``ShapedArray``, a ref's type)
            dt = getattr(a, "dtype", None)
            t = f"{dt.name}[{','.join(map(str, a.shape))}]" if type(a) is ShapedArray else a.str_short()
        return f"Var(id={id(self)}):{t}"


class Literal:
    """A scalar constant inlined into an equation."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        a = self.aval
        if getattr(a, "weak_type", False) and not getattr(a, "shape", ()) and getattr(a, "dtype", None) is not None \
                and a.dtype.kind == "i":  # a Python int: JAX holds it as a ``TypedInt``, which prints so
            return f"Literal(TypedInt({int(self.val)}, dtype={a.dtype.name}))"
        return f"Literal({self.val})"  # as JAX's: the value as printed (``Literal(1.0)``)

    def str_short(self) -> str:
        v = np.asarray(self.val).item() if np.ndim(self.val) == 0 else self.val
        return f"{v}:{self.aval.str_short()}"


Atom = Var | Literal


class _Transform(NamedTuple):
    """A transform's entry in a ``NameStack`` (``vmap``, ``jvp``, ``transpose``)."""

    name: str


class _InPlaceOf(NamedTuple):
    """A scope standing in place of the innermost scope around it, as its sibling (JAX's ``while/body_pred``:
    a batched loop's predicate, recomputed in the body, is named beside ``while/body``, not inside it)."""

    name: str


class NameStack:
    """The names around an equation, outermost first: ``named_scope`` names and the transforms
    (``vmap``, ``jvp``, ``transpose``) it was staged under, as JAX's.

    ``str`` joins them with ``/``, a transform wrapping the name after it: ``foo/vmap(bar)/baz``
    (``vmap`` applied inside ``foo``, around ``bar``), ``transpose(jvp(foo))``, ``foo/vmap()`` when
    no name follows.  Stacks concatenate with ``+`` (a ``str`` operand is one name).
    """

    __slots__ = ("elems",)

    def __init__(self, elems: tuple = ()):
        self.elems = tuple(elems)

    def extend(self, name: str) -> NameStack:
        """This stack with the scope ``name`` inside it."""
        return NameStack((*self.elems, name))

    def transform(self, name: str) -> NameStack:
        """This stack with the transform ``name`` inside it."""
        return NameStack((*self.elems, _Transform(name)))

    def in_place_of_last(self, name: str) -> NameStack:
        """This stack with the scope ``name`` in place of (beside) its innermost scope once printed:
        ``while/body`` + this + ``f`` prints as ``while/body_pred/f`` (``name`` alone where none is around)."""
        return NameStack((*self.elems, _InPlaceOf(name)))

    def __add__(self, other: NameStack | str) -> NameStack:
        if isinstance(other, str):
            return self.extend(other) if other else self
        return NameStack(self.elems + other.elems)

    def __radd__(self, other: str) -> NameStack:
        return NameStack(((other,) if other else ()) + self.elems)

    def __str__(self) -> str:
        out: list[str] = []
        in_place = None
        for e in reversed(self.elems):  # innermost first: a transform wraps the name after it
            if isinstance(e, _Transform):
                if out:
                    out[-1] = f"{e.name}({out[-1]})"
                else:
                    out.append(f"{e.name}()")
            elif type(e) is _InPlaceOf:
                in_place = e.name
            elif in_place is not None:  # the scope the one inside stands beside: its last name replaced
                head = e.rpartition("/")[0]
                out.append(f"{head}/{in_place}" if head else in_place)
                in_place = None
            else:
                out.append(e)
        if in_place is not None:
            out.append(in_place)
        return "/".join(reversed(out))

    def __repr__(self) -> str:
        return f"NameStack({str(self)!r})"

    def __bool__(self) -> bool:
        return bool(self.elems)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NameStack):
            return self.elems == other.elems
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.elems)


EMPTY_NAME_STACK = NameStack()


class TracebackFrame(NamedTuple):
    """One frame of a :class:`Traceback`, as JAX's ``Traceback.frames`` lists them."""

    file_name: str
    function_name: str
    function_start_line: int
    line_num: int


class Traceback:
    """The user's frames an equation was staged from, innermost first (``SourceInfo.traceback``), as
    JAX's ``Traceback``: ``raw_frames()`` gives the code objects and last instructions, ``frames`` the
    files, functions and lines.  Frames stop at the ``jit`` (or ``make_jaxpr``) being traced."""

    __slots__ = ("_raw",)

    def __init__(self, raw: tuple = ()):
        self._raw = tuple(raw)  # ((code, lasti), ...)

    def raw_frames(self) -> tuple[list, list]:
        return [c for c, _ in self._raw], [i for _, i in self._raw]

    @property
    def frames(self) -> list[TracebackFrame]:
        return [TracebackFrame(c.co_filename, getattr(c, "co_qualname", c.co_name), c.co_firstlineno,
                               _line_of(c, i)) for c, i in self._raw]

    def __add__(self, other: Traceback) -> Traceback:
        return Traceback(self._raw + other._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Traceback) and self._raw == other._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __str__(self) -> str:
        return "\n".join(f"{f.file_name}:{f.line_num} ({f.function_name})" for f in self.frames)

    def __repr__(self) -> str:
        return f"Traceback({len(self._raw)} frames)"


def _line_of(code: Any, lasti: int) -> int:
    """The line the instruction at ``lasti`` of ``code`` is on."""
    if lasti >= 0:
        try:
            line = list(code.co_positions())[lasti // 2][0]
            if line is not None:
                return line
        except (AttributeError, IndexError):
            pass
        for start, end, line in code.co_lines():
            if start <= lasti < end and line is not None:
                return line
    return code.co_firstlineno


class SourceInfo(NamedTuple):
    """Where in the user's program an equation came from, and the names around it (``name_stack``:
    the ``named_scope`` names and transforms, outermost first; empty outside any)."""

    filename: str
    lineno: int
    function: str
    name_stack: NameStack = EMPTY_NAME_STACK
    # The frame's code object and last instruction, from which the column and the qualified function name
    # are read when asked (``location``); None when the place was given as text.
    code: Any = None
    lasti: int = -1
    # The user's frames around that one, innermost first, up to the ``jit`` or ``make_jaxpr`` being traced
    # (``(code, lasti)`` pairs; the lowering writes them as MLIR call-site locations, as JAX's).
    callers: tuple = ()
    # ``set_xla_metadata``'s attributes around the equation (sorted ``(name, text)`` pairs): the lowering
    # puts them on its ops as ``mhlo.frontend_attributes``.
    xla_metadata: tuple = ()

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} ({self.function})"

    @property
    def traceback(self) -> Traceback | None:
        """The user's frames this equation was staged from, innermost first (JAX's ``traceback``)."""
        if self.code is None:
            return None
        return Traceback(((self.code, self.lasti),) + self.callers)

    def location(self) -> str:
        """``file:line:column (qualified.name)``, as JAX names a place in ``print_saved_residuals``."""
        code = self.code
        if code is None:
            return str(self)
        col = None
        if self.lasti >= 0:
            try:
                col = list(code.co_positions())[self.lasti // 2][2]
            except (AttributeError, IndexError):  # (co_positions is Python 3.11's)
                col = None
        name = getattr(code, "co_qualname", self.function)
        where = f"{self.filename}:{self.lineno}" + (f":{col}" if col is not None else "")
        return f"{where} ({name})"


class EqnContext(NamedTuple):
    """An equation's staging context (``JaxprEqn.ctx``): the ``set_xla_metadata`` attributes around it."""

    xla_metadata: dict


class JaxprEqn(NamedTuple):
    primitive: Any  # ftrans.core.primitive.Primitive
    invars: list  # list[Atom]
    outvars: list  # list[Var]
    params: dict
    source_info: SourceInfo | None

    def replace(self, **kw) -> JaxprEqn:
        return self._replace(**kw)

    @property
    def ctx(self) -> EqnContext:
        """The context the equation was staged in (JAX's ``eqn.ctx``): its ``xla_metadata``."""
        info = self.source_info
        return EqnContext(dict(info.xla_metadata) if info is not None else {})

    @property
    def effects(self) -> frozenset:
        """The side effects of this equation (JAX's ``eqn.effects``): its primitive's (``DebugEffect`` for an
        unordered ``debug.print``/``debug.callback``, ``OrderedIOEffect`` for an ordered ``io_callback``, ...),
        or for a higher-order one those of its bodies; empty for a pure equation."""
        return eqn_effects(self)

    def __str__(self) -> str:
        """The equation as it prints inside its jaxpr, its variables named afresh (as JAX's)."""
        return _render(_Printer(False).eqn_doc(self)).rstrip()

    __repr__ = __str__


class Jaxpr:
    """``{ lambda constvars ; invars. let eqns in outvars }``.  Treated as immutable."""

    __slots__ = ("constvars", "invars", "eqns", "outvars", "_declared_effects", "__weakref__")

    def __init__(self, constvars, invars, eqns, outvars, effects=None):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)
        # Effects given explicitly (``replace(effects=...)``), which ``typecheck`` checks the equations' against;
        # None: the equations' own (computed).
        self._declared_effects = None if effects is None else frozenset(effects)

    def replace(self, **kw) -> Jaxpr:
        """JAX's ``Jaxpr.replace``: a copy with some of ``constvars``, ``invars``, ``eqns``, ``outvars``,
        ``effects`` (``debug_info`` is accepted and ignored) replaced."""
        bad = set(kw) - {"constvars", "invars", "eqns", "outvars", "effects", "debug_info"}
        if bad:
            raise TypeError(f"Jaxpr.replace: unexpected keyword argument(s) {sorted(bad)}")
        return Jaxpr(kw.get("constvars", self.constvars), kw.get("invars", self.invars), kw.get("eqns", self.eqns),
                     kw.get("outvars", self.outvars), kw.get("effects", self._declared_effects))

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    # JAX's storage names (``jaxpr._invars = ...``, ``jaxpr._eqns[0] = ...``), for code that edits a jaxpr in place
    _constvars = property(lambda self: self.constvars, lambda self, v: setattr(self, "constvars", list(v)))
    _invars = property(lambda self: self.invars, lambda self, v: setattr(self, "invars", list(v)))
    _eqns = property(lambda self: self.eqns, lambda self, v: setattr(self, "eqns", list(v)))
    _outvars = property(lambda self: self.outvars, lambda self, v: setattr(self, "outvars", list(v)))

    @property
    def effects(self) -> frozenset:
        """The side effects the program has (JAX's ``jaxpr.effects``): the :class:`Effect` of each effectful
        equation (host callbacks doing I/O, ``debug.print``, ...) at any depth; empty for a pure program."""
        if self._declared_effects is not None:
            return self._declared_effects
        if not jaxpr_has_effects(self):
            return frozenset()
        out: set = set()
        for eqn in self.eqns:
            out |= eqn_effects(eqn)
        if any(isinstance(e, JaxprInputEffect) for e in out):  # only those on the program's own inputs
            own = {id(v) for v in self.constvars} | {id(v) for v in self.invars}
            out = {e for e in out if not isinstance(e, JaxprInputEffect) or id(e.input) in own}
        return frozenset(out)

    def pretty_print(self, *, source_info: bool = False, print_shapes: bool = True, custom_pp_eqn_rules: bool = True,
                     name_stack: bool = False, print_effects: bool = False, width: int = 80,
                     use_color: bool | None = None, output_format: Any = None, annotation_prefix: str = " # ",
                     separable_lines: bool = False, source_map: list | None = None,
                     _const_values: list | None = None) -> str:
        """The program as text, as JAX's printer writes it.  ``source_info`` notes each equation's user
        line (``# file:line:column (function)``), ``name_stack`` the ``named_scope``/``named_call`` names it
        was made inside (``# [outer/inner]``), both after the text; ``print_shapes=False`` leaves out the
        variables' types; ``custom_pp_eqn_rules=False`` prints every equation plainly (its primitive's own
        name, every parameter); ``print_effects`` ends each jaxpr with its effects (``: { Debug }``);
        ``width`` is the line length; ``output_format="html"`` (or JAX's ``OutputFormat.HTML``) gives
        HTML, each variable linked to where it is bound.  ``use_color`` and ``separable_lines`` are
        accepted as in JAX; ftrans's text is never coloured.  With ``jax_use_simplified_jaxpr_constants``
        on, the constants print where they are used (``[...]:f32[3]``, a scalar as its value), as JAX's
        literal constants do, and not among the program's binders.  ``source_map``, a list, is filled
        with one list per printed line of ``(start_column, end_column, source_info)``: where on that
        line the text of an equation (``eqn.source_info``) runs, the innermost one where they nest (JAX's
        ``source_map``; ``ftrans.experimental.source_mapper`` reads it)."""
        printer = _Printer(source_info, name_stack, print_shapes=print_shapes, custom_rules=custom_pp_eqn_rules,
                           print_effects=print_effects, html=_is_html(output_format))
        if self.constvars and _simplified_constants():
            printer.inline_consts(self.constvars, _const_values)
        if source_map is not None:
            printer.source_map = True
        return printer.render(self, width, annotation_prefix, source_map)

    def __str__(self) -> str:
        return self.pretty_print()

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:  # IPython
        p.text(str(self))

    def _repr_html_(self) -> str:  # Jupyter
        """The program as HTML: typed variables, one row per equation with its source line,
        nested bodies (control flow, ``jit_call``, custom rules) in collapsible ``<details>``."""
        return _HtmlPrinter().document(self)


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts", "__weakref__")

    def __init__(self, jaxpr: Jaxpr, consts: list):
        if len(consts) != len(jaxpr.constvars):
            raise ValueError(
                f"ClosedJaxpr got {len(consts)} constants for {len(jaxpr.constvars)} constvars"
            )
        self.jaxpr = jaxpr
        self.consts = list(consts)

    @property
    def literals(self) -> list:
        """JAX's name for ``consts`` (the values of the constvars), as custom interpreters read it."""
        return self.consts

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    @property
    def effects(self) -> frozenset:
        """The side effects of the program (``Jaxpr.effects``)."""
        return self.jaxpr.effects

    @property
    def eqns(self) -> list[JaxprEqn]:
        return self.jaxpr.eqns

    def pretty_print(self, **kwargs: Any) -> str:
        """The program as text (``Jaxpr.pretty_print``'s options)."""
        return self.jaxpr.pretty_print(_const_values=self.consts, **kwargs)

    def __str__(self) -> str:
        return self.jaxpr.pretty_print(_const_values=self.consts)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:  # Jupyter
        return _HtmlPrinter().document(self.jaxpr)


# ----------------------------------------------------------------------------
# Nested jaxprs, generically
#
# Higher-order primitives keep their bodies in parameters under names of their own
# (``jaxpr``, ``call_jaxpr``, ``branches``, ``cond_jaxpr``/``body_jaxpr``, ...).  Every
# walk over a whole program (printer, typecheck, DCE, the pass pipeline) goes through
# the two functions below, so a new call-like primitive needs no change to any of them.

_JAXPR_TYPES = (Jaxpr, ClosedJaxpr)

# (primitive, parameter names) -> (names holding one jaxpr or a sequence of them, names
# holding an empty sequence when first seen, which are rechecked per equation).  A
# primitive keeps its bodies under the same names in every equation, so the layout is
# found once and a plain equation costs one dict lookup.
_layouts: dict[tuple, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _holds_jaxprs(v: Any) -> bool:
    if isinstance(v, _JAXPR_TYPES):
        return True
    return isinstance(v, (tuple, list)) and bool(v) and all(isinstance(x, _JAXPR_TYPES) for x in v)


def _layout(eqn: JaxprEqn) -> tuple[str, ...]:
    params = eqn.params
    if not params:
        return ()
    key = (eqn.primitive, tuple(params))
    lay = _layouts.get(key)
    if lay is None:
        held = tuple(k for k, v in params.items() if _holds_jaxprs(v))
        maybe = tuple(k for k, v in params.items() if isinstance(v, (tuple, list)) and not v)
        lay = _layouts[key] = (held, maybe)
    held, maybe = lay
    if maybe:
        extra = [k for k in maybe if _holds_jaxprs(params[k])]
        if extra:
            return tuple(k for k in params if k in held or k in extra)
    return held


def subjaxpr_params(eqn: JaxprEqn) -> tuple[str, ...]:
    """Names of ``eqn``'s parameters that hold a jaxpr or a non-empty sequence of jaxprs, in
    parameter order (the order ``subjaxprs`` lists them in)."""
    return _layout(eqn)


def subjaxprs(eqn: JaxprEqn) -> list[Jaxpr | ClosedJaxpr]:
    """Every jaxpr nested directly in ``eqn`` (not those nested deeper), in a fixed order that
    ``replace_subjaxprs`` accepts back."""
    keys = _layout(eqn)
    if not keys:
        return []
    out: list = []
    params = eqn.params
    for k in keys:
        v = params[k]
        if isinstance(v, _JAXPR_TYPES):
            out.append(v)
        else:
            out.extend(v)
    return out


def replace_subjaxprs(eqn: JaxprEqn, new: list | tuple) -> JaxprEqn:
    """``eqn`` with its nested jaxprs replaced by ``new`` (same order and count as
    ``subjaxprs(eqn)``); the equation itself is returned when nothing changed, so callers
    can test for a rewrite with ``is``."""
    keys = _layout(eqn)
    params = eqn.params
    updates: dict[str, Any] = {}
    i = 0
    for k in keys:
        v = params[k]
        if isinstance(v, _JAXPR_TYPES):
            if i >= len(new):
                break
            if new[i] is not v:
                updates[k] = new[i]
            i += 1
        else:
            n = len(v)
            part = new[i:i + n]
            if len(part) != n:
                break
            if any(a is not b for a, b in zip(part, v)):
                updates[k] = type(v)(part)
            i += n
    else:
        if i == len(new):
            if not updates:
                return eqn
            return eqn._replace(params={**params, **updates})
    raise ValueError(
        f"replace_subjaxprs: equation `{eqn.primitive.name}` holds {len(subjaxprs(eqn))} "
        f"jaxprs but {len(new)} were given"
    )


def map_subjaxprs(eqn: JaxprEqn, fn: Any) -> JaxprEqn:
    """``eqn`` with ``fn`` applied to each nested jaxpr; the same equation if ``fn`` returned
    every jaxpr unchanged."""
    subs = subjaxprs(eqn)
    if not subs:
        return eqn
    return replace_subjaxprs(eqn, [fn(j) for j in subs])


def all_jaxprs(jaxpr: Jaxpr | ClosedJaxpr) -> list[Jaxpr]:
    """``jaxpr`` and every jaxpr nested in it at any depth, each once, outermost first."""
    seen: set[int] = set()
    out: list[Jaxpr] = []
    todo = [jaxpr]
    while todo:
        j = todo.pop()
        if isinstance(j, ClosedJaxpr):
            j = j.jaxpr
        if id(j) in seen:
            continue
        seen.add(id(j))
        out.append(j)
        for eqn in j.eqns:
            todo.extend(reversed(subjaxprs(eqn)))
    return out


# ----------------------------------------------------------------------------
# Printing
#
# The text is laid out the way JAX's printer lays it out, so a printed ftrans program reads (and
# diffs) like a printed JAX one: a bracketed part (a whole jaxpr, an equation's parameters, a tuple
# of branches) stays on one line when it fits in the rest of an 80-column line, and otherwise each
# of its breaks becomes a new line indented by its nesting.  ``{ lambda ; a:f32[3]. let b:f32[3] =
# sin a in (b,) }`` is one line; a longer program puts one equation on each line.
#
# The layout engine is the classic one of Oppen, Wadler and Lindig ("strictly pretty"): a document
# is text, a break (printed as its separator or as a newline), a nested part (more indentation
# after its newlines), a group (all its own breaks flat, or all of them newlines) or a list of
# these.  Whether a group fits is decided when the printer reaches it, from its flat width alone.
# Notes (``source_info``, ``name_stack``) take no room: they are gathered per line and printed after
# the text, aligned one column past the widest line (``  # file:line:col (function)``), as JAX's.

_WIDTH = 80


class _Brk:
    __slots__ = ("sep",)

    def __init__(self, sep: str = " "):
        self.sep = sep


class _Nest:
    __slots__ = ("n", "body")

    def __init__(self, n: int, body):
        self.n, self.body = n, body


class _Group:
    __slots__ = ("body", "_w")

    def __init__(self, body):
        self.body, self._w = body, None


class _Tok:
    """Text with a link in HTML (a variable's or a shared body's name: ``<a id=...>``/``<a href=...>``)."""

    __slots__ = ("text", "html")

    def __init__(self, text: str, html: str):
        self.text, self.html = text, html


class _Ann:
    """A note for the line it lands on (takes no room in the layout)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class _Src:
    """Where an equation's text starts (``info``: its ``SourceInfo``) or, with ``info`` the ``_END`` marker,
    ends; takes no room. Only a printer asked for a source map (``pretty_print(source_map=...)``) emits them."""

    __slots__ = ("info",)

    def __init__(self, info: Any):
        self.info = info


_END = object()


class _Line:
    """A part whose one-line text is known; ``build()`` makes the document that lays it out
    when that text does not fit.  ``anns`` are its notes (kept by the built document too)."""

    __slots__ = ("flat", "build", "width", "anns")

    def __init__(self, flat: str, build, anns: tuple = ()):
        self.flat, self.build, self.anns = flat, build, anns
        self.width = len(flat)


def _flat_width(doc) -> int:
    if isinstance(doc, str):
        return len(doc)
    if isinstance(doc, list):
        return sum(_flat_width(d) for d in doc)
    if isinstance(doc, _Group):
        if doc._w is None:
            doc._w = _flat_width(doc.body)
        return doc._w
    if isinstance(doc, _Brk):
        return len(doc.sep)
    if isinstance(doc, _Nest):
        return _flat_width(doc.body)
    if isinstance(doc, _Line):
        return doc.width
    if isinstance(doc, _Tok):
        return len(doc.text)
    return 0  # _Ann


def _render(doc, width: int = _WIDTH, html: bool = False, annotation_prefix: str = " # ",
            source_map: list | None = None) -> str:
    lines: list[str] = []
    widths: list[int] = []
    notes: dict[int, list[str]] = {}
    cur: list[str] = []
    col = 0
    todo = [(0, False, doc)]
    # source map: the equations open where the layout is (innermost last), and per line the places
    # where the equation the text belongs to changes: [(column, SourceInfo)]
    open_src: list = []
    marks: dict[int, list] = {}
    while todo:
        ind, flat, d = todo.pop()
        if isinstance(d, str):
            cur.append(_esc_html(d) if html else d)
            col += len(d)
        elif isinstance(d, list):
            todo.extend((ind, flat, c) for c in reversed(d))
        elif isinstance(d, _Brk):
            if flat:
                cur.append(d.sep)
                col += len(d.sep)
            else:
                lines.append("".join(cur))
                widths.append(col)
                cur = [" " * ind]
                col = ind
                if open_src:  # the line goes on with the equation still open
                    _mark(marks, len(lines), col, open_src[-1])
        elif isinstance(d, _Group):
            todo.append((ind, flat or col + _flat_width(d) <= width, d.body))
        elif isinstance(d, _Nest):
            todo.append((ind + d.n, flat, d.body))
        elif isinstance(d, _Line):
            if flat or col + d.width <= width:
                cur.append(d.flat)
                col += d.width
                if d.anns:
                    notes.setdefault(len(lines), []).extend(d.anns)
            else:
                todo.append((ind, False, d.build()))
        elif isinstance(d, _Tok):
            cur.append(d.html if html else d.text)
            col += len(d.text)
        elif isinstance(d, _Src):
            if d.info is _END:
                open_src.pop()
                if open_src:  # back in the enclosing equation's text
                    _mark(marks, len(lines), col, open_src[-1])
            else:
                open_src.append(d.info)
                _mark(marks, len(lines), col, d.info)
        else:  # _Ann
            notes.setdefault(len(lines), []).append(d.text)
    lines.append("".join(cur))
    widths.append(col)
    if source_map is not None:
        source_map[:] = [_segments(marks.get(i, ()), widths[i]) for i in range(len(lines))]
    if notes:
        top = max(widths)
        for i, anns in notes.items():
            pads = [" " * (top - widths[i])] + [" " * top] * (len(anns) - 1)
            lines[i] += "\n".join(p + annotation_prefix + (_esc_html(a) if html else a) for p, a in zip(pads, anns))
    return "\n".join(lines)


def _mark(marks: dict, line: int, col: int, info: Any) -> None:
    got = marks.setdefault(line, [])
    if got and got[-1][0] == col:  # nothing printed since the last change: the new one replaces it
        got[-1] = (col, info)
    else:
        got.append((col, info))


def _segments(marks: Any, width: int) -> list:
    """One line's ``(start, end, SourceInfo)`` triples (JAX's printer's source map), the empty ones left out."""
    out = []
    for k, (c, info) in enumerate(marks):
        end = marks[k + 1][0] if k + 1 < len(marks) else width
        if end > c:
            out.append((c, end, info))
    return out


def _esc_html(s: str) -> str:
    # JAX's printer's HTML escaping (its five characters)
    return (s.replace("&", "&amp;").replace('"', "&quot;").replace("'", "&apos;").replace("<", "&lt;")
            .replace(">", "&gt;"))


def _join(sep, docs: list) -> list:
    out: list = []
    for i, d in enumerate(docs):
        if i:
            out.append(sep)
        out.append(d)
    return out


def _names():
    """a, b, ..., z, ba, bb, ... as JAX prints them."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            if n > 1 and combo[0] == "a":
                continue
            yield "".join(combo)


# primitive -> its equation's parameters as printed, in order (``[(name, value), ...]``): a primitive
# whose printed parameters differ from its params sorted by name registers here (the custom-derivative
# calls print their ``name`` first and leave out ``num_consts=0``, as JAX's printer does).
pp_params_rules: dict[Any, Any] = {}

# primitive -> ``rule(eqn, context) -> (printed name, [(param, value), ...])``, for an equation printed
# under another name than its primitive's or naming its body's variables after its own (JAX's
# ``pp_eqn_rules``: a jitted call prints as ``jit[name=f jaxpr={ lambda ... }]``, its body's inputs and
# outputs named as the call's operands and results).  ``context`` is the :class:`JaxprPpContext`.
pp_eqn_rules: dict[Any, Any] = {}


def _printed_params(eqn: JaxprEqn) -> list[tuple[str, Any]]:
    rule = pp_params_rules.get(eqn.primitive)
    if rule is not None:
        return list(rule(eqn.params))
    return sorted(eqn.params.items())


_ADDRESS = re.compile(r" at 0x([0-9a-fA-F]+)")


def _str_param(v: Any) -> str:
    """A parameter's text as JAX prints it: ``str``, with the addresses in it (``<function f at 0x7f..>``)
    written as ``0xXXXX`` so the text does not change from run to run."""
    s = str(v)
    if " at 0x" in s:
        s = _ADDRESS.sub(lambda m: " at 0x" + "X" * len(m.group(1)), s)
    return s


class JaxprPpSettings(NamedTuple):
    """What a printed program shows (JAX's ``JaxprPpSettings``): each variable's type, each equation's
    source line and ``named_scope`` names, primitives' own printing rules, the jaxpr's effects."""

    print_shapes: bool = True
    source_info: bool = False
    name_stack: bool = False
    custom_pp_eqn_rules: bool = True
    print_effects: bool = False


class Doc:
    """A laid-out-on-demand piece of printed IR (what ``pp_kv_pair`` and the like return):
    ``str(doc)`` or ``doc.format(width=80)`` gives its text."""

    __slots__ = ("_doc",)

    def __init__(self, doc: Any):
        self._doc = doc

    def format(self, width: int = _WIDTH, *, use_color: bool | None = None, output_format: Any = None,
               annotation_prefix: str = " # ", **_: Any) -> str:
        return _render(self._doc, width, _is_html(output_format), annotation_prefix)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"Doc({self.format()!r})"


def _is_html(output_format: Any) -> bool:
    """``output_format``: None or ``"text"`` for text, ``"html"`` for HTML (or an enum naming them, such
    as JAX's ``pretty_printer.OutputFormat``)."""
    if output_format is None:
        return False
    name = str(getattr(output_format, "name", output_format)).lower()
    if name not in ("text", "html"):
        raise ValueError(f"pretty_print: output_format must be 'text' or 'html', got {output_format!r}")
    return name == "html"


def _simplified_constants() -> bool:
    """Whether ``jax_use_simplified_jaxpr_constants`` is on (programs print their constants inline)."""
    from ftrans.core.config import config

    return bool(config.read("use_simplified_jaxpr_constants"))


class _Printer:
    def __init__(self, source_info: bool = False, name_stack: bool = False, *, print_shapes: bool = True,
                 custom_rules: bool = True, print_effects: bool = False, html: bool = False):
        self.names: dict[int, str] = {}
        self.gen = _names()
        self.source_info = source_info
        self.name_stack = name_stack
        self.print_shapes = print_shapes
        self.custom_rules = custom_rules
        self.print_effects = print_effects
        self.html = html
        self.shared: dict[int, str] = {}  # id(jaxpr) -> its name, for bodies printed once (_shared)
        self._alive: list = []  # variables named by id that the printed program does not hold
        self._inline: dict[int, str] | None = None  # constvars printed where used (inline_consts)
        self.source_map = False  # mark where each equation's text runs (pretty_print(source_map=...))

    def inline_consts(self, constvars: list, values: list | None) -> None:
        """Print ``constvars`` where they are used, as JAX prints its constants with
        ``jax_use_simplified_jaxpr_constants`` on: ``[...]:f32[3]``, a scalar as its value."""
        self._inline = {}
        for i, v in enumerate(constvars):
            text = f"[...]:{v.aval.str_short()}"
            if not v.aval.shape and values is not None:
                try:
                    text = Literal(np.asarray(values[i], v.aval.dtype)[()], v.aval).str_short()
                except Exception:  # noqa: BLE001 - a value that cannot print as a literal prints as [...]
                    pass
            self._inline[id(v)] = text

    # JAX's JaxprPpContext

    @property
    def shared_jaxpr_names(self) -> set[str]:
        return set(self.shared.values())

    def name(self, v: Var) -> str:
        k = id(v)
        n = self.names.get(k)
        if n is None:
            n = self.names[k] = next(self.gen)
        return n

    def suggest_same_var_names(self, for_vars, like_vars) -> None:
        """Name each of ``for_vars`` (a body's inputs or outputs) as the matching one of ``like_vars`` (the
        operands or results of the equation calling it), where that is a variable not already lent its
        name and the body's variable is not yet named (JAX's rule)."""
        if len(for_vars) != len(like_vars):  # an ill-formed equation
            return
        used: set[int] = set()
        names = self.names
        for f, like in zip(for_vars, like_vars):
            if isinstance(like, Var) and id(like) not in used and isinstance(f, Var) and id(f) not in names:
                used.add(id(like))
                names[id(f)] = "_" if isinstance(like, DropVar) else self.name(like)

    def is_shared(self, jaxpr: Jaxpr | ClosedJaxpr) -> bool:
        """Whether ``jaxpr`` is printed once before the program and named where it is used."""
        return id(jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr) in self.shared

    # The pieces

    def _var_doc(self, n: str, binder: bool) -> Any:
        if not self.html:
            return n
        return _Tok(n, f'<a {"id" if binder else "href"}="{"" if binder else "#"}v_{n}">{_esc_html(n)}</a>')

    def atom(self, a) -> Any:
        n = self.names.get(id(a))
        if n is None:
            if isinstance(a, Literal):
                return a.str_short()
            if self._inline is not None and id(a) in self._inline:
                return self._inline[id(a)]
            n = self.name(a)
        if type(a) is DropVar:
            return "_"
        return self._var_doc(n, False) if self.html else n

    def binder(self, v: Var) -> Any:
        if type(v) is DropVar:
            return f"_:{v.aval.str_short()}" if self.print_shapes else "_"
        n = self.names.get(id(v))
        if n is None:
            n = self.name(v)
        if self.html:
            return [self._var_doc(n, True), f":{v.aval.str_short()}"] if self.print_shapes else self._var_doc(n, True)
        return f"{n}:{v.aval.str_short()}" if self.print_shapes else n

    def param(self, k: str, v: Any) -> str:
        if type(v) is frozenset:  # as JAX prints a set: its elements sorted
            try:
                return f"{k}=frozenset({{{', '.join(repr(e) for e in sorted(v))}}})"
            except TypeError:  # elements with no order
                return f"{k}={v}"
        if k == "impl" and hasattr(v, "tag") and hasattr(v, "key_shape"):  # a PRNG implementation, by its tag
            return f"{k}={v.tag}"
        return f"{k}={_str_param(v)}"

    def render(self, jaxpr: Jaxpr, width: int = _WIDTH, annotation_prefix: str = " # ",
               source_map: list | None = None) -> str:
        # The document is many small objects that all die together: collecting garbage while it
        # is built would only walk them (it tripled the time of a 10,000-equation program).
        enabled = gc.isenabled()
        gc.disable()
        try:
            docs: list = []
            shared = self._shared(jaxpr)
            if shared:  # variables are not named as the bodies printed first
                taken = set(self.shared.values())
                self.gen = (n for n in self.gen if n not in taken)
            self._dropvars(jaxpr)
            for name, j in shared:
                ref = _Tok(name, f'<a id="g_{name}">{_esc_html(name)}</a>') if self.html else name
                docs += ["let ", ref, " = ", self.jaxpr_doc(j, define=True), " in", _Brk()]
            docs.append(self.jaxpr_doc(jaxpr))
            return _render(docs, width, self.html, annotation_prefix, source_map)
        finally:
            if enabled:
                gc.enable()

    def _dropvars(self, jaxpr: Jaxpr) -> None:
        """The program's own results no one reads print as ``_`` (JAX's printer)."""
        eqns = jaxpr.eqns
        used = {id(a) for eqn in eqns for a in eqn.invars}  # (a literal's id is no variable's)
        used.update(id(a) for a in jaxpr.outvars)
        names = self.names
        for eqn in eqns:
            for v in eqn.outvars:
                if id(v) not in used:
                    names[id(v)] = "_"

    def _shared(self, top: Jaxpr) -> list[tuple[str, Jaxpr]]:
        """The nested bodies printed once, before the program (``let name = { lambda ... } in``),
        and referred to by name where they are used, by JAX's rule: a body reached more than once
        (each visit of a shared body counts again for the bodies inside it) or holding more than
        ten equations.  A body is named after the ``name`` parameter of the first equation found
        holding it (``<lambda>`` gives ``lambda``), else ``jaxpr``; a name already taken gets a
        number (``jaxpr1``)."""
        counts: dict[int, int] = {}
        visits: dict[int, int] = {}
        bodies: dict[int, Jaxpr] = {}
        names: dict[int, str] = {}
        todo = collections.deque([top])
        while todo:
            j = todo.popleft()
            k = id(j)
            counts[k] = counts.get(k, 0) + (2 if j is not top and len(j.eqns) > 10 else 1)
            bodies[k] = j
            visits[k] = v = visits.get(k, 0) + 1
            if v > 2:  # two visits already made everything inside it shared: no need to walk it again
                continue
            for eqn in j.eqns:
                subs = [x.jaxpr if isinstance(x, ClosedJaxpr) else x for x in subjaxprs(eqn)]
                name = eqn.params.get("name") if subs else None
                if isinstance(name, str):
                    for x in subs:
                        names.setdefault(id(x), name.strip("<>"))
                todo.extend(subs)
        taken: dict[str, int] = {}
        out = []
        for k, c in counts.items():
            if c == 1:
                continue
            name = names.get(k, "jaxpr")
            n = taken.get(name, 0)
            taken[name] = n + 1
            if n:
                name += str(n)
                taken[name] = taken.get(name, 0) + 1
            self.shared[k] = name
            self._alive.append(bodies[k])
            out.append((name, bodies[k]))
        return out

    # The documents.  A list of names fills its lines: each separator is a group of its own, so
    # it breaks only once the line is full.

    @staticmethod
    def _words(words: list, sep: str = "") -> Any:
        if len(words) <= 1:
            return words[0] if words else ""
        return _Nest(2, _Group(_join([sep, _Group(_Brk())] if sep else _Group(_Brk()), words)))

    def jaxpr_doc(self, jaxpr: Jaxpr, define: bool = False) -> Any:
        if not define and self.shared:
            name = self.shared.get(id(jaxpr))
            if name is not None:
                return _Tok(name, f'<a href="#g_{name}">{_esc_html(name)}</a>') if self.html else name
        inline = self._inline
        consts = self._words([self.binder(v) for v in jaxpr.constvars
                              if inline is None or id(v) not in inline])
        ins = self._words([self.binder(v) for v in jaxpr.invars])
        eqns = _join(_Brk("; "), [self.eqn_doc(e) for e in jaxpr.eqns])
        outs = self._words([self.atom(a) for a in jaxpr.outvars], ",")
        close = ",)" if len(jaxpr.outvars) == 1 else ")"
        body = ["{ lambda ", consts, "; ", ins, ". let", _Nest(2, [_Brk(), eqns]), _Brk(), "in (", outs, close]
        if self.print_effects:
            body.append(f" : {{ {', '.join(_str_param(e) for e in jaxpr.effects)} }}")
        return _Group([_Nest(2, body), " }"])

    def _bracketed(self, opening: str, items: list, closing: str) -> _Group:
        return _Group([_Nest(2, [opening, _Brk(""), _join(_Brk(), items)]), _Brk(""), closing])

    def param_doc(self, k: str, v: Any, nested: bool) -> Any:
        if not nested:
            return self.param(k, v)
        if isinstance(v, (Jaxpr, ClosedJaxpr)):
            return [f"{k}=", self.jaxpr_doc(v.jaxpr if isinstance(v, ClosedJaxpr) else v)]
        docs = [self.jaxpr_doc(x.jaxpr if isinstance(x, ClosedJaxpr) else x) for x in v]
        return [f"{k}=", self._bracketed("(", docs, ")")]

    def eqn_doc(self, eqn: JaxprEqn) -> Any:
        if self.source_map:
            return [_Src(eqn.source_info), self._eqn_doc(eqn), _Src(_END)]
        return self._eqn_doc(eqn)

    def _eqn_doc(self, eqn: JaxprEqn) -> Any:
        prim = eqn.primitive
        rule = pp_eqn_rules.get(prim) if self.custom_rules else None
        if rule is not None:  # before the results are named: it may name them
            pname, printed = rule(eqn, self)
        else:
            pname = prim.name
            printed = _printed_params(eqn) if self.custom_rules else sorted(eqn.params.items())
        anns = self._notes(eqn) if self.source_info or self.name_stack else []
        outs = [self.binder(v) for v in eqn.outvars]
        nested = subjaxpr_params(eqn) if eqn.params else ()
        if nested or self.html:
            kvs = [self.param_doc(k, v, k in nested) for k, v in printed]
            ins = [self.atom(a) for a in eqn.invars]
            return self._eqn_parts(pname, outs, self._bracketed("[", kvs, "]") if kvs else "", ins, anns)
        # A plain equation (most of them): its one-line text is built directly, and the
        # document that may break it is built only if it does not fit (_Line).
        kvs = [self.param(k, v) for k, v in printed]
        ins = [self.atom(a) for a in eqn.invars]
        flat = (f"{' '.join(outs)} = " if outs else "") + pname + \
            (f"[{' '.join(kvs)}]" if kvs else "") + " " + " ".join(ins)
        return _Line(flat, lambda: self._eqn_parts(pname, outs, self._bracketed("[", kvs, "]") if kvs else "", ins,
                                                   anns),
                     tuple(a for a in (anns if outs else anns[1:]) if a is not None) if anns else ())

    def _eqn_parts(self, pname: str, outs: list, params: Any, ins: list, anns: list) -> list:
        # the source note is the " = "'s and the names' note the primitive's, as JAX places them (an
        # equation binding nothing, a debug callback, keeps only the names')
        src, names = anns if anns else (None, None)
        doc: list = [self._words(outs), " = "] if outs else []
        if outs and src is not None:
            doc.append(_Ann(src))
        doc.append(pname)
        if names is not None:
            doc.append(_Ann(names))
        return doc + [params, " ", self._words(ins)]

    def _notes(self, eqn: JaxprEqn) -> list:
        """``[source note or None, names note or None]``, or ``[]`` when neither is asked for."""
        if not (self.source_info or self.name_stack):
            return []
        info = eqn.source_info
        src = _summarize(info) if self.source_info and info is not None else None
        names = f"[{info.name_stack if info is not None else ''}]" if self.name_stack else None
        return [src, names]


def _summarize(info: SourceInfo) -> str:
    """An equation's source note as JAX's printer writes it: ``file:line:column (qualified.name)`` (no
    column when it is 0)."""
    code = info.code
    if code is None:
        return f"{info.filename}:{info.lineno} ({info.function})"
    col = None
    if info.lasti >= 0:
        try:
            col = list(code.co_positions())[info.lasti // 2][2]
        except (AttributeError, IndexError):
            col = None
    where = f"{info.filename}:{info.lineno}" + (f":{col}" if col else "")
    return f"{where} ({getattr(code, 'co_qualname', info.function)})"


class _VarNames:
    """``context.var_names`` (JAX's): a variable's printed name, named on first need."""

    __slots__ = ("_p",)

    def __init__(self, printer: _Printer):
        self._p = printer

    def __getitem__(self, v: Var) -> str:
        return self._p.name(v)

    def __setitem__(self, v: Var, name: str) -> None:
        self._p.names[id(v)] = name
        self._p._alive.append(v)

    def __contains__(self, v: Any) -> bool:
        return id(v) in self._p.names

    def get(self, v: Var, default: Any = None) -> Any:
        return self._p.names.get(id(v), default)


class JaxprPpContext(_Printer):
    """The names given while printing one program (JAX's ``JaxprPpContext``): each variable's, named in
    order of first appearance (``a``, ..., ``z``, ``ba``, ...), and each body printed once before the
    program; ``suggest_same_var_names`` names a body's variables after the caller's."""

    def __init__(self, var_names: dict | None = None):
        super().__init__()
        for v, n in (var_names or {}).items():
            self.var_names[v] = n

    @property
    def var_names(self) -> _VarNames:
        return _VarNames(self)

    @property
    def shared_jaxprs(self) -> dict:
        """The bodies printed once before the program, each to its name."""
        return {j: self.shared[id(j)] for j in self._alive if isinstance(j, Jaxpr) and id(j) in self.shared}

    def _apply(self, settings: JaxprPpSettings | None) -> None:
        s = settings or JaxprPpSettings()
        self.print_shapes, self.source_info, self.name_stack = s.print_shapes, s.source_info, s.name_stack
        self.custom_rules, self.print_effects = s.custom_pp_eqn_rules, s.print_effects


def _context(context: JaxprPpContext | None, settings: JaxprPpSettings | None) -> JaxprPpContext:
    ctx = context if context is not None else JaxprPpContext()
    if not isinstance(ctx, _Printer):
        raise TypeError(f"expected a JaxprPpContext, got {type(ctx).__name__}")
    if isinstance(ctx, JaxprPpContext):
        ctx._apply(settings)
    return ctx


def pp_kv_pair(k: str, v: Any, context: JaxprPpContext | None = None, settings: JaxprPpSettings | None = None) -> Doc:
    """One equation parameter as printed, ``k=v`` (JAX's ``core.pp_kv_pair``): a body as its jaxpr, a set
    with its elements sorted, a function's address as ``0xXXXX``."""
    ctx = _context(context, settings)
    nested = isinstance(v, _JAXPR_TYPES) or (type(v) is tuple and all(isinstance(x, _JAXPR_TYPES) for x in v))
    return Doc(ctx.param_doc(k, v, nested))


def pp_eqn(eqn: JaxprEqn, context: JaxprPpContext | None = None, settings: JaxprPpSettings | None = None) -> Doc:
    """One equation as printed (JAX's ``core.pp_eqn``)."""
    return Doc(_context(context, settings).eqn_doc(eqn))


def pp_jaxpr(jaxpr: Jaxpr | ClosedJaxpr, context: JaxprPpContext | None = None,
             settings: JaxprPpSettings | None = None) -> Doc:
    """A jaxpr as printed inside a program (JAX's ``core.pp_jaxpr``): its name if it is a shared body."""
    return Doc(_context(context, settings).jaxpr_doc(jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr))


def pp_toplevel_jaxpr(jaxpr: Jaxpr | ClosedJaxpr, *, source_info: bool = False, print_shapes: bool = True,
                      custom_pp_eqn_rules: bool = True, name_stack: bool = False,
                      print_effects: bool = False) -> _Pretty:
    """A whole program as printed, its shared bodies first (JAX's ``core.pp_toplevel_jaxpr``)."""
    return _Pretty(jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr,
                   JaxprPpSettings(print_shapes, source_info, name_stack, custom_pp_eqn_rules, print_effects))


class _Pretty(Doc):
    """A whole program to print (its names are given afresh at each ``format``)."""

    __slots__ = ("_jaxpr", "_settings")

    def __init__(self, jaxpr: Jaxpr, settings: JaxprPpSettings):
        self._jaxpr, self._settings = jaxpr, settings

    def format(self, width: int = _WIDTH, *, use_color: bool | None = None, output_format: Any = None,
               annotation_prefix: str = " # ", **_: Any) -> str:
        s = self._settings
        printer = _Printer(s.source_info, s.name_stack, print_shapes=s.print_shapes,
                           custom_rules=s.custom_pp_eqn_rules, print_effects=s.print_effects,
                           html=_is_html(output_format))
        return printer.render(self._jaxpr, width, annotation_prefix)


# HTML for notebooks (``_repr_html_``).  It walks the program in the same order as
# ``_Printer`` and reuses its naming, so a variable has the same name in the HTML as in
# ``str(jaxpr)``.  Static HTML and CSS only (no JavaScript): notebook viewers that drop
# scripts still show it, and ``<details>`` gives the collapsible nested bodies.

_HTML_CSS = (  # `div.ftj` outranks the table styles of JupyterLab / classic notebook (`.rendered_html td`)
    "<style>"
    "div.ftj{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;"
    "line-height:1.4;text-align:left}"
    "div.ftj table{border-collapse:collapse;table-layout:auto;margin:0 0 0 2em;border:none;"
    "font-size:inherit;color:inherit}"
    "div.ftj tbody tr,div.ftj tbody tr:nth-child(odd),div.ftj tbody tr:nth-child(even)"
    "{background:none;border:none}"
    "div.ftj tbody tr:hover{background:rgba(127,127,127,.12)}"
    "div.ftj td{padding:0 .8em 0 0;text-align:left;vertical-align:top;border:none;"
    "line-height:inherit;white-space:pre-wrap}"
    "div.ftj td.l{white-space:nowrap}"
    "div.ftj .t{color:#3a78a8}"
    "div.ftj .p{color:#8e3fbf;font-weight:bold}"
    "div.ftj .k{color:#777}"
    "div.ftj td.s{color:#999;white-space:nowrap}"
    "div.ftj details{margin:.1em 0 .1em 1em}"
    "div.ftj summary{cursor:pointer;color:#666}"
    "</style>"
)


def _esc(s: str) -> str:
    # html.escape without the import and the quote handling (attributes are escaped apart).
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _HtmlPrinter(_Printer):
    def __init__(self):
        super().__init__(source_info=False)

    def document(self, jaxpr: Jaxpr) -> str:
        self._dropvars(jaxpr)  # named as str(jaxpr) names them
        return f'<div class="ftj">{_HTML_CSS}{self.jaxpr_html(jaxpr)}</div>'

    def binder_html(self, v: Var) -> str:
        name = "_" if isinstance(v, DropVar) else self.name(v)
        return f'{name}:<span class="t">{_esc(v.aval.str_short())}</span>'

    def atom_html(self, a) -> str:
        if isinstance(a, Literal):
            v = np.asarray(a.val).item() if np.ndim(a.val) == 0 else a.val
            return f'{_esc(str(v))}:<span class="t">{_esc(a.aval.str_short())}</span>'
        return self.name(a)

    def jaxpr_html(self, jaxpr: Jaxpr) -> str:
        consts = " ".join(self.binder_html(v) for v in jaxpr.constvars)
        ins = " ".join(self.binder_html(v) for v in jaxpr.invars)
        parts = [f"<div>{{ lambda {consts}; {ins}. let</div>"]
        if jaxpr.eqns:
            parts.append("<table><tbody>")
            parts.extend(self.eqn_html(e) for e in jaxpr.eqns)
            parts.append("</tbody></table>")
        outs = ", ".join(self.atom_html(a) for a in jaxpr.outvars)
        parts.append(f"<div>&nbsp;&nbsp;in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}</div>")
        return "".join(parts)

    def nested_html(self, label: str, j: Jaxpr | ClosedJaxpr) -> str:
        if isinstance(j, ClosedJaxpr):
            j = j.jaxpr
        n = len(j.eqns)
        sig = ", ".join(_esc(v.aval.str_short()) for v in j.invars)
        res = ", ".join(_esc(v.aval.str_short()) for v in j.outvars)
        summary = (f'{_esc(label)}: <span class="t">({sig}) -&gt; ({res})</span>, '
                   f'{n} equation{"" if n == 1 else "s"}')
        return f"<details><summary>{summary}</summary>{self.jaxpr_html(j)}</details>"

    def eqn_html(self, eqn: JaxprEqn) -> str:
        rule = pp_eqn_rules.get(eqn.primitive)
        pname, printed = rule(eqn, self) if rule is not None else (eqn.primitive.name, _printed_params(eqn))
        lhs = " ".join(self.binder_html(v) for v in eqn.outvars)
        simple, nested = [], []
        held = subjaxpr_params(eqn)
        for k, v in printed:
            if k not in held:
                simple.append(_esc(self.param(k, v)))
            elif isinstance(v, (Jaxpr, ClosedJaxpr)):
                nested.append(self.nested_html(k, v))
            else:
                nested.extend(self.nested_html(f"{k}[{i}]", x) for i, x in enumerate(v))
        ps = f'<span class="k">[{" ".join(simple)}]</span>' if simple else ""
        args = " ".join(self.atom_html(a) for a in eqn.invars)
        src = ""
        si = eqn.source_info
        if si is not None:
            where = f"{si.filename.rsplit('/', 1)[-1]}:{si.lineno}"
            title = _esc(str(si)).replace('"', "&quot;")
            src = f'<span title="{title}">{_esc(where)}</span>'
        return (f'<tr><td class="l">{lhs}</td><td>= <span class="p">{_esc(pname)}</span>'
                f'{ps} {args}{"".join(nested)}</td><td class="s">{src}</td></tr>')


class DropVar(Var):
    """An output nobody reads (printed as ``_``)."""

    __slots__ = ()


# ----------------------------------------------------------------------------
# Type checking


def typecheck(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Check every equation's types against its primitive's abstract-eval rule, in nested
    bodies too (JAX's ``check_jaxpr``).

    Passes rebuild IR; this is what catches a pass that builds an ill-typed
    program, before XLA does with a far less helpful message.  A nested body is
    checked in a scope of its own: bodies are closed, reading only their inputs.
    The error names the problem, then (as JAX's) the equation ``in equation:``, its ``from source:``,
    and the program around it ``while checking jaxpr:`` (at most twenty equations of it).
    """
    _typecheck_top(jaxpr, set())


def _typecheck_top(jaxpr: Jaxpr | ClosedJaxpr, checked: set[int]) -> None:
    from ftrans.errors import JaxprTypeError

    try:
        _typecheck(jaxpr, checked)
    except JaxprTypeError as e:
        j = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
        msg, *idx = e.args
        lo, hi = (idx[0] - 10, idx[0] + 10) if idx else (0, 20)
        raise JaxprTypeError("\n\n".join([msg, "while checking jaxpr:", _pp_eqn_range(j, lo, hi)])) from None


def _named_printer(jaxpr: Jaxpr) -> _Printer:
    """A printer whose variable names are those of ``jaxpr`` printed whole (as the error's excerpt shows it)."""
    printer = _Printer(False)
    try:
        printer.render(jaxpr)
    except Exception:  # noqa: BLE001  (a malformed program still gets its names, as far as they go)
        pass
    return printer


def _pp_eqn_range(jaxpr: Jaxpr, lo: int, hi: int) -> str:
    """``jaxpr`` printed with only its equations ``lo:hi`` (``...`` standing for the others), as JAX's."""
    lo = max(lo, 0)
    hi = max(lo, min(hi, len(jaxpr.eqns)))
    printer = _named_printer(jaxpr)
    printer.shared = {}
    eqns = [printer.eqn_doc(e) for e in jaxpr.eqns[lo:hi]]
    if not eqns and jaxpr.eqns:
        eqns = ["..."]
    else:
        eqns = (["..."] if lo else []) + eqns + (["..."] if hi != len(jaxpr.eqns) else [])
    consts = printer._words([printer.binder(v) for v in jaxpr.constvars])
    ins = printer._words([printer.binder(v) for v in jaxpr.invars])
    outs = printer._words([printer.atom(a) for a in jaxpr.outvars], ",")
    close = ",)" if len(jaxpr.outvars) == 1 else ")"
    body = ["{ lambda ", consts, "; ", ins, ". let", _Nest(2, [_Brk(), _join(_Brk("; "), eqns)]), _Brk(), "in (",
            outs, close]
    return _render(_Group([_Nest(2, body), " }"]))


def _typecheck(jaxpr: Jaxpr | ClosedJaxpr, checked: set[int]) -> None:
    # A module-level function (not a closure calling itself through its own cell, which would
    # leave a reference cycle behind after every check).
    from ftrans.core.primitive import abstract_eval_rules
    from ftrans.errors import JaxprTypeError

    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if id(jaxpr) in checked:  # a body shared by several equations is checked once
        return
    checked.add(id(jaxpr))
    env: set[int] = set()
    names: list[_Printer] = []

    def name(v: Var) -> str:  # the variable's name in the printed program (named on first need)
        if not names:
            names.append(_named_printer(jaxpr))
        return names[0].name(v)

    def define(v: Var) -> None:
        if id(v) in env:
            raise JaxprTypeError(f"Variable '{name(v)}' already bound")
        env.add(id(v))

    def read(a) -> ShapedArray:
        if isinstance(a, Literal):
            return a.aval
        if id(a) not in env:
            raise JaxprTypeError(f"Variable '{name(a)}' not defined")
        return a.aval

    for v in jaxpr.constvars:
        define(v)
    for v in jaxpr.invars:
        define(v)
    for eqn_idx, eqn in enumerate(jaxpr.eqns):
        try:
            _typecheck_eqn(eqn, jaxpr, read, define, name, checked, abstract_eval_rules)
        except JaxprTypeError as e:
            if len(e.args) != 1:
                raise
            if not names:
                names.append(_named_printer(jaxpr))
            src = eqn.source_info.location() if eqn.source_info is not None else "unknown"
            msg = "\n\n".join([e.args[0], "in equation:", _render(_Nest(2, names[0].eqn_doc(eqn))),
                                f"from source: {src}"])
            raise JaxprTypeError(msg, eqn_idx) from None
    for a in jaxpr.outvars:
        read(a)


def _typecheck_eqn(eqn: JaxprEqn, jaxpr: Jaxpr, read: Any, define: Any, name: Any, checked: set[int],
                   abstract_eval_rules: dict) -> None:
    from ftrans.errors import JaxprTypeError

    in_avals = [read(a) for a in eqn.invars]
    rule = abstract_eval_rules.get(eqn.primitive)
    if rule is None:
        raise JaxprTypeError(f"primitive {eqn.primitive.name} has no abstract-eval rule")
    try:  # the equation's own rule first (a cond's branches' arity, a call's operand count), then its bodies
        outs = rule(*in_avals, **eqn.params)
    except (TypeError, ValueError) as e:
        raise JaxprTypeError(f"equation `{eqn.primitive.name}` is ill-typed: {e}") from None
    body_env = getattr(eqn.primitive, "body_env", None)  # pmap binds its axis name for the body
    for sub in subjaxprs(eqn):
        try:
            if body_env is None:
                _typecheck_top(sub, checked)
            else:
                with body_env(eqn.params):
                    _typecheck_top(sub, checked)
        except JaxprTypeError as e:
            where = f" (from {eqn.source_info})" if eqn.source_info is not None else ""
            raise JaxprTypeError(f"in the body of `{eqn.primitive.name}`{where}: {e}") from None
    if not eqn.primitive.multiple_results:
        outs = [outs]
    if len(outs) != len(eqn.outvars):
        raise JaxprTypeError(
            f"equation `{eqn.primitive.name}` binds {len(eqn.outvars)} outputs "
            f"but its rule gives {len(outs)}"
        )
    declared = jaxpr._declared_effects
    if declared is not None:
        for eff in eqn_effects(eqn):
            if eff not in declared:
                raise JaxprTypeError("Equation effect not present in jaxpr effects. "
                                     f"Equation effect: {eff}. Jaxpr effects: {set(declared)}")
    for v, aval in zip(eqn.outvars, outs):
        if (v.aval.shape, v.aval.dtype) != (aval.shape, aval.dtype):
            shown = "_" if isinstance(v, DropVar) else name(v)
            raise JaxprTypeError(
                f"Value for variable '{shown}' inconsistently typed as {aval.str_short()} "
                f"for let-binder of type {v.aval.str_short()}"
            )
        define(v)


# ----------------------------------------------------------------------------
# Dead-code elimination (every primitive is pure, so an unread result is dead)


# ----------------------------------------------------------------------------
# Effects
#
# A primitive in ``effectful_primitives`` (a host callback that prints or does I/O) does
# something besides computing its results: no pass may drop, merge or move it, even when
# nobody reads its results.  An equation whose bodies hold such a primitive is effectful too.

effectful_primitives: set = set()
# A primitive effectful only for some params (``ffi_call`` with ``has_side_effect=True``): params -> bool.
effectful_if: dict = {}
_effects_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def jaxpr_has_effects(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    """Whether ``jaxpr`` (at any depth) holds an effectful equation."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if not effectful_primitives and not effectful_if:
        return False
    hit = _effects_cache.get(jaxpr)
    if hit is None:
        hit = _effects_cache[jaxpr] = any(eqn_has_effects(e) for e in jaxpr.eqns)
    return hit


class Effect:
    """A side effect of an equation (JAX's ``jax.extend.core.Effect``): what ``eqn.effects`` and
    ``jaxpr.effects`` hold.  ftrans's own are singletons named as JAX's classes (``DebugEffect``,
    ``OrderedDebugEffect``, ``IOEffect``, ``OrderedIOEffect``, ...); a user's primitive may declare its own
    (subclasses, with ``Primitive.def_effectful_abstract_eval``)."""

    __slots__ = ()


class NamedEffect(Effect):
    """One of ftrans's effects, known by its name; ``ordered`` ones keep their program order."""

    __slots__ = ("name", "ordered")

    def __init__(self, name: str, ordered: bool = False):
        self.name = name
        self.ordered = ordered

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:  # as JAX's effects print (in a jaxpr printed with print_effects): Debug, OrderedIO
        return self.name.removesuffix("Effect")


class JaxprInputEffect(Effect):
    """An effect on one input (JAX's ``JaxprInputEffect``, the base of a user's effects on a ref-like
    operand).  An abstract eval rule (``def_effectful_abstract_eval``) names the input by its position among
    the primitive's operands (``input`` an int); ``eqn.effects`` and ``jaxpr.effects`` name it by the
    :class:`Var` it is: the equation's operand, and through a ``jit``/``cond``/``while``/``scan`` the
    operand of the enclosing equation, up to the program's ``constvars``/``invars`` (an effect on a literal,
    or on a value with no input of its own at a call boundary, is dropped there, as in JAX)."""

    __slots__ = ("input",)

    def __init__(self, input: Any):
        self.input = input

    def replace(self, input: Any) -> JaxprInputEffect:
        return self.__class__(input)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JaxprInputEffect):
            return NotImplemented
        return self.input == other.input

    def __hash__(self) -> int:
        return hash((self.__class__, self.input))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.input})"


class EffectTypeSet(set):
    """A registry of effect types (JAX's ``EffectTypeSet``): ``add_type(T)`` registers ``T``,
    ``contains(effect)`` says whether the effect is an instance of a registered type."""

    def add_type(self, effect_type: type) -> None:
        self.add(effect_type)

    def contains(self, eff: Any) -> bool:
        return any(isinstance(eff, t) for t in self)

    def filter_in(self, effs: Any) -> list:
        return [e for e in effs if self.contains(e)]

    def filter_not_in(self, effs: Any) -> list:
        return [e for e in effs if not self.contains(e)]


_named_effects: dict = {}


class DebugEffect(NamedEffect):
    """The effect of an unordered debug callback (``debug.print``, ``debug.callback``): JAX's
    ``jax.debug.DebugEffect``; the one instance is what those equations' ``effects`` hold."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("DebugEffect")


class OrderedDebugEffect(NamedEffect):
    """The effect of an ordered debug callback (``debug.print(..., ordered=True)``): JAX's
    ``jax.debug.OrderedDebugEffect``."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("OrderedDebugEffect", ordered=True)


_named_effects["DebugEffect"] = DebugEffect()
_named_effects["OrderedDebugEffect"] = OrderedDebugEffect()


def named_effect(name: str, ordered: bool = False) -> NamedEffect:
    """The effect called ``name`` (one object per name)."""
    e = _named_effects.get(name)
    if e is None:
        e = _named_effects[name] = NamedEffect(name, ordered)
    return e


# primitive -> rule(eqn) -> the equation's own effects (a set); an effectful primitive without one has the
# effect named after it.
effect_rules: dict = {}

# The types of a user's effects (``Primitive.def_effectful_abstract_eval``) that the bodies of control flow
# and of custom derivatives may hold, as JAX's registries of the same names; ftrans's own effects always may.
control_flow_allowed_effects: EffectTypeSet = EffectTypeSet()
custom_derivatives_allowed_effects: EffectTypeSet = EffectTypeSet()
# ... and those a ``checkpoint`` body may hold when it is differentiated by partial evaluation (linearize,
# grad), JAX's ``remat_allowed_effects``.
remat_allowed_effects: EffectTypeSet = EffectTypeSet()
# The primitives with a user's effects (while none exist, bodies are not checked).
user_effect_primitives: set = set()


def check_effects_allowed(jaxpr: Jaxpr | ClosedJaxpr, where: str, allowed: set) -> None:
    """Raise JAX's ``NotImplementedError`` when ``jaxpr`` (the body of ``where``) holds an effect of a user's
    primitive whose type is not in ``allowed``."""
    bad = disallowed_effects(jaxpr, allowed)
    if bad:
        raise NotImplementedError(f"Effects not supported in `{where}`: {bad}")


def disallowed_effects(jaxpr: Jaxpr | ClosedJaxpr, allowed: set) -> list:
    """The effects of a user's primitives in ``jaxpr`` whose types are not in ``allowed``."""
    if not user_effect_primitives or not jaxpr_has_effects(jaxpr):
        return []
    return [e for e in jaxpr.effects
            if not isinstance(e, NamedEffect) and not any(isinstance(e, t) for t in allowed)]


def eqn_effects(eqn: JaxprEqn) -> frozenset:
    """The effects of ``eqn``: its primitive's, or for a higher-order one the union of its bodies'."""
    prim = eqn.primitive
    rule = effect_rules.get(prim)
    if rule is not None:
        effs = rule(eqn)
        if any(isinstance(e, JaxprInputEffect) for e in effs):  # positions -> the operands' variables
            effs = _resolve_input_effects(effs, eqn.invars)
        return frozenset(effs)
    when = effectful_if.get(prim)
    if prim in effectful_primitives or (when is not None and when(eqn.params)):
        return frozenset((named_effect(prim.name),))
    if prim.higher_order and (effectful_primitives or effectful_if):
        out: set = set()
        for j in subjaxprs(eqn):
            if jaxpr_has_effects(j):
                inner = j.jaxpr if isinstance(j, ClosedJaxpr) else j
                effs = inner.effects
                if any(isinstance(e, JaxprInputEffect) for e in effs):
                    effs = _body_input_effects(eqn, j, inner, effs)
                out |= effs
        return frozenset(out)
    return frozenset()


def _resolve_input_effects(effs: Any, operands: list) -> set:
    """Input effects naming an operand by position, named by the operand's variable (one on a literal is
    dropped)."""
    out = set()
    for e in effs:
        if isinstance(e, JaxprInputEffect) and isinstance(e.input, int):
            v = operands[e.input] if 0 <= e.input < len(operands) else None
            if not isinstance(v, Var):
                continue
            e = e.replace(v)
        out.add(e)
    return out


def _body_input_effects(eqn: JaxprEqn, j: Any, inner: Jaxpr, effs: Any) -> set:
    """A body's effects seen from ``eqn``: an input effect on one of the body's ``invars`` is on the operand
    of ``eqn`` that feeds it; one on anything else (a constant of the body) has no operand and is dropped."""
    ins, n = list(eqn.invars), len(inner.invars)
    params = eqn.params
    if "cond_nconsts" in params and "body_nconsts" in params:  # while: cond and body consts, then the carry
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        feeds = ins[:cn] + ins[cn + bn:] if j is params.get("cond_jaxpr") else ins[cn:cn + bn] + ins[cn + bn:]
    elif n == len(ins):
        feeds = ins
    elif n == len(ins) - 1:  # cond/switch: the branch index comes first
        feeds = ins[1:]
    else:
        feeds = []
    pos = {id(v): i for i, v in enumerate(inner.invars)}
    out = set()
    for e in effs:
        if isinstance(e, JaxprInputEffect):
            i = pos.get(id(e.input))
            if i is None or i >= len(feeds) or not isinstance(feeds[i], Var):
                continue
            e = e.replace(feeds[i])
        out.add(e)
    return out


def eqn_has_effects(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` is effectful: an effectful primitive, or one whose bodies hold one."""
    prim = eqn.primitive
    if prim in effectful_primitives:
        return True
    when = effectful_if.get(prim)
    if when is not None and when(eqn.params):
        return True
    return prim.higher_order and any(jaxpr_has_effects(j) for j in subjaxprs(eqn))


# primitive -> rule(eqn, used_outputs) -> the equation dead-code elimination keeps in its place (the same
# one, or one computing less: ``custom_dce_call`` runs the function instead of ``fwd`` when the residuals are
# dead).  Outputs the replacement drops must be unused.
dce_rules: dict[Any, Callable[[JaxprEqn, list[bool]], JaxprEqn]] = {}


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: list[bool] | tuple[bool, ...]) -> tuple[Jaxpr, list[bool]]:
    """Drop equations whose outputs nobody reads; returns the jaxpr and which inputs it still reads.

    Inputs are kept (the signature does not change); the list says which are read.
    Effectful equations (host callbacks) are always kept.
    """
    live: set[int] = {id(v) for v, u in zip(jaxpr.outvars, used_outputs) if u and isinstance(v, Var)}
    kept: list[JaxprEqn] = []
    replaced = False
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outvars) or eqn_has_effects(eqn):
            rule = dce_rules.get(eqn.primitive)
            if rule is not None:
                new_eqn = rule(eqn, [id(v) in live for v in eqn.outvars])
                replaced = replaced or new_eqn is not eqn
                eqn = new_eqn
            kept.append(eqn)
            live.update(id(a) for a in eqn.invars if isinstance(a, Var))
    kept.reverse()
    outs = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    new = jaxpr if len(kept) == len(jaxpr.eqns) and all(used_outputs) and not replaced else \
        Jaxpr(jaxpr.constvars, jaxpr.invars, kept, outs)
    return new, [id(v) in live for v in jaxpr.invars]


def hoist_consts(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Move a closed jaxpr's constants to leading inputs: ``(body closed over nothing, constants)``.

    Every call-like and control-flow primitive wants its body closed over
    nothing, so the constants (possibly tracers of an enclosing transform)
    travel as ordinary operands that every rule already handles.
    """
    j = closed.jaxpr
    if not j.constvars:
        return closed, []
    return ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.eqns, j.outvars), []), list(closed.consts)
