"""The IR: a typed, first-order, functional program (``Jaxpr``).

Variables are identified by object identity and named only when printed, so
building IR never pays for name bookkeeping and passes can freely rebuild it.
Every equation keeps the user's source location, which is what makes printed
IR and error messages point at the user's code rather than at ftrans.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, NamedTuple

import numpy as np

from ftrans.core.avals import ShapedArray
from ftrans.core.dtypes import SHORT_NAMES


class Var:
    """A variable in a jaxpr; compared by identity."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant inlined into an equation."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({self.val!r})"

    def str_short(self) -> str:
        v = np.asarray(self.val).item() if np.ndim(self.val) == 0 else self.val
        return f"{v}:{self.aval.str_short()}"


Atom = Var | Literal


class SourceInfo(NamedTuple):
    """Where in the user's program an equation came from, and the ``named_scope`` names around it
    (``name_stack``: outermost first, joined by ``/``; empty outside any scope)."""

    filename: str
    lineno: int
    function: str
    name_stack: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} ({self.function})"


class JaxprEqn(NamedTuple):
    primitive: Any  # ftrans.core.primitive.Primitive
    invars: list  # list[Atom]
    outvars: list  # list[Var]
    params: dict
    source_info: SourceInfo | None

    def replace(self, **kw) -> JaxprEqn:
        return self._replace(**kw)


class Jaxpr:
    """``{ lambda constvars ; invars. let eqns in outvars }``.  Treated as immutable."""

    __slots__ = ("constvars", "invars", "eqns", "outvars", "__weakref__")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def pretty_print(self, *, source_info: bool = False, name_stack: bool = False, use_color: bool = False) -> str:
        """The program as text; ``source_info`` adds each equation's user line, ``name_stack`` the
        ``named_scope``/``named_call`` names it was made inside (``# [outer/inner]``), as JAX's printer.
        ``use_color`` is accepted as in JAX; ftrans's text is never coloured."""
        return _Printer(source_info, name_stack).jaxpr(self, indent=0)

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
    def eqns(self) -> list[JaxprEqn]:
        return self.jaxpr.eqns

    def pretty_print(self, *, source_info: bool = False, name_stack: bool = False, use_color: bool = False) -> str:
        return self.jaxpr.pretty_print(source_info=source_info, name_stack=name_stack, use_color=use_color)

    def __str__(self) -> str:
        return str(self.jaxpr)

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


