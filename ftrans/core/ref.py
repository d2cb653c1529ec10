"""Mutable array references (JAX's ``jax.ref``): ``Ref``, its type ``AbstractRef``, and the scopes
that turn their effects into explicit state when a function is staged.

A :class:`Ref` is a mutable holder of one array value.  Eagerly it is simply that: ``r[i] = v``
replaces the held value by ``value.at[i].set(v)``, computed by the usual primitives.

Under a transform the holder may hold a traced value.  Transforms that run the function on
tracers without staging it (``grad``, ``jvp``, ``vmap``) need nothing more: the held value is a
tracer of that transform, and writes are checked so a traced value never leaks into a ref that
outlives its transform (each ref records the trace level it belongs to).

Transforms that *stage* a function into a jaxpr (``jit``, the bodies of ``scan``, ``while_loop``,
``cond``) discharge the effects while tracing, so no ref ever reaches the IR and every IR pass and
the lowering stay purely functional.  Such a transform runs the function inside a :class:`_Scope`:
each ref the body may touch is *installed* there (its value replaced, for the body's trace, by a
staged input), and after the body ran the refs' final values become extra outputs, which the
caller writes back.  A body that touches a ref its scope does not know (a closed-over one) raises
:class:`NeedsRef` for that scope's owner, which then stages the body again with that ref threaded
too; this happens once per closed-over ref and per staging (a ``jit`` remembers its refs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ftrans.core import trace as _trace
from ftrans.core.array import Array
from ftrans.core.avals import ShapedArray
from ftrans.core.ir import Effect as _Effect
from ftrans.core.trace import Tracer, aval_of
from ftrans.errors import FtransTypeError, FtransValueError, user_location

# How many refs were ever created: while it is zero no ref can be touched anywhere, so the
# transforms that thread refs skip their checks entirely. (Once refs exist, control flow still runs
# its plain path first, ``transforms/refs.py``'s ``_plain_first``, so its programs and errors do
# not change for code that touches no ref.)
created = 0
_count_lock = threading.Lock()


class FtransRefError(FtransValueError):
    """A misuse of a mutable array reference (a freed ref, a wrong shape or dtype, a ref returned
    from a staged function or passed twice)."""


class AbstractRef:
    """The type of a :class:`Ref`: a mutable reference to an array of type ``inner_aval``."""

    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval: ShapedArray):
        self.inner_aval = inner_aval

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    weak_type = property(lambda self: self.inner_aval.weak_type)
    ndim = property(lambda self: self.inner_aval.ndim)
    size = property(lambda self: self.inner_aval.size)
    sharding = property(lambda self: self.inner_aval.sharding, doc="The sharding of the array the ref holds.")
    typed_sharding = property(lambda self: self.inner_aval.typed_sharding)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbstractRef) and self.inner_aval == other.inner_aval

    def __hash__(self) -> int:
        return hash(("Ref", self.inner_aval))

    def str_short(self, short_dtypes: bool = False) -> str:
        # the held array's type with its sharding (``Ref{float32[8@x,2]}``), as JAX's
        a = self.inner_aval
        try:
            inner = a.str_short(short_dtypes=short_dtypes)
        except TypeError:  # an unsharded type
            inner = a.str_short() if short_dtypes else f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
        return f"Ref{{{inner}}}"

    __str__ = str_short

    def __repr__(self) -> str:
        return f"AbstractRef({self.inner_aval!r})"


class RefEffect(_Effect):
    """A ref's effect on a program that takes it (JAX's ``RefEffect``): ``make_jaxpr`` of a function using
    refs lists a :class:`ReadEffect` / :class:`WriteEffect` per ref it reads / writes, naming the program
    input (its index in ``jaxpr.invars``) that carries the ref's value."""

    __slots__ = ("input_index",)

    def __init__(self, input_index: int):
        self.input_index = input_index

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.input_index == self.input_index  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.input_index))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.input_index})"


class ReadEffect(RefEffect):
    __slots__ = ()


class WriteEffect(RefEffect):
    __slots__ = ()


