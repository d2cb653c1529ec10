"""PRNG implementations: how a key is seeded, split, folded and turned into bits.

ftrans keys are raw ``uint32`` arrays whose trailing axis is the key data, so
the implementation of a key is read from that axis and the configured default
(``config.default_prng_impl``, JAX's ``jax_default_prng_impl``):

``threefry2x32`` (``uint32[2]``, JAX's default)
    everything from the threefry2x32 cipher (``_threefry.py``).
``rbg`` (``uint32[4]``)
    two threefry half keys side by side: seeding repeats the threefry key of
    the seed, ``split`` and ``fold_in`` apply threefry's to each half; the bits
    come from XLA's RngBitGenerator (``lax.rng_bit_generator``, XLA's default
    algorithm), so they are the backend's, as in JAX.
``unsafe_rbg`` (``uint32[4]``)
    as ``rbg`` for seeds and bits, but ``split`` takes every tenth row of
    ``10 * n`` four-word draws of the generator and ``fold_in`` xors the key with
    the last of ten rows drawn from the ``rbg`` seed of the data: cheaper, with
    weaker guarantees (JAX's definitions).

``threefry4x32`` (``uint32[4]``) and ``philox4x32`` (``uint32[2]``)
    Random123's four-word generators (``_fourwords.py``), as JAX defines their keys and counters.

A typed key array carries its implementation.  Raw key data names one by its width: the default
implementation when its key data is that wide, else ``philox2x32`` for ``uint32[..., 1]``,
threefry2x32 for ``uint32[..., 2]`` and ``rbg`` for ``uint32[..., 4]``.  The jitted
cores of the samplers take the implementation as a static argument
(``core_jit``), so changing the default never reuses a program traced for another.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ftrans import lax
from ftrans.core import config as _config
from ftrans.core.keys import KeyDtype, is_key
from ftrans.core.operands import shape_of
from ftrans.core.prims import random as R
from ftrans.core.trace import StagingTracer
from ftrans.errors import FtransTypeError, FtransValueError
from ftrans.lax._ops import convert_quiet as _convert  # (no warning for 64-bit dtypes it narrows)
from ftrans.random import _fourwords as _fw
from ftrans.random import _threefry as _tf
from ftrans.transforms.batching import vmap
from ftrans.transforms.jit import jit

__all__ = ["PRNGImpl", "PRNGSpec", "is_builtin", "prngs", "default_prng_impl", "resolve_impl", "impl_of_key",
           "seed", "split", "fold_in", "random_bits", "core_jit", "threefry_prng_impl", "rbg_prng_impl",
           "unsafe_rbg_prng_impl", "philox2x32_prng_impl"]

_U32 = np.dtype(np.uint32)


class PRNGImpl:
    """A PRNG implementation (JAX's ``PRNGImpl``): the key data's shape and the four operations
    ``seed(seed) -> key``, ``split(key, shape) -> keys``, ``fold_in(key, uint32 data) -> key`` and
    ``random_bits(key, bit_width, shape) -> uint bits`` on one key's ``uint32`` data."""

    __slots__ = ("key_shape", "seed", "split", "fold_in", "random_bits", "name", "tag", "_fields", "_hash")

    def __init__(self, key_shape: tuple[int, ...], seed: Callable, split: Callable, random_bits: Callable,
                 fold_in: Callable, name: str = "<unnamed>", tag: str = "?") -> None:
        self.key_shape = tuple(key_shape)
        self.seed, self.split, self.random_bits, self.fold_in = seed, split, random_bits, fold_in
        self.name, self.tag = name, tag
        # equal when every field is (JAX's is a NamedTuple): a user's implementation (``random.key(0,
        # impl=PRNGImpl(...))``) is never mistaken for another of the same name
        self._fields = (self.key_shape, seed, split, random_bits, fold_in, name, tag)
        self._hash = hash(self._fields)

    def __repr__(self) -> str:
        return f"PRNGImpl({self.name!r}, key_shape={self.key_shape})"

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        return self is other or (isinstance(other, PRNGImpl) and other._fields == self._fields)

    def __reduce__(self) -> Any:
        if prngs.get(self.name) is self:  # a built-in one unpickles as itself
            return (_builtin, (self.name,))
        return (PRNGImpl, (self.key_shape, self.seed, self.split, self.random_bits, self.fold_in, self.name,
                           self.tag))


def _builtin(name: str) -> PRNGImpl:
    return prngs[name]


class PRNGSpec:
    """Names a PRNG implementation that has no built-in name (JAX's ``PRNGSpec``): what
    ``random.key_impl`` returns for keys of a user's implementation and ``extend.random.define_prng_impl``
    makes; ``random.key(seed, impl=spec)`` accepts it."""

    __slots__ = ("_impl",)

    def __init__(self, impl: PRNGImpl) -> None:
        self._impl = impl

    def __repr__(self) -> str:
        return f"PRNGSpec({self._impl.name!r})"

    def __str__(self) -> str:
        return str(self._impl)

    def __hash__(self) -> int:
        return hash(self._impl)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PRNGSpec) and self._impl == other._impl


