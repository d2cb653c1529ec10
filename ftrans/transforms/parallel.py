"""``pmap``: map a function over devices, one program run by each (JAX's ``pmap``).

``pmap(f)(*args)`` splits each mapped argument along its ``in_axes`` entry,
runs ``f`` on every device with its block, and stacks the results along
``out_axes``.  The body is traced once with the mapped axis removed and the
axis name bound (``core/axis_env.py``), so collectives (``lax.psum``, ...) in it
work over the devices.

Called with concrete values, a pmapped function compiles the body into one
replicated XLA program (``ftrans/lowering/parallel.py``), cached per argument
signature, and returns Arrays spread over the devices (``ShardedArray``);
passing such an Array to the next pmap that splits it the same way moves no
data.  Under a transform (``grad``, ``vmap``, ``make_jaxpr``, an enclosing
pmap) it binds the ``pmap`` primitive (``core/prims/parallel.py``), whose
rules are the call primitives' generic ones.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import array as _array_mod
from ftrans.core import config as _config_mod
from ftrans.core import pytrees as tree_util
from ftrans.core import trace as _trace
from ftrans.core import traceback_util as _tb
from ftrans.core.array import Array
from ftrans.core.axis_env import extend_axis_env
from ftrans.core.ir import ClosedJaxpr, hoist_consts
from ftrans.core.prims.parallel import pmap_p, unmapped_aval
from ftrans.core.trace import Tracer, aval_of, stage
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.transforms.batching import flatten_axes
from ftrans.transforms.jit import LoweredText

__all__ = ["pmap"]


def _path(path: tuple) -> str:
    if not path:
        return "args"
    head, *rest = path
    root = "args" if getattr(head, "idx", None) == 0 else "kwargs"
    return root + tree_util.keystr(tuple(rest))


class _AnonymousAxis:
    """The axis name of a pmap given none: unique to the pmapped function, never equal to a user's name."""

    __slots__ = ("fname",)

    def __init__(self, fname: str):
        self.fname = fname

    def __repr__(self) -> str:
        return f"<unnamed pmap axis of {self.fname}>"


class _Entry:
    """One compiled signature: the program, the output tree, the hoisted constants, the donation mask."""

    __slots__ = ("exe", "out_tree", "consts", "donated")

    def __init__(self, exe: Any, out_tree: Any, consts: list, donated: tuple):
        self.exe = exe
        self.out_tree = out_tree
        self.consts = consts
        self.donated = donated


# Every live pmapped function, so clear_caches can empty their caches (weak: they go with their owners).
_all_pmapped: weakref.WeakSet = weakref.WeakSet()