def _uses(jaxpr: Any, v: Any) -> tuple[bool, Any]:
    """Whether ``jaxpr``'s equations use the value of its variable ``v``, and the ids of the variables equal
    to it (``v`` and the outputs of calls passing it through unread).  A call (one body whose inputs match
    the equation's one to one, as ``jit``'s) uses it only where its body does."""
    from ftrans.core.ir import ClosedJaxpr, subjaxprs

    alias = {id(v)}
    read = False
    for eqn in jaxpr.eqns:
        pos = [k for k, a in enumerate(eqn.invars) if id(a) in alias]
        if not pos:
            continue
        subs = list(subjaxprs(eqn)) if eqn.primitive.higher_order else []
        body = (subs[0].jaxpr if isinstance(subs[0], ClosedJaxpr) else subs[0]) if len(subs) == 1 else None
        if body is None or len(body.invars) != len(eqn.invars) or len(body.outvars) != len(eqn.outvars):
            read = True
            continue
        for k in pos:
            r, inner = _uses(body, body.invars[k])
            read = read or r
            alias.update(id(eqn.outvars[m]) for m, o in enumerate(body.outvars) if id(o) in inner)
    return read, alias


def ref_effects(jaxpr: Any, ref_inputs: Sequence[int], ref_outputs: Sequence[int]) -> Any:
    """The ref effects of a discharged program: the ref whose value enters as ``jaxpr.invars[i]`` (``i`` in
    ``ref_inputs``) and leaves as ``jaxpr.outvars[o]`` (the matching ``o``) is read when the program uses
    its value, written when its final value is not that input."""
    import builtins

    out = builtins.set()  # (this module's ``set`` is JAX's ``ref.set``)
    for i, o in zip(ref_inputs, ref_outputs):
        read, alias = _uses(jaxpr, jaxpr.invars[i])
        if read or any(id(a) in alias for k, a in enumerate(jaxpr.outvars) if k != o):
            out.add(ReadEffect(i))
        if id(jaxpr.outvars[o]) not in alias:
            out.add(WriteEffect(i))
    return out


class NeedsRef(BaseException):  # noqa: N818 - a control signal, not an error a user sees
    """Raised when a staged body touches a ref its scope does not hold: its ``owner`` stages the body
    again with ``ref`` threaded.  A BaseException, so no ``except Exception`` on the way swallows it."""

    def __init__(self, ref: Ref, owner: Any):
        super().__init__("internal: a staged body touched a ref its scope does not hold")
        self.ref = ref
        self.owner = owner


class BindArgRefs(BaseException):  # noqa: N818 - a control signal, not an error a user sees
    """Raised while a jitted function is staged when a view of one of its argument refs must outlive the
    staging (a ``custom_vjp`` saves it for a backward pass traced later): the function (``owner``) stages
    again threading its callers' refs themselves, one program per set of argument refs."""

    def __init__(self, owner: Any):
        super().__init__("internal: a jitted function must thread its argument refs themselves")
        self.owner = owner


class _Scope:
    __slots__ = ("owner", "what", "alive")

    def __init__(self, owner: Any, what: str):
        self.owner = owner
        self.what = what
        self.alive = True


class _State(threading.local):
    def __init__(self) -> None:
        self.scopes: list[_Scope] = []
        # While a jitted function's twin runs: the trace depths its argument refs were made at, which the
        # views standing for them inherit (so a write inside the jit still sees an enclosing vmap).
        self.arg_homes: list[int] | None = None


_state = _State()


def _current() -> _Scope | None:
    s = _state.scopes
    return s[-1] if s else None


def _depth() -> int:
    return len(_trace.state.stack)


def _lower(v: Any) -> Any:
    """``v`` without the transform wrappers that carry nothing (an unbatched batch tracer, a tracer with
    a zero tangent): the value a ref outside that transform may hold."""
    while isinstance(v, Tracer):
        low = getattr(v, "full_lower", None)
        w = low() if low is not None else v
        if w is v:
            break
        v = w
    return v


def _index_text(idx: Any) -> str:
    if idx is Ellipsis:
        return "..."
    return repr(idx)


def _is_whole(idx: Any) -> bool:
    # (an array index is never whole: compared by type first, so ``==`` never broadcasts over it)
    return idx is Ellipsis or (type(idx) is tuple and (not idx or (len(idx) == 1 and idx[0] is Ellipsis)))


