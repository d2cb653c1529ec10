"""Eager library composites replayed from a program cached per signature.

JAX runs its composite NumPy functions (``ldexp``, ``var``, ``nan_to_num``, ...) under ``jit``: one
compiled program per signature. ftrans's eager path runs each primitive's NumPy rule as the function
binds it, so a composite pays its own Python on every call: argument checks, dtype promotion,
broadcasting, ``where``'s conversions, some ten to twenty microseconds per ``jnp`` call it makes
(``ldexp``: about forty such calls, 0.8 ms against jax's 20 µs).

``replayed`` traces such a function once per signature (each array argument's shape, dtype and weak
type; every other argument's type and value) into a jaxpr and keeps it as a flat list of steps, each a
primitive's NumPy rule with its parameters and the slots of its operands and results. A later call with
the same signature runs those steps on the arguments' NumPy values, with no tracing, no ``bind`` and no
``Array`` in between. The steps are the rules the op-by-op path runs, with the same operands, so the
results are bit for bit that path's (``tests/test_eager_programs.py`` compares them); steps whose
operands are all constants run once, when the program is built.

The replay applies only where the op-by-op path would run the same rules on the host: no transform or
debug check anywhere (``trace.eager_everywhere``), no ``default_device`` placement, every array
argument a host ``Array`` or a NumPy array (lists and tuples of them are walked). A NumPy array enters the
program as the library converts it (``as_operand``: its canonical dtype, strongly typed), so the trace sees
what the op-by-op call computes with; a function that reads it as a static value (``reshape``'s shape) fails
to trace and is called directly. Anything else (a tracer, a device array, a key, a callable, a NumPy
subclass or a string array) calls the function itself. So does a signature whose trace fails (a
function that reads values, or the user's bad input, whose error the direct call then raises at the
user's line), warns (the warning must show on every call), or holds an equation with effects, a key or a
nested ``jit``. A scalar integer or bool array is part of the signature by value: the library may read it
as a Python number eagerly. A signature is traced at its second call (a one-off call would pay the trace
for nothing); a function whose signatures are mostly called just twice (static values that change all the
time) stops being replayed.

A program that stays expensive on the host (loops) is compiled by XLA once the host time spent on it
reaches ``RENT_SECONDS`` (the ski-rental rule, ``_Rent``): lowered here, compiled in a background thread,
and run from then on, unless its first runs are no faster than the host's (``_Rent.compared``); its
results are then ``jit``'s bits, equal to the host's to float tolerance.
``config.deterministic`` keeps every program on the host.
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from collections.abc import Callable
from time import perf_counter as _clock
from typing import Any

import numpy as np

from ftrans.core import array as _array_mod
from ftrans.core import config as _config_mod
from ftrans.core import dtypes as _dtypes
from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.ir import ClosedJaxpr, Jaxpr, Literal
from ftrans.core.prims._base import quiet_state
from ftrans.core.prims.calls import CallPrimitive, jit_call_p

__all__ = ["replayed", "install", "building", "host_program", "clear", "stats"]

MAX_PROGRAMS = 64  # per function; the oldest signature goes first
_MAX_FOLDED_BYTES = 1 << 16  # a constant step's result kept in the program up to this size
_MAX_CONST_BYTES = 1 << 23  # a program holding more constants than this (a large ``tri`` mask) is not kept
_GIVE_UP_MISSES = 48  # traces of one function after which, with fewer hits than traces, it is called directly
_UNCACHED = object()  # a signature the function itself answers
_SEEN = object()  # a signature called once: the second call traces it (a one-off call would pay the trace)
_BODY_WARMUP = 8  # a loop body is interpreted this many times before it becomes a program
_QUIET = quiet_state()
_ndarray = np.ndarray
_asarray = np.asarray
_new_array = Array._new

stats = {"builds": 0, "direct": 0, "bodies": 0}
_tracing = threading.local()  # ``flag``: this thread is tracing a composite for a program (``building``)
enabled = True  # off: every call runs op by op (tests compare the two paths)
_registry: list = []  # every replayed function's state (for ``clear``)
_canon: dict = {}  # a NumPy argument's dtype -> the dtype the library converts it to (under the current config)


def clear() -> None:
    """Forget every cached program (a config option changed: a trace may now differ)."""
    _canon.clear()
    for st in _registry:
        st.programs.clear()
        st.misses = st.hits = 0
        st.given_up = False


class _State:
    __slots__ = ("programs", "misses", "hits", "given_up", "__weakref__")

    def __init__(self) -> None:
        self.programs: dict = {}
        self.misses = 0
        self.hits = 0
        self.given_up = False


class _NotReplayable(Exception):
    pass


# ---------------------------------------------------------------------------- the signature


def _static_key(a: Any) -> Any:
    """A hashable stand-in for a non-array argument, telling apart what ``==`` does not (``1``/``True``/``1.0``,
    ``0.0``/``-0.0``), or raise ``_NotReplayable``."""
    t = type(a)
    if t is int or t is bool or t is str or a is None:
        return (t, a)
    if t is float or t is complex:
        return (t, repr(a))
    if isinstance(a, (type, np.dtype)):  # a dtype or scalar type (``jnp.float32``)
        return (t, a)
    if isinstance(a, np.generic) and type(a.dtype) in _trace._WIDE_KINDS:
        return (t, a.tobytes())
    raise _NotReplayable


def _walk(a: Any, key: list, vals: list) -> None:
    """Append ``a``'s part of the key, and its arrays' values; sequences (``stack([x, y])``) are walked."""
    t = type(a)
    if t is Array:
        v = a._value
        if v.ndim == 0 and v.dtype.kind in "iub":  # (a static value: see _as_value)
            key.append((v.dtype, a.weak_type, v.item()))
        else:
            key.append((v.shape, v.dtype, a.weak_type))
            vals.append(v)
    elif t is _ndarray:
        d = a.dtype
        c = _canon.get(d) or _canonical(d)
        if a.ndim == 0 and c.kind in "iub":  # (static, as an Array's: passed as itself)
            key.append((_ndarray, d, a.item()))
        else:
            key.append((_ndarray, a.shape, d))
            vals.append(a if d == c else _converted(a, c))
    elif t is tuple or t is list:
        key.append((t, len(a)))
        for x in a:
            _walk(x, key, vals)
    else:
        key.append(_static_key(a))


def _canonical(d: np.dtype) -> np.dtype:
    """The dtype the library converts a NumPy array of ``d`` to (``as_operand``), remembered per dtype (a config
    change clears it with the programs)."""
    if d.kind not in "biufc" and type(d) not in _trace._WIDE_KINDS:
        raise _NotReplayable  # (strings, objects, datetimes: the function itself answers)
    try:
        c = _dtypes.canonicalize(d)
    except Exception:  # noqa: BLE001
        raise _NotReplayable from None
    _canon[d] = c
    return c


def _converted(a: np.ndarray, c: np.dtype) -> np.ndarray:
    """``a`` as ``convert`` makes it for a NumPy operand: ``astype``, with NumPy's warnings off."""
    with np.errstate(all="ignore"):
        return a.astype(c)


