"""Typed PRNG key arrays: JAX's ``random.key`` arrays, whose dtype is a key dtype (``key<fry>``).

A key array is an array of keys: its ``shape`` counts keys, its ``dtype`` is the ``KeyDtype`` of one
PRNG implementation (``impl``), and its data is a ``uint32`` array (the *base array*) whose shape is the
key array's shape followed by the implementation's ``key_shape`` (``(2,)`` for threefry2x32).

Design.  A key array is one pytree leaf to users (as in JAX: ``tree_util.tree_leaves(keys) == [keys]``),
but ftrans's own code flattens with ``ftrans.core.pytrees``, to which it is a node over its base array
with the implementation as node data.  Every transform (``jit``, ``vmap``, ``scan``, ``cond``,
``while_loop``, ``grad``, ``custom_jvp``) and ``device_put``/``device_get`` flattens its arguments and
results that way, so a key array crosses them as its base array and comes back out as a key array of
the same implementation.  The base array is the ``uint32`` data eagerly; inside a staged program it may
be a key-typed value (a tracer of a ``key<...>`` abstract value: ``_typed``), on which the PRNG
primitives of ``core/prims/random.py`` act (see docs/architecture.md, "Typed PRNG keys in the IR").  Structural operations (indexing, ``reshape``, ``concatenate``, ``where``, ``lax.select``,
``dynamic_slice``, ...) act on the leading (key) axes of the base array and leave its trailing
key-data axes alone: ``ftrans.numpy`` and ``ftrans.lax`` dispatch a key-array argument to their
key-aware versions (``ftrans/numpy/_keys.py``, ``ftrans/lax/_keys.py``), and arithmetic on keys is a
``FtransTypeError`` naming the operation (as JAX's ``add does not accept dtype key<fry>``).

The tangent of a key array is ``float0`` of the key array's shape (a key is not differentiable).
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

from ftrans.errors import FtransNotImplementedError, FtransTypeError, FtransValueError

__all__ = ["extended", "prng_key", "KeyDtype", "PRNGKeyArray", "is_key", "is_key_dtype", "wrap",
           "reject_keys", "unflatten_key", "ExtendedDType", "is_user_edtype", "is_extended_dtype",
           "physical_element"]


class extended(np.generic):  # noqa: N801  (JAX's name)
    """JAX's scalar class of extended dtypes (``issubdtype(d, extended)``): the key dtypes are its
    subtypes (through ``prng_key``)."""


class prng_key(extended):  # noqa: N801  (JAX's name)
    """JAX's scalar class of typed PRNG key dtypes: ``issubdtype(key.dtype, prng_key)`` is True for a
    key array made by ``random.key``/``wrap_key_data`` and False for raw ``uint32`` key data."""


class KeyDtype:
    """The dtype of a typed key array of one PRNG implementation (JAX's ``KeyTy``): printed
    ``key<tag>`` (``key<fry>`` for threefry2x32); equal for the same implementation."""

    __slots__ = ("_impl",)
    type = prng_key
    kind = "V"

    def __init__(self, impl: Any) -> None:
        self._impl = impl

    @property
    def name(self) -> str:
        return f"key<{self._impl.tag}>"

    @property
    def itemsize(self) -> int:
        """Bytes of one key's data (4 per ``uint32`` word)."""
        return 4 * math.prod(self._impl.key_shape)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return type(other) is KeyDtype and other._impl == self._impl

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("KeyDtype", self._impl))


def is_key_dtype(d: Any) -> bool:
    return type(d) is KeyDtype


class ExtendedDType:
    """JAX's ``jax.dtypes.ExtendedDType``: the base of a user-defined extended dtype.  A subclass gives
    ``type`` (a subclass of :class:`extended`, for ``issubdtype``), ``name`` and ``_rules``, an object with
    ``physical_element_aval(dtype)`` (the shape and dtype of one element's representation: an array of
    the extended dtype is its representation array with those trailing axes) and ``allow_conversion``
    (whether ``lax.convert_element_type`` converts to and from the representation dtype); ``tangent_dtype``
    (optional) gives the dtype of its tangents.  Instances of JAX's own ``ExtendedDType`` subclasses are
    accepted too (they carry the same attributes)."""

    type: Any = extended
    kind = "V"
    _rules: Any = None

    @property
    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return self.name