class Ref:
    """JAX's ``jax.Ref``: a mutable array reference.  Make one with :func:`new_ref`; read with
    ``r[idx]`` (``r[...]`` for the whole value), write with ``r[idx] = v`` and ``r[idx] += v``.  A
    written value must have the indexed part's shape and the ref's dtype exactly."""

    __slots__ = ("_value", "_aval", "_scope", "_level", "_home", "_freed", "_origin", "_arg_name", "_kind",
                 "_binder", "_key_impl", "_written", "__weakref__")

    def __init__(self, value: Any, aval: ShapedArray, origin: str, arg_name: str | None = None,
                 kind: str | None = None):
        global created
        with _count_lock:
            created += 1
        self._value = value
        self._written = False  # JAX's buffer of a written ref is strongly typed: its repr drops weak_type
        self._aval = aval
        self._scope = _current()
        self._level = _depth()
        self._home = self._level  # the trace depth it was made at (staging scopes move ``_level``, never this)
        self._freed: str | None = None
        self._origin = origin
        self._arg_name = arg_name
        self._kind = kind
        self._binder: Any = None  # for a jitted function's view of an argument ref: that function's owner
        # For a ref of PRNG keys: their implementation. The ref then holds the keys' uint32 data (what every
        # transform threads); reads give key arrays and writes take them.
        self._key_impl: Any = None

    # -- type-level information ------------------------------------------------------------------
    @property
    def aval(self) -> AbstractRef:
        if self._key_impl is not None:
            return AbstractRef(ShapedArray(self.shape, self.dtype))
        return AbstractRef(self._aval)

    @property
    def shape(self) -> tuple:
        s = self._aval.shape
        return s if self._key_impl is None else s[:len(s) - len(self._key_impl.key_shape)]

    @property
    def dtype(self) -> Any:
        if self._key_impl is None:
            return self._aval.dtype
        from ftrans.core.keys import KeyDtype

        return KeyDtype(self._key_impl)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: self._aval.size if self._key_impl is None else int(np.prod(self.shape)))
    weak_type = property(lambda self: self._aval.weak_type)

    def __len__(self) -> int:
        if not self.shape:
            raise FtransTypeError(f"len() of unsized object: the ref {self.aval.str_short()} holds a scalar")
        return self.shape[0]

    @property
    def sharding(self) -> Any:
        return self._read("sharding").sharding

    @property
    def format(self) -> Any:
        """The layout and sharding of the array the ref holds (JAX's ``Ref.format``)."""
        return self._read("format").format

    def unsafe_buffer_pointer(self) -> int:
        """The address of the device buffer of the array the ref holds now (JAX's). A write gives the ref a new
        array (ftrans refs are functional underneath), so the address may change where JAX's stays."""
        return self._read("unsafe_buffer_pointer").unsafe_buffer_pointer()

    # -- access ------------------------------------------------------------------------------------
    def _check(self, what: str) -> None:
        if self._freed is not None:
            raise FtransRefError(
                f"{what} of the ref {self.aval.str_short()} created at {self._origin}, which was "
                f"{self._freed}; a freed (or frozen) ref cannot be used again")
        sc = _current()
        if self._scope is sc:
            return
        if self._scope is not None and not self._scope.alive and self._arg_name is not None:
            raise FtransRefError(
                f"{what} of the ref {self.aval.str_short()} passed as the argument {self._arg_name} of a function "
                f"staged for {self._scope.what}, after that function returned (a custom_vjp backward pass run "
                "later, say): ftrans threads refs through a staged function while tracing it, so its refs can "
                "be used only while it runs; call that function unstaged, or return the values instead")
        if self._scope is not None and not self._scope.alive:
            raise FtransRefError(
                f"{what} of the ref {self.aval.str_short()} created at {self._origin} inside a function "
                f"staged for {self._scope.what}, after that function returned; a ref created inside a "
                "staged function cannot outlive it (return its value instead, e.g. with ftrans.freeze)")
        if sc is None:
            raise FtransRefError(f"{what} of the ref {self.aval.str_short()} created at {self._origin} "
                                 "outside the staged function that created it")
        raise NeedsRef(self, sc.owner)

    def _read(self, what: str = "read") -> Any:
        self._check(what)
        return self._value

    def _write(self, value: Any, what: str) -> None:
        v = _lower(value)
        if self._kind == "no_grad_no_remat":  # derivatives stop at this ref: keep only the primal
            while isinstance(v, Tracer) and hasattr(v, "tangent") and v._trace.main.level >= self._level:
                v = _lower(v.primal)
        if isinstance(v, Tracer):
            lvl = v._trace.main.level
            if lvl >= self._level:
                raise _leak_error(self, v, what)
        if aval_of(v).weak_type != self._aval.weak_type:
            v = _with_weak(v, self._aval.weak_type)
        self._value = v
        self._written = True

    def _coerce(self, x: Any, shape: tuple, what: str) -> Any:
        if isinstance(x, Ref):
            raise FtransTypeError(f"`{what}` into a ref: the value is itself a ref; read it first (r2[...])")
        from ftrans.core.operands import as_operand

        try:
            x = as_operand(x)
        except Exception as e:  # noqa: BLE001 - reported as the ref's own error
            raise FtransTypeError(f"`{what}` into the ref {self.aval.str_short()}: the value of type "
                                  f"{type(x).__name__} is not an array ({e})") from None
        a = aval_of(x)
        if a.dtype != self._aval.dtype:
            raise FtransRefError(
                f"Invalid dtype for `{what}`: the ref {self.aval.str_short()} holds {self._aval.dtype.name} "
                f"but the value is {a.dtype.name}; convert it first (x.astype({self._aval.dtype.name!r}))")
        if tuple(a.shape) != tuple(shape):
            raise FtransRefError(
                f"Invalid shape for `{what}`: the ref {self.aval.str_short()} indexed this way has shape "
                f"{tuple(shape)} but the value has shape {tuple(a.shape)} (refs do not broadcast a written "
                "value; broadcast it yourself)")
        return x

    def _get(self, idx: Any) -> Any:
        v = self._read("read")
        if self._key_impl is not None:
            v = _as_keys(self._key_impl, v)
        return v if _is_whole(idx) else v[idx]

    def _key_data(self, x: Any, idx: Any, what: str) -> tuple[Any, Any]:
        """For a ref of keys: the uint32 data of the key array ``x`` written at ``idx``, checked, and the index
        into the held data that ``idx`` means."""
        from ftrans.core.keys import is_key

        if what == "addupdate":
            raise FtransTypeError(f"addupdate into the ref {self.aval.str_short()}: keys cannot be added")
        whole = self.shape if _is_whole(idx) else _as_keys(self._key_impl, self._value)[idx].shape
        if not is_key(x) or x._impl is not self._key_impl:
            got = x.dtype.name if is_key(x) else getattr(getattr(x, "dtype", None), "name", type(x).__name__)
            raise FtransRefError(
                f"Invalid dtype for `{what}`: the ref {self.aval.str_short()} holds {self.dtype.name} keys "
                f"but the value is {got}")
        if tuple(x.shape) != tuple(whole):
            raise FtransRefError(
                f"Invalid shape for `{what}`: the ref {self.aval.str_short()} indexed this way has shape "
                f"{tuple(whole)} but the value has shape {tuple(x.shape)}")
        if _is_whole(idx):
            return x._base_array, ...
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(i is Ellipsis or i is None for i in idx):
            raise FtransTypeError(f"`{what}` into the ref {self.aval.str_short()} of keys: index it with "
                                  "integers, slices or arrays only (no ... or None)")
        return x._base_array, idx

    def _refuse_outer_vmap(self, what: str) -> None:
        """A ref made outside a ``vmap`` that is active now (closed over, or passed with ``in_axes=None``) is
        read-only inside it, whatever the written value, as in JAX: each example would write its own value
        into the one array."""
        for main in _trace.state.stack[self._home:]:
            if getattr(main.trace_type, "outer_refs_read_only", False):
                op = "an addupdate" if what == "addupdate" else "a set/swap"
                raise FtransRefError(
                    f"performing {op} operation with vmapped value on an unbatched array reference of type "
                    f"{self.aval.str_short()} (created at {self._origin}, outside the vmapped function): under "
                    "vmap such a ref can only be read. Pass it as a mapped argument of the vmapped function "
                    "(e.g. split it first), or create it inside")

    def _swap(self, idx: Any, x: Any, what: str = "swap") -> Any:
        v = self._read(what)
        self._refuse_outer_vmap(what)
        if self._key_impl is not None:
            old = self._get(idx)
            data, didx = self._key_data(x, idx, what)
            self._write(data if didx is Ellipsis else v.at[didx].set(data), what)
            return old
        if _is_whole(idx):
            self._write(self._coerce(x, self._aval.shape, what), what)
            return v
        old = v[idx]
        x = self._coerce(x, old.shape, what)
        self._write(v.at[idx].set(x), what)
        return old

    def _addupdate(self, idx: Any, x: Any) -> None:
        v = self._read("addupdate")
        self._refuse_outer_vmap("addupdate")
        if self._key_impl is not None:
            self._key_data(x, idx, "addupdate")
        if _is_whole(idx):
            x = self._coerce(x, self._aval.shape, "addupdate")
            self._write(v + x, "addupdate")
            return
        shape = v[idx].shape
        x = self._coerce(x, shape, "addupdate")
        self._write(v.at[idx].add(x), "addupdate")

    def __getitem__(self, idx: Any) -> Any:
        return self._get(idx)

    def __setitem__(self, idx: Any, x: Any) -> None:
        self._swap(idx, x, "swap")

    def get(self, idx: Any = ...) -> Any:
        return self._get(idx)

    def set(self, x: Any, idx: Any = ...) -> None:
        self._swap(idx, x, "swap")

    def swap(self, x: Any, idx: Any = ...) -> Any:
        return self._swap(idx, x, "swap")

    def addupdate(self, x: Any, idx: Any = ()) -> None:
        self._addupdate(idx, x)

    @property
    def at(self) -> _At:
        """``r.at[idx]``: a view of part of the ref, read and written through it (``r.at[1:3][...] += x``)."""
        return _At(self)

    def __repr__(self) -> str:
        if self._freed is not None:
            return f"Ref(<{self._freed}>, {self.aval.str_short()})"
        v = self._value
        if isinstance(v, Tracer):
            return f"Ref(traced {self.aval.str_short()})"
        if self._key_impl is not None:
            r = repr(_as_keys(self._key_impl, v))
            return "Ref" + r[len("Array"):] if r.startswith("Array(") else f"Ref({r})"
        r = repr(v)
        if self._written and r.endswith(", weak_type=True)"):  # as JAX's: the written buffer is strong
            r = r[:-len(", weak_type=True)")] + ")"
        return "Ref" + r[len("Array"):] if r.startswith("Array(") else f"Ref({r})"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __iter__(self) -> Any:
        raise FtransTypeError("iterating over a ref is not supported; read it first (r[...])")

    def __bool__(self) -> bool:
        raise FtransTypeError("the truth value of a ref is ambiguous; read it first (r[...])")