def _as_value(a: Array) -> bool:
    """Whether an array argument enters the trace as itself, a constant, rather than as a traced input: a
    scalar integer or bool, which the library may read as a Python value eagerly (``power(x, k)`` with a
    concrete integer ``k`` is ``integer_pow``, with a traced one ``pow``: other bits), so it is part of the
    signature instead."""
    v = a._value
    return v.ndim == 0 and v.dtype.kind in "iub"


def _np_as_value(a: np.ndarray) -> bool:
    return a.ndim == 0 and _canon[a.dtype].kind in "iub"


def _swap(a: Any, it: Any) -> Any:
    """``a`` with its arrays replaced, in ``_walk``'s order, by the values ``it`` yields."""
    t = type(a)
    if t is Array:
        return a if _as_value(a) else next(it)
    if t is _ndarray:
        return a if _np_as_value(a) else next(it)
    if t is tuple:
        return tuple([_swap(x, it) for x in a])
    if t is list:
        return [_swap(x, it) for x in a]
    return a


def _arrays_in(a: Any, out: list) -> list:
    t = type(a)
    if t is Array:
        if not _as_value(a):
            out.append(a)
    elif t is _ndarray:
        if not _np_as_value(a):
            out.append(a)
    elif t is tuple or t is list:
        for x in a:
            _arrays_in(x, out)
    return out


def _signature(args: tuple, kwargs: dict) -> tuple[tuple, list] | None:
    """The cache key of a call and its arrays' values, or None when the call is not replayed."""
    key: list = [_config_mod.config.enable_x64]
    vals: list = []
    try:
        for a in args:
            _walk(a, key, vals)
        if kwargs:
            for k, a in kwargs.items():
                key.append(k)
                _walk(a, key, vals)
    except _NotReplayable:
        return None
    return tuple(key), vals