def _names():
    """a, b, ..., z, ba, bb, ... as JAX prints them."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            if n > 1 and combo[0] == "a":
                continue
            yield "".join(combo)


class _Printer:
    def __init__(self, source_info: bool, name_stack: bool = False):
        self.names: dict[int, str] = {}
        self.gen = _names()
        self.source_info = source_info
        self.name_stack = name_stack

    def name(self, v: Var) -> str:
        k = id(v)
        n = self.names.get(k)
        if n is None:
            n = self.names[k] = next(self.gen)
        return n

    def atom(self, a) -> str:
        if isinstance(a, Literal):
            return a.str_short()
        return self.name(a)

    def binder(self, v: Var) -> str:
        if isinstance(v, DropVar):
            return f"_:{v.aval.str_short()}"
        return f"{self.name(v)}:{v.aval.str_short()}"

    def jaxpr(self, jaxpr: Jaxpr, indent: int) -> str:
        pad = " " * indent
        consts = " ".join(self.binder(v) for v in jaxpr.constvars)
        ins = " ".join(self.binder(v) for v in jaxpr.invars)
        head = f"{{ lambda {consts}; {ins}. let"
        lines = [head]
        for eqn in jaxpr.eqns:
            lines.append(self.eqn(eqn, indent + 4))
        outs = ", ".join(self.atom(a) for a in jaxpr.outvars)
        lines.append(f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
        return "\n".join(lines)

    def nested_param(self, k: str, v: Any, indent: int) -> str:
        if isinstance(v, ClosedJaxpr):
            v = v.jaxpr
        if isinstance(v, Jaxpr):
            return f"{k}=" + self.jaxpr(v, indent + len(k) + 1)
        inner = (",\n" + " " * (indent + 2)).join(
            self.jaxpr(x.jaxpr if isinstance(x, ClosedJaxpr) else x, indent + 2) for x in v
        )
        return f"{k}=(\n{' ' * (indent + 2)}{inner}\n{' ' * indent})"

    def param(self, k: str, v: Any, indent: int) -> str:
        if isinstance(v, np.dtype):
            return f"{k}={SHORT_NAMES.get(v, v.name)}"
        if callable(v) and hasattr(v, "__name__"):
            return f"{k}={v.__name__}"
        return f"{k}={v}"

    def eqn(self, eqn: JaxprEqn, indent: int) -> str:
        pad = " " * indent
        lhs = " ".join(self.binder(v) for v in eqn.outvars)
        ps = ""
        if eqn.params:
            inner_indent = indent + 2
            nested = subjaxpr_params(eqn)
            rendered = [self.nested_param(k, v, inner_indent) if k in nested else self.param(k, v, inner_indent)
                        for k, v in sorted(eqn.params.items())]
            if any("\n" in r for r in rendered) or sum(map(len, rendered)) > 60:
                sep = "\n" + " " * inner_indent
                ps = "[" + sep + sep.join(rendered) + "\n" + pad + "]"
            else:
                ps = "[" + " ".join(rendered) + "]"
        args = " ".join(self.atom(a) for a in eqn.invars)
        eq = f"{lhs} = " if lhs else ""  # an equation with no results (a debug callback) binds nothing
        line = f"{pad}{eq}{eqn.primitive.name}{ps} {args}".rstrip()
        info = eqn.source_info
        notes = []
        if self.source_info and info is not None:
            notes.append(f"{info.filename.rsplit('/', 1)[-1]}:{info.lineno}")
        if self.name_stack and info is not None and info.name_stack:
            notes.append(f"[{info.name_stack}]")
        if notes:
            line += "  # " + " ".join(notes)
        return line


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
        lhs = " ".join(self.binder_html(v) for v in eqn.outvars)
        simple, nested = [], []
        held = subjaxpr_params(eqn)
        for k, v in sorted(eqn.params.items()):
            if k not in held:
                simple.append(_esc(self.param(k, v, 0)))
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
        return (f'<tr><td class="l">{lhs}</td><td>= <span class="p">{_esc(eqn.primitive.name)}</span>'
                f'{ps} {args}{"".join(nested)}</td><td class="s">{src}</td></tr>')


class DropVar(Var):
    """An output nobody reads (printed as ``_``)."""

    __slots__ = ()


# ----------------------------------------------------------------------------
# Type checking


def typecheck(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Check every equation's types against its primitive's abstract-eval rule, in nested
    bodies too.

    Passes rebuild IR; this is what catches a pass that builds an ill-typed
    program, before XLA does with a far less helpful message.  A nested body is
    checked in a scope of its own: bodies are closed, reading only their inputs.
    """
    from ftrans.core.primitive import abstract_eval_rules
    from ftrans.errors import JaxprTypeError

    checked: set[int] = set()

    def check(jaxpr: Jaxpr | ClosedJaxpr) -> None:
        if isinstance(jaxpr, ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        if id(jaxpr) in checked:  # a body shared by several equations is checked once
            return
        checked.add(id(jaxpr))
        env: set[int] = set()

        def define(v: Var) -> None:
            if id(v) in env:
                raise JaxprTypeError(f"variable {v} is defined twice")
            env.add(id(v))

        def read(a) -> ShapedArray:
            if isinstance(a, Literal):
                return a.aval
            if id(a) not in env:
                raise JaxprTypeError(f"variable {a} is used before it is defined")
            return a.aval

        for v in jaxpr.constvars:
            define(v)
        for v in jaxpr.invars:
            define(v)
        for eqn in jaxpr.eqns:
            in_avals = [read(a) for a in eqn.invars]
            body_env = getattr(eqn.primitive, "body_env", None)  # pmap binds its axis name for the body
            for sub in subjaxprs(eqn):
                try:
                    if body_env is None:
                        check(sub)
                    else:
                        with body_env(eqn.params):
                            check(sub)
                except JaxprTypeError as e:
                    where = f" (from {eqn.source_info})" if eqn.source_info is not None else ""
                    raise JaxprTypeError(f"in the body of `{eqn.primitive.name}`{where}: {e}") from None
            rule = abstract_eval_rules.get(eqn.primitive)
            if rule is None:
                raise JaxprTypeError(f"primitive {eqn.primitive.name} has no abstract-eval rule")
            try:
                outs = rule(*in_avals, **eqn.params)
            except (TypeError, ValueError) as e:
                raise JaxprTypeError(f"equation `{eqn.primitive.name}` is ill-typed: {e}") from None
            if not eqn.primitive.multiple_results:
                outs = [outs]
            if len(outs) != len(eqn.outvars):
                raise JaxprTypeError(
                    f"equation `{eqn.primitive.name}` binds {len(eqn.outvars)} outputs "
                    f"but its rule gives {len(outs)}"
                )
            for v, aval in zip(eqn.outvars, outs):
                if (v.aval.shape, v.aval.dtype) != (aval.shape, aval.dtype):
                    raise JaxprTypeError(
                        f"equation `{eqn.primitive.name}` declares output {v.aval.str_short()} "
                        f"but its inputs give {aval.str_short()}"
                    )
                define(v)
        for a in jaxpr.outvars:
            read(a)

    check(jaxpr)


# ----------------------------------------------------------------------------
# Dead-code elimination (every primitive is pure, so an unread result is dead)


# ----------------------------------------------------------------------------
# Effects
#
# A primitive in ``effectful_primitives`` (a host callback that prints or does I/O) does
# something besides computing its results: no pass may drop, merge or move it, even when
# nobody reads its results.  An equation whose bodies hold such a primitive is effectful too.

effectful_primitives: set = set()
_effects_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def jaxpr_has_effects(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    """Whether ``jaxpr`` (at any depth) holds an effectful equation."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if not effectful_primitives:
        return False
    hit = _effects_cache.get(jaxpr)
    if hit is None:
        hit = _effects_cache[jaxpr] = any(eqn_has_effects(e) for e in jaxpr.eqns)
    return hit


def eqn_has_effects(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` is effectful: an effectful primitive, or one whose bodies hold one."""
    prim = eqn.primitive
    if prim in effectful_primitives:
        return True
    return prim.higher_order and any(jaxpr_has_effects(j) for j in subjaxprs(eqn))


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: list[bool] | tuple[bool, ...]) -> tuple[Jaxpr, list[bool]]:
    """Drop equations whose outputs nobody reads; returns the jaxpr and which inputs it still reads.

    Inputs are kept (the signature does not change); the list says which are read.
    Effectful equations (host callbacks) are always kept.
    """
    live: set[int] = {id(v) for v, u in zip(jaxpr.outvars, used_outputs) if u and isinstance(v, Var)}
    kept: list[JaxprEqn] = []
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outvars) or eqn_has_effects(eqn):
            kept.append(eqn)
            live.update(id(a) for a in eqn.invars if isinstance(a, Var))
    kept.reverse()
    outs = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    new = jaxpr if len(kept) == len(jaxpr.eqns) and all(used_outputs) else \
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