class _At:
    __slots__ = ("_ref",)

    def __init__(self, ref: Any):
        self._ref = ref

    def __getitem__(self, idx: Any) -> RefView:
        return RefView(self._ref, idx)


class RefView:
    """Part of a ref (``r.at[idx]``): reads and writes go through to the ref it views."""

    __slots__ = ("_base", "_idx")

    def __init__(self, base: Any, idx: Any):
        self._base = base
        self._idx = idx

    def _whole(self) -> Any:
        return self._base._get(self._idx)

    shape = property(lambda self: self._whole().shape)
    dtype = property(lambda self: self._base.dtype)
    ndim = property(lambda self: len(self.shape))

    @property
    def aval(self) -> AbstractRef:
        return AbstractRef(ShapedArray(tuple(self.shape), self._base.dtype, self._base.weak_type))

    def __getitem__(self, idx: Any) -> Any:
        w = self._whole()
        return w if _is_whole(idx) else w[idx]

    def __setitem__(self, idx: Any, x: Any) -> None:
        self.swap(x, idx)

    def swap(self, x: Any, idx: Any = ...) -> Any:
        w = self._whole()
        if _is_whole(idx):
            self._base._swap(self._idx, x)
            return w
        old = w[idx]
        part = Ref.__new__(Ref)  # only for the shape/dtype check and its message
        part._aval = ShapedArray(tuple(w.shape), w.dtype, False)
        x = part._coerce(x, old.shape, "swap")
        self._base._swap(self._idx, w.at[idx].set(x))
        return old

    def addupdate(self, x: Any, idx: Any = ()) -> None:
        self.swap(self[idx] + x, idx)

    @property
    def at(self) -> _At:
        return _At(self)

    def _get(self, idx: Any) -> Any:
        return self[idx]

    def _swap(self, idx: Any, x: Any, what: str = "swap") -> Any:
        return self.swap(x, idx)

    def _addupdate(self, idx: Any, x: Any) -> None:
        self.addupdate(x, idx)

    weak_type = property(lambda self: self._base.weak_type)

    def __repr__(self) -> str:
        return f"RefView({self._base!r}, {_index_text(self._idx)})"