# ---------------------------------------------------------------------------- the program


class _Program:
    """A traced composite as one generated Python function of the arguments' NumPy values: a straight line of
    rule calls over local variables (``_compile``), which costs a fraction of interpreting the steps.

    A program whose host run is expensive (loops: ``gammainc``, ``hyp2f1``) is also compiled by XLA once the
    host time spent on it would have paid for the compile (``_Rent``), and later calls run the executable."""

    __slots__ = ("run_values", "outs", "out_kind", "out_tree", "steps", "template", "in_slots", "closed",
                 "in_weak", "rent", "compiled")

    def run(self, vals: list) -> Any:
        compiled = self.compiled
        if compiled is not None:
            rent = self.rent
            if rent is None:
                got = _run_compiled(self, compiled, vals)
            else:  # the first compiled runs are timed against the host's fastest
                t0 = _clock()
                got = _run_compiled(self, compiled, vals)
                rent.compared(self, _clock() - t0)
        elif self.rent is None:
            got = run_quietly(self.run_values, vals)
        else:
            t0 = _clock()
            got = run_quietly(self.run_values, vals)
            self.rent.paid(self, vals, _clock() - t0)
        kind = self.out_kind
        if kind == 1:
            v = got
            weak, copy = self.outs[0]
            return _new_array(v.copy() if copy else v, weak)
        res = [_new_array(v.copy() if copy else v, weak) for v, (weak, copy) in zip(got, self.outs)]
        if kind == 2:
            return tuple(res)
        return _trace_unflatten(self.out_tree, res)


# ---------------------------------------------------------------------------- compiled by XLA when it pays

# A host run of a program costs NumPy's per-call overhead on every step: about 0.3 us an equation, so a
# composite with loops (``gammainc``: two ``while``s of 11 steps of a 57-equation body) costs hundreds of
# microseconds where its compiled form costs ten, but compiling it costs a fraction of a second to a second
# (``hyp2f1``). Which is cheaper depends on how often it is called, which is not known in advance: the
# ski-rental rule. A program keeps running on the host (renting) until the host time spent on it reaches
# ``RENT_SECONDS``, the order of its compile (buying); it is then compiled in a background thread while the
# host goes on answering, and the executable answers from then on. A program called rarely never pays for a
# compile; one called in a loop pays at most about twice what the better choice in hindsight would have.
# Programs cheap on the host (most composites: 10-60 us, near a compiled call's dispatch) are never compiled.


def _rent_from_env() -> float:
    """``FTRANS_EAGER_COMPILE_AFTER``: the host seconds after which a program compiles (default 0.05);
    ``off`` (or ``never``, ``inf``) keeps every program on the host."""
    import os

    raw = os.environ.get("FTRANS_EAGER_COMPILE_AFTER", "").strip().lower()
    if not raw:
        return 0.05
    if raw in ("off", "never", "inf", "none", "disabled"):
        return float("inf")
    try:
        value = float(raw)
    except ValueError:
        warnings.warn(f"FTRANS_EAGER_COMPILE_AFTER={raw!r} is not a number of seconds or 'off'; using 0.05",
                      stacklevel=2)
        return 0.05
    return value if value >= 0 else float("inf")


RENT_SECONDS = _rent_from_env()  # host time a program runs for before it is compiled
MIN_HOST_SECONDS = 50e-6  # a program faster than this on the host stays there (a compiled call costs ~20 us)
_PROBE_RUNS = 3  # host runs timed before a program is judged cheap (the first may pay one-time costs)
stats["compiled"] = 0
stats["compile_failures"] = 0
stats["compiled_slower"] = 0  # compiled, then found slower than the host and dropped