def is_builtin(impl: PRNGImpl) -> bool:
    """Whether ``impl`` is one of ftrans's own implementations (named in ``prngs``)."""
    return prngs.get(impl.name) == impl


# ---------------------------------------------------------------- rbg and unsafe_rbg
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}


def _halves(key):
    return lax.slice(key, (0,), (2,)), lax.slice(key, (2,), (4,))


def _rbg_seed(seed):
    half = _tf.seed_key(seed)
    return lax.concatenate([half, half], 0)


def _rbg_split(key, shape: tuple[int, ...]):
    a, b = _halves(key)
    return lax.concatenate([_tf.split_keys(a, shape), _tf.split_keys(b, shape)], len(shape))


def _rbg_fold_in(key, data):
    a, b = _halves(key)
    return lax.concatenate([_tf.fold_in_key(a, data), _tf.fold_in_key(b, data)], 0)


def _rbg_random_bits(key, bit_width: int, shape: tuple[int, ...]):
    return lax.rng_bit_generator(key, shape, dtype=_UINT[bit_width])[1]


def _unsafe_rbg_split(key, shape: tuple[int, ...]):
    n = math.prod(shape)
    rows = lax.rng_bit_generator(key, (10 * n, 4), dtype=_U32)[1]
    return lax.reshape(lax.slice(rows, (0, 0), (10 * n, 4), (10, 1)), (*shape, 4))


def _unsafe_rbg_fold_in(key, data):
    rows = lax.rng_bit_generator(_rbg_seed(data), (10, 4), dtype=_U32)[1]
    return lax.bitwise_xor(key, lax.reshape(lax.slice(rows, (9, 0), (10, 4)), (4,)))


# ---------------------------------------------------------------- philox2x32
_PHILOX_M = 0xD256D193  # the round multiplier of Random123's Philox-2x32
_PHILOX_W = np.uint32(0x9E3779B9)  # the Weyl increment of the key between rounds


def philox2x32(k, x0, x1):
    """Ten Philox-2x32 rounds on the counters ``(x0, x1)`` under the one-word key ``k`` (all ``uint32``):
    each round multiplies ``x0`` by the round constant to 64 bits, then the new ``x0`` is the high word
    xor ``x1`` xor the key and the new ``x1`` the low word; the key grows by the Weyl constant."""
    for rnd in range(10):
        if rnd:
            k = lax.add(k, _PHILOX_W)
        hi, lo = _tf._mul_wide(x0, _PHILOX_M)
        x0, x1 = lax.bitwise_xor(lax.bitwise_xor(hi, x1), k), lo
    return x0, x1


def _philox_word(key):
    return lax.squeeze(lax.slice(_tf._materialize(key), (0,), (1,)), (0,))


def _philox_seed_words(half):
    """The one-word key of the seed whose threefry2x32 key data (high word, low word) is ``half``: the
    seed's two words enciphered under key 0."""
    w = _convert(half, _U32)
    hi = lax.squeeze(lax.slice(w, (0,), (1,)), (0,))
    lo = lax.squeeze(lax.slice(w, (1,), (2,)), (0,))
    return lax.reshape(philox2x32(np.uint32(0), hi, lo)[0], (1,))


def _philox_seed(seed):
    return _philox_seed_words(_tf.seed_key(seed))


def _philox_split(key, shape: tuple[int, ...]):
    hi, lo = _tf.counters(shape)
    y0 = philox2x32(_philox_word(key), hi, lo)[0]
    return lax.reshape(y0, (*shape, 1))


def _philox_fold_in(key, data):
    return lax.reshape(philox2x32(_philox_word(key), np.uint32(0), data)[0], (1,))


def _philox_random_bits(key, bit_width: int, shape: tuple[int, ...]):
    hi, lo = _tf.counters(shape)
    y0, y1 = philox2x32(_philox_word(key), hi, lo)
    if bit_width == 64:
        u64 = _UINT[64]
        wide = lax.shift_left(_convert(y0, u64), np.asarray(32, u64))
        return lax.bitwise_or(wide, _convert(y1, u64))
    bits = lax.bitwise_xor(y0, y1)
    return bits if bit_width == 32 else _convert(bits, _UINT[bit_width])


threefry_prng_impl = PRNGImpl((2,), _tf.seed_key, _tf.split_keys, _tf.random_bits, _tf.fold_in_key,
                              "threefry2x32", "fry")