def _as_keys(impl: Any, data: Any) -> Any:
    """The key array of ``impl`` over ``data`` (a key ref's held value)."""
    from ftrans.core.keys import unflatten_key

    return unflatten_key(impl, [data])


def _with_weak(x: Any, weak: bool) -> Any:
    if type(x) is Array:
        return Array._new(x._value, weak)
    from ftrans.core.prims import structural as S

    return S.convert_element_type_p.bind(x, new_dtype=aval_of(x).dtype, weak_type=weak)


def _leak_error(ref: Ref, v: Tracer, what: str) -> Exception:
    t = type(v).__name__
    if hasattr(v, "bdim"):
        return FtransRefError(
            f"`{what}` of a batched value into the unbatched array reference {ref.aval.str_short()} created at "
            f"{ref._origin}: under vmap a ref created outside the mapped function can only be read; pass the "
            "ref as a mapped argument of the function instead")
    if hasattr(v, "tangent"):
        return FtransRefError(
            f"performing a set/swap operation with a differentiated value on a non-differentiated array "
            f"reference of type {ref.aval.str_short()} (created at {ref._origin}). Move the array reference "
            "to be an argument of the differentiated function, or create it inside that function")
    return FtransRefError(
        f"`{what}` of a traced value ({t}) into the array reference {ref.aval.str_short()} created at "
        f"{ref._origin}, outside the transformation that traced the value: the value would leak out of it")