class _Rent:
    """The host time a program has cost so far; starts its compile once that reaches ``RENT_SECONDS``."""

    __slots__ = ("spent", "runs", "fastest", "started", "compiled_runs", "compiled_fastest")

    def __init__(self) -> None:
        self.spent = 0.0
        self.runs = 0
        self.fastest = float("inf")  # the host's fastest run
        self.started = False
        self.compiled_runs = 0
        self.compiled_fastest = float("inf")

    def compared(self, prog: _Program, seconds: float) -> None:
        """After ``_PROBE_RUNS`` compiled runs, keep whichever of the two is faster (XLA's kernels are not
        always: its ``ndtri`` on 16 elements is slower than NumPy's), and stop timing."""
        self.compiled_runs += 1
        if seconds < self.compiled_fastest:
            self.compiled_fastest = seconds
        if self.compiled_runs >= _PROBE_RUNS:
            if self.compiled_fastest >= self.fastest:
                prog.compiled = None
                stats["compiled_slower"] += 1
            prog.rent = None

    def paid(self, prog: _Program, vals: list, seconds: float) -> None:
        self.spent += seconds
        self.runs += 1
        if seconds < self.fastest:
            self.fastest = seconds
        if self.runs == _PROBE_RUNS and self.fastest < MIN_HOST_SECONDS:
            prog.rent = None  # cheap on the host: never compiled, never timed again
        elif self.spent >= RENT_SECONDS and not self.started and self.runs >= _PROBE_RUNS:
            self.started = True
            _start_compile(prog, vals)


def _may_compile() -> bool:
    """Whether an expensive program may switch to XLA: not under ``config.deterministic`` (its results then
    come from XLA's kernels, equal to ``jit``'s, where the host's are NumPy's; they agree to float tolerance)."""
    return not _config_mod.config.deterministic


# ``(closed, in_weak, shapes_and_dtypes) -> compile``: lowers a program for XLA's CPU backend (in the calling
# thread) and returns the function a background thread calls to compile it, which returns the executable and
# the inputs it kept. ``transforms/jit.py`` sets it (core does not import the layers above it); None: no
# program is ever compiled.
lower_for_xla: Callable | None = None


def _start_compile(prog: _Program, vals: list) -> None:
    """Lower the program here (tracing uses this thread's state), compile it in a background thread;
    ``prog.compiled`` is set when the executable is ready, and the host answers until then."""
    if not _may_compile() or prog.closed is None or lower_for_xla is None:
        prog.rent = None
        return
    try:
        with warnings.catch_warnings():  # (the user's call warned, if at all, when it was traced)
            warnings.simplefilter("ignore")
            compile_program = lower_for_xla(prog.closed, prog.in_weak, [(v.shape, v.dtype) for v in vals])
    except Exception:  # noqa: BLE001  (a primitive without a lowering: the host goes on answering)
        stats["compile_failures"] += 1
        prog.rent = None
        return

    def compile_it() -> None:
        try:
            compiled = compile_program()
        except Exception:  # noqa: BLE001
            stats["compile_failures"] += 1
            return
        prog.compiled = compiled
        stats["compiled"] += 1

    # Not a daemon: the interpreter waits for it at exit instead of tearing XLA down mid-compile.
    threading.Thread(target=compile_it, name="ftrans-compile-eager-program", daemon=False).start()


def _run_compiled(prog: _Program, compiled: Any, vals: list) -> Any:
    """The executable's results as NumPy values, in ``run_values``'s form (one value, or a tuple)."""
    exe, kept = compiled
    try:
        outs = exe(*vals) if kept is None else exe(*[vals[i] for i in kept])
    except Exception:  # noqa: BLE001  (a runtime failure: the host answers from now on)
        prog.compiled = None
        prog.rent = None
        return run_quietly(prog.run_values, vals)
    if prog.out_kind == 1:
        return _asarray(outs[0])
    return tuple([_asarray(o) for o in outs])


def _compile(template: list, known: set, in_slots: list, steps: list, out_slots: list,
             as_tuple: bool = False) -> Callable:
    """The steps as the source of one function (slot ``i`` is local ``v{i}``; constants are globals)."""
    g: dict = {"_nd": _ndarray, "_as": _asarray}
    lines = [f"def program({', '.join(f'v{s}' for s in in_slots)}):"]
    if _QUIET is not None:  # NumPy's floating-point errors ignored for the whole program, as each rule would
        g["_qset"], g["_qreset"], g["_qignore"] = _QUIET
        lines[0] = lines[0].replace("def program(", "def steps(")
        lines.insert(0, f"def program({', '.join(f'v{s}' for s in in_slots)}):\n"
                        f"    t = _qset(_qignore)\n"
                        f"    try:\n"
                        f"        return steps({', '.join(f'v{s}' for s in in_slots)})\n"
                        f"    finally:\n"
                        f"        _qreset(t)")
    for s in known:
        g[f"v{s}"] = template[s]
    for n, (rule, params, ins, out, multi) in enumerate(steps):
        g[f"r{n}"] = rule
        call = f"r{n}({', '.join(f'v{i}' for i in ins)}"
        if params:
            g[f"p{n}"] = params
            call += f"{', ' if ins else ''}**p{n}"
        call += ")"
        if multi:
            lines.append(f"    t = {call}")
            for k, o in enumerate(out):
                lines.append(f"    v{o} = t[{k}]")
                lines.append(f"    if type(v{o}) is not _nd: v{o} = _as(v{o})")
        else:
            lines.append(f"    v{out} = {call}")
            lines.append(f"    if type(v{out}) is not _nd: v{out} = _as(v{out})")
    if len(out_slots) == 1 and not as_tuple:
        lines.append(f"    return v{out_slots[0]}")
    else:
        lines.append(f"    return ({''.join(f'v{s}, ' for s in out_slots)})")
    exec(compile("\n".join(lines), "<ftrans eager program>", "exec"), g)  # noqa: S102  (our own generated source)
    return g["program"]