rbg_prng_impl = PRNGImpl((4,), _rbg_seed, _rbg_split, _rbg_random_bits, _rbg_fold_in, "rbg", "rbg")
unsafe_rbg_prng_impl = PRNGImpl((4,), _rbg_seed, _unsafe_rbg_split, _rbg_random_bits, _unsafe_rbg_fold_in,
                                "unsafe_rbg", "urbg")
philox2x32_prng_impl = PRNGImpl((1,), _philox_seed, _philox_split, _philox_random_bits, _philox_fold_in,
                                "philox2x32", "phx2")
_t4_seed, _t4_split, _t4_fold_in, _t4_bits = _fw.threefry4x32_ops
threefry4x32_prng_impl = PRNGImpl((4,), lambda s: _t4_seed(_tf.seed_key(s)), _t4_split, _t4_bits, _t4_fold_in,
                                  "threefry4x32", "fry4")
_p4_seed, _p4_split, _p4_fold_in, _p4_bits = _fw.philox4x32_ops
philox4x32_prng_impl = PRNGImpl((2,), lambda s: _p4_seed(_tf.seed_key(s)), _p4_split, _p4_bits, _p4_fold_in,
                                "philox4x32", "phx4")
_SEED_FROM_HALF = {threefry4x32_prng_impl: _t4_seed, philox4x32_prng_impl: _p4_seed}
prngs: dict[str, PRNGImpl] = {i.name: i for i in (threefry_prng_impl, rbg_prng_impl, unsafe_rbg_prng_impl,
                                                  philox2x32_prng_impl, threefry4x32_prng_impl,
                                                  philox4x32_prng_impl)}


def _check_default(value: Any) -> None:
    if not isinstance(value, str) or value not in prngs:
        raise FtransValueError(
            f"config option default_prng_impl must be one of {', '.join(map(repr, prngs))}, got {value!r}")


_config.config.register_validator("default_prng_impl", _check_default)


# ---------------------------------------------------------------- resolving an implementation
def default_prng_impl() -> PRNGImpl:
    """The implementation named by ``config.default_prng_impl`` (JAX's ``jax_default_prng_impl``)."""
    return prngs[_config.config.default_prng_impl]


def resolve_impl(name: str, spec: Any) -> PRNGImpl:
    """The implementation ``spec`` names: None or ``uint32`` (the default), a name, a ``PRNGImpl``, or an
    object with the ``name`` of a known one (JAX's implementation objects, key dtypes and specs)."""
    if spec is None:
        return default_prng_impl()
    if isinstance(spec, PRNGImpl):
        return spec
    if isinstance(spec, str):
        label = spec
    elif isinstance(spec, (np.dtype, type)) and np.dtype(spec) == _U32:
        # ``key_dtype()``'s answer: ftrans keys are raw uint32 data, of the default implementation.
        return default_prng_impl()
    else:
        # JAX's implementation objects have a ``name``; its key dtypes and specs wrap one in ``_impl``.
        inner = getattr(spec, "_impl", None)
        if isinstance(inner, PRNGImpl):  # ftrans's key dtypes and specs (a user's implementation too)
            return inner
        label = getattr(inner if inner is not None else spec, "name", None)
        if not isinstance(label, str):
            raise FtransTypeError(
                f"ftrans.random.{name}: unrecognized type {type(spec).__name__} for specifying a PRNG "
                f"implementation; give one of the names {', '.join(map(repr, prngs))}")
    impl = prngs.get(label)
    if impl is None:
        raise FtransValueError(
            f"ftrans.random.{name}: unrecognized PRNG implementation {label!r}; ftrans implements "
            f"{', '.join(map(repr, prngs))}")
    return impl


_scope = threading.local()


@contextlib.contextmanager
def _impl_scope(impl: PRNGImpl):
    prev = getattr(_scope, "impl", None)
    _scope.impl = impl
    try:
        yield
    finally:
        _scope.impl = prev


def impl_for_width(width: int) -> PRNGImpl | None:
    """The implementation of key data whose trailing axis is ``width`` long (None: no such key)."""
    inner = getattr(_scope, "impl", None)
    if inner is not None and inner.key_shape == (width,):
        return inner
    d = default_prng_impl()
    if d.key_shape == (width,):
        return d
    return {1: philox2x32_prng_impl, 2: threefry_prng_impl, 4: rbg_prng_impl}.get(width)


def impl_of_key(key: Any) -> PRNGImpl:
    if is_key(key):
        return key._impl
    if is_key_value(key):
        return key.dtype._impl
    s = tuple(shape_of(key))
    inner = getattr(_scope, "impl", None)
    if inner is not None and len(inner.key_shape) > 1 and s[len(s) - len(inner.key_shape):] == inner.key_shape:
        return inner  # a user's implementation with a multi-axis key shape, inside its sampler's trace
    impl = impl_for_width(s[-1]) if s else None
    if impl is None:
        raise FtransTypeError(f"ftrans.random: {s} is not the shape of PRNG key data")
    return impl