# ------------------------------------------------------------------------------------------------
# The public functions


def new_ref(init_val: Any, *, memory_space: Any = None, kind: Any = None) -> Ref:
    """JAX's ``jax.new_ref``: a mutable array reference holding ``init_val``.  ``kind='no_grad_no_remat'``
    makes a ref whose contents no derivative flows through: a differentiated value written into it
    keeps only its primal (so a function being differentiated may write into it)."""
    if kind not in (None, "no_grad_no_remat"):
        raise FtransValueError(f"new_ref: kind must be None or 'no_grad_no_remat', got {kind!r}")
    from ftrans.core.prims.shard_map import refuse_ref_in_eager_body

    refuse_ref_in_eager_body()
    if isinstance(init_val, (Ref, RefView)):
        raise FtransTypeError("new_ref: the initial value is a ref; read it first (r[...])")
    from ftrans.core.keys import is_key
    from ftrans.core.operands import as_operand

    if is_key(init_val):  # a ref of PRNG keys holds their data (see ``Ref._key_impl``)
        v = _lower(init_val._base_array)
        r = Ref(v, aval_of(v), user_location(), kind=kind)
        r._key_impl = init_val._impl
        return r

    try:
        # An array is held as it is (a device or sharded array keeps its placement and sharding, as in JAX).
        v = init_val if isinstance(init_val, Array) else as_operand(init_val)
    except Exception as e:  # noqa: BLE001
        raise FtransTypeError(f"new_ref: the initial value of type {type(init_val).__name__} is not an "
                              f"array ({e})") from None
    v = _lower(v)
    return Ref(v, aval_of(v), user_location(), kind=kind)


def new_ref_outside(init_val: Array, *, kind: Any = None, origin: str | None = None) -> Ref:
    """``new_ref`` of a concrete array, made as at top level (JAX's ``new_ref`` under ``eval_context``): no
    staging scope or transform active now owns it, so it outlives them (a global state a traced function
    reads and writes, threaded like any closed-over ref).  ``origin``: what errors call its creation site."""
    r = new_ref(init_val, kind=kind)
    if origin is not None:
        r._origin = origin
    r._scope = None
    r._level = r._home = 1  # the depth of the base (eager) level
    return r


def empty_ref(ty: Any, memory_space: Any = None) -> Ref:
    """JAX's ``jax.empty_ref``: a ref of ``ty``'s shape and dtype (a ``ShapeDtypeStruct`` or an array)
    whose contents are unspecified until written (ftrans fills it with zeros)."""
    import numpy as np

    from ftrans.core import dtypes
    from ftrans.core.prims.shard_map import refuse_ref_in_eager_body

    refuse_ref_in_eager_body()
    if isinstance(ty, AbstractRef):
        ty = ty.inner_aval
    try:
        shape, dtype = tuple(ty.shape), dtypes.canonicalize(np.dtype(ty.dtype))
    except (AttributeError, TypeError) as e:
        raise FtransTypeError(f"empty_ref: expected a ShapeDtypeStruct (or an array) giving the shape and "
                              f"dtype, got {type(ty).__name__} ({e})") from None
    v = Array._new(np.zeros(shape, dtype), bool(getattr(ty, "weak_type", False)))
    return Ref(v, aval_of(v), user_location())