def _trace_unflatten(tree: Any, leaves: list) -> Any:
    from ftrans import tree_util

    return tree_util.tree_unflatten(tree, leaves)


def _bound(prim: Any, weaks: tuple, params: dict) -> Callable:
    """A step through ``bind`` for a primitive whose rule is more than a NumPy function of its operands
    (control flow, a call the replay does not inline): its operands as ``Array`` values, as eagerly."""
    def step(*vals: Any) -> Any:
        out = prim.bind(*[_new_array(v, w) for v, w in zip(vals, weaks)], **params)
        if prim.multiple_results:
            return [o._value for o in out]
        return out._value

    return step


def _direct_rule(prim: Any, in_avals: list) -> Callable | None:
    """The NumPy rule ``trace._host_apply`` would call for these operand types, or None for ``bind``."""
    impl = prim.impl
    if impl is None or prim.higher_order:
        return None
    if impl is prim._narrow_impl and in_avals and type(in_avals[0].dtype) in _trace._WIDE_KINDS:
        impl = prim._wide_impl
    if _QUIET is not None:
        impl = getattr(impl, "_quiet_inner", impl)  # the program sets NumPy's error state once for all steps
    return impl


def _plain_aval(aval: Any) -> bool:
    return type(getattr(aval, "dtype", None)) in _trace._WIDE_KINDS or isinstance(getattr(aval, "dtype", None),
                                                                                    np.dtype)


class _Builder:
    def __init__(self) -> None:
        self.template: list = []
        self.known: set = set()  # slots holding constants
        self.steps: list = []

    def slot(self, value: Any = None, known: bool = False) -> int:
        self.template.append(value)
        if known:
            self.known.add(len(self.template) - 1)
        return len(self.template) - 1

    def atom(self, env: dict, a: Any) -> int:
        if type(a) is Literal:
            return self.slot(_asarray(a.val, dtype=a.aval.dtype) if _plain_aval(a.aval) else _asarray(a.val), True)
        return env[a]

    def add(self, jaxpr: Jaxpr, env: dict) -> None:
        for eqn in jaxpr.eqns:
            prim = eqn.primitive
            if prim is jit_call_p or eqn.effects:
                raise _NotReplayable  # a nested jit runs compiled when called eagerly; effects must run in order
            for v in (*eqn.invars, *eqn.outvars):
                if not _plain_aval(v.aval):
                    raise _NotReplayable  # keys, tokens, refs
            ins = [self.atom(env, a) for a in eqn.invars]
            if isinstance(prim, CallPrimitive) and prim.map_params is None:
                body = eqn.params.get(prim.body_param)
                if isinstance(body, (ClosedJaxpr, Jaxpr)):
                    inner = body.jaxpr if type(body) is ClosedJaxpr else body
                    consts = body.consts if type(body) is ClosedJaxpr else []
                    if len(inner.invars) == len(ins) and len(inner.outvars) == len(eqn.outvars):
                        sub: dict = {}
                        for cv, c in zip(inner.constvars, consts):
                            sub[cv] = self.slot(_const_value(c), True)
                        for iv, s in zip(inner.invars, ins):
                            sub[iv] = s
                        self.add(inner, sub)
                        for ov, iv in zip(eqn.outvars, inner.outvars):
                            env[ov] = self.atom(sub, iv)
                        continue
            in_avals = [a.aval for a in eqn.invars]
            rule = _direct_rule(prim, in_avals)
            params = eqn.params
            if rule is None:
                rule = _bound(prim, tuple(bool(getattr(a, "weak_type", False)) for a in in_avals), params)
                params = {}
            multi = prim.multiple_results
            outs = [self.slot() for _ in eqn.outvars]
            for ov, s in zip(eqn.outvars, outs):
                env[ov] = s
            step = (rule, params, tuple(ins), tuple(outs) if multi else outs[0], multi)
            if all(i in self.known for i in ins) and self._fold(step, eqn.outvars):
                continue
            self.steps.append(step)

    def _fold(self, step: tuple, outvars: list) -> bool:
        """Run a step of constants now, keeping its (small) results in the program (``add`` runs with NumPy's
        warnings off)."""
        if sum(int(np.prod(v.aval.shape)) * v.aval.dtype.itemsize for v in outvars) > _MAX_FOLDED_BYTES:
            return False
        rule, params, ins, out, multi = step
        r = rule(*[self.template[i] for i in ins], **params)
        for s, v in (zip(out, r) if multi else ((out, r),)):
            v = v if type(v) is _ndarray else _asarray(v)
            v.flags.writeable = False  # shared by every call of the program
            self.template[s] = v
            self.known.add(s)
        return True