def concrete_seed(impl: PRNGImpl, half: np.ndarray) -> np.ndarray:
    """``impl``'s key data from the threefry2x32 key data ``half`` of the same (concrete) seed: rbg and
    unsafe_rbg seed by repeating it, philox2x32 enciphers its two words."""
    if impl is philox2x32_prng_impl:
        return np.asarray(_philox_seed_words(half))
    if impl in _SEED_FROM_HALF:
        return np.asarray(_SEED_FROM_HALF[impl](half))
    return half if impl.key_shape == (2,) else np.concatenate([half, half])


# ---------------------------------------------------------------- the operations, by the key's implementation
def seed(impl: PRNGImpl, s: Any) -> Any:
    return impl.seed(s)


def split(key: Any, shape: tuple[int, ...]) -> Any:
    """``shape`` new keys from one key."""
    if is_key_value(key):
        return R.random_split_p.bind(key, shape=tuple(shape))
    return impl_of_key(key).split(key, tuple(shape))


def fold_in(key: Any, data: Any) -> Any:
    if is_key_value(key):
        return R.random_fold_in_p.bind(key, data)
    return impl_of_key(key).fold_in(key, data)


def random_bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    if is_key_value(key):
        return R.random_bits_p.bind(key, bit_width=bit_width, shape=tuple(shape))
    return impl_of_key(key).random_bits(key, bit_width, tuple(shape))


# ---------------------------------------------------------------- key-typed values (the PRNG primitives)
def is_key_value(x: Any) -> bool:
    """Whether ``x`` is a key-typed IR value (a tracer of a ``key<...>`` type, inside a staged program)."""
    return type(getattr(x, "dtype", None)) is KeyDtype


def is_staged(x: Any) -> bool:
    """Whether ``x`` is a value of a staged program (``jit``, ``make_jaxpr``, a control-flow body), where a
    key array is a key-typed value rather than its ``uint32`` data."""
    return isinstance(x, StagingTracer)


def _over_keys(fn: Callable, nlead: int) -> Callable:
    """``fn`` (on one key's data) mapped over ``nlead`` leading key axes (every operand has them)."""
    for _ in range(nlead):
        fn = vmap(fn)
    return fn


def _phys_seed(impl: PRNGImpl, seeds: Any) -> Any:
    with _impl_scope(impl):
        return _over_keys(impl.seed, len(shape_of(seeds)))(seeds)


def _phys_bits(impl: PRNGImpl, keys: Any, *, bit_width: int, shape: tuple) -> Any:
    n = len(shape_of(keys)) - len(impl.key_shape)
    with _impl_scope(impl):
        return _over_keys(lambda k: impl.random_bits(k, bit_width, tuple(shape)), n)(keys)


def _phys_split(impl: PRNGImpl, keys: Any, *, shape: tuple) -> Any:
    n = len(shape_of(keys)) - len(impl.key_shape)
    with _impl_scope(impl):
        return _over_keys(lambda k: impl.split(k, tuple(shape)), n)(keys)


def _phys_fold_in(impl: PRNGImpl, keys: Any, msgs: Any) -> Any:
    n = len(shape_of(keys)) - len(impl.key_shape)
    with _impl_scope(impl):
        return _over_keys(impl.fold_in, n)(keys, msgs)


R.physical.update({R.random_seed_p: _phys_seed, R.random_bits_p: _phys_bits, R.random_split_p: _phys_split,
                   R.random_fold_in_p: _phys_fold_in})


def core_jit(fun: Callable | None = None, *, static_argnums: Any = (), name: str | None = None) -> Any:
    """``jit(fun, static_argnums)`` for a sampler core whose first argument is a key: the key's
    implementation is a static argument too (so a program traced for one is never reused for
    another) and is in force while ``fun`` traces, for the key operations inside it.  ``name`` names
    the call in printed programs (JAX's primitive names for the key operations: ``random_bits``, ...)."""
    if fun is None:
        return functools.partial(core_jit, static_argnums=static_argnums, name=name)

    def traced(*args: Any, _prng_impl: PRNGImpl) -> Any:
        with _impl_scope(_prng_impl):
            return fun(*args)

    traced.__name__ = traced.__qualname__ = name or getattr(fun, "__name__", "core")
    compiled = jit(traced, static_argnums=static_argnums, static_argnames=("_prng_impl",))

    @functools.wraps(fun)
    def call(k: Any, *args: Any) -> Any:
        if is_key(k):  # a typed key: its own implementation, whatever its data's width
            return compiled(k._base_array, *args, _prng_impl=k._impl)
        return compiled(k, *args, _prng_impl=impl_of_key(k))

    return call