class primal_tangent_dtype_scalar(extended):  # noqa: N801  (JAX's name)
    """The scalar class of :func:`primal_tangent_dtype`'s dtypes."""


class PrimalTangentDType(ExtendedDType):
    """JAX's ``dtypes.primal_tangent_dtype``: values stored as ``primal_dtype`` whose tangents are
    ``tangent_dtype`` (an int8 weight with float tangents, ...)."""

    type = primal_tangent_dtype_scalar

    def __init__(self, primal_dtype: Any, tangent_dtype: Any, name: str) -> None:
        import types

        self.primal_dtype, self.tangent_dtype, self._name = primal_dtype, tangent_dtype, name
        self._rules = types.SimpleNamespace(
            physical_element_aval=lambda d: types.SimpleNamespace(shape=(), dtype=primal_dtype),
            tangent_dtype=lambda d: tangent_dtype, allow_conversion=True)

    @property
    def name(self) -> str:
        return self._name

    def __eq__(self, other: object) -> bool:
        return (type(other) is PrimalTangentDType and other.primal_dtype == self.primal_dtype
                and other.tangent_dtype == self.tangent_dtype and other._name == self._name)

    def __hash__(self) -> int:
        return hash(("PrimalTangentDType", self.primal_dtype, self.tangent_dtype, self._name))


def primal_tangent_dtype(primal_dtype: Any, tangent_dtype: Any, name: str | None = None) -> PrimalTangentDType:
    """JAX's ``dtypes.primal_tangent_dtype``: an extended dtype stored as ``primal_dtype`` (convert to and from
    it with ``lax.convert_element_type``) whose tangents are ``tangent_dtype``; named
    ``PrimalTangentDType{i8/bf16}``-style unless ``name`` is given."""
    p, t = np.dtype(primal_dtype), np.dtype(tangent_dtype)

    def short(d: np.dtype) -> str:
        return d.name.replace("float", "f").replace("uint", "u").replace("int", "i").replace("complex", "c")

    return PrimalTangentDType(p, t, name or f"PrimalTangentDType{{{short(p)}/{short(t)}}}")


def is_user_edtype(d: Any) -> bool:
    """Whether ``d`` is a user-defined extended dtype (ftrans's or JAX's ``ExtendedDType`` subclass): not a
    NumPy dtype nor a key dtype, with a rules object that gives its physical element."""
    return (d is not None and not isinstance(d, (np.dtype, type, str)) and type(d) is not KeyDtype
            and hasattr(getattr(d, "_rules", None), "physical_element_aval"))


def is_extended_dtype(d: Any) -> bool:
    """A key dtype or a user-defined extended dtype."""
    return type(d) is KeyDtype or is_user_edtype(d)