def _const_value(c: Any) -> np.ndarray:
    v = c._value if isinstance(c, Array) else _asarray(c)
    if type(v) is not _ndarray:
        raise _NotReplayable
    return v


# ---------------------------------------------------------------------------- loop bodies

_bodies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def host_program(closed: ClosedJaxpr) -> Callable | None:
    """``closed`` as a function of its inputs' NumPy values returning a tuple of its outputs' values, built
    once per jaxpr: what an eager ``while``/``scan``/``cond`` runs for each step of its body instead of
    interpreting the equations (the same rules, so the same values). None for a jaxpr the program cannot
    hold (effects, keys, a nested ``jit``)."""
    if not enabled:
        return None
    try:
        run = _bodies[closed]
    except KeyError:
        _bodies[closed] = 1
        return None
    except TypeError:  # not weakly referable
        return None
    if type(run) is not int:
        return run
    if run < _BODY_WARMUP:  # (building costs about as much as interpreting the body a few times)
        _bodies[closed] = run + 1
        return None
    try:
        b, in_slots, out_slots = _lower(closed)
        run = _compile(b.template, b.known, in_slots, b.steps, out_slots, as_tuple=True)
        stats["bodies"] += 1
    except Exception:  # noqa: BLE001  (keys, effects, a rule failing on constants: interpreted as before)
        run = None
    _bodies[closed] = run
    return run


def _lower(closed: ClosedJaxpr) -> tuple[_Builder, list, list]:
    """``closed``'s equations as program steps: the builder, and the slots of its inputs and outputs."""
    b = _Builder()
    env: dict = {}
    jaxpr = closed.jaxpr
    for cv, c in zip(jaxpr.constvars, closed.consts):
        env[cv] = b.slot(_const_value(c), True)
    in_slots = []
    for iv in jaxpr.invars:
        if not _plain_aval(iv.aval):
            raise _NotReplayable
        env[iv] = s = b.slot()
        in_slots.append(s)
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # (constant steps run now)
        warnings.simplefilter("ignore", RuntimeWarning)
        b.add(jaxpr, env)
    out_slots = []
    for ov in jaxpr.outvars:
        if not _plain_aval(ov.aval):
            raise _NotReplayable
        out_slots.append(b.atom(env, ov))
    return b, in_slots, out_slots


def run_quietly(run: Callable, vals: list) -> tuple:
    """``run(*vals)``; a RuntimeWarning a user's filter raised is retried with NumPy's warnings off."""
    try:
        return run(*vals)
    except RuntimeWarning:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return run(*vals)