def _as_ref(ref: Any, fn: str) -> Ref:
    if not isinstance(ref, (Ref, RefView)):
        raise FtransTypeError(f"{fn}: expected a ref (made by ftrans.new_ref), got {type(ref).__name__}")
    return ref


def free_ref(ref: Ref) -> tuple:
    """JAX's ``jax.free_ref``: invalidate ``ref``; using it afterwards (or freeing it again) is an error."""
    r = _as_ref(ref, "free_ref")
    if isinstance(r, RefView):
        raise FtransTypeError("free_ref: expected a whole ref, got a view r.at[...]")
    r._check("free_ref")
    r._freed = f"freed at {user_location()}"
    return ()


def freeze(ref: Ref) -> Any:
    """JAX's ``jax.freeze``: the final value of ``ref``, which is invalidated."""
    r = _as_ref(ref, "freeze")
    if isinstance(r, RefView):
        return r[...]
    v = r._read("freeze")
    r._freed = f"frozen at {user_location()}"
    return v


def get(ref: Any, idx: Any = None) -> Any:
    """JAX's ``jax.ref.get``: ``ref[idx]`` (the whole value when ``idx`` is None)."""
    return _as_ref(ref, "ref.get")._get(... if idx is None else idx)


def swap(ref: Any, idx: Any, value: Any) -> Any:
    """JAX's ``jax.ref.swap``: write ``value`` at ``idx`` and return what was there."""
    return _as_ref(ref, "ref.swap")._swap(... if idx is None else idx, value, "swap")


def set(ref: Any, idx: Any, value: Any) -> None:  # noqa: A001 - JAX's name
    """JAX's ``jax.ref.set``: ``ref[idx] = value``."""
    _as_ref(ref, "ref.set")._swap(... if idx is None else idx, value, "swap")


def addupdate(ref: Any, idx: Any, x: Any) -> None:
    """JAX's ``jax.ref.addupdate``: ``ref[idx] += x``."""
    _as_ref(ref, "ref.addupdate")._addupdate(() if idx is None else idx, x)


def is_ref(x: Any) -> bool:
    return isinstance(x, Ref)


# ------------------------------------------------------------------------------------------------
# Scopes: what a staging transform uses to thread refs


def carries_tangent(v: Any, level: int = 0) -> bool:
    """Whether ``v`` carries a tangent of a differentiation whose trace level is at least ``level``."""
    while isinstance(v, Tracer):
        if hasattr(v, "tangent") and v._trace.main.level >= level:
            return True
        v = getattr(v, "primal", None) if hasattr(v, "primal") else getattr(v, "val", None)
    return False


def view_ref(value: Any, origin: str, arg_name: str | None, kind: str | None = None, binder: Any = None,
             home: int | None = None, key_impl: Any = None) -> Ref:
    """A fresh ref standing, inside a staged body, for a ref its caller passed as an argument.  ``binder``
    (a jitted function's owner) can be asked to thread the caller's ref itself instead
    (:class:`BindArgRefs`); ``home`` is the trace depth the caller's ref was made at (default: now)."""
    r = Ref(value, aval_of(value), origin, arg_name, kind)
    r._binder = binder
    r._key_impl = key_impl
    if home is not None:
        r._home = min(home, r._home)
    return r


def run_scoped(fn: Callable[[], Any], refs: Sequence[Ref], vals: Sequence[Any], owner: Any,
               what: str) -> tuple[Any, list]:
    """Run ``fn()`` (the body being staged) with each of ``refs`` holding the matching value of
    ``vals`` (the body's staged inputs); return its result and the refs' final values.  Afterwards
    each ref holds what it held before, and refs created inside are dead.  A ref the body touches that
    is not among ``refs`` raises :class:`NeedsRef` for ``owner``."""
    scope = _Scope(owner, what)
    saved = [(r._value, r._scope, r._level, r._freed) for r in refs]
    stack = _state.scopes
    stack.append(scope)
    try:
        depth = _depth()
        for r, v in zip(refs, vals):
            r._value, r._scope, r._level, r._freed = v, scope, depth, None
        out = fn()
        final = []
        for r in refs:
            if r._freed is not None:
                raise FtransRefError(f"the ref {r.aval.str_short()} passed into a function staged for {what} "
                                     f"was {r._freed}; only refs created inside it may be freed there")
            final.append(r._value)
        return out, final
    finally:
        scope.alive = False
        stack.pop()
        for r, (v, s, lv, fr) in zip(refs, saved):
            r._value, r._scope, r._level, r._freed = v, s, lv, fr