class PmapWrapped:
    """The function ``pmap`` returns."""

    def __init__(self, fun: Callable, axis_name: Any, in_axes: Any, out_axes: Any, static_argnums: tuple,
                 devices: Any, backend: str | None, axis_size: int | None, donate_argnums: tuple):
        self._fun = fun
        self.__name__ = getattr(fun, "__name__", "fun")
        functools.update_wrapper(self, fun, updated=())
        # An anonymous axis still needs a name of its own (a transposed body psums over it).
        self._axis_name = axis_name if axis_name is not None else _AnonymousAxis(self.__name__)
        self._in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        self._out_axes = out_axes
        self._static = static_argnums
        self._devices = None if devices is None else tuple(devices)
        self._backend = backend
        self._axis_size = axis_size
        self._donate = donate_argnums
        self._cache: OrderedDict = OrderedDict()
        self._fast: dict = {}  # (type, shape, dtype, weak) per positional Array -> entry
        self._lock = threading.Lock()
        _all_pmapped.add(self)

    def clear_cache(self) -> None:
        """Drop this function's compiled programs (``ftrans.clear_caches`` calls it on every pmap)."""
        with self._lock:
            self._cache.clear()
            self._fast.clear()

    # -- argument handling -------------------------------------------------------
    def _split(self, args: tuple) -> tuple[tuple, tuple]:
        n = len(args)
        statics = []
        for i in self._static:
            j = i if i >= 0 else i + n
            if not 0 <= j < n:
                raise FtransValueError(
                    f"pmap({self.__name__}): pmapped function has static_broadcasted_argnums={self._static} but "
                    f"was called with only {n} positional argument{'s' if n != 1 else ''}. All static broadcasted "
                    f"arguments must be passed positionally (not by keyword); argument {i} is missing")
            v = args[j]
            try:
                hash(v)
            except TypeError:
                raise FtransValueError(
                    f"Non-hashable static arguments are not supported: pmap({self.__name__})'s static argument {j} "
                    f"(of static_broadcasted_argnums) has unhashable type {type(v).__name__}; static arguments "
                    "must be hashable (use a tuple instead of a list, or pass arrays as ordinary mapped or "
                    "broadcast arguments)") from None
            statics.append((j, v))
        static_pos = {j for j, _ in statics}
        dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
        return dyn, tuple(statics)

    def _in_axes_flat(self, dyn: tuple, dyn_pos: list, kwargs: dict) -> list:
        in_axes = self._in_axes
        if in_axes is None or type(in_axes) is int:
            per_arg = [in_axes] * len(dyn)
        elif isinstance(in_axes, tuple):
            n_all = len(dyn) + len(self._static)
            if len(in_axes) not in (len(dyn), n_all):
                kw = (f"; the {len(kwargs)} argument{'s' if len(kwargs) != 1 else ''} passed by keyword "
                      f"({', '.join(map(str, kwargs))}) are not covered by in_axes: each argument passed by "
                      "keyword is mapped over axis 0 (pass them positionally to give them in_axes entries)"
                      ) if kwargs else ""
                raise FtransValueError(
                    f"pmap({self.__name__}) in_axes must be an int, None, or a tuple of entries corresponding to "
                    f"the positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
                    f"len(args)={n_all}{kw}")
            per_arg = list(in_axes) if len(in_axes) == len(dyn) else [in_axes[i] for i in dyn_pos]
        else:
            raise FtransTypeError(
                f"pmap({self.__name__}) in_axes must be an int, None, or a tuple of entries corresponding to the "
                f"positional arguments passed to the function, but got {in_axes!r}")
        dims: list = []
        for i, (spec, a) in enumerate(zip(per_arg, dyn)):
            at = f"[{i if len(in_axes) == len(dyn) else dyn_pos[i]}]" if isinstance(in_axes, tuple) else ""
            dims.extend(flatten_axes("in_axes", spec, a, len(tree_util.tree_leaves(a)), f"pmap({self.__name__})",
                                     at))
        dims.extend([0] * len(tree_util.tree_leaves(kwargs)))  # keyword arguments map over axis 0, as in JAX
        return dims

    def _size(self, leaves_paths: list, avals: list, dims: list) -> int:
        sizes = []
        for (path, _), a, d in zip(leaves_paths, avals, dims):
            if d is None:
                continue
            nd = len(a.shape)
            if not -nd <= d < nd or nd == 0:
                raise FtransValueError(
                    f"pmap was requested to map its argument along axis {d}, which implies "
                    f"that its rank should be at least {max(d + 1, -d)}, but is only {nd} (its shape is "
                    f"{a.shape}); argument {_path(path)} of pmap({self.__name__})")
            sizes.append((path, a.shape[d % nd]))
        if not sizes:
            if self._axis_size is None:
                raise FtransValueError(  # JAX's words, then what would give one
                    f"pmap requires at least one argument with a mapped axis. pmap({self.__name__}) maps none: "
                    "give an array argument a non-None in_axes entry, or give axis_size")
            return int(self._axis_size)
        distinct = {s for _, s in sizes}
        if len(distinct) > 1:
            lines = "\n".join(f"  argument {_path(p)} of shape {a.shape} has size {s} along its mapped axis"
                              for (p, s), a in zip(sizes, [a for a, d in zip(avals, dims) if d is not None]))
            raise FtransValueError(
                f"pmap({self.__name__}) got inconsistent sizes for array axes to be mapped:\n{lines}")
        return sizes[0][1]

    def _device_list(self, size: int, replicas_per: int = 1) -> list:
        from ftrans.devices import local_devices

        devs = list(self._devices) if self._devices is not None else local_devices(backend=self._backend)
        need = size * replicas_per
        if need > len(devs):
            where = f"devices={list(self._devices)}" if self._devices is not None else \
                f"{len(devs)} local devices"
            raise FtransValueError(
                f"pmap({self.__name__}): compiling a computation that requires {need} logical devices, but only "
                f"{len(devs)} XLA devices are available ({where}; the mapped axis has size {size}"
                + (f" and nested pmaps need {replicas_per} each" if replicas_per > 1 else "")
                + "). Map over at most that many elements, or reshape the batch so each device gets a block")
        if self._devices is not None and len(devs) != need and replicas_per == 1:
            raise FtransValueError(
                f"pmap({self.__name__}): the mapped axis has size {size}, but devices= lists {len(devs)} devices; "
                "they must be equal")
        return devs[:need]

    # -- tracing -------------------------------------------------------------------
    def _trace(self, dyn: tuple, kwargs: dict, statics: tuple, in_tree: Any, avals: list, dims: list,
               size: int) -> tuple[ClosedJaxpr, Any, tuple]:
        name = self.__name__
        out_tree_box: list = []
        full_n = len(dyn) + len(statics)
        static_map = dict(statics)

        def flat_fun(*flat_in: Any) -> list:
            dargs, kw = tree_util.tree_unflatten(in_tree, flat_in)
            it = iter(dargs)
            full = [static_map[i] if i in static_map else next(it) for i in range(full_n)]
            out = self._fun(*full, **kw)
            paths_leaves, out_tree = tree_util.tree_flatten_with_path(out)
            for path, o in paths_leaves:
                if not isinstance(o, (Tracer, Array, np.ndarray, np.generic, bool, int, float, complex)):
                    raise FtransTypeError(
                        f"pmap({name}): the function returned a {type(o).__name__} at output "
                        f"{tree_util.keystr(path) or '(the output)'}, which is not an array")
            out_tree_box.append((out, out_tree))
            return [o for _, o in paths_leaves]

        body_avals = [unmapped_aval(a, None if d is None else d % len(a.shape)) for a, d in zip(avals, dims)]
        from ftrans.core import trace as _trace
        from ftrans.transforms.passes import primal_rewriter, run_pipeline

        rewriter = primal_rewriter(None)  # grad inside differentiates the rewritten body, as under jit
        st = _trace.state
        prev, st.primal_rewriter = st.primal_rewriter, rewriter
        try:
            with extend_axis_env(self._axis_name, size, None):
                closed, _ = stage(flat_fun, body_avals)
        finally:
            st.primal_rewriter = prev
        out, out_tree = out_tree_box[0]
        out_dims = self._out_axes_flat(out, len(closed.out_avals))
        norm = []
        for k, (a, od) in enumerate(zip(closed.out_avals, out_dims)):
            if od is None:
                norm.append(None)
                continue
            nd = len(a.shape) + 1
            if not -nd <= od < nd:
                raise FtransValueError(
                    f"pmap({name}) out_axes={od} is out of range for output {k} of per-device type "
                    f"{a.str_short()}: the mapped axis must be in [{-nd}, {nd - 1}]")
            norm.append(od % nd)
        with extend_axis_env(self._axis_name, size, None):  # the passes' typecheck sees the mapped axis
            optimized = run_pipeline(closed, name=f"pmap_{name}",
                                     prior_rewrites=rewriter.rewrites if rewriter is not None else None)
        return optimized, out_tree, tuple(norm)

    def _out_axes_flat(self, out: Any, n: int) -> list:
        out_axes = self._out_axes
        if isinstance(out_axes, list):
            out_axes = tuple(out_axes)
        if isinstance(out_axes, tuple) and not isinstance(out, tuple) and len(out_axes) == 1:
            out_axes = out_axes[0]
        return flatten_axes("out_axes", out_axes, out, n, f"pmap({self.__name__})")

    def _donated_flat(self, args: tuple, static_pos: set) -> tuple:
        if not self._donate:
            return ()
        n = len(args)
        donate = {i if i >= 0 else i + n for i in self._donate}
        mask: list = []
        for i, a in enumerate(args):
            if i in static_pos:
                continue
            mask += [i in donate] * len(tree_util.tree_leaves(a))
        return tuple(mask)

    # -- calling -------------------------------------------------------------------
    @_tb.api_boundary
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and _trace.eager_everywhere:
            # The common call: positional Arrays, nothing traced; one dict lookup finds the program.
            try:
                key = tuple([(type(a), a.shape, a.dtype, a.weak_type) for a in args])
            except AttributeError:
                key = None
            entry = self._fast.get(key) if key is not None else None
            if entry is not None:
                return self._run(entry, list(args))
        dyn, statics = self._split(args)
        static_pos = {j for j, _ in statics}
        dyn_pos = [i for i in range(len(args)) if i not in static_pos]
        leaves_paths, in_tree = tree_util.tree_flatten_with_path((dyn, kwargs))
        leaves = [x for _, x in leaves_paths]
        avals = []
        for path, x in leaves_paths:
            try:
                avals.append(aval_of(x))
            except TypeError:
                raise FtransTypeError(
                    f"pmap({self.__name__}): argument {_path(path)} of type {type(x).__name__} is not a valid "
                    "array type (use arrays, NumPy arrays, Python scalars, or mark it static with "
                    "static_broadcasted_argnums)") from None
        dims = self._in_axes_flat(dyn, dyn_pos, kwargs)
        size = self._size(leaves_paths, avals, dims)
        dims = [None if d is None else d % len(a.shape) for a, d in zip(avals, dims)]
        donated = self._donated_flat(args, static_pos)
        tracing = any(isinstance(x, Tracer) for x in leaves) or not _trace.is_eager()
        if tracing:
            closed, out_tree, out_axes = self._trace(dyn, kwargs, statics, in_tree, avals, dims, size)
            body, consts = hoist_consts(closed)
            outs = pmap_p.bind(*consts, *leaves, jaxpr=body, name=self.__name__, axis_name=self._axis_name,
                               axis_size=size, in_axes=(None,) * len(consts) + tuple(dims), out_axes=out_axes,
                               devices=self._devices, backend=self._backend,
                               donated_invars=(False,) * len(consts) + (donated or (False,) * len(leaves)))
            return tree_util.tree_unflatten(out_tree, outs)
        key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), tuple(dims), statics,
               _config_mod.config.enable_x64, _config_mod.config.scoped_here())
        entry = self._cache.get(key)
        if entry is None:
            entry = self._compile(dyn, kwargs, statics, in_tree, avals, dims, size, donated)
            with self._lock:
                self._cache[key] = entry
        if not kwargs and not statics and len(leaves) == len(args) and all(isinstance(a, Array) for a in args):
            self._fast[tuple([(type(a), a.shape, a.dtype, a.weak_type) for a in args])] = entry
        return self._run(entry, leaves)

    def _run(self, entry: _Entry, leaves: list) -> Any:
        outs = entry.exe.run([*entry.consts, *leaves] if entry.consts else leaves)
        if entry.donated:
            # The runtime may have consumed a donated buffer already (then no delete() below marks it):
            # the call paths that skip checks per argument must look again (core/array.py).
            _array_mod.buffers_deleted = True
            for x, d in zip(leaves, entry.donated):
                if d and hasattr(x, "delete") and not (hasattr(x, "is_deleted") and x.is_deleted()):
                    x.delete()
        if not _trace.eager_everywhere and _trace.debug_checks_on():  # debug_nans/debug_infs, as in JAX
            kind = _trace.nonfinite_kind([np.asarray(o) for o in outs])
            if kind is not None:
                from ftrans.errors import user_location

                raise FloatingPointError(f"Invalid value ({kind}) encountered in sharded computation: an output of "
                                         f"pmap({self.__name__}) (at {user_location()})")
        return tree_util.tree_unflatten(entry.out_tree, outs)

    def _compile(self, dyn: tuple, kwargs: dict, statics: tuple, in_tree: Any, avals: list, dims: list,
                 size: int, donated: tuple, options: tuple = ()) -> _Entry:
        from ftrans.lowering.parallel import PmapExecutable, nested_replicas

        if self._devices is None:
            self._device_list(size)  # the error for too many elements names the axis before tracing
        closed, out_tree, out_axes = self._trace(dyn, kwargs, statics, in_tree, avals, dims, size)
        body, consts = hoist_consts(closed)
        devs = self._device_list(size, nested_replicas(body.jaxpr))
        in_axes = (None,) * len(consts) + tuple(dims)
        mask = (False,) * len(consts) + donated if donated else ()
        exe = PmapExecutable(body, self._axis_name, size, in_axes, out_axes, devs, self.__name__, mask, options)
        consts = [c if isinstance(c, Array) else Array._make(np.asarray(c)) for c in consts]
        return _Entry(exe, out_tree, consts, donated if any(donated) else ())

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled program's StableHLO text for these arguments (``.as_text()``, as jax's Lowered)."""
        dyn, statics = self._split(args)
        static_pos = {j for j, _ in statics}
        dyn_pos = [i for i in range(len(args)) if i not in static_pos]
        leaves_paths, in_tree = tree_util.tree_flatten_with_path((dyn, kwargs))
        avals = [aval_of(x) for _, x in leaves_paths]
        dims = self._in_axes_flat(dyn, dyn_pos, kwargs)
        size = self._size(leaves_paths, avals, dims)
        dims = [None if d is None else d % len(a.shape) for a, d in zip(avals, dims)]
        donated = self._donated_flat(args, static_pos)
        entry = self._compile(dyn, kwargs, statics, in_tree, avals, dims, size, donated)
        redo = functools.partial(self._compile, dyn, kwargs, statics, in_tree, avals, dims, size, donated)
        return _Lowered(self, entry, in_tree, avals, redo)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """A pmapped function defined in a class body is a method: the instance is its first argument."""
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<pmap-wrapped function {self.__name__}>"


class _Lowered(LoweredText):
    """``pmap(f).lower(*args)``: the replicated StableHLO module; ``compile()`` gives the executable."""

    _no_kwargs = False  # keyword arguments are part of the lowered signature, as in JAX

    def __init__(self, owner: Any, entry: _Entry, in_tree: Any, avals: list, recompile: Callable):
        self._owner = owner
        self._entry = entry
        self._text = entry.exe.text
        self._in_tree = in_tree  # (dynamic args, kwargs), static arguments left out
        self._avals = avals
        self._recompile = recompile  # the same program with other compiler options

    @property
    def in_tree(self) -> Any:
        return self._in_tree

    @property
    def in_avals(self) -> Any:
        """``(args, kwargs)`` with each array leaf's abstract value (the whole, mapped argument)."""
        return tree_util.tree_unflatten(self._in_tree, self._avals)

    def cost_analysis(self) -> Any:
        """XLA's estimate of the program's cost before optimisation, as JAX's."""
        from ftrans.lowering import compat

        return compat.hlo_cost_analysis(self._entry.exe.devices[0].client, self._text)

    def compile(self, compiler_options: dict | None = None) -> _Compiled:
        """The executable; ``compiler_options`` are XLA option names to values (XLA rejects unknown ones)."""
        from ftrans.transforms.jit import _compiler_options

        options = _compiler_options(compiler_options)
        entry = self._recompile(options) if options else self._entry
        return _Compiled(self._owner, entry, self._in_tree, self._avals)