def _build(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """Trace ``fn`` at this call's signature into a ``_Program`` (``_UNCACHED`` if it cannot be replayed)."""
    from ftrans import tree_util
    from ftrans.core.avals import ShapedArray

    arrays = _arrays_in(args, [])
    if kwargs:
        _arrays_in(list(kwargs.values()), arrays)
    avals = [ShapedArray(a._value.shape, a._value.dtype, a.weak_type) if type(a) is Array
             else ShapedArray(a.shape, _canon[a.dtype], False) for a in arrays]  # (a NumPy array: strong)
    box: list = []

    def flat(*tracers: Any) -> list:
        it = iter(tracers)
        a = _swap(args, it)
        k = {name: _swap(v, it) for name, v in kwargs.items()}
        leaves, tree = tree_util.tree_flatten(fn(*a, **k))
        if not all(isinstance(x, (_trace.Tracer, Array)) for x in leaves):
            raise _NotReplayable  # a Python value among the results
        box.append(tree)
        return leaves

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _tracing.flag = True
            try:
                closed, _ = _trace.stage(flat, avals)
            finally:
                _tracing.flag = False
        if caught:
            return _UNCACHED  # the direct call warns, on every call
        b, in_slots, out_slots = _lower(closed)
        outs = [(bool(ov.aval.weak_type), s in b.known or s in in_slots)
                for ov, s in zip(closed.jaxpr.outvars, out_slots)]
        if sum(v.nbytes for v in b.template if v is not None) > _MAX_CONST_BYTES:
            return _UNCACHED  # (64 such programs per function would hold too much memory)
        tree = box[0]
        single = tree.num_leaves == 1 and tree_util.treedef_is_leaf(tree)
        run_values = _compile(b.template, b.known, in_slots, b.steps, out_slots, as_tuple=not single)
    except Exception:  # noqa: BLE001  (value-dependent code, bad input: the direct call answers, or raises)
        return _UNCACHED
    prog = _Program()
    prog.run_values, prog.outs, prog.out_tree = run_values, outs, box[0]
    prog.closed, prog.in_weak, prog.compiled = closed, [a.weak_type for a in avals], None
    prog.rent = _Rent() if b.steps else None
    prog.steps, prog.template, prog.in_slots = b.steps, b.template, in_slots  # (for inspection)
    if single:
        prog.out_kind = 1
    elif tree == tree_util.tree_structure((0,) * tree.num_leaves):
        prog.out_kind = 2
    else:
        prog.out_kind = 3
    stats["builds"] += 1
    return prog


# ---------------------------------------------------------------------------- the decorator


def replayed(fn: Callable) -> Callable:
    """``fn``, a pure library composite of arrays and static values, replayed from a cached program when
    called eagerly on host arrays (see the module's docstring). A function with an eager fast path of its
    own (``sum(x)``) wraps its general path only: the wrapper's frame would slow the fast one."""
    st = _State()
    _registry.append(st)
    programs = st.programs

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not enabled or not _trace.eager_everywhere or _array_mod.placing or st.given_up:
            return fn(*args, **kwargs)
        sig = _signature(args, kwargs)
        if sig is None:
            return fn(*args, **kwargs)
        key, vals = sig
        prog = programs.get(key)
        if prog is None:
            if len(programs) >= MAX_PROGRAMS:
                programs.pop(next(iter(programs)), None)
            programs[key] = _SEEN
            return fn(*args, **kwargs)
        if prog is _SEEN:
            st.misses += 1
            if st.misses > _GIVE_UP_MISSES and st.hits < st.misses:  # (most signatures called twice, no more)
                st.given_up = True
                programs.clear()
                return fn(*args, **kwargs)
            prog = programs[key] = _build(fn, args, kwargs)
        else:
            st.hits += 1
        if prog is _UNCACHED:
            stats["direct"] += 1
            return fn(*args, **kwargs)
        try:
            return prog.run(vals)
        except Exception:  # noqa: BLE001  a rule's error: the function itself raises it, as it would have
            return fn(*args, **kwargs)

    wrapper.__wrapped_replay__ = fn  # type: ignore[attr-defined]  # (tests compare with the direct call)
    wrapper._replay_state = st  # type: ignore[attr-defined]
    return wrapper


def building() -> bool:
    """Whether this thread is tracing a composite for a program. A function that runs differently when
    called eagerly than traced (``lax.igamma``: compiled whole when eager, its loops inlined when traced)
    asks it, and stages its eager form, a nested ``jit``, which the program declines."""
    return getattr(_tracing, "flag", False)


def install(namespace: dict, names: Any) -> None:
    """Replace each of ``names`` in ``namespace`` (a module's globals) by its replayed form."""
    module = namespace.get("__name__")
    for name in names:
        fn = namespace[name]
        if getattr(fn, "__wrapped_replay__", None) is None:
            wrapper = replayed(fn)
            if module is not None:  # pickled by reference, found again here (not as the plain function)
                wrapper.__module__, wrapper.__qualname__ = module, name
            namespace[name] = wrapper


_config_mod.config._listeners.append(lambda name, value: clear())
