"""The pass pipeline ``jit`` runs on a traced program before lowering it.

A pass is a ``ClosedJaxpr -> ClosedJaxpr`` rewrite with a name.  Most passes
only ever look at one jaxpr at a time: they subclass ``Pass`` and implement
``rewrite``, and ``PassContext.map_jaxprs`` applies that to the program and to
every body nested in it (through ``core.ir.subjaxprs``, so a new call-like
primitive needs nothing here).  A pass that needs the whole program overrides
``run`` instead.

Nested bodies keep their signature: a body's inputs and outputs are matched
positionally by its equation's operands and results, and its constvars by
leading operands or lowered constants, so changing them needs a per-primitive
rule, which no pass has yet.  The pipeline checks this after every pass.

Every rewrite is recorded (``Rewrite``) with the source line of the equation it
touched, so a user can ask why the program XLA saw differs from the one they
wrote: ``last_report()`` after a ``jit`` trace, or ``report_for(traced.jaxpr)``.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from ftrans.core.config import config
from ftrans.core.ir import ClosedJaxpr, Jaxpr, JaxprEqn, SourceInfo, map_subjaxprs, typecheck
from ftrans.errors import FtransError, FtransTypeError, FtransValueError

__all__ = [
    "Pass", "PassContext", "PassError", "PassReport", "Rewrite", "last_report", "register_pass",
    "partitioned", "registered_passes", "report_for", "resolve_optimizations", "run_pipeline", "primal_rewriter",
]


class PassError(FtransError, RuntimeError):
    """A pass broke a rule of the pipeline (changed a nested body's signature): a bug in ftrans."""


class Rewrite(NamedTuple):
    """One change a pass made, at one equation of the user's program."""

    pass_name: str
    primitive: str  # the primitive of the equation rewritten (or "constant" for a captured constant)
    source_info: SourceInfo | None
    what: str

    def __str__(self) -> str:
        where = f" at {self.source_info}" if self.source_info is not None else ""
        return f"{self.pass_name}: {self.what}{where}"


class PassReport:
    """What the pipeline did to one program: the passes that ran, those switched off, and every
    rewrite in order."""

    __slots__ = ("name", "passes_run", "disabled", "rewrites", "snapshots")

    def __init__(self, name: str, passes_run: tuple[str, ...], disabled: tuple[str, ...],
                 rewrites: list[Rewrite], snapshots: dict | None = None):
        self.name = name
        self.passes_run = passes_run
        self.disabled = disabled
        self.rewrites = rewrites
        # pass name -> (program before, program after), for the passes that changed it: the jaxprs
        # only, so a report (kept while its program lives, see ``report_for``) neither holds the
        # program's constants nor the program itself (which keys ``_reports`` weakly)
        self.snapshots: dict[str, tuple[Jaxpr, Jaxpr]] = {
            k: (b.jaxpr if isinstance(b, ClosedJaxpr) else b, a.jaxpr if isinstance(a, ClosedJaxpr) else a)
            for k, (b, a) in (snapshots or {}).items()}

    def before_after(self, name: str) -> tuple[str, str] | None:
        """The printed program before and after the pass ``name`` (``None`` if it changed nothing)."""
        got = self.snapshots.get(name)
        if got is None:
            return None
        return (got[0].pretty_print(source_info=False), got[1].pretty_print(source_info=False))

    def _repr_html_(self) -> str:
        import html

        parts = [f"<div><b>passes on {html.escape(self.name or 'program')}</b>: ran "
                 f"{html.escape(', '.join(self.passes_run) or 'none')}"
                 + (f"; disabled {html.escape(', '.join(self.disabled))}" if self.disabled else "") + "</div>"]
        for pname in self.passes_run:
            rws = self.by_pass(pname)
            if not rws:
                continue
            rows = "".join(f"<tr><td>{html.escape(r.what)}</td><td><code>"
                           f"{html.escape(str(r.source_info) if r.source_info else '')}</code></td></tr>" for r in rws)
            ba = self.before_after(pname)
            ir = ""
            if ba is not None:
                ir = ("<details><summary>IR before / after</summary><table><tr><td><pre>"
                      f"{html.escape(ba[0])}</pre></td><td><pre>{html.escape(ba[1])}</pre></td></tr></table></details>")
            parts.append(f"<details open><summary><b>{html.escape(pname)}</b>: {len(rws)} rewrite"
                         f"{'s' if len(rws) != 1 else ''}</summary><table>{rows}</table>{ir}</details>")
        return "\n".join(parts)

    def by_pass(self, name: str) -> list[Rewrite]:
        return [r for r in self.rewrites if r.pass_name == name]

    def __len__(self) -> int:
        return len(self.rewrites)

    def __iter__(self) -> Any:
        return iter(self.rewrites)

    def __str__(self) -> str:
        head = f"passes on {self.name or 'program'}: ran {', '.join(self.passes_run) or 'none'}"
        if self.disabled:
            head += f"; disabled {', '.join(self.disabled)}"
        return "\n".join([head, *(f"  {r}" for r in self.rewrites)])

    __repr__ = __str__


class PassContext:
    """What a running pass sees: where to record its rewrites, and the recursion helper."""

    __slots__ = ("pass_name", "rewrites")

    def __init__(self, pass_name: str, rewrites: list[Rewrite]):
        self.pass_name = pass_name
        self.rewrites = rewrites

    def record(self, eqn: JaxprEqn | None, what: str, primitive: str | None = None) -> None:
        """Note one rewrite at ``eqn`` (its primitive and source line go into the report)."""
        prim = primitive if primitive is not None else (eqn.primitive.name if eqn is not None else "?")
        si = eqn.source_info if eqn is not None else None
        self.rewrites.append(Rewrite(self.pass_name, prim, si, what))

    def map_jaxprs(self, closed: ClosedJaxpr, fn: Callable[..., Jaxpr], *, order: str = "post") -> ClosedJaxpr:
        """Apply ``fn(jaxpr, ctx, top=...)`` to the program and every jaxpr nested in it.

        ``order="post"`` rewrites nested bodies before the jaxpr holding them (so ``fn`` sees
        rewritten bodies); ``"pre"`` rewrites the outer jaxpr first and then the bodies it
        kept (DCE: no work on bodies it removes).  A body shared by several equations is
        rewritten once and stays shared.  Only the top-level jaxpr may drop constvars; the
        consts follow.
        """
        if order not in ("pre", "post"):
            raise ValueError(f"map_jaxprs: order must be 'pre' or 'post', not {order!r}")
        top = _Walk(self, fn, order).visit(closed.jaxpr, True)
        if top is closed.jaxpr:
            return closed
        if top.constvars is closed.jaxpr.constvars or list(top.constvars) == list(closed.jaxpr.constvars):
            return ClosedJaxpr(top, closed.consts)
        value = {id(v): c for v, c in zip(closed.jaxpr.constvars, closed.consts)}
        missing = [v for v in top.constvars if id(v) not in value]
        if missing:
            raise PassError(f"pass {self.pass_name!r} added constvars to the program; "
                            "a pass that adds constants must override Pass.run and supply them")
        return ClosedJaxpr(top, [value[id(v)] for v in top.constvars])


class _Walk:
    """One ``PassContext.map_jaxprs`` walk: methods, not closures calling each other through their
    cells, so a finished walk leaves no reference cycle for the cycle collector."""

    __slots__ = ("ctx", "fn", "order", "memo", "keep")

    def __init__(self, ctx: PassContext, fn: Callable[..., Jaxpr], order: str):
        self.ctx, self.fn, self.order = ctx, fn, order
        self.memo: dict[int, Any] = {}
        self.keep: list[Any] = []  # keeps memo keys alive so ids are not reused mid-walk

    def nested(self, sub: Jaxpr | ClosedJaxpr) -> Jaxpr | ClosedJaxpr:
        got = self.memo.get(id(sub))
        if got is not None:
            return got
        if isinstance(sub, ClosedJaxpr):
            inner = self.visit(sub.jaxpr, False)
            res: Any = sub if inner is sub.jaxpr else ClosedJaxpr(inner, sub.consts)
        else:
            res = self.visit(sub, False)
        self.memo[id(sub)] = res
        self.keep.append(sub)
        return res

    def bodies(self, j: Jaxpr) -> Jaxpr:
        new_eqns = None
        for i, eqn in enumerate(j.eqns):
            e2 = map_subjaxprs(eqn, self.nested)
            if e2 is not eqn:
                if new_eqns is None:
                    new_eqns = list(j.eqns)
                new_eqns[i] = e2
        return j if new_eqns is None else Jaxpr(j.constvars, j.invars, new_eqns, j.outvars)

    def visit(self, j: Jaxpr, top: bool) -> Jaxpr:
        if self.order == "pre":
            new = self.bodies(self.fn(j, self.ctx, top=top))
        else:
            new = self.fn(self.bodies(j), self.ctx, top=top)
        if not top and new is not j:
            _check_signature(self.ctx.pass_name, j, new)
        return new


def _check_signature(pass_name: str, old: Jaxpr, new: Jaxpr) -> None:
    def sig(j: Jaxpr) -> tuple:
        return (len(j.constvars), [(a.shape, a.dtype) for a in j.in_avals],
                [(v.aval.shape, v.aval.dtype) for v in j.outvars])

    if sig(old) != sig(new):
        raise PassError(f"pass {pass_name!r} changed the signature of a nested jaxpr: "
                        f"{sig(old)} became {sig(new)}")


class Pass:
    """A named rewrite of the IR.  Subclass, set ``name``, implement ``rewrite`` (one jaxpr at
    a time) or ``run`` (the whole program), and ``register_pass`` an instance."""

    name: str = ""
    order: str = "post"  # see PassContext.map_jaxprs
    # False: the pass does not run on a program XLA partitions over a mesh (``partitioned()``), where
    # its rewrite would cost more than it saves (e.g. a concatenation of operands split over devices).
    partition_safe: bool = True

    def run(self, closed: ClosedJaxpr, ctx: PassContext) -> ClosedJaxpr:
        return ctx.map_jaxprs(closed, self.rewrite, order=self.order)

    def rewrite(self, jaxpr: Jaxpr, ctx: PassContext, *, top: bool) -> Jaxpr:
        """``jaxpr`` rewritten (or itself, unchanged).  ``top``: the program itself, whose
        constvars may shrink; a nested body must keep its signature."""
        return jaxpr


_passes: dict[str, Pass] = {}  # in pipeline order


def register_pass(p: Pass, *, before: str | None = None) -> Pass:
    """Add ``p`` to the pipeline (at the end, or just before the pass named ``before``)."""
    if not p.name or not isinstance(p.name, str):
        raise ValueError(f"register_pass: {p!r} has no name")
    if p.name in _passes:
        raise ValueError(f"register_pass: a pass named {p.name!r} is already registered")
    if before is None:
        _passes[p.name] = p
        return p
    if before not in _passes:
        raise ValueError(f"register_pass: no pass named {before!r} to insert before")
    items = list(_passes.items())
    i = [k for k, _ in items].index(before)
    items.insert(i, (p.name, p))
    _passes.clear()
    _passes.update(items)
    return p


def registered_passes() -> tuple[str, ...]:
    """The pipeline's pass names, in the order they run."""
    return tuple(_passes)


def _typecheck_result(snapshots: dict, out: ClosedJaxpr, name: str) -> None:
    """Typecheck the final program once; when it fails, find the first pass whose result is
    ill-typed (each pass's output is kept in ``snapshots``) and name it."""
    from ftrans.errors import JaxprTypeError

    try:
        typecheck(out)
        return
    except JaxprTypeError:
        pass
    for pname, (_, after) in snapshots.items():
        _typecheck_after(pname, after, name)
    typecheck(out)  # unreachable unless typecheck is not deterministic


def _typecheck_after(pname: str, out: ClosedJaxpr, name: str) -> None:
    from ftrans.errors import JaxprTypeError

    try:
        typecheck(out)
    except JaxprTypeError as e:
        raise PassError(
            f"pass {pname!r} produced an ill-typed program for {name or 'the program'}: {e}. This is a bug in "
            f"the pass; switch it off to run the unoptimised program: "
            f"ftrans.config.update('disabled_passes', [{pname!r}]) or jit(f, optimizations=[...without {pname!r}])"
        ) from None


def check_pass_names(names: tuple[str, ...], option: str = "disabled_passes") -> None:
    """Raise if ``names`` (the ``disabled_passes`` option) names a pass that does not exist."""
    unknown = [n for n in names if n not in _passes]
    if unknown:
        raise FtransValueError(
            f"{option}: unknown pass name{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; the passes are: {', '.join(_passes) or '(none)'}"
        )


_local = threading.local()


@contextlib.contextmanager
def partitioned() -> Any:
    """Within: the programs traced are partitioned over a mesh (sharded ``jit``), so the passes that are
    not ``partition_safe`` are left out (nested ``jit`` bodies traced meanwhile included)."""
    _local.partitioned = getattr(_local, "partitioned", 0) + 1
    try:
        yield
    finally:
        _local.partitioned -= 1


def pipeline_state() -> tuple:
    """What decides, besides a function's own ``optimizations``, which passes a pipeline run here runs
    (the registered passes, the two options, partitioning): part of the key under which ``jit``
    remembers a staged program."""
    return (tuple(_passes), config.disabled_passes, config.optimizations,
            bool(getattr(_local, "partitioned", 0)))


_reports: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def resolve_optimizations(value: Any, who: str = "optimizations") -> tuple[str, ...] | None:
    """A per-``jit`` ``optimizations=`` argument as a tuple of pass names, ``None`` for the
    global setting (``config.optimizations``); ``"all"``/``"none"`` as in the config option."""
    if value is None:
        return None
    if value is True or (isinstance(value, str) and value.strip().lower() == "all"):
        return tuple(_passes)
    if value is False or (isinstance(value, str) and value.strip().lower() == "none"):
        return ()
    if isinstance(value, str):
        names = tuple(n.strip() for n in value.split(",") if n.strip())
    else:
        try:
            names = tuple(value)
        except TypeError:
            raise FtransTypeError(f"{who}: optimizations must be 'all', 'none' or a list of pass names, "
                                  f"got {value!r}") from None
    check_pass_names(names, option=f"{who}: optimizations")
    return names


def _enabled(optimizations: tuple[str, ...] | None) -> list[str]:
    disabled = config.disabled_passes
    chosen = optimizations if optimizations is not None else config.optimizations
    return [n for n in _passes if n not in disabled and (chosen is None or n in chosen)]


# Passes that change the values a program computes, so that a derivative of the program as
# written would differ from the derivative of the program run: ``primal_rewriter`` runs them
# on a function before ``grad``/``jvp`` differentiate it inside ``jit``.
VALUE_CHANGING = ("stability",)
_PRIMAL_ROOTS = frozenset({"log", "sub"})  # the primitives the stability patterns end in


class _PrimalRewriter:
    """What ``jit`` installs while it stages (``core.trace.state.primal_rewriter``): called by
    ``ad.rewritten_primal`` with the staged function a ``jvp``/``vjp``/``grad``/``linearize``
    is about to differentiate; returns it rewritten (``cse``, when enabled, then the
    value-changing passes, then ``dce``) or ``None`` when they change nothing.  The rewrites
    it made go into the ``jit``'s report."""

    __slots__ = ("names", "rewrites")

    def __init__(self, names: list[str]):
        self.names = names
        self.rewrites: list[Rewrite] = []

    def __call__(self, closed: ClosedJaxpr) -> ClosedJaxpr | None:
        from ftrans.core.ir import all_jaxprs

        # Most differentiated functions hold nothing to rewrite: the stability patterns all
        # end in a ``log`` or a ``sub``, so without one there is no pass to run.
        if not any(e.primitive.name in _PRIMAL_ROOTS for j in all_jaxprs(closed) for e in j.eqns):
            return None
        scratch: list[Rewrite] = []
        try:
            out = closed
            if "cse" in self.names:
                out = _passes["cse"].run(out, PassContext("cse", scratch))
            changed = False
            for n in VALUE_CHANGING:
                if n in self.names:
                    mine: list[Rewrite] = []
                    new = _passes[n].run(out, PassContext(n, mine))
                    if new is not out:
                        changed = True
                        out = new
                        self.rewrites.extend(r._replace(what=r.what + " (in the function differentiated, "
                                                                      "before differentiating it)")
                                             for r in mine)
            if not changed:
                return None
            if "dce" in _passes:
                out = _passes["dce"].run(out, PassContext("dce", scratch))
            typecheck(out)
            return out
        except Exception:  # noqa: BLE001 - a failing rewrite leaves the function as written
            return None


def primal_rewriter(optimizations: tuple[str, ...] | None) -> _PrimalRewriter | None:
    """The rewriter ``jit`` installs while staging (see ``_PrimalRewriter``), or ``None`` when
    no value-changing pass is enabled for it."""
    names = _enabled(optimizations)
    if not any(n in names for n in VALUE_CHANGING):
        return None
    return _PrimalRewriter(names)


def run_pipeline(closed: ClosedJaxpr, *, name: str = "", optimizations: tuple[str, ...] | None = None,
                 prior_rewrites: list[Rewrite] | None = None) -> ClosedJaxpr:
    """Run every enabled pass on ``closed`` in order; the result has the same signature.

    Enabled: the passes named by ``optimizations`` (a ``jit``'s own choice) or else by
    ``config.optimizations`` (``None``: all), less ``config.disabled_passes``.  A pass whose
    result does not typecheck raises ``PassError`` naming it (the final program is checked once;
    when it fails, each pass's result in turn).  The report is kept for
    ``last_report()`` (this thread) and ``report_for(result)``.
    """
    disabled = config.disabled_passes
    if disabled:
        check_pass_names(disabled)  # the option may come from the environment, unchecked
    chosen = optimizations if optimizations is not None else config.optimizations
    if chosen is not None and optimizations is None:
        check_pass_names(chosen, option="optimizations")
    if getattr(_local, "partitioned", 0):
        disabled = (*disabled, *(n for n, p in _passes.items() if not p.partition_safe))
    rewrites: list[Rewrite] = list(prior_rewrites or ())
    ran = []
    snapshots: dict[str, tuple[ClosedJaxpr, ClosedJaxpr]] = {}
    out = closed
    for pname, p in _passes.items():
        if pname in disabled or (chosen is not None and pname not in chosen):
            continue
        ran.append(pname)
        before = out
        try:
            out = p.run(out, PassContext(pname, rewrites))
        except (PassError, RecursionError, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - a crashing pass is named, with the way to switch it off
            if snapshots:
                _typecheck_result(snapshots, before, name)  # blames an earlier pass that broke the program
            raise PassError(
                f"pass {pname!r} failed on {name or 'the program'} ({type(e).__name__}: {e}). This is a bug in "
                f"the pass; switch it off to run the unoptimised program: "
                f"ftrans.config.update('disabled_passes', [{pname!r}])") from e
        if out is not before:
            snapshots[pname] = (before, out)
    if snapshots:
        _typecheck_result(snapshots, out, name)
    report = PassReport(name, tuple(ran), tuple(n for n in _passes if n in disabled or
                                                 (chosen is not None and n not in chosen)), rewrites, snapshots)
    _local.last = report
    _reports[out] = report
    return out


def last_report() -> PassReport | None:
    """The report of the pipeline's latest run in this thread (``None`` before any)."""
    return getattr(_local, "last", None)


def report_for(closed: ClosedJaxpr) -> PassReport | None:
    """The report of the run that produced ``closed`` (e.g. ``jit(f).trace(x).jaxpr``), while
    that program is alive."""
    return _reports.get(closed)