class _Compiled:
    """A compiled pmap for fixed argument types: call it with the dynamic (non-static) arguments."""

    _no_kwargs = False

    def __init__(self, owner: Any, entry: _Entry, in_tree: Any, avals: list):
        self._owner = owner
        self._entry = entry
        self._in_tree = in_tree
        self._avals = avals

    in_tree = _Lowered.in_tree
    in_avals = _Lowered.in_avals

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        name = f"pmap({self._owner.__name__}) compiled"
        if tree != self._in_tree:
            raise FtransTypeError(
                f"{name}: the arguments' pytree structure does not match the one it was lowered with "
                "(Function compiled with input pytree does not match the input pytree it was called with): "
                f"lowered for {self._in_tree}, called with {tree}; call it with the same structure (static "
                "arguments left out), or lower again")
        bad = []
        for k, (x, want) in enumerate(zip(leaves, self._avals)):
            w = f"{want.dtype.name}[{','.join(map(str, want.shape))}]"
            try:
                got = aval_of(x)
            except TypeError:
                bad.append(f"Argument 'flat_args[{k}]' compiled with {w} and called with a {type(x).__name__}, "
                           "which is not an array")
                continue
            if (got.shape, got.dtype) != (want.shape, want.dtype):
                bad.append(f"Argument 'flat_args[{k}]' compiled with {w} and called with "
                           f"{got.dtype.name}[{','.join(map(str, got.shape))}]")
        if bad:  # JAX's words, as jit's Compiled: "Argument types differ ... The mismatches are:\nArgument ..."
            raise FtransTypeError(f"{name}: Argument types differ from the types for which this computation was "
                                  "compiled. The mismatches are:\n" + "\n".join(bad)
                                  + "\nconvert them (.astype), or lower and compile again")
        return self._owner._run(self._entry, leaves)

    def as_text(self) -> str:
        """The optimised HLO XLA compiled (the lowered StableHLO where the executable cannot show it)."""
        try:
            return self._entry.exe.xla.hlo_modules()[0].to_string()
        except Exception:  # noqa: BLE001
            return self._entry.exe.text

    def runtime_executable(self) -> Any:
        """The loaded XLA executable the PJRT runtime runs."""
        return self._entry.exe.xla

    def cost_analysis(self) -> Any:
        from ftrans.lowering import compat

        return compat.executable_cost_analysis(self._entry.exe.xla)

    def memory_analysis(self) -> Any:
        """XLA's sizes of the compiled program's buffers, as in JAX."""
        return self._entry.exe.xla.get_compiled_memory_stats()