def check_no_refs(out: Any, what: str, fname: str) -> None:
    """Raise if ``out`` (what a staged function returned) holds a ref: refs cannot be returned."""
    from ftrans.core import pytrees as tree_util

    for leaf in tree_util.tree_leaves(out):
        if isinstance(leaf, (Ref, RefView)):
            r = leaf._base if isinstance(leaf, RefView) else leaf
            if r._arg_name is not None:
                src = f"The returned mutable array was passed in as the argument {r._arg_name}."  # (JAX's words)
            else:
                src = f"The returned mutable array was created on line {r._origin}."
            raise FtransRefError(
                f"function {fname} traced for {what} returned a mutable array reference of type "
                f"{r.aval.str_short()}, but mutable array references cannot be returned.\n\n{src}")


def _usable(r: Ref) -> bool:
    return r._freed is None and (r._scope is None or r._scope.alive)


def closure_refs(*funs: Any, exclude: Sequence[Any] = ()) -> list[Ref]:
    """The live refs that ``funs`` close over, as far as Python shows them: in their closure cells and
    default arguments, looked into through containers, nested functions and ``functools.partial``.

    A staging transform threads these from its first trace, so a body closing over refs is traced once
    (as JAX's) rather than again for each ref it turns out to touch (``NeedsRef``), which would run the
    body's Python side effects again.  Refs reached otherwise (through globals or object attributes) are
    still found on first touch.  ``exclude``: refs passed as arguments, never threaded twice."""
    if created == 0:
        return []
    import functools

    out: list[Ref] = []
    seen: set[int] = {id(r) for r in exclude}
    budget = [256]

    def visit(x: Any, depth: int) -> None:
        if budget[0] <= 0 or depth > 4:
            return
        budget[0] -= 1
        if isinstance(x, Ref):
            if id(x) not in seen and _usable(x):
                seen.add(id(x))
                out.append(x)
            return
        if isinstance(x, (str, bytes, int, float, complex, bool, type(None), Array)):
            return
        if isinstance(x, (list, tuple)):
            for y in x[:64]:
                visit(y, depth + 1)
        elif isinstance(x, dict):
            for y in list(x.values())[:64]:
                visit(y, depth + 1)
        elif isinstance(x, functools.partial):
            visit(x.func, depth + 1)
            visit(x.args, depth + 1)
            visit(x.keywords, depth + 1)
        elif callable(x):
            wrapped = getattr(x, "__wrapped__", None)
            if wrapped is not None and wrapped is not x:
                visit(wrapped, depth + 1)
            cells = getattr(x, "__closure__", None)
            if cells:
                for c in cells:
                    try:
                        v = c.cell_contents
                    except ValueError:  # an empty cell
                        continue
                    if v is not x:
                        visit(v, depth + 1)
            defaults = getattr(x, "__defaults__", None)
            if defaults:
                visit(defaults, depth + 1)
            code, glb = getattr(x, "__code__", None), getattr(x, "__globals__", None)
            if code is not None and isinstance(glb, dict):  # the module-level names it uses
                for n in code.co_names:
                    v = glb.get(n)
                    if v is not None and v is not x:
                        visit(v, depth + 1)

    try:
        for f in funs:
            try:
                visit(f, 0)
            except Exception:  # noqa: BLE001 - an object whose attributes raise: look no further (found on touch)
                continue
    finally:
        visit = None  # noqa: F841 - the recursive closure refers to itself: clearing its cell leaves no cycle for the collector
    return out


def read_for_thread(r: Ref) -> Any:
    """The value of ``r`` as a caller threading it into a staged body reads it."""
    return r._read("read")


def write_back(r: Ref, v: Any) -> None:
    """Store a staged body's final value of ``r`` (the caller's side of the threading)."""
    r._check("write")
    r._write(v, "swap")