def physical_element(d: Any) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of one element of user-defined extended dtype ``d`` (its rules'
    ``physical_element_aval``)."""
    el = d._rules.physical_element_aval(d)
    return tuple(el.shape), np.dtype(el.dtype)


def _is_float0(x: Any) -> bool:
    d = getattr(x, "dtype", None)
    return isinstance(d, np.dtype) and d.kind == "V" and d.names == ("float0",)


# Set by ``ftrans.core.key_reuse`` while key-reuse checking is on: makes the state of a new key array.
reuse_new: Any = None


class PRNGKeyArray:
    """An array of PRNG keys of one implementation (JAX's ``PRNGKeyArray``)."""

    __slots__ = ("_impl", "_base_array", "_use")
    __array_priority__ = 2000
    __hash__ = None  # type: ignore[assignment]  (mutable-looking, as JAX's: not hashable)

    def __init__(self, impl: Any, base_array: Any) -> None:
        self._impl = impl
        self._base_array = base_array
        # key-reuse checking (``core/key_reuse.py``): the consumption state, while checking is on
        self._use = None if reuse_new is None else reuse_new(self)

    @property
    def _consumed(self) -> Any:
        """Whether the key-reuse checker counts this key array as consumed (a bool, or a mask of its shape)."""
        u = getattr(self, "_use", None)
        return False if u is None else u.consumed

    # -- type --------------------------------------------------------------
    @property
    def dtype(self) -> KeyDtype:
        return KeyDtype(self._impl)

    @property
    def _typed(self) -> bool:
        """Whether the base array is a key-typed IR value (a tracer of a ``key<...>`` aval, inside a staged
        program) rather than ``uint32`` key data."""
        return type(getattr(self._base_array, "dtype", None)) is KeyDtype

    @property
    def _key_tail(self) -> tuple[int, ...]:
        """The trailing key-data axes of the base array: the key shape for ``uint32`` data, none for a
        key-typed value."""
        return () if self._typed else tuple(self._impl.key_shape)

    @property
    def _key_ndim(self) -> int:
        return len(self._key_tail)

    @property
    def shape(self) -> tuple[int, ...]:
        s = tuple(self._base_array.shape)
        return s[:len(s) - self._key_ndim]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def weak_type(self) -> bool:
        return False

    @property
    def aval(self) -> Any:
        """The abstract value of the key data (``uint32[*shape, *key_shape]``)."""
        return self._base_array.aval

    def __len__(self) -> int:
        if not self.shape:
            raise FtransTypeError("len() of unsized object: this key array is a single key (shape ())")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise FtransTypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    # -- printing ----------------------------------------------------------
    def __repr__(self) -> str:
        from ftrans.core.trace import Tracer

        if isinstance(self._base_array, Tracer):
            return f"Traced<{self.dtype.name}[{','.join(map(str, self.shape))}]>"
        if not hasattr(self._base_array, "__array__"):  # an abstract one (eval_shape's ShapeDtypeStruct)
            return f"PRNGKeyArray(shape={self.shape}, dtype={self.dtype.name})"
        return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n{np.asarray(self._base_array)}"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)

    # -- conversions that keys refuse ----------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise FtransTypeError(
            f"an ftrans array with PRNGKey dtype ({self.dtype.name}) cannot be converted to a NumPy "
            "array. Use ftrans.random.key_data(arr) if you wish to extract the underlying integer array.")

    def __bool__(self) -> bool:
        raise FtransTypeError(f"the truth value of a key array ({self.dtype.name}) is undefined")

    def _not_a_number(self, *_args: Any) -> Any:
        raise FtransTypeError(f"a key array ({self.dtype.name}) is not a number")

    __int__ = __float__ = __complex__ = __index__ = _not_a_number

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        # JAX's key arrays have no ``astype`` either (a NotImplementedError)
        raise FtransNotImplementedError(
            f"a key array ({self.dtype.name}) has no astype: use ftrans.random.key_data(keys) for its uint32 data, "
            "ftrans.random.wrap_key_data(data, impl=...) for keys of another implementation")

    # -- structural methods (implemented by ftrans.numpy, installed below) ------
    @property
    def T(self) -> PRNGKeyArray:
        return _jnp.transpose(self)

    @property
    def mT(self) -> PRNGKeyArray:
        return _jnp.swapaxes(self, -1, -2)

    def reshape(self, *shape: Any, order: str = "C") -> PRNGKeyArray:
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return _jnp.reshape(self, shape, order=order)

    def ravel(self, order: str = "C") -> PRNGKeyArray:
        return _jnp.ravel(self, order=order)

    def flatten(self, order: str = "C") -> PRNGKeyArray:
        return _jnp.ravel(self, order=order)

    def squeeze(self, axis: Any = None) -> PRNGKeyArray:
        return _jnp.squeeze(self, axis)

    def transpose(self, *axes: Any) -> PRNGKeyArray:
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            axes = axes[0]
        return _jnp.transpose(self, axes or None)

    def swapaxes(self, axis1: int, axis2: int) -> PRNGKeyArray:
        return _jnp.swapaxes(self, axis1, axis2)

    def take(self, indices: Any, axis: Any = None, **kwargs: Any) -> PRNGKeyArray:
        return _jnp.take(self, indices, axis=axis, **kwargs)

    def __getitem__(self, idx: Any) -> PRNGKeyArray:
        return _jnp._getitem(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        raise FtransTypeError("key arrays are immutable: use keys.at[idx].set(key) instead")

    @property
    def at(self) -> Any:
        return _jnp._key_index_helper(self)

    def copy(self) -> PRNGKeyArray:
        from ftrans.core import key_reuse

        return key_reuse.alias(self, PRNGKeyArray(self._impl, _jnp.array(self._base_array, copy=True)))

    def __copy__(self) -> PRNGKeyArray:
        return self.copy()

    def __deepcopy__(self, memo: Any) -> PRNGKeyArray:
        return self.copy()

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return _jnp.equal(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return _jnp.not_equal(self, other)

    # -- device and buffer methods: those of the base array ---------------------
    @property
    def device(self) -> Any:
        return self._base_array.device

    def devices(self) -> set:
        return self._base_array.devices()

    @property
    def sharding(self) -> Any:
        return self._base_array.sharding

    @property
    def committed(self) -> bool:
        return bool(getattr(self._base_array, "_committed", False))

    @property
    def is_fully_addressable(self) -> bool:
        return self._base_array.is_fully_addressable

    @property
    def is_fully_replicated(self) -> bool:
        return self._base_array.is_fully_replicated

    def _key_shards(self, shards: list) -> list:
        # The base array's blocks as blocks of keys: the data is wrapped; the index stays the base array's (it
        # covers the key-data axes too), as JAX's.
        from ftrans.core.array import Shard

        return [Shard(s.device, s.index, None if s.data is None else PRNGKeyArray(self._impl, s.data), s.replica_id)
                for s in shards]

    @property
    def addressable_shards(self) -> list:
        return self._key_shards(self._base_array.addressable_shards)

    @property
    def global_shards(self) -> list:
        return self._key_shards(self._base_array.global_shards)

    def addressable_data(self, index: int) -> PRNGKeyArray:
        return PRNGKeyArray(self._impl, self._base_array.addressable_data(index))

    def on_device_size_in_bytes(self) -> int:
        return self._base_array.on_device_size_in_bytes()

    def unsafe_buffer_pointer(self) -> int:
        return self._base_array.unsafe_buffer_pointer()

    def block_until_ready(self) -> PRNGKeyArray:
        self._base_array.block_until_ready()
        return self

    def copy_to_host_async(self) -> None:
        self._base_array.copy_to_host_async()

    def is_deleted(self) -> bool:
        return self._base_array.is_deleted()

    def delete(self) -> None:
        self._base_array.delete()


def _arith(name: str):
    def op(self: PRNGKeyArray, *args: Any) -> Any:
        raise reject_keys(name, (self, *args))

    op.__name__ = f"__{name}__"
    return op


for _slot, _prim in (("add", "add"), ("radd", "add"), ("sub", "sub"), ("rsub", "sub"), ("mul", "mul"),
                     ("rmul", "mul"), ("truediv", "div"), ("rtruediv", "div"), ("floordiv", "floor_divide"),
                     ("rfloordiv", "floor_divide"), ("mod", "rem"), ("rmod", "rem"), ("pow", "pow"),
                     ("rpow", "pow"), ("matmul", "dot_general"), ("rmatmul", "dot_general"), ("and", "and"),
                     ("rand", "and"), ("or", "or"), ("ror", "or"), ("xor", "xor"), ("rxor", "xor"),
                     ("lshift", "shift_left"), ("rlshift", "shift_left"), ("rshift", "shift_right"),
                     ("rrshift", "shift_right"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"),
                     ("neg", "neg"), ("pos", "pos"), ("abs", "abs"), ("invert", "not")):
    setattr(PRNGKeyArray, f"__{_slot}__", _arith(_prim))


def _dtype_name(x: Any) -> str:
    if isinstance(x, PRNGKeyArray):
        return x.dtype.name
    if type(x) is bool:
        return "bool"
    if type(x) in (int, float, complex):
        return {int: "int32", float: "float32", complex: "complex64"}[type(x)]
    d = getattr(x, "dtype", None)
    return getattr(d, "name", type(x).__name__)


# numpy function name -> the primitive JAX's error names
_PRIM_NAMES = {"negative": "neg", "subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div",
               "power": "pow", "remainder": "rem", "absolute": "abs", "bitwise_and": "and", "bitwise_or": "or",
               "bitwise_xor": "xor", "bitwise_not": "not", "invert": "not", "less": "lt", "greater": "gt",
               "less_equal": "le", "greater_equal": "ge"}


def reject_keys(name: str, args: Any) -> FtransTypeError:
    """The error for a numeric operation ``name`` given a key array among ``args`` (JAX's wording:
    ``add does not accept dtypes key<fry>, int32``)."""
    name = _PRIM_NAMES.get(name, name)
    names = list(dict.fromkeys(_dtype_name(a) for a in args))
    if len(names) == 1:
        return FtransTypeError(
            f"{name} does not accept dtype {names[0]}: a key array holds PRNG keys, not numbers; use "
            "ftrans.random functions on it, or ftrans.random.key_data(keys) for its uint32 data")
    return FtransTypeError(
        f"{name} does not accept dtypes {', '.join(names)}: a key array holds PRNG keys, not numbers; "
        "use ftrans.random functions on it, or ftrans.random.key_data(keys) for its uint32 data")


def unify(keys: list) -> list:
    """``keys`` (key arrays of one implementation) all of one kind: when one is a key-typed value of a staged
    program, those holding ``uint32`` data (a concrete key the program closes over) become key-typed too
    (``random_wrap``), so an operation combining them sees one type."""
    if not any(k._typed for k in keys) or all(k._typed for k in keys):
        return list(keys)
    from ftrans.core import key_reuse
    from ftrans.core.prims.random import random_wrap_p

    return [k if k._typed else key_reuse.alias(k, PRNGKeyArray(k._impl, random_wrap_p.bind(k._base_array, impl=k._impl)))
            for k in keys]


def key_data_of(k: PRNGKeyArray) -> Any:
    """The ``uint32`` data of the key array ``k`` (``random_unwrap`` of a key-typed value)."""
    if not k._typed:
        return k._base_array
    from ftrans.core.prims.random import random_unwrap_p

    return random_unwrap_p.bind(k._base_array)


def is_key(x: Any) -> bool:
    return type(x) is PRNGKeyArray


def wrap(impl: Any, base: Any) -> PRNGKeyArray:
    """A key array of ``impl`` over ``base`` (``uint32[..., *impl.key_shape]``), checked."""
    ks = tuple(impl.key_shape)
    shape = tuple(getattr(base, "shape", ()))
    d = getattr(base, "dtype", None)
    if type(d) is KeyDtype and d._impl == impl:  # a key-typed IR value (inside a staged program)
        return PRNGKeyArray(impl, base)
    if d != np.dtype(np.uint32) or len(shape) < len(ks) or shape[len(shape) - len(ks):] != ks:
        raise FtransTypeError(
            f"ftrans.random: invalid PRNG key data for {impl.name}: expected uint32 key data whose shape "
            f"ends with {ks}; got {getattr(d, 'name', d)}{list(shape)}")
    return PRNGKeyArray(impl, base)


def common_impl(name: str, keys: Any) -> Any:
    """The one implementation of the key arrays ``keys``; mixing two is a ``FtransTypeError``."""
    impls = list(dict.fromkeys(k._impl for k in keys))
    if len(impls) > 1:
        raise FtransTypeError(
            f"{name}: key arrays of different PRNG implementations ({', '.join(f'key<{i.tag}>' for i in impls)}) "
            "cannot be combined; make every key with the same impl")
    return impls[0]


def check_all_keys(name: str, args: Any) -> Any:
    """The implementation when every array in ``args`` is a key array; a ``FtransTypeError`` when keys
    are mixed with other arrays (JAX: not a valid dtype for type promotion)."""
    keys = [a for a in args if is_key(a)]
    if len(keys) != len(args):
        other = next(a for a in args if not is_key(a))
        raise FtransTypeError(
            f"{name}: cannot combine key arrays ({keys[0].dtype.name}) with arrays of dtype "
            f"{_dtype_name(other)}; wrap the data with ftrans.random.wrap_key_data or unwrap the keys with "
            "ftrans.random.key_data")
    return common_impl(name, keys)


# ---------------------------------------------------------------- pytrees: a leaf to users, data to transforms
def unflatten_key(impl: Any, children: Any) -> Any:
    """The key array of ``impl`` over the one leaf in ``children`` (its base array, as ftrans's own
    flattening in ``ftrans.core.pytrees`` gives it), or what stands for one: a key-dtype struct for a
    ``ShapeDtypeStruct``, ``float0`` of the key array's shape for a ``float0`` tangent."""
    (base,) = children
    if type(getattr(base, "dtype", None)) is KeyDtype and not hasattr(base, "_trace"):
        return base  # the abstract value (or struct) of a key-typed value: the key array's own type
    if type(base).__name__ == "ShapeDtypeStruct":  # eval_shape's answer for keys: a key-dtype struct
        shape = tuple(base.shape)
        return type(base)(shape[:len(shape) - len(impl.key_shape)], KeyDtype(impl))
    if type(base).__name__ == "ShapedArray":  # the abstract value of a key's data (jit's ``in_avals``)
        from ftrans.core.avals import ShapedArray

        shape = tuple(base.shape)
        return ShapedArray(shape[:len(shape) - len(impl.key_shape)], KeyDtype(impl))
    if _is_float0(base):
        # The tangent (or cotangent) of a key: float0 of the key array's shape, as JAX's (a symbolic zero
        # stays one: custom_vjp's symbolic_zeros).
        shape = tuple(base.shape)
        shape = shape[:len(shape) - len(impl.key_shape)]
        aval = getattr(base, "aval", None)
        if aval is not None and not hasattr(base, "__array__"):
            return type(base)(aval.update(shape=shape))
        return np.zeros(shape, base.dtype)
    k = object.__new__(PRNGKeyArray)
    k._impl, k._base_array = impl, base
    k._use = None if reuse_new is None else reuse_new(k)
    return k


def normalize_axis(name: str, axis: Any, ndim: int) -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise FtransTypeError(f"{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise FtransValueError(f"{name}: axis {a} is out of bounds for a key array of dimension {ndim}")
    return a % ndim


_jnp: Any = None


def install(jnp_module: Any) -> None:
    """Bind the key array's structural methods to ``ftrans.numpy``'s key-aware functions."""
    global _jnp
    _jnp = jnp_module


def key_dispatching(plain: Any, keyed: Any, test: Any) -> Any:
    """``plain`` with a key-aware twin in front: calls for which ``test(args, kwargs)`` holds (a key among
    them) go to ``keyed``. Shared by the key-aware ``ftrans.numpy`` and ``ftrans.lax`` functions."""
    @functools.wraps(plain)
    def fn(*args: Any, **kwargs: Any) -> Any:
        if test(args, kwargs):
            return keyed(*args, **kwargs)
        return plain(*args, **kwargs)

    return fn