def _argnums(x: Any, what: str) -> tuple:
    if x is None:
        return ()
    if isinstance(x, int):
        return (x,)
    try:
        out = tuple(x)
    except TypeError:
        raise FtransTypeError(f"pmap: {what} must be an int or a sequence of ints, got {x!r}") from None
    for i in out:
        if type(i) is not int:
            raise FtransTypeError(f"pmap: {what} must be an int or a sequence of ints, got {x!r}")
    return out


def pmap(fun: Callable | None = None, axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence[Any] | None = None,
         backend: str | None = None, axis_size: int | None = None, donate_argnums: int | Sequence[int] = (),
         global_arg_shapes: Any = None) -> Any:
    """JAX's ``pmap``: run ``fun`` on each device with its block of the mapped arguments.

    ``in_axes``/``out_axes`` are as for ``vmap`` (``None``: broadcast an input to
    every device, or return one copy of an output every device computed the same
    way); ``axis_name`` names the mapped axis for collectives;
    ``static_broadcasted_argnums`` are passed as Python values (hashable, part of
    the compilation key); ``donate_argnums`` lets XLA reuse those arguments'
    buffers (they are deleted after the call).  The mapped size may not exceed
    the number of devices.
    """
    if global_arg_shapes is not None:
        raise NotImplementedError("pmap: global_arg_shapes is not supported")
    if devices is not None and len(devices) == 0:
        raise FtransValueError("pmap: the 'devices' argument to pmap must be non-empty, or None (every local "
                               "device)")
    statics = _argnums(static_broadcasted_argnums, "static_broadcasted_argnums")
    donate = _argnums(donate_argnums, "donate_argnums")
    if set(statics) & set(donate):
        raise FtransValueError(f"pmap: arguments {sorted(set(statics) & set(donate))} are both static and donated")
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
                                 backend=backend, axis_size=axis_size, donate_argnums=donate_argnums)
    if not callable(fun):
        raise FtransTypeError(f"pmap: expected a function, got {type(fun).__name__}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    w = PmapWrapped(fun, axis_name, in_axes, out_axes, statics, devices, backend, axis_size, donate)
    try:
        w.__signature__ = inspect.signature(fun)
    except (TypeError, ValueError):
        pass
    return w
